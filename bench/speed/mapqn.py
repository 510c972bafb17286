"""Speed, size and memory of the exact MAP-network solver (solvers.mapqn) on Mi et al.'s (2008) model.

Model (Mi et al. 2008, Fig. 9; sections 3.4 and 4.2): N users (EBs), exponential think time
Z = 0.5 s, then the front server and the database in series, FCFS, MAP(2) service processes
(rates per second):

  front server  D0 = [[-300, 10], [5, -120]]          D1 = [[280, 10], [10, 105]]
                mean 5.26 ms, SCV 1.43, I 3.3 -- mildly variable, almost renewal
  database      D0 = [[-500.625, 0.625], [0.5, -50.5]]  D1 = [[500, 0], [0, 50]]
                MMPP(2) service: fast phase 2 ms, slow phase 20 ms, mean sojourns 1.6 s / 2.0 s
                mean 4.00 ms, SCV 4.96, I 357 -- bursty

On average the front server is the bottleneck (5.3 ms > 4.0 ms), but in the database's slow
periods (20 ms per request, 56% of the time) the database is: a bottleneck switch, which the
exponential (MVA) model with the same means cannot represent (Mi et al. 2008, section 3.4).

For every N the chain has (N+1)(N+2)/2 x 4 states (N = 1200: 2.9 million). Each solve runs in a
fresh subprocess so that its peak RSS is its own; "rss" is the peak resident memory of that
process (the interpreter with numpy/scipy alone is ~0.1 GB). The peer is line-solver's
SolverCTMC on the same model (Delay Exp(1/Z) -> Queue FCFS MAP -> Queue FCFS MAP).

Iterative solvers were measured and rejected while choosing the method (N = 150, 45,904 states):
GMRES(100) with an ILU(1e-5) preconditioner needed 2,600 iterations (80 s), with a Gauss-Seidel
preconditioner it had not converged after 3,000 (residual 0.5); the stiff bursty chain defeats
them. SuperLU (COLAMD) on the whole generator: 1.2 s / 13 million fill entries at N = 150,
10 s / 75 million at N = 300 (time ~N^3, fill ~N^2.5: ~1.5e9 entries, 12+ GB, at N = 1200); the
level-by-level block elimination needs dense (4l x 4l) Schur blocks, ~1e14 flops at N = 1200.
The multifrontal solver (nested dissection, GTH-stabilised dense fronts) is used above 15k states.

Run from the repository root:
    python -m bench.speed.mapqn                 # N = 10 50 100 150 1200, peer at 10 and 50
    python -m bench.speed.mapqn --max-n 150 --skip-peer
Prints figures; no pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import multiprocessing as mp
import resource
import sys
import time
from typing import Any

import numpy as np


# ``solvers`` before ``line_solver``: importing line_solver puts its own package directory on
# sys.path, where its ``solvers`` subpackage would shadow ours (see tests/conftest.py).
from solvers.mapqn import solve_closed  # isort: skip
from solvers.mva import mva  # isort: skip
from solvers.processes import MAP  # isort: skip

THINK_TIME = 0.5
POPULATIONS = (10, 50, 100, 150, 1200)
PEER_POPULATIONS = (10, 50)


def front_server() -> MAP:
    return MAP([[-300.0, 10.0], [5.0, -120.0]], [[280.0, 10.0], [10.0, 105.0]])


def database() -> MAP:
    a, b = 1 / 1.6, 1 / 2.0
    return MAP([[-500.0 - a, a], [b, -50.0 - b]], [[500.0, 0.0], [0.0, 50.0]])


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB (Linux)


def _ours(population: int) -> dict[str, Any]:
    procs = [front_server(), database()]
    t0 = time.perf_counter()
    res = solve_closed(procs, population, THINK_TIME)
    elapsed = time.perf_counter() - t0
    return dict(time=elapsed, rss=_rss_gb(), states=res.states, method=res.method,
                X=res.throughput, U=res.utilization.tolist(), Q=res.queue_length.tolist(),
                B=res.bottleneck_probability.tolist(), R=res.response_time,
                residual=res.relative_residual, flags=res.flags)


def _peer(population: int) -> dict[str, Any]:
    import line_solver as ls  # after solvers (see above)

    procs = [front_server(), database()]
    model = ls.Network("paper000-fig9")
    delay = ls.Delay(model, "Think")
    queues = [ls.Queue(model, name, ls.SchedStrategy.FCFS) for name in ("front", "db")]
    job = ls.ClosedClass(model, "EB", population, delay)
    delay.setService(job, ls.Exp(1.0 / THINK_TIME))
    for queue, proc in zip(queues, procs):
        queue.setService(job, ls.MAP(np.array(proc.D0), np.array(proc.D1)))
    model.link(ls.Network.serial_routing([delay, *queues]))
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # its progress lines
        qlen, util, _, tput, _, _ = ls.SolverCTMC(model, verbose=False).getAvg()
    elapsed = time.perf_counter() - t0
    return dict(time=elapsed, rss=_rss_gb(), X=float(tput[1, 0]),
                U=np.asarray(util)[1:, 0].tolist(), Q=np.asarray(qlen)[1:, 0].tolist())


def _isolated(fn: Any, population: int) -> dict[str, Any]:
    """Run ``fn(population)`` in a fresh process (own peak RSS)."""
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn, (population,))


def _rel(a: Any, b: Any) -> float:
    a, b = np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def main() -> None:
    parser = argparse.ArgumentParser(description="Exact MAP-network solver benchmark")
    parser.add_argument("--max-n", type=int, default=max(POPULATIONS),
                        help="largest population solved (default 1200)")
    parser.add_argument("--skip-peer", action="store_true", help="do not run line-solver")
    parser.add_argument("--peer-budget", type=float, default=120.0,
                        help="run line-solver at N = 100 if its predicted time is below this (s)")
    args = parser.parse_args()

    fs, db = front_server(), database()
    means = np.array([fs.mean, db.mean])
    print("Mi et al. (2008), Fig. 9: delay Z = 0.5 s -> front server -> database (FCFS, MAP(2) service)")
    for name, proc in (("front server", fs), ("database", db)):
        print(f"  {name:12s}: mean {proc.mean * 1e3:5.2f} ms  SCV {proc.scv:5.2f}  I {proc.idc:6.1f}"
              f"  D0 {proc.D0.tolist()}  D1 {proc.D1.tolist()}")
    print()
    header = (f"{'N':>5} {'states':>9} {'method':>12} {'time s':>8} {'rss GB':>7} {'X /s':>8} "
              f"{'U fs':>6} {'U db':>6} {'Q fs':>8} {'Q db':>8} {'B fs':>6} {'B db':>6} "
              f"{'resid':>8} {'X mva':>8} {'mva err':>8}")
    print("perfcast solvers.mapqn.solve_closed (method auto)")
    print(header)
    ours: dict[int, dict[str, Any]] = {}
    for n in [p for p in POPULATIONS if p <= args.max_n]:
        r = _isolated(_ours, n)
        ours[n] = r
        x_mva = float(mva(np.asarray(means).reshape(-1, 1), [n], [THINK_TIME]).throughput[0])
        print(f"{n:5d} {r['states']:9d} {r['method']:>12} {r['time']:8.3f} {r['rss']:7.2f} "
              f"{r['X']:8.2f} {r['U'][0]:6.3f} {r['U'][1]:6.3f} {r['Q'][0]:8.2f} {r['Q'][1]:8.2f} "
              f"{r['B'][0]:6.3f} {r['B'][1]:6.3f} {r['residual']:8.1e} {x_mva:8.2f} "
              f"{x_mva / r['X'] - 1:+8.1%}", flush=True)
        for flag in r["flags"]:
            print(f"      flag: {flag}")
    if args.skip_peer:
        return
    print()
    print("line-solver SolverCTMC on the same model")
    print(f"{'N':>5} {'peer s':>9} {'ours s':>8} {'peer/ours':>10} {'peer GB':>8} "
          f"{'dX rel':>9} {'dU rel':>9} {'dQ rel':>9}")
    timings: dict[int, float] = {}
    todo = [p for p in PEER_POPULATIONS if p <= args.max_n]
    extra = 100 if args.max_n >= 100 else None
    while todo:
        n = todo.pop(0)
        mine = ours.get(n) or _isolated(_ours, n)
        peer = _isolated(_peer, n)
        timings[n] = peer["time"]
        print(f"{n:5d} {peer['time']:9.2f} {mine['time']:8.3f} {peer['time'] / mine['time']:10.0f} "
              f"{peer['rss']:8.2f} {_rel(mine['X'], peer['X']):9.1e} {_rel(mine['U'], peer['U']):9.1e} "
              f"{_rel(mine['Q'], peer['Q']):9.1e}", flush=True)
        if not todo and extra is not None and len(timings) >= 2:
            (n1, t1), (n2, t2) = sorted(timings.items())[-2:]
            slope = math.log(t2 / t1) / math.log(n2 / n1)
            predicted = t2 * (extra / n2) ** slope
            if predicted <= args.peer_budget:
                todo.append(extra)
            else:
                print(f"  N = {extra}: skipped, predicted {predicted:.0f} s "
                      f"(time ~ N^{slope:.1f}) > budget {args.peer_budget:.0f} s")
            extra = None


if __name__ == "__main__":
    main()
