"""Per-class demands under collinearity: which classes the windows can separate, and how well.

The demand estimators of :mod:`estimators.demand` (regression, Rolia and Vetland (1995), section 5
Fig. 6; Kalman filter, Huang et al. (2012), eqs. (4)-(6)) read the per-class demands ``D_c`` off
the utilization law of a tier in window ``k``::

    z_k = U_k * cores = sum_c X_{k,c} D_c

When the classes' throughputs move together -- a steady class mix, every class at nearly the
same rate -- the columns of the design matrix ``X`` are nearly collinear: their sum (the total
load) is well determined, the split between classes is not (Huang et al. 2012, section 3.3: NNLS
"collapses" classes to 0; Rolia and Vetland (1995), section 5: accuracy falls with the number of
classes). This module says so **per class**, with an uncertainty, and offers the data that do
separate the classes where they exist. Pure numpy, no I/O, no state.

What is measured (:func:`assess_separability`):

* the **condition number** of the column-equilibrated design (columns scaled to unit norm,
  Belsley, Kuh & Welsch 1980, ch. 3): the whole design's collinearity;
* per class the uncentred **variance inflation factor** ``VIF_c = [(X~^T X~)^{-1}]_{cc}`` of
  that design (``X~`` with unit-norm columns; 1 for orthogonal columns): how much the class's
  coefficient variance is inflated by its near-dependence on the others;
* per class the **standard error** of the ordinary-least-squares demand,
  ``se_c = sqrt(s^2 [(X^T X)^{-1}]_{cc})``, ``s^2 = RSS / (n - p)`` (the regression of
  Rolia and Vetland (1995), Fig. 6, without the sign constraint);
* where other estimates of the same demands are given (the Kalman filter, NNLS, ...), their
  **disagreement** with the least-squares demand.

A class is *separable* when its relative standard error ``se_c / s_c`` is at most
``max_rel_se`` (``s_c = max(|D_c|, D_bar / 10)``, ``D_bar`` the class-blind demand
``sum_k z_k / sum_k sum_c X_{k,c}``, so a class near 0 is judged against the tier's scale), its
demand is not significantly negative, and no other estimate differs from it by more than
``max_disagreement`` of ``s_c`` beyond two combined standard errors. Each flagged class carries
its reason: ``no_completions``, ``not_identifiable`` (exact collinearity: the class lies in
the design's null space), ``collinear`` (imprecise and ``VIF_c > max_vif``), ``imprecise``
(imprecise although not collinear: too few or too noisy windows), ``negative`` (least squares
puts it significantly below 0: the linear model does not fit), ``estimators_disagree``.

The data that separate classes when their completions do not (LibReDE's menu of approaches,
Spinner et al.; `../shared/data/real/README.md`): per-class **response times**. On one server
with processor sharing every class's response time is its demand stretched by the same factor
(``R_c = D_c / (1 - U)`` for M/G/1-PS; the arrival theorem gives a common factor in closed
networks too), so ``D_c`` is proportional to ``R_c`` and the utilization law fixes the scale
(the *service demand law* split of Brosig et al. 2009, LibReDE's ``ServiceDemandLaw``)::

    D_c = U_bar cores R_c / sum_j X_bar_j R_j                       (discipline "ps")

With FCFS every class waits the same time ``W`` in queue, ``R_c = D_c + W``, which gives
``D_c = D_bar + R_c - R_bar`` with ``R_bar`` the throughput-weighted mean response time
(discipline ``"fcfs"``, as :func:`streams.predict.model.fcfs_split`). :attr:`Separability.recommended`
keeps the least-squares demand of separable classes and takes the response-time split for the
others when response times are given (else the class-blind demand), rescaled so that the
utilization law ``sum_c X_bar_c D_c = U_bar cores`` holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from estimators._checks import as_array, utilization_and_throughputs

__all__ = ["Separability", "assess_separability", "response_time_split", "REASONS"]

#: why a class is not separated, in the order they are checked
REASONS = ("no_completions", "not_identifiable", "negative", "collinear", "imprecise",
           "estimators_disagree")
#: a singular value below this fraction of the largest is exact collinearity (rank deficiency)
_RANK_RTOL = 1e-10
DISCIPLINES = ("ps", "fcfs")
_FLOAT_MAX = float(np.finfo(float).max)


@dataclass(frozen=True)
class Separability:
    """Per-class verdict of :func:`assess_separability`, arrays aligned with :attr:`classes`.

    ``demands`` the ordinary-least-squares demands (``0`` where not identifiable),
    ``std_error`` their standard errors (``inf`` where not identifiable), ``vif`` the uncentred
    variance inflation factors (``inf``: not identifiable), ``condition_number`` of the
    column-equilibrated design (``inf``: rank-deficient), ``separable`` per class and
    ``reasons`` (``None`` for a separable class), ``response_split`` the demands from response
    times (``None`` when not given for every class), ``recommended`` the demands to use,
    ``class_blind`` ``D_bar``, ``disagreement`` per other estimator the relative difference
    ``|D_other - D_ols| / s_c``, ``windows`` how many windows entered.
    """

    classes: tuple[str, ...]
    demands: np.ndarray
    std_error: np.ndarray
    vif: np.ndarray
    condition_number: float
    separable: np.ndarray
    reasons: tuple[str | None, ...]
    response_split: np.ndarray | None
    recommended: np.ndarray
    class_blind: float
    disagreement: dict[str, np.ndarray]
    windows: int

    @property
    def relative_std_error(self) -> np.ndarray:
        """``se_c / s_c`` with ``s_c = max(|D_c|, D_bar / 10)`` (``inf``: not identifiable)."""
        return _relative(self.std_error, self.demands, self.class_blind)

    def by_class(self) -> dict[str, dict[str, Any]]:
        """``{class: {"separable", "reason", "demand", "std_error", "vif", "recommended"}}``
        as plain JSON values (an infinite standard error or VIF as ``None``)."""
        rows = zip(self.classes, self.separable.tolist(), self.reasons, self.demands.tolist(),
                   self.std_error.tolist(), self.vif.tolist(), self.recommended.tolist())
        return {c: {"separable": separable, "reason": reason, "demand": demand,
                    "std_error": _finite_or_none(se), "vif": _finite_or_none(vif),
                    "recommended": recommended}
                for c, separable, reason, demand, se, vif, recommended in rows}


def _finite_or_none(value: float) -> float | None:
    v = float(value)
    return v if math.isfinite(v) else None


def _scale(d: np.ndarray, d_bar: float) -> np.ndarray:
    """``s_c = max(|D_c|, D_bar / 10)``, the scale a class's errors are judged against."""
    return np.maximum(np.abs(d), 0.1 * d_bar)


def _relative(se: np.ndarray, d: np.ndarray, d_bar: float,
              scale: np.ndarray | None = None) -> np.ndarray:
    """``se_c / s_c`` (``inf`` where ``se_c`` is infinite or ``s_c = 0``); ``scale`` ``s_c``
    when already at hand."""
    if scale is None:
        scale = _scale(d, d_bar)
    if _every(scale > 0.0):                       # se / s_c is inf exactly where se_c is
        return se / scale
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(scale > 0.0, se / np.where(scale > 0.0, scale, 1.0), np.inf)
    return np.where(np.isfinite(se), rel, np.inf)


# --------------------------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------------------------

def _check_inputs(utilization: Any, throughputs: Any, cores: Any
                  ) -> tuple[np.ndarray, np.ndarray, float]:
    u, X = utilization_and_throughputs(utilization, throughputs, "window")
    if not _every((X >= 0.0) & (X < math.inf)):                # finite and >= 0; NaN is not
        bad_x = ~(np.isfinite(X) & (X >= 0.0))
        raise ValueError(f"throughputs: entries must be finite and >= 0, "
                         f"got {X[bad_x][:3].tolist()}")
    try:
        c = float(cores)
    except (TypeError, ValueError):
        raise ValueError(f"cores: must be a positive number, got {cores!r}") from None
    if not (c > 0.0 and math.isfinite(c)):
        raise ValueError(f"cores: must be finite and > 0, got {cores!r}")
    return u, X, c


def _check_fraction(value: Any, field: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{field}: must be a number > 0, got {value!r}") from None
    if not v > 0.0:                                  # NaN fails too
        raise ValueError(f"{field}: must be > 0, got {value!r}")
    return v


def _check_discipline(discipline: str) -> None:
    if discipline not in DISCIPLINES:
        raise ValueError(f"discipline: must be one of {DISCIPLINES}, got {discipline!r}")


def _check_response_times(response_times: Any, shape: tuple[int, ...]) -> np.ndarray:
    R = as_array(response_times, "response_times")
    if R.shape != shape:
        raise ValueError(f"response_times: expected shape {shape}, got {R.shape}")
    if np.count_nonzero(R < 0):                # NaN is "none reported"; -inf is ignored
        finite = np.isfinite(R)
        if (R[finite] < 0).any():
            raise ValueError(f"response_times: entries must be >= 0 (NaN: none reported), "
                             f"got {R[finite & (R < 0)][:3].tolist()}")
    return R


def _check_classes(classes: Sequence[str] | None, n: int) -> tuple[str, ...]:
    if classes is None:
        return tuple(f"class{i}" for i in range(n))
    if isinstance(classes, (str, bytes)):
        raise ValueError(f"classes: must be a list of class names, got {classes!r}")
    names = tuple(classes)
    if len(names) != n or len(set(names)) != n or not all(isinstance(c, str) and c
                                                          for c in names):
        raise ValueError(f"classes: expected {n} unique non-empty names, got {list(names)!r}")
    return names


# --------------------------------------------------------------------------------------------
# response-time split
# --------------------------------------------------------------------------------------------

def response_time_split(utilization: Sequence[float] | np.ndarray,
                        throughputs: Sequence[Sequence[float]] | np.ndarray,
                        response_times: Sequence[Sequence[float]] | np.ndarray,
                        cores: float = 1.0, discipline: str = "ps") -> np.ndarray | None:
    """Per-class demands from the utilization law split by mean response times (module notes).

    ``response_times`` ``(windows, classes)`` in seconds, NaN where a class reported none in a
    window; each class's mean is weighted by its throughput. ``"ps"``:
    ``D_c = U_bar cores R_c / sum_j X_bar_j R_j``; ``"fcfs"``: ``D_c = D_bar + R_c - R_bar``
    (clipped at 0, rescaled to the utilization law). Returns ``None`` -- no split -- when a
    class with completions never reported a response time, or no work was done.
    """
    u, X, c = _check_inputs(utilization, throughputs, cores)
    _check_discipline(discipline)
    R = _check_response_times(response_times, X.shape)
    return _split(u, X, R, c, discipline, X.mean(axis=0))


def _every(mask: np.ndarray) -> bool:
    """``mask.all()`` by ``numpy.count_nonzero`` (a fraction of a reduction's call cost)."""
    return np.count_nonzero(mask) == mask.size


def _selection(mask: np.ndarray) -> np.ndarray | slice:
    """``mask`` as an index: the basic slice ``[:]`` when it selects everything (no copy)."""
    return slice(None) if _every(mask) else mask


def _split(u: np.ndarray, X: np.ndarray, R: np.ndarray, c: float, discipline: str,
           x_bar: np.ndarray) -> np.ndarray | None:
    """:func:`response_time_split` of checked input; ``x_bar`` ``X.mean(axis=0)``."""
    has = np.isfinite(R) & (X > 0)
    weight = np.where(has, X, 0.0)
    w_sum = weight.sum(axis=0)
    seen = x_bar > 0
    if not np.count_nonzero(seen):
        return None
    cols = _selection(seen)
    if np.count_nonzero(w_sum[cols] <= 0):
        return None
    r_bar = np.zeros(X.shape[1])
    r_bar[cols] = (np.where(has, R, 0.0) * weight).sum(axis=0)[cols] / w_sum[cols]
    busy = float(u.sum()) / u.size * c             # U_bar cores
    total = float(x_bar.sum())
    if not (busy > 0 and total > 0):
        return None
    if discipline == "ps":
        denom = float(x_bar @ r_bar)
        if not denom > 0:
            return None
        return np.where(seen, busy * r_bar / denom, 0.0)
    d_bar = busy / total
    r_mean = float(x_bar @ r_bar) / total
    d = np.where(seen, np.maximum(d_bar + r_bar - r_mean, 0.0), 0.0)
    fitted = float(x_bar @ d)
    return d * (busy / fitted) if fitted > 0 else np.full(X.shape[1], d_bar) * seen


# --------------------------------------------------------------------------------------------
# the assessment
# --------------------------------------------------------------------------------------------

def assess_separability(utilization: Sequence[float] | np.ndarray,
                        throughputs: Sequence[Sequence[float]] | np.ndarray,
                        cores: float = 1.0, *,
                        classes: Sequence[str] | None = None,
                        response_times: Sequence[Sequence[float]] | np.ndarray | None = None,
                        others: Mapping[str, Sequence[float] | np.ndarray] | None = None,
                        others_std: Mapping[str, Sequence[float] | np.ndarray] | None = None,
                        max_rel_se: float = 0.1, max_vif: float = 10.0,
                        max_disagreement: float = 0.25,
                        discipline: str = "ps") -> Separability:
    """Which classes' demands the windows separate (module docstring), with uncertainties.

    ``utilization`` ``(windows,)`` in [0, 1] (averaged over ``cores``), ``throughputs``
    ``(windows, classes)`` completions per second; ``response_times`` optional, as
    :func:`response_time_split`; ``others`` other estimates of the same demands by name (e.g.
    ``{"kalman": x}``) and ``others_std`` their standard deviations (e.g. the Kalman
    ``sqrt(diag(P))``), used in the disagreement test. Thresholds: ``max_rel_se`` on
    ``se_c / s_c``, ``max_vif`` tells ``collinear`` from ``imprecise``, ``max_disagreement`` on
    ``|D_other - D_ols| / s_c``.
    """
    u, X, c = _check_inputs(utilization, throughputs, cores)
    n, p = X.shape
    names = _check_classes(classes, p)
    max_rel_se = _check_fraction(max_rel_se, "max_rel_se")
    max_vif = _check_fraction(max_vif, "max_vif")
    max_disagreement = _check_fraction(max_disagreement, "max_disagreement")
    _check_discipline(discipline)
    z = u * c
    total = float(X.sum())
    z_sum = float(z.sum())
    d_bar = z_sum / total if total > 0 else 0.0

    seen, identifiable, demands, se, vif, cond = _least_squares(X, z)
    scale = _scale(demands, d_bar)
    rel = _relative(se, demands, d_bar, scale)
    scaled = _every(scale > 0)
    disagreement: dict[str, np.ndarray] = {}
    disagrees = np.zeros(p, dtype=bool)
    for name, values in (others or {}).items():
        other = as_array(values, f"others[{name!r}]")
        if other.shape != (p,) or not _every(np.isfinite(other)):
            raise ValueError(f"others[{name!r}]: expected {p} finite values, got {values!r}")
        other_sd = np.zeros(p)
        if others_std and name in others_std:
            other_sd = as_array(others_std[name], f"others_std[{name!r}]")
            if other_sd.shape != (p,) or not _every(np.isfinite(other_sd) & (other_sd >= 0)):
                raise ValueError(f"others_std[{name!r}]: expected {p} finite values >= 0, "
                                 f"got {others_std[name]!r}")
        diff = np.abs(other - demands)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = diff / scale if scaled else \
                np.where(scale > 0, diff / np.where(scale > 0, scale, 1), 0.0)
        # A ratio that overflows (a demand of 1e-300 against one of 1e10) is capped, not inf.
        disagreement[name] = np.minimum(ratio, _FLOAT_MAX)
        combined = 2.0 * np.sqrt(np.where(np.isfinite(se), se * se, 0.0) + other_sd ** 2)
        disagrees |= identifiable & (disagreement[name] > max_disagreement) & (diff > combined)

    reasons = _reasons(seen, identifiable, demands + 2.0 * se < 0.0, rel > max_rel_se,
                       vif > max_vif, disagrees)
    separable = np.array([r is None for r in reasons], dtype=bool)

    x_bar = X.sum(axis=0) / n                      # X.mean(axis=0), without its overhead
    split = None
    if response_times is not None:
        split = _split(u, X, _check_response_times(response_times, X.shape), c, discipline,
                       x_bar)
    recommended = _recommend(demands, separable, seen, split, x_bar, z_sum / n, d_bar)
    return Separability(
        classes=names, demands=demands, std_error=se, vif=vif, condition_number=cond,
        separable=separable, reasons=reasons, response_split=split,
        recommended=recommended, class_blind=d_bar, disagreement=disagreement, windows=n)


def _least_squares(X: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                           np.ndarray, np.ndarray, float]:
    """The ordinary least squares ``z ~ X D`` on the column-equilibrated design
    ``X~ = X / ||X_c||`` (module docstring): per class ``seen`` (any completions),
    ``identifiable`` (untouched by the null space of ``X~``), the demand ``D_c`` (the
    minimum-norm solution; ``0`` where not identifiable), its standard error
    ``se_c = sqrt(s^2 [(X~^T X~)^+]_cc) / ||X_c||`` and ``VIF_c = [(X~^T X~)^+]_cc`` (both
    ``inf`` where not identifiable), and the condition number of ``X~`` (``inf``:
    rank-deficient)."""
    n, p = X.shape
    norms = np.sqrt((X * X).sum(axis=0))
    seen = norms > 0
    demands = np.zeros(p)
    se = np.full(p, np.inf)
    vif = np.full(p, np.inf)
    identifiable = np.zeros(p, dtype=bool)
    if not np.count_nonzero(seen):
        return seen, identifiable, demands, se, vif, math.inf
    Xs = X[:, seen] / norms[seen]          # (its memory layout sets the rounding of Xs @ coef)
    Us, s, Vt = np.linalg.svd(Xs, full_matrices=False)
    keep = s > _RANK_RTOL * float(s[0])
    rank = int(np.count_nonzero(keep))
    # the kept rows of Vt and entries of s (a row mask copies Vt in the same layout); Us keeps
    # the column mask, whose copy has another layout than Us and so its own rounding
    kept = _selection(keep)
    coef = Vt[kept].T @ ((Us[:, keep].T @ z) / s[kept])    # minimum-norm least squares
    cond = float(s[0] / s[-1]) if rank == Xs.shape[1] else math.inf
    # classes untouched by the null space are identifiable (their row of V_null is ~0)
    free: np.ndarray | slice = slice(None)
    if not isinstance(kept, slice):
        free = _selection((np.abs(Vt[~keep]) <= 1e-8).all(axis=0))
    inv_diag = ((Vt[kept] / s[kept][:, None]) ** 2).sum(axis=0)    # diag((Xs^T Xs)^+)
    resid = z - Xs @ coef
    dof = n - rank
    s2 = float(resid @ resid) / dof if dof > 0 else math.inf
    cols = _selection(seen) if isinstance(free, slice) else np.flatnonzero(seen)[free]
    identifiable[cols] = True
    demands[cols] = coef[free] / norms[cols]
    vif[cols] = inv_diag[free]
    if math.isfinite(s2):
        se[cols] = np.sqrt(s2 * inv_diag[free]) / norms[cols]
    return seen, identifiable, demands, se, vif, cond


def _reasons(seen: np.ndarray, identifiable: np.ndarray, negative: np.ndarray,
             imprecise: np.ndarray, inflated: np.ndarray, disagrees: np.ndarray
             ) -> tuple[str | None, ...]:
    """Per class the first of :data:`REASONS` that holds, ``None`` for a separable class:
    ``negative`` ``D_c + 2 se_c < 0``, ``imprecise`` ``se_c / s_c > max_rel_se`` (``collinear``
    when also ``inflated``, ``VIF_c > max_vif``), ``disagrees`` another estimate differs."""
    reasons: list[str | None] = []
    for has_seen, has_id, neg, imp, infl, dis in zip(
            seen.tolist(), identifiable.tolist(), negative.tolist(), imprecise.tolist(),
            inflated.tolist(), disagrees.tolist()):
        if not has_seen:
            reasons.append("no_completions")
        elif not has_id:
            reasons.append("not_identifiable")
        elif neg:
            reasons.append("negative")
        elif imp:
            reasons.append("collinear" if infl else "imprecise")
        elif dis:
            reasons.append("estimators_disagree")
        else:
            reasons.append(None)
    return tuple(reasons)


def _recommend(demands: np.ndarray, separable: np.ndarray, seen: np.ndarray,
               split: np.ndarray | None, x_bar: np.ndarray, busy: float,
               d_bar: float) -> np.ndarray:
    """Least squares where separable, else the response-time split (else ``D_bar``); the
    classes not separated are rescaled together so that ``x_bar @ D = busy`` (the aggregate the
    utilization law pins down), as far as non-negative demands allow."""
    out = np.where(separable, np.maximum(demands, 0.0), 0.0)
    loose = ~separable & seen
    if np.count_nonzero(loose):
        out[loose] = split[loose] if split is not None else d_bar
        fixed = float(x_bar[~loose] @ out[~loose])
        free = float(x_bar[loose] @ out[loose])
        remaining = busy - fixed
        if free > 0 and remaining > 0:
            out[loose] *= remaining / free
    return out
