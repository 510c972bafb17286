"""Alerts with hysteresis: a condition must hold for ``fire_after`` consecutive solves before
its alert fires, and be clear for ``resolve_after`` consecutive solves before it resolves.
Between the two thresholds of a condition (its dead band) neither counter moves, so a value
hovering at the threshold does not flap.

Kinds:

* ``predicted_breach`` -- the model predicts that a class will exceed its SLA within the
  horizon (the time to breach, the class and the tier that causes it are labelled); while the
  model is not trusted, also the measured response-time trend
  (:mod:`streams.predict.response_trend`; ``trigger`` ``trend``: a TREND ALERT);
* ``current_breach`` -- a class's measured response time is above its SLA now;
* ``model_error`` -- the model's prediction at the current load is off from what was measured
  by more than the threshold: its predictions should not be trusted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streams.core.outputs import updated

__all__ = ["AlertBook", "KINDS"]

KINDS = ("predicted_breach", "current_breach", "model_error")


def _payload(event: Mapping[str, Any] | Callable[[], Mapping[str, Any]]) -> Mapping[str, Any]:
    return event() if callable(event) else event


@dataclass
class _Track:
    active: bool = False
    on: int = 0
    off: int = 0
    since: float | None = None


@dataclass
class AlertBook:
    """Alert states of one system, keyed by ``kind`` or ``kind/class``."""

    fire_after: int = 2
    resolve_after: int = 3
    tracks: dict[str, _Track] = field(default_factory=dict)

    def evaluate(self, key: str, condition: bool | None,
                 event: Any | Callable[[], Any], time: float) -> Any | None:
        """Feed one solve's ``condition`` (``None``: in the dead band); return a ``firing`` or
        ``resolved`` event (``event`` -- an :class:`~streams.core.outputs.Alert` or a
        mapping -- with its ``state`` and ``since`` set) when the alert changes state.
        ``event`` may be a function returning it, called only then (most solves change no
        alert, and an event's summary is formatted text)."""
        track = self.tracks.setdefault(key, _Track())
        if condition is None:
            return None
        if condition:
            track.on, track.off = track.on + 1, 0
            if not track.active and track.on >= self.fire_after:
                track.active, track.since = True, time
                return updated(_payload(event), state="firing", since=time)
        else:
            track.on, track.off = 0, track.off + 1
            if track.active and track.off >= self.resolve_after:
                since, track.active, track.since = track.since, False, None
                return updated(_payload(event), state="resolved", since=since)
        return None

    def active(self) -> list[str]:
        return sorted(k for k, t in self.tracks.items() if t.active)

    def to_dict(self) -> dict[str, Any]:
        return {"fire_after": self.fire_after, "resolve_after": self.resolve_after,
                "tracks": {k: vars(t) for k, t in self.tracks.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "AlertBook":
        return cls(data["fire_after"], data["resolve_after"],
                   {k: _Track(**v) for k, v in data["tracks"].items()})
