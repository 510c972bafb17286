"""Helpers for the tests that run the pipeline against the real Kafka and InfluxDB started by
``infra/services.sh`` (through ``infra/test.sh`` / ``.ci/run``)."""

from __future__ import annotations

import json
import math
import os
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from ci_policy import require_services_marker, unavailable
from waiting import wait_until
from worker_process import Worker, committed_to_end  # noqa: F401  (tests import them here)

ROOT = Path(__file__).resolve().parents[1]


def service_env(name: str) -> str:
    """An environment variable set by ``infra/services.sh``: under ``CI=true`` its absence is a
    failure, elsewhere a skip. Tests take it through ``tests/conftest.py``'s fixtures."""
    require_services_marker(name)
    value = os.environ.get(name)
    if not value:
        unavailable(f"{name} not set (start the services with infra/services.sh up)",
                    "infra/services.sh did not start the service in CI")
    return value


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def write_config(path: Path, system: str, prefix: str, extra: str = "") -> Path:
    """A TOML configuration for the demo shop under ``system`` with topic prefix ``prefix``."""
    path.write_text(f"""
[systems.{json.dumps(system)}]
tiers = ["front", "db"]
think_time_s = 0.5
sla_s = {{ "*" = 0.3 }}
solve_interval_s = 60
horizon_s = 600
trend_window_s = 600
{extra}
[kafka]
topic_prefix = {json.dumps(prefix)}
""")
    return path


class TopicReader:
    """Reads one topic from the beginning, incrementally."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer

        self.topic = topic
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap,
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      group_id=None, consumer_timeout_ms=500)
        self.records: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        for batch in self.consumer.poll(timeout_ms=500, max_records=10_000).values():
            self.records += [json.loads(m.value) for m in batch]
        return self.records

    def read_to_end(self) -> list[dict[str, Any]]:
        """Every record in the topic now: polls until the reader's position is at the end
        offset of each partition."""
        from kafka import TopicPartition

        partitions = self.consumer.partitions_for_topic(self.topic) or set()
        tps = [TopicPartition(self.topic, p) for p in partitions]
        end = self.consumer.end_offsets(tps)

        def at_end() -> bool:
            self.poll()
            assigned = self.consumer.assignment()
            return all(tp in assigned and self.consumer.position(tp) >= end[tp] for tp in tps)

        wait_until(at_end, f"the records of {self.topic} up to its end offsets {end}", 60.0,
                   0.1)
        return self.records

    def close(self) -> None:
        self.consumer.close()


def wait_settled(worker: Worker, bootstrap: str, topic: str, readers: Any,
                 timeout: float = 120.0) -> None:
    """Until ``worker`` has finished every window of ``topic`` (:meth:`Worker.finished`),
    then each of ``readers`` (:class:`TopicReader`, or a mapping of them) has read its topic
    to the end: what a test then reads is all the worker will send for those windows."""
    wait_for(lambda: worker.finished(bootstrap, topic), timeout,
             f"the worker to commit every window of {topic}", worker, poll_s=1.0)
    for reader in readers.values() if isinstance(readers, dict) else readers:
        reader.read_to_end()


def wait_for(condition: Callable[[], bool], timeout: float, what: str,
             worker: Worker | None = None, poll_s: float = 0.5) -> None:
    """Wait until ``condition()``; fail with the worker's log tail on timeout."""
    wait_until(condition, what, timeout, poll_s,
               detail=(lambda: f"worker log:\n{worker.log_tail()}") if worker else None)


def assert_close(a: Any, b: Any, path: str = "", rel: float = 1e-9) -> None:
    """Deep equality with a relative tolerance on floats; an output record
    (:mod:`streams.core.outputs`) compares as its JSON form."""
    a, b = (x.to_record() if hasattr(x, "to_record") else x for x in (a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), f"{path}: keys differ {set(a) ^ set(b)}"
        for k in a:
            assert_close(a[k], b[k], f"{path}.{k}", rel)
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: lengths differ {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{path}[{i}]", rel)
    elif isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), \
            f"{path}: {a!r} vs {b!r}"
        assert math.isclose(a, b, rel_tol=rel, abs_tol=1e-12), f"{path}: {a!r} vs {b!r}"
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


def flux_count(url: str, system: str, measurement: str, field: str, **tags: str) -> int:
    """Number of points of ``measurement.field`` for ``system`` in InfluxDB (Flux query)."""
    from influxdb_client import InfluxDBClient

    extra = "".join(f' and r["{k}"] == "{v}"' for k, v in tags.items())
    query = (f'from(bucket: "perfcast") |> range(start: 0) '
             f'|> filter(fn: (r) => r._measurement == "{measurement}" and r.system == '
             f'"{system}" and r._field == "{field}"{extra}) |> group() |> count()')
    with InfluxDBClient(url=url, token="", org="-", timeout=30_000) as client:
        tables = client.query_api().query(query)
    return sum(int(rec.get_value()) for t in tables for rec in t.records)
