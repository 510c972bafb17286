"""Speed of an open solve against the closed decomposition of the same network, same run.

    python -m bench.speed.open_models                   # 50%, 70%, 90% of saturation
    python -m bench.speed.open_models --loads 0.7 --repeat 5 --closed-repeat 3

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
  ``SolveMemo``, as a pipeline's first solve of a model).
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
    args = ap.parse_args(argv)
    procs = processes()
    sat = min(c / p.mean for c, p in zip(CORES, procs))
    print(f"host load average: {os.getloadavg()[0]:.1f} (the ratios are the figure)")
    print("| load | rate /s | N (closed X / rate) | open cold (ms) | open warm (ms; CPU) | "
          "closed (ms) | closed / open cold | closed / open warm | R open / R closed |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
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
        held: list = []
        t_closed = timed(lambda: held.append(closed_solve(n, procs)), args.closed_repeat)
        r_open = open_solve(rate, procs).total_response_time
        closed = held[-1]
        r_closed = n / closed.throughput - THINK          # Little's law on the closed answer
        print(f"| {load:.2f} | {rate:.0f} | {n} ({closed.throughput / rate:.3f}) | "
              f"{1000 * t_cold:.1f} | {1000 * t_warm:.2f}; {1000 * cpu[0]:.2f} | "
              f"{1000 * t_closed:.0f} | {t_closed / t_cold:.0f}x | {t_closed / t_warm:.0f}x | "
              f"{r_open / r_closed:.3f} |", flush=True)


if __name__ == "__main__":
    main()
