"""What the response-time quantiles add to a solve (numbers, no pass/fail).

Run from the repository root::

    python -m bench.speed.percentiles              # ~1-2 min
    python -m bench.speed.percentiles --quick

Two measurements, each side by side in one process (alternating runs, medians):

* **one model** (CPU time of the process: on a busy host wall time counts the preemptions) --
  a fresh :class:`streams.predict.model.SystemModel` of
  ``bench.accuracy.percentiles``' systems at 0.9 of the knee, forecast at 1.1: ``solve`` is
  ``at(now)``, ``at(forecast)`` and ``mva_capacity()`` on the mean SLA (on ``a-bursty`` the
  points come from the MAP chain and its quantiles from the chain's own law; on ``b-bursty``
  from the decomposition and one chain per bursty tier); ``+quantiles`` adds the two quantile sets of the
  prediction's fields; ``p95 SLO`` is the solve with a p95 SLO instead (its capacity search
  runs on the quantiles);
* **the pipeline** -- ``bench.speed.pipeline``'s workload (``--systems`` systems x 3 tiers x
  14 classes) through ``Pipeline.process_many``: the time in solves and in all under the
  default configuration (no quantile SLO: no quantiles computed, ``default``), with
  ``predict_quantiles = "always"`` (the quantile fields on every solve, ``always``), and with
  a p95 SLO on every class (``p95 SLO``: the fields and the capacity searches on them). The
  issue's targets: the quantiles add at most 25% to a solve, the default workload within 10%
  of its throughput without percentile SLOs.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import math
import statistics
import subprocess
import time
from dataclasses import replace

import numpy as np

from bench.accuracy.percentiles import SYSTEMS
from bench.speed.pipeline import run_pipeline, workload
from streams.core.config import Config, SystemConfig
from streams.predict.model import SystemModel


def _model_solve(base: SystemModel, n: int, n_fc: int, quantiles: bool) -> float:
    """CPU seconds of the process (a busy host's preemptions do not count) of one solve."""
    m = base.variant()
    t0 = time.process_time()
    now, fc = m.at(n), m.at(n_fc)
    m.mva_capacity()
    if quantiles:
        m.quantiles_many([now, fc])               # as the prediction's fields ask for them
    return time.process_time() - t0


def one_model(repeat: int, keys: list[str]) -> list[str]:
    rows = []
    for key in keys:
        system = SYSTEMS[key]
        slo_model = system.model()
        mean_model = slo_model.variant(slo=None, sla=np.full(len(system.classes), 0.1))
        knee = mean_model.knee()
        n, n_fc = int(0.9 * knee), int(1.1 * knee)
        t = {"solve": [], "+quantiles": [], "p95 SLO": []}
        for _ in range(repeat):
            t["solve"].append(_model_solve(mean_model, n, n_fc, False))
            t["+quantiles"].append(_model_solve(mean_model, n, n_fc, True))
            t["p95 SLO"].append(_model_solve(slo_model, n, n_fc, True))
        med = {k: statistics.median(v) for k, v in t.items()}
        rows.append(f"({key}) N={n}: solve {1000 * med['solve']:.2f} ms, +quantiles "
                    f"{1000 * med['+quantiles']:.2f} ms (x{med['+quantiles'] / med['solve']:.2f})"
                    f", p95 SLO {1000 * med['p95 SLO']:.2f} ms "
                    f"(x{med['p95 SLO'] / med['solve']:.2f})")
    return rows


def pipeline(systems: int, ends: int, repeat: int) -> list[str]:
    records = workload(systems, ends, seed=1)
    configs = {"default": Config(),
               "always": Config(defaults=replace(SystemConfig(), predict_quantiles="always")),
               "p95 SLO": Config(defaults=replace(SystemConfig(), slo={"*": {"p95": 1.0}}))}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    for _ in range(repeat):
        for name, cfg in configs.items():
            run = run_pipeline(records, cfg)
            runs[name].append((run.solve_seconds, run.seconds))
    base_solve = statistics.median(s for s, _ in runs["default"])
    base_total = statistics.median(t for _, t in runs["default"])
    rows = []
    for name, values in runs.items():
        solve = statistics.median(s for s, _ in values)
        total = statistics.median(t for _, t in values)
        rows.append(f"{name}: solves {solve:.2f} s (x{solve / base_solve:.2f}), all "
                    f"{total:.2f} s (x{total / base_total:.2f}, {len(records) / total:,.0f} "
                    f"windows/s)")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--systems", type=int, default=20)
    ap.add_argument("--ends", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=["a", "b", "a-bursty", "b-bursty"],
                    help=f"one-model systems, of {sorted(SYSTEMS)}")
    args = ap.parse_args()
    systems, repeat = (5, 1) if args.quick else (args.systems, args.repeat)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print("One model, median of", 5 * repeat)
    for row in one_model(5 * repeat, args.models):
        print("  " + row)
    print(f"Pipeline: {systems} systems x 3 tiers x 14 classes, {args.ends} ends, median of "
          f"{repeat}")
    for row in pipeline(systems, args.ends, repeat):
        print("  " + row)
    print(f"commit {commit}")


if __name__ == "__main__":
    main()
