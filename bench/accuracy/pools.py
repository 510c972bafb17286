"""A connection pool held across app and db: the pool model against the simulated system.

    python -m bench.accuracy.pools                     # pools 4, 6, 12, 64; 5 populations
    python -m bench.accuracy.pools --pools 6 --populations 150 --markdown
    python -m bench.accuracy.pools --large --duration 100   # 8/16/64 cores, to 3,000 users
    python -m bench.accuracy.pools --remedy --seeds 1,2,3    # raising the pool, simulated

Network: web 4 cores 20 ms, app 4 cores 30 ms, db 8 cores 50 ms (exponential FCFS), think time
1 s, one class; a pool of ``K`` tokens on app held across app and db (the CPUs give at most
133/s: app). ``K = 4, 6`` the pool binds (50/s, 74/s), ``12`` both are near (122/s), ``64``
the CPU binds. ``--large``: web 8 cores 4 ms, app 16 cores 10 ms, db 64 cores 40 ms (CPUs:
1,600/s), pools 16, 48 (bind: 320/s, 960/s) and 128 (both near: 1,575/s), 500-3,000 users.
Per point:

* the simulated physical system (:func:`solvers.simulation.physical.simulate_physical` with
  the pool: FCFS on the token), 3 independent replications of ``--duration`` s after a tenth
  of that as warm-up (95% half widths);
* :func:`solvers.pools.solve_pools` (the pool model) and exact MVA without the pool (the
  CPU-only model), their throughput and response-time errors against the simulation, and the
  pool model's solve time;
* with ``--capacity``: per pool, the largest population whose mean response time is within
  ``--sla`` s, simulated (:func:`solvers.simulation.capacity.simulated_capacity`, 3
  replications of ``--duration`` s a probe, bisection to 1%) and by
  :func:`solvers.pools.pool_capacity` with and without the pool.

* with ``--remedy``: per case of :data:`REMEDY_CASES` (a 6-connection pool over app and db,
  the SLA 1 s, ``required`` users beyond the pool's capacity), the remediation of the system
  model on the true demands (:func:`streams.predict.whatif.remediate`): the pool remedy's
  size ``K'``, its capacity and where it says the breach goes (``breach_tier_after``); then
  per seed the simulated capacity with ``K'`` (the check: within 10%; bisection to 1%, 3
  replications of ``--duration`` s a probe), with the pool removed
  (the ceiling a larger pool approaches: near it, a tier behind the pool binds), and the
  tiers' simulated utilization at the remedy's capacity.

Figures, no pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
import time
from typing import Iterator

import numpy as np

from solvers.mva import mva
from solvers.pools import PoolSpec, pool_capacity, solve_pools
from solvers.simulation.capacity import simulated_capacity
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

DEMANDS = [0.02, 0.03, 0.05]
CORES = [4, 4, 8]
THINK = 1.0
LARGE = ([0.004, 0.010, 0.040], [8, 16, 64], "16,48,128", "500,1500,3000")
#: ``--remedy`` cases: name, demands (web, app, db; 4/4/8 cores), pool size, required users --
#: the pool still binding after the smallest raise, app binding after it, and a slower database
#: (100/s) that binds once the pool is raised
REMEDY_CASES = (("pool stays", [0.02, 0.03, 0.05], 6, 190),
                ("to app", [0.02, 0.03, 0.05], 6, 250),
                ("to db", [0.02, 0.03, 0.08], 6, 195))


def network(n: int, size: int | None, demands: list[float] | None = None) -> PhysicalNetwork:
    """The simulated system with ``n`` users (``size`` ``None``: no pool)."""
    return PhysicalNetwork(tiers=tuple(Tier(name, c, d) for name, c, d in
                                       zip(("web", "app", "db"), CORES, demands or DEMANDS)),
                           classes=("a",), mix=(1.0,), think_time=THINK, population=n,
                           pools=() if size is None else
                           (PoolSpec(size, 1, 3, "db_connections"),))


def remedy_rows(duration: float, seeds: list[int]) -> Iterator[dict]:
    """``--remedy`` (module docstring): one row per case and seed, as each is simulated."""
    from streams.predict.model import SystemModel, model_capacity
    from streams.predict.whatif import remediate

    for name, demands, size, required in REMEDY_CASES:
        model = SystemModel(tiers=["web", "app", "db"], classes=["a"],
                            D_mc=np.array(demands)[:, None], mix=np.array([1.0]),
                            servers=np.array(CORES, dtype=float), think_time=THINK,
                            sla=np.array([1.0]), processes=None, map_limit=10_000,
                            pools=(PoolSpec(size, 1, 3, "db_connections"),))
        before, _ = model_capacity(model)
        start = time.perf_counter()
        plan = remediate(model, required, before)
        seconds = time.perf_counter() - start
        remedy = next(r for r in plan.remedies if r.action.kind == "pool")
        raised = int(remedy.action.value)
        for seed in seeds:
            def simulated(k: int | None, aim: int) -> int:
                return simulated_capacity(lambda n: network(n, k, demands), [1.0],
                                          start=max(1, int(aim * 0.9)), duration=duration,
                                          warmup=duration / 10, seed=seed).value
            sim_after = simulated(raised, remedy.capacity)
            sim_free = simulated(None, remedy.capacity)
            at = simulate_physical(network(remedy.capacity, raised, demands), duration,
                                   warmup=duration / 10, replications=3, seed=seed)
            yield {"case": name, "seed": seed, "K": size, "required": required,
                   "raised": raised, "before": before, "after": remedy.capacity,
                   "sim_after": sim_after, "error": remedy.capacity / sim_after - 1,
                   "sim_free": sim_free, "breach_after": remedy.breach_after,
                   "summary": remedy.summary, "util": [u.mean for u in at.utilization],
                   "seconds": seconds}


def print_remedy(made: Iterator[dict], markdown: bool) -> None:
    print(f"{'case':<11} {'seed':>4} {'K':>2} {'req':>4} {'raised':>6} {'before':>6} "
          f"{'after':>5} {'sim':>4} {'err':>7} {'no pool':>7} {'breach to':>15} "
          f"{'U web/app/db at after':>22} {'solve':>6}")
    rows = []
    for r in made:
        rows.append(r)
        util = "/".join(f"{u:.2f}" for u in r["util"])
        print(f"{r['case']:<11} {r['seed']:>4} {r['K']:>2} {r['required']:>4} {r['raised']:>6} "
              f"{r['before']:>6} {r['after']:>5} {r['sim_after']:>4} "
              f"{r['error']:>+7.1%} {r['sim_free']:>7} {str(r['breach_after']):>15} "
              f"{util:>22} {r['seconds'] * 1e3:>4.0f}ms", flush=True)
    if markdown:
        print("\n| case | required | remedy | capacity model / simulated (seeds) | worst error "
              "| no pool, simulated | breach after |")
        print("|---|---:|---|---|---:|---:|---|")
        for case in dict.fromkeys(r["case"] for r in rows):
            sel = [r for r in rows if r["case"] == case]
            sims = "/".join(str(r["sim_after"]) for r in sel)
            worst = max((r["error"] for r in sel), key=abs)
            free = "/".join(str(r["sim_free"]) for r in sel)
            print(f"| {case} | {sel[0]['required']} | {sel[0]['K']} → {sel[0]['raised']} | "
                  f"{sel[0]['after']} / {sims} | {worst:+.1%} | {free} | "
                  f"{sel[0]['breach_after']} |")


def point(n: int, size: int, duration: float, seed: int) -> dict[str, float]:
    sim = simulate_physical(network(n, size), duration, warmup=duration / 10,
                            replications=3, seed=seed)
    start = time.perf_counter()
    model = solve_pools(DEMANDS, n, THINK, CORES, [PoolSpec(size, 1, 3)])
    seconds = time.perf_counter() - start
    plain = mva(np.array(DEMANDS)[:, None], [n], THINK, CORES)
    X, R = sim.total_throughput, sim.total_response_time
    return {"K": size, "N": n, "X": X.mean, "X_hw": X.half_width, "R": R.mean,
            "R_hw": R.half_width, "X_err": model.throughput / X.mean - 1,
            "R_err": model.response_time[0] / R.mean - 1,
            "cpu_X_err": plain.throughput[0] / X.mean - 1,
            "cpu_R_err": plain.response_time[0] / R.mean - 1,
            "pool_u": model.pool_utilization[0], "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", default="4,6,12,64")
    parser.add_argument("--populations", default="60,120,150,300,1000")
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--capacity", action="store_true",
                        help="also the capacity at --sla, simulated and by the models")
    parser.add_argument("--sla", type=float, default=1.0)
    parser.add_argument("--markdown", action="store_true",
                        help="one line per pool: the worst errors over the populations")
    parser.add_argument("--large", action="store_true",
                        help="the 8/16/64-core network, pools 16-128, 500-3,000 users")
    parser.add_argument("--remedy", action="store_true",
                        help="only the remediation that raises the pool, against simulation")
    parser.add_argument("--seeds", default="1,2,3", help="with --remedy: the seeds")
    args = parser.parse_args(argv)
    if args.remedy:
        print_remedy(remedy_rows(args.duration, [int(s) for s in args.seeds.split(",")]),
                     args.markdown)
        return 0
    if args.large:
        global DEMANDS, CORES
        DEMANDS, CORES, pools, populations = LARGE
        args.pools = pools if args.pools == "4,6,12,64" else args.pools
        args.populations = (populations if args.populations == "60,120,150,300,1000"
                            else args.populations)
    rows = [point(n, k, args.duration, args.seed)
            for k in map(int, args.pools.split(","))
            for n in map(int, args.populations.split(","))]
    print(f"{'K':>3} {'N':>5} {'X sim':>14} {'R sim':>16} {'X':>7} {'R':>7} "
          f"{'cpu X':>7} {'cpu R':>7} {'pool U':>6} {'solve':>7}")
    for r in rows:
        print(f"{r['K']:>3} {r['N']:>5} {r['X']:>8.2f} ±{r['X_hw']:<5.2f} "
              f"{r['R']:>9.4f} ±{r['R_hw']:<6.4f} {r['X_err']:>+7.1%} {r['R_err']:>+7.1%} "
              f"{r['cpu_X_err']:>+7.1%} {r['cpu_R_err']:>+7.1%} {r['pool_u']:>6.2f} "
              f"{r['seconds'] * 1e3:>5.0f}ms")
    if args.markdown:
        print("\n| pool | worst X | worst R | CPU-only: worst X | worst R |")
        print("|---:|---:|---:|---:|---:|")
        for k in dict.fromkeys(r["K"] for r in rows):
            sel = [r for r in rows if r["K"] == k]
            worst = {key: max((r[key] for r in sel), key=abs)
                     for key in ("X_err", "R_err", "cpu_X_err", "cpu_R_err")}
            print(f"| {k} | {worst['X_err']:+.1%} | {worst['R_err']:+.1%} | "
                  f"{worst['cpu_X_err']:+.1%} | {worst['cpu_R_err']:+.1%} |")
    if args.capacity:
        print(f"\ncapacity at R <= {args.sla:g} s")
        print(f"{'K':>3} {'simulated':>22} {'pool model':>16} {'CPU-only':>16}")
        cpu = pool_capacity(DEMANDS, args.sla, THINK, CORES, [])
        for k in map(int, args.pools.split(",")):
            model = pool_capacity(DEMANDS, args.sla, THINK, CORES, [PoolSpec(k, 1, 3)])
            start = max(1, int(model * 0.8))
            sim = simulated_capacity(lambda n, k=k: network(n, k), [args.sla], start=start,
                                     duration=args.duration, warmup=args.duration / 10,
                                     seed=args.seed)
            print(f"{k:>3} {sim.value:>6} [{sim.low:>6.1f}, {sim.high:>6.1f}] "
                  f"{model:>7} {model / sim.value - 1:>+7.1%} {cpu:>7} {cpu / sim.value - 1:>+7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
