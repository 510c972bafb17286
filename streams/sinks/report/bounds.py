"""The page's size bound and the caps that keep it (``docs/report.md``).

Whatever the store holds -- its time span, its systems, classes, tiers and alerts -- the
report is at most :data:`MAX_REPORT_BYTES`. Beyond the caps, what is left out is named on the
page (the store still has everything).
"""

from __future__ import annotations

__all__ = ["MAX_POINTS", "MAX_REPORT_BYTES", "MAX_SYSTEM_SECTIONS", "MAX_OVERVIEW_ROWS",
           "MAX_OVERVIEW_SERIES", "MAX_ALERT_ROWS", "MAX_TIMELINE_ROWS",
           "MAX_CHART_CLASSES", "MAX_CHART_TIERS", "MAX_NAMES_LISTED", "MAX_REMEDIES"]

#: most points drawn per series (longer series are thinned to the min and max of buckets)
MAX_POINTS = 800
#: the page's size bound, bytes
MAX_REPORT_BYTES = 20_000_000
#: systems drawn in their own section, most urgent first (:func:`.load.urgency`); every
#: section must also fit in what the rest of the page leaves of :data:`MAX_REPORT_BYTES`
MAX_SYSTEM_SECTIONS = 100
#: systems listed in the overview table, and drawn in its charts, most urgent first
MAX_OVERVIEW_ROWS, MAX_OVERVIEW_SERIES = 1000, 10
#: alert state changes listed (one table, every system's), most recent first; timeline rows
MAX_ALERT_ROWS, MAX_TIMELINE_ROWS = 500, 60
#: classes and tiers drawn in a system's charts (the busiest classes; tiers in order)
MAX_CHART_CLASSES, MAX_CHART_TIERS = 12, 12
#: names listed in a section's header line
MAX_NAMES_LISTED = 30
#: remediation actions listed per system (its last solve at risk, cheapest first)
MAX_REMEDIES = 12
