"""Flux queries of the dashboards and alert rules, built from the InfluxDB schema.

Every query reads perfcast's own measurements (:data:`streams.sinks.schema.MEASUREMENTS`); the
builders refuse a measurement, field or tag the schema does not have, so a renamed field
breaks generation, not a dashboard in production.

The queries use Grafana's Flux macros, which Grafana's InfluxDB data source replaces by text
before it sends the query (``pkg/tsdb/influxdb/flux/macros.go``): ``v.timeRangeStart`` and
``v.timeRangeStop`` (RFC 3339 times of the panel's range), ``v.windowPeriod`` (the panel's
interval, a duration such as ``1m0s``) and ``v.defaultBucket`` (the data source's default
bucket, quoted), plus the dashboard variables ``${system}`` and ``${tier}``, which the
dashboard replaces before that. :func:`render` performs the same substitutions, so that the
tests can run every query against a real InfluxDB. The functions used (``pivot``, ``last``,
``aggregateWindow``, ``map`` ...) exist in the Flux of InfluxDB 1.8 and 2.x alike.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence

from streams.sinks.schema import MEASUREMENTS

__all__ = ["QueryError", "check", "series", "band", "latest", "latest_alert", "active_alerts",
           "alert_events", "events", "newest_rows", "tag_values", "render"]

#: the first lines of every query: perfcast's bucket over the panel's time range
_HEAD = ("from(bucket: v.defaultBucket)\n"
         "  |> range(start: v.timeRangeStart, stop: v.timeRangeStop)")


#: the last lines of a time series query: one frame per line, named by ``series``
_BY_SERIES = ('  |> keep(columns: ["_time", "_value", "series"])\n'
              '  |> group(columns: ["series"])')


class QueryError(ValueError):
    """A query names a measurement, field or tag that :data:`MEASUREMENTS` does not have."""


def check(measurement: str, fields: Iterable[str] = (), tags: Iterable[str] = ()) -> None:
    """Raise :class:`QueryError` unless ``measurement`` has every one of ``fields`` and
    ``tags``."""
    if measurement not in MEASUREMENTS:
        raise QueryError(f"measurement {measurement!r}: not in streams.sinks.schema.MEASUREMENTS")
    tag_names, types = MEASUREMENTS[measurement]
    for f in fields:
        if f not in types:
            raise QueryError(f"{measurement}.{f}: no such field (fields: {sorted(types)})")
    for t in tags:
        if t not in tag_names:
            raise QueryError(f"{measurement}: no tag {t!r} (tags: {list(tag_names)})")


def _col(name: str) -> str:
    """A column of the row ``r`` (bracket syntax: ``class`` reads like a keyword)."""
    return f'r["{name}"]'


def _select(measurement: str, fields: Sequence[str], where: Mapping[str, str]) -> str:
    """Head, measurement and fields, and equality filters on tags (values may be variables
    such as ``${system}``)."""
    check(measurement, fields, where)
    field_test = " or ".join(f'r._field == "{f}"' for f in fields)
    tests = [f'r._measurement == "{measurement}"', f"({field_test})" if len(fields) > 1
             else field_test]
    tests += [f'{_col(tag)} == "{value}"' for tag, value in where.items()]
    return f"{_HEAD}\n  |> filter(fn: (r) => {' and '.join(tests)})"


def series(measurement: str, field: str, name: str, *, where: Mapping[str, str] | None = None,
           fn: str = "mean") -> str:
    """A time series per value of ``name``: ``field`` aggregated (``fn``) over windows of the
    panel's interval, one line per distinct ``name`` -- a Flux string expression over the row
    ``r``, e.g. ``r["class"] + " measured"`` -- in a column ``series`` (the display name)."""
    return (f"{_select(measurement, [field], where or {})}\n"
            f"  |> aggregateWindow(every: v.windowPeriod, fn: {fn}, createEmpty: false)\n"
            f"  |> map(fn: (r) => ({{_time: r._time, _value: r._value, series: {name}}}))\n"
            f"{_BY_SERIES}")


def band(measurement: str, centre: str, spread: str, k: float, name: str, *,
         where: Mapping[str, str] | None = None) -> str:
    """``centre + k * spread`` per point (both fields of one point, e.g. Kalman demand and
    its standard deviation), one line per ``name`` as in :func:`series`."""
    return (f"{_select(measurement, [centre, spread], where or {})}\n"
            f'  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")\n'
            f"  |> map(fn: (r) => ({{_time: r._time, _value: r.{centre} + {k!r} * r.{spread},"
            f" series: {name}}}))\n"
            f"{_BY_SERIES}")


def latest(measurement: str, fields: Sequence[str], by: Sequence[str], *, anchor: str,
           where: Mapping[str, str] | None = None, table: bool = False) -> str:
    """The fields of the last point per ``by`` (tags), as of the end of the range.

    The last point is the last one that has ``anchor``, a field written at every point (e.g.
    ``horizon_s`` of a prediction): a field that is unknown at that point (``time_to_breach_s``
    when no breach is ahead) is null, not the value of an older point. ``table``: one flat
    table (for table panels); else one frame per ``by`` (labelled, for stats and gauges).
    """
    check(measurement, [*fields, anchor], by)
    wanted = list(dict.fromkeys([anchor, *fields]))
    query = (f"{_select(measurement, wanted, where or {})}\n"
             f'  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")\n'
             f"  |> group(columns: {_list(by)})\n"
             f'  |> sort(columns: ["_time"])\n'
             f'  |> last(column: "{anchor}")\n')
    if table:
        query += "  |> group()\n"
    return query + f'  |> keep(columns: {_list(["_time", *by, *fields])})'


def latest_alert(kind: str, field: str, identity: Sequence[str],
                 labels: Sequence[str]) -> str:
    """Per alert of ``kind``, ``field`` of its last ``alert`` point, as ``_value`` labelled
    by ``labels`` -- the query of an alert rule.

    An alert is identified as perfcast identifies it: ``predicted_breach`` and ``model_error``
    per system, ``current_breach`` per system and class (``identity``). Its class and tier
    tags may change between the firing and the resolving point (the class predicted to
    break first can change), so the last point is taken per identity, not per series, and
    labelled with the tags of that point.
    """
    check("alert", ["active", field], [*identity, *labels])
    fields = ["active"] if field == "active" else ["active", field]
    return (f'{_select("alert", fields, {"alert": kind})}\n'
            f'  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")\n'
            f"  |> group(columns: {_list(identity)})\n"
            f'  |> sort(columns: ["_time"])\n'
            f'  |> last(column: "active")\n'
            f"  |> map(fn: (r) => ({{r with _value: r.{field}}}))\n"
            f"  |> group(columns: {_list(labels)})\n"
            f'  |> keep(columns: {_list(["_time", "_value", *labels])})')


def active_alerts(kind: str, identity: Sequence[str]) -> str:
    """The alerts of ``kind`` whose last point is ``active`` (firing), as one flat table with
    their tags, summary and the time they started firing."""
    check("alert", ["active", "summary"], identity)
    tags = list(MEASUREMENTS["alert"][0])
    return (f'{_select("alert", ["active", "summary"], {"alert": kind})}\n'
            f'  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")\n'
            f"  |> group(columns: {_list(identity)})\n"
            f'  |> sort(columns: ["_time"])\n'
            f'  |> last(column: "active")\n'
            f"  |> filter(fn: (r) => r.active == 1)\n"
            f"  |> group()\n"
            f'  |> keep(columns: {_list(["_time", *tags, "summary"])})')


def alert_events(where: Mapping[str, str]) -> str:
    """Every alert state change (``firing``/``resolved``) with its summary, newest first."""
    tags = [t for t in MEASUREMENTS["alert"][0] if t not in where]
    return (f'{_select("alert", ["state", "summary"], where)}\n'
            f'  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")\n'
            f"  |> group()\n"
            f'  |> keep(columns: {_list(["_time", *tags, "state", "summary"])})\n'
            f'  |> sort(columns: ["_time"], desc: true)')


def newest_rows(measurement: str, fields: Sequence[str], where: Mapping[str, str], *,
                order: str, limit: int) -> str:
    """The ``limit`` newest points of ``measurement`` as one flat table with their tags,
    ``order`` (a field shown first, e.g. a rank within one time) and ``fields``, newest
    first."""
    check(measurement, [*fields, order], where)
    tags = [t for t in MEASUREMENTS[measurement][0] if t not in where]
    wanted = list(dict.fromkeys([order, *fields]))
    return (f"{_select(measurement, wanted, where)}\n"
            f'  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")\n'
            f"  |> group()\n"
            f'  |> keep(columns: {_list(["_time", *tags, *wanted])})\n'
            f'  |> sort(columns: ["_time"], desc: true)\n'
            f"  |> limit(n: {int(limit)})")


def events(measurement: str, title: str, text: str,
           where: Mapping[str, str] | None = None) -> str:
    """Every point of ``measurement`` that has the string field ``title``, as rows of
    ``_time``, ``title`` and ``text`` (both strings; ``text`` empty when unset): a Grafana
    annotation query (its time, title and text columns)."""
    check(measurement, [title, text], where or {})
    return (f"{_select(measurement, [title, text], where or {})}\n"
            f'  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")\n'
            f'  |> filter(fn: (r) => exists r.{title})\n'
            f"  |> group()\n"
            f'  |> map(fn: (r) => ({{_time: r._time, title: r.{title}, '
            f'text: if exists r.{text} then r.{text} else ""}}))\n'
            f'  |> sort(columns: ["_time"])')


def tag_values(measurement: str, field: str, tag: str,
               where: Mapping[str, str] | None = None) -> str:
    """The distinct values of ``tag`` among the points of ``measurement.field`` in the range,
    in ``_value`` (what Grafana reads for a query variable)."""
    check(measurement, [field], [tag, *(where or {})])
    return (f"{_select(measurement, [field], where or {})}\n"
            f"  |> group(columns: {_list([tag])})\n"
            f'  |> distinct(column: "{tag}")\n'
            f"  |> group()\n"
            f'  |> keep(columns: ["_value"])\n'
            f'  |> sort(columns: ["_value"])')


def _list(names: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{n}"' for n in names) + "]"


# -- what Grafana does to a query before InfluxDB sees it ------------------------------------
_MACRO = re.compile(r"([a-zA-Z]+)\.([a-zA-Z]+)")
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _rfc3339(t: datetime | float) -> str:
    if not isinstance(t, datetime):
        t = datetime.fromtimestamp(t, tz=timezone.utc)
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def render(query: str, *, start: datetime | float, stop: datetime | float, bucket: str,
           window: str = "1m0s", variables: Mapping[str, str] | None = None) -> str:
    """``query`` as InfluxDB receives it from Grafana: dashboard variables (``${name}`` or
    ``$name``) replaced by their values, then the Flux macros replaced as Grafana's
    ``interpolateFluxSpecificVariables`` does (any ``<word>.timeRangeStart`` etc.; times as
    RFC 3339, ``v.windowPeriod`` as a Go duration, the bucket quoted). An unknown variable
    raises ``KeyError``."""
    values = dict(variables or {})

    def variable(m: re.Match[str]) -> str:
        return values[m.group(1) or m.group(2)]

    text = _VARIABLE.sub(variable, query)
    macros = {"timeRangeStart": _rfc3339(start), "timeRangeStop": _rfc3339(stop),
              "windowPeriod": window, "defaultBucket": f'"{bucket}"', "bucket": f'"{bucket}"'}
    return _MACRO.sub(lambda m: macros.get(m.group(2), m.group(0)), text)
