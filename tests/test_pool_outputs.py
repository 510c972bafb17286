"""A pool's measured occupancy downstream of the prediction: the ``pool_prediction`` points
and the store carry the measured utilization and its error, ``prediction`` the pool error;
the report's pool chart and the Grafana pool panel draw the measured utilization beside the
model's; the ``model_error`` alert watches the worst measured pool's error pooled over the
last solves (:mod:`streams.predict.pool_check`) and names the pool."""

from __future__ import annotations

import sqlite3

import pytest

from streams.core.outputs import Outputs, PoolPrediction, Prediction


def _prediction(time: float, utilization: float, measured: float | None = None,
                pool_error: float | None = None) -> Prediction:
    part = PoolPrediction(tier="app", size=6, holds=["app", "db"], utilization=utilization,
                          utilization_forecast=1.0, waiting_time_s=0.2,
                          waiting_time_forecast_s=0.5, waiting_share={"a": 0.2})
    extra = {}
    if measured is not None:
        part.utilization_measured = measured
        part.utilization_error = abs(utilization - measured)
        extra = {"pool_error": abs(utilization - measured) / measured, "pool_error_pool": "conn"}
    if pool_error is not None:
        extra.update(pool_error_pooled=pool_error, pool_error_pooled_pool="conn")
    return Prediction(system="shop", time=time, solve=1, think_time_s=1.0, horizon_s=600.0,
                      model="pools", flags=[], pools={"conn": part}, **extra)


# --------------------------------------------------------------------------------------------
# the sinks
# --------------------------------------------------------------------------------------------

def test_the_points_carry_the_measured_pool_utilization_and_the_pool_error():
    from streams.sinks.influx import lines
    from streams.sinks.schema import points
    out = Outputs(predictions=[_prediction(1e9, 0.5, measured=0.8, pool_error=0.4)])
    (pool,) = [p for p in points(out) if p.measurement == "pool_prediction"]
    assert pool.fields["utilization_measured"] == 0.8
    assert pool.fields["utilization_error"] == pytest.approx(0.3)
    (pred,) = [p for p in points(out) if p.measurement == "prediction"]
    assert pred.fields["pool_error"] == pytest.approx(0.375)
    assert pred.fields["pool_error_pool"] == "conn"
    assert pred.fields["pool_error_pooled"] == 0.4
    assert pred.fields["pool_error_pooled_pool"] == "conn"
    text = "\n".join(lines(out))
    assert "utilization_measured=0.8" in text and 'pool_error_pool="conn"' in text
    # a pool the windows do not measure: no measured fields, as before
    (bare,) = [p for p in points(Outputs(predictions=[_prediction(1e9, 0.5)]))
               if p.measurement == "pool_prediction"]
    assert "utilization_measured" not in bare.fields and "utilization_error" not in bare.fields


def test_an_older_store_gains_the_columns_and_the_report_draws_the_measured_pool(tmp_path):
    """A store whose ``pool_prediction`` table predates the measured fields is written to
    (the columns added on open) and the report's pool chart has a measured series, its
    model-error chart the pooled pool error; rows without them stay drawable."""
    from streams.sinks.report.charts import SystemCharts
    from streams.sinks.report.html import render_report
    from streams.sinks.report.load import load_store
    from streams.sinks.schema import points
    from streams.sinks.store import SQLiteStore
    path = tmp_path / "perfcast.sqlite"
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE "pool_prediction" (time REAL NOT NULL, "system" TEXT, '
                 '"pool" TEXT, "size" INTEGER, "utilization" REAL)')
    conn.execute("""INSERT INTO "pool_prediction" VALUES (1e9, 'shop', 'conn', 6, 0.4)""")
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    store.write(points(Outputs(predictions=[
        _prediction(1e9 + 60 * i, 0.5, measured=0.6 + 0.1 * i, pool_error=0.3 + 0.01 * i)
        for i in range(1, 4)])))
    store.close()
    data = load_store(path)
    (system,) = data.systems
    rows = system.pools["conn"]
    assert [r.utilization_measured for r in rows] == pytest.approx([None, 0.7, 0.8, 0.9])
    charts = {c.key: c for c in SystemCharts(system).all()}
    measured = [s for s in charts["pools"].series if s.label == "measured"]
    assert len(measured) == 1 and measured[0].values[1:] == pytest.approx([70.0, 80.0, 90.0])
    assert measured[0].style == "points" and measured[0].group == "conn (6)"
    pooled = [s for s in charts["model_error"].series if "pool" in s.label]
    assert [v for v in pooled[0].values if v is not None] == pytest.approx([31.0, 32.0, 33.0])
    assert "Pool utilization: tokens held over size (measured" in render_report(data)


def test_a_pool_chart_without_measurements_has_no_measured_series(tmp_path):
    from streams.sinks.report.charts import SystemCharts
    from streams.sinks.report.load import load_store
    from streams.sinks.schema import points
    from streams.sinks.store import SQLiteStore
    path = tmp_path / "perfcast.sqlite"
    store = SQLiteStore(path)
    store.write(points(Outputs(predictions=[_prediction(1e9 + 60 * i, 0.5) for i in range(3)])))
    store.close()
    (system,) = load_store(path).systems
    charts = {c.key: c for c in SystemCharts(system).all()}
    assert [s.label for s in charts["pools"].series] == [
        "predicted now", "predicted at the forecast population"]
    assert not [s for s in charts["model_error"].series if "pool" in s.label]


def test_the_grafana_pool_panel_draws_the_measured_utilization():
    from streams.grafana.dashboards import system
    panel = next(p for p in system()["panels"]
                 if p["title"] == "Pool utilization: tokens held over size")
    queries = [t["query"] for t in panel["targets"]]
    assert any('"utilization_measured"' in q and '" measured"' in q for q in queries)
    assert any(o["matcher"]["options"] == ".* measured$" for o in panel["fieldConfig"]
               ["overrides"])


# --------------------------------------------------------------------------------------------
# the model_error alert
# --------------------------------------------------------------------------------------------

def test_the_pooled_pool_error_is_significant_only_when_it_holds_over_the_solves():
    from streams.predict.pool_check import PoolCheck, error_sample, pooled_worst
    off = [error_sample({"conn": PoolCheck("conn", 0.10, 0.18 + 0.002 * k, 0.08, 0.4)}, 60.0)
           for k in range(5)]
    assert off[0] == {"conn": [60.0, 0.10, 0.18]}
    assert pooled_worst(off[:2]) == (None, None)            # fewer than 3 solves
    name, value = pooled_worst(off)
    assert name == "conn" and value == pytest.approx(1 - 0.10 / 0.184)
    # the same mean error, but noise around zero: not significant
    noisy = [error_sample({"conn": PoolCheck("conn", 0.5, m, abs(0.5 - m), 0.1)}, 60.0)
             for m in (0.3, 0.8, 0.35, 0.75, 0.4)]
    assert pooled_worst(noisy) == (None, None)
    # an idle pool (no relative error) and an empty interval add nothing
    assert error_sample({"conn": PoolCheck("conn", 0.01, 0.02, 0.01, None)}, 60.0) == {}
    assert error_sample({"conn": PoolCheck("conn", 0.1, 0.2, 0.1, 0.5)}, 0.0) == {}


def test_the_alert_watches_the_pooled_pool_error():
    from streams.alerts.conditions import alert_error
    base = {"model_error_pooled": 0.05, "model_error_significant": True,
            "model_error_class_max": None}
    assert alert_error(base) == 0.05
    assert alert_error({**base, "pool_error_pooled": 0.6}) == 0.6
    assert alert_error({"pool_error_pooled": 0.6}) == 0.6      # no response time measured
    assert alert_error({}) is None
    # the per-solve pool error alone does not raise it: one interval is noise
    assert alert_error({**base, "pool_error": 0.9}) == 0.05


def test_the_alert_summary_names_the_pool_and_its_configuration():
    from streams.alerts.text import model_error_summary
    pred = _prediction(1e9, 0.07, measured=0.18, pool_error=0.62)
    pred.model_error_pooled, pred.model_error_solves, pred.tiers = 0.02, 5, {}
    text = model_error_summary("shop", pred, 0.62, 0.3, True)
    assert text.startswith("shop: the pools model's utilization of pool 'conn' (tokens held "
                           "over size) is off the measured one by 62% over the last solves "
                           "(threshold 30%; now 7% modelled against 18% measured)")
    assert "[systems.shop.pools.conn]" in text and text.endswith("do not trust its "
                                                                 "predictions yet")
    assert "back within 22% of the measured one (20% over" in model_error_summary(
        "shop", _prediction(1e9, 0.15, 0.18, pool_error=0.2), 0.2, 0.3, False)
    # the response time's error as the headline: the text as before
    assert "response time is off" in model_error_summary("shop", pred, 0.4, 0.3, True)


def _run(holds: tuple[str, ...], seconds: float = 180.0):
    """30 users on web (4 cores 20 ms), app (4, 30 ms), db (8, 50 ms), think time 1 s, a
    pool of 12 connections on app held across app and db (simulated, its tokens held in the
    windows), solved every 30 s with the pool configured as holding ``holds``: the pool does
    not bind, so the response time does not depend on it."""
    from solvers.pools import PoolSpec
    from solvers.simulation.physical import PhysicalNetwork, Tier, monitor_physical
    from streams.core.config import Config, Pool, SystemConfig
    from streams.engine.pipeline import Pipeline
    net = PhysicalNetwork(tiers=(Tier("web", 4, 0.02), Tier("app", 4, 0.03),
                                 Tier("db", 8, 0.05)),
                          classes=("a",), mix=(1.0,), think_time=1.0, population=30,
                          pools=(PoolSpec(12, 1, 3, "conn"),))
    records = monitor_physical(net, seconds, 5.0, warmup=30.0, seed=11, start_time=1e9)
    cfg = SystemConfig(tiers=("web", "app", "db"), think_time_s=1.0, sla_s={"*": 1.0},
                       pools={"conn": Pool("app", 12, holds)}, solve_interval_s=30.0)
    pipe = Pipeline(Config(defaults=cfg))
    outs = [pipe.process(r) for r in records] + [pipe.finish()]
    preds = [p for o in outs for p in o.predictions if p.model is not None]
    return pipe, preds, [a for o in outs for a in o.alerts if a.alert == "model_error"]


@pytest.mark.slow
def test_a_wrong_pool_raises_the_model_error_alert_the_response_time_does_not():
    """Configured over app alone, the model holds a connection for app's residence only:
    its pool utilization is about a third of the measured one while its response time is
    within 10% of the measured one (the pool does not bind). The ``model_error`` alert fires
    on the pool, naming it; configured right, it stays silent. The pooled samples survive the
    state's snapshot."""
    from streams.engine.system import SystemState
    pipe, preds, alerts = _run(("app",))
    assert all(p.model_error_pooled < 0.1 for p in preds)
    assert preds[-1].pool_error_pooled_pool == "conn" and preds[-1].pool_error_pooled > 0.5
    (fired,) = [a for a in alerts if a.state == "firing"]
    assert fired.value > 0.5 and "pool 'conn'" in fired.summary
    assert "[systems.sim.pools.conn]" in fired.summary
    state = pipe.systems["sim"]
    again = SystemState.from_dict(state.to_dict(), state.config)
    assert again.pool_error_samples == state.pool_error_samples
    assert len(again.pool_error_samples) >= 3
    right, right_preds, right_alerts = _run(("app", "db"))
    assert right_alerts == [] and all(p.get("pool_error_pooled") is None
                                      for p in right_preds)
    assert right_preds[-1].pool_error < 0.1
