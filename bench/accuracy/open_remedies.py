"""Open remediation against simulation: each remedy's ``capacity_rate_per_s`` vs the simulated one.

Case (b) of :mod:`bench.accuracy.multicore` made open (web 4 cores 8 ms, app 4 cores 10 ms,
bursty db 8 cores 16 ms, ``I ~ 200``; browse 80% / buy 20%; SLA 0.1 s), its model on the true
parameters (:mod:`streams.predict.open_model`), asked for the remedies of a rate ``--required``
times its capacity (:func:`streams.predict.open_whatif.remediate_open`). Each tier remedy is
applied to the simulated system too (cores: the tier's cores; replicas: ``k c`` cores, one
queue; CPU speed: every service time ``/ s``, the db's MAP rescaled) and simulated with a
Poisson source at ``--points`` rates around the remedy's model capacity, ``--replications``
independent runs of ``--duration`` s each (seeds fixed); the simulated capacity is where the
worst class's mean crosses the SLA (linear between rates).

    python -m bench.accuracy.open_remedies              # about 5 min on this machine
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from bench.accuracy.multicore import crossing, systems
from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, simulate_physical
from streams.predict.model import SystemModel
from streams.predict.open_model import rate_capacity
from streams.predict.open_whatif import remediate_open

POINTS = (0.9, 1.0, 1.1)


def case_model(key: str = "b") -> SystemModel:
    """The case's open model on the true parameters."""
    s = systems()[key]
    return SystemModel(tiers=[t.name for t in s.tiers], classes=list(s.classes),
                       D_mc=s.D_mc, mix=np.array(s.mix), servers=np.array(s.cores, float),
                       think_time=0.0, sla=np.full(len(s.classes), s.sla),
                       processes=[t.process for t in s.tiers], map_limit=10_000)


def remedied_tiers(key: str, action: dict) -> tuple[Tier, ...]:
    """The simulated tiers with a tier remedy applied (module docstring)."""
    out = []
    for t in systems()[key].tiers:
        cores, service = t.cores, (t.process if t.process is not None else t.mean)
        if t.name == action["tier"]:
            v = action["value"]
            if action["kind"] == "cores":
                cores = int(v)
            elif action["kind"] == "replicate":
                cores = int(v) * t.cores
            else:
                service = service.scaled(t.mean / v) if t.process is not None else t.mean / v
        out.append(Tier(t.name, cores, service, multipliers=t.multipliers))
    return tuple(out)


def simulated_capacity(key: str, action: dict, model_cap: float, duration: float,
                       replications: int, seed: int) -> tuple[float, list[str]]:
    s = systems()[key]
    pts, notes = [], []
    for j, f in enumerate(POINTS):
        rate = f * model_cap
        net = PhysicalNetwork(remedied_tiers(key, action), s.classes, s.mix, 0.0, 0,
                              arrivals=OpenArrivals(rate))
        sim = simulate_physical(net, duration, warmup=100.0, replications=replications,
                                seed=seed + j)
        worst = max(e.mean for e in sim.response_time)
        pts.append((rate, worst))
        notes.append(f"{rate:.0f}/s: {1000 * worst:.0f} ms")
    return crossing(pts, s.sla), notes


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--system", default="b")
    ap.add_argument("--required", type=float, default=1.3)
    ap.add_argument("--duration", type=float, default=1500.0)
    ap.add_argument("--replications", type=int, default=3)
    ap.add_argument("--limit", type=int, default=3, help="tier remedies simulated")
    args = ap.parse_args(argv)
    model = case_model(args.system)
    cap = rate_capacity(model).capacity
    assert cap is not None
    rec = remediate_open(model, args.required * cap, cap)
    print(f"capacity {cap:.1f}/s, required {rec['required_rate_per_s']:.1f}/s; "
          f"{args.replications} x {args.duration:g} s a rate; unreachable "
          f"{rec['unreachable']}", file=sys.stderr)
    print("| remedy | capacity_rate_per_s | simulated | error | simulated worst-class R |")
    print("|---|---:|---:|---:|---|")
    started = time.perf_counter()
    tier_actions = [a for a in rec["actions"] if a["tier"] is not None][:args.limit]
    for i, a in enumerate(tier_actions):
        c = a["capacity_rate_per_s"]
        truth, notes = simulated_capacity(args.system, a, c, args.duration,
                                          args.replications, 3000 + 10 * i)
        err = (c - truth) / truth if math.isfinite(truth) else math.nan
        print(f"| {a['summary'].split(':')[0]} | {c:.1f} | {truth:.1f} | "
              f"{100 * err:+.1f}% | {', '.join(notes)} |", flush=True)
        print(f"[{time.perf_counter() - started:5.0f} s]", file=sys.stderr)


if __name__ == "__main__":
    main()
