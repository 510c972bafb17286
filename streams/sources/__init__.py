"""Sources: where window records come from besides a JSON-lines file or the
``perfcast.windows`` topic.

- :mod:`streams.sources.prometheus`: the Prometheus source's configuration and the pure mapping
  from query results (per-tier busy time, cores, per-class completion counters, time at the
  tier, users) to input-contract records on an aligned grid of window ends;
- :mod:`streams.sources.prometheus_http`: the HTTP query API client, the backtest over a time
  range and the live follower that publishes to Kafka with a checkpoint;
- :mod:`streams.sources.prometheus_cli`: ``perfcast ingest prometheus`` and
  ``perfcast run --source prometheus``.
"""
