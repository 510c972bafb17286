"""A tier's recent monitoring windows: one numpy ring, handed out in fixed-size chunks.

The dispersion estimate (Mi et al. 2008, Fig. 2), the service-time p95 and the sliding regression need
the last few thousand windows of a tier: ``U_k``, ``n_k`` per class and ``T``. They are kept in
one ring of whole chunks of :data:`CHUNK` windows: chunk ``k`` (windows ``k CHUNK ..``) lives in
slot ``k mod slots``. The ring grows as windows arrive (doubling, whole chunks) up to its
full size, so a tier holds memory for the windows it has, not for ``capacity``: 100,000
systems of one window each would otherwise preallocate ~100 KB per tier (14.4 GB in all).
Until the ring is full, window ``i`` sits at row ``i``, which is also where the full ring puts
it, so growing moves nothing. A durable store (the Faust worker's changelog-backed table) writes only
the chunks a batch touched, not the whole history, so the state written per window stays
constant however long the history is; the estimators read the ring as arrays.
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


class WindowHistory:
    """The last ``capacity`` windows of a tier (at least; whole chunks are kept).

    Rows live in a ring of ``slots`` chunks (``capacity / CHUNK`` rounded up, plus the chunk
    being filled). :attr:`chunks` gives the kept chunks as ``{number: rows}``;
    :meth:`take_changes` the chunks written and dropped since the previous call (for an
    incremental durable store); :meth:`arrays` the last windows for the estimators.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self.seq = 0                               # windows appended so far
        self.slots = -(-self.capacity // CHUNK) + 1
        self._full = self.slots * CHUNK            # rows of the ring once grown
        self._u, self._w, self._c = np.zeros(0), np.zeros(0), np.zeros(0)
        self._x = np.zeros((0, 0))
        self._oldest = 0                           # oldest chunk kept
        self._dirty: set[int] = set()
        self._dropped: set[int] = set()

    # -- writing -----------------------------------------------------------------------------
    def _grow(self, need: int) -> None:
        """Room for rows ``0 .. need - 1``: double (whole chunks), at most the full ring. Only
        called before the ring is full, when no row has wrapped: rows keep their places."""
        rows = self._u.shape[0]
        size = min(self._full, max(need, 2 * rows, CHUNK))
        size = min(self._full, -(-size // CHUNK) * CHUNK)
        u, w, c = np.zeros(size), np.zeros(size), np.zeros(size)
        x = np.zeros((size, self._x.shape[1]))
        u[:rows], w[:rows], c[:rows], x[:rows] = self._u, self._w, self._c, self._x
        self._u, self._w, self._c, self._x = u, w, c, x

    def append(self, utilization: float, window_s: float, cores: float,
               completions: list[float]) -> None:
        """One window; ``completions`` aligned with the tier's class list at this time."""
        x = np.asarray(completions, dtype=float).reshape(1, -1)
        self.extend(np.array([utilization]), np.array([window_s]), np.array([cores]), x)

    def extend(self, utilization: np.ndarray, window_s: np.ndarray, cores: np.ndarray,
               completions: np.ndarray) -> None:
        """Several windows, oldest first; ``completions`` ``(windows, classes)``."""
        count = int(utilization.shape[0])
        if count == 0:
            return
        if self.seq + count > self._u.shape[0] and self._u.shape[0] < self._full:
            self._grow(self.seq + count)
        width = completions.shape[1]
        if width > self._x.shape[1]:
            if self._x.shape[1] == 0:                 # first rows: no copy of an empty ring
                self._x = np.zeros((self._u.shape[0], width))
            else:
                self._x = np.pad(self._x, ((0, 0), (0, width - self._x.shape[1])))
        first, last = self.seq, self.seq + count - 1
        rows = self._u.shape[0]
        start = first % rows
        at: Any = slice(start, start + count) if start + count <= rows \
            else (first + np.arange(count)) % rows
        self._u[at], self._w[at], self._c[at] = utilization, window_s, cores
        self._x[at, :width] = completions
        if width < self._x.shape[1]:
            self._x[at, width:] = 0.0
        self.seq += count
        self._dirty.update(range(first // CHUNK, last // CHUNK + 1))
        # chunks are dropped as a new one starts: those entirely older than ``capacity``
        # windows before that start (so the last ``capacity`` windows are always kept)
        oldest = max((CHUNK * (last // CHUNK) - self.capacity) // CHUNK, 0)
        if oldest > self._oldest:
            gone = set(range(self._oldest, oldest))
            self._dirty -= gone
            self._dropped |= gone
            self._oldest = oldest

    # -- reading -----------------------------------------------------------------------------
    def arrays(self, n_classes: int, last: int | None = None) -> HistoryArrays:
        """The last ``last`` (default and at most ``capacity``) windows as arrays, oldest
        first; completions zero-padded to ``n_classes``."""
        keep = min(self.capacity if last is None else last, self.seq, self.capacity)
        rows = self._u.shape[0]
        start = (self.seq - keep) % rows if rows else 0
        if start + keep <= rows:
            sel: Any = slice(start, start + keep)
        else:
            sel = (self.seq - keep + np.arange(keep)) % rows
        X = self._x[sel]
        if X.shape[1] < n_classes:
            X = np.pad(X, ((0, 0), (0, n_classes - X.shape[1])))
        return HistoryArrays(self._u[sel], self._w[sel], self._c[sel], X[:, :n_classes])

    def chunk(self, number: int) -> dict[str, list]:
        """The rows of kept chunk ``number``: ``{"u", "w", "c": [...], "x": [[...], ...]}``."""
        count = min(CHUNK, self.seq - number * CHUNK)
        start = (number % self.slots) * CHUNK
        sel = slice(start, start + count)
        cores = self._c[sel]
        return {"u": self._u[sel].tolist(), "w": self._w[sel].tolist(),
                "c": [int(c) if c == int(c) else float(c) for c in cores.tolist()],
                "x": self._x[sel].tolist()}

    def numbers(self) -> range:
        """The numbers of the kept chunks, oldest first."""
        return range(self._oldest, (self.seq - 1) // CHUNK + 1) if self.seq else range(0)

    @property
    def chunks(self) -> dict[int, dict[str, list]]:
        """Every kept chunk, ``{number: rows}`` (:meth:`chunk`)."""
        return {k: self.chunk(k) for k in self.numbers()}

    def take_changes(self) -> tuple[dict[int, dict[str, list]], set[int]]:
        """Chunks written (number -> rows) and dropped since the last call."""
        written = {k: self.chunk(k) for k in sorted(self._dirty)}
        dropped = set(self._dropped)
        self._dirty.clear()
        self._dropped.clear()
        return written, dropped

    # -- state -------------------------------------------------------------------------------
    def header(self) -> dict[str, Any]:
        """Everything but the rows."""
        return {"capacity": self.capacity, "seq": self.seq, "chunks": list(self.numbers())}

    @classmethod
    def restore(cls, header: Mapping[str, Any],
                chunks: Mapping[int, Mapping[str, list]]) -> "WindowHistory":
        """Rebuild from :meth:`header` and the chunks it lists; rows beyond the header's
        ``seq`` (written after it) are ignored."""
        hist = cls(int(header["capacity"]))
        seq = int(header["seq"])
        numbers = sorted(int(k) for k in header["chunks"])
        for number in numbers:
            if number not in chunks:
                raise ValueError(f"chunks: chunk {number} of the history is missing")
        hist.seq = numbers[0] * CHUNK if numbers else seq
        hist._oldest = numbers[0] if numbers else 0
        for number in numbers:
            # a chunk stored after the header was (crash in between) may hold later rows
            rows = chunks[number]
            keep = min(seq - number * CHUNK, len(rows["u"]))
            x = rows["x"][:keep]
            width = max((len(r) for r in x), default=0)
            X = np.zeros((keep, width))
            for i, r in enumerate(x):
                X[i, :len(r)] = r
            hist.extend(np.asarray(rows["u"][:keep], dtype=float),
                        np.asarray(rows["w"][:keep], dtype=float),
                        np.asarray(rows["c"][:keep], dtype=float), X)
        hist.seq = seq
        hist._dirty.clear()
        hist._dropped.clear()
        return hist

    def to_dict(self) -> dict[str, Any]:
        return {**self.header(), "rows": {str(k): v for k, v in self.chunks.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WindowHistory":
        return cls.restore(data, {int(k): v for k, v in data["rows"].items()})
