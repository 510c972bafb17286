"""The pool model's case matrix against the simulated system, several seeds.

    python -m bench.accuracy.pool_matrix                       # every case, seeds 1-3
    python -m bench.accuracy.pool_matrix --cases bursty-6 --seeds 1 --markdown
    python -m bench.accuracy.pool_matrix --no-capacity         # the points only
    python -m bench.accuracy.pool_matrix --cases bursty-6,bursty-12 --duration 1000
    python -m bench.accuracy.pool_matrix --cases bursty-4db,bursty-16db --no-capacity

Three-tier systems (web, app, db; think time 1 s, one class) with a pool on app held across
app and db (:data:`CASES`): pool sizes 4-64, 1-64 cores, populations 60-5,000, the pool
binding, the CPU binding or both near (the class printed is the model's: the held tiers'
throughput at ``K`` tokens against the CPUs' bound, :func:`binding`), and a bursty database
(the MAP(2) of :mod:`solvers.paper000`, index of dispersion ~200) behind the pool. Per case
and population, per seed (3 replications of the case's duration after a tenth of it as warm
up, :func:`solvers.simulation.physical.simulate_physical`): the throughput ``X`` and mean
response time ``R`` simulated and the errors of the pool model
(:func:`solvers.pools_general.solve_pools_general`, the pipeline's: one exponential class is
:func:`solvers.pools.solve_pools` bit for bit; or :func:`solvers.pools_bursty.solve_pools_bursty`
with the bursty tier) and of the CPU-only model (exact MVA, or the MAP network's decomposition
:func:`solvers.decomposition.solve_decomposed`, without the pool). Per case and seed, the
capacity at ``R <= --sla`` s simulated (:func:`solvers.simulation.capacity.simulated_capacity`,
bisection to 1%) against both models' (:func:`solvers.pools.largest_meeting`).

Errors are against each seed's mean; the tables give the mean over the seeds with the 95%
interval of that mean (t with ``seeds - 1`` degrees of freedom) and the worst error over the
seeds and populations (per row also the error on the seeds' mean: a bias). Figures, no
pass/fail (targets: X 3%, R 10%, capacity 10%).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass

import numpy as np
from scipy import stats

from solvers.decomposition import solve_decomposed
from solvers.mva import mva
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.pools import PoolSpec, largest_meeting, solve_pools
from solvers.pools_bursty import solve_pools_bursty
from solvers.pools_general import solve_pools_general
from solvers.processes import MAP
from solvers.simulation.capacity import simulated_capacity
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

THINK = 1.0
BURSTY = MAP(BURSTY_D0, BURSTY_D1)


@dataclass(frozen=True)
class Case:
    name: str
    demands: tuple[float, float, float]
    cores: tuple[int, int, int]
    size: int
    populations: tuple[int, ...]
    duration: float           # simulated seconds a replication
    bursty: bool = False      # the database's service the bursty MAP (mean: its demand)


SMALL = ((0.02, 0.03, 0.05), (4, 4, 8))
ONE = ((0.004, 0.012, 0.006), (1, 2, 1))
LARGE = ((0.004, 0.010, 0.040), (8, 16, 32))
CASES = (
    Case("small-4", *SMALL, 4, (60, 150, 300), 300.0),
    Case("small-12", *SMALL, 12, (60, 150, 300), 300.0),
    Case("small-64", *SMALL, 64, (60, 150, 300), 300.0),
    Case("one-4", *ONE, 4, (60, 150, 300), 200.0),
    Case("one-32", *ONE, 32, (60, 150, 300), 200.0),
    Case("large-16", *LARGE, 16, (500, 1500, 5000), 60.0),
    Case("large-40", *LARGE, 40, (500, 1500, 5000), 60.0),
    Case("large-64", *LARGE, 64, (500, 1500, 5000), 60.0),
    Case("bursty-6", *SMALL, 6, (60, 150, 300), 3000.0, bursty=True),
    Case("bursty-12", *SMALL, 12, (60, 150, 300), 3000.0, bursty=True),
    # held out from the held chain's last-start station's design: a db queue inside the pool
    # (4 db cores, 8 tokens), and a 16-core db behind 10 tokens
    Case("bursty-4db", SMALL[0], (4, 4, 4), 8, (60, 150, 300), 3000.0, bursty=True),
    Case("bursty-16db", (0.01, 0.03, 0.05), (4, 4, 16), 10, (60, 150, 300), 3000.0,
         bursty=True),
)


def processes(case: Case) -> list[MAP]:
    d = case.demands
    return [MAP.exponential(d[0]), MAP.exponential(d[1]),
            BURSTY.scaled(d[2]) if case.bursty else MAP.exponential(d[2])]


def network(case: Case, n: int, pooled: bool = True) -> PhysicalNetwork:
    service = processes(case) if case.bursty else case.demands
    return PhysicalNetwork(tiers=tuple(Tier(name, c, s) for name, c, s in
                                       zip(("web", "app", "db"), case.cores, service)),
                           classes=("a",), mix=(1.0,), think_time=THINK, population=n,
                           pools=(PoolSpec(case.size, 1, 3, "db_connections"),) if pooled
                           else ())


def pool_model(case: Case, n: int):
    pools = [PoolSpec(case.size, 1, 3)]
    if case.bursty:
        return solve_pools_bursty(processes(case), n, THINK, case.cores, pools)
    return solve_pools_general(case.demands, n, THINK, case.cores, pools)


def cpu_model(case: Case, n: int) -> tuple[float, float]:
    """(X, R) of the model without the pool."""
    if case.bursty:
        res = solve_decomposed(processes(case), n, THINK, servers=list(case.cores))
        return float(res.throughput), float(np.ravel(res.response_time)[0])
    res = mva(np.array(case.demands)[:, None], [n], THINK, list(case.cores))
    return float(res.throughput[0]), float(res.response_time[0])


def binding(case: Case) -> str:
    """``pool``, ``CPU`` or ``both``: the held tiers' throughput with every token held over
    the CPUs' bound ``min c_m / D_m``: below 0.85 the pool binds, from 0.99 the CPU, between
    both are near."""
    held = solve_pools(list(case.demands[1:]), case.size, 0.0, list(case.cores[1:])).throughput
    cpu = min(c / d for c, d in zip(case.cores, case.demands))
    ratio = held / cpu
    return "pool" if ratio < 0.85 else "CPU" if ratio >= 0.99 else "both"


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the 95% half width of the mean (t, ``len - 1`` degrees of freedom)."""
    a = np.asarray(values, dtype=float)
    if a.size < 2:
        return float(a.mean()), float("nan")
    return float(a.mean()), float(stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1)
                                  / np.sqrt(a.size))


def points(case: Case, seeds: list[int]) -> list[dict]:
    rows = []
    for n in case.populations:
        start = time.perf_counter()
        model = pool_model(case, n)
        seconds = time.perf_counter() - start
        cpu_X, cpu_R = cpu_model(case, n)
        sims = [simulate_physical(network(case, n), case.duration, warmup=case.duration / 10,
                                  replications=3, seed=seed) for seed in seeds]
        X = [s.total_throughput.mean for s in sims]
        R = [s.total_response_time.mean for s in sims]
        rows.append({"N": n, "X": interval(X), "R": interval(R),
                     "X_err": [model.throughput / x - 1 for x in X],
                     "R_err": [model.response_time[0] / r - 1 for r in R],
                     "cpu_X_err": [cpu_X / x - 1 for x in X],
                     "cpu_R_err": [cpu_R / r - 1 for r in R],
                     "X_mean_err": model.throughput / float(np.mean(X)) - 1,
                     "R_mean_err": model.response_time[0] / float(np.mean(R)) - 1,
                     "pool_u": float(model.pool_utilization[0]), "seconds": seconds})
    return rows


def capacities(case: Case, seeds: list[int], sla: float) -> dict:
    def pooled(n: int) -> bool:
        return bool(pool_model(case, n).response_time[0] <= sla)

    def cpu(n: int) -> bool:
        return cpu_model(case, n)[1] <= sla

    model = largest_meeting(pooled)
    plain = largest_meeting(cpu)
    sims = [simulated_capacity(lambda n: network(case, n), [sla], start=max(1, int(model * 0.9)),
                               duration=case.duration, warmup=case.duration / 10,
                               seed=seed).value for seed in seeds]
    return {"model": model, "cpu": plain, "sim": sims,
            "err": [model / s - 1 for s in sims], "cpu_err": [plain / s - 1 for s in sims]}


def worst(values: list[float]) -> float:
    return max(values, key=abs)


def chosen_cases(cases, names: str, duration: float | None) -> list:
    """The cases named in ``names`` (comma-separated), each run ``duration`` simulated seconds
    a replication where given."""
    chosen = [c for c in cases if c.name in names.split(",")]
    if duration is not None:
        chosen = [dataclasses.replace(c, duration=duration) for c in chosen]
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--sla", type=float, default=1.0)
    parser.add_argument("--no-capacity", action="store_true")
    parser.add_argument("--duration", type=float, default=None,
                        help="simulated seconds a replication for every chosen case")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    chosen = chosen_cases(CASES, args.cases, args.duration)
    seeds = [int(s) for s in args.seeds.split(",")]
    summary = []
    for case in chosen:
        kind = binding(case)
        print(f"\n{case.name}: D {case.demands} cores {case.cores} pool {case.size} "
              f"({kind} binds){' bursty db' if case.bursty else ''}", flush=True)
        print(f"{'N':>5} {'X sim':>16} {'R sim':>18} {'X err':>7} {'R err':>7} "
              f"{'cpu X':>7} {'cpu R':>7} {'pool U':>6} {'solve':>7} {'X/R err on the mean':>19}")
        rows = points(case, seeds)
        for r in rows:
            print(f"{r['N']:>5} {r['X'][0]:>8.2f} ±{r['X'][1]:<6.2f} {r['R'][0]:>9.4f} "
                  f"±{r['R'][1]:<7.4f} {worst(r['X_err']):>+7.1%} {worst(r['R_err']):>+7.1%} "
                  f"{worst(r['cpu_X_err']):>+7.1%} {worst(r['cpu_R_err']):>+7.1%} "
                  f"{r['pool_u']:>6.2f} {r['seconds'] * 1e3:>5.0f}ms "
                  f"{r['X_mean_err']:>+9.1%} {r['R_mean_err']:>+8.1%}", flush=True)
        cap = None if args.no_capacity else capacities(case, seeds, args.sla)
        if cap:
            sim = interval(cap["sim"])
            print(f"capacity at R <= {args.sla:g} s: simulated {cap['sim']} "
                  f"({sim[0]:.0f} ± {sim[1]:.0f}); pool model {cap['model']} "
                  f"{worst(cap['err']):+.1%}; CPU-only {cap['cpu']} "
                  f"{worst(cap['cpu_err']):+.1%}", flush=True)
        summary.append((case, kind, rows, cap))
    if args.markdown:
        print("\n| case | binds | N | worst X / R | CPU-only X / R | capacity sim (95%) "
              "| model | CPU-only |")
        print("|---|---|---|---|---|---|---|---|")
        for case, kind, rows, cap in summary:
            xs = [e for r in rows for e in r["X_err"]]
            rs = [e for r in rows for e in r["R_err"]]
            cx = [e for r in rows for e in r["cpu_X_err"]]
            cr = [e for r in rows for e in r["cpu_R_err"]]
            cores = "/".join(map(str, case.cores))
            label = f"{cores}, K {case.size}{', bursty db' if case.bursty else ''}"
            pops = f"{case.populations[0]}-{case.populations[-1]}"
            if cap:
                sim = interval(cap["sim"])
                caps = (f"{sim[0]:.0f} ± {sim[1]:.0f} | {cap['model']} "
                        f"{worst(cap['err']):+.1%} | {cap['cpu']} {worst(cap['cpu_err']):+.1%}")
            else:
                caps = "- | - | -"
            print(f"| {label} | {kind} | {pops} | {worst(xs):+.1%} / {worst(rs):+.1%} | "
                  f"{worst(cx):+.0%} / {worst(cr):+.0%} | {caps} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
