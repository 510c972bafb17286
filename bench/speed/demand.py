"""Speed and accuracy of the demand estimators (estimators.demand). Prints plain-text tables.

    python -m bench.speed.demand            # from the repository root

The simulated scenarios are the ones the tests validate (tests/test_demand.py): Rolia and Vetland's (1995)
base case for the regression, a step change of one class's demand for the Kalman filter, and
Huang et al.'s (2012) 14-class TPC-W setting for NNLS versus Kalman.
"""

from __future__ import annotations

import math
import time

import numpy as np

from estimators.demand import (
    KalmanDemandEstimator,
    regression_demands,
    relative_error,
)
from tests.test_demand import (
    TPCW_CLASSES,
    noise_filtering,
    paper002_case,
    single_class_noisy_case,
    step_case,
    tpcw_case,
)

# Rolia and Vetland (1995), Table 2: (mean E_rel, 90th percentile) over 100 replications
PAPER002_TABLE2 = {(3, "det"): (0.0073, 0.0116), (5, "det"): (0.0203, 0.0302),
                   (3, "exp"): (0.1791, 0.2940), (5, "exp"): (0.2936, 0.4499)}


def _median_us(fn, args) -> float:
    """Median wall time of ``fn(*a)`` over the argument tuples ``args``, in microseconds."""
    times = np.empty(len(args))
    for i, a in enumerate(args):
        t0 = time.perf_counter()
        fn(*a)
        times[i] = time.perf_counter() - t0
    return float(np.median(times) * 1e6)


def bench_speed() -> None:
    rng = np.random.default_rng(0)
    n = 14
    true = rng.uniform(0.5e-3, 1.2e-3, n)
    X = rng.uniform(10, 40, (22_500, n))
    U = np.clip(X @ true + rng.normal(0, 0.005, len(X)), 0, 1)
    est = KalmanDemandEstimator(TPCW_CLASSES)
    for k in range(500):
        est.update(U[k], X[k])
    arr = _median_us(est.update, list(zip(U[500:20_500], X[500:20_500])))
    maps = [(u, dict(zip(TPCW_CLASSES, row))) for u, row in zip(U[20_500:], X[20_500:])]
    mapping = _median_us(est.update, maps)
    u50, X50 = U[:50], X[:50]
    nnls = _median_us(regression_demands, [(u50, X50)] * 300)
    ols = _median_us(lambda u, x: regression_demands(u, x, nonnegative=False), [(u50, X50)] * 300)
    print("Speed (median)")
    print(f"  Kalman update, 14 classes, array input      {arr:8.1f} us   (20000 updates)")
    print(f"  Kalman update, 14 classes, mapping input    {mapping:8.1f} us   (2000 updates)")
    print(f"  regression, 50 periods x 14 classes, NNLS   {nnls:8.1f} us")
    print(f"  regression, 50 periods x 14 classes, OLS    {ols:8.1f} us")
    print()


def bench_regression(seeds: int = 30) -> None:
    print(f"Regression E_rel, Rolia and Vetland (1995) base case (U = 0.75, 50 periods of 10000), "
          f"{seeds} seeds")
    print(f"  {'classes':>7}  {'service':<12}{'mean':>8}{'p90':>8}   {'paper mean':>10}"
          f"{'paper p90':>10}")
    for service, label in (("det", "constant"), ("exp", "exponential")):
        for n in (3, 5):
            errs = []
            for seed in range(seeds):
                win, means = paper002_case(n, service, seed)
                fit = regression_demands(win.utilization, win.completions / win.window_s)
                errs.append(relative_error(fit.demands, means, win.completions))
            p_mean, p90 = PAPER002_TABLE2[n, service]
            print(f"  {n:>7}  {label:<12}{np.mean(errs):8.4f}{np.percentile(errs, 90):8.4f}"
                  f"   {p_mean:10.4f}{p90:10.4f}")
    print()


def bench_step(seeds: int = 10) -> None:
    configs = [("default", lambda: KalmanDemandEstimator(["a", "b", "c"])),
               ("no change detection", lambda: KalmanDemandEstimator(["a", "b", "c"],
                                                                     gate=math.inf)),
               ("Huang et al. (2012) as published", lambda: KalmanDemandEstimator.paper(["a", "b", "c"]))]
    print("Kalman: windows until every class is back within 5% after class b's demand x1.5")
    print("  (3 classes 10/25/50 ms, deterministic service, 60-s windows, U ~ 0.5, mix +-50%;")
    print("   '-' = not within 5% for good in the 35 windows after the change)")
    print(f"  {'configuration':<24}" + "".join(f"{s:>4}" for s in range(seeds))
          + "   median   pre-change err")
    for name, make in configs:
        outs = [step_case(seed, make()) for seed in range(seeds)]
        rec = [o.recovery for o in outs]
        cells = "".join(f"{'-' if r is None else r:>4}" for r in rec)
        med = np.median([99 if r is None else r for r in rec])
        pre = np.median([o.pre_change_error for o in outs])
        print(f"  {name:<24}{cells}   {'-' if med == 99 else f'{med:g}':>6}   {pre:10.4f}")
    print()


def bench_noise(seeds: int = 6) -> None:
    print("Measurement noise: one class of 20 ms, U ~ 0.5, exponential service, 60-s windows,")
    print(f"CPU noise sd 0.02; median relative error and sd of window-to-window change, "
          f"{seeds} seeds")
    rows = [("z / X per window (no filter)", None),
            ("Huang et al. (2012) as published (R=0)", lambda: KalmanDemandEstimator.paper(["a"])),
            ("default (R=1e-4, adaptive)", lambda: KalmanDemandEstimator(["a"])),
            ("R=4e-4 (measured noise)", lambda: KalmanDemandEstimator(["a"], R=4e-4))]
    print(f"  {'estimator':<32}{'error':>8}{'jitter':>8}{'skipped':>9}")
    for name, make in rows:
        errs, jits, skipped = [], [], 0
        for seed in range(seeds):
            if make is None:
                util, tput = single_class_noisy_case(seed)
                raw = util / tput
                errs.append(np.median(np.abs(raw[10:] / 0.02 - 1.0)))
                jits.append(np.std(np.diff(raw[10:])) / 0.02)
                continue
            est = make()
            err, jit, _ = noise_filtering(seed, est)
            errs.append(err)
            jits.append(jit)
            skipped += est.n_skipped
        print(f"  {name:<32}{np.mean(errs):8.3f}{np.mean(jits):8.3f}{skipped:>9}")
    print()


def bench_tpcw(seeds: int = 8) -> None:
    print("14 TPC-W classes, mix browsing -> shopping -> ordering hourly, 3 h of 1-min windows;")
    print("NNLS over each half hour (30 samples) vs the Kalman estimate at the half hour's end")
    print(f"  {'seed':>4}  {'NNLS zeroed/block':<22}{'NNLS E_rel':>10}  {'Kalman':<8}"
          f"{'zeroed':>7}{'E_rel':>8}{'min x/D':>9}{'worst':>8}{'max |z|':>9}")
    for seed in range(seeds):
        for name, make in (("default", lambda: KalmanDemandEstimator(TPCW_CLASSES)),
                           ("paper", lambda: KalmanDemandEstimator.paper(TPCW_CLASSES))):
            o = tpcw_case(seed, estimator=make())
            nnls = (f"{','.join(map(str, o.nnls_zeroed)):<22}{o.nnls_error:10.3f}"
                    if name == "default" else " " * 32)
            print(f"  {seed if name == 'default' else '':>4}  {nnls}  {name:<8}"
                  f"{max(o.kalman_zeroed):>7}{o.kalman_error:8.3f}{o.kalman_min_ratio:9.3f}"
                  f"{o.kalman_worst_factor:8.2f}{o.kalman_max_z:9.2f}")
    print("  zeroed: most classes at 0 at any block end; min x/D: over all windows; worst:")
    print("  max(x/D, D/x) at block ends; max |z|: max |x - D| / reported std at block ends")
    print()


def main() -> None:
    bench_speed()
    bench_regression()
    bench_step()
    bench_noise()
    bench_tpcw()


if __name__ == "__main__":
    main()
