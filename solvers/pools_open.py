"""A thread or connection pool on an open workload: Poisson arrivals into a pool of ``K``
tokens held across a run of tiers ``H``.

Method: the flow-equivalent server (Chandy et al. 1975; Lazowska et al. 1984, ch. 8) fed by
an open source. The held tiers are solved alone as a closed network without think time at
every population ``n = 1..K`` (:func:`held_curve`: the closed pool route's own solvers -- pure
delays, bursty tiers, spread of service and pools nested inside as
:func:`solvers.pools_spread.solve_pools_spread` and :func:`solvers.pools_bursty.solve_pools_bursty`
solve them; the pool itself never binds at ``n <= K``): their throughput ``X_H(n)`` and each
class's requests at each held tier ``N_{h,c}(n)``. The pool with its token queue is then one
load-dependent station with Poisson input, a birth-death process (:func:`solve_open_pool`):
with ``j`` requests at it (holding a token or waiting for one) it completes at
``X_H(min(j, K))``, so::

    pi(j) ~ prod_{i <= j} lambda / X_H(min(i, K)),

a geometric tail past ``K`` of ratio ``r = lambda / X_H(K)``; stable iff ``lambda < X_H(K)``
(else flagged unstable, its figures ``inf``, never NaN). The wait for a token (FCFS, the same
for every class) is ``W = E[(j - K)+] / lambda`` (Little), the tokens held ``E[min(j, K)]``,
and class ``c``'s residence at held tier ``h`` by Little over ``pi``:
``R_{h,c} = sum_j pi(j) N_{h,c}(min(j, K)) / (p_c lambda)``.

Why this and not a closed model at some population, or the method of surrogates (Jacobson and
Lazowska 1982): the open source makes the pool station's input rate constant, so the
enclosing "network" is the birth-death chain itself -- the decomposition's one approximation
is that the held tiers settle between the pool's changes of state (Courtois 1977), as in the
closed route. It is exact for one exponential held tier of ``c`` cores (the station is then
M/M/min(K, c) with an infinite queue: rates ``min(j, K, c) / D``) and for ``K`` at most the
cores of a product-form held network's only busy tier. The ``X_H`` curve does not depend on
``lambda``: a capacity search computes it once. The station with Poisson input is a
birth-death queue, so its departures are Poisson (Burke 1956) and the tiers after the pool keep
their Poisson input; the tiers before it are open queues of the same rate (Jackson 1963).
Where a held tier is bursty the held tiers' throughput depends on its phase as well as on the
tokens held (Mi et al. 2008's slow runs fill the pool): the curve then averages over the
phases, an approximation the bench measures (bench/accuracy/pool_open.py).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .open.tiers import OpenTiersResult
from .pools import PoolSpec
from .pools_bursty import solve_pools_bursty
from .pools_spread import solve_pools_spread
from .processes import MAP
from .results import check_no_nan

__all__ = ["HeldCurve", "OpenPoolResult", "held_curve", "held_network", "outermost",
           "solve_open_pool", "with_pools"]


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
    return HeldCurve(curve.size, curve.throughput, curve.residence, curve.mix, tuple(flags))


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
        R = np.where(curve.residence[K] > 0, math.inf, 0.0)
        return OpenPoolResult(R, 1.0, float(K), math.inf, math.inf, math.inf, False, (
            f"pool saturated: the arrival rate {lam:.4g}/s reaches the held tiers' "
            f"throughput with every token held, {X[K]:.4g}/s",))
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
