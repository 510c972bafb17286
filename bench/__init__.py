"""perfcast's benches: scripts that print figures (``python -m bench.speed.NAME``,
``bench.accuracy``, ``bench.e2e``, ``bench.testbed``; bench/README.md).

Importing the package pins the BLAS libraries to one thread unless the environment already says
otherwise, as importing ``streams`` does for the pipeline: a bench times the solvers as the
pipeline runs them, and most load numpy before any ``streams`` import, which would set the
variables too late (OpenBLAS reads them when numpy loads). Unpinned on a loaded 2-core host,
OpenBLAS's threads spin on blocks of 150+ phases and count as CPU time (docs/benchmarks.md
section 10). ``python -m bench.x.y`` imports this package first.
"""

import os as _os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_name, "1")
