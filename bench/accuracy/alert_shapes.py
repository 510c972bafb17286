"""Alert quality on the shapes people run: perfcast's predicted_breach
against ``predict_linear`` and Holt's double exponential smoothing, same runs, three-tier
multi-core systems. Run through ``python -m bench.accuracy.alerts --shapes [--quick]``.

Systems (the multi-core shop, case (b), bench/e2e/multicore.py): web 4 cores (exponential, 8 ms), app 4
cores (exponential, 10 ms), db 8 cores of mean 16 ms; think time 1 s; classes ``browse`` (80%,
x0.75 at the db) and ``buy`` (20%, x2); SLA 0.1 s for both. Kinds: ``bursty`` -- the db's
service-time sequence is Mi et al.'s (2008) MAP(2) (I ~ 200); ``non_bursty`` -- exponential db.
Simulated by :mod:`solvers.simulation.physical` (cores, FCFS, the correlated sequence),
monitored in 5-s input-contract windows after 2 simulated minutes (queues not empty when
monitoring starts; every method sees the same windows). ``CAPACITY`` is the truth: the
population whose worst class's long-run mean response time crosses the SLA in the simulation
(``--truth-grid``).

Shapes (fractions of ``CAPACITY``): ``ramp_slow`` / ``ramp_medium`` / ``ramp_fast`` -- 20 min
at 40%, then one user at a time to 130% over 60 / 30 / 10 minutes, then 10 min there;
``flat_90`` / ``flat_105`` -- 60 min at 90% / 105% from the start.

**Measured breach**: at each of the pipeline's solve times ``t`` (every 60 s), per class the
completion-weighted mean response time of each tier over the windows ending in
``(t - 300 s, t]``, summed over the tiers (a 5-minute sliding mean, what
``rate(sum[5m]) / rate(count[5m])`` gives); condition "some class above the SLA", clear when
every class is at or below 0.9 SLA, in between the dead band; it becomes a breach episode through
the pipeline's hysteresis (2 consecutive solves to fire, 3 to resolve: the onset is the
second). Evaluated once 5 minutes of windows exist.

**Methods** (all evaluated at the pipeline's solve times, horizon H = the pipeline's default
15 min, the same hysteresis): perfcast -- the ``predicted_breach`` alert of the embedded
pipeline configured with the tiers and the SLA only (every other setting default);
``predict_linear`` -- per class the least-squares line through the per-window (5 s) measured
response time over the last 15 minutes, at ``t + H`` above the SLA (the condition of
bench/accuracy/alerts.py section 4's baseline); Holt -- the same over the 1-minute mean response
time (per tier completion-weighted over ``(t - 60, t]``, summed) with sf 0.3, tf 0.1 (level
memory ~3 samples, trend ~10: about the 15-minute span of the line). Like perfcast, the
baselines decide from the first solve on (with >= 3 samples per class); sensitivity variants
(other inputs, factors, 5 minutes of history before the first decision) are printed too.
Scoring: :mod:`bench.accuracy.alert_scoring`.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.accuracy.alert_baselines import (Forecaster, forecast_conditions, holt,
                                    linear_forecast)
from bench.accuracy.alert_scoring import (RunScore, Summary, hysteresis_episodes,
                                 score_alerts, summarize)
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from solvers.simulation.physical import (PhysicalNetwork, Tier, monitor_physical,
                                         simulate_physical)
from streams.core.config import Config, SystemConfig
from streams.cli.embedded import run_embedded
from streams.engine.system import BREACH_RESOLVE_FACTOR, CURRENT_RESOLVE_FACTOR

SLA_S = 0.1
THINK_S = 1.0
WINDOW_S = 5.0
START = 1_795_000_000.0
CLASSES = ("browse", "buy")
MIX = (0.8, 0.2)
TIERS = ("web", "app", "db")
KINDS = ("bursty", "non_bursty")
#: truth capacity (users) per kind: simulated grids, see docs/accuracy.md section 10
CAPACITY = {"bursty": 214.0, "non_bursty": 420.0}
BREACH_WINDOW_S = 300.0
BREACH_WINDOWS_S = (BREACH_WINDOW_S, 60.0, 900.0)   # the definition, then its sensitivity
RATE_WINDOW_S = 60.0
DEFAULTS = SystemConfig()
HORIZON_S = DEFAULTS.horizon_s
SPAN_S = DEFAULTS.trend_window_s           # the baselines look back as far as perfcast's trend
HOLT = (0.3, 0.1)
MIN_HISTORY_S = 300.0                     # a sensitivity variant: baselines wait 5 minutes
WARMUP_S = 120.0                          # simulated before monitoring starts (queues not empty)


@dataclass(frozen=True)
class Shape:
    """A load shape: ``hold_s`` at ``start`` x capacity, then to ``end`` x capacity over
    ``ramp_s`` (one user at a time), then ``after_s`` there."""

    name: str
    start: float
    end: float
    hold_s: float
    ramp_s: float
    after_s: float

    def schedule(self, capacity: float) -> tuple[int, list[tuple[float, int]], float]:
        """``(initial users, [(t, users)], duration)``."""
        a, b = int(round(self.start * capacity)), int(round(self.end * capacity))
        steps = abs(b - a)
        sched = [(self.hold_s + self.ramp_s * k / steps, a + k * (1 if b > a else -1))
                 for k in range(1, steps + 1)] if self.ramp_s > 0 and steps else []
        return a, sched, self.hold_s + self.ramp_s + self.after_s


SHAPES = (Shape("ramp_slow", 0.4, 1.3, 1200.0, 3600.0, 600.0),
          Shape("ramp_medium", 0.4, 1.3, 1200.0, 1800.0, 600.0),
          Shape("ramp_fast", 0.4, 1.3, 1200.0, 600.0, 600.0),
          Shape("flat_90", 0.9, 0.9, 3600.0, 0.0, 0.0),
          Shape("flat_105", 1.05, 1.05, 3600.0, 0.0, 0.0))


def network(kind: str, population: int) -> PhysicalNetwork:
    """The three-tier shop; the db's service is bursty (MAP(2), I ~ 200) or exponential."""
    db = MAP(BURSTY_D0, BURSTY_D1).scaled(0.016) if kind == "bursty" else 0.016
    return PhysicalNetwork(
        tiers=(Tier("web", 4, 0.008), Tier("app", 4, 0.010),
               Tier("db", 8, db, multipliers=(0.75, 2.0))),
        classes=CLASSES, mix=MIX, think_time=THINK_S, population=population)


def config() -> Config:
    """As a new user would: the tiers and the SLA."""
    return Config(systems={"shop": SystemConfig(tiers=TIERS, sla_s={"*": SLA_S})})


# ------------------------------------------------------------------------------ measured side
@dataclass(frozen=True)
class Windows:
    """The monitoring windows as arrays: ``end`` (W,), per tier ``rk`` = R x completions and
    ``k`` = completions (tiers, W, classes), ``r`` = per-window R summed over the tiers
    (W, classes; NaN where a tier reported none)."""

    end: np.ndarray
    rk: np.ndarray
    k: np.ndarray
    r: np.ndarray


def windows(recs: Sequence[dict[str, Any]]) -> Windows:
    ends = sorted({float(r["end"]) for r in recs})
    index = {e: i for i, e in enumerate(ends)}
    shape = (len(TIERS), len(ends), len(CLASSES))
    rk, k, r = np.zeros(shape), np.zeros(shape), np.full(shape, np.nan)
    for rec in recs:
        m, i = TIERS.index(rec["tier"]), index[float(rec["end"])]
        for j, c in enumerate(CLASSES):
            n, rt = rec["completions"][c], rec["response_time_s"].get(c)
            if n > 0 and rt is not None:
                rk[m, i, j], k[m, i, j], r[m, i, j] = rt * n, n, rt
    return Windows(np.array(ends), rk, k, r.sum(axis=0))


def sliding_mean(w: Windows, times: Sequence[float], width_s: float) -> np.ndarray:
    """Per time ``t`` and class: the per-tier completion-weighted mean R over the windows
    ending in ``(t - width_s, t]``, summed over the tiers; NaN where a tier has no completion
    or the windows do not cover ``width_s`` yet."""
    crk, ck = np.cumsum(w.rk, axis=1), np.cumsum(w.k, axis=1)
    out = np.full((len(times), len(CLASSES)), np.nan)
    for i, t in enumerate(times):
        hi = int(np.searchsorted(w.end, t, side="right")) - 1
        lo = int(np.searchsorted(w.end, t - width_s, side="right")) - 1
        if hi < 0 or w.end[0] - WINDOW_S > t - width_s + 1e-9:
            continue
        s = crk[:, hi] - (crk[:, lo] if lo >= 0 else 0.0)
        n = ck[:, hi] - (ck[:, lo] if lo >= 0 else 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[i] = np.where(n > 0, s / n, np.nan).sum(axis=0)
    return out


def breach_conditions(times: Sequence[float], mean_r: np.ndarray,
                      sla: float) -> list[tuple[float, bool | None]]:
    """Above the SLA (some class) / at or below ``CURRENT_RESOLVE_FACTOR`` x SLA (every
    class) / dead band; no decision while the sliding mean is undefined."""
    out: list[tuple[float, bool | None]] = []
    for t, r in zip(times, mean_r):
        if np.isnan(r).any():
            out.append((float(t), None))
        elif (r > sla).any():
            out.append((float(t), True))
        else:
            out.append((float(t), False if (r <= CURRENT_RESOLVE_FACTOR * sla).all() else None))
    return out


# ---------------------------------------------------------------------------------- one run
@dataclass(frozen=True)
class RunSpec:
    kind: str
    shape: Shape
    seed: int


def _alert_episodes(events: Sequence[dict[str, Any]], alert: str) -> list[tuple[float, Any]]:
    """``(fired, resolved)`` episodes of ``alert``. A ``firing`` event with ``update:
    "trust"`` restates the active alert under a new model trust
    (:func:`streams.predict.confidence.trust_events`): the same episode, not a new one (read
    as a new firing, it left the episode before it open for the rest of the run)."""
    out: list[tuple[float, Any]] = []
    for a in sorted((e for e in events if e["alert"] == alert), key=lambda e: e["time"]):
        if a["state"] == "firing" and a.get("update") == "trust" and out and out[-1][1] is None:
            continue
        if a["state"] == "firing":
            out.append((float(a["time"]), None))
        elif a["state"] == "resolved" and out:
            out[-1] = (out[-1][0], float(a["time"]))
    return out


def baselines(step_s: float = RATE_WINDOW_S) -> dict[str, tuple[str, Forecaster, float]]:
    """Baseline name -> (input series, forecaster, history before the first decision):
    ``window`` = per-window R, ``minute`` = 1-minute means. The first two are the table's
    (deciding from the first solve, as perfcast does); the rest the sensitivity check."""
    lin, hw = linear_forecast, holt(*HOLT, step_s)
    return {"predict_linear": ("window", lin, 0.0),
            "holt": ("minute", hw, 0.0),
            "predict_linear, 5-min history": ("window", lin, MIN_HISTORY_S),
            "holt, 5-min history": ("minute", hw, MIN_HISTORY_S),
            "predict_linear on 1-min means": ("minute", lin, 0.0),
            "holt 0.5/0.5": ("minute", holt(0.5, 0.5, step_s), 0.0),
            "holt 0.1/0.1": ("minute", holt(0.1, 0.1, step_s), 0.0),
            "holt 0.3/0.1 on 5-s windows": ("window", holt(*HOLT, WINDOW_S), 0.0)}


def run_one(spec: RunSpec, capacity: float) -> dict[str, Any]:
    """Simulate ``spec``; score perfcast and every baseline against the measured breach."""
    t0 = time.perf_counter()
    users, sched, duration = spec.shape.schedule(capacity)
    recs = monitor_physical(network(spec.kind, users), duration, WINDOW_S,
                            schedule=[(t + WARMUP_S, n) for t, n in sched], warmup=WARMUP_S,
                            system="shop", start_time=START - WARMUP_S, seed=spec.seed)
    solves: list[dict[str, Any]] = []

    def watch(outputs: Any, _pipeline: Any) -> None:
        for p in outputs.predictions:
            db = p.get("tiers", {}).get("db", {})
            solves.append({"time": float(p["time"]), "model": p.get("model"),
                           "users": p.get("users"), "capacity": p.get("capacity_users"),
                           "ttb": p.get("time_to_breach_s"), "idc": db.get("idc"),
                           "bursty": db.get("bursty")})
    with tempfile.TemporaryDirectory() as d:
        summary = run_embedded(recs, config(), d, on_outputs=watch)
    times = sorted({s["time"] for s in solves})
    w = windows(recs)
    breaches = {width: hysteresis_episodes(
        breach_conditions(times, sliding_mean(w, times, width), SLA_S),
        DEFAULTS.alert_fire_after, DEFAULTS.alert_resolve_after) for width in BREACH_WINDOWS_S}
    minute_t = np.array(times)
    minute_r = sliding_mean(w, times, RATE_WINDOW_S)
    series = {"window": (w.end, w.r), "minute": (minute_t, minute_r)}
    sla = np.full(len(CLASSES), SLA_S)
    alerts = {"perfcast": _alert_episodes(summary.alert_events, "predicted_breach")}
    for name, (inp, fc, history) in baselines().items():
        conds = forecast_conditions(times, *series[inp], sla, fc, SPAN_S, HORIZON_S,
                                    BREACH_RESOLVE_FACTOR, history)
        alerts[name] = hysteresis_episodes(conds, DEFAULTS.alert_fire_after,
                                           DEFAULTS.alert_resolve_after)
    by_width = {width: {name: score_alerts(eps, b, HORIZON_S) for name, eps in alerts.items()}
                for width, b in breaches.items()}
    return {"spec": spec, "breach": breaches[BREACH_WINDOW_S], "alerts": alerts,
            "scores": by_width[BREACH_WINDOW_S], "by_width": by_width, "solves": solves,
            "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------------- truth grid
def truth_capacity(kind: str, grid: Sequence[int], duration: float,
                   seed: int = 7) -> tuple[float, list[tuple[int, float, float]]]:
    """The population where the worst class's simulated mean R crosses the SLA (3
    replications per population, linear interpolation); rows ``(users, R, half-width)``."""
    rows = []
    for n in grid:
        res = simulate_physical(network(kind, n), duration, warmup=duration / 10,
                                replications=3, seed=seed + n)
        worst = max(range(len(CLASSES)), key=lambda c: res.response_time[c].mean)
        rows.append((n, res.response_time[worst].mean, res.response_time[worst].half_width))
    for (n0, r0, _), (n1, r1, _) in zip(rows, rows[1:]):
        if r0 <= SLA_S < r1:
            return n0 + (SLA_S - r0) * (n1 - n0) / (r1 - r0), rows
    return math.nan, rows


# ---------------------------------------------------------------------------------- tables
METHODS = ("perfcast", "predict_linear", "holt")


def _min(x: float | None) -> str:
    return "–" if x is None else f"{x / 60:.1f}"


def _cells(s: Summary) -> str:
    recall = "–" if s.recall is None else f"{s.caught}/{s.breaches}"
    return (f"{recall} | {_min(s.lead_median_s)} | {_min(s.lead_min_s)} | {s.false_alarms} "
            f"({s.runs_with_false_alarm})")


def scenario_table(results: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| kind | shape | runs | " + " | ".join(
        f"{m} recall | {m} lead median | {m} lead min | {m} false alarms (runs)"
        for m in METHODS) + " |", "|---|---|---|" + "---|---|---|---|" * len(METHODS)]
    for kind in KINDS:
        for shape in SHAPES:
            rs = [r for r in results if r["spec"].kind == kind and r["spec"].shape == shape]
            if not rs:
                continue
            lines.append(f"| {kind} | {shape.name} | {len(rs)} | " + " | ".join(
                _cells(summarize([r["scores"][m] for r in rs])) for m in METHODS) + " |")
    for kind in (*KINDS, None):
        rs = [r for r in results if kind is None or r["spec"].kind == kind]
        lines.append(f"| **{kind or 'all'}** | all | {len(rs)} | " + " | ".join(
            _cells(summarize([r["scores"][m] for r in rs])) for m in METHODS) + " |")
    return lines


def sensitivity_table(results: Sequence[dict[str, Any]]) -> list[str]:
    names = ["perfcast", *baselines()]
    lines = ["| method | bursty: recall, lead median / min, false alarms | "
             "non_bursty: recall, lead median / min, false alarms |", "|---|---|---|"]
    for name in names:
        cells = []
        for kind in KINDS:
            s = summarize([r["scores"][name] for r in results if r["spec"].kind == kind])
            cells.append(f"{s.caught}/{s.breaches}, {_min(s.lead_median_s)} / "
                         f"{_min(s.lead_min_s)}, {s.false_alarms}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def breach_definition_table(results: Sequence[dict[str, Any]]) -> list[str]:
    """The three methods under other sliding windows of the measured breach."""
    lines = ["| method | " + " | ".join(
        f"{w / 60:g}-min breach: recall, lead median / min, false alarms"
        for w in BREACH_WINDOWS_S) + " |", "|---|" + "---|" * len(BREACH_WINDOWS_S)]
    for m in METHODS:
        cells = []
        for w in BREACH_WINDOWS_S:
            s = summarize([r["by_width"][w][m] for r in results])
            cells.append(f"{s.caught}/{s.breaches}, {_min(s.lead_median_s)} / "
                         f"{_min(s.lead_min_s)}, {s.false_alarms}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def _at(solves: Sequence[dict[str, Any]], t: float) -> dict[str, Any] | None:
    before = [s for s in solves if s["time"] <= t and s["model"]]
    return before[-1] if before else None


def per_run_table(results: Sequence[dict[str, Any]]) -> list[str]:
    """Per run: breach onsets; each method's lead (or miss) on the first breach and its false
    alarms; perfcast's state at the first onset (model, users -> capacity, db I)."""
    lines = ["| kind | shape | seed | breach onsets (min) | " + " | ".join(
        f"{m} lead / false" for m in METHODS) + " | perfcast at the first onset: model, "
        "users -> capacity, db I |", "|---|---|---|---|" + "---|" * len(METHODS) + "---|"]
    for r in results:
        spec, onsets = r["spec"], [o for o, _ in r["breach"]]
        cells = []
        for m in METHODS:
            s = r["scores"][m]
            lead = "-" if not onsets else (
                "miss" if s.first_lead is None else f"{s.first_lead / 60:.0f}")
            cells.append(f"{lead} / {s.false_alarms}")
        state = "-"
        if onsets:
            p = _at(r["solves"], onsets[0])
            if p:
                idc = "-" if p["idc"] is None else f"{p['idc']:.0f}"
                state = f"{p['model']}, {p['users']} -> {p['capacity']}, {idc}"
        lines.append(f"| {spec.kind} | {spec.shape.name} | {spec.seed} | "
                     f"{', '.join(f'{(o - START) / 60:.0f}' for o in onsets) or '-'} | "
                     + " | ".join(cells) + f" | {state} |")
    return lines


def acceptance(results: Sequence[dict[str, Any]]) -> list[str]:
    """The issue's acceptance, checked against each baseline."""
    out = []
    for base in METHODS[1:]:
        worse = []
        for kind in KINDS:
            for shape in SHAPES:
                rs = [r for r in results if r["spec"].kind == kind and r["spec"].shape == shape]
                p = summarize([r["scores"]["perfcast"] for r in rs])
                b = summarize([r["scores"][base] for r in rs])
                if rs and p.caught < b.caught:
                    worse.append(f"{kind}/{shape.name} {p.caught}/{p.breaches} < "
                                 f"{b.caught}/{b.breaches}")
        p = summarize([r["scores"]["perfcast"] for r in results])
        b = summarize([r["scores"][base] for r in results])
        out.append(f"- against {base}: recall >= on every scenario: "
                   f"{'yes' if not worse else 'no (' + '; '.join(worse) + ')'}; "
                   f"false alarms {p.false_alarms} vs {b.false_alarms}: "
                   f"{'fewer' if p.false_alarms < b.false_alarms else 'NOT fewer'}")
    p = summarize([r["scores"]["perfcast"] for r in results])
    out.append(f"- perfcast's median lead {_min(p.lead_median_s)} min (target >= 5): "
               f"{'yes' if p.lead_median_s is not None and p.lead_median_s >= 300 else 'no'}")
    return out


def main(quick: bool, jobs: int, truth_grid: bool, seeds: Sequence[int] | None = None,
         kinds: Sequence[str] | None = None, shapes: Sequence[str] | None = None) -> None:
    """The tables; ``seeds`` (default 0-3, ``quick``: 0), ``kinds`` and ``shapes`` (names)
    select a subset of the runs (held-out seeds, iterating on one kind)."""
    for k in kinds or ():
        if k not in KINDS:
            raise SystemExit(f"--kinds: unknown kind {k!r} (one of {', '.join(KINDS)})")
    names = [s.name for s in SHAPES]
    for n in shapes or ():
        if n not in names:
            raise SystemExit(f"--only: unknown shape {n!r} (one of {', '.join(names)})")
    t0 = time.perf_counter()
    caps = dict(CAPACITY)
    if truth_grid:
        # (populations, seconds per replication): the bursty tier's slow bursts need long runs
        grids = {"bursty": ([185, 200, 215, 230], 20000.0),
                 "non_bursty": ([400, 410, 420, 430], 3000.0)}
        for kind in KINDS:
            caps[kind], rows = truth_capacity(kind, *grids[kind])
            print(f"{kind}: " + ", ".join(f"{n}: {1000 * r:.1f} ms (+-{1000 * h:.1f})"
                                          for n, r, h in rows) + f" -> {caps[kind]:.0f} users")
    seeds = tuple(seeds) if seeds else (0,) if quick else (0, 1, 2, 3)
    tasks = [RunSpec(k, s, seed) for k in (kinds or KINDS) for s in SHAPES
             if not shapes or s.name in shapes for seed in seeds]
    print(f"Truth capacity (users): " + ", ".join(f"{k} {c:.0f}" for k, c in caps.items())
          + f"; {len(tasks)} runs, seeds {seeds}; horizon {HORIZON_S / 60:g} min, baselines' "
          f"span {SPAN_S / 60:g} min, Holt sf/tf {HOLT[0]}/{HOLT[1]}, measured breach: "
          f"{BREACH_WINDOW_S / 60:g}-min sliding mean > SLA {SLA_S} s")
    results = []
    with ProcessPoolExecutor(max_workers=max(jobs, 1)) as pool:
        futures = [pool.submit(run_one, t, caps[t.kind]) for t in tasks]
        for done in as_completed(futures):
            results.append(done.result())
            r = results[-1]
            cells = ", ".join(
                f"{m} {r['scores'][m].caught}/{r['scores'][m].breaches} leads "
                f"[{' '.join(f'{x / 60:.0f}' for x in r['scores'][m].leads)}] "
                f"false {r['scores'][m].false_alarms}" for m in METHODS)
            print(f"  {len(results)}/{len(tasks)} runs ({time.perf_counter() - t0:.0f} s): "
                  f"{r['spec'].kind} {r['spec'].shape.name} seed {r['spec'].seed}: {cells}",
                  file=sys.stderr, flush=True)
    order = {(k, s.name, seed): i for i, (k, s, seed) in
             enumerate((t.kind, t.shape, t.seed) for t in tasks)}
    results.sort(key=lambda r: order[r["spec"].kind, r["spec"].shape.name, r["spec"].seed])
    print("\n### Recall, lead time (min) and false alarms per scenario\n")
    print("\n".join(scenario_table(results)))
    print("\n### Acceptance\n")
    print("\n".join(acceptance(results)))
    print("\n### Baseline sensitivity (same runs)\n")
    print("\n".join(sensitivity_table(results)))
    print("\n### Measured-breach definition (same runs, every scenario pooled)\n")
    print("\n".join(breach_definition_table(results)))
    print("\n### Per run (first breach: lead in minutes or 'miss'; false alarms)\n")
    print("\n".join(per_run_table(results)))
    cpu = sum(r["seconds"] for r in results)
    print(f"\n({time.perf_counter() - t0:.0f} s wall, {cpu:.0f} s in runs)")
