"""The ``perfcast`` command line, embedded commands (``demo``, ``run``): what a new user sees."""

from __future__ import annotations

import gc
import json
import re
import sqlite3
import time

import pytest
from typer.testing import CliRunner

from streams.cli.commands import app
from streams.cli.demo import DemoScenario, demo_records
from streams.core.records import parse_end
from streams.engine.runtime import GC_THRESHOLDS

runner = CliRunner()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_demo_predicts_the_breach_before_it_happens(tmp_path):
    """The default demo: the predicted-breach alert fires minutes before the measured response
    time crosses the SLA, and the outputs are written."""
    out = tmp_path / "demo"
    result = runner.invoke(app, ["demo", "--out", str(out)], env={"COLUMNS": "80"},
                           terminal_width=80)
    assert result.exit_code == 0, result.output
    match = re.search(r"lead: breach predicted (\d+) min (before|after)", result.output)
    assert match and match.group(2) == "before" and int(match.group(1)) >= 3, result.output
    alerts = [json.loads(line) for line in (out / "alerts.jsonl").read_text().splitlines()]
    firing = [a for a in alerts if a["state"] == "firing"]
    kinds = [a["alert"] for a in firing]
    assert kinds.index("predicted_breach") < kinds.index("current_breach")
    _check_the_demo_ends_on_the_solves_that_matter(result.output, firing)
    with sqlite3.connect(out / "perfcast.sqlite") as db:
        n = db.execute("SELECT count(*) FROM prediction WHERE model = 'map'").fetchone()[0]
        assert n > 0
    report = out / "report.html"
    assert f"report: {report}" in result.output.replace("\n", "")
    html = report.read_text(encoding="utf-8")
    assert 'id="overview"' in html and 'data-system="shop"' in html
    assert "predicted the breach <b>" in html


def _check_the_demo_ends_on_the_solves_that_matter(output: str, firing: list[dict]) -> None:
    """At 80 columns: every line fits; the table left on the screen runs from the solve whose
    alert first predicted the breach to the measured breach; each alert is printed once (past
    the first few, counted); the
    summary names the first predicted breach, the measured one and the lead, one sentence ties
    the busiest tier, the breach tier and the remedy together, and the remedy is the one the
    alert named."""
    hhmm = [time.strftime("%H:%M", time.gmtime(parse_end(a["time"]))) for a in firing]
    lines = output.splitlines()
    assert all(len(x) <= 80 for x in lines), [x for x in lines if len(x) > 80]
    predicted = next(a for a in firing if a["alert"] == "predicted_breach")
    measured = next(a for a in firing if a["alert"] == "current_breach")
    at_pred = hhmm[firing.index(predicted)]
    at_meas = hhmm[firing.index(measured)]
    table = output[output.index(f"first predicted breach {at_pred}, measured breach "
                                f"{at_meas}, last solve"):output.index("report: ")]
    rows = [x.split()[0] for x in table.splitlines() if re.match(r"\d\d:\d\d ", x)]
    assert rows[3] == at_pred and at_meas in rows, table
    flat = " ".join(output.split())
    shown = [flat.count(" ".join(a["summary"].split())) for a in firing]
    assert all(n <= 1 for n in shown), firing
    # the console prints the first alerts of a system; the rest are counted, not dropped
    assert all(shown) or f"{shown.count(0)} more of shop in alerts.jsonl" in flat, flat
    summary = flat[flat.index(" summary: "):]
    assert f"first predicted breach {at_pred}: class {predicted['class']!r}" in summary
    assert f"measured breach {at_meas}: class {measured['class']!r}" in summary
    remedy = predicted["summary"].split("; remedy: ", 1)[1]
    assert f"remedy (the alert's): {remedy}" in summary, summary
    assert re.search(r"front is the busiest tier, but db \(bursty, I = [\d.]+\) is where the "
                     r"SLA breaks: it holds \d+% of \w+'s response time there; the remedy acts on "
                     r"db\.", summary), summary


def test_run_over_a_trace_with_bad_lines(tmp_path):
    """``perfcast run`` processes every valid window and dead-letters the bad lines with
    their reason; the SQLite store has one ``tier_estimate`` row per valid window."""
    records = demo_records(DemoScenario(duration_s=300))
    lines = [json.dumps(r) for r in records]
    lines.insert(5, "{oops")
    lines.insert(9, json.dumps({**records[3], "utilization": 1.5}))
    source = tmp_path / "trace.jsonl"
    source.write_text("\n".join(lines) + "\n\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", "--source", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    estimates = (out / "estimates.jsonl").read_text().splitlines()
    dead = [json.loads(x) for x in (out / "deadletter.jsonl").read_text().splitlines()]
    assert len(estimates) == len(records)
    assert [d["field"] for d in dead] == ["record", "utilization"]
    with sqlite3.connect(out / "perfcast.sqlite") as db:
        assert db.execute("SELECT count(*) FROM tier_estimate").fetchone()[0] == len(records)
        assert db.execute("SELECT count(*) FROM deadletter").fetchone()[0] == 2
    assert f"{len(records) + 2} windows" in result.output
    assert 'data-system="shop"' in (out / "report.html").read_text(encoding="utf-8")


def test_commands_run_with_the_tuned_collector(tmp_path):
    """Every command raises the collector's thresholds (:func:`streams.engine.runtime.tune_gc`); the
    worker's core process calls the same function (``streams.kafka.core_process._serve``)."""
    source = tmp_path / "trace.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in demo_records(DemoScenario(duration_s=60))))
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        result = runner.invoke(app, ["run", "--source", str(source), "--out",
                                     str(tmp_path / "out")])
        assert result.exit_code == 0, result.output
        assert gc.get_threshold() == GC_THRESHOLDS != (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_report_command_writes_the_page(tmp_path):
    """``perfcast report`` takes the store (or the run's directory) and writes one page."""
    run_dir = tmp_path / "run"
    source = tmp_path / "trace.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in demo_records(DemoScenario(
        duration_s=300))) + "\n")
    assert runner.invoke(app, ["run", "--source", str(source), "--out",
                               str(run_dir)]).exit_code == 0
    for store in (run_dir / "perfcast.sqlite", run_dir):
        out = tmp_path / "pages" / f"{store.name}.html"
        result = runner.invoke(app, ["report", "--store", str(store), "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert "report of 1 system (shop)" in result.output
        html = out.read_text(encoding="utf-8")
        assert html.startswith("<!DOCTYPE html>") and 'data-system="shop"' in html
    # the store is one file after the run and after reading it (no WAL files left beside it)
    assert [p.name for p in run_dir.glob("perfcast.sqlite*")] == ["perfcast.sqlite"]
    config = tmp_path / "perfcast.toml"
    config.write_text("[defaults]\nidc_threshold = 40\n")
    out = tmp_path / "configured.html"
    result = runner.invoke(app, ["report", "--store", str(run_dir), "--out", str(out),
                                 "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "idc_threshold 40: above, MAP network" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("name, content, reason", [
    ("missing.sqlite", None, "no such file"),
    ("notes.txt", "not a database\n" * 100, "not a SQLite database"),
    ("empty.sqlite", "", "empty file"),
])
def test_report_command_rejects_a_bad_store(tmp_path, name, content, reason):
    store = tmp_path / name
    if content is not None:
        store.write_text(content)
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", "--store", str(store), "--out", str(out)])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert reason in text and name in text
    assert "Traceback" not in result.output and not out.exists()


def test_report_command_rejects_a_bad_config(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[defaults]\nidc_threshold = -1\n")
    result = runner.invoke(app, ["report", "--store", str(tmp_path), "--config", str(config)])
    assert result.exit_code == 2
    assert "defaults.idc_threshold" in result.output


def test_run_reports_a_bad_config_file_by_key(tmp_path):
    source = tmp_path / "trace.jsonl"
    source.write_text(json.dumps(demo_records(DemoScenario(duration_s=10))[0]) + "\n")
    config = tmp_path / "bad.toml"
    config.write_text("[defaults]\nsolve_interval_s = -5\n")
    result = runner.invoke(app, ["run", "--source", str(source), "--config", str(config),
                                 "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "defaults.solve_interval_s" in result.output


def test_a_demo_started_later_moves_the_windows_and_keeps_their_spacing():
    """``perfcast produce --source demo --start T``: the first window starts at T."""
    from streams.core.records import parse_end

    records = demo_records(DemoScenario(duration_s=60))
    start = 1_900_000_000.0
    shifted = demo_records(DemoScenario(duration_s=60, start_s=start))
    ends = [parse_end(r["end"]) for r in records]
    moved = [parse_end(r["end"]) for r in shifted]
    assert moved[0] - records[0]["window_s"] == pytest.approx(start)
    assert [b - a for a, b in zip(moved, moved[1:])] == pytest.approx(
        [b - a for a, b in zip(ends, ends[1:])])
    assert all({**r, "end": None} == {**s, "end": None} for r, s in zip(records, shifted))


@pytest.mark.parametrize("args, message", [
    (["--source", "demo", "--start", "yesterday"], "not an ISO-8601 time"),
    (["--source", "trace.jsonl", "--start", "now"], "only with --source demo"),
])
def test_produce_rejects_a_bad_start_before_connecting(tmp_path, args, message):
    result = runner.invoke(app, ["produce", "--bootstrap", "127.0.0.1:9", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_the_help_lists_each_command_with_its_summary_unbroken():
    """``perfcast --help`` lists each command by its short help, whole at 80 columns (click
    cuts a docstring's first sentence with "..." where it is longer), and a command's own
    help keeps ``[input]`` as written (rich's markup read it as a style tag)."""
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    demo = next(line for line in result.output.splitlines() if line.startswith("  demo "))
    assert "predict its SLA breach (embedded)" in demo, result.output
    commands = result.output[result.output.index("Commands:"):]
    assert "..." not in commands, result.output
    produce = runner.invoke(app, ["produce", "--help"], env={"COLUMNS": "200"})
    text = " ".join(produce.output.split())
    assert "With an [input] metric format in --config" in text, produce.output
    prom = runner.invoke(app, ["ingest", "prometheus", "--help"], env={"COLUMNS": "200"})
    assert "(default prometheus-SYSTEM.checkpoint.json)" in " ".join(prom.output.split()), \
        prom.output
