"""A tier's recent monitoring windows, kept in fixed-size chunks.

The dispersion estimate (paper 000 Fig. 2), the busy-time p95 and the sliding regression need
the last few thousand windows of a tier: ``U_k``, ``n_k`` per class and ``T``. Rows are kept in
chunks of :data:`CHUNK` windows so that a durable store (the Faust worker's changelog-backed
table) writes only the chunks a batch touched, not the whole history: the state written per
window stays constant however long the history is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

__all__ = ["CHUNK", "WindowHistory", "HistoryArrays"]

#: windows per chunk
CHUNK = 16


@dataclass(frozen=True)
class HistoryArrays:
    """The last windows as arrays: ``utilization`` ``U_k``, ``window_s`` ``T_k``, ``cores``,
    ``completions`` ``(windows, classes)`` aligned with the tier's class list."""

    utilization: np.ndarray
    window_s: np.ndarray
    cores: np.ndarray
    completions: np.ndarray

    @property
    def size(self) -> int:
        return int(self.utilization.shape[0])

    @property
    def total_completions(self) -> np.ndarray:
        """``n_k``: all classes."""
        return self.completions.sum(axis=1)

    @property
    def busy_time(self) -> np.ndarray:
        """``B_k = U_k T_k cores``: busy core-seconds per window."""
        return self.utilization * self.window_s * self.cores

    def tail(self, k: int) -> "HistoryArrays":
        """The last ``k`` windows (all if fewer)."""
        start = max(self.size - int(k), 0)
        return HistoryArrays(self.utilization[start:], self.window_s[start:],
                             self.cores[start:], self.completions[start:])


def _new_chunk() -> dict[str, list]:
    return {"u": [], "w": [], "c": [], "x": []}


class WindowHistory:
    """The last ``capacity`` windows of a tier (at least; whole chunks are kept).

    ``chunks`` maps chunk number ``seq // CHUNK`` to its rows; :meth:`take_changes` returns the
    chunks written and dropped since the previous call (for an incremental durable store).
    A numpy ring of the last ``capacity`` rows, kept alongside from the first :meth:`arrays`
    call on, serves the estimators without rebuilding arrays from the rows at every solve.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self.seq = 0                               # windows appended so far
        self.chunks: dict[int, dict[str, list]] = {}
        self._dirty: set[int] = set()
        self._dropped: set[int] = set()
        self._ring: dict[str, np.ndarray] | None = None   # compute copy of the last rows

    def append(self, utilization: float, window_s: float, cores: int,
               completions: list[float]) -> None:
        """One window; ``completions`` aligned with the tier's class list at this time."""
        number = self.seq // CHUNK
        chunk = self.chunks.get(number)
        if chunk is None:
            chunk = self.chunks[number] = _new_chunk()
            oldest = (self.seq - self.capacity) // CHUNK
            for old in [k for k in self.chunks if k < oldest]:
                del self.chunks[old]
                self._dirty.discard(old)
                self._dropped.add(old)
        chunk["u"].append(utilization)
        chunk["w"].append(window_s)
        chunk["c"].append(cores)
        chunk["x"].append(completions)
        self._dirty.add(number)
        if self._ring is not None:
            self._ring_put(self.seq, utilization, window_s, cores, completions)
        self.seq += 1

    def arrays(self, n_classes: int, last: int | None = None) -> HistoryArrays:
        """The last ``last`` (default and at most ``capacity``) windows as arrays, oldest
        first; completions zero-padded to ``n_classes``."""
        ring = self._ring if self._ring is not None else self._build_ring()
        keep = min(self.capacity if last is None else last, self.seq, self.capacity)
        idx = (self.seq - keep + np.arange(keep)) % self.capacity
        X = ring["x"][idx]
        if X.shape[1] < n_classes:
            X = np.pad(X, ((0, 0), (0, n_classes - X.shape[1])))
        return HistoryArrays(ring["u"][idx], ring["w"][idx], ring["c"][idx], X[:, :n_classes])

    def _build_ring(self) -> dict[str, np.ndarray]:
        """The numpy ring the arrays are cut from, rebuilt from the chunks (after a restore)."""
        width = max((len(x) for chunk in self.chunks.values() for x in chunk["x"]), default=0)
        ring = {k: np.zeros(self.capacity) for k in ("u", "w", "c")}
        ring["x"] = np.zeros((self.capacity, width))
        self._ring = ring
        start = self.seq - sum(len(chunk["u"]) for chunk in self.chunks.values())
        for number in sorted(self.chunks):
            chunk = self.chunks[number]
            for i in range(len(chunk["u"])):
                self._ring_put(start, chunk["u"][i], chunk["w"][i], chunk["c"][i],
                               chunk["x"][i])
                start += 1
        return ring

    def _ring_put(self, seq: int, u: float, w: float, c: float, x: list[float]) -> None:
        ring = self._ring
        assert ring is not None
        if len(x) > ring["x"].shape[1]:
            ring["x"] = np.pad(ring["x"], ((0, 0), (0, len(x) - ring["x"].shape[1])))
        slot = seq % self.capacity
        ring["u"][slot], ring["w"][slot], ring["c"][slot] = u, w, c
        row = ring["x"][slot]
        row[:] = 0.0
        row[:len(x)] = x

    def take_changes(self) -> tuple[dict[int, dict[str, list]], set[int]]:
        """Chunks written (number -> rows) and dropped since the last call."""
        written = {k: self.chunks[k] for k in self._dirty}
        dropped = set(self._dropped)
        self._dirty.clear()
        self._dropped.clear()
        return written, dropped

    # -- state -------------------------------------------------------------------------------
    def header(self) -> dict[str, Any]:
        """Everything but the rows."""
        return {"capacity": self.capacity, "seq": self.seq, "chunks": sorted(self.chunks)}

    @classmethod
    def restore(cls, header: Mapping[str, Any],
                chunks: Mapping[int, Mapping[str, list]]) -> "WindowHistory":
        """Rebuild from :meth:`header` and the chunks it lists; rows beyond the header's
        ``seq`` (written after it) are ignored."""
        hist = cls(int(header["capacity"]))
        hist.seq = int(header["seq"])
        for number in header["chunks"]:
            if number not in chunks:
                raise ValueError(f"chunks: chunk {number} of the history is missing")
            # a chunk stored after the header was (crash in between) may hold later rows
            keep = hist.seq - int(number) * CHUNK
            hist.chunks[int(number)] = {k: list(v[:keep]) for k, v in chunks[number].items()}
        return hist

    def to_dict(self) -> dict[str, Any]:
        return {**self.header(), "rows": {str(k): v for k, v in self.chunks.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WindowHistory":
        return cls.restore(data, {int(k): v for k, v in data["rows"].items()})
