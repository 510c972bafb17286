"""Poison pills through the real Kafka broker (``infra/services.sh``): ``perfcast produce`` sends
every line of a trace that holds them (but the one larger than Kafka's largest message, which it
skips with a warning), and the worker dead-letters each with its field and reason while it
processes every other window (the unit-level twin, without services, is
``tests/test_poison_pills.py``). Under ``CI=true`` a missing service fails."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fuzz_corpus import CORPUS
from pipeline_harness import (TopicReader, Worker, unique, wait_for, wait_settled,
                              write_config)
from streams.cli.commands import app
from streams.core.config import load_config
from streams.cli.demo import DemoScenario, demo_records
from streams.engine.pipeline import Pipeline
from streams.kafka.topics import ensure_topics
from test_poison_pills import CLAMPED, FLAG, POISON


def _count_raw(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` (not decoded: the poison pills are not all JSON)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None, consumer_timeout_ms=3000,
                             fetch_max_bytes=8 * 1024 * 1024)
    try:
        return sum(1 for _ in consumer)
    finally:
        consumer.close()


def test_produce_and_the_worker_dead_letter_every_poison_pill(tmp_path, kafka_bootstrap):
    system = unique("shop")
    good = [json.dumps(r) for r in demo_records(DemoScenario(system=system, duration_s=300))]
    trace = list(good)
    for i, (text, _, _) in enumerate(POISON.values()):
        trace.insert(9 * i + 5, text)
    trace.insert(40, CLAMPED)
    # beyond Kafka's largest message: skipped by produce (kafka-python would abort every record
    # after the batch the broker refuses)
    trace.insert(60, '{"system": "' + "z" * 1_500_000 + '"}')
    source = tmp_path / "trace.jsonl"
    source.write_text("\n".join(trace) + "\n", encoding="utf-8")
    config_path = write_config(tmp_path / "perfcast.toml", system, unique("t"))
    config = load_config(config_path)
    ensure_topics(config.kafka, partitions=2)
    readers = {name: TopicReader(kafka_bootstrap, config.kafka.topic(name))
               for name in ("estimates", "deadletter")}
    worker = Worker(config_path, unique("app"), tmp_path / "worker.log").start()
    try:
        result = CliRunner().invoke(app, ["produce", "--source", str(source), "--config",
                                          str(config_path), "--bootstrap", kafka_bootstrap])
        assert result.exit_code == 0, result.output
        said = " ".join(result.output.split())
        assert f"sent {len(trace) - 1} windows" in said
        assert "1 skipped" in said and "refused" not in said
        wait_for(lambda: len(readers["estimates"].poll()) >= len(good) + 1
                 and len(readers["deadletter"].poll()) >= len(POISON),
                 timeout=180, what="estimates and dead letters", worker=worker)
        wait_settled(worker, kafka_bootstrap, config.kafka.topic("windows"), readers)
        assert worker.alive(), worker.log_tail()
        dead = readers["deadletter"].poll()
        assert len(dead) == len(POISON)
        for name, (_, field, reason) in POISON.items():
            match = [d for d in dead if d["field"] == field and reason in d["reason"]]
            assert match, (name, field, reason, dead)
            dead.remove(match[0])
        estimates = readers["estimates"].poll()
        assert len(estimates) == len(good) + 1
        (clamped,) = [e for e in estimates if e["system"] == "p-clamped"]
        assert clamped["flags"] == [FLAG] and clamped["utilization"] == 1.0
        reference = Pipeline(config).process_many(good)
        shop = sorted((e for e in estimates if e["system"] == system),
                      key=lambda e: (e["tier"], e["seq"]))
        want = sorted([e.to_record() for e in reference.estimates],
                      key=lambda e: (e["tier"], e["seq"]))
        assert shop == want
        assert _count_raw(kafka_bootstrap, config.kafka.topic("windows")) == len(trace) - 1
    finally:
        worker.stop()
        for reader in readers.values():
            reader.close()


def test_the_worker_dead_letters_implausible_windows_and_processes_the_rest(tmp_path,
                                                                            kafka_bootstrap):
    """The plausibility cases through the real broker: each plausibility case of the corpus (an end
    in 2100, users jumping to 10^9, utilization 0 with 4e9 completions, a window overlapping
    another by half, a 10,000-fold completion rate) with the ordinary windows around it, sent
    by ``perfcast produce``: the worker dead-letters exactly the hostile window of each, naming
    field, value and reason, gives every other window an estimate -- those of the embedded core
    -- still solves each system after it, flags the next prediction, and keeps running."""
    cases = [c for c in CORPUS if c.after and c.reason.startswith(("past", "busy", "overlaps",
                                                                    "times", "completion"))]
    assert len(cases) == 5
    trace = [line for c in cases for line in c.lines + c.after]
    source = tmp_path / "trace.jsonl"
    source.write_text("\n".join(trace) + "\n", encoding="utf-8")
    config_path = write_config(tmp_path / "perfcast.toml", unique("shop"), unique("t"))
    config = load_config(config_path)
    ensure_topics(config.kafka, partitions=2)
    readers = {name: TopicReader(kafka_bootstrap, config.kafka.topic(name))
               for name in ("estimates", "deadletter", "predictions")}
    worker = Worker(config_path, unique("app"), tmp_path / "worker.log").start()
    try:
        result = CliRunner().invoke(app, ["produce", "--source", str(source), "--config",
                                          str(config_path), "--bootstrap", kafka_bootstrap])
        assert result.exit_code == 0, result.output
        wait_for(lambda: len(readers["estimates"].poll()) >= len(trace) - len(cases)
                 and len(readers["deadletter"].poll()) >= len(cases),
                 timeout=180, what="estimates and dead letters", worker=worker)
        wait_settled(worker, kafka_bootstrap, config.kafka.topic("windows"), readers)
        assert worker.alive(), worker.log_tail()
        dead = readers["deadletter"].poll()
        assert len(dead) == len(cases)
        for case in cases:
            hostile = json.loads(case.hostile)
            (d,) = [d for d in dead if d["system"] == hostile["system"]]
            assert d["field"] == case.field and case.reason in d["reason"], d
            assert d["reason"].startswith("implausible") and d["value"] is not None
        reference = Pipeline(config).process_many(trace)
        assert len(reference.deadletter) == len(cases)
        key = lambda e: (e["system"], e["tier"], e["seq"])      # noqa: E731
        assert sorted(readers["estimates"].poll(), key=key) == \
            sorted([e.to_record() for e in reference.estimates], key=key)
        wait_for(lambda: len(readers["predictions"].poll()) >= len(reference.predictions),
                 timeout=120, what="predictions", worker=worker)
        predictions = readers["predictions"].poll()
        for case in cases:
            system = json.loads(case.hostile)["system"]
            times = [p["time"] for p in predictions if p["system"] == system]
            assert max(times) >= json.loads(case.after[-1])["end"] - 60.0, system
            assert any("dead-lettered as implausible" in f for p in predictions
                       if p["system"] == system for f in p.get("flags") or []), system
    finally:
        worker.stop()
        for reader in readers.values():
            reader.close()
