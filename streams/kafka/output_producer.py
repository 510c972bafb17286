"""The output topics' producer: one record batch per partition, keyed by system."""

from __future__ import annotations

import ssl
from typing import Any

from streams.core.config import KafkaSettings

__all__ = ["MAX_BATCH_BYTES", "OutputProducer", "ssl_context"]

#: largest record batch the output producer builds (well below the broker's default
#: message.max.bytes, 1 MiB)
MAX_BATCH_BYTES = 512 << 10


def ssl_context(k: KafkaSettings) -> ssl.SSLContext:
    """The TLS context of the Kafka connections, trusting ``ssl_cafile`` where it is set."""
    return ssl.create_default_context(cafile=k.ssl_cafile)


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
            opts["ssl_context"] = ssl_context(self.settings)
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
