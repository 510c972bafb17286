"""A latency histogram scraped by the real Prometheus (``infra/services.sh``): the test's own
exporter (``prometheus_client``, classic ``_bucket`` series per handler) is a target of its
``perfcast`` scrape job; the Prometheus source's windows carry ``response_time_quantiles_s``
that must be what Prometheus' own ``histogram_quantile`` gives on the same buckets over the same
window (``x - x offset W`` at the window's end: the source's rule, each end's latest scrape),
and over one window holding every observation, the quantiles of the observations themselves
within bucket resolution.

Native histograms: ``tests/test_native_histogram_services.py``. Under ``CI=true`` a missing
Prometheus fails (``tests/ci_policy.py``)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from estimators.histogram import bucket_quantile, level_name
from pipeline_harness import unique, wait_for
from scrape_helpers import compare_with_histogram_quantile, query, whole_window
from streams.core.records import parse_window
from streams.sources.prometheus import source_from_mapping
from streams.sources.prometheus_http import fetch_windows

pytestmark = [pytest.mark.services, pytest.mark.slow]

BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]
LEVELS = (0.5, 0.9, 0.95, 0.99)
WINDOW_S = 4
#: the workload: seconds, observations a second per handler
DURATION_S, RATE = 12.0, 40
#: per handler the log-normal law of its response times (median, sigma)
LAWS = {"/buy": (0.08, 0.9), "/home": (0.02, 0.6)}


def source(url: str, tag: str, window_s: float, offset_s: float = 0.0):
    sel = f'test="{tag}"'
    return source_from_mapping({
        "prometheus": {"url": url, "system": "hist", "window_s": window_s,
                       "offset_s": offset_s},
        "tiers": {"front": {"busy_seconds": f"app_busy_seconds_total{{{sel}}}",
                            "completions": f"app_latency_seconds_count{{{sel}}}",
                            "response_time_histogram": f"app_latency_seconds_bucket{{{sel}}}",
                            "quantiles": [level_name(q) for q in LEVELS]}}}, {})


def test_quantiles_match_prometheus_histogram_quantile(prometheus_url, prometheus_targets):
    from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

    url, tag = prometheus_url, unique("h")
    registry = CollectorRegistry()
    latency = Histogram("app_latency_seconds", "response time", ["handler"], buckets=BOUNDS,
                        registry=registry)
    busy = Counter("app_busy_seconds", "busy seconds", registry=registry)
    for handler in LAWS:
        latency.labels(handler)                  # the series exist at 0 before any request
    server, _ = start_http_server(0, "127.0.0.1", registry)
    port = server.server_address[1]
    observed: dict[str, list[float]] = {h: [] for h in LAWS}
    rng = np.random.default_rng(2026)
    try:
        prometheus_targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"],
                                                   "labels": {"test": tag}}]))
        sel = f'app_latency_seconds_count{{test="{tag}"}}'
        wait_for(lambda: len(query(url, sel, time.time())) == len(LAWS), 60,
                 "Prometheus scraping the test's exporter")
        time.sleep(3.0)                          # scrapes of the zeros before the workload
        began = time.time()
        while time.time() < began + DURATION_S:
            for handler, (median, sigma) in LAWS.items():
                for v in rng.lognormal(math.log(median), sigma, RATE // 10).tolist():
                    latency.labels(handler).observe(v)
                    observed[handler].append(v)
            busy.inc(0.05)
            time.sleep(0.1)
        ended = time.time()
        stamp = f'timestamp(app_latency_seconds_count{{test="{tag}"}})'
        whole_end, whole_s = whole_window(url, stamp, began, ended)
    finally:
        prometheus_targets.write_text("[]")
        server.shutdown()

    # every window of WINDOW_S: the source's quantiles are Prometheus' own
    fetched = fetch_windows(source(url, tag, WINDOW_S), began - WINDOW_S, whole_end)
    compared = compare_with_histogram_quantile(
        url, fetched.records, LEVELS,
        lambda level: (f'histogram_quantile({level}, sum by (le, handler) '
                       f'(app_latency_seconds_bucket{{test="{tag}"}} - '
                       f'app_latency_seconds_bucket{{test="{tag}"}} offset {WINDOW_S}s))'))
    # the workload spans three windows at least, both handlers in each
    assert compared >= 3 * len(LAWS) * len(LEVELS), compared

    # one window holding every observation: the quantiles of the observations themselves
    whole = fetch_windows(source(url, tag, whole_s, whole_end % whole_s),
                          whole_end - 1, whole_end)
    (record,) = [r for r in whole.records if r["end"] == whole_end]
    window = parse_window(record)
    edges = [0.0, *BOUNDS, math.inf]
    for handler, values in observed.items():
        assert window.completions[handler] == len(values)
        got = window.response_time_quantiles_s[handler]
        v = np.sort(values)
        cumulative = [(b, float(np.searchsorted(v, b, side="right"))) for b in BOUNDS]
        for level in LEVELS:
            assert got[level_name(level)] == pytest.approx(
                bucket_quantile(level, [*cumulative, (math.inf, float(len(v)))]), rel=1e-12)
            truth = float(np.quantile(v, level, method="inverted_cdf"))
            i = int(np.searchsorted(edges, truth, side="left"))
            assert edges[i - 1] <= got[level_name(level)] <= edges[i], (handler, level, truth)
