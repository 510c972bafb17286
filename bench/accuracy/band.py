"""Calibration of the uncertainty band: how often the simulated true capacity falls inside
``[capacity_users_lower, capacity_users_upper]``, and the true time to breach inside
``[time_to_breach_lower_s, time_to_breach_upper_s]`` (``streams/predict/confidence.py``).

Run from the repository root::

    python -m bench.accuracy.band            # 2 kinds x 4 seeds (8 runs of 45 simulated min)
    python -m bench.accuracy.band --quick    # one seed per kind

Systems: ``bench/accuracy/alert_shapes.py``'s three-tier shop (web 4 cores 8 ms, app 4 cores
10 ms, db 8 cores 16 ms; think time 1 s; browse 80% / buy 20%; SLA 0.1 s), ``bursty`` (the db's
service is Mi et al.'s (2008) MAP(2), I ~ 200) and ``non_bursty`` (exponential db), simulated by
:mod:`solvers.simulation.physical`, monitored in 5-s windows, seeds 0-3. **Truth**: the
population whose worst class's long-run simulated mean response time crosses the SLA
(``alert_shapes.CAPACITY``: bursty 214, non-bursty 420; docs/accuracy.md section 10, from
:mod:`solvers.simulation` grids). Load: 20 minutes at 50% of the truth, then one user at a time
to 110% over 20 minutes, then 5 minutes there -- so bands at rest and at risk both appear.
The pipeline is configured as a new user would (tiers and SLA).

The pipeline computes the band at risk and on every 5th solve (``confidence.BAND_EVERY``);
here it is computed at every solve (``BAND_EVERY = 1``: more samples; the band's value at a
solve does not depend on whether earlier solves had one). Each band is computed at both
``z`` of :data:`ZS` -- the demands pushed 1 standard error (the band before the
calibration) and 1.645 (a nominal 90% demand interval, ``confidence.BAND_Z`` now) -- on the
very same model and tier estimates, so both are compared on identical solves.

The true time to breach at solve ``t`` is ``t* - t``, ``t*`` the first time the simulated
users exceed the truth capacity (in the ramp); it is scored at solves before ``t*`` with both
ends of the band defined.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import shlex
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from bench.accuracy.alert_shapes import (CAPACITY, START, WARMUP_S, WINDOW_S, Shape,
                                config, network)
from solvers.simulation.physical import monitor_physical
from streams.cli.embedded import run_embedded
from streams.predict import confidence

SHAPE = Shape("band", 0.5, 1.1, 1200.0, 1200.0, 300.0)
KINDS = ("bursty", "non_bursty")
#: the band at +-1 s.e. (before) and at the pipeline's BAND_Z (nominal 90%)
ZS = (1.0, 1.645)


def _crossing(users: int, sched: list[tuple[float, int]], truth: float) -> float | None:
    """Seconds from the start of monitoring at which the users first exceed ``truth``."""
    if users > truth:
        return 0.0
    return next((t for t, n in sched if n > truth), None)


def run_one(task: tuple[str, int]) -> dict[str, Any]:
    """One seeded run: per solve with a band, the capacity, the band at each z and the true
    time to breach."""
    kind, seed = task
    truth = CAPACITY[kind]
    users, sched, duration = SHAPE.schedule(truth)
    t0 = time.perf_counter()
    recs = monitor_physical(network(kind, users), duration, WINDOW_S,
                            schedule=[(t + WARMUP_S, n) for t, n in sched], warmup=WARMUP_S,
                            system="shop", start_time=START - WARMUP_S, seed=seed)
    cross = _crossing(users, sched, truth)
    extra: list[dict[float, dict[str, Any]]] = []
    nominal = confidence.band

    def band(model, tiers, capacity, n_now, slope, tolerance=confidence.BAND_TOLERANCE,
             z=confidence.BAND_Z):
        out = nominal(model, tiers, capacity, n_now, slope, tolerance, z)
        extra.append({zz: (out if zz == z else nominal(model, tiers, capacity, n_now, slope,
                                                        tolerance, zz)) for zz in ZS})
        return out

    confidence.band, every = band, confidence.BAND_EVERY
    confidence.BAND_EVERY = 1
    solves: list[dict[str, Any]] = []

    def watch(outputs: Any, _pipeline: Any) -> None:
        for p in outputs.predictions:
            if p.get("model") and p.get("capacity_users_lower") is not None:
                bands = extra.pop(0)
                t = float(p["time"]) - START
                solves.append({"t": t, "model": p["model"], "capacity": p["capacity_users"],
                               "users": p["users"],
                               "true_ttb": None if cross is None or t >= cross else cross - t,
                               "bands": bands})
    try:
        with tempfile.TemporaryDirectory() as d:
            run_embedded(recs, config(), d, on_outputs=watch)
    finally:
        confidence.band, confidence.BAND_EVERY = nominal, every
    return {"kind": kind, "seed": seed, "truth": truth, "solves": solves,
            "seconds": time.perf_counter() - t0}


def _family(model: str) -> str:
    return "MVA" if model == "mva" else "MAP"


def _row(label: str, rows: list[dict[str, Any]], truth: float, z: float) -> str:
    if not rows:
        return f"| {label} | {z:g} | 0 | | | | | | |"
    lo = np.array([r["bands"][z]["capacity_users_lower"] for r in rows], dtype=float)
    hi = np.array([r["bands"][z]["capacity_users_upper"] for r in rows], dtype=float)
    cap = np.array([r["capacity"] for r in rows], dtype=float)
    inside = (lo <= truth) & (truth <= hi)
    below = truth < lo
    width = (hi - lo) / truth
    err = (cap - truth) / truth
    ttb = [(r["true_ttb"], r["bands"][z].get("time_to_breach_lower_s"),
            r["bands"][z].get("time_to_breach_upper_s")) for r in rows]
    ttb = [(x, a, b) for x, a, b in ttb if x is not None and a is not None and b is not None]
    ttb_in = sum(a <= x <= b for x, a, b in ttb)
    return (f"| {label} | {z:g} | {len(rows)} | **{inside.mean():.0%}** ({inside.sum()}) | "
            f"{below.mean():.0%} / {(truth > hi).mean():.0%} | {np.median(width):.0%} | "
            f"{np.median(np.abs(err)):.1%} | "
            f"{np.mean(np.abs(err) <= np.maximum(cap - lo, hi - cap) / truth):.0%} | "
            + (f"{ttb_in / len(ttb):.0%} ({ttb_in}/{len(ttb)}) |" if ttb else "– |"))


def report(results: list[dict[str, Any]]) -> list[str]:
    lines = ["| kind / model | z | solves with a band | truth inside the band | truth below "
             "lower / above upper | median width (of truth) | median \\|capacity - truth\\| | "
             "\\|error\\| within the band's half-width | true time to breach inside |",
             "|---|---|---|---|---|---|---|---|---|"]
    for kind in KINDS:
        runs = [r for r in results if r["kind"] == kind]
        if not runs:
            continue
        truth = runs[0]["truth"]
        rows = [s for r in runs for s in r["solves"]]
        for z in ZS:
            lines.append(_row(f"{kind} / all", rows, truth, z))
            families = sorted({_family(s["model"]) for s in rows})
            if len(families) > 1:
                for fam in families:
                    lines.append(_row(f"{kind} / {fam}", [s for s in rows
                                                         if _family(s["model"]) == fam],
                                      truth, z))
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one seed per kind")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    seeds = 1 if args.quick else args.seeds
    tasks = [(k, s) for k in KINDS for s in range(seeds)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_one, tasks))
    print(f"python -m bench.accuracy.band {shlex.join(argv or sys.argv[1:])}")
    print(f"{len(tasks)} runs ({', '.join(KINDS)} x seeds 0-{seeds - 1}), "
          f"{time.perf_counter() - t0:.0f} s wall, "
          f"{sum(r['seconds'] for r in results):.0f} s in the runs\n")
    for line in report(results):
        print(line)
    print()
    for r in results:
        s = r["solves"]
        fams = [_family(x["model"]) for x in s]
        first_map = next((x["t"] / 60 for x in s if _family(x["model"]) == "MAP"), None)
        print(f"{r['kind']} seed {r['seed']}: {len(s)} bands, first MAP solve at minute "
              f"{'-' if first_map is None else f'{first_map:.0f}'}, capacity median "
              f"{np.median([x['capacity'] for x in s]):.0f} (truth {r['truth']:.0f}), "
              f"MVA/MAP solves {fams.count('MVA')}/{fams.count('MAP')}")


if __name__ == "__main__":
    main()
