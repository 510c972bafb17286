"""Measured response-time quantiles: ``histogram_quantile``'s rule on cumulative buckets
(``estimators/histogram.py``), the window record's ``response_time_quantiles_s`` and its
validation, the mappings from Prometheus ``_bucket`` series, OTLP/JSON histograms (explicit and
exponential) and Telegraf histograms (both ``metric_version``s), bad input named by its field,
and the SLO quantile's error in ``model_error`` and the trust rule. The real Prometheus'
``histogram_quantile`` against the mapping: ``tests/test_histogram_quantiles_services.py``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from estimators.histogram import (HistogramError, bucket_quantile, check_quantiles,
                                  cumulative_from_counts, exponential_cumulative, level_name,
                                  quantile_level)
from streams.core.config_error import ConfigError
from streams.core.input_config import input_from_mapping
from streams.core.records import InvalidWindow, content_digest, parse_window
from streams.core.tier import Interval
from streams.sources.prometheus import source_from_mapping
from streams.sources.sample_windows import SampleWindows
from streams.sources.window_rules import Series, TierData, TierSpec, tier_windows

BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]
T0 = 1_764_000_000


def cumulative(values, bounds=BOUNDS):
    """Prometheus' cumulative buckets of ``values`` (``le`` inclusive), ``+Inf`` last."""
    v = np.sort(np.asarray(values, dtype=float))
    out = [(b, float(np.searchsorted(v, b, side="right"))) for b in bounds]
    return out + [(math.inf, float(len(v)))]


def bucket_of(value, bounds=BOUNDS):
    """``(lower, upper]`` of the bucket holding ``value``."""
    edges = [0.0, *bounds, math.inf]
    i = int(np.searchsorted(edges, value, side="left"))
    return edges[i - 1], edges[i]


# -- the rule -----------------------------------------------------------------------------------
def test_linear_interpolation_inside_the_bucket_as_histogram_quantile():
    # 100 observations: 20 <= 0.1, 60 more <= 0.2, 20 more <= 0.4
    buckets = [(0.1, 20), (0.2, 80), (0.4, 100), (math.inf, 100)]
    assert bucket_quantile(0.5, buckets) == pytest.approx(0.1 + 0.1 * 30 / 60)
    assert bucket_quantile(0.1, buckets) == pytest.approx(0.05)      # from 0 in the first
    assert bucket_quantile(0.95, buckets) == pytest.approx(0.2 + 0.2 * 15 / 20)
    # the order of the buckets and repeated bounds (summed) do not matter
    assert bucket_quantile(0.5, buckets[::-1]) == bucket_quantile(0.5, buckets)
    split = [(0.1, 10), (0.1, 10), (0.2, 80), (0.4, 100), (math.inf, 100)]
    assert bucket_quantile(0.5, split) == bucket_quantile(0.5, buckets)


def test_the_inf_bucket_gives_the_largest_finite_bound_and_none_without_observations():
    buckets = [(0.1, 50), (0.2, 60), (math.inf, 100)]
    assert bucket_quantile(0.9, buckets) == 0.2            # a lower bound, as Prometheus
    assert bucket_quantile(0.5, [(0.1, 0), (math.inf, 0)]) is None
    assert bucket_quantile(0.5, [(math.inf, 7)]) is None   # one bucket: no bound to give
    assert bucket_quantile(0.5, [(-1.0, 5), (math.inf, 10)]) == -1.0


@pytest.mark.parametrize("seed", range(5))
def test_the_quantile_lies_in_the_bucket_of_the_true_one(seed):
    rng = np.random.default_rng(seed)
    values = rng.lognormal(math.log(0.05), 1.0, 500)
    for level in (0.5, 0.9, 0.95, 0.99):
        q = bucket_quantile(level, cumulative(values))
        lo, hi = bucket_of(float(np.quantile(values, level, method="inverted_cdf")))
        assert lo <= q <= min(hi, BOUNDS[-1]), (level, q, lo, hi)


@pytest.mark.parametrize("buckets, field, words", [
    ([(0.1, 5), (0.2, 3), (math.inf, 9)], "buckets{le=0.2}", "not monotone"),
    ([(0.1, -1), (math.inf, 9)], "buckets{le=0.1}", "finite number >= 0"),
    ([(0.1, math.nan), (math.inf, 9)], "buckets{le=0.1}", "finite number >= 0"),
    ([(math.nan, 1), (math.inf, 9)], "buckets.le", "must be a number"),
    ([(0.1, 1), (0.2, 9)], "buckets", "no +Inf bucket"),
])
def test_a_broken_histogram_is_refused_naming_the_bucket(buckets, field, words):
    with pytest.raises(HistogramError) as err:
        bucket_quantile(0.5, buckets)
    assert err.value.field == field and words in err.value.reason


def test_float_residue_of_summed_rates_is_not_a_broken_histogram():
    assert bucket_quantile(0.5, [(0.1, 3.0), (0.2, 3.0 - 1e-12), (math.inf, 6.0)]) \
        == pytest.approx(0.1 + 0.1 * 0)   # 0.5 * 6 = 3 reached at le = 0.1


def test_quantile_names():
    assert [quantile_level(k, "q") for k in ("p50", "p99.9", "0.95", 0.25)] \
        == [0.5, pytest.approx(0.999), 0.95, 0.25]
    assert [level_name(q) for q in (0.5, 0.95, 0.999, 0.975)] \
        == ["p50", "p95", "p99.9", "p97.5"]
    for bad in ("p100", "p0", "1.5", "0", 1, -0.1, "NaN", "median", True):
        with pytest.raises(HistogramError):
            quantile_level(bad, "q")
    assert check_quantiles({"0.99": 0.5, "p50": 0.1}, "x") == {"p50": 0.1, "p99": 0.5}


def test_explicit_and_exponential_buckets_as_cumulative_ones():
    assert cumulative_from_counts([0.1, 0.2], [3, 4, 5], "h") == [(0.1, 3.0), (0.2, 7.0),
                                                             (math.inf, 12.0)]
    # scale 0: base 2, index i holds (2^i, 2^(i+1)]; offset -4: (1/16, 1/8], (1/8, 1/4], ...
    cum = exponential_cumulative(0, -4, [2, 3, 5], zero_count=1)
    assert cum == [(0.0, 1.0), (0.125, 3.0), (0.25, 6.0), (0.5, 11.0), (math.inf, 11.0)]
    with pytest.raises(HistogramError, match="negative observations"):
        exponential_cumulative(0, 0, [1], negative=2)
    with pytest.raises(HistogramError, match="scale"):
        exponential_cumulative(21, 0, [1])
    with pytest.raises(HistogramError) as err:
        cumulative_from_counts([0.2, 0.1], [1, 1, 1], "h")
    assert err.value.field == "h.explicitBounds[1]"


# -- the window record -------------------------------------------------------------------------
BASE = {"system": "s", "tier": "front", "end": T0, "window_s": 5, "utilization": 0.5,
        "cores": 1, "completions": {"buy": 30, "home": 70}}


def test_the_window_record_carries_measured_quantiles():
    w = parse_window(json.dumps({**BASE, "response_time_quantiles_s": {
        "buy": {"p95": 0.3, "0.5": 0.1}, "home": {"p99.9": 2.0}}}))
    assert w.response_time_quantiles_s == {"buy": {"p50": 0.1, "p95": 0.3},
                                           "home": {"p99.9": 2.0}}
    assert parse_window(json.dumps(w.to_record())) == w
    # a window without the field digests as it always did (saved states still tell replays)
    plain = parse_window(json.dumps({**BASE, "completions": {"a": 3}, "end": 100,
                                     "tier": "t"}))
    assert content_digest(plain) == 65796330170760926         # main's digest of this window
    assert content_digest(plain) != content_digest(w)


@pytest.mark.parametrize("value, field, words", [
    ({"buy": {"p100": 1.0}}, "response_time_quantiles_s.buy.p100", "pNN"),
    ({"buy": {"1.5": 1.0}}, "response_time_quantiles_s.buy.1.5", "within (0, 1)"),
    ({"buy": {"0": 1.0}}, "response_time_quantiles_s.buy.0", "within (0, 1)"),
    ({"buy": {"p95": -0.1}}, "response_time_quantiles_s.buy.p95", ">= 0"),
    ({"buy": {"p95": "NaN"}}, "response_time_quantiles_s.buy.p95", "finite"),
    ({"buy": {"p95": 1e999}}, "response_time_quantiles_s.buy.p95", "finite"),
    ({"buy": {"p50": 0.4, "p95": 0.3}}, "response_time_quantiles_s.buy.p95", "must not fall"),
    ({"buy": {"p95": 0.3, "0.95": 0.3}}, "response_time_quantiles_s.buy", "same quantile"),
    ({"buy": {}}, "response_time_quantiles_s.buy", "object of quantile"),
    ({"buy": 0.3}, "response_time_quantiles_s.buy", "object of quantile"),
    ([1], "response_time_quantiles_s", "object of class"),
])
def test_bad_quantiles_are_refused_naming_the_field(value, field, words):
    with pytest.raises(InvalidWindow) as err:
        parse_window(json.dumps({**BASE, "response_time_quantiles_s": value}))
    assert err.value.field.startswith(field) and words in err.value.reason, err.value


def test_the_interval_weighs_the_windows_quantiles_by_completions_and_survives_a_restore():
    iv = Interval()
    for n, q in ((10, 0.2), (30, 0.4)):
        iv.add_quantiles(parse_window({**BASE, "completions": {"buy": n},
                                       "response_time_quantiles_s": {"buy": {"p95": q}}}))
    assert iv.measured_quantiles() == {"buy": {"p95": pytest.approx(0.35)}}
    restored = Interval.from_dict(json.loads(json.dumps(iv.to_dict())))
    assert restored.measured_quantiles() == iv.measured_quantiles()
    old = iv.to_dict()
    del old["quantile_sums"]                    # a state saved before the field
    assert Interval.from_dict(old).measured_quantiles() == {}


# -- Prometheus: the window rules ----------------------------------------------------------------
def bucket_series(cls, values_at, bounds=BOUNDS):
    """A class's ``_bucket`` series from ``{time_ms: observations so far}``."""
    out = []
    for k, le in enumerate([*bounds, math.inf]):
        label = "+Inf" if le == math.inf else repr(le)
        out.append(Series({"handler": cls, "le": label},
                          {t: cumulative(v, bounds)[k][1] for t, v in values_at.items()}))
    return out


def test_prometheus_buckets_give_the_windows_quantiles():
    rng = np.random.default_rng(7)
    before, during = rng.exponential(0.05, 300), rng.exponential(0.2, 200)
    s, e = T0 * 1000, T0 * 1000 + 5000
    spec = TierSpec(name="front", completions="c", busy_seconds="b",
                    response_time_histogram="h_bucket", quantiles=(0.5, 0.95))
    data = TierData(completions=[Series({"handler": "buy"}, {s: 300.0, e: 500.0})],
                    busy_seconds=[Series({}, {s: 0.0, e: 2.0})],
                    response_time_histogram=bucket_series(
                        "buy", {s: before, e: np.concatenate([before, during])}))
    records, gaps = tier_windows(spec, data, "shop", [e], 5000)
    assert not gaps
    got = records[0]["response_time_quantiles_s"]["buy"]
    assert got == {"p50": bucket_quantile(0.5, cumulative(during)),
                   "p95": bucket_quantile(0.95, cumulative(during))}
    # the window's own requests, not the counters' totals
    assert got["p50"] != bucket_quantile(0.5, cumulative(np.concatenate([before, during])))
    assert parse_window(records[0]).response_time_quantiles_s["buy"] == got


def test_a_broken_or_changed_bucket_layout_costs_only_the_class_quantiles():
    s, e = T0 * 1000, T0 * 1000 + 5000
    spec = TierSpec(name="front", completions="c", busy_seconds="b",
                    response_time_histogram="h_bucket")
    falling = [Series({"handler": "buy", "le": "0.1"}, {s: 0.0, e: 9.0}),
               Series({"handler": "buy", "le": "0.2"}, {s: 0.0, e: 4.0}),
               Series({"handler": "buy", "le": "+Inf"}, {s: 0.0, e: 12.0}),
               Series({"handler": "home", "le": "0.1"}, {s: 0.0, e: 3.0}),
               Series({"handler": "home", "le": "+Inf"}, {s: 0.0, e: 4.0}),
               Series({"handler": "home", "le": "0.5"}, {e: 4.0})]       # born in the window
    data = TierData(completions=[Series({"handler": "buy"}, {s: 0.0, e: 12.0})],
                    busy_seconds=[Series({}, {s: 0.0, e: 2.0})],
                    response_time_histogram=falling)
    records, gaps = tier_windows(spec, data, "shop", [e], 5000)
    assert len(records) == 1 and "response_time_quantiles_s" not in records[0]
    assert records[0]["completions"] == {"buy": 12}
    assert all(g.made for g in gaps)
    reasons = {g.field: g.reason for g in gaps}
    assert "not monotone" in reasons["response_time_quantiles_s.buy.buckets{le=0.2}"]
    assert "layout changed" in reasons["response_time_quantiles_s.home.le"]


def test_the_prometheus_configuration_takes_the_histogram_and_its_quantiles():
    raw = {"prometheus": {"url": "http://127.0.0.1:9", "system": "shop"},
           "tiers": {"front": {"busy_seconds": "b", "completions": "c",
                               "response_time_histogram": "sum by (le, handler) (h_bucket)",
                               "quantiles": ["p99", "p95", 0.5]}}}
    tier = source_from_mapping(raw, {}).tiers[0]
    assert tier.quantiles == (0.5, 0.95, 0.99)
    assert tier.queries()["response_time_histogram"] == "sum by (le, handler) (h_bucket)"
    raw["tiers"]["front"]["quantiles"] = ["p100"]
    with pytest.raises(ConfigError, match=r"tiers.front.quantiles\[0\]"):
        source_from_mapping(raw, {})


# -- the Kafka formats ---------------------------------------------------------------------------
def otlp_request(t, counts, total, explicit=True, route="/buy", scale=3, offset=-40, extra=None):
    """One OTLP/JSON request: a busy counter, the latency histogram's point at ``t``."""
    if explicit:
        point = {"bucketCounts": [str(c) for c in counts], "explicitBounds": BOUNDS}
        kind = "histogram"
    else:
        point = {"scale": scale, "zeroCount": "0",
                 "positive": {"offset": offset, "bucketCounts": [str(c) for c in counts]}}
        kind = "exponentialHistogram"
    point.update({"attributes": [{"key": "http.route", "value": {"stringValue": route}}],
                  "timeUnixNano": str(t * 10 ** 9), "count": str(total),
                  "sum": 0.0, **(extra or {})})
    return {"resourceMetrics": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "front"}}]}, "scopeMetrics": [
        {"metrics": [
            {"name": "busy", "sum": {"aggregationTemporality": 2, "isMonotonic": True,
                                     "dataPoints": [{"timeUnixNano": str(t * 10 ** 9),
                                                     "asDouble": float(t - T0)}]}},
            {"name": "lat", kind: {"aggregationTemporality": 2, "dataPoints": [point]}}]}]}]}


OTLP_INPUT = {"format": "otlp-json", "window_s": 5, "system": "shop",
              "tier_label": "service.name", "class_label": "http.route",
              "busy_seconds": "busy", "completions": "lat_count",
              "response_time_histogram": "lat_bucket", "quantiles": ["p50", "p95", "p99"]}


def explicit_counts(values):
    """OTLP's per-bucket (not cumulative) counts of ``values`` on :data:`BOUNDS`."""
    cum = [c for _, c in cumulative(values)]
    return [int(c - p) for c, p in zip(cum, [0.0, *cum[:-1]])]


def exponential_counts(values, scale, offset, n):
    """OTLP exponential buckets: index ``ceil(log2(x) 2^scale) - 1`` from ``offset``."""
    idx = np.ceil(np.log2(values) * 2.0 ** scale).astype(int) - 1 - offset
    assert 0 <= idx.min() and idx.max() < n
    return np.bincount(idx, minlength=n)[:n].tolist()


@pytest.mark.parametrize("explicit", [True, False])
def test_otlp_histograms_round_trip(explicit):
    rng = np.random.default_rng(11)
    first, second = rng.lognormal(math.log(0.04), 0.8, 400), rng.lognormal(math.log(0.1), 0.8, 250)
    both = np.concatenate([first, second])

    def counts(v):
        return explicit_counts(v) if explicit else exponential_counts(v, 3, -100, 120)
    records = [otlp_request(T0, counts(first), len(first), explicit, offset=-100),
               otlp_request(T0 + 5, counts(both), len(both), explicit, offset=-100),
               otlp_request(T0 + 10, counts(both), len(both), explicit, offset=-100)]
    out = SampleWindows(input_from_mapping(OTLP_INPUT)).translate(records)
    assert not out.dead
    window = parse_window(out.windows[0])
    assert window.completions == {"/buy": 250}
    got = window.response_time_quantiles_s["/buy"]
    for name, level in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        truth = float(np.quantile(second, level, method="inverted_cdf"))
        if explicit:        # the buckets' own quantile, within the true one's bucket
            lo, hi = bucket_of(truth)
            assert lo <= got[name] <= hi, (name, got[name], truth)
        else:               # scale 3: buckets 2^(1/8) = 9% wide
            assert got[name] == pytest.approx(truth, rel=2 ** 0.125 - 1), (name, truth)


def test_otlp_broken_buckets_are_dead_letters_naming_the_field_and_count_is_kept():
    bad = otlp_request(T0 + 5, [1, 2, 3], 6, extra={"explicitBounds": [0.1, 0.05]})
    records = [otlp_request(T0, explicit_counts([0.01] * 4), 4), bad,
               otlp_request(T0 + 10, explicit_counts([0.01] * 9), 9)]
    out = SampleWindows(input_from_mapping(OTLP_INPUT)).translate(records)
    (_, _, err), = out.dead
    assert err.field == ("resourceMetrics[0].scopeMetrics[0].metrics[1].lat.dataPoints[0]"
                         ".explicitBounds[1]") and "must rise" in err.reason
    # the completions (the histogram's count) of the bad point still made its window, without
    # quantiles (its buckets are missing)
    assert [parse_window(w).completions for w in out.windows] == [{"/buy": 2}, {"/buy": 3}]
    assert "response_time_quantiles_s" not in out.windows[0]


def test_otlp_negative_observations_in_an_exponential_histogram_are_a_dead_letter():
    bad = otlp_request(T0, [1], 2, explicit=False,
                       extra={"negative": {"offset": 0, "bucketCounts": ["1"]}})
    out = SampleWindows(input_from_mapping(OTLP_INPUT)).translate([bad])
    (_, _, err), = out.dead
    assert err.field.endswith(".exponentialHistogram.negative.bucketCounts")
    assert "negative observations" in err.reason


TELEGRAF_INPUT = {"format": "telegraf", "window_s": 5, "system": "shop", "tier_label": "app",
                  "class_label": "handler", "busy_seconds": "procstat_cpu_time_user"}


def telegraf_v1(t, values, handler="/buy"):
    """Telegraf's ``prometheus`` input, ``metric_version = 1``: the buckets are fields."""
    fields = {("+Inf" if le == math.inf else str(le)): c for le, c in cumulative(values)}
    fields.update({"count": len(values), "sum": float(np.sum(values))})
    return {"metrics": [
        {"name": "procstat", "tags": {"app": "front"}, "fields": {"cpu_time_user": t - T0},
         "timestamp": t},
        {"name": "http_seconds", "tags": {"app": "front", "handler": handler},
         "fields": fields, "timestamp": t}]}


def telegraf_v2(t, values, handler="/buy"):
    """``metric_version = 2``: one metric per bucket with an ``le`` tag."""
    metrics = [{"name": "procstat", "tags": {"app": "front"},
                "fields": {"cpu_time_user": t - T0}, "timestamp": t},
               {"name": "prometheus", "tags": {"app": "front", "handler": handler},
                "fields": {"http_seconds_count": len(values)}, "timestamp": t}]
    for le, c in cumulative(values):
        metrics.append({"name": "prometheus",
                        "tags": {"app": "front", "handler": handler,
                                 "le": "+Inf" if le == math.inf else str(le)},
                        "fields": {"http_seconds_bucket": c}, "timestamp": t})
    return {"metrics": metrics}


@pytest.mark.parametrize("version", [1, 2])
def test_telegraf_histograms_round_trip(version):
    rng = np.random.default_rng(5)
    first, second = rng.exponential(0.03, 300), rng.exponential(0.12, 300)
    both = np.concatenate([first, second])
    make = telegraf_v1 if version == 1 else telegraf_v2
    prefix = "http_seconds" if version == 1 else "prometheus_http_seconds"
    fmt = input_from_mapping({**TELEGRAF_INPUT, "completions": f"{prefix}_count",
                              "response_time_histogram": f"{prefix}_bucket"})
    out = SampleWindows(fmt).translate([make(T0, first), make(T0 + 5, both),
                                        make(T0 + 10, both)])
    assert not out.dead
    window = parse_window(out.windows[0])
    assert window.completions == {"/buy": 300}
    assert window.response_time_quantiles_s["/buy"] == {
        level_name(q): bucket_quantile(q, cumulative(second)) for q in (0.5, 0.9, 0.95, 0.99)}


def test_a_negative_telegraf_bucket_is_a_dead_letter_naming_it():
    fmt = input_from_mapping({**TELEGRAF_INPUT, "completions": "http_seconds_count",
                              "response_time_histogram": "http_seconds_bucket"})
    broken = telegraf_v1(T0 + 5, [0.3] * 4)
    broken["metrics"][1]["fields"]["0.005"] = -2
    out = SampleWindows(fmt).translate([telegraf_v1(T0, []), broken])
    (window,) = out.windows
    assert window["completions"] == {"/buy": 4} and "response_time_quantiles_s" not in window
    (_, _, err), = out.dead
    assert err.field == "response_time_quantiles_s./buy.buckets{le=0.005}"
    assert "finite number >= 0" in err.reason


def test_a_non_monotone_telegraf_histogram_is_a_dead_letter_and_the_window_is_kept():
    fmt = input_from_mapping({**TELEGRAF_INPUT, "completions": "http_seconds_count",
                              "response_time_histogram": "http_seconds_bucket"})
    broken = telegraf_v1(T0 + 5, [0.01] * 5 + [0.3] * 5)
    broken["metrics"][1]["fields"]["0.5"] = 2            # below le=0.25's 5
    out = SampleWindows(fmt).translate([telegraf_v1(T0, []), broken,
                                        telegraf_v1(T0 + 10, [0.01] * 5 + [0.3] * 5)])
    assert [parse_window(w).completions for w in out.windows] == [{"/buy": 10}, {"/buy": 0}]
    assert "response_time_quantiles_s" not in out.windows[0]
    # both windows the broken sample ends or starts are made, without quantiles
    assert "response_time_quantiles_s" not in out.windows[1]
    assert [err.field for _, _, err in out.dead] == [
        "response_time_quantiles_s./buy.buckets{le=0.5}",
        "response_time_quantiles_s./buy.buckets{le=1.0}"]
    assert out.dead[0][2].reason.startswith("not monotone: below the count of le=0.25 (5)")


def test_input_quantiles_setting_is_checked():
    with pytest.raises(ConfigError, match=r"input.quantiles\[1\]"):
        input_from_mapping({**TELEGRAF_INPUT, "completions": "c",
                            "response_time_histogram": "h", "quantiles": ["p95", 2]})


# -- predicted against measured: model_error and the trust rule -----------------------------------
def _demo(measured_p95):
    """The demo shop at 20 users with a p95 SLO on every class, its entry tier's windows
    carrying a measured p95 per class (``measured_p95``: class -> seconds; ``None``: none)."""
    from dataclasses import replace

    from streams.cli.demo import DemoScenario, demo_config, demo_records
    from streams.core.config import Config
    from streams.engine.pipeline import Pipeline

    sc = DemoScenario(duration_s=150, steady_s=150, users_start=20, users_end=20)
    records = demo_records(sc)
    base = demo_config(sc)
    cfg = Config(systems={sc.system: replace(base.systems[sc.system],
                                             slo={"*": {"p95": sc.sla_s}})})
    pipeline = Pipeline(cfg)
    preds = []
    for r in records:
        if measured_p95 is not None and r["tier"] == "front":
            r = {**r, "response_time_quantiles_s": {
                c: {"p95": measured_p95(c)} for c in r["completions"]}}
        preds += pipeline.process(r).predictions
    return [p for p in preds if p.model is not None and p.classes]


@pytest.mark.slow
def test_the_slo_quantile_enters_model_error_and_the_trust_rule():
    plain = _demo(None)
    assert plain and all(p.get("quantile_error") is None for p in plain)
    last = plain[-1]
    predicted = {c: part.response_time_quantiles_s["p95"] for c, part in last.classes.items()}
    # measured p95s three times the model's: the worst class named, model_error follows
    far = _demo(lambda c: 3 * predicted[c])[-1]
    worst = far.quantile_error_class
    q_pred = far.classes[worst].response_time_quantiles_s["p95"]
    assert far.quantile_error_quantile == "p95" and far.quantile_measured_s == \
        pytest.approx(3 * predicted[worst])
    assert far.quantile_predicted_s == pytest.approx(q_pred)
    assert far.quantile_error == pytest.approx(abs(q_pred - far.quantile_measured_s)
                                               / far.quantile_measured_s)
    assert far.quantile_error > 0.5
    assert far.model_error == pytest.approx(max(last.model_error, far.quantile_error))
    assert far.model_trusted is False
    assert any(r.startswith(f"class {worst!r} p95 response time") and "off by" in r
               for r in far.trust_reasons), far.trust_reasons


def test_only_a_quantile_slo_s_own_level_is_compared():
    from streams.core.config import SLO_QUANTILES
    from streams.predict.measured_quantiles import quantile_errors
    from streams.predict.model import Measured, SystemModel

    slo = np.full((2, len(SLO_QUANTILES)), np.inf)
    slo[0, list(SLO_QUANTILES).index("p99")] = 1.0       # class a: p99; class b: the mean
    D = np.array([0.01, 0.02])
    model = SystemModel(tiers=["web", "db"], classes=["a", "b"], D_mc=np.c_[D, 2 * D],
                        mix=np.array([0.5, 0.5]), servers=np.array([1.0, 1.0]),
                        think_time=1.0, sla=np.array([np.inf, 0.5]), processes=None,
                        map_limit=600, slo=slo)
    now = model.at(30)
    q99 = float(model.quantiles(now)[0, model.quantile_levels.index(0.99)])
    m = Measured({"a": 10.0, "b": 10.0}, {}, 30, {}, 60.0,
                 {"a": {"p95": 5.0, "p99": 2 * q99}, "b": {"p99": 9.0}})
    (err,) = quantile_errors(model, m, now)
    assert (err.cls, err.name, err.measured) == ("a", "p99", 2 * q99)
    assert err.predicted == pytest.approx(q99) and err.error == pytest.approx(0.5)
    assert quantile_errors(model, Measured({}, {}, 30, {}, 60.0), now) == []
