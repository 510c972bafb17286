"""Speed of the flow-equivalent decomposition (solvers.decomposition) beside the exact chain
(solvers.mapqn) and line-solver, and of a capacity search on the pipeline's model.

    python -m bench.speed.decomposition              # all figures
    python -m bench.speed.decomposition --skip-peer  # without line-solver
    python -m bench.speed.decomposition --baseline /path/to/other/checkout  # CPU time A/B
    python -m bench.speed.decomposition --search-only  # capacity searches only
    python -m bench.speed.decomposition --exact-budget # exact chain vs decomposition by tiers
    python -m bench.speed.decomposition --floor        # what N = 5,000 costs at the least

Networks (think time Z, then the tiers in order; a bursty tier's service sequence is paper
000's MAP(2) with I ~ 200, scaled to the tier's mean):

* ``4 tiers, 2 bursty`` -- web 4 cores exp 2 ms, app 8 cores bursty 10 ms, cache 4 cores exp
  4 ms, db 16 cores bursty 20 ms; Z = 7 s (knee ~ 5,600 users);
* ``4 tiers, 1 bursty`` -- the same with the app exponential;
* ``Mi et al. (2008)`` -- front 1 core exp 4.5 ms, db 1 core bursty 4.0 ms, Z = 0.5 s.

Times are the median of ``--runs`` (5) solves after one warm-up, in this process (one BLAS
thread is set before numpy loads); a capacity search is the pipeline's ``model_capacity``,
cold and warm-started from a last capacity 5% off (with and without the current users' population
solved before, as in the pipeline), median of ``--search-runs`` (3). The
exact chain runs where it has at most ``--exact-states`` states; line-solver (``SolverMVA``,
its default approximate solver for MAP service; the JVM start and model building excluded)
where it completes in ``--peer-budget`` seconds. The capacity searches run as well on the
systems (a)-(d) of ``bench/accuracy/multicore.py`` (their classes, cores and SLA; (a) has none:
0.3 s), with the pipeline's default exact-chain budget
(``streams.predict.model.EXACT_STATE_LIMIT``). ``--exact-budget``: one solve by the exact chain
and by the decomposition on one-core networks of 1-5 tiers around that budget, their times and
differences (what the budget is set from). ``--floor``: one population of ``4 tiers,
2 bursty`` at ``N = 5,000`` (budget 20 ms) beside each bursty tier solved alone (the network
with the other bursty tier made exponential at its mean: no fixed point; the app tier's
rounds for the waves after it remain, the database's chain is solved once), with the per-job
station and the speed-scaled one: a solve of the full network solves the database's chain at
least once, so its one-pass time is a floor; and line-solver's ``SolverMVA`` on the full
network; then the database's chain alone by other exact linear solvers (SuperLU, a
block-tridiagonal level reduction: ``bench/speed/chain_solvers.py``). Figures, no pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import contextlib
import io
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

from bench.speed.chain_solvers import capture_factorisations, solver_rows
from solvers.decomposition import solve_decomposed
from solvers.mapqn import solve_closed
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from streams.predict.model import SystemModel, model_capacity

BURSTY = MAP(BURSTY_D0, BURSTY_D1)


def networks() -> dict[str, tuple[list[MAP], list[int], float]]:
    return {
        "4 tiers, 2 bursty": ([MAP.exponential(0.002), BURSTY.scaled(0.010),
                               MAP.exponential(0.004), BURSTY.scaled(0.020)], [4, 8, 4, 16], 7.0),
        "4 tiers, 1 bursty": ([MAP.exponential(0.002), MAP.exponential(0.010),
                               MAP.exponential(0.004), BURSTY.scaled(0.020)], [4, 8, 4, 16], 7.0),
        "Mi et al. (2008)": ([MAP.exponential(0.0045), BURSTY.scaled(0.004)], [1, 1], 0.5),
    }


def fixed_point_networks() -> dict[str, tuple[list[MAP], list[int], float, list[int]]]:
    """Networks with two bursty tiers for the fixed point's sweeps (``--baseline``), with their
    populations: the 4-tier one above; a provisional model of ``bench/speed/pipeline.py --bursty
    --multicore`` (web 8 cores, a weakly bursty MAP(2) fitted at I ~ 10, at 23% of its cores;
    app 4 cores exponential; db 4 cores, I ~ 2,000, saturated; Z = 1.45 s: the fitted
    matrices, as tests/test_decomposition.py has them); docs/accuracy.md's system (c)."""
    from estimators.mapfit import fit_map2

    def fitted(D1: list[list[float]]) -> MAP:
        arr = np.array(D1)
        return MAP(-np.diag(arr.sum(axis=1)), arr)

    web = fitted([[693.07352, 10.714029], [22.458697, 79.010523]])
    db = fitted([[125122.71, 108.46700], [0.22266134, 16.673707]])
    four, four_cores, four_z = networks()["4 tiers, 2 bursty"]
    return {
        "4 tiers, 2 bursty": (four, four_cores, four_z, [1000, 2153, 5000]),
        "pipeline provisional": ([web, MAP.exponential(0.0018823919), db], [8, 4, 4], 1.4500755,
                                 [1332, 1995, 2664]),
        "system (c)": ([MAP.exponential(0.004), fit_map2(mean=0.008, idc=50, p95=0.024).process,
                        BURSTY.scaled(0.008)], [2, 4, 4], 1.0, [200, 400, 500, 600, 750]),
    }


def timed(fn: Callable[[], Any], runs: int = 5, warm: bool = True) -> tuple[float, Any]:
    """Median seconds of ``runs`` calls (after one untimed call when ``warm``) and the last
    answer."""
    out = fn() if warm else None
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def states(procs: list[MAP], n: int, z: float) -> int:
    stations = len(procs) + (1 if z > 0 else 0)
    return math.comb(n + stations - 1, stations - 1) * math.prod(p.order for p in procs)


def peer(procs: list[MAP], cores: list[int], z: float, n: int) -> tuple[float, float] | None:
    """line-solver's SolverMVA on the same network: (seconds, throughput), None on failure."""
    import line_solver as ls

    model = ls.Network("bench")
    delay = ls.Delay(model, "Think")
    queues = [ls.Queue(model, f"q{m}", ls.SchedStrategy.FCFS) for m in range(len(procs))]
    job = ls.ClosedClass(model, "users", n, delay)
    delay.setService(job, ls.Exp(1.0 / z))
    for queue, proc, c in zip(queues, procs, cores):
        queue.setNumberOfServers(c)
        service = ls.Exp(1.0 / proc.mean) if proc.order == 1 else \
            ls.MAP(np.array(proc.D0), np.array(proc.D1))
        queue.setService(job, service)
    model.link(ls.Network.serial_routing([delay, *queues]))
    try:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            _, _, _, tput, _, _ = ls.SolverMVA(model, verbose=False).getAvg()
        return time.perf_counter() - t0, float(np.asarray(tput)[1, 0])
    except Exception as exc:  # noqa: BLE001 - report whatever the peer says
        print(f"    line-solver failed: {type(exc).__name__}: {str(exc)[:120]}")
        return None


def capacity_time(procs: list[MAP], cores: list[int], z: float, sla: float,
                  warm_shift: float | None = None, runs: int = 3,
                  current: float | None = None) -> tuple[float, int, int, list[str]]:
    """A capacity search as the pipeline runs it on a one-class network
    (:func:`search_time`)."""
    D = np.array([p.mean for p in procs])
    unit = [p.scaled(1.0) for p in procs]

    def model() -> SystemModel:
        return SystemModel(tiers=[f"t{i}" for i in range(len(procs))], classes=["all"],
                           D_mc=D[:, None].copy(), mix=np.ones(1),
                           servers=np.array(cores, float), think_time=z, sla=np.array([sla]),
                           processes=unit, map_limit=100_000)

    return search_time(model, warm_shift, runs, current)


def search_time(model: Callable[[], SystemModel], warm_shift: float | None = None,
                runs: int = 3, current: float | None = None
                ) -> tuple[float, int, int, list[str]]:
    """A capacity search as the pipeline runs it (streams.predict.model ``model_capacity``) on
    fresh models from ``model``: cold (``warm_shift`` None: projected from the users solved
    before it, else from half of MVA's capacity), or warm from a last capacity
    ``warm_shift`` away from this one (streams.engine.system: the
    estimates move a little between windows). ``current``: the population at this fraction of
    the capacity is solved first, untimed, as the pipeline's prediction at the current users
    is before its search (the search then brackets from it). Returns (median seconds,
    capacity, populations solved by the search, the models they were solved with)."""
    cold, _ = model_capacity(model())
    warm = None if warm_shift is None else int(round(cold * (1.0 + warm_shift)))

    def search() -> tuple[float, int, int, list[str]]:
        m = model()
        if current is not None:
            m.at(max(1, int(round(current * cold))))
        before = len(m.solved())
        t0 = time.perf_counter()
        found, _ = model_capacity(m, warm)
        seconds = time.perf_counter() - t0
        return (seconds, found, len(m.solved()) - before,
                sorted({p.model for p in m.solved().values()}))

    results = [search() for _ in range(runs)]
    _, found, solved, kinds = results[-1]
    return statistics.median(r[0] for r in results), found, solved, kinds


def baseline_rows(root: str) -> None:
    """CPU time (``time.process_time``, best of 2, alternating) and sweeps of
    ``solve_decomposed`` from another checkout's ``solvers/decomposition.py`` against this
    one's, on :func:`fixed_point_networks`; the answers' relative differences beside."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("baseline_decomposition",
                                                  Path(root) / "solvers" / "decomposition.py")
    other = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = other
    spec.loader.exec_module(other)
    print("| network | N | baseline (sweeps) | this (sweeps) | baseline / this | X this vs "
          "baseline | R this vs baseline |\n|---|---|---|---|---|---|---|")
    sweeps = {"base": 0, "this": 0}
    for name, (procs, cores, z, pops) in fixed_point_networks().items():
        for n in pops:
            _baseline_row(name, procs, cores, z, n, other.solve_decomposed, sweeps)
    print(f"\nsweeps in all: baseline {sweeps['base']}, this {sweeps['this']}")


def _baseline_row(name: str, procs: list[MAP], cores: list[int], z: float, n: int,
                  other: Callable[..., Any], sweeps: dict[str, int]) -> None:
    """One row of :func:`baseline_rows`; adds the two solves' sweeps to ``sweeps``."""
    runs: dict[str, list[tuple[float, Any]]] = {"base": [], "this": []}
    for _ in range(2):
        for key, solve in (("base", other), ("this", solve_decomposed)):
            t0 = time.process_time()
            res = solve(procs, n, z, servers=cores)
            runs[key].append((time.process_time() - t0, res))
    (tb, rb), (tt, rt) = (min(runs[k], key=lambda r: r[0]) for k in ("base", "this"))
    sweeps["base"] += rb.iterations
    sweeps["this"] += rt.iterations
    print(f"| {name} | {n} | {tb:.3f} s ({rb.iterations}) | {tt:.3f} s "
          f"({rt.iterations}) | {tb / tt:.1f}x | {rt.throughput / rb.throughput - 1:+.1e} | "
          f"{rt.response_time / rb.response_time - 1:+.1e} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--exact-states", type=int, default=100_000)
    ap.add_argument("--peer-budget", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=5, help="timed solves per row (median)")
    ap.add_argument("--search-runs", type=int, default=3, help="timed capacity searches")
    ap.add_argument("--baseline", help="another checkout: CPU-time A/B of one solve only")
    ap.add_argument("--search-only", action="store_true", help="only the capacity searches")
    ap.add_argument("--exact-budget", action="store_true",
                    help="only the exact chain against the decomposition around its budget")
    ap.add_argument("--floor", action="store_true",
                    help="only N = 5,000 on 4 tiers, 2 bursty beside one pass of each chain")
    args = ap.parse_args()
    if args.floor:
        floor_rows(args.runs)
        return
    if args.baseline:
        baseline_rows(args.baseline)
        return
    if args.exact_budget:
        exact_budget_rows()
        return
    if not args.search_only:
        solve_rows(args)
    search_rows(args)


def floor_rows(runs: int, n: int = 5000, budget: float = 0.020) -> None:
    """The full solve of ``4 tiers, 2 bursty`` at ``n`` users (tolerances 1e-6 and 1e-4)
    beside each bursty tier solved alone, per-job and speed-scaled stations."""
    procs, cores, z = networks()["4 tiers, 2 bursty"]
    bursty = [m for m, p in enumerate(procs) if p.order > 1]
    print(f"4 tiers, 2 bursty at N = {n:,} (issue 19's budget {1000 * budget:.0f} ms), "
          f"median of {runs}\n")
    print("| what | station | time | sweeps or rounds | X | R (s) | x budget |")
    print("|---|---|---|---|---|---|---|")
    for station, pj in (("per-job (default)", 16), ("speed-scaled", 1)):
        for tol in (1e-6, 1e-4):
            t, res = timed(lambda: solve_decomposed(procs, n, z, servers=cores, tol=tol,
                                                    per_job_max_cores=pj), runs)
            print(f"| full solve, tol {tol:g} | {station} | {1000 * t:.1f} ms | "
                  f"{res.iterations} | {res.throughput:.2f} | {res.response_time:.4f} | "
                  f"{t / budget:.0f}x |")
        for b in bursty:
            alone = only_bursty(procs, b)
            t, res = timed(lambda: solve_decomposed(alone, n, z, servers=cores,
                                                    per_job_max_cores=pj), runs)
            print(f"| tier {b} ({cores[b]} cores) the only bursty one | {station} "
                  f"| {1000 * t:.1f} ms | {res.iterations} | {res.throughput:.2f} | "
                  f"{res.response_time:.4f} | {t / budget:.1f}x |")
    got = peer(procs, cores, z, n)
    if got is not None:
        print(f"| line-solver `SolverMVA` (random environment) | - | {1000 * got[0]:.1f} ms | - "
              f"| {got[1]:.2f} | {n / got[1] - z:.4f} | {got[0] / budget:.1f}x |")
    with capture_factorisations() as seen:
        solve_decomposed(only_bursty(procs, bursty[-1]), n, z, servers=cores)
    chain = max(seen, key=lambda c: c.states)
    print(f"\nThe database's chain alone ({chain.levels:,} levels, {chain.states:,} states) by "
          f"exact linear solvers (bench/speed/chain_solvers.py), median of {runs}\n")
    print("| solver | levels | time | x budget | x banded LU | L1 from the solver's answer |")
    print("|---|---|---|---|---|---|")
    for row in solver_rows(chain, runs, budget):
        print(row)


def only_bursty(procs: list[MAP], b: int) -> list[MAP]:
    """The network with every bursty tier but ``b`` exponential at its mean."""
    return [p if m == b or p.order == 1 else MAP.exponential(p.mean) for m, p in enumerate(procs)]


def solve_rows(args: argparse.Namespace) -> None:
    """One population per row: the decomposition, the exact chain, line-solver."""
    print("| network | N | decomposition | iterations | exact chain (states) | "
          "ratio exact/decomp. | X decomp. vs exact | line-solver MVA | ratio peer/decomp. |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (procs, cores, z) in networks().items():
        pops = [20, 100, 1000, 5000] if len(procs) > 2 else [20, 100, 300, 1000, 5000]
        for n in pops:
            t_dec, res = timed(lambda: solve_decomposed(procs, n, z, servers=cores), args.runs)
            exact = ratio = diff = "-"
            if states(procs, n, z) <= args.exact_states:
                t_ex, ex = timed(lambda: solve_closed(procs, n, z, servers=cores), runs=1) \
                    if any(c > 1 for c in cores) else timed(lambda: solve_closed(procs, n, z),
                                                             runs=1)
                exact = f"{1000 * t_ex:.1f} ms ({states(procs, n, z):,})"
                ratio = f"{t_ex / t_dec:.1f}x"
                diff = f"{100 * (res.throughput / ex.throughput - 1):+.2f}%"
            pr = ppr = "-"
            if not args.skip_peer and n <= 1000:
                got = peer(procs, cores, z, n)
                if got is not None and got[0] <= args.peer_budget:
                    pr = f"{1000 * got[0]:.0f} ms (X {got[1]:.4g} vs {res.throughput:.4g})"
                    ppr = f"{got[0] / t_dec:.1f}x"
            print(f"| {name} | {n} | {1000 * t_dec:.1f} ms | {res.iterations} | {exact} | "
                  f"{ratio} | {diff} | {pr} | {ppr} |")


def search_rows(args: argparse.Namespace) -> None:
    """The pipeline's capacity searches on each network."""
    print("\nCapacity search (pipeline's model_capacity, SLA 0.1 s except Mi et al. (2008): 0.3 s; "
          f"median of {args.search_runs})\n")
    print("| network | start | seconds | capacity | populations solved |\n|---|---|---|---|---|")
    for name, (procs, cores, z) in networks().items():
        sla = 0.3 if name == "Mi et al. (2008)" else 0.1
        for label, shift, current in (
                ("cold", None, None), ("cold, users at 40% solved", None, 0.4),
                ("warm, last capacity +5%", 0.05, None),
                ("warm, last capacity -5%", -0.05, None),
                ("warm +5%, users at 40% solved", 0.05, 0.4),
                ("warm -5%, users at 40% solved", -0.05, 0.4)):
            seconds, cap, solved, _ = capacity_time(procs, cores, z, sla, shift,
                                                    args.search_runs, current)
            print(f"| {name} | {label} | {seconds:.3f} | {cap} | {solved} |")
    accuracy_search_rows(args)


def accuracy_search_rows(args: argparse.Namespace) -> None:
    """The pipeline's capacity search on bench/accuracy/multicore.py's systems (a)-(d): cold,
    and warm from 5% off with the users at 40% solved before (as in the pipeline)."""
    from bench.accuracy import multicore as am

    print(f"\nCapacity search on the accuracy systems (a)-(d) (median of {args.search_runs})\n")
    print("| system | start | seconds | capacity | populations solved | models |\n"
          "|---|---|---|---|---|---|")
    for key, system in am.systems().items():
        sla = system.sla if system.sla is not None else 0.3

        def model() -> SystemModel:
            return SystemModel(
                tiers=[t.name for t in system.tiers], classes=list(system.classes),
                D_mc=system.D_mc.copy(), mix=np.array(system.mix),
                servers=np.array(system.cores, float), think_time=system.think,
                sla=np.full(len(system.classes), sla),
                processes=[t.process.scaled(1.0) if t.process is not None
                           else MAP.exponential(1.0) for t in system.tiers],
                map_limit=100_000)

        for label, shift in (("cold", None), ("warm +5%, users at 40% solved", 0.05),
                             ("warm -5%, users at 40% solved", -0.05)):
            seconds, found, solved, kinds = search_time(model, shift, args.search_runs, 0.4)
            print(f"| ({key}) | {label} | {seconds:.3f} | {found} | {solved} | "
                  f"{', '.join(kinds)} |")


def exact_budget_rows() -> None:
    """One population: the exact chain against the decomposition, one-core tiers (where
    both are the physical system's model), around the pipeline's exact-chain budget."""
    from estimators.mapfit import fit_map2
    from streams.predict.model import EXACT_STATE_LIMIT, EXACT_STATE_LIMIT_MANY

    E = MAP.exponential
    fitted = fit_map2(mean=1.0, idc=50, p95=3.0).process
    cases = {
        "1 tier, bursty": ([BURSTY.scaled(0.004)], [1000, 3000, 10000]),
        "Mi et al. (2008) (2 tiers, 1 bursty)": ([E(0.0045), BURSTY.scaled(0.004)],
                                          [40, 60, 70, 90, 123]),
        "2 tiers, 2 bursty": ([fitted.scaled(0.0045), BURSTY.scaled(0.004)], [35, 50, 70, 90]),
        "3 tiers, 1 bursty": ([E(0.003), E(0.004), BURSTY.scaled(0.006)], [12, 15, 18, 22, 30]),
        "3 tiers, 2 bursty": ([E(0.003), fitted.scaled(0.005), BURSTY.scaled(0.006)],
                              [10, 14, 20]),
        "4 tiers, 1 bursty": ([E(0.002), E(0.003), E(0.004), BURSTY.scaled(0.006)], [6, 8, 10]),
        "5 tiers, 1 bursty": ([E(0.001), E(0.002), E(0.003), E(0.004), BURSTY.scaled(0.006)],
                              [4, 6, 8]),
    }
    z = 0.5
    print(f"Exact chain against the decomposition (one-core tiers, Z = {z:g} s; median of 3; "
          f"budget: {EXACT_STATE_LIMIT}, more tiers {EXACT_STATE_LIMIT_MANY})\n")
    print("| network | N | states | exact chain | decomposition | X dec. vs exact | "
          "R dec. vs exact | within budget |\n|---|---|---|---|---|---|---|---|")
    for name, (procs, pops) in cases.items():
        budget = EXACT_STATE_LIMIT.get(len(procs), EXACT_STATE_LIMIT_MANY)
        for n in pops:
            t_ex, ex = timed(lambda: solve_closed(procs, n, z), runs=3)
            t_dec, dec = timed(lambda: solve_decomposed(procs, n, z), runs=3)
            r_ex, r_dec = n / ex.throughput - z, n / dec.throughput - z
            size = states(procs, n, z)
            print(f"| {name} | {n} | {size:,} | {1000 * t_ex:.1f} ms | {1000 * t_dec:.1f} ms | "
                  f"{100 * (dec.throughput / ex.throughput - 1):+.2f}% | "
                  f"{100 * (r_dec / r_ex - 1):+.2f}% | {'yes' if size <= budget else 'no'} |")


if __name__ == "__main__":
    main()
