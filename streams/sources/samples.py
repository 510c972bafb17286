"""Metric samples from the Kafka formats monitoring agents emit (docs/formats.md).

A record of one of these formats holds *samples* -- a metric's value at an instant -- not
windows; :mod:`streams.sources.sample_windows` maps them to windows. Each parser turns one
record's bytes into :class:`Sample` objects and the problems of the parts it could not read
(:class:`streams.core.records.InvalidWindow`: field, value, reason), so that one bad metric in a
batch does not cost the others. A record of the wrong shape altogether raises
``InvalidWindow`` naming what was expected.

- ``telegraf``: Telegraf's JSON serializer (``data_format = "json"``), one metric
  ``{"name", "tags", "fields", "timestamp"}`` or the batch form ``{"metrics": [...]}``. Each
  field is a sample named ``<name>_<field>`` (the naming of Telegraf's Prometheus outputs),
  labelled with the tags. ``timestamp``: an integer in ``json_timestamp_units`` (the
  ``timestamp_unit`` setting: ``s`` by default, as Telegraf's default ``1s``; ``ms``, ``us``,
  ``ns``), or a string with a zone (``json_timestamp_format``, RFC 3339).
- ``prometheus-kafka-adapter``: Telefonica's adapter (Prometheus ``remote_write`` to Kafka),
  ``{"timestamp": RFC 3339, "value": "text", "name", "labels": {"__name__", ...}}``; also its
  first releases' flat shape ``{"__timestamp__": ms, "__value__": v, "__name__", labels...}``.
  Prometheus' staleness marker (``"NaN"``) is a sample with no value.
- ``otlp-json``: OTLP/JSON ``ExportMetricsServiceRequest`` (the OpenTelemetry Collector's
  Kafka exporter with ``encoding: otlp_json``): ``resourceMetrics[].scopeMetrics[].metrics[]``.
  A gauge or sum data point is a sample named after the metric (``asDouble``, or ``asInt`` as
  a string or a number); a histogram data point gives ``<name>_count`` and ``<name>_sum``.
  Labels: the resource's, the scope's and the data point's attributes (the latter win),
  AnyValue scalars as text. ``timeUnixNano``: nanoseconds, a string or a number. A sum with
  delta temporality (``1``/``AGGREGATION_TEMPORALITY_DELTA``) is marked ``delta``: its values
  are summed into a counter by the mapping. A data point with the no-recorded-value flag
  (bit 1 of ``flags``) has no value, as a staleness marker.

Timestamps become whole milliseconds since the epoch (the window grid's resolution).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import msgspec

from streams.core.records import InvalidWindow, parse_end
# the formats and timestamp units are the [input] configuration's; the parsers are per format
from streams.core.input_config import FORMATS, TIMESTAMP_UNITS

__all__ = ["Sample", "Parsed", "FORMATS", "TIMESTAMP_UNITS", "parse_record", "decode"]

#: latest timestamp accepted, ms (as :data:`streams.core.records.MAX_END`, the year 5138)
MAX_TIME_MS = 10 ** 14


@dataclass(frozen=True)
class Sample:
    """A metric's value at an instant: ``value`` as the record held it (checked by the mapping,
    which knows whether the metric is wanted); ``None`` is a staleness marker."""

    name: str
    labels: Mapping[str, str]
    t_ms: int
    value: Any
    #: an OTLP delta sum: the value is the increase since the previous point
    delta: bool = False


@dataclass
class Parsed:
    """One record's samples, and the problems of what could not be read."""

    samples: list[Sample]
    problems: list[InvalidWindow]


_decoder = msgspec.json.Decoder()


def decode(raw: bytes | str | Mapping[str, Any]) -> Any:
    """A record's JSON (a mapping is taken as decoded); ``InvalidWindow`` on malformed JSON."""
    if isinstance(raw, Mapping):
        return raw
    try:
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        return _decoder.decode(bytes(raw).removeprefix(b"\xef\xbb\xbf"))
    except (msgspec.DecodeError, UnicodeError) as exc:
        raise InvalidWindow("record", bytes(raw[:200]).decode("utf-8", "replace"),
                            f"malformed JSON ({exc})") from None


def _labels(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidWindow(where, raw, "must be an object of name: value")
    return {str(k): v if isinstance(v, str) else _text(v) for k, v in raw.items()}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _time_ms(value: Any, where: str, unit: str = "ms") -> int:
    """A timestamp as whole ms: a number in ``unit`` or a string with a zone (RFC 3339)."""
    if isinstance(value, str):
        try:
            t = round(parse_end(value) * 1000)
        except InvalidWindow as err:
            raise InvalidWindow(where, value, err.reason) from None
    elif isinstance(value, int) and not isinstance(value, bool):
        num, den = TIMESTAMP_UNITS[unit]
        t = value * den // num
    elif isinstance(value, float) and math.isfinite(value):
        num, den = TIMESTAMP_UNITS[unit]
        t = round(value * den / num)
    else:
        raise InvalidWindow(where, value, f"must be a timestamp (a number in {unit}, or "
                                          f"RFC 3339 text)")
    if not 0 <= t <= MAX_TIME_MS:
        raise InvalidWindow(where, value, f"out of range as {unit} since the epoch (check "
                                          f"timestamp_unit)")
    return t


# ----------------------------------------------------------------------------- Telegraf
def _telegraf_metric(metric: Any, unit: str, where: str) -> list[Sample]:
    if not isinstance(metric, Mapping) or not {"name", "fields", "timestamp"} <= set(metric):
        raise InvalidWindow(where, metric, "not a Telegraf JSON metric (needs name, fields, "
                                           "tags, timestamp)")
    name, fields = metric["name"], metric["fields"]
    if not isinstance(name, str) or not name:
        raise InvalidWindow(f"{where}.name", name, "must be a non-empty string")
    if not isinstance(fields, Mapping):
        raise InvalidWindow(f"{where}.fields", fields, "must be an object of field: value")
    tags = _labels(metric.get("tags"), f"{where}.tags")
    t = _time_ms(metric["timestamp"], f"{where}.timestamp", unit)
    return [Sample(f"{name}_{f}", tags, t, v) for f, v in fields.items()]


def parse_telegraf(data: Any, unit: str = "s") -> Parsed:
    """Telegraf's JSON serializer: a metric, or ``{"metrics": [...]}`` (module docstring)."""
    if isinstance(data, Mapping) and "metrics" in data and "name" not in data:
        metrics = data["metrics"]
        if not isinstance(metrics, list):
            raise InvalidWindow("metrics", metrics, "must be a list of Telegraf metrics")
        out = Parsed([], [])
        for i, metric in enumerate(metrics):
            try:
                out.samples += _telegraf_metric(metric, unit, f"metrics[{i}]")
            except InvalidWindow as err:
                out.problems.append(err)
        return out
    return Parsed(_telegraf_metric(data, unit, "record"), [])


# ----------------------------------------------------------------------------- adapter
def _adapter_value(value: Any) -> Any:
    """The adapter writes values as Go's ``strconv.FormatFloat``: ``"NaN"`` is Prometheus'
    staleness marker (no value); other text is parsed by the mapping."""
    if isinstance(value, str) and value.strip().lower() == "nan":
        return None
    return value


def parse_adapter(data: Any, unit: str = "ms") -> Parsed:
    """prometheus-kafka-adapter's JSON, either shape (module docstring)."""
    if not isinstance(data, Mapping):
        raise InvalidWindow("record", data, "not a prometheus-kafka-adapter sample (an object)")
    if "__value__" in data or "__timestamp__" in data:           # the first releases' shape
        labels = {str(k): _text(v) for k, v in data.items()
                  if k not in ("__value__", "__timestamp__")}
        name = labels.get("__name__")
        if not name or "__timestamp__" not in data:
            raise InvalidWindow("record", data, "not a prometheus-kafka-adapter sample (needs "
                                                "__name__, __value__, __timestamp__)")
        t = _time_ms(data["__timestamp__"], "__timestamp__", "ms")
        return Parsed([Sample(name, labels, t, _adapter_value(data.get("__value__")))], [])
    if not {"timestamp", "value"} <= set(data) or not ("name" in data or "labels" in data):
        raise InvalidWindow("record", data, "not a prometheus-kafka-adapter sample (needs "
                                            "timestamp, value, name, labels)")
    labels = _labels(data.get("labels"), "labels")
    name = data.get("name") or labels.get("__name__")
    if not isinstance(name, str) or not name:
        raise InvalidWindow("name", name, "must be a non-empty string (the metric's name)")
    t = _time_ms(data["timestamp"], "timestamp", unit)
    return Parsed([Sample(name, labels, t, _adapter_value(data["value"]))], [])


# ----------------------------------------------------------------------------- OTLP JSON
_DELTA = (1, "AGGREGATION_TEMPORALITY_DELTA")
#: DataPointFlags.FLAG_NO_RECORDED_VALUE
_NO_VALUE = 1


def _any_value(value: Any) -> str:
    """An OTLP AnyValue as label text (scalars; arrays and maps as their JSON)."""
    if isinstance(value, Mapping):
        for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
            if key in value:
                return _text(value[key])
        return msgspec.json.encode(value).decode()
    return _text(value)


def _attributes(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise InvalidWindow(where, raw, "must be a list of {key, value}")
    out = {}
    for kv in raw:
        if not isinstance(kv, Mapping) or not isinstance(kv.get("key"), str):
            raise InvalidWindow(where, kv, "an attribute must be {\"key\": ..., \"value\": "
                                           "AnyValue}")
        out[kv["key"]] = _any_value(kv.get("value"))
    return out


def _points(metric: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    for kind in ("gauge", "sum", "histogram"):
        body = metric.get(kind)
        if isinstance(body, Mapping):
            return kind, body
    return None


def _otlp_metric(metric: Any, labels: Mapping[str, str], where: str) -> list[Sample]:
    if not isinstance(metric, Mapping) or not isinstance(metric.get("name"), str):
        raise InvalidWindow(where, metric, "not an OTLP metric (needs name and gauge, sum or "
                                           "histogram)")
    name = metric["name"]
    found = _points(metric)
    if found is None:
        kinds = sorted(set(metric) - {"name", "description", "unit", "metadata"})
        raise InvalidWindow(f"{where}.{name}", kinds, "only gauge, sum and histogram metrics "
                                                      "are read (exponentialHistogram and "
                                                      "summary are not)")
    kind, body = found
    delta = kind == "sum" and body.get("aggregationTemporality") in _DELTA
    out = []
    for i, point in enumerate(body.get("dataPoints") or ()):
        at = f"{where}.{name}.dataPoints[{i}]"
        if not isinstance(point, Mapping):
            raise InvalidWindow(at, point, "a data point must be an object")
        own = {**labels, **_attributes(point.get("attributes"), f"{at}.attributes")}
        t = _time_ms(_nanos(point.get("timeUnixNano"), f"{at}.timeUnixNano"),
                     f"{at}.timeUnixNano", "ns")
        stale = bool(_flags(point.get("flags")) & _NO_VALUE)
        if kind == "histogram":
            count = None if stale else point.get("count")
            total = None if stale else point.get("sum")
            out.append(Sample(f"{name}_count", own, t, count, delta=delta))
            if "sum" in point or stale:
                out.append(Sample(f"{name}_sum", own, t, total, delta=delta))
            continue
        if stale:
            value = None
        elif "asDouble" in point:
            value = point["asDouble"]
        elif "asInt" in point:
            value = point["asInt"]
        else:
            raise InvalidWindow(at, point, "a number data point needs asDouble or asInt")
        out.append(Sample(name, own, t, value, delta=delta))
    return out


def _nanos(value: Any, where: str) -> int:
    """``timeUnixNano``: a uint64 as a JSON string (the protobuf JSON mapping) or number."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InvalidWindow(where, value, "must be nanoseconds since the epoch (a string of "
                                      "digits or an integer)")


def _flags(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_otlp(data: Any, unit: str = "ns") -> Parsed:
    """An OTLP/JSON ``ExportMetricsServiceRequest`` (module docstring)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("resourceMetrics"), list):
        raise InvalidWindow("record", data, "not OTLP/JSON metrics (needs resourceMetrics: "
                                            "[...])")
    out = Parsed([], [])
    for r, rm in enumerate(data["resourceMetrics"]):
        where = f"resourceMetrics[{r}]"
        try:
            if not isinstance(rm, Mapping):
                raise InvalidWindow(where, rm, "must be an object")
            resource = rm.get("resource") or {}
            base = _attributes(resource.get("attributes") if isinstance(resource, Mapping)
                               else None, f"{where}.resource.attributes")
            scopes = rm.get("scopeMetrics") or rm.get("instrumentationLibraryMetrics") or []
        except InvalidWindow as err:
            out.problems.append(err)
            continue
        for s, sm in enumerate(scopes):
            metrics = sm.get("metrics") if isinstance(sm, Mapping) else None
            for m, metric in enumerate(metrics or ()):
                try:
                    out.samples += _otlp_metric(metric, base,
                                                f"{where}.scopeMetrics[{s}].metrics[{m}]")
                except InvalidWindow as err:
                    out.problems.append(err)
    return out


_PARSERS: dict[str, Callable[[Any, str], Parsed]] = {
    "telegraf": parse_telegraf, "prometheus-kafka-adapter": parse_adapter,
    "otlp-json": parse_otlp}


def parse_record(raw: bytes | str | Mapping[str, Any], fmt: str,
                 timestamp_unit: str = "s") -> Parsed:
    """One record of format ``fmt`` (one of :data:`FORMATS` but ``contract``) as samples;
    ``InvalidWindow`` when it is not JSON or not of the format's shape at all."""
    data = decode(raw)
    if fmt == "telegraf":
        return parse_telegraf(data, timestamp_unit)
    return _PARSERS[fmt](data, "ms")
