"""What a bursty tier sends downstream: its departure process, and the queue it builds there.

A bursty tier ``b`` (:mod:`solvers.decomposition`) holds jobs through a run of slow services
and releases them at its fast phase's rate when the run ends (paper 000's MAP(2) scaled to
12 ms on 8 cores: a backlog leaves at ~30,000/s). An exponential tier after it (``c`` cores,
mean ``S``) does not see Poisson arrivals but those waves; the flow-equivalent server, which
treats the rest of the network as in equilibrium at each population, gives it the product
form's queue and misses them (docs/accuracy.md section 5, system (d): a 2-core cache at
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
   boundary levels by the backward recursion ``R_n = D1 (-B_{n+1} - R_{n+1} A_2^{(n+2)})^{-1}``;
   mean number ``sum_{n<c} n pi_n 1 + c pi_c (I-R)^{-1} 1 + pi_c R (I-R)^{-2} 1``.

The tier's feedback on the network (jobs held in the wave are not thinking) is left to the
caller (:func:`solvers.decomposition.solve_decomposed` shifts the population the rest sees).
Pure numpy; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DepartureMAP", "lumped_departures", "through_tier", "map_m_c_mean"]

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


def lumped_departures(pi: np.ndarray, src: np.ndarray, dst: np.ndarray, rate: np.ndarray,
                      level: np.ndarray, keep: int) -> DepartureMAP:
    """Departure MAP of a level-structured chain (states sorted by ``level``, every level
    above ``keep + 1`` with ``keep + 1``'s pattern of states), levels above ``keep`` lumped
    onto ``keep + 1``'s states (module notes, step 1). ``src, dst, rate``: the off-diagonal
    transitions; a transition to a lower level is a departure."""
    top = int(level.max())
    start = np.searchsorted(level, np.arange(top + 2))
    idx = np.arange(level.shape[0])
    order = level.shape[0]
    if top > keep + 1:
        width = int(start[keep + 2] - start[keep + 1])
        high = level > keep + 1
        idx[high] = start[keep + 1] + (idx[high] - start[level[high]]) % width
        order = int(start[keep + 2])
    w = np.bincount(idx, weights=pi, minlength=order)
    down = level[dst] < level[src]
    flow = pi[src] * rate
    a, b = idx[src], idx[dst]
    D1 = np.zeros((order, order))
    np.add.at(D1, (a[down], b[down]), flow[down])
    D0 = np.zeros((order, order))
    moves = ~down & (a != b)
    np.add.at(D0, (a[moves], b[moves]), flow[moves])
    held = w > 0
    D1[held] /= w[held, None]
    D0[held] /= w[held, None]
    D0[np.diag_indices(order)] = -(D0.sum(axis=1) + D1.sum(axis=1))
    return _reachable(DepartureMAP(D0, D1, w / w.sum()))


def _reachable(dep: DepartureMAP) -> DepartureMAP:
    """The phases with stationary probability (the others make ``-D0`` singular)."""
    keep = dep.w > 1e-300
    if keep.all():
        return dep
    D0, D1 = dep.D0[np.ix_(keep, keep)].copy(), dep.D1[np.ix_(keep, keep)].copy()
    lost = dep.D0[keep].sum(axis=1) + dep.D1[keep].sum(axis=1) - D0.sum(axis=1) - D1.sum(axis=1)
    D0[np.diag_indices(D0.shape[0])] += lost      # rates into dropped phases: none (w = 0)
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


def _g_matrix(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray, tol: float = 1e-12,
              max_iterations: int = 64) -> np.ndarray:
    """Minimal ``G`` with ``A2 + A1 G + A0 G^2 = 0`` (``A0`` up, ``A1`` local, ``A2`` down) by
    logarithmic reduction (Latouche & Ramaswami 1993): quadratic convergence. The iteration
    stops when ``G 1 = 1`` to ``tol``, or when ``T`` (the product of the up-steps, which
    weighs each new term of ``G``) has vanished: ``G`` can no longer change, and a nearly
    critical queue's 40-phase ``G`` may sit at a rounding floor just above ``tol`` (iterating
    on from there overflows). :class:`numpy.linalg.LinAlgError` when ``G 1`` is then still
    more than 1e-8 from 1, or after ``max_iterations``."""
    eye = np.eye(A1.shape[0])
    inv = np.linalg.inv(-A1)
    B0, B2 = inv @ A0, inv @ A2
    G, T = B2.copy(), B0.copy()
    off = math.inf
    for _ in range(max_iterations):
        M = np.linalg.inv(eye - B0 @ B2 - B2 @ B0)
        B0, B2 = M @ (B0 @ B0), M @ (B2 @ B2)
        G += T @ B2
        T = T @ B0
        off = float(np.max(np.abs(1.0 - G.sum(axis=1))))     # NaN after an overflow
        if off < tol:
            return G
        if not np.max(np.abs(T)) >= _VANISHED:          # also NaN: stop, judge G below
            break
    if off < 1e-8:                                     # rounding in large blocks
        return G
    raise np.linalg.LinAlgError(f"G matrix: logarithmic reduction did not converge (G 1 off "
                                f"1 by {off:.3g}, at most {max_iterations} iterations)")


def map_m_c_mean(dep: DepartureMAP, mean: float, cores: int) -> float:
    """Mean number of jobs in a ``MAP/M/c`` FCFS queue fed by ``dep`` (module notes, step 3).
    Requires ``dep.rate * mean < cores`` (stable)."""
    if not dep.rate * mean < cores:
        raise ValueError(f"map_m_c_mean: arrival rate {dep.rate:.6g}/s with mean {mean:.6g} s "
                         f"on {cores} cores is not stable")
    D0, D1 = dep.D0, dep.D1
    P = D0.shape[0]
    eye = np.eye(P)
    mu = 1.0 / mean
    A1 = D0 - cores * mu * eye
    R = D1 @ np.linalg.inv(-A1 - D1 @ _g_matrix(D1, A1, cores * mu * eye))
    Rn = [R] * cores                      # Rn[n]: pi_{n+1} = pi_n Rn[n], built backwards
    nxt = R
    for n in range(cores - 1, -1, -1):
        nxt = D1 @ np.linalg.inv(-(D0 - min(n + 1, cores) * mu * eye)
                                 - nxt * (min(n + 2, cores) * mu))
        Rn[n] = nxt
    boundary = D0 + Rn[0] * mu            # pi_0 (B_0 + R_0 A_2^{(1)}) = 0
    a = np.vstack([boundary.T, np.ones(P)])
    pi0 = np.linalg.lstsq(a, np.concatenate([np.zeros(P), [1.0]]), rcond=None)[0]
    pis = [pi0]
    for n in range(cores):
        pis.append(pis[-1] @ Rn[n])
    inv = np.linalg.inv(eye - R)
    tail = pis[cores] @ inv
    total = sum(float(p.sum()) for p in pis[:cores]) + float(tail.sum())
    jobs = (sum(n * float(p.sum()) for n, p in enumerate(pis[:cores]))
            + cores * float(tail.sum()) + float((pis[cores] @ R @ inv @ inv).sum()))
    return jobs / total
