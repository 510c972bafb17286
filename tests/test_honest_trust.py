"""Honest trust: a prediction is ``model_trusted`` only when the model has shown that it matches
the operating point, and a predicted-breach alert does not name a class the measurement clears
while another is breaking (:func:`streams.predict.confidence.trust_reasons`,
:func:`streams.alerts.conditions.alert_class`).

The stream is a closed processor-sharing database (the tier a real PostgreSQL is: one process
per connection on a time-sliced core) with four classes whose demands span 2.5-120 ms at a
steady mix, 20 users, 1-s think time: the utilization law alone cannot split it, the per-class
response times can (:mod:`estimators.class_split`). Before the split and the trust rules, the
same stream gave ``model_trusted`` at solves off by 241% and 32%, and a predicted breach naming
``buy`` (measured at a fifth of its SLA) while ``search`` was above its own. The stream's tests
take ~3 s (a simulation and a pipeline run): slow."""

from __future__ import annotations

import pytest

from solvers.simulation.ps_server import monitor_ps
from streams.alerts.conditions import NAMED_FLOOR, alert_class
from streams.core.config import Config, SystemConfig
from streams.engine.pipeline import Pipeline

CLASSES = ["search", "product", "home", "buy"]
DEMANDS = [0.12, 0.006, 0.003, 0.0025]
MIX = [0.25, 0.25, 0.3, 0.2]
#: search measures ~270 ms at 20 users (above its SLA), buy ~6 ms (a fifth of its SLA)
SLA = {"search": 0.24, "product": 0.05, "home": 0.05, "buy": 0.03}


@pytest.fixture(scope="module")
def run():
    records = monitor_ps(DEMANDS, MIX, 20, 1.0, 900, 5.0, classes=CLASSES, scv=1.0,
                         system="tb", start_time=1.8e9, seed=4)
    cfg = Config(defaults=SystemConfig(tiers=("db",), sla_s=SLA, think_time_s=1.0,
                                       horizon_s=900.0))
    pipeline = Pipeline(cfg)
    outs = [pipeline.process(r) for r in records] + [pipeline.finish()]
    preds = [p for o in outs for p in o.predictions if p.model is not None]
    alerts = [a for o in outs for a in o.alerts]
    return preds, alerts


@pytest.mark.slow
def test_no_solve_off_by_more_than_the_margin_is_trusted(run):
    preds, _ = run
    assert len(preds) >= 10
    for p in preds:
        if p.model_error is not None and p.model_error > 0.2:
            assert p.model_trusted is False, (p.solve, p.model_error)
            assert any("off the measured one" in r for r in p.trust_reasons)
        if p.model_trusted:
            assert p.trust_reasons == []


@pytest.mark.slow
def test_the_split_comes_from_the_response_times(run):
    preds, _ = run
    last = preds[-1].tiers["db"]
    assert last.split_discipline == "ps"
    for c, true in zip(CLASSES, DEMANDS):
        assert last.demands[c].split == pytest.approx(true, rel=0.15), c


@pytest.mark.slow
def test_a_breach_alert_names_the_class_that_breaks(run):
    preds, alerts = run
    measured = preds[-1].classes
    assert measured["search"].response_time_measured > SLA["search"]
    assert measured["buy"].response_time_measured < NAMED_FLOOR * SLA["buy"]
    fired = [a for a in alerts if a.alert == "predicted_breach" and a.state == "firing"]
    assert fired, "search is above its SLA: a breach is predicted"
    for a in fired:
        assert a.class_ == "search", a.summary


def test_alert_class_rule():
    sla = {"a": 0.06, "b": 1.0}
    # the model's class measured at 92% of its SLA while b is breaking: kept (not below 80%)
    assert alert_class("a", {"a": 0.055, "b": 1.2}, sla, True) == ("a", None)
    # below 80% while b is breaking: b, with why
    named, why = alert_class("a", {"a": 0.03, "b": 1.2}, sla, True)
    assert named == "b" and "measures 50% of its SLA" in why
    # nobody breaking and the model trusted: the model's class
    assert alert_class("a", {"a": 0.03, "b": 0.9}, sla, True) == ("a", None)
    # not trusted: the class nearest its SLA by measurement
    named, why = alert_class("a", {"a": 0.03, "b": 0.9}, sla, False)
    assert named == "b" and "not trusted" in why
    # no measurement: the model's
    assert alert_class("a", {}, sla, False) == ("a", None)
