"""95th percentile of service times from coarse windows: per-window exponential phases.

Paper 000 (Mi, Casale, Cherkasova, Smirni, Middleware 2008), end of section 4.1, estimates the
service-time p95 as ``quantile_95(B_k) / median(n_k)`` (:func:`estimators.mapfit.service_p95`),
assuming that "the ``n_k`` jobs that are served in the ``k``-th busy period receive a similar
service time ``S_k``", i.e. ``B_k ~ n_k S_k``. The quantile of a *busy time* is a quantile of a
sum of ``n_k`` services: it spreads like ``sqrt(I / n_k)`` around the mean (central limit), not
like one service, so it reads far too short whenever windows hold many requests (measured:
7.7 ms against a true 26.4 ms on paper 000's browsing mix, 5.3 ms against 13.5 ms on an
exponential tier; docs/accuracy.md, "The service-time tail").

This module keeps the paper's assumption -- the service *rate* is constant within a window, at
``1 / m_k`` with ``m_k = B_k / n_k`` -- and applies it to the process that the model is built
from: in a MAP every service is exponential given the phase it starts in (``D0``'s diagonal),
so a window served in one phase has exponential service times with mean ``m_k``. A request
picked at random among all completions falls in window ``k`` with probability
``w_k = n_k / sum_j n_j``, hence the service-time distribution is the completion-weighted
mixture

    P(S > x) = sum_k w_k exp(-x / m_k),

and the estimate is its 0.95 quantile (solved by bisection on ``log x``). Properties:

* exact for exponential service (``m_k`` all near the mean: ``mean ln 20``), and for a
  Markov-modulated service whose phases last longer than a window (each window sees one
  phase; the paper's high-``I`` case) -- ``tests/test_tail.py``;
* short when phases switch several times within a window: each ``m_k`` then averages fast
  and slow services and the mixture is too narrow. On the browsing mix (slow runs of ~0.5 s
  of busy time, windows of ~1.7 s) it reads 14.6 ms against 26.4 ms (docs/accuracy.md). The
  windows cannot tell such a process from others with the same mean and ``I`` but a different
  marginal: MAP(2)s with the browsing database's mean and ``I`` reach any p95 from 0.2 to 7.6
  means, and the next statistic the windows carry, the third cumulant of the counts, scatters
  from -14% to +60% over six 3 h traces (``bench/accuracy_tail.py``); without an assumption on
  the switching rate no estimator from window totals closes that gap;
* long when a rare slow branch is far slower than the body and switches within a window
  (an H2 MAP(2) with ``I = 300``, 2% of services 16 means long: +31%).

Windows with ``n_k = 0`` are ignored (as in :func:`estimators.mapfit.service_p95`); a window
with completions but no busy time (rounding of ``U_k``) has ``m_k = 0`` and contributes no tail.
Cost: ~0.3 ms at 4,096 windows (``bench/bench_mapfit.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from estimators.mapfit import windows_with_completions

__all__ = ["ServiceTail", "service_tail_p95"]

_Q = 0.95
_TAIL = 1.0 - _Q
_BISECT = 60
_LOG_MAX = math.log(np.finfo(float).max)


@dataclass(frozen=True)
class ServiceTail:
    """Result of :func:`service_tail_p95`.

    ``p95`` the 0.95 quantile of the completion-weighted mixture of exponentials with the
    windows' mean service times ``m_k = B_k / n_k``; ``mean`` ``sum B_k / sum n_k``;
    ``None`` for both (``flag == "no_completions"``) when no window completed a request,
    (``flag == "no_busy_time"``) when the windows with completions have no busy time, or
    (``flag == "out_of_range"``) when the total busy time or the p95 exceeds the float range.
    """

    p95: float | None
    mean: float | None
    windows_used: int
    windows_ignored: int
    flag: str | None


def service_tail_p95(busy_times: Any, completions: Any) -> ServiceTail:
    """Service-time p95 from per-window busy times ``B_k`` and completions ``n_k``.

    See the module docstring: the 0.95 quantile of ``sum_k w_k exp(-x/m_k)`` with
    ``w_k = n_k / sum n`` and ``m_k = B_k / n_k`` over the windows with ``n_k > 0``.
    ``busy_times`` in (core-)seconds, as for :func:`estimators.mapfit.service_p95`.
    Raises ``ValueError`` naming ``busy_times``/``completions`` for empty, mismatched,
    non-finite or negative input; never NaN.
    """
    b, n, ignored = windows_with_completions(busy_times, completions)
    used = int(b.size)
    if used == 0:
        return ServiceTail(None, None, 0, ignored, "no_completions")
    with np.errstate(over="ignore"):
        total_b = float(b.sum())
    if not total_b > 0.0:
        return ServiceTail(None, None, used, ignored, "no_busy_time")
    weight = n / float(n.sum())
    means = b / n
    p95 = _mixture_quantile(weight, means)
    if not math.isfinite(total_b) or not math.isfinite(p95):
        return ServiceTail(None, None, used, ignored, "out_of_range")
    return ServiceTail(p95, total_b / float(n.sum()), used, ignored, None)


def _mixture_quantile(weight: np.ndarray, means: np.ndarray) -> float:
    """``x`` with ``sum_k weight_k exp(-x / means_k) = 0.05``, ``means_k >= 0``.

    Only windows with ``m_k > 0`` have a tail; with ``W`` their total weight,
    ``W exp(-x/m_min) <= S(x) <= W exp(-x/m_max)`` brackets the root between
    ``m_min ln(20 W)`` and ``m_max ln(20 W)``; bisection on ``log x``, then the midpoint.
    The work is in units of ``m_max`` and in logs (``log(m_max / m_k)`` is finite for every
    ``m_k > 0``), so extreme windows (a mean of ``1e-310`` beside ``1``, or near the float
    range) neither overflow nor warn: a term whose exponent overflows is ``exp(-inf) = 0``.
    A quantile beyond the float range is returned as ``inf`` (the caller flags it)."""
    pos = means > 0.0
    if not np.any(pos):  # pragma: no cover - excluded by the caller (total busy time > 0)
        return 0.0
    w, m = weight[pos], means[pos]
    if float(w.sum()) <= _TAIL:     # the tail mass lives in windows without busy time
        return 0.0
    m_max = float(m.max())
    log_rate = math.log(m_max) - np.log(m)     # >= 0, finite for every m > 0
    log_scale = math.log(math.log(float(w.sum()) / _TAIL))
    lo = math.log(float(m.min())) - math.log(m_max) + log_scale
    hi = log_scale
    for _ in range(_BISECT):
        if hi - lo <= 1e-12:
            break
        mid = 0.5 * (lo + hi)
        with np.errstate(over="ignore"):       # exp(+large) = inf, its term exp(-inf) = 0
            tail = float(np.dot(w, np.exp(-np.exp(mid + log_rate))))
        if tail > _TAIL:
            lo = mid
        else:
            hi = mid
    log_p95 = math.log(m_max) + 0.5 * (lo + hi)
    return math.exp(log_p95) if log_p95 < _LOG_MAX else math.inf
