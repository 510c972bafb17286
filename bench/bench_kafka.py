"""Throughput and latency of ``perfcast worker`` through a real Kafka broker.

Needs the services (``bash infra/services.sh up``; reads ``PERFCAST_KAFKA_BOOTSTRAP`` and, for
the InfluxDB sink, ``PERFCAST_INFLUX_URL``). The workload is ``bench_pipeline.workload``: 100
systems x 3 tiers x 14 classes, windows of 5 s. In one run:

1. **ceiling** -- a backlog of windows is produced; a bare ``aiokafka`` consumer reads the whole
   topic (and, separately, also ``json.loads`` every value): the most any Python consumer on
   this machine can do;
2. **throughput** -- one ``perfcast worker`` (subprocess) consumes the same backlog; estimates are
   read from ``perfcast.estimates``; sustained rate = windows between the 10% and 100% marks of
   the backlog divided by the time between them; reported as a ratio of the ceiling;
3. **latency** -- with the worker warm, windows are produced at ``--rate`` per second for
   ``--seconds``; latency = time an estimate is read back minus the time its window was sent.

Everything (broker, worker, producer, consumers) shares this machine's cores; the figures are a
floor for a deployment where the broker runs elsewhere.

    python bench/bench_kafka.py [--systems 100] [--backlog-ends 100] [--rate 1000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from bench_pipeline import host_speed, workload  # noqa: E402
from pipeline_harness import Worker  # noqa: E402
from streams.config import load_config  # noqa: E402
from streams.produce import produce  # noqa: E402
from streams.topics import ensure_topics  # noqa: E402


def _config(tmp: Path, prefix: str) -> Path:
    path = tmp / "bench.toml"
    path.write_text(f'[kafka]\ntopic_prefix = "{prefix}"\n')
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


class EstimateClock:
    """Reads ``perfcast.estimates`` in a thread; receive time per (system, tier, end)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      fetch_max_wait_ms=20)
        self.seen: dict[tuple, float] = {}
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop:
            for msgs in self.consumer.poll(timeout_ms=100, max_records=20_000).values():
                now = time.perf_counter()
                for m in msgs:
                    e = json.loads(m.value)
                    self.seen.setdefault((e["system"], e["tier"], e["end"]), now)

    def wait(self, n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while len(self.seen) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return len(self.seen) >= n

    def close(self) -> None:
        self.stop = True
        self.thread.join(5)
        self.consumer.close()


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
    cfg_path = _config(tmp, prefix)
    kafka = load_config(cfg_path).kafka
    ensure_topics(kafka, partitions=4)
    print(f"# {' '.join([Path(sys.argv[0]).name] + (argv or sys.argv[1:]))}")
    print(host_speed())
    print(f"workload: {args.systems} systems x 3 tiers x 14 classes; backlog {len(backlog)} "
          f"windows; latency phase {len(live)} windows at {args.rate:.0f}/s; "
          f"InfluxDB sink {'off' if args.no_influx else 'on' if os.environ.get('PERFCAST_INFLUX_URL') else 'off (unset)'}")
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
            sys.exit(f"worker did not finish the backlog ({len(clock.seen)} estimates)\n"
                     f"{worker.log_tail()}")
        times = sorted(clock.seen[_key(r)] for r in backlog)
        lo, hi = times[len(times) // 10], times[-1]
        rate = (len(times) - len(times) // 10) / (hi - lo)
        print(f"perfcast worker, sustained (10%..100% of the backlog): {rate:,.0f} windows/s "
              f"= {rate / ceiling:.2f} x the json-decoding ceiling, "
              f"{rate / ceiling_raw:.3f} x the raw ceiling")
        sent: dict[tuple, float] = {}

        class Clocked(list):
            def __iter__(self):                 # stamp each record as the producer takes it
                for r in super().__iter__():
                    sent[_key(r)] = time.perf_counter()
                    yield r

        stats = produce(Clocked(live), kafka, rate=args.rate)
        clock.wait(len(backlog) + len(live), timeout=120)
        lat = np.array([clock.seen[k] - t for k, t in sent.items() if k in clock.seen])
        missing = len(sent) - lat.size
        print(f"latency at {stats.rate:,.0f} windows/s offered over {stats.seconds:.0f} s "
              f"(produce -> estimate read back): p50 {1e3 * np.percentile(lat, 50):.0f} ms, "
              f"p95 {1e3 * np.percentile(lat, 95):.0f} ms, p99 {1e3 * np.percentile(lat, 99):.0f} "
              f"ms, max {1e3 * lat.max():.0f} ms; {missing} windows without an estimate")
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
