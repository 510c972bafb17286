"""Accuracy of the multi-core models against the simulated physical system (numbers, no pass/fail).

Run from the repository root::

    python -m bench.accuracy.multicore            # full run (~25 CPU-minutes, 2 processes)
    python -m bench.accuracy.multicore --quick    # short simulations, a smoke test
    python -m bench.accuracy.multicore --systems d --models-only   # the models only, no simulation

Systems (think time ``Z``, then the tiers in order, one FCFS queue per tier; a bursty tier's
service-time sequence is a MAP(2) whose successive intervals are the service times, times the
request's class multiplier at that tier):

* **(a)** Mi et al.'s (2008) two-tier single-core model, ``scenarios()["bottleneck_switch"]`` of
  :mod:`solvers.paper000`: front 1 core exponential 4.5 ms, db 1 core bursty MAP(2) 4.0 ms
  (``I ~ 200``); ``Z = 0.5 s``; one class; no SLA.
* **(b)** web 4 cores exp 8 ms, app 4 cores exp 10 ms, db 8 cores bursty (Mi et al.'s (2008) unit-mean
  MAP(2), ``I ~ 200``, scaled to 16 ms); ``Z = 1 s``; classes ``browse`` (80%, x0.75 at the db)
  and ``buy`` (20%, x2 at the db); SLA 0.1 s (bench/e2e/multicore.py's shop).
* **(c)** web 2 cores exp 4 ms, app 4 cores bursty (:func:`estimators.mapfit.fit_map2` with
  mean 8 ms, ``I = 50``, p95 = 24 ms), db 4 cores bursty (Mi et al.'s (2008) MAP scaled to 8 ms);
  ``Z = 1 s``; one class; SLA 0.1 s.
* **(d)** lb 1 core exp 0.5 ms, web 4 cores exp 6 ms, app 8 cores bursty (Mi et al.'s (2008) MAP
  scaled to 12 ms), cache 2 cores exp 1 ms, db 16 cores exp 20 ms; ``Z = 2 s``; two classes
  (70% / 30%, multipliers 0.8 / 1.467 at app and db); SLA 0.15 s.

**Truth**: :func:`solvers.simulation.physical.simulate_physical` (independent seeded
replications, 95% t-intervals) at 20, 40, 60, 80, 100, 120 and 150% of the knee
``N* = (sum_m D_m + Z) / max_m (D_m / c_m)`` (aggregate demands ``D_m = sum_c p_c D_{m,c}``).

**Models** (all on the aggregate single class, per-class answers read back FCFS-style as
:mod:`streams.predict.model` does: ``R_c = sum_m (D_{m,c} + max(R_m - D_m, 0))``, one visit per tier):

1. ``dec`` -- :func:`solvers.decomposition.solve_decomposed`, each bursty tier's MAP rescaled to
   ``D_m``, the other tiers exponential, with the tiers' cores;
2. ``MVA`` -- exact MVA with exact multi-server stations (:func:`solvers.mva.mva`) on ``D_m``:
   the baseline that ignores burstiness;
3. ``chain`` -- the exact Markov chain :func:`solvers.mapqn.solve_closed` (with ``servers=``
   when it takes it, else single-core systems only) where it has at most
   :data:`CHAIN_STATE_LIMIT` states; ``-`` elsewhere.

Errors are ``(model - simulation) / simulation`` of the simulation's mean, beside the
simulation's 95% half-width (relative). **Capacity at the SLA**: the model's is the largest
``N`` whose worst class's predicted ``R_c`` is within the SLA (bisection over ``N``); the
truth is where the worst class's simulated mean ``R_c`` crosses the SLA, linearly
interpolated on a grid of simulated populations around the models' capacities (0.6-1.4x the
decomposition's, 0.9-1.1x MVA's, then two points either side of the first crossing); its
range is where the ends of the 95% intervals cross.

Solve times are the median of a few solves in this process (one BLAS thread), before any
simulation starts. Simulations run in two worker processes. Acceptance targets (printed beside,
nothing is tuned to meet them): throughput <= 3%, mean response time <= 10%, per-class
response time <= 15%, capacity <= 10%.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import inspect
import math
import multiprocessing
import statistics
import sys
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from bench.tables import Table
from estimators.mapfit import fit_map2
from solvers.decomposition import solve_decomposed
from solvers.mapqn import solve_closed
from solvers.mva import mva
from solvers.paper000 import BURSTY_D0, BURSTY_D1, scenarios
from solvers.processes import MAP
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

#: populations as fractions of the knee N*
KNEE_FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5)
#: the exact chain is solved where it has at most this many states
CHAIN_STATE_LIMIT = 100_000
#: acceptance targets (|relative error|)
TARGETS = {"X": 0.03, "R": 0.10, "Rc": 0.15, "cap": 0.10}
#: truth-capacity grid: multiples of the decomposition's and of MVA's capacity
DEC_GRID = (0.6, 0.733, 0.867, 1.0, 1.133, 1.267, 1.4)
MVA_GRID = (0.9, 1.0, 1.1)
#: refinement points either side of the first interpolated crossing
REFINE = (0.96, 1.04)
WORKERS = 2

CHAIN_HAS_SERVERS = "servers" in inspect.signature(solve_closed).parameters


# ------------------------------------------------------------------------------- systems
@dataclass(frozen=True)
class TierSpec:
    """One tier: ``mean`` of its service-time sequence (before multipliers); ``process`` the
    bursty MAP with that mean (``None``: i.i.d. exponential)."""

    name: str
    cores: int
    mean: float
    process: MAP | None = None
    multipliers: tuple[float, ...] | None = None


@dataclass(frozen=True)
class System:
    key: str
    title: str
    tiers: tuple[TierSpec, ...]
    classes: tuple[str, ...]
    mix: tuple[float, ...]
    think: float
    sla: float | None

    @property
    def D_mc(self) -> np.ndarray:
        """``(M, C)`` true per-class demands (one visit per tier)."""
        C = len(self.classes)
        return np.array([[t.mean * (t.multipliers[c] if t.multipliers else 1.0)
                          for c in range(C)] for t in self.tiers])

    @property
    def D(self) -> np.ndarray:
        """Aggregate demands ``D_m = sum_c p_c D_{m,c}``."""
        return self.D_mc @ np.array(self.mix)

    @property
    def cores(self) -> list[int]:
        return [t.cores for t in self.tiers]

    @property
    def knee(self) -> float:
        return float((self.D.sum() + self.think) / np.max(self.D / np.array(self.cores)))

    @property
    def processes(self) -> list[MAP]:
        """The models' service processes: bursty MAPs rescaled to ``D_m``, else exponential."""
        return [t.process.scaled(float(d)) if t.process is not None
                else MAP.exponential(float(d)) for t, d in zip(self.tiers, self.D)]

    def populations(self) -> list[int]:
        return sorted({max(1, int(round(f * self.knee))) for f in KNEE_FRACTIONS})

    def network(self, n: int) -> PhysicalNetwork:
        tiers = tuple(Tier(t.name, t.cores, t.process if t.process is not None else t.mean,
                           multipliers=t.multipliers) for t in self.tiers)
        return PhysicalNetwork(tiers=tiers, classes=self.classes, mix=self.mix,
                               think_time=self.think, population=n)

    def chain_states(self, n: int) -> int:
        stations = len(self.tiers) + (1 if self.think > 0 else 0)
        return math.comb(n + stations - 1, stations - 1) * math.prod(
            p.order for p in self.processes)

    def chain_applies(self, n: int) -> bool:
        if not CHAIN_HAS_SERVERS and any(c > 1 for c in self.cores):
            return False
        return self.chain_states(n) <= CHAIN_STATE_LIMIT

    def describe(self) -> str:
        parts = []
        for t in self.tiers:
            kind = "exp" if t.process is None else f"bursty I={t.process.idc:.0f}"
            mult = (" x" + "/".join(f"{m:g}" for m in t.multipliers)) if t.multipliers else ""
            parts.append(f"{t.name} {t.cores}c {kind} {1000 * t.mean:g} ms{mult}")
        cls = ", ".join(f"{c} {p:g}" for c, p in zip(self.classes, self.mix))
        sla = f"SLA {self.sla:g} s" if self.sla is not None else "no SLA"
        return f"{'; '.join(parts)}; Z = {self.think:g} s; classes: {cls}; {sla}"


@lru_cache(maxsize=None)
def systems() -> dict[str, System]:
    bursty = MAP(BURSTY_D0, BURSTY_D1)                   # unit mean, I ~ 200
    sc = scenarios()["bottleneck_switch"]
    fitted = fit_map2(mean=0.008, idc=50, p95=0.024).process
    return {
        "a": System("a", "(a) Mi et al. (2008) bottleneck_switch, two tiers, single core",
                    (TierSpec("front", 1, sc.front.mean),
                     TierSpec("db", 1, sc.database.mean, sc.database)),
                    ("all",), (1.0,), 0.5, None),
        "b": System("b", "(b) three tiers, bursty 8-core db, two classes",
                    (TierSpec("web", 4, 0.008), TierSpec("app", 4, 0.010),
                     TierSpec("db", 8, 0.016, bursty.scaled(0.016), (0.75, 2.0))),
                    ("browse", "buy"), (0.8, 0.2), 1.0, 0.1),
        "c": System("c", "(c) three tiers, two bursty tiers",
                    (TierSpec("web", 2, 0.004), TierSpec("app", 4, 0.008, fitted),
                     TierSpec("db", 4, 0.008, bursty.scaled(0.008))),
                    ("all",), (1.0,), 1.0, 0.1),
        "d": System("d", "(d) five tiers, mixed cores, two classes",
                    (TierSpec("lb", 1, 0.0005), TierSpec("web", 4, 0.006),
                     TierSpec("app", 8, 0.012, bursty.scaled(0.012), (0.8, 1.467)),
                     TierSpec("cache", 2, 0.001),
                     TierSpec("db", 16, 0.020, None, (0.8, 1.467))),
                    ("c1", "c2"), (0.7, 0.3), 2.0, 0.15),
    }


# ------------------------------------------------------------------------------- plans
@dataclass(frozen=True)
class Plan:
    """Simulation sizes per system: seconds measured per replication and warm-up."""

    replications: int
    duration: dict[str, float]
    warmup: dict[str, float]
    timing_repeats: int


# Sized from single runs on this machine (about 0.8 M services per CPU-second; a replication
# of 200 s gave throughput half-widths of 2-5% with 4 replications): the full plan estimates
# about 1,100 CPU-seconds of simulation for the ~60 populations, the --quick plan ~30.
FULL = Plan(replications=6,
            duration={"a": 6000.0, "b": 3000.0, "c": 3000.0, "d": 1500.0},
            warmup={"a": 100.0, "b": 100.0, "c": 100.0, "d": 100.0},
            timing_repeats=3)
QUICK = Plan(replications=3,
             duration={"a": 300.0, "b": 150.0, "c": 150.0, "d": 80.0},
             warmup={"a": 20.0, "b": 20.0, "c": 20.0, "d": 20.0},
             timing_repeats=1)


# ------------------------------------------------------------------------------- models
@dataclass(frozen=True)
class Prediction:
    X: float
    R: float                 # sum_m R_m
    Rc: np.ndarray           # (C,) read back per class
    seconds: float           # median solve time


def read_back(system: System, X: float, Rm: np.ndarray) -> tuple[float, float, np.ndarray]:
    """``R = sum_m R_m``; ``R_c = sum_m D_{m,c} + sum_m max(R_m - D_m, 0)``."""
    Rm = np.asarray(Rm, dtype=float)
    wait = np.maximum(Rm - system.D, 0.0)
    return float(X), float(Rm.sum()), system.D_mc.sum(axis=0) + wait.sum()


def _dec(system: System, n: int) -> tuple[float, np.ndarray]:
    r = solve_decomposed(system.processes, n, system.think, servers=system.cores)
    return r.throughput, r.residence_time


def _mva(system: System, n: int) -> tuple[float, np.ndarray]:
    r = mva(system.D[:, None], [n], [system.think], system.cores)
    return float(r.throughput[0]), r.residence_time[:, 0]


def _chain(system: System, n: int) -> tuple[float, np.ndarray]:
    kw = {"servers": system.cores} if CHAIN_HAS_SERVERS else {}
    r = solve_closed(system.processes, n, system.think, **kw)
    return r.throughput, r.residence_time


SOLVERS: dict[str, Callable[[System, int], tuple[float, np.ndarray]]] = {
    "dec": _dec, "MVA": _mva, "chain": _chain}
MODELS = tuple(SOLVERS)


def predict(system: System, model: str, n: int, repeats: int) -> Prediction | None:
    if model == "chain" and not system.chain_applies(n):
        return None
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        X, Rm = SOLVERS[model](system, n)
        times.append(time.perf_counter() - t0)
    return Prediction(*read_back(system, X, Rm), statistics.median(times))


def worst_class_r(system: System, model: str, n: int) -> float:
    X, Rm = SOLVERS[model](system, n)
    return float(read_back(system, X, Rm)[2].max())


def model_capacity(system: System, model: str) -> tuple[int, int]:
    """Largest ``n`` whose worst class's predicted ``R_c`` is within the SLA: doubling from
    the knee, then bisection. Returns ``(capacity, solves)``."""
    assert system.sla is not None
    seen: dict[int, bool] = {}

    def ok(n: int) -> bool:
        if n not in seen:
            seen[n] = worst_class_r(system, model, n) <= system.sla
        return seen[n]

    if not ok(1):
        return 0, len(seen)
    lo, hi = 1, max(2, int(system.knee))
    while ok(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo, len(seen)


# ------------------------------------------------------------------------------- truth
@dataclass(frozen=True)
class Truth:
    n: int
    X: float
    X_hw: float
    R: float
    R_hw: float
    Rc: tuple[float, ...]
    Rc_hw: tuple[float, ...]
    services: int
    cpu_s: float


def simulate(task: tuple[str, int, int, Plan]) -> tuple[str, Truth]:
    key, n, seed, plan = task
    system = systems()[key]
    t0 = time.process_time()
    res = simulate_physical(system.network(n), plan.duration[key], warmup=plan.warmup[key],
                            replications=plan.replications, seed=seed)
    x, r = res.total_throughput, res.total_response_time
    return key, Truth(n, x.mean, x.half_width, r.mean, r.half_width,
                      tuple(e.mean for e in res.response_time),
                      tuple(e.half_width for e in res.response_time),
                      res.services, time.process_time() - t0)


def seed_of(key: str, n: int) -> int:
    return 100_000 * (ord(key) - ord("a") + 1) + n


def run_simulations(tasks: list[tuple[str, int, int, Plan]], pool, started: float,
                    ) -> dict[tuple[str, int], Truth]:
    out: dict[tuple[str, int], Truth] = {}
    # most expensive first (throughput x tiers x duration is roughly the cost)
    for key, truth in pool.imap_unordered(simulate, tasks):
        out[(key, truth.n)] = truth
        log(f"[{time.perf_counter() - started:6.0f} s] simulated ({key}) N = {truth.n}: "
            f"X = {truth.X:.1f} ± {truth.X_hw:.1f}, R = {1000 * truth.R:.1f} ± "
            f"{1000 * truth.R_hw:.1f} ms ({truth.cpu_s:.0f} CPU s)")
    return out


def crossing(points: list[tuple[int, float]], level: float) -> float:
    """First ``n`` where the piecewise-linear ``points`` (sorted by ``n``) rise above
    ``level``; ``-inf`` if already above at the first point, ``inf`` if never."""
    if points[0][1] > level:
        return -math.inf
    for (n0, r0), (n1, r1) in zip(points, points[1:]):
        if r0 <= level < r1:
            return n0 + (level - r0) * (n1 - n0) / (r1 - r0)
    return math.inf


@dataclass(frozen=True)
class TruthCapacity:
    value: float
    low: float             # where the upper end of the 95% interval crosses
    high: float            # where the lower end crosses


def truth_capacity(system: System, truths: dict[int, Truth]) -> TruthCapacity:
    pts = [truths[n] for n in sorted(truths)]
    worst = [max(range(len(system.classes)), key=lambda c: t.Rc[c]) for t in pts]
    mean = [(t.n, t.Rc[w]) for t, w in zip(pts, worst)]
    upper = [(t.n, t.Rc[w] + t.Rc_hw[w]) for t, w in zip(pts, worst)]
    lower = [(t.n, t.Rc[w] - t.Rc_hw[w]) for t, w in zip(pts, worst)]
    return TruthCapacity(crossing(mean, system.sla), crossing(upper, system.sla),
                         crossing(lower, system.sla))


# ------------------------------------------------------------------------------- output
def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rel(pred: float, truth: float) -> float:
    return (pred - truth) / truth


def pct(x: float | None, sign: bool = True) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{100 * x:+.1f}%" if sign else f"{100 * x:.1f}%"


def mark(x: float | None, target: float) -> str:
    """``|x|`` with a cross when above the target."""
    if x is None or not math.isfinite(x):
        return "-"
    return f"{100 * abs(x):.1f}%" + ("" if abs(x) <= target else " ✗")


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{1000 * s:.2f}" if s < 1 else f"{1000 * s:.0f}"


def fmt_n(x: float) -> str:
    if math.isinf(x):
        return "< grid" if x < 0 else "> grid"
    return f"{x:.1f}"


@dataclass
class SystemResult:
    system: System
    populations: list[int]
    predictions: dict[tuple[str, int], Prediction | None]
    truths: dict[int, Truth]                   # every simulated population
    capacity: dict[str, int]                   # model capacities
    capacity_solves: dict[str, int]
    grid: list[int]                            # populations simulated for the capacity
    truth_cap: TruthCapacity | None

    def errors(self, model: str, n: int) -> tuple[float, float, float, str] | None:
        p, t = self.predictions[(model, n)], self.truths[n]
        if p is None:
            return None
        ec = [rel(p.Rc[c], t.Rc[c]) for c in range(len(t.Rc))]
        w = int(np.argmax(np.abs(ec)))
        return rel(p.X, t.X), rel(p.R, t.R), ec[w], self.system.classes[w]

    def max_errors(self, model: str) -> tuple[float, float, float] | None:
        errs = [self.errors(model, n) for n in self.populations]
        errs = [e for e in errs if e is not None]
        if not errs:
            return None
        return tuple(max(abs(e[i]) for e in errs) for i in range(3))  # type: ignore[return-value]

    def capacity_error(self, model: str) -> float | None:
        if self.truth_cap is None or model not in self.capacity \
                or not math.isfinite(self.truth_cap.value):
            return None
        return rel(self.capacity[model], self.truth_cap.value)


def accuracy_table(r: SystemResult) -> Table:
    s = r.system
    multi = len(s.classes) > 1
    t = Table(f"{s.title}: errors vs the simulated physical system (knee N* = {s.knee:.1f}; "
              f"{s.describe()}). Errors (model - sim)/sim; ± = the simulation's 95% "
              f"half-width. Targets: X <= 3%, R <= 10%, R_c <= 15%",
              ["N", "N/N*", "X sim (req/s)", "± %", "X dec", "X MVA", "X chain",
               "R sim (ms)", "± %", "R dec", "R MVA", "R chain"]
              + (["R_c sim (ms) " + " / ".join(s.classes), "± %", "R_c worst dec",
                  "R_c worst MVA", "R_c worst chain"] if multi else []))
    for n in r.populations:
        tr = r.truths[n]
        e = {m: r.errors(m, n) for m in MODELS}
        row = [n, f"{n / s.knee:.2f}", f"{tr.X:.1f}", f"{100 * tr.X_hw / tr.X:.1f}",
               *(pct(e[m][0]) if e[m] else "-" for m in MODELS),
               f"{1000 * tr.R:.1f}", f"{100 * tr.R_hw / tr.R:.1f}",
               *(pct(e[m][1]) if e[m] else "-" for m in MODELS)]
        if multi:
            row += [" / ".join(f"{1000 * v:.1f}" for v in tr.Rc),
                    " / ".join(f"{100 * h / v:.1f}" for v, h in zip(tr.Rc, tr.Rc_hw)),
                    *(f"{pct(e[m][2])} ({e[m][3]})" if e[m] else "-" for m in MODELS)]
        t.add(*row)
    return t


def capacity_table(r: SystemResult) -> Table:
    s = r.system
    t = Table(f"{s.title}: capacity at the SLA ({s.sla:g} s, worst class) -- simulated grid "
              f"(worst class's R_c, 95% CI) and the models' predictions",
              ["N", "source", "worst class", "R_c sim (ms)", "± (ms)",
               "R_c worst dec (ms)", "R_c worst MVA (ms)"])
    for n in sorted(r.truths):
        tr = r.truths[n]
        w = int(np.argmax(tr.Rc))
        src = "table" if n in r.populations else "grid"
        if n in r.populations and n in r.grid:
            src = "table+grid"
        preds = [r.predictions.get((m, n)) for m in ("dec", "MVA")]
        t.add(n, src, s.classes[w], f"{1000 * tr.Rc[w]:.1f}", f"{1000 * tr.Rc_hw[w]:.1f}",
              *(f"{1000 * p.Rc.max():.1f}" if p is not None else "-" for p in preds))
    return t


def capacity_summary(results: list[SystemResult]) -> Table:
    t = Table("Capacity at the SLA: largest N whose worst class meets the SLA (truth: "
              "interpolated crossing of the simulated mean; range: crossings of the 95% CI "
              "ends). Target: |error| <= 10%",
              ["system", "SLA (s)", "truth N", "truth range", "dec N", "dec err", "MVA N",
               "MVA err", "solves dec / MVA"])
    for r in results:
        if r.truth_cap is None:
            t.add(r.system.key, "no SLA", "-", "-", "-", "-", "-", "-", "-")
            continue
        tc = r.truth_cap
        t.add(r.system.key, f"{r.system.sla:g}", fmt_n(tc.value),
              f"{fmt_n(tc.low)} – {fmt_n(tc.high)}", r.capacity["dec"],
              pct(r.capacity_error("dec")), r.capacity["MVA"], pct(r.capacity_error("MVA")),
              f"{r.capacity_solves['dec']} / {r.capacity_solves['MVA']}")
    return t


def timing_table(results: list[SystemResult], repeats: int) -> Table:
    t = Table(f"Solve time per population (ms, median of {repeats} solves, one process, "
              f"one BLAS thread; chain states in brackets)",
              ["system", "N", "dec", "MVA (exact multi-server)", "chain"])
    for r in results:
        for n in r.populations:
            p = {m: r.predictions[(m, n)] for m in MODELS}
            chain = (f"{fmt_time(p['chain'].seconds)} [{r.system.chain_states(n)}]"
                     if p["chain"] else f"- [{r.system.chain_states(n)}]")
            t.add(r.system.key, n, fmt_time(p["dec"].seconds), fmt_time(p["MVA"].seconds),
                  chain)
    return t


def summary_table(results: list[SystemResult]) -> Table:
    t = Table("Summary: max |relative error| over the populations 0.2-1.5 N* (✗: above the "
              "target); max simulation half-width beside",
              ["system", "model", "X (<= 3%)", "R (<= 10%)", "R_c worst (<= 15%)",
               "capacity (<= 10%)", "sim ± X / R / R_c max"])
    for r in results:
        hw_x = max(t_.X_hw / t_.X for n, t_ in r.truths.items() if n in r.populations)
        hw_r = max(t_.R_hw / t_.R for n, t_ in r.truths.items() if n in r.populations)
        hw_c = max(h / v for n, t_ in r.truths.items() if n in r.populations
                   for v, h in zip(t_.Rc, t_.Rc_hw))
        hw = f"{100 * hw_x:.1f}% / {100 * hw_r:.1f}% / {100 * hw_c:.1f}%"
        for m in MODELS:
            e = r.max_errors(m)
            if e is None:
                continue
            cap = r.capacity_error(m) if m != "chain" else None
            t.add(r.system.key, m, mark(e[0], TARGETS["X"]), mark(e[1], TARGETS["R"]),
                  mark(e[2], TARGETS["Rc"]), mark(cap, TARGETS["cap"]), hw)
    return t


# ------------------------------------------------------------------------------- main
def models_table(results: list[SystemResult]) -> Table:
    """``--models-only``: the models' answers (ms), no simulation."""
    t = Table("Models only (no simulation): throughput, response time, per-class response "
              "time, capacity at the SLA",
              ["system", "N", "model", "X (req/s)", "R (ms)", "R_c (ms)", "capacity", "solve s"])
    for r in results:
        for n in r.populations:
            for m in ("dec", "MVA"):
                p = r.predictions[(m, n)]
                t.add(r.system.key, n, m, f"{p.X:.2f}", f"{1e3 * p.R:.1f}",
                      " / ".join(f"{1e3 * v:.1f}" for v in p.Rc),
                      r.capacity.get(m, "-"), f"{p.seconds:.2f}")
    return t


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="short simulations (a couple of minutes), a smoke test")
    parser.add_argument("--systems", default="abcd",
                        help="which systems to run, e.g. 'c' or 'cd' (default abcd); each "
                             "point's simulation seed depends only on its system and "
                             "population, so a subset reproduces the full run's rows")
    parser.add_argument("--models-only", action="store_true",
                        help="solve the models only (no simulation): per population X, R and "
                             "R_c of dec and MVA, and their capacities; the truth columns of "
                             "a full run stay valid (same seeds)")
    parser.add_argument("--replications", type=int, default=None,
                        help="replications per simulated population (default: the plan's, 6; "
                             "3 with --quick); more of them narrow the truth's interval, where "
                             "it is as wide as a target's margin")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.replications is not None:
        if args.replications < 2:
            parser.error(f"--replications: at least 2 (for an interval), got {args.replications}")
        plan = replace(plan, replications=args.replications)
    started = time.perf_counter()
    syss = [s for k, s in systems().items() if k in args.systems]
    if not syss:
        parser.error(f"--systems: none of a, b, c, d in {args.systems!r}")

    # 1. models: every population, solve times, capacities (before any simulation runs)
    results: list[SystemResult] = []
    for s in syss:
        pops = s.populations()
        preds = {(m, n): predict(s, m, n, plan.timing_repeats) for m in MODELS for n in pops}
        caps, solves = {}, {}
        if s.sla is not None:
            for m in ("dec", "MVA"):
                caps[m], solves[m] = model_capacity(s, m)
        results.append(SystemResult(s, pops, preds, {}, caps, solves, [], None))
        log(f"[{time.perf_counter() - started:6.0f} s] ({s.key}) solved; N* = {s.knee:.1f}, "
            f"populations {pops}, capacities {caps}")

    if args.models_only:
        print(models_table(results).render(True))
        return

    # 2. grids around the capacities, and the predictions there
    for r in results:
        s = r.system
        if s.sla is None:
            continue
        grid = {max(1, int(round(f * r.capacity["dec"]))) for f in DEC_GRID}
        grid |= {max(1, int(round(f * r.capacity["MVA"]))) for f in MVA_GRID}
        r.grid = sorted(grid)
        for n in r.grid:
            for m in ("dec", "MVA"):
                if (m, n) not in r.predictions:
                    r.predictions[(m, n)] = predict(s, m, n, 1)

    # 3. simulations, two processes
    def tasks_for(pairs: list[tuple[System, int]]) -> list[tuple[str, int, int, Plan]]:
        """Most expensive first: cost ~ throughput x (tiers + 1) x simulated seconds."""
        def cost(p: tuple[System, int]) -> float:
            s, n = p
            x = min(n / (s.think + s.D.sum()), float(np.min(np.array(s.cores) / s.D)))
            return x * (len(s.tiers) + 1) * (plan.duration[s.key] + plan.warmup[s.key])
        return [(s.key, n, seed_of(s.key, n), plan) for s, n in sorted(pairs, key=cost,
                                                                       reverse=True)]

    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(WORKERS) as pool:
        first = [(r.system, n) for r in results for n in sorted(set(r.populations) | set(r.grid))]
        sims = run_simulations(tasks_for(first), pool, started)
        for r in results:
            r.truths = {n: t for (k, n), t in sims.items() if k == r.system.key}
        # refinement: two points either side of the first crossing
        extra = []
        for r in results:
            if r.system.sla is None:
                continue
            cap = truth_capacity(r.system, r.truths).value
            if math.isfinite(cap):
                for f in REFINE:
                    n = max(1, int(round(f * cap)))
                    if all(abs(n - m) > 0.015 * n for m in r.truths):   # not next to a point
                        extra.append((r.system, n))
                        r.grid.append(n)
        more = run_simulations(tasks_for(sorted(set(extra), key=lambda p: (p[0].key, p[1]))),
                               pool, started) if extra else {}
    for r in results:
        r.truths.update({n: t for (k, n), t in more.items() if k == r.system.key})
        r.grid = sorted(set(r.grid))
        if r.system.sla is not None:
            for n in r.grid:
                for m in ("dec", "MVA"):
                    if (m, n) not in r.predictions:
                        r.predictions[(m, n)] = predict(r.system, m, n, 1)
            r.truth_cap = truth_capacity(r.system, r.truths)

    # 4. tables
    cpu = sum(t.cpu_s for r in results for t in r.truths.values())
    services = sum(t.services for r in results for t in r.truths.values())
    print(f"# Multi-core accuracy: decomposition, exact MVA and the exact chain against the "
          f"simulated physical system{' (--quick)' if args.quick else ''}\n")
    print(f"Simulation: {plan.replications} replications per population; measured seconds per "
          f"replication (warm-up): " + ", ".join(
              f"({k}) {plan.duration[k]:g} s ({plan.warmup[k]:g} s)" for k in plan.duration)
          + f". {len(sims) + len(more)} populations simulated, {services / 1e6:.0f} M "
          f"services, {cpu:.0f} CPU s. Chain: solve_closed "
          f"{'with' if CHAIN_HAS_SERVERS else 'without'} servers=, up to "
          f"{CHAIN_STATE_LIMIT:,} states.\n")
    for r in results:
        print(accuracy_table(r).render(True))
        if r.system.sla is not None:
            print(capacity_table(r).render(True))
    print(capacity_summary(results).render(True))
    print(timing_table(results, plan.timing_repeats).render(True))
    print(summary_table(results).render(True))
    print(f"({'--quick, ' if args.quick else ''}{time.perf_counter() - started:.0f} s wall)")


if __name__ == "__main__":
    main()
