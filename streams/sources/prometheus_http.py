"""The Prometheus source over HTTP: the query API client and the windows of a time range
(backtests).

Only Prometheus' HTTP query API is used (``GET /api/v1/query_range``), so anything that serves
it works: Prometheus, Thanos, Mimir/Cortex (``headers`` for the tenant), VictoriaMetrics. The
standard library's ``urllib`` does the requests (no new dependency). A bearer token comes from
``PERFCAST_PROMETHEUS_TOKEN`` or the file named by ``PERFCAST_PROMETHEUS_TOKEN_FILE``, never
from the configuration file, and is never logged.

The live follower that publishes the windows to Kafka is the Kafka shell's
(:mod:`streams.kafka.prometheus_follow`).
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from streams.core.config import ConfigError, secret
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

__all__ = ["PrometheusError", "PrometheusClient", "fetch_windows", "iter_windows"]

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
