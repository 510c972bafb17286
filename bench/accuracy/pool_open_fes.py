"""The open pool's flow-equivalent server past the held chain's budget against simulation, with
and without its wait's two-moment factor (numbers, no pass/fail).

    python -m bench.accuracy.pool_open_fes --sizes 4,6,8 --seeds 11,12,13 --requests 20000

The shape is :mod:`bench.accuracy.pool_open_ps`'s (the testbed's: a 1-core FCFS app and a 1-core
processor-sharing db, 4 classes, search the dear one) with a pool of ``K`` = 4 or more workers,
past the held chain's budget (:data:`solvers.pools_open.CHAIN_WORK`): the open route solves it
by the flow-equivalent server (Chandy et al. 1975). Search's service at the db has SCV ``v``
(``--scvs``; H2 of balanced means or lognormal, ``--laws``). The truth:
:func:`solvers.simulation.pool_open_ps.simulate_pool_open` per seed, ``--requests`` arrivals
(``0.4 / (1 - load)`` times as many above 60% load) at 40 / 70 / 90% of the server's
saturation. The model: :func:`solvers.pools_open.held_network` given search's SCV, its wait
times :attr:`~solvers.pools_open.HeldCurve.wait_factor` (``after``) and without it
(``before``, the factor set to 1). Each class's R error against the seeds' mean; the worst
absolute error last.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys

import numpy as np

import bench.accuracy.pool_open_ps as shape
from solvers.pools import PoolSpec
from solvers.pools_open import held_network, solve_open_pool

FRACTIONS = (0.4, 0.7, 0.9)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,6,8")
    ap.add_argument("--seeds", default="11,12,13")
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--laws", default="h2,ln")
    ap.add_argument("--scvs", default="1,2.5,5")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"seeds {args.seeds} x {args.requests} requests; commit {commit}")
    worst: dict[tuple[int, str], tuple[float, float]] = {}
    fmt = lambda a: " / ".join(f"{x:+.0%}" for x in a)
    for K in (int(k) for k in args.sizes.split(",")):
        shape.SIZE = K
        for law in args.laws.split(","):
            for v in (float(x) for x in args.scvs.split(",")):
                curve = held_network(shape.DEMANDS, shape.CORES, [PoolSpec(K, 0, 2, "w")], 0,
                                     shape.MIX, ps=shape.PS, class_scv=shape.scv_matrix(v))
                plain = dataclasses.replace(curve, wait_factor=1.0)
                print(f"K {K} {law} SCV {v:g}: {'chain' if curve.chain else 'FES'}, factor "
                      f"{curve.wait_factor:.3f}, saturation {curve.saturation:.1f}/s", flush=True)
                for f in FRACTIONS:
                    rate = f * curve.saturation
                    n = int(args.requests * max(1.0, 0.4 / (1.0 - f)))
                    sim = np.mean([shape.sim(rate, law, v, s, n).mean_response(4)
                                   for s in seeds], axis=0)
                    errs = []
                    for c in (plain, curve):
                        r = solve_open_pool(rate, c)
                        errs.append((r.residence_time.sum(axis=0) + r.waiting_time) / sim - 1)
                    b, a = worst.get((K, law), (0.0, 0.0))
                    worst[(K, law)] = (max(b, float(np.abs(errs[0]).max())),
                                       max(a, float(np.abs(errs[1]).max())))
                    print(f"  {f:.0%}: R sim ms {' / '.join(f'{x * 1e3:.1f}' for x in sim)}; "
                          f"before {fmt(errs[0])}; after {fmt(errs[1])}", flush=True)
    print("worst |R err| before / after: " + "; ".join(
        f"K {k} {law} {b:.0%} / {a:.0%}" for (k, law), (b, a) in worst.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
