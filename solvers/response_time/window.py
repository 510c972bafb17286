"""Quantiles of the end-to-end law of exponential FCFS tiers on a lattice that covers only the law.

:func:`~solvers.response_time.sojourn.end_to_end` puts the law on ``GRID`` points from 0 to the
mean plus ``SPAN`` standard deviations. Below the knee that is the law's own range, but near
and past it the response time is a sum of many phases: its mean is many standard deviations
from 0 and most of those points carry no mass. Here the lattice covers only
``[mean - BELOW sd, mean + SPAN sd]`` (from 0 when that is below 0), with :data:`WINDOW_GRID`
points: the discrete Fourier transform is the same as on the long lattice -- every phase's
triangular-kernel masses at ``i h``, the waits' generating functions of them, their product
--, only its inverse is read modulo the window's length, the mass at lattice point ``i``
landing at ``i mod G``. A window that holds all but a negligible mass (the laws' tails are
exponential-like: beyond ``SPAN`` standard deviations ~1e-5, below ``BELOW`` on the left far
less, the sum of phases' left tail being lighter than Gaussian's (Cramer 1938)) is read back
by rotating the inverse by the window's start. The step is ``(BELOW + SPAN) sd / G``, finer
than the long lattice's ``(mean + SPAN sd) / 1024`` wherever the mean exceeds about 20
standard deviations minus ... that is, from near the knee up; and a quarter of the points
cost less in every array step (the transforms, the waits' Horner, the inverse transform).

The moments that place the window are the same closed forms as the long lattice's (a
compound of exponential phases: ``Var = (E[K] + Var K) / rate^2``, Feller 1968), computed for
every wait of every population in one matrix product instead of wait by wait, and the
quantiles of every class and population are read in one array step, each the first lattice
point whose cumulative reaches the level, interpolated linearly from the one before. The
discretisation's own error is that of the triangular kernel (Abate and Whitt 1992's lattice
method): each mean exact, each phase's variance up to ``h^2 / 6`` more, which a finer step
shrinks; docs/accuracy.md compares both lattices' quantiles.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .sojourn import SPAN, TierWait, _horner

__all__ = ["WINDOW_GRID", "BELOW", "window_quantiles"]

#: lattice points of the window
WINDOW_GRID = 256
#: the window starts this many standard deviations below the mean (at 0 if that is below)
BELOW = 8.0


def window_quantiles(waits: list[list[TierWait]], S: np.ndarray, sh: np.ndarray,
                     levels: np.ndarray, grid: int = WINDOW_GRID
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(P, C, L)`` quantiles at ``levels`` and ``(P, C)`` means of the law of
    ``sum_m (sh[m, c] W_m + S[m, c])`` for each set ``waits[p]`` (one wait per tier; the
    tiers independent, :mod:`~solvers.response_time.sojourn`), each set on its own window
    (module docstring). ``S[m, c]`` the mean of class ``c``'s exponential service at tier
    ``m`` (0: none), ``sh[m, c]`` the factor on the tier's wait the class meets."""
    M, C = S.shape
    P = len(waits)
    flat = [w for ws in waits for w in ws]
    width = max(w.pmf.shape[0] for w in flat) if flat else 1
    s = max(int(math.ceil(math.sqrt(width))), 1)      # the blocked Horner's block
    blocks = -(-width // s)
    coef = np.zeros((P * M, blocks * s))
    for t, w in enumerate(flat):
        coef[t, :w.pmf.shape[0]] = w.pmf
    offset = np.array([w.offset for w in flat], dtype=float)
    inv = np.array([1.0 / w.rate for w in flat])        # a delay's rate is inf: no wait
    m1, m2 = (coef @ _k_k2(blocks * s)).T               # E[K], E[K^2] about the offset
    ek = offset + m1
    wmean = (ek * inv).reshape(P, M)
    wvar = ((ek + m2 - m1 * m1) * inv * inv).reshape(P, M)
    means = wmean @ sh + S.sum(axis=0)
    sd = np.sqrt(np.maximum(wvar @ (sh * sh) + (S * S).sum(axis=0), 0.0))
    q = np.zeros((P, C, levels.shape[0]))
    if not C:
        return q, means
    lo = np.maximum(means - BELOW * sd, 0.0).min(axis=1)
    hi = (means + SPAN * sd).max(axis=1)
    live = np.flatnonzero(hi > 0)
    if not live.size:
        return q, means
    h = (hi[live] - lo[live]) / (grid - 1)
    start = np.floor(lo[live] / h)
    itheta = _itheta(grid)
    # E[e^{-i w X}] = 1 / (1 + i w E[X]) of an exponential X (1: no time), w h = theta_k
    phi = (1.0 / (1.0 + itheta * (S[None, :, :, None] / h[:, None, None, None]))).prod(axis=1)
    shares = [sorted(set(sh[m].tolist()) - {0.0}) for m in range(M)]
    pairs = [(i, m, share) for i, p in enumerate(live) for m, w in enumerate(waits[p])
             if w.no_wait() < 1.0 for share in shares[m]]
    if pairs:
        row = np.array([live[i] * M + m for i, m, _ in pairs])
        mean_phase = np.array([share for _, _, share in pairs]) * inv[row] \
            / h[[i for i, _, _ in pairs]]
        z = 1.0 / (1.0 + itheta * mean_phase[:, None])  # one phase of each wait
        pg = _horner(coef[row].reshape(len(pairs), blocks, s), z)
        if offset[row].any():
            pg *= z ** offset[row][:, None]
        pg = np.concatenate([pg, np.ones((1, pg.shape[1]), dtype=complex)])
        # which row of pg each (set, tier, class) meets; the last row, ones: no wait
        at = {(i, m, share): j for j, (i, m, share) in enumerate(pairs)}
        shl = sh.tolist()
        rows = [[[at.get((i, m, shl[m][c]), len(pairs)) for c in range(C)] for m in range(M)]
                for i in range(live.size)]
        phi *= pg[np.array(rows)].prod(axis=1)
    # the triangular kernel once, and the window's start moved to lattice point 0 (the
    # shift theorem: lattice point start + i lands at i)
    phi *= _sinc2(grid) * np.exp(start[:, None] * itheta)[:, None, :]
    mass = np.maximum(np.fft.irfft(phi, n=grid, axis=2), 0.0)
    cdf = np.zeros((live.size, C, grid + 1))             # cdf[.., i + 1] = F((start + i + 1/2) h)
    np.cumsum(mass, axis=2, out=cdf[..., 1:])
    cdf /= cdf[..., -1:]
    # the quantile linear between lattice points (from (start - 1/2) h, clipped at 0)
    x = np.maximum((start[:, None] + _half_steps(grid)) * h[:, None], 0.0)
    for i, p in enumerate(live):
        for c in range(C):
            q[p, c] = np.interp(levels, cdf[i, c], x[i])
    return q, means


@functools.lru_cache(maxsize=8)
def _half_steps(size: int) -> np.ndarray:
    """``-1/2, 1/2, .., size - 1/2``: the lattice's points ``x[i + 1] = (i + 1/2)`` steps
    after the window's start, ``x[0]`` where its cumulative is 0."""
    out = np.arange(size + 1, dtype=float) - 0.5
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=8)
def _itheta(size: int) -> np.ndarray:
    """``i theta_k = 2 pi i k / size``, ``k = 0..size/2``: ``w h`` at the lattice's
    frequencies."""
    out = 2j * np.pi * np.arange(size // 2 + 1) / size
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=8)
def _sinc2(size: int) -> np.ndarray:
    """The transform of the triangular kernel at the lattice's frequencies,
    ``(sin(theta_k / 2) / (theta_k / 2))^2``."""
    out = np.sinc(np.arange(size // 2 + 1) / size) ** 2
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=64)
def _k_k2(width: int) -> np.ndarray:
    """``(width, 2)``: ``k`` and ``k^2``, ``k = 0..width-1``."""
    k = np.arange(width, dtype=float)
    out = np.column_stack([k, k * k])
    out.setflags(write=False)
    return out
