"""CPU and QBD solves of one pipeline solve of an open bursty system: today's capacity search
against the bisection it replaced, same run.

    python -m bench.speed.open_capacity                  # median of 3
    python -m bench.speed.open_capacity --repeat 5

The network of :mod:`bench.speed.open_models` (five tiers, two bursty 16-core tiers) with two
classes (80% at 0.9 of each tier's demand, 20% at 1.4) and one SLA for both: the worst class's
mean response time at 80% of the saturation rate. One pipeline solve of an open system at
risk is what :meth:`streams.engine.system.SystemState._complete_open` asks: the model at the
rate now (60% of saturation) and at the forecast (90%), the capacity in requests/s, the
uncertainty band's two capacities (here every demand 5% up and down) and remediation at the
forecast rate. ``bisection``: the capacity by bisection to the same tolerance and no solve
reused (the search before :class:`streams.predict.open_model.RateSolves`); ``regula falsi``:
:func:`streams.predict.open_model.rate_capacity` with the solves held by rate, every tier
Poisson-fed; ``fed model``: the pipeline's, the points and the capacity with the cache and
database fed the app's departures (``fed=True``), the band's searches corrected by its gain. The
rows alternate within each repeat. Columns: CPU ms per pipeline solve (``time.process_time``,
median), QBD solves (one per bursty tier per open solve: :func:`solvers.open.qbd.solve_qbd`
counted) and the capacities each gives.

BLAS runs on one thread, as in the pipeline (importing the ``bench`` package pins it, before
numpy loads; set ``OPENBLAS_NUM_THREADS`` to override): unpinned, OpenBLAS's threads
spin on the fed model's 150-170-phase blocks and count as CPU time
(:mod:`bench.speed.open_models`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from bench.speed.open_models import CORES, processes
from solvers.open import queues, tiers_capacity
from streams.predict import open_model, open_whatif
from streams.predict.model import SystemModel

SHARES = np.array([0.9, 1.4])
MIX = np.array([0.8, 0.2])


def system() -> SystemModel:
    procs = processes()
    D = np.array([[p.mean * s for s in SHARES] for p in procs])
    model = SystemModel(tiers=["lb", "web", "app", "cache", "db"], classes=["browse", "buy"],
                        D_mc=D, mix=MIX, servers=np.array(CORES), think_time=0.0,
                        sla=np.array([math.inf, math.inf]),
                        processes=[p if p.scv > 1.0 else None for p in procs],
                        map_limit=10_000)
    sat = tiers_capacity(MIX, D, np.array(CORES))
    sla = float(open_model.solve_at(model, 0.8 * sat).response_time.max())
    return model.variant(sla=np.array([sla, sla]))


def bisection(model: SystemModel, _held: Any = None,
              _start: Any = None) -> open_model.RateCapacity:
    """The capacity search before the regula falsi: bisection on ``(0, x_sat)`` to
    :data:`~streams.predict.open_model.RATE_TOLERANCE` of ``x_sat``, every probe solved
    (``_held``, ``_start`` ignored: no solve reused)."""
    S, V = open_model._inputs(model)
    sat = tiers_capacity(model.mix, S, model.servers.astype(int), V)
    judged = (model.mix > 0) & np.isfinite(model.sla)
    lo, hi = 0.0, sat
    if open_model._excess(model, open_model.solve_at(model, 0.0), judged).max() > 1.0:
        hi = 0.0
    while hi - lo > open_model.RATE_TOLERANCE * sat:
        mid = 0.5 * (lo + hi)
        if open_model._excess(model, open_model.solve_at(model, mid), judged).max() <= 1.0:
            lo = mid
        else:
            hi = mid
    beyond = open_model.solve_at(model, hi)
    c = int(np.argmax(open_model._excess(model, beyond, judged)))
    return open_model.RateCapacity(lo, sat, model.classes[c], None)


@contextmanager
def counted() -> Iterator[list[int]]:
    """``solvers.open.qbd.solve_qbd`` calls (as the open queues call it) while inside."""
    box, inner = [0], queues.solve_qbd

    def counting(*args: Any, **kw: Any) -> Any:
        box[0] += 1
        return inner(*args, **kw)
    queues.solve_qbd = counting
    try:
        yield box
    finally:
        queues.solve_qbd = inner


def pipeline_solve(model: SystemModel, old: bool, fed: bool = False
                   ) -> tuple[float, list[float]]:
    """One open pipeline solve (module docstring); the capacities (nominal, band low, band
    high, after the first remedy). ``fed``: the points and the nominal capacity of the fed
    model (the tiers behind a bursty one fed its departures, as the pipeline solves them
    where :func:`streams.predict.open_model.fed_applies`), else all Poisson-fed."""
    sat = tiers_capacity(model.mix, model.D_mc, model.servers)
    x, x_fc = 0.6 * sat, 0.9 * sat
    held = None if old else open_model.RateSolves(model)
    search = bisection if old else open_model.rate_capacity
    saved = open_model.rate_capacity
    if old:
        open_model.rate_capacity = bisection     # remediation's capacities too
    try:
        for rate in (x, x_fc):
            open_model.open_point(model, rate, held, fed=fed)
        cap = (search(model) if old else search(model, held, fed=fed)).capacity
        band = [(search(model.variant(D_mc=model.D_mc * f)) if old else
                 search(model.variant(D_mc=model.D_mc * f), gain=held.gain)).capacity
                for f in (1.05, 0.95)]
        remedy = open_whatif.remediate_open(model, x_fc, cap, held=held)
    finally:
        open_model.rate_capacity = saved
    first = remedy["actions"][0]["capacity_rate_per_s"] if remedy["actions"] else math.nan
    return x, [cap, *band, first]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    model = system()
    pipeline_solve(model, False)                 # the per-job patterns built once
    print("| capacity search | CPU ms / pipeline solve | QBD solves | capacity, band low, "
          "band high, first remedy (req/s) |")
    print("|---|---:|---:|---|")
    rows = [("bisection", True, False), ("regula falsi", False, False),
            ("regula falsi, fed model", False, True)]
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    counts: dict[str, int] = {}
    caps: dict[str, list[float]] = {}
    for _ in range(args.repeat):                 # the rows alternate: the same load for each
        for name, old, fed in rows:
            with counted() as n:
                t0 = time.process_time()
                _, caps[name] = pipeline_solve(model, old, fed)
                cpu[name].append(time.process_time() - t0)
            counts[name] = n[0]
    for name, _, _ in rows:
        print(f"| {name} | {1000 * statistics.median(cpu[name]):.0f} | {counts[name]} | "
              f"{', '.join(f'{c:.2f}' for c in caps[name])} |", flush=True)


if __name__ == "__main__":
    main()
