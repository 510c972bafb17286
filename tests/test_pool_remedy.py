"""A thread or connection pool in the predictions' answers: named as the bottleneck or the
breach, raised by the remediation (``pool`` actions of streams/predict/whatif.py) with where the
breach goes after it, ``perfcast whatif --pool NAME=SIZE``, and the pool figures of a
prediction (utilization, each class's waiting share, a pool that cannot bind flagged)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from solvers.pools import PoolSpec
from streams.predict.model import SystemModel, model_capacity


def _model(db: float = 0.05, size: int = 6, classes: int = 1) -> SystemModel:
    """web 4 cores 20 ms, app 4 cores 30 ms, db 8 cores ``db`` s, think time 1 s, SLA 1 s, a
    pool ``conn`` of ``size`` on app held across app and db."""
    D = np.repeat(np.array([[0.02], [0.03], [db]]), classes, axis=1)
    if classes == 2:
        D[1, 1] = 0.05
    return SystemModel(tiers=["web", "app", "db"], classes=["a", "b"][:classes], D_mc=D,
                       mix=np.full(classes, 1.0 / classes), servers=np.array([4.0, 4.0, 8.0]),
                       think_time=1.0, sla=np.ones(classes), processes=None, map_limit=10_000,
                       pools=(PoolSpec(size, 1, 3, "conn"),))


# --------------------------------------------------------------------------------------------
# the action
# --------------------------------------------------------------------------------------------

def test_a_pool_action_changes_the_pool_size_only():
    from streams.predict.whatif import Action, apply
    model = _model()
    after = apply(model, Action("pool", "conn", 16))
    assert after.pools == (PoolSpec(16, 1, 3, "conn"),) and model.pools[0].size == 6
    assert np.array_equal(after.D_mc, model.D_mc) and np.array_equal(after.servers,
                                                                     model.servers)
    assert after.at(150).throughput > model.at(150).throughput


@pytest.mark.parametrize("args, message", [
    (("pool", "conn", 2.5), "pool: must be a whole number"),
    (("pool", "conn", 0), "pool: must be a finite number > 0"),
    (("pool", None, 8), "tier: a tier for pool"),
])
def test_a_bad_pool_action_is_refused_naming_it(args, message):
    from streams.predict.whatif import Action
    with pytest.raises(ValueError, match=message):
        Action(*args)


def test_an_unknown_pool_is_refused_naming_the_pools():
    from streams.predict.whatif import Action, apply
    with pytest.raises(ValueError, match=r"pool: unknown pool 'threads'.*\['conn'\]"):
        apply(_model(), Action("pool", "threads", 8))


def test_a_pool_action_costs_per_token_added_and_says_what_it_raises():
    from streams.core.config import REMEDIATION_COSTS
    from streams.predict.whatif import Action, action_cost, describe, parse_action
    model, action = _model(), parse_action("pool", "conn=16")
    assert action == Action("pool", "conn", 16)
    assert action_cost(model, action, 200, REMEDIATION_COSTS) == pytest.approx(
        10 * REMEDIATION_COSTS["pool"])
    assert action_cost(model, action, 200, {"pool": 1.0}) == 10
    assert describe(action, model) == "raise app's conn pool 6 → 16"
    assert describe(Action("pool", "conn", 4), model) == "lower app's conn pool 6 → 4"
    assert describe(action) == "conn pool to 16"
    with pytest.raises(ValueError, match="pool: 'x' is not a number"):
        parse_action("pool", "conn=x")


# --------------------------------------------------------------------------------------------
# naming the pool: bottleneck and breach
# --------------------------------------------------------------------------------------------

def test_the_pool_is_the_bottleneck_while_its_tokens_bound_the_throughput():
    """sum_H D_h / K against each tier's D_m / c_m: 0.08/6 > 0.03/4 (the pool), 0.08/16 <
    0.03/4 (app); with a db of 80 ms, 0.11/16 < 0.08/8 (db)."""
    from streams.predict.pool_naming import bottleneck_name
    from streams.predict.whatif import Action, apply
    model = _model()
    assert bottleneck_name(model, model.at(100)) == "conn"
    raised = apply(model, Action("pool", "conn", 16))
    assert bottleneck_name(raised, raised.at(100)) == "app"
    slow_db = _model(db=0.08, size=16)
    assert bottleneck_name(slow_db, slow_db.at(100)) == "db"
    plain = _model().variant(pools=())
    assert bottleneck_name(plain, plain.at(100)) == "app"


def test_the_breach_point_names_the_pool_and_the_story_says_why():
    from streams.predict.prediction import breach_point
    from streams.predict.story import bottleneck_story
    model = _model()
    cap, limited = model_capacity(model)
    breach, cls, name = breach_point(model, cap, limited)
    assert (cls, name) == ("a", "conn")
    story = bottleneck_story(model, "app", breach, cls, name, model.at(cap), {})
    assert story["breach_tier_share"] > 0.5
    assert story["bottleneck_reason"].startswith("app is the busiest tier")
    assert "conn causes the breach: it holds (its wait for a token)" in \
        story["bottleneck_reason"]
    assert bottleneck_story(model, "conn", breach, cls, name, model.at(cap), {}) == {
        "bottleneck_reason": None, "breach_tier_share": story["breach_tier_share"],
        "breach_tier_bottleneck_probability": None}


def test_a_pool_that_does_not_bind_passes_its_wait_to_the_tier_behind_it():
    """A 16-connection pool before an 80-ms db (8 cores): past capacity requests still wait
    for a connection (the pool caps the db's queue), but the db binds, so the breach is the
    db's."""
    from streams.predict.pool_naming import binds, breach_shares
    from streams.predict.prediction import breach_point
    model = _model(db=0.08, size=16)
    assert not binds(model, 0) and binds(_model(db=0.08, size=6), 0)
    cap, limited = model_capacity(model)
    breach, _, name = breach_point(model, cap, limited)
    assert name == "db"
    names, parts = breach_shares(model, breach)
    assert names == ["web", "app", "db", "conn"] and parts[3, 0] == 0
    assert parts[:, 0].sum() == pytest.approx(breach.response[0])


# --------------------------------------------------------------------------------------------
# the remediation
# --------------------------------------------------------------------------------------------

def _pool_remedy(plan):
    return next(r for r in plan.remedies if r.action.kind == "pool")


@pytest.mark.slow
def test_the_smallest_raise_that_meets_the_sla_still_binding():
    """185 users against a capacity of 148: 6 -> 8 connections (192 users), the cheapest remedy
    at the default costs, and the pool still causes the breach past it."""
    from streams.predict.whatif import remediate
    model = _model()
    cap, _ = model_capacity(model)
    plan = remediate(model, 185, cap)
    best = plan.best
    assert best.action.kind == "pool" and best.action.value == 8
    assert best.capacity >= 185 and best.breach_after == "conn"
    record = best.to_record()
    assert record["tier"] == "conn" and record["breach_tier_after"] == "conn"
    assert record["summary"] == (f"raise app's conn pool 6 → 8: capacity {cap} → "
                                 f"{best.capacity} users; the pool still causes the breach")
    assert "breach_tier_after" not in next(r for r in plan.remedies
                                           if r.action.kind != "pool").to_record()
    assert plan.hints()["pool/conn"] == (8.0, best.capacity)


@pytest.mark.slow
def test_a_raised_pool_moves_the_breach_to_the_database():
    """A db of 80 ms (8 cores: 100/s) behind a 6-connection pool: 195 users need 15 connections,
    and then the db binds -- the remedy says so, and the story quotes it."""
    from streams.predict.story import remedy_story
    from streams.predict.whatif import remediate
    model = _model(db=0.08)
    cap, _ = model_capacity(model)
    plan = remediate(model, 195, cap)
    remedy = _pool_remedy(plan)
    assert remedy.action.value == 15 and remedy.capacity >= 195
    assert remedy.breach_after == "db"
    assert remedy.summary.endswith("; the breach moves to db")
    story = remedy_story(plan.to_record(), "conn")
    assert story["remediation_tier"] == "conn" and story["remediation_reason"] is None
    assert "the breach moves to db" in story["remediation_summary"]


@pytest.mark.slow
def test_no_pool_size_enough_says_where_the_largest_moves_the_breach():
    """300 users are beyond the CPUs (266 without the pool): no pool size meets the SLA, and
    the largest searched moves the breach to app."""
    from streams.predict.whatif import remediate
    model = _model()
    cap, _ = model_capacity(model)
    plan = remediate(model, 300, cap, budget=12)
    assert not any(r.action.kind == "pool" for r in plan.remedies)
    assert plan.unreachable[0] == "pool conn (at 300 the breach moves to app)"


def test_a_pool_at_least_the_required_users_is_not_searched():
    """No solve budget: a pool that could bind would be listed as not searched."""
    from streams.predict.whatif import remediate
    plan = remediate(_model(size=40), 40, 30, budget=0)
    assert not any("pool" in u for u in plan.unreachable)
    assert remediate(_model(size=39), 40, 30, budget=0).unreachable[0] == \
        "pool conn (not searched: solve budget 0)"


# --------------------------------------------------------------------------------------------
# the prediction's pool figures
# --------------------------------------------------------------------------------------------

def test_pool_parts_carry_each_class_waiting_share_and_a_large_pool_is_flagged():
    from streams.core.config import Pool, SystemConfig
    from streams.predict.prediction import pool_flags, pool_parts
    model = _model(classes=2)
    now, fc = model.at(100), model.at(140)
    cfg = SystemConfig(tiers=("web", "app", "db"), pools={"conn": Pool("app", 6, ("app", "db"))})
    part = pool_parts(model, cfg, now, fc)["conn"]
    wait = float(now.pool_waiting[0])
    assert part.waiting_share == pytest.approx({"a": wait / now.response[0],
                                                "b": wait / now.response[1]})
    assert part.waiting_share["a"] > part.waiting_share["b"]        # b's heavier app demand
    assert part.waiting_share_forecast["a"] > part.waiting_share["a"]
    assert pool_flags(model, 100) == []
    assert pool_flags(_model(size=200), 150) == [
        "pools: conn has 200 tokens, at least the 150 users at the forecast: it cannot bind "
        "(the pool model reduces to the network without it)"]


# --------------------------------------------------------------------------------------------
# perfcast whatif --pool NAME=SIZE
# --------------------------------------------------------------------------------------------

def _store(tmp_path, size: int = 6):
    from streams.sinks.store import SQLiteStore
    path = tmp_path / "perfcast.sqlite"
    store = SQLiteStore(path)
    store.write_models([("shop", 1.8e9, 150, 180, _model(size=size).to_dict())])
    store.close()
    return path


def _whatif(*args):
    from streams.cli.commands import app
    return CliRunner().invoke(app, ["whatif", *args], terminal_width=200)


@pytest.mark.slow
def test_whatif_raises_the_pool(tmp_path):
    path = _store(tmp_path)
    result = _whatif("--store", str(path), "--pool", "conn=16")
    assert result.exit_code == 0, result.output
    before, _ = model_capacity(_model())
    after, _ = model_capacity(_model(size=16))
    assert f"capacity {before} → {after} users" in result.output
    assert "raise app's conn pool 6 → 16" in result.output
    both = _whatif("--store", str(path), "--pool", "conn=16", "--cores", "db=16")
    assert both.exit_code == 0 and "db to 16 cores (from 8)" in both.output


@pytest.mark.parametrize("args, message", [
    (["--pool", "threads=8"], "whatif: no system has pool 'threads' (pools: conn)"),
    (["--pool", "conn=x"], "whatif: pool: 'x' is not a number (in 'conn=x')"),
    (["--pool", "conn=2.5"], "whatif: pool: must be a whole number, got 2.5"),
    (["--pool", "conn=0"], "whatif: pool: must be a finite number > 0, got 0"),
    (["--pool", "conn"], "whatif: pool: expected TIER=VALUE, got 'conn'"),
])
def test_whatif_refuses_a_bad_pool_naming_it(tmp_path, args, message):
    result = _whatif("--store", str(_store(tmp_path)), *args)
    assert result.exit_code == 2 and message in result.output, result.output


def test_a_stored_row_with_a_bad_pool_is_refused_naming_the_field(tmp_path):
    from streams.predict.model_row import model_from_row
    spec = json.loads(json.dumps(_model().to_dict()))
    for pool, where in (({"name": "conn", "size": 0, "first": 1, "last": 3}, "pools[0].size"),
                        ({"name": "conn", "size": 6, "first": 2, "last": 2}, "pools[0].last"),
                        ({"size": 6, "first": 1, "last": 3}, "pools[0]: must be an object")):
        with pytest.raises(ValueError, match=r"system 'shop': model\." + where.replace(
                "[", r"\[").replace("]", r"\]")):
            model_from_row("shop", {**spec, "pools": [pool]})


# --------------------------------------------------------------------------------------------
# perfcast whatif --users N
# --------------------------------------------------------------------------------------------

def test_whatif_at_users_is_the_pool_model_solved_at_those_users(tmp_path):
    """``--users 300``: beside the current 150 users, the model at 300 -- the pool network
    solved directly at 300 users (:func:`solvers.pools.solve_pools`)."""
    from solvers.pools import solve_pools
    from streams.predict.whatif import compare
    model = _model()
    direct = [solve_pools(model.D_mc, n, model.think_time, model.servers, model.pools,
                          model.mix).response_time for n in (150, 300)]
    cmp = compare(model, [], 150, 300, asked=True)
    np.testing.assert_allclose(cmp.response_now[0], direct[0], rtol=1e-9)
    np.testing.assert_allclose(cmp.response_forecast[0], direct[1], rtol=1e-9)
    assert direct[1][0] > 1.5 * direct[0][0]      # the pool binds harder at 300
    result = _whatif("--store", str(_store(tmp_path)), "--users", "300")
    assert result.exit_code == 0, result.output
    assert "R at 300 before" in result.output and "horizon" not in result.output
    row = next(line.split() for line in result.output.splitlines() if line.split()[:1] == ["a"])
    assert row[2:] == [f"{direct[0][0]:.3f}"] * 2 + [f"{direct[1][0]:.3f}"] * 2


@pytest.mark.parametrize("args, message", [
    (["--users", "20", "--pool", "conn=30"],
     "whatif: --pool conn=30 is larger than --users 20: a pool of more tokens than users never "
     "binds"),
    (["--users", "4"],
     "whatif: systems.shop.pools.conn.size = 6 is larger than --users 4: a pool of more tokens "
     "than users never binds (--pool conn=SIZE with SIZE <= 4 asks about a smaller one)"),
    (["--users", "0"], "whatif: --users: must be a whole number of users >= 1, got 0"),
    (["--users", "20", "--rate", "5"], "whatif: give one of --users (a closed system's "
     "population) and --rate (an open system's request rate), not both"),
])
def test_whatif_refuses_a_pool_larger_than_the_users_naming_both(tmp_path, args, message):
    result = _whatif("--store", str(_store(tmp_path)), *args)
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output


def test_a_configured_pool_larger_than_the_users_is_asked_about_resized():
    """The configured pool of 6 above 4 users is refused unless ``--pool`` resizes it to at
    most 4; a pool of exactly the users is accepted (it is the largest that can bind)."""
    from streams.predict.whatif import Action, check_users
    with pytest.raises(ValueError, match=r"systems\.shop\.pools\.conn\.size = 6"):
        check_users(_model(), [], 4, "shop")
    check_users(_model(), [Action("pool", "conn", 4)], 4, "shop")
    check_users(_model(), [], 6, "shop")

# --------------------------------------------------------------------------------------------
# the sinks: pool_prediction points, the report's pool chart
# --------------------------------------------------------------------------------------------

def _pool_prediction(time: float, utilization: float):
    from streams.core.outputs import PoolPrediction, Prediction
    return Prediction(system="shop", time=time, solve=1, think_time_s=1.0, horizon_s=600.0,
                      model="pools", flags=[], pools={"conn": PoolPrediction(
                          tier="app", size=6, holds=["app", "db"], utilization=utilization,
                          utilization_forecast=1.0, waiting_time_s=0.2,
                          waiting_time_forecast_s=0.5, waiting_share={"a": 0.2})})


def test_the_sinks_write_a_point_per_pool():
    from streams.core.outputs import Outputs
    from streams.sinks.influx import lines
    from streams.sinks.schema import points
    out = Outputs(predictions=[_pool_prediction(1e9, 0.9)])
    (point,) = [p for p in points(out) if p.measurement == "pool_prediction"]
    assert point.tags == {"system": "shop", "pool": "conn"}
    assert point.fields == {"size": 6, "utilization": 0.9, "utilization_forecast": 1.0,
                            "waiting_time_s": 0.2, "waiting_time_forecast_s": 0.5}
    assert "pool_prediction,pool=conn,system=shop size=6i,utilization=0.9," in \
        "\n".join(lines(out))


def test_the_report_draws_the_pools(tmp_path):
    from streams.core.outputs import Outputs
    from streams.sinks.report.charts import SystemCharts
    from streams.sinks.report.html import render_report
    from streams.sinks.report.load import load_store
    from streams.sinks.schema import points
    from streams.sinks.store import SQLiteStore
    path = tmp_path / "perfcast.sqlite"
    store = SQLiteStore(path)
    store.write(points(Outputs(predictions=[_pool_prediction(1e9 + 60 * i, 0.5 + 0.1 * i)
                                            for i in range(4)])))
    store.close()
    data = load_store(path)
    (system,) = data.systems
    assert [r.utilization for r in system.pools["conn"]] == pytest.approx([0.5, 0.6, 0.7, 0.8])
    assert "pools" in [c.key for c in SystemCharts(system).all()]
    assert "Pool utilization: tokens held over size" in render_report(data)


def test_the_closing_sentence_calls_a_pool_a_pool():
    from streams.cli.closing import Solve, why_sentence
    solve = Solve(0.0, "pools", 150, 148, False, -2, 0.0, 148, "conn", "conn", "a", 0.8, None,
                  "raise app's conn pool 6 → 8: capacity 148 → 192 users", "conn", (),
                  pools=("conn",))
    assert why_sentence(solve) == ("the pool conn is the bottleneck and where the SLA breaks: it "
                                   "holds 80% of a's response time there; the remedy acts on "
                                   "conn.")
    moved = replace(solve, bottleneck_tier="app")
    assert why_sentence(moved).startswith("app is the busiest tier, but the pool conn is where")
