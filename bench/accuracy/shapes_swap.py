"""Held-out shapes: which estimate a capacity miss is -- the pipeline's last model solved again
with one estimate at a time replaced by its true value.

    python -m bench.accuracy.shapes_swap --half tuning
    python -m bench.accuracy.shapes_swap --only mmpp2-medium-D,pareto-ar-D

Per shape (:mod:`bench.accuracy.shapes`, its truth from ``--truth``, the windows of its seed)
the pipeline runs once as it is; the model of its last solve (the one whose capacity it
reported, kept from :mod:`streams.engine.system`'s capacity searches: :func:`kept_models`) is
solved cold (:func:`streams.predict.model.model_capacity`) as it is and with

* ``demand``: the true per-class demands and class mix (:func:`bench.accuracy.shapes.network`
  at one user; the system's mix), the service processes as the pipeline read them;
* ``process``: the bursty tier's service process (both tiers' for a two-tier shape) the true
  one -- the MMPP itself, or for a correlated heavy-tailed sequence the MAP(2) fitted to its
  true mean, ``I``, p95 and SCV (:func:`bench.accuracy.shapes_cause.true_process`, the best the
  model's family can be given) -- the other tiers as read (exponential where the pipeline
  solved MVA), the demands the pipeline's;
* ``both``: the two together;
* ``split``: every tier's per-class demands in the true ratios, scaled to the model's own
  aggregate at the tier over its mix: the per-class split true, the aggregate as read;
* ``window``: the bursty tier's per-class demands scaled alike so that over the model's mix
  they give the tier's mean service over the windows the pipeline saw (its busy time over its
  completions, :func:`bench.accuracy.shapes_cause.window_mean`): the aggregate the windows
  hold, the per-class split the pipeline's. Nearer the truth than the model as it is where the
  demand's error is the estimator's tracking, not the 30 minutes' sample nor the split;
* ``windows_all``: every tier's per-class demands scaled alike to that tier's own mean over
  the windows (the history rule of Mi et al. (2008) section 4.1, which the model applies to
  bursty tiers on the MAP route, extended to every tier and route): where it beats ``window``
  the miss is a non-bursty tier's tracked aggregate;
* ``true_scv``: the bursty tier's MAP(2) as the model holds it (its mean, ``I`` and p95) refitted
  with the tie going to the true process's SCV (:func:`estimators.mapfit.fit_map2` ``scv=``):
  the curve of marginals the calibration moves along, at the true SCV instead of the tie
  rule's or the calibration's; ``–`` where the model has no MAP(2) there or one class alone
  draws from the bursty process.

The model's cores, think time, delays and SLA stay the pipeline's, so ``both`` differs from
:mod:`bench.accuracy.shapes_cause`'s ``map`` column by what they add. A shape where one class
alone draws from the bursty process (``cls``) has no single tier process: its ``process`` and
``both`` are left out (``–``). The swap whose capacity comes nearest the truth names the
estimate whose error dominates the miss; where no swap brings it within 10% nor ``both`` does,
the miss is the model family's or the solver's (:mod:`bench.accuracy.shapes_cause`). Printed:
per shape each swap's capacity error; per swap capacity within 10% / 20% over the shapes and
per half of the seed-49 split (:func:`bench.accuracy.shapes.halves`). Results:
``bench/results/shapes_swap.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import math
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from bench.accuracy import shapes
from bench.accuracy.shapes_cause import true_process, window_means
from estimators.mapfit import fit_map2
from solvers.processes import MAP
import streams.engine.system as engine_system
from streams.predict.model import SystemModel, model_capacity

RESULTS = shapes.RESULTS.parent / "shapes_swap.json"
SWAPS = ("as_is", "demand", "process", "both", "split", "window", "windows_all", "true_scv")


@contextmanager
def kept_models(calls: list[tuple[SystemModel, int | None]]) -> Iterator[None]:
    """While inside, every capacity search :mod:`streams.engine.system` runs appends its model
    and answer to ``calls``."""
    search = engine_system.model_capacity

    def kept(model: SystemModel, *args: Any, **kwargs: Any) -> Any:
        found = search(model, *args, **kwargs)
        calls.append((model, found[0]))
        return found

    engine_system.model_capacity = kept
    try:
        yield
    finally:
        engine_system.model_capacity = search


def swapped(model: SystemModel, shape: shapes.Shape, swap: str,
            window: float | None = None,
            windows: dict[str, float] | None = None) -> SystemModel | None:
    """``model`` with ``swap``'s estimates replaced by the truth (module docstring); ``None``
    where the swap does not apply (a one-class shape's process, ``window`` without the
    windows' mean service ``window``, seconds, ``windows_all`` without every tier's in
    ``windows``, ``true_scv`` without a MAP(2) at the bursty tier)."""
    if swap not in SWAPS:
        raise ValueError(f"swap: must be one of {', '.join(SWAPS)}, got {swap!r}")
    if swap == "as_is":
        return model.variant()
    if swap == "window":
        if window is None:
            return None
        m = list(model.tiers).index(shape.tier)
        d = np.array(model.D_mc, float)
        d[m] *= window / float(d[m] @ model.mix)
        return model.variant(D_mc=d)
    if swap == "windows_all":
        if windows is None or any(t not in windows for t in model.tiers):
            return None
        d = np.array(model.D_mc, float)
        for m, t in enumerate(model.tiers):
            d[m] *= windows[t] / float(d[m] @ model.mix)
        return model.variant(D_mc=d)
    if swap == "true_scv":
        return _true_scv(model, shape)
    sysm = shapes.SYSTEMS[shape.system]
    tiers = [t[0] for t in sysm.tiers]
    if list(model.tiers) != tiers:
        raise ValueError(f"model tiers {model.tiers} are not the system's {tiers}")
    order = [sysm.classes.index(c) for c in model.classes]
    true_d = np.asarray(shapes.network(shape, 1).demands, float)[:, order]
    changes: dict[str, Any] = {}
    if swap == "split":
        own = np.asarray(model.D_mc, float) @ model.mix
        return model.variant(D_mc=true_d * (own / (true_d @ model.mix))[:, None])
    if swap in ("demand", "both"):
        changes["D_mc"] = true_d
        changes["mix"] = np.array([sysm.mix[i] for i in order], float)
    if swap in ("process", "both"):
        if shape.cls is not None:
            return None
        proc = true_process(shape)[0]
        bursty = (shape.tier, shape.second)
        read = model.processes or [MAP.exponential(1.0)] * len(model.tiers)
        changes["processes"] = [proc if t in bursty else p for t, p in zip(model.tiers, read)]
        changes["scv"] = None
    return model.variant(**changes)


def _true_scv(model: SystemModel, shape: shapes.Shape) -> SystemModel | None:
    """``true_scv`` (module docstring): each bursty tier's MAP(2) refitted to its own mean,
    ``I`` and p95 with the tie at the true process's SCV."""
    if not model.processes or shape.cls is not None:
        return None
    bursty = [t for t in (shape.tier, shape.second) if t is not None]
    procs = list(model.processes)
    scv = true_process(shape)[2]
    for t in bursty:
        m = list(model.tiers).index(t)
        if procs[m].order < 2:
            return None
        p = procs[m]
        procs[m] = fit_map2(p.mean, p.idc, p.quantile(0.95), scv=scv).process
    return model.variant(processes=procs, scv=None)


def run(name: str, minutes: float, truth: dict[str, Any]) -> dict[str, Any]:
    """One shape: the pipeline as it is, then its last solve's model under each swap."""
    shape = next(s for s in shapes.SHAPES if s.name == name)
    t0 = time.perf_counter()
    calls: list[tuple[SystemModel, int | None]] = []
    with kept_models(calls):
        r = shapes.run_shape(shape, minutes, 0, truth)
    last = (r.get("solves") or [{}])[-1]
    reported = last.get("capacity")
    model = next((m for m, found in reversed(calls) if found == reported), None)
    cap = float(r["capacity_truth"])
    out: dict[str, Any] = {"shape": name, "capacity_truth": cap, "reported": reported,
                           "route": last.get("model"), "capacity_error": last.get(
                               "capacity_error"), "swaps": {}}
    if model is not None and reported is not None:
        windows = window_means(shape, int(r["users"]), minutes)
        window = windows[shape.tier]
        m = list(model.tiers).index(shape.tier)
        out["demand_error"] = float(model.D_mc[m] @ model.mix) / float(r["demand_true"]) - 1.0
        out["window_mean_error"] = window / float(r["demand_true"]) - 1.0
        for swap in SWAPS:
            variant = swapped(model, shape, swap, window, windows)
            found = None if variant is None else model_capacity(variant)[0]
            out["swaps"][swap] = {"capacity": found,
                                  "error": None if found is None else found / cap - 1.0}
    out["seconds"] = time.perf_counter() - t0
    return out


def dominant(row: dict[str, Any]) -> str | None:
    """The single swap (``demand`` or ``process``) whose capacity comes nearest the truth,
    if it is nearer than the model as it is; ``None`` otherwise."""
    errs = {k: abs(v["error"]) for k, v in row["swaps"].items() if v["error"] is not None}
    if "as_is" not in errs:
        return None
    best = min((k for k in ("demand", "process") if k in errs), key=errs.get, default=None)
    return best if best is not None and errs[best] < errs["as_is"] else None


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per swap: shapes solved and capacity within 10% / 20%."""
    out = {}
    for swap in SWAPS:
        errs = [abs(r["swaps"][swap]["error"]) for r in rows
                if (r["swaps"].get(swap) or {}).get("error") is not None]
        out[swap] = {"shapes": len(errs), "capacity_within_10": sum(e <= 0.1 for e in errs),
                     "capacity_within_20": sum(e <= 0.2 for e in errs)}
    return out


def _relative(path: str) -> str:
    """``path`` from the repository root where it lies inside it (results carry no machine's
    directories)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    full = os.path.abspath(path)
    return os.path.relpath(full, root) if full.startswith(root + os.sep) else path


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated shape names")
    ap.add_argument("--half", choices=("tuning", "heldout"), default=None)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--truth", default=str(shapes.RESULTS), metavar="FILE",
                    help="the shapes bench's results JSON (each shape's truth)")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    truths = {r["shape"]: r for r in json.loads(Path(args.truth).read_text())["shapes"]}
    names = args.only.split(",") if args.only else [s.name for s in shapes.SHAPES]
    if args.half:
        names = [n for n in names if n in shapes.halves()[args.half == "heldout"]]
    unknown = [n for n in names if n not in truths]
    if unknown:
        raise SystemExit(f"--only: not in {args.truth}: {', '.join(unknown)}")
    rows = []

    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:+.0f}%"

    print("| shape | truth | route | pipeline | as is | demand | process | both | split | window "
          "| windows, all tiers | true SCV | dominant |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in names:
        if not math.isfinite(float(truths[n]["capacity_truth"])):
            continue
        row = run(n, args.minutes, truths[n])
        rows.append(row)
        sw = row["swaps"]
        print(f"| {n} | {row['capacity_truth']:.0f} | {row['route']} | "
              f"{pct(row['capacity_error'])} | "
              + " | ".join(pct((sw.get(k) or {}).get("error")) for k in SWAPS)
              + f" | {dominant(row) or '–'} |", flush=True)
        print(f"  {n}: {row['seconds']:.0f} s", file=sys.stderr, flush=True)
    doc = {"commit": shapes._commit(), "minutes": args.minutes, "truth_from": _relative(args.truth),
           "summary": summary(rows),
           "halves": {h: summary([r for r in rows if r["shape"] in m])
                      for h, m in zip(("tuning", "heldout"), shapes.halves())},
           "shapes": rows}
    print(f"\n{json.dumps(doc['summary'])}\n{json.dumps(doc['halves'])}")
    Path(args.out).write_text(json.dumps(doc, indent=1, default=float) + "\n")
    return doc


if __name__ == "__main__":
    main()
