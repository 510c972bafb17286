"""A processor-sharing db under a pool: the pool model against simulation (numbers, no
pass/fail).

    python -m bench.accuracy.pool_ps --seeds 1-3 --requests 20000

The real testbed's shape (:mod:`bench.testbed`): a 1-core app (FCFS, 1 ms a request) then a
1-core db, a pool of 2 workers held over both, users thinking 1 s, four classes at a 25% mix
of 3 / 3 / 6 / 120 ms at the db, exponential work per class and tier. The db is processor
sharing (PostgreSQL's backends time-share its core) or FCFS (``--db fcfs``).

The truth: a discrete-event simulation of that network (:func:`simulate`: a request takes a
worker before the app, waiting FCFS for one, and gives it back after the db; PS: each of
``n`` requests on ``c`` cores served at ``min(1, c / n)``; FCFS: the first ``c`` in order),
per seed ``--requests`` completions after a 5% warm-up. :mod:`solvers.simulation.physical`
simulates pools but FCFS tiers only, :mod:`bench.accuracy.ps_tiers` PS tiers but no pool.
The models (:func:`solvers.pools_spread.solve_pools_spread`): with the db declared PS
(``ps``: product form there, the factor on the token's queue), and as FCFS (the held chain
of the db's spread). Errors of X and each class's mean response time, worst over the seeds'
mean.
"""

from __future__ import annotations

import argparse
import heapq
import math
import subprocess
import sys

import numpy as np

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
    """The throughput and each class's mean response time (from the end of the think time,
    the wait for a worker included) of the closed network (module docstring)."""
    rng = np.random.default_rng(seed)
    M, C = D.shape
    thinking = list(rng.exponential(Z, population))
    heapq.heapify(thinking)
    queues: list[list[list[float]]] = [[] for _ in range(M)]    # [work left, class, start]
    waiting: list[list[float]] = []                             # FCFS for a worker
    free = POOL.size
    now, done, warm, t_warm = 0.0, 0, completions // 20, 0.0
    total = np.zeros(C)
    count = np.zeros(C)
    while done < warm + completions:
        best, where = thinking[0] if thinking else math.inf, -1
        rates = []
        for m, q in enumerate(queues):
            n = len(q)
            if ps[m]:
                r = [min(1.0, CORES[m] / n)] * n if n else []
            else:
                r = [1.0 if i < CORES[m] else 0.0 for i in range(n)]
            rates.append(r)
            for i, job in enumerate(q):
                if r[i] > 0 and now + job[0] / r[i] < best:
                    best, where = now + job[0] / r[i], m
        dt = best - now
        for q, r in zip(queues, rates):
            for job, ri in zip(q, r):
                job[0] -= dt * ri
        now = best
        if where < 0:
            heapq.heappop(thinking)
            k = int(rng.choice(C, p=MIX))
            if free > 0:
                free -= 1
                queues[0].append([rng.exponential(D[0, k]), k, now])
            else:
                waiting.append([0.0, k, now])
            continue
        q = queues[where]
        i = min(range(len(q)), key=lambda j: q[j][0] / rates[where][j]
                if rates[where][j] > 0 else math.inf)
        job = q.pop(i)
        if where + 1 < M:
            job[0] = rng.exponential(D[where + 1, job[1]])
            queues[where + 1].append(job)
            continue
        if waiting:                      # the worker passes to the head of the line
            nxt = waiting.pop(0)
            nxt[0] = rng.exponential(D[0, nxt[1]])
            queues[0].append(nxt)
        else:
            free += 1
        if done == warm:
            t_warm = now
        if done >= warm:
            total[job[1]] += now - job[2]
            count[job[1]] += 1
        done += 1
        heapq.heappush(thinking, now + rng.exponential(Z))
    return float(count.sum() / (now - t_warm)), total / count


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
