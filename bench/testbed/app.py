"""The testbed shop: a plain WSGI application over PostgreSQL, run by gunicorn's sync workers.

Four request classes of different database cost (bench/testbed/schema.sql says what each
statement does): ``GET /home``, ``GET /product``, ``GET /search`` (heavy-tailed) and
``POST /buy`` (writes an order row). ``GET /metrics`` is the Prometheus exposition of every
worker together (prometheus-client's multiprocess mode: each worker writes its samples to
``PROMETHEUS_MULTIPROC_DIR``, the scrape merges them).

Per class (label ``handler``) the app exports

- ``testbed_requests_total{handler, status}``: completed requests;
- ``testbed_request_duration_seconds{handler}``: a histogram of the time from the request's
  arrival at the worker to its response (its ``_sum`` / ``_count`` is the mean response time at
  the app tier, which includes the database's);
- ``testbed_request_cpu_seconds_total{handler}``: the worker process' CPU time during the
  request (``time.process_time``): a sync worker serves one request at a time, so this is the
  app tier's own CPU demand per request, as the server reports it;
- ``testbed_db_seconds_total{handler}``: the wall time of the request's database calls, as the
  app sees it (the database's residence time plus the socket round trips);
- ``testbed_db_backend_cpu_seconds_total{handler}``: the CPU time of the worker's database
  backend during the request's database calls, from the kernel's per-task CPU clock of that
  process (``/proc/PID/schedstat``, nanoseconds; the testbed's database runs on the same
  host): a worker holds one connection and serves one request at a time, so this is the
  database's CPU per request of the class as the server's kernel counts it -- the statements'
  execution, parse, plan, protocol and commit, without the housekeeping processes' (WAL
  writer, autovacuum, the exporters' queries) and without the wait for the CPU that
  pg_stat_statements' elapsed times hold;
- ``testbed_request_queue_seconds_total{handler}``: the request's time from its
  ``X-Request-Start: t=SECONDS`` stamp (a front proxy's, e.g. nginx's ``t=${msec}``; the
  testbed's load generator sets it when it sends) to a worker's start on it -- the wait for a
  free sync worker in the listen queue, the connection's accept and the parsing. The queue time
  of the New Relic and Judoscale convention; requests without the stamp add nothing.

A worker opens its database connection when it starts (:func:`open_shop`, gunicorn's
``post_worker_init`` hook in bench/testbed/gunicorn_conf.py), not in its first request: the
opening (tens of ms) is no request's work, and timed inside one it would read as app time and
widen the app's service-time spread. A connection lost later is reopened by the next request
before its timers start, for the same reason.

Settings from the environment: ``TESTBED_PG_DSN`` (libpq connection string).
"""

from __future__ import annotations

import os
import random
import time
from urllib.parse import parse_qs

import psycopg
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST, multiprocess

CLASSES = ("home", "product", "search", "buy")

#: response-time buckets (seconds) from 1 ms to 10 s: the search's tail reaches a second
BUCKETS = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1,
           0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)

REQUESTS = Counter("testbed_requests", "completed requests", ["handler", "status"])
DURATION = Histogram("testbed_request_duration_seconds", "time at the app tier per request",
                     ["handler"], buckets=BUCKETS)
CPU = Counter("testbed_request_cpu_seconds", "worker CPU time during the requests", ["handler"])
DB_TIME = Counter("testbed_db_seconds", "wall time of the requests' database calls",
                  ["handler"])
DB_CPU = Counter("testbed_db_backend_cpu_seconds",
                 "CPU time of the worker's database backend during the requests' database calls",
                 ["handler"])
QUEUE = Counter("testbed_request_queue_seconds",
                "time from the X-Request-Start stamp to a worker's start on the request",
                ["handler"])

#: the rows each class compares by similarity() (schema.sql): its database cost
HOME_ROWS = 180
RELATED_ROWS = 300
RECOMMENDED_ROWS = 120


class Shop:
    """One worker's database connection and the four classes' statements."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        with self.conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM products")
            self.products = cur.fetchone()[0]
            cur.execute("SELECT count(*) FROM categories")
            self.categories = cur.fetchone()[0]
        self.rng = random.Random(os.getpid() ^ time.time_ns())
        #: the backend serving this connection (``/proc/PID/schedstat``: its CPU clock); None
        #: when that pid here is no PostgreSQL process (the database on another host)
        self.backend_pid = local_backend(self.conn.info.backend_pid)

    def _product_id(self, query: dict[str, list[str]]) -> int:
        try:
            return max(1, min(self.products, int(query["id"][0])))
        except (KeyError, ValueError, IndexError):
            return self.rng.randint(1, self.products)

    def home(self, query: dict[str, list[str]]) -> str:
        start = self.rng.randint(1, max(1, self.products - HOME_ROWS))
        with self.conn.cursor() as cur:
            cur.execute("/* class=home */ SELECT id, name, price FROM products "
                        "WHERE id BETWEEN %s AND %s "
                        "ORDER BY similarity(description, 'featured 0a1b2c') DESC LIMIT 10",
                        (start, start + HOME_ROWS - 1))
            rows = cur.fetchall()
        return f"home: {len(rows)} featured from {start}"

    def product(self, query: dict[str, list[str]]) -> str:
        pid = self._product_id(query)
        with self.conn.cursor() as cur:
            cur.execute("/* class=product */ SELECT id, category, name, price, description "
                        "FROM products WHERE id = %s", (pid,))
            row = cur.fetchone()
            cur.execute("/* class=product */ SELECT count(*), coalesce(sum(qty), 0) "
                        "FROM orders WHERE product_id = %s", (pid,))
            cur.fetchone()
            lo = max(1, pid - RELATED_ROWS // 2)
            cur.execute("/* class=product */ SELECT id, name FROM products "
                        "WHERE id BETWEEN %s AND %s AND id <> %s "
                        "ORDER BY similarity(description, %s) DESC LIMIT 5",
                        (lo, lo + RELATED_ROWS - 1, pid, row[4][:32]))
            cur.fetchall()
        return f"product {pid}"

    def search(self, query: dict[str, list[str]]) -> str:
        try:
            category = max(1, min(self.categories, int(query["category"][0])))
        except (KeyError, ValueError, IndexError):
            category = self.rng.randint(1, self.categories)
        term = (query.get("q") or [f"{self.rng.getrandbits(32):08x}"])[0][:64]
        with self.conn.cursor() as cur:
            cur.execute("/* class=search */ SELECT id, name, price FROM products "
                        "WHERE category = %s ORDER BY similarity(description, %s) DESC LIMIT 20",
                        (category, term))
            rows = cur.fetchall()
        return f"search category {category}: {len(rows)} results"

    def buy(self, query: dict[str, list[str]]) -> str:
        pid = self._product_id(query)
        customer = self.rng.randint(1, 1000)
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute("/* class=buy */ UPDATE products SET stock = stock - 1 WHERE id = %s "
                        "RETURNING price", (pid,))
            price = cur.fetchone()[0]
            cur.execute("/* class=buy */ INSERT INTO orders (product_id, customer, qty, price) "
                        "VALUES (%s, %s, 1, %s)", (pid, customer, price))
            cur.execute("/* class=buy */ SELECT count(*), sum(price * qty) FROM orders "
                        "WHERE customer = %s", (customer,))
            cur.fetchone()
            lo = self.rng.randint(1, max(1, self.products - RECOMMENDED_ROWS))
            cur.execute("/* class=buy */ SELECT id FROM products WHERE id BETWEEN %s AND %s "
                        "ORDER BY similarity(description, 'recommended 3d4e') DESC LIMIT 3",
                        (lo, lo + RECOMMENDED_ROWS - 1))
            cur.fetchall()
        return f"bought {pid} for customer {customer}"


_shop: Shop | None = None


def open_shop() -> Shop:
    """This worker's :class:`Shop`, its connection opened now if it is not open (module
    docstring: at the worker's start, or after a lost connection)."""
    global _shop
    if _shop is None:
        _shop = Shop(os.environ["TESTBED_PG_DSN"])
    return _shop


def _metrics(start_response):
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    body = generate_latest(registry)
    start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST),
                              ("Content-Length", str(len(body)))])
    return [body]


def local_backend(pid: int | None) -> int | None:
    """``pid`` when it is a PostgreSQL process on this host (its command line names postgres),
    else ``None``: a backend's pid on another host names some other process here."""
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as fh:
            return int(pid) if b"postgres" in fh.read() else None
    except (OSError, TypeError, ValueError):
        return None


def task_cpu_seconds(pid: int | None) -> float | None:
    """The CPU time a process has run so far, seconds, from the kernel's scheduler clock
    (``/proc/PID/schedstat``'s first field, nanoseconds on the CPU); ``None`` when it cannot
    be read (another host, no such process, a kernel without it)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{int(pid)}/schedstat", encoding="ascii") as fh:
            return int(fh.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def queue_seconds(stamp: str | None, now: float) -> float | None:
    """The time since an ``X-Request-Start`` stamp (``t=`` seconds since the epoch, or
    milli- or microseconds as some proxies write it); ``None`` without a readable stamp. A
    stamp ahead of ``now`` (clocks of two hosts) counts zero."""
    if not stamp:
        return None
    try:
        t = float(stamp.strip().removeprefix("t="))
    except ValueError:
        return None
    while t > 1e11:                    # milli- or microseconds since the epoch
        t /= 1000.0
    return max(0.0, now - t)


def app(environ, start_response):
    """The WSGI entry point (``bench.testbed.app:app``)."""
    picked = time.time()
    path = environ.get("PATH_INFO", "/").strip("/") or "home"
    if path == "metrics":
        return _metrics(start_response)
    if path not in CLASSES:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"no such page\n"]
    shop = open_shop()
    t0, c0 = time.perf_counter(), time.process_time()
    query = parse_qs(environ.get("QUERY_STRING", ""))
    status = "200 OK"
    b0 = task_cpu_seconds(shop.backend_pid)
    db0 = time.perf_counter()
    try:
        text = getattr(shop, path)(query)
    except psycopg.Error as exc:
        status, text = "500 Internal Server Error", f"database error: {exc}"
        if shop.conn.closed or isinstance(exc, psycopg.OperationalError):
            global _shop
            _shop = None                    # reconnect on the next request
    db = time.perf_counter() - db0
    b1 = task_cpu_seconds(shop.backend_pid)
    body = (text + "\n").encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body))),
                            ("X-Testbed-Detail", text[:200])])
    DB_TIME.labels(path).inc(db)
    if b0 is not None and b1 is not None and b1 >= b0:
        DB_CPU.labels(path).inc(b1 - b0)
    waited = queue_seconds(environ.get("HTTP_X_REQUEST_START"), picked)
    if waited is not None:
        QUEUE.labels(path).inc(waited)
    CPU.labels(path).inc(time.process_time() - c0)
    DURATION.labels(path).observe(time.perf_counter() - t0)
    REQUESTS.labels(path, status[:3]).inc()
    return [body]
