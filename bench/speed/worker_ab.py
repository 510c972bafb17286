"""Side by side: the backlog throughput of ``perfcast worker`` from two (or more) source trees.

Needs the services (``bash infra/services.sh up``; reads ``PERFCAST_KAFKA_BOOTSTRAP`` and, for
the InfluxDB sink, ``PERFCAST_INFLUX_URL``). Produces one backlog of the
``bench.speed.pipeline.workload`` (100 systems x 3 tiers x 14 classes; ``--ends`` window
ends), then, round after round, starts a worker from each tree in turn with a fresh consumer
group on that topic, and reads the rate from the worker's own 10-s throughput lines (the 2nd and 3rd: past
the start, within the backlog). Alternating the trees inside each round is what makes the
comparison fair on a machine whose speed drifts (``docs/benchmarks.md``). A tree is a checkout,
for example ``git worktree add /tmp/before COMMIT``.

    python -m bench.speed.worker_ab /tmp/before . [--rounds 2] [--ends 400]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from bench.speed.pipeline import host_speed, workload
from tests.worker_process import Worker
from streams.core.config import load_config
from streams.kafka.produce import produce
from streams.kafka.topics import ensure_topics

RATE_LINE = re.compile(r"(\d+) windows/s in")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_worker(tree: Path, config: Path, app_id: str, log: Path) -> tuple[list[float], float]:
    """Rates of the worker's 2nd and 3rd throughput lines; cores its main process used."""
    worker = Worker(config, app_id, log, partitions=4, root=tree, loglevel="info").start()
    try:
        deadline = time.monotonic() + 120
        while "windows/s in" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu0, t0 = _cpu_seconds(worker.proc.pid), time.monotonic()
        while log.read_text().count("windows/s in") < 3 and time.monotonic() < deadline + 60:
            time.sleep(0.1)
        cores = (_cpu_seconds(worker.proc.pid) - cpu0) / (time.monotonic() - t0)
        return [float(r) for r in RATE_LINE.findall(log.read_text())][1:3], cores
    finally:
        worker.kill()                    # the measurement is over; no clean stop needed


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", type=Path, help="source trees to compare")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ends", type=int, default=400, help="window ends in the backlog")
    args = ap.parse_args(argv)
    if not os.environ.get("PERFCAST_KAFKA_BOOTSTRAP"):
        sys.exit("PERFCAST_KAFKA_BOOTSTRAP not set: eval \"$(bash infra/services.sh up)\" first")
    tmp = Path(tempfile.mkdtemp(prefix="perfcast-ab-"))
    prefix = f"ab-{uuid.uuid4().hex[:8]}"
    config = tmp / "bench.toml"
    config.write_text(f'[kafka]\ntopic_prefix = "{prefix}"\n')
    kafka = load_config(config).kafka
    ensure_topics(kafka, partitions=4)
    print(f"# python -m {__spec__.name} {' '.join(argv or sys.argv[1:])}")
    print(host_speed())
    stats = produce(workload(100, args.ends, 1), kafka)
    print(f"backlog: {stats.sent:,} windows produced at {stats.rate:,.0f}/s")
    rates: dict[Path, list[float]] = {tree: [] for tree in args.trees}
    for rnd in range(args.rounds):
        for i, tree in enumerate(args.trees):
            got, cores = _run_worker(tree.resolve(), config, f"{prefix}-{rnd}-{i}",
                                     tmp / f"worker-{rnd}-{i}.log")
            rates[tree] += got
            print(f"round {rnd} {tree}: {', '.join(f'{r:,.0f}' for r in got)} windows/s; "
                  f"worker process {cores:.2f} cores")
    base = sum(rates[args.trees[0]]) / max(len(rates[args.trees[0]]), 1)
    for tree, got in rates.items():
        mean = sum(got) / max(len(got), 1)
        print(f"{tree}: mean {mean:,.0f} windows/s ({mean / base:.2f}x the first tree)")


if __name__ == "__main__":
    main()
