"""Open models against the simulated physical system with an open (Poisson or MMPP) source.

Case (b) of :mod:`bench.accuracy.multicore` made open: web 4 cores 8 ms, app 4 cores 10 ms,
bursty db 8 cores 16 ms (``I ~ 200``, classes x0.75 / x2 there), classes browse 80% / buy 20%,
Poisson arrivals at 20-95% of the saturation rate (400/s, the app tier). Models:

* ``open`` -- :func:`solvers.open.solve_open_tiers` on the true service processes (the db an
  M/MAP/8 queue with per-job phases, the others Erlang C);
* ``waves`` -- the same with the tiers after a bursty one fed its departure process
  (:func:`solvers.open.fixed_population.solve_open_waves`, the large-population route's
  open solve);
* ``coupled`` -- ``waves`` with each bursty tier's per-job chain tying a job's end phase to
  the next job's start phase (``coupled=True``, :func:`solvers.open.queues.end_phase_map`);
* ``M/M/c`` -- the same with every tier exponential (what a product-form open model says).

Truth: :func:`solvers.simulation.physical.simulate_physical` with
:class:`~solvers.simulation.physical.OpenArrivals`, ``--replications`` independent runs of
``--duration`` simulated seconds after a warm-up. ``capacity`` is the largest rate at which the
worst class's mean stays within the SLA (0.1 s): the model's by bisection, the truth's where the
simulated points cross it (linear between rates; ``--capacity-fractions`` simulates more
rates, ``auto`` at the open models' capacities and the coarse crossing, so the chord is short
where it crosses; where the intervals' ends cross is printed beside it). ``--tiers`` prints
each tier's mean residence per visit, simulated against each model's. Then bursty arrivals:
MMPP(2) at index of dispersion 20-200 into one exponential 4-core tier (10 ms, 70% busy),
``map_m_c`` against the simulation.

    python -m bench.accuracy.open_models                 # about 4 min on this machine
    python -m bench.accuracy.open_models --quick         # shorter runs
    python -m bench.accuracy.open_models --fractions 0.8,0.9 --replications 6 --duration 3000 \
        --no-mmpp                                        # the noisiest loads, longer
    python -m bench.accuracy.open_models --system d --no-mmpp --tiers --capacity-fractions auto
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from bench.accuracy.multicore import crossing, systems
from solvers.open import map_m_c, solve_open_tiers, tiers_capacity
from solvers.open.fixed_population import solve_open_waves
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


MODELS = ("open", "waves", "coupled", "M/M/c")


@dataclass(frozen=True)
class _Solved:
    X: float                 # total throughput
    R: float                 # mean over all requests
    Rc: np.ndarray           # per class
    Rm: np.ndarray           # per tier, mean per visit over the classes (mix-weighted)


def _model(key: str, rate: float, kind: str) -> _Solved:
    s = systems()[key]
    mix = np.array(s.mix)
    procs = [t.process for t in s.tiers] if kind != "M/M/c" else None
    solve = solve_open_waves if kind in ("waves", "coupled") else solve_open_tiers
    m = solve(rate * mix, s.D_mc, s.cores, processes=procs, coupled=kind == "coupled")
    return _Solved(float(m.throughput.sum()), m.total_response_time, m.response_time,
                   m.residence_time @ mix)


def _capacity(key: str, kind: str, sla: float, cap: float) -> float:
    lo, hi = 0.0, cap * (1 - 1e-9)
    if _model(key, hi, kind).Rc.max() <= sla:
        return hi
    while hi - lo > 1e-5 * cap:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _model(key, mid, kind).Rc.max() <= sla else (lo, mid)
    return lo


def pct(x: float) -> str:
    return f"{100 * x:+.1f}%" if math.isfinite(x) else "-"


def _seed(f: float, i: int) -> int:
    """The rate's seed: the table's loads by their place in :data:`FRACTIONS`, the others by
    their place in ``--fractions`` (the capacity's extra rates: ``3000 + 1000 f``)."""
    return 1000 + FRACTIONS.index(f) if f in FRACTIONS else 1100 + i


def _simulate(key: str, rate: float, dur: float, reps: int, seed: int):
    return simulate_physical(_network(key, rate), dur, warmup=100.0, replications=reps,
                             seed=seed)


def _worst(sim) -> tuple[float, float]:
    """The worst class's mean response time and its 95% half-width."""
    w = max(range(len(sim.response_time)), key=lambda c: sim.response_time[c].mean)
    return sim.response_time[w].mean, sim.response_time[w].half_width


def _capacity_fractions(spec: str, models: dict[str, float], coarse: float,
                        cap: float) -> list[float]:
    if spec != "auto":
        return [float(v) for v in spec.split(",")]
    at = [v for k, v in models.items() if k != "M/M/c"] + [coarse]
    at = [v for v in at if math.isfinite(v) and 0 < v < cap]
    return sorted({round(v / cap, 3) for v in at})


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--system", default="b")
    ap.add_argument("--duration", type=float, default=1500.0)
    ap.add_argument("--replications", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fractions", default=",".join(map(str, FRACTIONS)),
                    help="loads as fractions of the saturation rate, comma-separated")
    ap.add_argument("--capacity-fractions", default="",
                    help="more loads simulated for the capacity's crossing only (comma-"
                         "separated, or 'auto': at the open models' capacities and the "
                         "coarse crossing)")
    ap.add_argument("--tiers", action="store_true",
                    help="print each tier's residence per visit, simulated and modelled")
    ap.add_argument("--no-mmpp", action="store_true", help="skip the bursty-arrivals table")
    args = ap.parse_args(argv)
    dur = 300.0 if args.quick else args.duration
    key = args.system
    s = systems()[key]
    cap = tiers_capacity(s.mix, s.D_mc, s.cores)
    print(f"open ({key}): {s.describe()}; saturation {cap:.1f}/s; {args.replications} x "
          f"{dur:g} s a rate", file=sys.stderr)
    rows, worst_pts, tier_rows = [], [], []
    started = time.perf_counter()
    fractions = [float(v) for v in args.fractions.split(",")]
    for i, f in enumerate(fractions):
        rate = f * cap
        sim = _simulate(key, rate, dur, args.replications, _seed(f, i))
        X, R = sim.total_throughput.mean, sim.total_response_time.mean
        Rc = np.array([e.mean for e in sim.response_time])
        worst_pts.append((rate, *_worst(sim)))
        errs, tiers = [], []
        for kind in MODELS:
            m = _model(key, rate, kind)
            errs.append(((m.X - X) / X, (m.R - R) / R,
                         float(np.max(np.abs(m.Rc - Rc) / Rc))))
            tiers.append(m.Rm)
        rows.append((f, rate, X, sim.total_throughput.half_width, R,
                     sim.total_response_time.half_width, errs))
        tier_rows.append((f, sim.residence_time, tiers))
        print(f"[{time.perf_counter() - started:5.0f} s] {f:.2f}: X {X:.1f}, R "
              f"{1000 * R:.1f} ms", file=sys.stderr)
    print("| load | rate /s | X sim | R sim (ms) | open: X | R | R worst class | "
          + " | ".join(f"{k}: R | R worst class" for k in MODELS[1:]) + " |")
    print("|---:|---:|---:|---:|---:|" + "---:|" * (2 * len(MODELS)))
    for f, rate, X, xhw, R, rhw, errs in rows:
        print(f"| {f:.2f} | {rate:.0f} | {X:.1f} ± {xhw:.1f} | {1000 * R:.1f} ± "
              f"{1000 * rhw:.1f} | {pct(errs[0][0])} | "
              + " | ".join(f"{pct(r)} | {100 * c:.1f}%" for _, r, c in errs) + " |")
    if args.tiers:
        print()
        print("| load | tier | sim (ms per visit) | " + " | ".join(MODELS) + " |")
        print("|---:|---|---:|" + "---:|" * len(MODELS))
        for f, est, tiers in tier_rows:
            for m, tier in enumerate(s.tiers):
                e = est[m]
                print(f"| {f:.2f} | {tier.name} | {1000 * e.mean:.2f} ± "
                      f"{1000 * e.half_width:.2f} | "
                      + " | ".join(pct((t[m] - e.mean) / e.mean) for t in tiers) + " |")
    if s.sla is not None:
        coarse = crossing([(r, w) for r, w, _ in worst_pts], s.sla)
        caps = {kind: _capacity(key, kind, s.sla, cap) for kind in MODELS}
        pts = list(worst_pts)
        extra = _capacity_fractions(args.capacity_fractions, caps, coarse, cap) \
            if args.capacity_fractions else []
        for f in extra:
            if any(math.isclose(f * cap, r) for r, _, _ in pts):
                continue
            sim = _simulate(key, f * cap, dur, args.replications, 3000 + round(1000 * f))
            pts.append((f * cap, *_worst(sim)))
            w, hw = pts[-1][1:]
            print(f"[{time.perf_counter() - started:5.0f} s] capacity point {f:.3f}: worst "
                  f"class R {1000 * w:.1f} ± {1000 * hw:.1f} ms", file=sys.stderr)
        pts.sort()
        truth = crossing([(r, w) for r, w, _ in pts], s.sla)
        low = crossing([(r, w + hw) for r, w, hw in pts], s.sla)
        high = crossing([(r, w - hw) for r, w, hw in pts], s.sla)
        if extra:
            print(f"capacity points (rate /s: worst class R ms): "
                  + ", ".join(f"{r:.1f}: {1000 * w:.1f} ± {1000 * hw:.1f}" for r, w, hw in pts
                              if r < 1.5 * max(truth, coarse)))
            print(f"simulated capacity {truth:.1f}/s (interval ends cross at {low:.1f}-"
                  f"{high:.1f}/s); coarse rates alone {coarse:.1f}/s")
        for kind in MODELS:
            c = caps[kind]
            print(f"capacity at the SLA {s.sla:g} s: {kind} {c:.1f}/s, simulated {truth:.1f}/s "
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
