"""The worker's agent and the callbacks around it: one object holding what they share.

:func:`streams.kafka.worker.build_app` declares the topics and the table and registers these
methods with Faust (the agent, its timers, the rebalance and shutdown signals); here they are
plain methods over plain state, so each can be driven alone. The rules they keep, from the
worker's module docstring: a batch's windows are acknowledged only once its outputs and its
state are in Kafka; a revocation returns only once the batches in hand are finished and the
revoked partitions' offsets committed; no batch is taken until the new assignment's tables
are recovered; each partition's windows are taken once and in offset order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from streams.kafka.batch_flow import BatchFlow, Steps
from streams.kafka.batching import acknowledge, adaptive_batches, backlog
from streams.kafka.continuity import STALL_S, OffsetGuard
from streams.kafka.core_process import OUTPUT_TOPICS, BatchResult, CoreRunner
from streams.kafka.delivery import deliver_directly
from streams.kafka.faust_adapter import committed_offsets
from streams.kafka.handover import FinishedOffsets, commit_finished, offsets_report
from streams.kafka.output_producer import OutputProducer
from streams.kafka.stats import BatchStats

__all__ = ["SHUTDOWN_WAIT_S", "WindowsAgent"]

log = logging.getLogger("perfcast.worker")

#: longest wait at shutdown (or a revocation) for the batch in the agent's hands to be finished
SHUTDOWN_WAIT_S = 20.0


class WindowsAgent:
    """The agent over ``perfcast.windows`` and the state its callbacks share.

    ``app``: the Faust app; ``source``: the windows topic; ``table``: the state table (its
    changelog topic gets each batch's state); ``runner``: the core (a child process or
    inline); ``producer``: the output topics' producer; ``sink``: the InfluxDB sink or None;
    ``topic``: output topic names by output (``KafkaSettings.topic``); ``batch`` / ``within_s``:
    the adaptive batches' size and wait; ``fetch_tuning``: called once per assignment with the
    app (the consumer's fetch limits)."""

    def __init__(self, app: Any, source: Any, table: Any, runner: CoreRunner,
                 producer: OutputProducer, sink: Any, topic: Any, *, batch: int,
                 within_s: float, fetch_tuning: Any = None) -> None:
        self.app = app
        self.source = source
        self.table = table
        self.changelog_topic = table.changelog_topic.get_topic_name()
        self.runner = runner
        self.producer = producer
        self.sink = sink
        self.topic = topic
        self.batch = batch
        self.within_s = within_s
        self.fetch_tuning = fetch_tuning
        self.stats = BatchStats()
        self.debug_batches = bool(os.environ.get("PERFCAST_DEBUG_BATCHES"))  # log every batch
        self.idle = asyncio.Event()        # set when no batch is in the agent's hands
        self.idle.set()
        self.stopping = asyncio.Event()    # set once the worker shuts down
        self.finished = FinishedOffsets()  # per source partition, the offset to commit
        self.settled = asyncio.Event()     # cleared from a revocation to the next assignment
        self.settled.set()
        self.guard = OffsetGuard()         # each partition's windows once, in offset order
        self.flows: list[BatchFlow[BatchResult]] = []   # the agent's (one per agent start)

    # -- timers ------------------------------------------------------------------------------
    async def report(self) -> None:
        """The throughput line since the last one (log level info)."""
        line = self.stats.take()
        if line:
            log.info("%s", line)

    async def offsets(self) -> None:
        """Per source partition, Faust's committed, read and high-water offsets and the
        worker's finished offset (``PERFCAST_DEBUG_OFFSETS=1``)."""
        log.info("offsets (generation %s): %s", self.app.consumer_generation_id,
                 offsets_report(self.app.consumer, self.source.get_topic_name(),
                                self.finished))

    async def commit(self) -> None:
        """The finished windows' offsets (Faust does not commit the source: ``acks=False``);
        a rebalance's hand-over commits its own."""
        if self.assigned():
            await commit_finished(self.app.consumer,
                                  self.finished.due(self.app.consumer.assignment()))

    async def flush_influx(self) -> None:
        """The InfluxDB sink's buffered points, written."""
        await self.sink.flush()

    async def unstall(self) -> None:
        """Source partitions holding windows past the next one to take that never reach the
        idle agent (:meth:`streams.kafka.continuity.OffsetGuard.stalled`) are sought back."""
        app = self.app
        if not self.assigned() or not self.idle.is_set() or self.stopping.is_set():
            return
        try:
            generation = await self.start_generation()
            highwater = {tp: app.consumer.highwater(tp) for tp in self.source_partitions()}
            seeks = self.guard.stalled(highwater, time.monotonic())
            if not self.assigned() or app.consumer_generation_id != generation:
                return                    # a rebalance began meanwhile
            for tp, offset in seeks.items():
                log.warning("generation %s: partition %d holds windows %d-%d in Kafka but none "
                            "reached the agent for %.0f s: read again from %d", generation,
                            tp.partition, offset, highwater[tp] - 1, STALL_S, offset)
                await app.consumer.seek(tp, offset)
        except Exception:                                  # noqa: BLE001 -- next check retries
            log.exception("the stall check failed (tried again at the next check)")

    # -- rebalances and shutdown -------------------------------------------------------------
    async def on_assigned(self, app_: Any, assigned: Any, **kwargs: Any) -> None:
        """A new assignment: the consumer's fetch limits and direct delivery set again (the
        consumer may be new), and the agent may take batches once its tables are ready."""
        if self.fetch_tuning is not None:
            self.fetch_tuning(self.app)
        deliver_directly(self.app.consumer)
        self.settled.set()

    async def on_revoked(self, app_: Any, revoked: Any, **kwargs: Any) -> None:
        """A revocation: no new batch until the next assignment; the batches in hand finished
        and the revoked partitions' offsets committed before it returns."""
        self.settled.clear()
        log.info("revocation (generation %s): %s", self.app.consumer_generation_id,
                 offsets_report(self.app.consumer, self.source.get_topic_name(),
                                self.finished))
        await self.hand_over(revoked)
        self.runner.forget()

    async def hand_over(self, revoked: Any) -> None:
        """Before a revocation returns -- so before any worker is given the partitions and
        recovers their table from the changelog -- the batch in the agent's hands and the one
        waiting for its acknowledgements are finished (outputs and changelog in Kafka, windows
        acknowledged), and the revoked partitions' offsets are committed. Otherwise a batch
        finished after the revocation would write its changelog behind the new owner's
        recovery (which would then work from a stale state), and its windows would be read
        again."""
        try:
            await asyncio.wait_for(self.idle.wait(), SHUTDOWN_WAIT_S)
            await asyncio.wait_for(self.drain(), SHUTDOWN_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("revocation with a batch not finished (its windows are read again)")
            self.finished.take(revoked)
            return
        except Exception:                                  # noqa: BLE001 -- reported here
            log.exception("a batch failed at a revocation (its windows are read again)")
            self.finished.take(revoked)
            return
        offsets = self.finished.take(revoked)
        committed = await commit_finished(self.app.consumer, offsets)
        log.info("%d partitions revoked: batches in hand finished, offsets %s", len(revoked),
                 {tp.partition: o for tp, o in offsets.items()} if committed else "unchanged")

    async def on_shutdown(self, app_: Any, **kwargs: Any) -> None:
        """The agent takes no new batch from here; the one in its hands and the one waiting
        for its acknowledgements are finished, the finished offsets committed, then the
        producer and the core stopped."""
        self.stopping.set()
        try:
            await asyncio.wait_for(self.idle.wait(), SHUTDOWN_WAIT_S)
            await asyncio.wait_for(self.drain(), SHUTDOWN_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("shutting down with a batch not finished (read again on restart)")
        except Exception:                                  # noqa: BLE001 -- reported here
            log.exception("a batch failed at shutdown (read again on restart)")
        try:
            await commit_finished(self.app.consumer,
                                  self.finished.take(self.app.consumer.assignment()))
        except Exception:                                  # noqa: BLE001 -- reported here
            log.exception("finished offsets not committed at shutdown (read again on restart)")
        await self.producer.stop()
        await self.runner.stop()

    # -- a batch's steps ---------------------------------------------------------------------
    async def deliver(self, result: BatchResult) -> list[Any]:
        """The outputs queued for Kafka; predictions and alerts written to InfluxDB now
        (alongside the Kafka deliveries, before the state that produced them), estimates and
        dead letters buffered. Returns what to await for their delivery."""
        futures = []
        for name in OUTPUT_TOPICS:
            futures += await self.producer.send(self.topic(name), result.records[name])
        if self.sink is not None:
            if result.urgent:
                futures.append(asyncio.ensure_future(self.sink.write(result.urgent)))
            await self.sink.add_lines(result.lines)
        return futures

    async def persist(self, result: BatchResult) -> None:
        """The batch's state into the table and its changelog; returns once Kafka has it."""
        for _, key, value in result.changelog:
            self.table.data[key] = value
        if result.changelog:
            await asyncio.gather(*await self.producer.send_to(self.changelog_topic,
                                                              result.changelog))

    async def drain(self) -> None:
        """Until every batch in hand is finished."""
        for flow in self.flows:
            await flow.drain()

    # -- which windows to take ---------------------------------------------------------------
    def current(self, events: list[Any]) -> list[Any]:
        """The events fetched under the present assignment: those taken in before a rebalance
        are read again by whoever owns their partition now (from its committed offset)."""
        generation = self.app.consumer_generation_id
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

    def assigned(self) -> bool:
        """No rebalance under way: the assignment's tables are recovered and its partitions
        sought to their committed offsets (Faust's ``actives_ready``)."""
        return self.settled.is_set() and self.app.tables.actives_ready

    async def ready(self) -> bool:
        """Wait until :meth:`assigned`; ``False`` if the worker stops meanwhile."""
        while not self.assigned():
            if self.stopping.is_set():
                return False
            await self.settled.wait() if not self.settled.is_set() else await asyncio.sleep(0.02)
        return not self.stopping.is_set()

    def source_partitions(self) -> list[Any]:
        """The assigned partitions of the windows topic."""
        topic = self.source.get_topic_name()
        return [tp for tp in self.app.consumer.assignment() if tp.topic == topic]

    async def start_generation(self) -> Any:
        """The guard started on the present generation (once per generation): each source
        partition from its committed offset; returns the generation."""
        app = self.app
        generation = app.consumer_generation_id
        if self.guard.generation != generation:
            committed = committed_offsets(app.consumer)
            starts = {tp: committed.get(tp) for tp in self.source_partitions()}
            # none committed (Faust records a commit of 0 as none too): the consumer starts
            # at the earliest offset (consumer_auto_offset_reset)
            unknown = [tp for tp, offset in starts.items() if offset is None]
            if unknown:
                starts.update(await app.consumer.earliest_offsets(*unknown))
            if self.guard.generation != generation:    # not started meanwhile (the stall check)
                self.guard.start(generation, starts)
                log.info("generation %s starts at %s", generation,
                         {tp.partition: o for tp, o in sorted(self.guard.next.items())})
        return generation

    async def continuing(self, events: list[Any]) -> list[Any]:
        """The events that continue their partitions (:mod:`streams.kafka.continuity`); a
        partition with a gap is sought back to the first window missing."""
        generation = await self.start_generation()
        checked = self.guard.check(events, time.monotonic())
        if checked.skipped or checked.jumps:
            level = logging.WARNING if checked.gaps or checked.repeated or checked.jumps \
                else logging.INFO
            log.log(level, "generation %s: %d windows skipped: %s", generation,
                    checked.skipped, checked.summary())
            for tp, offset in checked.gaps.items():
                await self.app.consumer.seek(tp, offset)
        return checked.events

    # -- the agent ---------------------------------------------------------------------------
    async def process(self, stream: Any) -> None:
        """Batches of windows through the flow (:class:`streams.kafka.batch_flow.BatchFlow`): the
        core, then -- once the batch before it is finished -- the outputs queued; a batch is
        finished (delivered, its state in the changelog, its windows acknowledged) while the
        core computes the next. A crash before a batch is finished re-produces its outputs
        (at least once), never loses them, and a committed window is always in the
        changelog."""
        await self.drain()                # an agent restarted after a failure

        async def ack(events: list[Any]) -> None:
            await acknowledge(stream, events)
            self.finished.add(events)

        self.flows[:] = [BatchFlow(self.runner, Steps(self.deliver, self.persist, ack,
                                                      self.stats.add))]
        await self.runner.start()
        async for events in adaptive_batches(stream, self.batch, self.within_s):
            if self.stopping.is_set():
                break                     # not acknowledged: read again after a restart
            if not await self.ready():    # a rebalance under way: until the new assignment
                break
            events = await self.continuing(self.current(events))
            if self.stopping.is_set():
                break
            if not self.assigned() or self.guard.generation != self.app.consumer_generation_id:
                continue                  # a rebalance began meanwhile: read again later
            if not events:
                continue
            self.idle.clear()
            try:
                received = time.time()
                stamp = events[0].message.timestamp      # s since the epoch (producer's clock)
                if stamp:
                    self.stats.age(received - stamp)
                if self.debug_batches:
                    log.info("batch of %d: oldest %.3f s, newest %.3f s old; backlog %s",
                             len(events), received - stamp,
                             received - events[-1].message.timestamp, backlog(stream))
                await self.flows[0].submit(events, [e.value for e in events],
                                           [e.message.partition for e in events], received)
            finally:
                self.idle.set()
