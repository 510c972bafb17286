"""Per-class CPU demand and pure delay at a tier, jointly, from its per-class response times
across windows that span loads.

A request's time at a real tier is not all CPU: round trips, a disk's fsync, a lock, a
wakeup add a delay ``delta_c`` that does not queue (:mod:`solvers.delay`). Under processor
sharing the CPU part is stretched by the load, the delay is not: the response-time regression
of Kraft et al. (2009), with a constant term::

    R_{k,c} = D_c f(U_k) + delta_c,      f(U) = (c - 1)/c + 1/(c (1 - U))

in window ``k`` at a tier of ``c`` cores (``f``: M/G/1-PS's ``1/(1 - U)``, Kleinrock 1976,
ch. 4, on ``c`` cores by Seidmann et al. 1987's single fast server plus a delay; for one class
it is M/M/1-FCFS's too). The utilization law ``sum_c X_{k,c} D_c = U_k c`` (Rolia and Vetland
1995) ties the classes' demands to the tier's busy time in every window. Both are fitted at
once by non-negative least squares (Lawson and Hanson 1974) on ``theta = (D, delta) >= 0``:
each class's windows weighted by their completions (a class mean over ``n`` requests has
``1/n`` of one request's variance) over the class's mean square (errors relative to the
class's own time: a 3-ms class counts as much as a 100-ms one), each window's utilization law
by :data:`UTIL_WEIGHT` times its completions over the law's mean square.

**Identification.** ``D_c`` and ``delta_c`` separate only where the stretch ``f(U_k)``
varies across the windows: at a steady 5% utilization ``f`` stays near 1.05 and any ``(D,
delta)`` with the same ``D f + delta`` fits. A class is identified when the standard errors of
both (weighted least squares: ``s^2 (A'WA)^{-1}``), times 1.96, are within :data:`SE_MAX` of
its mean time at the tier (a 95% interval of +-10%); otherwise its ``delta`` is unidentified (the caller keeps the demand it had and
may take the delay as the residual ``Rbar - D fbar``, flagged).

The fit keeps decayed sufficient statistics (:class:`LatencySums`, a few numbers per class):
windows are added as they come and the fit is read at each solve.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.optimize import nnls

__all__ = ["LatencySums", "LatencyFit", "stretch", "fit_latency", "SE_MAX", "UTIL_WEIGHT"]

#: a class's demand and delay count as identified when each one's 95% interval (``Z95``
#: standard errors) is within this share of the class's mean time at the tier
SE_MAX = 0.1
Z95 = 1.96
#: one window's utilization law weighs this many times its completions' response-time rows
UTIL_WEIGHT = 1.0
#: the utilization above which a window's stretch is not used (``f`` explodes near 1)
U_MAX = 0.95
#: per class ``(sum n, sum n f, sum n f^2, sum n R, sum n f R, sum n R^2, rows)``
_COLS = 7


def stretch(utilization: Any, cores: Any) -> np.ndarray:
    """``f(U) = (c - 1)/c + 1/(c (1 - U))`` (module docstring), ``U`` clipped to
    :data:`U_MAX`."""
    U = np.clip(np.asarray(utilization, dtype=float), 0.0, U_MAX)
    c = np.maximum(np.asarray(cores, dtype=float), 1.0)
    return (c - 1.0) / c + 1.0 / (c * (1.0 - U))


@dataclass(frozen=True)
class LatencyFit:
    """Per class (in :attr:`classes` order): ``demand`` and ``delay`` (seconds per
    completion at the tier), their standard errors, ``identified``, the class's mean time at
    the tier ``mean_response`` and mean stretch ``mean_stretch`` over the same windows
    (completion-weighted), and ``reason`` (``None``: every class identified)."""

    classes: tuple[str, ...]
    demand: np.ndarray
    delay: np.ndarray
    demand_se: np.ndarray
    delay_se: np.ndarray
    identified: np.ndarray
    mean_response: np.ndarray
    mean_stretch: np.ndarray
    stretch_sd: np.ndarray
    reason: str | None


@dataclass
class LatencySums:
    """Decayed sufficient statistics of :func:`fit_latency`: ``per_class`` ``(C, 7)``,
    ``G = sum_k w_k X_k X_k'`` ``(C, C)``, ``h = sum_k w_k X_k z_k``, ``zz = sum_k w_k z_k^2``
    and ``windows = sum_k 1`` over the windows of the utilization law (``w_k``: the window's
    completions, ``z_k = U_k c``)."""

    classes: list[str] = field(default_factory=list)
    per_class: np.ndarray = field(default_factory=lambda: np.zeros((0, _COLS)))
    G: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    h: np.ndarray = field(default_factory=lambda: np.zeros(0))
    zz: float = 0.0
    windows: float = 0.0

    def grow(self, classes: Sequence[str]) -> None:
        """Align with ``classes`` (a superset of :attr:`classes`, new ones appended)."""
        extra = len(classes) - len(self.classes)
        if extra <= 0:
            return
        C = len(classes)
        self.per_class = np.vstack([self.per_class, np.zeros((extra, _COLS))])
        G = np.zeros((C, C))
        G[:len(self.classes), :len(self.classes)] = self.G
        self.G, self.h = G, np.concatenate([self.h, np.zeros(extra)])
        self.classes = list(classes)

    def add(self, utilization: Any, cores: Any, throughput: Any, response_time: Any,
            counts: Any) -> None:
        """Add windows: ``utilization``, ``cores`` ``(K,)``; ``throughput`` (per second),
        ``response_time`` (per completion at the tier, NaN: none) and ``counts`` (completions)
        ``(K, C)`` aligned with :attr:`classes`. Windows at or above :data:`U_MAX` and classes
        without completions or a time in a window add nothing of them."""
        U = np.asarray(utilization, dtype=float)
        c = np.asarray(cores, dtype=float)
        X = np.asarray(throughput, dtype=float)
        R = np.asarray(response_time, dtype=float)
        n = np.asarray(counts, dtype=float)
        ok = np.isfinite(U) & (U < U_MAX)
        if not ok.any():
            return
        U, c, X, R, n = U[ok], c[ok], X[ok], R[ok], n[ok]
        f = stretch(U, c)[:, None]
        has = np.isfinite(R) & (n > 0)
        w = np.where(has, n, 0.0)
        Rz = np.where(has, R, 0.0)
        self.per_class += np.column_stack([
            w.sum(0), (w * f).sum(0), (w * f * f).sum(0), (w * Rz).sum(0),
            (w * f * Rz).sum(0), (w * Rz * Rz).sum(0), has.sum(0)])
        z = U * c
        wk = n.sum(axis=1)
        self.G += (X * wk[:, None]).T @ X
        self.h += (X * (wk * z)[:, None]).sum(axis=0)
        self.zz += float((wk * z * z).sum())
        self.windows += float(wk.sum())

    def decay(self, factor: float) -> None:
        """Weigh every window so far by ``factor`` (older windows fade)."""
        self.per_class *= factor
        self.G *= factor
        self.h *= factor
        self.zz *= factor
        self.windows *= factor

    def to_dict(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "per_class": self.per_class.tolist(),
                "G": self.G.tolist(), "h": self.h.tolist(), "zz": self.zz,
                "windows": self.windows}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "LatencySums":
        if not data:
            return cls()
        C = len(data["classes"])
        return cls(list(data["classes"]),
                   np.array(data["per_class"], dtype=float).reshape(C, _COLS),
                   np.array(data["G"], dtype=float).reshape(C, C),
                   np.array(data["h"], dtype=float).reshape(C),
                   float(data["zz"]), float(data["windows"]))


def fit_latency(sums: LatencySums, min_completions: float = 10.0) -> LatencyFit | None:
    """The joint fit of ``(D_c, delta_c)`` (module docstring); ``None`` until every class
    has ``min_completions`` completions with a time."""
    S = sums.per_class
    C = S.shape[0]
    if C == 0 or not np.all(S[:, 0] >= min_completions) or not sums.windows > 0:
        return None
    n, nf, nff, nR, nfR, nRR, rows = S.T
    Rbar, fbar = nR / n, nf / n
    f_sd = np.sqrt(np.maximum(nff / n - fbar ** 2, 0.0))
    sR2 = nRR / n                     # per class: its rows in relative units
    sZ2 = sums.zz / sums.windows
    if not (np.all(sR2 > 0) and sZ2 > 0):
        return None
    lam = UTIL_WEIGHT / sZ2
    # normal equations on theta = (D_1..D_C, delta_1..delta_C)
    H = np.zeros((2 * C, 2 * C))
    g = np.zeros(2 * C)
    idx = np.arange(C)
    H[idx, idx] = nff / sR2
    H[idx, C + idx] = H[C + idx, idx] = nf / sR2
    H[C + idx, C + idx] = n / sR2
    H[:C, :C] += lam * sums.G
    g[:C] = nfR / sR2 + lam * sums.h
    g[C:] = nR / sR2
    bb = float((nRR / sR2).sum() + lam * sums.zz)
    ridge = 1e-12 * float(np.trace(H)) / (2 * C)
    Hr = H + ridge * np.eye(2 * C)
    L = np.linalg.cholesky(Hr)
    theta, _ = nnls(L.T, np.linalg.solve(L, g))
    rss = max(float(theta @ H @ theta - 2.0 * g @ theta + bb), 0.0)
    dof = max(float(rows.sum()) - 2 * C, 1.0)
    cov = rss / dof * np.linalg.inv(Hr)
    se = np.sqrt(np.maximum(np.diagonal(cov), 0.0))
    D, delta, se_D, se_delta = theta[:C], theta[C:], se[:C], se[C:]
    identified = (Z95 * se_D <= SE_MAX * Rbar) & (Z95 * se_delta <= SE_MAX * Rbar)
    reason = None
    if not identified.all():
        worst = [sums.classes[c] for c in np.flatnonzero(~identified)]
        reason = (f"delay unidentified for {', '.join(worst)}: the windows' stretch f(U) is "
                  f"{float(fbar.mean()):.3g} +- {float(f_sd.max()):.2g}, too little load "
                  f"variation to separate the CPU demand from the delay (95% intervals "
                  f"wider than +-{SE_MAX:.0%} of the class's time at the tier)")
    return LatencyFit(tuple(sums.classes), D, delta, se_D, se_delta, identified, Rbar, fbar,
                      f_sd, reason)
