"""What convolving the tiers as independent costs, which tier's law is off (numbers, no pass/fail).

Run from the repository root::

    python -m bench.accuracy.percentile_independence --systems d --fractions 0.4 1.5
    python -m bench.accuracy.percentile_independence --systems a b --duration 300

The response-time law of :mod:`solvers.response_time` is the convolution of per-tier sojourn
laws, each from the law an arriving request finds there, the tiers taken as independent. This
separates the two sources of its error on ``bench.accuracy.percentiles``' systems: one seeded
run of the simulated physical system (:mod:`solvers.simulation.physical`, its engine's
``visit_log``: every tier visit's sojourn, summed per request) gives

* ``sim`` -- the per-class end-to-end quantiles;
* ``sim indep.`` -- the same requests' tier sojourns, each tier's column shuffled on its own
  (seeded) and summed: the simulated marginals convolved as independent. Its error against
  ``sim`` is what the independence assumption alone costs, with exact per-tier laws; the
  tiers' correlations (Pearson, per request) say why;
* ``model`` -- :meth:`streams.predict.model.SystemModel.quantiles`;
* per tier, the simulated sojourn's p50/p95/p99 against the model's law of that tier alone
  (the same computation with every other tier's service and wait set to 0).

One run per population, so the quantiles carry the run's noise (bursty tiers: see
``bench.accuracy.percentiles``' intervals).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import subprocess

import numpy as np

from bench.accuracy.percentiles import SYSTEMS, System
from solvers.response_time import response_time_quantiles
from solvers.response_time.bursty import decomposed_quantiles
from solvers.simulation.physical import Engine

LEVELS = (0.5, 0.95, 0.99)


def tier_sojourns(system: System, n: int, duration: float, seed: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per request started after the warm-up and completed in the run, its sojourn at each
    tier ``(R, M)`` (summed over its visits) and its class ``(R,)``."""
    warm = min(duration / 5, 60.0)
    engine = Engine(system.network(n), np.random.default_rng(seed))
    engine.visit_log = []
    engine.run(np.array([warm, warm + duration]), [])
    V = np.array(engine.visit_log)
    M = len(system.tiers)
    starts, request = np.unique(V[:, 0], return_inverse=True)
    tier = V[:, 2].astype(int)
    per = np.zeros((starts.shape[0], M))
    np.add.at(per, (request, tier), V[:, 3])
    cls = np.zeros(starts.shape[0], dtype=int)
    cls[request] = V[:, 1].astype(int)
    last = np.zeros(starts.shape[0], dtype=bool)
    last[request[tier == M - 1]] = True
    keep = last & (starts >= warm)
    return per[keep], cls[keep]


def tier_law(system: System, n: int, m: int) -> np.ndarray:
    """``(C, len(LEVELS))``: the model's quantiles of tier ``m``'s sojourn alone."""
    model = system.model()
    point = model.at(n)
    keep = np.zeros((len(system.tiers), 1))
    keep[m] = 1.0
    if point.model.startswith("map"):
        procs, scales = model._map_law_args()
        q, _ = decomposed_quantiles(procs, [int(c) for c in model.servers], model.solver_think, n,
                                    scales * keep, model._wait_share * keep, LEVELS,
                                    residence=point.residence, arrival=model._arrival)
        return q
    return response_time_quantiles(model.D, model.servers, model.solver_think, n,
                                   model.D_mc * keep, model._wait_share * keep, LEVELS).quantiles


def report(system: System, fraction: float, duration: float, seed: int) -> list[str]:
    model = system.model()
    n = max(int(round(fraction * model.knee())), 2)
    per, cls = tier_sojourns(system, n, duration, seed)
    q = model.quantiles(model.at(n))
    lv = model.quantile_levels
    rng = np.random.default_rng(seed)
    rows = [f"({system.key}) N={n} ({fraction:g} knees), {duration:g} s, seed {seed}"]
    for c, name in enumerate(system.classes):
        X = per[cls == c]
        R = X.sum(axis=1)
        Y = np.column_stack([rng.permutation(col) for col in X.T]).sum(axis=1)
        cells = []
        for p in LEVELS:
            s, i, mq = np.quantile(R, p), np.quantile(Y, p), float(q[c, lv.index(p)])
            cells.append(f"p{round(100 * p)} sim {1000 * s:.1f} ms, indep. {i / s - 1:+.1%}, "
                         f"model {mq / s - 1:+.1%}")
        rows.append(f"  {name} ({X.shape[0]} requests): " + "; ".join(cells))
        corr = np.corrcoef(X.T)[np.triu_indices(X.shape[1], 1)]
        rows.append(f"    variance {1e6 * R.var():.0f} ms^2, independent {1e6 * Y.var():.0f}; "
                    f"tier correlations {np.round(corr, 2).tolist()}")
    X = per[cls == 0]
    for m, (tier, *_) in enumerate(system.tiers):
        law = tier_law(system, n, m)[0]
        sim = np.quantile(X[:, m], LEVELS)
        rows.append(f"    {tier} ({system.classes[0]}): sim p50/p95/p99 "
                    f"{np.round(1000 * sim, 1).tolist()} ms, model "
                    f"{np.round(1000 * law, 1).tolist()}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", nargs="*", default=["d"], help=f"of {sorted(SYSTEMS)}")
    ap.add_argument("--fractions", type=float, nargs="*", default=[0.4, 1.5])
    ap.add_argument("--duration", type=float, default=100.0, help="simulated s")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for key in args.systems:
        for f in args.fractions:
            print("\n".join(report(SYSTEMS[key], f, args.duration, args.seed)), flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"commit {commit}")


if __name__ == "__main__":
    main()
