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
