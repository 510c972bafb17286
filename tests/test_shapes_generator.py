"""The held-out shapes' service processes (solvers.simulation.shapes, bench.accuracy.shapes):
deterministic, and their moments against closed forms -- the MMPP's mean, run lengths and
index of dispersion (KPC-Toolbox's MMPP(2) formula), the lognormal's and Pareto's mean and SCV
(Johnson, Kotz and Balakrishnan 1994), the AR(1) copula's lag-1 correlation of the normal
scores (Cario and Nelson 1996); a class's own process in the physical simulator."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtri
from scipy.stats import lognorm

from bench.accuracy import shapes as bench_shapes
from solvers.processes import MAP
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical
from solvers.simulation.shapes import CorrelatedService, mmpp_runs


def test_shape_list_is_fixed_and_large_enough():
    names = [s.name for s in bench_shapes.SHAPES]
    seeds = [s.seed for s in bench_shapes.SHAPES]
    assert len(names) >= 30 and len(set(names)) == len(names) and len(set(seeds)) == len(seeds)
    assert set(bench_shapes.QUICK) <= set(names)
    families = {s.process.split("-")[0] for s in bench_shapes.SHAPES}
    assert {"mmpp2", "mmpp3", "lognormal", "pareto"} <= families
    assert any(s.cls for s in bench_shapes.SHAPES) and any(s.second for s in bench_shapes.SHAPES)
    for s in bench_shapes.SHAPES:
        cores = [t.cores for t in bench_shapes.network(s, 3).tiers]
        assert 2 <= len(cores) <= 3 and all(1 <= c <= 8 for c in cores)


def test_networks_are_deterministic():
    for s in bench_shapes.SHAPES:
        a, b = bench_shapes.network(s, 5), bench_shapes.network(s, 5)
        np.testing.assert_array_equal(a.demands, b.demands)
        for ta, tb in zip(a.tiers, b.tiers):
            if isinstance(ta.service, MAP):
                np.testing.assert_array_equal(ta.service.D0, tb.service.D0)
            else:
                assert ta.service == tb.service
    proc = CorrelatedService("pareto", 0.01, 2.5, 0.9)
    np.testing.assert_array_equal(proc.sample(1000, np.random.default_rng(3)),
                                  proc.sample(1000, np.random.default_rng(3)))


@pytest.mark.parametrize("levels,runs", [((1.0, 5.0), (200.0, 50.0)),
                                         ((1.0, 8.0), (2000.0, 300.0)),
                                         ((0.5, 1.5, 6.0), (60.0, 60.0, 20.0))])
def test_mmpp_runs_closed_forms(levels, runs):
    p = mmpp_runs(0.02, levels, runs)
    assert p.mean == pytest.approx(0.02, rel=1e-12)
    lam = np.diag(p.D1)
    leave = -np.diag(p.D0) - lam
    # services per sojourn: completions at rate lam_i while leaving at rate leave_i
    np.testing.assert_allclose(lam / leave, runs, rtol=1e-12)
    np.testing.assert_allclose(lam[0] / lam, np.array(levels) / levels[0], rtol=1e-12)
    if len(levels) == 2:                       # KPC-Toolbox's IDC of an MMPP(2)
        theta = p.theta
        alpha = leave.sum()
        idc = 1 + 2 * theta[0] * theta[1] * (lam[0] - lam[1]) ** 2 / (p.rate * alpha)
        assert p.idc == pytest.approx(idc, rel=1e-9)
    x = p.sample(100_000, np.random.default_rng(1))
    # the sample mean of a correlated sequence: its standard error from I (Var(sum) ~ I n m^2)
    se = np.sqrt(p.idc / x.size) * p.mean
    assert abs(x.mean() - p.mean) < 4 * se


@pytest.mark.parametrize("marginal,shape,rho", [("lognormal", 4.0, 0.0),
                                                ("lognormal", 4.0, 0.95),
                                                ("pareto", 2.5, 0.0), ("pareto", 2.5, 0.9)])
def test_correlated_service_moments(marginal, shape, rho):
    p = CorrelatedService(marginal, 0.05, shape, rho)
    x = p.sample(200_000, np.random.default_rng(7))
    scv = shape if marginal == "lognormal" else 1 / (shape * (shape - 2))
    assert p.scv == pytest.approx(scv)
    # the mean within 5 standard errors, inflated by the AR(1) sum of correlations
    se = np.sqrt(scv) * p.mean / np.sqrt(x.size) * np.sqrt((1 + rho) / (1 - rho))
    assert abs(x.mean() - p.mean) < 5 * se
    # the normal scores are the AR(1): lag-1 correlation rho
    if marginal == "lognormal":
        s2 = np.log1p(shape)
        u = lognorm(np.sqrt(s2), scale=p.mean * np.exp(-s2 / 2)).cdf(x)
    else:
        xm = p.mean * (shape - 1) / shape
        u = 1 - (xm / x) ** shape
    z = ndtri(np.clip(u, 1e-15, 1 - 1e-15))
    assert np.corrcoef(z[:-1], z[1:])[0, 1] == pytest.approx(rho, abs=0.01)
    assert z.std() == pytest.approx(1.0, abs=0.03)


def test_correlated_service_rejects_bad_parameters():
    with pytest.raises(ValueError, match="marginal"):
        CorrelatedService("weibull", 1.0, 2.0)
    with pytest.raises(ValueError, match="shape: must be a finite number > 2"):
        CorrelatedService("pareto", 1.0, 2.0)
    with pytest.raises(ValueError, match="rho"):
        CorrelatedService("lognormal", 1.0, 2.0, 1.0)
    with pytest.raises(ValueError, match="jumps"):
        mmpp_runs(1.0, (1.0, 2.0), (5.0, 5.0), [[0.5, 0.5], [1.0, 0.0]])


def test_class_service_draws_its_own_sequence():
    """One class's services from its own heavy-tailed process, the other's exponential: the
    measured mean service per class is each class's own mean times its multiplier."""
    own = CorrelatedService("lognormal", 0.004, 4.0, 0.5)
    net = PhysicalNetwork((Tier("web", 2, 0.003),
                           Tier("db", 1, 0.002, multipliers=(1.0, 2.0),
                                class_service=(None, own))),
                          ("a", "b"), (0.5, 0.5), 0.5, 10)
    np.testing.assert_allclose(net.demands, [[0.003, 0.003], [0.002, 0.008]])
    res = simulate_physical(net, 1000.0, warmup=50.0, replications=2, seed=5)
    svc = res.service_time[1]
    assert svc[0].mean == pytest.approx(0.002, rel=0.05)
    assert svc[1].mean == pytest.approx(0.008, rel=0.1)
