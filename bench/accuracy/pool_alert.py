"""Does the ``model_error`` alert tell a user whose configured pool is wrong?

    python -m bench.accuracy.pool_alert                  # 3 systems x 3 configurations x 3 seeds
    python -m bench.accuracy.pool_alert --seeds 1 --markdown

The network of :mod:`bench.accuracy.pools` (web 4 cores 20 ms, app 4 cores 30 ms, db 8 cores
50 ms, think time 1 s, a pool of ``K`` connections on app held across app and db), simulated
(:func:`solvers.simulation.physical.monitor_physical`, 5-s windows carrying the pool's
``size``/``busy``/``waiting`` on app) and run through the embedded pipeline (1-min solves)
with the pool configured

* **right**: ``K`` connections held across ``["app", "db"]``;
* **holds app**: held across ``["app"]`` only (the model's holding time misses db);
* **size 2K**: ``2K`` connections (the windows report ``K``: the measured utilization is
  ``busy / K``, the model's ``busy / 2K``).

Per run: the first solve at which the ``model_error`` alert fires (``-``: never), the largest
error the alert watched from the response time alone (``model_error_pooled`` where significant,
``model_error_class_max``; the alert's value before pools entered it) and the last
``pool_error_pooled`` (``-``: not significant). The alert's threshold is the default
``model_error_threshold`` (0.3). Figures, no pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
from typing import Iterator

from bench.accuracy.pools import THINK, network
from solvers.simulation.physical import monitor_physical

POOL = "db_connections"
#: (pool K, users): the pool far from binding, near it, binding
SYSTEMS = ((12, 30), (12, 100), (6, 100))
CONFIGS = ("right", "holds app", "size 2K")


def run(size: int, n: int, config: str, duration: float, seed: int) -> dict:
    """One simulated system through the pipeline with the pool configured as ``config``."""
    from streams.alerts.conditions import alert_error
    from streams.core.config import Config, Pool, SystemConfig
    from streams.engine.pipeline import Pipeline
    records = monitor_physical(network(n, size), duration, 5.0, warmup=30.0, seed=seed,
                               start_time=1e9)
    pool = {"right": Pool("app", size, ("app", "db")),
            "holds app": Pool("app", size, ("app",)),
            "size 2K": Pool("app", 2 * size, ("app", "db"))}[config]
    cfg = SystemConfig(tiers=("web", "app", "db"), think_time_s=THINK, sla_s={"*": 1.0},
                       pools={POOL: pool})
    pipe = Pipeline(Config(defaults=cfg))
    outs = [pipe.process(r) for r in records] + [pipe.finish()]
    preds = [p for o in outs for p in o.predictions if p.model is not None]
    fired = [a.time for o in outs for a in o.alerts
             if a.alert == "model_error" and a.state == "firing"]
    response = [alert_error({k: v for k, v in p.to_record().items()
                             if not k.startswith("pool_error")}) for p in preds]
    return {"K": size, "N": n, "config": config, "seed": seed, "solves": len(preds),
            "fired": next((i + 1 for i, p in enumerate(preds) if fired and p.time >= fired[0]),
                          None),
            "response": max((e for e in response if e is not None), default=None),
            "pool": preds[-1].get("pool_error_pooled") if preds else None}


def rows(seeds: list[int], duration: float) -> Iterator[dict]:
    for size, n in SYSTEMS:
        for config in CONFIGS:
            for seed in seeds:
                yield run(size, n, config, duration, seed)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--markdown", action="store_true",
                        help="one line per system and configuration over the seeds")
    args = parser.parse_args(argv)
    made = []
    print(f"{'K':>3} {'N':>4} {'config':>9} {'seed':>4} {'solves':>6} {'fired at':>8} "
          f"{'RT watched':>10} {'pool pooled':>11}")
    for r in rows([int(s) for s in args.seeds.split(",")], args.duration):
        made.append(r)
        print(f"{r['K']:>3} {r['N']:>4} {r['config']:>9} {r['seed']:>4} {r['solves']:>6} "
              f"{r['fired'] or '-':>8} {_pct(r['response']):>10} {_pct(r['pool']):>11}",
              flush=True)
    if args.markdown:
        print("\n| K, users | configured | alert fired (solve) | response-time error watched, "
              "max | pool error pooled, last |")
        print("|---|---|---|---|---|")
        for (size, n) in SYSTEMS:
            for config in CONFIGS:
                sel = [r for r in made if (r["K"], r["N"], r["config"]) == (size, n, config)]
                fired = [r["fired"] for r in sel if r["fired"]]
                resp = [r["response"] for r in sel if r["response"] is not None]
                pools = [r["pool"] for r in sel if r["pool"] is not None]
                print(f"| {size}, {n} | {config} | {len(fired)}/{len(sel)}"
                      + (f" ({min(fired)}-{max(fired)})" if fired else "")
                      + f" | {_pct(max(resp) if resp else None)} | "
                      + (f"{_pct(min(pools))}-{_pct(max(pools))}" if pools else "-") + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
