"""What a bursty tier sends downstream: its departure process, and the queue it builds there.

A bursty tier ``b`` (:mod:`solvers.decomposition`) holds jobs through a run of slow services
and releases them at its fast phase's rate when the run ends (the MAP(2) of Mi et al. (2008) scaled
to 12 ms on 8 cores: a backlog leaves at ~30,000/s). An exponential tier after it (``c`` cores,
mean ``S``) does not see Poisson arrivals but those waves; the flow-equivalent server, which
treats the rest of the network as in equilibrium at each population, gives it the product
form's queue and misses them (system (d) of docs/accuracy.md section 3: a 2-core cache at
1.04 ms against 7.15 ms simulated, a 16-core database at 20 ms against 39.5 ms).

Here the downstream tier is solved as an open ``MAP/M/c`` queue whose arrival MAP is the
bursty tier's **departure process**, read off its solved chain:

1. **Departures of the chain** (:func:`lumped_departures`). A CTMC with stationary vector
   ``pi`` and transitions split into completions (level ``n -> n-1``: ``D1``) and the rest
   (``D0``) *is* a MAP of its departures (e.g. Heindl & Telek, output models of MAP/PH/1
   queues). Its order is the chain's (thousands of levels), so the levels above ``keep``
   (all cores busy, a backlog waiting) are lumped onto one level per service configuration,
   with the stationary-weighted rates ``q'(A, B) = sum_{x in A} pi(x) q(x, B) / pi(A)``
   (Kemeny-Snell aggregation: the same stationary probabilities and departure rate, the
   backlog's length geometric given the configuration instead of its exact shape).
2. **An exponential tier in between** (:func:`through_tier`): a wave that passes a tier of
   capacity ``c'/S'`` reaches the next one at most at that rate. Each configuration whose
   departure rate exceeds it is slowed to it (its row of ``D0, D1`` scaled: the same jump
   chain, so the same burst sizes, spread over the time the tier in between needs), then the
   whole process is rescaled to keep its mean rate ``X``.
3. **The MAP/M/c queue** (:func:`map_m_c_mean`): a level-dependent quasi-birth-death process
   (level = jobs at the tier, phase = the arrival MAP's); ``R`` of the homogeneous part
   (levels ``>= c``) from ``G`` by logarithmic reduction (Latouche & Ramaswami 1993), the
   boundary levels by the first passages down ``G_n = (-B_n - D1 G_{n+1})^{-1} n mu`` from
   ``G_c = G`` (one inverse a level; ``pi_n = pi_{n-1} D1 G_n / (n mu)``, vector products);
   mean number ``sum_{n<c} n pi_n 1 + c pi_c (I-R)^{-1} 1 + pi_c R (I-R)^{-2} 1``,
   ``R = D1 G / (c mu)``.

The tier's feedback on the network (jobs held in the wave are not thinking) is left to the
caller (:func:`solvers.decomposition.solve_decomposed` shifts the population the rest sees).
numpy and scipy's LAPACK; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dgesv, dgetrf, dgetri, dgetrs
from scipy.sparse import csr_array

__all__ = ["DepartureMAP", "Lumping", "levels_mean", "lumping", "lumped_departures", "null_row",
           "through_tier", "map_m_c_mean"]

#: ``T`` below this weighs nothing against ``G``'s entries (at most 1): the reduction is done
_VANISHED = 1e-16


@dataclass(frozen=True)
class DepartureMAP:
    """A departure process ``(D0, D1)`` with its stationary vector ``w`` (``w (D0 + D1) = 0``)
    and mean rate ``rate = w D1 1``."""

    D0: np.ndarray
    D1: np.ndarray
    w: np.ndarray

    @property
    def rate(self) -> float:
        return float(self.w @ self.D1.sum(axis=1))


@dataclass(frozen=True)
class Lumping:
    """Where a level-structured chain's states and transitions go in its lumped departure MAP
    (:func:`lumping`): the pattern's part of :func:`lumped_departures`, the same for every
    set of rates on that pattern (a chain re-solved with other arrival rates)."""

    idx: np.ndarray                 # the lumped phase of each state
    order: int                      # phases before :func:`_reachable`
    departures: np.ndarray          # the transitions to a lower level ...
    departure_cells: np.ndarray     # ... and their cells ``a * order + b`` of ``D1``
    moves: np.ndarray               # the other transitions between two phases ...
    move_cells: np.ndarray          # ... and their cells of ``D0``


def lumping(src: np.ndarray, dst: np.ndarray, level: np.ndarray, keep: int) -> Lumping:
    """:class:`Lumping` of a chain's pattern (:func:`lumped_departures`)."""
    top = int(level.max())
    start = np.searchsorted(level, np.arange(top + 2))
    idx = np.arange(level.shape[0])
    order = level.shape[0]
    if top > keep + 1:
        width = int(start[keep + 2] - start[keep + 1])
        high = level > keep + 1
        idx[high] = start[keep + 1] + (idx[high] - start[level[high]]) % width
        order = int(start[keep + 2])
    down = level[dst] < level[src]
    a, b = idx[src], idx[dst]
    cell = a * order + b
    departures = np.flatnonzero(down)
    moves = np.flatnonzero(~down & (a != b))
    return Lumping(idx, order, departures, cell[departures], moves, cell[moves])


def lumped_departures(pi: np.ndarray, src: np.ndarray, dst: np.ndarray, rate: np.ndarray,
                      level: np.ndarray, keep: int,
                      lumped: Lumping | None = None, *,
                      negligible: float | None = None) -> DepartureMAP:
    """Departure MAP of a level-structured chain (states sorted by ``level``, every level
    above ``keep + 1`` with ``keep + 1``'s pattern of states), levels above ``keep`` lumped
    onto ``keep + 1``'s states (module notes, step 1). ``src, dst, rate``: the off-diagonal
    transitions; a transition to a lower level is a departure. ``lumped``: this pattern's
    :func:`lumping`, if already at hand; ``negligible``: the share of transitions below which
    a phase is dropped (:func:`_reachable`; default :data:`NEGLIGIBLE_PHASE`)."""
    if lumped is None:
        lumped = lumping(src, dst, level, keep)
    order = lumped.order
    w = np.bincount(lumped.idx, weights=pi, minlength=order)
    flow = pi[src] * rate
    D1 = np.bincount(lumped.departure_cells, weights=flow[lumped.departures],
                     minlength=order * order).reshape(order, order)
    D0 = np.bincount(lumped.move_cells, weights=flow[lumped.moves],
                     minlength=order * order).reshape(order, order)
    held = w > 0
    if held.all():                              # the same quotients without boolean masks
        D1 /= w[:, None]
        D0 /= w[:, None]
    else:
        D1[held] /= w[held, None]
        D0[held] /= w[held, None]
    D0[np.diag_indices(order)] = -(D0.sum(axis=1) + D1.sum(axis=1))
    return _reachable(DepartureMAP(D0, D1, w / w.sum()),
                      NEGLIGIBLE_PHASE if negligible is None else negligible)


#: a departure MAP's phases with a smaller share of its transitions are dropped
#: (:func:`_reachable`)
NEGLIGIBLE_PHASE = 1e-10


def _reachable(dep: DepartureMAP, negligible: float = NEGLIGIBLE_PHASE) -> DepartureMAP:
    """The phases whose share of the process's transitions, ``w_i |D0_ii| / sum_j w_j |D0_jj|`` (how
    often the phase is entered and left), is above ``negligible`` (default :data:`NEGLIGIBLE_PHASE`;
    those with no probability make ``-D0`` singular; a rate into a dropped phase becomes a stay). A
    per-job chain's lumped levels hold many configurations that almost never occur (most of 8 or 16
    cores on the slow phase at once); the ``MAP/M/c`` queue's cost goes as the cube of the phases.
    By transitions rather than by probability, so a brief but frequent phase is kept: on
    docs/accuracy.md's system (d) 77-103 of 108 phases remain (100-1,000 users), of a 16-core bursty
    tier's 340 191-237 (1,000-3,000 users). Against keeping every phase, the solves' throughput
    moved by at most 1.3e-8, the response time by 2.1e-7, a tier's residence time by 6.3e-7 (systems
    (c), (d), 3-4 tiers with one or two bursty tiers, 100-3,000 users; dropping by probability below
    1e-10 instead: up to 5.2e-5), at about half the CPU time of a 4-tier solve with a 16-core bursty
    second tier at 3,000 users."""
    flux = dep.w * -np.diag(dep.D0)
    keep = flux > negligible * float(flux.sum())
    if keep.all():
        return dep
    rows = np.flatnonzero(keep)
    D0r, D1r = dep.D0[rows], dep.D1[rows]       # the kept rows, then their kept columns:
    # new C-ordered arrays, as np.ix_'s (its row sums then bit for bit), at half its CPU
    D0, D1 = np.take(D0r, rows, axis=1), np.take(D1r, rows, axis=1)
    lost = D0r.sum(axis=1) + D1r.sum(axis=1) - D0.sum(axis=1) - D1.sum(axis=1)
    D0[np.diag_indices(D0.shape[0])] += lost      # rates into dropped phases: stays
    w = dep.w[keep]
    return DepartureMAP(D0, D1, w / w.sum())


def through_tier(dep: DepartureMAP, capacity: float) -> DepartureMAP:
    """The process after a tier that completes at most ``capacity`` jobs per second (module
    notes, step 2): phases departing faster are slowed to ``capacity`` (rows scaled), then
    every rate is scaled to keep the mean rate."""
    d = dep.D1.sum(axis=1)
    f = np.where(d > capacity, capacity / np.maximum(d, 1e-300), 1.0)
    if np.all(f == 1.0):
        return dep
    w = dep.w / f
    w /= w.sum()
    D0, D1 = dep.D0 * f[:, None], dep.D1 * f[:, None]
    k = dep.rate / float(w @ D1.sum(axis=1))
    return DepartureMAP(D0 * k, D1 * k, w)


def g_matrix(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray, tol: float = 1e-12,
             max_iterations: int = 64) -> np.ndarray:
    """Minimal ``G`` with ``A2 + A1 G + A0 G^2 = 0`` (``A0`` up, ``A1`` local, ``A2`` down) by
    logarithmic reduction (Latouche & Ramaswami 1993): quadratic convergence. The iteration
    stops when ``G 1 = 1`` to ``tol``, or when ``T`` (the product of the up-steps, which
    weighs each new term of ``G``) has vanished: ``G`` can no longer change, and a nearly
    critical queue's 40-phase ``G`` may sit at a rounding floor just above ``tol`` (iterating
    on from there overflows). :class:`numpy.linalg.LinAlgError` when ``G 1`` is then still
    more than 1e-8 from 1, or after ``max_iterations``. Each step solves ``(I - U)`` against
    ``[B0^2, B2^2]`` by one LU (LAPACK ``dgesv``) instead of forming its inverse and two
    products (the inverse of an 80 x 80 block costs about four products: the waves' queues
    take ~10% less CPU, ``G`` the same to 1e-13); the last step skips ``T``."""
    d = A1.shape[0]
    eye = np.eye(d)
    B = _solve(-A1, np.hstack((A0, A2)))
    B0, B2 = B[:, :d], B[:, d:]
    G, T = B2.copy(), B0.copy()
    off = math.inf
    for _ in range(max_iterations):
        B = _solve(eye - B0 @ B2 - B2 @ B0, np.hstack((B0 @ B0, B2 @ B2)))
        B0, B2 = B[:, :d], B[:, d:]
        G += T @ B2
        off = float(np.max(np.abs(1.0 - G.sum(axis=1))))     # NaN after an overflow
        if off < tol:                                  # T of a next step not needed
            return G
        T = T @ B0
        if not np.max(np.abs(T)) >= _VANISHED:          # also NaN: stop, judge G below
            break
    if off < 1e-8:                                     # rounding in large blocks
        return G
    raise np.linalg.LinAlgError(f"G matrix: logarithmic reduction did not converge (G 1 off "
                                f"1 by {off:.3g}, at most {max_iterations} iterations)")


def _inverse(a: np.ndarray) -> np.ndarray:
    """``a^{-1}`` by LAPACK's ``dgetrf`` and ``dgetri`` (about half the time of
    :func:`numpy.linalg.inv`, which solves against the identity, at 90 x 90: the waves'
    queues spend most of their time in these); :class:`numpy.linalg.LinAlgError` when ``a``
    is singular."""
    lu, piv, info = dgetrf(a)
    if info == 0:
        inv, info = dgetri(lu, piv)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular matrix (dgetrf/dgetri info {info})")
    return inv


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a^{-1} b`` by one LU (LAPACK ``dgesv``); :class:`numpy.linalg.LinAlgError` when ``a``
    is singular, as :func:`numpy.linalg.inv` would raise."""
    _, _, x, info = dgesv(a, b)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular matrix (dgesv info {info})")
    return x


def map_m_c_mean(dep: DepartureMAP, mean: float, cores: int, *, tol: float = 1e-12) -> float:
    """Mean number of jobs in a ``MAP/M/c`` FCFS queue fed by ``dep`` (module notes, step 3).
    Requires ``dep.rate * mean < cores`` (stable).

    Level ``n`` (jobs) has the local block ``B_n = D0 - min(n, c) mu I``, up ``D1``, down
    ``min(n, c) mu I``. The first passages down, ``G_n = (-B_n - D1 G_{n+1})^{-1} n mu``, start
    from ``G_c = G`` (the homogeneous part's, which solves that recursion at ``n = c``) and
    give ``pi_n = pi_{n-1} R_{n-1}`` with ``R_{n-1} = D1 G_n / (n mu)`` and ``pi_0 (D0 + D1
    G_1) = 0`` (Latouche & Ramaswami 1999, level-dependent QBDs; ``R A_2 = A_0 G``): one
    inverse per boundary level, vector products for the ``pi_n``. Beyond ``c``
    ``pi_{c+k} = pi_c R^k``, ``R = D1 G / (c mu)``: ``sum_{n<c} n pi_n 1 + c pi_c (I-R)^{-1} 1
    + pi_c R (I-R)^{-2} 1`` jobs over ``sum_{n<c} pi_n 1 + pi_c (I-R)^{-1} 1``. ``tol``: how
    far ``G 1`` may be from 1 (:func:`g_matrix`)."""
    if not dep.rate * mean < cores:
        raise ValueError(f"map_m_c_mean: arrival rate {dep.rate:.6g}/s with mean {mean:.6g} s "
                         f"on {cores} cores is not stable")
    D0, D1 = dep.D0, dep.D1
    P = D0.shape[0]
    eye = np.eye(P)
    mu = 1.0 / mean
    s = cores * mu
    G = g_matrix(D1, D0 - s * eye, s * eye, tol)
    up = csr_array(D1)                                  # sparse: one level's departures
    return levels_mean(boundary_levels(D0, D1, up, G, mu, cores), up @ G / s)


def null_row(Q: np.ndarray) -> np.ndarray:
    """``x`` with ``x Q = 0`` and ``sum(x) = 1`` (a level's generator censored on it: one
    balance equation replaced by the normalisation, scaled like ``Q``'s entries)."""
    a = Q.T.copy()
    scale = float(np.max(np.abs(a))) or 1.0
    a[0] = scale
    rhs = np.zeros(a.shape[0])
    rhs[0] = scale
    return _solve(a, rhs)


def levels_mean(pis: np.ndarray, R: np.ndarray) -> float:
    """Mean level of a QBD whose levels from ``c = len(pis) - 1`` up are ``pi_c R^k``, given
    ``pi_0 .. pi_c`` (rows, up to a common factor) and ``R`` (:func:`map_m_c_mean`): ``sum_{n<c}
    n pi_n 1 + c pi_c (I-R)^{-1} 1 + pi_c R (I-R)^{-2} 1`` over ``sum_{n<c} pi_n 1 + pi_c
    (I-R)^{-1} 1``."""
    cores = pis.shape[0] - 1
    # LAPACK's own calls (scipy's lu_factor / lu_solve cost more in checks than these solves
    # of one level); a singular I - R gives inf, which the callers flag
    lu, piv, _ = dgetrf(np.eye(R.shape[0]) - R)
    tail = dgetrs(lu, piv, pis[cores], trans=1)[0]      # pi_c (I-R)^{-1}
    twice = dgetrs(lu, piv, dgetrs(lu, piv, np.ones(R.shape[0]))[0])[0]
    total = float(pis[:cores].sum()) + float(tail.sum())
    jobs = (float(np.arange(cores) @ pis[:cores].sum(axis=1)) + cores * float(tail.sum())
            + float(pis[cores] @ (R @ twice)))
    return jobs / total


def boundary_levels(D0: np.ndarray, D1: np.ndarray, up: csr_array, G: np.ndarray, mu: float,
                    cores: int) -> np.ndarray:
    """``pi_0 .. pi_c`` (rows, up to a common factor) of the ``MAP/M/c`` queue's levels up to
    ``c`` (:func:`map_m_c_mean`): ``G_n`` down from ``G_c = G``, ``pi_0`` the null vector of
    ``D0 + D1 G_1`` (one balance equation replaced by the normalisation), then
    ``pi_n = pi_{n-1} D1 G_n / (n mu)``; ``up``: ``D1`` in CSR form."""
    P = D0.shape[0]
    eye = np.eye(P)
    down = [G]                                          # G_c, G_{c-1}, .., G_1
    for n in range(cores - 1, 0, -1):
        down.append(_inverse(n * mu * eye - D0 - up @ down[-1]) * (n * mu))
    pis = np.empty((cores + 1, P))
    pis[0] = null_row(D0 + up @ down[-1])
    for n in range(1, cores + 1):
        pis[n] = (pis[n - 1] @ D1) @ down[cores - n] / (n * mu)
    return pis
