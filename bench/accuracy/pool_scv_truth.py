"""The simulated truth of :mod:`bench.accuracy.pool_scv`'s cases from more seeds and longer runs:
is a capacity or response-time error there the model's or the simulation's noise?

    python -m bench.accuracy.pool_scv_truth --cases spread-2 --populations 10-23 --markdown
    python -m bench.accuracy.pool_scv_truth --cases mix-2 --populations 6-20,25,30,40 --markdown
    python -m bench.accuracy.pool_scv_truth --seeds 1-10 --duration 6000    # spread-2

Per case, the SLO is :mod:`bench.accuracy.pool_scv`'s (3x each class's mean simulated at 5 users,
seed 0, the case's own duration): the capacity is defined against it, the model's too; the same
rule on a 10-replication run of 10x the duration is printed beside it (the SLO's own noise). Per
population (``--populations``, default the case's range widened to the held chain's capacity
+-40%): ``--seeds`` seeds of 3 replications of ``--duration`` simulated seconds
(:func:`solvers.simulation.physical.simulate_physical`): each class's mean response time over
the seeds with the 95% interval of that mean, and the held chain's
(:func:`solvers.pools_spread.solve_pools_spread`, the pipeline's) and the two-moment factor's
(:func:`solvers.pools_general.solve_pools_general`) errors on it; the pool's wait. The
capacity: where the seeds' mean of the worst class's ratio to its SLO crosses 1 (linear between
populations), and per seed :func:`solvers.simulation.capacity.simulated_capacity`'s bisection
at ``--duration`` and at the case's own duration (what :mod:`bench.accuracy.pool_scv` reports),
against the models'. Figures, no pass/fail (targets: R 10%, capacity 10%).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys

import numpy as np

from bench.accuracy.pool_matrix import interval, worst
from bench.accuracy.pool_scv import CASES, model, network, slo
from solvers.pools import largest_meeting
from solvers.simulation.capacity import simulated_capacity
from solvers.simulation.physical import simulate_physical


def _range(text: str) -> list[int]:
    """``"1-6"``, ``"1,3,5"`` or ``"8-12,16,20"`` as sorted integers."""
    out: set[int] = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return sorted(out)


def crossing(ns: list[int], ratio: list[float]) -> float:
    """The first population where ``ratio`` rises through 1 (linear between populations);
    ``nan`` where it does not within them."""
    for n0, r0, n1, r1 in zip(ns, ratio, ns[1:], ratio[1:]):
        if r0 <= 1 < r1:
            return n0 + (1 - r0) * (n1 - n0) / (r1 - r0)
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="spread-2")
    parser.add_argument("--seeds", default="1-6")
    parser.add_argument("--duration", type=float, default=6000.0)
    parser.add_argument("--populations", default=None)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    seeds = _range(args.seeds)
    rows = []
    for case in [c for c in CASES if c.name in args.cases.split(",")]:
        target = slo(case)
        long = simulate_physical(network(case, 5), 10 * case.duration,
                                 warmup=case.duration, replications=10, seed=0)
        steady = 3.0 * np.array([e.mean for e in long.response_time])
        caps = {k: largest_meeting(lambda n, k=k: bool(np.all(
            model(case, n, k).response_time <= target)), 10_000) for k in ("chain", "spread")}
        pops = _range(args.populations) if args.populations else list(range(
            max(2, min(case.populations[0], int(0.6 * caps["chain"]))),
            max(case.populations[-1], int(1.4 * caps["chain"])) + 1,
            1 if caps["chain"] < 40 else max(1, caps["chain"] // 20)))
        print(f"\n{case.name}: SLO (pool_scv's, seed 0, {case.duration:g} s) "
              f"{np.round(target * 1e3, 1).tolist()} ms; the same rule from 10 x "
              f"{10 * case.duration:g} s: {np.round(steady * 1e3, 1).tolist()} ms", flush=True)
        print(f"{'N':>4} {'R sim per class ms (95%)':>44} {'chain R err':>26} "
              f"{'factor R err':>26} {'wait sim/chain ms':>18} {'ratio sim/chain':>16}")
        ratio_sim, ratio_chain, worst_chain, worst_factor = [], [], 0.0, 0.0
        for n in pops:
            sims = [simulate_physical(network(case, n), args.duration,
                                      warmup=args.duration / 10, replications=3, seed=s)
                    for s in seeds]
            R = np.array([[e.mean for e in s.response_time] for s in sims])
            mean = R.mean(axis=0)
            half = np.array([interval(list(R[:, c]))[1] for c in range(R.shape[1])])
            W = float(np.mean([s.pool_waiting[0].mean / s.total_throughput.mean
                               for s in sims]))
            chain, factor = model(case, n, "chain"), model(case, n, "spread")
            e_chain = chain.response_time / mean - 1
            e_factor = factor.response_time / mean - 1
            worst_chain = worst([worst_chain, *map(float, e_chain)])
            worst_factor = worst([worst_factor, *map(float, e_factor)])
            ratio_sim.append(float(np.max(mean / target)))
            ratio_chain.append(float(np.max(chain.response_time / target)))
            print(f"{n:>4} " + " ".join(f"{m * 1e3:.1f}±{h * 1e3:.1f}" for m, h in zip(mean, half))
                  + "  " + "/".join(f"{e:+.1%}" for e in e_chain)
                  + "  " + "/".join(f"{e:+.1%}" for e in e_factor)
                  + f"  {W * 1e3:.2f}/{float(chain.pool_waiting_time[0]) * 1e3:.2f}"
                  + f"  {ratio_sim[-1]:.3f}/{ratio_chain[-1]:.3f}", flush=True)
        cross = crossing(pops, ratio_sim)
        bisect = {d: [simulated_capacity(lambda n: network(case, n), list(target),
                                         start=max(1, int(caps["chain"] * 0.9)), duration=d,
                                         warmup=d / 10, seed=s).value for s in seeds]
                  for d in (args.duration, case.duration)}
        print(f"capacity: the seeds' mean curve crosses at {cross:.1f}; bisection per seed at "
              f"{args.duration:g} s {bisect[args.duration]} "
              f"({interval(bisect[args.duration])[0]:.1f} ± "
              f"{interval(bisect[args.duration])[1]:.1f}), at {case.duration:g} s "
              f"{bisect[case.duration]} ({interval(bisect[case.duration])[0]:.1f} ± "
              f"{interval(bisect[case.duration])[1]:.1f}); chain {caps['chain']} "
              f"({caps['chain'] / cross - 1:+.1%} on the crossing), factor {caps['spread']} "
              f"({caps['spread'] / cross - 1:+.1%})", flush=True)
        rows.append((case.name, pops, worst_chain, worst_factor, cross, bisect, caps, args))
    if args.markdown:
        print("\n| case | N | chain / factor R worst | sim capacity: crossing; bisection "
              "long / short (95%) | chain | factor |")
        print("|---|---|---|---|---|---|")
        for name, pops, wc, wf, cross, bisect, caps, a in rows:
            lng, sht = interval(bisect[a.duration]), interval(bisect[[
                d for d in bisect if d != a.duration][0]]) if len(bisect) > 1 else (0, 0)
            print(f"| {name} | {pops[0]}-{pops[-1]} | {wc:+.1%} / {wf:+.1%} | {cross:.1f}; "
                  f"{lng[0]:.1f} ± {lng[1]:.1f} / {sht[0]:.1f} ± {sht[1]:.1f} | {caps['chain']} "
                  f"{caps['chain'] / cross - 1:+.1%} | {caps['spread']} "
                  f"{caps['spread'] / cross - 1:+.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
