"""Publish window records to ``perfcast.windows`` with kafka-python, keyed by system.

Records are sent as they are (text lines of a JSON-lines trace, or dicts serialised to JSON),
so a malformed line reaches the worker and its dead-letter topic instead of being dropped
here. ``rate`` paces the sends (windows per second); ``None`` sends as fast as possible.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from streams.config import KafkaSettings

__all__ = ["ProduceStats", "produce", "kafka_client_options", "record_key"]


@dataclass
class ProduceStats:
    sent: int = 0
    seconds: float = 0.0

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
    """The partition key (system) of an encoded record, ``None`` if it has none."""
    try:
        system = json.loads(value).get("system")
    except (ValueError, AttributeError):
        return None
    return system.encode() if isinstance(system, str) else None


def _encode(record: str | bytes | Mapping[str, Any]) -> bytes:
    if isinstance(record, bytes):
        return record
    if isinstance(record, str):
        return record.encode()
    return json.dumps(record, separators=(",", ":")).encode()


def produce(records: Iterable[str | bytes | Mapping[str, Any]], settings: KafkaSettings, *,
            rate: float | None = None, producer: Any = None) -> ProduceStats:
    """Send ``records`` to ``<prefix>.windows``; returns how many and how fast."""
    from kafka import KafkaProducer

    own = producer is None
    if own:
        producer = KafkaProducer(**kafka_client_options(settings), linger_ms=5, acks="all",
                                 batch_size=256 * 1024, max_request_size=8 * 1024 * 1024)
    topic = settings.topic("windows")
    stats = ProduceStats()
    start = time.perf_counter()
    try:
        for i, record in enumerate(records):
            if rate:
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            value = _encode(record)
            producer.send(topic, key=record_key(value), value=value)
            stats.sent += 1
        producer.flush()
    finally:
        if own:
            producer.close()
    stats.seconds = time.perf_counter() - start
    return stats
