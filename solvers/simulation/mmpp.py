"""Two-phase MMPP service processes for validating the dispersion estimators: a design by
phase-switch rate and index of dispersion, and a vectorised sampler of their intervals.

An MMPP(2) completes at rate ``lambda_f`` in its fast phase and ``lambda_s`` in its slow one
(``D1`` diagonal) and switches phase at rates ``r_fs``, ``r_sf``; with time shares
``theta_f``, ``theta_s`` and ``alpha = r_fs + r_sf`` its asymptotic index of dispersion is
``I = 1 + 2 theta_f theta_s (lambda_f - lambda_s)^2 / (lambda alpha)`` (KPC-Toolbox's IDC of
an MMPP(2)). A burst outlasts a monitoring window of ``T`` mean intervals when ``alpha T < 1``:
the slow-switching case of ``estimators.dispersion``.
"""

from __future__ import annotations

import math

import numpy as np

from solvers.processes import MAP

__all__ = ["mmpp2", "mmpp2_design", "mmpp2_intervals"]


def mmpp2(fast: float, slow: float, to_slow: float, to_fast: float) -> MAP:
    """MMPP(2): completion rate ``fast``/``slow`` in its two phases, switching from the fast
    to the slow phase at rate ``to_slow`` and back at ``to_fast``."""
    return MAP([[-fast - to_slow, to_slow], [to_fast, -slow - to_fast]],
               [[fast, 0.0], [0.0, slow]])


def mmpp2_design(alpha: float, idc: float, fast_share: float = 0.5) -> MAP:
    """MMPP(2) with mean interval 1, phase-switch rate ``alpha = r_fs + r_sf`` (per mean
    interval), time share ``fast_share`` in the fast phase and asymptotic index of dispersion
    ``idc`` (module docstring). Raises ``ValueError`` when the slow phase's rate would not be
    positive."""
    th_f, th_s = fast_share, 1.0 - fast_share
    gap = math.sqrt((idc - 1.0) * alpha / (2.0 * th_f * th_s))
    fast, slow = 1.0 + th_s * gap, 1.0 - th_f * gap
    if slow <= 0.0:
        raise ValueError(f"idc: {idc} unreachable at alpha {alpha}, fast_share {fast_share}")
    return mmpp2(fast, slow, th_s * alpha, th_f * alpha)


def mmpp2_intervals(process: MAP, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` consecutive intervals of a two-phase MMPP (``D1`` diagonal) from a stationary
    start: alternating phase sojourns, Poisson completions in each (what ``MAP.sample`` draws,
    vectorised)."""
    rates = np.diag(process.D1)
    leave = -np.diag(process.D0) - rates
    horizon = (n + 1) / process.rate * 1.2 + 50.0 / leave.min()
    first = int(rng.random() < process.theta[1])
    k = int(horizon * leave.mean()) + 16
    while True:
        phases = (first + np.arange(k)) % 2
        stay = rng.exponential(1.0 / leave[phases])
        if stay.sum() >= horizon:
            break
        k *= 2
    starts = np.concatenate(([0.0], np.cumsum(stay)[:-1]))
    sojourn = np.repeat(np.arange(k), rng.poisson(rates[phases] * stay))
    epochs = starts[sojourn] + rng.random(sojourn.size) * stay[sojourn]
    epochs = epochs[np.lexsort((epochs, sojourn))]
    if epochs.size < n + 1:
        raise RuntimeError("mmpp2_intervals: horizon too short")          # pragma: no cover
    return np.diff(epochs[:n + 1])
