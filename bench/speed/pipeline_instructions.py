"""The workloads of :mod:`bench.speed.pipeline_against`, for an instruction counter: on a
loaded host seconds drift by +-30% from round to round, instructions do not.

Run from a tree's root under callgrind, twice, ``N`` repetitions and none:

    PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 PYTHONPATH=$PWD valgrind --tool=callgrind \\
        python -m bench.speed.pipeline_instructions cold 2
    (... cold 0)

and take the difference of the two runs' totals over ``N``: the instructions of one
repetition (imports, the workload's generation and a first untimed pass cancel). ``cold``: a
fresh pipeline over ``--quick``'s 24 window ends of 10 systems each repetition; ``steady``: a
copy of the pipeline warmed over 300 window ends (seed 2) fed 24 more each repetition (as
:func:`bench.speed.pipeline_against.measure`). ``OPENBLAS_NUM_THREADS=1``: OpenBLAS's idle
threads spin, which callgrind counts as the run's own instructions. The tree's own
``bench.speed.pipeline`` builds the workload, the feeding and warming are those of the
:mod:`bench.speed.pipeline_against` beside this file: an older tree is measured by running this
file by path with ``PYTHONPATH`` that tree.

``--steps MODULE:QUALNAME ...`` (at most five): each named function is called, after the
untimed pass, through a C function of its own that calls nothing else here
(``operator.call``, ``contextvars.Context.run``, ``functools.reduce``, ``itertools.starmap``,
``collections.defaultdict``'s ``__missing__``, in that order), so ``callgrind_annotate
--inclusive=yes`` reports the instructions inside each step as those C functions' inclusive
counts (``_operator_call``, ``context_run``, ``functools_reduce``, ``starmap_next``,
``defdict_missing``), over ``N`` repetitions of one run.
"""

from __future__ import annotations

import argparse
import collections
import contextvars
import copy
import functools
import gc
import importlib.util
import itertools
import operator
from pathlib import Path
from typing import Any, Callable

#: the steady run's copies of the warmed pipeline, made whatever ``repetitions`` is: their
#: cost cancels in the difference of two runs (the bench does not time them either)
COPIES = 5
#: per step, a wrapper that calls it through a C function of its own (module docstring)
MARKERS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    lambda f: lambda *a, **k: operator.call(f, *a, **k),
    lambda f: lambda *a, **k: contextvars.Context().run(f, *a, **k),
    lambda f: lambda *a, **k: functools.reduce(lambda _x, _y: f(*a, **k), (None,), None),
    lambda f: lambda *a, **k: next(itertools.starmap(lambda: f(*a, **k), [()])),
    lambda f: lambda *a, **k: collections.defaultdict(lambda: f(*a, **k))[0],
]


def _against() -> Any:
    """:mod:`bench.speed.pipeline_against` beside this file (its workloads and its
    wrapping), whichever tree ``PYTHONPATH`` names."""
    spec = importlib.util.spec_from_file_location(
        "_pipeline_against", Path(__file__).with_name("pipeline_against.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workload", choices=("cold", "steady"))
    ap.add_argument("repetitions", type=int)
    ap.add_argument("--steps", nargs="*", default=[], metavar="MODULE:QUALNAME",
                    help="count the instructions inside these (at most five; module docstring)")
    args = ap.parse_args(argv)
    if not 0 <= args.repetitions < COPIES:
        ap.error(f"repetitions: must be 0 to {COPIES - 1}, got {args.repetitions}")
    if len(args.steps) > len(MARKERS):
        ap.error(f"--steps: at most {len(MARKERS)}, got {len(args.steps)}")
    against = _against()
    from bench.speed.pipeline import workload
    from streams.core.config import Config
    from streams.engine.pipeline import Pipeline
    from streams.engine.runtime import tune_gc
    tune_gc()
    config = Config()

    def mark() -> None:
        for step, marker in zip(args.steps, MARKERS):
            module, qual = step.split(":")
            if not against.wrap(module, qual, lambda f, _key, _m=marker: _m(f)):
                ap.error(f"--steps: no {qual} in {module}")

    if args.workload == "cold":
        records = workload(against.SYSTEMS, 24, 0)
        against.feed(Pipeline(config), records)   # untimed: lazy imports and caches
        mark()
        for _ in range(args.repetitions):
            gc.collect()
            against.feed(Pipeline(config), records)
        return
    warm, timed = against.warmed(config)
    copies = [copy.deepcopy(warm) for _ in range(COPIES)]
    against.feed(copies[0], timed)                # untimed, as the cold run's first pass
    mark()
    for p in copies[1:1 + args.repetitions]:
        gc.collect()
        against.feed(p, timed)


if __name__ == "__main__":
    main()
