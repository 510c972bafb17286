"""Index of dispersion: slow bursts and confidence intervals.

Run from the repository root:  python -m bench.accuracy.dispersion [--quick] [--markdown]

Side by side on the same seeded traces: Mi et al. (2008), Fig. 2 estimator
(``estimators.dispersion.index_of_dispersion``, the reference) and the IDC-curve fit with its
block-jackknife confidence interval (``index_of_dispersion_interval``). Every trace is an
M/MMPP(2)/1 FCFS queue (Poisson arrivals, utilization 0.7) monitored in windows of
``T = 20`` mean service times; the true ``I`` is the MAP's closed form
``I = SCV (1 + 2 sum_k rho_k)`` (``solvers.processes.MAP.idc``).

Tables:
1. the existing cases (I ~ 1, 20, 200; phases switch ~8 times per window, alpha T ~ 8),
   target +-20%;
2. slow-switching MMPP(2)s, alpha T from 0.05 to 1 and true I from 20 to 500, target +-25%;
   per case and trace length: median / worst error of both estimators, share of seeds within
   the target, the CI's coverage of the truth and its median relative width;
3. when a tier counts as bursty (``idc_threshold`` 10): share of seeds counted bursty after
   120 .. 1440 windows (10 min .. 2 h of 5-s windows) -- today's rule (Fig. 2 value > 10) and
   the interval's (lower bound > 10) -- for bursty and for non-bursty tiers, at utilization
   0.7 and (a few cases) 0.2.

``--part accuracy`` / ``--part trust`` print only tables 1-2 / table 3; ``--part fast`` /
``--part slow`` only table 1 / table 2.

The MMPP(2) intervals are drawn vectorised (phase sojourns, Poisson completions placed
uniformly in each): the same process as ``MAP.sample``, much faster.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from bench.tables import Table
from estimators.dispersion import index_of_dispersion, index_of_dispersion_interval
from solvers.processes import MAP
from solvers.simulation import monitor_windows, mtrace1
from solvers.simulation.mmpp import mmpp2, mmpp2_design, mmpp2_intervals

WINDOW_S = 20.0          # T, in mean service times
UTILIZATION = 0.7
THRESHOLD = 10.0         # streams.core.config.SystemConfig.idc_threshold


# the existing cases (tests/test_dispersion.py, docs/benchmarks.md): alpha T ~ 8
FAST = {
    "I~1": mmpp2(1.5, 0.5, 2.0, 2.0),
    "I~20": mmpp2(6.7, 0.34, 0.36, 0.042),
    "I~200": mmpp2(45.0, 0.09, 0.39, 0.0082),
}
# slow switching: alpha T from 1 down to 0.05 (bursts last 1/alpha = T .. 20 T)
SLOW = {
    "aT=1, I=20": mmpp2_design(1.0 / WINDOW_S, 20.0),
    "aT=0.8, I=204 (bench_dispersion)": mmpp2(5.6, 0.12, 0.034, 0.006),
    "aT=0.5, I=50": mmpp2_design(0.5 / WINDOW_S, 50.0),
    "aT=0.2, I=100": mmpp2_design(0.2 / WINDOW_S, 100.0),
    "aT=0.12, I=87": mmpp2_design(0.12 / WINDOW_S, 87.0, 2.0 / 3.0),
    "aT=0.1, I=200": mmpp2_design(0.1 / WINDOW_S, 200.0),
    "aT=0.05, I=500": mmpp2_design(0.05 / WINDOW_S, 500.0),
}
# not bursty by the threshold, for the false-alarm side of table 3
QUIET = {
    "I~1": FAST["I~1"],
    "aT=0.2, I=5": mmpp2_design(0.2 / WINDOW_S, 5.0),
}

def monitored_queue(process: MAP, windows: int, seed: int, utilization: float = UTILIZATION):
    """``windows`` monitoring windows of an M/MMPP(2)/1 FCFS queue at ``utilization``."""
    rng = np.random.default_rng(seed)
    arrival_rate = utilization / process.mean
    jobs = int(windows * WINDOW_S * arrival_rate * 1.05) + 1000
    trace = mtrace1(arrival_rate, mmpp2_intervals(process, jobs, rng), rng)
    return monitor_windows(trace, WINDOW_S, end=windows * WINDOW_S)


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def accuracy(title: str, cases: dict[str, MAP], sizes: list[int], seeds: int, target: float,
             markdown: bool, first_seed: int = 0) -> None:
    table = Table(title, ["case", "true I", "alpha T", "windows", "Fig. 2 median", "Fig. 2 worst",
                          f"Fig. 2 in +-{target:.0%}", "fit median", "fit worst",
                          f"fit in +-{target:.0%}", "CI coverage", "CI width (median)",
                          "flagged"])
    needs = []
    for name, process in cases.items():
        truth = process.idc
        alpha_t = float(-np.trace(process.generator)) * WINDOW_S * process.mean
        needed = None
        for windows in sizes:
            ref, fit, covered, width, flagged = [], [], 0, [], 0
            for seed in range(first_seed, first_seed + seeds):
                win = monitored_queue(process, windows, seed)
                ref.append(index_of_dispersion(win.utilization, win.completions, WINDOW_S).value)
                est = index_of_dispersion_interval(win.utilization, win.completions, WINDOW_S)
                fit.append(est.value)
                covered += est.lower <= truth <= est.upper
                width.append((est.upper - est.lower) / truth)
                flagged += est.flagged
            e_ref = np.array(ref) / truth - 1.0
            e_fit = np.array(fit) / truth - 1.0
            within = float(np.mean(np.abs(e_fit) <= target))
            if needed is None and within >= 0.9:
                needed = windows
            table.add(name, f"{truth:.1f}", f"{alpha_t:.2g}", windows, _pct(np.median(e_ref)),
                      _pct(e_ref[np.argmax(np.abs(e_ref))]),
                      f"{np.mean(np.abs(e_ref) <= target):.0%}",
                      _pct(np.median(e_fit)), _pct(e_fit[np.argmax(np.abs(e_fit))]),
                      f"{within:.0%}", f"{covered}/{seeds}", f"{np.median(width):.0%}",
                      flagged)
        needs.append((name, needed))
    print(table.render(markdown))
    print("windows needed (smallest tried with >= 90% of seeds within "
          f"+-{target:.0%}): " + "; ".join(f"{n}: {w if w else 'more than ' + str(sizes[-1])}"
                                          for n, w in needs) + "\n")


def trust(cases: dict[str, MAP], sizes: list[int], seeds: int, markdown: bool,
          utilization: float = UTILIZATION) -> None:
    table = Table(f"3. When a tier counts as bursty (utilization {utilization:g}, "
                  f"idc_threshold {THRESHOLD:g}; {seeds} seeds; share of seeds counted bursty: "
                  "today's rule, Fig. 2 value > 10 / the interval's lower bound > 10)",
                  ["case", "true I", "alpha T"] + [f"{w} windows ({w * 5 / 60:.0f} min of 5 s)"
                                                   for w in sizes])
    for name, process in cases.items():
        cells = []
        for windows in sizes:
            today = lower = 0
            for seed in range(seeds):
                win = monitored_queue(process, windows, 1000 + seed, utilization)
                ref = index_of_dispersion(win.utilization, win.completions, WINDOW_S)
                est = index_of_dispersion_interval(win.utilization, win.completions, WINDOW_S)
                today += ref.value > THRESHOLD
                lower += est.above(THRESHOLD)
            cells.append(f"{today / seeds:.0%} / {lower / seeds:.0%}")
        alpha_t = float(-np.trace(process.generator)) * WINDOW_S * process.mean
        table.add(name, f"{process.idc:.1f}", f"{alpha_t:.2g}", *cells)
    print(table.render(markdown))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and seeds")
    parser.add_argument("--markdown", action="store_true", help="markdown tables")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="tables 1-2: seeds first..first+seeds-1 (held-out checks)")
    parser.add_argument("--part", choices=("all", "accuracy", "fast", "slow", "trust"),
                        default="all")
    args = parser.parse_args()
    start = time.perf_counter()
    seeds = 10 if args.quick else args.seeds
    fast_sizes = [1_000, 2_000] if args.quick else [500, 1_000, 2_000, 5_000, 10_000]
    slow_sizes = [4_096, 16_384] if args.quick else [4_096, 8_192, 16_384, 32_768]
    trust_sizes = [360] if args.quick else [120, 240, 360, 720, 1_440]
    print(f"M/MMPP(2)/1, utilization {UTILIZATION}, T = {WINDOW_S:g} mean service times, "
          f"seeds {args.first_seed}..{args.first_seed + seeds - 1} (tables 1-2); "
          "errors against the closed-form I; CI nominal 95%\n")
    if args.part in ("all", "accuracy", "fast"):
        accuracy("1. Existing cases (alpha T ~ 8): Fig. 2 (reference) vs IDC-curve fit", FAST,
                 fast_sizes, seeds, 0.20, args.markdown, args.first_seed)
    if args.part in ("all", "accuracy", "slow"):
        accuracy("2. Slow switching (bursts outlast the window): Fig. 2 vs IDC-curve fit",
                 SLOW, slow_sizes, seeds, 0.25, args.markdown, args.first_seed)
    if args.part in ("all", "trust"):
        trust({**{k: FAST[k] for k in ("I~20", "I~200")}, **SLOW, **QUIET}, trust_sizes,
              seeds, args.markdown)
        # a lightly loaded tier: Fig. 2 needs 100 windows' worth of busy time before t = T
        trust({k: v for k, v in {**FAST, **SLOW, **QUIET}.items()
               if k in ("I~200", "aT=0.8, I=204 (bench_dispersion)", "aT=0.2, I=100",
                        "aT=0.05, I=500", "I~1", "aT=0.2, I=5")},
              trust_sizes, seeds, args.markdown, utilization=0.2)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
