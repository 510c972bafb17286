"""The Faust shell: ``perfcast.windows`` in; estimates, predictions, alerts and dead letters out
to Kafka and InfluxDB; per-system state in changelog-backed tables.

Topology (``docs/pipeline.md``):

* source ``perfcast.windows``, keyed by system, so one system's tiers meet in one worker;
* agent ``process``: takes the windows in batches (:func:`streams.kafka.batching.adaptive_batches`:
  large under a backlog, closed after a few milliseconds when the worker keeps up) and hands
  each to the core, which runs in a child process (:mod:`streams.kafka.core_process`: the core,
  the encoding of its outputs and the snapshot of the state it changed), so that Faust's
  consumer goes on taking windows in while the core computes; then it sends the outputs to
  ``perfcast.estimates`` / ``.predictions`` / ``.alerts`` / ``.deadletter`` (keyed by system;
  one record batch per partition through :class:`OutputProducer`) and to the InfluxDB sink,
  then the state to the table's changelog. While a batch waits for Kafka's acknowledgements
  of these, the core computes the next one (:class:`streams.kafka.batch_flow.BatchFlow`);
* table ``state`` with its changelog topic: per system its state without the window history,
  and its tiers' history in chunks of 16 windows
  (:class:`streams.engine.table_pipeline.TableBackedPipeline`); every entry is written to the
  changelog partition of the system's source partition, so recovery after a rebalance finds
  it;
* timer: flushes the InfluxDB sink every ``flush_interval_s``.
* consumer settings: large polls and fetches (:data:`POLL_RECORDS`, :data:`FETCH_BYTES`), a
  broker-side fetch wait of :data:`FETCH_WAIT_MS` instead of Faust's 1,500 ms, and fetches
  answered once :data:`FETCH_MIN_BYTES` are there (:func:`tune_fetches`);
* delivery: each fetched record reaches the agent's stream without the four asyncio tasks
  Faust's consumer makes per record (:func:`streams.kafka.delivery.deliver_directly`).

Exactly-once counting: per batch (1) the core runs and snapshots the state it changed, (2) the
agent sends the outputs and waits until Kafka has them (and, for a batch with predictions or
alerts, until InfluxDB has those points), (3) it writes the snapshot to the table and its
changelog topic (through the same batching producer) and waits until Kafka has it, and only
then are the batch's windows acknowledged, so the changelog always covers every committed
window. The next batch's core runs during (2) and (3); its outputs are queued only after the
batch before it is finished, so every topic and the changelog keep the batches' order. Each
partition's windows are taken once and in offset order from its committed offset
(:class:`streams.kafka.continuity.OffsetGuard`: repeats skipped, a gap sought back). After a
crash, the windows between the last commit and the crash are read again; those the restored
state already holds are replays (same content: skipped and counted, no output), the others
are processed. Outputs are at least once: a crash
between (2) and (3) produces a batch's records again (their ``(system, tier, seq)`` /
``(system, time)`` identify them; InfluxDB overwrites equal points). Estimate points still in
the InfluxDB sink's buffer when the worker dies are lost (at most one flush interval). At
shutdown the agent takes no new batch and finishes the ones it has before the producer stops.

Rebalances: a revocation returns only once the batches in hand are finished and the revoked
partitions' offsets committed, windows taken in before it are left to the partition's next
owner (``hand_over``, ``current``), and no batch is taken until the new assignment's tables
are recovered (``ready``), so partitions move with exactly the state of their committed
windows (``docs/pipeline.md``, "Delivery guarantees"). ``PERFCAST_DEBUG_OFFSETS=1`` logs
every 2 s, per source partition, Faust's committed, read and high-water offsets and the
worker's finished offset (:func:`streams.kafka.handover.offsets_report`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import faust

from streams.kafka.batch_flow import BatchFlow, Steps
from streams.kafka.batching import acknowledge, adaptive_batches, backlog
from streams.core.config import Config, KafkaSettings
from streams.kafka.core_process import (OUTPUT_TOPICS, BatchResult, CoreProcess, CoreRunner,
                                  InlineCore)
from streams.kafka.delivery import deliver_directly
from streams.kafka.continuity import STALL_S, OffsetGuard
from streams.kafka.faust_adapter import (check_versions, committed_offsets, disable_spinner,
                                         set_fetch_limits)
from streams.kafka.handover import (COMMIT_INTERVAL_S, FinishedOffsets, commit_finished,
                                    offsets_report)
from streams.sinks.influx import InfluxSink

__all__ = ["build_app", "faust_broker_options", "faust_worker", "tune_fetches"]

log = logging.getLogger("perfcast.worker")

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

        from streams.kafka.produce import kafka_client_options

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


#: records per poll and bytes per fetch of the source consumer (Faust's defaults, 500 records
#: and 1 MiB, halve the rate a bare agent reaches on this project's machines)
POLL_RECORDS = 10_000
FETCH_BYTES = 8 << 20

#: longest time the broker may hold a fetch of the source consumer (Faust fixes it at 1,500 ms;
#: see :func:`tune_fetches`)
FETCH_WAIT_MS = 50

#: least data the broker gathers before it answers a fetch of the source consumer (within
#: :data:`FETCH_WAIT_MS`; aiokafka's default is 1 byte)
FETCH_MIN_BYTES = 16 << 10


def tune_fetches(app: faust.App, wait_ms: int, min_bytes: int) -> bool:
    """Let the broker hold the worker consumer's fetch requests until it has ``min_bytes``
    for them, but at most ``wait_ms``.

    ``wait_ms``: aiokafka keeps one fetch in flight per broker, and it leaves out partitions
    whose records it still holds. A fetch that covers only partitions without new data (the
    table's changelog, or source partitions while the agent is busy) is held by the broker for
    ``fetch_max_wait_ms`` -- Faust hard-codes 1,500 ms -- and windows arriving meanwhile wait
    for it: at 1,000 windows/s that stalled the source every ~1.5 s and put the p99 latency
    near 3 s (``docs/benchmarks.md``).

    ``min_bytes``: with aiokafka's default of 1 byte the broker answers a fetch as soon as any
    record arrives, so a steady stream costs a fetch round trip per few records. At 1,000
    windows/s, 16 KiB (about 20 windows) halved the CPU the worker's process used (0.34 to
    0.18 cores), lowered the broker's, and did not raise the latency (``docs/benchmarks.md``);
    a window arriving at a quiet moment waits at most ``wait_ms`` more.

    Faust offers no setting for either, so this sets aiokafka's fetcher attributes once the
    consumer runs (:func:`streams.kafka.faust_adapter.set_fetch_limits`); returns ``False`` (and
    logs) where they are missing, which leaves the defaults in place."""
    try:
        set_fetch_limits(app, wait_ms, min_bytes)
    except AttributeError as err:
        log.warning("cannot tune the consumer's fetches (%s): latency may reach 1.5 s", err)
        return False
    return True


#: largest record batch the output producer builds (well below the broker's default
#: message.max.bytes, 1 MiB)
MAX_BATCH_BYTES = 512 << 10

#: seconds between the worker's throughput log lines (log level info)
STATS_INTERVAL_S = 10.0

#: seconds between checks for source partitions whose windows never reach the agent
#: (:meth:`streams.kafka.continuity.OffsetGuard.stalled`)
STALL_CHECK_S = 2.0

#: longest wait at shutdown for the batch in the agent's hands to be finished
SHUTDOWN_WAIT_S = 20.0


class BatchStats:
    """Windows per second, where the time went, and how old the windows were when their batch
    began (Kafka timestamp to now: the wait before the agent), since the last report. Phases:
    ``core`` the batch step (in the core process); ``wait`` the agent waiting for it beyond
    the step itself (moving the batch and its result between the processes); ``previous``
    waiting for the batch before to finish; ``queue`` queueing the outputs (Kafka, InfluxDB);
    ``deliver`` waiting for their acknowledgements; ``persist`` the changelog; ``ack`` the
    windows' acknowledgement. ``deliver``, ``persist`` and ``ack`` overlap the next batch's
    ``core`` (:mod:`streams.kafka.batch_flow`)."""

    PHASES = ("core", "wait", "previous", "queue", "deliver", "persist", "ack")

    def __init__(self) -> None:
        self.windows = 0
        self.replays = 0
        self.batches = 0
        self.seconds = dict.fromkeys(self.PHASES, 0.0)
        self.ages: list[float] = []
        self.since = time.monotonic()

    def add(self, result: BatchResult, seconds: dict[str, float]) -> None:
        """A finished batch: its phases' seconds as :class:`streams.kafka.batch_flow.BatchFlow`
        measured them (``run`` split into ``core`` and ``wait``)."""
        self.windows += result.windows
        self.replays += result.replays
        self.batches += 1
        split = {**seconds, "core": result.seconds, "wait": seconds["run"] - result.seconds}
        for phase in self.PHASES:
            self.seconds[phase] += split[phase]

    def age(self, seconds: float) -> None:
        """How long the oldest window of a batch waited before the agent took it."""
        self.ages.append(seconds)

    def take(self) -> str | None:
        now = time.monotonic()
        span, self.since = now - self.since, now
        if not self.batches:
            return None
        parts = ", ".join(f"{p} {1e3 * s / self.windows:.3f}" for p, s in self.seconds.items())
        line = (f"{self.windows / span:.0f} windows/s in {self.batches} batches; "
                f"ms per window: {parts}")
        if self.ages:
            line += f"; oldest window at batch start: {1e3 * max(self.ages):.0f} ms"
        if self.replays:
            line += f"; {self.replays} replays skipped (windows seen before unchanged)"
        self.windows, self.batches, self.replays = 0, 0, 0
        self.seconds = dict.fromkeys(self.PHASES, 0.0)
        self.ages = []
        return line


def faust_worker(app: faust.App, loglevel: str = "warning") -> faust.Worker:
    """Faust's worker for ``app``, without its terminal spinner.

    At a log level of WARN or above, Faust's worker turns the spinner on by setting the root
    logger to DEBUG and adding a handler that advances the spinner on every record, and it
    leaves them so after startup. Every ``log.debug`` in aiokafka, Faust and mode then builds
    a record that only that handler reads: 11% of the worker's interpreter time at 1,000
    windows/s (py-spy, ``docs/benchmarks.md``). Without the spinner the root logger keeps the
    requested level."""
    worker = faust.Worker(app, loglevel=loglevel)
    disable_spinner(worker)
    return worker


def build_app(config: Config, *, app_id: str = "perfcast", partitions: int = 4,
              batch: int = 4000, within_s: float = 0.25, influx: bool = True,
              core_process: bool = True) -> faust.App:
    """The Faust app (topics, tables, agent, timer) for ``config``; ``core_process``: run the
    core in a child process (:class:`streams.kafka.core_process.CoreProcess`), else in the agent.
    Raises :class:`streams.kafka.faust_adapter.UnsupportedFramework` when the installed Faust,
    aiokafka or mode is outside the versions :mod:`streams.kafka.faust_adapter` supports."""
    check_versions()
    k = config.kafka
    app = faust.App(app_id, **faust_broker_options(k), store="memory://",
                    key_serializer="raw", value_serializer="raw", topic_partitions=partitions,
                    web_enabled=False, producer_linger_ms=5, stream_wait_empty=False,
                    consumer_auto_offset_reset="earliest", table_cleanup_interval=3600.0,
                    # large polls: Faust's consumer pays per fetch as well as per message
                    broker_max_poll_records=POLL_RECORDS, consumer_max_fetch_size=FETCH_BYTES)
    # acks=False: Faust never commits the source; the worker commits what it finished
    # (streams.kafka.handover)
    source = app.topic(k.topic("windows"), key_type=bytes, value_type=bytes,
                       partitions=partitions, acks=False)
    producer = OutputProducer(k)
    state = app.Table("state", key_type=bytes, value_type=bytes, partitions=partitions)
    runner: CoreRunner = (CoreProcess if core_process else InlineCore)(config, state)
    changelog_topic = state.changelog_topic.get_topic_name()
    sink = InfluxSink(config.influxdb) if influx and config.influxdb.url else None
    app.perfcast_runner = runner      # for tests
    app.perfcast_sink = sink
    stats = app.perfcast_stats = BatchStats()
    debug_batches = bool(os.environ.get("PERFCAST_DEBUG_BATCHES"))   # log every batch
    debug_offsets = bool(os.environ.get("PERFCAST_DEBUG_OFFSETS"))   # log offsets every 2 s
    idle = asyncio.Event()            # set when no batch is in the agent's hands
    idle.set()
    stopping = asyncio.Event()        # set once the worker shuts down

    @app.timer(interval=STATS_INTERVAL_S)
    async def report() -> None:
        line = stats.take()
        if line:
            log.info("%s", line)

    finished = FinishedOffsets()      # per source partition, the offset to commit
    settled = asyncio.Event()         # cleared from a revocation to the next assignment
    settled.set()

    @app.on_partitions_assigned.connect
    async def _assigned(app_: Any, assigned: Any, **kwargs: Any) -> None:
        tune_fetches(app, FETCH_WAIT_MS, FETCH_MIN_BYTES)
        deliver_directly(app.consumer)
        settled.set()

    if debug_offsets:
        @app.timer(interval=2.0)
        async def offsets() -> None:
            log.info("offsets (generation %s): %s", app.consumer_generation_id,
                     offsets_report(app.consumer, source.get_topic_name(), finished))

    @app.timer(interval=COMMIT_INTERVAL_S)
    async def commit() -> None:
        """The finished windows' offsets (Faust does not commit the source: ``acks=False``);
        a rebalance's hand-over commits its own."""
        if assigned():
            await commit_finished(app.consumer, finished.due(app.consumer.assignment()))

    @app.on_partitions_revoked.connect
    async def _revoked(app_: Any, revoked: Any, **kwargs: Any) -> None:
        settled.clear()                   # the agent takes no new batch until the assignment
        log.info("revocation (generation %s): %s", app.consumer_generation_id,
                 offsets_report(app.consumer, source.get_topic_name(), finished))
        await hand_over(revoked)
        runner.forget()

    async def deliver(result: BatchResult) -> list[Any]:
        """The outputs queued for Kafka; predictions and alerts written to InfluxDB now
        (alongside the Kafka deliveries, before the state that produced them), estimates and
        dead letters buffered. Returns what to await for their delivery."""
        futures = []
        for name in OUTPUT_TOPICS:
            futures += await producer.send(k.topic(name), result.records[name])
        if sink is not None:
            if result.urgent:
                futures.append(asyncio.ensure_future(sink.write(result.urgent)))
            await sink.add_lines(result.lines)
        return futures

    async def persist(result: BatchResult) -> None:
        """The batch's state into the table and its changelog; returns once Kafka has it."""
        for _, key, value in result.changelog:
            state.data[key] = value
        if result.changelog:
            await asyncio.gather(*await producer.send_to(changelog_topic, result.changelog))

    flows: list[BatchFlow[BatchResult]] = []     # the agent's (one per agent start)

    async def drain() -> None:
        for flow in flows:
            await flow.drain()

    async def hand_over(revoked: Any) -> None:
        """Before a revocation returns -- so before any worker is given the partitions and
        recovers their table from the changelog -- the batch in the agent's hands and the one
        waiting for its acknowledgements are finished (outputs and changelog in Kafka, windows
        acknowledged), and the revoked partitions' offsets are committed. Without this a batch
        finished after the revocation wrote its changelog behind the new owner's recovery
        (which then worked from a stale state), and its windows were read again."""
        try:
            await asyncio.wait_for(idle.wait(), SHUTDOWN_WAIT_S)
            await asyncio.wait_for(drain(), SHUTDOWN_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("revocation with a batch not finished (its windows are read again)")
            finished.take(revoked)
            return
        except Exception:                                  # noqa: BLE001 -- reported here
            log.exception("a batch failed at a revocation (its windows are read again)")
            finished.take(revoked)
            return
        offsets = finished.take(revoked)
        committed = await commit_finished(app.consumer, offsets)
        log.info("%d partitions revoked: batches in hand finished, offsets %s", len(revoked),
                 {tp.partition: o for tp, o in offsets.items()} if committed else "unchanged")

    def current(events: list[Any]) -> list[Any]:
        """The events fetched under the present assignment: those taken in before a rebalance
        are read again by whoever owns their partition now (from its committed offset)."""
        generation = app.consumer_generation_id
        kept = [e for e in events if e.message.generation_id == generation]
        if len(kept) < len(events):
            dropped: dict[int, list[int]] = {}
            for e in events:
                if e.message.generation_id != generation:
                    dropped.setdefault(e.message.partition, []).append(e.message.offset)
            log.info("generation %s: %d windows of an earlier generation left to be read "
                     "again: %s", generation, len(events) - len(kept),
                     {p: f"{min(o)}-{max(o)} ({len(o)})" for p, o in sorted(dropped.items())})
        return kept

    guard = OffsetGuard()             # each partition's windows once, in offset order

    def assigned() -> bool:
        """No rebalance under way: the assignment's tables are recovered and its partitions
        sought to their committed offsets (Faust's ``actives_ready``)."""
        return settled.is_set() and app.tables.actives_ready

    async def ready() -> bool:
        """Wait until :func:`assigned`; ``False`` if the worker stops meanwhile."""
        while not assigned():
            if stopping.is_set():
                return False
            await settled.wait() if not settled.is_set() else await asyncio.sleep(0.02)
        return not stopping.is_set()

    def source_partitions() -> list[Any]:
        topic = source.get_topic_name()
        return [tp for tp in app.consumer.assignment() if tp.topic == topic]

    async def start_generation() -> Any:
        """The guard started on the present generation (once per generation): each source
        partition from its committed offset; returns the generation."""
        generation = app.consumer_generation_id
        if guard.generation != generation:
            committed = committed_offsets(app.consumer)
            starts = {tp: committed.get(tp) for tp in source_partitions()}
            # none committed (Faust records a commit of 0 as none too): the consumer starts
            # at the earliest offset (consumer_auto_offset_reset)
            unknown = [tp for tp, offset in starts.items() if offset is None]
            if unknown:
                starts.update(await app.consumer.earliest_offsets(*unknown))
            if guard.generation != generation:     # not started meanwhile (the stall check)
                guard.start(generation, starts)
                log.info("generation %s starts at %s", generation,
                         {tp.partition: o for tp, o in sorted(guard.next.items())})
        return generation

    @app.timer(interval=STALL_CHECK_S)
    async def unstall() -> None:
        """Source partitions holding windows past the next one to take that never reach the
        idle agent (:meth:`streams.kafka.continuity.OffsetGuard.stalled`) are sought back."""
        if not assigned() or not idle.is_set() or stopping.is_set():
            return
        try:
            generation = await start_generation()
            highwater = {tp: app.consumer.highwater(tp) for tp in source_partitions()}
            seeks = guard.stalled(highwater, time.monotonic())
            if not assigned() or app.consumer_generation_id != generation:
                return                    # a rebalance began meanwhile
            for tp, offset in seeks.items():
                log.warning("generation %s: partition %d holds windows %d-%d in Kafka but none "
                            "reached the agent for %.0f s: read again from %d", generation,
                            tp.partition, offset, highwater[tp] - 1, STALL_S, offset)
                await app.consumer.seek(tp, offset)
        except Exception:                                  # noqa: BLE001 -- next check retries
            log.exception("the stall check failed (tried again in %.0f s)", STALL_CHECK_S)

    async def continuing(events: list[Any]) -> list[Any]:
        """The events that continue their partitions (:mod:`streams.kafka.continuity`); a
        partition with a gap is sought back to the first window missing."""
        generation = await start_generation()
        checked = guard.check(events, time.monotonic())
        if checked.skipped or checked.jumps:
            level = logging.WARNING if checked.gaps or checked.repeated or checked.jumps \
                else logging.INFO
            log.log(level, "generation %s: %d windows skipped: %s", generation,
                    checked.skipped, checked.summary())
            for tp, offset in checked.gaps.items():
                await app.consumer.seek(tp, offset)
        return checked.events

    @app.on_before_shutdown.connect
    async def _shutdown(app_: Any, **kwargs: Any) -> None:
        # the agent takes no new batch from here; the one in its hands and the one waiting
        # for its acknowledgements are finished
        stopping.set()
        try:
            await asyncio.wait_for(idle.wait(), SHUTDOWN_WAIT_S)
            await asyncio.wait_for(drain(), SHUTDOWN_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("shutting down with a batch not finished (read again on restart)")
        except Exception:                                  # noqa: BLE001 -- reported here
            log.exception("a batch failed at shutdown (read again on restart)")
        try:
            await commit_finished(app.consumer, finished.take(app.consumer.assignment()))
        except Exception:                                  # noqa: BLE001 -- reported here
            log.exception("finished offsets not committed at shutdown (read again on restart)")
        await producer.stop()
        await runner.stop()

    @app.agent(source)
    async def process(stream: Any) -> None:
        """Batches of windows through the flow (:class:`streams.kafka.batch_flow.BatchFlow`): the
        core, then -- once the batch before it is finished -- the outputs queued; a batch is
        finished (delivered, its state in the changelog, its windows acknowledged) while the
        core computes the next. A crash before a batch is finished re-produces its outputs
        (at least once), never loses them, and a committed window is always in the
        changelog."""
        await drain()                     # an agent restarted after a failure
        async def ack(events: list[Any]) -> None:
            await acknowledge(stream, events)
            finished.add(events)

        flows[:] = [BatchFlow(runner, Steps(deliver, persist, ack, stats.add))]
        await runner.start()
        async for events in adaptive_batches(stream, batch, within_s):
            if stopping.is_set():
                break                     # not acknowledged: read again after a restart
            if not await ready():         # a rebalance under way: until the new assignment
                break
            events = await continuing(current(events))
            if stopping.is_set():
                break
            if not assigned() or guard.generation != app.consumer_generation_id:
                continue                  # a rebalance began meanwhile: read again later
            if not events:
                continue
            idle.clear()
            try:
                received = time.time()
                stamp = events[0].message.timestamp      # s since the epoch (producer's clock)
                if stamp:
                    stats.age(received - stamp)
                if debug_batches:
                    log.info("batch of %d: oldest %.3f s, newest %.3f s old; backlog %s",
                             len(events), received - stamp,
                             received - events[-1].message.timestamp, backlog(stream))
                await flows[0].submit(events, [e.value for e in events],
                                      [e.message.partition for e in events], received)
            finally:
                idle.set()

    if sink is not None:
        @app.timer(interval=config.influxdb.flush_interval_s)
        async def flush_influx() -> None:
            await sink.flush()

    return app
