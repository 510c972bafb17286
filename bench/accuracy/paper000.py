"""Mi et al.'s (2008) experiment end to end: windows of one run in, predictions for 25..150 users out.

Run from the repository root::

    python -m bench.accuracy.paper000 [--quick] [--markdown] [--plot docs/img/accuracy_paper000.png]

What it does (Mi et al. (2008) sections 3.4, 4.2, 4.3; Figs. 10-12, Table 4):

1. **Estimation run.** For each mix -- ``browsing``, ``shopping``, ``ordering``: the scenarios
   ``bottleneck_switch``, ``bursty_no_switch`` and ``not_bursty`` of :mod:`solvers.paper000`
   (Fig. 9's model: exponential think time ``Z = 0.5 s``, a front server and a database in
   series, FCFS, the database a MAP(2)) -- one seeded simulation at 50 users, after a 5-minute
   warm-up, monitored in 5 s windows (:func:`solvers.simulation.monitoring.window_records`: the
   input contract's records, utilization and completions per tier and window).
2. **Through the pipeline.** The records go through :class:`streams.engine.pipeline.Pipeline` (the core
   ``run_embedded`` drives), twice: with the default configuration and with
   ``bursty_demand = "estimator"``. The last prediction record holds, per tier, what the
   pipeline's model uses: the demand ``demand_s`` (under the default ``demand_policy =
   "selected"`` the Kalman filter's or the sliding regression's, whichever predicted the tier's
   recent utilization better; both are reported; under the default ``bursty_demand =
   "history"`` a bursty tier's demand in the MAP network is instead its busy time per completion
   over the history, :mod:`streams.predict.model`; the second pass gives the estimator's demand), the
   index of dispersion ``idc`` (Fig. 2), and for
   a bursty tier (``I > idc_threshold = 10``) the fitted MAP(2) (section 4.1: mean, ``I``,
   service-time p95 of :mod:`estimators.tail`); its estimate records hold ``mean_service_s`` (``sum B_k / sum n_k``) and
   ``p95_s``. The solve interval is raised from 60 to 600 s and SLAs are left out: the estimates
   do not depend on them, and the SLA capacity search on the MAP network costs minutes per run.
3. **Predictions** at ``N = 25 .. 150`` with ``Z = 0.5 s``, as :class:`streams.predict.model.SystemModel`
   makes them: (a) ``MVA`` -- :func:`solvers.mva.mva` on the estimators' demands (what the
   pipeline solves when no tier is bursty); (b) ``MAP`` -- the MAP queueing network
   (:func:`solvers.mapqn.solve_closed`) with each bursty tier's fitted MAP(2) rescaled to the
   demand the pipeline's model uses by default (``demand_s``) and the other tiers exponential;
   ``MAP, estimator demand`` -- the same with the estimator's demand (``bursty_demand =
   "estimator"``, the behaviour before). (At ``N = 50`` the script checks that ``MAP``
   reproduces the pipeline's own prediction.)
4. **Truth**: :func:`solvers.simulation.simulate_closed` of the true model at each ``N``
   (independent seeded replications, 95% confidence intervals).

Side studies on the browsing mix (Mi et al. (2008) section 4.2): the **window length** (the same run
cut into 1, 5, 30 and 60 s windows) and the **estimation run's think time** ``Z_estim``
(Table 4: the model is always solved with ``Z_qn = 0.5 s``; the MAP(2)s and demands come from a
run at 50 users with think time ``Z_estim``). A further row per study uses the paper's
procedure in full: a MAP(2) fitted on *every* tier (not only the bursty ones) from the same
estimates, with :func:`estimators.mapfit.fit_map2` -- the function the pipeline calls.

``--quick`` shortens every simulation (about 1.5 minutes instead of about 10 on two busy
cores); ``--markdown`` prints markdown tables (default: plain text); ``--plot PATH`` saves
throughput and response time versus ``N`` for truth, MVA and MAP per mix.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from bench.tables import Table
from estimators.mapfit import fit_map2
from solvers.mapqn import solve_closed
from solvers.mva import mva
from solvers.paper000 import THINK_TIME, Scenario, scenarios
from solvers.processes import MAP
from solvers.simulation import (
    Checkpoints,
    ClosedNetwork,
    Queue,
    closed_checkpoints,
    simulate_closed,
    window_records,
)
from streams.core.config import Config, SystemConfig
from streams.engine.pipeline import Pipeline

#: mix name -> scenario of solvers.paper000
MIXES = {"browsing": "bottleneck_switch", "shopping": "bursty_no_switch",
         "ordering": "not_bursty"}
POPULATIONS = (25, 50, 75, 100, 125, 150)
ESTIMATION_USERS = 50
WINDOW_S = 5.0
TIERS = ("front", "db")
#: solve interval of the estimation runs (see the module docstring, step 2)
SOLVE_INTERVAL_S = 600.0


@dataclass(frozen=True)
class Plan:
    """Sizes of the simulations (simulated seconds)."""

    estimation_s: float          # measured part of each estimation run
    warmup_s: float              # discarded start of each estimation run (paper: 5 minutes)
    truth_replications: int
    truth_s: float               # per replication
    truth_warmup_s: float
    windows: tuple[float, ...]   # window lengths of the window study
    think_times: tuple[float, ...]   # Z_estim of the think-time study
    long_s: float | None         # a longer estimation run for the flagged cases, or None


FULL = Plan(estimation_s=3 * 3600.0, warmup_s=300.0, truth_replications=6, truth_s=600.0,
            truth_warmup_s=60.0, windows=(1.0, 5.0, 30.0, 60.0), think_times=(0.5, 2.0, 7.0),
            long_s=12 * 3600.0)
QUICK = Plan(estimation_s=3600.0, warmup_s=300.0, truth_replications=3, truth_s=200.0,
             truth_warmup_s=50.0, windows=(1.0, 5.0, 60.0), think_times=(0.5, 7.0),
             long_s=None)


# ------------------------------------------------------------------------------- simulation
def network(scenario: Scenario, users: int, think_time: float) -> ClosedNetwork:
    """Fig. 9: think time, front server, database; FCFS (the MAP network's semantics)."""
    return ClosedNetwork([Queue(TIERS[0], scenario.front, "FCFS"),
                          Queue(TIERS[1], scenario.database, "FCFS")], [users], [think_time])


def estimation_run(scenario: Scenario, think_time: float, duration: float, warmup: float,
                   resolution: float, seed: int) -> Checkpoints:
    """One run at :data:`ESTIMATION_USERS` users, checkpoints every ``resolution`` seconds
    after ``warmup`` (coarser windows are unions of these: :func:`coarsen`)."""
    edges = warmup + resolution * np.arange(int(round(duration / resolution)) + 1)
    return closed_checkpoints(network(scenario, ESTIMATION_USERS, think_time), edges,
                              seed=seed)


def coarsen(cp: Checkpoints, factor: int) -> Checkpoints:
    """The same run seen through windows ``factor`` times longer (every ``factor``-th
    checkpoint of the cumulative counters)."""
    if factor < 1:
        raise ValueError(f"factor: must be >= 1, got {factor}")
    pick = slice(None, None, factor)
    return dataclasses.replace(
        cp, **{f.name: getattr(cp, f.name)[pick] for f in dataclasses.fields(cp)
               if f.name != "servers" and getattr(cp, f.name) is not None})


@dataclass(frozen=True)
class Truth:
    """Simulated steady state at one population: mean and 95% half-width."""

    throughput: float
    throughput_hw: float
    response: float
    response_hw: float


def simulate_truth(scenario: Scenario, users: int, plan: Plan, seed: int) -> Truth:
    sim = simulate_closed(network(scenario, users, THINK_TIME), plan.truth_s,
                          warmup=plan.truth_warmup_s, replications=plan.truth_replications,
                          seed=seed)
    x, r = sim.estimate("throughput"), sim.estimate("response_time")
    return Truth(x.mean, x.half_width, r.mean, r.half_width)


# ------------------------------------------------------------------------------- the pipeline
@dataclass(frozen=True)
class TierEstimate:
    """What the pipeline reports about one tier at the end of the estimation run."""

    demand: float                 # the demand the pipeline's model uses, demand_s (s)
    estimator: str                # which estimator demand_s is: kalman, regression or other
    kalman: float | None          # the Kalman filter's demand at the end of the run (s)
    regression: float | None      # the sliding regression's demand (s)
    mean_service: float | None    # sum B_k / sum n_k over the history (s)
    idc: float | None
    idc_flag: str | None
    p95: float | None             # service-time p95 estimate (s), estimators.tail
    bursty: bool
    process: MAP | None           # fitted MAP(2), bursty tiers only
    fit: dict[str, Any] | None    # achieved I, p95, SCV of the fit
    kalman_spread: tuple[float, float, float]   # 5%, 50%, 95% of the Kalman demand over the run
    #: demand_s under bursty_demand = "estimator" (the second pass; = demand when not rescaled)
    estimator_demand: float | None = None


@dataclass(frozen=True)
class Estimated:
    """The pipeline's view of one estimation run."""

    tiers: dict[str, TierEstimate]
    windows: int
    pipeline_x50: float           # the pipeline's own throughput prediction at the run's users
    pipeline_model: str
    pipeline_users: int
    #: the tiers as the ``bursty_demand = "estimator"`` pass reports them
    estimator_tiers: dict[str, TierEstimate] | None = None


def pipeline_config(system: str, think_time: float,
                    bursty_demand: str | None = None) -> Config:
    """The estimation runs' configuration; ``bursty_demand`` ``None``: the pipeline's default."""
    extra = {} if bursty_demand is None else {"bursty_demand": bursty_demand}
    return Config(systems={system: SystemConfig(
        tiers=TIERS, think_time_s=think_time, sla_s={}, solve_interval_s=SOLVE_INTERVAL_S,
        **extra)})


def through_pipeline(records: list[dict[str, Any]], system: str, think_time: float,
                     window_s: float) -> Estimated:
    """Push ``records`` through the pipeline core with its default configuration, and again
    with ``bursty_demand = "estimator"`` for the estimator's demands (the tiers' estimates do
    not depend on the model, so both passes estimate the same); collect the estimates."""
    est = _one_pass(records, system, think_time, None)
    old = _one_pass(records, system, think_time, "estimator")
    tiers = {}
    for name, e in est.tiers.items():
        o = old.tiers[name]
        tiers[name] = dataclasses.replace(
            e, estimator_demand=o.demand,
            estimator="history" if e.demand != o.demand else o.estimator)
    return dataclasses.replace(est, tiers=tiers, estimator_tiers=old.tiers)


def _one_pass(records: list[dict[str, Any]], system: str, think_time: float,
              bursty_demand: str | None) -> Estimated:
    pipeline = Pipeline(pipeline_config(system, think_time, bursty_demand))
    out = pipeline.process_many(records)
    out.extend(pipeline.finish())
    if out.deadletter:
        raise RuntimeError(f"pipeline rejected {len(out.deadletter)} windows: "
                           f"{out.deadletter[0]['reason']}")
    final = out.predictions[-1]
    last_estimate = {e["tier"]: e for e in out.estimates}
    tiers = {}
    for name in TIERS:
        info, est = final["tiers"][name], last_estimate[name]
        trail = np.array([e["demands"]["c0"] for e in out.estimates if e["tier"] == name])
        fit = info.get("map2")
        used, c0 = float(info["demand_s"]), info["demands"]["c0"]
        tiers[name] = TierEstimate(
            demand=used, estimator=_which(used, c0.get("kalman"), c0.get("regression")),
            kalman=c0.get("kalman"), regression=c0.get("regression"),
            mean_service=est.get("mean_service_s"), idc=info.get("idc"),
            idc_flag=info.get("idc_flag"), p95=est.get("p95_s"), bursty=bool(info["bursty"]),
            process=MAP.from_dict(fit["process"]) if fit else None, fit=fit,
            kalman_spread=tuple(float(q) for q in np.quantile(trail, [0.05, 0.5, 0.95])))
    return Estimated(tiers, len(records) // len(TIERS), float(final["throughput"]),
                     str(final["model"]), int(final["users"]))


def _which(used: float, kalman: float | None, regression: float | None) -> str:
    """Name the estimator whose demand the model used (``demand_policy = "selected"``)."""
    for name, value in (("kalman", kalman), ("regression", regression)):
        if value is not None and abs(used - value) <= 1e-12 * max(abs(value), 1e-12):
            return name
    return "other"


# ------------------------------------------------------------------------------- predictions
@dataclass(frozen=True)
class Prediction:
    throughput: float
    response: float


Predictor = Callable[[int], Prediction]


def mva_predictor(demands: Sequence[float], think_time: float = THINK_TIME) -> Predictor:
    """(a) MVA on the demands (what the pipeline solves when no tier is bursty)."""
    D = np.asarray(demands, dtype=float).reshape(-1, 1)

    def at(n: int) -> Prediction:
        res = mva(D, [n], [think_time])
        return Prediction(float(res.throughput[0]), float(res.response_time[0]))
    return at


def map_predictor(demands: Sequence[float], processes: Sequence[MAP | None],
                  think_time: float = THINK_TIME) -> Predictor:
    """(b) The MAP network as :meth:`streams.predict.model.SystemModel.at` builds it: each tier's
    process (exponential where ``None``) rescaled to its demand; MVA if no tier has a MAP."""
    if all(p is None for p in processes):
        return mva_predictor(demands, think_time)
    procs = [(p if p is not None else MAP.exponential(1.0)).scaled(float(d))
             for p, d in zip(processes, demands)]

    def at(n: int) -> Prediction:
        res = solve_closed(procs, n, think_time)
        return Prediction(float(res.throughput), float(res.response_time))
    return at


def model_demands(est: Estimated) -> list[float]:
    """The demands the pipeline's model uses at the end of the run (``demand_s``; for a
    bursty tier under the MAP network by default its busy time per completion)."""
    return [est.tiers[t].demand for t in TIERS]


def estimator_demands(est: Estimated) -> list[float]:
    """The estimators' demands (``demand_s`` under ``bursty_demand = "estimator"``)."""
    return [est.tiers[t].estimator_demand or est.tiers[t].demand for t in TIERS]


def law_demands(est: Estimated) -> list[float]:
    """The utilization law over the tier's history, ``sum B_k / sum n_k`` (the pipeline's
    ``mean_service_s``); the model's demand where it is missing."""
    return [est.tiers[t].mean_service or est.tiers[t].demand for t in TIERS]


def pipeline_processes(est: Estimated) -> list[MAP | None]:
    return [est.tiers[t].process for t in TIERS]


def every_tier_processes(est: Estimated) -> list[MAP | None]:
    """Mi et al.'s (2008) model in full: a MAP(2) on every tier, fitted by ``fit_map2`` (the function
    the pipeline calls for bursty tiers) from the tier's mean, ``I`` and p95 as the pipeline
    estimated them (flagged estimates used as they are)."""
    procs: list[MAP | None] = []
    for t in TIERS:
        e = est.tiers[t]
        if e.process is not None:
            procs.append(e.process)
        elif e.mean_service and e.idc and e.p95:
            procs.append(fit_map2(e.mean_service, e.idc, e.p95).process)
        else:
            procs.append(None)
    return procs


#: the models compared, by label: what each is built from
MODELS: dict[str, Callable[[Estimated], Predictor]] = {
    "MVA": lambda e: mva_predictor(estimator_demands(e)),
    "MAP": lambda e: map_predictor(model_demands(e), pipeline_processes(e)),
    "MAP, estimator demand": lambda e: map_predictor(estimator_demands(e),
                                                     pipeline_processes(e)),
    "MVA, D = sum B / sum n": lambda e: mva_predictor(law_demands(e)),
    "MAP, D = sum B / sum n": lambda e: map_predictor(law_demands(e), pipeline_processes(e)),
    "MAP(2) on every tier": lambda e: map_predictor(model_demands(e),
                                                    every_tier_processes(e)),
}


def reference_models(sc: Scenario) -> dict[str, Predictor]:
    """No estimation at all: MVA on the true mean demands, the MAP network of the true
    processes (exact: what the simulation estimates)."""
    return {"MVA, true demands": mva_predictor([p.mean for p in sc.processes]),
            "MAP, true processes": map_predictor([p.mean for p in sc.processes],
                                                 list(sc.processes))}


def rel(pred: float, truth: float) -> float:
    return (pred - truth) / truth


@dataclass(frozen=True)
class Row:
    """Truth and every model's prediction at one population."""

    n: int
    truth: Truth
    predictions: dict[str, Prediction]


def compare(truths: dict[int, Truth], models: dict[str, Predictor]) -> list[Row]:
    return [Row(n, truths[n], {label: at(n) for label, at in models.items()})
            for n in sorted(truths)]


def errors(rows: list[Row], model: str) -> dict[str, float]:
    """Max and mean |relative error| of X and R over the populations."""
    ex = [abs(rel(r.predictions[model].throughput, r.truth.throughput)) for r in rows]
    er = [abs(rel(r.predictions[model].response, r.truth.response)) for r in rows]
    return {"x_max": max(ex), "x_mean": float(np.mean(ex)), "r_max": max(er),
            "r_mean": float(np.mean(er))}


# ------------------------------------------------------------------------------- output
def pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def ms(x: float | None) -> str:
    return "-" if x is None else f"{1000 * x:.2f}"


def num(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------- the study
@dataclass
class MixResult:
    mix: str
    scenario: Scenario
    est: Estimated
    rows: list[Row]
    own_x50: float               # this script's prediction at the pipeline's own population


def _resolution(cp: Checkpoints) -> float:
    return float(cp.times[1] - cp.times[0])


def records_of(cp: Checkpoints, window_s: float, system: str) -> list[dict[str, Any]]:
    """Input-contract records of the run ``cp`` in windows of ``window_s``."""
    return window_records(coarsen(cp, int(round(window_s / _resolution(cp)))), system=system,
                          tiers=TIERS, classes=["c0"])


def run_mix(mix: str, cp: Checkpoints, truths: dict[int, Truth]) -> MixResult:
    sc = scenarios()[MIXES[mix]]
    est = through_pipeline(records_of(cp, WINDOW_S, mix), mix, THINK_TIME, WINDOW_S)
    models = {label: build(est) for label, build in MODELS.items()}
    own = models["MAP" if est.pipeline_model == "map" else "MVA"](est.pipeline_users)
    rows = compare(truths, {**models, **reference_models(sc)})
    return MixResult(mix, sc, est, rows, own.throughput)


LAW_MAP = "MAP, D = sum B / sum n"
ESTIMATOR_MAP = "MAP, estimator demand"
#: the models the side studies report
STUDY_MODELS = ("MVA", "MAP", ESTIMATOR_MAP, LAW_MAP)


@dataclass
class Variant:
    """One estimation setting of a side study (browsing) and its prediction errors."""

    label: str
    est: Estimated
    errors: dict[str, dict[str, float]]


def variant(label: str, records: list[dict[str, Any]], think_time: float, window_s: float,
            truths: dict[int, Truth]) -> Variant:
    est = through_pipeline(records, "browsing", think_time, window_s)
    rows = compare(truths, {m: MODELS[m](est) for m in STUDY_MODELS})
    return Variant(label, est, {m: errors(rows, m) for m in STUDY_MODELS})


def window_study(cp: Checkpoints, plan: Plan, truths: dict[int, Truth],
                 started: float) -> list[Variant]:
    """The browsing estimation run cut into windows of each length of ``plan.windows``; and a
    longer run in the longest windows."""
    out = []
    for w in plan.windows:
        out.append(variant(f"{w:g} s", records_of(cp, w, "browsing"), THINK_TIME, w, truths))
        log(f"[{time.perf_counter() - started:6.0f} s] window {w:g} s")
    if plan.long_s is not None:
        sc = scenarios()[MIXES["browsing"]]
        longest = max(plan.windows)
        cp_long = estimation_run(sc, THINK_TIME, plan.long_s, plan.warmup_s, longest, seed=21)
        out.append(variant(f"{longest:g} s, {plan.long_s / 3600:g} h run",
                           records_of(cp_long, longest, "browsing"), THINK_TIME, longest,
                           truths))
        log(f"[{time.perf_counter() - started:6.0f} s] window {longest:g} s, long run")
    return out


def think_study(plan: Plan, truths: dict[int, Truth], base: Checkpoints,
                started: float) -> list[Variant]:
    """Estimation runs at 50 users with think time ``Z_estim`` (Mi et al. 2008, Table 4); the model
    is solved at ``Z_qn = 0.5 s``. ``Z_estim = 0.5 s`` is the main run ``base``; a longer
    run is added at the largest ``Z_estim``."""
    sc = scenarios()[MIXES["browsing"]]
    settings = [(z, plan.estimation_s) for z in plan.think_times]
    if plan.long_s is not None:
        settings.append((max(plan.think_times), plan.long_s))
    out = []
    for i, (z, duration) in enumerate(settings):
        if z == THINK_TIME and duration == plan.estimation_s:
            cp = base
        else:
            cp = estimation_run(sc, z, duration, plan.warmup_s, WINDOW_S, seed=31 + i)
        label = f"{z:g} s" + ("" if duration == plan.estimation_s
                              else f", {duration / 3600:g} h run")
        out.append(variant(label, records_of(cp, WINDOW_S, "browsing"), z, WINDOW_S, truths))
        log(f"[{time.perf_counter() - started:6.0f} s] Z_estim {label}")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short simulations (~1.5 min)")
    parser.add_argument("--markdown", action="store_true", help="markdown tables")
    parser.add_argument("--plot", type=Path, default=None, help="save the plot (PNG) here")
    parser.add_argument("--truth-replications", type=int, default=None,
                        help="replications of the simulated truth per population (default: "
                             "the plan's, 6; 3 with --quick); more of them narrow its interval, "
                             "where it is as wide as a target's margin")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.truth_replications is not None:
        if args.truth_replications < 2:
            parser.error(f"--truth-replications: at least 2 (for an interval), got "
                         f"{args.truth_replications}")
        plan = dataclasses.replace(plan, truth_replications=args.truth_replications)
    started = time.perf_counter()
    all_sc = scenarios()

    truths: dict[str, dict[int, Truth]] = {}
    for i, (mix, name) in enumerate(MIXES.items()):
        truths[mix] = {n: simulate_truth(all_sc[name], n, plan, seed=1000 * (i + 1) + n)
                       for n in POPULATIONS}
        log(f"[{time.perf_counter() - started:6.0f} s] truth {mix} simulated")

    runs: dict[str, Checkpoints] = {}
    results: dict[str, MixResult] = {}
    for i, (mix, name) in enumerate(MIXES.items()):
        # browsing at the finest window of the window study: that study cuts the same run
        resolution = min(plan.windows) if mix == "browsing" else WINDOW_S
        runs[mix] = estimation_run(all_sc[name], THINK_TIME, plan.estimation_s, plan.warmup_s,
                                   resolution, seed=11 + i)
        results[mix] = run_mix(mix, runs[mix], truths[mix])
        log(f"[{time.perf_counter() - started:6.0f} s] {mix}: estimated and predicted")

    windows = window_study(runs["browsing"], plan, truths["browsing"], started)
    thinks = think_study(plan, truths["browsing"], runs["browsing"], started)

    md = args.markdown
    hours = plan.estimation_s / 3600.0
    print(estimates_table(results, hours).render(md))
    for mix in MIXES:
        print(prediction_table(results[mix]).render(md))
    print(summary_table(results).render(md))
    print(study_table(f"Window length (browsing: the same {hours:g} h run at 50 users, "
                      f"Z_estim = 0.5 s, cut into windows of each length)", "window",
                      windows).render(md))
    print(study_table(f"Think time Z_estim of the estimation run (browsing, 50 users, "
                      f"{hours:g} h, 5 s windows; model solved at Z_qn = 0.5 s; Mi et al. (2008) "
                      f"Table 4)", "Z_estim", thinks).render(md))
    consistency = max(abs(rel(r.own_x50, r.est.pipeline_x50)) for r in results.values())
    print(f"Check: at the run's own population this script's prediction equals the "
          f"pipeline's to {consistency:.1e} (relative).\n")
    if args.plot is not None:
        plot(results, args.plot)
        print(f"Plot: {args.plot}\n")
    print(f"({'--quick, ' if args.quick else ''}{time.perf_counter() - started:.0f} s)")


# ------------------------------------------------------------------------------- tables
def estimates_table(results: dict[str, MixResult], hours: float) -> Table:
    t = Table(f"What the pipeline estimated from one {hours:g} h run at 50 users in 5 s windows "
              f"[true value]",
              ["mix", "tier", "D model (ms)", "source", "D estimator (ms)", "D Kalman (ms)",
               "Kalman over the run: median (5–95%) (ms)", "D regression (ms)",
               "sum B / sum n (ms)", "I", "p95 (ms)", "MAP(2) fit: I / SCV / p95 (ms)"])
    for r in results.values():
        for name, proc in zip(TIERS, r.scenario.processes):
            e = r.est.tiers[name]
            lo, med, hi = e.kalman_spread
            fit = (f"{e.fit['idc']:.0f} / {e.fit['scv']:.1f} [{proc.scv:.1f}] / "
                   f"{ms(e.fit['p95_s'])}" if e.fit else "- (exponential)")
            flag = f" ({e.idc_flag})" if e.idc_flag else ""
            picked = r.est.estimator_tiers[name].estimator if r.est.estimator_tiers \
                else e.estimator
            t.add(r.mix, name, f"{ms(e.demand)} [{ms(proc.mean)}]", e.estimator,
                  f"{ms(e.estimator_demand)} ({picked})", ms(e.kalman),
                  f"{ms(med)} ({ms(lo)}–{ms(hi)})",
                  ms(e.regression), ms(e.mean_service),
                  f"{num(e.idc)}{flag} [{proc.idc:.1f}]",
                  f"{ms(e.p95)} [{ms(proc.quantile(0.95))}]", fit)
    return t


def prediction_table(r: MixResult) -> Table:
    t = Table(f"{r.mix} ({MIXES[r.mix]}): throughput X (req/s) and mean response time R (ms) "
              f"by users N, the pipeline's MVA and MAP models against the simulated truth "
              f"(95% CI)",
              ["N", "X truth", "X MVA", "err", "X MAP", "err", "R truth", "R MVA", "err",
               "R MAP", "err"])
    for row in r.rows:
        tr, a, b = row.truth, row.predictions["MVA"], row.predictions["MAP"]
        t.add(row.n, f"{tr.throughput:.1f} ± {tr.throughput_hw:.1f}",
              f"{a.throughput:.1f}", pct(rel(a.throughput, tr.throughput)),
              f"{b.throughput:.1f}", pct(rel(b.throughput, tr.throughput)),
              f"{1000 * tr.response:.1f} ± {1000 * tr.response_hw:.1f}",
              f"{1000 * a.response:.1f}", pct(rel(a.response, tr.response)),
              f"{1000 * b.response:.1f}", pct(rel(b.response, tr.response)))
    return t


def summary_table(results: dict[str, MixResult]) -> Table:
    t = Table("Summary: max / mean |relative error| over N = 25..150 (first three rows per "
              "mix: the pipeline's models -- MAP with its default bursty_demand = history, and "
              "with the estimator's demand; last two: no estimation at all)",
              ["mix", "model", "X max", "X mean", "R max", "R mean"])
    for r in results.values():
        for label in r.rows[0].predictions:
            e = errors(r.rows, label)
            t.add(r.mix, label, f"{100 * e['x_max']:.1f}%", f"{100 * e['x_mean']:.1f}%",
                  f"{100 * e['r_max']:.1f}%", f"{100 * e['r_mean']:.1f}%")
    return t


def study_table(title: str, key: str, variants: list[Variant]) -> Table:
    t = Table(title, [key, "D db model (ms)", "I db", "p95 db (ms)", "fit SCV", "model",
                      "MVA: X max / mean", "MAP: X max / mean", "MAP: R max / mean",
                      "MAP, estimator demand: X max / mean",
                      "MAP, D = sum B / sum n: X max / mean"])

    def mm(e: dict[str, float], which: str) -> str:
        return f"{100 * e[which + '_max']:.1f}% / {100 * e[which + '_mean']:.1f}%"

    for v in variants:
        db = v.est.tiers["db"]
        flag = f" ({db.idc_flag})" if db.idc_flag else ""
        t.add(v.label, f"{ms(db.demand)} ({db.estimator})", f"{num(db.idc)}{flag}", ms(db.p95),
              num(db.fit["scv"]) if db.fit else "-", "MAP" if db.process else "MVA",
              mm(v.errors["MVA"], "x"), mm(v.errors["MAP"], "x"), mm(v.errors["MAP"], "r"),
              mm(v.errors[ESTIMATOR_MAP], "x"), mm(v.errors[LAW_MAP], "x"))
    return t


# ------------------------------------------------------------------------------- plot
def plot(results: dict[str, MixResult], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(4.2 * len(results), 6.4),
                             sharex=True, squeeze=False)
    for j, r in enumerate(results.values()):
        n = [row.n for row in r.rows]
        for i, (metric, scale, unit) in enumerate((("throughput", 1.0, "X (req/s)"),
                                                   ("response", 1000.0, "R (ms)"))):
            ax = axes[i][j]
            truth = [scale * getattr(row.truth, metric) for row in r.rows]
            hw = [scale * getattr(row.truth, metric + "_hw") for row in r.rows]
            ax.errorbar(n, truth, yerr=hw, fmt="o", color="black", capsize=3,
                        label="simulated truth (95% CI)")
            ax.plot(n, [scale * getattr(row.predictions["MVA"], metric) for row in r.rows],
                    "s--", color="tab:red", label="MVA (estimators' demands)")
            ax.plot(n, [scale * getattr(row.predictions["MAP"], metric) for row in r.rows],
                    "^-", color="tab:blue", label="MAP network (pipeline default)")
            ax.plot(n, [scale * getattr(row.predictions[ESTIMATOR_MAP], metric)
                        for row in r.rows],
                    "v:", color="tab:green", label="MAP network, estimator demand")
            ax.set_ylabel(unit)
            ax.grid(alpha=0.3)
            if i == 0:
                ax.set_title(f"{r.mix} ({MIXES[r.mix]})")
            else:
                ax.set_xlabel("users N (Z = 0.5 s)")
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.suptitle("perfcast on Mi et al.'s (2008) experiment: estimated at N = 50 from 5 s windows",
                 fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
