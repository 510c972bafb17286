"""The capacity of one campaign's low-load run against another campaign's measured knee, and
the run's every solve: the testbed's capacity acceptance (from one run at or under 30% of the
knee, within 15% of it) where the low-load run and the runs around the knee are separate
campaigns (``--slo-from``: the same SLOs), which :mod:`bench.testbed.campaign` does not
combine.

The knee is :func:`bench.testbed.campaign.knee` over the runs of both campaigns (their
``worst_over_slo`` against the same SLOs); the run's capacity is the one
:func:`bench.testbed.campaign.judge_run` takes (its last solve after the warm-up and before the
load ended); every solve of the run is listed beside it -- the class that breaches first, the
pool model, the db's utilizations and the demands the model used -- since one solve's capacity
says little when the data move the demands.

    python -m bench.testbed.lowload /tmp/camp6a /tmp/camp6-knee [--causes /tmp/camp6a-raw [--route]]

Beside them, the demands the model solved with per class
(:func:`bench.testbed.campaign.model_demands`: the estimator's, scaled as the model scaled
them) against the servers' CPU per request (:data:`TRUTH_KEYS`), at the last solve and as the
median over the solves.

``--causes SRC`` (the raw campaign with the low-load run's load log) prints instead why the
capacity is off: every solve re-solved with the run's true inputs one at a time
(:mod:`bench.testbed.lowcause`); ``--route`` adds the pool model's two routes against
simulation on the run's true demands (:func:`bench.testbed.lowcause.route_check`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.testbed.campaign import (WARMUP_S, knee, model_demands, signed_error,
                                    used_demands)
from solvers.pools_spread import SPREAD_FLAG


def combined_knee(low: dict[str, Any], around: dict[str, Any]) -> float | None:
    """The measured knee over both campaigns' steady runs; the SLOs must be the same (the
    second campaign made with ``--slo-from`` the first): a knee against other SLOs is another
    knee."""
    a, b = low["slo_s"], around["slo_s"]
    if sorted(a) != sorted(b) or any(abs(a[c] - b[c]) > 1e-9 * max(1.0, a[c]) for c in a):
        raise ValueError(f"slo_s differ between the campaigns: {a} against {b}")
    points: dict[int, float] = {}
    for r in low["runs"] + around["runs"]:
        if not r.get("disturbed"):
            points[r["users"]] = r["worst_over_slo"]
    return knee(sorted(points.items()))


#: the servers' CPU per request each tier's demands are judged against (the run's truth,
#: :mod:`bench.testbed.truth`): the db backends' own CPU clock; the app's busy CPU split in
#: proportion to the worker's timed CPU, and split as that CPU plus an equal share of the rest
TRUTH_KEYS = (("db", "db_backend_cpu_s"), ("app", "app_demand_s"), ("app", "app_demand_req_s"))


def demand_errors(rows: list[dict[str, Any]], truth: dict[str, dict[str, Any]]
                  ) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per truth key (:data:`TRUTH_KEYS`) and class: the model's demand over the server's CPU
    per request less 1 at the last solve (``last``) and its median over the solves
    (``median``)."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for tier, key in TRUTH_KEYS:
        per: dict[str, dict[str, float | None]] = {}
        for c, t in sorted(truth.items()):
            true = t.get(key)
            errs = [r["tiers"].get(tier, {}).get("model_demands", {}).get(c) for r in rows]
            errs = [v / true - 1.0 for v in errs if v is not None and true]
            per[c] = {"last": errs[-1] if errs else None,
                      "median": statistics.median(errs) if errs else None}
        out[f"{tier} vs {key}"] = per
    return out


def solve_rows(preds: list[dict[str, Any]], start: float, end: float) -> list[dict[str, Any]]:
    """Per solve of the run (after the warm-up, not after the load's end): its time since the
    start, the capacity, the class that breaches first, trust, whether the pool model was the
    held chain of the spread tier (its flag), the bottleneck the solve names, per pool and per
    tier the measured and modelled
    utilization and the per-class demands the model used
    (:func:`bench.testbed.campaign.used_demands`)."""
    rows = []
    for p in preds:
        if not p.get("classes") or not start + WARMUP_S <= p["time"] <= end:
            continue
        used, model = used_demands(p), model_demands(p)
        tiers = {name: {"u_model": t.get("utilization"),
                        "u_measured": t.get("utilization_measured"),
                        "demands": used.get(name, {}), "model_demands": model.get(name, {})}
                 for name, t in (p.get("tiers") or {}).items()}
        rows.append({"t_s": p["time"] - start, "users": p.get("users"),
                     "capacity_users": p.get("capacity_users"),
                     "breach_class": p.get("breach_class"), "trusted": p.get("model_trusted"),
                     "spread_chain": any(f.startswith(SPREAD_FLAG) for f in p.get("flags", [])),
                     "bottleneck": p.get("bottleneck_tier"),
                     "pools": {name: {"u_model": v.get("utilization"),
                                      "u_measured": v.get("utilization_measured")}
                               for name, v in (p.get("pools") or {}).items()},
                     "tiers": tiers})
    return rows


def judge(low_dir: Path, knee_dir: Path) -> dict[str, Any]:
    """The low-load run of ``low_dir`` (its lowest population) against the knee of both."""
    low = json.loads((low_dir / "campaign.json").read_text())
    around = json.loads((knee_dir / "campaign.json").read_text())
    k = combined_knee(low, around)
    run = min(low["runs"], key=lambda r: r["users"])
    preds = [json.loads(x) for x in
             (low_dir / f"perfcast-{run['users']}" / "predictions.jsonl").read_text().splitlines()
             if x.strip()]
    rows = solve_rows(preds, run["start"], run["end"])
    cap = rows[-1]["capacity_users"] if rows else None
    caps = [r["capacity_users"] for r in rows if r["capacity_users"] is not None]
    within = sum(1 for c in caps if k and abs(c / k - 1.0) <= 0.15)
    truth = {c["cls"]: c for c in (run.get("truth") or {}).get("classes", [])}
    return {"knee_users": k, "users": run["users"], "share_of_knee": run["users"] / k if k
            else None, "capacity_users": cap, "error": signed_error(cap, k),
            "capacity_median": statistics.median(caps) if caps else None,
            "within_15": within, "demand_errors": demand_errors(rows, truth), "solves": rows}


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def report(res: dict[str, Any]) -> str:
    err = None if res["error"] is None else 100 * res["error"]
    lines = [f"knee {_fmt(res['knee_users'], '.1f')} users; the {res['users']}-user run "
             f"(share of the knee {_fmt(res['share_of_knee'], '.2f')}): capacity "
             f"{res['capacity_users']} (error {_fmt(err, '+.0f')}%); over "
             f"{len(res['solves'])} solves median {_fmt(res.get('capacity_median'), '.1f')}, "
             f"{res.get('within_15', '-')} within 15%", "",
             "model demands against the servers' CPU per request, last solve / median over "
             "the solves:"]
    for key, per in res.get("demand_errors", {}).items():
        lines.append(f"  {key}: " + ", ".join(
            f"{c} {_fmt(None if v['last'] is None else 100 * v['last'], '+.0f')} / "
            f"{_fmt(None if v['median'] is None else 100 * v['median'], '+.0f')}%"
            for c, v in per.items()))
    lines += ["",
             "t_s | users | capacity | breach class | trusted | spread chain | bottleneck | "
             "pool U measured / model | db U measured / model | db demands the model used | "
             "app's"]
    for r in res["solves"]:
        db = r["tiers"].get("db", {})
        dem = " | ".join(", ".join(f"{c} {1000 * v:.1f}" for c, v in sorted(
            r["tiers"].get(t, {}).get("model_demands", {}).items()) if v is not None)
            for t in ("db", "app"))
        pools = ", ".join(f"{n} {_fmt(v['u_measured'], '.3f')} / {_fmt(v['u_model'], '.3f')}"
                          for n, v in sorted(r.get("pools", {}).items())) or "-"
        lines.append(f"{r['t_s']:.0f} | {r['users']} | {r['capacity_users']} | "
                     f"{r['breach_class']} | {r['trusted']} | {r['spread_chain']} | "
                     f"{r.get('bottleneck')} | {pools} | "
                     f"{_fmt(db.get('u_measured'), '.3f')} / "
                     f"{_fmt(db.get('u_model'), '.3f')} | {dem} ms")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("low_dir", type=Path, help="the campaign with the low-load run")
    p.add_argument("knee_dir", type=Path, help="the campaign around the knee (--slo-from)")
    p.add_argument("--causes", type=Path, metavar="SRC",
                   help="the raw campaign of low_dir (its load log): the causes' table")
    p.add_argument("--route", action="store_true",
                   help="with --causes: the pool model's routes against simulation on the "
                   "run's true demands (bench.testbed.lowcause.route_check)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.route and args.causes is None:
        p.error("--route: needs --causes SRC (the raw campaign with the run's truth)")
    if args.causes is not None:
        from bench.testbed import lowcause     # it imports this module's knee
        res = lowcause.table(args.low_dir, args.knee_dir, args.causes)
        if args.route:
            res["route"] = lowcause.route_check(args.causes)
        print(json.dumps(res, indent=1) if args.json else lowcause.report(res) + (
            "\n\n" + lowcause.route_report(res["route"]) if args.route else ""))
        return 0
    res = judge(args.low_dir, args.knee_dir)
    print(json.dumps(res, indent=1) if args.json else report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
