"""Operating perfcast: ``--version``, ``--source -``, a byte-order mark and
invalid UTF-8 handled alike by ``perfcast run`` and the worker, a run that accepts nothing
exits non-zero with its reasons, every setting documented in docs/configuration.md.

Each case ends the same way: dead-lettered or flagged with its reason, everything else
processed."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from typer.testing import CliRunner

from streams.cli import commands as cli
from streams.cli.commands import EXIT_NOTHING_ACCEPTED, app
from streams.core.config import ENVIRONMENT, InfluxSettings, KafkaSettings, Limits, SystemConfig
from streams.cli.embedded import read_jsonl
from streams.engine.pipeline import Pipeline
from streams.kafka.produce import produce

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def _window(end: float, **extra) -> dict:
    return {"system": "s", "tier": "t", "end": end, "window_s": 5.0, "utilization": 0.5,
            "completions": {"a": 10.0}, **extra}


def _line(end: float, **extra) -> bytes:
    return json.dumps(_window(end, **extra)).encode()


#: a trace with a byte-order mark before its first record, a line that is not UTF-8 and a
#: valid record after it
BOM = b"\xef\xbb\xbf"
NOT_UTF8 = b'{"system": "s", "tier": "t", "end": 15, "window_s": 5, "utilization": 0.5, ' \
           b'"completions": {"caf\xe9": 3}}'
TRACE = BOM + _line(10) + b"\n" + NOT_UTF8 + b"\n\n" + _line(20) + b"\r\n" + _line(25) + b"\n"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert re.fullmatch(r"perfcast \S+.*\n", result.output), result.output


def test_run_reads_standard_input(tmp_path):
    """``--source -``: the trace from standard input, as from a file."""
    out = tmp_path / "out"
    trace = b"".join(_line(10 + 5 * i) + b"\n" for i in range(30))
    result = runner.invoke(app, ["run", "--source", "-", "--out", str(out)], input=trace)
    assert result.exit_code == 0, result.output
    assert len(_jsonl(out / "estimates.jsonl")) == 30
    assert _jsonl(out / "deadletter.jsonl") == []


def test_run_names_a_missing_source_in_one_line(tmp_path):
    result = runner.invoke(app, ["run", "--source", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "source: no such file" in result.output and "Traceback" not in result.output


def test_bom_and_invalid_utf8_alike_in_run_and_worker(tmp_path, monkeypatch):
    """The byte-order mark before the first record is dropped; the line that is not UTF-8 is
    dead-lettered (not replaced and processed), naming the byte -- by ``perfcast run`` and by
    the worker, which receives what ``perfcast produce`` sends; everything else processed."""
    source = tmp_path / "trace.jsonl"
    source.write_bytes(TRACE)
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", "--source", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    run_estimates = _jsonl(out / "estimates.jsonl")
    run_dead = _jsonl(out / "deadletter.jsonl")
    assert [e["end"] for e in run_estimates] == [10.0, 20.0, 25.0]
    assert len(run_dead) == 1 and run_dead[0]["field"] == "record"
    bad_byte = NOT_UTF8.index(b"\xe9")
    assert "not UTF-8" in run_dead[0]["reason"] and f"byte {bad_byte}" in run_dead[0]["reason"]
    assert "dead letters by reason: 1 x record: not UTF-8" in result.output

    # the worker's side: produce sends the lines as they are; the core gets Kafka's bytes
    sent: list[bytes] = []

    class _Producer:
        def send(self, topic, key=None, value=None):
            sent.append(value)

        def flush(self):
            pass

    stats = produce(read_jsonl(source), KafkaSettings(), producer=_Producer())
    assert stats.sent == 4 and not sent[0].startswith(BOM)
    assert NOT_UTF8 in sent                       # not replaced on the way
    worker = Pipeline().process_many(sent)
    assert [e.to_record() for e in worker.estimates] == run_estimates
    assert [d.to_record() for d in worker.deadletter] == run_dead
    # a record that itself starts with a byte-order mark (another producer's) is read too
    again = Pipeline().process_many([BOM + _line(10), (BOM + _line(15)).decode("utf-8")])
    assert len(again.estimates) == 2 and again.deadletter == []


def test_a_run_that_accepts_nothing_exits_non_zero_with_its_reasons(tmp_path):
    """Every record dead-lettered: exit code 3 and one console line counting the reasons."""
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"{oops\n" + _line(10, utilization=1.5) + b"\n"
                       + _line(15, utilization=1.7) + b"\n" + NOT_UTF8 + b"\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", "--source", str(source), "--out", str(out)])
    assert result.exit_code == EXIT_NOTHING_ACCEPTED, result.output
    line = next(x for x in result.output.splitlines()
                if x.startswith("error: no window accepted"))
    assert "all 4 records were dead-lettered" in line
    assert "2 x utilization:" in line and "1 x record: malformed JSON" in line \
        and "1 x record: not UTF-8" in line
    assert len(_jsonl(out / "deadletter.jsonl")) == 4
    assert "Traceback" not in result.output

    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    result = runner.invoke(app, ["run", "--source", str(empty), "--out", str(out)])
    assert result.exit_code == EXIT_NOTHING_ACCEPTED
    assert "the source has no records" in result.output


def test_produce_reads_standard_input(monkeypatch):
    """``perfcast produce --source -``: the lines of standard input reach Kafka as they are
    (the connection is faked here; tests/test_poison_services.py has the real one)."""
    got: list[bytes] = []

    def fake_send(records, settings, rate=None):
        from streams.kafka.produce import ProduceStats
        got.extend(records)
        return ProduceStats(sent=len(got), seconds=0.1)

    monkeypatch.setattr("streams.kafka.topics.ensure_topics", lambda *a, **k: [])
    monkeypatch.setattr("streams.kafka.produce.produce", fake_send)
    result = runner.invoke(app, ["produce", "--source", "-"],
                           input=BOM + _line(10) + b"\n" + NOT_UTF8 + b"\n")
    assert result.exit_code == 0, result.output
    assert got == [_line(10), NOT_UTF8]
    assert "sent 2 windows" in result.output


def test_every_setting_is_in_the_configuration_doc():
    """docs/configuration.md (which ``perfcast worker --help`` points to) lists every setting
    of streams/core/config.py and every environment variable."""
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert "docs/configuration.md" in (cli.worker.__doc__ or "")
    for f in fields(SystemConfig):
        assert f"`{f.name}`" in doc, f.name
    assert "`utilization_tolerance`" in doc
    for f in fields(Limits):
        assert f"`limits.{f.name}`" in doc, f.name
    from streams.core.input_config import InputFormat
    for f in fields(InputFormat):
        if f.name not in ("default", "tiers", "system_label"):
            assert f"`input.{f.name}`" in doc, f.name
    for section, cls in (("kafka", KafkaSettings), ("influxdb", InfluxSettings)):
        for f in fields(cls):
            if f.name not in ("sasl_password", "token"):
                assert f"`{section}.{f.name}`" in doc, f"{section}.{f.name}"
    for var in [*ENVIRONMENT, "PERFCAST_KAFKA_SASL_PASSWORD", "PERFCAST_INFLUX_TOKEN"]:
        assert var in doc, var


# -- Kafka or InfluxDB unreachable at start ---------------------------------------------------

@contextlib.contextmanager
def _port(listen: bool):
    """A local port where nothing answers: closed (connections refused), or listening without
    ever accepting or answering (a firewall that drops, a hung broker)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if listen:
        sock.listen(1)
    else:
        sock.close()
    try:
        yield port
    finally:
        sock.close()


def _one_line_unreachable(result, service: str) -> None:
    from streams.kafka.connect import EXIT_UNREACHABLE

    assert result.exit_code == EXIT_UNREACHABLE, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: unreachable: {service} at "), result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("listen", [False, True], ids=["refused", "silent"])
@pytest.mark.parametrize("command", ["produce", "worker"])
def test_kafka_unreachable_ends_with_one_line(tmp_path, command, listen):
    """Kafka not there (refused, or a port that never answers): one line naming it and exit
    code 4 after the connect timeout, not kafka-python's 30 s of retries and a traceback."""
    source = tmp_path / "one.jsonl"
    source.write_bytes(_line(10) + b"\n")
    with _port(listen) as port:
        args = [command, "--bootstrap", f"127.0.0.1:{port}", "--connect-timeout", "1"]
        if command == "produce":
            args += ["--source", str(source)]
        result = runner.invoke(app, args)
    _one_line_unreachable(result, "Kafka")
    assert f"127.0.0.1:{port}" in result.output and "within 1 s" in result.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("listen", [False, True], ids=["refused", "silent"])
def test_influxdb_unreachable_at_worker_start_ends_with_one_line(monkeypatch, listen):
    """The worker checks InfluxDB's ``/ping`` before it starts (Kafka faked as reachable)."""
    monkeypatch.setattr("streams.kafka.topics.ensure_topics", lambda *a, **k: [])
    with _port(listen) as port:
        monkeypatch.setenv("PERFCAST_INFLUX_URL", f"http://127.0.0.1:{port}")
        result = runner.invoke(app, ["worker", "--connect-timeout", "1"])
    _one_line_unreachable(result, "InfluxDB")


def test_connect_timeout_is_a_setting(tmp_path):
    from streams.core.config import ConfigError, load_config

    path = tmp_path / "c.toml"
    path.write_text("[kafka]\nconnect_timeout_s = 2.5\n[influxdb]\nconnect_timeout_s = 3\n")
    cfg = load_config(path, env={})
    assert (cfg.kafka.connect_timeout_s, cfg.influxdb.connect_timeout_s) == (2.5, 3.0)
    assert load_config(None, env={}).kafka.connect_timeout_s == 10.0
    path.write_text("[kafka]\nconnect_timeout_s = -1\n")
    with pytest.raises(ConfigError, match="kafka.connect_timeout_s"):
        load_config(path, env={})


# -- the demo's live table in an 80-column terminal ------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
def test_demo_live_table_fits_80_columns(tmp_path):
    """``COLUMNS=80 perfcast demo``: no line is wider than 80 characters, every header and
    every cell of the table whole (no ellipsis, no wrapped cell)."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    env.pop("LINES", None)
    proc = subprocess.run([sys.executable, "-m", "streams.cli.commands", "demo", "--duration-s", "1500",
                           "--out", str(tmp_path / "demo")], env=env, cwd=ROOT,
                          capture_output=True, text=True, encoding="utf-8")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(x) for x in lines) <= 80, [x for x in lines if len(x) > 80]
    header = next(i for i, x in enumerate(lines) if x.startswith("time "))
    names = [name for name, _, _ in cli._LiveView.COLUMNS if name != "system"]
    assert lines[header].split() == " ".join(names).split()
    rows = [x for x in lines[header + 2:] if re.match(r"\d\d:\d\d ", x)]
    assert len(rows) >= 5           # the final table: 3 solves before the first predicted breach
    for row in rows:
        cells = row.split()
        assert len(cells) == len(names) and "…" not in row, row
        assert cells[3] in ("mva", "map", "map-fes")


def test_live_table_cells_stay_short():
    """Populations and times to breach of any size keep to their column's width."""
    assert [cli._count(v) for v in (0, 950, 9999, 12_500, 999_999, 3_100_000, 10 ** 9)] \
        == ["0", "950", "9999", "12.5k", "1000k", "3.1M", "1.0G"]
    assert [cli._minutes(s) for s in (42, 216, 3000, 7200, 86_400 * 30)] \
        == ["42s", "3.6m", "50m", "2.0h", "30d"]
