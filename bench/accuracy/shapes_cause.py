"""Held-out shapes: is a capacity error the estimate's or the solver's? The model solved with the
true parameters against the simulated truth of ``bench/results/shapes.json``.

    python -m bench.accuracy.shapes_cause                  # every shape of the results JSON
    python -m bench.accuracy.shapes_cause --only mmpp3-slow-A,pareto-ar-D

Per shape (:mod:`bench.accuracy.shapes`) the model is built from the *true* demands (the
physical network's per-class means times multipliers), the true class mix, the tiers' cores,
the think time and the SLA, and solved three ways:

* ``exp``: exact MVA with exponential service (the pipeline's route when no tier is bursty);
* ``gen``: MVA with the bursty tier's true marginal SCV (Reiser 1979's residual-life
  correction, :func:`solvers.mva_general.mva_curve_general`: the general-service route);
* ``map``: the MAP network (the pipeline's ``map`` / ``map-fes`` route) with the true service
  process: the MMPP itself for the MMPP shapes; for the correlated heavy-tailed shapes, which
  no MAP is, the MAP(2) fitted (:func:`estimators.mapfit.fit_map2`) to the true mean, the true
  ``I``, the true p95 and the true SCV -- the best the model's family can be given.

The true ``I`` of a Gaussian-copula sequence (Cario and Nelson 1996) ``x = g(Z)`` with AR(1)
``Z`` of lag-1 coefficient ``rho``: with the Hermite coefficients ``a_k = E[g(Z) He_k(Z)] /
sqrt(k!)`` the lag-``j`` covariance is ``sum_k a_k^2 rho^(jk)`` (Mehler 1866), so
``I = SCV + 2 / mean^2 sum_k a_k^2 rho^k / (1 - rho^k)``. A shape where only one class draws
from the bursty process (``cls``) has no single tier process: its ``map`` column is the
process applied to the whole tier (an upper bound of the burstiness), marked ``*``.

The ``map`` column's error against the truth is the solver's share of the pipeline's capacity
error; the rest (pipeline minus ``map``) is the estimate's (demands, ``I``, SCV). Of the
demand's error, the part no estimator can remove is the sample's: ``window mean`` is the bursty
tier's busy time over its completions in the very windows the pipeline saw
(:func:`window_mean`), against the pipeline's last demand (``demand``, recorded by the bench),
both relative to the true mean.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtr

from bench.accuracy.shapes import (PROCESSES, RESULTS, SHAPES, START, SYSTEMS, THINK_S,
                                   WINDOW_S, Shape, network, sla)
from estimators.mapfit import fit_map2
from solvers.processes import MAP
from solvers.simulation.physical import monitor_physical
from solvers.simulation.shapes import CorrelatedService
from streams.core.config import SystemConfig
from streams.predict.model import SystemModel, model_capacity

HERMITE_TERMS = 400
#: the routes a shape's true-parameter model is solved on (module docstring)
ROUTES = ("exp", "gen", "map")


def copula_idc(proc: CorrelatedService, terms: int = HERMITE_TERMS,
               points: int = 48_001) -> float:
    """True ``I`` of ``proc`` (module docstring): the Hermite expansion of the marginal's
    quantile function of a standard normal to ``terms`` terms, on ``points`` points of
    ``[-12, 12]`` (the tail beyond is negligible); the terms left out are bounded by the last
    one's ``rho^k / (1 - rho^k)`` times the variance they leave."""
    z = np.linspace(-12.0, 12.0, points)
    w = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) * (z[1] - z[0])
    g = proc.quantile(np.clip(ndtr(z), 1e-300, 1 - 1e-16))
    mean = float(g @ w)
    var = float(((g - mean) ** 2) @ w)
    rho = proc.rho
    if rho == 0:
        return var / mean ** 2
    gw = g * w
    h_prev, h = np.ones_like(z), z.copy()                # normalised He_0, He_1
    total, mass = 0.0, 0.0
    for k in range(1, terms + 1):
        a = float(gw @ h)
        mass += a * a
        r = rho ** k
        total += a * a * r / (1.0 - r)
        h_prev, h = h, (z * h - math.sqrt(k) * h_prev) / math.sqrt(k + 1)
    if mass < var:                                       # the rest: at most the last term's
        r = rho ** (terms + 1)
        total += (var - mass) * r / (1.0 - r)
    return (var + 2.0 * total) / mean ** 2


@functools.lru_cache(maxsize=None)
def true_process(shape: Shape) -> tuple[MAP, float, float]:
    """The tier's service process of mean 1 for the MAP network, its true ``I`` and SCV."""
    proc = PROCESSES[shape.process]
    if isinstance(proc, MAP):
        return proc, float(proc.idc), float(proc.scv)
    idc = copula_idc(proc)
    p95 = float(proc.quantile(np.array([0.95]))[0])
    fit = fit_map2(1.0, idc, p95, scv=proc.scv)
    return fit.process, idc, float(proc.scv)


def true_model(shape: Shape, route: str) -> SystemModel:
    """The model of ``shape`` with the true parameters on ``route`` (``exp``, ``gen``,
    ``map``: module docstring)."""
    if route not in ROUTES:
        raise ValueError(f"route: must be one of {', '.join(ROUTES)}, got {route!r}")
    sysm = SYSTEMS[shape.system]
    net = network(shape, 1)
    tiers = [t[0] for t in sysm.tiers]
    D = np.asarray(net.demands, float)
    mix = np.array(sysm.mix, float)
    cfg = SystemConfig(tiers=tuple(tiers))
    bursty = [m for m, t in enumerate(tiers) if t in (shape.tier, shape.second)]
    proc, _, scv = true_process(shape)
    model = SystemModel(tiers=tiers, classes=list(sysm.classes), D_mc=D, mix=mix,
                        servers=np.array([float(t[1]) for t in sysm.tiers]),
                        think_time=THINK_S, sla=np.full(len(sysm.classes), sla(shape)),
                        processes=None, map_limit=cfg.map_max_population,
                        per_job_max_cores=cfg.per_job_max_cores)
    if route == "gen":
        s = np.ones(len(tiers))
        s[bursty] = scv
        return model.variant(scv=s)
    if route == "map":
        return model.variant(processes=[proc if m in bursty else MAP.exponential(1.0)
                                        for m in range(len(tiers))])
    return model


def window_means(shape: Shape, users: int, minutes: float) -> dict[str, float]:
    """Every tier's mean service per completion over the windows the bench's pipeline saw
    (the same simulation: population, length, warm-up and seed), seconds: its busy time over
    its completions."""
    recs = monitor_physical(network(shape, users), 60.0 * minutes, WINDOW_S, warmup=60.0,
                            system="sys", start_time=START, seed=shape.seed)
    out = {}
    for tier, cores, _ in SYSTEMS[shape.system].tiers:
        mine = [r for r in recs if r["tier"] == tier]
        busy = sum(r["utilization"] * cores * r["window_s"] for r in mine)
        out[tier] = busy / sum(sum(r["completions"].values()) for r in mine)
    return out


def window_mean(shape: Shape, users: int, minutes: float) -> float:
    """The bursty tier's mean service per completion over the windows the bench's pipeline saw
    (:func:`window_means`), seconds."""
    return window_means(shape, users, minutes)[shape.tier]


def cause(result: dict[str, Any], minutes: float) -> dict[str, Any]:
    """One shape's row: truth, the pipeline's last solve, the three true-parameter solves."""
    shape = next(s for s in SHAPES if s.name == result["shape"])
    truth = float(result["capacity_truth"])
    last = (result.get("solves") or [{}])[-1]
    _, idc, scv = true_process(shape)
    row: dict[str, Any] = {"shape": shape.name, "system": shape.system,
                           "cores": dict((t[0], t[1]) for t in SYSTEMS[shape.system].tiers)[
                               shape.tier],
                           "truth": truth, "idc_true": idc, "scv_true": scv,
                           "idc_est": last.get("idc"), "route": last.get("model"),
                           "pipeline_error": last.get("capacity_error"),
                           "whole_tier": shape.cls is not None}
    true_d = result.get("demand_true")
    if true_d:
        row["window_mean_error"] = window_mean(shape, int(result["users"]), minutes) / true_d - 1
        row["demand_error"] = None if last.get("demand") is None else last["demand"] / true_d - 1
    for route in ROUTES:
        cap, _ = model_capacity(true_model(shape, route))
        row[route] = cap
        row[f"{route}_error"] = None if cap is None else cap / truth - 1.0
    return row


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=str(RESULTS), help="the shapes bench's JSON")
    ap.add_argument("--only", default=None, help="comma-separated shape names")
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args(argv)
    doc = json.loads(Path(args.results).read_text())
    only = set(args.only.split(",")) if args.only else None
    unknown = sorted((only or set()) - {r["shape"] for r in doc["shapes"]})
    if unknown:
        raise SystemExit(f"--only: not in {args.results}: {', '.join(unknown)}")
    rows = []
    print("| shape | cores | truth | I true / est. | SCV | demand / window mean | route | "
          "pipeline | exp | gen | map (true) |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for r in doc["shapes"]:
        if only and r["shape"] not in only or not math.isfinite(r["capacity_truth"]):
            continue
        row = cause(r, float(doc["minutes"]))
        rows.append(row)

        def pct(x: float | None) -> str:
            return "–" if x is None else f"{100 * x:+.0f}%"

        est = row["idc_est"]
        print(f"| {row['shape']} | {row['cores']} | {row['truth']:.0f} | "
              f"{row['idc_true']:.3g} / {'–' if est is None else f'{est:.3g}'} | "
              f"{row['scv_true']:.2g} | {pct(row.get('demand_error'))} / "
              f"{pct(row.get('window_mean_error'))} | {row['route']} | "
              f"{pct(row['pipeline_error'])} | "
              f"{pct(row['exp_error'])} | {pct(row['gen_error'])} | "
              f"{pct(row['map_error'])}{'*' if row['whole_tier'] else ''} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
