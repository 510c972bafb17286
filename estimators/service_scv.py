"""A class's service-time SCV at a tier from the dispersion of its per-window mean times at
low load, identified where its own standard error is small against it.

A window's mean of ``n`` independent times of variance ``sigma^2`` has variance
``sigma^2 / n``, so over ``W`` windows ``Q = sum_w q_w``, ``q_w = n_w (m_w - m)^2`` (``m`` the
completions' mean), has expectation ``(W - 1) sigma^2`` (the one-way analysis of variance's
between-group sum of squares; Scheffe 1959, ch. 3) and ``sigma^2 = Q / (W - 1)``. At a tier run
at utilization ``U`` a request's time there is about its service stretched, ``T ~ S k + delta``
(``k ~ 1 / (1 - U)`` at a processor-sharing tier, ``delta`` a pure delay: Kleinrock 1976,
ch. 4), so ``SCV_S = sigma_T^2 / (m - delta)^2``; the stretch's own randomness adds a bias
that grows with ``U`` (the more co-residents, the more each time varies), which is why only
windows at ``U <= LOW_UTILIZATION`` enter. Windows are what the pipeline has: no per-request
times are needed. What it cannot separate, it must not be read as: a demand that drifts
between windows adds ``n Var(drift) / m^2`` (more with longer windows), so the reading is an
upper one; and it is identified only with :data:`MIN_WINDOWS` windows and
:data:`MIN_COMPLETIONS` completions of the class (else ``None``: the caller keeps SCV 1).

**A reading is identified only where its standard error is under half of it.** ``Q`` is a sum
of the windows' ``q_w``, so its standard error is ``sqrt(W s_q^2)`` (``s_q^2`` the ``q_w``'s
sample variance: the standard error of a sample total, Cochran 1977, ch. 2); a reading whose
relative standard error exceeds :data:`MAX_RSE` has a 95% interval that reaches 0 -- it says
nothing of the spread -- and is not identified. A few windows that hold one rare time -- a
worker's first request, which opens its database connection (a one-off 50-75 ms against a
0.3-0.4 ms mean) -- make the ``q_w`` as skewed as the reading is large (relative standard error
0.76-0.99 on the testbed's app), while a class whose times are spread in every window (a
heavy-tailed query) reads 0.1-0.3. The sums of ``n_w^2 (m_w - c)^k``, ``k = 0..4`` (``c`` the
class's first window mean, against cancellation) give ``sum q_w^2`` as windows come.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

__all__ = ["LOW_UTILIZATION", "MAX_RSE", "MIN_COMPLETIONS", "MIN_WINDOWS", "ScvSums",
           "service_scv", "service_scv_reading"]

#: windows at a tier utilization up to this enter (the stretch's bias small)
LOW_UTILIZATION = 0.5
#: a class's SCV is identified with at least this many windows and completions
MIN_WINDOWS = 30
MIN_COMPLETIONS = 300.0
#: a reading with a larger standard error relative to itself is not identified (its 95%
#: normal interval, 1.96 standard errors, reaches 0)
MAX_RSE = 0.5
#: the per-class sums: W, N, sum n m, sum n m^2, c, then sum n^2 (m - c)^k for k = 0..4
_SUMS = 10


def service_scv(means: Any, counts: Any, delay: float = 0.0) -> float | None:
    """The service SCV from per-window mean times ``means`` of ``counts`` completions (module
    docstring; windows without completions or a finite mean are left out); ``None`` where not
    identified (too few windows or completions, no time above ``delay``, a standard error
    over :data:`MAX_RSE` of the reading)."""
    return identified(service_scv_reading(means, counts, delay))


def service_scv_reading(means: Any, counts: Any, delay: float = 0.0
                        ) -> tuple[float, float] | None:
    """``(reading, standard error)`` of the service SCV (module docstring), ``None`` where not
    identified."""
    m = np.asarray(means, dtype=float).reshape(-1)
    n = np.asarray(counts, dtype=float).reshape(-1)
    if m.shape != n.shape:
        raise ValueError(f"counts: must match means' shape {m.shape}, got {n.shape}")
    sums = ScvSums()
    sums.add(["c"], np.zeros(m.shape), n[:, None], m[:, None])
    return sums.reading("c", delay)


def identified(got: tuple[float, float] | None) -> float | None:
    """The reading of ``(reading, standard error)`` where its standard error is at most
    :data:`MAX_RSE` of it, else ``None``."""
    if got is None or got[1] > MAX_RSE * got[0]:
        return None
    return got[0]


def _reading(acc: list[float], delay: float) -> tuple[float, float] | None:
    W, N, S1, S2, c, P0, P1, P2, P3, P4 = acc
    W = int(W)
    if W < MIN_WINDOWS or N < MIN_COMPLETIONS:
        return None
    mean = S1 / N
    q = max(S2 - S1 * S1 / N, 0.0)
    service = mean - max(delay, 0.0)
    if not service > 0:
        return None
    a = mean - c                     # q_w^2 = n_w^2 ((m_w - c) - a)^4, expanded in the sums
    q2 = max(P4 - 4 * a * P3 + 6 * a * a * P2 - 4 * a ** 3 * P1 + a ** 4 * P0, 0.0)
    var_q = max(q2 - q * q / W, 0.0) / (W - 1)           # the q_w's sample variance
    scale = (W - 1) * service ** 2
    return q / scale, math.sqrt(W * var_q) / scale


@dataclass
class ScvSums:
    """Per class the sums :func:`service_scv` reads (``W``, ``N``, ``sum n m``,
    ``sum n m^2``, the shift ``c``, ``sum n^2 (m - c)^k`` for ``k = 0..4``) over the windows
    at utilization up to :data:`LOW_UTILIZATION`, kept as windows come."""

    sums: dict[str, list[float]] = field(default_factory=dict)

    def add(self, classes: list[str], utilization: np.ndarray, counts: np.ndarray,
            means: np.ndarray) -> None:
        """Add windows (rows; ``counts`` and ``means`` ``(windows, classes)``)."""
        low = np.asarray(utilization, dtype=float) <= LOW_UTILIZATION
        if not low.any():
            return
        n = np.asarray(counts, dtype=float)[low]
        m = np.asarray(means, dtype=float)[low]
        ok = np.isfinite(m) & np.isfinite(n) & (n > 0)
        n, m = np.where(ok, n, 0.0), np.where(ok, m, 0.0)
        for j, cls in enumerate(classes):
            acc = self.sums.get(cls)
            if acc is None:
                if not ok[:, j].any():
                    continue
                acc = self.sums[cls] = [0.0] * _SUMS
                acc[4] = float(m[ok[:, j], j][0])
            nj, mj = n[:, j], m[:, j]
            e = np.where(ok[:, j], mj - acc[4], 0.0)
            n2 = nj * nj
            acc[0] += float(ok[:, j].sum())
            acc[1] += float(nj.sum())
            acc[2] += float(nj @ mj)
            acc[3] += float(nj @ (mj ** 2))
            for k in range(5):
                acc[5 + k] += float(n2 @ e ** k)

    def reading(self, cls: str, delay: float = 0.0) -> tuple[float, float] | None:
        """The class's ``(reading, standard error)`` (:func:`service_scv_reading`)."""
        acc = self.sums.get(cls)
        return None if acc is None else _reading(acc, delay)

    def scv(self, cls: str, delay: float = 0.0) -> float | None:
        """The class's service SCV (:func:`service_scv`), ``None`` where not identified."""
        return identified(self.reading(cls, delay))

    def to_dict(self) -> dict[str, list[float]]:
        return {c: list(v) for c, v in self.sums.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "ScvSums":
        """The sums saved by :meth:`to_dict`; an older state's four sums (without the
        standard error's) are dropped: the class is read again from the windows to come."""
        return cls({str(c): [float(x) for x in v] for c, v in (data or {}).items()
                    if len(v) == _SUMS and all(math.isfinite(float(x)) for x in v)})
