"""``perfcast worker`` whose Kafka consumer loses the records it first fetches of one topic
(``PERFCAST_TEST_LOSE_TOPIC``): fetched -- the partition's position moves past them -- but
never handed to Faust, until a fetch has reached the partition's high-water mark. That is what
Faust did to a worker restarted with nothing committed (CI at 530e307: it fetched the backlog
before its seek to the committed offsets, which had nothing to seek to, then cleared its
buffers), made certain instead of one run in ten. Only for
``tests/test_pipeline_services.py::test_windows_fetched_but_never_delivered_are_read_again``;
run as ``python -m lossy_worker worker ...`` with ``tests/`` on the path.

It replaces ``faust.transport.drivers.aiokafka.AIOKafkaConsumerThread.getmany`` (faust-streaming
0.15.x), the fetch behind Faust's consumer loop."""

from __future__ import annotations

import logging
import os
from typing import Any

import faust.transport.drivers.aiokafka as driver

from streams.cli.commands import app

log = logging.getLogger("perfcast.test")


def lose_first_fetches(topic: str) -> None:
    """Patch the fetch so that each partition of ``topic`` loses its records until a fetch
    reaches its high-water mark; every loss is logged at ``warning``."""
    fetch = driver.AIOKafkaConsumerThread.getmany
    caught_up: set[Any] = set()

    async def getmany(self: Any, active_partitions: Any, timeout: float) -> Any:
        records = await fetch(self, active_partitions, timeout)
        for tp in [tp for tp, batch in records.items()
                   if tp.topic == topic and batch and tp not in caught_up]:
            batch = records.pop(tp)
            log.warning("lossy_worker: lost offsets %d-%d of partition %d", batch[0].offset,
                        batch[-1].offset, tp.partition)
            if batch[-1].offset + 1 >= self.highwater(tp):
                caught_up.add(tp)
        return records

    driver.AIOKafkaConsumerThread.getmany = getmany


if __name__ == "__main__":
    lose_first_fetches(os.environ["PERFCAST_TEST_LOSE_TOPIC"])
    app()
