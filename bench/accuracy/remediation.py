"""Remediation validated by simulation: the capacity the model predicts after an action
against the capacity of the simulated physical system with that action applied.

Run from the repository root::

    python -m bench.accuracy.remediation            # full run (2 processes)
    python -m bench.accuracy.remediation --quick    # short simulations, a smoke test

Systems (think time ``Z``, tiers in order, one FCFS queue per tier; classes' service times are
the tier's sequence times the class multiplier; :mod:`solvers.simulation.physical`):

* **bursty** -- the multi-core shop (``bench/accuracy/multicore.py`` system (b)): web 4 cores exp
  8 ms, app 4 cores exp 10 ms, db 8 cores bursty (Mi et al.'s (2008) MAP(2), ``I ~ 200``, 16 ms;
  browse x0.75, buy x2); ``Z = 1 s``; browse 80%, buy 20%; SLA 0.1 s.
* **plain** -- web 2 cores exp 5 ms, app 4 cores exp 24 ms, db 2 cores exp 9 ms (app and db:
  c1 x0.8, c2 x1.467); ``Z = 1 s``; c1 70%, c2 30%; SLA 0.15 s.

Actions (on the bottleneck tier; ``streams.predict.whatif``): none (the baseline), ``replicate`` 2
(the tier's cores x 2, one queue: a least-loaded balancer, module docstring of
``streams.predict.whatif``), ``cores`` + 50%, ``cpu_speed`` 1.5 (every service time / 1.5: the MAP
time-scaled, Zong (2011)).

**Predicted**: :func:`streams.predict.model.model_capacity` of the model the pipeline would solve
with the true parameters (per-class demands, cores, the bursty tier's MAP(2); the
decomposition for the multi-core bursty tier, MVA for the plain system) after
:func:`streams.predict.whatif.apply` -- the what-if transformation alone, without estimation error
(the pipeline's estimates against the truth: docs/accuracy.md section 12).

**Simulated**: :func:`solvers.simulation.capacity.simulated_capacity` -- the largest ``N`` whose
every class's simulated mean response time meets the SLA, bisection to 1% from the predicted
capacity, each probe ``replications`` seeded independent replications; the range is where
the 95% interval's ends cross the SLA. Target: ``|predicted - simulated| / simulated <= 10%``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import multiprocessing
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from bench.tables import Table
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from solvers.simulation.capacity import simulated_capacity
from solvers.simulation.physical import PhysicalNetwork, Tier
from streams.predict.model import SystemModel, model_capacity
from streams.predict.whatif import Action, apply, describe

TARGET = 0.10


@dataclass(frozen=True)
class TierSpec:
    name: str
    cores: int
    mean: float
    bursty: bool = False
    multipliers: tuple[float, ...] | None = None


@dataclass(frozen=True)
class System:
    key: str
    tiers: tuple[TierSpec, ...]
    classes: tuple[str, ...]
    mix: tuple[float, ...]
    think: float
    sla: float
    actions: tuple[Action, ...]

    def D_mc(self) -> np.ndarray:
        C = len(self.classes)
        return np.array([[t.mean * (t.multipliers[c] if t.multipliers else 1.0)
                          for c in range(C)] for t in self.tiers])

    def model(self) -> SystemModel:
        """What the pipeline solves with the true parameters (streams.predict.model)."""
        bursty = any(t.bursty for t in self.tiers)
        procs = [MAP(BURSTY_D0, BURSTY_D1) if t.bursty else MAP.exponential(1.0)
                 for t in self.tiers] if bursty else None
        return SystemModel(tiers=[t.name for t in self.tiers], classes=list(self.classes),
                           D_mc=self.D_mc(), mix=np.array(self.mix),
                           servers=np.array([float(t.cores) for t in self.tiers]),
                           think_time=self.think, sla=np.full(len(self.classes), self.sla),
                           processes=procs, map_limit=10_000)

    def network(self, action: Action | None, n: int) -> PhysicalNetwork:
        """The physical system with ``action`` applied physically."""
        tiers = []
        for t in self.tiers:
            cores, mean = t.cores, t.mean
            if action is not None and action.tier == t.name:
                if action.kind == "replicate":
                    cores = t.cores * int(action.value)
                elif action.kind == "cores":
                    cores = int(action.value)
                elif action.kind == "cpu_speed":
                    mean = t.mean / float(action.value)
            service = MAP(BURSTY_D0, BURSTY_D1).scaled(mean) if t.bursty else mean
            tiers.append(Tier(t.name, cores, service, multipliers=t.multipliers))
        return PhysicalNetwork(tiers=tuple(tiers), classes=self.classes, mix=self.mix,
                               think_time=self.think, population=n)


def systems() -> dict[str, System]:
    return {
        "bursty": System("bursty", (TierSpec("web", 4, 0.008), TierSpec("app", 4, 0.010),
                                    TierSpec("db", 8, 0.016, True, (0.75, 2.0))),
                         ("browse", "buy"), (0.8, 0.2), 1.0, 0.1,
                         (Action("replicate", "db", 2), Action("cores", "db", 12),
                          Action("cpu_speed", "db", 1.5))),
        "plain": System("plain", (TierSpec("web", 2, 0.005),
                                  TierSpec("app", 4, 0.024, False, (0.8, 1.467)),
                                  TierSpec("db", 2, 0.009, False, (0.8, 1.467))),
                        ("c1", "c2"), (0.7, 0.3), 1.0, 0.15,
                        (Action("replicate", "app", 2), Action("cores", "app", 6),
                         Action("cpu_speed", "app", 1.5))),
    }


@dataclass(frozen=True)
class Plan:
    replications: int
    duration: dict[str, float]
    warmup: dict[str, float]


FULL = Plan(4, {"bursty": 2000.0, "plain": 400.0}, {"bursty": 100.0, "plain": 50.0})
QUICK = Plan(3, {"bursty": 200.0, "plain": 60.0}, {"bursty": 20.0, "plain": 10.0})


@dataclass(frozen=True)
class Case:
    system: str
    action: Action | None
    predicted: int
    solve_s: float


@dataclass(frozen=True)
class Outcome:
    case: Case
    simulated: int
    low: float
    high: float
    probes: int
    services: int
    cpu_s: float
    probe_min: int
    probe_max: int


def _bound(x: float, probe: int) -> str:
    """A crossing, or where it lies beyond the probes."""
    if x <= 0:
        return f"< {probe}"
    if x == float("inf"):
        return f"> {probe}"
    return f"{x:.0f}"


def predict(system: System, action: Action | None) -> Case:
    model = system.model()
    t0 = time.perf_counter()
    after = model if action is None else apply(model, action)
    cap, limited = model_capacity(after)
    assert cap is not None and not limited
    return Case(system.key, action, int(cap), time.perf_counter() - t0)


def simulate(task: tuple[Case, Plan, int]) -> Outcome:
    case, plan, seed = task
    system = systems()[case.system]
    t0 = time.process_time()
    sim = simulated_capacity(lambda n: system.network(case.action, n),
                             [system.sla] * len(system.classes), start=case.predicted,
                             duration=plan.duration[case.system],
                             warmup=plan.warmup[case.system],
                             replications=plan.replications, seed=seed)
    return Outcome(case, sim.value, sim.low, sim.high, len(sim.points), sim.services,
                   time.process_time() - t0, sim.points[0].n, sim.points[-1].n)


def label(action: Action | None, model: SystemModel) -> str:
    return "none (baseline)" if action is None else f"{action.kind} {describe(action, model)}"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short simulations (smoke test)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    plan = QUICK if args.quick else FULL
    print(f"command: python -m {__spec__.name} {shlex.join(sys.argv[1:])}")
    print(f"plan: {plan.replications} replications x "
          + ", ".join(f"{k} {plan.duration[k]:g} s (warm-up {plan.warmup[k]:g} s)"
                      for k in plan.duration) + f"; seed {args.seed}")
    cases = [predict(s, a) for s in systems().values() for a in (None, *s.actions)]
    tasks = [(c, plan, 1000 * args.seed + 100 * i) for i, c in enumerate(cases)]
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        outcomes = []
        for out in pool.imap_unordered(simulate, tasks):
            outcomes.append(out)
            print(f"[{time.perf_counter() - started:5.0f} s] {out.case.system} "
                  f"{out.case.action}: predicted {out.case.predicted}, simulated "
                  f"{out.simulated} ({out.cpu_s:.0f} CPU s)", file=sys.stderr, flush=True)
    outcomes.sort(key=lambda o: ([c.system for c in cases].index(o.case.system),
                                 -1 if o.case.action is None else
                                 systems()[o.case.system].actions.index(o.case.action)))
    table = Table("Capacity after the action: predicted (model) vs simulated (physical "
                  "system), worst class at the SLA",
                  ["system", "action", "model", "predicted", "simulated", "95% range",
                   "error", f"<= {100 * TARGET:.0f}%", "probes", "solve ms"])
    misses = 0
    for o in outcomes:
        s = systems()[o.case.system]
        err = (o.case.predicted - o.simulated) / o.simulated
        ok = abs(err) <= TARGET
        misses += not ok
        table.add(o.case.system, label(o.case.action, s.model()),
                  "MAP (decomposition)" if s.model().processes else "MVA",
                  o.case.predicted, o.simulated, f"{_bound(o.low, o.probe_min)} – {_bound(o.high, o.probe_max)}",
                  f"{100 * err:+.1f}%", "yes" if ok else "NO", o.probes,
                  f"{1000 * o.case.solve_s:.0f}")
    print(table.render(markdown=True))
    print(f"\n{len(outcomes) - misses} of {len(outcomes)} within {100 * TARGET:.0f}%; "
          f"simulated {sum(o.services for o in outcomes) / 1e6:.0f} M services in "
          f"{sum(o.cpu_s for o in outcomes):.0f} CPU s")


if __name__ == "__main__":
    main()
