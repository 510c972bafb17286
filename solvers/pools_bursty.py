"""Thread and connection pools with one bursty tier: the pool network of :mod:`solvers.pools`
whose tier ``b`` has a MAP service process (Mi et al. 2008, section 4: runs of slow service).

Why not the flow-equivalent station alone: :func:`solvers.pools.solve_pools` replaces the held
tiers by a station whose rate with ``k`` tokens held is the held network's throughput at ``k``
(Chandy et al. 1975). That assumes the held tiers settle between two changes of the pool's
population (Courtois 1977). A bursty tier breaks it: its slow runs last for hundreds of
services, the pool fills during one and drains after it, so the held tiers' throughput is not a
function of the tokens held but of the tokens *and* the phase. Solving the held tiers as
exponential with their means then overstates the throughput by up to a third and understates
the response time by half (docs/accuracy.md, "Thread and connection pools").

Method (the held chain, :func:`_held_chain`): the pool's held tiers are one Markov chain --
``i`` requests at the pool (holding a token or waiting for one), ``d`` of them at ``b`` with
their MAP phases, the other held tiers one flow-equivalent station of rate ``X_O(a)`` with
``a = min(i, K) - d`` requests (exact for one tier) -- fed by the outside (think time, the
tiers and pools not holding ``b``) as a flow-equivalent source of rate ``lam(i)``, the
outside's throughput with ``N - i`` users (Chandy et al. 1975), solved exactly by the
log-space convolution of :mod:`solvers.pools` (Buzen 1973). ``b`` with one core is one MAP
(exact: the tier serves its sequence in order); with more, each job in service has its own
phase and the next start phase is read off the job that started last
(:func:`solvers.pools_station.last_start_station`): the physical tier serves one interval
sequence in start order, so a job that turns slow starts the slow run after it. The MAP
network's per-job station, drawing start phases apart from the jobs' paths, spreads the slow
services out: 0.7-1.7% too much throughput against the exact chain of the physical system, the
pool matrix's bias. The slow runs' pile-up at ``b`` and in the token queue is in the chain; the
approximations are the outside's settling given ``i`` and, for more cores, the last started
job's path after the next start (within 0.12% in X and 0.3% in R of the exact chain of small
physical systems where the station with ``b``'s mean is off by 8-28% in X). One chain per
solve, no fixed point: three solves (the other held tiers, the outside, the chain). The chain
has ``N + 1`` levels of up to ``w`` states (``b``'s station on
levels ``0..K``); past :data:`HELD_CHAIN_WORK`, or with ``b`` in no pool, ``b``'s chain alone
against the rest as in the MAP network's decomposition (Marie 1979) with ``lam(j)`` the rest's
throughput with ``N - j`` users when the pool holding ``b`` has ``K - j`` tokens left for its
other tiers (``0`` for ``j >= K``), flagged when ``b`` is held.

**Pure delays** (``delays``: time at a tier that holds the token but no core -- a round trip,
an fsync, a lock: :mod:`solvers.delay`) are infinite-server stations inside the holding time
of the pools that hold their tier (Lazowska et al. 1984, ch. 3, "delay centers"), each beside
its tier (:func:`solvers.delay.with_delay_stations`). ``b``'s own delay goes on the side of the
pool's other held tiers (after ``b`` where ``b`` is first, before it where it is last), so
that it joins their flow-equivalent station, a product-form network of the CPUs and the
delays whose order does not matter (Baskett et al. 1975); ``b`` stays first or last. Not a
phase of ``b``'s service: a phase would hold one of ``b``'s cores, and a delay holds none (a
20-ms fsync on a one-core database would serialise the pool). Whether the held chain applies
is decided on the network without the delays, so that a delay going to 0 moves the solution
continuously to the one without it -- where only a delay would be another held tier's
demand, the chain does not take it either.

Scope: one bursty tier, held by at most one pool (or by none), first or last of its held
tiers for the held chain; several bursty tiers, or one held by nested pools, are solved by
:func:`solvers.pools.solve_pools` with their means, flagged.
One class (the aggregate of :func:`solvers.pools.solve_pools`: class response times by each
tier's stretch).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Sequence

import numpy as np

from solvers.decomposition.chain import solve_chain
from solvers.decomposition.stations import Transitions, speed_scaled
from solvers.linalg.anchored import anchored_stationary
from solvers.processes import MAP

from .delay import any_delay, cpu_station, fold_pool_result, with_delay_stations
from .held_network import outside_source
from .pools import FlowStation, PoolResult, PoolSpec, aggregate_pool, level_stations, log_rates, \
    network_log_g, pool_figures, solve_pools, station_marginal, station_queues
from .pools_station import last_start_station, last_start_states
from .results import as_servers, check_no_nan

__all__ = ["solve_pools_bursty", "held_chain_applies", "BURSTY_POOL_FLAG"]

#: how the flag of a network this module solves as exponential begins
BURSTY_POOL_FLAG = "pools: bursty"
#: levels of the bursty tier whose probability is below this are not conditioned on
LEVEL_FLOOR = 1e-12
#: the held-network chain's largest ``(N + 1) w^2`` (measured: 8e6 took 4 s, 7e7 took 14 s
#: on one core; :func:`_held_chain_applies`); beyond it, the chain against the rest (flagged).
#: The last-start station's ``w`` is 1.3-1.8 times the per-job one's it replaced (an 8-core
#: tier behind 6 / 12 tokens: 98 / 208 states against 56 / 162): 2e7 keeps the networks the
#: former 1e7 admitted (K 12 over 8 cores: to 381 users then, 462 now)
HELD_CHAIN_WORK = 2e7
#: how the flag of a bursty tier solved against the rest (not in the held chain) begins
AGAINST_REST_FLAG = "pools: bursty tier against the rest"


def _bursty(processes: Sequence[MAP]) -> list[int]:
    """The tiers whose process has more than one phase."""
    return [m for m, p in enumerate(processes) if p.order > 1]


def _capped(station: FlowStation, cap: int, n: int) -> FlowStation:
    """The pool station ``station`` with ``cap`` tokens (``1 <= cap <= size``) for ``n`` users:
    rate ``X_H(min(i, cap))`` with ``i`` requests at it."""
    logf = station.logf
    K = station.size
    if logf.shape[0] < 2 or logf[1] == -math.inf:   # no demand at the other held tiers
        return FlowStation(logf[:n + 1], station.tiers, station.inner, station.pool, K,
                        station.held)
    cap = min(cap, K)
    X = np.exp(logf[:K] - logf[1:K + 1])            # X_H(1..K)
    rates = X[np.minimum(np.arange(1, n + 1), cap) - 1]
    return FlowStation(log_rates(rates), station.tiers, station.inner, station.pool, cap,
                    station.held)


def _lse(a: np.ndarray) -> float:
    """``log sum exp(a)``, the largest term factored out."""
    top = float(a.max())
    return top if top == -math.inf else top + math.log(float(np.exp(a - top).sum()))


def solve_pools_bursty(processes: Sequence[MAP], population: int, think_time: float = 0.0,
                       servers: Any = None, pools: Sequence[PoolSpec] = (),
                       mix: Any = None, demands: Any = None, delays: Any = None) -> PoolResult:
    """Solve the pool network with the tiers' service ``processes`` (module docstring) at
    ``population``. ``demands``: ``D_{m,c}`` tiers x classes with the throughput ``mix`` for
    the classes' response times (default: one class, the processes' means); ``delays``:
    ``delta_{m,c}`` the tiers' pure delays (module docstring; ``None``: none), in the
    residence times and the classes' response times returned. The result's
    ``inner_solves`` counts the networks and chains solved (3 for the held chain; against
    the rest, the chain, the rest at each of ``b``'s populations up to ``K`` and once more per
    likely population for the figures); ``throughput_curve`` is the exponential pool model's
    with ``X(N)`` replaced. Raises ``ValueError`` naming the argument on bad input."""
    procs = list(processes)
    if not procs or not all(isinstance(p, MAP) for p in procs):
        raise ValueError(f"processes: must be one MAP per tier, got {processes!r}")
    means = np.array([p.mean for p in procs])
    Dmc = means[:, None] if demands is None else np.asarray(demands, dtype=float)
    if Dmc.ndim == 1:
        Dmc = Dmc[:, None]
    if Dmc.shape[0] != len(procs):
        raise ValueError(f"demands: must have one row per process ({len(procs)}), got "
                         f"{Dmc.shape[0]}")
    if any_delay(delays):
        return _with_delays(procs, population, think_time, servers, list(pools), mix, Dmc,
                            delays)
    return _solve(procs, population, think_time, servers, list(pools), mix, Dmc)


_STATION = re.compile(r"\btier (\d+)")


def _with_delays(procs: list[MAP], population: int, think_time: float, servers: Any,
                 pools: list[PoolSpec], mix: Any, Dmc: np.ndarray, delays: Any) -> PoolResult:
    """:func:`solve_pools_bursty` with pure delays (module docstring): each tier's delay an
    infinite-server station beside it, ``b``'s on the side of the other held tiers; whether
    the held chain applies decided without them; solved, and folded back per tier."""
    M = len(procs)
    held = held_chain_applies(procs, population, think_time, servers, pools, Dmc, mix)
    bursty = _bursty(procs)
    c = as_servers(servers, M)
    if len(bursty) == 1 and not float(c[bursty[0]]).is_integer():
        raise ValueError(f"servers: the bursty tier {bursty[0]} needs a whole number of "
                         f"cores, got {c[bursty[0]]!r}")
    before = {b for b in bursty[:1] for p in pools if p.first < b == p.last - 1}
    D2, c2, pools2 = with_delay_stations(Dmc, c, delays, pools, before)
    procs2 = [MAP.exponential(1.0)] * (2 * M)
    for m, p in enumerate(procs):
        procs2[cpu_station(m, before)] = p
    res = fold_pool_result(_solve(procs2, population, think_time, c2, list(pools2), mix, D2,
                                  held), before)
    return dataclasses.replace(res, flags=tuple(
        _STATION.sub(lambda t: f"tier {int(t.group(1)) // 2}", f) for f in res.flags))


def _solve(procs: list[MAP], population: int, think_time: float, servers: Any,
           pools: list[PoolSpec], mix: Any, Dmc: np.ndarray,
           held: bool | None = None) -> PoolResult:
    """:func:`solve_pools_bursty` of checked processes and demands; ``held``: whether the held
    chain applies, decided by the caller (``None``: here, :func:`_held_chain_applies`)."""
    bursty = _bursty(procs)
    holding = [i for i, p in enumerate(pools) for b in bursty[:1] if p.first <= b < p.last]
    if len(bursty) != 1 or len(holding) > 1:
        res = solve_pools(Dmc, population, think_time, servers, pools, mix)
        why = "several bursty tiers" if len(bursty) > 1 else "a bursty tier in nested pools"
        flag = () if not bursty else (f"{BURSTY_POOL_FLAG} tiers solved as exponential with "
                                      f"their means ({why})",)
        return _replace_flags(res, res.flags + flag)
    base = solve_pools(Dmc, population, think_time, servers, pools, mix)   # checks the input
    N = int(population)
    if N == 0:
        return base
    b = bursty[0]
    M = len(procs)
    c = as_servers(servers, M)
    if not float(c[b]).is_integer():
        raise ValueError(f"servers: the bursty tier {b} needs a whole number of cores, "
                         f"got {c[b]!r}")
    p = base_mix(Dmc, mix)
    D = Dmc @ p
    Z = float(think_time)
    K = pools[holding[0]].size if holding else None
    top = N if K is None else min(N, K)
    rest_D = D.copy()
    rest_D[b] = 0.0                                   # the rest: tier b short-circuited
    pb = procs[b].scaled(float(D[b])) if D[b] > 0 else procs[b]
    if holding and Z > 0 and (held if held is not None else _held_chain_applies(
            pools, holding[0], b, rest_D, N, pb, int(c[b]))):
        return _held_chain(pb, b, holding[0], pools, Dmc, D, rest_D, c, N, Z, base)
    stations = level_stations(range(0, M), pools, -1, rest_D, c, N)
    if Z > 0:
        stations.append(FlowStation(log_rates(np.arange(1, N + 1, dtype=float) / Z)))
    owner = next((i for i, s in enumerate(stations) if holding and s.pool == holding[0]), None)
    solves = 1 + (1 if owner is not None else 0)
    if owner is None:
        if not stations:
            raise ValueError("demands: only the bursty tier has demand and the think time is 0")
        logG, _ = network_log_g(stations, N)
        lam = np.zeros(top + 1)
        lam[:N] = np.exp(logG[N - 1::-1] - logG[N::-1][:N]) if N else lam[:0]
    else:
        others = [s for i, s in enumerate(stations) if i != owner]
        if others:
            logG_o, _ = network_log_g(others, N)
        else:
            logG_o = np.concatenate(([0.0], np.full(N, -np.inf)))
        lam = np.zeros(top + 1)
        for j in range(min(top, K - 1) + 1):
            n = N - j
            if n == 0:
                break
            f = _capped(stations[owner], K - j, n).logf
            g1 = _lse(f[:n + 1] + logG_o[n::-1])
            g0 = _lse(f[:n] + logG_o[n - 1::-1])
            lam[j] = math.exp(g0 - g1)
        solves += min(top, K - 1) + 1
    chain = solve_chain(lam, procs[b].scaled(float(D[b])) if D[b] > 0 else procs[b],
                        int(c[b]))
    X = float(chain.throughput)
    level = np.asarray(chain.level[:top + 1], dtype=float)
    level = level / level.sum()
    Q = np.zeros(M)
    Q[b] = float(level @ np.arange(top + 1))
    busy = np.zeros(len(pools))
    queue = np.zeros(len(pools))
    for j in np.flatnonzero(level >= LEVEL_FLOOR * level.max()):
        n = N - int(j)
        w = float(level[j])
        if holding:
            busy[holding[0]] += w * j
        if n == 0:
            continue
        if owner is not None and j >= K:     # every token at b: the rest waits for one
            queue[holding[0]] += w * n
            continue
        st = list(stations)
        if owner is not None:
            st[owner] = _capped(stations[owner], K - int(j), n)
        logG, rests = network_log_g(st, n)
        solves += 1
        for s, r in zip(st, rests):
            pj = station_marginal(s, r, logG, n)
            if s.tiers:
                Q[list(s.tiers)] += w * station_queues(s, pj)
            if s.pool >= 0:
                pool_figures(s, pj, pools, rest_D, c, busy, queue, w)
    flags = base.flags + ((f"{AGAINST_REST_FLAG} (the held chain over its budget: the rest "
                           f"settles given the tier's population)",) if holding else ()) \
        + tuple(f"bursty tier {b}: {chain.station} chain"
                for _ in [0] if chain.station != "per-job")
    return _assemble(X, Q, busy, queue, Dmc, D, c, pools, N, base, solves, flags)


def held_chain_applies(processes: Sequence[MAP], population: int, think_time: float,
                       servers: Any, pools: Sequence[PoolSpec], demands: Any,
                       mix: Any = None) -> bool:
    """:func:`solve_pools_bursty` solves this network by its held chain (module docstring):
    exactly one bursty tier, held by exactly one pool (no nested pools over it), first or
    last of that pool's held tiers, a think time, and the chain within
    :data:`HELD_CHAIN_WORK` at ``population``. Elsewhere it is solved as exponential or
    against the rest (flagged), which a caller may prefer to avoid."""
    procs = list(processes)
    bursty = _bursty(procs)
    pools = list(pools)
    N = int(population)
    if len(bursty) != 1 or N < 1 or not float(think_time) > 0:
        return False
    b = bursty[0]
    holding = [i for i, p in enumerate(pools) if p.first <= b < p.last]
    if len(holding) != 1:
        return False
    Dmc = np.asarray(demands, dtype=float)
    Dmc = Dmc[:, None] if Dmc.ndim == 1 else Dmc
    D = Dmc @ base_mix(Dmc, mix)
    c = as_servers(servers, len(procs))
    if not float(c[b]).is_integer() or not D[b] > 0:
        return False
    rest_D = D.copy()
    rest_D[b] = 0.0
    return _held_chain_applies(pools, holding[0], b, rest_D, N, procs[b].scaled(float(D[b])),
                               int(c[b]))


def _station(proc: MAP, cores: int, levels: int) -> Transitions:
    """Tier ``b``'s chain on levels ``0..levels`` with arrivals at rate 1: one MAP for one
    core (exact: the tier serves its sequence in order); for more, per job in service its own
    phase and the next start phase read off the job that started last
    (:func:`solvers.pools_station.last_start_station`: the physical tier's one interval
    sequence in start order, whose end phase is the next job's start phase); its states
    ordered by level."""
    tr = last_start_station(levels, proc, cores) if cores > 1 \
        else speed_scaled(levels, proc, cores)
    if np.any(np.diff(tr.level) < 0):
        raise AssertionError("the station's states are not ordered by level")
    return tr


def _held_chain_applies(pools: list[PoolSpec], index: int, b: int, rest_D: np.ndarray,
                        N: int, proc: MAP, cores: int) -> bool:
    """The held-network chain (:func:`_held_chain`) applies: ``b`` first or last of the
    pool's held tiers, another held tier with demand, no pool inside it, and the chain's
    banded factorisation within :data:`HELD_CHAIN_WORK` (``N + 1`` levels of up to ``w``
    states, ``w`` those of ``b``'s station on levels ``0..K``: ``(N + 1) w^2``). ``w`` is
    counted, not built: a many-phase mixture's station over the budget would cost seconds to
    build only to be refused."""
    pool = pools[index]
    inside = any(i != index and pool.first <= q.first and q.last <= pool.last
                 for i, q in enumerate(pools))
    K = min(pool.size, N)
    others = rest_D[pool.first:pool.last] > 0
    if not (b in (pool.first, pool.last - 1) and not inside and bool(others.any())):
        return False
    width = last_start_states(K, proc.order, cores) if cores > 1 else (K + 1) * proc.order
    return (N + 1) * width ** 2 <= HELD_CHAIN_WORK


def _held_chain(proc: MAP, b: int, index: int, pools: list[PoolSpec], Dmc: np.ndarray,
                D: np.ndarray, rest_D: np.ndarray, c: np.ndarray, N: int, Z: float,
                base: PoolResult) -> PoolResult:
    """The pool's held tiers as a chain against the outside (module docstring, "held
    chain"): state ``(i, d, phase)`` -- ``i`` requests at the pool (holding or waiting for a
    token), ``d`` of them at ``b``, ``b``'s MAP phase; the other held tiers one station of
    rate ``X_O(a)`` with ``a = min(i, K) - d`` requests (their flow-equivalent rate, exact
    for one tier); the outside (think time, the other tiers and pools) a flow-equivalent
    source of rate ``lam(i)``, its throughput with ``N - i`` users."""
    from scipy.sparse import coo_matrix

    pool = pools[index]
    M = len(D)
    K = min(pool.size, N)
    last = b == pool.last - 1
    other = aggregate_pool(pools, index, rest_D, c, K)            # the held tiers but b
    XO = np.concatenate(([0.0], np.exp(other.logf[:K] - other.logf[1:K + 1])))
    outside = outside_source(pools, index, rest_D, c, N, Z)
    lam = outside.lam
    tr = _station(proc, int(c[b]), K)
    lev = tr.level
    cnt = np.searchsorted(lev, np.arange(K + 1), side="right")   # states at levels <= d
    h_lev = np.minimum(np.arange(N + 1), K)
    size = cnt[h_lev]
    offset = np.concatenate(([0], np.cumsum(size)))
    n = int(offset[-1])
    ts, td, tr_rate = tr.src, tr.dst, tr.rate
    up = tr.up
    down = ~up & (lev[td] < lev[ts])
    same = ~up & ~down
    src, dst, rate = [], [], []
    done = np.zeros(n)

    def add(a: np.ndarray, b_: np.ndarray, r: np.ndarray, counts: bool = False) -> None:
        src.append(a), dst.append(b_), rate.append(r)
        if counts:
            np.add.at(done, a, r)

    for i in range(N + 1):
        h = int(h_lev[i])
        o = offset[i]
        ok = lev[ts] <= h
        states = np.arange(size[i])
        a_st = h - lev[states]                     # requests at the other held tiers
        sel = same & ok                            # b's phase changes
        add(o + ts[sel], o + td[sel], tr_rate[sel])
        sel = down & ok                            # b completes one
        if last:                                   # it leaves; a waiter (if any) enters
            add(o + ts[sel], offset[i - 1] + td[sel], tr_rate[sel], True)
        else:
            add(o + ts[sel], o + td[sel], tr_rate[sel])
        if i < N and lam[i] > 0:                   # a request reaches the pool
            if not last and i < K:
                sel = up & ok
                add(o + ts[sel], offset[i + 1] + td[sel], lam[i] * tr_rate[sel])
            else:
                add(o + states, offset[i + 1] + states, np.full(states.shape, lam[i]))
        busy_o = a_st > 0                          # the other held tiers finish one
        if last:                                   # on to b
            sel = up & ok & (a_st[np.minimum(ts, size[i] - 1)] > 0)
            add(o + ts[sel], o + td[sel], XO[a_st[ts[sel]]] * tr_rate[sel])
        elif i > K:                                # it leaves; a waiter enters b
            sel = up & ok & (a_st[np.minimum(ts, size[i] - 1)] > 0)
            add(o + ts[sel], offset[i - 1] + td[sel], XO[a_st[ts[sel]]] * tr_rate[sel], True)
        elif i > 0:                                # it leaves
            st = states[busy_o]
            add(o + st, offset[i - 1] + st, XO[a_st[busy_o]], True)
    src, dst, rate = (np.concatenate(x) for x in (src, dst, rate))
    Q = coo_matrix((rate, (src, dst)), shape=(n, n)).tocsr()
    Q = Q - coo_matrix((np.asarray(Q.sum(axis=1)).ravel(), (np.arange(n), np.arange(n))),
                       shape=(n, n)).tocsr()
    pi = anchored_stationary(Q, 0, "COLAMD")
    if not np.all(np.isfinite(pi)) or pi.max() > 1e100 or pi.min() < -1e-9 * pi.max():
        # the empty pool so unlikely that the solve against it lost all precision: anchor
        # at the level the exponential pool model finds likeliest (its requests at the pool)
        likely = int(round(float(base.pool_busy[index] + base.pool_queue[index])))
        pi = anchored_stationary(Q, int(offset[min(max(likely, 0), N)]), "COLAMD")
    pi = np.clip(pi, 0.0, None)
    pi /= pi.sum()
    X = float(pi @ done)
    i_of = np.repeat(np.arange(N + 1), size)
    d_of = lev[np.concatenate([np.arange(k) for k in size])]
    h_of = h_lev[i_of]
    a_of = h_of - d_of
    pi_i = np.bincount(i_of, weights=pi, minlength=N + 1)
    Qm = np.zeros(M)
    Qm[b] = float(pi @ d_of)
    pa = np.bincount(a_of, weights=pi, minlength=K + 1)[:K + 1]
    if other.inner is not None:
        held_tiers = list(range(pool.first, pool.last))
        Qm[held_tiers] += pa @ other.inner[:, :len(held_tiers)]
    levels = np.flatnonzero(pi_i[:N] > LEVEL_FLOOR * pi_i.max())
    Qm += outside.queues(M, levels, pi_i)            # the outside's given N - i users
    busy = np.zeros(len(pools))
    queue = np.zeros(len(pools))
    busy[index] = float(pi @ h_of)
    queue[index] = float(pi @ (i_of - h_of))
    for g, s in enumerate(outside.stations):     # other pools' tokens
        if s.pool >= 0:
            for n_out in levels:
                pj = outside.marginal(g, N - int(n_out))
                pool_figures(s, pj, pools, rest_D, c, busy, queue, float(pi_i[n_out]))
    return _assemble(X, Qm, busy, queue, Dmc, D, c, pools, N, base, 3, base.flags)


def _assemble(X: float, Q: np.ndarray, busy: np.ndarray, queue: np.ndarray, Dmc: np.ndarray,
              D: np.ndarray, c: np.ndarray, pools: list[PoolSpec], N: int, base: PoolResult,
              solves: int, flags: tuple[str, ...]) -> PoolResult:
    """The result from the throughput, the tiers' mean queues and the pools' tokens held and
    requests waiting: residence times by Little's law, a pool's wait at its owning tier,
    each class's response time by the tiers' stretch (as :func:`solvers.pools.solve_pools`);
    ``throughput_curve``: the exponential pool model's with ``X(N)`` replaced."""
    M = len(D)
    R_m = Q / X
    stretch = np.divide(R_m, D, out=np.ones(M), where=D > 0)
    waits = queue / X
    R_c = (stretch[:, None] * Dmc).sum(axis=0) + waits.sum()
    for k, pool in enumerate(pools):
        R_m[pool.first] += waits[k]
    U = X * D / np.where(np.isinf(c), 1.0, c)
    sizes = np.array([float(pl.size) for pl in pools])
    util = np.divide(busy, sizes, out=np.zeros(len(pools)), where=sizes > 0)
    curve = base.throughput_curve.copy()
    curve[N] = X
    check_no_nan(X=X, R=R_c, R_m=R_m, pools=util)
    return PoolResult(X, R_c, R_m, U, util, busy, waits, busy / X, queue, curve, flags,
                      inner_solves=solves)


def base_mix(Dmc: np.ndarray, mix: Any) -> np.ndarray:
    """The throughput mix, normalised (equal shares by default)."""
    C = Dmc.shape[1]
    p = np.full(C, 1.0 / C) if mix is None else np.asarray(mix, dtype=float)
    return p / p.sum()


def _replace_flags(res: PoolResult, flags: tuple[str, ...]) -> PoolResult:
    return dataclasses.replace(res, flags=flags)
