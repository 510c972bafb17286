"""Response-time laws of the closed MAP network (Mi et al. 2008, Fig. 9) from its exact chain.

**What an arriving job finds.** The MAP network is not product form, so the arrival theorem
does not hold; the state a job arriving at tier ``m`` sees is the stationary state weighted by
the rate at which jobs enter ``m`` in it (a completion at tier ``m - 1``, or the end of a think
time for the first tier): ``P(found = (n, phi)) ~ sum_s pi(s) r_m(s)`` over the states ``s``
with ``n`` jobs at ``m`` in phase ``phi`` (Lavenberg and Reiser 1980's construction, without
its product-form shortcut). ``pi`` comes from :func:`solvers.mapqn.stationary_states`.

**A bursty tier of one core.** Its phase runs while it is busy, and a job that finds ``n``
ahead in phase ``phi`` leaves at the ``(n + 1)``-th completion of the tier's MAP from
``phi``: a phase-type passage time through the tier's chain (the jobs behind it never
matter under FCFS). On the lattice of :mod:`solvers.response_time.sojourn` one completion is
the matrix kernel ``e^{D0 t} D1`` discretised with the same triangular kernel -- its masses
are ``K_0`` at 0 and ``B^{i-1} (B - I)^2 D0^{-2} D1 / h`` at ``i h`` (``B = e^{D0 h}``), whose
transform is ``K_0 + w (I - w B)^{-1} (B - I)^2 D0^{-2} D1 / h`` per frequency ``w`` -- and the
passage's transform is ``sum_n F(n, .) K(w)^{n} K_c(w) 1`` (Horner over ``n``; ``K_c`` the
class's own service, the MAP's time scaled by its demand ratio). Exponential tiers keep the
Erlang mixtures of :mod:`~solvers.response_time.sojourn`, from the found law's counts.

The tiers are convolved as independent, as on the MVA route. Only the exact chain: a bursty
tier of several cores (its jobs each keep their own phase in the physical tier) and chains
past the exact solver's budget are not covered (:class:`ValueError`; the caller approximates).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from solvers.mapqn import StateSpace, stationary_states
from solvers.processes import MAP

from .sojourn import SPAN, GridDistribution, TierWait, pgf, phase_transform, quantiles, tier_wait, \
    unit_roots

__all__ = ["found_at_arrival", "map_network_quantiles"]

#: lattice points of a MAP network's law
GRID = 1024


def found_at_arrival(procs: list[MAP], space: StateSpace, pi: np.ndarray) -> list[np.ndarray]:
    """Per tier ``m``, ``F_m[n, phi]``: the probability that a job arriving at ``m`` finds
    ``n`` others there with the tier in phase ``phi`` (module docstring)."""
    K, M, N, Z = space.phase_count, space.queues, space.population, space.think_time
    occ, ph = space.occupancy, space.phases
    P = pi.reshape(-1, K)
    out = []
    for m in range(M):
        if m == 0 and Z > 0:
            rate = np.broadcast_to(((N - occ.sum(axis=1)) / Z)[:, None], P.shape)
            src = None
        else:
            src = m - 1 if m > 0 else M - 1
            speed = space.speed(src)
            busy = (occ[:, src] > 0).astype(float) * (1.0 if speed is None else speed)
            rate = busy[:, None] * procs[src].D1.sum(axis=1)[ph[:, src]][None, :]
        w = P * rate
        found = occ[:, m] - (1 if src == m else 0)
        F = np.zeros((N, procs[m].order))
        n_idx = np.broadcast_to(np.clip(found, 0, N - 1)[:, None], w.shape)
        phi_idx = np.broadcast_to(ph[:, m][None, :], w.shape)
        np.add.at(F, (n_idx.ravel(), phi_idx.ravel()), w.ravel())
        out.append(F / F.sum())
    return out


def _kernel(proc: MAP, scale: float, h: float, size: int) -> np.ndarray:
    """``(size/2 + 1, k, k)``: the transform of one completion's triangular-kernel masses
    (module docstring) of ``proc`` with its time multiplied by ``scale``."""
    return chain_kernel(proc.D0 / scale, proc.D1 / scale, h, size)


def chain_kernel(A0: np.ndarray, A1: np.ndarray, h: float, size: int) -> np.ndarray:
    """``(size/2 + 1, k, j)``: the transform of the triangular-kernel masses of the matrix
    kernel ``e^{A0 t} A1`` (``A0`` a sub-generator, ``A1`` ``k x j``; module docstring)."""
    L = chain_transfer(A0, h, size)
    return (L.reshape(-1, L.shape[2]) @ A1).reshape(L.shape[0], L.shape[1], -1)


def chain_transfer(A0: np.ndarray, h: float, size: int) -> np.ndarray:
    """``(size/2 + 1, k, k)``: ``L(w)`` with ``L(w) A1`` the transform of
    :func:`chain_kernel`'s masses for any ``A1`` -- they are linear in ``A1``, so kernels on
    the same ``A0`` (a full level's completions and its last one) share one solve a
    frequency. ``(I - w B)^{-1} V`` for every ``w`` from one complex Schur form ``B = Q T
    Q^*`` (Golub and Van Loan 2013, section 7.1): ``Q (I - w T)^{-1} Q^* V``, the triangular
    systems of all frequencies solved row by row side by side -- ``k`` array steps and two
    matrix products instead of an LU a frequency (backward stable as that LU: ``Q``
    unitary, the same values to rounding)."""
    k = A0.shape[0]
    eye = np.eye(k)
    B = linalg.expm(A0 * h)
    inv = np.linalg.inv(A0)
    K0 = (inv @ inv @ (B - eye) - h * inv) / h
    V = (B - eye) @ (B - eye) @ inv @ inv / h
    w = unit_roots(size)[0][0]
    f = w.shape[0]
    T, Q = linalg.schur(B, output="complex")
    Y = Q.conj().T @ V
    X = np.empty((k, f, k), dtype=complex)            # X[i, f] row i of (I - w T)^{-1} Y
    wcol = w[:, None]
    for i in range(k - 1, -1, -1):                   # back substitution, all w at once
        rhs = Y[i] if i == k - 1 else Y[i] + wcol * (T[i, i + 1:] @ X[i + 1:].reshape(
            k - i - 1, f * k)).reshape(f, k)
        np.divide(rhs, (1.0 - w * T[i, i])[:, None], out=X[i])
    QX = (Q @ X.reshape(k, f * k)).reshape(k, f, k).transpose(1, 0, 2)
    return K0[None] + w[:, None, None] * QX


def _passage_moments(proc: MAP, F: np.ndarray) -> tuple[float, float]:
    """Mean and second moment of the time to the ``(n + 1)``-th completion of ``proc`` from
    the found law ``F[n, phi]`` (:func:`chain_passage_moments`)."""
    return chain_passage_moments(proc.D0, proc.D1, F)


#: found levels :func:`chain_passage_moments` reads at once
MOMENT_BLOCK = 32


def chain_passage_moments(A0: np.ndarray, A1: np.ndarray, F: np.ndarray
                          ) -> tuple[float, float]:
    """Mean and second moment of the time to the ``(n + 1)``-th completion of the chain
    ``(A0, A1)`` from the found law ``F[n, x]``: ``m1(j) = u + P m1(j-1)``,
    ``m2(j) = 2 (-A0)^{-2} 1 + 2 Q_1 m1(j-1) + P m2(j-1)`` with ``u = (-A0)^{-1} 1``,
    ``P = (-A0)^{-1} A1``, ``Q_1 = (-A0)^{-2} A1`` (the first completion's time and the
    state it leaves, then the rest). The recursion is linear in ``x_j = (m1(j), m2(j), 1)``,
    ``x_j = M x_{j-1}``: the ``x_j`` of :data:`MOMENT_BLOCK` levels at once, one product by
    ``M^B`` a block (baby steps and giant steps, Paterson and Stockmeyer 1973: a few dozen
    steps instead of four vector products a level)."""
    d = A0.shape[0]
    inv = np.linalg.inv(-A0)
    one = np.ones(d)
    u, P, Q1 = inv @ one, inv @ A1, inv @ inv @ A1
    second = 2.0 * inv @ inv @ one
    M = np.zeros((2 * d + 1, 2 * d + 1))
    M[:d, :d], M[:d, -1] = P, u
    M[d:2 * d, :d], M[d:2 * d, d:2 * d], M[d:2 * d, -1] = 2.0 * Q1, P, second
    M[-1, -1] = 1.0
    B = MOMENT_BLOCK
    X = np.empty((2 * d + 1, B))                       # x_1 .. x_B
    X[:, 0] = M[:, -1]
    for i in range(1, B):
        X[:, i] = M @ X[:, i - 1]
    step = np.linalg.matrix_power(M, B)
    mean = square = 0.0
    for b in range(0, F.shape[0], B):
        rows = F[b:b + B]
        t = rows.shape[0]
        mean += float(np.einsum("ix,xi->", rows, X[:d, :t]))
        square += float(np.einsum("ix,xi->", rows, X[d:2 * d, :t]))
        X = step @ X
    return mean, square


def map_network_quantiles(processes: list[MAP], population: int, think_time: float,
                          servers: list[int], class_scales: np.ndarray, shares: np.ndarray,
                          levels: tuple[float, ...], *, grid: int = GRID
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Per class the response time's quantiles ``(C, L)`` and means ``(C,)`` in the MAP
    network of ``processes`` (each with the tier's aggregate mean), ``population``, think time
    and cores: ``class_scales[m, c]`` a class's service over the aggregate's at tier ``m``,
    ``shares[m, c]`` the factor on the wait it meets. ``ValueError`` for a bursty tier of
    several cores (module docstring)."""
    M = len(processes)
    scales = np.asarray(class_scales, dtype=float).reshape(M, -1)
    sh = np.asarray(shares, dtype=float).reshape(M, -1)
    C = scales.shape[1]
    for m, (p, c) in enumerate(zip(processes, servers)):
        if p.order > 1 and c > 1:
            raise ValueError(f"servers: tier {m} is bursty with {c} cores; the passage-time "
                             f"law covers one-core bursty tiers")
    space, pi = stationary_states(processes, population, think_time, servers=servers)
    found = found_at_arrival(processes, space, pi)
    means = np.zeros(C)
    var = np.zeros(C)
    waits: list[TierWait | None] = []
    for m, (p, F) in enumerate(zip(processes, found)):
        if p.order == 1:
            wait = tier_wait(0, F[:, 0], p.mean, servers[m])
            waits.append(wait)
            means += wait.mean() * sh[m] + p.mean * scales[m]
            var += wait.variance() * sh[m] ** 2 + (p.mean * scales[m]) ** 2
        else:
            waits.append(None)
            mean, square = _passage_moments(p, F)
            top = np.maximum(sh[m], scales[m])
            means += mean * top
            var += max(square - mean * mean, 0.0) * top ** 2
    top = float(np.max(means + SPAN * np.sqrt(var)))
    h = top / grid
    phi = np.ones((C, grid // 2 + 1), dtype=complex)
    for m, (p, F) in enumerate(zip(processes, found)):
        wait = waits[m]
        if wait is not None:
            phi *= phase_transform(1.0 / (p.mean * scales[m]), h, grid)
            for share in np.unique(sh[m]):
                if share > 0 and wait.no_wait() < 1.0:
                    rate = np.array([wait.rate / share])
                    phi[sh[m] == share] *= pgf(wait, phase_transform(rate, h, grid)[0])
            continue
        visiting = (sh[m] > 0) | (scales[m] > 0)
        for share in np.unique(sh[m][visiting]):
            if share > 0:
                Kw = _kernel(p, float(share), h, grid)
            else:                                 # no wait: the phases move, no time passes
                P = np.linalg.solve(-p.D0, p.D1)
                Kw = np.broadcast_to(P, (grid // 2 + 1, p.order, p.order)).astype(complex)
            acc = np.broadcast_to(F[-1], (Kw.shape[0], p.order)).astype(complex)
            for n in range(F.shape[0] - 2, -1, -1):
                acc = np.einsum("fi,fij->fj", acc, Kw) + F[n]
            for c in np.flatnonzero((sh[m] == share) & visiting):
                if not scales[m, c] > 0:
                    phi[c] *= acc.sum(axis=1)
                    continue
                Kc = _kernel(p, float(scales[m, c]), h, grid)
                phi[c] *= np.einsum("fi,fij->f", acc, Kc)
    mass = np.maximum(np.fft.irfft(phi, n=grid, axis=1), 0.0)
    cdf = np.minimum(np.cumsum(mass, axis=1), 1.0)
    dists = [GridDistribution(h=h, cdf=cdf[c], mean=float(means[c])) for c in range(C)]
    law_means = np.array([float(h * (np.arange(grid) @ mass[c])) for c in range(C)])
    return quantiles(dists, tuple(levels)), law_means
