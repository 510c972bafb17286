"""The embedded run's report: one self-contained HTML page rendered from a perfcast SQLite store.

The page shows what the Grafana dashboards show (``docs/grafana.md``) without Grafana or
InfluxDB: per system, measured vs predicted throughput and response time with the SLA,
utilization, the index of dispersion against the threshold that switches a tier to the MAP
network (Mi et al. 2008, Fig. 2, section 4.1), service demands with their Kalman +-2 sigma
band and the regression (Huang et al. 2012; Rolia and Vetland (1995)), the bottleneck-switch
probability (Mi et al. 2008, section 3.4), capacity, model error and alerts; and an overview
of every system. ``docs/report.md`` describes the page and its size bound.
"""

from __future__ import annotations

from streams.sinks.report.axes import log_ticks, nice_ticks, time_ticks
from streams.sinks.report.bounds import (MAX_ALERT_ROWS, MAX_CHART_CLASSES, MAX_CHART_TIERS,
                                         MAX_NAMES_LISTED, MAX_OVERVIEW_ROWS,
                                         MAX_OVERVIEW_SERIES, MAX_POINTS, MAX_REMEDIES,
                                         MAX_REPORT_BYTES, MAX_SYSTEM_SECTIONS,
                                         MAX_TIMELINE_ROWS)
from streams.sinks.report.charts import SystemCharts, alert_timeline, overview_charts
from streams.sinks.report.episodes import (ALERT_NAMES, Episode, Story, breach_spans, episodes,
                                           story)
from streams.sinks.report.html import (REPORT_NAME, SECTIONS, SYSTEM_CHARTS, alert_table,
                                       remediation_html, render_report, write_report)
from streams.sinks.report.load import (ReportError, StoreData, SystemData, Thresholds,
                                       load_store, urgency)
from streams.sinks.report.palette import (ALERT_COLORS, AMBER, GREY, INK, LEGEND_INK, PALETTE,
                                          PURPLE, RED)
from streams.sinks.report.rows import (ROW_TYPES, AlertRow, ClassPredictionRow, DemandRow,
                                       PredictionRow, RemediationRow, TierPredictionRow, columns)
from streams.sinks.report.svg import Marker, Rule, Series, Span, TimeChart, legend
from streams.sinks.report.text import duration, utc

__all__ = [
    "ReportError", "Thresholds", "SystemData", "StoreData", "load_store", "render_report",
    "write_report", "SECTIONS", "SYSTEM_CHARTS", "REPORT_NAME",
    # the store's rows
    "PredictionRow", "ClassPredictionRow", "TierPredictionRow", "DemandRow", "AlertRow",
    "RemediationRow", "ROW_TYPES", "columns",
    # the size bound
    "MAX_POINTS", "MAX_REPORT_BYTES", "MAX_SYSTEM_SECTIONS", "MAX_OVERVIEW_ROWS",
    "MAX_OVERVIEW_SERIES", "MAX_ALERT_ROWS", "MAX_TIMELINE_ROWS",
    "MAX_CHART_CLASSES", "MAX_CHART_TIERS", "MAX_NAMES_LISTED", "MAX_REMEDIES",
    # colours
    "PALETTE", "RED", "AMBER", "PURPLE", "GREY", "INK", "LEGEND_INK", "ALERT_COLORS",
    # charts and their parts
    "nice_ticks", "log_ticks", "time_ticks", "Series", "Rule", "Marker", "Span", "legend",
    "TimeChart", "SystemCharts", "overview_charts", "alert_timeline",
    # alerts
    "ALERT_NAMES", "Episode", "episodes", "breach_spans", "Story", "story", "alert_table",
    "remediation_html", "urgency", "utc", "duration",
]
