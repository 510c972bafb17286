"""Cost of the uncertainty band (``streams.predict.confidence.band``) on the demo's shop, where it
matters most: a bursty database (the MAP network) ramping into a breach, so that most solves
are "at risk" and compute the band.

Run from the repository root:

    python -m bench.speed.confidence [--repeat 3] [--duration 2700]
    python -m bench.speed.confidence --workload default   # bench/speed/pipeline.py's workload

``--workload default``: bench/speed/pipeline.py's default workload (100 systems x 3 tiers x 14
classes, 60 ends, MVA, default configuration), where no system is at risk and the band is
computed on every 5th solve only.

The demo's records (``streams.cli.demo``, seed 1) are generated once, then run through a fresh
``Pipeline`` alternately with the band as configured and with it switched off
(``band_due`` patched to ``False``: the peer in the same run), ``--repeat`` times each. Printed:
best and median wall time of each, their ratio, the solves, how many computed the band, and
the time inside ``band`` per call and as a share of the run's wall time (the steadier figure
on a loaded machine: both are measured in the same run). The machine is shared: compare
ratios, not seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

from streams.predict import confidence
from streams.core.config import Config
from streams.cli.demo import DemoScenario, demo_config, demo_records
from streams.engine.pipeline import Pipeline


def _run(records: list, config: Config, band: bool) -> tuple[float, int, int, float]:
    calls, inside = [0], [0.0]
    real = confidence.band

    def timed(*a, **kw):
        t = time.perf_counter()
        try:
            return real(*a, **kw)
        finally:
            calls[0] += 1
            inside[0] += time.perf_counter() - t

    patches = [mock.patch.object(confidence, "band", timed)]
    if not band:
        patches.append(mock.patch.object(confidence, "band_due", lambda *a: False))
    for p in patches:
        p.start()
    try:
        pipeline = Pipeline(config)
        t = time.perf_counter()
        out = pipeline.process_many(records)
        elapsed = time.perf_counter() - t
    finally:
        for p in patches:
            p.stop()
    return elapsed, sum(1 for p in out.predictions if p.get("model")), calls[0], inside[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2700.0)
    ap.add_argument("--workload", choices=("demo", "default"), default="demo")
    args = ap.parse_args()
    if args.workload == "demo":
        sc = DemoScenario(duration_s=args.duration)
        records, config = demo_records(sc), demo_config(sc)
    else:
        from bench.speed.pipeline import workload
        records, config = workload(100, 60, 0), Config()
    times: dict[bool, list[float]] = {True: [], False: []}
    info, shares = {}, []
    for _ in range(args.repeat):
        for band in (False, True):
            elapsed, solves, calls, inside = _run(records, config, band)
            times[band].append(elapsed)
            info[band] = (solves, calls, inside)
            if band:
                shares.append(inside / elapsed)
    for band in (False, True):
        t = times[band]
        solves, calls, inside = info[band]
        print(f"band {'on ' if band else 'off'}: best {min(t):.2f} s, median "
              f"{statistics.median(t):.2f} s over {len(records)} windows; {solves} solves, "
              f"{calls} with the band" + (f", {1000 * inside / calls:.0f} ms per band"
                                          if calls else ""))
    print(f"time inside band / wall time of the run with it: median "
          f"{100 * statistics.median(shares):.1f}% (range {100 * min(shares):.1f}-"
          f"{100 * max(shares):.1f}%)")
    print(f"ratio on/off: best {min(times[True]) / min(times[False]):.3f}, median "
          f"{statistics.median(times[True]) / statistics.median(times[False]):.3f}")


if __name__ == "__main__":
    main()
