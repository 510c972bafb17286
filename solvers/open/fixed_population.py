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
Whitt 1993), times the share of the waves' dispersion left over the time the bursty tier's
queue relaxes over, beyond the source's (:func:`relaxed_share`). Fed Poisson arrivals, the
database of docs/accuracy.md's large-population network waited 11-20% too little from 2,000
users (the app's waves cross the cache at up to its capacity, above the database's).
``lambda (Z + R(lambda))`` rises strictly from 0 to ``inf`` on ``[0, lambda_sat)``,
``lambda_sat = min_m c_m / S_m`` (the utilization law), so
the equation has one root, found in the bracket ``[0, min(N / (Z + sum_m S_m), lambda_sat)]``
(``R >= sum_m S_m``) by probes at the root of the model ``R = A + B / (lambda_sat -
lambda)`` through the last two probes, bisection as the safeguard (:func:`_root`); a
saturated probe (``R`` infinite) only lowers the bracket's upper end, never gives ``inf`` or
NaN.

Every open solve costs the same whatever ``N`` (the bursty tiers' boundary levels and rate
matrices: a few hundred states for 16 cores), so the method costs a handful of solves (a
guess and 2 on 4 tiers) against the decomposition's per-job chains, whose levels grow with
``N``. An open solve does not depend on ``N`` at all: a network's solves are held by rate
(:data:`_CURVES`, keyed by its processes and cores), and every later search on it -- a
capacity search's next population, the prediction at the current users -- starts from the
rates already solved (0-2 more solves). The search's last step is read off the model through
the two solved ends of a bracket narrower than :data:`INTERPOLATE_SPAN` of its upper end
instead of one more solve: a secant step's answer without its solve (Brent 1973).

The method's error shrinks as ``N`` grows (the fraction of users in the tiers, and the
correlation a closed population forces on them, vanish): where it is used is decided on the
physical simulation (docs/accuracy.md, "Large populations through the open route").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy.linalg.lapack import dgesv

from solvers.decomposition.memo import Memo
from solvers.decomposition.stations import PER_JOB_MAX_CORES
from solvers.departures import (DepartureMAP, levels_mean, lumped_departures, lumping, null_row,
                                through_tier)
from solvers.open import queues
from solvers.open.qbd import shifted_cyclic_reduction
from solvers.open.tiers import OpenTiersResult, ps_residence, solve_open_tiers
from solvers.processes import MAP
from solvers.results import as_demands, check_no_nan

__all__ = ["FixedPopulationResult", "forget_held", "open_at_rate", "population_at",
           "solve_fixed_population", "solve_open_waves"]

#: resolution of the rate at which the search stops, relative to the search's first upper
#: end ``min(N / (Z + sum S), lambda_sat)``: 1e-5 moves ``R`` by less than 1e-4 of itself
RATE_TOL = 1e-5

#: the departure process's phases with a smaller share of its transitions are dropped: the
#: ``MAP/M/c`` queues it feeds cost the cube of its phases (105 phases at 1e-10, 90 at 1e-7,
#: 80 at this share on the large-population network at 5,000 users: a full open solve ~30%
#: less CPU than at 1e-7); against 1e-10 there, 1,000-5,000 users, ``X`` moved by at most
#: 3.7e-5 of itself, ``R`` by 6.8e-4, a tier's residence time by 5.2e-3 (1e-7: 3.8e-6,
#: 1.2e-4, 7.8e-4), the capacity (exact to the user) at mean-R SLAs of 0.25-3 s by at most
#: one user, 1.7e-4 (5,764 against 5,765 at 1.5 s, 6,333 against 6,334 at 2 s; the same
#: user at 0.25, 0.3, 0.4, 0.5, 0.75, 1, 2.5 and 3 s) -- against the route's 3.5-12% error
#: on ``R``
WAVE_PHASE_SHARE = 1e-6

#: how far ``G 1`` of the queues fed the waves may be from 1
#: (:func:`wave_jobs`): the reduction converges quadratically, so on the large-population
#: network at 300-700 requests/s against 1e-12 each queue takes 0-1 doubling fewer of 9-12,
#: its mean number of jobs within 1.4e-8
G_TOLERANCE = 1e-7

#: the search ends without one more open solve once both ends of the bracket are solved and it
#: is narrower than this share of its first upper end: the answer is read off the model
#: ``R = A + B / (sat - lambda)`` through the ends (:func:`_between`; the model's root solved
#: instead where the ends were solved differently: a station or a flag apart). Against the
#: search solving its root, 1,000-6,000 users on the large-population network: ``R`` and every
#: tier's residence time within 5.6e-5 of themselves, one open solve fewer of 3-4
INTERPOLATE_SPAN = 0.02

#: the open solves of a network by rate, for every population's search (module docstring)
_CURVES = Memo(8)
#: a network's solves are dropped once it holds this many rates
CURVE_LIMIT = 256


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
    interpolated: bool = False
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


#: the departure processes' patterns by chain (:func:`_departure_pattern`)
_DEPARTURE_PATTERNS = Memo(16)


def _departure_pattern(src: np.ndarray, dst: np.ndarray, up: np.ndarray, starts: np.ndarray,
                       L: int) -> tuple[Any, ...]:
    """The part of :func:`departure_process` that depends on the chain's pattern alone, not
    on the rate (the same at every rate of a search): which of the chain's transitions make
    the extended chain's (levels ``0..L - 1`` as they are, level ``L``'s on ``L``, ``L + 1``
    and, without arrivals, ``L + 2``), their sources and destinations there, each state's
    level and the lumping (:func:`solvers.departures.lumping`); held by the pattern's arrays
    (:data:`solvers.open.queues._PATTERNS` holds one set a process and core count)."""
    key = (id(src), id(dst), id(up), int(L))
    held = _DEPARTURE_PATTERNS.get(key)
    if held is not None and held[0] is src:
        return held[1:]
    width = int(starts[L + 1] - starts[L])
    bounds = np.concatenate((starts[:L + 1], starts[L] + width * np.arange(1, 4)))
    level = np.repeat(np.arange(L + 3), np.diff(bounds))
    own = np.searchsorted(starts, src, side="right") - 1
    at_l = own == L
    picks = [np.flatnonzero(own < L)]                   # levels 0..L-1 as they are
    shifts = [np.zeros(picks[0].shape[0], dtype=np.int64)]
    for shift in (0, 1, 2):                             # level L's pattern on L, L+1, L+2
        pick = np.flatnonzero(at_l if shift < 2 else at_l & ~up)   # (no arrival out of
        picks.append(pick)                                          # the aggregate)
        shifts.append(np.full(pick.shape[0], shift * width, dtype=np.int64))
    pick, moved = np.concatenate(picks), np.concatenate(shifts)
    src_all, dst_all = src[pick] + moved, dst[pick] + moved
    held = _DEPARTURE_PATTERNS.put(key, (src, pick, src_all, dst_all, level,
                                         lumping(src_all, dst_all, level, L - 1)))
    return held[1:]


def departure_process(proc: MAP, cores: int, rate: float, *,
                      per_job_max_cores: int = PER_JOB_MAX_CORES,
                      negligible: float = WAVE_PHASE_SHARE) -> DepartureMAP | None:
    """The departure process of the open M/MAP/c queue (Poisson arrivals at ``rate``, service
    ``proc`` at its own mean, the station of :func:`solvers.open.m_map_c`): levels up to the
    first repeating one ``L`` and ``L + 1`` exact, every level above aggregated on ``L + 2``
    (``pi_L R^2 (I - R)^{-1}``, transitions as level ``L``'s: the levels repeat), then every
    level from ``L`` up lumped onto ``L``'s phases
    (:func:`solvers.departures.lumped_departures`; phases with a share of its transitions
    below ``negligible`` dropped), its rates then scaled to carry ``rate`` exactly (flow
    conservation, as :func:`solvers.departures.through_tier` keeps it: the dropped phases'
    flux, 4.5e-6 of it at 1e-6 on an 8-core bursty tier 60% busy, would otherwise leave a
    tier fed the waves below its service time at low rates, the search's model of ``R``
    falling).
    ``None`` when the queue is not stable."""
    sol, (src, dst, base, up), starts, L = queues.m_map_c_chain(rate, proc, cores,
                                                                per_job_max_cores)
    if sol is None:
        return None
    pick, src_all, dst_all, level, lumped = _departure_pattern(src, dst, up, starts, L)
    width = int(starts[L + 1] - starts[L])
    pi = np.zeros(level.shape[0])
    pi[:int(starts[L + 1])] = sol.pi[:int(starts[L + 1])]
    above = sol.level(L) @ sol.R
    pi[int(starts[L + 1]):int(starts[L + 1]) + width] = above
    pi[int(starts[L + 1]) + width:] = above @ sol.R @ sol.tail
    dep = lumped_departures(pi, src_all, dst_all, np.where(up, base * rate, base)[pick], level,
                            L - 1, lumped, negligible=negligible)
    kept = dep.rate
    if not kept > 0:
        return dep
    return DepartureMAP(dep.D0 * (rate / kept), dep.D1 * (rate / kept), dep.w)


def wave_jobs(dep: DepartureMAP, mean: float, cores: int, *, tol: float = 1e-12,
              predicted: bool = True) -> float:
    """Mean number of jobs in the ``MAP/M/c`` FCFS queue fed ``dep`` (mean service ``mean``,
    ``cores`` cores; ``dep.rate * mean < cores``): :func:`solvers.departures.map_m_c_mean`'s
    level-dependent QBD (Latouche and Ramaswami 1999), ``G`` by shifted cyclic reduction to
    ``tol`` (:func:`solvers.open.qbd.shifted_cyclic_reduction`: the queue is stable, so ``G``
    is stochastic), and each boundary level's ``F_n = D1 G_n``
    solved directly, ``F_n^T = n mu (n mu I - D0 - F_{n+1})^{-T} D1^T`` (one LU and its solves
    against ``D1^T``), instead of ``G_n = n mu (n mu I - D0 - D1 G_{n+1})^{-1}`` inverted and
    then multiplied by ``D1``: the boundary's recursion, ``pi_0 (D0 + F_1) = 0`` and ``pi_n =
    pi_{n-1} F_n / (n mu)``, and ``R = F_c / (c mu)`` need only the ``F_n``. About half the
    CPU of a level; the shift's drift test read off ``dep.w`` (the stationary vector of
    ``A0 + A1 + A2 = D0 + D1``) without a solve; the jobs within 2.2e-11 of
    ``map_m_c_mean``'s on the large-population network (docs/benchmarks.md section 11).
    ``predicted``: the reduction stops once quadratic convergence puts its next step below
    ``tol`` (:func:`solvers.open.qbd.shifted_cyclic_reduction`): one doubling fewer of 10-12
    on that network, its jobs within 9.5e-7 of the reduction run to ``tol`` (44 rates of
    150-795/s, both queues behind the app, full and rough departures). The levels above
    ``c`` go down at ``c mu I``, so the reduction's first step is taken by that structure
    (``down_scale``).
    :class:`numpy.linalg.LinAlgError` when a block is singular or ``G`` does not converge."""
    D0, D1, mu = dep.D0, dep.D1, 1.0 / mean
    s, eye = cores * mu, np.eye(D0.shape[0])
    G = shifted_cyclic_reduction(D1, D0 - s * eye, s * eye, tol, phases=dep.w,
                                 predicted=predicted, down_scale=s)
    F = [np.empty((0, 0))] * (cores + 1)                # F[n] = D1 G_n
    F[cores] = D1 @ G
    d1t = np.asfortranarray(D1.T)
    minus_d0t, diagonal = np.negative(D0).T, np.diag_indices(D0.shape[0])
    for n in range(cores - 1, 0, -1):
        level = minus_d0t - F[n + 1].T                  # (n mu I - D0 - F_{n+1})^T, Fortran
        level[diagonal] += n * mu                       # order as dgesv takes it: no copy
        _, _, x, info = dgesv(level, d1t, overwrite_a=True)
        if info != 0:
            raise np.linalg.LinAlgError(f"singular boundary level {n} (dgesv info {info})")
        F[n] = (n * mu) * x.T
    pis = np.empty((cores + 1, D0.shape[0]))
    pis[0] = null_row(D0 + F[1])                        # pi_0 (D0 + D1 G_1) = 0
    for n in range(1, cores + 1):
        pis[n] = pis[n - 1] @ F[n] / (n * mu)
    return levels_mean(pis, F[cores] / s)


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
        q = wave_jobs(dep, mean, cores, tol=G_TOLERANCE)
    except np.linalg.LinAlgError:
        return None
    if not (math.isfinite(q) and q >= 0.0):
        return None
    return q / rate - mean - queues.mm_c(rate, mean, cores).wait


def relaxed_share(source_wait: float, source_slack: float, fed_wait: float, own_wait: float,
                  slack: float) -> float:
    """The share of what a bursty tier's waves add to an exponential tier's wait
    (:func:`_arrival_wait`) that they add to a bursty tier's: ``min(1, max(tau_s, tau_e) /
    tau_b)``, ``tau = W / slack`` each queue's relaxation time up to the common ``2 lambda`` (a
    regulated Brownian motion of drift ``-slack`` (jobs/s: ``c / S - lambda``) and variance
    rate ``sigma^2`` holds ``L = sigma^2 / (2 slack)`` jobs on average and relaxes over a time
    proportional to ``sigma^2 / slack^2 = 2 L / slack = 2 lambda W / slack``: Abate and Whitt
    1987); ``s`` the source tier (``source_wait``, ``source_slack``), ``e`` the exponential
    tier fed the waves (``fed_wait``, ``W_MAP/M/c``), ``b`` the bursty tier Poisson-fed
    (``own_wait``; ``e`` and ``b`` share ``slack``).

    A queue's wait grows with its arrivals' count variance over the time it relaxes over (in
    heavy traffic, linearly: Allen 1990; Whitt 1993). A stable queue's departures over a
    window are its arrivals less the change in its queue, whose variance is bounded: their
    excess count variance over the Poisson arrivals' stops growing once the window passes the
    source queue's relaxation time, and their index of dispersion falls back towards 1 as
    ``1 / t`` (the lumped departure MAP keeps its short-range dispersion, not that return).
    The exponential tier relaxes within ``tau_e`` and sees the waves' dispersion there; the
    bursty tier relaxes over ``tau_b``, beyond both, where the dispersion has fallen by
    ``max(tau_s, tau_e) / tau_b``. 1 where ``tau_b`` is the shorter or not positive."""
    tau_b = own_wait / slack if slack > 0 else math.inf
    if not (tau_b > 0 and math.isfinite(tau_b)):
        return 1.0
    tau_s = source_wait / source_slack if source_slack > 0 else math.inf
    tau_e = fed_wait / slack
    return min(1.0, max(tau_s, tau_e) / tau_b)


def _open(procs: Sequence[MAP], means: np.ndarray, cores: list[int], rate: float,
          per_job_max_cores: int, waves: bool = True,
          share: float = WAVE_PHASE_SHARE, into_bursty: bool = True,
          base: OpenTiersResult | None = None, relaxed: bool = True) -> OpenTiersResult:
    """The open tiers at ``rate``; with ``waves`` the exponential tiers after a bursty one fed
    its departure process (module docstring), and with ``into_bursty`` too what those waves
    add to the next bursty tier's wait (:func:`_arrival_wait`), the share of it that tier's
    slower relaxation leaves (:func:`relaxed_share`; all of it without ``relaxed``).
    ``base``: the Poisson-fed tiers at ``rate`` as one class, already solved (not solved
    again)."""
    res = base if base is not None else solve_open_tiers(
        [rate], means[:, None], cores, processes=procs, per_job_max_cores=per_job_max_cores)
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
                                        per_job_max_cores=per_job_max_cores,
                                        negligible=share)
            except (np.linalg.LinAlgError, ArithmeticError):
                dep = None
            for m in after:
                if dep is None or not dep.rate * means[m] < cores[m]:
                    flags.append(f"tier {m}: tier {b}'s departures not solved or saturating "
                                 f"it: Poisson arrivals")
                    break
                try:
                    q = wave_jobs(dep, means[m], cores[m], tol=G_TOLERANCE)
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
                if bursty_next and dep is not None and into_bursty:
                    extra = _arrival_wait(dep, means[nxt], cores[nxt], rate)
                    if extra is None:
                        flags.append(f"tier {nxt}: tier {b}'s departures not solved or "
                                     f"saturating it: Poisson arrivals")
                    else:
                        if relaxed:
                            extra *= relaxed_share(
                                wait[b], cores[b] / means[b] - rate,
                                queues.mm_c(rate, means[nxt], cores[nxt]).wait + extra,
                                wait[nxt], cores[nxt] / means[nxt] - rate)
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


def solve_open_waves(arrival_rates: Any, service_times: Any, cores: Any, *,
                     processes: Sequence[MAP | None] | None = None, visits: Any = None,
                     per_job_max_cores: int = PER_JOB_MAX_CORES,
                     coupled: bool | str = False, ps: Any = None,
                     into_bursty: bool = True, relaxed: bool = True) -> OpenTiersResult:
    """:func:`solvers.open.solve_open_tiers` (Poisson arrivals; ``coupled`` and ``ps`` passed
    on) with the tiers after a bursty one fed its departure process, as :func:`open_at_rate`
    solves them (module docstring): an exponential tier a ``MAP/M/c`` queue fed the bursty
    tier's departures, the next bursty tier its own wait plus what those waves add to an
    exponential tier's (``into_bursty``), the share of it left by that tier's slower
    relaxation (``relaxed``: :func:`relaxed_share`). A bursty tier releases its jobs in waves
    at the end of a slow run (Mi et al. 2008), so the tiers behind it, Poisson-fed, wait too
    little.

    The classes are aggregated at each tier's visit-weighted mean service and the aggregate's
    wait ``W_m`` is every class's: ``R_{m,c} = v_{m,c} (S_{m,c} + W_m)`` at an FCFS tier, the
    one stretch ``v_{m,c} S_{m,c} (1 + W_m / S_m)`` at a processor-sharing one (``ps``:
    exponential service whose rate depends on the number present alone, so its number, and
    ``W_m`` by Little's law, is the FCFS queue's whatever the arrivals; the split by class is
    :func:`solvers.open.tiers.ps_residence`'s). The tiers are solved once: the waves start
    from the Poisson-fed solve (with ``coupled``, the bursty tiers' coupled waits), the
    departures read off the plain chain. Left Poisson-fed (flagged) where the tiers' total
    rates differ or a tier is idle."""
    res = solve_open_tiers(arrival_rates, service_times, cores, processes=processes,
                           visits=visits, per_job_max_cores=per_job_max_cores,
                           coupled=coupled, ps=ps)
    procs = list(processes) if processes is not None else []
    if not res.stable or not any(p is not None and p.order > 1 for p in procs[:-1]):
        return res
    lam = res.throughput
    S = as_demands(service_times, n_classes=lam.shape[0], name="service_times")
    V = np.ones(S.shape) if visits is None else as_demands(visits, n_classes=lam.shape[0],
                                                           name="visits")
    rates = V @ lam
    means = (V * S) @ lam / np.where(rates > 0, rates, 1.0)
    if not rates.max() > 0:
        return res
    if not np.allclose(rates, rates[0], rtol=1e-12) or not np.all(means > 0):
        return dataclasses.replace(res, flags=res.flags + (
            "waves: tiers at different total rates or idle: Poisson-fed tiers",))
    cs = [int(c) for c in np.atleast_1d(cores)]
    shapes = [MAP.exponential(s) if p is None or p.order == 1
              else (p if math.isclose(p.mean, s, rel_tol=1e-12) else p.scaled(s))
              for p, s in zip(procs, means)]
    rate = float(rates[0])
    base = OpenTiersResult(throughput=np.array([rate]), response_time=np.array([0.0]),
                           residence_time=(means + res.wait)[:, None], wait=res.wait,
                           queue_length=res.queue_length, utilization=res.utilization,
                           stations=res.stations, stable=True, flags=res.flags)
    fed = _open(shapes, means, cs, rate, per_job_max_cores, into_bursty=into_bursty,
                base=base, relaxed=relaxed)
    visited = (V > 0) & (S > 0)
    Rmc = np.where(visited, V * (S + fed.wait[:, None]), 0.0)
    if ps is not None:
        Rmc = ps_residence(Rmc, ps, fed.wait, lam, S, V, visited)
    check_no_nan(residence_time=Rmc, wait=fed.wait, queue_length=fed.queue_length)
    return OpenTiersResult(throughput=lam, response_time=Rmc.sum(axis=0), residence_time=Rmc,
                           wait=fed.wait, queue_length=fed.queue_length,
                           utilization=res.utilization, stations=fed.stations, stable=True,
                           flags=fed.flags)


def forget_held() -> None:
    """Forget every open solve held by rate (and the queues' chains held with them): the next
    search starts from nothing, as a model's first (benchmarks)."""
    _CURVES.clear()
    queues._CHAINS.clear()


def _held(procs: Sequence[MAP], cores: Sequence[int], per_job_max_cores: int,
          waves: bool, share: float = WAVE_PHASE_SHARE,
          into_bursty: bool = True) -> dict[float, OpenTiersResult]:
    """The open solves of this network held by rate (:data:`_CURVES`), emptied once it holds
    :data:`CURVE_LIMIT` rates."""
    key = (tuple((p.D0.tobytes(), p.D1.tobytes()) for p in procs), tuple(cores),
           per_job_max_cores, waves) + (() if share == WAVE_PHASE_SHARE else (share,)) + (
               () if into_bursty else ("not into bursty",))
    solved = _CURVES.get(key)
    if solved is None or len(solved) >= CURVE_LIMIT:
        solved = _CURVES.put(key, {})
    return solved


def open_at_rate(processes: Sequence[MAP], rate: float, think_time: float,
                 servers: Sequence[int] | None = None, *,
                 per_job_max_cores: int = PER_JOB_MAX_CORES,
                 waves: bool = True,
                 share: float = WAVE_PHASE_SHARE,
                 into_bursty: bool = True) -> tuple[OpenTiersResult, float]:
    """The open network at ``rate`` as :func:`solve_fixed_population` solves it (with
    ``waves``, the tiers after a bursty one fed its departures), held by rate with the
    network's other solves, so a population whose rate it brackets is then read off it
    (:data:`INTERPOLATE_SPAN`); and its mean population ``lambda (Z + R(lambda))``, ``inf``
    where it is not stable. The capacity search of a large population searches the rate
    with it (:mod:`streams.predict.capacity_search`): the excess rises with the rate as with
    the population, and ``N(lambda)`` rises strictly. ``share``: the departures' phases
    kept (:data:`WAVE_PHASE_SHARE`; larger: a rougher and cheaper solve, held apart);
    ``into_bursty=False``: without what the waves add to the next bursty tier's wait (a
    rougher and cheaper solve, held apart: the capacity search's aim)."""
    procs, _, z, cores = _check(processes, 0, think_time, servers)
    lam = float(rate)
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"rate: must be a finite number >= 0, got {rate!r}")
    solved = _held(procs, cores, per_job_max_cores, waves, share, into_bursty)
    if lam not in solved:
        means = np.array([p.mean for p in procs])
        solved[lam] = _open(procs, means, cores, lam, per_job_max_cores, waves, share,
                            into_bursty)
    res = solved[lam]
    return res, (lam * (z + float(res.response_time[0])) if res.stable else math.inf)


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


#: at most this many open solves in the search (the bracket at least halves every third
#: probe, so a tolerance of 1e-5 takes at most ~51)
MAX_SOLVES = 100


def _model_step(points: list[tuple[float, float]], N: int, z: float, sat: float, lo: float,
                hi: float) -> float | None:
    """The rate where ``N / lambda - Z`` meets ``R(lambda) = A + B / (sat - lambda)`` fitted
    through the last two ``(lambda, R)`` of ``points`` (a queue's response time grows as
    ``1 / (sat - lambda)`` towards saturation: Kleinrock 1975, Sec. 3.2), inside ``(lo, hi)``;
    ``None`` when the fit or its root is not usable. ``(N - (Z + A) lambda)(sat - lambda) =
    B lambda`` is a quadratic; its smaller root is the one below ``sat``."""
    (l1, r1), (l2, r2) = points[-2], points[-1]
    if not (l1 < sat and l2 < sat and l1 != l2):
        return None
    u1, u2 = 1.0 / (sat - l1), 1.0 / (sat - l2)
    B = (r2 - r1) / (u2 - u1)
    a = z + r1 - B * u1
    b = N + a * sat + B
    disc = b * b - 4.0 * a * N * sat
    if not (a > 0 and disc >= 0 and math.isfinite(disc)):
        return None
    cand = (b - math.sqrt(disc)) / (2.0 * a)
    return cand if lo < cand < hi else None


def _root(response: Any, N: int, z: float, demand: float, sat: float, tol: float,
          guess: Any = None, known: dict[float, float] | None = None,
          span: float = 0.0) -> tuple[float, tuple[float, float] | None]:
    """The rate ``lambda`` with ``lambda (Z + R(lambda)) = N``, ``R = response(lambda)``
    (``inf`` where the open network is not stable), and ``None`` or the bracket ``(lo, hi)``
    it was read off. A bracket ``[lo, hi]`` (``lo = 0``, ``hi = min(N / (Z + sum S), sat)``:
    ``R >= sum S``) narrowed by probes at the root of a model ``R = A + B / (sat - lambda)``
    through the last two probes, the first pair being ``(0, sum S)`` (exact) and ``hi``; a
    bisection instead where the model gives no root in the bracket or, twice running, shrinks
    it by less than half (so the search always ends: Brent's (1973) safeguard). It stops when
    the bracket is narrower than ``tol`` of its first upper end ``hi`` or a probe's population
    misses ``N`` by less than ``tol hi (Z + sum S)`` (``lambda (Z + R)`` rises at least as ``Z
    + sum S``: the rate is then within ``tol hi`` of the root); or, with ``span``, once both
    ends of the bracket are solved and it is narrower than ``span hi``: the model through its
    ends gives the root, returned with the bracket (the caller reads the answer off the model
    there instead of one more solve: ``R`` is then within :data:`INTERPOLATE_SPAN`'s error of
    the solved one). ``known``: rates already solved (``rate -> R``, the same network at any
    ``N``), which bracket the root before any probe, the two nearest it the model's first pair.
    ``guess``, a cheaper ``R`` (the open network without the waves): with fewer than two
    rates known, the first probe at the model's root through the highest below and
    ``guess(hi)`` instead of at ``hi``, where ``R`` is steepest (on the large-population
    network one probe fewer at 2,000 and 5,000 users; the guess never moves the bracket).
    Probes on 4 tiers: 2-3 and the guess (Brent's method on the same bracket: 4-7)."""
    hi = top = min(N / (z + demand), sat)
    lo = 0.0
    ends: dict[float, float] = {0.0: demand}
    points = [(0.0, demand)]
    best, best_miss = 0.0, math.inf
    for rate, r in sorted((known or {}).items()):
        if not 0.0 < rate <= top:
            continue
        jobs = rate * (z + r)
        if math.isfinite(r) and abs(jobs - N) < best_miss:
            best, best_miss = rate, abs(jobs - N)
        if jobs > N and rate < hi:
            hi = rate
        elif jobs <= N and rate > lo:
            lo = rate
        if math.isfinite(r):
            ends[rate] = r
    if best_miss <= tol * top * (z + demand):
        return best, None
    below = sorted(rate for rate in ends if rate <= lo)
    pair = [below[-1], hi] if hi in ends else below[-2:]
    step = 0.5 * (lo + hi)
    if len(pair) > 1:
        points = [(rate, ends[rate]) for rate in pair]
        step = _model_step(points, N, z, sat, lo, hi) or step
        if span > 0 and pair == [lo, hi] and hi - lo <= span * top and lo < step < hi:
            return step, (lo, hi)
    elif hi < sat:
        step = hi
        first = None if guess is None else guess(hi)
        if first is not None and math.isfinite(first):
            step = _model_step([points[0], (hi, first)], N, z, sat, lo, hi) or hi
    slow = 0
    for _ in range(MAX_SOLVES):
        r = response(step)
        jobs = step * (z + r)
        if math.isfinite(r):
            points.append((step, r))
            ends[step] = r
            miss = abs(jobs - N)
            if miss < best_miss:
                best, best_miss = step, miss
            if jobs <= N and step == hi:        # R(hi) = sum S: no queueing at all at hi
                return step, None
        width = hi - lo
        if jobs > N:
            hi = step
        else:
            lo = step
        if best_miss <= tol * top * (z + demand) or hi - lo <= tol * top:
            break
        if span > 0 and lo in ends and hi in ends and hi - lo <= span * top:
            cand = _model_step([(lo, ends[lo]), (hi, ends[hi])], N, z, sat, lo, hi)
            if cand is not None:
                return cand, (lo, hi)
        slow = slow + 1 if hi - lo > 0.5 * width else 0
        cand = _model_step(points, N, z, sat, lo, hi) if len(points) > 1 and slow < 2 else None
        step = 0.5 * (lo + hi) if cand is None else cand
    return (best if best_miss < math.inf else lo), None


def _between(a: OpenTiersResult, b: OpenTiersResult, rate: float, sat: float
             ) -> OpenTiersResult:
    """The open tiers at ``rate`` read off two solves around it: each tier's ``R_m`` on the
    line through them in ``1 / (sat - lambda)`` (the model of :func:`_model_step`, so the
    tiers' sum is the model's ``R``), utilization linear in the rate (the utilization law),
    jobs ``lambda R_m`` (Little's law); stations of the nearer one, flags of both (the caller
    passes two solved alike)."""
    ra, rb = float(a.throughput[0]), float(b.throughput[0])
    ua, ub, u = 1.0 / (sat - ra), 1.0 / (sat - rb), 1.0 / (sat - rate)
    t = (u - ua) / (ub - ua)
    s = (rate - ra) / (rb - ra)
    Rm = (1.0 - t) * a.residence_time + t * b.residence_time
    wait = (1.0 - t) * a.wait + t * b.wait
    near = a if abs(rate - ra) <= abs(rate - rb) else b
    return OpenTiersResult(throughput=np.array([rate]), response_time=Rm.sum(axis=0),
                           residence_time=Rm, wait=wait, queue_length=rate * Rm[:, 0],
                           utilization=(1.0 - s) * a.utilization + s * b.utilization,
                           stations=near.stations, stable=True,
                           flags=tuple(dict.fromkeys(a.flags + b.flags)))


def solve_fixed_population(processes: Sequence[MAP], population: int, think_time: float, *,
                           servers: Sequence[int] | None = None,
                           per_job_max_cores: int = PER_JOB_MAX_CORES,
                           rate_tol: float = RATE_TOL,
                           waves: bool = True,
                           interpolate_span: float = INTERPOLATE_SPAN) -> FixedPopulationResult:
    """The closed network of ``population`` users by the fixed-population-mean method (module
    docstring): each tier's service process in visit order (``MAP.exponential(S)`` for an
    exponential tier, a bursty tier's MAP at its own mean), ``servers`` cores per tier
    (default 1), ``think_time`` ``Z``; the rate to ``rate_tol`` of ``min(N / (Z + sum S),
    lambda_sat)``;
    ``waves=False`` takes every tier as fed Poisson arrivals (faster, and low on a tier after
    a bursty one: docs/accuracy.md section 21); ``interpolate_span``: the answer read off the
    model through a solved bracket that narrow (:data:`INTERPOLATE_SPAN`; 0: the root solved
    to ``rate_tol``). Raises ``ValueError`` naming the argument on bad input."""
    procs, N, z, cores = _check(processes, population, think_time, servers)
    if not (0 < rate_tol < 1):
        raise ValueError(f"rate_tol: must be in (0, 1), got {rate_tol!r}")
    if not (0 <= interpolate_span < 1):
        raise ValueError(f"interpolate_span: must be in [0, 1), got {interpolate_span!r}")
    means = np.array([p.mean for p in procs])
    sat = float(np.min(np.asarray(cores) / means))
    solved = _held(procs, cores, per_job_max_cores, waves)
    known = {rate: float(res.response_time[0]) if res.stable else math.inf
             for rate, res in solved.items()}
    new: list[float] = []

    def at(rate: float) -> OpenTiersResult:
        if rate not in solved:
            solved[rate] = _open(procs, means, cores, rate, per_job_max_cores, waves)
            new.append(rate)
        return solved[rate]

    def response(rate: float) -> float:
        res = at(rate)
        return float(res.response_time[0]) if res.stable else math.inf

    guessed: list[OpenTiersResult] = []

    def guess(rate: float) -> float:
        guessed.append(_open(procs, means, cores, rate, per_job_max_cores, waves=False))
        return float(guessed[-1].response_time[0]) if guessed[-1].stable else math.inf

    rate, bracket = (0.0, None) if N == 0 else _root(
        response, N, z, float(means.sum()), sat, rate_tol, guess if waves else None, known,
        interpolate_span)
    ends = None if bracket is None else (at(bracket[0]), at(bracket[1]))    # held: no solve
    if ends is not None and ends[0].stations == ends[1].stations \
            and ends[0].flags == ends[1].flags:
        res = _between(ends[0], ends[1], rate, sat)
    else:                           # (ends solved differently: the root itself solved)
        bracket = None
        res = at(rate) if rate > 0 else _open(procs, means, cores, 0.0, per_job_max_cores)
    Rm = res.residence_time[:, 0]
    check_no_nan(residence_time=Rm, queue_length=res.queue_length)
    return FixedPopulationResult(
        throughput=float(rate), response_time=float(Rm.sum()), residence_time=Rm.copy(),
        utilization=res.utilization.copy(), queue_length=res.queue_length.copy(),
        population=N, think_time=z, stations=res.stations,
        open_solves=len(new) + len(guessed), interpolated=bracket is not None,
        flags=res.flags)
