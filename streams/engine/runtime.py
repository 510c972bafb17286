"""Settings of a process that runs the pipeline for a long time (the CLI's commands, the
worker's core process).

CPython's cyclic garbage collector runs a young-generation pass every 700 container
allocations, and now and then a full pass over every live container. A pipeline process holds
hundreds of thousands of long-lived containers (tier histories, filters, alert books) and
allocates a few dozen short-lived dicts per window (estimate records, predictions), which
reference counting frees (the benchmark's runs left no cycles for the collector to find). At the
default thresholds the embedded core ran 1.13-1.26x slower, side by side
(``docs/benchmarks.md``); :func:`tune_gc` makes the passes rarer. Cycles, should any appear, are
still collected.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_gc"]

#: ``gc.set_threshold`` arguments: a young pass every 50,000 net container allocations
#: (default 700), the middle generation every 20 of those, the oldest every 100 of those (and
#: then only when a quarter of it is new, CPython's own rule)
GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Raise the collector's thresholds to :data:`GC_THRESHOLDS` for this process."""
    gc.set_threshold(*GC_THRESHOLDS)
