"""MAP(2) service processes fitted from mean, index of dispersion and 95th percentile.

Mi et al. (2008), section 4.1: each tier's service
process is a two-phase Markovian arrival process ``MAP(D0, D1)`` chosen from three measured
numbers -- the mean service time, the index of dispersion ``I`` (Mi et al. 2008, eq. (1),
estimated as in Fig. 2) and the 95th percentile of service times (estimated from busy times, see
:func:`service_p95`). Among the MAP(2)s with the given mean and ``I`` within +-20% of the
target, the one whose marginal 95th percentile is closest to the target is chosen; ties go to the
largest lag-1 autocorrelation ``rho1`` (Mi et al. 2008, footnote to section 4.1: "more aggressive
burstiness ... conservative capacity planning").

The search rests on the explicit characterisation of MAP(2)s (Heindl, Horvath, Gross,
"Explicit inverse characterizations of acyclic MAPs of second order", EPEW 2006; Bodrog,
Heindl, Horvath, Telek, "A Markovian canonical form of second-order matrix-exponential
processes", EJOR 2008): every MAP(2) is given by

* its marginal, an acyclic two-phase PH distribution described by the mean ``r1`` and the
  normalised moments ``h2 = (r2 - r1^2)/r1^2 = (SCV - 1)/2`` and
  ``h3 = (r3 r1 - r2^2)/r1^4`` (``r_k = E[X^k]/k!``), and
* the autocorrelation decay ``gamma`` (second eigenvalue of ``P = (-D0)^-1 D1``), free in an
  interval that depends only on ``(h2, h3)``. (line-solver's ``map2_fit`` returns negative
  ``D1`` entries for hypoexponential marginals with ``gamma > 0``; the canonical form is used.)

For every MAP(2) the lag-k autocorrelation is ``rho_k = gamma^k (SCV - 1)/(2 SCV)``, so eq. (1)
sums in closed form to

    I = SCV (1 + 2 rho1/(1 - gamma)) = 1 + (SCV - 1)/(1 - gamma),

i.e. ``I`` depends on ``(SCV, gamma)`` only and the 95th percentile on the marginal only. The fit
therefore searches the two-parameter space of marginals (SCV and a shape parameter, on a grid
refined by zooming and by bisection onto the curve ``p95 = target``) and sets ``gamma`` in
closed form from the target ``I``. All arithmetic is on raw arrays; the :class:`MAP` object is
built once, for the result.

Selection rule (documented interpretation of section 4.1): candidates are the MAP(2)s whose
feasible ``I`` comes within ``idc_tol`` of the target; among them the smallest relative p95
error wins; near-ties (within ``1e-6``) go to the ``I`` closest to the target -- the +-20% band is
an error allowance, not a degree of freedom to exploit -- and remaining ties (identical mean,
``I`` and p95, the footnote's case) to the largest ``rho1``, and what is still tied (the same
SCV and ``gamma``, two shapes with the same p95: the 5% tail carried by a moderately slow
branch, or the body of a marginal with a rare, extremely slow branch) to the smallest
normalised third moment ``h3`` -- the least extreme marginal. (Without that rule a p95 near the
exponential's ``mean ln 20`` could pick a slow branch of ~500 means with probability 1e-4: on
the browsing mix of Mi et al. (2008) a 40% throughput error, docs/accuracy.md.) When no MAP(2)
reaches the ``I`` band, the ``I`` closest to the target wins instead and the result is flagged. Targets the
exponential distribution meets (``I`` within ``idc_tol`` of 1, p95 within ``p95_tol`` of
``mean ln 20``) give the order-1 MAP (Poisson process).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from solvers.processes import MAP

__all__ = ["Map2Fit", "ServiceP95", "acf1_of", "fit_map2", "idc_of", "service_p95",
           "windows_with_completions"]

_Q = 0.95
_TAIL = 1.0 - _Q
_LN20 = math.log(1.0 / _TAIL)  # p95 of the exponential with mean 1

_H2, _HYPO, _EXP = 0, 1, 2  # marginal families: hyperexponential, hypoexponential, exponential
_GAMMA_MAX = 1.0 - 1e-8  # keep the phase process irreducible (gamma -> 1 is a reducible limit)
_U_LOGIT = np.linspace(-18.0, 18.0, 49)  # H2 shape grid (logit of u), both ends clustered
_V_GRID = np.concatenate([[1e-4, 3e-3], np.linspace(0.02, 1.0, 20)])  # hypo shape grid
_H2_ROWS = 72
_HYPO_ROWS = 14
_ZOOM_LEVELS = 2
_ZOOM_ROWS = 15
_ZOOM_COLS = 15
_MEAN_RANGE = (1e-12, 1e12)  # time unit free; solvers.processes.MAP is scale-sensitive beyond
_IDC_WORK = (1e-6, 1e12)  # working range of the I target (beyond it: flagged, never NaN)
_Q_WORK = (1e-12, 1e6)  # working range of p95/mean
_P95_TIE = 1e-6
_IDC_TIE = 1e-9
_ACF_TIE = 1e-9
#: ties in ``|ln(SCV / scv)|`` when an SCV is asked for
_SCV_TIE = 1e-9
_BISECT = 46
_QUANTILE_BISECT = 28
_QUANTILE_NEWTON = 3


# ============================================================================ results
@dataclass(frozen=True)
class Map2Fit:
    """Result of :func:`fit_map2` (Mi et al. 2008, section 4.1).

    ``process`` is the fitted MAP (order 2, or order 1 for an exponential fit); ``idc``,
    ``p95``, ``scv``, ``acf1`` (``rho1``) and ``decay`` (``gamma``) are the values the process
    achieves, computed by :class:`MAP` on its mean-1 version (time scaling changes only the
    mean and p95, and keeps the stationary-vector solve well scaled). ``idc_met`` and
    ``p95_met`` tell whether ``idc`` is within ``idc_tol`` and ``p95`` within ``p95_tol`` of the
    targets; ``flag`` is ``None`` when both are met, else ``"idc_unreachable"``,
    ``"p95_unreachable"`` or both, comma-separated.
    """

    process: MAP
    mean: float
    idc: float
    p95: float
    scv: float
    acf1: float
    decay: float
    target_idc: float
    target_p95: float
    idc_met: bool
    p95_met: bool
    flag: str | None

    @property
    def met(self) -> bool:
        """True when both the ``I`` and the p95 targets are met."""
        return self.idc_met and self.p95_met


@dataclass(frozen=True)
class ServiceP95:
    """Result of :func:`service_p95` (Mi et al. 2008, end of section 4.1).

    ``p95`` is ``quantile_95(B_k) / median(n_k)`` over the windows with completions, or
    ``None`` (with ``flag == "no_completions"``) when no window completed a request.
    """

    p95: float | None
    busy_p95: float | None
    median_completions: float | None
    windows_used: int
    windows_ignored: int
    flag: str | None


# ============================================================================ p95 from busy times
def service_p95(busy_times: Any, completions: Any) -> ServiceP95:
    """95th percentile of service times from per-window busy times (Mi et al. 2008, section 4.1).

    ``busy_times[k]`` is the busy time ``B_k = U_k T`` of window ``k`` (Fig. 2, step 1) and
    ``completions[k]`` the number ``n_k`` of requests completed in it. Assuming ``B_k ~ n_k S_k``
    with ``n_k`` fixed at its median, the service-time percentile is
    ``quantile_95(B_k) / median(n_k)``.

    Windows with ``n_k = 0`` are ignored: an idle window (``B_k = 0``) says nothing about
    service times, and a busy window without completions (a request spanning windows) has no
    ``n_k`` to share its busy time; dropping it biases the estimate low only when requests last
    longer than a window, which windows much longer than service times rule out. Both
    statistics are taken over the same kept windows. If every window has ``n_k = 0`` the result
    is flagged ``"no_completions"`` with ``p95 = None``; it is never NaN.

    Raises ``ValueError`` naming ``busy_times``/``completions`` for empty, mismatched,
    non-finite or negative input.
    """
    busy, done, ignored = windows_with_completions(busy_times, completions)
    if busy.size == 0:
        return ServiceP95(None, None, None, 0, ignored, "no_completions")
    busy_p95 = _quantile_of(busy, _Q)
    median_n = _quantile_of(done, 0.5)
    return ServiceP95(busy_p95 / median_n, busy_p95, median_n, busy.size, ignored, None)


def windows_with_completions(busy_times: Any, completions: Any
                             ) -> tuple[np.ndarray, np.ndarray, int]:
    """The busy times and completions of the windows with ``n_k > 0``, and how many windows
    were left out (the p95 estimates' common input, see :func:`service_p95`).

    Raises ``ValueError`` naming ``busy_times``/``completions`` for empty, mismatched,
    non-finite or negative input."""
    busy = _vector(busy_times, "busy_times")
    done = _vector(completions, "completions")
    if busy.shape != done.shape:
        raise ValueError(
            f"busy_times and completions: lengths differ ({busy.size} vs {done.size})"
        )
    keep = done > 0
    return busy[keep], done[keep], int(busy.size - np.count_nonzero(keep))


def _quantile_of(values: np.ndarray, q: float) -> float:
    """``numpy.quantile(values, q)`` (the default, linear method) from the two order
    statistics it interpolates, found by ``numpy.partition``: no full sort, none of
    ``quantile``'s general machinery."""
    h = (values.size - 1) * q
    lo = int(math.floor(h))
    hi = min(lo + 1, values.size - 1)
    part = np.partition(values, [lo, hi]) if hi != lo else np.partition(values, lo)
    a, b, t = float(part[lo]), float(part[hi]), h - lo
    diff = b - a                                    # numpy's _lerp, for the same rounding
    return b - diff * (1.0 - t) if t >= 0.5 else a + diff * t


def _vector(value: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a sequence of numbers") from None
    if arr.ndim != 1:
        raise ValueError(f"{name}: must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name}: is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    if np.any(arr < 0):
        raise ValueError(f"{name}: values must be >= 0")
    return arr


# ============================================================================ MAP(2) relations
def idc_of(scv: Any, gamma: Any) -> Any:
    """``I = 1 + (SCV - 1)/(1 - gamma)``: eq. (1) of Mi et al. (2008) summed for a MAP(2)."""
    return 1.0 + (scv - 1.0) / (1.0 - gamma)


def acf1_of(scv: Any, gamma: Any) -> Any:
    """Lag-1 autocorrelation of a MAP(2): ``rho1 = gamma (SCV - 1)/(2 SCV)``."""
    return gamma * (scv - 1.0) / (2.0 * scv)


def _gamma_for_idc(scv: np.ndarray, idc: np.ndarray) -> np.ndarray:
    """Inverse of :func:`idc_of` in ``gamma``: ``gamma = 1 - (SCV - 1)/(I - 1)``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma = 1.0 - (scv - 1.0) / (idc - 1.0)
    return np.where(np.isfinite(gamma), gamma, 0.0)


# ============================================================================ marginals
@dataclass(frozen=True)
class _Marginals:
    """A batch of mean-1 PH(2) marginals: ``S(x) = w1 exp(-s1 x) + w2 exp(-s2 x)``."""

    family: np.ndarray
    scv: np.ndarray
    shape: np.ndarray
    h2: np.ndarray
    h3: np.ndarray
    w1: np.ndarray
    s1: np.ndarray
    s2: np.ndarray
    gamma_lo: np.ndarray
    gamma_hi: np.ndarray

    def survival(self, x: np.ndarray) -> np.ndarray:
        """``S(x)``, the marginal complementary CDF at ``x`` (elementwise)."""
        return self.w1 * np.exp(-self.s1 * x) + (1.0 - self.w1) * np.exp(-self.s2 * x)

    def take(self, idx: np.ndarray) -> "_Marginals":
        return _Marginals(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})

    @staticmethod
    def concat(parts: list["_Marginals"]) -> "_Marginals":
        fields = _Marginals.__dataclass_fields__
        return _Marginals(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in fields})


def _h2_branches(scv: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, ...]:
    """Mean-1 hyperexponential with squared coefficient of variation ``scv > 1``.

    ``X ~ Exp(mean m1)`` w.p. ``1 - p`` and ``Exp(mean m2)`` w.p. ``p``, with
    ``p = 2u/(1 + SCV)``, ``m1 = 1 - t sqrt(p/(1-p))``, ``m2 = 1 + t sqrt((1-p)/p)`` and
    ``t^2 = (SCV - 1)/2``. The shape ``u`` in (0, 1) runs from a rare, very slow branch
    (``u -> 0``, third moment -> infinity) to a vanishing fast branch (``u -> 1``, the minimal
    third moment ``E3 = 3 E2^2 / (2 E1)``).
    """
    p = 2.0 * u / (1.0 + scv)
    t = np.sqrt((scv - 1.0) / 2.0)
    # m1 = 1 - sqrt(x) with x = t^2 p/(1-p), rewritten without cancellation as u -> 1
    x = (scv - 1.0) * u / (1.0 + scv - 2.0 * u)
    m1 = (1.0 + scv) * (1.0 - u) / ((1.0 + scv - 2.0 * u) * (1.0 + np.sqrt(x)))
    m2 = 1.0 + t * np.sqrt((1.0 - p) / p)
    return p, m1, m2


def _h2_marginals(scv: np.ndarray, u: np.ndarray) -> _Marginals:
    """Hyperexponential marginals and their MAP(2) ``gamma`` range (Heindl et al. 2006)."""
    p, m1, m2 = _h2_branches(scv, u)
    h2 = (scv - 1.0) / 2.0
    # r3 r1 - r2^2 for a two-point mixture: p (1-p) m1 m2 (m2 - m1)^2 (no cancellation).
    h3 = p * (1.0 - p) * m1 * m2 * (m2 - m1) ** 2
    b = h3 + h2 * h2 - h2
    c = np.sqrt(b * b + 4.0 * h2**3)
    with np.errstate(divide="ignore", invalid="ignore"):
        lo_pos = -4.0 * h2**3 / (b + c) ** 2  # = (b - c)/(b + c), computed without cancellation
        lo_neg = -(h3 + h2 * h2) / h2
    gamma_lo = np.where(b >= 0, lo_pos, lo_neg)
    gamma_lo = np.clip(np.nan_to_num(gamma_lo, nan=0.0), -1.0, 0.0)
    fam = np.full(scv.shape, _H2)
    return _Marginals(fam, scv, u, h2, h3, 1.0 - p, 1.0 / m1, 1.0 / m2, gamma_lo,
                      np.full(scv.shape, _GAMMA_MAX))


def _hypo_h3_range(h2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Feasible ``h3`` of an acyclic PH(2) with ``-1/4 <= h2 < 0`` (Heindl et al. 2006)."""
    return h2 * (1.0 - h2 - 2.0 * np.sqrt(-h2)), -h2 * h2


def _hypo_marginals(scv: np.ndarray, v: np.ndarray) -> _Marginals:
    """Hypoexponential marginals (``1/2 < SCV < 1``), ``h3`` interpolated by ``v`` in its range.

    ``gamma`` ranges over ``[-(h3 + h2^2)/h2, -(h2 + sqrt(-h3))^2/h2]`` (Bodrog, Heindl,
    Horvath, Telek 2008; BuTools' ``MAP2CorrelationBounds``). The eigen-rates of ``D0`` are
    ``(2 h2 + b -+ c)/(2 h3)`` with ``b = h3 + h2^2 - h2`` and ``c = -sqrt(b^2 + 4 h2^3)``
    (Heindl et al. 2006); the weights follow from ``S(0) = 1`` and the mean.
    """
    h2 = (scv - 1.0) / 2.0
    lo3, hi3 = _hypo_h3_range(h2)
    h3 = lo3 + v * (hi3 - lo3)
    b = h3 + h2 * h2 - h2
    c = -np.sqrt(np.maximum(b * b + 4.0 * h2**3, 0.0))
    s1 = (2.0 * h2 + b - c) / (2.0 * h3)
    s2 = (2.0 * h2 + b + c) / (2.0 * h3)
    # weights from S(0) = 1 and the mean: w1/s1 + (1 - w1)/s2 = 1
    w1 = (1.0 - 1.0 / s2) / (1.0 / s1 - 1.0 / s2)
    gamma_lo = np.clip(-(h3 + h2 * h2) / h2, -1.0, 0.0)
    gamma_hi = np.clip(-((h2 + np.sqrt(-h3)) ** 2) / h2, 0.0, _GAMMA_MAX)
    fam = np.full(scv.shape, _HYPO)
    return _Marginals(fam, scv, v, h2, h3, w1, s1, s2, gamma_lo, gamma_hi)


def _exp_marginal() -> _Marginals:
    one = np.ones(1)
    zero = np.zeros(1)
    return _Marginals(np.full(1, _EXP), one, zero, zero, zero, one, one, one, zero, zero)


def _marginals(family: int, scv: np.ndarray, shape: np.ndarray) -> _Marginals:
    if family == _H2:
        return _h2_marginals(scv, shape)
    return _hypo_marginals(scv, shape)


def _shape_from_coord(family: int, coord: np.ndarray) -> np.ndarray:
    """Grid coordinate -> shape parameter (logit for the H2 ``u``, identity for hypo ``v``)."""
    if family == _H2:
        return 1.0 / (1.0 + np.exp(-coord))
    return coord


def _survival_at(family: int, scv: np.ndarray, shape: np.ndarray, x: float) -> np.ndarray:
    """``S(x)`` of the marginals ``(scv, shape)`` of one family, without the ``gamma`` bounds."""
    if family == _H2:
        p, m1, m2 = _h2_branches(scv, shape)
        return (1.0 - p) * np.exp(-x / m1) + p * np.exp(-x / m2)
    return _hypo_marginals(scv, shape).survival(np.full(scv.shape, x))


def _quantile(m: _Marginals, q: float = _Q) -> np.ndarray:
    """Marginal ``q``-quantiles of a batch: bisection on ``log x``, then Newton (vectorised).

    Brackets: a PH with upper-triangular ``D0`` dominates ``Exp(s_max)`` stochastically, so
    ``S(x) >= exp(-s_max x)``; and ``S(x) <= (|w1| + |w2|) exp(-s_min x)``. Newton steps on
    ``S(x) = 1 - q`` with the density ``f = w1 s1 exp(-s1 x) + w2 s2 exp(-s2 x)`` are kept
    inside the final bracket.
    """
    tail = 1.0 - q
    s_min = np.minimum(m.s1, m.s2)
    s_max = np.maximum(m.s1, m.s2)
    total = np.abs(m.w1) + np.abs(1.0 - m.w1)
    lo = np.log(-math.log(tail) / s_max)
    hi = np.log(np.log(total / tail) / s_min)
    for _ in range(_QUANTILE_BISECT):
        mid = 0.5 * (lo + hi)
        above = m.survival(np.exp(mid)) > tail
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    x_lo, x_hi = np.exp(lo), np.exp(hi)
    x = np.exp(0.5 * (lo + hi))
    for _ in range(_QUANTILE_NEWTON):
        dens = m.w1 * m.s1 * np.exp(-m.s1 * x) + (1.0 - m.w1) * m.s2 * np.exp(-m.s2 * x)
        step = np.where(dens > 0, (m.survival(x) - tail) / np.where(dens > 0, dens, 1.0), 0.0)
        x = np.clip(x + step, x_lo, x_hi)
    return x


# ============================================================================ candidates
@dataclass(frozen=True)
class _Scored:
    """Candidate marginals scored against the targets (mean 1)."""

    marg: _Marginals
    p95: np.ndarray
    p95_err: np.ndarray
    idc: np.ndarray
    idc_err: np.ndarray
    gamma: np.ndarray
    acf1: np.ndarray


def _score(m: _Marginals, p95: np.ndarray, target_idc: float, target_q: float) -> _Scored:
    """Closest feasible ``I`` per marginal and the resulting ``gamma``, ``rho1``, errors."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        i_a = idc_of(m.scv, m.gamma_lo)
        i_b = idc_of(m.scv, m.gamma_hi)
    i_lo = np.minimum(i_a, i_b)
    i_hi = np.maximum(i_a, i_b)
    idc = np.clip(target_idc, i_lo, i_hi)
    gamma = np.clip(_gamma_for_idc(m.scv, idc), m.gamma_lo, m.gamma_hi)
    gamma = np.where(m.family == _EXP, 0.0, gamma)
    idc = np.where(m.family == _EXP, 1.0, idc_of(m.scv, gamma))
    idc_err = np.abs(idc / target_idc - 1.0)
    p95_err = np.abs(p95 / target_q - 1.0)
    return _Scored(m, p95, p95_err, idc, idc_err, gamma, acf1_of(m.scv, gamma))


def _grid(family: int, scv_rows: np.ndarray,
          coords: np.ndarray) -> tuple[_Marginals, tuple[int, int]]:
    """All (row, column) combinations of a family's grid, row-major."""
    scv = np.repeat(scv_rows, coords.size)
    shape = np.tile(_shape_from_coord(family, coords), scv_rows.size)
    return _marginals(family, scv, shape), (scv_rows.size, coords.size)


def _crossings(family: int, grid: _Marginals, dims: tuple[int, int], coords: np.ndarray,
               target_q: float) -> _Marginals | None:
    """Marginals with p95 exactly ``target_q``: bisection on the shape between grid columns.

    ``p95 = q`` iff ``S(q) = 0.05``; every sign change of ``S(q) - 0.05`` along a row brackets
    one crossing. All brackets are bisected together.
    """
    rows, cols = dims
    if cols < 2:
        return None
    f = (grid.survival(np.full(grid.w1.shape, target_q)) - _TAIL).reshape(rows, cols)
    change = np.sign(f[:, :-1]) * np.sign(f[:, 1:]) <= 0
    r_idx, c_idx = np.nonzero(change)
    if r_idx.size == 0:
        return None
    scv = grid.scv.reshape(rows, cols)[r_idx, c_idx]
    lo = coords[c_idx].astype(float)
    hi = coords[c_idx + 1].astype(float)
    f_lo = f[r_idx, c_idx]
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        f_mid = _survival_at(family, scv, _shape_from_coord(family, mid), target_q) - _TAIL
        same = np.sign(f_mid) == np.sign(f_lo)
        lo = np.where(same, mid, lo)
        hi = np.where(same, hi, mid)
    return _marginals(family, scv, _shape_from_coord(family, 0.5 * (lo + hi)))


def _family_candidates(family: int, scv_rows: np.ndarray, coords: np.ndarray,
                       target_q: float) -> tuple[_Marginals, np.ndarray]:
    """Grid points and exact-p95 crossing points of one family, with their p95s."""
    grid, dims = _grid(family, scv_rows, coords)
    parts = [grid]
    p95s = [_quantile(grid)]
    cross = _crossings(family, grid, dims, coords, target_q)
    if cross is not None:
        parts.append(cross)
        p95s.append(np.full(cross.w1.shape, target_q))
    return _Marginals.concat(parts), np.concatenate(p95s)


def _select(s: _Scored, idc_tol: float, scv_hint: float | None = None) -> int:
    """Lexicographic choice with tolerances (see module docstring); returns an index.
    ``scv_hint``: the remaining tie goes to the SCV closest to it (in ratio) instead of the
    largest ``rho1``."""
    admissible = s.idc_err <= idc_tol * (1.0 + 1e-12)
    pool = np.flatnonzero(admissible)
    keys = [(s.p95_err, _P95_TIE), (s.idc_err, _IDC_TIE)]
    if pool.size == 0:
        pool = np.arange(s.idc_err.size)
        keys = [(s.idc_err, _IDC_TIE), (s.p95_err, _P95_TIE)]
    for key, tie in keys:
        vals = key[pool]
        pool = pool[vals <= np.min(vals) + tie]
    if scv_hint is None:
        pool = pool[s.acf1[pool] >= np.max(s.acf1[pool]) - _ACF_TIE]
    else:
        distance = np.abs(np.log(s.marg.scv[pool] / scv_hint))
        pool = pool[distance <= np.min(distance) + _SCV_TIE]
    return int(pool[np.argmin(s.marg.h3[pool])])


def _h2_rows(target_idc: float, idc_tol: float) -> np.ndarray:
    """SCV rows of the H2 grid. A MAP(2) has ``gamma >= -1``, so ``SCV <= 2 I - 1``."""
    top = max(2.0 * target_idc * (1.0 + idc_tol), 4.0)
    return 1.0 + np.geomspace(1e-4, top, _H2_ROWS)


def _hypo_rows() -> np.ndarray:
    return np.linspace(0.5 + 1e-3, 1.0 - 1e-3, _HYPO_ROWS)


def _zoom_axis(values: np.ndarray, at: float, n: int, log: bool) -> np.ndarray:
    """``n`` points spanning the neighbours of ``at`` in the sorted grid axis ``values``."""
    i = int(np.searchsorted(values, at))
    lo = values[max(i - 1, 0)]
    hi = values[min(i + 1, values.size - 1)]
    if hi <= lo:
        return np.array([at])
    pts = np.geomspace(lo, hi, n) if log else np.linspace(lo, hi, n)
    return np.unique(np.concatenate([pts, [at]]))


def _search(target_idc: float, target_q: float, idc_tol: float,
            scv_hint: float | None = None) -> tuple[_Scored, int]:
    """Coarse grid over both families, then ``_ZOOM_LEVELS`` zooms around the best point."""
    axes = {
        _H2: (_h2_rows(target_idc, idc_tol) - 1.0, _U_LOGIT),
        _HYPO: (_hypo_rows(), _V_GRID),
    }
    parts, p95s = [_exp_marginal()], [np.array([_LN20])]
    for fam, (rows, coords) in axes.items():
        scv_rows = rows + 1.0 if fam == _H2 else rows
        m, p = _family_candidates(fam, scv_rows, coords, target_q)
        parts.append(m)
        p95s.append(p)
    scored = _score(_Marginals.concat(parts), np.concatenate(p95s), target_idc, target_q)
    best = _select(scored, idc_tol, scv_hint)
    for _ in range(_ZOOM_LEVELS):
        fam = int(scored.marg.family[best])
        if fam == _EXP:
            break
        rows, coords = axes[fam]
        scv = float(scored.marg.scv[best])
        shape = float(scored.marg.shape[best])
        if fam == _H2:
            row_at, coord_at = scv - 1.0, math.log(shape / (1.0 - shape))
        else:
            row_at, coord_at = scv, shape
        rows = _zoom_axis(rows, row_at, _ZOOM_ROWS, log=fam == _H2)
        local = _zoom_axis(coords, coord_at, _ZOOM_COLS, log=False)
        coords = np.unique(np.concatenate([coords, local]))
        axes[fam] = (rows, coords)
        scv_rows = rows + 1.0 if fam == _H2 else rows
        m, p = _family_candidates(fam, scv_rows, coords, target_q)
        keep = scored.marg.take(np.array([best]))
        merged = _Marginals.concat([keep, m])
        scored = _score(merged, np.concatenate([scored.p95[[best]], p]), target_idc, target_q)
        best = _select(scored, idc_tol, scv_hint)
    return scored, best


# ============================================================================ MAP(2) construction
def _map2_matrices(m: _Marginals, i: int, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """``(D0, D1)`` with mean 1 for marginal ``i`` of ``m`` and decay ``gamma``.

    * Hyperexponential marginal, ``gamma`` above the diagonal-form bound: ``D0 = diag(-1/m1,
      -1/m2)`` and ``D1 = diag(1/m) ((1 - gamma) 1 alpha + gamma I)`` -- exact, no cancellation.
    * Hyperexponential marginal, more negative ``gamma``: the acyclic representation of Heindl,
      Horvath, Gross (2006) with ``a = (h3 + h2^2)/h2``.
    * Hypoexponential marginal: the Markovian canonical form of Bodrog et al. (2008).
    """
    fam = int(m.family[i])
    if fam == _EXP:
        return np.array([[-1.0]]), np.array([[1.0]])
    if fam == _HYPO:
        return _canonical_map2(float(m.s1[i]), float(m.s2[i]), float(m.w1[i]), gamma)
    p = 1.0 - float(m.w1[i])
    h2, h3 = float(m.h2[i]), float(m.h3[i])
    b = h3 + h2 * h2 - h2
    diagonal_lo = -min(p, 1.0 - p) / max(p, 1.0 - p)  # equals Heindl's bound when b >= 0
    if gamma >= diagonal_lo or b >= 0.0:
        gamma = max(gamma, diagonal_lo)
        rates = np.array([m.s1[i], m.s2[i]])
        alpha = np.array([1.0 - p, p])
        jump = (1.0 - gamma) * np.outer(np.ones(2), alpha) + gamma * np.eye(2)
        return -np.diag(rates), rates[:, None] * jump
    c = math.sqrt(max(b * b + 4.0 * h2**3, 0.0))
    a = (h3 + h2 * h2) / h2
    den = (1.0 - a) * (2.0 * h2 + b - c) + 2.0 * c
    d1 = ((1.0 - a) * (2.0 * h2 * gamma + b - c) + gamma * (b + c) - (b - c)) / den
    d2 = ((gamma - 1.0) * (b - c)) / den
    l1 = (2.0 * h2 + b - c) / (2.0 * h3)
    l2 = (2.0 * h2 + b + c) / (2.0 * h3)
    d0 = np.array([[-l1, l1 * (1.0 - a)], [0.0, -l2]])
    dd1 = np.array([[l1 * d1, l1 * (a - d1)], [l2 * d2, l2 * (1.0 - d2)]])
    return d0, dd1


def _canonical_map2(s1: float, s2: float, w1: float, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Markovian canonical MAP(2) (Bodrog, Heindl, Horvath, Telek 2008; BuTools MAP2FromMoments).

    The marginal ``w1 exp(-s1 x) + (1 - w1) exp(-s2 x)`` in acyclic canonical form:
    ``D0 = [[-l1, (1-a) l1], [0, -l2]]`` with ``l1 <= l2`` and initial vector ``(p, 1 - p)``,
    ``p = w(l1) (l2 - l1)/l2``; ``a`` and ``b`` set ``gamma``.
    """
    (l1, w_l1), (l2, _) = sorted([(s1, w1), (s2, 1.0 - w1)])
    p = min(max(w_l1 * (l2 - l1) / l2, 0.0), 1.0)
    ratio = l1 / l2
    if gamma > 0.0:
        base = 1.0 + ratio * gamma - p * (1.0 - gamma)
        root = math.sqrt(max(base * base - 4.0 * ratio * gamma, 0.0))
        a, b = (base - root) / (2.0 * ratio), (base + root) / 2.0
        d1 = np.array([[a * l1, 0.0], [(1.0 - b) * l2, b * l2]])
    elif gamma < 0.0:
        a = gamma / (ratio * gamma - p * (1.0 - gamma))
        b = p * (1.0 - gamma) - ratio * gamma
        d1 = np.array([[0.0, a * l1], [b * l2, (1.0 - b) * l2]])
    else:
        a = 0.0
        d1 = np.array([[0.0, 0.0], [p * l2, (1.0 - p) * l2]])
    return np.array([[-l1, (1.0 - a) * l1], [0.0, -l2]]), d1


def _build_unit(m: _Marginals, i: int, gamma: float) -> MAP:
    """The mean-1 MAP of candidate ``i``; pulls ``gamma`` towards 0 if rounding breaks validity."""
    last: ValueError | None = None
    for g in (gamma, 0.999 * gamma, 0.99 * gamma, 0.0):
        d0, d1 = _map2_matrices(m, i, g)
        d1 = np.maximum(d1, 0.0)
        # rows of D0 + D1 sum to zero up to rounding; restore it on the diagonal exactly
        np.fill_diagonal(d0, 0.0)
        np.fill_diagonal(d0, -(d0.sum(axis=1) + d1.sum(axis=1)))
        try:
            return MAP(d0, d1)
        except ValueError as exc:  # pragma: no cover - defensive, rounding at extremes
            last = exc
    raise ValueError(f"idc: no valid MAP(2) for this target ({last})")  # pragma: no cover


def _with_mean(unit: MAP, mean: float) -> MAP:
    """``unit`` (mean 1) with time rescaled to mean ``mean``: ``(D0, D1) / mean``."""
    if mean == 1.0:
        return unit
    if unit.order == 1:
        return MAP.exponential(mean)
    return MAP(unit.D0 / mean, unit.D1 / mean)


# ============================================================================ public fit
def _positive(value: Any, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a positive finite number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0.0:
        raise ValueError(f"{name}: must be a positive finite number, got {value!r}")
    return v


def _tolerance(value: Any, name: str) -> float:
    v = _positive(value, name)
    if v >= 1.0:
        raise ValueError(f"{name}: must be in (0, 1), got {value!r}")
    return v


def _result(unit: MAP, mean: float, target_idc: float, target_p95: float,
            idc_tol: float, p95_tol: float) -> Map2Fit:
    """Achieved values are scale-free: computed on the mean-1 process, p95 then times ``mean``."""
    idc = float(unit.idc)
    p95 = float(unit.quantile(_Q)) * mean
    idc_met = abs(idc / target_idc - 1.0) <= idc_tol * (1.0 + 1e-9)
    p95_met = abs(p95 / target_p95 - 1.0) <= p95_tol * (1.0 + 1e-9)
    flags = [name for name, ok in (("idc_unreachable", idc_met), ("p95_unreachable", p95_met))
             if not ok]
    return Map2Fit(
        process=_with_mean(unit, mean), mean=mean, idc=idc, p95=p95, scv=float(unit.scv),
        acf1=float(unit.acf(1)) if unit.order > 1 else 0.0, decay=float(unit.decay),
        target_idc=target_idc, target_p95=target_p95, idc_met=idc_met, p95_met=p95_met,
        flag=",".join(flags) or None,
    )


def fit_map2(mean: float, idc: float, p95: float, *, idc_tol: float = 0.2,
             p95_tol: float = 0.05, scv: float | None = None) -> Map2Fit:
    """Fit a MAP(2) service process to ``mean``, index of dispersion ``idc`` and ``p95``.

    Mi et al. (2008), section 4.1: among the MAP(2)s ``(D0, D1)`` with mean ``mean`` and ``I`` within
    ``idc_tol`` (default +-20%) of ``idc``, the one whose marginal 95th percentile is closest to
    ``p95``; near-ties go to the ``I`` closest to ``idc``, then to the largest ``rho1`` (the
    paper's footnote). ``I = SCV (1 + 2 rho1/(1 - gamma))`` fixes ``gamma`` once the marginal
    (hence ``SCV``) is chosen. If the exponential meets both targets (``I`` within ``idc_tol``
    of 1 and p95 within ``p95_tol`` of ``mean ln 20``) the order-1 MAP is returned.

    ``scv``: when another measurement fixes the SCV (mean, ``I`` and p95 leave one degree of
    freedom: a curve of marginals with the same p95, each with its ``gamma``), the tie goes to
    the SCV closest to it instead of the largest ``rho1``; the result's ``scv`` is the nearest
    the curve reaches (``streams.predict.calibration`` picks it from the tier's measured
    response time).

    Never raises for positive finite ``idc`` and ``p95`` when ``1e-12 <= mean <= 1e12`` (the
    fit is time-unit free; pick a unit that puts the mean there): unreachable combinations
    (e.g. ``idc < 1`` with a heavy p95, ``idc < 1/2`` which no MAP(2) reaches, or
    ``p95`` above about ``7.36 mean``, beyond any PH(2)) return the best available process
    with ``flag`` set.
    Raises ``ValueError`` naming ``mean``, ``idc``, ``p95`` (or ``idc_tol``/``p95_tol``) for
    non-positive, NaN or infinite values, and ``mean`` outside the range above.

    Cost: about 10 ms (vectorised grid of ~5,000 marginals, bisection onto ``p95 = target``,
    two zoom levels), see ``bench/speed/mapfit.py``.
    """
    mean = _positive(mean, "mean")
    idc = _positive(idc, "idc")
    p95 = _positive(p95, "p95")
    idc_tol = _tolerance(idc_tol, "idc_tol")
    p95_tol = _tolerance(p95_tol, "p95_tol")
    scv = None if scv is None else _positive(scv, "scv")
    if not _MEAN_RANGE[0] <= mean <= _MEAN_RANGE[1]:
        raise ValueError(f"mean: {mean!r} is outside the supported range {_MEAN_RANGE}")
    # p95 relative to the mean; both targets clipped to a working range (result is flagged)
    q = math.exp(min(max(math.log(p95) - math.log(mean), math.log(_Q_WORK[0])),
                     math.log(_Q_WORK[1])))
    idc_work = min(max(idc, _IDC_WORK[0]), _IDC_WORK[1])
    if abs(1.0 / idc_work - 1.0) <= idc_tol and abs(_LN20 / q - 1.0) <= p95_tol:
        return _result(MAP.exponential(1.0), mean, idc, p95, idc_tol, p95_tol)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        scored, best = _search(idc_work, q, idc_tol, scv)
    unit = _build_unit(scored.marg, best, float(scored.gamma[best]))
    return _result(unit, mean, idc, p95, idc_tol, p95_tol)
