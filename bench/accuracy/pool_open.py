"""The open pool model against the simulated system with an open source and a pool, several
seeds; the open model without its pool beside it.

    python -m bench.accuracy.pool_open                       # every case, seeds 1-3
    python -m bench.accuracy.pool_open --cases pool-2 --seeds 1 --no-capacity
    python -m bench.accuracy.pool_open --quantiles --seeds 11,12,13   # p95/p99
    python -m bench.accuracy.pool_open --nested --seeds 11,12,13      # a pool inside a pool

Three-tier open systems (web, app, db; one class, Poisson arrivals) with a pool on app held
across app and db (:data:`CASES`, chosen before any run of the model on them): pool sizes
2-32, the pool binding, the CPU binding or both near (the class printed: the held tiers'
throughput with every token held over the CPUs' bound, as :mod:`bench.accuracy.pool_matrix`
classes its cases), one with a bursty database (the MAP(2) of :mod:`solvers.paper000`, index of
dispersion ~200) behind the pool, one with a 20-ms pure delay at app (simulated as a tier of
``K`` cores after app, exponential of the delay's mean: at most ``K`` requests are inside the
pool, so none queues there -- :mod:`bench.accuracy.pool_delays`' device). The model is the
pipeline's (:func:`streams.predict.open_model.solve_at` on a
:class:`~streams.predict.model.SystemModel` with the pool: :mod:`solvers.pools_open`, the held
chain where it applies, else the flow-equivalent server), beside it the flow-equivalent server
alone (``FES``) and the model without the pool (``pools = ()``: the open route blind to the pool).

Per case, at the fractions :data:`FRACTIONS` of the pool model's saturation rate, per seed
(:func:`solvers.simulation.physical.simulate_physical`, 3 replications of the case's duration
after a tenth of it): the throughput (open: ``X = lambda``, so its error is the simulation's),
the mean response time ``R`` and the pool's utilization (tokens held over size) simulated, and
the errors of both models (R relative, utilization in points). Per case and seed, the capacity
at ``R <= SLO_FACTOR x`` the sum of the demands and delays (a rule fixed before any run)
simulated (:func:`solvers.simulation.capacity.simulated_capacity` on a grid of a thousandth of
the saturation rate, bisection to 1%) against both models'
(:func:`streams.predict.open_model.rate_capacity`). Errors are against each seed's mean; the
tables give the mean over the seeds with the 95% interval of that mean and the worst over
seeds and rates. Figures, no pass/fail (targets: R 10%, utilization 3 points, capacity 10%).

``--quantiles``: instead, the response time's p95 and p99 per case and load, simulated (each
seed's estimate from its replications' empirical quantiles; the mean over seeds with the 95%
interval of that mean) against the pipeline's model
(:meth:`streams.predict.model.SystemModel.quantiles` at the open point: the pool's passage
law, :mod:`solvers.pools_passage`, convolved with the web tier's) and against today's law
before it (``before``: the same call without the passage law, the exponential law scaled to
the pool model's mean). Targets: p95 within 15%, p99 within 20%.

``--nested``: instead, an inner pool inside the outer one (:data:`NESTED`: app's thread pool
held across app and db around a db connection pool held at db), the outer pool's flow-
equivalent server with the inner one's figures weighted along it
(:func:`solvers.pools_open.with_pools`): R, each pool's utilization (points) and queue
(requests waiting for a token, relative) against the simulation (the simulator takes nested
pools outer first), per seed, at :data:`FRACTIONS` of the model's saturation.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import dataclasses
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from bench.accuracy import pool_matrix
from bench.accuracy.pool_matrix import BURSTY, ONE, SMALL, interval, worst
from solvers.pools import PoolSpec
from solvers.processes import MAP
from solvers.simulation.capacity import simulated_capacity
from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, simulate_physical
from streams.predict import open_model, pool_law
from streams.predict.model import SystemModel

#: loads as fractions of the pool model's saturation rate
FRACTIONS = (0.2, 0.5, 0.8, 0.9, 0.95)
#: the capacity's SLO: this many times the request's bare demand (CPU and delays)
SLO_FACTOR = 3.0
#: the rate grid of the simulated capacity search, in saturation rates
GRID = 1000


@dataclass(frozen=True)
class Case(pool_matrix.Case):
    """:class:`bench.accuracy.pool_matrix.Case` (no populations: the rates are
    :data:`FRACTIONS` of the saturation) with a pure ``delay`` at app, seconds (held)."""

    delay: float = 0.0


CASES = (
    Case("pool-2", *ONE, 2, (), 1000.0),
    Case("pool-4", *SMALL, 4, (), 1000.0),
    Case("both-12", *SMALL, 12, (), 1000.0),
    Case("cpu-32", *SMALL, 32, (), 1000.0),
    Case("one-8", *ONE, 8, (), 1000.0),
    Case("bursty-6", *SMALL, 6, (), 4000.0, bursty=True),
    Case("delay-8", *SMALL, 8, (), 1000.0, delay=0.020),
)


def model(case: Case, pooled: bool = True) -> SystemModel:
    """The pipeline's open model of ``case`` (``pooled``: with the pool)."""
    D = np.array(case.demands)[:, None]
    procs = [MAP.exponential(case.demands[0]), MAP.exponential(case.demands[1]),
             BURSTY.scaled(case.demands[2])] if case.bursty else None
    delays = np.array([[0.0], [case.delay], [0.0]]) if case.delay > 0 else None
    return SystemModel(tiers=["web", "app", "db"], classes=["a"], D_mc=D, mix=np.array([1.0]),
                       servers=np.array(case.cores, dtype=float), think_time=0.0,
                       sla=np.array([slo(case)]), processes=procs, map_limit=10_000,
                       pools=(PoolSpec(case.size, 1, 3, "conn"),) if pooled else (),
                       pool_processes=procs if pooled else None, delays=delays)


def slo(case: Case) -> float:
    return SLO_FACTOR * (sum(case.demands) + case.delay)


def network(case: Case, rate: float) -> PhysicalNetwork:
    service = [case.demands[0], case.demands[1],
               BURSTY.scaled(case.demands[2]) if case.bursty else case.demands[2]]
    tiers = [Tier("web", case.cores[0], service[0]), Tier("app", case.cores[1], service[1])]
    if case.delay > 0:
        tiers.append(Tier("app_delay", case.size, case.delay))
    tiers.append(Tier("db", case.cores[2], service[2]))
    return PhysicalNetwork(tiers=tuple(tiers), classes=("a",), mix=(1.0,), think_time=0.0,
                           population=0, arrivals=OpenArrivals(rate),
                           pools=(PoolSpec(case.size, 1, len(tiers), "conn"),))


def flow_equivalent(m: SystemModel) -> list:
    """The model's held curves without the held chain: the flow-equivalent server alone."""
    return [None if c is None else dataclasses.replace(c, chain=None)
            for c in open_model.pool_curves(m)]


def binding(case: Case) -> str:
    """``pool``, ``CPU`` or ``both`` (:func:`bench.accuracy.pool_matrix.binding`'s rule on the
    model's held curve: below 0.85 of the CPUs' bound the pool binds, from 0.99 the CPU)."""
    held = open_model.pool_curves(model(case))[0].saturation
    cpu = min(c / d for c, d in zip(case.cores, case.demands))
    ratio = held / cpu
    return "pool" if ratio < 0.85 else "CPU" if ratio >= 0.99 else "both"


def points(case: Case, seeds: list[int]) -> list[dict]:
    pooled, bare = model(case), model(case, pooled=False)
    sat = open_model.saturation_rate(pooled)
    rows = []
    for f in FRACTIONS:
        rate = f * sat
        p_point, _ = open_model.open_point(pooled, rate)
        fes = open_model.solve_at(pooled, rate, flow_equivalent(pooled))
        b_res = open_model.solve_at(bare, rate)
        sims = [simulate_physical(network(case, rate), case.duration,
                                  warmup=case.duration / 10, seed=s) for s in seeds]
        X = [s.total_throughput.mean for s in sims]
        R = [s.total_response_time.mean for s in sims]
        U = [s.pool_busy[0].mean / case.size for s in sims]
        rows.append({
            "fraction": f, "rate": rate, "R_sim": R, "U_sim": U,
            "X_err": [x / rate - 1 for x in X],
            "R_err": [float(p_point.response[0]) / r - 1 for r in R],
            "R_err_bare": [float(b_res.response_time[0]) / r - 1 for r in R],
            "R_err_fes": [float(fes.response_time[0]) / r - 1 for r in R],
            "U_err": [float(p_point.pool_utilization[0]) - u for u in U],
            "R_model": float(p_point.response[0]), "R_bare": float(b_res.response_time[0]),
            "U_model": float(p_point.pool_utilization[0])})
    return rows


def capacities(case: Case, seeds: list[int]) -> dict:
    pooled, bare = model(case), model(case, pooled=False)
    sat = open_model.saturation_rate(pooled)
    cap = open_model.rate_capacity(pooled).capacity
    cap_bare = open_model.rate_capacity(bare).capacity
    unit = sat / GRID
    sims = [simulated_capacity(lambda n: network(case, n * unit), [slo(case)],
                               start=max(1, int(cap / unit * 0.9)), duration=case.duration,
                               warmup=case.duration / 10, seed=1000 * s, limit=GRID - 1
                               ).value * unit for s in seeds]
    return {"sim": sims, "model": cap, "bare": cap_bare,
            "err": [cap / s - 1 for s in sims], "err_bare": [cap_bare / s - 1 for s in sims]}


#: ``--nested``'s cases: (name, demands, cores, outer size over app+db, inner size over db)
NESTED = (("one-8/2", ONE[0], ONE[1], 8, 2), ("small-12/4", SMALL[0], SMALL[1], 12, 4),
          ("small-6/3", SMALL[0], SMALL[1], 6, 3))


def nested_table(seeds: list[int], duration: float = 1000.0) -> None:
    print("| case | load | R sim s | R err | U outer sim / err (pt) | U inner sim / err (pt) "
          "| queue inner sim / err |")
    print("|---|---:|---|---|---|---|---|")
    for name, D, cores, outer, inner in NESTED:
        pools = (PoolSpec(outer, 1, 3, "threads"), PoolSpec(inner, 2, 3, "conn"))
        m = SystemModel(tiers=["web", "app", "db"], classes=["a"], D_mc=np.array(D)[:, None],
                        mix=np.array([1.0]), servers=np.array(cores, dtype=float),
                        think_time=0.0, sla=np.array([1.0]), processes=None, map_limit=10_000,
                        pools=pools)
        sat = open_model.saturation_rate(m)
        for f in FRACTIONS:
            rate = f * sat
            point, _ = open_model.open_point(m, rate)
            net = PhysicalNetwork(tiers=tuple(Tier(t, c, d) for t, c, d in
                                              zip(("web", "app", "db"), cores, D)),
                                  classes=("a",), mix=(1.0,), think_time=0.0, population=0,
                                  arrivals=OpenArrivals(rate), pools=pools)
            sims = [simulate_physical(net, duration, warmup=duration / 10, seed=s)
                    for s in seeds]
            R = [s.total_response_time.mean for s in sims]
            U = [[s.pool_busy[k].mean / pools[k].size for s in sims] for k in range(2)]
            Q = [s.pool_waiting[1].mean for s in sims]
            q_model = float(point.pool_waiting[1]) * rate
            r_err = worst([float(point.response[0]) / r - 1 for r in R])
            cells = [f"{np.mean(R):.4g} | {r_err:+.1%}"]
            for k in range(2):
                u_err = worst([float(point.pool_utilization[k]) - u for u in U[k]])
                cells.append(f"{np.mean(U[k]):.3f} / {100 * u_err:+.1f}")
            cells.append(f"{np.mean(Q):.3g} / " + (
                f"{worst([q_model / q - 1 for q in Q]):+.0%}" if min(Q) > 0.01 else
                f"{q_model:.3g} (abs)"))
            print(f"| {name} | {f:.0%} | " + " | ".join(cells) + " |", flush=True)


#: the quantile levels ``--quantiles`` judges
LEVELS = (0.95, 0.99)


def open_quantiles(m: SystemModel, rate: float, passage: bool = True) -> np.ndarray:
    """``(C, 2)`` p95, p99 of the pipeline's open model ``m`` at ``rate`` (``passage``: the
    pools' passage laws; else today's law before them, the same call without them)."""
    point, _ = open_model.open_point(m, rate)
    if passage:
        q = m.quantiles(point)
    else:
        from unittest import mock
        with mock.patch.object(pool_law, "pool_quantiles", return_value=None):
            q = m.quantiles(point)
    levels = list(m.quantile_levels)
    return q[:, [levels.index(x) for x in LEVELS]]


def model_quantiles(case: Case, rate: float, passage: bool = True) -> np.ndarray:
    """``(2,)`` p95, p99 of the pipeline's model of ``case`` at ``rate``."""
    return open_quantiles(model(case), rate, passage)[0]


def quantile_table(cases: list[Case], seeds: list[int]) -> None:
    print("| case | load | p95 sim s (±95%) | model | before | p99 sim s (±95%) | model | "
          "before |")
    print("|---|---:|---|---|---|---|---|---|")
    worst = {}
    for case in cases:
        sat = open_model.saturation_rate(model(case))
        w = worst.setdefault(case.name, [0.0, 0.0, 0.0, 0.0])
        for f in FRACTIONS:
            rate = f * sat
            sims = [simulate_physical(network(case, rate), case.duration,
                                      warmup=case.duration / 10, seed=s, quantiles=LEVELS)
                    for s in seeds]
            after, before = model_quantiles(case, rate), model_quantiles(case, rate, False)
            cells = []
            for k in range(len(LEVELS)):
                m, hw = interval([s.response_time_quantiles[0][k].mean for s in sims])
                ea, eb = after[k] / m - 1, before[k] / m - 1
                w[2 * k], w[2 * k + 1] = max(w[2 * k], abs(ea)), max(w[2 * k + 1], abs(eb))
                cells.append(f"{m:.4g} ± {hw:.2g} | {ea:+.1%} | {eb:+.1%}")
            print(f"| {case.name} | {f:.0%} | " + " | ".join(cells) + " |", flush=True)
    print("\n| case | worst abs p95 err model / before | worst abs p99 err model / before |")
    print("|---|---|---|")
    for name, w in worst.items():
        print(f"| {name} | {w[0]:.1%} / {w[1]:.1%} | {w[2]:.1%} / {w[3]:.1%} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(c.name for c in CASES))
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--no-capacity", action="store_true")
    ap.add_argument("--nested", action="store_true",
                    help="an inner pool inside the outer one against the simulation")
    ap.add_argument("--quantiles", action="store_true",
                    help="p95/p99: the pool's passage law and today's against the simulation")
    args = ap.parse_args(argv)
    names = args.cases.split(",")
    unknown = [n for n in names if n not in {c.name for c in CASES}]
    if unknown:
        ap.error(f"--cases: no case {unknown}")
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.nested:
        nested_table(seeds)
        return 0
    if args.quantiles:
        quantile_table([c for c in CASES if c.name in names], seeds)
        return 0
    pct = lambda v: f"{100 * v:+.1f}%" if math.isfinite(v) else "inf"   # noqa: E731
    summary = []
    for case in (c for c in CASES if c.name in names):
        t0 = time.perf_counter()
        print(f"\n## {case.name}: D {case.demands} s, cores {case.cores}, pool {case.size}"
              f"{', bursty db' if case.bursty else ''}"
              f"{f', delay {case.delay * 1e3:g} ms at app' if case.delay else ''}; "
              f"binds: {binding(case)}; saturation "
              f"{open_model.saturation_rate(model(case)):.4g}/s (without the pool "
              f"{open_model.saturation_rate(model(case, False)):.4g}/s)")
        print(f"route: {'held chain' if open_model.pool_curves(model(case))[0].chain else 'FES'}")
        print("| load | rate/s | R sim (s) | X err | R err | R err FES | R err no pool | U sim "
              "| U err (pts) |")
        print("|---|---|---|---|---|---|---|---|---|")
        rows = points(case, seeds)
        for r in rows:
            Rm, Rh = interval(r["R_sim"])
            e, eh = interval(r["R_err"])
            b, _ = interval(r["R_err_bare"])
            fe, _ = interval(r["R_err_fes"])
            u, _ = interval(r["U_sim"])
            ue, ueh = interval(r["U_err"])
            x, _ = interval(r["X_err"])
            print(f"| {r['fraction']:.0%} | {r['rate']:.4g} | {Rm:.4g} ± {Rh:.2g} | {pct(x)} | "
                  f"{pct(e)} ± {100 * eh:.1f} | {pct(fe)} | {pct(b)} | {u:.3f} | "
                  f"{100 * ue:+.1f} ± {100 * ueh:.1f} |")
        line = {"case": case.name, "R": worst([v for r in rows for v in r["R_err"]]),
                "R_bare": worst([v for r in rows for v in r["R_err_bare"]]),
                "R_fes": worst([v for r in rows for v in r["R_err_fes"]]),
                "U": worst([v for r in rows for v in r["U_err"]]),
                "X": worst([v for r in rows for v in r["X_err"]])}
        if not args.no_capacity:
            cap = capacities(case, seeds)
            c, ch = interval(cap["err"])
            cb, _ = interval(cap["err_bare"])
            print(f"capacity at R <= {slo(case):.3g} s: simulated "
                  f"{np.mean(cap['sim']):.4g}/s (seeds {[round(s, 1) for s in cap['sim']]}), "
                  f"pool model {cap['model']:.4g}/s ({pct(c)} ± {100 * ch:.1f}), without the "
                  f"pool {cap['bare']:.4g}/s ({pct(cb)})")
            line.update(cap=worst(cap["err"]), cap_bare=worst(cap["err_bare"]))
        print(f"({time.perf_counter() - t0:.0f} s)")
        summary.append(line)
    print("\n| case | worst X err | worst R err | FES | no pool | worst U err (pts) "
          "| capacity err | capacity err no pool |")
    print("|---|---|---|---|---|---|---|---|")
    for s in summary:
        print(f"| {s['case']} | {pct(s['X'])} | {pct(s['R'])} | {pct(s['R_fes'])} | "
              f"{pct(s['R_bare'])} | "
              f"{100 * s['U']:+.1f} | {pct(s.get('cap', math.nan))} | "
              f"{pct(s.get('cap_bare', math.nan))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
