"""The pipeline core: plain code, no Kafka, no I/O, driven alike by the Faust worker and the
embedded runner. The model built from its estimates lives in :mod:`streams.predict`.

- :mod:`~streams.core.records`: the input window record (DESIGN.md's binding contract) and its
  validation; :mod:`~streams.core.plausibility`: a window against its system's and tier's own
  recent windows;
- :mod:`~streams.core.config`: per-system settings (TOML) and connection settings (environment);
- :mod:`~streams.core.history`, :mod:`~streams.core.tier`: a tier's windows and its estimates
  (Kalman demands, index of dispersion, service-time p95, MAP(2) fit);
- :mod:`~streams.core.system`: per-system state, the event-time solve timer, trend and alerts
  (:mod:`~streams.core.alerts`: hysteresis);
- :mod:`~streams.core.outputs`: the output records, typed (estimates, predictions, alerts,
  dead letters) and their JSON form;
- :mod:`~streams.core.pipeline`: raw records in, output records out;
  :mod:`~streams.core.table_pipeline`: the same with its state mirrored into a key-value table;
- :mod:`~streams.core.runtime`: settings of a long-running process (garbage collector, BLAS).
"""
