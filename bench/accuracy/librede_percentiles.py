"""Measured per-window p95 of a real host against perfcast's predicted p95 (numbers, no pass/fail).

    python -m bench.accuracy.librede_percentiles                 # the three runs, 60-s windows
    python -m bench.accuracy.librede_percentiles --window 30 --markdown
    python -m bench.accuracy.librede_percentiles --runs experiment2-3wcs-no_overload --minutes 60
    python -m bench.accuracy.librede_percentiles --disciplines ps     # the host declared PS

The data: ``librede_synthetic_app`` of the LibReDE / SARDE data (Spinner et al. (2014); Grohmann
et al. (2021)), read in place from ``$PERFCAST_REAL_DATA`` (default ``../shared/data/real``
beside the repository, never copied): three 3-hour runs of a containerised synthetic
application on a real host under an open, sinusoidally varying load of 3 request classes --
``wc{1,2,3}.csv`` (``unix_ts,response_time``: one row per request, the response time in ms),
``10.1.234.186.csv`` (``unix_ts,cpu_percent`` per second). ``experiment1`` reaches 100% CPU
(overload), ``experiment3`` varies the class mix (classes absent for an hour).

**Windows** (``--window`` s, default 60): one tier ``host`` per window with the requests whose
timestamp falls in it as its per-class completions (the timestamp's meaning -- sent or done --
is not stated; a request's response time is far below the window), their mean response time,
their measured p50/p95/p99 as the entry tier's ``response_time_quantiles_s`` (the input
contract's measured quantiles), and the mean CPU busy fraction as ``utilization`` of one
core (the core count is not stated: ``--cores``); the tier's discipline ``--disciplines``
(``fcfs``, ``ps``: processor sharing, as an operating system's CPU; both by default, side by
side on the same windows). No ``users``: the pipeline takes the workload
as open (``workload = "auto"``) and predicts each class's quantiles (``predict_quantiles =
"always"``) from the demands it estimates.

**Compared**: the prediction at each window's solve (``response_time_quantiles_s["p95"]`` at
the current rate, per class) against that window's measured p95: relative error, median and
90th percentile of ``|error|`` per class, over the windows **within the model's domain** --
after the first ``--skip`` minutes (the estimates settling), utilization measured and below
``--max-util`` (0.9: overload is outside an open model's steady state), at least
``--min-requests`` of the class in the window (a p95 of fewer is noise). Windows outside
are counted by reason; how many inside the pipeline trusted (``model_trusted``) is stated.
``mean`` is the same for the mean response time, beside: whether the tail's error is the
mean's.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from bench.accuracy.real_traces import data_root
from bench.tables import Table
from streams.cli.embedded import run_embedded
from streams.core.config import Config, SystemConfig

FOLDER = "librede_synthetic_app"
RUNS = ("experiment1-3wcs", "experiment2-3wcs-no_overload",
        "experiment3-3wcs-varying_workloadmix")
CLASSES = ("wc1", "wc2", "wc3")
HOST = "10.1.234.186.csv"
MEASURED = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


def run_dir(name: str) -> Path | None:
    """The run's folder, or None where the data is absent."""
    root = data_root()
    path = None if root is None else root / FOLDER / name
    return path if path is not None and path.is_dir() else None


def load(path: Path, minutes: float | None = None
         ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The per-second CPU (``(t, busy fraction)`` rows) and per class the ``(t, response
    time s)`` rows, the first ``minutes`` only (all: None)."""
    cpu = np.loadtxt(path / HOST, delimiter=",", ndmin=2)
    t0 = float(cpu[0, 0])
    stop = math.inf if minutes is None else t0 + 60.0 * minutes
    cpu = cpu[cpu[:, 0] < stop]
    cpu[:, 1] /= 100.0
    reqs = {}
    for c in CLASSES:
        rows = np.loadtxt(path / f"{c}.csv", delimiter=",", ndmin=2)
        rows = rows[rows[:, 0] < stop]
        rows[:, 1] /= 1000.0
        reqs[c] = rows
    return cpu, reqs


def windows(cpu: np.ndarray, reqs: dict[str, np.ndarray], window_s: float, cores: int
            ) -> tuple[list[dict[str, Any]], list[dict[str, np.ndarray]]]:
    """Input-contract records of complete ``window_s``-s windows from the first CPU sample,
    and per window each class's response times (s)."""
    t0 = math.ceil(float(cpu[0, 0]) / window_s) * window_s    # the solves' grid
    count = int((cpu[-1, 0] - t0) // window_s)
    records, samples = [], []
    cpu_bin = np.floor((cpu[:, 0] - t0) / window_s).astype(int)
    bins = {c: np.floor((r[:, 0] - t0) / window_s).astype(int) for c, r in reqs.items()}
    for k in range(count):
        busy = cpu[cpu_bin == k, 1]
        per = {c: reqs[c][bins[c] == k, 1] for c in CLASSES}
        rec: dict[str, Any] = {
            "system": "host", "tier": "host", "end": t0 + (k + 1) * window_s,
            "window_s": window_s, "cores": cores,
            "completions": {c: int(r.size) for c, r in per.items()}}
        if busy.size:
            rec["utilization"] = float(min(busy.mean(), 1.0))
        rts = {c: float(r.mean()) for c, r in per.items() if r.size}
        if rts:
            rec["response_time_s"] = rts
        qs = {c: dict(zip(MEASURED, np.quantile(r, list(MEASURED.values())).tolist()))
              for c, r in per.items() if r.size}
        if qs:
            rec["response_time_quantiles_s"] = qs
        records.append(rec)
        samples.append(per)
    return records, samples


def predict(records: list[dict[str, Any]], discipline: str = "fcfs"
            ) -> dict[float, dict[str, Any]]:
    """The pipeline's predictions with a model, by solve time, the host tier declared
    ``discipline`` (``disciplines = { host = "ps" }``: processor sharing)."""
    preds: dict[float, dict[str, Any]] = {}

    def watch(outputs: Any, _pipeline: Any) -> None:
        preds.update((p["time"], p) for p in outputs.predictions if p.get("model"))

    cfg = Config(systems={"host": SystemConfig(tiers=("host",), predict_quantiles="always",
                                               solve_offset_s=0.0,
                                               disciplines={"host": discipline})})
    with tempfile.TemporaryDirectory() as d:
        run_embedded(records, cfg, d, on_outputs=watch)
    return preds


def compare(name: str, records: list[dict[str, Any]], samples: list[dict[str, np.ndarray]],
            preds: dict[float, dict[str, Any]], skip_s: float, max_util: float,
            min_requests: int) -> tuple[dict[str, dict[str, list[float]]], Counter, int, int]:
    """Per class the relative errors of the predicted p95 and mean over the windows within
    the domain, the windows outside it by reason, the windows compared and how many of
    those the pipeline trusted (``model_trusted``)."""
    errors: dict[str, dict[str, list[float]]] = {c: {"p95": [], "mean": [], "U": []}
                                                 for c in CLASSES}
    outside: Counter = Counter()
    t0 = records[0]["end"] - records[0]["window_s"]
    inside = trusted = 0
    for rec, per in zip(records, samples):
        p = preds.get(rec["end"])
        u = rec.get("utilization")
        reason = ("settling" if rec["end"] - t0 <= skip_s else
                  "no solve" if p is None else
                  "no utilization" if u is None else
                  f"overload (U >= {max_util:g})" if u >= max_util else None)
        if reason:
            outside[reason] += 1
            continue
        inside += 1
        trusted += bool(p.get("model_trusted"))
        for c in CLASSES:
            part = (p.get("classes") or {}).get(c) or {}
            q = (part.get("response_time_quantiles_s") or {}).get("p95")
            r = per[c]
            if r.size < min_requests:
                outside[f"{c}: fewer than {min_requests} requests"] += 1
                continue
            if q is None or part.get("response_time") is None:
                outside[f"{c}: no predicted p95"] += 1
                continue
            meas = float(np.quantile(r, 0.95))
            errors[c]["p95"].append((q - meas) / meas)
            errors[c]["mean"].append((part["response_time"] - r.mean()) / r.mean())
            errors[c]["U"].append(u)
    return errors, outside, inside, trusted


def _pct(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{100 * v:+.0f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="*", default=list(RUNS))
    ap.add_argument("--window", type=float, default=60.0, help="window length, s")
    ap.add_argument("--minutes", type=float, default=None, help="the first minutes only")
    ap.add_argument("--cores", type=int, default=1, help="the host's cores (not stated)")
    ap.add_argument("--skip", type=float, default=20.0, help="minutes left to settle")
    ap.add_argument("--max-util", type=float, default=0.9)
    ap.add_argument("--min-requests", type=int, default=100)
    ap.add_argument("--disciplines", nargs="+", default=["fcfs", "ps"],
                    choices=["fcfs", "ps"], help="the host tier's discipline(s), side by side")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    table = Table(f"Predicted against measured per-window p95 ({args.window:g}-s windows, "
                  "within the domain)",
                  ["run", "discipline", "class", "windows", "U range", "p95 meas (ms, median)",
                   "p95 error: median", "|p95 error| median", "|p95| 90th pct",
                   "mean error: median"])
    notes = []
    for name in args.runs:
        path = run_dir(name)
        if path is None:
            print(f"{name}: data absent (set $PERFCAST_REAL_DATA)")
            return 1
        cpu, reqs = load(path, args.minutes)
        records, samples = windows(cpu, reqs, args.window, args.cores)
        short = name.split("-")[0]
        for discipline in args.disciplines:
            preds = predict(records, discipline)
            errors, outside, inside, trusted = compare(name, records, samples, preds,
                                                       60.0 * args.skip, args.max_util,
                                                       args.min_requests)
            for c in CLASSES:
                e = errors[c]
                if not e["p95"]:
                    table.add(short, discipline, c, 0, "-", "-", "-", "-", "-", "-")
                    continue
                p95 = np.array(e["p95"])
                meas = [float(np.quantile(s[c], 0.95)) for s in samples if s[c].size]
                table.add(short, discipline, c, len(p95),
                          f"{min(e['U']):.2f}-{max(e['U']):.2f}",
                          f"{1000 * np.median(meas):.0f}", _pct(float(np.median(p95))),
                          f"{100 * np.median(np.abs(p95)):.0f}%",
                          f"{100 * np.quantile(np.abs(p95), 0.9):.0f}%",
                          _pct(float(np.median(e["mean"]))))
            notes.append(f"{short} ({discipline}): {len(records)} windows, {inside} inside the "
                         f"domain ({trusted} with the model trusted); outside: "
                         + (", ".join(f"{k} {v}" for k, v in sorted(outside.items()))
                            or "none"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(table.render(args.markdown))
    print()
    for n in notes:
        print(f"- {n}")
    print(f"\ncores {args.cores}; commit {commit}; {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
