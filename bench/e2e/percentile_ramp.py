"""End to end on the multi-core shop with a bursty database and a **p95 SLO**: the capacity the
pipeline predicts from the windows of a moderate load, and its predicted-breach alert on a ramp
through the knee against the measured 1-minute p95.

    python -m bench.e2e.percentile_ramp --quick     # 1 seed, a short ramp, truth 3 x 600 s
    python -m bench.e2e.percentile_ramp             # seeds 1-3, 60-min steady runs, 3 x 3000 s
    python -m bench.e2e.percentile_ramp --seeds 4-6 --truth 443   # the truth given, no grid

The system is :func:`bench.e2e.multicore.network`: web 4 cores 8 ms, app 4 cores 10 ms, db 8
cores whose service sequence is Mi et al.'s (2008) bursty MAP(2) (``I ~ 200``, 16 ms); think time
1 s; classes ``browse`` (80%, x0.75 at the db) and ``buy`` (20%, x2 at the db). The SLO:
``slo = { buy = { p95 = 1.0 } }`` (95% of ``buy`` requests within 1 s; every class keeps the
default mean SLA of 1 s, which binds later). The pipeline is told the tiers, the SLO and
``alert_window_s = 60`` (the measured breach's window), nothing else but ``remediation =
false`` (``--remediation``: on): the capacity and the alert do not depend on it, and its
searches over the bursty database's quantiles take most of a run's time.

1. **Truth capacity** -- the population at which ``buy``'s p95 crosses the SLO: the simulator's
   per-request quantiles (:func:`solvers.simulation.physical.simulate_physical`, 3 replications
   per population, the 95% t-interval over them) on a grid, the crossing interpolated
   linearly; its interval from the crossings of the intervals' ends.
2. **Capacity from the windows** -- per seed, ``--steady-minutes`` of 5-s windows at 40% of the
   truth capacity through ``run_embedded``: the last ``capacity_users`` against the truth
   (within 10% wanted), and the predicted ``buy`` p95 there against the windows' measured one
   (``--quick``: no steady run; the error is the ramp's capacity at the hold's end).
3. **Ramp** -- :func:`bench.e2e.multicore.ramp_schedule` (20 minutes at 40% of the truth
   capacity, a linear ramp to 150% over 40 minutes, 10 minutes there), simulated keeping every
   request's response time: the entry tier's windows carry the per-class measured p50/p95/p99
   (``response_time_quantiles_s``, what a latency histogram gives; ``--no-measured`` leaves
   them out). **Measured breach**: the first minute whose ``buy`` requests' p95 exceeds the
   SLO. perfcast's first ``predicted_breach`` firing must lead it by >= 5 minutes, and none may
   come earlier than 30 minutes before it.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import tempfile
import time
from typing import Any

import numpy as np

from bench.accuracy.alert_shapes import CLASSES, START, WINDOW_S
from bench.e2e.multicore import BREACH_WINDOW_S, first_lead, network, ramp_schedule, seed_range
# the simulator's own run with every request's response time kept (its public monitor drops
# them): the windows' measured quantiles and the per-minute truth come from those samples
from solvers.simulation.physical import (checked_schedule, seeded_generator, simulate,
                                         simulate_physical, window_edges)
from solvers.simulation.monitoring import window_records
from streams.cli.embedded import run_embedded
from streams.core.config import Config, SystemConfig

SLO_CLASS = "buy"
SLO_P95_S = 1.0
#: the quantiles the entry tier's windows carry, as a latency histogram would give them
MEASURED = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
#: the truth's populations (the model's capacity on the true parameters is 433)
GRID = (340, 380, 400, 420, 440, 460, 480, 520)
STEADY_FRACTION = 0.4


def config(slo_s: float = SLO_P95_S, alert_window_s: float = BREACH_WINDOW_S,
           remediation: bool = False) -> Config:
    """The tiers in order and ``buy``'s p95 SLO, the alert read on the 1-minute window;
    ``remediation`` off by default: the alert and the capacity do not depend on it, and its
    searches on a bursty tier's quantiles are most of the run's time."""
    return Config(systems={"shop": SystemConfig(
        tiers=("web", "app", "db"), slo={SLO_CLASS: {"p95": slo_s}},
        alert_window_s=alert_window_s, remediation=remediation)})


def run(records: list[dict[str, Any]], cfg: Config
        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The records through ``run_embedded``: the predictions with a model, the alert events."""
    preds: list[dict[str, Any]] = []

    def watch(outputs: Any, _pipeline: Any) -> None:
        preds.extend(p for p in outputs.predictions if p.get("model"))

    with tempfile.TemporaryDirectory() as d:
        summary = run_embedded(records, cfg, d, on_outputs=watch)
    return preds, list(summary.alert_events)


# ---------------------------------------------------------------------------- the truth
def truth_capacity(grid: tuple[int, ...], duration: float, seed: int, slo_s: float
                   ) -> tuple[tuple[float, float, float], list[tuple[int, float, float]]]:
    """``buy``'s simulated p95 per population (``(n, p95, half-width)``) and the SLO's
    crossing ``(point, low, high)`` (NaN where the grid does not bracket it): ``low`` where
    the interval's upper end crosses, ``high`` where its lower end does."""
    c = CLASSES.index(SLO_CLASS)
    rows = []
    for n in grid:
        res = simulate_physical(network(n), duration, warmup=duration / 10, replications=3,
                                seed=seed + n, quantiles=(0.95,))
        est = res.response_time_quantiles[c][0]
        rows.append((n, est.mean, est.half_width))
    ns = [r[0] for r in rows]
    point = _crossing(ns, [r[1] for r in rows], slo_s)
    low = _crossing(ns, [r[1] + r[2] for r in rows], slo_s)
    high = _crossing(ns, [r[1] - r[2] for r in rows], slo_s)
    return (point, low, high), rows


def _crossing(ns: list[int], values: list[float], bound: float) -> float:
    """The first linear crossing of ``bound`` upwards (NaN: none)."""
    for i in range(1, len(ns)):
        if values[i - 1] <= bound < values[i]:
            f = (bound - values[i - 1]) / (values[i] - values[i - 1])
            return ns[i - 1] + f * (ns[i] - ns[i - 1])
    return math.nan


# ---------------------------------------------------------------------------- the windows
def sampled_records(population: int, schedule: list[tuple[float, int]], duration: float,
                    seed: int, measured: bool = True
                    ) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    """5-s windows of the shop from ``START`` (as :func:`~solvers.simulation.physical.
    monitor_physical` with the same seed makes them), the entry tier's carrying the window's
    measured quantiles (``measured``), and per window the ``buy`` requests' response times."""
    net = network(population)
    edges = window_edges(duration, WINDOW_S, 0.0)
    trace = simulate(net, edges, checked_schedule(schedule), seeded_generator(None, seed),
                     record=True)
    records = window_records(trace.cp, system="shop", tiers=[t.name for t in net.tiers],
                             classes=list(CLASSES), start_time=START)
    M, c_slo = len(net.tiers), CLASSES.index(SLO_CLASS)
    per_window = []
    for k in range(len(edges) - 1):
        if measured:
            qs = {}
            for c, cls in enumerate(CLASSES):
                r = trace.responses(k, k + 1, c)
                if r.size:
                    qs[cls] = dict(zip(MEASURED, np.quantile(r, list(MEASURED.values()))
                                       .tolist()))
            if qs:
                records[k * M]["response_time_quantiles_s"] = qs
        per_window.append(trace.responses(k, k + 1, c_slo))
    return records, per_window


def measured_breach(per_window: list[np.ndarray], slo_s: float) -> tuple[float | None,
                                                                          list[float]]:
    """The first minute (its end, s after START) whose ``buy`` p95 exceeds ``slo_s``, and every
    minute's p95 (NaN: no request)."""
    per_min = int(round(BREACH_WINDOW_S / WINDOW_S))
    p95s = []
    for m in range(len(per_window) // per_min):
        r = np.concatenate(per_window[m * per_min:(m + 1) * per_min])
        p95s.append(float(np.quantile(r, 0.95)) if r.size else math.nan)
    breach = next((60.0 * (m + 1) for m, v in enumerate(p95s) if v > slo_s), None)
    return breach, p95s


def _p95(p: dict[str, Any]) -> float | None:
    q = (p.get("classes") or {}).get(SLO_CLASS, {}).get("response_time_quantiles_s") or {}
    return q.get("p95")


def steady(cap: float, seed: int, minutes: float, cfg: Config, measured: bool
           ) -> dict[str, Any]:
    """The pipeline on ``minutes`` at 40% of ``cap``: its last capacity, predicted and
    measured ``buy`` p95 over the second half."""
    n = max(1, int(round(STEADY_FRACTION * cap)))
    recs, per_window = sampled_records(n, [], 60.0 * minutes, seed, measured)
    preds, _ = run(recs, cfg)
    half = preds[len(preds) // 2:]
    meas = np.concatenate(per_window[len(per_window) // 2:])
    pred = [v for p in half if (v := _p95(p)) is not None]
    last = preds[-1]
    return {"users": n, "capacity": last.get("capacity_users"),
            "lower": last.get("capacity_users_lower"), "upper": last.get("capacity_users_upper"),
            "model": last.get("model"), "p95_pred": float(np.median(pred)) if pred else math.nan,
            "p95_meas": float(np.quantile(meas, 0.95)) if meas.size else math.nan}


def ramp(cap: float, seed: int, cfg: Config, slo_s: float, measured: bool,
         hold_s: float = 1200.0, ramp_s: float = 2400.0) -> dict[str, Any]:
    """The ramp through the pipeline (:func:`bench.e2e.multicore.ramp_schedule` with
    ``hold_s`` and ``ramp_s``): measured breach, firings, lead (all s after START), the
    capacity at the hold's end."""
    low, sched, duration = ramp_schedule(cap, hold_s, ramp_s)
    recs, per_window = sampled_records(low, sched, duration, seed + 100, measured)
    preds, events = run(recs, cfg)
    breach, p95s = measured_breach(per_window, slo_s)
    fired = sorted(a["time"] - START for a in events
                   if a["alert"] == "predicted_breach" and a["state"] == "firing")
    hold = [p for p in preds if p["time"] - START <= hold_s]
    return {"breach": breach, "fired": fired, "lead": first_lead(breach, fired),
            "cap_19": hold[-1].get("capacity_users") if hold else None,
            "statistic": next((a.get("statistic") for a in events
                               if a["alert"] == "predicted_breach"), None),
            "p95s": p95s}


def _min(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v / 60:.1f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="seed 1, no steady run (the capacity at the hold's end), a 10-min "
                         "hold and a 20-min ramp, truth 3 x 600 s")
    ap.add_argument("--seeds", default=None, help="'1-3' (default; '1' with --quick)")
    ap.add_argument("--truth", type=float, default=None,
                    help="the truth capacity (skips the simulated grid)")
    ap.add_argument("--truth-duration", type=float, default=None,
                    help="simulated s per replication (default 3000, 600 with --quick)")
    ap.add_argument("--truth-only", action="store_true", help="only the simulated grid")
    ap.add_argument("--steady-minutes", type=float, default=None,
                    help="default 60, 0 (none) with --quick")
    ap.add_argument("--hold-minutes", type=float, default=None, help="default 20, 10 quick")
    ap.add_argument("--ramp-minutes", type=float, default=None, help="default 40, 20 quick")
    ap.add_argument("--slo", type=float, default=SLO_P95_S, help="buy's p95 SLO, s")
    ap.add_argument("--alert-window", type=float, default=BREACH_WINDOW_S)
    ap.add_argument("--remediation", action="store_true",
                    help="the pipeline's remediation on (its default; slow here)")
    ap.add_argument("--no-measured", action="store_true",
                    help="windows without the measured response_time_quantiles_s")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    seeds = seed_range(args.seeds or ("1" if args.quick else "1-3"))
    measured = not args.no_measured
    cfg = config(args.slo, args.alert_window, args.remediation)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cap, lo, hi = args.truth, math.nan, math.nan
    if cap is None:
        dur = args.truth_duration or (600.0 if args.quick else 3000.0)
        (cap, lo, hi), rows = truth_capacity(GRID, dur, 7, args.slo)
        print(f"## Truth: {SLO_CLASS} p95 by population (3 replications x {dur:g} s)\n")
        print("| users | p95 (ms) | 95% half-width |\n|---:|---:|---:|")
        for n, v, hw in rows:
            print(f"| {n} | {1000 * v:.0f} | {hw / v:.1%} |")
        print(f"\ntruth capacity at p95 <= {args.slo:g} s: **{cap:.1f}** users "
              f"(interval {lo:.1f}-{hi:.1f})\n", flush=True)
    if args.truth_only:
        return
    if not math.isfinite(cap):
        print("the grid does not bracket the SLO's crossing; widen it")
        return
    minutes = args.steady_minutes if args.steady_minutes is not None else \
        (0.0 if args.quick else 60.0)
    hold = 60.0 * (args.hold_minutes or (10.0 if args.quick else 20.0))
    ramp_s = 60.0 * (args.ramp_minutes or (20.0 if args.quick else 40.0))
    print(f"## Per seed: {minutes:g}-min steady run at {STEADY_FRACTION:.0%} of {cap:.0f}, then "
          f"the ramp ({hold / 60:g} min there, to 150% over {ramp_s / 60:g} min; measured "
          f"quantiles in the windows: {measured})\n")
    print("| seed | capacity (band) | error | buy p95 pred / meas (ms) | capacity, hold's end "
          "| measured breach (min) | firings before it (min) | lead (min) | CPU s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for seed in seeds:
        t1 = time.process_time()
        s = steady(cap, seed, minutes, cfg, measured) if minutes > 0 else {
            "capacity": None, "lower": None, "upper": None, "p95_pred": math.nan,
            "p95_meas": math.nan}
        r = ramp(cap, seed, cfg, args.slo, measured, hold, ramp_s)
        before = [f for f in r["fired"] if r["breach"] is not None and f < r["breach"]]
        read = s["capacity"] or r["cap_19"]
        err = f"{100 * (read / cap - 1):+.1f}%" if read else "-"
        band = f"{s['capacity']} ({s['lower']}-{s['upper']})" if s["capacity"] else "-"
        print(f"| {seed} | {band} | {err} | "
              f"{1000 * s['p95_pred']:.0f} / {1000 * s['p95_meas']:.0f} | {r['cap_19']} | "
              f"{_min(r['breach'])} | {', '.join(_min(f) for f in before[:4]) or '-'}"
              f"{' ...' if len(before) > 4 else ''} | {_min(r['lead'])} | "
              f"{time.process_time() - t1:.0f} |", flush=True)
    print(f"\nstatistic the alert names: {r['statistic']}; targets: capacity within 10%, lead "
          f">= 5 min and no firing earlier than 30 min before the breach; commit {commit}; "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
