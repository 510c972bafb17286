"""The hostile sample records (``tests/fuzz_corpus/samples.py``) through the real worker on the
real broker (``infra/services.sh``): the demo shop's samples of each format with every hostile
record of that format mixed in, sent by ``perfcast produce``; ``perfcast worker`` with
``[input] format`` keeps running, commits past every record, dead-letters each hostile one with
its field and reason and estimates every window as the embedded core does without them (the
unit-level twin is ``tests/test_formats_hostile.py``). Under ``CI=true`` a missing service
fails.
"""

from __future__ import annotations

import pytest

from format_samples import MAPPING, encode
from fuzz_corpus.samples import SAMPLE_CASES, SYSTEM
from pipeline_harness import (TopicReader, Worker, assert_close, unique, wait_for,
                              wait_settled, write_config)
from streams.cli.demo import DemoScenario, demo_records
from streams.core.config import load_config
from streams.engine.pipeline import Pipeline
from streams.kafka.topics import ensure_topics
from test_formats_services import _produce

pytestmark = pytest.mark.services


@pytest.mark.parametrize("fmt", ["telegraf", "prometheus-kafka-adapter", "otlp-json"])
def test_the_worker_dead_letters_each_hostile_sample_and_commits_past_it(fmt, tmp_path,
                                                                        kafka_bootstrap):
    system, prefix = unique("shop"), unique("t")
    windows = demo_records(DemoScenario(system=system, duration_s=300, steady_s=120, step_s=30,
                                        step_users=10, users_start=20, users_end=40))
    cases = [c for c in SAMPLE_CASES if c.fmt == fmt]
    # the cases name the demo shop's system: here the test's own
    hostile = [c.record.replace(f'"{SYSTEM}"', f'"{system}"') for c in cases]
    good = encode(windows, fmt)
    half = len(good) // 2
    messages = good[:half] + hostile + good[half:]
    config_path = write_config(tmp_path / "perfcast.toml", system, prefix,
                               f'[input]\nformat = "{fmt}"\n{MAPPING}')
    config = load_config(config_path)
    want = Pipeline(config).process_many(good)
    assert len(want.estimates) == len(windows)

    ensure_topics(config.kafka, partitions=2)
    readers = {n: TopicReader(kafka_bootstrap, config.kafka.topic(n))
               for n in ("estimates", "deadletter")}
    worker = Worker(config_path, unique("app"), tmp_path / "worker.log").start()
    try:
        sent = _produce(config_path, messages, tmp_path)
        assert f"sent {len(messages)} records" in sent, sent
        wait_for(lambda: len(readers["estimates"].poll()) >= len(windows)
                 and len(readers["deadletter"].poll()) >= len(cases),
                 300, f"the {fmt} estimates and dead letters", worker)
        wait_settled(worker, kafka_bootstrap, config.kafka.topic("windows"), readers)
        assert worker.alive(), worker.log_tail()
        assert "Traceback" not in worker.log_tail()
        dead = readers["deadletter"].poll()
        assert len(dead) == len(cases), [(d["field"], d["reason"][:80]) for d in dead]
        for case in cases:
            assert any(case.field in d["field"] and case.reason in d["reason"]
                       for d in dead), case.name
        estimates = {(e["tier"], e["seq"]): e for e in readers["estimates"].poll()}
        assert len(estimates) == len(windows)
        for e in want.estimates:
            assert_close(estimates[(e["tier"], e["seq"])], e, f"estimate {e['tier']}#{e['seq']}")
    finally:
        worker.stop()
        for r in readers.values():
            r.close()
