"""End to end on an open service: a stream with no ``users`` whose request rate is flat, then
ramps past capacity, through the whole embedded pipeline.

    python -m bench.e2e.open_ramp                  # seeds 1-3, exponential tiers
    python -m bench.e2e.open_ramp --bursty         # the bursty 8-core database (I ~ 200)
    python -m bench.e2e.open_ramp --bursty --flat-noise   # the flat part's own noise

The system is case (b) of bench/accuracy/multicore.py made open (web 4 cores 8 ms, app 4 cores
10 ms, db 8 cores 16 ms with classes x0.75 / x2 there; browse 80%, buy 20%; SLA 0.1 s), fed by
the physical simulator's Poisson source (:class:`solvers.simulation.physical.OpenArrivals`):
20 minutes at 40% of the capacity, then a linear ramp to 130% over 40 minutes; 5-s windows
without ``users``. The pipeline is told the tiers and the SLA only (``workload = "auto"``:
open, no users and no think time). The capacity is the largest rate at which the worst class's
mean stays within the SLA, of the open model on the true parameters (``--capacity`` overrides;
docs/accuracy.md's open-model table puts that model within 5% of the simulated one).

Read: the pipeline's predicted mean response time over minutes 10-20 (the flat part, its
estimates settled) against the measured one over the same minutes (± the 95% interval of ten
1-minute batch means: the simulation's own noise over those minutes); the measured breach (the
first minute whose worst class's mean, summed over the tiers, exceeds the SLA:
:func:`bench.e2e.multicore.measured_breach`); the first ``predicted_breach`` firing and its lead
(>= 5 minutes wanted, never more than 30); when the rate trend saw the ramp (the first solve
after the flat part whose ``arrival_rate_trend_per_s`` is half the ramp's slope or more). The
pipeline reads the SLA on the 1-minute mean the measured breach is judged on
(``alert_window_s = 60``, as ``bench.e2e.multicore``; ``--alert-window 300``: the
configuration's default).

``--flat-start LEVEL``: false alarms on a flat rate after a start transient -- 40 minutes at
``LEVEL`` x the capacity whose first minutes have the shape of the testbed's open load starting,
stretched from its 15-s solves to the pipeline's 1-min ones (:data:`START_TRANSIENT`: 1.25x the
level, down to 0.85x at minute 5, the level from minute 10); per seed the solves whose trend is
more than :data:`FLAT_TREND` x the ramp's slope, the largest rate forecast over the rate, the
``predicted_breach`` firings (every one false).

``--flat-noise``: how far ten minutes' measured mean strays from the long-run one at the flat
rate (:func:`flat_noise`: 4 x 6,000 s of the flat rate cut into 10-minute means), beside the
open model on the true parameters.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from typing import Any

import numpy as np
from scipy import stats

from bench.accuracy.alert_shapes import CLASSES, MIX, SLA_S, START, WINDOW_S
from bench.accuracy.multicore import systems
from bench.e2e.multicore import BREACH_WINDOW_S, first_lead, measured_breach, seed_range
from solvers.open import solve_open_tiers, tiers_capacity
from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, monitor_physical
from streams.cli.embedded import run_embedded
from streams.core.config import Config, SystemConfig

HOLD_S, RAMP_S = 1200.0, 2400.0
LOW, TOP = 0.4, 1.3
#: the ramp's slope per unit of capacity (req/s per s)
RAMP_SLOPE = (TOP - LOW) / RAMP_S


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


#: ``--flat-start``: the rate over the level at the start of a flat run ([(s, factor)]), as
#: the testbed's open load started (docs/accuracy.md section 15: 11.5 -> 7.8 -> 9/s, the trough
#: at its 4th solve), and the run's length; a trend beyond FLAT_TREND x the ramp's slope counts
START_TRANSIENT = ((0.0, 1.25), (300.0, 0.85), (600.0, 1.0))
FLAT_S = 2400.0
FLAT_TREND = 0.25


def flat_start(cap: float, level: float, seeds: list[int], bursty: bool,
               alert_window_s: float) -> None:
    """``--flat-start``: per seed, a flat rate after a start transient through the pipeline
    (module docstring)."""
    print("| seed | solves | trend > FLAT_TREND x ramp's | largest forecast / rate | "
          "predicted_breach firings (min) |")
    print("|---:|---:|---:|---:|---|")
    for seed in seeds:
        net = PhysicalNetwork(tiers(bursty), CLASSES, MIX, 0.0, 0, arrivals=OpenArrivals(
            [(t, f * level * cap) for t, f in START_TRANSIENT]))
        recs = monitor_physical(net, FLAT_S, WINDOW_S, system="shop", start_time=START,
                                seed=seed + 700)
        preds, events = run(recs, alert_window_s)
        trends = [p.get("arrival_rate_trend_per_s", 0.0) for p in preds]
        ratio = max((p["arrival_rate_forecast_per_s"] / p["arrival_rate_per_s"] for p in preds
                     if p.get("arrival_rate_per_s")), default=math.nan)
        fired = sorted(a["time"] - START for a in events
                       if a["alert"] == "predicted_breach" and a["state"] == "firing")
        print(f"| {seed} | {len(preds)} | "
              f"{sum(t > FLAT_TREND * RAMP_SLOPE * cap for t in trends)} | {ratio:.2f} | "
              f"{', '.join(f'{f / 60:.1f}' for f in fired) or 'none'} |", flush=True)


def rate_at(t: float, cap: float) -> float:
    """The schedule's request rate ``t`` s after START."""
    return cap * (LOW + (TOP - LOW) * min(max(t - HOLD_S, 0.0), RAMP_S) / RAMP_S)


def ramp_records(cap: float, seed: int, bursty: bool) -> list[dict[str, Any]]:
    net = PhysicalNetwork(tiers(bursty), CLASSES, MIX, 0.0, 0, arrivals=OpenArrivals(
        [(0.0, LOW * cap), (HOLD_S, LOW * cap), (HOLD_S + RAMP_S, TOP * cap)]))
    return monitor_physical(net, HOLD_S + RAMP_S, WINDOW_S, system="shop", start_time=START,
                            seed=seed + 500)


def run(records: list[dict[str, Any]], alert_window_s: float | None = None
        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pipeline over ``records``: its predictions and alert events. ``alert_window_s``:
    the window the SLA is read on (``None``: the configuration's default)."""
    preds: list[dict[str, Any]] = []

    def watch(outputs: Any, _pipeline: Any) -> None:
        preds.extend(p for p in outputs.predictions if p.get("model"))

    window = {} if alert_window_s is None else {"alert_window_s": alert_window_s}
    cfg = Config(systems={"shop": SystemConfig(tiers=("web", "app", "db"),
                                               sla_s={"*": SLA_S}, **window)})
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


def batch_interval(records: list[dict[str, Any]], t0: float, t1: float,
                   batch: float = 60.0) -> float:
    """The 95% half-width of :func:`measured_mean` over ``(t0, t1]`` from its ``batch``-s
    batch means (Student t; batches of a minute hold thousands of requests and the
    database's bursts last seconds, so the batch means are nearly independent)."""
    means = [measured_mean(records, t, t + batch) for t in np.arange(t0, t1, batch)]
    k = len(means)
    return float(stats.t.ppf(0.975, k - 1) * np.std(means, ddof=1) / math.sqrt(k))


def flat_noise(cap: float, bursty: bool, runs: int = 4, duration: float = 6000.0,
               chunk: float = 600.0) -> dict[str, float]:
    """The flat rate held for ``runs`` x ``duration`` s: the long-run measured mean, the
    spread (SD) of its ``chunk``-s means -- what one flat part's ten minutes read -- and the
    open model on the true parameters at that rate."""
    s = systems()["b"]
    rate = LOW * cap
    means = []
    for i in range(runs):
        net = PhysicalNetwork(tiers(bursty), CLASSES, MIX, 0.0, 0, arrivals=OpenArrivals(rate))
        recs = monitor_physical(net, duration, WINDOW_S, system="shop", start_time=START,
                                seed=9000 + i)
        means += [measured_mean(recs, t, t + chunk) for t in np.arange(0.0, duration, chunk)]
    procs = [t.process for t in s.tiers] if bursty else None
    model = solve_open_tiers(rate * np.array(s.mix), s.D_mc, s.cores, processes=procs)
    v = np.array(means)
    return {"rate": rate, "mean": float(v.mean()), "sd": float(v.std(ddof=1)),
            "half_width": float(1.96 * v.std(ddof=1) / math.sqrt(v.size)), "chunks": v.size,
            "model": float(model.response_time @ np.array(s.mix))}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--bursty", action="store_true")
    ap.add_argument("--capacity", type=float, default=None)
    ap.add_argument("--alert-window", type=float, default=BREACH_WINDOW_S,
                    help="alert_window_s (default: the measured breach's 60 s, the 1-minute "
                         "mean it is judged on; 300: the configuration's default)")
    ap.add_argument("--flat-start", type=float, default=None, metavar="LEVEL",
                    help="a flat rate at LEVEL x the capacity after a start transient: the "
                         "solves that read a trend, the largest forecast, the false alarms")
    ap.add_argument("--flat-noise", action="store_true",
                    help="the flat rate's long-run mean and the spread of its 10-min means")
    args = ap.parse_args(argv)
    cap = args.capacity if args.capacity is not None else model_capacity(args.bursty)
    if args.flat_noise:
        f = flat_noise(cap, args.bursty)
        print(f"flat {f['rate']:.1f}/s: long-run R {1000 * f['mean']:.2f} ± "
              f"{1000 * f['half_width']:.2f} ms; {f['chunks']:.0f} 10-min means, SD "
              f"{100 * f['sd'] / f['mean']:.1f}% (95% of them within ± "
              f"{196 * f['sd'] / f['mean']:.1f}%); open model, true parameters "
              f"{1000 * f['model']:.2f} ms ({100 * (f['model'] / f['mean'] - 1):+.1f}%)")
        return
    if args.flat_start is not None:
        print(f"capacity {cap:.1f}/s; flat {args.flat_start * cap:.1f}/s for "
              f"{FLAT_S / 60:.0f} min after a start transient {START_TRANSIENT}; db "
              f"{'bursty' if args.bursty else 'exponential'}", file=sys.stderr)
        flat_start(cap, args.flat_start, seed_range(args.seeds), args.bursty,
                   args.alert_window)
        return
    print(f"capacity {cap:.1f}/s; flat {LOW * cap:.1f}/s for {HOLD_S / 60:.0f} min, ramp to "
          f"{TOP * cap:.1f}/s over {RAMP_S / 60:.0f} min; db "
          f"{'bursty' if args.bursty else 'exponential'}; alert_window_s "
          f"{args.alert_window:g}", file=sys.stderr)
    print("| seed | R flat: predicted | measured (95%) | error | capacity_rate_per_s (min 19) | "
          "ramp seen (min) | measured breach (min; rate / capacity) | first alert (min) | "
          "lead (min) | CPU s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for seed in seed_range(args.seeds):
        t0 = time.process_time()
        recs = ramp_records(cap, seed, args.bursty)
        preds, events = run(recs, args.alert_window)
        cpu = time.process_time() - t0
        flat = [p for p in preds if 600.0 < p["time"] - START <= HOLD_S]
        r_pred = float(np.mean([p["response_time"] for p in flat]))
        r_meas = measured_mean(recs, 600.0, HOLD_S)
        r_hw = batch_interval(recs, 600.0, HOLD_S)
        cap_19 = next((p.get("capacity_rate_per_s") for p in reversed(flat)), None)
        breach = measured_breach(recs, SLA_S)
        fired = sorted(a["time"] - START for a in events
                       if a["alert"] == "predicted_breach" and a["state"] == "firing")
        lead = first_lead(breach, fired)
        seen = next((p["time"] - START for p in preds if p["time"] - START > HOLD_S
                     and p.get("arrival_rate_trend_per_s", 0.0) >= 0.5 * RAMP_SLOPE * cap), None)

        def minutes(v: float | None) -> str:
            return "-" if v is None or not math.isfinite(v) else f"{v / 60:.1f}"
        print(f"| {seed} | {1000 * r_pred:.1f} ms | {1000 * r_meas:.1f} ± {1000 * r_hw:.1f} ms | "
              f"{100 * (r_pred - r_meas) / r_meas:+.1f}% | "
              f"{cap_19 if cap_19 is None else round(cap_19, 1)} | {minutes(seen)} | "
              f"{minutes(breach)}"
              f"{'' if breach is None else f' ({rate_at(breach, cap) / cap:.2f})'} | "
              f"{minutes(fired[0] if fired else None)} | {minutes(lead)} | {cpu:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
