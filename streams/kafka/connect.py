"""Reaching Kafka and InfluxDB at start: a one-line error within a bounded time.

A command that needs Kafka (``perfcast produce``, ``perfcast worker``) or InfluxDB (the worker
with ``[influxdb] url``) first checks that it answers, for at most ``connect_timeout_s``
(``[kafka]`` / ``[influxdb] connect_timeout_s``, default :data:`CONNECT_TIMEOUT_S`; the
commands' ``--connect-timeout``). When it does not, :class:`Unreachable` says which service,
where and for how long it was tried, and the command ends with that one line and exit code
:data:`EXIT_UNREACHABLE` -- instead of the client libraries' own waits (kafka-python: 30 s of
bootstrap retries, then a traceback). Once running, the clients retry on their own: the
InfluxDB sink with back-off for as long as it takes (:class:`streams.sinks.influx.InfluxSink`),
aiokafka reconnecting to the brokers.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

from streams.core.config import InfluxSettings

__all__ = ["CONNECT_TIMEOUT_S", "EXIT_UNREACHABLE", "Unreachable", "check_influx",
           "quiet_kafka_logs", "bounded_bootstrap"]

#: default time to wait for Kafka or InfluxDB to answer at start, seconds
CONNECT_TIMEOUT_S = 10.0
#: exit code of a command whose Kafka or InfluxDB does not answer at start
EXIT_UNREACHABLE = 4


class Unreachable(ConnectionError):
    """A service that did not answer within the connect timeout (the message names it)."""


def quiet_kafka_logs() -> contextlib.AbstractContextManager[None]:
    """kafka-python logs every failed bootstrap attempt (a warning and an error every few
    hundred milliseconds); while a start-up check waits, only its own outcome is reported."""
    return _quiet("kafka")


def bounded_bootstrap(client: type, timeout_s: float) -> dict[str, int]:
    """Options that bound a kafka-python client's wait for its first broker to ``timeout_s``
    (``bootstrap_timeout_ms``, kafka-python 3; 2.x has ``api_version_auto_timeout_ms``)."""
    ms = max(int(timeout_s * 1000), 1)
    known = getattr(client, "DEFAULT_CONFIG", {})
    for option in ("bootstrap_timeout_ms", "api_version_auto_timeout_ms"):
        if option in known:
            return {option: ms}
    return {}


def check_influx(settings: InfluxSettings, timeout_s: float | None = None) -> None:
    """:class:`Unreachable` unless InfluxDB at ``settings.url`` answers its ``/ping`` within
    ``timeout_s`` (default ``settings.connect_timeout_s``)."""
    from influxdb_client import InfluxDBClient

    timeout = settings.connect_timeout_s if timeout_s is None else timeout_s
    client = InfluxDBClient(url=str(settings.url), token=settings.token or "",
                            org=settings.org, timeout=max(int(timeout * 1000), 1))
    try:
        with _quiet("influxdb_client"), _quiet("urllib3"):
            answered = client.ping()
    except Exception as exc:                        # noqa: BLE001 - any failure: unreachable
        answered = False
        why = f" ({type(exc).__name__})"
    else:
        why = ""
    finally:
        client.close()
    if not answered:
        raise Unreachable(f"InfluxDB at {settings.url} did not answer within {timeout:g} s"
                          f"{why}; check [influxdb] url / PERFCAST_INFLUX_URL, or raise "
                          f"--connect-timeout")


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
