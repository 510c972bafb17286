"""``perfcast whatif``: each system's last model from an embedded run's store (or from a trace
run first), before and after replicas / cores / a faster CPU -- what a new user sees."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from typer.testing import CliRunner

from streams.cli.commands import app
from streams.cli.demo import DemoScenario, demo_records
from streams.predict.model import MAP_CAPACITY_TOLERANCE

runner = CliRunner()


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """The demo shop's first 25 minutes (front 1 core, db 1 core), as a JSON-lines trace."""
    path = tmp_path_factory.mktemp("whatif") / "trace.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in demo_records(
        DemoScenario(duration_s=1500))) + "\n")
    return path


def _invoke(*args: str):
    return runner.invoke(app, ["whatif", *args], terminal_width=200)


def _capacities(output: str) -> tuple[int, int]:
    m = re.search(r"capacity (\d+) → (\d+)", output)
    assert m, output
    return int(m.group(1)), int(m.group(2))


def _row(output: str, cls: str) -> list[float]:
    line = next(x for x in output.splitlines() if x.strip().startswith(cls + " "))
    return [float(v) for v in line.split()[1:]]


@pytest.mark.slow
def test_whatif_over_a_trace_starts_from_the_last_prediction(trace, tmp_path):
    """``--source``: the pipeline runs first; "before" is the model of the run's last
    prediction (its capacity and per-class response time now), "after" a larger capacity and
    faster responses with a second db replica and a faster front."""
    out = tmp_path / "out"
    result = _invoke("--source", str(trace), "--out", str(out), "--replicate", "db=2",
                     "--cpu-speed", "front=1.5")
    assert result.exit_code == 0, result.output
    last = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()][-1]
    before, after = _capacities(result.output)
    # the MAP network's capacity search stops within its tolerance, from another start here
    assert before == pytest.approx(last["capacity_users"], rel=MAP_CAPACITY_TOLERANCE)
    assert after > before
    for cls, values in last["classes"].items():
        sla, now_before, now_after, fc_before, fc_after = _row(result.output, cls)
        assert sla == values["sla_s"]
        assert now_before == pytest.approx(values["response_time"], abs=6e-4)
        assert fc_before == pytest.approx(values["response_time_forecast"], abs=6e-4)
        assert now_after < now_before and fc_after < fc_before
    assert "add 1 replica of db; front on a 1.5x faster CPU" in result.output

    again = _invoke("--store", str(out / "perfcast.sqlite"), "--replicate", "db=2",
                    "--cpu-speed", "front=1.5")
    assert again.exit_code == 0, again.output
    assert _capacities(again.output) == (before, after)
    same = _invoke("--store", str(out), "--cores", "db=1")    # the directory works too
    assert same.exit_code == 0 and _capacities(same.output) == (before, before)


@pytest.mark.slow
def test_more_cores_on_a_tier_never_lower_the_capacity(trace, tmp_path):
    out = tmp_path / "out"
    base = _invoke("--source", str(trace), "--out", str(out), "--cores", "db=1")
    assert base.exit_code == 0, base.output
    caps = [_capacities(_invoke("--store", str(out), "--cores", f"db={c}").output)[1]
            for c in (1, 2, 4)]
    assert caps[0] == pytest.approx(_capacities(base.output)[0], rel=MAP_CAPACITY_TOLERANCE)
    assert caps[0] < caps[1] <= caps[2]


@pytest.mark.slow
@pytest.mark.parametrize("args,message", [
    (["--replicate", "nope=2"], "no system has tier 'nope'"),
    (["--replicate", "db"], "expected TIER=VALUE"),
    (["--cpu-speed", "db=0"], "must be a finite number > 0"),
    (["--system", "other"], "no solved model in the store for 'other'"),
])
def test_whatif_refuses_bad_input_naming_it(trace, tmp_path, args, message):
    out = tmp_path / "out"
    assert _invoke("--source", str(trace), "--out", str(out), "--cores", "db=1").exit_code == 0
    result = _invoke("--store", str(out), *(args if args[0] != "--system" else
                                             [*args, "--cores", "db=2"]))
    assert result.exit_code == 2, result.output
    assert message in result.output.replace("\n", " ")


def test_whatif_needs_one_store_with_models(tmp_path):
    assert "exactly one of --store and --source" in _invoke("--cores", "db=2").output
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as db:
        db.execute("CREATE TABLE prediction (time REAL)")
    result = _invoke("--store", str(old), "--cores", "db=2")
    assert result.exit_code == 2 and "holds no model state" in result.output
    missing = _invoke("--store", str(tmp_path / "none.sqlite"), "--cores", "db=2")
    assert missing.exit_code == 2 and "no such file" in missing.output


def test_whatif_without_an_action_says_one_is_needed(tmp_path):
    """No --replicate, --cores or --cpu-speed: nothing to compare (it printed "246 → 246 ...
    no change"), so an error naming the options, exit 2, before any store is read."""
    for args in ([], ["--store", str(tmp_path / "none.sqlite")]):
        result = runner.invoke(app, ["whatif", *args])
        assert result.exit_code == 2, result.output
        assert result.stdout == "", result.stdout
        assert result.stderr.startswith("error: whatif: no change to try: give at least one "
                                        "of --replicate TIER=K, --cores TIER=C, --cpu-speed "
                                        "TIER=S"), result.stderr
