"""The banded LU of a bursty tier's chain and its reuse across the fixed point's sweeps.

The chain's generator is banded (arrivals move up one level, completions down one), so its
stationary distribution is one banded LU (LAPACK ``dgbtrf``) of ``Q^T`` with one likely
state's probability fixed (:func:`factor_and_solve`, :func:`_anchor`). Between sweeps only
the arrival rates change, so the last sweep's LU preconditions an iterative refinement
``x <- x + M^{-1} (b - A x)`` from the last solution (:func:`refine`); it contracts by about
the relative change of the rates (a few triangular solves, each far cheaper than an LU), and a
fresh LU is taken when it does not. :class:`FactorStore` keeps, per pattern, the last
factorisation. SuperLU in natural order is not used: its triangular solves are faster, but
building its sparse matrix and the factorisation make whole solves slower than the band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dgbtrf, dgbtrs
from scipy.sparse import csr_array

from solvers.decomposition.stations import Transitions
from solvers.processes import MAP


@dataclass
class _Factor:
    """A banded LU (LAPACK ``dgbtrf``) of a chain's ``Q^T`` with row ``anchor`` replaced by
    ``x_anchor = 1``, and the latest solution ``x`` of a chain with that pattern."""

    lub: np.ndarray
    piv: np.ndarray
    lower: int
    upper: int
    anchor: int
    x: np.ndarray


@dataclass
class FactorStore:
    """Per pattern (tier, levels, station) of one solve: the last factorisation, the residual
    its refinements stop at in this sweep, and the transitions sorted by destination (``Q^T``
    in CSR form; only the rates change)."""

    factor: _Factor | None = None
    target: float = 1e-12
    order: np.ndarray | None = None
    indptr: np.ndarray | None = None
    indices: np.ndarray | None = None


#: a refinement stops at this stationary residual ``||pi Q||_1 / max |q_ii|`` (a fresh LU
#: reaches 1e-15..1e-13), or at up to REFINE_LOOSE while the fixed point is far from converged
#: (:func:`_refine_target`); it is abandoned for a fresh LU after REFINE_STEPS iterations, or
#: as soon as one iteration shrinks the residual by less than half
REFINE_RESIDUAL = 1e-12
REFINE_LOOSE = 1e-10
REFINE_STEPS = 12


def refine(store: FactorStore, tr: Transitions, rate: np.ndarray,
           out: np.ndarray) -> np.ndarray | None:
    """Solve ``A x = e_anchor`` (``A``: ``Q^T`` with the anchor's row replaced) by iterative
    refinement preconditioned with an earlier sweep's LU ``M`` of the same pattern:
    ``x <- x + M^{-1} (e_anchor - A x)``, from that sweep's solution. It contracts by about
    the relative change of the arrival rates between the sweeps, so a late sweep of the fixed
    point costs a few triangular solves and products with ``Q^T`` instead of a factorisation.
    ``None`` when it does not converge (the caller factorises afresh)."""
    f = store.factor
    S = out.shape[0]
    if store.order is None:
        store.order = np.argsort(tr.dst, kind="stable")
        store.indices = tr.src[store.order].astype(np.int64)
        store.indptr = np.concatenate([[0], np.cumsum(np.bincount(tr.dst, minlength=S))])
    qt = csr_array((rate[store.order], store.indices, store.indptr), shape=(S, S))
    scale = float(np.max(out)) or 1.0
    x, last = f.x.copy(), math.inf
    for _ in range(REFINE_STEPS):
        r = -(qt @ x - out * x)
        r[f.anchor] = 1.0 - x[f.anchor]
        err = float(np.abs(r).sum()) / (scale * float(np.abs(x).sum()))
        if not math.isfinite(err) or err > 0.5 * last:
            return None
        if err <= store.target:
            return x
        step, info = dgbtrs(f.lub, f.lower, f.upper, r, f.piv)
        if info != 0:
            return None
        x, last = x + step, err
    return None


def factor_and_solve(lam: np.ndarray, proc: MAP, cores: int, tr: Transitions,
                     rate: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, _Factor]:
    """One banded LU of ``Q^T`` with the probability of one likely state (:func:`_anchor`)
    fixed to 1, re-solved from the most likely state of the solution if that one was a poor
    anchor (over/underflow, cancellation). Returns the solution and its factorisation."""
    S = tr.level.shape[0]
    # A = Q^T in LAPACK band storage, A[i, j] at ab[l + u + i - j, j] (the first l rows are
    # dgbtrf's room for fill-in): l sub-diagonals (arrivals move up one level), u
    # super-diagonals (completions reach across two levels' indices)
    l, u = max(int(np.max(tr.dst - tr.src)), 1), max(int(np.max(tr.src - tr.dst)), 1)
    flat = (l + u + tr.dst - tr.src) * S + tr.src
    anchor = _anchor(lam, proc, cores, tr)
    for _ in range(4):                  # built afresh each time: dgbtrf overwrites it
        a = np.bincount(flat, weights=rate, minlength=(2 * l + u + 1) * S).reshape(-1, S)
        a[l + u] -= out
        cols = np.arange(max(anchor - l, 0), min(anchor + u, S - 1) + 1)
        a[l + u + anchor - cols, cols] = 0.0              # row `anchor` of A: x_anchor = 1
        a[l + u, anchor] = 1.0
        rhs = np.zeros(S)
        rhs[anchor] = 1.0
        with np.errstate(all="ignore"):
            lub, piv, info = dgbtrf(a, l, u, overwrite_ab=1)
            x = dgbtrs(lub, l, u, rhs, piv)[0] if info == 0 else np.full(S, np.nan)
        finite = np.isfinite(x)
        biggest = float(np.max(np.where(finite, x, -np.inf)))
        if (finite.all() and biggest < 1e150 and x[anchor] >= 1e-6 * biggest
                and float(x.min()) >= -1e-9 * biggest):
            break
        top = int(np.argmax(np.where(finite, x, -np.inf)))
        if not finite[top] or top == anchor:
            break
        anchor = top
    if not np.all(np.isfinite(x)):
        raise RuntimeError("decomposition: the bursty tier's chain could not be solved")
    return x, _Factor(lub, piv, l, u, anchor, x)


def chain_residual(tr: Transitions, rate: np.ndarray, out: np.ndarray, pi: np.ndarray,
                   scale: float) -> float:
    """``||pi Q||_1 / max |q_ii|``."""
    inflow = np.bincount(tr.dst, weights=rate * pi[tr.src], minlength=pi.shape[0])
    return float(np.abs(inflow - pi * out).sum() / (scale or 1.0))


def _anchor(lam: np.ndarray, proc: MAP, cores: int, tr: Transitions) -> int:
    """The likeliest state (by its phase prior) of the most likely level under the exponential
    equivalent: ``P(n) ~ prod lam(i-1)/mu(i)``, ``mu(i) = min(i, c)/E[S]``. A state of
    negligible probability as anchor makes the solve cancel."""
    N = lam.shape[0] - 1
    i = np.arange(1, N + 1)
    with np.errstate(divide="ignore"):
        steps = np.log(lam[:-1]) - np.log(np.minimum(i, cores) / proc.mean)
    logp = np.concatenate([[0.0], np.cumsum(steps)])
    n = int(np.argmax(logp))
    first = int(np.searchsorted(tr.level, n))
    last = int(np.searchsorted(tr.level, n, side="right"))
    return first + int(np.argmax(tr.prior[first:last]))
