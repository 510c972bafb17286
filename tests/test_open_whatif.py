"""Open what-if: remediation in requests/s (rate limiting in place of admission),
``perfcast whatif --rate``, the capacity band in req/s, and a saturated open model flagged on
every path (now, at the forecast, at a what-if rate, under a rate schedule), never NaN."""

from __future__ import annotations

import json
import math
import sqlite3

import numpy as np
import pytest
from typer.testing import CliRunner

from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, monitor_physical
from streams.cli.commands import app
from streams.cli.embedded import STORE_NAME, run_embedded
from streams.core.config import Config, SystemConfig
from streams.predict.model import SystemModel
from streams.predict.open_model import RATE_TOLERANCE, rate_capacity, solve_at
from streams.predict.open_whatif import (RATE_LIMIT, at_rate, meets_rate, rate_band,
                                         rate_time_to_breach, remediate_open)
from streams.predict.whatif import Action, apply
from streams.sinks.report import load_store, render_report
from streams.sinks.store import MODEL_TABLE, OUTPUT_FILES, SQLiteStore
from solvers.processes import MAP


def _model(cores=(8, 8), sla=0.1, processes=None) -> SystemModel:
    """web 8 ms, db 12 / 32 ms (browse 80%, buy 20%): 4 web cores and 8 db cores each carry 500/s."""
    return SystemModel(tiers=["web", "db"], classes=["browse", "buy"],
                       D_mc=np.array([[0.008, 0.008], [0.012, 0.032]]),
                       mix=np.array([0.8, 0.2]), servers=np.array(cores, float),
                       think_time=0.0, sla=np.array([sla, sla]), processes=processes,
                       map_limit=10_000)


def _mm1(S=0.01, sla=0.05) -> SystemModel:
    return SystemModel(tiers=["api"], classes=["c"], D_mc=np.array([[S]]),
                       mix=np.array([1.0]), servers=np.array([1.0]), think_time=0.0,
                       sla=np.array([sla]), processes=None, map_limit=10_000)


def test_cpu_speed_remedy_of_one_mm1_tier_is_the_closed_form():
    """M/M/1: ``R = (S/s) / (1 - x S/s) <= SLA`` gives ``x*(s) = s / S - 1 / SLA``: at 10 ms
    and a 50-ms SLA 80/s; 118/s needs ``s >= 1.38``, 1.4 on the grid, whose capacity is
    120/s."""
    model = _mm1()
    rec = remediate_open(model, 118.0, 80.0)
    speed = next(a for a in rec["actions"] if a["kind"] == "cpu_speed")
    assert speed["value"] == pytest.approx(1.4)
    assert speed["capacity_rate_per_s"] == pytest.approx(120.0, abs=2 * RATE_TOLERANCE * 140)
    cores = next(a for a in rec["actions"] if a["kind"] == "cores")
    assert cores["value"] == 2 and not meets_rate(apply(model, Action("cores", "api", 1)), 118)
    limit = next(a for a in rec["actions"] if a["kind"] == RATE_LIMIT)
    assert limit["tier"] is None and limit["capacity_rate_per_s"] == 80.0
    assert limit["cost"] == pytest.approx(0.05 * 38.0)       # admission's unit per req/s


def test_remedies_are_the_smallest_that_meet_the_rate_and_their_capacity_is_the_models():
    model = _model(cores=(16, 8))
    cap = rate_capacity(model).capacity
    required = 1.3 * cap
    rec = remediate_open(model, required, cap)
    assert rec["workload"] == "open" and rec["required_rate_per_s"] == required
    assert [a["cost"] for a in rec["actions"]] == sorted(a["cost"] for a in rec["actions"])
    kinds = {(a["kind"], a["tier"]) for a in rec["actions"]}
    assert {("cores", "db"), ("replicate", "db"), ("cpu_speed", "db"),
            (RATE_LIMIT, None)} <= kinds
    for a in rec["actions"]:
        if a["tier"] is None:
            continue
        after = apply(model, Action(a["kind"], a["tier"], a["value"]))
        assert meets_rate(after, required)
        fresh, found = rate_capacity(after), a["capacity_rate_per_s"]
        step = RATE_TOLERANCE * fresh.saturation      # both within the search's guarantee
        assert found >= required and abs(found - fresh.capacity) <= step
        assert meets_rate(after, found) and not meets_rate(after, found + step)
        assert "req/s" in a["summary"] and a["capacity_users"] is None
    cores = next(a for a in rec["actions"] if a["kind"] == "cores" and a["tier"] == "db")
    assert not meets_rate(apply(model, Action("cores", "db", cores["value"] - 1)), required)


def test_no_single_tier_fixes_two_saturated_tiers_only_the_rate_limit_does():
    model = _model(cores=(4, 8))          # web and db both saturate at 500/s
    cap = rate_capacity(model).capacity
    rec = remediate_open(model, 600.0, cap)
    assert [a["kind"] for a in rec["actions"]] == [RATE_LIMIT]
    assert {"cores web", "cores db", "cpu_speed web", "cpu_speed db"} <= set(rec["unreachable"])


def test_remediation_refuses_a_rate_that_is_not_one():
    for bad in (math.nan, math.inf, -1.0, "100"):
        with pytest.raises(ValueError, match="required"):
            remediate_open(_mm1(), bad, 80.0)
    with pytest.raises(ValueError, match="rate"):
        at_rate(_mm1(), math.nan)


def test_at_rate_beyond_saturation_is_flagged_with_inf_never_nan():
    model = _model(cores=(16, 8))
    cmp = at_rate(model, 1200.0, [Action("cores", "db", 16)])
    assert cmp.stable == (False, False)
    assert all(np.isinf(r).all() for r in cmp.response)
    assert len(cmp.flags()) == 2 and all("unstable" in f for f in cmp.flags())
    ok = at_rate(model, 300.0, [Action("cores", "db", 16)])
    assert ok.stable == (True, True) and ok.flags() == []
    assert np.all(ok.response[1] < ok.response[0]) and ok.capacity[1] > ok.capacity[0]
    assert not any(np.isnan(u).any() for u in ok.utilization + cmp.utilization)


def test_bursty_tier_at_and_just_below_saturation_is_finite_or_flagged_never_nan():
    """The M/MAP/c QBD at the saturation rate and a hair below: flagged or finite."""
    shape = MAP(np.array([[-2.0, 0.5], [0.1, -0.3]]), np.array([[1.4, 0.1], [0.05, 0.15]]))
    model = _model(cores=(16, 8), processes=[None, shape])
    sat = rate_capacity(model).saturation
    for rate in (sat, sat * (1 - 1e-12), sat * (1 - 1e-6), 10 * sat):
        res = solve_at(model, rate)
        assert not np.isnan(res.response_time).any()
        assert res.stable or np.isinf(res.response_time).all()
    assert not solve_at(model, sat).stable


def test_band_brackets_the_capacity_and_its_times():
    model = _model(cores=(16, 8))
    cap = rate_capacity(model).capacity
    band = rate_band(model, [], cap, 100.0, 0.5)
    assert band["capacity_rate_per_s_lower"] == band["capacity_rate_per_s_upper"] == cap
    assert band["time_to_breach_lower_s"] == pytest.approx((cap - 100.0) / 0.5)
    assert rate_time_to_breach(cap, cap + 1, 0.5) == 0.0
    assert rate_time_to_breach(cap, 10.0, 0.0) is None
    assert rate_time_to_breach(None, 10.0, 1.0) is None


@pytest.fixture(scope="module")
def ramp_run(tmp_path_factory):
    """A rate schedule from 40/s to 190/s over 8 minutes into web 4 x 2 ms and db 2 x 10 ms
    (saturation 200/s), through one embedded run: its predictions (JSON lines) and store."""
    tiers = (Tier("web", 4, 0.002), Tier("db", 2, 0.010))
    net = PhysicalNetwork(tiers, ("a",), (1.0,), 0.0, 0,
                          arrivals=OpenArrivals([(0.0, 40.0), (480.0, 190.0)]))
    recs = monitor_physical(net, 480.0, 5.0, warmup=20.0, seed=11, start_time=1e9)
    cfg = Config(defaults=SystemConfig(tiers=("web", "db"), sla_s={"*": 0.1}, horizon_s=600.0))
    out = tmp_path_factory.mktemp("open-ramp")
    run_embedded(recs, cfg, out)
    text = (out / OUTPUT_FILES["predictions"]).read_text()
    preds = [json.loads(line) for line in text.splitlines()]
    return [p for p in preds if p.get("model")], text, out / STORE_NAME, cfg


@pytest.mark.slow
def test_rate_schedule_past_capacity_gives_flagged_forecast_and_a_rate_remedy(ramp_run):
    """The forecast passes saturation (flagged, never NaN) and the at-risk solves carry a
    remediation in req/s with the rate limit; no field anywhere is NaN or inf."""
    preds, text, _, _ = ramp_run
    assert "NaN" not in text and "Infinity" not in text
    assert any(any(f.startswith("unstable at the forecast") for f in p["flags"])
               for p in preds)
    risky = [p for p in preds if p.get("remediation")]
    assert risky
    last = risky[-1]["remediation"]
    assert last["workload"] == "open" and last["required_rate_per_s"] > \
        last["capacity_before_rate_per_s"]
    assert any(a["kind"] == RATE_LIMIT for a in last["actions"])
    assert any(a["kind"] == "cores" and a["tier"] == "db" for a in last["actions"])
    assert risky[-1]["remediation_summary"]
    banded = [p for p in preds if p.get("capacity_rate_per_s_lower") is not None]
    assert banded and all(p["capacity_rate_per_s_lower"] <= p["capacity_rate_per_s"]
                          <= p["capacity_rate_per_s_upper"] for p in banded)


@pytest.mark.slow
def test_report_draws_rate_against_capacity_for_an_open_system(ramp_run):
    _, _, store, cfg = ramp_run
    page = render_report(load_store(store, cfg))
    assert "Capacity vs request rate" in page and "capacity (req/s within SLA)" in page
    assert "request rate now" in page and "Capacity vs users" not in page
    assert "req/s expected within the horizon" in page      # the remediation, in req/s


def _open_store(tmp_path, rates=(100.0, 150.0)):
    spec = _model(cores=(16, 8)).to_dict()
    spec["open"] = {"rate_per_s": rates[0], "rate_forecast_per_s": rates[1]}
    path = tmp_path / "perfcast.sqlite"
    path.unlink(missing_ok=True)
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f'INSERT INTO "{MODEL_TABLE}" VALUES (?, ?, ?, ?, ?)',
                     ("api", 1.8e9, 0, 0, json.dumps(spec)))
    conn.close()
    return path


@pytest.mark.slow
def test_whatif_rate_prints_the_open_model_at_that_rate(tmp_path):
    path = _open_store(tmp_path)
    res = CliRunner().invoke(app, ["whatif", "--store", str(path), "--rate", "300",
                                   "--cores", "db=12"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "req/s" in res.output and "at 300/s before" in res.output
    assert "db (utilization)" in res.output and "yes" in res.output
    beyond = CliRunner().invoke(app, ["whatif", "--store", str(path), "--rate", "900"],
                                terminal_width=200)
    assert beyond.exit_code == 0, beyond.output
    assert "NO: capacity exceeded" in beyond.output and "nan" not in beyond.output.lower()
    # an open system without --rate: its last rate and forecast
    own = CliRunner().invoke(app, ["whatif", "--store", str(path), "--cores", "db=12"],
                             terminal_width=200)
    assert own.exit_code == 0 and "at 100/s before" in own.output \
        and "at 150/s before" in own.output, own.output
    bad = CliRunner().invoke(app, ["whatif", "--store", str(path), "--rate", "-3"])
    assert bad.exit_code == 2 and "--rate" in bad.output
    hostile = _open_store(tmp_path, ("fast", 150.0))        # a row written by hand
    res = CliRunner().invoke(app, ["whatif", "--store", str(hostile), "--cores", "db=12"])
    assert res.exit_code == 2 and "rate" in res.output and "Traceback" not in res.output


def test_remedy_story_of_an_open_remediation_speaks_in_requests_per_second():
    from streams.predict.story import remedy_story

    model = _model(cores=(4, 8))
    rec = remediate_open(model, 600.0, rate_capacity(model).capacity)
    story = remedy_story(rec, "db")
    assert story["remediation_summary"].startswith("limit the request rate to")
    assert story["remediation_tier"] is None
    assert "at 600 req/s" in story["remediation_reason"]
    assert "so the rate limit is the remedy listed" in story["remediation_reason"]
