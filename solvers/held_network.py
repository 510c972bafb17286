"""A pool's held network as a Markov chain: the stations of its held tiers, where each holder
is and of which class, and the outside as a flow-equivalent source.

Both held chains build on this -- the closed pools' class chain
(:mod:`solvers.pools_spread`) and the open pool's held chain (:mod:`solvers.pools_open`, whose
tagged passage :mod:`solvers.pools_passage` extends its stations); the bursty pool's chain
(:mod:`solvers.pools_bursty`) shares the outside.

**Stations** (:class:`HeldStation`, :func:`held_stations`). Each held tier's cores, then its
pure delay as an infinite-server station after it (Lazowska et al. 1984, ch. 3). A station's
state is over positions: one per class it serves, or -- where a class's own service SCV
``v > 1`` is given at a tier's cores -- one per phase of the balanced-means hyperexponential
of its mean and ``v`` (Whitt 1982), a holder drawn into one on entering: a mixture of
exponentials has no moves between phases, so the chain stays exact for it. A ``v`` below 1
stays exponential (a holding time less variable than exponential is not used to shorten the
wait for a token). A first-come-first-served tier with fewer cores than tokens and positions
of other rates keeps its holders' order (the first ``c`` served); elsewhere a count per
position, each holder served at ``min(n, c) / n`` of a core (processor sharing; FCFS where
every holder has a core). For one class, a bursty tier's MAP is served in start order on its
cores (:class:`BurstyHeldStation`: :func:`solvers.pools_station.last_start_station`, Mi et al.
2008's slow runs filling the pool).

**Levels** (:func:`station_states`): the states of ``k`` holders are every split of them
over the stations (:func:`compositions`) times each station's states with its share.

**The outside** (:class:`Outside`): a closed pool's requests not at the pool -- the think time,
the tiers and the pools not held -- aggregated into a flow-equivalent source whose rate with
``i`` requests at the pool is the outside's throughput with ``N - i`` users,
``lam(i) = G_O(N - i - 1) / G_O(N - i)`` (Chandy et al. 1975; exact where the outside is the
think time alone), its networks solved by convolution as in :mod:`solvers.pools`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .pools import FlowStation, PoolSpec, level_stations, log_rates, network_log_g, \
    station_marginal, station_queues
from .pools_station import last_start_station
from .processes import MAP

__all__ = ["BurstyHeldStation", "HeldStation", "Outside", "compositions", "enter_station",
           "held_counts", "held_stations", "hyperexponential_phases", "outside_source",
           "routes", "station_states"]


def hyperexponential_phases(mean: float, scv: float) -> tuple[list[float], list[float]]:
    """``(rates, probabilities)`` of one class's service: exponential of ``mean``, or for
    ``scv > 1`` the balanced-means hyperexponential (Whitt 1982)."""
    if not scv > 1.0:
        return [1.0 / mean], [1.0]
    p = 0.5 * (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0)))
    return [2.0 * p / mean, 2.0 * (1.0 - p) / mean], [p, 1.0 - p]


def compositions(k: int, s: int) -> list[tuple[int, ...]]:
    """Every way to put ``k`` holders at ``s`` places."""
    if s == 1:
        return [(k,)]
    return [(i,) + rest for i in range(k, -1, -1) for rest in compositions(k - i, s - 1)]


@dataclass(frozen=True)
class HeldStation:
    """One station of a held chain: a tier's cores (``cpu``, ``cores`` of them) or its delay
    (``cores`` infinite), the classes it serves with their rates, and whether its state keeps
    the holders' order (module docstring). ``owner`` is each position's class position,
    ``prates`` its rate, ``entry`` per class position its ``(probability, position)`` pairs
    (default: a position per class)."""

    tier: int
    cpu: bool
    cores: float
    classes: tuple[int, ...]
    rates: tuple[float, ...]
    ordered: bool
    owner: tuple[int, ...] = ()
    prates: tuple[float, ...] = ()
    entry: tuple[tuple[tuple[float, int], ...], ...] = ()

    def __post_init__(self) -> None:
        if not self.owner:
            object.__setattr__(self, "owner", tuple(range(len(self.classes))))
            object.__setattr__(self, "prates", tuple(self.rates))
            object.__setattr__(self, "entry", tuple(((1.0, m),) for m in self.owner))

    def states(self, n: int) -> list[tuple[int, ...]]:
        """Its states with ``n`` holders: the positions in arrival order, or a count each."""
        if self.ordered:
            return list(itertools.product(range(len(self.owner)), repeat=n))
        return compositions(n, len(self.owner))

    def leaving(self, x: tuple[int, ...]) -> list[tuple[int, float, tuple[int, ...]]]:
        """``(class position, rate, state after)`` of each departure from state ``x``: the
        first ``cores`` in order, or each position's count at ``min(n, c) / n`` of a core
        (processor sharing; FCFS where every holder has a core)."""
        out = []
        if self.ordered:
            for i in range(min(len(x), int(self.cores))):
                out.append((self.owner[x[i]], self.prates[x[i]], x[:i] + x[i + 1:]))
            return out
        n = sum(x)
        share = min(n, self.cores) / n if n else 0.0
        for m, count in enumerate(x):
            if count:
                y = list(x)
                y[m] -= 1
                out.append((self.owner[m], count * self.prates[m] * share, tuple(y)))
        return out

    def enter(self, x: tuple[int, ...], m: int) -> list[tuple[float, tuple[int, ...]]]:
        """``(probability, state after)`` of a holder of class position ``m`` arriving."""
        if self.ordered:
            return [(w, x + (q,)) for w, q in self.entry[m]]
        out = []
        for w, q in self.entry[m]:
            y = list(x)
            y[q] += 1
            out.append((w, tuple(y)))
        return out

    def moves(self, x: tuple[int, ...]) -> list[tuple[float, tuple[int, ...]]]:
        """``(rate, state after)`` of its changes of state without a departure: none."""
        return []

    def held(self, x: tuple[int, ...]) -> np.ndarray:
        """Holders of each of its classes in state ``x``."""
        if self.ordered:
            return np.bincount(np.array([self.owner[q] for q in x], dtype=int),
                               minlength=len(self.classes))
        return np.bincount(np.array(self.owner, dtype=int), weights=np.array(x, dtype=float),
                           minlength=len(self.classes))


class BurstyHeldStation(HeldStation):
    """A bursty tier of one class: its MAP served in start order on its cores, each holder
    there its own phase and the next start's phase read off the job that started last
    (:func:`solvers.pools_station.last_start_station` on levels ``0..K``; the closed pool
    route's held chain station, Mi et al. 2008's slow runs in it). Its state: the station's
    state index, a 1-tuple."""

    def __init__(self, tier: int, cores: float, cls: int, proc: MAP, K: int) -> None:
        super().__init__(tier, True, cores, (cls,), (1.0 / proc.mean,), False)
        tr = last_start_station(K, proc, int(cores))
        n_states = tr.level.shape[0]
        arrive: list[list[tuple[float, tuple[int]]]] = [[] for _ in range(n_states)]
        moves: list[list[tuple[float, tuple[int]]]] = [[] for _ in range(n_states)]
        leave: list[list[tuple[int, float, tuple[int]]]] = [[] for _ in range(n_states)]
        for a, b, r, up in zip(tr.src.tolist(), tr.dst.tolist(), tr.rate.tolist(),
                               tr.up.tolist()):
            if up:
                arrive[a].append((r, (b,)))
            elif tr.level[b] < tr.level[a]:
                leave[a].append((0, r, (b,)))
            else:
                moves[a].append((r, (b,)))
        object.__setattr__(self, "_by_level", [[(i,) for i in np.flatnonzero(tr.level == n)]
                                               for n in range(K + 1)])
        object.__setattr__(self, "_level", tr.level)
        object.__setattr__(self, "_arrive", arrive)
        object.__setattr__(self, "_moves", moves)
        object.__setattr__(self, "_leave", leave)

    def states(self, n: int) -> list[tuple[int, ...]]:
        return self._by_level[n]

    def leaving(self, x: tuple[int, ...]) -> list[tuple[int, float, tuple[int, ...]]]:
        return self._leave[x[0]]

    def enter(self, x: tuple[int, ...], m: int) -> list[tuple[float, tuple[int, ...]]]:
        return self._arrive[x[0]]

    def moves(self, x: tuple[int, ...]) -> list[tuple[float, tuple[int, ...]]]:
        return self._moves[x[0]]

    def held(self, x: tuple[int, ...]) -> np.ndarray:
        return np.array([self._level[x[0]]])


def held_stations(demands: np.ndarray, servers: np.ndarray, delays: np.ndarray | None,
                  shared: np.ndarray | None, hit: np.ndarray, K: int,
                  processes: Sequence[MAP | None] | None = None,
                  scv: np.ndarray | None = None) -> list[HeldStation]:
    """The stations over held tiers of demands ``D_{h,c}`` (``hit``: the classes of the mix)
    with ``servers`` cores, pure ``delays``, ``shared`` the tiers whose cores are time-shared
    (processor sharing), ``K`` tokens, a bursty tier's MAP in ``processes`` and each class's
    own service SCV ``scv`` (module docstring): per tier its cores, then its delay."""
    out: list[HeldStation] = []
    for h in range(demands.shape[0]):
        for cpu in (True, False):
            d = demands[h] if cpu else (None if delays is None else delays[h])
            if d is None:
                continue
            cls = tuple(int(c) for c in hit if d[c] > 0)
            if not cls:
                continue
            proc = None if processes is None or not cpu else processes[h]
            if proc is not None and proc.order > 1:
                out.append(BurstyHeldStation(h, float(servers[h]), cls[0],
                                             proc.scaled(float(d[cls[0]])), K))
                continue
            rates = tuple(1.0 / float(d[c]) for c in cls)
            cores = float(servers[h]) if cpu else math.inf
            fcfs_few = cpu and not (shared is not None and shared[h]) and cores < K
            if cpu and scv is not None and any(scv[h, c] > 1.0 for c in cls):
                owner: list[int] = []
                prates: list[float] = []
                entry: list[tuple[tuple[float, int], ...]] = []
                for m, c in enumerate(cls):
                    r, w = hyperexponential_phases(float(d[c]), float(scv[h, c]))
                    entry.append(tuple((float(wi), len(owner) + i) for i, wi in enumerate(w)))
                    owner += [m] * len(r)
                    prates += r
                out.append(HeldStation(h, cpu, cores, cls, rates, fcfs_few, tuple(owner),
                                       tuple(prates), tuple(entry)))
                continue
            out.append(HeldStation(h, cpu, cores, cls, rates, fcfs_few and len(set(rates)) > 1))
    return out


def routes(stations: Sequence[HeldStation], hit: np.ndarray) -> dict[int, list[int]]:
    """Each class's stations in visit order."""
    return {int(c): [g for g, st in enumerate(stations) if c in st.classes] for c in hit}


def enter_station(stations: Sequence[HeldStation], route: dict[int, list[int]], x: tuple,
                  c: int, g: int | None = None) -> list[tuple[float, tuple]]:
    """``(probability, state after)`` of a holder of class ``c`` entering station ``g``
    (default: its first) in state ``x`` (one part per station)."""
    g = route[c][0] if g is None else g
    st = stations[g]
    return [(w, x[:g] + (y,) + x[g + 1:]) for w, y in st.enter(x[g], st.classes.index(c))]


def held_counts(stations: Sequence[HeldStation], x: tuple) -> np.ndarray:
    """Holders of each (station, class) column in state ``x``."""
    return np.concatenate([st.held(part) for st, part in zip(stations, x)])


def station_states(places: Sequence[HeldStation], k: int, cap: int) -> list[tuple] | None:
    """The states of ``k`` holders over ``places`` (each with ``states(n)``: a state per
    station), ``None`` past ``cap`` of them: a held chain's level."""
    out: list[tuple] = []
    for split in compositions(k, len(places)):
        for x in itertools.product(*(st.states(n) for st, n in zip(places, split))):
            out.append(x)
            if len(out) > cap:
                return None
    return out


@dataclass(frozen=True, eq=False)
class Outside:
    """The outside of pool ``index`` as solved: its flow-equivalent stations (the think time's
    last), ``log G(0..N)``, each station's rest (``log G`` without it) and the source's rate
    ``lam(i)`` with ``i`` requests at the pool (``lam(N) = 0``)."""

    stations: list[FlowStation]
    logG: np.ndarray
    rests: list[np.ndarray]
    lam: np.ndarray

    def marginal(self, g: int, users: int) -> np.ndarray:
        """Station ``g``'s population law with ``users`` outside."""
        return station_marginal(self.stations[g], self.rests[g], self.logG, users)

    def queues(self, M: int, levels: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Each tier's mean queue outside (0 at the held tiers): with ``N - i`` users outside
        weighted by ``weights[i]`` over the pool's populations ``i`` in ``levels``."""
        N = self.logG.shape[0] - 1
        Q = np.zeros(M)
        for g, s in enumerate(self.stations):
            if not s.tiers:
                continue
            for i in levels:
                Q[list(s.tiers)] += float(weights[i]) * station_queues(
                    s, self.marginal(g, N - int(i)))
        return Q


def outside_source(pools: list[PoolSpec], index: int, rest_D: np.ndarray, c: np.ndarray,
                   N: int, Z: float) -> Outside:
    """:class:`Outside` of pool ``index`` at population ``N`` and think time ``Z > 0``:
    ``rest_D`` the aggregate demands with the pool's held tiers at 0, ``c`` the cores."""
    stations = [s for s in level_stations(range(0, rest_D.shape[0]), pools, -1, rest_D, c, N)
                if s.pool != index]
    stations.append(FlowStation(log_rates(np.arange(1, N + 1, dtype=float) / Z)))
    logG, rests = network_log_g(stations, N)
    lam = np.zeros(N + 1)
    lam[:N] = np.exp(logG[N - 1::-1] - logG[N::-1][:N])
    return Outside(stations, logG, rests, lam)
