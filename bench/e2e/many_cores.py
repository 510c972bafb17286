"""End to end on the shop of ``bench/e2e/multicore.py`` with a bursty database of 16-64 cores:
the per-job station for such a tier against one MAP at speed ``min(n, c)``.

    python -m bench.e2e.many_cores --cores 64 --sla 0.4 --grid-only      # truth capacity
    python -m bench.e2e.many_cores --cores 64 --sla 0.4 --capacity 462 --seeds 1-6
    python -m bench.e2e.many_cores --cores 64 --sla 0.4 --capacity 462 --seeds 1-6 --ramp
    python -m bench.e2e.many_cores --cores 8 --sla 0.1 --think-scale 20 --capacity 3386 --seeds 1-6

The system is the multi-core shop, case (b) (web 4 cores exponential 8 ms, app 4 cores exponential 10
ms, classes ``browse`` 80% x0.75 and ``buy`` 20% x2 at the database, think time 1 s) with the
database on ``--cores`` cores and its service-time sequence (Mi et al.'s (2008) MAP(2), I ~ 200)
scaled to ``16 ms x cores / 8``: the same 500 requests/s at saturation whatever the cores, so
the simulation costs what case (b)'s does. Every class's SLA is ``--sla`` (a 64-core database
at 128 ms a request cannot meet case (b)'s 0.1 s). ``--think-scale K`` multiplies the think time
by ``K``: the same request rates from ``K`` times the users (``--cores 8 --think-scale 20``:
case (b) itself with thousands of users). For a database of up to 16 cores only
``per_job_max_cores`` 64 runs (16 gives it the same per-job station).

1. **Truth capacity** -- the largest population whose worst class's simulated mean response
   time stays within the SLA (3 replications per population of a grid around the knee, the
   crossing interpolated linearly).
2. **Steady runs** -- per seed, 60 minutes of 5-s windows at 40% of the truth capacity through
   ``run_embedded``, configured as a new user would (tiers and SLA) with ``per_job_max_cores``
   16 (a database of more cores is one MAP at speed ``min(n, c)``, flagged) and 64 (the
   per-job station, the default); the last capacity
   of each against the truth, the database's calibrated ``I`` and the run's CPU time.
3. **Ramp runs** (``--ramp``) -- ``bench/e2e/multicore.py``'s ramp (20 minutes at 40%, then to
   150% of the truth capacity over 40 minutes) with either station: the measured breach (the
   1-minute mean of the worst class over the SLA) and the first ``predicted_breach``'s lead
   (the acceptance: >= 5 minutes, none earlier than 30).

Figures, no pass/fail.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any, Callable

import numpy as np

from bench.e2e.multicore import (BREACH_WINDOW_S, first_lead, network, print_truth, ramp_run,
                                  run, seed_range, steady_records, truth_capacity)
from solvers.simulation.physical import PhysicalNetwork


def pipeline_run(records: list[dict[str, Any]], sla_s: float, per_job_max_cores: int
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    """The records through the pipeline (:func:`bench.e2e.multicore.run`: the tiers, the SLA
    read on the 1-minute mean as the measured breach, ``per_job_max_cores``): the predictions,
    the alert events and the CPU seconds the pipeline took."""
    t0 = time.process_time()
    preds, events = run(records, BREACH_WINDOW_S, sla_s=sla_s,
                        per_job_max_cores=per_job_max_cores)
    return preds, events, time.process_time() - t0


def stations(cores: int) -> tuple[int, ...]:
    """The ``per_job_max_cores`` to compare: 16 and 64, or only 64 for a database of up to 16
    cores (both give it the per-job station)."""
    return (16, 64) if cores > 16 else (64,)


def steady_run(shop: Callable[[int], PhysicalNetwork], sla_s: float, population: int,
               seed: int, duration: float, per_job_max_cores: int
               ) -> tuple[dict[str, Any], float]:
    """The pipeline's last prediction on ``duration`` s of ``shop(population)``, and the CPU
    seconds the pipeline took."""
    preds, _, cpu = pipeline_run(steady_records(population, seed, duration, shop), sla_s,
                                 per_job_max_cores)
    return preds[-1], cpu


def steady_seeds(cores: int, sla_s: float, cap: float, seeds: list[int],
                 duration: float, think_scale: float = 1.0) -> None:
    """The steady run per seed with either station: the last capacity against the truth
    ``cap`` and its band, the database's ``I`` and the pipeline's CPU time; how many within
    10%."""
    low = max(1, int(round(0.4 * cap)))
    print(f"## Steady runs at 40% of capacity ({low} users, {duration / 60:.0f} min), "
          f"db {cores} cores, think time x{think_scale:g}, SLA {sla_s} s, truth {cap:.0f} "
          f"users\n")
    print("| seed | `per_job_max_cores` | last capacity | error | band (truth inside) | db `I`: "
          "windows / calibrated | db station flagged | pipeline CPU s |\n"
          "|---|---|---|---|---|---|---|---|")
    errors: dict[int, list[float]] = {}
    for seed in seeds:
        for pj in stations(cores):
            last, cpu = steady_run(lambda n: network(n, cores, think_scale), sla_s, low, seed,
                                   duration, pj)
            db = last["tiers"]["db"]
            err = 100 * (last["capacity_users"] / cap - 1)
            errors.setdefault(pj, []).append(err)
            fit = db.get("map2") or {}
            flagged = any("speed min(n, c)" in f for f in last["flags"])
            lo, hi = last.get("capacity_users_lower"), last.get("capacity_users_upper")
            inside = lo is not None and hi is not None and lo <= cap <= hi
            print(f"| {seed} | {pj} | {last['capacity_users']} | {err:+.1f}% | "
                  f"{lo}-{hi} ({'yes' if inside else 'no'}) | "
                  f"{db['idc']:.0f} / {fit.get('idc', math.nan):.0f} | "
                  f"{'yes' if flagged else 'no'} | {cpu:.1f} |", flush=True)
    for pj, errs in errors.items():
        print(f"\n`per_job_max_cores` {pj}: within 10% on {sum(abs(e) <= 10 for e in errs)} of "
              f"{len(errs)}; error median {np.median(errs):+.1f}%, range {min(errs):+.1f} to "
              f"{max(errs):+.1f}%")


def ramp_seeds(cores: int, sla_s: float, cap: float, seeds: list[int],
               think_scale: float = 1.0) -> None:
    """``bench/e2e/multicore.py``'s ramp (40% -> 150% of ``cap`` from minute 20 over 40
    minutes) per seed with either station: the measured breach, the first firing's lead."""
    print(f"## Ramp 40% -> 150% of capacity over 40 minutes from minute 20, db {cores} cores, "
          f"think time x{think_scale:g}, SLA {sla_s} s, truth {cap:.0f} users\n")
    print("| seed | `per_job_max_cores` | measured breach (min) | predicted_breach firings "
          "(min) | lead (min) | met | pipeline CPU s |\n|---|---|---|---|---|---|---|")
    met: dict[int, int] = {}
    for seed in seeds:
        for pj in stations(cores):
            cpu = [0.0]

            def run_records(recs: list[dict[str, Any]]) -> tuple[list, list]:
                preds, events, cpu[0] = pipeline_run(recs, sla_s, pj)
                return preds, events

            breach, fired, _ = ramp_run(cap, seed, lambda n: network(n, cores, think_scale),
                                        run_records, sla_s)
            lead_s = first_lead(breach, fired)
            lead = None if lead_s is None else lead_s / 60
            ok = (lead is not None and lead >= 5 and breach - fired[0] <= 1800)
            met[pj] = met.get(pj, 0) + ok
            print(f"| {seed} | {pj} | {'none' if breach is None else f'{breach / 60:.1f}'} | "
                  f"{[round(f / 60, 1) for f in fired]} | "
                  f"{'none' if lead is None else f'{lead:.1f}'} | {'yes' if ok else 'no'} | "
                  f"{cpu[0]:.1f} |", flush=True)
    for pj, n in met.items():
        print(f"\n`per_job_max_cores` {pj}: first firing >= 5 min ahead and none earlier than "
              f"30 min on {n} of {len(seeds)}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cores", type=int, default=64, help="the database's cores")
    ap.add_argument("--sla", type=float, default=0.4, help="every class's SLA, s")
    ap.add_argument("--capacity", type=float, default=None,
                    help="the truth capacity (skips the simulated grid)")
    ap.add_argument("--grid", default=None,
                    help="populations of the truth grid (default: 0.3-0.9 of the knee)")
    ap.add_argument("--grid-seconds", type=float, default=1500.0,
                    help="simulated seconds per replication of the truth grid")
    ap.add_argument("--grid-only", action="store_true", help="only the truth capacity")
    ap.add_argument("--seeds", default="1-3", help="steady-run seeds ('1-6' or '1,3,5')")
    ap.add_argument("--minutes", type=float, default=60.0, help="length of a steady run")
    ap.add_argument("--ramp", action="store_true", help="the ramp runs instead of steady ones")
    ap.add_argument("--think-scale", type=float, default=1.0,
                    help="the think time times this (1 s x K: thousands of users at K = 20)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cap = args.capacity
    if cap is None:
        grid = ([int(x) for x in args.grid.split(",")] if args.grid else
                [int(round(f * 517 * args.think_scale))
                 for f in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)])
        cap, rows = truth_capacity(grid, args.grid_seconds, 1,
                                   lambda n: network(n, args.cores, args.think_scale), args.sla)
        print_truth(rows)
        print(f"\ntruth capacity at SLA {args.sla} s: **{cap:.0f} users**\n")
    if args.grid_only or not math.isfinite(cap):
        print(f"(total {time.perf_counter() - t0:.0f} s)")
        return
    if args.ramp:
        ramp_seeds(args.cores, args.sla, cap, seed_range(args.seeds), args.think_scale)
    else:
        steady_seeds(args.cores, args.sla, cap, seed_range(args.seeds), 60.0 * args.minutes,
                     args.think_scale)
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
