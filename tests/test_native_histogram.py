"""Measured quantiles from Prometheus native histograms: Prometheus' ``histogram_quantile``
rule on a native histogram's buckets (``estimators/native_histogram.py``), the answers of the
HTTP API parsed, the Prometheus source's ``response_time_native_histogram`` (configuration,
windows, bad input named by its field, a refused answer as a dead letter), and the test
exporter's protobuf encoding. Against the real Prometheus:
``tests/test_native_histogram_services.py``."""

from __future__ import annotations

import dataclasses
import json
import math
import urllib.parse

import numpy as np
import pytest

from estimators.histogram import HistogramError
from estimators.native_histogram import check_native, native_quantile
from native_exporter import NativeHistogram, varint, zigzag
from streams.core.config_error import ConfigError
from streams.core.records import parse_window
from streams.sources.prometheus import AnswerError, source_from_mapping
from streams.sources.prometheus_http import PrometheusClient, fetch_windows
from streams.sources.prometheus_native import (NativeSeries, add_native_quantiles,
                                               parse_native_result)
from tests.fake_prometheus import FakePrometheus, json_answer

#: 10 observations: 2 in (0.5, 1], 6 in (1, 2], 2 in (2, 4] (schema 0)
BUCKETS = [[0, 0.5, 1.0, 2.0], [0, 1.0, 2.0, 6.0], [0, 2.0, 4.0, 2.0]]


# -- the rule ---------------------------------------------------------------------------------
def test_linear_interpolation_from_the_bucket_s_own_lower_bound():
    # rank 5: past the first bucket (2), inside the second: 1 + (2 - 1) (5 - 2) / 6
    assert native_quantile(0.5, 10, BUCKETS) == pytest.approx(1.5)
    # rank 1 in the first bucket: from its lower bound 0.5, not from 0 (the classic rule's)
    assert native_quantile(0.1, 10, BUCKETS) == pytest.approx(0.75)
    assert native_quantile(0.95, 10, BUCKETS) == pytest.approx(2.0 + 2.0 * 1.5 / 2)
    # a rank on a bucket's end is that bucket's upper bound
    assert native_quantile(0.8, 10, BUCKETS) == pytest.approx(2.0)


def test_the_zero_bucket_starts_at_zero_and_nan_observations_count_in_the_rank():
    zero = [[3, -1e-3, 1e-3, 4.0], [0, 1e-3, 2e-3, 4.0]]
    assert native_quantile(0.25, 8, zero) == pytest.approx(0.5e-3)      # [0, z], not [-z, z]
    assert native_quantile(0.75, 8, zero) == pytest.approx(1.5e-3)
    # 2 NaN observations: in the count, in no bucket; a rank never reached: the last bound
    assert native_quantile(0.5, 12, BUCKETS) == pytest.approx(1.0 + 4.0 / 6)
    assert native_quantile(0.99, 12, BUCKETS) == 4.0
    # no observation: no quantile
    assert native_quantile(0.5, 0, []) is None
    assert native_quantile(0.5, 3, []) is None


def test_float_residue_of_summed_rates_is_capped_at_the_count():
    residue = [[0, 0.5, 1.0, 0.2], [0, 1.0, 2.0, 0.8 + 1e-15]]
    assert native_quantile(0.99, 1.0, residue) == pytest.approx(1.0 + 0.79 / (0.8 + 1e-15))


@pytest.mark.parametrize("seed", range(6))
def test_the_quantile_lies_in_the_bucket_of_the_true_one(seed):
    rng = np.random.default_rng(seed)
    schema = int(rng.integers(-4, 9))
    hist = NativeHistogram(schema, zero_threshold=1e-3)
    values = rng.lognormal(math.log(0.05), 1.0, 500)
    values[:20] = 1e-4                                     # in the zero bucket
    for v in values.tolist():
        hist.observe(v)
    buckets = [[3, -1e-3, 1e-3, float(hist.zero_count)]] + [
        [0, max(hist.upper(i - 1), 1e-3), hist.upper(i), float(n)]
        for i, n in sorted(hist.buckets.items())]
    for level in (0.5, 0.9, 0.95, 0.99):
        truth = float(np.quantile(values, level, method="inverted_cdf"))
        i = hist.index(truth)
        # the exporter's index: the least i with truth <= base^i
        assert hist.upper(i - 1) < truth <= hist.upper(i)
        got = native_quantile(level, len(values), buckets)
        assert hist.upper(i - 1) <= got <= hist.upper(i), (schema, level)


@pytest.mark.parametrize("count, buckets, field, words", [
    (-1, BUCKETS, "h.count", "finite number >= 0"),
    (float("nan"), BUCKETS, "h.count", "must be a number"),
    (10, [[0, 0.5, 1.0, -2.0]], "h.buckets[0][3]", "finite number >= 0"),
    (10, [[0, 0.5, 1.0, float("nan")]], "h.buckets[0][3]", "must be a number"),
    (10, [[0, 1.0, 2.0, 6.0], [0, 0.5, 1.0, 2.0]], "h.buckets[1][1]", "not monotone"),
    (10, [[0, 0.5, 1.5, 2.0], [0, 1.0, 2.0, 6.0]], "h.buckets[1][1]", "not monotone"),
    (10, [[0, 2.0, 1.0, 2.0]], "h.buckets[0][2]", "above its lower bound"),
    (10, [[1, -2.0, -1.0, 2.0], *BUCKETS], "h.buckets[0]", "negative observations"),
    (9, BUCKETS, "h.buckets", "more observations than the count"),
    (10, [[7, 0.5, 1.0, 2.0]], "h.buckets[0][0]", "boundary rule"),
    (10, [[0, 0.5, 1.0]], "h.buckets[0]", "[boundary_rule, lower, upper, count]"),
])
def test_a_broken_native_histogram_is_refused_naming_the_field(count, buckets, field, words):
    with pytest.raises(HistogramError) as err:
        native_quantile(0.5, count, buckets, "h")
    assert err.value.field == field and words in err.value.reason, err.value


def test_a_quantile_outside_0_1_is_refused():
    for level in (0.0, 1.0, float("nan")):
        with pytest.raises(HistogramError, match="within"):
            native_quantile(level, 10, BUCKETS, "h")
    assert check_native(10, BUCKETS) == [tuple(b) for b in BUCKETS]


# -- the answers ------------------------------------------------------------------------------
def histogram(count, buckets):
    return {"count": repr(float(count)), "sum": "1.5",
            "buckets": [[r, repr(lo), repr(up), repr(n)] for r, lo, up, n in buckets]}


def test_a_range_answer_of_native_histograms_is_parsed():
    data = {"resultType": "matrix", "result": [
        {"metric": {"handler": "/buy"}, "histograms": [[1800000005, histogram(10, BUCKETS)],
                                                       [1800000010.5, {"count": "0",
                                                                       "sum": "0"}]]}]}
    (series,) = parse_native_result(data, "q")
    assert series.labels == {"handler": "/buy"}
    assert series.points[1800000005000] == (10.0, BUCKETS)
    assert series.points[1800000010500] == (0.0, [])
    vector = {"resultType": "vector", "result": [
        {"metric": {}, "histogram": [1800000005, histogram(10, BUCKETS)]}]}
    assert parse_native_result(vector, "q")[0].points[1800000005000][0] == 10.0


@pytest.mark.parametrize("result, path, words", [
    ([{"metric": {"handler": "a"}, "values": [[1800000005, "3"]]}], "data.result[0].values",
     "float samples where native histograms are due"),
    ([{"metric": {}, "histograms": [[1800000005, {"sum": "1"}]]}],
     "data.result[0].histograms[0][1]", "an object with count"),
    ([{"metric": {}, "histograms": [[1800000005, {"count": "ten"}]]}],
     "data.result[0].histograms[0][1].count", "a number as a string"),
    ([{"metric": {}, "histograms": [[1800000005, {"count": "1", "buckets": [[0, "1", "2"]]}]]}],
     "data.result[0].histograms[0][1].buckets[0]", "[boundary_rule, lower, upper, count]"),
    ([{"metric": {}, "histograms": [["now", {"count": "1"}]]}],
     "data.result[0].histograms[0][0]", "epoch seconds"),
    ([{"metric": {}}], "data.result[0]", "without histograms"),
])
def test_an_answer_of_another_shape_names_the_path(result, path, words):
    with pytest.raises(AnswerError) as err:
        parse_native_result({"resultType": "matrix", "result": result}, "tiers.front.q")
    assert err.value.path == path and words in err.value.rule, err.value


# -- the source -------------------------------------------------------------------------------
NATIVE = "sum by (handler) (rate(http_seconds[{window}]))"


def config(**tier):
    return {"prometheus": {"url": "http://127.0.0.1:1", "system": "shop", "window_s": 5},
            "tiers": {"front": {"busy_seconds": "busy", "completions": "done", **tier}}}


def test_the_configuration_takes_the_native_histogram_and_checks_it():
    src = source_from_mapping(config(response_time_native_histogram=NATIVE,
                                     quantiles=["p50", "p99"]), {})
    (tier,) = src.tiers
    assert tier.response_time_native_histogram == NATIVE
    assert tier.queries()["response_time_native_histogram"] == NATIVE
    assert tier.quantiles == (0.5, 0.99)
    with pytest.raises(ConfigError, match=r"response_time_native_histogram: must give the "
                                          r"window's histogram, with \{window\}"):
        source_from_mapping(config(response_time_native_histogram="http_seconds"), {})
    with pytest.raises(ConfigError, match="at most one of response_time_histogram"):
        source_from_mapping(config(response_time_native_histogram=NATIVE,
                                   response_time_histogram="http_seconds_bucket"), {})


def test_the_records_get_each_class_s_quantiles_and_a_broken_class_costs_only_its_own():
    src = source_from_mapping(config(response_time_native_histogram=NATIVE,
                                     quantiles=["p50", "p95"]), {})
    end = 1_800_000_005_000
    good = {"labels": {"handler": "/buy"}, "points": {end: (10.0, BUCKETS)}}
    broken = {"labels": {"handler": "/home"},
              "points": {end: (10.0, [[0, 1.0, 2.0, 6.0], [0, 0.5, 1.0, 4.0]])}}
    twice = [{"labels": {"handler": "/cart", "instance": i}, "points": {end: (10.0, BUCKETS)}}
             for i in ("a", "b")]
    empty = {"labels": {"handler": "/idle"}, "points": {end: (0.0, [])}}
    natives = {"front": [NativeSeries(**s) for s in (good, broken, *twice, empty)]}
    record = {"system": "shop", "tier": "front", "end": end / 1000, "window_s": 5.0,
              "utilization": 0.3, "cores": 1, "completions": {"/buy": 10, "/home": 10}}
    gaps = add_native_quantiles(src, natives, [record])
    assert record["response_time_quantiles_s"] == {
        "/buy": {"p50": pytest.approx(1.5), "p95": pytest.approx(3.5)}}
    assert parse_window(record).response_time_quantiles_s["/buy"]["p95"] == pytest.approx(3.5)
    assert {g.field for g in gaps} == {"response_time_quantiles_s./home.histogram.buckets[1][1]",
                                       "response_time_quantiles_s./cart"}
    assert all(g.made and g.tier == "front" and g.end_ms == end for g in gaps)
    assert any("sum by (handler)" in g.reason for g in gaps)


T0 = 1_800_000_000


def matrix(series):
    return json.dumps({"status": "success",
                       "data": {"resultType": "matrix", "result": series}}).encode()


def answer_by_query(native_body):
    """A fake Prometheus: a busy counter, completions of /buy, and ``native_body`` for the
    native histograms' query; the grid of every range query is honoured."""

    def answer(h):
        params = urllib.parse.parse_qs(urllib.parse.urlsplit(h.path).query)
        q = params["query"][0]
        start, end, step = (float(params[k][0]) for k in ("start", "end", "step"))
        grid = np.arange(start, end + step / 2, step).tolist()
        if q.startswith("sum by"):
            body = native_body(grid)
        else:
            rate = 0.3 if q == "busy" else 2.0
            labels = {} if q == "busy" else {"handler": "/buy"}
            body = matrix([{"metric": labels,
                            "values": [[t, repr(rate * (t - T0 + 600))] for t in grid]}])
        json_answer(body)(h)

    return answer


def test_a_backtest_reads_the_native_quantiles_and_a_refused_answer_is_a_dead_letter():
    good = answer_by_query(lambda grid: matrix([{"metric": {"handler": "/buy"}, "histograms": [
        [t, histogram(10, BUCKETS)] for t in grid]}]))
    with FakePrometheus(good) as fake:
        src = source_from_mapping(config(response_time_native_histogram=NATIVE), {})
        src = dataclasses.replace(src, url=fake.url, concurrency=1)
        fetched = fetch_windows(src, T0, T0 + 20, PrometheusClient(src, env={}))
    assert len(fetched.records) == 4 and not fetched.refused
    for record in fetched.records:
        assert record["response_time_quantiles_s"]["/buy"]["p50"] == pytest.approx(1.5)
    # floats where histograms are due (a classic histogram's series): a dead letter naming
    # the query, and the windows made without quantiles
    floats = answer_by_query(lambda grid: matrix([{"metric": {"handler": "/buy"},
                                                   "values": [[t, "1"] for t in grid]}]))
    with FakePrometheus(floats) as fake:
        src = dataclasses.replace(src, url=fake.url)
        fetched = fetch_windows(src, T0, T0 + 20, PrometheusClient(src, env={}))
    assert len(fetched.records) == 4
    assert all("response_time_quantiles_s" not in r for r in fetched.records)
    (refused,) = fetched.refused
    assert refused.field == "tiers.front.response_time_native_histogram.data.result[0].values"
    assert "float samples where native histograms are due" in refused.reason
    assert "4 of the tier's windows" in refused.reason and "without response_time_quantiles_s" \
        in refused.reason


# -- the test exporter's encoding ---------------------------------------------------------------
def test_varints_zigzag_and_bucket_indices():
    assert varint(1) == b"\x01" and varint(300) == b"\xac\x02" and len(varint(-1)) == 10
    assert [zigzag(n) for n in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]
    # schema 0: (0.5, 1] is bucket 0, (1, 2] bucket 1; schema -1 (base 4): (1, 4] is bucket 1
    assert NativeHistogram(0).index(1.0) == 0 and NativeHistogram(0).index(1.5) == 1
    assert NativeHistogram(-1).index(4.0) == 1 and NativeHistogram(-1).index(4.5) == 2
    assert NativeHistogram(3).index(2.0) == 8 and NativeHistogram(3).index(2.0001) == 9
