"""The pool models' answers on the pool benches' cases, written to a file and compared with
another tree's: a change to how a pool model is solved (not what it solves) must keep them.

    python -m bench.accuracy.pool_models_same --out /tmp/this.json
    PYTHONPATH=/other/tree python -m bench.accuracy.pool_models_same --out /tmp/other.json
    python -m bench.accuracy.pool_models_same --compare /tmp/other.json /tmp/this.json

Per case of :mod:`bench.accuracy.pool_matrix` (the pool model it runs:
:func:`solvers.pools_general.solve_pools_general` or, with the bursty database,
:func:`solvers.pools_bursty.solve_pools_bursty`) at its populations, and per case of
:mod:`bench.accuracy.pool_scv` and model (``exp``, ``gen``, ``spread``, ``chain``) at its
populations and at 2x its last: the throughput, each class's response time, each tier's
residence, the pool's utilization and wait; and each model's capacity (pool_matrix: R <= 1 s;
pool_scv: within 3x each class's response time at 5 users *in the model itself*, so that no
simulation is needed -- the same search as the bench's, on a target both trees share).
``--compare`` prints the largest relative difference per case and quantity, and the capacities
that differ. ``--skip-bursty`` leaves out the bursty cases (their chains take most of the time).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import sys

import numpy as np

from bench.accuracy import pool_matrix, pool_scv
from solvers.pools import largest_meeting

FIELDS = ("throughput", "response_time", "residence_time", "pool_utilization",
          "pool_waiting_time")


def _answers(res) -> dict:
    return {f: np.ravel(np.asarray(getattr(res, f), dtype=float)).tolist() for f in FIELDS}


def collect(skip_bursty: bool) -> dict:
    out: dict = {}
    for case in pool_matrix.CASES:
        if skip_bursty and case.bursty:
            continue
        key = f"matrix {case.name}"
        out[key] = {str(n): _answers(pool_matrix.pool_model(case, n)) for n in case.populations}
        out[key]["capacity"] = largest_meeting(
            lambda n, c=case: bool(pool_matrix.pool_model(c, n).response_time[0] <= 1.0))
        print(key, flush=True)
    for case in pool_scv.CASES:
        for kind in pool_scv.MODELS:
            key = f"scv {case.name} {kind}"
            pops = list(case.populations) + [2 * case.populations[-1]]
            out[key] = {str(n): _answers(pool_scv.model(case, n, kind)) for n in pops}
            target = 3.0 * pool_scv.model(case, pool_scv.SLO_USERS, kind).response_time
            out[key]["capacity"] = largest_meeting(lambda n, c=case, k=kind: bool(np.all(
                pool_scv.model(c, n, k).response_time <= target)), 10_000)
            print(key, flush=True)
    return out


def _rel(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    scale = np.maximum(np.abs(x), np.abs(y))
    d = np.divide(np.abs(x - y), scale, out=np.zeros_like(scale), where=scale > 0)
    return float(d.max()) if d.size else 0.0


def compare(before: dict, after: dict) -> int:
    print(f"{'case':<28} " + " ".join(f"{f[:14]:>14}" for f in FIELDS) + "  capacity")
    worst = dict.fromkeys(FIELDS, 0.0)
    moved = 0
    for key in before:
        if key not in after:
            print(f"{key:<28} missing in the second")
            continue
        rel = {f: max(_rel(before[key][n][f], after[key][n][f]) for n in before[key]
                      if n != "capacity") for f in FIELDS}
        for f in FIELDS:
            worst[f] = max(worst[f], rel[f])
        cap = (before[key]["capacity"], after[key]["capacity"])
        moved += cap[0] != cap[1]
        print(f"{key:<28} " + " ".join(f"{rel[f]:>14.1e}" for f in FIELDS)
              + f"  {cap[0]}{'' if cap[0] == cap[1] else f' -> {cap[1]}'}")
    print("largest: " + ", ".join(f"{f} {worst[f]:.1e}" for f in FIELDS)
          + f"; capacities moved: {moved} of {len(before)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--compare", nargs=2)
    parser.add_argument("--skip-bursty", action="store_true")
    args = parser.parse_args(argv)
    if args.compare:
        with open(args.compare[0]) as a, open(args.compare[1]) as b:
            return compare(json.load(a), json.load(b))
    if not args.out:
        parser.error("--out FILE or --compare BEFORE AFTER")
    data = collect(args.skip_bursty)
    with open(args.out, "w") as f:
        json.dump(data, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
