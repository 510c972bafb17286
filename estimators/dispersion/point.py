"""The index of dispersion by the algorithm of Mi et al. (2008), §2.2 and Fig. 2.

For monitoring windows ``k = 1..K`` of length ``T`` only the utilization ``U_k`` and the number
of completed requests ``n_k`` are known. The busy time of window ``k`` is ``B_k = U_k T``.
Concatenating the busy periods masks out queueing: ``N_t``, the number of completions in ``t``
seconds of *busy* time, is a property of the service process alone, and (eq. (2))

    I = lim_{t -> inf} Var(N_t) / E[N_t].

Fig. 2 evaluates ``Y(t) = Var(N_t)/E[N_t]`` for ``t = T, 2T, 3T, ...`` over runs of consecutive
windows whose busy times add up to ``t`` (:mod:`estimators.dispersion.busy_axis`), and stops
when ``|1 - Y(t)/Y(t - T)| <= tol``.

* **"Too short" counts disjoint runs.** Overlapping runs are far from independent, so Fig. 2's
  "fewer than 100 values of ``N_t^k``" test is applied to the number of *disjoint* runs,
  ``floor(S/t)``: ``t`` never exceeds ``S / min_samples``. If ``Y(t)`` has not converged by
  then, the result is flagged ``too_short`` (the paper's "collect new measures").
* **Cap.** ``t`` also never exceeds ``max_steps * T``; reaching it without convergence gives
  ``converged=False`` with the last ``Y(t)``.

Accuracy: the stopping rule stops as soon as ``Y`` flattens, so it returns ``Y`` at ``t = 2T``
or ``3T`` for most processes. For a MAP(2) whose phases mix at rate ``alpha`` (busy time),
``Y(t)`` approaches ``I`` like ``1 - (1 - exp(-alpha t))/(alpha t)``: the estimate is within
~10% of ``I`` only if ``alpha T >= 5``, i.e. the window must be long against the bursts
(``bench/speed/dispersion.py`` prints the accuracy by level of ``I``; for slower bursts,
:mod:`estimators.dispersion.interval`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from estimators.dispersion.busy_axis import Axis, variance_ratio
from estimators.dispersion.inputs import checked_completions, checked_count, checked_tol, \
    checked_utilization, checked_window_s


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

#: Default cap on ``t``, in windows: Fig. 2's example approximates ``t -> inf`` by ~120 T.
DEFAULT_MAX_STEPS = 256
#: Value reported when no estimate can be formed (no busy time, no completions): Poisson.
NEUTRAL_VALUE = 1.0


@dataclass(frozen=True)
class DispersionEstimate:
    """Outcome of the Fig. 2 algorithm (Mi et al. 2008).

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


def index_of_dispersion(utilization: Any, completions: Any, window_s: float,
                        tol: float = 0.20, min_samples: int = 100, *,
                        max_steps: int = DEFAULT_MAX_STEPS) -> DispersionEstimate:
    """Estimate the index of dispersion ``I`` of the service process (Mi et al. 2008, Fig. 2,
    §2.2).

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
    window = checked_window_s(window_s)
    tolerance = checked_tol(tol)
    min_runs = checked_count(min_samples, "min_samples", 2)
    steps = checked_count(max_steps, "max_steps", 2)
    u = checked_utilization(utilization)
    n = checked_completions(completions, u.size)
    return estimate_checked(u, n, window, tolerance, min_runs, steps)


def _flag(reason: Reason, too_short: bool = False) -> DispersionEstimate:
    return DispersionEstimate(NEUTRAL_VALUE, 0.0, False, 0, too_short, reason)


def _converged(y: float, previous: float, tol: float) -> bool:
    if previous == 0.0:
        return y == 0.0
    return abs(1.0 - y / previous) <= tol


def estimate_checked(u: np.ndarray, n: np.ndarray, window: float, tol: float, min_runs: int,
                     max_steps: int) -> DispersionEstimate:
    """Fig. 2 on validated ``U_k`` and total ``n_k``."""
    axis = Axis.build(u, n)
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
        y, samples = variance_ratio(axis, step)
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
