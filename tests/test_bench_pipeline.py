"""bench.speed.pipeline's workloads: the open one (``--open``) is detected open and solved by the
open route on every system; the default one stays closed. No timing is asserted (bench/)."""

import math

import pytest

from bench.speed import pipeline as bp
from streams.core.config import Config
from streams.engine.pipeline import Pipeline


def _predictions(records):
    pipeline, preds, dead = Pipeline(Config()), [], 0
    for i in range(0, len(records), bp.CHUNK):
        out = pipeline.process_many(records[i:i + bp.CHUNK])
        preds += out.predictions
        dead += len(out.deadletter)
    return preds, dead


@pytest.fixture(scope="module")
def open_records():
    # --open --quick's cold workload: 10 systems, 24 window ends
    return bp.workload(10, 24, 0, rates=bp.OPEN_RATES)


def test_the_open_workload_has_rates_and_no_users(open_records):
    assert open_records and all("users" not in r for r in open_records)
    per_s = {}
    for r in open_records:
        if r["tier"] == bp.TIERS[0]:
            per_s.setdefault(r["system"], []).append(sum(r["completions"].values()) / r["window_s"])
    lo, hi = bp.OPEN_RATES
    # each system's mean rate within the drawn range widened by the +-30% swing
    assert all(0.7 * lo <= sum(v) / len(v) <= 1.3 * hi for v in per_s.values())


def test_every_open_system_is_solved_by_the_open_route_with_a_capacity(open_records):
    preds, dead = _predictions(open_records)
    assert dead == 0
    assert {p["system"] for p in preds} == {f"sys{s:03d}" for s in range(10)}
    for p in preds:
        assert p["workload"] == "open"
        assert p["model"] in ("open", "open-map")
        cap = p["capacity_rate_per_s"]
        assert math.isfinite(cap) and cap > 0
        assert p["headroom_rate_per_s"] == pytest.approx(cap - p["arrival_rate_per_s"])
        assert "capacity_users" not in p


def test_the_bench_counts_the_open_predictions_and_their_capacities(open_records):
    run = bp.run_pipeline(open_records, Config())
    solved = run.outputs["predictions"]
    assert solved > 0
    assert run.kinds == {"open": solved} and run.open_capacities == solved
    assert [label for label, _ in bp.kind_rows(run)] == [
        "  workload kinds (predictions)", "  open predictions with a finite capacity_rate_per_s"]


def test_the_default_workload_stays_closed():
    records = bp.workload(3, 24, 0)
    assert all("users" in r for r in records)
    run = bp.run_pipeline(records, Config())
    assert run.outputs["predictions"] > 0
    assert set(run.kinds) == {"closed"} and run.open_capacities == 0
    assert bp.kind_rows(run) == []


def test_the_closed_ratio_times_both_workloads_in_rounds():
    # cold only (no warm-up: a steady one feeds whole chunks, hundreds of ends for 2 systems)
    rows = bp.closed_ratio(2, 24, 0, 0, 0, (50.0, 150.0), bp.OPEN_RATES, Config(), 2)
    labels = [label.strip().split(" (")[0].split(":")[0] for label, _ in rows]
    assert labels == ["open against closed", "cold", "cold"]
    assert rows[1][0].strip().startswith("cold (144 records each)")
    assert rows[2][1].endswith(")")
