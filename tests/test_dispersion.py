"""Index of dispersion from utilization and completion counts (estimators.dispersion).

Mi et al. (2008), Fig. 2 / §2.2. Validation: Poisson completions give I ~ 1; M/MAP(2)/1 queues whose
service MAP(2) has a known I (line_solver's ``map_idc``, and ``MAP.idc``) give I within +-20%.
All randomness is seeded.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# perfcast's packages before line_solver: importing line_solver puts its own package directory
# (which holds a ``solvers`` package) on sys.path, shadowing ours.
from estimators.dispersion import (  # isort: skip
    DispersionEstimate,
    DispersionTracker,
    index_of_dispersion,
)
from solvers.processes import MAP  # isort: skip
from solvers.simulation import monitor_windows, mtrace1  # isort: skip
from line_solver.api.mam.map_analysis import map_idc  # isort: skip  # noqa: E402

WINDOW_S = 20.0          # T = 20 mean service times
FIELDS = ("utilization", "completions", "window_s", "tol", "min_samples", "max_steps")
REASONS = {"ok", "no_busy_time", "no_completions", "no_variation", "too_short", "not_converged"}


def mmpp2(fast: float, slow: float, to_slow: float, to_fast: float) -> MAP:
    """MAP(2) service process with completion rate ``fast``/``slow`` in its two phases."""
    return MAP([[-fast - to_slow, to_slow], [to_fast, -slow - to_fast]],
               [[fast, 0.0], [0.0, slow]])


# Phases switch at rate ~0.4 per mean service time, i.e. ~8 times per window of T = 20.
MAP_I1 = mmpp2(1.5, 0.5, 2.0, 2.0)             # I = 1.125
MAP_I20 = mmpp2(6.7, 0.34, 0.36, 0.042)        # I = 19.74
MAP_I200 = mmpp2(45.0, 0.09, 0.39, 0.0082)     # I = 202.3


def queue_windows(process: MAP, windows: int, seed: int, window_s: float = WINDOW_S,
                  utilization: float = 0.7):
    """``windows`` monitoring windows of an M/MAP/1 FCFS queue at the given utilization."""
    rng = np.random.default_rng(seed)
    arrival_rate = utilization / process.mean
    jobs = int(windows * window_s * arrival_rate * 1.05) + 1000
    trace = mtrace1(arrival_rate, process.sample(jobs, rng), rng)
    win = monitor_windows(trace, window_s, end=windows * window_s)
    assert win.utilization.size == windows
    return win


def poisson_windows(windows: int, seed: int, rate_per_window: float = 20.0):
    """Poisson completions in busy time, ``n_k ~ Poisson(rate U_k)``; some idle or full windows."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(0.0, 1.0, windows)
    u[rng.random(windows) < 0.1] = 0.0
    u[rng.random(windows) < 0.1] = 1.0
    return u, rng.poisson(rate_per_window * u)


# --------------------------------------------------------------------------- definition
def _y_all_busy(n: np.ndarray, steps: int) -> float:
    """Y(jT) written out for fully busy windows (U_k = 1): runs are j whole windows."""
    k = n.size
    rate = n.sum() / k
    sums = [n[g:g + steps].sum() for g in range(k - steps + 1)]
    mean_square = sum((s - rate * steps) ** 2 for s in sums) / len(sums)
    return mean_square / (1.0 - steps / k) / (rate * steps)


def test_fully_busy_windows_match_the_definition_of_y():
    rng = np.random.default_rng(3)
    n = rng.negative_binomial(2, 0.1, 600).astype(float)   # over-dispersed counts
    est = index_of_dispersion(np.ones(600), n, 60.0, tol=1e-12, min_samples=50, max_steps=6)
    assert len(est.curve) == 6 and est.reason == "not_converged"
    for j, y in enumerate(est.curve, start=1):
        assert y == pytest.approx(_y_all_busy(n, j), rel=1e-10)
    assert est.value == est.curve[-1]
    assert est.t == 60.0 * len(est.curve)


def test_busy_time_not_wall_time_is_the_clock():
    # a window with U = 0.5 holds half a window of busy time: doubling every window's
    # utilization and completions, interleaved with idle windows, gives the same estimate
    rng = np.random.default_rng(4)
    n = rng.poisson(10.0, 2000)
    full = index_of_dispersion(np.ones(2000), n, 10.0)
    halves = np.repeat(n / 2.0, 2)
    split = index_of_dispersion(np.full(4000, 0.5), halves, 10.0)
    assert split.value == pytest.approx(full.value, rel=0.05)


def test_idle_windows_contribute_nothing():
    u, n = poisson_windows(3000, seed=5)
    base = index_of_dispersion(u, n, WINDOW_S)
    rng = np.random.default_rng(6)
    where = np.sort(rng.integers(0, u.size, 700))
    u_idle = np.insert(u, where, 0.0)
    n_idle = np.insert(n, where, 0)
    assert index_of_dispersion(u_idle, n_idle, WINDOW_S) == base


def test_window_length_only_scales_t():
    u, n = poisson_windows(2000, seed=7)
    a = index_of_dispersion(u, n, 5.0)
    b = index_of_dispersion(u, n, 60.0)
    assert a.curve == b.curve
    assert b.t == pytest.approx(a.t * 12.0)


def test_per_class_completions_are_summed():
    u, n = poisson_windows(2000, seed=8)
    rng = np.random.default_rng(9)
    per_class = np.array([rng.multinomial(c, [0.5, 0.3, 0.2]) for c in n])
    assert index_of_dispersion(u, per_class, WINDOW_S) == index_of_dispersion(u, n, WINDOW_S)
    one_class = index_of_dispersion(u, n[:, None], WINDOW_S)
    assert one_class == index_of_dispersion(u, n, WINDOW_S)


# --------------------------------------------------------------------------- Poisson: I = 1
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_poisson_completions_in_busy_time_give_one(seed):
    u, n = poisson_windows(5000, seed)
    est = index_of_dispersion(u, n, WINDOW_S)
    assert est.reason == "ok" and est.converged and not est.too_short
    assert est.value == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("utilization", [0.3, 0.7, 0.95])
def test_mm1_queue_gives_one(utilization):
    # exponential service through the M/Trace/1 queue: queueing must be masked out (§2.2)
    win = queue_windows(MAP.exponential(1.0), 5000, seed=11, window_s=10.0,
                        utilization=utilization)
    est = index_of_dispersion(win.utilization, win.completions, 10.0)
    assert est.reason == "ok"
    assert est.value == pytest.approx(1.0, abs=0.1)


def test_saturated_windows_poisson():
    rng = np.random.default_rng(12)
    est = index_of_dispersion(np.ones(3000), rng.poisson(30.0, 3000), WINDOW_S)
    assert est.reason == "ok"
    assert est.value == pytest.approx(1.0, abs=0.1)


# --------------------------------------------------------------------------- MAP(2) service
@pytest.mark.parametrize("process, level", [(MAP_I1, 1.0), (MAP_I20, 20.0), (MAP_I200, 200.0)])
def test_reference_idc_agrees_with_line_solver(process, level):
    ref = map_idc(process.D0, process.D1)
    assert process.idc == pytest.approx(ref, rel=1e-9)
    assert ref == pytest.approx(level, rel=0.15)


@pytest.mark.parametrize("process, windows, seeds", [
    (MAP_I1, 2_000, [0, 1, 2]),        # 28,000 jobs each
    (MAP_I20, 2_000, [0, 1, 2]),       # 28,000 jobs each
    (MAP_I200, 10_000, [0, 1]),        # 142,000 jobs each
], ids=["I~1", "I~20", "I~200"])
def test_map2_service_index_of_dispersion_within_20_percent(process, windows, seeds):
    ref = map_idc(process.D0, process.D1)
    for seed in seeds:
        win = queue_windows(process, windows, seed)
        est = index_of_dispersion(win.utilization, win.completions, WINDOW_S)
        assert est.converged, est
        assert abs(est.value / ref - 1.0) <= 0.20, (seed, est.value, ref)


def test_map2_i200_long_trace_is_tighter():
    # 40,000 windows (~570,000 jobs): the statistical error shrinks and what is left is the
    # stopping rule's bias (it stops at t = 2T, where Y(t) is ~6% below its limit for alpha T = 8)
    ref = map_idc(MAP_I200.D0, MAP_I200.D1)
    win = queue_windows(MAP_I200, 40_000, seed=21)
    est = index_of_dispersion(win.utilization, win.completions, WINDOW_S)
    assert est.converged
    assert -0.15 <= est.value / ref - 1.0 <= 0.05


def test_estimate_grows_with_burstiness():
    values = []
    for process in (MAP_I1, MAP_I20, MAP_I200):
        win = queue_windows(process, 3000, seed=31)
        values.append(index_of_dispersion(win.utilization, win.completions, WINDOW_S).value)
    assert values[0] < values[1] < values[2]
    assert values[1] > 5 * values[0] and values[2] > 5 * values[1]


# --------------------------------------------------------------------------- flagged results
def test_all_idle_trace_is_flagged():
    est = index_of_dispersion(np.zeros(500), np.zeros(500), WINDOW_S)
    assert est.reason == "no_busy_time" and est.too_short and not est.converged
    assert est.value == 1.0 and est.samples == 0 and est.flagged


def test_zero_completions_are_flagged():
    est = index_of_dispersion(np.full(500, 0.6), np.zeros((500, 2)), WINDOW_S)
    assert est.reason == "no_completions" and not est.too_short and est.value == 1.0


def test_constant_trace_is_flagged_with_zero_dispersion():
    est = index_of_dispersion(np.full(1000, 0.37), np.full(1000, 11), WINDOW_S)
    assert est.reason == "no_variation" and est.flagged
    assert est.value == 0.0


def test_empty_and_short_traces_are_too_short():
    empty = index_of_dispersion([], [], WINDOW_S)
    assert empty.too_short and empty.flagged and math.isfinite(empty.value)
    u, n = poisson_windows(120, seed=40)                    # ~60 T of busy time < 100 runs
    short = index_of_dispersion(u, n, WINDOW_S)
    assert short.reason == "too_short" and short.too_short and short.samples == 0


def test_trace_runs_out_before_convergence():
    # converging needs Y(2T) within 0.1% of Y(T); the trace allows t <= S/100 only
    u, n = poisson_windows(1000, seed=41)
    est = index_of_dispersion(u, n, WINDOW_S, tol=0.001)
    assert est.too_short and not est.converged and est.reason == "too_short"
    assert est.t <= u.sum() * WINDOW_S / 100
    assert est.value == est.curve[-1] and est.samples > 0


def test_cap_on_t_reports_non_convergence():
    u, n = poisson_windows(3000, seed=42)
    est = index_of_dispersion(u, n, WINDOW_S, tol=1e-6, max_steps=3)
    assert not est.converged and not est.too_short and est.reason == "not_converged"
    assert est.t == 3 * WINDOW_S and len(est.curve) == 3


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("field, kwargs, shown", [
    ("utilization", {"utilization": [0.5, 1.2]}, "1.2"),
    ("utilization", {"utilization": [0.5, -0.1]}, "-0.1"),
    ("utilization", {"utilization": [0.5, np.nan]}, "nan"),
    ("utilization", {"utilization": [[0.5, 0.5]]}, "(1, 2)"),
    ("utilization", {"utilization": ["a", "b"]}, "a"),
    ("completions", {"completions": [1.0, -3.0]}, "-3.0"),
    ("completions", {"completions": [1.0, np.inf]}, "inf"),
    ("completions", {"completions": [1.0, 2.0, 3.0]}, "(3,)"),
    ("completions", {"completions": np.ones((2, 2, 1))}, "(2, 2, 1)"),
    ("completions", {"completions": [1e300, 1e300]}, "1e+300"),
    ("window_s", {"window_s": 0.0}, "0.0"),
    ("window_s", {"window_s": -5}, "-5"),
    ("window_s", {"window_s": float("inf")}, "inf"),
    ("window_s", {"window_s": "60"}, "'60'"),
    ("tol", {"tol": 0.0}, "0.0"),
    ("tol", {"tol": 1.5}, "1.5"),
    ("tol", {"tol": float("nan")}, "nan"),
    ("min_samples", {"min_samples": 1}, "1"),
    ("min_samples", {"min_samples": 10.5}, "10.5"),
    ("min_samples", {"min_samples": True}, "True"),
    ("max_steps", {"max_steps": 1}, "1"),
])
def test_bad_input_names_the_field_and_value(field, kwargs, shown):
    args = {"utilization": [0.5, 0.5], "completions": [1.0, 2.0], "window_s": 10.0}
    args.update(kwargs)
    with pytest.raises(ValueError) as info:
        index_of_dispersion(**args)
    message = str(info.value)
    assert message.startswith(field + ":")
    assert shown in message


finite_u = st.floats(0.0, 1.0, allow_nan=False)
finite_n = st.one_of(st.integers(0, 10**6).map(float), st.floats(0.0, 1e6, allow_nan=False))


@st.composite
def traces(draw):
    k = draw(st.integers(0, 400))
    classes = draw(st.sampled_from([0, 1, 3]))           # 0: a 1-D array of totals
    u = draw(hnp.arrays(float, k, elements=finite_u))
    shape = (k,) if classes == 0 else (k, classes)
    n = draw(hnp.arrays(float, shape, elements=finite_n))
    if draw(st.booleans()):                               # idle windows complete nothing
        n[u == 0.0] = 0.0
    return u, n


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), window_s=st.floats(1e-3, 1e6), tol=st.floats(0.01, 0.99),
       min_samples=st.integers(2, 150))
def test_valid_input_never_gives_nan_or_raises(trace, window_s, tol, min_samples):
    u, n = trace
    est = index_of_dispersion(u, n, window_s, tol=tol, min_samples=min_samples)
    assert isinstance(est, DispersionEstimate)
    assert math.isfinite(est.value) and est.value >= 0.0
    assert math.isfinite(est.t) and est.t >= 0.0
    assert all(math.isfinite(y) and y >= 0.0 for y in est.curve)
    assert est.reason in REASONS
    assert est.flagged == (est.reason != "ok")
    assert est.converged or est.reason != "ok"
    if est.too_short:
        assert not est.converged


@st.composite
def traces_with_junk(draw):
    k = draw(st.integers(0, 50))
    u = draw(hnp.arrays(float, k, elements=st.floats(allow_nan=True, allow_infinity=True)))
    n = draw(hnp.arrays(float, draw(st.sampled_from([(k,), (k, 2), (k + 1,)])),
                        elements=st.floats(allow_nan=True, allow_infinity=True)))
    return u, n


@settings(max_examples=200, deadline=None)
@given(trace=traces_with_junk(),
       window_s=st.floats(allow_nan=True, allow_infinity=True),
       tol=st.floats(allow_nan=True, allow_infinity=True),
       min_samples=st.integers(-5, 200))
def test_any_input_gives_a_result_or_a_value_error_naming_the_field(trace, window_s, tol,
                                                                   min_samples):
    u, n = trace
    try:
        est = index_of_dispersion(u, n, window_s, tol=tol, min_samples=min_samples)
    except ValueError as exc:
        assert str(exc).split(":")[0] in FIELDS
    else:
        assert math.isfinite(est.value) and est.reason in REASONS


# --------------------------------------------------------------------------- the tracker
def _stream(windows: int, seed: int):
    win = queue_windows(MAP_I20, windows, seed)
    return win.utilization, win.completions


def test_tracker_equals_batch_on_its_history():
    u, n = _stream(3000, seed=50)
    tracker = DispersionTracker(WINDOW_S, history=1024)
    for k in range(u.size):
        tracker.update(float(u[k]), n[k].tolist())
        if k in (150, 1023, 1500, 2999):                # partly full, full, wrapped twice
            lo = max(0, k + 1 - 1024)
            batch = index_of_dispersion(u[lo:k + 1], n[lo:k + 1], WINDOW_S)
            assert tracker.estimate() == batch
            held_u, held_n = tracker.windows()
            np.testing.assert_array_equal(held_u, u[lo:k + 1])
            np.testing.assert_array_equal(held_n, n[lo:k + 1].sum(axis=1))
    assert len(tracker) == 1024
    assert tracker.estimate().reason == "ok"


def test_tracker_state_round_trips_through_json():
    u, n = _stream(1500, seed=51)
    tracker = DispersionTracker(WINDOW_S, history=700, tol=0.15, min_samples=50)
    for k in range(1000):
        tracker.update(float(u[k]), int(n[k].sum()))
    restored = DispersionTracker.from_dict(json.loads(json.dumps(tracker.to_dict())))
    assert restored.estimate() == tracker.estimate()
    for k in range(1000, 1500):                          # both continue identically
        tracker.update(float(u[k]), int(n[k].sum()))
        restored.update(float(u[k]), int(n[k].sum()))
    assert restored.to_dict() == tracker.to_dict()
    assert restored.estimate() == tracker.estimate()


def test_tracker_accepts_counts_per_class_in_any_form():
    forms = [7, 7.0, np.int64(7), [3, 4], (3.0, 4.0), np.array([3, 4]), {"home": 3, "buy": 4}]
    for form in forms:
        tracker = DispersionTracker(WINDOW_S, history=4)
        tracker.update(0.5, form)
        assert tracker.windows()[1].tolist() == [7.0]


@pytest.mark.parametrize("utilization, completions, field", [
    (1.5, 3, "utilization"), (float("nan"), 3, "utilization"), ("0.5", 3, "utilization"),
    (0.5, -1, "completions"), (0.5, [1, -1], "completions"), (0.5, {"a": float("inf")},
                                                              "completions"),
    (0.5, "12", "completions"), (0.5, None, "completions"), (0.5, [2.0**53, 2.0**53],
                                                              "completions"),
])
def test_tracker_rejects_bad_windows_and_keeps_its_state(utilization, completions, field):
    tracker = DispersionTracker(WINDOW_S, history=8)
    tracker.update(0.5, 3)
    with pytest.raises(ValueError, match=f"^{field}:"):
        tracker.update(utilization, completions)
    assert len(tracker) == 1


@pytest.mark.parametrize("kwargs, field", [
    ({"window_s": 0}, "window_s"), ({"history": 0}, "history"), ({"tol": 2.0}, "tol"),
    ({"min_samples": 0}, "min_samples"),
])
def test_tracker_rejects_bad_settings(kwargs, field):
    args = {"window_s": WINDOW_S}
    args.update(kwargs)
    with pytest.raises(ValueError, match=f"^{field}:"):
        DispersionTracker(**args)


def test_tracker_from_dict_names_missing_and_bad_fields():
    state = DispersionTracker(WINDOW_S, history=4).to_dict()
    for key in ("window_s", "utilization"):
        broken = {k: v for k, v in state.items() if k != key}
        with pytest.raises(ValueError, match=f"^{key}:"):
            DispersionTracker.from_dict(broken)
    with pytest.raises(ValueError, match="^utilization:"):
        DispersionTracker.from_dict({**state, "utilization": [0.1] * 5, "completions": [1] * 5})
    with pytest.raises(ValueError, match="^completions:"):
        DispersionTracker.from_dict({**state, "utilization": [0.1], "completions": [-1]})


@settings(max_examples=60, deadline=None)
@given(history=st.integers(1, 300),
       stream=st.lists(st.tuples(finite_u, st.integers(0, 10**4)), max_size=600))
def test_tracker_matches_batch_on_any_stream(history, stream):
    tracker = DispersionTracker(1.0, history=history, min_samples=5)
    for u, n in stream:
        tracker.update(u, n)
    tail = stream[-history:] if stream else []
    u = np.array([w[0] for w in tail], dtype=float)
    n = np.array([w[1] for w in tail], dtype=float)
    assert tracker.estimate() == index_of_dispersion(u, n, 1.0, min_samples=5)


# -- utilization rounding: 1 + 1e-12 and -1e-15 are clamped, clearly invalid values refused ------
@pytest.mark.parametrize("rounded, clamped", [(1 + 1e-12, 1.0), (-1e-15, 0.0), (1 + 1e-9, 1.0)])
def test_rounding_residue_is_clamped_by_the_function_and_the_tracker(rounded, clamped):
    rng = np.random.default_rng(3)
    u = rng.uniform(0.2, 0.8, 400)
    n = rng.poisson(50, 400).astype(float)
    u[[7, 100]] = clamped
    want = index_of_dispersion(u, n, WINDOW_S)
    odd = u.copy()
    odd[[7, 100]] = rounded
    assert index_of_dispersion(odd, n, WINDOW_S) == want
    assert odd[7] == rounded                         # the caller's array is left as it was
    tracker = DispersionTracker(WINDOW_S, history=512)
    for uk, nk in zip(odd, n):
        tracker.update(float(uk), float(nk))
    assert tracker.windows()[0][7] == clamped
    assert tracker.estimate() == want
    state = tracker.to_dict()
    state["utilization"][7] = rounded
    assert DispersionTracker.from_dict(state).windows()[0][7] == clamped


@pytest.mark.parametrize("bad", [1.5, 1 + 2e-9, -1e-6, float("nan")])
def test_utilization_beyond_rounding_is_still_refused(bad):
    with pytest.raises(ValueError, match=r"^utilization: must be"):
        index_of_dispersion([0.5, bad, 0.5], [3, 3, 3], WINDOW_S)
    with pytest.raises(ValueError, match=r"^utilization: must be"):
        DispersionTracker(WINDOW_S).update(bad, 3)
