"""What the open pool's passage law costs: one prediction's quantiles at the testbed's shape.

    python -m bench.speed.pool_passage
    python -m bench.speed.pool_passage --scvs 1,2.5,5 --loads 0.4,0.8,0.95 --repeat 3

The shape of :mod:`bench.accuracy.pool_open_ps` (app FCFS and a processor-sharing db of one
core each under a pool of 2, search's db SCV ``--scvs``). Per SCV and load (a fraction of the
pool model's saturation rate): the CPU seconds (``time.process_time``, the median of
``--repeat``) of the open point alone, of the point and its quantiles by the pool's passage law
(:mod:`solvers.pools_passage`), and by the law before it (the same call without the passage:
:func:`bench.accuracy.pool_open.open_quantiles`), the passage's work (the multiply-adds of its
uniformization, :data:`solvers.pools_passage.MAX_WORK`) and whether it gave a law (past its
budget of states, steps or work the caller falls back). Figures, no pass/fail.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.accuracy.pool_open import open_quantiles
from bench.accuracy.pool_open_ps import curve, pipeline_model
from streams.predict import open_model, pool_law


def cpu(fn, repeat: int) -> float:
    """The median CPU seconds of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def passage_applied(v: float, rate: float) -> tuple[bool, int]:
    """Whether the passage law gave a law at ``rate`` (not past its budget), and its work."""
    calls = []
    original = pool_law.passage_law

    def counted(*a, **k):
        law = original(*a, **k)
        calls.append(law)
        return law

    pool_law.passage_law = counted
    try:
        open_quantiles(pipeline_model(v), rate)
    finally:
        pool_law.passage_law = original
    laws = [law for law in calls if law is not None]
    return bool(calls) and len(laws) == len(calls), sum(getattr(law, "work", 0) for law in laws)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scvs", type=lambda s: [float(x) for x in s.split(",")],
                    default=[1.0, 2.5])
    ap.add_argument("--loads", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0.4, 0.8, 0.95])
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args(argv)
    print("| search's db SCV | load | open point (ms) | + passage quantiles (s) | + the law before "
          "(ms) | passage work | passage applied |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for v in a.scvs:
        sat = curve(v).saturation
        for f in a.loads:
            rate = f * sat
            m = pipeline_model(v)
            point = cpu(lambda: open_model.open_point(m, rate), a.repeat)
            after = cpu(lambda: open_quantiles(pipeline_model(v), rate), a.repeat)
            before = cpu(lambda: open_quantiles(pipeline_model(v), rate, False), a.repeat)
            applied, work = passage_applied(v, rate)
            print(f"| {v:g} | {f:.0%} | {point * 1e3:.1f} | {after:.2f} | {before * 1e3:.1f} | "
                  f"{work:.2g} | {'yes' if applied else 'no (fallback)'} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
