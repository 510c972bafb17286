"""``I`` read on completion counts and on completions in units of work (estimators.class_mix).

For the tiers of ``bench/speed/pipeline.py``'s workloads (the default one: 14 classes whose shares
drift +-30% over 10-60 minutes, every service time its class's demand, no burstiness; the
bursty ones: an on/off x6 run on the last tier), the IDC-curve estimate and its 95% interval
(:func:`estimators.dispersion.index_of_dispersion_interval`) on ``n_k`` (all classes counted
alike, before 0e7cffb) and on ``n'_k`` (weighted by the classes' NNLS demands, as the
pipeline reads it since). Seeded; prints a markdown table.

    python -m bench.accuracy.class_mix [--windows 4096] [--systems 4]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from bench.speed import pipeline as bp
from estimators.class_mix import work_weighted_completions
from estimators.dispersion import index_of_dispersion_interval


def _cell(est) -> str:
    return f"{est.value:.3g} [{est.lower:.3g}, {est.upper:.3g}]"


def rows(kind: str, systems: int, windows: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    bursty, multicore = kind != "default", kind == "bursty, multi-core"
    users = (200.0, 2000.0) if multicore else (10.0, 20.0) if bursty else (50.0, 150.0)
    out = []
    for s in range(systems):
        tr = bp.system_trace(rng, f"sys{s:03d}", windows, bursty=bursty, users=users,
                             multicore=multicore)
        for m, tier in enumerate(bp.TIERS):
            if bursty and m != len(bp.TIERS) - 1:
                continue
            window = tr.window_s * float(tr.cores[m])
            u = tr.U[:, m]
            counts = index_of_dispersion_interval(u, tr.n.sum(axis=1), window)
            work = index_of_dispersion_interval(
                u, work_weighted_completions(u, tr.n, tr.window_s), window)
            out.append(f"| {kind} | sys{s:03d} {tier} | {int(tr.cores[m])} | {_cell(counts)} | "
                       f"{_cell(work)} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", type=int, default=4096)
    ap.add_argument("--systems", type=int, default=4)
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args()
    print(f"windows {args.windows}, {args.systems} systems per workload, seed {args.seed}\n")
    print("| workload | tier | cores | I on counts [95%] | I on work [95%] |")
    print("|---|---|---:|---|---|")
    for kind in ("default", "bursty, one core", "bursty, multi-core"):
        for line in rows(kind, args.systems, args.windows, args.seed):
            print(line)


if __name__ == "__main__":
    main()
