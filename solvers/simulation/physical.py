"""Discrete-event simulation of the *physical* closed multi-tier system: the ground truth.

What is simulated
-----------------
``N`` users (``population``) each think for an exponential time of mean ``Z``
(``think_time``; ``Z = 0`` means the user resubmits at once), then submit a request. The
request's class ``c`` is drawn independently for every request with probabilities ``mix``.
The request visits tiers ``1..M`` in order, then its user thinks again: tier ``m`` ``V_{m,c}``
times in a row (``visits[c]`` of the tier, default once: a page that makes three database calls
visits the database three times), each visit a job of its own in the tier's queue. The
response time of a request runs from entering tier 1 to leaving tier ``M`` (think excluded).

Tier ``m`` has ``cores`` ``c_m >= 1`` identical cores and **one FCFS queue**. Whenever a core
is free and the queue is not empty, the head-of-line job starts service. Its service time is
the **next value of the tier's own service-time sequence** times the class's multiplier
``multipliers[c]`` at that tier (default 1). The sequence is

* i.i.d. exponential of mean ``S`` when ``service`` is a number, or
* the successive, correlated intervals of a :class:`~solvers.processes.MAP` when ``service``
  is one -- Mi et al. (2008) §4.1 models a tier's
  service process as a MAP(2) whose phase selects slow or fast service, so that heavy
  requests come in runs (Fig. 1(d)); that is the cause of burstiness and of the bottleneck
  switch of §3.4. The sequence is sampled in blocks and the phase reached after the last
  interval of a block starts the next block, so the tier sees one continuous MAP interval
  sequence, consumed in the order services *start*: with ``c`` cores the ``c`` jobs in
  service hold consecutive values of it.

Pools
-----
``pools`` (:class:`solvers.pools.PoolSpec`, tiers ``first .. last - 1``): a request takes one of
the pool's ``size`` tokens before its first visit to tier ``first`` -- waiting FCFS for one
when all are held, in no core's queue -- and gives it back when it leaves tier ``last - 1``,
the token passing at once to the head of the pool's queue (simultaneous resource possession,
Jacobson and Lazowska 1982). Nested pools are taken outer first and given back inner first.
The wait for a token counts in the owning tier's (``first``'s) residence time, as a service
measures it (its request timer runs while it waits for a connection or a worker).

Open sources
------------
``arrivals=OpenArrivals(rate, process)`` makes the system open: requests arrive from outside
(no users, no think time; ``population`` must be 0) with the intervals of ``process`` (Poisson
by default, or the shape of a :class:`~solvers.processes.MAP`, e.g. an MMPP(2)) at a rate that
is a number or a piecewise-linear schedule ``[(t, rate), ...]`` (flat, ramp). A time-varying
rate is a time change (Cinlar 1975): the process is run at rate 1 in operational time
``u = Lambda(t) = int_0^t rate(s) ds`` and each arrival placed at ``Lambda^{-1}(u)``, so a
Poisson source is the non-homogeneous Poisson process of that rate.

Why this is the ground truth and not a model
--------------------------------------------
:mod:`solvers.simulation.network` simulates the *queueing model* (Mi et al. 2008, Fig. 9 with MAP
service processes, §4): a continuous-time Markov chain whose MAP phase advances in time while
a station is busy and whose multi-server stations need exponential service. Here nothing is
Markovian by construction: every job carries an explicit service time drawn when its service
starts, cores are individual servers, and a request's class scales its service time. This is
how a real multi-tier server behaves (a request's work is what it is, whatever the other
cores are doing) and it is *not* a MAP queueing network when ``c_m > 1``, when multipliers
differ between classes, or when a MAP is shared by concurrent cores. Queueing solvers
(MVA, MAP-QN, decomposition) are validated against it; it agrees with exact MVA exactly when
the model is product form (exponential, class-independent service at every tier).

Time-varying population
-----------------------
``schedule=[(t, N), ...]`` (sorted by ``t``) sets the population at simulated time ``t``,
with the rule of :mod:`solvers.simulation.network`: an increase adds users that start
thinking (with ``Z = 0``: submit at once) after cancelling pending departures; a decrease
removes thinking users immediately and the remaining ones leave when their current request
completes (a request is never dropped).

Outputs
-------
* :func:`monitor_physical` -- per-window, per-tier records in the shape of the input
  contract (docs/pipeline.md) (via :func:`solvers.simulation.monitoring.window_records`): ``utilization`` is the
  busy core-time in the window divided by ``c_m * window_s``, accounted exactly across window
  edges (a service spanning an edge counts in both windows, pro rata); a request counts in
  the window in which it *leaves* the tier; ``response_time_s`` is the mean time at the tier
  (queueing + service) of those requests; ``users`` is the population at the window's end
  (including users due to leave); the owning tier's record carries each pool's ``size``
  and its time-average ``busy`` tokens and ``waiting`` requests over the window (``pools``).
* :func:`simulate_physical` -- steady-state estimates with confidence intervals (independent
  replications or batch means, :mod:`solvers.simulation.stats`) of per-class and overall
  throughput and response time, per-tier utilization, queue length, residence time, and the
  *measured* mean service time per tier and class (the realised demands ``D_{m,c}``); with
  ``quantiles`` also per-class quantiles of the response time from every measured request's
  own response time (the empirical quantile of the pooled runs, its interval over the
  replications' or batches' own empirical quantiles; per pool the mean tokens held and
  requests waiting for one).

Engine
------
An event list (``heapq``) of plain Python tuples holds service completions and think
completions (one per thinking user); arrivals at the next tier happen at the completion
instant. Random numbers are drawn in numpy blocks from one ``numpy.random.Generator``, so a
seed fixes the run. Cumulative counters are snapshotted at checkpoint times; busy time and
queue area at a checkpoint add the elapsed part of the services (and waits) in progress, so
window statistics are exact. Durations and warm-up are simulated time.
"""

from __future__ import annotations

import heapq
import itertools
from array import array
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from solvers.pools import PoolSpec
from solvers.processes import MAP
from solvers.simulation.shapes import CorrelatedService
from solvers.simulation.monitoring import window_records
from solvers.simulation.network import resolve_rng
from solvers.simulation.network import Checkpoints
from solvers.simulation.stats import Estimate, replication_interval

__all__ = ["Tier", "OpenArrivals", "PhysicalNetwork", "PhysicalResult", "monitor_physical",
           "simulate_physical", "physical_checkpoints"]

_BLOCK = 8192          # random numbers drawn per numpy call
_MIX_TOL = 1e-6        # |sum(mix) - 1| accepted (then renormalised)


# ----------------------------------------------------------------------------- validation
def _positive(value: Any, name: str, allow_zero: bool = False) -> float:
    cond = ">= 0" if allow_zero else "> 0"
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a finite number {cond}, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(v) or (v < 0 if allow_zero else v <= 0):
        raise ValueError(f"{name}: must be a finite number {cond}, got {value!r}")
    return v


def _count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _per_class(values: Any, name: str, what: str, check: Any) -> tuple:
    """``values`` (one per class) as a tuple, each passed through ``check(value, name[i])``."""
    try:
        items = tuple(values)
    except TypeError:
        raise ValueError(f"{name}: must be a sequence of {what}, got {values!r}") from None
    if not items:
        raise ValueError(f"{name}: must not be empty")
    return tuple(check(v, f"{name}[{i}]") for i, v in enumerate(items))


# ----------------------------------------------------------------------------- specification
@dataclass(frozen=True)
class Tier:
    """One tier: ``cores`` identical cores behind one FCFS queue.

    ``service`` -- mean of i.i.d. exponential service times (a number > 0), or a
    :class:`~solvers.processes.MAP` whose successive intervals are the service times.
    ``multipliers`` -- per-class factors on the service time (``None``: 1 for every class);
    its length must match the network's classes.
    ``visits`` -- per class, how many times in a row a request visits the tier (integers >= 1;
    ``None``: once for every class); its length must match the network's classes.
    ``class_service`` -- per class, a service process of the class's own (``None``: the
    tier's): such a class's services take the successive values of its own sequence (times
    its multiplier), the others share the tier's -- one class whose work comes in runs (a
    query whose cost depends on the data it reaches) among classes that do not.
    A process is a mean (exponential), a MAP or a
    :class:`~solvers.simulation.shapes.CorrelatedService`.
    """

    name: str
    cores: int
    service: float | MAP | CorrelatedService
    multipliers: tuple[float, ...] | None = None
    visits: tuple[int, ...] | None = None
    class_service: tuple[float | MAP | CorrelatedService | None, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: must be a non-empty string, got {self.name!r}")
        object.__setattr__(self, "cores", _count(self.cores, "cores", 1))
        object.__setattr__(self, "service", _process(self.service, f"{self.name}.service"))
        if self.class_service is not None:
            object.__setattr__(self, "class_service", _per_class(
                self.class_service, f"{self.name}.class_service", "processes or None",
                lambda v, name: None if v is None else _process(v, name)))
        if self.multipliers is not None:
            object.__setattr__(self, "multipliers", _per_class(
                self.multipliers, f"{self.name}.multipliers", "numbers > 0",
                lambda v, name: _positive(v, name)))
        if self.visits is not None:
            object.__setattr__(self, "visits", _per_class(
                self.visits, f"{self.name}.visits", "integers >= 1",
                lambda v, name: _count(v, name, 1)))

    @property
    def mean_service(self) -> float:
        """Mean of the tier's service-time sequence (before class multipliers)."""
        return _mean(self.service)

    def class_means(self, classes: int) -> np.ndarray:
        """``(classes,)`` mean of the sequence each class draws from (before multipliers)."""
        own = self.class_service or (None,) * classes
        return np.array([_mean(self.service if p is None else p) for p in own])


def _process(value: Any, name: str) -> float | MAP | CorrelatedService:
    """A service process as given: a MAP, a :class:`CorrelatedService` or a mean > 0."""
    if isinstance(value, (MAP, CorrelatedService)):
        return value
    try:
        return _positive(value, name)
    except ValueError:
        raise ValueError(f"{name}: must be a mean service time > 0 (finite) or a MAP or a "
                         f"CorrelatedService, got {value!r}") from None


def _mean(process: float | MAP | CorrelatedService) -> float:
    return float(process) if isinstance(process, (int, float)) else float(process.mean)


def _pairs(items: Any, name: str, second: str) -> Iterator[tuple[float, Any]]:
    """``(time, value)`` pairs of a schedule, each time a finite number >= 0 (``ValueError``
    naming ``name[i]`` otherwise)."""
    for i, entry in enumerate(items):
        try:
            t, value = entry
        except (TypeError, ValueError):
            raise ValueError(f"{name}[{i}]: must be a (time, {second}) pair, "
                             f"got {entry!r}") from None
        yield _positive(t, f"{name}[{i}] time", allow_zero=True), value


def _rate_schedule(rate: Any) -> tuple[tuple[float, float], ...]:
    """A rate (a number) or ``[(t, rate), ...]`` as breakpoints starting at ``t = 0``."""
    if isinstance(rate, (int, float, np.integer, np.floating)) and not isinstance(rate, bool):
        return ((0.0, _positive(rate, "arrivals.rate")),)
    try:
        items = list(rate)
    except TypeError:
        raise ValueError(f"arrivals.rate: must be a rate > 0 or a schedule of (time, rate) "
                         f"pairs, got {rate!r}") from None
    if not items:
        raise ValueError("arrivals.rate: the schedule must not be empty")
    out: list[tuple[float, float]] = []
    for i, (t, r) in enumerate(_pairs(items, "arrivals.rate", "rate")):
        r = _positive(r, f"arrivals.rate[{i}] rate", allow_zero=True)
        if out and t <= out[-1][0]:
            raise ValueError(f"arrivals.rate[{i}]: times must increase, got {t} after "
                             f"{out[-1][0]}")
        out.append((t, r))
    if out[0][0] > 0:
        out.insert(0, (0.0, out[0][1]))
    if not any(r > 0 for _, r in out):
        raise ValueError(f"arrivals.rate: the schedule never has a positive rate, got {rate!r}")
    return tuple(out)


@dataclass(frozen=True)
class OpenArrivals:
    """An open source: requests arrive at ``rate`` per second -- a number, or a schedule
    ``[(t, rate), ...]`` linear between its points and constant after the last (a flat part
    then a ramp: ``[(0, 200), (1200, 200), (3600, 560)]``) -- with the intervals of
    ``process`` (``None``: Poisson; a MAP: its shape, e.g. an MMPP(2), at that rate)."""

    rate: Any
    process: MAP | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", _rate_schedule(self.rate))
        if self.process is not None and not isinstance(self.process, MAP):
            raise ValueError(f"arrivals.process: must be a MAP or None, got {self.process!r}")

    def rate_at(self, t: float | np.ndarray) -> np.ndarray:
        """The arrival rate at time(s) ``t``."""
        ts, rs = zip(*self.rate)
        return np.interp(t, ts, rs)

    def to_real_time(self, u: np.ndarray) -> np.ndarray:
        """``Lambda^{-1}(u)``: real times of operational times ``u`` (module docstring); on a
        segment with rates ``r0 -> r1`` over ``h`` seconds, ``Lambda`` is quadratic."""
        ts = np.array([t for t, _ in self.rate] + [math.inf])
        rs = np.array([r for _, r in self.rate] + [self.rate[-1][1]])
        h = np.diff(ts)
        slope = np.where(np.isfinite(h), np.diff(rs) / np.where(np.isfinite(h), h, 1.0), 0.0)
        area = np.where(np.isfinite(h), (rs[:-1] + rs[1:]) / 2 * np.where(np.isfinite(h), h,
                                                                          0.0), math.inf)
        cum = np.concatenate(([0.0], np.cumsum(area)))
        seg = np.clip(np.searchsorted(cum, u, side="right") - 1, 0, len(h) - 1)
        du = u - cum[seg]
        r0, a = rs[seg], slope[seg]
        with np.errstate(divide="ignore", invalid="ignore"):
            quad = 2 * du / (r0 + np.sqrt(np.maximum(r0 * r0 + 2 * a * du, 0.0)))
        tau = np.where(np.abs(a) > 0, quad, du / np.where(r0 > 0, r0, 1.0))
        out = ts[seg] + tau
        return np.where((r0 <= 0) & (a == 0), math.inf, out)


@dataclass(frozen=True)
class PhysicalNetwork:
    """``population`` users thinking ``think_time`` (exponential mean, 0 allowed) and sending
    requests of ``classes`` drawn with probabilities ``mix`` through ``tiers`` in order; or,
    with ``arrivals``, an open source (``population`` 0; module docstring)."""

    tiers: tuple[Tier, ...]
    classes: tuple[str, ...]
    mix: tuple[float, ...]
    think_time: float
    population: int
    arrivals: OpenArrivals | None = None
    #: pools held across runs of tiers (module docstring, "Pools")
    pools: tuple[PoolSpec, ...] = ()

    def __post_init__(self) -> None:
        tiers = tuple(self.tiers) if isinstance(self.tiers, (list, tuple)) else ()
        pools = tuple(self.pools) if isinstance(self.pools, (list, tuple)) else None
        if pools is None or not all(isinstance(p, PoolSpec) and isinstance(p.size, int)
                                    and p.size >= 1 and 0 <= p.first < p.last <= len(tiers)
                                    for p in pools):
            raise ValueError(f"pools: must be PoolSpec with size >= 1 over the tiers "
                             f"(0 <= first < last <= {len(tiers)}), got {self.pools!r}")
        object.__setattr__(self, "pools", pools)
        if not tiers or not all(isinstance(t, Tier) for t in tiers):
            raise ValueError(f"tiers: must be a non-empty sequence of Tier, got {self.tiers!r}")
        names = [t.name for t in tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"tiers: names must be unique, got {names}")
        classes = tuple(self.classes) if isinstance(self.classes, (list, tuple)) else ()
        if not classes or not all(isinstance(c, str) and c for c in classes) \
                or len(set(classes)) != len(classes):
            raise ValueError(f"classes: must be distinct non-empty strings, got {self.classes!r}")
        object.__setattr__(self, "tiers", tiers)
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "mix", _mix(self.mix, len(classes)))
        object.__setattr__(self, "think_time", _positive(self.think_time, "think_time", True))
        object.__setattr__(self, "population", _count(self.population, "population", 0))
        if self.arrivals is not None:
            if not isinstance(self.arrivals, OpenArrivals):
                raise ValueError(f"arrivals: must be OpenArrivals or None, got "
                                 f"{self.arrivals!r}")
            if self.population != 0:
                raise ValueError(f"population: an open network (arrivals) has no users, got "
                                 f"{self.population}")
        for t in tiers:
            for what, given in (("multipliers", t.multipliers), ("visits", t.visits),
                                ("class_service", t.class_service)):
                if given is not None and len(given) != len(classes):
                    raise ValueError(f"{t.name}.{what}: need {len(classes)} values (one per "
                                     f"class), got {len(given)}")

    def multiplier_matrix(self) -> np.ndarray:
        """``(M, C)`` class multipliers (1 where a tier gives none)."""
        C = len(self.classes)
        return np.array([t.multipliers if t.multipliers is not None else (1.0,) * C
                         for t in self.tiers], dtype=float)

    def visit_matrix(self) -> np.ndarray:
        """``(M, C)`` visits per request ``V[m, c]`` (1 where a tier gives none)."""
        C = len(self.classes)
        return np.array([t.visits if t.visits is not None else (1,) * C
                         for t in self.tiers], dtype=float)

    @property
    def demands(self) -> np.ndarray:
        """True demands ``D[m, c] = mean(service_{m,c}) * multipliers_m[c]`` (seconds, one
        visit; the class's own process where it has one), shape ``(M, C)``. The mean demand of
        a request at tier ``m`` is ``(visit_matrix() * D)[m] @ mix``."""
        C = len(self.classes)
        means = np.array([t.class_means(C) for t in self.tiers])
        return means * self.multiplier_matrix()

    @property
    def cores(self) -> np.ndarray:
        """``(M,)`` cores per tier."""
        return np.array([t.cores for t in self.tiers], dtype=int)


def _mix(value: Any, n: int) -> tuple[float, ...]:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"mix: must be {n} probabilities, got {value!r}") from None
    if arr.ndim != 1 or arr.size != n:
        raise ValueError(f"mix: need {n} probabilities (one per class), got {value!r}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or abs(arr.sum() - 1.0) > _MIX_TOL:
        raise ValueError(f"mix: must be probabilities >= 0 that sum to 1, got {value!r}")
    return tuple((arr / arr.sum()).tolist())


def checked_schedule(schedule: Sequence[tuple[float, int]] | None) -> list[tuple[float, int]]:
    """A population ``schedule`` (``(time, users)`` pairs, times sorted, users integers >= 0) as
    a list; ``None`` is the empty schedule."""
    if schedule is None:
        return []
    out: list[tuple[float, int]] = []
    last = -math.inf
    for i, (t, pop) in enumerate(_pairs(schedule, "schedule", "population")):
        if t < last:
            raise ValueError(f"schedule[{i}]: times must be sorted, got {t} after {last}")
        last = t
        if isinstance(pop, float) and pop.is_integer():
            pop = int(pop)
        out.append((t, _count(pop, f"schedule[{i}] population", 0)))
    return out


def seeded_generator(rng: np.random.Generator | None, seed: int | None) -> np.random.Generator:
    """The random generator of a run: ``rng`` or one seeded by ``seed`` (an integer >= 0);
    ``ValueError`` naming ``seed`` otherwise."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise ValueError(f"seed: must be a non-negative integer, got {seed!r}")
    return resolve_rng(rng, seed)


# ----------------------------------------------------------------------------- random streams
def _service_blocks(service: float | MAP | CorrelatedService, rng: np.random.Generator,
                    block: int = _BLOCK) -> Iterator[list[float]]:
    """Endless blocks of a tier's service-time sequence (one continuous MAP sequence)."""
    if isinstance(service, CorrelatedService):
        yield from service.blocks(rng, block)
    if isinstance(service, MAP) and service.order > 1:
        phase = int(rng.choice(service.order, p=service.embedded))
        while True:
            values, phase = service.intervals(block, rng, phase)
            yield values.tolist()
    mean = service.mean if isinstance(service, MAP) else float(service)
    while True:
        yield rng.exponential(mean, block).tolist()


def _class_blocks(mix: tuple[float, ...], rng: np.random.Generator) -> Iterator[list[int]]:
    while True:
        yield rng.choice(len(mix), size=_BLOCK, p=mix).tolist()


def _exp_blocks(mean: float, rng: np.random.Generator) -> Iterator[list[float]]:
    while True:
        yield rng.exponential(mean, _BLOCK).tolist()


def _arrival_blocks(arrivals: OpenArrivals, rng: np.random.Generator) -> Iterator[list[float]]:
    """Endless blocks of arrival epochs of ``arrivals`` in real time (the time change of the
    module docstring applied to the unit-rate process)."""
    proc = arrivals.process
    unit = proc.scaled(1.0) if proc is not None and proc.order > 1 else None
    phase = int(rng.choice(unit.order, p=unit.embedded)) if unit is not None else 0
    u = 0.0
    while True:
        if unit is None:
            gaps = rng.exponential(1.0, _BLOCK)
        else:
            gaps, phase = unit.intervals(_BLOCK, rng, phase)
        ops = u + np.cumsum(gaps)
        u = float(ops[-1])
        yield arrivals.to_real_time(ops).tolist()


def _stream(blocks: Iterator[list[Any]]) -> Any:
    """``next``-able flat stream over ``blocks``."""
    return itertools.chain.from_iterable(blocks).__next__


# ----------------------------------------------------------------------------- engine
@dataclass(frozen=True)
class _Trace:
    """Checkpoints of one run plus the cumulative service time of completed services
    (``(K, M, C)``), for the measured demands."""

    cp: Checkpoints
    service_sum: np.ndarray
    #: per class, the response time of every completed request in completion order (or None)
    samples: list[np.ndarray] | None = None
    #: per pool, the integral of tokens held and of requests waiting for one (``(K, P)``)
    pool_held: np.ndarray | None = None
    pool_waiting: np.ndarray | None = None

    def responses(self, i: int, j: int, c: int) -> np.ndarray:
        """Response times of the class-``c`` requests completed in ``(times[i], times[j]]``:
        the samples between the checkpoints' completion counts."""
        done = self.cp.completions
        return self.samples[c][int(done[i, c]):int(done[j, c])]


class Engine:
    """One run of the physical system; :meth:`run` records checkpoints at ``times``."""

    def __init__(self, net: PhysicalNetwork, rng: np.random.Generator,
                 record: bool = False) -> None:
        self.net = net
        self.rng = rng
        self.M = len(net.tiers)
        self.C = len(net.classes)
        self.cores = [t.cores for t in net.tiers]
        self.mult = net.multiplier_matrix().ravel().tolist()     # index m * C + c
        # visits per request, index m * C + c, and a last row of ones past the last tier
        self.vis = [int(v) for v in net.visit_matrix().ravel().tolist()] + [1] * self.C
        # the sequence each (tier, class) draws from, index m * C + c: the tier's own one
        # shared by its classes, a class's own where it has one
        shared = [_stream(_service_blocks(t.service, rng)) for t in net.tiers]
        self.service = [shared[m] if t.class_service is None or t.class_service[c] is None
                        else _stream(_service_blocks(t.class_service[c], rng))
                        for m, t in enumerate(net.tiers) for c in range(self.C)]
        self.next_class = (_stream(_class_blocks(net.mix, rng)) if self.C > 1
                           else itertools.repeat(0).__next__)
        self.Z = net.think_time
        self.next_think = _stream(_exp_blocks(self.Z, rng)) if self.Z > 0 else None
        self.next_token = itertools.count().__next__
        self.heap: list[tuple] = []
        self.queues = [deque() for _ in range(self.M)]
        self.busy = [0] * self.M
        self.cancelled: set[int] = set()
        self.present = 0
        self.deficit = 0
        n = self.M * self.C
        self.q_done = [0] * n
        self.q_rt = [0.0] * n
        self.svc = [0.0] * n
        self.done = [0] * self.C
        self.rt = [0.0] * self.C
        #: per class, every completed request's response time in completion order (opt-in)
        self.samples = [array("d") for _ in range(self.C)] if record else None
        #: when a list: every tier visit's ``(request start, class, tier, sojourn)`` is
        #: appended to it (a diagnostic: how the tiers' sojourns of one request co-vary)
        self.visit_log: list[tuple[float, int, int, float]] | None = None
        self.next_arrival = (_stream(_arrival_blocks(net.arrivals, rng))
                             if net.arrivals is not None else None)
        # pools: per tier, the pools taken before its first visit (outer first) and given
        # back after its last (inner first); free tokens and FCFS queues per pool
        pools = net.pools
        span = [p.last - p.first for p in pools]
        self.acquire = [sorted((i for i, p in enumerate(pools) if p.first == m),
                               key=lambda i: (-span[i], i)) for m in range(self.M)]
        self.release = [[i for i in sorted(range(len(pools)), key=lambda i: (span[i], -i))
                         if pools[i].last - 1 == m] for m in range(self.M)]
        self.free = [p.size for p in pools]
        self.token_queue = [deque() for _ in pools]
        # per pool: integrals of tokens held and of requests waiting, up to pool_since
        self.pool_held = [0.0] * len(pools)
        self.pool_wait = [0.0] * len(pools)
        self.pool_since = [0.0] * len(pools)

    def _pool_mark(self, p: int, t: float) -> None:
        """Add pool ``p``'s tokens held and requests waiting since its last change up to ``t``
        (called before every change of either)."""
        dt = t - self.pool_since[p]
        self.pool_held[p] += (self.net.pools[p].size - self.free[p]) * dt
        self.pool_wait[p] += len(self.token_queue[p]) * dt
        self.pool_since[p] = t

    def _enter(self, m: int, c: int, t: float, t_sys: float, k: int, start: int,
               t_in: float | None = None) -> None:
        """Take the tokens of tier ``m``'s pools from the ``start``-th on, then arrive at
        ``m`` at ``t``; wait in the first pool with none free. ``t_in``: when the request
        reached the tier (default ``t``): its residence there runs from then."""
        t_in = t if t_in is None else t_in
        wanted = self.acquire[m]
        for j in range(start, len(wanted)):
            p = wanted[j]
            self._pool_mark(p, t)
            if self.free[p] == 0:
                self.token_queue[p].append((m, c, t_in, t_sys, k, j + 1))
                return
            self.free[p] -= 1
        self._arrive(m, c, t, t_sys, k, t_in)

    def _release(self, m: int, t: float) -> None:
        """Give back the tokens of the pools that end at tier ``m``: to the head of each
        pool's queue, or to the pool."""
        for p in self.release[m]:
            self._pool_mark(p, t)
            if self.token_queue[p]:
                m2, c2, t_in2, t_sys2, k2, next_pool = self.token_queue[p].popleft()
                self._enter(m2, c2, t, t_sys2, k2, next_pool, t_in2)
            else:
                self.free[p] += 1

    # -- rare paths (population changes), not inlined
    def _arrive(self, m: int, c: int, t: float, t_sys: float, k: int | None = None,
                t_in: float | None = None) -> None:
        if k is None:
            k = self.vis[m * self.C + c]
        t_in = t if t_in is None else t_in
        if self.busy[m] < self.cores[m]:
            self.busy[m] += 1
            s = self.service[m * self.C + c]() * self.mult[m * self.C + c]
            heapq.heappush(self.heap, (t + s, m, c, t_in, t_sys, s, k))
        else:
            self.queues[m].append((c, t_in, t_sys, k))

    def _new_user(self, t: float) -> None:
        if self.Z > 0:
            heapq.heappush(self.heap, (t + self.next_think(), -1, self.next_token(),
                                       0.0, 0.0, 0.0, 0))
        elif self.acquire[0]:
            c = self.next_class()
            self._enter(0, c, t, t, self.vis[c], 0)
        else:
            self._arrive(0, self.next_class(), t, t)

    def set_population(self, target: int, t: float) -> None:
        current = self.present - self.deficit
        if target > current:
            add = target - current
            cancel = min(self.deficit, add)
            self.deficit -= cancel
            for _ in range(add - cancel):
                self.present += 1
                self._new_user(t)
        elif target < current:
            remove = current - target
            thinking = sorted(e[2] for e in self.heap
                              if e[1] < 0 and e[2] not in self.cancelled)
            k = min(remove, len(thinking))
            if k:
                picks = self.rng.choice(len(thinking), size=k, replace=False)
                self.cancelled.update(thinking[i] for i in picks.tolist())
            self.present -= k
            self.deficit += remove - k

    def snapshot(self, t: float) -> tuple:
        """Cumulative counters at ``t``, including the elapsed part of work in progress."""
        C = self.C
        busy = [0.0] * self.M
        area = list(self.q_rt)
        for i, s in enumerate(self.svc):
            busy[i // C] += s
        for t_done, m, c, t_in, _, s, _ in self.heap:
            if m >= 0:
                busy[m] += s - (t_done - t)
                area[m * C + c] += t - t_in
        for m, q in enumerate(self.queues):
            for c, t_in, _, _ in q:
                area[m * C + c] += t - t_in
        for q in self.token_queue:                     # waiting for a token at tier m
            for m, c, t_in, _, _, _ in q:
                area[m * C + c] += t - t_in
        for p in range(len(self.free)):
            self._pool_mark(p, t)
        return (t, busy, area, self.done[:], self.rt[:], self.q_done[:], self.q_rt[:],
                self.present, sum(self.q_done), self.svc[:], self.pool_held[:],
                self.pool_wait[:])

    def run(self, times: np.ndarray, schedule: list[tuple[float, int]]) -> _Trace:
        fixed = [(float(t), 0, 0) for t in times]
        fixed += [(t, 1, pop) for t, pop in schedule if t <= times[-1]]
        fixed.sort(key=lambda e: (e[0], e[1]))
        self.set_population(self.net.population, 0.0)
        if self.next_arrival is not None:
            heapq.heappush(self.heap, (self.next_arrival(), -2, 0, 0.0, 0.0, 0.0, 0))
        snaps = []
        for t_fixed, kind, pop in fixed:
            self._advance(t_fixed)
            if kind == 0:
                snaps.append(self.snapshot(t_fixed))
            else:
                self.set_population(pop, t_fixed)
        return self._trace(snaps)

    def _advance(self, until: float) -> None:
        """Process every event strictly before ``until`` (the hot loop)."""
        heap, queues, busy, cores = self.heap, self.queues, self.busy, self.cores
        mult, service, C, M, vis = self.mult, self.service, self.C, self.M, self.vis
        q_done, q_rt, svc, done, rt = self.q_done, self.q_rt, self.svc, self.done, self.rt
        cancelled, next_class, next_think = self.cancelled, self.next_class, self.next_think
        next_token, next_arrival = self.next_token, self.next_arrival
        is_open = next_arrival is not None
        push, pop = heapq.heappush, heapq.heappop
        deficit = self.deficit
        present = self.present
        samples = self.samples
        visits = self.visit_log
        acquire = self.acquire if self.net.pools else None
        release = self.release if self.net.pools else None
        enter, give_back = self._enter, self._release
        while heap and heap[0][0] < until:
            t, m, c, t_in, t_sys, s, k = pop(heap)
            if m == -2:                                # an arrival from the open source
                push(heap, (next_arrival(), -2, 0, 0.0, 0.0, 0.0, 0))
                c = next_class()
                t_sys = t
                m = 0
                k = vis[c]
            elif m < 0:                                # a user ends thinking
                if cancelled and c in cancelled:
                    cancelled.discard(c)
                    continue
                c = next_class()
                t_sys = t
                m = 0
                k = vis[c]
            else:                                      # a service ends at tier m
                q = queues[m]
                if q:
                    c2, t_in2, t_sys2, k2 = q.popleft()
                    s2 = service[m * C + c2]() * mult[m * C + c2]
                    push(heap, (t + s2, m, c2, t_in2, t_sys2, s2, k2))
                else:
                    busy[m] -= 1
                i = m * C + c
                q_done[i] += 1
                q_rt[i] += t - t_in
                svc[i] += s
                if visits is not None:
                    visits.append((t_sys, c, m, t - t_in))
                if k > 1:                              # the request's next visit to tier m
                    k -= 1
                else:
                    if release is not None and release[m]:
                        give_back(m, t)
                    m += 1
                    k = vis[i + C]
                if m == M:                             # the request is complete
                    done[c] += 1
                    rt[c] += t - t_sys
                    if samples is not None:
                        samples[c].append(t - t_sys)
                    if is_open:
                        continue
                    if deficit:
                        deficit -= 1
                        present -= 1
                        continue
                    if next_think is not None:
                        push(heap, (t + next_think(), -1, next_token(), 0.0, 0.0, 0.0, 0))
                        continue
                    c = next_class()
                    t_sys = t
                    m = 0
                    k = vis[c]
            if acquire is not None and acquire[m] and k == vis[m * C + c]:
                enter(m, c, t, t_sys, k, 0)            # tokens first, then tier m
                continue
            if busy[m] < cores[m]:                     # arrival at tier m
                busy[m] += 1
                i = m * C + c
                s = service[i]() * mult[i]
                push(heap, (t + s, m, c, t, t_sys, s, k))
            else:
                queues[m].append((c, t, t_sys, k))
        self.deficit = deficit
        self.present = present

    def _trace(self, snaps: list[tuple]) -> _Trace:
        M, C = self.M, self.C
        cols = list(zip(*snaps))
        cp = Checkpoints(
            times=np.array(cols[0], dtype=float),
            busy=np.array(cols[1], dtype=float).reshape(-1, M),
            queue_area=np.array(cols[2], dtype=float).reshape(-1, M, C),
            completions=np.array(cols[3], dtype=np.int64).reshape(-1, C),
            response_sum=np.array(cols[4], dtype=float).reshape(-1, C),
            queue_completions=np.array(cols[5], dtype=np.int64).reshape(-1, M, C),
            residence_sum=np.array(cols[6], dtype=float).reshape(-1, M, C),
            bottleneck_time=None,
            users=np.array(cols[7], dtype=np.int64),
            events=np.array(cols[8], dtype=np.int64),
            servers=np.array(self.cores, dtype=float),
        )
        P = len(self.free)
        return _Trace(cp, np.array(cols[9], dtype=float).reshape(-1, M, C),
                      None if self.samples is None
                      else [np.frombuffer(a, dtype=float) for a in self.samples],
                      np.array(cols[10], dtype=float).reshape(len(snaps), P),
                      np.array(cols[11], dtype=float).reshape(len(snaps), P))


def simulate(net: PhysicalNetwork, times: np.ndarray, schedule: list[tuple[float, int]],
             rng: np.random.Generator, record: bool = False) -> _Trace:
    """One run of ``net`` from time 0 to ``times[-1]`` under ``schedule``, recording the counters
    at each of ``times`` (and, with ``record``, every completed request's response time)."""
    return Engine(net, rng, record).run(times, schedule)


def physical_checkpoints(network: PhysicalNetwork, times: Sequence[float] | np.ndarray, *,
                         schedule: Sequence[tuple[float, int]] | None = None,
                         seed: int | None = None,
                         rng: np.random.Generator | None = None) -> Checkpoints:
    """Run ``network`` from time 0 (all users thinking) to ``times[-1]`` and return the
    cumulative counters at each of ``times`` (strictly increasing, >= 0) as
    :class:`~solvers.simulation.network.Checkpoints` (``events`` = services completed)."""
    _check_network(network)
    ts = _times(times)
    return simulate(network, ts, checked_schedule(schedule), seeded_generator(rng, seed)).cp


def _check_network(network: Any) -> None:
    if not isinstance(network, PhysicalNetwork):
        raise ValueError(f"network: must be a PhysicalNetwork, got {type(network).__name__}")


def _times(times: Sequence[float] | np.ndarray) -> np.ndarray:
    ts = np.asarray(times, dtype=float)
    if ts.ndim != 1 or ts.size == 0 or not np.all(np.isfinite(ts)) or np.any(ts < 0) \
            or np.any(np.diff(ts) <= 0):
        raise ValueError(f"times: must be a non-empty, strictly increasing sequence of finite "
                         f"times >= 0, got {times!r}")
    return ts


# ----------------------------------------------------------------------------- monitoring
def window_edges(duration: float, window_s: float, warmup: float) -> np.ndarray:
    """The edges of the whole ``window_s`` windows that fit in ``duration`` after ``warmup``."""
    d = _positive(duration, "duration")
    w = _positive(window_s, "window_s")
    warm = _positive(warmup, "warmup", allow_zero=True)
    k = int(math.floor(d / w + 1e-9))
    if k < 1:
        raise ValueError(f"window_s: {window_s} is longer than duration {duration}")
    return warm + w * np.arange(k + 1)


def monitor_physical(network: PhysicalNetwork, duration: float, window_s: float, *,
                     warmup: float = 0.0, schedule: Sequence[tuple[float, int]] | None = None,
                     system: str = "sim", start_time: float = 0.0, iso_time: bool = False,
                     seed: int | None = None,
                     rng: np.random.Generator | None = None) -> list[dict[str, Any]]:
    """Simulate ``network`` and return what a monitoring system reports of it.

    ``floor(duration / window_s)`` windows of ``window_s`` seconds after ``warmup`` seconds,
    one input-contract record per tier per window, window by window, tiers in order (see the
    module docstring for the fields' meaning). ``end`` is ``start_time`` plus the simulated
    time of the window's end, in epoch seconds or ISO-8601 UTC (``iso_time=True``).
    ``schedule`` makes the population time-varying. An open network's records carry no
    ``users``. Same ``seed`` -> identical records.
    """
    _check_network(network)
    edges = window_edges(duration, window_s, warmup)
    trace = simulate(network, edges, checked_schedule(schedule), seeded_generator(rng, seed))
    records = window_records(trace.cp, system=system, tiers=[t.name for t in network.tiers],
                             classes=list(network.classes), start_time=start_time,
                             iso_time=iso_time, include_users=network.arrivals is None)
    _pool_records(records, trace, network)
    return records


def _pool_records(records: list[dict[str, Any]], trace: _Trace,
                  network: PhysicalNetwork) -> None:
    """Add each pool's measured occupancy over each window to its owning tier's records
    (``pools`` of the input contract: ``size``, time-average ``busy`` tokens and ``waiting``
    requests; a pool without a name is ``pool<k>``)."""
    M = len(network.tiers)
    dt = np.diff(trace.cp.times)
    held = np.diff(trace.pool_held, axis=0) / dt[:, None]
    waiting = np.diff(trace.pool_waiting, axis=0) / dt[:, None]
    for p, pool in enumerate(network.pools):
        name = pool.name or f"pool{p}"
        for k in range(dt.shape[0]):
            rec = records[k * M + pool.first]
            rec.setdefault("pools", {})[name] = {
                "size": int(pool.size),
                "busy": float(min(max(held[k, p], 0.0), pool.size)),   # float rounding
                "waiting": float(max(waiting[k, p], 0.0))}


# ----------------------------------------------------------------------------- steady state
@dataclass(frozen=True, eq=False)
class PhysicalResult:
    """Steady-state estimates of the physical system, each an
    :class:`~solvers.simulation.stats.Estimate` (point estimate over the whole measured period,
    half-width of the ``level`` t-interval over replications or batches; ``mean = 0`` and
    ``half_width = inf`` where nothing was observed).

    Per class (``C``): ``throughput`` ``X_c`` (requests/s leaving the last tier) and
    ``response_time`` ``R_c`` (entering tier 1 to leaving tier ``M``). Overall:
    ``total_throughput`` ``X`` and ``total_response_time`` ``R`` (mean over all requests).
    Per tier (``M``): ``utilization`` (busy fraction per core), ``queue_length`` (mean jobs
    at the tier, queued or in service), ``residence_time`` (mean time per visit, all classes),
    ``residence_time_by_class`` and ``service_time`` (``M x C``: measured mean service time
    per class -- the realised demands ``D_{m,c}``). ``demands`` are the true ``D_{m,c}`` of
    the specification, ``completions`` the requests measured (all runs), ``services`` the
    request-tier services simulated (all runs, warm-up included).
    """

    classes: tuple[str, ...]
    tiers: tuple[str, ...]
    throughput: tuple[Estimate, ...]
    response_time: tuple[Estimate, ...]
    total_throughput: Estimate
    total_response_time: Estimate
    utilization: tuple[Estimate, ...]
    queue_length: tuple[Estimate, ...]
    residence_time: tuple[Estimate, ...]
    residence_time_by_class: tuple[tuple[Estimate, ...], ...]
    service_time: tuple[tuple[Estimate, ...], ...]
    demands: np.ndarray
    completions: np.ndarray
    services: int
    method: str            # "replications" or "batch means"
    replications: int
    batches: int
    warmup: float
    duration: float
    level: float
    #: the quantile levels of :attr:`response_time_quantiles` (empty: not recorded)
    quantile_levels: tuple[float, ...] = ()
    #: per class, per level: the response time's quantile (``C x L`` estimates)
    response_time_quantiles: tuple[tuple[Estimate, ...], ...] = ()
    #: per pool of the network: mean tokens held (time average) and mean requests waiting
    #: for a token
    pool_busy: tuple[Estimate, ...] = ()
    pool_waiting: tuple[Estimate, ...] = ()

    def means(self, name: str) -> np.ndarray:
        """Point estimates of field ``name`` as an array (e.g. ``means("utilization")``)."""
        value = getattr(self, name, None)
        if isinstance(value, Estimate):
            return np.array(value.mean)
        if not isinstance(value, tuple) or not value or isinstance(value[0], str):
            raise ValueError(f"name: not an estimate field, got {name!r}")
        return np.array([[e.mean for e in row] if isinstance(row, tuple) else row.mean
                         for row in value], dtype=float)


def _ratio(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den > 0), den > 0


def _delta(tr: _Trace, i: int, j: int) -> dict[str, np.ndarray]:
    """Increments of the cumulative counters of ``tr`` over ``[times[i], times[j]]``."""
    cp = tr.cp
    return {
        "dt": np.array(cp.times[j] - cp.times[i]),
        "busy": (cp.busy[j] - cp.busy[i]) / cp.servers,          # per core
        "area": (cp.queue_area[j] - cp.queue_area[i]).sum(axis=1),
        "n": (cp.completions[j] - cp.completions[i]).astype(float),
        "rsum": cp.response_sum[j] - cp.response_sum[i],
        "nq": (cp.queue_completions[j] - cp.queue_completions[i]).astype(float),
        "qsum": cp.residence_sum[j] - cp.residence_sum[i],
        "ssum": tr.service_sum[j] - tr.service_sum[i],
        "held": tr.pool_held[j] - tr.pool_held[i],
        "waiting": tr.pool_waiting[j] - tr.pool_waiting[i],
    }


def _metrics(d: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each metric of a period's increments ``d``, with a validity mask (ratio estimates)."""
    dt, n, nq = d["dt"], d["n"], d["nq"]
    ones_c, ones_m = np.ones(n.shape, bool), np.ones(d["area"].shape, bool)
    return {
        "throughput": (n / dt, ones_c),
        "response_time": _ratio(d["rsum"], n),
        "total_throughput": (np.array(n.sum() / dt), np.array(True)),
        "total_response_time": _ratio(np.array(d["rsum"].sum()), np.array(n.sum())),
        "utilization": (d["busy"] / dt, ones_m),
        "queue_length": (d["area"] / dt, ones_m),
        "residence_time": _ratio(d["qsum"].sum(axis=1), nq.sum(axis=1)),
        "residence_time_by_class": _ratio(d["qsum"], nq),
        "service_time": _ratio(d["ssum"], nq),
        "pool_busy": (d["held"] / dt, np.ones(d["held"].shape, bool)),
        "pool_waiting": (d["waiting"] / dt, np.ones(d["waiting"].shape, bool)),
    }


def _estimates(point: tuple[np.ndarray, np.ndarray],
               observations: list[tuple[np.ndarray, np.ndarray]], level: float) -> Any:
    """Estimate(s) shaped like ``point``: pooled mean, t half-width over valid observations."""
    values = np.array([o[0] for o in observations], dtype=float)
    valid = np.array([o[1] for o in observations], dtype=bool)
    shape = point[0].shape
    flat_p, flat_ok = point[0].reshape(-1), point[1].reshape(-1)
    flat_v, flat_valid = values.reshape(len(observations), -1), valid.reshape(len(observations), -1)
    out = []
    for e in range(flat_p.size):
        obs = flat_v[flat_valid[:, e], e]
        if not flat_ok[e] or obs.size == 0:
            out.append(Estimate(0.0, math.inf, level, 0))
            continue
        hw = replication_interval(obs, level).half_width
        out.append(Estimate(float(flat_p[e]), hw, level, int(obs.size)))
    if not shape:
        return out[0]
    if len(shape) == 1:
        return tuple(out)
    cols = shape[1]
    return tuple(tuple(out[r * cols:(r + 1) * cols]) for r in range(shape[0]))


def _plan(duration: float, warmup: float, replications: int, batches: int,
          level: float) -> tuple[float, float, int, int, float]:
    d = _positive(duration, "duration")
    warm = _positive(warmup, "warmup", allow_zero=True)
    reps = _count(replications, "replications", 1)
    nb = _count(batches, "batches", 2)
    lv = float(level) if not isinstance(level, bool) else math.nan
    if not 0.0 < lv < 1.0:
        raise ValueError(f"level: must be in (0, 1), got {level!r}")
    return d, warm, reps, nb, lv


def _quantile_estimates(traces: list[_Trace], last: int, reps: int, nb: int,
                        levels: tuple[float, ...], level: float,
                        C: int) -> tuple[tuple[Estimate, ...], ...]:
    """Per class and level: the empirical quantile of every measured request (all runs
    pooled), with the t-interval over the runs' (replications) or batches' own empirical
    quantiles -- each a consistent estimator of the quantile, nearly independent across
    replications or long batches (Law and Kelton 2000, ch. 9)."""
    out = []
    q = np.array(levels)
    for c in range(C):
        pooled = np.concatenate([tr.responses(0, last, c) for tr in traces])
        if reps > 1:
            parts = [tr.responses(0, last, c) for tr in traces]
        else:
            parts = [traces[0].responses(b, b + 1, c) for b in range(nb)]
        parts = [p for p in parts if p.size]
        if not pooled.size:
            out.append(tuple(Estimate(0.0, math.inf, level, 0) for _ in levels))
            continue
        point = np.quantile(pooled, q)
        per = np.array([np.quantile(p, q) for p in parts]).reshape(len(parts), len(levels))
        out.append(tuple(Estimate(float(point[k]),
                                  replication_interval(per[:, k], level).half_width,
                                  level, len(parts)) for k in range(len(levels))))
    return tuple(out)


def simulate_physical(network: PhysicalNetwork, duration: float, *, warmup: float,
                      replications: int = 3, batches: int = 20, level: float = 0.95,
                      seed: int | None = None,
                      rng: np.random.Generator | None = None,
                      quantiles: Sequence[float] = ()) -> PhysicalResult:
    """Steady-state estimates of ``network`` with ``level`` confidence intervals.

    Each run starts with every user thinking, discards ``warmup`` seconds of simulated time and
    measures the next ``duration`` seconds. With ``replications >= 2`` the runs are independent
    (streams spawned from ``seed``, or from ``rng``) and the interval is over replications;
    with ``replications == 1`` one run (the generator of ``seed``/``rng`` itself, so the same
    trajectory as :func:`monitor_physical` with that seed) is cut into ``batches`` batch means.
    Without ``seed`` and ``rng`` the seed is 0: results are reproducible by default.
    ``quantiles``: levels in (0, 1) of the per-class response-time quantiles to estimate
    (:attr:`PhysicalResult.response_time_quantiles`; every request's response time is kept,
    8 bytes each).
    """
    _check_network(network)
    d, warm, reps, nb, lv = _plan(duration, warmup, replications, batches, level)
    levels = tuple(float(x) for x in quantiles)
    if not all(0.0 < x < 1.0 for x in levels):
        raise ValueError(f"quantiles: levels must lie in (0, 1), got {list(quantiles)}")
    generator = seeded_generator(rng, 0 if seed is None and rng is None else seed)
    if reps > 1:
        times = np.array([warm, warm + d])
        streams = generator.spawn(reps)
    else:
        times = warm + d * np.arange(nb + 1) / nb
        streams = [generator]
    traces = [simulate(network, times, [], g, bool(levels)) for g in streams]
    last = len(times) - 1
    deltas = [_delta(tr, 0, last) for tr in traces]
    point = _metrics({k: sum(dl[k] for dl in deltas) for k in deltas[0]})  # pooled runs
    if reps > 1:
        observations = [_metrics(dl) for dl in deltas]
    else:
        observations = [_metrics(_delta(traces[0], b, b + 1)) for b in range(nb)]
    est = {name: _estimates(point[name], [o[name] for o in observations], lv)
           for name in point}
    completions = sum(tr.cp.completions[last] - tr.cp.completions[0] for tr in traces)
    return PhysicalResult(
        classes=network.classes, tiers=tuple(t.name for t in network.tiers),
        throughput=est["throughput"], response_time=est["response_time"],
        total_throughput=est["total_throughput"],
        total_response_time=est["total_response_time"],
        utilization=est["utilization"], queue_length=est["queue_length"],
        residence_time=est["residence_time"],
        residence_time_by_class=est["residence_time_by_class"],
        service_time=est["service_time"], demands=network.demands,
        completions=np.asarray(completions, dtype=np.int64),
        services=int(sum(int(tr.cp.events[-1]) for tr in traces)),
        method="replications" if reps > 1 else "batch means",
        replications=reps, batches=0 if reps > 1 else nb, warmup=warm, duration=d, level=lv,
        quantile_levels=levels, pool_busy=est["pool_busy"], pool_waiting=est["pool_waiting"],
        response_time_quantiles=_quantile_estimates(traces, last, reps, nb, levels, lv,
                                                    len(network.classes)) if levels else ())
