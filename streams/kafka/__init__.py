"""The Kafka shell: the Faust worker around the core, and the commands that talk to Kafka.

- :mod:`~streams.kafka.worker`: the Faust app, its agent and tables;
- :mod:`~streams.kafka.core_process`: the per-batch step, in a child process or inline;
- :mod:`~streams.kafka.batch_flow`, :mod:`~streams.kafka.batching`,
  :mod:`~streams.kafka.delivery`: the order of work per batch, batches that close once caught
  up, delivering records without a task each;
- :mod:`~streams.kafka.handover`: committing what was finished before a revocation returns;
- :mod:`~streams.kafka.faust_adapter`: every private attribute of Faust, aiokafka and mode the
  worker touches, behind a version check;
- :mod:`~streams.kafka.topics`, :mod:`~streams.kafka.produce`, :mod:`~streams.kafka.connect`:
  topic creation, publishing windows, reaching Kafka and InfluxDB at start;
- :mod:`~streams.kafka.prometheus_follow`: a Prometheus followed live, its windows published
  with a checkpoint.
"""
