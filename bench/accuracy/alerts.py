"""Predicted SLA breach: how early perfcast's alert fires and how often it fires for nothing,
against a baseline that extrapolates the measured response time linearly.
Prints the tables of docs/accuracy.md section 10.

    python -m bench.accuracy.alerts            # 12 runs per kind + the idc_threshold sweep
                                               # (both kinds)
    python -m bench.accuracy.alerts --quick    # 4 runs per kind, two thresholds
    python -m bench.accuracy.alerts --jobs 1   # one process (default: 2)
    python -m bench.accuracy.alerts --shapes   # three-tier multi-core systems,
                                               # ramps and flat loads, against predict_linear
                                               # and Holt (bench/accuracy/alert_shapes.py)
    python -m bench.accuracy.alerts --shapes --quick   # one seed per scenario
    python -m bench.accuracy.alerts --shapes --seeds 4,5,6,7 --kinds bursty \
        --only flat_90,flat_105                        # a subset: held-out seeds, one kind

The system is the demo's shop (:mod:`streams.cli.demo`: Mi et al.'s (2008) think time 0.5 s, front server
and database in series, four browsing-mix classes) with every demand doubled, so that it
saturates near 60 users instead of 115: the MAP network the pipeline solves for a bursty tier
then has a quarter of the states and a run takes seconds. Kinds:

* ``bursty``     -- the database's service is the demo's bursty MAP(2) (I ~ 200, bottleneck
  switch), per class scaled to the class's demand;
* ``non_bursty`` -- exponential database service with the same per-class demands.

Each run holds ``users_start`` users for 20 minutes (the pipeline measures the burstiness),
then adds one user every ``60 / slope`` seconds up to ``users_end``, then holds for 15
minutes. ``users_end`` is 1.4x the capacity (a breach follows) or 0.85x it (the ramp stops
below capacity: no sustained breach, so any alert is a false alarm unless the noise itself
breaches); the capacity comes from the true model (:func:`true_capacity`). The windows
(5 s, input contract) go through the whole pipeline (:func:`streams.cli.embedded.run_embedded`).

* **Actual breach** -- the pipeline's ``current_breach`` definition recomputed from the
  windows: per 60-s solve interval and class, the completion-weighted mean response time summed
  over the tiers; above the SLA is a breach, 0.9-1x SLA the dead band; it counts once it held
  for ``alert_fire_after`` (2) intervals (:class:`streams.alerts.book.AlertBook`). The breach time
  is that firing time (checked against the pipeline's own ``current_breach`` events).
* **perfcast** -- the pipeline's ``predicted_breach`` firing times, under each
  ``demand_policy`` (:data:`streams.core.config.DEMAND_POLICIES`: the default ``selected`` and the
  former default ``kalman_checked``) at ``idc_threshold`` 10; the sweep uses the default policy.
* **baseline** -- ``predict_linear``: at each solve time a least-squares line through each
  class's per-window measured response time over the last 10 minutes, extrapolated over the
  horizon; condition "some class above its SLA at t + horizon", cleared when every class is
  below it at t + 1.25 horizon (perfcast's resolve band), the same hysteresis.
* **lead time** -- breach time minus the last firing before it; an alert that did not fire
  before the breach (or fired at the breach's own solve) is a miss. **False alarm** -- a firing with no breach active within the
  horizon after it.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.accuracy.alert_scoring import hysteresis_episodes
from solvers.mapqn import solve_closed
from solvers.mva import mva
from solvers.paper000 import THINK_TIME, scenarios
from solvers.processes import MAP
from solvers.simulation.monitoring import monitor_closed
from solvers.simulation.network import ClosedNetwork, Queue
from streams.core.config import DEMAND_POLICIES, Config, SystemConfig
from streams.cli.demo import CLASSES, START
from streams.cli.embedded import run_embedded
from streams.engine.system import BREACH_RESOLVE_FACTOR, CURRENT_RESOLVE_FACTOR

SCALE = 2.0                       # demands x2: the shop saturates near 60 users
WINDOW_S = 5.0
SOLVE_S = 60.0
HORIZON_S = 600.0
STEADY_S = 1200.0
HOLD_S = 900.0
BASELINE_SPAN_S = 600.0           # predict_linear over the last 10 minutes
NAMES = [c[0] for c in CLASSES]
MIX = np.array([c[1] for c in CLASSES])
FRONT = np.array([c[2] for c in CLASSES]) * SCALE
DB = np.array([c[3] for c in CLASSES]) * SCALE
KINDS = ("bursty", "non_bursty")
SLOPES = (1.5, 2.5, 4.0)          # users per minute
SLAS = (0.25, 0.4)                # seconds, every class
DEFAULT_POLICY = SystemConfig().demand_policy
THRESHOLD = 10.0                  # idc_threshold of the policy comparison


@dataclass(frozen=True)
class RunSpec:
    """One seeded run: kind, ramp slope (users/min), SLA (s), whether the ramp stops below
    capacity."""

    kind: str
    seed: int
    slope: float
    sla_s: float
    stops_below: bool


def _db_service(kind: str) -> list[Any]:
    if kind == "bursty":
        bursty = scenarios()["bottleneck_switch"].database
        return [bursty.scaled(d) for d in DB]
    return list(DB)


def true_capacity(kind: str, sla_s: float) -> int:
    """Largest population whose every class meets ``sla_s`` in the true model: the aggregate
    network (front exponential, database its MAP(2) or exponential, mix-weighted demands) solved
    exactly (MAP network / MVA), classes read back as ``R_c = sum_m D_mc R_m / D_m`` -- the
    pipeline's own read-back (streams.predict.model)."""
    Dm = np.array([FRONT @ MIX, DB @ MIX])
    ratio = np.vstack([FRONT, DB]) / Dm[:, None]

    def worst(n: int) -> float:
        if kind == "bursty":
            db = scenarios()["bottleneck_switch"].database.scaled(float(Dm[1]))
            res = solve_closed([MAP.exponential(float(Dm[0])), db], n, THINK_TIME).residence_time
        else:
            res = mva(Dm[:, None], [n], [THINK_TIME]).residence_time[:, 0]
        return float((ratio.T @ np.asarray(res)).max())

    lo, hi = 1, 200
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if worst(mid) <= sla_s else (lo, mid)
    return lo


def schedule(spec: RunSpec, capacity: int) -> tuple[int, list[tuple[float, int]], float]:
    """``(users_start, [(t, users)], duration)``: hold, ramp by one user every ``60/slope`` s
    to 1.4x (or 0.85x) the capacity, hold."""
    start = int(round(0.4 * capacity))
    end = int(round((0.85 if spec.stops_below else 1.4) * capacity))
    step = 60.0 / spec.slope
    sched = [(STEADY_S + step * i, start + i) for i in range(1, end - start + 1)]
    duration = (sched[-1][0] if sched else STEADY_S) + HOLD_S
    return start, sched, duration


def records(spec: RunSpec, capacity: int) -> list[dict[str, Any]]:
    start, sched, duration = schedule(spec, capacity)
    net = ClosedNetwork(queues=[Queue("front", list(FRONT)), Queue("db", _db_service(spec.kind))],
                        populations=start, think_times=THINK_TIME, classes=NAMES, mix=list(MIX))
    return monitor_closed(net, duration, WINDOW_S, schedule=sched, system="shop",
                          start_time=START, seed=spec.seed)


def config(spec: RunSpec, idc_threshold: float, policy: str = DEFAULT_POLICY) -> Config:
    return Config(systems={"shop": SystemConfig(
        tiers=("front", "db"), think_time_s=THINK_TIME, sla_s={"*": spec.sla_s},
        solve_interval_s=SOLVE_S, horizon_s=HORIZON_S, trend_window_s=HORIZON_S,
        idc_threshold=idc_threshold, demand_policy=policy,
        solve_offset_s=0.0)})   # solve on the minute: the intervals this bench recomputes


# ------------------------------------------------------------------------------ measured side
def response_series(recs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window end: ``(end, R (windows, classes), n (windows, classes))`` -- a class's
    response time summed over the tiers (NaN where a tier reported none), and its completions
    at the last tier."""
    ends = sorted({float(r["end"]) for r in recs})
    index = {e: i for i, e in enumerate(ends)}
    R = np.zeros((len(ends), len(NAMES)))
    n = np.zeros((len(ends), len(NAMES)))
    seen = np.zeros((len(ends), len(NAMES)), dtype=int)
    for r in recs:
        i = index[float(r["end"])]
        for j, c in enumerate(NAMES):
            if c in r["response_time_s"]:
                R[i, j] += r["response_time_s"][c]
                seen[i, j] += 1
        if r["tier"] == "db":
            n[i] = [r["completions"][c] for c in NAMES]
    R[seen < 2] = np.nan
    return np.array(ends), R, n


def interval_response(recs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """The pipeline's measured ``R_c`` per solve interval (streams.engine.system ``_measured``): per
    tier the completion-weighted mean over the windows with ``end`` in ``(t - 60, t]``, summed
    over the tiers; NaN when a tier has no completion of the class. Returns (times, R)."""
    sums: dict[tuple[float, str], np.ndarray] = {}
    for r in recs:
        t = math.ceil(float(r["end"]) / SOLVE_S) * SOLVE_S
        acc = sums.setdefault((t, r["tier"]), np.zeros((2, len(NAMES))))
        for j, c in enumerate(NAMES):
            k = r["completions"][c]
            if k > 0 and c in r["response_time_s"]:
                acc[0, j] += r["response_time_s"][c] * k
                acc[1, j] += k
    times = sorted({t for t, _ in sums})
    R = np.zeros((len(times), len(NAMES)))
    for i, t in enumerate(times):
        for tier in ("front", "db"):
            acc = sums.get((t, tier))
            if acc is None:
                R[i] = np.nan
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                R[i] += np.where(acc[1] > 0, acc[0] / acc[1], np.nan)
    return np.array(times), R


def episodes(conditions: list[tuple[float, bool | None]]) -> list[tuple[float, float | None]]:
    """``(fired, resolved)`` episodes of an alert fed ``conditions`` at each solve time, with
    the pipeline's hysteresis (:class:`streams.alerts.book.AlertBook`, fire after 2, resolve after
    3)."""
    return hysteresis_episodes(conditions, SystemConfig.alert_fire_after,
                               SystemConfig.alert_resolve_after)


def breach_episodes(recs: list[dict[str, Any]], sla: float) -> list[tuple[float, float | None]]:
    """The ``current_breach`` episodes (any class) recomputed from the windows. The solve at
    the last boundary happens only with the final flush; the last interval is dropped."""
    times, R = interval_response(recs)
    conds = []
    for t, r in zip(times[:-1], R[:-1]):
        # per class: True above the SLA, None in the dead band, False below (streams.engine.system)
        per = [None if (not np.isnan(v) and CURRENT_RESOLVE_FACTOR * sla <= v <= sla)
               else bool(not np.isnan(v) and v > sla) for v in r]
        conds.append((t, per))
    per_class = [episodes([(t, c[j]) for t, c in conds]) for j in range(len(NAMES))]
    return sorted((e for eps in per_class for e in eps), key=lambda e: e[0])


def baseline_conditions(recs: list[dict[str, Any]], sla: float,
                        solve_times: np.ndarray) -> list[tuple[float, bool | None]]:
    """``predict_linear`` over the last :data:`BASELINE_SPAN_S` of each class's per-window
    response time, at each solve time: True if some class is predicted above the SLA at
    ``t + horizon``, False if every class is below it at ``t + 1.25 horizon``."""
    ends, R, _ = response_series(recs)
    out: list[tuple[float, bool | None]] = []
    for t in solve_times:
        sel = (ends > t - BASELINE_SPAN_S) & (ends <= t)
        if sel.sum() < 3:
            out.append((float(t), None))
            continue
        x = ends[sel] - t
        over = far = False
        for j in range(len(NAMES)):
            y = R[sel, j]
            ok = ~np.isnan(y)
            if ok.sum() < 3:
                continue
            slope, intercept = np.polyfit(x[ok], y[ok], 1)
            over |= intercept + slope * HORIZON_S > sla
            far |= intercept + slope * BREACH_RESOLVE_FACTOR * HORIZON_S > sla
        out.append((float(t), True if over else (False if not far else None)))
    return out


# ---------------------------------------------------------------------------------- scoring
@dataclass
class Score:
    """One alerting method on one run."""

    breach: float | None              # time of the (first) actual breach, s after START
    lead: float | None                # breach - last firing at or before it
    missed: bool                      # a breach with no firing before it
    firings: int
    false_alarms: int


def score(fired: list[float], breaches: list[tuple[float, float | None]]) -> Score:
    first = breaches[0][0] if breaches else None
    active = [(b, e if e is not None else math.inf) for b, e in breaches]
    false = sum(1 for t in fired
                if not any(b <= t + HORIZON_S and e >= t for b, e in active))
    lead = None
    missed = False
    if first is not None:
        before = [t for t in fired if t < first]          # at the breach's own solve: a miss
        lead = first - max(before) if before else None
        missed = not before
    return Score(None if first is None else first - START, lead, missed, len(fired), false)


def run_one(spec: RunSpec, capacity: int,
            variants: tuple[tuple[str, float], ...]) -> dict[str, Any]:
    """Simulate ``spec``; the pipeline's predicted_breach for each ``(demand_policy,
    idc_threshold)`` variant, the baseline, the actual breach."""
    t0 = time.perf_counter()
    recs = records(spec, capacity)
    breaches = breach_episodes(recs, spec.sla_s)
    out: dict[str, Any] = {"spec": spec, "capacity": capacity}
    for policy, thr in variants:
        seen: dict[str, Any] = {"solves": 0, "map": 0, "idc": {}}

        def watch(outputs: Any, _pipeline: Any, seen: dict[str, Any] = seen) -> None:
            for pred in outputs.predictions:
                if pred.get("model") is None:
                    continue
                seen["solves"] += 1
                seen["map"] += pred["model"] in ("map", "map-fes")
                for tier, t in pred.get("tiers", {}).items():
                    if t.get("idc") is not None:
                        seen["idc"][tier] = t["idc"]
        with tempfile.TemporaryDirectory() as d:
            summary = run_embedded(recs, config(spec, thr, policy), d, on_outputs=watch)
        out[("model", policy, thr)] = seen
        ev = summary.alert_events
        # a firing with update "trust" restates the active alert under a new model trust
        # (streams.predict.confidence.trust_events): the same alarm, not a new firing
        fired = [a["time"] for a in ev if a["alert"] == "predicted_breach"
                 and a["state"] == "firing" and a.get("update") != "trust"]
        current = [a["time"] for a in ev if a["alert"] == "current_breach"
                   and a["state"] == "firing"]
        out[("perfcast", policy, thr)] = score(fired, breaches)
        out[("agree", policy, thr)] = (min(current) if current else None) == \
            (breaches[0][0] if breaches else None)
    times, _ = interval_response(recs)
    base = episodes(baseline_conditions(recs, spec.sla_s, times[:-1]))
    out["baseline"] = score([b for b, _ in base], breaches)
    out["seconds"] = time.perf_counter() - t0
    return out


def specs(kind: str, runs: int) -> list[RunSpec]:
    """``runs`` runs of ``kind``: slopes and SLAs cycled, the last third stopping below
    capacity; seeds 0, 1, ..."""
    out = []
    for i in range(runs):
        out.append(RunSpec(kind, seed=i, slope=SLOPES[i % len(SLOPES)],
                           sla_s=SLAS[(i // len(SLOPES)) % len(SLAS)],
                           stops_below=i >= runs - max(runs // 3, 1)))
    return out


# ---------------------------------------------------------------------------------- tables
def _lead(scores: list[Score]) -> str:
    leads = [s.lead for s in scores if s.lead is not None]
    if not leads:
        return "– | – | –"
    return f"{np.median(leads) / 60:.1f} | {min(leads) / 60:.1f} | {max(leads) / 60:.1f}"


def row(label: str, scores: list[Score], stops: list[bool]) -> str:
    breached = [s for s in scores if s.breach is not None]
    caught = [s for s in breached if not s.missed]
    false = sum(s.false_alarms for s in scores)
    runs_false = sum(1 for s in scores if s.false_alarms)
    stop_false = sum(1 for s, st in zip(scores, stops) if st and s.firings and s.breach is None)
    n_stop_clean = sum(1 for s, st in zip(scores, stops) if st and s.breach is None)
    return (f"| {label} | {len(scores)} | {len(breached)} | {len(caught)}/{len(breached)} | "
            f"{_lead(caught)} | {false} | {runs_false} | {stop_false}/{n_stop_clean} |")


HEADER = ("| kind / method | runs | runs with a breach | alerted before the breach | "
          "lead median, min | lead min, min | lead max, min | false alarms | "
          "runs with a false alarm | "
          "alerted, no breach (ramp stopped below capacity) |\n|---|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 runs per kind, two thresholds")
    ap.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--shapes", action="store_true",
                    help="three-tier multi-core shapes against predict_linear and Holt "
                         "(bench/accuracy/alert_shapes.py)")
    ap.add_argument("--truth-grid", action="store_true",
                    help="with --shapes: re-simulate the truth capacities first")
    ap.add_argument("--seeds", type=lambda s: tuple(int(x) for x in s.split(",")),
                    help="with --shapes: comma-separated seeds (default 0,1,2,3; --quick: 0); "
                         "e.g. 4,5,6,7 for held-out runs")
    ap.add_argument("--kinds", type=lambda s: tuple(s.split(",")),
                    help="with --shapes: comma-separated kinds (default bursty,non_bursty)")
    ap.add_argument("--only", type=lambda s: tuple(s.split(",")),
                    help="with --shapes: comma-separated shape names (default all)")
    args = ap.parse_args(argv)
    if args.shapes:
        from bench.accuracy import alert_shapes
        alert_shapes.main(args.quick, args.jobs, args.truth_grid, seeds=args.seeds,
                          kinds=args.kinds, shapes=args.only)
        return
    runs = 4 if args.quick else 12
    sweep = (10.0, 300.0) if args.quick else (3.0, 10.0, 100.0, 300.0)
    t0 = time.perf_counter()
    caps = {(k, s): true_capacity(k, s) for k in KINDS for s in SLAS}
    print("True capacity (users) per kind and SLA: "
          + ", ".join(f"{k} {s:g} s: {c}" for (k, s), c in caps.items()))
    others = tuple((p, THRESHOLD) for p in DEMAND_POLICIES if p != DEFAULT_POLICY)
    tasks = []
    for kind in KINDS:
        for spec in specs(kind, runs):
            thr = sweep
            tasks.append((spec, caps[kind, spec.sla_s],
                          tuple((DEFAULT_POLICY, t) for t in thr) + others))
    tasks.sort(key=lambda t: -len(t[2]))               # long tasks first
    results = []
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = [pool.submit(run_one, *t) for t in tasks]
        for done in as_completed(futures):
            results.append(done.result())
            print(f"  {len(results)}/{len(tasks)} runs ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
    by_kind = {k: sorted([r for r in results if r["spec"].kind == k],
                         key=lambda r: r["spec"].seed) for k in KINDS}
    print(f"\n## Lead time and false alarms ({runs} runs per kind; horizon {HORIZON_S / 60:g} min,"
          f" solve every {SOLVE_S:g} s, 5-s windows, idc_threshold {THRESHOLD:g}; lead in "
          f"minutes; perfcast per demand_policy, default {DEFAULT_POLICY})\n")
    print(HEADER)
    for kind in KINDS:
        rs = by_kind[kind]
        stops = [r["spec"].stops_below for r in rs]
        for policy in DEMAND_POLICIES:
            print(row(f"{kind} / perfcast ({policy})",
                      [r["perfcast", policy, THRESHOLD] for r in rs], stops))
        print(row(f"{kind} / baseline (predict_linear)", [r["baseline"] for r in rs], stops))
    print("\nPer run (lead in minutes; '-' no breach; 'miss' breach without an alert before it)")
    print("| kind | seed | slope users/min | SLA s | ramp stops below | breach at min | "
          + " | ".join(f"{p} lead | {p} false" for p in DEMAND_POLICIES)
          + " | baseline lead | baseline false |")
    print("|---|---|---|---|---|---|" + "---|---|" * (len(DEMAND_POLICIES) + 1))

    def lead(x: Score) -> str:
        return "-" if x.breach is None else ("miss" if x.missed else f"{x.lead / 60:.0f}")
    for kind in KINDS:
        for r in by_kind[kind]:
            s, b = r["spec"], r["baseline"]
            ps = [r["perfcast", p, THRESHOLD] for p in DEMAND_POLICIES]
            print(f"| {kind} | {s.seed} | {s.slope:g} | {s.sla_s:g} | {'yes' if s.stops_below else 'no'} | "
                  f"{'-' if b.breach is None else f'{b.breach / 60:.0f}'} | "
                  + " | ".join(f"{lead(p)} | {p.false_alarms}" for p in ps)
                  + f" | {lead(b)} | {b.false_alarms} |")
    agree = sum(r["agree", DEFAULT_POLICY, THRESHOLD] for r in results)
    print(f"\nActual breach recomputed from the windows = the pipeline's first current_breach "
          f"firing in {agree}/{len(results)} runs")
    print(f"\n## idc_threshold ({runs} runs per kind, demand_policy {DEFAULT_POLICY})\n")
    print(HEADER.replace("kind / method", "kind / idc_threshold"))
    for kind in KINDS:
        rs = by_kind[kind]
        stops = [r["spec"].stops_below for r in rs]
        for thr in sweep:
            print(row(f"{kind} / {thr:g}", [r["perfcast", DEFAULT_POLICY, thr] for r in rs],
                      stops))
    print("\nWhere the tiers sit: the index of dispersion I the pipeline measured at the last "
          "solve (median, min-max over runs) and the share of solves on the MAP network")
    print("| kind | I front | I db | " + " | ".join(f"MAP solves, idc_threshold {t:g}"
                                                    for t in sweep) + " |")
    print("|---|---|---|" + "---|" * len(sweep))
    for kind in KINDS:
        rs = by_kind[kind]
        cells = []
        for tier in ("front", "db"):
            v = [r["model", DEFAULT_POLICY, THRESHOLD]["idc"].get(tier) for r in rs]
            v = [x for x in v if x is not None]
            cells.append(f"{np.median(v):.3g} ({min(v):.3g}-{max(v):.3g})" if v else "–")
        for thr in sweep:
            m = [r["model", DEFAULT_POLICY, thr] for r in rs]
            share = sum(x["map"] for x in m) / max(sum(x["solves"] for x in m), 1)
            cells.append(f"{share:.0%}")
        print(f"| {kind} | " + " | ".join(cells) + " |")
    cpu = sum(r["seconds"] for r in results)
    print(f"\n({time.perf_counter() - t0:.0f} s wall, {cpu:.0f} s in runs)")


if __name__ == "__main__":
    main()
