"""gunicorn settings of the testbed app (infra/testbed/up.sh passes the bind address and the
worker count on the command line).

Sync workers: one request at a time per worker process, so a worker's CPU time during a
request is that request's (bench/testbed/app.py). prometheus-client's multiprocess mode needs
each dead worker's live gauges dropped (``child_exit``); its counters stay, as they must.
"""

from prometheus_client import multiprocess

worker_class = "sync"
timeout = 60
# the access log would cost the app tier CPU per request that no real shop pays so cheaply
accesslog = None


def child_exit(server, worker):
    multiprocess.mark_process_dead(worker.pid)
