"""Input-contract windows re-told as the metric samples a monitoring agent would have sent:
cumulative counters (busy core-seconds, completions and seconds at the tier per class) and
gauges (users, cores) sampled at every window end, encoded in each Kafka format
(docs/formats.md). Mapped back (:data:`MAPPING`), they must give the same windows.

Metric names, the same in the three formats: ``app_busy_seconds``, ``app_cores``,
``app_users``; ``http_time_count`` / ``http_time_sum`` per class (label ``uri``) -- a Telegraf
measurement ``http_time`` with fields ``count`` and ``sum``, an OTLP histogram ``http_time``.
The system is the label ``namespace``, the tier ``service``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from streams.core.records import parse_end

#: the ``[input]`` settings (besides ``format``) that map the samples back
MAPPING = """window_s = 5
system_label = "namespace"
tier_label = "service"
class_label = "uri"
busy_seconds = "app_busy_seconds"
cores = "app_cores"
completions = "http_time_count"
time_sum = "http_time_sum"
users = "app_users"
"""

MAPPING_DICT = {"window_s": 5, "system_label": "namespace", "tier_label": "service",
                "class_label": "uri", "busy_seconds": "app_busy_seconds", "cores": "app_cores",
                "completions": "http_time_count", "time_sum": "http_time_sum",
                "users": "app_users"}


@dataclass
class Snapshot:
    """One tier's counters and gauges at an instant (ms)."""

    system: str
    tier: str
    t_ms: int
    busy_s: float
    cores: int
    users: int | None
    count: dict[str, int] = field(default_factory=dict)
    time_s: dict[str, float] = field(default_factory=dict)


def snapshots(windows: Iterable[dict[str, Any]]) -> Iterator[Snapshot]:
    """Each window's end as a snapshot of its tier's counters, preceded by an all-zero one at
    the tier's first window start (so the first window has a start value)."""
    state: dict[tuple[str, str], Snapshot] = {}
    for w in windows:
        key = (w["system"], w["tier"])
        end_ms = round(parse_end(w["end"]) * 1000)
        prev = state.get(key)
        if prev is None:
            prev = Snapshot(w["system"], w["tier"], end_ms - round(w["window_s"] * 1000), 0.0,
                            w.get("cores", 1), w.get("users"),
                            {c: 0 for c in w["completions"]},
                            {c: 0.0 for c in w["completions"]})
            yield prev
        snap = Snapshot(w["system"], w["tier"], end_ms,
                        prev.busy_s + w["utilization"] * w["window_s"] * w.get("cores", 1),
                        w.get("cores", 1), w.get("users"), dict(prev.count), dict(prev.time_s))
        for c, n in w["completions"].items():
            snap.count[c] = snap.count.get(c, 0) + n
            rt = (w.get("response_time_s") or {}).get(c)
            snap.time_s[c] = snap.time_s.get(c, 0.0) + (rt * n if rt is not None else 0.0)
        state[key] = snap
        yield snap


def _tags(s: Snapshot) -> dict[str, str]:
    return {"namespace": s.system, "service": s.tier}


def telegraf(s: Snapshot, batch: bool = True) -> list[str]:
    """Telegraf's JSON serializer (timestamps in seconds, ``json_timestamp_units = "1s"``);
    ``batch``: one ``{"metrics": [...]}`` message, else a message per metric."""
    t = s.t_ms // 1000 if s.t_ms % 1000 == 0 else s.t_ms / 1000
    fields: dict[str, Any] = {"busy_seconds": s.busy_s, "cores": s.cores, "state": "running"}
    if s.users is not None:
        fields["users"] = s.users
    metrics = [{"name": "app", "tags": _tags(s), "fields": fields, "timestamp": t}]
    metrics += [{"name": "http_time", "tags": {**_tags(s), "uri": c},
                 "fields": {"count": n, "sum": s.time_s[c]}, "timestamp": t}
                for c, n in s.count.items()]
    if batch:
        return [json.dumps({"metrics": metrics})]
    return [json.dumps(m) for m in metrics]


def _rfc3339(t_ms: int) -> str:
    from streams.core.records import format_time

    return format_time(t_ms / 1000)


def adapter(s: Snapshot) -> list[str]:
    """prometheus-kafka-adapter's JSON, a message per series."""
    def one(name: str, value: Any, **labels: str) -> str:
        return json.dumps({"timestamp": _rfc3339(s.t_ms), "value": repr(float(value)),
                           "name": name, "labels": {"__name__": name, **_tags(s), **labels}})
    out = [one("app_busy_seconds", s.busy_s), one("app_cores", s.cores)]
    if s.users is not None:
        out.append(one("app_users", s.users))
    for c, n in s.count.items():
        out += [one("http_time_count", n, uri=c), one("http_time_sum", s.time_s[c], uri=c)]
    return out


def _attrs(**kv: str) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"stringValue": v}} for k, v in kv.items()]


def otlp(s: Snapshot) -> list[str]:
    """An OTLP/JSON ``ExportMetricsServiceRequest`` (the Collector's ``otlp_json``)."""
    t = str(s.t_ms * 1_000_000)
    start = "1700000000000000000"
    metrics: list[dict[str, Any]] = [
        {"name": "app_busy_seconds", "unit": "s",
         "sum": {"aggregationTemporality": 2, "isMonotonic": True,
                 "dataPoints": [{"startTimeUnixNano": start, "timeUnixNano": t,
                                 "asDouble": s.busy_s}]}},
        {"name": "app_cores", "gauge": {"dataPoints": [{"timeUnixNano": t,
                                                        "asInt": str(s.cores)}]}},
        {"name": "http_time", "unit": "s",
         "histogram": {"aggregationTemporality": 2, "dataPoints": [
             {"attributes": _attrs(uri=c), "startTimeUnixNano": start, "timeUnixNano": t,
              "count": str(n), "sum": s.time_s[c], "bucketCounts": [str(n)],
              "explicitBounds": []}
             for c, n in s.count.items()]}}]
    if s.users is not None:
        metrics.append({"name": "app_users", "gauge": {"dataPoints": [
            {"timeUnixNano": t, "asInt": str(s.users)}]}})
    return [json.dumps({"resourceMetrics": [{
        "resource": {"attributes": _attrs(namespace=s.system, service=s.tier)},
        "scopeMetrics": [{"scope": {"name": "perfcast.test"}, "metrics": metrics}]}]})]


ENCODERS = {"telegraf": telegraf, "prometheus-kafka-adapter": adapter, "otlp-json": otlp}


def encode(windows: Iterable[dict[str, Any]], fmt: str) -> list[str]:
    """The windows as messages of format ``fmt``, in time order per tier."""
    return [m for s in snapshots(windows) for m in ENCODERS[fmt](s)]
