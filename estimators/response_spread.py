"""A class's spread of the response time at a tier about its own mean, from the windows' per-class
means: how much one request of the class varies, where the record carries no single request.

A window reports each class's mean response time ``r_k`` over its ``n_k`` completions. If one
request's time has variance ``sigma^2`` and requests are independent, the window's mean has
variance ``sigma^2 / n_k`` -- the method of batch means (Law and Kelton 2000, sec. 9.5.3) with
the windows as batches. The load and the mix drift between windows, and a drift of the true mean
inflates the spread of the windows' means about their overall mean by ``n_k`` times its square;
the difference of two consecutive windows carries that drift only once, as the difference of
two neighbouring means (the mean square successive difference, von Neumann 1941)::

    E[(r_k - r_{k-1})^2] = sigma^2 (1/n_k + 1/n_{k-1})   (+ the drift's step squared)
    sigma^2 ~ sum_k (r_k - r_{k-1})^2 / sum_k (1/n_k + 1/n_{k-1})

over the consecutive windows in which the class has completions and a time (a window without
them is passed over: the next pair is the two around it). The class's SCV is ``sigma^2`` over
its mean squared.

**Low load only.** What the pool model needs is the spread of the class's own service; the
model makes the queueing on top of it. At load the time at a tier is service plus a wait that
every class shares, whose variance would be counted twice -- a 3-ms class queued behind a 100-ms
one reads an SCV far above its own -- and requests that queue together in one window are
correlated (the window's mean varies more than ``sigma^2 / n``). So only windows whose tier is
at most :data:`LOW_LOAD` busy enter: there the wait is a small share of the time (``U / (1 - U)``
of the service in M/M/1, Kleinrock 1975), and a pair spans only such windows.

The sums (:class:`SpreadSums`, three numbers and the last window per class) decay as the tier's
other long-run sums do; :meth:`SpreadSums.scv` reads the estimate with the number of pairs
behind it, from which :func:`scv_lower` gives a one-sided lower bound (each pair's scaled square
a chi-square of one degree of freedom where the windows' means are normal: Cochran 1934).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats

__all__ = ["SpreadSums", "scv_lower", "LOW_LOAD"]

#: windows whose tier is busier than this (utilization per core) are left out: the time there
#: is no longer mostly service (module docstring)
LOW_LOAD = 0.15

#: per class ``(sum (r_k - r_{k-1})^2, sum (1/n_k + 1/n_{k-1}), pairs, last r, last n,
#: sum n_k r_k, sum n_k)``
_COLS = 7


@dataclass
class SpreadSums:
    """Decayed sums of the successive differences of each class's window means (module
    docstring), aligned with :attr:`classes`; the last window's mean and count per class
    (``n = 0``: none yet) carry a pair across calls."""

    classes: list[str] = field(default_factory=list)
    per_class: np.ndarray = field(default_factory=lambda: np.zeros((0, _COLS)))

    def grow(self, classes: Sequence[str]) -> None:
        """Align with ``classes`` (a superset of :attr:`classes`, new ones appended)."""
        extra = len(classes) - len(self.classes)
        if extra > 0:
            self.per_class = np.vstack([self.per_class, np.zeros((extra, _COLS))])
            self.classes = list(classes)

    def add(self, response_time: Any, counts: Any, utilization: Any = None) -> None:
        """Add windows, oldest first: ``response_time`` (per completion, NaN: none) and
        ``counts`` (completions) ``(K, C)`` aligned with :attr:`classes`; ``utilization``
        ``(K,)`` per core (windows above :data:`LOW_LOAD` left out; ``None``: every window)."""
        R = np.asarray(response_time, dtype=float)
        n = np.asarray(counts, dtype=float)
        low = np.ones(R.shape[0], dtype=bool) if utilization is None \
            else np.asarray(utilization, dtype=float) <= LOW_LOAD
        for c in range(min(R.shape[1], self.per_class.shape[0])):
            has = np.isfinite(R[:, c]) & (n[:, c] > 0) & low
            if not has.any():
                continue
            row = self.per_class[c]
            r, k = R[has, c], n[has, c]
            row[5] += float(k @ r)
            row[6] += float(k.sum())
            if row[4] > 0:
                r, k = np.concatenate(([row[3]], r)), np.concatenate(([row[4]], k))
            if r.shape[0] > 1:
                row[0] += float(np.sum(np.diff(r) ** 2))
                row[1] += float(np.sum(1.0 / k[1:] + 1.0 / k[:-1]))
                row[2] += float(r.shape[0] - 1)
            row[3], row[4] = float(r[-1]), float(k[-1])

    def decay(self, factor: float) -> None:
        """Weigh every pair so far by ``factor`` (older windows fade); the last window stays."""
        self.per_class[:, :3] *= factor
        self.per_class[:, 5:] *= factor

    def scv(self) -> dict[str, tuple[float, float]]:
        """Per class with pairs and a positive mean: ``(SCV, pairs)``, the SCV ``sigma^2``
        over the squared mean of the same windows."""
        out = {}
        for c, row in zip(self.classes, self.per_class):
            if row[1] > 0 and row[2] > 0 and row[6] > 0 and row[5] > 0:
                m = row[5] / row[6]
                out[c] = (float(row[0] / row[1]) / (m * m), float(row[2]))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "per_class": self.per_class.tolist()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "SpreadSums":
        if not data:
            return cls()
        C = len(data["classes"])
        return cls(list(data["classes"]),
                   np.array(data["per_class"], dtype=float).reshape(C, _COLS))


def scv_lower(scv: float, pairs: float, level: float = 0.95) -> float:
    """The one-sided ``level`` lower bound of an SCV read from ``pairs`` successive
    differences (module docstring): ``scv * pairs / chi2_level(pairs)``."""
    if not (pairs > 0 and scv >= 0):
        return 0.0
    return float(scv * pairs / stats.chi2.ppf(level, pairs))
