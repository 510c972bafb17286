"""A pool over a tier whose services vary far more than exponential -- classes of very different
cost, or a class whose cost varies with its data -- solved by the held tiers' Markov chain with
that tier's services as a phase-type renewal process.

:mod:`solvers.pools_general` scales the flow-equivalent station's wait for a token by one
factor from the holding time's first two moments (Lee and Longton 1959). Against simulation
that factor is too small at low load and too large near saturation (docs/accuracy.md, "Thread
and connection pools": on the real testbed's shape the simulated wait is 1.8x the factor's at
10 users, 0.9x at 40; with a pool of 4 over one core 24x at 10 users). The cause is the pool's
state, not its moments: a request waits when every token is held, which at low load happens
mostly while a dear request is in service at a tier of fewer cores than tokens, the other
holders queued behind it -- and then it waits for that request's remaining service, all the
tokens coming free together after it. A factor on the token queue cannot know it; a chain that
follows the tier's service phase does. The wait's excess therefore falls with the load (the
heavy-traffic limit of M/G/c is the two-moment factor, Kollerstrom 1974; its light-traffic
limit depends on higher moments, Burman and Smith 1983), which the chain gives by itself.

**Rule.** At the held tier ``b`` whose services' second moment exceeds exponential service's
the most (``E[S^2] - 2 E[S]^2`` over the mix, each class's own spread included), the service
of a request is class ``c``'s with probability ``p_c`` (the mix; a tier's successive services
are then a renewal process of independent classes): an exponential phase of mean ``D_{b,c}``,
or -- where the class's own SCV ``v`` exceeds 1 -- a hyperexponential of two phases with
balanced means (Whitt 1982) and that SCV. A class whose ``v`` is below 1 keeps an exponential
phase (a holding time less variable than the product form's is not used to shorten the wait,
as in :mod:`solvers.pools_general`). This phase-type process (a renewal MAP: ``D0`` the
phases' rates on the diagonal, ``D1`` the rates times the entry probabilities) goes to
:func:`solvers.pools_bursty.solve_pools_bursty`'s held chain: the pool's requests with ``b``'s
jobs and their phases, the other held tiers a flow-equivalent station, the outside a
flow-equivalent source (Chandy et al. 1975). Each class's response time is read back as at
first-come-first-served tiers: at each tier its own demand plus the tier's queueing wait
``R_m - D_m``, the same for every class (the pipeline's read-back of FCFS tiers,
:mod:`streams.predict.model`), plus the wait for each token -- not each tier's stretch, which
would stretch a dear class by the cheap ones' queue as much as its own service.

**Pure delays** (``delays``, :mod:`solvers.delay`) go into the chain as infinite-server
stations inside the pools' holding time, the spread tier's own beside the other held tiers
(:func:`solvers.pools_bursty.solve_pools_bursty`, "pure delays": a delay holds the token but
no core, Lazowska et al. 1984, ch. 3). Whether the chain applies is decided without them, so
the solution moves continuously to the one without delays as they go to 0; where it does not
apply, :func:`solvers.pools_general.solve_pools_general` solves the network with the delay
stations. Each class's response time is read back with its delays.

**Processor-sharing tiers** (``ps``: a tier whose cores are time-shared, such as a database
with a process per connection on one core) are never the chain's tier: the chain's picture --
the other holders queued behind the dear request in service, all the tokens free together after
it -- is first-come-first-served. Under processor sharing the holders progress together, a cheap
request leaves while the dear one is still served, and the tier's queue is insensitive to its
service distribution beyond the mean (BCMP: Baskett et al. 1975): the tier is product form, its
SCV 1 (``tier_scv`` and ``class_scv`` there) wherever it is solved -- at the chain's other held
tiers and in :func:`solvers.pools_general.solve_pools_general`'s factor, which keeps the classes'
spread of cost the token's first-come-first-served queue sees (Lee and Longton 1959). The chain
takes the held first-come-first-served tier of most spread, if any. A processor-sharing tier whose
holders cannot outnumber its cores -- a pool over it of at most that many tokens -- shares no
core: each holder is served alone under either discipline, so it counts as first-come-first-served
(:func:`sharing`; a single-threaded server held by a pool of 1 is the case).

Where the chain does not apply -- no tier of spread beyond exponential, ``b`` not first or last
of one pool's held tiers, no think time, no other held demand, nested pools over ``b``, a
chain past its budget, a non-exponential service at another held tier, or a chain whose
solution is not finite (a many-core station of phases far apart) -- the
solution is :func:`solvers.pools_general.solve_pools_general`'s, which therefore stays bit for
bit where the classes are of equal exponential cost or there is one exponential class.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from .delay import any_delay, fold_pool_result, with_delay_stations
from .pools import PoolResult, PoolSpec
from .pools_bursty import base_mix, held_chain_applies, solve_pools_bursty
from .pools_general import _class_scv, solve_pools_general
from .processes import MAP

__all__ = ["hyperexponential_phases", "spread_processes", "solve_pools_spread", "ps_product_form",
           "sharing", "SPREAD_FLAG"]

#: a tier's services whose second moment is within this share of exponential service's are
#: taken as exponential (equal costs, or classes within rounding of each other)
EXPONENTIAL = 1e-6
#: how the chain's flag begins
SPREAD_FLAG = "pools: spread"


def hyperexponential_phases(mean: float, scv: float) -> tuple[list[float], list[float]]:
    """``(rates, probabilities)`` of one class's service: exponential of ``mean``, or for
    ``scv > 1`` the balanced-means hyperexponential (Whitt 1982)."""
    if not scv > 1.0:
        return [1.0 / mean], [1.0]
    p = 0.5 * (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0)))
    return [2.0 * p / mean, 2.0 * (1.0 - p) / mean], [p, 1.0 - p]


def _ps_mask(ps: Any, M: int) -> np.ndarray | None:
    """``ps`` as ``(M,)`` booleans (a copy), ``None`` where no tier is processor sharing."""
    if ps is None or not np.any(ps):
        return None
    mask = np.array(ps, dtype=bool).reshape(-1)
    if mask.shape != (M,):
        raise ValueError(f"ps: must be {M} booleans, one per tier, got {ps!r}")
    return mask


def sharing(ps: Any, servers: Any, pools: Sequence[PoolSpec], M: int) -> np.ndarray | None:
    """The processor-sharing tiers (``ps``, ``(M,)`` booleans; ``None``: none) that can share a
    core: those no pool of at most their cores' tokens holds (module docstring)."""
    mask = _ps_mask(ps, M)
    if mask is None:
        return None
    c = np.ones(M) if servers is None else np.broadcast_to(np.asarray(servers, float), (M,))
    for pool in pools:
        for m in range(pool.first, pool.last):
            if pool.size <= c[m]:
                mask[m] = False
    return mask


def ps_product_form(ps: Any, M: int, C: int, tier_scv: Any = None, class_scv: Any = None
                    ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(tier_scv, class_scv)`` with the processor-sharing tiers' (``ps``, ``(M,)`` booleans;
    ``None``: none) SCVs 1: product form there (module docstring)."""
    mask = _ps_mask(ps, M)
    if mask is None:
        return tier_scv, class_scv
    v = np.ones(M) if tier_scv is None else np.array(tier_scv, dtype=float).reshape(-1)
    v[mask] = 1.0
    vc = None if class_scv is None else np.array(class_scv, dtype=float)
    if vc is not None and vc.ndim == 2 and vc.shape[0] == M:
        vc[mask] = 1.0
    return v, vc


def spread_processes(demands: Any, mix: Any, servers: Any, pools: Sequence[PoolSpec],
                     tier_scv: Any = None, class_scv: Any = None,
                     ps: Any = None) -> list[MAP] | None:
    """Per tier its service process for the held chain (module docstring): exponential of
    mean ``D_m`` at every tier but the one held first-come-first-served tier of most spread
    (``ps``: the processor-sharing tiers, never it), which takes the classes' phase-type
    mixture; ``None`` where no such tier's services vary beyond exponential, or another held
    tier's ``tier_scv`` is not 1 (the chain takes one tier of spread)."""
    Dmc = np.asarray(demands, dtype=float)
    Dmc = Dmc[:, None] if Dmc.ndim == 1 else Dmc
    M, C = Dmc.shape
    ps = sharing(ps, servers, pools, M)
    tier_scv, class_scv = ps_product_form(ps, M, C, tier_scv, class_scv)
    shared = np.zeros(M, dtype=bool) if ps is None else ps
    p = base_mix(Dmc, mix)
    c = np.ones(M) if servers is None else np.broadcast_to(
        np.asarray(servers, dtype=float), (M,))
    v = np.ones(M) if tier_scv is None else np.asarray(tier_scv, dtype=float).reshape(-1)
    delay = np.isinf(c)
    vc = _class_scv(class_scv, np.where(delay, 0.0, v), delay, C)
    vc = np.broadcast_to(np.where(delay, 0.0, v)[:, None], (M, C)) if vc is None else vc
    held = sorted({m for pl in pools for m in range(pl.first, pl.last)})
    D = Dmc @ p
    excess = np.full(M, -np.inf)
    for m in held:
        if delay[m] or shared[m] or not D[m] > 0:
            continue
        second = float(p @ (Dmc[m] ** 2 * (1.0 + np.maximum(vc[m], 1.0))))
        excess[m] = second - 2.0 * D[m] ** 2
    b = int(np.argmax(excess))
    if not excess[b] > EXPONENTIAL * 2.0 * D[b] ** 2:
        return None
    if any(v[m] != 1.0 for m in held if m != b and not delay[m]):
        return None
    rates, alpha = [], []
    for k in range(C):
        if p[k] > 0 and Dmc[b, k] > 0:
            r, q = hyperexponential_phases(float(Dmc[b, k]), float(vc[b, k]))
            rates += r
            alpha += [p[k] * x for x in q]
    a = np.array(alpha) / sum(alpha)
    r = np.array(rates)
    proc = MAP(np.diag(-r), np.outer(r, a))
    return [proc if m == b else MAP.exponential(float(D[m]) if D[m] > 0 else 1.0)
            for m in range(M)]


def _fcfs_read_back(res: PoolResult, demands: Any, mix: Any,
                    pools: Sequence[PoolSpec]) -> np.ndarray:
    """Each class's response time: per tier its demand (its delay included) plus the tier's
    wait ``R_m - D_m`` (the pools' waits taken out of their owning tiers first), plus every
    pool's wait."""
    Dmc = np.asarray(demands, dtype=float)
    Dmc = Dmc[:, None] if Dmc.ndim == 1 else Dmc
    D = Dmc @ base_mix(Dmc, mix)
    Rm = np.array(res.residence_time, dtype=float)
    waits = np.asarray(res.pool_waiting_time, dtype=float)
    for k, pool in enumerate(pools):
        Rm[pool.first] -= waits[k]
    queue = np.maximum(Rm - D, 0.0)
    return Dmc.sum(axis=0) + float(queue.sum()) + float(waits.sum())


#: :func:`solve_pools_spread`'s ``processes`` default: :func:`spread_processes` computed there
COMPUTE: Any = object()


def solve_pools_spread(demands: Any, population: int, think_time: float = 0.0,
                       servers: Any = None, pools: Sequence[PoolSpec] = (), mix: Any = None,
                       tier_scv: Any = None, class_scv: Any = None,
                       delays: Any = None, ps: Any = None,
                       processes: Any = COMPUTE) -> PoolResult:
    """The pool model with the held first-come-first-served tier of most spread in the held
    chain (module docstring), :func:`solvers.pools_general.solve_pools_general` where the
    chain does not apply; ``delays``: ``delta_{m,c}`` the tiers' pure delays (``None``:
    none), in the residence times and the classes' response times returned; ``ps``: ``(M,)``
    the processor-sharing tiers, product form (module docstring; ``None``: none);
    ``processes``: :func:`spread_processes` of these arguments where the caller has it (it
    does not depend on the population: a capacity search's probes share it). The chain's
    solutions carry :data:`SPREAD_FLAG`'s flag."""
    pools = list(pools)
    Dmc = np.asarray(demands, dtype=float)
    M, C = (Dmc.shape[0], 1) if Dmc.ndim == 1 else Dmc.shape
    ps = sharing(ps, servers, pools, M)
    if not pools or population == 0:
        procs = None
    elif processes is COMPUTE:
        procs = spread_processes(demands, mix, servers, pools, tier_scv, class_scv, ps)
    else:
        procs = processes
    tier_scv, class_scv = ps_product_form(ps, M, C, tier_scv, class_scv)
    res = None
    if procs is not None and held_chain_applies(procs, int(population), think_time, servers,
                                                pools, demands, mix):
        try:
            with np.errstate(invalid="ignore", divide="ignore"):
                res = solve_pools_bursty(procs, int(population), think_time, servers, pools,
                                         mix, demands, delays)
        except FloatingPointError:      # a chain the held tier's station cannot solve
            res = None
    if res is not None:
        b = next(m for m, q in enumerate(procs) if q.order > 1)
        Dmc = np.asarray(demands, dtype=float)
        Dmc = Dmc[:, None] if Dmc.ndim == 1 else Dmc
        if any_delay(delays):
            Dmc = Dmc + np.asarray(delays, dtype=float).reshape(Dmc.shape)
        return replace(res, response_time=_fcfs_read_back(res, Dmc, mix, pools),
                       flags=res.flags + (
            f"{SPREAD_FLAG}: tier {b}'s services as the classes' phase-type mixture in the "
            f"held chain",))
    if not any_delay(delays):
        return solve_pools_general(demands, population, think_time, servers, pools, mix,
                                   tier_scv, class_scv)
    D2, c2, pools2 = with_delay_stations(demands, servers, delays, pools)
    twice = [None if x is None else np.repeat(np.asarray(x, dtype=float), 2, axis=0)
             for x in (tier_scv, class_scv)]
    return fold_pool_result(solve_pools_general(D2, population, think_time, c2, pools2, mix,
                                                *twice))
