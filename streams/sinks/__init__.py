"""Sinks: where the core's output records go.

- :mod:`~streams.sinks.schema`: the output records as measurement points, the one schema of
  InfluxDB and the embedded store;
- :mod:`~streams.sinks.influx`: the InfluxDB sink (batched, retried, bounded);
- :mod:`~streams.sinks.store`: the embedded shell's JSON-lines files and SQLite store;
- :mod:`~streams.sinks.report`: the self-contained HTML report rendered from a store.
"""
