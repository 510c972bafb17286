"""The open pool chain with per-class service SCVs against the simulated physical system.

    python -m bench.accuracy.pool_open_ps                  # SCVs 1, 2.5, 5, 10; seeds 1-3
    python -m bench.accuracy.pool_open_ps --scvs 2.5 --seeds 1 --requests 20000
    python -m bench.accuracy.pool_open_ps --estimator --seeds 1,2,3,4,5
    python -m bench.accuracy.pool_open_ps --rejudge /tmp/camp6-open OUT --service-scv db.search=2.5
    python -m bench.accuracy.pool_open_ps --quantiles --seeds 11,12,13   # p95/p99 per class

The shape is the real testbed's (bench/testbed: gunicorn's 2 sync workers, a pool of 2 held
across a 1-core FCFS ``app`` and a 1-core processor-sharing ``db``; 4 classes at the mix
15/40/30/15 with the per-class demands its rejudged open ramp estimated, :data:`DEMANDS`;
each class's SLO the testbed's, 3x its lowest run's mean, :data:`SLA`), Poisson arrivals.
One class (``search``, the dear one) has service SCV ``v`` at the db, drawn from a two-phase
hyperexponential of balanced means (``h2``: the shape the chain fits) or from a lognormal
(``ln``: a shape it was not fitted on); every other service is exponential.

The truth: :func:`solvers.simulation.pool_open_ps.simulate_pool_open`, ``--requests``
arrivals per seed after a 5% warm-up (``0.4 / (1 - load)`` times as many above 60% load), at
the fractions :data:`FRACTIONS` of the chain's saturation rate (the held tiers' throughput
with both tokens held). The model: the held chain (:func:`solvers.pools_open.held_network`)
given the class's SCV (``chain``) and, beside it, today's exponential chain (``exp``). Per SCV and law: each class's R error (model over the
simulated mean, averaged over seeds; worst over rates and classes), the pool utilization's
error in points, and the capacity (the largest rate at which every class's mean meets its
SLO) -- the model's by bisection on the chain, the simulation's per seed by bisection to 1%
on the same seed's runs. Figures, no pass/fail.

``--estimator``: where the SCV comes from when nobody configures it -- the pipeline's
estimator (:mod:`estimators.service_scv`) on 15-s windows of the simulated db's per-class
mean residence over 15 minutes at 9/s (the testbed's low-load flat part), seeds 101-, per
law and SCV: the search class's reading and the exponential classes'.

``--quantiles``: each class's p95 and p99 of the response time, the simulated ones (per seed
the empirical quantile of its requests; the mean over seeds with the 95% interval of that
mean) against the pipeline's model (:meth:`streams.predict.model.SystemModel.quantiles` at
the open point: the pool's passage law, :mod:`solvers.pools_passage`) and against today's
law before it (the same call without the passage: the open tiers' law without the pool at
the processor-sharing db; ``before``), per SCV and law at :data:`FRACTIONS`; the worst over
classes and loads last. Targets: p95 within 15%, p99 within 20%.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
import time

import numpy as np

from bench.accuracy.pool_open import LEVELS, open_quantiles
from estimators.service_scv import service_scv
from solvers.pools import PoolSpec
from solvers.pools_open import HeldCurve, held_network, solve_open_pool
from solvers.simulation.pool_open_ps import simulate_pool_open
from streams.predict import open_model
from streams.predict.model import SystemModel

CLASSES = ("buy", "home", "product", "search")
MIX = np.array([0.15, 0.4, 0.3, 0.15])
#: per tier (app, db) and class, seconds: the demands the testbed's rejudged open ramp gave
DEMANDS = np.array([[1.630e-3, 1.292e-3, 1.463e-3, 1.457e-3],
                    [2.142e-3, 2.216e-3, 3.835e-3, 50.668e-3]])
#: the testbed's SLOs, seconds (3x each class's mean in its lowest closed run)
SLA = np.array([0.018328, 0.015968, 0.023757, 0.210259])
CORES, PS, SIZE = [1, 1], [False, True], 2
#: loads as fractions of the chain's saturation rate
FRACTIONS = (0.2, 0.4, 0.6, 0.8, 0.95)


def scv_matrix(v: float) -> np.ndarray:
    s = np.ones_like(DEMANDS)
    s[1, 3] = v
    return s


def laws(law: str) -> list[list[str]]:
    return [["exp"] * 4, ["exp"] * 3 + [law]]


def curve(v: float) -> HeldCurve:
    return held_network(DEMANDS, CORES, [PoolSpec(SIZE, 0, 2, "workers")], 0, MIX,
                        ps=PS, class_scv=scv_matrix(v))


def model_R(c: HeldCurve, rate: float) -> tuple[np.ndarray, float]:
    r = solve_open_pool(rate, c)
    return r.residence_time.sum(axis=0) + r.waiting_time, r.utilization


def model_capacity(c: HeldCurve) -> float:
    lo, hi = 0.0, c.saturation
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        R, _ = model_R(c, mid)
        lo, hi = (mid, hi) if np.all(R <= SLA) else (lo, mid)
    return lo


def sim(rate: float, law: str, v: float, seed: int, requests: int):
    return simulate_pool_open(rate, MIX, DEMANDS, CORES, PS, SIZE, laws(law), scv_matrix(v),
                              seed, requests)


def sim_capacity(law: str, v: float, seed: int, requests: int, guess: float, sat: float
                 ) -> float:
    lo, hi = 0.3 * guess, min(1.6 * guess, 0.999 * sat)
    while np.all(sim(hi, law, v, seed, requests).mean_response(4) <= SLA) and hi < 0.99 * sat:
        lo, hi = hi, min(1.5 * hi, 0.999 * sat)
    while hi / lo - 1 > 0.01:
        mid = 0.5 * (lo + hi)
        ok = np.all(sim(mid, law, v, seed, requests).mean_response(4) <= SLA)
        lo, hi = (mid, hi) if ok else (lo, mid)
    return 0.5 * (lo + hi)


def estimates(law: str, v: float, seed: int, rate: float = 9.0, minutes: float = 15.0,
              window_s: float = 15.0) -> list[float | None]:
    """Each class's SCV at the db as the pipeline's estimator
    (:func:`estimators.service_scv.service_scv`) reads it from ``window_s`` windows of the
    simulated db's per-class mean residence over ``minutes`` at ``rate``/s (the testbed's
    low-load flat part: 9/s for 12-15 minutes)."""
    run = sim(rate, law, v, seed, int(rate * 60 * minutes))
    w = ((run.end - run.end[0]) // window_s).astype(int)
    out = []
    for c in range(len(CLASSES)):
        sel = run.cls == c
        n = np.bincount(w[sel], minlength=w.max() + 1).astype(float)
        s = np.bincount(w[sel], weights=run.residence[sel, 1], minlength=w.max() + 1)
        out.append(service_scv(np.divide(s, n, out=np.full(n.shape, np.nan), where=n > 0), n))
    return out


def estimator_table(scvs: list[float], law_names: list[str], seeds: list[int]) -> None:
    print("| law | search SCV | search's estimate: median (range) | the exponential classes' "
          "estimates (range) |")
    print("|---|---:|---|---|")
    for law in law_names:
        for v in scvs:
            if law == "h2" and v < 1:
                continue
            got = np.array([estimates(law, v, s) for s in seeds], dtype=float)
            lost = int(np.isnan(got).sum())     # not identified (None): the class keeps 1
            print(f"| {law} | {v:g} | {np.nanmedian(got[:, 3]):.2f} "
                  f"({np.nanmin(got[:, 3]):.2f}-{np.nanmax(got[:, 3]):.2f}) | "
                  f"{np.nanmin(got[:, :3]):.2f}-{np.nanmax(got[:, :3]):.2f} |"
                  + (f" {lost} not identified" if lost else ""), flush=True)


def rejudge_configured(src: str, out: str, workers: int, latency: str | None,
                       scv: dict[str, dict[str, float]]) -> dict:
    """:func:`bench.testbed.campaign.rejudge` with ``service_scv`` configured (the testbed
    campaign writes its own configuration: the key is added to its system table)."""
    from pathlib import Path

    from bench.testbed import campaign
    write = campaign.write_config
    cells = ", ".join(f"{t} = {{ " + ", ".join(f'"{c}" = {v:g}' for c, v in per.items())
                      + " }" for t, per in scv.items())

    def with_scv(path: Path, *a, **k) -> None:
        write(path, *a, **k)
        text = path.read_text()
        head, sep, rest = text.partition("\n[systems.testbed.pools")
        path.write_text(head.rstrip("\n") + f"\nservice_scv = {{ {cells} }}\n" + sep + rest)
    campaign.write_config = with_scv
    try:
        return campaign.rejudge(Path(src), Path(out), workers, False, latency)
    finally:
        campaign.write_config = write


def pipeline_model(v: float) -> SystemModel:
    """The pipeline's open model of the testbed shape with the pool and search's db SCV
    ``v`` (configured), the db processor sharing."""
    return SystemModel(tiers=["app", "db"], classes=list(CLASSES), D_mc=DEMANDS.copy(),
                       mix=MIX.copy(), servers=np.array(CORES, dtype=float), think_time=0.0,
                       sla=SLA.copy(), processes=None, map_limit=10_000,
                       ps=np.array(PS), ps_law=np.array(PS),
                       pools=(PoolSpec(SIZE, 0, 2, "workers"),), service_scv=scv_matrix(v))


def model_quantiles(v: float, rate: float, passage: bool = True) -> np.ndarray:
    """``(C, 2)`` p95, p99 of the pipeline's model at ``rate`` (``passage``: the pool's
    passage law; else today's law before it)."""
    return open_quantiles(pipeline_model(v), rate, passage)


def quantile_table(scvs: list[float], law_names: list[str], seeds: list[int], requests: int
                   ) -> None:
    from bench.accuracy.pool_matrix import interval
    print(f"seeds {seeds}; {requests} requests per run (x 0.4 / (1 - load) above 60%)")
    print("| law | SCV | load | class | p95 sim ms (±95%) | model | before | p99 sim ms (±95%) "
          "| model | before |")
    print("|---|---:|---:|---|---|---|---|---|---|---|")
    worst: dict[tuple, list[float]] = {}
    for law in law_names:
        for v in scvs:
            if law == "h2" and v < 1:
                continue
            sat = curve(v).saturation
            for f in FRACTIONS:
                rate = f * sat
                n = int(requests * max(1.0, 0.4 / (1.0 - f)))
                runs = [sim(rate, law, v, s, n) for s in seeds]
                sq = np.array([[np.quantile((r.end - r.arrival)[r.cls == c], LEVELS)
                                for c in range(len(CLASSES))] for r in runs])   # (S, C, 2)
                after, before = model_quantiles(v, rate), model_quantiles(v, rate, False)
                for c, name in enumerate(CLASSES):
                    cells = []
                    for k in range(len(LEVELS)):
                        m, hw = interval(sq[:, c, k].tolist())
                        ea, eb = after[c, k] / m - 1, before[c, k] / m - 1
                        key = (law, v, LEVELS[k])
                        w = worst.setdefault(key, [0.0, 0.0])
                        w[0], w[1] = max(w[0], abs(ea)), max(w[1], abs(eb))
                        cells.append(f"{m * 1e3:.1f} ± {hw * 1e3:.1f} | {ea:+.0%} | {eb:+.0%}")
                    print(f"| {law} | {v:g} | {f:.0%} | {name} | " + " | ".join(cells) + " |",
                          flush=True)
    print("\n| law | SCV | worst abs p95 err model / before | worst abs p99 err model / "
          "before |")
    print("|---|---:|---|---|")
    for law in law_names:
        for v in scvs:
            if (law, v, LEVELS[0]) in worst:
                a, b = worst[(law, v, LEVELS[0])], worst[(law, v, LEVELS[1])]
                print(f"| {law} | {v:g} | {a[0]:.0%} / {a[1]:.0%} | {b[0]:.0%} / {b[1]:.0%} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scvs", type=lambda s: [float(x) for x in s.split(",")],
                    default=[1.0, 2.5, 5.0, 10.0])
    ap.add_argument("--laws", type=lambda s: s.split(","), default=["h2", "ln"])
    ap.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1, 2, 3])
    ap.add_argument("--requests", type=int, default=60_000)
    ap.add_argument("--no-capacity", action="store_true")
    ap.add_argument("--rejudge", nargs=2, metavar=("SRC", "OUT"),
                    help="rejudge a testbed campaign with --service-scv configured")
    ap.add_argument("--service-scv", default="db.search=2.5",
                    help="with --rejudge: tier.class=SCV[,...]")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--latency", default="estimate")
    ap.add_argument("--quantiles", action="store_true",
                    help="p95/p99 per class: the pool's passage law and today's against "
                         "the simulation")
    ap.add_argument("--estimator", action="store_true",
                    help="the SCV estimator on simulated windows instead (seeds + 100)")
    args = ap.parse_args(argv)
    t0 = time.time()
    if args.rejudge:
        scv: dict[str, dict[str, float]] = {}
        for cell in args.service_scv.split(","):
            key, value = cell.split("=")
            tier, cls = key.split(".")
            scv.setdefault(tier, {})[cls] = float(value)
        res = rejudge_configured(*args.rejudge, args.workers, args.latency, scv)
        op = res.get("open_ramp", {})
        print({k: op.get(k) for k in ("measured_breach_min", "first_alert_min", "lead_min")})
        return 0
    if args.quantiles:
        quantile_table(args.scvs, args.laws, args.seeds, args.requests)
        print(f"\n{time.time() - t0:.0f} s")
        return 0
    if args.estimator:
        estimator_table(args.scvs, args.laws, [s + 100 for s in args.seeds])
        return 0
    exp_curve = curve(1.0)
    sat = exp_curve.saturation
    print(f"saturation {sat:.2f}/s; seeds {args.seeds}; {args.requests} requests per run")
    print("| law | SCV | load | R sim ms buy / home / product / search | R err chain | "
          "R err exp | U sim | U err chain / exp (pt) |")
    print("|---|---:|---:|---|---|---|---:|---|")
    summary = []
    for law in args.laws:
        for v in args.scvs:
            if law == "h2" and v < 1:
                continue
            c = curve(v)
            worst_c = worst_e = 0.0
            for f in FRACTIONS:
                rate = f * sat
                n = int(args.requests * max(1.0, 0.4 / (1.0 - f)))   # longer near saturation
                runs = [sim(rate, law, v, s, n) for s in args.seeds]
                Rs = np.mean([r.mean_response(4) for r in runs], axis=0)
                Us = float(np.mean([r.busy_tokens for r in runs])) / SIZE
                Rc, Uc = model_R(c, rate)
                Re, Ue = model_R(exp_curve, rate)
                ec, ee = Rc / Rs - 1, Re / Rs - 1
                worst_c = max(worst_c, float(np.max(np.abs(ec))))
                worst_e = max(worst_e, float(np.max(np.abs(ee))))
                fmt = lambda a: " / ".join(f"{x:+.0%}" for x in a)
                print(f"| {law} | {v:g} | {f:.0%} | " + " / ".join(f"{x * 1e3:.1f}" for x in Rs)
                      + f" | {fmt(ec)} | {fmt(ee)} | {Us:.3f} | {100 * (Uc - Us):+.1f} / "
                      f"{100 * (Ue - Us):+.1f} |", flush=True)
            row = {"law": law, "scv": v, "worst_chain": worst_c, "worst_exp": worst_e}
            if not args.no_capacity:
                cap_c, cap_e = model_capacity(c), model_capacity(exp_curve)
                sims = [sim_capacity(law, v, s, args.requests, cap_c, sat) for s in args.seeds]
                row.update(cap_chain=cap_c, cap_exp=cap_e, cap_sim=sims)
            summary.append(row)
    print()
    print("| law | SCV | worst abs R err chain / exp | capacity sim (per seed) | chain (err) "
          "| exp chain (err) |")
    print("|---|---:|---|---|---|---|")
    for r in summary:
        cap = ""
        if "cap_sim" in r:
            m = float(np.mean(r["cap_sim"]))
            cap = (" / ".join(f"{x:.1f}" for x in r["cap_sim"])
                   + f" | {r['cap_chain']:.1f} ({r['cap_chain'] / m - 1:+.1%}) | "
                   f"{r['cap_exp']:.1f} ({r['cap_exp'] / m - 1:+.1%})")
        print(f"| {r['law']} | {r['scv']:g} | {r['worst_chain']:.0%} / {r['worst_exp']:.0%} | "
              f"{cap} |")
    print(f"\n{time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
