"""Processor-sharing tiers' sojourn laws (solvers.response_time.ps) against closed forms and a
seeded event simulation; the ``disciplines`` setting and the model's use of it."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from solvers.open import solve_open_tiers
from solvers.response_time import response_time_quantiles
from solvers.response_time.arrival import ArrivalLaw
from solvers.response_time.open_law import open_quantiles
from solvers.response_time.ps import conditional_moments, open_found, ps_sojourn
from streams.core.config import ConfigError, load_config
from streams.predict.model import SystemModel
from streams.predict.open_model import open_point


def simulate_closed_ps(demands, mix, cores, population, think, completions, seed):
    """Per class the response times of a closed PS tier: ``population`` users think an
    exponential ``think``, send a request of class ``k`` (drawn with ``mix``) of exponential
    work of mean ``demands[k]``; with ``n`` present each is served at ``min(1, cores / n)``.
    The first 5% of the completions are left out (warm-up)."""
    rng = np.random.default_rng(seed)
    D, p = np.asarray(demands, float), np.asarray(mix, float)
    thinking = list(rng.exponential(think, population))
    heapq.heapify(thinking)
    now, work, cls, start = 0.0, [], [], []
    out = [[] for _ in D]
    warm, done = completions // 20, 0
    while done < completions + warm:
        n = len(work)
        r = min(1.0, cores / n) if n else 0.0
        t_done = now + min(work) / r if n else math.inf
        t_arr = thinking[0] if thinking else math.inf
        t = min(t_done, t_arr)
        work = [w - (t - now) * r for w in work]
        now = t
        if t_arr <= t_done:
            heapq.heappop(thinking)
            k = int(rng.choice(len(D), p=p))
            work.append(rng.exponential(D[k]))
            cls.append(k)
            start.append(now)
            continue
        i = int(np.argmin(work))
        if done >= warm:
            out[cls[i]].append(now - start[i])
        done += 1
        del work[i], cls[i], start[i]
        heapq.heappush(thinking, now + rng.exponential(think))
    return [np.array(o) for o in out]


@pytest.mark.parametrize("rho", [0.3, 0.7])
@pytest.mark.parametrize("x", [0.2, 1.0, 5.0])
def test_mm1_ps_conditional_mean_and_variance(rho, x):
    """Coffman, Muntz and Trotter (1970): at M/M/1-PS (mean work 1) a request of work ``x``
    stays ``x / (1 - rho)`` on average, with variance ``2 rho x / (1 - rho)^3 - 2 rho (1 -
    e^{-(1 - rho) x}) / (1 - rho)^4``."""
    mean, var = conditional_moments(x, 1.0, 1, open_found(rho, 1.0, 1), rho)
    a = 1.0 - rho
    assert mean == pytest.approx(x / a, rel=1e-6)
    assert var == pytest.approx(2 * rho * x / a ** 3 - 2 * rho * (1 - math.exp(-a * x)) / a ** 4,
                                rel=1e-6)


@pytest.mark.parametrize("exact", [True, False])
def test_open_ps_class_means_are_the_symmetric_queues(exact):
    """Every class is stretched alike: ``D_k / (1 - rho)`` on one core; on two cores
    ``D_k (1 + W / Dbar)`` with M/M/2's wait (the open tiers' ``ps`` read-back)."""
    D, p = np.array([0.01, 0.1, 0.03]), np.array([0.3, 0.4, 0.3])
    rate = 6.0
    law = ps_sojourn(D, p, 1, open_found(rate, p @ D, 1), rate, exact=exact)
    assert law.exact is exact
    assert law.mean == pytest.approx(D / (1 - rate * (p @ D)), rel=1e-6)
    two = ps_sojourn(D, p, 2, open_found(15.0, p @ D, 2), 15.0, exact=exact)
    ref = solve_open_tiers(15.0 * p, D[None, :], [2], ps=[True]).response_time
    assert two.mean == pytest.approx(ref, rel=1e-6)
    fcfs = solve_open_tiers(15.0 * p, D[None, :], [2]).response_time
    assert abs(fcfs[0] - ref[0]) / ref[0] > 0.2           # the disciplines differ


def test_single_class_ps_mean_is_the_fcfs_mean():
    """One class of exponential work: the count is the same birth-death process under both
    disciplines, so the mean sojourn is too (the laws differ)."""
    args = (np.array([0.1, 0.05]), np.array([2.0, 1.0]), 0.5, 8)
    fcfs = response_time_quantiles(*args, levels=(0.5, 0.99))
    ps = response_time_quantiles(*args, levels=(0.5, 0.99), ps=np.array([True, False]))
    assert ps.mean == pytest.approx(fcfs.mean, rel=1e-3)
    assert abs(ps.quantiles[0, 1] - fcfs.quantiles[0, 1]) / fcfs.quantiles[0, 1] > 0.02


def test_no_think_time_keeps_every_job_at_the_tier():
    """``N`` jobs and nothing else: each is served at ``c / N``, the sojourn is exponential
    of mean ``D N / c``; a departing job is back at once."""
    D, N, c = 0.2, 5, 2
    res = response_time_quantiles(np.array([D]), np.array([float(c)]), 0.0, N,
                                  levels=(0.5, 0.95), ps=np.array([True]))
    assert res.mean[0] == pytest.approx(D * N / c, rel=1e-6)
    assert res.quantiles[0] == pytest.approx(-np.log([0.5, 0.05]) * D * N / c, rel=2e-3)


def test_lattice_masses_keep_the_mean():
    law = ps_sojourn(np.array([0.05, 0.4]), np.array([0.7, 0.3]), 2,
                     np.array([0.3, 0.3, 0.2, 0.1, 0.1]), lambda j: (5 - j) / 0.5)
    h = float(law.mean.max() + 12 * np.sqrt(law.variance.max())) / 1024
    m = law.masses(h, 1024)
    assert m.sum(axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    assert (m @ (np.arange(1024) * h)) == pytest.approx(law.mean, rel=1e-4)


@pytest.mark.slow
def test_two_class_ps_tier_quantiles_against_simulation():
    """A closed 2-core PS tier, a 50-ms and a 400-ms class: the exact chain's p95 and p99
    within 10% of 30,000 simulated requests'; the FCFS law misses the short class's."""
    D, p, c, N, Z = np.array([0.05, 0.4]), np.array([0.7, 0.3]), 2, 6, 0.5
    sim = simulate_closed_ps(D, p, c, N, Z, 30_000, seed=1)
    args = (np.array([p @ D]), np.array([float(c)]), Z, N, D[None, :])
    ps = response_time_quantiles(*args, levels=(0.95, 0.99), ps=np.array([True]), mix=p)
    fcfs = response_time_quantiles(*args, levels=(0.95, 0.99))
    for k in range(2):
        truth = np.quantile(sim[k], [0.95, 0.99])
        assert ps.quantiles[k] == pytest.approx(truth, rel=0.10)
        assert ps.mean[k] == pytest.approx(sim[k].mean(), rel=0.05)
    assert fcfs.quantiles[0, 0] > 1.3 * np.quantile(sim[0], 0.95)


def test_aggregated_chain_is_close_to_the_exact_one():
    """Past the exact chain's budget the others are one class of the mix's mean work: the
    means stay exact, the quantiles move a little (measured here: 3% at p99)."""
    D, p, rate = np.array([0.01, 0.1, 0.03]), np.array([0.3, 0.4, 0.3]), 6.0
    found = open_found(rate, p @ D, 1)
    exact = [d.quantile([0.95, 0.99]) for d in ps_sojourn(D, p, 1, found, rate).distributions()]
    agg = [d.quantile([0.95, 0.99]) for d in
           ps_sojourn(D, p, 1, found, rate, exact=False).distributions()]
    for e, a in zip(exact, agg):
        assert a == pytest.approx(e, rel=0.05)


def test_open_law_and_the_models_open_route():
    """The open law's means are the open tiers' with ``ps``; the model's open points read
    it where a tier is ``ps`` (the short class far below its FCFS quantile)."""
    D = np.array([[0.01, 0.1, 0.03], [0.005, 0.005, 0.005]])
    p = np.array([0.3, 0.4, 0.3])
    q, mean = open_quantiles(6.0, p, D, np.array([1.0, 2.0]), np.array([True, False]),
                             (0.5, 0.95))
    ref = solve_open_tiers(6.0 * p, D, [1, 2], ps=[True, False]).response_time
    assert mean == pytest.approx(ref, rel=1e-3)
    kw = dict(tiers=["cpu", "net"], classes=["a", "b", "c"], D_mc=D, mix=p,
              servers=np.array([1.0, 2.0]), think_time=0.0, sla=np.full(3, np.inf),
              processes=None, map_limit=100)
    ps_model = SystemModel(**kw, ps=np.array([True, False]), ps_law=np.array([True, False]))
    point, _ = open_point(ps_model, 6.0)
    assert point.response == pytest.approx(ref, rel=1e-9)
    fcfs_model = SystemModel(**kw)
    q_ps = ps_model.quantiles(point)
    q_fcfs = fcfs_model.quantiles(open_point(fcfs_model, 6.0)[0])
    assert q_ps[0, ps_model.quantile_levels.index(0.95)] == pytest.approx(q[0, 1], rel=1e-9)
    assert q_ps[0, 2] < 0.7 * q_fcfs[0, 2]
    back = SystemModel.from_dict(ps_model.to_dict())
    assert back.ps_law.tolist() == [True, False]
    decided = SystemModel(**kw, ps=np.array([True, False]))     # the class split alone
    assert open_point(decided, 6.0)[0].response == pytest.approx(
        open_point(fcfs_model, 6.0)[0].response, rel=1e-12)


def test_unstable_open_tier_gives_inf():
    q, mean = open_quantiles(20.0, np.array([1.0]), np.array([[0.1]]), np.array([1.0]),
                             np.array([True]), (0.95,))
    assert np.isinf(q).all() and np.isinf(mean).all()


def test_disciplines_setting(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[systems.shop]\ntiers = ["web", "db"]\ndisciplines = { db = "ps" }\n')
    assert dict(load_config(path, env={}).system("shop").disciplines) == {"db": "ps"}
    path.write_text('[systems.shop]\ntiers = ["web", "db"]\ndisciplines = { db = "lifo" }\n')
    with pytest.raises(ConfigError, match=r"^systems\.shop\.disciplines\.db: must be one of "
                                          r"'fcfs', 'ps', got 'lifo'"):
        load_config(path, env={})
    path.write_text('[systems.shop]\ntiers = ["web", "db"]\ndisciplines = { cache = "ps" }\n')
    with pytest.raises(ConfigError, match=r"^systems\.shop\.disciplines\.cache: not one of"):
        load_config(path, env={})
    path.write_text('[systems.shop]\ndisciplines = "ps"\n')
    with pytest.raises(ConfigError, match=r"^systems\.shop\.disciplines: must be a table"):
        load_config(path, env={})


def test_ps_sojourn_refuses_bad_input():
    with pytest.raises(ValueError, match="demands"):
        ps_sojourn(np.array([-1.0]), np.array([1.0]), 1, np.ones(2), 1.0)
    with pytest.raises(ValueError, match="mix"):
        ps_sojourn(np.array([1.0]), np.array([1.0, 1.0]), 1, np.ones(2), 1.0)
    with pytest.raises(ValueError, match="found"):
        ps_sojourn(np.array([1.0]), np.array([1.0]), 1, np.array([np.nan]), 1.0)
    with pytest.raises(ValueError, match="unstable"):
        open_found(2.0, 1.0, 1)
    with pytest.raises(ValueError, match="mix"):
        response_time_quantiles(np.array([0.1]), np.array([1.0]), 1.0, 3,
                                np.array([[0.1, 0.2]]), ps=np.array([True]))


def test_arrival_marginal_of_a_single_tier_with_think_time():
    """The entrance law the closed PS tier uses is the arrival theorem's marginal (checked
    against the product form of one tier and a think time directly)."""
    D, Z, N, c = 0.1, 0.5, 5, 2
    m = ArrivalLaw(np.array([D]), np.array([float(c)]), Z).marginals(N)
    j = np.arange(N)
    w = np.array([D ** i / math.prod(min(k, c) for k in range(1, i + 1))
                  * Z ** (N - 1 - i) / math.factorial(N - 1 - i) for i in j])
    found = np.zeros(N)
    found[m.offset[0]:m.offset[0] + m.pmf[0].size] = m.pmf[0]
    assert found == pytest.approx(w / w.sum(), abs=1e-12)
