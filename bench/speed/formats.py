"""Samples per second through the Kafka formats' parser and mapping (docs/formats.md), per
format, against the pipeline's own window validation in the same run.

Workload: ``--systems`` systems x ``--tiers`` tiers x ``--classes`` request classes, 5-s windows,
``--windows`` windows per tier, re-told as an agent's samples (``tests/format_samples.py``):
per tier and window end, the busy-seconds, cores and users metrics and a count and a time sum
per class (Telegraf: one batch message; prometheus-kafka-adapter: a message per sample; OTLP:
one request). Figures (best of ``--repeat``):

- ``SampleWindows.translate`` over all the messages, fresh state: samples/s (samples a
  selector wants), messages/s and windows made per second;
- the peers: :func:`streams.core.records.parse_window` over the same windows as contract records
  (JSON bytes): windows/s -- what the worker does per window before the core; and the whole
  core over them (``Pipeline.process_many``, default configuration: filters, solves every 60 s
  of event time) -- what the mapping adds to.

Rates are per CPU second of the process (``time.process_time``), one core.

    python -m bench.speed.formats [--systems 50] [--tiers 3] [--classes 10]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from tests.format_samples import MAPPING_DICT, encode

from streams.engine.pipeline import Pipeline
from streams.core.records import parse_window
from streams.core.input_config import input_from_mapping
from streams.sources.sample_windows import SampleWindows

FORMATS = ("telegraf", "prometheus-kafka-adapter", "otlp-json")
T0 = 1_764_000_000


def workload(systems: int, tiers: int, classes: int, windows: int, seed: int = 1) -> list[dict]:
    """Contract windows, in time order (every tier's window k before any window k + 1)."""
    rng = random.Random(seed)
    out = []
    for k in range(1, windows + 1):
        for s in range(systems):
            for t in range(tiers):
                counts = {f"/c{c}": rng.randint(0, 60) for c in range(classes)}
                out.append({"system": f"sys{s}", "tier": f"tier{t}", "end": T0 + 5 * k,
                            "window_s": 5.0, "utilization": rng.uniform(0.05, 0.95),
                            "cores": 2, "users": 100 + s,
                            "completions": counts,
                            "response_time_s": {c: rng.uniform(0.001, 0.2) for c in counts}})
    return out


def best(run, repeat: int) -> float:
    """The least CPU time of the process over ``repeat`` runs (the machine is shared: CPU
    time, not wall time, is what the step costs)."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        run()
        times.append(time.process_time() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", type=int, default=50)
    ap.add_argument("--tiers", type=int, default=3)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    windows = workload(args.systems, args.tiers, args.classes, args.windows)
    contract = [json.dumps(w).encode() for w in windows]
    print(f"workload: {args.systems} systems x {args.tiers} tiers x {args.classes} classes, "
          f"{args.windows} windows of 5 s per tier ({len(windows)} windows)")
    seconds = best(lambda: [parse_window(r) for r in contract], args.repeat)
    peer = len(windows) / seconds
    print(f"  contract records, parse_window: {peer:,.0f} windows/s (the peer)")
    seconds = best(lambda: Pipeline().process_many(contract), args.repeat)
    core = len(windows) / seconds
    print(f"  contract records, the whole core (Pipeline.process_many): {core:,.0f} windows/s")
    for fmt in FORMATS:
        messages = [m.encode() for m in encode(windows, fmt)]
        fmt_config = input_from_mapping({"format": fmt, **MAPPING_DICT})
        probe = SampleWindows(fmt_config)
        made = probe.translate(messages)
        assert not made.dead, made.dead[:1]
        assert len(made.windows) == len(windows), (len(made.windows), len(windows))
        samples = probe.samples
        seconds = best(lambda: SampleWindows(fmt_config).translate(messages), args.repeat)
        print(f"  {fmt:25s}: {samples / seconds:10,.0f} samples/s, "
              f"{len(messages) / seconds:9,.0f} messages/s, {len(windows) / seconds:7,.0f} "
              f"windows/s ({samples / len(windows):.0f} samples and "
              f"{len(messages) / len(windows):.1f} messages per window; "
              f"{peer * seconds / len(windows):.1f} x parse_window's time, "
              f"{core * seconds / len(windows):.2f} x the core's per window)")


if __name__ == "__main__":
    main()
