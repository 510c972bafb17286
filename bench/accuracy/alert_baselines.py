"""Baseline breach predictors a Prometheus user would write over the measured response time.

* ``predict_linear(v[span], horizon) > SLA`` -- Prometheus' ``predict_linear``: the
  least-squares line through the range's samples, evaluated ``horizon`` after the evaluation
  time (:func:`linear_forecast`).
* Holt's double exponential smoothing -- the recurrence of Prometheus' ``holt_winters``
  (renamed ``double_exponential_smoothing`` in Prometheus 3) over the range's samples, with
  smoothing factor ``sf`` and trend factor ``tf``; Prometheus returns the smoothed level, the
  forecast here is that level plus the last trend times the horizon in samples (Holt's linear
  method, :func:`holt_forecast`).

Both feed the pipeline's alert rule (:func:`forecast_conditions`): at each evaluation time the
condition is *some class's forecast at ``t + horizon`` is above its SLA*; it clears when every
class's forecast at ``t + resolve_factor * horizon`` is below it (the pipeline resolves its
predicted breach beyond 1.25 horizons); in between is the dead band.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Forecaster = Callable[[np.ndarray, np.ndarray, float], float]

__all__ = ["Forecaster", "forecast_conditions", "holt", "holt_forecast", "linear_forecast"]


def linear_forecast(x: np.ndarray, y: np.ndarray, at: float) -> float:
    """Least-squares line through ``(x, y)`` evaluated at ``x = at`` (``predict_linear``)."""
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept + slope * at)


def holt_forecast(y: np.ndarray, sf: float, tf: float, steps: float) -> float:
    """Level + ``steps`` x trend after Prometheus' ``holt_winters(y, sf, tf)`` recurrence:
    ``s_0 = y_0``, ``b_0 = y_1 - y_0``; for ``i >= 1``, ``b_i = tf (s_i-1 - s_i-2) +
    (1 - tf) b_i-1`` (``b_1 = b_0``) and ``s_i = sf y_i + (1 - sf)(s_i-1 + b_i)``; the trend is
    then updated once more with the last level (the trend Prometheus would use next)."""
    if not (0 < sf < 1 and 0 < tf < 1):
        raise ValueError(f"holt: sf and tf must lie in (0, 1), got sf={sf!r}, tf={tf!r}")
    if len(y) < 2:
        raise ValueError(f"holt: needs >= 2 samples, got {len(y)}")
    s0, s1, b = float(y[0]), float(y[0]), float(y[1] - y[0])
    for i in range(1, len(y)):
        if i > 1:
            b = tf * (s1 - s0) + (1 - tf) * b
        s0, s1 = s1, sf * float(y[i]) + (1 - sf) * (s1 + b)
    b = tf * (s1 - s0) + (1 - tf) * b
    return s1 + steps * b


def holt(sf: float, tf: float, step_s: float) -> Forecaster:
    """A :data:`Forecaster` of Holt's method on samples ``step_s`` apart."""
    def forecast(x: np.ndarray, y: np.ndarray, at: float) -> float:
        return holt_forecast(y, sf, tf, (at - float(x[-1])) / step_s)
    return forecast


def forecast_conditions(times: Sequence[float], sample_t: np.ndarray, samples: np.ndarray,
                        sla: np.ndarray, forecaster: Forecaster, span_s: float,
                        horizon_s: float, resolve_factor: float, min_history_s: float = 0.0,
                        min_samples: int = 3) -> list[tuple[float, bool | None]]:
    """At each evaluation time ``t``: the samples (``sample_t``, ``samples`` of shape
    (n, classes), NaN where a class has none) in ``(t - span_s, t]``, per class forecast by
    ``forecaster(x, y, at)`` with ``x`` relative to ``t``. ``None`` (no decision) before the
    samples reach ``min_history_s`` back from ``t`` or while a class has fewer than
    ``min_samples``; see the module doc for the condition."""
    out: list[tuple[float, bool | None]] = []
    first = float(sample_t[0]) if len(sample_t) else np.inf
    for t in times:
        sel = (sample_t > t - span_s) & (sample_t <= t)
        over = far = False
        enough = first <= t - min_history_s
        for j in range(samples.shape[1]):
            y = samples[sel, j]
            ok = ~np.isnan(y)
            if not enough or ok.sum() < min_samples:
                enough = False
                break
            x = sample_t[sel][ok] - t
            over |= forecaster(x, y[ok], horizon_s) > sla[j]
            far |= forecaster(x, y[ok], resolve_factor * horizon_s) > sla[j]
        out.append((float(t), None if not enough else (True if over else
                                                       (False if not far else None))))
    return out
