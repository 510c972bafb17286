"""Throughput of the embedded pipeline core (``streams.engine.pipeline.Pipeline.process``).

Run from the repository root:

    python -m bench.speed.pipeline                 # 100 systems x 3 tiers x 14 classes, 60 ends
    python -m bench.speed.pipeline --bursty        # 10 systems, one bursty tier each (MAP model)
    python -m bench.speed.pipeline --bursty --multicore   # 20 systems, 2-8 cores, 200-2000 users
    python -m bench.speed.pipeline --open          # 20 open systems: request rates, no users
    python -m bench.speed.pipeline --open --closed-ratio  # + against the closed, CPU time
    python -m bench.speed.pipeline --quick         # smoke test (small, one repetition)
    python -m bench.speed.pipeline --profile       # + cProfile of one run (top entries)

Workload (the issue's target): ``--systems`` systems (100) x 3 tiers x 14 request classes,
windows of 5 s, the model solved on its event-time timer (``SystemConfig.solve_interval_s``,
default 60 s = every 12 window ends), all in one process, default ``Config()``. The records are
generated synthetically -- not with the queueing simulator -- and all before any timing:

* per system: fixed demands ``D[tier, class]`` (lognormal around 2 ms, sigma 0.5); cores per
  tier from {2, 4} (all 1 under ``--bursty``: the MAP network needs single-core tiers); users
  50-150 (``--users``) swinging slowly (+-10..30% over 2-6 h); a throughput proportional to the
  users that puts the busiest tier at 35-65% utilization;
* per window: completions per class ~ Poisson(X p_c(t) * 5 s), the class mix ``p_c(t)``
  drifting slowly (each share x (1 + 0.3 sin), periods 10-60 min: the demands are identifiable);
  the same counts at every tier (one visit per tier); utilization
  ``min(0.98, sum_c n_c D_c / (T cores) + N(0, 0.01))``; per-class response time
  ``D_c / (1 - U)`` with 10% lognormal noise; users;
* dicts of the input contract (``end`` in epoch seconds), in stream order: for each window end,
  every system, every tier. A system is solved at the first end past each of its solve
  boundaries, which sit at an offset from the minute taken from its name
  (``SystemConfig.solve_offset_s`` unset), the first at least half an interval after the
  system's first window: 60 ends (5 min) give 4 or 5 solves (4.43 per system with the default
  seed); on the minute (``solve_offset_s = 0``) 4. In the long run it is one solve per 60 s
  either way.

``--bursty``: the last tier of every system has bursty service: a 2-state on/off process over
windows (mean sojourn 8 windows off, 4 on) multiplies its busy time per request by 6 while
"on", so its index of dispersion is in the hundreds (threshold 10) and, once the tier has the
~170 windows the estimator needs (100 busy windows), the system is solved with the MAP queueing
network (``prediction["model"] == "map"``). A 3-tier MAP network at the target's populations
is far too slow to run here (states grow as N^3; ``--map-probe 50 100`` times single solves), so
the bursty defaults are 10 systems, 300 ends, users 10-20, ``map_max_population`` 25 and no
long run (every flag can be overridden); the figures are printed with the settings used.

``--bursty --multicore``: the systems people run -- every tier's cores from {2, 4, 8}, the last
tier bursty as above, 200-2000 users, 20 systems, 300 ends, the default ``map_max_population``
(10,000): the model is the decomposition (``prediction["model"] == "map-fes"``) once the bursty
tier is trusted. ``--core-choices 16 32 64``: the same with tiers of 16-64 cores (every bursty
tier of up to 64 cores on the per-job station by default, ``solvers.decomposition``'s
``PER_JOB_MAX_CORES``; ``--per-job-max-cores 16`` gives those of more than 16 cores the
speed-scaled station, flagged).

``--open``: the default workload's shape for open systems (an API's monitoring has request
rates, not sessions): the records carry no ``users`` and no think time is configured, so every
system is detected open (``SystemConfig.workload`` ``auto``; ``prediction["workload"] ==
"open"``) and solved by the open route (:mod:`streams.predict.open_model`: ``model`` ``open``,
``capacity_rate_per_s`` and ``headroom_rate_per_s`` in requests per second). Each system's
request rate is drawn from ``--rates`` (100-400/s) and swings as the users do (+-10..30% over
2-6 h); the completions are Poisson at that rate over the same drifting mix (the entry tier's
completions are the arrival rates the model reads), and the demands are scaled so that the
drawn rate puts the busiest tier at 35-65%, where the closed workload's throughput puts it.
Defaults: 20 systems (an open solve costs more than a closed one, whose MVA curves are
computed for all systems together: a run takes a few minutes here), 60 ends, the steady state
and the long run as above. Printed besides: the predictions' workload kinds and how many open
ones have a finite ``capacity_rate_per_s``. ``--closed-ratio`` adds the open workload against
the default (closed) one of the same systems, ends and seeds, in alternated rounds by CPU time
(``time.process_time``), cold and steady: each one's windows/s and the open one's throughput
over the closed one's within a round (:func:`closed_ratio`).

Measured (timings repeated ``--repeat`` times on a fresh ``Pipeline``; best and median printed,
since other processes may share the 2 cores):

1. records (= tier windows) per second through ``Pipeline.process`` with dict records and with
   JSON bytes (what the Kafka worker receives; ``json.dumps`` precomputed), and
   ``parse_window`` alone on both;
2. the share of the time in the rounds of solves (``solve_systems``, wrapped by this script only) vs the
   per-window update, the number of solves, the time per solve by model, the models used
   (``prediction["model"]``) and the bursty tiers at the end;
3. memory per tier state: ``tracemalloc`` traced memory held after the run minus before the
   pipeline was built, divided by the number of tiers (includes the systems' own state: users
   points, alerts), on a separate untimed run;
4. the JSON size of one tier's state, ``len(json.dumps(tier.to_dict()))`` and with
   ``with_history=False``, after the run and -- in a separate run of one system over
   ``--long-ends`` (4,200; 0 under ``--bursty``) ends -- with the history full
   (``SystemConfig.history`` = 4096 windows), where also the time per solve at full history is
   measured and the steady-state windows/s projected from it (12 windows per tier per solve).

``--pool K``: instead of the above, the same records through a pipeline whose every system
has a connection pool of ``K`` tokens on ``app`` held at ``app`` and ``db`` (the pool issue's
acceptance: the default workload's throughput with a pool within 10% of without), the runs
with and without the pool alternating in one process (the machine's load shared by both):
windows/s of each, the ratio, the solves by model and the pool's utilization at the solves
(the pool model: :mod:`solvers.pools_general` for the 14 classes; the remediation raises
the pool where it binds). ``tiers`` is set to ``web, app, db`` in both (a pool needs them).

``--profile`` adds a cProfile of one more dict run and prints its top cumulative entries in
``streams/`` and ``estimators/``.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gc
import io
import os
import json
import math
import pstats
import re
import shlex
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import numpy as np

from solvers.mapqn import solve_closed
from solvers.processes import MAP
from streams.core.config import Config, Pool
from streams.engine.pipeline import Pipeline
from streams.core.records import parse_window
from streams.engine.runtime import tune_gc
import streams.engine.pipeline as pipeline_module
import streams.engine.system as system_module

WINDOW_S = 5.0
TIERS = ("web", "app", "db")
#: 14 TPC-W request classes
CLASSES = ("home", "new_products", "best_sellers", "product_detail", "search_request",
           "search_results", "shopping_cart", "customer_registration", "buy_request",
           "buy_confirm", "order_inquiry", "order_display", "admin_request", "admin_confirm")
#: 2026-11-20T10:00:00Z, event-time origin (as streams.cli.demo)
START = 1_795_168_800.0
#: windows/s the issue asks of the default scenario
TARGET_WPS = 10_000.0
#: records per Pipeline.process_many batch (streams.cli.embedded.CHUNK_RECORDS)
CHUNK = 2000
#: relative amplitude of each class's share drift
MIX_DRIFT = 0.3
#: bursty tier: on/off switching probabilities per window, busy-time factor while on
BURST_ON, BURST_OFF, BURST_FACTOR = 1 / 8, 1 / 4, 6.0


# ------------------------------------------------------------------------------ workload
@dataclass
class SystemTrace:
    """One system's monitoring data as arrays (records are built from it on demand)."""

    name: str
    cores: np.ndarray          # (M,)
    U: np.ndarray              # (ends, M) utilization
    n: np.ndarray              # (ends, C) completions, the same at every tier
    rt: np.ndarray             # (ends, M, C) response times
    users: np.ndarray | None   # (ends,); None: an open system (no users in its records)
    window_s: float

    def records(self, k0: int, k1: int) -> list[list[dict[str, Any]]]:
        """Records of window ends ``k0 .. k1 - 1``: ``out[k][j]`` is tier ``j``'s."""
        out = []
        for k in range(k0, k1):
            end = START + (k + 1) * self.window_s
            comp = {c: int(v) for c, v in zip(CLASSES, self.n[k])}
            rows = [{"system": self.name, "tier": tier, "end": end,
                     "window_s": self.window_s,
                     "utilization": round(float(self.U[k, j]), 5),
                     "cores": int(self.cores[j]), "completions": comp,
                     "response_time_s": {c: round(float(self.rt[k, j, i]), 6)
                                         for i, c in enumerate(CLASSES)
                                         if self.n[k, i] > 0}}
                    for j, tier in enumerate(TIERS)]
            if self.users is not None:
                for row in rows:
                    row["users"] = int(self.users[k])
            out.append(rows)
        return out


#: requests/s an open system's rate is drawn from (``--open``; ``--rates``)
OPEN_RATES = (100.0, 400.0)
#: cores a tier may have in the ``--multicore`` workload (``--core-choices``)
MULTICORE_CHOICES = (2.0, 4.0, 8.0)


def system_trace(rng: np.random.Generator, name: str, ends: int, *, bursty: bool = False,
                 users: tuple[float, float] = (50.0, 150.0),
                 window_s: float = WINDOW_S, multicore: bool = False,
                 core_choices: tuple[float, ...] = MULTICORE_CHOICES,
                 rates: tuple[float, float] | None = None) -> SystemTrace:
    """One system's data over ``ends`` window ends (the module docstring's workload);
    ``core_choices``: the cores a tier may have under ``multicore``; ``rates``: an open system
    (``--open``) whose request rate, drawn from this range in requests per second, swings as
    the users would and drives the completions, with no users in its records."""
    M, C = len(TIERS), len(CLASSES)
    D = np.exp(rng.normal(np.log(2e-3), 0.5, (M, C)))            # s per request
    if multicore:
        cores = rng.choice(list(core_choices), M)
    else:
        cores = np.ones(M) if bursty else rng.choice([2.0, 4.0], M)
    base_mix = rng.dirichlet(np.full(C, 2.0))
    period = rng.uniform(600.0, 3600.0, C)                        # s, mix drift per class
    phase = rng.uniform(0.0, 2 * np.pi, C)
    users0 = rng.uniform(*(users if rates is None else rates))    # open: requests/s
    users_amp = rng.uniform(0.1, 0.3)                             # slow +-10..30% swing
    users_period = rng.uniform(2 * 3600.0, 6 * 3600.0)            # over 2-6 hours
    users_phase = rng.uniform(0.0, 2 * np.pi)
    t = np.arange(1, ends + 1) * window_s                        # s since START
    mix = base_mix * (1.0 + MIX_DRIFT * np.sin(2 * np.pi * t[:, None] / period + phase))
    mix /= mix.sum(axis=1, keepdims=True)                         # (ends, C)
    n_users = users0 * (1.0 + users_amp * np.sin(2 * np.pi * t / users_period + users_phase))
    if rates is None:
        n_users = np.maximum(np.rint(n_users + rng.normal(0.0, 1.0, ends)), 1)
    per_request = (D @ base_mix) / cores                          # (M,) busy s per request
    x0 = rng.uniform(0.35, 0.65) / per_request.max()              # requests/s at users0
    if rates is None:
        X = x0 * n_users / users0                                 # closed: X ~ N / (Z + R)
    else:
        # open: the rate is the drawn one; the demands scaled so that it puts the busiest
        # tier where the closed workload's x0 does (35-65%)
        D = D * (x0 / users0)
        X = n_users
    n = rng.poisson(X[:, None] * mix * window_s).astype(float)    # (ends, C), every tier
    work = n @ D.T / (window_s * cores)                           # (ends, M) utilization
    if bursty:                                                    # last tier: on/off service
        on = np.empty(ends, dtype=bool)
        state = False
        for k, u in enumerate(rng.random(ends)):
            if u < (BURST_OFF if state else BURST_ON):
                state = not state
            on[k] = state
        work[:, -1] *= np.where(on, BURST_FACTOR, 1.0)
    U = np.clip(work + rng.normal(0.0, 0.01, work.shape), 0.0, 0.98)
    rt = D[None, :, :] / (1.0 - U[:, :, None]) * np.exp(rng.normal(0.0, 0.1, (ends, M, C)))
    return SystemTrace(name, cores, U, n, rt, n_users if rates is None else None, window_s)


def system_records(rng: np.random.Generator, name: str, ends: int, *, bursty: bool = False,
                   users: tuple[float, float] = (50.0, 150.0),
                   window_s: float = WINDOW_S) -> list[list[dict[str, Any]]]:
    """One system's records: ``out[k][j]`` is tier ``j``'s record of window end ``k``."""
    return system_trace(rng, name, ends, bursty=bursty, users=users,
                        window_s=window_s).records(0, ends)


def host_speed() -> str:
    """How fast this machine runs plain Python right now: seconds for a fixed 5,000,000-step
    loop (best of 3). These machines are shared virtual machines whose speed varies by 2x over a
    day; figures from runs with different values here are not comparable, ratios within one run
    are."""
    best = math.inf
    for _ in range(3):
        start, total = time.perf_counter(), 0
        for i in range(5_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return f"host speed: a 5M-step Python loop in {best:.2f} s (best of 3)"


def workload(systems: int, ends: int, seed: int, bursty: bool = False,
             users: tuple[float, float] = (50.0, 150.0),
             multicore: bool = False,
             core_choices: tuple[float, ...] = MULTICORE_CHOICES,
             rates: tuple[float, float] | None = None) -> list[dict[str, Any]]:
    """All records, stream order: for each window end, every system, every tier (``rates``:
    open systems, :func:`system_trace`)."""
    return [r for chunk in workload_chunks(systems, ends, seed, ends, bursty, users, multicore,
                                           core_choices, rates)
            for r in chunk]


def workload_chunks(systems: int, ends: int, seed: int, chunk_ends: int, bursty: bool = False,
                    users: tuple[float, float] = (50.0, 150.0),
                    multicore: bool = False,
                    core_choices: tuple[float, ...] = MULTICORE_CHOICES,
                    rates: tuple[float, float] | None = None
                    ) -> Iterator[list[dict[str, Any]]]:
    """:func:`workload` in chunks of ``chunk_ends`` window ends, built as they are asked for
    (a full history of 100 systems is over a million records)."""
    rng = np.random.default_rng(seed)
    traces = [system_trace(rng, f"sys{s:03d}", ends, bursty=bursty, users=users,
                           multicore=multicore, core_choices=core_choices, rates=rates)
              for s in range(systems)]
    for k0 in range(0, ends, chunk_ends):
        k1 = min(k0 + chunk_ends, ends)
        per_system = [tr.records(k0, k1) for tr in traces]
        yield [rec for k in range(k1 - k0) for sysrec in per_system for rec in sysrec[k]]


# ------------------------------------------------------------------------------ measurement
@dataclass
class Run:
    seconds: float
    solves: list[tuple[float, str | None]]       # (seconds, model) per solve
    pipeline: Pipeline
    outputs: Counter = field(default_factory=Counter)
    flags: Counter = field(default_factory=Counter)
    remediations: list[float] = field(default_factory=list)
    #: each prediction's pool utilization (model), where it has pools
    pool_utilization: list[float] = field(default_factory=list)
    #: predictions by workload kind (``prediction["workload"]``)
    kinds: Counter = field(default_factory=Counter)
    #: open predictions with a finite ``capacity_rate_per_s``
    open_capacities: int = 0

    @property
    def solve_seconds(self) -> float:
        return sum(s for s, _ in self.solves)


class SolveTimer:
    """Wraps ``solve_systems`` as ``streams.engine.pipeline`` calls it (in this process, while
    active) to time every round of solves; a round's time is shared equally by its systems
    (their MVA curves are computed side by side)."""

    def __init__(self) -> None:
        self.original = pipeline_module.solve_systems
        self.original_remediate = system_module.remediate
        self.solves: list[tuple[float, str | None]] = []
        self.flags: Counter = Counter()
        #: seconds per remediation (``streams.predict.whatif.remediate`` on a solve at risk)
        self.remediations: list[float] = []
        self.pool_utilization: list[float] = []
        self.kinds: Counter = Counter()
        #: open predictions with a finite ``capacity_rate_per_s``
        self.open_capacities = 0

    def __enter__(self) -> "SolveTimer":
        original, solves, flags = self.original, self.solves, self.flags
        remediate, remediations = self.original_remediate, self.remediations
        pool_utilization, kinds = self.pool_utilization, self.kinds

        def timed_remediate(*args: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            out = remediate(*args, **kw)
            remediations.append(time.perf_counter() - t0)
            return out

        def timed(due: list[Any], *rest: Any) -> list[Any]:
            t0 = time.perf_counter()
            outs = original(due, *rest)
            dt = (time.perf_counter() - t0) / max(1, len(outs))
            for out in outs:
                model = out.predictions[0].get("model") if out.predictions else None
                solves.append((dt, model))
                for p in out.predictions:
                    kind, cap = p.get("workload"), p.get("capacity_rate_per_s")
                    kinds[kind] += 1
                    if kind == "open" and cap is not None and math.isfinite(cap):
                        self.open_capacities += 1
                    for f in p.get("flags") or ():
                        flags[re.sub(r"\d+", "#", f.split(":")[0])] += 1
                    for part in (p.get("pools") or {}).values():
                        if part.get("utilization") is not None:
                            pool_utilization.append(float(part["utilization"]))
            return outs

        pipeline_module.solve_systems = timed
        system_module.remediate = timed_remediate
        return self

    def __exit__(self, *exc: Any) -> None:
        pipeline_module.solve_systems = self.original
        system_module.remediate = self.original_remediate


def run_pipeline(records: list[Any], config: Config, chunk: int = CHUNK,
                 pipeline: Pipeline | None = None) -> Run:
    """Feed ``records`` to ``Pipeline.process_many`` in batches of ``chunk`` (what the
    embedded runner and the worker do) and time it."""
    pipeline = pipeline or Pipeline(config)
    counts: Counter = Counter()
    gc.collect()
    with SolveTimer() as timer:
        t0 = time.perf_counter()
        for i in range(0, len(records), chunk):
            out = pipeline.process_many(records[i:i + chunk])
            counts["estimates"] += len(out.estimates)
            counts["predictions"] += len(out.predictions)
            counts["alerts"] += len(out.alerts)
            counts["deadletter"] += len(out.deadletter)
        seconds = time.perf_counter() - t0
    return Run(seconds, timer.solves, pipeline, counts, timer.flags, timer.remediations,
               timer.pool_utilization, timer.kinds, timer.open_capacities)


def pool_comparison(records: list[Any], config: Config, size: int, reps: int,
                    systems: int) -> list[tuple[str, str]]:
    """``reps`` rounds of the records through a pipeline without and one with a pool of
    ``size`` tokens on app held at app and db on every system (alternating, so that both
    share the machine's load): windows/s best / median of each, their ratio, the solves."""
    base = replace(config.defaults, tiers=TIERS)
    plain = replace(config, defaults=base)
    pooled = replace(config, defaults=replace(base, pools={"conn": Pool("app", size,
                                                                       ("app", "db"))}))
    runs: dict[str, list[Run]] = {"without": [], "with": []}
    for _ in range(reps):
        runs["without"].append(run_pipeline(records, plain))
        runs["with"].append(run_pipeline(records, pooled))
    n = len(records)
    rate = {k: (n / min(r.seconds for r in v), n / statistics.median(r.seconds for r in v))
            for k, v in runs.items()}
    rows = [(f"windows/s without the pool / with a pool of {size} (best)",
             f"{fmt_rate(rate['without'][0])} / {fmt_rate(rate['with'][0])} "
             f"({rate['with'][0] / rate['without'][0]:.3f}x)"),
            ("  the same, median", f"{fmt_rate(rate['without'][1])} / "
             f"{fmt_rate(rate['with'][1])} ({rate['with'][1] / rate['without'][1]:.3f}x)")]
    for k, v in runs.items():
        best = min(v, key=lambda r: r.seconds)
        rows += [(f"{k} the pool, best run:", "")] + solve_rows(best, systems)
        if best.pool_utilization:
            u = np.array(best.pool_utilization)
            rows.append(("  pool utilization at the predictions: median / p90 / max",
                         f"{np.median(u):.2f} / {np.percentile(u, 90):.2f} / {u.max():.2f}"))
    return rows


def time_loop(fn: Callable[[Any], Any], items: list[Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        gc.collect()
        t0 = time.perf_counter()
        for x in items:
            fn(x)
        out.append(time.perf_counter() - t0)
    return out


def traced_bytes(records: list[Any], config: Config) -> int:
    """Traced memory held after feeding ``records`` minus before building the pipeline."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    pipeline = Pipeline(config)
    for i in range(0, len(records), CHUNK):
        pipeline.process_many(records[i:i + CHUNK])
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del pipeline
    return after - before


def tier_sizes(pipeline: Pipeline) -> tuple[float, float, int]:
    """Mean JSON size of a tier's state with and without history; history windows held."""
    full, header, rows = [], [], []
    for state in pipeline.systems.values():
        for tier in state.tiers.values():
            full.append(len(json.dumps(tier.to_dict())))
            header.append(len(json.dumps(tier.to_dict(with_history=False))))
            rows.append(tier.history.arrays(len(tier.classes), last=10**9).size)
    return float(np.mean(full)), float(np.mean(header)), int(np.mean(rows))


def bursty_tiers(pipeline: Pipeline) -> tuple[Counter, int, list[float]]:
    """Tiers flagged bursty at the last solve (per tier name), tiers in all, their I."""
    flagged: Counter = Counter()
    total, idcs = 0, []
    for state in pipeline.systems.values():
        for tier in state.tiers.values():
            total += 1
            if tier.model.get("bursty"):
                flagged[tier.tier] += 1
                idcs.append(float(tier.model["idc"]))
    return flagged, total, idcs


def fmt_bursty(flagged: Counter, total: int, idcs: list[float]) -> str:
    if not idcs:
        return f"0 of {total}"
    return (f"{sum(flagged.values())} of {total} ("
            + ", ".join(f"{t} {k}" for t, k in sorted(flagged.items()))
            + f"); I median {np.median(idcs):.0f}, min {min(idcs):.0f}")


def solve_rows(run: Run, systems: int) -> list[tuple[str, str]]:
    rows = [("solves (best run); per system", f"{len(run.solves)} ; "
             f"{len(run.solves) / systems:g}")]
    by_model: dict[Any, list[float]] = {}
    for dt, model in run.solves:
        by_model.setdefault(model, []).append(dt * 1e3)
    for model, ms in sorted(by_model.items(), key=lambda kv: str(kv[0])):
        a = np.array(ms)
        rows.append((f"  model {model}: solves; ms per solve median / p90 / max",
                     f"{a.size} ; {np.median(a):.1f} / {np.percentile(a, 90):.1f} / "
                     f"{a.max():.1f}"))
    rem = np.array(run.remediations) * 1e3
    rows.append(("  remediations (solves at risk); ms each median / p90 / max; share of solves",
                 f"{rem.size} ; " + (f"{np.median(rem):.1f} / {np.percentile(rem, 90):.1f} / "
                                      f"{rem.max():.1f} ; "
                                      f"{100 * rem.sum() / 1e3 / run.solve_seconds:.1f}%"
                                      if rem.size else "-")))
    if run.flags:
        rows.append(("  prediction flags (count)",
                     "; ".join(f"{k} ({v})" for k, v in run.flags.most_common())))
    return rows + kind_rows(run)


def kind_rows(run: Run) -> list[tuple[str, str]]:
    """The workload kinds of the predictions and the open ones with a capacity in requests
    per second; nothing where every prediction is closed (the closed workloads)."""
    if set(run.kinds) <= {"closed"}:
        return []
    opened = run.kinds.get("open", 0)
    return [("  workload kinds (predictions)",
             ", ".join(f"{k} {v:,}" for k, v in sorted(run.kinds.items(), key=str))),
            ("  open predictions with a finite capacity_rate_per_s",
             f"{run.open_capacities:,} of {opened:,}")]


def map_probe(pipeline: Pipeline, populations: list[int]) -> list[tuple[str, str]]:
    """Time single 3-tier MAP network solves with the first bursty tier's fitted MAP(2)."""
    for state in pipeline.systems.values():
        tiers = list(state.tiers.values())
        fit = next((t.fit for t in tiers if t.model.get("bursty") and t.fit), None)
        if fit is None:
            continue
        means = [t.model.get("mean_service_s") or 2e-3 for t in tiers]
        procs = [MAP.from_dict(t.fit["process"]).scaled(m) if t.model.get("bursty") and t.fit
                 else MAP.exponential(m) for t, m in zip(tiers, means)]
        mapped = sum(p.order > 1 for p in procs)
        z = state.think_time_est or 0.5
        rows = []
        for n in populations:
            t0 = time.perf_counter()
            res = solve_closed(procs, n, z)
            rows.append((f"one MAP network solve, {len(procs)} tiers ({mapped} MAP(2)), "
                         f"N = {n} (Z = {z:.3f} s, I = {fit['idc']:.0f})",
                         f"{time.perf_counter() - t0:.2f} s, X = {res.throughput:.1f}/s"))
        return rows
    return [("MAP network probe", "skipped: no bursty tier with a MAP(2) fit")]


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def print_rows(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")


@dataclass
class Warmed:
    """A pipeline fed the warm-up's window ends, and the timed ends' records."""

    pipeline: Pipeline
    timed: list[dict[str, Any]]
    fed: int                   # records fed in the warm-up
    seconds: float             # the warm-up's wall time, the records' generation included
    busy: float                # of it, in Pipeline.process_many
    steady_ends: int           # the timed window ends (whole chunks)


def warmed(systems: int, warm_ends: int, steady_ends: int, seed: int,
           users: tuple[float, float], config: Config,
           rates: tuple[float, float] | None = None) -> Warmed:
    """``warm_ends`` window ends fed untimed to a pipeline, in chunks generated as they are
    fed, and the ``steady_ends`` after them (both rounded up to whole chunks)."""
    chunk_ends = max(CHUNK // (systems * len(TIERS)), 1)
    warm_chunks, timed_chunks = -(-warm_ends // chunk_ends), -(-steady_ends // chunk_ends)
    chunks = workload_chunks(systems, chunk_ends * (warm_chunks + timed_chunks), seed,
                             chunk_ends, users=users, rates=rates)
    warm = Pipeline(config)
    fed = 0
    t0 = time.perf_counter()
    busy = 0.0
    for _ in range(warm_chunks):
        records = next(chunks)
        t1 = time.perf_counter()
        for i in range(0, len(records), CHUNK):
            warm.process_many(records[i:i + CHUNK])
        busy += time.perf_counter() - t1
        fed += len(records)
    return Warmed(warm, [r for c in chunks for r in c], fed, time.perf_counter() - t0, busy,
                  timed_chunks * chunk_ends)


def steady_state(systems: int, warm_ends: int, steady_ends: int, seed: int,
                 users: tuple[float, float], config: Config,
                 reps: int, rates: tuple[float, float] | None = None) -> list[tuple[str, str]]:
    """The default scenario (``rates``: the open one) with every tier's history full:
    ``warm_ends`` window ends fed untimed, then ``steady_ends`` more timed (``reps`` times,
    each on a copy of the warmed pipeline), as dicts and as JSON bytes."""
    w = warmed(systems, warm_ends, steady_ends, seed, users, config, rates)
    warm, timed, warm_s, busy, warm_n = w.pipeline, w.timed, w.seconds, w.busy, w.fed
    steady_ends = w.steady_ends
    blobs = [json.dumps(r).encode() for r in timed]
    history = min(t.history.seq for st in warm.systems.values() for t in st.tiers.values())
    runs, jsecs = [], []
    for _ in range(reps):
        runs.append(run_pipeline(timed, config, pipeline=copy.deepcopy(warm)))
        jsecs.append(run_pipeline(blobs, config, pipeline=copy.deepcopy(warm)).seconds)
    best = min(runs, key=lambda r: r.seconds)
    n = len(timed)
    secs = [r.seconds for r in runs]
    solve_ms = np.array([dt for dt, _ in best.solves]) * 1e3
    # the open workload's solves by model and kinds (the closed one's are the cold run's)
    by_model = solve_rows(best, systems)[1:] if kind_rows(best) else []
    return [
        (f"steady state: {systems} systems, history full (>= {history:,} windows per tier "
         f"after {warm_ends:,} ends, {warm_n:,} records fed in {warm_s:.0f} s, "
         f"{fmt_rate(warm_n / busy)} windows/s)", ""),
        (f"  {n:,} more records ({steady_ends} ends): windows/s dicts (best / median)",
         f"{fmt_rate(n / best.seconds)} / {fmt_rate(n / statistics.median(secs))}"),
        ("  JSON bytes: windows/s (best / median)",
         f"{fmt_rate(n / min(jsecs))} / {fmt_rate(n / statistics.median(jsecs))}"),
        ("  vs target 10,000 windows/s (best, JSON bytes)", f"{n / min(jsecs) / TARGET_WPS:.2f}x"),
        ("  time in solves (best run); ms per solve median / p90 / max",
         f"{100 * best.solve_seconds / best.seconds:.1f}% ; {np.median(solve_ms):.2f} / "
         f"{np.percentile(solve_ms, 90):.2f} / {solve_ms.max():.2f}"),
        ("  per-window update without solves, per record (best run)",
         f"{(best.seconds - best.solve_seconds) / n * 1e6:.1f} us"),
        *by_model,
    ]


def cpu_seconds(records: list[Any], pipeline: Pipeline) -> float:
    """CPU time (this process's) of feeding ``records`` to ``pipeline`` in batches."""
    gc.collect()
    t0 = time.process_time()
    for i in range(0, len(records), CHUNK):
        pipeline.process_many(records[i:i + CHUNK])
    return time.process_time() - t0


def closed_ratio(systems: int, ends: int, warm_ends: int, steady_ends: int, seed: int,
                 users: tuple[float, float], rates: tuple[float, float], config: Config,
                 reps: int) -> list[tuple[str, str]]:
    """The open workload against the default (closed) one of the same systems, window ends and
    seeds, in ``reps`` rounds that run each once (the order swapped every round), so that both
    share the host's load: CPU time (``time.process_time``) of ``Pipeline.process_many`` cold
    (a fresh pipeline) and -- with ``warm_ends`` -- steady (a copy of a warmed one). Per
    workload the windows/s of its best run, and the open one's throughput over the closed
    one's within each round (below 1: the open workload is slower), their median and range."""
    kinds = {"open": rates, "closed": None}
    cold = {k: workload(systems, ends, seed, users=users, rates=r) for k, r in kinds.items()}
    warm = {k: warmed(systems, warm_ends, steady_ends, seed + 2, users, config, r)
            for k, r in kinds.items()} if warm_ends else {}
    secs: dict[str, dict[str, list[float]]] = {"cold": {k: [] for k in kinds},
                                               "steady": {k: [] for k in kinds}}
    for r in range(reps):
        for k in list(kinds)[::1 if r % 2 == 0 else -1]:
            secs["cold"][k].append(cpu_seconds(cold[k], Pipeline(config)))
            if warm:
                secs["steady"][k].append(cpu_seconds(warm[k].timed,
                                                     copy.deepcopy(warm[k].pipeline)))
    rows = [(f"open against closed (default) workload, {reps} alternated rounds, CPU time", "")]
    for phase, n in (("cold", len(cold["open"])),
                     ("steady", len(warm["open"].timed) if warm else 0)):
        if not secs[phase]["open"]:
            continue
        ratio = [c / o for o, c in zip(secs[phase]["open"], secs[phase]["closed"])]
        rows += [(f"  {phase} ({n:,} records each): windows/s open / closed (best)",
                  f"{fmt_rate(n / min(secs[phase]['open']))} / "
                  f"{fmt_rate(n / min(secs[phase]['closed']))}"),
                 (f"  {phase}: open's throughput over closed's, per round: median (range)",
                  f"{statistics.median(ratio):.3f}x ({min(ratio):.3f}-{max(ratio):.3f})")]
    return rows


# ------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bursty", action="store_true",
                    help="one bursty tier per system, MAP model (see the module docstring)")
    ap.add_argument("--multicore", action="store_true",
                    help="with --bursty: cores 2-8 per tier, 200-2000 users, 20 systems, the "
                         "default map_max_population (the decomposition)")
    ap.add_argument("--core-choices", type=float, nargs="+", metavar="C",
                    default=list(MULTICORE_CHOICES),
                    help="with --multicore: the cores a tier may have (default 2 4 8; e.g. "
                         "16 32 64 for tiers whose bursty chains are larger)")
    ap.add_argument("--per-job-max-cores", type=int,
                    help="SystemConfig.per_job_max_cores (default: the config's, 64): bursty "
                         "tiers of up to this many cores on the per-job station")
    ap.add_argument("--open", action="store_true",
                    help="open systems: request rates, no users (see the module docstring)")
    ap.add_argument("--rates", type=float, nargs=2, metavar=("LO", "HI"),
                    default=list(OPEN_RATES),
                    help="with --open: requests/s per system, uniform (default 100 400)")
    ap.add_argument("--closed-ratio", action="store_true",
                    help="with --open: also time it against the default (closed) workload of the "
                         "same systems and ends, alternated, by CPU time (cold and steady)")
    ap.add_argument("--systems", type=int, help="systems (default 100; --bursty 10; --open 20)")
    ap.add_argument("--ends", type=int,
                    help="window ends (default 60 = 5 min event time; --bursty 300)")
    ap.add_argument("--users", type=float, nargs=2, metavar=("LO", "HI"),
                    help="users per system, uniform (default 50 150; --bursty 10 20)")
    ap.add_argument("--map-max-population", type=int,
                    help="SystemConfig.map_max_population (default: the config's, 600; "
                         "--bursty 25)")
    ap.add_argument("--map-probe", type=int, nargs="*", default=[], metavar="N",
                    help="after a --bursty run, time one 3-tier MAP network solve at each N")
    ap.add_argument("--long-ends", type=int,
                    help="window ends of the one-system full-history run, for memory and "
                         "state sizes (default 4200; --bursty 0 = skip)")
    ap.add_argument("--warm-ends", type=int,
                    help="steady state: window ends fed (untimed) to fill every tier's history "
                         "before the timed ends (default 4110: history 4096; 0 = skip the "
                         "steady-state run; --bursty 0)")
    ap.add_argument("--steady-ends", type=int,
                    help="steady state: timed window ends after the warm-up (default 240 = "
                         "20 min event time)")
    ap.add_argument("--sla", type=float, help="SLA of every class, seconds (default 1: no "
                    "system at risk; a tight one puts systems at risk, so every solve computes "
                    "a remediation)")
    ap.add_argument("--no-remediation", action="store_true",
                    help="remediation = false (the solve loop without it, for comparison)")
    ap.add_argument("--repeat", type=int, help="timed repetitions (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-json", action="store_true", help="skip the JSON-bytes timings")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    ap.add_argument("--profile", action="store_true",
                    help="also cProfile one run; print the top cumulative entries")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 10 systems, 24 ends (--bursty 200), long run 600 ends, "
                         "1 repetition")
    ap.add_argument("--pool", type=int, metavar="K",
                    help="time the workload without and with a pool of K tokens on app held at "
                         "app and db (alternating runs, their ratio) instead of the above")
    ap.add_argument("--aligned-solves", action="store_true",
                    help="solve every system on the minute (solve_offset_s = 0) instead of at "
                         "the offsets spread by name, the default")
    ap.add_argument("--default-gc", action="store_true",
                    help="keep CPython's collector thresholds (default: streams.engine.runtime.tune_gc, "
                         "as every perfcast command and the worker's core process run)")
    args = ap.parse_args(argv)
    if not args.default_gc:
        tune_gc()
    b = args.bursty
    mc = args.multicore
    choices = tuple(args.core_choices)
    if mc and not b:
        ap.error("--multicore needs --bursty")
    if args.open and (b or args.pool is not None):
        ap.error("--open is the default workload's shape: not with --bursty or --pool")
    if args.closed_ratio and not args.open:
        ap.error("--closed-ratio needs --open")
    rates = tuple(args.rates) if args.open else None
    systems = args.systems or (20 if (mc or args.open) and not args.quick else
                               10 if b or args.quick else 100)
    ends = args.ends or ((200 if b else 24) if args.quick else (300 if b else 60))
    users = tuple(args.users) if args.users else (
        (200.0, 2000.0) if mc else (10.0, 20.0) if b else (50.0, 150.0))
    reps = args.repeat or (1 if args.quick else 3)
    long_ends = args.long_ends if args.long_ends is not None else (0 if b else 4200)
    long_ends = min(long_ends, 600) if args.quick else long_ends
    warm_ends = args.warm_ends if args.warm_ends is not None else (
        0 if b else (300 if args.quick else 4110))
    steady_ends = args.steady_ends or (24 if args.quick else 240)
    config = Config()
    map_max = args.map_max_population or (25 if b and not mc else None)
    if map_max is not None:
        config = replace(config, defaults=replace(config.defaults, map_max_population=map_max))
    if args.per_job_max_cores is not None:
        config = replace(config, defaults=replace(config.defaults,
                                                  per_job_max_cores=args.per_job_max_cores))
    if args.sla is not None:
        config = replace(config, defaults=replace(config.defaults, sla_s={"*": args.sla}))
    if args.no_remediation:
        config = replace(config, defaults=replace(config.defaults, remediation=False))
    if args.aligned_solves:
        config = replace(config, defaults=replace(config.defaults, solve_offset_s=0.0))
    cfg = config.defaults

    print(f"command: python -m {__spec__.name} {shlex.join(sys.argv[1:])}")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}; timings: best and median "
          f"of {reps} (machine shared, 2 cores; load average at start "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}); {host_speed()}")
    listed = "/".join(f"{c:g}" for c in choices)
    kind = (f"bursty multicore (last tier on/off x6, cores {listed})" if mc else
            "bursty (last tier on/off x6, all tiers 1 core)" if b else
            "open (request rates, no users)" if rates else "default")
    load = (f"requests/s {rates[0]:g}-{rates[1]:g}" if rates else
            f"users {users[0]:g}-{users[1]:g}")
    print(f"scenario: {kind}; "
          f"{systems} systems x {len(TIERS)} tiers x {len(CLASSES)} classes, {WINDOW_S:g}-s "
          f"windows, {ends} ends ({ends * WINDOW_S / 60:g} min event time), {load}")
    print(f"config: solve every {cfg.solve_interval_s:g} s, history {cfg.history}, "
          f"idc_threshold {cfg.idc_threshold:g}, map_max_population {cfg.map_max_population}, "
          f"per_job_max_cores {cfg.per_job_max_cores}, "
          f"sla {dict(cfg.sla_s)}, solve offsets "
          f"{'from the names' if cfg.solve_offset_s is None else cfg.solve_offset_s}; "
          f"gc thresholds {gc.get_threshold()}")

    t0 = time.perf_counter()
    records = workload(systems, ends, args.seed, bursty=b, users=users, multicore=mc,
                       core_choices=choices, rates=rates)
    gen_s = time.perf_counter() - t0
    n = len(records)
    t0 = time.perf_counter()
    blobs = [json.dumps(r).encode() for r in records]
    dumps_s = time.perf_counter() - t0
    print(f"records: {n:,} generated in {gen_s:.2f} s; JSON {np.mean([len(x) for x in blobs]):.0f}"
          f" B/record, dumped in {dumps_s:.2f} s (neither timed below)")
    print()
    if args.pool is not None:
        print_rows(pool_comparison(records, config, args.pool, reps, systems))
        return

    runs = [run_pipeline(records, config) for _ in range(reps)]
    secs = [r.seconds for r in runs]
    best = min(runs, key=lambda r: r.seconds)
    med_s = statistics.median(secs)
    share = [r.solve_seconds / r.seconds for r in runs]
    upd = [(r.seconds - r.solve_seconds) / n * 1e6 for r in runs]
    rows: list[tuple[str, str]] = [
        (f"Pipeline.process_many (batches of {CHUNK}), dict records: windows/s (best / median)",
         f"{fmt_rate(n / best.seconds)} / {fmt_rate(n / med_s)}"),
        ("  wall time (best / median)", f"{best.seconds:.2f} s / {med_s:.2f} s"),
        ("  vs target 10,000 windows/s (best)", f"{n / best.seconds / TARGET_WPS:.2f}x"),
    ]
    if not args.no_json:
        jruns = [run_pipeline(blobs, config) for _ in range(reps)]
        jsecs = [r.seconds for r in jruns]
        del jruns
        pd = time_loop(parse_window, records, reps)
        pj = time_loop(parse_window, blobs, reps)
        rows += [("  JSON bytes (what the worker gets): windows/s (best / median)",
                  f"{fmt_rate(n / min(jsecs))} / {fmt_rate(n / statistics.median(jsecs))}"),
                 ("  JSON bytes minus dicts, per record (best-best / median-median)",
                  f"{(min(jsecs) - best.seconds) / n * 1e6:+.1f} us / "
                  f"{(statistics.median(jsecs) - med_s) / n * 1e6:+.1f} us"),
                 ("parse_window alone, per record: dict / bytes / difference (best)",
                  f"{min(pd) / n * 1e6:.1f} us / {min(pj) / n * 1e6:.1f} us / "
                  f"{(min(pj) - min(pd)) / n * 1e6:+.1f} us")]
    rows += [
        ("time in solves (best run; range over runs)",
         f"{100 * best.solve_seconds / best.seconds:.1f}% "
         f"({100 * min(share):.1f}-{100 * max(share):.1f}%)"),
        ("per-window update (all but solves), per record (best run / median)",
         f"{(best.seconds - best.solve_seconds) / n * 1e6:.1f} us / "
         f"{statistics.median(upd):.1f} us"),
        ("  windows/s with solves excluded (best run)",
         fmt_rate(n / (best.seconds - best.solve_seconds))),
    ]
    rows += solve_rows(best, systems)
    flagged, total, idcs = bursty_tiers(best.pipeline)
    rows += [("bursty tiers at the last solve (I > threshold)", fmt_bursty(flagged, total, idcs)),
             ("outputs (best run)", ", ".join(f"{k} {v:,}" for k, v in best.outputs.items()))]
    tiers_n = total
    if not args.no_memory:
        mem = traced_bytes(records, config)
        rows.append((f"memory per tier state after {ends} windows (tracemalloc / {tiers_n})",
                     f"{mem / tiers_n / 1024:.1f} KiB"))
    full, header, kept = tier_sizes(best.pipeline)
    rows.append((f"tier state JSON after {ends} windows ({kept} rows): full / header",
                 f"{full / 1024:.1f} KiB / {header / 1024:.1f} KiB"))
    if args.map_probe:
        rows += map_probe(best.pipeline, args.map_probe)
    print_rows(rows)
    del runs, best

    if warm_ends:
        print()
        print_rows(steady_state(systems, warm_ends, steady_ends, args.seed + 2, users, config,
                                reps, rates))

    if long_ends:
        print()
        long = workload(1, long_ends, args.seed + 1, bursty=b, users=users, multicore=mc,
                        core_choices=choices, rates=rates)
        lrun = run_pipeline(long, config)
        lt = np.array([dt for dt, _ in lrun.solves]) * 1e3
        late = float(np.median(lt[-10:]))
        lfull, lheader, lkept = tier_sizes(lrun.pipeline)
        lflag, _, lidc = bursty_tiers(lrun.pipeline)
        lrows = [
            (f"one system, {long_ends:,} ends ({len(long):,} records): windows/s",
             fmt_rate(len(long) / lrun.seconds)),
            ("  ms per solve, median: first 5 / last 10",
             f"{np.median(lt[:5]):.1f} / {late:.1f}"),
            *[("  " + k, v) for k, v in solve_rows(lrun, 1)],
            ("  bursty tiers at the last solve", fmt_bursty(lflag, 3, lidc)),
            (f"  tier state JSON at the end ({lkept} rows): full / header",
             f"{lfull / 1024:.1f} KiB / {lheader / 1024:.1f} KiB"),
        ]
        if not args.no_memory:
            lmem = traced_bytes(long, config)
            lrows.append((f"  memory per tier state at the end ({lkept} rows; tracemalloc / 3)",
                          f"{lmem / 3 / 1024:.1f} KiB"))
        print_rows(lrows)

    if args.closed_ratio:
        print()
        print_rows(closed_ratio(systems, ends, warm_ends, steady_ends, args.seed, users, rates,
                                config, reps))

    if args.profile:
        pipeline = Pipeline(config)
        prof = cProfile.Profile()
        prof.enable()
        for i in range(0, len(records), CHUNK):
            pipeline.process_many(records[i:i + CHUNK])
        prof.disable()
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out).sort_stats("cumulative")
        stats.print_stats(r"/(streams|estimators)/", 20)
        print()
        print("cProfile, one dict run, cumulative, entries in streams/ and estimators/:")
        lines = out.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
        print("\n".join(line for line in lines[start:] if line.strip()))


if __name__ == "__main__":
    main()
