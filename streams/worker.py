"""The Faust shell: ``perfcast.windows`` in; estimates, predictions, alerts and dead letters out
to Kafka and InfluxDB; per-system state in changelog-backed tables.

Topology (``docs/pipeline.md``):

* source ``perfcast.windows``, keyed by system, so one system's tiers meet in one worker;
* agent ``process``: takes the windows in batches (``stream.take_events``), runs each through
  the core (:class:`streams.pipeline.Pipeline`), then writes the state the batch changed to the
  tables and the outputs to ``perfcast.estimates`` / ``.predictions`` / ``.alerts`` /
  ``.deadletter`` (keyed by system) and to the InfluxDB sink;
* table ``systems`` (system -> its state without the window history) and table ``history``
  (``system/tier/chunk`` -> 128 windows of history), both with changelog topics; a table entry
  is written to the changelog partition of the system's source partition, so recovery after a
  rebalance finds it;
* timer: flushes the InfluxDB sink every ``flush_interval_s``.

Exactly-once counting: Faust acknowledges a batch's windows only after the batch's table
writes are queued, and commits offsets only after flushing the producer, so the state in the
changelog always covers every committed window. After a crash, the windows between the last
commit and the crash are read again; the restored state already holds them, so they are
recognised as duplicates (dead-lettered with reason ``duplicate``) and counted once. Output
records produced between the two may appear twice in the output topics (at-least-once; their
``(system, tier, seq)`` / ``(system, time)`` identify them) and are idempotent in InfluxDB.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import faust

from streams.config import Config, KafkaSettings
from streams.influx import InfluxSink
from streams.pipeline import Pipeline
from streams.schema import points
from streams.system import Outputs, SystemState

__all__ = ["build_app", "TableBackedPipeline", "faust_broker_options"]

log = logging.getLogger("perfcast.worker")

OUTPUT_TOPICS = ("estimates", "predictions", "alerts", "deadletter")
_SEP = "\x1f"


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def faust_broker_options(k: KafkaSettings) -> dict[str, Any]:
    """Broker URL and credentials for ``faust.App`` from the Kafka settings."""
    opts: dict[str, Any] = {"broker": ";".join(f"kafka://{b.strip()}"
                                               for b in k.bootstrap.split(","))}
    proto = k.security_protocol.upper()
    if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
        ssl_context = None
        if proto == "SASL_SSL":
            import ssl
            ssl_context = ssl.create_default_context(cafile=k.ssl_cafile)
        opts["broker_credentials"] = faust.SASLCredentials(
            username=k.sasl_username, password=k.sasl_password,
            mechanism=k.sasl_mechanism or "PLAIN", ssl_context=ssl_context)
    elif proto == "SSL":
        import ssl
        opts["broker_credentials"] = ssl.create_default_context(cafile=k.ssl_cafile)
    return opts


class TableBackedPipeline(Pipeline):
    """The core with each system's state mirrored into two Faust tables.

    In memory the systems are the same objects as in the embedded shell; a system missing
    from memory (new worker, after a crash or a rebalance) is rebuilt from the tables."""

    def __init__(self, config: Config, systems: Any, history: Any) -> None:
        super().__init__(config)
        self.systems_table = systems
        self.history_table = history
        self.partition: dict[str, int] = {}
        self.dirty: set[str] = set()

    def system(self, name: str) -> SystemState:
        state = self.systems.get(name)
        if state is None:
            header = self.systems_table.data.get(name.encode())
            if header is None:
                state = SystemState(name, self.config.system(name))
            else:
                state = self._restore(name, json.loads(header))
            self.systems[name] = state
        return state

    def _restore(self, name: str, data: dict[str, Any]) -> SystemState:
        chunks: dict[str, dict[int, Any]] = {}
        for tier in data["tiers"]:
            rows = chunks.setdefault(tier["tier"], {})
            for number in tier["history"]["chunks"]:
                raw = self.history_table.data.get(self._chunk_key(name, tier["tier"], number))
                if raw is not None:
                    rows[number] = json.loads(raw)
        log.info("restored system %r from the changelog", name)
        return SystemState.from_dict(data, self.config.system(name), chunks)

    @staticmethod
    def _chunk_key(system: str, tier: str, number: int) -> bytes:
        return f"{system}{_SEP}{tier}{_SEP}{number}".encode()

    def process_event(self, value: bytes, partition: int) -> Outputs:
        out = self.process(value)
        if self.last_system is not None:
            self.partition[self.last_system] = partition
            self.dirty.add(self.last_system)
        return out

    def persist(self) -> int:
        """Write the state of every system the batch changed; returns table writes."""
        writes = 0
        for name in self.dirty:
            state = self.systems[name]
            part = self.partition[name]
            for tier in state.tiers.values():
                written, dropped = tier.history.take_changes()
                for number, rows in written.items():
                    self._put(self.history_table, part, self._chunk_key(name, tier.tier, number),
                              _dumps(rows))
                    writes += 1
                for number in dropped:
                    self._delete(self.history_table, part,
                                 self._chunk_key(name, tier.tier, number))
                    writes += 1
            self._put(self.systems_table, part, name.encode(),
                      _dumps(state.to_dict(with_history=False)))
            writes += 1
        self.dirty.clear()
        return writes

    @staticmethod
    def _put(table: Any, partition: int, key: bytes, value: bytes) -> None:
        table.data[key] = value
        table.send_changelog(partition, key, value)

    @staticmethod
    def _delete(table: Any, partition: int, key: bytes) -> None:
        table.data.pop(key, None)
        table.send_changelog(partition, key, None, value_serializer="raw")

    def forget(self) -> None:
        """Drop the in-memory systems (after a rebalance they are rebuilt from the tables)."""
        self.systems.clear()
        self.partition.clear()
        self.dirty.clear()


def build_app(config: Config, *, app_id: str = "perfcast", partitions: int = 4,
              batch: int = 1000, within_s: float = 0.05, influx: bool = True) -> faust.App:
    """The Faust app (topics, tables, agent, timer) for ``config``."""
    k = config.kafka
    app = faust.App(app_id, **faust_broker_options(k), store="memory://",
                    key_serializer="raw", value_serializer="raw", topic_partitions=partitions,
                    web_enabled=False, producer_linger_ms=5, stream_wait_empty=False,
                    consumer_auto_offset_reset="earliest", table_cleanup_interval=3600.0)
    source = app.topic(k.topic("windows"), key_type=bytes, value_type=bytes,
                       partitions=partitions)
    outputs = {name: app.topic(k.topic(name), key_type=bytes, value_type=bytes,
                               partitions=partitions) for name in OUTPUT_TOPICS}
    systems = app.Table("systems", key_type=bytes, value_type=bytes, partitions=partitions)
    history = app.Table("history", key_type=bytes, value_type=bytes, partitions=partitions)
    core = TableBackedPipeline(config, systems, history)
    sink = InfluxSink(config.influxdb) if influx and config.influxdb.url else None
    app.perfcast_core = core          # for tests and the CLI's status line
    app.perfcast_sink = sink

    @app.on_partitions_revoked.connect
    async def _revoked(app_: Any, revoked: Any, **kwargs: Any) -> None:
        core.forget()

    @app.agent(source)
    async def process(stream: Any) -> None:
        async for events in stream.take_events(batch, within_s):
            received = time.time()
            out = Outputs()
            for event in events:
                out.extend(core.process_event(event.value, event.message.partition))
            core.persist()
            for name in OUTPUT_TOPICS:
                topic = outputs[name]
                for record in getattr(out, name):
                    key = record.get("system")
                    topic.send_soon(key=key.encode() if isinstance(key, str) else None,
                                    value=_dumps(record))
            if sink is not None:
                await sink.add(points(out, deadletter_time=received))

    if sink is not None:
        @app.timer(interval=config.influxdb.flush_interval_s)
        async def flush_influx() -> None:
            await sink.flush()

    return app
