"""bench.testbed.splitcause: the readings of why a class's database demand reads high."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.testbed.splitcause import edge_errors, main, run_evidence, trip_delay_fit


def _run(users: int = 5) -> dict:
    """A run whose time at the db is 1.6 x the CPU plus 0.3 ms a round trip (buy: four
    statements in one transaction, six round trips)."""
    cpu = {"buy": 0.0022, "home": 0.0023, "product": 0.0041, "search": 0.050}
    calls = {"buy": 4.0, "home": 1.0, "product": 3.0, "search": 1.0}
    n = {"buy": 100, "home": 300, "product": 200, "search": 100}
    trips = {c: calls[c] + (2.0 if c == "buy" else 0.0) for c in cpu}
    classes = [{"cls": c, "requests": n[c], "db_backend_cpu_s": cpu[c], "db_calls": calls[c],
                "app_db_wall_s": 1.6 * cpu[c] + 0.0003 * trips[c]} for c in cpu]
    counted = sum(n[c] * cpu[c] for c in cpu)
    return {"users": users, "truth": {"classes": classes,
                                      "tiers": [{"tier": "db", "busy_s": counted + 1.0}]}}


def test_the_fit_recovers_the_stretch_and_the_latency_per_round_trip(tmp_path):
    ev = run_evidence(_run(), tmp_path, {"buy"})
    assert ev["stretch"] == pytest.approx(1.6) and ev["latency_ms"] == pytest.approx(0.3)
    assert np.allclose(ev["fit_residual"], 0.0, atol=1e-9)
    assert ev["gap_s"] == pytest.approx(1.0)
    assert ev["ratio"][0] > ev["ratio"][1]            # buy's time per CPU second is the highest
    assert "ps_error" not in ev                       # no windows: no split read
    old = _run()
    old["truth"]["classes"][0]["db_backend_cpu_s"] = None  # a log before the app counted it
    assert run_evidence(old, tmp_path, {"buy"}) is None


def test_the_split_is_read_from_the_runs_windows(tmp_path, capsys):
    run = _run()
    rng = np.random.default_rng(0)
    rows = []
    for k in range(30):
        done = {c["cls"]: float(rng.poisson(c["requests"] / 30)) for c in run["truth"]["classes"]}
        u = sum(done[c["cls"]] * c["db_backend_cpu_s"] for c in run["truth"]["classes"]) / 5.0
        rows.append({"tier": "db", "window_s": 5.0, "utilization": u, "completions": done,
                     "response_time_s": {c["cls"]: c["app_db_wall_s"]
                                         for c in run["truth"]["classes"]}})
    (tmp_path / "perfcast-5").mkdir()
    (tmp_path / "perfcast-5" / "prometheus-windows.jsonl").write_text(
        "\n".join(json.dumps(r) for r in rows))
    ev = run_evidence(run, tmp_path / "perfcast-5", {"buy"})
    # the PS reading puts the round trips' time on buy: above its CPU, beyond the others
    assert ev["ps_error"][0] > 0.2 and ev["ps_error"][0] == max(ev["ps_error"])
    (tmp_path / "campaign.json").write_text(json.dumps({"runs": [run]}))
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 5 |" in out and "0.30 ms" in out


def _windows(rng: np.random.Generator, U: np.ndarray, noise: float) -> tuple[np.ndarray, ...]:
    """Windows of a PS db whose classes' times are ``D f(U) + 0.2 ms`` a round trip, each
    class mean noisy by ``noise`` relative."""
    D = np.array([0.0022, 0.0023, 0.0041, 0.050])
    trips = np.array([6.0, 1.0, 3.0, 1.0])
    n = rng.poisson(U[:, None] * 5.0 * np.array([0.3, 0.3, 0.2, 0.2]) / (
        0.3 * D[0] + 0.3 * D[1] + 0.2 * D[2] + 0.2 * D[3])).astype(float)
    X = n / 5.0
    Ut = (X @ D)
    f = 1.0 / (1.0 - Ut)
    R = (D[None, :] * f[:, None] + 0.0002 * trips) * (
        1.0 + noise * rng.standard_normal(n.shape) / np.sqrt(np.maximum(n, 1.0)))
    return Ut, X, n, np.where(n > 0, R, np.nan), trips, D


def test_windows_spanning_loads_give_the_latency_per_round_trip_and_the_demands():
    rng = np.random.default_rng(3)
    U, X, n, R, trips, D = _windows(rng, np.linspace(0.05, 0.6, 300), 0.2)
    fit = trip_delay_fit(U, X, n, R, trips)
    assert abs(fit["latency_ms"] - 0.2) <= max(fit["latency_ci_ms"], 0.02)
    assert fit["latency_ci_ms"] < 0.1
    assert np.allclose(fit["demands"], D, rtol=0.1)


def test_a_steady_load_leaves_the_latency_per_round_trip_open():
    rng = np.random.default_rng(4)
    U, X, n, R, trips, _ = _windows(rng, np.full(120, 0.07), 1.0)
    fit = trip_delay_fit(U, X, n, R, trips)
    # the stretch hardly moves: the interval is wider than the latency itself
    assert fit["latency_ci_ms"] > 0.2
    assert trip_delay_fit(U, X, np.zeros_like(n), R, trips) is None   # no class timed


def test_an_open_ramp_is_read_from_its_load_log_and_windows(tmp_path, capsys):
    rng = np.random.default_rng(5)
    U, X, n, R, trips, D = _windows(rng, np.linspace(0.05, 0.6, 200), 0.2)
    classes = ["buy", "home", "product", "search"]
    tot = n.sum(axis=0)
    wall = np.nansum(np.where(n > 0, n * R, 0.0), axis=0)
    app = {c: {"requests": float(tot[i]), "db_s": float(wall[i]),
               "db_cpu_s": float(tot[i] * D[i])} for i, c in enumerate(classes)}
    pg = {c: {"calls": float(tot[i] * (trips[i] - (2 if c == "buy" else 0))), "exec_s": 0.0}
          for i, c in enumerate(classes)}
    lines = [{"kind": "snapshot", "at": "start", "t": 0.0, "pg": {}, "app": {},
              "cpu_s": {"db": 0.0, "app": 0.0}},
             {"kind": "run", "mode": "open", "start": 0.0, "duration_s": 1000.0},
             *({"class": c, "start": 1.0, "end": 1.01, "status": 200} for c in classes),
             {"kind": "snapshot", "at": "end", "t": 1000.0, "pg": pg, "app": app,
              "cpu_s": {"db": float(tot @ D) + 1.0, "app": 1.0}}]
    (tmp_path / "load-open-ramp.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    (tmp_path / "perfcast-open-ramp").mkdir()
    (tmp_path / "perfcast-open-ramp" / "prometheus-windows.jsonl").write_text("\n".join(
        json.dumps({"tier": "db", "window_s": 5.0, "utilization": float(U[k]),
                    "completions": dict(zip(classes, n[k].tolist())),
                    "response_time_s": {c: float(R[k, i]) for i, c in enumerate(classes)
                                        if n[k, i] > 0}}) for k in range(len(U))))
    (tmp_path / "campaign.json").write_text(json.dumps({"runs": []}))
    assert main([str(tmp_path)]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("| open ramp"))
    cells = [x.strip() for x in row.strip(" |").split("|")]
    # the log's own fit and the windows' alone: about 0.2 ms a round trip, the windows' demands
    # within a few percent
    assert 0.15 < float(cells[4].split(", ")[1].split()[0]) < 0.25
    windows_l, windows_d = cells[9].split(" ms, ")
    assert abs(float(windows_l.split(" +- ")[0]) - 0.2) < 0.03
    assert all(abs(float(x.strip(" %"))) <= 5 for x in windows_d.split(" / "))


def test_the_time_edges_split_against_the_cpu():
    """A time proportional to the CPU splits it exactly; an edge that adds (or leaves out) a
    fixed time per round trip puts more (less) on the class of many trips; the midpoint of two
    edges whose parts outside the CPU cancel is exact."""
    n = np.array([100.0, 300.0, 200.0, 100.0])
    cpu = np.array([0.0022, 0.0023, 0.0041, 0.050])
    trips = np.array([6.0, 1.0, 3.0, 1.0])
    wall, exec_s = cpu + 0.0003 * trips, cpu - 0.0003 * trips
    got = edge_errors(n, cpu, wall, exec_s)
    assert np.allclose(got["midpoint"], 0.0, atol=1e-12)
    assert got["wall"][0] == max(got["wall"]) > 0.3        # buy: six trips
    assert got["exec"][0] == min(got["exec"]) < -0.3
    # the split is judged alone: the times' scale does not matter
    assert np.allclose(edge_errors(n, cpu, 3.0 * cpu, 1.5 * cpu)["wall"], 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="no time"):
        edge_errors(n, cpu, 0.0 * cpu, 0.0 * cpu)


def test_the_edges_are_read_where_the_truth_has_the_execution_time(tmp_path):
    run = _run()
    assert "edges" not in run_evidence(run, tmp_path, {"buy"})
    for c in run["truth"]["classes"]:
        c["db_exec_s"] = 0.9 * c["db_backend_cpu_s"]
    ev = run_evidence(run, tmp_path, {"buy"})
    assert np.allclose(ev["edges"]["exec"], 0.0, atol=1e-12)
    assert ev["edges"]["wall"][0] > ev["edges"]["midpoint"][0] > 0.0
