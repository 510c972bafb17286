"""One open multi-server FCFS tier: exponential, bursty (MAP service) or fed bursty arrivals.

* **M/M/c** (exponential service, Poisson arrivals): Erlang C exactly,
  ``W = C(c, a) S / (c (1 - rho))`` (Erlang 1917; Kleinrock 1975, Sec. 3.5).
* **M/MAP/c** (Poisson arrivals, service by a MAP): the tier's chain on ``(n, phases)`` is the
  closed decomposition's (:mod:`solvers.decomposition.stations`) with a constant arrival rate:
  per-job phases for ``2..PER_JOB_MAX_CORES`` cores (each job in service keeps the phase it
  started in; start phases follow the MAP's embedded chain), one MAP frozen while idle for one
  core (exact), one MAP at speed ``min(n, c)`` beyond (flagged, pessimistic). Above ``c + 1``
  (one core: above 1) the levels repeat, so the chain is a QBD solved matrix-geometrically
  (Neuts 1981; Latouche and Ramaswami 1999; :mod:`solvers.open.qbd`) at a cost independent of
  the load.
* **Coupled start phases** (:func:`end_phase_map`): the per-job chain draws the next job's
  start phase from ``P`` when a job starts, apart from that job's own path, while a tier that
  serves the MAP's consecutive intervals (a job turning slow mid-service is followed by a
  slow start) ties them. The same intervals as a MAP on the phases ``(i, t)``, ``t`` the phase
  the interval will end in (Doob's h-transform, Doob 1957: ``h_t = (-D0)^{-1} D1 e_t``),
  carry that tie into the per-job chain exactly; ``K^2`` phases, so a
  bursty 8-core tier's levels grow from 18 to 660 states (``m_map_c(..., coupled=True)``).
  Where ``D0`` is diagonal (a job keeps its phase through its service, as in every MAP(2)
  :func:`estimators.mapfit.fit_map2` fits) the interval ends in the phase it started in, so
  the per-job chain already ties the next start to it: ``coupled`` solves the plain chain
  (the same waits, :func:`phase_kept`). ``coupled=TWO_CORE`` scales the plain chain's wait
  by what coupling does to the 2-core queue at the same load per core
  (:func:`coupling_ratio`): on paper000's bursty MAP (I ~ 200) that ratio is 1.093 / 1.095 /
  1.096 at 2 / 3 / 4 cores, 1.09-1.10 at 8, and moves by less than 0.4% from 30% to 90%
  busy, while the 8-core coupled chain costs seconds a solve and the 2-core one ~50 ms.
* **MAP/M/c** (arrivals by a MAP, e.g. an MMPP(2); exponential service): levels of arrival
  phases, repeating above ``c`` (Neuts 1981, Sec. 3.7 for the single-server case); same QBD
  solve.

Every queue reports ``W`` (mean wait before service, the same for every class under FCFS),
``E[n]`` and ``rho``; a saturated tier (``rho >= 1``, or a QBD whose drift is not negative)
gives ``stable = False`` with ``inf`` waits, never NaN and never an unbounded iteration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from solvers.decomposition.memo import Memo
from solvers.decomposition.stations import (PER_JOB_MAX_CORES, PHASE_COUNT_BINS, level_states,
                                            speed_scaled)
from solvers.open.patterns import per_job_transitions
from solvers.open.product_form import erlang_c
from solvers.open.qbd import QBDSolution, plan_qbd, solve_qbd
from solvers.processes import MAP

__all__ = ["TWO_CORE", "TierQueue", "coupling_ratio", "end_phase_map", "mm_c", "m_map_c",
           "map_m_c", "phase_kept"]

#: ``coupled=TWO_CORE``: the coupled chain's effect read off 2 cores (module docstring)
TWO_CORE = "two-core"

_PATTERNS = Memo(64)        # per-job transitions by (process, cores): independent of the load
_CHAINS = Memo(8)           # the last solved chains by (cores, process, rate): m_map_c_chain


@dataclass(frozen=True)
class TierQueue:
    """One tier's open queue: ``utilization`` ``rho = lambda S / c``, ``wait`` (mean time
    queued before service), ``jobs`` (mean number at the tier), ``station`` (how it was
    solved), ``states`` (states of the boundary levels solved), ``stable``."""

    utilization: float
    wait: float
    jobs: float
    station: str
    states: int
    stable: bool


def _check(rate: float, mean: float, cores: int) -> tuple[float, float, int]:
    lam, s = float(rate), float(mean)
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"arrival_rate: must be a finite number >= 0, got {rate!r}")
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"mean service: must be a finite number > 0, got {mean!r}")
    if isinstance(cores, bool) or int(cores) != cores or cores < 1:
        raise ValueError(f"cores: must be a positive integer, got {cores!r}")
    return lam, s, int(cores)


def _unstable(rho: float, station: str) -> TierQueue:
    return TierQueue(rho, math.inf, math.inf, station, 0, False)


def mm_c(arrival_rate: float, mean_service: float, cores: int) -> TierQueue:
    """M/M/c FCFS: ``W = C(c, a) S / (c (1 - rho))``, ``E[n] = lambda (W + S)``, ``a = lambda S``
    (Erlang C, :func:`solvers.open.product_form.erlang_c`)."""
    lam, s, c = _check(arrival_rate, mean_service, cores)
    a = lam * s
    rho = a / c
    if rho >= 1.0:
        return _unstable(rho, "erlang-c")
    w = erlang_c(c, a) * s / (c * (1.0 - rho)) if lam > 0 else 0.0
    return TierQueue(rho, w, lam * (w + s), "erlang-c", 0, True)


def _per_job_pattern(proc: MAP, cores: int) -> tuple[Any, ...]:
    key = (cores, proc.D0.tobytes(), proc.D1.tobytes())
    held = _PATTERNS.get(key)
    if held is None:
        src, dst, rate, up = per_job_transitions(proc, cores)
        sizes = [_states_of_level(proc, min(n, cores)) for n in range(cores + 3)]
        starts = np.concatenate(([0], np.cumsum(sizes)))
        held = _PATTERNS.put(key, (src, dst, rate, up, starts,
                                   plan_qbd(src, dst, starts, cores + 1)))
    return held


def _states_of_level(proc: MAP, busy: int) -> int:
    """:func:`solvers.decomposition.stations.level_states` without listing the phase
    counts where every composition is resolved: ``C(busy + K - 1, K - 1)`` of them, times
    ``K`` start phases."""
    K = proc.order
    if K != 2 or busy <= PHASE_COUNT_BINS:
        return math.comb(busy + K - 1, K - 1) * K
    return level_states(proc, busy)


def _speed_scaled_pattern(proc: MAP, cores: int) -> tuple[Any, ...]:
    key = ("speed-scaled", cores, proc.D0.tobytes(), proc.D1.tobytes())
    held = _PATTERNS.get(key)
    if held is None:
        tr = speed_scaled(cores + 2, proc, cores)
        starts = np.arange(cores + 4) * proc.order
        held = _PATTERNS.put(key, (tr.src, tr.dst, tr.rate, tr.up, starts,
                                   plan_qbd(tr.src, tr.dst, starts, cores)))
    return held


def m_map_c_chain(lam: float, process: MAP, cores: int, per_job_max_cores: int
                  ) -> tuple[QBDSolution | None, tuple[np.ndarray, ...], np.ndarray, int]:
    """The M/MAP/c queue's chain (:func:`m_map_c`, ``lam > 0``) solved: the QBD's solution
    (``None`` when not stable), its transitions ``(src, dst, rate, up)`` (``up``: an arrival,
    its rate a factor of ``lam``), the levels' first states and the first repeating level.
    The chain's pattern and its :class:`solvers.open.qbd.QBDPlan` are held by process and
    cores (they do not depend on the rate), the last few solves by rate too: the departure
    process of the tier (:func:`solvers.open.fixed_population.departure_process`) reads the
    chain the tier's queue was just solved on."""
    key = (cores, per_job_max_cores, float(lam), process.D0.tobytes(), process.D1.tobytes())
    held = _CHAINS.get(key)
    if held is not None:
        return held
    if 1 < cores <= per_job_max_cores:
        src, dst, rate, up, starts, plan = _per_job_pattern(process, cores)
        first = cores + 1
    else:
        src, dst, rate, up, starts, plan = _speed_scaled_pattern(process, cores)
        first = cores
    sol = solve_qbd(None, starts, first, plan=plan, rates=np.where(up, rate * lam, rate))
    return _CHAINS.put(key, (sol, (src, dst, rate, up), starts, first))


def end_phase_map(process: MAP) -> MAP:
    """The MAP of ``process``'s intervals on the phases ``(i, t)``: in phase ``i``, the
    interval to end in phase ``t`` (module docstring). With ``H = (-D0)^{-1} D1`` (``H[i, t]``:
    an interval from ``i`` ends in ``t``), ``(i, t) -> (j, t)`` at ``D0[i, j] H[j, t] / H[i, t]``,
    the diagonal ``D0``'s, and the interval ends at ``D1[i, t] / H[i, t]`` into ``(t, u)`` with
    probability ``H[t, u]``; phases with ``H[i, t] = 0`` are dropped. The interval sequence is
    ``process``'s (same moments and autocorrelations); its embedded chain ties the next start
    phase to the end the current interval takes."""
    K = process.order
    H = np.linalg.solve(-process.D0, process.D1)
    keep = [(i, t) for t in range(K) for i in range(K) if H[i, t] > 0]
    at = {it: n for n, it in enumerate(keep)}
    D0, D1 = np.zeros((len(keep), len(keep))), np.zeros((len(keep), len(keep)))
    for (i, t), a in at.items():
        D0[a, a] = process.D0[i, i]
        for j in range(K):
            if j != i and (j, t) in at:
                D0[a, at[(j, t)]] = process.D0[i, j] * H[j, t] / H[i, t]
        for u in range(K):
            if (t, u) in at:
                D1[a, at[(t, u)]] = process.D1[i, t] / H[i, t] * H[t, u]
    return MAP(D0, D1)


def phase_kept(process: MAP) -> bool:
    """Whether a job keeps its phase through its service (``D0`` diagonal): then the interval
    ends in the phase it started in and coupling the start phases changes nothing."""
    D0 = np.asarray(process.D0)
    return not np.any(D0 - np.diag(np.diag(D0)))


def coupling_ratio(process: MAP, rho: float) -> float:
    """The coupled 2-core queue's wait over the plain one's at ``rho`` busy per core
    (:func:`m_map_c`, the process at its own mean): the factor ``coupled=TWO_CORE`` puts on a
    many-core tier's plain wait (module docstring). 1 where :func:`phase_kept`, at ``rho <= 0``
    or where the 2-core queue does not solve stable."""
    if process.order == 1 or phase_kept(process) or not 0.0 < rho < 1.0:
        return 1.0
    lam = 2.0 * rho / process.mean
    plain = m_map_c(lam, process, 2, per_job_max_cores=2)
    tied = m_map_c(lam, process, 2, per_job_max_cores=2, coupled=True)
    if not (plain.stable and tied.stable and plain.wait > 0.0 and math.isfinite(tied.wait)):
        return 1.0
    return tied.wait / plain.wait


def m_map_c(arrival_rate: float, process: MAP, cores: int, *,
            per_job_max_cores: int = PER_JOB_MAX_CORES,
            coupled: bool | str = False) -> TierQueue:
    """M/MAP/c FCFS with the service process ``process`` (its own mean; scale it first), Poisson
    arrivals at ``arrival_rate``, solved as a QBD (module docstring); ``coupled``: the per-job
    chain on :func:`end_phase_map`'s phases (several cores only; the plain chain where
    :func:`phase_kept`), or :data:`TWO_CORE`: the plain chain's wait times
    :func:`coupling_ratio`."""
    if coupled not in (False, True, TWO_CORE):
        raise ValueError(f"coupled: must be True, False or {TWO_CORE!r}, got {coupled!r}")
    if coupled and isinstance(process, MAP) and process.order > 1 \
            and 1 < int(cores) <= per_job_max_cores and not phase_kept(process):
        if coupled == TWO_CORE and int(cores) > 2:
            q = m_map_c(arrival_rate, process, cores, per_job_max_cores=per_job_max_cores)
            if not q.stable or q.wait <= 0.0:
                return q
            wait = q.wait * coupling_ratio(process, q.utilization)
            return TierQueue(q.utilization, wait, float(arrival_rate) * (process.mean + wait),
                             q.station, q.states, True)
        process = end_phase_map(process)
    lam, s, c = _check(arrival_rate, process.mean if isinstance(process, MAP) else -1, cores)
    rho = lam * s / c
    if process.order == 1:
        return mm_c(lam, s, c)
    per_job = 1 < c <= per_job_max_cores
    station = "per-job" if per_job else "speed-scaled"
    if c > 1 and not per_job:
        station = "speed-scaled (cores above the per-job limit)"
    if rho >= 1.0:
        return _unstable(rho, station)
    if lam == 0.0:
        return TierQueue(0.0, 0.0, 0.0, station, 0, True)
    sol, _, starts, first = m_map_c_chain(lam, process, c, per_job_max_cores)
    if sol is None:
        return _unstable(rho, station)
    queued = sol.mean_excess(c)
    return TierQueue(rho, queued / lam, queued + lam * s, station, int(starts[first + 1]), True)


def map_m_c(arrivals: MAP, mean_service: float, cores: int) -> TierQueue:
    """MAP/M/c FCFS: arrivals by the MAP ``arrivals`` (its own rate; scale it first),
    exponential service of mean ``mean_service`` on ``cores`` servers; levels of arrival
    phases repeat above ``c`` (a QBD, module docstring). Poisson arrivals: :func:`mm_c`."""
    lam, s, c = _check(arrivals.rate if isinstance(arrivals, MAP) else -1, mean_service, cores)
    if arrivals.order == 1:
        return mm_c(lam, s, c)
    rho = lam * s / c
    if rho >= 1.0:
        return _unstable(rho, "map-arrivals")
    K = arrivals.order
    levels = c + 3
    off0 = arrivals.D0 - np.diag(np.diag(arrivals.D0))
    blocks = []
    for n in range(levels):
        row = [None] * levels
        row[n] = sparse.csr_matrix(off0)
        if n + 1 < levels:
            row[n + 1] = sparse.csr_matrix(arrivals.D1)
        if n > 0:
            row[n - 1] = sparse.identity(K) * (min(n, c) / s)
        blocks.append(row)
    Q = sparse.bmat(blocks, format="csr")
    Q.eliminate_zeros()
    starts = np.arange(levels + 1) * K
    sol = solve_qbd(Q, starts, c)
    if sol is None:
        return _unstable(rho, "map-arrivals")
    queued = sol.mean_excess(c)
    return TierQueue(rho, queued / lam, queued + lam * s, "map-arrivals",
                     int(starts[c + 1]), True)
