"""The request-rate trend of an open workload (streams.predict.rate_trend): a change of slope
within the trend window is taken from the broken line once its F test passes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from streams.predict import rate_trend
from streams.predict.rate_trend import ALPHA, broken_line
from streams.predict.response_trend import least_squares_line

#: one rate point a solve (60 s) over a 15-minute window
ENDS = np.arange(60.0, 901.0, 60.0)


def _points(rates: np.ndarray) -> list[list[float]]:
    return [[e, r] for e, r in zip(ENDS.tolist(), np.asarray(rates, float).tolist())]


def _ramp(start: float, slope: float, noise: float, seed: int) -> list[list[float]]:
    """67/s flat, then ``slope`` req/s per s from ``start``; Poisson-like noise of a 1-min
    count (``noise`` req/s)."""
    rng = np.random.default_rng(seed)
    rates = 67.0 + slope * np.maximum(ENDS - start, 0.0) + rng.normal(0.0, noise, ENDS.size)
    return _points(rates)


def test_a_noise_free_broken_line_is_recovered_at_its_break():
    rates = np.where(ENDS <= 600.0, 67.0 + 0.001 * ENDS, 67.6 + 0.05 * (ENDS - 600.0))
    brk = broken_line(_points(rates))
    assert brk is not None
    assert brk.tau == 600.0
    assert brk.before == pytest.approx(0.001, abs=1e-9)
    assert brk.after == pytest.approx(0.05, rel=1e-9)
    assert brk.p < 1e-6
    assert brk.candidates == ENDS.size - 5


def test_the_break_s_f_statistic_is_the_nested_models_at_the_best_break():
    rng = np.random.default_rng(3)
    rates = 67.0 + 0.06 * np.maximum(ENDS - 700.0, 0.0) + rng.normal(0.0, 1.1, ENDS.size)
    brk = broken_line(_points(rates))
    assert brk is not None
    t = ENDS - ENDS[-1]
    tau = brk.tau - ENDS[-1]
    line = np.column_stack([np.ones_like(t), t])
    hinge = np.column_stack([np.ones_like(t), t - tau, np.maximum(t - tau, 0.0)])
    sse0 = np.sum((rates - line @ np.linalg.lstsq(line, rates, rcond=None)[0]) ** 2)
    sse1 = np.sum((rates - hinge @ np.linalg.lstsq(hinge, rates, rcond=None)[0]) ** 2)
    f = (sse0 - sse1) / (sse1 / (ENDS.size - 3))
    assert brk.f == pytest.approx(f, rel=1e-9)
    assert brk.p == pytest.approx(min(1.0, brk.candidates * stats.f.sf(f, 1, ENDS.size - 3)))
    assert brk.line == pytest.approx(least_squares_line(_points(rates), 900.0)[1], rel=1e-9)


def test_a_ramp_is_read_at_its_slope_a_few_points_after_it_began():
    """Flat, then 3.8 req/s a minute from 40 s before a point (a noise of 1.1 req/s, a
    1-min count's at 67/s): the window's line reads a fraction of it; four points into the
    ramp the rate trend reads its slope within 40% on every seed, three points in it has
    taken the break on nearly every seed (the slope after it from two intervals)."""
    slope = 3.8 / 60.0
    taken = 0
    for seed in range(20):
        points = _ramp(ENDS[-4] - 40.0, slope, 1.1, seed)
        assert least_squares_line(points, 900.0)[1] < 0.4 * slope
        assert rate_trend.rate_trend(points, 900.0, 900.0) == pytest.approx(slope, rel=0.4)
        points = _ramp(ENDS[-3] - 40.0, slope, 1.1, seed)
        assert least_squares_line(points, 900.0)[1] < 0.3 * slope
        taken += rate_trend.rate_trend(points, 900.0, 900.0) > 0.5 * slope
    assert taken >= 18


def test_on_a_flat_noisy_rate_a_break_is_rarely_taken():
    # at level ALPHA over every candidate break: about 1 window in 100 by chance
    taken = 0
    for seed in range(300):
        points = _ramp(np.inf, 0.0, 1.1, seed)
        taken += rate_trend.rate_trend(points, 900.0, 900.0) != least_squares_line(
            points, 900.0)[1]
    assert taken <= 300 * 3 * ALPHA


def test_a_slowing_ramp_keeps_the_window_s_slope():
    # the earlier alert of the two: a flatter slope after a break is not taken
    rates = 67.0 + 0.06 * np.minimum(ENDS, 600.0)
    points = _points(rates)
    assert rate_trend.rate_trend(points, 900.0, 900.0) == pytest.approx(
        least_squares_line(points, 900.0)[1])


def test_too_few_points_or_a_perfect_line_give_the_line_s_slope():
    assert broken_line(_points(np.full(ENDS.size, 67.0))) is None
    line = _points(67.0 + 0.01 * ENDS)
    assert broken_line(line) is None
    assert rate_trend.rate_trend(line, 900.0, 900.0) == pytest.approx(0.01)
    assert broken_line(line[:5]) is None
    assert rate_trend.rate_trend(line[:2], 120.0, 900.0) == 0.0


def test_points_older_than_the_window_are_dropped():
    points = _ramp(np.inf, 0.0, 1.1, 1)
    rate_trend.rate_trend(points, 1200.0, 900.0)
    assert points and points[0][0] > 300.0
