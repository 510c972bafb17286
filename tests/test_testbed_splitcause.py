"""bench.testbed.splitcause: the readings of why a class's database demand reads high."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.testbed.splitcause import main, run_evidence


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
