"""Measured response-time quantiles from Prometheus native histograms (the Prometheus source's
``response_time_native_histogram``).

Per tier, ``response_time_native_histogram`` is PromQL giving, per class (its ``class_label``),
the native histogram of the requests of the window, e.g.
``sum by (handler) (rate(http_request_duration_seconds{job="shop"}[{window}]))``: Prometheus
itself takes the window's increase of the cumulative histogram (counter resets, schema changes,
the zero threshold widened -- rules only it knows for native histograms; Prometheus 2.42
answers a binary ``-`` between two histograms with no histogram). ``rate`` or ``increase``
give the same quantiles (one is the other scaled). The query is evaluated on the source's
grid of window ends (``query_range``) and the window's ``response_time_quantiles_s`` of
each class at the tier's ``quantiles`` are those of its histogram at the window's end, by
Prometheus' own rule (:func:`estimators.native_histogram.native_quantile`): so they are what
``histogram_quantile(q, <the query>)`` evaluates to there.

Rules (as rule 7 of :mod:`streams.sources.window_rules` for classic histograms):

- an answer of another shape than the HTTP API's (``histograms`` of
  ``[time, {count, sum, buckets}]``), or float samples where histograms are due (a classic
  histogram's series, a float expression), is refused: an :class:`AnswerError` naming the path
  (a dead letter of the run; the tier's windows are made without quantiles);
- a class with no histogram at the window's end, or none holding an observation, has no
  quantiles;
- a class given by more than one series (the query does not aggregate by the class label), or
  whose histogram is broken (a negative or NaN count, buckets not rising, negative
  observations; :func:`estimators.native_histogram.check_native`), has none either, and the
  window says why: a :class:`Gap` with ``made = True`` naming
  ``response_time_quantiles_s.CLASS`` and the field (the window itself is made).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from estimators.histogram import HistogramError, level_name
from estimators.native_histogram import native_quantile
from streams.sources.prometheus import MAX_SAMPLE_TIME, AnswerError, PrometheusSource, series_labels
from streams.sources.window_rules import Gap

__all__ = ["NATIVE_FIELD", "NativeSeries", "parse_native_result", "add_native_quantiles"]

#: the tier setting (and the query's name in messages and dead letters)
NATIVE_FIELD = "response_time_native_histogram"


@dataclass(frozen=True)
class NativeSeries:
    """One series of a native-histogram answer: its labels and, by grid time (ms), the
    histogram's ``count`` and its buckets ``[boundary_rule, lower, upper, count]`` as numbers
    (not yet checked: :func:`estimators.native_histogram.check_native`)."""

    labels: Mapping[str, str]
    points: Mapping[int, tuple[float, list[list[Any]]]]


def _number(text: Any, what: str, path: str) -> float:
    """A number the API writes as a string (``"0.25"``, ``"NaN"``, ``"+Inf"``)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)) \
            or (isinstance(text, str) and len(text) > 64):
        raise AnswerError(what, path, "must be a number as a string", text)
    try:
        return float(text)
    except (ValueError, OverflowError):
        raise AnswerError(what, path, "must be a number as a string", text) from None


def _histogram(point: Any, what: str, path: str) -> tuple[int, tuple[float, list[list[Any]]]]:
    """``[time, {count, sum, buckets}]`` as ``(ms, (count, buckets))``."""
    if not isinstance(point, (list, tuple)) or len(point) != 2:
        raise AnswerError(what, path, "a histogram sample must be [time, {count, sum, "
                                      "buckets}]", point)
    t, body = point
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= MAX_SAMPLE_TIME:
        raise AnswerError(what, f"{path}[0]", f"the time must be epoch seconds within "
                                              f"[0, {MAX_SAMPLE_TIME:g}]", t)
    if not isinstance(body, Mapping) or "count" not in body:
        raise AnswerError(what, f"{path}[1]", "a histogram must be an object with count, sum "
                                              "and buckets", body)
    count = _number(body["count"], what, f"{path}[1].count")
    raw = body.get("buckets", [])
    if not isinstance(raw, list):
        raise AnswerError(what, f"{path}[1].buckets", "must be a list of [boundary_rule, "
                                                      "lower, upper, count]", raw)
    buckets = []
    for k, b in enumerate(raw):
        at = f"{path}[1].buckets[{k}]"
        if not isinstance(b, list) or len(b) != 4:
            raise AnswerError(what, at, "a bucket must be [boundary_rule, lower, upper, count]",
                              b)
        buckets.append([b[0], *(_number(x, what, f"{at}[{j}]") for j, x in enumerate(b[1:], 1))])
    return round(t * 1000), (count, buckets)


def parse_native_result(data: Any, what: str = NATIVE_FIELD) -> list[NativeSeries]:
    """The ``data`` of a ``query_range`` (matrix: ``histograms``) or ``query`` (vector:
    ``histogram``) answer of native histograms, timestamps in milliseconds. Another shape, or
    float samples (``values``/``value``) in a series, is an :class:`AnswerError` naming
    ``what`` and the field."""
    if not isinstance(data, Mapping):
        raise AnswerError(what, "data", "must be an object", data)
    kind, result = data.get("resultType"), data.get("result")
    if kind not in ("matrix", "vector"):
        raise AnswerError(what, "data.resultType", "must be matrix or vector (native "
                                                   "histograms)", kind)
    if not isinstance(result, list):
        raise AnswerError(what, "data.result", "must be a list of series", result)
    out = []
    for i, item in enumerate(result):
        where = f"data.result[{i}]"
        if not isinstance(item, Mapping):
            raise AnswerError(what, where, "must be an object (metric, histograms)", item)
        labels = series_labels(item.get("metric"), what, f"{where}.metric")
        floats = [k for k in ("values", "value") if item.get(k)]
        if floats:
            raise AnswerError(what, f"{where}.{floats[0]}", "float samples where native "
                                                            "histograms are due (a classic "
                                                            "histogram's series? use "
                                                            "response_time_histogram)",
                              labels)
        if "histograms" in item:
            points = item["histograms"]
            if not isinstance(points, list):
                raise AnswerError(what, f"{where}.histograms", "must be a list of histogram "
                                                               "samples", points)
            pairs = [_histogram(p, what, f"{where}.histograms[{j}]")
                     for j, p in enumerate(points)]
        elif "histogram" in item:
            pairs = [_histogram(item["histogram"], what, f"{where}.histogram")]
        else:
            raise AnswerError(what, where, "a series without histograms", labels)
        out.append(NativeSeries(labels=labels, points=dict(pairs)))
    return out


def _class_quantiles(series: Sequence[NativeSeries], end: int, levels: Sequence[float],
                     where: str) -> dict[str, float] | None:
    """One class's quantiles at ``end`` (module docstring), ``None``: none."""
    present = [s.points[end] for s in series if end in s.points]
    if not present:
        return None
    if len(present) > 1:
        raise HistogramError(where, len(present), "the query gave more than one series for "
                                                  "the class: aggregate it by the class label, "
                                                  "e.g. sum by (handler) (rate(m[{window}]))")
    count, buckets = present[0]
    values = {level_name(q): native_quantile(q, count, buckets, f"{where}.histogram")
              for q in levels}
    if any(v is None for v in values.values()):
        return None
    return values                                               # type: ignore[return-value]


def add_native_quantiles(source: PrometheusSource, natives: Mapping[str, list[NativeSeries]],
                         records: list[dict[str, Any]]) -> list[Gap]:
    """Put into each record of a tier with ``response_time_native_histogram`` its classes'
    ``response_time_quantiles_s`` (``natives``: the tier's parsed answer); the classes that
    have none for a reason are returned as gaps with ``made = True``."""
    specs = {t.name: t for t in source.tiers if t.name in natives}
    classes: dict[str, dict[str, list[NativeSeries]]] = {}
    for name, spec in specs.items():
        for s in natives[name]:
            cls = s.labels.get(spec.class_label) or source.missing_class
            classes.setdefault(name, {}).setdefault(cls, []).append(s)
    gaps: list[Gap] = []
    for record in records:
        spec = specs.get(record["tier"])
        if spec is None:
            continue
        by_class = classes.get(spec.name, {})
        end = round(record["end"] * 1000)
        out = {}
        for cls, series in sorted(by_class.items()):
            where = f"response_time_quantiles_s.{cls}"
            try:
                values = _class_quantiles(series, end, spec.quantiles, where)
            except HistogramError as err:
                gaps.append(Gap(spec.name, end, f"{err.field}: {err.reason}; the window made "
                                                f"without the class's quantiles", made=True,
                                field=err.field))
                continue
            if values is not None:
                out[cls] = values
        if out:
            record["response_time_quantiles_s"] = out
    return gaps
