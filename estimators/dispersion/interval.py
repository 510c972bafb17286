"""Slow bursts: the IDC-curve fit of the index of dispersion and its confidence interval.

:func:`index_of_dispersion_interval` (and
:meth:`estimators.dispersion.DispersionTracker.interval`) recovers the asymptote when the bursts
outlast the window. For a MAP(2) (an MMPP(2) in particular) the count variance is
``Var(N_t) = lambda [I t - (I - I_0)(1 - e^{-gamma t})/gamma]``, ``gamma`` the nonzero
eigenvalue of ``-(D0 + D1)`` (the phase-switch rate ``alpha``), so its IDC curve is

    Y(t) = I - (I - I_0) (1 - e^{-gamma t}) / (gamma t),

rising from ``I_0`` (1 for a MAP; here the level just above the window scale, which also takes
up what whole windows smooth away) to the asymptote ``I = SCV (1 + 2 sum_k rho_k)`` (Mi et al.
(2008), eq. (1); the KPC-Toolbox's IDC fitting, Casale, Zhang, Smirni, QEST 2008, fits the same
curve). The estimator

1. computes ``Y(t_j)`` as Fig. 2 does (overlapping runs on the busy-time axis, residuals
   around each run's own expectation: :mod:`estimators.dispersion.busy_axis`) at ``levels``
   geometric levels ``t_j = j T``, ``j = 1 .. S/(T min_runs)`` -- at least ``min_runs``
   disjoint runs at the top level;
2. fits ``E Y(t_j) = I (1 - f_j - t_j/S) + I_0 f_j``, ``f_j = (1 - e^{-gamma t_j})/(gamma t_j)``,
   by weighted least squares (weights ``1/(t_j Y(t_j)^2)``, the variance of a variance
   estimate from ``S/t_j`` runs); ``- I t_j/S`` is the bias of residuals around the trace's
   own rate ``lambda = sum n_k / S`` (``E (N_t - lambda t)^2 = Var N_t - lambda I t^2/S``),
   which Fig. 2 corrects by ``1/(1 - t/S)`` only when ``Y(t) = I``. ``I`` and ``I_0`` are
   linear given ``gamma``; ``gamma`` is profiled over a log grid and refined by parabolas
   (the estimate is then a smooth function of the data);
3. fits three nested curves: *level*, ``Y(t_j) = I (1 - t_j/S)`` (converged from ``t = T``
   on: ``I`` is pooled over all levels by the same weights, so the short, well-sampled levels
   dominate -- Fig. 2's reading); *flat*, ``gamma T >= 1`` (bursts shorter than a window, the
   curve may still rise over the first few levels); and *free*, ``gamma t_max >= 1`` (the
   curve has bent within the levels the trace allows: the extrapolation is never more than
   ``e/(e - 1)`` times the rise already seen). A richer curve is used only when it exceeds
   the simpler one by more than 2 jackknife standard errors of their difference (free over
   flat, else flat over level): a flat curve's noise is not extrapolated. The level is needed
   because the flat fit alone reads ``I`` off the long levels, where a converged curve carries
   only noise (the database MAP of Mi et al. (2008), ``gamma T`` ~ 490, 2160 windows: error SD
   11%, against 5% with the level, as Fig. 2's). Where the curve still rises between ``T`` and
   ``3T`` (``alpha T`` ~ 8, ``Y(T)`` = 0.87 ``I``) the level pooled from ``T`` reads ~10% low
   until the trace shows the rise, so ``Y(T)`` is left out of the pool when the level from
   ``2T`` on exceeds it by more than :data:`_SELECT_LEVEL` (1) jackknife SE: the rule fires on
   ~20% of converged curves, where leaving ``Y(T)`` out costs little noise, and on ~90% of the
   ``alpha T`` ~ 8 curves at 2000 windows, where it raises the share of traces read within
   +-20% of ``I`` (bench/accuracy/dispersion.py, table 1). ``Y(T)`` is dropped rather than the
   flat fit taken when ``Y(T)`` falls short of the level: whole windows put ``Y(T)`` ~2% low
   even on a converged curve, and a false jump to the flat fit reads ``I`` off the long
   levels, where a false drop of ``Y(T)`` only reads it from ``2T``. A falling curve is read at
   its pooled level: negatively correlated service would read high, but a fall is far likelier
   noise (on an 8-core tier with the MAP of Mi et al. (2008), I = 202, a two-sided choice takes
   a 2-SE fall and reads 129);
4. the interval: a delete-a-block jackknife over ``blocks`` contiguous blocks of the busy-time
   axis (every run that touches the block is left out, the span ``S`` shrinks by the block):
   ``se^2 = (m - 1)/m sum_b (I_(b) - mean I_(b))^2``, interval ``I exp(-+ t_nu se / I)``
   (log scale; Student t with ``nu = (m - 1)/3`` degrees of freedom: the long bursts of a
   bursty trace sit in a few blocks, so the jackknife variance has fewer effective terms than
   ``m - 1`` -- calibrated on the bench, see :data:`_DOF_SHARE`). When a simpler curve is kept
   but the next richer one reads higher (flat over level, free over flat), the upper bound
   reaches up to that one's (the data cannot yet tell the curve from a rising one). ``upper``
   is ``inf`` when the free fit needed the lowest ``gamma`` allowed (``unresolved``: the
   trace is too short for these bursts).

Acting on ``I`` is decided by the interval, not by a window count: a tier is bursty when
``lower > idc_threshold`` (:meth:`DispersionInterval.above`), not bursty when
``upper < idc_threshold``, undecided otherwise. Accuracy and coverage (M/MMPP(2)/1 queues,
alpha T from 0.05 to 8): ``bench/accuracy/dispersion.py`` and docs/accuracy.md ("Index of
dispersion: slow bursts and confidence intervals").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from estimators.dispersion.busy_axis import REL_ZERO, Axis, axis_scale, variance_ratio
from estimators.dispersion.inputs import checked_completions, checked_count, checked_scalar, \
    checked_utilization, checked_window_s
from estimators.dispersion.point import NEUTRAL_VALUE


#: levels ``t_j = j T`` of the fitted curve: ``j`` on a geometric grid from 1 to
#: ``S / (T min_runs)`` (at least ``min_runs`` disjoint runs at the top level)
DEFAULT_MIN_RUNS = 8
DEFAULT_LEVELS = 16
#: block jackknife over the busy-time axis: the trace is cut into this many blocks
DEFAULT_BLOCKS = 20
DEFAULT_CONFIDENCE = 0.95
#: profile grid of the decay rate ``gamma`` (per ``T`` of busy time): from
#: ``_GAMMA_LOW / t_max`` (the curve has just begun to bend at the top level) to ``_GAMMA_HIGH``
#: (flat from ``t = T`` on: phases mix within a window)
_GAMMA_LOW = 1.0
_GAMMA_HIGH = 50.0
_GAMMA_GRID = 40
#: the flat fit's lower end (per T): bursts shorter than a window
_GAMMA_FLAT = 1.0
#: jackknife SEs by which the free fit must differ from the flat one to be used
_SELECT = 2.0
#: jackknife SEs by which the level read from ``t = 2T`` on must exceed the level pooled from
#: ``t = T`` for ``Y(T)`` to be left out of it. Lower than :data:`_SELECT`: the costs are not
#: symmetric -- leaving ``Y(T)`` out when the curve has converged costs little noise (the
#: database MAP of Mi et al. (2008): error SD 6.2% against 5.5%), keeping it while the curve still rises between
#: ``T`` and ``3T`` reads ~10% low (``alpha T`` ~ 8: ``Y(T)`` = 0.87 ``I``)
_SELECT_LEVEL = 1.0
#: the interval's Student t has ``(blocks - 1) / _DOF_SHARE`` degrees of freedom, not
#: ``blocks - 1``: a bursty trace's long bursts sit in a few blocks, so the jackknife variance
#: is a sum of few effective terms. Calibrated on bench/accuracy/dispersion.py (with
#: ``blocks - 1`` degrees of freedom a 95% interval covers 88-100% by case, with a third of
#: them 90-100%)
_DOF_SHARE = 3

IntervalReason = Literal["ok", "no_busy_time", "no_completions", "no_variation", "too_short",
                         "unresolved"]
"""Why a :class:`DispersionInterval` is (not) trustworthy:

``ok``              the curve was fitted and the interval is finite;
``no_busy_time``    all windows idle (value 1.0, interval ``[0, inf)``);
``no_completions``  busy time but no completions (value 1.0, interval ``[0, inf)``);
``no_variation``    ``Var(N_t) = 0`` at every level (value 0.0);
``too_short``       fewer than ``4 * min_runs`` units of busy time (``T``; ``cores T / s`` on
                    a multi-core tier): fewer than four levels
                    (value ``Y(T)`` or 1.0, interval ``[0, inf)``);
``unresolved``      the curve has not bent within the levels the trace allows (the fitted
                    ``gamma`` sits at the lower end of its range): ``I`` is at least
                    ``lower``, but ``upper`` is ``inf``.
"""


@dataclass(frozen=True)
class DispersionInterval:
    """Outcome of :func:`index_of_dispersion_interval`.

    ``value``       ``I_inf``, the asymptote of the fitted IDC curve, finite and >= 0;
    ``lower``, ``upper``  the ``confidence`` interval of ``I`` (``upper`` may be ``inf``:
                    unresolved or too short; never NaN);
    ``confidence``  nominal coverage of ``[lower, upper]``;
    ``i0``          the fitted short-time level ``I_0`` (``Y`` just above the window scale);
    ``gamma``       fitted decay rate of the curve, per second of busy time (0.0 if none);
    ``windows``     windows used; ``busy_s`` their busy time ``S`` in seconds;
    ``t``           the levels ``t_j`` (seconds of busy time); ``curve`` the measured
                    ``Y(t_j)``; ``fitted`` the fitted curve at the same levels;
    ``reason``      ``"ok"`` or why the result is flagged (see :data:`IntervalReason`).
    """

    value: float
    lower: float
    upper: float
    confidence: float
    i0: float
    gamma: float
    windows: int
    busy_s: float
    reason: IntervalReason
    t: tuple[float, ...] = ()
    curve: tuple[float, ...] = ()
    fitted: tuple[float, ...] = ()

    @property
    def flagged(self) -> bool:
        """True unless the curve was fitted and the interval is finite."""
        return self.reason != "ok"

    def above(self, threshold: float) -> bool:
        """``I > threshold`` with the interval's confidence: its lower bound exceeds it."""
        return self.lower > threshold

    def below(self, threshold: float) -> bool:
        """``I < threshold`` with the interval's confidence: its upper bound is under it."""
        return self.upper < threshold


def index_of_dispersion_interval(utilization: Any, completions: Any, window_s: float, *,
                                 confidence: float = DEFAULT_CONFIDENCE,
                                 min_runs: int = DEFAULT_MIN_RUNS,
                                 levels: int = DEFAULT_LEVELS,
                                 blocks: int = DEFAULT_BLOCKS,
                                 cores: float = 1.0) -> DispersionInterval:
    """``I`` of the service process by fitting the IDC curve, with a confidence interval.

    ``utilization``, ``completions``, ``window_s`` as for :func:`index_of_dispersion`;
    ``confidence`` in (0, 1); ``min_runs`` (>= 2) disjoint runs at the top level;
    ``levels`` (>= 4) aggregation levels; ``blocks`` (>= 4) jackknife blocks; ``cores``
    (> 0): ``utilization`` is the mean over that many cores, so window ``k`` holds
    ``cores U_k window_s`` core-seconds of busy time, laid on the axis in units of
    ``cores window_s / s`` core-seconds (:func:`estimators.dispersion.busy_axis.axis_scale`;
    ``cores = 1``: the single-core axis). ``t``, ``busy_s`` and ``gamma`` of the result are
    in core-seconds of busy time.
    See the module docstring ("Slow bursts"). Never NaN; invalid input raises ``ValueError``
    naming the field and the value.
    """
    window = checked_window_s(window_s)
    conf = checked_scalar(confidence, "confidence")
    if not 0.0 < conf < 1.0:
        raise ValueError(f"confidence: must be in (0, 1), got {confidence!r}")
    runs = checked_count(min_runs, "min_runs", 2)
    n_levels = checked_count(levels, "levels", 4)
    n_blocks = checked_count(blocks, "blocks", 4)
    c = checked_scalar(cores, "cores")
    if not c > 0.0:
        raise ValueError(f"cores: must be > 0, got {cores!r}")
    u = checked_utilization(utilization)
    n = checked_completions(completions, u.size)
    scale = axis_scale(c, u)
    unit = window if scale == 1.0 and c == 1.0 else window * c / scale
    return interval_checked(u, n, unit, conf, runs, n_levels, n_blocks, scale)


def _unknown(reason: IntervalReason, conf: float, windows: int, busy: float,
             value: float = NEUTRAL_VALUE) -> DispersionInterval:
    return DispersionInterval(value, 0.0, math.inf, conf, value, 0.0, windows, busy, reason)


@lru_cache(maxsize=256)
def _levels(top: int, count: int) -> np.ndarray:
    """Aggregation levels ``j`` (in windows of busy time): geometric from 1 to ``top``
    (read-only: kept for the next call with the same history length)."""
    js = np.unique(np.round(np.geomspace(1.0, float(top), count)).astype(np.int64))
    js.flags.writeable = False
    return js


@lru_cache(maxsize=256)
def _grid(low: float, high: float, count: int) -> np.ndarray:
    """``np.geomspace(low, high, count)``, read-only, kept for the next call."""
    grid = np.geomspace(low, high, count)
    grid.flags.writeable = False
    return grid


def _level_sums(axis: Axis, js: np.ndarray, edges: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per level ``j``: total squared residual of all runs, and per jackknife block the
    squared residual and the number of the runs that touch the block.

    Runs start every ``T`` (positions ``g = 0 .. P - j``); run ``g`` covers cells ``g .. g+j-1``
    and touches block ``[a, b)`` when ``g < b`` and ``g + j > a``. Every level at once, a row
    each (the runs a level lacks padded with 0 after its own, so each row's running sum is
    the level's alone)."""
    points = axis.busy.size
    runs = points - js                                                  # (L,)
    g = np.arange(int(runs[0]) if js.size else 0)
    valid = g[None, :] < runs[:, None]
    end = np.minimum(g[None, :] + js[:, None], points - 1)             # (L, G): g + j
    residual = ((axis.done[end] - axis.done[g]) - axis.rate * (axis.busy[end] - axis.busy[g]))
    residual = np.where(valid, residual, 0.0)
    cum = np.zeros((js.size, g.size + 1))
    np.cumsum(residual * residual, axis=1, out=cum[:, 1:])
    level = np.arange(js.size)
    total = cum[level, runs]
    count = runs.astype(float)
    first = np.minimum(np.maximum(edges[:-1, None] - js[None, :] + 1, 0), runs)  # integers
    last = np.minimum(np.maximum(edges[1:, None], 0), runs)
    part = cum[level, last] - cum[level, first]
    return total, count, part, (last - first).astype(float)


def _wls(y: np.ndarray, t: np.ndarray, weight: np.ndarray, span: np.ndarray,
         gammas: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weighted least squares of ``y`` (rows: replicates ``r``, columns: levels ``j``) on
    ``E Y(t) = I_inf (1 - f(t) - t/S) + I_0 f(t)``, ``f(t) = (1 - e^{-gamma t})/(gamma t)``,
    for each ``gammas[r, g]`` (a single row ``(1, G)``: the same grid for every replicate, its
    ``f(t)`` computed once); ``span[r]`` is ``S``. Returns ``I_inf``, ``I_0`` and the weighted
    squared error, shape ``(R, G)``, and the fitted curves ``(R, G, J)``. ``I_0, I_inf >= 0``
    (when one comes out negative it is 0 and the other is refitted alone)."""
    gt = gammas[:, :, None] * t[None, None, :]                        # (R, G, J)
    c = -np.expm1(-gt) / gt                                           # f(t)
    a = 1.0 - c - t[None, None, :] / span[:, None, None]
    w = weight[None, None, :]
    yy = y[:, None, :]
    wa, wc = w * a, w * c
    total = np.add.reduce                         # ndarray.sum without its Python wrapper
    saa, scc, sac = total(wa * a, -1), total(wc * c, -1), total(wa * c, -1)
    say, scy = total(wa * yy, -1), total(wc * yy, -1)
    det = saa * scc - sac * sac
    ok = det > 1e-12 * saa * scc
    det = np.where(ok, det, 1.0)
    inf_ = np.where(ok, (say * scc - scy * sac) / det, say / saa)
    zero = np.where(ok, (scy * saa - say * sac) / det, 0.0)
    neg0 = zero < 0.0
    zero = np.where(neg0, 0.0, zero)
    inf_ = np.where(neg0, say / saa, inf_)
    negi = inf_ < 0.0
    inf_ = np.where(negi, 0.0, inf_)
    zero = np.where(negi, np.maximum(scy / scc, 0.0), zero)
    model = inf_[..., None] * a + zero[..., None] * c
    sse = total(w * (yy - model) ** 2, -1)
    return inf_, zero, sse, model


def _fit_curves(y: np.ndarray, t: np.ndarray, weight: np.ndarray, span: np.ndarray,
                grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                           np.ndarray]:
    """:func:`_wls` profiled over ``gamma``: the best point of the log-spaced ``grid``, then
    refined by successive parabolas through three points in ``log gamma`` (so that the
    estimate is a smooth function of the data, which the jackknife needs). Returns per
    replicate ``I_inf``, ``I_0``, ``gamma``, the fitted curve and whether ``gamma`` sits at
    the lower end of the grid."""
    return _fit_curves_many(y, t, weight, span, [grid])[0]


def _fit_curves_many(y: np.ndarray, t: np.ndarray, weight: np.ndarray, span: np.ndarray,
                     grids: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray,
                                                            np.ndarray, np.ndarray]]:
    """:func:`_fit_curves` on each of ``grids``, their trials side by side in one :func:`_wls`
    per step (elementwise in ``gamma``, a row's sums over the levels alone: each fit's
    numbers are those it gets by itself)."""
    G = [g.size for g in grids]
    at = np.cumsum([0] + G).tolist()
    _, _, sse, _ = _wls(y, t, weight, span, np.concatenate(grids)[None, :])
    low_end, log_g, step, lo, hi = [], [], [], [], []
    for k, grid in enumerate(grids):
        best = np.argmin(sse[:, at[k]:at[k + 1]], axis=1)
        low_end.append(best == 0)
        log_g.append(np.log(grid[np.minimum(np.maximum(best, 1), grid.size - 2)]))
        step.append(math.log(grid[1] / grid[0]))
        lo.append(math.log(grid[0]))
        hi.append(math.log(grid[-1]))
    # the grids' refinements side by side, ``(K, R)``: elementwise, each as by itself (the
    # clips as ``np.clip`` computes them, its ``max`` then ``min``, without its wrappers)
    K, R = len(grids), y.shape[0]
    lgs, steps = np.array(log_g), np.array(step)[:, None]
    lows, highs = np.array(lo)[:, None], np.array(hi)[:, None]
    around = np.array([-1.0, 0.0, 1.0])
    maximum, minimum, where = np.maximum, np.minimum, np.where
    for _ in range(3):
        pts = lgs[:, :, None] + (steps * around)[:, None, :]           # (K, R, 3)
        _, _, e_all, _ = _wls(y, t, weight, span,
                              np.exp(pts.transpose(1, 0, 2).reshape(R, 3 * K)))
        e = e_all.reshape(R, K, 3).transpose(1, 0, 2)                  # (K, R, 3)
        e0, e1, e2 = e[:, :, 0], e[:, :, 1], e[:, :, 2]
        curv = e0 - 2.0 * e1 + e2
        up = curv > 0
        shift = where(up, 0.5 * (e0 - e2) / where(up, curv, 1.0), where(e0 < e2, -1.0, 1.0))
        lgs = minimum(maximum(lows, lgs + steps * minimum(maximum(-1.0, shift), 1.0)), highs)
        steps = steps * 0.35
    gamma = [np.exp(lgs[k]) for k in range(K)]
    inf_, zero, _, model = _wls(y, t, weight, span, np.stack(gamma, axis=1))
    return [(inf_[:, k], zero[:, k], gamma[k], model[:, k], low_end[k])
            for k in range(len(grids))]


@lru_cache(maxsize=64)
def _t_quantile(p: float, dof: int) -> float:
    """Student t quantile (scipy, imported on first use)."""
    from scipy.stats import t as student_t
    return float(student_t.ppf(p, dof))


def _log_interval(value: float, jack: np.ndarray, q: float) -> tuple[float, float]:
    """``value exp(-+ q se / value)``: the interval on the log scale, ``se`` the block
    jackknife's standard error ``sqrt((m - 1)/m sum_b (theta_b - mean theta)^2)``."""
    m = jack.size
    se = math.sqrt((m - 1) / m * float(np.sum((jack - jack.mean()) ** 2)))
    if not value > 0.0:
        return 0.0, math.inf if se > 0.0 else 0.0
    rel = q * se / value
    return value * math.exp(-rel), value * math.exp(rel) if rel < 700.0 else math.inf


def _fit_level(y: np.ndarray, t: np.ndarray, weight: np.ndarray, span: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The curve converged from ``t = T`` on: ``E Y(t_j) = I (1 - t_j/S)`` (Fig. 2's reading,
    pooled over the levels by the same weights), per replicate (rows of ``y``; ``span[r]`` is
    ``S``). Returned as :func:`_fit_curves` does, with ``I_0 = I`` and ``gamma`` at the top of
    its grid (the phases mix within a window)."""
    a = 1.0 - t[None, :] / span[:, None]
    value = np.maximum((weight * a * y).sum(-1) / (weight * a * a).sum(-1), 0.0)
    gamma = np.full(value.shape, _GAMMA_HIGH)
    return value, value, gamma, value[:, None] * a, np.zeros(value.shape, dtype=bool)


def _exceeds(richer: np.ndarray, simpler: np.ndarray, ses: float = _SELECT) -> bool:
    """The richer fit's estimate exceeds the simpler one's by more than ``ses``
    block-jackknife standard errors of their difference (element 0: the full trace; the
    rest: the delete-a-block replicates)."""
    diff = richer - simpler
    m = diff.size - 1
    se = math.sqrt((m - 1) / m * float(np.sum((diff[1:] - diff[1:].mean()) ** 2)))
    return float(diff[0]) > ses * se


def _level_reading(both: np.ndarray, t: np.ndarray, weight: np.ndarray, span: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_fit_level` pooled from ``t = T`` on, or from ``t = 2T`` on when that reads
    higher by more than :data:`_SELECT_LEVEL` jackknife SEs of the difference: the curve still
    rises past the window scale (``alpha T`` ~ 8), so ``Y(T)``, which carries ~38% of the
    pooled weight, would pull the level low."""
    from_t = _fit_level(both, t, weight, span)
    from_2t = _fit_level(both, t, np.where(t >= 2.0, weight, 0.0), span)
    return from_2t if _exceeds(from_2t[0], from_t[0], _SELECT_LEVEL) else from_t


def interval_checked(u: np.ndarray, n: np.ndarray, window: float, conf: float, min_runs: int,
                     n_levels: int, n_blocks: int, scale: float = 1.0) -> DispersionInterval:
    """The fit on the busy-time axis in units of ``window`` (core-)seconds, window ``k``
    ``scale U_k`` units long."""
    axis = Axis.build(u, n, scale)
    busy = axis.total * window
    if axis.total <= 0.0:
        return _unknown("no_busy_time", conf, u.size, busy)
    if axis.rate <= 0.0:
        return _unknown("no_completions", conf, u.size, busy)
    cells = axis.busy.size - 1                          # P: whole T of busy time
    top = cells // min_runs
    if top < 4 or cells < n_blocks:
        y1 = variance_ratio(axis, 1)[0] if cells >= 2 else NEUTRAL_VALUE
        return _unknown("too_short", conf, u.size, busy, y1)
    js = _levels(top, n_levels)
    edges = np.round(np.linspace(0, cells, n_blocks + 1)).astype(np.int64)
    total, count, part, part_n = _level_sums(axis, js, edges)
    t = js.astype(float)
    span = axis.total
    expected = axis.rate * t                            # E[N_t] (per T of busy time)
    y = total / count / expected
    if not np.any(y > REL_ZERO):
        return DispersionInterval(0.0, 0.0, 0.0, conf, 0.0, 0.0, u.size, busy, "no_variation",
                                  tuple((t * window).tolist()), tuple(y.tolist()),
                                  tuple(np.zeros_like(y).tolist()))
    # jackknife replicates: the runs touching block b left out; S less the block
    y_jack = (total - part) / np.maximum(count - part_n, 1.0) / expected
    span_jack = span - np.diff(edges) * (span / cells)
    # weights 1/Var(Y(t_j)) ~ 1/(t_j Y(t_j)^2): first from a running maximum of y, then from
    # the fitted curve (the flat fit's: it is the smoother)
    smooth = np.maximum.accumulate(np.maximum(y, REL_ZERO))
    weight = 1.0 / (t * smooth * smooth)
    spans = np.array([span])
    flat_grid = _grid(_GAMMA_FLAT, _GAMMA_HIGH, _GAMMA_GRID // 2)
    for _ in range(2):
        value, _, _, model, _ = _fit_curves(y[None, :], t, weight, spans, flat_grid)
        level = np.maximum(model[0], 1e-3 * max(float(value[0]), REL_ZERO))
        weight = 1.0 / (t * level * level)
    free_grid = _grid(min(_GAMMA_LOW / float(t[-1]), _GAMMA_FLAT), _GAMMA_HIGH, _GAMMA_GRID)
    both = np.vstack([y, y_jack])
    span_all = np.concatenate(([span], span_jack))
    steady = _level_reading(both, t, weight, span_all)
    flat, free = _fit_curves_many(both, t, weight, span_all, [flat_grid, free_grid])
    # the curve is extrapolated only when it rises beyond the window scale by more than its
    # noise: the free fit exceeds the flat one by more than _SELECT jackknife SEs (a falling
    # curve -- negatively correlated service -- is read flat: at I ~ 1 a "fall" is noise);
    # likewise the flat fit is used only when it exceeds the level, the curve read as
    # converged from t = T on (otherwise I would be read off the long, noisy levels)
    curved = _exceeds(free[0], flat[0])
    risen = curved or _exceeds(flat[0], steady[0])
    value, i0, gamma_t, model, low_end = free if curved else flat if risen else steady
    est = float(value[0])
    q = _t_quantile(0.5 + conf / 2.0, max(2, (n_blocks - 1) // _DOF_SHARE))
    lower, upper = _log_interval(est, value[1:], q)
    # the data cannot tell the chosen curve from the next richer one when that reads higher
    # (bursts as long as a window, or longer than the top level): the interval reaches up to
    # its upper bound
    for simpler, richer in ((steady, flat), (flat, free))[int(risen) + int(curved):]:
        if float(richer[0][0]) > float(simpler[0][0]):
            upper = max(upper, _log_interval(float(richer[0][0]), richer[0][1:], q)[1])
    reason: IntervalReason = "ok"
    if curved and bool(low_end[0]):
        reason = "unresolved"
        upper = math.inf
    gamma = float(gamma_t[0]) / window
    return DispersionInterval(est, lower, upper, conf, float(i0[0]), gamma, u.size, busy, reason,
                              tuple((t * window).tolist()), tuple(y.tolist()),
                              tuple(model[0].tolist()))
