"""Pure delays at a pool's held tiers: the held chain with the delays as infinite-server
stations (:func:`solvers.pools_spread.solve_pools_spread`,
:func:`solvers.pools_bursty.solve_pools_bursty` with ``delays``) against the route the
pipeline took with any delay before (:func:`solvers.pools_general.solve_pools_general` on the
network with a delay station after each tier), both against the simulated system.

    python -m bench.accuracy.pool_delays --markdown                  # every case, seeds 1-3
    python -m bench.accuracy.pool_delays --cases mix-2 --delays 1,20 --seeds 1 --duration 300

The simulator (:mod:`solvers.simulation.physical`) has no pure delay of its own; a tier of
``K`` cores (the pool's size) right after each held tier, exponential service of the delay's
mean, is one exactly: at most ``K`` requests are inside the pool, so none ever queues there.
Cases: ``mix-2``, ``h2-2`` and ``spread-3`` of :mod:`bench.accuracy.pool_scv` (a held tier of
spread beyond exponential: the spread chain) and ``bursty-6`` of
:mod:`bench.accuracy.pool_matrix` (a bursty database: the bursty held chain), each with the
same delay ``--delays`` (ms) after every held tier. Per case, delay and population, per seed
(3 replications of the case's duration after a tenth of it as warm up): the throughput and
each class's mean response time simulated; the errors of both routes (``chain``: the held
chain with the delays; ``factor``: the former route) -- the worst over seeds, classes and
populations. With ``--capacity``, per case and delay the capacity (every class within 3x its
mean simulated at 5 users, :data:`bench.accuracy.pool_scv.SLO_FACTOR`; the bursty case R <=
1 s) simulated (bisection to 1%) against both routes'. Cases, delays and seeds fixed before
any run of the routes on them. Figures, no pass/fail (targets: X 3%, R 10%, capacity 10%).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import dataclasses
import sys

import numpy as np

from bench.accuracy import pool_matrix, pool_scv
from bench.accuracy.pool_matrix import interval, worst
from solvers.delay import fold_pool_result, with_delay_stations
from solvers.pools import PoolSpec, largest_meeting
from solvers.pools_bursty import solve_pools_bursty
from solvers.pools_general import solve_pools_general
from solvers.pools_spread import solve_pools_spread
from solvers.simulation.capacity import simulated_capacity
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

ROUTES = ("chain", "factor")
#: the cases (module docstring), their populations and durations kept
CASES = ("mix-2", "h2-2", "spread-3", "bursty-6")


def _case(name: str, duration: float | None):
    for c in pool_scv.CASES + pool_matrix.CASES:
        if c.name == name:
            return c if duration is None else dataclasses.replace(c, duration=duration)
    raise ValueError(f"--cases: no case {name!r}")


def _bursty(case) -> bool:
    return isinstance(case, pool_matrix.Case)


def _base(case, n: int) -> PhysicalNetwork:
    return pool_matrix.network(case, n) if _bursty(case) else pool_scv.network(case, n)


def network(case, n: int, delay: float) -> PhysicalNetwork:
    """The case's simulated system with a tier of ``K`` cores and exponential service of mean
    ``delay`` after each held tier (module docstring); the pool over them too."""
    base = _base(case, n)
    pool = base.pools[0]
    C = len(base.classes)
    tiers: list[Tier] = []
    first = last = 0
    for m, t in enumerate(base.tiers):
        if m == pool.first:
            first = len(tiers)
        tiers.append(t)
        if pool.first <= m < pool.last:
            tiers.append(Tier(f"{t.name}_delay", pool.size, delay,
                              multipliers=None if C == 1 else (1.0,) * C))
        if m == pool.last - 1:
            last = len(tiers)
    return dataclasses.replace(base, tiers=tuple(tiers),
                               pools=(PoolSpec(pool.size, first, last, pool.name),))


def _model_args(case):
    """``(demands, servers, pool, mix, tier_scv, class_scv)`` of the case's model."""
    if _bursty(case):
        return (np.array(case.demands)[:, None], list(case.cores), PoolSpec(case.size, 1, 3),
                [1.0], None, None)
    C = case.classes
    return (case.demands, list(case.cores), case.pool, [1.0 / C] * C, list(case.scv),
            pool_scv.class_scv(case))


def model(case, n: int, delay: float, route: str):
    D, c, pool, mix, scv, cscv = _model_args(case)
    delays = np.zeros_like(D)
    delays[pool.first:pool.last] = delay
    if route == "chain":
        if _bursty(case):
            return solve_pools_bursty(pool_matrix.processes(case), n, pool_scv.THINK, c,
                                      [pool], mix, D, delays)
        return solve_pools_spread(D, n, pool_scv.THINK, c, [pool], mix, scv, cscv, delays)
    D2, c2, pools2 = with_delay_stations(D, c, delays, [pool])
    twice = [None if x is None else np.repeat(np.asarray(x, dtype=float), 2, axis=0)
             for x in (scv, cscv)]
    return fold_pool_result(solve_pools_general(D2, n, pool_scv.THINK, c2, pools2, mix,
                                                *twice))


def targets(case, delay: float) -> np.ndarray:
    """Per class the SLO: the bursty case R <= 1 s; else 3x its mean simulated at 5 users
    (seed 0), with the delays."""
    if _bursty(case):
        return np.array([1.0])
    sim = simulate_physical(network(case, pool_scv.SLO_USERS, delay), case.duration,
                            warmup=case.duration / 10, replications=3, seed=0)
    return pool_scv.SLO_FACTOR * np.array([e.mean for e in sim.response_time])


def points(case, delay: float, seeds: list[int]) -> list[dict]:
    rows = []
    for n in case.populations:
        sims = [simulate_physical(network(case, n, delay), case.duration,
                                  warmup=case.duration / 10, replications=3, seed=seed)
                for seed in seeds]
        X = [s.total_throughput.mean for s in sims]
        Rc = [np.array([e.mean for e in s.response_time]) for s in sims]
        row = {"N": n, "X": interval(X)}
        for route in ROUTES:
            res = model(case, n, delay, route)
            row[route] = {"X": [res.throughput / x - 1 for x in X],
                          "R": [worst(list(np.ravel(res.response_time) / r - 1)) for r in Rc]}
        rows.append(row)
    return rows


def capacities(case, delay: float, seeds: list[int]) -> dict:
    target = targets(case, delay)
    out: dict = {"target": target}
    for route in ROUTES:
        out[route] = largest_meeting(lambda n, r=route: bool(np.all(
            np.ravel(model(case, n, delay, r).response_time) <= target)), 10_000)
    start = max(1, int(min(out[r] for r in ROUTES) * 0.9))
    out["sim"] = [simulated_capacity(lambda n: network(case, n, delay), list(target),
                                     start=start, duration=case.duration,
                                     warmup=case.duration / 10, seed=seed).value
                  for seed in seeds]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--delays", default="1,5,20", help="ms after each held tier")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--duration", type=float, default=None,
                        help="simulated seconds a replication (default: the case's)")
    parser.add_argument("--capacity", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    summary = []
    for name in args.cases.split(","):
        case = _case(name, args.duration)
        for ms in (float(d) for d in args.delays.split(",")):
            delay = ms / 1000.0
            rows = points(case, delay, seeds)
            print(f"\n{name}, delay {ms:g} ms after each held tier", flush=True)
            for r in rows:
                print(f"{r['N']:>5} X {r['X'][0]:8.2f} ±{r['X'][1]:<6.2f} "
                      + " ".join(f"{k} X {worst(r[k]['X']):+.1%} R {worst(r[k]['R']):+.1%}"
                                 for k in ROUTES), flush=True)
            cap = capacities(case, delay, seeds) if args.capacity else None
            if cap:
                sim = interval(cap["sim"])
                print(f"capacity: simulated {cap['sim']} ({sim[0]:.1f} ± {sim[1]:.1f}); "
                      + "; ".join(f"{k} {cap[k]} {worst([cap[k] / s - 1 for s in cap['sim']]):+.1%}"
                                  for k in ROUTES), flush=True)
            summary.append((name, case, ms, rows, cap))
    if args.markdown:
        print("\n| case | delay ms | N | X chain / factor | R chain / factor | capacity sim | "
              "chain | factor |")
        print("|---|---|---|---|---|---|---|---|")
        for name, case, ms, rows, cap in summary:
            xs = " / ".join(f"{worst([v for r in rows for v in r[k]['X']]):+.1%}"
                            for k in ROUTES)
            rs = " / ".join(f"{worst([v for r in rows for v in r[k]['R']]):+.1%}"
                            for k in ROUTES)
            caps = "- | - | -"
            if cap:
                sim = interval(cap["sim"])
                caps = f"{sim[0]:.1f} ± {sim[1]:.1f} | " + " | ".join(
                    f"{cap[k]} {worst([cap[k] / s - 1 for s in cap['sim']]):+.1%}"
                    for k in ROUTES)
            print(f"| {name} | {ms:g} | {case.populations[0]}-{case.populations[-1]} | {xs} | "
                  f"{rs} | {caps} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
