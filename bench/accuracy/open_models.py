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
* ``two-core`` -- ``waves`` with ``coupled=TWO_CORE`` (the coupled chain's effect on a bursty
  tier's wait read off 2 cores, :func:`solvers.open.queues.coupling_ratio`): the pipeline's
  fed model (:mod:`streams.predict.open_model`); ``two-core-no-into`` without what the waves
  add to a bursty tier after a bursty one, ``two-core-unrelaxed`` with all of it (not the
  share the bursty tier's slower relaxation leaves:
  :func:`solvers.open.fixed_population.relaxed_share`); ``fitted`` -- ``two-core`` with each
  bursty tier's process the MAP(2) fitted to its true mean, ``I`` and p95 (the pipeline's form,
  whose diagonal ``D0`` the coupling leaves as it is: :func:`solvers.open.queues.phase_kept`);
* ``M/M/c`` -- the same with every tier exponential (what a product-form open model says).

Truth: :func:`solvers.simulation.physical.simulate_physical` with
:class:`~solvers.simulation.physical.OpenArrivals`, ``--replications`` independent runs of
``--duration`` simulated seconds after a warm-up (the streams it spawns for replications, each
run kept apart: the figures are the replications' means and t-intervals; ``--replications-at``
more of them where a bursty tier's slow runs leave the interval wide). ``capacity`` is the
largest rate at which the worst class's mean stays within the SLA (0.1 s): the model's by
bisection, the truth's where the simulated points cross it (linear between rates;
``--capacity-fractions`` simulates more rates, ``auto`` at the open models' capacities and the
coarse crossing, so the chord is short where it crosses; where the intervals' ends cross is
printed beside it). ``--tiers`` prints each tier's mean residence per visit, simulated against
each model's. ``--save-truth FILE`` stores the simulations (per rate and replication: X, R,
per-class R, per-tier residence; and the capacity's crossing) as JSON, a line a rate;
``--truth FILE`` judges the models against such a file in seconds instead of simulating
(``bench/results/open_models-d.json``, ``open_models-c.json``); ``--models`` picks the
models (:data:`VARIANTS`: ``two-core`` is the pipeline's fed model on the true processes).
Then bursty arrivals: MMPP(2) at index of dispersion 20-200 into one exponential 4-core tier
(10 ms, 70% busy), ``map_m_c`` against the simulation. ``--system`` also takes case (c)'s
held-out variants (:func:`systems`: ``c-db8``, ``c-app100``).

    python -m bench.accuracy.open_models                 # about 4 min on this machine
    python -m bench.accuracy.open_models --quick         # shorter runs
    python -m bench.accuracy.open_models --fractions 0.8,0.9 --replications 6 --duration 3000 \
        --no-mmpp                                        # the noisiest loads, longer
    python -m bench.accuracy.open_models --system d --no-mmpp --tiers --capacity-fractions auto
    python -m bench.accuracy.open_models --system d --no-mmpp --tiers --capacity-fractions auto \
        --replications 6 --duration 3000 --save-truth bench/results/open_models-d.json
    python -m bench.accuracy.open_models --truth bench/results/open_models-d.json --no-mmpp \
        --tiers --models open,waves,two-core,M/M/c          # seconds
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from bench.accuracy.multicore import BURSTY_D0, BURSTY_D1, System, TierSpec, crossing
from bench.accuracy.multicore import systems as multicore_systems
from estimators.mapfit import fit_map2
from solvers.open import map_m_c, solve_open_tiers, tiers_capacity
from solvers.open.fixed_population import solve_open_waves
from solvers.open.queues import TWO_CORE
from solvers.processes import MAP
from solvers.simulation.mmpp import mmpp2_design
from solvers.simulation.physical import (OpenArrivals, PhysicalNetwork, Tier, seeded_generator,
                                         simulate_physical)
from solvers.simulation.stats import Estimate, replication_interval

FRACTIONS = (0.2, 0.4, 0.6, 0.8, 0.9, 0.95)
MMPP_IDC = (20.0, 50.0, 200.0)


@lru_cache(maxsize=None)
def systems() -> dict[str, System]:
    """:func:`bench.accuracy.multicore.systems` and case (c)'s held-out variants, on which no
    model rule was chosen: ``c-db8`` its db on 8 cores at 16 ms (the same saturation),
    ``c-app100`` its app's MAP(2) fitted to ``I`` 100 instead of 50."""
    out = dict(multicore_systems())
    c = out["c"]
    web, app, db = c.tiers
    bursty = MAP(BURSTY_D0, BURSTY_D1)
    out["c-db8"] = System("c-db8", "(c) held out: an 8-core db", (
        web, app, TierSpec("db", 8, 0.016, bursty.scaled(0.016))), c.classes, c.mix,
        c.think, c.sla)
    out["c-app100"] = System("c-app100", "(c) held out: the app at I 100", (
        web, TierSpec("app", 4, 0.008, fit_map2(mean=0.008, idc=100, p95=0.024).process),
        db), c.classes, c.mix, c.think, c.sla)
    return out


def _network(key: str, rate: float, process=None) -> PhysicalNetwork:
    s = systems()[key]
    tiers = tuple(Tier(t.name, t.cores, t.process if t.process is not None else t.mean,
                       multipliers=t.multipliers) for t in s.tiers)
    return PhysicalNetwork(tiers, s.classes, s.mix, 0.0, 0,
                           arrivals=OpenArrivals(rate, process))


#: the models judged: how each solves the network (``None``: Poisson-fed,
#: :func:`solve_open_tiers`; else :func:`solve_open_waves` with these options)
VARIANTS = {"open": None, "waves": {}, "coupled": {"coupled": True},
            "two-core": {"coupled": TWO_CORE},
            "two-core-no-into": {"coupled": TWO_CORE, "into_bursty": False},
            "two-core-unrelaxed": {"coupled": TWO_CORE, "relaxed": False},
            "fitted": {"coupled": TWO_CORE}, "M/M/c": None}
MODELS = ("open", "waves", "coupled", "M/M/c")


@dataclass(frozen=True)
class _Solved:
    X: float                 # total throughput
    R: float                 # mean over all requests
    Rc: np.ndarray           # per class
    Rm: np.ndarray           # per tier, mean per visit over the classes (mix-weighted)


def _fitted(p):
    """``p`` as the pipeline holds a bursty tier's process: the MAP(2) of Mi et al. (2008)
    fitted to its true mean, index of dispersion and p95 (:func:`estimators.mapfit.fit_map2`);
    an exponential or absent process as it is."""
    if p is None or p.order == 1:
        return p
    return fit_map2(mean=p.mean, idc=p.idc, p95=p.quantile(0.95)).process


def _model(key: str, rate: float, kind: str) -> _Solved:
    s = systems()[key]
    mix = np.array(s.mix)
    procs = [t.process for t in s.tiers] if kind != "M/M/c" else None
    if kind == "fitted":
        procs = [_fitted(p) for p in procs]
    opts = VARIANTS[kind]
    if opts is None:
        m = solve_open_tiers(rate * mix, s.D_mc, s.cores, processes=procs)
    else:
        m = solve_open_waves(rate * mix, s.D_mc, s.cores, processes=procs, **opts)
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


def _seed(f: float, i: int, offset: int = 0) -> int:
    """The rate's seed: the table's loads by their place in :data:`FRACTIONS`, the others by
    their place in ``--fractions`` (the capacity's extra rates: ``3000 + 1000 f``), plus
    ``--seed-offset`` (held-out runs)."""
    return offset + (1000 + FRACTIONS.index(f) if f in FRACTIONS else 1100 + i)


WARMUP = 100.0


@dataclass(frozen=True)
class _Point:
    """One simulated rate: each replication's total X and R, per-class R and per-tier mean
    residence per visit (rows = replications), the truth ``--save-truth`` stores."""

    rate: float
    seed: int
    X: list[float]
    R: list[float]
    Rc: list[list[float]]
    residence: list[list[float]]

    def est(self, values) -> Estimate:
        return replication_interval(values)

    @property
    def total_throughput(self) -> Estimate:
        return self.est(self.X)

    @property
    def total_response_time(self) -> Estimate:
        return self.est(self.R)

    @property
    def response_time(self) -> tuple[Estimate, ...]:
        return tuple(self.est(c) for c in np.array(self.Rc).T)

    @property
    def residence_time(self) -> tuple[Estimate, ...]:
        return tuple(self.est(t) for t in np.array(self.residence).T)


def _simulate(key: str, rate: float, dur: float, reps: int, seed: int) -> _Point:
    """``reps`` independent runs (the streams :func:`simulate_physical` spawns from ``seed``
    for its replications), each kept apart so the truth can be stored per replication."""
    streams = seeded_generator(None, seed).spawn(reps)
    runs = [simulate_physical(_network(key, rate), dur, warmup=WARMUP, replications=1, rng=g)
            for g in streams]
    return _Point(rate, seed, [r.total_throughput.mean for r in runs],
                  [r.total_response_time.mean for r in runs],
                  [[e.mean for e in r.response_time] for r in runs],
                  [[e.mean for e in r.residence_time] for r in runs])


def _worst(sim) -> tuple[float, float]:
    """The worst class's mean response time and its 95% half-width."""
    w = max(range(len(sim.response_time)), key=lambda c: sim.response_time[c].mean)
    return sim.response_time[w].mean, sim.response_time[w].half_width


def save_truth(path: str | Path, meta: dict, points: list[_Point], extra: list[_Point],
               capacity: dict) -> None:
    """Write the simulated truth as JSON: ``meta`` (system, duration, replications, command),
    the table's rates and the capacity's extra rates, each per replication, and the crossing;
    compact, one rate a line (a rate's replications may number 40)."""
    doc = dict(meta, points=[vars(p) for p in points], capacity_points=[vars(p) for p in extra],
               capacity=capacity)
    compact = dict(separators=(",", ":"))
    head = {k: v for k, v in doc.items() if k not in ("points", "capacity_points")}
    lines = [json.dumps(head, **compact)[:-1]]
    for k in ("points", "capacity_points"):
        lines.append(f',"{k}":[' + ",\n".join(json.dumps(p, **compact) for p in doc[k]) + "]")
    Path(path).write_text("\n".join(lines) + "}\n")


def load_truth(path: str | Path) -> tuple[dict, list[_Point], list[_Point]]:
    """The JSON :func:`save_truth` wrote: its metadata, the table's points, the extra ones."""
    doc = json.loads(Path(path).read_text())
    pts = [_Point(**p) for p in doc.pop("points")]
    extra = [_Point(**p) for p in doc.pop("capacity_points")]
    return doc, pts, extra


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
    ap.add_argument("--replications-at", default="", metavar="F:N,...",
                    help="more (or fewer) replications at these loads (fractions of the "
                         "saturation rate, as --fractions spells them): where the slow runs "
                         "of a bursty tier leave the interval wide")
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
    ap.add_argument("--seed-offset", type=int, default=0,
                    help="added to every rate's seed: runs held out from the stored ones")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="the models judged, comma-separated, of: " + ", ".join(VARIANTS))
    ap.add_argument("--save-truth", metavar="FILE",
                    help="store the simulations (per rate and replication) as JSON")
    ap.add_argument("--truth", metavar="FILE",
                    help="judge the models against a stored truth instead of simulating "
                         "(its system, rates and capacity points; --system etc. ignored)")
    args = ap.parse_args(argv)
    models = tuple(args.models.split(","))
    for k in models:
        if k not in VARIANTS:
            ap.error(f"--models: unknown model {k!r}")
    dur = 300.0 if args.quick else args.duration
    try:
        reps_at = {float(f): int(n) for f, n in
                   (v.split(":") for v in args.replications_at.split(",") if v)}
    except ValueError:
        ap.error(f"--replications-at: expected F:N,..., got {args.replications_at!r}")
    if any(n < 2 for n in reps_at.values()):
        ap.error(f"--replications-at: at least 2 replications a load, got "
                 f"{args.replications_at!r}")
    key = args.system
    stored, stored_extra = None, []
    if args.truth:
        meta, stored, stored_extra = load_truth(args.truth)
        key, dur = meta["system"], meta["duration"]
        args.replications = meta["replications"]
        args.replications_at = meta.get("replications_at", "")
    s = systems()[key]
    cap = tiers_capacity(s.mix, s.D_mc, s.cores)
    print(f"open ({key}): {s.describe()}; saturation {cap:.1f}/s; {args.replications} x "
          f"{dur:g} s a rate" + (f" ({args.replications_at} at those loads)"
                                 if args.replications_at else "")
          + (f" (stored: {args.truth})" if args.truth else ""), file=sys.stderr)
    rows, worst_pts, tier_rows, sims = [], [], [], []
    started = time.perf_counter()
    fractions = ([p.rate / cap for p in stored] if stored is not None
                 else [float(v) for v in args.fractions.split(",")])
    for i, f in enumerate(fractions):
        rate = f * cap
        sim = stored[i] if stored is not None else \
            _simulate(key, rate, dur, reps_at.get(f, args.replications),
                      _seed(f, i, args.seed_offset))
        sims.append(sim)
        X, R = sim.total_throughput.mean, sim.total_response_time.mean
        Rc = np.array([e.mean for e in sim.response_time])
        worst_pts.append((rate, *_worst(sim)))
        errs, tiers = [], []
        for kind in models:
            m = _model(key, rate, kind)
            errs.append(((m.X - X) / X, (m.R - R) / R,
                         float(np.max(np.abs(m.Rc - Rc) / Rc))))
            tiers.append(m.Rm)
        rows.append((f, rate, X, sim.total_throughput.half_width, R,
                     sim.total_response_time.half_width, errs))
        tier_rows.append((f, sim.residence_time, tiers))
        print(f"[{time.perf_counter() - started:5.0f} s] {f:.2f}: X {X:.1f}, R "
              f"{1000 * R:.1f} ms", file=sys.stderr)
    print(f"| load | rate /s | X sim | R sim (ms) | {models[0]}: X | R | R worst class | "
          + " | ".join(f"{k}: R | R worst class" for k in models[1:]) + " |")
    print("|---:|---:|---:|---:|---:|" + "---:|" * (2 * len(models)))
    for f, rate, X, xhw, R, rhw, errs in rows:
        print(f"| {f:.2f} | {rate:.0f} | {X:.1f} ± {xhw:.1f} | {1000 * R:.1f} ± "
              f"{1000 * rhw:.1f} | {pct(errs[0][0])} | "
              + " | ".join(f"{pct(r)} | {100 * c:.1f}%" for _, r, c in errs) + " |")
    if args.tiers:
        print()
        print("| load | tier | sim (ms per visit) | " + " | ".join(models) + " |")
        print("|---:|---|---:|" + "---:|" * len(models))
        for f, est, tiers in tier_rows:
            for m, tier in enumerate(s.tiers):
                e = est[m]
                print(f"| {f:.2f} | {tier.name} | {1000 * e.mean:.2f} ± "
                      f"{1000 * e.half_width:.2f} | "
                      + " | ".join(pct((t[m] - e.mean) / e.mean) for t in tiers) + " |")
    if s.sla is not None:
        coarse = crossing([(r, w) for r, w, _ in worst_pts], s.sla)
        caps = {kind: _capacity(key, kind, s.sla, cap) for kind in models}
        pts = list(worst_pts)
        extra_sims: list[_Point] = []
        if stored is not None:
            extra = [p.rate / cap for p in stored_extra]
        else:
            extra = _capacity_fractions(args.capacity_fractions, caps, coarse, cap) \
                if args.capacity_fractions else []
        for j, f in enumerate(extra):
            if stored is None and any(math.isclose(f * cap, r) for r, _, _ in pts):
                continue
            sim = stored_extra[j] if stored is not None else \
                _simulate(key, f * cap, dur, args.replications,
                          args.seed_offset + 3000 + round(1000 * f))
            extra_sims.append(sim)
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
        for kind in models:
            c = caps[kind]
            print(f"capacity at the SLA {s.sla:g} s: {kind} {c:.1f}/s, simulated {truth:.1f}/s "
                  f"({pct((c - truth) / truth)})")
        if args.save_truth:
            save_truth(args.save_truth,
                       {"system": key, "duration": dur, "replications": args.replications,
                        **({"replications_at": args.replications_at} if reps_at else {}),
                        "warmup": WARMUP, "saturation": cap, "sla": s.sla,
                        "command": "python -m bench.accuracy.open_models "
                                   + " ".join(sys.argv[1:] if argv is None else argv)},
                       sims, extra_sims,
                       {"crossing": truth, "low": low, "high": high, "coarse": coarse})
            print(f"truth stored in {args.save_truth}", file=sys.stderr)
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
