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

import functools
import heapq
import http.client
import itertools
import json
import logging
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from streams.core.config import ConfigError, secret
from streams.core.records import format_time
from streams.core.source_settings import redact_url
from streams.core.terminal import printable
from streams.sources.prometheus import (
    ABSENT,
    LOOKBACK_WINDOWS,
    QUERY_FIELDS,
    AnswerError,
    Gap,
    PrometheusSource,
    TierData,
    parse_result,
    promql_duration,
    system_windows,
    window_ends,
)
from streams.sources.prometheus_native import (NATIVE_FIELD, NativeSeries, add_native_quantiles,
                                               parse_native_result)

__all__ = ["PrometheusError", "MalformedAnswer", "Refused", "PrometheusClient", "fetch_windows",
           "iter_windows"]

log = logging.getLogger("perfcast.prometheus")

#: a bearer token's characters (RFC 6750 section 2.1, ``b64token``); anything else -- a line
#: break, a space -- would split or end the header
_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")
#: how many bytes are read at a time
_CHUNK = 1 << 16


class PrometheusError(RuntimeError):
    """Prometheus could not be queried, or refused a query (the message names the query).
    ``transient``: worth retrying (no connection, a timeout, HTTP 5xx/429), as opposed to a
    query Prometheus cannot run (HTTP 400/422: fix the configuration)."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class MalformedAnswer(PrometheusError):
    """An answer to one query that is not of the shape Prometheus' HTTP API gives (not an
    object, no ``data``, a sample time ``"inf"``, labels as a list, JSON nested too deeply):
    a fault of that answer, not of the transport or the configuration, so the callers
    dead-letter it and go on with the other queries. ``field``: the query's setting and the
    path inside the answer; ``rule``, ``value``: cleaned of secrets and control characters."""

    def __init__(self, message: str, field: str, rule: str, value: Any) -> None:
        super().__init__(message)
        self.field, self.rule, self.value = field, rule, value


@dataclass(frozen=True)
class Refused:
    """A refused answer as its dead letter states it: the system, the tier, ``field`` and
    ``value`` (:class:`MalformedAnswer`), ``reason``: the rule and what the tier lost by it
    (how many windows were not made, or made without a field), ``request``: the query and
    the windows it was for."""

    system: str
    tier: str
    field: str
    reason: str
    value: Any
    request: str


class _Watchdog:
    """One daemon thread that ends each :class:`_Deadline` at its time (a thread per request
    would cost about 150 us each: a quarter of a local query's time)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[tuple[float, int, "_Deadline"]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, deadline: "_Deadline") -> None:
        with self._cv:
            heapq.heappush(self._heap, (deadline.at, next(self._order), deadline))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="prometheus-deadline",
                                                daemon=True)
                self._thread.start()
            self._cv.notify()

    def _run(self) -> None:
        with self._cv:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)       # finished in time
                if not self._heap:
                    self._cv.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                heapq.heappop(self._heap)[2].expire()


_WATCHDOG = _Watchdog()


class _Deadline:
    """The end of one request: at ``seconds`` from now the connection of every socket it
    opened is shut down, so a read blocked on a server that trickles bytes (or none) -- the
    TLS handshake, the headers, the body -- returns at once. A duplicate of each socket's
    descriptor is kept for that: TLS takes the socket object over, the connection stays."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.expired = False
        self.done = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        _WATCHDOG.add(self)

    def remaining(self) -> float:
        return max(self.at - time.monotonic(), 0.0)

    def passed(self) -> bool:
        return self.expired or self.remaining() == 0.0

    def connect(self, address: tuple[str, int], timeout: Any = None,
                source_address: Any = None) -> socket.socket:
        """``socket.create_connection`` within the time left (then ``timeout`` per read),
        its connection watched."""
        limit = max(self.remaining(), 0.001)
        sock = socket.create_connection(address, min(timeout or limit, limit), source_address)
        sock.settimeout(timeout)
        with self._lock:
            self._sockets.append(sock.dup())
            expired = self.expired
        if expired:
            self.expire()           # it passed while connecting
        return sock

    def expire(self) -> None:
        # under the lock: a duplicate is never closed (and its number reused) meanwhile
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass            # already closed by the other end: nothing to wake

    def cancel(self) -> None:
        with self._lock:
            self.done = True
            for sock in self._sockets:
                sock.close()        # the duplicates only; the connection is urllib's
            self._sockets = []


def _watched(base: type) -> type:
    """``base`` (an HTTP or HTTPS connection) opened within the time left of its request's
    :class:`_Deadline`, and shut down by it."""

    class Watched(base):                                    # type: ignore[misc, valid-type]
        def __init__(self, deadline: _Deadline, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._create_connection = deadline.connect

    Watched.__name__ = f"Watched{base.__name__}"
    return Watched


_WatchedHTTP = _watched(http.client.HTTPConnection)
_WatchedHTTPS = _watched(http.client.HTTPSConnection)


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(functools.partial(_WatchedHTTP, self._deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(functools.partial(_WatchedHTTPS, self._deadline), req,
                            context=self._context)


def _origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of ``url``, the port defaulted by the scheme (RFC 6454)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Redirects followed (at most urllib's 10) with the credentials sent only to the origin
    of the configured URL: the ``Authorization`` header is an unredirected header, added again
    to a redirected request only when it goes to that same scheme, host and port (as browsers
    and ``requests`` do; RFC 9110 section 15.4 leaves it to the client)."""

    def __init__(self, origin: tuple[str, str, int | None], authorization: str | None) -> None:
        super().__init__()
        self._origin = origin
        self._authorization = authorization

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and self._authorization and _origin(new.full_url) == self._origin:
            new.add_unredirected_header("Authorization", self._authorization)
        return new


class PrometheusClient:
    """``GET /api/v1/query_range`` against ``source.url``. Each request ends within
    ``source.deadline_s`` and reads at most ``source.max_response_mb`` of body; the bearer
    token goes only to the URL's origin and never into a message."""

    def __init__(self, source: PrometheusSource, env: Mapping[str, str] | None = None) -> None:
        self.source = source
        self.url = redact_url(source.url)
        self.headers = {"Accept": "application/json", **source.headers}
        try:
            token = secret(os.environ if env is None else env, "PERFCAST_PROMETHEUS_TOKEN")
        except ConfigError as exc:
            raise PrometheusError(str(exc)) from None
        self._secrets = [token] if token else []
        self._authorization: str | None = None
        if token:
            if not _TOKEN.fullmatch(token):     # the message must not show the token
                raise PrometheusError(
                    f"PERFCAST_PROMETHEUS_TOKEN: not a bearer token of {len(token)} "
                    f"characters: only letters, digits and -._~+/ followed by optional = are "
                    f"allowed (RFC 6750), no line break, space or control character")
            self._authorization = f"Bearer {token}"
        self.max_bytes = int(source.max_response_mb * (1 << 20))

    def __repr__(self) -> str:             # never the token
        return f"PrometheusClient({self.url!r})"

    def _clean(self, text: Any, limit: int = 300) -> str:
        """Text from the server or the network for a message: the secrets blanked, control
        characters escaped, at most ``limit`` characters."""
        text = str(text)
        for s in self._secrets:
            text = text.replace(s, "***")
        text = printable(text)
        return text if len(text) <= limit else text[:limit - 3] + "..."

    def malformed(self, err: AnswerError) -> MalformedAnswer:
        """``err`` as a :class:`MalformedAnswer`, its message and value cleaned."""
        value = err.value
        if value is ABSENT:
            value = None
        elif not isinstance(value, (bool, int, float)) or isinstance(value, int) \
                and abs(value) >= 2 ** 63:
            value = self._clean(value if isinstance(value, str) else repr(value), 300)
        return MalformedAnswer(self._clean(err, 500), err.field, self._clean(err.rule, 300),
                               value)

    def _read(self, resp: Any, what: str) -> bytearray:
        """The body, at most :attr:`max_bytes`: a larger one (by its ``Content-Length`` or as
        it arrives) is refused before it is parsed."""
        cap = self.max_bytes
        over = PrometheusError(
            f"{what}: {self.url} answered more than {self.source.max_response_mb:g} MiB "
            f"(prometheus.max_response_mb); lower max_windows_per_query or raise "
            f"max_response_mb")
        length = resp.headers.get("Content-Length")
        if length and length.strip().isdigit() and int(length) > cap:
            raise over
        body = bytearray()                  # grown in place: no second copy at the end
        while True:
            chunk = resp.read1(_CHUNK) if hasattr(resp, "read1") else resp.read(_CHUNK)
            if not chunk:
                return body
            if len(body) + len(chunk) > cap:
                raise over
            body += chunk

    def _get(self, url: str, what: str, query: str) -> bytearray:
        """The body of ``GET url`` (module rules: deadline, body cap, credentials)."""
        deadline = _Deadline(self.source.deadline_s)
        origin = _origin(self.source.url)
        opener = urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline),
                                             _Redirects(origin, self._authorization))
        request = urllib.request.Request(url, headers=self.headers)
        if self._authorization:
            request.add_unredirected_header("Authorization", self._authorization)
        try:
            with opener.open(request, timeout=self.source.timeout_s + 5) as resp:
                body = self._read(resp, what)
            if deadline.passed():           # the socket was shut: the body is cut short
                raise self._late(what)
            return body
        except urllib.error.HTTPError as exc:
            if deadline.passed():
                raise self._late(what) from None
            try:
                raw = exc.read(_CHUNK)
                detail = json.loads(raw).get("error", "")
            except (ValueError, AttributeError, OSError, RecursionError,
                    http.client.HTTPException):
                detail = ""
            raise PrometheusError(f"{what}: Prometheus answered HTTP {exc.code} "
                                  f"({self._clean(detail or exc.reason)}) to {query!r}",
                                  transient=exc.code >= 500 or exc.code == 429) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            if deadline.passed():
                raise self._late(what) from None
            reason = getattr(exc, "reason", None) or exc
            raise PrometheusError(f"{what}: cannot query {self.url} ({self._clean(reason)})",
                                  transient=True) from None
        finally:
            deadline.cancel()

    def _late(self, what: str) -> PrometheusError:
        return PrometheusError(
            f"{what}: {self.url} did not answer in full within {self.source.deadline_s:g} s "
            f"(prometheus.deadline_s)", transient=True)

    def query_range(self, query: str, start_ms: int, end_ms: int, step_ms: int,
                    what: str = "query") -> dict[str, Any]:
        """The ``data`` of a range query evaluated at ``start, start + step, ..., end``; a
        :class:`PrometheusError` names ``what`` and the field of an answer of another shape."""
        params = {"query": query, "start": f"{start_ms / 1000:.3f}",
                  "end": f"{end_ms / 1000:.3f}", "step": f"{step_ms / 1000:.3f}",
                  "timeout": f"{self.source.timeout_s:g}s"}
        url = f"{self.source.url}/api/v1/query_range?{urllib.parse.urlencode(params)}"
        return self.answer_data(self._get(url, what, query), what, query)

    def answer_data(self, raw: bytes | bytearray, what: str, query: str) -> Any:
        """The ``data`` of the answer ``raw`` (Prometheus' HTTP API envelope: ``status``,
        ``data``, or ``errorType`` and ``error``); :class:`MalformedAnswer` for an answer of
        another shape (JSON nested too deeply included), a transient :class:`PrometheusError`
        for a body that is not JSON at all (a proxy's error page)."""
        try:
            body = json.loads(raw)
        except RecursionError:
            raise self.malformed(AnswerError(what, "", f"{self.url} did not answer JSON "
                                                       f"(nested too deeply)", ABSENT)) from None
        except ValueError as exc:
            raise PrometheusError(f"{what}: {self.url} did not answer JSON "
                                  f"({self._clean(exc)})", transient=True) from None
        if not isinstance(body, dict):
            raise self.malformed(AnswerError(what, "", "the answer must be an object "
                                                       "(status, data)", body))
        if body.get("status") != "success":
            raise self.malformed(AnswerError(
                what, "status", f"{self._clean(body.get('errorType'), 80)}: "
                                f"{self._clean(body.get('error'))} (query {query!r})",
                body.get("status")))
        if "data" not in body:
            raise self.malformed(AnswerError(what, "data", "missing from a successful answer",
                                             ABSENT))
        return body["data"]


#: per query whose answer is refused, what its tier's windows lose: ``None``: they are not
#: made (the busy time, the completions, the cores); else the field they are made without
_LOSES = {"busy_seconds": None, "utilization": None, "completions": None, "cores": None,
          "time_sum": "response_time_s", "time_count": "response_time_s", "users": "users",
          "response_time_histogram": "response_time_quantiles_s",
          NATIVE_FIELD: "response_time_quantiles_s"}


def _tier_data(client: PrometheusClient, source: PrometheusSource, first_ms: int,
               last_ms: int) -> tuple[dict[str, TierData], dict[str, list[NativeSeries]],
                                      list[tuple[str, str, MalformedAnswer]]]:
    """Every tier's query results on the grid from ``first_ms - window`` (and
    :data:`~streams.sources.prometheus.LOOKBACK_WINDOWS` windows before it) to ``last_ms``;
    ``concurrency`` queries in flight at a time. An answer of another shape is no series
    (as a series missing from an answer is) and is returned as ``(tier, query, error)``.
    The native histograms' answers come apart, by tier."""
    window = promql_duration(source.window_s)
    jobs = [(spec.name, name, query.replace("{window}", window))
            for spec in source.tiers for name, query in spec.queries().items()]

    def run(job: tuple[str, str, str]) -> list | MalformedAnswer:
        tier, name, query = job
        what = f"tiers.{tier}.{name}"
        try:
            data = client.query_range(query, first_ms - (1 + LOOKBACK_WINDOWS) * source.window_ms,
                                      last_ms, source.window_ms, what)
            return parse_native_result(data, what) if name == NATIVE_FIELD else \
                parse_result(data, what)
        except MalformedAnswer as exc:
            return exc
        except AnswerError as exc:
            return client.malformed(exc)

    if source.concurrency > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(min(source.concurrency, len(jobs))) as pool:
            answers = list(pool.map(run, jobs))
    else:
        answers = [run(job) for job in jobs]
    results: dict[str, dict[str, Any]] = {spec.name: {} for spec in source.tiers}
    refused = []
    for (tier, name, _), series in zip(jobs, answers):
        if isinstance(series, MalformedAnswer):
            refused.append((tier, name, series))
            series = []
        results[tier][name] = series
    natives = {tier: got[NATIVE_FIELD] for tier, got in results.items() if NATIVE_FIELD in got}
    return {tier: TierData(**{k: got.get(k) for k in QUERY_FIELDS
                              if k in got or k == "completions"},
                           pools={k: v for k, v in got.items()
                                  if k not in QUERY_FIELDS and k != NATIVE_FIELD} or None)
            for tier, got in results.items()}, natives, refused


def _batches(ends: list[int], size: int) -> Iterator[list[int]]:
    for i in range(0, len(ends), size):
        yield ends[i:i + size]


def _refusals(source: PrometheusSource, refused: list[tuple[str, str, MalformedAnswer]],
              ends: list[int], records: list[dict[str, Any]], gaps: list[Gap],
              ) -> tuple[list[Refused], list[Gap]]:
    """The dead letters' terms of the refused answers of a batch of window ``ends``, each
    stating what its tier lost; the tier's gaps that a refused answer caused are given its
    name as their reason (they are counted in its dead letter)."""
    out = []
    cause: dict[str, str] = {}
    for tier, name, err in refused:
        loses = _LOSES.get(name, name)             # a pool's query: its own field
        span = f"ending {format_time(ends[0] / 1000)} .. {format_time(ends[-1] / 1000)}"
        if loses is None:
            lost = sum(1 for g in gaps if g.tier == tier and not g.made)
            effect = f"{lost} of the tier's {len(ends)} windows {span} not made"
            cause.setdefault(tier, f"answer to tiers.{tier}.{name} refused: a dead letter")
        else:
            made = sum(1 for r in records if r["tier"] == tier)
            effect = f"{made} of the tier's windows {span} made without {loses}"
        query = next(t for t in source.tiers if t.name == tier).queries()[name]
        out.append(Refused(system=source.system, tier=tier, field=err.field,
                           reason=f"{err.rule}; {effect}", value=err.value,
                           request=f"query_range {query!r} {span}"))
    gaps = [Gap(g.tier, g.end_ms, cause[g.tier]) if g.tier in cause and not g.made else g
            for g in gaps]
    return out, gaps


def iter_windows(source: PrometheusSource, start_s: float, end_s: float,
                 client: PrometheusClient | None = None,
                 on_gaps: Callable[[list[Gap]], None] | None = None,
                 on_refused: Callable[[list[Refused]], None] | None = None,
                 ) -> Iterator[tuple[float, list[dict[str, Any]]]]:
    """The records of the windows ending in ``(start_s, end_s]``, in batches of at most
    ``max_windows_per_query`` window ends: ``(last end of the batch, its records ordered by
    end, then tier)``. An answer of another shape (:class:`MalformedAnswer`) is given to
    ``on_refused`` before its batch is yielded (without ``on_refused`` it is raised): the
    other queries' windows are made all the same."""
    client = client or PrometheusClient(source)
    ends = window_ends(start_s, end_s, source.window_s, source.offset_s)
    for batch in _batches(ends, source.max_windows_per_query):
        data, natives, refused = _tier_data(client, source, batch[0], batch[-1])
        if refused and on_refused is None:
            raise refused[0][2]
        try:
            records, gaps = system_windows(source, data, batch, history=True)
        except ValueError as exc:
            raise PrometheusError(str(exc)) from None
        if natives:
            gaps += add_native_quantiles(source, natives, records)
        if refused:
            answers, gaps = _refusals(source, refused, batch, records, gaps)
            on_refused(answers)                                 # type: ignore[misc]
        if gaps and on_gaps is not None:
            on_gaps(gaps)
        yield batch[-1] / 1000.0, records


@dataclass
class Fetched:
    """The windows of a range, the gaps, and the answers refused."""

    records: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    window_ends: int = 0
    refused: list[Refused] = field(default_factory=list)


def fetch_windows(source: PrometheusSource, start_s: float, end_s: float,
                  client: PrometheusClient | None = None) -> Fetched:
    """All records of the windows ending in ``(start_s, end_s]`` (a backtest's input), and
    the answers refused (each a dead letter of the run)."""
    out = Fetched(window_ends=len(window_ends(start_s, end_s, source.window_s,
                                              source.offset_s)))
    for _, records in iter_windows(source, start_s, end_s, client, out.gaps.extend,
                                   out.refused.extend):
        out.records += records
    return out


def summarize_gaps(gaps: list[Gap]) -> str:
    """``"db: 3 (tier not reporting at the window's end)"``, per tier and reason."""
    counts: dict[tuple[str, str], list[int]] = {}
    for g in gaps:
        counts.setdefault((g.tier, g.reason), []).append(g.end_ms)
    return "; ".join(f"{tier}: {len(ends)} ({reason}, from {format_time(min(ends) / 1000)})"
                     for (tier, reason), ends in sorted(counts.items()))
