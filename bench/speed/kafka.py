"""Throughput and latency of ``perfcast worker`` through a real Kafka broker.

Needs the services (``bash infra/services.sh up``; reads ``PERFCAST_KAFKA_BOOTSTRAP`` and, for
the InfluxDB sink, ``PERFCAST_INFLUX_URL``). The workload is ``bench.speed.pipeline.workload``: 100
systems x 3 tiers x 14 classes, windows of 5 s. In one run:

1. **ceiling** -- a backlog of windows is produced; a bare ``aiokafka`` consumer reads the whole
   topic (and, separately, also ``json.loads`` every value): the most any Python consumer on
   this machine can do;
2. **throughput** -- one ``perfcast worker`` (subprocess) consumes the same backlog; estimates are
   read from ``perfcast.estimates``; sustained rate = windows between the 10% and 100% marks of
   the backlog divided by the time between them; reported as a ratio of the ceiling;
3. **latency** -- with the worker warm, windows are produced at ``--rate`` per second for
   ``--seconds`` (encoded beforehand, sent by an ``aiokafka`` producer); latency = time an
   estimate is read back (by an ``aiokafka`` consumer in a process of its own) minus the time
   its window was sent; also, the part up to the estimate record's timestamp, which the
   worker's producer stamps as it sends the record.

Everything (broker, InfluxDB, worker, the load's producer and the clock's consumer) shares this
machine's two cores; the figures are a floor for a deployment where they run elsewhere. The
load and the clock use the ``aiokafka`` clients (compiled record handling), and the clock decodes
only the fields it needs, so that the measuring processes take as little as they can of the
cores the worker needs.

    python -m bench.speed.kafka [--systems 100] [--backlog-ends 100] [--rate 1000] [--seconds 30]
                                 [--aligned-solves] [--no-influx]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

ROOT = Path(__file__).resolve().parents[2]

from bench.speed.pipeline import host_speed, workload
from tests.worker_process import Worker
from streams.core.config import load_config
from streams.kafka.produce import produce
from streams.kafka.topics import ensure_topics


def _config(tmp: Path, prefix: str, aligned: bool) -> Path:
    path = tmp / "bench.toml"
    defaults = "[defaults]\nsolve_offset_s = 0\n" if aligned else ""
    path.write_text(f'{defaults}[kafka]\ntopic_prefix = "{prefix}"\n')
    return path


async def _bare_consume(bootstrap: str, topic: str, n: int, decode: bool) -> float:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None)
    await consumer.start()
    got, start = 0, None
    try:
        while got < n:
            batches = await consumer.getmany(timeout_ms=1000, max_records=5000)
            if start is None and batches:
                start = time.perf_counter()
            for msgs in batches.values():
                if decode:
                    for m in msgs:
                        json.loads(m.value)
                got += len(msgs)
        return n / (time.perf_counter() - start)
    finally:
        await consumer.stop()


class _EstimateKey(msgspec.Struct):
    """The fields of an estimate record that identify its window (the rest is skipped)."""

    system: str
    tier: str
    end: float


def _clock_main(bootstrap: str, topic: str, conn: Any, count: Any) -> None:
    """The estimate clock's process (:class:`EstimateClock`)."""
    asyncio.run(_clock(bootstrap, topic, conn, count))


async def _clock(bootstrap: str, topic: str, conn: Any, count: Any) -> None:
    """Reads ``topic`` from the start with ``aiokafka`` and decodes only the window's key; on
    request, sends what it has seen."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                fetch_max_wait_ms=20)
    decode = msgspec.json.Decoder(_EstimateKey).decode
    seen: dict[tuple, tuple[float, float]] = {}
    await consumer.start()
    try:
        while True:
            if conn.poll():
                request = conn.recv()               # "read" or "stop": both get what was seen
                conn.send(seen)
                if request == "stop":
                    return
            batches = await consumer.getmany(timeout_ms=20, max_records=20_000)
            now = time.time()
            for msgs in batches.values():
                for m in msgs:
                    e = decode(m.value)
                    seen.setdefault((e.system, e.tier, e.end), (now, m.timestamp / 1e3))
            count.value = len(seen)
    finally:
        await consumer.stop()


async def _send_paced(bootstrap: str, topic: str, records: list[dict[str, Any]],
                      rate: float) -> tuple[dict[tuple, float], float]:
    """The latency phase's load: ``records`` encoded beforehand, then sent at ``rate`` per
    second by an ``aiokafka`` producer; returns when each window was sent, and the seconds it
    took."""
    from aiokafka import AIOKafkaProducer

    items = [(_key(r), r["system"].encode(), json.dumps(r, separators=(",", ":")).encode())
             for r in records]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    await producer.start()
    sent: dict[tuple, float] = {}
    start = time.perf_counter()
    try:
        for i, (window, key, value) in enumerate(items):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sent[window] = time.time()
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()
    return sent, time.perf_counter() - start


class EstimateClock:
    """Reads ``perfcast.estimates`` in a process of its own (so that it does not share an
    interpreter with the producer whose windows it times); per (system, tier, end) the
    wall-clock time it was read (``seen``) and the time the worker's producer stamped on it
    (``stamped``), as of the last :meth:`read`."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.count = ctx.Value("i", 0)
        self.process = ctx.Process(target=_clock_main, args=(bootstrap, topic, child, self.count),
                                   daemon=True)
        self.process.start()
        self.seen: dict[tuple, float] = {}
        self.stamped: dict[tuple, float] = {}

    def wait(self, n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.count.value < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.count.value >= n

    def read(self, request: str = "read") -> None:
        """Take what the clock has seen so far into :attr:`seen` and :attr:`stamped`."""
        self.conn.send(request)
        got = self.conn.recv()
        self.seen = {k: v[0] for k, v in got.items()}
        self.stamped = {k: v[1] for k, v in got.items()}

    def close(self) -> None:
        if self.process.is_alive():
            self.read("stop")
            self.process.join(10)


def _percentiles(seconds: np.ndarray) -> str:
    p50, p95, p99 = (1e3 * np.percentile(seconds, q) for q in (50, 95, 99))
    return f"p50 {p50:.0f} ms, p95 {p95:.0f} ms, p99 {p99:.0f} ms, max {1e3 * seconds.max():.0f} ms"


def _key(r: dict) -> tuple:
    return (r["system"], r["tier"], r["end"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", type=int, default=100)
    ap.add_argument("--backlog-ends", type=int, default=100,
                    help="window ends in the backlog (x systems x 3 tiers records)")
    ap.add_argument("--rate", type=float, default=1000.0, help="windows/s in the latency phase")
    ap.add_argument("--seconds", type=float, default=30.0, help="length of the latency phase")
    ap.add_argument("--no-influx", action="store_true", help="run the worker without InfluxDB")
    ap.add_argument("--aligned-solves", action="store_true",
                    help="solve every system on the minute (solve_offset_s = 0) instead of at "
                         "the offsets spread by name, the default")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    bootstrap = os.environ.get("PERFCAST_KAFKA_BOOTSTRAP")
    if not bootstrap:
        sys.exit("PERFCAST_KAFKA_BOOTSTRAP not set: eval \"$(bash infra/services.sh up)\" first")
    if args.no_influx:
        os.environ.pop("PERFCAST_INFLUX_URL", None)
    per_end = args.systems * 3
    latency_ends = int(np.ceil(args.rate * args.seconds / per_end))
    records = workload(args.systems, args.backlog_ends + latency_ends, args.seed)
    backlog, live = records[: args.backlog_ends * per_end], records[args.backlog_ends * per_end:]
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    tmp = Path(tempfile.mkdtemp(prefix="perfcast-bench-"))
    cfg_path = _config(tmp, prefix, args.aligned_solves)
    kafka = load_config(cfg_path).kafka
    ensure_topics(kafka, partitions=4)
    print(f"# python -m {__spec__.name} {' '.join(argv or sys.argv[1:])}")
    print(host_speed())
    print(f"workload: {args.systems} systems x 3 tiers x 14 classes; backlog {len(backlog)} "
          f"windows; latency phase {len(live)} windows at {args.rate:.0f}/s; "
          f"InfluxDB sink {'off' if args.no_influx else 'on' if os.environ.get('PERFCAST_INFLUX_URL') else 'off (unset)'}; "
          f"solves {'on the minute' if args.aligned_solves else 'spread by name'}")
    stats = produce(backlog, kafka)
    print(f"produce backlog (kafka-python): {stats.rate:,.0f} windows/s")
    topic = kafka.topic("windows")
    ceiling_raw = asyncio.run(_bare_consume(bootstrap, topic, len(backlog), decode=False))
    ceiling = asyncio.run(_bare_consume(bootstrap, topic, len(backlog), decode=True))
    print(f"ceiling, bare aiokafka consumer: {ceiling_raw:,.0f} msgs/s raw, "
          f"{ceiling:,.0f} msgs/s with json.loads")
    clock = EstimateClock(bootstrap, kafka.topic("estimates"))
    worker = Worker(cfg_path, f"{prefix}-app", tmp / "worker.log", partitions=4)
    try:
        worker.start()
        if not clock.wait(len(backlog), timeout=900):
            sys.exit(f"worker did not finish the backlog ({clock.count.value} estimates)\n"
                     f"{worker.log_tail()}")
        clock.read()
        times = sorted(clock.seen[_key(r)] for r in backlog)
        lo, hi = times[len(times) // 10], times[-1]
        rate = (len(times) - len(times) // 10) / (hi - lo)
        print(f"perfcast worker, sustained (10%..100% of the backlog): {rate:,.0f} windows/s "
              f"= {rate / ceiling:.2f} x the json-decoding ceiling, "
              f"{rate / ceiling_raw:.3f} x the raw ceiling")
        sent, seconds = asyncio.run(_send_paced(bootstrap, topic, live, args.rate))
        clock.wait(len(backlog) + len(live), timeout=120)
        clock.read()
        got = [k for k in sent if k in clock.seen]
        lat = np.array([clock.seen[k] - sent[k] for k in got])
        worker_side = np.array([clock.stamped[k] - sent[k] for k in got])
        missing = len(sent) - lat.size
        print(f"latency at {len(live) / seconds:,.0f} windows/s offered over {seconds:.0f} s "
              f"(produce -> estimate read back): {_percentiles(lat)}; "
              f"{missing} windows without an estimate")
        print(f"  of which produce -> estimate record stamped by the worker's producer: "
              f"{_percentiles(worker_side)}")
        if os.environ.get("PERFCAST_WORKER_LOGLEVEL", "").lower() == "info":
            print("worker's own throughput lines (ms per window by phase):")
            for line in worker.log.read_text().splitlines():
                if "windows/s in" in line:
                    print("  " + line.split("[INFO] ")[-1])
    finally:
        worker.stop()
        clock.close()


if __name__ == "__main__":
    main()
