"""The worker's per-batch step without Kafka: cost per window against the batch size.

What the core process of ``perfcast worker`` does per batch (:func:`streams.kafka.core_process.
run_batch`): the core over the batch's JSON records, the outputs encoded (JSON for Kafka, line
protocol for InfluxDB), and the state of every system the batch touched snapshotted for the
table's changelog. Under a backlog the worker takes large batches; at 1,000 windows/s it takes
a batch every ~0.1 s, ~100 windows touching ~35 of the 100 systems, so the per-batch costs
(a snapshot per touched system, solves not batched with other systems') weigh more per window.

The workload is ``bench.speed.pipeline``'s default (100 systems x 3 tiers x 14 classes, 5-s windows,
solves on their timer). The core is first fed ``--warm-ends`` window ends untimed (4,110 fill
every tier's history) and its whole state persisted once; then, for each batch size, a copy of
it takes the next ``--windows`` records in batches of that size. Printed per batch size: CPU
time per window (process time, best and median of ``--repeat`` runs), the share in the core
(``process_batch``) and in the snapshot (``persist``), and the changelog bytes per window.

    python -m bench.speed.core_step [--batches 100,400,2000] [--warm-ends 4110]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import sys
import time

from bench.speed.pipeline import CHUNK, TIERS, host_speed, workload_chunks
from streams.core.config import Config
from streams.kafka.core_process import Mirror, run_batch
from streams.engine.runtime import tune_gc
from streams.engine.table_pipeline import TableBackedPipeline


class _Timed:
    """Process time spent in one method of one object (wrapped on the instance)."""

    def __init__(self, obj: object, name: str) -> None:
        self.seconds = 0.0
        inner = getattr(obj, name)

        def timed(*args, **kwargs):
            t0 = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - t0

        setattr(obj, name, timed)


def warmed(systems: int, warm_ends: int, seed: int, config: Config
           ) -> tuple[TableBackedPipeline, list[bytes], list[int]]:
    """The core after ``warm_ends`` ends, its state persisted; and the next records (JSON) with
    their source partitions (4, by system)."""
    chunk_ends = max(CHUNK // (systems * len(TIERS)), 1)
    warm_chunks = -(-warm_ends // chunk_ends)
    chunks = workload_chunks(systems, chunk_ends * (warm_chunks + 80), seed, chunk_ends)
    core = TableBackedPipeline(config, Mirror())
    for _ in range(warm_chunks):
        records = next(chunks)
        for i in range(0, len(records), CHUNK):
            core.process_many(records[i:i + CHUNK])
    core.dirty.update(core.systems)
    core.partition.update({name: int(name[3:]) % 4 for name in core.systems})
    core.persist()
    rest = [r for c in chunks for r in c]
    return core, [json.dumps(r).encode() for r in rest], [int(r["system"][3:]) % 4 for r in rest]


def run(core: TableBackedPipeline, values: list[bytes], partitions: list[int],
        batch: int) -> tuple[float, float, float, int]:
    """CPU seconds in all, in ``process_batch``, in ``persist``; changelog bytes."""
    step, snapshot = _Timed(core, "process_batch"), _Timed(core, "persist")
    size = 0
    gc.collect()
    t0 = time.process_time()
    for i in range(0, len(values), batch):
        result = run_batch(core, values[i:i + batch], partitions[i:i + batch], time.time(),
                           True)
        size += sum(len(v) for _, _, v in result.changelog)
    return time.process_time() - t0, step.seconds, snapshot.seconds, size


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", type=int, default=100)
    ap.add_argument("--warm-ends", type=int, default=4110)
    ap.add_argument("--windows", type=int, default=24_000, help="timed records per run")
    ap.add_argument("--batches", default="100,400,2000", help="batch sizes, comma-separated")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args(argv)
    tune_gc()
    print(f"command: python -m {__spec__.name} {' '.join(argv or sys.argv[1:])}")
    print(host_speed())
    t0 = time.perf_counter()
    core, values, partitions = warmed(args.systems, args.warm_ends, args.seed, Config())
    n = min(args.windows, len(values))
    values, partitions = values[:n], partitions[:n]
    print(f"{args.systems} systems x {len(TIERS)} tiers x 14 classes, warmed with "
          f"{args.warm_ends:,} ends in {time.perf_counter() - t0:.0f} s; {n:,} timed records "
          f"per run, best / median of {args.repeat}")
    print(f"{'batch':>6} {'us/window':>16} {'core':>6} {'snapshot':>9} {'changelog B/window':>19}")
    for batch in (int(b) for b in args.batches.split(",")):
        runs = [run(copy.deepcopy(core), values, partitions, batch) for _ in range(args.repeat)]
        per = [r[0] / n * 1e6 for r in runs]
        best = min(runs, key=lambda r: r[0])
        print(f"{batch:>6} {min(per):>7.1f} / {statistics.median(per):>6.1f} "
              f"{100 * best[1] / best[0]:>5.0f}% {100 * best[2] / best[0]:>8.0f}% "
              f"{best[3] / n:>19,.0f}")


if __name__ == "__main__":
    main()
