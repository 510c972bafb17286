"""A simulated tier, streamed window by window through the estimators (embedded, no services).

This is the per-window logic the pipeline will run per tier, in its plainest form:
``DispersionTracker`` (paper 000 Fig. 2) and ``KalmanDemandEstimator`` (paper 004 eqs. (4)-(6))
updated per window, regression (paper 002 Fig. 6) as a second opinion, and a MAP(2) fit
(paper 000 section 4.1) from mean, ``I`` and the busy-time p95.

The simulated tier is one FCFS CPU serving several request classes: class ``c`` costs
``D_c * Z_i`` CPU-seconds, where ``Z_i`` is drawn in order from a unit-mean MAP(2) (bursty
service) so that per-class demands and burstiness are both known ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from estimators.demand import KalmanDemandEstimator, regression_demands
from estimators.dispersion import DispersionTracker
from estimators.mapfit import fit_map2, service_p95
from solvers.processes import MAP
from solvers.simulation import Windows, fcfs_queue, monitor_windows

__all__ = ["TierScenario", "TierSnapshot", "bursty_unit_map", "simulate_tier", "stream_tier"]


def bursty_unit_map(idc_target: float = 20.0) -> MAP:
    """A unit-mean MAP(2) with fast/slow phases switching rarely; its ``idc`` grows with the
    phase holding times (scaled so that the asymptotic index of dispersion is near the target)."""
    # phase 0: fast service (rate 2), phase 1: slow service (rate 0.25); switching rate s
    def build(s: float) -> MAP:
        d0 = np.array([[-2.0 - s, s], [s, -0.25 - s]])
        d1 = np.diag([2.0, 0.25])
        return MAP(d0, d1).scaled(1.0)

    lo, hi = 1e-5, 10.0
    for _ in range(80):  # bisection on log(s): idc decreases as switching speeds up
        mid = (lo * hi) ** 0.5
        if build(mid).idc > idc_target:
            lo = mid
        else:
            hi = mid
    return build((lo * hi) ** 0.5)


@dataclass(frozen=True)
class TierScenario:
    """Ground truth of the simulated tier."""

    classes: tuple[str, ...] = ("home", "search", "buy")
    demands: tuple[float, ...] = (0.004, 0.012, 0.030)  # D_c, CPU-seconds per request
    mix: tuple[float, ...] = (0.6, 0.3, 0.1)
    utilization: float = 0.6
    window_s: float = 5.0
    windows: int = 2000
    idc: float = 20.0


@dataclass
class TierSnapshot:
    """Estimates after ``window`` windows."""

    window: int
    utilization: float
    idc: float
    idc_flag: str
    demands: dict[str, float]
    demand_std: dict[str, float]
    extras: dict[str, object] = field(default_factory=dict)


def simulate_tier(scenario: TierScenario, rng: np.random.Generator) -> tuple[Windows, MAP]:
    """Monitoring windows of the scenario's tier and the service MAP that drove it."""
    unit = bursty_unit_map(scenario.idc)
    d = np.asarray(scenario.demands)
    mix = np.asarray(scenario.mix) / np.sum(scenario.mix)
    mean_service = float(mix @ d)
    rate = scenario.utilization / mean_service
    horizon = scenario.windows * scenario.window_s
    n_jobs = int(rate * horizon * 1.05) + 100
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n_jobs))
    classes = rng.choice(len(d), size=n_jobs, p=mix)
    service = d[classes] * unit.sample(n_jobs, rng)
    trace = fcfs_queue(arrivals, service, classes)
    windows = monitor_windows(trace, scenario.window_s, n_classes=len(d), end=horizon)
    return windows, unit.scaled(mean_service)


def stream_tier(scenario: TierScenario, windows: Windows,
                every: int = 100) -> Iterator[TierSnapshot]:
    """Feed ``windows`` one by one to the estimators; yield a snapshot every ``every`` windows."""
    tracker = DispersionTracker(scenario.window_s)
    kalman = KalmanDemandEstimator(scenario.classes)
    count = len(windows.utilization)
    for k in range(count):
        u = float(windows.utilization[k])
        n = windows.completions[k]
        tracker.update(u, n)
        kalman.update(u, n / scenario.window_s)
        if (k + 1) % every == 0 or k + 1 == count:
            est = tracker.estimate()
            yield TierSnapshot(k + 1, u, est.value, est.reason,
                               kalman.demands_by_class(), kalman.std_by_class())


def final_fit(scenario: TierScenario, windows: Windows, idc: float) -> dict[str, object]:
    """Regression demands and the MAP(2) fitted from mean, ``I`` and the busy-time p95."""
    x = windows.completions / scenario.window_s
    reg = regression_demands(windows.utilization, x)
    busy = windows.busy_time
    n_total = windows.completions.sum(axis=1)
    mean_service = float(busy.sum() / max(n_total.sum(), 1))
    p95 = service_p95(busy, n_total)
    fit = fit_map2(mean_service, max(idc, 1e-3), p95.p95 or mean_service * np.log(20.0))
    return {"regression": dict(zip(scenario.classes, reg.demands.tolist())),
            "mean_service": mean_service, "p95": p95.p95, "fit": fit}
