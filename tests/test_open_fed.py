"""The open model of the tiers behind a bursty one (the open cases (c) and (d)): the tiers
fed the bursty tier's departures (``solve_open_waves``), the coupled start phases read off two
cores (``coupled=TWO_CORE``), and the pipeline's use of them (``streams.predict.open_model``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bench.accuracy.multicore import crossing, systems
from estimators.mapfit import fit_map2
from solvers.open import mm_c, solve_open_tiers, tiers_capacity
from solvers.open import fixed_population, queues
from solvers.open.fixed_population import solve_open_waves
from solvers.open.queues import TWO_CORE, coupling_ratio, m_map_c, phase_kept
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from streams.core.config import Config, ConfigError, load_config
from streams.predict import open_model
from streams.predict.model import SystemModel

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"
BURSTY = MAP(np.array(BURSTY_D0), np.array(BURSTY_D1))


# ------------------------------------------------------------------ closed forms and limits
def test_exponential_tiers_keep_erlang_c_whatever_the_options():
    S = np.array([[0.004, 0.006], [0.010, 0.012], [0.020, 0.015]])
    lam = np.array([60.0, 40.0])
    cores = [2, 4, 8]
    for kw in ({}, {"coupled": TWO_CORE}, {"coupled": TWO_CORE, "into_bursty": False},
               {"ps": [False, True, False]}):
        res = solve_open_waves(lam, S, cores, processes=[None, None, None], **kw)
        for m in range(3):
            rate = float(lam.sum())
            mean = float(lam @ S[m] / rate)
            wait = mm_c(rate, mean, cores[m]).wait
            assert res.wait[m] == pytest.approx(wait, rel=1e-12)
            if kw.get("ps", [False] * 3)[m]:
                assert np.allclose(res.residence_time[m], S[m] * (1 + wait / mean),
                                   rtol=1e-12)
            else:
                assert np.allclose(res.residence_time[m], S[m] + wait, rtol=1e-12)


def test_a_process_that_keeps_its_phase_is_not_changed_by_coupling():
    fitted = fit_map2(mean=0.01, idc=50, p95=0.03).process
    assert phase_kept(fitted) and not phase_kept(BURSTY)
    for mode in (True, TWO_CORE):
        plain = m_map_c(500.0, fitted, 8)
        tied = m_map_c(500.0, fitted, 8, coupled=mode)
        assert tied.wait == plain.wait


def test_two_core_coupling_is_the_coupled_chain_at_two_cores_and_near_it_at_three():
    p = BURSTY.scaled(0.01)
    for rho in (0.3, 0.8):
        exact2 = m_map_c(2 * rho / 0.01, p, 2, coupled=True).wait
        assert m_map_c(2 * rho / 0.01, p, 2, coupled=TWO_CORE).wait == exact2
        exact3 = m_map_c(3 * rho / 0.01, p, 3, coupled=True).wait
        approx3 = m_map_c(3 * rho / 0.01, p, 3, coupled=TWO_CORE).wait
        plain3 = m_map_c(3 * rho / 0.01, p, 3).wait
        assert abs(approx3 / exact3 - 1) < 0.005 < abs(plain3 / exact3 - 1)
        assert coupling_ratio(p, rho) > 1.05


def test_a_bad_coupling_mode_is_named():
    with pytest.raises(ValueError, match="coupled"):
        m_map_c(100.0, BURSTY.scaled(0.01), 4, coupled="three-core")


def test_the_front_tiers_are_solved_once(monkeypatch):
    s = systems()["d"]
    calls = []
    inner = fixed_population.solve_open_tiers

    def counting(*args, **kw):
        calls.append(1)
        return inner(*args, **kw)
    monkeypatch.setattr(fixed_population, "solve_open_tiers", counting)
    cap = tiers_capacity(s.mix, s.D_mc, s.cores)
    res = solve_open_waves(0.6 * cap * np.array(s.mix), s.D_mc, s.cores,
                           processes=[t.process for t in s.tiers])
    assert len(calls) == 1
    assert res.stations[3].endswith("(waves)") and res.stations[4].endswith("(waves)")


# ------------------------------------------------------------------ against stored truths
def _truth(key: str):
    from bench.accuracy.open_models import load_truth
    path = RESULTS / f"open_models-{key}.json"
    assert path.exists(), f"{path}: stored in the repository (open_models --save-truth)"
    return load_truth(path)


def _misses(key: str, pts, kind: str) -> list[str]:
    """The stored rates where ``kind`` misses the open models' targets (mean R 10%, a class's R
    15%) by more than the simulation's own noise allows: a target widened to 1.5 times the
    relative 95% half-width where that is larger (at 90-95% of saturation a bursty tier's
    slow runs leave 6 x 3,000 s within 15-30%)."""
    from bench.accuracy.open_models import _model
    out = []
    for p in pts:
        m = _model(key, p.rate, kind)
        R, Rc = p.total_response_time, p.response_time
        if abs(m.R / R.mean - 1) > max(0.10, 1.5 * R.half_width / R.mean):
            out.append(f"R at {p.rate:.0f}/s")
        for c, e in enumerate(Rc):
            if abs(m.Rc[c] / e.mean - 1) > max(0.15, 1.5 * e.half_width / e.mean):
                out.append(f"class {c} R at {p.rate:.0f}/s")
    return out


def _capacity_error(key: str, meta: dict, kind: str) -> float:
    from bench.accuracy.open_models import _capacity
    s = systems()[key]
    sat = tiers_capacity(s.mix, s.D_mc, s.cores)
    return abs(_capacity(key, kind, s.sla, sat) / meta["capacity"]["crossing"] - 1)


@pytest.mark.parametrize("key", ["c", "d"])
def test_the_fed_model_meets_the_stored_truth_where_the_poisson_fed_one_does_not(key):
    meta, pts, extra = _truth(key)
    assert _misses(key, pts, "two-core") == []
    fed = _capacity_error(key, meta, "two-core")
    assert fed <= 0.05
    # the Poisson-fed model's capacity on (c) lies on the target's edge (+5.0%)
    assert _misses(key, pts, "open") != [] and _capacity_error(key, meta, "open") > fed


def test_the_whole_of_the_waves_into_case_c_db_misses_its_stored_truth():
    """Case (c) at 0.95 of saturation (96 x 3,000 s, +-5.3%): with all of what the app's
    waves add to an exponential tier added to the bursty db, R is 12% high; with the share
    the db's slower relaxation leaves (the default), within the targets (above)."""
    meta, pts, extra = _truth("c")
    assert _misses("c", pts, "two-core-unrelaxed") == ["R at 475/s"]


@pytest.mark.parametrize("key", ["c", "d"])
def test_the_stored_crossing_is_the_stored_points(key):
    meta, pts, extra = _truth(key)
    worst = []
    for p in sorted(pts + extra, key=lambda q: q.rate):
        Rc = np.mean(np.array(p.Rc), axis=0)
        worst.append((p.rate, float(Rc.max())))
    assert crossing(worst, meta["sla"]) == pytest.approx(meta["capacity"]["crossing"])


# ------------------------------------------------------------------ the pipeline
def _model(bursty_last: bool = False) -> SystemModel:
    """Case (d)'s shape as the pipeline holds it: the app's process a fitted MAP(2)."""
    s = systems()["d"]
    app = fit_map2(mean=0.012, idc=200, p95=0.04).process
    procs = [None, None, app, None, None]
    D = s.D_mc.copy()
    if bursty_last:
        procs = [None, None, None, None, app.scaled(0.02)]
    return SystemModel(tiers=[t.name for t in s.tiers], classes=list(s.classes), D_mc=D,
                       mix=np.array(s.mix), servers=np.array(s.cores), think_time=0.0,
                       sla=np.array([0.15, 0.15]), processes=procs, map_limit=10_000)


def test_the_pipeline_feeds_the_tiers_behind_a_bursty_one_and_says_so():
    model = _model()
    assert open_model.fed_applies(model)
    held = open_model.RateSolves(model)
    point, res = open_model.open_point(model, 300.0, held)
    S = model.D_mc
    want = solve_open_waves(300.0 * model.mix, S, model.servers.astype(int),
                            processes=model.processes, coupled=TWO_CORE)
    assert np.allclose(res.response_time, want.response_time, rtol=1e-12)
    plain = open_model.solve_at(model, 300.0)
    assert np.all(res.response_time > plain.response_time)
    assert open_model.FED_FLAG in model.flags
    assert held.fed_count == 1


def test_the_fed_capacity_meets_the_fed_model_at_its_sla_and_is_below_the_poisson_fed():
    model = _model()
    held = open_model.RateSolves(model)
    cap = open_model.rate_capacity(model, held, fed=True)
    plain = open_model.rate_capacity(model.variant(sla=model.sla.copy()))
    judged = np.ones(2, dtype=bool)
    worst = float(np.max(held.fed(cap.capacity).response_time / model.sla))
    assert 1 - 0.01 < worst <= 1 + open_model.FED_SLA_SLACK
    assert cap.capacity < plain.capacity
    assert held.fed_count <= open_model.FED_STEPS + 1
    assert held.gain is not None and np.all(held.gain[judged] > 1)
    # the gain applied to the same model without a fed solve gives the same capacity
    again = open_model.rate_capacity(model.variant(sla=model.sla.copy()), gain=held.gain)
    assert again.capacity == pytest.approx(cap.capacity, rel=1e-3)


def test_a_bursty_last_tier_keeps_the_poisson_fed_model():
    model = _model(bursty_last=True)
    assert not open_model.fed_applies(model)
    held = open_model.RateSolves(model)
    _, res = open_model.open_point(model, 300.0, held)
    assert np.array_equal(res.response_time, open_model.solve_at(model, 300.0).response_time)
    cap = open_model.rate_capacity(model, held, fed=True)
    assert cap.capacity == open_model.rate_capacity(model.variant(sla=model.sla.copy())).capacity
    assert held.fed_count == 0 and open_model.FED_FLAG not in model.flags
    assert math.isfinite(cap.capacity)


def test_open_fed_off_keeps_the_poisson_fed_model_and_survives_the_store(tmp_path):
    model = _model().variant(open_fed=False)
    assert not open_model.fed_applies(model)
    held = open_model.RateSolves(model)
    _, res = open_model.open_point(model, 300.0, held)
    assert np.array_equal(res.response_time, open_model.solve_at(model, 300.0).response_time)
    assert held.fed_count == 0 and open_model.FED_FLAG not in model.flags
    # the store (``to_dict``) keeps the switch; absent, it reads as on
    plain = _model().variant(processes=None)
    back = SystemModel.from_dict(plain.variant(open_fed=False).to_dict())
    assert back.open_fed is False
    assert "open_fed" not in plain.to_dict()
    assert SystemModel.from_dict(plain.to_dict()).open_fed is True


def test_open_fed_is_read_from_the_configuration_and_must_be_a_boolean(tmp_path):
    path = tmp_path / "perfcast.toml"
    path.write_text("[defaults]\nopen_fed = false\n[systems.api]\nopen_fed = true\n")
    cfg = load_config(path, env={})
    assert cfg.system("other").open_fed is False and cfg.system("api").open_fed is True
    assert Config().system("x").open_fed is True
    path.write_text("[defaults]\nopen_fed = \"no\"\n")
    with pytest.raises(ConfigError, match="defaults.open_fed: must be true or false"):
        load_config(path, env={})


# ------------------------------------------------------------------ the waves' relaxed share
def test_the_relaxed_share_is_the_source_or_fed_relaxation_over_the_bursty_tiers():
    """``min(1, max(tau_s, tau_e) / tau_b)``, ``tau = W / slack``: all of the waves' addition
    where the bursty tier relaxes no slower than the source or the fed exponential tier, the
    ratio where it relaxes slower, 1 where its wait or slack leaves no relaxation time."""
    share = fixed_population.relaxed_share
    # source 0.4 s at slack 50/s (tau 8 ms), fed 0.3 s, own 1.8 s at slack 50/s
    assert share(0.4, 50.0, 0.3, 1.8, 50.0) == pytest.approx(0.4 / 1.8, rel=1e-12)
    assert share(0.2, 50.0, 0.3, 1.8, 50.0) == pytest.approx(0.3 / 1.8, rel=1e-12)
    assert share(0.4, 25.0, 0.3, 1.8, 50.0) == pytest.approx((0.4 / 25) / (1.8 / 50),
                                                             rel=1e-12)
    assert share(2.0, 50.0, 0.3, 1.8, 50.0) == 1.0
    assert share(0.4, 50.0, 0.3, 0.0, 50.0) == 1.0
    assert share(0.4, 0.0, 0.3, 1.8, 50.0) == 1.0           # a source with no slack left


def test_a_bursty_tier_behind_a_bursty_one_keeps_the_relaxed_share_of_the_waves():
    """Case (c) at 0.9 of saturation: the db's wait is its coupled M/MAP/4 wait plus the
    relaxed share of what the app's waves add to an exponential tier's, less than all of it
    (the db relaxes over ~4 times the app's time); on the large-population network the db
    (16 cores) relaxes faster than the app and keeps all of it."""
    s = systems()["c"]
    procs = [t.process for t in s.tiers]
    rate = 0.9 * tiers_capacity(s.mix, s.D_mc, s.cores)
    kw = dict(processes=procs, coupled=TWO_CORE)
    full = solve_open_waves([rate], s.D_mc, s.cores, relaxed=False, **kw)
    relaxed = solve_open_waves([rate], s.D_mc, s.cores, **kw)
    none = solve_open_waves([rate], s.D_mc, s.cores, into_bursty=False, **kw)
    base = solve_open_tiers([rate], s.D_mc, s.cores, processes=procs, coupled=TWO_CORE)
    added = full.wait[2] - none.wait[2]
    share = fixed_population.relaxed_share(
        base.wait[1], 4 / 0.008 - rate, mm_c(rate, 0.008, 4).wait + added, none.wait[2],
        4 / 0.008 - rate)
    assert 0.1 < share < 0.5
    assert relaxed.wait[2] == pytest.approx(none.wait[2] + share * added, rel=1e-9)
    assert relaxed.wait[:2] == pytest.approx(full.wait[:2], rel=1e-12)
    procs, cores = [BURSTY.scaled(0.01), MAP.exponential(0.004), BURSTY.scaled(0.02)], [8, 4, 16]
    S = [[0.01], [0.004], [0.02]]
    for rate in (300.0, 600.0):
        a = solve_open_waves([rate], S, cores, processes=procs)
        b = solve_open_waves([rate], S, cores, processes=procs, relaxed=False)
        assert a.wait[2] == b.wait[2] > solve_open_waves(
            [rate], S, cores, processes=procs, into_bursty=False).wait[2]
