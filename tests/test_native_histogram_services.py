"""A native latency histogram scraped by the real Prometheus (``infra/services.sh`` starts it
with ``--enable-feature=native-histograms``): the test's own exporter
(``tests/native_exporter.py``, the protobuf exposition format encoded by hand; two handlers of
schemas 3 and -1, a zero bucket) is a target of its ``perfcast`` scrape job. The Prometheus
source's windows carry ``response_time_quantiles_s`` that must be what Prometheus' own
``histogram_quantile`` gives on the same query at each window's end, within ``1e-9``
relative; and over one window holding every observation, the quantiles of the observations
themselves within bucket resolution. Under ``CI=true`` a missing Prometheus fails
(``tests/ci_policy.py``)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from estimators.histogram import level_name
from native_exporter import NativeExporter
from pipeline_harness import unique, wait_for
from scrape_helpers import compare_with_histogram_quantile, query, whole_window
from streams.core.records import parse_window
from streams.sources.prometheus import source_from_mapping
from streams.sources.prometheus_http import fetch_windows

pytestmark = [pytest.mark.services, pytest.mark.slow]

LEVELS = (0.5, 0.9, 0.95, 0.99)
WINDOW_S = 4
DURATION_S, RATE = 12.0, 40
#: per handler: the schema of its histogram and the log-normal law of its response times
LAWS = {"/buy": (3, 0.08, 0.9), "/home": (-1, 0.02, 0.6)}
#: a tenth of /home's observations are this fast: within the zero bucket
ZERO_THRESHOLD = 1e-4


def native_query(tag: str, window: str) -> str:
    return f'sum by (handler) (rate(app_latency_seconds{{test="{tag}"}}[{window}]))'


def source(url: str, tag: str, window_s: float, offset_s: float = 0.0):
    sel = f'test="{tag}"'
    return source_from_mapping({
        "prometheus": {"url": url, "system": "native", "window_s": window_s,
                       "offset_s": offset_s},
        "tiers": {"front": {"busy_seconds": f"app_busy_seconds_total{{{sel}}}",
                            "completions": f"histogram_count(app_latency_seconds{{{sel}}})",
                            "response_time_native_histogram": native_query(tag, "{window}"),
                            "quantiles": [level_name(q) for q in LEVELS]}}}, {})


def test_native_quantiles_match_prometheus_histogram_quantile(prometheus_url,
                                                              prometheus_targets):
    url, tag = prometheus_url, unique("n")
    exporter = NativeExporter("app_latency_seconds", {h: s for h, (s, _, _) in LAWS.items()},
                              zero_threshold=ZERO_THRESHOLD)
    observed: dict[str, list[float]] = {h: [] for h in LAWS}
    rng = np.random.default_rng(2027)
    try:
        prometheus_targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{exporter.port}"],
                                                   "labels": {"test": tag}}]))
        sel = f'app_latency_seconds{{test="{tag}"}}'
        wait_for(lambda: len(query(url, sel, time.time())) == len(LAWS), 60,
                 "Prometheus scraping the test's native-histogram exporter")
        time.sleep(3.0)                          # scrapes of the zeros before the workload
        began = time.time()
        while time.time() < began + DURATION_S:
            for handler, (_, median, sigma) in LAWS.items():
                values = rng.lognormal(math.log(median), sigma, RATE // 10)
                if handler == "/home":
                    values[rng.random(values.size) < 0.1] = ZERO_THRESHOLD / 2
                for v in values.tolist():
                    exporter.observe(handler, v)
                    observed[handler].append(v)
            exporter.add_busy(0.05)
            time.sleep(0.1)
        ended = time.time()
        stamp = f'timestamp(histogram_count(app_latency_seconds{{test="{tag}"}}))'
        whole_end, whole_s = whole_window(url, stamp, began, ended)
    finally:
        prometheus_targets.write_text("[]")
        exporter.close()

    # every window of WINDOW_S: the source's quantiles are Prometheus' own
    fetched = fetch_windows(source(url, tag, WINDOW_S), began - WINDOW_S, whole_end)
    assert not fetched.refused, fetched.refused
    assert not [g for g in fetched.gaps if g.made], fetched.gaps
    compared = compare_with_histogram_quantile(
        url, fetched.records, LEVELS,
        lambda level: f"histogram_quantile({level}, {native_query(tag, f'{WINDOW_S}s')})")
    assert compared >= 3 * len(LAWS) * len(LEVELS), compared

    # one window holding every observation: the quantiles of the observations themselves,
    # within the bucket that holds the true quantile
    whole = fetch_windows(source(url, tag, whole_s, whole_end % whole_s),
                          whole_end - 1, whole_end)
    (record,) = [r for r in whole.records if r["end"] == whole_end]
    window = parse_window(record)
    for handler, values in observed.items():
        assert window.completions[handler] == pytest.approx(len(values), rel=1e-9)
        hist = exporter.histograms[handler]
        got = window.response_time_quantiles_s[handler]
        for level in LEVELS:
            truth = float(np.quantile(np.sort(values), level, method="inverted_cdf"))
            if truth <= ZERO_THRESHOLD:
                lower, upper = 0.0, ZERO_THRESHOLD
            else:
                i = hist.index(truth)
                lower, upper = hist.upper(i - 1), hist.upper(i)
            # the bounds as Python computes them may differ from Prometheus' by an ulp
            assert lower * (1 - 1e-12) <= got[level_name(level)] <= upper * (1 + 1e-12), \
                (handler, level, truth)
