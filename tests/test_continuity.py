"""The offset guard (``streams/kafka/continuity.py``): each partition's windows taken once and
in order from the committed offset; repeats skipped, a gap skipped until it is filled.
Events are plain objects with the two attributes the guard reads (no broker is needed for
these rules; the worker's use of it is exercised by tests/test_scaleout_services.py)."""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace

from streams.kafka.continuity import RESEEK_S, SEEKS, STALL_S, OffsetGuard

TP = namedtuple("TP", "topic partition")          # as Faust's
p0, p1, p3 = TP("w", 0), TP("w", 1), TP("w", 3)
T0 = 1000.0                                       # a monotonic clock reading


def _events(*pairs: tuple[TP, int]) -> list[SimpleNamespace]:
    return [SimpleNamespace(message=SimpleNamespace(tp=tp, offset=o)) for tp, o in pairs]


def _offsets(events: list[SimpleNamespace]) -> list[tuple[TP, int]]:
    return [(e.message.tp, e.message.offset) for e in events]


def test_contiguous_windows_from_the_committed_offset_pass():
    guard = OffsetGuard()
    guard.start(1, {p0: 10, p1: None})
    batch = _events((p0, 10), (p1, 7), (p0, 11), (p1, 8))
    checked = guard.check(batch, T0)
    assert _offsets(checked.events) == _offsets(batch) and not checked.skipped
    assert guard.next == {p0: 12, p1: 9}
    assert _offsets(guard.check(_events((p0, 12)), T0).events) == [(p0, 12)]


def test_windows_taken_already_are_skipped():
    """Records fetched before a rebalance's seek and again after it: the second copies are
    skipped, the partition goes on after them."""
    guard = OffsetGuard()
    guard.start(2, {p0: 100})
    guard.check(_events((p0, 100), (p0, 101), (p0, 102)), T0)
    checked = guard.check(_events((p0, 101), (p0, 102), (p0, 103), (p1, 5)), T0)
    assert _offsets(checked.events) == [(p0, 103), (p1, 5)]
    assert checked.repeated == {p0: [101, 102]} and checked.skipped == 2
    assert checked.summary() == "0: 2 already taken (101-102)"


def test_a_gap_skips_the_partition_until_it_is_filled():
    """Records never delivered (dropped below a read offset set too far): nothing after the
    gap is taken; the partition must be read again from the first missing offset, and once
    it is, it goes on."""
    guard = OffsetGuard()
    guard.start(3, {p0: 50, p1: 0})
    checked = guard.check(_events((p0, 50), (p0, 53), (p1, 0), (p0, 54)), T0)
    assert _offsets(checked.events) == [(p0, 50), (p1, 0)]
    assert checked.gaps == {p0: 51} and checked.skipped == 2
    assert "windows from 51 never arrived" in checked.summary()
    again = guard.check(_events((p0, 51), (p0, 52), (p0, 53)), T0)
    assert _offsets(again.events) == [(p0, 51), (p0, 52), (p0, 53)]
    assert not again.skipped


def test_a_new_generation_starts_over_at_its_committed_offsets():
    guard = OffsetGuard()
    guard.start(1, {p0: 0})
    guard.check(_events((p0, 0), (p0, 1), (p0, 2)), T0)
    guard.start(2, {p0: 2, p3: 40})             # the hand-over committed 2; p3 is new
    assert guard.generation == 2 and guard.next == {p0: 2, p3: 40}
    checked = guard.check(_events((p0, 2), (p3, 41)), T0)
    assert _offsets(checked.events) == [(p0, 2)] and checked.gaps == {p3: 40}


def test_windows_fetched_before_the_seek_back_are_skipped_without_another_seek():
    """After the seek back, records fetched before it still come first (in run 21 of the
    scale-out test they were taken for a gap without records, and 1,183 windows were lost):
    they are skipped, no second seek, and the windows read again are taken."""
    guard = OffsetGuard()
    guard.start(5, {p0: 100})
    assert guard.check(_events((p0, 100), (p0, 140)), T0).gaps == {p0: 101}
    stale = guard.check(_events((p0, 141), (p0, 142)), T0 + 1.0)
    assert not stale.events and not stale.gaps and stale.waiting == {p0: 2}
    assert "2 fetched before the seek back skipped" in stale.summary()
    again = guard.check(_events(*[(p0, o) for o in range(101, 143)]), T0 + 1.5)
    assert [o for _, o in _offsets(again.events)] == list(range(101, 143))


def test_offsets_without_records_are_jumped_after_every_seek_back():
    """Offsets that hold no record (a transaction marker): the partition is sought back
    every RESEEK_S, SEEKS times; then the window is taken and the jump reported."""
    guard = OffsetGuard()
    guard.start(4, {p0: 7})
    now = T0
    for seek in range(SEEKS):
        assert guard.check(_events((p0, 9)), now).gaps == {p0: 7}, seek
        assert not guard.check(_events((p0, 9)), now + RESEEK_S / 2).gaps   # waiting
        now += RESEEK_S
    checked = guard.check(_events((p0, 9), (p0, 10)), now)
    assert _offsets(checked.events) == [(p0, 9), (p0, 10)] and checked.jumps == {p0: (7, 9)}
    assert f"no record at offsets 7-8 after {SEEKS} seeks back" in checked.summary()
    assert guard.check(_events((p0, 12)), now).gaps == {p0: 11}   # a new gap: sought back


def test_a_partition_whose_windows_never_reach_the_agent_is_sought_back():
    """A restarted worker with nothing committed: Faust cleared the fetched backlog at the
    rebalance and does not seek (no committed offset), so Kafka holds offsets 0-121 but
    none reaches the agent and no later window arrives to show the gap. After STALL_S
    without progress the partition is sought back to 0, and again after another STALL_S."""
    guard = OffsetGuard()
    guard.start(2, {p0: 0, p1: 0})
    high = {p0: 0, p1: 122}                       # p0 is empty
    assert guard.stalled(high, T0) == {}
    assert guard.stalled(high, T0 + STALL_S / 2) == {}
    assert guard.stalled(high, T0 + STALL_S) == {p1: 0}
    assert guard.stalled(high, T0 + 1.5 * STALL_S) == {}
    assert guard.stalled(high, T0 + 2 * STALL_S) == {p1: 0}


def test_a_partition_taking_windows_or_caught_up_is_not_sought_back():
    """Progress resets the clock; a partition whose next offset is the high-water mark (or
    whose high-water mark is not known yet) is never sought; a new generation starts over."""
    guard = OffsetGuard()
    guard.start(3, {p0: 10})
    assert guard.stalled({p0: 50}, T0) == {}
    guard.check(_events((p0, 10), (p0, 11)), T0 + 0.9 * STALL_S)
    assert guard.stalled({p0: 50}, T0 + STALL_S) == {}          # moved to 12: clock reset
    assert guard.stalled({p0: 50}, T0 + 1.8 * STALL_S) == {}
    assert guard.stalled({p0: 50}, T0 + 2 * STALL_S) == {p0: 12}
    guard.check(_events(*[(p0, o) for o in range(12, 50)]), T0 + 2 * STALL_S)
    assert guard.stalled({p0: 50}, T0 + 10 * STALL_S) == {}     # caught up
    assert guard.stalled({p0: None}, T0 + 20 * STALL_S) == {}   # not fetched yet
    guard.start(4, {p0: 50})
    assert guard.stalled({p0: 60}, T0 + 21 * STALL_S) == {}     # the clock starts again
