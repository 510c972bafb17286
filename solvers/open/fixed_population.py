"""A closed network of many users solved through its open counterpart: the fixed-population-mean
method (Whitt 1984).

``N`` users think ``Z`` seconds, then visit the tiers in order. With thousands of users the
think station holds almost all of them, so the tiers see nearly Poisson arrivals at the rate
``lambda`` the users produce, and the closed network behaves like the open one at that rate.
Whitt (1984) takes the open network at the rate whose *mean* population equals ``N``::

    N = lambda (Z + R(lambda)),        R(lambda) = sum_m R_m(lambda)

(Little's law over the whole cycle), ``R_m`` the open tier's residence time
(:func:`solvers.open.solve_open_tiers`: exponential tiers by Erlang C, a bursty tier as an
M/MAP/c queue solved matrix-geometrically, with the per-job station of the closed
decomposition). The exponential tiers after a bursty one, up to the next bursty tier, see the
waves it releases at the end of a slow run, not Poisson arrivals: as in the decomposition
(:mod:`solvers.decomposition.waves`) each is a ``MAP/M/c`` queue fed by the bursty tier's
departure process (:mod:`solvers.departures`), read here off the open queue's
matrix-geometric solution (the levels from the first repeating one ``L`` up lumped onto
``L``'s phases with their stationary weights: Kemeny and Snell 1960), through the capacity of
the tiers in between. A bursty tier those waves reach keeps its ``M/MAP/c`` wait and adds
what they add to an exponential tier's (``W_MAP/M/c - W_M/M/c``): the Allen-Cunneen form of
the ``GI/G/c`` wait is linear in the arrivals' and the service's variability (Allen 1990;
Whitt 1993). Fed Poisson arrivals, the database of docs/accuracy.md's large-population
network waited 11-20% too little from 2,000 users (the app's waves cross the cache at up to
its capacity, above the database's). ``lambda (Z + R(lambda))`` rises strictly from 0 to ``inf`` on
``[0, lambda_sat)``,
``lambda_sat = min_m c_m / S_m`` (the utilization law), so the equation has one root, found by
Brent's method (Brent 1973) on ``g(lambda) = 1 - 2 N / (lambda (Z + R) + N)``: ``-1`` at
``lambda = 0``, ``+1`` at and past saturation (where ``R`` is infinite), finite and increasing
in between, so a saturated probe never gives ``inf`` or NaN. The bracket's upper end is
``min(N / (Z + sum_m S_m), lambda_sat)`` (``R >= sum_m S_m``); its lower end
``N / (Z + R(upper))`` when ``upper`` is stable (``R`` increasing), else 0.

Every open solve costs the same whatever ``N`` (the bursty tiers' boundary levels and rate
matrices: a few hundred states for 16 cores), so the method costs a handful of solves (4-7 on
4 tiers) against
the decomposition's per-job chains, whose levels grow with ``N``. Its error shrinks as ``N``
grows (the fraction of users in the tiers, and the correlation a closed population forces on
them, vanish): where it is used is decided on the physical simulation (docs/accuracy.md,
"Large populations through the open route").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy.optimize import brentq

from solvers.decomposition.stations import PER_JOB_MAX_CORES, _speed_scaled
from solvers.departures import DepartureMAP, lumped_departures, map_m_c_mean, through_tier
from solvers.open import queues
from solvers.open.qbd import solve_qbd
from solvers.open.tiers import OpenTiersResult, solve_open_tiers
from solvers.processes import MAP
from solvers.results import check_no_nan

__all__ = ["FixedPopulationResult", "population_at", "solve_fixed_population"]

#: relative resolution of the rate (of the saturation rate) at which the search stops
RATE_TOL = 1e-7


@dataclass(frozen=True, eq=False)
class FixedPopulationResult:
    """The closed network's approximation: ``throughput`` ``X = lambda``, ``response_time``
    ``R = sum_m R_m`` (think time excluded), per tier ``residence_time`` ``R_m``,
    ``utilization`` (per core), ``queue_length`` (mean jobs), ``stations`` (how each open tier
    was solved); ``open_solves`` the open networks solved in the search; ``flags`` the open
    solver's caveats. ``N = X (Z + R)`` to the search's tolerance."""

    throughput: float
    response_time: float
    residence_time: np.ndarray
    utilization: np.ndarray
    queue_length: np.ndarray
    population: int
    think_time: float
    stations: tuple[str, ...]
    open_solves: int
    method: str = "fixed-population mean"
    flags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def little_residual(self) -> float:
        """``|X (Z + R) - N|``, users."""
        return abs(self.throughput * (self.think_time + self.response_time) - self.population)


def _check(processes: Any, population: Any, think_time: Any, servers: Any
           ) -> tuple[list[MAP], int, float, list[int]]:
    try:
        procs = list(processes)
    except TypeError:
        raise ValueError(f"processes: must be a sequence of MAPs, got {processes!r}") from None
    if not procs or not all(isinstance(p, MAP) for p in procs):
        raise ValueError(f"processes: must be a non-empty sequence of MAPs, got {processes!r}")
    if isinstance(population, (bool, np.bool_)) or not float(population).is_integer() \
            or population < 0:
        raise ValueError(f"population: must be an integer >= 0, got {population!r}")
    z = float(think_time)
    if not (math.isfinite(z) and z >= 0):
        raise ValueError(f"think_time: must be a finite number >= 0, got {think_time!r}")
    cores = [1] * len(procs) if servers is None else list(np.atleast_1d(servers))
    if len(cores) != len(procs) or any(
            isinstance(c, (bool, np.bool_)) or not float(c).is_integer() or c < 1
            for c in cores):
        raise ValueError(f"servers: need {len(procs)} positive integers (one per tier), got "
                         f"{servers!r}")
    return procs, int(population), z, [int(c) for c in cores]


def departure_process(proc: MAP, cores: int, rate: float, *,
                      per_job_max_cores: int = PER_JOB_MAX_CORES) -> DepartureMAP | None:
    """The departure process of the open M/MAP/c queue (Poisson arrivals at ``rate``, service
    ``proc`` at its own mean, the station of :func:`solvers.open.m_map_c`): levels up to the
    first repeating one ``L`` and ``L + 1`` exact, every level above aggregated on ``L + 2``
    (``pi_L R^2 (I - R)^{-1}``, transitions as level ``L``'s: the levels repeat), then every
    level from ``L`` up lumped onto ``L``'s phases
    (:func:`solvers.departures.lumped_departures`). ``None`` when the
    queue is not stable."""
    if 1 < cores <= per_job_max_cores:
        src, dst, base, up, starts = queues._per_job_pattern(proc, cores)
        L = cores + 1
    else:
        tr = _speed_scaled(cores + 2, proc, cores)
        src, dst, base, up = tr.src, tr.dst, tr.rate, tr.up
        starts = np.arange(cores + 4) * proc.order
        L = cores
    Q = queues._from_transitions(src, dst, base, up, rate, int(starts[-1]))
    sol = solve_qbd(Q, starts, L)
    if sol is None:
        return None
    width = int(starts[L + 1] - starts[L])
    total = int(starts[L]) + 3 * width
    bounds = np.concatenate((starts[:L + 1], starts[L] + width * np.arange(1, 4)))
    level = np.repeat(np.arange(L + 3), np.diff(bounds))
    rate_all = np.where(up, base * rate, base)
    own = np.searchsorted(starts, src, side="right") - 1
    low = own < L                                       # levels 0..L-1 as they are
    at_l = own == L
    pieces_src, pieces_dst, pieces_rate = [src[low]], [dst[low]], [rate_all[low]]
    for shift in (0, 1, 2):                             # level L's pattern on L, L+1, L+2
        pick = at_l if shift < 2 else at_l & ~up        # (no arrival out of the aggregate)
        pieces_src.append(src[pick] + shift * width)
        pieces_dst.append(dst[pick] + shift * width)
        pieces_rate.append(rate_all[pick])
    pi = np.zeros(total)
    pi[:int(starts[L + 1])] = sol.pi[:int(starts[L + 1])]
    above = sol.level(L) @ sol.R
    pi[int(starts[L + 1]):int(starts[L + 1]) + width] = above
    pi[int(starts[L + 1]) + width:] = above @ sol.R @ sol.tail
    return lumped_departures(pi, np.concatenate(pieces_src), np.concatenate(pieces_dst),
                             np.concatenate(pieces_rate), level, L - 1)


def _arrival_wait(dep: DepartureMAP, mean: float, cores: int, rate: float) -> float | None:
    """What the waves ``dep`` add to the mean wait of a bursty tier (mean service ``mean``,
    ``cores`` cores) over Poisson arrivals at ``rate``: ``W_MAP/M/c - W_M/M/c``, to be added
    to the tier's ``M/MAP/c`` wait. The Allen-Cunneen approximation of the ``GI/G/c`` wait,
    ``W ~ (c_a^2 + c_s^2) / 2 W_M/M/c`` (Allen 1990; Whitt 1993), is linear in the arrivals'
    and the service's variability, so ``W_G/G/c ~ W_M/G/c + W_G/M/c - W_M/M/c``: each part
    here solved exactly for its own process (the service's per-job chain, the arrivals'
    departure MAP) instead of through ``c^2``. ``None`` when the tier does not solve or the
    waves saturate it."""
    if not dep.rate * mean < cores:
        return None
    try:
        q = map_m_c_mean(dep, mean, cores)
    except np.linalg.LinAlgError:
        return None
    if not (math.isfinite(q) and q >= 0.0):
        return None
    return q / rate - mean - queues.mm_c(rate, mean, cores).wait


def _open(procs: Sequence[MAP], means: np.ndarray, cores: list[int], rate: float,
          per_job_max_cores: int, waves: bool = True) -> OpenTiersResult:
    """The open tiers at ``rate``; with ``waves`` the exponential tiers after a bursty one fed
    its departure process (module docstring)."""
    res = solve_open_tiers([rate], means[:, None], cores, processes=procs,
                           per_job_max_cores=per_job_max_cores)
    if not waves or not res.stable or rate <= 0:
        return res
    Rmc, jobs, wait = res.residence_time.copy(), res.queue_length.copy(), res.wait.copy()
    flags = list(res.flags)
    M = len(procs)
    for b in range(M):
        after = []
        for m in range(b + 1, M):
            if procs[m].order > 1:
                break
            after.append(m)
        nxt = b + 1 + len(after)                       # the next bursty tier, if any
        bursty_next = nxt < M and procs[nxt].order > 1
        if procs[b].order == 1 or not (after or bursty_next):
            continue
        with np.errstate(all="ignore"):
            try:
                dep = departure_process(procs[b], cores[b], rate,
                                        per_job_max_cores=per_job_max_cores)
            except (np.linalg.LinAlgError, ArithmeticError):
                dep = None
            for m in after:
                if dep is None or not dep.rate * means[m] < cores[m]:
                    flags.append(f"tier {m}: tier {b}'s departures not solved or saturating "
                                 f"it: Poisson arrivals")
                    break
                try:
                    q = map_m_c_mean(dep, means[m], cores[m])
                except np.linalg.LinAlgError:
                    q = math.nan
                if not (math.isfinite(q) and q >= 0.0):
                    flags.append(f"tier {m}: the queue fed by tier {b}'s departures did not "
                                 f"solve: Poisson arrivals")
                    break
                jobs[m], Rmc[m, 0] = q, q / rate
                wait[m] = max(q / rate - means[m], 0.0)
                dep = through_tier(dep, cores[m] / means[m])
            else:
                if bursty_next and dep is not None:
                    extra = _arrival_wait(dep, means[nxt], cores[nxt], rate)
                    if extra is None:
                        flags.append(f"tier {nxt}: tier {b}'s departures not solved or "
                                     f"saturating it: Poisson arrivals")
                    else:
                        wait[nxt] = max(wait[nxt] + extra, 0.0)
                        Rmc[nxt, 0] = means[nxt] + wait[nxt]
                        jobs[nxt] = rate * Rmc[nxt, 0]
    return OpenTiersResult(throughput=res.throughput, response_time=Rmc.sum(axis=0),
                           residence_time=Rmc, wait=wait, queue_length=jobs,
                           utilization=res.utilization,
                           stations=tuple(st if Rmc[m, 0] == res.residence_time[m, 0]
                                          else f"{st} (waves)"
                                          for m, st in enumerate(res.stations)),
                           stable=True, flags=tuple(flags))


def population_at(processes: Sequence[MAP], rate: float, think_time: float,
                  servers: Sequence[int] | None = None, *,
                  per_job_max_cores: int = PER_JOB_MAX_CORES) -> float:
    """``lambda (Z + R(lambda))``: the mean population of the open network at ``rate``
    (``inf`` at or past saturation)."""
    procs, _, z, cores = _check(processes, 0, think_time, servers)
    means = np.array([p.mean for p in procs])
    res = _open(procs, means, cores, float(rate), per_job_max_cores)
    if not res.stable:
        return math.inf
    return float(rate) * (z + float(res.response_time[0]))


def solve_fixed_population(processes: Sequence[MAP], population: int, think_time: float, *,
                           servers: Sequence[int] | None = None,
                           per_job_max_cores: int = PER_JOB_MAX_CORES,
                           rate_tol: float = RATE_TOL,
                           waves: bool = True) -> FixedPopulationResult:
    """The closed network of ``population`` users by the fixed-population-mean method (module
    docstring): each tier's service process in visit order (``MAP.exponential(S)`` for an
    exponential tier, a bursty tier's MAP at its own mean), ``servers`` cores per tier
    (default 1), ``think_time`` ``Z``; the rate to ``rate_tol`` of the saturation rate;
    ``waves=False`` takes every tier as fed Poisson arrivals (faster, and low on a tier after
    a bursty one: docs/accuracy.md section 21). Raises ``ValueError`` naming the argument on
    bad input."""
    procs, N, z, cores = _check(processes, population, think_time, servers)
    if not (0 < rate_tol < 1):
        raise ValueError(f"rate_tol: must be in (0, 1), got {rate_tol!r}")
    means = np.array([p.mean for p in procs])
    sat = float(np.min(np.asarray(cores) / means))
    solved: dict[float, OpenTiersResult] = {}

    def at(rate: float) -> OpenTiersResult:
        if rate not in solved:
            solved[rate] = _open(procs, means, cores, rate, per_job_max_cores, waves)
        return solved[rate]

    def g(rate: float) -> float:
        if rate <= 0.0:
            return -1.0
        if rate >= sat:
            return 1.0
        res = at(rate)
        if not res.stable:
            return 1.0
        jobs = rate * (z + float(res.response_time[0]))
        return 1.0 - 2.0 * N / (jobs + N)

    if N == 0:
        rate = 0.0
    else:
        hi = min(N / (z + float(means.sum())), sat)
        lo = 0.0
        if hi < sat:
            top = at(hi)
            if top.stable:
                lo = N / (z + float(top.response_time[0]))
        g_lo, g_hi = g(lo), g(hi)
        if g_hi <= 0.0:                  # R(hi) = sum S: no queueing at all at hi
            rate = hi
        elif g_lo >= 0.0:
            rate = lo
        else:
            rate = brentq(g, lo, hi, xtol=rate_tol * sat, rtol=4 * np.finfo(float).eps)
            if rate >= sat or not at(rate).stable:    # the root within the tolerance of it
                rate = max(lo, rate - rate_tol * sat)
    res = at(rate) if rate > 0 else _open(procs, means, cores, 0.0, per_job_max_cores)
    Rm = res.residence_time[:, 0]
    check_no_nan(residence_time=Rm, queue_length=res.queue_length)
    return FixedPopulationResult(
        throughput=float(rate), response_time=float(Rm.sum()), residence_time=Rm.copy(),
        utilization=res.utilization.copy(), queue_length=res.queue_length.copy(),
        population=N, think_time=z, stations=res.stations, open_solves=len(solved),
        flags=res.flags)
