"""The stream core: window history, alert hysteresis, the MVA curve, and
the per-system state / pipeline over a short simulated trace of the demo shop (state round
trips, duplicates, late and unknown windows, new classes), its output schema and sinks."""

from __future__ import annotations

import copy
import json
import math
import sqlite3
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# ``solvers`` must be imported before ``line_solver`` (see tests/conftest.py)
from solvers.mva import mva, mva_curve  # isort: skip
from streams.core import history as history_module
from streams.alerts.book import AlertBook
from streams.core.config import Config, SystemConfig
from streams.cli.demo import START, DemoScenario, demo_config, demo_records
from streams.cli.embedded import STORE_NAME, run_embedded
from streams.core.history import CHUNK, WindowHistory
from streams.core.outputs import DeadLetter, TierEstimate
from streams.engine.pipeline import Pipeline
from streams.core.records import parse_window
from streams.sinks.schema import MEASUREMENTS, Point, points
from streams.sinks.store import OUTPUT_FILES, SQLiteStore
from streams.engine.system import Outputs, SystemState, solve_offset
from streams.core.tier import Interval, add_blocks

from line_solver.api.pfqn.mva import pfqn_mva  # isort: skip  # noqa: E402


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def assert_close(a, b, path="$", rel=1e-9, abs_=1e-12):
    """Same structure, equal non-floats, floats within ``rel`` (JSON-like values)."""
    if isinstance(a, dict):
        assert isinstance(b, dict), path
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_close(a[k], b[k], f"{path}.{k}", rel, abs_)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{path}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{path}[{i}]", rel, abs_)
    elif isinstance(a, float) or isinstance(b, float):
        assert not isinstance(a, bool) and not isinstance(b, bool), f"{path}: {a!r} != {b!r}"
        assert math.isclose(a, b, rel_tol=rel, abs_tol=abs_), f"{path}: {a!r} != {b!r}"
    else:
        assert a == b and type(a) is type(b), f"{path}: {a!r} != {b!r}"


def run(records, config, pipeline=None):
    """Feed ``records`` one by one; the pipeline and the outputs of each record."""
    pipeline = pipeline or Pipeline(config)
    return pipeline, [pipeline.process(r) for r in records]


def merged(outputs):
    out = Outputs()
    for o in outputs:
        out.extend(o)
    return out


SCENARIO = DemoScenario(duration_s=600, steady_s=300, users_start=20, users_end=40)


@pytest.fixture(scope="module")
def records():
    """240 window records (120 per tier, front then db for each 5 s window), seed 1."""
    recs = demo_records(SCENARIO)
    assert len(recs) == 240
    return recs


@pytest.fixture(scope="module")
def config():
    return demo_config(SCENARIO)


@pytest.fixture(scope="module")
def baseline(records, config):
    """The uninterrupted run: per-record outputs, then the final solve."""
    pipeline, outs = run(records, config)
    return pipeline, outs, pipeline.finish()


def _fresh(records):
    return copy.deepcopy(records)


# --------------------------------------------------------------------------------------------
# WindowHistory
# --------------------------------------------------------------------------------------------

def _random_rows(rng, n, max_classes=3):
    rows = []
    for _ in range(n):
        k = int(rng.integers(1, max_classes + 1))
        rows.append((float(rng.uniform()), float(rng.choice([1.0, 5.0])),
                     int(rng.integers(1, 5)), rng.integers(0, 100, k).astype(float).tolist()))
    return rows


def _padded(rows, n_classes):
    X = np.zeros((len(rows), n_classes))
    for i, r in enumerate(rows):
        X[i, :len(r[3])] = r[3]
    return X


@pytest.mark.parametrize("capacity", [1, 16, 127, 128, 129, 300, 1000])
def test_history_keeps_exactly_the_last_capacity_rows_in_order(capacity):
    rng = np.random.default_rng(capacity)
    rows = _random_rows(rng, 1500)
    hist = WindowHistory(capacity)
    for i, row in enumerate(rows, start=1):
        hist.append(*row)
        if i in (1, capacity, capacity + 1, 127, 128, 129, 700, 1500):
            arr = hist.arrays(3)
            want = rows[max(i - capacity, 0):i]
            assert arr.size == len(want)
            np.testing.assert_array_equal(arr.utilization, [r[0] for r in want])
            np.testing.assert_array_equal(arr.window_s, [r[1] for r in want])
            np.testing.assert_array_equal(arr.cores, [r[2] for r in want])
            np.testing.assert_array_equal(arr.completions, _padded(want, 3))
            # memory stays bounded: whole chunks, never more than needed plus one
            assert len(hist.chunks) <= math.ceil(capacity / CHUNK) + 1
    assert hist.seq == 1500
    # ``last`` beyond the capacity gives what the kept chunks still hold: still the newest rows
    last = hist.arrays(3, last=10)
    assert min(10, capacity) <= last.size <= 10
    np.testing.assert_array_equal(last.utilization, [r[0] for r in rows[-last.size:]])
    arr = hist.arrays(3)
    np.testing.assert_allclose(arr.busy_time, arr.utilization * arr.window_s * arr.cores)
    np.testing.assert_array_equal(arr.total_completions, arr.completions.sum(axis=1))


def test_history_zero_pads_short_class_vectors():
    hist = WindowHistory(10)
    hist.append(0.1, 5.0, 1, [1.0])
    hist.append(0.2, 5.0, 1, [1.0, 2.0])
    hist.append(0.3, 5.0, 1, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(hist.arrays(3).completions,
                                  [[1, 0, 0], [1, 2, 0], [1, 2, 3]])
    np.testing.assert_array_equal(hist.arrays(4).completions[:, 3], [0, 0, 0])
    assert hist.arrays(3).tail(2).size == 2


def test_empty_history_gives_empty_arrays():
    arr = WindowHistory(16).arrays(2)
    assert arr.size == 0 and arr.completions.shape == (0, 2)


def test_take_changes_reports_written_and_dropped_chunks():
    """Replaying take_changes into a store keeps the store equal to the live chunks; only
    touched chunks are written; chunks older than the capacity are dropped."""
    hist = WindowHistory(int(1.5625 * CHUNK))     # 200 windows when CHUNK = 128
    store: dict[int, dict] = {}
    seen_drops: set[int] = set()

    def sync():
        written, dropped = hist.take_changes()
        for k in dropped:
            store.pop(k, None)
        store.update(copy.deepcopy(written))
        seen_drops.update(dropped)
        return written, dropped

    for _ in range(CHUNK + 2):
        hist.append(0.5, 5.0, 1, [1.0])
    written, dropped = sync()
    assert sorted(written) == [0, 1] and dropped == set()
    assert len(written[0]["u"]) == CHUNK and len(written[1]["u"]) == 2
    for _ in range(5):
        hist.append(0.5, 5.0, 1, [1.0])
    written, dropped = sync()
    assert sorted(written) == [1] and dropped == set()          # only the touched chunk
    assert sync() == ({}, set())                                # nothing since
    # chunk 3 starts at seq 3 CHUNK: (3 CHUNK - 1.5625 CHUNK) // CHUNK = 1, chunk 0 is dropped
    while hist.seq < 3 * CHUNK + 1:
        hist.append(0.5, 5.0, 1, [1.0])
    written, dropped = sync()
    assert sorted(written) == [1, 2, 3] and dropped == {0}
    assert store == hist.chunks
    # a chunk written and dropped between two takes is reported dropped only
    small = WindowHistory(16)
    for _ in range(3 * CHUNK + 1):
        small.append(0.1, 1.0, 1, [0.0])
    written, dropped = small.take_changes()
    assert sorted(written) == [2, 3] and dropped == {0, 1}
    # long run: the store follows the live state exactly
    rng = np.random.default_rng(5)
    for row in _random_rows(rng, 2000):
        hist.append(*row)
        if rng.uniform() < 0.05:
            sync()
    sync()
    assert store == hist.chunks
    assert seen_drops == set(range(min(hist.chunks)))
    restored = WindowHistory.restore(hist.header(), store)
    np.testing.assert_array_equal(restored.arrays(3).completions, hist.arrays(3).completions)


def test_history_state_round_trips_exactly():
    rng = np.random.default_rng(9)
    hist = WindowHistory(300)
    rows = _random_rows(rng, 777)
    for row in rows[:700]:
        hist.append(*row)
    data = json.loads(json.dumps(hist.to_dict()))        # as a durable store would keep it
    back = WindowHistory.from_dict(data)
    assert back.header() == hist.header()
    assert back.chunks == hist.chunks
    back2 = WindowHistory.restore(json.loads(json.dumps(hist.header())),
                                  copy.deepcopy(hist.chunks))
    for h in (hist, back, back2):
        for row in rows[700:]:
            h.append(*row)
    for h in (back, back2):
        assert h.to_dict() == hist.to_dict()
        for name in ("utilization", "window_s", "cores", "completions"):
            np.testing.assert_array_equal(getattr(h.arrays(3), name),
                                          getattr(hist.arrays(3), name))


def test_restore_cuts_rows_written_after_the_header():
    """A durable store writes chunks before the header; after a crash between the two, the
    chunks may hold rows (and whole chunks) the header does not count: restore ignores them."""
    rng = np.random.default_rng(3)
    rows = _random_rows(rng, 400)
    hist = WindowHistory(1000)
    for row in rows[:300]:
        hist.append(*row)
    header = json.loads(json.dumps(hist.header()))
    at_header = copy.deepcopy(hist.to_dict())
    for row in rows[300:]:                      # fills chunk 2 (256..383), starts chunk 3
        hist.append(*row)
    later = copy.deepcopy(hist.chunks)
    assert 3 in later and len(later[2]["u"]) == CHUNK
    back = WindowHistory.restore(header, later)
    assert back.to_dict() == at_header
    np.testing.assert_array_equal(back.arrays(3).utilization, [r[0] for r in rows[:300]])
    # and it carries on from there as the original did
    for row in rows[300:]:
        back.append(*row)
    assert back.to_dict() == hist.to_dict()


def test_restore_refuses_a_missing_chunk():
    hist = WindowHistory(300)
    for _ in range(2 * CHUNK):
        hist.append(0.5, 5.0, 1, [1.0])
    chunks = dict(hist.chunks)
    del chunks[1]
    with pytest.raises(ValueError, match="chunk 1"):
        WindowHistory.restore(hist.header(), chunks)


# --------------------------------------------------------------------------------------------
# AlertBook
# --------------------------------------------------------------------------------------------

EVENT = {"system": "shop", "alert": "model_error"}


def _feed(book, conditions, key="k"):
    """Events per step (``None`` when the state did not change)."""
    return [book.evaluate(key, c, EVENT, float(t)) for t, c in enumerate(conditions)]


def _plain_sums(windows: list[tuple[float, float, list[float], list[float]]]) -> list[float]:
    """An interval's sums window by window in plain floats: ``(T, U, counts, rts)``."""
    n = len(windows[0][2])
    out = [0.0] * (2 + 3 * n)
    for T, U, counts, rts in windows:
        out[0] += T
        out[1] += U * T
        for c in range(n):
            has = rts[c] == rts[c] and counts[c] > 0
            out[2 + c] += counts[c]
            out[2 + n + c] += rts[c] * counts[c] if has else 0.0
            out[2 + 2 * n + c] += counts[c] if has else 0.0
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), tiers=st.integers(1, 6), cut=st.integers(1, 9))
def test_interval_sums_do_not_depend_on_blocks_or_on_the_tiers_summed_together(seed, tiers,
                                                                               cut):
    """:func:`add_blocks` pads tiers to a common length and takes one running sum: every
    tier's sums are bit for bit the window-by-window sums, however its windows are cut into
    blocks and whichever tiers share a call."""
    rng = np.random.default_rng(seed)
    n = 3
    data = []
    for _ in range(tiers):
        L = int(rng.integers(1, 25))
        counts = np.floor(rng.random((L, n)) * 10.0 ** rng.integers(0, 5, (L, n)))
        rts = np.where(rng.random((L, n)) < 0.2, np.nan, rng.random((L, n)) * 3)
        data.append((rng.random(L) * 30 + 1, rng.random(L), counts, rts))
    intervals = [Interval() for _ in data]
    done = [0] * tiers
    while any(d < len(u) for d, (_, u, _, _) in zip(done, data)):
        live = [j for j in range(tiers) if done[j] < len(data[j][1])]
        parts = [(j, slice(done[j], min(done[j] + int(rng.integers(1, cut + 1)),
                                         len(data[j][1])))) for j in live]
        add_blocks([intervals[j] for j, _ in parts], [["a", "b", "c"]] * len(parts),
                   [sl.stop - sl.start for _, sl in parts],
                   np.concatenate([data[j][0][sl] for j, sl in parts]),
                   np.concatenate([data[j][1][sl] for j, sl in parts]),
                   np.concatenate([data[j][2][sl] for j, sl in parts]),
                   np.concatenate([data[j][3][sl] for j, sl in parts]),
                   [[] for _ in parts])
        for j, sl in parts:
            done[j] = sl.stop
    for iv, (T, U, counts, rts) in zip(intervals, data):
        assert iv._totals() == _plain_sums(list(zip(T.tolist(), U.tolist(), counts.tolist(),
                                                   rts.tolist())))
        assert iv.windows == len(T)


def test_alert_fires_only_after_fire_after_consecutive_true():
    book = AlertBook(fire_after=3, resolve_after=2)
    events = _feed(book, [True, True, False, True, True, True, True])
    assert events[:6] == [None] * 5 + [{**EVENT, "state": "firing", "since": 5.0}]
    assert events[6] is None                         # already firing: no repeat
    assert book.active() == ["k"]


def test_alert_dead_band_does_not_move_the_counters():
    book = AlertBook(fire_after=2, resolve_after=3)
    # True, (dead band), True: the dead band neither counts nor resets
    events = _feed(book, [True, None, None, True])
    assert events[3] == {**EVENT, "state": "firing", "since": 3.0}
    # False, None, False, None, False: resolves on the third False
    events = [book.evaluate("k", c, EVENT, float(t))
              for t, c in enumerate([False, None, False, None, False], start=10)]
    assert events[:4] == [None] * 4
    assert events[4] == {**EVENT, "state": "resolved", "since": 3.0}
    assert book.active() == []


def test_alert_event_given_as_a_function_is_built_only_when_the_state_changes():
    calls = []

    def event():
        calls.append(1)
        return EVENT

    book = AlertBook(fire_after=2, resolve_after=1)
    events = [book.evaluate("k", c, event, float(t))
              for t, c in enumerate([True, None, True, True, False, False])]
    assert events == [None, None, {**EVENT, "state": "firing", "since": 2.0}, None,
                      {**EVENT, "state": "resolved", "since": 2.0}, None]
    assert len(calls) == 2                           # the firing and the resolution only


def test_alert_resolves_after_resolve_after_consecutive_false():
    book = AlertBook(fire_after=1, resolve_after=3)
    events = _feed(book, [True, False, False, True, False, False, False, False])
    assert events[0] == {**EVENT, "state": "firing", "since": 0.0}
    assert events[1:6] == [None] * 5                 # the True at t=3 restarted the count
    assert events[6] == {**EVENT, "state": "resolved", "since": 0.0}
    assert events[7] is None
    # clear conditions never resolve an alert that is not firing
    assert _feed(AlertBook(), [False] * 5, key="other") == [None] * 5


def test_alert_accepts_numpy_bools():
    book = AlertBook(fire_after=2, resolve_after=1)
    x = np.array([0.5, 2.0])
    assert book.evaluate("k", np.bool_(x[1] > 1), EVENT, 0.0) is None
    assert book.evaluate("k", x[1] > 1, EVENT, 1.0)["state"] == "firing"
    assert book.evaluate("k", x[0] > 1, EVENT, 2.0)["state"] == "resolved"
    json.dumps(book.to_dict())


def test_alert_book_round_trips_mid_count():
    book = AlertBook(fire_after=3, resolve_after=2)
    _feed(book, [True, True, True, False], key="a")           # firing, one clear
    _feed(book, [True, True], key="b")                        # two of three
    _feed(book, [None], key="c")                              # seen only in the dead band
    back = AlertBook.from_dict(json.loads(json.dumps(book.to_dict())))
    assert back.to_dict() == book.to_dict()
    assert back.active() == book.active() == ["a"]
    for b in (book, back):
        assert b.evaluate("b", True, EVENT, 9.0)["state"] == "firing"
        assert b.evaluate("a", False, EVENT, 9.0)["state"] == "resolved"
    assert back.to_dict() == book.to_dict()


def test_the_capacity_searches_warm_starts_survive_a_restore():
    """Each search the alert runs starts from its own last answer, persisted so a restored
    state probes where the running one would; a state saved before the provisional model's
    own start has none (a cold search)."""
    cfg = SystemConfig(tiers=("a",))
    state = SystemState("s", cfg)
    state.last_capacity, state.last_alert_capacity, state.last_provisional_capacity = 900, 700, 800
    data = json.loads(json.dumps(state.to_dict()))
    back = SystemState.from_dict(data, cfg)
    assert (back.last_capacity, back.last_alert_capacity, back.last_provisional_capacity) == \
        (900, 700, 800)
    del data["last_provisional_capacity"]
    assert SystemState.from_dict(data, cfg).last_provisional_capacity is None


# --------------------------------------------------------------------------------------------
# mva_curve
# --------------------------------------------------------------------------------------------

def test_mva_curve_matches_exact_mva_at_every_checked_population():
    D, Z = np.array([0.0048, 0.0036, 0.0120]), 0.5
    curve = mva_curve(D, 400, Z)
    assert curve.max_population == 400 and not curve.stopped and not curve.approximate
    for n in (1, 2, 7, 50, 83, 150, 400):
        ref = mva(D[:, None], [n], [Z])
        np.testing.assert_allclose(curve.throughput[n], ref.throughput[0], rtol=1e-12)
        np.testing.assert_allclose(curve.residence_time[n], ref.residence_time[:, 0],
                                   rtol=1e-12)
        np.testing.assert_allclose(curve.response_time[n], ref.response_time[0], rtol=1e-12)
        np.testing.assert_allclose(curve.utilization[n], ref.utilization[:, 0], rtol=1e-12)
    # population 0: nobody, no throughput, residence = demand
    assert curve.throughput[0] == 0.0
    np.testing.assert_array_equal(curve.residence_time[0], D)
    # Little's law along the whole curve
    n = np.arange(401)
    np.testing.assert_allclose(curve.throughput * (curve.response_time + Z), n, rtol=1e-12)


def test_mva_curve_matches_line_solver():
    D, Z = np.array([[0.0048], [0.0036]]), 0.5
    curve = mva_curve(D[:, 0], 150, Z)
    for n in (1, 20, 100, 150):
        XN, _, QN, _, RN, _, _ = pfqn_mva(D, [n], [Z])
        np.testing.assert_allclose(curve.throughput[n], XN[0, 0], rtol=1e-10)
        np.testing.assert_allclose(curve.residence_time[n], RN[:, 0], rtol=1e-10)


def test_mva_curve_with_a_delay_station():
    D, Z = np.array([0.02, 0.5, 0.01]), 1.0
    servers = [1, math.inf, 1]
    curve = mva_curve(D, 60, Z, servers)
    assert not curve.approximate
    for n in (1, 10, 60):
        ref = mva(D[:, None], [n], [Z], servers)
        np.testing.assert_allclose(curve.throughput[n], ref.throughput[0], rtol=1e-12)
        np.testing.assert_allclose(curve.residence_time[n], ref.residence_time[:, 0],
                                   rtol=1e-12)


def test_mva_curve_stops_at_the_response_time_target():
    D, Z = np.array([0.0048, 0.0036]), 0.5
    full = mva_curve(D, 3000, Z)
    stopped = mva_curve(D, 3000, Z, stop_response_time=0.3)
    first = int(np.nonzero(full.response_time > 0.3)[0][0])
    assert stopped.stopped and not full.stopped
    assert stopped.max_population == first
    assert stopped.response_time[-1] > 0.3 >= stopped.response_time[-2]
    np.testing.assert_array_equal(stopped.throughput, full.throughput[:first + 1])
    np.testing.assert_array_equal(stopped.residence_time, full.residence_time[:first + 1])
    # a target never reached: the whole curve, not flagged
    assert not mva_curve(D, 100, Z, stop_response_time=10.0).stopped
    with pytest.raises(ValueError, match="stop_response_time"):
        mva_curve(D, 10, Z, stop_response_time=math.nan)


def test_mva_curve_multiserver_is_flagged_approximate_and_close():
    """Seidmann's approximation for a 4-core tier: throughput within 5% of the exact
    load-dependent MVA across light, knee and saturated loads (measured: at most 3.7%, at n=10,
    the knee)."""
    D, Z, servers = np.array([0.4, 0.1, 0.05]), 1.0, np.array([4, 1, 2])
    curve = mva_curve(D, 80, Z, servers)
    assert curve.approximate
    for n in (1, 3, 10, 20, 40, 80):
        ref = mva(D[:, None], [n], [Z], servers)
        np.testing.assert_allclose(curve.throughput[n], ref.throughput[0], rtol=0.05)
    np.testing.assert_allclose(curve.utilization[80], curve.throughput[80] * D / servers,
                               rtol=1e-12)
    assert np.all(curve.utilization <= 1 + 1e-12)


def test_mva_curve_rejects_bad_population():
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="max_population"):
            mva_curve([0.1], bad)


# --------------------------------------------------------------------------------------------
# SystemState / Pipeline on the simulated shop
# --------------------------------------------------------------------------------------------

def test_every_window_gives_one_estimate_numbered_per_tier(records, baseline):
    pipeline, outs, _ = baseline
    assert all(len(o.estimates) == 1 and not o.deadletter for o in outs)
    seqs: dict[str, list[int]] = {}
    for rec, out in zip(records, outs):
        est = out.estimates[0]
        w = parse_window(rec)
        assert (est["system"], est["tier"], est["end"]) == ("shop", w.tier, w.end)
        assert est["late"] is False
        seqs.setdefault(est["tier"], []).append(est["seq"])
    assert seqs == {"front": list(range(1, 121)), "db": list(range(1, 121))}
    assert pipeline.records == 240 and pipeline.rejected == 0
    state = pipeline.systems["shop"]
    assert list(state.tiers) == ["front", "db"]
    assert [t.windows for t in state.tiers.values()] == [120, 120]


def test_solves_happen_on_event_time_boundaries(records, config, baseline):
    pipeline, outs, final = baseline
    offset = solve_offset("shop", config.system("shop"))
    assert offset == pipeline.systems["shop"].solve_offset == 0     # the demo's, on the minute
    ends = [parse_window(r).end for r in records]
    times = []
    for i, out in enumerate(outs):
        for pred in out.predictions:
            t = pred["time"]
            times.append(t)
            assert (t - offset) % 60 == 0
            # solved when the first window past the boundary arrived, over the windows before
            assert ends[i] > t and max(ends[:i]) <= t
    # windows end 10:00:05 .. 10:10:00: boundaries 10:01 .. 10:09 in-stream, 10:10 at finish
    assert times == [START + 60 * k for k in range(1, 10)]
    assert [p["solve"] for o in outs for p in o.predictions] == list(range(1, 10))
    assert len(final.predictions) == 1
    assert final.predictions[0]["time"] == START + 600 and final.predictions[0]["final"]
    # every in-stream solve had data: a model, users measured, a capacity
    for pred in (p for o in outs for p in o.predictions):
        assert pred["model"] == "mva" and pred["users_source"] == "measured"
        assert pred["capacity_users"] > pred["users"] > 0
    # a second finish has nothing left to solve
    assert pipeline.finish().predictions == []


def test_solve_offsets_spread_systems_over_the_interval_and_can_be_pinned():
    names = [f"sys-{i}" for i in range(200)]
    offsets = [solve_offset(n, SystemConfig()) for n in names]
    assert offsets == [solve_offset(n, SystemConfig()) for n in names]       # stable
    assert all(o == int(o) and 0 <= o < 60 for o in offsets)
    # spread: every 10-s sixth of the minute holds between 1/12 and 1/3 of 200 systems
    assert all(200 / 12 < sum(lo <= o < lo + 10 for o in offsets) < 200 / 3
               for lo in range(0, 60, 10))
    assert {solve_offset(n, SystemConfig(solve_offset_s=0.0)) for n in names} == {0.0}
    assert solve_offset("a", SystemConfig(solve_interval_s=30.0, solve_offset_s=45.0)) == 15.0
    # pinned at 0: boundaries on the multiples of the interval; the first at least half an
    # interval after the system's first window (1020 would cover 20 s)
    state = SystemState("shop", SystemConfig(solve_offset_s=0.0))
    record = {"system": "shop", "tier": "db", "end": 1000.0, "window_s": 5.0,
              "utilization": 0.5, "cores": 1, "completions": {"a": 10}}
    window = parse_window(record)
    assert state.admit(window)[3] is None and state.next_solve == 1080.0
    # offset 7 s: boundaries at 7 s past the minutes; the first window past one reports it
    state = SystemState("shop", SystemConfig(solve_offset_s=7.0))
    assert state.admit(window)[3] is None and state.next_solve == 1087.0
    later = parse_window({**record, "end": 1090.0})
    assert state.admit(later)[3] == 1087.0 and state.next_solve == 1147.0


def _every_tenth_again(records, again):
    """The trace with ``again(record)`` right after every tenth record."""
    out = []
    for i, rec in enumerate(_fresh(records)):
        out.append(rec)
        if i % 10 == 0:
            out.append(again(rec))
    return out


def test_replays_are_skipped_counted_and_change_nothing(records, config, baseline):
    """A window sent again unchanged (or read again after a worker's crash) is a replay:
    skipped and counted, not dead-lettered, and the outputs are those of the trace without
    it."""
    def again(rec):
        rec = copy.deepcopy(rec)
        rec["completions"] = dict(reversed(list(rec["completions"].items())))
        return rec                                       # key order is not content

    resent = _every_tenth_again(records, again) + [copy.deepcopy(records[0])]  # much later
    pipeline, outs = run(resent, config)
    out, base, base_final = merged(outs), merged(baseline[1]), baseline[2]
    assert not out.deadletter and pipeline.rejected == 0 and pipeline.replays == 25
    assert out.estimates == base.estimates
    assert out.predictions == base.predictions
    assert out.alerts == base.alerts
    assert pipeline.finish().predictions == base_final.predictions
    tiers = pipeline.systems["shop"].tiers.values()
    assert sum(t.replays for t in tiers) == 25 and sum(t.duplicates for t in tiers) == 0


def test_duplicates_with_other_content_are_dead_lettered_and_change_nothing(records, config,
                                                                              baseline):
    """A window whose ``(system, tier, end)`` was applied but whose content differs is a
    conflicting duplicate: dead-lettered (``duplicate ... with other content``), never
    counted twice."""
    def changed(rec):
        return {**copy.deepcopy(rec), "utilization": round(rec["utilization"] * 0.5, 6)}

    pipeline, outs = run(_every_tenth_again(records, changed), config)
    out, base, base_final = merged(outs), merged(baseline[1]), baseline[2]
    assert len(out.deadletter) == 24 and pipeline.rejected == 24 and pipeline.replays == 0
    for dead in out.deadletter:
        assert dead["field"] == "end"
        assert dead["reason"].startswith("duplicate") and "with other content" in dead["reason"]
        assert dead["record"] == parse_window(dead["record"]).to_record()
    assert out.estimates == base.estimates
    assert out.predictions == base.predictions
    assert out.alerts == base.alerts
    assert pipeline.finish().predictions == base_final.predictions
    assert sum(t.duplicates for t in pipeline.systems["shop"].tiers.values()) == 24


def test_a_state_saved_without_digests_dead_letters_repeats_as_duplicates(config):
    """Ends restored from a state saved before content digests have no digest: a window
    repeating one is a ``duplicate`` (as before), not a replay."""
    from streams.core.tier import TierState

    tier = TierState("front", config.system("shop"))
    w = parse_window({"system": "shop", "tier": "front", "end": 1000.0, "window_s": 5.0,
                      "utilization": 0.5, "cores": 1, "completions": {"home": 10}})
    assert tier.admit(w)[0] is None
    saved = tier.to_dict()
    del saved["digests"]
    old = TierState.from_dict(saved, config.system("shop"))
    assert old.admit(w)[0].startswith("duplicate: window")
    assert TierState.from_dict(tier.to_dict(), config.system("shop")).admit(w)[0] == "replay"


def test_windows_older_than_the_dedup_memory_are_rejected_as_too_late(records, config):
    cfg = replace(config, systems={"shop": replace(config.system("shop"), dedup_windows=4)})
    pipeline, outs = run(_fresh(records[:40]) + [copy.deepcopy(records[0])], cfg)
    dead = outs[-1].deadletter
    assert len(dead) == 1 and dead[0]["field"] == "end"
    assert dead[0]["reason"].startswith("too late")
    assert pipeline.systems["shop"].tiers["front"].duplicates == 0


def test_out_of_order_windows_are_applied_and_flagged_late(records, config, baseline):
    swapped = _fresh(records)
    # front windows ending 10:01:20 and 10:01:25 (same solve interval) arrive swapped
    assert swapped[30]["tier"] == swapped[32]["tier"] == "front"
    swapped[30], swapped[32] = swapped[32], swapped[30]
    pipeline, outs = run(swapped, config)
    ests = [e for o in outs for e in o.estimates]
    assert len(ests) == 240 and not any(o.deadletter for o in outs)
    late = [e for e in ests if e["late"]]
    assert len(late) == 1
    assert late[0]["tier"] == "front" and late[0]["end"] == START + 80
    assert pipeline.systems["shop"].tiers["front"].late == 1
    # the db tier did not see the swap; predictions are still one per boundary
    _, base_outs, _ = baseline
    base_db = [e for o in base_outs for e in o.estimates if e["tier"] == "db"]
    assert [e for e in ests if e["tier"] == "db"] == base_db
    assert [p["time"] for o in outs for p in o.predictions] == \
        [p["time"] for o in base_outs for p in o.predictions]


def test_one_window_stamped_in_epoch_milliseconds_does_not_stop_the_solves(records, config,
                                                                          baseline):
    """A producer that once sends ``end`` in epoch milliseconds (1.795e12, year ~58,800) must
    not freeze the system: the window is dead-lettered (``end`` beyond the year 5000), the
    following windows still solve at the usual boundaries and none is flagged late. (Before
    the contract bound, the bogus end moved the solve timer out of reach for good.)"""
    _, base_outs, _ = baseline
    recs = _fresh(records)
    bogus = copy.deepcopy(recs[100])                    # front, 10:04:15
    bogus["end"] = (START + 255) * 1000.0
    recs.insert(101, bogus)
    _, outs = run(recs, config)
    assert outs[101].deadletter and outs[101].deadletter[0]["field"] == "end"
    normal = [o for i, o in enumerate(outs) if i != 101]
    assert [p["time"] for o in normal for p in o.predictions] == \
        [p["time"] for o in base_outs for p in o.predictions]
    assert not any(e["late"] for o in normal for e in o.estimates)


def test_unknown_tier_is_dead_lettered_when_tiers_are_configured(records, config):
    stray = copy.deepcopy(records[10])
    stray["tier"] = "cache"
    pipeline, outs = run(_fresh(records[:10]) + [stray], config)
    out = outs[-1]
    assert out.estimates == [] and len(out.deadletter) == 1
    dead = out.deadletter[0]
    assert dead["field"] == "tier" and "cache" in dead["reason"]
    assert dead["tier"] == "cache" and dead["system"] == "shop"
    assert list(pipeline.systems["shop"].tiers) == ["front", "db"]
    # without configured tiers, any tier is accepted in order of first appearance
    open_pipeline, outs = run([stray] + _fresh(records[:4]), Config())
    assert all(len(o.estimates) == 1 for o in outs)
    assert list(open_pipeline.systems["shop"].tiers) == ["cache", "front", "db"]


def test_a_class_appearing_mid_stream_is_tracked(records, config):
    recs = _fresh(records)
    for rec in recs[120:]:                           # from 10:05:05 on
        rec["completions"]["checkout"] = 4
        rec["response_time_s"]["checkout"] = 0.02
    pipeline, outs = run(recs, config)
    assert not any(o.deadletter for o in outs)
    ests = [o.estimates[0] for o in outs]
    old = ["best_sellers", "home", "product_detail", "search"]
    assert all(sorted(e["demands"]) == old for e in ests[:120])
    assert all(sorted(e["demands"]) == sorted(old + ["checkout"]) for e in ests[120:])
    assert all(e["demands"]["checkout"] >= 0 and math.isfinite(e["demands"]["checkout"])
               for e in ests[120:])
    for tier in pipeline.systems["shop"].tiers.values():
        assert tier.classes == old + ["checkout"]
        assert list(tier.kalman.classes) == old + ["checkout"]
        X = tier.history.arrays(5).completions
        assert X.shape == (120, 5)
        assert np.all(X[:60, 4] == 0) and np.all(X[60:, 4] == 4)
    preds = [p for o in outs for p in o.predictions]
    before = [p for p in preds if p["time"] <= START + 300]
    after = [p for p in preds if p["time"] > START + 300]
    assert before and after
    assert all("checkout" not in p["classes"] for p in before)
    for p in after:
        assert "checkout" in p["classes"]
        assert p["classes"]["checkout"]["sla_s"] == 0.3
        assert p["classes"]["checkout"]["throughput_measured"] == pytest.approx(4 / 5.0)
        assert math.isfinite(p["classes"]["checkout"]["response_time"])


def _continue(state_dict, config, rest, chunks=None):
    pipeline = Pipeline(config)
    pipeline.systems["shop"] = SystemState.from_dict(state_dict, config.system("shop"), chunks)
    outs = [pipeline.process(r) for r in rest]
    return outs, pipeline.finish()


def _compare_runs(outs_a, final_a, outs_b, final_b):
    assert len(outs_a) == len(outs_b)
    for a, b in zip(outs_a, outs_b):
        for topic in ("estimates", "predictions", "alerts", "deadletter"):
            assert_close(getattr(a, topic), getattr(b, topic), topic)
    assert_close(final_a.predictions, final_b.predictions, "final")


@pytest.mark.parametrize("split", [130, 170])
def test_state_round_trip_mid_stream_with_remediation_continues_identically(records, config,
                                                                            split):
    """The same round trip under a 15 ms SLA, between solves at risk: the remediation's
    searches start from the persisted hints, so the restored state's remediations (values,
    capacities) are the uninterrupted run's."""
    tight = _tight(config)
    base, base_outs = run(_fresh(records), tight)
    assert base.systems["shop"].remediation_hints     # at risk before the final solve
    base_final = base.finish()
    pipeline, _ = run(_fresh(records[:split]), tight)
    data = json.loads(json.dumps(pipeline.systems["shop"].to_dict(), allow_nan=False))
    assert data["remediation_hints"]
    outs, final = _continue(data, tight, _fresh(records[split:]))
    _compare_runs(base_outs[split:], base_final, outs, final)
    assert any(p.get("remediation") for o in outs for p in o.predictions)


@pytest.mark.slow
@pytest.mark.parametrize("split", [1, 37, 101, 118, 119, 200])
def test_state_round_trip_mid_stream_continues_identically(records, config, baseline, split):
    """to_dict -> JSON -> from_dict at ``split`` (mid-interval, between the two tiers of one
    window, just before and after a solve) then the rest of the trace: the same estimates,
    predictions and alerts as the uninterrupted run."""
    _, base_outs, base_final = baseline
    pipeline, _ = run(_fresh(records[:split]), config)
    state = pipeline.systems["shop"]
    data = json.loads(json.dumps(state.to_dict(), allow_nan=False))
    again = SystemState.from_dict(data, config.system("shop"))
    assert_close(again.to_dict(), state.to_dict())
    outs, final = _continue(data, config, _fresh(records[split:]))
    _compare_runs(base_outs[split:], base_final, outs, final)


@pytest.mark.slow
@pytest.mark.parametrize("split", [37, 101, 200])
def test_state_round_trip_with_header_and_incremental_chunks(records, config, monkeypatch,
                                                             split):
    """The durable-store path: to_dict(with_history=False) plus the chunks accumulated from
    history.take_changes() after every record. Small chunks (8 windows) and a 16-window history
    make chunks get written, rewritten and dropped along the way."""
    monkeypatch.setattr(history_module, "CHUNK", 8)
    cfg = replace(config, systems={"shop": replace(config.system("shop"), history=16,
                                                   regression_windows=8)})
    pipeline_a, outs_a = run(_fresh(records), cfg)
    final_a = pipeline_a.finish()

    pipeline = Pipeline(cfg)
    store: dict[str, dict[int, dict]] = {}
    drops = 0
    for rec in _fresh(records[:split]):
        pipeline.process(rec)
        for name, tier in pipeline.systems["shop"].tiers.items():
            written, dropped = tier.history.take_changes()
            chunks = store.setdefault(name, {})
            for k in dropped:
                del chunks[k]
            # kept as JSON (object keys are strings), read back with int chunk numbers
            chunks.update({int(k): v for k, v in json.loads(json.dumps(written)).items()})
            drops += len(dropped)
    if split > 40:
        assert drops > 0
    header_only = json.loads(json.dumps(pipeline.systems["shop"].to_dict(with_history=False)))
    assert all("rows" not in t["history"] for t in header_only["tiers"])
    outs, final = _continue(header_only, cfg, _fresh(records[split:]), chunks=store)
    _compare_runs(outs_a[split:], final_a, outs, final)


def _eventful(records):
    """The trace with a duplicate, a late window, a new class mid-stream and an invalid record
    mixed in (everything a batch boundary could separate)."""
    recs = _fresh(records)
    recs.insert(50, copy.deepcopy(recs[40]))                         # replay
    recs.insert(60, {**copy.deepcopy(recs[45]), "users": 1})          # duplicate
    recs.insert(90, recs.pop(80))                                    # late
    for r in recs[150:]:
        if r["tier"] == "db":
            r["completions"]["refund"] = 3                           # new class
    recs.insert(120, b'{"system": "shop", "tier": "db"')             # malformed
    return recs


@pytest.mark.parametrize("chunk", [2, 37, 1000])
def test_batches_give_exactly_the_outputs_of_record_by_record_processing(records, config, chunk):
    """``process_many`` over any batching equals ``process`` record by record, output for
    output and in order (both shells rely on it: the embedded runner feeds chunks, the worker
    the batches its agent takes)."""
    recs = _eventful(records)
    one, outs = run(recs, config)
    want = merged(outs)
    many = Pipeline(config)
    got = Outputs()
    for i in range(0, len(recs), chunk):
        got.extend(many.process_many(recs[i:i + chunk]))
    assert want.deadletter and want.predictions and want.alerts is not None
    for name in ("estimates", "predictions", "alerts", "deadletter"):
        assert getattr(got, name) == getattr(want, name), name
    assert many.finish() == one.finish()


def test_state_from_header_without_chunks_is_refused(records, config):
    pipeline, _ = run(_fresh(records[:20]), config)
    header_only = pipeline.systems["shop"].to_dict(with_history=False)
    with pytest.raises(ValueError, match="chunk"):
        SystemState.from_dict(header_only, config.system("shop"))


GARBAGE = [b"\xff\xfe\x00", b"", b"[1, 2]", "", "   ", "null", "{", "[]", "42", 42, 3.5, -1,
           True, None, [1, 2, 3], ("a", "b"), {1, 2}, object(), b"\x00" * 10,
           "[" * 50_000, '{"x": ' + "1" * 5000 + "}"]


@pytest.mark.parametrize("raw", GARBAGE, ids=[repr(g)[:20] for g in GARBAGE])
def test_pipeline_never_raises_on_garbage(raw, config):
    pipeline = Pipeline(config)
    out = pipeline.process(raw)
    assert out.estimates == out.predictions == out.alerts == []
    assert len(out.deadletter) == 1 and out.deadletter[0]["field"] == "record"
    json.dumps(out.deadletter[0].to_record(), allow_nan=False)
    assert pipeline.rejected == 1 and pipeline.systems == {}
    assert len(out.deadletter[0]["raw"]) <= 4096 * 3


def test_pipeline_dead_letters_invalid_mappings_as_json(config):
    pipeline = Pipeline(config)
    bad = [{"system": "shop", "tier": "db", "end": 10, "window_s": 5,
            "utilization": float("nan"), "completions": {"a": 1}},
           {"system": "shop", "tier": "db", "end": 10, "window_s": float("inf"),
            "utilization": 0.5, "completions": {"a": 1}},
           {"system": "shop"}, {}]
    out = pipeline.process_many(bad)
    assert [d["field"] for d in out.deadletter] == ["utilization", "window_s", "tier",
                                                    "system"]
    assert out.deadletter[0]["value"] == "NaN"
    for dead in out.deadletter:
        json.dumps(dead.to_record(), allow_nan=False)


# --------------------------------------------------------------------------------------------
# schema, store, embedded runner
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def all_outputs(records, config):
    """A short run with every kind of output: estimates, predictions, an alert (model error
    fires at 10:04), dead letters."""
    pipeline = Pipeline(config)
    stray = copy.deepcopy(records[3])
    stray["tier"] = "cache"
    out = pipeline.process_many(_fresh(records) + [b"\xff", stray,
                                                   {**copy.deepcopy(records[0]), "users": 1}])
    out.extend(pipeline.finish())
    assert out.alerts and out.deadletter
    tight = Pipeline(_tight(config))                # a 15 ms SLA: solves at risk, remediation
    out.predictions += tight.process_many(_fresh(records)).predictions
    assert any(p.get("remediation") for p in out.predictions)
    pooled = Pipeline(_pooled(config))              # a pool over both tiers: pool points
    out.predictions += pooled.process_many(_fresh(records[:120])).predictions
    assert any(p.get("pools") for p in out.predictions)
    return out


def _pooled(config):
    """``config`` with a pool of 8 threads on front held across front and db."""
    from streams.core.config import Pool
    return replace(config, systems={k: replace(v, pools={"threads": Pool(
        "front", 8, ("front", "db"))}) for k, v in config.systems.items()})


def _tight(config):
    """``config`` with a 15 ms SLA for every class: every solve of the trace is at risk (it is
    solved by MVA, its burstiness not yet measured, which puts the shop's response time at
    9-14 ms for 20-40 users with the true demands; at 20 ms the first six solves were not at
    risk and the state at records 130 and 170 had no remediation hints), and a 5-minute
    horizon: the users ramp 20 -> 40 in the trace's last 4 minutes, which the users trend
    reads at its slope (~5 users a minute), so 15 minutes ahead it expects 89 users, which
    no scaling action serves (only admission: no hints to persist)."""
    return replace(config, systems={k: replace(v, sla_s={"*": 0.015}, horizon_s=300.0)
                                    for k, v in config.systems.items()})


_TYPES = {"float": float, "int": int, "bool": bool, "str": str}


def test_points_follow_the_schema(all_outputs):
    pts = points(all_outputs, deadletter_time=1_800_000_000.0)
    kinds = Counter(p.measurement for p in pts)
    assert set(kinds) == set(MEASUREMENTS)
    assert kinds["tier_estimate"] == len(all_outputs.estimates)
    assert kinds["prediction"] == len(all_outputs.predictions)
    assert kinds["alert"] == len(all_outputs.alerts)
    assert kinds["deadletter"] == len(all_outputs.deadletter) == 3
    for p in pts:
        tags, fields = MEASUREMENTS[p.measurement]
        assert set(p.tags) <= set(tags), p
        assert all(isinstance(v, str) for v in p.tags.values()), p
        assert p.fields and set(p.fields) <= set(fields), p
        for name, value in p.fields.items():
            assert value is not None, (p.measurement, name)
            assert type(value) is _TYPES[fields[name]], (p.measurement, name, value)
            if isinstance(value, float):
                assert math.isfinite(value), (p.measurement, name)
        assert isinstance(p.time, float) and math.isfinite(p.time)
    assert all(set(p.tags) == {"system", "tier"} for p in pts if p.measurement == "tier_estimate")
    # without a wall-clock stamp, dead letters are not points
    assert "deadletter" not in {p.measurement for p in points(all_outputs)}


def test_influx_lines_are_the_line_protocol_of_the_points(all_outputs):
    """The worker formats its InfluxDB lines straight from the records (``influx.lines``);
    they must be exactly the line protocol of ``schema.points`` (what the SQLite store gets)."""
    from streams.sinks.influx import line_protocol, lines

    for stamp in (None, 1_800_000_000.0):
        want = [line_protocol(p) for p in points(all_outputs, deadletter_time=stamp)]
        assert lines(all_outputs, deadletter_time=stamp) == want
    odd = Outputs(estimates=[TierEstimate(system="a b,c=d", tier="t\\x", end=1.5, seq=2,
                                          utilization=0.25, late=True, demands={},
                                          demand_std={}, kalman_flag=None,
                                          change_detected=False, idc=None)],
                  deadletter=[DeadLetter(system="s", field="end", reason='bad "end"\nhere',
                                         value=None)])
    assert lines(odd, deadletter_time=2.0) == [line_protocol(p)
                                               for p in points(odd, deadletter_time=2.0)]
    # a backslash is not doubled: InfluxDB keeps every backslash that does not escape a comma,
    # equals sign or space: "t\\x" is stored and found as "t\\x" (tests/test_influx_escaping.py)
    assert lines(odd)[0].startswith("tier_estimate,system=a\\ b\\,c\\=d,tier=t\\x ")


def test_sqlite_store_writes_and_reads_back_every_measurement(all_outputs, tmp_path):
    pts = points(all_outputs, deadletter_time=1_800_000_000.0)
    store = SQLiteStore(tmp_path / "p.sqlite")
    try:
        assert store.write(pts) == len(pts)
        by_kind: dict[str, list] = {}
        for p in pts:
            by_kind.setdefault(p.measurement, []).append(p)
        for name, (tags, fields) in MEASUREMENTS.items():
            rows = store.query(f'SELECT * FROM "{name}" ORDER BY rowid')
            assert len(rows) == len(by_kind[name]), name
            for row, p in zip(rows, by_kind[name]):
                assert row["time"] == p.time
                for t in tags:
                    assert row[t] == p.tags.get(t)
                for f, kind in fields.items():
                    want = p.fields.get(f)
                    got = row[f]
                    if kind == "bool" and want is not None:
                        want = int(want)
                    assert got == want, (name, f)
        rows = store.query('SELECT COUNT(*) AS n FROM "tier_estimate" WHERE tier = ?', ["db"])
        assert rows[0]["n"] == 120
    finally:
        store.close()


def test_run_embedded_writes_json_lines_and_the_store(records, config, tmp_path):
    lines = [json.dumps(r) for r in records] + ["not json", json.dumps(records[5]),
                                                json.dumps({**records[6], "users": 1})]
    out_dir = tmp_path / "out"
    summary = run_embedded(lines, config, out_dir)
    assert (summary.records, summary.estimates, summary.deadletter, summary.replays) \
        == (243, 240, 2, 1)
    assert summary.predictions == 10                 # 9 in-stream + the final solve
    written = {}
    for topic, name in OUTPUT_FILES.items():
        path = out_dir / name
        assert path.exists(), name
        text = path.read_text(encoding="utf-8").splitlines()
        written[topic] = [json.loads(line, parse_constant=lambda c: pytest.fail(c))
                          for line in text]
        assert len(written[topic]) == getattr(summary, topic), topic
    assert [d["field"] for d in written["deadletter"]] == ["record", "end"]
    assert written["predictions"][-1]["final"] is True
    db = out_dir / STORE_NAME
    assert db.exists()
    conn = sqlite3.connect(db)
    try:
        counts = {name: conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]
                  for name in MEASUREMENTS}
    finally:
        conn.close()
    assert counts["tier_estimate"] == 240 and counts["prediction"] == 10
    assert counts["deadletter"] == 2 and counts["alert"] == summary.alerts
    assert sum(counts.values()) == summary.points
    # a second run into the same directory starts afresh
    again = run_embedded(lines[:20], config, out_dir, final_solve=False)
    assert again.predictions == 0
    conn = sqlite3.connect(db)
    try:
        assert conn.execute('SELECT COUNT(*) FROM "tier_estimate"').fetchone()[0] == 20
    finally:
        conn.close()
    assert len((out_dir / OUTPUT_FILES["estimates"]).read_text().splitlines()) == 20


class _RecordingTable:
    """Stands in for a Faust table in a unit test: its ``data`` dict (the real table and its
    changelog are exercised against Kafka in tests/test_pipeline_services.py)."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}


def test_worker_state_survives_a_rebalance_in_the_middle_of_a_batch(records, config):
    """A partition revocation (``forget``) arriving while a batch is between processing and
    persisting is deferred until the batch is persisted; the systems then reload from the
    table with every window of the batch (same estimates afterwards as without it)."""
    import json as _json

    from streams.engine.pipeline import Pipeline as _Pipeline
    from streams.engine.table_pipeline import TableBackedPipeline

    table = _RecordingTable()
    core = TableBackedPipeline(config, table)
    reference = _Pipeline(config)
    raw = [_json.dumps(r).encode() for r in _fresh(records)]
    half = len(raw) // 2
    core.begin()
    for value in raw[:half]:
        core.process_batch([value], [1])
        reference.process(value)
    core.forget()                                   # rebalance mid-batch: deferred
    assert core.systems and core.forget_pending
    writes = core.persist()
    assert not core.systems and not core.forget_pending
    assert writes and all(part == 1 for part, _, _ in writes)
    assert all(table.data[key] == value for _, key, value in writes)
    for value in raw[half:]:
        got = core.process_batch([value], [1])
        want = reference.process(value)
        assert_close(got.estimates, want.estimates)
        assert_close(got.predictions, want.predictions)


def test_table_values_round_trip_bit_for_bit_and_json_values_of_older_workers_load():
    """The worker's table values are MessagePack (floats as their 8 bytes); values written as
    JSON by workers before the switch still load."""
    import struct

    import msgspec

    from streams.engine.table_pipeline import pack as _pack, unpack as _unpack

    value = {"x": [0.1, 1 / 3, 5e-324, -0.0, 1.7976931348623157e308], "n": [3, -1],
             "s": "sys\x1fdb", "none": None, "nested": {"rows": [[1.0, 2.5]]}}
    back = _unpack(_pack(value))
    assert back == value
    assert [struct.pack("<d", v) for v in back["x"]] == [struct.pack("<d", v) for v in value["x"]]
    assert _pack(value)[:1] != b"{"
    assert _unpack(msgspec.json.encode(value)) == value


def test_a_tier_a_later_window_of_the_batch_adds_is_not_in_an_earlier_solve():
    """Found by tests/test_fuzz.py: a solve due in the middle of a batch covered the tiers
    that windows *after* it in the batch had added (created when they were admitted), so a
    batch gave other predictions than the same windows one by one (``not enough data`` for a
    tier without windows yet, or that tier refreshed early)."""
    import json as _json
    from streams.engine.pipeline import Pipeline as _Pipeline
    from streams.engine.system import Outputs as _Outputs

    def rec(tier, end, window_s, completions, util, **more):
        return {"system": "s", "tier": tier, "end": end, "window_s": window_s,
                "utilization": util, "completions": completions, **more}

    records = [rec("app", 1000.0, 1.0, {"home": 10.0, "buy": 16.0}, 0.11, users=27),
               rec("db", 1100.0, 5.0, {"home": 65.0, "buy": 10.0}, 0.04),
               rec("front", 1105.0, 5.0, {"home": 45.0, "buy": 75.0}, 0.0,
                   response_time_s={"home": 0.01})]
    whole = _Pipeline().process_many(records)
    one = _Pipeline()
    single = _Outputs()
    for r in records:
        single.extend(one.process_many([r]))
    assert whole.predictions and whole.predictions == single.predictions
    assert whole.estimates == single.estimates


def test_a_mix_without_demand_and_no_think_time_is_not_solved_into_nan():
    """Found by tests/test_fuzz.py: the classes of the interval's mix had no demand at any
    tier (the tier that served them idle, the busy tier's classes not in the mix) and the think
    time was 0, so MVA's throughput was infinite and every figure NaN (written as null)."""
    import warnings

    from streams.engine.pipeline import Pipeline as _Pipeline

    def rec(tier, end, util, cores, completions, **more):
        return {"system": "s", "tier": tier, "end": end, "window_s": more.pop("window_s", 60.0),
                "utilization": util, "cores": cores, "completions": completions,
                "response_time_s": {c: 0.01 for c in completions}, **more}

    records = [rec("app", 1795687630.0, 0.04, 64, {"home": 50.0}, window_s=5.0),
               rec("db", "2026-11-26T16:06:05Z", 0.0, 1,
                   {"search": 0.0, "a": 360.0, "b": 720.0}, users=1826),
               rec("db", "2026-11-26T16:08:05Z", 0.0, 1,
                   {"search": 540.0, "a": 900.0, "b": 240.0}, users=1828)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = _Pipeline().process_many(records)
    assert any(p["model"] is None and "no demand at any tier" in p["flags"][0]
               for p in out.predictions), out.predictions


@pytest.mark.slow
def test_jittering_window_lengths_keep_the_index_of_dispersion():
    """Window lengths that jitter by a few milliseconds (a converter's or a scrape's timing)
    still feed the tier's index of dispersion: the windows read the same I as with exact
    lengths (a tier once stayed 'too_short' for ever because only windows of exactly the
    newest length counted)."""
    rng = np.random.default_rng(5)
    ends, slow = 1500, np.zeros(1500, dtype=bool)
    state = False
    for k in range(ends):                          # on/off bursts lasting ~6 windows
        if rng.random() < (0.15 if state else 0.05):
            state = not state
        slow[k] = state
    done = rng.poisson(40, ends)
    busy = done * 0.01 * np.where(slow, 8.0, 1.0) * rng.gamma(20, 1 / 20, ends)
    jitter = rng.uniform(-0.01, 0.01, ends)

    def last_model(jittered: bool) -> dict:
        # solved every 15 minutes, not every minute: the index of dispersion is re-estimated
        # at each solve over the whole history, so the last one reads every window; the
        # open model's capacity searches of the solves in between checked nothing here
        pipe = Pipeline(Config(systems={"s": SystemConfig(tiers=("db",),
                                                          solve_interval_s=900.0)}))
        end = START
        records = []
        for k in range(ends):
            w = 5.0 + (jitter[k] if jittered else 0.0)
            end += w
            records.append({"system": "s", "tier": "db", "end": end, "window_s": w,
                            "utilization": min(busy[k] / w, 1.0),
                            "completions": {"a": int(done[k])}})
        out = pipe.process_many(records)
        est = [e for e in out.estimates if e["tier"] == "db"][-1]
        return est

    exact, jittered = last_model(False), last_model(True)
    assert exact["idc"] is not None and exact["idc"] > 10
    assert jittered["idc"] == pytest.approx(exact["idc"], rel=0.05)
    assert jittered.get("idc_flag") == exact.get("idc_flag")


def test_a_store_from_an_older_version_gains_the_new_columns(tmp_path):
    """A store whose ``prediction`` table predates some fields (and a tag) is opened and
    written to as it is: the missing columns are added, its old rows kept."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE "prediction" (time REAL NOT NULL, "model" TEXT)')
    conn.execute('INSERT INTO "prediction" VALUES (1.0, \'mva\')')
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    tags, fields = MEASUREMENTS["prediction"]
    assert store.write([Point("prediction", {"system": "shop"},
                              {"model": "map", "users": 20}, 2.0)]) == 1
    rows = [tuple(r) for r in store.query(
        'SELECT time, system, model, users FROM "prediction" ORDER BY time')]
    cols = {r[1] for r in store.query('PRAGMA table_info("prediction")')}
    store.close()
    assert rows == [(1.0, None, "mva", None), (2.0, "shop", "map", 20)]
    assert cols == {"time", *tags, *fields}
