"""InfluxDB sink: points from the pipeline's outputs, written in batches through the v2 write
API (``influxdb-client``), retried with back-off, behind a bounded buffer.

:meth:`InfluxSink.add` queues points; when the buffer holds ``max_buffer`` points it waits
until the writer has drained it (back-pressure: the Faust agent stops consuming, Kafka keeps
the windows). :meth:`InfluxSink.flush` writes everything queued and retries a failed batch
(InfluxDB down or restarting) with exponential back-off up to ``retry_max_s`` between tries,
forever: a batch is dropped only if InfluxDB rejects it as invalid (HTTP 400), which is logged.
:meth:`InfluxSink.write` writes points at once, apart from the buffer, with the same retries.
Writes of the same point (time, measurement, tags) are idempotent in InfluxDB, so a batch
written twice after an uncertain failure does not duplicate data.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Iterable, Mapping

from streams.core.config import InfluxSettings
from streams.core.outputs import Outputs
from streams.sinks.schema import MEASUREMENTS, Point, reader, sources

__all__ = ["InfluxSink", "line_protocol", "lines"]

log = logging.getLogger("perfcast.influx")


@functools.lru_cache(maxsize=65536)
def _escape_tag(value: str) -> str:
    """Line-protocol escaping of a measurement, tag key/value or field key (names repeat: each
    is escaped once): a backslash before each comma, equals sign and space.

    A backslash is *not* doubled: InfluxDB's parser (``models/points.go``, 1.x and 2.x) reads
    ``\\,``, ``\\=`` and ``\\ `` as escapes and leaves every other backslash as it is, so
    ``a\\b`` is stored as ``a\\b`` and found by its real name (a doubled one would be stored
    doubled); ``a\\,b`` written ``a\\\\,b`` reads back as ``a\\,b``. A name ending in a
    backslash cannot be written (it would escape the separator after it); the input
    validator refuses such names (:mod:`streams.core.records`), as it refuses control characters.
    Should a line break reach this function anyway, it is written as the two characters
    ``\\n`` (``\\r``): a raw one would end the line and corrupt the whole write."""
    if "\n" in value or "\r" in value:
        value = value.replace("\n", "\\n").replace("\r", "\\r")
    return value.replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _string_field(value: object) -> str:
    """A string field value: ``\\`` and ``"`` escaped (InfluxDB unescapes both there), line
    breaks as spaces."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") \
        .replace("\r", " ")
    return f'"{text}"'


#: InfluxDB integers are 64-bit: a larger value (none comes from a validated window) is
#: written at the nearest bound instead of making InfluxDB refuse the whole batch
_INT_MIN, _INT_MAX = -2 ** 63, 2 ** 63 - 1


def _int_field(value: int) -> str:
    if not _INT_MIN <= value <= _INT_MAX:
        value = _INT_MAX if value > 0 else _INT_MIN
    return f"{value}i"


_FIELD_TEXT = {bool: lambda v: "true" if v else "false", int: _int_field,
               float: repr, str: _string_field}


def _field(value: object) -> str:
    text = _FIELD_TEXT.get(type(value))
    if text is not None:
        return text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return _int_field(int(value))
    if isinstance(value, float):
        return repr(value)
    return _string_field(value)


@functools.lru_cache(maxsize=65536)
def _series(measurement: str, tags: tuple[tuple[str, str], ...]) -> str:
    """``measurement,tag=value,...`` (tags sorted, empty values left out), escaped once per
    series."""
    return _escape_tag(measurement) + "".join(
        f",{_escape_tag(k)}={_escape_tag(v)}" for k, v in sorted(tags) if v)


def _float_text(value: Any) -> str:
    return repr(float(value))


def _int_text(value: Any) -> str:
    return _int_field(int(value))


def _bool_text(value: Any) -> str:
    return "true" if value else "false"


def _str_text(value: Any) -> str:
    return _string_field(value if isinstance(value, str) else ";".join(map(str, value)))


_TEXT = {"float": _float_text, "int": _int_text, "bool": _bool_text, "str": _str_text}
#: measurement -> (tag names, [(field, "key=", formatter)], reader)
_LINE_SPECS = {m: (tags, [(f, _escape_tag(f) + "=", _TEXT[kind]) for f, kind in types.items()],
                   reader(m, tags + tuple(types)))
               for m, (tags, types) in MEASUREMENTS.items()}


def _line(measurement: str, record: Any, time: float,
          added: Mapping[str, Any] | None) -> str | None:
    """:func:`line_protocol` of :func:`streams.sinks.schema._point`'s point, without building it."""
    tag_names, fields, read = _LINE_SPECS[measurement]
    series = []
    for t in tag_names:
        v = added[t] if added and t in added else read(record, t)
        if v is not None:
            series.append((t, str(v)))
    parts = [key + text(value) for name, key, text in fields
             if (value := (added[name] if added and name in added
                           else read(record, name))) is not None]
    if not parts:
        return None
    return f"{_series(measurement, tuple(series))} {','.join(parts)} {int(round(time * 1e9))}"


def lines(out: Outputs, *, deadletter_time: float | None = None) -> list[str]:
    """The line protocol of :func:`streams.sinks.schema.points` (equal, tested), straight from the
    records: what the worker writes per batch."""
    made = (_line(*src) for src in sources(out, deadletter_time=deadletter_time))
    return [line for line in made if line is not None]


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
        await self.add_lines([line_protocol(p) for p in points])

    async def add_lines(self, lines: list[str]) -> None:
        """Queue points already in line protocol (:func:`lines`); waits while the buffer is
        full (back-pressure)."""
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

    async def _write_retried(self, batch: list[str]) -> None:
        """Write ``batch``, retrying with back-off until InfluxDB takes it (or rejects it as
        invalid: HTTP 400, logged and counted as dropped)."""
        delay = 0.1
        while True:
            try:
                await asyncio.to_thread(self._write, batch)
            except Exception as exc:                            # noqa: BLE001 - retried
                if getattr(exc, "status", None) == 400:
                    log.error("influxdb rejected %d points: %s", len(batch), exc)
                    self.dropped += len(batch)
                    return
                self.failures += 1
                log.warning("influxdb write failed (%s); retrying in %.1f s",
                            type(exc).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(2 * delay, self.retry_max_s)
                continue
            self.written += len(batch)
            return

    async def write(self, lines: list[str]) -> None:
        """Write points (in line protocol) now, apart from the buffer, and return once
        InfluxDB has them (the worker's predictions and alerts, before the state that
        produced them is stored)."""
        size = self.settings.batch_size
        for start in range(0, len(lines), size):
            await self._write_retried(lines[start:start + size])

    async def flush(self) -> None:
        """Write everything queued, batch by batch, retrying until InfluxDB takes it."""
        async with self._lock:
            while self.buffer:
                batch = self.buffer[: self.settings.batch_size]
                await self._write_retried(batch)
                del self.buffer[: len(batch)]
            self._drained.set()

    def close(self) -> None:
        self.client.close()
