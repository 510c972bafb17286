"""Held-out shapes: how much of the capacity error is the index of dispersion's read? The
pipeline on the same windows with the bursty tier's ``I`` read as it is, and with the read
replaced by the true ``I``.

    python -m bench.accuracy.shapes_idc                       # every shape, three modes
    python -m bench.accuracy.shapes_idc --half tuning --modes read,narrow
    python -m bench.accuracy.shapes_idc --only mmpp2-medium-D,mmpp2-medium-C-app

Per shape (:mod:`bench.accuracy.shapes`, its truth from ``--truth``, the windows of its seed)
the pipeline runs once per mode:

* ``read``: as it is (the IDC-curve fit, :func:`estimators.dispersion.index_of_dispersion_interval`);
* ``centred``: the fit's result with ``I`` set to the true one and its interval moved with it
  (``lower`` and ``upper`` times ``I_true / I_read``): an unbiased read of today's precision;
* ``narrow``: the true ``I`` with the interval ``I_true x [0.9, 1.1]``: a read far more
  precise than 30 minutes of windows give.

The replacement acts on the shape's bursty tier(s) only (the other tiers keep their read). The
true ``I`` is the MMPP's closed form (``MAP.idc``) or, for a correlated heavy-tailed sequence,
its Hermite expansion (:func:`bench.accuracy.shapes_cause.copula_idc`); a shape where one class
alone draws from the bursty process has no single tier ``I`` and runs every mode as ``read``.

Everything else -- demands, p95, the MAP(2) fit, the calibration of ``I`` to the measured
response time within the interval (``bursty_scv = "response_idc"``) -- is the pipeline's own.
Printed per mode: capacity within 10% / 20% (last solve) over all shapes and per half of the
seed-49 split (:func:`bench.accuracy.shapes.halves`), trusted solves more than 20% off on R or
capacity, and of the shapes whose bursty tier was calibrated, how many took ``I``'s lower end
and how many had the model's residence time at the tier above the measured one even there (the
MAP(2) fitted to the mean, ``I`` and p95 with the tie rule's SCV, at the last solve's operating
point: the search's range as :func:`streams.predict.calibration.calibrate_idc` sets it); per
shape the read and calibrated ``I`` and the capacity error in each mode. 827 s for the 43 shapes'
three modes (measured, ``--jobs 1``, on a shared machine). Results:
``bench/results/shapes_idc.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import dataclasses
import json
import math
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from bench.accuracy import shapes
from bench.accuracy.shapes_cause import copula_idc
from estimators.dispersion import DispersionInterval
from estimators.mapfit import fit_map2
from solvers.processes import MAP
import streams.core.tier as tier_module
import streams.predict.calibration as calibration

MODES = ("read", "centred", "narrow")
#: ``narrow``: the interval's half-width, relative to the true ``I``
NARROW = 0.1
RESULTS = shapes.RESULTS.parent / "shapes_idc.json"
_CALIBRATED = re.compile(r"MAP\(2\) I ([0-9.e+-]+) from")


def true_idc(shape: shapes.Shape) -> float | None:
    """The bursty tier's true ``I`` (module docstring); ``None`` for a one-class shape."""
    if shape.cls is not None:
        return None
    proc = shapes.PROCESSES[shape.process]
    return float(proc.idc) if isinstance(proc, MAP) else copula_idc(proc)


def replaced(est: DispersionInterval, idc: float, mode: str) -> DispersionInterval:
    """``est`` with ``I`` set to ``idc`` as ``mode`` says (module docstring); an estimate
    without busy time or completions is left as it is."""
    if mode == "read" or est.reason in ("no_busy_time", "no_completions"):
        return est
    if mode == "narrow":
        return dataclasses.replace(est, value=idc, lower=(1.0 - NARROW) * idc,
                                   upper=(1.0 + NARROW) * idc, reason="ok")
    if mode != "centred":
        raise ValueError(f"mode: must be one of {MODES}, got {mode!r}")
    if not est.value > 0.0:
        return dataclasses.replace(est, value=idc)
    f = idc / est.value
    return dataclasses.replace(est, value=idc, lower=est.lower * f, upper=est.upper * f)


@contextmanager
def per_tier(name: str, wrap: Callable[[Any, list[str]], Any]) -> Iterator[None]:
    """While inside, :mod:`streams.core.tier`'s function ``name`` is ``wrap(original,
    current)``, ``current[-1]`` naming the tier whose refresh calls it (the tier's refresh is
    wrapped to push its name)."""
    original, refresh = getattr(tier_module, name), tier_module.TierState.refresh
    current: list[str] = []

    def named_refresh(self: Any, *args: Any, **kwargs: Any) -> Any:
        current.append(self.tier)
        try:
            return refresh(self, *args, **kwargs)
        finally:
            current.pop()

    setattr(tier_module, name, wrap(original, current))
    tier_module.TierState.refresh = named_refresh
    try:
        yield
    finally:
        setattr(tier_module, name, original)
        tier_module.TierState.refresh = refresh


@contextmanager
def oracle(tiers: tuple[str, ...], idc: float | None, mode: str) -> Iterator[None]:
    """While inside, the pipeline's tiers named in ``tiers`` read ``I`` as ``mode`` says
    (:func:`per_tier`)."""
    if idc is None or mode == "read":
        yield
        return

    def wrap(estimate: Any, current: list[str]) -> Any:
        def interval(*args: Any, **kwargs: Any) -> DispersionInterval:
            est = estimate(*args, **kwargs)
            return replaced(est, idc, mode) if current and current[-1] in tiers else est
        return interval

    with per_tier("index_of_dispersion_interval", wrap):
        yield


@contextmanager
def searches(calls: dict[str, tuple[Any, ...]]) -> Iterator[None]:
    """While inside, each ``I`` calibration's arguments are kept in ``calls`` by tier name (the
    last one per tier)."""
    calibrate = calibration.calibrate_idc

    def kept(model: Any, m: int, *args: Any, **kwargs: Any) -> Any:
        calls[model.tiers[m]] = (model, m, *args)
        return calibrate(model, m, *args, **kwargs)

    calibration.calibrate_idc = kept
    try:
        yield
    finally:
        calibration.calibrate_idc = calibrate


def search_ends(model: Any, m: int, inputs: tuple[float, float, float], users: Any,
                measured: float, bounds: tuple[float | None, float | None], *_: Any
                ) -> dict[str, float]:
    """The calibration's range of ``I`` (``bounds`` narrowed to ``IDC_REACH`` times the read,
    as :func:`streams.predict.calibration.calibrate_idc` narrows it) and the model's residence
    time at the tier with the MAP(2) fitted at its low end, the read and its high end, beside
    the measured one (seconds)."""
    mean, idc, p95 = inputs
    low = max(bounds[0] if bounds[0] is not None and bounds[0] > 0 else 0.0,
              idc / calibration.IDC_REACH)
    high = bounds[1] if bounds[1] is not None and math.isfinite(bounds[1]) else math.inf
    high = min(high, idc * calibration.IDC_REACH)
    out = {"measured": measured, "low": low, "read": idc, "high": high}
    for key, value in (("low", low), ("read", idc), ("high", high)):
        process = fit_map2(mean, value, p95).process
        out[f"r_{key}"] = calibration._residence(model, m, process, users)
    return out


def run(name: str, mode: str, minutes: float, truth: dict[str, Any]) -> dict[str, Any]:
    """One shape in one mode: :func:`bench.accuracy.shapes.run_shape` inside :func:`oracle`;
    the last solve's figures."""
    shape = next(s for s in shapes.SHAPES if s.name == name)
    idc = true_idc(shape)
    tiers = tuple(t for t in (shape.tier, shape.second) if t)
    t0 = time.perf_counter()
    calls: dict[str, tuple[Any, ...]] = {}
    with oracle(tiers, idc, mode), searches(calls):
        r = shapes.run_shape(shape, minutes, 0, truth)
        search = search_ends(*calls[shape.tier]) if shape.tier in calls else None
    solves = r.get("solves") or []
    last = solves[-1] if solves else {}
    flag = next((f for f in last.get("calibration") or [] if f.startswith(f"{shape.tier}:")),
                "")
    calibrated = _CALIBRATED.search(flag)

    def off(s: dict[str, Any], key: str) -> bool:
        return s[key] is not None and abs(s[key]) > 0.2

    return {"shape": name, "mode": mode, "idc_true": idc, "applied": idc is not None,
            "idc": last.get("idc"), "idc_lower": last.get("idc_lower"),
            "idc_upper": last.get("idc_upper"),
            "idc_calibrated": float(calibrated.group(1)) if calibrated else None,
            "search": search,
            "capacity": last.get("capacity"), "capacity_error": last.get("capacity_error"),
            "R_error": last.get("R_error"), "trusted": last.get("trusted"),
            "solves": len(solves),
            "solves_R_off_20_trusted": sum(bool(s["trusted"]) and off(s, "R_error")
                                           for s in solves),
            "solves_capacity_off_20_trusted": sum(bool(s["trusted"]) and off(s, "capacity_error")
                                                  for s in solves),
            "seconds": time.perf_counter() - t0}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Capacity within 10% / 20% (last solve), trusted solves > 20% off and the calibrations'
    ends (module docstring), over ``rows``."""
    caps = [abs(r["capacity_error"]) for r in rows if r["capacity_error"] is not None]
    calibrated = [r for r in rows if r["idc_calibrated"] is not None and r["search"]]
    return {"shapes": len(rows), "capacity_within_10": sum(e <= 0.1 for e in caps),
            "capacity_within_20": sum(e <= 0.2 for e in caps),
            "calibrated": len(calibrated),
            "calibrated_at_lower_end": sum(
                abs(r["idc_calibrated"] / r["search"]["low"] - 1.0) < 0.01 for r in calibrated),
            "model_above_measured_at_lower_end": sum(
                r["search"]["r_low"] >= r["search"]["measured"] for r in calibrated),
            "solves": sum(r["solves"] for r in rows),
            "solves_R_off_20_trusted": sum(r["solves_R_off_20_trusted"] for r in rows),
            "solves_capacity_off_20_trusted": sum(r["solves_capacity_off_20_trusted"]
                                                  for r in rows)}


def _num(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "–"
    if pct:
        return f"{100 * x:+.0f}%"
    return "inf" if not math.isfinite(x) else f"{x:.0f}"


def table(rows: list[dict[str, Any]], modes: list[str]) -> list[str]:
    """Per shape: its half, the true ``I``, the read ``I`` [interval], and per mode the
    calibrated ``I`` and the capacity error (last solve)."""
    tuning = set(shapes.halves()[0])
    by = {(r["shape"], r["mode"]): r for r in rows}
    names = [s.name for s in shapes.SHAPES if any(k[0] == s.name for k in by)]
    head = " | ".join(f"{m}: I calibrated, capacity" for m in modes)
    lines = [f"| shape | half | true I | I read [interval] | {head} |",
             "|---|---|---:|---|" + "---|" * len(modes)]
    for n in names:
        base = by.get((n, modes[0]), {})
        cells = [f"{_num(by[(n, m)]['idc_calibrated'])}, "
                 f"{_num(by[(n, m)]['capacity_error'], True)}" if (n, m) in by else "–"
                 for m in modes]
        lines.append(f"| {n} | {'tuning' if n in tuning else 'held out'} | "
                     f"{_num(base.get('idc_true'))} | {_num(base.get('idc'))} "
                     f"[{_num(base.get('idc_lower'))}, {_num(base.get('idc_upper'))}] | "
                     + " | ".join(cells) + " |")
    return lines


def chosen(only: str | None, half: str | None) -> list[str]:
    """The shapes ``--only`` names (comma-separated; every shape without it), in that order,
    kept to ``--half``'s (:func:`bench.accuracy.shapes.halves`)."""
    names = [s.name for s in shapes.SHAPES]
    picked = only.split(",") if only else names
    for n in picked:
        if n not in names:
            raise SystemExit(f"--only: unknown shape {n!r}")
    if half:
        picked = [n for n in picked if n in shapes.halves()[half == "heldout"]]
    return picked


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated shape names")
    ap.add_argument("--half", choices=("tuning", "heldout"), default=None)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {MODES}")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--truth", default=str(shapes.RESULTS), metavar="FILE",
                    help="the shapes' truth (a bench.accuracy.shapes results JSON)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"--modes: unknown mode {m!r} (of {MODES})")
    only = chosen(args.only, args.half)
    truths = {r["shape"]: r for r in json.loads(Path(args.truth).read_text())["shapes"]}
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []

    def document() -> dict[str, Any]:
        out: dict[str, Any] = {"commit": shapes._commit(), "minutes": args.minutes,
                               "truth_from": args.truth, "modes": modes, "summary": {}}
        for m in modes:
            mine = [r for r in rows if r["mode"] == m]
            out["summary"][m] = {"all": summary(mine), **{
                h: summary([r for r in mine if r["shape"] in members])
                for h, members in zip(("tuning", "heldout"), shapes.halves())}}
        out["rows"] = sorted(rows, key=lambda r: (only.index(r["shape"]), modes.index(r["mode"])))
        return out

    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = [pool.submit(run, n, m, args.minutes, truths[n]) for n in only for m in modes]
        for done in as_completed(futures):
            rows.append(done.result())
            r = rows[-1]
            print(f"  {len(rows)}/{len(futures)} {r['shape']} {r['mode']}: I "
                  f"{_num(r['idc'])} (calibrated {_num(r['idc_calibrated'])}), capacity "
                  f"{_num(r['capacity_error'], True)} ({r['seconds']:.0f} s)", file=sys.stderr,
                  flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps(document(), default=float) + "\n")
    doc = document()
    print("\n".join(table(doc["rows"], modes)))
    for m in modes:
        print(f"{m}: {json.dumps(doc['summary'][m])}")
    print(f"({time.perf_counter() - t0:.0f} s wall)")
    return doc


if __name__ == "__main__":
    main()
