"""The embedded run's report: one self-contained HTML page rendered from a perfcast SQLite store.

The store (:class:`streams.sinks.store.SQLiteStore`) holds one table per InfluxDB measurement
(:data:`streams.sinks.schema.MEASUREMENTS`); the page shows, per system, the views of the Grafana
dashboard "perfcast: system" (``docs/grafana.md``) -- measured vs predicted throughput and
response time per class with the SLA, utilization per tier, the index of dispersion per tier
against the threshold that switches a tier to the MAP network (paper 000 Fig. 2, section 4.1),
service demands with their Kalman +-2 sigma band and the regression (papers 004 and 002), the
bottleneck-switch probability (paper 000 section 3.4), capacity against users, model error,
alerts -- and an overview of all systems (headroom, time to breach, alerts, bursty tiers) with
the alerts on a timeline.

The page makes no network request: styles are inline, the plots are inline SVG drawn here
(:class:`TimeChart`, :func:`alert_timeline`), text uses the system's fonts, and there is no
script. Every time chart of a system shares its time axis and marks when the predicted-breach
alert fired and when the measured response time broke the SLA, so the lead time reads at a
glance.
"""

from __future__ import annotations

import datetime as _dt
import html
import math
import re
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from streams.core.config import Config
from streams.predict.confidence import BAND_EVERY
from streams.sinks.schema import MEASUREMENTS

__all__ = ["ReportError", "Thresholds", "SystemData", "StoreData", "load_store",
           "render_report", "write_report", "SECTIONS", "SYSTEM_CHARTS", "REPORT_NAME"]

REPORT_NAME = "report.html"
#: ids of the page's sections besides one ``system-*`` section per system
SECTIONS = ("overview", "alerts")
#: ``data-chart`` keys of every system section (``demand`` once per tier)
SYSTEM_CHARTS = ("response_time", "capacity", "throughput", "utilization", "dispersion",
                 "demand", "bottleneck", "model_error")
#: the store's tables the report reads
_TABLES = ("prediction", "class_prediction", "tier_prediction", "demand", "alert")
#: most points drawn per series (longer series are thinned to the min and max of buckets)
MAX_POINTS = 800
#: the page's size bound, bytes (docs/report.md): whatever the store holds -- its time span,
#: its systems, classes, tiers and alerts -- the report is at most this large. Beyond the caps
#: below, what is left out is named on the page (the store still has everything)
MAX_REPORT_BYTES = 20_000_000
#: systems drawn in their own section, most urgent first (:func:`_urgency`); every section
#: must also fit in what the rest of the page leaves of :data:`MAX_REPORT_BYTES`
MAX_SYSTEM_SECTIONS = 100
#: systems listed in the overview table, and drawn in its charts, most urgent first
MAX_OVERVIEW_ROWS, MAX_OVERVIEW_SERIES = 1000, 10
#: alert state changes listed (page, and per system), most recent first; timeline rows
MAX_ALERT_ROWS, MAX_SYSTEM_ALERT_ROWS, MAX_TIMELINE_ROWS = 500, 100, 60
#: classes and tiers drawn in a system's charts (the busiest classes; tiers in order)
MAX_CHART_CLASSES, MAX_CHART_TIERS = 12, 12
#: names listed in a section's header line
MAX_NAMES_LISTED = 30
#: remediation actions listed per system (its last solve at risk, cheapest first)
MAX_REMEDIES = 12

#: colour-blind safe palette (Okabe & Ito), then darker fallbacks
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#7F6D00",
           "#555555", "#8C564B", "#17BECF")
RED, AMBER, PURPLE, GREY, INK = "#C62828", "#E08E00", "#7B1FA2", "#9E9E9E", "#222222"
LEGEND_INK = "#4A5361"
ALERT_COLORS = {"predicted_breach": AMBER, "current_breach": RED, "model_error": PURPLE}
ALERT_NAMES = {"predicted_breach": "breach predicted", "current_breach": "SLA broken",
               "model_error": "model error"}


class ReportError(Exception):
    """The store cannot be reported on: the message names the path and what is wrong."""


# -- reading the store ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Thresholds:
    """Configuration values the store does not hold (they are drawn as lines)."""

    idc: float = 10.0
    model_error: float = 0.3
    source: str = "defaults"


@dataclass
class SystemData:
    """Everything the store holds about one system, rows ordered by time."""

    name: str
    predictions: list[dict[str, Any]]
    classes: dict[str, list[dict[str, Any]]]
    tiers: dict[str, list[dict[str, Any]]]
    demands: dict[str, dict[str, list[dict[str, Any]]]]      # tier -> class -> rows
    alerts: list[dict[str, Any]]
    deadletters: int
    thresholds: Thresholds
    #: the actions of the last solve that predicted a breach, by rank (``remediation`` table)
    remediation: list[dict[str, Any]] = field(default_factory=list)

    @property
    def start(self) -> float:
        return min([self.predictions[0]["time"]] + [a["time"] for a in self.alerts[:1]])

    @property
    def end(self) -> float:
        return max([self.predictions[-1]["time"]] + [a["time"] for a in self.alerts[-1:]])

    def latest(self) -> dict[str, Any]:
        """The last prediction that has a model (else the last one)."""
        solved = [p for p in self.predictions if p["model"] is not None]
        return solved[-1] if solved else self.predictions[-1]


@dataclass
class StoreData:
    """A perfcast store, read: its systems (by name) and its dead letters."""

    path: Path
    systems: list[SystemData]
    deadletters: int = 0
    thresholds_source: str = "defaults"

    @property
    def start(self) -> float:
        return min(s.start for s in self.systems)

    @property
    def end(self) -> float:
        return max(s.end for s in self.systems)


#: what each value of a prediction's ``model`` means, for the report's model tile
_MODEL_NAMES = {"map": "MAP network (bursty tier), exact chain",
                "map-fes": "MAP network (bursty tier), decomposition",
                "mva": "mean-value analysis"}


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise ReportError(f"store {str(path)!r}: no such file (run 'perfcast demo' or "
                          "'perfcast run' first; the store is DIR/perfcast.sqlite)")
    if path.is_dir():
        raise ReportError(f"store {str(path)!r}: is a directory, not a SQLite file (the "
                          "store is DIR/perfcast.sqlite)")
    if path.stat().st_size == 0:
        raise ReportError(f"store {str(path)!r}: empty file, not a perfcast store")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise ReportError(f"store {str(path)!r}: not a SQLite database ({exc})") from None
    missing = [t for t in _TABLES if t not in names]
    if missing:
        conn.close()
        raise ReportError(f"store {str(path)!r}: not a perfcast store (missing table"
                          f"{'s' if len(missing) > 1 else ''} {', '.join(missing)})")
    for table in _TABLES:
        tags, fields = MEASUREMENTS[table]
        have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
        lacking = [c for c in ("time", *tags, *fields) if c not in have]
        if lacking:
            conn.close()
            raise ReportError(f"store {str(path)!r}: not a perfcast store (table {table!r} "
                              f"lacks column{'s' if len(lacking) > 1 else ''} "
                              f"{', '.join(lacking)})")
    return conn


def _rows(conn: sqlite3.Connection, table: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of ``table`` by system, ordered by time: one pass over the table (a query
    per system scanned the whole table once per system: minutes for 10,000 systems)."""
    conn.row_factory = sqlite3.Row
    out: dict[str, list[dict[str, Any]]] = {}
    try:
        for r in conn.execute(f'SELECT * FROM "{table}" WHERE system IS NOT NULL '
                              f'ORDER BY time, rowid'):
            row = {k: _clean(r[k]) for k in r.keys()}
            out.setdefault(str(row["system"]), []).append(row)
        return out
    finally:
        conn.row_factory = None


def _last_remediation(conn: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """Per system, the ``remediation`` rows of its last solve at risk, by rank (a store
    written before the table existed has none)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "remediation" not in tables:
        return {}
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute(
            'SELECT * FROM remediation r WHERE system IS NOT NULL AND time = (SELECT MAX(time) '
            'FROM remediation WHERE system = r.system) ORDER BY system, "rank" LIMIT ?',
            (MAX_REMEDIES * MAX_SYSTEM_SECTIONS * 4,))
        out: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            out.setdefault(str(r["system"]), []).append({k: _clean(r[k]) for k in r.keys()})
        return {k: v[:MAX_REMEDIES] for k, v in out.items()}
    finally:
        conn.row_factory = None


def _clean(value: Any) -> Any:
    """Non-finite floats (an unset SLA is infinite) read as unknown."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _group(rows: list[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(str(r[key]), []).append(r)
    return out


def _thresholds(config: Config | None, system: str) -> Thresholds:
    if config is None:
        return Thresholds()
    sc = config.system(system)
    return Thresholds(sc.idc_threshold, sc.model_error_threshold, "configuration")


def load_store(path: str | Path, config: Config | None = None) -> StoreData:
    """Read a store written by the embedded runner. ``config`` supplies the thresholds the
    store does not hold (``idc_threshold``, ``model_error_threshold``; defaults without it).
    :class:`ReportError` names the path when it is missing, not SQLite, not a perfcast store,
    or holds no prediction."""
    path = Path(path)
    conn = _connect(path)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT DISTINCT system FROM prediction WHERE system IS NOT NULL ORDER BY system")]
        if not names:
            raise ReportError(f"store {str(path)!r}: holds no predictions (empty store: the run "
                              "processed no window, or stopped before the first solve)")
        dead_by_system: dict[str, int] = {}
        total_dead = 0
        if "deadletter" in {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}:
            for system, count in conn.execute(
                    "SELECT system, SUM(COALESCE(count, 1)) FROM deadletter GROUP BY system"):
                dead_by_system[str(system)] = int(count or 0)
                total_dead += int(count or 0)
        systems = []
        tables = {t: _rows(conn, t) for t in _TABLES}
        remedies = _last_remediation(conn)
        for name in names:
            demand_rows = tables["demand"].get(name, [])
            systems.append(SystemData(
                name=name, predictions=tables["prediction"].get(name, []),
                classes=_group(tables["class_prediction"].get(name, []), "class"),
                tiers=_group(tables["tier_prediction"].get(name, []), "tier"),
                demands={t: _group(rows, "class")
                         for t, rows in _group(demand_rows, "tier").items()},
                alerts=tables["alert"].get(name, []),
                deadletters=dead_by_system.get(name, 0),
                thresholds=_thresholds(config, name), remediation=remedies.get(name, [])))
    except sqlite3.DatabaseError as exc:
        raise ReportError(f"store {str(path)!r}: cannot be read ({exc})") from None
    finally:
        conn.close()
    return StoreData(path, systems, total_dead,
                     "defaults" if config is None else "configuration")


# -- numbers and times as text ---------------------------------------------------------------

def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def utc(t: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime(fmt)


def duration(seconds: float) -> str:
    """``7 min``, ``1 h 05 min``, ``45 s``."""
    s = abs(seconds)
    if s < 90:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        h, m = divmod(round(s / 60), 60)
        return f"{h} h {m:02d} min"
    return f"{s / 86400:.1f} d"


def _num(value: Any, spec: str = ".3g", none: str = "–") -> str:
    if value is None:
        return none
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e6 and spec == ".3g":
        return str(int(value))
    return format(value, spec)


def _time_to_breach(ttb: float | None) -> str:
    if ttb is None:
        return "no breach ahead"
    return "now" if ttb == 0 else f"in {duration(ttb)}"


# -- axes -------------------------------------------------------------------------------------

def _nice_step(span: float, count: int) -> float:
    raw = span / max(count, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag * (1 + 1e-9))


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[lo, hi]`` (the first and last enclose it)."""
    if not hi > lo:
        lo, hi = (lo - 1, hi + 1) if lo == 0 else (lo - abs(lo) * 0.1, hi + abs(hi) * 0.1)
    step = _nice_step(hi - lo, count)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def _tick_label(value: float, ticks: Sequence[float]) -> str:
    """``value`` with as many decimals as the tick step needs (``0.25`` -> 2)."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(value) or 1.0
    decimals = next((d for d in range(10)
                     if abs(step * 10 ** d - round(step * 10 ** d)) < 1e-6 * 10 ** d), 10)
    return "0" if value == 0 else f"{value:,.{decimals}f}"


def log_ticks(lo: float, hi: float) -> list[float]:
    """Decades covering ``[lo, hi]`` (``lo > 0``)."""
    a, b = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    b = max(b, a + 1)
    return [10.0 ** k for k in range(a, b + 1)]


def _log_label(value: float) -> str:
    return f"{value:g}" if 1e-3 <= value < 1e6 else f"1e{round(math.log10(value))}"


#: time-axis steps, seconds
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400, 172800, 604800, 2_592_000, 7_776_000, 31_536_000)


def time_ticks(t0: float, t1: float, count: int = 8) -> tuple[list[float], str]:
    """Tick times on whole UTC minutes/hours/days and their ``strftime`` format."""
    span = max(t1 - t0, 1.0)
    step = next((s for s in _TIME_STEPS if span / s <= count), None)
    if step is None:            # years and beyond: a nice number of 365-day years
        step = _nice_step(span / _TIME_STEPS[-1], count) * _TIME_STEPS[-1]
        while span / step > count:
            step *= 2
    first = math.ceil(t0 / step) * step
    ticks = [first + i * step for i in range(int((t1 - first) // step) + 1)]
    if step >= 2_592_000:
        fmt = "%Y-%m-%d"
    elif step >= 86400:
        fmt = "%m-%d"
    elif utc(t0, "%Y%m%d") != utc(t1, "%Y%m%d"):
        fmt = "%m-%d %H:%M"
    else:
        fmt = "%H:%M:%S" if step < 60 else "%H:%M"
    return ticks, fmt


# -- charts ---------------------------------------------------------------------------------

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
        items.append(f"<li>{_swatch(style, color)}{_esc(label)}</li>")
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
        labels = [_log_label(v) for v in ticks] if self.log else [
            _tick_label(v, ticks) for v in ticks]
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
                   f'class="axis-label" text-anchor="middle">{_esc(self.y_label)}</text>')
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
                       f'text-anchor="end">{_esc(r.label)}</text>')
        return "".join(out)

    def _spans(self) -> str:
        out = []
        for s in self.spans:
            a, b = max(s.start, self.t0), min(s.end, self.t1)
            if b <= a:
                continue
            out.append(f'<rect x="{self._x(a):.1f}" y="{self.top}" '
                       f'width="{self._x(b) - self._x(a):.1f}" height="{self.plot_h}" '
                       f'fill="{s.color}" fill-opacity="0.08"><title>{_esc(s.label)}</title>'
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
                       f'<title>{_esc(m.detail or m.label)}</title>'
                       f'<line x1="{xx:.1f}" y1="{ty + 3}" x2="{xx:.1f}" '
                       f'y2="{self.top + self.plot_h}" stroke="{m.color}" stroke-width="2"/>'
                       f'<text x="{tx:.1f}" y="{ty}" class="marker-label" fill="{m.color}" '
                       f'text-anchor="{anchor}">{_esc(m.label)}</text></g>')
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
                f'aria-label="{_esc(self.title)}"><defs><clipPath id="{clip_id}">'
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
        attrs = "".join(f' data-{k}="{_esc(v)}"' for k, v in self.attrs.items())
        note = f'<p class="note">{self.note}</p>' if self.note else ""
        return (f'<figure class="chart" data-chart="{self.key}"{attrs}>'
                f'<figcaption>{_esc(self.title)}</figcaption>'
                f'{legend(self.legend_entries())}{self.svg(clip_id)}{note}</figure>')


# -- alerts --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Episode:
    """An alert from firing to resolved (``end`` ``None``: still firing at the store's end)."""

    system: str
    alert: str
    cls: str | None
    start: float
    end: float | None
    fired: dict[str, Any]

    @property
    def row(self) -> str:
        what = ALERT_NAMES.get(self.alert, self.alert)
        return f"{what}: {self.cls}" if self.alert == "current_breach" and self.cls else what


def episodes(system: SystemData) -> list[Episode]:
    """Firing -> resolved intervals of a system's alerts, keyed as perfcast keys them (the
    current breach per class)."""
    open_: dict[tuple[str, str | None], dict[str, Any]] = {}
    out: list[Episode] = []
    for a in system.alerts:
        key = (a["alert"], a["class"] if a["alert"] == "current_breach" else None)
        if a["state"] == "firing":
            open_.setdefault(key, a)
        elif a["state"] == "resolved" and key in open_:
            fired = open_.pop(key)
            out.append(Episode(system.name, key[0], key[1], fired["time"], a["time"], fired))
    out += [Episode(system.name, k[0], k[1], f["time"], None, f) for k, f in open_.items()]
    return sorted(out, key=lambda e: (e.start, e.alert, e.cls or ""))


def breach_spans(system: SystemData, end: float) -> list[tuple[float, float]]:
    """Stretches during which at least one class's measured response time broke its SLA (per
    perfcast's ``current_breach`` alerts)."""
    eps = [e for e in episodes(system) if e.alert == "current_breach"]
    spans: list[list[float]] = []
    for e in sorted(eps, key=lambda e: e.start):
        stop = e.end if e.end is not None else end
        if spans and e.start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], stop)
        else:
            spans.append([e.start, stop])
    return [(a, b) for a, b in spans]


def story(system: SystemData) -> dict[str, Any]:
    """The headline: when the breach was first predicted, when the SLA was first broken."""
    firing = [a for a in system.alerts if a["state"] == "firing"]
    predicted = next((a for a in firing if a["alert"] == "predicted_breach"), None)
    broken = next((a for a in firing if a["alert"] == "current_breach"), None)
    lead = broken["time"] - predicted["time"] if predicted and broken else None
    return {"predicted": predicted, "broken": broken, "lead_s": lead}


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
        out.append(Marker(e.start, label, ALERT_COLORS[e.alert], e.fired.get("summary") or ""))
    return out


def _switch_markers(system: SystemData) -> list[Marker]:
    """A grey line at every switch of model family (``model_switch``, :mod:`streams.predict.story`)."""
    return [Marker(p["time"], f"{p['model_switch'].replace('->', '→')} "
                              f"{utc(p['time'], '%H:%M')}", GREY,
                   p.get("model_switch_reason") or "", kind="switch")
            for p in system.predictions if p.get("model_switch")]


def alert_timeline(data: StoreData) -> str:
    """Every alert episode of every system as a bar on one time axis (inline SVG)."""
    t0, t1 = data.start, data.end
    if t1 <= t0:
        t0, t1 = t0 - 30.0, t1 + 30.0
    rows: list[tuple[str, list[Episode]]] = []
    for s in sorted(data.systems, key=_urgency):
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
                   f'text-anchor="end">{_esc(label)}</text>')
        for e in eps:
            color = ALERT_COLORS.get(e.alert, GREY)
            a = x(e.start)
            b = x(e.end if e.end is not None else t1)
            w = max(b - a, 3.0)
            state = "resolved " + utc(e.end, "%H:%M") if e.end is not None else "still firing"
            tip = f"{utc(e.start, '%H:%M:%S')} fired, {state}: {e.fired.get('summary') or ''}"
            text = utc(e.start, "%H:%M") + ("" if e.end is not None else " →")
            inside = w >= 7.0 * len(text) + 8
            label = (f'<text x="{a + 5:.1f}" y="{yy + row_h / 2 + 4:.1f}" class="bar-label">'
                     if inside else
                     f'<text x="{a - 4:.1f}" y="{yy + row_h / 2 + 4:.1f}" class="bar-label '
                     f'outside" text-anchor="end" style="fill:{color}">')
            out.append(f'<g class="episode" data-alert="{_esc(e.alert)}">'
                       f'<title>{_esc(tip)}</title><rect x="{a:.1f}" y="{yy + 5}" '
                       f'width="{w:.1f}" height="{row_h - 10}" rx="3" fill="{color}" '
                       f'fill-opacity="{0.9 if e.end is None else 0.6}"/>'
                       f'{label}{_esc(text)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def _alert_value(a: Mapping[str, Any], key: str) -> str:
    v = a.get(key)
    if v is None:
        return "–"
    if a["alert"] == "predicted_breach":
        return duration(v)
    if a["alert"] == "current_breach":
        return f"{v:.3f} s"
    return f"{100 * v:.0f}%"


def alert_table(alerts: Iterable[Mapping[str, Any]], with_system: bool,
                total: int | None = None) -> str:
    """The alert state changes as a table; ``total``: how many there are when ``alerts`` is
    a part of them (the rest are named as left out)."""
    head = ["time (UTC)"] + (["system"] if with_system else []) + [
        "alert", "state", "class", "tier", "value", "threshold", "summary"]
    rows = []
    for a in alerts:
        cells = [utc(a["time"])] + ([_esc(a["system"])] if with_system else []) + [
            f'<span class="dot" style="background:{ALERT_COLORS.get(a["alert"], GREY)}">'
            f'</span>{_esc(ALERT_NAMES.get(a["alert"], a["alert"]))}',
            f'<span class="state {_esc(a["state"])}">{_esc(a["state"])}</span>',
            _esc(a.get("class") or "–"), _esc(a.get("tier") or "–"),
            _alert_value(a, "value"), _alert_value(a, "threshold"),
            f'<span class="summary">{_esc(a.get("summary") or "")}</span>']
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not rows:
        return '<p class="empty">No alert changed state.</p>'
    more = (total or 0) - len(rows)
    return (f'<table class="alerts"><thead><tr>{"".join(f"<th>{h}</th>" for h in head)}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            + (f'<p class="flags">the {len(rows)} most recent of {total} state changes (the '
               f'report\'s size bound; the store has them all)</p>' if more > 0 else ""))


# -- per-system charts ---------------------------------------------------------------------------

def _col(rows: Sequence[Mapping[str, Any]], key: str,
         scale: float = 1.0) -> tuple[list[float], list[float | None]]:
    return ([r["time"] for r in rows],
            [None if r.get(key) is None else float(r[key]) * scale for r in rows])


def _capped(col: tuple[list[float], list[float | None]],
            cap: float) -> tuple[list[float], list[float | None]]:
    """Values above ``cap`` drawn at ``cap`` (the axis's end)."""
    return col[0], [None if v is None else min(v, cap) for v in col[1]]


def _colors(names: Iterable[str]) -> dict[str, str]:
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def _sla_rules(system: SystemData) -> list[Rule]:
    by_value: dict[float, list[str]] = {}
    for cls, rows in system.classes.items():
        slas = [r["sla_s"] for r in rows if r.get("sla_s") is not None]
        if slas:
            by_value.setdefault(float(slas[-1]), []).append(cls)
    if len(by_value) == 1:
        return [Rule(next(iter(by_value)), f"SLA {next(iter(by_value)):g} s")]
    return [Rule(v, f"SLA {v:g} s ({', '.join(c)})") for v, c in sorted(by_value.items())]


class _Charts:
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

    def _measured_vs_predicted(self, key: str) -> list[Series]:
        """Per class: ``key_measured`` as points, ``key`` (the model now) dashed."""
        series = []
        for cls in self.classes:
            rows = self.s.classes[cls]
            c = self.class_colors[cls]
            series += [Series("measured", *_col(rows, f"{key}_measured"), c, "points",
                              group=cls),
                       Series("predicted", *_col(rows, key), c, "dashed", group=cls)]
        return series

    def response_time(self) -> TimeChart:
        return self.chart("response_time", "Response time per class: measured vs predicted, "
                          "and SLA", "response time (s)",
                          series=self._measured_vs_predicted("response_time"),
                          rules=_sla_rules(self.s))

    def throughput(self) -> TimeChart:
        return self.chart("throughput", "Throughput per class: measured vs predicted",
                          "throughput (requests/s)",
                          series=self._measured_vs_predicted("throughput"))

    def utilization(self) -> TimeChart:
        series = []
        for tier in self.tiers:
            rows = self.s.tiers[tier]
            c = self.tier_colors[tier]
            series += [Series("measured", *_col(rows, "utilization_measured", 100), c,
                              "points", group=tier),
                       Series("predicted now", *_col(rows, "utilization", 100), c, "dashed",
                              group=tier),
                       Series("predicted at the forecast population",
                              *_col(rows, "utilization_forecast", 100), c, "dotted",
                              width=1.5, group=tier)]
        return self.chart("utilization", "Utilization per tier: measured vs predicted (now and "
                          "at the forecast population)", "utilization (%)", series=series,
                          y_max=100.0)

    def dispersion(self) -> TimeChart:
        thr = self.s.thresholds.idc
        series = [Series(tier, *_col(self.s.tiers[tier], "idc"), self.tier_colors[tier],
                         "points") for tier in self.tiers]
        return self.chart(
            "dispersion", "Index of dispersion per tier vs the bursty threshold",
            "index of dispersion I (log)", series=series, log=True,
            rules=[Rule(thr, f"idc_threshold {thr:g}: above, MAP network")],
            note=f"I of each tier's service process from utilization and completions (paper "
                 f"000 Fig. 2); above the threshold (from the "
                 f"{_esc(self.s.thresholds.source)}) the tier is bursty and solved with its "
                 f"fitted MAP(2) instead of MVA.")

    def demand(self, tier: str) -> TimeChart:
        series = []
        per_class = self.s.demands.get(tier, {})
        for cls in [c for c in self.classes if c in per_class] or list(per_class)[
                :MAX_CHART_CLASSES]:
            rows = per_class[cls]
            c = self.class_colors.get(cls, GREY)
            t, k = _col(rows, "kalman", 1000)
            _, sd = _col(rows, "std", 1000)
            lower = [None if a is None or b is None else max(a - 2 * b, 0.0)
                     for a, b in zip(k, sd)]
            upper = [None if a is None or b is None else a + 2 * b for a, b in zip(k, sd)]
            series += [Series("Kalman ±2σ", t, [None] * len(t), c, "band", lower, upper,
                              group=cls),
                       Series("Kalman", t, k, c, "line", group=cls),
                       Series("regression", *_col(rows, "regression", 1000), c, "points",
                              group=cls)]
        return self.chart("demand", f"Service demand per class on tier {tier}: Kalman ±2σ and "
                          "regression", "demand (ms per request)", series=series,
                          attrs={"tier": tier})

    def bottleneck(self) -> TimeChart:
        series = [Series("bottleneck-switch probability",
                         *_col(self.s.predictions, "bottleneck_switch_probability"), INK,
                         "line", width=2.5)]
        series += [Series(f"{tier} is the bottleneck",
                          *_col(self.s.tiers[tier], "bottleneck_probability"),
                          self.tier_colors[tier], "dashed")
                   for tier in self.tiers]
        return self.chart("bottleneck", "Bottleneck-switch probability (at the breach point)",
                          "probability", series=series, y_max=1.0,
                          note="1 − max<sub>m</sub> B<sub>m</sub>: the chance that the "
                               "bottleneck is not the usual tier (paper 000 section 3.4; "
                               "0 under MVA, which cannot switch).")

    def capacity(self) -> TimeChart:
        p = self.s.predictions
        t, lower = _col(p, "capacity_users_lower")
        series = [Series("capacity band (estimators' uncertainty)", t, [None] * len(t),
                         "#2E7D32", "band", lower, _col(p, "capacity_users_upper")[1]),
                  Series("capacity (users within SLA)", *_col(p, "capacity_users"), "#2E7D32",
                         "line", width=2.5),
                  Series("users now", *_col(p, "users"), PALETTE[0], "points"),
                  Series("users at the horizon (forecast)", *_col(p, "users_forecast"),
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

    def model_error(self) -> TimeChart:
        thr = self.s.thresholds.model_error
        p = self.s.predictions
        series = [Series("response time error", *_col(p, "model_error", 100), PALETTE[3],
                         "points"),
                  Series("worst class's response time error",
                         *_col(p, "model_error_class_max", 100), PALETTE[5], "dotted"),
                  Series("throughput error", *_col(p, "throughput_error", 100), PALETTE[4],
                         "dashed")]
        markers = self.markers + _alert_markers(self.s, ("model_error",)) \
            + _switch_markers(self.s)
        return self.chart("model_error", "Model error: predicted vs measured at the current "
                          "load", "relative error (%)", series=series, markers=markers,
                          rules=[Rule(100 * thr, f"model_error_threshold {100 * thr:g}%")])

    def all(self) -> list[TimeChart]:
        tiers = (self.tiers + [t for t in self.s.demands if t not in self.s.tiers])[
            :MAX_CHART_TIERS]
        return ([self.response_time(), self.capacity(), self.throughput(), self.utilization(),
                 self.dispersion()] + [self.demand(t) for t in tiers]
                + [self.bottleneck(), self.model_error()])


# -- page ------------------------------------------------------------------------------------

def _busiest(classes: Mapping[str, list[dict[str, Any]]], limit: int) -> list[str]:
    """The ``limit`` classes with the most measured throughput at their last solve (all
    when there are no more), in the store's order."""
    if len(classes) <= limit:
        return list(classes)
    load = {c: (rows[-1].get("throughput_measured") or 0.0) if rows else 0.0
            for c, rows in classes.items()}
    keep = set(sorted(classes, key=lambda c: -load[c])[:limit])
    return [c for c in classes if c in keep]


def _names(names: Iterable[str], what: str) -> str:
    """At most :data:`MAX_NAMES_LISTED` names, then how many more."""
    names = list(names)
    shown = ", ".join(names[:MAX_NAMES_LISTED])
    more = len(names) - MAX_NAMES_LISTED
    return _esc(shown) + (f" and {more} more {what}" if more > 0 else "")


def _urgency(system: SystemData) -> tuple[float, float, str]:
    """Sort key, most urgent first: the soonest breach, then the least headroom."""
    p = system.latest()
    ttb = p.get("time_to_breach_s")
    headroom = p.get("headroom_users")
    return (math.inf if ttb is None else float(ttb),
            math.inf if headroom is None else float(headroom), system.name)


def _slug(name: str, index: int) -> str:
    return f"system-{index}-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x")


def _bursty(system: SystemData) -> list[tuple[str, float | None]]:
    out = []
    for tier, rows in system.tiers.items():
        last = rows[-1]
        if last.get("bursty"):
            out.append((tier, last.get("idc")))
    return out


def _active_alerts(system: SystemData) -> list[Episode]:
    return [e for e in episodes(system) if e.end is None]


def _tile(label: str, value: str, tone: str = "", sub: str = "") -> str:
    sub_html = f'<span class="sub">{sub}</span>' if sub else ""
    return (f'<div class="tile {tone}"><span class="label">{_esc(label)}</span>'
            f'<span class="value">{value}</span>{sub_html}</div>')


def _tones(p: Mapping[str, Any]) -> tuple[str, str]:
    head, ttb = p.get("headroom_users"), p.get("time_to_breach_s")
    horizon = p.get("horizon_s") or 0
    head_tone = "bad" if head is not None and head < 0 else (
        "warn" if ttb is not None and ttb <= horizon else "good" if head is not None else "")
    ttb_tone = "bad" if ttb == 0 else "warn" if ttb is not None and ttb <= horizon else (
        "good" if p.get("model") else "")
    return head_tone, ttb_tone


def _tiles(system: SystemData) -> str:
    p = system.latest()
    head_tone, ttb_tone = _tones(p)
    ttb = p.get("time_to_breach_s")
    breach_at = (f"at ≈ {utc(p['time'] + ttb, '%H:%M')} UTC" if ttb else
                 "SLA broken at the current load" if ttb == 0 else "")
    err = p.get("model_error")
    tiles = [
        _tile("users now", _num(p.get("users")), sub=_esc(p.get("users_source") or "")),
        _tile("users at the horizon", _num(p.get("users_forecast")),
              sub=f"in {duration(p['horizon_s'])}" if p.get("horizon_s") else ""),
        _tile("capacity (users within SLA)", _num(p.get("capacity_users")),
              sub=_band_text(p, "capacity_users", _num)),
        _tile("headroom", _num(p.get("headroom_users")), head_tone, "users below capacity"),
        _tile("time to SLA breach", _esc(_time_to_breach(ttb)), ttb_tone,
              _esc(" · ".join(x for x in (breach_at, _band_text(
                  p, "time_to_breach", _time_to_breach, "_s")) if x))),
        _tile("model", _esc(p.get("model") or "none yet"),
              sub=_MODEL_NAMES.get(p.get("model") or "", "")),
        _tile("bottleneck tier (forecast)", _esc(p.get("bottleneck_tier") or "–")
              + ("*" if p.get("bottleneck_reason") else ""),
              sub=f"switch probability {_num(p.get('bottleneck_switch_probability'), '.2f')}"
                  + (f"; breach tier {_esc(p['breach_tier'])}" if p.get("breach_tier") else "")),
        _tile("model error", "–" if err is None else f"{100 * err:.0f}%",
              "bad" if err is not None and err > system.thresholds.model_error else "",
              f"threshold {100 * system.thresholds.model_error:g}%"
              + (f"; worst class {_esc(p['model_error_class'])} "
                 f"{100 * p['model_error_class_max']:.0f}%"
                 if p.get("model_error_class") and p.get("model_error_class_max") is not None
                 else "")),
    ]
    return f'<div class="tiles">{"".join(tiles)}</div>'


def _band_text(p: Mapping[str, Any], key: str, fmt: Callable[[Any], str],
               suffix: str = "") -> str:
    """``band lower – upper`` of a prediction's ``key`` (``""`` when it has no band)."""
    lo, hi = p.get(f"{key}_lower{suffix}"), p.get(f"{key}_upper{suffix}")
    if lo is None and hi is None:
        return ""
    return f"band {fmt(lo)} – {fmt(hi)}"


def _bottleneck_html(system: SystemData, at: float | None) -> str:
    """Why the busiest tier is not the breach tier (:mod:`streams.predict.story`), at the
    prediction of time ``at`` (the breach alert) or the last solve."""
    solved = [p for p in system.predictions if p.get("model")]
    if not solved:
        return ""
    p = next((q for q in solved if at is not None and q["time"] >= at), solved[-1])
    reason = p.get("bottleneck_reason")
    if reason:
        return (f'<span class="pill warn">bottleneck*</span> {_esc(reason)} '
                f'(at {utc(p["time"], "%H:%M")})')
    if p.get("breach_tier"):
        return (f'<span class="pill warn">bottleneck</span> {_esc(p["breach_tier"])}: the '
                f'busiest tier is also the one that causes the breach')
    return ""


def _story_html(system: SystemData) -> str:
    st = story(system)
    pred, broken, lead = st["predicted"], st["broken"], st["lead_s"]
    parts = []
    if pred:
        parts.append(f'<span class="pill warn">breach predicted {utc(pred["time"], "%H:%M")}'
                     f'</span> {_esc(pred.get("summary") or "")}')
        why = _bottleneck_html(system, pred["time"])
        if why:
            parts.append(why)
    if broken:
        parts.append(f'<span class="pill bad">SLA broken {utc(broken["time"], "%H:%M")}</span> '
                     f'{_esc(broken.get("summary") or "")}')
    if lead is not None:
        verdict = (f"perfcast predicted the breach <b>{duration(lead)} before</b> the measured "
                   f"response time broke the SLA" if lead > 0 else
                   f"the predicted-breach alert came {duration(lead)} after the SLA was broken")
        parts.append(f'<span class="lead">{verdict}.</span>')
    if not parts:
        parts.append("No SLA breach was predicted or measured in this store.")
    switches = [p for p in system.predictions if p.get("model_switch")]
    for p in switches[-3:]:
        parts.append(f'<span class="pill" style="background:{GREY}">model switch '
                     f'{utc(p["time"], "%H:%M")}</span> {_esc(p["model_switch"])}: '
                     f'{_esc(p.get("model_switch_reason") or "")}')
    key = legend([("breach predicted (perfcast's alert fired)", "marker", AMBER),
                  ("SLA broken (first class above its SLA)", "marker", RED),
                  ("SLA broken, measured", "span", RED)])
    return ('<div class="story">' + "".join(f"<p>{x}</p>" for x in parts)
            + f'<div class="key">On every chart below: {key}</div></div>')


def remediation_html(system: SystemData) -> str:
    """The last solve at risk's remediation: the smallest action per kind that keeps every
    class within its SLA at the users expected within the horizon, cheapest first
    (:mod:`streams.predict.whatif`); at most :data:`MAX_REMEDIES` rows."""
    rows = system.remediation
    if not rows:
        return ('<p class="empty">No remediation: no solve predicted a breach within the '
                'horizon.</p>')
    first = rows[0]
    body = "".join(
        f'<tr><td>{_num(r.get("rank"), ".0f")}</td><td>{_esc(r.get("kind") or "")}</td>'
        f'<td>{_esc(r.get("tier") or "–")}</td><td>{_num(r.get("value"), "g")}</td>'
        f'<td>{_num(r.get("capacity_users"), ".0f")}</td><td>{_num(r.get("cost"), ".3g")}</td>'
        f'<td class="summary">{_esc(r.get("summary") or "")}</td></tr>' for r in rows)
    head = "".join(f"<th>{h}</th>" for h in ("rank", "action", "tier", "value",
                                              "capacity after", "cost", "what it does"))
    return (f'<p class="meta">at the solve of {utc(first["time"])} UTC: capacity '
            f'{_num(first.get("capacity_before"), ".0f")} users, '
            f'{_num(first.get("required_users"), ".0f")} expected within the horizon; the '
            f'smallest action of each kind that keeps every class within its SLA there, on '
            f'the model the prediction used, cheapest first (remediation_costs)</p>'
            f'{_remedy_line(system, first["time"])}'
            f'<table class="alerts remediation"><thead><tr>{head}</tr></thead>'
            f'<tbody>{body}</tbody></table>')


def _remedy_line(system: SystemData, time: float) -> str:
    """The remedy the alert quotes at the solve of ``time`` and, when it does not act on the
    breach tier, why (:func:`streams.predict.story.remedy_story`); empty for a store without
    them."""
    p = next((q for q in reversed(system.predictions) if q["time"] == time), {})
    summary, why = p.get("remediation_summary"), p.get("remediation_reason")
    if not summary:
        return ""
    return (f'<p class="remedy">remedy (the alert quotes it): <b>{_esc(summary)}</b>'
            f' (breach tier {_esc(p.get("breach_tier") or "–")})'
            + (f'; {_esc(why)}' if why else "") + "</p>")


def _system_section(system: SystemData, index: int) -> str:
    slug = _slug(system.name, index)
    drawn = _Charts(system)
    charts = drawn.all()
    figures = "".join(c.html(f"{slug}-clip-{i}") for i, c in enumerate(charts))
    p = system.latest()
    flags = p.get("flags")
    flag_html = f'<p class="flags">model caveats at the last solve: {_esc(flags)}</p>' \
        if flags else ""
    hist = alert_table(system.alerts[::-1][:MAX_SYSTEM_ALERT_ROWS], with_system=False,
                       total=len(system.alerts))
    return (f'<section class="system" id="{slug}" data-system="{_esc(system.name)}">'
            f'<h2>System <span class="name">{_esc(system.name)}</span></h2>'
            f'<p class="meta">{len(system.predictions)} solves, {utc(system.start)} – '
            f'{utc(system.end)} UTC; last solve {utc(p["time"])} UTC; tiers '
            f'{_names(system.tiers, "tiers")}; classes {_names(system.classes, "classes")}'
            f'{"; " + str(system.deadletters) + " dead letters" if system.deadletters else ""}'
            f'</p>{_drawn_note(system, drawn)}{_tiles(system)}{_story_html(system)}{flag_html}'
            f'<h3>Remediation</h3>{remediation_html(system)}'
            f'<div class="charts">{figures}</div>'
            f'<h3>Alert history</h3>{hist}</section>')


def _drawn_note(system: SystemData, drawn: "_Charts") -> str:
    left = [f"{len(drawn.classes)} busiest of {len(system.classes)} classes"
            if len(drawn.classes) < len(system.classes) else "",
            f"first {len(drawn.tiers)} of {len(system.tiers)} tiers"
            if len(drawn.tiers) < len(system.tiers) else ""]
    left = [x for x in left if x]
    return (f'<p class="flags">charts show the {" and the ".join(left)} (the report\'s '
            f'size bound)</p>') if left else ""


def _overview(data: StoreData, slugs: Mapping[str, str]) -> str:
    """The overview table (the :data:`MAX_OVERVIEW_ROWS` most urgent systems; ``slugs``:
    the sections drawn) and its charts (the :data:`MAX_OVERVIEW_SERIES` most urgent)."""
    ranked = sorted(data.systems, key=_urgency)
    rows = []
    for s in ranked[:MAX_OVERVIEW_ROWS]:
        slug = slugs.get(s.name)
        p = s.latest()
        head_tone, ttb_tone = _tones(p)
        bursty = ", ".join(f"{t} (I = {_num(i, '.3g')})" for t, i in _bursty(s)) or "none"
        active = _active_alerts(s)
        alerts = "".join(f'<span class="pill {"bad" if e.alert == "current_breach" else "warn"}'
                         f'">{_esc(e.row)}</span>' for e in active) or "none"
        name = f'<a href="#{slug}">{_esc(s.name)}</a>' if slug else _esc(s.name)
        cells = [name, _num(p.get("users")),
                 _num(p.get("capacity_users")),
                 f'<span class="{head_tone}">{_num(p.get("headroom_users"))}</span>',
                 f'<span class="{ttb_tone}">{_esc(_time_to_breach(p.get("time_to_breach_s")))}'
                 f'</span>', _esc(p.get("model") or "–"), _esc(p.get("bottleneck_tier") or "–"),
                 _num(p.get("bottleneck_switch_probability"), ".2f"),
                 "–" if p.get("model_error") is None else f'{100 * p["model_error"]:.0f}%',
                 alerts, _esc(bursty)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = ["system", "users", "capacity", "headroom", "time to breach", "model",
            "bottleneck", "switch P", "model error", "active alerts", "bursty tiers"]
    more = len(ranked) - MAX_OVERVIEW_ROWS
    table = (f'<table class="overview"><thead><tr>{"".join(f"<th>{h}</th>" for h in head)}'
             f'</tr></thead><tbody>{"".join(rows)}</tbody></table>'
             + (f'<p class="flags">{more} more systems, further from a breach, are not listed '
                f'(the report\'s size bound; the store has them all)</p>' if more > 0 else ""))
    charted = ranked[:MAX_OVERVIEW_SERIES]
    colors = _colors(s.name for s in charted)
    t0, t1 = data.start, data.end
    headroom = TimeChart("headroom", "Headroom over time (users below capacity)", "users",
                         t0, t1, y_min=None, series=[
                             Series(s.name, *_col(s.predictions, "headroom_users"),
                                    colors[s.name], "line") for s in charted],
                         rules=[Rule(0.0, "capacity reached")])
    horizons = sorted({p["horizon_s"] for s in data.systems for p in s.predictions
                       if p.get("horizon_s")})
    cap = 3 * max(horizons, default=900.0) / 60
    most = (f" ({len(charted)} most urgent systems of {len(ranked)})"
            if len(charted) < len(ranked) else "")
    headroom = replace(headroom, title=headroom.title + most)
    ttb = TimeChart("time_to_breach", "Time to SLA breach over time (gaps: no breach "
                    f"ahead; axis ends at 3× the horizon){most}", "minutes", t0, t1,
                    y_max=cap, series=[
                        Series(s.name, *_capped(_col(s.predictions, "time_to_breach_s", 1 / 60),
                                                cap), colors[s.name], "points")
                        for s in charted],
                    rules=[Rule(h / 60, f"horizon {duration(h)}", AMBER) for h in horizons])
    return (f'<section id="overview"><h2>Overview</h2>'
            f'<p class="meta">At each system\'s last solve. Headroom = capacity − users; '
            f'a breach is ahead when the users trend reaches capacity.</p>{table}'
            f'<div class="charts">{headroom.html("overview-clip-0")}'
            f'{ttb.html("overview-clip-1")}</div></section>')


def _alerts_section(data: StoreData) -> str:
    every = sorted((a for s in data.systems for a in s.alerts), key=lambda a: a["time"])
    shown = every[-MAX_ALERT_ROWS:]
    kinds = legend([(ALERT_NAMES[k], "color", c) for k, c in ALERT_COLORS.items()])
    return (f'<section id="alerts"><h2>Alerts on the timeline</h2>'
            f'<p class="meta">Each bar runs from the solve at which perfcast\'s alert fired to '
            f'the one at which it resolved (solid to the end: still firing). Hover for the '
            f'summary.</p>{kinds}<figure class="chart wide" data-chart="alert_timeline">'
            f'{alert_timeline(data)}</figure>'
            f'<h3>Every alert state change</h3>'
            f'{alert_table(shown, with_system=True, total=len(every))}</section>')


_CSS = """
:root{--ink:#1d2330;--muted:#5f6b7a;--line:#dfe3ea;--bg:#f5f7fa;--card:#fff;
--good:#2e7d32;--warn:#b26a00;--bad:#c62828}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans","Liberation Sans",
Arial,sans-serif}
header{background:#1d2330;color:#fff;padding:18px 28px}
header h1{margin:0;font-size:22px;font-weight:600}
header p{margin:4px 0 0;color:#c9d1dc}
header code{color:#fff}
nav{padding:8px 28px;background:#fff;border-bottom:1px solid var(--line);position:sticky;
top:0;z-index:2}
nav a{margin-right:16px;color:#0b5cad;text-decoration:none}
main{padding:0 28px 28px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;
padding:16px 20px;margin:18px 0}
h2{margin:0 0 4px;font-size:19px}
h3{margin:18px 0 6px;font-size:15px}
.meta{color:var(--muted);margin:0 0 10px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f6;font-weight:600;white-space:nowrap}
table.overview td:nth-child(n+2):nth-child(-n+9){text-align:right;white-space:nowrap}
td .summary{color:var(--muted)}
table.alerts td:nth-child(-n+2),table.alerts td:nth-child(n+5){white-space:nowrap}
table.alerts td:last-child{white-space:normal}
.key{margin-top:6px}.key ul.legend{display:inline-flex;vertical-align:middle}
.good{color:var(--good);font-weight:600}.warn{color:var(--warn);font-weight:600}
.bad{color:var(--bad);font-weight:600}
.pill{display:inline-block;border-radius:10px;padding:0 8px;margin:1px 4px 1px 0;
font-size:12px;color:#fff}
.pill.warn{background:#e08e00;color:#fff}.pill.bad{background:#c62828;color:#fff}
.state{font-weight:600}.state.firing{color:var(--bad)}.state.resolved{color:var(--good)}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:6px}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px;
margin:10px 0}
.tile{border:1px solid var(--line);border-radius:6px;padding:8px 10px;background:#fbfcfd}
.tile .label{display:block;color:var(--muted);font-size:12px}
.tile .value{display:block;font-size:22px;font-weight:600}
.tile .sub{display:block;color:var(--muted);font-size:12px}
.tile.bad{border-color:#e9a9a9;background:#fdf2f2}.tile.bad .value{color:var(--bad)}
.tile.warn{border-color:#efcf95;background:#fdf8ee}.tile.warn .value{color:var(--warn)}
.tile.good .value{color:var(--good)}
.story{border-left:4px solid #e08e00;background:#fffaf0;padding:6px 12px;margin:10px 0}
.story p{margin:4px 0}.story .lead{font-size:15px}
.flags{color:var(--warn)}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:14px}
figure.chart{margin:0;border:1px solid var(--line);border-radius:6px;padding:8px 10px;
background:#fff}
figure.chart.wide{margin-top:6px}
figcaption{font-weight:600;font-size:14px}
ul.legend{list-style:none;margin:4px 0 2px;padding:0;display:flex;flex-wrap:wrap;
gap:2px 14px;font-size:12px;color:var(--muted)}
ul.legend li{display:flex;align-items:center;gap:5px}
svg{display:block;width:100%;height:auto}
svg.swatch{display:inline-block;width:26px;height:12px}
svg .plot{fill:#fff;stroke:#c4cad3}
svg .grid{stroke:#eceff3;stroke-width:1}
svg .tick{font-size:11px;fill:#5f6b7a}
svg .axis-label{font-size:12px;fill:#3b4452}
svg .rule-label{font-size:11px;font-weight:600}
svg .marker-label{font-size:11px;font-weight:600}
svg .row-label{font-size:12px;fill:#1d2330}
svg .bar-label{font-size:11px;fill:#fff;font-weight:600}
svg .no-data{font-size:13px;fill:#9aa3af}
.note{color:var(--muted);font-size:12px;margin:4px 0 0}
footer{color:var(--muted);padding:0 28px 24px;font-size:12px}
"""


def render_report(data: StoreData) -> str:
    """The whole page as one HTML string (no external resource), at most
    :data:`MAX_REPORT_BYTES` bytes: systems get their own section most urgent first, as many
    as :data:`MAX_SYSTEM_SECTIONS` and the bound allow; the page names the ones left out."""
    ranked = sorted(data.systems, key=_urgency)
    index = {id(s): i for i, s in enumerate(data.systems)}
    sections: list[tuple[SystemData, str, str]] = []
    for s in ranked[:MAX_SYSTEM_SECTIONS]:
        i = index[id(s)]
        sections.append((s, _slug(s.name, i), _system_section(s, i)))

    def page(chosen: list[tuple[SystemData, str, str]]) -> str:
        slugs = {s.name: slug for s, slug, _ in chosen}
        left = len(data.systems) - len(chosen)
        nav = "".join([f'<a href="#{s}">{s.capitalize()}</a>' for s in SECTIONS] + [
            f'<a href="#{slug}">System {_esc(s.name)}</a>' for s, slug, _ in chosen])
        solves = sum(len(s.predictions) for s in data.systems)
        alerts = sum(len(s.alerts) for s in data.systems)
        thr = ("from the configuration" if data.thresholds_source == "configuration" else
               "perfcast's defaults (pass --config for a system's own)")
        omitted = (f'<p class="flags">{left} of {len(data.systems)} systems have no section '
                   f'here: the report is kept under {MAX_REPORT_BYTES / 1e6:g} MB, so it draws '
                   f'the {len(chosen)} nearest to a breach (the store has them all; '
                   f'<code>perfcast report</code> of a smaller store draws every one).</p>'
                   if left else "")
        body = (f'<header><h1>perfcast report</h1><p>store <code>{_esc(data.path)}</code> · '
                f'{utc(data.start)} – {utc(data.end)} UTC · {len(data.systems)} '
                f'system{"s" if len(data.systems) != 1 else ""} · {solves} solves · {alerts} '
                f'alert state changes · {data.deadletters} dead letters</p>{omitted}</header>'
                f'<nav>{nav}</nav><main>{_overview(data, slugs)}{_alerts_section(data)}'
                + "".join(html_ for _, _, html_ in chosen)
                + f'</main><footer>Rendered by <code>perfcast report</code> from the embedded '
                  f'store; thresholds idc_threshold and model_error_threshold: {thr}. Measured '
                  f'values are per solve interval; predicted ones are the model at the measured '
                  f'population. Times are event times (UTC).</footer>')
        names = [s.name for s in data.systems[:5]]
        title = ", ".join(names) + (f" and {len(ranked) - 5} more" if len(ranked) > 5 else "")
        return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
                'style-src \'unsafe-inline\'; img-src data:">'
                f'<title>perfcast report: {_esc(title)}</title>'
                f'<style>{_CSS}</style></head><body>{body}</body></html>\n')

    # the page without sections, then sections while they fit (a few KB of slack for the
    # navigation links and the note on what was left out)
    budget = MAX_REPORT_BYTES - len(page([]).encode("utf-8")) - 64_000
    chosen = []
    for s, slug, html_ in sections:
        size = len(html_.encode("utf-8")) + 2 * len(slug) + 4 * len(s.name) + 100
        if size <= budget:
            chosen.append((s, slug, html_))
            budget -= size
    chosen.sort(key=lambda c: index[id(c[0])])          # in the store's order
    return page(chosen)


def write_report(store: str | Path, out: str | Path, config: Config | None = None) -> StoreData:
    """Read ``store`` and write the report to ``out`` (its directory is created)."""
    data = load_store(store, config)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(data), encoding="utf-8")
    return data
