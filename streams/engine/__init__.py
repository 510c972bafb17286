"""The engine: windows in, output records out -- the per-system state over the core's tiers and
the predict package's model, driven alike by the Faust worker and the embedded runner (no
Kafka, no I/O).

- :mod:`~streams.engine.admission`: which windows a system takes (unknown tier, duplicate, too
  late) and whether a window passes the next solve boundary;
- :mod:`~streams.engine.system`: per-system state, the event-time solve timer, the solve and
  its alerts;
- :mod:`~streams.engine.pipeline`: raw records in, output records out;
  :mod:`~streams.engine.table_pipeline`: the same with its state mirrored into a key-value
  table;
- :mod:`~streams.engine.runtime`: settings of a long-running process (garbage collector, BLAS).
"""
