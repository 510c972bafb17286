"""The wait law of an exponential tier behind a bursty one (solvers.response_time.waves)."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from solvers.departures import DepartureMAP, map_m_c_mean
from solvers.processes import MAP
from solvers.response_time import sojourn_cdf
from solvers.response_time.waves import map_m_c_wait

#: arrivals alternating between runs at 10/s and at 1/s (I ~ 8)
RUNS = MAP([[-10.1, 0.1], [0.05, -1.05]], [[10.0, 0.0], [0.0, 1.0]])


def _fed(proc: MAP) -> DepartureMAP:
    return DepartureMAP(proc.D0, proc.D1, proc.theta)


def _erlang_c(lam: float, mean: float, c: int) -> float:
    """P(wait) in an M/M/c queue (closed form)."""
    a = lam * mean
    head = sum(a ** k / math.factorial(k) for k in range(c))
    tail = a ** c / (math.factorial(c) * (1 - a / c))
    return tail / (head + tail)


@pytest.mark.parametrize("lam, mean, c", [(0.5, 1.0, 1), (2.5, 1.0, 4), (700.0, 0.02, 16)])
def test_poisson_arrivals_give_the_mmc_wait(lam, mean, c):
    """Poisson arrivals see time averages: ``K`` is 0 with 1 - Erlang C, else geometric with
    ratio ``rho``, and the sojourn's law is M/M/c's (``P(W > t) = C e^{-(c mu - lam) t}``)."""
    wait = map_m_c_wait(_fed(MAP.exponential(1.0 / lam)), mean, c)
    C, rho = _erlang_c(lam, mean, c), lam * mean / c
    k = np.arange(1, wait.pmf.shape[0])
    assert wait.rate == pytest.approx(c / mean)
    assert wait.no_wait() == pytest.approx(1.0 - C, rel=1e-9)
    assert wait.pmf[1:60] == pytest.approx(C * (1 - rho) * rho ** (k[:59] - 1), rel=1e-7, abs=1e-15)
    t = np.linspace(0.0, 20.0 * mean, 9)
    mu, g = 1.0 / mean, c / mean - lam          # M/M/c sojourn: W = 0 w.p. 1 - C, else Exp(g)
    tail = (1 - C) * np.exp(-mu * t) + C * (g * np.exp(-mu * t) - mu * np.exp(-g * t)) / (g - mu)
    assert sojourn_cdf(wait, mean, t) == pytest.approx(1.0 - tail, abs=1e-7)


@pytest.mark.parametrize("c, load", [(1, 0.5), (3, 0.3), (3, 0.7)])
def test_the_mean_wait_is_the_queues_mean_by_littles_law(c, load):
    """Two computations of one queue: the law's mean wait against
    :func:`solvers.departures.map_m_c_mean`'s mean number (``L = lambda (W + S)``)."""
    dep = _fed(RUNS.scaled(1.0 / (load * c)))
    wait = map_m_c_wait(dep, 1.0, c)
    assert wait.pmf.sum() == pytest.approx(1.0)
    assert dep.rate * (wait.mean() + 1.0) == pytest.approx(map_m_c_mean(dep, 1.0, c), rel=1e-8)


def _simulated_waits(proc: MAP, mean: float, c: int, n: int, seed: int) -> np.ndarray:
    """FCFS waits of ``n`` jobs arriving by ``proc`` at ``c`` exponential servers (the
    ``c`` next free times in a heap; a job starts at the earliest)."""
    rng = np.random.default_rng(seed)
    gaps, _ = proc.intervals(n, rng, int(rng.choice(proc.order, p=proc.embedded)))
    arrive = np.cumsum(gaps)
    service = rng.exponential(mean, n)
    free = [0.0] * c
    out = np.empty(n)
    for i in range(n):
        start = max(arrive[i], heapq.heappop(free))
        out[i] = start - arrive[i]
        heapq.heappush(free, start + service[i])
    return out[n // 10:]


def _wait_quantile(wait, p: float) -> float:
    """``P(W <= t) = p`` for a mixture of Erlangs, by bisection on its Poisson sums."""
    from scipy import special

    k = wait.offset + np.arange(wait.pmf.shape[0])
    on = k > 0
    lo, hi = 0.0, 1.0
    def above(t: float) -> float:
        return float(wait.pmf[on] @ special.gammaincc(k[on], wait.rate * t))
    while above(hi) > 1.0 - p:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if above(mid) > 1.0 - p else (lo, mid)
    return 0.5 * (lo + hi)


@pytest.mark.slow
@pytest.mark.parametrize("c", [1, 4])
def test_bursty_arrivals_match_a_seeded_simulation(c):
    """The law's quantiles of the wait against a seeded FCFS simulation of the MAP/M/c
    queue at 60% load (400,000 jobs; its runs last 10-20 s, so its quantiles carry a few
    percent of noise), and far above the Poisson queue's of the same rate
    (what a product-form law would give)."""
    arrivals = RUNS.scaled(1.0 / (0.6 * c))
    wait = map_m_c_wait(_fed(arrivals), 1.0, c)
    sim = _simulated_waits(arrivals, 1.0, c, 400_000, seed=3)
    poisson = map_m_c_wait(_fed(MAP.exponential(1.0 / arrivals.rate)), 1.0, c)
    for p in (0.95, 0.99):
        model = _wait_quantile(wait, p)
        assert model == pytest.approx(float(np.quantile(sim, p)), rel=0.08)   # 2-5% seen
        assert model > 2.0 * _wait_quantile(poisson, p)


def test_an_unstable_wave_queue_is_refused_naming_the_rates():
    with pytest.raises(ValueError, match="not stable"):
        map_m_c_wait(_fed(MAP.exponential(0.5)), 1.0, 2)
    with pytest.raises(ValueError, match="mean, cores"):
        map_m_c_wait(_fed(MAP.exponential(2.0)), 0.0, 1)


@pytest.mark.slow
def test_an_open_route_point_takes_the_per_tier_chains_law():
    """System (d) of bench.accuracy.percentiles past 1,000 users (``map-fpm``): its
    quantiles are the per-tier chains' law (the wave queues' wait behind the bursty app),
    not the exponential network's scaled to the mean, which is far lighter; no flag."""
    from bench.accuracy.percentiles import SYSTEMS
    from solvers.response_time.bursty import decomposed_quantiles

    model = SYSTEMS["d"].model()
    point = model.at(1500)
    assert point.model == "map-fpm"
    q = model.quantiles(point)
    assert not [f for f in model.flags if "quantiles on the MAP network" in f]
    procs, scales = model._map_law_args()
    direct, _ = decomposed_quantiles(procs, [int(c) for c in model.servers], model.solver_think,
                                     1500, scales, model._wait_share, model.quantile_levels,
                                     residence=point.residence, arrival=model._arrival)
    assert q == pytest.approx(direct, rel=1e-12)
    p99 = model.quantile_levels.index(0.99)
    scaled = model._law_quantiles(1500)
    ratio = point.response / scaled[:, -1]
    assert np.all(q[:, p99] > 1.15 * scaled[:, p99] * ratio)     # the bursty tail
