"""Mi et al. (2008), Table 1 redone: M/Trace/1 response times by burstiness profile, and perfcast's I.

Run from the repository root::

    python -m bench.accuracy.table1 [--quick] [--markdown]

Mi et al. (2008) (section 2, Fig. 1, Table 1) takes 20,000 service times of one hyperexponential
distribution (mean 1, SCV 3), imposes four burstiness profiles -- (a) random order, (b), (c)
large service times progressively aggregated in bursts, (d) all large ones in one burst -- and
reports the M/Trace/1 response time (mean, 95th percentile) at utilization 0.5 and 0.8 with the
index of dispersion ``I`` of each trace. The paper's traces are not available; two
constructions are used here, both with the balanced-means H2 marginal (mean 1, SCV 3: phase
probabilities ``p = (1 +- sqrt(1/2))/2``, phase means ``1/(2p)``, i.e. 85.4% of the jobs of mean
0.59 and 14.6% "large" ones of mean 3.41, which carry half the work):

* **MAP(2) traces** -- each trace is 20,000 consecutive intervals of a MAP(2) with that H2
  marginal whose phase is kept from one job to the next with probability ``gamma`` and redrawn
  from the marginal otherwise (embedded chain ``P = (1 - gamma) 1 alpha + gamma Id``), so the
  lag-k autocorrelation is ``gamma^k (SCV - 1)/(2 SCV)`` and ``I = 1 + (SCV - 1)/(1 - gamma)``
  (Mi et al. 2008, eq. (1) summed in closed form). ``gamma`` is chosen to give exactly the paper's
  ``I`` = 3.0, 22.3, 92.6, 488.7: the large jobs come in runs of about ``1/((1-gamma)(1-p))``
  = 1, 12, 54, 286 jobs.
* **Permuted traces** -- one H2 sample of 20,000 (rescaled to mean 1), its large jobs (those
  drawn from the slow phase) shuffled and cut into bursts of 1 (random order), 30, 300 jobs, or
  one burst of all of them, the bursts put at random places among the small jobs in random
  order. The same numbers in four orders, as the paper describes Fig. 1.

Each trace is served FCFS with Poisson arrivals at rate 0.5 and 0.8 (utilization of a mean-1
trace; :func:`solvers.simulation.mtrace1`); the table gives the mean and 95th percentile of the
response times, median and range over ``SEEDS`` traces (each its own sample and arrivals).
perfcast's ``I`` is :func:`estimators.dispersion.index_of_dispersion` -- the call
``streams.core.tier.TierState.refresh`` makes -- on the monitoring windows of that queue
(:func:`solvers.simulation.monitor_windows`: utilization and completions per window of
``WINDOW`` mean service times, about 10 and 16 completions per window). Because 20,000 jobs
give Fig. 2 at most ``20,000 / 100`` busy time units per run (it needs 100 disjoint runs),
a last table repeats the MAP(2) traces with 1,000,000 jobs at utilization 0.5, in windows of
200 and 1,000 (about 100 and 500 completions per window; the pipeline keeps the last 4,096).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from bench.tables import Table
from estimators.dispersion import index_of_dispersion
from solvers.processes import MAP
from solvers.simulation import QueueTrace, monitor_windows, mtrace1

SCV = 3.0
JOBS = 20_000
UTILIZATIONS = (0.5, 0.8)
WINDOW = 20.0                 # monitoring window, in mean service times
SEEDS = 10
LONG_JOBS = 1_000_000
LONG_WINDOWS = (200.0, 1000.0)
PIPELINE_HISTORY = 4096       # streams.core.config.SystemConfig.history (default)

#: Mi et al. (2008), Table 1: profile -> (mean R, p95 R at util 0.5; mean, p95 at 0.8; I)
PAPER = {"(a)": (3.02, 14.42, 8.70, 33.26, 3.0),
         "(b)": (11.00, 83.35, 43.35, 211.76, 22.3),
         "(c)": (26.69, 252.18, 72.31, 485.42, 92.6),
         "(d)": (120.49, 1132.40, 150.32, 1346.53, 488.7)}
#: bursts of large jobs in the permuted traces (None: one burst of all of them)
BURSTS = {"(a)": 1, "(b)": 30, "(c)": 300, "(d)": None}


# ------------------------------------------------------------------------------- traces
def h2_phases(scv: float = SCV) -> tuple[np.ndarray, np.ndarray]:
    """Balanced-means H2 with mean 1: phase probabilities ``alpha`` and phase means."""
    if not scv > 1:
        raise ValueError(f"scv: a hyperexponential needs SCV > 1, got {scv}")
    root = math.sqrt((scv - 1.0) / (scv + 1.0))
    alpha = np.array([(1 + root) / 2, (1 - root) / 2])
    return alpha, 1.0 / (2.0 * alpha)


def bursty_h2(idc: float, scv: float = SCV) -> MAP:
    """MAP(2) with the H2 marginal of :func:`h2_phases` and ``I = idc`` (module docstring):
    ``D0 = -diag(mu)``, ``D1 = diag(mu) P``, ``P = (1 - gamma) 1 alpha + gamma Id``."""
    if not idc >= scv:
        raise ValueError(f"idc: this family reaches I >= SCV = {scv} only, got {idc}")
    gamma = 1.0 - (scv - 1.0) / (idc - 1.0)
    alpha, means = h2_phases(scv)
    mu = 1.0 / means
    P = (1.0 - gamma) * np.outer(np.ones(2), alpha) + gamma * np.eye(2)
    return MAP(-np.diag(mu), np.diag(mu) @ P)


def map_trace(process: MAP, jobs: int, rng: np.random.Generator) -> np.ndarray:
    return process.sample(jobs, rng)


def permuted_trace(burst: int | None, jobs: int, rng: np.random.Generator,
                   scv: float = SCV) -> np.ndarray:
    """One H2 sample (rescaled to mean 1) with its large (slow-phase) jobs in bursts of
    ``burst`` (``None``: all in one burst) at random places among the small jobs."""
    alpha, means = h2_phases(scv)
    large = rng.random(jobs) < alpha[1]
    x = rng.exponential(np.where(large, means[1], means[0]))
    x /= x.mean()
    small, big = x[~large], x[large]
    rng.shuffle(small)
    rng.shuffle(big)
    n_bursts = 1 if burst is None else max(1, math.ceil(big.size / burst))
    bursts = np.array_split(big, n_bursts)
    places = np.sort(rng.integers(0, small.size + 1, size=n_bursts))
    parts, prev = [], 0
    for chunk, place in zip(bursts, places):
        parts += [small[prev:place], chunk]
        prev = place
    parts.append(small[prev:])
    return np.concatenate(parts)


# ------------------------------------------------------------------------------- measurement
@dataclass(frozen=True)
class Measured:
    """One trace served at one utilization."""

    mean: float
    p95: float
    idc: float
    idc_flag: str | None


def serve(service: np.ndarray, utilization: float, window: float, rng: np.random.Generator,
          history: int | None = None) -> Measured:
    """M/Trace/1 at ``utilization`` (arrival rate ``utilization / mean(service)``); perfcast's
    ``I`` from the queue's monitoring windows (the last ``history`` of them, if given)."""
    trace = mtrace1(utilization / float(service.mean()), service, rng)
    return measured(trace, window, history)


def measured(trace: QueueTrace, window: float, history: int | None = None) -> Measured:
    """Response-time mean and p95 of ``trace``; ``I`` from its windows of ``window``."""
    win = monitor_windows(trace, window)
    u, n = win.utilization, win.completions.sum(axis=1)
    if history is not None:
        u, n = u[-history:], n[-history:]
    est = index_of_dispersion(u, n, window)
    return Measured(float(trace.response.mean()), float(np.quantile(trace.response, 0.95)),
                    est.value, None if est.reason == "ok" else est.reason)


@dataclass(frozen=True)
class Cell:
    """Median and range over seeds of one metric."""

    values: tuple[float, ...]

    def text(self, fmt: str = ".1f") -> str:
        v = np.asarray(self.values)
        if v.size == 1:
            return format(float(v[0]), fmt)
        return (f"{format(float(np.median(v)), fmt)} ({format(float(v.min()), fmt)}–"
                f"{format(float(v.max()), fmt)})")


def measure(make: Callable[[np.random.Generator], np.ndarray], seeds: Sequence[int],
            window: float = WINDOW) -> dict[float, dict[str, Any]]:
    """Per utilization: mean, p95 and perfcast's I over the seeded traces of ``make``."""
    out: dict[float, dict[str, Any]] = {}
    runs: dict[float, list[Measured]] = {u: [] for u in UTILIZATIONS}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        service = make(rng)
        for u in UTILIZATIONS:
            runs[u].append(serve(service, u, window, rng))
    for u, ms in runs.items():
        flags = sorted({m.idc_flag for m in ms if m.idc_flag})
        out[u] = {"mean": Cell(tuple(m.mean for m in ms)), "p95": Cell(tuple(m.p95 for m in ms)),
                  "idc": Cell(tuple(m.idc for m in ms)), "flags": flags}
    return out


# ------------------------------------------------------------------------------- output
def idc_text(cell: Cell, flags: list[str]) -> str:
    return cell.text() + (f" [{', '.join(flags)}]" if flags else "")


def table(title: str, describe: dict[str, str], results: dict[str, dict[float, dict]]) -> Table:
    t = Table(title, ["trace", "built as", "I paper", "I perfcast (ρ 0.5)", "I perfcast (ρ 0.8)",
                      "mean R ρ 0.5", "paper", "p95 R ρ 0.5", "paper", "mean R ρ 0.8", "paper",
                      "p95 R ρ 0.8", "paper"])
    for name, res in results.items():
        paper = PAPER[name]
        lo, hi = res[0.5], res[0.8]
        t.add(name, describe[name], f"{paper[4]:g}", idc_text(lo["idc"], lo["flags"]),
              idc_text(hi["idc"], hi["flags"]), lo["mean"].text(), f"{paper[0]:g}",
              lo["p95"].text(), f"{paper[1]:g}", hi["mean"].text(), f"{paper[2]:g}",
              hi["p95"].text(), f"{paper[3]:g}")
    return t


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="3 seeds per trace, long traces of 200,000 jobs")
    parser.add_argument("--markdown", action="store_true", help="markdown tables")
    args = parser.parse_args(argv)
    seeds = range(1, 4 if args.quick else SEEDS + 1)
    long_jobs = 200_000 if args.quick else LONG_JOBS
    started = time.perf_counter()

    processes = {name: bursty_h2(p[4]) for name, p in PAPER.items()}
    map_results = {name: measure(lambda rng, p=proc: map_trace(p, JOBS, rng), seeds)
                   for name, proc in processes.items()}
    perm_results = {name: measure(lambda rng, b=b: permuted_trace(b, JOBS, rng), seeds)
                    for name, b in BURSTS.items()}
    long: dict[str, list[Measured]] = {}
    for i, (name, proc) in enumerate(processes.items()):
        rng = np.random.default_rng(100 + i)
        service = map_trace(proc, long_jobs, rng)
        trace = mtrace1(0.5 / float(service.mean()), service, rng)
        long[name] = [measured(trace, w, PIPELINE_HISTORY) for w in LONG_WINDOWS]

    md = args.markdown
    n_seeds = len(seeds)
    map_desc = {name: f"MAP(2), γ = {1 - (SCV - 1) / (p.idc - 1):.4f} (I = {p.idc:.1f})"
                for name, p in processes.items()}
    perm_desc = {name: ("random order" if b == 1 else "one burst" if b is None
                        else f"bursts of {b}") for name, b in BURSTS.items()}
    print(table(f"MAP(2) traces: {JOBS:,} jobs, H2 marginal (mean 1, SCV 3), I as in the "
                f"paper; median (min–max) over {n_seeds} seeds", map_desc,
                map_results).render(md))
    print(table(f"Permuted traces: one H2 sample of {JOBS:,} jobs, the large (slow-phase) "
                f"ones regrouped; median (min–max) over {n_seeds} seeds", perm_desc,
                perm_results).render(md))
    t = Table(f"perfcast's I with more data: MAP(2) traces of {long_jobs:,} jobs at ρ 0.5, "
              f"the last {PIPELINE_HISTORY} windows (the pipeline's history); one seed",
              ["trace", "I paper (= the MAP(2)'s)"]
              + [f"I perfcast, windows of {w:g}" for w in LONG_WINDOWS] + ["mean R", "p95 R"])
    for name, ms in long.items():
        t.add(name, f"{PAPER[name][4]:g}",
              *[f"{m.idc:.1f}" + (f" [{m.idc_flag}]" if m.idc_flag else "") for m in ms],
              f"{ms[0].mean:.1f}", f"{ms[0].p95:.1f}")
    print(t.render(md))
    print(f"({'--quick, ' if args.quick else ''}{time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
