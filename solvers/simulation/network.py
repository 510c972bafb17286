"""Discrete-event simulation of closed (and, via :mod:`open_queue`, open) networks of queues in series.

The model is Mi et al. (2008), Fig. 9 (§3.4), generalised to ``M`` queues and ``C`` request classes:
users of class ``c`` think at a delay station for an exponential time of mean ``Z_c``, then
their request visits queue ``1, 2, ..., M`` once each (visit ratios 1) and the user returns to
think. The response time of a request is the time from leaving the delay station to leaving
queue ``M`` (think time excluded).

Service at a queue
------------------
Each queue runs one or more *service processes*, each a :class:`~solvers.processes.MAP`
(exponential service of mean ``S`` is the order-1 MAP with rate ``1/S``):

* ``service=MAP`` -- one process shared by all classes: the tier's service process of
  Mi et al. (2008), §4.1 (class-independent, mean = the MAP's mean);
* ``service=S`` (a number) -- exponential with mean ``S`` for every class;
* ``service=[S_1 or MAP_1, ..., S_C or MAP_C]`` -- one process per class (class demands).

A process's phase advances only while it is serving; each ``D1`` event completes a job:

* **FCFS** (one server): the process of the class of the job at the head of the line runs at
  full speed and its ``D1`` event completes that job; the other processes are frozen.
* **PS** (one server): process ``k`` runs at speed ``n_k / n`` (its jobs' share of the
  processor, ``n_k`` jobs of the classes it serves out of ``n`` present) and each ``D1`` event
  completes a job chosen uniformly among its ``n_k`` jobs. With exponential service this is
  exactly processor sharing (each job is served at rate ``mu_c / n``); with a single shared
  MAP the MAP is the server's completion process and the number-in-queue process is the same
  as under FCFS, as in the MAP queueing networks of Mi et al. (2008), §4.
* **FCFS with c > 1 servers** (M/M/c): exponential service only; the first ``min(n, c)``
  jobs in line are in service, each at its class's rate.

Because think times, exponential services and MAP phases are all Markovian, the network is a
continuous-time Markov chain and is simulated exactly as one (competing exponential clocks,
re-drawn after every transition -- valid by memorylessness). The think station is kept as
per-class counts (rate ``thinking_c / Z_c``), so an event costs O(C + M) whatever the
population. Randomness is drawn from the given ``numpy.random.Generator`` in blocks and the
hot loop works on plain Python floats.

Time-varying population
-----------------------
``schedule=[(t, N), ...]`` sets the population at time ``t``. An increase adds users that
start thinking (or, with ``Z = 0``, submit at once). A decrease removes thinking users
immediately; the remainder leave as soon as they complete their current request (a user in
the middle of a request is never dropped). An increase first cancels pending departures.

Statistics
----------
The engine records cumulative counters at requested checkpoint times
(:class:`Checkpoints`); warm-up removal, batch means and monitoring windows are all
differences of checkpoints. Warm-up and durations are in simulated time.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from solvers.processes import MAP
from solvers.simulation.stats import Estimate, replication_interval

__all__ = [
    "Queue",
    "ClosedNetwork",
    "Checkpoints",
    "SimulationResult",
    "closed_checkpoints",
    "simulate_closed",
]

_BLOCK = 1 << 15
_DISCIPLINES = ("PS", "FCFS")


# ----------------------------------------------------------------------------- specification
@dataclass(frozen=True)
class Queue:
    """One queue (tier): its name, service specification, discipline and number of servers.

    ``service`` is a mean service time (exponential, all classes), a :class:`MAP` shared by all
    classes, or a sequence with one mean or MAP per class. ``discipline`` is ``"PS"`` or
    ``"FCFS"``; ``servers > 1`` requires FCFS and exponential service.
    """

    name: str
    service: Any
    discipline: str = "PS"
    servers: int = 1

    def __post_init__(self) -> None:
        disc = str(self.discipline).upper()
        if disc not in _DISCIPLINES:
            raise ValueError(f"discipline: must be 'PS' or 'FCFS', got {self.discipline!r}")
        object.__setattr__(self, "discipline", disc)
        if not isinstance(self.servers, (int, np.integer)) or self.servers < 1:
            raise ValueError(f"servers: must be an integer >= 1, got {self.servers!r}")
        object.__setattr__(self, "servers", int(self.servers))
        if self.servers > 1 and disc != "FCFS":
            raise ValueError(f"servers: {self.servers} servers need discipline 'FCFS'")


def check_queues(queues: Sequence[Queue]) -> tuple[Queue, ...]:
    """A non-empty tuple of :class:`Queue` with unique names (``ValueError`` naming ``queues``)."""
    out = tuple(queues)
    if not out or not all(isinstance(q, Queue) for q in out):
        raise ValueError("queues: must be a non-empty sequence of Queue")
    names = [q.name for q in out]
    if len(set(names)) != len(names):
        raise ValueError(f"queues: names must be unique, got {names}")
    return out


def class_names(classes: Sequence[str] | None, n_classes: int) -> tuple[str, ...]:
    """``classes`` as distinct strings (default ``c0, c1, ...``); ``ValueError`` naming ``classes``."""
    if classes is None:
        return tuple(f"c{i}" for i in range(n_classes))
    out = tuple(str(c) for c in classes)
    if len(out) != n_classes or len(set(out)) != n_classes:
        raise ValueError(f"classes: need {n_classes} distinct names, got {classes!r}")
    return out


@dataclass(frozen=True)
class ClosedNetwork:
    """Delay station (think times) followed by ``queues`` in series (Mi et al. 2008, Fig. 9).

    ``populations`` -- users per class (one int per class); or, with ``mix``, a single int:
    the total number of users, each of whose requests is of class ``c`` with probability
    ``mix[c]`` (one chain of users with class switching at the delay station).
    ``think_times`` -- mean exponential think time ``Z_c`` per class (a scalar applies to all
    classes; 0 means users resubmit immediately).
    ``classes`` -- class names (default ``"c0", "c1", ...``).
    """

    queues: Sequence[Queue]
    populations: int | Sequence[int]
    think_times: float | Sequence[float]
    classes: Sequence[str] | None = None
    mix: Sequence[float] | None = None
    n_classes: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "queues", check_queues(self.queues))
        if self.mix is not None:
            mix = np.asarray(self.mix, dtype=float)
            if mix.ndim != 1 or mix.size == 0 or np.any(mix < 0) or not np.isfinite(mix).all() \
                    or not mix.sum() > 0:
                raise ValueError(f"mix: must be non-negative probabilities, got {self.mix!r}")
            n_cls = int(mix.size)
            object.__setattr__(self, "mix", tuple((mix / mix.sum()).tolist()))
            pops = _population(self.populations, 1, "populations")
        else:
            pops_raw = np.atleast_1d(np.asarray(self.populations))
            n_cls = int(pops_raw.size)
            pops = _population(self.populations, n_cls, "populations")
        object.__setattr__(self, "populations", pops)
        object.__setattr__(self, "n_classes", n_cls)
        object.__setattr__(self, "think_times", per_class(self.think_times, n_cls,
                                                          "think_times", allow_zero=True))
        object.__setattr__(self, "classes", class_names(self.classes, n_cls))
        for q in self.queues:
            compile_queue(q, n_cls)  # validates the service specification early

    @property
    def n_chains(self) -> int:
        """Number of independent user populations: 1 with ``mix``, else one per class."""
        return 1 if self.mix is not None else self.n_classes


def _population(value: Any, n: int, name: str) -> tuple[int, ...]:
    arr = np.atleast_1d(np.asarray(value))
    if arr.ndim != 1 or arr.size != n:
        raise ValueError(f"{name}: need {n} value(s), got {value!r}")
    out = []
    for v in arr.tolist():
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{name}: must be non-negative integers, got {value!r}")
        out.append(v)
    return tuple(out)


def per_class(value: Any, n: int, name: str, allow_zero: bool = False) -> tuple[float, ...]:
    """``value`` (one number, or one per class) as ``n`` floats, each > 0 (``>= 0`` with
    ``allow_zero``); ``ValueError`` naming ``name`` otherwise."""
    arr = np.atleast_1d(np.asarray(value, dtype=float))
    if arr.ndim != 1 or arr.size not in (1, n):
        raise ValueError(f"{name}: need 1 or {n} values, got {value!r}")
    if arr.size == 1:
        arr = np.repeat(arr, n)
    bad = (arr < 0) if allow_zero else (arr <= 0)
    if np.any(bad) or not np.all(np.isfinite(arr)):
        cond = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}: must be finite and {cond}, got {value!r}")
    return tuple(arr.tolist())


# ----------------------------------------------------------------------------- compiled model
@dataclass(frozen=True)
class _Proc:
    """A service process ready for the hot loop: per-phase exit rates and jump tables."""

    order: int
    out: list[float]          # exit rate of each phase, -D0[p, p]
    cum: list[list[float]]    # cumulative jump probabilities to [hidden 0..n-1, completing 0..n-1]
    theta: np.ndarray         # time-stationary phase distribution (initial phase)
    mean: float


@dataclass(frozen=True)
class _CQueue:
    kind: int                 # 0 FCFS single server, 1 PS, 2 FCFS multi-server (exponential)
    servers: int
    procs: tuple[_Proc, ...]
    proc_of_class: list[int]


def _proc(spec: Any, name: str) -> _Proc:
    if isinstance(spec, MAP):
        d0, d1 = spec.D0, spec.D1
        rates = -np.diag(d0)
        jumps = np.hstack([d0 - np.diag(np.diag(d0)), d1]) / rates[:, None]
        cum = np.cumsum(jumps, axis=1)
        cum[:, -1] = 1.0
        return _Proc(spec.order, rates.tolist(), cum.tolist(), spec.theta, spec.mean)
    try:
        mean = float(spec)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a positive mean service time or a MAP, "
                         f"got {spec!r}") from None
    if not (math.isfinite(mean) and mean > 0):
        raise ValueError(f"{name}: mean service time must be finite and > 0, got {spec!r}")
    return _Proc(1, [1.0 / mean], [[0.0, 1.0]], np.ones(1), mean)


def compile_queue(q: Queue, n_classes: int) -> _CQueue:
    """Queue ``q`` as the engine runs it: its service processes and which one each of the
    ``n_classes`` classes uses."""
    spec = q.service
    if isinstance(spec, MAP) or np.ndim(spec) == 0:
        procs = (_proc(spec, f"{q.name}.service"),)
        proc_of_class = [0] * n_classes
    else:
        items = list(spec)
        if len(items) != n_classes:
            raise ValueError(f"{q.name}.service: need one mean or MAP per class "
                             f"({n_classes}), got {len(items)}")
        procs = tuple(_proc(s, f"{q.name}.service[{i}]") for i, s in enumerate(items))
        proc_of_class = list(range(n_classes))
    if q.servers > 1:
        if any(p.order != 1 for p in procs):
            raise ValueError(f"{q.name}.service: {q.servers} servers need exponential service")
        kind = 2
    else:
        kind = 0 if q.discipline == "FCFS" else 1
    return _CQueue(kind, q.servers, procs, proc_of_class)


@dataclass(frozen=True)
class Model:
    """What the engine needs: queues, classes and either closed chains or open arrival rates."""

    queues: tuple[_CQueue, ...]
    n_classes: int
    arrival_rates: tuple[float, ...] | None = None   # open: Poisson rate per class
    think_times: tuple[float, ...] = ()
    chain_classes: tuple[tuple[int, ...], ...] = ()   # closed: classes of each chain
    chain_mix: tuple[tuple[float, ...], ...] = ()     # cumulative class mix per chain
    populations: tuple[int, ...] = ()                 # closed: initial users per chain


def _closed_model(net: ClosedNetwork) -> Model:
    queues = tuple(compile_queue(q, net.n_classes) for q in net.queues)
    if net.mix is not None:
        chains: tuple[tuple[int, ...], ...] = (tuple(range(net.n_classes)),)
        mixes = (tuple(np.cumsum(net.mix).tolist()),)
    else:
        chains = tuple((c,) for c in range(net.n_classes))
        mixes = tuple((1.0,) for _ in range(net.n_classes))
    return Model(queues, net.n_classes, None, tuple(net.think_times), chains,
                 mixes, tuple(net.populations))


def _schedule(schedule: Sequence[tuple[float, Any]] | None, n_chains: int,
              ) -> list[tuple[float, tuple[int, ...]]]:
    if schedule is None:
        return []
    out = []
    last = -math.inf
    for i, entry in enumerate(schedule):
        try:
            t, pop = entry
        except (TypeError, ValueError):
            raise ValueError(f"schedule[{i}]: must be a (time, population) pair, "
                             f"got {entry!r}") from None
        t = float(t)
        if not math.isfinite(t) or t < 0 or t < last:
            raise ValueError(f"schedule[{i}]: times must be finite, >= 0 and sorted, got {t}")
        last = t
        if n_chains > 1 and np.ndim(pop) == 0:
            raise ValueError(f"schedule[{i}]: need {n_chains} per-class populations (or give "
                             f"the network a mix), got {pop!r}")
        out.append((t, _population(pop, n_chains, f"schedule[{i}]")))
    return out


# ----------------------------------------------------------------------------- checkpoints
@dataclass(frozen=True)
class Checkpoints:
    """Cumulative statistics of one run (from time 0) at each checkpoint time.

    ``K`` checkpoints, ``M`` queues, ``C`` classes:

    * ``times`` (K,);
    * ``busy`` (K, M) -- integral of the number of busy servers ``min(n, c)`` of each queue
      (divide by ``servers`` for the busy fraction averaged over servers);
    * ``queue_area`` (K, M, C) -- integral of the number of class-c jobs at each queue;
    * ``completions`` / ``response_sum`` (K, C) -- requests that left the last queue and the
      sum of their response times (from leaving the delay station, or arrival when open);
    * ``queue_completions`` / ``residence_sum`` (K, M, C) -- the same per queue (time spent at
      that queue);
    * ``bottleneck_time`` (K, M + 1) or None -- time during which each queue held strictly
      more jobs than every other queue; the last column is time with a tie for the maximum
      (including the all-empty state);
    * ``users`` (K,) -- users in the system at the checkpoint (closed: thinking or in a
      request, including users about to leave; open: jobs present);
    * ``events`` (K,) -- state transitions simulated so far (including hidden MAP phase
      changes);
    * ``servers`` (M,) -- servers per queue.
    """

    times: np.ndarray
    busy: np.ndarray
    queue_area: np.ndarray
    completions: np.ndarray
    response_sum: np.ndarray
    queue_completions: np.ndarray
    residence_sum: np.ndarray
    bottleneck_time: np.ndarray | None
    users: np.ndarray
    events: np.ndarray
    servers: np.ndarray

    def utilization(self, i: int, j: int) -> np.ndarray:
        """Busy fraction (averaged over servers) of each queue over ``[times[i], times[j]]``."""
        dt = self.times[j] - self.times[i]
        return np.clip((self.busy[j] - self.busy[i]) / (dt * self.servers), 0.0, 1.0)


def simulate(model: Model, times: np.ndarray, schedule: list[tuple[float, tuple[int, ...]]],
             rng: np.random.Generator, track_bottleneck: bool) -> Checkpoints:
    """Run the CTMC from time 0 to ``times[-1]``, recording counters at each of ``times``."""
    C = model.n_classes
    M = len(model.queues)
    S = C  # event sources 0..C-1: per-class arrivals (open) or think completions (closed)
    n_src = S + M
    is_open = model.arrival_rates is not None

    kind = [q.kind for q in model.queues]
    srv = [q.servers for q in model.queues]
    pcls = [list(q.proc_of_class) for q in model.queues]
    nproc = [len(q.procs) for q in model.queues]
    order = [[p.order for p in q.procs] for q in model.queues]
    out = [[p.out for p in q.procs] for q in model.queues]
    cum = [[p.cum for p in q.procs] for q in model.queues]
    ph = [[int(rng.choice(p.order, p=p.theta)) if p.order > 1 else 0 for p in q.procs]
          for q in model.queues]
    mu = [[q.procs[q.proc_of_class[c]].out[0] for c in range(C)] if q.kind == 2 else []
          for q in model.queues]
    single_class = C == 1
    fifo: list[deque] = [deque() for _ in range(M)]
    pool = [[[] for _ in q.procs] for q in model.queues]
    cnt = [[0] * len(q.procs) for q in model.queues]
    srate = [0.0] * M

    n_q = [0] * M
    n_mc = [0] * (M * C)
    last = [0.0] * M
    last_mc = [0.0] * (M * C)
    busy = [0.0] * M
    area = [0.0] * (M * C)
    q_done = [0] * (M * C)
    q_rt = [0.0] * (M * C)
    done = [0] * C
    rt = [0.0] * C
    rates = [0.0] * n_src
    bn_time = [0.0] * (M + 1)
    bn_state = [M, 0.0]  # current holder (M = tie), time of last update

    # closed workload state
    think = list(model.think_times) if not is_open else [0.0] * C
    izt = [1.0 / z if z > 0 else 0.0 for z in think]
    thinking = [0] * C
    chain_of = [0] * C
    for h, members in enumerate(model.chain_classes):
        for c in members:
            chain_of[c] = h
    chain_classes = [list(m) for m in model.chain_classes]
    chain_mix = [list(m) for m in model.chain_mix]
    present = [0] * len(chain_classes)
    deficit = [0] * len(chain_classes)
    in_system = [0]  # open: jobs present

    def flush(t: float) -> None:
        """Bring every time integral up to ``t`` (at checkpoints)."""
        for m in range(M):
            nq = n_q[m]
            busy[m] += (nq if nq < srv[m] else srv[m]) * (t - last[m])
            last[m] = t
        for idx in range(M * C):
            area[idx] += n_mc[idx] * (t - last_mc[idx])
            last_mc[idx] = t

    def qrate(m: int) -> float:
        nq = n_q[m]
        if nq == 0:
            return 0.0
        kd = kind[m]
        if kd == 0:
            k = pcls[m][fifo[m][0][0]]
            return out[m][k][ph[m][k]]
        if kd == 1:
            if nproc[m] == 1:
                return out[m][0][ph[m][0]]
            cn, outs, phs = cnt[m], out[m], ph[m]
            s = 0.0
            for k in range(nproc[m]):
                if cn[k]:
                    s += cn[k] * outs[k][phs[k]]
            return s / nq
        return srate[m]

    def arrive(m: int, job: tuple[int, float, float], t: float) -> None:
        c = job[0]
        nq = n_q[m]
        if nq:
            busy[m] += (nq if nq < srv[m] else srv[m]) * (t - last[m])
        last[m] = t
        idx = m * C + c
        area[idx] += n_mc[idx] * (t - last_mc[idx])
        last_mc[idx] = t
        n_mc[idx] += 1
        n_q[m] = nq + 1
        kd = kind[m]
        if kd == 2:
            fifo[m].append(job)
            if nq < srv[m]:
                srate[m] += mu[m][c]
                rates[S + m] = srate[m]
            return
        if kd == 0:
            fifo[m].append(job)
        else:
            pool[m][pcls[m][c]].append(job)
            cnt[m][pcls[m][c]] += 1
            if nproc[m] > 1:
                rates[S + m] = qrate(m)
                return
        if nq == 0:
            k = pcls[m][c]
            rates[S + m] = out[m][k][ph[m][k]]

    def new_user(h: int, t: float, u: float) -> None:
        """A user of chain ``h`` starts thinking (or submits at once when Z = 0)."""
        members = chain_classes[h]
        c = members[0]
        if len(members) > 1:
            mix = chain_mix[h]
            j = 0
            while j < len(mix) - 1 and mix[j] <= u:
                j += 1
            c = members[j]
        if izt[c] > 0.0:
            thinking[c] += 1
            rates[c] = thinking[c] * izt[c]
        else:
            arrive(0, (c, t, t), t)

    def set_population(h: int, target: int, t: float) -> None:
        current = present[h] - deficit[h]
        if target > current:
            add = target - current
            cancel = min(deficit[h], add)
            deficit[h] -= cancel
            for _ in range(add - cancel):
                present[h] += 1
                new_user(h, t, float(rng.random()))
        elif target < current:
            remove = current - target
            members = chain_classes[h]
            while remove:
                idle = sum(thinking[c] for c in members)
                if idle == 0:
                    break
                pick = int(rng.integers(idle))
                for c in members:
                    if pick < thinking[c]:
                        thinking[c] -= 1
                        rates[c] = thinking[c] * izt[c]
                        break
                    pick -= thinking[c]
                present[h] -= 1
                remove -= 1
            deficit[h] += remove

    def update_bottleneck(t: float) -> None:
        bn_time[bn_state[0]] += t - bn_state[1]
        bn_state[1] = t
        top = max(n_q)
        bn_state[0] = n_q.index(top) if top and n_q.count(top) == 1 else M

    # ------------------------------------------------------------------ initial state
    if is_open:
        for c, lam in enumerate(model.arrival_rates):
            rates[c] = lam
    else:
        for h, pop in enumerate(model.populations):
            set_population(h, pop, 0.0)

    fixed: list[tuple[float, int, Any]] = [(float(t), 0, None) for t in times]
    fixed += [(t, 1, pops) for t, pops in schedule if t <= times[-1]]
    fixed.sort(key=lambda e: (e[0], e[1]))
    snaps: list[tuple] = []
    if track_bottleneck:
        update_bottleneck(0.0)

    E = rng.standard_exponential(_BLOCK).tolist()
    U = rng.random(_BLOCK).tolist()
    ie = 0
    iu = 0
    t = 0.0
    events = 0
    fi = 0
    next_fixed = fixed[0][0]
    last_src = n_src - 1
    while True:
        tot = sum(rates)
        if tot > 0.0:
            if ie == _BLOCK:
                E = rng.standard_exponential(_BLOCK).tolist()
                ie = 0
            tn = t + E[ie] / tot
            ie += 1
        else:
            tn = math.inf
        if tn >= next_fixed:
            # Deterministic event: checkpoint or population change. The pending exponential
            # clock is discarded and re-drawn next iteration (memorylessness).
            t = next_fixed
            _, what, payload = fixed[fi]
            if what == 0:
                flush(t)
                if track_bottleneck:
                    update_bottleneck(t)
                users = in_system[0] if is_open else sum(present)
                snaps.append((t, busy[:], area[:], done[:], rt[:], q_done[:], q_rt[:],
                              bn_time[:], users, events))
            else:
                for h, pop in enumerate(payload):
                    set_population(h, pop, t)
                if track_bottleneck:
                    update_bottleneck(t)
            fi += 1
            if fi == len(fixed):
                break
            next_fixed = fixed[fi][0]
            continue
        t = tn
        events += 1
        if iu > _BLOCK - 8:  # an event uses at most 5 uniforms
            U = rng.random(_BLOCK).tolist()
            iu = 0
        u = U[iu] * tot
        iu += 1
        i = 0
        acc = rates[0]
        while acc <= u:
            if i == last_src:
                break
            i += 1
            acc += rates[i]
        if rates[i] <= 0.0:  # rounding at the very end of the scan
            i = max(j for j in range(n_src) if rates[j] > 0.0)

        if i < S:
            c = i
            if is_open:
                in_system[0] += 1
            else:
                thinking[c] -= 1
                rates[c] = thinking[c] * izt[c]
            arrive(0, (c, t, t), t)
            if track_bottleneck:
                update_bottleneck(t)
            continue

        # ---- an event at queue m: phase jump of one of its service processes
        m = i - S
        kd = kind[m]
        if kd == 2:
            # M/M/c: one of the first min(n, c) jobs completes, chosen by its class rate
            line = fifo[m]
            s = n_q[m] if n_q[m] < srv[m] else srv[m]
            if single_class:
                j = int(U[iu] * s)
            else:
                target = U[iu] * srate[m]
                j = 0
                acc2 = mu[m][line[0][0]]
                while acc2 <= target and j < s - 1:
                    j += 1
                    acc2 += mu[m][line[j][0]]
            iu += 1
            job = line[j]
            del line[j]
            if n_q[m] > srv[m]:
                srate[m] += mu[m][line[srv[m] - 1][0]] - mu[m][job[0]]
            elif n_q[m] == 1:
                srate[m] = 0.0
            else:
                srate[m] -= mu[m][job[0]]
        else:
            if kd == 0:
                k = pcls[m][fifo[m][0][0]]
            elif nproc[m] == 1:
                k = 0
            else:
                cn, outs, phs = cnt[m], out[m], ph[m]
                target = U[iu] * rates[S + m] * n_q[m]
                iu += 1
                k = 0
                acc2 = cn[0] * outs[0][phs[0]]
                while acc2 <= target and k < nproc[m] - 1:
                    k += 1
                    acc2 += cn[k] * outs[k][phs[k]]
                if not cn[k]:  # rounding at the very end of the scan
                    k = max(kk for kk in range(nproc[m]) if cn[kk])
            n_ph = order[m][k]
            if n_ph > 1:
                row = cum[m][k][ph[m][k]]
                v = U[iu]
                iu += 1
                j = 0
                while row[j] <= v:
                    j += 1
                if j < n_ph:  # hidden phase change, no completion
                    ph[m][k] = j
                    rates[S + m] = qrate(m)
                    continue
                ph[m][k] = j - n_ph
            if kd == 0:
                job = fifo[m].popleft()
            else:
                lst = pool[m][k]
                if len(lst) == 1:
                    job = lst.pop()
                else:
                    j = int(U[iu] * len(lst))
                    iu += 1
                    job = lst[j]
                    lst[j] = lst[-1]
                    lst.pop()
                cnt[m][k] -= 1
        # ---- job leaves queue m
        nq = n_q[m]
        busy[m] += (nq if nq < srv[m] else srv[m]) * (t - last[m])
        last[m] = t
        c = job[0]
        idx = m * C + c
        area[idx] += n_mc[idx] * (t - last_mc[idx])
        last_mc[idx] = t
        n_mc[idx] -= 1
        n_q[m] = nq - 1
        q_done[idx] += 1
        q_rt[idx] += t - job[2]
        rates[S + m] = qrate(m)
        if m + 1 < M:
            arrive(m + 1, (c, job[1], t), t)
        else:
            done[c] += 1
            rt[c] += t - job[1]
            if is_open:
                in_system[0] -= 1
            else:
                h = chain_of[c]
                if deficit[h]:
                    deficit[h] -= 1
                    present[h] -= 1
                else:
                    new_user(h, t, U[iu])
                    iu += 1
        if track_bottleneck:
            update_bottleneck(t)

    cols = list(zip(*snaps))
    return Checkpoints(
        times=np.array(cols[0], dtype=float),
        busy=np.array(cols[1], dtype=float).reshape(-1, M),
        queue_area=np.array(cols[2], dtype=float).reshape(-1, M, C),
        completions=np.array(cols[3], dtype=np.int64).reshape(-1, C),
        response_sum=np.array(cols[4], dtype=float).reshape(-1, C),
        queue_completions=np.array(cols[5], dtype=np.int64).reshape(-1, M, C),
        residence_sum=np.array(cols[6], dtype=float).reshape(-1, M, C),
        bottleneck_time=(np.array(cols[7], dtype=float).reshape(-1, M + 1)
                         if track_bottleneck else None),
        users=np.array(cols[8], dtype=np.int64),
        events=np.array(cols[9], dtype=np.int64),
        servers=np.array(srv, dtype=float),
    )


def checkpoint_times(times: Sequence[float] | np.ndarray) -> np.ndarray:
    """``times`` as a non-empty, strictly increasing float array of times >= 0."""
    ts = np.asarray(times, dtype=float)
    if ts.ndim != 1 or ts.size == 0 or not np.all(np.isfinite(ts)) or np.any(ts < 0) \
            or np.any(np.diff(ts) <= 0):
        raise ValueError("times: must be a non-empty, strictly increasing sequence of "
                         "finite times >= 0")
    return ts


def resolve_rng(rng: np.random.Generator | None, seed: int | None) -> np.random.Generator:
    """The generator to draw from: ``rng``, or a new one from ``seed`` (not both)."""
    if rng is not None and seed is not None:
        raise ValueError("rng, seed: give one of them, not both")
    if rng is not None:
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng: must be a numpy.random.Generator, got {type(rng).__name__}")
        return rng
    return np.random.default_rng(seed)


def closed_checkpoints(network: ClosedNetwork, times: Sequence[float] | np.ndarray, *,
                       schedule: Sequence[tuple[float, Any]] | None = None,
                       bottleneck: bool = False, rng: np.random.Generator | None = None,
                       seed: int | None = None) -> Checkpoints:
    """Simulate ``network`` from time 0 (all users thinking) and record cumulative counters
    at each of ``times`` (strictly increasing); the run ends at ``times[-1]``."""
    ts = checkpoint_times(times)
    model = _closed_model(network)
    sched = _schedule(schedule, network.n_chains)
    return simulate(model, ts, sched, resolve_rng(rng, seed), bool(bottleneck))


# ----------------------------------------------------------------------------- results
@dataclass(frozen=True)
class SimulationResult:
    """Steady-state estimates of a simulated network (per class ``C``, per queue ``M``).

    * ``throughput`` (C,) -- requests per second leaving the last queue;
    * ``response_time`` (C,) -- mean time from entering the first queue to leaving the last
      (think time excluded); 0 where a class completed nothing (see ``completions``);
    * ``residence_time`` (M, C) -- mean time per visit at each queue (0 without completions);
    * ``utilization`` (M,) -- busy fraction (averaged over servers);
    * ``queue_length`` (M,) and ``queue_length_by_class`` (M, C) -- time-average jobs present;
    * ``bottleneck`` (M,) -- fraction of time each queue held strictly the most jobs, and
      ``bottleneck_tie`` the fraction of time with a tie for the maximum (all-empty included);
      ``bottleneck.sum() + bottleneck_tie == 1``; None unless requested;
    * ``*_hw`` -- confidence-interval half-widths at ``level`` (None without replications or
      batches; ``inf`` where fewer than two valid observations);
    * ``completions`` (C,) -- requests completed in the measured period (all replications).
    """

    classes: tuple[str, ...]
    queues: tuple[str, ...]
    throughput: np.ndarray
    response_time: np.ndarray
    residence_time: np.ndarray
    utilization: np.ndarray
    queue_length: np.ndarray
    queue_length_by_class: np.ndarray
    completions: np.ndarray
    throughput_hw: np.ndarray | None
    response_time_hw: np.ndarray | None
    utilization_hw: np.ndarray | None
    queue_length_hw: np.ndarray | None
    bottleneck: np.ndarray | None
    bottleneck_tie: float | None
    bottleneck_hw: np.ndarray | None
    level: float
    method: str            # "single run", "replications" or "batch means"
    replications: int
    batches: int
    warmup: float
    duration: float
    events: int

    def estimate(self, metric: str, index: int = 0) -> Estimate:
        """``metric`` in {throughput, response_time, utilization, queue_length, bottleneck}
        as an :class:`Estimate` (half-width ``inf`` when no interval was computed)."""
        if metric not in ("throughput", "response_time", "utilization", "queue_length",
                          "bottleneck"):
            raise ValueError(f"metric: unknown metric {metric!r}")
        values = getattr(self, metric)
        if values is None:
            raise ValueError(f"metric: {metric!r} was not recorded (pass bottleneck=True)")
        hw = getattr(self, f"{metric}_hw")
        n = self.replications if self.method == "replications" else self.batches
        return Estimate(float(values[index]), math.inf if hw is None else float(hw[index]),
                        self.level, n)


_METRICS = ("throughput", "response_time", "residence_time", "utilization", "queue_length",
            "queue_length_by_class", "bottleneck", "bottleneck_tie")


def _interval_metrics(cp: Checkpoints, i: int, j: int) -> dict[str, np.ndarray]:
    """Metrics over ``[times[i], times[j]]`` plus validity masks for ratio estimates."""
    dt = cp.times[j] - cp.times[i]
    n = cp.completions[j] - cp.completions[i]
    nq = cp.queue_completions[j] - cp.queue_completions[i]
    rsum = cp.response_sum[j] - cp.response_sum[i]
    qsum = cp.residence_sum[j] - cp.residence_sum[i]
    qmc = (cp.queue_area[j] - cp.queue_area[i]) / dt
    out = {
        "throughput": n / dt,
        "response_time": np.divide(rsum, n, out=np.zeros_like(rsum), where=n > 0),
        "response_valid": n > 0,
        "residence_time": np.divide(qsum, nq, out=np.zeros_like(qsum), where=nq > 0),
        "residence_valid": nq > 0,
        "utilization": cp.utilization(i, j),
        "queue_length": qmc.sum(axis=1),
        "queue_length_by_class": qmc,
        "completions": n,
    }
    if cp.bottleneck_time is not None:
        frac = (cp.bottleneck_time[j] - cp.bottleneck_time[i]) / dt
        out["bottleneck"] = frac[:-1]
        out["bottleneck_tie"] = np.array(frac[-1])
    return out


def _half_widths(values: np.ndarray, level: float, valid: np.ndarray | None = None,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise t-interval over axis 0 (observations), using only ``valid`` entries."""
    shape = values.shape[1:]
    flat = values.reshape(values.shape[0], -1)
    ok = np.ones_like(flat, dtype=bool) if valid is None else valid.reshape(flat.shape)
    mean = np.zeros(flat.shape[1])
    hw = np.full(flat.shape[1], math.inf)
    for e in range(flat.shape[1]):
        obs = flat[ok[:, e], e]
        if obs.size:
            est = replication_interval(obs, level)
            mean[e], hw[e] = est.mean, est.half_width
    return mean.reshape(shape), hw.reshape(shape)


def _run_plan(duration: float, warmup: float | None, replications: int, batches: int | None,
              ) -> tuple[float, float, int, int]:
    if not (math.isfinite(float(duration)) and float(duration) > 0):
        raise ValueError(f"duration: must be finite and > 0, got {duration!r}")
    duration = float(duration)
    warm = 0.1 * duration if warmup is None else float(warmup)
    if not (math.isfinite(warm) and warm >= 0):
        raise ValueError(f"warmup: must be finite and >= 0, got {warmup!r}")
    if not isinstance(replications, (int, np.integer)) or replications < 1:
        raise ValueError(f"replications: must be an integer >= 1, got {replications!r}")
    nb = 0 if batches is None else batches
    if not isinstance(nb, (int, np.integer)) or nb < 0 or nb == 1:
        raise ValueError(f"batches: must be None, 0 or an integer >= 2, got {batches!r}")
    if replications > 1 and nb:
        raise ValueError("batches: use either replications > 1 or batch means, not both")
    return duration, warm, int(replications), int(nb)


def replicated_estimate(run: Any, names: tuple[tuple[str, ...], tuple[str, ...]], duration: float,
                        warmup: float | None, replications: int, batches: int | None, level: float,
                        bottleneck: bool, rng: np.random.Generator) -> SimulationResult:
    """Shared driver: ``run(times, rng) -> Checkpoints`` for each replication."""
    duration, warm, reps, nb = _run_plan(duration, warmup, replications, batches)
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level: must be in (0, 1), got {level!r}")
    level = float(level)
    if nb:
        times = warm + duration * np.arange(nb + 1) / nb
    else:
        times = np.array([warm, warm + duration])
    streams = rng.spawn(reps) if reps > 1 else [rng]
    runs = [run(times, g) for g in streams]
    per_run = [_interval_metrics(cp, 0, len(times) - 1) for cp in runs]
    events = int(sum(int(cp.events[-1]) for cp in runs))
    completions = np.sum([r["completions"] for r in per_run], axis=0)

    point: dict[str, np.ndarray] = {}
    hws: dict[str, np.ndarray | None] = {}
    if reps > 1:
        method = "replications"
        obs = per_run
    elif nb:
        method = "batch means"
        obs = [_interval_metrics(runs[0], b, b + 1) for b in range(nb)]
    else:
        method = "single run"
        obs = []
    for name in _METRICS:
        if name not in per_run[0]:
            continue
        stacked = np.array([r[name] for r in per_run])
        valid = None
        if name == "response_time":
            valid = np.array([r["response_valid"] for r in per_run])
        elif name == "residence_time":
            valid = np.array([r["residence_valid"] for r in per_run])
        if reps > 1:
            point[name], hw = _half_widths(stacked, level, valid)
        else:
            point[name] = stacked[0]
            hw = None
            if nb:
                bvals = np.array([o[name] for o in obs])
                bvalid = None
                if name in ("response_time", "residence_time"):
                    key = "response_valid" if name == "response_time" else "residence_valid"
                    bvalid = np.array([o[key] for o in obs])
                _, hw = _half_widths(bvals, level, bvalid)
        hws[name] = hw if method != "single run" else None

    return SimulationResult(
        classes=names[0], queues=names[1],
        throughput=point["throughput"], response_time=point["response_time"],
        residence_time=point["residence_time"], utilization=point["utilization"],
        queue_length=point["queue_length"], queue_length_by_class=point["queue_length_by_class"],
        completions=completions,
        throughput_hw=hws["throughput"], response_time_hw=hws["response_time"],
        utilization_hw=hws["utilization"], queue_length_hw=hws["queue_length"],
        bottleneck=point.get("bottleneck") if bottleneck else None,
        bottleneck_tie=float(point["bottleneck_tie"]) if bottleneck else None,
        bottleneck_hw=hws.get("bottleneck") if bottleneck else None,
        level=level, method=method, replications=reps, batches=nb, warmup=warm,
        duration=duration, events=events,
    )


def simulate_closed(network: ClosedNetwork, duration: float, *, warmup: float | None = None,
                    replications: int = 1, batches: int | None = None, level: float = 0.95,
                    bottleneck: bool = False,
                    schedule: Sequence[tuple[float, Any]] | None = None,
                    rng: np.random.Generator | None = None,
                    seed: int | None = None) -> SimulationResult:
    """Simulate the closed network of Mi et al. (2008), Fig. 9 and estimate its steady state.

    Each run discards ``warmup`` seconds of simulated time (default ``0.1 * duration``) and
    measures the next ``duration`` seconds. Confidence intervals at ``level`` come from
    ``replications > 1`` independent runs (streams spawned from ``rng``) or, with one run,
    from ``batches >= 2`` batch means; otherwise half-widths are None. ``bottleneck=True``
    also estimates the bottleneck probabilities. ``schedule`` (see module docstring) makes
    the population time-varying -- the estimates are then time averages, not a steady state.
    """
    model = _closed_model(network)
    sched = _schedule(schedule, network.n_chains)
    generator = resolve_rng(rng, seed)

    def run(times: np.ndarray, g: np.random.Generator) -> Checkpoints:
        return simulate(model, times, sched, g, bool(bottleneck))

    return replicated_estimate(run, (tuple(network.classes),
                                     tuple(q.name for q in network.queues)),
                               duration, warmup, replications, batches, level, bottleneck,
                               generator)
