"""Checks of the dispersion estimators' inputs: every bad value raises ``ValueError`` naming the
field, the value and, for an array, the window it sits in."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np

from estimators._checks import U_ROUNDING


#: Largest completion count accepted per window: counts above 2**53 are not exact in floats.
MAX_COMPLETIONS = float(2**53)


def checked_scalar(value: Any, name: str) -> float:
    """``value`` as a finite float; else ``ValueError`` naming ``name`` and the value."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name}: must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name}: must be finite, got {value!r}")
    return v


def checked_window_s(value: Any) -> float:
    """``window_s`` as a float > 0 (a window length in seconds)."""
    v = checked_scalar(value, "window_s")
    if v <= 0:
        raise ValueError(f"window_s: must be > 0, got {value!r}")
    return v


def checked_tol(value: Any) -> float:
    """``tol`` as a float in ``(0, 1)`` (a relative tolerance)."""
    v = checked_scalar(value, "tol")
    if not 0.0 < v < 1.0:
        raise ValueError(f"tol: must be in (0, 1), got {value!r}")
    return v


def checked_count(value: Any, name: str, minimum: int) -> int:
    """``value`` as an ``int`` of at least ``minimum`` (``bool`` is refused)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name}: must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value!r}")
    return int(value)


def _array(value: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not a numeric array ({exc})") from None
    return arr


def _first_bad(arr: np.ndarray, bad: np.ndarray, name: str, what: str) -> None:
    if np.any(bad):
        idx = np.unravel_index(int(np.argmax(bad)), bad.shape)
        where = idx[0] if len(idx) == 1 else idx
        raise ValueError(f"{name}: {what}, got {arr[idx]!r} at window {where}")


def checked_utilization(value: Any) -> np.ndarray:
    """``utilization`` as a 1-D float array in ``[0, 1]``; values beyond it by at most
    :data:`estimators._checks.U_ROUNDING` are rounding residue and are clipped."""
    u = _array(value, "utilization")
    if u.ndim != 1:
        raise ValueError(f"utilization: must be 1-D (one value per window), got shape {u.shape}")
    _first_bad(u, ~np.isfinite(u), "utilization", "must be finite")
    if u.size and not (u.min() >= 0.0 and u.max() <= 1.0):
        _first_bad(u, (u < -U_ROUNDING) | (u > 1.0 + U_ROUNDING), "utilization",
                   "must be in [0, 1]")
        u = np.clip(u, 0.0, 1.0)                      # rounding residue (a copy)
    return u


def checked_completions(value: Any, windows: int) -> np.ndarray:
    """``completions`` as a float array of ``windows`` rows (one column per class, or 1-D), finite,
    >= 0, each window's total at most :data:`MAX_COMPLETIONS`."""
    n = _array(value, "completions")
    with np.errstate(over="ignore", invalid="ignore"):
        return _valid_completions(n, windows)


def _valid_completions(n: np.ndarray, windows: int) -> np.ndarray:
    if n.ndim not in (1, 2) or n.shape[0] != windows or (n.ndim == 2 and n.shape[1] == 0):
        raise ValueError(f"completions: must have shape ({windows},) or ({windows}, classes) to "
                         f"match utilization, got shape {n.shape}")
    _first_bad(n, ~np.isfinite(n), "completions", "must be finite")
    _first_bad(n, n < 0.0, "completions", "must be >= 0")
    total = n.sum(axis=1) if n.ndim == 2 else n
    _first_bad(total, total > MAX_COMPLETIONS, "completions",
               "total per window must be <= 2**53")
    return total
