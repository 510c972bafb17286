"""95th percentile of service times from coarse windows: the two-phase deconvolution.

Mi et al. (2008), end of section 4.1, estimates the
service-time p95 as ``quantile_95(B_k) / median(n_k)`` (:func:`estimators.mapfit.service_p95`),
assuming that "the ``n_k`` jobs that are served in the ``k``-th busy period receive a similar
service time ``S_k``", i.e. ``B_k ~ n_k S_k``. The quantile of a *busy time* is a quantile of a
sum of ``n_k`` services: it spreads like ``sqrt(I / n_k)`` around the mean, not like one service
(7.7 ms against a true 26.4 ms on the browsing mix of Mi et al. (2008)).

Two estimates from the windows' mean service times ``m_k = B_k / n_k`` (windows with
``n_k > 0``):

* :func:`window_mixture_p95` keeps the paper's assumption -- one service rate per window -- and
  applies it to a MAP's exponential phases: ``P(S > x) = sum_k w_k exp(-x / m_k)`` with
  ``w_k = n_k / sum_j n_j``. Exact when each window sees one phase; short when phases switch
  within a window, because each ``m_k`` then averages fast and slow services (browsing: 14.6 ms
  against 26.4 ms).

* :func:`service_tail_p95` (the pipeline's estimate) deconvolves instead. In a MAP(2) with a
  hyperexponential marginal every service is exponential with the mean ``a`` of the fast or
  ``b`` of the slow phase, so a window's mean is a mix of the two,
  ``m_k ~ a + p_k (b - a)`` with ``p_k`` the window's share of slow services (up to the
  ``1/sqrt(n_k)`` noise of exponential services). Every ``m_k`` therefore lies in ``[a, b]``;
  the estimate takes the narrowest such two-phase marginal the windows allow -- ``a`` and
  ``b`` the ``0.5%`` and ``99.5%`` quantiles of the ``m_k`` over windows (robust to a few
  windows of very few completions), less the sampling noise of exponential services a window
  of ``n`` completions served in one phase carries, ``mu (1 +- z/sqrt(n))`` with ``z`` the
  normal 99.5% quantile (without it, 1 s windows of ~30 slow services put ``b`` 45% beyond the
  slow phase) -- with the slow share ``p = (m - a)/(b - a)`` set by the overall mean
  ``m = sum B / sum n``:

      P(S > x) = p exp(-x / b) + (1 - p) exp(-x / a),

  and returns its 0.95 quantile. Where phases last longer than a window the ``m_k`` cluster
  at ``a`` and ``b`` and the two estimates agree; for exponential service the band is just the
  noise ``m (1 +- z/sqrt(n))``, ``a = b = m`` and the estimate is ``m ln 20``; where phases
  switch within a window the completion-weighted mixture collapses towards ``m`` but the band's
  ends still reach towards the phase means, and ``p`` moves the slow phase's mass to ``b``.
  Since ``exp(-x/m)`` is convex in ``m`` for ``x > 2m``, this two-point marginal has the
  heaviest tail beyond ``2b`` of all mixtures of exponentials on ``[a, b]`` with mean ``m``.
  It does not identify ``b`` when the phases mix within every window, but the p95 hardly
  depends on it there: with nearly all work in the slow phase, ``p ~ m/b`` and the p95 is
  ``~ b ln(20 m / b)``, 5.3 to 7.2 means for any ``b`` from 3.5 to 13 means.

Measured (``bench/accuracy/tail.py``, 3 h of 5 s windows of M/process/1 queues; figures in
docs/accuracy.md): within +-15% of the true p95 on the browsing database of Mi et al. (2008) (the
window mixture -46%), on most of the other processes and on held-out ones. It stays short when the
slow runs are much shorter than a window so that no window comes near the slow phase (the
shopping database of Mi et al. (2008), 1 ms mean, ~16 slow runs per window: about -40%), and with windows
long enough to average several bursts (browsing at 30-60 s windows: about -45%): the windows
cannot tell such a process from others with the same mean and ``I`` (MAP(2)s with the browsing
database's mean and ``I`` reach any p95 from 0.2 to 7.6 means), and the spread of the window
work across aggregation levels, ``Var(B | n) = I m^2 n - K``, moves by ``K / (I m^2 n) ~ 2%``
there, below its sampling noise. It reads long (+30% and more) for a rare slow branch far
slower than the band's end, and assumes exponential phases (an Erlang-2 reads +26%).

Windows with ``n_k = 0`` are ignored (as in :func:`estimators.mapfit.service_p95`); a window
with completions but no busy time (rounding of ``U_k``) has ``m_k = 0`` and contributes no
tail. Cost: under 1 ms at 4,096 windows (``bench/speed/mapfit.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from estimators.mapfit import windows_with_completions

__all__ = ["ServiceTail", "service_tail_p95", "window_mixture_p95"]

_Q = 0.95
_TAIL = 1.0 - _Q
_BISECT = 60
_BAND = 0.005    # share of windows outside [a, b] at each end (noise of few completions)
_LOG_MAX = math.log(np.finfo(float).max)
_STANDARD_NORMAL = NormalDist()


@dataclass(frozen=True)
class ServiceTail:
    """Result of :func:`service_tail_p95` and :func:`window_mixture_p95`.

    ``p95`` the estimated 0.95 quantile of service times; ``mean`` ``sum B_k / sum n_k``;
    for :func:`service_tail_p95` the two-phase marginal it rests on: ``fast_mean`` ``a``,
    ``slow_mean`` ``b`` and ``slow_share`` ``p`` (``None`` for :func:`window_mixture_p95`).
    ``p95`` and ``mean`` are ``None`` (``flag == "no_completions"``) when no window completed
    a request, (``flag == "no_busy_time"``) when the windows with completions have no busy
    time, or (``flag == "out_of_range"``) when the total busy time, a window's mean
    ``B_k / n_k`` or the p95 exceeds the float range.
    """

    p95: float | None
    mean: float | None
    windows_used: int
    windows_ignored: int
    flag: str | None
    fast_mean: float | None = None
    slow_mean: float | None = None
    slow_share: float | None = None


def service_tail_p95(busy_times: Any, completions: Any) -> ServiceTail:
    """Service-time p95 from per-window busy times ``B_k`` and completions ``n_k``: the
    narrowest two-phase marginal that holds the window means (module docstring).

    ``a`` and ``b`` are the ``0.5%`` and ``99.5%`` quantiles of ``m_k = B_k / n_k`` over the
    windows with ``n_k > 0``, less the noise of exponential services (:func:`_denoised`), and
    clipped to hold ``m = sum B / sum n``; ``p = (m - a)/(b - a)``,
    and the p95 solves ``p exp(-x/b) + (1 - p) exp(-x/a) = 0.05``; equal ends give the
    exponential's ``m ln 20``. ``busy_times`` in (core-)seconds, as for
    :func:`estimators.mapfit.service_p95`. Raises ``ValueError`` naming
    ``busy_times``/``completions`` for empty, mismatched, non-finite or negative input;
    never NaN.
    """
    checked = _windows(busy_times, completions)
    if isinstance(checked, ServiceTail):
        return checked
    b, n, ignored, mean, means = checked
    lo, hi = _quantiles(means, (_BAND, 1.0 - _BAND))
    fast = min(_denoised(means, n, lo, -1.0), mean)
    slow = max(_denoised(means, n, hi, 1.0), mean)
    share = (mean - fast) / (slow - fast) if slow > fast else 1.0
    p95 = _two_phase_quantile(share, fast, slow)
    if not math.isfinite(p95):
        return ServiceTail(None, None, b.size, ignored, "out_of_range")
    return ServiceTail(p95, mean, b.size, ignored, None, fast, slow, share)


def _denoised(means: np.ndarray, completions: np.ndarray, end: float, side: float) -> float:
    """The phase mean ``mu`` behind a band end. Windows served in one phase have
    ``m_k ~ mu (1 + e / sqrt(n_k))``, ``e`` about standard normal (exponential services), so
    if a share ``s`` of all windows is served in that phase, the band end (the ``0.5%`` share
    of all windows beyond it) is their ``1 - 0.005 / s`` quantile, ``mu (1 +- z_s / sqrt(n))``
    with ``n`` the median completions of the windows at or beyond the end. ``s`` is read as
    the share of windows within ``z_s / sqrt(n)`` of ``mu`` or beyond, starting from ``s = 1``
    (two refinements; a refinement that leaves ``s`` as it was ends them, the next would
    repeat it). Kept as is when the factor is not positive (fewer than ``z^2``
    completions)."""
    def beyond(x: float) -> np.ndarray:
        return means >= x if side > 0.0 else means <= x

    spread = 1.0 / math.sqrt(_median(completions[beyond(end)]))
    share, mu = 1.0, end
    for _ in range(3):
        z = _STANDARD_NORMAL.inv_cdf(1.0 - _BAND / max(share, 2.0 * _BAND))
        factor = 1.0 + side * z * spread
        if factor <= 0.0:
            return end
        mu = end / factor
        refined = float(np.count_nonzero(beyond(mu * (1.0 - side * z * spread)))) / means.size
        if refined == share:
            break
        share = refined
    return mu


def _median(values: np.ndarray) -> float:
    """``numpy.median(values)`` (no NaN) from ``numpy.partition``: the middle order
    statistic, or the mean ``(lo + hi) / 2`` of the two middle ones, as numpy rounds it;
    NaN for no values (only behind an infinite window mean)."""
    if values.size == 0:
        return math.nan
    half = values.size // 2
    if values.size % 2:
        return float(np.partition(values, half)[half])
    part = np.partition(values, (half - 1, half))
    return (float(part[half - 1]) + float(part[half])) / 2.0


def _quantiles(values: np.ndarray, levels: Sequence[float]) -> list[float]:
    """``numpy.quantile(values, levels)`` (the default, linear method; non-empty, no NaN) from
    one ``numpy.partition`` on the order statistics it interpolates, with numpy's arithmetic
    for the same rounding: the virtual index ``h = (N - 1) q`` between ``x_(floor h)`` and the
    next one (both the largest, index ``-1``, at ``h >= N - 1``), the weight ``t = h - floor h``
    and ``_lerp``'s interpolation, from the upper end when ``t >= 1/2``."""
    last = values.size - 1
    spots = []
    for h in (last * q for q in levels):
        lo, hi = (math.floor(h), math.floor(h) + 1) if h < last else (-1, -1)
        spots.append((h, lo, hi))
    part = np.partition(values, sorted({i % values.size for _, lo, hi in spots
                                        for i in (lo, hi)}))
    out = []
    for h, lo, hi in spots:
        a, b = float(part[lo]), float(part[hi])
        t, diff = h - lo, b - a
        out.append(b - diff * (1.0 - t) if t >= 0.5 else a + diff * t)
    return out


def window_mixture_p95(busy_times: Any, completions: Any) -> ServiceTail:
    """Service-time p95 under Mi et al. (2008), section 4.1's one service rate per window: the 0.95
    quantile of ``sum_k w_k exp(-x/m_k)`` with ``w_k = n_k / sum n`` and ``m_k = B_k / n_k``
    over the windows with ``n_k > 0`` (module docstring). Same input rules as
    :func:`service_tail_p95`."""
    checked = _windows(busy_times, completions)
    if isinstance(checked, ServiceTail):
        return checked
    b, n, ignored, mean, means = checked
    p95 = _mixture_quantile(n / float(n.sum()), means)
    if not math.isfinite(p95):
        return ServiceTail(None, None, b.size, ignored, "out_of_range")
    return ServiceTail(p95, mean, b.size, ignored, None)


def _windows(busy_times: Any, completions: Any
             ) -> ServiceTail | tuple[np.ndarray, np.ndarray, int, float, np.ndarray]:
    """The windows with completions, how many were left out, ``sum B / sum n`` and the window
    means ``B_k / n_k``; or the flagged result when there is nothing to estimate from (a
    window mean beyond the float range -- ``n_k < 1`` under a huge ``B_k`` -- is
    ``out_of_range``: its phase means would be infinite and the p95 meaningless)."""
    b, n, ignored = windows_with_completions(busy_times, completions)
    if b.size == 0:
        return ServiceTail(None, None, 0, ignored, "no_completions")
    with np.errstate(over="ignore"):
        total_b = float(b.sum())
    if not total_b > 0.0:
        return ServiceTail(None, None, b.size, ignored, "no_busy_time")
    if not math.isfinite(total_b):
        return ServiceTail(None, None, b.size, ignored, "out_of_range")
    with np.errstate(over="ignore"):
        means = b / n
    if not np.isfinite(means).all():
        return ServiceTail(None, None, b.size, ignored, "out_of_range")
    return b, n, ignored, total_b / float(n.sum()), means


def _mixture_quantile(weight: np.ndarray, means: np.ndarray) -> float:
    """``x`` with ``sum_k weight_k exp(-x / means_k) = 0.05``, ``means_k >= 0``.

    Only windows with ``m_k > 0`` have a tail; with ``W`` their total weight,
    ``W exp(-x/m_min) <= S(x) <= W exp(-x/m_max)`` brackets the root between
    ``m_min ln(20 W)`` and ``m_max ln(20 W)``; bisection on ``log x``, then the midpoint
    (:func:`_log_bisection`). The work is in units of ``m_max`` and in logs
    (``log(m_max / m_k)`` is finite for every ``m_k > 0``), so extreme windows (a mean of
    ``1e-310`` beside ``1``, or near the float range) neither overflow nor warn: a term whose
    exponent overflows is ``exp(-inf) = 0``. A quantile beyond the float range is returned as
    ``inf`` (the caller flags it)."""
    pos = means > 0.0
    if not np.any(pos):  # pragma: no cover - excluded by the caller (total busy time > 0)
        return 0.0
    w, m = weight[pos], means[pos]
    total = float(w.sum())
    if total <= _TAIL:     # the tail mass lives in windows without busy time
        return 0.0
    m_max = float(m.max())
    log_rate = math.log(m_max) - np.log(m)     # >= 0, finite for every m > 0

    def survival(log_x: float) -> float:       # S(m_max e^log_x)
        return float(np.dot(w, np.exp(-np.exp(log_x + log_rate))))

    with np.errstate(over="ignore"):           # exp(+large) = inf, its term exp(-inf) = 0
        return _log_bisection(survival, total, float(m.min()), m_max)


def _two_phase_quantile(share: float, fast: float, slow: float) -> float:
    """:func:`_mixture_quantile` of the two-phase marginal
    ``S(x) = (1 - p) exp(-x/a) + p exp(-x/b)`` (``p`` ``share``, ``0 <= a <= b``, ``b > 0``)
    in floats: the same bracket, bisection and rounding without numpy calls on two-element
    arrays. A fast phase with ``a = 0`` has no tail and no weight in ``W``."""
    if not slow > 0.0:  # pragma: no cover - no tail (the caller's mean underflowed to 0)
        return 0.0
    has_fast = fast > 0.0
    w_fast = 1.0 - share if has_fast else 0.0
    total = w_fast + share if has_fast else share
    if total <= _TAIL:
        return 0.0
    log_rate = math.log(slow) - math.log(fast) if has_fast else 0.0    # log(b / a) >= 0

    def survival(log_x: float) -> float:       # S(b e^log_x), log_x <= log ln(20 W) < 2
        fast_exponent = log_x + log_rate       # exp(+large) would overflow: its term is 0
        fast_tail = math.exp(-math.exp(fast_exponent)) if fast_exponent < _LOG_MAX else 0.0
        return w_fast * fast_tail + share * math.exp(-math.exp(log_x))

    return _log_bisection(survival, total, fast if has_fast else slow, slow)


def _log_bisection(survival: Callable[[float], float], total: float, m_min: float,
                   m_max: float) -> float:
    """The root ``x`` of ``survival = 0.05`` for a mixture of exponentials with total weight
    ``W`` (``total``) and means in ``[m_min, m_max]``, ``survival`` taking ``log(x / m_max)``:
    bisection of ``[log(m_min / m_max) + log ln(20 W), log ln(20 W)]`` (60 steps or to a width
    of ``1e-12``), then the midpoint; ``inf`` beyond the float range."""
    log_scale = math.log(math.log(total / _TAIL))
    lo = math.log(m_min) - math.log(m_max) + log_scale
    hi = log_scale
    for _ in range(_BISECT):
        if hi - lo <= 1e-12:
            break
        mid = 0.5 * (lo + hi)
        if survival(mid) > _TAIL:
            lo = mid
        else:
            hi = mid
    log_p95 = math.log(m_max) + 0.5 * (lo + hi)
    return math.exp(log_p95) if log_p95 < _LOG_MAX else math.inf
