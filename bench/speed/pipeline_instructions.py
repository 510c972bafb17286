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
``bench.speed.pipeline`` builds the workload, so an older tree needs this file only (run it by
path with ``PYTHONPATH`` the tree).

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
import importlib
import itertools
import operator
import sys
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


def mark(steps: list[str]) -> None:
    """Wrap each of ``steps`` (``module:qualname``) with its marker; a module-level function
    is replaced in the modules that imported it by name too."""
    for spec, wrapper in zip(steps, MARKERS):
        module, qual = spec.split(":")
        owner: Any = importlib.import_module(module)
        *path, name = qual.split(".")
        for part in path:
            owner = getattr(owner, part)
        f = getattr(owner, name)
        raw = vars(owner).get(name)
        marked = wrapper(f)
        setattr(owner, name, staticmethod(marked) if isinstance(raw, staticmethod) else marked)
        if not path:
            for m in list(sys.modules.values()):
                if getattr(m, "__name__", "").startswith(("streams", "estimators", "solvers")) \
                        and getattr(m, name, None) is f:
                    setattr(m, name, marked)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workload", choices=("cold", "steady"))
    ap.add_argument("repetitions", type=int)
    ap.add_argument("--steps", nargs="*", default=[], metavar="MODULE:QUALNAME",
                    help="count the instructions inside these (at most five; module docstring)")
    args = ap.parse_args(argv)
    if len(args.steps) > len(MARKERS):
        ap.error(f"--steps: at most {len(MARKERS)}, got {len(args.steps)}")
    if not 0 <= args.repetitions < COPIES:
        ap.error(f"repetitions: must be 0 to {COPIES - 1}, got {args.repetitions}")
    from bench.speed.pipeline import CHUNK, TIERS, workload, workload_chunks
    from streams.core.config import Config
    from streams.engine.pipeline import Pipeline
    from streams.engine.runtime import tune_gc
    tune_gc()
    systems, config = 10, Config()

    def feed(p: Pipeline, recs: list) -> None:
        for i in range(0, len(recs), CHUNK):
            p.process_many(recs[i:i + CHUNK])

    if args.workload == "cold":
        records = workload(systems, 24, 0)
        feed(Pipeline(config), records)           # untimed: lazy imports and caches
        mark(args.steps)
        for _ in range(args.repetitions):
            gc.collect()
            feed(Pipeline(config), records)
        return
    chunk_ends = max(CHUNK // (systems * len(TIERS)), 1)
    warm_chunks, timed_chunks = -(-300 // chunk_ends), -(-24 // chunk_ends)
    chunks = workload_chunks(systems, chunk_ends * (warm_chunks + timed_chunks), 2, chunk_ends,
                             users=(50.0, 150.0))
    warm = Pipeline(config)
    for _ in range(warm_chunks):
        feed(warm, next(chunks))
    timed = [r for c in chunks for r in c]
    copies = [copy.deepcopy(warm) for _ in range(COPIES)]
    feed(copies[0], timed)                        # untimed, as the cold run's first pass
    mark(args.steps)
    for p in copies[1:1 + args.repetitions]:
        gc.collect()
        feed(p, timed)


if __name__ == "__main__":
    main()
