"""The testbed app's queue time (X-Request-Start) and its place in the ground truth."""

import os

import pytest

from bench.testbed.app import local_backend, queue_seconds, task_cpu_seconds
from bench.testbed.truth import truth


NOW = 1_700_000_000.5


@pytest.mark.parametrize("stamp", ["t=1700000000.25", "1700000000.25", "t=1700000000250",
                                   "t=1700000000250000"])
def test_a_stamp_in_seconds_milli_or_microseconds_gives_the_wait(stamp):
    assert queue_seconds(stamp, NOW) == pytest.approx(0.25, abs=1e-6)


@pytest.mark.parametrize("stamp", [None, "", "t=", "t=soon"])
def test_no_readable_stamp_gives_no_wait(stamp):
    assert queue_seconds(stamp, NOW) is None


def test_a_stamp_ahead_of_the_worker_counts_zero():
    assert queue_seconds("t=1700000001.0", NOW) == 0.0


def _snapshot(at, t, n, queue):
    app = {"buy": {"requests": n, "cpu_s": 0.001 * n, "db_s": 0.004 * n, "time_s": 0.006 * n}}
    if queue is not None:
        app["buy"]["queue_s"] = queue
    return {"kind": "snapshot", "at": at, "t": t, "app": app,
            "cpu_s": {"app": 0.01 * n, "db": 0.02 * n}}


def _log(queue_end):
    lines = [{"kind": "run", "start": 100.0, "duration_s": 10.0, "mode": "closed"},
             _snapshot("start", 100.0, 0, None), _snapshot("end", 110.0, 40, queue_end)]
    lines += [{"class": "buy", "start": 100.0 + i * 0.25, "end": 100.01 + i * 0.25,
               "status": 200, "user": 0, "detail": ""} for i in range(40)]
    return lines


def test_the_truth_carries_the_queue_time_per_request():
    (buy,) = truth(_log(0.2)).classes
    assert buy.app_queue_s == pytest.approx(0.2 / 40)


def test_a_log_without_the_queue_counter_has_no_queue_time():
    (buy,) = truth(_log(None)).classes
    assert buy.app_queue_s is None


def test_the_probe_states_each_group_cpu_and_class():
    from bench.testbed.probe import render

    text = render({"users": 30, "rt_prio": 0, "span_s": 50.0, "requests": 1400,
                   "throughput": 28.0, "disk_io_share": 0.008, "wal_syncs": 205,
                   "wal_sync_ms": 347.0, "wait_events": {"CPU": 0.998, "IPC:X": 0.002},
                   "groups": {"app": {"cpu_ms_per_request": 1.4, "runq_ms_per_request": 28.0,
                                      "cpu_share": 0.04}},
                   "cpus": {"cpu0": {"user": 0.03, "niced": 0.92, "idle": 0.0}},
                   "classes": {"buy": {"client_ms": 99.5, "queue_ms": None}}})
    assert "disk io_time 0.8%" in text and "CPU 99.8%" in text
    assert "app: CPU 1.4 ms/request (4% of a CPU), run-queue wait 28.0 ms/request" in text
    assert "cpu0: user 3%, niced 92%" in text and "buy: client_ms 99.5" in text


def test_the_backend_cpu_clock_reads_the_kernels_per_task_time():
    me = os.getpid()
    a = task_cpu_seconds(me)
    sum(i * i for i in range(200_000))                 # some CPU of this process
    b = task_cpu_seconds(me)
    assert a is not None and b is not None and b > a
    assert task_cpu_seconds(None) is None and task_cpu_seconds(2 ** 31) is None
    # this process is no PostgreSQL backend: not read as one
    assert local_backend(me) is None and local_backend(None) is None


def test_the_app_edge_shares_the_untimed_cpu_per_request_and_old_logs_lack_the_backend_cpu():
    # one class: the app's busy 10 ms per request (no idle snapshot: no background), its timed
    # CPU 1 ms -- the per-request edge is the whole busy time per request
    (buy,) = truth(_log(0.2)).classes
    assert buy.app_demand_req_s == pytest.approx(0.010) and buy.db_backend_cpu_s is None
    assert buy.db_work == 1.0
