"""gunicorn settings of the testbed app (infra/testbed/up.sh passes the bind address and the
worker count on the command line).

Sync workers: one request at a time per worker process, so a worker's CPU time during a
request is that request's (bench/testbed/app.py). prometheus-client's multiprocess mode needs
each dead worker's live gauges dropped (``child_exit``); its counters stay, as they must.

Prometheus scrapes the master (``when_ready``: the workers' merged metrics on
``TESTBED_APP_METRICS_PORT``), not a worker: a scrape served by a sync worker waits behind
the requests in the listen queue, and at load it missed the 1-s scrape timeout -- Prometheus
then marks every series of the app stale for that scrape. The app's own ``/metrics`` stays (the
load generator's snapshots read it).

Each worker opens its database connection once it has loaded the app (``post_worker_init``),
so no request's timers hold the opening (bench/testbed/app.py).
"""

import os

from prometheus_client import CollectorRegistry, multiprocess, start_http_server

worker_class = "sync"
timeout = 60
# the access log would cost the app tier CPU per request that no real shop pays so cheaply
accesslog = None


def child_exit(server, worker):
    multiprocess.mark_process_dead(worker.pid)


def post_worker_init(worker):
    import psycopg

    from bench.testbed.app import open_shop

    try:
        open_shop()
    except psycopg.Error as exc:        # the first request opens it, outside its timers
        worker.log.warning("testbed app: database connection not opened at start: %s", exc)


def when_ready(server):
    port = int(os.environ.get("TESTBED_APP_METRICS_PORT", "0"))
    if port:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        start_http_server(port, addr="127.0.0.1", registry=registry)
