"""Thread and connection pools: a closed network in which a request holds one of ``K`` tokens
across a run of consecutive tiers (simultaneous resource possession, a two-layer queueing
network).

The model is the closed network of :mod:`solvers.mva` -- ``N`` users thinking ``Z`` seconds,
tiers of ``c_m`` exponential FCFS cores with demands ``D_m`` -- plus pools. A pool of size
``K`` is held across tiers ``first..last-1``: a request takes a token before the first held
tier (waiting FCFS while all ``K`` are taken) and gives it back after the last, so at most
``K`` requests are inside the held tiers at once. Pools hold disjoint or properly nested runs
of tiers (what :func:`streams.core.config.check_pools` accepts).

Method: hierarchical decomposition with a flow-equivalent server (Chandy et al. 1975;
Courtois 1977), applied innermost pool first. The held tiers of a pool are solved alone as a
closed network (no think time) at every population ``k = 1..K`` -- the throughput ``X_H(k)``;
the pool and its tiers are then one load-dependent station of the enclosing network whose
rate with ``j`` requests at it (holding or waiting for a token) is ``X_H(min(j, K))``: the
tokens admit at most ``K``, the others wait. The enclosing network (the remaining tiers, the
pool stations and the think time) is solved exactly as a load-dependent product-form network
by the convolution algorithm (Buzen 1973), in logarithms so that
populations of thousands neither overflow nor lose the probabilities of a saturated station
to cancellation (each convolution tilted into floating range and summed in linear space,
:func:`log_conv`). Per-tier residence times follow from the marginal distribution of the
pool station's population: a held tier's queue is ``sum_j P(j) Q_h(min(j, K))`` with
``Q_h(k)`` its queue in the held network at population ``k``.

Why this and not the method of surrogates (Jacobson and Lazowska 1982) or the layered
fixed point of the method of layers (Rolia and Sevcik 1995): with one pool, or disjoint or nested ones, the
aggregation needs no iteration -- one solve of the held network at ``1..K`` and one of the
enclosing network, both exact for their product-form parts -- and it is exact in two limits
(a pool of ``K >= N``, where it reduces to the plain network by Norton's theorem; a pool over
a single tier, where the station with the token queue is a load-dependent server with rates
``min(j, K, c)/D``). Its one approximation is the decomposition's: the held tiers see a fixed
population between the pool's changes of state, which the surrogates' fixed point also
assumes (their "flow-equivalent" inner model). The surrogates' iteration is needed where the
held tiers are shared with requests that do not hold the token (overlapping possession), which
the configuration refuses.

Several classes: the tiers' demands per class ``D_{m,c}`` are aggregated with the throughput
mix ``p_c`` into ``D_m = sum_c p_c D_{m,c}`` (one class of ``N`` users); class ``c``'s
response time is its wait for each pool's token (FCFS, the same for every class) plus
``sum_m s_m D_{m,c}`` with each tier's stretch ``s_m = R_m / D_m`` from the aggregate
solution -- exact for one class, an approximation (the classes' demands at an FCFS tier share
its queue) for several.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .results import as_servers, check_no_nan

__all__ = ["PoolSpec", "PoolResult", "solve_pools", "pool_capacity", "largest_meeting"]


@dataclass(frozen=True)
class PoolSpec:
    """A pool of ``size`` tokens held across tiers ``first .. last - 1`` (indices into the
    tiers, in visit order)."""

    size: int
    first: int
    last: int
    name: str = ""


@dataclass(frozen=True, eq=False)
class PoolResult:
    """Solution at population ``N``. ``throughput`` ``X`` (requests/s); ``response_time`` per
    class (think time excluded, the waits for the tokens included); ``residence_time`` per
    tier (aggregate class; a pool's wait for a token counted at its first tier, the owning one,
    whose request timer runs while it waits); ``tier_utilization`` per core; per pool (in
    the order given): ``pool_utilization`` (mean tokens held over size), ``pool_busy`` (mean
    tokens held), ``pool_waiting_time`` (mean wait for a token per request), ``pool_holding_time``
    (mean time a token is held per request), ``pool_queue`` (mean requests waiting for a
    token). ``throughput_curve[n]``: ``X(n)`` for ``n = 0..N`` (a capacity search reads it).
    ``inner_solves``: the held networks solved (each at every population ``1..K`` in one
    pass of convolutions): one per pool; the solution is direct, there is no fixed point to
    iterate. ``holding_scv``: per pool, the holding time's SCV where
    :func:`solvers.pools_general.solve_pools_general` derived it (``None``: not derived).
    ``outer_solves``: the enclosing networks solved (1 here; the fixed point of
    :func:`solvers.pools_general.solve_pools_general` counts its own, :mod:`solvers.pools_fixed`;
    0: not counted)."""

    throughput: float
    response_time: np.ndarray
    residence_time: np.ndarray
    tier_utilization: np.ndarray
    pool_utilization: np.ndarray
    pool_busy: np.ndarray
    pool_waiting_time: np.ndarray
    pool_holding_time: np.ndarray
    pool_queue: np.ndarray
    throughput_curve: np.ndarray
    flags: tuple[str, ...] = field(default_factory=tuple)
    inner_solves: int = 0
    holding_scv: np.ndarray | None = None
    outer_solves: int = 0


#: a tilted, scaled product-sum at or above this is kept: every term lost to underflow is
#: below ``2^-1022`` (both factors are scaled to at most 1), so with at most 10^6 terms the
#: loss is below 1e-20 of the entry -- far under the sum's own rounding
_KEEP = 1e-280
#: tilts tried before the entries still out of range are summed in logarithms
_TILTS = 8
#: sequences this short are summed in logarithms at once (the tilts' fixed cost is more)
_SHORT = 8


def log_conv_rows(a: np.ndarray, b: np.ndarray, rows: np.ndarray | None = None,
                   out: np.ndarray | None = None) -> np.ndarray:
    """``log (exp(a) * exp(b))`` (discrete convolution) entry by entry in logarithms (each
    entry's terms scaled by their largest, so nothing overflows or underflows), both of
    length ``n + 1``; only the entries ``rows`` (default all) into ``out``."""
    n = a.shape[0]
    if out is None:
        out = np.full(n, -np.inf)
    rb = b[::-1]
    for k in range(n) if rows is None else rows:
        t = a[:k + 1] + rb[n - 1 - k:]
        top = t.max()
        out[k] = top + math.log(np.exp(t - top).sum()) if top > -np.inf else -np.inf
    return out


def log_conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``log (exp(a) * exp(b))`` (discrete convolution), both of length ``n + 1``.

    Exponential tilting: ``(a * b)_k theta^k = sum_i (a_i theta^i)(b_{k-i} theta^{k-i})``, so
    both sequences are multiplied by ``theta^i = exp(t i)``, scaled to a largest term of 1 and
    convolved in linear space (``np.convolve``, ``O(n^2)`` multiplications in C where the sums
    in logarithms take ``O(n^2)`` exponentials), and ``log`` of each entry minus ``t k`` plus
    the scales is the answer. All terms are positive, so the sum has no cancellation and each
    entry is exact to its rounding (``O(n)`` ulps) wherever it is not below :data:`_KEEP`.
    The entries that are -- a tilt flattens the sequence only near the entries it aims at --
    are taken again with a tilt aimed at them: ``t`` minus the slope of the max-plus
    convolution there, the two sequences' slopes merged in decreasing order (exact for
    log-concave sequences: the stations' factors are, their rates do not fall, and so are
    their products, a convolution of log-concave sequences being log-concave; any other
    sequence is still exact, only slower). After :data:`_TILTS` tilts the rest are summed in
    logarithms (:func:`log_conv_rows`), as are sequences of at most :data:`_SHORT`; an entry
    with no finite term is ``-inf`` at once.
    ``t`` is rounded to a float32 value, so ``t i`` is exact for every index."""
    n = a.shape[0]
    if n <= _SHORT:
        return log_conv_rows(a, b)
    fa, fb = np.isfinite(a), np.isfinite(b)
    if not fa.any() or not fb.any():
        return np.full(n, -np.inf)
    out = np.full(n, -np.inf)
    first_a, first_b = int(np.argmax(fa)), int(np.argmax(fb))
    shift = first_a + first_b                              # the first finite entry of a * b
    if fa[first_a:].all() and fb[first_b:].all():          # finite from there on: a * b too
        todo = np.arange(n) >= shift
        slopes = np.concatenate([np.diff(a[first_a:]), np.diff(b[first_b:])])
    else:                                                  # the entries with a finite term
        todo = np.convolve(fa.astype(float), fb.astype(float))[:n] > 0.5
        slopes = np.concatenate([_finite_slopes(a), _finite_slopes(b)])
    slopes = np.sort(slopes)[::-1]
    idx = np.arange(n, dtype=float)
    target, width = n - 1, n
    for _ in range(_TILTS):
        rank = min(max(target - shift - 1, 0), slopes.shape[0] - 1)
        t = float(np.float32(-slopes[rank])) if slopes.shape[0] else 0.0
        if not math.isfinite(t):
            break
        ta, tb = a + t * idx, b + t * idx
        ca, cb = float(ta.max()), float(tb.max())
        c = np.convolve(np.exp(ta - ca), np.exp(tb - cb))[:n]
        kept = todo & (c >= _KEEP)
        out[kept] = np.log(c[kept]) + (ca + cb) - t * idx[kept]
        todo &= ~kept
        if not todo.any():
            return out
        width = max(int(kept.sum()), 1)
        left, done = np.flatnonzero(todo), np.flatnonzero(np.isfinite(out))
        if done.shape[0] == 0:           # the tilt's peak was past the last entry
            target //= 2
            continue
        above, below = left[left > done[-1]], left[left < done[0]]
        if above.shape[0]:               # half a window beyond the entries taken
            target = min(int(above[0]) + width // 2, n - 1)
        elif below.shape[0]:
            target = max(int(below[-1]) - width // 2, 0)
        else:                            # a gap between them
            target = int(left[left.shape[0] // 2])
    return log_conv_rows(a, b, np.flatnonzero(todo), out)


def _finite_slopes(a: np.ndarray) -> np.ndarray:
    """``a_{i+1} - a_i`` where both are finite."""
    with np.errstate(invalid="ignore"):
        d = np.diff(a)
    return d[np.isfinite(d)]


def log_rates(rates: np.ndarray) -> np.ndarray:
    """``log f(j) = -sum_{i<=j} log mu(i)``, ``f(0) = 1``, from rates ``mu(1..n)``."""
    return np.concatenate(([0.0], -np.cumsum(np.log(rates))))


@dataclass
class FlowStation:
    """One station of a network level: ``logf[j]`` for ``j = 0..n`` and, for a pool, the
    queue of each held tier at held population ``k`` (``inner[k, h]``) and the size."""

    logf: np.ndarray
    tiers: tuple[int, ...] = ()        # the tiers whose queues this station carries
    inner: np.ndarray | None = None    # (K + 1, len(tiers)) queues by held population
    pool: int = -1                     # index of the pool it stands for (-1: a tier or think)
    size: int = 0
    #: a pool's held network as solved: its stations, ``log G`` and the stations' rests
    held: tuple[list["FlowStation"], np.ndarray, list[np.ndarray]] | None = None


def tier_station(m: int, D: float, c: float, n: int) -> FlowStation:
    """Tier ``m``: ``c`` exponential FCFS cores, rate ``min(j, c)/D`` with ``j`` requests."""
    j = np.arange(1, n + 1, dtype=float)
    return FlowStation(log_rates(np.minimum(j, c) / D), tiers=(m,))


def network_log_g(stations: list[FlowStation], n: int, head: np.ndarray | None = None
                  ) -> tuple[np.ndarray, list[np.ndarray]]:
    """``log G(0..n)`` of the network and, per station, ``log G`` of the network without it
    (prefix and suffix convolutions: ``3 S - 5`` convolutions for ``S >= 2`` stations -- a
    convolution with the empty network's ``G = (1, 0, 0, ...)`` is its other operand, and the
    suffix of all the stations is not needed). ``head``: ``log G(0..n)`` of all the stations
    but the last where a solve of the same stations has it (one convolution fewer)."""
    logs = [s.logf[:n + 1] for s in stations]
    unit = np.full(n + 1, -np.inf)
    unit[0] = 0.0
    prefix = [unit] + logs[:1]
    for i in range(2, len(logs) + 1):      # prefix[i]: the first i stations
        known = head is not None and i == len(logs) - 1
        prefix.append(head[:n + 1] if known else log_conv(prefix[-1], logs[i - 1]))
    suffix = [unit] + logs[-1:]
    for f in reversed(logs[1:-1]):
        suffix.append(log_conv(suffix[-1], f))
    suffix.reverse()            # suffix[i] without logs[:i]; its first (all of them) unused
    suffix.insert(0, prefix[-1])
    rests = [prefix[i] if i == len(logs) - 1 else suffix[1] if i == 0
             else log_conv(prefix[i], suffix[i + 1]) for i in range(len(logs))]
    return prefix[-1], rests


def station_marginal(station: FlowStation, rest: np.ndarray, logG: np.ndarray, k: int
                     ) -> np.ndarray:
    """``P(j | k) = f(j) G^{(-m)}(k - j) / G(k)``, ``j = 0..k``."""
    p = np.exp(station.logf[:k + 1] + rest[k::-1] - logG[k])
    return p / p.sum()


def station_marginals(station: FlowStation, rest: np.ndarray, logG: np.ndarray, K: int
                      ) -> np.ndarray:
    """:func:`station_marginal` at every population ``k = 0..K`` at once: row ``k`` is ``P(j | k)``
    (0 for ``j > k``)."""
    j = np.arange(K + 1)
    back = j[:, None] - j[None, :]                        # k - j
    x = np.where(back >= 0, station.logf[:K + 1][None, :] + rest[np.maximum(back, 0)]
                 - logG[:K + 1, None], -np.inf)
    p = np.exp(x)
    return p / p.sum(axis=1, keepdims=True)


def station_queues(station: FlowStation, p: np.ndarray) -> np.ndarray:
    """Mean queue of each tier the station carries, given its marginal ``p(j)`` (or one
    marginal a row: then a row of queues each)."""
    if station.inner is None:
        q = p @ np.arange(p.shape[-1], dtype=float)
        return np.array([float(q)]) if p.ndim == 1 else q
    held = np.minimum(np.arange(p.shape[-1]), station.size)
    return p @ station.inner[held]


def pool_within(pools: list[PoolSpec], i: int, j: int) -> bool:
    """Pool ``i`` lies inside pool ``j`` (its tiers within ``j``'s; of two pools over the
    same tiers, the later one inside the earlier)."""
    a, b = pools[i], pools[j]
    return i != j and b.first <= a.first and a.last <= b.last \
        and ((a.first, a.last) != (b.first, b.last) or i > j)


def level_stations(tiers: range, pools: list[PoolSpec], parent: int, D: np.ndarray,
                   c: np.ndarray, n_max: int, tally: list[int] | None = None) -> list[FlowStation]:
    """The stations of one level of the hierarchy: the outermost pools inside ``parent``
    (every pool at the top, ``parent = -1``) as flow-equivalent stations, the other tiers as
    themselves; rates up to ``n_max``; ``tally[0]`` counts the held networks solved."""
    inside = [i for i in range(len(pools)) if parent < 0 or pool_within(pools, i, parent)]
    outer = [i for i in inside if not any(pool_within(pools, i, j) for j in inside)]
    stations: list[FlowStation] = []
    m = tiers.start
    while m < tiers.stop:
        hit = [i for i in outer if pools[i].first == m]
        if hit:
            stations.append(aggregate_pool(pools, hit[0], D, c, n_max, tally))
            m = pools[hit[0]].last
        else:
            if D[m] > 0:
                stations.append(tier_station(m, D[m], c[m], n_max))
            m += 1
    return stations


def aggregate_pool(pools: list[PoolSpec], index: int, D: np.ndarray, c: np.ndarray,
                   n_max: int, tally: list[int] | None = None) -> FlowStation:
    """The flow-equivalent station of pool ``index``: its held tiers (the pools inside them
    aggregated first) solved alone at ``k = 1..K``, rate ``X_H(min(j, K))`` with ``j``
    requests at it, up to ``n_max``; the held tiers' queues at each ``k`` kept."""
    pool = pools[index]
    tiers = range(pool.first, pool.last)
    K = min(pool.size, n_max)
    stations = level_stations(tiers, pools, index, D, c, K, tally)
    inner = np.zeros((K + 1, len(tiers)))
    if not stations:     # no demand at the held tiers: the pool is never held
        return FlowStation(np.concatenate(([0.0], np.full(n_max, -np.inf))), tuple(tiers),
                        inner, index, K)
    logG, rests = network_log_g(stations, K)
    if tally is not None:
        tally[0] += 1
    carried = [m - pool.first for s in stations for m in s.tiers]
    inner[:, carried] = np.column_stack([station_queues(s, station_marginals(s, r, logG, K))
                                         for s, r in zip(stations, rests)])
    inner[0] = 0.0
    X = np.exp(logG[:-1] - logG[1:])                 # X_H(1..K)
    rates = X[np.minimum(np.arange(1, n_max + 1), K) - 1]
    return FlowStation(log_rates(rates), tuple(tiers), inner, index, K, (stations, logG, rests))


def solve_pools(demands: Any, population: int, think_time: float = 0.0, servers: Any = None,
                pools: Sequence[PoolSpec] = (), mix: Any = None) -> PoolResult:
    """Solve the closed network with pools at population ``population`` (module docstring).

    ``demands``: ``D_m`` per tier (seconds per request, visits included), or ``D_{m,c}`` tiers x
    classes with the throughput ``mix`` ``p_c`` (default equal); ``servers``: cores ``c_m``
    per tier (default 1); ``pools``: :class:`PoolSpec` over the tiers (disjoint or nested). A
    pool larger than the population never binds: it is solved at size ``N``.
    """
    net = prepare_network(demands, population, think_time, servers, pools, mix)
    if net.N == 0:
        zeros = np.zeros(len(net.pools))
        return PoolResult(0.0, net.Dmc.sum(axis=0), net.D.copy(), np.zeros(net.D.shape[0]),
                          zeros, zeros, zeros, zeros, zeros, np.zeros(1),
                          ("empty: population 0",))
    stations, inner = top_network(net)
    return solve_top(net, stations, inner)[0]


@dataclass(frozen=True, eq=False)
class CheckedNet:
    """A checked network: demands per tier and class, the aggregate demands (over the mix), the
    cores, the population, the think time and the pools."""

    Dmc: np.ndarray
    D: np.ndarray
    c: np.ndarray
    N: int
    Z: float
    pools: list[PoolSpec]


@dataclass(frozen=True, eq=False)
class TopNetwork:
    """The enclosing network as solved: its stations (the think time's last, where it is
    positive), ``log G(0..N)`` and each station's rest (``log G`` without it)."""

    stations: list[FlowStation]
    logG: np.ndarray
    rests: list[np.ndarray]


def prepare_network(demands: Any, population: int, think_time: float, servers: Any,
                    pools: Sequence[PoolSpec], mix: Any) -> CheckedNet:
    """:func:`solve_pools`' arguments checked; ``ValueError`` naming the one that is not."""
    Dmc = np.asarray(demands, dtype=float)
    if Dmc.ndim == 1:
        Dmc = Dmc[:, None]
    if Dmc.ndim != 2 or np.any(~np.isfinite(Dmc)) or np.any(Dmc < 0):
        raise ValueError(f"demands: must be finite seconds >= 0 per tier (and class), "
                         f"got {demands!r}")
    M, C = Dmc.shape
    p = np.full(C, 1.0 / C) if mix is None else np.asarray(mix, dtype=float)
    if p.shape != (C,) or np.any(p < 0) or not p.sum() > 0:
        raise ValueError(f"mix: must be {C} shares >= 0 with a positive sum, got {mix!r}")
    p = p / p.sum()
    D = Dmc @ p
    c = as_servers(servers, M)
    if isinstance(population, bool) or not isinstance(population, (int, np.integer)) \
            or population < 0:
        raise ValueError(f"population: must be an integer >= 0, got {population!r}")
    Z = float(think_time)
    if not (Z >= 0 and math.isfinite(Z)):
        raise ValueError(f"think_time: must be finite seconds >= 0, got {think_time!r}")
    pools = list(pools)
    for i, pool in enumerate(pools):
        if not (isinstance(pool.size, (int, np.integer)) and pool.size >= 1
                and 0 <= pool.first < pool.last <= M):
            raise ValueError(f"pools[{i}]: must have size >= 1 and 0 <= first < last <= {M}, "
                             f"got {pool!r}")
        for j, other in enumerate(pools[:i]):
            a0, a1, b0, b1 = pool.first, pool.last, other.first, other.last
            if not (a1 <= b0 or b1 <= a0 or (a0 <= b0 and b1 <= a1)
                    or (b0 <= a0 and a1 <= b1)):
                raise ValueError(f"pools[{i}]: overlaps pools[{j}] without nesting in it")
    return CheckedNet(Dmc, D, c, int(population), Z, pools)


def top_network(net: CheckedNet) -> tuple[list[FlowStation], int]:
    """The enclosing network's stations but the think time (the pools' held networks solved,
    each once) and how many held networks that solved."""
    tally = [0]
    stations = level_stations(range(0, net.D.shape[0]), net.pools, -1, net.D, net.c, net.N, tally)
    return stations, tally[0]


def solve_top(net: CheckedNet, stations: list[FlowStation], inner: int,
              think_time: float | None = None,
              without_think: np.ndarray | None = None) -> tuple[PoolResult, TopNetwork]:
    """The enclosing network of ``stations`` (:func:`top_network`) with the think time
    ``think_time`` (default the network's), read back per tier, class and pool;
    ``without_think``: ``log G`` of ``stations`` alone where an earlier solve has it (the think
    station is the last, so it is the prefix :func:`network_log_g` would convolve before it)."""
    Dmc, D, c, N, pools = net.Dmc, net.D, net.c, net.N, net.pools
    M = D.shape[0]
    Z = net.Z if think_time is None else float(think_time)
    flags: list[str] = []
    stations = list(stations)
    if Z > 0:
        j = np.arange(1, N + 1, dtype=float)
        stations.append(FlowStation(log_rates(j / Z)))
    if not stations:
        raise ValueError("demands: every tier's demand is 0 and the think time is 0: "
                         "the throughput is unbounded")
    logG, rests = network_log_g(stations, N, without_think if Z > 0 else None)
    marg = [station_marginal(s, r, logG, N) for s, r in zip(stations, rests)]
    curve = np.concatenate(([0.0], np.exp(logG[:-1] - logG[1:])))
    X = float(curve[N])
    Q = np.zeros(M)
    pool_busy = np.zeros(len(pools))
    pool_queue = np.zeros(len(pools))
    for s, pj in zip(stations, marg):
        if s.tiers:
            Q[list(s.tiers)] = station_queues(s, pj)
        if s.pool >= 0:
            pool_figures(s, pj, pools, D, c, pool_busy, pool_queue)
    R_m = Q / X
    stretch = np.divide(R_m, D, out=np.ones(M), where=D > 0)
    waits = pool_queue / X
    sizes = np.array([float(min(pl.size, N)) for pl in pools])
    holding = pool_busy / X
    R_c = (stretch[:, None] * Dmc).sum(axis=0) + waits.sum()
    for k, pool in enumerate(pools):       # a token is waited for at its owning tier
        R_m[pool.first] += waits[k]
    U = X * D / np.where(np.isinf(c), 1.0, c)
    util = np.divide(pool_busy, np.array([float(pl.size) for pl in pools]),
                     out=np.zeros(len(pools)), where=sizes > 0)
    check_no_nan(X=X, R=R_c, R_m=R_m, pools=util)
    return (PoolResult(X, R_c, R_m, U, util, pool_busy, waits, holding, pool_queue, curve,
                       tuple(flags), inner, outer_solves=1), TopNetwork(stations, logG, rests))


def pool_figures(s: FlowStation, pj: np.ndarray, pools: list[PoolSpec], D: np.ndarray,
                 c: np.ndarray, busy: np.ndarray, queue: np.ndarray,
                 weight: float = 1.0) -> None:
    """Add ``weight`` times the mean tokens held and requests waiting at pool station ``s``
    (marginal ``pj``), and those of the pools directly inside it: from its held network (as
    :func:`aggregate_pool` solved it) at each held population, weighted by its probability."""
    j = np.arange(pj.shape[0])
    held = np.minimum(j, s.size)
    busy[s.pool] += weight * float(pj @ held)
    queue[s.pool] += weight * float(pj @ (j - held))
    if s.held is None or not any(t.pool >= 0 for t in s.held[0]):
        return
    stations, logG, rests = s.held          # solved for sizes up to the pool's: s.size <= it
    ph = np.bincount(held, weights=pj, minlength=s.size + 1)
    for k in range(1, s.size + 1):
        if ph[k] > 0:
            for inner, r in zip(stations, rests):
                if inner.pool >= 0:
                    pool_figures(inner, station_marginal(inner, r, logG, k), pools, D, c, busy,
                                  queue, weight * ph[k])


def pool_capacity(demands: Any, sla: Any, think_time: float = 0.0, servers: Any = None,
                  pools: Sequence[PoolSpec] = (), mix: Any = None,
                  limit: int = 100_000) -> int:
    """The largest population whose every class's response time (:func:`solve_pools`) is
    within its ``sla`` (seconds per class, ``inf``: none; a scalar for every class): doubling
    from 1 to a population that breaches, then bisection -- response times grow with the
    population in a closed network (Lazowska et al. 1984), so the first breach bounds it.
    ``limit`` when no population up to it breaches; 0 when one user already does."""
    Dmc = np.asarray(demands, dtype=float)
    C = 1 if Dmc.ndim == 1 else Dmc.shape[1]
    target = np.broadcast_to(np.asarray(sla, dtype=float), (C,))
    if np.any(np.isnan(target)) or np.any(target <= 0):
        raise ValueError(f"sla: must be seconds > 0 per class (inf: none), got {sla!r}")
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise ValueError(f"limit: must be an integer >= 1, got {limit!r}")

    def meets(n: int) -> bool:
        res = solve_pools(demands, n, think_time, servers, pools, mix)
        return bool(np.all(res.response_time <= target))

    return largest_meeting(meets, limit)


def largest_meeting(meets: Callable[[int], bool], limit: int = 100_000) -> int:
    """The largest population ``n <= limit`` with ``meets(n)``, for a ``meets`` true up to
    some population and false beyond (a closed network's response times grow with the
    population: Lazowska et al. 1984): doubling from 1, then bisection; 0 when ``meets(1)``
    is false, ``limit`` when no population up to it fails."""
    if not meets(1):
        return 0
    lo, hi = 1, None
    while hi is None:
        n = min(2 * lo, limit)
        if not meets(n):
            hi = n
        elif n >= limit:
            return int(limit)
        else:
            lo = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return lo
