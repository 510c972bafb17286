"""The measured response-time trend: a guard on the predicted-breach alert while the model is
not trusted.

The ``predicted_breach`` alert stands on the queueing model (:mod:`streams.predict.model`,
:mod:`streams.predict.alert_window`). While the model itself is in doubt it can be confidently
wrong: in the first minutes a bursty tier's index of dispersion ``I`` rests on too few windows
for its confidence interval to confirm it (``idc_flag`` ``too_short`` / ``uncertain`` /
``unresolved``: Mi et al. (2008), Fig. 2, ``I`` needs thousands of windows), so the model solves the
tier as exponential and puts the capacity far above the load that is already at its SLA; and
while the ``model_error`` alert is active its response times are off the measured ones. A load
that starts near capacity breaches in exactly those minutes.

A mature monitoring tool then falls back on the measurement itself, as Prometheus'
``predict_linear`` does: per class, the least-squares line through the measured response time
``R_c`` of the solves over the last ``trend_window_s`` (each solve's ``R_c`` is the interval's
completion-weighted mean per tier, summed over the tiers -- the same windows the model is fed),

    R_c(t + s) ~ a_c + b_c s,   time to breach  tau_c = 0 if a_c > SLA_c,
                                                       (SLA_c - a_c) / b_c' if b_c' > 0, else none

with ``b_c' = b_c - TREND_SES se(b_c)`` the slope less :data:`TREND_SES` of its standard errors:
a line through a few noisy points rises by chance, and a chance rise extrapolated fires too
(``bench/e2e/many_cores.py --ramp``, a 64-core bursty database at 40% of capacity: ``buy`` at
352 ms against its 0.4 s SLA, five solves rising 14.5 ms/min by chance, a TREND ALERT at
minute 6 that the ramp's breach at minute 44 followed by 38 minutes; 3 of 6 seeds so).

and the guard's condition is the model's (``tau <= H`` fires, ``tau > BREACH_RESOLVE_FACTOR H``
clears, in between the dead band): some class's ``tau_c <= H`` -> ``True``; every class's
clear -> ``False``. A line is not extrapolated further ahead than the history it was fitted on
(its forecast error grows with the distance from the points): in the first minutes it fires on
``tau_c <=`` the minutes of history, not on ``H`` -- three noisy minute means at 40% of
capacity extrapolated 15 minutes ahead fire on noise (docs/accuracy.md section 10). It is
consulted only while the model is not trusted (:func:`untrusted_reasons`), and an alert it
raised says so (``trigger`` ``trend``, its basis ``trend: ...``, a ``TREND ALERT`` summary):
the on-call engineer knows it is the measured trend, not the model.

**Near the alert's capacity** the model cannot rule a breach in or out either: its capacity
is right to about 10% (docs/accuracy.md sections 6 and 12), and a flat load at 90% of a bursty
tier's capacity sees the alert capacity wander 183-214 users around 193 between solves (the
estimates of ``I`` and the demands moving with the history), so the model's own condition
fires and resolves on that noise, and the 5-minute mean breaches when it will. With the users
within ``capacity_margin`` below the alert's capacity ``N*`` (:func:`near_capacity_reason`:
``N >= (1 - m) N*``) the guard is consulted as well, and the model's condition there is the
dead band: a firing alert resolves only once the users are below ``(1 - m) N*``, not on
each solve's wobble.

**A breach now that the measurement contradicts.** Above its capacity the model says the SLA
is broken *now* (time to breach 0), which the measurement can check directly. In the first
minutes a class's demand can read far off (a three-tier shop at 40% of its capacity, e2e seed
3 of ``bench/e2e/multicore.py``: the model's capacity 0 users at minutes 3 and 4 while 86
users were served with every class within its SLA), and the model fired 30.6 minutes before
the breach. With the users beyond ``capacity_margin`` above the alert's capacity,
``N > N* / (1 - m)``, while every class measured at this solve is within ``(1 - m)`` of its
SLA (:func:`contradicted_reason`), the model's condition is the dead band and the guard is
consulted: the measured trend decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from streams.core.tier import PROVISIONAL_FLAGS

__all__ = ["MIN_POINTS", "TREND_SES", "TrendReading", "add_points", "contradicted_reason",
           "horizon_condition", "least_squares_line", "near_capacity_reason", "slope_with_error",
           "trend_reading", "untrusted_reasons"]

#: a class's line needs at least this many solves (Prometheus' ``predict_linear`` needs 2;
#: 3 give a residual)
MIN_POINTS = 3
#: the slope a line is extrapolated with is its least-squares slope less this many of its
#: standard errors (module docstring): 0 -> 2 took the early TREND ALERTs off 3 of 3 of those
#: 64-core ramps and left every case (b) ramp and non-bursty alert scenario as it was
TREND_SES = 2.0


@dataclass(frozen=True)
class TrendReading:
    """The guard's reading at one solve: ``condition`` (``None``: dead band or too few
    points), the class nearest its SLA by the line (``breach_class``), its time to breach
    ``time_to_breach_s``, measured level ``level_s`` (the line at now) and ``slope`` (s per s:
    the least-squares slope less :data:`TREND_SES` standard errors, the one extrapolated)."""

    condition: bool | None
    breach_class: str | None = None
    time_to_breach_s: float | None = None
    level_s: float | None = None
    slope: float | None = None
    #: per class with a line: its time to breach (``None``: not rising towards the SLA)
    per_class: dict[str, float | None] = field(default_factory=dict)


def add_points(points: dict[str, list[list[float]]], time: float,
               response: Mapping[str, float], span_s: float) -> None:
    """Append each class's measured ``R_c`` at ``time`` to ``points[c]`` (``[time, R]``
    rows, time order) and drop the rows older than ``span_s`` before ``time``."""
    for c, r in response.items():
        if r is not None and math.isfinite(r):
            points.setdefault(c, []).append([float(time), float(r)])
    for c in list(points):
        rows = points[c]
        cut = next((i for i, row in enumerate(rows) if row[0] > time - span_s), len(rows))
        del rows[:cut]
        if not rows:
            del points[c]


def least_squares_line(rows: Sequence[Sequence[float]], time: float) -> tuple[float, float]:
    """Least-squares ``(level at time, slope)`` through ``rows`` of ``[t, y]`` (at least one;
    slope 0 when every ``t`` is the same): the trend guard's line of a class's response time,
    and the measured users' trend."""
    t_mean, y_mean, _, _, slope = _line(rows, time)
    return y_mean + slope * (0.0 - t_mean), slope


def slope_with_error(rows: Sequence[Sequence[float]], time: float) -> tuple[float, float]:
    """:func:`least_squares_line`'s slope through ``rows`` of ``[t, y]`` and its standard
    error ``sqrt(sum e^2 / (n - 2) / sum (t - t_bar)^2)`` (``e`` the residuals); ``(0, inf)``
    with fewer than three rows or every ``t`` the same."""
    if len(rows) < 3:
        return 0.0, math.inf
    _, slope, se = _line_with_error(rows, time)
    return (slope, se) if math.isfinite(se) else (0.0, math.inf)


def _line_with_error(rows: Sequence[Sequence[float]], time: float
                     ) -> tuple[float, float, float]:
    """The least-squares line's level at ``time``, its slope and the slope's standard error
    (``inf`` with fewer than three rows or every ``t`` the same): one fit."""
    t_mean, y_mean, tc, denom, slope = _line(rows, time)
    if len(rows) < 3 or not denom > 0:
        return y_mean - slope * t_mean, slope, math.inf
    sse = math.fsum([(row[1] - y_mean - slope * d) ** 2 for d, row in zip(tc, rows)])
    return y_mean - slope * t_mean, slope, math.sqrt(sse / (len(rows) - 2) / denom)


def _line(rows: Sequence[Sequence[float]], time: float
          ) -> tuple[float, float, list[float], float, float]:
    """The least-squares line's ``t_bar`` (from ``time``), ``y_bar``, centred times, their sum
    of squares and the slope (0 when that sum is 0)."""
    # plain floats: a line through a few dozen points costs ~5x less than through arrays
    n = len(rows)
    # (lists, not generators, into fsum: a correctly rounded sum, the same in any order)
    t = [row[0] - time for row in rows]
    y = [row[1] for row in rows]
    t_mean = math.fsum(t) / n
    y_mean = math.fsum(y) / n
    tc = [x - t_mean for x in t]
    denom = math.fsum([d * d for d in tc])
    slope = math.fsum([d * (v - y_mean) for d, v in zip(tc, y)]) / denom \
        if denom > 0 else 0.0
    return t_mean, y_mean, tc, denom, slope


def horizon_condition(time_to_breach: float | None, reach_s: float, horizon_s: float,
                      resolve_factor: float) -> bool | None:
    """The breach condition on one time to breach, the model's and each trend line's: within
    ``reach_s`` (the horizon; a line's no further than its history) fires (``True``), never
    or beyond ``resolve_factor`` horizons clears (``False``), in between the dead band
    (``None``)."""
    if time_to_breach is not None and time_to_breach <= reach_s:
        return True
    if time_to_breach is None or time_to_breach > resolve_factor * horizon_s:
        return False
    return None


def trend_reading(points: Mapping[str, Sequence[Sequence[float]]], time: float,
                  sla: Mapping[str, float], horizon_s: float,
                  resolve_factor: float) -> TrendReading:
    """The guard's condition at ``time`` (module docstring): per class with a finite SLA and
    at least :data:`MIN_POINTS` points, the line's time to breach at its slope less
    :data:`TREND_SES` standard errors; ``True`` when some class's
    is within its reach -- ``horizon_s``, but no further ahead than the history the line was
    fitted on (a line through 4 minutes is not extrapolated 15 minutes ahead) --, ``False``
    when every class's is beyond ``resolve_factor`` horizons (or never), ``None`` otherwise
    (no class with a line, or the dead band)."""
    per_class: dict[str, float | None] = {}
    lines: dict[str, tuple[float, float]] = {}
    conditions: dict[str, bool | None] = {}
    for c, rows in points.items():
        limit = sla.get(c)
        if limit is None or not math.isfinite(limit) or len(rows) < MIN_POINTS:
            continue
        level, slope, se = _line_with_error(rows, time)
        slope -= TREND_SES * se if math.isfinite(se) else 0.0
        lines[c] = (level, slope)
        due = 0.0 if level > limit else ((limit - level) / slope if slope > 0 else None)
        per_class[c] = due
        conditions[c] = horizon_condition(due, min(horizon_s, time - float(rows[0][0])),
                                          horizon_s, resolve_factor)
    if not per_class:
        return TrendReading(None)
    due_by = {c: t for c, t in per_class.items() if t is not None}
    firing = [c for c, v in conditions.items() if v]
    if firing:
        condition: bool | None = True
        worst: str | None = min(firing, key=lambda c: due_by[c])
    elif all(v is False for v in conditions.values()):
        condition, worst = False, None
    else:
        condition, worst = None, min(due_by, key=lambda c: due_by[c])
    level, slope = lines[worst] if worst is not None else (None, None)
    return TrendReading(condition, worst, due_by.get(worst) if worst else None, level, slope,
                        per_class)


def untrusted_reasons(idc_flags: Mapping[str, str | None],
                      model_error_active: bool) -> list[str]:
    """Why the model is not to be trusted on its own at this solve (empty: it is): a tier
    whose burstiness is not yet measured (its ``idc_flag`` in
    :data:`streams.core.tier.PROVISIONAL_FLAGS`: too few windows, or ``I``'s interval still
    straddles ``idc_threshold``), and the ``model_error`` alert being active. ``idc_flags``:
    tier -> its ``idc_flag``."""
    reasons = [f"{tier} burstiness not confirmed ({flag})" for tier, flag in idc_flags.items()
               if flag in PROVISIONAL_FLAGS]
    if model_error_active:
        reasons.append("model_error alert active")
    return reasons


def near_capacity_reason(users: float | None, alert_capacity: float | None,
                         margin: float, unit: str = "users") -> str | None:
    """Why the model cannot decide at this load (module docstring), or ``None``: the users
    ``N`` at or below the alert's capacity ``N*`` but within ``margin`` of it,
    ``(1 - margin) N* <= N <= N*`` (above ``N*`` the model predicts the breach itself). An
    open workload's load is its request rate (``unit`` ``req/s``)."""
    if users is None or alert_capacity is None or margin <= 0 or users > alert_capacity:
        return None
    if users < (1.0 - margin) * alert_capacity:
        return None
    return (f"{users:.6g} {unit} within {margin:.0%} of the alert capacity "
            f"{alert_capacity:.6g} (the model's capacity error)")


def contradicted_reason(users: float | None, alert_capacity: float | None, margin: float,
                        points: Mapping[str, Sequence[Sequence[float]]],
                        sla: Mapping[str, float], time: float,
                        unit: str = "users") -> str | None:
    """Why the model's breach *now* is not acted on (module docstring), or ``None``: the users
    ``N`` beyond ``margin`` above the alert's capacity ``N*`` (``(1 - margin) N > N*``) while
    every class with a measured ``R_c`` at ``time`` (the newest of ``points``) is within
    ``(1 - margin)`` of its SLA. ``None`` as well without a measurement at ``time``."""
    if users is None or alert_capacity is None or margin <= 0:
        return None
    if (1.0 - margin) * users <= alert_capacity:
        return None
    now = {c: rows[-1][1] for c, rows in points.items()
           if rows and rows[-1][0] == time and sla.get(c, 0.0) > 0}
    if not now or any(r > (1.0 - margin) * sla[c] for c, r in now.items()):
        return None
    worst = max(now, key=lambda c: now[c] / sla[c])
    return (f"the model's alert capacity {alert_capacity:.6g} is below the {users:.6g} {unit} "
            f"measured within the SLA ({worst} at {now[worst] / sla[worst]:.0%} of it)")
