"""One population of thousands through the open route against today's decomposition, same
run: time, peak memory, and the pipeline's capacity search.

    python -m bench.speed.large_n                  # N = 5,000, median of 3
    python -m bench.speed.large_n --population 3000 --runs 5

Network: ``bench/large_n_network.py`` (4 tiers, two bursty: app 8 cores, db 16 cores; Z = 7 s).

* **one solve** at ``--population``: :func:`solvers.open.fixed_population.solve_fixed_population`
  (its open solves counted; also without the waves behind a bursty tier) against
  :func:`solvers.decomposition.solve_decomposed` at the
  prediction's tolerance (1e-6) and the capacity search's (1e-4; each without a memo, as a
  model's first solve: medians of ``--runs`` less 2, at least 1); the open route's medians of
  ``--runs`` after one warm-up, each with the open solves held by rate forgotten first
  (:func:`solvers.open.fixed_population.forget_held`: the population's own search), the
  per-job patterns held (as in a pipeline's later solves); and a cold open solve (the
  per-job patterns emptied too), and the bursty tiers' per-job patterns built alone;
* **peak memory** of one solve: ``tracemalloc``'s peak over a fresh solve (numpy's buffers
  included), each route alone;
* **capacity search**: the pipeline's ``model_capacity`` at ``--sla`` (mean R), cold (every
  memo emptied), through the open route (searched in the rate:
  :func:`streams.predict.capacity_search.rate_bracket`; its open solves counted: full, rough,
  without the waves; ``--open-search-runs``, median) and through the decomposition only
  (``--search-runs``, median); wall and CPU time (``time.process_time``: this process's,
  steadier than the wall on a shared host); with ``--slas``, the open route's cold search
  at each SLA counted (capacity, open solves, distinct rates solved); with ``--trace``, one
  cold search at ``--sla`` probe by probe (each open solve's kind, rate and CPU time, the
  populations read off after the bracket).

The host's load average is printed before and after (the ratios are the figure).

Figures, no pass/fail; the ratios are the figure on a shared host.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import sys
import time
import tracemalloc
from typing import Any, Callable

from bench.large_n_network import decomposition_only, network, system_model
from bench.speed.decomposition import timed
from solvers.decomposition import solve_decomposed
from solvers.open import fixed_population, queues
from solvers.open.fixed_population import solve_fixed_population
from streams.predict.model import OPEN_ROUTE_POPULATION, model_capacity


def peak_mb(fn: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--population", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--search-runs", type=int, default=1)
    ap.add_argument("--open-search-runs", type=int, default=5,
                    help="the open route's searches (median; each cold): a few tens of ms "
                         "each, so one is at the mercy of a busy host's scheduler")
    ap.add_argument("--sla", type=float, default=0.5)
    ap.add_argument("--slas", default="",
                    help="comma-separated SLAs (s): the open route's search at each, counted")
    ap.add_argument("--trace", action="store_true",
                    help="one cold open-route search at --sla, probe by probe")
    args = ap.parse_args()
    print(f"command: python -m {__spec__.name} {' '.join(sys.argv[1:])}")
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    procs, cores, z = network()
    n = args.population

    def empty(patterns: bool) -> None:
        """Every open solve held (by rate) forgotten; with ``patterns`` the per-job patterns
        too."""
        fixed_population.forget_held()
        if patterns:
            queues._PATTERNS._held.clear()
            fixed_population._DEPARTURE_PATTERNS._held.clear()

    def open_solve():
        empty(False)
        return solve_fixed_population(procs, n, z, servers=cores)

    def cold_open():
        empty(True)
        return solve_fixed_population(procs, n, z, servers=cores)

    def dec(tol: float):
        return lambda: solve_decomposed(procs, n, z, servers=cores, tol=tol)

    mem_open = peak_mb(cold_open)
    mem_dec = peak_mb(dec(1e-6))
    t_open, res = timed(open_solve, args.runs)
    t_cold, _ = timed(cold_open, args.runs)
    t_plain, plain = timed(lambda: (empty(False), solve_fixed_population(
        procs, n, z, servers=cores, waves=False))[1], args.runs)
    rows = [("open route (warm)", t_open, res, mem_open), ("open route (cold)", t_cold, res,
                                                           mem_open),
            ("open route without waves (not the pipeline's)", t_plain, plain, mem_open)]
    for tol in (1e-6, 1e-4):
        t, d = timed(dec(tol), max(1, args.runs - 2), warm=False)   # no memo: nothing held
        rows.append((f"decomposition, tol {tol:g}", t, d, mem_dec))
    t_dec = rows[3][1]
    print(f"\nN = {n:,}, median of {args.runs} (decomposition: {max(1, args.runs - 2)})\n")
    print("| solver | time | decomposition (1e-6) / this | X | R (s) | peak memory "
          "(tracemalloc) |\n|---|---:|---:|---:|---:|---:|")
    for name, t, r, mem in rows:
        print(f"| {name} | {1000 * t:.1f} ms | {t_dec / t:.0f}× | {r.throughput:.1f} | "
              f"{r.response_time:.4f} | {mem:.1f} MB |")
    print(f"open solves in the search: {res.open_solves} (read off the model between two: "
          f"{res.interpolated})")

    def patterns() -> None:
        """The bursty tiers' per-job patterns (transitions and QBD plans), built cold."""
        queues._PATTERNS._held.clear()
        for proc, c in zip(procs, cores):
            if proc.order > 1:
                queues._per_job_pattern(proc, c)

    t_pat, _ = timed(patterns, max(args.runs, 5))
    print(f"the bursty tiers' per-job patterns, built cold: {1000 * t_pat:.2f} ms (median of "
          f"{max(args.runs, 5)})")

    def search(runs: int) -> tuple[float, float, Any, int]:
        """Median wall and CPU (this process) time of ``runs`` cold searches."""
        times, cpu, cap, solved = [], [], None, 0
        for _ in range(runs):
            empty(True)
            model = system_model(args.sla)
            t0, c0 = time.perf_counter(), time.process_time()
            cap, _ = model_capacity(model)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            solved = len(model.solved())
        return statistics.median(times), statistics.median(cpu), cap, solved

    def open_solves() -> str:
        """The open solves held after a search: full / rough (fewer departure phases) /
        without the waves."""
        kinds = [0, 0, 0]
        for key, held in fixed_population._CURVES._held.items():
            kinds[0 if key[3] and len(key) == 4 else 1 if key[3] else 2] += len(held)
        return "/".join(str(k) for k in kinds)

    t_s_open, c_s_open, cap_open, k_open = search(args.open_search_runs)
    kinds = open_solves()
    with decomposition_only():
        t_s_dec, c_s_dec, cap_dec, k_dec = search(args.search_runs)
    print(f"\ncapacity search at mean R <= {args.sla:g} s, cold (median of "
          f"{args.open_search_runs} / {args.search_runs}; CPU: this process's)\n")
    print("| route | time | decomposition / this | CPU | decomposition / this (CPU) | capacity "
          "| populations solved | open solves (full/rough/without waves) |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| open route from {OPEN_ROUTE_POPULATION:,} users | {1000 * t_s_open:.0f} ms | "
          f"{t_s_dec / t_s_open:.0f}× | {1000 * c_s_open:.0f} ms | {c_s_dec / c_s_open:.0f}× | "
          f"{cap_open} | {k_open} | {kinds} |")
    print(f"| decomposition only | {1000 * t_s_dec:.0f} ms | 1× | {1000 * c_s_dec:.0f} ms | 1× | "
          f"{cap_dec} | {k_dec} | - |")
    if args.slas:
        print("\nopen route's cold searches by SLA (no timing): capacity, open solves "
              "(full/rough/without waves), distinct rates solved\n")
        print("| SLA (s) | capacity | open solves | rates |\n|---:|---:|---:|---:|")
        for sla in (float(v) for v in args.slas.split(",")):
            empty(True)
            cap, _ = model_capacity(system_model(sla))
            rates = {rate for held in fixed_population._CURVES._held.values() for rate in held}
            print(f"| {sla:g} | {cap} | {open_solves()} | {len(rates)} |")
    if args.trace:
        trace(args.sla, empty)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def trace(sla: float, empty: Callable[[bool], None]) -> None:
    """One cold open-route search at ``sla``, each open solve in order: its kind (full;
    rough: fewer departure phases; without the waves), rate, ``R`` and CPU time (this
    process's), then the search's total and the populations it read off."""
    solve = fixed_population._open
    rows: list[tuple[str, float, float, float]] = []

    def timed_open(procs, means, cores, rate, per_job_max_cores, waves=True,
                   share=fixed_population.WAVE_PHASE_SHARE):
        c0 = time.process_time()
        res = solve(procs, means, cores, rate, per_job_max_cores, waves, share)
        kind = ("full" if share == fixed_population.WAVE_PHASE_SHARE else "rough") \
            if waves else "without waves"
        rows.append((kind, rate, float(res.response_time[0]), time.process_time() - c0))
        return res

    empty(True)
    model = system_model(sla)
    fixed_population._open = timed_open
    try:
        c0 = time.process_time()
        cap, _ = model_capacity(model)
        total = time.process_time() - c0
    finally:
        fixed_population._open = solve
    print(f"\none cold open-route search at mean R <= {sla:g} s, probe by probe (CPU)\n")
    print("| open solve | rate (/s) | R (s) | CPU |\n|---|---:|---:|---:|")
    for kind, rate, r, cpu in rows:
        print(f"| {kind} | {rate:.2f} | {r:.4f} | {1000 * cpu:.2f} ms |")
    print(f"search {1000 * total:.1f} ms CPU, open solves {1000 * sum(r[3] for r in rows):.1f} "
          f"ms; capacity {cap}; populations read off: {sorted(model.solved())}")


if __name__ == "__main__":
    main()
