"""Does the model, given the demo shop's *true* parameters, predict the demo's simulation?
And what does it get wrong on the shape the demo simulated before (one MAP per class under PS)?

Run from the repository root::

    python -m bench.accuracy.demo_model
    python -m bench.accuracy.demo_model --populations 60 --replications 2   # a shorter look

Two systems with the same true demands (``streams.cli.demo.CLASSES``), think time 0.5 s and
Mi et al.'s (2008) bursty MAP(2) (``I ~ 200``) at the db, at 60 users (the demo's steady phase) and
100 users (its ramp), 4 seeded replications of 3,000 s each (seed 3; ``--populations``,
``--replications``, ``--duration``, ``--seed``):

* **physical** -- the demo's shop (:func:`streams.cli.demo.demo_network`, simulated by
  :func:`solvers.simulation.physical.simulate_physical`): one core, one FCFS queue and *one*
  service-time sequence per tier; a request's service time is the tier's next value times its
  class's multiplier, so a slow run of the db hits every class (Mi et al. (2008) section 4.1);
* **one MAP, PS** -- the MAP queueing network itself (:mod:`solvers.simulation.network`, each
  tier one process shared by all classes, processor sharing, class-independent service): it
  separates the two differences between the old demo and the model, one process per class
  and processor sharing;
* **per-class MAP, PS** -- the demo before this change (:mod:`solvers.simulation.network`):
  the db runs one MAP(2), scaled to the class's demand, *per class*, under processor sharing;
  a class's phase advances only while that class is served, so a slow run slows one class and
  the others share the processor past it.

Both against :class:`streams.predict.model.SystemModel` with the true demands and the true
MAP(2) at the db (what the pipeline solves when its estimates are exact). Prints one table
row per population and class.
"""

from __future__ import annotations

import argparse

import numpy as np


from solvers.paper000 import THINK_TIME, scenarios
from solvers.processes import MAP
from solvers.simulation.network import ClosedNetwork, Queue, simulate_closed
from solvers.simulation.physical import simulate_physical
from streams.cli.demo import CLASSES, demo_network
from streams.predict.model import SystemModel

POPULATIONS = (60, 100)
DURATION_S, REPLICATIONS, SEED = 3000.0, 4, 3


def _per_class_ps(n: int) -> ClosedNetwork:
    """The shape the demo simulated before: one MAP(2) per class at the db, PS."""
    bursty = scenarios()["bottleneck_switch"].database
    return ClosedNetwork(queues=[Queue("front", [c[2] for c in CLASSES]),
                                 Queue("db", [bursty.scaled(c[3]) for c in CLASSES])],
                         populations=n, think_times=THINK_TIME, classes=[c[0] for c in CLASSES],
                         mix=[c[1] for c in CLASSES])


def _shared_ps(n: int) -> ClosedNetwork:
    """One service process per tier (the db's MAP(2)) shared by every class, PS."""
    means = [sum(c[1] * c[col] for c in CLASSES) for col in (2, 3)]
    bursty = scenarios()["bottleneck_switch"].database
    return ClosedNetwork(queues=[Queue("front", means[0]), Queue("db", bursty.scaled(means[1]))],
                         populations=n, think_times=THINK_TIME, classes=[c[0] for c in CLASSES],
                         mix=[c[1] for c in CLASSES])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--populations", type=int, nargs="+", default=list(POPULATIONS),
                    metavar="N", help="users (default 60 100)")
    ap.add_argument("--duration", type=float, default=DURATION_S,
                    help="simulated seconds per replication (default 3000)")
    ap.add_argument("--replications", type=int, default=REPLICATIONS, help="(default 4)")
    ap.add_argument("--seed", type=int, default=SEED, help="(default 3)")
    args = ap.parse_args(argv)
    names = [c[0] for c in CLASSES]
    D = np.array([[c[2] for c in CLASSES], [c[3] for c in CLASSES]])
    model = SystemModel(tiers=["front", "db"], classes=names, D_mc=D,
                        mix=np.array([c[1] for c in CLASSES]), servers=np.array([1.0, 1.0]),
                        think_time=THINK_TIME, sla=np.full(len(CLASSES), 0.3),
                        processes=[MAP.exponential(1.0), scenarios()["bottleneck_switch"].database],
                        map_limit=10_000)
    print("| users | class | model R (s) | physical R (s) ± 95% | model / physical "
          "| one MAP, PS R (s) ± 95% | per-class MAP, PS R (s) ± 95% | model / per-class PS |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    run = dict(replications=args.replications, seed=args.seed)
    for n in args.populations:
        phys = simulate_physical(demo_network(n), args.duration, warmup=200.0, **run)
        shared = simulate_closed(_shared_ps(n), args.duration, **run)
        ps = simulate_closed(_per_class_ps(n), args.duration, **run)
        point = model.at(n)
        for i, c in enumerate(names):
            r, m = phys.response_time[i], point.response[i]
            worst = max(worst, abs(m / r.mean - 1.0))
            print(f"| {n} | {c} | {m:.4f} | {r.mean:.4f} ± {r.half_width:.4f} | {m / r.mean:.2f} "
                  f"| {shared.response_time[i]:.4f} ± {shared.response_time_hw[i]:.4f} "
                  f"| {ps.response_time[i]:.4f} ± {ps.response_time_hw[i]:.4f} "
                  f"| {m / ps.response_time[i]:.2f} |")
    print(f"\nworst |model / physical - 1| over classes and populations: {worst:.1%}")


if __name__ == "__main__":
    main()
