"""How a bursty tier is modelled: the transitions of its chain on ``(n, phases)``.

* **one core**: the MAP runs while the tier is busy, its phase frozen while idle -- exactly the
  tier serving its sequence in order (:mod:`solvers.mapqn`'s station, :func:`speed_scaled`);
* **2..PER_JOB_MAX_CORES cores: per-job phases** (:func:`per_job_transitions`, "count the jobs in
  service per phase"): each job in service carries its own phase from the one it started in, so it
  keeps its own speed; start phases follow the MAP's embedded chain ``P = (-D0)^{-1} D1``, so
  a run of slow values reaches the cores one start at a time, as on the physical tier. One
  MAP at speed ``min(n, c)`` instead slows every busy core at a phase change, which is
  pessimistic against a simulation of the physical tier (:mod:`solvers.simulation.physical`;
  docs/accuracy.md). Per-job states grow as ``(c + 1) K`` a level, a banded LU's storage as
  levels times their square and its time as levels times their cube, so the per-job station
  is kept while its band stays within :data:`PER_JOB_MAX_BYTES` (:func:`per_job_affordable`).
  Past :data:`PHASE_COUNT_BINS` busy cores a level keeps the count of jobs in phase 2 on a
  grid of ``PHASE_COUNT_BINS + 1`` counts (:func:`phase_counts`, two-phase MAPs): a move of one job
  between phases reaches the neighbouring grid point ``g`` counts away at ``1/g`` of its rate,
  so the expected count and every completion rate are kept and only the count's spread
  widens; a level then has at most ``2 (PHASE_COUNT_BINS + 1)`` states whatever the cores;
* **more cores, or a per-job chain over its budget**: one MAP at speed ``min(n, c)``
  (:func:`speed_scaled`); flagged, pessimistic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from solvers.decomposition.memo import Memo
from solvers.processes import MAP


#: by default a bursty tier with more cores than this is modelled as one MAP at speed min(n, c)
#: (flagged): the per-job model's states per level grow as (c + 1) K (up to 33 K with the
#: grid of :data:`PHASE_COUNT_BINS`, two phases). ``solve_decomposed``'s
#: ``per_job_max_cores`` lowers it (64 cores: the most checked against the simulated physical
#: system, docs/accuracy.md)
PER_JOB_MAX_CORES = 64
#: the per-job chain is solved while its banded LU's storage (levels x d x (3d + 3) doubles,
#: ``d`` states a level) stays within this many bytes; beyond, the speed-scaled station,
#: flagged (:func:`per_job_affordable`). A 16-core tier (34 states a level, 28.6 kB a level)
#: stays per-job up to ~9,400 levels, a 32-64-core one (66 on the grid of PHASE_COUNT_BINS,
#: 106 kB) ~2,500 (every count resolved, a 64-core one's 130 states, 409 kB: ~650); the LU's
#: time grows as levels x d^3 (a 64-core chain at 478 levels: 0.1-0.4 s, 0.09 s on the grid)
PER_JOB_MAX_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Transitions:
    """Off-diagonal rates of a bursty tier's chain: ``Q[src, dst] += rate``; per state its
    level ``n``, its completion rate and ``prior``, the log-likelihood of its phases within
    its level (where to anchor the linear solve, :func:`_anchor`). Arrival transitions
    (``up``) carry rate 1 here; :func:`_with_arrivals` sets ``lam[n]``."""

    src: np.ndarray
    dst: np.ndarray
    rate: np.ndarray
    up: np.ndarray
    level: np.ndarray
    exit: np.ndarray
    prior: np.ndarray

    def with_arrivals(self, lam: np.ndarray) -> np.ndarray:
        """The rates with arrivals at ``lam[n]`` from level ``n``."""
        rate = self.rate.copy()
        rate[self.up] *= lam[self.level[self.src[self.up]]]
        return rate


def speed_scaled(N: int, proc: MAP, cores: int) -> Transitions:
    """One MAP shared by the cores at speed ``s = min(n, c)`` (:mod:`solvers.mapqn`'s station):
    state ``n K + phi``; arrivals ``(n, phi) -> (n+1, phi)``; hidden phase changes
    ``s D0[phi, phi']``; completions ``(n, phi) -> (n-1, phi')`` at ``s D1[phi, phi']``.
    Exact for one core: the tier runs its service sequence in order."""
    K = proc.order
    n = np.repeat(np.arange(N + 1), K)
    phi = np.tile(np.arange(K), N + 1)
    speed = np.minimum(n, cores).astype(float)
    state = n * K + phi
    parts = [(state[n < N], state[n < N] + K, np.ones(int((n < N).sum())))]
    for i in range(K):
        for j in range(K):
            at = phi == i
            if i != j and proc.D0[i, j] > 0:
                parts.append((state[at], state[at] + j - i, speed[at] * proc.D0[i, j]))
            down = at & (n > 0)
            if proc.D1[i, j] > 0:
                parts.append((state[down], state[down] - K + j - i, speed[down] * proc.D1[i, j]))
    src, dst, rate = (np.concatenate(x) for x in zip(*parts))
    up = np.zeros(src.shape[0], dtype=bool)
    up[: int((n < N).sum())] = True
    with np.errstate(divide="ignore"):
        prior = np.log(proc.theta)[phi]
    return Transitions(src, dst, rate, up, n, speed * proc.D1.sum(axis=1)[phi], prior)


def compositions(m: int, K: int) -> list[tuple[int, ...]]:
    """Every ``k`` in ``N^K`` with ``sum(k) = m``."""
    if K == 1:
        return [(m,)]
    return [(first,) + rest for first in range(m, -1, -1)
            for rest in compositions(m - first, K - 1)]


#: a two-phase per-job station resolves the count of in-service jobs in phase 2 exactly up to
#: this many busy cores; beyond, on a grid of ``PHASE_COUNT_BINS + 1`` counts (:func:`phase_counts`)
PHASE_COUNT_BINS = 32


def phase_counts(m: int, K: int) -> list[tuple[int, ...]]:
    """The phase counts a level with ``m`` jobs in service resolves: every composition
    (:func:`compositions`), or for ``K = 2`` and ``m >`` :data:`PHASE_COUNT_BINS` the
    compositions ``(m - g, g)`` with ``g`` on the grid ``round(j m / B)``, ``j = 0..B``."""
    if K != 2 or m <= PHASE_COUNT_BINS:
        return compositions(m, K)
    grid = [round(j * m / PHASE_COUNT_BINS) for j in range(PHASE_COUNT_BINS + 1)]
    return [(m - g, g) for g in grid]


def _spread(k: tuple[int, ...], where: dict[tuple[int, ...], int],
            counts: list[tuple[int, ...]]) -> list[tuple[tuple[int, ...], float]]:
    """An exact phase count ``k`` as the resolved counts it lands on, with weights: itself,
    or (binned, :func:`phase_counts`) the two grid points around its count in phase 2, linearly
    (the expected count is kept: a move of one job between phases reaches the next grid
    point ``g`` apart at ``1/g`` of its rate and otherwise keeps the count)."""
    if k in where:
        return [(k, 1.0)]
    g = k[1]
    hi = next(c for c in counts if c[1] > g)
    lo = counts[counts.index(hi) - 1]
    w = (g - lo[1]) / (hi[1] - lo[1])
    return [(lo, 1.0 - w), (hi, w)]


def _log_multinomial(k: tuple[int, ...], log_p: np.ndarray) -> float:
    terms = [ki * lp for ki, lp in zip(k, log_p) if ki > 0]
    return float(gammaln(sum(k) + 1) - sum(gammaln(ki + 1) for ki in k) + sum(terms))


def per_job_transitions(N: int, proc: MAP, cores: int, heads: Memo | None = None) -> Transitions:
    """Each job in service carries its own phase ("count the jobs in service per phase").

    State ``(n, k, s)``: ``n`` jobs, ``k_i`` of the ``min(n, c)`` jobs in service in phase
    ``i``, ``s`` the phase the next job to start begins in. A job's service is the MAP's
    interval from its start phase (phase type ``(e_s, D0)``, completing at ``D1 1``); start
    phases follow the MAP's embedded chain ``P = (-D0)^{-1} D1``, so a run of slow services
    in the tier's sequence reaches the cores one job at a time, as on the physical tier, and a
    job already in service keeps its own speed. The MAP's coupling of an interval's length with
    the next start phase is not kept (exact marginals and start-phase chain). The transitions
    out of levels ``0..c+1`` (:func:`_per_job_head`) are those of every chain with more
    levels; the levels above repeat level ``c + 1``'s (kept in ``heads``, if given)."""
    K = proc.order
    comps = [phase_counts(m, K) for m in range(cores + 1)]
    size = [len(c) * K for c in comps]
    start = np.zeros(N + 2, dtype=np.int64)
    for n in range(N + 1):
        start[n + 1] = start[n] + size[min(n, cores)]
    with np.errstate(divide="ignore"):
        log_theta, log_start = np.log(proc.theta), np.log(proc.embedded)
    prior_of = [np.array([_log_multinomial(k, log_theta) + log_start[s] for k in c
                          for s in range(K)]) for c in comps]
    level = np.repeat(np.arange(N + 1), np.diff(start))
    exit_rate = np.zeros(int(start[-1]))
    prior = np.concatenate([prior_of[min(n, cores)] for n in range(min(N, cores) + 1)]
                           + [np.tile(prior_of[cores], max(N - cores, 0))])
    full = min(N, cores + 1)            # levels above it repeat level cores + 1's pattern
    src_a, dst_a, rate_a, up_a, head_exit = _per_job_head(N, proc, cores, heads)
    exit_rate[: head_exit.shape[0]] = head_exit
    if N > full:                        # tile level `full`'s pattern over the higher levels
        lo, hi = start[full], start[full + 1]
        from_full = (src_a >= lo) & (src_a < hi)
        shifts = np.arange(1, N - full + 1) * (hi - lo)
        tile_src = (src_a[from_full][None, :] + shifts[:, None]).ravel()
        tile_dst = (dst_a[from_full][None, :] + shifts[:, None]).ravel()
        tile_up = np.tile(up_a[from_full], (N - full, 1))
        keep = np.ones_like(tile_up)
        keep[-1] = ~up_a[from_full]                        # no arrival from level N
        keep = keep.ravel()
        src_a = np.concatenate([src_a, tile_src[keep]])
        dst_a = np.concatenate([dst_a, tile_dst[keep]])
        rate_a = np.concatenate([rate_a, np.tile(rate_a[from_full], N - full)[keep]])
        up_a = np.concatenate([up_a, tile_up.ravel()[keep]])
        exit_rate[hi:] = np.tile(exit_rate[lo:hi], N - full)
    return Transitions(src_a, dst_a, rate_a, up_a, level, exit_rate, prior)


def _per_job_head(N: int, proc: MAP, cores: int,
                  heads: Memo | None) -> tuple[np.ndarray, ...]:
    """:func:`per_job_transitions`'s transitions ``(src, dst, rate, up)`` out of levels
    ``0..min(N, c + 1)`` and those levels' completion rates, built state by state; for
    ``N > c + 1`` they do not depend on ``N`` and are kept in ``heads``
    (:class:`SolveMemo`), if given."""
    if N <= cores + 1 or heads is None:
        return per_job_states(min(N, cores + 2), proc, cores)
    key = (cores, PHASE_COUNT_BINS, proc.D0.tobytes(), proc.D1.tobytes())
    held = heads.get(key)
    return held if held is not None else heads.put(key, per_job_states(cores + 2, proc, cores))


def per_job_states(N: int, proc: MAP, cores: int) -> tuple[np.ndarray, ...]:
    """:func:`_per_job_head` state by state (module notes of :func:`per_job_transitions`)."""
    K = proc.order
    P = np.linalg.solve(-proc.D0, proc.D1)
    d1 = proc.D1.sum(axis=1)
    comps = [phase_counts(m, K) for m in range(cores + 1)]
    where = [{k: i for i, k in enumerate(c)} for c in comps]
    size = [len(c) * K for c in comps]
    full = min(N, cores + 1)
    start = np.zeros(full + 3, dtype=np.int64)
    for n in range(full + 2):
        start[n + 1] = start[n] + size[min(n, cores)]

    def index(n: int, k: tuple[int, ...], s: int) -> int:
        return int(start[n] + where[min(n, cores)][k] * K + s)

    def spread(n: int, k: tuple[int, ...]) -> list[tuple[tuple[int, ...], float]]:
        m = min(n, cores)
        return _spread(k, where[m], comps[m])

    src: list[int] = []
    dst: list[int] = []
    rate: list[float] = []
    up: list[bool] = []
    exit_rate = np.zeros(int(start[full + 1]))

    def add(a: int, b: int, r: float, arrival: bool = False) -> None:
        if r > 0:
            src.append(a)
            dst.append(b)
            rate.append(r)
            up.append(arrival)

    def bump(k: tuple[int, ...], i: int, by: int) -> tuple[int, ...]:
        return k[:i] + (k[i] + by,) + k[i + 1:]

    for n in range(full + 1):
        for k in comps[min(n, cores)]:
            for s in range(K):
                here = index(n, k, s)
                exit_rate[here] = float(np.dot(k, d1))
                if n < N:
                    if n < cores:
                        for to, w in spread(n + 1, bump(k, s, 1)):
                            for t in range(K):
                                add(here, index(n + 1, to, t), w * P[s, t], True)
                    else:
                        add(here, index(n + 1, k, s), 1.0, True)
                for i in range(K):
                    if k[i] == 0:
                        continue
                    for j in range(K):
                        if j != i:
                            for to, w in spread(n, bump(bump(k, i, -1), j, 1)):
                                if to != k:               # a binned move may keep the count
                                    add(here, index(n, to, s), w * k[i] * proc.D0[i, j])
                    if n > cores:
                        for to, w in spread(n - 1, bump(bump(k, i, -1), s, 1)):
                            for t in range(K):
                                add(here, index(n - 1, to, t), w * k[i] * d1[i] * P[s, t])
                    else:
                        for to, w in spread(n - 1, bump(k, i, -1)):
                            add(here, index(n - 1, to, s), w * k[i] * d1[i])
    out = (np.array(src), np.array(dst), np.array(rate), np.array(up), exit_rate)
    for arr in out:
        arr.setflags(write=False)
    return out


def per_job_applies(proc: MAP, cores: int, max_cores: int) -> bool:
    """Per-job phases on a bursty multi-core tier (up to ``max_cores`` cores); one MAP at
    speed ``min(n, c)`` otherwise."""
    return 1 < cores <= max_cores and proc.order > 1


def level_states(proc: MAP, busy: int) -> int:
    """States of a per-job chain's level with ``busy`` jobs in service: their phase counts
    (:func:`phase_counts`: ``C(busy + K - 1, K - 1)`` compositions, or a grid of them) times the
    next job's start phase (``K``)."""
    return len(phase_counts(busy, proc.order)) * proc.order


def departure_phases(proc: MAP, cores: int) -> int:
    """Phases of a per-job chain's lumped departure process: the states of its levels
    ``0..c + 1`` (:func:`solvers.departures.lumping`)."""
    return sum(level_states(proc, min(n, cores)) for n in range(cores + 2))


def per_job_affordable(proc: MAP, cores: int, levels: int) -> bool:
    """Whether the per-job chain on ``levels`` levels is within :data:`PER_JOB_MAX_BYTES`:
    ``d`` states a level once every core is busy (:func:`level_states`), and the band of
    ``Q^T`` (arrivals about ``d`` indices below the diagonal, completions ``d + K`` above; LAPACK
    stores ``2 l + u + 1`` rows) about ``3 d + 3`` doubles a state."""
    d = level_states(proc, cores)
    return levels * d * (3 * d + 3) * 8 <= PER_JOB_MAX_BYTES


#: levels of a bursty tier's chain solved first (a longer per-job chain: :func:`first_levels`);
#: grown while the top tenth holds more than TRUNCATION_MASS of the probability
