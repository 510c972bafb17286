"""Load generator of the testbed: closed (users with think time) or open (Poisson arrivals at a
flat or ramped rate), against the shop app on 127.0.0.1 only, bounded in time and in requests.

Every request is one JSON line of the log: ``{"class", "start", "end", "status", "user",
"detail"}`` (epoch seconds; ``status`` the HTTP status, 0 for a connection error, -1 for an open
arrival dropped because ``--max-in-flight`` requests were outstanding). With ``--pg-dsn`` (or
``TESTBED_PG_DSN``) the servers' own counters are read at the start and at the end into two
``{"kind": "snapshot"}`` lines (and one ``--idle`` seconds before the start, for the servers'
background CPU): pg_stat_statements per class, the app's per-class counters
(its ``/metrics``) and process-exporter's CPU seconds of the ``db`` and ``app`` groups -- the
ground truth of :mod:`bench.testbed.truth`.

While it runs, ``testbed_load_users`` on ``127.0.0.1:--metrics-port`` (default 19199, scraped by
the testbed's Prometheus) is the number of users (closed) or of requests in flight (open): the
session count a real shop would report.

    python -m bench.testbed.load --duration 60 --out /tmp/load.jsonl closed --users 5 --think 1
    python -m bench.testbed.load --duration 60 --out /tmp/load.jsonl open --rate 4 --ramp-to 8
    python -m bench.testbed.load --duration 900 --out /tmp/load.jsonl open --rate 4 --ramp-to 12 \
        --hold 300                  # 5 minutes flat at 4/s, then the ramp
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlsplit

#: the default class mix (fractions of requests)
MIX = {"home": 0.4, "product": 0.3, "search": 0.15, "buy": 0.15}
#: hard bounds whatever the options
MAX_DURATION_S = 3600.0
MAX_REQUESTS = 200_000
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    timeout_s: float


def parse_mix(text: str) -> dict[str, float]:
    """``home=0.4,search=0.2`` as fractions summing to 1."""
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in MIX:
            raise argparse.ArgumentTypeError(f"unknown class {name!r} (known: {sorted(MIX)})")
        out[name.strip()] = float(value)
    total = sum(out.values())
    if not total > 0 or any(v < 0 for v in out.values()):
        raise argparse.ArgumentTypeError(f"the mix must be non-negative with a positive sum: {text}")
    return {k: v / total for k, v in out.items()}


class Log:
    """The JSON-lines log, shared by the threads."""

    def __init__(self, fh: IO[str], max_requests: int) -> None:
        self.fh, self.max_requests = fh, max_requests
        self.lock = threading.Lock()
        self.requests = 0

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"))
        with self.lock:
            self.fh.write(line + "\n")

    def take(self) -> bool:
        """Count one more request; false once the bound is reached."""
        with self.lock:
            if self.requests >= self.max_requests:
                return False
            self.requests += 1
            return True


def send(target: Target, cls: str, user: int, log: Log) -> None:
    """One request of ``cls``, logged."""
    method = "POST" if cls == "buy" else "GET"
    start = time.time()
    status, detail = 0, ""
    try:
        conn = http.client.HTTPConnection(target.host, target.port, timeout=target.timeout_s)
        try:
            # the stamp a front proxy sets (nginx: t=${msec}): the app's queue time
            conn.request(method, f"/{cls}", headers={"Connection": "close",
                                                     "Cookie": f"session=user-{user}",
                                                     "X-Request-Start": f"t={start:.6f}"})
            resp = conn.getresponse()
            resp.read()
            status, detail = resp.status, resp.getheader("X-Testbed-Detail", "")
        finally:
            conn.close()
    except (OSError, http.client.HTTPException) as exc:
        detail = f"{type(exc).__name__}: {exc}"
    log.write({"class": cls, "start": round(start, 6), "end": round(time.time(), 6),
               "status": status, "user": user, "detail": detail})


def join_times(users: int, ramp_to: int | None, span_s: float) -> list[float]:
    """Seconds after the start at which each user joins: ``users`` at once, then one user at a
    time, evenly, so that ``ramp_to`` have joined by the end (the last one a step before)."""
    top = max(users, ramp_to or users)
    return [0.0 if u < users else span_s * (u - users + 1) / (top - users + 1)
            for u in range(top)]


def closed(target: Target, log: Log, users: int, think_s: float, mix: dict[str, float],
           deadline: float, seed: int, gauge: Any, ramp_to: int | None = None) -> None:
    """``users`` threads, each: a request, an exponential think time of mean ``think_s``, ...
    until the deadline. With ``ramp_to``, user ``u >= users`` joins at the fraction
    ``(u - users + 1) / (ramp_to - users + 1)`` of the run: the population grows linearly
    (one step at a time) to ``ramp_to`` by the end, as the sessions of a growing audience."""
    classes, weights = list(mix), list(mix.values())
    start = time.time()
    joins = join_times(users, ramp_to, deadline - start)
    top = len(joins)
    active = {"n": 0}
    lock = threading.Lock()

    def user(u: int) -> None:
        rng = random.Random(seed * 1_000_003 + u)
        time.sleep(max(0.0, start + joins[u] - time.time()))
        if time.time() >= deadline:
            return
        with lock:
            active["n"] += 1
            if gauge is not None:
                gauge.set(active["n"])
        time.sleep(rng.uniform(0, think_s))           # staggered start
        while time.time() < deadline and log.take():
            send(target, rng.choices(classes, weights)[0], u, log)
            time.sleep(min(rng.expovariate(1 / think_s) if think_s > 0 else 0,
                           max(0.0, deadline - time.time())))

    threads = [threading.Thread(target=user, args=(u,), daemon=True) for u in range(top)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.time()) + target.timeout_s + 1)
    if gauge is not None:
        gauge.set(0)


def rate_at(elapsed: float, rate: float, ramp_to: float | None, span: float,
            hold: float = 0.0) -> float:
    """The open load's arrival rate ``elapsed`` seconds into a run of ``span`` seconds:
    ``rate`` for the first ``hold`` seconds, then linear to ``ramp_to`` at the end (flat
    throughout without ``ramp_to``) -- the flat-then-ramp shape of an operating point that
    grows past capacity, whose flat part judges the model at a settled operating point."""
    if ramp_to is None or elapsed <= hold or span <= hold:
        return rate
    return rate + (ramp_to - rate) * min(1.0, (elapsed - hold) / (span - hold))


def open_load(target: Target, log: Log, rate: float, ramp_to: float | None,
              mix: dict[str, float], start: float, deadline: float, seed: int,
              max_in_flight: int, gauge: Any, hold: float = 0.0) -> None:
    """Poisson arrivals at ``rate`` per second (flat for ``hold`` seconds, then linearly to
    ``ramp_to`` by the deadline: :func:`rate_at`); an arrival finding ``max_in_flight``
    requests outstanding is logged as dropped."""
    rng = random.Random(seed)
    classes, weights = list(mix), list(mix.values())
    span = deadline - start
    in_flight = threading.BoundedSemaphore(max_in_flight)
    busy = [0]
    lock = threading.Lock()

    def run(cls: str, n: int) -> None:
        try:
            send(target, cls, n, log)
        finally:
            with lock:
                busy[0] -= 1
                if gauge is not None:
                    gauge.set(busy[0])
            in_flight.release()

    t, n = start, 0
    while True:
        lam = rate_at(t - start, rate, ramp_to, span, hold)
        # the next arrival of a process whose rate changes slowly against its gaps
        t += rng.expovariate(max(lam, 1e-9))
        if t >= deadline or not log.take():
            break
        time.sleep(max(0.0, t - time.time()))
        cls = rng.choices(classes, weights)[0]
        n += 1
        if not in_flight.acquire(blocking=False):
            now = time.time()
            log.write({"class": cls, "start": round(now, 6), "end": round(now, 6),
                       "status": -1, "user": n, "detail": "dropped: max in flight"})
            continue
        with lock:
            busy[0] += 1
            if gauge is not None:
                gauge.set(busy[0])
        threading.Thread(target=run, args=(cls, n), daemon=True).start()
    end_wait = time.time() + target.timeout_s + 1
    while time.time() < end_wait:
        with lock:
            if busy[0] == 0:
                break
        time.sleep(0.05)


# ----------------------------------------------------------------------------- the servers' counters
_SAMPLE = re.compile(r'^([a-zA-Z_:][\w:]*)\{([^}]*)\}\s+(\S+)')


def _metrics(url: str) -> list[tuple[str, dict[str, str], float]]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.request("GET", parts.path or "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def snapshot(at: str, app_url: str, process_url: str, pg_dsn: str | None) -> dict[str, Any]:
    """The servers' cumulative counters now (module docstring); a part that cannot be read is
    an ``error`` entry, not a failure of the run."""
    snap: dict[str, Any] = {"kind": "snapshot", "at": at, "t": round(time.time(), 6)}
    if pg_dsn:
        try:
            import psycopg

            with psycopg.connect(pg_dsn, autocommit=True, connect_timeout=5) as conn:
                rows = conn.execute(
                    "SELECT substring(query from 'class=([a-z]+)'), sum(calls)::float8, "
                    "sum(total_exec_time)::float8 / 1000 FROM pg_stat_statements "
                    "WHERE query LIKE '/* class=%' GROUP BY 1").fetchall()
            snap["pg"] = {c: {"calls": calls, "exec_s": ex} for c, calls, ex in rows}
        except Exception as exc:               # noqa: BLE001 -- reported in the snapshot
            snap["pg_error"] = f"{type(exc).__name__}: {exc}"
    try:
        app: dict[str, dict[str, float]] = {}
        for name, labels, value in _metrics(app_url):
            cls = labels.get("handler")
            key = {"testbed_requests_total": "requests", "testbed_request_cpu_seconds_total":
                   "cpu_s", "testbed_db_seconds_total": "db_s",
                   "testbed_request_duration_seconds_sum": "time_s",
                   "testbed_request_queue_seconds_total": "queue_s",
                   "testbed_db_backend_cpu_seconds_total": "db_cpu_s"}.get(name)
            if cls and key:
                app.setdefault(cls, {}).setdefault(key, 0.0)
                app[cls][key] += value
        snap["app"] = app
    except (OSError, http.client.HTTPException) as exc:
        snap["app_error"] = f"{type(exc).__name__}: {exc}"
    try:
        groups: dict[str, float] = {}
        for name, labels, value in _metrics(process_url):
            if name == "namedprocess_namegroup_cpu_seconds_total":
                groups[labels["groupname"]] = groups.get(labels["groupname"], 0.0) + value
        snap["cpu_s"] = groups
    except (OSError, http.client.HTTPException, KeyError) as exc:
        snap["cpu_error"] = f"{type(exc).__name__}: {exc}"
    return snap


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:18080", help="the app (loopback only)")
    p.add_argument("--duration", type=float, default=60.0,
                   help=f"seconds of load (at most {MAX_DURATION_S:g})")
    p.add_argument("--max-requests", type=int, default=20_000,
                   help=f"stop after this many requests (at most {MAX_REQUESTS})")
    p.add_argument("--out", required=True, help="the JSON-lines log")
    p.add_argument("--mix", type=parse_mix, default=MIX, help="e.g. home=0.4,product=0.3,"
                                                              "search=0.15,buy=0.15")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    p.add_argument("--nice", type=int, default=19, help="the generator's own niceness increment")
    p.add_argument("--metrics-port", type=int, default=19199,
                   help="testbed_load_users on 127.0.0.1:PORT (0: none)")
    p.add_argument("--pg-dsn", default=os.environ.get("TESTBED_PG_DSN"),
                   help="libpq DSN for the pg_stat_statements snapshots (default TESTBED_PG_DSN)")
    p.add_argument("--process-url", default="http://127.0.0.1:19156/metrics",
                   help="process-exporter, for the groups' CPU snapshots")
    p.add_argument("--idle", type=float, default=5.0,
                   help="seconds without load between two snapshots before the load: the "
                        "servers' background CPU (scrapes, housekeeping); 0: none")
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("closed", help="users with think time")
    c.add_argument("--users", type=int, default=5)
    c.add_argument("--think", type=float, default=1.0, help="mean think time, seconds")
    c.add_argument("--ramp-to", type=int, default=None,
                   help="the users at the end (one more user at a time); default: flat")
    o = sub.add_parser("open", help="Poisson arrivals")
    o.add_argument("--rate", type=float, required=True, help="arrivals per second")
    o.add_argument("--ramp-to", type=float, default=None,
                   help="the rate at the end (linear ramp); default: flat")
    o.add_argument("--hold", type=float, default=0.0,
                   help="seconds at --rate before the ramp to --ramp-to begins")
    o.add_argument("--max-in-flight", type=int, default=64)
    args = p.parse_args(argv)

    parts = urlsplit(args.url)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK:
        p.error(f"--url must be http:// on the loopback (127.0.0.1), got {args.url!r}")
    if not 0 < args.duration <= MAX_DURATION_S:
        p.error(f"--duration must be within (0, {MAX_DURATION_S:g}] s")
    if not 0 < args.max_requests <= MAX_REQUESTS:
        p.error(f"--max-requests must be within [1, {MAX_REQUESTS}]")
    if args.mode == "closed" and not (1 <= args.users <= 500 and args.think >= 0 and (
            args.ramp_to is None or args.users <= args.ramp_to <= 500)):
        p.error("--users must be within [1, 500], --ramp-to within [--users, 500], --think >= 0")
    if args.mode == "open" and not (0 < args.rate <= 500 and (args.ramp_to is None
                                                              or 0 <= args.ramp_to <= 500)):
        p.error("--rate and --ramp-to must be within (0, 500] per second")
    if args.mode == "open" and not 0 <= args.hold < args.duration:
        p.error(f"--hold must be within [0, --duration), got {args.hold:g}")
    if args.nice:
        os.nice(args.nice)
    target = Target(parts.hostname, parts.port or 80, args.timeout)
    app_metrics = f"http://{parts.hostname}:{parts.port or 80}/metrics"

    gauge = None
    if args.metrics_port:
        from prometheus_client import CollectorRegistry, Gauge, start_http_server

        registry = CollectorRegistry()
        gauge = Gauge("testbed_load_users", "users (closed) or requests in flight (open)",
                      registry=registry)
        start_http_server(args.metrics_port, addr="127.0.0.1", registry=registry)

    with open(args.out, "w", encoding="utf-8") as fh:
        log = Log(fh, args.max_requests)
        if args.idle > 0:
            log.write(snapshot("idle", app_metrics, args.process_url, args.pg_dsn))
            time.sleep(min(args.idle, 60.0))
        log.write(snapshot("start", app_metrics, args.process_url, args.pg_dsn))
        start = time.time()
        deadline = start + args.duration
        log.write({"kind": "run", "mode": args.mode, "start": round(start, 6),
                   "duration_s": args.duration, "mix": args.mix, "seed": args.seed,
                   **({"users": args.users, "think_s": args.think, "ramp_to": args.ramp_to}
                      if args.mode == "closed"
                      else {"rate": args.rate, "ramp_to": args.ramp_to, "hold_s": args.hold})})
        if args.mode == "closed":
            closed(target, log, args.users, args.think, args.mix, deadline, args.seed, gauge,
                   args.ramp_to)
        else:
            open_load(target, log, args.rate, args.ramp_to, args.mix, start, deadline,
                      args.seed, args.max_in_flight, gauge, args.hold)
        end = time.time()
        # the last scrapes see the counters of the last requests (scrape interval 1 s)
        log.write(snapshot("end", app_metrics, args.process_url, args.pg_dsn))
    print(f"{log.requests} requests in {end - start:.1f} s ({args.mode}); log {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
