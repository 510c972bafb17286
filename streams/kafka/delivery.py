"""Delivering each fetched record to the agent without four asyncio tasks per record.

Faust's consumer loop (``faust.transport.consumer.Consumer._drain_messages``) hands every
record to the conductor through ``await self.wait_first(callback(message),
self.suspend_flow.wait())``: ``mode``'s ``Service.wait_first`` wraps the callback, the
suspend-flow wait and the service's stopped and crashed events in four tasks and races them
with ``asyncio.wait``, so that a rebalance can cancel a callback blocked on a full stream
buffer. Almost every callback completes without blocking, and the four tasks cost ~48 us per
record on this project's machines -- more than a sixth of the worker's time per window
(``docs/benchmarks.md``).

:func:`deliver_directly` gives the consumer a ``wait_first`` with a fast path for that call:
it steps the callback once, in place; if the callback finishes in that step (it did not block)
its result is returned as ``mode`` would have returned it, and no task is made. If it blocks,
the rest of the callback -- still suspended on the future it waits for -- goes through the
original ``wait_first``, racing the suspend-flow wait exactly as before. Every other call
(other arguments, a timeout, a stopped or crashed service, the flow suspended for a
rebalance) takes the original path. The ``mode`` internals it touches are reached through
:mod:`streams.kafka.faust_adapter`.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Awaitable, Callable, Generator

from streams.kafka.faust_adapter import (has_replaced_wait_first, replace_wait_first, stop_events,
                                   wait_results)

__all__ = ["Resumed", "deliver_directly"]

log = logging.getLogger("perfcast.worker")


class Resumed:
    """An awaitable that continues a coroutine which has already run its first step and is
    suspended on ``pending`` (what it yielded), delegating like ``yield from``: values sent
    or exceptions thrown in (a cancellation) go on to the coroutine."""

    __slots__ = ("coro", "pending")

    def __init__(self, coro: Any, pending: Any) -> None:
        self.coro = coro
        self.pending = pending

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self.coro, self.pending
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:          # noqa: BLE001 -- passed on, as yield from does
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


def _close(aw: Any) -> None:
    if inspect.iscoroutine(aw):
        aw.close()


def deliver_directly(consumer: Any) -> bool:
    """Install the fast path on ``consumer`` (a started Faust consumer; see the module
    docstring). Idempotent; returns ``False`` (and logs) where this Faust or mode version
    lacks what it relies on, leaving the consumer as it was."""
    if has_replaced_wait_first(consumer):
        return True
    try:
        original: Callable[..., Awaitable[Any]] = consumer.wait_first
        stopped, crashed = stop_events(consumer)
        suspended = consumer.suspend_flow
    except AttributeError as err:
        log.warning("cannot deliver records without tasks (%s): the worker runs slower", err)
        return False

    async def wait_first(*coros: Any, timeout: Any = None) -> Any:
        if (timeout is not None or len(coros) != 2 or not inspect.iscoroutine(coros[0])
                or stopped.is_set() or crashed.is_set() or suspended.is_set()):
            return await original(*coros, timeout=timeout)
        callback, other = coros
        try:
            pending = callback.send(None)
        except StopIteration as stop:                 # done without blocking
            _close(other)
            return wait_results([callback], [stop.value])
        except BaseException:
            _close(other)
            raise
        return await original(Resumed(callback, pending), other)

    replace_wait_first(consumer, wait_first)
    return True
