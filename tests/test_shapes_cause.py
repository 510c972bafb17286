"""The held-out shapes' cause breakdown (bench.accuracy.shapes_cause) and the shapes bench's
reuse of a stored truth: the copula's true ``I`` against the lognormal closed form (Cario and
Nelson 1996 with Mehler 1866's expansion; slow: a fine grid and hundreds of Hermite terms), the
true-parameter models' routes, and a run that takes its truth from a results row simulates
no truth probe."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.accuracy import shapes, shapes_cause
from solvers.simulation.shapes import CorrelatedService


@pytest.mark.slow
@pytest.mark.parametrize("scv, rho", [(4.0, 0.95), (9.0, 0.995)])
def test_copula_idc_matches_the_lognormal_closed_form(scv, rho):
    # lognormal scores exp(sigma Z): the lag-j correlation (exp(sigma^2 rho^j) - 1) /
    # (exp(sigma^2) - 1), so I = SCV + 2 sum_j (exp(sigma^2 rho^j) - 1)
    s2 = math.log1p(scv)
    j = np.arange(1, 400_000)
    closed = scv + 2.0 * float(np.sum(np.expm1(s2 * rho ** j)))
    got = shapes_cause.copula_idc(CorrelatedService("lognormal", 1.0, scv, rho))
    assert got == pytest.approx(closed, rel=1e-5)


@pytest.mark.parametrize("marginal, shape", [("lognormal", 4.0), ("pareto", 2.5)])
def test_copula_idc_of_an_iid_sequence_is_its_scv(marginal, shape):
    proc = CorrelatedService(marginal, 1.0, shape, 0.0)
    assert shapes_cause.copula_idc(proc) == pytest.approx(proc.scv, rel=2e-3)


@pytest.mark.slow
def test_copula_idc_grows_with_the_correlation():
    vals = [shapes_cause.copula_idc(CorrelatedService("pareto", 1.0, 2.5, rho), terms=100)
            for rho in (0.0, 0.5, 0.9)]
    assert vals[0] < vals[1] < vals[2]


def test_true_models_take_the_true_demands_and_process_on_each_route():
    shape = next(s for s in shapes.SHAPES if s.name == "mmpp2-medium-B")
    net = shapes.network(shape, 1)
    exp = shapes_cause.true_model(shape, "exp")
    gen = shapes_cause.true_model(shape, "gen")
    mapm = shapes_cause.true_model(shape, "map")
    for m in (exp, gen, mapm):
        np.testing.assert_allclose(m.D_mc, net.demands)
        assert list(m.servers) == [4.0, 2.0, 4.0] and m.think_time == shapes.THINK_S
        assert np.all(m.sla == shapes.sla(shape))
    assert exp.processes is None and exp.scv is None
    proc = shapes.PROCESSES["mmpp2-medium"]
    np.testing.assert_allclose(gen.scv, [1.0, 1.0, proc.scv])
    assert [p.order for p in mapm.processes] == [1, 1, 2]
    assert mapm.processes[2].idc == pytest.approx(proc.idc)


def test_a_stored_truth_is_reused_and_settings_reach_the_config(monkeypatch):
    shape = next(s for s in shapes.SHAPES if s.name == "mmpp2-fast-A")

    def no_probe(*_args, **_kwargs):
        raise AssertionError("a truth probe was simulated")

    monkeypatch.setattr(shapes, "_probe", no_probe)
    monkeypatch.setattr(shapes, "truth_capacity", no_probe)
    truth = {"capacity_truth": 68.7, "probes": [], "R_truth": 0.09, "R_truth_hw": 0.001,
             "R_truth_class": [0.08, 0.11]}
    out = shapes.run_shape(shape, 0.5, 100, truth, {"bursty_scv": "response"})
    assert out["capacity_truth"] == 68.7 and out["users"] == round(0.4 * 68.7)
    assert out["R_truth"] == 0.09 and out["R_truth_class"] == [0.08, 0.11]
    assert out["demand_true"] == pytest.approx(0.7 * 0.7 * 0.040 + 0.3 * 1.7 * 0.040)
    cfg = shapes.config(shape, {"bursty_scv": "response"}).systems["sys"]
    assert cfg.bursty_scv == "response" and shapes.config(shape).systems["sys"].bursty_scv \
        == "response_idc"


def test_settings_name_a_system_setting_and_read_numbers():
    assert shapes._settings(["bursty_scv=response", "map_max_population=500"]) == {
        "bursty_scv": "response", "map_max_population": 500}
    for bad in ("bursty_scv", "no_such_setting=1"):
        with pytest.raises(SystemExit, match=f"--set: .*{bad!r}"):
            shapes._settings([bad])


def test_window_mean_reads_the_tiers_mean_service_from_the_windows():
    # a fast-switching MMPP(2) (I 7.3): five minutes of windows hold ~2,000 services, whose
    # mean is within a few per cent of the true one (0.040 s at system A's database)
    shape = next(s for s in shapes.SHAPES if s.name == "mmpp2-fast-A")
    got = shapes_cause.window_mean(shape, 27, 5.0)
    assert got == pytest.approx(0.040, rel=0.05)
    assert got != shapes_cause.window_mean(shape, 27, 4.0)      # the windows' own sample
    every = shapes_cause.window_means(shape, 27, 5.0)            # the front too (0.032 s)
    assert set(every) == {"front", "db"} and every["db"] == got
    assert every["front"] == pytest.approx(0.032, rel=0.05)


def test_an_unknown_route_is_refused_by_name():
    shape = shapes.SHAPES[0]
    with pytest.raises(ValueError, match="route: .*'mva'"):
        shapes_cause.true_model(shape, "mva")
