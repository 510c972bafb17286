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
with a process per connection on one core) are never the renewal chain's tier: its picture --
the other holders queued behind the dear request in service, all the tokens free together after
it -- is first-come-first-served. Under processor sharing the holders progress together, a cheap
request leaves while the dear one is still served, and the tier's own queue is insensitive to
its service distribution beyond the mean (BCMP: Baskett et al. 1975): in the renewal chain and
the factor the tier is product form, its SCV 1. A processor-sharing tier whose holders cannot
outnumber its cores -- a pool over it of at most that many tokens -- shares no core: each holder
is served alone under either discipline, so it counts as first-come-first-served
(:func:`sharing`; a single-threaded server held by a pool of 1 is the case).

**A processor-sharing tier's spread: the class chain.** The pool's holding time is not
insensitive: two searches of 60 ms holding both tokens of a pool of two keep every page of 3 ms
waiting for a token, which the tier's mean cannot show (on the real testbed's shape -- a pool of
2 over an FCFS app and a PS db whose classes cost 3 to 60 ms -- the renewal chain at the app,
the db one exponential station, is 28-31% short of the simulated response times at 40 users;
the two-moment factor is +5 to +22% over them on the bench's shape: docs/accuracy.md, "Thread
and connection pools"). Where a held processor-sharing tier that shares a core has
spread (``E[S^2] - 2 E[S]^2 > 0`` over the mix, each class's own SCV ``v > 1`` included), its
pool -- one pool, no pool nested in it nor it in another, a think time -- is solved by the
**class chain** (:func:`_class_chain`): level ``i`` the requests at the pool (holding or
waiting for a token), phase each of the ``min(i, K)`` holders' held tier and class -- a count
per class at a processor-sharing tier (each of ``n`` holders at ``min(n, c) / n`` of a core),
the holders' order at a first-come-first-served tier of fewer cores than tokens, a class with
``v > 1`` at the processor-sharing tier served as the balanced-means hyperexponential (Whitt
1982), its phase drawn on entering -- the stations of the open pool's held chain
(:mod:`solvers.held_network`, shared with :mod:`solvers.pools_open`), closed: the
outside (think time, the tiers and pools not held) a flow-equivalent source of rate
``lam(i)``, its throughput with ``N - i`` users (Chandy et al.
1975; exact where the outside is the think time alone), the chain solved by linear level
reduction (Gaver, Jacobs and Latouche 1984, :func:`_level_stationary`). Each class's residence
at a held tier is Little's law on its holders there; at a tier outside, its demand times the
tier's stretch.

**Rule (continuity).** The answer is ``route(D') + chain(D) - chain(D')`` for every figure
(throughput, each class's and tier's residence, the pool's wait and tokens held), ``D'`` the
demands with each such tier's classes at their mix's mean (and its SCVs 1), ``route`` the
renewal chain or factor above: the class chain adds what the processor-sharing tier's spread
changes, the route keeps what the chain does not model (a first-come-first-served tier's
renewal spread, tier SCVs, a factor). As the tier's classes become equal ``chain(D) ->
chain(D')`` and the answer goes continuously to the route's, bit for bit at equality; where
``route(D')`` is the exponential flow-equivalent solution (no tier of spread left, no factor)
the answer is ``chain(D)`` itself, so it does not jump either when another tier's classes
become equal (the renewal chain's limit there is the exact single-class chain, which the class
chain is). Where the class chain does not apply or is past :data:`CLASS_CHAIN_WORK`
(``(N + 1) w^3``, ``w`` its widest level: a pool of 2 over the testbed's two tiers has 42
states a level, of 4 more than 300), the route stands alone.

Where the chain does not apply -- no tier of spread beyond exponential, ``b`` not first or last
of one pool's held tiers, no think time, no other held demand, nested pools over ``b``, a
chain past its budget, a non-exponential service at another held tier, or a chain whose
solution is not finite (a many-core station of phases far apart) -- the
solution is :func:`solvers.pools_general.solve_pools_general`'s, which therefore stays bit for
bit where the classes are of equal exponential cost or there is one exponential class.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from .delay import any_delay, as_delays, fold_pool_result, with_delay_stations
from .held_network import held_counts, enter_station, held_stations, hyperexponential_phases, \
    outside_source, routes, station_states
from .pools import PoolResult, PoolSpec
from .pools_bursty import LEVEL_FLOOR, base_mix, held_chain_applies, solve_pools_bursty
from .results import as_servers
from .pools_general import class_scvs, solve_pools_general
from .processes import MAP

__all__ = ["spread_processes", "solve_pools_spread", "ps_product_form", "sharing", "SPREAD_FLAG",
           "CLASS_CHAIN_FLAG"]

#: a tier's services whose second moment is within this share of exponential service's are
#: taken as exponential (equal costs, or classes within rounding of each other)
EXPONENTIAL = 1e-6
#: how the chain's flag begins
SPREAD_FLAG = "pools: spread"


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
    vc = class_scvs(class_scv, np.where(delay, 0.0, v), delay, C)
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


#: a processor-sharing tier whose services' second moment is within this share of exponential
#: service's has no spread for the class chain to add (equal classes of exponential work)
EQUAL_CLASSES = 1e-9
#: the class chain's largest ``(N + 1) w^3`` (``N + 1`` levels of up to ``w`` states, solved
#: by dense level reduction; measured about 0.1 s per 1e8 on this machine's one core)
CLASS_CHAIN_WORK = 3e8
#: how the class chain's flag begins (a kind of :data:`SPREAD_FLAG`'s, which the pipeline
#: reports)
CLASS_CHAIN_FLAG = f"{SPREAD_FLAG}: the class chain"


def _ps_scv(class_scv: Any, shape: tuple[int, int]) -> np.ndarray:
    """``class_scv`` as ``shape`` SCVs of each class's own work, 1 where not given (``None``
    or NaN) or below 1 (a holding time less variable than exponential is not used to shorten
    the wait, as in :mod:`solvers.pools_general`)."""
    if class_scv is None:
        return np.ones(shape)
    v = np.array(class_scv, dtype=float)
    if v.shape != shape or np.any(v < 0) or np.any(np.isinf(v)):
        raise ValueError(f"class_scv: must be {shape[0]} x {shape[1]} numbers >= 0 (NaN: the "
                         f"station's tier_scv), got {class_scv!r}")
    return np.maximum(np.where(np.isnan(v), 1.0, v), 1.0)


def _ps_spread_pool(Dmc: np.ndarray, p: np.ndarray, pools: list[PoolSpec],
                    shared: np.ndarray | None, vc: np.ndarray) -> tuple[int, list[int]] | None:
    """``(pool, tiers)``: the pool holding every processor-sharing tier that shares a core and
    whose services' second moment exceeds exponential service's (``tiers``: classes of other
    costs, or a class's own SCV ``vc`` above 1), where the class chain applies to it -- one
    such pool, none nested in it nor it in another; ``None`` elsewhere."""
    if shared is None or not pools:
        return None
    D = Dmc @ p
    excess = (Dmc ** 2 * (1.0 + vc)) @ p - 2.0 * D ** 2
    tiers = [m for m in np.flatnonzero(shared)
             if D[m] > 0 and excess[m] > EQUAL_CLASSES * 2.0 * D[m] ** 2
             and any(pl.first <= m < pl.last for pl in pools)]
    if not tiers:
        return None
    owners = {i for m in tiers for i, pl in enumerate(pools) if pl.first <= m < pl.last}
    if len(owners) != 1:
        return None
    k = owners.pop()
    pool = pools[k]
    for i, q in enumerate(pools):
        if i != k and not (q.last <= pool.first or pool.last <= q.first):
            return None
    return k, tiers


def _class_chain(Dmc: np.ndarray, p: np.ndarray, c: np.ndarray, delays: np.ndarray | None,
                 shared: np.ndarray | None, pools: list[PoolSpec], index: int, N: int,
                 Z: float, scv: np.ndarray | None = None) -> dict[str, Any] | None:
    """The closed class chain of pool ``index`` (module docstring, "processor-sharing tiers'
    spread"): state ``(i, holders)`` -- ``i`` requests at the pool, each of the ``min(i, K)``
    holders' tier and class (a count per class at a processor-sharing tier, the order at a
    first-come-first-served tier of fewer cores than tokens), the outside a flow-equivalent
    source of rate ``lam(i)`` (Chandy et al. 1975). Returns the throughput, the mean requests
    per tier (held and outside), per held tier and class, waiting for the token and holding
    one; ``None`` past :data:`CLASS_CHAIN_WORK` or where a class of the mix holds no held
    tier. ``scv``: per tier and class the class's own SCV (1: exponential; above 1 the
    balanced-means hyperexponential, Whitt 1982, its phase drawn on entering the tier)."""
    pool = pools[index]
    M, C = Dmc.shape
    K = min(pool.size, N)
    h = slice(pool.first, pool.last)
    hit = np.flatnonzero(p > 0)
    stations = held_stations(Dmc[h], c[h], None if delays is None else delays[h],
                             None if shared is None else shared[h], hit, K,
                             scv=None if scv is None else scv[h])
    route = routes(stations, hit)
    if not stations or any(not r for r in route.values()):
        return None
    cap = int((CLASS_CHAIN_WORK / (N + 1)) ** (1 / 3))
    configs = []
    for k in range(K + 1):
        level = station_states(stations, k, cap)
        if level is None:
            return None
        configs.append(level)
    index_of = [{x: i for i, x in enumerate(level)} for level in configs]
    size = np.array([len(configs[min(j, K)]) for j in range(N + 1)])
    D = Dmc @ p
    rest_D = D.copy()
    rest_D[h] = 0.0
    outside = outside_source(pools, index, rest_D, c, N, Z)
    lam = outside.lam

    enter = functools.partial(enter_station, stations, route)

    def template(j: int) -> np.ndarray:
        """Level ``j``'s transitions (every level past ``K`` alike): rows of source, level
        step, target, rate (an arrival's: its share of ``lam``), arrival, departure."""
        k = min(j, K)
        rows: list[tuple[int, int, int, float, bool, bool]] = []
        for i, x in enumerate(configs[k]):
            if j < K:                                  # a request arrives and takes a token
                rows += [(i, 1, index_of[k + 1][y], float(p[cl]) * w, True, False)
                         for cl in hit for w, y in enter(x, int(cl))]
            else:                                      # it joins the token queue
                rows.append((i, 1, i, 1.0, True, False))
            for g, st in enumerate(stations):
                for m, r, after in st.leaving(x[g]):
                    cl = st.classes[m]
                    y = x[:g] + (after,) + x[g + 1:]
                    step = route[cl].index(g) + 1
                    if step < len(route[cl]):          # on to its next held station
                        rows += [(i, 0, index_of[k][z], r * w, False, False)
                                 for w, z in enter(y, cl, route[cl][step])]
                    elif j <= K:                       # it leaves; no one waits
                        rows.append((i, -1, index_of[k - 1][y], r, False, True))
                    else:                              # its token passes to the queue's head
                        rows += [(i, -1, index_of[K][z], r * float(p[c2]) * w, False, True)
                                 for c2 in hit for w, z in enter(y, int(c2))]
        return np.array(rows, dtype=float).reshape(-1, 6)

    kinds = {j: template(j) for j in range(min(N, K + 1) + 1)}
    blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    done: list[np.ndarray] = []
    for j in range(N + 1):
        t = kinds[min(j, K + 1)]
        w = int(size[j])
        step, i, to = t[:, 1].astype(int), t[:, 0].astype(int), t[:, 2].astype(int)
        r = np.where(t[:, 4] > 0, lam[j] * t[:, 3], t[:, 3])
        A = np.zeros((w, w))
        F = np.zeros((w, int(size[j + 1]) if j < N else 0))
        B = np.zeros((w, int(size[j - 1]) if j > 0 else 0))
        for blk, k in ((A, 0), (F, 1), (B, -1)):
            sel = (step == k) & (r > 0)
            np.add.at(blk, (i[sel], to[sel]), r[sel])
        A -= np.diag(A.sum(axis=1) + F.sum(axis=1) + B.sum(axis=1))
        blocks.append((A, F, B))
        leave = t[:, 5] > 0
        done.append(np.bincount(i[leave], weights=r[leave], minlength=w))
    parts = _level_stationary(blocks)
    if parts is None:
        return None
    X = float(sum(v @ d for v, d in zip(parts, done)))
    pi_i = np.array([float(v.sum()) for v in parts])
    count = [np.array([held_counts(stations, x) for x in configs[k]], dtype=float)
             for k in range(K + 1)]
    at = sum(parts[j] @ count[min(j, K)] for j in range(N + 1))
    cpu, delay = np.zeros((M, C)), np.zeros((M, C))
    col = 0
    for st in stations:
        for cl in st.classes:
            (cpu if st.cpu else delay)[pool.first + st.tier, cl] += at[col]
            col += 1
    Qm = outside.queues(M, np.flatnonzero(pi_i[:N] > LEVEL_FLOOR * pi_i.max()), pi_i)
    return {"X": X, "Q": Qm, "cpu": cpu, "delay": delay,
            "queue": float(pi_i @ np.maximum(np.arange(N + 1) - K, 0)),
            "busy": float(pi_i @ np.minimum(np.arange(N + 1), K))}


def _level_stationary(blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
                      ) -> list[np.ndarray] | None:
    """The stationary distribution, level by level, of a finite chain whose transitions move at
    most one level: ``blocks[j] = (A_j, F_j, B_j)`` its generator's blocks within level ``j``
    (diagonal included), up and down; level 0 one state. Linear level reduction (Gaver, Jacobs
    and Latouche 1984): from the top level down ``S_j = A_j + U_j B_{j+1}``,
    ``U_j = F_j (-S_{j+1})^{-1}``, then ``pi_{j+1} = pi_j U_j`` from level 0. Every ``U_j`` is
    nonnegative (an M-matrix's inverse), so the products have no cancellation; each level's
    vector is scaled to sum 1 and the scales kept in logarithms, so a level of probability far
    below the floating range (the empty pool at saturation) loses nothing. ``None`` where a
    block is singular or the result not finite."""
    L = len(blocks)
    if blocks[0][0].shape != (1, 1):
        raise AssertionError("level 0 must be one state (the empty pool)")
    S = blocks[L - 1][0]
    U: list[np.ndarray] = [np.zeros((0, 0))] * (L - 1)
    try:
        for j in range(L - 2, -1, -1):
            U[j] = np.linalg.solve(-S.T, blocks[j][1].T).T
            S = blocks[j][0] + U[j] @ blocks[j + 1][2]
    except np.linalg.LinAlgError:
        return None
    parts, logs = [np.ones(1)], [0.0]
    for j in range(L - 1):
        v = np.maximum(parts[-1] @ U[j], 0.0)
        total = float(v.sum())
        if not (total > 0 and math.isfinite(total)):
            return None
        parts.append(v / total)
        logs.append(logs[-1] + math.log(total))
    w = np.exp(np.array(logs) - max(logs))
    total = float(sum(x.sum() * wi for x, wi in zip(parts, w)))
    return [x * (wi / total) for x, wi in zip(parts, w)]


def _chain_result(got: dict[str, Any], Dmc: np.ndarray, p: np.ndarray,
                  delays: np.ndarray | None, pools: list[PoolSpec], index: int
                  ) -> tuple[float, np.ndarray, np.ndarray, float, float]:
    """``(X, R_c, R_m, wait, busy)`` of a class chain's solution: each class's residence at a
    held tier by Little's law on its holders there, at an outside tier its demand times the
    tier's stretch, plus the wait for the token (FCFS, the same for every class); a tier's
    residence with the wait at the pool's owning tier."""
    pool = pools[index]
    X = got["X"]
    D = Dmc @ p
    dl = np.zeros_like(Dmc) if delays is None else delays
    Rm = got["Q"] / X
    h = slice(pool.first, pool.last)
    held = got["cpu"][h] + got["delay"][h]
    Rm[h] = held.sum(axis=1) / X
    stretch = np.divide(got["Q"] / X - dl @ p, D, out=np.ones_like(D), where=D > 0)
    Rc = stretch[:, None] * Dmc + dl
    hit = p > 0
    Rc[h] = np.where(hit[None, :], held / np.where(hit, p * X, 1.0)[None, :],
                     (np.divide(got["cpu"][h].sum(axis=1) / X, D[h], out=np.ones_like(D[h]),
                                where=D[h] > 0)[:, None] * Dmc[h] + dl[h]))
    wait = got["queue"] / X
    Rm[pool.first] += wait
    return X, Rc.sum(axis=0) + wait, Rm, wait, got["busy"]


def _ps_spread_corrected(route: Any, Dmc: np.ndarray, p: np.ndarray, c: np.ndarray,
                         delays: np.ndarray | None, shared: np.ndarray, pools: list[PoolSpec],
                         index: int, tiers: list[int], N: int, Z: float, vc: np.ndarray
                         ) -> PoolResult | None:
    """``route()`` (the route's solution with the processor-sharing ``tiers``' classes at
    their mix's mean) plus what the classes' spread there changes in the class chain: each
    figure ``route() + chain(D) - chain(D')`` (module docstring; ``chain(D)`` alone where the
    route is the exponential flow-equivalent solution); ``None`` where the chain does not
    apply."""
    own = np.ones_like(Dmc)
    own[tiers] = vc[tiers]
    got = _class_chain(Dmc, p, c, delays, shared, pools, index, N, Z, own)
    if got is None:
        return None
    X1, R1, Rm1, W1, B1 = _chain_result(got, Dmc, p, delays, pools, index)
    res = route()
    if not any(f.startswith(SPREAD_FLAG) for f in res.flags) and res.outer_solves == 1:
        # the route is the exponential flow-equivalent solution: the chain's own is exact
        X0, R0, Rm0 = (float(res.throughput), np.asarray(res.response_time, dtype=float),
                       np.asarray(res.residence_time, dtype=float))
        W0, B0 = (float(res.pool_waiting_time[index]), float(res.pool_busy[index]))
    else:
        flat = Dmc.copy()
        flat[tiers] = (Dmc[tiers] @ p)[:, None]
        base = _class_chain(flat, p, c, delays, shared, pools, index, N, Z)
        if base is None:
            return None
        X0, R0, Rm0, W0, B0 = _chain_result(base, flat, p, delays, pools, index)
    dl = np.zeros_like(Dmc) if delays is None else delays
    X = max(float(res.throughput) + X1 - X0, 1e-300)
    floor_c = (Dmc + dl).sum(axis=0)
    Rc = np.maximum(np.asarray(res.response_time, dtype=float) + R1 - R0, floor_c)
    Rm = np.maximum(np.asarray(res.residence_time, dtype=float) + Rm1 - Rm0, Dmc @ p + dl @ p)
    waits = np.array(res.pool_waiting_time, dtype=float)
    waits[index] = max(waits[index] + W1 - W0, 0.0)
    busy = np.array(res.pool_busy, dtype=float)
    busy[index] = min(max(busy[index] + B1 - B0, 0.0), float(pools[index].size))
    sizes = np.array([float(pl.size) for pl in pools])
    curve = np.array(res.throughput_curve, dtype=float)
    curve[N] = X
    D = Dmc @ p
    flag = (f"{CLASS_CHAIN_FLAG}: the classes of processor-sharing "
            f"{', '.join(f'tier {m}' for m in tiers)} each in the held chain",)
    return replace(res, throughput=X, response_time=Rc, residence_time=Rm,
                   tier_utilization=X * D / np.where(np.isinf(c), 1.0, c),
                   pool_utilization=busy / sizes, pool_busy=busy, pool_waiting_time=waits,
                   pool_holding_time=busy / X, pool_queue=waits * X, throughput_curve=curve,
                   flags=res.flags + flag)


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
    shared = sharing(ps, servers, pools, M)
    found = None
    if pools and population > 0 and float(think_time) > 0 and Dmc.ndim == 2 \
            and np.all(np.isfinite(Dmc)):
        p = base_mix(Dmc, mix)
        vc = _ps_scv(class_scv, Dmc.shape)
        found = _ps_spread_pool(Dmc, p, pools, shared, vc)
    if found is not None:
        index, tiers = found
        flat = Dmc.copy()
        flat[tiers] = (Dmc[tiers] @ p)[:, None]
        c = as_servers(servers, M)
        dl = as_delays(delays, (M, C)) if any_delay(delays) else None
        out = _ps_spread_corrected(
            lambda: _route(flat, population, think_time, servers, pools, mix, tier_scv,
                           class_scv, delays, ps, processes),
            Dmc, p, c, dl, shared, pools, index, tiers, int(population), float(think_time),
            vc)
        if out is not None:
            return out
    return _route(demands, population, think_time, servers, pools, mix, tier_scv, class_scv,
                  delays, ps, processes)


def _route(demands: Any, population: int, think_time: float, servers: Any,
           pools: list[PoolSpec], mix: Any, tier_scv: Any, class_scv: Any, delays: Any,
           ps: Any, processes: Any) -> PoolResult:
    """:func:`solve_pools_spread` without the processor-sharing tiers' class chain: the held
    chain of the first-come-first-served tier of most spread, else the two-moment factor."""
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
