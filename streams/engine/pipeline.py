"""The pipeline core both shells drive: raw window records in, output records out.

``Pipeline.process_many(records)`` takes a batch of raw records (bytes, text or mappings) and
returns the :class:`~streams.core.outputs.Outputs` they produced, exactly as if the records had been
processed one by one in order -- the same records, in the same order per output topic,
whatever the batch boundaries (tested): the embedded runner feeds chunks of a trace, the Faust
worker the batches its agent takes. ``process(raw)`` is a batch of one. Invalid records become
dead letters with the field, the value and the reason; the pipeline never raises on input.
No I/O, no asyncio.

When the input is metric samples (``[input] format``, docs/formats.md), they are first turned
into the windows they complete (:mod:`streams.sources.sample_windows`; what cannot be mapped
is dead-lettered), and those windows are the batch. A batch runs in three passes:

1. **admit**, in arrival order: parse, route to the system, reject unknown tiers, duplicates
   and windows too late, and note where a window passes its system's next solve boundary.
   Each system's admitted windows fall into *segments* separated by its solves.
2. **rounds**: round ``r`` applies every system's ``r``-th segment (history, interval sums),
   then steps the Kalman filters of all tiers together (:func:`streams.core.tier.step_tiers`, one
   vectorised step per window position: the per-call cost of numpy is shared by every tier),
   then solves the systems whose ``r``-th segment ended at a boundary, their MVA recursions
   side by side (:func:`streams.engine.system.solve_systems`). Systems are independent, so each sees
   exactly what it would have seen record by record.
3. **order**: the outputs, tagged with the position of the record that produced them, are put
   back in arrival order.
"""

from __future__ import annotations

import heapq
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from streams.core.config import Config
from streams.core.records import CORES_ASSUMED, InvalidWindow, Window, parse_window, short_repr
from streams.core.outputs import UNSET, DeadLetter, Outputs
from streams.engine.system import SystemState, solve_systems
from streams.engine.admission import rejection
from streams.core.tier import TierState, step_tiers

__all__ = ["Pipeline", "dead_letter"]

log = logging.getLogger("perfcast.pipeline")

#: longest raw record kept in a dead letter (characters): a dead letter stays far below Kafka's
#: default largest message (1 MB) whatever the input
RAW_LIMIT = 4096
#: longest offending value (as text) and field name kept in a dead letter: enough to recognise
#: it, while the reason is kept whole (``truncated`` says what was cut)
VALUE_LIMIT = 256
_INT64 = 2 ** 63

Raw = bytes | str | Mapping[str, Any]
Tagged = list[tuple[int, Any]]


def _text(text: str, limit: int = RAW_LIMIT) -> str:
    """``text`` cut to ``limit`` characters and writable as UTF-8 (a lone surrogate, from JSON's
    ``"\\ud800"`` or from a caller's string, becomes its escape ``\\ud800``: no encoder --
    JSON, MessagePack, SQLite, line protocol -- can take it as it is)."""
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _cut(name: str, kept: int, size: int | None, unit: str = "characters") -> str:
    """A ``truncated`` entry: what was cut, what is shown, of how much (when known)."""
    of = f" of {size}" if size is not None else ""
    return f"{name}: the first {kept}{of} {unit} shown"


def dead_letter(raw: Any, err: InvalidWindow) -> DeadLetter:
    """The dead-letter record of an invalid input: ``reason``, ``field``, the offending ``value``
    and the ``raw`` record, each bounded and JSON-safe: the value and the field to
    :data:`VALUE_LIMIT` characters, the raw record to :data:`RAW_LIMIT`; ``truncated`` names
    what was cut and how long it was."""
    truncated: list[str] = []
    if isinstance(raw, (bytes, bytearray, memoryview)):
        text = bytes(raw[:RAW_LIMIT]).decode("utf-8", "replace")
        if len(raw) > RAW_LIMIT:
            truncated.append(_cut("raw", RAW_LIMIT, len(raw), "bytes"))
    else:
        full = raw if isinstance(raw, str) else short_repr(raw, RAW_LIMIT + 1)
        text = _text(full)
        if len(full) > RAW_LIMIT:
            truncated.append(_cut("raw", RAW_LIMIT, len(full) if isinstance(raw, str) else None))
    value = err.value
    if isinstance(value, float):
        if value != value:                               # NaN is not JSON
            value = "NaN"
        elif value in (float("inf"), float("-inf")):
            value = repr(value)
    elif isinstance(value, (bool, type(None))):
        pass
    elif isinstance(value, int) and -_INT64 <= value < _INT64:
        pass
    else:                                   # text, a structure, an integer beyond JSON's
        full = value if isinstance(value, str) else short_repr(value, VALUE_LIMIT + 1)
        value = _text(full, VALUE_LIMIT)
        if len(full) > VALUE_LIMIT:
            truncated.append(_cut("value", VALUE_LIMIT,
                                  len(full) if isinstance(err.value, str) else None))
    if len(err.field) > VALUE_LIMIT:
        truncated.append(_cut("field", VALUE_LIMIT, len(err.field)))
    return DeadLetter(reason=_text(str(err)), field=_text(err.field, VALUE_LIMIT), value=value,
                      raw=text, truncated=truncated or UNSET)


@dataclass
class _Segment:
    """Admitted windows of one system between two of its solves: ``(tier, window, late,
    position)``; ``solve``: ``(event time, position of the window that passed it, tiers the
    system had then)``."""

    windows: list[tuple[TierState, Window, bool, int]] = field(default_factory=list)
    solve: tuple[float, int, int] | None = None


@dataclass
class _Collected:
    """Outputs tagged with the position of the record that produced them."""

    estimates: Tagged = field(default_factory=list)
    predictions: Tagged = field(default_factory=list)
    alerts: Tagged = field(default_factory=list)
    deadletter: Tagged = field(default_factory=list)

    def ordered(self) -> Outputs:
        def order(tagged: Tagged) -> list[Any]:
            return [r for _, r in sorted(tagged, key=lambda t: t[0])]
        return Outputs(order(self.estimates), order(self.predictions), order(self.alerts),
                       order(self.deadletter))


def _sample_windows(config: Config) -> Any:
    """The accumulator of metric samples when ``[input]`` names a metric format, else
    ``None``."""
    if config.input is None or not config.input.samples:
        return None
    from streams.sources.sample_windows import SampleWindows

    return SampleWindows(config.input)


class Pipeline:
    """All systems' state and the batch step (module docstring)."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.systems: dict[str, SystemState] = {}
        self.records = 0
        self.rejected = 0
        #: windows skipped as replays (seen before with the same content, ``TierState.admit``)
        self.replays = 0
        #: windows accepted with a utilization clamped into [0, 1] (within the tolerance)
        self.clamped = 0
        #: per position in the current batch: the flags of an admitted flagged window
        self.flagged: dict[int, tuple[str, ...]] = {}
        #: per record of the last batch: its system, ``None`` if it was invalid
        self.batch_systems: list[str | None] = []
        #: newest window ``end`` per system in memory (event time)
        self.last_seen: dict[str, float] = {}
        #: systems evicted for being idle (``[limits] idle_system_s``), since the start
        self.evicted = 0
        #: after a scan for idle systems that found none, the next waits until this many
        #: windows have been accepted (a tenth of the systems more): scans stay rare
        self._next_scan = 0
        #: systems evicted during the batch being processed, by their plan's key: their
        #: windows admitted before the eviction are still applied (as record by record)
        self._retired: dict[str, SystemState] = {}
        #: metric samples to windows, when the input is a metric format (``[input]``)
        self.samples = _sample_windows(self.config)
        #: per window of the last batch: the source partition of the record that completed it
        self.batch_partitions: list[int] = []
        #: per window of the batch made from samples: its flags (a counter reset)
        self._sample_flags: list[tuple[str, ...]] = []

    def system(self, name: str) -> SystemState:
        state = self.systems.get(name)
        if state is None:
            state = self.systems[name] = SystemState(name, self.config.system(name))
        return state

    def process(self, raw: Raw) -> Outputs:
        """One input record."""
        return self.process_many([raw])

    def process_many(self, records: Iterable[Raw],
                     partitions: list[int] | None = None) -> Outputs:
        """A batch of input records (module docstring); ``partitions[i]``: the source partition
        of record ``i`` (kept per window in :attr:`batch_partitions`)."""
        out = _Collected()
        if self.samples is not None:
            records, partitions = self._translate(records, partitions, out)
        self.batch_partitions = list(partitions) if partitions is not None else []
        plans = self._admit(records, out)
        for r in range(max((len(p) for p in plans.values()), default=0)):
            segments = [(name, plan[r]) for name, plan in plans.items() if r < len(plan)]
            tiers: list[TierState] = []
            for name, seg in segments:
                state = self._retired.get(name) or self.systems[name]
                for tier, w, late, index in seg.windows:
                    state.accept(tier, w, late, index, out.estimates)
                tiers += state.tiers.values()
            out.estimates += step_tiers(tiers)
            due = [(name, seg.solve) for name, seg in segments if seg.solve is not None]
            solved = solve_systems([(self._retired.get(name) or self.systems[name], time)
                                    for name, (time, _, _) in due],
                                   [n for _, (_, _, n) in due])
            for (_, (_, index, _)), done in zip(due, solved):
                out.predictions += [(index, p) for p in done.predictions]
                out.alerts += [(index, a) for a in done.alerts]
        self._retired.clear()
        if self.flagged:
            self._flag_estimates(out.estimates)
        return out.ordered()

    def _translate(self, records: Iterable[Raw], partitions: list[int] | None,
                   out: _Collected) -> tuple[list[Raw], list[int]]:
        """Metric samples to the windows they complete (:mod:`streams.sources.sample_windows`);
        what cannot be mapped is dead-lettered, ahead of the windows made after it."""
        assert self.samples is not None
        made = self.samples.translate(records, partitions)
        self._sample_flags = made.flags
        for position, raw, err in made.dead:
            self.records += 1
            self.rejected += 1
            out.deadletter.append((position, dead_letter(raw, err)))
        return made.windows, made.partitions

    # -- limits ------------------------------------------------------------------------------
    def _room_for(self, w: Window, plans: dict[str, list[_Segment]]) -> DeadLetter | None:
        """``None`` if a new system ``w.system`` may be kept (after evicting idle systems),
        else the dead letter naming the limit. ``plans``: the batch's admitted windows so
        far; an evicted system's are kept under another key and still applied, so the outputs
        do not depend on where batches begin and end."""
        limits = self.config.limits
        if len(self.systems) < limits.max_systems:
            return None
        self._evict_idle(plans)
        if len(self.systems) < limits.max_systems:
            return None
        return rejection(w, "system", f"system limit: {len(self.systems)} systems kept, none "
                                       f"idle for {limits.idle_system_s:g} s of event time "
                                       f"(limits.max_systems = {limits.max_systems}, "
                                       f"limits.idle_system_s)")

    def stream_clock(self) -> float:
        """The stream's event time: the newest ``end`` of all but the newest 1% of systems
        (a system or two sending windows from the far future do not make every other one
        look idle)."""
        ends = self.last_seen.values()
        if not ends:
            return -math.inf
        return heapq.nlargest(len(self.last_seen) // 100 + 1, ends)[-1]

    def _evict_idle(self, plans: dict[str, list[_Segment]]) -> None:
        """Evict every system without a window for ``idle_system_s`` of event time
        (:meth:`stream_clock`)."""
        accepted = self.records - self.rejected
        if accepted < self._next_scan:
            return
        idle_s = self.config.limits.idle_system_s
        cutoff = self.stream_clock() - idle_s
        idle = [n for n, t in self.last_seen.items() if t <= cutoff]
        idle += [n for n in self.systems if n not in self.last_seen]
        for name in idle:
            plan = plans.pop(name, None)
            if plan is not None:                  # windows of it in this batch: still applied
                key = f"{name}\x00{len(self._retired)}"    # no valid name has a NUL
                plans[key] = plan
                self._retired[key] = self.systems[name]
            self.evict(name)
        if idle:
            log.warning("evicted %d systems idle for %g s of event time (limits.max_systems "
                        "= %d reached)", len(idle), idle_s, self.config.limits.max_systems)
            self._next_scan = accepted
        else:
            self._next_scan = accepted + max(len(self.systems) // 10, 1)

    def evict(self, name: str) -> None:
        """Drop system ``name``'s state (a window of it later starts it afresh)."""
        self.systems.pop(name, None)
        self.last_seen.pop(name, None)
        self.evicted += 1

    def _flag_estimates(self, estimates: Tagged) -> None:
        """Copy the flags of the batch's flagged windows (a utilization clamped into [0, 1])
        into their estimate records, as ``flags``; records of other windows have no
        ``flags``."""
        flagged, self.flagged = self.flagged, {}
        for index, record in estimates:
            flags = flagged.get(index)
            if flags:
                record.flags = list(flags)

    def _admit(self, records: Iterable[Raw], out: _Collected) -> dict[str, list[_Segment]]:
        """Pass 1: parse, route, reject; each system's windows cut into segments at its solve
        boundaries."""
        plans: dict[str, list[_Segment]] = {}
        systems: list[str | None] = []
        tolerance = self.config.utilization_tolerance
        limits = self.config.limits
        rules = self.config.plausibility
        last_seen = self.last_seen
        self.flagged = {}
        for index, raw in enumerate(records):
            self.records += 1
            try:
                w = parse_window(raw, tolerance)
            except InvalidWindow as err:
                self.rejected += 1
                systems.append(None)
                out.deadletter.append((index, dead_letter(raw, err)))
                continue
            systems.append(w.system)
            if w.system not in self.systems:
                rejection = self._room_for(w, plans)
                if rejection is not None:          # not kept: no state to persist either
                    systems[-1] = None
                    self.rejected += 1
                    out.deadletter.append((index, rejection))
                    continue
            state = self.system(w.system)
            rejection, tier, late, solve_at = state.admit(w, limits.max_tiers,
                                                          limits.max_classes, rules)
            if rejection is not None:
                self.rejected += 1
                out.deadletter.append((index, rejection))
                continue
            if tier is None:                      # a replay: applied before, skipped
                self.replays += 1
                continue
            if last_seen.get(w.system, -math.inf) < w.end:
                last_seen[w.system] = w.end
            plan = plans.get(w.system)
            if plan is None:
                plan = plans[w.system] = [_Segment()]
            if solve_at is not None:
                plan[-1].solve = (solve_at, index, state.solve_tiers)
                plan.append(_Segment())
            assert tier is not None
            plan[-1].windows.append((tier, w, late, index))
            if w.flags:
                clamped = tuple(f for f in w.flags if f != CORES_ASSUMED)
                if clamped:
                    self.flagged[index] = clamped
                    self.clamped += 1
            if self._sample_flags and self._sample_flags[index]:
                self.flagged[index] = self.flagged.get(index, ()) + self._sample_flags[index]
        self.batch_systems = systems
        self._sample_flags = []
        return plans

    def finish(self) -> Outputs:
        """End of a finite input: solve every system's open interval once more (at its next
        boundary) so the last windows of a recorded trace are not left unsolved."""
        out = Outputs()
        for state in self.systems.values():
            if state.next_solve is not None and any(t.interval.windows
                                                   for t in state.tiers.values()):
                solved = state.solve(state.next_solve)
                for p in solved.predictions:
                    p.final = True
                out.extend(solved)
        return out
