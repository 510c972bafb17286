"""The pipeline core both shells drive: raw window records in, output records out.

``Pipeline.process(raw)`` parses one record (bytes, text or mapping), routes it to its system's
:class:`~streams.system.SystemState` and returns the :class:`~streams.system.Outputs` it
produced. Invalid records become dead letters with the field, the value and the reason; the
pipeline never raises on input. No I/O, no asyncio: the embedded runner calls it in a loop,
the Faust worker from its agent.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from streams.config import Config
from streams.records import InvalidWindow, parse_window
from streams.system import Outputs, SystemState

__all__ = ["Pipeline", "dead_letter"]

#: longest raw record kept in a dead letter
RAW_LIMIT = 4096


def dead_letter(raw: Any, err: InvalidWindow) -> dict[str, Any]:
    """The dead-letter record of an invalid input."""
    if isinstance(raw, (bytes, bytearray)):
        text = bytes(raw[:RAW_LIMIT]).decode("utf-8", "replace")
    elif isinstance(raw, str):
        text = raw[:RAW_LIMIT]
    else:
        text = repr(raw)[:RAW_LIMIT]
    value = err.value if isinstance(err.value, (str, int, float, bool, type(None))) \
        else repr(err.value)
    if isinstance(value, float) and value != value:      # NaN is not JSON
        value = "NaN"
    elif isinstance(value, float) and value in (float("inf"), float("-inf")):
        value = repr(value)
    return {"reason": str(err), "field": err.field, "value": value, "raw": text}


class Pipeline:
    """All systems' state and the per-record step."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.systems: dict[str, SystemState] = {}
        self.records = 0
        self.rejected = 0
        self.last_system: str | None = None    # system of the last valid record

    def system(self, name: str) -> SystemState:
        state = self.systems.get(name)
        if state is None:
            state = self.systems[name] = SystemState(name, self.config.system(name))
        return state

    def process(self, raw: bytes | str | Mapping[str, Any]) -> Outputs:
        """One input record."""
        self.records += 1
        self.last_system = None
        try:
            window = parse_window(raw)
        except InvalidWindow as err:
            self.rejected += 1
            return Outputs(deadletter=[dead_letter(raw, err)])
        self.last_system = window.system
        out = self.system(window.system).step(window)
        self.rejected += len(out.deadletter)
        return out

    def process_many(self, records: Iterable[bytes | str | Mapping[str, Any]]) -> Outputs:
        out = Outputs()
        for raw in records:
            out.extend(self.process(raw))
        return out

    def finish(self) -> Outputs:
        """End of a finite input: solve every system's open interval once more (at its next
        boundary) so the last windows of a recorded trace are not left unsolved."""
        out = Outputs()
        for state in self.systems.values():
            if state.next_solve is not None and any(t.interval.windows
                                                   for t in state.tiers.values()):
                solved = state.solve(state.next_solve)
                for p in solved.predictions:
                    p["final"] = True
                out.extend(solved)
        return out
