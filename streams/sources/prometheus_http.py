"""The Prometheus source over HTTP: the query API client, the windows of a time range
(backtests), and the live follower that publishes them to Kafka.

Only Prometheus' HTTP query API is used (``GET /api/v1/query_range``), so anything that serves
it works: Prometheus, Thanos, Mimir/Cortex (``headers`` for the tenant), VictoriaMetrics. The
standard library's ``urllib`` does the requests (no new dependency). A bearer token comes from
``PERFCAST_PROMETHEUS_TOKEN`` or the file named by ``PERFCAST_PROMETHEUS_TOKEN_FILE``, never
from the configuration file, and is never logged.

**Following live** (:func:`follow`): a window ending at ``e`` is read once the wall clock is
past ``e + lag_s`` (the scrape interval plus Prometheus' ingestion delay), the windows read
are sent to ``perfcast.windows`` and Kafka's acknowledgement awaited, and only then is ``e``
written to the checkpoint file. After a restart the follower starts after the checkpoint's
end, so every window is sent at least once; a window sent twice (a crash between Kafka's
acknowledgement and the checkpoint) has the same ``(system, tier, end)``: the worker skips it
as a replay if its content is the same, dead-letters it as a duplicate if not, and never
counts it twice. Progress is logged at ``info`` for every
batch (``windows up to ...: N records, G gaps, behind by S s``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from streams.core.config import ConfigError, KafkaSettings, secret
from streams.core.records import format_time
from streams.sources.prometheus import (
    QUERY_FIELDS,
    Gap,
    PrometheusSource,
    TierData,
    parse_result,
    promql_duration,
    system_windows,
    window_ends,
)

__all__ = ["PrometheusError", "PrometheusClient", "fetch_windows", "iter_windows", "follow",
           "Checkpoint", "FollowStats"]

log = logging.getLogger("perfcast.prometheus")


class PrometheusError(RuntimeError):
    """Prometheus could not be queried, or refused a query (the message names the query).
    ``transient``: worth retrying (no connection, a timeout, HTTP 5xx/429), as opposed to a
    query Prometheus cannot run (HTTP 400/422: fix the configuration)."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class PrometheusClient:
    """``GET /api/v1/query_range`` against ``source.url``."""

    def __init__(self, source: PrometheusSource, env: Mapping[str, str] | None = None) -> None:
        self.source = source
        self.headers = {"Accept": "application/json", **source.headers}
        try:
            token = secret(os.environ if env is None else env, "PERFCAST_PROMETHEUS_TOKEN")
        except ConfigError as exc:
            raise PrometheusError(str(exc)) from None
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def __repr__(self) -> str:             # never the token
        return f"PrometheusClient({self.source.url!r})"

    def query_range(self, query: str, start_ms: int, end_ms: int, step_ms: int,
                    what: str = "query") -> dict[str, Any]:
        """The ``data`` of a range query evaluated at ``start, start + step, ..., end``."""
        params = {"query": query, "start": f"{start_ms / 1000:.3f}",
                  "end": f"{end_ms / 1000:.3f}", "step": f"{step_ms / 1000:.3f}",
                  "timeout": f"{self.source.timeout_s:g}s"}
        url = f"{self.source.url}/api/v1/query_range?{urllib.parse.urlencode(params)}"
        request = urllib.request.Request(url, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.source.timeout_s + 5) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                detail = json.loads(exc.read()).get("error", "")
            except (ValueError, AttributeError, OSError):
                detail = ""
            raise PrometheusError(f"{what}: Prometheus answered HTTP {exc.code} "
                                  f"({detail or exc.reason}) to {query!r}",
                                  transient=exc.code >= 500 or exc.code == 429) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PrometheusError(f"{what}: cannot query {self.source.url} ({reason})",
                                  transient=True) from None
        except ValueError as exc:
            raise PrometheusError(f"{what}: {self.source.url} did not answer JSON ({exc})",
                                  transient=True) from None
        if body.get("status") != "success":
            raise PrometheusError(f"{what}: {body.get('errorType')}: {body.get('error')} "
                                  f"(query {query!r})")
        return body["data"]


def _tier_data(client: PrometheusClient, source: PrometheusSource, first_ms: int,
               last_ms: int) -> dict[str, TierData]:
    """Every tier's query results on the grid from ``first_ms - window`` to ``last_ms``;
    ``concurrency`` queries in flight at a time."""
    window = promql_duration(source.window_s)
    jobs = [(spec.name, name, query.replace("{window}", window))
            for spec in source.tiers for name, query in spec.queries().items()]

    def run(job: tuple[str, str, str]) -> list:
        tier, name, query = job
        what = f"tiers.{tier}.{name}"
        data = client.query_range(query, first_ms - source.window_ms, last_ms,
                                  source.window_ms, what)
        try:
            return parse_result(data, what)
        except ValueError as exc:
            raise PrometheusError(str(exc)) from None

    if source.concurrency > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(min(source.concurrency, len(jobs))) as pool:
            answers = list(pool.map(run, jobs))
    else:
        answers = [run(job) for job in jobs]
    results: dict[str, dict[str, Any]] = {spec.name: {} for spec in source.tiers}
    for (tier, name, _), series in zip(jobs, answers):
        results[tier][name] = series
    return {tier: TierData(**{k: got.get(k) for k in QUERY_FIELDS
                              if k in got or k == "completions"})
            for tier, got in results.items()}


def _batches(ends: list[int], size: int) -> Iterator[list[int]]:
    for i in range(0, len(ends), size):
        yield ends[i:i + size]


def iter_windows(source: PrometheusSource, start_s: float, end_s: float,
                 client: PrometheusClient | None = None,
                 on_gaps: Callable[[list[Gap]], None] | None = None,
                 ) -> Iterator[tuple[float, list[dict[str, Any]]]]:
    """The records of the windows ending in ``(start_s, end_s]``, in batches of at most
    ``max_windows_per_query`` window ends: ``(last end of the batch, its records ordered by
    end, then tier)``."""
    client = client or PrometheusClient(source)
    ends = window_ends(start_s, end_s, source.window_s, source.offset_s)
    for batch in _batches(ends, source.max_windows_per_query):
        data = _tier_data(client, source, batch[0], batch[-1])
        try:
            records, gaps = system_windows(source, data, batch)
        except ValueError as exc:
            raise PrometheusError(str(exc)) from None
        if gaps and on_gaps is not None:
            on_gaps(gaps)
        yield batch[-1] / 1000.0, records


@dataclass
class Fetched:
    """The windows of a range and the gaps."""

    records: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    window_ends: int = 0


def fetch_windows(source: PrometheusSource, start_s: float, end_s: float,
                  client: PrometheusClient | None = None) -> Fetched:
    """All records of the windows ending in ``(start_s, end_s]`` (a backtest's input)."""
    out = Fetched(window_ends=len(window_ends(start_s, end_s, source.window_s,
                                              source.offset_s)))
    for _, records in iter_windows(source, start_s, end_s, client, out.gaps.extend):
        out.records += records
    return out


def summarize_gaps(gaps: list[Gap]) -> str:
    """``"db: 3 (tier not reporting at the window's end)"``, per tier and reason."""
    counts: dict[tuple[str, str], list[int]] = {}
    for g in gaps:
        counts.setdefault((g.tier, g.reason), []).append(g.end_ms)
    return "; ".join(f"{tier}: {len(ends)} ({reason}, from {format_time(min(ends) / 1000)})"
                     for (tier, reason), ends in sorted(counts.items()))


# ----------------------------------------------------------------------------- live
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
        except (OSError, ValueError) as exc:
            raise ConfigError(f"checkpoint: cannot read {str(self.path)!r} ({exc})") from None
        end = data.get("end") if isinstance(data, dict) else None
        if data.get("system") != self.source.system or not isinstance(end, (int, float)) \
                or isinstance(end, bool) or not math.isfinite(end):
            raise ConfigError(f"checkpoint: {str(self.path)!r} is not a checkpoint of system "
                              f"{self.source.system!r} (got {str(data)[:200]})")
        return float(end)

    def save(self, end_s: float) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"system": self.source.system, "url": self.source.url,
                                   "end": end_s, "end_iso": format_time(end_s)}) + "\n")
        os.replace(tmp, self.path)


@dataclass
class FollowStats:
    """What :func:`follow` did: records sent, windows (ends) covered, gaps, batches."""

    sent: int = 0
    window_ends: int = 0
    gaps: int = 0
    batches: int = 0
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
    before = stats.sent
    for batch_end, records in iter_windows(source, last, ready, client, gaps.extend):
        sent = produce(records, kafka, producer=producer)
        if sent.failed or sent.skipped:
            raise PrometheusError(
                f"Kafka refused {sent.failed} and perfcast skipped {sent.skipped} of the "
                f"windows up to {format_time(batch_end)}; the checkpoint stays at "
                f"{format_time(last)}")
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


def follow(source: PrometheusSource, kafka: KafkaSettings, checkpoint: Checkpoint, *,
           start_s: float | None = None, until_s: float | None = None,
           stop: threading.Event | None = None, producer: Any = None,
           client: PrometheusClient | None = None,
           clock: Callable[[], float] = time.time) -> FollowStats:
    """Read windows as they complete and publish them to ``<prefix>.windows`` (module
    docstring). Starts after the checkpoint's end, else after ``start_s``, else at the last
    window complete now; stops when ``stop`` is set or after the window ending at
    ``until_s``. Prometheus out of reach (or answering 5xx) is retried with back-off, up to
    a minute apart, logged; a query it refuses, or a window Kafka refused, stops the follower
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
