"""A processor-sharing db under a pool: the pool model against simulation (numbers, no
pass/fail).

    python -m bench.accuracy.pool_ps --seeds 1-3 --requests 20000 [--scv 2.5]

The real testbed's shape (:mod:`bench.testbed`): a 1-core app (FCFS, 1 ms a request) then a
1-core db, a pool of 2 workers held over both, users thinking 1 s, four classes at a 25% mix
of 3 / 3 / 6 / 120 ms at the db, exponential work per class and tier. The db is processor
sharing (PostgreSQL's backends time-share its core) or FCFS (``--db fcfs``).

``--scv S``: search's work at the db hyperexponential of SCV ``S`` (balanced means, Whitt 1982;
1: exponential, as above), the heavy tail of the testbed's searches (SCV ~2.2 at 5 users).

The truth: a discrete-event simulation of that network (:func:`bench.accuracy.ps_tiers.simulate`
with a pool: a request takes a worker before the app, waiting FCFS for one, and gives it back
after the db; PS: each of ``n`` requests on ``c`` cores served at ``min(1, c / n)``; FCFS: the
first ``c`` in order), per seed ``--requests`` completions after a 5% warm-up. :mod:`solvers.simulation.physical`
simulates pools but FCFS tiers only, :mod:`bench.accuracy.ps_tiers` PS tiers but no pool.
The models (:func:`solvers.pools_spread.solve_pools_spread`, search's SCV given as its
``class_scv`` at the db): with the db declared PS (``ps``: the classes' spread there from the
closed class chain, exponential per class), the two-moment factor with search's SCV kept at the db
(:func:`solvers.pools_general.solve_pools_general`: the holding time's spread a PS db passes on
to the token's FCFS queue), and as FCFS (the held chain of the db's spread). Errors of X and
each class's mean response time, worst over the seeds' mean. ``--no-class-scv``: one more
column, the PS model without search's SCV (every class exponential at the db, as the pipeline
solved the closed pool model before it passed the classes' SCVs).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from typing import Any
from unittest import mock

import numpy as np

from bench.accuracy import ps_tiers
from solvers.pools import PoolSpec
from solvers.pools_general import solve_pools_general
from solvers.pools_spread import CLASS_CHAIN_FLAG, SPREAD_FLAG, solve_pools_spread

D = np.array([[0.001] * 4, [0.003, 0.003, 0.006, 0.120]])
MIX = np.full(4, 0.25)
CORES = np.array([1.0, 1.0])
POOL = PoolSpec(2, 0, 2, "workers")
Z = 1.0
CLASSES = ("home", "product", "buy", "search")


#: numpy's generator, kept from before :func:`simulate` patches it for ``ps_tiers``
_DEFAULT_RNG = np.random.default_rng


class _HeavyRng:
    """:func:`bench.accuracy.ps_tiers.simulate`'s generator with search's work at the db drawn
    hyperexponential of SCV ``scv`` (balanced means), every other draw as numpy's: that
    simulator draws each work as ``exponential(mean)``, and search's db mean is the only one
    of its value."""

    def __init__(self, seed: int, scv: float) -> None:
        self._rng, self._scv = _DEFAULT_RNG(seed), scv

    def exponential(self, scale: float = 1.0, size: Any = None) -> Any:
        if size is not None or scale != D[1, 3]:
            return self._rng.exponential(scale, size)
        p = 0.5 * (1.0 + math.sqrt((self._scv - 1.0) / (self._scv + 1.0)))
        mean = scale / (2.0 * p) if self._rng.random() < p else scale / (2.0 * (1.0 - p))
        return self._rng.exponential(mean)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rng, name)


def simulate(ps: np.ndarray, population: int, completions: int, seed: int, scv: float = 1.0
             ) -> tuple[float, np.ndarray]:
    """The throughput (Little's law on the closed loop, ``N / (Z + R)``) and each class's mean
    response time (the wait for a worker included) of the closed network (module docstring),
    by :func:`bench.accuracy.ps_tiers.simulate` with the pool; ``scv``: of search's work at the
    db (1: exponential, numpy's generator as it is)."""
    if scv == 1.0:
        runs = ps_tiers.simulate(D, MIX, CORES, ps, Z, population, completions, seed, POOL.size)
    else:
        with mock.patch.object(ps_tiers.np.random, "default_rng",
                               lambda s: _HeavyRng(s, scv)):
            runs = ps_tiers.simulate(D, MIX, CORES, ps, Z, population, completions, seed,
                                     POOL.size)
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
    ap.add_argument("--scv", type=float, default=1.0, help="of search's work at the db")
    ap.add_argument("--no-class-scv", action="store_true",
                    help="also the PS model without search's SCV")
    args = ap.parse_args(argv)
    ps = np.array([False, args.db == "ps"])
    seeds = _seeds(args.seeds)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"db {args.db}; search's SCV at the db {args.scv:g}; seeds {args.seeds} x "
          f"{args.requests} completions; commit {commit}")
    print("N | X sim (± between seeds) | R sim per class ms | X err ps / ps, SCV kept / fcfs "
          "model | R err per class, ps model | ps model, search's SCV kept | fcfs model (chain)"
          + (" | ps model, no class SCV" if args.no_class_scv else ""))
    class_scv = np.full(D.shape, np.nan)
    class_scv[1, 3] = args.scv
    for N in (int(n) for n in args.populations.split(",")):
        runs = [simulate(ps, N, args.requests, s, args.scv) for s in seeds]
        xs = np.array([r[0] for r in runs])
        Rs = np.array([r[1] for r in runs]).mean(axis=0)
        X = xs.mean()
        models = [solve_pools_spread(D, N, Z, CORES, [POOL], MIX, class_scv=class_scv,
                                     ps=np.array([False, True])),
                  solve_pools_general(D, N, Z, CORES, [POOL], MIX, None, class_scv),
                  solve_pools_spread(D, N, Z, CORES, [POOL], MIX, class_scv=class_scv)]
        if args.no_class_scv:
            models.append(solve_pools_spread(D, N, Z, CORES, [POOL], MIX,
                                             ps=np.array([False, True])))
        cells = [f"{r.throughput / X - 1:+.1%}" for r in models]
        errs = [" / ".join(f"{v:+.0%}" for v in r.response_time / Rs - 1) for r in models]
        chain = ["class chain" if any(f.startswith(CLASS_CHAIN_FLAG) for f in r.flags)
                 else "chain" if any(f.startswith(SPREAD_FLAG) for f in r.flags) else "factor"
                 for r in models]
        print(f"{N} | {X:.2f} (±{(xs.max() - xs.min()) / 2 / X:.1%}) | "
              f"{' / '.join(f'{1000 * v:.1f}' for v in Rs)} | {' / '.join(cells[:3])} | "
              f"{errs[0]} ({chain[0]}) | {errs[1]} ({chain[1]}) | {errs[2]} ({chain[2]})"
              + (f" | {cells[3]}, {errs[3]} ({chain[3]})" if args.no_class_scv else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
