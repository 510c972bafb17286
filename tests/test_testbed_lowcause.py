"""bench.testbed.lowcause: a solve's model re-solved with the run's true inputs one at a time."""

import json

import numpy as np
import pytest

from bench.testbed.lowcause import capacity, variants
from solvers.pools import PoolSpec
from streams.predict.model import SystemModel, model_capacity

CLASSES = ["home", "search"]


def _model(db_home: float = 0.010) -> SystemModel:
    """The testbed's shape: app then a PS db under one worker, home's db demand ``db_home``."""
    return SystemModel(tiers=["app", "db"], classes=list(CLASSES),
                       D_mc=np.array([[0.002, 0.003], [db_home, 0.060]]),
                       mix=np.array([0.8, 0.2]), servers=np.ones(2), think_time=1.0,
                       sla=np.array([0.016, 0.190]), processes=None, map_limit=10_000,
                       ps=np.array([False, True]), pools=(PoolSpec(1, 0, 2, "workers"),))


def _true() -> dict:
    classes = {"home": {"db_backend_cpu_s": 0.0025, "app_db_wall_s": 0.003,
                        "app_demand_req_s": 0.0015},
               "search": {"db_backend_cpu_s": 0.055, "app_db_wall_s": 0.060,
                          "app_demand_req_s": 0.002}}
    return {"classes": classes, "run": {"mix": {"home": 0.75, "search": 0.25}, "think_s": 1.0},
            "scv": {"home": 1.2, "search": 2.0}}


def test_each_row_replaces_its_own_input_and_the_stored_row_is_the_models_capacity():
    model = _model()
    rows = variants(model, _true())
    assert capacity(model, rows["stored"]) == model_capacity(_model())[0]
    assert rows["db CPU"]["D_mc"].tolist() == [[0.002, 0.003], [0.0025, 0.055]]
    # the split keeps the model's aggregate over its mix; the times' aggregate keeps its split
    split = rows["db split"]["D_mc"][1]
    assert float(model.mix @ split) == pytest.approx(float(model.mix @ model.D_mc[1]))
    assert split[0] / split[1] == pytest.approx(0.003 / 0.060)
    times = rows["db times"]["D_mc"][1]
    assert float(model.mix @ times) == pytest.approx(0.8 * 0.003 + 0.2 * 0.060)
    assert times[0] / times[1] == pytest.approx(0.010 / 0.060)
    assert rows["mix"]["mix"].tolist() == [0.75, 0.25]
    # the heaviest class's SCV at the db, the db time outside its CPU as a delay
    scv = rows["SCV"]["class_scv"]
    assert scv[1, 1] == 2.0 and np.isnan(scv[1, 0]) and np.isnan(scv[0]).all()
    assert rows["all true"]["delays"][1].tolist() == pytest.approx([0.0005, 0.005])


def test_a_dear_light_class_lowers_the_capacity_and_the_truth_raises_it():
    # home's SLO leaves ~10 ms for the wait: 10 ms of db demand on it leaves almost none
    model = _model()
    rows = variants(model, _true())
    assert capacity(model, rows["db CPU"]) > capacity(model, rows["stored"])
    # the heavy class's spread lengthens the wait for the worker: the capacity falls
    assert capacity(model, rows["all true + SCV"]) < capacity(model, rows["all true"])


def test_lowload_prints_the_causes_table_given_the_raw_campaign(monkeypatch, capsys, tmp_path):
    from bench.testbed import lowcause, lowload
    got = {}

    def table(low, knee, src):
        got.update(low=low, knee=knee, src=src)
        return {"knee_users": 14.0, "users": 2, "scv": {"search": 1.6},
                "rows": {"stored": {"last": 5, "error": -0.64, "min": 0, "median": 9,
                                    "max": 16, "within": 8, "solves": 36}}}

    monkeypatch.setattr(lowcause, "table", table)
    assert lowload.main([str(tmp_path / "a"), str(tmp_path / "k"), "--causes",
                         str(tmp_path / "s")]) == 0
    assert got["src"] == tmp_path / "s"
    assert "| stored | 5 | -64% | 0 / 9 / 16 | 8/36 |" in capsys.readouterr().out


def test_the_diagnostic_rows_move_the_latency_the_knees_truth_and_the_pool_route():
    model = _model()
    knee = {"classes": {"home": {"db_backend_cpu_s": 0.002, "app_db_wall_s": 0.004,
                                 "app_demand_req_s": 0.001},
                        "search": {"db_backend_cpu_s": 0.050, "app_db_wall_s": 0.070,
                                   "app_demand_req_s": 0.0015}}}
    rows = variants(model, _true(), knee)
    whole = rows["all true, db time as demand"]
    assert whole["D_mc"][1].tolist() == [0.003, 0.060] and not whole["delays"].any()
    at_knee = rows["all true at the knee"]
    assert at_knee["D_mc"].tolist() == [[0.001, 0.0015], [0.002, 0.050]]
    assert at_knee["delays"][1].tolist() == pytest.approx([0.002, 0.020])
    assert "all true at the knee" not in variants(model, _true())
    # the factor route: the same inputs without the held chain (which takes the db here: one
    # worker, so it shares no core), a different answer
    assert capacity(model, rows["all true, factor route"]) != capacity(model, rows["all true"])


def test_the_route_check_simulates_the_runs_truth_beside_both_pool_routes(tmp_path):
    from bench.testbed.lowcause import route_check, route_report
    classes = [{"cls": c, "requests": 100, "app_demand_req_s": a, "db_backend_cpu_s": d}
               for c, a, d in (("home", 0.0017, 0.0027), ("search", 0.0019, 0.060))]
    run = {"users": 5, "truth": {"classes": classes,
                                 "run": {"mix": {"home": 0.8, "search": 0.2}, "think_s": 1.0}}}
    (tmp_path / "campaign.json").write_text(json.dumps({"runs": [run]}))
    rows = route_check(tmp_path, populations=(5,), seeds=(1,), completions=400)
    r = rows[0]
    assert r["users"] == 5 and r["classes"] == ["home", "search"]
    # search's mean near its demands at 5 users; the two routes differ (the app's classes of
    # unequal cost take the chain there)
    assert 0.06 < r["simulated"][1] < 0.12
    assert r["chain"] != r["factor"]
    assert "| 5 |" in route_report(rows)
