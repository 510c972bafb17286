"""Quantiles of the end-to-end law of exponential FCFS tiers on a lattice that covers only the law.

:func:`~solvers.response_time.sojourn.end_to_end` puts the law on 1,024 points from 0 to the
mean plus ``SPAN`` standard deviations, every exponential phase discretised with the triangular
kernel. Two things cost it accuracy and time near and past the knee, where a response time is
the sum of hundreds of phases: most of its points lie below the law, which sits many standard
deviations from 0; and each phase's kernel adds up to ``h^2 / 6`` (``h / rate`` for a phase
shorter than the step) to the variance, so a wait of ``K`` phases carries ``K`` times that --
up to 4.5% off at p99.9 on docs/accuracy.md's systems at 1.5-3 knees.

**The window.** The lattice covers ``[mean - BELOW sd, mean + SPAN sd]`` (from 0 when that is
below 0) with :data:`WINDOW_GRID` points. The transform is computed as on a lattice from 0 and
multiplied by ``e^{i theta_k start}`` (the shift theorem): the inverse then has the window's
first point at index 0, the mass outside the window (below ``1e-5`` for these laws' tails,
far less below it) wrapping around.

**The waits' phases sampled.** A wait's transform is ``E[z^K]`` at one phase's transform
``z``; here ``z = 1 / (1 + i w / rate)``, the phase's characteristic function at the lattice's
frequencies ``w = theta_k / h``, instead of its kernel's: the inverse is then the law's density
sampled on the lattice and aliased (the Fourier-series method, Abate and Whitt 1992), with no
error growing with ``K``. The sampled transform's error is its aliases', small where the law's
density is smooth: every class's services keep the kernel (at most one phase per tier, their
exact lattice masses), and two services or more damp what the waits alias. A class whose law
has more than :data:`JUMP` of its mass in parts of at most one phase (one tier served, and no
wait there; its density jumps at 0, as an M/M/1 sojourn's) keeps the kernel for its waits too,
on twice the points: sampled, such a law's tail is off by up to 60% at p99.9 (M/M/1 at 95%
load); on the kernel, within 0.2%.

Against a 32,768-point long lattice, at p50-p99.9 on docs/accuracy.md's systems (a)-(d) at
0.05-3 knees: within 0.15% (the 1,024-point long lattice: within 4.5%); the M/M/1 and M/M/c
sojourns' closed forms within 0.2% (tests). The moments that place the window are the long
lattice's closed forms (a compound of exponential phases: ``Var = (E[K] + Var K) / rate^2``),
for every wait in one matrix product; the quantiles are read as there, linear between lattice
points.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .sojourn import SPAN, TierWait, horner

__all__ = ["WINDOW_GRID", "BELOW", "window_quantiles", "stacked_window_quantiles"]

#: lattice points of the window
WINDOW_GRID = 256
#: the window starts this many standard deviations below the mean (at 0 if that is below)
BELOW = 8.0
#: a law with more than this mass in parts of at most one phase has its waits' phases on
#: the triangular kernel
JUMP = 1e-3
#: up to this many classes the windows are placed in Python floats, beyond in array steps
SCALAR_CLASSES = 4


def window_quantiles(waits: list[list[TierWait]], S: np.ndarray, sh: np.ndarray,
                     levels: np.ndarray, grid: int = WINDOW_GRID
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(P, C, L)`` quantiles at ``levels`` and ``(P, C)`` means of the law of
    ``sum_m (sh[m, c] W_m + S[m, c])`` for each set ``waits[p]`` (one wait per tier; the
    tiers independent, :mod:`~solvers.response_time.sojourn`), each set on its own window
    (module docstring). ``S[m, c]`` the mean of class ``c``'s exponential service at tier
    ``m`` (0: none), ``sh[m, c]`` the factor on the tier's wait the class meets."""
    flat = [w for ws in waits for w in ws]
    coef = np.zeros((len(flat), max((w.pmf.shape[0] for w in flat), default=1)))
    for t, w in enumerate(flat):
        coef[t, :w.pmf.shape[0]] = w.pmf
    return stacked_window_quantiles(coef, np.array([w.offset for w in flat], dtype=float),
                                    np.array([1.0 / w.rate for w in flat]), len(waits), S, sh,
                                    levels, grid)


def stacked_window_quantiles(coef: np.ndarray, offset: np.ndarray, inv: np.ndarray, P: int,
                             S: np.ndarray, sh: np.ndarray, levels: np.ndarray,
                             grid: int = WINDOW_GRID) -> tuple[np.ndarray, np.ndarray]:
    """:func:`window_quantiles` on the waits stacked, row ``p M + m`` set ``p``'s wait at
    tier ``m``: ``P(K = offset[r] + i) = coef[r, i]`` phases of mean ``inv[r]`` (0: no
    wait) -- the arrival law's found laws go in as one array
    (:func:`~solvers.response_time.response_time_quantiles_many`), with no wait object per
    tier and population."""
    M, C = S.shape
    q = np.zeros((P, C, levels.shape[0]))
    width = coef.shape[1]
    s = max(int(math.ceil(math.sqrt(width))), 1)      # the blocked Horner's block
    blocks = -(-width // s)
    means, lo_l, hi_l = _placement(coef @ _k_k2(width), offset, inv, P, S, sh)
    if not C:
        return q, means
    live_l = [p for p in range(P) if hi_l[p] > 0]
    if not live_l:
        return q, means
    live = np.array(live_l)
    I = live.size
    # a class's waits meet one phase transform each: the sampled one, unless the class's law
    # has a part of one phase or none (its density jumps at 0: module docstring), then the
    # kernel's, on twice the points (the kernel's error is its step's)
    positive = S > 0
    served = positive.sum(axis=0).tolist()
    nowait_all = np.where(offset == 0, coef[:, 0], 0.0)
    kernel = None
    if min(served) < 2:                          # two services or more: never a jump
        nowait, one = nowait_all.tolist(), _one_phase(coef, offset).tolist()
        shl = sh.T.tolist()                      # [c][m]
        kernel = np.array([[_jumps(nowait[p * M:(p + 1) * M], one[p * M:(p + 1) * M],
                                   [m for m in range(M) if shl[c][m] > 0], served[c])
                            for c in range(C)] for p in live_l])
        if kernel.any():
            grid *= 2
        else:
            kernel = None
    h_l = [(hi_l[p] - lo_l[p]) / (grid - 1) for p in live_l]
    h = np.array(h_l)
    start = np.array([math.floor(lo_l[p] / x) for p, x in zip(live_l, h_l)], dtype=float)
    # the waits: one row per (set, tier, share, transform) that some class meets
    live_rows = (live[:, None] * M + np.arange(M)).ravel()              # (I M,)
    waits = nowait_all[live_rows].reshape(I, M) < 1.0                   # someone may wait
    meets = (sh[None, :, :] > 0) & waits[:, :, None]
    # every class meets the same waits (one class, or the same share of each tier's wait
    # and one phase transform for all): the waits' product is one per set, shared by the
    # classes -- only a class's own services differ
    shared = C == 1 or (kernel is None and bool((sh == sh[:, :1]).all()))
    if shared:
        ii, mm = np.nonzero(meets[:, :, 0])
    else:
        ii, mm, cc = np.nonzero(meets)
    itheta = _itheta(grid)
    # the services: the triangular kernel's exact lattice transform (1: no service), their
    # product per class
    everywhere = min(served) == M
    rate = 1.0 / S if everywhere else 1.0 / np.where(positive, S, 1.0)
    phi = _kernel_transform((h[:, None, None] * rate).reshape(-1, 1), grid
                            ).reshape(I, M, C, -1)
    if not everywhere:
        phi = np.where(positive[None, :, :, None], phi, 1.0)
    phi = phi.prod(axis=1)
    if ii.size:
        if shared:                               # every (set, tier) row its own
            u_i, u_m, share = ii, mm, sh[mm, 0]
            use = None if kernel is None else kernel[ii, 0]
        elif kernel is None:
            # one row per (set, tier, share): a tier's shares told apart once, for every set
            u_i, u_m, share, use, index = _share_rows(waits, sh)
        else:
            keys: dict[tuple[int, int, float, bool], int] = {}
            at = [keys.setdefault(key, len(keys)) for key in zip(
                ii.tolist(), mm.tolist(), sh[mm, cc].tolist(), kernel[ii, cc].tolist())]
            u_i, u_m, share, use = (np.array(v) for v in zip(*keys))
            index = np.full((I, M, C), len(keys))
            index[ii, mm, cc] = at
        row = live[u_i] * M + u_m
        mean_phase = share * inv[row] / h[u_i]
        z = 1.0 / (1.0 + itheta * mean_phase[:, None])        # one phase, sampled
        if use is not None and use.any():
            z[use] = _kernel_transform(1.0 / mean_phase[use, None], grid)
        padded = np.zeros((row.shape[0], blocks * s))
        padded[:, :width] = coef[row]
        pg = horner(padded.reshape(row.shape[0], blocks, s), z)
        if offset[row].any():
            pg *= z ** offset[row][:, None]
        if shared:                               # one product per set, for every class
            if ii.size < I * M:                  # a tier's wait not met: 1 there
                met = np.ones((I, M, itheta.shape[0]), dtype=complex)
                met[ii, mm] = pg
                pg = met
            phi *= pg.reshape(I, M, -1).prod(axis=1)[:, None, :]
        else:                                    # each class's waits, tier by tier
            table = np.ones((pg.shape[0] + 1, pg.shape[1]), dtype=complex)
            table[:-1] = pg                      # its last row: a wait not met
            product = table[index[:, 0]]
            for m in range(1, M):
                product *= table[index[:, m]]
            phi *= product
    # the window's start moved to lattice point 0 (the shift theorem: lattice point
    # start + i lands at i)
    phi *= np.exp(start[:, None] * itheta)[:, None, :]
    mass = np.fft.irfft(phi, n=grid, axis=2)
    np.maximum(mass, 0.0, out=mass)
    cdf = np.zeros((I, C, grid + 1))             # cdf[.., i + 1] = F((start + i + 1/2) h)
    np.cumsum(mass, axis=2, out=cdf[..., 1:])
    cdf /= cdf[..., -1:]
    # the quantile linear between lattice points (from (start - 1/2) h, clipped at 0): every
    # law's cumulative lifted by twice its row's number, all read by one interpolation
    x = np.maximum((start[:, None] + _half_steps(grid)) * h[:, None], 0.0)
    lift = 2.0 * np.arange(I * C, dtype=float)
    cdf = cdf.reshape(I * C, grid + 1)
    cdf += lift[:, None]
    q[live] = np.interp((lift[:, None] + levels).ravel(), cdf.ravel(),
                        np.repeat(x, C, axis=0).ravel()).reshape(I, C, -1)
    return q, means


def _share_rows(met: np.ndarray, sh: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, None, np.ndarray]:
    """The waits' rows where every class meets its waits' phases sampled: one per live set
    ``i``, tier ``m`` whose wait someone meets (``met[i, m]``) and distinct share ``sh[m, c]
    > 0`` -- ``(u_i, u_m, share, None, index)``, ``index[i, m, c]`` the row class ``c`` meets
    at tier ``m`` in set ``i`` (the number of rows where it meets none). A tier's shares
    are told apart once, not once per set."""
    I, M = met.shape
    C = sh.shape[1]
    slots, distinct = [], []                     # per tier: each class's share's slot
    for shares in sh.tolist():
        seen: dict[float, int] = {}
        slots.append([seen.setdefault(x, len(seen)) if x > 0 else -1 for x in shares])
        distinct.append(list(seen))
    u_i: list[int] = []
    u_m: list[int] = []
    share: list[float] = []
    first = np.full((I, M), -1)
    for i, row in enumerate(met.tolist()):
        for m, on in enumerate(row):
            if on and distinct[m]:
                first[i, m] = len(share)
                u_i += [i] * len(distinct[m])
                u_m += [m] * len(distinct[m])
                share += distinct[m]
    slot = np.array(slots)                                           # (M, C)
    index = first[:, :, None] + slot[None, :, :]
    index[(first[:, :, None] < 0) | (slot[None, :, :] < 0)] = len(share)
    return np.array(u_i), np.array(u_m), np.array(share), None, index


def _placement(m12: np.ndarray, offset: np.ndarray, inv: np.ndarray, P: int, S: np.ndarray,
               sh: np.ndarray) -> tuple[np.ndarray, list[float], list[float]]:
    """``(P, C)`` means and each set's window ``[lo, hi]`` (module docstring): the waits'
    moments (``m12[r]`` ``E[K]``, ``E[K^2]`` about ``offset[r]``; a compound of exponential
    phases, ``Var = (E[K] + Var K) inv^2``) scaled by each class's share, plus its services'.
    A few classes in Python floats (an array step costs more than the arithmetic on so few
    numbers), more in array steps (a pipeline's dozen classes: the loop costs more)."""
    M, C = S.shape
    if C > SCALAR_CLASSES:
        ek = offset + m12[:, 0]
        wmean = (ek * inv).reshape(P, M)
        wvar = ((ek + m12[:, 1] - m12[:, 0] * m12[:, 0]) * inv * inv).reshape(P, M)
        means = wmean @ sh + S.sum(axis=0)                                        # (P, C)
        sd = np.sqrt(np.maximum(wvar @ (sh * sh) + (S * S).sum(axis=0), 0.0))
        return (means, np.maximum(means - BELOW * sd, 0.0).min(axis=1).tolist(),
                (means + SPAN * sd).max(axis=1).tolist())
    wm_l, wv_l = [], []
    for (m1, m2), k0, a in zip(m12.tolist(), offset.tolist(), inv.tolist()):
        ek_r = k0 + m1
        wm_l.append(ek_r * a)
        wv_l.append((ek_r + m2 - m1 * m1) * a * a)
    Sl, shl = S.T.tolist(), sh.T.tolist()               # [c][m]
    means_l, lo_l, hi_l = [], [], []
    for p in range(P):
        wm, wv = wm_l[p * M:(p + 1) * M], wv_l[p * M:(p + 1) * M]
        mp, lo_p, hi_p = [], math.inf, -math.inf
        for Sc, shc in zip(Sl, shl):
            mean = sum(w * f for w, f in zip(wm, shc)) + sum(Sc)
            sd_c = math.sqrt(max(sum(v * f * f for v, f in zip(wv, shc))
                                 + sum(x * x for x in Sc), 0.0))
            mp.append(mean)
            lo_p, hi_p = min(lo_p, max(mean - BELOW * sd_c, 0.0)), max(hi_p, mean + SPAN * sd_c)
        means_l.append(mp)
        lo_l.append(lo_p)
        hi_l.append(hi_p)
    return np.array(means_l).reshape(P, C), lo_l, hi_l


def _kernel_transform(x: np.ndarray, size: int) -> np.ndarray:
    """``(R, size/2 + 1)``: the ``rfft`` of the triangular-kernel masses of exponentials of
    ``x = rate h`` steps a mean (``(R, 1)``): the masses are ``m_0 = 1 + (e^{-x} - 1)/x`` at 0
    and ``e^{-x(i-1)} (1 - e^{-x})^2 / x`` at ``i >= 1``, a geometric sequence whose transform
    is ``m_0 + (1 - r)^2 / x * w / (1 - r w)``, ``r = e^{-x}``, ``w = e^{-2 pi i k / size}``
    (:func:`~solvers.response_time.sojourn.phase_transform`, in fewer array steps:
    ``w / (1 - r w) = 1 / (conj(w) - r)`` on the unit circle, and that in real arithmetic,
    ``(cos - r - i sin) / ((cos - r)^2 + sin^2)``: no complex division, several times the
    cost of a product; the sum of squares loses no digit as ``r`` nears 1 at ``k = 0``)."""
    em1 = np.expm1(-x)
    cos, sin, sin2 = _trig_rows(size)
    d = cos - (1.0 + em1)                                           # cos - r
    t = (em1 * em1 / x) / (d * d + sin2)
    out = np.empty(d.shape, dtype=complex)
    parts = out.view(float).reshape(d.shape + (2,))
    np.multiply(d, t, out=parts[..., 0])
    parts[..., 0] += 1.0 + em1 / x
    np.multiply(t, sin, out=parts[..., 1])
    return out


@functools.lru_cache(maxsize=8)
def _trig_rows(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``cos``, ``-sin`` and ``sin^2`` of ``2 pi k / size``, ``k = 0..size/2``, as
    ``(1, size/2 + 1)`` rows: the real and imaginary parts of ``conj(w)``, its minus sign
    folded in (``1 / (conj(w) - r)`` has ``-sin`` on top)."""
    angle = 2.0 * np.pi * np.arange(size // 2 + 1) / size
    rows = (np.cos(angle)[None, :], -np.sin(angle)[None, :], np.sin(angle)[None, :] ** 2)
    for row in rows:
        row.setflags(write=False)
    return rows


@functools.lru_cache(maxsize=8)
def _half_steps(size: int) -> np.ndarray:
    """``-1/2, 1/2, .., size - 1/2``: the lattice's points ``x[i + 1] = (i + 1/2)`` steps
    after the window's start, ``x[0]`` where its cumulative is 0."""
    out = np.arange(size + 1, dtype=float) - 0.5
    out.setflags(write=False)
    return out


def _jumps(nowait: list[float], one: list[float], tiers: list[int], services: int) -> bool:
    """Whether a class's law (its waits at ``tiers``, ``P(K = 0)`` ``nowait[m]`` and
    ``P(K = 1)`` ``one[m]``; ``services`` exponential services) has more than :data:`JUMP` of
    its mass in parts of at most one phase: no wait and one service, or one wait phase and no
    service."""
    if services > 1:
        return False
    none = math.prod(nowait[m] for m in tiers)
    if services == 1:
        return none > JUMP
    once = sum(one[m] * math.prod(nowait[k] for k in tiers if k != m) for m in tiers)
    return none + once > JUMP


def _one_phase(coef: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """``P(K = 1)`` of each stacked wait."""
    i = 1 - offset.astype(int)
    inside = (i >= 0) & (i < coef.shape[1])
    return np.where(inside, coef[np.arange(coef.shape[0]), np.where(inside, i, 0)], 0.0)


@functools.lru_cache(maxsize=8)
def _itheta(size: int) -> np.ndarray:
    """``i theta_k = 2 pi i k / size``, ``k = 0..size/2``: ``w h`` at the lattice's
    frequencies."""
    out = 2j * np.pi * np.arange(size // 2 + 1) / size
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=64)
def _k_k2(width: int) -> np.ndarray:
    """``(width, 2)``: ``k`` and ``k^2``, ``k = 0..width-1``."""
    k = np.arange(width, dtype=float)
    out = np.column_stack([k, k * k])
    out.setflags(write=False)
    return out
