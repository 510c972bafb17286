"""The flow-equivalent server (FES) of the exponential part, in log space.

The think station and the exponential tiers form a product-form network. Its normalising
constants ``G_E(k), k = 0..N`` are computed in log space by convolving the stations' weights
``f_m(j) = S_m^j / prod_{i<=j} min(i, c_m)`` (a ``c_m + 1``-tap head and a geometric tail, so
``O(N c_m)`` per tier) onto the delay's ``Z^k / k!``; its throughput with ``k`` users is
``X_E(k) = G_E(k-1) / G_E(k)`` (Chandy-Herzog-Woo). A bursty tier enters the rest of the
network seen by another one as a load-dependent station with weights
``f_b(j) = prod_{i<=j} 1/nu_b(i)`` (:func:`ld_weights`), and an exponential tier's mean
queue given ``k`` users is ``d log G_rest(k) / d log S_m`` (:func:`conditional_queue`).
Against a bursty tier this is the approximation of the decomposition: the FES assumes the rest
of the network equilibrates at each population faster than the bursty tier moves.

Long convolutions go in scaled linear space (:func:`_head_linear`): a bursty tier's weights
run to thousands of jobs, and a log-sum-exp over every term costs ``N h`` exponentials.
Tilting by ``e^{-theta k}`` (``g(i) f(j) = e^{theta k} g(i) e^{-theta i} f(j) e^{-theta j}``
for ``i + j = k``) and scaling every factor to at most 1 makes a block of outputs one
``numpy.convolve`` of non-negative terms (no cancellation, unlike an FFT); an output whose
scaled sum is below :data:`_UNDERFLOW` (terms may have underflowed) is recomputed in a smaller
block, down to :data:`_SMALLEST_BLOCK` outputs in log space. Taps go by chunks of
:data:`TAP_CHUNK` because where ``nu_b`` falls the weights are log-convex and no one scaling
holds thousands of taps.

``log G_E(k)`` and the exponential tiers' ``E[n_m | k]`` do not depend on ``N`` at a given
``k`` (log-space convolutions per output, running sums), so a capacity search's probes share
them through a :class:`solvers.decomposition.memo.SolveMemo` (:func:`shared_prefix`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
from scipy.special import gammaln

from solvers.decomposition.memo import Memo


_EPS = 1e-4          # relative step of the central differences d log G / d log S_m
_NEG_INF = -math.inf
_CONVOLVE_CELLS = 1 << 20     # terms per block of a head convolution (memory bound, 8 MiB)


def _log_delay(N: int, Z: float) -> np.ndarray:
    """``log G(k)`` of the think station alone: ``Z^k / k!`` (``Z = 0``: only ``k = 0``)."""
    k = np.arange(N + 1, dtype=float)
    if Z > 0:
        return k * math.log(Z) - gammaln(k + 1)
    out = np.full(N + 1, _NEG_INF)
    out[0] = 0.0
    return out


def _geometric(lg: np.ndarray, lratio: float) -> np.ndarray:
    """``log S(k)``, ``S(k) = sum_{i>=0} r^i g(k - i)`` (``log r = lratio``)."""
    k = np.arange(lg.shape[0], dtype=float)
    with np.errstate(invalid="ignore"):
        shifted = np.where(np.isfinite(lg), lg - k * lratio, _NEG_INF)
    return k * lratio + np.logaddexp.accumulate(shifted)


def _shift(la: np.ndarray, by: int) -> np.ndarray:
    """``la(k - by)``, ``-inf`` where ``k < by``."""
    out = np.full_like(la, _NEG_INF)
    if by < la.shape[0]:
        out[by:] = la[: la.shape[0] - by]
    return out


def _convolve(lg: np.ndarray, lhead: np.ndarray, lratio: float | None) -> np.ndarray:
    """``log (g * f)(k)``, ``k = 0..N``, for a station whose weights are ``f(j) = e^{lhead[j]}``
    for ``j <= h`` and ``f(h) r^{j-h}`` beyond (``log r = lratio``; ``None``: 0 beyond ``h``).

    The head is a ``(h + 1)``-tap filter (:func:`head_convolution`); the tail is
    ``f(h) r S(k - h - 1)`` with ``S`` the geometric sum of :func:`_geometric`. Every term is
    non-negative, so nothing cancels."""
    N = lg.shape[0] - 1
    taps = min(lhead.shape[0] - 1, N)
    head = head_convolution(lg, lhead[: taps + 1])
    h = lhead.shape[0] - 1
    if lratio is None or h >= N:
        return head
    tail = lhead[h] + lratio + _shift(_geometric(lg, lratio), h + 1)
    return np.logaddexp(head, tail)


#: a head of at most this many taps is convolved in log space (cheap); a longer one (a bursty
#: tier's load-dependent weights run to thousands of jobs) in linear space, :func:`_head_linear`
LOG_SPACE_TAPS = 64
#: outputs of a linear-space block smaller than this, after the block's scaling, are recomputed
#: in smaller blocks (the terms lost to underflow, each < 1e-308, are then < 1e-50 of them)
_UNDERFLOW = 1e-250
_SMALLEST_BLOCK = 32
#: taps convolved together in linear space (a bursty tier's log-weights are convex where its
#: conditional throughput falls: across thousands of taps no one scaling holds every term)
TAP_CHUNK = 256


def head_convolution(lg: np.ndarray, lh: np.ndarray) -> np.ndarray:
    """``log sum_{j <= h} exp(lh[j] + lg[k - j])``, ``k = 0..N``. A long head by chunks of
    :data:`TAP_CHUNK` taps, each by blocks of outputs in linear space (:func:`_head_linear`);
    a block's outputs it cannot resolve are split into smaller blocks, down to
    :data:`_SMALLEST_BLOCK` outputs solved in log space."""
    N = lg.shape[0] - 1
    if lh.shape[0] <= LOG_SPACE_TAPS:
        return head_log(lg, lh, 0, N + 1)
    if lh.shape[0] > TAP_CHUNK:                 # a sum over chunks of taps, each shifted
        parts = [_shift(head_convolution(lg, lh[j0: j0 + TAP_CHUNK]), j0)
                 for j0 in range(0, lh.shape[0], TAP_CHUNK)]
        return np.logaddexp.reduce(np.array(parts), axis=0)
    out = np.empty(N + 1)
    pending = [(0, N + 1)]
    while pending:
        k0, k1 = pending.pop()
        if k1 - k0 <= _SMALLEST_BLOCK:
            out[k0:k1] = head_log(lg, lh, k0, k1)
            continue
        got = _head_linear(lg, lh, k0, k1)
        out[k0:k1] = got
        bad = np.isnan(got)
        if bad.all():
            mid = (k0 + k1) // 2
            pending += [(k0, mid), (mid, k1)]
            continue
        edges = np.flatnonzero(np.diff(np.concatenate([[0], bad.view(np.int8), [0]])))
        pending += [(k0 + a, k0 + b) for a, b in zip(edges[::2], edges[1::2])]
    return out


def head_log(lg: np.ndarray, lh: np.ndarray, k0: int, k1: int) -> np.ndarray:
    """:func:`head_convolution` for outputs ``k0..k1-1`` by a log-sum-exp over each output's
    terms."""
    taps = lh.shape[0] - 1
    padded = np.concatenate([np.full(taps, _NEG_INF), lg])
    windows = np.lib.stride_tricks.sliding_window_view(padded, taps + 1)[k0:k1]
    rows = max(1, _CONVOLVE_CELLS // (taps + 1))
    return np.concatenate([_logsumexp_rows(windows[k: k + rows] + lh[::-1][None, :])
                           for k in range(0, k1 - k0, rows)])  # term (k, j) = f(j) g(k - j)


def _head_linear(lg: np.ndarray, lh: np.ndarray, k0: int, k1: int) -> np.ndarray:
    """:func:`head_convolution` for outputs ``k0..k1-1`` as one linear-space convolution, ``NaN``
    where it cannot be trusted. ``g(i) f(j) = e^{theta k} [g(i) e^{-theta i}] [f(j) e^{-theta j}]``
    for ``i + j = k``: tilted by the slope ``theta`` of ``log g`` where the middle output's largest
    term lies (found in log space), so the terms near that output are of one size, and each
    factor scaled to at most 1 (nothing overflows). Every term is non-negative, so the sum of
    those kept is exact to rounding; a term lost to underflow is below 1e-308, so an output
    whose scaled sum is at least :data:`_UNDERFLOW` is exact to 1e-50; the others are
    ``NaN``."""
    taps = lh.shape[0] - 1
    kc = (k0 + k1 - 1) // 2
    j = np.arange(min(taps, kc) + 1)
    t = lh[j] + lg[kc - j]
    if not np.isfinite(t.max()):
        return np.full(k1 - k0, np.nan)
    js = int(np.argmax(t))
    i = kc - js
    lo = max(k0 - taps, 0)
    near = lg[max(i - 1, 0): i + 2]
    theta = float((near[-1] - near[0]) / (near.shape[0] - 1)) if np.all(np.isfinite(near)) \
        else 0.0
    a = lg[lo:k1] - theta * np.arange(lo, k1)
    b = lh - theta * np.arange(taps + 1)
    sa, sb = float(np.max(a)), float(np.max(b))      # every factor <= 1: nothing overflows
    with np.errstate(under="ignore"):
        s = np.convolve(np.exp(a - sa), np.exp(b - sb))[k0 - lo: k1 - lo]
    ok = np.isfinite(s) & (s >= _UNDERFLOW)
    k = np.arange(k0, k1)
    return np.where(ok, np.log(np.where(ok, s, 1.0)) + sa + sb + theta * k, np.nan)


def _logsumexp_rows(terms: np.ndarray) -> np.ndarray:
    """``log sum_j exp(terms[k, j])`` per row (``-inf`` for a row of ``-inf``)."""
    top = terms.max(axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", under="ignore"):
        return safe + np.log(np.exp(terms - safe[:, None]).sum(axis=1))


def _exponential_weights(mean: float, cores: int, N: int) -> tuple[np.ndarray, float]:
    """Head and tail ratio of ``f(j) = S^j / prod_{i<=j} min(i, c)``."""
    j = np.arange(min(cores, N) + 1, dtype=float)
    return j * math.log(mean) - gammaln(j + 1), math.log(mean / cores)


def ld_weights(nu: np.ndarray, N: int) -> tuple[np.ndarray, float | None]:
    """Head and tail of ``f(j) = prod_{i<=j} 1/nu(i)`` (``nu[0]`` unused): exact, the head
    running to where ``nu`` becomes constant (beyond the levels its chain resolved,
    :func:`_fill`), so the geometric tail ``1/nu(N)`` is exact too."""
    lf = np.concatenate([[0.0], -np.cumsum(np.log(nu[1:]))])
    moving = np.flatnonzero(np.abs(nu[1:] - nu[-1]) > 1e-12 * nu[-1])
    h = int(moving[-1]) + 2 if moving.size else 1
    if h >= N:
        return lf, None
    return lf[: h + 1], float(-math.log(nu[-1]))


def log_g_exponential(means: np.ndarray, cores: Sequence[int], tiers: Sequence[int], N: int,
                      Z: float) -> np.ndarray:
    """``log G_E(k)``, ``k = 0..N``, of the think station and the exponential ``tiers``."""
    lg = _log_delay(N, Z)
    for m in tiers:
        lg = _convolve(lg, *_exponential_weights(means[m], cores[m], N))
    return lg


def throughput_ratio(lg: np.ndarray) -> np.ndarray:
    """``X(k) = G(k-1)/G(k)`` for ``k = 1..N`` (index ``k``; ``X(0) = 0``)."""
    out = np.zeros(lg.shape[0])
    with np.errstate(invalid="ignore"):
        out[1:] = np.exp(lg[:-1] - lg[1:])
    return np.nan_to_num(out, nan=0.0, posinf=0.0)


def rest_log_g(lg_e: np.ndarray, weights: dict[int, tuple[np.ndarray, float | None]],
               skip: int | None) -> np.ndarray:
    """``log G`` of the exponential tiers (``lg_e``) convolved with every bursty tier's weights
    but ``skip``'s: the rest of the network as one tier ``skip`` sees it."""
    lg = lg_e
    for b, (head, lratio) in weights.items():
        if b != skip:
            lg = _convolve(lg, head, lratio)
    return lg


def rest_arrivals(lg_rest: np.ndarray, held: float = 0.0) -> np.ndarray:
    """``lam[n] = X_rest(N - n - held)``: the rest's throughput with the users neither at the
    tier nor ``held`` in the waves downstream of the bursty tiers (:func:`wave_queues`;
    linear between populations)."""
    ratio = throughput_ratio(lg_rest)
    if held <= 0:
        return ratio[::-1].copy()
    N = lg_rest.shape[0] - 1
    k = np.arange(N + 1, dtype=float)
    return np.interp(N - k - held, k, ratio, left=0.0)

_PREFIX_AHEAD = 1.25


def shared_prefix(prefixes: Memo, key: tuple[Any, ...], N: int,
                  compute: Callable[[int], np.ndarray], tier_cores: list[int]) -> np.ndarray:
    """``compute(N)`` (an array over ``k = 0..N`` whose entries do not depend on ``N``: log
    ``G_E(k)``, ``E[n_m | k users]``; every convolution of heads up to LOG_SPACE_TAPS taps is
    done per output, in log space, and the geometric tails are running sums) from
    ``prefixes`` (:class:`SolveMemo`): the first ``N + 1`` entries of a computation at a
    larger ``N``, read only. Not kept when a tier's head has more than
    :data:`LOG_SPACE_TAPS` taps (the linear-space blocks of :func:`_head_linear` are scaled by
    the range)."""
    if any(c + 1 > LOG_SPACE_TAPS for c in tier_cores):
        return compute(N)
    hit = prefixes.get(key)
    if hit is None or hit.shape[0] <= N:
        hit = compute(int(math.ceil(_PREFIX_AHEAD * N)))
        hit.setflags(write=False)
        prefixes.put(key, hit)
    return hit[: N + 1]


def conditional_queue(means: np.ndarray, cores: tuple[int, ...], expo: list[int], N: int,
                      Z: float, m: int,
                      others: dict[int, tuple[np.ndarray, float | None]]) -> np.ndarray:
    """``E[n_m | k users in the rest]``, ``k = 0..N``, for exponential tier ``m`` of the rest
    (think station, exponential tiers, the bursty tiers in ``others`` as load-dependent
    stations): ``d log G_rest(k) / d log S_m`` by a central difference, the rest without ``m``
    convolved once."""
    without = rest_log_g(log_g_exponential(means, cores, [e for e in expo if e != m], N, Z),
                         others, None)
    sides = [_convolve(without, *_exponential_weights(means[m] * f, cores[m], N))
             for f in (1.0 + _EPS, 1.0 - _EPS)]
    with np.errstate(invalid="ignore"):
        q = (sides[0] - sides[1]) / (math.log1p(_EPS) - math.log1p(-_EPS))
    return np.clip(np.nan_to_num(q, nan=0.0), 0.0, None)
