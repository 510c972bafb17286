"""Throughput of the embedded pipeline core (``streams.pipeline.Pipeline.process``).

Run from the repository root:

    python bench/bench_pipeline.py                       # 100 systems, 60 window ends
    python bench/bench_pipeline.py --bursty              # 10 systems, one bursty tier each
    python bench/bench_pipeline.py --quick               # smaller, for a smoke test

The workload is the issue's target: ``--systems`` systems (100) x 3 tiers x 14 request classes,
windows of 5 s, the model solved on its event-time timer (``SystemConfig.solve_interval_s``,
default 60 s, i.e. every 12 window ends), all in one process. Records are generated
synthetically -- not with the queueing simulator -- and all of them before any timing:

* per system, fixed demands ``D[tier, class]`` (lognormal around 2 ms), cores per tier from
  {1, 2, 4} (all 1 under ``--bursty``: the MAP network needs single-core tiers), users 50-150
  with a slow linear trend, a think time that puts the busiest tier at 35-65% utilization;
* per window, completions per class ~ Poisson(X_c * 5 s) with a slowly drifting class mix (each
  class's share follows its own 10-60 min sine, so the demands are identifiable), the same
  counts at every tier (one visit per tier); utilization ``min(0.98, sum_c n_c D_c / (T cores)
  + N(0, 0.01))``; per-class response time ``D_c / (1 - U)`` with 10% lognormal noise; users;
* records are dicts of the input contract (``end`` in epoch seconds), interleaved the way a
  stream delivers them: for each window end, every system, every tier.

``--bursty``: the last tier of every system has bursty service: a 2-state on/off process per
window (mean sojourn 8 windows off, 4 on) multiplies its per-request busy time by 6 in the
"on" state, so the index of dispersion estimated from (U_k, n_k) is far above the threshold of
10 and the system is solved with the MAP queueing network (``prediction["model"] == "map"``).

Measured (each timing repeated ``--repeat`` times on a fresh ``Pipeline``; best and median are
printed, since other processes may share the 2 cores):

1. records/s through ``Pipeline.process`` with dict records and with JSON bytes (what the Kafka
   worker receives; ``json.dumps`` precomputed), and ``parse_window`` alone for both;
2. the share of the time spent in ``SystemState.solve`` (wrapped in this script only) vs the
   per-window update; the number of solves and the models used (``prediction["model"]``);
3. memory per tier state: ``tracemalloc`` traced memory after the run minus before building
   the pipeline, divided by the number of tiers (includes each system's share: users points,
   alerts), on a separate, untimed run;
4. serialized size of one tier's state, ``len(json.dumps(tier.to_dict()))`` and with
   ``with_history=False``, after the run and -- in a separate run of one system over
   ``--long-ends`` (4,200) ends -- with the history full (``SystemConfig.history`` = 4096
   windows), with the time per solve at full history (the steady-state cost of a solve).
"""

from __future__ import annotations

import argparse
import gc
import json
import shlex
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streams.config import Config, SystemConfig  # noqa: E402
from streams.pipeline import Pipeline  # noqa: E402
from streams.records import parse_window  # noqa: E402
from streams.system import SystemState  # noqa: E402

WINDOW_S = 5.0
TIERS = ("web", "app", "db")
#: 14 TPC-W request classes
CLASSES = ("home", "new_products", "best_sellers", "product_detail", "search_request",
           "search_results", "shopping_cart", "customer_registration", "buy_request",
           "buy_confirm", "order_inquiry", "order_display", "admin_request", "admin_confirm")
#: 2026-11-20T10:00:00Z, event-time origin (as streams.demo)
START = 1_795_168_800.0
TARGET_WPS = 10_000.0
#: relative amplitude of each class's share drift
MIX_DRIFT = 0.5


# ------------------------------------------------------------------------------ workload
def system_records(rng: np.random.Generator, name: str, ends: int, *, bursty: bool = False,
                   window_s: float = WINDOW_S) -> list[list[dict[str, Any]]]:
    """One system's records: ``out[k][j]`` is tier ``j``'s record of window end ``k``."""
    M, C = len(TIERS), len(CLASSES)
    D = np.exp(rng.normal(np.log(2e-3), 0.5, (M, C)))            # s per request
    cores = np.ones(M) if bursty else rng.choice([1.0, 2.0, 4.0], M)
    base_mix = rng.dirichlet(np.full(C, 2.0))
    period = rng.uniform(600.0, 3600.0, C)                        # s, mix drift per class
    phase = rng.uniform(0.0, 2 * np.pi, C)
    users0 = rng.uniform(50.0, 150.0)
    users_amp = rng.uniform(0.1, 0.3)                             # slow +-10..30% swing,
    users_period = rng.uniform(2 * 3600.0, 6 * 3600.0)            # over 2-6 hours
    users_phase = rng.uniform(0.0, 2 * np.pi)
    t = np.arange(1, ends + 1) * window_s                        # s since START
    mix = base_mix * (1.0 + MIX_DRIFT * np.sin(2 * np.pi * t[:, None] / period + phase))
    mix /= mix.sum(axis=1, keepdims=True)                         # (ends, C)
    users = users0 * (1.0 + users_amp * np.sin(2 * np.pi * t / users_period + users_phase))
    users = np.maximum(np.rint(users + rng.normal(0.0, 2.0, ends)), 1)
    # the busiest tier at 35-65% utilization at the starting population and mean mix
    per_request = (D @ base_mix) / cores                          # (M,) busy s per request
    x0 = rng.uniform(0.35, 0.65) / per_request.max()              # requests/s at users0
    X = x0 * users / users0                                       # closed: X ~ N / (Z + R)
    n = rng.poisson(X[:, None] * mix * window_s).astype(float)    # (ends, C), every tier
    work = n @ D.T / (window_s * cores)                           # (ends, M) utilization
    if bursty:                                                    # last tier: on/off service
        on = np.empty(ends, dtype=bool)
        state = False
        for k in range(ends):
            if rng.random() < (1 / 4 if state else 1 / 8):
                state = not state
            on[k] = state
        work[:, -1] *= np.where(on, 6.0, 1.0)
    U = np.clip(work + rng.normal(0.0, 0.01, work.shape), 0.0, 0.98)
    rt = D[None, :, :] / (1.0 - U[:, :, None]) * np.exp(rng.normal(0.0, 0.1, (ends, M, C)))
    out = []
    for k in range(ends):
        end = START + float(t[k])
        row = []
        comp = {c: int(v) for c, v in zip(CLASSES, n[k])}
        for j, tier in enumerate(TIERS):
            row.append({"system": name, "tier": tier, "end": end, "window_s": window_s,
                        "utilization": round(float(U[k, j]), 5), "cores": int(cores[j]),
                        "completions": comp,
                        "response_time_s": {c: round(float(rt[k, j, i]), 6)
                                            for i, c in enumerate(CLASSES) if n[k, i] > 0},
                        "users": int(users[k])})
        out.append(row)
    return out


def workload(systems: int, ends: int, seed: int, bursty: bool = False) -> list[dict[str, Any]]:
    """All records, stream order: for each window end, every system, every tier."""
    rng = np.random.default_rng(seed)
    per_system = [system_records(rng, f"sys{s:03d}", ends, bursty=bursty)
                  for s in range(systems)]
    return [rec for k in range(ends) for sysrec in per_system for rec in sysrec[k]]


# ------------------------------------------------------------------------------ measurement
@dataclass
class Run:
    seconds: float
    solve_seconds: float
    solve_times: list[float]
    models: Counter
    pipeline: Pipeline
    outputs: dict[str, int] = field(default_factory=dict)


class SolveTimer:
    """Wraps ``SystemState.solve`` (in this process only) to time every call."""

    def __init__(self) -> None:
        self.original = SystemState.solve
        self.times: list[float] = []
        self.models: Counter = Counter()

    def __enter__(self) -> "SolveTimer":
        original, times, models = self.original, self.times, self.models

        def timed(state: SystemState, at: float):
            t0 = time.perf_counter()
            out = original(state, at)
            times.append(time.perf_counter() - t0)
            for p in out.predictions:
                models[p.get("model")] += 1
            return out

        SystemState.solve = timed      # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        SystemState.solve = self.original      # type: ignore[method-assign]


def run_pipeline(records: list[Any], config: Config) -> Run:
    pipeline = Pipeline(config)
    process = pipeline.process
    counts = Counter()
    gc.collect()
    with SolveTimer() as timer:
        t0 = time.perf_counter()
        for raw in records:
            out = process(raw)
            counts["estimates"] += len(out.estimates)
            counts["predictions"] += len(out.predictions)
            counts["alerts"] += len(out.alerts)
            counts["deadletter"] += len(out.deadletter)
        seconds = time.perf_counter() - t0
    return Run(seconds, sum(timer.times), timer.times, timer.models, pipeline, dict(counts))


def repeat(fn: Callable[[], Any], n: int) -> list[Any]:
    return [fn() for _ in range(n)]


def time_loop(fn: Callable[[Any], Any], items: list[Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        gc.collect()
        t0 = time.perf_counter()
        for x in items:
            fn(x)
        out.append(time.perf_counter() - t0)
    return out


def traced_bytes(records: list[Any], config: Config) -> tuple[int, Pipeline]:
    """Traced memory held after feeding ``records`` minus before building the pipeline."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    pipeline = Pipeline(config)
    for raw in records:
        pipeline.process(raw)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, pipeline


def tier_sizes(pipeline: Pipeline) -> tuple[float, float, int]:
    """Mean JSON size of a tier's state with and without history, and history rows kept."""
    full, header, rows = [], [], []
    for state in pipeline.systems.values():
        for tier in state.tiers.values():
            full.append(len(json.dumps(tier.to_dict())))
            header.append(len(json.dumps(tier.to_dict(with_history=False))))
            rows.append(sum(len(c["u"]) for c in tier.history.chunks.values()))
    return float(np.mean(full)), float(np.mean(header)), int(np.mean(rows))


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


# ------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bursty", action="store_true",
                    help="one bursty tier per system (MAP model); default systems 10")
    ap.add_argument("--systems", type=int, default=None,
                    help="systems (default 100; 10 with --bursty)")
    ap.add_argument("--ends", type=int, default=60,
                    help="window ends (default 60 = 5 min event time, 5 solves per system)")
    ap.add_argument("--long-ends", type=int, default=4200,
                    help="window ends of the one-system full-history run (0: skip)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions (best, median)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-json", action="store_true", help="skip the JSON-bytes timing")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 10 systems, 24 ends, long run 600 ends, 1 repetition")
    args = ap.parse_args(argv)
    if args.quick:
        args.systems = args.systems or 10
        args.ends, args.long_ends, args.repeat = 24, min(args.long_ends, 600), 1
    systems = args.systems or (10 if args.bursty else 100)
    config = Config()
    cfg = config.defaults
    scenario = "bursty (last tier on/off, all tiers 1 core)" if args.bursty else "default"

    print(f"command: python {' '.join(shlex.quote(a) for a in sys.argv)}")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}; "
          f"best and median of {args.repeat} (machine shared, 2 cores)")
    print(f"scenario: {scenario}; {systems} systems x {len(TIERS)} tiers x {len(CLASSES)} "
          f"classes, {WINDOW_S:g}-s windows, {args.ends} ends "
          f"({args.ends * WINDOW_S / 60:g} min event time), solve every "
          f"{cfg.solve_interval_s:g} s, history {cfg.history}")

    t0 = time.perf_counter()
    records = workload(systems, args.ends, args.seed, bursty=args.bursty)
    gen_s = time.perf_counter() - t0
    n = len(records)
    t0 = time.perf_counter()
    blobs = [json.dumps(r).encode() for r in records]
    dumps_s = time.perf_counter() - t0
    print(f"records: {n:,} generated in {gen_s:.2f} s; JSON {np.mean([len(b) for b in blobs]):.0f} "
          f"B/record, dumped in {dumps_s:.2f} s (not timed below)")
    print()

    runs = repeat(lambda: run_pipeline(records, config), args.repeat)
    secs = [r.seconds for r in runs]
    best = min(runs, key=lambda r: r.seconds)
    med_s = statistics.median(secs)
    solve_share = [r.solve_seconds / r.seconds for r in runs]
    per_window = [(r.seconds - r.solve_seconds) / n * 1e6 for r in runs]
    solves = len(best.solve_times)
    rows: list[tuple[str, str]] = [
        ("Pipeline.process, dict records: records/s (best / median)",
         f"{fmt_rate(n / best.seconds)} / {fmt_rate(n / med_s)}"),
        ("  wall time (best / median)", f"{best.seconds:.2f} s / {med_s:.2f} s"),
        ("  target >= 10,000 windows/s: best is", f"{n / best.seconds / TARGET_WPS:.2f}x target"),
    ]
    if not args.no_json:
        jruns = repeat(lambda: run_pipeline(blobs, config), args.repeat)
        jsecs = [r.seconds for r in jruns]
        rows += [("Pipeline.process, JSON bytes: records/s (best / median)",
                  f"{fmt_rate(n / min(jsecs))} / {fmt_rate(n / statistics.median(jsecs))}"),
                 ("  extra per record for JSON bytes (best vs best)",
                  f"{(min(jsecs) - best.seconds) / n * 1e6:.1f} us")]
        pd = time_loop(parse_window, records, args.repeat)
        pj = time_loop(parse_window, blobs, args.repeat)
        rows += [("parse_window alone, dict / bytes (best, per record)",
                  f"{min(pd) / n * 1e6:.1f} us / {min(pj) / n * 1e6:.1f} us")]
    st = np.array(best.solve_times) * 1e3
    rows += [
        ("solves (best run); per system", f"{solves} ; {solves / systems:g}"),
        ("models used (prediction['model'])",
         ", ".join(f"{k}: {v}" for k, v in sorted(best.models.items(), key=str))),
        ("time in SystemState.solve (best run; min-max over runs)",
         f"{100 * best.solve_seconds / best.seconds:.1f}% "
         f"({100 * min(solve_share):.1f}-{100 * max(solve_share):.1f}%)"),
        ("  per solve: median / p90 / max",
         f"{np.median(st):.1f} / {np.percentile(st, 90):.1f} / {st.max():.1f} ms"),
        ("per-window update (all but solves), per record (best / median)",
         f"{(best.seconds - best.solve_seconds) / n * 1e6:.1f} us / "
         f"{statistics.median(per_window):.1f} us"),
        ("outputs (best run)", ", ".join(f"{k} {v:,}" for k, v in best.outputs.items())),
    ]
    tiers_n = sum(len(s.tiers) for s in best.pipeline.systems.values())
    if not args.no_memory:
        mem, _ = traced_bytes(records, config)
        rows.append((f"memory per tier state after {args.ends} windows (tracemalloc / "
                     f"{tiers_n} tiers)", f"{mem / tiers_n / 1024:.1f} KiB"))
    full, header, kept = tier_sizes(best.pipeline)
    rows.append((f"tier state JSON after {args.ends} windows ({kept} rows): full / header",
                 f"{full / 1024:.1f} KiB / {header / 1024:.1f} KiB"))
    del runs, best

    if args.long_ends:
        long = workload(1, args.long_ends, args.seed + 1, bursty=args.bursty)
        lrun = run_pipeline(long, config)
        lt = np.array(lrun.solve_times) * 1e3
        late = lt[-10:]
        lfull, lheader, lkept = tier_sizes(lrun.pipeline)
        rows += [
            (f"one system, {args.long_ends:,} ends ({len(long):,} records): records/s",
             f"{fmt_rate(len(long) / lrun.seconds)}"),
            ("  solve: first 5 / last 10 (history full), median",
             f"{np.median(lt[:5]):.1f} ms / {np.median(late):.1f} ms; models "
             + ", ".join(f"{k}: {v}" for k, v in sorted(lrun.models.items(), key=str))),
            (f"  tier state JSON, history full ({lkept} rows): full / header",
             f"{lfull / 1024:.1f} KiB / {lheader / 1024:.1f} KiB"),
        ]
        if not args.no_memory:
            lmem, _ = traced_bytes(long, config)
            rows.append(("  memory per tier state, history full (tracemalloc / 3)",
                         f"{lmem / 3 / 1024:.1f} KiB"))
        # steady state: per system and solve interval, 3 tiers x 12 windows and one solve
        per_int = len(TIERS) * cfg.solve_interval_s / WINDOW_S
        upd = (lrun.seconds - sum(lrun.solve_times)) / len(long)
        steady = per_int / (per_int * upd + float(np.median(late)) / 1e3)
        rows.append(("  projected steady state (history full): windows/s",
                     f"{fmt_rate(steady)} ({per_int:g} windows per solve, "
                     f"{upd * 1e6:.0f} us/window + {np.median(late):.1f} ms/solve)"))

    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")


if __name__ == "__main__":
    main()
