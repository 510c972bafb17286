"""Held networks solved per solve of the pool model, and what a solve and a capacity search cost.

    python -m bench.speed.pools

The pool model has no fixed point to iterate: a pool's held tiers are solved once, at every
token count in one pass (:func:`solvers.pools.solve_pools`); with a bursty tier behind the
pool, the other held tiers, the outside and one chain
(:func:`solvers.pools_bursty.solve_pools_bursty`). Per case: the held networks solved per
solve (``inner_solves``) at the capacity search's probes (:func:`solvers.pools.largest_meeting`,
R <= 1 s) -- their mean and largest -- the probes, and the seconds of the search and of one
solve at the capacity. Three tiers (4/4/8 cores, 20/30/50 ms, think time 1 s); no pool (the
CPU-only model, MVA by convolution), one pool over app and db, two disjoint pools, nested
pools, and the bursty db behind one. Figures, no pass/fail (target: at most 3 held-network
solves per step on average). Last, the pipeline's model of the bursty case
(:class:`streams.predict.model.SystemModel` with ``pool_processes``): its capacity search
(:func:`streams.predict.model.model_capacity`, SLA 1 s), as a prediction pays it once per
window end, with its probes and its seconds.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
import time

import numpy as np

from solvers.paper000 import _BURSTY_D0, _BURSTY_D1
from solvers.pools import PoolSpec, largest_meeting, solve_pools
from solvers.pools_bursty import solve_pools_bursty
from solvers.processes import MAP

DEMANDS = [0.02, 0.03, 0.05]
CORES = [4, 4, 8]
BURSTY = MAP(_BURSTY_D0, _BURSTY_D1)
CASES = {
    "no pool": (False, []),
    "one pool (6, app+db)": (False, [PoolSpec(6, 1, 3)]),
    "two pools (8 web, 6 app+db)": (False, [PoolSpec(8, 0, 1), PoolSpec(6, 1, 3)]),
    "nested (6 app+db, 3 db)": (False, [PoolSpec(6, 1, 3), PoolSpec(3, 2, 3)]),
    "bursty db behind 6": (True, [PoolSpec(6, 1, 3)]),
}


def solve(bursty: bool, pools: list[PoolSpec], n: int):
    if bursty:
        procs = [MAP.exponential(DEMANDS[0]), MAP.exponential(DEMANDS[1]),
                 BURSTY.scaled(DEMANDS[2])]
        return solve_pools_bursty(procs, n, 1.0, CORES, pools)
    return solve_pools(DEMANDS, n, 1.0, CORES, pools)


def main() -> int:
    print(f"{'case':<30} {'probes':>6} {'inner/solve':>11} {'max':>4} {'capacity':>8} "
          f"{'search':>8} {'one solve':>9}")
    for name, (bursty, pools) in CASES.items():
        counts: list[int] = []

        def meets(n: int) -> bool:
            res = solve(bursty, pools, n)
            counts.append(res.inner_solves)
            return bool(res.response_time[0] <= 1.0)

        start = time.perf_counter()
        cap = largest_meeting(meets)
        search = time.perf_counter() - start
        start = time.perf_counter()
        solve(bursty, pools, cap)
        one = time.perf_counter() - start
        print(f"{name:<30} {len(counts):>6} {np.mean(counts):>11.2f} {max(counts):>4} "
              f"{cap:>8} {search:>7.2f}s {one * 1e3:>7.0f}ms", flush=True)
    pipeline_row()
    return 0


def pipeline_row() -> None:
    """The pipeline model's capacity search on the bursty case (module docstring)."""
    from streams.predict.model import SystemModel, model_capacity
    model = SystemModel(tiers=["web", "app", "db"], classes=["a"],
                        D_mc=np.array(DEMANDS)[:, None], mix=np.array([1.0]),
                        servers=np.array(CORES, dtype=float), think_time=1.0,
                        sla=np.array([1.0]), processes=None, map_limit=10_000,
                        pools=(PoolSpec(6, 1, 3, "conn"),),
                        pool_processes=[MAP.exponential(1.0), MAP.exponential(1.0), BURSTY])
    start = time.perf_counter()
    cap, _ = model_capacity(model)
    search = time.perf_counter() - start
    probes = len(model.solved())
    start = time.perf_counter()
    model.variant().at(int(cap or 1))
    one = time.perf_counter() - start
    print(f"{'pipeline model, bursty db 6':<30} {probes:>6} {'':>11} {'':>4} {cap!s:>8} "
          f"{search:>7.2f}s {one * 1e3:>7.0f}ms", flush=True)


if __name__ == "__main__":
    sys.exit(main())
