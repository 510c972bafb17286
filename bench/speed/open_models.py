"""Speed of an open solve against the closed decomposition of the same network, same run.

    python -m bench.speed.open_models                   # 50%, 70%, 90% of saturation
    python -m bench.speed.open_models --loads 0.7 --repeat 5 --closed-repeat 3
    python -m bench.speed.open_models --loads 0.5,0.7 --populations 294,443 --fed

Five tiers: lb 1 core exponential 0.5 ms, web 4 cores exponential 6 ms, app 16 cores bursty
(Mi et al.'s (2008) MAP(2), I ~ 200, 24 ms), cache 2 cores exponential 1 ms, db 16 cores bursty
(a MAP(2) fitted to mean 30 ms, I 50, p95 90 ms); think time 1 s for the closed network.
For each load (a fraction of the saturation rate, 16 / 0.030 = 533/s at the db) the closed
population whose decomposition gives that throughput is found first (Little's law from the
open model, then two or three closed solves: not timed); then, timed in the same run, median of ``--repeat``:

* ``open cold`` -- :func:`solvers.open.solve_open_tiers` at the rate, the per-job patterns
  of the two bursty tiers built first (the module's memo emptied);
* ``open warm`` -- the same with the patterns held (every later solve of a pipeline at
  another rate); each open solve with the chains solved by rate forgotten first (a lookup
  is not a solve);
* ``closed`` -- :func:`solvers.decomposition.solve_decomposed` at that ``N`` (a fresh
  ``SolveMemo``, as a pipeline's first solve of a model);
* with ``--fed``, ``fed`` -- the pipeline's fed open model at the rate
  (:func:`solvers.open.fixed_population.solve_open_waves` with ``coupled=TWO_CORE``, as
  :func:`streams.predict.open_model.solve_at` with ``fed=True`` solves it: the cache and the
  database fed the app's departure process), warm as above, and the closed solve's CPU time
  over its CPU time; then its parts, each timed alone (CPU, median of ``--repeat``): the
  Poisson-fed tiers with the app's coupled wait, the app's departure process, the cache's
  queue fed it, the database's wait added by it after the cache (:func:`fed_parts`).

BLAS runs on one thread, as in the pipeline (importing the ``bench`` package pins it, before
numpy loads; set ``OPENBLAS_NUM_THREADS`` to override). Unpinned, OpenBLAS's threads contend
with each other and with the host's other work on small matrices, and their spinning counts as
this process's CPU time (the closed solve of 294 users about 30x its pinned CPU time on a
loaded 2-core host).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from estimators.mapfit import fit_map2
from solvers.decomposition import solve_decomposed
from solvers.open import queues, solve_open_tiers
from solvers.open import fixed_population as fp
from solvers.open.fixed_population import solve_open_waves
from solvers.open.queues import TWO_CORE
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP

CORES = [1, 4, 16, 2, 16]
THINK = 1.0


def processes() -> list[MAP]:
    bursty = MAP(BURSTY_D0, BURSTY_D1)
    fitted = fit_map2(mean=0.030, idc=50, p95=0.090).process
    return [MAP.exponential(0.0005), MAP.exponential(0.006), bursty.scaled(0.024),
            MAP.exponential(0.001), fitted.scaled(0.030)]


def open_solve(rate: float, procs: list[MAP]):
    means = np.array([[p.mean] for p in procs])
    return solve_open_tiers([rate], means, CORES, processes=procs)


def fed_solve(rate: float, procs: list[MAP]):
    """The pipeline's fed open model at ``rate`` (module docstring)."""
    means = np.array([[p.mean] for p in procs])
    return solve_open_waves([rate], means, CORES, processes=procs, coupled=TWO_CORE)


def fed_parts(rate: float, procs: list[MAP], repeat: int) -> dict[str, float]:
    """CPU seconds (median of ``repeat``) of the fed solve's parts at ``rate`` (module
    docstring), as :func:`solvers.open.fixed_population.solve_open_waves` calls them."""
    means = np.array([[p.mean] for p in procs])
    app, cache, db = procs[2], procs[3].mean, procs[4].mean
    dep = fp.departure_process(app, CORES[2], rate)
    after = fp.through_tier(dep, CORES[3] / cache)
    cpu: list[float] = []
    for fn in (lambda: solve_open_tiers([rate], means, CORES, processes=procs,
                                        coupled=TWO_CORE),
               lambda: fp.departure_process(app, CORES[2], rate),
               lambda: fp.wave_jobs(dep, cache, CORES[3], tol=fp.G_TOLERANCE),
               lambda: fp._arrival_wait(after, db, CORES[4], rate)):
        timed(fn, repeat, forget_chains if not cpu else None, cpu)
    return dict(zip(("Poisson-fed, coupled", "departures", "cache queue", "db's added wait"),
                    cpu)) | {"phases": dep.D0.shape[0]}


def closed_solve(n: int, procs: list[MAP]):
    return solve_decomposed(procs, n, THINK, servers=CORES)


def population_for(rate: float, procs: list[MAP], steps: int = 3) -> int:
    """The ``N`` whose closed throughput is ``rate``: from the open model's
    ``N = lambda (Z + R(lambda))`` (Little), corrected ``steps`` times by ``N <- N lambda / X``
    (a closed solve each; a closed network below saturation carries nearly ``N / (Z + R)``)."""
    n = max(1, round(rate * (THINK + open_solve(rate, procs).total_response_time)))
    for _ in range(steps):
        x = closed_solve(n, procs).throughput
        if abs(x - rate) <= 1e-3 * rate:
            break
        n = max(1, round(n * rate / x))
    return n


def timed(fn, repeat: int, before=None, cpu: list | None = None) -> float:
    """Median wall time of ``fn`` over ``repeat`` calls (``before`` run untimed ahead of
    each); with ``cpu``, the median CPU time of the process appended to it (on a shared host
    the wall time includes the waits for a core)."""
    out, used = [], []
    for _ in range(repeat):
        if before is not None:
            before()
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        out.append(time.perf_counter() - t0)
        used.append(time.process_time() - c0)
    if cpu is not None:
        cpu.append(statistics.median(used))
    return statistics.median(out)


def forget_chains() -> None:
    """The open queues' chains held by rate forgotten (the patterns kept)."""
    queues._CHAINS.clear()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loads", default="0.5,0.7,0.9")
    ap.add_argument("--repeat", type=int, default=3, help="timings of the open solves")
    ap.add_argument("--closed-repeat", type=int, default=1)
    ap.add_argument("--populations", default=None,
                    help="the closed populations, one per load (skips their search: 294,443 "
                         "at loads 0.5,0.7)")
    ap.add_argument("--fed", action="store_true",
                    help="also time the fed open model (the pipeline's, module docstring)")
    args = ap.parse_args(argv)
    procs = processes()
    sat = min(c / p.mean for c, p in zip(CORES, procs))
    print(f"host load average: {os.getloadavg()[0]:.1f} (the ratios are the figure)")
    fed_head = " fed warm (ms; CPU) | closed / fed, CPU | R fed / R closed |" if args.fed else ""
    print("| load | rate /s | N (closed X / rate) | open cold (ms) | open warm (ms; CPU) | "
          "closed (ms; CPU) | closed / open cold | closed / open warm, CPU | R open / R closed |"
          + fed_head)
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|---:|---:|" * args.fed)
    given = None if args.populations is None else [int(v) for v in args.populations.split(",")]
    for k, load in enumerate(float(v) for v in args.loads.split(",")):
        rate = load * sat
        n = population_for(rate, procs) if given is None else given[k]
        print(f"load {load}: N = {n}", file=sys.stderr, flush=True)

        def cold() -> None:
            queues._PATTERNS.clear()
            open_solve(rate, procs)
        cpu: list[float] = []
        t_cold = timed(cold, args.repeat, forget_chains)
        t_warm = timed(lambda: open_solve(rate, procs), max(args.repeat, 5), forget_chains,
                       cpu)
        fed_cpu: list[float] = []
        t_fed = timed(lambda: fed_solve(rate, procs), max(args.repeat, 5), forget_chains,
                      fed_cpu) if args.fed else 0.0
        held: list = []
        t_closed = timed(lambda: held.append(closed_solve(n, procs)), args.closed_repeat,
                         cpu=cpu)
        r_open = open_solve(rate, procs).total_response_time
        closed = held[-1]
        r_closed = n / closed.throughput - THINK          # Little's law on the closed answer
        fed_cells = ""
        if args.fed:
            r_fed = float(fed_solve(rate, procs).response_time.sum())
            fed_cells = (f" {1000 * t_fed:.2f}; {1000 * fed_cpu[0]:.2f} | "
                         f"{cpu[1] / fed_cpu[0]:.0f}x | {r_fed / r_closed:.3f} |")
        print(f"| {load:.2f} | {rate:.0f} | {n} ({closed.throughput / rate:.3f}) | "
              f"{1000 * t_cold:.1f} | {1000 * t_warm:.2f}; {1000 * cpu[0]:.2f} | "
              f"{1000 * t_closed:.0f}; {1000 * cpu[1]:.0f} | {t_closed / t_cold:.0f}x | "
              f"{cpu[1] / cpu[0]:.0f}x | {r_open / r_closed:.3f} |" + fed_cells, flush=True)
        if args.fed:
            parts = fed_parts(rate, procs, max(args.repeat, 5))
            floor = parts["Poisson-fed, coupled"] + parts["departures"]
            print(f"  fed parts at {rate:.0f}/s (CPU ms; {parts.pop('phases')} phases): "
                  + ", ".join(f"{k} {1000 * v:.1f}" for k, v in parts.items())
                  + f"; closed / the first two {cpu[1] / floor:.0f}x", flush=True)


if __name__ == "__main__":
    main()
