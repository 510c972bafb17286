"""An FCFS tier below the burstiness threshold with general service
(:mod:`streams.predict.general_service`): its SCV from the measured response time, only where
``I``'s interval and the response time both say the service is not exponential.

The "measurement" is the residual-life MVA itself at a known SCV (4, a lognormal or H2
service) on a two-tier system with a one-core database: the calibration must give that SCV
back, and leave the model alone where the evidence is missing."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solvers.mva_general import mva_curve_general
from streams.core.config import SystemConfig
from streams.core.tier import TierModel
from streams.predict.general_service import general_model
from streams.predict.model import SystemModel, build_model

THINK, USERS = 4.0, 30
FRONT, DB = 0.032, 0.040


def _measured_db(scv: float) -> float:
    return float(mva_curve_general([FRONT, DB], USERS, THINK, [2, 1], [1.0, scv])
                 .residence_time[USERS, 1])


def _tiers(db_response: float, idc: tuple[float, float | None, float | None] = (5.9, 2.8, 12.7),
           bursty: bool = False) -> list[TierModel]:
    front = TierModel(tier="front", cores=2, demands={"c": FRONT}, demand_std={"c": 0.0},
                      regression={}, idc=1.0, idc_flag=None, mean_service=FRONT, p95=None,
                      process=None, fit=None, bursty=False, windows=360, idc_lower=0.7,
                      idc_upper=1.4, class_response={"c": FRONT}, response_users=USERS)
    db = TierModel(tier="db", cores=1, demands={"c": DB}, demand_std={"c": 0.0},
                   regression={}, idc=idc[0], idc_flag=None, mean_service=DB, p95=None,
                   process=None, fit=None, bursty=bursty, windows=360, idc_lower=idc[1],
                   idc_upper=idc[2], class_response={"c": db_response},
                   response_users=USERS)
    return [front, db]


def _model(tiers: list[TierModel]) -> SystemModel:
    return build_model(tiers, ["c"], {"c": 1.0}, THINK,
                       SystemConfig(tiers=("front", "db"), sla_s={"*": 0.3}))


def test_the_scv_is_read_back_from_the_measured_response_time():
    tiers = _tiers(_measured_db(4.0))
    model = general_model(_model(tiers), tiers)
    assert model.scv is not None and model.scv[0] == 1.0
    assert model.scv[1] == pytest.approx(4.0, rel=0.02)
    assert model.at(USERS).residence[1] == pytest.approx(_measured_db(4.0), rel=0.01)
    flag = next(f for f in model.flags if "general service" in f)
    assert flag.startswith("db: FCFS with general service, SCV 4") and "I 5.9 in [2.8, 12.7]" \
        in flag
    # the capacity falls with the longer queue at the database
    exponential = _model(tiers)
    assert model.mva_capacity()[0] < exponential.mva_capacity()[0]


def test_the_upper_end_of_the_interval_caps_the_scv_flagged():
    tiers = _tiers(_measured_db(4.0), idc=(2.0, 1.5, 2.5))
    model = general_model(_model(tiers), tiers)
    assert model.scv[1] == pytest.approx(2.5)
    assert any("upper end taken" in f for f in model.flags)


@pytest.mark.parametrize("case", ["idc interval reaches 1", "within the margin", "bursty",
                                  "unbounded interval below"])
def test_no_evidence_no_change(case):
    measured = _measured_db(4.0)
    idc: tuple[float, float | None, float | None] = (5.9, 2.8, 12.7)
    if case == "idc interval reaches 1":
        idc = (3.0, 0.9, 8.0)
    elif case == "within the margin":
        measured = _measured_db(1.0) * 1.08
    elif case == "unbounded interval below":
        idc = (3.0, None, 8.0)
    tiers = _tiers(measured, idc, bursty=case == "bursty")
    model = _model(tiers)
    if case == "bursty":              # a bursty tier without its MAP(2) yet: the rule alone
        tiers = [tiers[0], dataclasses.replace(tiers[1], bursty=True)]
    assert general_model(model, tiers) is model


def test_a_map_network_keeps_its_tiers_and_the_scv_survives_the_store():
    tiers = _tiers(_measured_db(4.0))
    model = general_model(_model(tiers), tiers)
    back = SystemModel.from_dict(model.to_dict())
    assert np.array_equal(back.scv, model.scv)
    assert back.at(USERS).residence[1] == pytest.approx(model.at(USERS).residence[1])
    mapped = dataclasses.replace(_model(tiers), processes=[None, None])
    assert general_model(mapped, tiers) is mapped


def test_a_primed_exponential_curve_does_not_replace_the_general_one():
    tiers = _tiers(_measured_db(4.0))
    model = general_model(_model(tiers), tiers)
    before = model.curve(USERS).residence_time[USERS, 1]
    model.prime(_model(tiers).curve(USERS))
    assert model.curve(USERS).residence_time[USERS, 1] == before


@pytest.mark.parametrize("delays", [False, True])
def test_a_trial_is_the_variant_model_bit_for_bit(delays):
    """The bisection's trial (no model, curve or point built) gives exactly what the model
    with the trial SCVs gives at those users: below, at and beyond the asymptote's start,
    with and without the tiers' delays."""
    from streams.predict.general_service import _trials

    model = _model(_tiers(_measured_db(4.0)))
    if delays:
        model = model.variant(delays=np.array([[0.005], [0.012]]))
    n0 = model.asymptote_start()
    residence = _trials(model)
    for users in (1, USERS, n0 - 1, n0, n0 + 1, 3 * n0):
        for scv in ([1.0, 1.0], [1.0, 4.0], [0.3, 9.5]):
            want = model.variant(scv=np.array(scv)).mva_at(users).residence
            for m in (0, 1):
                assert residence(np.array(scv), m, users) == float(want[m]), (users, scv, m)
