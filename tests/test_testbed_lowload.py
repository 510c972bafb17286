"""bench.testbed.lowload: one campaign's low-load capacity against another's knee."""

import json

import pytest

from bench.testbed.lowload import combined_knee, demand_errors, judge, report, solve_rows
from solvers.pools_spread import SPREAD_FLAG


def _campaign(slo, runs):
    return {"slo_s": slo, "runs": [{"users": n, "worst_over_slo": w, "disturbed": d}
                                   for n, w, d in runs]}


def test_the_knee_spans_both_campaigns_runs():
    low = _campaign({"buy": 0.02}, [(5, 0.3, False)])
    around = _campaign({"buy": 0.02}, [(10, 0.5, False), (20, 0.8, False), (30, 1.4, False)])
    assert combined_knee(low, around) == pytest.approx(20 + 0.2 / 0.6 * 10)
    # the low run alone crossing below the knee campaign's first run counts too
    around = _campaign({"buy": 0.02}, [(10, 1.5, False)])
    assert combined_knee(low, around) == pytest.approx(5 + 0.7 / 1.2 * 5)


def test_a_disturbed_run_does_not_place_the_knee():
    low = _campaign({"buy": 0.02}, [(5, 0.3, False)])
    around = _campaign({"buy": 0.02}, [(10, 2.0, True), (20, 0.8, False), (30, 1.4, False)])
    assert combined_knee(low, around) == pytest.approx(20 + 0.2 / 0.6 * 10)


def test_campaigns_of_other_slos_are_refused():
    with pytest.raises(ValueError, match="slo_s"):
        combined_knee(_campaign({"buy": 0.02}, []), _campaign({"buy": 0.03}, []))


def _pred(t, cap, flags=()):
    return {"time": t, "users": 5, "capacity_users": cap, "model_trusted": False,
            "breach_class": "buy", "flags": list(flags), "classes": {"buy": {}},
            "tiers": {"db": {"utilization": 0.1, "utilization_measured": 0.12,
                             "estimator": "kalman",
                             "demands": {"buy": {"kalman": 0.004, "regression": 0.009}}}}}


def test_every_solve_of_the_run_is_listed_after_the_warmup_until_the_load_ended():
    spread = f"{SPREAD_FLAG}: db's services as the classes' phase-type mixture (from 5 users)"
    rows = solve_rows([_pred(30.0, 1), _pred(70.0, 20), _pred(100.0, 22, [spread]),
                       _pred(130.0, 0)], start=0.0, end=120.0)
    assert [r["capacity_users"] for r in rows] == [20, 22]
    assert [r["spread_chain"] for r in rows] == [False, True]
    assert rows[0]["tiers"]["db"]["demands"] == {"buy": 0.004}


def test_each_solve_states_its_bottleneck_and_pool_utilization():
    pred = _pred(70.0, 14) | {"bottleneck_tier": "workers", "pools": {
        "workers": {"utilization": 0.93, "utilization_measured": 0.97}}}
    (row,) = solve_rows([pred, _pred(80.0, 15)], start=0.0, end=75.0)
    assert row["bottleneck"] == "workers"
    assert row["pools"] == {"workers": {"u_model": 0.93, "u_measured": 0.97}}
    assert "| workers | workers 0.970 / 0.930 |" in report(
        {"knee_users": 10.0, "users": 2, "share_of_knee": 0.2, "capacity_users": 14,
         "error": 0.4, "solves": [row]})


def test_the_capacity_is_the_runs_last_solve_against_the_combined_knee(tmp_path):
    low, around = tmp_path / "low", tmp_path / "around"
    for d in (low, around, low / "perfcast-5"):
        d.mkdir()
    runs = [{"users": 5, "worst_over_slo": 0.3, "disturbed": False, "start": 0.0, "end": 120.0}]
    (low / "campaign.json").write_text(json.dumps({"slo_s": {"buy": 0.02}, "runs": runs}))
    (around / "campaign.json").write_text(json.dumps(
        _campaign({"buy": 0.02}, [(20, 0.8, False), (30, 1.4, False)])))
    (low / "perfcast-5" / "predictions.jsonl").write_text(
        "\n".join(json.dumps(_pred(t, c)) for t, c in ((70.0, 18), (110.0, 20), (125.0, 0))))
    got = judge(low, around)
    assert got["capacity_users"] == 20 and len(got["solves"]) == 2
    assert got["error"] == pytest.approx(20 / (20 + 0.2 / 0.6 * 10) - 1)


def test_the_demands_the_model_used_and_their_errors_against_the_servers_cpu(tmp_path):
    # the model scaled the app's demands by 0.7 (its background taken out): demand_s, over
    # the model's mix, is 0.7 of the estimator's aggregate
    def pred(t):
        return {"time": t, "users": 5, "capacity_users": 30, "model_trusted": False,
                "breach_class": "buy", "flags": [],
                "classes": {"buy": {"throughput": 1.0}, "home": {"throughput": 3.0}},
                "tiers": {"app": {"estimator": "kalman", "demand_s": 0.7 * 0.00175,
                                  "demands": {"buy": {"kalman": 0.004},
                                              "home": {"kalman": 0.001}}}}}
    (row,) = solve_rows([pred(70.0)], start=0.0, end=120.0)
    assert row["tiers"]["app"]["model_demands"] == pytest.approx({"buy": 0.0028,
                                                                 "home": 0.0007})
    truth = {"buy": {"app_demand_s": 0.0025, "app_demand_req_s": 0.0028},
             "home": {"app_demand_s": 0.0007, "app_demand_req_s": None}}
    errs = demand_errors([row, row], truth)
    assert errs["app vs app_demand_s"]["buy"]["last"] == pytest.approx(0.12)
    assert errs["app vs app_demand_s"]["buy"]["median"] == pytest.approx(0.12)
    assert errs["app vs app_demand_req_s"]["home"] == {"last": None, "median": None}
    assert errs["db vs db_backend_cpu_s"]["buy"] == {"last": None, "median": None}
    text = report({"knee_users": 37.0, "users": 5, "share_of_knee": 0.14, "capacity_users": 30,
                   "error": -0.19, "capacity_median": 30, "within_15": 0,
                   "demand_errors": errs, "solves": [row]})
    assert "app vs app_demand_s: buy +12 / +12%, home +0 / +0%" in text
