"""The index of dispersion of a stream: the windows of a sliding history in a ring buffer,
read by :func:`estimators.dispersion.index_of_dispersion` or
:func:`estimators.dispersion.index_of_dispersion_interval` on demand."""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Real
from typing import Any

import numpy as np

from estimators._checks import U_ROUNDING
from estimators.dispersion.inputs import MAX_COMPLETIONS, checked_completions, checked_count, \
    checked_scalar, checked_tol, checked_utilization, checked_window_s
from estimators.dispersion.interval import DEFAULT_BLOCKS, DEFAULT_CONFIDENCE, DEFAULT_LEVELS, \
    DEFAULT_MIN_RUNS, DispersionInterval, index_of_dispersion_interval
from estimators.dispersion.point import DEFAULT_MAX_STEPS, DispersionEstimate, estimate_checked


class DispersionTracker:
    """Fig. 2 (Mi et al. 2008) over a sliding history of the last ``history`` windows of a stream.

    ``update(utilization, completions)`` stores one window (``U_k``, ``n_k``) in a ring buffer in
    O(1); ``estimate()`` runs :func:`index_of_dispersion` on the windows held, oldest first, so it
    equals the batch function on the same history exactly. The state round-trips through a plain
    JSON-serialisable dict (:meth:`to_dict` / :meth:`from_dict`), e.g. for a Faust table.
    """

    def __init__(self, window_s: float, history: int = 4096, tol: float = 0.20,
                 min_samples: int = 100, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.window_s = checked_window_s(window_s)
        self.history = checked_count(history, "history", 1)
        self.tol = checked_tol(tol)
        self.min_samples = checked_count(min_samples, "min_samples", 2)
        self.max_steps = checked_count(max_steps, "max_steps", 2)
        self._u = np.zeros(self.history)
        self._n = np.zeros(self.history)
        self._next = 0       # slot the next window goes to
        self._size = 0       # windows held (<= history)

    def __len__(self) -> int:
        return self._size

    def update(self, utilization: float, completions: Any) -> None:
        """Add one window: ``U_k`` in [0, 1] and ``n_k`` as a count, per-class counts
        (sequence or mapping class -> count), all >= 0; ``ValueError`` naming the field if not."""
        u = checked_scalar(utilization, "utilization")
        if not 0.0 <= u <= 1.0:
            if not -U_ROUNDING <= u <= 1.0 + U_ROUNDING:
                raise ValueError(f"utilization: must be in [0, 1], got {utilization!r}")
            u = min(max(u, 0.0), 1.0)                 # rounding residue
        n = _window_completions(completions)
        slot = self._next
        self._u[slot] = u
        self._n[slot] = n
        self._next = slot + 1 if slot + 1 < self.history else 0
        if self._size < self.history:
            self._size += 1

    def windows(self) -> tuple[np.ndarray, np.ndarray]:
        """``(U_k, n_k)`` of the windows held, oldest first (copies)."""
        if self._size < self.history:
            return self._u[:self._size].copy(), self._n[:self._size].copy()
        order = np.r_[self._next:self.history, 0:self._next]
        return self._u[order], self._n[order]

    def estimate(self) -> DispersionEstimate:
        """:func:`index_of_dispersion` over the windows held."""
        u, n = self.windows()
        return estimate_checked(u, n, self.window_s, self.tol, self.min_samples, self.max_steps)

    def interval(self, confidence: float = DEFAULT_CONFIDENCE, min_runs: int = DEFAULT_MIN_RUNS,
                 levels: int = DEFAULT_LEVELS, blocks: int = DEFAULT_BLOCKS,
                 cores: float = 1.0) -> "DispersionInterval":
        """:func:`index_of_dispersion_interval` over the windows held (``cores``: the cores
        the utilization is the mean over)."""
        u, n = self.windows()
        return index_of_dispersion_interval(u, n, self.window_s, confidence=confidence,
                                            min_runs=min_runs, levels=levels, blocks=blocks,
                                            cores=cores)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable state (windows oldest first)."""
        u, n = self.windows()
        return {"window_s": self.window_s, "history": self.history, "tol": self.tol,
                "min_samples": self.min_samples, "max_steps": self.max_steps,
                "utilization": u.tolist(), "completions": n.tolist()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DispersionTracker":
        """Inverse of :meth:`to_dict`; ``ValueError`` naming a missing or invalid field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"state: must be a mapping, got {type(data).__name__}")
        missing = [key for key in ("window_s", "history", "utilization", "completions")
                   if key not in data]
        if missing:
            raise ValueError(f"{missing[0]}: missing from the tracker state")
        tracker = cls(data["window_s"], data["history"], data.get("tol", 0.20),
                      data.get("min_samples", 100), data.get("max_steps", DEFAULT_MAX_STEPS))
        u = checked_utilization(data["utilization"])
        n = checked_completions(data["completions"], u.size)
        if u.size > tracker.history:
            raise ValueError(f"utilization: {u.size} windows exceed history {tracker.history}")
        tracker._u[:u.size] = u
        tracker._n[:u.size] = n
        tracker._size = u.size
        tracker._next = u.size % tracker.history
        return tracker


def _window_completions(value: Any) -> float:
    """Total completions of one window from a count, a sequence or a mapping of counts."""
    if isinstance(value, Real) and not isinstance(value, bool):
        parts: Any = (value,)
    elif isinstance(value, Mapping):
        parts = value.values()
    elif isinstance(value, np.ndarray):
        parts = value.ravel().tolist()
    elif isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError(f"completions: must be a count or per-class counts, got {value!r}")
    else:
        parts = value
    total = 0.0
    for part in parts:
        c = checked_scalar(part, "completions")
        if c < 0.0:
            raise ValueError(f"completions: must be >= 0, got {part!r}")
        total += c
    if total > MAX_COMPLETIONS:
        raise ValueError(f"completions: total per window must be <= 2**53, got {total!r}")
    return total
