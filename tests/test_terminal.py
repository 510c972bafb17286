"""Terminal output escapes control characters (:mod:`streams.core.terminal`)."""

from __future__ import annotations

import io
import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.markup import escape
from rich.table import Table

from streams.core.terminal import SafeConsole, printable

#: what must never reach a terminal raw: C0 (but the console's own line break), C1, DEL, and
#: the bidirectional controls
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def unsafe(text: str) -> list[str]:
    return [c for c in text if (unicodedata.category(c) == "Cc" and c != "\n") or c in _BIDI
            or c in "\u2028\u2029"]


def test_controls_are_escaped_as_python_does():
    assert printable("a\x1b[31mb") == "a\\x1b[31mb"
    assert printable("\x9b2J") == "\\x9b2J"
    assert printable("abc\u202edef") == "abc\\u202edef"
    assert printable("one\ntwo") == "one\\ntwo"
    assert printable("one\ntwo", newlines=True) == "one\ntwo"
    assert printable("caf\u00e9 \u6771\u4eac") == "caf\u00e9 \u6771\u4eac"   # printable kept


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text())
def test_nothing_unsafe_is_left(text):
    out = printable(text)
    assert not unsafe(out) and "\n" not in out
    assert printable(out) == out                  # escaping twice changes nothing more


def test_the_console_escapes_messages_and_table_cells_but_keeps_its_own_styles():
    buffer = io.StringIO()
    console = SafeConsole(file=buffer, force_terminal=True, width=100)
    name = "tier d\x1b]0;pwned\x07b"
    console.print(f"[red]error:[/red] {escape(name)}")
    table = Table(title="sys\x1b[2J")
    table.add_column("class\u202e")
    table.add_row("h\x1b[31mome")
    console.print(table)
    # the only ESC left are the console's own colour codes (ESC [ digits ; m)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())
    assert "\x1b" not in plain and not unsafe(plain)
    assert "\\x1b]0;pwned\\x07" in plain and "\\x1b[2J" in plain and "h\\x1b[31mome" in plain
    assert "class\\u202e" in plain


def test_log_lines_are_escaped_and_keep_their_line_breaks():
    import logging

    from streams.core.terminal import SafeFormatter

    record = logging.LogRecord("perfcast.prometheus", logging.WARNING, __file__, 1,
                               "%s: windows up to %s", ("sh\u202eop", "now\x1b[2J"), None)
    line = SafeFormatter("%(levelname)s %(message)s").format(record)
    assert line == "WARNING sh\\u202eop: windows up to now\\x1b[2J"
    record.msg, record.args = "first\nsecond", ()
    assert SafeFormatter("%(message)s").format(record) == "first\nsecond"
