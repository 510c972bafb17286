"""The core: the window record, the configuration and a tier's estimates -- the lowest layer of
``streams``, which every other one reads (plain code, no Kafka, no I/O). The model built from
the estimates lives in :mod:`streams.predict`; the state that drives both, in
:mod:`streams.engine`.

- :mod:`~streams.core.records`: the input window record (the binding input contract, docs/pipeline.md) and its
  validation; :mod:`~streams.core.plausibility`: a window against its system's and tier's own
  recent windows;
- :mod:`~streams.core.config`: per-system settings (TOML) and connection settings (environment);
  :mod:`~streams.core.config_error`: the error naming the offending key;
- :mod:`~streams.core.input_config`: the ``[input]`` table (format, selectors), read by
  :mod:`~streams.core.config`; :mod:`~streams.core.source_settings`: the settings the sources'
  configurations share (checked numbers and strings, the window grid);
- :mod:`~streams.core.history`, :mod:`~streams.core.tier`: a tier's windows and its estimates
  (Kalman demands, index of dispersion, service-time p95, MAP(2) fit);
- :mod:`~streams.core.outputs`: the output records, typed (estimates, predictions, alerts,
  dead letters) and their JSON form.
"""
