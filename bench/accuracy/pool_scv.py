"""A pool whose holding time varies more than exponential: the pool model with and without the
holding-time correction against the simulated system, several seeds.

    python -m bench.accuracy.pool_scv --markdown                 # every case, seeds 1-3
    python -m bench.accuracy.pool_scv --cases h2-2 --seeds 1 --duration 300

Cases (:data:`CASES`, think time 1 s; a pool held across app and db):

* ``h2-K``: web/app/db of 4/2/1 cores, 20/5/30 ms, the database's service hyperexponential
  (balanced means, SCV :data:`H2_SCV`), one class, a pool of ``K`` (the tokens queue at the
  database); ``h2-Kc``: 4/2/2 cores, 20/10/50 ms (a pool of 2: no queue inside it);
* ``mix-2``: the real testbed's shape -- app and db of one core each, a pool of 2, four classes
  of equal share whose database cost is 3/3/6/120 ms (exponential), app 1 ms each;
* ``spread-K``: a spread within one class -- its database service hyperexponential (SCV
  :data:`SPREAD_SCV`, a query whose cost depends on the data it reaches), the other classes'
  exponential: ``spread-2`` the testbed's shape with a dear class of 30 ms (app/db one core
  each, 3/3/6/30 ms), ``spread-3`` three classes of 8/16/64 ms on a database of 2 cores, app
  2 ms on 2 cores, a pool of 3. Cases and seeds fixed before any run of the model on them.

Per population and seed (3 replications of the case's duration after a tenth of it as warm
up, :func:`solvers.simulation.physical.simulate_physical`): the throughput ``X``, the
response time per class ``R_c`` (worst class), the pool's wait per request (Little's law on the
simulated waiting requests) against :func:`solvers.pools.solve_pools` (``exp``),
:func:`solvers.pools_general.solve_pools_general` with the tiers' service SCVs (``general``)
with each class's own spread too (``spread``: ``class_scv``; the same as ``general`` where
no class has one), and :func:`solvers.pools_spread.solve_pools_spread` (``chain``: the held
tier's services as a phase-type renewal process in the held chain).
Per case and seed the capacity -- the largest population whose every class's mean is within 3x
its mean simulated at 5 users (the testbed's SLO rule) -- simulated
(:func:`solvers.simulation.capacity.simulated_capacity`, bisection to 1%) against both
models'. Figures, no pass/fail (targets: X 3%, R 10%, capacity 10%). Three seeds of 600 s
cannot resolve a capacity of ~16 users to 10% (one seed's bisection 15-18):
:mod:`bench.accuracy.pool_scv_truth` gives a case's truth from more seeds and longer runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import math
import sys
from dataclasses import dataclass

import numpy as np

from bench.accuracy.pool_matrix import chosen_cases, interval, worst
from solvers.pools import PoolSpec, largest_meeting, solve_pools
from solvers.pools_general import solve_pools_general
from solvers.pools_spread import solve_pools_spread
from solvers.processes import MAP
from solvers.simulation.capacity import simulated_capacity
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

THINK = 1.0
H2_SCV = 10.0
SPREAD_SCV = 9.0
#: the SLO per class: this many times its mean simulated at SLO_USERS
SLO_FACTOR = 3.0
SLO_USERS = 5


def hyperexponential(mean: float, scv: float) -> MAP:
    """The renewal MAP of a two-phase hyperexponential of ``mean`` and ``scv >= 1`` with
    balanced means: phase ``i`` chosen with ``p_i``, rate ``2 p_i / mean``."""
    p = 0.5 * (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0)))
    rates = np.array([2.0 * p / mean, 2.0 * (1.0 - p) / mean])
    alpha = np.array([p, 1.0 - p])
    return MAP(np.diag(-rates), np.outer(rates, alpha))


@dataclass(frozen=True)
class Case:
    name: str
    cores: tuple[int, ...]
    means: tuple[float, ...]              # the tiers' mean service (class multiplier 1)
    multipliers: tuple[tuple[float, ...], ...]   # per tier, per class
    scv: tuple[float, ...]                # per tier, the service SCV
    size: int
    populations: tuple[int, ...]
    duration: float
    #: per tier, per class the class's own service SCV (``None``: the tier's process)
    class_scv: tuple[tuple[float | None, ...], ...] | None = None

    @property
    def classes(self) -> int:
        return len(self.multipliers[0])

    @property
    def demands(self) -> np.ndarray:
        return np.array(self.means)[:, None] * np.array(self.multipliers)

    @property
    def pool(self) -> PoolSpec:
        return PoolSpec(self.size, len(self.cores) - 2, len(self.cores), "pool")


ONE = ((1.0,), (1.0,), (1.0,))
H2 = dict(cores=(4, 2, 1), means=(0.02, 0.005, 0.03), multipliers=ONE, scv=(1.0, 1.0, H2_SCV))
H2C = dict(cores=(4, 2, 2), means=(0.02, 0.01, 0.05), multipliers=ONE, scv=(1.0, 1.0, H2_SCV))
CASES = (
    Case("h2-2", **H2, size=2, populations=(10, 20, 30, 40), duration=1500.0),
    Case("h2-4", **H2, size=4, populations=(10, 20, 30, 40), duration=1500.0),
    Case("h2-2c", **H2C, size=2, populations=(15, 25, 35, 50), duration=1500.0),
    Case("h2-4c", **H2C, size=4, populations=(20, 35, 50), duration=1500.0),
    Case("mix-2", cores=(1, 1), means=(0.001, 0.003),
         multipliers=((1.0, 1.0, 1.0, 1.0), (1.0, 1.0, 2.0, 40.0)), scv=(1.0, 1.0), size=2,
         populations=(10, 20, 30, 40), duration=600.0),
    Case("spread-2", cores=(1, 1), means=(0.001, 0.003),
         multipliers=((1.0, 1.0, 1.0, 1.0), (1.0, 1.0, 2.0, 10.0)), scv=(1.0, 1.0), size=2,
         populations=(10, 20, 30, 40), duration=600.0,
         class_scv=((None,) * 4, (None, None, None, SPREAD_SCV))),
    Case("spread-3", cores=(2, 2), means=(0.002, 0.008),
         multipliers=((1.0, 1.0, 1.0), (1.0, 2.0, 8.0)), scv=(1.0, 1.0), size=3,
         populations=(20, 40, 60, 80), duration=600.0,
         class_scv=((None,) * 3, (None, None, SPREAD_SCV))),
)


def network(case: Case, n: int) -> PhysicalNetwork:
    names = ("web", "app", "db")[-len(case.cores):]
    tiers = []
    own = case.class_scv or ((None,) * case.classes,) * len(case.cores)
    for name, c, m, mult, v, vc in zip(names, case.cores, case.means, case.multipliers,
                                       case.scv, own):
        service = m if v == 1.0 else hyperexponential(m, v)
        per_class = None if all(x is None for x in vc) else tuple(
            None if x is None else hyperexponential(m, x) for x in vc)
        tiers.append(Tier(name, c, service, multipliers=mult, class_service=per_class))
    C = case.classes
    return PhysicalNetwork(tiers=tuple(tiers), classes=tuple(f"c{i}" for i in range(C)),
                           mix=tuple([1.0 / C] * C), think_time=THINK, population=n,
                           pools=(case.pool,))


#: the models compared: the exponential flow-equivalent station, the tiers' SCVs, the
#: classes' own spread too, and the held chain with the tier's phase-type services
MODELS = ("exp", "gen", "spread", "chain")


def class_scv(case: Case) -> np.ndarray | None:
    """Per tier and class the class's own SCV (NaN: the tier's), ``None`` where none has one."""
    if case.class_scv is None:
        return None
    return np.array([[np.nan if x is None else x for x in row] for row in case.class_scv])


def model(case: Case, n: int, kind: str):
    C = case.classes
    args = (case.demands, n, THINK, list(case.cores), [case.pool], [1.0 / C] * C)
    if kind == "exp":
        return solve_pools(*args)
    if kind == "chain":
        return solve_pools_spread(*args, tier_scv=list(case.scv), class_scv=class_scv(case))
    return solve_pools_general(*args, tier_scv=list(case.scv),
                               class_scv=class_scv(case) if kind == "spread" else None)


def slo(case: Case) -> np.ndarray:
    """Per class, :data:`SLO_FACTOR` times its mean simulated at :data:`SLO_USERS` users
    (seed 0; the testbed's rule)."""
    sim = simulate_physical(network(case, SLO_USERS), case.duration,
                            warmup=case.duration / 10, replications=3, seed=0)
    return SLO_FACTOR * np.array([e.mean for e in sim.response_time])


def points(case: Case, seeds: list[int]) -> list[dict]:
    rows = []
    for n in case.populations:
        sims = [simulate_physical(network(case, n), case.duration, warmup=case.duration / 10,
                                  replications=3, seed=seed) for seed in seeds]
        X = [s.total_throughput.mean for s in sims]
        Rc = [np.array([e.mean for e in s.response_time]) for s in sims]
        W = [s.pool_waiting[0].mean / s.total_throughput.mean for s in sims]
        row = {"N": n, "X": interval(X), "W": interval(W)}
        for key in MODELS:
            res = model(case, n, key)
            row[key] = {"X": [res.throughput / x - 1 for x in X],
                        "R": [worst(list(res.response_time / r - 1)) for r in Rc],
                        "W": float(res.pool_waiting_time[0]),
                        "scv": None if res.holding_scv is None else float(res.holding_scv[0])}
        rows.append(row)
    return rows


def capacities(case: Case, seeds: list[int], target: np.ndarray) -> dict:
    out = {}
    for key in MODELS:
        out[key] = largest_meeting(
            lambda n, k=key: bool(np.all(model(case, n, k).response_time <= target)), 10_000)
    start = max(1, int(min(out.values()) * 0.9))
    out["sim"] = [simulated_capacity(lambda n: network(case, n), list(target), start=start,
                                     duration=case.duration, warmup=case.duration / 10,
                                     seed=seed).value for seed in seeds]
    for key in MODELS:
        out[f"{key}_err"] = [out[key] / s - 1 for s in out["sim"]]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--no-capacity", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    chosen = chosen_cases(CASES, args.cases, args.duration)
    seeds = [int(s) for s in args.seeds.split(",")]
    summary = []
    for case in chosen:
        target = slo(case)
        print(f"\n{case.name}: cores {case.cores} means {case.means} SCV {case.scv} "
              f"pool {case.size}, SLO {np.round(target, 4).tolist()}", flush=True)
        print(f"{'N':>4} {'X sim':>14} {'wait sim ms':>14} {'X exp/gen/spread/chain':>24} "
              f"{'R exp/gen/spread/chain':>24} {'wait exp/gen/spread/chain ms':>24} "
              f"{'SCV_H gen/spread':>16}")
        rows = points(case, seeds)
        for r in rows:
            print(f"{r['N']:>4} {r['X'][0]:>7.2f} ±{r['X'][1]:<5.2f} {r['W'][0] * 1e3:>7.1f} "
                  f"±{r['W'][1] * 1e3:<5.1f} "
                  + "/".join(f"{worst(r[k]['X']):+.1%}" for k in MODELS) + " "
                  + "/".join(f"{worst(r[k]['R']):+.1%}" for k in MODELS) + " "
                  + "/".join(f"{r[k]['W'] * 1e3:.1f}" for k in MODELS)
                  + f" {r['gen']['scv']:.2f}/{r['spread']['scv']:.2f}", flush=True)
        cap = None if args.no_capacity else capacities(case, seeds, target)
        if cap:
            sim = interval(cap["sim"])
            print(f"capacity: simulated {cap['sim']} ({sim[0]:.0f} ± {sim[1]:.0f}); "
                  + "; ".join(f"{k} {cap[k]} {worst(cap[k + '_err']):+.1%}" for k in MODELS),
                  flush=True)
        summary.append((case, rows, cap))
    if args.markdown:
        print("\n| case | N | SCV_H gen / spread | X exp / gen / spread / chain | R exp / gen / "
              "spread / chain | wait sim / exp / gen / spread / chain ms | capacity sim | exp | gen "
              "| spread | chain |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for case, rows, cap in summary:
            xs = " / ".join(f"{worst([v for r in rows for v in r[k]['X']]):+.1%}"
                            for k in MODELS)
            rs = " / ".join(f"{worst([v for r in rows for v in r[k]['R']]):+.1%}"
                            for k in MODELS)
            top = rows[-1]
            waits = (f"{top['W'][0] * 1e3:.1f} / "
                     + " / ".join(f"{top[k]['W'] * 1e3:.1f}" for k in MODELS)
                     + f" (N {top['N']})")
            caps = "- | - | - | -"
            if cap:
                sim = interval(cap["sim"])
                caps = f"{sim[0]:.0f} ± {sim[1]:.0f} | " + " | ".join(
                    f"{cap[k]} {worst(cap[k + '_err']):+.1%}" for k in MODELS)
            print(f"| {case.name} | {case.populations[0]}-{case.populations[-1]} | "
                  f"{rows[0]['gen']['scv']:.1f} / {rows[0]['spread']['scv']:.1f} | {xs} | {rs} "
                  f"| {waits} | {caps} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
