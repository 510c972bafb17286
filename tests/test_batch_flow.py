"""streams.kafka.batch_flow: the next batch's core overlaps this batch's waits for Kafka, and yet
outputs, changelog and acknowledgements keep the batches' order; a failure is raised, never
lost; the worker's table is shipped only when every batch before it is finished."""

from __future__ import annotations

import asyncio

import pytest

from streams.kafka.batch_flow import PHASES, BatchFlow, Steps
from waiting import until


class Log:
    """What happened, in order, as ``(what, batch)``."""

    def __init__(self) -> None:
        self.items: list[tuple[str, int]] = []

    def __call__(self, what: str, batch: int) -> None:
        self.items.append((what, batch))

    def index(self, what: str, batch: int) -> int:
        return self.items.index((what, batch))

    def before(self, a: tuple[str, int], b: tuple[str, int]) -> bool:
        return self.index(*a) < self.index(*b)


class Runner:
    """The core: batch ``n``'s result is ``n``; each run takes ``run_s``."""

    def __init__(self, log: Log, run_s: float = 0.01) -> None:
        self.log = log
        self.run_s = run_s
        self.needs_table = False
        self.runs = 0

    async def run(self, values, partitions, received):
        n = values[0]
        self.log("run", n)
        await asyncio.sleep(self.run_s)          # the core's work: the time the flow overlaps
        self.log("ran", n)
        self.runs += 1
        return n


def steps(log: Log, deliver_s: float = 0.03, persist_s: float = 0.01,
          fail: set[int] = frozenset(), done=None) -> Steps[int]:
    """Kafka's acknowledgements take ``deliver_s`` (outputs) and ``persist_s`` (changelog);
    the outputs of the batches in ``fail`` are refused."""

    async def ack_later(n: int) -> None:
        await asyncio.sleep(deliver_s)          # Kafka's acknowledgement takes this long
        if n in fail:
            raise RuntimeError(f"delivery of batch {n} failed")
        log("delivered", n)

    async def deliver(n: int):
        log("queued", n)
        return [asyncio.ensure_future(ack_later(n))]

    async def persist(n: int) -> None:
        log("persist", n)
        await asyncio.sleep(persist_s)          # the changelog's acknowledgement likewise
        log("persisted", n)

    async def ack(events) -> None:
        log("acked", events[0])

    return Steps(deliver, persist, ack, done)


def submit(flow: BatchFlow, n: int):
    return flow.submit([n], [n], [0], 0.0)


def run(coro):
    return asyncio.run(coro)


def test_each_batch_is_delivered_then_persisted_then_acknowledged_in_batch_order():
    log = Log()

    async def main():
        flow = BatchFlow(Runner(log), steps(log))
        for n in range(5):
            assert await submit(flow, n) == n
        await flow.drain()

    run(main())
    for n in range(5):
        assert log.before(("delivered", n), ("persist", n))
        assert log.before(("persisted", n), ("acked", n))
    for n in range(4):          # the next batch's outputs only after this one is finished
        assert log.before(("acked", n), ("queued", n + 1))
        assert log.before(("persisted", n), ("persist", n + 1))
    assert [n for what, n in log.items if what == "acked"] == list(range(5))


def test_the_next_batch_is_computed_while_this_one_waits_for_kafka():
    log = Log()

    async def main():
        flow = BatchFlow(Runner(log, run_s=0.01), steps(log, deliver_s=0.05))
        await submit(flow, 0)
        assert flow.busy                          # batch 0 waits for its acknowledgements
        await submit(flow, 1)
        await flow.drain()
        assert not flow.busy

    run(main())
    # batch 1 was in the core before batch 0 was delivered, let alone acknowledged
    assert log.before(("ran", 1), ("delivered", 0))
    assert log.before(("acked", 0), ("queued", 1))


def test_without_a_next_batch_the_waiting_one_finishes_on_its_own():
    log = Log()

    async def main():
        flow = BatchFlow(Runner(log), steps(log, deliver_s=0.01))
        await submit(flow, 0)
        # no drain: the batch is not held back
        await until(lambda: ("acked", 0) in log.items and not flow.busy,
                    "batch 0 acknowledged without a drain")

    run(main())


def test_the_table_is_shipped_only_after_the_waiting_batch_is_finished():
    """After a revocation the core restarts from the worker's table: the batch waiting for
    its acknowledgements must be in that table first."""
    log = Log()

    async def main():
        runner = Runner(log)
        flow = BatchFlow(runner, steps(log, deliver_s=0.05))
        await submit(flow, 0)
        runner.needs_table = True
        await submit(flow, 1)
        await flow.drain()

    run(main())
    assert log.before(("acked", 0), ("run", 1))


def test_a_failed_delivery_is_raised_by_the_next_submit_and_its_windows_stay_unacknowledged():
    log = Log()

    async def main():
        flow = BatchFlow(Runner(log), steps(log, fail={1}))
        await submit(flow, 0)
        await submit(flow, 1)
        with pytest.raises(RuntimeError, match="delivery of batch 1 failed"):
            await submit(flow, 2)
        await flow.drain()                         # the failure is raised once

    run(main())
    assert ("acked", 0) in log.items
    assert ("persist", 1) not in log.items and ("acked", 1) not in log.items
    assert ("queued", 2) not in log.items          # nothing of batch 2 left the worker


def test_a_failure_of_the_last_batch_is_raised_by_drain():
    log = Log()

    async def main():
        flow = BatchFlow(Runner(log), steps(log, fail={0}))
        await submit(flow, 0)
        with pytest.raises(RuntimeError, match="batch 0"):
            await flow.drain()

    run(main())
    assert ("acked", 0) not in log.items


def test_each_finished_batch_reports_its_phases():
    log = Log()
    reports: list[tuple[int, dict[str, float]]] = []

    async def main():
        flow = BatchFlow(Runner(log, run_s=0.02),
                         steps(log, deliver_s=0.03, persist_s=0.01,
                               done=lambda n, s: reports.append((n, s))))
        for n in range(3):
            await submit(flow, n)
        await flow.drain()

    run(main())
    assert [n for n, _ in reports] == [0, 1, 2]
    for _, seconds in reports:
        assert set(seconds) == set(PHASES)
        assert seconds["run"] >= 0.015 and seconds["deliver"] >= 0.02
        assert seconds["persist"] >= 0.005
    # batches 1 and 2 waited for the one before them only for what the core did not cover:
    # each one's core ran while the batch before was still being delivered (an order of
    # events, not a wall-clock bound: a 30-ms bound failed on a loaded CI machine)
    assert all(log.before(("run", n), ("delivered", n - 1)) for n in (1, 2))
    assert all(s["previous"] >= 0 for _, s in reports)
