"""The agent sample formats under hostile input (docs/formats.md, "What perfcast does with
malformed samples"): each case of ``tests/fuzz_corpus/samples.py`` mixed into the demo shop's
samples is dead-lettered once, naming its field and reason, and every window is still made with
the same estimates and predictions as without it; the far-ahead rule per tier and the sweep's
clock per system; counter staleness, resets and duplicates; bounded dead letters; ``window_s``'s
minimum; hypothesis for the parsers.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from dataclasses import replace

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from format_samples import MAPPING, encode
from fuzz_corpus.samples import MID_S, SAMPLE_CASES, SampleCase, deep, otlp_request
from pipeline_harness import ROOT, assert_close
from test_formats import mapping, shop  # noqa: F401 -- shop: a fixture
from streams.cli.demo import DemoScenario, demo_config, demo_records
from streams.core.config import Config, ConfigError, SystemConfig
from streams.core.records import InvalidWindow, format_time
from streams.engine.pipeline import VALUE_LIMIT, Pipeline
from streams.sources.sample_windows import CONFIRM_SAMPLES, SampleWindows
from streams.sources.samples import parse_record

T0 = 1_764_000_000          # 2025-11-24T16:00:00Z


_baselines: dict[str, object] = {}


def _run(fmt: str, lines: list[str]):
    config = replace(demo_config(), input=mapping(fmt))
    pipeline = Pipeline(config)
    out = pipeline.process_many(lines)
    out.extend(pipeline.finish())
    return out


def _baseline(shop, fmt: str):
    if fmt not in _baselines:
        _baselines[fmt] = _run(fmt, encode(shop, fmt))
    return _baselines[fmt]


def _mixed(shop, case: SampleCase) -> list[str]:
    lines = encode(shop, case.fmt)
    half = len(lines) // 2
    return lines[:half] + [case.record] + lines[half:]


# ----------------------------------------------------------------------------- the corpus
@pytest.mark.parametrize("case", SAMPLE_CASES, ids=[c.name for c in SAMPLE_CASES])
def test_each_hostile_sample_is_dead_lettered_and_costs_no_window(shop, case):
    """The hostile record dead-lettered once, naming its field and reason, bounded; every
    window of the shop estimated, estimates and predictions as without it."""
    want = _baseline(shop, case.fmt)
    got = _run(case.fmt, _mixed(shop, case))
    assert len(got.deadletter) == 1, [(d.field, d.reason) for d in got.deadletter]
    dead = got.deadletter[0]
    assert case.field in dead.field and case.reason in dead.reason, (dead.field, dead.reason)
    assert len(msgspec.json.encode(dead)) < 8 * 1024
    assert len(got.estimates) == len(shop) == len(want.estimates)
    assert_close(got.estimates, want.estimates, "estimates")
    assert_close(got.predictions, want.predictions, "predictions")


def test_the_worker_step_dead_letters_each_hostile_sample(shop):
    """The worker's batch step (the Kafka shell's core) on the shop's first half then every
    hostile record, in one batch: each dead-lettered, nothing raised."""
    from streams.kafka.core_process import Step

    for fmt in ("telegraf", "prometheus-kafka-adapter", "otlp-json"):
        cases = [c for c in SAMPLE_CASES if c.fmt == fmt]
        config = replace(demo_config(), input=mapping(fmt))
        lines = encode(shop, fmt)
        values = [line.encode() for line in lines[:len(lines) // 2]]
        values += [c.record.encode("utf-8", "surrogatepass") for c in cases]
        result = Step(config)(values, [0] * len(values), 1.0e9, True, None)
        dead = [json.loads(v) for _, v in result.records["deadletter"]]
        assert len(dead) == len(cases), fmt
        for case, d in zip(cases, dead):
            assert case.field in d["field"] and case.reason in d["reason"], (case.name, d)


def test_a_lone_surrogate_costs_only_its_metric():
    """The other metric of the batch is still read (the whole batch was dead-lettered)."""
    (case,) = [c for c in SAMPLE_CASES if "surrogate" in c.name]
    parsed = parse_record(case.record, "otlp-json")
    assert [s.name for s in parsed.samples] == ["unrelated_gauge"]
    (problem,) = parsed.problems
    assert problem.value == "app_users\\ud800"


def test_one_bad_data_point_costs_only_itself():
    request = otlp_request(metrics=[{"name": "app_cores", "gauge": {"dataPoints": [
        {"timeUnixNano": str(MID_S * 10 ** 9), "asInt": "2"},
        {"timeUnixNano": "x", "asInt": "2"},
        {"timeUnixNano": str((MID_S + 5) * 10 ** 9), "asInt": "9" * 30}]}}])
    parsed = parse_record(request, "otlp-json")
    assert [(s.t_ms, s.value) for s in parsed.samples] == [(MID_S * 1000, 2)]
    assert [p.field.rsplit(".", 1)[-1] for p in parsed.problems] == ["timeUnixNano", "asInt"]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["telegraf", "prometheus-kafka-adapter", "otlp-json"])
def test_perfcast_run_on_the_hostile_samples_of_each_format(shop, fmt, tmp_path):
    """``perfcast run`` on the shop's samples with every hostile record of ``fmt`` mixed in:
    exit 0, each dead-lettered with its field, the estimates of the run without them."""
    cases = [c for c in SAMPLE_CASES if c.fmt == fmt]
    lines = encode(shop, fmt)
    for i, case in enumerate(cases):
        lines.insert(len(lines) // 2 + i, case.record)
    source = tmp_path / "samples.jsonl"
    source.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n")
    config = tmp_path / "perfcast.toml"
    config.write_text(
        '[systems.shop]\ntiers = ["front", "db"]\nthink_time_s = 1.0\nsla_s = { "*" = 0.3 }\n'
        'solve_interval_s = 60\nsolve_offset_s = 0\nhorizon_s = 600\ntrend_window_s = 600\n'
        f'[input]\nformat = "{fmt}"\n' + MAPPING)
    proc = subprocess.run([sys.executable, "-m", "streams.cli.commands", "run", "--source",
                           str(source), "--config", str(config), "--out", str(tmp_path / "o")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr

    def read(name: str) -> list[dict]:
        return [json.loads(x) for x in (tmp_path / "o" / f"{name}.jsonl").read_text(
            "utf-8").splitlines()]
    dead = read("deadletter")
    assert len(dead) == len(cases)
    for case in cases:
        assert any(case.field in d["field"] and case.reason in d["reason"] for d in dead), \
            case.name
    assert len(read("estimates")) == len(shop)
    from streams.core.config import load_config
    want = Pipeline(load_config(config, env={})).process_many(encode(shop, fmt))
    assert_close(read("estimates"), [e.to_record() for e in want.estimates], "estimates")


# ----------------------------------------------------------------------------- far ahead
def _windows_of_systems(n_systems: int, n_windows: int) -> list[dict]:
    return [{"system": f"s{k:03d}", "tier": "front", "end": float(T0 + 5 * (i + 1)),
             "window_s": 5.0, "utilization": 0.2 + 0.01 * (k % 7), "cores": 1,
             "completions": {"/a": 10 + k % 5 + i % 3}, "response_time_s": {"/a": 0.01},
             "users": 5}
            for i in range(n_windows) for k in range(n_systems)]


def test_a_future_sample_of_one_system_costs_no_other_systems_window():
    """200 systems' OTLP stream, one future sample of an existing system and a new system's
    first sample a day ahead: every window of the 200 still made (the sweep's clock ignores
    the newest 1% of tiers; the existing tier's stray sample is far ahead)."""
    windows = _windows_of_systems(200, 12)
    lines = encode(windows, "otlp-json")
    fmt = mapping("otlp-json")
    want = SampleWindows(fmt, sweep_samples=500).translate(lines)
    assert len(want.windows) == len(windows) and not want.dead
    stray = [otlp_request(metrics=[{"name": "app_busy_seconds", "sum": {
        "aggregationTemporality": 2, "dataPoints": [
            {"timeUnixNano": str((T0 + 86_400) * 10 ** 9), "asDouble": 1e6}]}}],
        system=system) for system in ("s007", "stray-system")]
    half = len(lines) // 2
    got = SampleWindows(fmt, sweep_samples=500).translate(
        lines[:half] + stray + lines[half:])
    assert got.windows == want.windows
    assert [(err.field, "ahead of the newest sample" in err.reason) for _, _, err in got.dead] \
        == [("timestamp", True)]


def _line(t: float, tags: dict | None = None, **fields) -> str:
    return json.dumps({"name": "app", "tags": {"namespace": "s", "service": "web",
                                               **(tags or {})},
                       "fields": fields, "timestamp": t})


def _counting(**extra):
    return mapping("telegraf", cores=1, time_sum=None, users=None, busy_seconds="app_busy",
                   completions="app_served", class_label="uri", lookback_s=60, **extra)


def test_a_new_clock_is_confirmed_by_three_sample_times_in_a_row():
    """A tier back after a silence longer than lookback_s: its first samples are held
    (dead-lettered), the CONFIRM_SAMPLES-th time starts the tier afresh, and windows are made
    again from there; a stray behind the tier's clock is dead-lettered the same way."""
    samples = SampleWindows(_counting())
    lines = [_line(T0 + 5 * k, busy=k, served=10 * k, tags={"uri": "/a"}) for k in range(10)]
    assert len(samples.translate(lines).windows) == 9
    behind = samples.translate([_line(T0 - 3600, busy=0, served=0, tags={"uri": "/a"})])
    assert "behind the newest sample" in behind.dead[0][2].reason
    back = T0 + 3600
    later = samples.translate([_line(back + 5 * k, busy=k, served=10 * k, tags={"uri": "/a"})
                               for k in range(10)])
    assert len(later.dead) == 2 * (CONFIRM_SAMPLES - 1)      # two fields a sample time
    assert [w["end"] for w in later.windows] == [back + 5 * k for k in range(3, 10)]


# ----------------------------------------------------------------------------- counters
def _adapter(t_ms: int, name: str, value: str, **labels: str) -> str:
    return json.dumps({"timestamp": format_time(t_ms / 1000), "value": value, "name": name,
                       "labels": {"__name__": name, "namespace": "s", "service": "web",
                                  **labels}})


def _counter_stream(marker_at: int | None, resume_after_ms: int = 0,
                    base: int = 88_000) -> list[str]:
    """Samples every 5 s at 2.5 s past the window ends: a busy counter, a completions counter
    of class /a starting at ``base`` (+25 a sample); a staleness marker ``NaN`` of /a at
    ``marker_at`` ms, /a then silent for ``resume_after_ms``."""
    out = []
    for k in range(40):
        t = (T0 + 5 * k) * 1000 + 2500
        out.append(_adapter(t, "app_busy", repr(0.5 * k)))
        if marker_at is not None and out and marker_at < t <= marker_at + resume_after_ms:
            continue
        out.append(_adapter(t, "app_served", repr(float(base + 25 * k)), uri="/a"))
        if marker_at is not None and t < marker_at <= t + 5000:
            out.append(_adapter(marker_at, "app_served", "NaN", uri="/a"))
    return out


@pytest.mark.parametrize("resume_after_ms", [0, 100_000])
def test_a_staleness_marker_does_not_count_the_whole_counter_in_one_window(resume_after_ms):
    """A completions counter at 88,000 gets a staleness marker, then comes back -- at the next
    sample, or after the series was dropped (silent beyond lookback_s): the window it comes
    back in counts its increase since its value before the marker, never its whole value (the
    series is not newborn); no window has more completions than the counter grew."""
    fmt = _counting(format="prometheus-kafka-adapter")
    marker = (T0 + 50) * 1000 + 4000              # the latest sample at the end T0 + 55
    made = SampleWindows(fmt).translate(_counter_stream(marker, resume_after_ms))
    assert not made.dead
    counts = {w["end"]: w["completions"].get("/a") for w in made.windows}
    assert max(c for c in counts.values() if c is not None) < 88_000
    assert T0 + 55 not in counts         # its only class has no value at its end: a gap
    resumed = min(e for e, c in counts.items() if c is not None and e > T0 + 55)
    # the latest sample at or before the end is number (resumed - T0) / 5 - 1; the latest
    # before the marker number 10
    assert counts[resumed] == 25 * ((resumed - T0) // 5 - 1 - 10)
    plain = SampleWindows(fmt).translate(_counter_stream(None)).windows
    assert sum(c for c in counts.values() if c) <= sum(w["completions"]["/a"] for w in plain)


def test_a_counter_reset_is_flagged_on_the_estimate():
    values = [0, 10, 20, 30, 5, 15, 25, 35]
    lines = [_line(T0 + 5 * k, busy=0.5 * k, served=v, tags={"uri": "/a"})
             for k, v in enumerate(values)]
    fmt = _counting()
    out = Pipeline(Config(input=fmt)).process_many(lines)
    flags = [e.to_record().get("flags") for e in out.estimates]
    assert flags[3] == ["counter reset: completions"]
    assert [i for i, f in enumerate(flags) if f] == [3] and not out.deadletter


def test_a_duplicate_sample_is_dead_lettered_and_the_first_kept():
    """Same series, same timestamp, another value: dead-lettered, the first value kept (the
    windows as without it); the same value again: a replay, ignored."""
    lines = [_line(T0 + 5 * k, busy=0.5 * k, served=10 * k, tags={"uri": "/a"})
             for k in range(10)]
    want = SampleWindows(_counting()).translate(lines).windows
    hostile = lines[:5] + [_line(T0 + 20, served=9999, tags={"uri": "/a"}),
                           _line(T0 + 20, served=40, tags={"uri": "/a"})] + lines[5:]
    got = SampleWindows(_counting()).translate(hostile)
    assert got.windows == want
    (dead,) = got.dead
    assert dead[2].field == "value" and "duplicate" in dead[2].reason and \
        "40.0" in dead[2].reason


# ----------------------------------------------------------------------------- bounds
def test_dead_letters_are_bounded_and_say_what_was_cut():
    """A 5,000-digit ``asInt``: its dead letter's value cut to VALUE_LIMIT characters, marked
    in ``truncated``; the reason whole."""
    (case,) = [c for c in SAMPLE_CASES if c.name == "otlp asInt of 5000 digits"]
    (dead,) = Pipeline(Config(input=mapping("otlp-json"))).process(case.record).deadletter
    assert len(dead.value) <= VALUE_LIMIT
    assert dead.truncated and any(t.startswith("value: the first") for t in dead.truncated)
    assert dead.reason.endswith("...)") and "at most 20 ASCII digits" in dead.reason


def test_an_unknown_tier_dead_letter_quotes_a_few_configured_tiers():
    """A configuration of 5,000 tiers: the "unknown tier" dead letter is a few hundred bytes
    (it quoted every name: ~1 MB each at 10^5; 5,000 keep the test quick -- the system's
    state makes a tier state per configured tier)."""
    tiers = tuple(f"tier-{i:06d}" for i in range(5_000))
    config = Config(systems={"shop": SystemConfig(tiers=tiers)})
    window = {"system": "shop", "tier": "nope", "end": T0, "window_s": 5.0,
              "utilization": 0.5, "completions": {"/a": 3}}
    (dead,) = Pipeline(config).process(window).deadletter
    assert "unknown tier 'nope'" in dead.reason and "and 4992 more" in dead.reason
    assert len(msgspec.json.encode(dead)) < 2048


@pytest.mark.parametrize("window_s", [0.001, 0.05, 0.099])
def test_window_s_below_the_minimum_is_a_configuration_error(window_s):
    with pytest.raises(ConfigError, match=r"input\.window_s: must be at least 0\.1 s"):
        mapping("telegraf", window_s=window_s)
    assert mapping("telegraf", window_s=0.1).window_s == 0.1


# ----------------------------------------------------------------------------- hypothesis
_hostile_leaf = st.one_of(
    st.just(deep(2000)), st.just("9" * 5000), st.just("\u0661" * 19), st.just("\ud800"),
    st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True), st.none(), st.booleans(),
    st.text(max_size=8), st.just([]), st.just({}), st.just("NaN"), st.just("1e999"),
    st.just("2026-11-20T10:05:00Z"), st.just(10 ** 30))


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _replace(value, path, leaf):
    if not path:
        return leaf
    value = json.loads(json.dumps(value))
    node = value
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = leaf
    return value


_VALID = {fmt: [json.loads(m) for m in encode(demo_records(DemoScenario(duration_s=15)), fmt)[:3]]
          for fmt in ("telegraf", "prometheus-kafka-adapter", "otlp-json")}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(sorted(_VALID)), which=st.integers(0, 2), pick=st.integers(0, 10 ** 6),
       leaf=_hostile_leaf, as_json=st.booleans())
def test_any_part_of_a_record_replaced_by_a_hostile_value_is_dead_lettered_not_raised(
        fmt, which, pick, leaf, as_json):
    """A valid record of each format, one part (any depth) replaced by a hostile value: the
    parser gives samples and problems or ``InvalidWindow``, never another exception; through
    the pipeline every dead letter names a field and a reason and stays bounded."""
    record = _VALID[fmt][which]
    paths = list(_paths(record))
    path = paths[pick % len(paths)]
    if isinstance(leaf, str) and leaf.startswith("[[") and path == ():
        text = leaf
    else:
        mutated = _replace(record, path, leaf if not (isinstance(leaf, str) and
                                                      leaf.startswith("[[")) else [])
        text = json.dumps(mutated, allow_nan=True)
        if isinstance(leaf, str) and leaf.startswith("[["):
            text = text.replace("[]", leaf, 1)
    try:
        parse_record(text if as_json else text.encode("utf-8", "surrogatepass"), fmt)
    except InvalidWindow:
        pass
    out = Pipeline(Config(input=mapping(fmt))).process_many([text])
    for dead in out.deadletter:
        assert dead.field and dead.reason
        assert len(msgspec.json.encode(dead)) < 16 * 1024
    for estimate in out.estimates:
        assert math.isfinite(estimate.utilization)


def test_prometheus_stale_nan_bit_pattern_is_a_staleness_marker():
    """Prometheus' staleness marker is the NaN ``0x7ff0000000000002`` (a decoded record carries
    it as a float): the series has no value at the next end, and its counter comes back
    differenced from its value before it."""
    stale_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
    assert math.isnan(stale_nan)
    lines: list = []
    for k in range(12):
        t = T0 + 5 * k + 2.5
        lines.append(json.loads(_line(t, busy=0.5 * k, served=88_000 + 25 * k,
                                      tags={"uri": "/a"})))
        if k == 5:
            lines.append({"name": "app", "tags": {"namespace": "s", "service": "web",
                                                  "uri": "/a"},
                          "fields": {"served": stale_nan}, "timestamp": T0 + 29})
    made = SampleWindows(_counting()).translate(lines)
    assert not made.dead
    counts = [w["completions"]["/a"] for w in made.windows]
    assert max(counts) == 25 and T0 + 30 not in [w["end"] for w in made.windows]


def test_an_unforeseen_failure_is_a_dead_letter_not_the_runs_end(monkeypatch):
    """The last line of defence: a parser bug on some record is that record's dead letter
    (``could not be read``), the records after it still mapped."""
    import streams.sources.sample_windows as sw

    real = sw.parse_record

    def flaky(raw, *args):
        if b"boom" in (raw if isinstance(raw, bytes) else raw.encode()):
            raise KeyError("boom")
        return real(raw, *args)
    monkeypatch.setattr(sw, "parse_record", flaky)
    lines = [_line(T0 + 5 * k, busy=0.5 * k, served=10 * k, tags={"uri": "/a"})
             for k in range(6)]
    made = SampleWindows(_counting()).translate(lines[:3] + ['{"boom": 1}'] + lines[3:])
    (dead,) = made.dead
    assert dead[2].field == "record" and "could not be read (KeyError" in dead[2].reason
    assert len(made.windows) == 5
