"""perfcast pipeline: record schemas, per-window state update, Faust app, embedded runner, sinks.

Dependencies point ``streams -> estimators -> solvers``.

Importing the package pins the BLAS libraries to one thread unless the environment already says
otherwise (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``): the pipeline
solves many small models, where BLAS threads only contend -- on a loaded machine unpinned
OpenBLAS threads made a MAP-network solve 5x slower (6.2 s against 30.5 s). The variables are
read when numpy loads, so this runs before any of the package's modules import it.
"""

import os as _os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_name, "1")
