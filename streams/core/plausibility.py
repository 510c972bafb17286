"""Plausibility of a valid window against its own system's and tier's recent windows.

:func:`streams.core.records.parse_window` judges a record on its own (types, ranges, names); the
rules here judge a window that is valid on its own but cannot be what its system measured,
given the windows that came before (docs/pipeline.md, "Plausibility"). Each returns ``None``
(plausible) or a :class:`Verdict` naming the field, the value and the reason; the window is
then dead-lettered and never reaches the estimators, the history, the interval sums or the
solve timer. They run in :meth:`streams.engine.system.SystemState.admit`, which both shells call
through :class:`streams.engine.pipeline.Pipeline` -- one definition. Pure functions, no state: the
state they read (recent ends, starts, users, rates) is the tier's and the system's.

- **far ahead** (:func:`far_ahead`): an ``end`` more than ``max_ahead_s`` past the system's
  newest accepted end. The stream's clock is the data's own (a backtest of last year's data
  is as valid as a live stream), so the reference is the system's own newest end, not the wall
  clock. A system that restarts after a gap longer than ``max_ahead_s`` confirms its new clock
  with ``confirm_windows`` consecutive windows near each other: the first ``confirm_windows - 1``
  are dead-lettered (``unconfirmed``), the rest accepted.
- **overlap** (:func:`overlap`): a window ``[end - window_s, end]`` overlapping the tier's
  neighbouring accepted window by more than ``overlap_tolerance`` of its length (the jitter the
  index of dispersion allows, ``streams.core.tier.WINDOW_JITTER``). A gap is no overlap.
- **no busy time for its completions** (:func:`physical`): ``n_k * min_demand_s`` above the
  busy core-seconds ``(U_k + utilization_resolution) T c``: every completion costs some
  CPU, at least ``min_demand_s`` (1 us); ``utilization_resolution`` allows for a utilization
  reported rounded to two digits.
- **jump** (:func:`jumped`): ``users`` or the completion rate ``n_k / T`` more than
  ``jump_factor`` times the median of the tier's last ``recent_windows`` accepted windows (at
  least :data:`MIN_RECENT` of them; the median floored at ``users_floor`` / ``rate_floor``, so
  an idle tier waking up is no jump). Only upward: a drop to idle is what idle tiers do. A real
  level shift confirms itself: ``confirm_windows`` consecutive jumped windows and the window
  that completes them is accepted, the tier's recent values starting again from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from streams.core.records import Window

__all__ = ["Plausibility", "Verdict", "far_ahead", "overlap", "physical", "jumped",
           "median", "MIN_RECENT"]

#: recent accepted windows a tier needs before a jump is judged against their median
MIN_RECENT = 5


@dataclass(frozen=True)
class Plausibility:
    """The thresholds of the plausibility rules (``[plausibility]``; docs/configuration.md)."""

    #: an ``end`` further than this past the system's newest accepted end is held (seconds)
    max_ahead_s: float = 86_400.0
    #: consecutive held windows (far ahead, or a jump) that confirm a new clock or level
    confirm_windows: int = 3
    #: overlap with the tier's neighbouring window allowed, as a share of the window's length
    overlap_tolerance: float = 0.1
    #: a ``users`` or completion rate this many times the tier's recent median is a jump
    jump_factor: float = 100.0
    #: recent accepted windows whose median is the reference of a jump
    recent_windows: int = 16
    #: the reference of a ``users`` jump is at least this many users
    users_floor: float = 10.0
    #: the reference of a completion-rate jump is at least this many completions per second
    rate_floor: float = 1.0
    #: the least CPU time a completion can cost (seconds)
    min_demand_s: float = 1e-6
    #: the rounding of a reported utilization allowed for
    utilization_resolution: float = 0.01


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a window is implausible: the field, its value, the reason (names the setting)."""

    field: str
    value: float
    reason: str


def far_ahead(w: Window, newest: float | None, rules: Plausibility) -> Verdict | None:
    """``w.end`` more than ``max_ahead_s`` past ``newest``, the system's newest accepted end
    (``None``: the system has none yet -- nothing to compare with)."""
    if newest is None or w.end - newest <= rules.max_ahead_s:
        return None
    return Verdict("end", w.end, f"implausible: end={w.end!r} is {w.end - newest:.6g} s past "
                                 f"the system's newest window end {newest!r} (more than "
                                 f"plausibility.max_ahead_s = {rules.max_ahead_s:g})")


def overlap(w: Window, before_end: float | None, after_start: float | None,
            rules: Plausibility) -> Verdict | None:
    """``w`` overlapping the tier's accepted window that ends before it (``before_end``) or
    starts after its start (``after_start``, a late window's successor) by more than
    ``overlap_tolerance`` of ``w.window_s``."""
    start, allowed = w.end - w.window_s, rules.overlap_tolerance * w.window_s
    if before_end is not None and before_end - start > allowed:
        by, other = min(before_end, w.end) - start, f"the window ending at {before_end!r}"
    elif after_start is not None and w.end - after_start > allowed:
        by, other = w.end - max(after_start, start), f"the window starting at {after_start!r}"
    else:
        return None
    return Verdict("end", w.end, f"implausible: the window [{start!r}, {w.end!r}] overlaps "
                                 f"{other} of the same tier by {by:.6g} s (more than "
                                 f"plausibility.overlap_tolerance = {rules.overlap_tolerance:g}"
                                 f" of its {w.window_s:g} s)")


def physical(w: Window, rules: Plausibility, n: float | None = None) -> Verdict | None:
    """``n_k min_demand_s > (U_k + utilization_resolution) T c``: more completions than the
    busy time could have served (``n``: ``w.total_completions`` if known)."""
    if n is None:
        n = w.total_completions
    busy = (w.utilization + rules.utilization_resolution) * w.window_s * w.cores
    if n * rules.min_demand_s <= busy:
        return None
    return Verdict("completions", n, f"implausible: {n:.6g} completions need at least "
                                     f"{n * rules.min_demand_s:.6g} busy core-seconds "
                                     f"(plausibility.min_demand_s = {rules.min_demand_s:g} "
                                     f"each) but utilization {w.utilization:g} x "
                                     f"{w.window_s:g} s x {w.cores} cores gives "
                                     f"{w.utilization * w.window_s * w.cores:.6g}")


def median(values: Sequence[float]) -> float:
    """The median of a short non-empty sequence."""
    ordered = sorted(values)
    k = len(ordered)
    return ordered[k // 2] if k % 2 else 0.5 * (ordered[k // 2 - 1] + ordered[k // 2])


def jumped(name: str, value: float, recent: Sequence[float], floor: float,
           rules: Plausibility) -> Verdict | None:
    """``value`` (``users`` or the completion rate) more than ``jump_factor`` times the median
    of ``recent`` floored at ``floor``; ``None`` while fewer than :data:`MIN_RECENT` windows
    are known or when it is not."""
    factor = rules.jump_factor
    # the smallest recent value bounds the median from below: most windows stop here
    if len(recent) < MIN_RECENT or value <= factor * max(min(recent), floor):
        return None
    reference = max(median(recent), floor)
    if value <= rules.jump_factor * reference:
        return None
    field = "users" if name == "users" else "completions"
    return Verdict(field, value, f"implausible: {name} {value:.6g} is {value / reference:.3g}"
                                 f" times the tier's recent median {reference:.6g} (more than "
                                 f"plausibility.jump_factor = {rules.jump_factor:g}; "
                                 f"{rules.confirm_windows} such windows in a row confirm a "
                                 f"new level)")
