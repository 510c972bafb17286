"""Real traces as a benchmark: perfcast's per-class demands on measured data, beside LibReDE's.

Reads the measured traces of `../shared/data/real/` (their README: LibReDE / SARDE, Spinner et
al.; Grohmann et al., ACM TAAS, doi 10.1145/3463369; data from jo102tz/LibReDE-SARDE-data
@79ba962 and jo102tz/LibReDE-SARDE @f0d41e0, EPL-1.0) -- never copied into the project. The
folder is ``$PERFCAST_REAL_DATA`` or ``../shared/data/real`` next to the repository; when it is
missing the script says so and skips (exit 0), or fails (exit 2) under ``CI=true``.

    python -m bench.accuracy.real_traces             # the 5 SARDE runs, all 210 micro-benchmarks
    python -m bench.accuracy.real_traces --sarde     # only the 5 runs that carry LibReDE's outputs
    python -m bench.accuracy.real_traces --markdown  # tables as markdown (docs/accuracy.md)
    python -m bench.accuracy.real_traces --mainstream --markdown   # only the mainstream table

What it does, per window length ``T`` in 5, 10, 30 s:

1. each 1-s micro-benchmark series (CPU utilization, completions per class, mean response time
   per class; the first, partial, second dropped) becomes the input contract's windows: ``T``
   consecutive complete seconds, ``utilization`` their mean, ``completions`` their sums,
   ``response_time_s`` the completion-weighted mean, ``cores = 1`` (the README does not state
   the cores; the response times of the lightly loaded runs, ``R ~ D / (1 - U)`` with ``D =
   U / X``, fit one server and not two); every record goes through
   :func:`streams.core.records.parse_window`;
2. the windows go through the pipeline's tier code (:class:`streams.core.tier.TierState`:
   ``admit``/``accept``, :func:`streams.core.tier.step_tiers` -- the Kalman filters of all runs
   stepped together, Huang et al. (2012) -- then ``take_interval`` and ``refresh``: the sliding NNLS
   regression over the last ``regression_windows`` = 120 windows, Rolia and Vetland (1995), and the per-class
   separability flags of :mod:`estimators.collinearity`);
3. over the whole run: NNLS regression (:func:`estimators.demand.regression_demands`) and
   :func:`estimators.collinearity.assess_separability` (least squares with standard errors,
   VIF, condition number, disagreement with the Kalman filter; the response-time split).

Reported: perfcast's demands beside LibReDE's estimators on the 5 SARDE runs -- first against
the median of LibReDE's five mainstream estimators (:data:`MAINSTREAM`, which agree within
about 20% on r0, r1, r3 and r4; the span of all nine is 5x wide on r4), then with the check
"within the span of LibReDE's run-level answers +-10%" and the class flags; the utilization
law's residual; predicted vs measured response time per run; how the answers move with the
window length; a table over the 210 micro-benchmark traces of the per-class disagreement with
the *utilization-law consensus* -- the service demand law split by response times,
``D_c = U_bar R_c / sum_j X_bar_j R_j`` (Brosig et al. 2009; LibReDE's ``ServiceDemandLaw``,
which this reproduces on the SARDE runs -- the script prints the check).

Response-time model: the micro-benchmark is closed, but neither its populations nor its think
times are published, so the single-tier model is the open one at the measured throughputs
(:func:`solvers.open.solve_open`, one processor-sharing server: ``R_c = D_c / (1 - U)``), an
upper bound for the closed system at the same throughput; on the 5 SARDE runs, whose per-request
arrival and completion times give the number of requests in the system at every instant, the
closed model (:func:`solvers.mva.mva`) is solved too, with the population ``N`` and the ratio
``D / Z`` fitted to that distribution (for one exponential server with ``N`` users,
``P(n + 1) / P(n) = (N - n) D / Z``: a straight line in ``n``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.tables import Table
from estimators.collinearity import (Separability, assess_separability,
                                     response_time_split)
from estimators.demand import regression_demands
from solvers.mva import mva
from solvers.open import solve_open
from streams.core.config import SystemConfig
from streams.core.records import parse_window
from streams.core.tier import TierState, step_tiers

ENV = "PERFCAST_REAL_DATA"
WINDOWS = (5, 10, 30)
#: the runs that carry LibReDE's outputs, as the data README names them
SARDE_RUNS = {"r0": "validation/r0", "r1": "training/r1", "r2": "training/r2",
              "r3": "training/r3", "r4": "training/r4"}
#: the runs on which LibReDE's estimators agree; r2 is collinear
AGREEING = ("r0", "r1", "r3", "r4")
#: LibReDE's estimators with a run-level answer (``ResponseTimeApproximation`` gives one value
#: per request, mostly 0, no run-level answer: left out)
LIBREDE = ("ServiceDemandLaw", "LinearRegression", "KalmanFilter", "Bayes",
           "KraftRegressionFCFS", "KraftRegressionPS", "LiuOptimization",
           "MenasceOptimization", "PerezMLPS")
#: perfcast's answers compared: the Kalman filter at the end of the run (what the pipeline
#: reports), the pipeline's sliding regression (last 120 windows), NNLS over the run, and the
#: collinearity module's recommended demands (least squares where separable, else the
#: response-time split)
PERFCAST = ("kalman", "regression120", "nnls_run", "recommended")
TOLERANCE = 0.10
#: LibReDE's mainstream estimators: their median is the reference on the agreeing runs
MAINSTREAM = ("LinearRegression", "KalmanFilter", "ServiceDemandLaw", "Bayes",
              "KraftRegressionFCFS")
#: perfcast's per-class demands against the mainstream median on the agreeing runs
MAINSTREAM_TOLERANCE = 0.15


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def data_root() -> Path | None:
    """``$PERFCAST_REAL_DATA``, else ``../shared/data/real`` beside the repository; ``None``
    when that folder does not exist."""
    env = os.environ.get(ENV)
    root = Path(env) if env else repo_root().parent / "shared" / "data" / "real"
    return root if root.is_dir() else None


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------

def read_series(path: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A LibReDE CSV (``;``-separated, header ``Timestamp;...``): column names, timestamps (as
    written: ms, or 0 for a run-level answer) and values ``(rows, columns)``."""
    with open(path) as fh:
        header = fh.readline().strip().split(";")
        if not header or header[0] != "Timestamp":
            raise ValueError(f"{path}: header must start with 'Timestamp', got {header!r}")
    data = np.loadtxt(path, delimiter=";", skiprows=1, ndmin=2)
    if data.shape[1] != len(header):
        raise ValueError(f"{path}: {data.shape[1]} columns, header names {len(header)}")
    return header[1:], data[:, 0], data[:, 1:]


@dataclass
class Run:
    """One 1-s micro-benchmark trace: per second ``U`` (0..1), completions ``counts`` and mean
    response times ``rt`` (NaN: none) per class."""

    name: str
    path: Path
    classes: list[str]
    end_s: np.ndarray
    U: np.ndarray
    counts: np.ndarray
    rt: np.ndarray
    load: int | None = None
    exp: int | None = None
    results: dict[int, dict[str, Any]] = field(default_factory=dict)


def load_run(path: Path, name: str, load: int | None = None, exp: int | None = None) -> Run:
    """The three series of a run aligned on their timestamps; the first second (a partial
    interval: fractional completions) dropped."""
    _, tu, u = read_series(path / "host1_CPU_UTILIZATION.csv")
    classes, tx, x = read_series(path / "experiment1_THROUGHPUT.csv")
    rclasses, tr, r = read_series(path / "experiment1_AVERAGE_RESPONSE_TIME.csv")
    if rclasses != classes:
        raise ValueError(f"{path}: response-time classes {rclasses} != throughput {classes}")
    common = np.intersect1d(np.intersect1d(tu, tx), tr)[1:]
    iu, ix, ir = (np.searchsorted(t, common) for t in (tu, tx, tr))
    counts = x[ix]
    rt = np.where(counts > 0, r[ir], np.nan)
    U = u[iu, 0]
    if not (np.isfinite(U).all() and (U >= 0).all()):
        raise ValueError(f"{path}: utilization has non-finite or negative entries")
    return Run(name, path, classes, common / 1000.0, U, counts, rt, load, exp)


def microbench_runs(root: Path) -> list[Run]:
    """All ``util_{20,50,80}/exp_{1..14}/r{0..4}`` runs of ``librede_microbench_1s``."""
    runs = []
    base = root / "librede_microbench_1s"
    for load_dir in sorted(base.glob("util_*")):
        load = int(load_dir.name.split("_")[1])
        for exp_dir in sorted(load_dir.glob("exp_*"), key=lambda p: int(p.name.split("_")[1])):
            exp = int(exp_dir.name.split("_")[1])
            for r in sorted(exp_dir.glob("r*")):
                runs.append(load_run(r, f"u{load}/e{exp}/{r.name}", load, exp))
    return runs


def sarde_runs(root: Path) -> list[Run]:
    return [load_run(root / "sarde_microbench_1s" / sub, name)
            for name, sub in SARDE_RUNS.items()]


def librede_answers(run: Run) -> dict[str, np.ndarray]:
    """LibReDE's run-level answer per estimator: the last row of a time series (the estimate at
    the end of the run), the mean of PerezMLPS's rows, the single row of the others."""
    out = {}
    for est in LIBREDE:
        hits = list(run.path.glob(f"*_{est}_ESTIMATED_RESOURCE_DEMAND.csv"))
        if not hits:
            continue
        classes, _, values = read_series(hits[0])
        if classes != run.classes:
            raise ValueError(f"{hits[0]}: classes {classes} != {run.classes}")
        out[est] = values.mean(axis=0) if est == "PerezMLPS" else values[-1]
    return out


def mainstream_median(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """Per class, the median of the :data:`MAINSTREAM` estimators' run-level answers, and their
    spread ``max / min - 1``."""
    lib = librede_answers(run)
    values = np.array([lib[e] for e in MAINSTREAM])
    return np.median(values, axis=0), values.max(axis=0) / values.min(axis=0) - 1


# --------------------------------------------------------------------------------------------
# windows of the input contract
# --------------------------------------------------------------------------------------------

def window_records(run: Run, window_s: int) -> list[dict[str, Any]]:
    """The run as input-contract records of ``window_s`` complete seconds each."""
    t0 = run.end_s[0] - 1.0
    bins = np.floor((run.end_s - t0 - 1e-6) / window_s).astype(int)
    full = np.bincount(bins) == window_s
    records = []
    for b in np.flatnonzero(full):
        rows = bins == b
        n = run.counts[rows]
        done = n.sum(axis=0)
        weighted = np.nansum(np.where(n > 0, run.rt[rows] * n, 0.0), axis=0)
        rec = {"system": "librede", "tier": "host1",
               "end": float(t0 + (b + 1) * window_s), "window_s": float(window_s),
               "utilization": float(run.U[rows].mean()), "cores": 1,
               "completions": {c: float(k) for c, k in zip(run.classes, done)}}
        rts = {c: float(w / k) for c, w, k in zip(run.classes, weighted, done) if k > 0}
        if rts:
            rec["response_time_s"] = rts
        records.append(rec)
    return records


@dataclass
class Windows:
    U: np.ndarray
    X: np.ndarray           # throughputs (1/s)
    R: np.ndarray           # mean response times, NaN: none
    counts: np.ndarray


def run_pipeline(runs: list[Run], window_s: int) -> None:
    """Every run's windows through the pipeline's tier code and the run-level estimators;
    results in ``run.results[window_s]``."""
    cfg = SystemConfig()
    tiers, per_run = [], []
    for run in runs:
        windows = [parse_window(r) for r in window_records(run, window_s)]
        tier = TierState("host1", cfg)
        out: list = []
        for i, w in enumerate(windows):
            reason, late, _ = tier.admit(w)
            if reason is not None:
                raise RuntimeError(f"{run.name}: window {w.end} refused: {reason}")
            tier.accept(w, late, i, out)
        tiers.append(tier)
        classes = run.classes
        per_run.append(Windows(
            U=np.array([w.utilization for w in windows]),
            X=np.array([[w.completions.get(c, 0.0) / w.window_s for c in classes]
                        for w in windows]),
            R=np.array([[w.response_time_s.get(c, math.nan) for c in classes]
                        for w in windows]),
            counts=np.array([[w.completions.get(c, 0.0) for c in classes] for w in windows])))
    estimates = [e for _, e in step_tiers(tiers)]      # tier by tier, window by window
    starts = np.cumsum([0] + [len(w.U) for w in per_run])
    for r, (run, tier, win) in enumerate(zip(runs, tiers, per_run)):
        tier.take_interval()                          # the per-class response-time means
        model = tier.refresh(fit_map=False)
        classes = run.classes
        order = [tier.classes.index(c) for c in classes]
        kalman = np.array([model.demands[c] for c in classes])
        kalman_sd = np.array([model.demand_std[c] for c in classes])
        reg120 = np.array([model.regression.get(c, math.nan) for c in classes])
        nnls = regression_demands(win.U, win.X).demands
        sep = assess_separability(win.U, win.X, classes=classes, response_times=win.R,
                                  others={"kalman": kalman, "nnls": nnls},
                                  others_std={"kalman": kalman_sd})
        answers = {"kalman": kalman, "regression120": reg120, "nnls_run": nnls,
                   "recommended": sep.recommended, "ols_run": sep.demands}
        run.results[window_s] = {
            "answers": answers, "kalman_sd": kalman_sd, "sep": sep,
            "tier_flags": {c: tier.separability.get(c) for c in classes},
            "sdl": response_time_split(win.U, win.X, win.R),
            "residual": {k: _residual(win, v) for k, v in answers.items()},
            "windows": len(win.U), "order": order, "win": win, "estimator": model.estimator,
            "kalman_path": np.array([[e.demands.get(c, math.nan) for c in classes]
                                     for e in estimates[starts[r]:starts[r + 1]]]),
        }


def _residual(win: Windows, demands: np.ndarray) -> tuple[float, float]:
    """The utilization law's residual over the run's windows: bias ``mean(z - X D) / mean z``
    and relative RMS ``sqrt(mean (z - X D)^2) / mean z``, ``z = U`` (one core)."""
    if not np.isfinite(demands).all():
        return math.nan, math.nan
    r = win.U - win.X @ demands
    mean = float(win.U.mean())
    return float(r.mean()) / mean, math.sqrt(float(r @ r) / r.size) / mean


# --------------------------------------------------------------------------------------------
# response-time models
# --------------------------------------------------------------------------------------------

def measured_response(run: Run) -> np.ndarray:
    """Completion-weighted mean response time per class over the run (s)."""
    n = run.counts
    w = np.where(n > 0, np.nan_to_num(run.rt) * n, 0.0).sum(axis=0)
    return w / np.maximum(n.sum(axis=0), 1e-300)


def open_prediction(run: Run, demands: np.ndarray) -> np.ndarray:
    """Per-class response time of one PS server at the measured throughputs (open model)."""
    lam = run.counts.sum(axis=0) / run.counts.shape[0]
    res = solve_open(lam, np.maximum(demands, 0.0)[None, :])
    return np.asarray(res.response_time)


def population_fit(run: Run) -> tuple[int, float] | None:
    """``(N, D / Z)`` of a closed single-server system fitted to the time-average distribution
    of the number of requests in the system, from the per-request arrival and completion times
    of a SARDE run: ``P(n + 1) / P(n) = (N - n) rho`` (finite-source M/M/1, any service order
    that keeps product form), fitted by weighted least squares over the ``n`` with at least 1%
    of the time; ``None`` without per-request files."""
    events = []
    for c in run.classes:
        f = run.path / f"experiment1_{c}_ARRIVAL_TIMES.csv"
        if not f.exists():
            return None
        _, done_ms, arrived = read_series(f)
        done = done_ms / 1000.0
        arrived = arrived[:, 0]
        ok = done >= arrived
        events.append(np.concatenate([np.stack([arrived[ok], np.ones(ok.sum())], 1),
                                      np.stack([done[ok], -np.ones(ok.sum())], 1)]))
    ev = np.concatenate(events)
    ev = ev[np.lexsort((-ev[:, 1], ev[:, 0]))]
    n = np.cumsum(ev[:, 1])
    dt = np.diff(ev[:, 0])
    level = n[:-1].astype(int)
    lo = max(int(level.min()), 0)
    level = level - lo if lo < 0 else level
    time_at = np.bincount(np.maximum(level, 0), weights=dt)
    p = time_at / time_at.sum()
    ks = np.flatnonzero((p[:-1] > 0.01) & (p[1:] > 0.01))
    if ks.size < 2:
        return None
    ratio = p[ks + 1] / p[ks]
    w = np.sqrt(p[ks + 1])
    A = np.stack([np.ones(ks.size), -ks.astype(float)], 1) * w[:, None]
    (a, rho), *_ = np.linalg.lstsq(A, ratio * w, rcond=None)
    if not (rho > 0 and a > 0):
        return None
    return max(int(round(a / rho)), 1), float(rho)


def closed_prediction(run: Run, demands: np.ndarray, fit: tuple[int, float]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Per-class response times and throughputs of the closed model (:func:`solvers.mva.mva`):
    ``N`` users split over the classes by their measured throughput shares, think time
    ``Z = D_bar / rho`` with ``D_bar`` the throughput-weighted mean demand."""
    N, rho = fit
    x = run.counts.sum(axis=0)
    share = x / x.sum()
    pops = np.maximum(np.round(N * share).astype(int), 1)
    d = np.maximum(demands, 1e-9)
    z = float(share @ d) / rho
    res = mva(d[None, :], pops, z)
    return np.asarray(res.response_time), np.asarray(res.throughput)


# --------------------------------------------------------------------------------------------
# reports
# --------------------------------------------------------------------------------------------

def _fmt(v: float, digits: int = 4) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def _pct(v: float) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{100 * v:+.0f}%"


def span_check(value: float, answers: list[float]) -> tuple[bool, float]:
    """Is ``value`` within ``[min, max]`` of ``answers`` widened by 10%; how far outside (a
    fraction of the nearer bound, 0 inside)."""
    lo, hi = min(answers) * (1 - TOLERANCE), max(answers) * (1 + TOLERANCE)
    if lo <= value <= hi:
        return True, 0.0
    bound = lo if value < lo else hi
    return False, abs(value - bound) / max(abs(bound), 1e-12)


def report_sarde(runs: list[Run], markdown: bool) -> dict[str, Any]:
    summary: dict[str, Any] = {"span": {}, "median": {}}
    sdl_check = Table("the utilization-law consensus as computed here (1-s windows) vs "
                      "LibReDE's ServiceDemandLaw (last row)",
                      ["run", "class", "here", "LibReDE", "diff"])
    for run in runs:
        lib = librede_answers(run)
        one = Windows(run.U, run.counts, run.rt, run.counts)
        here = response_time_split(one.U, one.X, one.R)
        for i, c in enumerate(run.classes):
            ref = lib["ServiceDemandLaw"][i]
            sdl_check.add(run.name, c, _fmt(here[i]), _fmt(ref), _pct(here[i] / ref - 1))
    print(sdl_check.render(markdown))

    for T in WINDOWS:
        t = Table(f"SARDE runs, {T}-s windows: per-class demands (s) -- LibReDE's estimators "
                  f"(span and median of {len(LIBREDE)} run-level answers) beside perfcast",
                  ["run", "class", "LibReDE min", "LibReDE median", "LibReDE max",
                   "kalman", "regression120", "nnls_run", "recommended",
                   "in span ±10% (k/r120/nnls/rec)", "flag (run)", "rel. se", "VIF",
                   "flag (tier, 120 windows)"])
        for run in runs:
            lib = librede_answers(run)
            res = run.results[T]
            sep: Separability = res["sep"]
            rel = sep.relative_std_error
            for i, c in enumerate(run.classes):
                answers = [float(v[i]) for v in lib.values()]
                marks = []
                for name in PERFCAST:
                    ok, _ = span_check(float(res["answers"][name][i]), answers)
                    marks.append("y" if ok else "n")
                    summary["span"].setdefault((T, name, run.name in AGREEING), []).append(ok)
                    med = float(np.median(answers))
                    summary["median"].setdefault((T, name, run.name in AGREEING), []).append(
                        abs(float(res["answers"][name][i]) / med - 1))
                tier_flag = res["tier_flags"].get(c) or {}
                t.add(run.name, c, _fmt(min(answers)), _fmt(float(np.median(answers))),
                      _fmt(max(answers)),
                      *(_fmt(float(res["answers"][n][i])) for n in PERFCAST),
                      "/".join(marks), sep.reasons[i] or "separable", _fmt(rel[i], 3),
                      _fmt(sep.vif[i], 1),
                      (tier_flag.get("reason") or "separable") if tier_flag else "–")
        print(t.render(markdown))

    cond = Table("SARDE runs: condition number of the equilibrated completions design, by "
                 "window length", ["run", "classes", *(f"{T} s" for T in WINDOWS)])
    for run in runs:
        cond.add(run.name, len(run.classes),
                 *(_fmt(run.results[T]["sep"].condition_number, 1) for T in WINDOWS))
    print(cond.render(markdown))

    resid = Table("SARDE runs: the utilization law's residual over the run's windows, bias / "
                  "relative RMS of U - sum_c X_c D_c", ["run", "T (s)",
                                                         *PERFCAST, "LibReDE SDL", "LibReDE LR"])
    for run in runs:
        lib = librede_answers(run)
        for T in WINDOWS:
            res = run.results[T]
            cells = [f"{_pct(b)} / {_fmt(100 * r, 1)}%" for b, r in
                     (res["residual"][n] for n in PERFCAST)]
            for est in ("ServiceDemandLaw", "LinearRegression"):
                b, r = _residual(res["win"], lib[est])
                cells.append(f"{_pct(b)} / {_fmt(100 * r, 1)}%")
            resid.add(run.name, T, *cells)
    print(resid.render(markdown))

    rt = Table("SARDE runs: response time per class, measured vs the single-tier models "
               "(demands: perfcast's recommended at 30-s windows); open = one PS server at "
               "the measured throughputs; closed = MVA with N and D/Z fitted to the measured "
               "number-in-system distribution",
               ["run", "class", "measured R (s)", "open R", "open err", "closed N", "closed R",
                "closed err", "closed X err"])
    summary["rt"] = []
    for run in runs:
        d = run.results[30]["answers"]["recommended"]
        meas = measured_response(run)
        op = open_prediction(run, d)
        fit = population_fit(run)
        cl, cx = closed_prediction(run, d, fit) if fit else (None, None)
        xm = run.counts.sum(axis=0) / run.counts.shape[0]
        for i, c in enumerate(run.classes):
            summary["rt"].append((run.name, c, op[i] / meas[i] - 1,
                                  None if cl is None else cl[i] / meas[i] - 1))
            rt.add(run.name, c, _fmt(meas[i]), _fmt(op[i]), _pct(op[i] / meas[i] - 1),
                   fit[0] if fit else "–", _fmt(cl[i]) if cl is not None else "–",
                   _pct(cl[i] / meas[i] - 1) if cl is not None else "–",
                   _pct(cx[i] / xm[i] - 1) if cx is not None else "–")
    print(rt.render(markdown))

    acc = Table("SARDE runs: acceptance -- classes within LibReDE's span ±10%, and the median "
                "|relative difference| from LibReDE's median answer (median / worst class)",
                ["runs", "T (s)", *(f"{n}: in span" for n in PERFCAST),
                 *(f"{n}: med. diff" for n in PERFCAST)])
    for agreeing, label in ((True, "r0, r1, r3, r4"), (False, "r2")):
        for T in WINDOWS:
            spans = [summary["span"][(T, n, agreeing)] for n in PERFCAST]
            meds = [summary["median"][(T, n, agreeing)] for n in PERFCAST]
            acc.add(label, T, *(f"{sum(s)}/{len(s)}" for s in spans),
                    *(f"{100 * float(np.median(m)):.0f}% / {100 * max(m):.0f}%" for m in meds))
    print(acc.render(markdown))
    return summary


def report_mainstream(runs: list[Run], markdown: bool) -> None:
    """Per run and class, perfcast's demands against the median of LibReDE's mainstream
    estimators: the Kalman filter at the end of the run (the pipeline's selected estimator on
    these runs) and the share of the second half's windows after which it was within
    :data:`MAINSTREAM_TOLERANCE`, the recommended demands and NNLS over the run, at every
    window length."""
    t = Table("SARDE runs: per-class demands against the median of LibReDE's mainstream "
              f"estimators ({', '.join(MAINSTREAM)}); perfcast's difference at 5 / 10 / 30-s "
              "windows", ["run", "class", "mainstream median (s)", "their spread",
                          "kalman (pipeline)", "kalman: 2nd half within 15%", "recommended",
                          "NNLS over the run"])
    for run in runs:
        med, spread = mainstream_median(run)
        for i, c in enumerate(run.classes):
            cells = [" / ".join(_pct(float(run.results[T]["answers"][n][i]) / med[i] - 1)
                                for T in WINDOWS) for n in ("kalman", "recommended", "nnls_run")]
            share = []
            for T in WINDOWS:
                path = run.results[T]["kalman_path"][:, i]
                half = path[len(path) // 2:] / med[i] - 1
                share.append(f"{100 * np.mean(np.abs(half) <= MAINSTREAM_TOLERANCE):.0f}%")
            t.add(run.name, c, _fmt(float(med[i])), f"{100 * spread[i]:.0f}%", cells[0],
                  " / ".join(share), *cells[1:])
    print(t.render(markdown))


def report_microbench(runs: list[Run], markdown: bool) -> None:
    """Per-class disagreement with the utilization-law consensus, by load and class count."""
    groups: dict[tuple[int, int, int, str], list[float]] = {}
    flagged: dict[tuple[int, int, int], list[bool]] = {}
    for run in runs:
        one = Windows(run.U, run.counts, run.rt, run.counts)
        consensus = response_time_split(one.U, one.X, one.R)
        p = len(run.classes)
        for T in WINDOWS:
            res = run.results[T]
            for name in PERFCAST:
                d = res["answers"][name]
                for i in range(p):
                    groups.setdefault((run.load, p, T, name), []).append(
                        abs(float(d[i]) / float(consensus[i]) - 1))
            flagged.setdefault((run.load, p, T), []).extend(
                (~res["sep"].separable).tolist())
    for T in WINDOWS:
        t = Table(f"210 micro-benchmark traces, {T}-s windows: per-class |relative "
                  f"difference| from the utilization-law consensus, median / worst",
                  ["load", "classes", "traces", *PERFCAST, "classes flagged (run)"])
        for load in (20, 50, 80):
            for p in (1, 2, 3):
                key = (load, p, T, "kalman")
                if key not in groups:
                    continue
                traces = len(groups[key]) // p
                cells = []
                for name in PERFCAST:
                    v = np.array(groups[(load, p, T, name)])
                    worst = 100 * v.max()
                    cells.append(f"{100 * np.median(v):.1f}% / "
                                 f"{worst:.{1 if worst < 10 else 0}f}%")
                f = flagged[(load, p, T)]
                t.add(f"{load}%", p, traces, *cells, f"{sum(f)}/{len(f)}")
        print(t.render(markdown))
    tell = Table("210 traces, multi-class: do the flags tell? |relative difference| from the "
                 "consensus of classes the run-level assessment calls separable vs flagged, "
                 "median / 90th percentile / worst",
                 ["T (s)", "estimator", "separable: classes", "separable", "flagged: classes",
                  "flagged"])
    for T in WINDOWS:
        for name in ("kalman", "nnls_run"):
            split: dict[bool, list[float]] = {True: [], False: []}
            for run in runs:
                if len(run.classes) < 2:
                    continue
                one = Windows(run.U, run.counts, run.rt, run.counts)
                consensus = response_time_split(one.U, one.X, one.R)
                res = run.results[T]
                for i, ok in enumerate(res["sep"].separable.tolist()):
                    split[ok].append(abs(float(res["answers"][name][i]) / consensus[i] - 1))
            cells = []
            for ok in (True, False):
                v = np.array(split[ok])
                cells += [len(v), "–" if not v.size else
                          f"{100 * np.median(v):.1f}% / {100 * np.quantile(v, 0.9):.0f}% / "
                          f"{100 * v.max():.0f}%"]
            tell.add(T, name, *cells)
    print(tell.render(markdown))
    open_t = Table("210 traces: response time per class, the open single-server model (PS, "
                   "measured throughputs, recommended demands at 30-s windows) vs measured, "
                   "relative error median / worst (no populations: the closed model cannot be "
                   "set up)", ["load", "classes", "traces", "open model error",
                               "measured R (s), median"])
    errs: dict[tuple[int, int], list[float]] = {}
    meas_r: dict[tuple[int, int], list[float]] = {}
    for run in runs:
        d = run.results[30]["answers"]["recommended"]
        meas = measured_response(run)
        pred = open_prediction(run, d)
        key = (run.load, len(run.classes))
        errs.setdefault(key, []).extend((pred / meas - 1).tolist())
        meas_r.setdefault(key, []).extend(meas.tolist())
    for key in sorted(errs):
        v = np.array(errs[key])
        open_t.add(f"{key[0]}%", key[1], len(v) // key[1],
                   f"{100 * np.median(v):+.0f}% / {100 * v[np.argmax(np.abs(v))]:+.0f}%",
                   _fmt(float(np.median(meas_r[key]))))
    print(open_t.render(markdown))
    move = Table("210 traces: how the answers move with the window length -- median over "
                 "classes of |D(T) / D(30 s) - 1|", ["estimator", "5 s vs 30 s", "10 s vs 30 s"])
    for name in PERFCAST:
        cells = []
        for T in (5, 10):
            v = [abs(float(a) / float(b) - 1) for run in runs
                 for a, b in zip(run.results[T]["answers"][name],
                                 run.results[30]["answers"][name]) if b > 0]
            cells.append(f"{100 * np.median(v):.1f}%")
        move.add(name, *cells)
    print(move.render(markdown))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sarde", action="store_true", help="only the 5 SARDE runs")
    ap.add_argument("--markdown", action="store_true", help="markdown tables")
    ap.add_argument("--mainstream", action="store_true",
                    help="only the table against the mainstream median (the agreeing runs)")
    args = ap.parse_args(argv)
    root = data_root()
    if root is None:
        ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
        print(f"real traces not found: set {ENV} or place them at ../shared/data/real"
              f"{' (CI: failing)' if ci else ' -- skipped'}", file=sys.stderr)
        return 2 if ci else 0
    started = time.perf_counter()
    sarde = sarde_runs(root)
    for T in WINDOWS:
        run_pipeline(sarde, T)
    if args.mainstream:
        report_mainstream([r for r in sarde if r.name in AGREEING], args.markdown)
        print(f"({time.perf_counter() - started:.0f} s)")
        return 0
    report_mainstream([r for r in sarde if r.name in AGREEING], args.markdown)
    report_sarde(sarde, args.markdown)
    if not args.sarde:
        micro = microbench_runs(root)
        print(f"{len(micro)} micro-benchmark traces read")
        for T in WINDOWS:
            run_pipeline(micro, T)
        report_microbench(micro, args.markdown)
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
