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
  populations read off after the bracket);
* with ``--against TREE``: the cold search at ``--sla`` of this tree and of ``TREE`` (its
  ``solvers/open/fixed_population.py`` and ``streams/predict/capacity_search.py`` loaded beside
  this tree's, :mod:`streams.predict.model` calling one or the other; that
  ``fixed_population`` calls ``TREE``'s ``solvers/open/qbd.py`` and ``solvers/departures.py``
  where they differ, and the bursty tiers' chains are solved by ``TREE``'s ``qbd`` in its
  searches; the rest is this tree's, and the files of ``solvers/open`` and
  ``solvers/departures.py`` that differ are printed), alternating search by search
  (``--open-search-runs`` each), with the decomposition's search between every round, so
  all see the same load: CPU medians and each tree's ratio to the decomposition, whether
  both trees' capacities agree at each of ``--slas``, and how far apart the two trees'
  one-population solves are (``X``, ``R`` and every tier's residence time, relative, each
  cold) at 1,000-6,000 users.

    python -m bench.speed.large_n --against /work/main --open-search-runs 15 --search-runs 3

The host's load average is printed before and after (the ratios are the figure).

Figures, no pass/fail; the ratios are the figure on a shared host.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import filecmp
import importlib.util
import inspect
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

import streams.predict.model as model_module
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
    ap.add_argument("--against", type=Path, default=None,
                    help="another tree: both trees' cold searches alternating (module notes)")
    args = ap.parse_args()
    print(f"command: python -m {__spec__.name} {' '.join(sys.argv[1:])}")
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    if args.against is not None:
        against(args.against, args)
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        return
    procs, cores, z = network()
    n = args.population

    def empty(patterns: bool) -> None:
        """Every open solve held (by rate) forgotten; with ``patterns`` the per-job patterns
        too."""
        fixed_population.forget_held()
        if patterns:
            queues._PATTERNS.clear()
            fixed_population._DEPARTURE_PATTERNS.clear()

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
        queues._PATTERNS.clear()
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


#: what :mod:`streams.predict.model` takes from each module :func:`against` swaps
SWAPPED = {"solvers/open/fixed_population.py": ("open_at_rate", "solve_fixed_population"),
           "streams/predict/capacity_search.py": ("capacity_search", "projected_start",
                                                  "rate_bracket")}


def _accepting(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called with only the keywords it takes: :mod:`streams.predict.model` (this
    tree's in both) may pass a keyword the other tree's function does not know, and that
    tree's model did not pass it (the other tree's search as it runs there)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return fn

    def call(*a: Any, **k: Any) -> Any:
        return fn(*a, **{name: v for name, v in k.items() if name in params})
    return call


#: the modules whose functions ``TREE``'s ``fixed_population`` calls directly, taken from
#: ``TREE`` too where they differ (:func:`_rebind`): a faster ``G`` in this tree's ``qbd`` would
#: otherwise speed up both trees' searches alike
BESIDE = ("solvers/open/qbd.py", "solvers/departures.py")


def _rebind(module: ModuleType, source: ModuleType, rel: str) -> None:
    """Every function ``module`` imported from this tree's module at ``rel`` replaced by
    ``source``'s of the same name (``source``: the other tree's copy of it)."""
    name = rel.removesuffix(".py").replace("/", ".")
    for attr, value in list(vars(module).items()):
        if inspect.isfunction(value) and value.__module__ == name and hasattr(source, attr):
            setattr(module, attr, getattr(source, attr))


def _load(tree: Path, rel: str) -> ModuleType:
    """``tree``'s module at ``rel`` as a module of its own (its imports: this tree's)."""
    name = "_against_" + rel.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, tree / rel)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--against: no {rel} under {tree}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def against(tree: Path, args: argparse.Namespace) -> None:
    """This tree's cold search at ``--sla`` against ``tree``'s, alternating, the
    decomposition's between rounds (module notes)."""
    here = Path(__file__).resolve().parents[2]
    impls: dict[str, dict[str, Any]] = {"this tree": {}, str(tree): {}}
    loaded = {rel: _load(tree, rel) for rel in SWAPPED}
    for rel, names in SWAPPED.items():
        for name in names:
            impls["this tree"][name] = getattr(model_module, name)
            impls[str(tree)][name] = _accepting(getattr(loaded[rel], name))
    shared = [*(here / "solvers/open").glob("*.py"), here / "solvers/departures.py"]
    differ = sorted(str(p.relative_to(here)) for p in shared
                    if not (tree / p.relative_to(here)).exists()
                    or not filecmp.cmp(p, tree / p.relative_to(here), shallow=False))
    other_fp = loaded["solvers/open/fixed_population.py"]
    beside = [rel for rel in differ if rel in BESIDE and (tree / rel).exists()]
    chains = {"this tree": queues.solve_qbd, str(tree): queues.solve_qbd}
    for rel in beside:
        source = _load(tree, rel)
        _rebind(other_fp, source, rel)
        if rel == "solvers/open/qbd.py":        # the bursty tiers' chains (this tree's queues)
            chains[str(tree)] = source.solve_qbd
    print(f"swapped: {', '.join(SWAPPED)}; of solvers/open and solvers/departures.py these "
          f"differ: {differ}; {tree}'s fixed_population calls its own {beside or 'none'} "
          f"(the rest: this tree's in both)")

    def empty() -> None:
        for fp_module in (fixed_population, other_fp):
            fp_module.forget_held()
            held = getattr(fp_module, "_DEPARTURE_PATTERNS", None)
            if held is not None:        # the other tree's Memo may predate Memo.clear
                held._held.clear()
        queues._PATTERNS.clear()

    def use(impl: dict[str, Any]) -> None:
        for name, value in impl.items():
            setattr(model_module, name, value)
        queues.solve_qbd = chains["this tree" if impl is impls["this tree"] else str(tree)]

    def search(sla: float) -> tuple[float, Any]:
        empty()
        model = system_model(sla)
        c0 = time.process_time()
        cap, _ = model_capacity(model)
        return time.process_time() - c0, cap

    cpu: dict[str, list[float]] = {k: [] for k in impls}
    dec: list[float] = []
    caps: dict[str, Any] = {}
    rounds = max(args.search_runs, 1)
    per_round = max(1, -(-args.open_search_runs // rounds))
    try:
        for _ in range(rounds):
            for _ in range(per_round):
                for key, impl in impls.items():
                    use(impl)
                    t, caps[key] = search(args.sla)
                    cpu[key].append(t)
            use(impls["this tree"])
            with decomposition_only():
                dec.append(search(args.sla)[0])
        print(f"\ncold capacity search at mean R <= {args.sla:g} s, CPU (this process's), "
              f"medians: {rounds} decomposition-only searches, {rounds * per_round} of each "
              f"tree's, alternating\n")
        d = statistics.median(dec)
        print("| route | CPU (median) | range | decomposition / this | capacity |\n"
              "|---|---:|---:|---:|---:|")
        print(f"| decomposition only | {1000 * d:.0f} ms | {1000 * min(dec):.0f}-"
              f"{1000 * max(dec):.0f} ms | 1× | - |")
        for key, v in cpu.items():
            m = statistics.median(v)
            print(f"| open route, {key} | {1000 * m:.1f} ms | {1000 * min(v):.1f}-"
                  f"{1000 * max(v):.1f} ms | {d / m:.0f}× | {caps[key]} |")
        a, b = cpu.values()
        print(f"this tree / {tree}: {statistics.median(a) / statistics.median(b):.3f} (median "
              f"of the ratios search by search: "
              f"{statistics.median(x / y for x, y in zip(a, b)):.3f})")
        procs, cores, z = network()
        worst = 0.0
        for n in range(1000, 6001, 1000):
            got = []
            for impl in impls.values():
                use(impl)
                empty()
                r = impl["solve_fixed_population"](procs, n, z, servers=cores)
                got.append(np.concatenate(([r.throughput, r.response_time],
                                           r.residence_time)))
            worst = max(worst, float(np.max(np.abs(got[0] - got[1]) / np.abs(got[1]))))
        print(f"one solve at 1,000-6,000 users (X, R, residence times), cold: the trees at most "
              f"{worst:.2g} apart (relative)")
        if args.slas:
            print("\n| SLA (s) | this tree | other tree |\n|---:|---:|---:|")
            for sla in (float(v) for v in args.slas.split(",")):
                got = []
                for impl in impls.values():
                    use(impl)
                    got.append(search(sla)[1])
                print(f"| {sla:g} | {got[0]} | {got[1]} |")
    finally:
        use(impls["this tree"])


def trace(sla: float, empty: Callable[[bool], None]) -> None:
    """One cold open-route search at ``sla``, each open solve in order: its kind (full;
    rough: fewer departure phases; without the waves), rate, ``R`` and CPU time (this
    process's), then the search's total and the populations it read off; then where ten
    more cold searches spend their CPU (:data:`PARTS`, each part's calls timed)."""
    solve = fixed_population._open
    rows: list[tuple[str, float, float, float]] = []

    def timed_open(procs, means, cores, rate, per_job_max_cores, waves=True,
                   share=fixed_population.WAVE_PHASE_SHARE, into_bursty=True):
        c0 = time.process_time()
        res = solve(procs, means, cores, rate, per_job_max_cores, waves, share, into_bursty)
        kind = ("full" if share == fixed_population.WAVE_PHASE_SHARE and into_bursty
                else "rough") if waves else "without waves"
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
    spent = {label: 0.0 for _, _, label in PARTS}
    held = [(module, name, getattr(module, name)) for module, name, _ in PARTS]

    def timing(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        def run(*a: Any, **k: Any) -> Any:
            c0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[label] += time.process_time() - c0
        return run

    for (module, name, label), (_, _, fn) in zip(PARTS, held):
        setattr(module, name, timing(fn, label))
    total = 0.0
    try:
        for _ in range(10):
            empty(True)
            model = system_model(sla)
            c0 = time.process_time()
            model_capacity(model)
            total += time.process_time() - c0
    finally:
        for module, name, fn in held:
            setattr(module, name, fn)
    print("ten cold searches, CPU a search: " + f"{100 * total:.1f} ms; " + "; ".join(
        f"{label} {100 * t:.1f} ms ({100 * t / total:.0f}%)" for label, t in spent.items()))


#: the parts of an open solve :func:`trace` times (the waves' queues include their ``G``; no
#: other part calls another)
PARTS = ((fixed_population, "wave_jobs", "the waves' MAP/M/c queues"),
         (fixed_population, "shifted_cyclic_reduction", "their G"),
         (fixed_population, "solve_open_tiers", "the open tiers (the bursty tiers' chains)"),
         (fixed_population, "departure_process", "departure processes"))


if __name__ == "__main__":
    main()
