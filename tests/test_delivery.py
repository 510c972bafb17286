"""streams.kafka.delivery: the consumer's ``wait_first`` fast path gives what ``mode``'s does, without
tasks when the callback does not block, and still lets the suspend-flow wait cancel a blocked
callback."""

from __future__ import annotations

import asyncio

import pytest
from mode import Service

from streams.kafka.delivery import Resumed, deliver_directly


class Consumer(Service):
    """A ``mode`` service standing in for Faust's consumer (the fast path uses ``wait_first``,
    the stopped/crashed events every service has, and the consumer's ``suspend_flow``)."""

    def __init__(self) -> None:
        super().__init__()
        self.suspend_flow = asyncio.Event()


def run(coro):
    return asyncio.run(coro)


async def _flag_wait(flag: asyncio.Event) -> None:
    await flag.wait()


def test_a_callback_that_does_not_block_runs_in_place_without_tasks():
    async def main():
        consumer = Consumer()
        assert deliver_directly(consumer)
        created = []
        loop = asyncio.get_running_loop()
        factory = loop.get_task_factory()
        loop.set_task_factory(lambda lp, c, **kw: created.append(c) or asyncio.Task(c, loop=lp))
        seen = []

        async def callback(x):
            seen.append(x)
            return x * 2

        res = await consumer.wait_first(callback(21), _flag_wait(asyncio.Event()))
        loop.set_task_factory(factory)
        return res, seen, created

    res, seen, created = run(main())
    assert seen == [21]
    assert res.results == [42] and not res.stopped and len(res.done) == 1
    assert created == []


def test_a_blocked_callback_finishes_through_the_original_path():
    async def main():
        consumer = Consumer()
        deliver_directly(consumer)
        gate = asyncio.get_running_loop().create_future()

        async def callback():
            value = await gate
            await asyncio.sleep(0)                  # a yield to the loop, not a wait
            return value + 1

        asyncio.get_running_loop().call_later(0.01, gate.set_result, 1)
        return await consumer.wait_first(callback(), _flag_wait(asyncio.Event()))

    res = run(main())
    assert res.results == [2] and not res.stopped


def test_the_suspend_flow_wait_cancels_a_blocked_callback():
    async def main():
        consumer = Consumer()
        deliver_directly(consumer)
        suspend = asyncio.Event()
        steps = []

        async def callback():
            steps.append("started")
            try:
                await asyncio.sleep(10)             # blocked until cancelled
            except asyncio.CancelledError:
                steps.append("cancelled")
                raise
            steps.append("finished")

        asyncio.get_running_loop().call_later(0.01, suspend.set)
        res = await consumer.wait_first(callback(), _flag_wait(suspend))
        await asyncio.sleep(0)                      # one loop turn: the cancellation lands
        return res, steps

    res, steps = run(main())
    assert steps == ["started", "cancelled"]
    assert res.results == [None] and len(res.done) == 1       # the suspend wait won


def test_an_error_raised_before_blocking_propagates_and_the_other_wait_is_closed():
    async def main():
        consumer = Consumer()
        deliver_directly(consumer)
        other = _flag_wait(asyncio.Event())

        async def callback():
            raise ValueError("bad record")

        with pytest.raises(ValueError, match="bad record"):
            await consumer.wait_first(callback(), other)
        return other.cr_frame                  # None once the coroutine was closed

    assert run(main()) is None


def test_other_calls_and_a_stopped_service_take_the_original_path():
    async def main():
        consumer = Consumer()
        deliver_directly(consumer)
        assert deliver_directly(consumer)                    # idempotent
        ran = []

        async def callback():
            ran.append(1)
            return 1

        one = await consumer.wait_first(callback(), _flag_wait(asyncio.Event()), timeout=1.0)
        await consumer.stop()                                 # sets the stopped event
        two = await consumer.wait_first(callback(), _flag_wait(asyncio.Event()))
        return one, two, ran

    one, two, ran = run(main())
    assert one.results == [1] and not one.stopped
    assert two.stopped and two.results == []                 # what mode returns when stopped


def test_while_the_flow_is_suspended_every_record_takes_modes_path():
    """During a rebalance (``suspend_flow`` set) the fast path stands aside: mode's tasks race
    the callback against the suspend wait, as without this module."""
    async def main():
        consumer = Consumer()
        deliver_directly(consumer)
        consumer.suspend_flow.set()
        created = []
        loop = asyncio.get_running_loop()
        loop.set_task_factory(lambda lp, c, **kw: created.append(c) or asyncio.Task(c, loop=lp))

        async def callback():
            return 1

        await consumer.wait_first(callback(), _flag_wait(consumer.suspend_flow))
        loop.set_task_factory(None)
        return created

    assert len(run(main())) >= 2


def test_resumed_passes_values_and_errors_on_like_yield_from():
    def inner():
        got = yield "first"
        try:
            yield f"got {got}"
        except KeyError:
            yield "caught"
        return "done"

    gen = inner()
    first = gen.send(None)
    outer = Resumed(gen, first).__await__()
    assert outer.send(None) == "first"
    assert outer.send("x") == "got x"
    assert outer.throw(KeyError("k")) == "caught"
    with pytest.raises(StopIteration) as stop:
        outer.send(None)
    assert stop.value.value == "done"


def test_a_consumer_without_the_expected_attributes_is_left_alone():
    class Bare:
        pass

    assert deliver_directly(Bare()) is False
    assert not hasattr(Bare(), "_perfcast_direct")
