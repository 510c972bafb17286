"""Publish window records to ``perfcast.windows`` with kafka-python, keyed by system.

Records are sent as they are (text lines of a JSON-lines trace, or dicts serialised to JSON),
so a malformed line reaches the worker and its dead-letter topic instead of being dropped
here: a line whose key cannot be read (not JSON, nested deeper than the parser goes, a system
name that is not valid Unicode such as JSON's ``"\\ud800"``) is sent without a key. Only a
record that cannot be sent at all -- a mapping that is not JSON-serialisable, a record larger
than the producer's largest request -- is skipped, with a warning naming its position and
why, and the rest are still sent; a record the broker refuses (larger than its largest
message) is counted as failed and logged. ``rate`` paces the sends (windows per second);
``None`` sends as fast as possible.

Records are at most :data:`MAX_RECORD_BYTES` (key and value): Kafka's default largest message
is 1 MB (the broker's ``message.max.bytes``, which bounds a whole record batch), and
kafka-python treats a batch the broker refuses as fatal -- it aborts every record sent after
it -- so a larger record is skipped here, before it is sent.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from streams.core.config import KafkaSettings

__all__ = ["MAX_RECORD_BYTES", "ProduceStats", "produce", "kafka_client_options", "record_key"]

log = logging.getLogger("perfcast.produce")

#: largest record sent (key and value, bytes): below Kafka's default largest message
#: (``message.max.bytes`` = 1,048,588, which includes the record batch's overhead)
MAX_RECORD_BYTES = 1_000_000
#: longest system name used as a key (``streams.core.records.MAX_NAME``: a longer one is invalid,
#: and its record is dead-lettered wherever it lands)
_MAX_KEY_CHARS = 200


@dataclass
class ProduceStats:
    """``sent``: records handed to Kafka; ``skipped``: records that could not be sent at all;
    ``failed``: records Kafka refused after they were sent."""

    sent: int = 0
    seconds: float = 0.0
    skipped: int = 0
    failed: int = 0

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds > 0 else 0.0


def kafka_client_options(k: KafkaSettings) -> dict[str, Any]:
    """kafka-python connection options (bootstrap, security) from the settings."""
    opts: dict[str, Any] = {"bootstrap_servers": [b.strip() for b in k.bootstrap.split(",")],
                            "security_protocol": k.security_protocol.upper()}
    if k.sasl_mechanism:
        opts.update(sasl_mechanism=k.sasl_mechanism, sasl_plain_username=k.sasl_username,
                    sasl_plain_password=k.sasl_password)
    if k.ssl_cafile:
        opts["ssl_cafile"] = k.ssl_cafile
    return opts


def record_key(value: bytes) -> bytes | None:
    """The partition key (system) of an encoded record, ``None`` if it has none that can be
    read (not JSON, too deeply nested, a system name that is not valid Unicode or longer than
    any valid name)."""
    try:
        system = json.loads(value).get("system")
    except (ValueError, AttributeError, RecursionError):
        return None
    if not isinstance(system, str) or len(system) > _MAX_KEY_CHARS:
        return None
    try:
        return system.encode()
    except UnicodeEncodeError:                # a lone surrogate ("\\ud800" in the JSON text)
        return None


def _encode(record: str | bytes | Mapping[str, Any]) -> bytes:
    """The record's bytes; ``ValueError`` / ``TypeError`` / ``RecursionError`` if a mapping is
    not JSON-serialisable. A string's lone surrogates become their escapes (``\\ud800``, the
    same character in JSON text) rather than invalid UTF-8."""
    if isinstance(record, bytes):
        return record
    if isinstance(record, str):
        return record.encode("utf-8", "backslashreplace")
    return json.dumps(record, separators=(",", ":")).encode()


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


def produce(records: Iterable[str | bytes | Mapping[str, Any]], settings: KafkaSettings, *,
            rate: float | None = None, producer: Any = None,
            key: Callable[[bytes], bytes | None] = record_key) -> ProduceStats:
    """Send ``records`` to ``<prefix>.windows``; returns how many and how fast (module
    docstring: what is skipped and what fails). ``key``: a record's partition key (default:
    its ``system``; metric samples: :func:`streams.sources.sample_windows.sample_key`)."""
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    own = producer is None
    if own:
        from kafka.errors import KafkaError

        from streams.kafka.connect import Unreachable, bounded_bootstrap, quiet_kafka_logs

        timeout = settings.connect_timeout_s
        try:
            with quiet_kafka_logs():
                producer = KafkaProducer(**kafka_client_options(settings), linger_ms=5,
                                         acks="all", batch_size=256 * 1024,
                                         max_request_size=MAX_RECORD_BYTES,
                                         **bounded_bootstrap(KafkaProducer, timeout))
        except KafkaError as exc:
            raise Unreachable(f"Kafka at {settings.bootstrap} did not answer within "
                              f"{timeout:g} s ({type(exc).__name__})") from None
    topic = settings.topic("windows")
    stats = ProduceStats()

    def refused(position: int, exc: BaseException) -> None:
        stats.failed += 1
        log.warning("record %d was not stored by Kafka (%s)", position, _why(exc))

    start = time.perf_counter()
    try:
        for i, record in enumerate(records):
            if rate:
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            try:
                value = _encode(record)
                future = producer.send(topic, key=key(value), value=value)
            except (ValueError, TypeError, RecursionError, MessageSizeTooLargeError) as exc:
                stats.skipped += 1
                log.warning("skipped record %d: %s", i, _why(exc))
                continue
            add_errback = getattr(future, "add_errback", None)
            if add_errback is not None:
                add_errback(refused, i)
            stats.sent += 1
        producer.flush()
    finally:
        if own:
            producer.close()
    stats.seconds = time.perf_counter() - start
    return stats
