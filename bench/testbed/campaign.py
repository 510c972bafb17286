"""The testbed's accuracy campaign: steady closed runs at several populations and a ramp through
the knee, each judged against the ground truth (:mod:`bench.testbed.truth`), never against what
perfcast read.

One campaign (tens of minutes): the testbed up (``infra/testbed/up.sh``) with the exporters,
Prometheus and the load generator on the app's CPU, so that the database's CPU runs the database
alone, and the app and the load generator under SCHED_RR (``--rt-prio``): the other jobs that
share their CPU would otherwise delay each wakeup of a worker, once per database round trip;
then per population a steady run of ``--duration`` seconds, lowest first. Before and
during each run the **foreign CPU** of the database's CPU is read from ``/proc/stat`` (that
CPU's busy time less the database's own, at nice <= 0; time of niced processes apart): a run
whose foreign share exceeds ``--foreign-max`` is repeated (``--repeats``), and marked
``disturbed`` if it never gets under it. Then:

- **the SLO** of each class: 3x its measured mean response time in the lowest run;
- **the measured knee**: the population at which the worst class's measured mean crosses its
  SLO (linear between the two populations around the crossing);
- per run, ``perfcast run --source prometheus`` over the run's own minutes: the last
  prediction's per-class response time against the clients' mean, ``model_trusted``, the
  capacity, and the per-class demands that prediction's model solved with
  (:func:`model_demands`) against the truth's (the tier's busy CPU shared out by the servers'
  own figures);
- **capacity from one low-load run**: the lowest run at or under 30% of the measured knee;
- **the ramp** (``--ramp FROM:TO:SECONDS``): the first firing predicted-breach alert against
  the measured breach (:func:`breach_minute`: after the first minute, the first minute whose
  worst class's mean exceeds its SLO in it and in the next).
- **the demands against the servers' own CPU** where the app counts it
  (:mod:`bench.testbed.pointtruth`): per run, per ramp and after a ramp's first ten minutes
  (the counters of those minutes kept from Prometheus);
- **an open ramp** (``--open-ramp R0:R1:SECONDS[:HOLD]``): flat at ``R0`` for ``HOLD`` seconds,
  whose second half judges the predicted mean response time, then ramped to ``R1``.

The results are one JSON file (``OUT/campaign.json``) and the Markdown tables it prints
(``--markdown``), the source of docs/accuracy.md's "Real system" section.

    python -m bench.testbed.campaign --out /tmp/campaign --markdown
    python -m bench.testbed.campaign --out /tmp/c --populations 4,12 --duration 60 --no-ramp
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.testbed.autogroup import lift_db_autogroup
from bench.testbed.load import MAX_DURATION_S
from bench.testbed.pointtruth import (background_rates, fetch_counters, interval_truth,
                                      judge_point, signed_error)
from bench.testbed.truth import truth as truth_of

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PY = os.environ.get("TESTBED_PYTHON", str(Path.home() / ".cache/perfcast/venv/bin/python"))
#: the SLO of a class, in multiples of its mean response time in the lowest run
SLO_FACTOR = 3.0
#: predictions of the first seconds of a run see a population still starting
WARMUP_S = 60.0
#: :func:`cpu_split`'s key of the db's busy time outside the statements per statement call
CALL = "(per call)"


def _cpu_times(cpu: int) -> dict[str, float]:
    """One CPU's time so far, seconds: ``user`` (at nice <= 0), ``niced`` (user time of
    processes at nice > 0) and ``kernel`` (system, interrupts, steal: of any nice level)."""
    tick = os.sysconf("SC_CLK_TCK")
    for line in Path("/proc/stat").read_text().splitlines():
        parts = line.split()
        if parts[0] == f"cpu{cpu}":
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, parts[1:9])
            return {"user": user / tick, "niced": nice / tick,
                    "kernel": (system + irq + softirq + steal) / tick}
    raise RuntimeError(f"no cpu{cpu} in /proc/stat")


def _group_cpu(name: str) -> dict[str, float]:
    """User and kernel CPU seconds (children reaped included) of the processes called
    ``name`` (``/proc/PID/comm``: PostgreSQL's postmaster and backends are all ``postgres``)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = {"user": 0.0, "kernel": 0.0}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if (p / "comm").read_text().strip() != name:
                continue
            f = [int(x) for x in (p / "stat").read_text().rsplit(")", 1)[1].split()[11:15]]
        except (OSError, IndexError, ValueError):
            continue
        total["user"] += (f[0] + f[2]) / tick
        total["kernel"] += (f[1] + f[3]) / tick
    return total


class ForeignMeter:
    """What else ran on the database's CPU between :meth:`start` and :meth:`stop`, as shares
    of the span. The database's processes are pinned there; ``foreign_share`` is that CPU's
    user time at nice <= 0 less the database's own user time: other work competing with the
    database at its priority (the disturbance a run is judged by). ``niced_share`` (work at
    nice > 0, which yields to the database) and ``kernel_share`` (system time of anyone on that
    CPU less the database's: the niced work's system time cannot be told apart) are
    reported beside it."""

    def __init__(self, cpu: int, db_name: str) -> None:
        self.cpu, self.db_name = cpu, db_name

    def start(self) -> None:
        self.t0, self.cpu0, self.db0 = time.time(), _cpu_times(self.cpu), _group_cpu(self.db_name)

    def stop(self) -> dict[str, float]:
        span = max(1e-9, time.time() - self.t0)
        cpu, db = _cpu_times(self.cpu), _group_cpu(self.db_name)
        d = {k: cpu[k] - self.cpu0[k] for k in cpu}
        ddb = {k: db[k] - self.db0[k] for k in db}
        return {"span_s": span, "db_share": (ddb["user"] + ddb["kernel"]) / span,
                "foreign_share": max(0.0, d["user"] - ddb["user"]) / span,
                "niced_share": d["niced"] / span,
                "kernel_share": max(0.0, d["kernel"] - ddb["kernel"]) / span}


def _sh(args: list[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=True, text=True, cwd=REPO, **kw)


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.update(extra or {})
    return env


#: SCHED_RR priority of the app and the load generator on their CPU (``--rt-prio``; 0: the
#: scheduler's default class, the campaigns before the app owned its CPU)
RT_PRIO = {"prio": 1}
#: the database's scheduling group as the campaign left it
#: (:func:`bench.testbed.autogroup.lift_db_autogroup`; up.sh lifts it too)
DB_AUTOGROUP: dict[str, Any] = {"state": None}


def run_load(out: Path, users: int, duration: float, think: float, aux_cpu: int,
             seed: int, ramp_to: int | None = None,
             rates: tuple[float, float] | None = None,
             hold: float = 0.0) -> list[dict[str, Any]]:
    """One load (bench.testbed.load) on the aux CPU, closed or (``rates``) an open ramp; its
    log's lines. Under SCHED_RR (``RT_PRIO``) like the app: the generator's own wait for its
    CPU behind other jobs is in every response time it logs."""
    rt = ["chrt", "-r", str(RT_PRIO["prio"])] if RT_PRIO["prio"] else []
    args = ["taskset", "-c", str(aux_cpu), *rt, PY, "-m", "bench.testbed.load", "--nice", "0",
            "--duration", str(duration), "--max-requests", "200000", "--seed", str(seed),
            "--out", str(out)]
    if rates is not None:
        args += ["open", "--rate", str(rates[0]), "--ramp-to", str(rates[1]),
                 "--max-in-flight", "400", "--hold", str(hold)]
    else:
        args += ["closed", "--users", str(users), "--think", str(think)]
    if ramp_to is not None:
        args += ["--ramp-to", str(ramp_to)]
    _sh(args, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [json.loads(line) for line in out.read_text().splitlines()]


#: the Prometheus mapping the campaign's perfcast runs read (``--prom-config``)
PROM_CONFIG = {"path": HERE / "perfcast.toml"}


def perfcast_run(out: Path, config: Path, t0: float, t1: float,
                 windows: Path | None = None, prom: Path | None = None,
                 ) -> dict[str, Any]:
    """``perfcast run --source prometheus`` over [t0, t1] (or, given ``windows``, over the
    windows a former run read: ``perfcast run --source FILE``, the same predictions): its
    predictions, estimates, alerts."""
    prom = prom or PROM_CONFIG["path"]
    if windows is None:
        source = ["--source", "prometheus", "--prom-config", str(prom),
                  "--from", str(int(t0)), "--to", str(int(math.ceil(t1)))]
    else:
        keep = out.parent / f"{out.name}-windows.jsonl"
        keep.write_bytes(windows.read_bytes())
        source = ["--source", str(keep)]
    _sh([PY, "-m", "streams.cli.commands", "run", *source, "--config", str(config),
         "--out", str(out)], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def lines(name: str) -> list[dict[str, Any]]:
        f = out / name
        return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []

    return {"predictions": lines("predictions.jsonl"), "estimates": lines("estimates.jsonl"),
            "alerts": lines("alerts.jsonl"), "deadletters": len(lines("deadletter.jsonl"))}


def judge_run(truth: dict[str, Any], pc: dict[str, Any], start: float,
              end: float | None = None) -> dict[str, Any]:
    """The last prediction after the warm-up and before the load's ``end`` (a solve after it
    reads the users' gauge at 0: a model of an idle system), and the last estimates, against
    the truth."""
    preds = [p for p in pc["predictions"] if p.get("classes") and p["time"] >= start + WARMUP_S
             and (end is None or p["time"] <= end)]
    measured = {r["cls"]: r["mean_s"] for r in truth["overall"] if r["cls"] != "all"}
    out: dict[str, Any] = {"solves": len(preds), "deadletters": pc["deadletters"]}
    if preds:
        last = preds[-1]
        out.update(
            users=last["users"], capacity_users=last["capacity_users"],
            model_trusted=last.get("model_trusted"), trust_reasons=last.get("trust_reasons"),
            model_error=last.get("model_error"), bottleneck=last.get("bottleneck_tier"),
            trusted_solves=sum(1 for p in preds if p.get("model_trusted")),
            response_time={c: {"model": v["response_time"], "measured": measured.get(c),
                               "error": signed_error(v["response_time"], measured.get(c))}
                           for c, v in last["classes"].items()},
            pools={name: {"model": v.get("utilization"),
                          "measured": v.get("utilization_measured")}
                   for name, v in (last.get("pools") or {}).items()},
            trusted_off=[  # trusted solves whose worst class is off by more than 20%
                p["time"] for p in preds if p.get("model_trusted") and max(
                    abs(signed_error(v["response_time"], measured.get(c)) or 0.0)
                    for c, v in p["classes"].items()) > 0.20])
    out["demands"] = judge_demands(truth, preds[-1] if preds else None)
    out["point"] = judge_point(truth, model_demands(preds[-1]) if preds else {})
    return out


def judge_demands(truth: dict[str, Any], pred: dict[str, Any] | None) -> dict[str, Any]:
    """Per tier and class the demand ``pred``'s model solved with (:func:`model_demands`)
    against the truth's: the db's busy
    CPU split by the wait-free execution cost where :func:`cpu_split` set it (``db_cpu_s``),
    else by the elapsed execution time (``db_demand_s``, kept as ``truth_elapsed``); the app's
    split by its requests' own CPU."""
    used = model_demands(pred) if pred else {}
    demands: dict[str, dict[str, Any]] = {}
    for c in truth["classes"]:
        for tier, key in (("db", "db_demand_s"), ("app", "app_demand_s")):
            d = used.get(tier, {}).get(c["cls"])
            true = c.get("db_cpu_s") if tier == "db" and c.get("db_cpu_s") else c[key]
            demands.setdefault(tier, {})[c["cls"]] = {"model": d, "truth": true,
                                                      "error": signed_error(d, true)}
            if tier == "app":
                req = c.get("app_demand_req_s")
                demands[tier][c["cls"]].update(truth_req=req, error_req=signed_error(d, req))
            if tier == "db":
                demands[tier][c["cls"]].update(
                    truth_elapsed=c[key], error_elapsed=signed_error(d, c[key]),
                    truth_call=c.get("db_cpu_call_s"),
                    error_call=signed_error(d, c.get("db_cpu_call_s")))
    return demands


def ramp_demands(truth: dict[str, Any], pc: dict[str, Any], end: float) -> dict[str, Any]:
    """The ramp's last solve before ``end`` (its whole history behind it: minutes of windows
    across the populations) against the truth over the whole ramp."""
    preds = [p for p in pc["predictions"] if p.get("classes") and p["time"] <= end]
    return judge_demands(truth, preds[-1] if preds else None)


#: minutes of a ramp after which its per-class demands are judged against the counters' truth
#: of those minutes (the real-traces acceptance: within 15% after ten minutes)
POINT_MINUTES = 10.0


def prom_url() -> str:
    """The testbed's Prometheus (infra/testbed/env.sh's port)."""
    return f"http://127.0.0.1:{os.environ.get('TESTBED_PROM_PORT', '19190')}"


def keep_counters(path: Path, t0: float, t1: float) -> dict[str, Any] | None:
    """The per-class counters of ``[t0, t1]`` from the testbed's Prometheus, kept in ``path``
    (its TSDB is deleted with the testbed); ``None``, said on stderr, when it does not answer."""
    try:
        counters = fetch_counters(prom_url(), t0, t1)
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"  counters of {t0:.0f}-{t1:.0f} not kept: {exc}", file=sys.stderr, flush=True)
        return None
    path.write_text(json.dumps(counters))
    return counters


def load_counters(*paths: Path) -> dict[str, Any] | None:
    """The first of ``paths`` that exists, read (a former campaign's kept counters)."""
    return next((json.loads(f.read_text()) for f in paths if f.exists()), None)


def ramp_point(truth: dict[str, Any], pc: dict[str, Any], start: float, end: float,
               counters: dict[str, Any] | None,
               minutes: float = POINT_MINUTES) -> dict[str, Any]:
    """A ramp's per-class demands against the servers' own CPU per request
    (:func:`bench.testbed.pointtruth.judge_point`): its last solve before ``end`` against the
    whole ramp's counters (``whole``), and, with ``counters``, its last solve in the first
    ``minutes`` against those minutes' counters (``at``, ``at_min``)."""
    preds = [p for p in pc["predictions"] if p.get("classes")]

    def last(t: float) -> dict[str, Any] | None:
        before = [p for p in preds if p["time"] <= t]
        return before[-1] if before else None

    whole = last(end)
    out: dict[str, Any] = {"whole": judge_point(truth, model_demands(whole) if whole else {})}
    cut = start + 60.0 * minutes
    early = last(cut)
    if counters is not None and early is not None and cut <= end:
        part = interval_truth(counters, start, cut, background_rates(truth))
        out.update(at_min=minutes, at_solve=early["time"] - start,
                   at=judge_point(part, model_demands(early)))
    return out


def flat_part(t: dict[str, Any], preds: list[dict[str, Any]], start: float,
              hold: float) -> dict[str, Any] | None:
    """An open ramp's flat part judged at a settled operating point: per class the mean of the
    predicted response times over the flat part's second half against the clients' mean over
    the whole minutes of that half (weighted by their completions); ``None`` without a flat
    part of two minutes or more."""
    if hold < 120.0:
        return None
    a, b = start + hold / 2.0, start + hold
    mins = [int(m) for m in t["minutes"] if 60.0 * int(m) >= hold / 2.0 - 1e-9
            and 60.0 * (int(m) + 1) <= hold + 1e-9]
    inside = [p for p in preds if a <= p["time"] <= b]
    out: dict[str, Any] = {"from_min": min(mins, default=None), "to_min": max(mins, default=None),
                           "solves": len(inside),
                           "trusted_solves": sum(1 for p in inside if p.get("model_trusted")),
                           "classes": {}}
    rows = [r for m in mins for r in t["minutes"].get(m, t["minutes"].get(str(m), []))]
    for cls in sorted({r["cls"] for r in rows if r["cls"] != "all"}):
        mine = [r for r in rows if r["cls"] == cls and r["n"] > 0]
        n = sum(r["n"] for r in mine)
        measured = sum(r["mean_s"] * r["n"] for r in mine) / n if n else None
        model = [p["classes"][cls]["response_time"] for p in inside
                 if p["classes"].get(cls, {}).get("response_time") is not None]
        m = sum(model) / len(model) if model else None
        out["classes"][cls] = {"model": m, "measured": measured, "error": signed_error(m, measured)}
    return out


def cpu_split(truths: list[dict[str, Any]],
              unit: dict[str, float] | None = None) -> dict[str, float] | None:
    """Set each truth's per-class ``db_cpu_s``: the db's busy CPU (the kernel's, background
    subtracted) shared out in proportion to each class's **wait-free** execution time, and
    return the execution cost per unit of work it used.

    pg_stat_statements' ``total_exec_time`` is elapsed time: it holds the backend's wait for
    the CPU, and that wait is not shared in proportion to the work. The kernel's scheduler runs
    a backend that wakes with a short statement ahead of one that has run long (CFS's wake-up
    preemption, Molnar 2007), so at 20-40 users the long statements' elapsed time per row grows
    37% above the lowest load's while the short classes' per request grows 0-25%: a split by
    elapsed time moves CPU from the short classes to the long one. The wait-free execution time
    is the execution time per unit of work (:attr:`ClassTruth.db_work`) at the campaign's
    least busy run -- where the backends hardly wait (utilization ~0.05) -- times the run's own
    work; the busy time not inside a statement (parse, plan, protocol, commit, the housekeeping
    processes: 16% of it at 5 users here) is shared in the same proportion, as before. That
    share is the counters' blind spot: ``db_cpu_call_s`` shares it per statement call instead
    (the lowest load's busy time outside the statements per call, under the key
    :data:`CALL`), the other edge -- for ``buy``, four statements in a transaction, 3x the
    first at 30-40 users; the classes of one statement move by under 15%. Where the app
    measured its backends' own CPU per request (``db_backend_cpu_s``, bench/testbed/app.py)
    both are that measurement: the server-reported CPU per request, no split needed.
    ``unit`` (a former call's answer) is used instead of the least busy run's (a ramp's truth
    judged by the steady runs'). ``None`` (nothing set) where no truth has the execution times
    and the work."""
    def usable(t: dict[str, Any]) -> bool:
        return any(b["tier"] == "db" for b in t.get("tiers", [])) and all(
            c.get("db_exec_s") is not None and c.get("db_work") and c["requests"] > 0
            for c in t.get("classes", [])) and bool(t.get("classes"))
    good = [t for t in truths if usable(t)]
    if not good:
        return None
    if unit is None:
        ref = min(good, key=lambda t: next(b["utilization"] for b in t["tiers"]
                                           if b["tier"] == "db"))
        unit = {c["cls"]: c["db_exec_s"] / c["db_work"] for c in ref["classes"]}
        calls = sum((c.get("db_calls") or 0.0) * c["requests"] for c in ref["classes"])
        busy = next(b["busy_s"] for b in ref["tiers"] if b["tier"] == "db")
        outside = busy - sum(c["db_exec_s"] * c["requests"] for c in ref["classes"])
        unit[CALL] = max(0.0, outside) / calls if calls > 0 else 0.0
    for t in good:
        if all(c.get("db_backend_cpu_s") is not None for c in t["classes"]):
            for c in t["classes"]:     # measured: the backends' own CPU per request
                c["db_cpu_s"] = c["db_cpu_call_s"] = c["db_backend_cpu_s"]
            continue
        busy = next(b["busy_s"] for b in t["tiers"] if b["tier"] == "db")
        for key, per_call in (("db_cpu_s", 0.0), ("db_cpu_call_s", unit.get(CALL, 0.0))):
            cost = {c["cls"]: unit.get(c["cls"], 0.0) * c["db_work"]
                    + per_call * (c.get("db_calls") or 0.0) for c in t["classes"]}
            total = sum(cost[c["cls"]] * c["requests"] for c in t["classes"])
            for c in t["classes"]:
                c[key] = busy * cost[c["cls"]] / total if total > 0 else None
    return unit


def used_demands(pred: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per tier and class, the demand the prediction's model used (the rule of
    :func:`streams.predict.model.tier_demands`): the estimator the tier selected, or -- where the
    windows decided processor sharing, or the prediction flags ``split_replaced`` for the tier
    (:func:`streams.predict.model.agreed_split_applies`), and every class has one -- the
    response-time split scaled to that estimator's aggregate over the measured mix."""
    mix = {c: v.get("throughput_measured") or 0.0 for c, v in pred["classes"].items()}
    flags = pred.get("flags") or []
    out: dict[str, dict[str, float]] = {}
    for tier, t in pred["tiers"].items():
        dem = t["demands"]
        key = "regression" if t.get("estimator") == "regression" and all(
            d.get("regression") is not None for d in dem.values()) else "kalman"
        est = {c: d.get(key) or 0.0 for c, d in dem.items()}
        split = {c: d.get("split") for c, d in dem.items()}
        replaced = any(f.startswith(f"split_replaced: {tier}:") for f in flags)
        if (t.get("split_discipline") == "ps" or replaced) and all(
                v is not None for v in split.values()):
            total = sum(mix.get(c, 0.0) * v for c, v in est.items())
            base = sum(mix.get(c, 0.0) * v for c, v in split.items())
            if total > 0 and base > 0:
                est = {c: v * total / base for c, v in split.items()}
        out[tier] = est
    return out


def model_demands(pred: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per tier and class, the demand the prediction's model solved with: the estimator's
    (:func:`used_demands`) scaled by one factor per tier so that its
    aggregate over the model's mix (the classes' modelled throughput) is the tier's modelled
    demand ``demand_s`` -- every later step of the model (the background taken out,
    :func:`streams.predict.model.background_demands`) scales a tier's classes alike."""
    used = used_demands(pred)
    mix = {c: v.get("throughput") or 0.0 for c, v in pred["classes"].items()}
    total = sum(mix.values())
    out = {}
    for tier, dem in used.items():
        agg = sum(mix.get(c, 0.0) * v for c, v in dem.items()) / total if total > 0 else 0.0
        target = (pred["tiers"][tier].get("demand_s") or 0.0)
        k = target / agg if agg > 0 and target > 0 else 1.0
        out[tier] = {c: v * k for c, v in dem.items()}
    return out


def knee(points: list[tuple[int, float]]) -> float | None:
    """The population at which the worst class's mean over its SLO crosses 1 (linear between
    the two measured populations around it); ``None`` when no run reaches it."""
    points = sorted(points)
    for (n0, r0), (n1, r1) in zip(points, points[1:]):
        if r0 <= 1.0 < r1:
            return n0 + (1.0 - r0) * (n1 - n0) / (r1 - r0)
    return None


def write_config(path: Path, slo: dict[str, float], workers: int | None = None,
                 latency: str | None = None) -> None:
    """The system's configuration: the SLOs and, with ``workers``, gunicorn's sync workers as
    a pool of the app held across the whole request (a worker serves one request at a time,
    waiting for the database's answers); ``latency``: the system's ``latency`` setting
    (default: perfcast's). The db is declared processor sharing: PostgreSQL runs a backend
    process per connection, time-shared on the db's core, and the backends' response times
    are one stretch of their CPU (``bench.testbed.splitcause``: R/D 1.13 plus a round trip's
    latency for every class, where first-come-first-served would add one wait to all)."""
    cells = ", ".join(f'"{c}" = {v:.6f}' for c, v in sorted(slo.items()))
    pool = ("" if not workers else
            f'\n[systems.testbed.pools.workers]\ntier = "app"\nsize = {workers}\n'
            f'holds = ["app", "db"]\n')
    path.write_text(f"""# written by bench.testbed.campaign: the SLOs are 3x each class's mean
# response time in the campaign's lowest run
[systems.testbed]
tiers = ["app", "db"]
sla_s = {{ {cells} }}
solve_interval_s = 15
solve_offset_s = 0
horizon_s = 1800
disciplines = {{ db = "ps" }}
""" + (f'latency = "{latency}"\n' if latency else "") + pool)


def steady(args: argparse.Namespace, out: Path, meter: ForeignMeter, users: int,
           seed: int) -> dict[str, Any]:
    """One steady run, repeated while the database's CPU is disturbed by other work."""
    for attempt in range(args.repeats + 1):
        meter.start()
        lines = run_load(out / f"load-{users}-{attempt}.jsonl", users, args.duration,
                         args.think, args.aux_cpu, seed)
        foreign = meter.stop()
        run = next(r for r in lines if r.get("kind") == "run")
        entry = {"users": users, "attempt": attempt, "start": run["start"],
                 "end": run["start"] + args.duration, "foreign": foreign,
                 "disturbed": foreign["foreign_share"] > args.foreign_max,
                 "truth": asdict(truth_of(lines))}
        print(f"  {users} users (attempt {attempt}): foreign {foreign['foreign_share']:.3f}, "
              f"niced {foreign['niced_share']:.3f}, kernel {foreign['kernel_share']:.3f}, "
              f"db {foreign['db_share']:.3f}",
              file=sys.stderr, flush=True)
        if not entry["disturbed"]:
            return entry
        time.sleep(args.settle)
    return entry


def campaign(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meter = ForeignMeter(args.db_cpu, "postgres")
    runs = [steady(args, out, meter, n, seed) for seed, n in enumerate(args.populations, 1)]
    if args.slo_from:
        slo = json.loads((Path(args.slo_from) / "campaign.json").read_text())["slo_s"]
    else:
        low = min(runs, key=lambda r: r["users"])
        slo = {r["cls"]: SLO_FACTOR * r["mean_s"] for r in low["truth"]["overall"]
               if r["cls"] != "all"}
    config = out / "system.toml"
    write_config(config, slo, args.workers, args.latency)
    unit = cpu_split([r["truth"] for r in runs])
    ratios = []
    for r in runs:
        means = {s["cls"]: s["mean_s"] for s in r["truth"]["overall"] if s["cls"] in slo}
        r["worst_over_slo"] = max(means[c] / slo[c] for c in means)
        ratios.append((r["users"], r["worst_over_slo"]))
        r["perfcast"] = judge_run(r["truth"], perfcast_run(
            out / f"perfcast-{r['users']}", config, r["start"], r["end"] + 2), r["start"],
            r["end"])
    result: dict[str, Any] = {"slo_s": slo, "knee_users": knee(ratios), "runs": runs,
                              "rt_prio": RT_PRIO["prio"], "db_autogroup": DB_AUTOGROUP["state"],
                              "think_s": args.think, "duration_s": args.duration,
                              "foreign_max": args.foreign_max}
    k = result["knee_users"]
    lows = [r for r in runs if k is not None and r["users"] <= 0.3 * k]
    if lows:
        base = max(lows, key=lambda r: r["users"])
        cap = base["perfcast"].get("capacity_users")
        result["low_load"] = {"users": base["users"], "capacity_users": cap,
                              "error": signed_error(cap, k)}
    if args.ramp:
        a, b, span = args.ramp
        meter.start()
        lines = run_load(out / "load-ramp.jsonl", a, span, args.think, args.aux_cpu, 99, b)
        foreign = meter.stop()
        run = next(x for x in lines if x.get("kind") == "run")
        t = truth_of(lines)
        breach_min = breach_minute(t, slo)
        pc = perfcast_run(out / "perfcast-ramp", config, run["start"], run["start"] + span + 2)
        ramp_truth = asdict(t)
        cpu_split([ramp_truth], unit)
        firing = [x["time"] for x in pc["alerts"]
                  if x.get("alert") == "predicted_breach" and x.get("state") == "firing"]
        breach_t = None if breach_min is None else run["start"] + 60.0 * (breach_min + 1)
        result["ramp"] = {
            "start": run["start"], "from_users": a, "to_users": b, "duration_s": span, "foreign": foreign,
            "measured_breach_min": None if breach_t is None else (breach_t - run["start"]) / 60,
            "first_alert_min": (firing[0] - run["start"]) / 60 if firing else None,
            "lead_min": (breach_t - firing[0]) / 60 if firing and breach_t else None,
            "alerts": pc["alerts"], "solves": len(pc["predictions"]),
            "misnamed": misnamed_alerts(pc["alerts"], t, slo, run["start"]),
            "trusted_solves": sum(1 for p in pc["predictions"] if p.get("model_trusted")),
            "demands": ramp_demands(ramp_truth, pc, run["start"] + span),
            "point": ramp_point(ramp_truth, pc, run["start"], run["start"] + span, keep_counters(
                out / "prom-counters-ramp.json", run["start"] - 5.0, run["start"] + span + 5.0))}
    if args.open_ramp:
        result["open_ramp"] = open_ramp(args, out, meter, config, slo)
    (out / "campaign.json").write_text(json.dumps(result, indent=1, default=str))
    return result


#: a ramp's measured breach: minutes skipped as the load's warm-up, and how many minutes in a
#: row must hold a class over its SLO (:func:`breach_minute`)
BREACH_WARMUP_MIN = 1
BREACH_PERSIST_MIN = 2


def breach_minute(t: Any, slo: dict[str, float], warmup: int = BREACH_WARMUP_MIN,
                  persist: int = BREACH_PERSIST_MIN) -> int | None:
    """The first minute of a ramp's sustained breach: from minute ``warmup`` on (minute 0 holds
    the load's start: cold caches, connections opening), the first minute whose mean response
    time of some class exceeds its SLO and that stays so -- some class over its SLO -- for
    ``persist`` minutes in a row. A one-minute mean of a heavy-tailed workload is pushed over an
    SLO by one coincidence: on the testbed two of the largest category's searches (0.66 s each)
    holding both sync workers stall every class for ~1.2 s, and a minute holding that stall
    reads 1.3-3.6x the SLO while the next reads 0.3-0.7x. A breach an operator is paged for is
    the load's, which persists; the same rule judges closed and open ramps."""
    over = {m: any(s.cls in slo and s.n > 0 and s.mean_s > slo[s.cls] for s in rows)
            for m, rows in t.minutes.items()}
    return next((m for m in sorted(over) if m >= warmup
                 and all(over.get(m + k, False) for k in range(persist))), None)


def open_ramp(args: argparse.Namespace, out: Path, meter: ForeignMeter, config: Path,
              slo: dict[str, float]) -> dict[str, Any]:
    """Poisson arrivals ramped from ``r0`` to ``r1`` per second; perfcast reads the same
    exporters without the users gauge (an API's monitoring has request rates, not sessions),
    so the workload is detected as open."""
    r0, r1, span, hold = (*args.open_ramp, 0.0)[:4]
    prom = out / "perfcast-open.toml"
    prom.write_text("\n".join(line for line in (HERE / "perfcast.toml").read_text().splitlines()
                              if not line.startswith("users =")) + "\n")
    meter.start()
    lines = run_load(out / "load-open-ramp.jsonl", 0, span, 0.0, args.aux_cpu, 98,
                     rates=(r0, r1), hold=hold)
    foreign = meter.stop()
    run = next(x for x in lines if x.get("kind") == "run")
    t = truth_of(lines)
    bm = breach_minute(t, slo)
    pc = perfcast_run(out / "perfcast-open-ramp", config, run["start"], run["start"] + span + 2,
                      prom=prom)
    firing = [x["time"] for x in pc["alerts"]
              if x.get("alert") == "predicted_breach" and x.get("state") == "firing"]
    breach_t = None if bm is None else run["start"] + 60.0 * (bm + 1)
    preds = [p for p in pc["predictions"] if p.get("classes")]
    t_dict = asdict(t)
    counters = keep_counters(out / "prom-counters-open-ramp.json", run["start"] - 5.0,
                             run["start"] + span + 5.0)
    return {"start": run["start"], "from_rate": r0, "to_rate": r1, "duration_s": span,
            "hold_s": hold, "flat": flat_part(t_dict, preds, run["start"], hold),
            "point": ramp_point(t_dict, pc, run["start"], run["start"] + span, counters,
                                hold / 60.0 if hold >= 120.0 else POINT_MINUTES),
            "foreign": foreign, "dropped": t.dropped, "errors": t.errors,
            "measured_breach_min": None if breach_t is None else (breach_t - run["start"]) / 60,
            "first_alert_min": (firing[0] - run["start"]) / 60 if firing else None,
            "lead_min": (breach_t - firing[0]) / 60 if firing and breach_t else None,
            "workload": sorted({p.get("workload") for p in preds}),
            "capacity_rate_per_s": [p.get("capacity_rate_per_s") for p in preds],
            "alerts": pc["alerts"], "solves": len(preds),
            "misnamed": misnamed_alerts(pc["alerts"], t, slo, run["start"]),
            "trusted_solves": sum(1 for p in preds if p.get("model_trusted"))}


def ramp_arg(text: str) -> tuple[int, int, int]:
    """``--ramp``'s ``FROM:TO:SECONDS`` users, checked against bench.testbed.load's bounds
    (users within [1, 500], FROM <= TO, one load at most ``MAX_DURATION_S``) before any run:
    a ramp the load generator refuses would otherwise end the campaign after its steady runs."""
    try:
        vals = tuple(int(x) for x in text.split(":"))
    except ValueError:
        vals = ()
    if len(vals) != 3 or not (1 <= vals[0] <= vals[1] <= 500
                              and 0 < vals[2] <= MAX_DURATION_S):
        raise argparse.ArgumentTypeError(
            f"--ramp wants FROM:TO:SECONDS with 1 <= FROM <= TO <= 500 users and 0 < SECONDS <= "
            f"{MAX_DURATION_S:g} (one load's limit), got {text!r}")
    return vals  # type: ignore[return-value]


def open_ramp_arg(text: str) -> tuple[float, ...]:
    """``--open-ramp``'s ``R0:R1:SECONDS[:HOLD]``, checked: rates within (0, 500] per second
    and at most ``MAX_DURATION_S`` seconds (bench.testbed.load's bounds), the hold shorter than
    the run."""
    parts = text.split(":")
    try:
        vals = tuple(float(x) for x in parts)
    except ValueError:
        vals = ()
    if len(vals) not in (3, 4) or not (0 < vals[0] <= 500 and 0 < vals[1] <= 500
                                       and 0 < vals[2] <= MAX_DURATION_S
                                       and 0 <= (vals[3:] or (0.0,))[0] < vals[2]):
        raise argparse.ArgumentTypeError(
            f"--open-ramp wants R0:R1:SECONDS[:HOLD] with rates in (0, 500], 0 < SECONDS <= "
            f"{MAX_DURATION_S:g} and 0 <= HOLD < SECONDS, got {text!r}")
    return vals


def misnamed_alerts(alerts: list[dict[str, Any]], t: Any, slo: dict[str, float],
                    start: float) -> list[dict[str, Any]]:
    """The firing predicted-breach alerts that name the wrong class: in the minute the alert
    fires, the class it names is measured below 80% of its SLO while another class is measured
    above its own. Honest trust asks for none: the engineer paged acts on the class named."""
    out = []
    for a in alerts:
        if a.get("alert") != "predicted_breach" or a.get("state") != "firing":
            continue
        rows = t.minutes.get(int((a["time"] - start) // 60), [])
        mean = {s.cls: s.mean_s for s in rows if s.cls in slo and s.n > 0}
        named = a.get("class")
        breaking = sorted(c for c, r in mean.items() if c != named and r > slo[c])
        if named in mean and mean[named] < 0.8 * slo[named] and breaking:
            out.append({"minute": (a["time"] - start) / 60, "named": named,
                        "named_over_slo": mean[named] / slo[named], "breaking": breaking})
    return out


def rejudge(src: Path, out: Path, workers: int | None = None,
            refetch: bool = False, latency: str | None = None) -> dict[str, Any]:
    """The judgement of a former campaign (``src/campaign.json`` and the windows its perfcast
    runs read) made again by today's code: the measurements stay, perfcast runs again. With
    ``refetch`` the windows are read from Prometheus again (its TSDB kept: a Prometheus
    serving it at the mapping's URL), so a change to the Prometheus source is judged too."""
    res = json.loads((src / "campaign.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    config = out / "system.toml"
    write_config(config, res["slo_s"], workers, latency)
    for r in res["runs"]:   # today's truth of the same logs (the work per request is new)
        log = src / f"load-{r['users']}-{r.get('attempt', 0)}.jsonl"
        if log.exists():
            r["truth"] = asdict(truth_of(_jsonl(log)))
    unit = cpu_split([r["truth"] for r in res["runs"]])
    for r in res["runs"]:
        r["perfcast"] = judge_run(r["truth"], perfcast_run(
            out / f"perfcast-{r['users']}", config, r["start"], r["end"] + 2,
            None if refetch else src / f"perfcast-{r['users']}" / "prometheus-windows.jsonl"),
            r["start"], r["end"])
    k = res["knee_users"]
    if "low_load" in res:
        base = next(r for r in res["runs"] if r["users"] == res["low_load"]["users"])
        cap = base["perfcast"].get("capacity_users")
        res["low_load"].update(capacity_users=cap, error=signed_error(cap, k))
    if "ramp" in res:
        rp = res["ramp"]
        start = rp.get("start") or next(
            json.loads(x) for x in (src / "load-ramp.jsonl").read_text().splitlines()
            if '"kind":"run"' in x)["start"]
        pc = perfcast_run(out / "perfcast-ramp", config, start, start + rp["duration_s"] + 2,
                          None if refetch else src / "perfcast-ramp" / "prometheus-windows.jsonl")
        firing = [x["time"] for x in pc["alerts"]
                  if x.get("alert") == "predicted_breach" and x.get("state") == "firing"]
        log = src / "load-ramp.jsonl"
        rp["measured_breach_min"] = rebreach(log, res["slo_s"], rp["measured_breach_min"])
        breach_t = (None if rp["measured_breach_min"] is None
                    else start + 60.0 * rp["measured_breach_min"])
        ramp_truth = asdict(truth_of(_jsonl(log))) if log.exists() else None
        if ramp_truth is not None:
            cpu_split([ramp_truth], unit)
            rp["demands"] = ramp_demands(ramp_truth, pc, start + rp["duration_s"])
            rp["point"] = ramp_point(ramp_truth, pc, start, start + rp["duration_s"],
                                     load_counters(src / "prom-counters-ramp.json",
                                                   src / "prom-counters.json"))
        rp.update(first_alert_min=(firing[0] - start) / 60 if firing else None,
                  lead_min=(breach_t - firing[0]) / 60 if firing and breach_t else None,
                  misnamed=misnamed_alerts(pc["alerts"], truth_of(_jsonl(log)), res["slo_s"],
                                           start) if log.exists() else None,
                  alerts=pc["alerts"], solves=len(pc["predictions"]),
                  trusted_solves=sum(1 for p in pc["predictions"] if p.get("model_trusted")))
    if "open_ramp" in res:
        op = res["open_ramp"]
        start = op["start"]
        pc = perfcast_run(out / "perfcast-open-ramp", config, 0, 0,
                          src / "perfcast-open-ramp" / "prometheus-windows.jsonl")
        firing = [x["time"] for x in pc["alerts"]
                  if x.get("alert") == "predicted_breach" and x.get("state") == "firing"]
        log = src / "load-open-ramp.jsonl"
        op["measured_breach_min"] = rebreach(log, res["slo_s"], op["measured_breach_min"])
        breach_t = (None if op["measured_breach_min"] is None
                    else start + 60.0 * op["measured_breach_min"])
        preds = [p for p in pc["predictions"] if p.get("classes")]
        op.update(first_alert_min=(firing[0] - start) / 60 if firing else None,
                  lead_min=(breach_t - firing[0]) / 60 if firing and breach_t else None,
                  misnamed=misnamed_alerts(pc["alerts"], truth_of(_jsonl(log)), res["slo_s"],
                                           start) if log.exists() else None,
                  workload=sorted({p.get("workload") for p in preds}),
                  capacity_rate_per_s=[p.get("capacity_rate_per_s") for p in preds],
                  alerts=pc["alerts"], solves=len(preds),
                  trusted_solves=sum(1 for p in preds if p.get("model_trusted")))
        if log.exists():
            t_dict, hold = asdict(truth_of(_jsonl(log))), op.get("hold_s") or 0.0
            op.update(flat=flat_part(t_dict, preds, start, hold),
                      point=ramp_point(t_dict, pc, start, start + op["duration_s"],
                                       load_counters(src / "prom-counters-open-ramp.json",
                                                     src / "prom-counters.json"),
                                       hold / 60.0 if hold >= 120.0 else POINT_MINUTES))
    (out / "campaign.json").write_text(json.dumps(res, indent=1, default=str))
    return res


def keep_server_log(out: Path) -> None:
    """PostgreSQL's server log (checkpoints, autovacuum: up.sh logs both) copied to
    ``out/postgres.log`` before down.sh deletes the run dir: a stall in the load's log is then
    matched against the server's own account of that second."""
    state = Path(os.environ.get("PERFCAST_CACHE", Path.home() / ".cache/perfcast"))
    try:
        log = Path((state / "testbed" / "run-dir").read_text().strip()) / "log" / "postgres.log"
        out.mkdir(parents=True, exist_ok=True)
        (out / "postgres.log").write_bytes(log.read_bytes())
    except OSError as e:
        print(f"  the server log was not kept: {e}", file=sys.stderr, flush=True)


def rebreach(log: Path, slo: dict[str, float], stored: float | None) -> float | None:
    """A former ramp's measured breach (minutes from its start, the end of the breach's first
    minute) by today's :func:`breach_minute` over its load log; the stored figure where the
    log was not kept."""
    if not log.exists():
        return stored
    bm = breach_minute(truth_of(_jsonl(log)), slo)
    return None if bm is None else bm + 1.0


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _misnamed(v: list[dict[str, Any]] | None) -> str:
    return "-" if v is None else str(len(v))


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:+.0f}%"


def markdown(res: dict[str, Any]) -> str:
    slo = res["slo_s"]
    k = res["knee_users"]
    lines = [f"SLO (3x the lowest run's mean, ms): "
             + ", ".join(f"{c} {1000 * v:.0f}" for c, v in sorted(slo.items()))
             + f"; measured knee {'-' if k is None else f'{k:.1f}'} users", "",
             "| users | foreign CPU | worst R/SLO | capacity | trusted (solves) | R error "
             + " / ".join(sorted(slo)) + " | db demand as solved, error | db error, per-call edge "
             "| app demand as solved, error | app error, per-request edge "
             "| pool U model / measured |",
             "|---:|---:|---:|---:|---|---|---|---|---|---|---|"]
    for r in res["runs"]:
        p = r["perfcast"]
        rt = p.get("response_time", {})
        lines.append(
            f"| {r['users']} | {r['foreign']['foreign_share']:.3f}"
            f"{' (disturbed)' if r['disturbed'] else ''} | {r['worst_over_slo']:.2f} | "
            f"{p.get('capacity_users', '-')} | {p.get('model_trusted')} "
            f"({p.get('trusted_solves', 0)}/{p['solves']}) | "
            + " / ".join(_pct(rt.get(c, {}).get("error")) for c in sorted(slo)) + " | "
            + " / ".join(_pct(p["demands"]["db"][c]["error"]) for c in sorted(slo)) + " | "
            + " / ".join(_pct(p["demands"]["db"][c].get("error_call")) for c in sorted(slo))
            + " | "
            + " / ".join(_pct(p["demands"]["app"][c]["error"]) for c in sorted(slo)) + " | "
            + " / ".join(_pct(p["demands"]["app"][c].get("error_req")) for c in sorted(slo))
            + " | "
            + (", ".join(f"{_num(v['model'])} / {_num(v['measured'])}"
                         for v in p.get("pools", {}).values()) or "-") + " |")
    lines += point_markdown(res)
    if "low_load" in res:
        lo = res["low_load"]
        lines += ["", f"Capacity from the {lo['users']}-user run: {lo['capacity_users']} against "
                      f"the measured knee {k:.1f} ({_pct(lo['error'])})."]
    if "ramp" in res:
        rp = res["ramp"]
        lines += ["", f"Ramp {rp['from_users']} -> {rp['to_users']} users over "
                      f"{rp['duration_s'] / 60:.0f} min: measured breach at minute "
                      f"{rp['measured_breach_min']}, first predicted-breach alert at minute "
                      f"{rp['first_alert_min']}, lead {rp['lead_min']} min; alerts naming a "
                      f"class below 80% of its SLO while another breaks: "
                      f"{_misnamed(rp.get('misnamed'))}; trusted solves "
                      f"{rp['trusted_solves']}/{rp['solves']}; foreign CPU "
                      f"{rp['foreign']['foreign_share']:.3f}."]
        if rp.get("demands"):
            lines.append(f"Ramp's last solve, error of the demands it solved with against "
                         f"the whole ramp's truth: db "
                         + " / ".join(_pct(rp["demands"]["db"][c]["error"]) for c in sorted(slo))
                         + " (per-call edge " + " / ".join(
                             _pct(rp["demands"]["db"][c].get("error_call")) for c in sorted(slo))
                         + ")"
                         + ", app " + " / ".join(_pct(rp["demands"]["app"][c]["error"])
                                                 for c in sorted(slo))
                         + " (per-request edge " + " / ".join(
                             _pct(rp["demands"]["app"][c].get("error_req")) for c in sorted(slo))
                         + ").")
    if "open_ramp" in res:
        op = res["open_ramp"]
        caps = [c for c in op["capacity_rate_per_s"] if c is not None]
        lines += ["", f"Open ramp {op['from_rate']:g} -> {op['to_rate']:g}/s over "
                      f"{op['duration_s'] / 60:.0f} min (workload {', '.join(map(str, op['workload']))}): "
                      f"measured breach at minute {op['measured_breach_min']}, first "
                      f"predicted-breach alert at minute {op['first_alert_min']}, lead "
                      f"{op['lead_min']} min; misnamed alerts {_misnamed(op.get('misnamed'))}; capacity "
                      + (f"{min(caps):.1f}-{max(caps):.1f}/s" if caps else "-")
                      + f"; trusted solves {op['trusted_solves']}/{op['solves']}; dropped "
                      f"{op['dropped']}; foreign CPU {op['foreign']['foreign_share']:.3f}."]
        fl = op.get("flat")
        if fl:
            lines.append(f"Open ramp's flat part ({op['from_rate']:g}/s for "
                         f"{op['hold_s'] / 60:g} min), minutes {fl['from_min']}-{fl['to_min']}: "
                         f"mean R error " + " / ".join(
                             _pct(fl["classes"].get(c, {}).get("error")) for c in sorted(slo))
                         + f"; trusted solves {fl['trusted_solves']}/{fl['solves']}.")
    return "\n".join(lines)


def _point_cells(judged: dict[str, Any], classes: list[str]) -> str:
    """One table row's cells of :func:`bench.testbed.pointtruth.judge_point`: per tier the
    coverage, the errors against the counted CPU and against its split of the busy CPU."""
    cells = []
    for tier in ("db", "app"):
        j = judged.get(tier)
        if j is None:
            cells += ["-", "-", "-"]
            continue
        rows = j["classes"]
        cells += [_num(j["coverage"]),
                  " / ".join(_pct(rows.get(c, {}).get("error")) for c in classes),
                  " / ".join(_pct(rows.get(c, {}).get("error_busy")) for c in classes)]
    return " | ".join(cells)


def point_markdown(res: dict[str, Any]) -> list[str]:
    """The per-class demands against the servers' own CPU per request: one row per steady run,
    the ramps' whole span and their first minutes; no lines where no run has the counters."""
    classes = sorted(res["slo_s"])
    rows = [(str(r["users"]), r["perfcast"].get("point") or {}) for r in res["runs"]]
    for key, name in (("ramp", "closed ramp"), ("open_ramp", "open ramp")):
        pt = (res.get(key) or {}).get("point") or {}
        if pt.get("whole"):
            rows.append((f"{name}, whole", pt["whole"]))
        if pt.get("at"):
            rows.append((f"{name}, first {pt['at_min']:g} min", pt["at"]))
    rows = [(label, j) for label, j in rows if j]
    if not rows:
        return []
    names = " / ".join(classes)
    return ["", "Per-class error of the demands the model solved with against the servers' "
                "own CPU per request (db: the backend's CPU clock, app: the worker's; "
                "coverage: that CPU over the tier's busy CPU; busy: its split of the busy CPU)",
            "",
            f"| run | db coverage | db vs backend CPU {names} | db vs busy split | "
            f"app coverage | app vs own CPU | app vs busy split |",
            "|---|---:|---|---|---:|---|---|"] + [
        f"| {label} | {_point_cells(j, classes)} |" for label, j in rows]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--populations", type=lambda s: [int(x) for x in s.split(",") if x],
                   default=[6, 12, 24, 36, 48, 60, 72])
    p.add_argument("--duration", type=float, default=150.0, help="seconds per steady run")
    p.add_argument("--think", type=float, default=1.0)
    p.add_argument("--ramp", type=ramp_arg, default=(6, 84, 1200),
                   help=f"FROM:TO:SECONDS users (SECONDS <= {MAX_DURATION_S:g}, one load's "
                        "limit)")
    p.add_argument("--no-ramp", dest="ramp", action="store_const", const=None)
    p.add_argument("--open-ramp", type=open_ramp_arg, default=None,
                   help="R0:R1:SECONDS[:HOLD]: Poisson arrivals for SECONDS, flat at R0 per "
                        "second for the first HOLD seconds (default 0), then ramped to R1, "
                        "after the closed runs")
    p.add_argument("--slo-from", metavar="DIR",
                   help="take the SLOs (and the knee) of a former campaign in DIR; with "
                        "--populations '' no steady run is made")
    p.add_argument("--foreign-max", type=float, default=0.05,
                   help="the largest share of the database's CPU other work may take in a run")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--settle", type=float, default=20.0, help="seconds between attempts")
    p.add_argument("--workers", type=int, default=2,
                   help="the app's gunicorn workers (up.sh's TESTBED_WORKERS, default 2), "
                        "declared as a pool held across app and db, as perfcast.toml measures "
                        "it; 0: no pool (the windows' pool measurements are then flagged as "
                        "not configured)")
    p.add_argument("--latency", choices=("off", "estimate"), default=None,
                   help="the system's latency setting (pure delays at the "
                        "tiers); default: perfcast's")
    p.add_argument("--db-cpu", type=int, default=1)
    p.add_argument("--aux-cpu", type=int, default=0)
    p.add_argument("--no-up", action="store_true", help="the testbed is up already")
    p.add_argument("--rt-prio", type=int, default=1,
                   help="run the app and the load generator under SCHED_RR at this priority "
                        "(the app owns its CPU; up.sh's TESTBED_RT_PRIO); 0: the default "
                        "scheduler, as the campaigns before (other jobs on the app's CPU then "
                        "delay every wakeup of its workers)")
    p.add_argument("--db-autogroup-nice", type=int, default=-20,
                   help="the niceness of the database's session among the host's sessions "
                        "(the kernel's autogroups, where enabled: other sessions' nice-19 work "
                        "otherwise takes its CPU as a peer); 0: the kernel's default")
    p.add_argument("--prom-config", type=Path, default=HERE / "perfcast.toml",
                   help="the Prometheus mapping perfcast reads (with --rejudge: with --refetch)")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--rejudge", metavar="DIR",
                   help="no load: run today's perfcast again over the windows a former "
                        "campaign in DIR read, and judge it against that campaign's truth")
    p.add_argument("--refetch", action="store_true",
                   help="with --rejudge: read the windows from Prometheus again")
    args = p.parse_args(argv)
    if not 0 < args.duration <= MAX_DURATION_S:
        p.error(f"--duration must be within (0, {MAX_DURATION_S:g}] s (one load's limit), "
                f"got {args.duration:g}")
    RT_PRIO["prio"] = args.rt_prio
    PROM_CONFIG["path"] = args.prom_config
    if args.rejudge:
        res = rejudge(Path(args.rejudge), Path(args.out), args.workers, args.refetch,
                      args.latency)
        print(markdown(res) if args.markdown else json.dumps(
            {k: v for k, v in res.items() if k != "runs"}, indent=1, default=str))
        return 0
    env = {"TESTBED_AUX_CPU": str(args.aux_cpu), "TESTBED_DB_CPU": str(args.db_cpu),
           "TESTBED_APP_CPU": str(args.aux_cpu), "TESTBED_NICE": "0",
           "TESTBED_RT_PRIO": str(args.rt_prio) if args.rt_prio else "",
           "TESTBED_DB_AUTOGROUP_NICE": str(args.db_autogroup_nice)}
    if args.workers:    # the pool declared is the pool started (0: up.sh's default, undeclared)
        env["TESTBED_WORKERS"] = str(args.workers)
    if not args.no_up:
        up = _sh(["bash", "infra/testbed/up.sh"], env=_env(env), capture_output=True)
        for line in up.stdout.splitlines():
            if line.startswith("export "):
                k, _, v = line[len("export "):].partition("=")
                os.environ[k] = v.strip("'")
    try:
        if args.db_autogroup_nice:
            # up.sh has set it already (TESTBED_DB_AUTOGROUP_NICE); again for --no-up, and
            # the line as the kernel reads it for campaign.json
            state = Path(os.environ.get("PERFCAST_CACHE", Path.home() / ".cache/perfcast"))
            DB_AUTOGROUP["state"] = lift_db_autogroup(
                Path((state / "testbed" / "run-dir").read_text().strip()), args.db_autogroup_nice)
            print(f"  the database's session: {DB_AUTOGROUP['state']}", file=sys.stderr,
                  flush=True)
        res = campaign(args)
    finally:
        if not args.no_up:
            keep_server_log(Path(args.out))
            _sh(["bash", "infra/testbed/down.sh"], env=_env(env), stdout=subprocess.DEVNULL)
    print(markdown(res) if args.markdown else json.dumps(
        {k: v for k, v in res.items() if k != "runs"}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
