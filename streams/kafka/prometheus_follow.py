"""The Prometheus source followed live: the windows of a Prometheus as they complete,
published to Kafka with a checkpoint (``perfcast ingest prometheus``).

**Following live** (:func:`follow`): a window ending at ``e`` is read once the wall clock is
past ``e + lag_s`` (the scrape interval plus Prometheus' ingestion delay), the windows read
are sent to ``perfcast.windows`` and Kafka's acknowledgement awaited, and only then is ``e``
written to the checkpoint file. After a restart the follower starts after the checkpoint's
end, so every window is sent at least once; a window sent twice (a crash between Kafka's
acknowledgement and the checkpoint) has the same ``(system, tier, end)``: the worker skips it
as a replay if its content is the same, dead-letters it as a duplicate if not, and never
counts it twice. Progress is logged at ``info`` for every
batch (``windows up to ...: N records, G gaps, behind by S s``).

**An answer of another shape** (:class:`~streams.sources.prometheus_http.MalformedAnswer`:
not an object, no ``data``, a sample time ``"inf"``, labels as a list, JSON nested too deeply)
is a fault of that answer: it is published to ``perfcast.deadletter`` as the worker publishes
a record it cannot use (field, reason, value bounded; :func:`refused_dead_letter`), logged on
one line, and the follower goes on -- the other queries' windows of the interval are sent, and
the checkpoint moves past the interval once both are acknowledged. Retrying would not help: a
server that answers so persistently would stop the follower for ever. What cannot be told
from a hostile answer -- no connection, a deadline passed, HTTP 5xx/429, a body that is not
JSON at all -- is retried as before.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from streams.core.config import ConfigError, KafkaSettings
from streams.core.outputs import DeadLetter
from streams.core.records import InvalidWindow, format_time
from streams.sources.prometheus import Gap, PrometheusSource, window_ends
from streams.sources.prometheus_http import (PrometheusClient, PrometheusError, Refused,
                                             iter_windows, summarize_gaps)

__all__ = ["follow", "Checkpoint", "FollowStats", "refused_dead_letter"]

log = logging.getLogger("perfcast.prometheus")


class Checkpoint:
    """The end (epoch seconds) of the last window sent and acknowledged, in a JSON file,
    replaced atomically; it names the system and URL it belongs to."""

    def __init__(self, path: str | Path, source: PrometheusSource) -> None:
        self.path = Path(path)
        self.source = source

    def load(self) -> float | None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
            raise ConfigError(f"checkpoint: cannot read {str(self.path)!r} ({why})") from None
        end = data.get("end") if isinstance(data, dict) else None
        system = data.get("system") if isinstance(data, dict) else None
        if system != self.source.system or not isinstance(end, (int, float)) \
                or isinstance(end, bool) or not math.isfinite(end):
            raise ConfigError(f"checkpoint: {str(self.path)!r} is not a checkpoint of system "
                              f"{self.source.system!r} (got {repr(data)[:200]})")
        return float(end)

    def save(self, end_s: float) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"system": self.source.system, "url": self.source.url,
                                   "end": end_s, "end_iso": format_time(end_s)}) + "\n")
        os.replace(tmp, self.path)


def refused_dead_letter(refused: Refused) -> DeadLetter:
    """The dead letter of a refused answer: bounded as the pipeline bounds an invalid
    record's (:func:`streams.engine.pipeline.dead_letter`), ``raw`` the query as sent, keyed
    by the system and the tier."""
    import msgspec

    from streams.engine.pipeline import dead_letter

    dead = dead_letter(refused.request, InvalidWindow(refused.field, refused.value,
                                                      refused.reason))
    return msgspec.structs.replace(dead, system=refused.system, tier=refused.tier)


@dataclass
class FollowStats:
    """What :func:`follow` did: records sent, windows (ends) covered, gaps, batches, answers
    refused (each published as a dead letter)."""

    sent: int = 0
    window_ends: int = 0
    gaps: int = 0
    batches: int = 0
    refused: int = 0
    last_end: float | None = None


def _grid_floor(t: float, source: PrometheusSource) -> float:
    ends = window_ends(t - source.window_s, t, source.window_s, source.offset_s)
    return ends[-1] / 1000.0


def _send(source: PrometheusSource, kafka: KafkaSettings, checkpoint: Checkpoint,
          client: PrometheusClient, producer: Any, stats: FollowStats, last: float,
          ready: float, clock: Callable[[], float]) -> float:
    """Send the windows ending in ``(last, ready]``, batch by batch, each checkpointed once
    Kafka has it; returns the new checkpoint."""
    from streams.kafka.produce import produce

    gaps: list[Gap] = []
    refused: list[Refused] = []
    before = stats.sent
    for batch_end, records in iter_windows(source, last, ready, client, gaps.extend,
                                           refused.extend):
        sent = produce(records, kafka, producer=producer)
        if sent.failed or sent.skipped:
            raise PrometheusError(
                f"Kafka refused {sent.failed} and perfcast skipped {sent.skipped} of the "
                f"windows up to {format_time(batch_end)}; the checkpoint stays at "
                f"{format_time(last)}")
        if refused:
            _dead_letters(refused, kafka, producer, last)
            stats.refused += len(refused)
            refused = []
        checkpoint.save(batch_end)
        stats.sent += sent.sent
        stats.batches += 1
        stats.window_ends += len(window_ends(last, batch_end, source.window_s,
                                             source.offset_s))
        last = stats.last_end = batch_end
    stats.gaps += len(gaps)
    log.info("%s: windows up to %s: %d records sent (%d in all), %d gaps%s; behind by %.1f s",
             source.system, format_time(ready), stats.sent - before, stats.sent, len(gaps),
             f" ({summarize_gaps(gaps)})" if gaps else "", clock() - ready)
    return last


def _dead_letters(refused: list[Refused], kafka: KafkaSettings, producer: Any,
                  last: float) -> None:
    """Publish the refused answers to ``<prefix>.deadletter`` and await Kafka's
    acknowledgement; each logged on one line (its text cleaned of secrets and control
    characters by the client)."""
    import msgspec

    topic = kafka.topic("deadletter")
    futures = []
    for r in refused:
        log.warning("%s: %s: %s; published to %s, going on", r.system, r.field, r.reason,
                    topic)
        futures.append(producer.send(topic, key=r.system.encode("utf-8", "backslashreplace"),
                                     value=msgspec.json.encode(refused_dead_letter(r))))
    producer.flush()
    if any(getattr(f, "failed", lambda: False)() for f in futures):
        raise PrometheusError(f"Kafka refused the dead letter of a refused answer; the "
                              f"checkpoint stays at {format_time(last)}", transient=True)


def follow(source: PrometheusSource, kafka: KafkaSettings, checkpoint: Checkpoint, *,
           start_s: float | None = None, until_s: float | None = None,
           stop: threading.Event | None = None, producer: Any = None,
           client: PrometheusClient | None = None,
           clock: Callable[[], float] = time.time) -> FollowStats:
    """Read windows as they complete and publish them to ``<prefix>.windows`` (module
    docstring). Starts after the checkpoint's end, else after ``start_s``, else at the last
    window complete now; stops when ``stop`` is set or after the window ending at
    ``until_s``. Prometheus out of reach (or answering 5xx) is retried with back-off, up to
    a minute apart, logged; an answer of another shape is dead-lettered and passed (module
    docstring); a query it refuses (HTTP 400), or a window Kafka refused, stops the follower
    with :class:`PrometheusError` before the checkpoint moves past it."""

    stop = stop or threading.Event()
    client = client or PrometheusClient(source)
    resumed = checkpoint.load()
    if resumed is not None:
        last = resumed
        log.info("%s: resuming after %s (checkpoint %s)", source.system, format_time(last),
                 checkpoint.path)
    else:
        last = _grid_floor(start_s if start_s is not None else clock() - source.lag_s, source)
        log.info("%s: starting after %s (no checkpoint at %s)", source.system,
                 format_time(last), checkpoint.path)
    own = producer is None
    if own:
        from kafka import KafkaProducer

        from streams.kafka.produce import MAX_RECORD_BYTES, kafka_client_options
        producer = KafkaProducer(**kafka_client_options(kafka), linger_ms=5, acks="all",
                                 max_request_size=MAX_RECORD_BYTES)
    stats = FollowStats(last_end=last)
    retry_s = 0.0
    try:
        while not stop.is_set():
            ready = _grid_floor(clock() - source.lag_s, source)
            if until_s is not None:
                ready = min(ready, _grid_floor(until_s, source))
            if ready > last:
                try:
                    last = _send(source, kafka, checkpoint, client, producer, stats, last,
                                 ready, clock)
                except PrometheusError as err:
                    if not err.transient:
                        raise
                    last = stats.last_end if stats.last_end is not None else last
                    retry_s = min(60.0, max(retry_s * 2, source.window_s))
                    log.warning("%s: %s; retrying in %.0f s (the checkpoint stays at %s)",
                                source.system, err, retry_s, format_time(last))
                    stop.wait(retry_s)
                    continue
                retry_s = 0.0
            if until_s is not None and last >= _grid_floor(until_s, source):
                break
            wait = last + source.window_s + source.lag_s - clock()
            stop.wait(min(max(wait, 0.05), source.window_s))
    finally:
        if own:
            producer.close()
    return stats
