"""A bursty multi-core tier behind a pool whose next start phase is read off the job that
started last: the station of :func:`solvers.pools_bursty`'s held chain for ``2..`` cores.

The physical tier (:mod:`solvers.simulation.physical`) serves one MAP interval sequence in the
order services start: job ``k`` takes interval ``k``, which runs from phase ``phi_k`` to the
``D1`` event that leaves the MAP in ``phi_{k+1}``, the phase job ``k + 1`` starts in. So the
next start phase is *the end phase of the job that started last*: a job that turns slow during
its service (a fast phase switching to a slow one) starts the slow run of the jobs after it.
The per-job station of the MAP network's decomposition
(:func:`solvers.decomposition.stations.per_job_transitions`) draws the next start phase from the
embedded chain ``P = (-D0)^{-1} D1`` when a job starts, apart from the job's own path: the job that
turns slow and the slow run it begins fall apart in time, the slow services spread out, and a
pool in front of the tier fills less often than on the physical tier (the held chain's
throughput 0.7-1.7% high against the physical system's exact chain).

Exactly, each job in service would carry its end phase too -- the interval from ``x`` to the
end phase ``j`` is the MAP's path conditioned on ``j`` (the h-transform of Doob (1957), with
``h_j(x) = P[x, j]``: ``D0[x, y] P[y, j] / P[x, j]`` between phases, ``D1[x, j] / P[x, j]`` to
the end) -- ``K^2`` job types instead of ``K``, too many states for the held chain of a pool of
a few dozen (an 8-core tier behind 6 tokens: 840 states on levels 0..6 against 98 here, a solve
at 150 users 246 s against 0.9 s, the throughput 0.2% lower). Here the job that started last
keeps its phase apart from the others', and when the next job starts its start phase is drawn
from ``P[x, .]`` with ``x`` the phase the last one is in *then* (or is its end phase, if it has
completed); the last job then joins the others with its phase and forgets the end phase drawn
for it. State ``(n, k, z)``: ``n`` jobs, ``k_i`` of the jobs in service but the last started
one in phase ``i``, and ``z < K`` the last started job's phase while it is in service, or ``z =
K + e`` once it has completed in phase ``e`` (the next job starts in ``e``). Kept exactly:
every job's service law, the start-phase chain (``P[x, .]`` is a martingale along a job's path,
so the drawn phase has the embedded chain's law), and the coupling of the next start phase with
the last job's path up to that start -- all of it for one core, where the station is the MAP
serving in order, and nearly all of it where jobs start further apart than a fast phase turns
slow (a service of the slow run's first job is then mostly slow before the next starts). Lost:
the coupling of the path after the next start (the last job's drawn end phase forgotten).
Checked against the exact chain of the physical system (tests/test_pools_station.py) and the
simulator (docs/accuracy.md section 20).
"""

from __future__ import annotations

from math import comb

import numpy as np

from solvers.decomposition.stations import Transitions, compositions
from solvers.processes import MAP

__all__ = ["last_start_station", "last_start_states"]


def _states_at(n: int, K: int, cores: int):
    """The ``(z, others)`` of level ``n``'s states (module docstring): ``z < K`` the last
    started job in service in phase ``z`` beside ``others`` jobs, ``z >= K`` it completed
    (only while a core is free)."""
    busy = min(n, cores)
    for z in range(2 * K):
        others = busy - 1 if z < K else busy
        if others < 0 or (z >= K and n >= cores):      # every core busy: the last start is
            continue                                    # among them (it left one free)
        yield z, others


def last_start_states(levels: int, order: int, cores: int) -> int:
    """The number of states of :func:`last_start_station` on levels ``0..levels`` for a MAP
    of ``order`` phases, counted without building the station: per level and ``z``, the
    ``C(others + order - 1, order - 1)`` ways to put ``others`` jobs in ``order`` phases. A
    caller weighing the chain's size against its budget asks this first: the station of a
    many-phase mixture on a few cores has millions of transitions."""
    return sum(comb(others + order - 1, order - 1)
               for n in range(int(levels) + 1) for _, others in _states_at(n, int(order),
                                                                         int(cores)))


def last_start_station(levels: int, proc: MAP, cores: int) -> Transitions:
    """Tier ``b``'s chain on levels ``0..levels`` (jobs at the tier) with ``cores`` cores and
    the MAP ``proc`` served in start order (module docstring), arrivals at rate 1; states
    ordered by level. Raises ``ValueError`` naming the argument on bad input."""
    if not (isinstance(cores, (int, np.integer)) and cores >= 1):
        raise ValueError(f"cores: must be a whole number >= 1, got {cores!r}")
    if not (isinstance(levels, (int, np.integer)) and levels >= 0):
        raise ValueError(f"levels: must be a whole number >= 0, got {levels!r}")
    K = proc.order
    D0 = np.asarray(proc.D0, dtype=float)
    D1 = np.asarray(proc.D1, dtype=float)
    P = np.linalg.solve(-D0, D1)
    d1 = D1.sum(axis=1)
    index: dict[tuple[int, tuple[int, ...], int], int] = {}
    level: list[int] = []
    for n in range(levels + 1):
        for z, others in _states_at(n, K, cores):
            for k in compositions(others, K):
                index[(n, k, z)] = len(level)
                level.append(n)
    src: list[int] = []
    dst: list[int] = []
    rate: list[float] = []
    up: list[bool] = []
    exit_rate = np.zeros(len(level))

    def add(a: int, to: tuple[int, tuple[int, ...], int], r: float, arrival: bool = False
            ) -> None:
        if r > 0:
            src.append(a)
            dst.append(index[to])
            rate.append(float(r))
            up.append(arrival)

    def bump(k: tuple[int, ...], i: int, by: int) -> tuple[int, ...]:
        return k[:i] + (k[i] + by,) + k[i + 1:]

    def start(n: int, k: tuple[int, ...], z: int) -> list[tuple[tuple[int, ...], int, float]]:
        """A job starts with ``k`` the others and ``z`` the last start's: the new ``(k, z)``
        with their probabilities."""
        if z >= K:
            return [(k, z - K, 1.0)]
        return [(bump(k, z, 1), j, float(P[z, j])) for j in range(K) if P[z, j] > 0]

    for (n, k, z), here in index.items():
        if n < levels:                                   # an arrival
            if n < cores:
                for k2, z2, w in start(n, k, z):
                    add(here, (n + 1, k2, z2), w, True)
            else:
                add(here, (n + 1, k, z), 1.0, True)
        for i in range(K):                               # the others' phases and completions
            if k[i] == 0:
                continue
            for j in range(K):
                if j != i and D0[i, j] > 0:
                    add(here, (n, bump(bump(k, i, -1), j, 1), z), k[i] * D0[i, j])
            exit_rate[here] += k[i] * d1[i]
            rest = bump(k, i, -1)
            if n > cores:                                # a waiting job starts
                for k2, z2, w in start(n - 1, rest, z):
                    add(here, (n - 1, k2, z2), k[i] * d1[i] * w)
            else:
                add(here, (n - 1, rest, z), k[i] * d1[i])
        if z < K:                                        # the last start's phase, completion
            for y in range(K):
                if y != z and D0[z, y] > 0:
                    add(here, (n, k, y), D0[z, y])
            exit_rate[here] += d1[z]
            for e in range(K):
                if D1[z, e] <= 0:
                    continue
                if n > cores:                            # the next starts in e at once
                    add(here, (n - 1, k, e), D1[z, e])
                else:
                    add(here, (n - 1, k, K + e), D1[z, e])
    lev = np.array(level, dtype=np.int64)
    prior = np.zeros(lev.shape[0])
    return Transitions(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
                       np.array(rate), np.array(up, dtype=bool), lev, exit_rate, prior)
