"""Where a request's time goes on the testbed: a closed load with the kernel's and PostgreSQL's
own accounts read around it (a diagnosis, minutes long; the testbed up, nothing else loading it).

Per request of the load, from the start and end of the load (the differences over the span):

- **CPU and run-queue wait** of each process group -- ``app`` (gunicorn's master and workers),
  ``db`` (the postmaster and backends), ``load`` (the generator) -- summed over their threads
  from ``/proc/PID/task/TID/schedstat`` (the kernel's time on a CPU and waiting on a run queue,
  the figures ``perf sched`` and ``schedstat`` tools read; Linux's sched-stats documentation);
- each CPU's split from ``/proc/stat`` (user at nice <= 0, niced, system, iowait, steal);
- the disk: ``/proc/diskstats``' io_time of ``--device`` (node_exporter's
  ``node_disk_io_time_seconds_total``) as a share of the span;
- the WAL: ``pg_stat_wal``'s syncs and sync time (``track_wal_io_timing``, up.sh sets it);
- the wait events of the active client backends, sampled every 50 ms from
  ``pg_stat_activity`` (what postgres_exporter's ``pg_testbed_wait`` reads per scrape);
- per class: the client's mean response time, the app's handler span, its database wall time
  and queue time (:mod:`bench.testbed.truth`), pg_stat_statements' execution time.

    python -m bench.testbed.probe --users 30 --duration 60 [--rt-prio 1] [--json OUT]

``--rt-prio`` runs the load generator under SCHED_RR as the campaign does; the tiers'
scheduling is up.sh's (``TESTBED_RT_PRIO``). The sampler's own queries are a few per second.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.testbed.truth import truth

REPO = Path(__file__).resolve().parents[2]


def _group(pid: int, run_dir: str) -> str | None:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    if (comm == "postgres" and run_dir in cmd) or cmd.startswith("postgres:"):
        return "db"
    if "gunicorn" in cmd and run_dir in cmd:
        return "app"
    if "bench.testbed.load" in cmd:
        return "load"
    return None


def sched(run_dir: str) -> dict[str, dict[int, tuple[int, int]]]:
    """Per group, per thread: (ns on a CPU, ns waiting on a run queue)."""
    out: dict[str, dict[int, tuple[int, int]]] = {"app": {}, "db": {}, "load": {}}
    for p in glob.glob("/proc/[0-9]*"):
        g = _group(int(p[6:]), run_dir)
        if g is None:
            continue
        for t in glob.glob(f"{p}/task/[0-9]*/schedstat"):
            try:
                cpu, wait, _ = map(int, Path(t).read_text().split())
            except (OSError, ValueError):
                continue
            out[g][int(t.split("/")[4])] = (cpu, wait)
    return out


def cpus() -> dict[str, list[int]]:
    return {f[0]: list(map(int, f[1:9])) for f in
            (line.split() for line in Path("/proc/stat").read_text().splitlines())
            if re.fullmatch(r"cpu\d+", f[0])}


def disk_io_ms(device: str) -> int:
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2] == device:
            return int(f[12])
    raise ValueError(f"--device {device!r} not in /proc/diskstats")


def pg_counters(cur: Any) -> dict[str, Any]:
    cur.execute("SELECT wal_sync::float8, wal_sync_time::float8 FROM pg_stat_wal")
    syncs, sync_ms = cur.fetchone()
    cur.execute("SELECT substring(query from 'class=([a-z]+)'), sum(total_exec_time)::float8 "
                "FROM pg_stat_statements WHERE query LIKE '/* class=%' GROUP BY 1")
    return {"syncs": syncs, "sync_ms": sync_ms, "exec_ms": dict(cur.fetchall())}


def sample_waits(dsn: str, stop: threading.Event, out: dict[str, int]) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            for (wait,) in conn.execute(
                    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') "
                    "FROM pg_stat_activity WHERE state = 'active' "
                    "AND query LIKE '/* class=%' AND pid <> pg_backend_pid()").fetchall():
                out[wait] = out.get(wait, 0) + 1
            stop.wait(0.05)


def probe(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    run_dir, dsn = os.environ["TESTBED_RUN_DIR"], os.environ["TESTBED_PG_DSN"]
    log = Path(args.log or tempfile.mkstemp(suffix=".jsonl")[1])
    rt = ["chrt", "-r", str(args.rt_prio)] if args.rt_prio else []
    load = subprocess.Popen(
        ["taskset", "-c", str(args.load_cpu), *rt, sys.executable, "-m", "bench.testbed.load",
         "--nice", "0", "--duration", str(args.duration), "--idle", "0", "--seed",
         str(args.seed), "--out", str(log), "closed", "--users", str(args.users),
         "--think", str(args.think)],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(min(5.0, args.duration / 4))                 # the users started
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.cursor()
        t0, s0, c0, d0, p0 = time.time(), sched(run_dir), cpus(), disk_io_ms(args.device), \
            pg_counters(cur)
        waits: dict[str, int] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=sample_waits, args=(dsn, stop, waits))
        sampler.start()
        time.sleep(max(1.0, args.duration - 2 * min(5.0, args.duration / 4)))
        stop.set()
        sampler.join()
        t1, s1, c1, d1, p1 = time.time(), sched(run_dir), cpus(), disk_io_ms(args.device), \
            pg_counters(cur)
    load.wait()
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    if not args.log:
        log.unlink()
    span = t1 - t0
    reqs = [r for r in lines if "class" in r and "kind" not in r and t0 <= r["end"] < t1]
    n = max(1, len(reqs))
    groups = {}
    for g in s1:
        cpu = sum(v[0] - s0[g].get(t, (0, 0))[0] for t, v in s1[g].items()) / 1e9
        wait = sum(v[1] - s0[g].get(t, (0, 0))[1] for t, v in s1[g].items()) / 1e9
        groups[g] = {"cpu_ms_per_request": 1e3 * cpu / n, "runq_ms_per_request": 1e3 * wait / n,
                     "cpu_share": cpu / span}
    cpu_split = {}
    for c in c1:
        d = [b - a for a, b in zip(c0[c], c1[c])]
        tot = max(1, sum(d))
        cpu_split[c] = {k: d[i] / tot for i, k in enumerate(
            ("user", "niced", "system", "idle", "iowait", "irq", "softirq", "steal"))}
    t = truth(lines)
    per_class = {c.cls: {"app_time_ms": _ms(c.app_time_s), "app_db_wall_ms": _ms(c.app_db_wall_s),
                         "db_exec_ms": _ms(c.db_exec_s), "queue_ms": _ms(c.app_queue_s)}
                 for c in t.classes}
    for r in t.overall:
        per_class.setdefault(r.cls, {})["client_ms"] = 1e3 * r.mean_s
    total_waits = max(1, sum(waits.values()))
    return {"users": args.users, "rt_prio": args.rt_prio, "span_s": span, "requests": len(reqs),
            "throughput": len(reqs) / span, "groups": groups, "cpus": cpu_split,
            "disk_io_share": (d1 - d0) / 1e3 / span,
            "wal_syncs": p1["syncs"] - p0["syncs"],
            "wal_sync_ms": p1["sync_ms"] - p0["sync_ms"],
            "wait_events": {k: v / total_waits for k, v in sorted(waits.items())},
            "classes": per_class}


def _ms(v: float | None) -> float | None:
    return None if v is None else 1e3 * v


def render(r: dict[str, Any]) -> str:
    out = [f"{r['users']} users, rt_prio {r['rt_prio']}: {r['requests']} requests in "
           f"{r['span_s']:.0f} s ({r['throughput']:.1f}/s); disk io_time "
           f"{100 * r['disk_io_share']:.1f}%; WAL {r['wal_syncs']:.0f} syncs, "
           f"{r['wal_sync_ms']:.0f} ms; backends' wait events "
           + ", ".join(f"{k} {100 * v:.1f}%" for k, v in r["wait_events"].items())]
    for g, v in r["groups"].items():
        out.append(f"  {g}: CPU {v['cpu_ms_per_request']:.1f} ms/request "
                   f"({100 * v['cpu_share']:.0f}% of a CPU), run-queue wait "
                   f"{v['runq_ms_per_request']:.1f} ms/request")
    for c, v in r["cpus"].items():
        out.append(f"  {c}: " + ", ".join(f"{k} {100 * x:.0f}%" for k, x in v.items() if x >= 0.005))
    for c, v in sorted(r["classes"].items()):
        out.append(f"  {c}: " + ", ".join(f"{k} {x:.1f}" for k, x in v.items() if x is not None))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=30)
    p.add_argument("--think", type=float, default=1.0)
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--rt-prio", type=int, default=0,
                   help="the load generator under SCHED_RR at this priority (0: not)")
    p.add_argument("--load-cpu", type=int, default=0)
    p.add_argument("--device", default="vda", help="the disk holding the run dir")
    p.add_argument("--log", help="keep the load's log here")
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args(argv)
    res = probe(args)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    print(render(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
