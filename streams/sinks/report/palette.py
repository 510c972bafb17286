"""The report's colours: a colour-blind safe palette (Okabe and Ito, 2008) for series, then
darker fallbacks, and one colour per alert kind, the same on every chart and table."""

from __future__ import annotations

__all__ = ["PALETTE", "RED", "AMBER", "PURPLE", "GREY", "INK", "LEGEND_INK", "ALERT_COLORS"]

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#7F6D00",
           "#555555", "#8C564B", "#17BECF")
RED, AMBER, PURPLE, GREY, INK = "#C62828", "#E08E00", "#7B1FA2", "#9E9E9E", "#222222"
LEGEND_INK = "#4A5361"
ALERT_COLORS = {"predicted_breach": AMBER, "current_breach": RED, "model_error": PURPLE}
