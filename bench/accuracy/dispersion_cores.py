"""The index of dispersion of a multi-core tier: which unit of the busy-time axis.

    python -m bench.accuracy.dispersion_cores                    # 20 seeds, 240 and 480 windows
    python -m bench.accuracy.dispersion_cores --seeds 40 --windows 240 --markdown

A ``c``-core tier is an M/Trace/c FCFS queue (:mod:`solvers.simulation.multi_server`: Poisson
arrivals, the service times a MAP(2) sequence taken in order of start) monitored in windows of
``T`` = 20 mean service times, its utilization the mean over the cores. The IDC-curve fit
(:func:`estimators.dispersion.index_of_dispersion_interval`) is run with the busy-time axis in
three units:

* ``tier window`` -- ``c T`` core-seconds (``s = 1``: the axis before ``cores`` existed);
* ``core-seconds`` -- ``T`` core-seconds (``s = c``);
* ``rule`` -- ``c T / s`` with ``s = max(1, min(c, 1/U))``, a window about one unit long
  (:func:`estimators.dispersion.busy_axis.axis_scale`; what the pipeline runs).

Per case (process, cores, utilization, windows) and axis: the median error of ``I`` against
the process's ``I``, the share of 95% intervals covering it (over all seeds; a flagged interval
``[0, inf)`` covers), the share of finite intervals (``resolved``) and their median width
``upper / lower``. 240 windows are 20 minutes of 5-s windows. Figures, no pass/fail.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from bench.tables import Table
from estimators.dispersion import index_of_dispersion_interval
from estimators.dispersion.interval import (DEFAULT_BLOCKS, DEFAULT_CONFIDENCE, DEFAULT_LEVELS,
                                            DEFAULT_MIN_RUNS, interval_checked)
from solvers.processes import MAP
from solvers.simulation.mmpp import mmpp2, mmpp2_design, mmpp2_intervals
from solvers.simulation.multi_server import ServerWindows, monitor_servers, mtrace_c

WINDOW_S = 20.0          # T, in mean service times
CASES = {
    "I~20": mmpp2(6.7, 0.34, 0.36, 0.042),
    "I~200": mmpp2(45.0, 0.09, 0.39, 0.0082),
    "aT=1, I=20": mmpp2_design(1.0 / WINDOW_S, 20.0),
}
AXES = ("tier window", "core-seconds", "rule")


def tier(process: MAP, cores: int, utilization: float, windows: int, seed: int
         ) -> ServerWindows:
    rng = np.random.default_rng(seed)
    rate = utilization * cores / process.mean
    jobs = int(windows * WINDOW_S * rate * 1.05) + 1000
    starts, departures = mtrace_c(rate, mmpp2_intervals(process, jobs, rng), cores, rng)
    return monitor_servers(starts, departures, WINDOW_S, cores, windows * WINDOW_S)


def estimate(win: ServerWindows, axis: str):
    c = win.servers
    if axis == "rule":
        return index_of_dispersion_interval(win.utilization, win.completions, WINDOW_S, cores=c)
    scale = 1.0 if axis == "tier window" else float(c)
    return interval_checked(win.utilization, win.completions, WINDOW_S * c / scale,
                            DEFAULT_CONFIDENCE, DEFAULT_MIN_RUNS, DEFAULT_LEVELS, DEFAULT_BLOCKS,
                            scale)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--windows", default="240,480")
    ap.add_argument("--cores", default="1,4,8,16")
    ap.add_argument("--loads", default="0.13,0.7")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    cols = ["case", "c", "U", "windows"] + [f"{a}: {m}" for a in AXES
                                            for m in ("median err", "cover", "resolved", "width")]
    table = Table("I of a c-core tier by the unit of the busy-time axis", cols)
    for name, process in CASES.items():
        truth = process.idc
        for windows in (int(w) for w in args.windows.split(",")):
            for c in (int(x) for x in args.cores.split(",")):
                for u in (float(x) for x in args.loads.split(",")):
                    got: dict[str, list] = {a: [] for a in AXES}
                    for seed in range(args.seeds):
                        win = tier(process, c, u, windows, seed)
                        for a in AXES:
                            got[a].append(estimate(win, a))
                    row = [name, c, u, windows]
                    for a in AXES:
                        ests = got[a]
                        err = np.median([e.value / truth - 1.0 for e in ests])
                        cover = np.mean([e.lower <= truth <= e.upper for e in ests])
                        fin = [e.upper / e.lower for e in ests
                               if math.isfinite(e.upper) and e.lower > 0.0]
                        width = f"{np.median(fin):.1f}" if fin else "-"
                        row += [f"{err:+.0%}", f"{cover:.0%}", f"{len(fin) / len(ests):.0%}",
                                width]
                    table.add(*row)
                    if not args.markdown:
                        print(" | ".join(str(x) for x in row), flush=True)
    print(table.render(args.markdown))


if __name__ == "__main__":
    main()
