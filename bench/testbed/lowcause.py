"""Why the capacity from one low-load testbed run is off: every solve's model re-solved with the
run's true inputs, one at a time, then together.

The model of each solve (the pipeline's :class:`streams.predict.model.SystemModel`, rebuilt by
running the pipeline again over the windows the rejudged run read) keeps its inputs but one, set
to what the servers and the load generator measured over the run
(:func:`bench.testbed.truth.truth`, :func:`bench.testbed.pointtruth.point_truth`), and its
capacity is searched again (:func:`streams.predict.model.model_capacity`). The inputs:

* ``db CPU`` -- the db's per-class demands set to the backends' CPU per request;
* ``db split`` -- the db's aggregate demand the model used, split between the classes as their
  mean times at the db (the app's time inside its db calls);
* ``db times`` -- the db's demands the model used, scaled so that their aggregate over the mix
  is the classes' mean time at the db (the app's time inside its db calls): the db's busy CPU
  less the work no request's time holds (background writer, vacuum, the exporters' queries);
* ``app busy`` -- the app's per-class demands set to its busy CPU per request, the part outside
  the requests' timed CPU shared equally (``app_demand_req_s``);
* ``mix`` / ``think`` -- the load generator's mix and think time;
* ``no delays`` -- the pure delays the latency estimate took out set to 0;
* ``SCV`` -- the heaviest class's own SCV at the db (of its response time at the run, from the
  load log), given to the held chain's phase-type service (:mod:`solvers.pools_spread`; a
  processor-sharing tier shared by several holders takes none);
* ``app busy + db times`` and ``... + SCV`` together, and ``all true`` (db CPU plus the time
  outside it as a pure delay, app busy, mix, think; with the SCV);
* ``all true, db time as demand`` -- ``all true`` with the db's whole time (the round trips'
  latency too) as its demand, no delay: what the latency weighs as processor-sharing work;
* ``all true at the knee`` -- ``all true`` with the demands and delays measured at the knee
  campaign's run nearest the knee: whether demands grow with the load beyond what a low-load
  run sees;
* ``all true, factor route`` -- ``all true`` solved by the pool model's two-moment factor
  (:func:`solvers.pools_general.solve_pools_general`) instead of the class chain
  (:mod:`solvers.pools_spread`, each holder's class at the processor-sharing db); ``all true,
  renewal chain`` -- by the held chain of the app's spread with the db one exponential station
  (the route before the class chain): whether the pool model's route, not an input, is off.

Each row: the capacity at the run's last solve (its error against the measured knee of both
campaigns, :func:`bench.testbed.lowload.combined_knee`) and over the run's solves (after the
warm-up, before the load ended) the min / median / max and how many are within 15%.

    python -m bench.testbed.lowload /tmp/rj/camp7-pool-low /tmp/rj/camp7-pool-knee \\
        --causes /tmp/camp7-pool-low

(:mod:`bench.testbed.lowload`'s ``--causes``): ``LOW`` a rejudged campaign (``--rejudge``: its
``system.toml``, ``campaign.json`` and the windows ``perfcast-N-windows.jsonl``), ``KNEE`` the
campaign around the knee, ``SRC`` the raw campaign of ``LOW`` with the load log
``load-N-0.jsonl``.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from bench.testbed.campaign import WARMUP_S
from bench.testbed.lowload import combined_knee
from bench.testbed.pointtruth import point_truth
from solvers import pools_spread
from solvers.pools_spread import spread_processes
from streams.core.config import load_config
from streams.engine.pipeline import Pipeline
from streams.predict.model import SystemModel, model_capacity

#: a SystemModel's fields a re-solve passes on (the rest, and its memos, are computed again)
_FIELDS = {f.name for f in dataclasses.fields(SystemModel)
           if f.init and not f.name.startswith("_")}


def solve_models(low: Path, users: int, start: float, end: float
                 ) -> list[tuple[float, SystemModel, int | None]]:
    """``(time, model, capacity)`` of every solve of the run after the warm-up and before the
    load ended: the pipeline over the windows the run read, with its configuration."""
    config = load_config(low / "system.toml")
    pipeline = Pipeline(config)
    out = []
    lines = (low / f"perfcast-{users}-windows.jsonl").read_text().splitlines()
    for line in lines:
        if not line.strip():
            continue
        for p in pipeline.process(json.loads(line)).predictions:
            if p.classes and start + WARMUP_S <= p.time <= end:
                model = pipeline.systems[p.system].last_model[1]
                out.append((p.time, model, p.capacity_users))
    return out


def true_inputs(run: dict[str, Any], log: Path) -> dict[str, Any]:
    """The run's measured inputs per class (:mod:`bench.testbed.truth`'s ``classes``): the
    backends' CPU, the time inside the db calls, the app's busy CPU per request, the mix, the
    think time and each class's response-time SCV from the load log."""
    truth = run["truth"]
    classes = {c["cls"]: c for c in truth["classes"] if c.get("requests")}
    times: dict[str, list[float]] = {}
    for line in log.read_text().splitlines():
        r = json.loads(line)
        if "class" in r and r.get("status") == 200:
            times.setdefault(r["class"], []).append(r["end"] - r["start"])
    scv = {c: float(np.var(v) / np.mean(v) ** 2) for c, v in times.items() if len(v) > 1}
    return {"classes": classes, "run": truth["run"], "scv": scv,
            "point": point_truth(truth)}


def variants(model: SystemModel, true: dict[str, Any],
             knee: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per row of the table the model's inputs replaced (module docstring); ``knee``: the
    knee run's :func:`true_inputs` (``None``: no ``all true at the knee`` row)."""
    names = list(model.classes)
    cls = true["classes"]
    t = {name: i for i, name in enumerate(model.tiers)}
    db, app = t.get("db"), t.get("app")
    D = np.array(model.D_mc, dtype=float)

    def col(key: str, source: dict[str, Any] | None = None) -> np.ndarray:
        return np.array([float((source or cls)[c][key]) for c in names])

    cpu, within = col("db_backend_cpu_s"), col("app_db_wall_s")
    busy_app = col("app_demand_req_s")
    mix = np.array([float(true["run"]["mix"][c]) for c in names])
    think = float(true["run"]["think_s"])
    scv = np.full(D.shape, np.nan)
    heavy = int(np.argmax(cpu))
    scv[db, heavy] = true["scv"].get(names[heavy], np.nan)
    D_cpu = D.copy()
    D_cpu[db] = cpu
    D_split = D.copy()
    D_split[db] = within * float(model.mix @ D[db]) / float(model.mix @ within)
    D_times = D.copy()
    D_times[db] = D[db] * float(model.mix @ within) / float(model.mix @ D[db])
    D_app = D.copy()
    D_app[app] = busy_app
    D_both = D_times.copy()
    D_both[app] = busy_app
    D_true = D_cpu.copy()
    D_true[app] = busy_app
    late = np.zeros(D.shape)
    late[db] = np.maximum(within - cpu, 0.0)
    D_whole = D_true.copy()
    D_whole[db] = within
    truth = {"D_mc": D_true, "delays": late, "mix": mix, "think_time": think}
    extra: dict[str, dict[str, Any]] = {
        "all true, db time as demand": {**truth, "D_mc": D_whole, "delays": np.zeros(D.shape)},
        "all true, factor route": {**truth, "route": "factor"},
        "all true, renewal chain": {**truth, "route": "renewal"}}
    if knee is not None:
        k = knee["classes"]
        D_knee = D_true.copy()
        D_knee[db], D_knee[app] = col("db_backend_cpu_s", k), col("app_demand_req_s", k)
        late_knee = np.zeros(D.shape)
        late_knee[db] = np.maximum(col("app_db_wall_s", k) - D_knee[db], 0.0)
        extra["all true at the knee"] = {**truth, "D_mc": D_knee, "delays": late_knee}
    return {"stored": {}, "db CPU": {"D_mc": D_cpu}, "db split": {"D_mc": D_split},
            "db times": {"D_mc": D_times},
            "app busy": {"D_mc": D_app}, "mix": {"mix": mix}, "think": {"think_time": think},
            "no delays": {"delays": np.zeros(D.shape)}, "SCV": {"class_scv": scv},
            "app busy + db times": {"D_mc": D_both},
            "app busy + db times + SCV": {"D_mc": D_both, "class_scv": scv},
            "all true": {"D_mc": D_true, "delays": late, "mix": mix, "think_time": think},
            "all true + SCV": {"D_mc": D_true, "delays": late, "mix": mix, "think_time": think,
                               "class_scv": scv}, **extra}


def capacity(model: SystemModel, change: dict[str, Any]) -> int | None:
    """The capacity of ``model`` with ``change``'s inputs (``class_scv``: the held chain's per
    class SCVs, :func:`solvers.pools_spread.spread_processes`; ``route="factor"``: no held
    chain, the pool model's two-moment factor; ``route="renewal"``: no class chain, the held
    chain of the first-come-first-served tier of most spread)."""
    change = dict(change)
    class_scv = change.pop("class_scv", None)
    route = change.pop("route", None)
    factor = route == "factor"
    kw = {k: v for k, v in vars(model).items() if k in _FIELDS}
    kw.update(change)
    m = SystemModel(**kw)
    if class_scv is not None and m.pools:
        m.__dict__["_spread_processes"] = spread_processes(m.D_mc, m.mix, m.servers, m.pools,
                                                           m.scv, class_scv, m.ps)
    if factor:
        m.__dict__["_spread_processes"] = None
    if route is None:
        return model_capacity(m)[0]
    with mock.patch.object(pools_spread, "_ps_spread_pool", return_value=None):
        return model_capacity(m)[0]


def table(low: Path, knee_dir: Path, src: Path) -> dict[str, Any]:
    """Per row the capacity at the last solve, its error, and over the solves min / median /
    max and the count within 15% of the knee."""
    camp = json.loads((low / "campaign.json").read_text())
    k = combined_knee(camp, json.loads((knee_dir / "campaign.json").read_text()))
    run = min(camp["runs"], key=lambda r: r["users"])
    true = true_inputs(run, src / f"load-{run['users']}-{run.get('attempt', 0)}.jsonl")
    knee_runs = [r for r in json.loads((knee_dir / "campaign.json").read_text())["runs"]
                 if not r.get("disturbed") and r.get("truth")]
    near = min(knee_runs, key=lambda r: abs(r["users"] - k), default=None) if k else None
    knee_true = None if near is None else {
        "classes": {c["cls"]: c for c in near["truth"]["classes"] if c.get("requests")}}
    solves = solve_models(low, run["users"], run["start"], run["end"])
    caps: dict[str, list[int | None]] = {}
    for _, model, _ in solves:
        for name, change in variants(model, true, knee_true).items():
            caps.setdefault(name, []).append(capacity(model, change))
    rows = {}
    for name, v in caps.items():
        got = [c for c in v if c is not None]
        last = v[-1] if v else None
        rows[name] = {"last": last, "error": None if last is None or not k else last / k - 1,
                      "min": min(got, default=None), "median": statistics.median(got)
                      if got else None, "max": max(got, default=None),
                      "within": sum(abs(c / k - 1) <= 0.15 for c in got) if k else None,
                      "solves": len(v)}
    return {"knee_users": k, "users": run["users"], "scv": true["scv"], "rows": rows,
            "knee_run_users": None if near is None else near["users"]}


def report(res: dict[str, Any]) -> str:
    lines = [f"knee {res['knee_users']:.1f} users; the {res['users']}-user run; the load's SCV "
             "of R: " + ", ".join(f"{c} {v:.2f}" for c, v in sorted(res["scv"].items()))
             + ("" if res.get("knee_run_users") is None
                else f"; the knee's truth from its {res['knee_run_users']}-user run"), "",
             "| input set to the truth | last solve | error | solves min / median / max | "
             "within 15% |", "|---|---:|---:|---|---:|"]
    for name, r in res["rows"].items():
        err = "-" if r["error"] is None else f"{100 * r['error']:+.0f}%"
        lines.append(f"| {name} | {r['last']} | {err} | {r['min']} / {r['median']:g} / "
                     f"{r['max']} | {r['within']}/{r['solves']} |")
    return "\n".join(lines)


def route_check(src: Path, populations: tuple[int, ...] = (20, 30, 40),
                seeds: tuple[int, ...] = (21, 22), completions: int = 20_000
                ) -> list[dict[str, Any]]:
    """The pool model's two routes against simulation on the run's true demands: the app's busy
    CPU per request and the db's backend CPU per class (the lowest run of the raw campaign
    ``src``), its mix and think time, a pool of the campaign's 2 workers over an FCFS app and a
    processor-sharing db, one core each, exponential work. Per population the simulated mean
    response time per class (:func:`bench.accuracy.ps_tiers.simulate`, the mean over
    ``seeds``), the pool model's (:func:`solvers.pools_spread.solve_pools_spread`, the route the
    pipeline takes: the class chain) and the two-moment factor's
    (:func:`solvers.pools_general.solve_pools_general`), with each model's wait for a worker."""
    from bench.accuracy import ps_tiers
    from solvers.pools import PoolSpec
    from solvers.pools_general import solve_pools_general
    from solvers.pools_spread import solve_pools_spread

    camp = json.loads((src / "campaign.json").read_text())
    run = min(camp["runs"], key=lambda r: r["users"])
    cls = {c["cls"]: c for c in run["truth"]["classes"] if c.get("requests")}
    names = sorted(cls)
    mix = np.array([float(run["truth"]["run"]["mix"][c]) for c in names])
    mix = mix / mix.sum()
    D = np.array([[float(cls[c]["app_demand_req_s"]) for c in names],
                  [float(cls[c]["db_backend_cpu_s"]) for c in names]])
    z = float(run["truth"]["run"]["think_s"])
    cores, ps, pool = np.ones(2), np.array([False, True]), PoolSpec(2, 0, 2, "workers")
    out = []
    for n in populations:
        sim = np.mean([[float(r.mean()) for r in ps_tiers.simulate(
            D, mix, cores, ps, z, n, completions, seed, pool.size)] for seed in seeds], axis=0)
        chain = solve_pools_spread(D, n, z, cores, [pool], mix, ps=ps)
        factor = solve_pools_general(D, n, z, cores, [pool], mix)
        out.append({"users": n, "classes": names, "simulated": sim.tolist(),
                    "chain": list(chain.response_time), "chain_wait":
                    float(chain.pool_waiting_time[0]), "factor": list(factor.response_time),
                    "factor_wait": float(factor.pool_waiting_time[0])})
    return out


def route_report(rows: list[dict[str, Any]]) -> str:
    """:func:`route_check` as a table, ms."""
    names = rows[0]["classes"] if rows else []
    lines = [f"R {' / '.join(names)}, ms; the pool's wait in brackets", "",
             "| users | simulated | pool model (class chain) | factor |", "|---:|---|---|---|"]
    for r in rows:
        def ms(v: list[float]) -> str:
            return " / ".join(f"{1000 * x:.1f}" for x in v)
        lines.append(f"| {r['users']} | {ms(r['simulated'])} | {ms(r['chain'])} "
                     f"({1000 * r['chain_wait']:.1f}) | {ms(r['factor'])} "
                     f"({1000 * r['factor_wait']:.1f}) |")
    return "\n".join(lines)
