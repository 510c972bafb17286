"""A class's service-time SCV at a tier from the dispersion of its per-window mean response
times at low load.

A window's mean of ``n`` independent times of variance ``sigma^2`` has variance
``sigma^2 / n``, so over ``W`` windows ``Q = sum_w n_w (m_w - m)^2`` (``m`` the completions'
mean) has expectation ``(W - 1) sigma^2`` (the one-way analysis of variance's between-group
sum of squares; Scheffe 1959, ch. 3) and ``sigma^2 = Q / (W - 1)``. At a tier run at
utilization ``U`` a request's time there is about its service stretched, ``T ~ S k + delta``
(``k ~ 1 / (1 - U)`` at a processor-sharing tier, ``delta`` a pure delay: Kleinrock 1976,
ch. 4), so ``SCV_S = sigma_T^2 / (m - delta)^2``; the stretch's own randomness adds a bias
that grows with ``U`` (the more co-residents, the more each time varies), which is why only
windows at ``U <= LOW_UTILIZATION`` enter. Windows are what the pipeline has: no per-request
times are needed. What it cannot separate, it must not be read as: a demand that drifts
between windows adds ``n Var(drift) / m^2`` (more with longer windows), so the estimate is
an upper reading; and it is identified only with :data:`MIN_WINDOWS` windows and
:data:`MIN_COMPLETIONS` completions of the class (else ``None``: the caller keeps SCV 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

__all__ = ["LOW_UTILIZATION", "MIN_COMPLETIONS", "MIN_WINDOWS", "ScvSums", "service_scv"]

#: windows at a tier utilization up to this enter (the stretch's bias small)
LOW_UTILIZATION = 0.5
#: a class's SCV is identified with at least this many windows and completions
MIN_WINDOWS = 30
MIN_COMPLETIONS = 300.0


def service_scv(means: Any, counts: Any, delay: float = 0.0) -> float | None:
    """The service SCV from per-window mean times ``means`` of ``counts`` completions
    (module docstring; windows without completions or a finite mean are left out); ``None``
    where not identified (too few windows or completions, no time above ``delay``)."""
    m = np.asarray(means, dtype=float).reshape(-1)
    n = np.asarray(counts, dtype=float).reshape(-1)
    if m.shape != n.shape:
        raise ValueError(f"counts: must match means' shape {m.shape}, got {n.shape}")
    ok = np.isfinite(m) & np.isfinite(n) & (n > 0)
    return _from_sums(int(ok.sum()), float(n[ok].sum()), float(n[ok] @ m[ok]),
                      float(n[ok] @ (m[ok] ** 2)), delay)


def _from_sums(W: int, N: float, S1: float, S2: float, delay: float) -> float | None:
    if W < MIN_WINDOWS or N < MIN_COMPLETIONS:
        return None
    mean = S1 / N
    q = max(S2 - S1 * S1 / N, 0.0)
    service = mean - max(delay, 0.0)
    if not service > 0:
        return None
    return q / (W - 1) / service ** 2


@dataclass
class ScvSums:
    """Per class ``[W, N, sum n m, sum n m^2]`` over the windows at utilization up to
    :data:`LOW_UTILIZATION` (the sums :func:`service_scv` reads, kept as windows come)."""

    sums: dict[str, list[float]] = field(default_factory=dict)

    def add(self, classes: list[str], utilization: np.ndarray, counts: np.ndarray,
            means: np.ndarray) -> None:
        """Add windows (rows; ``counts`` and ``means`` ``(windows, classes)``)."""
        low = np.asarray(utilization, dtype=float) <= LOW_UTILIZATION
        if not low.any():
            return
        n = np.asarray(counts, dtype=float)[low]
        m = np.asarray(means, dtype=float)[low]
        ok = np.isfinite(m) & (n > 0)
        n, m = np.where(ok, n, 0.0), np.where(ok, m, 0.0)
        for j, c in enumerate(classes):
            acc = self.sums.setdefault(c, [0.0, 0.0, 0.0, 0.0])
            acc[0] += float(ok[:, j].sum())
            acc[1] += float(n[:, j].sum())
            acc[2] += float(n[:, j] @ m[:, j])
            acc[3] += float(n[:, j] @ (m[:, j] ** 2))

    def scv(self, cls: str, delay: float = 0.0) -> float | None:
        """The class's service SCV (:func:`service_scv`), ``None`` where not identified."""
        acc = self.sums.get(cls)
        return None if acc is None else _from_sums(int(acc[0]), acc[1], acc[2], acc[3], delay)

    def to_dict(self) -> dict[str, list[float]]:
        return {c: list(v) for c, v in self.sums.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "ScvSums":
        return cls({str(c): [float(x) for x in v] for c, v in (data or {}).items()
                    if len(v) == 4 and all(math.isfinite(float(x)) for x in v)})
