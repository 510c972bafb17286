"""Each source partition's windows taken exactly once and in offset order, from the offset
committed when the partition was assigned.

The worker's exactly-once counting rests on two facts: the changelog covers every committed
window (``streams/kafka/batch_flow.py``) and the agent takes a partition's windows one after
the other from its committed offset, none skipped and none twice. Faust does not promise the
second across rebalances: at the end of a rebalance it resumes the source partitions before
it seeks them to their committed offsets, and clears the streams' buffers after the seek.
Records fetched in between are handed over and then cleared, and its "read offset" for the
partition -- below which it drops a fetched record -- can be left past them, so they are
dropped when fetched again: the first windows of each partition never reach the agent (87
in one run of ``tests/test_scaleout_services.py``, 751 in an earlier one). Records fetched in
between can also reach the agent and come again after the seek: windows taken twice
(``docs/pipeline.md``, "Delivery guarantees"). Either way nothing fails and nothing is logged.

:class:`OffsetGuard` checks every batch against, per partition, the next offset it must hold
(the committed offset at the start of the generation, then one past the last window taken):

* a window below it was taken already: skipped (``repeated``);
* a window above it means windows in between never arrived: that window and every later one
  of the partition are skipped until the missing offset arrives; the worker seeks the
  partition back there once (``gaps``, ``streams/kafka/worker.py``), so Kafka delivers them
  again. Windows fetched before that seek may still come first: they are skipped too
  (``waiting``), without another seek. Should the missing offset not come within
  :data:`RESEEK_S`, the partition is sought back again, up to :data:`SEEKS` times; after that
  the offsets in between are taken to hold no record (a transaction marker, a compacted
  topic -- neither in perfcast's own topics): the window is taken and the jump reported
  (``jumps``).

The gap is seen only when a later window arrives. When none does -- the records Faust
dropped were the partition's last ones, or, with nothing committed yet, it has no committed
offset to seek the partition back to and only clears the buffers, so the partition's fetch
position stays past records that never reached the agent (3 of about 30 runs under load of
``tests/test_formats_services.py::test_a_killed_worker_loses_at_most_the_open_window``: the
restarted worker's whole backlog) -- :meth:`OffsetGuard.stalled` finds the
partition: its next window is below the high-water mark of its last fetch, yet the idle agent
has taken none for :data:`STALL_S`; the worker seeks it back there
(``tests/test_pipeline_services.py::test_windows_fetched_but_never_delivered_are_read_again``
makes the loss certain).

No Faust here: events need only ``.message.tp`` and ``.message.offset``, so the rules are
tested without a broker (``tests/test_continuity.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping

__all__ = ["Checked", "OffsetGuard", "RESEEK_S", "SEEKS", "STALL_S"]

#: seconds a partition sought back to a gap waits for the missing offset before it is sought
#: back again
RESEEK_S = 5.0
#: seeks back to one gap before its offsets are taken to hold no record
SEEKS = 3
#: seconds a partition may hold windows in Kafka past the next one to take, with none taken,
#: before it is sought back there (:meth:`OffsetGuard.stalled`)
STALL_S = 10.0


@dataclass
class Checked:
    """A batch through :meth:`OffsetGuard.check`: ``events`` to process, in order;
    ``repeated`` per partition the offsets skipped as already taken; ``gaps`` per partition
    the offset the partition must be read again from (windows after a gap skipped)."""

    events: list[Any] = field(default_factory=list)
    repeated: dict[Hashable, list[int]] = field(default_factory=dict)
    gaps: dict[Hashable, int] = field(default_factory=dict)
    jumps: dict[Hashable, tuple[int, int]] = field(default_factory=dict)
    waiting: dict[Hashable, int] = field(default_factory=dict)
    skipped: int = 0

    def summary(self) -> str:
        """One line for the log: per partition what was skipped and why."""
        parts = [f"{getattr(tp, 'partition', tp)}: {len(o)} already taken "
                 f"({min(o)}-{max(o)})" for tp, o in self.repeated.items()]
        parts += [f"{getattr(tp, 'partition', tp)}: windows from {o} never arrived (read "
                  f"again from there)" for tp, o in self.gaps.items()]
        parts += [f"{getattr(tp, 'partition', tp)}: {n} fetched before the seek back skipped"
                  for tp, n in self.waiting.items()]
        parts += [f"{getattr(tp, 'partition', tp)}: no record at offsets {a}-{b - 1} after "
                  f"{SEEKS} seeks back (taken from {b})" for tp, (a, b) in self.jumps.items()]
        return "; ".join(parts)


class OffsetGuard:
    """Per source partition, the next offset the agent must take (module docstring)."""

    def __init__(self) -> None:
        self.generation: Any = None
        self.next: dict[Hashable, int] = {}
        #: partitions sought back to a gap: (offset sought, when, seeks so far)
        self.sought: dict[Hashable, tuple[int, float, int]] = {}
        #: partitions with windows in Kafka past their next offset: (that offset, since when)
        self.behind: dict[Hashable, tuple[int, float]] = {}

    def start(self, generation: Any, committed: Mapping[Hashable, int | None]) -> None:
        """A new generation (after a rebalance): each partition starts at its committed
        offset; a partition without one (never committed) starts at its first window."""
        self.generation = generation
        self.next = {tp: o for tp, o in committed.items() if o is not None}
        self.sought = {}
        self.behind = {}

    def check(self, events: list[Any], now: float) -> Checked:
        """The events of a batch that continue their partitions (module docstring); ``now``
        in seconds (monotonic), to time the seeks back."""
        out = Checked()
        nxt = self.next
        for event in events:
            message = event.message
            tp, offset = message.tp, message.offset
            want = nxt.get(tp)
            if want is not None and offset > want and not self._gap(tp, want, offset, now, out):
                out.skipped += 1
                continue
            if want is None or offset >= want:
                nxt[tp] = offset + 1
                self.sought.pop(tp, None)
                out.events.append(event)
            else:
                out.repeated.setdefault(tp, []).append(offset)
                out.skipped += 1
        return out

    def _gap(self, tp: Hashable, want: int, offset: int, now: float, out: Checked) -> bool:
        """A window at ``offset`` while ``want`` is missing: ``True`` to take it anyway (the
        gap holds no record), else it is skipped and ``out`` says whether to seek back."""
        if tp in out.gaps:
            return False
        sought = self.sought.get(tp)
        if sought is None or sought[0] != want or now - sought[1] >= RESEEK_S:
            seeks = 1 if sought is None or sought[0] != want else sought[2] + 1
            if seeks > SEEKS:
                out.jumps[tp] = (want, offset)
                return True
            self.sought[tp] = (want, now, seeks)
            out.gaps[tp] = want
            return False
        out.waiting[tp] = out.waiting.get(tp, 0) + 1
        return False

    def stalled(self, highwater: Mapping[Hashable, int | None], now: float) -> dict[Hashable, int]:
        """The partitions to seek back, each to its next offset: Kafka holds windows from there
        (``highwater``, one past the newest offset of the partition's last fetch, is above
        it) but none has been taken for :data:`STALL_S` (the next offset has not moved).
        Called while the agent is idle, so windows fetched but not yet taken are not
        mistaken for lost ones; a partition sought back is sought again after another
        :data:`STALL_S` without progress."""
        seek: dict[Hashable, int] = {}
        for tp, want in self.next.items():
            high = highwater.get(tp)
            if high is None or high <= want:
                self.behind.pop(tp, None)
                continue
            since = self.behind.get(tp)
            if since is None or since[0] != want:
                self.behind[tp] = (want, now)
            elif now - since[1] >= STALL_S:
                seek[tp] = want
                self.behind[tp] = (want, now)
        return seek
