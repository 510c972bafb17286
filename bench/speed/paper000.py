"""Mi et al.'s (2008) headline table: MVA vs the exact MAP network (and simulation) on Fig. 9's model.

Run: ``python -m bench.speed.paper000 [--sim]``. Prints, per scenario of ``solvers.paper000`` and
population N, the exact throughput of the MAP network, MVA's throughput and relative error, and
the bottleneck probabilities; ``--sim`` adds a simulation column (95% CI, seeded) as ground truth.
"""

from __future__ import annotations

import argparse

from solvers.paper000 import THINK_TIME, mva_error_table, scenarios
from solvers.simulation import ClosedNetwork, Queue, simulate_closed

POPULATIONS = [10, 25, 50, 75, 100, 125, 150, 200]


def _simulated(scenario, population: int, seed: int) -> str:
    network = ClosedNetwork([Queue("front", scenario.front, "FCFS"),
                             Queue("db", scenario.database, "FCFS")], [population], [THINK_TIME])
    sim = simulate_closed(network, 600.0, warmup=60.0, replications=6, seed=seed)
    return f"{float(sim.throughput[0]):7.2f} ± {float(sim.throughput_hw[0]):5.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sim", action="store_true", help="add simulated throughput (slower)")
    args = parser.parse_args()
    for name, scenario in scenarios().items():
        print(f"\nscenario {name}: Z = {THINK_TIME} s, front exp mean "
              f"{1000 * scenario.front.mean:.1f} ms, db MAP mean {1000 * scenario.database.mean:.1f}"
              f" ms, I_db = {scenario.database.idc:.1f}, SCV_db = {scenario.database.scv:.2f}")
        head = f"{'N':>5} {'X exact':>9} {'X MVA':>9} {'MVA err':>8} {'B_front':>8} {'B_db':>6}"
        print(head + ("   X simulated (95% CI)" if args.sim else ""))
        for row in mva_error_table(scenario, POPULATIONS):
            line = (f"{row['population']:>5} {row['throughput']:9.2f} {row['throughput_mva']:9.2f} "
                    f"{100 * row['mva_error']:+7.1f}% {row['bottleneck_front']:8.2f} "
                    f"{row['bottleneck_db']:6.2f}")
            if args.sim:
                line += "   " + _simulated(scenario, row["population"], seed=row["population"])
            print(line)


if __name__ == "__main__":
    main()
