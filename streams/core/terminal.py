"""Text shown on a terminal: every control character escaped.

A name or a message read from the input (a class, tier or system name, a store's model row, a
Prometheus answer) may hold an ESC, another C0 or C1 control or a bidirectional override. Written
raw, ESC starts a terminal control sequence (colour, cursor moves, a window title, a hyperlink)
and a bidirectional override reorders what the reader sees (Boucher and Anderson (2021), "Trojan
Source"). :func:`printable` escapes each such character as Python does (``\\x1b``,
``\\u202e``); :class:`SafeConsole` applies it to every string a ``rich`` console renders, so a
command needs no care beyond printing through it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from rich.console import Console

__all__ = ["printable", "SafeConsole", "SafeFormatter"]

#: C0 (except the line break the console lays out itself), DEL, C1, the bidirectional
#: embeddings, overrides, isolates and marks, and the line and paragraph separators
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: Any, newlines: bool = False) -> str:
    """``text`` (``str()`` of it) with every control character escaped (module docstring);
    line breaks too unless ``newlines`` (the console's own multi-line output)."""
    text = str(text)
    out = _UNSAFE.sub(_escape, text)
    return out if newlines else out.replace("\n", "\\n")


class SafeConsole(Console):
    """A ``rich`` console that escapes the control characters of every string it renders
    (messages, table cells, titles, captions; its own styling is applied after)."""

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Any:
        return super().render_str(printable(text, newlines=True), *args, **kwargs)


class SafeFormatter(logging.Formatter):
    """A log formatter whose lines have their control characters escaped (a log on a
    terminal is terminal output; its own line breaks, as in a traceback, are kept)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), newlines=True)
