"""Chart axes: round tick values, decades on a log axis, ticks on whole UTC minutes, hours or
days -- a few ticks over any span (two windows a lifetime apart still get about eight)."""

from __future__ import annotations

import math
from typing import Sequence

from streams.sinks.report.text import utc

__all__ = ["nice_ticks", "tick_label", "log_ticks", "log_label", "time_ticks"]


def _nice_step(span: float, count: int) -> float:
    raw = span / max(count, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag * (1 + 1e-9))


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[lo, hi]`` (the first and last enclose it)."""
    if not hi > lo:
        lo, hi = (lo - 1, hi + 1) if lo == 0 else (lo - abs(lo) * 0.1, hi + abs(hi) * 0.1)
    step = _nice_step(hi - lo, count)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def tick_label(value: float, ticks: Sequence[float]) -> str:
    """``value`` with as many decimals as the tick step needs (``0.25`` -> 2)."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(value) or 1.0
    decimals = next((d for d in range(10)
                     if abs(step * 10 ** d - round(step * 10 ** d)) < 1e-6 * 10 ** d), 10)
    return "0" if value == 0 else f"{value:,.{decimals}f}"


def log_ticks(lo: float, hi: float) -> list[float]:
    """Decades covering ``[lo, hi]`` (``lo > 0``)."""
    a, b = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    b = max(b, a + 1)
    return [10.0 ** k for k in range(a, b + 1)]


def log_label(value: float) -> str:
    return f"{value:g}" if 1e-3 <= value < 1e6 else f"1e{round(math.log10(value))}"


#: time-axis steps, seconds
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400, 172800, 604800, 2_592_000, 7_776_000, 31_536_000)


def time_ticks(t0: float, t1: float, count: int = 8) -> tuple[list[float], str]:
    """Tick times on whole UTC minutes/hours/days and their ``strftime`` format."""
    span = max(t1 - t0, 1.0)
    step = next((s for s in _TIME_STEPS if span / s <= count), None)
    if step is None:            # years and beyond: a nice number of 365-day years
        step = _nice_step(span / _TIME_STEPS[-1], count) * _TIME_STEPS[-1]
        while span / step > count:
            step *= 2
    first = math.ceil(t0 / step) * step
    ticks = [first + i * step for i in range(int((t1 - first) // step) + 1)]
    if step >= 2_592_000:
        fmt = "%Y-%m-%d"
    elif step >= 86400:
        fmt = "%m-%d"
    elif utc(t0, "%Y%m%d") != utc(t1, "%Y%m%d"):
        fmt = "%m-%d %H:%M"
    else:
        fmt = "%H:%M:%S" if step < 60 else "%H:%M"
    return ticks, fmt
