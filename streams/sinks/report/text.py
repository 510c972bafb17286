"""Numbers and times as the page writes them: escaped HTML, UTC times, short durations."""

from __future__ import annotations

import datetime as _dt
import html
from typing import Any

__all__ = ["esc", "utc", "duration", "num", "time_to_breach"]


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def utc(t: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime(fmt)


def duration(seconds: float) -> str:
    """``7 min``, ``1 h 05 min``, ``45 s``."""
    s = abs(seconds)
    if s < 90:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        h, m = divmod(round(s / 60), 60)
        return f"{h} h {m:02d} min"
    return f"{s / 86400:.1f} d"


def num(value: Any, spec: str = ".3g", none: str = "–") -> str:
    if value is None:
        return none
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e6 and spec == ".3g":
        return str(int(value))
    return format(value, spec)


def time_to_breach(ttb: float | None) -> str:
    if ttb is None:
        return "no breach ahead"
    return "now" if ttb == 0 else f"in {duration(ttb)}"
