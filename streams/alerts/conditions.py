"""The alerts' conditions at one solve, each ``True`` (holds), ``False`` (clear) or ``None``
(its dead band: neither counter of the alert book moves, :mod:`streams.alerts.book`).

* ``predicted_breach`` -- :func:`breach_condition`: the model's time to breach within the
  horizon, and while the model is not trusted the measured response-time trend's
  (:mod:`streams.predict.response_trend`);
* ``current_breach`` -- :func:`current_breach_condition`: a class's measured response time
  above its SLA;
* ``model_error`` -- :func:`model_error_condition` on :func:`alert_error`.

Which class a ``predicted_breach`` names (:func:`alert_class`): the model's, unless the
measurement contradicts it or the model is not trusted.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from streams.core.config import SystemConfig
from streams.core.outputs import Prediction
from streams.predict import response_trend
from streams.predict.response_trend import TrendReading

__all__ = ["BREACH_RESOLVE_FACTOR", "CURRENT_RESOLVE_FACTOR", "ERROR_RESOLVE_FACTOR",
           "NAMED_FLOOR", "alert_class", "alert_error", "breach_condition",
           "current_breach_condition", "model_error_condition"]

#: predicted breach alerts resolve only once the time to breach exceeds horizon x this
BREACH_RESOLVE_FACTOR = 1.25
#: measured breach resolves below SLA x this; model error below threshold x this
CURRENT_RESOLVE_FACTOR = 0.9
ERROR_RESOLVE_FACTOR = 0.75
#: a predicted-breach alert does not name a class measured below this share of its SLA while
#: another class measures above its own (:func:`alert_class`)
NAMED_FLOOR = 0.8


def alert_class(model_class: str | None, measured: Mapping[str, float],
                sla: Mapping[str, float], trusted: bool) -> tuple[str | None, str | None]:
    """The class a ``predicted_breach`` alert names, and why it is not the model's
    (``None``: it is). With ``q_c = R_c / SLA_c`` the measured response time over the SLA
    per class: the class of largest ``q_c`` replaces the model's when the model's class
    measures below :data:`NAMED_FLOOR` of its SLA while that one is above its SLA (the
    measurement contradicts the model's split: on a real database the model named a class at
    55 ms under its 60-ms SLA while another was breaking), or when the model is not trusted
    (``trusted`` false: its per-class figures rest on nothing the data showed)."""
    q = {c: r / sla[c] for c, r in measured.items()
         if r is not None and c in sla and math.isfinite(sla[c]) and sla[c] > 0}
    if not q or model_class is None:
        return model_class, None
    worst = max(q, key=lambda c: (q[c], c == model_class))
    if worst == model_class:
        return model_class, None
    mine = q.get(model_class)
    if mine is not None and mine < NAMED_FLOOR and q[worst] > 1.0:
        return worst, (f"class named from the measurement: the model's {model_class!r} "
                       f"measures {100 * mine:.0f}% of its SLA while {worst!r} measures "
                       f"{100 * q[worst]:.0f}% of its own")
    if not trusted:
        return worst, (f"class named from the measurement (the model is not trusted): "
                       f"{worst!r} is nearest its SLA ({100 * q[worst]:.0f}%), the model "
                       f"named {model_class!r}")
    return model_class, None


def alert_error(pred: Mapping[str, Any] | Prediction) -> float | None:
    """The error the ``model_error`` alert watches: the largest of the aggregate's and the
    worst class's response-time error pooled over the last solves, each only where it is
    significant (:func:`streams.predict.confidence.pooled_errors`), and the worst measured
    pool's utilization error pooled likewise (``pool_error_pooled``,
    :mod:`streams.predict.pool_check`: a wrong pool shows in the tokens held before it shows in
    the response time); 0 when none is, ``None`` before any pooled error exists."""
    agg = pred.get("model_error_pooled")
    pool = pred.get("pool_error_pooled")
    if agg is None and pool is None:
        return None
    known = [e for e in (agg if pred.get("model_error_significant") else 0.0,
                         pred.get("model_error_class_max"), pool) if e is not None]
    return max(known)


def model_error_condition(err: float | None, thr: float) -> bool | None:
    """The ``model_error`` alert's condition: above ``thr``; clear below
    ``ERROR_RESOLVE_FACTOR thr``; ``None`` (the dead band, or no error) in between."""
    return None if err is None or ERROR_RESOLVE_FACTOR * thr <= err <= thr else err > thr


def current_breach_condition(r: float | None, sla: float) -> bool | None:
    """A class's ``current_breach`` condition: its measured response time ``r`` above its
    SLA; clear below ``CURRENT_RESOLVE_FACTOR sla`` or without requests; ``None`` between."""
    return None if r is not None and CURRENT_RESOLVE_FACTOR * sla <= r <= sla else \
        bool(r is not None and r > sla)


def breach_condition(pred: Prediction, sla: Mapping[str, float], time: float,
                     cfg: SystemConfig, response_points: Mapping[str, Sequence[Sequence[float]]],
                     error_active: bool, untrusted: Sequence[str] = ()
                     ) -> tuple[bool | None, float | None, str | None, list[str],
                                TrendReading | None, str | None]:
    """The ``predicted_breach`` condition at this solve, its time to breach and class: the
    model's (``alert_time_to_breach_s`` within the horizon fires, beyond
    ``BREACH_RESOLVE_FACTOR`` horizons clears, but not while the users (an open workload:
    the request rate, against ``capacity_rate_per_s``) are within
    ``capacity_margin`` below the alert's capacity, and a breach now does not fire while the
    measurement contradicts it) and, while the model is not trusted
    (:func:`streams.predict.response_trend.untrusted_reasons`; ``error_active``: the
    ``model_error`` alert is), the users are within that margin
    (:func:`~streams.predict.response_trend.near_capacity_reason`) or the measurement
    contradicts the model (:func:`~streams.predict.response_trend.contradicted_reason`), the
    measured response-time trend's (:func:`~streams.predict.response_trend.trend_reading`,
    over ``response_points``; ``untrusted``: further reasons, e.g.
    :func:`streams.predict.confidence.trust_reasons`): either fires it; it clears only when
    both do. Also returns why the model is not trusted, the trend's reading (``None``:
    trusted, not read) and what holds the condition (``model``, ``trend``, ``model+trend``;
    ``None``: no breach predicted)."""
    ttb = pred.alert_time_to_breach_s
    if isinstance(pred.arrival_rate_per_s, float):      # an open workload: rates
        load, cap, unit = pred.arrival_rate_per_s, pred.capacity_rate_per_s, "req/s"
    else:
        load, cap, unit = pred.users, pred.alert_capacity_users, "users"
    near = response_trend.near_capacity_reason(load, cap, cfg.capacity_margin, unit)
    contradicted = response_trend.contradicted_reason(
        load, cap, cfg.capacity_margin, response_points, sla, time, unit)
    cond = response_trend.horizon_condition(ttb, cfg.horizon_s, cfg.horizon_s,
                                            BREACH_RESOLVE_FACTOR)
    if cond is False and near is not None:     # inside the margin: the dead band
        cond = None
    if cond and contradicted is not None:      # a breach now the measurement denies
        cond = None
    reasons = response_trend.untrusted_reasons(
        {t: v.idc_flag for t, v in pred.tiers.items()}, error_active) + list(untrusted) + [
        r for r in (near, contradicted) if r]
    trend = None
    if reasons:
        trend = response_trend.trend_reading(response_points, time, sla, cfg.horizon_s,
                                             BREACH_RESOLVE_FACTOR)
    trigger = "model" if cond else None
    if trend is None or not trend.per_class:      # no guard, or no line yet
        return cond, ttb, pred.breach_class, reasons, trend, trigger
    if trend.condition:
        if cond:
            return True, ttb, pred.breach_class, reasons, trend, "model+trend"
        return True, trend.time_to_breach_s, trend.breach_class, reasons, trend, "trend"
    if cond:
        return True, ttb, pred.breach_class, reasons, trend, trigger
    return (False if cond is False and trend.condition is False else None), ttb, \
        pred.breach_class, reasons, trend, trigger
