"""A thread or connection pool on an open workload: Poisson arrivals into a pool of ``K``
tokens held across a run of tiers ``H``.

Two methods, the first where it applies:

**The held chain** (:func:`held_chain`): where the held tiers are exponential per class (no
tier SCV but 1, no pool nested inside; or, for one class, one bursty tier whose MAP is
served in start order on its cores -- the closed route's held-chain station,
:mod:`solvers.pools_station`, where Mi et al. 2008's slow runs fill the pool), or where a
class's own service SCV ``v > 1`` at a held tier is given -- that class served there as the
two-phase hyperexponential of its mean and ``v`` with balanced means (Whitt 1982; a ``v``
below 1 stays exponential: a holding time less variable than exponential is not used to
shorten the wait), its phase drawn on entering the tier, so the chain stays exact for it, at
processor-sharing tiers (whose mean residence is insensitive to the law but whose holding
time, and so the token's wait, is not: two long requests holding both tokens of a pool of two
block the rest) and first-come-first-served ones alike -- the pool, its
token queue and the holders -- where each is and of which class -- are one Markov chain:
level ``j`` the requests at the pool, phase the ``min(j, K)`` holders' places (each tier's
cores, each pure delay an infinite-server station after its tier: Lazowska et al. 1984, ch.
3; a first-come-first-served tier with fewer cores than tokens keeps their order). Past
``K`` the levels repeat (an arrival joins the token queue, a departure hands its token on),
so it is a quasi-birth-death process
solved matrix-geometrically (Neuts 1981; :mod:`solvers.open.qbd`) -- exact, the classes'
spread of cost included (two dear requests holding both tokens of a pool of two block the
cheap ones, which a mean cannot show), its cost independent of the load, within
:data:`CHAIN_WORK`. A level's states are the ways to place ``K`` holders on the stations'
positions (a class at a station, or each of its phases): with ``P`` positions at
count-kept stations ``C(K + P - 1, P - 1)``. The testbed's shape (4 classes over two tiers,
``P`` = 8, 9 with one hyperexponential class) has 36 / 45 at ``K = 2``, 120 / 165 at 3 and
330 / 495 at 4, past the budget (at 32: 1.5e7 / 7.7e7); a first-come-first-served tier
with fewer cores than tokens keeps the holders' order (``classes^n``), more. Past the budget
the flow-equivalent server below takes over, flagged by the caller.

**The flow-equivalent server** (Chandy et al. 1975; Lazowska et al. 1984, ch. 8) elsewhere:
the held tiers are solved alone as a closed network without think time at every population
``n = 1..K`` (:func:`held_curve`: the closed pool route's own solvers -- bursty tiers, spread of
service and pools nested inside as :func:`solvers.pools_spread.solve_pools_spread` and
:func:`solvers.pools_bursty.solve_pools_bursty` solve them; the pool itself never binds at
``n <= K``): their throughput ``X_H(n)`` and each class's requests at each held tier
``N_{h,c}(n)``. The pool with its token queue is then a birth-death process
(:func:`solve_open_pool`): with ``j`` requests at it, it completes at ``X_H(min(j, K))``, so::

    pi(j) ~ prod_{i <= j} lambda / X_H(min(i, K)),

a geometric tail past ``K`` of ratio ``r = lambda / X_H(K)``; class ``c``'s residence at held
tier ``h`` by Little over ``pi``: ``R_{h,c} = sum_j pi(j) N_{h,c}(min(j, K)) / (p_c lambda)``.
Its one approximation is that the held tiers settle between the pool's changes of state
(Courtois 1977): exact for one exponential held tier of ``c`` cores (the station is then
M/M/min(K, c)), but with several held tiers and few tokens the pool's population changes as
fast as the held tiers move, and the server overstates the response time near saturation
(+15% to +25% at 80-95% of saturation for two tokens over two tiers, against the exact
chain: bench/accuracy/pool_open.py), and one aggregate class misses the cheap classes' wait
behind the dear ones -- which is why the chain comes first. Where its held tiers are one level
and not bursty, the server's wait for a token is scaled by the holding time's two-moment
factor (:func:`fes_wait_factor`): the dear classes' spread, and each class's own SCV, reach the
token queue as the holding time's variability.

Both: stable iff ``lambda`` is below the holders' throughput with every token held
(``X_H(K)``, or the chain's own: :attr:`HeldChain.saturation`; else flagged unstable, the
figures ``inf``, never NaN); the wait for a token (FCFS, the same for every class)
``W = E[(j - K)+] / lambda`` (Little), the tokens held ``E[min(j, K)]``. The pool's
departures are Poisson (a birth-death queue with Poisson input: Burke 1956, for the
flow-equivalent station; the chain's are not exactly, which the tiers after the pool take as
Poisson), and the tiers before it are open queues of the same rate (Jackson 1963). The held
curve and the chain's plan do not depend on ``lambda``: a capacity search builds them once.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .open.qbd import QBDPlan, plan_qbd, solve_planned
from .open.tiers import OpenTiersResult
from .delay import cpu_station, with_delay_stations
from .pools import PoolSpec, solve_pools
from .pools_general import holding_factors
from .pools_bursty import solve_pools_bursty
from .held_network import enter_station, held_counts, held_stations, routes, station_states
from .pools_spread import solve_pools_spread
from .pools_station import last_start_states
from .processes import MAP
from .results import check_no_nan

__all__ = ["CHAIN_WORK", "HeldChain", "HeldCurve", "OpenPoolResult", "held_chain", "held_curve",
           "held_network", "outermost", "solve_open_pool", "with_pools", "fes_wait_factor"]


@dataclass(frozen=True, eq=False)
class HeldCurve:
    """The held tiers of one pool solved closed at ``n = 0..size``: ``throughput`` ``X_H(n)``
    (``(size + 1,)``, ``X_H(0) = 0``), ``residence`` ``R_{h,c}(n)`` of class ``c`` at held
    tier ``h`` (``(size + 1, H, C)``; row 0 is row 1's, a request alone), ``mix`` ``p_c``;
    ``flags`` of the closed solves."""

    size: int
    throughput: np.ndarray
    residence: np.ndarray
    mix: np.ndarray
    flags: tuple[str, ...] = ()
    #: the exact chain where it applies (:func:`held_chain`), with the held tiers' demands
    #: ``D_{h,c}`` and delays ``delta_{h,c}`` (``(H, C)``) for the classes' read-back
    chain: "HeldChain | None" = None
    demands: np.ndarray | None = None
    delays: np.ndarray | None = None
    #: the pools inside this one: their indices among the model's pools and, per population
    #: ``n = 0..size``, each one's mean tokens held and requests waiting for a token in the
    #: closed held network (``(size + 1, P, 2)``; row 0 zeros) -- their figures on the open
    #: route along the flow-equivalent server (:func:`solve_open_pool`)
    nested: tuple[int, ...] = ()
    nested_jobs: np.ndarray | None = None
    #: the flow-equivalent server's factor on the wait for a token (:func:`fes_wait_factor`;
    #: 1 where the chain applies, or the held network is nested or bursty)
    wait_factor: float = 1.0

    @property
    def jobs(self) -> np.ndarray:
        """``N_{h,c}(n) = p_c X_H(n) R_{h,c}(n)`` (Little's law), ``(size + 1, H, C)``."""
        return self.throughput[:, None, None] * self.residence * self.mix[None, None, :]

    @property
    def saturation(self) -> float:
        """The largest rate the pool carries: the held chain's (:attr:`HeldChain.saturation`)
        where it has one, else ``X_H(K)``."""
        if self.chain is not None:
            return self.chain.saturation
        return float(self.throughput[self.size])


@dataclass(frozen=True, eq=False)
class OpenPoolResult:
    """One pool at arrival rate ``lambda``: ``residence_time`` ``R_{h,c}`` at the held tiers
    (``(H, C)``, the token's wait not included), ``utilization`` ``E[min(j, K)] / K``, ``busy``
    ``E[min(j, K)]``, ``waiting_time`` ``W``, ``holding_time`` ``E[min(j, K)] / lambda``,
    ``queue`` ``E[(j - K)+]``; ``stable`` (``lambda`` below :attr:`HeldCurve.saturation`;
    else the times are ``inf`` and the utilization 1)."""

    residence_time: np.ndarray
    utilization: float
    busy: float
    waiting_time: float
    holding_time: float
    queue: float
    stable: bool
    flags: tuple[str, ...] = field(default_factory=tuple)
    #: per pool inside this one (:attr:`HeldCurve.nested`, that order) its mean tokens held
    #: and requests waiting for a token
    nested: tuple[tuple[float, float], ...] = ()


def held_curve(solve: Callable[[int], tuple[float, np.ndarray]], size: int, mix: Any,
               flags: Sequence[str] = ()) -> HeldCurve:
    """:class:`HeldCurve` from ``solve(n) -> (X_H(n), R_{h,c}(n))``, the closed held network's
    throughput and per-class residence times at population ``n`` (``n = 1..size``), by
    Little's law ``N_{h,c}(n) = p_c X_H(n) R_{h,c}(n)``."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"size: must be an integer >= 1, got {size!r}")
    p = np.asarray(mix, dtype=float)
    if p.ndim != 1 or np.any(p < 0) or not p.sum() > 0:
        raise ValueError(f"mix: must be shares >= 0 with a positive sum, got {mix!r}")
    p = p / p.sum()
    X = np.zeros(size + 1)
    rows: list[np.ndarray] = []
    for n in range(1, size + 1):
        x, R = solve(n)
        R = np.asarray(R, dtype=float)
        if not (x > 0 and math.isfinite(x)) or R.ndim != 2 or R.shape[1] != p.shape[0]:
            raise ValueError(f"solve: must give a finite throughput > 0 and residence times "
                             f"(held tiers x {p.shape[0]} classes) at n = {n}, got {x!r}, "
                             f"shape {R.shape}")
        X[n] = x
        rows.append(R)
    return HeldCurve(int(size), X, np.stack([rows[0]] + rows), p, tuple(flags))


def held_network(demands: Any, servers: Any, pools: Sequence[PoolSpec], index: int,
                 mix: Any = None, tier_scv: Any = None, delays: Any = None, ps: Any = None,
                 processes: Sequence[MAP | None] | None = None,
                 class_scv: Any = None) -> HeldCurve:
    """The :class:`HeldCurve` of ``pools[index]`` in a network of ``demands`` ``D_{m,c}``
    (tiers x classes) and ``servers``: its held tiers with the pools inside them, no think
    time, solved at ``n = 1..K`` by the closed pool route -- with a bursty held tier (a MAP
    of order > 1 in ``processes``) :func:`solve_pools_bursty`, else
    :func:`solve_pools_spread` (``tier_scv``, ``delays``, ``ps`` per tier as there). Each
    class's residence at a held tier is the tier's stretch ``R_h / D_h`` times its demand
    there plus its delay (the closed route's read-back, :mod:`solvers.pools`). ``class_scv``
    ``v_{m,c}`` (tiers x classes; ``None`` or 1: exponential) is each class's own service
    SCV: where some held tier's exceeds 1 the held chain serves that class there as a
    balanced-means hyperexponential (:class:`solvers.held_network.HeldStation`'s phases) -- at
    a processor-sharing tier too, whose mean residence is insensitive to it but whose holding
    time, and so the wait for a token, is not -- and the tier's SCV ``tier_scv`` is then not
    asked of the chain (the classes' own SCVs say more); a ``v`` below 1 is served
    exponentially."""
    Dmc = np.asarray(demands, dtype=float)
    Dmc = Dmc[:, None] if Dmc.ndim == 1 else Dmc
    M, C = Dmc.shape
    p = np.full(C, 1.0 / C) if mix is None else np.asarray(mix, dtype=float)
    p = p / p.sum()
    pool = pools[index]
    h = slice(pool.first, pool.last)
    within = [i for i, q in enumerate(pools) if pool.first <= q.first and q.last <= pool.last]
    inner = tuple(PoolSpec(pools[i].size, pools[i].first - pool.first,
                           pools[i].last - pool.first, pools[i].name) for i in within)
    occupancy: list[np.ndarray] = []
    c = np.broadcast_to(np.asarray(1 if servers is None else servers, dtype=float), (M,))[h]
    Dh = Dmc[h]
    dh = None if delays is None else np.asarray(delays, dtype=float).reshape(M, C)[h]
    procs = None if processes is None else list(processes)[h]
    bursty = procs is not None and any(q is not None and q.order > 1 for q in procs)
    D = Dh @ p
    vc = None
    if class_scv is not None:
        vc = np.asarray(class_scv, dtype=float)
        if vc.shape != (M, C) or not np.all(np.isfinite(vc) & (vc >= 0)):
            raise ValueError(f"class_scv: must be {M} x {C} finite SCVs >= 0, got {class_scv!r}")
        vc = vc[h]
        if not np.any(vc[Dh > 0] > 1.0):
            vc = None                  # no class's spread above exponential: today's chain
    flags: list[str] = []

    def one(n: int) -> tuple[float, np.ndarray]:
        if bursty:
            shapes = [q.scaled(float(d)) if q is not None else MAP.exponential(float(d))
                      for q, d in zip(procs, D)]
            res = solve_pools_bursty(shapes, n, 0.0, c, inner, p, Dh, dh)
        else:
            res = solve_pools_spread(Dh, n, 0.0, c, inner, p,
                                     None if tier_scv is None else np.asarray(tier_scv)[h],
                                     vc, delays=dh, ps=None if ps is None else np.asarray(ps)[h])
        flags.extend(f for f in res.flags if f not in flags)
        occupancy.append(np.column_stack([res.pool_busy, res.pool_queue]))
        Rm = np.asarray(res.residence_time, dtype=float)
        cpu = Rm - (0.0 if dh is None else dh @ p)
        stretch = np.divide(cpu, D, out=np.ones_like(D), where=D > 0)
        return float(res.throughput), stretch[:, None] * Dh + (0.0 if dh is None else dh)

    exponential = len(inner) == 1 and (vc is not None or tier_scv is None or np.allclose(
        np.asarray(tier_scv, dtype=float)[h][D > 0], 1.0))
    chain = held_chain(Dh, c, dh, p, int(pool.size),
                       None if ps is None else np.asarray(ps, dtype=bool)[h],
                       procs if bursty else None, vc) if exponential else None
    try:
        curve = held_curve(one, int(pool.size), p)
    except (RuntimeError, np.linalg.LinAlgError):
        if chain is None:
            raise
        # the chain needs of the curve only a lone request's residence (rate 0)
        lone = Dh + (0.0 if dh is None else dh)
        X = np.full(int(pool.size) + 1, chain.saturation)
        X[0] = 0.0
        curve = HeldCurve(int(pool.size), X, np.repeat(lone[None], int(pool.size) + 1, 0), p)
    others = [k for k, i in enumerate(within) if i != index]
    nested_jobs = None
    if others and len(occupancy) == int(pool.size):
        nested_jobs = np.stack([np.zeros((len(others), 2))]
                               + [o[others] for o in occupancy])
    factor = 1.0
    if chain is None and len(inner) == 1 and not bursty:
        factor = fes_wait_factor(Dh, c, dh, p, int(pool.size),
                                 None if tier_scv is None else np.asarray(tier_scv)[h],
                                 None if vc is None else np.maximum(vc, 1.0))
    return HeldCurve(curve.size, curve.throughput, curve.residence, curve.mix,
                     tuple(flags) if chain is None else (), chain, Dh, dh,
                     tuple(within[k] for k in others) if nested_jobs is not None else (),
                     nested_jobs, factor)


def fes_wait_factor(demands: np.ndarray, servers: np.ndarray, delays: np.ndarray | None,
                    mix: np.ndarray, size: int, tier_scv: Any = None,
                    class_scv: np.ndarray | None = None) -> float:
    """The flow-equivalent server's factor on the wait for a token, from the holding time's
    first two moments: ``(1 + c_H^2) / 2`` (Lee and Longton 1959), ``c_H^2`` the SCV of the
    time a request holds a token with all ``size`` held -- the held tiers (``demands``
    ``D_{h,c}``, ``servers``, pure ``delays``) solved closed at ``size``
    (:func:`solvers.pools.solve_pools`), each class's residence with its own service SCV
    (``class_scv`` ``v_{h,c}``; NaN or ``None``: the tier's ``tier_scv``, default 1) mixed
    over the classes (:func:`solvers.pools_general.holding_factors`, which keeps a factor
    below 1 at 1). The server (Chandy et al. 1975) takes the holders' throughput but not the
    spread of their holding times: a dear class holding every token keeps the cheap ones
    waiting for its whole service, which an aggregate class of the mean cost cannot show, and
    the wait is what grows with that spread (the two-moment M/G/c approximation, exact in
    heavy traffic, Kollerstrom 1974). A processor-sharing tier's class SCVs are kept: its mean
    residence is insensitive to them, its holding time is not."""
    H, C = demands.shape
    D2, c2 = demands, np.asarray(servers, dtype=float)
    v = np.ones(H) if tier_scv is None else np.asarray(tier_scv, dtype=float).reshape(H)
    vc = np.full((H, C), np.nan) if class_scv is None else np.asarray(class_scv, dtype=float)
    pools: tuple[PoolSpec, ...] = (PoolSpec(int(size), 0, H),)
    if delays is not None and np.any(delays > 0):
        D2, c2, pools = with_delay_stations(demands, c2, delays, pools)
        cpu = np.array([cpu_station(m) for m in range(H)])
        v2, vc2 = np.zeros(2 * H), np.full((2 * H, C), np.nan)
        v2[cpu], vc2[cpu] = v, vc
        v, vc = v2, vc2
    base = solve_pools(D2, int(size), 0.0, c2, pools, mix)
    factors, _ = holding_factors(D2, mix, c2, pools, base, v, vc)
    return float(factors[0])


def solve_open_pool(rate: float, curve: HeldCurve) -> OpenPoolResult:
    """The pool of ``curve`` fed Poisson arrivals of total ``rate`` at the curve's mix
    (module docstring)."""
    lam = float(rate)
    if not (lam >= 0 and math.isfinite(lam)):
        raise ValueError(f"rate: must be finite requests/s >= 0, got {rate!r}")
    K, X, p = curve.size, curve.throughput, curve.mix
    H, C = curve.residence.shape[1:]
    hit = p > 0
    if lam == 0.0:           # the limit lambda -> 0: every request alone in the pool
        R = curve.residence[1].copy()
        return OpenPoolResult(R, 0.0, 0.0, 0.0, float(R.sum(axis=0) @ p), 0.0, True)
    if not lam < curve.saturation:
        return _saturated(lam, curve)
    if curve.chain is not None:
        return _chain_result(lam, curve)
    r = lam / X[K]
    # log a_j = sum_{i <= j} log(lambda / X_H(i)), j = 0..K; the tail a_K r^i, i >= 1
    loga = np.concatenate(([0.0], np.cumsum(np.log(lam / X[1:]))))
    top = float(loga.max())
    a = np.exp(loga - top)
    tail = a[K] * r / (1.0 - r)                        # sum_{j > K} a_j
    total = float(a.sum() + tail)
    pi = a / total
    above = float(pi[K] + tail / total)                # P(j >= K)
    queue = float(a[K] * r / (1.0 - r) ** 2 / total)  # E[(j - K)+]
    j = np.arange(K + 1, dtype=float)
    busy = float(pi[:K] @ j[:K] + K * above)
    weights = np.concatenate((pi[:K], [above]))
    N = np.tensordot(weights, curve.jobs, axes=1)      # (H, C)
    R = np.divide(N, (p * lam)[None, :], out=np.zeros((H, C)), where=hit[None, :])
    if not hit.all():        # a class out of the mix: the populations its arrival would make
        arrive = np.concatenate((pi[:K - 1], [1.0 - float(pi[:K - 1].sum())]))
        R[:, ~hit] = np.tensordot(arrive, curve.residence[1:], axes=1)[:, ~hit]
    nested: tuple[tuple[float, float], ...] = ()
    if curve.nested_jobs is not None:        # the pools inside, weighted as the held tiers
        occ = np.tensordot(weights, curve.nested_jobs, axes=1)
        nested = tuple((float(b), float(q)) for b, q in occ)
    queue *= curve.wait_factor
    result = OpenPoolResult(R, busy / K, busy, queue / lam, busy / lam, queue, True,
                            nested=nested)
    check_no_nan(residence_time=R, busy=busy, queue=queue)
    return result


def outermost(pools: Sequence[PoolSpec]) -> list[int]:
    """The pools held inside no other (of two over the same tiers, the first): each is one
    station of the open network; the pools inside it are in its held network."""
    def inside(i: int, j: int) -> bool:
        a, b = pools[i], pools[j]
        return i != j and b.first <= a.first and a.last <= b.last \
            and ((a.first, a.last) != (b.first, b.last) or i > j)
    return [i for i in range(len(pools)) if not any(inside(i, j) for j in range(len(pools)))]


def with_pools(res: OpenTiersResult, rate: float, pools: Sequence[PoolSpec],
               curves: Sequence[HeldCurve | None], demands: Any
               ) -> tuple[OpenTiersResult, list[OpenPoolResult | None]]:
    """The open tiers ``res`` (:func:`solvers.open.solve_open_tiers` at total ``rate``) with
    each outermost pool (``curves[k]`` its :class:`HeldCurve`; ``None`` for a pool inside
    another, whose figures come from its outer one's held network: its tokens held and
    queue at each of the outer pool's populations weighted as the held tiers' are, Little's
    law for its wait -- the flow-equivalent server's approximation) in place of its held
    tiers: their
    residence times :func:`solve_open_pool`'s, the wait for its token added to every class at
    its first tier (FCFS on the token; the owning tier's timer runs while it waits, as the
    closed route counts it), ``wait`` and ``queue_length`` of the held tiers from those
    residence times. The tiers outside the pools keep ``res``'s figures: the pool station's
    departures are Poisson (Burke 1956). Stable where every tier outside the pools and every
    pool is; a pool's held tiers are ``inf`` where it is not."""
    Dmc = np.asarray(demands, dtype=float)
    Dmc = Dmc[:, None] if Dmc.ndim == 1 else Dmc
    lam = res.throughput
    total = float(lam.sum())
    p = lam / total if total > 0 else None
    Rmc = res.residence_time.copy()
    wait, jobs = res.wait.copy(), res.queue_length.copy()
    held = np.zeros(Rmc.shape[0], dtype=bool)
    out: list[OpenPoolResult | None] = []
    flags = list(res.flags)
    stable = True
    for pool, curve in zip(pools, curves):
        if curve is None:
            out.append(None)              # a pool inside another: filled in below
            continue
        h = slice(pool.first, pool.last)
        held[h] = True
        one = solve_open_pool(total, curve)
        out.append(one)
        stable &= one.stable
        flags += [f"pool {pool.name or pool.first}: {f}" for f in one.flags]
        Rmc[h] = one.residence_time
        Rmc[pool.first] += one.waiting_time
        mean = Rmc[h] @ (curve.mix if p is None else p)
        demand = Dmc[h] @ (curve.mix if p is None else p)
        wait[h] = np.where(np.isfinite(mean), np.maximum(mean - demand, 0.0), math.inf)
        jobs[h] = total * mean if total > 0 else 0.0
    for pool, curve, one in zip(pools, curves, list(out)):
        if curve is None or one is None:
            continue
        none = (0.0, 0.0) if one.stable else (math.inf, math.inf)   # no rate, or saturated
        for k, (busy, queue) in zip(curve.nested, one.nested or (none,) * len(curve.nested)):
            spec = pools[k]
            R = one.residence_time[spec.first - pool.first:spec.last - pool.first]
            ok = one.stable and math.isfinite(busy)
            out[k] = OpenPoolResult(R, busy / spec.size if ok else 1.0, busy if ok else
                                    float(spec.size), queue / total if ok and total > 0
                                    else (0.0 if ok else math.inf),
                                    busy / total if ok and total > 0 else
                                    (0.0 if ok else math.inf), queue, ok)
    saturated = tuple(m for m in res.saturated_tiers if not held[m])
    if len(saturated) < len(res.saturated_tiers):      # the pools' own flags say it
        flags = [f for f in flags if not f.startswith("saturated tiers ")]
        if saturated:
            flags.append(f"saturated tiers {list(saturated)} (utilization >= 1): capacity "
                         f"exceeded, response times of classes visiting them are inf")
    for m in saturated:
        Rmc[m] = res.residence_time[m]
    R = Rmc.sum(axis=0)
    return (dataclasses.replace(res, response_time=R, residence_time=Rmc, wait=wait,
                                queue_length=jobs, stable=stable and not saturated,
                                saturated_tiers=saturated, flags=tuple(flags)), out)


#: the held chain's budget: ``sum_k d_k^3`` over the levels' state counts ``d_k`` (the level
#: reduction's dense solves; the rate matrix a few products of the largest), about 50 ms of a
#: solve -- a capacity search solves a dozen rates
CHAIN_WORK = 5e7


@dataclass(frozen=True, eq=False)
class HeldChain:
    """The pool with its token queue and its held tiers as one chain (:func:`held_chain`):
    the QBD's plan, the transitions' rates with the arrivals' weights (``p_c``; 0: not an
    arrival), the holders of each (tier, class, kind) per state of the boundary levels and
    of a repeating level, and each such column's tier, class and kind (``True``: the tier's
    cores; ``False``: its pure delay)."""

    plan: QBDPlan
    rates: np.ndarray
    arrivals: np.ndarray
    counts: np.ndarray          # (boundary states, columns)
    repeating: np.ndarray       # (states of a level >= K, columns)
    tier: np.ndarray
    cls: np.ndarray
    cpu: np.ndarray
    #: the largest rate the chain carries: its holders' throughput with every token held
    #: (the repeating levels' mean rate down, Neuts 1981, Thm 3.1.1)
    saturation: float = math.inf
    #: the stations, each level's states (``0..K``), each class's route over the stations
    #: and the mix: what a tagged request's passage is built from
    #: (:func:`solvers.pools_passage.passage_law`)
    stations: tuple = ()
    configs: tuple = ()
    route: dict = field(default_factory=dict)
    mix: np.ndarray | None = None
    #: per held tier, whether it serves first come first served (not processor sharing)
    fifo: np.ndarray | None = None


def held_chain(demands: np.ndarray, servers: np.ndarray, delays: np.ndarray | None,
               mix: np.ndarray, size: int, ps: np.ndarray | None = None,
               processes: Sequence[MAP | None] | None = None,
               scv: np.ndarray | None = None) -> HeldChain | None:
    """The chain of a pool of ``size`` tokens over held tiers of exponential service per
    class (``demands`` ``D_{h,c}``, ``servers`` ``c_h``, pure ``delays`` ``delta_{h,c}`` as
    infinite-server stations after their tier, ``ps`` the processor-sharing tiers), fed
    Poisson arrivals of class ``c`` with probability ``mix`` ``p_c``. Level ``j``: the
    requests at the pool; phase: where the ``min(j, K)`` holders are and of which class. An
    arrival at ``j < K`` enters its class's first station, at ``j >= K`` joins the token queue
    (FCFS, so the queue's classes are independent of the holders: the head's is ``p_c``); a
    holder's last departure at ``j > K`` hands its token to the head, which enters its first
    station. A first-come-first-served tier with fewer cores than tokens keeps its holders'
    order (the first ``c`` served); elsewhere a count per class, each served at
    ``min(n, c) / n`` of a core (processor sharing; FCFS where the holders never exceed the
    cores; for one class, one bursty tier in ``processes`` as the closed route's held chain
    station, :class:`solvers.held_network.BurstyHeldStation`). So the chain is exact (a
    multi-core bursty tier: to its station's last-start approximation), the classes' spread of
    cost included: two dear requests holding both tokens of a pool of two block the cheap ones
    behind them, which the aggregate class's mean cannot show. Levels from ``K + 1`` on repeat:
    a QBD solved matrix-geometrically (Neuts 1981; :mod:`solvers.open.qbd`). ``None`` past
    :data:`CHAIN_WORK`, where a class of the mix holds no held tier (its token is taken and
    given back at once), or with a bursty tier beyond the station's scope (several classes or
    bursty tiers)."""
    H, C = demands.shape
    K = int(size)
    hit = np.flatnonzero(mix > 0)
    bursty = processes is not None and any(q is not None and q.order > 1 for q in processes)
    if bursty and (hit.shape[0] != 1 or sum(q is not None and q.order > 1
                                            for q in processes) != 1):
        return None              # one bursty tier of one class: the station's scope
    if bursty:
        b = next(i for i, q in enumerate(processes) if q is not None and q.order > 1)
        if not float(servers[b]).is_integer() or \
                last_start_states(K, processes[b].order, int(servers[b])) > int(
                    CHAIN_WORK ** (1 / 3)):
            return None
    scv = None if scv is None else np.asarray(scv, dtype=float).reshape(H, C)
    if bursty and scv is not None and np.any(scv > 1.0):
        return None              # a bursty tier and a class's spread: beyond the chain
    stations = held_stations(demands, servers, delays, ps, hit, K, processes, scv)
    route = routes(stations, hit)
    if not stations or any(not r for r in route.values()):
        return None
    cap = int(CHAIN_WORK ** (1 / 3))
    configs: list[list[tuple]] = []
    for k in range(K + 1):
        level = station_states(stations, k, cap)
        if level is None:
            return None
        configs.append(level)
    if sum(len(c) ** 3 for c in configs) + 2 * len(configs[K]) ** 3 > CHAIN_WORK:
        return None
    index = [{x: i for i, x in enumerate(level)} for level in configs]
    sizes = [len(level) for level in configs] + [len(configs[K])] * 2   # levels 0..K + 2
    starts = np.concatenate(([0], np.cumsum(sizes)))
    src: list[int] = []
    dst: list[int] = []
    rate: list[float] = []
    weight: list[float] = []

    def add(a: int, b: int, r: float, w: float = 0.0) -> None:
        src.append(a), dst.append(b), rate.append(r), weight.append(w)

    enter = functools.partial(enter_station, stations, route)

    for j in range(K + 2):                     # levels 0..K + 1 (K + 1: the first repeating)
        k = min(j, K)
        for i, x in enumerate(configs[k]):
            here = int(starts[j]) + i
            if j < K:
                for c in hit:
                    for w, y in enter(x, int(c)):
                        add(here, int(starts[j + 1]) + index[k + 1][y], 0.0,
                            float(mix[c]) * w)
            else:
                add(here, int(starts[j + 1]) + i, 0.0, 1.0)
            for g, st in enumerate(stations):
                for r, after in st.moves(x[g]):
                    add(here, int(starts[j]) + index[k][x[:g] + (after,) + x[g + 1:]], r)
                for m, r, after in st.leaving(x[g]):
                    c = st.classes[m]
                    y = x[:g] + (after,) + x[g + 1:]
                    step = route[c].index(g) + 1
                    if step < len(route[c]):
                        for w, z in enter(y, c, route[c][step]):
                            add(here, int(starts[j]) + index[k][z], r * w)
                    elif j <= K:
                        add(here, int(starts[j - 1]) + index[k - 1][y], r)
                    else:                      # the token passes to the queue's head
                        for c2 in hit:
                            for w, z in enter(y, int(c2)):
                                add(here, int(starts[j - 1]) + index[K][z],
                                    r * float(mix[c2]) * w)
    plan = plan_qbd(np.array(src), np.array(dst), starts, K + 1)
    sat = _saturation(np.array(src), np.array(dst), np.array(rate), starts, K + 1)
    cols = [(st.tier, c, st.cpu) for st in stations for c in st.classes]

    counts = np.array([held_counts(stations, x) for j in range(K + 2)
                       for x in configs[min(j, K)]], dtype=float)
    return HeldChain(plan, np.array(rate), np.array(weight), counts,
                     np.array([held_counts(stations, x) for x in configs[K]], dtype=float),
                     np.array([t for t, _, _ in cols]), np.array([c for _, c, _ in cols]),
                     np.array([k for _, _, k in cols]), sat, tuple(stations),
                     tuple(tuple(c) for c in configs), route, np.asarray(mix, dtype=float),
                     np.ones(H, dtype=bool) if ps is None else ~np.asarray(ps, dtype=bool))


def _saturation(src: np.ndarray, dst: np.ndarray, rate: np.ndarray, starts: np.ndarray,
                L: int) -> float:
    """``alpha A2 1``, ``alpha`` the stationary vector of the repeating levels' phase
    process ``A1 + A2`` without the arrivals (which do not move the phase past ``K``):
    the holders' throughput with every token held."""
    lo, hi, w = int(starts[L]), int(starts[L + 1]), int(starts[L + 1] - starts[L])
    rows = (src >= lo) & (src < hi) & (rate > 0)
    A = np.zeros((w, w))
    down = np.zeros(w)
    for a, b, r in zip(src[rows] - lo, dst[rows], rate[rows]):
        target = b - int(starts[L - 1]) if b < lo else b - lo
        A[a, target] += r
        if b < lo:
            down[a] += r
    A -= np.diag(A.sum(axis=1))
    M = A.T.copy()
    M[-1, :] = 1.0                      # alpha A = 0 with alpha 1 = 1
    rhs = np.zeros(w)
    rhs[-1] = 1.0
    try:
        alpha = np.linalg.solve(M, rhs)
    except np.linalg.LinAlgError:       # a reducible phase process: the least-squares one
        alpha = np.linalg.lstsq(M, rhs, rcond=None)[0]
    return float(np.maximum(alpha, 0.0) @ down)


def _solve_chain(chain: HeldChain, lam: float, size: int, shape: tuple[int, int]
                 ) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """Per held tier and class the mean requests at its cores and at its delay (``shape``
    ``(H, C)``), the mean requests waiting for a token and the mean tokens held, at arrival
    rate ``lam``; ``None`` when the chain is not positive recurrent."""
    rates = np.where(chain.arrivals > 0, lam * chain.arrivals, chain.rates)
    sol = solve_planned(chain.plan, rates)
    if sol is None:
        return None
    L = sol.first_repeating
    b = int(sol.starts[L])
    at = sol.pi[:b] @ chain.counts[:b] + (sol.level(L) @ sol.tail) @ chain.repeating
    cpu, delay = np.zeros(shape), np.zeros(shape)
    np.add.at(cpu, (chain.tier[chain.cpu], chain.cls[chain.cpu]), at[chain.cpu])
    np.add.at(delay, (chain.tier[~chain.cpu], chain.cls[~chain.cpu]), at[~chain.cpu])
    return cpu, delay, sol.mean_excess(size), float(at.sum())


def _saturated(lam: float, curve: HeldCurve) -> OpenPoolResult:
    K = curve.size
    R = np.where(curve.residence[K] > 0, math.inf, 0.0)
    return OpenPoolResult(R, 1.0, float(K), math.inf, math.inf, math.inf, False, (
        f"pool saturated: the arrival rate {lam:.4g}/s reaches the held tiers' throughput "
        f"with every token held, {curve.saturation:.4g}/s",))


def _chain_result(lam: float, curve: HeldCurve) -> OpenPoolResult:
    """:func:`solve_open_pool` by the held chain (:func:`held_chain`): each class's
    residence at each held tier by Little's law on its holders there,
    ``R_{h,c} = E[n_{h,c}] / (p_c lambda)``."""
    K, Dh, p = curve.size, curve.demands, curve.mix
    got = _solve_chain(curve.chain, lam, K, Dh.shape)
    if got is None:
        return _saturated(lam, curve)
    cpu, delay, queue, busy = got
    hit = p > 0
    R = np.divide(cpu + delay, (p * lam)[None, :], out=np.zeros_like(Dh), where=hit[None, :])
    if not hit.all():        # a class out of the mix: its demand at each tier's stretch
        D = Dh @ p
        stretch = np.divide(cpu.sum(axis=1), lam * D, out=np.ones_like(D), where=D > 0)
        R[:, ~hit] = (stretch[:, None] * Dh + (0.0 if curve.delays is None
                                               else curve.delays))[:, ~hit]
    check_no_nan(residence_time=R, busy=busy, queue=queue)
    return OpenPoolResult(R, busy / K, busy, queue / lam, busy / lam, queue, True)
