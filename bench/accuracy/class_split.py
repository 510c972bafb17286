"""Per-class demands of one tier: the Kalman filter and the sliding regression (before) against the
split by per-class response times (after, :mod:`estimators.class_split`), on simulated tiers whose
per-class demands span 2-120 ms.

Two disciplines: FCFS (the physical simulator, :mod:`solvers.simulation.physical`: one queue in
front of the cores) and processor sharing (:mod:`solvers.simulation.ps_server`, a closed PS
tier). The split was designed on two runs (``design``: a PS and a FCFS tier, 1 core, the load
stepped through 5-30 users); the held-out runs differ in class mix, seed, cores (1, 2),
utilization (10-80%, steady) and a ramp of users, fixed before measuring. The method was revised
after reading them (the load test on one-minute blocks, each discipline scored on its own busy
time, the split used only where identified), so a ``fresh`` set (mix C, seeds 500+, 1 and 3
cores, 20% and 60% and a ramp) was added and run once, after the last change. Per run: the
discipline the split decided (``?``: undecided; ``unidentified``: its two readings apart), the
mean utilization, and per estimator the median and the worst relative error of the per-class
demands against the truth (the simulator's means); ``used``: what the model takes, the split
where identified or where the windows' utilization law prefers its PS reading
(:func:`estimators.class_split.preferred_reading`, over the regression's windows), else the
Kalman filter's as before. Kalman: every window in order (Huang et
al. 2012); regression: NNLS over the last 120 windows (Rolia and Vetland 1995), what the
pipeline keeps. Seeded; prints a markdown table.

    python -m bench.accuracy.class_split [--minutes 20]
    python -m bench.accuracy.class_split --e2e     # through the pipeline, with and without

``--e2e``: a closed PS database (the four classes 120/6/3/2.5 ms, 20 users, 1-s think time, 15
minutes of 5-s windows, seed 4) through the pipeline, with the split and with it switched off
(``class_split`` returning nothing: the estimators' split and the FCFS read-back, as before):
per class the median relative error of the model's response time at the operating point over
the solves after the third, how many solves are trusted, and which class the predicted-breach
alert names (SLAs: search 240 ms, the others 30-50 ms: search breaks, buy runs at a fifth of
its SLA).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from estimators.class_split import SplitSums, class_split, preferred_reading
from estimators.demand import KalmanDemandEstimator, regression_demands
from solvers.simulation.physical import PhysicalNetwork, Tier, monitor_physical
from solvers.simulation.ps_server import monitor_ps

CLASSES = ("heavy", "mid", "light", "tiny")
#: the design mix, two held-out ones and a fresh one; demands in seconds (2-120 ms)
DEMANDS = np.array([0.12, 0.03, 0.006, 0.002])
MIXES = {"design": (0.25, 0.25, 0.3, 0.2), "A": (0.1, 0.2, 0.4, 0.3),
         "B": (0.4, 0.1, 0.1, 0.4), "C": (0.15, 0.35, 0.35, 0.15)}
WINDOW_S = 5.0
THINK_S = 1.0


def _population(u: float, cores: int, mix: tuple[float, ...]) -> int:
    """Users for a utilization near ``u`` (closed loop, think time 1 s, queueing ignored)."""
    d = float(np.dot(mix, DEMANDS))
    return max(int(round(u * cores * (THINK_S + d) / d)), 1)


def _records(kind: str, cores: int, mix: tuple[float, ...], users: int, seconds: float,
             seed: int, schedule: list[tuple[float, int]] | None) -> list[dict]:
    if kind == "ps":
        return monitor_ps(DEMANDS, mix, users, THINK_S, seconds, WINDOW_S, cores=cores,
                          classes=CLASSES, scv=1.0, schedule=schedule, warmup=60.0, seed=seed)
    base = float(DEMANDS[-1])
    net = PhysicalNetwork(tiers=(Tier("db", cores, base, tuple(DEMANDS / base)),),
                          classes=CLASSES, mix=mix, think_time=THINK_S, population=users)
    return monitor_physical(net, seconds, WINDOW_S, warmup=60.0, schedule=schedule, seed=seed)


def _errors(est: np.ndarray) -> tuple[float, float]:
    rel = np.abs(est - DEMANDS) / DEMANDS
    return float(np.median(rel)), float(rel.max())


def run(name: str, kind: str, cores: int, mix_name: str, u: float | None, seconds: float,
        seed: int, ramp: bool = False) -> dict:
    mix = MIXES[mix_name]
    schedule = None
    if ramp or u is None:
        steps = [_population(x, cores, mix) for x in (0.15, 0.35, 0.55, 0.75)]
        schedule = [(i * seconds / 4, n) for i, n in enumerate(steps)]
        users = steps[0]
    else:
        users = _population(u, cores, mix)
    recs = _records(kind, cores, mix, users, seconds, seed, schedule)
    U = np.array([r["utilization"] for r in recs])
    counts = np.array([[r["completions"].get(c, 0.0) for c in CLASSES] for r in recs])
    X = counts / WINDOW_S
    R = np.array([[r["response_time_s"].get(c, np.nan) for c in CLASSES] for r in recs])
    k = KalmanDemandEstimator(CLASSES, cores)
    for i in range(len(U)):
        k.update(float(U[i]), X[i])
    reg = regression_demands(U[-120:], X[-120:], cores=cores).demands
    sums = SplitSums()
    sums.grow(list(CLASSES))
    sums.add(U, np.full(U.size, float(cores)), X, R, counts)
    sp = class_split(sums)
    split = np.array([sp.demands[c] for c in CLASSES]) if sp else np.full(4, np.nan)
    decided = sp.discipline if sp and sp.decided else "?"
    identified = bool(sp and sp.identified)
    prefers_ps = bool(sp and not identified and preferred_reading(
        sp, U[-120:] * cores, X[-120:])[0] == "ps")
    return {"name": name, "kind": kind, "cores": cores, "mix": mix_name, "u": float(U.mean()),
            "decided": decided, "identified": identified,
            "kalman": _errors(k.x), "regression": _errors(reg), "split": _errors(split),
            "used": _errors(split if identified or prefers_ps else k.x)}


def scenarios(seconds: float) -> list[tuple]:
    out: list[tuple] = [("design", "ps", 1, "design", None, seconds, 1, True),
                        ("design", "fcfs", 1, "design", None, seconds, 2, True)]
    seed = 100
    for kind in ("fcfs", "ps"):
        for cores in (1, 2):
            for mix in ("A", "B"):
                for u in (0.1, 0.3, 0.5, 0.8):
                    out.append(("held-out", kind, cores, mix, u, seconds, seed, False))
                    seed += 1
                out.append(("held-out ramp", kind, cores, mix, None, seconds, seed, True))
                seed += 1
    seed = 500               # fresh: run once, after the method was final (module docstring)
    for kind in ("fcfs", "ps"):
        for cores in (1, 3):
            for u in (0.2, 0.6):
                out.append(("fresh", kind, cores, "C", u, seconds, seed, False))
                seed += 1
            out.append(("fresh ramp", kind, cores, "C", None, seconds, seed, True))
            seed += 1
    return out


def e2e(split: bool) -> str:
    """One row of ``--e2e`` (module docstring)."""
    from unittest import mock

    from streams.core import tier as tier_module
    from streams.core.config import Config, SystemConfig
    from streams.engine.pipeline import Pipeline
    classes = ["search", "product", "home", "buy"]
    sla = {"search": 0.24, "product": 0.05, "home": 0.05, "buy": 0.03}
    recs = monitor_ps([0.12, 0.006, 0.003, 0.0025], [0.25, 0.25, 0.3, 0.2], 20, THINK_S, 900,
                      WINDOW_S, classes=classes, scv=1.0, system="tb", start_time=1.8e9, seed=4)
    cfg = Config(defaults=SystemConfig(tiers=("db",), sla_s=sla, think_time_s=THINK_S,
                                       horizon_s=900.0))
    with mock.patch.object(tier_module, "class_split",
                           tier_module.class_split if split else (lambda sums: None)):
        pipe = Pipeline(cfg)
        outs = [pipe.process(r) for r in recs] + [pipe.finish()]
    preds = [p for o in outs for p in o.predictions if p.model is not None][3:]
    err = {c: float(np.median([abs(p.classes[c].response_time
                                   / p.classes[c].response_time_measured - 1) for p in preds]))
           for c in classes}
    named = sorted({a.class_ for o in outs for a in o.alerts
                    if a.alert == "predicted_breach" and a.state == "firing"})
    over = [p for p in preds if p.model_error is not None and p.model_error > 0.2]
    return (f"| {'with' if split else 'without'} the split | "
            + " | ".join(f"{100 * err[c]:.0f}" for c in classes)
            + f" | {sum(bool(p.model_trusted) for p in preds)}/{len(preds)} "
            f"| {sum(bool(p.model_trusted) for p in over)}/{len(over)} | {', '.join(named)} |")


def _pct(pair: tuple[float, float]) -> str:
    return f"{100 * pair[0]:.0f} / {100 * pair[1]:.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=20.0, help="simulated minutes per run")
    ap.add_argument("--e2e", action="store_true", help="through the pipeline instead")
    args = ap.parse_args(argv)
    if args.e2e:
        print("| PS database, 20 users | search % | product % | home % | buy % | trusted "
              "| trusted with error > 20% | alert names |")
        print("|---|---|---|---|---|---|---|---|")
        print(e2e(False))
        print(e2e(True))
        return 0
    rows = [run(*s) for s in scenarios(60.0 * args.minutes)]
    print("| runs | discipline | cores | mix | U | decided | Kalman med / worst % "
          "| regression med / worst % | split med / worst % | used med / worst % |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['kind']} | {r['cores']} | {r['mix']} | {r['u']:.2f} "
              f"| {r['decided']}{'' if r['identified'] else ' (unidentified)'} "
              f"| {_pct(r['kalman'])} | {_pct(r['regression'])} | {_pct(r['split'])} "
              f"| {_pct(r['used'])} |")
    for group, kind in [(g, k) for g in ("held-out", "fresh") for k in ("fcfs", "ps")]:
        sel = [r for r in rows if r["name"].startswith(group) and r["kind"] == kind]
        med = {e: float(np.median([r[e][1] for r in sel])) for e in
               ("kalman", "regression", "split", "used")}
        right = sum(r["decided"] in (kind, "?") for r in sel)
        print(f"\n{kind}, {group} ({len(sel)} runs): median worst-class error Kalman "
              f"{100 * med['kalman']:.0f}%, regression {100 * med['regression']:.0f}%, split "
              f"{100 * med['split']:.0f}%, used (split where identified or its PS reading "
              f"preferred, else Kalman) "
              f"{100 * med['used']:.0f}%; discipline right or undecided {right}/{len(sel)}, "
              f"wrong {len(sel) - right}; split identified "
              f"{sum(r['identified'] for r in sel)}/{len(sel)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
