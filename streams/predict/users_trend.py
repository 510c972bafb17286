"""The users trend: users per second over the last ``trend_window_s``, from the primary tier's
measured users (or the solves' inferred population), the slope the time to breach
extrapolates."""

from __future__ import annotations

import bisect
import math

from streams.predict import response_trend

__all__ = ["RAMP_SES", "RECENT_MIN_POINTS", "RECENT_SHARE", "add_users_point", "users_trend"]

#: the last third of ``trend_window_s`` is read on its own slope when that exceeds the whole
#: window's by this many standard errors (and it holds at least this many users points)
RECENT_SHARE = 1.0 / 3.0
RAMP_SES = 2.0
RECENT_MIN_POINTS = 6


def add_users_point(points: list[list[float]], end: float, users: float) -> None:
    """Keep ``points`` (``[end, users]``) sorted by time (late windows land in their place),
    so the trend window's start is cut off by bisection."""
    if not points or points[-1][0] <= end:
        points.append([end, users])
    else:
        bisect.insort(points, [end, users])


def users_trend(points: list[list[float]], time: float, window: float) -> float:
    """Users per second: the least-squares slope over the last ``window`` seconds of
    ``points`` (older points are dropped from it), or over its last :data:`RECENT_SHARE`
    when that rises faster by more than :data:`RAMP_SES` of its standard errors -- a ramp
    that began within the window. A line through a window that is mostly flat reads a
    fraction of the ramp's slope (4 minutes into a ramp, the 15-minute line reads ~20% of it),
    so the time to breach came out ~4x too long and the alert late: the e2e ramp of
    docs/accuracy.md section 11 (seeds 1-12) fired 2.6-11.6 minutes before the measured
    breach, 4 of 12 under 5 minutes. On a flat load the recent line's slope is noise, within
    its errors of the long one."""
    start = time - window
    if points and points[0][0] <= start:
        del points[:bisect.bisect_right(points, [start, math.inf])]
    if len(points) < 3:
        return 0.0
    slope = response_trend.least_squares_line(points, time)[1]
    recent = points[bisect.bisect_right(points, [time - RECENT_SHARE * window, math.inf]):]
    if len(recent) >= RECENT_MIN_POINTS:
        rising, se = response_trend.slope_with_error(recent, time)
        if rising > slope + RAMP_SES * se:
            return rising
    return slope
