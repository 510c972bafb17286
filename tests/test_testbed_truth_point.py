"""The testbed's point truth of the per-class demands (bench/testbed/pointtruth.py) and the
campaign's judgements that use it: the servers' own CPU per request, over a whole run or over
the first minutes of a ramp from the counters kept from Prometheus, and the open ramp's flat
part. No services: Prometheus' answers are stood in for."""

import argparse

import pytest

from bench.testbed import campaign, pointtruth
from bench.testbed.campaign import flat_part, open_ramp_arg, point_markdown, ramp_point
from bench.testbed.load import rate_at
from bench.testbed.pointtruth import interval_truth, judge_point, point_truth, worst


def _truth(db_busy=2.0, app_busy=1.5, duration=100.0, backend=(0.004, 0.030),
           app_cpu=(0.002, 0.003), requests=(200, 50)):
    return {"duration_s": duration,
            "tiers": [{"tier": "db", "busy_s": db_busy, "background_s": 0.5,
                       "utilization": db_busy / duration},
                      {"tier": "app", "busy_s": app_busy, "background_s": 1.0,
                       "utilization": app_busy / duration}],
            "classes": [{"cls": c, "requests": n, "db_backend_cpu_s": b, "app_cpu_s": a}
                        for c, n, b, a in zip(("a", "b"), requests, backend, app_cpu)]}


def test_the_counted_cpu_is_the_truth_and_the_coverage_says_what_it_leaves_out():
    t = _truth()            # db: 200 x 4 ms + 50 x 30 ms = 2.3 s counted against 2.0 s busy
    pt = point_truth(t)
    assert pt["db"]["coverage"] == pytest.approx((0.8 + 1.5) / 2.0)
    assert pt["db"]["classes"]["a"] == {"counted": 0.004,
                                        "busy": pytest.approx(0.004 * 2.0 / 2.3)}
    assert pt["app"]["coverage"] == pytest.approx((0.4 + 0.15) / 1.5)
    assert pt["app"]["classes"]["b"]["busy"] == pytest.approx(0.003 * 1.5 / 0.55)


def test_a_tier_without_the_counter_for_some_class_is_not_judged():
    t = _truth()
    t["classes"][1]["db_backend_cpu_s"] = None
    assert set(point_truth(t)) == {"app"}
    t["tiers"] = []                     # no busy CPU: the counted truth stands, no coverage
    pt = point_truth(t)
    assert pt["app"]["coverage"] is None and pt["app"]["classes"]["a"]["busy"] is None


def test_the_model_is_judged_against_the_counted_cpu_and_its_split_of_the_busy():
    used = {"db": {"a": 0.0044, "b": 0.024}, "app": {"a": 0.002}}
    j = judge_point(_truth(), used)
    assert j["db"]["classes"]["a"]["error"] == pytest.approx(0.1)
    assert j["db"]["classes"]["b"]["error"] == pytest.approx(-0.2)
    assert j["db"]["classes"]["a"]["error_busy"] == pytest.approx(0.0044 / (0.004 * 2 / 2.3) - 1)
    assert j["app"]["classes"]["b"]["model"] is None and j["app"]["classes"]["b"]["error"] is None
    assert worst(j, "db") == pytest.approx(0.2) and worst(j, "app") == pytest.approx(0.0)
    assert worst(j, "none") is None


def _counters():
    """Counters sampled every 10 s from t = 0 to 600: class a completes 2/s with 4 ms of backend
    CPU each, class b 1/s with 30 ms; the db group's CPU grows 0.2 s/s."""
    ts = [10.0 * i for i in range(61)]
    return {"step": 10.0, "from": 0.0, "to": 600.0,
            "classes": {"requests": {"a": [[t, 2 * t] for t in ts], "b": [[t, t] for t in ts]},
                        "db_backend_cpu_s": {"a": [[t, 0.008 * t] for t in ts],
                                             "b": [[t, 0.03 * t] for t in ts]},
                        "app_cpu_s": {"a": [[t, 0.004 * t] for t in ts]}},
            "tiers": {"db": [[t, 0.2 * t] for t in ts]}}


def test_an_interval_reads_the_counters_between_the_samples_around_it():
    part = interval_truth(_counters(), 15.0, 315.0, {"db": 0.01})
    a, b = part["classes"]
    assert (a["cls"], a["requests"], b["requests"]) == ("a", pytest.approx(600.0),
                                                        pytest.approx(300.0))
    assert a["db_backend_cpu_s"] == pytest.approx(0.004) and b["db_backend_cpu_s"] == (
        pytest.approx(0.03))
    assert a["app_cpu_s"] == pytest.approx(0.002) and b["app_cpu_s"] is None
    (db,) = part["tiers"]
    assert db["busy_s"] == pytest.approx(0.2 * 300 - 0.01 * 300)
    # outside the samples: no figure rather than a guess
    assert interval_truth(_counters(), 300.0, 700.0)["classes"] == []


def test_counters_born_inside_the_interval_move_its_start_for_every_figure():
    c = _counters()
    c["classes"]["requests"]["b"] = c["classes"]["requests"]["b"][2:]     # from t = 20
    part = interval_truth(c, 0.0, 300.0)
    assert part["from"] == 20.0
    a, b = part["classes"]
    assert a["requests"] == pytest.approx(560.0) and b["requests"] == pytest.approx(280.0)
    assert b["db_backend_cpu_s"] == pytest.approx(0.03)
    assert part["tiers"][0]["busy_s"] == pytest.approx(0.2 * 280)


def test_the_counters_are_fetched_in_pieces_prometheus_answers(monkeypatch):
    calls = []

    def fake(prom, query, t0, t1, step):
        calls.append((query, t0, t1))
        label = "handler" if "handler" in query else "groupname"
        return [{"metric": {label: "x"}, "values": [[t0, "1"], [t1, "2"]]}]

    monkeypatch.setattr(pointtruth, "_query_range", fake)
    got = pointtruth.fetch_counters("http://127.0.0.1:1", 0.0, 150_000.0, step=10.0)
    spans = sorted({(a, b) for _, a, b in calls})
    assert spans == [(0.0, 100_000.0), (100_010.0, 150_000.0)]
    assert got["classes"]["requests"]["x"] == [[0.0, 1.0], [100_000.0, 2.0],
                                               [100_010.0, 1.0], [150_000.0, 2.0]]
    assert set(got["tiers"]) == {"x"}
    with pytest.raises(ValueError, match="t1 > t0"):
        pointtruth.fetch_counters("http://127.0.0.1:1", 5.0, 5.0)


def _pred(t, db_a, db_b, rt=0.01, trusted=False):
    return {"time": t, "model_trusted": trusted,
            "classes": {"a": {"throughput_measured": 2.0, "response_time": rt},
                        "b": {"throughput_measured": 1.0, "response_time": 2 * rt}},
            "tiers": {"db": {"estimator": "kalman",
                             "demands": {"a": {"kalman": db_a}, "b": {"kalman": db_b}}}}}


def test_a_ramp_is_judged_whole_and_after_its_first_minutes():
    truth = _truth()
    truth["tiers"] = [{"tier": "db", "busy_s": 0.0, "background_s": 0.0, "utilization": 0.0}]
    pc = {"predictions": [_pred(200.0, 0.003, 0.03), _pred(300.0, 0.0044, 0.027),
                          _pred(590.0, 0.005, 0.03), _pred(610.0, 1.0, 1.0)]}
    got = ramp_point(truth, pc, start=0.0, end=600.0, counters=_counters(), minutes=5.0)
    # the whole ramp: the last solve before its end against the log's counters
    assert got["whole"]["db"]["classes"]["a"]["error"] == pytest.approx(0.25)
    # the first five minutes: the solve at 300 s against the counters of 0-300 s
    assert got["at_min"] == 5.0 and got["at_solve"] == 300.0
    assert got["at"]["db"]["classes"]["a"]["error"] == pytest.approx(0.1)
    assert got["at"]["db"]["classes"]["b"]["error"] == pytest.approx(-0.1)
    assert "at" not in ramp_point(truth, pc, 0.0, 600.0, None, 5.0)


def _minutes(**per_minute):
    return {m: [{"cls": c, "n": n, "mean_s": r} for c, (n, r) in rows.items()]
            for m, rows in per_minute.items()}


def test_the_flat_part_is_judged_over_its_settled_second_half():
    t = {"minutes": {0: [{"cls": "a", "n": 100, "mean_s": 9.0}],   # warm-up: left out
                     2: [{"cls": "a", "n": 100, "mean_s": 0.010},
                         {"cls": "b", "n": 10, "mean_s": 0.030}],
                     "3": [{"cls": "a", "n": 300, "mean_s": 0.014},
                           {"cls": "b", "n": 0, "mean_s": float("nan")},
                           {"cls": "all", "n": 300, "mean_s": 0.014}],
                     4: [{"cls": "a", "n": 100, "mean_s": 0.5}]}}   # the ramp: left out
    preds = [_pred(100.0, 0, 0, rt=1.0), _pred(130.0, 0, 0, rt=0.012, trusted=True),
             _pred(235.0, 0, 0, rt=0.014), _pred(250.0, 0, 0, rt=1.0)]
    got = flat_part(t, preds, start=0.0, hold=240.0)
    assert (got["from_min"], got["to_min"], got["solves"], got["trusted_solves"]) == (2, 3, 2, 1)
    assert got["classes"]["a"]["measured"] == pytest.approx(0.013)
    assert got["classes"]["a"]["error"] == pytest.approx(0.013 / 0.013 - 1.0)
    assert got["classes"]["b"]["model"] == pytest.approx(0.026)
    assert got["classes"]["b"]["error"] == pytest.approx(0.026 / 0.030 - 1.0)
    assert "all" not in got["classes"]
    assert flat_part(t, preds, 0.0, 60.0) is None


def test_an_open_ramp_holds_its_first_rate_then_ramps_to_the_last():
    assert rate_at(0.0, 10.0, 30.0, 1000.0, hold=400.0) == 10.0
    assert rate_at(400.0, 10.0, 30.0, 1000.0, hold=400.0) == 10.0
    assert rate_at(700.0, 10.0, 30.0, 1000.0, hold=400.0) == pytest.approx(20.0)
    assert rate_at(1000.0, 10.0, 30.0, 1000.0, hold=400.0) == pytest.approx(30.0)
    assert rate_at(500.0, 10.0, 30.0, 1000.0) == pytest.approx(20.0)   # no hold: as before
    assert rate_at(500.0, 10.0, None, 1000.0, hold=100.0) == 10.0
    assert open_ramp_arg("18:58:1500:600") == (18.0, 58.0, 1500.0, 600.0)
    assert open_ramp_arg("4:8:60") == (4.0, 8.0, 60.0)
    for bad in ("4:8", "4:8:60:60", "0:8:60", "4:x:60", "4:8:60:-1", "4:900:60", "4:8:3601"):
        with pytest.raises(argparse.ArgumentTypeError, match="R0:R1:SECONDS"):
            open_ramp_arg(bad)


def test_the_point_table_has_a_row_per_run_and_per_ramp_part():
    j = judge_point(_truth(), {"db": {"a": 0.0044, "b": 0.024}, "app": {"a": 0.002,
                                                                       "b": 0.003}})
    res = {"slo_s": {"a": 0.1, "b": 0.2},
           "runs": [{"users": 5, "perfcast": {"point": j}}, {"users": 10, "perfcast": {}}],
           "ramp": {"point": {"whole": j, "at_min": 10.0, "at": j}}}
    lines = point_markdown(res)
    assert "| 5 | 1.15 | +10% / -20% |" in "\n".join(lines)
    assert [x.split(" |")[0] for x in lines if x.startswith("| ") and "%" in x] == [
        "| 5", "| closed ramp, whole", "| closed ramp, first 10 min"]
    assert point_markdown({"slo_s": {"a": 0.1}, "runs": [{"users": 5, "perfcast": {}}]}) == []
    assert campaign.POINT_MINUTES == 10.0
