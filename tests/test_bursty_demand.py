"""``bursty_demand``: a bursty tier's aggregate demand under the MAP network (streams.predict.model).

``history`` (default): the tier's per-class demands ``D_{m,c}`` rescaled by one factor so that
``sum_c p_c D_{m,c} = S_m sum_c p_c V_{m,c}``, ``S_m`` the tier's ``mean_service`` (busy time
per completion over its history, Mi et al. (2008) section 4.1); ``estimator``: the demand policy's
demands as they are."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solvers.mapqn import solve_closed
from solvers.paper000 import scenarios
from solvers.processes import MAP
from streams.core.config import SystemConfig
from streams.predict.model import build_model, history_demands
from streams.core.tier import TierModel

CLASSES = ["a", "b"]
#: measured throughputs: p = (0.75, 0.25)
MIX = {"a": 3.0, "b": 1.0}
#: db visits per request: a twice, b once
VISITS = {"db": {"a": 2.0}}
#: per completion at the tier (s)
FRONT_D = {"a": 0.003, "b": 0.002}
DB_D = {"a": 0.004, "b": 0.010}
#: busy time per completion over the db's history (s), above the estimators' 0.0085 / 1.75
DB_MEAN_SERVICE = 0.005


def _tier(name: str, demands: dict[str, float], *, bursty: bool, mean_service: float | None,
          process: MAP | None = None) -> TierModel:
    return TierModel(tier=name, cores=1, demands=demands, demand_std={c: 0.0 for c in demands},
                     regression=dict(demands), idc=150.0 if bursty else 1.0, idc_flag=None,
                     mean_service=mean_service, p95=None, process=process, fit=None,
                     bursty=bursty, windows=500)


def _tiers(*, db_process: bool = True) -> list[TierModel]:
    bursty_map = scenarios()["bottleneck_switch"].database.scaled(1.0)
    # the front tier has a history mean far from its estimates: it must be ignored (not bursty)
    front = _tier("front", FRONT_D, bursty=False, mean_service=0.009)
    db = _tier("db", DB_D, bursty=True, mean_service=DB_MEAN_SERVICE,
               process=bursty_map if db_process else None)
    return [front, db]


def _cfg(**kw) -> SystemConfig:
    return SystemConfig(tiers=("front", "db"), visits=VISITS, sla_s={}, **kw)


# ------------------------------------------------------------------------------------- model
def test_history_rescales_the_bursty_tier_to_the_closed_form():
    m = build_model(_tiers(), CLASSES, MIX, 0.5, _cfg())
    assert m.kind == "map"
    # closed form by hand: D_db,c = V_c d_c = (0.008, 0.010); sum_c p_c D_db,c = 0.0085;
    # target S sum_c p_c V_c = 0.005 * (0.75 * 2 + 0.25 * 1) = 0.00875
    factor = 0.00875 / 0.0085
    assert m.D_mc[1] == pytest.approx([0.008 * factor, 0.010 * factor], rel=1e-12)
    assert m.D[1] == pytest.approx(0.00875, rel=1e-12)
    # the estimator's split between classes is kept
    assert m.D_mc[1, 1] / m.D_mc[1, 0] == pytest.approx(0.010 / 0.008, rel=1e-12)
    # the non-bursty tier is untouched (its mean_service is not used)
    assert m.D_mc[0].tolist() == [0.003, 0.002]
    assert any(f.startswith("db: bursty, demand from its history") and "8.75 ms" in f
               and "8.5 ms" in f for f in m.flags)
    assert not any(f.startswith("front:") for f in m.flags)


def test_the_map_network_is_solved_on_the_rescaled_demand():
    m = build_model(_tiers(), CLASSES, MIX, 0.5, _cfg())
    procs = [MAP.exponential(1.0).scaled(0.75 * 0.003 + 0.25 * 0.002),
             scenarios()["bottleneck_switch"].database.scaled(0.00875)]
    exact = solve_closed(procs, 40, 0.5)
    assert m.at(40).model == "map"
    assert m.at(40).throughput == pytest.approx(float(exact.throughput), rel=1e-9)


def test_estimator_reproduces_the_old_demands():
    m = build_model(_tiers(), CLASSES, MIX, 0.5, _cfg(bursty_demand="estimator"))
    assert m.kind == "map"
    assert m.D_mc.tolist() == [[0.003, 0.002], [0.008, 0.010]]
    assert not any("history" in f for f in m.flags)


def test_mva_models_and_unknown_history_keep_the_estimators_demands():
    # bursty tier without a MAP(2) fit yet: the model is MVA, demands as estimated
    mva_model = build_model(_tiers(db_process=False), CLASSES, MIX, 0.5, _cfg())
    assert mva_model.kind == "mva"
    assert mva_model.D_mc.tolist() == [[0.003, 0.002], [0.008, 0.010]]
    # bursty with a fit but no history mean yet: unchanged, no flag
    front, db = _tiers()
    db = dataclasses.replace(db, mean_service=None)
    m = build_model([front, db], CLASSES, MIX, 0.5, _cfg())
    assert m.kind == "map" and m.D_mc.tolist() == [[0.003, 0.002], [0.008, 0.010]]
    assert not any("history" in f for f in m.flags)


def test_history_demands_edge_cases():
    p = np.array([0.75, 0.25])
    V = np.array([2.0, 1.0])
    D = np.array([0.008, 0.010])
    assert history_demands(D, V, p, 0.005) @ p == pytest.approx(0.00875, rel=1e-12)
    assert history_demands(D, V, p, 0.0).tolist() == D.tolist()        # no busy time known
    assert history_demands(np.zeros(2), V, p, 0.005).tolist() == [0.0, 0.0]


def test_per_class_response_times_split_a_fcfs_bursty_tier():
    """With long-run per-class response times at the bursty tier, the class split comes from
    them (one shared FCFS wait: S_c = Sbar + R_c - Rbar) instead of the estimators', and the
    aggregate is still the history's busy time per completion."""
    front, db = _tiers()
    # per visit at the db: true services 0.003 (a) and 0.009 (b), a shared wait of 0.020
    db = dataclasses.replace(db, class_response={"a": 0.023, "b": 0.029})
    m = build_model([front, db], CLASSES, MIX, 0.5, _cfg())
    q = np.array([0.75 * 2, 0.25 * 1]) / 1.75                  # visit mix at the db
    rbar = float(q @ [0.023, 0.029])
    S = DB_MEAN_SERVICE + np.array([0.023, 0.029]) - rbar
    assert m.D_mc[1] == pytest.approx([2 * S[0], S[1]], rel=1e-12)
    assert float(m.D_mc[1] @ m.mix) == pytest.approx(DB_MEAN_SERVICE * 1.75, rel=1e-12)
    assert any("class split from the per-class response times" in f for f in m.flags)
    # a class without a long-run response time: the estimators' split, rescaled (as before)
    partial = dataclasses.replace(db, class_response={"a": 0.023})
    assert build_model([front, partial], CLASSES, MIX, 0.5, _cfg()).D_mc[1] == \
        pytest.approx(build_model(_tiers(), CLASSES, MIX, 0.5, _cfg()).D_mc[1], rel=1e-12)


def test_tier_keeps_decayed_per_class_response_sums_across_solves_and_restarts():
    from streams.core.tier import RESPONSE_DECAY, Interval, TierState

    state = TierState("db", SystemConfig())
    for _ in range(3):
        state.interval = Interval(classes=["a", "b"], completions=[100.0, 80.0],
                                  rt_weighted=[100 * 0.02, 80 * 0.05],
                                  rt_completions=[100.0, 80.0])
        state.take_interval()
    decay = 1 + RESPONSE_DECAY + RESPONSE_DECAY ** 2
    assert state.response["a"] == pytest.approx([2.0 * decay, 100.0 * decay])
    again = TierState.from_dict(state.to_dict(), SystemConfig())
    assert again.response == state.response
    assert again.refresh().class_response == pytest.approx({"a": 0.02, "b": 0.05})
