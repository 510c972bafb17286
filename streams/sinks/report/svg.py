"""The chart primitives: series over time, rules, markers and spans drawn as inline SVG.

The page makes no network request and runs no script, so every plot is SVG written here: a
:class:`TimeChart` is one ``<figure>`` with its legend; a series longer than
:data:`~.bounds.MAX_POINTS` is thinned to each bucket's first, min and max (the page's size
bound, and the extremes are what a reader looks for).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from streams.predict.confidence import BAND_EVERY
from streams.sinks.report.axes import log_label, log_ticks, nice_ticks, tick_label, time_ticks
from streams.sinks.report.bounds import MAX_POINTS
from streams.sinks.report.palette import LEGEND_INK, RED
from streams.sinks.report.text import esc, utc

__all__ = ["Series", "Rule", "Marker", "Span", "legend", "TimeChart"]


@dataclass(frozen=True)
class Series:
    """One series over time. ``style``: ``line``, ``dashed``, ``dotted``, ``points`` (markers on
    a faint line: measured values) or ``band`` (``lower``..``upper``, filled)."""

    label: str
    times: Sequence[float]
    values: Sequence[float | None]
    color: str
    style: str = "line"
    lower: Sequence[float | None] = ()
    upper: Sequence[float | None] = ()
    width: float = 2.0
    #: what the colour stands for (a class, a tier); the legend then shows colours and
    #: styles apart (``label`` is the style's meaning: measured, predicted ...)
    group: str = ""


@dataclass(frozen=True)
class Rule:
    """A horizontal line: an SLA or a threshold."""

    value: float
    label: str
    color: str = RED


@dataclass(frozen=True)
class Marker:
    """A vertical line at an event (an alert firing); ``detail`` is its tooltip."""

    time: float
    label: str
    color: str
    detail: str = ""
    #: ``data-`` attribute naming the event's time: an alert's, or a model switch's
    kind: str = "alert"


@dataclass(frozen=True)
class Span:
    """A shaded stretch of time (an SLA breach in progress)."""

    start: float
    end: float
    color: str
    label: str


def _thin(times: Sequence[float], values: Sequence[float | None],
          limit: int = MAX_POINTS) -> tuple[list[float], list[float | None]]:
    """At most ``limit`` points: per bucket the first, the min and the max (gaps kept)."""
    n = len(times)
    if n <= limit:
        return list(times), list(values)
    size = math.ceil(n / (limit // 3))
    keep: set[int] = set()
    for start in range(0, n, size):
        idx = range(start, min(start + size, n))
        known = [i for i in idx if values[i] is not None]
        keep.add(start)
        if known:
            keep.add(min(known, key=lambda i: values[i]))     # type: ignore[arg-type,return-value]
            keep.add(max(known, key=lambda i: values[i]))     # type: ignore[arg-type,return-value]
        # a gap (no value) is kept once per bucket: enough to break the line there
        gap = next((i for i in idx if values[i] is None), None)
        if gap is not None:
            keep.add(gap)
    order = sorted(keep)
    return [times[i] for i in order], [values[i] for i in order]


def _swatch(style: str, color: str) -> str:
    """A small SVG sample of a series style for the legend."""
    head = '<svg class="swatch" width="26" height="12" viewBox="0 0 26 12" aria-hidden="true">'
    if style == "band":
        body = f'<rect x="1" y="2" width="24" height="8" fill="{color}" fill-opacity="0.22"/>'
    elif style == "color":
        body = f'<rect x="4" y="1" width="18" height="10" rx="2" fill="{color}"/>'
    elif style == "points":
        body = (f'<line x1="1" y1="6" x2="25" y2="6" stroke="{color}" stroke-width="1" '
                f'stroke-opacity="0.5"/><circle cx="13" cy="6" r="3" fill="{color}"/>')
    elif style == "marker":
        body = f'<line x1="13" y1="0" x2="13" y2="12" stroke="{color}" stroke-width="2"/>'
    elif style == "span":
        body = f'<rect x="1" y="1" width="24" height="10" fill="{color}" fill-opacity="0.12"/>'
    else:
        dash = {"dashed": ' stroke-dasharray="6 3"', "dotted": ' stroke-dasharray="2 2"',
                "rule": ' stroke-dasharray="7 4"'}.get(style, "")
        body = (f'<line x1="1" y1="6" x2="25" y2="6" stroke="{color}" stroke-width="2"'
                f'{dash}/>')
    return head + body + "</svg>"


def legend(entries: Iterable[tuple[str, str, str]]) -> str:
    """HTML legend of ``(label, style, color)`` entries (duplicates dropped)."""
    seen, items = set(), []
    for label, style, color in entries:
        if label in seen:
            continue
        seen.add(label)
        items.append(f"<li>{_swatch(style, color)}{esc(label)}</li>")
    return f'<ul class="legend">{"".join(items)}</ul>' if items else ""


@dataclass
class TimeChart:
    """A line chart over event time, as an HTML ``<figure>`` holding an inline SVG.

    ``log``: logarithmic y axis (the index of dispersion spans decades); ``y_min``/``y_max``:
    fixed ends (``None``: from the data, the rules included so a threshold is always visible).
    """

    key: str
    title: str
    y_label: str
    t0: float
    t1: float
    series: list[Series] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    log: bool = False
    y_min: float | None = 0.0
    y_max: float | None = None
    note: str = ""
    attrs: Mapping[str, str] = field(default_factory=dict)

    width: int = 640
    height: int = 270
    left: int = 62
    right: int = 16
    top: int = 36
    bottom: int = 38

    # geometry
    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.height - self.top - self.bottom

    def _x(self, t: float) -> float:
        return self.left + (t - self.t0) / (self.t1 - self.t0) * self.plot_w

    def _values(self) -> list[float]:
        vals: list[float] = []
        for s in self.series:       # bands (uncertainty) are clipped, not fitted
            vals += [v for v in s.values if v is not None]
        vals += [r.value for r in self.rules]
        if self.log:
            vals = [v for v in vals if v > 0]
        return vals

    def _y_axis(self) -> tuple[list[float], Callable[[float], float]]:
        vals = self._values()
        if self.log:
            lo = min(vals, default=1.0)
            hi = max(vals, default=10.0)
            ticks = log_ticks(lo, hi)
            a, b = math.log10(ticks[0]), math.log10(ticks[-1])
            return ticks, lambda v: self.top + self.plot_h * (
                1 - (math.log10(max(v, ticks[0] / 10)) - a) / (b - a))
        lo = min(vals, default=0.0) if self.y_min is None else min([self.y_min] + vals)
        hi = max(vals, default=1.0) if self.y_max is None else max([self.y_max] + vals)
        if self.y_min is not None and lo >= self.y_min:
            lo = self.y_min
        ticks = nice_ticks(lo, hi + (hi - lo) * 0.04 if self.y_max is None else hi)
        a, b = ticks[0], ticks[-1]
        return ticks, lambda v: self.top + self.plot_h * (1 - (v - a) / (b - a))

    # drawing
    def _path(self, times: Sequence[float], values: Sequence[float | None],
              y: Callable[[float], float]) -> str:
        parts, pen = [], "M"
        for t, v in zip(times, values):
            if v is None or (self.log and v <= 0):
                pen = "M"
                continue
            parts.append(f"{pen}{self._x(t):.1f},{y(v):.1f}")
            pen = "L"
        return " ".join(parts)

    def _band(self, s: Series, y: Callable[[float], float]) -> str:
        """One polygon per run of band points. The pipeline computes the band at risk and
        on every ``BAND_EVERY``-th solve otherwise (``streams.predict.confidence``): solves
        between two band points are bridged (the band was not computed there, not
        undefined); a longer gap ends the run."""
        out, run = [], []
        times, lower = _thin(s.times, s.lower)
        upper = list(s.upper)
        if len(times) < len(s.times):       # thinned: the upper bound at the kept times
            at = {t: i for i, t in enumerate(s.times)}
            upper = [s.upper[at[t]] for t in times]
        steps = [b - a for a, b in zip(s.times, s.times[1:]) if b > a]
        thinned = 1 if len(times) == len(s.times) else 2 * math.ceil(len(s.times) / len(times))
        bridge = ((BAND_EVERY + 0.5) * thinned * sorted(steps)[len(steps) // 2]
                  if steps else 0.0)
        for t, lo, hi in zip(times, lower, upper):
            if lo is None or hi is None:
                continue
            if run and t - run[-1][0] > bridge:
                out.append(run)
                run = []
            run.append((t, lo, hi))
        if run:
            out.append(run)
        polys = []
        for run in out:
            pts = [f"{self._x(t):.1f},{y(hi):.1f}" for t, _, hi in run]
            pts += [f"{self._x(t):.1f},{y(lo):.1f}" for t, lo, _ in reversed(run)]
            polys.append(f'<polygon points="{" ".join(pts)}" fill="{s.color}" '
                         f'fill-opacity="0.10" stroke="none"/>')
        return "".join(polys)

    def _series(self, s: Series, y: Callable[[float], float]) -> str:
        if s.style == "band":
            return self._band(s, y)
        times, values = _thin(s.times, s.values)
        d = self._path(times, values, y)
        if not d:
            return ""
        if s.style == "points":
            dots = "".join(f'<circle cx="{self._x(t):.1f}" cy="{y(v):.1f}" r="2.6"/>'
                           for t, v in zip(times, values)
                           if v is not None and not (self.log and v <= 0))
            return (f'<path d="{d}" fill="none" stroke="{s.color}" stroke-width="1" '
                    f'stroke-opacity="0.45"/><g fill="{s.color}">{dots}</g>')
        dash = {"dashed": ' stroke-dasharray="6 3"', "dotted": ' stroke-dasharray="2 3"'}.get(
            s.style, "")
        return (f'<path d="{d}" fill="none" stroke="{s.color}" stroke-width="{s.width}"'
                f'{dash} stroke-linejoin="round"/>')

    def _axes(self, ticks: list[float], y: Callable[[float], float]) -> str:
        L, T, W, H = self.left, self.top, self.plot_w, self.plot_h
        out = [f'<rect x="{L}" y="{T}" width="{W}" height="{H}" class="plot"/>']
        labels = [log_label(v) for v in ticks] if self.log else [
            tick_label(v, ticks) for v in ticks]
        for v, text in zip(ticks, labels):
            yy = y(v)
            out.append(f'<line x1="{L}" y1="{yy:.1f}" x2="{L + W}" y2="{yy:.1f}" class="grid"/>'
                       f'<text x="{L - 6}" y="{yy + 4:.1f}" class="tick" '
                       f'text-anchor="end">{text}</text>')
        tt, fmt = time_ticks(self.t0, self.t1)
        for t in tt:
            xx = self._x(t)
            out.append(f'<line x1="{xx:.1f}" y1="{T}" x2="{xx:.1f}" y2="{T + H}" class="grid"/>'
                       f'<text x="{xx:.1f}" y="{T + H + 15}" class="tick" '
                       f'text-anchor="middle">{utc(t, fmt)}</text>')
        out.append(f'<text x="{L + W / 2:.1f}" y="{self.height - 4}" class="axis-label" '
                   f'text-anchor="middle">event time (UTC)</text>'
                   f'<text transform="translate(14 {T + H / 2:.1f}) rotate(-90)" '
                   f'class="axis-label" text-anchor="middle">{esc(self.y_label)}</text>')
        return "".join(out)

    def _rules(self, y: Callable[[float], float]) -> str:
        out = []
        for r in self.rules:
            if self.log and r.value <= 0:
                continue
            yy = y(r.value)
            out.append(f'<line x1="{self.left}" y1="{yy:.1f}" x2="{self.left + self.plot_w}" '
                       f'y2="{yy:.1f}" stroke="{r.color}" stroke-width="1.6" '
                       f'stroke-dasharray="7 4"/><text x="{self.left + self.plot_w - 4}" '
                       f'y="{yy - 5:.1f}" class="rule-label" fill="{r.color}" '
                       f'text-anchor="end">{esc(r.label)}</text>')
        return "".join(out)

    def _spans(self) -> str:
        out = []
        for s in self.spans:
            a, b = max(s.start, self.t0), min(s.end, self.t1)
            if b <= a:
                continue
            out.append(f'<rect x="{self._x(a):.1f}" y="{self.top}" '
                       f'width="{self._x(b) - self._x(a):.1f}" height="{self.plot_h}" '
                       f'fill="{s.color}" fill-opacity="0.08"><title>{esc(s.label)}</title>'
                       f'</rect>')
        return "".join(out)

    def _markers(self) -> str:
        """Vertical lines at alert events, labelled in the band above the plot (two rows,
        alternating when labels would collide)."""
        out, ends = [], [-1e9, -1e9]
        right = self.left + self.plot_w
        for m in sorted(self.markers, key=lambda m: m.time):
            if not self.t0 <= m.time <= self.t1:
                continue
            xx = self._x(m.time)
            width = 6.3 * len(m.label)
            start = xx - 3 if xx + width <= right + 10 else xx - width + 3
            row = 0 if start > ends[0] + 6 else 1 if start > ends[1] + 6 else 0
            ends[row] = start + width
            anchor = "start" if start >= xx - 3 else "end"
            tx = xx - 3 if anchor == "start" else xx + 3
            ty = self.top - 19 + 13 * row
            out.append(f'<g class="marker" data-{m.kind}-time="{m.time:.0f}">'
                       f'<title>{esc(m.detail or m.label)}</title>'
                       f'<line x1="{xx:.1f}" y1="{ty + 3}" x2="{xx:.1f}" '
                       f'y2="{self.top + self.plot_h}" stroke="{m.color}" stroke-width="2"/>'
                       f'<text x="{tx:.1f}" y="{ty}" class="marker-label" fill="{m.color}" '
                       f'text-anchor="{anchor}">{esc(m.label)}</text></g>')
        return "".join(out)

    def svg(self, clip_id: str) -> str:
        if self.t1 <= self.t0:
            self.t0, self.t1 = self.t0 - 30.0, self.t1 + 30.0
        ticks, y = self._y_axis()
        body = "".join(self._series(s, y) for s in self.series)
        empty = "" if body else (
            f'<text x="{self.left + self.plot_w / 2:.1f}" y="{self.top + self.plot_h / 2:.1f}" '
            f'class="no-data" text-anchor="middle">no data in this store</text>')
        return (f'<svg viewBox="0 0 {self.width} {self.height}" role="img" '
                f'aria-label="{esc(self.title)}"><defs><clipPath id="{clip_id}">'
                f'<rect x="{self.left}" y="{self.top - 2}" width="{self.plot_w}" '
                f'height="{self.plot_h + 4}"/></clipPath></defs>'
                f'{self._axes(ticks, y)}{self._spans()}'
                f'<g clip-path="url(#{clip_id})">{body}</g>{self._rules(y)}{self._markers()}'
                f'{empty}</svg>')

    def legend_entries(self) -> list[tuple[str, str, str]]:
        """Series (by colour group and by style when grouped), rules; the alert markers and
        spans are explained once per section."""
        shown = [s for s in self.series if any(v is not None for v in (*s.values, *s.lower))]
        if any(s.group for s in shown):
            out = [(s.group, "color", s.color) for s in shown]
            out += [(s.label, s.style, LEGEND_INK) for s in shown]
        else:
            out = [(s.label, s.style, s.color) for s in shown]
        return out + [(r.label, "rule", r.color) for r in self.rules]

    def html(self, clip_id: str) -> str:
        attrs = "".join(f' data-{k}="{esc(v)}"' for k, v in self.attrs.items())
        note = f'<p class="note">{self.note}</p>' if self.note else ""
        return (f'<figure class="chart" data-chart="{self.key}"{attrs}>'
                f'<figcaption>{esc(self.title)}</figcaption>'
                f'{legend(self.legend_entries())}{self.svg(clip_id)}{note}</figure>')
