"""Alert episodes: an alert from the solve at which it fired to the one at which it resolved.

Episodes are keyed as perfcast's alert book keys its alerts (the current breach per class), so
a bar on the timeline, a marker on a chart and a row of the overview name the same alert.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.sinks.report.load import SystemData
from streams.sinks.report.rows import AlertRow

__all__ = ["ALERT_NAMES", "Episode", "episodes", "breach_spans", "Story", "story"]

ALERT_NAMES = {"predicted_breach": "breach predicted", "current_breach": "SLA broken",
               "model_error": "model error"}


@dataclass(frozen=True)
class Episode:
    """An alert from firing to resolved (``end`` ``None``: still firing at the store's end)."""

    system: str
    alert: str
    cls: str | None
    start: float
    end: float | None
    fired: AlertRow

    @property
    def row(self) -> str:
        what = ALERT_NAMES.get(self.alert, self.alert)
        return f"{what}: {self.cls}" if self.alert == "current_breach" and self.cls else what


def episodes(system: SystemData) -> list[Episode]:
    """Firing -> resolved intervals of a system's alerts, keyed as perfcast keys them (the
    current breach per class)."""
    open_: dict[tuple[str, str | None], AlertRow] = {}
    out: list[Episode] = []
    for a in system.alerts:
        key = (a.alert, a.cls if a.alert == "current_breach" else None)
        if a.state == "firing":
            open_.setdefault(key, a)
        elif a.state == "resolved" and key in open_:
            fired = open_.pop(key)
            out.append(Episode(system.name, key[0], key[1], fired.time, a.time, fired))
    out += [Episode(system.name, k[0], k[1], f.time, None, f) for k, f in open_.items()]
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


@dataclass(frozen=True)
class Story:
    """The headline: the first predicted-breach alert, the first SLA break, and the lead
    time between them (``None`` unless both fired)."""

    predicted: AlertRow | None
    broken: AlertRow | None
    lead_s: float | None


def story(system: SystemData) -> Story:
    """When the breach was first predicted, when the SLA was first broken."""
    firing = [a for a in system.alerts if a.state == "firing"]
    predicted = next((a for a in firing if a.alert == "predicted_breach"), None)
    broken = next((a for a in firing if a.alert == "current_breach"), None)
    lead = broken.time - predicted.time if predicted and broken else None
    return Story(predicted, broken, lead)
