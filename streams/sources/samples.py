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
  ``ns``), or a string with a zone (``json_timestamp_format``, RFC 3339). A histogram of
  Telegraf's ``prometheus`` input comes as Prometheus has it: with ``metric_version = 2``
  one metric per bucket, an ``le`` tag and a ``<name>_bucket`` field (so the sample
  ``prometheus_<name>_bucket{le}``); with ``metric_version = 1`` one metric whose fields are
  the buckets named by their bound (``"0.05"``, ``"+Inf"``) beside ``count`` and ``sum``:
  such a field is also the sample ``<name>_bucket`` with the label ``le`` (its own sample
  ``<name>_<bound>`` kept as well).
- ``prometheus-kafka-adapter``: Telefonica's adapter (Prometheus ``remote_write`` to Kafka),
  ``{"timestamp": RFC 3339, "value": "text", "name", "labels": {"__name__", ...}}``; also its
  first releases' flat shape ``{"__timestamp__": ms, "__value__": v, "__name__", labels...}``.
  Prometheus' staleness marker (``"NaN"``) is a sample with no value.
- ``otlp-json``: OTLP/JSON ``ExportMetricsServiceRequest`` (the OpenTelemetry Collector's
  Kafka exporter with ``encoding: otlp_json``): ``resourceMetrics[].scopeMetrics[].metrics[]``.
  A gauge or sum data point is a sample named after the metric (``asDouble``, or ``asInt`` as
  a string or a number); a histogram data point gives ``<name>_count`` and ``<name>_sum``,
  and its buckets as Prometheus' cumulative ``<name>_bucket`` samples with the label ``le``
  (``explicitBounds``/``bucketCounts``; an ``exponentialHistogram``'s zero and positive
  buckets with ``le = base^(offset + k + 1)``, :func:`estimators.histogram.exponential_cumulative`).
  Broken buckets (bounds not rising, a count missing, negative observations) are a problem
  naming the field, while the point's count and sum are kept.
  Labels: the resource's, the scope's and the data point's attributes (the latter win),
  AnyValue scalars as text. ``timeUnixNano``: nanoseconds, a string or a number. A sum with
  delta temporality (``1``/``AGGREGATION_TEMPORALITY_DELTA``) is marked ``delta``: its values
  are summed into a counter by the mapping. A data point with the no-recorded-value flag
  (bit 1 of ``flags``) has no value, as a staleness marker.

Timestamps become whole milliseconds since the epoch (the window grid's resolution).

Hostile input (docs/formats.md, "What perfcast does with malformed samples"): every part of a
record is type-checked where it is read, so a malformed part costs only itself -- a metric, a
data point, a field -- and becomes a problem naming its path and the reason; nothing raises
past :func:`parse_record` but ``InvalidWindow``. JSON nested deeper than the decoder's stack
is refused as a whole (``RecursionError`` never escapes); label values must be scalars; a
timestamp, ``asInt`` or ``count`` is read only from at most :data:`MAX_DIGITS` ASCII digits
(a uint64/int64 has at most 20: longer text is refused before Python's ``int`` limit of 4,300
digits would raise). JSON with a lone surrogate escape (``"\\ud800"``, not valid Unicode) is
decoded again by the standard library and only the samples whose name or labels hold one are
refused, the other metrics of the batch kept.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import msgspec

from estimators.histogram import (HistogramError, cumulative_from_counts,
                                  exponential_cumulative, format_le)
from streams.core.records import InvalidWindow, parse_end
# the formats and timestamp units are the [input] configuration's; the parsers are per format
from streams.core.input_config import FORMATS, TIMESTAMP_UNITS

__all__ = ["Sample", "Parsed", "FORMATS", "TIMESTAMP_UNITS", "parse_record", "decode"]

#: latest timestamp accepted, ms (as :data:`streams.core.records.MAX_END`, the year 5138)
MAX_TIME_MS = 10 ** 14

#: most digits of an integer read from text: a uint64 has 20 (the protobuf JSON mapping writes
#: 64-bit integers as strings of digits, Google's proto3 JSON specification)
MAX_DIGITS = 20

#: longest timestamp text read (an RFC 3339 time with nanoseconds and an offset has 35)
MAX_TIME_TEXT = 64


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


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def decode(raw: bytes | str | Mapping[str, Any]) -> Any:
    """A record's JSON (a mapping is taken as decoded); ``InvalidWindow`` on malformed JSON or
    JSON nested deeper than the decoder's stack. JSON whose only fault is a lone surrogate
    escape is decoded by the standard library (its strings then may hold lone surrogates:
    :func:`parse_record` refuses the samples that do)."""
    return _decode(raw)[0]


def _decode(raw: bytes | str | Mapping[str, Any]) -> tuple[Any, bool]:
    """:func:`decode`, and whether its strings may hold lone surrogates (JSON decoded by the
    standard library, or a mapping passed in decoded)."""
    if isinstance(raw, Mapping):
        return raw, True
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    body = bytes(raw).removeprefix(b"\xef\xbb\xbf")
    try:
        return _decoder.decode(body), False
    except RecursionError:
        reason = "JSON nested too deeply (deeper than the decoder's stack)"
    except (msgspec.DecodeError, UnicodeError) as exc:
        reason = f"malformed JSON ({exc})"
        if "surrogate" in str(exc):
            try:
                return json.loads(body, parse_constant=_refuse_constant), True
            except (ValueError, RecursionError):
                pass
    raise InvalidWindow("record", body[:200].decode("utf-8", "replace"), reason)


def _valid_text(sample: Sample) -> bool:
    """The sample's name and labels are valid Unicode (no lone surrogate)."""
    try:
        sample.name.encode("utf-8")
        for k, v in sample.labels.items():
            k.encode("utf-8")
            v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _scalar(value: Any, where: str) -> str:
    """A label value as text: a string, a number or a boolean (nested values are refused:
    their text would be unbounded)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)) and not (
            isinstance(value, int) and value.bit_length() > 64):
        return _text(value)
    raise InvalidWindow(where, value, "must be a string, a number or a boolean")


def _digits(value: Any, where: str, what: str, signed: bool = False) -> int:
    """An integer written as JSON text of at most :data:`MAX_DIGITS` ASCII digits (``-``
    first if ``signed``) or as a JSON integer of at most 64 bits."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() <= 64 and (signed or value >= 0):
            return value
    elif isinstance(value, str):
        body = value[1:] if signed and value.startswith("-") else value
        if 0 < len(body) <= MAX_DIGITS and body.isascii() and body.isdigit():
            return int(value)
    raise InvalidWindow(where, value, f"must be {what} (at most {MAX_DIGITS} ASCII digits, "
                                      f"as text or a JSON integer)")


def _labels(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidWindow(where, raw, "must be an object of name: value")
    return {str(k): v if isinstance(v, str) else _scalar(v, f"{where}.{k}")
            for k, v in raw.items()}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _time_ms(value: Any, where: str, unit: str = "ms") -> int:
    """A timestamp as whole ms: a number in ``unit`` or a string with a zone (RFC 3339)."""
    num, den = TIMESTAMP_UNITS[unit]
    if isinstance(value, str):
        if len(value) > MAX_TIME_TEXT:
            raise InvalidWindow(where, value, f"too long for a timestamp (more than "
                                              f"{MAX_TIME_TEXT} characters)")
        try:
            t = round(parse_end(value) * 1000)
        except InvalidWindow as err:
            raise InvalidWindow(where, value, err.reason) from None
        except (ValueError, OverflowError):           # a date outside what Python represents
            raise InvalidWindow(where, value, "not an RFC 3339 time within the years "
                                              "1970-5138") from None
    elif isinstance(value, int) and not isinstance(value, bool):
        t = value * den // num if value.bit_length() <= 128 else -1
    elif isinstance(value, float) and math.isfinite(value):
        ms = value * den / num
        t = round(ms) if math.isfinite(ms) else -1
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
    out = [Sample(f"{name}_{f}", tags, t, v) for f, v in fields.items()]
    for f, v in fields.items():
        le = _bucket_bound(f)
        if le is not None and "le" not in tags:
            out.append(Sample(f"{name}_bucket", {**tags, "le": le}, t, v))
    return out


def _bucket_bound(field: str) -> str | None:
    """A Telegraf ``metric_version = 1`` histogram's bucket field (its bound, ``"0.05"``,
    ``"+Inf"``) as the ``le`` Prometheus writes; ``None`` for any other field."""
    if not field or not (field[0].isdigit() or field in ("+Inf", "Inf", "inf", "+inf")):
        return None
    try:
        value = float(field)
    except ValueError:
        return None
    return format_le(value) if value == value else None


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
        labels = {str(k): _scalar(v, str(k)) for k, v in data.items()
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


#: longest label text made of an OTLP array or map attribute (its JSON)
MAX_ANY_VALUE = 4096


def _any_value(value: Any, where: str) -> str:
    """An OTLP AnyValue as label text (scalars; arrays and maps as their JSON, at most
    :data:`MAX_ANY_VALUE` characters)."""
    if isinstance(value, Mapping):
        for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
            if key in value:
                return _scalar(value[key], f"{where}.{key}")
        try:
            text = msgspec.json.encode(value).decode("utf-8", "surrogatepass")
        except (RecursionError, TypeError, ValueError, OverflowError):
            text = ""
        if not text or len(text) > MAX_ANY_VALUE:
            raise InvalidWindow(where, value, f"an array or map attribute must be JSON of at "
                                              f"most {MAX_ANY_VALUE} characters")
        return text
    return _scalar(value, where)


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
        out[kv["key"]] = _any_value(kv.get("value"), f"{where}.{kv['key']}")
    return out


def _list(value: Any, where: str, what: str) -> list[Any]:
    """An OTLP repeated field: a list, or absent (``null``: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidWindow(where, value, f"must be a list of {what}")
    return value


def _points(metric: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    for kind in ("gauge", "sum", "histogram", "exponentialHistogram"):
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
        raise InvalidWindow(f"{where}.{name}", kinds, "only gauge, sum, histogram and "
                                                      "exponentialHistogram metrics are read "
                                                      "(summary is not)")
    kind, body = found
    delta = kind != "gauge" and body.get("aggregationTemporality") in _DELTA
    out = []
    dead: list[InvalidWindow] = []
    points = _list(body.get("dataPoints"), f"{where}.{name}.{kind}.dataPoints", "data points")
    for i, point in enumerate(points):
        at = f"{where}.{name}.dataPoints[{i}]"
        try:
            out += _otlp_point(point, name, kind, delta, labels, at)
        except InvalidWindow as err:
            dead.append(err)
        except _Partial as part:
            out += part.samples
            dead += part.problems
    if dead:
        raise _Partial(out, dead)
    return out


class _Partial(Exception):
    """A metric some of whose data points could not be read: the samples of the others and
    the problems of those."""

    def __init__(self, samples: list[Sample], problems: list[InvalidWindow]) -> None:
        super().__init__(problems[0])
        self.samples = samples
        self.problems = problems


def _otlp_point(point: Any, name: str, kind: str, delta: bool, labels: Mapping[str, str],
                at: str) -> list[Sample]:
    """One data point's samples (module docstring)."""
    if not isinstance(point, Mapping):
        raise InvalidWindow(at, point, "a data point must be an object")
    own = {**labels, **_attributes(point.get("attributes"), f"{at}.attributes")}
    t = _time_ms(_digits(point.get("timeUnixNano"), f"{at}.timeUnixNano",
                         "nanoseconds since the epoch"), f"{at}.timeUnixNano", "ns")
    stale = bool(_flags(point.get("flags")) & _NO_VALUE)
    if kind in ("histogram", "exponentialHistogram"):
        # proto3's JSON mapping leaves out a field at its default: no count is a count of 0
        count = None if stale else _digits(point.get("count", 0), f"{at}.count",
                                           "a count of observations")
        total = None if stale else point.get("sum")
        out = [Sample(f"{name}_count", own, t, count, delta=delta)]
        if "sum" in point or stale:
            out.append(Sample(f"{name}_sum", own, t, total, delta=delta))
        try:
            buckets = None if stale else _otlp_buckets(point, kind, at)
        except HistogramError as err:
            raise _Partial(out, [InvalidWindow(err.field, err.value, err.reason)]) from None
        except InvalidWindow as err:
            raise _Partial(out, [err]) from None
        if stale:
            buckets = [(le, None) for le in _stale_bounds(point)]
        for le, cum in buckets or ():
            out.append(Sample(f"{name}_bucket", {**own, "le": format_le(le)}, t, cum,
                              delta=delta))
        return out
    if stale:
        value = None
    elif "asDouble" in point:
        value = point["asDouble"]
    elif "asInt" in point:
        value = _digits(point["asInt"], f"{at}.asInt", "an int64", signed=True)
    else:
        raise InvalidWindow(at, point, "a number data point needs asDouble or asInt")
    return [Sample(name, own, t, value, delta=delta)]


def _otlp_buckets(point: Mapping[str, Any], kind: str, at: str,
                  ) -> list[tuple[float, float]] | None:
    """A histogram data point's buckets as cumulative ``[(le, count)]`` ending at ``+Inf``
    (``None``: it has none)."""
    if kind == "histogram":
        raw = _list(point.get("bucketCounts"), f"{at}.bucketCounts", "counts")
        if not raw:
            return None
        counts = [_digits(c, f"{at}.bucketCounts[{i}]", "a count") for i, c in enumerate(raw)]
        bounds = _list(point.get("explicitBounds"), f"{at}.explicitBounds", "bounds")
        for i, b in enumerate(bounds):
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b):
                raise InvalidWindow(f"{at}.explicitBounds[{i}]", b, "a bound must be a finite "
                                                                    "number")
        return cumulative_from_counts([float(b) for b in bounds], counts, at)
    where = f"{at}.exponentialHistogram"
    scale = _digits(point.get("scale", 0), f"{at}.scale", "an integer scale", signed=True)
    positive = point.get("positive") or {}
    negative = point.get("negative") or {}
    if not isinstance(positive, Mapping) or not isinstance(negative, Mapping):
        raise InvalidWindow(f"{at}.positive", positive, "buckets must be {offset, bucketCounts}")
    offset = _digits(positive.get("offset", 0), f"{at}.positive.offset", "an integer offset",
                     signed=True)
    counts = [_digits(c, f"{at}.positive.bucketCounts[{i}]", "a count")
              for i, c in enumerate(_list(positive.get("bucketCounts"),
                                          f"{at}.positive.bucketCounts", "counts"))]
    below = sum(_digits(c, f"{at}.negative.bucketCounts[{i}]", "a count")
                for i, c in enumerate(_list(negative.get("bucketCounts"),
                                            f"{at}.negative.bucketCounts", "counts")))
    zero = _digits(point.get("zeroCount", 0), f"{at}.zeroCount", "a count")
    threshold = point.get("zeroThreshold", 0.0)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise InvalidWindow(f"{at}.zeroThreshold", threshold, "must be a number")
    return exponential_cumulative(scale, offset, counts, zero, float(threshold), below,
                                  where)


def _stale_bounds(point: Mapping[str, Any]) -> list[float]:
    """The bounds of a no-recorded-value explicit histogram point (its buckets end)."""
    bounds = point.get("explicitBounds")
    if not isinstance(bounds, list) or not all(
            isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b)
            for b in bounds):
        return []
    return [float(b) for b in bounds] + [math.inf] if bounds else []


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
            key = "scopeMetrics" if "scopeMetrics" in rm else "instrumentationLibraryMetrics"
            scopes = _list(rm.get(key), f"{where}.{key}", "scope metrics")
        except InvalidWindow as err:
            out.problems.append(err)
            continue
        for s, sm in enumerate(scopes):
            at = f"{where}.scopeMetrics[{s}]"
            try:
                if not isinstance(sm, Mapping):
                    raise InvalidWindow(at, sm, "must be an object")
                metrics = _list(sm.get("metrics"), f"{at}.metrics", "metrics")
            except InvalidWindow as err:
                out.problems.append(err)
                continue
            for m, metric in enumerate(metrics):
                try:
                    out.samples += _otlp_metric(metric, base, f"{at}.metrics[{m}]")
                except InvalidWindow as err:
                    out.problems.append(err)
                except _Partial as part:
                    out.samples += part.samples
                    out.problems += part.problems
    return out


_PARSERS: dict[str, Callable[[Any, str], Parsed]] = {
    "telegraf": parse_telegraf, "prometheus-kafka-adapter": parse_adapter,
    "otlp-json": parse_otlp}


def parse_record(raw: bytes | str | Mapping[str, Any], fmt: str,
                 timestamp_unit: str = "s") -> Parsed:
    """One record of format ``fmt`` (one of :data:`FORMATS` but ``contract``) as samples;
    ``InvalidWindow`` when it is not JSON or not of the format's shape at all."""
    data, lenient = _decode(raw)
    try:
        if fmt == "telegraf":
            parsed = parse_telegraf(data, timestamp_unit)
        else:
            parsed = _PARSERS[fmt](data, "ms")
    except RecursionError:       # a mapping passed in decoded, nested deeper than the stack
        raise InvalidWindow("record", "<nested too deeply to show>", "nested too deeply "
                                                                      "to read") from None
    if lenient and not all(map(_valid_text, parsed.samples)):
        kept = []
        for sample in parsed.samples:
            if _valid_text(sample):
                kept.append(sample)
            else:
                parsed.problems.append(InvalidWindow(
                    "metric", sample.name.encode("utf-8", "backslashreplace").decode(),
                    "name or labels not valid Unicode (a lone surrogate escape)"))
        parsed.samples = kept
    return parsed
