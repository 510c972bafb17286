"""Waiting for a condition instead of sleeping: a test polls what it waits for, with a
deadline generous for a loaded 2-core machine, and fails naming what never came."""

from __future__ import annotations

import asyncio
import time
from typing import Callable

import pytest


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = 60.0,
               interval_s: float = 0.2, detail: Callable[[], str] | None = None) -> None:
    """Return once ``predicate()`` holds; fail after ``timeout_s`` naming ``what`` (and
    ``detail()``, e.g. a log's tail)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            more = f"\n{detail()}" if detail else ""
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}{more}")
        time.sleep(interval_s)


async def until(predicate: Callable[[], bool], what: str, timeout_s: float = 30.0,
                interval_s: float = 0.01) -> None:
    """:func:`wait_until` inside an event loop (the loop runs while it waits)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() >= deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(interval_s)
