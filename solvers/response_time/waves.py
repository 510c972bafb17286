"""The wait at an exponential tier behind a bursty one: the ``MAP/M/c`` queue's own law.

A bursty tier releases the backlog of a slow run at its fast phase's rate, and the
exponential tiers after it queue those waves (:mod:`solvers.departures`). The decomposition
gives such a tier the mean of an open ``MAP/M/c`` FCFS queue fed by the bursty tier's
departure process; this module gives its **law**, from the same queue.

A job arriving at the ``MAP/M/c`` queue finds ``n`` jobs there in arrival phase ``j`` with
probability ``pi_n(j) d1_j / lambda`` (``d1 = D1 1``, ``lambda = pi d1``): the stationary
vector weighted by the arrival rate in each state, the arrival-epoch law of a MAP-fed queue
(Lucantoni 1991; no PASTA for a MAP). Under FCFS with ``c`` exponential servers of mean ``S``
its wait is ``K = max(n - c + 1, 0)`` phases of rate ``c / S`` -- the ``c`` busy cores' next
departures, whatever the arrival phase (Kleinrock 1975, section 3.5, for M/M/c; the service
does not depend on the arrivals) --, the same mixture of Erlangs as the arrival theorem's
(:class:`~solvers.response_time.sojourn.TierWait`), with ``K``'s law from the queue's levels:
``P(K = 0) ~ sum_{n<c} pi_n d1`` and ``P(K = k + 1) ~ pi_c R^k d1`` (the matrix-geometric
levels beyond ``c``, Neuts 1981), ``pi_0..pi_c`` and ``R`` as
:func:`solvers.departures.map_m_c_mean` computes them (Latouche and Ramaswami 1993, 1999).

The law is exact for that queue; what is approximate is the queue (an open queue fed by the
lumped departure process of the bursty tier's chain as the decomposition solves it, a tier in
between only capping the waves' rate) and the independence of the tiers in the convolution.
It replaces the arrival theorem's law, whose chance of waiting is the product form's (far too
small where the waves queue: docs/accuracy.md); its mean is still set to the network
solution's for the tier by the caller.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import lu_factor, lu_solve
from scipy.sparse import csr_array

from solvers.departures import DepartureMAP, boundary_levels, g_matrix, lumped_departures, \
    lumping, through_tier

from .sojourn import TierWait

__all__ = ["map_m_c_wait", "wave_waits", "TAIL", "MAX_LEVELS"]

#: the law of ``K`` is carried until the mass beyond is below this share
TAIL = 1e-12
#: at most this many levels beyond ``c`` term by term; the rest of the mass (a nearly
#: critical queue) goes to a geometric tail at the spectral radius of ``R``
MAX_LEVELS = 20_000


def map_m_c_wait(dep: DepartureMAP, mean: float, cores: int) -> TierWait:
    """The wait of a job arriving at a ``MAP/M/c`` FCFS queue fed by ``dep``, with ``cores``
    exponential servers of mean ``mean`` (module docstring). ``ValueError`` when the queue is
    not stable (``dep.rate * mean >= cores``); :class:`numpy.linalg.LinAlgError` when its
    matrices do not solve."""
    c = int(cores)
    if not (math.isfinite(mean) and mean > 0 and c >= 1):
        raise ValueError(f"mean, cores: a service mean > 0 and >= 1 core expected, got "
                         f"{mean!r}, {cores!r}")
    if not dep.rate * mean < c:
        raise ValueError(f"map_m_c_wait: arrival rate {dep.rate:.6g}/s with mean {mean:.6g} s "
                         f"on {c} cores is not stable")
    D0, D1 = dep.D0, dep.D1
    P = D0.shape[0]
    mu = 1.0 / mean
    s = c * mu
    G = g_matrix(D1, D0 - s * np.eye(P), s * np.eye(P))
    up = csr_array(D1)
    pis = boundary_levels(D0, D1, up, G, mu, c)                  # pi_0 .. pi_c, a common factor
    R = np.asarray(up @ G) / s
    d1 = D1.sum(axis=1)
    lu = lu_factor(np.eye(P) - R, check_finite=False)
    beyond = lu_solve(lu, d1, check_finite=False)          # (I - R)^{-1} d1
    free = float(pis[:c].sum(axis=0) @ d1)                 # found n < c: no wait
    queued = float(pis[c] @ beyond)                        # found n >= c
    total = free + queued
    if not (total > 0 and np.isfinite(total)):
        raise np.linalg.LinAlgError("map_m_c_wait: the arrival-epoch law does not normalise")
    levels, left = _levels(pis[c] / total, R, d1, beyond, queued / total)
    out = np.concatenate([[free / total], levels])
    if left > TAIL:                                         # a geometric tail at R's radius
        eta = float(np.max(np.abs(np.linalg.eigvals(R))))
        if 0.0 < eta < 1.0:
            k = np.arange(1, int(math.ceil(math.log(TAIL / left) / math.log(eta))) + 1)
            out = np.concatenate([out, left * (1.0 - eta) * eta ** (k - 1)])
    out = np.maximum(out, 0.0)
    return TierWait(rate=s, offset=0, pmf=out / out.sum())


#: levels a step of :func:`_levels` reads at once
BLOCK = 64


def _levels(v: np.ndarray, R: np.ndarray, d1: np.ndarray, beyond: np.ndarray, left: float
            ) -> tuple[np.ndarray, float]:
    """``P(K = k + 1) ~ v R^k d1`` for ``k = 0, 1, ..`` up to the first ``k`` whose mass
    beyond, ``v R^k beyond``, is at most :data:`TAIL` (``left``: ``v beyond``), at most
    :data:`MAX_LEVELS` of them; and the mass beyond the last. By blocks of :data:`BLOCK`
    levels: ``v R^{bB}`` against the columns ``R^i d1`` and ``R^i beyond``, ``i < B`` (two
    small matrix products a block, then one step ``R^B``: baby steps and giant steps,
    Paterson and Stockmeyer 1973), instead of three vector products a level -- the same
    sums; the waves' queues run to thousands of levels near saturation."""
    if left <= TAIL:
        return np.zeros(0), left
    P = R.shape[0]
    cols = np.empty((BLOCK + 1, 2, P))                 # R^i d1, R^i beyond, i = 0..B
    cols[0, 0], cols[0, 1] = d1, beyond
    for i in range(1, BLOCK + 1):
        cols[i] = cols[i - 1] @ R.T
    at = cols[:BLOCK, 0].T                             # (P, B)
    past = cols[1:, 1].T                               # beyond after each level
    step = np.linalg.matrix_power(R, BLOCK)
    out = []
    done = 0
    while done < MAX_LEVELS:
        here = np.maximum(v @ at, 0.0)
        after = v @ past
        stop = np.flatnonzero(after <= TAIL)
        take = min(int(stop[0]) + 1 if stop.size else BLOCK, MAX_LEVELS - done)
        out.append(here[:take])
        done += take
        left = float(after[take - 1])
        if stop.size and take == int(stop[0]) + 1:
            break
        v = v @ step
    return np.concatenate(out), left


def wave_waits(pi: np.ndarray, src: np.ndarray, dst: np.ndarray, rate: np.ndarray,
               level: np.ndarray, bursty_cores: int, means: list[float],
               cores: list[int]) -> list[TierWait | None]:
    """The waits of the exponential tiers after a bursty tier, in order (``means[i]``,
    ``cores[i]``), as ``MAP/M/c`` queues fed by its departure process
    (:func:`solvers.departures.lumped_departures` of its chain: stationary ``pi``, off-diagonal
    transitions ``src, dst, rate``, ``level`` per state, levels above ``bursty_cores``
    lumped), each tier capping the waves' rate for the next (:func:`through_tier`), as
    :mod:`solvers.decomposition.waves` solves their means. ``None`` from the first tier whose
    queue is not stable or does not solve (the caller keeps the arrival theorem's law)."""
    out: list[TierWait | None] = [None] * len(means)
    try:
        with np.errstate(all="ignore"):
            dep = lumped_departures(pi, src, dst, rate, level, bursty_cores,
                                    lumping(src, dst, level, bursty_cores))
    except np.linalg.LinAlgError:
        return out
    for i, (S, c) in enumerate(zip(means, cores)):
        if not (S > 0 and math.isfinite(c)):   # no demand or a delay: no wait, the waves pass
            out[i] = TierWait(rate=math.inf, offset=0, pmf=np.ones(1))
            continue
        try:
            with np.errstate(all="ignore"):
                out[i] = map_m_c_wait(dep, float(S), int(c))
        except (ValueError, np.linalg.LinAlgError):
            return out
        if not (np.all(np.isfinite(out[i].pmf))):
            out[i] = None
            return out
        dep = through_tier(dep, c / S)
    return out
