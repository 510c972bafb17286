"""The testbed campaign's arithmetic (bench/testbed/campaign.py, load.py's closed ramp): the
measured knee, the join schedule of a ramp, the tables. The campaign itself needs the testbed
and a quiet machine: it is a benchmark, not a test."""

import argparse

import pytest

from bench.testbed import campaign
from bench.testbed.campaign import knee, markdown, misnamed_alerts, signed_error
from bench.testbed.truth import ResponseStats, category_sizes, request_work
from bench.testbed.load import join_times


def test_knee_is_linear_between_the_populations_around_the_crossing():
    assert knee([(5, 0.3), (10, 0.5), (20, 0.8), (30, 1.4)]) == pytest.approx(20 + 10 * 0.2 / 0.6)
    assert knee([(30, 1.4), (5, 0.3), (20, 0.8)]) == pytest.approx(20 + 10 * 0.2 / 0.6)


def test_a_ramp_the_load_generator_would_refuse_is_refused_before_any_run(capsys):
    assert campaign.ramp_arg("5:35:2700") == (5, 35, 2700)
    # one load lasts at most 3600 s: a ramp longer than the load's bound once ended a campaign
    # after its steady runs
    for bad in ("5:45:4000", "5:45", "45:5:600", "0:5:600", "5:x:600", "5:45:0"):
        with pytest.raises(argparse.ArgumentTypeError, match="FROM:TO:SECONDS"):
            campaign.ramp_arg(bad)
    with pytest.raises(SystemExit):
        campaign.main(["--out", "/nonexistent/never-made", "--duration", "4000", "--no-up"])
    assert "--duration must be within (0, 3600] s" in capsys.readouterr().err


def test_knee_is_none_when_no_run_crosses():
    assert knee([(5, 0.3), (10, 0.9)]) is None
    assert knee([(5, 1.2), (10, 1.9)]) is None


def test_a_closed_ramp_adds_one_user_at_a_time_evenly():
    t = join_times(2, 6, 100.0)
    assert t == [0.0, 0.0, 20.0, 40.0, 60.0, 80.0]
    assert join_times(3, None, 100.0) == [0.0, 0.0, 0.0]
    assert join_times(3, 3, 100.0) == [0.0, 0.0, 0.0]


def test_errors_need_a_positive_truth():
    assert signed_error(1.2, 1.0) == pytest.approx(0.2)
    assert signed_error(1.0, 0.0) is None and signed_error(None, 1.0) is None


def test_the_tables_state_every_run_and_the_disturbed_ones():
    run = {"users": 5, "disturbed": True, "worst_over_slo": 0.4,
           "foreign": {"foreign_share": 0.08},
           "perfcast": {"solves": 3, "capacity_users": 40, "model_trusted": False,
                        "trusted_solves": 0,
                        "response_time": {"a": {"error": 0.1}, "b": {"error": -0.3}},
                        "demands": {"db": {"a": {"error": 0.05}, "b": {"error": None}},
                                    "app": {"a": {"error": -0.5}, "b": {"error": 0.0}}}}}
    text = markdown({"slo_s": {"a": 0.1, "b": 0.2}, "knee_users": 25.0, "runs": [run],
                     "low_load": {"users": 5, "capacity_users": 40, "error": 0.6}})
    assert "| 5 | 0.080 (disturbed) | 0.40 | 40 | False (0/3) | +10% / -30% | +5% / - |" in text
    assert "measured knee 25.0 users" in text and "(+60%)" in text


def _minute(**means: float) -> list[ResponseStats]:
    return [ResponseStats(c, 10, 1.0, m, m, m, m) for c, m in means.items()]


def test_an_alert_naming_a_quiet_class_while_another_breaks_is_misnamed():
    class T:
        minutes = {0: _minute(buy=0.05, search=0.30), 1: _minute(buy=0.09, search=0.30),
                   2: _minute(buy=0.05, search=0.15)}
    slo = {"buy": 0.1, "search": 0.2}
    alerts = [{"alert": "predicted_breach", "state": "firing", "class": c, "time": 1000.0 + s}
              for c, s in [("buy", 30.0), ("search", 40.0), ("buy", 70.0), ("buy", 130.0)]]
    alerts.append({"alert": "predicted_breach", "state": "resolved", "class": "buy",
                   "time": 1010.0})
    bad = misnamed_alerts(alerts, T, slo, 1000.0)
    # minute 0: buy at 50% of its SLO while search breaks; minute 1: buy at 90% is near enough;
    # minute 2: nobody breaks; the search alert names the class breaking; resolved ones are no page
    assert bad == [{"minute": 0.5, "named": "buy", "named_over_slo": 0.5, "breaking": ["search"]}]


def test_a_run_is_judged_by_its_last_solve_before_the_load_ended():
    from bench.testbed.campaign import judge_run

    def pred(t, users, r):
        return {"time": t, "users": users, "capacity_users": 40, "model_trusted": False,
                "classes": {"buy": {"response_time": r, "throughput_measured": 1.0}},
                "tiers": {}}
    truth = {"overall": [{"cls": "buy", "mean_s": 0.010}], "classes": []}
    pc = {"predictions": [pred(130.0, 5, 0.011), pred(160.0, 0, 0.001)], "deadletters": 0}
    got = judge_run(truth, pc, start=0.0, end=150.0)
    assert got["users"] == 5 and got["response_time"]["buy"]["error"] == pytest.approx(0.1)



def test_the_runs_demand_columns_are_the_demands_the_model_solved_with():
    """The model scaled the app's demands by 0.7 (its background taken out): the campaign's
    demand errors read those, the demands the low-load report states too, not the estimator's
    before the scaling."""
    from bench.testbed import lowload
    from bench.testbed.campaign import judge_demands, model_demands

    pred = {"time": 70.0, "classes": {"buy": {"throughput": 1.0, "throughput_measured": 1.0},
                                      "home": {"throughput": 3.0, "throughput_measured": 3.0}},
            "tiers": {"app": {"estimator": "kalman", "demand_s": 0.7 * 0.00175,
                              "demands": {"buy": {"kalman": 0.004}, "home": {"kalman": 0.001}}}}}
    truth = {"classes": [{"cls": "buy", "db_demand_s": None, "app_demand_s": 0.0025,
                          "app_demand_req_s": 0.0028},
                         {"cls": "home", "db_demand_s": None, "app_demand_s": 0.0007,
                          "app_demand_req_s": None}]}
    app = judge_demands(truth, pred)["app"]
    assert app["buy"]["model"] == pytest.approx(0.0028)
    assert app["buy"]["error"] == pytest.approx(0.12)
    assert app["buy"]["error_req"] == pytest.approx(0.0, abs=1e-12)
    assert app["home"]["model"] == pytest.approx(0.0007)
    assert lowload.model_demands is model_demands
    assert "app demand as solved, error" in markdown(
        {"slo_s": {"buy": 0.1}, "knee_users": None, "runs": []})

def _truth(util: float, busy: float, classes: list[tuple[str, int, float, float, float]]):
    """A truth with the db's busy CPU and per class (name, requests, exec/req, work/req,
    calls/req)."""
    return {"tiers": [{"tier": "db", "busy_s": busy, "background_s": 0.0, "utilization": util}],
            "classes": [{"cls": c, "requests": n, "db_exec_s": e, "db_work": w, "db_calls": k,
                         "db_demand_s": None, "app_demand_s": None}
                        for c, n, e, w, k in classes]}


def test_the_cpu_split_removes_the_wait_of_the_long_statements():
    # lowest load: exec = CPU (short 2 ms, long 10 us per row over 1000 rows), 1 s outside the
    # statements over 200 calls; busier run: the long class's elapsed time doubled by waiting,
    # its searches over 2000 rows, the busy CPU exactly the wait-free work plus the same 5 ms
    # per call outside them
    low = _truth(0.05, 100 * 0.002 + 100 * 0.010 + 1.0,
                 [("short", 100, 0.002, 1.0, 1.0), ("long", 100, 0.010, 1000.0, 1.0)])
    busy = 400 * 0.002 + 400 * 0.020 + 800 * 0.005
    high = _truth(0.4, busy, [("short", 400, 0.002, 1.0, 1.0), ("long", 400, 0.040, 2000.0, 1.0)])
    unit = campaign.cpu_split([high, low])
    assert unit["short"] == pytest.approx(0.002) and unit["long"] == pytest.approx(1e-5)
    assert unit[campaign.CALL] == pytest.approx(0.005)
    d = {c["cls"]: c for c in high["classes"]}
    # shared by the wait-free execution (2 : 20 ms): the busy CPU 12.8 s over 400 x 22 ms
    assert d["short"]["db_cpu_s"] == pytest.approx(busy * 0.002 / (400 * 0.022))
    assert d["long"]["db_cpu_s"] == pytest.approx(busy * 0.020 / (400 * 0.022))
    # per call, the other edge: exactly the constructed 7 and 25 ms
    assert d["short"]["db_cpu_call_s"] == pytest.approx(0.007)
    assert d["long"]["db_cpu_call_s"] == pytest.approx(0.025)
    # a ramp's truth judged with the steady runs' costs
    ramp = _truth(0.3, busy, [("short", 400, 0.003, 1.0, 1.0), ("long", 400, 0.1, 2000.0, 1.0)])
    campaign.cpu_split([ramp], unit)
    assert ramp["classes"][0]["db_cpu_call_s"] == pytest.approx(0.007)


def test_the_cpu_split_needs_the_work_and_the_execution_times():
    t = _truth(0.05, 1.0, [("a", 10, None, 1.0, 1.0)])
    assert campaign.cpu_split([t]) is None and "db_cpu_s" not in t["classes"][0]


def test_a_search_weighs_the_rows_of_its_category():
    sizes = category_sizes(200_000, 40)
    assert sizes[1] == 46_745 and sizes[40] == 1_169 and sum(sizes.values()) == pytest.approx(
        200_000, rel=1e-3)
    assert request_work("search category 2: 20 results", sizes) == sizes[2]
    assert request_work("product 17", sizes) == 1.0 and request_work(None, sizes) == 1.0


def test_a_measured_backend_cpu_is_the_truth_itself():
    t = _truth(0.05, 1.0, [("a", 10, 0.002, 1.0, 1.0), ("b", 10, 0.05, 1.0, 1.0)])
    t["classes"][0]["db_backend_cpu_s"], t["classes"][1]["db_backend_cpu_s"] = 0.004, 0.03
    campaign.cpu_split([t])
    assert [(c["db_cpu_s"], c["db_cpu_call_s"]) for c in t["classes"]] == [(0.004, 0.004),
                                                                              (0.03, 0.03)]


def test_a_ramps_breach_is_the_first_sustained_one_after_the_warmup():
    from bench.testbed.campaign import breach_minute

    class T:   # camp6's open ramp in small: a start-up minute over, a one-minute stall, the load
        minutes = {0: _minute(buy=0.12, search=0.1), 1: _minute(buy=0.03, search=0.1),
                   2: _minute(buy=0.13, search=0.1), 3: _minute(buy=0.04, search=0.1),
                   4: _minute(buy=0.05, search=0.25), 5: _minute(buy=0.11, search=0.1),
                   6: _minute(buy=0.12, search=0.3)}
    slo = {"buy": 0.1, "search": 0.2}
    # minute 0 is the warm-up, minute 2's stall is gone in minute 3; minute 4 (search) runs on
    # into minute 5 (buy): some class over its SLO in both
    assert breach_minute(T, slo) == 4
    assert breach_minute(T, slo, warmup=0, persist=1) == 0    # the rule before
    assert breach_minute(T, slo, persist=3) == 4
    # a breach seen only in the ramp's last minute is not confirmed
    T.minutes = {m: _minute(buy=0.05) for m in range(5)} | {5: _minute(buy=0.2)}
    assert breach_minute(T, slo) is None
