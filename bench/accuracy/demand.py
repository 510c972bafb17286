"""Demand estimation under change: Kalman filter, regression and the utilization law side by side
(Rolia and Vetland (1995) and Huang et al. (2012)). Prints the tables of docs/accuracy.md section 7 and
writes docs/img/accuracy_demand.png.

    python -m bench.accuracy.demand            # full run (a few minutes on a busy core)
    python -m bench.accuracy.demand --quick    # fewer seeds and replications

Estimators, each given the windows up to and including ``k`` to estimate at window ``k``:

* ``kalman``     -- :class:`estimators.demand.KalmanDemandEstimator`, default settings, one
  update per window (Huang et al. 2012, eqs. (4)-(6)); what feeds the model today;
* ``regression`` -- NNLS over the last ``regression_windows`` (120, the pipeline's default)
  windows, refitted every window (Rolia and Vetland 1995, Fig. 6; Huang et al. (2012) section 3.3.2);
* ``util_law``   -- the utilization law without classes: ``D_c = sum U T cores / sum n`` over
  the last 12 windows, the same for every class (what a tier's mean service time gives);
* ``kalman_checked`` -- ``demand_policy = "kalman_checked"``, the pipeline's policy before this
  comparison (``streams.predict.model.identified_demands``): the
  Kalman demands, a class whose estimate disagrees with the sliding regression (refreshed as
  the pipeline refreshes it, once a quarter of its windows is new) or is too uncertain replaced
  by the mix-weighted mean;
* ``selected``   -- :func:`estimators.selection.select_estimator` over ``kalman`` and the
  regression as the pipeline refreshes it: per window the one with the lowest one-step-ahead
  utilization-prediction error over the last 60 windows (Kalman kept unless the regression is
  10% better); its demands are used as they are (no per-class fallback). Chosen from these
  tables as the pipeline's default, ``demand_policy = "selected"`` (:mod:`streams.core.tier`), which
  makes the same choice once per solve rather than every window.

Errors per window: the mean relative demand error over classes ``mean_c |x_c / D_c - 1|`` and
Rolia and Vetland's (1995) utilization-weighted ``E_rel`` (:func:`estimators.demand.relative_error`, weights
the window's completions). Workloads are generated directly (per window, Poisson completions
per class from known demands and a varying mix; busy time the sum of the completed requests'
gamma-distributed service times; unattributed CPU noise on ``U``), except the closed-network
scenario, which runs through :mod:`solvers.simulation` and its monitoring, and the Rolia and Vetland (1995)
Table 2 reproduction, which runs the exact FCFS queue of :mod:`solvers.simulation`.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

from estimators.demand import KalmanDemandEstimator, regression_demands
from estimators.selection import ESTIMATORS, select_estimator
from solvers.simulation import ClosedNetwork, Queue, fcfs_queue, monitor_closed, \
    monitor_windows
from streams.predict.model import identified_demands
from streams.core.tier import TierModel

#: TPC-W browsing / shopping / ordering mixes (percent of requests), Huang et al. (2012) section 3.2
TPCW_MIXES = np.array([
    [29.00, 11.00, 11.00, 21.00, 12.00, 11.00, 2.00, 0.82, 0.75, 0.69, 0.30, 0.25, 0.10, 0.09],
    [16.00, 5.00, 5.00, 17.00, 20.00, 17.00, 11.60, 3.00, 2.60, 1.20, 0.75, 0.66, 0.10, 0.09],
    [9.12, 0.46, 0.46, 12.35, 14.53, 13.08, 13.53, 12.86, 12.73, 10.18, 0.25, 0.22, 0.12, 0.11],
]) / 100.0
#: Rolia and Vetland (1995), Table 2: mean E_rel and its 90th percentile over 100 replications
PAPER002_TABLE2 = {
    "constant": {3: (0.0073, 0.0116), 5: (0.0203, 0.0302), 10: (0.2920, 0.4303)},
    "Normal(0.05)": {3: (0.0103, 0.0182), 5: (0.0254, 0.0366), 10: (0.2996, 0.4513)},
    "Normal(0.15)": {3: (0.0272, 0.0449), 5: (0.0502, 0.0784), 10: (0.3037, 0.4317)},
    "Normal(0.25)": {3: (0.0416, 0.0709), 5: (0.0734, 0.1129), 10: (0.3485, 0.4863)},
    "Normal(0.35)": {3: (0.0575, 0.0974), 5: (0.1026, 0.1521), 10: (0.4256, 0.5914)},
    "exponential": {3: (0.1791, 0.2940), 5: (0.2936, 0.4499), 10: (0.7071, 0.9760)},
}
REGRESSION_WINDOWS = 120          # streams.core.config.SystemConfig.regression_windows
REGRESSION_REFRESH = 30           # the pipeline refits once a quarter of them is new
UTIL_LAW_WINDOWS = 12
WARMUP = REGRESSION_WINDOWS       # errors are compared from here on (every estimator ready)
CONVERGED = 0.15                  # median E_rel of the next CONVERGED_FOR windows within 15%
CONVERGED_FOR = 10
NAMES = ("kalman", "regression", "util_law", "kalman_checked", "selected")


# ----------------------------------------------------------------------------------- workloads
@dataclass(frozen=True)
class Workload:
    """A multi-class tier seen in ``windows`` windows of ``window_s`` seconds.

    Class ``c`` completes a Poisson number of requests per window at rate ``lambda_{k,c}``:
    the class mix times a per-window factor uniform in ``1 +- mix_jitter`` (how much the mix
    varies between windows), scaled so the tier runs at ``utilization``, +-20% slow load wave.
    Its busy time is the sum of the completed requests' service times (gamma, mean ``D_{k,c}``,
    squared coefficient of variation ``scv``; 0 = constant); the measured ``U`` adds normal
    noise of sd ``u_noise`` (CPU not attributed to any class). ``change``: ``step`` (class
    ``changed`` costs ``factor`` x from window ``change_at``), ``drift`` (it grows linearly to
    ``factor`` x over ``drift_windows``), ``mix`` (the mix switches at ``change_at``)."""

    name: str
    classes: int = 5
    windows: int = 600
    window_s: float = 5.0
    utilization: float = 0.5
    mix_jitter: float = 0.3
    scv: float = 1.0
    u_noise: float = 0.0
    change: str = "none"
    change_at: int = 300
    factor: float = 1.5
    drift_windows: int = 300


@dataclass(frozen=True)
class Stream:
    """Generated windows: measured ``U``, completions ``n`` ``(K, C)``, true demands ``D``."""

    utilization: np.ndarray
    counts: np.ndarray
    demands: np.ndarray
    window_s: float
    changed: int | None

    @property
    def throughputs(self) -> np.ndarray:
        return self.counts / self.window_s


def _mixes(w: Workload, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if w.classes == 14:
        return TPCW_MIXES[0], TPCW_MIXES[2]
    return rng.dirichlet(np.full(w.classes, 2.0)), rng.dirichlet(np.full(w.classes, 2.0))


def generate(w: Workload, seed: int) -> Stream:
    """The windows of ``w`` (seeded); demands log-uniform in 2-20 ms."""
    rng = np.random.default_rng(seed)
    C, K = w.classes, w.windows
    base = np.exp(rng.uniform(np.log(2e-3), np.log(20e-3), C))
    mix0, mix1 = _mixes(w, rng)
    D = np.tile(base, (K, 1))
    share = mix0 * base
    changed = int(np.argsort(share)[-2]) if w.change in ("step", "drift") else None
    k = np.arange(K)
    if w.change == "step":
        D[w.change_at:, changed] *= w.factor
    elif w.change == "drift":
        ramp = np.clip((k - w.change_at) / w.drift_windows, 0.0, 1.0)
        D[:, changed] *= 1.0 + (w.factor - 1.0) * ramp
    mix = np.tile(mix0, (K, 1))
    if w.change == "mix":
        mix[w.change_at:] = mix1
    mix = mix * rng.uniform(1 - w.mix_jitter, 1 + w.mix_jitter, (K, C))
    load = w.utilization * (1.0 + 0.2 * np.sin(2 * np.pi * k / 240.0))
    rates = mix * (load / np.einsum("kc,kc->k", mix, D))[:, None]
    counts = rng.poisson(rates * w.window_s).astype(float)
    if w.scv > 0:
        shape = counts / w.scv
        busy = np.where(counts > 0, rng.gamma(np.maximum(shape, 1e-12), D * w.scv), 0.0)
    else:
        busy = counts * D
    U = busy.sum(axis=1) / w.window_s + rng.normal(0.0, w.u_noise, K) if w.u_noise else \
        busy.sum(axis=1) / w.window_s
    return Stream(np.clip(U, 0.0, 1.0), counts, D, w.window_s, changed)


# ---------------------------------------------------------------------------------- estimators
def kalman_path(s: Stream) -> tuple[np.ndarray, np.ndarray]:
    """Kalman estimates and their standard deviations after each window."""
    K, C = s.counts.shape
    est = KalmanDemandEstimator([f"c{i}" for i in range(C)])
    x, sd = np.empty((K, C)), np.empty((K, C))
    for k in range(K):
        x[k] = est.update(float(s.utilization[k]), s.throughputs[k])
        sd[k] = est.std
    return x, sd


def regression_path(s: Stream, every: int = 1) -> np.ndarray:
    """NNLS over the last :data:`REGRESSION_WINDOWS` windows, refitted every ``every``
    windows (NaN before ``2 C`` windows)."""
    K, C = s.counts.shape
    out = np.full((K, C), np.nan)
    last = None
    for k in range(K):
        lo = max(0, k + 1 - REGRESSION_WINDOWS)
        if k + 1 >= 2 * C and (last is None or (k - last) >= every):
            out[k] = regression_demands(s.utilization[lo:k + 1], s.throughputs[lo:k + 1]).demands
            last = k
        elif last is not None:
            out[k] = out[k - 1]
    return out


def util_law_path(s: Stream) -> np.ndarray:
    """``sum U T / sum n`` over the last :data:`UTIL_LAW_WINDOWS` windows, every class."""
    busy = np.concatenate([[0.0], np.cumsum(s.utilization * s.window_s)])
    done = np.concatenate([[0.0], np.cumsum(s.counts.sum(axis=1))])
    k = np.arange(1, len(s.utilization) + 1)
    lo = np.maximum(k - UTIL_LAW_WINDOWS, 0)
    d = np.divide(busy[k] - busy[lo], done[k] - done[lo],
                  out=np.zeros(k.size), where=done[k] > done[lo])
    return np.repeat(d[:, None], s.counts.shape[1], axis=1)


def pipeline_path(s: Stream, kal: np.ndarray, kal_sd: np.ndarray, reg: np.ndarray) -> np.ndarray:
    """``streams.predict.model.identified_demands`` on the Kalman demands and the pipeline's sliding
    regression ``reg`` (refit every :data:`REGRESSION_REFRESH` windows), over the window's
    mix."""
    K, C = s.counts.shape
    classes = [f"c{i}" for i in range(C)]
    out = np.empty((K, C))
    for k in range(K):
        n = s.counts[k]
        mix = n / n.sum() if n.sum() > 0 else np.full(C, 1.0 / C)
        tier = TierModel(tier="t", cores=1, demands=dict(zip(classes, kal[k])),
                         demand_std=dict(zip(classes, kal_sd[k])),
                         regression={} if np.isnan(reg[k]).any() else dict(zip(classes, reg[k])),
                         idc=None, idc_flag=None, mean_service=None, p95=None, process=None,
                         fit=None, bursty=False, windows=k + 1)
        out[k] = identified_demands(tier, classes, mix)
    return out


def all_paths(s: Stream) -> tuple[dict[str, np.ndarray], list[str]]:
    """Every estimator's estimate after each window, ``{name: (K, C)}``, and the estimator the
    selection chose at each window."""
    kal, sd = kalman_path(s)
    paths = {"kalman": kal, "regression": regression_path(s), "util_law": util_law_path(s)}
    # the regression as the pipeline has it: refreshed once a quarter of its windows is new
    cadence = {"kalman": kal, "regression": regression_path(s, every=REGRESSION_REFRESH)}
    paths["kalman_checked"] = pipeline_path(s, kal, sd, cadence["regression"])
    choice = select_estimator_path(s, {n: cadence[n] for n in ESTIMATORS})
    paths["selected"] = np.array([cadence[c][k] for k, c in enumerate(choice)])
    return paths, choice


def select_estimator_path(s: Stream, paths: dict[str, np.ndarray]) -> list[str]:
    """The estimator :func:`estimators.selection.select_estimator` picks at each window, from
    the windows up to it (the estimates before each window predict its utilization)."""
    choice = []
    for k in range(len(s.utilization)):
        lo = max(0, k + 1 - 60)
        previous = {n: np.vstack([np.full((1, p.shape[1]), np.nan), p[:-1]])[lo:k + 1]
                    for n, p in paths.items()}
        choice.append(select_estimator(s.utilization[lo:k + 1], s.throughputs[lo:k + 1],
                                       previous).estimator)
    return choice


# ------------------------------------------------------------------------------------- errors
def errors(path: np.ndarray, s: Stream) -> tuple[np.ndarray, np.ndarray]:
    """Per window: mean relative demand error over classes, and Rolia and Vetland's (1995) ``E_rel``
    (weights: the window's completions x true demand)."""
    D = s.demands
    rel = np.abs(path / D - 1.0).mean(axis=1)
    w = s.counts
    erel = np.einsum("kc,kc->k", np.abs(path - D), w) / np.maximum(np.einsum("kc,kc->k", D, w),
                                                                   1e-300)
    return rel, erel


def aggregate_error(path: np.ndarray, s: Stream) -> np.ndarray:
    """Per window: relative error of the mix-weighted demand ``sum_c n_c x_c / sum_c n_c D_c``
    -- what the single-class model's ``D_m`` gets (errors of opposite sign cancel)."""
    w = s.counts
    return np.abs(np.einsum("kc,kc->k", path - s.demands, w)) / np.maximum(
        np.einsum("kc,kc->k", s.demands, w), 1e-300)


def convergence(erel: np.ndarray, change_at: int) -> int | None:
    """Windows after ``change_at`` until the median ``E_rel`` of the next ``CONVERGED_FOR``
    windows is ``<= CONVERGED`` (``None``: never within the run). A median over 10 windows:
    on 5-s windows a good estimate's per-window ``E_rel`` scatters by +-5% (service-time
    noise), a run of 10 consecutive windows below a tight bound measures luck."""
    for j in range(change_at, len(erel) - CONVERGED_FOR + 1):
        if np.median(erel[j:j + CONVERGED_FOR]) <= CONVERGED:
            return j - change_at
    return None


@dataclass
class Outcome:
    rel: dict[str, list[float]]
    erel: dict[str, list[float]]
    agg: dict[str, list[float]]
    after: dict[str, list[float]]      # median E_rel over the last 100 windows
    conv: dict[str, list[int | None]]
    series: dict[str, np.ndarray]      # E_rel per window, per seed (seeds x K)
    picks: dict[str, int]


def run_workload(w: Workload, seeds: int) -> Outcome:
    out = Outcome({n: [] for n in NAMES}, {n: [] for n in NAMES}, {n: [] for n in NAMES},
                  {n: [] for n in NAMES}, {n: [] for n in NAMES}, {}, {n: 0 for n in ESTIMATORS})
    series: dict[str, list[np.ndarray]] = {n: [] for n in NAMES}
    for seed in range(seeds):
        s = generate(w, seed)
        paths, choice = all_paths(s)
        for n in NAMES:
            rel, erel = errors(paths[n], s)
            out.rel[n].append(float(np.median(rel[WARMUP:])))
            out.erel[n].append(float(np.median(erel[WARMUP:])))
            out.agg[n].append(float(np.median(aggregate_error(paths[n], s)[WARMUP:])))
            out.after[n].append(float(np.median(erel[-100:])))
            if w.change in ("step", "mix"):
                out.conv[n].append(convergence(erel, w.change_at))
            series[n].append(erel)
        for c in choice[WARMUP:]:
            out.picks[c] += 1
    out.series = {n: np.array(v) for n, v in series.items()}
    return out


def _fmt_conv(values: list[int | None], window_s: float) -> str:
    if not values:
        return "n/a"
    never = sum(v is None for v in values)
    done = [v for v in values if v is not None]
    if not done:
        return f"never ({never}/{len(values)})"
    med = float(np.median([v if v is not None else math.inf for v in values]))
    text = "never" if math.isinf(med) else f"{med:g} w = {med * window_s:g} s"
    return text + (f" ({never} never)" if never else "")


WORKLOADS = [
    Workload("stationary"),
    Workload("stationary, steady mix (+-5%)", mix_jitter=0.05),
    Workload("step: one class x1.5", change="step"),
    Workload("slow drift: one class x1.5 over 300 w", change="drift"),
    Workload("changing mix (switch)", change="mix"),
    Workload("noisy utilization (sd 0.05)", u_noise=0.05),
    Workload("3 classes", classes=3),
    Workload("14 classes (TPC-W browsing)", classes=14),
    Workload("14 classes, step", classes=14, change="step"),
    Workload("constant service (scv 0)", scv=0.0),
    Workload("short windows 1 s, step", window_s=1.0, change="step"),
    Workload("long windows 60 s, step", window_s=60.0, change="step"),
]


def table_workloads(seeds: int) -> dict[str, Outcome]:
    print(f"## Direct workloads: 5 classes, U ~ 0.5, 5-s windows, exponential service, mix "
          f"+-30% per window, 600 windows, {seeds} seeds (unless named)")
    print("median over windows >= 120 of the per-window error, then mean over seeds; conv.: "
          f"windows after the change until the median E_rel of the next {CONVERGED_FOR} windows "
          f"is <= {CONVERGED:.0%} "
          "(median over seeds)\n")
    head = "| workload | " + " | ".join(f"{n} rel / E_rel" for n in NAMES) + " |"
    print(head)
    print("|" + "---|" * (len(NAMES) + 1))
    results = {}
    for w in WORKLOADS:
        o = run_workload(w, seeds)
        results[w.name] = o
        cells = [f"{np.mean(o.rel[n]):.3f} / {np.mean(o.erel[n]):.3f}" for n in NAMES]
        print(f"| {w.name} | " + " | ".join(cells) + " |")
    print()
    print("Convergence after the change, and E_rel over the last 100 windows")
    print("| workload | " + " | ".join(NAMES) + " |")
    print("|" + "---|" * (len(NAMES) + 1))
    for w in WORKLOADS:
        if w.change == "none":
            continue
        o = results[w.name]
        cells = [f"{_fmt_conv(o.conv[n], w.window_s)}; {np.mean(o.after[n]):.3f}" for n in NAMES]
        print(f"| {w.name} | " + " | ".join(cells) + " |")
    print()
    print("Aggregate demand error (mix-weighted over the window's completions, what the "
          "single-class model's D_m gets): median over windows >= 120, mean over seeds")
    print("| workload | " + " | ".join(NAMES) + " |")
    print("|" + "---|" * (len(NAMES) + 1))
    for w in WORKLOADS:
        o = results[w.name]
        print(f"| {w.name} | " + " | ".join(f"{np.mean(o.agg[n]):.3f}" for n in NAMES) + " |")
    print()
    print("What the selection picked (share of windows >= 120, all seeds)")
    print("| workload | " + " | ".join(ESTIMATORS) + " |")
    print("|" + "---|" * (len(ESTIMATORS) + 1))
    for w in WORKLOADS:
        p = results[w.name].picks
        total = max(sum(p.values()), 1)
        print(f"| {w.name} | " + " | ".join(f"{p[n] / total:.0%}" for n in ESTIMATORS) + " |")
    print()
    return results


# ----------------------------------------------------------------------------- Rolia and Vetland (1995), Table 2
def _service(dist: str, means: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Service times of Rolia and Vetland (1995) section 5.1: constant, Normal(cv) (redrawn while <= 0) or
    exponential."""
    if dist == "constant":
        return means.copy()
    if dist == "exponential":
        return rng.exponential(means)
    cv = float(dist[len("Normal("):-1])
    out = rng.normal(means, cv * means)
    bad = out <= 0
    while bad.any():
        out[bad] = rng.normal(means[bad], cv * means[bad])
        bad = out <= 0
    return out


def paper002_replication(n: int, dist: str, seed: int, periods: int = 50,
                         period: float = 10_000.0) -> dict[str, float]:
    """One replication of Rolia and Vetland's (1995) base case (section 5.1): ``n`` services of mean
    ``3 * 1.8^e``, Poisson arrivals with rates ``~ 0.6^e`` scaled to U = 0.75, a single FCFS
    server, 50 periods of 10,000 time units; E_rel of each estimator over the run."""
    rng = np.random.default_rng(seed)
    means = 3.0 * 1.8 ** np.arange(n)
    shape = 0.6 ** np.arange(n)
    rates = shape * 0.75 / (shape @ means)
    end = periods * period
    counts = rng.poisson(rates * end)
    cls = np.repeat(np.arange(n), counts)
    arrivals = rng.uniform(0.0, end, cls.size)
    order = np.argsort(arrivals)
    arrivals, cls = arrivals[order], cls[order]
    trace = fcfs_queue(arrivals, _service(dist, means[cls], rng), cls)
    win = monitor_windows(trace, period, n, end=end)
    X = win.completions / period
    total = win.completions
    out = {"regression": _erel(regression_demands(win.utilization, X).demands, means, total),
           "ols": _erel(regression_demands(win.utilization, X, nonnegative=False).demands,
                        means, total)}
    est = KalmanDemandEstimator([f"e{i}" for i in range(n)])
    for k in range(periods):
        est.update(float(win.utilization[k]), X[k])
    out["kalman"] = _erel(est.demands, means, total)
    busy = float(win.busy_time.sum())
    out["util_law"] = _erel(np.full(n, busy / total.sum()), means, total)
    return out


def _erel(est: np.ndarray, true: np.ndarray, counts: np.ndarray) -> float:
    i = counts.sum(axis=0)
    return float(i @ np.abs(est - true) / (i @ true))


def table_paper002(reps: int) -> None:
    print(f"## Rolia and Vetland (1995), Table 2 redone: E_rel mean / 90th percentile over {reps} replications")
    print("(base case: U = 0.75, 50 periods of 10,000, service means 3 x 1.8^e, arrival rates "
          "~ 0.6^e, exponential inter-arrivals, one FCFS server)\n")
    ests = ("regression", "ols", "kalman", "util_law")
    print("| service time | classes | Rolia and Vetland (1995) | " + " | ".join(ests) + " |")
    print("|---|---|---|" + "---|" * len(ests))
    for dist, paper in PAPER002_TABLE2.items():
        for n in (3, 5, 10):
            rows = [paper002_replication(n, dist, 1000 * n + r) for r in range(reps)]
            cells = []
            for e in ests:
                v = np.array([r[e] for r in rows])
                cells.append(f"{v.mean():.4f} / {np.percentile(v, 90):.4f}")
            pm, p90 = paper[n]
            print(f"| {dist} | {n} | {pm:.4f} / {p90:.4f} | " + " | ".join(cells) + " |")
    print()


# ------------------------------------------------------------------------- through the simulator
def simulator_stream(seed: int, duration: float = 3600.0, window_s: float = 5.0) -> Stream:
    """Mi et al.'s (2008) closed two-tier system with three classes of their own users (think 0.5 s,
    exponential per-class demands), the per-class populations re-drawn every 2 minutes
    (a changing mix); the database tier's windows through :func:`monitor_closed`."""
    rng = np.random.default_rng(seed)
    db = np.array([0.003, 0.006, 0.012])
    front = np.array([0.004, 0.003, 0.005])
    base = np.array([20, 15, 8])
    schedule = [(t, tuple(int(v) for v in np.maximum(1, np.round(base * rng.uniform(0.4, 1.6, 3)))))
                for t in np.arange(120.0, duration, 120.0)]
    net = ClosedNetwork(queues=[Queue("front", list(front)), Queue("db", list(db))],
                        populations=list(base), think_times=0.5, classes=["a", "b", "c"])
    recs = monitor_closed(net, duration, window_s, schedule=schedule, seed=seed)
    rows = [r for r in recs if r["tier"] == "db"]
    U = np.array([r["utilization"] for r in rows])
    n = np.array([[r["completions"][c] for c in "abc"] for r in rows], dtype=float)
    return Stream(U, n, np.tile(db, (len(rows), 1)), window_s, None)


def table_simulator(seeds: int) -> None:
    print(f"## Through the simulator: closed 2-tier network, 3 classes, db tier, 5-s windows, "
          f"1 h, per-class populations re-drawn every 2 min, {seeds} seeds\n")
    print("| estimator | mean rel. error | E_rel | E_rel p90 over windows |")
    print("|---|---|---|---|")
    acc: dict[str, list[tuple[float, float, float]]] = {n: [] for n in NAMES}
    for seed in range(seeds):
        s = simulator_stream(seed)
        paths, _ = all_paths(s)
        for n in NAMES:
            rel, erel = errors(paths[n], s)
            acc[n].append((float(np.median(rel[WARMUP:])), float(np.median(erel[WARMUP:])),
                           float(np.percentile(erel[WARMUP:], 90))))
    for n in NAMES:
        a = np.array(acc[n]).mean(axis=0)
        print(f"| {n} | {a[0]:.3f} | {a[1]:.3f} | {a[2]:.3f} |")
    print()


# -------------------------------------------------------------------------------------- plot
def plot_step(results: dict[str, Outcome], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for ax, name in zip(axes, ("step: one class x1.5", "14 classes, step")):
        o = results[name]
        w = next(w for w in WORKLOADS if w.name == name)
        t = np.arange(w.windows)
        for n, style in zip(NAMES, ("-", "--", ":", "-.", "-")):
            med = np.median(o.series[n], axis=0)
            ax.plot(t, med, style, label=n, lw=1.6 if n in ("kalman", "selected") else 1.1)
        ax.axvline(w.change_at, color="k", lw=0.8)
        ax.axhline(CONVERGED, color="grey", lw=0.6, ls=":")
        ax.set_yscale("log")
        ax.set_xlim(0, w.windows)
        ax.set_title(f"{name} ({w.classes} classes, {w.window_s:g}-s windows)")
        ax.set_xlabel("window")
    axes[0].set_ylabel("E_rel (Rolia and Vetland 1995), median over seeds")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer seeds and replications")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    seeds, reps, sim = (3, 20, 1) if args.quick else (10, 100, 3)
    t0 = time.perf_counter()
    results = table_workloads(seeds)
    table_paper002(reps)
    table_simulator(sim)
    if not args.no_plot:
        plot_step(results, ROOT / "docs" / "img" / "accuracy_demand.png")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
