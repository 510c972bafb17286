"""Large closed populations through the open route (fixed-population mean, Whitt 1984)
against the simulated physical system and today's decomposition.

    python -m bench.accuracy.large_n                       # N = 1,000-5,000, 3 x 2,000 s
    python -m bench.accuracy.large_n --populations 3000,5000 --seed 2 --no-capacity

Network: ``bench/large_n_network.py`` (4 tiers, app 8 cores and db 16 cores bursty, Mi et
al.'s (2008) MAP(2), I ~ 200; Z = 7 s; knee ~5,600). Per population:

* the simulated physical system (:func:`solvers.simulation.physical.simulate_physical`, 3
  independent replications of ``--duration`` s after a tenth of that as warm-up, seeded
  ``--seed``; 95% half widths);
* :func:`solvers.open.fixed_population.solve_fixed_population` (the open route) and
  :func:`solvers.decomposition.solve_decomposed` (tolerance 1e-6, as a prediction), their X
  and R errors against the simulation, per tier residence times.

And the capacity at ``--sla`` (mean R): the pipeline's ``model_capacity`` through the open
route and through the decomposition only (first), the truth where the simulated R crosses
the SLA (linear between the two populations around it; last). Figures, no pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys

import numpy as np

from bench.large_n_network import decomposition_only, network, system_model
from solvers.decomposition import solve_decomposed
from solvers.open.fixed_population import solve_fixed_population
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical
from streams.predict.model import model_capacity


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--populations", default="1000,2000,3000,4000,5000")
    ap.add_argument("--duration", type=float, default=2000.0, help="simulated s a replication")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sla", type=float, default=0.5, help="mean R bound of the capacity (s)")
    ap.add_argument("--no-capacity", action="store_true", help="the table only")
    args = ap.parse_args()
    print(f"command: python -m {__spec__.name} {' '.join(sys.argv[1:])}")
    procs, cores, z = network()
    tiers = tuple(Tier(f"t{m}", c, p if p.order > 1 else p.mean)
                  for m, (p, c) in enumerate(zip(procs, cores)))
    open_cap = dec_cap = None
    if not args.no_capacity:
        open_cap, _ = model_capacity(system_model(args.sla))
        with decomposition_only():
            dec_cap, _ = model_capacity(system_model(args.sla))
        print(f"capacity at mean R <= {args.sla:g} s: open route {open_cap}, decomposition "
              f"{dec_cap}\n", flush=True)
    print("| N | simulated X | simulated R (s) | open X / R error | decomposition X / R error |"
          " R_m simulated | R_m open | R_m decomposition |")
    print("|---:|---:|---:|---:|---:|---|---|---|")
    sim_r: dict[int, float] = {}
    for n in (int(v) for v in args.populations.split(",")):
        sim = simulate_physical(PhysicalNetwork(tiers, ("a",), (1.0,), z, n), args.duration,
                                warmup=args.duration / 10, replications=3, seed=args.seed)
        X, R = sim.total_throughput, sim.total_response_time
        sim_r[n] = R.mean
        fpm = solve_fixed_population(procs, n, z, servers=cores)
        dec = solve_decomposed(procs, n, z, servers=cores)

        def err(x: float, r: float) -> str:
            return f"{100 * (x / X.mean - 1):+.2f}% / {100 * (r / R.mean - 1):+.1f}%"

        def ms(values) -> str:
            return " ".join(f"{1000 * float(v):.1f}" for v in values)

        print(f"| {n:,} | {X.mean:.1f} ± {X.half_width:.1f} | {R.mean:.3f} ± "
              f"{R.half_width:.3f} | {err(fpm.throughput, fpm.response_time)} | "
              f"{err(dec.throughput, dec.response_time)} | "
              f"{ms(e.mean for e in sim.residence_time)} | {ms(fpm.residence_time)} | "
              f"{ms(dec.residence_time)} |", flush=True)
    pops = sorted(sim_r)
    truth = None
    for a, b in zip(pops, pops[1:]):
        if sim_r[a] <= args.sla < sim_r[b]:
            truth = a + (b - a) * (args.sla - sim_r[a]) / (sim_r[b] - sim_r[a])
    if args.no_capacity:
        return
    t = "not bracketed" if truth is None else f"{truth:.0f}"

    def off(c: int | None) -> str:
        return "" if truth is None or c is None else f" ({100 * (c / truth - 1):+.1f}%)"

    print(f"\ncapacity at mean R <= {args.sla:g} s: simulated {t}; open route {open_cap}"
          f"{off(open_cap)}; decomposition {dec_cap}{off(dec_cap)}")


if __name__ == "__main__":
    main()
