"""End to end on a multi-core three-tier shop with a bursty database (the multi-core shop, case (b)):
the windows of the physical system through the whole embedded pipeline.

    python -m bench.e2e.multicore            # truth grid, steady run, ramp run
    python -m bench.e2e.multicore --quick    # shorter simulations (smoke test)
    python -m bench.e2e.multicore --seed 2   # another seed
    python -m bench.e2e.multicore --capacity 214 --steady-seeds 1-12   # steady runs only

The system (also in bench/accuracy/multicore.py): web 4 cores (exponential, 8 ms), app 4 cores
(exponential, 10 ms), db 8 cores whose service-time sequence is Mi et al.'s (2008) bursty MAP(2)
(I ~ 200) with mean 16 ms; think time 1 s; classes ``browse`` (80%, x0.75 at the db) and
``buy`` (20%, x2 at the db); SLA 0.1 s for every class. Simulated by
:mod:`solvers.simulation.physical` (cores, FCFS queues, the correlated service-time sequence),
monitored in 5-s windows. The pipeline is configured as a new user would: tiers in order and the
SLA, nothing else (think time from Little's law, demands and burstiness estimated).
``python -m bench.e2e.many_cores`` runs the same shop, its code and its ramp with a database of
more cores (:func:`network`'s ``cores`` and ``think_scale``).

1. **Truth capacity** -- the largest population whose worst class's mean response time stays
   within the SLA: simulated on a grid of populations (3 replications each), the crossing
   interpolated linearly.
2. **Steady run** -- 60 minutes at 40% of the truth capacity through ``run_embedded``: the
   pipeline's last capacity against the truth, and the model it used. ``--steady-seeds``
   repeats only this run over several seeds and tabulates the capacity and the database's
   ``I`` it rests on (the spread one hour of windows leaves, docs/accuracy.md section 12);
   ``--fit-sensitivity`` gives the model's capacity on the true demands with the database's
   true MAP and with MAP(2)s fitted to its true mean and p95 at a range of ``I``.
3. **Ramp run** -- 20 minutes at 40%, then a linear ramp to 150% of capacity over 40 minutes,
   then 10 minutes there. Measured breach: the first minute whose worst class's
   completion-weighted mean response time (summed over the tiers) exceeds the SLA. perfcast's
   first ``predicted_breach`` firing must lead it by >= 5 minutes, and no firing may come earlier
   than 30 minutes before it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import tempfile
import time
from typing import Any, Callable

import numpy as np

from bench.accuracy.alert_shapes import CLASSES, MIX, SLA_S, START, WINDOW_S
from bench.accuracy.alert_shapes import network as shop_network
from solvers.simulation.physical import (PhysicalNetwork, monitor_physical,
                                         simulate_physical)
from streams.core.config import BURSTY_SCVS, Config, SystemConfig
from streams.cli.embedded import run_embedded

#: the pipeline's default calibration of a bursty tier's MAP(2)
DEFAULT_BURSTY_SCV: str = SystemConfig.bursty_scv
#: the pipeline's default: a bursty tier of up to this many cores is the per-job station
DEFAULT_PER_JOB_MAX_CORES: int = SystemConfig.per_job_max_cores

#: the SLA is read on the 1-minute mean (the measured breach below); the pipeline is told so
BREACH_WINDOW_S = 60.0

#: the database's cores in the shop
BASE_CORES = 8


def network(population: int, cores: int = BASE_CORES, think_scale: float = 1.0
            ) -> PhysicalNetwork:
    """The shop with the bursty database (:func:`bench.accuracy.alert_shapes.network`) at
    ``population`` users, the database on ``cores`` cores with its service sequence scaled by
    ``cores / 8`` (the per-core load and the saturation throughput stay the shop's), the think
    time times ``think_scale`` (the same request rates from that many times the users)."""
    shop = shop_network("bursty", population)
    web, app, db = shop.tiers
    db = dataclasses.replace(db, cores=cores, service=db.service.scaled(
        db.service.mean * cores / BASE_CORES))
    return dataclasses.replace(shop, tiers=(web, app, db),
                               think_time=shop.think_time * think_scale)


def truth_capacity(grid: list[int], duration: float, seed: int,
                   network_at: Callable[[int], PhysicalNetwork] = network,
                   sla_s: float = SLA_S) -> tuple[float, list[tuple]]:
    """Interpolated population where the worst class's simulated R crosses ``sla_s``
    (``network_at(users)``: the simulated system, default the shop)."""
    rows = []
    for n in grid:
        res = simulate_physical(network_at(n), duration, warmup=duration / 10, replications=3,
                                seed=seed + n)
        worst = max(range(len(CLASSES)), key=lambda c: res.response_time[c].mean)
        est = res.response_time[worst]
        rows.append((n, CLASSES[worst], est.mean, est.half_width))
    for (n0, _, r0, _), (n1, _, r1, _) in zip(rows, rows[1:]):
        if r0 <= sla_s < r1:
            return n0 + (sla_s - r0) * (n1 - n0) / (r1 - r0), rows
    return math.nan, rows


def print_truth(rows: list[tuple]) -> None:
    """The truth grid of :func:`truth_capacity` as a markdown table."""
    print("## Truth capacity (simulation, 3 replications per population)\n")
    print("| users | worst class | R (ms) | 95% CI half-width (ms) |\n|---|---|---|---|")
    for n, worst, r, hw in rows:
        print(f"| {n} | {worst} | {1000 * r:.1f} | {1000 * hw:.1f} |")


def true_service() -> str:
    """The database's true service statistics: its MAP's ``I``, p95 and SCV, and the SCV and
    p95 of a request's service time (the MAP's interval times the class's multiplier, classes
    in the mix), what the busy-time p95 estimates."""
    db = network(1).tiers[2]
    proc, mult, mix = db.service, np.array(db.multipliers), np.array(MIX)
    second = float(mix @ mult ** 2) * (proc.scv + 1.0) * proc.mean ** 2
    first = float(mix @ mult) * proc.mean
    lo, hi = 0.0, 100.0 * proc.mean                 # the request's p95 by bisection on its CDF
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(mix @ proc.cdf(mid / mult)) < 0.95 else (lo, mid)
    return (f"true MAP: I {proc.idc:.0f}, p95 {1000 * proc.quantile(0.95):.1f} ms, SCV "
            f"{proc.scv:.1f}; per request, x its class's multiplier: p95 {1000 * hi:.1f} ms, "
            f"SCV {second / first ** 2 - 1:.1f}")


def config(alert_window_s: float = BREACH_WINDOW_S,
           bursty_scv: str = DEFAULT_BURSTY_SCV, sla_s: float = SLA_S,
           per_job_max_cores: int = DEFAULT_PER_JOB_MAX_CORES) -> Config:
    """The tiers in order and the SLA: every class's ``alert_window_s`` mean within ``sla_s``
    (the measured breach below reads the same window); ``bursty_scv`` and
    ``per_job_max_cores`` as :class:`streams.core.config.SystemConfig`'s."""
    return Config(systems={"shop": SystemConfig(tiers=("web", "app", "db"),
                                                sla_s={"*": sla_s},
                                                alert_window_s=alert_window_s,
                                                bursty_scv=bursty_scv,
                                                per_job_max_cores=per_job_max_cores)})


def run(records: list[dict[str, Any]], alert_window_s: float = BREACH_WINDOW_S,
        bursty_scv: str = DEFAULT_BURSTY_SCV, sla_s: float = SLA_S,
        per_job_max_cores: int = DEFAULT_PER_JOB_MAX_CORES
        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The records through ``run_embedded`` configured by :func:`config`: the predictions that
    carry a model and the alert events."""
    preds: list[dict[str, Any]] = []

    def watch(outputs: Any, _pipeline: Any) -> None:
        preds.extend(p for p in outputs.predictions if p.get("model"))

    cfg = config(alert_window_s, bursty_scv, sla_s, per_job_max_cores)
    with tempfile.TemporaryDirectory() as d:
        summary = run_embedded(records, cfg, d, on_outputs=watch)
    return preds, list(summary.alert_events)


def measured_breach(records: list[dict[str, Any]], sla_s: float = SLA_S) -> float | None:
    """First minute (end time, s after START) whose worst class's mean R exceeds ``sla_s``."""
    acc: dict[tuple[int, str], np.ndarray] = {}
    for r in records:
        minute = int(math.ceil((float(r["end"]) - START) / 60.0))
        a = acc.setdefault((minute, r["tier"]), np.zeros((2, len(CLASSES))))
        for j, c in enumerate(CLASSES):
            k = r["completions"][c]
            if k and c in r["response_time_s"]:
                a[0, j] += r["response_time_s"][c] * k
                a[1, j] += k
    for minute in sorted({m for m, _ in acc}):
        R = np.zeros(len(CLASSES))
        for tier in ("web", "app", "db"):
            a = acc.get((minute, tier))
            if a is None or not np.all(a[1] > 0):
                R[:] = np.nan
                break
            R += a[0] / a[1]
        if np.nanmax(R) > sla_s:
            return 60.0 * minute
    return None


def ramp_schedule(cap: float, hold: float = 1200.0, ramp: float = 2400.0
                  ) -> tuple[int, list[tuple[float, int]], float]:
    """The ramp's populations: ``hold`` s at 40% of ``cap``, a linear ramp to 150% over
    ``ramp`` s (60 steps), 600 s there -- the first population, the schedule and the
    duration."""
    low, top = max(1, int(round(0.4 * cap))), int(round(1.5 * cap))
    steps = 60
    sched = [(hold + ramp * k / steps, int(round(low + (top - low) * k / steps)))
             for k in range(1, steps + 1)]
    return low, sched, hold + ramp + 600.0


def ramp_records(cap: float, seed: int, network_at: Callable[[int], PhysicalNetwork] = network
                 ) -> list[dict[str, Any]]:
    """The windows of the ramp (:func:`ramp_schedule`: 20 minutes at 40% of ``cap``, a linear
    ramp to 150% over 40 minutes, 10 minutes there); ``network_at(users)`` simulated with seed
    ``seed + 100``, system ``shop``, 5-s windows from ``START``."""
    low, sched, duration = ramp_schedule(cap)
    return monitor_physical(network_at(low), duration, WINDOW_S, schedule=sched,
                            system="shop", start_time=START, seed=seed + 100)


def ramp_run(cap: float, seed: int, network_at: Callable[[int], PhysicalNetwork],
             run_records: Callable[[list[dict[str, Any]]], tuple[list, list]],
             sla_s: float = SLA_S) -> tuple[float | None, list[float], list[dict[str, Any]]]:
    """The ramp's windows (:func:`ramp_records`) through ``run_records``: the measured breach
    (s after START, or None), the ``predicted_breach`` firings (s after START) and the
    predictions."""
    ramped = ramp_records(cap, seed, network_at)
    preds, events = run_records(ramped)
    fired = sorted(a["time"] - START for a in events
                   if a["alert"] == "predicted_breach" and a["state"] == "firing")
    return measured_breach(ramped, sla_s), fired, preds


def first_lead(breach: float | None, fired: list[float]) -> float | None:
    """How long before ``breach`` the first firing came (s), or None: no breach, or no firing
    before it."""
    before = [f for f in fired if breach is not None and f < breach]
    return breach - before[0] if before else None


def steady_records(population: int, seed: int, duration: float,
                   network_at: Callable[[int], PhysicalNetwork] = network
                   ) -> list[dict[str, Any]]:
    """``duration`` seconds of 5-s windows of ``network_at(population)`` from ``START``."""
    return monitor_physical(network_at(population), duration, WINDOW_S, system="shop",
                            start_time=START, seed=seed)


def steady_run(population: int, seed: int, duration: float,
               alert_window_s: float = BREACH_WINDOW_S,
               bursty_scv: str = DEFAULT_BURSTY_SCV) -> list[dict[str, Any]]:
    """The pipeline's predictions on ``duration`` seconds of the shop at ``population``."""
    return run(steady_records(population, seed, duration), alert_window_s, bursty_scv)[0]


def seed_range(text: str) -> list[int]:
    """``"1-12"`` or ``"1,3,5"`` -> the seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    return seeds


def steady_seeds(cap: float, seeds: list[int], duration: float, alert_window_s: float,
                 bursty_scv: str = DEFAULT_BURSTY_SCV) -> None:
    """The steady run's last capacity and the database's ``I`` per seed, and how many land
    within 10% of the truth ``cap``."""
    low = max(1, int(round(0.4 * cap)))
    print(f"## Steady runs at 40% of capacity ({low} users, {duration / 60:.0f} min), "
          f"{len(seeds)} seeds\n")
    print("| seed | last capacity | error | db `I` (95% interval) | `I` of the MAP(2) fit "
          "| p95 of the fit (ms) |\n|---|---|---|---|---|---|")
    errors, idcs = [], []
    for seed in seeds:
        last = steady_run(low, seed, duration, alert_window_s, bursty_scv)[-1]
        db, err = last["tiers"]["db"], 100 * (last["capacity_users"] / cap - 1)
        fit = db.get("map2") or {}
        errors.append(err)
        idcs.append(db["idc"])
        print(f"| {seed} | {last['capacity_users']} | {err:+.1f}% | {db['idc']:.0f} "
              f"({db['idc_lower']:.0f}-{db['idc_upper']:.0f}) | {fit.get('idc', math.nan):.0f} "
              f"| {1000 * fit.get('p95_s', math.nan):.0f} |", flush=True)
    inside = sum(abs(e) <= 10 for e in errors)
    print(f"\nwithin 10% of the truth {cap:.0f}: **{inside} of {len(seeds)}**; error median "
          f"{np.median(errors):+.1f}%, range {min(errors):+.1f} to {max(errors):+.1f}%; "
          f"db `I` mean {np.mean(idcs):.0f}, range {min(idcs):.0f}-{max(idcs):.0f} "
          "(true 202)")


def fit_sensitivity(idcs: list[float], p95_s: float = 0.104) -> None:
    """The decomposition's capacity (bench/accuracy/multicore.py's search) of system (b) with
    its true demands, the database's process the true MAP or ``fit_map2(16 ms, I, p95_s)``."""
    from bench.accuracy.multicore import model_capacity, systems
    from estimators.mapfit import fit_map2

    b = systems()["b"]
    db = b.tiers[-1]
    print("## Capacity of the model on the true demands, by the database's process\n")
    print("| database process | `I` | SCV | capacity |\n|---|---|---|---|")
    print(f"| true MAP | {db.process.idc:.0f} | {db.process.scv:.1f} | "
          f"{model_capacity(b, 'dec')[0]} |")
    for idc in idcs:
        fit = fit_map2(db.mean, idc, p95_s).process
        fitted = dataclasses.replace(b, tiers=(*b.tiers[:-1],
                                               dataclasses.replace(db, process=fit)))
        print(f"| MAP(2) fit, p95 {1000 * p95_s:.0f} ms | {fit.idc:.0f} | {fit.scv:.1f} | "
              f"{model_capacity(fitted, 'dec')[0]} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--capacity", type=float, default=None,
                    help="the truth capacity (skips the simulated grid)")
    ap.add_argument("--grid-only", action="store_true", help="only the truth capacity")
    ap.add_argument("--alert-window", type=float, default=BREACH_WINDOW_S,
                    help="the pipeline's alert_window_s (default: the measured breach's 60 s; "
                         "300 is perfcast's default, 0 the long-run mean only)")
    ap.add_argument("--steady-seeds", default=None, metavar="SEEDS",
                    help="only the steady run, for these seeds ('1-12' or '1,3,5')")
    ap.add_argument("--steady-minutes", type=float, default=None,
                    help="length of the steady run (default 60, 20 with --quick)")
    ap.add_argument("--bursty-scv", default=DEFAULT_BURSTY_SCV, choices=BURSTY_SCVS,
                    help="how the db's MAP(2) is calibrated (SystemConfig.bursty_scv)")
    ap.add_argument("--fit-sensitivity", action="store_true",
                    help="only the model's capacity with the db's true MAP and fitted MAP(2)s")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.fit_sensitivity:
        fit_sensitivity([150.0, 170.0, 202.0, 220.0, 240.0, 250.0])
        return
    cap = args.capacity
    if cap is None:
        grid = [100, 130, 160, 190, 220, 250] if not args.quick else [130, 190, 250]
        cap, rows = truth_capacity(grid, 300.0 if args.quick else 1500.0, args.seed)
        print_truth(rows)
    print(f"\ntruth capacity at SLA {SLA_S} s: **{cap:.0f} users**\n")
    if args.grid_only:
        return
    if not math.isfinite(cap):
        print("the grid does not bracket the SLA crossing; widen it")
        return
    duration = 60.0 * (args.steady_minutes or (20.0 if args.quick else 60.0))
    if args.steady_seeds:
        steady_seeds(cap, seed_range(args.steady_seeds), duration, args.alert_window,
                     args.bursty_scv)
        print(f"\n(total {time.perf_counter() - t0:.0f} s)")
        return
    low = max(1, int(round(0.4 * cap)))
    preds = steady_run(low, args.seed, duration, args.alert_window, args.bursty_scv)
    last = preds[-1]
    print("## Steady run at 40% of capacity "
          f"({low} users, {duration / WINDOW_S:.0f} windows per tier)\n")
    models = sorted({p['model'] for p in preds})
    print(f"- solves: {len(preds)}; models used: {models}; last model: {last['model']}")
    print(f"- last capacity: **{last['capacity_users']}** users "
          f"(error {100 * (last['capacity_users'] / cap - 1):+.1f}% against the truth {cap:.0f})")
    caps = [p["capacity_users"] for p in preds[len(preds) // 2:] if p.get("capacity_users")]
    print(f"- capacity over the second half: median {np.median(caps):.0f}, "
          f"min {min(caps)}, max {max(caps)}")
    db = last["tiers"]["db"]
    print(f"- db index of dispersion: {db['idc']:.0f} (true 202), bursty: {db['bursty']}; "
          f"MAP(2) fit: {db['map2'] and {k: db['map2'][k] for k in ('idc', 'p95_s', 'scv')}} "
          f"({true_service()})")
    print("- db demands per class (ms; true browse 12, buy 32): " + ", ".join(
        f"{c}: Kalman {1000 * d['kalman']:.1f}, regression {1000 * (d['regression'] or 0):.1f}"
        for c, d in db["demands"].items()) + f"; estimator {db['estimator']}")
    print(f"- think time {last['think_time_s']:.3f} s (true 1.0); first solve on the MAP network "
          f"at minute {next((p['time'] - START) / 60 for p in preds if p['model'] != 'mva'):.0f}")
    print(f"- flags: {last['flags']}\n")
    breach, fired, preds = ramp_run(cap, args.seed, network,
                                    lambda recs: run(recs, args.alert_window, args.bursty_scv))
    print("## Ramp 40% -> 150% of capacity over 40 minutes, from minute 20\n")
    print(f"- measured breach (1-minute mean of the worst class > SLA): "
          f"{'none' if breach is None else f'{breach / 60:.1f} min'}")
    print(f"- predicted_breach firings (min): {[round(f / 60, 1) for f in fired]} "
          f"(alert_window_s = {args.alert_window:g})")
    if breach is not None and fired:
        lead = first_lead(breach, fired)
        print(f"- first firing leads the breach by: "
              f"{'no lead' if lead is None else f'{lead / 60:.1f} min'} (target >= 5 min); "
              f"earliest firing {(breach - fired[0]) / 60:.1f} min before it "
              "(target: none earlier than 30 min)")
    print(f"- models used on the ramp: {sorted({p['model'] for p in preds})}")
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
