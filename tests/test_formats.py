"""The Kafka formats (Telegraf JSON, prometheus-kafka-adapter, OTLP/JSON) and their mapping to
windows (``streams/sources/samples.py``, ``streams/core/input_config.py``, ``sample_windows.py``).

The truth is not the mapping: the simulated shop's windows are re-told as the counters and
gauges an agent would have sampled (``tests/format_samples.py``) and must come back as the
same windows and give the same estimates; the property tests compute each window from the
generated samples by a plain scan, not by the mapping's lookups. The worker against the real
broker is in ``tests/test_formats_services.py``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from format_samples import ENCODERS, MAPPING, MAPPING_DICT, encode, snapshots
from pipeline_harness import ROOT, assert_close
from streams.core.config import Config, ConfigError, load_config
from streams.cli.demo import DemoScenario, demo_config, demo_records
from streams.engine.pipeline import Pipeline
from streams.core.records import InvalidWindow, parse_end
from streams.core.input_config import input_from_mapping, parse_selector
from streams.sources.sample_windows import SampleWindows
from streams.sources.samples import parse_record

FORMATS = ("telegraf", "prometheus-kafka-adapter", "otlp-json")
T0 = 1_764_000_000          # 2025-11-24T16:00:00Z, on the 5-s grid


def mapping(fmt: str, **extra) -> "object":
    settings = {"format": fmt, **MAPPING_DICT, **extra}
    return input_from_mapping({k: v for k, v in settings.items() if v is not None})


@pytest.fixture(scope="module")
def shop() -> list[dict]:
    # few users: the MAP network the predictions solve stays small (quick on a loaded machine)
    return demo_records(DemoScenario(duration_s=600, steady_s=240, step_s=30, step_users=10,
                                     users_start=20, users_end=60))


# ----------------------------------------------------------------------------- round trip
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_shops_windows_come_back_from_each_format(shop, fmt):
    """Windows -> an agent's counters and gauges in ``fmt`` -> the mapping: the same windows
    (utilization and response times to 1e-9, counts, users and cores exactly), nothing
    dead-lettered, every window made."""
    messages = encode(shop, fmt)
    samples = SampleWindows(mapping(fmt))
    made = samples.translate(messages)
    assert not made.dead and not samples.gaps
    assert len(made.windows) == len(shop)
    for got, want in zip(made.windows, shop):
        assert (got["system"], got["tier"]) == (want["system"], want["tier"])
        assert got["end"] == parse_end(want["end"]) and got["window_s"] == want["window_s"]
        assert got["completions"] == want["completions"]
        assert (got["users"], got["cores"]) == (want["users"], want["cores"])
        assert math.isclose(got["utilization"], want["utilization"], rel_tol=1e-9)
        for c, rt in want["response_time_s"].items():
            assert math.isclose(got["response_time_s"][c], rt, rel_tol=1e-9)


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_gives_the_estimates_and_predictions_of_the_windows(shop, fmt):
    """The pipeline over the samples equals the pipeline over the windows (1e-9)."""
    config = demo_config()
    want = Pipeline(config).process_many(shop)
    got = Pipeline(replace(config, input=mapping(fmt))).process_many(encode(shop, fmt))
    assert want.predictions and not got.deadletter
    for name in ("estimates", "predictions", "alerts"):
        assert_close(getattr(got, name), getattr(want, name), name)


def test_telegraf_one_metric_per_message_equals_the_batch_form(shop):
    per_metric = [m for s in snapshots(shop[:40]) for m in ENCODERS["telegraf"](s, batch=False)]
    one = SampleWindows(mapping("telegraf")).translate(per_metric).windows
    batch = SampleWindows(mapping("telegraf")).translate(encode(shop[:40], "telegraf")).windows
    assert one == batch and len(one) == 40


# ----------------------------------------------------------------------------- properties
def _scan_value(samples: list[tuple[int, float]], t: int) -> float | None:
    """The latest sample at or before ``t`` (plain scan)."""
    value = None
    for ts, v in samples:
        if ts <= t:
            value = v
    return value


def _expected_increase(samples: list[tuple[int, float]], start: int, end: int) -> float:
    a, b = _scan_value(samples, start), _scan_value(samples, end)
    return b - a if b >= a else b          # a reset: the counter restarted from 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(period_ms=st.sampled_from([1000, 2000, 2500, 5000]),
       jitter=st.lists(st.integers(0, 900), min_size=60, max_size=60),
       busy=st.lists(st.floats(0.0, 1.9), min_size=60, max_size=60),
       served=st.lists(st.integers(0, 50), min_size=60, max_size=60),
       reset_at=st.one_of(st.none(), st.integers(5, 50)),
       cut=st.lists(st.integers(1, 120), max_size=5))
def test_windows_follow_the_counters_whatever_the_jitter_resets_and_batches(
        period_ms, jitter, busy, served, reset_at, cut):
    """Telegraf samples every ``period`` with up to 0.9 s of jitter, a counter reset (a
    process restart) somewhere, fed in arbitrary batches: every window between the first
    sample and the last is made, with the increases of the latest samples at or before its
    ends -- the same whatever the batch boundaries."""
    fmt = mapping("telegraf", cores=2, time_sum=None, users=None)
    lines, busy_pts, count_pts = [], [], []
    b, n = 0.0, 0
    for k in range(60):
        t = T0 * 1000 + k * period_ms + jitter[k]
        if reset_at is not None and k == reset_at:
            b, n = 0.0, 0
        b += busy[k] * period_ms / 1000
        n += served[k]
        busy_pts.append((t, b))
        count_pts.append((t, float(n)))
        lines.append(json.dumps({"metrics": [
            {"name": "app", "tags": {"namespace": "s", "service": "web"},
             "fields": {"busy_seconds": b, "cores": 2}, "timestamp": t / 1000},
            {"name": "http_time", "tags": {"namespace": "s", "service": "web", "uri": "/a"},
             "fields": {"count": n}, "timestamp": t / 1000}]}))
    windows = []
    samples = SampleWindows(fmt)
    bounds = sorted({0, len(lines), *(c for c in cut if c < len(lines))})
    for lo, hi in zip(bounds, bounds[1:]):
        made = samples.translate(lines[lo:hi])
        assert not made.dead
        windows += made.windows
    assert windows == SampleWindows(fmt).translate(lines).windows
    first, last = busy_pts[0][0], busy_pts[-1][0]
    ends = [e for e in range(T0 * 1000, last + 1, 5000) if e - 5000 >= first]
    assert [round(w["end"] * 1000) for w in windows] == ends
    for w, end in zip(windows, ends):
        start = end - 5000
        assert math.isclose(w["utilization"] * 5 * 2, _expected_increase(busy_pts, start, end),
                            rel_tol=1e-9, abs_tol=1e-9)
        assert w["completions"] == {"/a": _expected_increase(count_pts, start, end)}


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=9))
def test_a_utilization_gauge_is_averaged_over_the_window(values):
    """A busy-fraction gauge sampled several times within a window: the window's utilization
    is their mean."""
    fmt = input_from_mapping({"format": "prometheus-kafka-adapter", "window_s": 10,
                              "system": "s", "tier_label": "job",
                              "utilization": "busy_ratio", "completions": "served_total"})

    def sample(name, t_ms, v):
        return json.dumps({"timestamp": _iso(t_ms), "value": repr(float(v)), "name": name,
                           "labels": {"__name__": name, "job": "db"}})
    base = T0 * 1000
    lines = [sample("busy_ratio", base, 0.5), sample("served_total", base, 0)]
    for i, v in enumerate(values):
        t = base + 10_000 * (i + 1) // (len(values) + 1)
        lines.append(sample("busy_ratio", t, v))
    lines += [sample("busy_ratio", base + 10_000, values[-1]),
              sample("served_total", base + 10_000, 7)]
    made = SampleWindows(fmt).translate(lines)
    assert not made.dead and len(made.windows) == 1
    want = math.fsum(values + [values[-1]]) / (len(values) + 1)
    assert math.isclose(made.windows[0]["utilization"], want, rel_tol=1e-12, abs_tol=1e-15)
    assert made.windows[0]["completions"] == {"other": 7}


def _iso(t_ms: int) -> str:
    from streams.core.records import format_time
    return format_time(t_ms / 1000)


# ----------------------------------------------------------------------------- parsers
def test_telegraf_timestamps_in_each_unit_and_as_text():
    for unit, stamp in (("s", T0), ("ms", T0 * 1000), ("us", T0 * 10 ** 6),
                        ("ns", T0 * 10 ** 9), ("s", _iso(T0 * 1000))):
        parsed = parse_record(json.dumps({"name": "cpu", "tags": {"host": "a"},
                                          "fields": {"busy": 1.5}, "timestamp": stamp}),
                              "telegraf", unit)
        [s] = parsed.samples
        assert (s.name, dict(s.labels), s.t_ms, s.value) == ("cpu_busy", {"host": "a"},
                                                            T0 * 1000, 1.5)
    with pytest.raises(InvalidWindow, match="out of range as s since the epoch"):
        parse_record(json.dumps({"name": "cpu", "fields": {"x": 1}, "timestamp": T0 * 1000}),
                     "telegraf", "s")


def test_a_bad_metric_in_a_telegraf_batch_costs_only_itself():
    parsed = parse_record(json.dumps({"metrics": [
        {"name": "cpu", "fields": {"busy": 1}, "timestamp": T0},
        {"name": "cpu", "fields": {"busy": 2}},
        {"name": "mem", "tags": {}, "fields": {"used": 3}, "timestamp": T0}]}), "telegraf")
    assert [s.name for s in parsed.samples] == ["cpu_busy", "mem_used"]
    [problem] = parsed.problems
    assert problem.field == "metrics[1]" and "not a Telegraf JSON metric" in str(problem)


def test_prometheus_kafka_adapter_both_shapes_and_the_staleness_marker():
    [s] = parse_record(json.dumps({"timestamp": "2025-11-24T16:00:05Z", "value": "42",
                                   "name": "up", "labels": {"__name__": "up", "job": "x"}}),
                       "prometheus-kafka-adapter").samples
    assert (s.name, s.labels["job"], s.t_ms, s.value) == ("up", "x", (T0 + 5) * 1000, "42")
    [old] = parse_record(json.dumps({"__timestamp__": T0 * 1000 + 250, "__value__": 7,
                                     "__name__": "up", "job": "x"}),
                         "prometheus-kafka-adapter").samples
    assert (old.name, old.t_ms, old.value, old.labels["job"]) == ("up", T0 * 1000 + 250, 7,
                                                                  "x")
    [stale] = parse_record(json.dumps({"timestamp": "2025-11-24T16:00:05Z", "value": "NaN",
                                       "name": "up", "labels": {}}),
                           "prometheus-kafka-adapter").samples
    assert stale.value is None


def test_otlp_gauge_sum_histogram_attributes_and_flags():
    attrs = [{"key": "service.name", "value": {"stringValue": "cart"}},
             {"key": "pod", "value": {"intValue": "3"}}]
    t = str((T0 + 5) * 10 ** 9)
    request = {"resourceMetrics": [{"resource": {"attributes": attrs}, "scopeMetrics": [
        {"metrics": [
            {"name": "cpu", "gauge": {"dataPoints": [
                {"timeUnixNano": t, "asDouble": 0.25,
                 "attributes": [{"key": "pod", "value": {"stringValue": "7"}}]}]}},
            {"name": "reqs", "sum": {"aggregationTemporality": "AGGREGATION_TEMPORALITY_DELTA",
                                     "dataPoints": [{"timeUnixNano": int(t), "asInt": "12"}]}},
            {"name": "lat", "histogram": {"aggregationTemporality": 2, "dataPoints": [
                {"timeUnixNano": t, "count": "4", "sum": 0.5},
                {"timeUnixNano": t, "flags": 1}]}},
            {"name": "sizes", "summary": {"dataPoints": []}}]}]}]}
    parsed = parse_record(json.dumps(request), "otlp-json")
    got = [(s.name, dict(s.labels), s.t_ms, s.value, s.delta) for s in parsed.samples]
    labels = {"service.name": "cart", "pod": "3"}
    assert got == [
        ("cpu", {"service.name": "cart", "pod": "7"}, (T0 + 5) * 1000, 0.25, False),
        ("reqs", labels, (T0 + 5) * 1000, 12, True),
        ("lat_count", labels, (T0 + 5) * 1000, 4, False),
        ("lat_sum", labels, (T0 + 5) * 1000, 0.5, False),
        ("lat_count", labels, (T0 + 5) * 1000, None, False),
        ("lat_sum", labels, (T0 + 5) * 1000, None, False)]
    [problem] = parsed.problems
    assert "summary" in str(problem.value) and "summary is not" in problem.reason


def test_an_otlp_delta_sum_is_summed_into_a_counter():
    fmt = input_from_mapping({"format": "otlp-json", "window_s": 5, "system": "s",
                              "tier_label": "service.name", "utilization": "busy",
                              "completions": "reqs"})

    def request(t_s, served):
        t = str(t_s * 10 ** 9)
        return json.dumps({"resourceMetrics": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "cart"}}]}, "scopeMetrics": [
            {"metrics": [{"name": "busy", "gauge": {"dataPoints": [
                {"timeUnixNano": t, "asDouble": 0.5}]}},
                {"name": "reqs", "sum": {"aggregationTemporality": 1, "dataPoints": [
                    {"timeUnixNano": t, "asInt": str(served),
                     "attributes": [{"key": "handler", "value": {"stringValue": "/x"}}]}]}}]}]}]})
    made = SampleWindows(fmt).translate([request(T0 + k, 3 + k) for k in range(11)])
    assert not made.dead
    # windows (T0, T0+5] and (T0+5, T0+10]: the deltas of the points inside each
    assert [w["completions"] for w in made.windows] == [{"/x": 4 + 5 + 6 + 7 + 8},
                                                        {"/x": 9 + 10 + 11 + 12 + 13}]


# ----------------------------------------------------------------------------- dead letters
def _telegraf_line(t, tags=None, **fields):
    return json.dumps({"name": "app", "tags": {"namespace": "s", "service": "web",
                                               **(tags or {})},
                       "fields": fields, "timestamp": t})


def test_what_cannot_be_mapped_is_dead_lettered_with_its_reason():
    """Malformed JSON, a record of another shape, a missing tier label, a value that is not a
    number, an unwanted metric under strict, a sample out of order: each a dead letter naming
    the field and why; the good samples around them still make their window."""
    config = Config(input=mapping("telegraf", strict=True, cores=1, time_sum=None,
                                  users=None, busy_seconds="app_busy",
                                  completions="app_served"))
    pipeline = Pipeline(config)
    records = [
        _telegraf_line(T0, busy=0.0, served=0),
        b"{not json",
        json.dumps({"system": "s", "tier": "web", "end": T0, "window_s": 5}),
        json.dumps({"name": "app", "tags": {"namespace": "s"}, "fields": {"busy": 1},
                    "timestamp": T0 + 1}),
        _telegraf_line(T0 + 2, busy="lots"),
        _telegraf_line(T0 + 2, temperature=40),
        _telegraf_line(T0 + 5, busy=2.5, served=10),
        _telegraf_line(T0 + 3, served=4),
    ]
    out = pipeline.process_many(records)
    dead = [(d["field"], d["reason"]) for d in out.deadletter]
    assert len(dead) == 6, dead
    assert dead[0][0] == "record" and "malformed JSON" in dead[0][1]
    assert dead[1][0] == "record" and "not a Telegraf JSON metric" in dead[1][1]
    assert dead[2][0] == "labels.service" and "no tier label 'service'" in dead[2][1]
    assert dead[3][0] == "app_busy.value" and "not a number" in dead[3][1]
    assert dead[4][0] == "metric" and "strict = true" in dead[4][1] \
        and "app_temperature" in dead[4][1]
    assert dead[5][0] == "timestamp" and "older than the series' latest sample" in dead[5][1]
    assert [(e["tier"], e["utilization"]) for e in out.estimates] == [("web", 0.5)]
    assert all(d["raw"] for d in out.deadletter)


def test_without_strict_an_unwanted_metric_is_ignored():
    samples = SampleWindows(mapping("telegraf"))
    made = samples.translate([json.dumps({"name": "disk", "tags": {}, "fields": {"free": 1},
                                          "timestamp": T0})])
    assert not made.dead and not made.windows and samples.ignored == 1


def test_utilization_within_the_tolerance_is_clamped_and_flagged_beyond_it_dead_lettered():
    config = Config(input=mapping("telegraf", cores=1, time_sum=None, users=None,
                                  busy_seconds="app_busy", completions="app_served"))
    pipeline = Pipeline(config)
    out = pipeline.process_many([_telegraf_line(T0, busy=0.0, served=0),
                                 _telegraf_line(T0 + 5, busy=5.05, served=5),
                                 _telegraf_line(T0 + 10, busy=10.5, served=9)])
    [estimate] = out.estimates
    assert estimate["utilization"] == 1.0 and "clamped to 1" in estimate["flags"][0]
    [dead] = out.deadletter
    assert dead["field"] == "utilization" and "tolerance 0.02" in dead["reason"]


def test_a_stopped_series_holds_its_tier_back_only_until_lag_s():
    """A class series that stops: the tier's windows are made once another series is lag_s
    past their end (the stopped one keeps its last value for lookback_s: increase 0); a busy
    series silent beyond lookback_s: no window (gaps, counted), never a guess."""
    samples = SampleWindows(mapping("telegraf", cores=1, time_sum=None, users=None,
                                    busy_seconds="app_busy", completions="app_served",
                                    class_label="uri", lag_s=5, lookback_s=60))
    lines = [_telegraf_line(T0, busy=0.0, served=0, tags={"uri": "/a"}),
             _telegraf_line(T0, served=0, tags={"uri": "/b"})]
    lines += [_telegraf_line(T0 + k, busy=0.5 * k, served=k, tags={"uri": "/a"})
              for k in range(1, 16)]
    made = samples.translate(lines)
    assert [w["end"] for w in made.windows] == [T0 + 5, T0 + 10]
    assert [w["completions"] for w in made.windows] == [{"/a": 5, "/b": 0}] * 2
    assert [w["utilization"] for w in made.windows] == [0.5, 0.5]
    assert not samples.gaps
    # back after a silence beyond lookback_s: a new clock, confirmed by the third sample time
    # in a row (the first two dead-lettered); no window across the silence is guessed
    later = samples.translate([_telegraf_line(T0 + 200 + k, served=30 + k, tags={"uri": "/a"})
                               for k in range(3)])
    assert later.windows == [] and len(later.dead) == 2
    assert all("unconfirmed" in err.reason for _, _, err in later.dead)


# ----------------------------------------------------------------------------- configuration
def test_selectors_and_configuration_errors(tmp_path):
    sel = parse_selector('node_cpu_seconds_total{mode!="idle", cpu="0"}', "x")
    assert sel.name == "node_cpu_seconds_total" and sel.equal == (("cpu", "0"),)
    assert sel.matches({"mode": "user", "cpu": "0"}) and not sel.matches({"mode": "idle",
                                                                          "cpu": "0"})
    for bad, message in [
        ({"format": "influx"}, "input.format: must be one of"),
        ({"format": "telegraf", "tier_label": "t", "completions": "c", "busy_seconds": "b"},
         "exactly one of system"),
        ({"format": "telegraf", "system": "s", "completions": "c", "busy_seconds": "b"},
         "tier_label"),
        ({"format": "telegraf", "system": "s", "tier_label": "t", "completions": "c"},
         "exactly one of busy_seconds"),
        ({"format": "telegraf", "system": "s", "tier_label": "t", "completions": "c{x~\"1\"}",
          "busy_seconds": "b"}, "input.completions: cannot read the label matchers"),
        ({"format": "telegraf", "timestamp_unit": "1s", **MAPPING_DICT},
         "input.timestamp_unit"),
        ({"format": "contract", "window_s": 5}, "only with a metric format")]:
        with pytest.raises(ConfigError, match=message):
            input_from_mapping(bad)
    path = tmp_path / "perfcast.toml"
    path.write_text('[input]\nformat = "otlp-json"\n' + MAPPING)
    assert load_config(path, env={}).input.format == "otlp-json"
    path.write_text('[input]\nformat = "contract"\n')
    assert load_config(path, env={}).input is None


# ----------------------------------------------------------------------------- perfcast run
@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_perfcast_run_on_a_file_of_each_format(shop, fmt, tmp_path):
    """``perfcast run --source FILE`` with ``[input] format``: the estimates and predictions of
    the same windows as a contract file (1e-9)."""
    lines = tmp_path / "samples.jsonl"
    lines.write_text("\n".join(encode(shop, fmt)) + "\n")
    windows = tmp_path / "windows.jsonl"
    windows.write_text("\n".join(json.dumps(w) for w in shop) + "\n")
    system = (
        '[systems.shop]\ntiers = ["front", "db"]\nthink_time_s = 1.0\nsla_s = { "*" = 0.3 }\n'
        'solve_interval_s = 60\nsolve_offset_s = 0\nhorizon_s = 600\ntrend_window_s = 600\n')
    plain = tmp_path / "plain.toml"
    plain.write_text(system)
    with_input = tmp_path / "formats.toml"
    with_input.write_text(system + f'[input]\nformat = "{fmt}"\n' + MAPPING)
    outputs = {}
    for name, source, config in (("samples", lines, with_input), ("windows", windows, plain)):
        proc = subprocess.run([sys.executable, "-m", "streams.cli.commands", "run", "--source",
                               str(source), "--config", str(config), "--out",
                               str(tmp_path / name)], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, env={"PYTHONPATH": str(ROOT),
                                                           "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        if name == "samples":
            assert f"{fmt} samples mapped into {len(shop)} windows" in " ".join(
                proc.stdout.split())
        outputs[name] = {n: [json.loads(x) for x in
                             (tmp_path / name / f"{n}.jsonl").read_text().splitlines()]
                         for n in ("estimates", "predictions", "deadletter")}
    assert len(outputs["samples"]["estimates"]) == len(shop)
    assert outputs["samples"]["predictions"] and not outputs["samples"]["deadletter"]
    assert_close(outputs["samples"], outputs["windows"])


def test_a_list_of_selectors_sums_their_series():
    """``busy_seconds = ["procstat_cpu_time_user", "procstat_cpu_time_system"]``: Telegraf's
    procstat user and system CPU seconds together are the busy time."""
    fmt = input_from_mapping({"format": "telegraf", "system": "s", "tier_label": "process_name",
                              "busy_seconds": ["procstat_cpu_time_user",
                                               "procstat_cpu_time_system"],
                              "cores": 2, "completions": "nginx_requests"})

    def line(t, user, system, requests):
        return json.dumps({"metrics": [
            {"name": "procstat", "tags": {"process_name": "nginx"}, "timestamp": t,
             "fields": {"cpu_time_user": user, "cpu_time_system": system, "pid": 7}},
            {"name": "nginx", "tags": {"process_name": "nginx"}, "timestamp": t,
             "fields": {"requests": requests}}]})
    made = SampleWindows(fmt).translate([line(T0, 10.0, 4.0, 100), line(T0 + 5, 13.0, 5.0, 180)])
    assert [(w["utilization"], w["completions"]) for w in made.windows] == [(0.4, {"other": 80})]


def test_several_utilization_series_of_a_tier_are_averaged():
    """Two instances' busy-fraction gauges: the tier's utilization is their mean (the window
    rules take one series; a worker must never fail on the data)."""
    fmt = input_from_mapping({"format": "prometheus-kafka-adapter", "window_s": 5,
                              "system": "s", "tier_label": "job", "utilization": "busy",
                              "completions": "served_total"})

    def sample(name, t_s, v, instance):
        return json.dumps({"timestamp": _iso(t_s * 1000), "value": str(v), "name": name,
                           "labels": {"__name__": name, "job": "db", "instance": instance}})
    lines = [sample(n, t, v, i) for t in (T0, T0 + 5) for i, busy in (("a", 0.2), ("b", 0.6))
             for n, v in (("busy", busy), ("served_total", t - T0))]
    made = SampleWindows(fmt).translate(lines)
    assert [(w["utilization"], w["completions"]) for w in made.windows] == [
        (pytest.approx(0.4), {"other": 10})]


def _doc_examples() -> dict[str, tuple[str, list[str], dict]]:
    """docs/formats.md's worked examples: per format its ``[input]`` TOML, its messages and
    the window they give (the code blocks after ``<!-- example FORMAT -->``)."""
    import re

    text = (ROOT / "docs" / "formats.md").read_text()
    out = {}
    for m in re.finditer(r"<!-- example (\S+) -->", text):
        blocks = re.findall(r"```(toml|json)\n(.*?)```", text[m.end():], re.S)[:3]
        (_, toml), (_, messages), (_, window) = blocks
        out[m.group(1)] = (toml, messages.strip().splitlines(), json.loads(window))
    return out


def test_the_worked_examples_in_docs_formats_md():
    import tomllib

    examples = _doc_examples()
    assert sorted(examples) == sorted(FORMATS)
    for fmt, (toml, messages, window) in examples.items():
        config = tomllib.loads(toml)["input"]
        assert config["format"] == fmt
        made = SampleWindows(input_from_mapping(config)).translate(messages)
        assert not made.dead, (fmt, made.dead)
        assert len(made.windows) == 1, fmt
        assert_close(made.windows[0], window, fmt)


def test_a_record_of_samples_is_keyed_by_its_system():
    """``perfcast produce`` of a file of samples keys each record by its system, so one
    system's samples keep their order on one partition."""
    from streams.sources.sample_windows import sample_key

    line = encode([{"system": "shop-1", "tier": "db", "end": T0, "window_s": 5.0,
                    "utilization": 0.5, "completions": {"/a": 1}}], "otlp-json")[0].encode()
    assert sample_key(mapping("otlp-json"), line) == b"shop-1"
    assert sample_key(mapping("otlp-json", system="fixed", system_label=None), line) \
        == b"fixed"
    assert sample_key(mapping("otlp-json"), b"{not json") is None


def test_tiers_gone_silent_are_dropped():
    """A tier label that never comes back (a pod replaced by another): its samples are
    dropped once the stream is lookback_s past them, so the state stays bounded."""
    samples = SampleWindows(mapping("telegraf", cores=1, time_sum=None, users=None,
                                    busy_seconds="app_busy", completions="app_served",
                                    lookback_s=10), sweep_samples=50)
    lines = [_telegraf_line(T0 + k, busy=0.1 * k, served=k, tags={"service": f"pod-{k // 20}"})
             for k in range(200)]
    samples.translate(lines)
    assert len(samples.tiers) <= 2 and ("s", "pod-9") in samples.tiers


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70)
    | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.sampled_from(["NaN", "1e400", "1764000000", "2025-11-24T16:00:00Z", "/a", "12"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "tags", "fields", "timestamp", "metrics", "value", "labels",
                         "__name__", "__value__", "__timestamp__", "resourceMetrics",
                         "resource", "attributes", "scopeMetrics", "metrics", "gauge", "sum",
                         "histogram", "dataPoints", "timeUnixNano", "asInt", "asDouble",
                         "count", "key", "stringValue", "flags", "aggregationTemporality",
                         "namespace", "service", "uri", "x"]), inner, max_size=5),
    max_leaves=25)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(FORMATS), records=st.lists(_json, min_size=1, max_size=6),
       strict=st.booleans())
def test_no_record_of_any_shape_makes_the_mapping_raise(fmt, records, strict):
    """Arbitrary JSON in the formats' vocabulary: every record becomes samples, windows or
    dead letters with a reason; nothing raises (the worker must not die on its input)."""
    pipeline = Pipeline(Config(input=mapping(fmt, strict=strict)))
    raws = [json.dumps(r) for r in records]
    out = pipeline.process_many(raws)
    for d in out.deadletter:
        assert d["reason"] and d["field"]
    json.dumps([[r.to_record() for r in out.estimates],
                [d.to_record() for d in out.deadletter]])


def test_users_sampled_within_a_window_are_averaged_to_a_whole_number():
    """Users 11, 13, 10 sampled within a window: 11.33 on average, 11 in the window (the
    contract's users are a whole number; a fractional mean must not cost the window)."""
    samples = SampleWindows(mapping("telegraf", cores=1, time_sum=None, busy_seconds="app_busy",
                                    completions="app_served", users="app_users"))
    lines = [_telegraf_line(T0, busy=0.0, served=0, users=10),
             _telegraf_line(T0 + 2, users=11), _telegraf_line(T0 + 4, users=13),
             _telegraf_line(T0 + 5, busy=1.0, served=3, users=10)]
    made = Pipeline(Config(input=samples.fmt)).process_many(lines)
    assert not made.deadletter
    assert SampleWindows(samples.fmt).translate(lines).windows[0]["users"] == 11


def test_a_percentage_gauge_with_utilization_scale():
    """Telegraf's ``cpu`` plugin: ``usage_active`` in percent of all cores, per ``cpu`` tag;
    ``cpu_usage_active{cpu="cpu-total"}`` with ``utilization_scale = 0.01``."""
    fmt = input_from_mapping({"format": "telegraf", "system": "s", "tier_label": "host",
                              "utilization": 'cpu_usage_active{cpu="cpu-total"}',
                              "utilization_scale": 0.01, "cores": 4,
                              "completions": "nginx_requests"})

    def line(t, total, one, requests):
        return json.dumps({"metrics": [
            {"name": "cpu", "tags": {"host": "web", "cpu": "cpu-total"}, "timestamp": t,
             "fields": {"usage_active": total, "usage_idle": 100 - total}},
            {"name": "cpu", "tags": {"host": "web", "cpu": "cpu0"}, "timestamp": t,
             "fields": {"usage_active": one}},
            {"name": "nginx", "tags": {"host": "web"}, "timestamp": t,
             "fields": {"requests": requests}}]})
    made = SampleWindows(fmt).translate([line(T0, 20.0, 90.0, 0), line(T0 + 5, 62.5, 99.0, 40)])
    assert [(w["utilization"], w["completions"]) for w in made.windows] == [(0.625,
                                                                            {"other": 40})]
