"""A pool whose holding time is not exponential: the wait for a token scaled by the holding
time's variability (an M/G/c-type correction of the flow-equivalent station).

:func:`solvers.pools.solve_pools` replaces a pool and its held tiers by a flow-equivalent
station of rate ``X_H(min(j, K))`` (Chandy et al. 1975): once all ``K`` tokens are taken, tokens
come free as a Poisson stream -- the waiting room of an M/M/K queue. That is exact when the held
network is product form (one class, exponential service), whatever the shape of the holding
time it produces. It is not when the holding time varies more than the product form's: classes
of very different cost at the held tiers (a search of 120 ms among pages of 3 ms) or a held
tier with heavy-tailed service. A request that finds the tokens taken then waits for the
residual of long holdings -- the renewal paradox (Kleinrock 1975) -- and the flow-equivalent
station underestimates the wait.

**Rule.** The wait for the token is scaled as in the M/G/c approximation of Lee and Longton
(1959) (the Allen-Cunneen formula with Poisson arrivals, Allen 1990, sec. 6.4):
``W_q(M/G/K) ~ (1 + c_H^2) / 2 * W_q(M/M/K)``, with ``c_H^2`` the holding time's squared
coefficient of variation. The flow-equivalent station is exact for the product-form network, so
the factor is taken relative to the holding time that network has::

    f_k = (1 + c_gen^2) / (1 + c_pf^2)

``c_gen^2`` from the holding time's first two moments over the classes (mix ``p_c``): class
``c`` holds the token ``H_c = sum_h s_h D_{h,c}`` (each held station's stretch ``s_h = R_h /
D_h`` of the exponential solution -- the model's per-class read-back -- plus the waits for the
pools nested inside, the same for every class), and each held queueing station's residence
adds the variance ``v_h (s_h D_{h,c})^2`` with ``v_h`` its service SCV (1: exponential, whose
sojourn in M/M/1 is exponential too); a pure delay (infinitely many servers) is a constant::

    E[H] = sum_c p_c H_c,  E[H^2] = sum_c p_c (H_c^2 + sum_h v_h (s_h D_{h,c})^2)

**Spread within a class.** ``v_h`` says how a class's residence at a station varies about its
own mean: the station's service SCV for every class alike. Where a class's cost at a held tier
depends on its data (a search whose database cost follows the rows it reaches), its residence
varies more than its tier's other classes'; ``class_scv[h, c]`` gives that class's own SCV at
the station, ``v_{h,c}`` in place of ``v_h`` (a mixture's second moment is the sum over its
components, each ``H_c^2 (1 + c_c^2)``: Kleinrock 1975, sec. 4.3's hyperexponential)::

    E[H^2] = sum_c p_c (H_c^2 + sum_h v_{h,c} (s_h D_{h,c})^2)

A residence at a pure delay stays constant. (The pipeline does not read it from the windows: a
class's time at a tier carries the wait every class shares, whose spread a window's per-class
means cannot tell from the class's own.)

``c_pf^2`` is the same with one class (the mix-weighted demands) and ``v_h = 1``: for one class
of exponential service ``f = 1`` exactly and the solution is :func:`solvers.pools.solve_pools`'
bit for bit. A holding time less variable than the product form's (``f < 1``) is left
uncorrected: the flow-equivalent station's wait is kept (conservative).

**Closing the loop.** In a closed network a longer wait lowers the throughput, and so the load
on the pool. The extra wait ``d_k`` is an infinite-server station just before the pool, outside
its holding time (a request waiting for a token holds none), at the fixed point::

    d_k = (f_k - 1) W_k(d)

``W_k(d)`` the flow-equivalent station's wait in the network with the extra stations ``d``:
decreasing in ``d``, so the root is unique in ``[0, (f_k - 1) W_k(0)]``. Where every scaled
pool is outermost, the extra stations are one with the think time and the fixed point one
equation, solved by Newton's method on the waits as exact functions of the think time
(:mod:`solvers.pools_fixed`: three solves of the enclosing network, the held networks once);
a scaled pool nested in another is solved over the whole network (regula falsi, Illinois
variant; pools one at a time, Gauss-Seidel, for several). The pool's wait is then
``W_k(d) + d_k = f_k W_k(d)``: the factor holds at the operating point, and under saturation the
throughput stays bounded by the held tiers' ``X_H(K)``, as it must (the holding time's mean is
unchanged). The factor is computed once, from the exponential solution at the population asked.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from .pools import PoolResult, PoolSpec, pool_within, prepare_network, solve_pools, solve_top, \
    top_network
from .pools_fixed import outermost, solve_factor_fixed_point

__all__ = ["holding_factors", "solve_pools_general"]

#: the fixed point stops once the extra wait moves less than this share of the pool's wait
TOLERANCE = 1e-5
#: regula-falsi steps per pool and pass; Gauss-Seidel passes over several pools
STEPS = 60
PASSES = 20
#: factors within this of 1 are 1: the exponential solution is kept bit for bit
UNIT = 1e-9


def _moments(H: np.ndarray, var: np.ndarray, p: np.ndarray) -> float:
    """The SCV of a holding time that is ``H_c`` on average with variance ``var_c`` for a
    share ``p_c`` of the requests."""
    E1 = float(p @ H)
    if not E1 > 0:
        return 1.0
    E2 = float(p @ (H * H + var))
    return E2 / (E1 * E1) - 1.0


def holding_factors(demands: Any, mix: Any, servers: Any, pools: Sequence[PoolSpec],
                    base: PoolResult, tier_scv: Any = None,
                    class_scv: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Per pool ``(f_k, c_gen^2)``: the factor on the wait for its token and the holding time's
    SCV (module docstring), from the exponential solution ``base`` of the same network
    (:func:`solvers.pools.solve_pools`). ``tier_scv``: per station the service SCV (default 1;
    a station of infinitely many servers -- a pure delay -- is a constant whatever it says).
    ``class_scv``: per station and class the SCV of the class's residence there (NaN: the
    station's ``tier_scv``; ``None``: every class takes it)."""
    Dmc = np.asarray(demands, dtype=float)
    if Dmc.ndim == 1:
        Dmc = Dmc[:, None]
    M, C = Dmc.shape
    p = np.full(C, 1.0 / C) if mix is None else np.asarray(mix, dtype=float)
    p = p / p.sum()
    D = Dmc @ p
    c = np.ones(M) if servers is None else np.broadcast_to(
        np.asarray(servers, dtype=float), (M,))
    v = np.ones(M) if tier_scv is None else np.asarray(tier_scv, dtype=float).reshape(-1)
    if v.shape != (M,) or np.any(~np.isfinite(v)) or np.any(v < 0):
        raise ValueError(f"tier_scv: must be {M} finite numbers >= 0, got {tier_scv!r}")
    delay = np.isinf(c)
    v = np.where(delay, 0.0, v)
    v_pf = np.where(delay, 0.0, 1.0)
    vc = class_scvs(class_scv, v, delay, C)
    pools = list(pools)
    waits = np.asarray(base.pool_waiting_time, dtype=float)
    Rm = np.array(base.residence_time, dtype=float)
    for k, pool in enumerate(pools):          # the stretch without the waits for the tokens
        Rm[pool.first] -= waits[k]
    s = np.divide(Rm, D, out=np.ones(M), where=D > 0)
    factors, scvs = np.ones(len(pools)), np.ones(len(pools))
    for k, pool in enumerate(pools):
        held = np.arange(pool.first, pool.last)
        inner = sum(float(waits[j]) for j in range(len(pools)) if pool_within(pools, j, k))
        R_hc = s[held, None] * Dmc[held]                     # (held, C)
        spread = v[held] @ (R_hc * R_hc) if vc is None \
            else (vc[held] * R_hc * R_hc).sum(axis=0)
        gen = _moments(R_hc.sum(axis=0) + inner, spread, p)
        R_h = s[held] * D[held]
        pf = _moments(np.array([R_h.sum() + inner]), np.array([v_pf[held] @ (R_h * R_h)]),
                      np.ones(1))
        scvs[k] = gen
        f = (1.0 + gen) / (1.0 + pf)
        factors[k] = 1.0 if f < 1.0 + UNIT else f
    return factors, scvs


def class_scvs(class_scv: Any, v: np.ndarray, delay: np.ndarray, C: int) -> np.ndarray | None:
    """``class_scv`` as ``(M, C)`` SCVs of each class's residence per station: NaN taken from
    the station's ``v``, a pure delay's 0; ``None`` where not given."""
    if class_scv is None:
        return None
    M = v.shape[0]
    vc = np.array(class_scv, dtype=float)
    if vc.shape != (M, C) or np.any(vc < 0) or np.any(np.isinf(vc)):
        raise ValueError(f"class_scv: must be {M} x {C} numbers >= 0 (NaN: the station's "
                         f"tier_scv), got {class_scv!r}")
    vc = np.where(np.isnan(vc), v[:, None], vc)
    return np.where(delay[:, None], 0.0, vc)


def _with_waits(Dmc: np.ndarray, c: np.ndarray, pools: list[PoolSpec], extra: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, list[PoolSpec], np.ndarray, np.ndarray]:
    """The network with an infinite-server station of demand ``extra[k]`` (every class) just
    before each pool ``k``, outside it and inside the pools that hold its first tier. Returns
    the demands, servers, pools, each old station's new index and each pool's station."""
    M, C = Dmc.shape
    # at each tier, the stations of the pools starting there, outermost first
    order = sorted(range(len(pools)), key=lambda k: (pools[k].first, -pools[k].last, k))
    rows, cores, new_index, station = [], [], np.zeros(M, dtype=int), np.zeros(len(pools), int)
    queue = list(order)
    for m in range(M):
        while queue and pools[queue[0]].first == m:
            k = queue.pop(0)
            station[k] = len(rows)
            rows.append(np.full(C, extra[k]))
            cores.append(math.inf)
        new_index[m] = len(rows)
        rows.append(Dmc[m])
        cores.append(c[m])
    out = [PoolSpec(pl.size, int(station[k]) + 1, int(new_index[pl.last - 1]) + 1, pl.name)
           for k, pl in enumerate(pools)]
    return np.array(rows), np.array(cores), out, new_index, station


def _solve_with(Dmc: np.ndarray, N: int, Z: float, c: np.ndarray, pools: list[PoolSpec],
                mix: Any, extra: np.ndarray) -> PoolResult:
    """The pool model with the extra waits ``extra`` before the pools, read back on the
    original stations: each extra wait added to its pool's wait, and to the owning tier's
    residence as the pool's own wait is."""
    D2, c2, pools2, index, station = _with_waits(Dmc, c, pools, extra)
    res = solve_pools(D2, N, Z, c2, pools2, mix)
    Rm = np.asarray(res.residence_time, dtype=float)[index].copy()
    for k, pool in enumerate(pools):
        Rm[pool.first] += float(res.residence_time[station[k]])
    waits = np.asarray(res.pool_waiting_time, dtype=float) + extra
    return replace(res, residence_time=Rm,
                   tier_utilization=np.asarray(res.tier_utilization)[index],
                   pool_waiting_time=waits, pool_queue=waits * res.throughput)


def _root(g: Any, hi: float, g0: float, scale: float) -> float:
    """The root of the increasing ``g`` in ``[0, hi]`` (``g(0) = g0 <= 0 <= g(hi)``): regula
    falsi, Illinois variant, to ``TOLERANCE * scale``."""
    a, b = 0.0, hi
    ga = g0
    if ga >= 0:
        return a
    gb = g(b)
    if gb <= 0:
        return b
    side, x = 0, b
    for _ in range(STEPS):
        x = b - gb * (b - a) / (gb - ga)
        gx = g(x)
        if abs(gx) <= TOLERANCE * scale or b - a <= TOLERANCE * scale:
            return x
        if gx > 0:
            b, gb = x, gx
            if side == -1:
                ga /= 2
            side = -1
        else:
            a, ga = x, gx
            if side == 1:
                gb /= 2
            side = 1
    return x


def solve_pools_general(demands: Any, population: int, think_time: float = 0.0,
                        servers: Any = None, pools: Sequence[PoolSpec] = (), mix: Any = None,
                        tier_scv: Any = None, class_scv: Any = None) -> PoolResult:
    """:func:`solvers.pools.solve_pools` with each pool's wait for a token scaled for its
    holding time's variability (module docstring): the classes' spread of cost at the held
    tiers, each station's service SCV ``tier_scv`` (default 1) and each class's own spread
    there ``class_scv`` (stations x classes, NaN: the station's). Where every factor is 1
    (one class of exponential service, or classes of equal cost) the exponential solution is
    returned as it is. ``holding_scv`` holds each pool's ``c_gen^2``; the throughput curve is
    the exponential model's below ``N``; ``outer_solves`` the enclosing network's solves and
    ``inner_solves`` the held networks' over the fixed point's steps."""
    net = prepare_network(demands, population, think_time, servers, pools, mix)
    pools = list(pools)
    if not pools or net.N == 0:
        return solve_pools(demands, population, think_time, servers, pools, mix)
    stations, inner = top_network(net)
    base, top = solve_top(net, stations, inner)
    Dmc = np.asarray(demands, dtype=float)
    if Dmc.ndim == 1:
        Dmc = Dmc[:, None]
    M = Dmc.shape[0]
    c = np.ones(M) if servers is None else np.broadcast_to(
        np.asarray(servers, dtype=float), (M,)).copy()
    factors, scvs = holding_factors(Dmc, mix, c, pools, base, tier_scv, class_scv)
    if np.all(factors == 1.0):
        return replace(base, holding_scv=scvs)
    N, Z = int(population), float(think_time)
    if np.all(outermost(pools)[factors > 1.0]):
        res, steps = solve_factor_fixed_point(net, stations, inner, base, top, factors)
        curve = np.array(base.throughput_curve, dtype=float)
        curve[N] = res.throughput
        return replace(res, throughput_curve=curve, holding_scv=scvs, outer_solves=steps)
    solved: dict[tuple[float, ...], PoolResult] = {}

    def solve(extra: np.ndarray) -> PoolResult:
        key = tuple(float(v) for v in extra)
        if key not in solved:
            solved[key] = base if not any(key) else _solve_with(Dmc, N, Z, c, pools, mix,
                                                                extra)
        return solved[key]

    extra = np.zeros(len(pools))
    for _ in range(PASSES):
        before = extra.copy()
        for k in np.flatnonzero(factors > 1.0):
            def g(d: float, k: int = k) -> float:
                trial = extra.copy()
                trial[k] = d
                own = float(solve(trial).pool_waiting_time[k]) - d
                return d - (factors[k] - 1.0) * own
            start = extra.copy()
            start[k] = 0.0
            w0 = float(solve(start).pool_waiting_time[k])
            extra[k] = _root(g, (factors[k] - 1.0) * w0, -(factors[k] - 1.0) * w0,
                             max(w0, 1e-300))
        res = solve(extra)
        scale = np.maximum(np.asarray(res.pool_waiting_time, dtype=float), 1e-300)
        if len(pools) == 1 or np.all(np.abs(extra - before) <= TOLERANCE * scale):
            break
    curve = np.array(base.throughput_curve, dtype=float)
    curve[N] = res.throughput
    steps = 1 + sum(1 for key in solved if any(key))
    return replace(res, throughput_curve=curve, holding_scv=scvs, outer_solves=steps,
                   inner_solves=inner * steps)
