"""Scoring predicted-breach alerts against measured breaches: recall, lead time, false alarms.

Plain functions over episode lists, shared by the alert benches (``bench/accuracy/alerts.py``).
An *episode* is ``(start, end)`` in seconds, ``end = None`` while it is still open when the run
stops.

* **Caught breach** -- a breach episode starting at ``o`` is caught when an alert episode
  began strictly before it and is still firing after it (``f < o < r``; one resolving at the
  onset's own solve does not count); its **lead** is ``o - f`` (the start of the alert episode
  that covers the onset). A breach whose onset finds no alert active, or an alert firing at the
  onset itself, is a **miss**.
* **False alarm** -- an alert episode ``[f, r)`` during which no breach is active and after
  whose firing none starts within the horizon: no breach episode meets
  ``[f, max(r, f + horizon)]``. An alert that fires early and stays firing until the breach
  is a catch (with its long lead), not a false alarm.
* **Recall** -- caught breaches over breaches.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from streams.alerts.book import AlertBook

Episode = tuple[float, float | None]

__all__ = ["Episode", "RunScore", "Summary", "hysteresis_episodes", "score_alerts", "summarize"]


def hysteresis_episodes(conditions: Iterable[tuple[float, bool | None]], fire_after: int,
                        resolve_after: int) -> list[Episode]:
    """``(fired, resolved)`` episodes of an alert fed ``(time, condition)`` at each evaluation,
    through the pipeline's hysteresis (:class:`streams.alerts.book.AlertBook`: fires after
    ``fire_after`` consecutive ``True``, resolves after ``resolve_after`` consecutive ``False``,
    ``None`` is the dead band and moves neither counter)."""
    book = AlertBook(fire_after, resolve_after)
    out: list[Episode] = []
    for t, cond in conditions:
        ev = book.evaluate("a", cond, {}, t)
        if ev and ev["state"] == "firing":
            out.append((t, None))
        elif ev and ev["state"] == "resolved":
            out[-1] = (out[-1][0], t)
    return out


@dataclass(frozen=True)
class RunScore:
    """One alerting method on one run."""

    breaches: int                     # measured breach episodes
    caught: int                       # of which an alert was active at the onset
    leads: tuple[float, ...]          # lead of each caught breach, s
    alerts: int                       # alert episodes (firings)
    false_alarms: int
    first_breach: float | None        # onset of the first breach episode
    first_lead: float | None          # lead on the first breach; None: no breach or a miss


def _end(e: float | None) -> float:
    return math.inf if e is None else e


def score_alerts(alerts: Sequence[Episode], breaches: Sequence[Episode],
                 horizon_s: float) -> RunScore:
    """Score ``alerts`` against ``breaches`` (both sorted by start; see the module doc)."""
    if horizon_s < 0:
        raise ValueError(f"horizon_s must be >= 0, got {horizon_s!r}")
    leads: list[float | None] = []
    for onset, _ in breaches:
        covering = [f for f, r in alerts if f < onset < _end(r)]
        leads.append(onset - max(covering) if covering else None)
    false = 0
    for f, r in alerts:
        until = max(_end(r), f + horizon_s)
        if not any(o <= until and _end(c) >= f for o, c in breaches):
            false += 1
    caught = tuple(x for x in leads if x is not None)
    return RunScore(breaches=len(breaches), caught=len(caught), leads=caught,
                    alerts=len(alerts), false_alarms=false,
                    first_breach=breaches[0][0] if breaches else None,
                    first_lead=leads[0] if leads else None)


@dataclass(frozen=True)
class Summary:
    """A method over several runs."""

    runs: int
    breaches: int
    caught: int
    lead_median_s: float | None
    lead_min_s: float | None
    false_alarms: int
    runs_with_false_alarm: int

    @property
    def recall(self) -> float | None:
        return self.caught / self.breaches if self.breaches else None


def summarize(scores: Sequence[RunScore]) -> Summary:
    leads = [x for s in scores for x in s.leads]
    return Summary(runs=len(scores), breaches=sum(s.breaches for s in scores),
                   caught=sum(s.caught for s in scores),
                   lead_median_s=float(np.median(leads)) if leads else None,
                   lead_min_s=min(leads) if leads else None,
                   false_alarms=sum(s.false_alarms for s in scores),
                   runs_with_false_alarm=sum(1 for s in scores if s.false_alarms))
