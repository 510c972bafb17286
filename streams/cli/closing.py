"""The closing lines of an embedded run (``perfcast run``, ``perfcast demo``): per system what
the last prediction found and what the run's alerts said, in lines of at most 80 columns.

Per system: the last solve (users, capacity, headroom, time to breach), the first predicted
breach (the ``predicted_breach`` alert's first firing) and the measured one (the first
``current_breach``) with the lead between them, the alerts fired, one sentence tying the
busiest tier, the tier that causes the breach and the remedy together, the remedy, and what
the model assumed for missing inputs (the ``assumed:`` flags,
:func:`streams.predict.model.assumed_structure`,
:func:`streams.predict.prediction.assumed_workload`). The remedy named is the one the
predicted-breach alert quoted when it first fired -- the one to act on, and the one in the
alert's text -- else the last solve's.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from streams.core.outputs import UNSET, Alert, Outputs, Prediction
from streams.core.records import format_time
from streams.predict.model import ASSUMED
from streams.sinks.report.text import duration as _duration

__all__ = ["Findings", "Solve", "alert_lines", "closing_lines", "why_sentence", "WIDTH"]

#: the closing lines' width: an 80-column terminal, less one column (a terminal that wraps at
#: the last column leaves an empty line after a full one)
WIDTH = 79
#: systems described one by one; the rest are counted (predictions.jsonl has them all)
MAX_SYSTEMS = 10
#: alert texts printed per system; the rest are counted (alerts.jsonl has them all)
MAX_ALERTS = 6


@dataclass(frozen=True)
class Solve:
    """What the closing lines read of a prediction (kept per system instead of the whole
    prediction: a run over many systems keeps one of these each)."""

    time: float
    model: str | None
    users: int | None
    capacity_users: int | None
    capacity_limited: bool | None
    headroom_users: int | None
    time_to_breach_s: float | None
    alert_capacity_users: int | None
    bottleneck_tier: str | None
    breach_tier: str | None
    breach_class: str | None
    breach_tier_share: float | None
    #: the breach tier's ``I`` when it is bursty
    breach_idc: float | None
    remediation_summary: str | None
    remediation_tier: str | None
    #: the flags of what the model assumed (:data:`streams.predict.model.ASSUMED`)
    assumed: tuple[str, ...]
    #: an open workload's request rate, its capacity and headroom, requests per second
    #: (``None``: a closed workload, read in users)
    rate: float | None = None
    capacity_rate: float | None = None
    headroom_rate: float | None = None
    #: the names of the pools the model solved (a bottleneck or breach may be one)
    pools: tuple[str, ...] = ()

    @classmethod
    def of(cls, p: Prediction) -> "Solve":
        def get(name: str) -> Any:            # a field the prediction leaves out reads None
            value = getattr(p, name)
            return None if value is UNSET else value

        info = p.tiers.get(p.breach_tier) if isinstance(p.breach_tier, str) else None
        return cls(p.time, get("model"), get("users"), get("capacity_users"),
                   get("capacity_limited"), get("headroom_users"), get("time_to_breach_s"),
                   get("alert_capacity_users"), get("bottleneck_tier"), get("breach_tier"),
                   get("breach_class"), get("breach_tier_share"),
                   info.idc if info is not None and info.bursty else None,
                   get("remediation_summary"), get("remediation_tier"),
                   tuple(f for f in p.flags if f.startswith(ASSUMED)),
                   get("arrival_rate_per_s"), get("capacity_rate_per_s"),
                   get("headroom_rate_per_s"), tuple(get("pools") or ()))


@dataclass
class _System:
    last: Solve | None = None
    #: the predicted-breach alert's first firing and the solve that fired it
    predicted: tuple[Alert, Solve | None] | None = None
    measured: Alert | None = None
    fired: Counter[str] = field(default_factory=Counter)
    texts: list[Alert] = field(default_factory=list)


@dataclass
class Findings:
    """What the closing lines need, gathered batch by batch (:meth:`add`)."""

    systems: dict[str, _System] = field(default_factory=dict)

    def add(self, out: Outputs) -> None:
        for p in out.predictions:
            if p.model:
                self._system(p.system).last = Solve.of(p)
        for a in out.alerts:
            if a.state != "firing":
                continue
            s = self._system(a.system)
            s.fired[a.alert] += 1
            if len(s.texts) < MAX_ALERTS:       # the rest are counted (bounded memory)
                s.texts.append(a)
            if a.alert == "predicted_breach" and s.predicted is None:
                at = next((p for p in out.predictions if p.system == a.system
                           and p.time == a.time), None)
                s.predicted = (a, None if at is None else Solve.of(at))
            elif a.alert == "current_breach" and s.measured is None:
                s.measured = a

    def _system(self, name: str) -> _System:
        if name not in self.systems:
            self.systems[name] = _System()
        return self.systems[name]


def _wrap(text: str, indent: str = "  ", hanging: str = "    ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=hanging,
                         break_long_words=False, break_on_hyphens=False) or [indent]


def _hhmm(t: float) -> str:
    return format_time(t)[11:16]


def _state(p: Solve) -> str:
    """``185 users, capacity 118 (67 over): SLA broken now`` and the like; an open workload's
    in requests per second (``412 req/s, capacity 488 req/s (76 headroom)``)."""
    if p.rate is not None:
        text = f"{p.rate:.4g} req/s"
        if p.capacity_rate is None:
            return text + ", no capacity (no SLA reached within the search)"
        head = p.headroom_rate or 0.0
        text += (f", capacity {p.capacity_rate:.4g} req/s ({abs(head):.3g} "
                 f"{'headroom' if head >= 0 else 'over'})")
    else:
        text = f"{p.users} user{'' if p.users == 1 else 's'}"
        if p.capacity_users is None:
            return text + ", no capacity (no SLA reached within the search)"
        cap = f"{p.capacity_users}{'+' if p.capacity_limited else ''}"
        head = p.headroom_users or 0
        text += f", capacity {cap} ({abs(head)} {'headroom' if head >= 0 else 'over'})"
    ttb = p.time_to_breach_s
    if ttb == 0:
        return text + ": SLA broken now"
    if ttb is None:
        return text + ": no breach ahead"
    return text + f": breach in {_duration(ttb)}"


def why_sentence(p: Solve) -> str:
    """One sentence tying the busiest tier, the tier that causes the breach and the remedy's
    tier together (:mod:`streams.predict.story`); empty without a breach tier."""
    breach, busiest, remedy = p.breach_tier, p.bottleneck_tier, p.remediation_tier
    if breach is None:
        return ""
    bursty = "" if p.breach_idc is None else f" (bursty, I = {p.breach_idc:.3g})"
    share = (f": it holds {100 * p.breach_tier_share:.0f}% of {p.breach_class}'s response "
             f"time there" if p.breach_tier_share is not None and p.breach_class else "")
    named = {n: f"the pool {n}" for n in p.pools}
    if busiest and busiest != breach:
        what = "pool" if busiest in named else "tier"
        text = f"{busiest} is the busiest {what}, but {named.get(breach, breach)}{bursty} is " \
            f"where the SLA breaks{share}"
    else:
        text = f"{named.get(breach, breach)}{bursty} is the bottleneck and where the SLA " \
            f"breaks{share}"
    if not p.remediation_summary:
        return text + "."
    if remedy is None:
        return text + "; no action on one tier restores the SLA, so the remedy limits admission."
    if remedy == breach:
        return text + f"; the remedy acts on {breach}."
    return text + f"; the cheapest remedy acts on {remedy} instead."


def _system_lines(name: str, s: _System) -> list[str]:
    p = s.last
    if p is None:
        return [f"{name}: no solve with a model (predictions.jsonl's flags say why)"]
    lines = _wrap(f"{name} at {_hhmm(p.time)} ({p.model}): {_state(p)}", "", "    ")
    if s.predicted is not None:
        alert, at = s.predicted
        ahead = f" in about {(alert.time_to_breach_s or 0) / 60:.0f} min" \
            if isinstance(alert.time_to_breach_s, (int, float)) else ""
        cap = "" if at is None else f" (capacity {at.capacity_rate:.4g} req/s)" \
            if at.rate is not None and at.capacity_rate is not None else \
            f" (capacity {at.alert_capacity_users})" if at.alert_capacity_users is not None \
            else ""
        lines += _wrap(f"first predicted breach {_hhmm(alert.time)}: class {alert.class_!r} "
                       f"to exceed its SLA{ahead}{cap}")
    else:
        lines.append("  no predicted-breach alert")
    if s.measured is not None:
        m = s.measured
        lines += _wrap(f"measured breach {_hhmm(m.time)}: class {m.class_!r} "
                       f"{m.value or 0:.3g} s over its {m.threshold or 0:g} s SLA")
    if s.predicted is not None and s.measured is not None:
        lead = s.measured.time - s.predicted[0].time
        lines.append(f"  lead: breach predicted {_duration(lead)} "
                     f"{'before' if lead >= 0 else 'after'} the SLA was actually broken")
    if s.fired:
        lines += _wrap("alerts: " + ", ".join(f"{k} x{n}" for k, n in s.fired.items()))
    basis = s.predicted[1] if s.predicted and s.predicted[1] is not None else p
    why = why_sentence(basis)
    if why:
        lines += _wrap(why)
    if basis.remediation_summary:
        when = "the alert's" if basis is not p else "the last solve's"
        lines += _wrap(f"remedy ({when}): {basis.remediation_summary}")
    lines += [line for flag in p.assumed for line in _wrap(flag)]
    return lines


def alert_lines(findings: Findings) -> list[str]:
    """Each firing alert event once, ``HH:MM alert: text``, wrapped, at most
    :data:`MAX_ALERTS` per system."""
    lines: list[str] = []
    for name, s in list(findings.systems.items())[:MAX_SYSTEMS]:
        for a in s.texts:
            lines += _wrap(f"{_hhmm(a.time)} {a.alert}: {a.summary}", "  ", "      ")
        more = sum(s.fired.values()) - len(s.texts)
        if more > 0:
            lines.append(f"  ... {more} more of {name} in alerts.jsonl")
    return lines


def closing_lines(findings: Findings) -> list[str]:
    """The per-system summary (module docstring), systems with a breach soonest first."""
    def risk(item: tuple[str, _System]) -> tuple[float, str]:
        ttb = item[1].last.time_to_breach_s if item[1].last is not None else None
        return (float("inf") if ttb is None else ttb, item[0])

    ranked = sorted(findings.systems.items(), key=risk)
    lines: list[str] = []
    for name, s in ranked[:MAX_SYSTEMS]:
        lines += _system_lines(name, s)
    if len(ranked) > MAX_SYSTEMS:
        lines.append(f"... and {len(ranked) - MAX_SYSTEMS} more systems (predictions.jsonl)")
    return lines
