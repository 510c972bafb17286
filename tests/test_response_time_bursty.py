"""Sojourn laws of bursty tiers beyond the exact chain (solvers.response_time.bursty): the
M/M/c sojourn time (Kleinrock 1975), a one-core MAP repairman's passage time by ``expm``,
Little's law on a multi-core per-job station, and the simulated physical system (slow)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, sparse

from solvers.processes import MAP
from solvers.response_time.bursty import bursty_tier, decomposed_quantiles
from tests.test_response_time import _map_repairman_passage_cdf

LEVELS = (0.5, 0.9, 0.95, 0.99)
BURSTY = MAP([[-3.5, 2.0], [2.0, -2.5]], [[1.5, 0.0], [0.0, 0.5]])


def _law(tier, scale=1.0, grid=2048):
    """The tier's sojourn law on a lattice: ``(h, mass)``."""
    mean, var = tier.moments(1.0, scale)
    h = (mean + 14 * math.sqrt(var)) / grid
    phi = tier.transform(h, grid, 1.0, np.array([scale]))[0]
    return h, np.maximum(np.fft.irfft(phi, n=grid), 0.0)


def _quantile(h, mass, q):
    cdf = np.cumsum(mass)
    x = (np.arange(cdf.shape[0]) + 0.5) * h
    return float(np.interp(q, cdf, x))


@pytest.mark.parametrize("c, rho", [(2, 0.6), (4, 0.85)])
def test_mmc_sojourn_from_the_per_job_station(c, rho):
    mu = 1.0
    lam = rho * c * mu
    N = 400                                  # a buffer the queue never reaches: open M/M/c
    tier = bursty_tier(MAP.exponential(1.0 / mu), c, N, np.full(N, lam))
    a = lam / mu
    j = np.arange(N)
    logp = np.where(j < c, j * math.log(a) - np.array([math.lgamma(x + 1) for x in j]),
                    j * math.log(a) - math.lgamma(c + 1) - (j - c) * math.log(c))
    p = np.exp(logp - logp.max())
    erlang_c = p[c:].sum() / p.sum()
    alpha = c * mu - lam

    def survival(t):                         # Kleinrock 1975: (1 - C) Exp(mu) + C hypoexp
        hypo = (alpha * math.exp(-mu * t) - mu * math.exp(-alpha * t)) / (alpha - mu)
        return (1 - erlang_c) * math.exp(-mu * t) + erlang_c * hypo

    h, mass = _law(tier)
    for q in LEVELS:
        exact = optimize.brentq(lambda t: 1.0 - survival(t) - q, 0.0, 500.0)
        assert _quantile(h, mass, q) == pytest.approx(exact, rel=3e-3)


def test_one_core_bursty_repairman_is_its_passage_time():
    proc = BURSTY.scaled(0.2)
    N, Z = 8, 1.0
    q, mean = decomposed_quantiles([proc], [1], Z, N, np.ones((1, 1)), np.ones((1, 1)),
                                   LEVELS)
    assert np.allclose(_map_repairman_passage_cdf(proc, N, Z, q[0]), LEVELS, atol=2e-3)


@pytest.mark.parametrize("c", [2, 3])
def test_per_job_station_sojourn_mean_is_littles(c):
    proc = BURSTY.scaled(0.1 * c)
    N, Z = 24, 1.0
    lam = (N - np.arange(N)) / Z
    tier = bursty_tier(proc, c, N, lam)
    h, mass = _law(tier)
    law_mean = h * float(mass @ np.arange(mass.shape[0]))
    # Little: the same station's chain solved densely, R = E[n] / X
    from solvers.decomposition.stations import level_states, per_job_transitions
    tr = per_job_transitions(N, proc, c)
    rate = tr.with_arrivals(np.append(lam, 0.0))
    S = tr.level.shape[0]
    Q = sparse.csr_array((rate, (tr.src, tr.dst)), shape=(S, S)).toarray()
    Q -= np.diag(Q.sum(axis=1))
    pi = np.linalg.lstsq(np.vstack([Q.T, np.ones(S)]), np.r_[np.zeros(S), 1.0],
                         rcond=None)[0]
    X = float(pi @ np.append(lam, 0.0)[tr.level])
    R = float(pi @ tr.level) / X
    assert law_mean == pytest.approx(R, rel=2e-3)
    assert tier.moments(1.0, 1.0)[0] == pytest.approx(R, rel=1e-9)
    assert level_states(proc, c) == tier.A0.shape[0]


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="arrival"):
        bursty_tier(BURSTY, 2, 5, np.ones(3))
    with pytest.raises(ValueError, match="population"):
        bursty_tier(BURSTY, 2, 0, np.ones(0))
    with pytest.raises(ValueError, match="cores"):
        bursty_tier(BURSTY, 1000, 5, np.ones(5))


@pytest.mark.slow
def test_a_multi_core_bursty_model_takes_the_per_tier_law():
    from bench.accuracy.percentiles import SYSTEMS
    model = SYSTEMS["b-bursty"].model()
    point = model.at(200)
    q = model.quantiles(point)
    assert point.model == "map-fes"
    assert not any(f.startswith("quantiles on the MAP network") for f in model.flags)
    assert np.all(np.diff(q, axis=1) > 0)
    # a bursty database's tail: far past an exponential tail at the mean
    levels = model.quantile_levels
    assert np.all(q[:, levels.index(0.99)] > -point.response * math.log(0.01))


@pytest.mark.slow
def test_b_bursty_p95_against_the_simulated_physical_system():
    from bench.accuracy.percentiles import SYSTEMS
    from solvers.simulation.physical import simulate_physical
    system = SYSTEMS["b-bursty"]
    model = system.model()
    n = int(round(0.9 * model.knee()))
    sim = simulate_physical(system.network(n), 150.0, warmup=20.0, replications=3, seed=7,
                            quantiles=(0.95,))
    q = model.quantiles(model.at(n))[:, model.quantile_levels.index(0.95)]
    for c, est in enumerate(sim.response_time_quantiles):
        assert abs(q[c] - est[0].mean) <= 0.2 * est[0].mean + est[0].half_width
