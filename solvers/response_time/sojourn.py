"""Sojourn times at exponential FCFS tiers and their end-to-end convolution.

**One tier** (``c`` cores, exponential service of mean ``D`` per request): a job that finds
``j`` jobs there starts service at once if ``j < c``; otherwise it waits for ``K = j - c + 1``
departures, each after an exponential time of rate ``c / D`` (``c`` busy cores: the minimum of
``c`` exponential services), then is served. Its wait is a mixture of Erlangs, ``K`` phases of
rate ``c / D`` with ``K``'s law from the jobs found (Kleinrock 1975, section 3.5, for M/M/c; in a
closed network the found law is the arrival theorem's, :mod:`solvers.response_time.arrival`), and
its sojourn that wait plus its own exponential service.

**End to end** the tiers' sojourns are added as if independent: the response time's law is the
convolution of the per-tier laws, each tier's from the marginal a job arriving there sees. Each
marginal is exact (arrival theorem), their joint law is not: in a closed network a job that found
a long queue at one tier tends to find short ones at the others (the jobs are there), so the
convolution over-states the spread. It is exact for one queueing tier; its cost near the knee is
measured against simulation in docs/accuracy.md.

**Numerics.** The convolution of Erlang mixtures has no compact closed form (its phase-type
representation grows with the population), so the law is computed on a lattice of ``GRID``
points of step ``h`` covering the mean plus ``SPAN`` standard deviations: every exponential
phase is discretised with the triangular kernel (the mass at ``i h`` is
``E[(1 - |X - i h| / h)^+]``, closed form for an exponential), which keeps every mean exact;
a tier's wait is ``P_K(phi(w))`` with ``P_K`` the generating function of ``K`` and ``phi`` the
discrete Fourier transform of one phase (closed form: the masses are geometric; Horner over ``K``'s
support), and the end-to-end law the product of the transforms, inverted once. Quantiles are read off the cumulative sums
(``F((i + 1/2) h)``, the kernel's continuity correction) by linear interpolation: the error is a
fraction of ``h`` (``(mean + 12 sd) / 1024``), far below the model's own. A fine grid is chosen
over inverting a Laplace transform numerically because one inverse transform gives every
quantile of a class at once, with no root-finding iterations.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TierWait", "tier_wait", "GridDistribution", "end_to_end", "end_to_end_many",
           "quantiles", "sojourn_cdf",
           "GRID", "SPAN"]

#: lattice points of the end-to-end law
GRID = 1024
#: bytes of the temporaries of one slice of :func:`_pgfs`' frequencies
WORKSPACE = 768 * 1024
#: the lattice covers the mean plus this many standard deviations (the mass beyond, which
#: wraps around to the start, is below ~1e-5 for the exponential-like tails of these laws)
SPAN = 12.0


@dataclass(frozen=True, eq=False)
class TierWait:
    """The wait at a tier: ``K`` exponential phases of rate ``rate``,
    ``P(K = offset + i) = pmf[i]`` (``K = 0``: no wait)."""

    rate: float
    offset: int
    pmf: np.ndarray

    @functools.cached_property
    def _moments(self) -> tuple[float, float]:
        """``E[K]``, ``Var K``."""
        k = self.offset + np.arange(self.pmf.shape[0])
        ek = float(self.pmf @ k)
        return ek, float(self.pmf @ (k - ek) ** 2)

    def mean(self, scale: float = 1.0) -> float:
        """Mean wait, each phase's mean multiplied by ``scale``."""
        return self._moments[0] * scale / self.rate if self.rate > 0 else 0.0

    def variance(self, scale: float = 1.0) -> float:
        """``Var = (E[K] + Var K) (scale / rate)^2`` (a compound of exponential phases)."""
        if not self.rate > 0:
            return 0.0
        ek, vk = self._moments
        return (ek + vk) * (scale / self.rate) ** 2

    def no_wait(self) -> float:
        """``P(K = 0)``."""
        return float(self.pmf[0]) if self.offset == 0 else 0.0


def tier_wait(found_offset: int, found_pmf: np.ndarray, demand: float,
              cores: float) -> TierWait:
    """The wait of a job that finds ``found_offset + i`` jobs with probability
    ``found_pmf[i]`` at a FCFS tier of ``cores`` exponential servers of mean ``demand``:
    ``K = max(j - c + 1, 0)`` phases of rate ``c / demand`` (module docstring); a delay
    (``cores`` infinite) or a tier without demand never waits."""
    p = np.asarray(found_pmf, dtype=float)
    if not (np.all(np.isfinite(p)) and np.all(p >= 0) and p.sum() > 0):
        raise ValueError(f"found_pmf: must be non-negative probabilities, got {p.tolist()[:8]}")
    if not (math.isfinite(demand) and demand >= 0):
        raise ValueError(f"demand: must be finite and >= 0, got {demand!r}")
    if not cores >= 1:
        raise ValueError(f"cores: must be >= 1 (inf: a delay), got {cores!r}")
    return tier_wait_checked(found_offset, p / p.sum(), demand, cores)


def tier_wait_checked(found_offset: int, p: np.ndarray, demand: float, cores: float) -> TierWait:
    """:func:`tier_wait` on a found law already checked and normalised (the arrival law's)."""
    if not math.isfinite(cores) or demand == 0:
        return TierWait(rate=math.inf, offset=0, pmf=np.ones(1))
    c = int(cores)
    if found_offset >= c - 1:                 # every job found waits: K = j - c + 1
        return TierWait(rate=c / demand, offset=found_offset - c + 1, pmf=p)
    j = found_offset + np.arange(p.shape[0])
    K = np.maximum(j - c + 1, 0)
    lo = int(K[0])
    pmf = np.bincount(K - lo, weights=p)
    return TierWait(rate=c / demand, offset=lo, pmf=pmf)


def sojourn_cdf(wait: TierWait, service_mean: float, t: np.ndarray) -> np.ndarray:
    """Closed-form ``P(W + S <= t)`` for one tier, ``S`` exponential of mean ``service_mean``
    and phases at least as fast as the service (``rate >= 1/service_mean``, as at a tier of
    ``c`` cores serving its own requests: ``rate = c / D``). With ``a = rate``, ``b = 1/S``:
    ``Erlang(k, a) * Exp(b)`` has ``F = G_k(a t) - e^{-b t} (a/(a-b))^k G_k((a-b) t)`` (``G_k``
    the regularised lower incomplete gamma), ``Erlang(k + 1, a)`` when ``a = b``. For tests
    and single tiers; :func:`end_to_end` for sums."""
    from scipy import special

    t = np.asarray(t, dtype=float)
    b = 1.0 / service_mean
    a = wait.rate
    out = np.zeros_like(t)
    for i, pk in enumerate(wait.pmf):
        k = wait.offset + i
        if pk == 0:
            continue
        if k == 0:
            out += pk * -np.expm1(-b * t)
        elif math.isclose(a, b, rel_tol=1e-12):
            out += pk * special.gammainc(k + 1, a * t)
        else:
            if a < b:
                raise ValueError(f"sojourn_cdf: phases slower than the service "
                                 f"(rate {a} < {b})")
            log_second = -b * t + k * math.log(a / (a - b)) \
                + np.log(np.maximum(special.gammainc(k, (a - b) * t), 1e-300))
            out += pk * (special.gammainc(k, a * t) - np.exp(log_second))
    return np.clip(out, 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class GridDistribution:
    """A response-time law on the lattice ``i h``: ``cdf[i] = F((i + 1/2) h)``."""

    h: float
    cdf: np.ndarray
    mean: float

    def quantile(self, q: float | np.ndarray) -> np.ndarray:
        """``F^{-1}(q)``, linear between lattice points; ``q`` in (0, 1)."""
        q = np.atleast_1d(np.asarray(q, dtype=float))
        if not np.all((q > 0) & (q < 1)):
            raise ValueError(f"q: quantile levels must lie in (0, 1), got {q.tolist()}")
        if self.h == 0:
            return np.zeros_like(q)
        t = (np.arange(self.cdf.shape[0]) + 0.5) * self.h
        x = np.concatenate([[0.0], t])
        y = np.concatenate([[0.0], self.cdf])
        y = np.maximum.accumulate(y)
        idx = np.searchsorted(y, q, side="left")
        idx = np.clip(idx, 1, y.shape[0] - 1)
        y0, y1 = y[idx - 1], y[idx]
        frac = np.divide(q - y0, y1 - y0, out=np.ones_like(q), where=y1 > y0)
        return x[idx - 1] + np.clip(frac, 0.0, 1.0) * (x[idx] - x[idx - 1])

    def at(self, t: float | np.ndarray) -> np.ndarray:
        """``F(t)`` by linear interpolation."""
        x = (np.arange(self.cdf.shape[0]) + 0.5) * self.h
        return np.interp(t, np.concatenate([[0.0], x]), np.concatenate([[0.0], self.cdf]))


def phase_transform(rate: np.ndarray, h: float | np.ndarray, size: int) -> np.ndarray:
    """The discrete Fourier transform (``rfft`` convention, length ``size``) of the
    triangular-kernel masses of exponentials of ``rate`` (``(K,)``) on ``i h``: the masses
    are ``1 + (e^{-x} - 1)/x`` at 0 and ``e^{-x(i-1)} (1 - e^{-x})^2 / x`` at ``i >= 1``
    (``x = rate h``; the second difference of ``E[(t - X)^+]`` over ``h``), a geometric
    sequence whose transform is closed form, ``m_0 + (1 - r)^2/x * w / (1 - r w)`` with
    ``r = e^{-x}``, ``w = e^{-2 pi i k / size}`` (the mass beyond the lattice wraps around:
    the lattice is wide enough that it is negligible). ``rate`` infinite: no time at all.
    ``h`` one step for all, or one per rate (the laws of several populations at once)."""
    rate = np.asarray(rate, dtype=float)[:, None]
    w, cos = unit_roots(size)
    finite = np.isfinite(rate)
    step = h if np.ndim(h) == 0 else np.asarray(h, dtype=float)[:, None]
    x = np.where(finite, rate * step, 1.0)
    em1 = np.expm1(-x)
    r = em1 + 1.0
    # w / (1 - r w) = (w - r) / |1 - r w|^2, |1 - r w|^2 = 1 - 2 r cos + r^2: real division
    scale = (em1 * em1 / x) / (1.0 + r * r - 2.0 * r * cos)
    # phi = (w - r) scale + m_0, its real and imaginary parts written apart: real arrays of
    # half the size instead of complex temporaries, the same operations on each part
    phi = np.empty(scale.shape, dtype=complex)
    parts = phi.view(float).reshape(*scale.shape, 2)
    re, im = parts[..., 0], parts[..., 1]
    np.subtract(w.real, r, out=re)
    re *= scale
    re += 1.0 + em1 / x
    np.multiply(w.imag, scale, out=im)
    phi[~finite[:, 0]] = 1.0
    return phi


@functools.lru_cache(maxsize=8)
def unit_roots(size: int) -> tuple[np.ndarray, np.ndarray]:
    """``w = e^{-2 pi i k / size}``, ``k = 0..size/2``, and ``cos(2 pi k / size)``, as
    ``(1, size/2 + 1)`` rows."""
    angle = 2.0 * np.pi * np.arange(size // 2 + 1) / size
    w = np.exp(-1j * angle)[None, :]
    cos = np.cos(angle)[None, :]
    w.setflags(write=False)
    cos.setflags(write=False)
    return w, cos


def pgf(wait: TierWait, z: np.ndarray) -> np.ndarray:
    """``E[z^K]`` of one wait at the points ``z`` (:func:`_pgfs`)."""
    return _pgfs([wait], z[None, :])[0]


def real_times_complex(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for a real ``a`` and a C-contiguous complex ``b``: ``b`` read as interleaved
    real pairs, one real matrix product (BLAS) -- ``b.real`` and ``b.imag`` are strided views,
    which ``matmul`` multiplies without BLAS, several times slower, and casting ``a`` to
    complex doubles the work."""
    b = np.ascontiguousarray(b)
    out = np.matmul(a, b.view(float))                     # (..., n, 2 k)
    return out.view(complex)


def _pgfs(waits: list[TierWait], z: np.ndarray) -> np.ndarray:
    """``(T, F)``: ``E[z_t^{K_t}]`` of ``waits[t]`` at the row ``z[t]`` -- :func:`pgf` for
    all of them at once: one blocked Horner (``s ~ sqrt`` of the longest support) over the
    stacked coefficients, shorter supports padded with zeros. Each array step covers every
    wait: ``2 sqrt(L)`` steps a law instead of ``2 sqrt(L)`` per tier."""
    T = len(waits)
    L = max(w.pmf.shape[0] for w in waits)
    s = max(int(math.ceil(math.sqrt(L))), 1)
    B = -(-L // s)
    coef = np.zeros((T, B * s))
    for t, w in enumerate(waits):
        coef[t, :w.pmf.shape[0]] = w.pmf
    coef = coef.reshape(T, B, s)
    F = z.shape[1]
    # the frequencies in slices whose powers and blocks (16 bytes a number each) stay
    # within WORKSPACE: larger temporaries, freed after every law, are handed back to the
    # operating system by the allocator and faulted in anew at the next law
    pieces = -(-16 * T * (s + B) * F // WORKSPACE)
    if pieces <= 1:
        acc = horner(coef, z)
    else:
        acc = np.empty((T, F), dtype=complex)
        edges = np.linspace(0, F, pieces + 1).astype(int)
        for lo, hi in zip(edges[:-1], edges[1:]):
            acc[:, lo:hi] = horner(coef, np.ascontiguousarray(z[:, lo:hi]))
    offsets = np.array([w.offset for w in waits])
    if offsets.any():
        acc *= z ** offsets[:, None]
    return acc


def horner(coef: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``sum_k coef[t, k // s, k % s] z[t]^k`` ``(T, F)``: the blocked Horner of
    :func:`_pgfs` (``coef`` ``(T, B, s)``)."""
    T, B, s = coef.shape
    powers = np.empty((T, s, z.shape[1]), dtype=complex)
    powers[:, 0] = 1.0
    for i in range(1, s):
        np.multiply(powers[:, i - 1], z, out=powers[:, i])
    blocks = real_times_complex(coef, powers)                           # (T, B, F)
    step = powers[:, -1] * z                              # z^s
    acc = blocks[:, -1].copy()
    for b in range(B - 2, -1, -1):
        acc *= step
        acc += blocks[:, b]
    return acc


def end_to_end(waits: list[TierWait], services: np.ndarray, shares: np.ndarray | None = None,
               *, grid: int = GRID) -> list[GridDistribution]:
    """Per class, the law of ``sum_m (shares[m, c] W_m + S_{m,c})`` with the tiers
    independent (module docstring): ``waits`` per tier, ``services[m, c]`` the mean of the
    class's exponential service at the tier (0: none), ``shares[m, c]`` the factor on the
    tier's wait a class-``c`` request meets (default 1). One lattice for all classes; the
    transform of a tier's wait is shared by the classes with the same share."""
    S, sh = checked_services(len(waits), services, shares)
    [(h, cdf, means)] = wait_laws([waits], S, sh, grid)
    return [GridDistribution(h=h, cdf=cdf[c], mean=float(means[c])) for c in range(S.shape[1])]


def end_to_end_many(waits: list[list[TierWait]], services: np.ndarray,
                    shares: np.ndarray | None = None, *, grid: int = GRID,
                    extra: list[list[Any]] | None = None) -> list[list[GridDistribution]]:
    """:func:`end_to_end` for several sets of waits of one network (its populations): each
    its own lattice, all transformed, multiplied and inverted together -- the array steps of
    one law carry them all. ``extra[p]``: per-class laws of set ``p`` added to it (the
    processor-sharing tiers' sojourns, :mod:`~solvers.response_time.ps`)."""
    S, sh = checked_services(len(waits[0]) if waits else 0, services, shares)
    if any(len(w) != S.shape[0] for w in waits):
        raise ValueError(f"waits: one per tier ({S.shape[0]}) in every set, got "
                         f"{[len(w) for w in waits]}")
    return [[GridDistribution(h=h, cdf=cdf[c], mean=float(means[c]))
             for c in range(S.shape[1])] for h, cdf, means in wait_laws(waits, S, sh, grid, extra)]


def checked_services(M: int, services: np.ndarray, shares: np.ndarray | None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``services`` as an ``(M, C)`` array of finite demands >= 0 and ``shares`` (ones when
    ``None``) of the same shape; ``ValueError`` naming the field otherwise."""
    S = np.atleast_2d(np.asarray(services, dtype=float))
    if S.shape[0] != M:
        raise ValueError(f"waits: one per tier ({S.shape[0]}), got {M}")
    if S.size and not (S.min() >= 0 and math.isfinite(S.max())):     # NaN fails the first
        raise ValueError(f"services: must be finite and >= 0, got {S.tolist()}")
    sh = np.ones(S.shape) if shares is None else np.asarray(shares, dtype=float).reshape(
        S.shape)
    return S, sh


def wait_laws(waits: list[list[TierWait]], S: np.ndarray, sh: np.ndarray, grid: int,
              extra: list[list[Any]] | None = None
              ) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """Per set of waits ``(h, cdf (C, grid), means (C,))`` (``h = 0``, ``cdf = [[1]..]``: no
    time at all). Every exponential on the lattice in one transform -- the services (``M C``
    per set) and one phase per tier and wait share (the classes with the same share meet the
    same wait) --, the waits' generating functions in one batched Horner, one inverse FFT.
    ``extra[p]``: laws of set ``p`` with per-class ``mean``, ``variance`` and ``masses(h,
    grid)`` on the lattice (:class:`~solvers.response_time.ps.PSLaw`), multiplied in."""
    M, C = S.shape
    P = len(waits)
    wmean = np.array([[w.mean() for w in ws] for ws in waits]).reshape(P, M)
    wvar = np.array([[w.variance() for w in ws] for ws in waits]).reshape(P, M)
    means = (wmean[:, :, None] * sh + S).sum(axis=1)                      # (P, C)
    var = (wvar[:, :, None] * sh * sh + S * S).sum(axis=1)
    for p, laws in enumerate(extra or []):      # per-class laws of their own (PS tiers)
        for law in laws:
            means[p] += law.mean
            var[p] += law.variance
    top = (means + SPAN * np.sqrt(var)).max(axis=1) if C else np.zeros(P)
    live = np.flatnonzero(top > 0)
    out = [(0.0, np.ones((C, 1)), np.zeros(C))] * P
    if not live.size:
        return out
    h = top[live] / grid
    shares = [sorted(set(sh[m].tolist()) - {0.0}) for m in range(M)]
    pairs = [(i, m, share) for i, p in enumerate(live) for m, w in enumerate(waits[p])
             if w.no_wait() < 1.0 for share in shares[m]]
    service = np.where(S > 0, 1.0 / np.where(S > 0, S, 1.0), np.inf).ravel()
    rates = np.concatenate([np.tile(service, live.size),
                            [waits[live[i]][m].rate / share for i, m, share in pairs]])
    steps = np.concatenate([np.repeat(h, M * C), [h[i] for i, _, _ in pairs]])
    transforms = phase_transform(rates, steps, grid)
    n = live.size * M * C
    phi = transforms[:n].reshape(live.size, M, C, -1).prod(axis=1)       # the services
    if pairs:
        pg = _pgfs([waits[live[i]][m] for i, m, _ in pairs], transforms[n:])
        # which row of pg each (set, tier, class) meets; a last row of ones: no wait
        rows = np.full((live.size, M, C), len(pairs))
        for k, (i, m, share) in enumerate(pairs):
            rows[i, m, sh[m] == share] = k
        pg = np.concatenate([pg, np.ones((1, pg.shape[1]), dtype=complex)])
        for m in range(M):                        # tier by tier: the order of the products
            phi *= pg[rows[:, m]]
    for i, p in enumerate(live):
        for law in (extra[p] if extra else []):
            phi[i] *= np.fft.rfft(law.masses(float(h[i]), grid), axis=1)
    mass = np.maximum(np.fft.irfft(phi, n=grid, axis=2), 0.0)
    cdf = np.minimum(np.cumsum(mass, axis=2), 1.0)
    for i, p in enumerate(live):
        out[p] = (float(h[i]), cdf[i], means[p])
    return out


def quantiles(dists: list[GridDistribution], levels: tuple[float, ...]) -> np.ndarray:
    """``(C, L)``: each law's quantiles at ``levels`` (lattices of one length, as
    :func:`end_to_end` and :func:`end_to_end_many` give them): the first lattice point whose
    cumulative reaches the level, interpolated linearly from the one before
    (``F((i + 1/2) h) = cdf[i]``)."""
    q = np.asarray(levels, dtype=float)
    if not np.all((q > 0) & (q < 1)):
        raise ValueError(f"levels: quantile levels must lie in (0, 1), got {q.tolist()}")
    if not dists:
        return np.zeros((0, q.shape[0]))
    h = np.array([d.h for d in dists])
    if not (h > 0).all() or len({d.cdf.shape[0] for d in dists}) > 1:
        return np.array([d.quantile(q) if d.h else np.zeros_like(q) for d in dists])
    return lattice_quantiles(h, np.stack([d.cdf for d in dists]), q)


def lattice_quantiles(h: np.ndarray, cdf: np.ndarray, q: np.ndarray) -> np.ndarray:
    """:func:`quantiles` on the stacked lattices: steps ``h`` ``(R,)`` (all > 0),
    cumulatives ``cdf`` ``(R, G)``, levels ``q`` ``(L,)``."""
    h = h[:, None]
    # a running maximum only where a row falls (the lattices' own running sums never do)
    if (cdf[:, 1:] < cdf[:, :-1]).any():
        cdf = np.maximum.accumulate(cdf, axis=1)                          # (R, G)
    idx = np.array([np.searchsorted(row, q) for row in cdf])              # (R, L)
    idx = np.minimum(idx, cdf.shape[1] - 1)
    rows = np.arange(cdf.shape[0])[:, None]
    y1 = cdf[rows, idx]
    y0 = np.where(idx > 0, cdf[rows, np.maximum(idx - 1, 0)], 0.0)
    x1 = (idx + 0.5) * h
    x0 = np.where(idx > 0, (idx - 0.5) * h, 0.0)
    frac = np.divide(q[None, :] - y0, y1 - y0, out=np.ones_like(y1), where=y1 > y0)
    return x0 + np.clip(frac, 0.0, 1.0) * (x1 - x0)
