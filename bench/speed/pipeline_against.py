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
is faster), and its median over the rounds. With ``--functions``, also the CPU time a repetition
spends in each of :data:`FUNCTIONS` (those a tree has; wrapped with a CPU clock, nested ones
counted in their callers too), summed over the rounds, this tree against the first other one,
largest difference first: where the time went.
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
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
#: systems of the workloads (``bench.speed.pipeline --quick``'s)
SYSTEMS = 10
#: ``(module, qualified name)`` timed by ``--functions``: the solve's steps and what they call
FUNCTIONS = [
    ("streams.engine.pipeline", "Pipeline._admit"), ("streams.core.tier", "step_tiers"),
    ("streams.core.tier", "_apply_group"), ("streams.engine.system", "SystemState.prepare"),
    ("streams.core.tier", "TierState.refresh"), ("estimators.class_split", "class_split"),
    ("estimators.class_split", "class_split_many"),
    ("estimators.dispersion.interval", "index_of_dispersion_interval"),
    ("streams.core.tier", "TierState._separability"), ("streams.core.tier", "load_dependence"),
    ("streams.core.tier", "TierState.take_interval"), ("streams.engine.system", "SystemState._visits"),
    ("streams.predict.model", "build_model"), ("streams.predict.general_service", "general_model"),
    ("solvers.mva", "mva_curves"), ("solvers.mva_general", "mva_curves_general"),
    ("streams.engine.system", "SystemState.complete"), ("streams.engine.system", "SystemState._predict"),
    ("streams.predict.prediction", "class_parts"), ("streams.predict.prediction", "tier_parts"),
    ("streams.engine.system", "SystemState._assess"), ("streams.engine.system", "SystemState._alerts"),
    ("streams.predict.confidence", "trust_reasons")]


def wrap(module: str, qual: str, make: Callable[[Any, str], Any]) -> bool:
    """Replace ``module``'s ``qual`` (a function or a method) by ``make(f, key)``, ``key``
    ``module.qual``; a module-level function is replaced in the modules that imported it by
    name too. ``False`` where this tree has no such function."""
    import importlib
    try:
        owner: Any = importlib.import_module(module)
    except ImportError:
        return False
    *path, name = qual.split(".")
    for part in path:
        owner = getattr(owner, part, None)
    f = getattr(owner, name, None) if owner is not None else None
    if f is None:
        return False
    wrapped = make(f, f"{module}.{qual}")
    raw = vars(owner).get(name)
    setattr(owner, name, staticmethod(wrapped) if isinstance(raw, staticmethod) else wrapped)
    if not path:
        for m in list(sys.modules.values()):
            if getattr(m, "__name__", "").startswith(("streams", "estimators", "solvers")) \
                    and getattr(m, name, None) is f:
                setattr(m, name, wrapped)
    return True


def _time_functions(spent: dict[str, float]) -> None:
    """Wrap :data:`FUNCTIONS` (where this tree has them) to add their CPU time to ``spent``."""
    def make(f: Any, key: str) -> Any:
        def timed(*a: Any, **k: Any) -> Any:
            t = time.process_time()
            try:
                return f(*a, **k)
            finally:
                spent[key] = spent.get(key, 0.0) + time.process_time() - t
        return timed
    for module, qual in FUNCTIONS:
        wrap(module, qual, make)


def feed(pipeline: Any, records: list) -> None:
    """``records`` into ``pipeline`` in :mod:`bench.speed.pipeline`'s batches."""
    from bench.speed.pipeline import CHUNK
    for i in range(0, len(records), CHUNK):
        pipeline.process_many(records[i:i + CHUNK])


def warmed(config: Any) -> tuple[Any, list]:
    """The steady workload: a pipeline fed 300 window ends of :data:`SYSTEMS` systems (seed
    2), and the 24 more window ends a repetition feeds a copy of it."""
    from bench.speed.pipeline import CHUNK, TIERS, workload_chunks
    from streams.engine.pipeline import Pipeline
    chunk_ends = max(CHUNK // (SYSTEMS * len(TIERS)), 1)
    warm_chunks, timed_chunks = -(-300 // chunk_ends), -(-24 // chunk_ends)
    chunks = workload_chunks(SYSTEMS, chunk_ends * (warm_chunks + timed_chunks), 2, chunk_ends,
                             users=(50.0, 150.0))
    warm = Pipeline(config)
    for _ in range(warm_chunks):
        feed(warm, next(chunks))
    return warm, [r for c in chunks for r in c]


def measure(reps: int, ends: int, functions: bool = False) -> dict[str, Any]:
    """This process's tree: best CPU seconds of the cold and the steady run (with
    ``functions``: and the CPU seconds a repetition spends in each of :data:`FUNCTIONS`)."""
    from bench.speed.pipeline import workload
    from streams.core.config import Config
    from streams.engine.pipeline import Pipeline
    from streams.engine.runtime import tune_gc
    tune_gc()
    config = Config()
    spent: dict[str, float] = {}
    if functions:
        _time_functions(spent)
    records = workload(SYSTEMS, ends, 0)
    per_rep: dict[str, dict[str, float]] = {}
    cold = []
    for _ in range(reps):
        gc.collect()
        t = time.process_time()
        feed(Pipeline(config), records)
        cold.append(time.process_time() - t)
    per_rep["cold"] = {k: v / reps for k, v in spent.items()}
    warm, timed = warmed(config)
    spent.clear()
    steady = []
    for _ in range(reps):
        p = copy.deepcopy(warm)
        gc.collect()
        t = time.process_time()
        feed(p, timed)
        steady.append(time.process_time() - t)
    per_rep["steady"] = {k: v / reps for k, v in spent.items()}
    out: dict[str, Any] = {"cold": min(cold), "steady": min(steady)}
    if functions:
        out["functions"] = per_rep
    return out


def run_in(tree: Path, reps: int, ends: int, functions: bool = False) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    # this file run as a script: the tree's packages come from PYTHONPATH (an older tree
    # need not have this module)
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--measure",
                          "--reps", str(reps), "--ends", str(ends)]
                         + (["--functions"] if functions else []),
                         cwd=tree, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("others", nargs="*", type=Path, help="trees to compare with")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ends", type=int, default=24, help="cold run's window ends")
    ap.add_argument("--functions", action="store_true",
                    help="also the CPU time in each of the solve's steps, against the first tree")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.reps, args.ends, args.functions)))
        return
    if not args.others:
        ap.error("name at least one other tree")
    trees = [ROOT, *[t.resolve() for t in args.others]]
    print(f"this tree {ROOT}; load average {os.getloadavg()[0]:.1f}")
    ratios: dict[Path, dict[str, list[float]]] = {t: {"cold": [], "steady": []}
                                                  for t in trees[1:]}
    spent = {t: {"cold": {}, "steady": {}} for t in trees[:2]}
    for r in range(args.rounds):
        order = trees[r % len(trees):] + trees[:r % len(trees)]
        got = {t: run_in(t, args.reps, args.ends, args.functions) for t in order}
        for t in trees[:2] if args.functions else ():
            for k, per in got[t]["functions"].items():
                for name, v in per.items():
                    spent[t][k][name] = spent[t][k].get(name, 0.0) + v / args.rounds
        for t in trees[1:]:
            for k in ("cold", "steady"):
                ratios[t][k].append(got[t][k] / got[ROOT][k])
        print(f"round {r + 1}: " + "; ".join(
            f"{t.name}: cold {got[t]['cold']:.3f} s, steady {got[t]['steady']:.3f} s"
            for t in order))
    for k in ("cold", "steady") if args.functions else ():
        mine, other = spent[ROOT][k], spent[trees[1]][k]
        print(f"{k}: ms a repetition in each step, {trees[1].name} -> this tree (difference)")
        for name in sorted(set(mine) | set(other),
                           key=lambda n: other.get(n, 0.0) - mine.get(n, 0.0)):
            a, b = 1000 * other.get(name, 0.0), 1000 * mine.get(name, 0.0)
            print(f"  {a:8.2f} -> {b:8.2f} ({b - a:+7.2f})  {name}")
    for t in trees[1:]:
        for k in ("cold", "steady"):
            v = ratios[t][k]
            print(f"{k}: this tree's throughput over {t}'s: "
                  f"{' '.join(f'{x:.3f}' for x in v)}; median {statistics.median(v):.3f}")


if __name__ == "__main__":
    main()
