"""Admission of a window to its system, in arrival order: a window of an unknown tier, a
duplicate, one too late (:meth:`streams.core.tier.TierState.admit`), one beyond a limit
(``[limits]``) or an implausible one (:mod:`streams.core.plausibility`) is dead-lettered;
an admitted window that passes the next solve boundary (``solve_offset_s`` plus a multiple
of ``solve_interval_s``, in event time) marks that boundary's solve due.
"""

from __future__ import annotations

import math
from itertools import islice
from typing import Any, Sequence

from streams.core.config import SystemConfig
from streams.core.outputs import UNSET, DeadLetter
from streams.core.plausibility import Plausibility, Verdict, far_ahead
from streams.core.records import Window
from streams.core.tier import REPLAY, TierState

__all__ = ["Admission", "REJECTED_CLASSES", "rejection"]


#: request classes of a rejected window quoted in its dead letter's ``record``, per map (names
#: are at most 200 characters, so the dead letter stays a few tens of KB whatever the window:
#: far below Kafka's 1 MB largest message)
REJECTED_CLASSES = 64


def rejection(w: Window, field_name: str, reason: str, value: Any = None) -> DeadLetter:
    """The dead letter of a valid window the system rejects; ``value``: the offending value
    (default the window's ``field_name`` as the record has it); its ``record`` quotes at most
    :data:`REJECTED_CLASSES` classes per map (``truncated`` says how many it had)."""
    record = w.to_record()
    truncated: list[str] = []
    for key in ("completions", "response_time_s"):
        per_class = record.get(key)
        if per_class and len(per_class) > REJECTED_CLASSES:
            record[key] = dict(islice(per_class.items(), REJECTED_CLASSES))
            truncated.append(f"record.{key}: {REJECTED_CLASSES} of {len(per_class)} classes "
                             f"shown")
    return DeadLetter(reason=reason, field=field_name,
                      value=record.get(field_name) if value is None else value,
                      system=w.system, tier=w.tier, end=w.end, record=record,
                      truncated=truncated or UNSET)


#: configured tier names quoted in an "unknown tier" dead letter: its reason stays a line
#: whatever the configuration (a list of 10^5 names would make each ~1 MB)
QUOTED_TIERS = 8


def _some(names: Sequence[str]) -> str:
    """The first :data:`QUOTED_TIERS` of ``names`` and how many more."""
    shown = ", ".join(repr(n) for n in islice(names, QUOTED_TIERS))
    more = len(names) - QUOTED_TIERS
    return f"{shown} and {more} more" if more > 0 else shown


class Admission:
    """The admission steps of :class:`streams.engine.system.SystemState` (whose state they
    read and write: its tiers, solve boundary, newest end and held windows)."""

    system: str
    config: SystemConfig
    tiers: dict[str, TierState]
    next_solve: float | None
    solve_offset: float
    solve_tiers: int
    newest_end: float | None
    ahead: list[float] | None
    held: int
    held_due: list[int]

    def admit(self, w: Window, max_tiers: int | None = None, max_classes: int | None = None,
              rules: Plausibility | None = None
              ) -> tuple[DeadLetter | None, TierState | None, bool, float | None]:
        """First look at a window, in arrival order: ``(rejection, tier, late, solve_at)``.

        ``rejection`` is the dead letter of a window of an unknown tier, a duplicate, one too
        late, or (``rules``) an implausible one (:mod:`streams.core.plausibility`); otherwise the
        window is admitted to ``tier`` (``late``: older than the tier's
        newest). Neither (both ``None``): a replay, a window the tier already applied with the
        same content (:data:`streams.core.tier.REPLAY`), skipped and counted in the tier's
        ``replays``. ``solve_at``: the solve boundary this window passed, if any -- the system is
        solved at that event time over the windows admitted before this one, and this window
        applied after (:meth:`accept`). ``max_tiers`` / ``max_classes``
        (:class:`streams.core.config.Limits`): a window that would add a tier or classes beyond them
        is rejected naming the limit."""
        cfg = self.config
        if cfg.tiers and w.tier not in self.tiers:
            return rejection(w, "tier", f"unknown tier {w.tier!r} (configured tiers: "
                                         f"{_some(cfg.tiers)})"), None, False, None
        tier = self.tiers.get(w.tier)
        if tier is None:
            if max_tiers is not None and len(self.tiers) >= max_tiers:
                return rejection(w, "tier", f"tier limit: system {self.system!r} has "
                                             f"{len(self.tiers)} tiers (limits.max_tiers = "
                                             f"{max_tiers})"), None, False, None
            tier = self.tiers[w.tier] = TierState(w.tier, cfg)
        new: list[str] = []
        if max_classes is not None:
            problem, new = tier.class_limit(w, max_classes)
            if problem is not None:
                return rejection(w, "completions", problem), None, False, None
        if rules is not None:
            verdict = self._ahead(w, rules)
            if verdict is not None:
                return self._held(w, verdict), None, False, None
        reason, late, verdict = tier.admit(w, rules)
        if reason == REPLAY:
            tier.replays += 1
            return None, None, False, None
        if reason is not None:
            tier.duplicates += reason.startswith("duplicate")
            return rejection(w, "end", reason), None, False, None
        if verdict is not None:
            return self._held(w, verdict), None, False, None
        tier.admit_classes(new)
        if self.newest_end is None or w.end > self.newest_end:
            self.newest_end = w.end
        solve_at = None
        if self.next_solve is None:         # the first solve has at least half an interval
            self.next_solve = self._boundary(w.end + 0.5 * cfg.solve_interval_s)
        elif w.end > self.next_solve:
            solve_at = self.next_solve
            self.next_solve = self._boundary(w.end)
            self.solve_tiers = len(self.tiers)
            self.held_due.append(self.held)
            self.held = 0
        return None, tier, late, solve_at

    def _ahead(self, w: Window, rules: Plausibility) -> Verdict | None:
        """The far-ahead rule (:func:`streams.core.plausibility.far_ahead`) with its confirmation:
        the ``confirm_windows``-th window in a row within ``max_ahead_s`` of the first held one
        is accepted (a system restarting after a long gap), the ones before it held."""
        verdict = far_ahead(w, self.newest_end, rules)
        if verdict is None:
            self.ahead = None
            return None
        first = self.ahead
        if first is not None and abs(w.end - first[0]) <= rules.max_ahead_s:
            first[1] += 1
        else:
            first = self.ahead = [w.end, 1]
        if first[1] < rules.confirm_windows:
            return Verdict(verdict.field, verdict.value,
                           f"{verdict.reason}; unconfirmed: {int(first[1])} of "
                           f"plausibility.confirm_windows = {rules.confirm_windows} windows "
                           f"in a row that far ahead")
        self.ahead = None
        return None

    def _held(self, w: Window, verdict: Verdict) -> DeadLetter:
        """The dead letter of an implausible window, counted for the next prediction's
        flags."""
        self.held += 1
        return rejection(w, verdict.field, verdict.reason, verdict.value)

    def _boundary(self, end: float) -> float:
        """The first solve boundary at or after ``end``."""
        interval, offset = self.config.solve_interval_s, self.solve_offset
        return offset + math.ceil((end - offset) / interval) * interval
