"""Visit ratios learned from the tiers' completions against the true table (numbers, no pass/fail).

Run from the repository root::

    python -m bench.accuracy.visits               # 8 systems, 30 simulated minutes each
    python -m bench.accuracy.visits --markdown    # the table for docs/accuracy.md
    python -m bench.accuracy.visits --minutes 10 --cases 2   # a smoke test
    python -m bench.accuracy.visits --bursty      # one bursty database, 3 simulated hours (~3 min)

Each system is simulated by :func:`solvers.simulation.physical.monitor_physical` (FCFS tiers,
exponential service, a class's request visiting a tier ``V_{m,c}`` times in a row, ``V`` drawn
from 1-5 per class per tier behind the entry tier, which is visited once), at about 50% of its
knee, 5-s windows, and its windows go through the whole pipeline
(:class:`streams.engine.pipeline.Pipeline`) three times: with the true ``visits`` table, with
none (the ratios learned from the completions, :mod:`streams.predict.visits`) and with a table
of ones (what the configuration said when the ratios were not learned: every ratio off by up to
5x). Reported at the last solve: the capacity at the SLA, the mean response time and throughput
now, the bottleneck, the largest difference between a learned ratio and the true one, and how
many ``visits_mismatch`` flags the wrong table raised. ``--bursty``: one two-tier system whose
database serves Mi et al.'s (2008) bursty MAP(2) (``I ~ 200``, 1.5 ms per visit, 3 and 2 visits
per class), long enough for the pipeline to find it bursty and solve the MAP network with the
database's demand from its history (busy time per completion times visits).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from bench.tables import Table
from solvers.paper000 import scenarios
from solvers.simulation.physical import PhysicalNetwork, Tier, monitor_physical
from streams.core.config import Config, SystemConfig
from streams.engine.pipeline import Pipeline

__all__ = ["case", "run_case", "systems"]

#: tiers of the 2- and 3-tier systems: (name, cores, mean service per visit, s)
TIERS = {2: (("front", 1, 0.004), ("db", 1, 0.003)),
         3: (("web", 2, 0.006), ("app", 2, 0.004), ("db", 1, 0.002))}
CLASSES = ("browse", "buy", "search")
THINK_S = 1.0
WINDOW_S = 5.0


def case(seed: int) -> tuple[PhysicalNetwork, dict[str, dict[str, float]], float]:
    """System ``seed``: 2 or 3 tiers, 2 or 3 classes, visits 1-5 per class at every tier after
    the first, class multipliers 0.5-2; its population at about half its knee; the true
    ``visits`` table; an SLA of 3x the no-load response time of the slowest class."""
    rng = np.random.default_rng(1000 + seed)
    M = 2 if seed % 2 == 0 else 3
    C = 2 if seed % 3 == 0 else 3
    classes = CLASSES[:C]
    mix = rng.dirichlet(np.full(C, 4.0))
    V = np.ones((M, C), dtype=int)
    V[1:] = rng.integers(1, 6, size=(M - 1, C))
    mult = rng.uniform(0.5, 2.0, size=(M, C))
    tiers = tuple(Tier(name, cores, service, multipliers=tuple(mult[m]),
                       visits=tuple(int(v) for v in V[m]))
                  for m, (name, cores, service) in enumerate(TIERS[M]))
    S = np.array([s for _, _, s in TIERS[M]])
    cores = np.array([c for _, c, _ in TIERS[M]])
    D = V * S[:, None] * mult                        # demand per request (M, C)
    knee = (D.sum(axis=0) @ mix + THINK_S) / float(np.max(D @ mix / cores))
    net = PhysicalNetwork(tiers, classes, tuple(mix), THINK_S, max(int(0.5 * knee), 1))
    table = {name: {c: float(V[m, i]) for i, c in enumerate(classes)}
             for m, (name, _, _) in enumerate(TIERS[M]) if m > 0}
    return net, table, 3.0 * float(D.sum(axis=0).max())


def bursty_case() -> tuple[PhysicalNetwork, dict[str, dict[str, float]], float]:
    """The ``--bursty`` system (module docstring), 60 users, SLA 0.1 s."""
    db = scenarios()["bottleneck_switch"].database.scaled(0.0015)
    net = PhysicalNetwork((Tier("front", 1, 0.004), Tier("db", 1, db, visits=(3, 2))),
                          ("browse", "buy"), (0.7, 0.3), THINK_S, 60)
    return net, {"db": {"browse": 3.0, "buy": 2.0}}, 0.1


def run_case(net: PhysicalNetwork, sla: float, visits: dict[str, dict[str, float]] | None,
             records: list[dict[str, Any]]) -> Any:
    """The last prediction of ``records`` through the pipeline with ``visits`` (``None``: no
    table)."""
    cfg = SystemConfig(tiers=[t.name for t in net.tiers], sla_s={"*": sla},
                       think_time_s=THINK_S, visits=visits or {})
    pipe = Pipeline(Config(systems={"sim": cfg}))
    out = pipe.process_many(records)
    last = out.predictions[-1]
    return last


def _learned_error(pred: Any, table: dict[str, dict[str, float]]) -> float:
    worst = 0.0
    for tier, per in table.items():
        for c, v in per.items():
            got = pred.tiers[tier].demands[c].visits_measured
            worst = max(worst, abs(got / v - 1))
    return worst


def _pct(a: float | None, b: float | None) -> str:
    if a is None or b is None or not b:
        return "-"
    return f"{100 * (a / b - 1):+.1f}%"


def systems(cases: int, minutes: float, bursty: bool = False) -> list[dict[str, Any]]:
    """Every case simulated and run three ways (module docstring)."""
    rows = []
    for seed in range(cases):
        net, table, sla = bursty_case() if bursty else case(seed)
        records = monitor_physical(net, minutes * 60, WINDOW_S, warmup=60.0, system="sim",
                                   seed=seed)
        ones = {t: {c: 1.0 for c in per} for t, per in table.items()}
        true, learned, wrong = (run_case(net, sla, v, records) for v in (table, None, ones))
        rows.append({"seed": seed, "net": net, "table": table, "true": true,
                     "learned": learned, "wrong": wrong})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--bursty", action="store_true", help="the bursty database (docstring)")
    args = ap.parse_args(argv)
    if args.bursty:
        args.cases, args.minutes = 1, 180.0
    start = time.perf_counter()
    load = "60 users" if args.bursty else "~50% of the knee"
    t = Table(f"Visits: the pipeline without a visits table (learned) and with a table of ones, "
              f"against the true table ({args.minutes:g} simulated minutes of {WINDOW_S:g}-s "
              f"windows at {load}; last solve)",
              ["system", "visits (tier: per class)", "users", "capacity true / learned / ones",
               "learned: capacity, R, X", "ones: capacity", "bottleneck true / learned / ones",
               "learned ratio worst", "ones: mismatch flags / ratios not 1"])
    for r in systems(args.cases, args.minutes, args.bursty):
        net, true, learned, wrong = r["net"], r["true"], r["learned"], r["wrong"]
        visits = "; ".join(f"{tier}: {'/'.join(f'{v:g}' for v in per.values())}"
                           for tier, per in r["table"].items())
        flags = sum(f.startswith("visits_mismatch") for f in wrong.flags)
        off = sum(v != 1.0 for per in r["table"].values() for v in per.values())
        name = f"{len(net.tiers)} tiers, {len(net.classes)} classes"
        t.add(f"{name}, bursty db ({true.model})" if args.bursty else f"{name} (seed {r['seed']})",
              visits,
              net.population,
              f"{true.capacity_users} / {learned.capacity_users} / {wrong.capacity_users}",
              f"{_pct(learned.capacity_users, true.capacity_users)}, "
              f"{_pct(learned.response_time, true.response_time)}, "
              f"{_pct(learned.throughput, true.throughput)}",
              _pct(wrong.capacity_users, true.capacity_users),
              f"{true.bottleneck_tier} / {learned.bottleneck_tier} / {wrong.bottleneck_tier}",
              f"{100 * _learned_error(learned, r['table']):.2f}%",
              f"{flags} / {off}")
    print(t.render(args.markdown))
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
