"""Batches of events from a Faust stream that close as soon as the worker has caught up.

Faust's ``Stream.take_events(max_, within)`` closes a batch when it holds ``max_`` events or
after ``within`` seconds, and admits no event while the agent works on the previous batch.
Under a light, steady load every event therefore waits the whole ``within`` plus the previous
batch's processing and delivery: at 1,000 windows/s that put perfcast's p99 latency above 3 s
(``docs/benchmarks.md``). :func:`adaptive_batches` keeps ``take_events``' guarantees (no event
is acknowledged before the caller is done with its batch; at most ``max_`` per batch) and
changes three things:

* a batch closes when it is full, when its first event has waited ``within_s``, or -- the new
  rule -- when it is at least ``linger_s`` old and nothing more is known to be waiting
  (:func:`backlog`: the stream's queue is empty and the consumer has read every source
  partition up to its high-water mark). Under a backlog batches stay large (throughput);
  when the worker keeps up they close after ``linger_s`` (latency);
* events keep being admitted (up to ``max_``) while the caller processes and delivers the
  previous batch, so the time spent waiting for Kafka's and InfluxDB's acknowledgements is
  not lost;
* the caller acknowledges each batch's events itself (:func:`acknowledge`) when it is done with
  them, which may be after it has taken the next batch (:class:`streams.kafka.batch_flow.BatchFlow`
  delivers one batch while the core computes the next).

It uses the same internals of ``faust.Stream`` that ``take_events`` uses (a processor, the
passive drainer, ``current_event``, ``ack``), and the consumer's read offsets; the private
ones through :mod:`streams.kafka.faust_adapter`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from streams.kafka.faust_adapter import enable_passive, read_offsets

__all__ = ["acknowledge", "adaptive_batches", "backlog", "LINGER_S", "TICK_S"]

#: least age of a batch before it may close early (lets a few milliseconds of arrivals share
#: one batch's fixed costs)
LINGER_S = 0.02
#: how often the batch's closing rules are checked
TICK_S = 0.005


def backlog(stream: Any) -> int | None:
    """Events known to wait for ``stream``: those in its queue plus, per source partition,
    the offsets between the consumer's last read and the high-water mark of its last fetch.
    ``None`` when the consumer cannot tell (not started, partition not yet read)."""
    try:
        waiting = stream.channel.queue.qsize()
        consumer = stream.app.consumer
        topics = stream.channel.topics
        read = read_offsets(consumer)                # Faust's per-partition last read offset
        for tp in consumer.assignment():
            if tp.topic not in topics:
                continue
            high = consumer.highwater(tp)
            last = read.get(tp)
            if high is None:
                return None
            waiting += max(0, high - 1 - (last if last is not None else -1))
        return waiting
    except (AttributeError, RuntimeError):
        return None


async def adaptive_batches(stream: Any, max_: int, within_s: float, *,
                           linger_s: float = LINGER_S,
                           tick_s: float = TICK_S) -> AsyncIterator[list[Any]]:
    """Lists of events of ``stream`` (at most ``max_`` each), for the caller to acknowledge
    (:func:`acknowledge`) once it has finished with each; see the module docstring for when
    a batch closes."""
    buffer: list[Any] = []
    room = asyncio.Event()
    room.set()

    async def admit(value: Any) -> Any:
        event = stream.current_event
        if event is None:
            raise RuntimeError("adaptive_batches: the stream has no current event")
        while len(buffer) >= max_:                    # back-pressure until the batch is taken
            room.clear()
            await room.wait()
        buffer.append(event)
        return value

    stream.enable_acks = False                        # acknowledged by the caller
    stream.add_processor(admit)
    enable_passive(stream)
    opened: float | None = None
    while not stream.should_stop:
        await asyncio.sleep(tick_s)
        if not buffer:
            opened = None
            continue
        now = time.monotonic()
        if opened is None:
            opened = now
        age = now - opened
        if len(buffer) >= max_ or age >= within_s or (age >= linger_s and backlog(stream) == 0):
            events = buffer[:]
            buffer.clear()
            room.set()
            opened = None
            yield events


async def acknowledge(stream: Any, events: list[Any]) -> None:
    """Acknowledge a batch of :func:`adaptive_batches`: its offsets may now be committed."""
    for event in events:
        await stream.ack(event)
