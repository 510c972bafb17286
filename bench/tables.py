"""Tables the accuracy scripts print: markdown (``--markdown``, pasted into docs/accuracy.md) or
aligned plain text."""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["Table"]


class Table:
    """A small table printed as markdown or aligned plain text."""

    def __init__(self, title: str, header: Sequence[str]) -> None:
        self.title, self.header, self.rows = title, list(header), []

    def add(self, *cells: Any) -> None:
        self.rows.append([str(c) for c in cells])

    def render(self, markdown: bool) -> str:
        if markdown:
            lines = [f"**{self.title}**", "", "| " + " | ".join(self.header) + " |",
                     "|" + "|".join("---:" if i else "---" for i in range(len(self.header)))
                     + "|"]
            lines += ["| " + " | ".join(r) + " |" for r in self.rows]
            return "\n".join(lines) + "\n"
        widths = [max(len(x) for x in col) for col in zip(self.header, *self.rows)]
        fmt = "  ".join(f"{{:>{w}}}" for w in widths)
        lines = [self.title, fmt.format(*self.header)] + [fmt.format(*r) for r in self.rows]
        return "\n".join(lines) + "\n"
