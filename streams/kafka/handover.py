"""Handing partitions over at a rebalance: the offsets of the windows a worker has finished,
committed before its revocation returns.

Faust's consumer forgets, as a revocation begins, which offsets of the revoked partitions were
acknowledged since its last periodic commit (every ``broker_commit_interval``, 2.8 s); only
what is acknowledged after that moment could still be committed. A partition whose last batch
had finished before the revocation would then be handed over at its last periodic commit, and
its next owner would read those seconds of windows again (duplicate dead letters; measured
in ``tests/test_scaleout_services.py``). :class:`FinishedOffsets` keeps, per source partition,
one past the newest acknowledged window, and :func:`commit_finished` commits them at the
revocation (``streams/kafka/worker.py``'s ``hand_over``).

Faust has no public call that commits given offsets; :func:`commit_finished` goes through
:func:`streams.kafka.faust_adapter.commit_offsets` (``Consumer._commit_offsets``, checked by
``tests/test_faust_adapter.py``).
"""

from __future__ import annotations

from typing import Any, Iterable

from streams.kafka.faust_adapter import (commit_offsets, committed_offsets, pending_acks,
                                         read_offsets)

__all__ = ["FinishedOffsets", "commit_finished", "offsets_report"]


class FinishedOffsets:
    """Per source partition (a Faust ``TP``), the offset to commit: one past the newest
    window acknowledged. A partition's windows are acknowledged in offset order (batches end
    in order, :mod:`streams.kafka.batch_flow`), so every window before it is finished too."""

    def __init__(self) -> None:
        self.next: dict[Any, int] = {}

    def add(self, events: Iterable[Any]) -> None:
        """A batch's events, acknowledged."""
        for event in events:
            message = event.message
            if message.offset >= self.next.get(message.tp, 0):
                self.next[message.tp] = message.offset + 1

    def take(self, partitions: Iterable[Any]) -> dict[Any, int]:
        """The offsets of ``partitions`` (and forget them: whoever owns a partition next
        starts from there)."""
        return {tp: self.next.pop(tp) for tp in partitions if tp in self.next}


async def commit_finished(consumer: Any, offsets: dict[Any, int]) -> bool:
    """Commit ``offsets`` through Faust's consumer (module docstring); ``False`` if nothing
    was committed."""
    if not offsets:
        return False
    return await commit_offsets(consumer, offsets)


def offsets_report(consumer: Any, topic: str) -> str:
    """Per assigned partition of ``topic``, as Faust's consumer sees it: ``committed`` (its
    record of the last commit), ``read`` (the last offset it handed to the agent; records
    below it are dropped when fetched again), ``high`` (the high-water mark of its last
    fetch) and ``acked`` (acknowledged, not yet committed: count and lowest). The worker logs
    it at every assignment and revocation: the evidence when a rebalance loses or repeats
    windows."""
    committed, read, acked = committed_offsets(consumer), read_offsets(consumer), \
        pending_acks(consumer)
    parts = []
    for tp in sorted((tp for tp in consumer.assignment() if tp.topic == topic),
                     key=lambda tp: tp.partition):
        pending = acked.get(tp) or []
        parts.append(f"p{tp.partition}: committed {committed.get(tp)} read {read.get(tp)} "
                     f"high {consumer.highwater(tp)} acked {len(pending)}"
                     + (f" from {min(pending)}" if pending else ""))
    return "; ".join(parts) or "no partition"
