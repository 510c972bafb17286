"""The exponential tiers' quantiles on the window against a fine long lattice (numbers, no pass/fail).

Run from the repository root::

    python -m bench.accuracy.percentile_lattice            # ~30 s
    python -m bench.accuracy.percentile_lattice --fine 8192

For ``bench.accuracy.percentiles``' systems (the exponential network each model solves its
MVA route with) at 0.05-3 knees, the per-class quantiles p50-p99.9 of one response-time law
three ways: :func:`solvers.response_time.window.window_quantiles` (what the model predicts),
the 1,024-point lattice from 0 that preceded it (:func:`solvers.response_time.sojourn.end_to_end`'s
lattice, the triangular kernel on every phase), and that lattice at ``--fine`` points (the
reference: its error shrinks with the square of its step). Printed: the largest relative
difference from the reference over classes and levels, per population.
"""

from __future__ import annotations

import argparse
import subprocess

import numpy as np

from bench.accuracy.percentiles import SYSTEMS
from solvers.response_time import ArrivalLaw
from solvers.response_time.sojourn import checked_services, lattice_quantiles, tier_wait_checked, \
    wait_laws
from solvers.response_time.window import window_quantiles

LEVELS = np.array([0.5, 0.9, 0.95, 0.99, 0.999])
FRACTIONS = (0.05, 0.2, 0.5, 0.8, 1.0, 1.2, 1.5, 3.0)


def compare(key: str, fine: int) -> list[tuple[int, float, float]]:
    """``(population, window's error, long lattice's error)`` per population of ``key``."""
    system = SYSTEMS[key]
    model = system.model().variant(slo=None, sla=np.full(len(system.classes), 0.1))
    knee = model.knee()
    pops = sorted({max(1, int(f * knee)) for f in FRACTIONS})
    law = ArrivalLaw(model.D, model.servers, model.solver_think)
    D, c = model.D.tolist(), model.servers.tolist()
    waits = [[tier_wait_checked(mg.offset[m], mg.pmf[m], D[m], c[m]) for m in range(len(D))]
             for mg in (law.marginals(n) for n in pops)]
    S, sh = checked_services(len(D), model.D_mc, model._wait_share)
    C = S.shape[1]
    window, _ = window_quantiles(waits, S, sh, LEVELS)

    def lattice(grid: int) -> list[np.ndarray]:
        return [lattice_quantiles(np.repeat(h, C), cdf, LEVELS)
                for h, cdf, _ in wait_laws(waits, S, sh, grid)]

    ref, long = lattice(fine), lattice(1024)
    return [(n, float(np.abs(window[i] / ref[i] - 1).max()),
             float(np.abs(long[i] / ref[i] - 1).max())) for i, n in enumerate(pops)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fine", type=int, default=32768, help="the reference lattice's points")
    ap.add_argument("--systems", nargs="*", default=["a", "b", "c", "d"],
                    help=f"of {sorted(SYSTEMS)}")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"| sys | users | window | 1,024-point lattice |  (max |q / q_{args.fine} - 1|, "
          "p50-p99.9)")
    print("|---|---:|---:|---:|")
    for key in args.systems:
        for n, win, old in compare(key, args.fine):
            print(f"| {key} | {n} | {100 * win:.3f}% | {100 * old:.3f}% |")
    print(f"commit {commit}")


if __name__ == "__main__":
    main()
