"""Held-out shapes: the bursty tier's fitted MAP(2) marginal against the shape's true
service-time distribution, and what the model's residence time at the operating point and its
capacity do with each marginal.

    python -m bench.accuracy.shapes_marginal --half tuning
    python -m bench.accuracy.shapes_marginal --only mmpp2-medium-D,mmpp2-medium-C-app

Per shape (:mod:`bench.accuracy.shapes`, its truth from ``--truth``, the windows of its seed)
the pipeline runs once as it is; at its last solve the bursty tier's ``I`` calibration
(:func:`streams.predict.calibration.calibrate_idc`) and the windows' two-phase tail
(:func:`estimators.tail.service_tail_p95`: fast mean ``a``, slow mean ``b``, slow share ``p``)
are kept. Printed per shape, relative to the mean service time: the true marginal's SCV, p95
and p99 (the unit process of :data:`bench.accuracy.shapes.PROCESSES`; the tier mixes it over
its classes' multipliers, and a one-class shape's with exponential classes, marked ``class``),
the windows' read (p95 and the
deconvolved two-phase marginal's SCV ``2 (p b^2 + (1 - p) a^2) / m^2 - 1``), and per MAP(2):

* ``tie``: fitted to the read mean, ``I`` and p95, the tie rule's SCV (largest ``rho1``);
* ``cal``: the pipeline's calibration (``I`` within its interval, then the SCV along the curve);
* ``two``: the read mean, ``I`` and p95 with the SCV nearest the two-phase marginal's;
* ``two-cal``: the calibration with that SCV in place of the tie rule's;
* ``true``: the read mean with the true ``I`` (MMPPs; else the read), the true p95 relative
  to the mean and the SCV nearest the true one,

its ``I``, SCV, p95, p99, the model's residence time at the tier at the operating point against
the measured one, and the model's capacity (:func:`streams.predict.model.model_capacity`, cold,
on the model of the last solve) against the truth; then per MAP(2) over the calibrated shapes:
capacity within 10% / 20% and the median ``|R|`` error. 47-123 s for the tuning half (measured,
three runs on a shared machine; 15 of its 22 shapes calibrated). Results: ``bench/results/shapes_marginal.json``.
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
from bench.accuracy.shapes_idc import chosen, per_tier, searches
from estimators.mapfit import fit_map2
from estimators.tail import ServiceTail
from solvers.processes import MAP
import streams.predict.calibration as calibration
from streams.predict.model import model_capacity

RESULTS = shapes.RESULTS.parent / "shapes_marginal.json"


@contextmanager
def tails(kept: dict[str, ServiceTail]) -> Iterator[None]:
    """While inside, each tier's last two-phase tail estimate is kept in ``kept`` by tier."""
    def wrap(estimate: Any, current: list[str]) -> Any:
        def tail(*args: Any, **kwargs: Any) -> ServiceTail:
            out = estimate(*args, **kwargs)
            if current:
                kept[current[-1]] = out
            return out
        return tail

    with per_tier("service_tail_p95", wrap):
        yield


def two_phase_scv(t: ServiceTail) -> float | None:
    """The SCV of the windows' two-phase marginal (module docstring)."""
    if t.mean is None or t.fast_mean is None or t.slow_mean is None or t.slow_share is None:
        return None
    p, a, b, m = t.slow_share, t.fast_mean, t.slow_mean, t.mean
    return 2.0 * (p * b * b + (1.0 - p) * a * a) / (m * m) - 1.0


def true_marginal(shape: shapes.Shape) -> dict[str, float]:
    """SCV, p95 and p99 of the shape's unit-mean service process."""
    proc = shapes.PROCESSES[shape.process]
    if isinstance(proc, MAP):
        q95, q99 = proc.quantile(0.95), proc.quantile(0.99)
    else:
        q95, q99 = (float(x) for x in proc.quantile(np.array([0.95, 0.99])))
    return {"scv": float(proc.scv), "p95": float(q95) / proc.mean, "p99": float(q99) / proc.mean,
            "idc": float(proc.idc) if isinstance(proc, MAP) else None}


def describe(name: str, process: MAP, model: Any, m: int, users: Any, measured: float,
             truth_cap: float) -> dict[str, Any]:
    """One MAP(2) at the tier: its marginal (relative to its mean), the model's residence at
    the operating point and its capacity."""
    mean = float(process.mean)
    variant = calibration._with_process(model, m, process)
    cap, _ = model_capacity(variant)
    r = calibration._residence(model, m, process, users)
    return {"name": name, "idc": float(process.idc), "scv": float(process.scv),
            "p95": float(process.quantile(0.95)) / mean,
            "p99": float(process.quantile(0.99)) / mean,
            "R_error": r / measured - 1.0, "capacity": cap,
            "capacity_error": None if cap is None else cap / truth_cap - 1.0}


@contextmanager
def hinted(scv: float) -> Iterator[None]:
    """While inside, the calibration's fits take the SCV nearest ``scv`` instead of the tie
    rule's (``fit_map2(..., scv=...)``)."""
    fit = calibration.fit_map2

    def with_hint(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("scv", scv)
        return fit(*args, **kwargs)

    calibration.fit_map2 = with_hint
    try:
        yield
    finally:
        calibration.fit_map2 = fit


def run(name: str, minutes: float, truth: dict[str, Any]) -> dict[str, Any]:
    """One shape (module docstring): the pipeline on ``minutes`` of its windows with
    ``truth`` (its row of a :mod:`bench.accuracy.shapes` results JSON); the true marginal,
    the windows' read and, where the bursty tier was calibrated, a row per MAP(2)."""
    shape = next(s for s in shapes.SHAPES if s.name == name)
    t0 = time.perf_counter()
    calls: dict[str, tuple[Any, ...]] = {}
    kept: dict[str, ServiceTail] = {}
    with searches(calls), tails(kept):
        r = shapes.run_shape(shape, minutes, 0, truth)
    last = (r.get("solves") or [{}])[-1]
    out: dict[str, Any] = {"shape": name, "class": shape.cls is not None,
                           "true": true_marginal(shape), "capacity_truth": r["capacity_truth"],
                           "capacity_error": last.get("capacity_error"), "rows": []}
    tail = kept.get(shape.tier)
    if tail is not None and tail.mean:
        out["read"] = {"p95": (tail.p95 or math.nan) / tail.mean, "scv2": two_phase_scv(tail),
                       "a": tail.fast_mean / tail.mean, "b": tail.slow_mean / tail.mean,
                       "p": tail.slow_share}
    if shape.tier not in calls:
        out["seconds"] = time.perf_counter() - t0
        return out
    model, m, inputs, users, measured, bounds = calls[shape.tier][:6]
    mean, idc, p95 = inputs
    cap = r["capacity_truth"]
    tru = out["true"]
    procs = [("tie", fit_map2(mean, idc, p95).process),
             ("cal", calibration.calibrate_idc(model, m, inputs, users, measured,
                                               bounds).process)]
    scv2 = out.get("read", {}).get("scv2")
    if scv2 and scv2 > 0:
        procs.append(("two", fit_map2(mean, idc, p95, scv=scv2).process))
        with hinted(scv2):
            procs.append(("two-cal", calibration.calibrate_idc(model, m, inputs, users,
                                                               measured, bounds).process))
    procs.append(("true", fit_map2(mean, tru["idc"] or idc, tru["p95"] * mean,
                                   scv=tru["scv"]).process))
    out["measured"] = measured
    out["users"] = str(users)
    out["inputs"] = list(inputs)
    out["rows"] = [describe(n, p, model, m, users, measured, cap) for n, p in procs]
    out["seconds"] = time.perf_counter() - t0
    return out


def _f(x: Any, fmt: str = "{:.2g}") -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def lines(res: dict[str, Any]) -> list[str]:
    t, rd = res["true"], res.get("read", {})
    head = (f"{res['shape']}{' (class)' if res['class'] else ''}: true SCV {_f(t['scv'])} "
            f"p95 {_f(t['p95'])} p99 {_f(t['p99'])} I {_f(t['idc'], '{:.0f}')}; read p95 "
            f"{_f(rd.get('p95'))} two-phase SCV {_f(rd.get('scv2'))} (a {_f(rd.get('a'))}, "
            f"b {_f(rd.get('b'))}, p {_f(rd.get('p'))}); pipeline capacity "
            f"{_f(res['capacity_error'], '{:+.0%}')}")
    out = [head]
    for row in res["rows"]:
        out.append(f"    {row['name']:8s} I {row['idc']:7.1f} SCV {row['scv']:6.2f} p95 "
                   f"{row['p95']:5.2f} p99 {row['p99']:6.2f}  R {row['R_error']:+6.1%}  "
                   f"capacity {row['capacity']} ({_f(row['capacity_error'], '{:+.0%}')})")
    return out


def summary(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per MAP(2) (``tie``, ``cal``, ...) over the shapes that have it: how many, capacity
    within 10% / 20%, the median ``|R|`` error at the operating point."""
    by: dict[str, list[dict[str, Any]]] = {}
    for res in results:
        for row in res["rows"]:
            by.setdefault(row["name"], []).append(row)
    out = {}
    for name, rows in by.items():
        caps = [abs(r["capacity_error"]) for r in rows if r["capacity_error"] is not None]
        out[name] = {"shapes": len(rows), "capacity_within_10": sum(e <= 0.1 for e in caps),
                     "capacity_within_20": sum(e <= 0.2 for e in caps),
                     "median_abs_R_error": float(np.median([abs(r["R_error"]) for r in rows]))}
    return out


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated shape names")
    ap.add_argument("--half", choices=("tuning", "heldout"), default=None)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--truth", default=str(shapes.RESULTS), metavar="FILE")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    only = chosen(args.only, args.half)
    truths = {r["shape"]: r for r in json.loads(Path(args.truth).read_text())["shapes"]}
    t0 = time.perf_counter()
    results = []
    for n in only:
        results.append(run(n, args.minutes, truths[n]))
        print("\n".join(lines(results[-1])), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps({"commit": shapes._commit(),
                                                  "summary": summary(results),
                                                  "shapes": results}, default=float) + "\n")
    for name, row in summary(results).items():
        print(f"{name}: {json.dumps(row)}")
    print(f"({time.perf_counter() - t0:.0f} s wall)", file=sys.stderr)
    return results


if __name__ == "__main__":
    main()
