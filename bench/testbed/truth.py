"""Ground truth of a testbed run, from the load generator's log (bench/testbed/load.py).

From the requests as the clients saw them, per class and per minute of the run (by the
request's end): the completions, the throughput and the response time's mean, p50, p95, p99.

From the servers (the log's snapshots, start and end of the load, and the idle one before it):

- ``db exec / req``: pg_stat_statements' ``total_exec_time`` of the class's statements (tagged
  ``/* class=NAME */``) per request of the class -- the database's own time per request. It is
  the executor's elapsed time, so it also holds the time the backend waited for the CPU (the
  host is shared) and it leaves out parsing, planning and the wire protocol;
- ``app cpu / req``: the app worker's CPU time during the request (``time.process_time``; a
  sync worker serves one request at a time) -- the app's own CPU per request, without
  gunicorn's accept and the Prometheus scrapes;
- ``busy``: process-exporter's CPU seconds of each tier's process groups (the kernel's
  accounting of every process of the tier, :data:`TIER_GROUPS`: the database's are its
  backends serving the app and the rest of its cluster), less the background rate measured
  while idle (the exporters' scrapes, PostgreSQL's housekeeping);
- ``demand``: the tier's busy CPU per request of each class -- the busy CPU shared out over
  the classes in proportion to the server-reported time above (``db exec`` for the database,
  ``app cpu`` for the app): the total is the kernel's, the split is the servers' own;
- ``db cpu / req`` (``db_backend_cpu_s``): the database backend's own CPU during the class's
  calls, the kernel's clock of the backend process read by the app before and after them --
  the server-reported CPU per request, where the app measured it;
- ``db work / req``: what a request's statements process -- 1 for the classes whose statements
  read a fixed number of rows, the rows of the searched category for ``search`` (its cost is
  the data's). A campaign divides the execution time by it at its lowest load (where the
  backends hardly wait for the CPU) to get each class's execution cost per unit of work, free
  of the wait (:func:`bench.testbed.campaign.cpu_split`): pg_stat_statements' times are
  elapsed, and at 20-40 users the wait for the CPU inflates the long statements' (search +37%)
  more than the short ones' (which the scheduler runs first on waking), so a split by the
  elapsed time gives the short classes 35-60% too little.

    python -m bench.testbed.truth /tmp/load.jsonl [--json truth.json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ResponseStats:
    """The completions of one class (or ``all``) in one interval."""

    cls: str
    n: int
    throughput: float
    mean_s: float
    p50_s: float
    p95_s: float
    p99_s: float


@dataclass(frozen=True)
class ClassTruth:
    """The servers' figures per request of one class, over the load."""

    cls: str
    requests: int
    db_exec_s: float | None
    app_cpu_s: float | None
    app_db_wall_s: float | None
    app_time_s: float | None
    db_demand_s: float | None
    app_demand_s: float | None
    #: the app's queue time per request (X-Request-Start to a worker's start); None in logs
    #: written before the app measured it
    app_queue_s: float | None = None
    #: the work of the class's statements per request (rows of the searched category for a
    #: search, 1 for the fixed-cost classes)
    db_work: float | None = None
    #: the db's busy CPU per request split by the wait-free execution cost
    #: (:func:`bench.testbed.campaign.cpu_split`); None until a campaign sets it
    db_cpu_s: float | None = None
    #: the same with the busy time outside the statements shared per statement call instead
    #: (the other edge of what the counters allow)
    db_cpu_call_s: float | None = None
    #: the class's tracked statements per request (pg_stat_statements' calls)
    db_calls: float | None = None
    #: the database backend's CPU per request during the class's calls (the app's
    #: ``testbed_db_backend_cpu_seconds_total``: the kernel's clock of the backend process);
    #: None in logs written before the app measured it
    db_backend_cpu_s: float | None = None
    #: the app's busy CPU per request with the part outside the requests' timed CPU (accept,
    #: parsing, the scrapes: 50-65% of it) shared equally per request instead of in proportion
    #: to the timed CPU -- the other edge of what the counters allow
    app_demand_req_s: float | None = None


@dataclass(frozen=True)
class TierBusy:
    tier: str
    busy_s: float
    background_s: float
    utilization: float


@dataclass
class Truth:
    mode: str
    duration_s: float
    errors: int
    dropped: int
    run: dict[str, Any]
    overall: list[ResponseStats] = field(default_factory=list)
    minutes: dict[int, list[ResponseStats]] = field(default_factory=dict)
    classes: list[ClassTruth] = field(default_factory=list)
    tiers: list[TierBusy] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def response_stats(cls: str, times: list[float], span_s: float) -> ResponseStats:
    a = np.asarray(times, dtype=float)
    if a.size == 0:
        nan = math.nan
        return ResponseStats(cls, 0, 0.0, nan, nan, nan, nan)
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return ResponseStats(cls, int(a.size), a.size / span_s, float(a.mean()), float(p50),
                         float(p95), float(p99))


#: the shop's data as infra/testbed/up.sh generates it (TESTBED_PRODUCTS, TESTBED_CATEGORIES)
PRODUCTS, CATEGORIES = 200_000, 40
_CATEGORY = re.compile(r"category (\d+)")


def category_sizes(products: int = PRODUCTS, categories: int = CATEGORIES) -> dict[int, int]:
    """Rows per category: schema.sql's rule, ``max(1, round(products / (k H)))`` for the
    ``k``-th of ``categories`` with ``H`` the harmonic number (sizes fall as 1/rank)."""
    h = sum(1.0 / k for k in range(1, categories + 1))
    return {k: max(1, round(products / (k * h))) for k in range(1, categories + 1)}


def request_work(detail: str | None, sizes: dict[int, int]) -> float:
    """The rows a request's statements process, in units of a fixed-cost request: the searched
    category's size where the app's detail names one ("search category 7: 20 results"), else 1."""
    m = _CATEGORY.search(detail or "")
    return float(sizes.get(int(m.group(1)), 1)) if m else 1.0


#: process-exporter's groups of each tier (infra/testbed/up.sh): the database is the backends
#: that serve the app (``db``, what bench/testbed/perfcast.toml reads as the tier's busy time)
#: and the rest of its cluster (``db_server``: postmaster, WAL writer, checkpointer, autovacuum,
#: the monitoring's connection); a log from before the split has ``db`` alone
TIER_GROUPS = {"db": ("db", "db_server"), "app": ("app",)}


def tier_cpu(snap: dict[str, Any], tier: str) -> float | None:
    """A snapshot's CPU seconds of ``tier``: the sum of its :data:`TIER_GROUPS` that the
    snapshot has, ``None`` without any."""
    groups = snap.get("cpu_s")
    if not isinstance(groups, dict):
        return None
    found = [float(groups[g]) for g in TIER_GROUPS.get(tier, (tier,)) if g in groups]
    return sum(found) if found else None


def _cpu_delta(end: dict, start: dict, tier: str) -> float | None:
    a = tier_cpu(end, tier)
    return None if a is None else a - (tier_cpu(start, tier) or 0.0)


def _delta(end: dict, start: dict, *keys: str) -> float | None:
    try:
        a, b = end, start
        for k in keys:
            a, b = a[k], b.get(k, {}) if isinstance(b, dict) else {}
        return float(a) - float(b or 0.0)
    except (KeyError, TypeError):
        return None


def truth(lines: list[dict[str, Any]]) -> Truth:
    snaps = {r["at"]: r for r in lines if r.get("kind") == "snapshot"}
    run = next((r for r in lines if r.get("kind") == "run"), None)
    if run is None:
        raise ValueError("no run line in the log: not a bench/testbed/load.py log")
    reqs = [r for r in lines if "class" in r and "kind" not in r]
    ok = [r for r in reqs if r["status"] == 200]
    t0 = run["start"]
    end_t = snaps["end"]["t"] if "end" in snaps else max((r["end"] for r in reqs), default=t0)
    duration = max(float(run["duration_s"]), max((r["end"] for r in reqs), default=end_t) - t0)
    out = Truth(mode=run["mode"], duration_s=duration,
                errors=sum(1 for r in reqs if r["status"] not in (200, -1)),
                dropped=sum(1 for r in reqs if r["status"] == -1), run=run)
    classes = sorted({r["class"] for r in ok})

    def table(rows: list[dict[str, Any]], span: float) -> list[ResponseStats]:
        res = [response_stats(c, [r["end"] - r["start"] for r in rows if r["class"] == c], span)
               for c in classes]
        return res + [response_stats("all", [r["end"] - r["start"] for r in rows], span)]

    out.overall = table(ok, duration)
    for m in range(max(1, int(math.ceil(duration / 60.0 - 0.05)))):
        lo, hi = t0 + 60 * m, min(t0 + 60 * (m + 1), t0 + duration)
        out.minutes[m] = table([r for r in ok if lo <= r["end"] < hi], max(1e-9, hi - lo))

    start, end, idle = snaps.get("start"), snaps.get("end"), snaps.get("idle")
    if start is None or end is None:
        out.notes.append("no start/end snapshots: the servers' figures are missing")
        return out
    span = end["t"] - start["t"]
    busy: dict[str, float] = {}
    for tier in ("db", "app"):
        d = _cpu_delta(end, start, tier)
        if d is None:
            out.notes.append(f"no process-exporter CPU of {tier}: {end.get('cpu_error')}")
            continue
        bg = 0.0
        before = None if idle is None else _cpu_delta(start, idle, tier)
        if before is not None:
            bg = before / max(1e-9, start["t"] - idle["t"]) * span
        busy[tier] = max(0.0, d - bg)
        out.tiers.append(TierBusy(tier, busy[tier], bg, busy[tier] / span))
    own = _delta(end, start, "cpu_s", "db")
    if "db" in busy and own is not None and "db_server" in (end.get("cpu_s") or {}):
        out.notes.append(f"db: its backends serving the app {own:.3f} s of its "
                         f"{_cpu_delta(end, start, 'db'):.3f} s of CPU (the rest: postmaster, "
                         "housekeeping, the monitoring's queries; the idle background not taken)")
    if "pg" not in end:
        out.notes.append(f"no pg_stat_statements snapshot: {end.get('pg_error', 'no --pg-dsn')}")

    sizes = category_sizes()
    work = {c: [request_work(r.get("detail"), sizes) for r in ok if r["class"] == c]
            for c in classes}
    per: dict[str, dict[str, float | None]] = {}
    for c in classes:
        n = _delta(end, start, "app", c, "requests")
        n = n if n else float(sum(1 for r in ok if r["class"] == c))
        per[c] = {"n": n,
                  "db_exec": (_delta(end, start, "pg", c, "exec_s") or 0.0) / n
                  if "pg" in end else None,
                  "app_cpu": _fdiv(_delta(end, start, "app", c, "cpu_s"), n),
                  "app_db": _fdiv(_delta(end, start, "app", c, "db_s"), n),
                  "app_time": _fdiv(_delta(end, start, "app", c, "time_s"), n),
                  "app_queue": _fdiv(_delta(end, start, "app", c, "queue_s"), n),
                  "work": float(np.mean(work[c])) if work[c] else None,
                  "calls": _fdiv(_delta(end, start, "pg", c, "calls"), n) if "pg" in end
                  else None,
                  "backend_cpu": _fdiv(_delta(end, start, "app", c, "db_cpu_s"), n)}

    def shares(key: str, tier: str) -> dict[str, float | None]:
        total = sum((v[key] or 0.0) * v["n"] for v in per.values())
        if tier not in busy or not total > 0:
            return {c: None for c in per}
        return {c: busy[tier] * (v[key] or 0.0) / total for c, v in per.items()}

    db_d, app_d = shares("db_exec", "db"), shares("app_cpu", "app")
    app_req: dict[str, float | None] = {c: None for c in per}
    if "app" in busy and all(v["app_cpu"] is not None for v in per.values()):
        n_all = sum(v["n"] for v in per.values())
        outside = busy["app"] - sum(v["app_cpu"] * v["n"] for v in per.values())
        app_req = {c: v["app_cpu"] + max(0.0, outside) / n_all for c, v in per.items()}
    out.classes = [ClassTruth(c, int(v["n"]), v["db_exec"], v["app_cpu"], v["app_db"],
                              v["app_time"], db_d[c], app_d[c], v["app_queue"], v["work"],
                              db_calls=v["calls"], db_backend_cpu_s=v["backend_cpu"],
                              app_demand_req_s=app_req[c])
                   for c, v in per.items()]
    if "db" in busy and any(v["db_exec"] for v in per.values()):
        total_exec = sum((v["db_exec"] or 0.0) * v["n"] for v in per.values())
        out.notes.append(f"db: busy CPU {busy['db']:.3f} s against the statements' execution "
                         f"time {total_exec:.3f} s (ratio {busy['db'] / total_exec:.2f})")
    if "app" in busy and any(v["app_cpu"] for v in per.values()):
        total_cpu = sum((v["app_cpu"] or 0.0) * v["n"] for v in per.values())
        out.notes.append(f"app: busy CPU {busy['app']:.3f} s against the requests' own CPU "
                         f"{total_cpu:.3f} s (ratio {busy['app'] / total_cpu:.2f}: accept, "
                         f"parsing, logging, fork overheads outside the timed part)")
    return out


def _fdiv(a: float | None, b: float) -> float | None:
    return None if a is None or not b else a / b


def _ms(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * 1000:.2f}"


def render(t: Truth) -> str:
    lines = [f"{t.mode} load, {t.duration_s:.1f} s, errors {t.errors}, dropped {t.dropped}", "",
             "client-side response time (ms) per class"]
    head = f"{'':>8} {'class':<8} {'n':>6} {'X/s':>7} {'mean':>8} {'p50':>8} {'p95':>8} {'p99':>8}"
    lines.append(head)
    for label, rows in [("all", t.overall)] + [(f"min {m}", r) for m, r in t.minutes.items()]:
        for s in rows:
            lines.append(f"{label:>8} {s.cls:<8} {s.n:>6} {s.throughput:>7.2f} {_ms(s.mean_s):>8} "
                         f"{_ms(s.p50_s):>8} {_ms(s.p95_s):>8} {_ms(s.p99_s):>8}")
    lines += ["", "server-side per request (ms)",
              f"{'class':<8} {'n':>6} {'db exec':>8} {'app cpu':>8} {'app->db':>8} "
              f"{'app time':>8} {'D_db':>8} {'D_app':>8}"]
    for c in t.classes:
        lines.append(f"{c.cls:<8} {c.requests:>6} {_ms(c.db_exec_s):>8} {_ms(c.app_cpu_s):>8} "
                     f"{_ms(c.app_db_wall_s):>8} {_ms(c.app_time_s):>8} {_ms(c.db_demand_s):>8} "
                     f"{_ms(c.app_demand_s):>8}")
    lines += ["", "tiers (process-exporter CPU seconds over the load)"]
    for b in t.tiers:
        lines.append(f"{b.tier:<4} busy {b.busy_s:.3f} s (background {b.background_s:.3f} s "
                     f"subtracted), utilization {b.utilization:.3f}")
    lines += [f"note: {n}" for n in t.notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="ground truth of a testbed load log")
    p.add_argument("log")
    p.add_argument("--json", help="write the figures as JSON here")
    args = p.parse_args(argv)
    with open(args.log, encoding="utf-8") as fh:
        lines = [json.loads(line) for line in fh if line.strip()]
    t = truth(lines)
    print(render(t))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(asdict(t), fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
