"""Per-class p95/p99 of processor-sharing tiers: the model's law against simulation (numbers, no
pass/fail).

    python -m bench.accuracy.ps_tiers --markdown
    python -m bench.accuracy.ps_tiers --cases one --seeds 1 --requests 20000

Two closed systems, users thinking ``Z`` between requests, exponential work per class and tier:

* ``one``: one 1-core PS tier (a host's CPU), 3 classes of 11, 36 and 120 ms at a 30/30/40 mix
  (the shape of LibReDE's synthetic application), populations from 20% to 90% utilization.
* ``net``: a 2-core PS app tier then a 1-core FCFS db tier, 2 classes (50 / 300 ms at the app,
  20 ms at the db, 60/40), populations from 0.3 to 1.5 knees.

The truth: a discrete-event simulation of the same network (:func:`simulate`; PS: each of
``n`` requests on ``c`` cores served at ``min(1, c / n)``; FCFS: the first ``c`` in order),
``--seeds`` replications of ``--requests`` completions after a 5% warm-up, per-class p95/p99
over the pooled requests, the spread between seeds shown. The model: the closed law with the
PS tier declared (``ps``: :mod:`solvers.response_time.ps`, the exact chain or the aggregated
one past its budget, stated) and, beside it, the FCFS law the tier had before.
"""

from __future__ import annotations

import argparse
import heapq
import math
import subprocess
import time

import numpy as np

from bench.tables import Table
from solvers.response_time import response_time_quantiles
from solvers.response_time.ps import EXACT_STATE_LIMIT

CASES = {
    "one": dict(D=np.array([[0.011, 0.036, 0.120]]), mix=np.array([0.3, 0.3, 0.4]),
                cores=np.array([1.0]), ps=np.array([True]), Z=1.0,
                populations=[4, 10, 16, 20], classes=("wc3", "wc1", "wc2")),
    "net": dict(D=np.array([[0.05, 0.3], [0.02, 0.02]]), mix=np.array([0.6, 0.4]),
                cores=np.array([2.0, 1.0]), ps=np.array([True, False]), Z=1.0,
                populations=[4, 8, 12, 20], classes=("short", "long")),
}


def simulate(D: np.ndarray, mix: np.ndarray, cores: np.ndarray, ps: np.ndarray, Z: float,
             population: int, completions: int, seed: int, pool: int = 0) -> list[np.ndarray]:
    """Per class the response times (think time excluded) of ``completions`` requests of the
    closed network (module docstring) after a 5% warm-up. ``pool``: a pool of that many
    workers held across every tier (0: none): a request takes one before the first tier,
    waiting FCFS for one (in its response time), and gives it back after the last, to the
    head of the line."""
    rng = np.random.default_rng(seed)
    M, C = D.shape
    thinking = list(rng.exponential(Z, population))
    heapq.heapify(thinking)
    queues: list[list[list[float]]] = [[] for _ in range(M)]    # [work left, class, start]
    waiting: list[list[float]] = []                             # FCFS for a worker
    free = pool
    now, done, warm = 0.0, 0, completions // 20
    out: list[list[float]] = [[] for _ in range(C)]
    while done < warm + completions:
        best, where = thinking[0] if thinking else math.inf, -1
        rates = []
        for m, q in enumerate(queues):
            n = len(q)
            if ps[m]:
                r = [min(1.0, cores[m] / n)] * n if n else []
            else:
                r = [1.0 if i < cores[m] else 0.0 for i in range(n)]
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
            k = int(rng.choice(C, p=mix))
            if pool and not free:
                waiting.append([0.0, k, now])
                continue
            free -= 1
            queues[0].append([rng.exponential(D[0, k]), k, now])
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
            nxt[0] = rng.exponential(D[0, int(nxt[1])])
            queues[0].append(nxt)
        else:
            free += 1
        if done >= warm:
            out[job[1]].append(now - job[2])
        done += 1
        heapq.heappush(thinking, now + rng.exponential(Z))
    return [np.array(o) for o in out]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=20_000, help="completions per seed")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    table = Table("PS tiers: model's p95/p99 against simulation (error of the model)",
                  ["case", "N", "U (ps tier)", "class", "p95 sim (± between seeds)",
                   "p95 ps", "p95 fcfs law", "p99 sim", "p99 ps", "p99 fcfs law", "chain"])
    for name in args.cases:
        c = CASES[name]
        D, p = c["D"], c["mix"]
        Dm = D @ p
        for N in c["populations"]:
            runs = [simulate(D, p, c["cores"], c["ps"], c["Z"], N, args.requests, s)
                    for s in range(1, args.seeds + 1)]
            pooled = [np.concatenate([r[k] for r in runs]) for k in range(D.shape[1])]
            args_law = (Dm, c["cores"], c["Z"], N, D)
            ps = response_time_quantiles(*args_law, levels=(0.95, 0.99), ps=c["ps"], mix=p)
            fc = response_time_quantiles(*args_law, levels=(0.95, 0.99))
            X = sum(len(r) for r in pooled)  # throughput from the simulated means, Little
            R = sum(float(r.sum()) for r in pooled) / X
            util = N / (c["Z"] + R) * Dm[0] / c["cores"][0]
            K = int((p > 0).sum())
            exact = math.comb(N - 1 + K, K) <= EXACT_STATE_LIMIT
            for k, cls in enumerate(c["classes"]):
                q = np.quantile(pooled[k], [0.95, 0.99])
                seeds = np.array([np.quantile(r[k], 0.95) for r in runs])
                spread = (seeds.max() - seeds.min()) / 2 / q[0]

                def err(v: float, t: float) -> str:
                    return f"{100 * (v - t) / t:+.1f}%"
                table.add(name, N, f"{util:.2f}", cls, f"{1000 * q[0]:.1f} ms (±{100 * spread:.1f}%)",
                          err(ps.quantiles[k, 0], q[0]), err(fc.quantiles[k, 0], q[0]),
                          f"{1000 * q[1]:.1f} ms", err(ps.quantiles[k, 1], q[1]),
                          err(fc.quantiles[k, 1], q[1]), "exact" if exact else "aggregated")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(table.render(args.markdown))
    print(f"\n{args.seeds} seeds x {args.requests} requests; commit {commit}; "
          f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
