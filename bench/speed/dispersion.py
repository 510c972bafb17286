"""Speed and accuracy of the index-of-dispersion estimator (Mi et al. 2008, Fig. 2).

Run from the repository root:  python -m bench.speed.dispersion [--quick]

Prints plain-text tables:
1. speed: ``DispersionTracker.update`` per window (us, median), ``estimate()`` at history 4096
   (ms), the batch ``index_of_dispersion`` over 10,000 windows (ms);
   and beside them the IDC-curve fit with its interval (``DispersionTracker.interval``,
   ``index_of_dispersion_interval``) on the same histories, with the ratios;
2. accuracy: M/MAP/1 queues (Poisson arrivals, utilization 0.7) whose service process is a
   MAP(2) with I ~ 1, 20, 200 (reference: line_solver's ``map_idc``), monitored in windows of
   T = 20 mean service times; for each number of windows, the estimate per seed and its error.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from estimators.dispersion import (DispersionTracker, index_of_dispersion,
                                   index_of_dispersion_interval)
from solvers.processes import MAP
from solvers.simulation import monitor_windows, mtrace1

WINDOW_S = 20.0      # T, in mean service times
UTILIZATION = 0.7


def mmpp2(fast: float, slow: float, to_slow: float, to_fast: float) -> MAP:
    """MAP(2) service process (an MMPP(2)): completion rate ``fast``/``slow`` in its two phases."""
    return MAP([[-fast - to_slow, to_slow], [to_fast, -slow - to_fast]], [[fast, 0.0], [0.0, slow]])


# Phases switch at rate ~0.4 per mean service time (alpha T ~ 8): see the module docstring of
# estimators.dispersion for why the window must be long against the bursts.
CASES = {
    "I~1": mmpp2(1.5, 0.5, 2.0, 2.0),
    "I~20": mmpp2(6.7, 0.34, 0.36, 0.042),
    "I~200": mmpp2(45.0, 0.09, 0.39, 0.0082),
}
SLOW_MIXING = mmpp2(5.6, 0.12, 0.034, 0.006)          # I ~ 204 with alpha T ~ 0.8


def reference_idc(process: MAP) -> float:
    from line_solver.api.mam.map_analysis import map_idc
    return float(map_idc(process.D0, process.D1))


def monitored_queue(process: MAP, windows: int, seed: int, window_s: float = WINDOW_S,
                    utilization: float = UTILIZATION):
    """``windows`` monitoring windows of an M/MAP/1 FCFS queue (Mi et al. 2008, Table 1's M/Trace/1)."""
    rng = np.random.default_rng(seed)
    arrival_rate = utilization / process.mean
    jobs = int(windows * window_s * arrival_rate * 1.05) + 1000
    trace = mtrace1(arrival_rate, process.sample(jobs, rng), rng)
    return monitor_windows(trace, window_s, end=windows * window_s)


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def speed() -> None:
    win = monitored_queue(CASES["I~20"], 10_000, seed=1)
    u, n = win.utilization, win.completions.sum(axis=1)
    tracker = DispersionTracker(WINDOW_S, history=4096)
    per_update = []
    for k in range(u.size):
        uk, nk = float(u[k]), int(n[k])
        start = time.perf_counter()
        tracker.update(uk, nk)
        per_update.append(time.perf_counter() - start)
    per_class = DispersionTracker(WINDOW_S, history=4096)
    counts = {"home": 3, "search": 5, "buy": 1}
    per_class_t = _median_time(lambda: per_class.update(0.5, counts), 20_000)
    est = tracker.estimate()
    est_t = _median_time(tracker.estimate, 50)
    batch = index_of_dispersion(u, n, WINDOW_S)
    batch_t = _median_time(lambda: index_of_dispersion(u, n, WINDOW_S), 50)
    # worst case: a trace that never converges runs t up to S / min_samples
    rng = np.random.default_rng(2)
    noisy_u = rng.uniform(0.0, 1.0, 10_000)
    noisy_n = np.round(rng.pareto(1.2, 10_000) * 50 * noisy_u)
    worst = index_of_dispersion(noisy_u, noisy_n, WINDOW_S, tol=1e-6)
    worst_t = _median_time(lambda: index_of_dispersion(noisy_u, noisy_n, WINDOW_S, tol=1e-6), 10)
    slow_tracker = DispersionTracker(WINDOW_S, history=4096, tol=1e-6)
    for k in range(4096):
        slow_tracker.update(float(noisy_u[k]), float(noisy_n[k]))
    slow_est = slow_tracker.estimate()
    slow_est_t = _median_time(slow_tracker.estimate, 20)
    # the IDC-curve fit with its interval, same histories, same run
    ci_t = _median_time(tracker.interval, 50)
    ci = tracker.interval()
    ci_batch_t = _median_time(lambda: index_of_dispersion_interval(u, n, WINDOW_S), 20)
    slow_ci_t = _median_time(slow_tracker.interval, 20)
    rows = [
        ("DispersionTracker.update, total count", np.median(per_update) * 1e6, "us"),
        ("DispersionTracker.update, 3 classes as dict", per_class_t * 1e6, "us"),
        (f"DispersionTracker.estimate, history 4096 ({_steps(est)})", est_t * 1e3, "ms"),
        (f"  same, trace that never converges ({_steps(slow_est)})", slow_est_t * 1e3, "ms"),
        (f"index_of_dispersion, 10,000 windows ({_steps(batch)})", batch_t * 1e3, "ms"),
        (f"  same, trace that never converges ({_steps(worst)})", worst_t * 1e3, "ms"),
        (f"DispersionTracker.interval, history 4096 ({len(ci.t)} levels)", ci_t * 1e3, "ms"),
        ("  same, the never-converging trace", slow_ci_t * 1e3, "ms"),
        ("index_of_dispersion_interval, 10,000 windows", ci_batch_t * 1e3, "ms"),
    ]
    ratios = [("interval / estimate, history 4096", ci_t / est_t),
              ("interval / estimate, never-converging history 4096", slow_ci_t / slow_est_t),
              ("interval / index_of_dispersion, 10,000 windows", ci_batch_t / batch_t)]
    print("speed (median of repeated runs)")
    print(f"  {'operation':<58} {'time':>10}")
    for label, value, unit in rows:
        print(f"  {label:<58} {value:>7.2f} {unit}")
    print("  ratios, IDC-curve fit with its interval vs Fig. 2 (same run):")
    for label, value in ratios:
        print(f"  {label:<58} {value:>7.1f}x")


def _steps(result) -> str:
    return f"t={result.t / WINDOW_S:.0f}T"


def accuracy(sizes: dict[str, list[int]], seeds: int) -> None:
    print(f"\naccuracy: M/MAP(2)/1, utilization {UTILIZATION}, T = {WINDOW_S:g} mean service "
          f"times, tol 0.20, seeds 0..{seeds - 1}")
    header = (f"  {'case':<18} {'I ref':>8} {'windows':>8} {'jobs~':>8} {'median I':>9} "
              f"{'med err':>8} {'worst err':>9} {'in +-20%':>8} {'t/T':>5}  per-seed estimates")
    print(header)
    for name, process in [*CASES.items(), ("I~200 slow mixing", SLOW_MIXING)]:
        ref = reference_idc(process)
        for windows in sizes.get(name, sizes["default"]):
            values, steps = [], []
            for seed in range(seeds):
                win = monitored_queue(process, windows, seed)
                est = index_of_dispersion(win.utilization, win.completions, WINDOW_S)
                values.append(est.value)
                steps.append(est.t / WINDOW_S)
            err = np.array(values) / ref - 1.0
            jobs = int(windows * WINDOW_S * UTILIZATION / process.mean)
            print(f"  {name:<18} {ref:>8.2f} {windows:>8d} {jobs:>8d} {np.median(values):>9.2f} "
                  f"{np.median(err):>+8.1%} {err[np.argmax(np.abs(err))]:>+9.1%} "
                  f"{np.mean(np.abs(err) <= 0.2):>8.0%} {np.median(steps):>5.0f}  "
                  + " ".join(f"{v:.3g}" for v in values))
    print("  MAP(2)s (D0; D1), phases switch at rate alpha per mean service time:")
    for name, process in [*CASES.items(), ("I~200 slow mixing", SLOW_MIXING)]:
        alpha = -np.trace(process.D0 + process.D1)
        print(f"    {name:<18} alpha={alpha:.3g} SCV={process.scv:.3g} rho1={process.acf(1):.3g} "
              f"MAP.idc={process.idc:.6g} map_idc={reference_idc(process):.6g}  "
              f"D0={np.round(process.D0, 5).tolist()} D1={np.round(process.D1, 5).tolist()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer window counts and seeds")
    args = parser.parse_args()
    speed()
    if args.quick:
        accuracy({"default": [2_000], "I~200": [10_000]}, seeds=3)
    else:
        accuracy({"default": [500, 1_000, 2_000, 5_000],
                  "I~200": [1_000, 2_000, 5_000, 10_000, 20_000],
                  "I~200 slow mixing": [20_000]}, seeds=10)


if __name__ == "__main__":
    main()
