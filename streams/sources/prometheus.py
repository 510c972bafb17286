"""The Prometheus source: its configuration and the mapping from query results to windows.

Per tier, the configuration gives PromQL for (docs/prometheus.md has ready mappings):

- the busy time: ``busy_seconds``, a counter of busy core-seconds (``process_cpu_seconds_total``,
  ``node_cpu_seconds_total{mode!="idle"}``), or ``utilization``, a gauge of the busy fraction
  already averaged over cores;
- ``cores``: a number, or PromQL giving the tier's cores (the series are summed);
- ``completions``: counters of completed requests, one series per class (the class is the value
  of ``class_label``, e.g. ``handler``, ``uri``, ``http_route``);
- optionally ``time_sum`` (and ``time_count``): counters of seconds spent at the tier per class,
  e.g. a histogram's ``_sum`` and ``_count``: the window's mean ``response_time_s`` per class is
  ``increase(sum) / increase(count)`` (``time_count`` defaults to the completions);
- optionally ``users``: a gauge of active sessions (the series are summed);
- optionally ``response_time_histogram``: the entry tier's latency histogram, its cumulative
  ``_bucket`` series with ``le`` (``http_server_requests_seconds_bucket``), per class: the
  window's ``response_time_quantiles_s`` at ``quantiles`` (default p50, p90, p95, p99) by
  ``histogram_quantile``'s rule (rule 7 of :mod:`streams.sources.window_rules`);
- or ``response_time_native_histogram``: PromQL giving per class the window's native latency
  histogram (``sum by (handler) (rate(m[{window}]))``): the quantiles by Prometheus' rule for
  native histograms (:mod:`streams.sources.prometheus_native`).
- optionally ``[tiers.<t>.pools.<pool>]``: PromQL gauges of a pool's ``size``, ``busy``
  tokens, ``waiting`` requests and ``acquire_s`` (:mod:`streams.core.pool_settings`; rule 8).

Every query is evaluated by Prometheus (``/api/v1/query_range``) on one grid of window ends
``offset_s + k window_s``, the same for every tier: so the tiers' windows are aligned whatever
their targets' scrape offsets. ``{window}`` in a query is replaced by the window as a PromQL
duration (``5s``), for queries such as ``increase(x[{window}])`` (``counters = false``).

The window rules -- counters, resets, gaps, stale series, born series -- are
:mod:`streams.sources.window_rules` (shared with the Kafka formats); the names are re-exported
here.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from streams.core.config import ConfigError
from streams.core.pool_settings import pool_table
from streams.core.records import valid_name
from streams.core.source_settings import (WindowGrid, header_settings, http_url_setting,
                                          number_setting, quantiles_setting, string_setting,
                                          tier_table, window_setting)
from streams.sources.window_rules import (DEFAULT_QUANTILES, QUERY_FIELDS, Gap, Series, TierData,
                                          TierSpec, counter_increase, tier_windows)

__all__ = ["LOOKBACK_WINDOWS", "TierSpec", "PrometheusSource", "load_source", "Series", "Gap", "TierData",
           "AnswerError", "parse_result", "counter_increase", "tier_windows", "window_ends",
           "promql_duration", "QUERY_FIELDS"]


@dataclass(frozen=True)
class PrometheusSource(WindowGrid):
    """Where to read, which system, the window grid, and the tiers in visit order."""

    url: str
    system: str
    tiers: tuple[TierSpec, ...]
    window_s: float = 5.0
    #: window ends at ``offset_s + k window_s`` (epoch seconds)
    offset_s: float = 0.0
    #: live: a window is read this long after its end (scrape interval + ingestion delay)
    lag_s: float = 10.0
    #: Prometheus' own evaluation timeout of a query (sent as ``timeout``), and the longest
    #: wait for a connection or for the next bytes of an answer
    timeout_s: float = 30.0
    #: the whole request -- connecting, the answer's headers, its body -- ends within this
    #: many seconds, however slowly the bytes arrive (default ``timeout_s + 30``)
    deadline_s: float = 60.0
    #: largest answer body read, MiB; a larger one is refused before it is parsed
    max_response_mb: float = 64.0
    #: windows per ``query_range`` request (Prometheus refuses more than 11,000 points)
    max_windows_per_query: int = 1000
    missing_class: str = "other"
    #: queries in flight at a time (a remote Prometheus' round trips overlap)
    concurrency: int = 4
    #: HTTP headers sent with every query (e.g. ``X-Scope-OrgID`` of Mimir/Cortex); a bearer
    #: token comes only from ``PERFCAST_PROMETHEUS_TOKEN`` (or ``..._FILE``)
    headers: Mapping[str, str] = field(default_factory=dict)


_SOURCE_KEYS = {"url", "system", "window_s", "offset_s", "lag_s", "timeout_s", "deadline_s",
                "max_response_mb", "concurrency", "max_windows_per_query", "missing_class",
                "class_label", "counters", "headers"}
#: the largest ``max_response_mb``: 4 GiB (parsed, an answer takes several times its size)
MAX_RESPONSE_MB = 4096.0
_TIER_KEYS = set(QUERY_FIELDS) | {"class_label", "counters", "quantiles", "pools",
                                   "response_time_native_histogram"}


def _promql(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: must be PromQL (a non-empty string), got {value!r}")
    return value


def _tier(name: str, raw: Any, class_label: str, counters: bool) -> TierSpec:
    where = f"tiers.{name}"
    raw = tier_table(name, raw, where, _TIER_KEYS, "queries")
    queries = {k: string_setting(raw, k, where) for k in QUERY_FIELDS if k != "cores"}
    if queries["completions"] is None:
        raise ConfigError(f"{where}.completions: required (PromQL of the per-class completion "
                          f"counters)")
    if (queries["busy_seconds"] is None) == (queries["utilization"] is None):
        raise ConfigError(f"{where}: exactly one of busy_seconds (a counter of busy "
                          f"core-seconds) and utilization (a busy-fraction gauge) is needed, "
                          f"got {'both' if queries['busy_seconds'] else 'neither'}")
    cores: Any = raw.get("cores", 1)
    if isinstance(cores, str):
        cores = string_setting(raw, "cores", where)
    elif isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= 4096:
        raise ConfigError(f"{where}.cores: must be a whole number within [1, 4096] or PromQL, "
                          f"got {cores!r}")
    label = string_setting(raw, "class_label", where, class_label)
    own_counters = raw.get("counters", counters)
    if not isinstance(own_counters, bool):
        raise ConfigError(f"{where}.counters: must be true or false, got {own_counters!r}")
    native = string_setting(raw, "response_time_native_histogram", where)
    if native is not None and "{window}" not in native:
        raise ConfigError(f"{where}.response_time_native_histogram: must give the window's "
                          f"histogram, with {{window}} in a range, e.g. 'sum by ({label}) "
                          f"(rate(http_request_duration_seconds[{{window}}]))' (a histogram "
                          f"since the process started is not the window's), got {native!r}")
    if native is not None and queries["response_time_histogram"] is not None:
        raise ConfigError(f"{where}: at most one of response_time_histogram (classic _bucket "
                          f"series) and response_time_native_histogram, got both")
    return TierSpec(name=name, cores=cores, class_label=label, counters=own_counters,
                    quantiles=quantiles_setting(raw, where, DEFAULT_QUANTILES),
                    response_time_native_histogram=native,
                    pools=pool_table(raw.get("pools"), f"{where}.pools", _promql), **queries)


def source_from_mapping(raw: Mapping[str, Any], env: Mapping[str, str] | None = None,
                        ) -> PrometheusSource:
    """A :class:`PrometheusSource` from the parsed file (``[prometheus]`` and ``[tiers.*]``);
    :class:`ConfigError` names the key and the value. ``PERFCAST_PROMETHEUS_URL`` in ``env``
    overrides ``url``."""
    unknown = sorted(set(raw) - {"prometheus", "tiers"})
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown section (known: prometheus, tiers)")
    src = raw.get("prometheus", {})
    if not isinstance(src, Mapping):
        raise ConfigError(f"prometheus: must be a table, got {src!r}")
    bad = sorted(set(src) - _SOURCE_KEYS)
    if bad:
        raise ConfigError(f"prometheus.{bad[0]}: unknown setting (known: {sorted(_SOURCE_KEYS)})")
    from_env = (env or {}).get("PERFCAST_PROMETHEUS_URL")
    url = http_url_setting(from_env, "PERFCAST_PROMETHEUS_URL") if from_env else \
        http_url_setting(src.get("url"), "prometheus.url", " (or set PERFCAST_PROMETHEUS_URL)")
    system = string_setting(src, "system", "prometheus")
    if system is None or not valid_name(system):
        raise ConfigError(f"prometheus.system: must be a valid system name, got {system!r}")
    window_s = window_setting(src, "prometheus")
    headers = header_settings(src.get("headers", {}), "prometheus.headers")
    timeout_s = number_setting(src, "timeout_s", "prometheus", 30.0, 0.0, 600.0)
    deadline_s = number_setting(src, "deadline_s", "prometheus", timeout_s + 30.0, 0.0,
                                3600.0)
    if deadline_s < timeout_s:
        raise ConfigError(f"prometheus.deadline_s: must be at least timeout_s ({timeout_s:g}: "
                          f"Prometheus may take that long to evaluate a query), "
                          f"got {deadline_s:g}")
    max_windows = src.get("max_windows_per_query", 1000)
    if isinstance(max_windows, bool) or not isinstance(max_windows, int) \
            or not 1 <= max_windows <= 10_000:
        raise ConfigError(f"prometheus.max_windows_per_query: must be an integer within "
                          f"[1, 10000], got {max_windows!r}")
    concurrency = src.get("concurrency", 4)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) \
            or not 1 <= concurrency <= 64:
        raise ConfigError(f"prometheus.concurrency: must be an integer within [1, 64], "
                          f"got {concurrency!r}")
    missing_class = string_setting(src, "missing_class", "prometheus", "other")
    if not valid_name(missing_class):
        raise ConfigError(f"prometheus.missing_class: must be a valid class name, "
                          f"got {missing_class!r}")
    class_label = string_setting(src, "class_label", "prometheus", "handler")
    counters = src.get("counters", True)
    if not isinstance(counters, bool):
        raise ConfigError(f"prometheus.counters: must be true or false, got {counters!r}")
    tiers_raw = raw.get("tiers")
    if not isinstance(tiers_raw, Mapping) or not tiers_raw:
        raise ConfigError("tiers: at least one [tiers.NAME] table of queries is needed, "
                          f"got {tiers_raw!r}")
    tiers = tuple(_tier(name, body, class_label, counters) for name, body in tiers_raw.items())
    return PrometheusSource(
        url=url, system=system, tiers=tiers, window_s=window_s,
        offset_s=number_setting(src, "offset_s", "prometheus", 0.0, 0.0, 86_400.0, True),
        lag_s=number_setting(src, "lag_s", "prometheus", 10.0, 0.0, 3600.0, True),
        timeout_s=timeout_s, deadline_s=deadline_s,
        max_response_mb=number_setting(src, "max_response_mb", "prometheus", 64.0, 0.0,
                                       MAX_RESPONSE_MB),
        max_windows_per_query=max_windows, missing_class=missing_class, concurrency=concurrency,
        headers=headers)


def load_source(path: str | Path, env: Mapping[str, str] | None = None) -> PrometheusSource:
    """Read the source's configuration: TOML, or JSON when the name ends in ``.json``."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"prom-config: cannot read {str(path)!r} ({exc.strerror})") from None
    try:
        raw = json.loads(data) if str(path).endswith(".json") else tomllib.loads(data.decode())
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        kind = "JSON" if str(path).endswith(".json") else "TOML"
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise ConfigError(f"prom-config: {str(path)!r} is not valid {kind} ({why})") from None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"prom-config: {str(path)!r} must hold a table, got {type(raw).__name__}")
    return source_from_mapping(raw, os.environ if env is None else env)


def promql_duration(seconds: float) -> str:
    """``5.0`` -> ``"5s"``, ``0.5`` -> ``"500ms"`` (PromQL range selectors)."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def window_ends(start_s: float, end_s: float, window_s: float, offset_s: float = 0.0,
                ) -> list[int]:
    """Window ends in ``(start_s, end_s]`` on the grid ``offset_s + k window_s``, in
    milliseconds (exact integers: the grid is compared, never rounded twice)."""
    w = round(window_s * 1000)
    off = round(offset_s * 1000) % w
    lo, hi = math.floor(start_s * 1000), math.floor(end_s * 1000)
    first = off + ((lo - off) // w + 1) * w
    return list(range(first, hi + 1, w))


# ----------------------------------------------------------------------------- query results
#: the sample times a query answer may hold, epoch seconds (the window records' range, up to
#: year 5138)
MAX_SAMPLE_TIME = 1e11


def _shown(value: Any) -> str:
    """A value of an answer in an error message: its JSON-ish ``repr``, at most 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class AnswerError(ValueError):
    """An answer of another shape than Prometheus' HTTP API gives: the query's setting
    (``what``), the ``path`` inside the answer (``data.result[3].values[0]``), the ``rule`` it
    breaks and the offending ``value`` (:data:`ABSENT`: none); the message is
    ``what: path: rule, got value``."""

    def __init__(self, what: str, path: str, rule: str, value: Any = None) -> None:
        self.what, self.path, self.rule, self.value = what, path, rule, value
        got = "" if value is ABSENT else f", got {_shown(value)}"
        super().__init__(f"{what}: {path + ': ' if path else ''}{rule}{got}")

    @property
    def field(self) -> str:
        """The query's setting and the path inside its answer, one dotted name."""
        return f"{self.what}.{self.path}" if self.path else self.what


#: an :class:`AnswerError` without an offending value (a key missing, a body not parsed)
ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()


def _sample(point: Any, what: str, path: str) -> tuple[int, float | None]:
    """``[time, "value"]`` as ``(ms, value)``; ``value`` ``None`` when not finite (a
    staleness marker, ``NaN``, or ``+Inf``). An :class:`AnswerError` names ``path``."""
    if not isinstance(point, (list, tuple)) or len(point) != 2:
        raise AnswerError(what, path, "a sample must be [time, \"value\"]", point)
    t, text = point
    if isinstance(t, bool) or not isinstance(t, (int, float)) \
            or not 0 <= t <= MAX_SAMPLE_TIME:
        raise AnswerError(what, f"{path}[0]", f"the time must be epoch seconds within "
                                              f"[0, {MAX_SAMPLE_TIME:g}]", t)
    number = AnswerError(what, f"{path}[1]", "the value must be a number as a string", text)
    if isinstance(text, bool) or not isinstance(text, (str, int, float)) \
            or (isinstance(text, str) and len(text) > 64):
        raise number
    try:
        v = float(text)
    except (ValueError, OverflowError):
        raise number from None
    return round(t * 1000), (v if math.isfinite(v) else None)


def series_labels(metric: Any, what: str, path: str) -> dict[str, str]:
    """A series' ``metric``: an object of label = "value" (``null``: no labels)."""
    if metric is None:
        return {}
    if not isinstance(metric, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
        raise AnswerError(what, path, "must be an object of label = \"value\"", metric)
    return dict(metric)


def parse_result(data: Any, what: str = "query") -> list[Series]:
    """The ``data`` of a ``query_range`` (matrix) or ``query`` (vector, scalar) answer as
    series, timestamps in milliseconds (the answer format of Prometheus' HTTP API). Any other
    shape is an :class:`AnswerError` naming ``what`` and the field (``data.result[3].values[0]``)
    and the value, never a silent skip."""
    if not isinstance(data, Mapping):
        raise AnswerError(what, "data", "must be an object", data)
    kind, result = data.get("resultType"), data.get("result")
    if kind not in ("matrix", "vector", "scalar"):
        raise AnswerError(what, "data.resultType", "must be matrix, vector or scalar", kind)
    if kind == "scalar":
        result = [{"metric": {}, "value": result}]
    elif not isinstance(result, list):
        raise AnswerError(what, "data.result", "must be a list of series", result)
    out = []
    for i, item in enumerate(result):
        where = f"data.result[{i}]"
        if not isinstance(item, Mapping):
            raise AnswerError(what, where, "must be an object (metric, values)", item)
        labels = series_labels(item.get("metric"), what, f"{where}.metric")
        if "values" in item:
            points = item["values"]
            if not isinstance(points, list):
                raise AnswerError(what, f"{where}.values", "must be a list of samples", points)
            field_name = "values"
        else:
            points, field_name = [item.get("value")], "value"
        values = {}
        for j, point in enumerate(points):
            ms, v = _sample(point, what, f"{where}.{field_name}" +
                            (f"[{j}]" if field_name == "values" else ""))
            if v is not None:
                values[ms] = v
        out.append(Series(labels=labels, values=values))
    return out


#: windows of history fetched before the first window of a range: without them a counter stale
#: at the first window's start (a failed scrape) cannot be told from a newborn one (the window
#: rules' rule 4); a minute at 5-s windows, a few points per query
LOOKBACK_WINDOWS = 12


def system_windows(source: PrometheusSource, data: Mapping[str, TierData],
                   ends_ms: Sequence[int], history: bool = False,
                   ) -> tuple[list[dict[str, Any]], list[Gap]]:
    """Every tier's records on the grid ``ends_ms``, ordered by end, then by tier (the
    configured visit order), and the gaps; ``history``: the data reach
    :data:`LOOKBACK_WINDOWS` windows before the first (the window rules' rule 4)."""
    order = {t.name: i for i, t in enumerate(source.tiers)}
    records, gaps = [], []
    for spec in source.tiers:
        r, g = tier_windows(spec, data[spec.name], source.system, ends_ms, source.window_ms,
                            source.missing_class, history=history)
        records += r
        gaps += g
    records.sort(key=lambda r: (r["end"], order[r["tier"]]))
    return records, gaps
