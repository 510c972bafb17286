"""The workload kind of a system (closed, open, detected) in every prediction, with its reason."""

from __future__ import annotations

import pytest

from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, monitor_physical
from streams.core.config import Config, ConfigError, SystemConfig
from streams.engine.pipeline import Pipeline

TIERS = (Tier("web", 2, 0.01), Tier("db", 4, 0.02))


def _records(open_: bool, seconds: float = 300.0) -> list[dict]:
    if open_:
        net = PhysicalNetwork(TIERS, ("a",), (1.0,), 0.0, 0, arrivals=OpenArrivals(40.0))
    else:
        net = PhysicalNetwork(TIERS, ("a",), (1.0,), 0.5, 20)
    return monitor_physical(net, seconds, 5.0, warmup=20.0, seed=4, start_time=1e9)


def _predictions(records: list[dict], **settings) -> list:
    pipe = Pipeline(Config(defaults=SystemConfig(tiers=("web", "db"), **settings)))
    outs = [pipe.process(r) for r in records] + [pipe.finish()]
    return [p for o in outs for p in o.predictions]


@pytest.mark.parametrize("open_, settings, kind, reason", [
    (True, {}, "open", "no users and no think time: request rates only"),
    (True, {"think_time_s": 1.0}, "closed", "think time configured"),
    (False, {}, "closed", "users reported"),
    (False, {"workload": "open"}, "open", "configured"),
    (True, {"workload": "closed"}, "closed", "configured"),
])
def test_every_prediction_states_the_workload_and_why(open_, settings, kind, reason):
    preds = _predictions(_records(open_), **settings)
    assert preds
    assert {(p.workload, p.workload_reason) for p in preds} == {(kind, reason)}


def test_unknown_workload_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="workload"):
        SystemConfig(workload="batch")


# -- open predictions --------------------------------------------------------------------------
def test_rate_capacity_of_one_mm1_tier_is_the_closed_form():
    """``R = S / (1 - x S) <= SLA`` gives ``x* = (1 - S / SLA) / S``."""
    import numpy as np

    from streams.predict.model import SystemModel
    from streams.predict.open_model import RATE_TOLERANCE, open_point, rate_capacity
    model = SystemModel(tiers=["api"], classes=["c"], D_mc=np.array([[0.01]]),
                        mix=np.array([1.0]), servers=np.array([1]), think_time=0.0,
                        sla=np.array([0.05]), processes=None, map_limit=10_000)
    cap = rate_capacity(model)
    assert cap.saturation == pytest.approx(100.0)
    assert cap.capacity == pytest.approx(80.0, abs=2 * RATE_TOLERANCE * 100.0)
    assert (cap.breach_class, cap.breach_tier) == ("c", "api")
    point, res = open_point(model, 50.0)
    assert point.response[0] == pytest.approx(0.01 / 0.5) and point.model == "open"


def _open_records(rate: float, tiers=TIERS, seconds: float = 600.0) -> list[dict]:
    net = PhysicalNetwork(tiers, ("a",), (1.0,), 0.0, 0, arrivals=OpenArrivals(rate))
    return monitor_physical(net, seconds, 5.0, warmup=20.0, seed=8, start_time=1e9)


def test_open_predictions_give_rates_capacity_and_headroom_in_requests_per_second():
    preds = [p for p in _predictions(_open_records(60.0), sla_s={"*": 0.1})
             if p.model is not None]
    last = preds[-1]
    assert last.model == "open" and last.users is None and last.unstable is False
    assert last.arrival_rate_per_s == pytest.approx(60.0, rel=0.1)
    # web 2 cores x 10 ms, db 4 cores x 20 ms: both saturate at 200/s
    assert last.saturation_rate_per_s == pytest.approx(200.0, rel=0.1)
    assert 60.0 < last.capacity_rate_per_s < last.saturation_rate_per_s
    assert last.headroom_rate_per_s == pytest.approx(
        last.capacity_rate_per_s - last.arrival_rate_per_s)
    assert last.classes["a"].response_time == pytest.approx(
        last.classes["a"].response_time_measured, rel=0.15)
    assert last.time_to_breach_s is None or last.time_to_breach_s > 0


def test_open_system_beyond_saturation_is_flagged_unstable_never_nan():
    """200/s into a 4-core web tier (fast) and a one-core db of 8 ms (125/s): the entry tier
    passes the rate, the db cannot."""
    tiers = (Tier("web", 4, 0.002), Tier("db", 1, 0.008))
    preds = [p for p in _predictions(_open_records(200.0, tiers, 150.0), sla_s={"*": 0.5})
             if p.model is not None]
    last = preds[-1]
    assert last.unstable is True and last.time_to_breach_s == 0.0
    assert any(f.startswith("unstable: the arrival rate") for f in last.flags)
    assert last.response_time is None and last.classes["a"].response_time is None
    assert last.headroom_rate_per_s < 0


def test_mix_mean_ignores_classes_out_of_the_mix_even_when_infinite():
    import math

    import numpy as np

    from streams.predict.open_model import mix_mean
    assert mix_mean(np.array([0.2, math.inf]), np.array([1.0, 0.0])) == pytest.approx(0.2)
    assert math.isinf(mix_mean(np.array([0.2, math.inf]), np.array([0.5, 0.5])))
    rows = mix_mean(np.array([[0.1, math.inf], [0.3, math.inf]]), np.array([1.0, 0.0]))
    assert np.allclose(rows, [0.1, 0.3])
