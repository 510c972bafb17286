"""Helpers for the tests that run the pipeline against the real Kafka and InfluxDB started by
``infra/services.sh`` (through ``infra/test.sh`` / ``.ci/run``)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from ci_policy import unavailable

ROOT = Path(__file__).resolve().parents[1]


def service_env(name: str) -> str:
    """An environment variable set by ``infra/services.sh``: under ``CI=true`` its absence is a
    failure, elsewhere a skip."""
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


class Worker:
    """``perfcast worker`` as a real subprocess (so that it can be SIGKILLed)."""

    def __init__(self, config: Path, app_id: str, log: Path, partitions: int = 2, *,
                 root: Path = ROOT, loglevel: str | None = None,
                 env: dict[str, str] | None = None,
                 module: str = "streams.cli.commands") -> None:
        """``root``: the source tree to run (``bench/bench_worker_ab.py`` compares two);
        ``env``: variables added to the worker's environment; ``module``: the command line's
        module, found in ``root`` or in ``tests/`` (a test's wrapper of it)."""
        self.cmd = [sys.executable, "-m", module, "worker", "--config", str(config),
                    "--app-id", app_id, "--partitions", str(partitions), "--loglevel",
                    loglevel or os.environ.get("PERFCAST_WORKER_LOGLEVEL", "warning")]
        self.root = root
        self.log = log
        self.env = env or {}
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Worker":
        env = {**os.environ, **self.env,
               "PYTHONPATH": os.pathsep.join([str(self.root), str(Path(__file__).parent)])}
        fh = open(self.log, "a")
        self.proc = subprocess.Popen(self.cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                     cwd=self.root, start_new_session=True)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def log_tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-n:])


class TopicReader:
    """Reads one topic from the beginning, incrementally."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap,
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      group_id=None, consumer_timeout_ms=500)
        self.records: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        for batch in self.consumer.poll(timeout_ms=500, max_records=10_000).values():
            self.records += [json.loads(m.value) for m in batch]
        return self.records

    def close(self) -> None:
        self.consumer.close()


def wait_for(condition: Callable[[], bool], timeout: float, what: str,
             worker: Worker | None = None, poll_s: float = 0.5) -> None:
    """Wait until ``condition()``; fail with the worker's log tail on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(poll_s)
    tail = f"\nworker log:\n{worker.log_tail()}" if worker else ""
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}{tail}")


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
