"""Each Kafka format through the real worker against the real broker (``infra/services.sh``):
the simulated shop's windows re-told as an agent's samples (``tests/format_samples.py``) --
Telegraf JSON, prometheus-kafka-adapter JSON, OTLP/JSON -- are produced to the source topic,
by ``perfcast produce`` with the same configuration, which keys each by its system as an agent
would be configured to (Telegraf ``routing_tag``, the Collector's
``partition_metrics_by_resource_attributes``); ``perfcast worker`` with ``[input] format``
turns them into windows: its estimates and predictions equal the embedded pipeline's over the
same messages and over the original windows (1e-9), InfluxDB holds every estimate, and the
messages that cannot be mapped are on the dead-letter topic with their reasons. Under
``CI=true`` a missing service fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest

from format_samples import MAPPING, encode
from pipeline_harness import (
    ROOT,
    TopicReader,
    Worker,
    assert_close,
    flux_count,
    unique,
    wait_for,
    wait_settled,
    write_config,
)
from streams.core.config import load_config
from streams.cli.demo import DemoScenario, demo_records
from streams.engine.pipeline import Pipeline
from streams.core.records import parse_end
from streams.kafka.topics import ensure_topics

#: a message of each kind the mapping cannot take, produced midway
BAD = {
    "telegraf": ['{"name": "app", "fields": {"busy_seconds": 1}}',
                 '{"name": "app", "tags": {"namespace": "%s", "service": "front"}, '
                 '"fields": {"busy_seconds": "n/a"}, "timestamp": 1}'],
    "prometheus-kafka-adapter": ['{"value": "1", "name": "app_busy_seconds"}',
                                 '{"timestamp": "1970-01-01T00:00:01Z", "value": "n/a", '
                                 '"name": "app_busy_seconds", "labels": {"namespace": "%s", '
                                 '"service": "front"}}'],
    "otlp-json": ['{"resourceMetrics": {}}',
                  '{"resourceMetrics": [{"resource": {"attributes": [{"key": "namespace", '
                  '"value": {"stringValue": "%s"}}, {"key": "service", "value": '
                  '{"stringValue": "front"}}]}, "scopeMetrics": [{"metrics": [{"name": '
                  '"app_busy_seconds", "sum": {"dataPoints": [{"timeUnixNano": "1000000000", '
                  '"asDouble": "n/a"}]}}]}]}]}'],
}


def _produce(config_path, messages: list[str], tmp_path) -> str:
    """``perfcast produce`` of a file of the messages, with the configuration's ``[input]``:
    each keyed by its system. Returns its output."""
    lines = tmp_path / "samples.jsonl"
    lines.write_text("\n".join(messages) + "\n")
    proc = subprocess.run([sys.executable, "-m", "streams.cli.commands", "produce", "--source",
                           str(lines), "--config", str(config_path)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _shop(tmp_path, fmt: str, duration_s: float, users_end: int):
    """A shop of its own (system, topic prefix), its windows, its configuration with
    ``[input] format = fmt`` and the windows as that format's messages."""
    system, prefix = unique("shop"), unique("t")
    windows = demo_records(DemoScenario(system=system, duration_s=duration_s,
                                        steady_s=duration_s * 0.4, step_s=30, step_users=10,
                                        users_start=20, users_end=users_end))
    config_path = write_config(tmp_path / "perfcast.toml", system, prefix,
                               f'[input]\nformat = "{fmt}"\n{MAPPING}')
    config = load_config(config_path)
    assert config.input is not None and config.input.format == fmt
    return system, windows, config_path, config, encode(windows, fmt)


@pytest.mark.parametrize("fmt", ["telegraf", "prometheus-kafka-adapter", "otlp-json"])
def test_each_format_through_the_worker_on_the_real_broker(fmt, tmp_path, kafka_bootstrap,
                                                          influx_url):
    system, windows, config_path, config, messages = _shop(tmp_path, fmt, 600, 60)
    half = len(messages) // 2
    bad = [b.replace("%s", system) for b in BAD[fmt]]
    messages = messages[:half] + bad + messages[half:]
    expected = Pipeline(config).process_many(messages)
    from_windows = Pipeline(replace(config, input=None)).process_many(windows)
    assert len(expected.estimates) == len(windows) and expected.predictions
    assert_close(expected.estimates, from_windows.estimates, "estimates")
    assert_close(expected.predictions, from_windows.predictions, "predictions")

    ensure_topics(config.kafka, partitions=2)
    readers = {n: TopicReader(kafka_bootstrap, config.kafka.topic(n))
               for n in ("estimates", "predictions", "deadletter")}
    worker = Worker(config_path, unique("app"), tmp_path / "worker.log").start()
    try:
        sent = _produce(config_path, messages, tmp_path)
        assert f"sent {len(messages)} records" in sent, sent
        wait_for(lambda: len(readers["estimates"].poll()) >= len(windows)
                 and len(readers["predictions"].poll()) >= len(expected.predictions)
                 and len(readers["deadletter"].poll()) >= len(bad),
                 400, f"the {fmt} samples' estimates, predictions and dead letters", worker)
        estimates = {(e["tier"], e["seq"]): e for e in readers["estimates"].poll()}
        assert len(estimates) == len(windows)
        for e in expected.estimates:
            assert_close(estimates[(e["tier"], e["seq"])], e, f"estimate {e['tier']}#{e['seq']}")
        predictions = {p["time"]: p for p in readers["predictions"].poll()}
        assert sorted(predictions) == [p["time"] for p in expected.predictions]
        for p in expected.predictions:
            assert_close(predictions[p["time"]], p, f"prediction at {p['time']}")
        dead = readers["deadletter"].poll()
        assert [(d["field"], d["reason"]) for d in dead] == \
            [(d["field"], d["reason"]) for d in expected.deadletter]
        assert dead[0]["field"] == "record" and dead[0]["raw"] == bad[0]
        assert "not a number" in dead[1]["reason"]
        wait_for(lambda: flux_count(influx_url, system, "tier_estimate", "utilization")
                 >= len(windows), 60, "estimates in InfluxDB", worker)
        assert flux_count(influx_url, system, "tier_estimate", "utilization") == len(windows)
        assert worker.alive()
    finally:
        worker.stop()
        for r in readers.values():
            r.close()


def test_a_killed_worker_loses_at_most_the_open_window(tmp_path, kafka_bootstrap):
    """Telegraf samples, the worker SIGKILLed after the first half and restarted before the
    second: every window is estimated at most once (windows made again from samples read
    again are replays, skipped, or duplicates), and only the window open at the kill -- whose
    start sample is gone with the worker's memory -- may be missing, one per tier at most."""
    from functools import partial

    from streams.kafka.produce import produce
    from streams.sources.sample_windows import sample_key

    _, windows, config_path, config, messages = _shop(tmp_path, "telegraf", 300, 40)
    half = len(messages) // 2
    made_first = Pipeline(config).process_many(messages[:half]).estimates
    ensure_topics(config.kafka, partitions=2)
    estimates = TopicReader(kafka_bootstrap, config.kafka.topic("estimates"))
    dead = TopicReader(kafka_bootstrap, config.kafka.topic("deadletter"))
    key = partial(sample_key, config.input)
    worker = Worker(config_path, unique("app"), tmp_path / "worker.log").start()
    try:
        produce(messages[:half], config.kafka, key=key)
        wait_for(lambda: len({(e["tier"], e["seq"]) for e in estimates.poll()})
                 >= len(made_first), 300, "the first half's estimates", worker)
        worker.kill()
        worker.start()
        produce(messages[half:], config.kafka, key=key)
        ends = {(w["tier"], parse_end(w["end"])) for w in windows}
        wait_for(lambda: len({(e["tier"], e["end"]) for e in estimates.poll()})
                 >= len(ends) - 2, 300, "the second half's estimates", worker)
        # anything more the worker would send
        wait_settled(worker, kafka_bootstrap, config.kafka.topic("windows"), [estimates, dead])
        got = estimates.poll()
        by_seq = {(e["tier"], e["seq"]): e["end"] for e in got}
        estimated = {(t, end) for (t, _), end in by_seq.items()}
        assert len(estimated) == len(by_seq), "a window estimated twice"
        missing = ends - estimated
        assert len({t for t, _ in missing}) == len(missing) <= 2, sorted(missing)
        for tier in ("front", "db"):
            seqs = sorted(s for t, s in by_seq if t == tier)
            assert seqs == list(range(1, len(seqs) + 1))
        assert all(d["reason"].startswith("duplicate") for d in dead.poll())
        assert worker.alive()
    finally:
        worker.stop()
        estimates.close()
        dead.close()
