"""The request-rate trend of an open workload: the slope the rate forecast and the time to
breach extrapolate, with a change of slope taken as soon as the rate points show it.

A rate that has been flat and begins to ramp is read badly by a line through the whole trend
window: four minutes into a ramp, a 15-minute line reads about a fifth of the ramp's slope
(the time to breach comes out ~5x too long). The users trend's remedy, the last third of the
window read on its own (:func:`streams.predict.users_trend.users_trend`), needs points that
an open workload's rate -- one point a solve -- does not give within five minutes.

**The broken line.** The rate points ``(t_i, x_i)`` of the window are fitted by the
continuous two-segment line (Hudson 1966)

    x(t) = a + b (t - tau) + d max(t - tau, 0)

at each candidate break ``tau`` (a point's own time, with at least :data:`MIN_BEFORE` points
before it and :data:`MIN_AFTER` from it on), least squares in ``(a, b, d)``; the break is the
``tau`` with the least residual sum of squares ``SSE_1``. Against the single line (``d = 0``,
``SSE_0``) the extra term's statistic ``F = (SSE_0 - SSE_1) / (SSE_1 / (n - 3))`` is
``F(1, n - 3)`` at a fixed ``tau``; the break's position is searched, so the statistic at the
best one is the largest of ``K`` (Davies 1987): it is held to the ``1 - ALPHA / K`` quantile
(Bonferroni's bound on that maximum).

**A break, then a ramp.** The F test asks whether the slope changes, not whether a ramp follows:
a rate that fell and recovers -- a load's start overshooting and settling, a dip -- breaks as
significantly as a ramp begins, and its slope after the trough, the return to the level, can
stand several of its standard errors above the line's (so the users trend's test of a recent
slope against the window's does not separate them). Extrapolated, that return forecasts a rise
the window does not show. What separates them is the level: a ramp lifts the rate above where
the window began, a recovery brings it back to it. So the slope after a break, ``b + d``, is the
trend when the break passes the F test, ``b + d`` is steeper than the line's slope, and the
fitted rise over the window, ``x(t_n) - x(t_1) = b (t_n - t_1) + d (t_n - tau)``, exceeds
:data:`RISE_SES` of its standard errors (the coefficients' covariance ``s^2 (X'X)^-1`` at the
chosen break, ``s^2 = SSE_1 / (n - 3)``; Seber and Lee 2003, ch. 3; conditional on the break, so
optimistic after the search: a margin, not an exact level). Otherwise the line's slope stands (a
ramp that slows keeps the window's slope until the window holds only the slower part, as the
users trend does: the earlier alert of the two). A ramp that begins while a start's fall is
still in the window is taken once its rise outgrows that fall (a few solves later than without
the fall).

On a flat rate the residuals are the counts' noise and a break beyond the bound comes once in
``1 / ALPHA`` solves, its slope within the noise; a ramp of ``s`` per minute over a noise of
``sigma`` is taken once its excess over the flat part, ``s`` times the minutes since it
began, is a few ``sigma`` at two or three points after the break.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from streams.predict import users_trend

__all__ = ["ALPHA", "MIN_AFTER", "MIN_BEFORE", "RISE_SES", "Break", "broken_line", "is_ramp",
           "rate_trend"]

#: the level of the test of a break (over every candidate break together)
ALPHA = 0.01
#: rate points a break needs before it and from it on (the break's own point counted after):
#: a slope after the break rests on at least two intervals
MIN_BEFORE = 3
MIN_AFTER = 3
#: the fitted rise over the window a break's slope needs, in its standard errors (the users
#: trend's margin for a recent slope, :data:`streams.predict.users_trend.RAMP_SES`)
RISE_SES = users_trend.RAMP_SES


@dataclass(frozen=True)
class Break:
    """The best broken line through the points: the break's time ``tau``, the slopes before
    (``before``) and after it (``after``), the single line's slope (``line``), the F statistic
    of the break and its Bonferroni p-value over the ``candidates`` searched (at most 1), and
    the fitted rise over the window, ``x(t_n) - x(t_1)``, with its standard error at the
    chosen break (``rise``, ``se_rise``)."""

    tau: float
    before: float
    after: float
    line: float
    f: float
    p: float
    candidates: int
    rise: float
    se_rise: float


def broken_line(points: Sequence[Sequence[float]]) -> Break | None:
    """The best broken line through ``points`` (``[t, x]``, sorted by ``t``) and its test
    (module docstring); ``None`` with too few points for a break, or when a break explains
    nothing the single line does not (a perfect line)."""
    n = len(points)
    candidates = n - MIN_BEFORE - MIN_AFTER + 1
    if candidates < 1:
        return None
    t0 = float(points[-1][0])
    t = [float(p[0]) - t0 for p in points]
    y = [float(p[1]) for p in points]
    t_bar, y_bar = math.fsum(t) / n, math.fsum(y) / n
    stt = math.fsum((ti - t_bar) ** 2 for ti in t)
    if not stt > 0:
        return None
    line = math.fsum((ti - t_bar) * (yi - y_bar) for ti, yi in zip(t, y)) / stt
    sse0 = math.fsum((yi - y_bar - line * (ti - t_bar)) ** 2 for ti, yi in zip(t, y))
    fits = []
    for tau in t[MIN_BEFORE:n - MIN_AFTER + 1]:
        # x = a + b (t - tau) + d max(t - tau, 0): least squares in (a, b, d)
        after = np.subtract(t, tau)
        cols = np.column_stack([np.ones(n), after, np.maximum(after, 0.0)])
        coef = np.linalg.lstsq(cols, y, rcond=None)[0]
        fits.append((float(np.sum((np.asarray(y) - cols @ coef) ** 2)), tau,
                     float(coef[1]), float(coef[2]), cols))
    sse1, tau, b, d, cols = min(fits, key=lambda fit: fit[:2])
    dof = n - 3
    if not sse0 - sse1 > 1e-12 * sse0:      # the break explains nothing the line does not
        return None
    f = (sse0 - sse1) / (sse1 / dof) if sse1 > 0 else math.inf
    p = min(1.0, candidates * float(stats.f.sf(f, 1, dof)))
    # the coefficients' covariance at the chosen break: s^2 (X'X)^-1, s^2 = SSE_1 / (n - 3)
    cov = sse1 / dof * np.linalg.pinv(cols.T @ cols)
    # the fitted rise over the window, x(t_n) - x(t_1) = b (t_n - t_1) + d (t_n - tau)
    rise_of = np.array([0.0, t[-1] - t[0], t[-1] - tau])
    return Break(tau + t0, b, b + d, line, f, p, candidates, float(rise_of[1:] @ [b, d]),
                 math.sqrt(max(float(rise_of @ cov @ rise_of), 0.0)))


def rate_trend(points: list[list[float]], time: float, window: float) -> float:
    """Requests per second per second: the window's line, or the slope after a break
    (:func:`broken_line`) that is a ramp (:func:`is_ramp`). ``points``
    (``[end, rate]``, sorted) lose those older than ``window`` before ``time``, as
    :func:`streams.predict.users_trend.users_trend`'s do; fewer than three points give 0."""
    slope = users_trend.users_trend(points, time, window)
    brk = broken_line(points)
    return brk.after if brk is not None and is_ramp(brk, slope) else slope


def is_ramp(brk: Break, slope: float) -> bool:
    """Whether the break's slope after it replaces ``slope`` (the users trend's: the window's
    line, or its last third's slope on a ramp): the break is significant at :data:`ALPHA`,
    the slope after it is steeper than ``slope``, and the fitted rise over the window exceeds
    :data:`RISE_SES` of its standard errors -- a ramp that lifted the rate, not a recovery
    from a dip (module docstring)."""
    return brk.p < ALPHA and brk.after > slope and brk.rise > RISE_SES * brk.se_rise
