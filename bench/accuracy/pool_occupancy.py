"""A pool's measured occupancy against the model's pool utilization.

    python -m bench.accuracy.pool_occupancy                       # pools 4, 6, 12, 64; 3 seeds
    python -m bench.accuracy.pool_occupancy --pools 6 --populations 150 --seeds 1 --markdown

The network of :mod:`bench.accuracy.pools` (web 4 cores 20 ms, app 4 cores 30 ms, db 8 cores
50 ms, think time 1 s, a pool of ``K`` connections on app held across app and db: ``K = 4, 6``
the pool binds, ``12`` both are near, ``64`` the CPU binds). Per pool, population and seed:

* **true demands**: the simulated system's mean tokens held over ``K``
  (:func:`solvers.simulation.physical.simulate_physical`, ``pool_busy``; 3 replications of
  ``--duration`` s after a tenth as warm-up) against :func:`solvers.pools.solve_pools`'s
  ``pool_utilization`` on the true demands;
* **pipeline**: the simulated system's windows (:func:`solvers.simulation.physical.
  monitor_physical`, 5-s windows carrying the pool's ``busy``/``waiting``/``size`` on app)
  through the embedded pipeline with the pool configured: every solve's
  ``pools.<p>.utilization`` (the model on the estimated demands) against its
  ``utilization_measured`` (the windows' mean over the solve interval) -- the mean and the
  worst absolute difference over the solves after the first ``--skip``, and the solves whose
  difference is within 5 points.

The target (the pool issue's acceptance): within 5 points. Figures, no pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
from typing import Iterator

from bench.accuracy.pools import CORES, DEMANDS, THINK, network
from solvers.pools import PoolSpec, solve_pools
from solvers.simulation.physical import monitor_physical, simulate_physical

POOL = "db_connections"


def pipeline_errors(n: int, size: int, duration: float, seed: int, skip: int) -> list[float]:
    """Per solve after the first ``skip``: ``utilization - utilization_measured`` of the pool."""
    from streams.core.config import Config, Pool, SystemConfig
    from streams.engine.pipeline import Pipeline
    records = monitor_physical(network(n, size), duration, 5.0, warmup=duration / 10,
                               seed=seed, start_time=1e9)
    cfg = SystemConfig(tiers=("web", "app", "db"), think_time_s=THINK, sla_s={"*": 1.0},
                       pools={POOL: Pool("app", size, ("app", "db"))})
    pipe = Pipeline(Config(defaults=cfg))
    outs = [pipe.process(r) for r in records] + [pipe.finish()]
    out = []
    for o in outs:
        for p in o.predictions:
            part = (p.pools or {}).get(POOL) if p.model is not None else None
            if part is not None and isinstance(part.utilization_measured, float) \
                    and part.utilization is not None:
                out.append(part.utilization - part.utilization_measured)
    return out[skip:]


def rows(pools: list[int], populations: list[int], seeds: list[int], duration: float,
         skip: int) -> Iterator[dict]:
    for size in pools:
        for n in populations:
            model = float(solve_pools(DEMANDS, n, THINK, CORES,
                                      [PoolSpec(size, 1, 3)]).pool_utilization[0])
            for seed in seeds:
                sim = simulate_physical(network(n, size), duration, warmup=duration / 10,
                                        replications=3, seed=seed)
                busy = sim.pool_busy[0]
                errs = pipeline_errors(n, size, duration, seed, skip)
                yield {"K": size, "N": n, "seed": seed, "sim_u": busy.mean / size,
                       "sim_hw": busy.half_width / size, "model_u": model,
                       "true_err": model - busy.mean / size,
                       "solves": len(errs),
                       "pipe_mean": sum(abs(e) for e in errs) / len(errs) if errs else None,
                       "pipe_worst": max(errs, key=abs) if errs else None,
                       "within": sum(abs(e) <= 0.05 for e in errs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", default="4,6,12,64")
    parser.add_argument("--populations", default="60,150,300")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--skip", type=int, default=2,
                        help="pipeline solves left out at the start (the estimators settling)")
    parser.add_argument("--markdown", action="store_true",
                        help="one line per pool: the worst over populations and seeds")
    args = parser.parse_args(argv)
    made = []
    print(f"{'K':>3} {'N':>4} {'seed':>4} {'U sim':>14} {'U model':>7} {'err':>6} "
          f"{'solves':>6} {'pipe mean':>9} {'pipe worst':>10} {'<=5pt':>5}")
    for r in rows([int(k) for k in args.pools.split(",")],
                  [int(n) for n in args.populations.split(",")],
                  [int(s) for s in args.seeds.split(",")], args.duration, args.skip):
        made.append(r)
        pipe = ("-" if r["pipe_mean"] is None
                else f"{100 * r['pipe_mean']:>8.1f}p {100 * r['pipe_worst']:>+9.1f}p")
        print(f"{r['K']:>3} {r['N']:>4} {r['seed']:>4} {r['sim_u']:>6.3f} ±{r['sim_hw']:<5.3f} "
              f"{r['model_u']:>7.3f} {100 * r['true_err']:>+5.1f}p {r['solves']:>6} {pipe} "
              f"{r['within']:>5}", flush=True)
    if args.markdown:
        print("\n| pool K | populations | U simulated (range) | worst error, true demands "
              "| pipeline: mean / worst error | solves within 5 points |")
        print("|---:|---|---|---:|---:|---:|")
        for k in dict.fromkeys(r["K"] for r in made):
            sel = [r for r in made if r["K"] == k]
            worst_true = max((r["true_err"] for r in sel), key=abs)
            piped = [r for r in sel if r["pipe_mean"] is not None]
            solves = sum(r["solves"] for r in piped)
            mean = sum(r["pipe_mean"] * r["solves"] for r in piped) / max(solves, 1)
            worst = max((r["pipe_worst"] for r in piped), key=abs, default=0.0)
            within = sum(r["within"] for r in piped)
            pops = "/".join(str(n) for n in dict.fromkeys(r["N"] for r in sel))
            print(f"| {k} | {pops} | {min(r['sim_u'] for r in sel):.2f}–"
                  f"{max(r['sim_u'] for r in sel):.2f} | {100 * worst_true:+.1f} pt | "
                  f"{100 * mean:.1f} / {100 * worst:+.1f} pt | {within}/{solves} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
