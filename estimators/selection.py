"""Per-tier choice of the demand estimator by its recent utilization-prediction error.

The demand estimators of :mod:`estimators.demand` (Kalman filter, Huang et al. (2012); sliding
regression, Rolia and Vetland (1995)) and the class-blind utilization law all predict the same
measured quantity, a window's busy CPU-seconds per second (Huang et al. 2012, eq. (5.b); Rolia
and Vetland (1995), Fig. 6)::

    z_k = U_k * cores  ~  H_k D = sum_c X_{k,c} D_c

Which of them describes a tier best is an empirical question (docs/accuracy.md section 7):
:func:`select_estimator` scores each by its *one-step-ahead* prediction error over the recent
windows -- the estimate available *before* window ``k`` predicting ``z_k``, so the regression is
not rewarded for fitting the very windows it is scored on -- and returns the best, with a
preference for a default estimator unless another is better by a margin (no flapping between
near-equal estimators).

The score is the relative root-mean-square prediction error
``e = sqrt(mean_k (z_k - H_k D_{k-1})^2) / mean_k z_k`` over the windows where the estimator had
an estimate. Pure numpy; no state: the caller keeps the recent windows and estimates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from estimators._checks import U_ROUNDING

__all__ = ["ESTIMATORS", "Selection", "prediction_error", "residual_error", "residuals",
           "select_by_residuals", "select_by_scores", "select_estimator"]

#: the candidates recommended for the pipeline, the default first (docs/accuracy.md section 7:
#: the class-blind utilization law predicts utilization as well as they do, but gives every
#: class the same demand -- it is not a per-class estimator and is left out)
ESTIMATORS = ("kalman", "regression")


@dataclass(frozen=True)
class Selection:
    """The chosen estimator, every candidate's relative RMS prediction error (``None``: too
    few windows with an estimate to be scored), and how many windows were scored."""

    estimator: str
    errors: dict[str, float | None]
    windows: int


def _window_data(utilization: np.ndarray | list[float],
                 throughputs: np.ndarray | list[list[float]],
                 cores: float) -> tuple[np.ndarray, np.ndarray]:
    z = np.asarray(utilization, dtype=float)
    X = np.asarray(throughputs, dtype=float)
    if z.ndim != 1:
        raise ValueError(f"utilization: expected a 1-D array (one per window), got shape {z.shape}")
    if not np.all(np.isfinite(z)) or np.any((z < 0) | (z > 1)):
        ok = np.isfinite(z) & (z >= -U_ROUNDING) & (z <= 1 + U_ROUNDING)
        if not np.all(ok):
            raise ValueError(f"utilization: entries must be within [0, 1], got "
                             f"{z[~ok][:3].tolist()}")
        z = np.clip(z, 0.0, 1.0)                      # rounding residue (a copy)
    if X.ndim != 2 or X.shape[0] != z.size:
        raise ValueError(f"throughputs: expected shape ({z.size}, classes), got {X.shape}")
    if not np.all(np.isfinite(X)) or np.any(X < 0):
        raise ValueError("throughputs: entries must be finite and >= 0")
    if isinstance(cores, bool) or not (isinstance(cores, (int, float)) and 0 < cores < math.inf):
        raise ValueError(f"cores: must be a finite number > 0, got {cores!r}")
    return z * float(cores), X


def residuals(utilization: np.ndarray | list[float],
              throughputs: np.ndarray | list[list[float]],
              estimates: np.ndarray | list[list[float]], cores: float = 1.0) -> np.ndarray:
    """One-step-ahead residuals ``r_k = U_k cores - H_k D_k`` (NaN where row ``k`` of
    ``estimates`` has a NaN: no estimate yet)."""
    z, X = _window_data(utilization, throughputs, cores)
    return _residuals(z, X, estimates)


def _residuals(z: np.ndarray, X: np.ndarray,
               estimates: np.ndarray | list[list[float]]) -> np.ndarray:
    """:func:`residuals` on windows already checked (``z = U cores``)."""
    D = np.asarray(estimates, dtype=float)
    if D.shape != X.shape:
        raise ValueError(f"estimates: expected shape {X.shape} (one row per window), "
                         f"got {D.shape}")
    if np.any(np.isinf(D)) or np.any(D < 0):
        raise ValueError("estimates: entries must be finite and >= 0 (NaN: no estimate)")
    return z - np.einsum("kc,kc->k", X, D)


def residual_error(busy: np.ndarray, residual: np.ndarray, min_windows: int = 5) -> float | None:
    """Relative RMS ``sqrt(mean_k r_k^2) / mean_k z_k`` over the windows with a residual
    (``busy`` ``z_k = U_k cores``; NaN residual: no estimate); ``None`` when fewer than
    ``min_windows`` remain or they did no work."""
    ok = ~np.isnan(residual)
    n = int(np.count_nonzero(ok))
    if n < max(int(min_windows), 1):
        return None
    r = residual[ok]
    mean = float(busy[ok].sum()) / n
    if not mean > 0:
        return None
    return math.sqrt(float(r @ r) / n) / mean


def prediction_error(utilization: np.ndarray | list[float],
                     throughputs: np.ndarray | list[list[float]],
                     estimates: np.ndarray | list[list[float]], cores: float = 1.0,
                     min_windows: int = 5) -> float | None:
    """Relative RMS error of ``z_k = U_k cores`` predicted by ``H_k D_k``.

    ``estimates[k]`` is the demand vector used for window ``k`` -- for a one-step-ahead score,
    the estimate made *before* window ``k``. Rows containing NaN (no estimate yet) are left
    out; ``None`` when fewer than ``min_windows`` windows remain or the windows did no work.
    """
    z, X = _window_data(utilization, throughputs, cores)
    return residual_error(z, _residuals(z, X, estimates), min_windows)


def select_estimator(utilization: np.ndarray | list[float],
                     throughputs: np.ndarray | list[list[float]],
                     estimates: Mapping[str, np.ndarray], cores: float = 1.0, *,
                     preferred: str = "kalman", margin: float = 0.1,
                     min_windows: int = 5) -> Selection:
    """The estimator with the lowest recent one-step-ahead utilization-prediction error.

    ``utilization`` ``(L,)`` and ``throughputs`` ``(L, C)`` are the tier's last ``L`` windows;
    ``estimates[name]`` ``(L, C)`` the demands estimator ``name`` had *before* each of them
    (NaN rows: none yet). ``preferred`` wins unless another estimator's error is below
    ``(1 - margin)`` times its own; if ``preferred`` cannot be scored the best scored one wins;
    if none can, ``preferred``.
    """
    if not isinstance(estimates, Mapping) or not estimates:
        raise ValueError("estimates: must map at least one estimator name to its estimates")
    z, X = _window_data(utilization, throughputs, cores)
    return select_by_residuals(z, {name: _residuals(z, X, est) for name, est in estimates.items()},
                               preferred=preferred, margin=margin, min_windows=min_windows)


def select_by_residuals(busy: np.ndarray, residuals_by_name: Mapping[str, np.ndarray], *,
                        preferred: str = "kalman", margin: float = 0.1,
                        min_windows: int = 5) -> Selection:
    """:func:`select_estimator` from residuals already computed: ``busy`` ``z_k`` ``(L,)`` and
    each estimator's one-step-ahead residuals ``r_k`` ``(L,)`` (NaN: no estimate) -- what a
    stream keeps window by window instead of the demand vectors."""
    if not isinstance(residuals_by_name, Mapping) or not residuals_by_name:
        raise ValueError("residuals: must map at least one estimator name to its residuals")
    if preferred not in residuals_by_name:
        raise ValueError(f"preferred: {preferred!r} is not among the estimates "
                         f"{sorted(residuals_by_name)}")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin: must be within [0, 1), got {margin!r}")
    z = np.asarray(busy, dtype=float)
    for name, r in residuals_by_name.items():
        if np.shape(r) != z.shape:
            raise ValueError(f"residuals[{name!r}]: expected shape {z.shape}, "
                             f"got {np.shape(r)}")
    errors = {name: residual_error(z, np.asarray(r, dtype=float), min_windows)
              for name, r in residuals_by_name.items()}
    return _choose(errors, int(z.size), preferred, margin)


def select_by_scores(scores: Iterable[Sequence[float]], names: Sequence[str], *,
                     preferred: str = "kalman", margin: float = 0.1,
                     min_windows: int = 5) -> Selection:
    """:func:`select_by_residuals` from rows ``(z_k, r_k of names[0], r_k of names[1], ...)``,
    one per window, oldest first -- what a stream keeps -- summed as plain floats in window
    order (a pipeline tier's last few dozen windows: cheaper than building arrays)."""
    if preferred not in names:
        raise ValueError(f"preferred: {preferred!r} is not among the estimates {sorted(names)}")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin: must be within [0, 1), got {margin!r}")
    columns = list(zip(*scores))
    if not columns:
        return _choose(dict.fromkeys(names), 0, preferred, margin)
    busy, least = columns[0], max(int(min_windows), 1)
    errors: dict[str, float | None] = {}
    for name, residual in zip(names, columns[1:]):
        n, busy_sum, square_sum = 0, 0.0, 0.0
        for z, r in zip(busy, residual):
            if r == r:                                   # NaN: no estimate before the window
                n += 1
                busy_sum += z
                square_sum += r * r
        mean = busy_sum / n if n >= least else 0.0
        errors[name] = math.sqrt(square_sum / n) / mean if mean > 0 else None
    return _choose(errors, len(busy), preferred, margin)


def _choose(errors: dict[str, float | None], windows: int, preferred: str,
            margin: float) -> Selection:
    """The lowest error, ``preferred`` unless beaten by more than ``margin``."""
    scored = {n: e for n, e in errors.items() if e is not None}
    if not scored:
        return Selection(preferred, errors, windows)
    best = min(scored, key=lambda n: (scored[n], n != preferred))
    base = scored.get(preferred)
    if base is not None and best != preferred and not scored[best] < (1.0 - margin) * base:
        best = preferred
    return Selection(best, errors, windows)
