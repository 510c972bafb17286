"""The per-job station's transitions for an open tier, level by level in arrays.

An open bursty tier (:func:`solvers.open.m_map_c`) is the closed decomposition's per-job
station with a constant arrival rate (:mod:`solvers.decomposition.stations`): state ``(n, k,
s)``, ``n`` jobs, ``k_i`` of the ``min(n, c)`` in service in phase ``i``, ``s`` the phase the
next job to start begins in; start phases follow the MAP's embedded chain ``P = (-D0)^{-1}
D1`` (Mi et al. 2008's per-job phases; Neuts 1981 for the MAP). The QBD solve needs its
levels ``0..c + 2``; :func:`solvers.decomposition.stations.per_job_states` builds them state
by state, about a millisecond a level on 16 cores -- a cold open search paid ~5 ms for the
two bursty tiers of docs/benchmarks.md's large-population network before its first solve.
:func:`per_job_transitions` builds the same transitions a level at a time with numpy (every
state of a level and one pair of phases at once), in another order: the QBD plan and the
departure process sum them by cell, so the order does not matter. Where the decomposition
bins the phase counts (two phases above
:data:`solvers.decomposition.stations.PHASE_COUNT_BINS` busy cores) it defers to that
builder.
"""

from __future__ import annotations

import numpy as np

from solvers.decomposition.stations import PHASE_COUNT_BINS, compositions, per_job_states
from solvers.processes import MAP

__all__ = ["per_job_transitions"]

#: the lookup of a phase count by its mixed-radix code is an array of this many entries at
#: most; larger stations (many phases and cores) are built state by state
MAX_CODES = 1 << 20


def per_job_transitions(proc: MAP, cores: int) -> tuple[np.ndarray, ...]:
    """``(src, dst, rate, up)`` of the per-job station on ``cores`` cores with levels
    ``0..cores + 2`` (the transitions out of levels ``0..cores + 1``; ``up``: an arrival,
    its rate a factor of the arrival rate), as
    ``per_job_states(cores + 2, proc, cores)[:4]`` gives them up to their order."""
    K, c = proc.order, int(cores)
    if (K == 2 and c > PHASE_COUNT_BINS) or (c + 2) ** K > MAX_CODES:
        return per_job_states(c + 2, proc, c)[:4]
    D0 = np.asarray(proc.D0, dtype=float)
    P = np.linalg.solve(-D0, proc.D1)
    d1 = np.asarray(proc.D1, dtype=float).sum(axis=1)
    radix = (c + 2) ** np.arange(K)
    comps = [_composition_array(m, K) for m in range(c + 1)]
    pos = np.full((c + 2) ** K, -1, dtype=np.int64)
    for kk in comps:
        pos[kk @ radix] = np.arange(kk.shape[0])
    sizes = [comps[min(n, c)].shape[0] * K for n in range(c + 3)]
    start = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    # every state of levels 0..c + 1 at once: level, phase counts (and their code), start phase
    level = np.repeat(np.arange(c + 2), sizes[:c + 2])
    kk = np.concatenate([np.repeat(comps[min(n, c)], K, axis=0) for n in range(c + 2)])
    s = np.tile(np.arange(K), kk.shape[0] // K)
    here = np.arange(kk.shape[0], dtype=np.int64)
    code = kk @ radix
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray, bool]] = []

    def add(pick: np.ndarray, dst: np.ndarray, rate: np.ndarray, up: bool) -> None:
        keep = rate > 0
        pieces.append((here[pick][keep], dst[keep], rate[keep], up))

    def at(lvl: np.ndarray, codes: np.ndarray, phase: np.ndarray) -> np.ndarray:
        return start[lvl] + pos[codes] * K + phase

    low = level < c                     # an arrival starts in s; the next starts from P[s]
    for t in range(K):
        add(low, at(level[low] + 1, code[low] + radix[s[low]], np.full(low.sum(), t)),
            P[s[low], t], True)
    add(~low, here[~low] + (start[level[~low] + 1] - start[level[~low]]),   # it queues
        np.ones((~low).sum()), True)
    queued = level > c
    for i in range(K):
        busy = kk[:, i] > 0
        for j in range(K):              # a job in service moves from phase i to j
            if j != i:
                add(busy, at(level[busy], code[busy] - radix[i] + radix[j], s[busy]),
                    kk[busy, i] * D0[i, j], False)
        done = busy & queued            # a completion; the next queued job starts in s
        for t in range(K):
            add(done, at(level[done] - 1, code[done] - radix[i] + radix[s[done]],
                         np.full(done.sum(), t)),
                kk[done, i] * d1[i] * P[s[done], t], False)
        done = busy & ~queued           # a completion; one core fewer busy
        add(done, at(level[done] - 1, code[done] - radix[i], s[done]),
            kk[done, i] * d1[i], False)
    src = np.concatenate([p[0] for p in pieces])
    dst = np.concatenate([p[1] for p in pieces])
    rate = np.concatenate([p[2] for p in pieces])
    up = np.concatenate([np.full(p[0].shape[0], p[3]) for p in pieces])
    return src, dst, rate, up


def _composition_array(m: int, K: int) -> np.ndarray:
    """:func:`solvers.decomposition.stations.compositions` as rows, in its order (the first
    count from ``m`` down, the rest likewise): two phases by one ``arange`` instead of the
    recursion's tuples (a cold open search builds ``c + 1`` of them for each bursty tier)."""
    if K == 2:
        first = np.arange(m, -1, -1, dtype=np.int64)
        return np.column_stack((first, m - first))
    return np.array(compositions(m, K), dtype=np.int64).reshape(-1, K)
