"""Sources: where window records come from besides a JSON-lines file or the
``perfcast.windows`` topic (no command line, no Kafka: the shells drive them).

- :mod:`streams.sources.window_rules`: the pure mapping from a tier's series (busy time, cores,
  per-class completion counters, time at the tier, users) at the ends of each window to
  input-contract records -- counters, resets, gaps, stale and born series -- shared by the
  Prometheus source and the Kafka formats;
- :mod:`streams.sources.prometheus`: the Prometheus source's configuration, query results as
  series, and the windows of a system on an aligned grid of window ends;
- :mod:`streams.sources.prometheus_http`: the HTTP query API client and the backtest over a
  time range (following live: :mod:`streams.kafka.prometheus_follow`; the commands:
  :mod:`streams.cli.prometheus`);
- :mod:`streams.sources.samples`: the metric samples in the Kafka formats agents publish
  (Telegraf JSON, prometheus-kafka-adapter JSON, OTLP/JSON);
- :mod:`streams.sources.sample_windows`: samples to windows, run by the pipeline in front of
  its window validation when ``[input]`` (:mod:`streams.core.input_config`) names a metric
  format (docs/formats.md).
"""
