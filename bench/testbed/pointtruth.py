"""The per-class demands judged against a point truth: the servers' own CPU per request.

The app counts, per class, the CPU its database backend spent inside the request's database
calls (``testbed_db_backend_cpu_seconds_total``, the kernel's per-task clock of the backend:
bench/testbed/app.py) and its own worker's CPU during the request
(``testbed_request_cpu_seconds_total``). Divided by the class's completions, these are the
server-reported CPU per request at the database and at the app -- one figure per class, not
the two edges between which the busy CPU's split by pg_stat_statements' times can be placed
(:func:`bench.testbed.campaign.cpu_split`).

What the counters leave out is the tier's busy CPU outside the requests (PostgreSQL's WAL
writer, checkpointer and autovacuum; gunicorn's accept and parsing; the exporters' scrapes): the
**coverage** (the counted CPU over the tier's busy CPU, background subtracted) says how much.
A model's demand is the busy CPU per completion (the utilization law, Lazowska et al. 1984),
so it holds that part too; each class is therefore judged two ways: against its counted CPU
per request (``error``), and against the busy CPU shared out in proportion to the counted CPU
(``error_busy``: the split alone, the aggregate taken from the kernel).

Counters over any interval come from the testbed's Prometheus (:func:`fetch_counters`, kept
as a JSON file while the testbed is up: its TSDB goes with it) -- the truth of the first ten
minutes of a ramp, which the load log's start and end snapshots cannot give.

    python -m bench.testbed.pointtruth fetch --prom http://127.0.0.1:19190 --from T0 --to T1 \\
        --out counters.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from bench.testbed.truth import TIER_GROUPS

#: the counters read, by the key of :func:`interval_truth`'s classes
CLASS_COUNTERS = {"requests": 'sum by (handler) (testbed_requests_total{status="200"})',
                  "db_backend_cpu_s": "sum by (handler) (testbed_db_backend_cpu_seconds_total)",
                  "app_cpu_s": "sum by (handler) (testbed_request_cpu_seconds_total)"}


def _tier_counter() -> str:
    """process-exporter's CPU seconds of the tiers' process groups (user and system), each
    tier's groups (:data:`bench.testbed.truth.TIER_GROUPS`: the database's backends serving
    the app and the rest of its cluster) summed under the tier's name."""
    series = "namedprocess_namegroup_cpu_seconds_total"
    for tier, groups in TIER_GROUPS.items():
        if groups != (tier,):
            series = (f'label_replace({series}, "groupname", "{tier}", "groupname", '
                      f'"{"|".join(groups)}")')
    return f"sum by (groupname) ({series})"


TIER_COUNTER = _tier_counter()


def signed_error(model: float | None, true: float | None) -> float | None:
    """``model / true - 1``; ``None`` when either is missing or ``true`` is not positive. Every
    testbed judge's error (:mod:`bench.testbed.campaign` imports it from here: it imports this
    module, so the definition cannot live there)."""
    if model is None or true is None or not true > 0:
        return None
    return model / true - 1.0


def point_truth(truth: dict[str, Any]) -> dict[str, Any]:
    """Per tier and class the counted CPU per request (``db``: the backend's, ``app``: the
    worker's), the same scaled to the tier's busy CPU (``busy``: the counted split of the
    kernel's aggregate), and the tier's ``coverage``; a tier whose counters are missing for
    some class is left out (a log written before the app counted it)."""
    busy = {b["tier"]: b["busy_s"] for b in truth.get("tiers", [])}
    classes = [c for c in truth.get("classes", []) if c.get("requests")]
    out: dict[str, Any] = {}
    for tier, key in (("db", "db_backend_cpu_s"), ("app", "app_cpu_s")):
        if not classes or any(c.get(key) is None for c in classes):
            continue
        counted = sum(c[key] * c["requests"] for c in classes)
        scale = busy[tier] / counted if busy.get(tier, 0.0) > 0 and counted > 0 else None
        out[tier] = {"coverage": None if scale is None else 1.0 / scale,
                     "classes": {c["cls"]: {"counted": c[key],
                                            "busy": None if scale is None else c[key] * scale}
                                 for c in classes}}
    return out


def judge_point(truth: dict[str, Any], used: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The model's per-class demands ``used`` (per tier and class, the rule of
    :func:`bench.testbed.campaign.used_demands`) against :func:`point_truth`: per tier the
    coverage and per class ``model``, ``truth`` (counted CPU per request), ``error``,
    ``truth_busy``, ``error_busy``."""
    out: dict[str, Any] = {}
    for tier, pt in point_truth(truth).items():
        rows = {}
        for cls, v in pt["classes"].items():
            d = used.get(tier, {}).get(cls)
            rows[cls] = {"model": d, "truth": v["counted"],
                         "error": signed_error(d, v["counted"]),
                         "truth_busy": v["busy"], "error_busy": signed_error(d, v["busy"])}
        out[tier] = {"coverage": pt["coverage"], "classes": rows}
    return out


def worst(judged: dict[str, Any], tier: str, key: str = "error") -> float | None:
    """The largest absolute error of a tier's classes (``None`` when none is judged)."""
    errs = [abs(v[key]) for v in judged.get(tier, {}).get("classes", {}).values()
            if v.get(key) is not None]
    return max(errs) if errs else None


# ----------------------------------------------------------------------------- Prometheus
def _query_range(prom: str, query: str, t0: float, t1: float, step: float) -> list[dict]:
    url = (prom.rstrip("/") + "/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": query, "start": f"{t0:.3f}", "end": f"{t1:.3f}", "step": f"{step:g}"}))
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = json.loads(resp.read())
    if body.get("status") != "success":
        raise RuntimeError(f"Prometheus query {query!r} failed: {body.get('error')}")
    return body["data"]["result"]


def fetch_counters(prom: str, t0: float, t1: float, step: float = 5.0) -> dict[str, Any]:
    """The per-class counters and the tiers' CPU seconds from ``t0`` to ``t1``, one sample per
    ``step`` seconds: ``{"step", "from", "to", "classes": {key: {class: [[t, v], ...]}},
    "tiers": {group: [[t, v], ...]}}``. Prometheus' query_range answers at most 11,000 points a
    series: the span is fetched in pieces."""
    if not t1 > t0 or not step > 0:
        raise ValueError(f"fetch_counters wants t1 > t0 and step > 0, got {t0}, {t1}, {step}")
    out: dict[str, Any] = {"step": step, "from": t0, "to": t1,
                           "classes": {k: {} for k in CLASS_COUNTERS}, "tiers": {}}
    piece = 10_000 * step
    a = t0
    while a < t1:
        b = min(t1, a + piece)
        for key, q in CLASS_COUNTERS.items():
            for s in _query_range(prom, q, a, b, step):
                out["classes"][key].setdefault(s["metric"].get("handler", ""), []).extend(
                    [float(t), float(v)] for t, v in s["values"])
        for s in _query_range(prom, TIER_COUNTER, a, b, step):
            out["tiers"].setdefault(s["metric"].get("groupname", ""), []).extend(
                [float(t), float(v)] for t, v in s["values"])
        a = b + step
    return out


def _at(series: list[list[float]], t: float) -> float | None:
    """A counter's value at ``t``: linear between the samples around it; ``None`` outside."""
    prev = None
    for x, v in series:
        if x >= t:
            if x == t or prev is None:
                return v if x == t else None
            (x0, v0) = prev
            return v0 + (v - v0) * (t - x0) / (x - x0)
        prev = (x, v)
    return None


def interval_truth(counters: dict[str, Any], a: float, b: float,
                   background: dict[str, float] | None = None) -> dict[str, Any]:
    """The truth's servers' part over ``[a, b]`` from :func:`fetch_counters`' samples, in the
    shape :func:`point_truth` reads: per class the completions and the counted CPU per
    request, per tier the busy CPU (less ``background``: CPU seconds per second of the idle
    servers, e.g. a run's ``background_s`` over its duration). A counter born inside the
    interval (a fresh testbed's first requests) moves its start to the latest first sample of
    the classes' counters, for every figure alike (``from``)."""
    firsts = [series[0][0] for per_key in counters["classes"].values()
              for series in per_key.values() if series]
    if firsts and a < max(firsts) < b:
        a = max(firsts)

    def delta(series: list[list[float]] | None) -> float | None:
        if not series:
            return None
        v0, v1 = _at(series, a), _at(series, b)
        return None if v0 is None or v1 is None else v1 - v0

    per = counters["classes"]
    classes = []
    for cls in sorted(per.get("requests", {})):
        n = delta(per["requests"][cls])
        if not n:
            continue
        row: dict[str, Any] = {"cls": cls, "requests": n}
        for key in ("db_backend_cpu_s", "app_cpu_s"):
            d = delta(per.get(key, {}).get(cls))
            row[key] = None if d is None else d / n
        classes.append(row)
    tiers = []
    for tier, series in counters.get("tiers", {}).items():
        d = delta(series)
        if d is not None:
            bg = (background or {}).get(tier, 0.0) * (b - a)
            tiers.append({"tier": tier, "busy_s": max(0.0, d - bg), "background_s": bg,
                          "utilization": max(0.0, d - bg) / (b - a)})
    return {"classes": classes, "tiers": tiers, "from": a, "to": b}


def background_rates(truth: dict[str, Any]) -> dict[str, float]:
    """CPU seconds per second of the idle servers, from a run's truth (its tiers'
    ``background_s`` over its duration)."""
    span = truth.get("duration_s") or 0.0
    return {b["tier"]: b["background_s"] / span for b in truth.get("tiers", []) if span > 0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="keep the counters of [--from, --to] from Prometheus")
    f.add_argument("--prom", default="http://127.0.0.1:19190")
    f.add_argument("--from", dest="t0", type=float, required=True, help="epoch seconds")
    f.add_argument("--to", dest="t1", type=float, default=None, help="default: now")
    f.add_argument("--step", type=float, default=5.0)
    f.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    data = fetch_counters(args.prom, args.t0, args.t1 or time.time(), args.step)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(args.out)
    print(f"{sum(len(v) for v in data['classes'].values())} class series, "
          f"{len(data['tiers'])} tier series -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
