"""The source offsets a worker commits: those of the windows it has finished (outputs and
state in Kafka), every :data:`COMMIT_INTERVAL_S` and before a revocation returns.

The source topic is subscribed without Faust's acknowledgements (``acks=False``,
``streams/kafka/worker.py``), so Faust never commits it: its record of acknowledged offsets
goes wrong around the seeks of a rebalance (by its code, offsets it skipped are taken for
acknowledged "gaps", so it can commit past windows never processed; in one run of
``tests/test_scaleout_services.py`` its commit of a partition stuck for the rest of the
generation), and a commit past a window not processed loses it if the worker then dies. The
worker commits :class:`FinishedOffsets` instead: one past the newest window finished per
partition, windows taken in offset order without gaps (:mod:`streams.kafka.continuity`).

At a revocation the revoked partitions' finished offsets are committed before it returns
(``streams/kafka/worker.py``'s ``hand_over``), so their next owner starts exactly after the
windows whose state it recovers from the changelog.

Faust has no public call that commits given offsets; :func:`commit_finished` goes through
:func:`streams.kafka.faust_adapter.commit_offsets` (``Consumer._commit_offsets``, checked by
``tests/test_faust_adapter.py``).
"""

from __future__ import annotations

from typing import Any, Iterable

from streams.kafka.faust_adapter import commit_offsets, committed_offsets, read_offsets

__all__ = ["COMMIT_INTERVAL_S", "FinishedOffsets", "commit_finished", "offsets_report"]

#: seconds between the worker's commits of its finished offsets (Faust's default commit
#: interval): after a worker dies, its partitions' next owner reads at most this much again
COMMIT_INTERVAL_S = 2.8


class FinishedOffsets:
    """Per source partition (a Faust ``TP``), the offset to commit: one past the newest
    window acknowledged. A partition's windows are acknowledged in offset order (batches end
    in order, :mod:`streams.kafka.batch_flow`), so every window before it is finished too."""

    def __init__(self) -> None:
        self.next: dict[Any, int] = {}
        self.committed: dict[Any, int] = {}       # what :meth:`due` last handed out

    def due(self, partitions: Iterable[Any]) -> dict[Any, int]:
        """The offsets of ``partitions`` that moved since they were last due (for the
        worker's periodic commit; a partition stays until :meth:`take`)."""
        out = {tp: self.next[tp] for tp in partitions
               if tp in self.next and self.next[tp] != self.committed.get(tp)}
        self.committed.update(out)
        return out

    def add(self, events: Iterable[Any]) -> None:
        """A batch's events, acknowledged."""
        for event in events:
            message = event.message
            if message.offset >= self.next.get(message.tp, 0):
                self.next[message.tp] = message.offset + 1

    def take(self, partitions: Iterable[Any]) -> dict[Any, int]:
        """The offsets of ``partitions`` (and forget them: whoever owns a partition next
        starts from there)."""
        partitions = list(partitions)
        for tp in partitions:
            self.committed.pop(tp, None)
        return {tp: self.next.pop(tp) for tp in partitions if tp in self.next}


async def commit_finished(consumer: Any, offsets: dict[Any, int]) -> bool:
    """Commit ``offsets`` through Faust's consumer (module docstring); ``False`` if nothing
    was committed."""
    if not offsets:
        return False
    return await commit_offsets(consumer, offsets)


def offsets_report(consumer: Any, topic: str, finished: FinishedOffsets) -> str:
    """Per assigned partition of ``topic``: ``committed`` (Faust's record of the last commit),
    ``read`` (the last offset Faust handed to the agent; a fetched record below it is
    dropped), ``high`` (the high-water mark of the last fetch) and ``finished`` (one past the
    newest window the worker finished). Logged at every revocation and, with
    ``PERFCAST_DEBUG_OFFSETS``, every 2 s: the evidence when a rebalance loses or repeats
    windows."""
    committed, read = committed_offsets(consumer), read_offsets(consumer)
    parts = []
    for tp in sorted((tp for tp in consumer.assignment() if tp.topic == topic),
                     key=lambda tp: tp.partition):
        parts.append(f"p{tp.partition}: committed {committed.get(tp)} read {read.get(tp)} "
                     f"high {consumer.highwater(tp)} finished {finished.next.get(tp)}")
    return "; ".join(parts) or "no partition"
