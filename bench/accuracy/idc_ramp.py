"""The index of dispersion of a multi-core bursty tier on a load ramp vs under steady load.

Run from the repository root:  python -m bench.accuracy.idc_ramp [--seeds 8] [--markdown]

The multi-core shop (bench/e2e/multicore.py, :func:`bench.accuracy.alert_shapes.network`): the 8-core
database's service sequence is Mi et al.'s (2008) MAP(2), ``I = 202.3``. Per seed two runs of the
physical simulator (:mod:`solvers.simulation.physical`, 5-s windows) with the same seed: a
*ramp* (20 minutes at 86 users = 40% of the 214-user capacity, then to 321 users over 40
minutes, then 10 minutes there -- bench/e2e/multicore.py's ramp; seed ``s + 100`` is its
``--seed s``) and a *steady* run at 86 users. The db's ``I``
(:func:`estimators.dispersion.index_of_dispersion_interval`) is read as the pipeline reads it
(busy time in core-seconds, ``cores = 8``: the axis in units of ``T c / s``,
``s = max(1, min(c, 1/U))``) on the windows up to each minute. If the
ramp's nonstationarity biased ``I``, the ramp column would read lower than the steady one.
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.accuracy.alert_shapes import START, network
from bench.tables import Table
from estimators.dispersion import index_of_dispersion_interval
from solvers.simulation.physical import monitor_physical

TRUE_I = 202.3
LOW, TOP, CORES, WINDOW_S = 86, 321, 8, 5.0
MINUTES = (24, 28, 32, 36, 40, 50, 60, 70)


def db_windows(seed: int, ramp: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(U_k, n_k)`` of the database's windows."""
    schedule = [(1200.0 + 40.0 * k, LOW + round((TOP - LOW) * k / 60)) for k in range(1, 61)]
    records = monitor_physical(network("bursty", LOW), 4200.0, WINDOW_S,
                               schedule=schedule if ramp else None, system="shop",
                               start_time=START, seed=seed + 100)
    db = [r for r in records if r["tier"] == "db"]
    return (np.array([r["utilization"] for r in db]),
            np.array([sum(r["completions"].values()) for r in db], dtype=float))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    table = Table(f"db I by minute (true {TRUE_I}), ramp / steady, seeds 1..{args.seeds}",
                  ["seed"] + [f"min {m}" for m in MINUTES])
    reads = {True: [], False: []}
    for seed in range(1, args.seeds + 1):
        row = {}
        for ramp in (True, False):
            u, n = db_windows(seed, ramp)
            row[ramp] = [index_of_dispersion_interval(u[:12 * m], n[:12 * m], WINDOW_S,
                                                      cores=CORES).value for m in MINUTES]
            reads[ramp].append(row[ramp])
        table.add(seed, *(f"{a:.0f} / {b:.0f}" for a, b in zip(row[True], row[False])))
    med = {k: np.median(np.array(v), axis=0) for k, v in reads.items()}
    table.add("median", *(f"{a:.0f} / {b:.0f}" for a, b in zip(med[True], med[False])))
    print(table.render(args.markdown))
    for ramp in (True, False):
        err = np.array(reads[ramp]) / TRUE_I - 1.0
        print(f"{'ramp' if ramp else 'steady'}: share of readings within +-25%: "
              f"{np.mean(np.abs(err) <= 0.25):.0%}, worst {err.flat[np.argmax(np.abs(err))]:+.0%}")


if __name__ == "__main__":
    main()
