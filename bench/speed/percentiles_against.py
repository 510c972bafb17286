"""This tree's response-time laws against another tree's, interleaved in one process (numbers, no pass/fail).

Run from the repository root::

    python -m bench.speed.percentiles_against /work/main      # ~1-2 min
    python -m bench.speed.percentiles_against /work/main --repeat 20 --rounds 1
    python -m bench.speed.percentiles_against /work/main --models a b d --agree 0.2 1 3

``bench.speed.percentiles`` times one tree per process; on a shared host the load moves
between two such runs by more than a change to the laws does. Here the other tree's
``solvers/response_time`` is loaded beside this one's as a package of its own and
:mod:`streams.predict.model` calls one or the other (the exponential network's laws and the
MAP network's: the bursty tiers' chains, the exact chain, the open tiers), alternating run by
run, so both see the same load, and the capacity search on the quantiles
(``SystemModel._quantile_capacity`` from the other tree's ``streams/predict/model.py``, which
chooses the populations whose laws it asks for). Everything else (the MVA solve, the pipeline) is
this tree's. Printed per tree:
``bench.speed.percentiles``' one-model figures (CPU time, medians: the solve, ``+quantiles``
and ``p95 SLO`` over the solve; ``+found laws only``: the solve and then only the arrival
theorem's found laws at both populations, which every quantile of the exponential route
reads -- a floor under ``+quantiles`` that no faster law lowers; ``the laws alone``: the CPU
time of ``+quantiles``' laws after its solve, and this tree's over the other's) and its
pipeline workload's CPU time (``always``, ``p95 SLO`` over ``default``): of the whole run, of
``always``'s exponential laws (the CPU time inside ``response_time_quantiles(_many)``), and of
the periodic re-solves alone (``re-solves``: the CPU time inside
:func:`streams.engine.system.solve_systems` -- the model build, the MVA curves, the solve, the
capacity searches, the forecast, the alert window, the prediction's fields; ``paired``: the
ratio within each round, its median and range); and whether both
trees' quantiles are equal bit for bit (else how far apart they are at most), and their
capacities on the p95 SLO. On a model with multi-core tiers, also what their found laws need
that the solve does not compute: the networks without each such tier, by the solve's recursion
and by the convolution the laws use.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

import solvers.response_time as here
import streams.engine.pipeline as pipeline_module
import streams.predict.model as md
from bench.accuracy.percentiles import SYSTEMS
from bench.speed.pipeline import run_pipeline, workload
from streams.core.config import Config, SystemConfig

NAMES = ("ArrivalLaw", "response_time_quantiles", "response_time_quantiles_many")
#: the MAP network's laws, by submodule (the bursty tiers' chains, the exact chain's law, the
#: open tiers' law)
SUBMODULE_NAMES = (("bursty", "decomposed_quantiles"), ("mapnet", "map_network_quantiles"),
                   ("open_law", "open_quantiles"))


def load_other(tree: Path) -> ModuleType:
    """``tree``'s ``solvers/response_time`` as the package ``_other_response_time``."""
    root = tree / "solvers" / "response_time"
    spec = importlib.util.spec_from_file_location("_other_response_time", root / "__init__.py",
                                                  submodule_search_locations=[str(root)])
    if spec is None or spec.loader is None:
        raise SystemExit(f"tree: no solvers/response_time under {tree}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    for sub, _ in SUBMODULE_NAMES:
        importlib.import_module(f"{spec.name}.{sub}")
    return module


def load_other_search(tree: Path) -> Callable[..., Any]:
    """``tree``'s ``SystemModel._quantile_capacity`` (its module loaded as
    ``_other_predict_model``; what it imports is this tree's)."""
    spec = importlib.util.spec_from_file_location(
        "_other_predict_model", tree / "streams" / "predict" / "model.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"tree: no streams/predict/model.py under {tree}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.SystemModel._quantile_capacity


#: per tree, its capacity search on the quantiles (:func:`main` fills it)
SEARCHES: dict[str, Callable[..., Any]] = {}


def use(impl: ModuleType) -> None:
    for name in NAMES:
        setattr(md, name, getattr(impl, name))
    for sub, name in SUBMODULE_NAMES:
        setattr(md, name, getattr(getattr(impl, sub), name))
    search = SEARCHES.get("this" if impl is here else "other")
    if search is not None:
        md.SystemModel._quantile_capacity = search  # type: ignore[method-assign]


def _solve(base: md.SystemModel, n: int, n_fc: int, quantiles: bool | str,
           laws: list[float] | None = None) -> float:
    """CPU seconds of a fresh model's solve (``at`` now and at the forecast, the capacity);
    ``quantiles``: then both quantile sets (their own CPU seconds appended to ``laws``);
    ``"found"``: then only what arriving requests find at the tiers at both populations (the
    arrival theorem's laws every quantile reads, on a fresh :class:`ArrivalLaw` over the
    solve's curve, as the model builds it)."""
    m = base.variant()
    t0 = time.process_time()
    now, fc = m.at(n), m.at(n_fc)
    m.mva_capacity()
    t1 = time.process_time()
    if quantiles == "found":
        md.ArrivalLaw(m.D, m.servers, m.solver_think, curve=m.curve).found_many([n, n_fc])
    elif quantiles:
        m.quantiles_many([now, fc])
        if laws is not None:
            laws.append(time.process_time() - t1)
    return time.process_time() - t0


def one_model(impls: dict[str, ModuleType], key: str, repeat: int) -> list[str]:
    system = SYSTEMS[key]
    slo = system.model()
    mean = slo.variant(slo=None, sla=np.full(len(system.classes), 0.1))
    knee = mean.knee()
    n, n_fc = int(0.9 * knee), int(1.1 * knee)
    t: dict[tuple[str, str], list[float]] = {}
    for r in range(repeat):
        for name in (list(impls) if r % 2 else list(impls)[::-1]):
            use(impls[name])
            t.setdefault((name, "solve"), []).append(_solve(mean, n, n_fc, False))
            t.setdefault((name, "+q"), []).append(_solve(mean, n, n_fc, True,
                                                         t.setdefault((name, "laws"), [])))
            t.setdefault((name, "p95"), []).append(_solve(slo, n, n_fc, True))
            t.setdefault((name, "found"), []).append(_solve(mean, n, n_fc, "found"))
    med = {k: statistics.median(v) for k, v in t.items()}
    rows = []
    for name in impls:
        s = med[name, "solve"]
        rows.append(f"({key}) {name}: solve {1000 * s:.2f} ms, +quantiles "
                    f"{1000 * med[name, '+q']:.2f} ms (x{med[name, '+q'] / s:.2f}), p95 SLO "
                    f"{1000 * med[name, 'p95']:.2f} ms (x{med[name, 'p95'] / s:.2f}), "
                    f"+found laws only x{med[name, 'found'] / s:.2f}; the laws alone "
                    f"{1000 * med[name, 'laws']:.3f} ms")
    first, last = list(impls)
    rows.append(f"({key}) the laws alone, {last} / {first}: "
                f"{med[last, 'laws'] / med[first, 'laws']:.3f}")
    complements = _complements(mean, n_fc, repeat)
    if complements:
        rows.append(f"({key}) {complements}")
    laws = []
    for name in impls:
        use(impls[name])
        m = mean.variant()
        laws.append(m.quantiles_many([m.at(n), m.at(n_fc)]))
    same = all(np.array_equal(a, b) for a, b in zip(*laws))
    apart = max(float(np.abs(a / b - 1.0).max()) for a, b in zip(*laws))
    rows.append(f"({key}) the same quantiles bit for bit: {same} (at most {apart:.1e} of "
                f"each other apart)")
    caps, slo_laws = [], []
    for name in impls:
        use(impls[name])
        m = slo.variant()
        now, fc = m.at(n), m.at(n_fc)
        caps.append(m.mva_capacity())
        slo_laws.append(m.quantiles_many([now, fc]))
    apart = max(float(np.abs(a / b - 1.0).max()) for a, b in zip(*slo_laws))
    rows.append(f"({key}) p95 SLO: capacities {' / '.join(str(c[0]) for c in caps)} "
                f"({' / '.join(impls)}), their quantiles at most {apart:.1e} apart")
    return rows


def _complements(base: md.SystemModel, n: int, repeat: int) -> str | None:
    """What a multi-core tier's found law needs beyond the solve: the throughputs of the
    network without the tier up to ``n - 1`` jobs, for every multi-core tier, by the solve's
    own recursion (:func:`solvers.mva.mva_curve` on each complement) and by this tree's
    Buzen convolution (:mod:`solvers.response_time.arrival`), CPU medians; ``None`` without a
    multi-core tier."""
    from solvers.mva import mva_curve
    from solvers.response_time import arrival
    D, c, Z = base.D, base.servers, base.solver_think
    multi = [m for m in range(D.shape[0]) if np.isfinite(c[m]) and c[m] > 1 and D[m] > 0]
    if not multi:
        return None
    splits = [arrival._split_without(D.tolist(), c.tolist(), m) for m in multi]
    t: dict[str, list[float]] = {"recursion": [], "convolution": []}
    for _ in range(repeat):
        t0 = time.process_time()
        for m in multi:
            mva_curve(np.delete(D, m), n - 1, Z, np.delete(c, m))
        t["recursion"].append(time.process_time() - t0)
        t0 = time.process_time()
        arrival._convolved(splits, Z, n - 1)
        t["convolution"].append(time.process_time() - t0)
    rec, conv = (1e6 * statistics.median(v) for v in t.values())
    return (f"the {len(multi)} multi-core tiers' complements to {n - 1} jobs: by the solve's "
            f"recursion {rec:.0f} us, by the convolution {conv:.0f} us")


def agreement(impls: dict[str, ModuleType], key: str, fractions: list[float]) -> str:
    """The largest relative difference between the trees' quantiles of ``key`` at
    ``fractions`` of its knee (each point's own route: MVA, decomposition, open)."""
    system = SYSTEMS[key]
    base = system.model().variant(slo=None, sla=np.full(len(system.classes), 0.1))
    knee = base.knee()
    worst, routes = 0.0, set()
    for f in fractions:
        n = max(1, int(f * knee))
        laws = []
        for name in impls:
            use(impls[name])
            m = base.variant()
            point = m.at(n)
            routes.add(point.model)
            laws.append(m.quantiles(point))
        worst = max(worst, float(np.abs(laws[0] / laws[1] - 1.0).max()))
    return (f"({key}) at {len(fractions)} populations ({', '.join(sorted(routes))}): at most "
            f"{worst:.1e} of each other apart")


def _cpu_into(f: Callable[..., Any], total: list[float]) -> Callable[..., Any]:
    """``f``, adding the CPU seconds of each call to ``total[0]``."""
    def timed(*args: Any, **kw: Any) -> Any:
        t0 = time.process_time()
        try:
            return f(*args, **kw)
        finally:
            total[0] += time.process_time() - t0
    return timed


def pipeline(impls: dict[str, ModuleType], systems: int, rounds: int) -> list[str]:
    records = workload(systems, 60, seed=1)
    configs = {"default": Config(),
               "always": Config(defaults=replace(SystemConfig(), predict_quantiles="always")),
               "p95 SLO": Config(defaults=replace(SystemConfig(), slo={"*": {"p95": 1.0}}))}
    cpu: dict[tuple[str, str], list[float]] = {}
    solves: dict[tuple[str, str], list[float]] = {}
    original = pipeline_module.solve_systems
    inside, in_laws = [0.0], [0.0]
    laws: dict[tuple[str, str], list[float]] = {}
    pipeline_module.solve_systems = _cpu_into(original, inside)
    try:
        for r in range(rounds):
            for name in (list(impls) if r % 2 else list(impls)[::-1]):
                use(impls[name])                  # the exponential network's laws, timed
                for law_name in NAMES[1:]:
                    setattr(md, law_name, _cpu_into(getattr(md, law_name), in_laws))
                for cname, cfg in configs.items():
                    inside[0] = in_laws[0] = 0.0
                    t0 = time.process_time()
                    run_pipeline(records, cfg)
                    cpu.setdefault((name, cname), []).append(time.process_time() - t0)
                    solves.setdefault((name, cname), []).append(inside[0])
                    laws.setdefault((name, cname), []).append(in_laws[0])
    finally:
        pipeline_module.solve_systems = original
        use(here)
    rows = []
    for name in impls:
        base = statistics.median(cpu[name, "default"])
        base_s = statistics.median(solves[name, "default"])
        rows.append(f"{name}: default {base:.2f} s CPU, " + ", ".join(
            f"{c} x{statistics.median(cpu[name, c]) / base:.2f}" for c in configs if c != "default")
            + f"; re-solves {base_s:.2f} s CPU, " + ", ".join(
            f"{c} x{statistics.median(solves[name, c]) / base_s:.2f}" for c in configs
            if c != "default")
            + f" (paired: {_paired(solves, name)})"
            + f"; always's exponential laws {1000 * statistics.median(laws[name, 'always']):.1f}"
            f" ms CPU")
    first, last = (statistics.median(laws[name, "always"]) for name in impls)
    rows.append(f"always's exponential laws, {' / '.join(list(impls)[::-1])}: {last / first:.3f}")
    return rows


def _paired(solves: dict[tuple[str, str], list[float]], name: str) -> str:
    """``always``'s re-solves over ``default``'s of the same round (run one after the other,
    so both see the same host load), median and range over the rounds: the load's drift
    between rounds, which moves the ratio of the medians, cancels."""
    ratios = [a / d for a, d in zip(solves[name, "always"], solves[name, "default"])]
    return (f"always x{statistics.median(ratios):.2f} median, x{min(ratios):.2f}-"
            f"{max(ratios):.2f} over {len(ratios)} rounds")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", type=Path, help="the other checkout (e.g. a worktree of main)")
    ap.add_argument("--repeat", type=int, default=60, help="one-model runs per tree")
    ap.add_argument("--rounds", type=int, default=3, help="pipeline runs per tree")
    ap.add_argument("--systems", type=int, default=5)
    ap.add_argument("--models", nargs="*", default=["a", "b"], help=f"of {sorted(SYSTEMS)}")
    ap.add_argument("--agree", nargs="*", type=float, default=[], metavar="FRACTION",
                    help="only compare the trees' quantiles of --models at these fractions "
                         "of the knee (no timing)")
    args = ap.parse_args()
    impls = {"other": load_other(args.tree.resolve()), "this": here}
    SEARCHES["this"] = md.SystemModel._quantile_capacity
    SEARCHES["other"] = load_other_search(args.tree.resolve())

    def commit(path: Path) -> str:
        return subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()

    if args.agree:
        for key in args.models:
            print(agreement(impls, key, args.agree))
        return
    print(f"this {commit(Path('.'))} against other {commit(args.tree)}; one model, median of "
          f"{args.repeat}, alternating")
    for key in args.models:
        for row in one_model(impls, key, args.repeat):
            print("  " + row)
    print(f"Pipeline: {args.systems} systems x 3 tiers x 14 classes, median of {args.rounds}, "
          f"CPU time of the run over default's")
    for row in pipeline(impls, args.systems, args.rounds):
        print("  " + row)


if __name__ == "__main__":
    main()
