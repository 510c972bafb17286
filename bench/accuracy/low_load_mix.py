"""The capacity from one low-load run against the simulated knee, solve by solve, where one
solve interval holds a few tens of requests and a rare heavy class decides the capacity (the
testbed's shape, docs/accuracy.md section 15): each solve's class mix is then mostly sampling
noise unless the mix pools intervals (``mix_min_completions``, streams/engine/pooled_mix.py).

The system (fixed before any run): ``app`` and ``db`` one core each, processor sharing (a
host's CPU, as the testbed's PostgreSQL backends share theirs), 4 classes ``home``,
``product``, ``buy``, ``search`` with shares 0.45/0.30/0.17/0.08, exponential service at
``app`` (2, 3, 2.5, 4 ms), at ``db`` 6, 12, 6 ms and ``search`` hyperexponential of mean 150
ms and SCV 10 (heavy-tailed, ~15x the others' mean, rare); 1-s think time. Product form
(BCMP; means insensitive to the service distribution under PS), so the model with the true
demands is the truth's mean-value model and the errors are the estimates'. SLOs: 3x each
class's mean response time simulated at the low population (the testbed campaign's rule). The
knee: the smallest population whose simulated worst class's mean R exceeds its SLO (long
runs, :func:`solvers.simulation.network.simulate_closed`). The low-load run: ``--users`` (at
most 30% of the knee) for ``--duration`` s of 5-s windows (:func:`monitor_closed`), through
the embedded pipeline at 15-s solves (the testbed's), the tiers declared PS, the
configuration's defaults otherwise; every solve after the first minute. Prints per seed the
capacities' min / median / max, the last, the count within 15% of the knee, the model's db
demand over the mix against the requests' true one, its worst class's db demand against that
class's true one (the split), and the capacity of the model with the true demands and mix.
Runs with whatever ``streams`` is on the path, so two checkouts compare on the same records
(run this file by path from the other checkout).
``--background B``: the db also does work for no request (a database's background writer,
checkpointer and vacuum) busy a share ``B`` of its core: requests are served at ``1 - B`` of
it (processor sharing with an ever-present job of that share: every db service ``/ (1 - B)``,
in the knee and the SLOs too) and its windows' utilization is the requests' CPU plus ``B``,
so the db's aggregate demand exceeds its classes' mean time there at low load (the testbed's
database at 2 users: 27% of its CPU, docs/accuracy.md section 15).
``--step``: the mix steps at half the run (search 8% -> 25%); per seed, the solves after the
step until the model's search share first reaches 90% of the step and until it stays above
half of it (the pooled mix's lag, bounded by ``trend_window_s``).

    python bench/accuracy/low_load_mix.py [--seeds 11 12 13] [--users 4] [--duration 900]
        [--scv 10] [--background 0.02] [--step]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys

import numpy as np

from solvers.processes import MAP
from solvers.simulation.monitoring import monitor_closed
from solvers.simulation.network import ClosedNetwork, Queue, simulate_closed
from streams.core.config import Config, SystemConfig
from streams.engine.pipeline import Pipeline
from streams.predict.model import SystemModel, model_capacity

CLASSES = ("home", "product", "buy", "search")
MIX = (0.45, 0.30, 0.17, 0.08)
THINK_S = 1.0
SOLVE_S, WINDOW_S, WARMUP_S = 15.0, 5.0, 60.0
KNEE_SEED, KNEE_S = 100, 4000.0
SEARCH_SCV = 10.0
#: mean service times per class, s, at app and db
APP_S, DB_S = (0.002, 0.003, 0.0025, 0.004), (0.006, 0.012, 0.006, 0.150)
#: ``--step``: the mix of the run's second half (search 8% -> 25%)
STEP_MIX = (0.35, 0.25, 0.15, 0.25)


def _hyperexponential(mean: float, scv: float) -> MAP:
    """A renewal H2 of ``mean`` and ``scv`` (balanced means): a heavy-tailed service time."""
    p = 0.5 * (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0)))
    rates = np.array([2.0 * p / mean, 2.0 * (1.0 - p) / mean])
    return MAP(np.diag(-rates), np.outer(rates, [p, 1.0 - p]))


def network(users: int, scv: float = SEARCH_SCV, mix: tuple[float, ...] = MIX,
            background: float = 0.0) -> ClosedNetwork:
    """The module's system; ``scv``: of ``search``'s service at ``db`` (1: exponential);
    ``background``: the db's share busy for no request (module docstring)."""
    db = [d / (1.0 - background) for d in DB_S]
    search = db[-1] if scv == 1.0 else _hyperexponential(db[-1], scv)
    return ClosedNetwork(queues=[Queue("app", list(APP_S)), Queue("db", [*db[:-1], search])],
                         populations=users, think_times=THINK_S, classes=list(CLASSES),
                         mix=list(mix))


def _response(users: int, scv: float, background: float = 0.0) -> np.ndarray:
    sim = simulate_closed(network(users, scv, background=background), KNEE_S, warmup=200.0,
                          replications=2, seed=KNEE_SEED)
    return np.asarray(sim.response_time, dtype=float)


def slo(users: int, scv: float, background: float = 0.0) -> dict[str, float]:
    """3x each class's simulated mean response time at ``users``."""
    return {c: 3.0 * float(r) for c, r in zip(CLASSES, _response(users, scv, background))}


def knee(sla: dict[str, float], low: int, high: int, scv: float,
         background: float = 0.0) -> int:
    """The smallest population in ``(low, high]`` whose simulated worst class's mean exceeds
    its SLO (bisection; the ratio rises with the population)."""
    bound = np.array([sla[c] for c in CLASSES])
    while high - low > 1:
        mid = (low + high) // 2
        if float(np.max(_response(mid, scv, background) / bound)) > 1.0:
            high = mid
        else:
            low = mid
    return high


def _config(sla: dict[str, float]) -> Config:
    """The pipeline's configuration: the testbed's 15-s solves, both tiers PS."""
    return Config(systems={"sim": SystemConfig(
        tiers=("app", "db"), sla_s=dict(sla), solve_interval_s=SOLVE_S, solve_offset_s=0.0,
        disciplines={"app": "ps", "db": "ps"})})


def capacities(users: int, duration: float, seed: int, sla: dict[str, float],
               scv: float, background: float = 0.0
               ) -> tuple[list[int], list[float], list[float]]:
    """Every solve's capacity after the first minute, its model's db demand over the mix
    against the requests' true one at the solve's mix (``DB_S / (1 - B)``: a request's time
    in service there, the background's share included), and its worst class's relative error
    of db demand against that class's true one."""
    records = monitor_closed(network(users, scv, background=background), duration, WINDOW_S,
                             warmup=30.0, system="sim", seed=seed)
    for r in records:           # the db's CPU: the requests' (served at 1 - B) and B's own
        if r["tier"] == "db":
            r["utilization"] = min(1.0, r["utilization"] * (1.0 - background) + background)
    pipeline = Pipeline(_config(sla))
    start = min(r["end"] for r in records)
    true_db = np.array(DB_S) / (1.0 - background)
    caps, ratios, worst = [], [], []
    for record in records:
        for p in pipeline.process(record).predictions:
            if p.time >= start + WARMUP_S and p.capacity_users is not None:
                model = pipeline.systems["sim"].last_model[1]
                caps.append(p.capacity_users)
                ratios.append(float(model.mix @ model.D_mc[1]) / float(model.mix @ true_db))
                worst.append(float(np.max(np.abs(model.D_mc[1] / true_db - 1.0))))
    return caps, ratios, worst


def step_solves(users: int, duration: float, seed: int, sla: dict[str, float],
                scv: float) -> tuple[int | None, int | None]:
    """A step of the mix (:data:`STEP_MIX` from half the run on): the solves after the step
    until the model's ``search`` share first reaches 90% of the step, and until it stays
    above half of it."""
    half = duration / 2.0
    records = monitor_closed(network(users, scv), half, WINDOW_S, warmup=30.0, system="sim",
                             seed=seed)
    end = max(r["end"] for r in records)
    records += monitor_closed(network(users, scv, STEP_MIX), half, WINDOW_S, warmup=0.0,
                              system="sim", seed=seed + 1000, start_time=end)
    pipeline, shares = Pipeline(_config(sla)), []
    for record in records:
        if pipeline.process(record).predictions and record["end"] > end + SOLVE_S:
            model = pipeline.systems["sim"].last_model[1]
            shares.append(float(model.mix[model.classes.index("search")]))
    old, new = MIX[-1], STEP_MIX[-1]
    reach = next((i + 1 for i, x in enumerate(shares) if x >= old + 0.9 * (new - old)), None)
    low = [i for i, x in enumerate(shares) if x < old + 0.5 * (new - old)]
    return reach, (low[-1] + 2 if low else 1) if shares else None


def true_model_capacity(sla: dict[str, float], background: float = 0.0) -> int | None:
    """The model's capacity with the true demands and mix (the floor of any estimate's error;
    with a ``background``, the db's services slowed by it, as the requests see them)."""
    db = [d / (1.0 - background) for d in DB_S]
    model = SystemModel(tiers=["app", "db"], classes=list(CLASSES), D_mc=np.array([APP_S, db]),
                        mix=np.array(MIX),
                        servers=np.ones(2), think_time=THINK_S,
                        sla=np.array([sla[c] for c in CLASSES]), processes=None,
                        map_limit=10_000)
    return model_capacity(model, None)[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[11, 12, 13])
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--duration", type=float, default=900.0)
    ap.add_argument("--background", type=float, default=0.0,
                    help="the db's share busy for no request (module docstring)")
    ap.add_argument("--step", action="store_true",
                    help="a step of the mix at half the run: the solves until the model uses it")
    ap.add_argument("--scv", type=float, default=SEARCH_SCV,
                    help="of search's service at db (1: exponential)")
    args = ap.parse_args(argv)
    if not 0.0 <= args.background < 1.0:
        ap.error(f"--background: must be in [0, 1), got {args.background!r}")
    sla = slo(args.users, args.scv, args.background)
    if args.step:
        print(f"search {MIX[-1]:g} -> {STEP_MIX[-1]:g} at {args.duration / 2:g} s, "
              f"{SOLVE_S:g}-s solves; solves after the step until the model's search share")
        print("| seed | reaches 90% of the step | stays above 50% of it |")
        print("|---|---|---|")
        for seed in args.seeds:
            reach, stays = step_solves(args.users, args.duration, seed, sla, args.scv)
            print(f"| {seed} | {reach} | {stays} |")
        return 0
    k = knee(sla, args.users, 20 * args.users, args.scv, args.background)
    print(f"SLOs (3x R at {args.users} users; db background {args.background:g}): "
          + ", ".join(f"{c} {s * 1e3:.1f} ms" for c, s in sla.items()))
    print(f"simulated knee {k} users; the run at {args.users} ({args.users / k:.0%} of it); "
          f"the model with the true demands and mix: {true_model_capacity(sla, args.background)}")
    print("| seed | solves | min | median | max | last | median error | within 15% "
          "| db demand / true, median (min-max) | worst class's db demand error, median (max) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        caps, ratios, worst = capacities(args.users, args.duration, seed, sla, args.scv,
                                         args.background)
        med = statistics.median(caps)
        within = sum(abs(c - k) <= 0.15 * k for c in caps)
        print(f"| {seed} | {len(caps)} | {min(caps)} | {med:g} | {max(caps)} | {caps[-1]} "
              f"| {med / k - 1:+.0%} | {within} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) | {statistics.median(worst):.0%} "
              f"({max(worst):.0%}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
