"""Open multi-class tiers in series: each tier an open FCFS multi-server queue.

Requests of class ``c`` arrive at ``lambda_c`` per second and visit tier ``m`` ``v_{m,c}``
times (default once), each visit taking ``S_{m,c}`` seconds of service. A tier sees the
total rate ``Lambda_m = sum_c lambda_c v_{m,c}`` and the visit-weighted mean service
``S_m = sum_c lambda_c v_{m,c} S_{m,c} / Lambda_m``; it is solved as one queue
(:mod:`solvers.open.queues`): M/M/c by Erlang C, M/MAP/c matrix-geometrically when the tier's
service process is a MAP (its shape scaled to mean ``S_m``), MAP/M/c when the arrivals are a
MAP. FCFS makes the mean wait ``W_m`` the same for every class, so::

    R_{m,c} = v_{m,c} (S_{m,c} + W_m),     R_c = sum_m R_{m,c}.

A processor-sharing tier (``ps``) stretches each class's service by one factor instead,
``R_{m,c} = v_{m,c} S_{m,c} (1 + W_m / S_m)`` (:func:`ps_residence`).

Each tier is taken as fed by Poisson arrivals (Jackson 1963: exact for exponential tiers in
series); with ``arrivals`` a MAP, every exponential tier is taken as fed that MAP (an MMPP's
long bursts pass through a stable tier nearly unchanged), and a bursty tier as fed Poisson
arrivals (flagged); :func:`solvers.open.fixed_population.solve_open_waves` feeds the tiers
after a bursty one its departure process instead. A tier with ``Lambda_m S_m >= c_m`` is
saturated: the result is flagged (``stable = False``, ``saturated_tiers``) and every class
visiting it gets ``inf``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from solvers.decomposition.stations import PER_JOB_MAX_CORES
from solvers.open.queues import TierQueue, m_map_c, map_m_c, mm_c
from solvers.processes import MAP
from solvers.results import as_demands, as_rates, check_no_nan

__all__ = ["OpenTiersResult", "ps_residence", "solve_open_tiers", "tiers_capacity"]


@dataclass(frozen=True, eq=False)
class OpenTiersResult:
    """``throughput`` ``X_c = lambda_c`` and ``response_time`` ``R_c`` (``(C,)``),
    ``residence_time`` ``R_{m,c}`` (``(M, C)``), per tier ``wait`` ``W_m``, ``queue_length``
    (mean jobs), ``utilization`` ``rho_m`` (offered, per core) and ``stations`` (how each tier
    was solved); ``stable`` and ``saturated_tiers`` flag saturation (``inf``, never NaN)."""

    throughput: np.ndarray
    response_time: np.ndarray
    residence_time: np.ndarray
    wait: np.ndarray
    queue_length: np.ndarray
    utilization: np.ndarray
    stations: tuple[str, ...]
    stable: bool
    saturated_tiers: tuple[int, ...] = ()
    flags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total_response_time(self) -> float:
        """Mean response time over all requests, ``sum_c lambda_c R_c / sum_c lambda_c``."""
        lam = self.throughput
        if lam.sum() <= 0:
            return float(self.response_time.mean())
        hit = lam > 0
        return float(lam[hit] @ self.response_time[hit] / lam[hit].sum())


def _check_cores(cores: Any, M: int) -> list[int]:
    try:
        items = list(np.atleast_1d(np.asarray(cores)))
    except TypeError:
        raise ValueError(f"cores: must be {M} positive integers, got {cores!r}") from None
    if len(items) != M:
        raise ValueError(f"cores: need {M} values (one per tier), got {cores!r}")
    out = []
    for v in items:
        if isinstance(v, (bool, np.bool_)) or not float(v).is_integer() or v < 1:
            raise ValueError(f"cores: must be positive integers, got {cores!r}")
        out.append(int(v))
    return out


def _check_processes(processes: Any, M: int) -> list[MAP | None]:
    if processes is None:
        return [None] * M
    items = list(processes)
    if len(items) != M:
        raise ValueError(f"processes: need {M} entries (a MAP or None per tier), got "
                         f"{len(items)}")
    for i, p in enumerate(items):
        if p is not None and not isinstance(p, MAP):
            raise ValueError(f"processes[{i}]: must be a MAP or None, got {p!r}")
    return items


def solve_open_tiers(arrival_rates: Any, service_times: Any, cores: Any, *,
                     processes: Sequence[MAP | None] | None = None,
                     visits: Any = None, arrivals: MAP | None = None,
                     per_job_max_cores: int = PER_JOB_MAX_CORES,
                     ps: Any = None, coupled: bool | str = False) -> OpenTiersResult:
    """Solve open tiers in series (module docstring).

    Parameters
    ----------
    arrival_rates: ``lambda_c``, requests/s per class (>= 0; a scalar is one class).
    service_times: ``S_{m,c}``, seconds per visit (tiers x classes).
    cores: ``c_m`` per tier.
    processes: per tier a MAP (its shape: scaled to the tier's mean service) or ``None``
        (exponential).
    visits: ``v_{m,c}`` (default 1).
    arrivals: the shape of the arrival process (scaled to ``sum_c lambda_c``), default Poisson.
    ps: per tier, whether it shares its cores (processor sharing; default none): there
        ``R_{m,c} = v_{m,c} S_{m,c} (1 + W_m / S_m)`` instead of FCFS's shared wait.
    coupled: a bursty tier's per-job chain with each job's end phase tied to the next start
        (:func:`solvers.open.queues.end_phase_map`; ``K^2`` phases, slower), or
        :data:`solvers.open.queues.TWO_CORE`: its effect read off 2 cores (cheap).
    """
    lam = as_rates(arrival_rates, "arrival_rates")
    S = as_demands(service_times, n_classes=lam.shape[0], name="service_times")
    M, C = S.shape
    if lam.shape[0] != C:
        raise ValueError(f"arrival_rates: need {C} values (one per class), got {lam.shape[0]}")
    V = np.ones((M, C)) if visits is None else as_demands(visits, n_classes=C, name="visits")
    if V.shape != S.shape:
        raise ValueError(f"visits: need shape {S.shape}, got {V.shape}")
    cs = _check_cores(cores, M)
    procs = _check_processes(processes, M)
    if arrivals is not None and not isinstance(arrivals, MAP):
        raise ValueError(f"arrivals: must be a MAP or None, got {arrivals!r}")
    flags: list[str] = []
    queues: list[TierQueue] = []
    for m in range(M):
        rate = float(lam @ V[m])
        weights = lam * V[m] if rate > 0 else V[m]
        if weights.sum() <= 0 or not np.any(S[m] > 0):
            queues.append(TierQueue(0.0, 0.0, 0.0, "unvisited", 0, True))
            continue
        mean = float(weights @ S[m] / weights.sum())
        if mean <= 0:
            queues.append(TierQueue(0.0, 0.0, 0.0, "no service", 0, True))
            continue
        proc = procs[m]
        if proc is not None and proc.order > 1:
            # the process itself when it has the mean already (``lambda S / lambda`` may
            # differ from ``S`` in the last bit: a new key for the per-job patterns' memo)
            shape = proc if math.isclose(proc.mean, mean, rel_tol=1e-12) else proc.scaled(mean)
            q = m_map_c(rate, shape, cs[m], per_job_max_cores=per_job_max_cores,
                        coupled=coupled)
            if arrivals is not None and arrivals.order > 1:
                flags.append(f"tier {m}: bursty service with bursty arrivals, solved with "
                             f"Poisson arrivals")
        elif arrivals is not None and arrivals.order > 1 and rate > 0:
            q = map_m_c(arrivals.scaled(1.0 / rate), mean, cs[m])
        else:
            q = mm_c(rate, mean, cs[m])
        if q.station.startswith("speed-scaled ("):
            flags.append(f"tier {m}: {q.station}: pessimistic")
        queues.append(q)
    wait = np.array([q.wait for q in queues])
    jobs = np.array([q.jobs for q in queues])
    stations = [q.station for q in queues]
    saturated = tuple(m for m, q in enumerate(queues) if not q.stable)
    visited = (V > 0) & (S > 0)
    Rmc = np.where(visited, V * (S + np.where(np.isinf(wait), 0.0, wait)[:, None]), 0.0)
    if ps is not None:
        Rmc = ps_residence(Rmc, ps, wait, lam, S, V, visited)
    for m in saturated:
        Rmc[m, visited[m]] = math.inf
    if saturated:
        flags.append(f"saturated tiers {list(saturated)} (utilization >= 1): capacity "
                     f"exceeded, response times of classes visiting them are inf")
    R = Rmc.sum(axis=0)
    util = np.array([q.utilization for q in queues])
    check_no_nan(residence_time=Rmc, wait=wait, queue_length=jobs)
    return OpenTiersResult(throughput=lam.copy(), response_time=R, residence_time=Rmc,
                           wait=wait, queue_length=jobs, utilization=util,
                           stations=tuple(stations), stable=not saturated,
                           saturated_tiers=saturated, flags=tuple(flags))


def ps_residence(Rmc: np.ndarray, ps: Any, wait: np.ndarray, lam: np.ndarray, S: np.ndarray,
                  V: np.ndarray, visited: np.ndarray) -> np.ndarray:
    """The residence times with the processor-sharing tiers' own: a multi-server PS tier
    (each of ``n`` requests served at ``min(1, c / n)``) is a symmetric queue (Kelly 1979),
    its count M/M/c's whatever the classes' work, the classes present in proportion to their
    loads, so by Little's law each class is stretched by one factor, ``R_{m,c} = v_{m,c}
    S_{m,c} (1 + W_m / S_m)`` -- ``S_{m,c} / (1 - rho)`` on one core (Kleinrock 1976, ch. 4)."""
    flags = np.asarray(ps, dtype=bool).reshape(-1)
    if flags.shape[0] != S.shape[0]:
        raise ValueError(f"ps: one flag per tier ({S.shape[0]}), got {flags.shape[0]}")
    out = Rmc.copy()
    for m in np.flatnonzero(flags):
        weights = lam * V[m] if lam @ V[m] > 0 else V[m]
        mean = float(weights @ S[m] / weights.sum()) if weights.sum() > 0 else 0.0
        if mean > 0 and math.isfinite(wait[m]):
            out[m] = np.where(visited[m], V[m] * S[m] * (1.0 + wait[m] / mean), 0.0)
    return out


def tiers_capacity(mix: Any, service_times: Any, cores: Any, visits: Any = None) -> float:
    """Saturation throughput at the class mix ``mix``: the largest total rate ``x`` with
    ``x sum_c mix_c v_{m,c} S_{m,c} < c_m`` at every tier (the utilization law)."""
    w = as_rates(mix, "mix")
    if w.sum() <= 0:
        raise ValueError(f"mix: must have a positive total, got {mix!r}")
    w = w / w.sum()
    S = as_demands(service_times, n_classes=w.shape[0], name="service_times")
    V = np.ones(S.shape) if visits is None else as_demands(visits, n_classes=w.shape[0],
                                                           name="visits")
    cs = np.array(_check_cores(cores, S.shape[0]), dtype=float)
    load = (V * S) @ w
    hit = load > 0
    return float(np.min(cs[hit] / load[hit])) if hit.any() else math.inf
