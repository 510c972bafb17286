"""A processor-sharing db under a pool: the pool model against simulation (numbers, no
pass/fail).

    python -m bench.accuracy.pool_ps --seeds 1-3 --requests 20000

The real testbed's shape (:mod:`bench.testbed`): a 1-core app (FCFS, 1 ms a request) then a
1-core db, a pool of 2 workers held over both, users thinking 1 s, four classes at a 25% mix
of 3 / 3 / 6 / 120 ms at the db, exponential work per class and tier. The db is processor
sharing (PostgreSQL's backends time-share its core) or FCFS (``--db fcfs``).

The truth: a discrete-event simulation of that network (:func:`bench.accuracy.ps_tiers.simulate`
with a pool: a request takes a worker before the app, waiting FCFS for one, and gives it back
after the db; PS: each of ``n`` requests on ``c`` cores served at ``min(1, c / n)``; FCFS: the
first ``c`` in order), per seed ``--requests`` completions after a 5% warm-up. :mod:`solvers.simulation.physical`
simulates pools but FCFS tiers only, :mod:`bench.accuracy.ps_tiers` PS tiers but no pool.
The models (:func:`solvers.pools_spread.solve_pools_spread`): with the db declared PS
(``ps``: product form there, the factor on the token's queue), and as FCFS (the held chain
of the db's spread). Errors of X and each class's mean response time, worst over the seeds'
mean.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import numpy as np

from bench.accuracy import ps_tiers
from solvers.pools import PoolSpec
from solvers.pools_spread import SPREAD_FLAG, solve_pools_spread

D = np.array([[0.001] * 4, [0.003, 0.003, 0.006, 0.120]])
MIX = np.full(4, 0.25)
CORES = np.array([1.0, 1.0])
POOL = PoolSpec(2, 0, 2, "workers")
Z = 1.0
CLASSES = ("home", "product", "buy", "search")


def simulate(ps: np.ndarray, population: int, completions: int, seed: int
             ) -> tuple[float, np.ndarray]:
    """The throughput (Little's law on the closed loop, ``N / (Z + R)``) and each class's mean
    response time (the wait for a worker included) of the closed network (module docstring),
    by :func:`bench.accuracy.ps_tiers.simulate` with the pool."""
    runs = ps_tiers.simulate(D, MIX, CORES, ps, Z, population, completions, seed, POOL.size)
    R = sum(float(r.sum()) for r in runs) / sum(len(r) for r in runs)
    return population / (Z + R), np.array([float(r.mean()) for r in runs])


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--requests", type=int, default=20_000, help="completions per seed")
    ap.add_argument("--populations", default="5,20,40")
    ap.add_argument("--db", choices=("ps", "fcfs"), default="ps")
    args = ap.parse_args(argv)
    ps = np.array([False, args.db == "ps"])
    seeds = _seeds(args.seeds)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"db {args.db}; seeds {args.seeds} x {args.requests} completions; commit {commit}")
    print("N | X sim (± between seeds) | R sim per class ms | X err ps / fcfs model | "
          "R err per class, ps model | R err per class, fcfs model (chain)")
    for N in (int(n) for n in args.populations.split(",")):
        runs = [simulate(ps, N, args.requests, s) for s in seeds]
        xs = np.array([r[0] for r in runs])
        Rs = np.array([r[1] for r in runs]).mean(axis=0)
        X = xs.mean()
        models = [solve_pools_spread(D, N, Z, CORES, [POOL], MIX, ps=mask)
                  for mask in (np.array([False, True]), None)]
        cells = [f"{r.throughput / X - 1:+.1%}" for r in models]
        errs = [" / ".join(f"{v:+.0%}" for v in r.response_time / Rs - 1) for r in models]
        chain = ["chain" if any(f.startswith(SPREAD_FLAG) for f in r.flags) else "factor"
                 for r in models]
        print(f"{N} | {X:.2f} (±{(xs.max() - xs.min()) / 2 / X:.1%}) | "
              f"{' / '.join(f'{1000 * v:.1f}' for v in Rs)} | {' / '.join(cells)} | "
              f"{errs[0]} ({chain[0]}) | {errs[1]} ({chain[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
