"""The Faust shell: ``perfcast.windows`` in; estimates, predictions, alerts and dead letters out
to Kafka and InfluxDB; per-system state in changelog-backed tables.

Topology (``docs/pipeline.md``):

* source ``perfcast.windows``, keyed by system, so one system's tiers meet in one worker;
* agent ``process``: takes the windows in batches (:func:`streams.batching.adaptive_batches`:
  large under a backlog, closed after a few milliseconds when the worker keeps up), runs each through
  the core (:class:`streams.pipeline.Pipeline`), sends the outputs to ``perfcast.estimates`` /
  ``.predictions`` / ``.alerts`` / ``.deadletter`` (keyed by system; one record batch per
  partition through :class:`OutputProducer`) and to the InfluxDB sink, then writes the state
  the batch changed to the table;
* table ``state`` with its changelog topic: per system its state without the window history,
  and its tiers' history in chunks of 16 windows (:class:`TableBackedPipeline`); every entry
  is written to the changelog partition of the system's source partition, so recovery after a
  rebalance finds it;
* timer: flushes the InfluxDB sink every ``flush_interval_s``.
* consumer settings: large polls and fetches (:data:`POLL_RECORDS`, :data:`FETCH_BYTES`), and
  a broker-side fetch wait of :data:`FETCH_WAIT_MS` instead of Faust's 1,500 ms
  (:func:`shorten_fetch_wait`);
* delivery: each fetched record reaches the agent's stream without the four asyncio tasks
  Faust's consumer makes per record (:func:`streams.delivery.deliver_directly`).

Exactly-once counting: per batch the agent (1) runs the core, (2) sends the outputs and waits
until Kafka has them (and, for a batch with predictions or alerts, until InfluxDB has those
points), (3) writes the changed state to the table and its changelog topic (through the same
batching producer) and waits until Kafka has it. Faust acknowledges the windows only after the
batch, so the changelog always covers every committed window. After a crash, the windows between the last commit and the crash are
read again; those the restored state already holds are recognised as duplicates
(dead-lettered with reason ``duplicate``) and counted once, the others are processed. Outputs
are at least once: a crash between (2) and (3) produces a batch's records again (their
``(system, tier, seq)`` / ``(system, time)`` identify them; InfluxDB overwrites equal points).
Estimate points still in the InfluxDB sink's buffer when the worker dies are lost (at most
one flush interval); prediction and alert points are written before the state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import faust
import msgspec

from streams.batching import adaptive_batches, backlog
from streams.config import Config, KafkaSettings
from streams.delivery import deliver_directly
from streams.history import CHUNK
from streams.influx import InfluxSink, lines
from streams.pipeline import Pipeline
from streams.system import Outputs, SystemState

__all__ = ["build_app", "TableBackedPipeline", "faust_broker_options", "shorten_fetch_wait"]

log = logging.getLogger("perfcast.worker")

OUTPUT_TOPICS = ("estimates", "predictions", "alerts", "deadletter")
_SEP = "\x1f"
#: history chunks kept beyond what the history needs (tolerates a restored header that lags)
SLACK_CHUNKS = 64


#: output records as compact JSON (msgspec: floats as the shortest text that reads back to the
#: same float; several times faster than ``json.dumps``)
_dumps = msgspec.json.Encoder().encode
#: table values (state headers, history chunks) as MessagePack: floats as their 8 bytes, so the
#: state round-trips exactly; a system's header encodes ~6x faster than as JSON and is ~40%
#: smaller (the worker persists every changed system after each batch)
_pack = msgspec.msgpack.Encoder().encode


def _unpack(raw: bytes) -> Any:
    """A table value: MessagePack, or JSON as workers before 2026-11-23 wrote it (a JSON object
    starts with ``{``, a MessagePack map never does)."""
    return msgspec.json.decode(raw) if raw[:1] == b"{" else msgspec.msgpack.decode(raw)


def _ssl_context(k: KafkaSettings) -> Any:
    import ssl
    return ssl.create_default_context(cafile=k.ssl_cafile)


def faust_broker_options(k: KafkaSettings) -> dict[str, Any]:
    """Broker URL and credentials for ``faust.App`` from the Kafka settings."""
    opts: dict[str, Any] = {"broker": ";".join(f"kafka://{b.strip()}"
                                               for b in k.bootstrap.split(","))}
    proto = k.security_protocol.upper()
    if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
        opts["broker_credentials"] = faust.SASLCredentials(
            username=k.sasl_username, password=k.sasl_password,
            mechanism=k.sasl_mechanism or "PLAIN",
            ssl_context=_ssl_context(k) if proto == "SASL_SSL" else None)
    elif proto == "SSL":
        opts["broker_credentials"] = _ssl_context(k)
    return opts


class OutputProducer:
    """The output topics' producer: an ``aiokafka`` producer of its own that sends a batch's
    records as one record batch per partition (``create_batch`` / ``send_batch``), keyed by
    system with Kafka's default (murmur2) partitioner. Faust's producer queues and sends every
    message on its own, which cost more than the pipeline itself per window."""

    def __init__(self, k: KafkaSettings) -> None:
        from aiokafka.partitioner import DefaultPartitioner

        self.settings = k
        self.partitioner = DefaultPartitioner()
        self.producer: Any = None
        self.partitions: dict[str, list[int]] = {}
        self.partition_of: dict[str, dict[bytes | None, int]] = {}   # murmur2 once per key

    async def start(self) -> None:
        from aiokafka import AIOKafkaProducer

        from streams.produce import kafka_client_options

        opts = kafka_client_options(self.settings)       # aiokafka takes the same names,
        opts.pop("ssl_cafile", None)                      # but an SSL context, not a file
        if "SSL" in opts["security_protocol"]:
            opts["ssl_context"] = _ssl_context(self.settings)
        # record batches up to 512 KiB (the default 16 KiB holds a dozen estimates: a send per
        # dozen records); no linger: the batches are built whole before they are sent
        self.producer = AIOKafkaProducer(**opts, acks="all", linger_ms=0,
                                         max_batch_size=MAX_BATCH_BYTES)
        await self.producer.start()

    async def send(self, topic: str, records: list[tuple[bytes | None, bytes]]) -> list[Any]:
        """Queue ``(key, value)`` records; returns the batches' delivery futures."""
        if not records:
            return []
        if self.producer is None:
            await self.start()
        parts = self.partitions.get(topic)
        if parts is None:
            parts = self.partitions[topic] = sorted(await self.producer.partitions_for(topic))
        cache = self.partition_of.setdefault(topic, {})
        routed = []
        for key, value in records:
            part = cache.get(key)
            if part is None:
                part = cache[key] = self.partitioner(key, parts, parts)
            routed.append((part, key, value))
        return await self.send_to(topic, routed)

    async def send_to(self, topic: str, records: list[tuple[int, bytes, bytes]]) -> list[Any]:
        """Queue ``(partition, key, value)`` records, in order per partition; returns the
        batches' delivery futures."""
        if self.producer is None:
            await self.start()
        batches: dict[int, Any] = {}
        futures = []
        for part, key, value in records:
            batch = batches.get(part)
            if batch is None:
                batch = batches[part] = self.producer.create_batch()
            if batch.append(key=key, value=value, timestamp=None) is None:   # full
                futures.append(await self.producer.send_batch(batch, topic, partition=part))
                batch = batches[part] = self.producer.create_batch()
                batch.append(key=key, value=value, timestamp=None)
        for part, batch in batches.items():
            futures.append(await self.producer.send_batch(batch, topic, partition=part))
        return futures

    async def stop(self) -> None:
        if self.producer is not None:
            await self.producer.stop()


class TableBackedPipeline(Pipeline):
    """The core with each system's state mirrored into one Faust table.

    Keys: ``system`` -> the system's state without window history (MessagePack), and
    ``system/tier/slot`` -> one chunk of that tier's history (``{"n": chunk number, "rows":
    ...}``), chunk ``n`` in slot ``n mod slots``: slots are overwritten in turn, never deleted,
    and keep :data:`SLACK_CHUNKS` chunks more than the history needs. All of a system's
    entries go to the changelog partition of its source partition, so they are ordered: a
    restored header never refers to a chunk that was not stored before it; a chunk stored after
    the header (a crash in between) may hold rows the header does not count yet, and those are
    cut off on restore (:meth:`streams.history.WindowHistory.restore`).

    In memory the systems are the same objects as in the embedded shell; a system missing
    from memory (new worker, after a crash or a rebalance) is rebuilt from the table."""

    def __init__(self, config: Config, table: Any) -> None:
        super().__init__(config)
        self.table = table
        self.partition: dict[str, int] = {}
        self.dirty: set[str] = set()
        self.in_batch = False
        self.forget_pending = False

    def system(self, name: str) -> SystemState:
        state = self.systems.get(name)
        if state is None:
            header = self.table.data.get(name.encode())
            if header is None:
                state = SystemState(name, self.config.system(name))
            else:
                state = self._restore(name, _unpack(header))
            self.systems[name] = state
        return state

    @staticmethod
    def _slots(capacity: int) -> int:
        return -(-capacity // CHUNK) + 1 + SLACK_CHUNKS

    def _chunk_key(self, system: str, tier: str, number: int, capacity: int) -> bytes:
        return f"{system}{_SEP}{tier}{_SEP}{number % self._slots(capacity)}".encode()

    def _restore(self, name: str, data: dict[str, Any]) -> SystemState:
        chunks: dict[str, dict[int, Any]] = {}
        for tier in data["tiers"]:
            rows = chunks.setdefault(tier["tier"], {})
            header = tier["history"]
            for number in header["chunks"]:
                raw = self.table.data.get(self._chunk_key(name, tier["tier"], number,
                                                          header["capacity"]))
                stored = _unpack(raw) if raw is not None else None
                if stored is not None and stored["n"] == number:
                    rows[number] = stored["rows"]
        log.info("restored system %r from the changelog", name)
        return SystemState.from_dict(data, self.config.system(name), chunks)

    def process_batch(self, values: list[bytes], partitions: list[int]) -> Outputs:
        """One batch of source records (``partitions[i]``: the partition record ``i`` came
        from); every system a valid record names is marked for :meth:`persist`."""
        out = self.process_many(values)
        for name, partition in zip(self.batch_systems, partitions):
            if name is not None:
                self.partition[name] = partition
                self.dirty.add(name)
        return out

    def persist(self) -> list[tuple[int, bytes, bytes]]:
        """The state of every system the batch changed, into the table: its history chunks
        first, then its header. Returns the changelog records ``(partition, key, value)`` in
        that order; the caller sends them (one record batch per partition) before the batch's
        offsets can be committed."""
        writes: list[tuple[int, bytes, bytes]] = []
        for name in self.dirty:
            state = self.systems[name]
            part = self.partition[name]
            for tier in state.tiers.values():
                written, _dropped = tier.history.take_changes()
                for number, rows in written.items():
                    key = self._chunk_key(name, tier.tier, number, tier.history.capacity)
                    writes.append((part, key, _pack({"n": number, "rows": rows})))
            writes.append((part, name.encode(),
                           _pack(state.to_dict(with_history=False))))
        for _, key, value in writes:
            self.table.data[key] = value
        self.dirty.clear()
        self.in_batch = False
        if self.forget_pending:
            self.forget_pending = False
            self.forget()
        return writes

    def forget(self) -> None:
        """Drop the in-memory systems (after a rebalance they are rebuilt from the table).

        During a batch (between :meth:`begin` and :meth:`persist`) this is deferred to the
        end of :meth:`persist`: dropping a system whose windows are processed but not yet
        persisted would lose them (their offsets get committed all the same)."""
        if self.in_batch:
            self.forget_pending = True
            return
        self.systems.clear()
        self.partition.clear()
        self.dirty.clear()

    def begin(self) -> None:
        """A batch starts: from here to :meth:`persist` the in-memory state is ahead of the
        table."""
        self.in_batch = True


#: records per poll and bytes per fetch of the source consumer (Faust's defaults, 500 records
#: and 1 MiB, halve the rate a bare agent reaches on this project's machines)
POLL_RECORDS = 10_000
FETCH_BYTES = 8 << 20

#: longest time the broker may hold a fetch of the source consumer without data (Faust fixes
#: it at 1,500 ms; see :func:`shorten_fetch_wait`)
FETCH_WAIT_MS = 50


def shorten_fetch_wait(app: faust.App, wait_ms: int) -> bool:
    """Let the broker hold the worker consumer's fetch requests at most ``wait_ms``.

    aiokafka keeps one fetch in flight per broker, and it leaves out partitions whose records
    it still holds. A fetch that covers only partitions without new data (the table's
    changelog, or source partitions while the agent is busy) is held by the broker for
    ``fetch_max_wait_ms`` -- Faust hard-codes 1,500 ms -- and windows arriving meanwhile wait
    for it: at 1,000 windows/s that stalled the source every ~1.5 s and put the p99 latency
    near 3 s (``docs/benchmarks.md``). Faust offers no setting, so this sets aiokafka's fetcher
    attribute once the consumer runs; returns ``False`` (and logs) where a Faust or aiokafka
    version lacks it, which leaves the default in place."""
    try:
        fetcher = app.consumer._thread._consumer._fetcher
        fetcher._fetch_max_wait_ms = int(wait_ms)
    except AttributeError as err:
        log.warning("cannot shorten the consumer's fetch wait (%s): latency may reach 1.5 s", err)
        return False
    return True


#: largest record batch the output producer builds (well below the broker's default
#: message.max.bytes, 1 MiB)
MAX_BATCH_BYTES = 512 << 10

#: seconds between the worker's throughput log lines (log level info)
STATS_INTERVAL_S = 10.0


class BatchStats:
    """Windows per second, where the agent's time went, and how old the windows were when
    their batch began (Kafka timestamp to now: the wait before the agent), since the last
    report."""

    PHASES = ("core", "send", "influx", "deliver", "persist")

    def __init__(self) -> None:
        self.windows = 0
        self.batches = 0
        self.seconds = [0.0] * len(self.PHASES)
        self.ages: list[float] = []
        self.since = time.monotonic()

    def add(self, windows: int, *seconds: float, age: float | None = None) -> None:
        self.windows += windows
        self.batches += 1
        self.seconds = [a + b for a, b in zip(self.seconds, seconds)]
        if age is not None:
            self.ages.append(age)

    def take(self) -> str | None:
        now = time.monotonic()
        span, self.since = now - self.since, now
        if not self.batches:
            return None
        parts = ", ".join(f"{p} {1e3 * s / self.windows:.3f}"
                          for p, s in zip(self.PHASES, self.seconds))
        line = (f"{self.windows / span:.0f} windows/s in {self.batches} batches; "
                f"ms per window: {parts}")
        if self.ages:
            line += f"; oldest window at batch start: {1e3 * max(self.ages):.0f} ms"
        self.windows, self.batches, self.seconds = 0, 0, [0.0] * len(self.PHASES)
        self.ages = []
        return line


def build_app(config: Config, *, app_id: str = "perfcast", partitions: int = 4,
              batch: int = 4000, within_s: float = 0.25, influx: bool = True) -> faust.App:
    """The Faust app (topics, tables, agent, timer) for ``config``."""
    k = config.kafka
    app = faust.App(app_id, **faust_broker_options(k), store="memory://",
                    key_serializer="raw", value_serializer="raw", topic_partitions=partitions,
                    web_enabled=False, producer_linger_ms=5, stream_wait_empty=False,
                    consumer_auto_offset_reset="earliest", table_cleanup_interval=3600.0,
                    # large polls: Faust's consumer pays per fetch as well as per message
                    broker_max_poll_records=POLL_RECORDS, consumer_max_fetch_size=FETCH_BYTES)
    source = app.topic(k.topic("windows"), key_type=bytes, value_type=bytes,
                       partitions=partitions)
    producer = OutputProducer(k)
    state = app.Table("state", key_type=bytes, value_type=bytes, partitions=partitions)
    core = TableBackedPipeline(config, state)
    changelog_topic = state.changelog_topic.get_topic_name()
    sink = InfluxSink(config.influxdb) if influx and config.influxdb.url else None
    app.perfcast_core = core          # for tests and the CLI's status line
    app.perfcast_sink = sink
    stats = app.perfcast_stats = BatchStats()
    debug_batches = bool(os.environ.get("PERFCAST_DEBUG_BATCHES"))   # log every batch

    @app.timer(interval=STATS_INTERVAL_S)
    async def report() -> None:
        line = stats.take()
        if line:
            log.info("%s", line)

    @app.on_partitions_assigned.connect
    async def _assigned(app_: Any, assigned: Any, **kwargs: Any) -> None:
        shorten_fetch_wait(app, FETCH_WAIT_MS)
        deliver_directly(app.consumer)

    @app.on_partitions_revoked.connect
    async def _revoked(app_: Any, revoked: Any, **kwargs: Any) -> None:
        core.forget()

    @app.on_before_shutdown.connect
    async def _shutdown(app_: Any, **kwargs: Any) -> None:
        await producer.stop()

    @app.agent(source)
    async def process(stream: Any) -> None:
        async for events in adaptive_batches(stream, batch, within_s):
            t0 = time.perf_counter()
            received = time.time()
            stamp = events[0].message.timestamp         # s since the epoch (producer's clock)
            age = received - stamp if stamp else None
            if debug_batches:
                last = events[-1].message.timestamp
                log.info("batch of %d: oldest %.3f s, newest %.3f s old; backlog %s",
                         len(events), received - stamp, received - last, backlog(stream))
            core.begin()
            out = core.process_batch([e.value for e in events],
                                     [e.message.partition for e in events])
            t1 = time.perf_counter()
            futures = []
            for name in OUTPUT_TOPICS:
                records = [(r["system"].encode() if isinstance(r.get("system"), str) else None,
                            _dumps(r)) for r in getattr(out, name)]
                futures += await producer.send(k.topic(name), records)
            t2 = time.perf_counter()
            if sink is not None:
                # estimates and dead letters through the buffer (written in the background);
                # predictions and alerts written now (alongside the Kafka deliveries), before
                # the state that produced them
                if out.predictions or out.alerts:
                    futures.append(asyncio.ensure_future(sink.write(lines(Outputs(
                        predictions=out.predictions, alerts=out.alerts)))))
                await sink.add_lines(lines(Outputs(estimates=out.estimates,
                                                   deadletter=out.deadletter),
                                           deadletter_time=received))
            t3 = time.perf_counter()
            # outputs are delivered before the state that says they were produced: a crash
            # in between re-produces them (at least once), never loses them
            if futures:
                await asyncio.gather(*futures)
            t4 = time.perf_counter()
            # the changelog through the same batching producer (Faust's table sends every
            # entry on its own); acknowledged before the batch ends, so before its offsets
            # are committed
            changelog = core.persist()
            if changelog:
                await asyncio.gather(*await producer.send_to(changelog_topic, changelog))
            stats.add(len(events), t1 - t0, t2 - t1, t3 - t2, t4 - t3,
                      time.perf_counter() - t4, age=age)

    if sink is not None:
        @app.timer(interval=config.influxdb.flush_interval_s)
        async def flush_influx() -> None:
            await sink.flush()

    return app
