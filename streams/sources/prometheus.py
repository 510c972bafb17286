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
- optionally ``users``: a gauge of active sessions (the series are summed).

Every query is evaluated by Prometheus (``/api/v1/query_range``) on one grid of window ends
``offset_s + k window_s``, the same for every tier: so the tiers' windows are aligned whatever
their targets' scrape offsets. ``{window}`` in a query is replaced by the window as a PromQL
duration (``5s``), for queries such as ``increase(x[{window}])`` (``counters = false``).

**The window rules** (:func:`tier_windows`, pure; property-tested against simulated scrapes in
``tests/test_prometheus_mapping.py``, and against a real Prometheus in
``tests/test_prometheus_source.py``):

1. A counter's increase over a window is ``v(end) - v(start)`` for each series (a series is a
   label set: every instance, every status code), summed per class: Prometheus' "rate, then
   sum", so one instance restarting does not upset the others. A value below the previous one
   is a counter reset: the increase is the new value (the counter restarted from 0).
2. ``v(t)`` is the series' latest sample at or before ``t`` (Prometheus' instant lookup, 5 min
   back by default); ``NaN``/``±Inf`` values count as no value, and a series that went stale
   (its target stopped: Prometheus writes a staleness marker) has none.
3. A tier *reports* at ``t`` when some series of its busy query has a value there. A window is
   made only when its tier reports at its start and its end (with ``counters = false`` and a
   ``utilization`` gauge: at its end); otherwise it is a gap (:class:`Gap`, counted and
   logged), never a guess. So a tier that stops reporting simply has no windows until it
   reports again, while the other tiers go on; the first window after it resumes is a gap
   (no start value).
4. A class series present at a window's end but not at its start, while the tier reported at
   the start, was born in the window (client libraries create a class's counter at its first
   request): its increase is its value. A series gone at the end contributes nothing.
5. Utilization from ``busy_seconds`` is ``increase / (window_s * cores)``. The samples at the
   two ends were scraped up to a scrape interval apart from the grid points, so at saturation
   it can come out a little above 1: it is passed on as it is, and the pipeline clamps a value
   within ``utilization_tolerance`` to 1 and flags it, and dead-letters one beyond it naming the
   tolerance (docs/pipeline.md).
6. A window with no completions series at its end, or without a ``cores`` value of at least 1,
   is a gap (the contract needs a class and cores); a class with zero increase is kept as 0.

Classes with no ``class_label`` label go to class ``missing_class`` (default ``"other"``).
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from streams.config import ConfigError
from streams.records import MAX_WINDOW_S, valid_name

__all__ = ["TierSpec", "PrometheusSource", "load_source", "Series", "Gap", "TierData",
           "parse_result", "counter_increase", "tier_windows", "window_ends", "promql_duration",
           "QUERY_FIELDS"]

#: the per-tier settings that are PromQL queries
QUERY_FIELDS = ("busy_seconds", "utilization", "cores", "completions", "time_sum",
                "time_count", "users")


@dataclass(frozen=True)
class TierSpec:
    """The PromQL of one tier (module docstring)."""

    name: str
    completions: str
    busy_seconds: str | None = None
    utilization: str | None = None
    #: a whole number, or PromQL
    cores: int | str = 1
    time_sum: str | None = None
    time_count: str | None = None
    users: str | None = None
    class_label: str = "handler"
    #: true: ``busy_seconds``, ``completions``, ``time_*`` are cumulative counters, differenced
    #: here; false: they already give the window's amount (``increase(x[{window}])``)
    counters: bool = True

    def queries(self) -> dict[str, str]:
        """The tier's queries by field (``cores`` only when it is PromQL)."""
        out = {f: getattr(self, f) for f in QUERY_FIELDS if isinstance(getattr(self, f), str)}
        return out

    @property
    def needs_start(self) -> bool:
        """A window needs its start's values (counters are differenced)."""
        return self.counters or self.utilization is None


@dataclass(frozen=True)
class PrometheusSource:
    """Where to read, which system, the window grid, and the tiers in visit order."""

    url: str
    system: str
    tiers: tuple[TierSpec, ...]
    window_s: float = 5.0
    #: window ends at ``offset_s + k window_s`` (epoch seconds)
    offset_s: float = 0.0
    #: live: a window is read this long after its end (scrape interval + ingestion delay)
    lag_s: float = 10.0
    timeout_s: float = 30.0
    #: windows per ``query_range`` request (Prometheus refuses more than 11,000 points)
    max_windows_per_query: int = 1000
    missing_class: str = "other"
    #: queries in flight at a time (a remote Prometheus' round trips overlap)
    concurrency: int = 4
    #: HTTP headers sent with every query (e.g. ``X-Scope-OrgID`` of Mimir/Cortex); a bearer
    #: token comes only from ``PERFCAST_PROMETHEUS_TOKEN`` (or ``..._FILE``)
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def window_ms(self) -> int:
        return round(self.window_s * 1000)

    @property
    def offset_ms(self) -> int:
        return round(self.offset_s * 1000) % self.window_ms


_SOURCE_KEYS = {"url", "system", "window_s", "offset_s", "lag_s", "timeout_s", "concurrency",
                "max_windows_per_query", "missing_class", "class_label", "counters", "headers"}
_TIER_KEYS = set(QUERY_FIELDS) | {"class_label", "counters"}


def _number(raw: Mapping[str, Any], key: str, where: str, default: float, low: float,
            high: float, low_allowed: bool = False) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            (value >= low if low_allowed else value > low) and value <= high):
        bracket = "[" if low_allowed else "("
        raise ConfigError(f"{where}.{key}: must be a number within {bracket}{low:g}, {high:g}], "
                          f"got {value!r}")
    return float(value)


def _string(raw: Mapping[str, Any], key: str, where: str, default: str | None = None,
            ) -> str | None:
    value = raw.get(key, default)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"{where}.{key}: must be a non-empty string, got {value!r}")
    return value


def _tier(name: str, raw: Any, class_label: str, counters: bool) -> TierSpec:
    where = f"tiers.{name}"
    if not valid_name(name):
        raise ConfigError(f"{where}: not a valid tier name (printable, at most 200 characters)")
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a table of queries, got {raw!r}")
    unknown = sorted(set(raw) - _TIER_KEYS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown setting (known: {sorted(_TIER_KEYS)})")
    queries = {k: _string(raw, k, where) for k in QUERY_FIELDS if k != "cores"}
    if queries["completions"] is None:
        raise ConfigError(f"{where}.completions: required (PromQL of the per-class completion "
                          f"counters)")
    if (queries["busy_seconds"] is None) == (queries["utilization"] is None):
        raise ConfigError(f"{where}: exactly one of busy_seconds (a counter of busy "
                          f"core-seconds) and utilization (a busy-fraction gauge) is needed, "
                          f"got {'both' if queries['busy_seconds'] else 'neither'}")
    cores: Any = raw.get("cores", 1)
    if isinstance(cores, str):
        cores = _string(raw, "cores", where)
    elif isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= 4096:
        raise ConfigError(f"{where}.cores: must be a whole number within [1, 4096] or PromQL, "
                          f"got {cores!r}")
    label = _string(raw, "class_label", where, class_label)
    own_counters = raw.get("counters", counters)
    if not isinstance(own_counters, bool):
        raise ConfigError(f"{where}.counters: must be true or false, got {own_counters!r}")
    return TierSpec(name=name, cores=cores, class_label=label, counters=own_counters,
                    **queries)


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
    url = (env or {}).get("PERFCAST_PROMETHEUS_URL") or _string(src, "url", "prometheus")
    if not url or not url.startswith(("http://", "https://")):
        raise ConfigError(f"prometheus.url: must be an http(s) URL (or set "
                          f"PERFCAST_PROMETHEUS_URL), got {url!r}")
    system = _string(src, "system", "prometheus")
    if system is None or not valid_name(system):
        raise ConfigError(f"prometheus.system: must be a valid system name, got {system!r}")
    window_s = _number(src, "window_s", "prometheus", 5.0, 0.0, MAX_WINDOW_S)
    if abs(window_s * 1000 - round(window_s * 1000)) > 1e-6 or round(window_s * 1000) < 1:
        raise ConfigError(f"prometheus.window_s: must be whole milliseconds (Prometheus' "
                          f"resolution), got {window_s!r}")
    headers = src.get("headers", {})
    if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise ConfigError(f"prometheus.headers: must be a table of name = \"value\", "
                          f"got {headers!r}")
    if any(k.lower() == "authorization" for k in headers):
        raise ConfigError("prometheus.headers.Authorization: secrets come from the environment "
                          "(PERFCAST_PROMETHEUS_TOKEN or PERFCAST_PROMETHEUS_TOKEN_FILE)")
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
    missing_class = _string(src, "missing_class", "prometheus", "other")
    if not valid_name(missing_class):
        raise ConfigError(f"prometheus.missing_class: must be a valid class name, "
                          f"got {missing_class!r}")
    class_label = _string(src, "class_label", "prometheus", "handler")
    counters = src.get("counters", True)
    if not isinstance(counters, bool):
        raise ConfigError(f"prometheus.counters: must be true or false, got {counters!r}")
    tiers_raw = raw.get("tiers")
    if not isinstance(tiers_raw, Mapping) or not tiers_raw:
        raise ConfigError("tiers: at least one [tiers.NAME] table of queries is needed, "
                          f"got {tiers_raw!r}")
    tiers = tuple(_tier(name, body, class_label, counters) for name, body in tiers_raw.items())
    return PrometheusSource(
        url=url.rstrip("/"), system=system, tiers=tiers, window_s=window_s,
        offset_s=_number(src, "offset_s", "prometheus", 0.0, 0.0, 86_400.0, True),
        lag_s=_number(src, "lag_s", "prometheus", 10.0, 0.0, 3600.0, True),
        timeout_s=_number(src, "timeout_s", "prometheus", 30.0, 0.0, 600.0),
        max_windows_per_query=max_windows, missing_class=missing_class, concurrency=concurrency,
        headers=dict(headers))


def load_source(path: str | Path, env: Mapping[str, str] | None = None) -> PrometheusSource:
    """Read the source's configuration: TOML, or JSON when the name ends in ``.json``."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"prom-config: cannot read {str(path)!r} ({exc.strerror})") from None
    try:
        raw = json.loads(data) if str(path).endswith(".json") else tomllib.loads(data.decode())
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "JSON" if str(path).endswith(".json") else "TOML"
        raise ConfigError(f"prom-config: {str(path)!r} is not valid {kind} ({exc})") from None
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
@dataclass(frozen=True)
class Series:
    """One series of a query result: its labels and its values by grid time (ms); ``NaN`` and
    infinite values are left out (rule 2)."""

    labels: Mapping[str, str]
    values: Mapping[int, float]


def _value(text: Any) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def parse_result(data: Mapping[str, Any], what: str = "query") -> list[Series]:
    """The ``data`` of a ``query_range`` (matrix) or ``query`` (vector) answer as series,
    timestamps in milliseconds. Anything else is a :class:`ValueError` naming ``what``."""
    kind = data.get("resultType") if isinstance(data, Mapping) else None
    result = data.get("result") if isinstance(data, Mapping) else None
    if kind not in ("matrix", "vector", "scalar") or result is None:
        raise ValueError(f"{what}: expected a matrix or vector result, got {str(data)[:200]}")
    if kind == "scalar":
        result = [{"metric": {}, "value": result}]
    out = []
    for item in result:
        points = item.get("values") if "values" in item else [item.get("value")]
        values = {}
        for point in points or ():
            if not isinstance(point, (list, tuple)) or len(point) != 2:
                raise ValueError(f"{what}: a sample must be [time, \"value\"], got {point!r}")
            v = _value(point[1])
            if v is not None:
                values[round(float(point[0]) * 1000)] = v
        out.append(Series(labels=dict(item.get("metric") or {}), values=values))
    return out


@dataclass
class TierData:
    """The results of one tier's queries over a grid (fields as in :class:`TierSpec`;
    ``None``: not configured)."""

    completions: list[Series]
    busy_seconds: list[Series] | None = None
    utilization: list[Series] | None = None
    cores: list[Series] | None = None
    time_sum: list[Series] | None = None
    time_count: list[Series] | None = None
    users: list[Series] | None = None


@dataclass(frozen=True)
class Gap:
    """A window not made (rule 3/6): the tier, the window's end (ms) and why."""

    tier: str
    end_ms: int
    reason: str


# ----------------------------------------------------------------------------- the mapping
def counter_increase(start: float | None, end: float | None, born: bool) -> float | None:
    """A counter's increase between two instants (rules 1, 2, 4): ``None`` when it cannot be
    told (no value at the end; no value at the start of a series that was not born)."""
    if end is None:
        return None
    if start is None:
        return end if born else None
    return end - start if end >= start else end


def _key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def _by_class(series: Iterable[Series], label: str, missing: str) -> dict[str, list[Series]]:
    out: dict[str, list[Series]] = {}
    for s in series:
        cls = s.labels.get(label) or missing
        out.setdefault(cls, []).append(s)
    return out


def _sum_at(series: Sequence[Series], t: int) -> float | None:
    vals = [s.values[t] for s in series if t in s.values]
    return math.fsum(vals) if vals else None


def _increase(series: Sequence[Series], start: int, end: int, counters: bool,
              reported_at_start: bool) -> float | None:
    """Summed increase of ``series`` over ``(start, end]``: per series, then summed (rule 1);
    without counters the values at ``end`` are the increases."""
    if not counters:
        return _sum_at(series, end)
    parts = [counter_increase(s.values.get(start), s.values.get(end), reported_at_start)
             for s in series]
    parts = [p for p in parts if p is not None]
    return math.fsum(parts) if parts else None


def _whole(v: float) -> int | float:
    return int(v) if v.is_integer() and abs(v) < 2 ** 63 else v


def tier_windows(spec: TierSpec, data: TierData, system: str, ends_ms: Sequence[int],
                 window_ms: int, missing_class: str = "other",
                 ) -> tuple[list[dict[str, Any]], list[Gap]]:
    """The input-contract records of one tier at the window ends ``ends_ms`` (each window is
    ``(end - window_ms, end]``) and the windows that could not be made. Pure: the results of
    the tier's queries in, records out (module docstring: the rules)."""
    busy = data.busy_seconds if spec.busy_seconds is not None else data.utilization
    busy = busy or []
    if spec.utilization is not None and len({_key(s.labels) for s in busy}) > 1:
        raise ValueError(f"tiers.{spec.name}.utilization: the query gave {len(busy)} series; "
                         f"it must give one (aggregate it, e.g. avg(...))")
    completions = _by_class(data.completions, spec.class_label, missing_class)
    time_sum = _by_class(data.time_sum or [], spec.class_label, missing_class)
    time_count = (_by_class(data.time_count, spec.class_label, missing_class)
                  if data.time_count is not None else completions)
    window_s = window_ms / 1000.0
    records: list[dict[str, Any]] = []
    gaps: list[Gap] = []
    for end in ends_ms:
        start = end - window_ms
        at_end = any(end in s.values for s in busy)
        at_start = any(start in s.values for s in busy)
        if not at_end or (spec.needs_start and not at_start):
            where = "end" if not at_end else "start"
            gaps.append(Gap(spec.name, end, f"tier not reporting at the window's {where}"))
            continue
        if isinstance(spec.cores, int):
            cores: float | None = float(spec.cores)
        else:
            cores = _sum_at(data.cores or [], end)
            if cores is None:
                gaps.append(Gap(spec.name, end, "cores: no value at the window's end"))
                continue
            if not cores >= 1:
                gaps.append(Gap(spec.name, end, f"cores: {cores:g} at the window's end "
                                                f"(must be >= 1)"))
                continue
        if spec.busy_seconds is not None:
            busy_s = _increase(busy, start, end, spec.counters, at_start)
            utilization = busy_s / (window_s * cores) if busy_s is not None else None
        else:
            utilization = _sum_at(busy, end)
        if utilization is None:
            gaps.append(Gap(spec.name, end, "busy time: no value"))
            continue
        counts = {cls: n for cls, ss in completions.items()
                  if (n := _increase(ss, start, end, spec.counters, at_start)) is not None}
        if not counts:
            gaps.append(Gap(spec.name, end, "completions: no series at the window's end"))
            continue
        record: dict[str, Any] = {
            "system": system, "tier": spec.name, "end": end / 1000.0, "window_s": window_s,
            "utilization": utilization, "cores": _whole(cores),
            "completions": {c: _whole(n) for c, n in sorted(counts.items())},
        }
        if time_sum:
            times = {}
            for cls, ss in time_sum.items():
                spent = _increase(ss, start, end, spec.counters, at_start)
                n = _increase(time_count.get(cls, []), start, end, spec.counters, at_start)
                if spent is not None and n:
                    times[cls] = max(spent, 0.0) / n
            if times:
                record["response_time_s"] = dict(sorted(times.items()))
        if data.users is not None:
            users = _sum_at(data.users, end)
            if users is not None:
                record["users"] = _whole(users)
        records.append(record)
    return records, gaps


def system_windows(source: PrometheusSource, data: Mapping[str, TierData],
                   ends_ms: Sequence[int]) -> tuple[list[dict[str, Any]], list[Gap]]:
    """Every tier's records on the grid ``ends_ms``, ordered by end, then by tier (the
    configured visit order), and the gaps."""
    order = {t.name: i for i, t in enumerate(source.tiers)}
    records, gaps = [], []
    for spec in source.tiers:
        r, g = tier_windows(spec, data[spec.name], source.system, ends_ms, source.window_ms,
                            source.missing_class)
        records += r
        gaps += g
    records.sort(key=lambda r: (r["end"], order[r["tier"]]))
    return records, gaps
