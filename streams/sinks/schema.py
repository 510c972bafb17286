"""Output records as measurement points: the one schema of InfluxDB and the embedded store.

:data:`MEASUREMENTS` lists every measurement with its tags and typed fields, :data:`RECORDS`
the output type (:mod:`streams.core.outputs`) each is read from -- every tag and field is an
attribute of it, but for the few the point adds (:data:`ADDED`; tests/test_output_fields.py
checks both); :func:`points` turns one step's :class:`~streams.core.outputs.Outputs` into
:class:`Point` s that follow it. The InfluxDB sink writes them as line protocol, the SQLite
store as one table per measurement (column per tag and field, plus ``time`` in epoch
seconds). docs/pipeline.md, "InfluxDB measurements", documents the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from streams.core.outputs import (UNSET, Alert, ClassDemand, ClassPrediction, DeadLetter,
                                  Outputs, PoolPrediction, Prediction, TierEstimate,
                                  TierPrediction)

__all__ = ["ADDED", "Point", "MEASUREMENTS", "QUANTILE_FIELDS", "RECORDS", "points", "sources"]

_F, _I, _S, _B = "float", "int", "str", "bool"
#: the response-time quantiles a ``class_prediction`` point carries, flattened from the
#: prediction's ``response_time_quantiles_s`` (and ``..._forecast_s``) as
#: ``response_time_p95_s`` (``response_time_forecast_p95_s``); a ``p99.9`` SLO's quantile is
#: in ``response_time_slo_s`` (Flux reads field names with a dot only awkwardly)
QUANTILE_FIELDS = ("p50", "p90", "p95", "p99")

#: measurement -> (tags, {field: type})
MEASUREMENTS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "tier_estimate": (("system", "tier"), {
        "utilization": _F, "seq": _I, "late": _B, "idc": _F, "bursty": _B, "p95_s": _F,
        "mean_service_s": _F, "change_detected": _B, "flags": _S}),
    "demand": (("system", "tier", "class"), {"kalman": _F, "std": _F, "regression": _F,
                                             "visits": _F, "visits_measured": _F}),
    "prediction": (("system",), {
        "model": _S, "users": _I, "users_forecast": _I, "users_trend_per_s": _F,
        "users_source": _S, "throughput": _F, "response_time": _F, "throughput_measured": _F,
        "capacity_users": _I, "headroom_users": _I, "time_to_breach_s": _F,
        "breach_class": _S, "breach_tier": _S, "bottleneck_tier": _S,
        "bottleneck_switch_probability": _F, "model_error": _F, "throughput_error": _F,
        "think_time_s": _F, "horizon_s": _F, "flags": _S,
        "model_error_class": _S, "model_error_class_max": _F, "utilization_error_tier": _S,
        "utilization_error_max": _F, "model_trusted": _B, "capacity_users_lower": _I,
        "capacity_users_upper": _I, "time_to_breach_lower_s": _F,
        "time_to_breach_upper_s": _F, "band_flags": _S, "bottleneck_reason": _S,
        "breach_tier_share": _F, "breach_tier_bottleneck_probability": _F,
        "model_switch": _S, "model_switch_reason": _S, "remediation_summary": _S,
        "remediation_tier": _S, "remediation_reason": _S, "model_error_pooled": _F,
        "model_error_pooled_se": _F, "model_error_significant": _B, "model_error_solves": _I,
        "alert_capacity_users": _I, "alert_time_to_breach_s": _F, "alert_basis": _S,
        "alert_trigger": _S, "alert_untrusted": _S, "trend_class": _S,
        "trend_time_to_breach_s": _F, "workload": _S, "arrival_rate_per_s": _F,
        "arrival_rate_forecast_per_s": _F, "capacity_rate_per_s": _F,
        "headroom_rate_per_s": _F, "saturation_rate_per_s": _F, "unstable": _B,
        "capacity_rate_per_s_lower": _F, "capacity_rate_per_s_upper": _F,
        "pool_error": _F, "pool_error_pool": _S, "pool_error_pooled": _F,
        "pool_error_pooled_pool": _S}),
    "class_prediction": (("system", "class"), {
        "throughput": _F, "response_time": _F, "throughput_forecast": _F,
        "response_time_forecast": _F, "throughput_measured": _F,
        "response_time_measured": _F, "sla_s": _F, "response_time_error": _F,
        "response_time_error_pooled": _F, "response_time_error_se": _F,
        **{f"response_time_{q}_s": _F for q in QUANTILE_FIELDS},
        **{f"response_time_forecast_{q}_s": _F for q in QUANTILE_FIELDS},
        "slo_statistic": _S, "slo_bound_s": _F, "response_time_slo_s": _F,
        "response_time_slo_forecast_s": _F}),
    "tier_prediction": (("system", "tier"), {
        "utilization": _F, "utilization_forecast": _F, "utilization_measured": _F,
        "demand_s": _F, "idc": _F, "bursty": _B, "bottleneck_probability": _F,
        "utilization_error": _F}),
    "pool_prediction": (("system", "pool"), {
        "size": _I, "utilization": _F, "utilization_forecast": _F, "waiting_time_s": _F,
        "waiting_time_forecast_s": _F, "utilization_measured": _F, "utilization_error": _F}),
    "remediation": (("system", "kind", "tier"), {
        "rank": _I, "value": _F, "capacity_users": _I, "capacity_before": _I,
        "required_users": _I, "cost": _F, "summary": _S, "capacity_rate_per_s": _F,
        "required_rate_per_s": _F, "capacity_before_rate_per_s": _F}),
    "alert": (("system", "alert", "class", "tier", "trust", "statistic"), {
        "state": _S, "active": _I, "value": _F, "threshold": _F, "time_to_breach_s": _F,
        "summary": _S, "update": _S, "basis": _S, "trigger": _S}),
    "deadletter": (("system", "field"), {"reason": _S, "count": _I}),
}

#: measurement -> the output type its points are read from (``None``: the remediation's
#: actions, plain records of :func:`streams.predict.whatif.remediate`)
RECORDS: dict[str, type | None] = {
    "tier_estimate": TierEstimate, "demand": ClassDemand, "prediction": Prediction,
    "class_prediction": ClassPrediction, "tier_prediction": TierPrediction,
    "pool_prediction": PoolPrediction, "remediation": None, "alert": Alert,
    "deadletter": DeadLetter}

#: measurement -> the tags and fields a point has beyond its record's: the keys of the
#: record's parent (a class's, a tier's name) and what the point counts
ADDED: dict[str, tuple[str, ...]] = {
    "tier_estimate": (), "demand": ("system", "tier", "class"), "prediction": (),
    "class_prediction": ("system", "class",
                         *(f"response_time_{q}_s" for q in QUANTILE_FIELDS),
                         *(f"response_time_forecast_{q}_s" for q in QUANTILE_FIELDS)),
    "tier_prediction": ("system", "tier"),
    "pool_prediction": ("system", "pool"), "remediation": (), "alert": ("active",),
    "deadletter": ("count",)}


@dataclass(frozen=True)
class Point:
    """One point: ``measurement``, ``tags`` (strings), ``fields`` (no ``None``), ``time`` (s)."""

    measurement: str
    tags: dict[str, str]
    fields: dict[str, Any]
    time: float


_CONVERT = {_F: float, _I: int, _B: bool}


def _str_field(value: Any) -> str:
    return value if isinstance(value, str) else ";".join(map(str, value))


def _attribute(kind: type | None, name: str) -> str:
    """The attribute of ``kind`` that holds JSON key ``name`` (``class``: ``class_``)."""
    if kind is None:
        return name
    fields = dict(zip(kind.__struct_encode_fields__, kind.__struct_fields__))
    return fields.get(name, name)


def reader(measurement: str, names: tuple[str, ...] | list[str]
           ) -> Callable[[Any, str], Any]:
    """``read(record, name)``: the value of tag or field ``name`` of a ``measurement``
    record, ``None`` when unknown -- its attribute (an ``UNSET`` one is unknown), or the key
    of a plain record (:data:`RECORDS`)."""
    kind = RECORDS[measurement]
    if kind is None:
        return lambda record, name: record.get(name)
    attrs = {n: _attribute(kind, n) for n in names}

    def read(record: Any, name: str) -> Any:
        value = getattr(record, attrs[name], None)
        return None if value is UNSET else value
    return read


#: measurement -> (tag names, [(field, converter)], reader)
_SPECS = {m: (tags, [(f, _CONVERT.get(kind, _str_field)) for f, kind in types.items()],
              reader(m, tags + tuple(types)))
          for m, (tags, types) in MEASUREMENTS.items()}


def _point(measurement: str, record: Any, time: float,
           added: Mapping[str, Any] | None = None) -> Point | None:
    tag_names, fields_spec, read = _SPECS[measurement]
    tag_values = {}
    for t in tag_names:
        v = added[t] if added and t in added else read(record, t)
        if v is not None:
            tag_values[t] = str(v)
    fields: dict[str, Any] = {}
    for name, convert in fields_spec:
        value = added[name] if added and name in added else read(record, name)
        if value is not None:
            fields[name] = convert(value)
    return Point(measurement, tag_values, fields, time) if fields else None


#: one point before conversion: (measurement, record, time, tags and fields beyond the
#: record's, :data:`ADDED`)
Source = tuple[str, Any, float, "Mapping[str, Any] | None"]


def _quantile_fields(part: ClassPrediction) -> dict[str, float]:
    """A class's predicted quantiles as ``class_prediction`` fields (:data:`QUANTILE_FIELDS`;
    none without them)."""
    out = {}
    for prefix, quantiles in (("response_time_", part.response_time_quantiles_s),
                              ("response_time_forecast_",
                               part.response_time_quantiles_forecast_s)):
        if quantiles is not UNSET:
            out.update({f"{prefix}{q}_s": v for q in QUANTILE_FIELDS
                        if (v := quantiles.get(q)) is not None})
    return out


def _prediction_sources(pred: Prediction) -> Iterator[Source]:
    t = pred.time
    system = pred.system
    yield "prediction", pred, t, None
    for cls, values in (pred.classes or {}).items():
        yield "class_prediction", values, t, {"system": system, "class": cls,
                                              **_quantile_fields(values)}
    for tier, values in (pred.tiers or {}).items():
        yield "tier_prediction", values, t, {"system": system, "tier": tier}
        for cls, d in values.demands.items():
            yield "demand", d, t, {"system": system, "tier": tier, "class": cls}
    for pool, values in (pred.pools or {}).items():
        yield "pool_prediction", values, t, {"system": system, "pool": pool}
    remedy = pred.remediation
    for rank, action in enumerate((remedy or {}).get("actions") or [], start=1):
        yield "remediation", {**action, "rank": rank,
                              "capacity_before": remedy["capacity_before"],
                              "required_users": remedy["required_users"],
                              **{k: remedy[k] for k in ("required_rate_per_s",
                                                        "capacity_before_rate_per_s")
                                 if k in remedy},
                              }, t, {"system": system}


def sources(out: Outputs, *, deadletter_time: float | None = None) -> Iterator[Source]:
    """Every point of one step's outputs, before conversion (:func:`points`; the InfluxDB
    sink formats them straight to line protocol, :func:`streams.sinks.influx.lines`). Dead letters
    carry no trusted time: they are stamped with ``deadletter_time`` (the wall clock of the
    shell that received them), and left out without it."""
    for est in out.estimates:
        yield "tier_estimate", est, est.end, None
    for pred in out.predictions:
        yield from _prediction_sources(pred)
    for alert in out.alerts:
        yield "alert", alert, alert.time, {"active": int(alert.state == "firing")}
    if deadletter_time is not None:
        for dead in out.deadletter:
            yield "deadletter", dead, deadletter_time, {"count": 1}


def points(out: Outputs, *, deadletter_time: float | None = None) -> list[Point]:
    """All points of one step's outputs (:func:`sources`); a record without any field of its
    measurement gives no point."""
    made = (_point(*src) for src in sources(out, deadletter_time=deadletter_time))
    return [p for p in made if p is not None]
