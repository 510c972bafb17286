"""Operating perfcast against the real Kafka (``infra/services.sh``): ``perfcast produce
--source -`` with a byte-order mark and a line that is not UTF-8 -- the worker dead-letters
that line exactly as ``perfcast run`` does and processes everything else, and keeps running;
a worker whose InfluxDB does not answer ends at start with one line. Under ``CI=true`` a
missing service fails (the unit-level twins: ``tests/test_operating.py``)."""

from __future__ import annotations

import json
import socket

import pytest
from typer.testing import CliRunner

from pipeline_harness import (TopicReader, Worker, unique, wait_for, wait_settled,
                              write_config)
from streams.cli.commands import app
from streams.core.config import load_config
from streams.kafka.connect import EXIT_UNREACHABLE
from streams.cli.demo import DemoScenario, demo_records
from streams.kafka.topics import ensure_topics
from test_operating import BOM, NOT_UTF8


def test_stdin_bom_and_invalid_utf8_through_kafka_as_in_run(tmp_path, kafka_bootstrap):
    system = unique("shop")
    good = [json.dumps(r).encode() for r in demo_records(DemoScenario(system=system,
                                                                      duration_s=120))]
    bad = NOT_UTF8.replace(b'"s"', json.dumps(system).encode(), 1)
    trace = BOM + b"\n".join(good[:7] + [bad] + good[7:]) + b"\n"
    config_path = write_config(tmp_path / "perfcast.toml", system, unique("t"))
    config = load_config(config_path)
    ensure_topics(config.kafka, partitions=2)

    source = tmp_path / "trace.jsonl"
    source.write_bytes(trace)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--source", str(source), "--config",
                                      str(config_path), "--out", str(out), "--no-final-solve"])
    assert result.exit_code == 0, result.output
    run_estimates = [json.loads(x) for x in (out / "estimates.jsonl").read_text().splitlines()]
    run_dead = [json.loads(x) for x in (out / "deadletter.jsonl").read_text().splitlines()]
    assert len(run_estimates) == len(good) and len(run_dead) == 1

    readers = {name: TopicReader(kafka_bootstrap, config.kafka.topic(name))
               for name in ("estimates", "deadletter")}
    worker = Worker(config_path, unique("app"), tmp_path / "worker.log").start()
    try:
        result = CliRunner().invoke(app, ["produce", "--source", "-", "--config",
                                          str(config_path), "--bootstrap", kafka_bootstrap],
                                    input=trace)
        assert result.exit_code == 0, result.output
        assert f"sent {len(good) + 1} windows" in " ".join(result.output.split())
        wait_for(lambda: len(readers["estimates"].poll()) >= len(good)
                 and len(readers["deadletter"].poll()) >= 1,
                 timeout=180, what="estimates and the dead letter", worker=worker)
        wait_settled(worker, kafka_bootstrap, config.kafka.topic("windows"), readers)
        assert worker.alive(), worker.log_tail()
        dead = readers["deadletter"].poll()
        assert [d["reason"] for d in dead] == [d["reason"] for d in run_dead]
        assert "not UTF-8" in dead[0]["reason"]
        by_key = {(e["tier"], e["end"]): e for e in readers["estimates"].poll()}
        assert len(by_key) == len(good)
        for e in run_estimates:
            got = by_key[(e["tier"], e["end"])]
            assert got["seq"] == e["seq"] and got["demands"] == pytest.approx(e["demands"],
                                                                               rel=1e-9)
    finally:
        worker.stop()
        for r in readers.values():
            r.close()


def test_worker_with_kafka_up_and_influxdb_unreachable_ends_with_one_line(tmp_path, monkeypatch,
                                                                          kafka_bootstrap):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    monkeypatch.setenv("PERFCAST_INFLUX_URL", f"http://127.0.0.1:{port}")
    config_path = write_config(tmp_path / "perfcast.toml", unique("s"), unique("t"))
    result = CliRunner().invoke(app, ["worker", "--config", str(config_path), "--bootstrap",
                                      kafka_bootstrap, "--connect-timeout", "2"])
    assert result.exit_code == EXIT_UNREACHABLE, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unreachable: InfluxDB at http://127.0.0.1")
