"""The pipeline's solves on one held-out shape of bench/accuracy/shapes.py: the physical
system simulated at a population, monitored in the shapes bench's windows and fed through the
embedded runner; the trust tests read them."""

from __future__ import annotations

import tempfile

from bench.accuracy import shapes
from solvers.simulation.physical import monitor_physical
from streams.cli.embedded import run_embedded


def model_predictions(name: str, users: int, minutes: float) -> list:
    """Every prediction with a model that ``minutes`` of the shape ``name``'s windows at
    ``users`` give, in order (seeded by the shape)."""
    shape = next(s for s in shapes.SHAPES if s.name == name)
    recs = monitor_physical(shapes.network(shape, users), minutes * 60.0, shapes.WINDOW_S,
                            warmup=60.0, system="sys", start_time=shapes.START,
                            seed=shape.seed)
    preds: list = []

    def watch(outputs, _pipeline):
        preds.extend(p for p in outputs.predictions if p.get("model"))

    with tempfile.TemporaryDirectory() as d:
        run_embedded(recs, shapes.config(shape), d, on_outputs=watch)
    return preds
