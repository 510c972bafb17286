"""Confidence intervals for simulation output: independent replications and batch means.

Both methods reduce a simulation's output to a handful of (approximately) independent,
identically distributed, approximately normal observations ``x_1..x_n`` and report the
Student-t interval

    mean +- t_{(1+level)/2, n-1} * s / sqrt(n),

where ``s`` is the sample standard deviation (e.g. Law & Kelton, *Simulation Modeling and
Analysis*, ch. 9):

* **independent replications** -- ``x_i`` is the estimate of replication ``i`` (independent
  random streams, each with its own warm-up removed);
* **batch means** -- one long run (warm-up removed) is cut into ``n`` contiguous batches of
  equal size and ``x_i`` is the mean of batch ``i``. Batches must be long compared with the
  correlation time of the output for the batch means to be nearly independent.

When fewer than two observations are available the half-width is ``math.inf`` (flagged,
never NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as _st

__all__ = ["Estimate", "replication_interval", "batch_means_interval", "batch_means"]


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a confidence interval ``mean +- half_width`` at ``level``.

    ``n`` is the number of (replication or batch) observations the interval rests on;
    ``half_width`` is ``math.inf`` when ``n < 2`` and 0 when all observations are equal.
    """

    mean: float
    half_width: float
    level: float
    n: int

    @property
    def lower(self) -> float:
        return self.mean - self.half_width

    @property
    def upper(self) -> float:
        return self.mean + self.half_width

    def contains(self, value: float, widen: float = 1.0) -> bool:
        """Whether ``value`` lies within ``mean +- widen * half_width``."""
        return abs(float(value) - self.mean) <= widen * self.half_width


def _level(level: float) -> float:
    lv = float(level)
    if not (0.0 < lv < 1.0):
        raise ValueError(f"level: must be in (0, 1), got {level!r}")
    return lv


def _observations(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name}: must be one-dimensional, got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name}: is empty")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return x


def replication_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> Estimate:
    """Student-t interval for the mean of i.i.d. observations (e.g. one per replication)."""
    lv = _level(level)
    x = _observations(values, "values")
    n = int(x.size)
    mean = float(x.mean())
    if n < 2:
        return Estimate(mean, math.inf, lv, n)
    sd = float(x.std(ddof=1))
    half = float(_st.t.ppf(0.5 + lv / 2.0, n - 1)) * sd / math.sqrt(n)
    return Estimate(mean, half, lv, n)


def batch_means(series: Sequence[float] | np.ndarray, n_batches: int,
                warmup: int = 0) -> np.ndarray:
    """Means of ``n_batches`` contiguous, equal batches of ``series[warmup:]``.

    When the length is not a multiple of ``n_batches`` the leftover observations are dropped
    from the *start* (they are the ones nearest the transient).
    """
    x = _observations(series, "series")
    if int(warmup) < 0:
        raise ValueError(f"warmup: must be >= 0, got {warmup}")
    if int(n_batches) < 1:
        raise ValueError(f"n_batches: must be >= 1, got {n_batches}")
    x = x[int(warmup):]
    size = x.size // int(n_batches)
    if size < 1:
        raise ValueError(
            f"n_batches: {n_batches} batches need at least as many observations after "
            f"warm-up, got {x.size}")
    x = x[x.size - size * int(n_batches):]
    return x.reshape(int(n_batches), size).mean(axis=1)


def batch_means_interval(series: Sequence[float] | np.ndarray, n_batches: int = 20,
                         level: float = 0.95, warmup: int = 0) -> Estimate:
    """Batch-means interval for the steady-state mean of a (correlated) output ``series``.

    ``warmup`` leading observations are discarded first (transient removal).
    """
    return replication_interval(batch_means(series, n_batches, warmup), level)
