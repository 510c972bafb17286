"""InfluxDB sink: points from the pipeline's outputs, written in batches through the v2 write
API (``influxdb-client``), retried with back-off, behind a bounded buffer.

:meth:`InfluxSink.add` queues points; when the buffer holds ``max_buffer`` points it waits
until the writer has drained it (back-pressure: the Faust agent stops consuming, Kafka keeps
the windows). :meth:`InfluxSink.flush` writes everything queued and retries a failed batch
(InfluxDB down or restarting) with exponential back-off up to ``retry_max_s`` between tries,
forever: a batch is dropped only if InfluxDB rejects it as invalid (HTTP 400), which is logged.
Writes of the same point (time, measurement, tags) are idempotent in InfluxDB, so a batch
written twice after an uncertain failure does not duplicate data.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Iterable

from streams.config import InfluxSettings
from streams.schema import Point

__all__ = ["InfluxSink", "line_protocol"]

log = logging.getLogger("perfcast.influx")


@functools.lru_cache(maxsize=65536)
def _escape_tag(value: str) -> str:
    """Line-protocol escaping of a measurement, tag key/value or field key (names repeat: each
    is escaped once)."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _string_field(value: object) -> str:
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f'"{text}"'


_FIELD_TEXT = {bool: lambda v: "true" if v else "false", int: lambda v: f"{v}i",
               float: repr, str: _string_field}


def _field(value: object) -> str:
    text = _FIELD_TEXT.get(type(value))
    if text is not None:
        return text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        return repr(value)
    return _string_field(value)


@functools.lru_cache(maxsize=65536)
def _series(measurement: str, tags: tuple[tuple[str, str], ...]) -> str:
    """``measurement,tag=value,...`` (tags sorted, empty values left out), escaped once per
    series."""
    return _escape_tag(measurement) + "".join(
        f",{_escape_tag(k)}={_escape_tag(v)}" for k, v in sorted(tags) if v)


def line_protocol(p: Point) -> str:
    """One point as InfluxDB line protocol, nanosecond timestamp."""
    fields = ",".join([_escape_tag(k) + "=" + _field(v) for k, v in p.fields.items()])
    return f"{_series(p.measurement, tuple(p.tags.items()))} {fields} {int(round(p.time * 1e9))}"


class InfluxSink:
    """Batched, retried writer with a bounded buffer (module docstring)."""

    def __init__(self, settings: InfluxSettings, *, retry_max_s: float = 5.0) -> None:
        from influxdb_client import InfluxDBClient
        from influxdb_client.client.write_api import SYNCHRONOUS

        if not settings.url:
            raise ValueError("influxdb.url: not set (PERFCAST_INFLUX_URL)")
        self.settings = settings
        self.client = InfluxDBClient(url=settings.url, token=settings.token or "",
                                     org=settings.org, timeout=10_000)
        self.write_api = self.client.write_api(write_options=SYNCHRONOUS)
        self.buffer: list[str] = []
        self.retry_max_s = retry_max_s
        self.written = 0
        self.failures = 0
        self.dropped = 0
        self._lock = asyncio.Lock()
        self._drained = asyncio.Event()
        self._drained.set()

    async def add(self, points: Iterable[Point]) -> None:
        """Queue points; waits while the buffer is full (back-pressure)."""
        lines = [line_protocol(p) for p in points]
        while len(self.buffer) >= self.settings.max_buffer:
            self._drained.clear()
            asyncio.ensure_future(self.flush())
            await self._drained.wait()
        self.buffer.extend(lines)
        if len(self.buffer) >= self.settings.batch_size:
            asyncio.ensure_future(self.flush())

    def _write(self, batch: list[str]) -> None:
        self.write_api.write(bucket=self.settings.bucket, org=self.settings.org,
                             record="\n".join(batch), write_precision="ns")

    async def flush(self) -> None:
        """Write everything queued, batch by batch, retrying until InfluxDB takes it."""
        async with self._lock:
            delay = 0.1
            while self.buffer:
                batch = self.buffer[: self.settings.batch_size]
                try:
                    await asyncio.to_thread(self._write, batch)
                except Exception as exc:                        # noqa: BLE001 - retried
                    status = getattr(exc, "status", None)
                    if status == 400:
                        log.error("influxdb rejected %d points: %s", len(batch), exc)
                        self.dropped += len(batch)
                        del self.buffer[: len(batch)]
                        continue
                    self.failures += 1
                    log.warning("influxdb write failed (%s); retrying in %.1f s",
                                type(exc).__name__, delay)
                    await asyncio.sleep(delay)
                    delay = min(2 * delay, self.retry_max_s)
                    continue
                del self.buffer[: len(batch)]
                self.written += len(batch)
                delay = 0.1
            self._drained.set()

    def close(self) -> None:
        self.client.close()
