"""``python -m bench.accuracy.shapes --quick`` end to end: three held-out shapes simulated,
their truth found, their windows through the embedded pipeline, every solve recorded with its
errors and trust. A simulation and three pipeline runs: slow."""

from __future__ import annotations

import math

import pytest

from bench.accuracy import shapes


@pytest.mark.slow
def test_quick_run_records_every_solve_with_its_trust():
    doc = shapes.main(["--quick"])
    assert doc["complete"] and [r["shape"] for r in doc["shapes"]] == list(shapes.QUICK)
    summary = doc["summary"]
    assert summary["shapes"] == summary["shapes_solved"] == 3
    for r in doc["shapes"]:
        assert math.isfinite(r["capacity_truth"]) and r["users"] >= 1
        assert r["R_truth"] > 0 and r["solves"]
        for s in r["solves"]:
            assert s["capacity"] is not None and math.isfinite(s["R_error"])
            assert isinstance(s["trusted"], bool)
            assert (s["trust_reasons"] == []) == s["trusted"]
            # a solve is not trusted before a full error window has been pooled
            if (s["model_error_solves"] or 0) < 10:
                assert not s["trusted"]
    assert summary["solves_R_off_20"] == sum(
        abs(s["R_error"]) > 0.2 for r in doc["shapes"] for s in r["solves"])
