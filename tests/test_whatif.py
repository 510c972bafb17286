"""What-if actions and remediation (``streams.predict.whatif``): the actions change the model the
prediction used as documented, the remediation is the smallest sufficient action per kind
(checked against the solvers directly, not through the search), the hints of the last solve
give the same answer with fewer solves, and the pipeline puts it in the prediction, the alert's
summary and the schema's ``remediation`` points."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from solvers.decomposition import solve_decomposed
from solvers.mva import mva
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from streams.core.config import ConfigError, SystemConfig, _check
from streams.predict.model import MAP_CAPACITY_TOLERANCE, SystemModel, model_capacity
from streams.predict.whatif import Action, apply, describe, parse_action, remediate

BURSTY = MAP(BURSTY_D0, BURSTY_D1)            # Mi et al.'s (2008) unit-mean MAP(2), I ~ 200


def shop(bursty: bool = True) -> SystemModel:
    """The multi-core shop: web 4 cores 8 ms, app 4 cores 10 ms, db 8 cores 16 ms (bursty),
    classes browse (80%, x0.75 at the db) and buy (20%, x2), Z = 1 s, SLA 0.1 s."""
    return SystemModel(
        tiers=["web", "app", "db"], classes=["browse", "buy"],
        D_mc=np.array([[0.008, 0.008], [0.010, 0.010], [0.012, 0.032]]),
        mix=np.array([0.8, 0.2]), servers=np.array([4.0, 4.0, 8.0]), think_time=1.0,
        sla=np.array([0.1, 0.1]),
        processes=[MAP.exponential(1.0), MAP.exponential(1.0), BURSTY] if bursty else None,
        map_limit=10_000)


def one_class(D, servers, Z, sla) -> SystemModel:
    D = np.asarray(D, dtype=float)
    return SystemModel(tiers=[f"t{i}" for i in range(D.size)], classes=["a"], D_mc=D[:, None],
                       mix=np.array([1.0]), servers=np.asarray(servers, dtype=float),
                       think_time=Z, sla=np.array([sla]), processes=None, map_limit=1000)


def test_actions_change_only_what_they_say():
    m = shop()
    fast = apply(m, Action("cpu_speed", "db", 2.0))
    assert np.allclose(fast.D_mc[2], m.D_mc[2] / 2) and np.allclose(fast.D_mc[:2], m.D_mc[:2])
    assert fast.processes is m.processes         # rescaled to the new demand when solved
    assert apply(m, Action("cores", "app", 6)).servers.tolist() == [4, 6, 8]
    assert apply(m, Action("replicate", "db", 3)).servers.tolist() == [4, 4, 24]
    same = apply(m, Action("admission", None, 100))
    assert np.array_equal(same.D_mc, m.D_mc) and np.array_equal(same.servers, m.servers)
    assert m.servers.tolist() == [4, 4, 8] and m.D_mc[2, 0] == 0.012   # m itself unchanged


def test_speed_scales_the_map_rates_in_the_solved_network():
    """A 1.5x faster db under the MAP network is the decomposition with the db's MAP(2)
    rescaled to D/1.5: every rate x 1.5, I kept (Zong 2011)."""
    m = apply(shop(), Action("cpu_speed", "db", 1.5))
    point = m.at(200)
    D = m.D
    procs = [MAP.exponential(D[0]), MAP.exponential(D[1]), BURSTY.scaled(D[2])]
    ref = solve_decomposed(procs, 200, 1.0, servers=[4, 4, 8])
    assert point.model == "map-fes"
    assert point.throughput == pytest.approx(ref.throughput, rel=1e-9)
    assert procs[2].idc == pytest.approx(BURSTY.idc, rel=1e-6)
    assert procs[2].D1[0, 0] == pytest.approx(BURSTY.scaled(shop().D[2]).D1[0, 0] * 1.5)


@pytest.mark.parametrize("kind,tier,value,message", [
    ("cores", "nope", 4, "unknown tier 'nope'"),
    ("cpu_speed", "db", 0, "must be a finite number > 0"),
    ("cpu_speed", "db", math.nan, "must be a finite number > 0"),
    ("replicate", "db", 1.5, "whole number"),
    ("admission", "db", 10, "no tier for admission"),
    ("bigger", "db", 2, "kind: must be one of"),
])
def test_bad_actions_are_refused_naming_the_value(kind, tier, value, message):
    with pytest.raises(ValueError, match=message):
        apply(shop(), Action(kind, tier, value))


@pytest.mark.parametrize("text,message", [("db", "expected TIER=VALUE"),
                                          ("=2", "expected TIER=VALUE"),
                                          ("db=fast", "'fast' is not a number")])
def test_command_line_actions_are_parsed_or_refused(text, message):
    assert parse_action("replicate", "db=2") == Action("replicate", "db", 2)
    assert parse_action("cpu_speed", " db = 1.5") == Action("cpu_speed", "db", 1.5)
    with pytest.raises(ValueError, match=message):
        parse_action("replicate", text)


def _exact_meets(D, servers, Z, sla, n) -> bool:
    r = mva(np.asarray(D, dtype=float)[:, None], [n], [Z], servers)
    return float(r.response_time[0]) <= sla


def test_remediation_is_the_smallest_sufficient_action_on_mva():
    """One class, exact MVA from :mod:`solvers.mva` as the referee: the chosen cores and
    speed meet the SLA at the required users, one step less does not; replicas are the
    smallest multiple of today's cores covering the cores needed."""
    D, servers, Z, sla = [0.004, 0.020, 0.006], [2, 2, 1], 1.0, 0.25
    m = one_class(D, servers, Z, sla)
    cap, _ = model_capacity(m)
    required = int(cap * 1.4)
    rem = remediate(m, required, cap)
    by = {(r.action.kind, r.action.tier): r for r in rem.remedies}
    for (kind, tier), r in by.items():
        if kind == "admission":
            assert r.action.value == cap and r.capacity == cap
            continue
        i = int(tier[1:])
        D2, s2 = list(D), list(servers)
        if kind == "cores":
            s2[i] = r.action.value
            less = list(s2)
            less[i] -= 1
            assert not _exact_meets(D, less, Z, sla, required), (kind, tier)
        elif kind == "replicate":
            s2[i] = servers[i] * r.action.value
        else:
            D2[i] = D[i] / r.action.value
            assert not _exact_meets([d if j != i else D[i] / (r.action.value - 0.05)
                                     for j, d in enumerate(D)], servers, Z, sla, required)
        assert _exact_meets(D2, s2, Z, sla, required), (kind, tier)
        assert r.capacity >= required and r.capacity > cap
    assert ("cores", "t1") in by and by[("replicate", "t1")].action.value == math.ceil(
        by[("cores", "t1")].action.value / servers[1])
    costs = [r.cost for r in rem.remedies]
    assert costs == sorted(costs)


@pytest.mark.slow
def test_remediation_of_the_bursty_shop_acts_on_the_db_and_hints_save_solves():
    m = shop()
    cap, _ = model_capacity(m)
    required = int(cap * 1.5)
    rem = remediate(m, required, cap)
    tiers = {r.action.tier for r in rem.remedies if r.action.tier}
    assert tiers == {"db"}                        # web and app cannot hold 1.5x alone
    assert "cores web" in rem.unreachable and "cpu_speed app" in rem.unreachable
    for r in rem.remedies:
        if r.action.kind != "admission":
            after = apply(m, r.action)
            assert after.excess(after.at(required)) <= 0 and r.capacity >= required
    again = remediate(shop(), required, cap, hints=rem.hints())
    assert [r.action for r in again.remedies] == [r.action for r in rem.remedies]
    for hinted, cold in zip(again.remedies, rem.remedies):    # searches stop within tolerance
        assert hinted.capacity == pytest.approx(cold.capacity, rel=MAP_CAPACITY_TOLERANCE)
    assert again.solves < rem.solves
    cores = next(r for r in rem.remedies if r.action.kind == "cores")
    fewer = apply(m, Action("cores", "db", cores.action.value - 1))
    assert fewer.excess(fewer.at(required)) > 0


@pytest.mark.slow
def test_costs_rank_the_remedies():
    m = shop()
    cap, _ = model_capacity(m)
    cheap_speed = remediate(m, int(cap * 1.3), cap, {"cpu_speed": 0.01})
    assert cheap_speed.best.action.kind == "cpu_speed"
    cheap_replica = remediate(m, int(cap * 1.3), cap, {"replicate": 0.0})
    assert cheap_replica.best.action.kind == "replicate"
    assert cheap_replica.best.summary.startswith("add 1 replica of db: capacity ")


def test_describe_reads_like_the_issue():
    assert describe(Action("replicate", "db", 2)) == "add 1 replica of db"
    assert describe(Action("replicate", "db", 3)) == "add 2 replicas of db"
    assert describe(Action("cpu_speed", "db", 1.5)) == "db on a 1.5x faster CPU"
    assert describe(Action("admission", None, 337)) == "admit at most 337 users"


def test_remediation_costs_are_validated():
    assert _check("remediation_costs", {"cores": 0.5}, "d.rc")["cores"] == 0.5
    assert _check("remediation_costs", {"cores": 0.5}, "d.rc")["replicate"] == 1.0
    with pytest.raises(ConfigError, match=r"d.rc.gpu: unknown kind"):
        _check("remediation_costs", {"gpu": 1.0}, "d.rc")
    with pytest.raises(ConfigError, match=r"d.rc.cores: must be a number within \[0, 1e\+09\], "
                                          r"got -1"):
        _check("remediation_costs", {"cores": -1}, "d.rc")
    with pytest.raises(ConfigError, match="must be true or false"):
        _check("remediation", "yes", "d.remediation")
    assert SystemConfig().remediation


def test_model_round_trips_through_its_dict():
    import json

    m = shop()
    back = SystemModel.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back.at(150).response.tolist() == m.at(150).response.tolist()
    with pytest.raises(ValueError, match="model: missing key 'D_mc'"):
        SystemModel.from_dict({k: v for k, v in m.to_dict().items() if k != "D_mc"})


@pytest.mark.slow
def test_a_solve_budget_bounds_the_search_longest_queue_first():
    m = shop()
    cap, _ = model_capacity(m)
    rem = remediate(m, int(cap * 1.5), cap, budget=1)
    assert [r.action.kind for r in rem.remedies if r.action.tier] == ["cores", "replicate"]
    assert {r.action.tier for r in rem.remedies if r.action.tier} == {"db"}   # its queue first
    assert "cpu_speed db (not searched: solve budget 1)" in rem.unreachable


# -- in the pipeline -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_run():
    """The demo shop (45 min: users ramp up until the SLA breaks) through the pipeline."""
    from streams.cli.demo import DemoScenario, demo_config, demo_records
    from streams.engine.pipeline import Pipeline

    sc = DemoScenario(duration_s=2700)
    pipeline = Pipeline(demo_config(sc))
    out = pipeline.process_many(demo_records(sc))
    out.extend(pipeline.finish())
    return pipeline, out


def test_remediation_exactly_on_the_solves_at_risk(demo_run):
    """A prediction carries a remediation iff the larger of the current and the horizon's
    users is beyond the alert's capacity (the predicted_breach condition), and its tier
    actions restore every SLA there on the model rebuilt from the prediction's own figures;
    where the alert's capacity is the alert window's (below the long-run one) the users an
    action must carry are scaled by the ratio of the two."""
    _, out = demo_run
    solved = [p for p in out.predictions if p.get("capacity_users") is not None]
    at_risk = [p for p in solved if not p["capacity_limited"]
               and max(p["users"], p["users_forecast"]) > p["alert_capacity_users"]]
    assert at_risk and len(at_risk) < len(solved)
    for p in solved:
        assert (p.get("remediation") is not None) == (p in at_risk), p["time"]
    for p in at_risk:
        rem = p["remediation"]
        need = max(p["users"], p["users_forecast"])
        if any(b.startswith("provisional") for b in p["alert_basis"]):
            continue                  # on the pessimistic model: its own capacity_before
        assert rem["capacity_before"] == p["capacity_users"]
        assert rem["required_users"] == (need if p["alert_capacity_users"] == p["capacity_users"]
                                         else math.ceil(need * p["capacity_users"]
                                                        / p["alert_capacity_users"]))
        kinds = [a["kind"] for a in rem["actions"]]
        assert "admission" in kinds
        assert [a["cost"] for a in rem["actions"]] == sorted(a["cost"] for a in rem["actions"])
        for a in rem["actions"]:
            if a["kind"] != "admission":
                assert a["capacity_users"] >= rem["required_users"], a


def test_the_breach_alert_names_the_remedy_and_the_schema_has_its_points(demo_run):
    from streams.sinks.schema import points

    pipeline, out = demo_run
    firing = [a for a in out.alerts if a["alert"] == "predicted_breach"
              and a["state"] == "firing"]
    # an untrusted alert naming another class than the model's breach withholds the remedy
    assert firing and all("; remedy: " in a["summary"] or (
        a["trust"] == "untrusted" and "; remedy withheld: " in a["summary"]) for a in firing)
    summary = next(a["summary"] for a in firing if "; remedy: " in a["summary"])
    assert re.search(r"remedy: .*(capacity \d+ → \d+ users|admit at most \d+ users)", summary)
    rows = [p for p in points(out) if p.measurement == "remediation"]
    n_actions = sum(len(p["remediation"]["actions"]) for p in out.predictions
                    if p.get("remediation"))
    assert len(rows) == n_actions > 0
    assert {r.tags.get("kind") for r in rows} >= {"admission"}
    assert all(r.fields["rank"] >= 1 and "summary" in r.fields for r in rows)
    state = pipeline.systems["shop"]
    assert state.last_model is not None and state.last_model[1].tiers == ["front", "db"]
