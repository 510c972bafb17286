"""perfcast pipeline: window records in; estimates, predictions, alerts out to Kafka, InfluxDB,
Grafana and a report.

- :mod:`streams.core`: the window record, the configuration, a tier's estimates;
- :mod:`streams.predict`: the model of a system and the questions put to it (capacity, time
  to breach, confidence, what-if);
- :mod:`streams.alerts`: when a prediction becomes an alert (hysteresis);
- :mod:`streams.sources`: windows from Prometheus and from agents' Kafka formats;
- :mod:`streams.engine`: per-window logic both shells run (the systems' state, the pipeline);
- :mod:`streams.sinks`: the output schema, InfluxDB, the SQLite store, the HTML report;
- :mod:`streams.grafana`: dashboards, alert rules, provisioning;
- :mod:`streams.kafka`: the Faust worker shell and the commands that talk to Kafka;
- :mod:`streams.cli`: the ``perfcast`` command and the embedded shell it drives.

Dependencies point down this list, and ``streams -> estimators -> solvers``
(``tests/test_layers.py`` keeps it so).

Importing the package pins the BLAS libraries to one thread unless the environment already says
otherwise (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``): the pipeline
solves many small models, where BLAS threads only contend -- on a loaded machine unpinned
OpenBLAS threads made a MAP-network solve 5x slower (6.2 s against 30.5 s). The variables are
read when numpy loads, so this runs before any of the package's modules import it.
"""

import os as _os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_name, "1")
