"""A bursty tier's MAP(2) calibrated on an open workload (streams.predict.calibration with
:class:`OpenRate`): the trials solve the open model at the request rate the tier's response
times were measured at.

The "measurement" is the open model's own residence at the database with the tie rule's
MAP(2) at a known ``I``: the search within ``I``'s interval finds that ``I`` again."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from estimators.mapfit import fit_map2
from solvers.paper000 import scenarios
from streams.core.config import SystemConfig
from streams.core.tier import Interval, TierModel, TierState
from streams.predict.calibration import (OpenRate, calibrate_idc, calibrate_model,
                                         calibrate_scv, operating_point)
from streams.predict.model import build_model
from streams.predict.open_model import tier_residence

TRUE_DB = scenarios()["bottleneck_switch"].database
MEAN = float(TRUE_DB.mean)
INPUTS = (MEAN, float(TRUE_DB.idc), float(TRUE_DB.quantile(0.95)))
CORES = 4
RATE = 0.4 * CORES / MEAN          # 40% busy
FRONT_S = 0.002


def _tiers(*, db_response: float | None = 1.0, rate: float | None = RATE,
           bounds: tuple[float, float] = (100.0, 400.0)) -> list[TierModel]:
    fit = fit_map2(*INPUTS)
    front = TierModel(tier="front", cores=2, demands={"c": FRONT_S}, demand_std={"c": 0.0},
                      regression={}, idc=1.0, idc_flag=None, mean_service=FRONT_S, p95=None,
                      process=None, fit=None, bursty=False, windows=500)
    db = TierModel(tier="db", cores=CORES, demands={"c": MEAN}, demand_std={"c": 0.0},
                   regression={}, idc=INPUTS[1], idc_flag=None, mean_service=MEAN,
                   p95=INPUTS[2], process=fit.process,
                   fit={"scv": fit.scv, "inputs": list(INPUTS)}, bursty=True, windows=500,
                   class_response={} if db_response is None else {"c": db_response},
                   response_rate=rate, idc_lower=bounds[0], idc_upper=bounds[1])
    return [front, db]


def _model(tiers: list[TierModel], visits: dict | None = None):
    return build_model(tiers, ["c"], {"c": 1.0}, 0.0,
                       SystemConfig(tiers=("front", "db"), sla_s={}, visits=visits or {}))


def _measured_at(model, idc: float, rate: float = RATE) -> float:
    at = fit_map2(INPUTS[0], idc, INPUTS[2]).process
    return tier_residence(model.variant(processes=[model.processes[0], at], flags=[]), 1, rate)


def test_the_open_calibration_recovers_the_i_the_open_model_was_measured_at():
    model = _model(_tiers())
    measured = _measured_at(model, 250.0)
    c = calibrate_idc(model, 1, INPUTS, OpenRate(RATE), measured, (100.0, 400.0))
    assert c.end is None and c.residence == pytest.approx(measured, rel=0.01)
    assert c.inputs[1] == pytest.approx(250.0, rel=0.05)
    # the residence rises with I at the rate: a lower measured time reads a lower I
    low = calibrate_idc(model, 1, INPUTS, OpenRate(RATE), _measured_at(model, 130.0),
                        (100.0, 400.0))
    assert low.inputs[1] == pytest.approx(130.0, rel=0.05) and low.inputs[1] < c.inputs[1]


def test_the_open_scv_calibration_meets_the_measured_residence():
    model = _model(_tiers())
    measured = 0.9 * tier_residence(model, 1, RATE)
    c = calibrate_scv(model, 1, INPUTS, OpenRate(RATE), measured)
    assert c.end is None and c.residence == pytest.approx(measured, rel=0.011)
    assert c.scv < float(model.processes[1].scv)


def test_an_open_model_is_calibrated_at_the_tiers_rate_and_says_so():
    tiers = _tiers()
    measured = _measured_at(_model(tiers), 250.0)
    tiers = _tiers(db_response=measured)
    cal = calibrate_model(_model(tiers), tiers, vary="idc", open_workload=True)
    text = next(f for f in cal.flags if f.startswith("db: MAP(2) I"))
    assert f"at {RATE:.4g}/s" in text and "users" not in text
    assert cal.processes[1].idc == pytest.approx(250.0, rel=0.25)
    assert tier_residence(cal, 1, RATE) == pytest.approx(measured, rel=0.011)


@pytest.mark.parametrize("kw,what", [({"rate": None}, "request rate"),
                                     ({"db_response": None}, "request rate")])
def test_without_a_rate_or_response_times_the_open_tie_rule_stays_flagged(kw, what):
    tiers = _tiers(**kw)
    model = _model(tiers)
    cal = calibrate_model(model, tiers, vary="idc", open_workload=True)
    assert cal.processes[1] is model.processes[1] and not cal.scv_targets
    assert any("SCV by the tie rule" in f and what in f for f in cal.flags)


def test_the_operating_point_is_the_tiers_rate_over_its_visits_or_the_users():
    tiers = _tiers(rate=30.0)
    assert operating_point(tiers[1], _model(tiers), 1, open_workload=True) == OpenRate(30.0)
    twice = _model(tiers, visits={"db": {"c": 2.0}})
    assert operating_point(tiers[1], twice, 1, open_workload=True) == OpenRate(15.0)
    assert operating_point(tiers[1], _model(tiers), 1) is None        # closed: no users
    closed = dataclasses.replace(tiers[1], response_users=12.4)
    assert operating_point(closed, _model(tiers), 1) == 12
    assert operating_point(dataclasses.replace(tiers[1], response_rate=0.0), _model(tiers), 1,
                           open_workload=True) is None


@pytest.mark.parametrize("rate", [0.0, -1.0, math.nan, math.inf])
def test_a_bad_rate_is_named(rate):
    model = _model(_tiers())
    with pytest.raises(ValueError, match="rate"):
        calibrate_idc(model, 1, INPUTS, OpenRate(rate), 0.05, (100.0, 400.0))


def test_a_rate_beyond_the_tiers_saturation_takes_an_end_never_nan():
    model = _model(_tiers())
    beyond = 1.2 * CORES / MEAN
    c = calibrate_idc(model, 1, INPUTS, OpenRate(beyond), 0.05, (100.0, 400.0))
    assert c.end == "low" and c.residence == math.inf and not math.isnan(c.scv)


def test_the_tiers_long_run_rate_is_completion_weighted_and_survives_a_state_round_trip():
    cfg = SystemConfig(tiers=("db",), sla_s={})
    state = TierState("db", cfg)
    for seconds, done in ((10.0, 100.0), (10.0, 300.0)):
        state.interval = Interval(windows=2, seconds=seconds, classes=["c"],
                                  completions=[done], rt_weighted=[0.01 * done],
                                  rt_completions=[done])
        state.take_interval()
    # 10/s over 100 completions (decayed once) and 30/s over 300
    decay = 0.97
    expected = (10.0 * 100 * decay + 30.0 * 300) / (100 * decay + 300)
    assert state.response_rate[0] / state.response_rate[1] == pytest.approx(expected)
    back = TierState.from_dict(state.to_dict(), cfg)
    assert back.response_rate == pytest.approx(state.response_rate)
    old = state.to_dict()
    del old["response_rate"]                        # a state saved before the field
    assert TierState.from_dict(old, cfg).response_rate == [0.0, 0.0]
    assert np.isfinite(back.response_rate).all()
