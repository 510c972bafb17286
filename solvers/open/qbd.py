"""Quasi-birth-death processes that repeat above a boundary: the matrix-geometric solution.

A level-independent QBD above level ``L`` has, for every level ``n >= L``, the blocks
``A0`` (up to ``n + 1``), ``A1`` (within ``n``, diagonal included) and ``A2`` (down to
``n - 1``). Its stationary vector is matrix-geometric above the boundary (Neuts 1981, Thm 3.1.1)::

    pi_{L + k} = pi_L R^k,    R  the minimal solution of  A0 + R A1 + R^2 A2 = 0,

so the cost of a solve is that of the boundary levels ``0..L`` and of ``R`` (``d x d``,
``d`` states a level), whatever the load. ``R`` comes from ``G`` (the minimal solution of
``A2 + A1 G + A0 G^2 = 0``) by logarithmic reduction (Latouche and Ramaswami 1993; 1999,
Ch. 8), which doubles the levels it covers at each step and so converges quadratically, then
``R = A0 (-(A1 + A0 G))^{-1}`` (Latouche and Ramaswami 1999, Thm 6.4.1).

The process is positive recurrent iff the drift ``alpha A0 1 < alpha A2 1``, ``alpha`` the
stationary vector of ``A = A0 + A1 + A2`` (Neuts 1981, Thm 3.1.1); :func:`solve_qbd` checks it
first and returns ``None`` for an unstable process, so a saturated queue never loops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import linalg as splinalg

from solvers.processes import _stationary

__all__ = ["QBDSolution", "drift", "logarithmic_reduction", "rate_matrix", "solve_qbd"]

#: logarithmic reduction stops when ``||1 - G 1||_inf`` is below this
G_TOLERANCE = 1e-13
#: or, when rounding keeps it above that, once it stops falling below this
STALL_TOLERANCE = 1e-8
#: and gives up after this many doublings (2^60 levels: only a process at the edge of
#: stability gets there)
MAX_DOUBLINGS = 60


@dataclass(frozen=True)
class QBDSolution:
    """Stationary probabilities of levels ``0..L`` (``pi``, a vector over their states), the
    rate matrix ``R`` and ``tail = (I - R)^{-1}``; ``starts[n]`` is level ``n``'s first state."""

    pi: np.ndarray
    R: np.ndarray
    tail: np.ndarray
    starts: np.ndarray
    first_repeating: int

    def level(self, n: int) -> np.ndarray:
        """``pi_n`` for a boundary level ``n <= L``."""
        return self.pi[self.starts[n]:self.starts[n + 1]]

    def mean_excess(self, c: int) -> float:
        """``E[(n - c)^+]`` for ``c <= L``: boundary levels summed, the tail in closed form
        ``pi_L [(L - c)(I - R)^{-1} + R (I - R)^{-2}] 1``."""
        L = self.first_repeating
        low = sum(max(n - c, 0) * self.level(n).sum() for n in range(L))
        ones = np.ones(self.R.shape[0])
        t1 = self.tail @ ones
        tail = self.level(L) @ ((L - c) * t1 + self.R @ (self.tail @ t1))
        return float(low + tail)

    def mean_level(self) -> float:
        """``E[n]``."""
        return self.mean_excess(0)


def _phase_stationary(A: np.ndarray) -> np.ndarray:
    """``alpha A = 0``, ``alpha 1 = 1`` by one dense solve (the last equation replaced by the
    normalisation); GTH elimination (:func:`solvers.processes._stationary`) where that is
    singular or not a distribution."""
    M = A.T.copy()
    M[-1, :] = 1.0
    rhs = np.zeros(A.shape[0])
    rhs[-1] = 1.0
    try:
        alpha = np.linalg.solve(M, rhs)
    except np.linalg.LinAlgError:
        return _stationary(A)
    if np.all(alpha >= -1e-12) and np.all(np.isfinite(alpha)):
        return np.maximum(alpha, 0.0)
    return _stationary(A)


def drift(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray) -> tuple[float, float]:
    """``(alpha A0 1, alpha A2 1)``: the mean rates up and down of the repeating levels; the
    QBD is positive recurrent iff the first is the smaller (Neuts 1981, Thm 3.1.1)."""
    alpha = _phase_stationary(A0 + A1 + A2)
    return float(alpha @ A0.sum(axis=1)), float(alpha @ A2.sum(axis=1))


def logarithmic_reduction(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray) -> np.ndarray:
    """``G``, minimal solution of ``A2 + A1 G + A0 G^2 = 0``, by logarithmic reduction
    (Latouche and Ramaswami 1993): with ``B0 = (-A1)^{-1} A0`` and ``B2 = (-A1)^{-1} A2``,
    repeat ``U = B0 B2 + B2 B0``, ``B0 <- (I - U)^{-1} B0^2``, ``B2 <- (I - U)^{-1} B2^2``,
    ``G += T B2``, ``T <- T B0`` until ``G`` is stochastic. Raises ``ArithmeticError`` when it
    does not converge in :data:`MAX_DOUBLINGS` steps (a process at the edge of stability)."""
    d = A1.shape[0]
    eye = np.eye(d)
    lu = np.linalg.inv(-A1)
    B0, B2 = lu @ A0, lu @ A2
    G, T = B2.copy(), B0.copy()
    ones = np.ones(d)
    last = np.inf
    for _ in range(MAX_DOUBLINGS):
        U = B0 @ B2 + B2 @ B0
        inv = np.linalg.inv(eye - U)
        B0, B2 = inv @ (B0 @ B0), inv @ (B2 @ B2)
        G = G + T @ B2
        T = T @ B0
        err = float(np.max(np.abs(ones - G @ ones)))
        if err < G_TOLERANCE or (err < STALL_TOLERANCE and err >= last):
            return G
        last = err
    raise ArithmeticError("logarithmic reduction did not converge (QBD at the edge of "
                          "stability)")


def rate_matrix(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray) -> np.ndarray:
    """``R = A0 (-(A1 + A0 G))^{-1}`` from ``G`` (Latouche and Ramaswami 1999, Thm 6.4.1)."""
    G = logarithmic_reduction(A0, A1, A2)
    return A0 @ np.linalg.inv(-(A1 + A0 @ G))


def solve_qbd(offdiag: sparse.csr_matrix, starts: np.ndarray, first: int) -> QBDSolution | None:
    """Stationary solution of a QBD whose levels ``n >= first`` repeat, or ``None`` if it is
    not positive recurrent.

    ``offdiag`` holds the off-diagonal rates out of levels ``0..first`` (states indexed up to
    level ``first + 1``'s last, ``starts`` the level boundaries, ``len(starts) >= first + 3``);
    levels ``first`` and ``first - 1`` must have the same number of states, as must
    ``first + 1``. The repeating blocks are read from level ``first``: ``A0`` to ``first + 1``,
    ``A1`` within it (diagonal: minus the row's total rate), ``A2`` to ``first - 1``. The
    boundary equations ``pi Q = 0`` on levels ``0..first`` take level ``first + 1``'s inflow
    as ``pi_first R A2`` and the normalisation ``sum_{n<first} pi_n 1 + pi_first (I-R)^{-1} 1
    = 1`` (Latouche and Ramaswami 1999, Sec. 6.4)."""
    L = first
    Q = sparse.coo_matrix(offdiag)
    a, b, e = int(starts[L]), int(starts[L + 1]), int(starts[L + 2])
    lo = int(starts[L - 1])
    row, col, val = Q.row, Q.col, Q.data
    out_rate = np.bincount(row, weights=val, minlength=Q.shape[0])
    at_l = (row >= a) & (row < b)                  # level L's rows, densely: the blocks
    level = np.zeros((b - a, e - lo))
    np.add.at(level, (row[at_l] - a, col[at_l] - lo), val[at_l])
    A0 = level[:, b - lo:]
    A1 = level[:, a - lo:b - lo] - np.diag(out_rate[a:b])
    A2 = level[:, :a - lo]
    up, down = drift(A0, A1, A2)
    if not up < down * (1.0 - 1e-12):
        return None
    R = rate_matrix(A0, A1, A2)
    d = b - a
    tail = np.linalg.inv(np.eye(d) - R)
    norm = np.ones(b)
    norm[a:b] = tail.sum(axis=1)
    # pi Q = 0 on levels 0..L (level L + 1's inflow as pi_L R A2) as M x = 0, M = Q^T:
    # entries (col, row) of the boundary's transitions, minus the total rates on the
    # diagonal, R A2 on level L's block; one balance equation (redundant) replaced by the
    # normalisation: pinning one state's probability instead is ill-conditioned when that
    # state is rare (a 16-core per-job tier's most active state at 1e-20: the boundary solve
    # lost every digit). The equation dropped is the one with the largest diagonal.
    inside = (row < b) & (col < b)
    RA2 = R @ A2
    diag = -out_rate[:b]
    diag[a:b] += np.diag(RA2)
    loops = inside & (row == col)
    diag += np.bincount(row[loops], weights=val[loops], minlength=b)
    drop = int(np.argmax(np.abs(diag)))
    ra_r, ra_c = np.nonzero(RA2)
    eq = np.concatenate((col[inside], np.arange(b), ra_c + a))     # M's rows: equations
    var = np.concatenate((row[inside], np.arange(b), ra_r + a))    # M's columns: states
    coef = np.concatenate((val[inside], -out_rate[:b], RA2[ra_r, ra_c]))
    keep = eq != drop
    A = sparse.csc_matrix((np.concatenate((coef[keep], norm)),
                           (np.concatenate((eq[keep], np.full(b, drop))),
                            np.concatenate((var[keep], np.arange(b))))), shape=(b, b))
    rhs = np.zeros(b)
    rhs[drop] = 1.0
    pi = splinalg.spsolve(A, rhs)
    pi = np.maximum(pi, 0.0)
    pi /= pi @ norm
    return QBDSolution(pi=pi, R=R, tail=tail, starts=np.asarray(starts[:L + 2]),
                       first_repeating=L)
