"""Index of dispersion ``I`` of a server's service process from coarse monitoring windows.

Paper 000 (Mi, Casale, Cherkasova, Smirni 2008), §2.2 and Fig. 2. For monitoring windows
``k = 1..K`` of length ``T`` we know only the utilization ``U_k`` and the number of completed
requests ``n_k``. The busy time of window ``k`` is ``B_k = U_k T``. Concatenating the busy
periods masks out queueing: ``N_t``, the number of completions in ``t`` seconds of *busy* time, is
a property of the service process alone, and (eq. (2))

    I = lim_{t -> inf} Var(N_t) / E[N_t].

Fig. 2 evaluates ``Y(t) = Var(N_t)/E[N_t]`` for ``t = T, 2T, 3T, ...`` over runs of consecutive
windows whose busy times add up to ``t``, and stops when ``|1 - Y(t)/Y(t - T)| <= tol``.

How "busy times add up to ``t``" is resolved here
-------------------------------------------------
Lay the windows end to end on the *busy-time axis*: window ``k`` occupies
``[C_k, C_k + B_k)`` with ``C_k = B_1 + ... + B_{k-1}`` and holds ``n_k`` completions; the axis
ends at ``S = sum_k B_k``. Completions are only known per window, so a run can only start and
end at window edges ``C_k``.

* **Runs placed uniformly in busy time, overlapping.** For each ``s = 0, T, 2T, ...`` with
  ``s + t <= S`` the run is the windows between the edge nearest to ``s`` and the edge nearest
  to ``s + t``; ``N_t`` is their total completions and ``b`` their busy time (``|b - t| < T``).
  Runs do *not* start at every window (Fig. 2's "for each ``A_k``"): in a queue with bursty
  service, windows in fast-service phases drain the queue and carry little busy time, so window
  edges crowd into the bursts on the busy-time axis and one run per window over-samples them
  (we measured ``Y(T)`` 5x too large for an ``I = 21`` MAP(2)). Overlapping runs (every ``T``)
  give about 2/3 of the variance of disjoint runs (overlapping batch means).
* **Nearest edge, centred on the run's own expectation.** Runs of whole windows have random
  busy length ``b``; around a common mean that jitter adds ``lambda^2 Var(b)`` to ``Var(N_t)``
  (we measured ``Y(T)`` = 2.5 for Poisson completions in an M/M/1 queue with 14 completions per
  window; paper §4.2 had 465 per window).
  So ``Var(N_t)`` is taken as the mean of ``(N_t - lambda b)^2`` with ``lambda = sum n_k / S``,
  and ``E[N_t] = lambda * mean(b)``. Cutting at the *nearest* edge (rather than the first edge
  past ``s + t``, which is exactly unbiased for Poisson completions by optional stopping) halves
  the smoothing bias of whole windows for bursty processes (``Y(2T)`` 2-3% instead of 7-9% below
  its exact-length value for ``I = 20`` and ``I = 200`` MAP(2)s) at the cost of about +1% for
  Poisson completions.
* **Overlap bias.** The mean square residual is low by about ``(1 - t/S)`` when ``Var(N_t)`` grows
  linearly in ``t`` (``lambda`` is estimated from the same trace); we divide by it (<= 1% at
  the default ``min_samples``).
* **"Too short" counts disjoint runs.** Overlapping runs are far from independent, so Fig. 2's
  "fewer than 100 values of ``N_t^k``" test is applied to the number of *disjoint* runs,
  ``floor(S/t)``: ``t`` never exceeds ``S / min_samples``. If ``Y(t)`` has not converged by
  then, the result is flagged ``too_short`` (the paper's "collect new measures").
* **Cap.** ``t`` also never exceeds ``max_steps * T``; reaching it without convergence gives
  ``converged=False`` with the last ``Y(t)``.

Idle windows (``U_k = 0``) take no room on the busy-time axis (completions reported in such a
window, from rounding of ``U_k``, go with the window edge they sit on). Because only the
busy-time axis matters, ``Y(t)`` depends on ``T`` only through ``t = jT``; internally busy time is
measured in units of ``T`` (``B_k / T = U_k``).

Accuracy: the stopping rule ``|1 - Y(t)/Y(t - T)| <= tol`` stops as soon as ``Y`` flattens, so it
returns ``Y`` at ``t = 2T`` or ``3T`` for most processes. For a MAP(2) whose phases mix at rate
``alpha`` (busy time), ``Y(t)`` approaches ``I`` like ``1 - (1 - exp(-alpha t))/(alpha t)``: the
estimate is within ~10% of ``I`` only if ``alpha T >= 5``, i.e. the window must be long against
the bursts. ``bench/bench_dispersion.py`` prints the accuracy by level of ``I``.

Slow bursts: the IDC-curve fit and its confidence interval
----------------------------------------------------------
:func:`index_of_dispersion_interval` (and :meth:`DispersionTracker.interval`) recovers the
asymptote when the bursts outlast the window. For a MAP(2) (an MMPP(2) in particular) the count
variance is ``Var(N_t) = lambda [I t - (I - I_0)(1 - e^{-gamma t})/gamma]``, ``gamma`` the
nonzero eigenvalue of ``-(D0 + D1)`` (the phase-switch rate ``alpha``), so its IDC curve is

    Y(t) = I - (I - I_0) (1 - e^{-gamma t}) / (gamma t),

rising from ``I_0`` (1 for a MAP; here the level just above the window scale, which also takes
up what whole windows smooth away) to the asymptote ``I = SCV (1 + 2 sum_k rho_k)`` (paper
000 eq. (1); the KPC-Toolbox's IDC fitting, Casale, Zhang, Smirni, QEST 2008, fits the same
curve). The estimator

1. computes ``Y(t_j)`` as Fig. 2 does (overlapping runs on the busy-time axis, residuals
   around each run's own expectation) at ``levels`` geometric levels ``t_j = j T``,
   ``j = 1 .. S/(T min_runs)`` -- at least ``min_runs`` disjoint runs at the top level;
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
   flat, else flat over level): a flat curve's noise is not extrapolated. Without the level
   the flat fit read ``I`` off the long levels, where a converged curve carries only noise
   (paper 000's db MAP, ``gamma T`` ~ 490, 2160 windows: error SD 11% against Fig. 2's 5%;
   with the level 5%). Where the curve still rises between ``T`` and ``3T`` (``alpha T`` ~ 8,
   ``Y(T)`` = 0.87 ``I``) the level pooled from ``T`` reads ~10% low until the trace shows the
   rise, so ``Y(T)`` is left out of the pool when the level from ``2T`` on exceeds it by more
   than :data:`_SELECT_LEVEL` (1) jackknife SE: the rule fires on ~20% of converged curves,
   where leaving ``Y(T)`` out costs little (paper 000's db MAP, two sets of 30 seeds: error SD
   5.5% / 6.5% -> 6.2% / 7.6%), and on ~90% of the ``alpha T`` ~ 8 curves at 2000 windows
   (bench/accuracy_dispersion.py, table 1: I~200 within +-20% on 88% -> 96% of seeds 0-49, 74%
   -> 86% of seeds 500-549, 86% on both of seeds 1000-1049). (Jumping to the flat fit when
   ``Y(T)`` falls short of the level by 2 SEs was tried: whole windows put ``Y(T)`` ~2% low even
   on a converged curve, and a false jump reads ``I`` off the long levels; a false drop of
   ``Y(T)`` only reads it from ``2T``.) A falling curve is read at its pooled level (negatively
   correlated service would read high; but the falls measured were noise -- on an 8-core tier
   with paper 000's MAP, I = 202, a two-sided choice took a 2-SE fall and read 129);
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
alpha T from 0.05 to 8): ``bench/accuracy_dispersion.py`` and docs/accuracy.md ("Index of
dispersion: slow bursts and confidence intervals").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np

__all__ = ["DispersionEstimate", "DispersionInterval", "DispersionTracker", "index_of_dispersion",
           "index_of_dispersion_interval"]

Reason = Literal["ok", "no_busy_time", "no_completions", "no_variation", "too_short",
                 "not_converged"]
"""Why a :class:`DispersionEstimate` is (not) trustworthy:

``ok``              ``Y(t)`` converged;
``no_busy_time``    all windows idle (value 1.0);
``no_completions``  busy time but no completions (value 1.0);
``no_variation``    ``Var(N_t) = 0``, e.g. a constant trace (value 0.0: deterministic service);
``too_short``       fewer than ``min_samples`` disjoint runs before convergence (last ``Y(t)``,
                    or 1.0 if the trace is too short even for ``t = T``);
``not_converged``   ``t`` reached ``max_steps * T`` (last ``Y(t)``).
"""

#: Largest completion count accepted per window: counts above 2**53 are not exact in floats.
MAX_COMPLETIONS = float(2**53)
#: Default cap on ``t``, in windows: Fig. 2's example approximates ``t -> inf`` by ~120 T.
DEFAULT_MAX_STEPS = 256
#: Value reported when no estimate can be formed (no busy time, no completions): Poisson.
NEUTRAL_VALUE = 1.0
#: ``Var(N_t)`` below ``(_REL_ZERO * E[N_t])**2`` is rounding noise and is taken as 0.
_REL_ZERO = 1e-9
_GRID_EPS = 1e-9

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
#: symmetric -- leaving ``Y(T)`` out when the curve has converged costs little noise (paper
#: 000's db MAP: error SD 6.2% against 5.5%), keeping it while the curve still rises between
#: ``T`` and ``3T`` reads ~10% low (``alpha T`` ~ 8: ``Y(T)`` = 0.87 ``I``)
_SELECT_LEVEL = 1.0
#: the interval's Student t has ``(blocks - 1) / _DOF_SHARE`` degrees of freedom, not
#: ``blocks - 1``: a bursty trace's long bursts sit in a few blocks, so the jackknife variance
#: is a sum of few effective terms. Calibrated on bench/accuracy_dispersion.py (with
#: ``blocks - 1`` the coverage of a 95% interval was 88-100% by case; widened as 3 does:
#: 90-100%)
_DOF_SHARE = 3


@dataclass(frozen=True)
class DispersionEstimate:
    """Outcome of the Fig. 2 algorithm (paper 000).

    ``value``      the estimate of ``I``: the last computed ``Y(t)`` (``NEUTRAL_VALUE`` = 1.0 when
                   none could be computed), always finite and >= 0;
    ``t``          busy time (seconds) of the last ``Y(t)``; 0.0 when none was computed;
    ``converged``  ``|1 - Y(t)/Y(t-T)| <= tol`` was reached;
    ``samples``    number of ``N_t`` values (overlapping runs) behind ``value``;
    ``too_short``  fewer than ``min_samples`` disjoint runs of length ``t`` before convergence;
    ``reason``     ``"ok"`` or why the result is flagged (see :data:`Reason`);
    ``curve``      ``(Y(T), Y(2T), ...)`` as computed, for diagnostics.
    """

    value: float
    t: float
    converged: bool
    samples: int
    too_short: bool
    reason: Reason
    curve: tuple[float, ...] = ()

    @property
    def flagged(self) -> bool:
        """True unless the estimate converged normally."""
        return self.reason != "ok"


# --------------------------------------------------------------------------- validation
def _scalar(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name}: must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name}: must be finite, got {value!r}")
    return v


def _window_s(value: Any) -> float:
    v = _scalar(value, "window_s")
    if v <= 0:
        raise ValueError(f"window_s: must be > 0, got {value!r}")
    return v


def _tol(value: Any) -> float:
    v = _scalar(value, "tol")
    if not 0.0 < v < 1.0:
        raise ValueError(f"tol: must be in (0, 1), got {value!r}")
    return v


def _count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name}: must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value!r}")
    return int(value)


def _array(value: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not a numeric array ({exc})") from None
    return arr


def _first_bad(arr: np.ndarray, bad: np.ndarray, name: str, what: str) -> None:
    if np.any(bad):
        idx = np.unravel_index(int(np.argmax(bad)), bad.shape)
        where = idx[0] if len(idx) == 1 else idx
        raise ValueError(f"{name}: {what}, got {arr[idx]!r} at window {where}")


#: a utilization within this of [0, 1] is rounding (``1 + 1e-12``, ``-1e-15``): clamped into it
_U_ROUNDING = 1e-9


def _utilization(value: Any) -> np.ndarray:
    u = _array(value, "utilization")
    if u.ndim != 1:
        raise ValueError(f"utilization: must be 1-D (one value per window), got shape {u.shape}")
    _first_bad(u, ~np.isfinite(u), "utilization", "must be finite")
    if u.size and not (u.min() >= 0.0 and u.max() <= 1.0):
        _first_bad(u, (u < -_U_ROUNDING) | (u > 1.0 + _U_ROUNDING), "utilization",
                   "must be in [0, 1]")
        u = np.clip(u, 0.0, 1.0)                      # rounding residue (a copy)
    return u


def _completions(value: Any, windows: int) -> np.ndarray:
    n = _array(value, "completions")
    with np.errstate(over="ignore", invalid="ignore"):
        return _valid_completions(n, windows)


def _valid_completions(n: np.ndarray, windows: int) -> np.ndarray:
    if n.ndim not in (1, 2) or n.shape[0] != windows or (n.ndim == 2 and n.shape[1] == 0):
        raise ValueError(f"completions: must have shape ({windows},) or ({windows}, classes) to "
                         f"match utilization, got shape {n.shape}")
    _first_bad(n, ~np.isfinite(n), "completions", "must be finite")
    _first_bad(n, n < 0.0, "completions", "must be >= 0")
    total = n.sum(axis=1) if n.ndim == 2 else n
    _first_bad(total, total > MAX_COMPLETIONS, "completions",
               "total per window must be <= 2**53")
    return total


# --------------------------------------------------------------------------- the estimator
def index_of_dispersion(utilization: Any, completions: Any, window_s: float,
                        tol: float = 0.20, min_samples: int = 100, *,
                        max_steps: int = DEFAULT_MAX_STEPS) -> DispersionEstimate:
    """Estimate the index of dispersion ``I`` of the service process (paper 000, Fig. 2, §2.2).

    ``utilization``  ``U_k`` per window, in [0, 1] (shape ``(K,)``);
    ``completions``  ``n_k`` per window, shape ``(K,)`` or ``(K, classes)`` (summed over classes);
    ``window_s``     the sampling resolution ``T`` in seconds;
    ``tol``          convergence tolerance on ``|1 - Y(t)/Y(t - T)|`` (paper: 0.20);
    ``min_samples``  fewer disjoint runs of busy length ``t`` than this means "too short";
    ``max_steps``    cap: ``t <= max_steps * T``.

    Busy times ``B_k = U_k T``; for ``t = T, 2T, ...`` the counts ``N_t`` over runs of consecutive
    windows whose busy times add up to ``t`` (to within one window: runs start every ``T`` of busy
    time and are cut at the nearest window edges, see the module docstring),
    ``Y(t) = Var(N_t)/E[N_t]``, until ``|1 - Y(t)/Y(t - T)| <= tol``; the last ``Y(t)`` is the
    estimate.

    Never returns NaN/inf and never raises on valid input; invalid input raises ``ValueError``
    naming the field (``utilization``, ``completions``, ``window_s``, ``tol``, ``min_samples``,
    ``max_steps``) and the bad value. Degenerate traces give a flagged result (``reason``).
    """
    window = _window_s(window_s)
    tolerance = _tol(tol)
    min_runs = _count(min_samples, "min_samples", 2)
    steps = _count(max_steps, "max_steps", 2)
    u = _utilization(utilization)
    n = _completions(completions, u.size)
    return _estimate(u, n, window, tolerance, min_runs, steps)


def _flag(reason: Reason, too_short: bool = False) -> DispersionEstimate:
    return DispersionEstimate(NEUTRAL_VALUE, 0.0, False, 0, too_short, reason)


@dataclass(frozen=True)
class _Axis:
    """Windows laid end to end on the busy-time axis, in units of ``T``.

    Run starts and ends sit at whole multiples of ``T`` (``s = gT``, ``s + t = (g + j)T``), so
    the window edge nearest to each position ``0, T, 2T, ..., floor(S/T) T`` is found once:
    ``busy[p]`` is the busy time ``C`` at that edge and ``done[p]`` the completions before it.
    """

    busy: np.ndarray
    done: np.ndarray
    total: float        # S / T
    rate: float         # completions per T of busy time, sum n_k / (S / T)

    @classmethod
    def build(cls, utilization: np.ndarray, completions: np.ndarray) -> "_Axis":
        edges = np.concatenate(([0.0], np.cumsum(utilization)))    # C_k / T (B_k / T = U_k)
        cum = np.concatenate(([0.0], np.cumsum(completions)))
        total = float(edges[-1])
        if total <= 0.0:
            return cls(np.zeros(1), np.zeros(1), 0.0, 0.0)
        near = _nearest_edge(edges, np.arange(0.0, total + _GRID_EPS, 1.0))
        return cls(edges[near], cum[near], total, float(cum[-1]) / total)


def _nearest_edge(edges: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Index of the window edge nearest to each busy-time ``position`` (ties: the later one)."""
    above = np.minimum(np.searchsorted(edges, position, side="left"), edges.size - 1)
    below = np.maximum(above - 1, 0)
    later = edges[above] - position <= position - edges[below]
    return np.where(later, above, below)


def _y(axis: _Axis, steps: int) -> tuple[float, int]:
    """``Y(t) = Var(N_t)/E[N_t]`` at ``t = steps * T``; and the number of runs behind it.

    Run ``g = 0, 1, ...`` (while ``gT + t <= S``) covers the windows between the edges nearest
    to busy times ``gT`` and ``gT + t``: busy time ``b_g ~ t`` and ``N_t`` completions.
    ``Var(N_t)`` is taken around each run's own expectation ``rate * b_g`` so that the jitter of
    ``b_g`` adds no variance; ``E[N_t] = rate * mean(b_g)``.
    """
    runs = axis.busy.size - steps
    length = axis.busy[steps:] - axis.busy[:runs]                  # b_g
    counts = axis.done[steps:] - axis.done[:runs]                  # N_t of run g
    expected = axis.rate * float(length.mean())                    # E[N_t]
    residual = counts - axis.rate * length
    variance = float(np.dot(residual, residual)) / runs / (1.0 - steps / axis.total)
    if expected <= 0.0 or variance <= (_REL_ZERO * expected) ** 2:
        return 0.0, runs
    return variance / expected, runs


def _converged(y: float, previous: float, tol: float) -> bool:
    if previous == 0.0:
        return y == 0.0
    return abs(1.0 - y / previous) <= tol


def _estimate(u: np.ndarray, n: np.ndarray, window: float, tol: float, min_runs: int,
              max_steps: int) -> DispersionEstimate:
    """Fig. 2 on validated ``U_k`` and total ``n_k``."""
    axis = _Axis.build(u, n)
    total = axis.total
    if total <= 0.0:
        return _flag("no_busy_time", too_short=True)
    if total < min_runs:                     # fewer than min_samples disjoint runs at t = T
        return _flag("too_short", too_short=True)
    if axis.rate <= 0.0:
        return _flag("no_completions")
    curve: list[float] = []
    previous = 0.0
    samples = 0
    for step in range(1, max_steps + 1):
        if total / step < min_runs:          # fewer than min_samples disjoint runs of length t
            return _result(curve, window, False, samples, too_short=True)
        y, samples = _y(axis, step)
        curve.append(y)
        if step > 1 and _converged(y, previous, tol):
            return _result(curve, window, True, samples, too_short=False)
        previous = y
    return _result(curve, window, False, samples, too_short=False)


def _result(curve: list[float], window: float, converged: bool, samples: int,
            too_short: bool) -> DispersionEstimate:
    value = curve[-1]
    if not math.isfinite(value):  # defensive: cannot happen for validated input
        value = NEUTRAL_VALUE
    if value == 0.0:
        reason: Reason = "no_variation"
    elif converged:
        reason = "ok"
    else:
        reason = "too_short" if too_short else "not_converged"
    return DispersionEstimate(value, len(curve) * window, converged, samples, too_short,
                              reason, tuple(curve))


# --------------------------------------------------------------------------- streaming
class DispersionTracker:
    """Fig. 2 (paper 000) over a sliding history of the last ``history`` windows of a stream.

    ``update(utilization, completions)`` stores one window (``U_k``, ``n_k``) in a ring buffer in
    O(1); ``estimate()`` runs :func:`index_of_dispersion` on the windows held, oldest first, so it
    equals the batch function on the same history exactly. The state round-trips through a plain
    JSON-serialisable dict (:meth:`to_dict` / :meth:`from_dict`), e.g. for a Faust table.
    """

    def __init__(self, window_s: float, history: int = 4096, tol: float = 0.20,
                 min_samples: int = 100, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.window_s = _window_s(window_s)
        self.history = _count(history, "history", 1)
        self.tol = _tol(tol)
        self.min_samples = _count(min_samples, "min_samples", 2)
        self.max_steps = _count(max_steps, "max_steps", 2)
        self._u = np.zeros(self.history)
        self._n = np.zeros(self.history)
        self._next = 0       # slot the next window goes to
        self._size = 0       # windows held (<= history)

    def __len__(self) -> int:
        return self._size

    def update(self, utilization: float, completions: Any) -> None:
        """Add one window: ``U_k`` in [0, 1] and ``n_k`` as a count, per-class counts
        (sequence or mapping class -> count), all >= 0; ``ValueError`` naming the field if not."""
        u = _scalar(utilization, "utilization")
        if not 0.0 <= u <= 1.0:
            if not -_U_ROUNDING <= u <= 1.0 + _U_ROUNDING:
                raise ValueError(f"utilization: must be in [0, 1], got {utilization!r}")
            u = min(max(u, 0.0), 1.0)                 # rounding residue
        n = _window_completions(completions)
        slot = self._next
        self._u[slot] = u
        self._n[slot] = n
        self._next = slot + 1 if slot + 1 < self.history else 0
        if self._size < self.history:
            self._size += 1

    def windows(self) -> tuple[np.ndarray, np.ndarray]:
        """``(U_k, n_k)`` of the windows held, oldest first (copies)."""
        if self._size < self.history:
            return self._u[:self._size].copy(), self._n[:self._size].copy()
        order = np.r_[self._next:self.history, 0:self._next]
        return self._u[order], self._n[order]

    def estimate(self) -> DispersionEstimate:
        """:func:`index_of_dispersion` over the windows held."""
        u, n = self.windows()
        return _estimate(u, n, self.window_s, self.tol, self.min_samples, self.max_steps)

    def interval(self, confidence: float = DEFAULT_CONFIDENCE, min_runs: int = DEFAULT_MIN_RUNS,
                 levels: int = DEFAULT_LEVELS, blocks: int = DEFAULT_BLOCKS
                 ) -> "DispersionInterval":
        """:func:`index_of_dispersion_interval` over the windows held."""
        u, n = self.windows()
        return index_of_dispersion_interval(u, n, self.window_s, confidence=confidence,
                                            min_runs=min_runs, levels=levels, blocks=blocks)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable state (windows oldest first)."""
        u, n = self.windows()
        return {"window_s": self.window_s, "history": self.history, "tol": self.tol,
                "min_samples": self.min_samples, "max_steps": self.max_steps,
                "utilization": u.tolist(), "completions": n.tolist()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DispersionTracker":
        """Inverse of :meth:`to_dict`; ``ValueError`` naming a missing or invalid field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"state: must be a mapping, got {type(data).__name__}")
        missing = [key for key in ("window_s", "history", "utilization", "completions")
                   if key not in data]
        if missing:
            raise ValueError(f"{missing[0]}: missing from the tracker state")
        tracker = cls(data["window_s"], data["history"], data.get("tol", 0.20),
                      data.get("min_samples", 100), data.get("max_steps", DEFAULT_MAX_STEPS))
        u = _utilization(data["utilization"])
        n = _completions(data["completions"], u.size)
        if u.size > tracker.history:
            raise ValueError(f"utilization: {u.size} windows exceed history {tracker.history}")
        tracker._u[:u.size] = u
        tracker._n[:u.size] = n
        tracker._size = u.size
        tracker._next = u.size % tracker.history
        return tracker


def _window_completions(value: Any) -> float:
    """Total completions of one window from a count, a sequence or a mapping of counts."""
    if isinstance(value, Real) and not isinstance(value, bool):
        parts: Any = (value,)
    elif isinstance(value, Mapping):
        parts = value.values()
    elif isinstance(value, np.ndarray):
        parts = value.ravel().tolist()
    elif isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError(f"completions: must be a count or per-class counts, got {value!r}")
    else:
        parts = value
    total = 0.0
    for part in parts:
        c = _scalar(part, "completions")
        if c < 0.0:
            raise ValueError(f"completions: must be >= 0, got {part!r}")
        total += c
    if total > MAX_COMPLETIONS:
        raise ValueError(f"completions: total per window must be <= 2**53, got {total!r}")
    return total


# =========================================================================== IDC-curve fit
# (issue 20 item 1: recover the asymptote when bursts outlast the window, with a CI)

IntervalReason = Literal["ok", "no_busy_time", "no_completions", "no_variation", "too_short",
                         "unresolved"]
"""Why a :class:`DispersionInterval` is (not) trustworthy:

``ok``              the curve was fitted and the interval is finite;
``no_busy_time``    all windows idle (value 1.0, interval ``[0, inf)``);
``no_completions``  busy time but no completions (value 1.0, interval ``[0, inf)``);
``no_variation``    ``Var(N_t) = 0`` at every level (value 0.0);
``too_short``       fewer than ``4 * min_runs`` windows of busy time: fewer than four levels
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
                                 blocks: int = DEFAULT_BLOCKS) -> DispersionInterval:
    """``I`` of the service process by fitting the IDC curve, with a confidence interval.

    ``utilization``, ``completions``, ``window_s`` as for :func:`index_of_dispersion`;
    ``confidence`` in (0, 1); ``min_runs`` (>= 2) disjoint runs at the top level;
    ``levels`` (>= 4) aggregation levels; ``blocks`` (>= 4) jackknife blocks.
    See the module docstring ("Slow bursts"). Never NaN; invalid input raises ``ValueError``
    naming the field and the value.
    """
    window = _window_s(window_s)
    conf = _scalar(confidence, "confidence")
    if not 0.0 < conf < 1.0:
        raise ValueError(f"confidence: must be in (0, 1), got {confidence!r}")
    runs = _count(min_runs, "min_runs", 2)
    n_levels = _count(levels, "levels", 4)
    n_blocks = _count(blocks, "blocks", 4)
    u = _utilization(utilization)
    n = _completions(completions, u.size)
    return _interval(u, n, window, conf, runs, n_levels, n_blocks)


def _unknown(reason: IntervalReason, conf: float, windows: int, busy: float,
             value: float = NEUTRAL_VALUE) -> DispersionInterval:
    return DispersionInterval(value, 0.0, math.inf, conf, value, 0.0, windows, busy, reason)


def _levels(top: int, count: int) -> np.ndarray:
    """Aggregation levels ``j`` (in windows of busy time): geometric from 1 to ``top``."""
    return np.unique(np.round(np.geomspace(1.0, float(top), count)).astype(np.int64))


def _level_sums(axis: _Axis, js: np.ndarray, edges: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per level ``j``: total squared residual of all runs, and per jackknife block the
    squared residual and the number of the runs that touch the block.

    Runs start every ``T`` (positions ``g = 0 .. P - j``); run ``g`` covers cells ``g .. g+j-1``
    and touches block ``[a, b)`` when ``g < b`` and ``g + j > a``."""
    total = np.empty(js.size)
    count = np.empty(js.size)
    part = np.empty((edges.size - 1, js.size))
    part_n = np.empty((edges.size - 1, js.size))
    lo_edge, hi_edge = edges[:-1], edges[1:]
    for i, j in enumerate(js.tolist()):
        runs = axis.busy.size - j
        residual = ((axis.done[j:] - axis.done[:runs])
                    - axis.rate * (axis.busy[j:] - axis.busy[:runs]))
        cum = np.concatenate(([0.0], np.cumsum(residual * residual)))
        total[i] = cum[-1]
        count[i] = runs
        first = np.clip(lo_edge - j + 1, 0, runs)
        last = np.clip(hi_edge, 0, runs)
        part[:, i] = cum[last] - cum[first]
        part_n[:, i] = last - first
    return total, count, part, part_n


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
    saa, scc, sac = (wa * a).sum(-1), (wc * c).sum(-1), (wa * c).sum(-1)
    say, scy = (wa * yy).sum(-1), (wc * yy).sum(-1)
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
    sse = (w * (yy - model) ** 2).sum(-1)
    return inf_, zero, sse, model


def _fit_curves(y: np.ndarray, t: np.ndarray, weight: np.ndarray, span: np.ndarray,
                grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                           np.ndarray]:
    """:func:`_wls` profiled over ``gamma``: the best point of the log-spaced ``grid``, then
    refined by successive parabolas through three points in ``log gamma`` (so that the
    estimate is a smooth function of the data, which the jackknife needs). Returns per
    replicate ``I_inf``, ``I_0``, ``gamma``, the fitted curve and whether ``gamma`` sits at
    the lower end of the grid."""
    _, _, sse, _ = _wls(y, t, weight, span, grid[None, :])     # one grid for every row
    best = np.argmin(sse, axis=1)
    low_end = best == 0
    log_g = np.log(grid[np.clip(best, 1, grid.size - 2)])
    step = math.log(grid[1] / grid[0])
    lo, hi = math.log(grid[0]), math.log(grid[-1])
    for _ in range(3):
        pts = log_g[:, None] + step * np.array([-1.0, 0.0, 1.0])[None, :]
        _, _, e, _ = _wls(y, t, weight, span, np.exp(pts))
        curv = e[:, 0] - 2.0 * e[:, 1] + e[:, 2]
        shift = np.where(curv > 0, 0.5 * (e[:, 0] - e[:, 2]) / np.where(curv > 0, curv, 1.0),
                         np.where(e[:, 0] < e[:, 2], -1.0, 1.0))
        log_g = np.clip(log_g + step * np.clip(shift, -1.0, 1.0), lo, hi)
        step *= 0.35
    gamma = np.exp(log_g)
    inf_, zero, _, model = _wls(y, t, weight, span, gamma[:, None])
    return inf_[:, 0], zero[:, 0], gamma, model[:, 0], low_end


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


def _interval(u: np.ndarray, n: np.ndarray, window: float, conf: float, min_runs: int,
              n_levels: int, n_blocks: int) -> DispersionInterval:
    axis = _Axis.build(u, n)
    busy = axis.total * window
    if axis.total <= 0.0:
        return _unknown("no_busy_time", conf, u.size, busy)
    if axis.rate <= 0.0:
        return _unknown("no_completions", conf, u.size, busy)
    cells = axis.busy.size - 1                          # P: whole T of busy time
    top = cells // min_runs
    if top < 4 or cells < n_blocks:
        y1 = _y(axis, 1)[0] if cells >= 2 else NEUTRAL_VALUE
        return _unknown("too_short", conf, u.size, busy, y1)
    js = _levels(top, n_levels)
    edges = np.round(np.linspace(0, cells, n_blocks + 1)).astype(np.int64)
    total, count, part, part_n = _level_sums(axis, js, edges)
    t = js.astype(float)
    span = axis.total
    expected = axis.rate * t                            # E[N_t] (per T of busy time)
    y = total / count / expected
    if not np.any(y > _REL_ZERO):
        return DispersionInterval(0.0, 0.0, 0.0, conf, 0.0, 0.0, u.size, busy, "no_variation",
                                  tuple((t * window).tolist()), tuple(y.tolist()),
                                  tuple(np.zeros_like(y).tolist()))
    # jackknife replicates: the runs touching block b left out; S less the block
    y_jack = (total - part) / np.maximum(count - part_n, 1.0) / expected
    span_jack = span - np.diff(edges) * (span / cells)
    # weights 1/Var(Y(t_j)) ~ 1/(t_j Y(t_j)^2): first from a running maximum of y, then from
    # the fitted curve (the flat fit's: it is the smoother)
    smooth = np.maximum.accumulate(np.maximum(y, _REL_ZERO))
    weight = 1.0 / (t * smooth * smooth)
    spans = np.array([span])
    flat_grid = np.geomspace(_GAMMA_FLAT, _GAMMA_HIGH, _GAMMA_GRID // 2)
    for _ in range(2):
        value, _, _, model, _ = _fit_curves(y[None, :], t, weight, spans, flat_grid)
        level = np.maximum(model[0], 1e-3 * max(float(value[0]), _REL_ZERO))
        weight = 1.0 / (t * level * level)
    free_grid = np.geomspace(min(_GAMMA_LOW / t[-1], _GAMMA_FLAT), _GAMMA_HIGH, _GAMMA_GRID)
    both = np.vstack([y, y_jack])
    span_all = np.concatenate(([span], span_jack))
    steady = _level_reading(both, t, weight, span_all)
    flat = _fit_curves(both, t, weight, span_all, flat_grid)
    free = _fit_curves(both, t, weight, span_all, free_grid)
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
