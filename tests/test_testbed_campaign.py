"""The testbed campaign's arithmetic (bench/testbed/campaign.py, load.py's closed ramp): the
measured knee, the join schedule of a ramp, the tables. The campaign itself needs the testbed
and a quiet machine: it is a benchmark, not a test."""

import pytest

from bench.testbed.campaign import _err, knee, markdown, misnamed_alerts
from bench.testbed.truth import ResponseStats
from bench.testbed.load import join_times


def test_knee_is_linear_between_the_populations_around_the_crossing():
    assert knee([(5, 0.3), (10, 0.5), (20, 0.8), (30, 1.4)]) == pytest.approx(20 + 10 * 0.2 / 0.6)
    assert knee([(30, 1.4), (5, 0.3), (20, 0.8)]) == pytest.approx(20 + 10 * 0.2 / 0.6)


def test_knee_is_none_when_no_run_crosses():
    assert knee([(5, 0.3), (10, 0.9)]) is None
    assert knee([(5, 1.2), (10, 1.9)]) is None


def test_a_closed_ramp_adds_one_user_at_a_time_evenly():
    t = join_times(2, 6, 100.0)
    assert t == [0.0, 0.0, 20.0, 40.0, 60.0, 80.0]
    assert join_times(3, None, 100.0) == [0.0, 0.0, 0.0]
    assert join_times(3, 3, 100.0) == [0.0, 0.0, 0.0]


def test_errors_need_a_positive_truth():
    assert _err(1.2, 1.0) == pytest.approx(0.2)
    assert _err(1.0, 0.0) is None and _err(None, 1.0) is None


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
