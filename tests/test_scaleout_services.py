"""Scale-out with the same answers, against the real Kafka broker and InfluxDB
started by ``infra/services.sh``.

A seeded fleet (:func:`fleet`: 40 systems x 3 tiers, 180 windows each, 21,600 windows) goes
through

* the embedded run (``perfcast run``'s :func:`streams.cli.embedded.run_embedded`);
* one ``perfcast worker`` on a 4-partition topic, uninterrupted;
* three ``perfcast worker`` processes with the same application id while the windows stream
  in: A alone, then B joins (a rebalance moves partitions from A to B), then A is SIGKILLed
  (its partitions move to B once its session has expired; the windows since A's last commit
  are read again), then C joins (partitions move from B to C).

The workers' outputs, de-duplicated by their documented keys (``docs/pipeline.md``: estimates
``(system, tier, seq)``, predictions ``(system, time)``; alerts ``(system, alert, class,
time, state)``), must equal the embedded run's: every estimate within 1e-9, the same
predictions and alerts; records sharing a key must agree (at least once, never two answers);
no window counted twice and none lost (the keys are per-tier sequence numbers: a window
counted twice or lost shifts them); no dead letter at all (windows read again after the kill
are replays: same content as the window the restored state holds, skipped and counted).
Real processes, a real broker, real rebalances: nothing mocked. The workers log their
offsets per partition every 2 s (``PERFCAST_DEBUG_OFFSETS``) and every window the offset
guard skips (``streams/kafka/continuity.py``); a failure prints which partitions and
offsets lost windows.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from pipeline_harness import (
    TopicReader,
    Worker,
    assert_close,
    committed_to_end,
    unique,
    wait_for,
)
from streams.core.config import load_config
from streams.cli.embedded import run_embedded
from streams.kafka.produce import produce
from streams.kafka.topics import ensure_topics

pytestmark = pytest.mark.timeout(900)

TIERS = ("web", "app", "db")
CLASSES = ("browse", "buy")
#: 2026-11-20T10:00:00Z, event-time origin (as streams.cli.demo)
START = 1_795_168_800.0
SYSTEMS, ENDS, WINDOW_S = 40, 180, 5.0
PARTITIONS = 4
#: the workers' consumer group notices a SIGKILLed member after this many seconds (Faust's
#: default is 60 s; read by Faust from the environment)
WORKER_ENV = {"BROKER_SESSION_TIMEOUT": "10", "BROKER_HEARTBEAT_INTERVAL": "1",
              # every 2 s, per source partition: committed, read, high-water, pending acks
              "PERFCAST_DEBUG_OFFSETS": "1"}

Key = Callable[[dict[str, Any]], tuple]
KEYS: dict[str, Key] = {
    "estimates": lambda r: (r["system"], r["tier"], r["seq"]),
    "predictions": lambda r: (r["system"], r["time"]),
    "alerts": lambda r: (r["system"], r["alert"], r["class"], r["time"], r["state"]),
}


def fleet(systems: int, ends: int, seed: int) -> list[dict[str, Any]]:
    """Input-contract windows of ``systems`` three-tier systems whose users ramp up (1.5-4x
    over the trace) until some breach their 50-ms SLA, in stream order (every system's tiers
    per window end). Synthetic (not the queueing simulator): demands lognormal around 4 ms,
    Poisson completions, utilization from the demands plus noise -- enough for the estimators
    and the solver to do real work on every system."""
    rng = np.random.default_rng(seed)
    per_system = []
    for s in range(systems):
        demand = np.exp(rng.normal(np.log(4e-3), 0.4, (len(TIERS), len(CLASSES))))
        cores = rng.choice([1, 2], len(TIERS))
        mix = rng.dirichlet([4.0, 4.0])
        u0 = rng.uniform(20, 60)
        u1 = u0 * rng.uniform(1.5, 4.0)
        rows = []
        for k in range(ends):
            users = int(round(u0 + (u1 - u0) * k / ends))
            per_request = demand @ mix
            x = min(users / (1.0 + per_request.sum()), 0.95 / (per_request / cores).max())
            n = rng.poisson(x * mix * WINDOW_S)
            u = np.clip(demand @ n / (WINDOW_S * cores) + rng.normal(0, 0.01, len(TIERS)),
                        0.0, 0.98)
            rows.append([{
                "system": f"sys{s:03d}", "tier": tier, "end": START + (k + 1) * WINDOW_S,
                "window_s": WINDOW_S, "utilization": round(float(u[j]), 5),
                "cores": int(cores[j]), "completions": dict(zip(CLASSES, map(int, n))),
                "response_time_s": {c: round(float(demand[j, i] / (1 - u[j])
                                                   * np.exp(rng.normal(0, 0.1))), 6)
                                    for i, c in enumerate(CLASSES) if n[i] > 0},
                "users": users} for j, tier in enumerate(TIERS)])
        per_system.append(rows)
    return [r for k in range(ends) for rows in per_system for r in rows[k]]


@pytest.fixture(scope="module")
def bootstrap(kafka_bootstrap: str, influx_url: str) -> str:
    """The broker; the workers also write to the InfluxDB (their configuration from the
    environment)."""
    return kafka_bootstrap


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return fleet(SYSTEMS, ENDS, seed=23)


def _config(tmp: Path, prefix: str) -> Path:
    path = tmp / f"{prefix}.toml"
    path.write_text(f'[defaults]\nthink_time_s = 1.0\nsla_s = {{ "*" = 0.05 }}\n'
                    f'[kafka]\ntopic_prefix = "{prefix}"\n')
    return path


@pytest.fixture(scope="module")
def embedded(records, tmp_path_factory) -> dict[str, list[dict[str, Any]]]:
    """``perfcast run``'s outputs (no final solve: a worker never knows the stream ended)."""
    import json

    tmp = tmp_path_factory.mktemp("embedded")
    config = load_config(_config(tmp, "embedded"))
    run_embedded(records, config, tmp / "out", final_solve=False)
    out = {name: [json.loads(line) for line in (tmp / "out" / f"{name}.jsonl").open()]
           for name in ("estimates", "predictions", "alerts", "deadletter")}
    assert len(out["estimates"]) == len(records) and not out["deadletter"]
    assert len(out["predictions"]) > 10 * SYSTEMS          # every system solved many times
    assert {a["alert"] for a in out["alerts"]} >= {"predicted_breach", "current_breach"}
    return out


class Deployment:
    """Topics with one prefix, workers with one application id, readers of the outputs."""

    def __init__(self, tmp: Path, bootstrap: str) -> None:
        self.tmp = tmp
        self.bootstrap = bootstrap
        self.prefix = unique("scale")
        self.app_id = unique("app")
        self.config_path = _config(tmp, self.prefix)
        self.kafka = load_config(self.config_path).kafka
        ensure_topics(self.kafka, partitions=PARTITIONS)
        self.workers: list[Worker] = []
        self.readers = {name: TopicReader(bootstrap, self.kafka.topic(name))
                        for name in (*KEYS, "deadletter")}

    def worker(self, name: str) -> Worker:
        w = Worker(self.config_path, self.app_id, self.tmp / f"worker-{name}.log",
                   partitions=PARTITIONS, env=WORKER_ENV, loglevel="info")
        self.workers.append(w.start())
        return w

    def records(self, name: str) -> list[dict[str, Any]]:
        return self.readers[name].poll()

    def counted(self) -> int:
        return len({KEYS["estimates"](e) for e in self.records("estimates")})

    def members(self) -> int:
        """Members of the workers' consumer group, as the broker sees them."""
        from kafka.admin import KafkaAdminClient

        logging.getLogger("kafka.admin").setLevel(logging.ERROR)   # Faust's member metadata
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            group = admin.describe_groups([self.app_id])[self.app_id]
        finally:
            admin.close()
        return len(group["members"]) if group["group_state"] == "Stable" else -1

    def logs(self) -> str:
        return "\n".join(f"--- {w.log.name}\n{w.log_tail(15)}" for w in self.workers)

    def close(self) -> None:
        for w in self.workers:
            w.stop()
        for r in self.readers.values():
            r.close()


@pytest.fixture
def deployment(tmp_path, bootstrap):
    d = Deployment(tmp_path, bootstrap)
    yield d
    d.close()


def _wait(d: Deployment, condition: Callable[[], bool], what: str, timeout: float = 240) -> None:
    try:
        wait_for(condition, timeout, what)
    except pytest.fail.Exception as err:
        pytest.fail(f"{err}\n{d.logs()}")


def _settle(d: Deployment, embedded: dict[str, list[dict[str, Any]]],
            timeout: float = 240) -> None:
    """Wait until every output key of the embedded run has arrived (or ``timeout``: the
    comparison then says what is missing), then until the workers have committed every
    window and the readers have read every output (late duplicates included)."""
    def arrived() -> bool:
        return all(len({key(r) for r in d.records(name)}) >= len(embedded[name])
                   for name, key in KEYS.items())

    deadline = time.monotonic() + timeout
    while not arrived() and time.monotonic() < deadline:
        time.sleep(1)                     # the poll's interval
    # late duplicates: all the workers send for the windows is in Kafka once their group has
    # committed every window (they commit a window only after its outputs)
    topic = d.kafka.topic("windows")
    while not committed_to_end(d.bootstrap, d.app_id, topic) \
            and time.monotonic() < deadline + 60:
        time.sleep(1)                     # the poll's interval
    for reader in d.readers.values():
        reader.read_to_end()


def _finish(d: Deployment, embedded: dict[str, list[dict[str, Any]]]) -> None:
    """Wait for every output, then compare with the embedded run's (module docstring); prints
    how many records the workers sent per topic and what their logs say was skipped or read
    again (``pytest -s``)."""
    _settle(d, embedded)
    print("records sent (once each in the embedded run):",
          {name: f"{len(d.records(name))} ({len(embedded[name])})" for name in KEYS},
          "dead letters:", len(d.records("deadletter")))
    print(_skipped(d))
    for name, key in KEYS.items():
        got = _deduplicated(d.records(name), key, name)
        want = {key(r): r for r in embedded[name]}
        missing, extra = set(want) - set(got), set(got) - set(want)
        same = not missing and not extra          # (no big sets in pytest's assertion diff)
        assert same, \
            (f"{name}: {len(extra)} extra, {len(missing)} missing "
             f"(first: {sorted(missing)[:3]})\n"
             f"{_where_missing(embedded['estimates'], d.records('estimates'))}\n{d.logs()}")
        for k, r in want.items():
            assert_close(got[k], r, f"{name} {k}")
    # re-read windows are replays (skipped and counted), never dead-lettered
    assert not d.records("deadletter"), d.records("deadletter")[:3]


def _skipped(d: Deployment) -> str:
    """The workers' log lines about windows skipped by the offset guard and replays skipped
    by the core (streams/kafka/continuity.py, streams/core/tier.py), per worker."""
    lines = []
    for w in d.workers:
        text = w.log.read_text(errors="replace").splitlines() if w.log.exists() else []
        lines += [f"{w.log.name}: {line.split('] ', 3)[-1]}" for line in text
                  if "windows skipped" in line or "replays skipped" in line]
    return "\n".join(lines) or "no window skipped or replayed"


def partition_of(system: str) -> int:
    """The source partition of ``system``'s windows (Kafka's default partitioner)."""
    from aiokafka.partitioner import DefaultPartitioner

    parts = list(range(PARTITIONS))
    return DefaultPartitioner()(system.encode(), parts, parts)


def _where_missing(want: list[dict[str, Any]], got: list[dict[str, Any]]) -> str:
    """Estimates of ``want`` absent from ``got``, per source partition and system: how many,
    and the first and last missing window end."""
    have = {KEYS["estimates"](r) for r in got}
    lost: dict[int, dict[str, list[float]]] = {}
    for r in want:
        if KEYS["estimates"](r) not in have:
            lost.setdefault(partition_of(r["system"]), {}) \
                .setdefault(r["system"], []).append(r["end"])
    return "missing estimates per partition: " + "; ".join(
        f"p{p}: " + ", ".join(f"{s} {len(e)} ({min(e) - START:.0f}-{max(e) - START:.0f} s)"
                              for s, e in sorted(systems.items()))
        for p, systems in sorted(lost.items()))


def _deduplicated(records: list[dict[str, Any]], key: Key, name: str) -> dict[tuple, dict]:
    """One record per key; records sharing a key must be equal (1e-9)."""
    out: dict[tuple, dict] = {}
    for r in records:
        k = key(r)
        if k in out:
            assert_close(r, out[k], f"conflicting duplicates of {name} {k}")
        else:
            out[k] = r
    return out


def test_one_worker_gives_the_embedded_runs_answers(deployment, records, embedded):
    """The reference for the rebalance test below: one worker, four partitions, no
    interruption."""
    deployment.worker("solo")
    produce(records, deployment.kafka)
    _finish(deployment, embedded)
    assert not deployment.records("deadletter")


def test_joins_and_a_kill_mid_stream_give_the_same_answers(deployment, records, embedded):
    """Worker A alone; B joins; A is SIGKILLed; C joins -- while the windows stream in. The
    outputs equal the embedded run's (and so the single worker's) after de-duplication by
    their keys, with no conflicting duplicates and no window counted twice."""
    d = deployment
    n = len(records)
    a = d.worker("A")
    sender = threading.Thread(target=produce, args=(records, d.kafka),
                              kwargs={"rate": n / 80.0})        # ~80 s of stream
    sender.start()
    try:
        _wait(d, lambda: d.counted() >= n // 5, "a fifth of the estimates from A")
        d.worker("B")
        _wait(d, lambda: d.members() == 2, "B in the group")
        started = d.counted()
        _wait(d, lambda: d.counted() >= started + n // 10, "progress with A and B")
        # a join hands the partitions over with every window taken once: nothing repeated
        sent = d.records("estimates")
        assert len(sent) == len({KEYS["estimates"](e) for e in sent}), _skipped(d)
        assert not d.records("deadletter"), d.records("deadletter")[:3]
        a.kill()
        _wait(d, lambda: d.members() == 1, "A's session expired, B alone")
        killed = d.counted()
        _wait(d, lambda: d.counted() >= killed + n // 20, "progress after the kill")
        d.worker("C")
        _wait(d, lambda: d.members() == 2, "C in the group")
        assert d.counted() < n, "the stream ended before C joined: too fast to test"
    finally:
        sender.join()
    assert all(w.alive() for w in d.workers[1:]), d.logs()
    _finish(d, embedded)
