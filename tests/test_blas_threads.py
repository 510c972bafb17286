"""The pipeline's processes run BLAS on one thread (streams/__init__.py) unless told otherwise:
the variables OpenBLAS, OpenMP and MKL read when numpy loads are set by importing ``streams``,
before any of its modules imports numpy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NAMES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
CODE = ("import json, os, sys, streams.cli.commands; "
        "print(json.dumps([os.environ.get(n) for n in %r])); "
        "print('numpy loaded after streams' if 'numpy' in sys.modules else 'no numpy')" % (NAMES,))


def _run(env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env,
                         check=True, timeout=120)
    return out.stdout.splitlines()


@pytest.mark.slow
def test_blas_threads_are_pinned_to_one_by_default_and_the_environment_wins():
    env = {k: v for k, v in os.environ.items() if k not in NAMES}
    lines = _run(env)
    assert json.loads(lines[0]) == ["1", "1", "1"]
    assert lines[1] == "numpy loaded after streams"
    assert json.loads(_run({**env, "OPENBLAS_NUM_THREADS": "2"})[0]) == ["2", "1", "1"]


#: run a module's import, printing the threads variables as numpy's first import saw them
#: (OpenBLAS reads them when numpy loads; a later ``streams`` import sets them too late)
AT_NUMPY = """
import builtins, json, os, sys
seen, real = [], builtins.__import__
def spy(name, *args, **kw):
    if name.split(".")[0] == "numpy" and not seen and "numpy" not in sys.modules:
        seen.append([os.environ.get(n) for n in %r])
    return real(name, *args, **kw)
builtins.__import__ = spy
import %s
print(json.dumps(seen[0] if seen else "numpy not loaded"))
"""


#: the bench scripts that time solvers (each loads numpy at its import)
BENCH_SPEED = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "bench" /
                                      "speed").glob("*.py"))


def _at_numpy(module: str, given: dict[str, str]) -> object:
    env = {k: v for k, v in os.environ.items() if k not in NAMES}
    out = subprocess.run([sys.executable, "-c", AT_NUMPY % (NAMES, module)],
                         capture_output=True, text=True, env={**env, **given}, check=True,
                         timeout=120)
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("module", ["bench.speed." + m for m in BENCH_SPEED])
def test_benches_pin_blas_before_numpy_loads(module):
    # they time the solvers the pipeline runs pinned, and most load numpy before any
    # ``streams`` import: the ``bench`` package pins the threads first
    assert _at_numpy(module, {}) in (["1", "1", "1"], "numpy not loaded")


def test_a_bench_takes_the_environments_threads():
    assert _at_numpy("bench.speed.open_models", {"OPENBLAS_NUM_THREADS": "2"}) == \
        ["2", "1", "1"]
