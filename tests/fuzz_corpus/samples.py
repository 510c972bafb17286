"""The hostile-input corpus of the agent sample formats (docs/formats.md, "What perfcast does
with malformed samples"): records an attacker -- or a broken agent -- could publish to the source
topic, each meant to be mixed into the samples of the demo shop (``tests/format_samples.py``,
system ``SYSTEM`` unless a test renames it) midway. Replayed by ``tests/test_formats_hostile.py``
(the embedded core, ``perfcast run``) and ``tests/test_formats_hostile_services.py`` (the worker
through Kafka). One list; add a case here, not in a test.

Each :class:`SampleCase` is dead-lettered once, its dead letter naming ``field`` (a substring of
the dead letter's field) with ``reason`` in its reason; every window is still made, with the
same estimates as without it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["SampleCase", "SAMPLE_CASES", "SYSTEM", "MID_S", "deep", "otlp_request"]

#: the demo shop's system (``streams.cli.demo.DemoScenario``'s default)
SYSTEM = "shop"
#: an instant of the demo shop's 600 s (its samples run 2026-11-20T10:00:00Z to 10:10:00Z)
MID_S = 1_795_687_500               # 2026-11-20T10:05:00Z
#: JSON nested this deep: far beyond any decoder's stack
DEPTH = 100_000


def deep(depth: int = DEPTH) -> str:
    """``[[[...]]]`` nested ``depth`` deep."""
    return "[" * depth + "]" * depth


def _attrs(**kv: str) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"stringValue": v}} for k, v in kv.items()]


def otlp_request(scope_metrics: Any = None, metrics: Any = None, system: str = SYSTEM) -> str:
    """An ``ExportMetricsServiceRequest`` of tier ``front`` of ``system`` with ``scope_metrics``
    as it is, or one scope holding ``metrics``."""
    if scope_metrics is None:
        scope_metrics = [{"scope": {"name": "hostile"}, "metrics": metrics}]
    return json.dumps({"resourceMetrics": [{
        "resource": {"attributes": _attrs(namespace=system, service="front")},
        "scopeMetrics": scope_metrics}]})


def _gauge(name: str = "app_cores", **point: Any) -> dict[str, Any]:
    body = {"timeUnixNano": str(MID_S * 10 ** 9), "asInt": "1"}
    body.update(point)
    return {"name": name, "gauge": {"dataPoints": [body]}}


def _telegraf(fields: dict[str, Any], timestamp: Any = MID_S, name: str = "app",
              **tags: str) -> str:
    return json.dumps({"name": name, "tags": {"namespace": SYSTEM, "service": "front", **tags},
                       "fields": fields, "timestamp": timestamp})


@dataclass(frozen=True)
class SampleCase:
    """A hostile record of ``fmt`` and its dead letter's ``field`` and ``reason``."""

    name: str
    fmt: str
    record: str
    field: str
    reason: str


_T, _A, _O = "telegraf", "prometheus-kafka-adapter", "otlp-json"
_TS = json.dumps("2026-11-20T10:05:00Z")

SAMPLE_CASES: list[SampleCase] = [
    # -- nesting: 10^5 deep, beyond the decoder's stack (RecursionError before) ------------
    SampleCase("telegraf batch nested 1e5 deep", _T, '{"metrics": ' + deep() + "}",
               "record", "nested too deeply"),
    SampleCase("telegraf field nested 1e5 deep", _T,
               '{"name": "app", "fields": {"busy_seconds": ' + deep() + '}, "timestamp": 1}',
               "record", "nested too deeply"),
    SampleCase("adapter labels nested 1e5 deep", _A,
               '{"timestamp": ' + _TS + ', "value": "1", "name": "app_cores", "labels": '
               + deep() + "}", "record", "nested too deeply"),
    SampleCase("otlp nested 1e5 deep", _O, '{"resourceMetrics": ' + deep() + "}",
               "record", "nested too deeply"),
    # -- OTLP repeated fields of the wrong type (TypeError, or silently ignored, before) ----
    SampleCase("otlp scopeMetrics a number", _O, otlp_request(scope_metrics=5),
               "scopeMetrics", "must be a list"),
    SampleCase("otlp scopeMetrics a string", _O, otlp_request(scope_metrics="abc"),
               "scopeMetrics", "must be a list"),
    SampleCase("otlp metrics a number", _O, otlp_request(metrics=5),
               "metrics", "must be a list"),
    SampleCase("otlp metrics a string", _O, otlp_request(metrics="abc"),
               "metrics", "must be a list"),
    SampleCase("otlp dataPoints a number", _O,
               otlp_request(metrics=[{"name": "app_cores", "gauge": {"dataPoints": 5}}]),
               "dataPoints", "must be a list"),
    SampleCase("otlp dataPoints a string", _O,
               otlp_request(metrics=[{"name": "app_cores", "gauge": {"dataPoints": "abc"}}]),
               "dataPoints", "must be a list"),
    SampleCase("otlp scope a number", _O, otlp_request(scope_metrics=[7]),
               "scopeMetrics[0]", "must be an object"),
    # -- numbers as text: unbounded digits, non-ASCII digits (ValueError, or ignored) ------
    SampleCase("otlp timeUnixNano of 5000 digits", _O,
               otlp_request(metrics=[_gauge(timeUnixNano="9" * 5000)]),
               "timeUnixNano", "at most 20 ASCII digits"),
    SampleCase("otlp timeUnixNano of non-ASCII digits", _O,
               otlp_request(metrics=[_gauge(timeUnixNano="\u0661" * 19)]),
               "timeUnixNano", "at most 20 ASCII digits"),
    SampleCase("otlp asInt of 5000 digits", _O,
               otlp_request(metrics=[_gauge(asInt="9" * 5000)]),
               "asInt", "at most 20 ASCII digits"),
    SampleCase("otlp histogram count of 5000 digits", _O,
               otlp_request(metrics=[{"name": "http_time", "histogram": {"dataPoints": [
                   {"timeUnixNano": str(MID_S * 10 ** 9), "count": "9" * 5000, "sum": 1.0,
                    "attributes": _attrs(uri="/x")}]}}]),
               "count", "at most 20 ASCII digits"),
    SampleCase("otlp attribute nested", _O,
               otlp_request(metrics=[_gauge(attributes=[{"key": "k", "value": {
                   "arrayValue": {"values": [{"arrayValue": {"values": []}}] * 2000}}}])]),
               "attributes.k", "at most 4096 characters"),
    SampleCase("adapter value out of range", _A,
               json.dumps({"timestamp": "2026-11-20T10:05:00Z", "value": "1e999999",
                           "name": "app_cores", "labels": {"namespace": SYSTEM,
                                                           "service": "front"}}),
               "value", "out of range"),
    SampleCase("adapter label value a list", _A,
               json.dumps({"timestamp": "2026-11-20T10:05:00Z", "value": "1",
                           "name": "app_cores", "labels": {"namespace": SYSTEM,
                                                           "service": ["front"]}}),
               "labels.service", "must be a string"),
    SampleCase("adapter timestamp of 5000 characters", _A,
               json.dumps({"timestamp": "2" * 5000, "value": "1", "name": "app_cores",
                           "labels": {"namespace": SYSTEM, "service": "front"}}),
               "timestamp", "too long"),
    SampleCase("telegraf timestamp 1e308", _T, _telegraf({"busy_seconds": 1.0}, 1e308),
               "timestamp", "out of range"),
    # -- a lone surrogate: only its metric goes (the whole batch did before) ---------------
    SampleCase("otlp lone surrogate in one metric", _O,
               otlp_request(metrics=[_gauge("unrelated_gauge"),
                                     _gauge("app_users\ud800", asInt="3")]),
               "metric", "not valid Unicode"),
    # -- far ahead: one stray timestamp moved its tier's clock (99 of 199 windows before) ---
    SampleCase("telegraf sample dated year 5138", _T,
               _telegraf({"busy_seconds": 1.0}, 99_999_999_999),
               "timestamp", "ahead of the newest sample"),
    SampleCase("telegraf new series 10 minutes ahead", _T,
               _telegraf({"count": 1}, MID_S + 600, name="http_time", uri="/new"),
               "timestamp", "ahead of the newest sample"),
]
