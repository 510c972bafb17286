"""A bursty tier with many cores (8-64): the per-job station against the speed-scaled one and
the simulated physical system.

    python -m bench.accuracy.many_cores                       # cores 8, 16, 32, 64
    python -m bench.accuracy.many_cores --cores 64 --knees 0.9 --markdown

Network: web 4 cores exponential 4 ms, app 8 cores exponential 16 ms, db ``c`` cores whose
service-time sequence is Mi et al.'s (2008) MAP(2) (I ~ 200) scaled to ``c / 250`` s a request (250
requests/s over its cores, whatever ``c``), think time 1 s; one class. Each ``c`` at 0.5 / 0.9
/ 1.1 / 1.5 times its knee ``N* = X_max (Z + sum S_m)``. Per point:

* the simulated physical system (:func:`solvers.simulation.physical.simulate_physical`, 3
  independent replications of ``--duration`` s after a tenth of that as warm-up; 95% half
  widths);
* :func:`solvers.decomposition.solve_decomposed` with ``per_job_max_cores=64`` (the per-job
  station on every bursty tier of 2-64 cores, within ``PER_JOB_MAX_BYTES``; past
  ``PHASE_COUNT_BINS`` busy cores the count of jobs per phase on a grid), the same with every
  count resolved (``full chain``: what the grid changes; the module constant set for that
  column's solves), and with
  ``per_job_max_cores=1`` (every bursty tier as one MAP at speed ``min(n, c)``, the
  speed-scaled station, which the default -- 16, as the pipeline runs it -- gives tiers of more
  than 16 cores), their errors against the simulation and solve times.

Figures, no pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
import time

import solvers.decomposition as decomposition
from solvers.decomposition import stations
from solvers.bounds import knee
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

BURSTY = MAP(BURSTY_D0, BURSTY_D1)
THINK = 1.0


def network(cores: int) -> tuple[list[MAP], list[int]]:
    return ([MAP.exponential(0.004), MAP.exponential(0.016), BURSTY.scaled(cores / 250.0)],
            [4, 8, cores])


STATIONS = ("per-job", "full chain", "speed-scaled")


def solved(procs: list[MAP], cores: list[int], n: int, station: str
           ) -> tuple[float, float, float, tuple[str, ...]]:
    """(throughput, response time, seconds, flags) with every bursty tier on ``station``:
    ``per-job`` (up to 64 cores, the phase counts on a grid past
    ``decomposition.PHASE_COUNT_BINS`` busy cores), ``full chain`` (the same with every phase
    count: the grid's own effect) or ``speed-scaled`` (one MAP at speed min(n, c))."""
    bins = decomposition.PHASE_COUNT_BINS
    if station == "full chain":
        stations.PHASE_COUNT_BINS = max(cores)
    try:
        t0 = time.perf_counter()
        res = decomposition.solve_decomposed(
            procs, n, THINK, servers=cores,
            per_job_max_cores=1 if station == "speed-scaled" else 64)
        return res.throughput, res.response_time, time.perf_counter() - t0, res.flags
    finally:
        stations.PHASE_COUNT_BINS = bins


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cores", default="8,16,32,64", help="db cores, comma-separated")
    ap.add_argument("--knees", default="0.5,0.9,1.1,1.5", help="populations in knees")
    ap.add_argument("--duration", type=float, default=4000.0, help="simulated s a replication")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--markdown", action="store_true", help="a markdown table")
    args = ap.parse_args()
    print(f"command: python -m {__spec__.name} {' '.join(sys.argv[1:])}")
    print(f"per-job station up to 64 cores (default {decomposition.PER_JOB_MAX_CORES}), phase "
          f"counts on a grid past {decomposition.PHASE_COUNT_BINS} busy cores, band "
          f"budget {decomposition.PER_JOB_MAX_BYTES / 2**20:g} MiB; simulation 3 x "
          f"{args.duration:g} s, seed {args.seed}")
    head = ("| db cores | knees | N | simulated X | simulated R (s) | per-job X / R error | "
            "per-job s | full chain X / R error | full chain s | speed-scaled X / R error | "
            "speed-scaled s |")
    print(head if args.markdown else head.replace("|", " "))
    if args.markdown:
        print("|" + "---|" * 11)
    worst = {name: [0.0, 0.0] for name in STATIONS}
    for c in (int(x) for x in args.cores.split(",")):
        procs, cores = network(c)
        k = knee([p.mean for p in procs], THINK, cores)
        for f in (float(x) for x in args.knees.split(",")):
            n = int(round(f * k))
            tiers = tuple(Tier(f"t{m}", cc, p if p.order > 1 else p.mean)
                          for m, (p, cc) in enumerate(zip(procs, cores)))
            sim = simulate_physical(PhysicalNetwork(tiers, ("a",), (1.0,), THINK, n),
                                    args.duration, warmup=args.duration / 10, replications=3,
                                    seed=args.seed)
            X, R = sim.total_throughput, sim.total_response_time
            cells = [f"{c}", f"{f:g}", f"{n}", f"{X.mean:.1f} +- {X.half_width:.1f}",
                     f"{R.mean:.3f} +- {R.half_width:.3f}"]
            for name in STATIONS:
                if name == "full chain" and c <= decomposition.PHASE_COUNT_BINS:
                    cells += ["(as per-job)", "-"]
                    continue
                x, r, secs, flags = solved(procs, cores, n, name)
                ex, er = x / X.mean - 1.0, r / R.mean - 1.0
                worst[name] = [max(worst[name][0], abs(ex)), max(worst[name][1], abs(er))]
                note = " (flagged)" if flags and name != "speed-scaled" else ""
                cells += [f"{100 * ex:+.1f}% / {100 * er:+.1f}%{note}", f"{secs:.3f}"]
            line = " | ".join(cells)
            print(f"| {line} |" if args.markdown else line.replace(" | ", "  "), flush=True)
    for name, (ex, er) in worst.items():
        print(f"{name}: max |X error| {100 * ex:.1f}%, max |R error| {100 * er:.1f}%")


if __name__ == "__main__":
    main()
