"""Per-class service demands from utilization and throughputs: Kalman filter and regression.

Both estimators rest on the utilization law of one server (tier) with ``cores`` CPUs: in window
(period) ``k`` the busy CPU-seconds per second equal the sum over classes of throughput times
demand (Huang et al. 2012, eq. (5.b); Rolia and Vetland (1995), Fig. 6),

    z_k = U_k * cores = sum_c X_{k,c} * D_c

where ``U_k`` is the utilization averaged over the cores (0..1), ``X_{k,c}`` the throughput of
class ``c`` (completions per second) and ``D_c`` its demand (CPU-seconds per request).

* :class:`KalmanDemandEstimator` tracks ``D`` window by window (Huang et al. 2012, section 2.3,
  eqs. (4)-(6)): state ``x = D``, random walk ``x_k = x_{k-1} + w_{k-1}`` (5.a), scalar
  measurement ``z_k = H_k x_k + v_k`` with ``H_k = [X_{k,1} .. X_{k,n}]`` (5.b, 5.c).
* :func:`regression_demands` solves the equations of many periods at once (Rolia and Vetland
  (1995), section 5, Fig. 6) by non-negative least squares (Huang et al. 2012, section 3.3.2) or
  ordinary least squares.
* :func:`relative_error` is the utilization-weighted error ``E_rel`` of Rolia and Vetland (1995).

Everything here is pure numpy/scipy: no I/O, no global state. Invalid input raises
``ValueError`` whose message starts with the name of the offending field.

Where the Kalman filter departs from Huang et al. (2012) (all switchable;
``KalmanDemandEstimator.paper`` builds the filter exactly as published) and why:

* ``R > 0`` by default. With the paper's ``R = 0`` the correction forces ``H x = z`` exactly:
  the covariance collapses along ``H`` (with one class ``P`` becomes 0 and the next gain is
  0/0), and every bit of utilization noise goes straight into the demands.
* ``R`` adapts upwards to the observed innovations (covariance matching: ``R_k = max(R,
  mean(innovation^2) - H P^- H^T)``), so a too-small configured ``R`` does not make the filter
  chase noise.
* ``Q`` is the paper's "largest observed change" per class, but recorded only after the filter
  has settled and clamped between a floor and a cap (relative to the demand). Unclamped, the
  initial learning transient (tens of percent) sets ``Q`` for good and the noise-driven changes
  then keep it there: the filter forgets after a window or two, cannot separate classes whose
  mix varies little, and never smooths noise.
* Change detection: a window whose innovation is improbable re-opens ``P`` (the ``P_0`` rule at
  the current estimate). This is what makes a step change of one class's demand recover within
  a few windows; with a small steady-state ``Q`` and no detection the filter would need tens.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import nnls

from estimators._checks import U_ROUNDING, as_array, utilization_and_throughputs

__all__ = [
    "KalmanDemandEstimator",
    "RegressionResult",
    "regression_demands",
    "relative_error",
]

ArrayOrMapping = Mapping[str, float] | Sequence[float] | np.ndarray

_STATE_VERSION = 1
INNOVATION_MEMORY = 0.1   # weight of the newest squared innovation in innovation_var
#: smallest sum x_0^2 the filter starts from: P_0 and its products stay normal floats
_P0_SMALLEST = 1e-280
_MAX_WINDOW_VALUE = 1e9    # bound on per-class throughputs (1/s) and response times (s)
_MIN_RATE = 1e-9           # smallest non-zero throughput (1/s) the filter accepts
_MAX_CORES = 1e6
#: skip reasons of :meth:`KalmanDemandEstimator.update` (also used by :mod:`estimators.kalman_bank`)
SKIP_IDLE = "idle: no completions in the window (H = 0)"
SKIP_DEGENERATE = "degenerate: H P H^T + R is not > 0 or overflows"


# --------------------------------------------------------------------------------------------
# input validation (shared)
# --------------------------------------------------------------------------------------------

def _check_cores(cores: Any) -> float:
    try:
        value = float(cores)
    except (TypeError, ValueError):
        raise ValueError(f"cores: must be a positive number, got {cores!r}") from None
    if not 0.0 < value <= _MAX_CORES:
        raise ValueError(f"cores: must be within (0, {_MAX_CORES:g}], got {cores!r}")
    return value


def _check_utilization_scalar(utilization: Any) -> float:
    try:
        value = float(utilization)
    except (TypeError, ValueError):
        raise ValueError(f"utilization: must be a number in [0, 1], got {utilization!r}") from None
    if not -U_ROUNDING <= value <= 1.0 + U_ROUNDING:  # also rejects NaN
        raise ValueError(f"utilization: must be within [0, 1], got {utilization!r}")
    return min(max(value, 0.0), 1.0)                   # rounding residue clamped


def _finite_nonnegative(values: np.ndarray, field: str, upper: float = math.inf,
                        min_positive: float = 0.0) -> float:
    """Reject NaN, +-inf, negative entries, entries above ``upper`` and non-zero entries below
    ``min_positive``; return the largest entry (NaN fails every comparison, so two reductions
    suffice in the common case)."""
    if not values.size:
        return 0.0
    if values.ndim == 1 and values.size <= 64:      # small vectors: Python's min/max are cheaper
        listed = values.tolist()
        low, high = min(listed), max(listed)
        if not math.isfinite(sum(listed)):           # min()/max() of a list may step over NaN
            low = high = math.nan
    else:
        low, high = float(values.min()), float(values.max())
    if not (low >= 0.0 and high <= upper and high < math.inf):
        bad = values[~(np.isfinite(values) & (values >= 0.0) & (values <= upper))]
        bound = "" if upper == math.inf else f" and <= {upper:g}"
        raise ValueError(f"{field}: entries must be finite, >= 0{bound}, "
                         f"got {bad[:3].tolist()}")
    if low < min_positive:
        tiny = (values > 0.0) & (values < min_positive)
        if tiny.any():
            raise ValueError(f"{field}: a non-zero rate below {min_positive:g} per second "
                             f"cannot be observed, got {values[tiny][:3].tolist()}")
    return high


def _class_vector(values: ArrayOrMapping, classes: tuple[str, ...], index: dict[str, int],
                  field: str, min_positive: float = 0.0) -> tuple[np.ndarray, float]:
    """``values`` as an array aligned with ``classes``, each in ``[0, 1e9]``, and its maximum.

    A mapping ``class -> value`` may omit classes (they count as 0, i.e. nothing completed or
    no measurement); naming an unknown class is an error. The bound (a billion completions per
    second, or a response time of 30 years) is far beyond any server and keeps the filter's
    arithmetic away from overflow. Throughputs pass ``min_positive = _MIN_RATE``: a non-zero
    throughput is at least one completion per window, so below ``1e-9`` per second (one in 30
    years) it cannot come from monitoring, and its demand ``U / X`` (or ``x_0^2``) could
    overflow.
    """
    n = len(classes)
    if isinstance(values, Mapping):
        out = np.zeros(n)
        for name, value in values.items():
            i = index.get(name)
            if i is None:
                raise ValueError(f"{field}: unknown class {name!r} (classes: {list(classes)})")
            try:
                out[i] = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"{field}: value of class {name!r} must be a number, "
                                 f"got {value!r}") from None
    else:
        out = as_array(values, field)
        if out.shape != (n,):
            raise ValueError(f"{field}: expected {n} values aligned with classes, "
                             f"got shape {out.shape}")
    return out, _finite_nonnegative(out, field, _MAX_WINDOW_VALUE, min_positive)


def _check_classes(classes: Any) -> tuple[str, ...]:
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Sequence):
        raise ValueError(f"classes: must be a list of class names, got {classes!r}")
    names = tuple(classes)
    if not names:
        raise ValueError("classes: must name at least one class, got []")
    if not all(isinstance(c, str) and c for c in names):
        raise ValueError(f"classes: names must be non-empty strings, got {list(names)!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"classes: names must be unique, got {list(names)!r}")
    return names


def _check_positive(value: Any, field: str, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{field}: must be a number, got {value!r}") from None
    ok = v >= 0.0 if allow_zero else v > 0.0
    if not (ok and math.isfinite(v)):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{field}: must be finite and {bound}, got {value!r}")
    return v


def _solve_psd(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A^+ b`` for a symmetric positive semi-definite ``A``: the pseudo-inverse through the
    eigendecomposition (for such ``A`` it is the SVD), eigenvalues below ``1e-15`` of the
    largest dropped as ``numpy.linalg.pinv`` drops singular values -- a third of its cost."""
    w, V = np.linalg.eigh(A)
    keep = w > 1e-15 * w[-1]
    V = V[:, keep]
    return V @ ((V.T @ b) / w[keep])


# --------------------------------------------------------------------------------------------
# Kalman filter (Huang et al. 2012, section 2.3)
# --------------------------------------------------------------------------------------------

class KalmanDemandEstimator:
    """Per-class demands of one server tracked by a Kalman filter (Huang et al. 2012, eqs.
    (4)-(6)).

    Model (Huang et al. 2012, eq. (5)): state ``x_k`` = demands (CPU-seconds per request,
    one per class),

    * process  ``x_k = x_{k-1} + w_{k-1}``, ``w ~ N(0, Q_k)``   (5.a; ``A = I``, no control)
    * measure  ``z_k = H_k x_k + v_k``,    ``v ~ N(0, R)``      (5.b)
    * ``z_k = U_k * cores`` (busy CPU-seconds per second), ``H_k = [X_{k,1} .. X_{k,n}]`` the
      per-class throughputs in completions per second (5.c).

    Each window runs :meth:`predict` (6.a-6.b) then :meth:`correct` (6.c-6.e). The measurement
    is a scalar, so the inverse in (6.c) is a division: ``K = P^- H^T / (H P^- H^T + R)``.

    Initialisation (Huang et al. 2012, section 2.3), from the first window with completions and
    ``U > 0``: ``x_{i,0} = rt_{i,0} (1 - U_0)`` for classes whose response time is given,
    otherwise the utilization law split evenly per request, ``x_{i,0} = U_0 cores / sum_c X_{0,c}``;
    ``P_0 = diag(x_{i,0}^2)``.

    Process noise ``Q_k = diag(xi_1 .. xi_n)`` with ``xi_i = max_j (x_{i,j} - x_{i,j-1})^2``, the
    largest squared change observed (Huang et al. 2012), with these deviations (module notes
    say why):

    * changes are only recorded once the filter has *settled*, ``settle`` windows (default
      twice the number of classes) after the (re)initialisation;
    * ``xi_i`` is clamped to ``[(q_floor s_i)^2, (q_cap s_i)^2]`` with
      ``s_i = max(x_i, mean(x)/10)`` -- by default a random walk of 1-2% of the demand per window;
    * change detection: if ``(z - H x^-)^2 > gate * max(H P^- H^T + R, recent mean of
      (z - H x^-)^2)`` the window re-opens ``P^-`` by ``diag(x^2)`` (the paper's ``P_0`` rule at
      the current estimate) and settling restarts (:attr:`change_detected`, :attr:`n_changes`);
      the second term keeps an underestimated ``R`` from firing on plain noise.

    Measurement noise: the paper sets ``R = 0`` (utilization trusted exactly); here ``R``
    defaults to ``1e-4`` (a standard deviation of 0.01 in ``U * cores``) and should be set to
    the variance of the utilization measurement (Huang et al. (2012): "or measure R in earlier
    experiments"). With ``adaptive_R`` the filter uses ``max(R, mean(innovation^2) - H P^- H^T)``.

    Non-negativity: after a correction a negative demand is projected onto ``x_i = 0`` in the
    metric of ``P`` (estimate projection, Simon & Chia 2002, ``x <- x - P[:, A] P[A, A]^+ x[A]``
    over the active set ``A``), which moves correlated classes consistently. ``P`` is left as it
    is (conservative: a class at 0 keeps its uncertainty and can come back); :attr:`clipped`
    tells that the constraint was active in the last window.

    A window without completions (``H = 0``) carries no information on demands; like a window
    whose correction would be degenerate (``H P^- H^T + R = 0``, possible with ``R = 0``) it gets
    the time update (6.b) only, never produces NaN, and is flagged (:attr:`skipped`,
    :attr:`skip_reason`). The state round-trips through :meth:`to_dict` / :meth:`from_dict`.
    """

    def __init__(self, classes: Sequence[str], cores: float = 1, *, R: float = 1e-4,
                 q_floor: float = 0.01, q_cap: float = 0.02, gate: float = 16.0,
                 settle: int | None = None, adaptive_R: bool = True) -> None:
        self.classes: tuple[str, ...] = _check_classes(classes)
        self.cores: float = _check_cores(cores)
        self.R: float = _check_positive(R, "R", allow_zero=True)
        self.q_floor: float = _check_positive(q_floor, "q_floor", allow_zero=True)
        self.q_cap: float = _check_cap(q_cap)
        if self.q_cap < self.q_floor:
            raise ValueError(f"q_cap: must be >= q_floor ({self.q_floor}), got {q_cap!r}")
        self.gate: float = _check_gate(gate)
        if not isinstance(adaptive_R, bool):
            raise ValueError(f"adaptive_R: must be True or False, got {adaptive_R!r}")
        self.adaptive_R: bool = adaptive_R
        n = len(self.classes)
        self.settle: int = _check_settle(settle, 2 * n)
        self._index = {c: i for i, c in enumerate(self.classes)}
        self.x: np.ndarray = np.zeros(n)          # demands x_k
        self.P: np.ndarray = np.zeros((n, n))     # covariance P_k
        self.xi: np.ndarray = np.zeros(n)         # largest squared change since settled
        self.initialised: bool = False
        self.windows_since_reset: int = 0
        self.n_updates: int = 0
        self.n_skipped: int = 0
        self.n_changes: int = 0
        self.skipped: bool = False
        self.skip_reason: str | None = None
        self.change_detected: bool = False
        self.innovation: float = 0.0              # z_k - H_k x_k^- of the last window
        self.innovation_var: float = 0.0          # running mean of innovation^2 (no changes)
        self.clipped: bool = False

    @classmethod
    def paper(cls, classes: Sequence[str], cores: float = 1) -> KalmanDemandEstimator:
        """The filter exactly as Huang et al. (2012) states it: ``R = 0``, ``Q`` from the largest
        change
        since the first window, no floor, no cap, no change detection."""
        return cls(classes, cores, R=0.0, q_floor=0.0, q_cap=math.inf, gate=math.inf,
                   settle=0, adaptive_R=False)

    # -- read-out ---------------------------------------------------------------------------

    @property
    def demands(self) -> np.ndarray:
        """Current demand estimates ``x_k`` (CPU-seconds per request), aligned with classes."""
        return self.x.copy()

    @property
    def std(self) -> np.ndarray:
        """Standard deviation of each demand estimate, ``sqrt(diag(P_k))``."""
        return np.sqrt(np.maximum(np.diagonal(self.P), 0.0))

    @property
    def covariance(self) -> np.ndarray:
        """A copy of ``P_k``."""
        return self.P.copy()

    def demands_by_class(self) -> dict[str, float]:
        """``{class: demand}`` of the current estimate."""
        return {c: float(v) for c, v in zip(self.classes, self.x)}

    def std_by_class(self) -> dict[str, float]:
        """``{class: standard deviation}`` of the current estimate."""
        return {c: float(v) for c, v in zip(self.classes, self.std)}

    # -- the filter -------------------------------------------------------------------------

    def process_noise(self) -> np.ndarray:
        """Diagonal of ``Q_k``: ``xi_i`` (Huang et al. 2012) clamped to
        ``[q_floor s_i, q_cap s_i]^2``."""
        x = self.x
        scale = np.maximum(x, 0.1 * sum(x.tolist()) / x.size)
        scale *= scale
        q = np.maximum(self.xi, (self.q_floor * self.q_floor) * scale)
        if self.q_cap < math.inf:
            np.minimum(q, (self.q_cap * self.q_cap) * scale, out=q)
        return q

    def predict(self) -> None:
        """Time update with ``w_{k-1} = 0``: ``x^- = x`` (6.a), ``P^- = P + Q_k`` (6.b)."""
        self.P.ravel()[::self.x.size + 1] += self.process_noise()

    def correct(self, z: float, h: np.ndarray) -> bool:
        """Measurement update (6.c-6.e) for ``z = U cores`` and the row ``H = h`` (unchecked:
        use :meth:`update`). Returns False and leaves ``x``, ``P`` alone if ``H P^- H^T + R``
        is not positive or the result would not be finite."""
        P = self.P
        PHt = P @ h                                  # P^- H^T
        hPh = float(h @ PHt)
        R = self.R
        if self.adaptive_R:
            R = max(R, self.innovation_var - hPh)
        S = hPh + R                                  # H P^- H^T + R
        y = z - float(h @ self.x)                    # innovation z - H x^-
        if not math.isfinite(y * y):
            self.change_detected = False
            return False
        self.innovation = y
        self.change_detected = y * y > self.gate * max(S, self.innovation_var)
        if self.change_detected:                     # re-open P^- (P_0 rule at x^-)
            P = P + np.diag(self.x * self.x)
            PHt = P @ h
            S = float(h @ PHt) + R
        if not (S > 0.0 and math.isfinite(S)):
            self.change_detected = False
            return False
        x = self.x + PHt * (y / S)                   # (6.c, 6.d): x^- + P^- H^T / S * y
        listed = x.tolist()
        if not math.isfinite(sum(listed)):
            self.change_detected = False
            return False
        # (6.e): (I - K H) P^- = P^- - (P^- H^T)(P^- H^T)^T / S, symmetric by construction;
        # updated in place (P is this filter's own array: predict() already wrote into it)
        u = PHt * (1.0 / math.sqrt(S))
        P -= u[:, None] * u
        diag = P.ravel()[::h.size + 1]
        np.maximum(diag, 0.0, out=diag)              # round-off (R = 0) must not go below 0
        self.P = P
        self.clipped = min(listed) < 0.0
        self.x = self._project_nonnegative(x, P) if self.clipped else x
        return True

    def update(self, utilization: float, throughputs: ArrayOrMapping,
               response_times: ArrayOrMapping | None = None) -> np.ndarray:
        """Process one window; return the demand estimates (aligned with :attr:`classes`).

        ``utilization`` is ``U_k`` in [0, 1] (averaged over cores); ``throughputs`` the
        completions per second per class, as an array aligned with ``classes`` or a mapping
        ``class -> value`` (absent classes count as 0); ``response_times`` (optional, seconds,
        0 or absent = unknown) are used only to initialise ``x_0 = rt (1 - U)``.

        Runs :meth:`predict` (6.a, 6.b) then :meth:`correct` (6.c-6.e). A window without
        completions, or one whose correction is degenerate, gets the time update only (as a
        missing measurement does) and is flagged in :attr:`skipped` / :attr:`skip_reason`.
        Before initialisation the returned demands are zeros and :attr:`initialised` is False.
        """
        u = _check_utilization_scalar(utilization)
        h, h_max = _class_vector(throughputs, self.classes, self._index, "throughputs",
                                 _MIN_RATE)
        rt = None if response_times is None else _class_vector(
            response_times, self.classes, self._index, "response_times")[0]
        z = u * self.cores
        if not h_max > 0.0:
            return self._skip(SKIP_IDLE)
        if not self.initialised:
            if not z > 0.0:
                return self._skip("uninformative: utilization 0 before initialisation")
            if not self._initialise(u, z, h, rt):
                return self._skip("uninformative: x_0^2 out of range (throughputs too small "
                                  "or response times too large, or utilization too small)")
        x_prev = self.x
        with np.errstate(over="ignore", invalid="ignore"):   # overflow is caught below
            self.predict()
            if not self.correct(z, h):
                return self._skip(SKIP_DEGENERATE,
                                  predicted=True)
            self._track_changes(x_prev)
        self.n_updates += 1
        self.skipped = False
        self.skip_reason = None
        return self.x.copy()

    def _track_changes(self, x_prev: np.ndarray) -> None:
        """``xi_i = max (x_{i,k} - x_{i,k-1})^2`` over the windows since the filter settled."""
        if self.change_detected:
            self.n_changes += 1
            self.windows_since_reset = 0
            self.xi[:] = 0.0
            self.innovation_var = 0.0
        else:
            self.innovation_var += INNOVATION_MEMORY * (
                self.innovation * self.innovation - self.innovation_var)
            if self.windows_since_reset >= self.settle:
                change = self.x - x_prev
                change *= change
                if math.isfinite(sum(change.tolist())):
                    np.maximum(self.xi, change, out=self.xi)
        self.windows_since_reset += 1

    @staticmethod
    def _project_nonnegative(x: np.ndarray, P: np.ndarray) -> np.ndarray:
        """Project ``x`` onto ``x >= 0`` in the metric of ``P`` (Simon & Chia 2002).

        The active set grows until no free component is negative; a singular ``P[A, A]``
        (e.g. ``R = 0``) is solved by its pseudo-inverse (:func:`_solve_psd`); a final clip
        removes round-off.
        """
        active = x < 0.0
        if np.count_nonzero(active) == 1:            # one constraint: closed form, no pinv
            i = int(np.flatnonzero(active)[0])
            if P[i, i] > 0.0:
                projected = x - P[:, i] * (x[i] / P[i, i])
                if not (projected < 0.0).any():
                    projected[i] = 0.0
                    return projected
        projected = x
        for _ in range(x.size):
            A = np.flatnonzero(active)
            PA = P[:, A]
            projected = x - PA @ _solve_psd(PA[A], x[A])
            newly = (projected < 0.0) & ~active
            if not newly.any():
                break
            active |= newly
        projected = np.maximum(projected, 0.0)
        projected[active] = 0.0
        return projected

    def _initialise(self, u: float, z: float, h: np.ndarray, rt: np.ndarray | None) -> bool:
        """``x_0 = rt (1 - U_0)`` where known, else ``U_0 cores / sum X``; ``P_0 = diag(x_0^2)``.
        Returns False (nothing changed) if ``P_0`` would overflow or come within 1e28 of the
        smallest normal number (:data:`_P0_SMALLEST`)."""
        with np.errstate(over="ignore"):
            x0 = np.full(h.size, z / h.sum())
            if rt is not None:
                from_rt = rt * (1.0 - u)
                known = from_rt > 0.0
                x0[known] = from_rt[known]
            # P_0 = diag(x_0^2) must stay in the normal floating range, with headroom for the
            # products of a correction: x_0 ~ 1e-151 (U ~ 1e-146) underflowed them into NaN
            if not _P0_SMALLEST < float(x0 @ x0) < math.inf:
                return False
        self.x = x0
        self.P = np.diag(x0 ** 2)
        self.xi = np.zeros(h.size)
        self.windows_since_reset = 0
        self.initialised = True
        return True

    def _skip(self, reason: str, predicted: bool = False) -> np.ndarray:
        """Flag a window without a measurement update; time-update ``P`` if not done yet."""
        if self.initialised and not predicted:
            with np.errstate(over="ignore", invalid="ignore"):
                self.predict()
        self.skipped = True
        self.skip_reason = reason
        self.n_skipped += 1
        return self.x.copy()

    def with_classes(self, classes: Sequence[str]) -> KalmanDemandEstimator:
        """A copy tracking ``classes``, a superset of :attr:`classes` in any order.

        For a request class that appears mid-stream. Known classes keep their estimates and
        covariance; a new class starts at the mean of the current demands with variance its
        square (the ``P_0 = diag(x_0^2)`` rule of Huang et al. (2012), section 2.3) and no
        process-noise history. Before initialisation the copy is simply uninitialised with the new
        classes.
        """
        new = _check_classes(classes)
        missing = [c for c in self.classes if c not in new]
        if missing:
            raise ValueError(f"classes: must include every tracked class, missing {missing}")
        state = self.to_dict()
        old = [new.index(c) for c in self.classes]
        n = len(new)
        x0 = float(self.x.mean()) if self.initialised and self.x.size else 0.0
        x, xi, P = np.full(n, x0), np.zeros(n), np.diag(np.full(n, x0 * x0))
        x[old], xi[old] = self.x, self.xi
        P[np.ix_(old, old)] = self.P
        state.update(classes=list(new), x=x.tolist(), xi=xi.tolist(), P=P.tolist(),
                     settle=max(self.settle, 2 * n))
        if len(new) > len(self.classes):
            state["windows_since_reset"] = 0
        return type(self).from_dict(state)

    # -- state ------------------------------------------------------------------------------

    _FLAGS = ("initialised", "skipped", "change_detected", "clipped")
    _COUNTERS = ("windows_since_reset", "n_updates", "n_skipped", "n_changes")

    def to_dict(self) -> dict[str, Any]:
        """The whole filter state as plain JSON-serialisable values (``inf`` as ``None``)."""
        state: dict[str, Any] = {
            "version": _STATE_VERSION,
            "classes": list(self.classes),
            "cores": self.cores,
            "R": self.R,
            "q_floor": self.q_floor,
            "q_cap": None if math.isinf(self.q_cap) else self.q_cap,
            "gate": None if math.isinf(self.gate) else self.gate,
            "settle": self.settle,
            "adaptive_R": self.adaptive_R,
            "x": self.x.tolist(),
            "P": self.P.tolist(),
            "xi": self.xi.tolist(),
            "skip_reason": self.skip_reason,
            "innovation": self.innovation,
            "innovation_var": self.innovation_var,
        }
        state.update({f: getattr(self, f) for f in self._FLAGS})
        state.update({c: getattr(self, c) for c in self._COUNTERS})
        return state

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> KalmanDemandEstimator:
        """Rebuild an estimator from :meth:`to_dict` output (validated)."""
        if not isinstance(state, Mapping):
            raise ValueError(f"state: must be a mapping, got {type(state).__name__}")
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"version: unsupported state version {state.get('version')!r}")
        try:
            est = cls(state["classes"], state["cores"], R=state["R"], q_floor=state["q_floor"],
                      q_cap=math.inf if state["q_cap"] is None else state["q_cap"],
                      gate=math.inf if state["gate"] is None else state["gate"],
                      settle=state["settle"], adaptive_R=state["adaptive_R"])
            arrays = {f: as_array(state[f], f) for f in ("x", "P", "xi")}
            flags = {f: state[f] for f in cls._FLAGS}
            counters = {c: state[c] for c in cls._COUNTERS}
            reason = state["skip_reason"]
            innovation = as_array(state["innovation"], "innovation")
            innovation_var = as_array(state["innovation_var"], "innovation_var")
        except KeyError as missing:
            raise ValueError(f"{missing.args[0]}: missing from state") from None
        n = len(est.classes)
        for f in ("x", "xi"):
            if arrays[f].shape != (n,):
                raise ValueError(f"{f}: expected shape ({n},), got {arrays[f].shape}")
            _finite_nonnegative(arrays[f], f)
        P = arrays["P"]
        if P.shape != (n, n) or not np.all(np.isfinite(P)) or np.any(np.diagonal(P) < 0):
            raise ValueError(f"P: expected a finite {n}x{n} covariance with diagonal >= 0, "
                             f"got shape {P.shape}")
        for f, v in flags.items():
            if not isinstance(v, bool):
                raise ValueError(f"{f}: must be a boolean, got {v!r}")
        for c, v in counters.items():
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
                raise ValueError(f"{c}: must be an integer >= 0, got {v!r}")
        if reason is not None and not isinstance(reason, str):
            raise ValueError(f"skip_reason: must be a string or null, got {reason!r}")
        est.x, est.P, est.xi = arrays["x"], 0.5 * (P + P.T), arrays["xi"]
        for f, v in {**flags, **counters}.items():
            setattr(est, f, v)
        if innovation.shape != () or not np.isfinite(innovation):
            raise ValueError(f"innovation: must be a finite number, got {state['innovation']!r}")
        if innovation_var.shape != ():
            raise ValueError(f"innovation_var: must be a number, got {state['innovation_var']!r}")
        _finite_nonnegative(innovation_var.reshape(1), "innovation_var")
        est.skip_reason = reason
        est.innovation, est.innovation_var = float(innovation), float(innovation_var)
        return est

    def __repr__(self) -> str:
        est = ", ".join(f"{c}={v:.4g}" for c, v in zip(self.classes, self.x))
        return f"KalmanDemandEstimator(cores={self.cores:g}, R={self.R:g}, {est})"


def _check_cap(q_cap: Any) -> float:
    try:
        c = float(q_cap)
    except (TypeError, ValueError):
        raise ValueError(f"q_cap: must be a number >= 0 (inf: no cap), got {q_cap!r}") from None
    if not c >= 0.0:  # NaN fails too
        raise ValueError(f"q_cap: must be >= 0 (inf: no cap), got {q_cap!r}")
    return c


def _check_gate(gate: Any) -> float:
    try:
        g = float(gate)
    except (TypeError, ValueError):
        raise ValueError(f"gate: must be a number > 0 (inf disables), got {gate!r}") from None
    if not g > 0.0:  # NaN fails too
        raise ValueError(f"gate: must be > 0 (inf disables change detection), got {gate!r}")
    return g


def _check_settle(settle: Any, default: int) -> int:
    if settle is None:
        return default
    if isinstance(settle, bool) or not isinstance(settle, (int, np.integer)) or settle < 0:
        raise ValueError(f"settle: must be an integer >= 0, got {settle!r}")
    return int(settle)


# --------------------------------------------------------------------------------------------
# Regression (Rolia and Vetland 1995, section 5, Fig. 6)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RegressionResult:
    """Demands from :func:`regression_demands` with diagnostics.

    ``residual`` is ``sqrt(sum_k (z'_k - z_k)^2)`` in units of ``U * cores`` (Huang et al. 2012,
    section 3.3.2), ``rank`` the numerical rank of the throughput matrix, ``rank_deficient``
    True when it is below the number of classes (more classes than periods, a class that never
    completed, or collinear class mixes): the demands are then not identifiable and the
    solution is one of many. ``zeroed`` marks classes whose demand came out exactly 0
    (what NNLS does to classes it cannot tell apart, Huang et al. (2012), Table 3).
    """

    demands: np.ndarray
    residual: float
    zeroed: np.ndarray
    method: str
    n_periods: int
    scaled: np.ndarray = field(repr=False, compare=False)   # the column-scaled matrix solved

    @functools.cached_property
    def rank(self) -> int:
        """Numerical rank of the throughput matrix (an SVD: computed when asked for)."""
        return int(np.linalg.matrix_rank(self.scaled)) if self.scaled.size else 0

    @property
    def rank_deficient(self) -> bool:
        return self.rank < self.demands.size


def _check_period_data(utilization: Any, throughputs: Any) -> tuple[np.ndarray, np.ndarray]:
    u, X = utilization_and_throughputs(utilization, throughputs, "period")
    _finite_nonnegative(X, "throughputs", _MAX_WINDOW_VALUE, _MIN_RATE)
    return u, X


def regression_demands(utilization: Sequence[float] | np.ndarray,
                       throughputs: Sequence[Sequence[float]] | np.ndarray,
                       cores: float = 1, nonnegative: bool = True) -> RegressionResult:
    """Demands by regression over periods (Rolia and Vetland 1995, section 5, Fig. 6).

    Solves ``U_k cores = sum_c X_{k,c} D_c`` for all periods ``k`` in the least-squares sense
    -- the same equations as Fig. 6 (busy CPU time ``r_k = U_k cores T`` against invocation
    counts ``i_{k,c} = X_{k,c} T``) divided by the period length ``T``. With ``nonnegative``
    (default) by non-negative least squares (``scipy.optimize.nnls``, as in Huang et al. (2012),
    section 3.3.2), otherwise by ordinary least squares (minimum-norm when rank-deficient;
    demands may then be negative).

    ``utilization``: shape ``(periods,)`` in [0, 1]; ``throughputs``: ``(periods, classes)``,
    completions per second, each 0 or within ``[1e-9, 1e9]``.
    """
    u, X = _check_period_data(utilization, throughputs)
    z = u * _check_cores(cores)
    if not isinstance(nonnegative, (bool, np.bool_)):
        raise ValueError(f"nonnegative: must be True or False, got {nonnegative!r}")
    n_periods, n_classes = X.shape
    scale = X.max(axis=0)
    seen = scale > 0.0                               # a class that never ran stays at 0
    demands = np.zeros(n_classes)
    fitted, Xs = np.zeros_like(z), np.zeros((n_periods, 0))
    if seen.any():
        Xs = X[:, seen] / scale[seen]                # column scaling: conditioning only
        if nonnegative:
            coef, _ = nnls(Xs, z, maxiter=50 * n_classes)
        else:
            coef = np.linalg.lstsq(Xs, z, rcond=None)[0]
        demands[seen] = coef / scale[seen]
        fitted = Xs @ coef                           # = X @ demands, without overflow
    residual = float(np.linalg.norm(fitted - z))
    return RegressionResult(
        demands=demands,
        residual=residual,
        zeroed=demands == 0.0,
        method="nnls" if nonnegative else "ols",
        n_periods=n_periods,
        scaled=Xs,
    )


def relative_error(estimated: Sequence[float] | np.ndarray, true: Sequence[float] | np.ndarray,
                   counts: Sequence[float] | np.ndarray) -> float:
    """The utilization-weighted error of Rolia and Vetland (1995), section 5.1::

        E_rel = sum_e |s_est,e - s_real,e| / s_real,e * i_e s_real,e  /  sum_e i_e s_real,e
              = sum_e |s_est,e - s_real,e| i_e  /  sum_e i_e s_real,e

    ``counts`` are the invocations ``i_e`` per class (1-D), or per period and class (2-D,
    summed over periods). The second form is used, so a class with true demand 0 is fine; the
    error is also the relative error of the estimated total busy time when errors share a sign.
    """
    est = as_array(estimated, "estimated")
    real = as_array(true, "true")
    i = as_array(counts, "counts")
    if i.ndim == 2:
        i = i.sum(axis=0)
    if est.ndim != 1 or est.size == 0:
        raise ValueError(f"estimated: expected a non-empty 1-D array, got shape {est.shape}")
    if real.shape != est.shape:
        raise ValueError(f"true: expected shape {est.shape}, got {real.shape}")
    if i.shape != est.shape:
        raise ValueError(f"counts: expected shape {est.shape} (or (periods, {est.size})), "
                         f"got {i.shape}")
    if not np.all(np.isfinite(est)):
        raise ValueError(f"estimated: entries must be finite, got {est.tolist()}")
    _finite_nonnegative(real, "true")
    _finite_nonnegative(i, "counts")
    weight = float(i @ real)
    if not weight > 0.0:
        raise ValueError(f"counts: total true busy time sum(counts * true) must be > 0, "
                         f"got {weight}")
    return float(i @ np.abs(est - real)) / weight
