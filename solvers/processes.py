"""Markovian arrival processes (MAPs) as service processes.

A MAP of order ``n`` is given by two ``n x n`` matrices (Mi et al. 2008, section 4.1):

* ``D0`` -- rates of *hidden* phase changes (no completion); off-diagonal entries >= 0,
  diagonal entries < 0;
* ``D1`` -- rates of phase changes that *complete* a request (entries >= 0);

and ``Q = D0 + D1`` is the generator of the phase process (rows sum to zero). Used as a service
process, the times between consecutive completions of a busy server are the MAP's intervals:
a marginal phase-type distribution ``PH(pi, D0)`` whose successive samples are correlated.

Notation used throughout (standard MAP theory, e.g. Casale et al.):

* ``theta``   stationary vector of ``Q`` (``theta Q = 0``, ``theta 1 = 1``);
* ``lambda``  the rate ``theta D1 1``, so ``mean = 1/lambda``;
* ``pi``      stationary phase at completion epochs, ``pi = theta D1 / lambda``;
* ``M = (-D0)^-1`` and ``P = M D1`` (phase transition matrix between completions);
* moments ``E[X^k] = k! pi M^k 1``; lag-k joint moment ``E[X_0 X_k] = pi M P^k M 1``;
* the asymptotic index of dispersion of the counts,
  ``I = lim_{t->inf} Var(N_t)/E(N_t) = SCV (1 + 2 sum_{k>=1} rho_k)`` (Mi et al. 2008, eq. (1)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy import linalg, optimize

__all__ = ["MAP"]

_TOL = 1e-9
#: rows of ``D0 + D1`` sum to 0 within this, relative to the largest rate (at least 1)
_ROW_TOL = 1e-8


def _as_matrix(value: Any, name: str) -> np.ndarray:
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not a numeric matrix ({exc})") from None
    if arr.ndim == 0:
        arr = arr.reshape(1, 1)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"{name}: must be a non-empty square matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite entries")
    return arr


def _recurrent_phases(generator: np.ndarray) -> np.ndarray | None:
    """Phases of the unique closed communicating class of ``Q``, or ``None`` if there is not
    exactly one (then the stationary distribution is not unique)."""
    n = generator.shape[0]
    reach = ((generator > 0) | np.eye(n, dtype=bool)).astype(np.int64)
    for _ in range(max(1, int(np.ceil(np.log2(n))) + 1)):
        reach = ((reach @ reach) > 0).astype(np.int64)
    r = reach.astype(bool)
    recurrent = np.array([np.all(r[:, i][r[i]]) for i in range(n)])  # i reaches j => j reaches i
    if not recurrent.any():
        return None
    first = int(np.argmax(recurrent))
    cls = r[first] & recurrent
    if not np.array_equal(cls, recurrent):
        return None
    return np.flatnonzero(recurrent)


def _gth(generator: np.ndarray) -> np.ndarray:
    """Stationary vector of an irreducible generator by Grassmann-Taksar-Heyman elimination
    (subtraction-free, so accurate whatever the spread of the rates)."""
    a = np.array(generator, dtype=float)
    n = a.shape[0]
    for k in range(n - 1, 0, -1):
        total = a[k, :k].sum()
        a[:k, k] /= total
        a[:k, :k] += np.outer(a[:k, k], a[k, :k])
    x = np.zeros(n)
    x[0] = 1.0
    for k in range(1, n):
        x[k] = x[:k] @ a[:k, k]
    return x / x.sum()


def ctmc_stationary(generator: np.ndarray) -> np.ndarray:
    """Stationary vector ``x`` of a CTMC generator with one closed class (``x G = 0``, ``x 1 = 1``);
    transient phases get probability 0."""
    n = generator.shape[0]
    recurrent = _recurrent_phases(generator)
    if recurrent is None:
        raise ValueError("D0 + D1: phase process has no unique stationary distribution")
    x = np.zeros(n)
    x[recurrent] = _gth(generator[np.ix_(recurrent, recurrent)])
    return x


def _rescale_keeps_checks(proc: "MAP", d0: np.ndarray, d1: np.ndarray) -> bool:
    """Whether ``d0``, ``d1`` (``proc``'s matrices times one positive factor) pass every check
    of ``MAP.__init__`` as ``proc``'s did: no rate over- or underflowed (each finite, the same
    entries non-zero, so the same signs, completions and phase graph) and the row sums, the
    one check relative to the largest rate that is not scale-free, still within it."""
    if not (np.all(np.isfinite(d0)) and np.all(np.isfinite(d1))
            and np.count_nonzero(d0) == np.count_nonzero(proc.D0)
            and np.count_nonzero(d1) == np.count_nonzero(proc.D1)):
        return False
    rows = (d0 + d1).sum(axis=1)
    return bool(np.all(np.abs(rows) <= _ROW_TOL * max(1.0, float(np.max(np.abs(d0))))))


@dataclass(frozen=True, eq=False)
class MAP:
    """A Markovian arrival process ``MAP(D0, D1)``; validated on construction.

    Raises ``ValueError`` naming ``D0`` or ``D1`` when the matrices do not define a MAP:
    wrong shapes, negative rates, rows of ``D0 + D1`` that do not sum to zero, a ``D1`` that
    never completes, or a reducible phase process without a unique stationary vector.
    """

    D0: np.ndarray
    D1: np.ndarray

    def __init__(self, D0: Any, D1: Any) -> None:
        d0 = _as_matrix(D0, "D0")
        d1 = _as_matrix(D1, "D1")
        if d0.shape != d1.shape:
            raise ValueError(f"D0 and D1 must have the same shape, got {d0.shape} and {d1.shape}")
        off = d0 - np.diag(np.diag(d0))
        if np.any(off < -_TOL):
            raise ValueError("D0: off-diagonal rates must be >= 0")
        if np.any(np.diag(d0) >= 0):
            raise ValueError("D0: diagonal entries must be < 0")
        if np.any(d1 < -_TOL):
            raise ValueError("D1: rates must be >= 0")
        if not np.any(d1 > 0):
            raise ValueError("D1: has no positive rate (the process never completes)")
        scale = max(1.0, float(np.max(np.abs(d0))))
        rows = (d0 + d1).sum(axis=1)
        if np.any(np.abs(rows) > _ROW_TOL * scale):
            raise ValueError(f"D0 + D1: rows must sum to 0, got row sums {rows.tolist()}")
        d0 = np.where(np.eye(len(d0), dtype=bool), d0, np.maximum(off, 0.0))
        d1 = np.maximum(d1, 0.0)
        object.__setattr__(self, "D0", d0)
        object.__setattr__(self, "D1", d1)
        d0.setflags(write=False)
        d1.setflags(write=False)
        theta = ctmc_stationary(d0 + d1)
        if theta @ d1.sum(axis=1) <= 0:
            raise ValueError("D1: stationary completion rate is zero")

    # ----------------------------------------------------------------- constructors
    @classmethod
    def _valid(cls, d0: np.ndarray, d1: np.ndarray) -> "MAP":
        """The MAP of ``d0``, ``d1`` without ``__init__``'s checks, for matrices that pass them
        by construction and are already in its cleaned form (off-diagonal rates of ``d0`` and
        ``d1`` non-negative, no ``-0.0``): a positive time rescale of a MAP's matrices that
        keeps every rate finite and every non-zero rate non-zero keeps the signs, the
        completions and the phase graph (:func:`_rescale_keeps_checks`), so ``__init__`` would
        set the same fields bit for bit. The arrays become the process' own (read-only)."""
        self = object.__new__(cls)
        object.__setattr__(self, "D0", d0)
        object.__setattr__(self, "D1", d1)
        d0.setflags(write=False)
        d1.setflags(write=False)
        return self

    @classmethod
    def exponential(cls, mean: float) -> "MAP":
        """The Poisson process (exponential intervals) with the given mean interval."""
        mean = _positive(mean, "mean")
        return cls([[-1.0 / mean]], [[1.0 / mean]])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MAP":
        """Inverse of :meth:`to_dict`."""
        try:
            return cls(data["D0"], data["D1"])
        except KeyError as exc:
            raise ValueError(f"MAP dict: missing key {exc.args[0]!r}") from None

    def to_dict(self) -> dict[str, list[list[float]]]:
        """Plain, JSON-serialisable representation."""
        return {"D0": self.D0.tolist(), "D1": self.D1.tolist()}

    # ----------------------------------------------------------------- basic quantities
    @property
    def order(self) -> int:
        """Number of phases ``n``."""
        return int(self.D0.shape[0])

    @cached_property
    def generator(self) -> np.ndarray:
        """``Q = D0 + D1``."""
        return self.D0 + self.D1

    @cached_property
    def theta(self) -> np.ndarray:
        """Time-stationary phase distribution, ``theta Q = 0``."""
        return ctmc_stationary(self.generator)

    @cached_property
    def rate(self) -> float:
        """Completion rate ``lambda = theta D1 1``."""
        return float(self.theta @ self.D1.sum(axis=1))

    @cached_property
    def embedded(self) -> np.ndarray:
        """Phase distribution just after a completion, ``pi = theta D1 / lambda``."""
        return self.theta @ self.D1 / self.rate

    @cached_property
    def _m(self) -> np.ndarray:
        """``M = (-D0)^-1``."""
        return np.linalg.inv(-self.D0)

    @cached_property
    def _p(self) -> np.ndarray:
        """``P = (-D0)^-1 D1``, the phase transition matrix between completions."""
        return self._m @ self.D1

    @property
    def mean(self) -> float:
        """Mean interval ``E[X] = 1/lambda``."""
        return 1.0 / self.rate

    def moment(self, k: int) -> float:
        """``E[X^k] = k! pi M^k 1``."""
        if k < 1:
            raise ValueError(f"k: must be >= 1, got {k}")
        vec = np.linalg.matrix_power(self._m, k).sum(axis=1)
        return float(math.factorial(k) * self.embedded @ vec)

    @cached_property
    def variance(self) -> float:
        """``Var[X] = E[X^2] - E[X]^2``."""
        return max(self.moment(2) - self.mean**2, 0.0)

    @property
    def scv(self) -> float:
        """Squared coefficient of variation ``SCV = Var[X]/E[X]^2``."""
        return self.variance / self.mean**2

    def acf(self, k: int | np.ndarray) -> float | np.ndarray:
        """Lag-``k`` autocorrelation of the intervals, ``rho_k = (pi M P^k M 1 - E[X]^2)/Var[X]``."""
        lags = np.atleast_1d(np.asarray(k))
        if np.any(lags < 1):
            raise ValueError(f"k: lags must be >= 1, got {k}")
        if self.variance <= 0:
            out = np.zeros(lags.shape)
        else:
            left = self.embedded @ self._m
            right = self._m.sum(axis=1)
            out = np.array(
                [
                    (left @ np.linalg.matrix_power(self._p, int(lag)) @ right - self.mean**2)
                    / self.variance
                    for lag in lags
                ]
            )
        return float(out[0]) if np.ndim(k) == 0 else out

    @cached_property
    def decay(self) -> float:
        """Autocorrelation decay rate ``gamma``: the second-largest eigenvalue of ``P``.

        For a MAP(2), ``rho_k = rho_1 gamma^(k-1)``.
        """
        eig = np.sort(np.real(np.linalg.eigvals(self._p)))[::-1]
        return float(eig[1]) if len(eig) > 1 else 0.0

    @cached_property
    def idc(self) -> float:
        """Asymptotic index of dispersion ``I = SCV (1 + 2 sum_{k>=1} rho_k)`` (Mi et al. 2008,
        eq. (1)).

        The sum is taken in closed form with the fundamental matrix of ``P``:
        ``sum_{k>=1} (P^k - 1 pi) = (I - P + 1 pi)^-1 - I``, so
        ``I = (Var[X] + 2 pi M [(I - P + 1 pi)^-1 - I] M 1) / E[X]^2``.
        """
        n = self.order
        e_pi = np.outer(np.ones(n), self.embedded)
        fundamental = np.linalg.inv(np.eye(n) - self._p + e_pi) - np.eye(n)
        cross = self.embedded @ self._m @ fundamental @ self._m.sum(axis=1)
        return float((self.variance + 2.0 * cross) / self.mean**2)

    # ----------------------------------------------------------------- marginal distribution
    def cdf(self, x: float | np.ndarray) -> float | np.ndarray:
        """Marginal CDF ``F(x) = 1 - pi exp(D0 x) 1``."""
        xs = np.atleast_1d(np.asarray(x, dtype=float))
        out = np.array([1.0 - self._survival(v) if v > 0 else 0.0 for v in xs])
        return float(out[0]) if np.ndim(x) == 0 else out

    def _survival(self, x: float) -> float:
        return float(self.embedded @ linalg.expm(self.D0 * x).sum(axis=1))

    @cached_property
    def _spectral(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``pi exp(D0 x) 1 = sum_i c_i exp(mu_i x)`` when ``D0`` is diagonalisable (real)."""
        mu, vec = np.linalg.eig(self.D0)
        if np.any(np.abs(np.imag(mu)) > 1e-12) or np.linalg.cond(vec) > 1e8:
            return None
        mu = np.real(mu)
        vec = np.real(vec)
        c = (self.embedded @ vec) * np.linalg.solve(vec, np.ones(self.order))
        return mu, c

    def quantile(self, q: float) -> float:
        """Marginal ``q``-quantile: the ``x`` with ``F(x) = q`` (0 < q < 1)."""
        if not (0.0 < q < 1.0) or not math.isfinite(q):
            raise ValueError(f"q: must be in (0, 1), got {q}")
        spectral = self._spectral
        if spectral is not None:
            mu, c = spectral

            def survival(x: float) -> float:
                return float(c @ np.exp(mu * x))
        else:
            survival = self._survival
        target = 1.0 - q
        hi = self.mean
        while survival(hi) > target:
            hi *= 2.0
            if hi > 1e12 * self.mean:
                raise ValueError(f"q: quantile {q} not reachable")
        return float(optimize.brentq(lambda x: survival(x) - target, 0.0, hi, xtol=1e-14 * hi,
                                     rtol=1e-12))

    # ----------------------------------------------------------------- transformations
    def scaled(self, mean: float) -> "MAP":
        """The same process with time rescaled so that the mean interval is ``mean``.

        SCV, autocorrelations and ``idc`` are unchanged.
        """
        factor = self.mean / _positive(mean, "mean")
        d0, d1 = self.D0 * factor, self.D1 * factor
        if _rescale_keeps_checks(self, d0, d1):
            return MAP._valid(d0, d1)
        return MAP(d0, d1)              # raises naming the matrix that no longer passes

    # ----------------------------------------------------------------- sampling
    def sample(self, n: int, rng: np.random.Generator, phase: int | None = None) -> np.ndarray:
        """``n`` consecutive (correlated) intervals of the process.

        The phase chain is simulated jump by jump: in phase ``i`` the sojourn is exponential
        with rate ``-D0[i,i]``; the next phase and whether the jump completes a request are
        drawn from row ``i`` of ``[D0 (off-diagonal), D1]``. The first interval starts in a
        phase drawn from ``pi`` unless ``phase`` is given.
        """
        if n < 0:
            raise ValueError(f"n: must be >= 0, got {n}")
        if self.order == 1:
            return rng.exponential(self.mean, size=n)
        state = int(rng.choice(self.order, p=self.embedded)) if phase is None else int(phase)
        return self.intervals(n, rng, state)[0]

    def intervals(self, n: int, rng: np.random.Generator, phase: int) -> tuple[np.ndarray, int]:
        """``n`` consecutive intervals starting in ``phase``, and the phase the next interval
        starts in (to continue the sequence: :meth:`sample` draws the same values)."""
        order = self.order
        rates = -np.diag(self.D0)
        jumps = np.hstack([self.D0 - np.diag(np.diag(self.D0)), self.D1]) / rates[:, None]
        cum = np.cumsum(jumps, axis=1)
        cum[:, -1] = 1.0
        state = int(phase)
        out = np.empty(n)
        # Draw randomness in blocks: the chain itself is sequential.
        block = max(1024, 2 * n)
        expo = rng.standard_exponential(block)
        unif = rng.random(block)
        pos = 0
        acc = 0.0
        count = 0
        cum_rows = cum.tolist()
        inv_rates = (1.0 / rates).tolist()
        while count < n:
            if pos == block:
                expo = rng.standard_exponential(block)
                unif = rng.random(block)
                pos = 0
            acc += expo[pos] * inv_rates[state]
            row = cum_rows[state]
            u = unif[pos]
            pos += 1
            j = 0
            while row[j] < u:
                j += 1
            if j >= order:
                out[count] = acc
                count += 1
                acc = 0.0
                state = j - order
            else:
                state = j
        return out, state

    def __repr__(self) -> str:
        return f"MAP(D0={self.D0.tolist()}, D1={self.D1.tolist()})"


def _positive(value: float, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a positive number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name}: must be a positive finite number, got {value!r}")
    return v
