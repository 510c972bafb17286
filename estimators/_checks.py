"""Input checks shared by the estimators: each bad value raises ``ValueError`` whose message
starts with the name of the field."""

from __future__ import annotations

from typing import Any

import numpy as np

#: a utilization within this of [0, 1] is rounding (``1 + 1e-12``, ``-1e-15``): clamped into it
U_ROUNDING = 1e-9


def as_array(values: Any, field: str) -> np.ndarray:
    """``values`` as a float array, or ``ValueError`` naming ``field``."""
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{field}: must be numeric, got {values!r}") from None


def utilization_and_throughputs(utilization: Any, throughputs: Any, row: str
                                ) -> tuple[np.ndarray, np.ndarray]:
    """The utilization ``U_k`` (one per ``row``: window or period) within [0, 1], rounding
    residue within :data:`U_ROUNDING` clamped (a copy), and the throughputs' matrix of shape
    ``(rows, classes)``, ``classes >= 1`` (its entries are the caller's to check: the
    estimators bound them differently)."""
    u = as_array(utilization, "utilization")
    X = as_array(throughputs, "throughputs")
    if u.ndim != 1 or u.size == 0:
        raise ValueError(f"utilization: expected a non-empty 1-D array (one per {row}), "
                         f"got shape {u.shape}")
    if X.ndim != 2 or X.shape[0] != u.size or X.shape[1] == 0:
        raise ValueError(f"throughputs: expected shape ({u.size}, classes) with classes >= 1, "
                         f"got {X.shape}")
    if not (u.min() >= 0.0 and u.max() <= 1.0):                # NaN fails too
        bad = ~(np.isfinite(u) & (u >= -U_ROUNDING) & (u <= 1.0 + U_ROUNDING))
        if bad.any():
            raise ValueError(f"utilization: entries must be within [0, 1], "
                             f"got {u[bad][:3].tolist()}")
        u = np.clip(u, 0.0, 1.0)                      # rounding residue (a copy)
    return u, X
