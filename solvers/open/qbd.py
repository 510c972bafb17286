"""Quasi-birth-death processes that repeat above a boundary: the matrix-geometric solution.

A level-independent QBD above level ``L`` has, for every level ``n >= L``, the blocks
``A0`` (up to ``n + 1``), ``A1`` (within ``n``, diagonal included) and ``A2`` (down to
``n - 1``). Its stationary vector is matrix-geometric above the boundary (Neuts 1981, Thm 3.1.1)::

    pi_{L + k} = pi_L R^k,    R  the minimal solution of  A0 + R A1 + R^2 A2 = 0,

so the cost of a solve is that of the boundary levels ``0..L`` (by linear level reduction,
one level's block at a time: :func:`solve_planned`) and of ``R`` (``d x d``, ``d`` states a
level), whatever the load; a tier's pattern of transitions is planned once
(:func:`plan_qbd`) and solved at every arrival rate. ``R`` comes from ``G`` (the minimal solution of
``A2 + A1 G + A0 G^2 = 0``) by shifted cyclic reduction (He, Meini and Rhee 2001; logarithmic
reduction, Latouche and Ramaswami 1993; 1999, Ch. 8, where it does not solve), which doubles
the levels it covers at each step and so converges quadratically, then ``R = A0 (-(A1 + A0
G))^{-1}`` (Latouche and Ramaswami 1999, Thm 6.4.1).

The process is positive recurrent iff the drift ``alpha A0 1 < alpha A2 1``, ``alpha`` the
stationary vector of ``A = A0 + A1 + A2`` (Neuts 1981, Thm 3.1.1); :func:`solve_qbd` checks it
first and returns ``None`` for an unstable process, so a saturated queue never loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import sparse
from scipy.linalg.blas import idamax
from scipy.linalg.lapack import dgesv, dgetrf, dgetri, dgetrs

from solvers.processes import ctmc_stationary

__all__ = ["QBDPlan", "QBDSolution", "cyclic_reduction", "drift", "logarithmic_reduction",
           "plan_qbd", "rate_matrix", "shifted_cyclic_reduction", "solve_planned", "solve_qbd"]

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
        # a level n <= c adds (n - c)^+ = 0: summed from c + 1 only (none on an M/MAP/c
        # tier, whose levels repeat from c + 1: ~40 us of Python a solve on 16 cores)
        low = sum((n - c) * self.level(n).sum() for n in range(c + 1, L))
        ones = np.ones(self.R.shape[0])
        t1 = self.tail @ ones
        tail = self.level(L) @ ((L - c) * t1 + self.R @ (self.tail @ t1))
        return float(low + tail)

    def mean_level(self) -> float:
        """``E[n]``."""
        return self.mean_excess(0)


def _phase_stationary(A: np.ndarray) -> np.ndarray:
    """``alpha A = 0``, ``alpha 1 = 1`` by one dense solve (the last equation replaced by the
    normalisation); GTH elimination (:func:`solvers.processes.ctmc_stationary`) where that is
    singular or not a distribution."""
    M = A.T.copy()
    M[-1, :] = 1.0
    rhs = np.zeros(A.shape[0])
    rhs[-1] = 1.0
    _, _, alpha, info = dgesv(M, rhs)                   # LAPACK's call: numpy's checks cost
    if info != 0:                                       # more than the solve of a small block
        return ctmc_stationary(A)
    if np.all(alpha >= -1e-12) and np.all(np.isfinite(alpha)):
        return np.maximum(alpha, 0.0)
    return ctmc_stationary(A)


def drift(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray) -> tuple[float, float]:
    """``(alpha A0 1, alpha A2 1)``: the mean rates up and down of the repeating levels; the
    QBD is positive recurrent iff the first is the smaller (Neuts 1981, Thm 3.1.1)."""
    alpha = _phase_stationary(A0 + A1 + A2)
    return float(alpha @ A0.sum(axis=1)), float(alpha @ A2.sum(axis=1))


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a^{-1} b`` by one LU (LAPACK ``dgesv``, without numpy's per-call checks: the blocks
    here are small and solved many times); :class:`numpy.linalg.LinAlgError` when ``a`` is
    singular (as :func:`numpy.linalg.inv` raises)."""
    _, _, x, info = dgesv(a, b)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular block in the QBD solve (dgesv info {info})")
    return x


def logarithmic_reduction(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray) -> np.ndarray:
    """``G``, minimal solution of ``A2 + A1 G + A0 G^2 = 0``, by logarithmic reduction
    (Latouche and Ramaswami 1993): with ``B0 = (-A1)^{-1} A0`` and ``B2 = (-A1)^{-1} A2``,
    repeat ``U = B0 B2 + B2 B0``, ``B0 <- (I - U)^{-1} B0^2``, ``B2 <- (I - U)^{-1} B2^2``,
    ``G += T B2``, ``T <- T B0`` until ``G`` is stochastic. Raises ``ArithmeticError`` when it
    does not converge in :data:`MAX_DOUBLINGS` steps (a process at the edge of stability)."""
    d = A1.shape[0]
    eye = np.eye(d)
    B = _solve(-A1, np.hstack((A0, A2)))
    B0, B2 = B[:, :d], B[:, d:]
    G, T = B2.copy(), B0.copy()
    ones = np.ones(d)
    last = np.inf
    for _ in range(MAX_DOUBLINGS):
        U = B0 @ B2 + B2 @ B0
        B = _solve(eye - U, np.hstack((B0 @ B0, B2 @ B2)))
        B0, B2 = B[:, :d], B[:, d:]
        G = G + T @ B2
        T = T @ B0
        err = float(np.max(np.abs(ones - G @ ones)))
        if err < G_TOLERANCE or (err < STALL_TOLERANCE and err >= last):
            return G
        last = err
    raise ArithmeticError("logarithmic reduction did not converge (QBD at the edge of "
                          "stability)")


#: :func:`cyclic_reduction` checks ``G 1`` once the up block has fallen below this share of
#: the local one (``G 1``'s distance from 1 was 2-6 times that share on the waves' queues)
CHECK_SHARE = 0.1


def _reduce(down: np.ndarray, local: np.ndarray, up: np.ndarray, hat: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step of cyclic reduction (:func:`cyclic_reduction`): ``local`` and ``hat`` updated
    in place; the new ``down`` and ``up`` blocks and ``A0 K A2`` returned."""
    d = local.shape[0]
    k = _solve(local, np.hstack((down, up)))
    up_down = up @ k[:, :d]
    local -= down @ k[:, d:]
    local -= up_down
    hat -= up_down
    return -(down @ k[:, :d]), -(up @ k[:, d:]), up_down


def cyclic_reduction(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray,
                     tol: float = G_TOLERANCE) -> np.ndarray:
    """``G``, minimal solution of ``A2 + A1 G + A0 G^2 = 0``, by cyclic reduction (Bini and
    Meini 1996): with ``K = A1^{-1}`` of the current step, ``A1 <- A1 - A2 K A0 - A0 K A2``,
    ``A2 <- -A2 K A2``, ``A0 <- -A0 K A0`` and ``Ahat <- Ahat - A0 K A2`` (from ``Ahat = A1``),
    so that ``G = -Ahat^{-1} A2``; stopped once ``G 1`` is within ``tol`` of 1 (checked when
    the up block has nearly vanished: :data:`CHECK_SHARE`), or once the up block has vanished
    and ``G 1`` is within 1e-8 (rounding in large blocks). Each step doubles the levels it
    covers, as :func:`logarithmic_reduction`'s does (Latouche and Ramaswami 1999, Ch. 8:
    the same convergence), with one LU and four products of the blocks instead of an LU and
    six: about 10% less CPU on the 80-phase queues fed a bursty tier's waves, ``G`` the same
    to ``tol``. Raises :class:`numpy.linalg.LinAlgError` on a singular block or when it does
    not converge in :data:`MAX_DOUBLINGS` steps (as :func:`solvers.departures.map_m_c_mean`'s
    ``G`` does: its callers take either as a queue that did not solve)."""
    down, local, up, hat = A2, A1.copy(), A0, A1.copy()
    flow = A2.sum(axis=1)
    for _ in range(MAX_DOUBLINGS):
        down, up, _ = _reduce(down, local, up, hat)
        top = float(np.max(np.abs(local)))
        size = float(np.max(np.abs(up)))
        if not size <= CHECK_SHARE * top:           # also NaN: on to the guard below
            if not np.isfinite(size):
                break
            continue
        lu, piv, x, info = dgesv(hat, flow)         # x = -G 1
        if info != 0:
            raise np.linalg.LinAlgError(f"singular block in the QBD solve (dgesv info {info})")
        err = float(np.max(np.abs(1.0 + x)))
        if err < tol or (size <= 1e-16 * top and err < STALL_TOLERANCE):
            G, info = dgetrs(lu, piv, A2)
            return -G
    raise np.linalg.LinAlgError("cyclic reduction did not converge (QBD at the edge of "
                                "stability)")


def shifted_cyclic_reduction(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray,
                             tol: float = G_TOLERANCE, *,
                             phases: np.ndarray | None = None,
                             predicted: bool = False,
                             down_scale: float | None = None) -> np.ndarray:
    """``G`` of a positive recurrent QBD by :func:`cyclic_reduction` of the shifted equation
    (He, Meini and Rhee 2001): ``G 1 = 1``, so ``Gs = G - 1 u^T`` (``u = 1 / d``) solves
    ``A2 (I - 1 u^T) + (A1 + A0 1 u^T) Gs + A0 Gs^2 = 0`` with ``G``'s eigenvalue 1 moved to 0;
    the reduction then converges as ``rho(R) xi`` instead of ``rho(R)``, ``xi < 1`` the
    second largest modulus of ``G``'s eigenvalues. It stops once a step's correction to
    ``Ahat`` is below ``tol`` of ``Ahat`` (quadratic convergence: ``G`` then far nearer than
    ``tol``; ``G 1 = 1`` holds by construction and tells nothing). On the waves' ``MAP/M/c``
    queues ``xi`` is 0.95-0.99 (the arrivals' slow phases outlast a level's first passage):
    one doubling fewer (10-11 of 11-12) and no ``G 1`` checks, ``G`` within 1.6e-13 of a
    reduction to 1e-14. Each step takes ``K = A1^{-1}`` explicitly (:func:`_inverse`: its
    products beat an LU's solves of ``d`` right-hand sides) and ``K A2`` first, and updates
    ``Ahat`` with ``A0 K A2``, the stopping test's step: the last step then skips ``K A0``
    and the new blocks (an 80-phase queue's ``G`` about 7% less CPU, the same ``G``).
    The shift holds only where ``G`` is stochastic: a QBD whose drift is not down
    (:func:`drift`) raises :class:`numpy.linalg.LinAlgError`, as one that does not converge
    in :data:`MAX_DOUBLINGS` steps or a singular block does. ``phases``: the stationary vector
    of ``A0 + A1 + A2`` where the caller holds it (a ``MAP/M/c`` queue's: its arrival MAP's),
    the drift then read off it without :func:`drift`'s solve. ``predicted``: stop one step
    sooner, once the next step that quadratic convergence predicts is below ``tol`` -- the
    blocks square at each step, ``e_{k+1} = C e_k^2`` for the steps' sizes ``e`` (relative to
    ``Ahat``; Bini and Meini 1996), so with ``C`` from the last two, ``e_{k+1} ~ e_k^3 /
    e_{k-1}^2``: one doubling's products fewer. The waves' 60 queues of docs/benchmarks.md's
    large-population network (15 rates of 300-790/s, both queues, full and rough departures)
    at ``tol`` 1e-7: ``G`` within 9.1e-8 of a reduction to 1e-15 but once, where the steps
    had not yet turned quadratic (6.7e-6). ``down_scale``: ``A2 = s I`` (a ``MAP/M/c``
    queue above ``c``), so the first step's ``K A2 (I - 1 u^T)``, ``A2 (I - 1 u^T) K A0`` and
    new ``A2`` block are scalings less a rank-one term and ``K A0`` one product with ``K``:
    that step about 40% of a general one's products, ``G`` the same within rounding (the
    waves' ``MAP/M/c`` queues' jobs within 1.5e-12 of the general path's)."""
    d = A1.shape[0]
    up_rate, down_rate = drift(A0, A1, A2) if phases is None else (
        float(phases @ A0.sum(axis=1)), float(phases @ A2.sum(axis=1)))
    if not up_rate < down_rate:
        raise np.linalg.LinAlgError("the QBD is not positive recurrent (drift up >= down): "
                                    "no stochastic G to shift")
    u = np.full(d, 1.0 / d)
    shifted = A2 - np.outer(A2.sum(axis=1), u)       # A2 (I - 1 u^T)
    down, up = shifted, A0
    local = A1 + np.outer(A0.sum(axis=1), u)         # A1 + A0 1 u^T
    hat = local.copy()
    last = np.inf
    if down_scale is not None:
        # A2 = s I: the first step's products with the shifted A2 = s (I - 1 u^T) are a
        # scaling less a rank-one term, and K A0 one product with K (about 40% of a step)
        s = float(down_scale)
        K = _inverse(local) if d <= INVERSE_MAX_ORDER else _solve(local, np.eye(d))
        k_down = s * K
        k_down -= np.outer(k_down.sum(axis=1), u)    # K A2 (I - 1 u^T)
        up_down = A0 @ k_down
        hat -= up_down
        last = _max_abs(up_down) / _max_abs(hat)
        if not last > tol:                           # also NaN: the general steps decide
            down, up, hat, last = shifted, A0, local.copy(), np.inf
        else:
            k_up = K @ A0
            local -= s * k_up                        # (s I - s 1 u^T) K A0
            local += np.outer(np.full(d, s), u @ k_up)
            local -= up_down
            down = s * k_down                        # kept negated, as below
            down -= np.outer(np.full(d, s), u @ k_down)
            up = A0 @ k_up
    for _ in range(MAX_DOUBLINGS):
        solve_k = _factored(local)                    # K by dgetri and products up to
        k_down = solve_k(down)                        # INVERSE_MAX_ORDER phases, else the
        up_down = up @ k_down                         # LU's solves (_factored)
        hat -= up_down
        step = _max_abs(up_down) / _max_abs(hat)
        if not np.isfinite(step):
            break
        if step <= tol or (predicted and step < last < np.inf and step**3 <= tol * last**2):
            # the last step (or, quadratically, the next one below tol): no K A0, no new blocks
            G = _solve(hat, shifted)
            G -= u                                    # G = -Ahat^{-1} A2 (I - 1 u^T) + 1 u^T
            np.negative(G, out=G)
            if not np.isfinite(G).all():              # a NaN the step's maximum passed over
                break
            return G
        k_up = solve_k(up)
        local -= down @ k_up
        local -= up_down
        # the new blocks are -(A2 K A2) and -(A0 K A0); both kept negated (no copy): every
        # later use is a product of the two blocks or of one with itself, so the signs cancel
        # and each step's blocks, Ahat and G are bit for bit those of the negated ones
        down, up = down @ k_down, up @ k_up
        last = step
    raise np.linalg.LinAlgError("shifted cyclic reduction did not converge")


#: blocks of up to this many phases take ``K`` as an explicit inverse (:func:`_factored`)
INVERSE_MAX_ORDER = 200


def _factored(a: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``b -> a^{-1} b`` for a reduction step's two blocks: by :func:`_inverse` and products
    up to :data:`INVERSE_MAX_ORDER` phases (the waves' 64-167-phase queues), by an LU's
    solves above, where the inverse's extra flops outweigh the solves' slowness (a 2,282-phase
    departure process behind a 64-core tier: ~5x the CPU by the inverse);
    :class:`numpy.linalg.LinAlgError` when ``a`` is singular."""
    if a.shape[0] <= INVERSE_MAX_ORDER:
        K = _inverse(a)
        return lambda b: K @ b
    lu, piv, info = dgetrf(a)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular block in the QBD solve (dgetrf info {info})")
    return lambda b: dgetrs(lu, piv, b)[0]


def _inverse(a: np.ndarray) -> np.ndarray:
    """``a^{-1}`` by LAPACK's ``dgetrf`` and ``dgetri``; :class:`numpy.linalg.LinAlgError`
    when ``a`` is singular. A reduction step needs ``K = a^{-1}`` against two blocks of ``d``
    columns: OpenBLAS's triangular solves of ``d`` right-hand sides run 3-4 times slower than
    a product of the same flops at ``d`` ~ 80 (86 against 24 us; ``dgetri`` 55 us), so the
    inverse and two products (133 us) beat an LU's two solves (201 us) there; the waves'
    ``G`` within 3e-14 of the solves' on the large-population search's blocks."""
    lu, piv, info = dgetrf(a)
    if info == 0:
        inv, info = dgetri(lu, piv)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular block in the QBD solve (dgetrf/dgetri info "
                                    f"{info})")
    return inv


def _max_abs(a: np.ndarray) -> float:
    """``max |a_ij|`` of a contiguous block by BLAS ``idamax`` (the same value as
    ``np.max(np.abs(a))`` without its temporary: ~1 against ~7 us on an 80 x 80 block, two a
    reduction step); NaN when that entry is."""
    flat = a.reshape(-1)
    return abs(float(flat[idamax(flat)]))


def rate_matrix(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray) -> np.ndarray:
    """``R = A0 (-(A1 + A0 G))^{-1}`` from ``G`` (Latouche and Ramaswami 1999, Thm 6.4.1)."""
    G = logarithmic_reduction(A0, A1, A2)
    return _solve(-(A1 + A0 @ G).T, A0.T).T


def _chain_rate_matrix(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray,
                       alpha: np.ndarray) -> np.ndarray:
    """:func:`rate_matrix` with ``G`` by :func:`shifted_cyclic_reduction` (stopped on its
    predicted step; ``alpha``: the stationary vector of ``A0 + A1 + A2``, the drift already
    checked down) instead of :func:`logarithmic_reduction`: a bursty tier's chain (18 and 34
    states a level on 8 and 16 cores, docs/benchmarks.md section 11) about 9% less CPU, its
    residence times within 1e-10 of themselves at 300-790/s; the logarithmic reduction where
    the shifted one raises (a singular block; the edge of stability)."""
    try:
        G = shifted_cyclic_reduction(A0, A1, A2, G_TOLERANCE, phases=alpha, predicted=True)
    except np.linalg.LinAlgError:
        return rate_matrix(A0, A1, A2)
    return _solve(-(A1 + A0 @ G).T, A0.T).T


@dataclass(frozen=True, eq=False)
class QBDPlan:
    """Where each transition of a QBD's chain goes in its dense level blocks: the part of a
    solve that depends on the chain's pattern alone, not on its rates (the same for every
    arrival rate of one tier: :func:`plan_qbd` once, :func:`solve_planned` per rate).

    ``starts``: the levels' first states (levels ``0..L + 2``); the transitions out of levels
    ``0..L`` (``rows``, their sources ``src``), each to a cell of one flat array holding,
    level by level, the local block
    ``n -> n`` (``d_n x d_n``), the block up ``n -> n + 1`` and the block down ``n -> n - 1``
    (``cells``; ``local``, ``up``, ``down``: each block's offset); ``diagonal``: the local
    blocks' diagonal cells, state by state."""

    starts: np.ndarray
    first: int
    rows: np.ndarray
    cells: np.ndarray
    src: np.ndarray
    diagonal: np.ndarray
    local: np.ndarray
    up: np.ndarray
    down: np.ndarray
    size: int


def plan_qbd(src: np.ndarray, dst: np.ndarray, starts: np.ndarray, first: int) -> QBDPlan:
    """The :class:`QBDPlan` of the transitions ``src -> dst`` (states numbered level by level,
    ``starts`` the levels' first states up to level ``first + 2``'s, levels ``>= first``
    repeating). Raises ``ValueError`` for a transition that skips a level or a repeating level
    whose neighbours have another number of states."""
    L = int(first)
    starts = np.asarray(starts[:L + 3], dtype=np.int64)
    if starts.shape[0] < L + 3 or L < 1:
        raise ValueError(f"starts: need the first states of levels 0..{L + 2}, got "
                         f"{starts.shape[0]} entries")
    sizes = np.diff(starts)
    if not sizes[L - 1] == sizes[L] == sizes[L + 1]:
        raise ValueError(f"levels {L - 1}..{L + 1}: must have the same number of states, got "
                         f"{sizes[L - 1:L + 2].tolist()}")
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    rows = np.flatnonzero(src < starts[L + 1])
    s, t = src[rows], dst[rows]
    ls = np.searchsorted(starts, s, side="right") - 1
    lt = np.searchsorted(starts, t, side="right") - 1
    step = lt - ls
    if np.any(np.abs(step) > 1):
        raise ValueError("transitions: a QBD moves at most one level at a time")
    d = sizes[:L + 2]
    loc = np.concatenate(([0], np.cumsum(d[:L + 1] * d[:L + 1])))
    upo = loc[-1] + np.concatenate(([0], np.cumsum(d[:L + 1] * d[1:L + 2])))
    dno = upo[-1] + np.concatenate(([0, 0], np.cumsum(d[1:L + 1] * d[:L])))
    base = np.where(step == 0, loc[ls], np.where(step > 0, upo[ls], dno[ls]))
    cells = base + (s - starts[ls]) * d[lt] + (t - starts[lt])
    own = np.repeat(np.arange(L + 1), d[:L + 1])
    state = np.arange(int(starts[L + 1]))
    diagonal = loc[own] + (state - starts[own]) * (d[own] + 1)
    return QBDPlan(starts=starts, first=L, rows=rows, cells=cells, src=s, diagonal=diagonal,
                   local=loc, up=upo, down=dno, size=int(dno[-1]))


def solve_qbd(offdiag: sparse.csr_matrix | None, starts: np.ndarray, first: int, *,
              plan: QBDPlan | None = None, rates: np.ndarray | None = None
              ) -> QBDSolution | None:
    """Stationary solution of a QBD whose levels ``n >= first`` repeat, or ``None`` if it is
    not positive recurrent.

    ``offdiag`` holds the off-diagonal rates out of levels ``0..first`` (states indexed up to
    level ``first + 1``'s last, ``starts`` the level boundaries, ``len(starts) >= first + 3``);
    levels ``first`` and ``first - 1`` must have the same number of states, as must
    ``first + 1``. The repeating blocks are read from level ``first``: ``A0`` to ``first + 1``,
    ``A1`` within it (diagonal: minus the row's total rate), ``A2`` to ``first - 1``
    (:func:`solve_planned` on the chain's :func:`plan_qbd`). With ``plan`` (the chain's, held
    by the caller) the transitions' ``rates`` in its order instead of ``offdiag``."""
    if plan is not None and rates is not None:
        return solve_planned(plan, rates)
    Q = sparse.coo_matrix(offdiag)
    return solve_planned(plan_qbd(Q.row, Q.col, starts, first), Q.data)


def solve_planned(plan: QBDPlan, rates: np.ndarray) -> QBDSolution | None:
    """:func:`solve_qbd` of the chain planned as ``plan`` with the transitions' ``rates`` (in
    the order given to :func:`plan_qbd`), or ``None`` if it is not positive recurrent.

    The boundary equations ``pi Q = 0`` on levels ``0..L`` take level ``L + 1``'s inflow as
    ``pi_L R A2`` and the normalisation ``sum_{n<L} pi_n 1 + pi_L (I-R)^{-1} 1 = 1``
    (Latouche and Ramaswami 1999, Sec. 6.4); they are solved by linear level reduction (Gaver,
    Jacobs and Latouche 1984): from ``S_L = A1 + R A2`` down, ``S_n = Q_{n,n} + Q_{n,n+1}
    (-S_{n+1})^{-1} Q_{n+1,n}`` (the generator of the chain watched on levels ``0..n`` only
    has level ``n``'s block ``S_n``), ``pi_0 S_0 = 0``, then ``pi_{n+1} = pi_n Q_{n,n+1}
    (-S_{n+1})^{-1}``: one dense solve of a level's size a level, where a sparse LU of the
    whole boundary cost the most of a 16-core tier's solve."""
    L, starts = plan.first, plan.starts
    rates = np.asarray(rates, dtype=float)[plan.rows]
    b = int(starts[L + 1])
    flat = np.bincount(plan.cells, weights=rates, minlength=plan.size)
    flat[plan.diagonal] -= np.bincount(plan.src, weights=rates, minlength=b)
    # the plan's offsets as Python ints: a level's blocks are sliced a few times each, and
    # numpy scalars' arithmetic costs more than the slicing (17 levels on 16 cores)
    d, at = np.diff(starts).tolist(), starts.tolist()
    ups, locals_, downs = plan.up.tolist(), plan.local.tolist(), plan.down.tolist()

    def block(offset: list[int], n: int, rows: int, cols: int) -> np.ndarray:
        return flat[offset[n]:offset[n] + rows * cols].reshape(rows, cols)

    w = d[L]
    A0, A1, A2 = block(ups, L, w, w), block(locals_, L, w, w), block(downs, L, w, w)
    alpha = _phase_stationary(A0 + A1 + A2)
    up, down = float(alpha @ A0.sum(axis=1)), float(alpha @ A2.sum(axis=1))
    if not up < down * (1.0 - 1e-12):
        return None
    R = _chain_rate_matrix(A0, A1, A2, alpha)
    tail = _solve(np.eye(w) - R, np.eye(w))
    S = A1 + R @ A2
    X: list[np.ndarray] = [np.empty((0, 0))] * (L + 1)     # X[n + 1] = Q_{n,n+1} (-S_{n+1})^-1
    for n in range(L - 1, -1, -1):
        Qup = block(ups, n, d[n], d[n + 1])
        X[n + 1] = _solve(-S.T, Qup.T).T
        S = block(locals_, n, d[n], d[n]) + X[n + 1] @ block(downs, n + 1, d[n + 1], d[n])
    pi = np.empty(b)
    pi[:at[1]] = _phase_stationary(S)
    for n in range(L):
        pi[at[n + 1]:at[n + 2]] = pi[at[n]:at[n + 1]] @ X[n + 1]
    pi = np.maximum(pi, 0.0)
    norm = np.ones(b)
    norm[at[L]:b] = tail.sum(axis=1)
    pi /= pi @ norm
    return QBDSolution(pi=pi, R=R, tail=tail, starts=np.asarray(starts[:L + 2]),
                       first_repeating=L)
