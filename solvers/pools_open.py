"""A thread or connection pool on an open workload: Poisson arrivals into a pool of ``K``
tokens held across a run of tiers ``H``.

Two methods, the first where it applies:

**The held chain** (:func:`held_chain`): where the held tiers are exponential (no bursty
tier, no service SCV but 1, no pool nested inside) the pool, its token queue and the held
requests' places are one Markov chain -- level ``j`` the requests at the pool, phase where
the ``min(j, K)`` holders are (each tier's cores, each pure delay an infinite-server station
after its tier: Lazowska et al. 1984, ch. 3). Past ``K`` the levels repeat (an arrival joins
the token queue, a departure hands its token on), so it is a quasi-birth-death process solved
matrix-geometrically (Neuts 1981; :mod:`solvers.open.qbd`) -- exact for the aggregate class,
its cost independent of the load, within :data:`CHAIN_WORK`.

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
chain: bench/accuracy/pool_open.py) -- which is why the chain comes first.

Both: stable iff ``lambda < X_H(K)`` (else flagged unstable, the figures ``inf``, never NaN);
the wait for a token (FCFS, the same for every class) ``W = E[(j - K)+] / lambda`` (Little),
the tokens held ``E[min(j, K)]``. The pool's departures are Poisson (a birth-death queue with
Poisson input: Burke 1956, for the flow-equivalent station; the chain's are not exactly, which
the tiers after the pool take as Poisson), and the tiers before it are open queues of the same
rate (Jackson 1963). The held curve and the chain's plan do not depend on ``lambda``: a
capacity search builds them once.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .open.qbd import QBDPlan, plan_qbd, solve_planned
from .open.tiers import OpenTiersResult
from .pools import PoolSpec
from .pools_bursty import solve_pools_bursty
from .pools_spread import solve_pools_spread
from .processes import MAP
from .results import check_no_nan

__all__ = ["CHAIN_WORK", "HeldChain", "HeldCurve", "OpenPoolResult", "held_chain", "held_curve",
           "held_network", "outermost", "solve_open_pool", "with_pools"]


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

    @property
    def jobs(self) -> np.ndarray:
        """``N_{h,c}(n) = p_c X_H(n) R_{h,c}(n)`` (Little's law), ``(size + 1, H, C)``."""
        return self.throughput[:, None, None] * self.residence * self.mix[None, None, :]

    @property
    def saturation(self) -> float:
        """``X_H(K)``: the largest rate the pool carries."""
        return float(self.throughput[self.size])


@dataclass(frozen=True, eq=False)
class OpenPoolResult:
    """One pool at arrival rate ``lambda``: ``residence_time`` ``R_{h,c}`` at the held tiers
    (``(H, C)``, the token's wait not included), ``utilization`` ``E[min(j, K)] / K``, ``busy``
    ``E[min(j, K)]``, ``waiting_time`` ``W``, ``holding_time`` ``E[min(j, K)] / lambda``,
    ``queue`` ``E[(j - K)+]``; ``stable`` (``lambda < X_H(K)``; else the times are ``inf`` and
    the utilization 1)."""

    residence_time: np.ndarray
    utilization: float
    busy: float
    waiting_time: float
    holding_time: float
    queue: float
    stable: bool
    flags: tuple[str, ...] = field(default_factory=tuple)


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
                 processes: Sequence[MAP | None] | None = None) -> HeldCurve:
    """The :class:`HeldCurve` of ``pools[index]`` in a network of ``demands`` ``D_{m,c}``
    (tiers x classes) and ``servers``: its held tiers with the pools inside them, no think
    time, solved at ``n = 1..K`` by the closed pool route -- with a bursty held tier (a MAP
    of order > 1 in ``processes``) :func:`solve_pools_bursty`, else
    :func:`solve_pools_spread` (``tier_scv``, ``delays``, ``ps`` per tier as there). Each
    class's residence at a held tier is the tier's stretch ``R_h / D_h`` times its demand
    there plus its delay (the closed route's read-back, :mod:`solvers.pools`)."""
    Dmc = np.asarray(demands, dtype=float)
    Dmc = Dmc[:, None] if Dmc.ndim == 1 else Dmc
    M, C = Dmc.shape
    p = np.full(C, 1.0 / C) if mix is None else np.asarray(mix, dtype=float)
    p = p / p.sum()
    pool = pools[index]
    h = slice(pool.first, pool.last)
    inner = tuple(PoolSpec(q.size, q.first - pool.first, q.last - pool.first, q.name)
                  for q in pools if pool.first <= q.first and q.last <= pool.last)
    c = np.broadcast_to(np.asarray(1 if servers is None else servers, dtype=float), (M,))[h]
    Dh = Dmc[h]
    dh = None if delays is None else np.asarray(delays, dtype=float).reshape(M, C)[h]
    procs = None if processes is None else list(processes)[h]
    bursty = procs is not None and any(q is not None and q.order > 1 for q in procs)
    D = Dh @ p
    flags: list[str] = []

    def one(n: int) -> tuple[float, np.ndarray]:
        if bursty:
            shapes = [q.scaled(float(d)) if q is not None else MAP.exponential(float(d))
                      for q, d in zip(procs, D)]
            res = solve_pools_bursty(shapes, n, 0.0, c, inner, p, Dh, dh)
        else:
            res = solve_pools_spread(Dh, n, 0.0, c, inner, p,
                                     None if tier_scv is None else np.asarray(tier_scv)[h],
                                     delays=dh, ps=None if ps is None else np.asarray(ps)[h])
        flags.extend(f for f in res.flags if f not in flags)
        Rm = np.asarray(res.residence_time, dtype=float)
        cpu = Rm - (0.0 if dh is None else dh @ p)
        stretch = np.divide(cpu, D, out=np.ones_like(D), where=D > 0)
        return float(res.throughput), stretch[:, None] * Dh + (0.0 if dh is None else dh)

    curve = held_curve(one, int(pool.size), p)
    exponential = not bursty and len(inner) == 1 and (
        tier_scv is None or np.allclose(np.asarray(tier_scv, dtype=float)[h][D > 0], 1.0))
    chain = held_chain(D, c, None if dh is None else dh @ p, int(pool.size)) \
        if exponential else None
    return HeldCurve(curve.size, curve.throughput, curve.residence, curve.mix, tuple(flags),
                     chain, Dh, dh)


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
    r = lam / X[K]
    if not r < 1.0:
        return _saturated(lam, curve)
    if curve.chain is not None:
        return _chain_result(lam, curve)
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
    result = OpenPoolResult(R, busy / K, busy, queue / lam, busy / lam, queue, True)
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
    another, whose figures are in its held network) in place of its held tiers: their
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
            out.append(None)
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
    the QBD's plan, the transitions' rates with the arrivals' marked, each station's
    requests per state of the boundary levels and of a repeating level, and each station's
    tier and kind (``True``: a tier's cores; ``False``: its pure delay)."""

    plan: QBDPlan
    rates: np.ndarray
    arrivals: np.ndarray
    counts: np.ndarray          # (boundary states, stations)
    repeating: np.ndarray       # (states of a level >= K, stations)
    tier: np.ndarray
    cpu: np.ndarray


def _compositions(k: int, s: int) -> list[tuple[int, ...]]:
    """Every way to put ``k`` requests at ``s`` stations."""
    if s == 1:
        return [(k,)]
    return [(i,) + rest for i in range(k, -1, -1) for rest in _compositions(k - i, s - 1)]


def held_chain(demands: np.ndarray, servers: np.ndarray, delays: np.ndarray | None,
               size: int) -> HeldChain | None:
    """The exact chain of a pool of ``size`` tokens over held tiers of exponential service
    (aggregate ``demands`` ``D_h``, ``servers`` ``c_h``, pure ``delays`` ``delta_h`` as
    infinite-server stations after their tier), fed Poisson arrivals: level ``j`` the
    requests at the pool, phase the held requests' places (``min(j, K)`` of them); an
    arrival at ``j < K`` enters the first station, at ``j >= K`` joins the token queue; a
    departure from the last station at ``j > K`` hands its token to the queue's head, which
    enters the first station. Levels from ``K + 1`` on repeat, so the chain is a QBD
    solved matrix-geometrically (Neuts 1981; :mod:`solvers.open.qbd`). ``None`` past
    :data:`CHAIN_WORK`."""
    st_tier, st_cpu, st_rate = [], [], []
    for h, (D, c) in enumerate(zip(demands, servers)):
        if D > 0:
            st_tier.append(h), st_cpu.append(True), st_rate.append((float(c), 1.0 / D))
        if delays is not None and delays[h] > 0:
            st_tier.append(h), st_cpu.append(False), st_rate.append((math.inf, 1.0 / delays[h]))
    S, K = len(st_rate), int(size)
    if S == 0 or sum(math.comb(k + S - 1, S - 1) ** 3 for k in range(K + 1)) \
            + 2 * math.comb(K + S - 1, S - 1) ** 3 > CHAIN_WORK:
        return None
    configs = [_compositions(k, S) for k in range(K + 1)]
    index = [{x: i for i, x in enumerate(level)} for level in configs]
    sizes = [len(level) for level in configs] + [len(configs[K])] * 2   # levels 0..K + 2
    starts = np.concatenate(([0], np.cumsum(sizes)))
    src: list[int] = []
    dst: list[int] = []
    rate: list[float] = []
    arrival: list[bool] = []

    def add(a: int, b: int, r: float, arr: bool = False) -> None:
        src.append(a), dst.append(b), rate.append(r), arrival.append(arr)

    for j in range(K + 2):                     # levels 0..K + 1 (K + 1: the first repeating)
        k = min(j, K)
        for i, x in enumerate(configs[k]):
            here = int(starts[j]) + i
            up = list(x)
            if j < K:
                up[0] += 1
                add(here, int(starts[j + 1]) + index[k + 1][tuple(up)], 0.0, True)
            else:
                add(here, int(starts[j + 1]) + i, 0.0, True)
            for s in range(S):
                if x[s] == 0:
                    continue
                c, mu = st_rate[s]
                r = min(x[s], c) * mu
                y = list(x)
                y[s] -= 1
                if s + 1 < S:
                    y[s + 1] += 1
                    add(here, int(starts[j]) + index[k][tuple(y)], r)
                elif j <= K:
                    add(here, int(starts[j - 1]) + index[k - 1][tuple(y)], r)
                else:                          # the token passes to the queue's head
                    y[0] += 1
                    add(here, int(starts[j - 1]) + index[K][tuple(y)], r)
    plan = plan_qbd(np.array(src), np.array(dst), starts, K + 1)
    counts = np.array([x for j in range(K + 2) for x in configs[min(j, K)]], dtype=float)
    return HeldChain(plan, np.array(rate), np.array(arrival), counts,
                     np.array(configs[K], dtype=float), np.array(st_tier), np.array(st_cpu))


def _solve_chain(chain: HeldChain, lam: float, size: int
                 ) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """Per held tier the mean requests at its cores and at its delay, the mean requests
    waiting for a token and the mean tokens held, at arrival rate ``lam``; ``None`` when
    the chain is not positive recurrent."""
    rates = np.where(chain.arrivals, lam, chain.rates)
    sol = solve_planned(chain.plan, rates)
    if sol is None:
        return None
    L = sol.first_repeating
    b = int(sol.starts[L])
    at = sol.pi[:b] @ chain.counts[:b] + (sol.level(L) @ sol.tail) @ chain.repeating
    H = int(chain.tier.max()) + 1
    cpu = np.bincount(chain.tier[chain.cpu], weights=at[chain.cpu], minlength=H)
    delay = np.bincount(chain.tier[~chain.cpu], weights=at[~chain.cpu], minlength=H)
    return cpu, delay, sol.mean_excess(size), float(at.sum())


def _saturated(lam: float, curve: HeldCurve) -> OpenPoolResult:
    K = curve.size
    R = np.where(curve.residence[K] > 0, math.inf, 0.0)
    return OpenPoolResult(R, 1.0, float(K), math.inf, math.inf, math.inf, False, (
        f"pool saturated: the arrival rate {lam:.4g}/s reaches the held tiers' throughput "
        f"with every token held, {curve.saturation:.4g}/s",))


def _chain_result(lam: float, curve: HeldCurve) -> OpenPoolResult:
    """:func:`solve_open_pool` by the exact chain (:func:`held_chain`): each held tier's
    stretch ``s_h = E[requests at its cores] / (lambda D_h)`` read back per class as
    ``R_{h,c} = s_h D_{h,c} + delta_{h,c}`` (the closed route's read-back, :mod:`solvers.pools`;
    exact for one class)."""
    K = curve.size
    got = _solve_chain(curve.chain, lam, K)
    if got is None:
        return _saturated(lam, curve)
    cpu, _, queue, busy = got
    Dh = curve.demands
    D = Dh @ curve.mix
    stretch = np.divide(cpu, lam * D, out=np.ones_like(D), where=D > 0)
    R = stretch[:, None] * Dh + (0.0 if curve.delays is None else curve.delays)
    check_no_nan(residence_time=R, busy=busy, queue=queue)
    return OpenPoolResult(R, busy / K, busy, queue / lam, busy / lam, queue, True)
