"""The decomposition on random networks with two or three bursty tiers: does it solve, is it
consistent, and how far off are the inconsistent ones from the simulated physical system.

    python -m bench.accuracy.random_networks                  # 4 seeds x 40 networks
    python -m bench.accuracy.random_networks --simulate 8     # the 8 least consistent, simulated

Each network (seeded): 2-4 tiers, 2-3 of them bursty; cores 1, 2, 4, 8 or 16 a tier; mean
service 2-20 ms per core (so a tier's capacity is 50-500 requests/s); a bursty tier's MAP(2)
fitted (``estimators.mapfit.fit_map2``) to ``I`` log-uniform in 5-500 and a p95 of 2-4 means;
think time 0.2-5 s. Each is solved by ``solvers.decomposition.solve_decomposed`` at 0.5 / 0.9 /
1.1 / 1.5 times its knee ``N* = X_max (Z + sum S_m)`` (at most 3,000 users), at the
predictions' fixed-point tolerance and at the capacity search's
(``streams.predict.model.PREDICTION_TOL`` / ``SEARCH_TOL``). Printed: solves that raised, the
flags, Little's law (``|sum Q + X Z - N| / N``), the response-time difference between the two
tolerances, and for the ``--simulate`` solves with the largest Little's-law residual their
throughput against ``solvers.simulation.physical`` (3 x ``--duration`` s). Figures, no
pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import re
from dataclasses import dataclass

import numpy as np

from estimators.mapfit import fit_map2
from solvers.bounds import knee
from solvers.decomposition import solve_decomposed
from solvers.processes import MAP
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical
from streams.predict.model import PREDICTION_TOL, SEARCH_TOL

KNEES = (0.5, 0.9, 1.1, 1.5)
MAX_USERS = 3_000


@dataclass(frozen=True)
class Network:
    seed: int
    index: int
    processes: list[MAP]
    cores: list[int]
    think: float

    @property
    def knee(self) -> float:
        return knee([p.mean for p in self.processes], self.think, self.cores)

    def label(self) -> str:
        kinds = [f"{c}c {'I ' + format(float(p.idc), '.0f') if p.order > 1 else 'exp'}"
                 for p, c in zip(self.processes, self.cores)]
        return f"seed {self.seed} #{self.index}: {', '.join(kinds)}; Z {self.think:.2f} s"


def networks(seed: int, count: int) -> list[Network]:
    rng = np.random.default_rng(seed)
    out = []
    for index in range(count):
        tiers = int(rng.integers(2, 5))
        bursty = rng.choice(tiers, int(rng.integers(2, min(tiers, 3) + 1)), replace=False)
        cores = [int(rng.choice([1, 2, 4, 8, 16])) for _ in range(tiers)]
        means = [float(rng.uniform(0.002, 0.02)) * c for c in cores]
        procs = []
        for m in range(tiers):
            if m in bursty:
                idc = float(np.exp(rng.uniform(np.log(5), np.log(500))))
                p95 = means[m] * float(rng.uniform(2.0, 4.0))
                procs.append(fit_map2(mean=means[m], idc=idc, p95=p95).process)
            else:
                procs.append(MAP.exponential(means[m]))
        out.append(Network(seed, index, procs, cores, float(rng.uniform(0.2, 5.0))))
    return out


def simulated_throughput(net: Network, n: int, duration: float) -> tuple[float, float]:
    tiers = tuple(Tier(f"t{m}", c, p if p.order > 1 else p.mean)
                  for m, (p, c) in enumerate(zip(net.processes, net.cores)))
    res = simulate_physical(PhysicalNetwork(tiers, ("a",), (1.0,), net.think, n), duration,
                            warmup=duration / 10, replications=3, seed=1)
    return res.throughput[0].mean, res.throughput[0].half_width


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-3", help="seeds, e.g. 0-3 or 0,5")
    ap.add_argument("--networks", type=int, default=40, help="networks per seed")
    ap.add_argument("--simulate", type=int, default=5,
                    help="simulate the solves with the largest Little's-law residual")
    ap.add_argument("--duration", type=float, default=5000.0, help="simulated s per run")
    args = ap.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi) + 1) if hi else [int(s) for s in args.seeds.split(",")]
    solves, raised, flagged, diffs = [], [], {}, []
    for seed in seeds:
        for net in networks(seed, args.networks):
            for share in KNEES:
                n = max(2, int(share * net.knee))
                if n > MAX_USERS:
                    continue
                try:
                    fine = solve_decomposed(net.processes, n, net.think, servers=net.cores,
                                            tol=PREDICTION_TOL)
                    loose = solve_decomposed(net.processes, n, net.think, servers=net.cores,
                                             tol=SEARCH_TOL)
                except (RuntimeError, ValueError, np.linalg.LinAlgError) as exc:
                    raised.append((net, n, str(exc)))
                    continue
                solves.append((net, n, share, fine))
                for f in fine.flags:           # by kind: numbers as '#'
                    key = re.sub(r"\d[\d.e+-]*", "#", f)[:90]
                    flagged[key] = flagged.get(key, 0) + 1
                r_fine = n / fine.throughput - net.think
                r_loose = n / loose.throughput - net.think
                diffs.append(abs(r_loose / r_fine - 1.0))
    little = np.array([s[3].little_residual for s in solves])
    print(f"{len(solves) + len(raised)} solves ({len(list(seeds))} seeds x {args.networks} "
          f"networks x knees {KNEES}, N <= {MAX_USERS:,}); raised: {len(raised)}")
    for net, n, msg in raised:
        print(f"  raised: {net.label()}, N = {n}: {msg}")
    print(f"not converged: {sum(not s[3].converged for s in solves)}; Little's law off by "
          f"> 1% of N: {int((little > 0.01).sum())}, > 5%: {int((little > 0.05).sum())}, "
          f"largest {little.max():.3f}")
    print("flags (solves):")
    for key, count in sorted(flagged.items(), key=lambda kv: -kv[1]):
        print(f"  {count:4d}  {key}")
    d = np.array(diffs)
    print(f"response time at SEARCH_TOL vs PREDICTION_TOL: median {np.median(d):.2e}, "
          f"90th percentile {np.quantile(d, 0.9):.2e}, largest {d.max():.2e}")
    if args.simulate:
        print(f"\nthe {args.simulate} least consistent solves against the simulated physical "
              f"system (3 x {args.duration:g} s):")
        print("| network | N (knees) | Little | X decomposition | X simulated | error |")
        print("|---|---|---|---|---|---|")
        for net, n, share, res in sorted(solves, key=lambda s: -s[3].little_residual)[
                :args.simulate]:
            x, hw = simulated_throughput(net, n, args.duration)
            print(f"| {net.label()} | {n} ({share:g}) | {res.little_residual:.3f} | "
                  f"{res.throughput:.2f} | {x:.2f} +- {hw:.2f} | "
                  f"{res.throughput / x - 1:+.1%} |")


if __name__ == "__main__":
    main()
