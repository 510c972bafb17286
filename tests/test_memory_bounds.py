"""Memory per tier proportional to what it holds: a tier's window history
grows with its windows instead of being preallocated for ``history`` (4096) windows -- 144 KB
per tier made 100,000 systems of one window take 14.4 GB. Measured in bytes with tracemalloc,
never in time."""

from __future__ import annotations

import gc
import random
import tracemalloc

import numpy as np
import pytest

from streams.core.history import CHUNK, WindowHistory
from streams.engine.pipeline import Pipeline

#: documented bound (docs/configuration.md, "Limits and memory"): bytes held per system of one
#: tier, one window, a few classes
BYTES_PER_SMALL_SYSTEM = 16_000


def _held(build) -> tuple[int, object]:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        obj = build()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, obj
    finally:
        tracemalloc.stop()


def _window(system: str, end: float, classes: int = 3) -> dict:
    return {"system": system, "tier": "app", "end": end, "window_s": 5.0, "utilization": 0.4,
            "completions": {f"c{k}": 10.0 + k for k in range(classes)}}


def test_a_growing_history_is_the_preallocated_ring():
    """Grown chunk by chunk, the ring holds the same rows, arrays and chunks as one
    allocated at full size, through wrap-around, new classes and a restore."""
    rnd = random.Random(7)
    for capacity in (16, 40, 100):
        grown, full = WindowHistory(capacity), WindowHistory(capacity)
        full._grow(full._full)
        width = 1
        for _ in range(60):
            count = rnd.choice([1, 1, 2, 5, 17, 40])
            width = min(width + (rnd.random() < 0.1), 6)
            u, w, c = (np.array([rnd.random() for _ in range(count)]) for _ in range(3))
            x = np.array([[rnd.random() for _ in range(width)] for _ in range(count)])
            for h in (grown, full):
                h.extend(u, w, c, x)
            a, b = grown.arrays(width), full.arrays(width)
            for name in ("utilization", "window_s", "cores", "completions"):
                assert np.array_equal(getattr(a, name), getattr(b, name)), name
            assert grown.take_changes() == full.take_changes()
            assert grown.chunks == full.chunks
            assert grown._u.shape[0] <= full._u.shape[0]
            again = WindowHistory.from_dict(grown.to_dict())
            assert np.array_equal(again.arrays(width).completions, a.completions)


def test_a_new_history_holds_no_rows_until_it_has_windows():
    h = WindowHistory(4096)
    assert h._u.shape[0] == 0 and h.arrays(3).size == 0
    h.append(0.5, 5.0, 1, [1.0, 2.0])
    assert h._u.shape[0] == CHUNK
    for _ in range(100):
        h.append(0.5, 5.0, 1, [1.0, 2.0])
    assert h._u.shape[0] <= 2 * 101 + CHUNK


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_systems_of_one_window_hold_kilobytes_not_the_whole_history():
    """2,000 systems of one tier, one window each: at most 16 KB per system (tracemalloc,
    everything the pipeline holds); 144 KB per tier before. Every window processed."""
    n = 2000
    records = [_window(f"s{i}", 1_795_168_800.0) for i in range(n)]

    def run() -> tuple[Pipeline, int]:
        p = Pipeline()
        estimates = sum(len(p.process_many(records[i:i + 500]).estimates)
                        for i in range(0, n, 500))
        return p, estimates

    held, (pipeline, estimates) = _held(run)
    assert estimates == n and len(pipeline.systems) == n
    per_system = held / n
    assert per_system < BYTES_PER_SMALL_SYSTEM, per_system
    print(f"{per_system:.0f} bytes per system of one window")


@pytest.mark.slow
def test_a_tier_grows_with_its_windows():
    """A tier's memory after 1,000 windows is far below the full 4,096-window ring, and grows
    by whole chunks."""
    records = [_window("s", 1_795_168_800.0 + 5 * k, classes=14) for k in range(1000)]
    held, p = _held(lambda: (lambda p: (p.process_many(records), p)[1])(Pipeline()))
    history = p.systems["s"].tiers["app"].history
    assert 1000 <= history._u.shape[0] <= 2048
    full_ring = (4096 + CHUNK) * (3 + 14) * 8
    assert held < full_ring, (held, full_ring)
