"""End to end on an open service: a stream with no ``users`` whose request rate is flat, then
ramps past capacity, through the whole embedded pipeline.

    python -m bench.e2e.open_ramp                  # seeds 1-3, exponential tiers
    python -m bench.e2e.open_ramp --bursty         # the bursty 8-core database (I ~ 200)

The system is case (b) of bench/accuracy/multicore.py made open (web 4 cores 8 ms, app 4 cores
10 ms, db 8 cores 16 ms with classes x0.75 / x2 there; browse 80%, buy 20%; SLA 0.1 s), fed by
the physical simulator's Poisson source (:class:`solvers.simulation.physical.OpenArrivals`):
20 minutes at 40% of the capacity, then a linear ramp to 130% over 40 minutes; 5-s windows
without ``users``. The pipeline is told the tiers and the SLA only (``workload = "auto"``:
open, no users and no think time). The capacity is the largest rate at which the worst class's
mean stays within the SLA, of the open model on the true parameters (``--capacity`` overrides;
docs/accuracy.md's open-model table puts that model within 5% of the simulated one).

Read: the pipeline's predicted mean response time over minutes 10-20 (the flat part, its
estimates settled) against the measured one over the same minutes; the measured breach (the
first minute whose worst class's mean, summed over the tiers, exceeds the SLA:
:func:`bench.e2e.multicore.measured_breach`); the first ``predicted_breach`` firing and its lead
(>= 5 minutes wanted, never more than 30).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from typing import Any

import numpy as np

from bench.accuracy.alert_shapes import CLASSES, MIX, SLA_S, START, WINDOW_S
from bench.accuracy.multicore import systems
from bench.e2e.multicore import first_lead, measured_breach, seed_range
from solvers.open import solve_open_tiers, tiers_capacity
from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, monitor_physical
from streams.cli.embedded import run_embedded
from streams.core.config import Config, SystemConfig

HOLD_S, RAMP_S = 1200.0, 2400.0
LOW, TOP = 0.4, 1.3


def tiers(bursty: bool) -> tuple[Tier, ...]:
    s = systems()["b"]
    return tuple(Tier(t.name, t.cores, t.process if (t.process is not None and bursty)
                      else t.mean, multipliers=t.multipliers) for t in s.tiers)


def model_capacity(bursty: bool) -> float:
    """The largest rate at which every class's mean is within the SLA, on the true
    parameters (bisection on the open model)."""
    s = systems()["b"]
    procs = [t.process for t in s.tiers] if bursty else None
    lo, hi = 0.0, tiers_capacity(s.mix, s.D_mc, s.cores)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        r = solve_open_tiers(mid * np.array(s.mix), s.D_mc, s.cores, processes=procs)
        lo, hi = (mid, hi) if r.response_time.max() <= SLA_S else (lo, mid)
    return lo


def ramp_records(cap: float, seed: int, bursty: bool) -> list[dict[str, Any]]:
    net = PhysicalNetwork(tiers(bursty), CLASSES, MIX, 0.0, 0, arrivals=OpenArrivals(
        [(0.0, LOW * cap), (HOLD_S, LOW * cap), (HOLD_S + RAMP_S, TOP * cap)]))
    return monitor_physical(net, HOLD_S + RAMP_S, WINDOW_S, system="shop", start_time=START,
                            seed=seed + 500)


def run(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    preds: list[dict[str, Any]] = []

    def watch(outputs: Any, _pipeline: Any) -> None:
        preds.extend(p for p in outputs.predictions if p.get("model"))

    cfg = Config(systems={"shop": SystemConfig(tiers=("web", "app", "db"),
                                               sla_s={"*": SLA_S})})
    with tempfile.TemporaryDirectory() as d:
        summary = run_embedded(records, cfg, d, on_outputs=watch)
    return preds, list(summary.alert_events)


def measured_mean(records: list[dict[str, Any]], t0: float, t1: float) -> float:
    """The mix-weighted mean response time (per class: completion-weighted per tier, summed
    over the tiers) of the windows ending in ``(t0, t1]`` s after START."""
    acc: dict[str, np.ndarray] = {}
    done = np.zeros(len(CLASSES))
    for r in records:
        if not t0 < float(r["end"]) - START <= t1:
            continue
        a = acc.setdefault(r["tier"], np.zeros((2, len(CLASSES))))
        for j, c in enumerate(CLASSES):
            k = r["completions"][c]
            if k and c in r["response_time_s"]:
                a[0, j] += r["response_time_s"][c] * k
                a[1, j] += k
            if r["tier"] == "web":
                done[j] += k
    R = sum(a[0] / a[1] for a in acc.values())
    return float(done @ R / done.sum())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--bursty", action="store_true")
    ap.add_argument("--capacity", type=float, default=None)
    args = ap.parse_args(argv)
    cap = args.capacity if args.capacity is not None else model_capacity(args.bursty)
    print(f"capacity {cap:.1f}/s; flat {LOW * cap:.1f}/s for {HOLD_S / 60:.0f} min, ramp to "
          f"{TOP * cap:.1f}/s over {RAMP_S / 60:.0f} min; db "
          f"{'bursty' if args.bursty else 'exponential'}", file=sys.stderr)
    print("| seed | R flat: predicted | measured | error | capacity_rate_per_s (min 19) | "
          "measured breach (min) | first alert (min) | lead (min) | CPU s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for seed in seed_range(args.seeds):
        t0 = time.process_time()
        recs = ramp_records(cap, seed, args.bursty)
        preds, events = run(recs)
        cpu = time.process_time() - t0
        flat = [p for p in preds if 600.0 < p["time"] - START <= HOLD_S]
        r_pred = float(np.mean([p["response_time"] for p in flat]))
        r_meas = measured_mean(recs, 600.0, HOLD_S)
        cap_19 = next((p.get("capacity_rate_per_s") for p in reversed(flat)), None)
        breach = measured_breach(recs, SLA_S)
        fired = sorted(a["time"] - START for a in events
                       if a["alert"] == "predicted_breach" and a["state"] == "firing")
        lead = first_lead(breach, fired)

        def minutes(v: float | None) -> str:
            return "-" if v is None or not math.isfinite(v) else f"{v / 60:.1f}"
        print(f"| {seed} | {1000 * r_pred:.1f} ms | {1000 * r_meas:.1f} ms | "
              f"{100 * (r_pred - r_meas) / r_meas:+.1f}% | "
              f"{cap_19 if cap_19 is None else round(cap_19, 1)} | {minutes(breach)} | "
              f"{minutes(fired[0] if fired else None)} | {minutes(lead)} | {cpu:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
