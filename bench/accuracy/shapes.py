"""Held-out bursty shapes end to end: the embedded pipeline's capacity and mean response time
at the operating point against the simulated physical system, on service processes chosen
before any tuning.

    python -m bench.accuracy.shapes                 # every shape; bench/results/shapes.json
    python -m bench.accuracy.shapes --quick         # 3 shapes, short runs (the test's)
    python -m bench.accuracy.shapes --only mmpp2-slow-unstable-B,pareto-ar-A
    python -m bench.accuracy.shapes --truth bench/results/shapes.json --set bursty_scv=response
    python -m bench.accuracy.shapes --half tuning --truth bench/results/shapes.json

The shapes (:data:`SHAPES`, fixed with their seeds before the first run; the list is the
held-out set, not to be tuned): MMPP(2) and MMPP(3) service sequences from fast to slow
switching (``solvers.simulation.shapes.mmpp_runs``: per phase a relative mean service time and
a mean run length in services), slow modes whose service rate still carries the operating
load and slow modes that do not (a transient overload while they last); lognormal and Pareto
marginals ordered by a Gaussian AR(1) copula (Cario and Nelson 1996); one bursty class among
several (``Tier.class_service``); wide per-class multipliers; two bursty tiers. Systems
(:data:`SYSTEMS`): two or three tiers, 1-8 cores, 1-3 classes, think time 4 s.

Per shape: the SLA of every class is ``SLA_FACTOR`` x the largest class's total demand. The
**truth capacity** is the population at which the worst class's simulated mean response time
crosses the SLA (:func:`truth_capacity`: geometric bracketing from the asymptotic knee, then
two secant steps, :func:`solvers.simulation.physical.simulate_physical`, 2 replications of
``requests`` requests each per probe, linear interpolation between the bracketing probes).
The **operating point** is ``round(0.4 x capacity)`` users; its mean response time simulated
the same way is the truth R. The pipeline sees ``--minutes`` of 5-s windows of the system at
that population (:func:`solvers.simulation.physical.monitor_physical`) through ``run_embedded``
configured with the tiers and the SLA only, as a new user would (``perfcast run``'s path).
Recorded per solve: the capacity's error against the truth, the model mean R's error against
the truth R, ``model_trusted`` and ``trust_reasons``. Per shape the figure is the last solve's.
Printed: the share of shapes within 10% / 20% on capacity, and the count of solves off by more
than 20% (capacity or R) that call themselves trusted (the acceptance wants 0); the summary's
``..._but_undecided`` counts are the solves untrusted only by the undecided-burstiness rule
(:mod:`streams.predict.burst_trust`): the counts without it, from the same run.

``--truth FILE`` takes each shape's truth (capacity, operating point, its R) from an earlier
results JSON instead of simulating it again (the simulation is deterministic by seed, so the
same simulator gives the same truth; shapes the file lacks are simulated): the pipeline alone,
about 10 s a shape. ``--set KEY=VALUE`` (repeatable) adds a system setting, to compare it on the
same windows. :mod:`bench.accuracy.shapes_cause` solves each shape's model with the true
parameters.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from solvers.bounds import knee
from solvers.processes import MAP
from solvers.simulation.physical import (PhysicalNetwork, Tier, monitor_physical,
                                         simulate_physical)
from solvers.simulation.shapes import CorrelatedService, mmpp_runs
from streams.core.config import Config, SystemConfig
from streams.cli.embedded import run_embedded
from streams.predict import burst_trust

START = 1_795_000_000.0
WINDOW_S = 5.0
THINK_S = 4.0
SLA_FACTOR = 3.0
LOAD = 0.4
RESULTS = Path(__file__).resolve().parents[1] / "results" / "shapes.json"


# ------------------------------------------------------------------------------- the systems
@dataclass(frozen=True)
class System:
    """Tiers ``(name, cores, mean service per visit in s)``, classes, mix and per-tier class
    multipliers (``None``: 1)."""

    tiers: tuple[tuple[str, int, float], ...]
    classes: tuple[str, ...]
    mix: tuple[float, ...]
    multipliers: dict[str, tuple[float, ...]] = field(default_factory=dict)


SYSTEMS = {
    # two tiers, a one-core database, two classes
    "A": System((("front", 2, 0.032), ("db", 1, 0.040)), ("a", "b"), (0.7, 0.3),
                {"db": (0.7, 1.7)}),
    # three tiers, three classes, the database on 4 cores
    "B": System((("web", 4, 0.048), ("app", 2, 0.032), ("db", 4, 0.080)),
                ("browse", "search", "buy"), (0.6, 0.25, 0.15), {"db": (0.5, 2.2, 1.0)}),
    # three tiers, one class, an 8-core middle tier
    "C": System((("web", 1, 0.012), ("app", 8, 0.160), ("db", 2, 0.032)), ("req",), (1.0,)),
    # two 8-core tiers, two classes
    "D": System((("app", 8, 0.128), ("db", 8, 0.192)), ("x", "y"), (0.5, 0.5),
                {"db": (0.6, 1.4)}),
}


# ------------------------------------------------------------------------------- the shapes
def _mmpp(levels: tuple[float, ...], runs: tuple[float, ...]) -> MAP:
    return mmpp_runs(1.0, levels, runs)


#: service processes of mean 1 (scaled to the tier's mean)
PROCESSES: dict[str, MAP | CorrelatedService] = {
    "mmpp2-fast": _mmpp((1.0, 5.0), (20.0, 5.0)),
    "mmpp2-medium": _mmpp((1.0, 5.0), (200.0, 50.0)),
    "mmpp2-slow-stable": _mmpp((1.0, 2.0), (2000.0, 1000.0)),
    "mmpp2-slow-unstable": _mmpp((1.0, 8.0), (2000.0, 300.0)),
    "mmpp3-fast": _mmpp((0.5, 1.5, 6.0), (60.0, 60.0, 20.0)),
    "mmpp3-slow": _mmpp((0.5, 1.5, 6.0), (1500.0, 1500.0, 300.0)),
    "lognormal-iid": CorrelatedService("lognormal", 1.0, 4.0, 0.0),
    "lognormal-ar": CorrelatedService("lognormal", 1.0, 4.0, 0.95),
    "lognormal-ar-slow": CorrelatedService("lognormal", 1.0, 9.0, 0.995),
    "pareto-ar": CorrelatedService("pareto", 1.0, 2.5, 0.9),
    "pareto-ar-slow": CorrelatedService("pareto", 1.0, 2.2, 0.99),
}


@dataclass(frozen=True)
class Shape:
    """``process`` (a :data:`PROCESSES` key) at ``tier`` of ``system``; ``cls``: only that class
    draws from it (the others exponential); ``second``: a second tier with the same process;
    ``multipliers``: replaces the system's class multipliers at ``tier``; ``seed``: the
    simulation's."""

    name: str
    system: str
    process: str
    tier: str
    seed: int
    cls: str | None = None
    second: str | None = None
    multipliers: tuple[float, ...] | None = None
    #: slow correlation: the truth's probes simulate 3x the requests
    slow: bool = False


def _shapes() -> tuple[Shape, ...]:
    out = []
    seed = 1000
    for proc in PROCESSES:
        slow = "slow" in proc
        for system, tier in (("A", "db"), ("B", "db"), ("D", "db")):
            seed += 1
            out.append(Shape(f"{proc}-{system}", system, proc, tier, seed, slow=slow))
    extra = [
        Shape("mmpp2-medium-C-app", "C", "mmpp2-medium", "app", 2001),
        Shape("mmpp2-slow-unstable-C-app", "C", "mmpp2-slow-unstable", "app", 2002, slow=True),
        Shape("lognormal-ar-C-app", "C", "lognormal-ar", "app", 2003),
        Shape("class-mmpp2-slow-B-search", "B", "mmpp2-slow-unstable", "db", 2004,
              cls="search", slow=True),
        Shape("class-mmpp2-medium-A-b", "A", "mmpp2-medium", "db", 2005, cls="b"),
        Shape("class-pareto-ar-D-y", "D", "pareto-ar", "db", 2006, cls="y"),
        Shape("mult-wide-mmpp2-medium-B", "B", "mmpp2-medium", "db", 2007,
              multipliers=(0.2, 3.6, 1.0)),
        Shape("mult-wide-lognormal-ar-D", "D", "lognormal-ar", "db", 2008,
              multipliers=(0.2, 1.8)),
        Shape("two-tiers-mmpp2-medium-B", "B", "mmpp2-medium", "db", 2009, second="app"),
        Shape("two-tiers-mmpp3-slow-C", "C", "mmpp3-slow", "app", 2010, second="db",
              slow=True),
    ]
    return tuple(out + extra)


#: the held-out shapes (fixed before the first run)
SHAPES = _shapes()
#: the seed of the tuning / held-out split (:func:`halves`), fixed before any estimator change
SPLIT_SEED = 49


def halves() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The shapes split at random (``numpy.random.default_rng(SPLIT_SEED).permutation``) into a
    tuning half (the first 22 of the permutation) and a held-out half (the other 21), each in
    :data:`SHAPES` order: an estimator change is tuned on the first and judged on the second,
    so that the figure on the second is not fitted to it."""
    names = [s.name for s in SHAPES]
    perm = np.random.default_rng(SPLIT_SEED).permutation(len(names))
    cut = (len(names) + 1) // 2
    return (tuple(names[i] for i in sorted(perm[:cut])),
            tuple(names[i] for i in sorted(perm[cut:])))


#: ``--quick``: one fast MMPP, one heavy-tailed, one bursty class, on short runs
QUICK = ("mmpp2-fast-A", "lognormal-iid-A", "class-mmpp2-medium-A-b")


def network(shape: Shape, population: int) -> PhysicalNetwork:
    """The physical system of ``shape`` at ``population`` users."""
    sysm = SYSTEMS[shape.system]
    proc = PROCESSES[shape.process]
    C = len(sysm.classes)
    tiers = []
    for name, cores, mean in sysm.tiers:
        mult = sysm.multipliers.get(name)
        service: Any = mean
        own = None
        if name in (shape.tier, shape.second):
            scaled = proc.scaled(mean)
            if shape.cls is None:
                service = scaled
            else:
                own = tuple(scaled if c == shape.cls else None for c in sysm.classes)
            if name == shape.tier and shape.multipliers is not None:
                mult = shape.multipliers
        tiers.append(Tier(name, cores, service, multipliers=mult, class_service=own))
    assert all(t.multipliers is None or len(t.multipliers) == C for t in tiers)
    return PhysicalNetwork(tuple(tiers), sysm.classes, sysm.mix, THINK_S, population)


def sla(shape: Shape) -> float:
    """Every class's SLA: ``SLA_FACTOR`` x the largest class's total demand."""
    return SLA_FACTOR * float(network(shape, 1).demands.sum(axis=0).max())


def config(shape: Shape, options: dict[str, str] | None = None) -> Config:
    """As a new user would: the tiers in order and the SLA; ``options``: further
    ``SystemConfig`` settings (``--set``, to compare a setting on the same windows)."""
    names = tuple(t[0] for t in SYSTEMS[shape.system].tiers)
    return Config(systems={"sys": SystemConfig(tiers=names, sla_s={"*": sla(shape)},
                                               **(options or {}))})


# ------------------------------------------------------------------------------- the truth
def _probe(shape: Shape, n: int, requests: int) -> dict[str, Any]:
    net = network(shape, n)
    x = min(n / (THINK_S + float(net.demands.sum(axis=0) @ np.array(net.mix))),
            1.0 / float((net.demands @ np.array(net.mix) / net.cores).max()))
    duration = requests / x
    res = simulate_physical(net, duration, warmup=duration / 10, replications=2,
                            seed=shape.seed + n)
    r = np.array([e.mean for e in res.response_time])
    return {"n": n, "ratio": float(r.max() / sla(shape)), "R": float(res.total_response_time.mean),
            "R_hw": float(res.total_response_time.half_width), "R_class": r.tolist(),
            "services": res.services}


def truth_capacity(shape: Shape, requests: int) -> tuple[float, list[dict[str, Any]]]:
    """The population where the worst class's simulated mean R crosses the SLA (module
    docstring) and the probes."""
    net = network(shape, 1)
    mix = np.array(net.mix)
    n0 = max(2, int(round(knee(net.demands @ mix, THINK_S, net.cores))))
    probes: dict[int, dict[str, Any]] = {}

    def ratio(n: int) -> float:
        if n not in probes:
            probes[n] = _probe(shape, n, requests)
        return probes[n]["ratio"]

    n = n0
    if ratio(n) <= 1:
        while ratio(n) <= 1 and n < 50 * n0:
            n = max(n + 1, int(round(n * 1.3)))
    else:
        while ratio(n) > 1 and n > 1:
            n = max(1, int(round(n / 1.3)))
    for _ in range(2):                                    # secant steps inside the bracket
        pts = sorted(probes.items())
        lo = max((k for k, p in pts if p["ratio"] <= 1), default=None)
        hi = min((k for k, p in pts if p["ratio"] > 1 and (lo is None or k > lo)), default=None)
        if lo is None or hi is None or hi - lo <= max(1, 0.02 * hi):
            break
        rl, rh = probes[lo]["ratio"], probes[hi]["ratio"]
        guess = int(round(lo + (1 - rl) * (hi - lo) / (rh - rl)))
        ratio(min(max(guess, lo + 1), hi - 1))
    pts = sorted(probes.items())
    lo = max((k for k, p in pts if p["ratio"] <= 1), default=None)
    hi = min((k for k, p in pts if p["ratio"] > 1 and (lo is None or k > lo)), default=None)
    if lo is None or hi is None:
        return math.nan, [p for _, p in pts]
    rl, rh = probes[lo]["ratio"], probes[hi]["ratio"]
    return lo + (1 - rl) * (hi - lo) / (rh - rl), [p for _, p in pts]


# ------------------------------------------------------------------------------- one shape
def _err(pred: Any, truth: float) -> float | None:
    return None if pred is None or not truth else float(pred) / truth - 1.0


def run_shape(shape: Shape, minutes: float, requests: int, truth: dict[str, Any] | None = None,
              options: dict[str, str] | None = None) -> dict[str, Any]:
    """Truth capacity, the operating point's truth R, the pipeline's solves on its windows.
    ``truth``: the shape's row of an earlier results JSON whose truth (capacity, operating
    point, its R) is taken instead of simulated again (``--truth``); ``options``: see
    :func:`config`."""
    t0 = time.perf_counter()
    if truth is None:
        cap, probes = truth_capacity(shape, requests * (3 if shape.slow else 1))
    else:
        cap, probes = float(truth["capacity_truth"]), truth["probes"]
    t_truth = time.perf_counter() - t0
    out: dict[str, Any] = {"shape": shape.name, "system": shape.system,
                           "process": shape.process, "tier": shape.tier, "class": shape.cls,
                           "second": shape.second, "seed": shape.seed, "sla_s": sla(shape),
                           "capacity_truth": cap, "probes": probes}
    proc = PROCESSES[shape.process]
    out["idc_true"] = float(proc.idc) if isinstance(proc, MAP) else None
    names = [t[0] for t in SYSTEMS[shape.system].tiers]    # the bursty tier's true mean demand
    out["demand_true"] = float(network(shape, 1).demands[names.index(shape.tier)]
                               @ np.array(SYSTEMS[shape.system].mix))
    out["scv_true"] = float(proc.scv)
    if not math.isfinite(cap):
        out["seconds"] = time.perf_counter() - t0
        return out
    users = max(1, int(round(LOAD * cap)))
    op = _probe(shape, users, requests * (6 if shape.slow else 2)) if truth is None else {
        "R": truth["R_truth"], "R_hw": truth["R_truth_hw"], "R_class": truth["R_truth_class"]}
    out.update(users=users, R_truth=op["R"], R_truth_hw=op["R_hw"],
               R_truth_class=op["R_class"])
    recs = monitor_physical(network(shape, users), 60.0 * minutes, WINDOW_S, warmup=60.0,
                            system="sys", start_time=START, seed=shape.seed)
    preds: list[dict[str, Any]] = []

    def watch(outputs: Any, _pipeline: Any) -> None:
        preds.extend(p for p in outputs.predictions if p.get("model"))

    with tempfile.TemporaryDirectory() as d:
        run_embedded(recs, config(shape, options), d, on_outputs=watch)
    solves = []
    for p in preds:
        tiers = p.get("tiers") or {}
        t = tiers.get(shape.tier) or {}
        solves.append({
            "time_min": round((float(p["time"]) - START) / 60.0, 2), "model": p["model"],
            "capacity": p.get("capacity_users"),
            "capacity_error": _err(p.get("capacity_users"), cap),
            "band": [p.get("capacity_users_lower"), p.get("capacity_users_upper")],
            "R": p.get("response_time"), "R_error": _err(p.get("response_time"), op["R"]),
            "model_error": p.get("model_error"),
            "trusted": p.get("model_trusted"), "trust_reasons": p.get("trust_reasons"),
            "model_error_pooled": p.get("model_error_pooled"),
            "model_error_pooled_se": p.get("model_error_pooled_se"),
            "model_error_solves": p.get("model_error_solves"),
            "classes": {c: {"R": v.get("response_time"),
                            "R_measured": v.get("response_time_measured")}
                        for c, v in (p.get("classes") or {}).items()},
            "calibration": [f for f in p.get("flags", []) if "MAP(2)" in f
                            or "general service" in f],
            "demand": t.get("demand_s"), "idc": t.get("idc"), "idc_lower": t.get("idc_lower"),
            "idc_upper": t.get("idc_upper"), "idc_flag": t.get("idc_flag"),
            "bursty": t.get("bursty")})
    out["solves"] = solves
    out["seconds"] = time.perf_counter() - t0
    out["seconds_truth"] = t_truth
    return out


# ------------------------------------------------------------------------------- summary
def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.0f}%"


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The acceptance counts over ``results`` (per shape, its last solve)."""
    last = [r["solves"][-1] for r in results if r.get("solves")]
    caps = [abs(s["capacity_error"]) for s in last if s["capacity_error"] is not None]
    every = [s for r in results for s in r.get("solves", [])]
    off_r = [s for s in every if s["R_error"] is not None and abs(s["R_error"]) > 0.2]
    off_c = [s for s in every if s["capacity_error"] is not None
             and abs(s["capacity_error"]) > 0.2]
    # trusted but for the undecided-burstiness rule (streams.predict.burst_trust): the counts
    # without it, from the same run
    def but_undecided(ss: list[dict[str, Any]]) -> int:
        return sum(1 for s in ss if not s["trusted"] and s["trust_reasons"] and all(
            r.startswith(burst_trust.REASON) for r in s["trust_reasons"]))

    return {
        "shapes": len(results), "shapes_solved": len(last),
        "solves_trusted": sum(bool(s["trusted"]) for s in every),
        "solves_trusted_but_undecided": but_undecided(every),
        "capacity_within_10": sum(e <= 0.1 for e in caps),
        "capacity_within_20": sum(e <= 0.2 for e in caps),
        "last_solves_trusted": sum(bool(s["trusted"]) for s in last),
        "solves": len(every),
        "solves_R_off_20": len(off_r),
        "solves_R_off_20_trusted": sum(bool(s["trusted"]) for s in off_r),
        "solves_R_off_20_trusted_but_undecided": but_undecided(off_r),
        "solves_capacity_off_20": len(off_c),
        "solves_capacity_off_20_trusted": sum(bool(s["trusted"]) for s in off_c),
        "solves_capacity_off_20_trusted_but_undecided": but_undecided(off_c),
    }


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = ["| shape | truth capacity | users | capacity (last) | error | R error (last) | "
             "trusted (last; solves trusted / off > 20% trusted) | why not trusted (last) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        s = (r.get("solves") or [None])[-1]
        if s is None:
            lines.append(f"| {r['shape']} | {r['capacity_truth']:.0f} | – | – | – | – | – | "
                         "no solve |")
            continue
        trusted = sum(bool(x["trusted"]) for x in r["solves"])
        bad = sum(bool(x["trusted"]) for x in r["solves"] if
                  (x["R_error"] is not None and abs(x["R_error"]) > 0.2)
                  or (x["capacity_error"] is not None and abs(x["capacity_error"]) > 0.2))
        why = "; ".join(s["trust_reasons"] or [])[:80] or "–"
        lines.append(f"| {r['shape']} | {r['capacity_truth']:.0f} | {r['users']} | "
                     f"{s['capacity']} | {_pct(s['capacity_error'])} | {_pct(s['R_error'])} | "
                     f"{s['trusted']} ({trusted}/{len(r['solves'])}; {bad}) | {why} |")
    return lines


def family(name: str) -> str:
    """The shape's group for the compact table: its process family, or its variant."""
    for prefix in ("class-", "mult-wide-", "two-tiers-"):
        if name.startswith(prefix):
            return prefix.rstrip("-")
    proc = next(p for p in sorted(PROCESSES, key=len, reverse=True) if name.startswith(p))
    return proc


def family_table(results: list[dict[str, Any]]) -> list[str]:
    """Per group of shapes: capacity within 10% / 20% (last solve), the median |error| of
    capacity and R (last solve), last solves trusted, solves off by > 20% (R) and how many of
    them trusted."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(family(r["shape"]), []).append(r)
    lines = ["| shapes | n | capacity within 10% / 20% | median abs. capacity error | "
             "median abs. R error | last solve trusted | solves R > 20% off: trusted |",
             "|---|---|---|---|---|---|---|"]
    for name, rs in [*groups.items(), ("**all**", results)]:
        last = [r["solves"][-1] for r in rs if r.get("solves")]
        ce = [abs(s["capacity_error"]) for s in last if s["capacity_error"] is not None]
        re_ = [abs(s["R_error"]) for s in last if s["R_error"] is not None]
        off = [s for r in rs for s in r.get("solves", [])
               if s["R_error"] is not None and abs(s["R_error"]) > 0.2]
        lines.append(f"| {name} | {len(rs)} | {sum(e <= 0.1 for e in ce)} / "
                     f"{sum(e <= 0.2 for e in ce)} | {100 * float(np.median(ce)):.0f}% | "
                     f"{100 * float(np.median(re_)):.0f}% | "
                     f"{sum(bool(s['trusted']) for s in last)} | "
                     f"{sum(bool(s['trusted']) for s in off)} of {len(off)} |")
    return lines


def _settings(pairs: list[str]) -> dict[str, Any]:
    """``--set`` pairs ``KEY=VALUE`` as ``SystemConfig`` settings (a value that reads as JSON --
    a number, ``true`` -- is taken as such, any other as a string)."""
    fields = set(SystemConfig.__dataclass_fields__)
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in fields:
            raise SystemExit(f"--set: expected KEY=VALUE with KEY a system setting, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 shapes, short runs; no JSON")
    ap.add_argument("--only", default=None, help="comma-separated shape names")
    ap.add_argument("--half", choices=("tuning", "heldout"), default=None,
                    help="only the tuning or the held-out half (halves())")
    ap.add_argument("--minutes", type=float, default=None,
                    help="minutes of windows the pipeline sees (default 30, 6 with --quick)")
    ap.add_argument("--requests", type=int, default=None,
                    help="requests per replication of a truth probe (default 20000, 2000 "
                         "with --quick)")
    ap.add_argument("--jobs", type=int, default=1, help="shapes simulated in parallel")
    ap.add_argument("--out", default=None, help=f"results JSON (default {RESULTS}; "
                                                "none with --quick)")
    ap.add_argument("--truth", default=None, metavar="FILE",
                    help="take each shape's truth from this results JSON (no truth probes; "
                         "shapes it lacks are simulated)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a further system setting (e.g. bursty_scv=response)")
    ap.add_argument("--summarize", default=None, metavar="FILE",
                    help="only print the tables of a results JSON")
    args = ap.parse_args(argv)
    if args.summarize:
        doc = json.loads(Path(args.summarize).read_text())
        print(f"commit {doc['commit']}, {len(doc['shapes'])} shapes\n")
        print("\n".join(family_table(doc["shapes"])))
        print(f"\n{json.dumps(summarize(doc['shapes']))}")
        for half, members in zip(("tuning", "heldout"), halves()):
            rs = [r for r in doc["shapes"] if r["shape"] in members]
            print(f"{half}: {json.dumps(summarize(rs))}")
        return doc
    names = [s.name for s in SHAPES]
    only = args.only.split(",") if args.only else (list(QUICK) if args.quick else names)
    if args.half:
        only = [n for n in only if n in halves()[args.half == "heldout"]]
    for n in only:
        if n not in names:
            raise SystemExit(f"--only: unknown shape {n!r}")
    minutes = args.minutes or (6.0 if args.quick else 30.0)
    requests = args.requests or (2000 if args.quick else 20000)
    t0 = time.perf_counter()
    out = args.out or (None if args.quick else str(RESULTS))
    order = [next(s for s in SHAPES if s.name == n) for n in only]   # as --only lists them
    results: list[dict[str, Any]] = []

    def document() -> dict[str, Any]:
        done = sorted(results, key=lambda r: only.index(r["shape"]))
        return {"commit": _commit(), "minutes": minutes, "requests": requests, "load": LOAD,
                "truth_from": args.truth, "settings": options,
                "sla_factor": SLA_FACTOR, "complete": len(done) == len(order),
                "summary": summarize(done),
                "halves": {h: summarize([r for r in done if r["shape"] in m])
                           for h, m in zip(("tuning", "heldout"), halves())},
                "shapes": done}

    truths = {r["shape"]: r for r in json.loads(Path(args.truth).read_text())["shapes"]} \
        if args.truth else {}
    options = _settings(args.set)
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = [pool.submit(run_shape, shape, minutes, requests, truths.get(shape.name),
                               options) for shape in order]
        for done in as_completed(futures):
            results.append(done.result())
            r = results[-1]
            s = (r.get("solves") or [{}])[-1]
            print(f"  {len(results)}/{len(order)} {r['shape']}: truth "
                  f"{r['capacity_truth']:.0f}, pipeline {s.get('capacity')} "
                  f"({_pct(s.get('capacity_error'))}), R {_pct(s.get('R_error'))}, trusted "
                  f"{s.get('trusted')} ({r['seconds']:.0f} s)", file=sys.stderr, flush=True)
            if out:                                 # after every shape: a stopped run keeps
                Path(out).parent.mkdir(parents=True, exist_ok=True)
                Path(out).write_text(json.dumps(document(), default=float) + "\n")
    doc = document()
    print("\n".join(table(doc["shapes"])))
    print(f"\n{json.dumps(doc['summary'])}\n({time.perf_counter() - t0:.0f} s wall)")
    return doc


if __name__ == "__main__":
    main()
