"""The report's charts: a system's charts on its shared time axis, the overview's, and the
alerts on one timeline.

Every time chart of a system spans the system's solves and marks when the predicted-breach
alert fired and when the measured response time broke the SLA, so the lead time reads at a
glance; the overview's charts draw the most urgent systems (:func:`.load.urgency`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, TypeVar

from streams.predict.confidence import BAND_EVERY
from streams.sinks.report.axes import time_ticks
from streams.sinks.report.bounds import (MAX_CHART_CLASSES, MAX_CHART_TIERS,
                                         MAX_OVERVIEW_SERIES, MAX_TIMELINE_ROWS)
from streams.sinks.report.episodes import ALERT_NAMES, Episode, breach_spans, episodes
from streams.sinks.report.load import StoreData, SystemData, urgency
from streams.sinks.report.palette import ALERT_COLORS, AMBER, GREY, INK, PALETTE, RED
from streams.sinks.report.rows import ClassPredictionRow
from streams.sinks.report.svg import Marker, Rule, Series, Span, TimeChart
from streams.sinks.report.text import duration, esc, utc

__all__ = ["SystemCharts", "overview_charts", "alert_timeline"]


class _Timed(Protocol):
    """A row at an event time."""

    @property
    def time(self) -> float: ...


T = TypeVar("T", bound=_Timed)


def _alert_markers(system: SystemData, kinds: Sequence[str] = ("predicted_breach",
                                                                "current_breach")) -> list[Marker]:
    out = []
    for e in episodes(system):
        if e.alert not in kinds:
            continue
        if e.alert == "current_breach" and any(
                a <= e.start < b and a < e.start for a, b in breach_spans(system, system.end)):
            continue                  # the system was already in breach: one marker per span
        label = f"{ALERT_NAMES[e.alert]} {utc(e.start, '%H:%M')}"
        out.append(Marker(e.start, label, ALERT_COLORS[e.alert], e.fired.summary or ""))
    return out


def _switch_markers(system: SystemData) -> list[Marker]:
    """A grey line at every switch of model family (``model_switch``,
    :mod:`streams.predict.story`)."""
    return [Marker(p.time, f"{p.model_switch.replace('->', '→')} "
                           f"{utc(p.time, '%H:%M')}", GREY,
                   p.model_switch_reason or "", kind="switch")
            for p in system.predictions if p.model_switch]


# -- per-system charts ---------------------------------------------------------------------------

def _col(rows: Sequence[T], value: Callable[[T], float | None],
         scale: float = 1.0) -> tuple[list[float], list[float | None]]:
    """The times of ``rows`` and ``value`` of each, times ``scale`` (``None``: unknown)."""
    values = [value(r) for r in rows]
    return [r.time for r in rows], [None if v is None else float(v) * scale for v in values]


def _capped(col: tuple[list[float], list[float | None]],
            cap: float) -> tuple[list[float], list[float | None]]:
    """Values above ``cap`` drawn at ``cap`` (the axis's end)."""
    return col[0], [None if v is None else min(v, cap) for v in col[1]]


def _colors(names: Iterable[str]) -> dict[str, str]:
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def _sla_rules(system: SystemData) -> list[Rule]:
    by_value: dict[float, list[str]] = {}
    for cls, rows in system.classes.items():
        slas = [r.sla_s for r in rows if r.sla_s is not None]
        if slas:
            by_value.setdefault(float(slas[-1]), []).append(cls)
    if len(by_value) == 1:
        return [Rule(next(iter(by_value)), f"SLA {next(iter(by_value)):g} s")]
    return [Rule(v, f"SLA {v:g} s ({', '.join(c)})") for v, c in sorted(by_value.items())]


def _slo_rules(system: SystemData, classes: Sequence[str]) -> list[Rule]:
    """A line per quantile SLO bound among ``classes`` (their last rows' ``slo_statistic``
    where it is a quantile), classes of equal statistic and bound together."""
    by_bound: dict[tuple[str, float], list[str]] = {}
    for cls in classes:
        last = next((r for r in reversed(system.classes[cls])
                     if r.slo_statistic not in (None, "mean") and r.slo_bound_s is not None),
                    None)
        if last is not None:
            by_bound.setdefault((str(last.slo_statistic), float(last.slo_bound_s)),
                                []).append(cls)
    return [Rule(v, f"{stat} SLO {v:g} s" + ("" if len(by_bound) == 1 else f" ({', '.join(c)})"))
            for (stat, v), c in sorted(by_bound.items(), key=lambda kv: kv[0][1])]


class SystemCharts:
    """The charts of one system's section, on its shared time axis with its alert marks."""

    def __init__(self, system: SystemData) -> None:
        self.s = system
        self.t0, self.t1 = system.start, system.end
        self.markers = _alert_markers(system)
        self.spans = [Span(a, b, RED, "SLA broken (measured)")
                      for a, b in breach_spans(system, self.t1)]
        self.classes = _busiest(system.classes, MAX_CHART_CLASSES)
        self.tiers = list(system.tiers)[:MAX_CHART_TIERS]
        self.class_colors = _colors(self.classes)
        self.tier_colors = _colors(self.tiers)

    def chart(self, key: str, title: str, y_label: str, **kw: Any) -> TimeChart:
        kw.setdefault("markers", self.markers)
        kw.setdefault("spans", self.spans)
        return TimeChart(key, title, y_label, self.t0, self.t1, **kw)

    def _measured_vs_predicted(self, measured: Callable[[ClassPredictionRow], float | None],
                               predicted: Callable[[ClassPredictionRow], float | None]
                               ) -> list[Series]:
        """Per class: the measured value as points, the predicted one (the model now)
        dashed."""
        series = []
        for cls in self.classes:
            rows = self.s.classes[cls]
            c = self.class_colors[cls]
            series += [Series("measured", *_col(rows, measured), c, "points", group=cls),
                       Series("predicted", *_col(rows, predicted), c, "dashed", group=cls)]
        return series

    def response_time(self) -> TimeChart:
        return self.chart("response_time", "Response time per class: measured vs predicted, "
                          "and SLA", "response time (s)",
                          series=self._measured_vs_predicted(lambda r: r.response_time_measured,
                                                            lambda r: r.response_time),
                          rules=_sla_rules(self.s))

    def percentiles(self) -> TimeChart | None:
        """Per class with predicted quantiles (a quantile SLO, or ``predict_quantiles =
        "always"``): the model's p50, p95 and p99 now, the value of its SLO statistic where
        that is another quantile, and each quantile SLO's bound; ``None`` without any."""
        classes = [c for c in self.classes
                   if any(r.response_time_p95_s is not None for r in self.s.classes[c])]
        if not classes:
            return None
        series = []
        for cls in classes:
            rows, color = self.s.classes[cls], self.class_colors[cls]
            series += [Series("p50 predicted", *_col(rows, lambda r: r.response_time_p50_s),
                              color, "dotted", group=cls),
                       Series("p95 predicted", *_col(rows, lambda r: r.response_time_p95_s),
                              color, "line", group=cls),
                       Series("p99 predicted", *_col(rows, lambda r: r.response_time_p99_s),
                              color, "dashed", group=cls)]
            other = {r.slo_statistic for r in rows} - {None, "mean", "p50", "p95", "p99"}
            for stat in sorted(other):
                series.append(Series(f"{stat} predicted (its SLO)", *_col(
                    rows, lambda r, s=stat: r.response_time_slo_s if r.slo_statistic == s
                    else None), color, "points", group=cls))
        return self.chart("percentiles", "Response-time percentiles per class: predicted, "
                          "and the percentile SLO", "response time (s)", series=series,
                          rules=_slo_rules(self.s, classes),
                          note="The model's response-time law at the current population "
                               "(docs/model.md): a quantile SLO holds where its line stays "
                               "below the bound. The chart beside it shows the mean.")

    def throughput(self) -> TimeChart:
        return self.chart("throughput", "Throughput per class: measured vs predicted",
                          "throughput (requests/s)",
                          series=self._measured_vs_predicted(lambda r: r.throughput_measured,
                                                            lambda r: r.throughput))

    def utilization(self) -> TimeChart:
        series = []
        for tier in self.tiers:
            rows = self.s.tiers[tier]
            c = self.tier_colors[tier]
            series += [Series("measured", *_col(rows, lambda r: r.utilization_measured, 100), c,
                              "points", group=tier),
                       Series("predicted now", *_col(rows, lambda r: r.utilization, 100), c,
                              "dashed", group=tier),
                       Series("predicted at the forecast population",
                              *_col(rows, lambda r: r.utilization_forecast, 100), c, "dotted",
                              width=1.5, group=tier)]
        return self.chart("utilization", "Utilization per tier: measured vs predicted (now and "
                          "at the forecast population)", "utilization (%)", series=series,
                          y_max=100.0)

    def pools(self) -> TimeChart:
        """Per pool the model's tokens held over its size, now and at the forecast, and the
        measured one where the windows carry the pool's ``busy`` tokens (points, as the
        tiers' measured utilization)."""
        names = list(self.s.pools)[:MAX_CHART_TIERS]
        colors = _colors(names)
        series = []
        for pool in names:
            rows = self.s.pools[pool]
            size = rows[-1].size
            group = pool if size is None else f"{pool} ({size})"
            if any(r.utilization_measured is not None for r in rows):
                series.append(Series("measured", *_col(rows, lambda r: r.utilization_measured,
                                                       100), colors[pool], "points",
                                     group=group))
            series += [Series("predicted now", *_col(rows, lambda r: r.utilization, 100),
                              colors[pool], "dashed", group=group),
                       Series("predicted at the forecast population",
                              *_col(rows, lambda r: r.utilization_forecast, 100), colors[pool],
                              "dotted", width=1.5, group=group)]
        return self.chart("pools", "Pool utilization: tokens held over size (measured, and "
                          "predicted now and at the forecast population)", "pool utilization (%)",
                          series=series, y_max=100.0)

    def dispersion(self) -> TimeChart:
        thr = self.s.thresholds.idc
        series = [Series(tier, *_col(self.s.tiers[tier], lambda r: r.idc), self.tier_colors[tier],
                         "points") for tier in self.tiers]
        return self.chart(
            "dispersion", "Index of dispersion per tier vs the bursty threshold",
            "index of dispersion I (log)", series=series, log=True,
            rules=[Rule(thr, f"idc_threshold {thr:g}: above, MAP network")],
            note=f"I of each tier's service process from utilization and completions (paper "
                 f"000 Fig. 2); above the threshold (from the "
                 f"{esc(self.s.thresholds.source)}) the tier is bursty and solved with its "
                 f"fitted MAP(2) instead of MVA.")

    def demand(self, tier: str) -> TimeChart:
        series = []
        per_class = self.s.demands.get(tier, {})
        for cls in [c for c in self.classes if c in per_class] or list(per_class)[
                :MAX_CHART_CLASSES]:
            rows = per_class[cls]
            c = self.class_colors.get(cls, GREY)
            t, k = _col(rows, lambda r: r.kalman, 1000)
            _, sd = _col(rows, lambda r: r.std, 1000)
            lower = [None if a is None or b is None else max(a - 2 * b, 0.0)
                     for a, b in zip(k, sd)]
            upper = [None if a is None or b is None else a + 2 * b for a, b in zip(k, sd)]
            series += [Series("Kalman ±2σ", t, [None] * len(t), c, "band", lower, upper,
                              group=cls),
                       Series("Kalman", t, k, c, "line", group=cls),
                       Series("regression", *_col(rows, lambda r: r.regression, 1000), c, "points",
                              group=cls)]
        return self.chart("demand", f"Service demand per class on tier {tier}: Kalman ±2σ and "
                          "regression", "demand (ms per request)", series=series,
                          attrs={"tier": tier})

    def bottleneck(self) -> TimeChart:
        series = [Series("bottleneck-switch probability",
                         *_col(self.s.predictions, lambda p: p.bottleneck_switch_probability), INK,
                         "line", width=2.5)]
        series += [Series(f"{tier} is the bottleneck",
                          *_col(self.s.tiers[tier], lambda r: r.bottleneck_probability),
                          self.tier_colors[tier], "dashed")
                   for tier in self.tiers]
        return self.chart("bottleneck", "Bottleneck-switch probability (at the breach point)",
                          "probability", series=series, y_max=1.0,
                          note="1 − max<sub>m</sub> B<sub>m</sub>: the chance that the "
                               "bottleneck is not the usual tier (Mi et al. 2008, section 3.4; "
                               "0 under MVA, which cannot switch).")

    def capacity(self) -> TimeChart:
        p = self.s.predictions
        t, lower = _col(p, lambda r: r.capacity_users_lower)
        series = [Series("capacity band (estimators' uncertainty)", t, [None] * len(t),
                         "#2E7D32", "band", lower, _col(p, lambda r: r.capacity_users_upper)[1]),
                  Series("capacity (users within SLA)", *_col(p, lambda r: r.capacity_users),
                         "#2E7D32", "line", width=2.5),
                  Series("users now", *_col(p, lambda r: r.users), PALETTE[0], "points"),
                  Series("users at the horizon (forecast)", *_col(p, lambda r: r.users_forecast),
                         PALETTE[0], "dashed")]
        return self.chart("capacity", "Capacity vs users, with its uncertainty band", "users",
                          series=series, markers=self.markers + _switch_markers(self.s),
                          note="The SLA breaks where users cross capacity; the forecast is the "
                               "users trend extrapolated over the horizon. The band: capacity "
                               "with every demand at ±1.645 standard errors (Kalman "
                               "covariance) and a bursty tier's I at the ends of its "
                               "confidence interval, computed when a breach is near and on "
                               f"every {BAND_EVERY}th solve (bridged between). A grey line "
                               "marks a switch of model (MVA ↔ MAP network): capacity jumps "
                               "there.")

    def rate_capacity(self) -> TimeChart:
        """An open system's capacity chart: the request rate against the capacity in req/s."""
        p = self.s.predictions
        t, lower = _col(p, lambda r: r.capacity_rate_per_s_lower)
        series = [Series("capacity band (estimators' uncertainty)", t, [None] * len(t),
                         "#2E7D32", "band", lower,
                         _col(p, lambda r: r.capacity_rate_per_s_upper)[1]),
                  Series("capacity (requests/s within SLA)",
                         *_col(p, lambda r: r.capacity_rate_per_s), "#2E7D32", "line",
                         width=2.5),
                  Series("saturation (busiest tier full)",
                         *_col(p, lambda r: r.saturation_rate_per_s), GREY, "dotted"),
                  Series("request rate now", *_col(p, lambda r: r.arrival_rate_per_s),
                         PALETTE[0], "points"),
                  Series("rate at the horizon (forecast)",
                         *_col(p, lambda r: r.arrival_rate_forecast_per_s), PALETTE[0],
                         "dashed")]
        return self.chart("capacity", "Capacity vs request rate (open workload), with its "
                          "uncertainty band", "requests/s", series=series,
                          markers=self.markers + _switch_markers(self.s),
                          note="An open service is driven by its request rate: the SLA "
                               "breaks where the rate crosses the capacity (the largest rate "
                               "at the current class mix within every SLA, of the open "
                               "model); the forecast is the rate trend extrapolated over the "
                               "horizon; past the saturation rate the model is unstable. The "
                               "band: the capacity with every demand at ±1.645 standard "
                               "errors and a bursty tier's I at the ends of its interval.")

    def model_error(self) -> TimeChart:
        thr = self.s.thresholds.model_error
        p = self.s.predictions
        series = [Series("response time error", *_col(p, lambda r: r.model_error, 100), PALETTE[3],
                         "points"),
                  Series("worst class's response time error",
                         *_col(p, lambda r: r.model_error_class_max, 100), PALETTE[5], "dotted"),
                  Series("throughput error", *_col(p, lambda r: r.throughput_error, 100),
                         PALETTE[4], "dashed")]
        if any(r.pool_error_pooled is not None for r in p):
            series.append(Series("worst pool's utilization error, pooled",
                                 *_col(p, lambda r: r.pool_error_pooled, 100), PALETTE[6],
                                 "dotted"))
        markers = self.markers + _alert_markers(self.s, ("model_error",)) \
            + _switch_markers(self.s)
        return self.chart("model_error", "Model error: predicted vs measured at the current "
                          "load", "relative error (%)", series=series, markers=markers,
                          rules=[Rule(100 * thr, f"model_error_threshold {100 * thr:g}%")])

    def all(self) -> list[TimeChart]:
        tiers = (self.tiers + [t for t in self.s.demands if t not in self.s.tiers])[
            :MAX_CHART_TIERS]
        opened = bool(self.s.predictions) and self.s.predictions[-1].open
        quantiles = self.percentiles()
        return ([self.response_time()] + ([quantiles] if quantiles else [])
                + [self.rate_capacity() if opened else self.capacity(),
                   self.throughput(), self.utilization()]
                + ([self.pools()] if self.s.pools else []) + [self.dispersion()]
                + [self.demand(t) for t in tiers]
                + [self.bottleneck(), self.model_error()])


def _busiest(classes: Mapping[str, list[ClassPredictionRow]], limit: int) -> list[str]:
    """The ``limit`` classes with the most measured throughput at their last solve (all
    when there are no more), in the store's order."""
    if len(classes) <= limit:
        return list(classes)
    load = {c: (rows[-1].throughput_measured or 0.0) if rows else 0.0
            for c, rows in classes.items()}
    keep = set(sorted(classes, key=lambda c: -load[c])[:limit])
    return [c for c in classes if c in keep]


def overview_charts(data: StoreData, ranked: Sequence[SystemData]) -> list[TimeChart]:
    """Headroom and time to breach over time of the :data:`MAX_OVERVIEW_SERIES` first of
    ``ranked`` (the systems, most urgent first), on the store's time span."""
    charted = ranked[:MAX_OVERVIEW_SERIES]
    colors = _colors(s.name for s in charted)
    t0, t1 = data.start, data.end
    headroom = TimeChart("headroom", "Headroom over time (users below capacity)", "users",
                         t0, t1, y_min=None, series=[
                             Series(s.name, *_col(s.predictions, lambda p: p.headroom_users),
                                    colors[s.name], "line") for s in charted],
                         rules=[Rule(0.0, "capacity reached")])
    horizons = sorted({p.horizon_s for s in data.systems for p in s.predictions
                       if p.horizon_s})
    cap = 3 * max(horizons, default=900.0) / 60
    most = (f" ({len(charted)} most urgent systems of {len(ranked)})"
            if len(charted) < len(ranked) else "")
    headroom = replace(headroom, title=headroom.title + most)
    ttb = TimeChart("time_to_breach", "Time to SLA breach over time (gaps: no breach "
                    f"ahead; axis ends at 3× the horizon){most}", "minutes", t0, t1,
                    y_max=cap, series=[
                        Series(s.name, *_capped(_col(s.predictions,
                                                     lambda p: p.time_to_breach_s, 1 / 60),
                                                cap), colors[s.name], "points")
                        for s in charted],
                    rules=[Rule(h / 60, f"horizon {duration(h)}", AMBER) for h in horizons])
    return [headroom, ttb]


def alert_timeline(data: StoreData) -> str:
    """Every alert episode of every system as a bar on one time axis (inline SVG)."""
    t0, t1 = data.start, data.end
    if t1 <= t0:
        t0, t1 = t0 - 30.0, t1 + 30.0
    rows: list[tuple[str, list[Episode]]] = []
    for s in sorted(data.systems, key=urgency):
        by_row: dict[str, list[Episode]] = {}
        for e in episodes(s):
            by_row.setdefault(f"{s.name} · {e.row}", []).append(e)
        order = sorted(by_row, key=lambda k: ("predicted_breach", "current_breach",
                                              "model_error").index(by_row[k][0].alert)
                       if by_row[k][0].alert in ALERT_COLORS else 9)
        rows += [(k, by_row[k]) for k in order]
    hidden = len(rows) - MAX_TIMELINE_ROWS
    rows = rows[:MAX_TIMELINE_ROWS]
    left, right, top, row_h, width = 230, 16, 10, 24, 1000
    plot_w = width - left - right
    height = top + row_h * max(len(rows), 1) + 40
    x = lambda t: left + (t - t0) / (t1 - t0) * plot_w                      # noqa: E731
    out = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="alerts on the '
           f'timeline"><rect x="{left}" y="{top}" width="{plot_w}" '
           f'height="{row_h * max(len(rows), 1)}" class="plot"/>']
    ticks, fmt = time_ticks(t0, t1, 12)
    bottom = top + row_h * max(len(rows), 1)
    for t in ticks:
        out.append(f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{bottom}" '
                   f'class="grid"/><text x="{x(t):.1f}" y="{bottom + 15}" class="tick" '
                   f'text-anchor="middle">{utc(t, fmt)}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" class="axis-label" '
               f'text-anchor="middle">event time (UTC)</text>')
    if not rows:
        out.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + row_h / 2 + 4:.1f}" '
                   f'class="no-data" text-anchor="middle">no alert fired</text>')
    if hidden > 0:
        out.append(f'<text x="{left}" y="{height - 4}" class="tick">+{hidden} more rows '
                   f'(size bound)</text>')
    for i, (label, eps) in enumerate(rows):
        yy = top + i * row_h
        out.append(f'<text x="{left - 8}" y="{yy + row_h / 2 + 4:.1f}" class="row-label" '
                   f'text-anchor="end">{esc(label)}</text>')
        for e in eps:
            color = ALERT_COLORS.get(e.alert, GREY)
            a = x(e.start)
            b = x(e.end if e.end is not None else t1)
            w = max(b - a, 3.0)
            state = "resolved " + utc(e.end, "%H:%M") if e.end is not None else "still firing"
            tip = f"{utc(e.start, '%H:%M:%S')} fired, {state}: {e.fired.summary or ''}"
            text = utc(e.start, "%H:%M") + ("" if e.end is not None else " →")
            inside = w >= 7.0 * len(text) + 8
            label = (f'<text x="{a + 5:.1f}" y="{yy + row_h / 2 + 4:.1f}" class="bar-label">'
                     if inside else
                     f'<text x="{a - 4:.1f}" y="{yy + row_h / 2 + 4:.1f}" class="bar-label '
                     f'outside" text-anchor="end" style="fill:{color}">')
            out.append(f'<g class="episode" data-alert="{esc(e.alert)}">'
                       f'<title>{esc(tip)}</title><rect x="{a:.1f}" y="{yy + 5}" '
                       f'width="{w:.1f}" height="{row_h - 10}" rx="3" fill="{color}" '
                       f'fill-opacity="{0.9 if e.end is None else 0.6}"/>'
                       f'{label}{esc(text)}</text></g>')
    out.append("</svg>")
    return "".join(out)
