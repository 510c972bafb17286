"""CPU time of ``bench.speed.pipeline --quick``'s workloads on this tree against other trees,
in alternated rounds (a loaded host's speed drifts: each round runs every tree once, the order
rotated, and the ratios are taken within a round).

Run from the repository root:

    python -m bench.speed.pipeline_against /work/wt/base              # 5 rounds
    python -m bench.speed.pipeline_against /work/wt/base --rounds 7 --reps 3

Per tree and round, a fresh process (``PYTHONPATH`` the tree, so the tree's own ``streams`` and
its own ``bench.speed.pipeline`` workload) measures the CPU time (``time.process_time``, best
of ``--reps``) of ``Pipeline.process_many`` over

* *cold*: ``--quick``'s 10 systems x 3 tiers x 14 classes, 24 window ends (720 records), on a
  fresh pipeline each repetition;
* *steady*: 300 window ends fed untimed (seed 2), then 24 more timed on a copy of the warmed
  pipeline each repetition (as ``bench.speed.pipeline``'s steady state with ``--quick``).

Printed: per round and workload the throughput ratio ``t_other / t_this`` (above 1: this tree
is faster), and its median over the rounds.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def measure(reps: int, ends: int) -> dict[str, float]:
    """This process's tree: best CPU seconds of the cold and the steady run."""
    from bench.speed.pipeline import CHUNK, TIERS, workload, workload_chunks
    from streams.core.config import Config
    from streams.engine.pipeline import Pipeline
    from streams.engine.runtime import tune_gc
    tune_gc()
    systems, config = 10, Config()

    def feed(p: Pipeline, recs: list) -> None:
        for i in range(0, len(recs), CHUNK):
            p.process_many(recs[i:i + CHUNK])

    records = workload(systems, ends, 0)
    cold = []
    for _ in range(reps):
        gc.collect()
        t = time.process_time()
        feed(Pipeline(config), records)
        cold.append(time.process_time() - t)
    chunk_ends = max(CHUNK // (systems * len(TIERS)), 1)
    warm_chunks, timed_chunks = -(-300 // chunk_ends), -(-24 // chunk_ends)
    chunks = workload_chunks(systems, chunk_ends * (warm_chunks + timed_chunks), 2, chunk_ends,
                             users=(50.0, 150.0))
    warm = Pipeline(config)
    for _ in range(warm_chunks):
        feed(warm, next(chunks))
    timed = [r for c in chunks for r in c]
    steady = []
    for _ in range(reps):
        p = copy.deepcopy(warm)
        gc.collect()
        t = time.process_time()
        feed(p, timed)
        steady.append(time.process_time() - t)
    return {"cold": min(cold), "steady": min(steady)}


def run_in(tree: Path, reps: int, ends: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    # this file run as a script: the tree's packages come from PYTHONPATH (an older tree
    # need not have this module)
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--measure",
                          "--reps", str(reps), "--ends", str(ends)],
                         cwd=tree, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("others", nargs="*", type=Path, help="trees to compare with")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ends", type=int, default=24, help="cold run's window ends")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.reps, args.ends)))
        return
    if not args.others:
        ap.error("name at least one other tree")
    trees = [ROOT, *[t.resolve() for t in args.others]]
    print(f"this tree {ROOT}; load average {os.getloadavg()[0]:.1f}")
    ratios: dict[Path, dict[str, list[float]]] = {t: {"cold": [], "steady": []}
                                                  for t in trees[1:]}
    for r in range(args.rounds):
        order = trees[r % len(trees):] + trees[:r % len(trees)]
        got = {t: run_in(t, args.reps, args.ends) for t in order}
        for t in trees[1:]:
            for k in ("cold", "steady"):
                ratios[t][k].append(got[t][k] / got[ROOT][k])
        print(f"round {r + 1}: " + "; ".join(
            f"{t.name}: cold {got[t]['cold']:.3f} s, steady {got[t]['steady']:.3f} s"
            for t in order))
    for t in trees[1:]:
        for k in ("cold", "steady"):
            v = ratios[t][k]
            print(f"{k}: this tree's throughput over {t}'s: "
                  f"{' '.join(f'{x:.3f}' for x in v)}; median {statistics.median(v):.3f}")


if __name__ == "__main__":
    main()
