"""Helpers of the tests that run a workload against an exporter the real Prometheus scrapes
(``tests/test_histogram_quantiles_services.py``, ``tests/test_native_histogram_services.py``):
an instant query, the wait for a scrape past a time, and the per-window comparison with
Prometheus' own ``histogram_quantile``."""

from __future__ import annotations

import json
import math
import time
import urllib.parse
import urllib.request

from typing import Callable, Iterable

import pytest

from estimators.histogram import level_name
from pipeline_harness import wait_for
from streams.core.records import parse_window


def query(url: str, promql: str, at: float) -> list[dict]:
    """The result of an instant query of ``promql`` at ``at`` (epoch seconds)."""
    params = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{params}", timeout=30) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def whole_window(url: str, stamp: str, began: float, ended: float) -> tuple[float, float]:
    """``(end, length)`` of one window holding a workload run from ``began`` to ``ended``:
    it ends at a whole second after a scrape of the last observation (waited for: ``stamp`` is
    PromQL of the series' ``timestamp(...)``) and starts between the scrapes of the zeros and
    the first observation (the scrape interval is 1 s, the zeros scraped for 3 s before)."""
    end = math.ceil(ended) + 2.0
    wait_for(lambda: all(float(r["value"][1]) > end
                         for r in query(url, stamp, time.time()) or [{"value": [0, 0]}]),
             60, "a scrape past the long window's end")
    return end, float(round(end - began + 1.5))


def compare_with_histogram_quantile(url: str, records: Iterable[dict], levels: Iterable[float],
                                    promql: Callable[[float], str]) -> int:
    """Each window's ``response_time_quantiles_s`` against Prometheus' answer to
    ``promql(level)`` at the window's end, per handler, within a relative 1e-9; returns how
    many quantiles were compared."""
    compared = 0
    for record in records:
        window = parse_window(record)
        for handler, got in window.response_time_quantiles_s.items():
            for level in levels:
                answer = {r["metric"]["handler"]: float(r["value"][1])
                          for r in query(url, promql(level), window.end)}
                assert got[level_name(level)] == pytest.approx(answer[handler], rel=1e-9), \
                    (window.end, handler, level)
                compared += 1
    return compared
