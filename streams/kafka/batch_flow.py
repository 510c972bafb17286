"""The worker's order of work per batch, with the next batch's core overlapping this batch's
waits for Kafka.

Per batch ``n`` the worker must (``streams/kafka/worker.py``'s module docstring):

1. run the core on it (in the core process: the state moves on, outputs and a snapshot come
   back);
2. queue its outputs and wait until Kafka (and InfluxDB, for predictions and alerts) has them;
3. then queue its state snapshot to the table's changelog and wait until Kafka has it;
4. only then acknowledge its windows, so that a committed window is always in the changelog
   and a persisted state never holds a window whose outputs were not delivered.

Steps 2-4 are mostly waiting for the broker's acknowledgements (at 1,000 windows/s about a
third of a batch's time on this project's machines, ``docs/benchmarks.md``), during which the
core process would sit idle. :class:`BatchFlow` runs step 1 of batch ``n + 1`` while batch
``n`` is in steps 2-4, and keeps every ordering above:

* batch ``n + 1``'s outputs are queued only after batch ``n`` has finished step 4, so outputs,
  changelog records and acknowledgements keep the batches' order;
* at most one batch waits in steps 2-4 while the next one is in the core;
* before the core is given the worker's table again (after a start or a revocation,
  :attr:`CoreRunner.needs_table`), the waiting batch is finished, so the table it ships
  holds every batch the core has seen;
* a failure in a waiting batch is raised by the next :meth:`BatchFlow.submit` (or
  :meth:`BatchFlow.drain`); that batch's windows stay unacknowledged and are read again
  after a restart, exactly as when the failure happens in the batch itself.

No Faust here: the steps are passed in, so the order can be tested without a broker.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Protocol, TypeVar

__all__ = ["BatchFlow", "PHASES", "Runner", "Steps"]

Result = TypeVar("Result")

#: where a batch's time goes, in seconds (:attr:`Steps.done`): ``run`` the core step as the
#: worker waits for it; ``previous`` waiting for the batch before it to finish; ``queue``
#: queueing its outputs; ``deliver`` waiting for their acknowledgements; ``persist`` writing
#: the changelog and waiting for it; ``ack`` acknowledging the windows. The last three overlap
#: the next batch's ``run``.
PHASES = ("run", "previous", "queue", "deliver", "persist", "ack")


class Runner(Protocol[Result]):
    """Where step 1 runs (:class:`streams.kafka.core_process.CoreRunner`)."""

    @property
    def needs_table(self) -> bool: ...

    async def run(self, values: list[bytes], partitions: list[int],
                  received: float) -> Result: ...


@dataclass
class Steps(Generic[Result]):
    """Steps 2-4 of a batch. ``deliver`` queues the outputs and returns what to await for
    their delivery; ``persist`` writes the snapshot and returns once Kafka has it; ``ack``
    acknowledges the batch's events; ``done``, if given, is told each finished batch's
    seconds per phase (:data:`PHASES`)."""

    deliver: Callable[[Result], Awaitable[list[Awaitable[Any]]]]
    persist: Callable[[Result], Awaitable[None]]
    ack: Callable[[list[Any]], Awaitable[None]]
    done: Callable[[Result, dict[str, float]], None] | None = None


class BatchFlow(Generic[Result]):
    """Batches through the core and out, the next one's core overlapping this one's waits
    (module docstring)."""

    def __init__(self, runner: Runner[Result], steps: Steps[Result]) -> None:
        self.runner = runner
        self.steps = steps
        self.waiting: asyncio.Future[None] | None = None

    async def submit(self, events: list[Any], values: list[bytes], partitions: list[int],
                     received: float) -> Result:
        """Step 1 of a batch, then its outputs queued once the batch before it has finished;
        returns the core's result while the batch waits for its acknowledgements. Raises the
        failure of the batch before it, if that one failed."""
        if self.runner.needs_table:
            await self.drain()
        t0 = time.perf_counter()
        result = await self.runner.run(values, partitions, received)
        t1 = time.perf_counter()
        await self.drain()
        t2 = time.perf_counter()
        pending = await self.steps.deliver(result)
        seconds = {"run": t1 - t0, "previous": t2 - t1, "queue": time.perf_counter() - t2}
        self.waiting = asyncio.ensure_future(self._finish(pending, result, events, seconds))
        return result

    async def _finish(self, pending: list[Awaitable[Any]], result: Result, events: list[Any],
                      seconds: dict[str, float]) -> None:
        t0 = time.perf_counter()
        if pending:
            await asyncio.gather(*pending)
        t1 = time.perf_counter()
        await self.steps.persist(result)
        t2 = time.perf_counter()
        await self.steps.ack(events)
        if self.steps.done is not None:
            seconds.update(deliver=t1 - t0, persist=t2 - t1, ack=time.perf_counter() - t2)
            self.steps.done(result, seconds)

    async def drain(self) -> None:
        """Wait until the waiting batch (if any) has finished; raises its failure."""
        waiting, self.waiting = self.waiting, None
        if waiting is not None:
            await waiting

    @property
    def busy(self) -> bool:
        """A batch is still waiting for its acknowledgements."""
        return self.waiting is not None and not self.waiting.done()
