"""The testbed app opens a worker's database connection outside every request's timers: at
the worker's start (gunicorn's ``post_worker_init``), and after a lost connection before the
next request's clocks start. No PostgreSQL: the shop is a stand-in whose opening takes 60 ms
of a fake clock."""

from __future__ import annotations

import pytest

import bench.testbed.app as app_module
from bench.testbed import gunicorn_conf

OPENING_S = 0.060
QUERY_S = 0.002


class Clock:
    """``time.perf_counter``, ``process_time`` and ``time`` of one fake clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    process_time = time = perf_counter


class Recorder:
    """A prometheus metric's ``labels(...).observe/inc`` that keeps the values."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def labels(self, *args):
        return self

    def observe(self, value: float = 1.0) -> None:
        self.values.append(value)

    inc = observe


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    opened: list[str] = []

    class FakeShop:
        backend_pid = None

        def __init__(self, dsn: str) -> None:
            opened.append(dsn)
            clock.now += OPENING_S

        def home(self, query):
            clock.now += QUERY_S
            return "home"

    monkeypatch.setattr(app_module, "time", clock)
    monkeypatch.setattr(app_module, "Shop", FakeShop)
    monkeypatch.setattr(app_module, "_shop", None)
    monkeypatch.setenv("TESTBED_PG_DSN", "dbname=shop")
    for name in ("DURATION", "CPU", "DB_TIME", "REQUESTS"):
        monkeypatch.setattr(app_module, name, Recorder())
    clock.opened = opened
    return clock


def _home() -> None:
    app_module.app({"PATH_INFO": "/home"}, lambda status, headers: None)


def test_the_first_request_of_a_worker_is_timed_without_the_opening(clock):
    _home()
    assert clock.opened == ["dbname=shop"]
    assert app_module.DURATION.values == [pytest.approx(QUERY_S)]
    assert app_module.CPU.values == [pytest.approx(QUERY_S)]


def test_the_worker_start_hook_opens_the_connection_before_any_request(clock):
    gunicorn_conf.post_worker_init(worker=None)
    assert clock.opened == ["dbname=shop"]
    _home()
    _home()
    assert clock.opened == ["dbname=shop"]
    assert app_module.DURATION.values == [pytest.approx(QUERY_S)] * 2
