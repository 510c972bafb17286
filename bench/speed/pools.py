"""Held networks solved per solve of the pool model, and what a solve and a capacity search cost.

    python -m bench.speed.pools
    python -m bench.speed.pools --pipeline 1800    # and the pipeline over 30 min of windows

The pool model has no fixed point to iterate: a pool's held tiers are solved once, at every
token count in one pass (:func:`solvers.pools.solve_pools`); with a bursty tier behind the
pool, the other held tiers, the outside and one chain
(:func:`solvers.pools_bursty.solve_pools_bursty`). Per case: the held networks solved per
solve (``inner_solves``) at the capacity search's probes (:func:`solvers.pools.largest_meeting`,
R <= 1 s) -- their mean and largest -- the probes, and the seconds of the search and of one
solve at the capacity. Three tiers (4/4/8 cores, 20/30/50 ms, think time 1 s); no pool (the
CPU-only model, MVA by convolution), one pool over app and db, two disjoint pools, nested
pools, the bursty db behind one, and four classes of 1x/1x/2x/40x cost at app and db under one
pool (``solvers.pools_general``: the wait scaled for the holding time's spread, a fixed point
of the extra wait, by Newton's method on the pool's wait as a function of the think time,
``solvers.pools_fixed``; ``steps/solve``: the enclosing network's solves, the exponential
solution's and the wait curve's included, per solve) and the same by the held chain (``solvers.pools_spread``: the db's services as the
classes' phase-type mixture; three solves, no fixed point, where its budget allows: an 8-core
db's per-job station of 4 phases passes it from 11 users, the factor beyond), and the real
testbed's shape (app and db of one core, 3/3/6/120 ms, a pool of 2) by the chain (-1: a probe
the chain did not take). ``inner/solve``: the held networks (or chains) solved per solve;
``steps/solve``: where counted (``PoolResult.outer_solves``), the enclosing network's solves.
Figures, no pass/fail (target: at most 3 solves per step on average). Last, the pipeline's model of the bursty case
(:class:`streams.predict.model.SystemModel` with ``pool_processes``): its capacity search
(:func:`streams.predict.model.model_capacity`, SLA 1 s), as a prediction pays it once per
window end, with its probes and its seconds. ``--pipeline SECONDS``: the whole pipeline
(:class:`streams.engine.pipeline.Pipeline`, estimation, capacity, band, remedies) over that many
seconds of 5-s windows of the simulated bursty case at 100 users (seed 11), its seconds per
prediction and last capacity, with the bursty tier under the pool solved by its chain and,
for comparison, at its mean (``bursty_pool_wired`` off: the model before the chain was wired).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
import time

import numpy as np

from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.pools import PoolSpec, largest_meeting, solve_pools
from solvers.pools_bursty import solve_pools_bursty
from solvers.pools_general import solve_pools_general
from solvers.pools_spread import SPREAD_FLAG, solve_pools_spread
from solvers.processes import MAP

DEMANDS = [0.02, 0.03, 0.05]
CORES = [4, 4, 8]
BURSTY = MAP(BURSTY_D0, BURSTY_D1)
CASES = {
    "no pool": (False, []),
    "one pool (6, app+db)": (False, [PoolSpec(6, 1, 3)]),
    "two pools (8 web, 6 app+db)": (False, [PoolSpec(8, 0, 1), PoolSpec(6, 1, 3)]),
    "nested (6 app+db, 3 db)": (False, [PoolSpec(6, 1, 3), PoolSpec(3, 2, 3)]),
    "bursty db behind 6": (True, [PoolSpec(6, 1, 3)]),
    "4 classes 1/1/2/40x, 6": ("classes", [PoolSpec(6, 1, 3)]),
    "the same by the held chain": ("chain", [PoolSpec(6, 1, 3)]),
    "testbed shape by the chain": ("testbed", [PoolSpec(2, 0, 2)]),
}
#: the real testbed's shape: app and db of one core, 4 classes of 3/3/6/120 ms at the db
TESTBED = (np.array([[0.001] * 4, [0.003, 0.003, 0.006, 0.12]]), [1, 1])
#: the multi-class case: per class multipliers on the app's and the db's demands, equal mix
MULTIPLIERS = np.array([1.0, 1.0, 2.0, 40.0]) / 11.0
#: the fixed point's steps of the last multi-class solve (counted by :func:`solve`)
STEPS = {"n": 0}


def solve(bursty: bool | str, pools: list[PoolSpec], n: int):
    D = np.array(DEMANDS)[:, None] * np.array([np.ones(4), 4 * MULTIPLIERS, 4 * MULTIPLIERS])
    if bursty == "testbed":
        res = solve_pools_spread(TESTBED[0], n, 1.0, TESTBED[1], pools)
        STEPS["n"] = res.inner_solves if any(f.startswith(SPREAD_FLAG) for f in res.flags) \
            else -1
        return res
    if bursty in ("classes", "chain"):
        res = solve_pools_spread(D, n, 1.0, CORES, pools) if bursty == "chain" \
            else solve_pools_general(D, n, 1.0, CORES, pools)
        # the chain's own solves where it applied, the held networks the factor's solved
        STEPS["n"] = res.inner_solves
        return res
    if bursty:
        procs = [MAP.exponential(DEMANDS[0]), MAP.exponential(DEMANDS[1]),
                 BURSTY.scaled(DEMANDS[2])]
        return solve_pools_bursty(procs, n, 1.0, CORES, pools)
    return solve_pools(DEMANDS, n, 1.0, CORES, pools)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print(f"{'case':<30} {'probes':>6} {'inner/solve':>11} {'max':>4} {'steps/solve':>11} "
          f"{'max':>4} {'capacity':>8} {'search':>8} {'one solve':>9}")
    for name, (bursty, pools) in CASES.items():
        counts: list[int] = []
        steps: list[int] = []

        def meets(n: int) -> bool:
            res = solve(bursty, pools, n)
            counts.append(STEPS["n"] if bursty in ("classes", "chain", "testbed")
                          else res.inner_solves)
            if res.outer_solves > 0:        # counted by the exponential and factor routes
                steps.append(res.outer_solves)
            return bool(res.response_time[0] <= 1.0)

        start = time.perf_counter()
        cap = largest_meeting(meets)
        search = time.perf_counter() - start
        start = time.perf_counter()
        solve(bursty, pools, cap)
        one = time.perf_counter() - start
        step = f"{np.mean(steps):>11.2f} {max(steps):>4}" if steps else f"{'-':>11} {'-':>4}"
        print(f"{name:<30} {len(counts):>6} {np.mean(counts):>11.2f} {max(counts):>4} {step} "
              f"{cap:>8} {search:>7.2f}s {one * 1e3:>7.0f}ms", flush=True)
    pipeline_row()
    if args[:1] == ["--pipeline"]:
        for wired in (True, False):
            pipeline_cost(float(args[1]), wired)
    return 0


def pipeline_cost(duration: float, wired: bool) -> None:
    """The pipeline over ``duration`` seconds of the bursty case's windows (module docstring)."""
    import contextlib
    from unittest import mock

    from solvers.simulation.physical import PhysicalNetwork, Tier, monitor_physical
    from streams.core.config import Config, Pool, SystemConfig
    from streams.engine.pipeline import Pipeline
    net = PhysicalNetwork(tiers=(Tier("web", 4, DEMANDS[0]), Tier("app", 4, DEMANDS[1]),
                                 Tier("db", 8, BURSTY.scaled(DEMANDS[2]))),
                          classes=("a",), mix=(1.0,), think_time=1.0, population=100,
                          pools=(PoolSpec(6, 1, 3),))
    records = monitor_physical(net, duration, 5.0, warmup=30.0, seed=11, start_time=1e9)
    cfg = SystemConfig(tiers=("web", "app", "db"), think_time_s=1.0, sla_s={"*": 1.0},
                       pools={"conn": Pool("app", 6, ("app", "db"))})
    with contextlib.nullcontext() if wired else \
            mock.patch("streams.predict.model.bursty_pool_wired", return_value=False):
        pipe = Pipeline(Config(defaults=cfg))
        start = time.perf_counter()
        outs = [pipe.process(r) for r in records] + [pipe.finish()]
        took = time.perf_counter() - start
    preds = [p for o in outs for p in o.predictions if p.model is not None]
    label = "pipeline, db by its chain" if wired else "pipeline, db at its mean"
    print(f"{label:<30} {len(preds):>4} predictions, {took / max(len(preds), 1):.2f} s each, "
          f"last capacity {preds[-1].capacity_users if preds else None}", flush=True)


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
    print(f"{'pipeline model, bursty db 6':<30} {probes:>6} {'':>11} {'':>4} {'':>11} {'':>4} "
          f"{cap!s:>8} "
          f"{search:>7.2f}s {one * 1e3:>7.0f}ms", flush=True)


if __name__ == "__main__":
    sys.exit(main())
