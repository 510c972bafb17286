"""Capacity planning and what-if questions on closed and open network models.

* :class:`ClosedModel` / :class:`OpenModel` -- small immutable descriptions of a multi-tier
  system (demands ``D_{m,c}``, servers ``c_m``, populations ``N_c`` and think times ``Z_c`` or
  arrival rates ``lambda_c``, station and class names). What-if transformations return a *new*
  model:

  - :meth:`~_Stations.scale_speed` -- move a tier to a machine ``speed`` times as fast:
    ``D_{m,c} -> D_{m,c} / speed`` (Zong 2011, CloudProphet: a tier's CPU demand scales with
    the CPU speed ratio of the two platforms, within 20% in their tests);
  - :meth:`~_Stations.replicate` -- replicate a tier ``k`` times behind a load balancer
    (Harbaoui et al. 2010, §V, Fig. 11 / Table V), in one of two idealisations:
    ``"split"`` (default): ``k`` stations with demand ``D_{m,c}/k`` each -- a balancer that
    splits requests evenly (random or round-robin) over replicas with their own queues;
    ``"servers"``: one station with ``k c_m`` servers and demand ``D_{m,c}`` -- a shared queue
    that hands each request to the next idle replica (optimistic: it never leaves a replica
    idle while another has a queue). The truth lies between the two;
  - ``with_populations``, ``with_think_times``, ``with_arrival_rates``.

* :func:`max_population` / :func:`max_arrival_rate` -- the largest load that meets per-class
  response-time targets (SLAs), by exponential bracketing and bisection over a solver callable
  (default: exact MVA, or approximate MVA for large lattices; ``solve_open`` for open models).
  The search assumes response times grow with the load, as they do in product-form networks.
  Another solver (e.g. the MAP queueing network of Mi et al. (2008), §4) plugs in as any callable
  ``model -> result`` whose result has a per-class ``response_time`` array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from .mapqn import MAPQNResult, solve_closed
from .mva import amva, lattice_size, mva
from .open import saturation_rate, solve_open
from .results import as_demands, as_per_class, as_populations, as_rates, as_servers

__all__ = [
    "ClosedModel",
    "OpenModel",
    "CapacityResult",
    "default_closed_solver",
    "map_network_solver",
    "meets_targets",
    "max_population",
    "max_arrival_rate",
    "EXACT_LIMIT",
]

#: lattice size up to which the default closed solver uses exact MVA (above: amva)
EXACT_LIMIT = 250_000


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.setflags(write=False)
    return a


def _names(value: Sequence[str] | None, n: int, prefix: str, name: str) -> tuple[str, ...]:
    if value is None:
        return tuple(f"{prefix}{i}" for i in range(n))
    names = tuple(str(v) for v in value)
    if len(names) != n:
        raise ValueError(f"{name}: need {n} names, got {len(names)} ({list(names)!r})")
    if len(set(names)) != n:
        raise ValueError(f"{name}: names must be unique, got {list(names)!r}")
    return names


@dataclass(frozen=True, eq=False)
class _Stations:
    """Stations and classes shared by closed and open models (see the module docstring)."""

    demands: np.ndarray
    servers: np.ndarray | None = None
    station_names: tuple[str, ...] | None = None
    class_names: tuple[str, ...] | None = None

    def station_index(self, station: int | str) -> int:
        """Index of a station given by index or by name (``ValueError`` if unknown)."""
        if isinstance(station, (int, np.integer)) and not isinstance(station, bool):
            if 0 <= station < len(self.station_names):
                return int(station)
        elif station in self.station_names:
            return self.station_names.index(station)
        raise ValueError(f"station: unknown station {station!r}; "
                         f"stations are {list(self.station_names)}")

    def scale_speed(self, station: int | str, speed: float) -> "_Stations":
        """Move ``station`` to a machine ``speed`` times as fast: ``D_{m,c} / speed``.

        ``speed > 1`` is a faster CPU, ``< 1`` a slower one (Zong (2011): CPU demand scales with
        the platforms' speed ratio, measured e.g. by a single-threaded benchmark on both).
        """
        m = self.station_index(station)
        if not (isinstance(speed, (int, float, np.floating, np.integer))
                and math.isfinite(speed) and speed > 0):
            raise ValueError(f"speed: must be a positive finite number, got {speed!r}")
        D = np.array(self.demands)
        D[m] = D[m] / float(speed)
        return replace(self, demands=D)

    def replicate(self, station: int | str, k: int, mode: str = "split") -> "_Stations":
        """Replicate ``station`` ``k`` times behind a balancer (Harbaoui et al. 2010, Table V).

        ``mode="split"``: ``k`` stations ``name[1]..name[k]`` with demand ``D_{m,c}/k`` and
        ``c_m`` servers each; ``mode="servers"``: one station with ``k c_m`` servers and the
        same demand. ``k = 1`` returns an equal model.
        """
        m = self.station_index(station)
        if not (isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 1):
            raise ValueError(f"k: must be a positive integer, got {k!r}")
        if mode not in ("split", "servers"):
            raise ValueError(f"mode: must be 'split' or 'servers', got {mode!r}")
        if k == 1:
            return self
        if mode == "servers":
            s = np.array(self.servers)
            s[m] = s[m] * k
            return replace(self, servers=s)
        D = np.concatenate([self.demands[:m], np.repeat(self.demands[m:m + 1] / k, k, axis=0),
                            self.demands[m + 1:]])
        s = np.concatenate([self.servers[:m], np.repeat(self.servers[m:m + 1], k),
                            self.servers[m + 1:]])
        base = self.station_names[m]
        names = (self.station_names[:m] + tuple(f"{base}[{i + 1}]" for i in range(k))
                 + self.station_names[m + 1:])
        return replace(self, demands=D, servers=s, station_names=names)


@dataclass(frozen=True, eq=False)
class ClosedModel(_Stations):
    """A closed multi-class network: ``D_{m,c}``, ``c_m``, ``N_c`` users thinking ``Z_c`` s.

    Build with ``ClosedModel.build(demands, populations, think_times, servers, ...)``.
    """

    populations: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    think_times: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        N = as_populations(self.populations)
        D = as_demands(self.demands, n_classes=N.shape[0])
        object.__setattr__(self, "populations", _frozen(N))
        object.__setattr__(self, "demands", _frozen(D))
        object.__setattr__(self, "think_times",
                           _frozen(as_per_class(self.think_times, N.shape[0], "think_times")))
        object.__setattr__(self, "servers", _frozen(as_servers(self.servers, D.shape[0])))
        object.__setattr__(self, "station_names",
                           _names(self.station_names, D.shape[0], "station", "station_names"))
        object.__setattr__(self, "class_names",
                           _names(self.class_names, N.shape[0], "class", "class_names"))

    @classmethod
    def build(cls, demands: Any, populations: Any, think_times: Any = 0.0, servers: Any = None,
              station_names: Sequence[str] | None = None,
              class_names: Sequence[str] | None = None) -> "ClosedModel":
        """Validated constructor with defaults (one server per station, generated names)."""
        return cls(demands=demands, servers=servers, station_names=station_names,
                   class_names=class_names, populations=populations, think_times=think_times)

    def with_populations(self, populations: Any) -> "ClosedModel":
        """The same system with ``N_c`` users per class."""
        return replace(self, populations=populations)

    def with_think_times(self, think_times: Any) -> "ClosedModel":
        """The same system with think times ``Z_c``."""
        return replace(self, think_times=think_times)

    def solve(self, solver: Callable[["ClosedModel"], Any] | None = None) -> Any:
        """Solve with ``solver`` (default :func:`default_closed_solver`)."""
        return (solver or default_closed_solver)(self)


@dataclass(frozen=True, eq=False)
class OpenModel(_Stations):
    """An open multi-class network: ``D_{m,c}``, ``c_m``, Poisson arrivals ``lambda_c``."""

    arrival_rates: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        lam = as_rates(self.arrival_rates, "arrival_rates")
        D = as_demands(self.demands, n_classes=lam.shape[0])
        object.__setattr__(self, "arrival_rates", _frozen(lam))
        object.__setattr__(self, "demands", _frozen(D))
        object.__setattr__(self, "servers", _frozen(as_servers(self.servers, D.shape[0])))
        object.__setattr__(self, "station_names",
                           _names(self.station_names, D.shape[0], "station", "station_names"))
        object.__setattr__(self, "class_names",
                           _names(self.class_names, lam.shape[0], "class", "class_names"))

    @classmethod
    def build(cls, demands: Any, arrival_rates: Any, servers: Any = None,
              station_names: Sequence[str] | None = None,
              class_names: Sequence[str] | None = None) -> "OpenModel":
        """Validated constructor with defaults (one server per station, generated names)."""
        return cls(demands=demands, servers=servers, station_names=station_names,
                   class_names=class_names, arrival_rates=arrival_rates)

    def with_arrival_rates(self, arrival_rates: Any) -> "OpenModel":
        """The same system under arrival rates ``lambda_c``."""
        return replace(self, arrival_rates=arrival_rates)

    def solve(self, solver: Callable[["OpenModel"], Any] | None = None) -> Any:
        """Solve with ``solver`` (default :func:`solve_open`)."""
        return (solver or _open_solver)(self)


def default_closed_solver(model: ClosedModel) -> Any:
    """Exact MVA when the population lattice has at most ``EXACT_LIMIT`` vectors, else amva."""
    if lattice_size(model.populations) <= EXACT_LIMIT:
        return mva(model.demands, model.populations, model.think_times, model.servers)
    return amva(model.demands, model.populations, model.think_times, model.servers)


@dataclass(frozen=True, eq=False)
class MapNetworkSolution:
    """:func:`solve_closed`'s result seen per class (one class): ``response_time`` and
    ``throughput`` as length-1 arrays, what :func:`max_population` reads; ``exact`` is the full
    :class:`~solvers.mapqn.MAPQNResult` (bottleneck probabilities, queue-length distributions)."""

    exact: MAPQNResult

    @property
    def response_time(self) -> np.ndarray:
        return np.array([self.exact.response_time])

    @property
    def throughput(self) -> np.ndarray:
        return np.array([self.exact.throughput])


def map_network_solver(processes: Sequence[Any]) -> Callable[[ClosedModel], MapNetworkSolution]:
    """A closed solver for :func:`max_population` that uses the exact MAP network (Mi et al.
    (2008), §4).

    ``processes`` are the stations' service processes (MAPs, in station order). Each is rescaled
    to the model's demand ``D_{m,1}`` before solving, so what-ifs that change demands
    (:meth:`~_Stations.scale_speed`), populations or think times carry over while the
    burstiness (SCV, autocorrelation, ``I``) is kept. The model must have one class and
    single-server stations matching ``processes``; a ``ValueError`` names ``model`` otherwise
    (``replicate`` changes the stations: give the replicated processes explicitly).
    """
    procs = tuple(processes)

    def solve(model: ClosedModel) -> MapNetworkSolution:
        if model.demands.shape != (len(procs), 1):
            raise ValueError(f"model: the MAP network solver needs one class and "
                             f"{len(procs)} stations, got demands of shape {model.demands.shape}")
        if np.any(model.servers != 1):
            raise ValueError(f"model: the MAP network solver needs single-server stations, "
                             f"got servers {model.servers.tolist()}")
        if np.any(model.demands <= 0):
            raise ValueError(f"model: every station needs a positive demand for the MAP "
                             f"network solver, got {model.demands[:, 0].tolist()}")
        scaled = [p.scaled(float(d)) for p, d in zip(procs, model.demands[:, 0])]
        return MapNetworkSolution(solve_closed(scaled, int(model.populations[0]),
                                               float(model.think_times[0])))

    return solve


def _open_solver(model: OpenModel) -> Any:
    return solve_open(model.arrival_rates, model.demands, model.servers)


# --------------------------------------------------------------------------------------------
# capacity search
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class CapacityResult:
    """Outcome of a capacity search.

    ``value`` is the largest load step that meets the targets -- the multiplier ``n`` of
    ``populations = base + n * direction`` (closed) or ``x`` of
    ``arrival_rates = x * direction`` (open) -- and ``load`` the corresponding population or
    rate vector. ``result`` is the solution there; ``next_result`` the solution one step
    beyond (``n + 1``; for open models the smallest failing ``x`` found), which violates a
    target unless ``limited``. ``feasible`` is ``False`` when even the smallest load fails
    (then ``value`` is ``None``); ``limited`` is ``True`` when the search stopped at ``limit``
    without a failure. ``violated`` lists the classes that miss their target at
    ``next_result``.
    """

    value: float | None
    load: np.ndarray | None
    result: Any
    next_result: Any
    feasible: bool
    limited: bool
    violated: tuple[int, ...]
    evaluations: int


def _as_targets(targets: Any, n_classes: int) -> np.ndarray:
    try:
        t = np.array(targets, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"targets: not numeric ({targets!r})") from None
    if t.ndim == 0:
        t = np.full(n_classes, float(t))
    if t.shape != (n_classes,):
        raise ValueError(f"targets: need one response-time target per class ({n_classes}), "
                         f"got {targets!r}")
    if np.any(np.isnan(t)) or np.any(t <= 0):
        raise ValueError(f"targets: must be > 0 (math.inf = no target), got {targets!r}")
    return t


def _violations(result: Any, targets: np.ndarray, active: np.ndarray) -> tuple[int, ...]:
    r = np.asarray(result.response_time, dtype=float)
    bad = active & ~(r <= targets)          # NaN (from a foreign solver) counts as a miss
    return tuple(int(c) for c in np.flatnonzero(bad))


def meets_targets(result: Any, targets: Any, active: Any = None) -> bool:
    """``R_c <= target_c`` for every active class (default: all classes)."""
    r = np.asarray(result.response_time, dtype=float)
    t = _as_targets(targets, r.shape[0])
    a = np.ones(r.shape[0], dtype=bool) if active is None else np.asarray(active, dtype=bool)
    return not _violations(result, t, a)


def _int_vector(value: Any, n: int, name: str) -> np.ndarray:
    v = as_populations(value, name)
    if v.shape[0] != n:
        raise ValueError(f"{name}: need one value per class ({n}), got {value!r}")
    return v


def max_population(model: ClosedModel, targets: Any, *, direction: Any = None,
                   base: Any = None, solver: Callable[[ClosedModel], Any] | None = None,
                   limit: int = 1_000_000) -> CapacityResult:
    """Largest ``n`` such that ``populations = base + n * direction`` meets the targets.

    ``targets`` are per-class response-time limits ``R_c <= T_c`` (think time excluded;
    ``math.inf`` = none); only classes with users are checked. ``direction`` defaults to the
    model's populations divided by their gcd (so the class mix is kept; one class: ``n`` is
    the number of users), ``base`` to zero. Exponential bracketing ``n = 1, 2, 4, ...`` then
    integer bisection: the answer ``n`` meets the targets and ``n + 1`` does not.
    """
    solve = solver or default_closed_solver
    C = model.populations.shape[0]
    t = _as_targets(targets, C)
    if direction is None:
        g = int(np.gcd.reduce(model.populations)) if model.populations.any() else 0
        d = model.populations // g if g else np.ones(C, dtype=np.int64)
    else:
        d = _int_vector(direction, C, "direction")
    if not d.any():
        raise ValueError(f"direction: must have a positive entry, got {d.tolist()}")
    b = np.zeros(C, dtype=np.int64) if base is None else _int_vector(base, C, "base")
    if not (isinstance(limit, (int, np.integer)) and limit >= 1):
        raise ValueError(f"limit: must be a positive integer, got {limit!r}")
    cache: dict[int, tuple[Any, tuple[int, ...]]] = {}

    def check(n: int) -> tuple[Any, tuple[int, ...]]:
        if n not in cache:
            pops = b + n * d
            res = solve(model.with_populations(pops))
            cache[n] = (res, _violations(res, t, pops > 0))
        return cache[n]

    if check(0)[1]:
        res0, bad0 = check(0)
        return CapacityResult(value=None, load=None, result=None, next_result=res0,
                              feasible=False, limited=False, violated=bad0,
                              evaluations=len(cache))
    lo, hi = 0, 1
    while not check(hi)[1]:
        lo = hi
        if hi >= limit:
            res = check(lo)[0]
            return CapacityResult(value=lo, load=b + lo * d, result=res, next_result=None,
                                  feasible=True, limited=True, violated=(),
                                  evaluations=len(cache))
        hi = min(2 * hi, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if check(mid)[1]:
            hi = mid
        else:
            lo = mid
    return CapacityResult(value=lo, load=b + lo * d, result=check(lo)[0],
                          next_result=check(hi)[0], feasible=True, limited=False,
                          violated=check(hi)[1], evaluations=len(cache))


def max_arrival_rate(model: OpenModel, targets: Any, *, direction: Any = None,
                     solver: Callable[[OpenModel], Any] | None = None, rel_tol: float = 1e-6,
                     limit: float = 1e12) -> CapacityResult:
    """Largest ``x`` such that ``arrival_rates = x * direction`` meets the targets.

    ``direction`` defaults to the model's arrival rates (so ``x = 1`` is today's load and the
    answer is the headroom factor). Classes with a positive ``direction`` are checked. The
    bracket starts at ``[0, x_sat]`` (saturation, where the default solver's response times
    are infinite) or, for another solver, by doubling from ``x = 1``; bisection stops when the
    bracket is within ``rel_tol``. The returned ``value`` always meets the targets.
    """
    solve = solver or _open_solver
    C = model.arrival_rates.shape[0]
    t = _as_targets(targets, C)
    d = model.arrival_rates if direction is None else as_rates(direction, "direction")
    if d.shape[0] != C:
        raise ValueError(f"direction: need one value per class ({C}), got {direction!r}")
    if not np.any(d > 0):
        raise ValueError(f"direction: must have a positive entry, got {d.tolist()}")
    if not (isinstance(rel_tol, (int, float)) and 0 < rel_tol < 1):
        raise ValueError(f"rel_tol: must be in (0, 1), got {rel_tol!r}")
    active = d > 0
    evaluations = 0

    def check(x: float) -> tuple[Any, tuple[int, ...]]:
        nonlocal evaluations
        evaluations += 1
        res = solve(model.with_arrival_rates(x * d))
        return res, _violations(res, t, active)

    res_lo, bad = check(0.0)
    if bad:
        return CapacityResult(value=None, load=None, result=None, next_result=res_lo,
                              feasible=False, limited=False, violated=bad,
                              evaluations=evaluations)
    lo = 0.0
    x_sat = saturation_rate(model.demands, model.servers, d)
    hi = x_sat if (solver is None and math.isfinite(x_sat)) else 1.0
    res_hi, bad_hi = check(hi)
    while not bad_hi:
        lo, res_lo = hi, res_hi
        if hi >= limit:
            return CapacityResult(value=lo, load=lo * d, result=res_lo, next_result=None,
                                  feasible=True, limited=True, violated=(),
                                  evaluations=evaluations)
        hi = min(2.0 * hi, limit)
        res_hi, bad_hi = check(hi)
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        res, bad_mid = check(mid)
        if bad_mid:
            hi, res_hi, bad_hi = mid, res, bad_mid
        else:
            lo, res_lo = mid, res
    return CapacityResult(value=lo, load=lo * d, result=res_lo, next_result=res_hi,
                          feasible=True, limited=False, violated=bad_hi,
                          evaluations=evaluations)
