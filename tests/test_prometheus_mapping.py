"""The Prometheus source's mapping from query results to windows (pure; property tests).

The scrapes of a target are simulated -- counter increments per scrape, restarts (counter
resets), NaN samples, a target that goes down (Prometheus' staleness marker), scrape offsets and
jitter -- and evaluated on the window grid the way Prometheus' ``query_range`` does (each point:
the latest sample at or before it, within the 5-minute lookback, none after a staleness
marker), then rendered as the API's JSON and mapped. The windows must then hold exactly what
happened between the samples at their ends (docs/pipeline.md, "The Prometheus source").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.core.config import Config, ConfigError
from streams.engine.pipeline import Pipeline
from streams.core.records import InvalidWindow, parse_window
from streams.sources.prometheus import (
    TierData,
    load_source,
    parse_result,
    promql_duration,
    source_from_mapping,
    system_windows,
    tier_windows,
    window_ends,
)
from streams.cli.prometheus import parse_time

STALE = object()           # Prometheus' staleness marker
LOOKBACK_MS = 300_000


@dataclass
class Target:
    """One simulated scrape target: sample times (ms) and per-scrape counter increments of busy
    core-seconds and of completions per class; restarts reset every counter."""

    times: list[int]
    busy_inc: list[float]
    class_inc: dict[str, list[int]]
    born: dict[str, int]                      # first scrape index at which a class exists
    resets: set[int] = field(default_factory=set)
    nan: set[int] = field(default_factory=set)     # busy sample is NaN
    down: tuple[int, int] | None = None            # scrapes [a, b) fail: stale marker at a

    def samples(self, values: list[float]) -> list[tuple[int, object]]:
        out: list[tuple[int, object]] = []
        for i, t in enumerate(self.times):
            if self.down and self.down[0] <= i < self.down[1]:
                if i == self.down[0]:
                    out.append((t, STALE))
                continue
            out.append((t, values[i]))
        return out

    def counter(self, inc: list[float], base: float = 0.0) -> list[float]:
        """Cumulative values from ``base`` (a long-running process has counted a lot before
        the test: a restart, back to 0, is always a visible drop)."""
        values, v = [], base
        for i, x in enumerate(inc):
            v = x if i in self.resets else v + x
            values.append(v)
        return values


#: counter values before the first scrape: busy core-seconds, completions of class "/q"
BASE = {"busy": 1e5, "/q": 1e6, "/m": 0.0}


def lookup(samples: list[tuple[int, object]], t: int) -> object | None:
    """Prometheus' instant lookup at ``t``."""
    latest = None
    for ts, v in samples:
        if ts <= t:
            latest = (ts, v)
    if latest is None or latest[1] is STALE or latest[0] <= t - LOOKBACK_MS:
        return None
    return latest[1]


def matrix(series: list[tuple[dict, list[tuple[int, object]]]], grid: list[int]) -> dict:
    """The ``data`` of a ``query_range`` answer over ``grid``."""
    result = []
    for labels, samples in series:
        values = []
        for t in grid:
            v = lookup(samples, t)
            if v is not None:
                values.append([t / 1000, "NaN" if isinstance(v, float) and math.isnan(v)
                               else repr(float(v))])
        if values:
            result.append({"metric": labels, "values": values})
    return {"resultType": "matrix", "result": result}


def last_index(target: Target, t: int) -> int | None:
    """Index of the scrape whose sample the lookup at ``t`` returns (``None``: none)."""
    idx = None
    for i, ts in enumerate(target.times):
        if ts <= t:
            idx = i
    return idx


SPEC = {"prometheus": {"url": "http://prom.invalid:9090", "system": "s", "window_s": 5,
                       "class_label": "handler"},
        "tiers": {"app": {"busy_seconds": "busy", "completions": "reqs", "cores": 2}}}


@st.composite
def targets(draw, window_ms: int, n_windows: int, offset_ms: int | None = None,
            allow_faults: bool = True) -> Target:
    scrape_ms = draw(st.sampled_from([500, 1000, 2000, window_ms]))
    offset = draw(st.integers(0, scrape_ms - 1)) if offset_ms is None else offset_ms
    jitter = draw(st.integers(0, scrape_ms * 2 // 5))
    n = (n_windows + 4) * window_ms // scrape_ms + 2
    rng_jitter = draw(st.lists(st.integers(-jitter, jitter), min_size=n, max_size=n))
    # scrapes from two windows before the grid's first point to past its last
    times = [offset - 2 * window_ms + i * scrape_ms + j for i, j in zip(range(n), rng_jitter)]
    gaps = [b - a for a, b in zip(times, times[1:])]
    busy_u = draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
    busy_inc = [0.0] + [u * g / 1000 * 2 for u, g in zip(busy_u[1:], gaps)]
    classes = {"/q": draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)),
               "/m": draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))}
    born = {"/q": 0, "/m": draw(st.integers(0, n - 1))}
    for c, k in born.items():
        classes[c][:k] = [0] * k
    target = Target(times, busy_inc, classes, born)
    if allow_faults:
        # one restart at most, before class "/m" is born (its counter starts at 0, so a restart
        # after it could go unseen -- as in Prometheus, where it would be lost too)
        if draw(st.booleans()):
            restart = draw(st.integers(1, n - 1))
            target.resets = {restart}
            born["/m"] = max(born["/m"], restart)
            classes["/m"][:born["/m"]] = [0] * born["/m"]
        target.nan = set(draw(st.lists(st.integers(0, n - 1), max_size=3)))
        if draw(st.booleans()):
            a = draw(st.integers(1, n - 2))
            target.down = (a, draw(st.integers(a + 1, n)))
    return target


def tier_data(target: Target, grid: list[int], labels: dict | None = None) -> TierData:
    labels = labels or {"instance": "a:1"}
    busy_values = target.counter(target.busy_inc, BASE["busy"])
    busy_values = [math.nan if i in target.nan else v for i, v in enumerate(busy_values)]
    busy = matrix([(dict(labels), target.samples(busy_values))], grid)
    comp = []
    for cls, inc in target.class_inc.items():
        values = target.counter(inc, BASE[cls])
        samples = [(t, v) for (t, v), i in zip(target.samples(values), _kept(target))
                   if i >= target.born[cls]]
        comp.append(({**labels, "handler": cls, "__name__": "reqs"}, samples))
    return TierData(busy_seconds=parse_result(busy), completions=parse_result(matrix(comp, grid)))


def _kept(target: Target) -> list[int]:
    """Indices of the scrapes that left a sample (the staleness marker included)."""
    return [i for i in range(len(target.times))
            if not (target.down and target.down[0] < i < target.down[1])]


def expected(target: Target, start: int, end: int) -> dict | None:
    """What the window ``(start, end]`` must hold: ``None`` if it cannot be made."""
    ia, ib = last_index(target, start), last_index(target, end)

    def present(i: int | None) -> bool:
        if i is None or i in target.nan:
            return False
        return not (target.down and target.down[0] <= i < target.down[1])
    if not (present(ia) and present(ib)):
        return None
    # what a counter shows: the increments since the later of the window's start sample and
    # the last restart in the window (the counts before a restart were never scraped)
    first = max([ia + 1] + [r for r in target.resets if ia < r <= ib])
    span = range(first, ib + 1)
    counts = {c: sum(inc[j] for j in span) for c, inc in target.class_inc.items()
              if target.born[c] <= ib}
    return {"busy": math.fsum(target.busy_inc[j] for j in span), "completions": counts}


WINDOW_MS = 5000


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n_windows=st.integers(2, 25))
def test_windows_hold_exactly_what_happened_between_their_ends(data, n_windows):
    """Counter resets, NaN samples, a target that goes stale, scrape offsets and jitter: every
    window made holds the counters' true increase between the samples at its ends (resets
    included), every window that lacks a sample at an end is a gap, and nothing is negative."""
    target = data.draw(targets(WINDOW_MS, n_windows))
    source = source_from_mapping(SPEC)
    grid_ends = window_ends(0, (n_windows + 1) * WINDOW_MS / 1000, 5.0)
    grid = [grid_ends[0] - WINDOW_MS] + grid_ends
    records, gaps = tier_windows(source.tiers[0], tier_data(target, grid), "s", grid_ends,
                                 WINDOW_MS)
    made = {round(r["end"] * 1000): r for r in records}
    assert len(made) + len(gaps) == len(grid_ends)
    for end in grid_ends:
        want = expected(target, end - WINDOW_MS, end)
        if want is None:
            assert end not in made, (end, made.get(end))
            continue
        got = made[end]
        assert got["window_s"] == 5.0 and got["cores"] == 2 and got["end"] * 1000 == end
        assert got["completions"] == want["completions"]
        assert all(v >= 0 for v in got["completions"].values())
        # the source differences the cumulative counter: rounding up to its size, not the
        # window's increment (a window of 0.008 s after 1e3 s of counted busy time)
        counter = math.fsum(target.busy_inc) / (5.0 * 2)
        assert math.isclose(got["utilization"], want["busy"] / (5.0 * 2), rel_tol=1e-9,
                            abs_tol=1e-12 + 1e-13 * counter)
        assert got["utilization"] >= 0


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(data=st.data(), n_windows=st.integers(3, 20))
def test_without_faults_the_windows_add_up_to_the_whole_range(data, n_windows):
    """No resets, NaNs or staleness: no gaps, and the windows' completions add up to the
    counters' increase between the first and the last grid point (telescoping)."""
    target = data.draw(targets(WINDOW_MS, n_windows, allow_faults=False))
    source = source_from_mapping(SPEC)
    grid_ends = window_ends(4.0, n_windows * 5.0 + 4.0, 5.0)
    grid = [grid_ends[0] - WINDOW_MS] + grid_ends
    records, gaps = tier_windows(source.tiers[0], tier_data(target, grid), "s", grid_ends,
                                 WINDOW_MS)
    assert not gaps and len(records) == len(grid_ends)
    ia, ib = last_index(target, grid[0]), last_index(target, grid[-1])
    for cls, inc in target.class_inc.items():
        total = sum(r["completions"].get(cls, 0) for r in records)
        assert total == sum(inc[ia + 1:ib + 1])


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(data=st.data(), n_windows=st.integers(3, 15))
def test_tiers_with_offset_scrapes_share_the_grid_and_one_that_stops_leaves_the_other(
        data, n_windows):
    """Two tiers scraped at different offsets: their windows end at the same grid points;
    when one stops reporting (stale), the other's windows are all still made."""
    front = data.draw(targets(WINDOW_MS, n_windows, allow_faults=False))
    db = data.draw(targets(WINDOW_MS, n_windows, allow_faults=False))
    stop_at = data.draw(st.integers(1, len(db.times) - 1))
    db.down = (stop_at, len(db.times))            # stops for good: staleness marker, then none
    spec = {**SPEC, "tiers": {"front": SPEC["tiers"]["app"], "db": SPEC["tiers"]["app"]}}
    source = source_from_mapping(spec)
    grid_ends = window_ends(0, (n_windows + 1) * 5.0, 5.0)
    grid = [grid_ends[0] - WINDOW_MS] + grid_ends
    records, gaps = system_windows(source, {"front": tier_data(front, grid),
                                            "db": tier_data(db, grid)}, grid_ends)
    ends = {t: [round(r["end"] * 1000) for r in records if r["tier"] == t]
            for t in ("front", "db")}
    assert ends["front"] == grid_ends
    stopped = db.times[stop_at]
    assert all(e < stopped for e in ends["db"])
    assert {g.end_ms for g in gaps if g.tier == "db"} == set(grid_ends) - set(ends["db"])
    assert all(g.tier == "db" for g in gaps)
    assert [(r["end"], r["tier"]) for r in records] == sorted(
        ((r["end"], r["tier"]) for r in records), key=lambda x: (x[0], x[1] != "front"))


@settings(max_examples=100, deadline=None)
@given(jitter_ms=st.integers(0, 900), offset_ms=st.integers(0, 999),
       seeds=st.lists(st.integers(-1000, 1000), min_size=40, max_size=40),
       tolerance=st.sampled_from([0.0, 0.02, 0.05, 0.1]))
def test_a_saturated_tier_is_clamped_within_the_tolerance_and_dead_lettered_beyond(
        jitter_ms, offset_ms, seeds, tolerance):
    """A tier busy all the time, scraped every second with jitter: a window's utilization is
    off 1 by at most the scrape spacing's error over the window; through the pipeline, a value
    in (1, 1 + tolerance] is accepted, clamped to 1 and flagged, and one beyond is
    dead-lettered with the reason naming the tolerance."""
    times = [offset_ms + i * 1000 + s * jitter_ms // 2000 for i, s in enumerate(seeds)]
    busy = [t / 1000 * 2 for t in times]            # 2 cores, always busy
    grid_ends = window_ends(6.0, 31.0, 5.0)
    grid = [grid_ends[0] - WINDOW_MS] + grid_ends
    data = TierData(busy_seconds=parse_result(matrix([({}, list(zip(times, busy)))], grid)),
                    completions=parse_result(matrix([({"handler": "/q"},
                                                      [(t, float(i)) for i, t in
                                                       enumerate(times)])], grid)))
    source = source_from_mapping(SPEC)
    records, gaps = tier_windows(source.tiers[0], data, "s", grid_ends, WINDOW_MS)
    assert not gaps
    pipeline = Pipeline(Config(utilization_tolerance=tolerance))
    for r in records:
        assert abs(r["utilization"] - 1) <= (2 * jitter_ms / 2000 + 1) / 5 + 1e-9
        u = r["utilization"]
        out = pipeline.process_many([r])
        if u <= 1 + max(tolerance, 1e-9):
            assert len(out.estimates) == 1 and not out.deadletter
            assert out.estimates[0]["utilization"] == min(u, 1.0)
            if u > 1 + 1e-9:
                assert out.estimates[0]["flags"] == [
                    f"utilization {u!r} clamped to 1 (within tolerance {tolerance:g})"]
        else:
            assert not out.estimates and len(out.deadletter) == 1
            dead = out.deadletter[0]
            assert dead["field"] == "utilization"
            assert f"tolerance {tolerance:g}" in dead["reason"]
            with pytest.raises(InvalidWindow, match="utilization"):
                parse_window(r, tolerance)


def test_time_at_the_tier_users_and_window_mode():
    """``time_sum``/``time_count`` give the mean time per class; ``users`` and ``cores`` are
    summed over their series; ``counters = false`` takes the queries' values as the windows'
    amounts and a utilization gauge as it is."""
    grid = [0, 5000, 10000]
    data = TierData(
        busy_seconds=parse_result(matrix([({"i": "1"}, [(0, 1.0), (5000, 3.0), (10000, 3.5)]),
                                          ({"i": "2"}, [(0, 0.0), (5000, 1.0), (10000, 0.5)])],
                                         grid)),
        cores=parse_result(matrix([({"i": "1"}, [(0, 1.0)]), ({"i": "2"}, [(0, 1.0)])], grid)),
        completions=parse_result(matrix([({"handler": "/q"}, [(0, 10.0), (5000, 20.0),
                                                              (10000, 20.0)])], grid)),
        time_sum=parse_result(matrix([({"handler": "/q"}, [(0, 1.0), (5000, 3.0),
                                                           (10000, 3.0)])], grid)),
        users=parse_result(matrix([({"i": "1"}, [(0, 3.0)]), ({"i": "2"}, [(0, 4.0)])], grid)))
    spec = source_from_mapping({**SPEC, "tiers": {"app": {
        "busy_seconds": "b", "completions": "c", "cores": "count(x)", "time_sum": "s",
        "users": "u"}}}).tiers[0]
    records, gaps = tier_windows(spec, data, "s", [5000, 10000], 5000)
    assert not gaps
    first, second = records
    assert first["utilization"] == pytest.approx(3.0 / 10) and first["cores"] == 2
    assert first["completions"] == {"/q": 10} and first["response_time_s"] == {"/q": 0.2}
    assert first["users"] == 7
    # instance 2 restarted (1.0 -> 0.5): its increase is 0.5
    assert second["utilization"] == pytest.approx((0.5 + 0.5) / 10)
    assert second["completions"] == {"/q": 0} and "response_time_s" not in second
    window = source_from_mapping({**SPEC, "tiers": {"app": {
        "utilization": "u", "completions": "increase(c[{window}])", "counters": False}}})
    gauge = TierData(utilization=parse_result(matrix([({}, [(5000, 0.25)])], grid)),
                     completions=parse_result(matrix([({"handler": "/q"}, [(5000, 7.5)])],
                                                     grid)))
    records, gaps = tier_windows(window.tiers[0], gauge, "s", [5000], 5000)
    assert records[0]["utilization"] == 0.25 and records[0]["completions"] == {"/q": 7.5}
    for r in records:
        parse_window(r)


def test_a_tier_without_completion_series_or_cores_is_a_gap_and_nan_is_no_value():
    grid = [0, 5000]
    spec = source_from_mapping({**SPEC, "tiers": {"app": {
        "busy_seconds": "b", "completions": "c", "cores": "x"}}}).tiers[0]
    busy = parse_result({"resultType": "matrix", "result": [
        {"metric": {}, "values": [[0, "1"], [5, "2"]]}]})
    no_cores = TierData(busy_seconds=busy, cores=parse_result(
        {"resultType": "matrix", "result": [{"metric": {}, "values": [[5, "NaN"]]}]}),
        completions=[])
    _, gaps = tier_windows(spec, no_cores, "s", [5000], 5000)
    assert [g.reason for g in gaps] == ["cores: no value at the window's end"]
    zero_cores = TierData(busy_seconds=busy, cores=parse_result(
        {"resultType": "matrix", "result": [{"metric": {}, "values": [[5, "0"]]}]}),
        completions=[])
    _, gaps = tier_windows(spec, zero_cores, "s", [5000], 5000)
    assert [g.reason for g in gaps] == ["cores: 0 at the window's end (must be >= 1)"]
    no_classes = TierData(busy_seconds=busy, cores=parse_result(
        {"resultType": "vector", "result": [{"metric": {}, "value": [5, "+Inf"]}]}) + parse_result(
        {"resultType": "matrix", "result": [{"metric": {}, "values": [[5, "1"]]}]}),
        completions=[])
    _, gaps = tier_windows(spec, no_classes, "s", [5000], 5000)
    assert [g.reason for g in gaps] == ["completions: no series at the window's end"]
    with pytest.raises(ValueError, match="tiers.app.utilization: the query gave 2 series"):
        gauge = source_from_mapping({**SPEC, "tiers": {"app": {"utilization": "u",
                                                               "completions": "c"}}}).tiers[0]
        tier_windows(gauge, TierData(utilization=busy + [busy[0].__class__(
            labels={"i": "2"}, values={0: 1.0})], completions=[]), "s", grid, 5000)


def test_a_counter_stale_at_the_start_is_a_gap_not_a_birth_over_a_range_with_history():
    """Two targets: the busy time from one (process-exporter) reports at every point; the
    app's request counter misses the scrape at 10 s (Prometheus marks its series stale), so
    the window (10, 15] sees the counter at its end only. Its value there (the count since
    the app started) is not the window's increase: with the range's history the window is a
    gap naming the class; a class with no earlier value
    is born (its value is its increase), also in the range's first window; without history
    every absence is a birth, as before."""
    spec = source_from_mapping({**SPEC, "tiers": {"app": {
        "busy_seconds": "b", "completions": "c"}}}).tiers[0]

    def matrix_of(*series):
        return parse_result({"resultType": "matrix", "result": [
            {"metric": labels, "values": [[t, str(v)] for t, v in points]}
            for labels, points in series]})
    busy = matrix_of(({}, [(t, t / 10) for t in (0, 5, 10, 15, 20)]))
    comp = matrix_of(({"handler": "/q"}, [(0, 900), (5, 910), (15, 930), (20, 940)]),
                     ({"handler": "/new"}, [(15, 3), (20, 5)]))
    data = TierData(busy_seconds=busy, completions=comp)
    records, gaps = tier_windows(spec, data, "s", [10000, 15000, 20000], 5000, history=True)
    assert [g.reason for g in gaps] == [
        "completions: no series at the window's end",      # (5, 10]: the missed scrape
        "completions: /q: no value at the window's start (stale: a failed scrape)"]
    assert [(r["end"], r["completions"]) for r in records] == [
        (20.0, {"/new": 2, "/q": 10})]
    # a class born in the window: its value is its increase
    comp = matrix_of(({"handler": "/q"}, [(0, 900), (5, 910), (10, 920), (15, 930)]),
                     ({"handler": "/new"}, [(15, 3)]))
    records, gaps = tier_windows(spec, TierData(busy_seconds=busy, completions=comp), "s",
                                 [15000], 5000, history=True)
    assert not gaps and records[0]["completions"] == {"/new": 3, "/q": 10}
    # a series first seen in the range's first window (the target just started): born
    records, gaps = tier_windows(spec, TierData(busy_seconds=busy, completions=matrix_of(
        ({"handler": "/q"}, [(5, 3)]))), "s", [5000], 5000, history=True)
    assert not gaps and records[0]["completions"] == {"/q": 3}
    # without history (the agent formats' single windows) an absence at the start is a birth
    records, _ = tier_windows(spec, data, "s", [15000], 5000)
    assert records[0]["completions"] == {"/new": 3, "/q": 930}


@pytest.mark.parametrize("raw, message", [
    ({"tiers": {"a": {"busy_seconds": "b", "completions": "c"}}},
     "prometheus.url: must be an http(s) URL (or set PERFCAST_PROMETHEUS_URL), got None"),
    ({**SPEC, "prometheus": {**SPEC["prometheus"], "window_s": 0}},
     "prometheus.window_s: must be a number within (0, 86400], got 0"),
    ({**SPEC, "prometheus": {**SPEC["prometheus"], "window_s": 0.0005}},
     "prometheus.window_s: must be whole milliseconds"),
    ({**SPEC, "prometheus": {**SPEC["prometheus"], "colour": 1}},
     "prometheus.colour: unknown setting"),
    ({**SPEC, "prometheus": {**SPEC["prometheus"], "headers": {"Authorization": "x"}}},
     "secrets come from the environment"),
    ({**SPEC, "tiers": {"a": {"completions": "c"}}},
     "tiers.a: exactly one of busy_seconds (a counter of busy core-seconds) and utilization "
     "(a busy-fraction gauge) is needed, got neither"),
    ({**SPEC, "tiers": {"a": {"busy_seconds": "b", "utilization": "u", "completions": "c"}}},
     "got both"),
    ({**SPEC, "tiers": {"a": {"busy_seconds": "b"}}}, "tiers.a.completions: required"),
    ({**SPEC, "tiers": {"a": {"busy_seconds": "b", "completions": "c", "cores": 0}}},
     "tiers.a.cores: must be a whole number within [1, 4096] or PromQL, got 0"),
    ({**SPEC, "tiers": {"a": {"busy_seconds": "", "completions": "c"}}},
     "tiers.a.busy_seconds: must be a non-empty string, got ''"),
    ({**SPEC, "tiers": {}}, "tiers: at least one"),
    ({**SPEC, "extra": {}}, "extra: unknown section"),
])
def test_configuration_errors_name_the_key_and_value(raw, message):
    with pytest.raises(ConfigError) as err:
        source_from_mapping(raw)
    assert message in str(err.value)


def test_configuration_files_toml_json_and_the_environment(tmp_path: Path):
    toml = tmp_path / "p.toml"
    toml.write_text('[prometheus]\nurl = "http://x:1/"\nsystem = "shop"\nwindow_s = 2.5\n'
                    '[tiers.front]\nbusy_seconds = "b"\ncompletions = "c"\n'
                    '[tiers.db]\nutilization = "u"\ncompletions = "c"\nclass_label = "uri"\n')
    source = load_source(toml, env={})
    assert source.url == "http://x:1" and source.window_ms == 2500
    assert [t.name for t in source.tiers] == ["front", "db"]
    assert source.tiers[1].class_label == "uri" and source.tiers[0].class_label == "handler"
    assert load_source(toml, env={"PERFCAST_PROMETHEUS_URL": "http://y:2"}).url == "http://y:2"
    js = tmp_path / "p.json"
    js.write_text('{"prometheus": {"url": "http://x:1", "system": "shop"}, "tiers": '
                  '{"a": {"busy_seconds": "b", "completions": "c"}}}')
    assert load_source(js, env={}).system == "shop"
    (tmp_path / "bad.toml").write_text("[prometheus\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_source(tmp_path / "bad.toml", env={})


def test_grid_durations_and_times():
    assert window_ends(0, 20, 5) == [5000, 10000, 15000, 20000]
    assert window_ends(4.999, 10.001, 5) == [5000, 10000]
    assert window_ends(0, 10, 5, offset_s=2) == [2000, 7000]
    assert promql_duration(5) == "5s" and promql_duration(0.25) == "250ms"
    assert parse_time("now", now=lambda: 100.0) == 100.0
    assert parse_time("now-2m", now=lambda: 1000.0) == 880.0
    assert parse_time("-1h", now=lambda: 7200.0) == 3600.0
    assert parse_time("2026-11-20T10:00:05Z") == 1795168805.0
    assert parse_time("1795168805") == 1795168805.0
    with pytest.raises(ValueError, match="'yesterday': not a time"):
        parse_time("yesterday")


def test_the_documented_mappings_load():
    """Every complete example in docs/prometheus.md is a valid configuration."""
    import re
    import tomllib

    text = (Path(__file__).resolve().parents[1] / "docs" / "prometheus.md").read_text()
    blocks = [b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "[prometheus]" in b]
    assert len(blocks) >= 3
    for block in blocks:
        source = source_from_mapping(tomllib.loads(block), env={})
        assert source.tiers and all(t.completions for t in source.tiers)


class FakePrometheus:
    """``query_range`` of a tier busy half the time and 10 requests a second; the first
    ``failures`` calls fail as an unreachable server would."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.calls = 0

    def query_range(self, query, start_ms, end_ms, step_ms, what="query"):
        from streams.sources.prometheus_http import PrometheusError

        self.calls += 1
        if self.calls <= self.failures:
            raise PrometheusError(f"{what}: cannot query (connection refused)", transient=True)
        rate, labels = (0.5, {}) if query == "busy" else (10.0, {"handler": "/q"})
        values = [[t / 1000, repr(t / 1000 * rate)] for t in range(start_ms, end_ms + 1,
                                                                    step_ms)]
        return {"resultType": "matrix", "result": [{"metric": labels, "values": values}]}


class FakeProducer:
    def __init__(self) -> None:
        self.records: list[dict] = []

    def send(self, topic, key=None, value=None):
        import json
        self.records.append(json.loads(value))

    def flush(self) -> None:
        pass


def test_follow_retries_checkpoints_and_resumes_where_it_stopped(tmp_path: Path):
    """The live follower: Prometheus unreachable at first is retried; every window is sent
    once, in order, and checkpointed; a second run resumes after the checkpoint."""
    from streams.core.config import KafkaSettings
    from streams.kafka.prometheus_follow import Checkpoint, follow

    source = source_from_mapping({**SPEC, "prometheus": {**SPEC["prometheus"], "window_s": 0.2,
                                                         "lag_s": 0, "max_windows_per_query": 4},
                                  "tiers": {"app": {"busy_seconds": "busy",
                                                    "completions": "reqs"}}}, env={})
    checkpoint = Checkpoint(tmp_path / "ck.json", source)
    producer, prom = FakeProducer(), FakePrometheus(failures=2)
    stats = follow(source, KafkaSettings(), checkpoint, start_s=100.0, until_s=102.0,
                   producer=producer, client=prom, clock=lambda: 1000.0)
    ends = [r["end"] for r in producer.records]
    assert ends == pytest.approx([100.2 + 0.2 * i for i in range(10)])
    assert stats.sent == 10 and stats.window_ends == 10 and checkpoint.load() == 102.0
    for r in producer.records:
        assert r["utilization"] == pytest.approx(0.5) and r["completions"]["/q"] == \
            pytest.approx(2.0)
        parse_window(r)
    follow(source, KafkaSettings(), checkpoint, start_s=0.0, until_s=103.0, producer=producer,
           client=prom, clock=lambda: 1000.0)
    ends = [r["end"] for r in producer.records]
    assert ends == pytest.approx([100.2 + 0.2 * i for i in range(15)])
    other = Checkpoint(tmp_path / "ck.json", source_from_mapping(
        {**SPEC, "prometheus": {**SPEC["prometheus"], "system": "t"}}, env={}))
    with pytest.raises(ConfigError, match="not a checkpoint of system 't'"):
        other.load()


def test_command_line_errors_name_the_option_and_value(tmp_path: Path, monkeypatch):
    """``perfcast run --source prometheus`` and ``perfcast ingest prometheus``: a missing or
    bad option ends with exit code 2 and a message naming it; ``run`` over a file is as
    before."""
    from typer.testing import CliRunner

    from streams.cli.commands import app

    monkeypatch.delenv("PERFCAST_PROMETHEUS_URL", raising=False)
    runner = CliRunner()
    out = ["--out", str(tmp_path / "o")]
    good = tmp_path / "p.toml"
    good.write_text('[prometheus]\nurl = "http://127.0.0.1:9"\nsystem = "s"\n'
                    '[tiers.a]\nbusy_seconds = "b"\ncompletions = "c"\n')
    bad = tmp_path / "bad.toml"
    bad.write_text('[prometheus]\nurl = "http://127.0.0.1:9"\nsystem = "s"\n'
                   '[tiers.a]\nbusy_seconds = "b"\n')
    cases = [
        (["run", "--source", "prometheus", *out],
         "--source prometheus needs --prom-config, --from and --to"),
        (["run", "--source", str(tmp_path / "none.jsonl"), "--from", "now", *out],
         "--from only with --source prometheus"),
        (["run", "--source", "prometheus", "--prom-config", str(good), "--from", "yesterday",
          "--to", "now", *out], "'yesterday': not a time"),
        (["run", "--source", "prometheus", "--prom-config", str(good), "--from", "now",
          "--to", "now-1h", *out], "to: must be after --from"),
        (["run", "--source", "prometheus", "--prom-config", str(bad), "--from", "now-1h",
          "--to", "now", *out], "tiers.a.completions: required"),
        (["run", "--source", "prometheus", "--prom-config", str(good), "--from", "now-1h",
          "--to", "now", *out], "cannot query http://127.0.0.1:9"),
        (["ingest", "prometheus", "--prom-config", str(bad)], "tiers.a.completions: required"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in " ".join(result.output.split()), (args, result.output)
    trace = tmp_path / "w.jsonl"
    trace.write_text('{"system": "s", "tier": "a", "end": 5, "window_s": 5, '
                     '"utilization": 0.5, "completions": {"x": 3}}\n')
    result = runner.invoke(app, ["run", "--source", str(trace), *out])
    assert result.exit_code == 0, result.output
    assert "1 windows" in result.output
