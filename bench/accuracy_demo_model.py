"""Is the demo's model-error alert a real model error or noise? The demo shop's long-run
simulated per-class response times against the MAP network model with the true parameters.

Run from the repository root::

    python bench/accuracy_demo_model.py

The shop of ``streams/cli/demo.py`` (front: exponential per-class demands; db: paper 000's
bursty MAP(2) scaled to each class's demand, one process per class, processor sharing; think
time 0.5 s) simulated by :func:`solvers.simulation.network.simulate_closed` at 60 users (the
demo's steady phase) and 100 users (its ramp), 4 seeded replications of 3,000 s; against
:class:`streams.predict.model.SystemModel` with the true demands and the true MAP(2) at the db
(what the pipeline would solve if its estimates were exact).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solvers.paper000 import THINK_TIME, scenarios  # noqa: E402
from solvers.processes import MAP  # noqa: E402
from solvers.simulation.network import ClosedNetwork, Queue, simulate_closed  # noqa: E402
from streams.cli.demo import CLASSES  # noqa: E402
from streams.predict.model import SystemModel  # noqa: E402

POPULATIONS = (60, 100)


def main() -> None:
    bursty = scenarios()["bottleneck_switch"].database
    names = [c[0] for c in CLASSES]
    D = np.array([[c[2] for c in CLASSES], [c[3] for c in CLASSES]])
    model = SystemModel(tiers=["front", "db"], classes=names, D_mc=D,
                        mix=np.array([c[1] for c in CLASSES]), servers=np.array([1.0, 1.0]),
                        think_time=THINK_TIME, sla=np.full(len(CLASSES), 0.3),
                        processes=[MAP.exponential(1.0), bursty], map_limit=10_000)
    print("| users | class | simulated R (s) | 95% half-width | model R (s) | model / simulated |")
    print("|---|---|---|---|---|---|")
    for n in POPULATIONS:
        net = ClosedNetwork(queues=[Queue("front", [c[2] for c in CLASSES]),
                                    Queue("db", [bursty.scaled(c[3]) for c in CLASSES])],
                            populations=n, think_times=THINK_TIME, classes=names,
                            mix=[c[1] for c in CLASSES])
        sim = simulate_closed(net, 3000.0, replications=4, seed=3)
        point = model.at(n)
        for i, c in enumerate(names):
            print(f"| {n} | {c} | {sim.response_time[i]:.4f} | {sim.response_time_hw[i]:.4f} | "
                  f"{point.response[i]:.4f} | {point.response[i] / sim.response_time[i]:.2f} |")


if __name__ == "__main__":
    main()
