"""Open models against the simulated physical system with an open (Poisson or MMPP) source.

Case (b) of :mod:`bench.accuracy.multicore` made open: web 4 cores 8 ms, app 4 cores 10 ms,
bursty db 8 cores 16 ms (``I ~ 200``, classes x0.75 / x2 there), classes browse 80% / buy 20%,
Poisson arrivals at 20-95% of the saturation rate (400/s, the app tier). Models:

* ``open`` -- :func:`solvers.open.solve_open_tiers` on the true service processes (the db an
  M/MAP/8 queue with per-job phases, the others Erlang C);
* ``M/M/c`` -- the same with every tier exponential (what a product-form open model says).

Truth: :func:`solvers.simulation.physical.simulate_physical` with
:class:`~solvers.simulation.physical.OpenArrivals`, ``--replications`` independent runs of
``--duration`` simulated seconds after a warm-up. ``capacity`` is the largest rate at which the
worst class's mean stays within the SLA (0.1 s): the model's by bisection, the truth's where the
simulated points cross it (linear between rates). Then bursty arrivals: MMPP(2) at index of
dispersion 20-200 into one exponential 4-core tier (10 ms, 70% busy), ``map_m_c`` against
the simulation.

    python -m bench.accuracy.open_models                 # about 4 min on this machine
    python -m bench.accuracy.open_models --quick         # shorter runs
    python -m bench.accuracy.open_models --fractions 0.8,0.9 --replications 6 --duration 3000 \
        --no-mmpp                                        # the noisiest loads, longer
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from bench.accuracy.multicore import crossing, systems
from solvers.open import map_m_c, solve_open_tiers, tiers_capacity
from solvers.simulation.mmpp import mmpp2_design
from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, simulate_physical

FRACTIONS = (0.2, 0.4, 0.6, 0.8, 0.9, 0.95)
MMPP_IDC = (20.0, 50.0, 200.0)


def _network(key: str, rate: float, process=None) -> PhysicalNetwork:
    s = systems()[key]
    tiers = tuple(Tier(t.name, t.cores, t.process if t.process is not None else t.mean,
                       multipliers=t.multipliers) for t in s.tiers)
    return PhysicalNetwork(tiers, s.classes, s.mix, 0.0, 0,
                           arrivals=OpenArrivals(rate, process))


def _model(key: str, rate: float, bursty: bool):
    s = systems()[key]
    procs = [t.process for t in s.tiers] if bursty else None
    return solve_open_tiers(rate * np.array(s.mix), s.D_mc, s.cores, processes=procs)


def _capacity(key: str, bursty: bool, sla: float, cap: float) -> float:
    lo, hi = 0.0, cap * (1 - 1e-9)
    if _model(key, hi, bursty).response_time.max() <= sla:
        return hi
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _model(key, mid, bursty).response_time.max() <= sla else (lo, mid)
    return lo


def pct(x: float) -> str:
    return f"{100 * x:+.1f}%" if math.isfinite(x) else "-"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--system", default="b")
    ap.add_argument("--duration", type=float, default=1500.0)
    ap.add_argument("--replications", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fractions", default=",".join(map(str, FRACTIONS)),
                    help="loads as fractions of the saturation rate, comma-separated")
    ap.add_argument("--no-mmpp", action="store_true", help="skip the bursty-arrivals table")
    args = ap.parse_args(argv)
    dur = 300.0 if args.quick else args.duration
    key = args.system
    s = systems()[key]
    cap = tiers_capacity(s.mix, s.D_mc, s.cores)
    print(f"open ({key}): {s.describe()}; saturation {cap:.1f}/s; {args.replications} x "
          f"{dur:g} s a rate", file=sys.stderr)
    rows, worst_pts = [], []
    started = time.perf_counter()
    fractions = [float(v) for v in args.fractions.split(",")]
    for i, f in enumerate(fractions):
        rate = f * cap
        sim = simulate_physical(_network(key, rate), dur, warmup=100.0,
                                replications=args.replications,
                                seed=1000 + FRACTIONS.index(f) if f in FRACTIONS else 1100 + i)
        X, R = sim.total_throughput.mean, sim.total_response_time.mean
        Rc = np.array([e.mean for e in sim.response_time])
        worst_pts.append((rate, float(Rc.max())))
        errs = []
        for bursty in (True, False):
            m = _model(key, rate, bursty)
            errs.append(((m.throughput.sum() - X) / X,
                         (m.total_response_time - R) / R,
                         float(np.max(np.abs(m.response_time - Rc) / Rc))))
        rows.append((f, rate, X, sim.total_throughput.half_width, R,
                     sim.total_response_time.half_width, errs))
        print(f"[{time.perf_counter() - started:5.0f} s] {f:.2f}: X {X:.1f}, R "
              f"{1000 * R:.1f} ms", file=sys.stderr)
    print("| load | rate /s | X sim | R sim (ms) | open: X | R | R worst class | "
          "M/M/c: R | R worst class |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f, rate, X, xhw, R, rhw, errs in rows:
        (ox, orr, oc), (_, er, ec) = errs
        print(f"| {f:.2f} | {rate:.0f} | {X:.1f} ± {xhw:.1f} | {1000 * R:.1f} ± "
              f"{1000 * rhw:.1f} | {pct(ox)} | {pct(orr)} | {100 * oc:.1f}% | {pct(er)} | "
              f"{100 * ec:.1f}% |")
    if s.sla is not None:
        truth = crossing(worst_pts, s.sla)
        for bursty, name in ((True, "open"), (False, "M/M/c")):
            c = _capacity(key, bursty, s.sla, cap)
            print(f"capacity at the SLA {s.sla:g} s: {name} {c:.1f}/s, simulated {truth:.1f}/s "
                  f"({pct((c - truth) / truth)})")
    if args.no_mmpp:
        return
    print()
    print("| MMPP(2) I | rho | R sim (ms) | MAP/M/4 | M/M/4 |")
    print("|---:|---:|---:|---:|---:|")
    for j, idc in enumerate(MMPP_IDC):
        rate = 0.7 * 4 / 0.010
        shape = mmpp2_design(0.002, idc)
        net = PhysicalNetwork((Tier("api", 4, 0.010),), ("all",), (1.0,), 0.0, 0,
                              arrivals=OpenArrivals(rate, shape))
        sim = simulate_physical(net, dur * 4, warmup=100.0,
                                replications=args.replications, seed=2000 + j)
        R, hw = sim.total_response_time.mean, sim.total_response_time.half_width
        ours = map_m_c(shape.scaled(1.0 / rate), 0.010, 4)
        mmc = solve_open_tiers([rate], [[0.010]], [4])
        print(f"| {idc:g} | 0.70 | {1000 * R:.1f} ± {1000 * hw:.1f} | "
              f"{pct((ours.wait + 0.010 - R) / R)} | "
              f"{pct((mmc.total_response_time - R) / R)} |")
    print(f"run time {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
