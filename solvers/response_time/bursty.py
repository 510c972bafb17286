"""Response-time laws of a MAP network beyond its exact chain: one chain per bursty tier.

The exact chain of the whole network (:mod:`solvers.response_time.mapnet`) is out of reach at
the populations and cores real systems have, and its station is the physical tier's only for
one core. Here each tier's sojourn law is computed on its own, as the decomposition solves the
network (:mod:`solvers.decomposition`, Marie 1979's flow-equivalent idea), and the tiers are
convolved as independent.

**A bursty tier.** Its chain on ``(n, phases)`` is the decomposition's station
(:mod:`solvers.decomposition.stations`): for ``2..PER_JOB_MAX_CORES`` cores the per-job one
(``k_i`` jobs in service in phase ``i``, ``s`` the phase the next job to start begins in; each
job keeps its own phase, start phases follow the MAP's embedded chain), for one core the MAP
running while the tier is busy. Jobs reach it at ``lambda(n) = X^{(-m)}(N - n)``, the
throughput of the rest of the network with the jobs not at the tier (its flow-equivalent
server: Chandy et al. 1975; exact for an exponential rest, as
:mod:`solvers.response_time.arrival` computes it). A job arriving sees the state ``x`` with
probability ``pi(x) lambda(n(x))`` normalised (the chain's stationary vector weighted by the
arrival rate, the construction of Lavenberg and Reiser 1980 without its product-form
shortcut). Under FCFS the jobs behind it never matter, so its sojourn is a phase-type
passage time through the tier's chain from that state:

* found ``n < c``: it starts at once in phase ``s`` (per-job; one core: in the phase the idle
  MAP holds), its own service the MAP's interval from ``s``, ``(e_s, D0)`` completing at
  ``D1 1``;
* found ``n >= c``: it waits for ``r = n - c + 1`` completions. With every core busy the
  chain's level blocks repeat: ``A0`` (phase moves of the jobs in service, ``s`` fixed: no job
  starts) and ``A1`` (a completion: the next job starts in ``s``, ``s`` moves by the embedded
  chain), read off the station's transitions between levels ``c + 1`` and ``c``. The first
  ``r - 1`` completions are steps of the kernel ``e^{A0 t} A1``; at the last the job itself
  starts, in the ``s`` of the state the completion left (per-job: kernel
  ``e^{A0 t} diag(a_1)``, ``a_1 = A1 1``, then its service from ``s``); for one core after
  ``r`` completions it starts in the phase they leave.

On the lattice of :mod:`solvers.response_time.sojourn` each kernel is discretised with the
triangular kernel in closed form (:func:`solvers.response_time.mapnet._kernel`) and the passage
is ``sum_r F_r K^{r-1} E`` by Horner over ``r`` -- per frequency a ``d x d`` product a step,
``d`` the states of a full level (``(c + 1) K`` for a two-phase MAP, at most ``66`` on the
station's count grid). The passage time *is* the sojourn the physical tier gives a job in the
state it finds (the station's own approximation aside: start phases independent of the
previous interval's length); what is approximate is the found law (the rest as a
flow-equivalent server at the mean demands of its tiers -- for another bursty tier too) and
the independence of the tiers.

**An exponential tier** keeps the arrival theorem's Erlang mixture
(:mod:`solvers.response_time.sojourn`), its phases' time scaled so that its mean wait is the
one the network's solution gives the tier (``R_m - D_m``). **Behind a bursty tier** (up to the
next bursty tier or the think station) the arrival theorem's chance of waiting is the product
form's, far too small where the waves queue: there the jobs found come from the open
``MAP/M/c`` queue fed by the bursty tier's departure process, read off the same chain
(:mod:`solvers.response_time.waves`: its arrival-epoch law, Lucantoni 1991), the same Erlang
mixture with that law of ``K``, scaled to the network's mean wait likewise.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.linalg.lapack import dgbsv

from solvers.decomposition.memo import Memo
from solvers.decomposition.stations import PER_JOB_MAX_CORES, level_states, per_job_affordable, \
    per_job_transitions, speed_scaled
from solvers.decomposition.waves import downstream_groups
from solvers.processes import MAP

from .arrival import ArrivalLaw
from .mapnet import chain_kernel, chain_passage_moments, chain_transfer
from .waves import wave_waits
from .sojourn import SPAN, GridDistribution, TierWait, pgf, phase_transform, quantiles, \
    real_times_complex, tier_wait

__all__ = ["BurstyTier", "bursty_tier", "decomposed_quantiles", "GRID"]

#: lattice points of the end-to-end law
GRID = 1024
#: found states of a bursty tier with less than this probability are dropped at the top of its
#: queue (the rest renormalised): they cannot move a quantile up to p99.9 by more than that
FOUND_TRUNCATION = 1e-12
#: the per-job chains' transitions out of levels ``0..c+1`` by process and cores
#: (:func:`solvers.decomposition.stations._per_job_head`): the same at every population above
#: ``c + 1``, built state by state in Python once, not at every law
_HEADS = Memo(32)


@dataclass(frozen=True, eq=False)
class BurstyTier:
    """What a job arriving at a bursty tier finds, and the tier's chain while every core is
    busy (module docstring). ``idle[s]``: found fewer than ``c`` jobs and starts at once in
    phase ``s``; ``busy[r - 1, x]``: found ``r`` completions to wait for, the full level in
    state ``x``; ``A0, A1`` the full level's blocks, ``start[x]`` the next start phase of state
    ``x``; ``one_core``: the MAP's own chain (the job starts in the phase the last completion
    leaves) instead of the per-job station."""

    proc: MAP
    cores: int
    idle: np.ndarray
    busy: np.ndarray
    A0: np.ndarray
    A1: np.ndarray
    start: np.ndarray
    one_core: bool
    #: the solved chain ``(pi, src, dst, rate, level)`` when asked for (its departures feed
    #: the tiers after it, :mod:`solvers.response_time.waves`)
    chain: tuple[np.ndarray, ...] | None = None

    @functools.cached_property
    def _wait_moments(self) -> tuple[float, float]:
        """The wait's first two moments at its own time scale (every class's, scaled)."""
        return chain_passage_moments(self.A0, self.A1, self.busy)

    def moments(self, wait_scale: float, service_scale: float) -> tuple[float, float]:
        """Mean and variance of the sojourn (the wait's and the service's, the covariance
        left out: for sizing the lattice), with the wait's time multiplied by
        ``wait_scale`` and the service's by ``service_scale``."""
        s1 = self.proc.moment(1) * service_scale
        s2 = self.proc.moment(2) * service_scale ** 2
        if self.busy.shape[0] == 0 or not wait_scale > 0:
            return s1, max(s2 - s1 * s1, 0.0)
        w1, w2 = self._wait_moments
        w1, w2 = w1 * wait_scale, w2 * wait_scale ** 2
        return w1 + s1, max(w2 - w1 * w1, 0.0) + max(s2 - s1 * s1, 0.0)

    def transform(self, h: float, size: int, wait_scale: float,
                  service_scales: np.ndarray) -> np.ndarray:
        """``(len(service_scales), size/2 + 1)``: the sojourn's lattice transform (module
        docstring) for each service scale, the wait's time multiplied by ``wait_scale``."""
        p = self.proc
        K = p.order
        f = size // 2 + 1
        sigmas = [chain_kernel(p.D0 / ss, p.D1 / ss, h, size).sum(axis=2) if ss > 0
                  else np.ones((f, K), dtype=complex) for ss in service_scales]
        if not wait_scale > 0:                  # no time waiting: the start phase's law
            found = self.idle + (self.busy.sum(axis=0) @ np.eye(K)[self.start]
                                 if self.busy.size else 0.0)
            return np.stack([sigma @ found for sigma in sigmas])
        if self.busy.shape[0] == 0:
            return np.stack([sigma @ self.idle for sigma in sigmas])
        A0, A1 = self.A0 / wait_scale, self.A1 / wait_scale
        L = chain_transfer(A0, h, size)                  # kernel on A0: L A1 (f, d, d)
        d = A0.shape[0]
        Kw = (L.reshape(-1, d) @ A1).reshape(f, d, d)
        acc = _horner(self.busy, Kw)                                      # (f, d)
        if self.one_core:
            lead = np.matmul(acc[:, None, :], Kw)[:, 0, :]
        else:                                   # the last completion: L diag(A1 1)
            lead = np.matmul(acc[:, None, :], L)[:, 0, :] * A1.sum(axis=1)
        out = []
        for sigma in sigmas:
            end = sigma if self.one_core else sigma[:, self.start]
            out.append(sigma @ self.idle + np.einsum("fi,fi->f", lead, end))
        return np.stack(out)


#: bytes of the powers ``K^0..K^{s-1}`` per frequency :func:`_horner` keeps at once
HORNER_BYTES = 16 * 2**20


def _horner(F: np.ndarray, Kw: np.ndarray) -> np.ndarray:
    """``sum_r F[r] K^r`` per frequency (``F`` ``(R, d)``, ``Kw`` ``(f, d, d)``). Rows below
    the first with mass are skipped by one power ``K^{r_0}`` (repeated squaring); the rest by
    Horner over blocks of ``s`` rows, each block one real matrix product with the powers
    ``K^0..K^{s-1}`` -- about ``R / s + s`` batched products instead of ``R`` (``s ~ sqrt(R)``,
    at most :data:`HORNER_BYTES` of powers)."""
    f, d = Kw.shape[0], Kw.shape[1]
    r0 = int(np.argmax(F.sum(axis=1) > 0))          # F has a row with mass
    F = F[r0:]
    R = F.shape[0]
    s = max(1, min(int(math.ceil(math.sqrt(R))), HORNER_BYTES // (16 * f * d * d)))
    B = -(-R // s)
    coef = np.zeros((B, s * d))
    coef.reshape(-1)[:R * d] = F.ravel()
    powers = np.empty((s, f, d, d), dtype=complex)        # each power contiguous: BLAS
    powers[0] = np.eye(d)
    for i in range(1, s):
        np.matmul(powers[i - 1], Kw, out=powers[i])
    step = np.matmul(powers[-1], Kw)                                      # K^s
    flat = powers.transpose(0, 2, 1, 3).reshape(s * d, f * d)
    blocks = real_times_complex(coef, flat).reshape(B, f, d)
    acc = blocks[-1]
    for b in range(B - 2, -1, -1):
        acc = np.matmul(acc[:, None, :], step)[:, 0, :] + blocks[b]
    lead, base = r0, Kw
    while lead:                                  # acc K^{r0}
        if lead & 1:
            acc = np.matmul(acc[:, None, :], base)[:, 0, :]
        lead >>= 1
        if lead:
            base = np.matmul(base, base)
    return acc


def _likeliest_level(proc: MAP, cores: int, lam: np.ndarray) -> int:
    """The mode of the tier's queue as a birth-death process (arrivals ``lam[n]``,
    completions ``min(n, c) / mean``): where to anchor the chain's solve."""
    n = np.arange(1, lam.shape[0] + 1)
    with np.errstate(divide="ignore"):
        step = np.log(lam) - np.log(np.minimum(n, cores) / proc.mean)
    return int(np.argmax(np.concatenate([[0.0], np.cumsum(step)])))


def _banded_stationary(Q: sparse.sparray, anchor: int) -> np.ndarray:
    """The unnormalised ``pi`` with ``pi Q = 0`` and ``pi[anchor] = 1`` for a chain stored
    level by level (its transitions between neighbouring levels only: ``Q^T`` is banded, a
    few dozen diagonals on a side): the anchor's balance equation, which follows from the
    others, replaced by ``pi[anchor] = 1`` and the band solved by LAPACK's ``dgbsv``: band
    Gaussian elimination with partial pivoting (Golub and Van Loan 2013, section 4.3), whose
    fill stays inside the band -- the equations
    :func:`solvers.linalg.anchored.anchored_stationary` solves by a sparse LU, in a third of
    its time on these chains. :class:`numpy.linalg.LinAlgError` when the system is
    singular."""
    Qc = sparse.coo_array(Q)
    return _band_solve(Qc.row, Qc.col, Qc.data, Qc.shape[0], anchor)


def _band_solve(row: np.ndarray, col: np.ndarray, value: np.ndarray, size: int,
                anchor: int) -> np.ndarray:
    """:func:`_banded_stationary` from the generator's entries ``Q[row, col] += value``
    (repeated pairs summed), written straight into ``dgbsv``'s band layout by one
    ``bincount``: a sparse matrix built, converted and read back costs about half the band
    solve itself on a tier's chain."""
    keep = (col != anchor) & (value != 0.0)       # Q^T's entry (col, row) is Q's (row, col)
    r, c, v = col[keep], row[keep], value[keep]
    kl, ku = int(max((r - c).max(initial=0), 0)), int(max((c - r).max(initial=0), 0))
    rows = 2 * kl + ku + 1                        # dgbsv's layout: kl rows for the fill
    ab = np.bincount((kl + ku + r - c) * size + c, weights=v,
                     minlength=rows * size).reshape(rows, size)
    ab[kl + ku, anchor] = 1.0
    b = np.zeros(size)
    b[anchor] = 1.0
    _, _, x, info = dgbsv(kl, ku, ab, b, overwrite_ab=1, overwrite_b=1)
    if info != 0 or not np.all(np.isfinite(x)):
        raise np.linalg.LinAlgError(f"bursty tier's chain: singular (dgbsv info {info})")
    return x


def bursty_tier(proc: MAP, cores: int, population: int, arrival: np.ndarray, *,
                keep_chain: bool = False) -> BurstyTier:
    """The found law and the full-level blocks of a bursty tier of ``cores`` cores serving
    ``proc`` (its real time scale) in a closed network of ``population`` jobs, which reach it
    at ``arrival[n]`` per second when it holds ``n`` (``n = 0..population - 1``; module
    docstring). ``ValueError`` for more cores than the per-job station takes or a chain over
    its budget. ``keep_chain``: keep the solved chain (:attr:`BurstyTier.chain`)."""
    N, c, K = int(population), int(cores), proc.order
    if N < 1:
        raise ValueError(f"population: must be >= 1, got {population!r}")
    lam = np.asarray(arrival, dtype=float)
    if lam.shape != (N,) or not (np.all(np.isfinite(lam)) and np.all(lam >= 0)):
        raise ValueError(f"arrival: {N} finite rates >= 0 expected, got shape {lam.shape}")
    one = c == 1
    if not one and not (c <= PER_JOB_MAX_CORES and per_job_affordable(proc, c, N + 1)):
        raise ValueError(f"cores: a bursty tier of {c} cores at {N} jobs is past the per-job "
                         f"station's reach")
    tr = speed_scaled(N, proc, 1) if one else per_job_transitions(N, proc, c, _HEADS)
    if one:
        sizes = np.full(N + 1, K)
    else:                                     # levels from c up repeat level c's states
        head = [level_states(proc, n) for n in range(min(c, N) + 1)]
        sizes = np.array(head + head[-1:] * (N - min(c, N)))
    first = np.concatenate([[0], np.cumsum(sizes)])
    S = int(first[-1])
    rate = tr.with_arrivals(np.append(lam, 0.0))
    states = np.arange(S)
    mode = _likeliest_level(proc, c, lam)
    here = np.flatnonzero(tr.level == mode)
    pi = np.maximum(_band_solve(np.concatenate([tr.src, states]),
                                np.concatenate([tr.dst, states]),
                                np.concatenate([rate, -np.bincount(tr.src, weights=rate,
                                                                   minlength=S)]),
                                S, int(here[np.argmax(tr.prior[here])])), 0.0)
    pi = pi / pi.sum()
    w = pi * np.append(lam, 0.0)[tr.level]
    w /= w.sum()
    d = int(sizes[min(c, N)])
    start = np.arange(d) % K                  # the per-job order: counts x start phase
    idle = np.zeros(K)
    for n in range(min(c, N)):
        part = w[first[n]:first[n + 1]]
        np.add.at(idle, np.arange(part.shape[0]) % K, part)
    R = max(N - c, 0)                         # found n = c..N-1: r = n - c + 1
    busy = w[first[c]:first[N]].reshape(R, d) if R else np.zeros((0, d))
    if R:                                     # the negligible ends of the queue found
        rows = busy.sum(axis=1)
        tail = np.cumsum(rows[::-1])[::-1]
        busy = busy[: max(int(np.count_nonzero(tail >= FOUND_TRUNCATION)), 1)].copy()
        busy[np.cumsum(rows[: busy.shape[0]]) < FOUND_TRUNCATION] = 0.0
    A0 = np.zeros((d, d))
    A1 = np.zeros((d, d))
    if N >= c + 1:
        lo, mid, hi = first[c], first[c + 1], first[c + 2]
        at = (tr.src >= mid) & (tr.src < hi) & ~tr.up
        src, dst, r = tr.src[at] - mid, tr.dst[at], tr.rate[at]
        same = dst >= mid
        np.add.at(A0, (src[same], dst[same] - mid), r[same])
        np.add.at(A1, (src[~same], dst[~same] - lo), r[~same])
        A0[np.diag_indices(d)] -= A0.sum(axis=1) + A1.sum(axis=1)
    mass = idle.sum() + busy.sum()
    return BurstyTier(proc=proc, cores=c, idle=idle / mass, busy=busy / mass, A0=A0, A1=A1,
                      start=start, one_core=one,
                      chain=(pi, tr.src, tr.dst, rate, tr.level) if keep_chain else None)


def decomposed_quantiles(processes: list[MAP], servers: list[int], think_time: float,
                         population: int, class_scales: np.ndarray, shares: np.ndarray,
                         levels: tuple[float, ...], residence: np.ndarray | None = None,
                         arrival: ArrivalLaw | None = None, *, grid: int = GRID
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Per class the response time's quantiles ``(C, L)`` and the law's means ``(C,)`` in the
    MAP network of ``processes`` (each at the tier's aggregate mean) with ``servers`` cores,
    ``think_time`` and ``population`` jobs, one chain per bursty tier (module docstring).
    ``class_scales[m, c]``: a class's service over the aggregate's at tier ``m``;
    ``shares[m, c]`` the factor on the tier's wait it meets; ``residence[m]``: the network's
    solution's residence times, to which the exponential tiers' mean waits are set (``None``:
    the arrival theorem's); ``arrival``: the exponential network's :class:`ArrivalLaw` (its
    complements' throughputs are the bursty tiers' arrival rates)."""
    M = len(processes)
    scales = np.asarray(class_scales, dtype=float).reshape(M, -1)
    sh = np.asarray(shares, dtype=float).reshape(M, -1)
    C = scales.shape[1]
    N = int(population)
    D = np.array([p.mean for p in processes])
    c = np.asarray(servers, dtype=float)
    law = arrival if arrival is not None else ArrivalLaw(D, c, think_time)
    marg = law.marginals(N)
    means = np.zeros(C)
    var = np.zeros(C)
    parts: list[TierWait | BurstyTier] = []
    groups = downstream_groups(processes, [m for m, p in enumerate(processes) if p.order > 1])
    waves: dict[int, TierWait | None] = {}
    for m, p in enumerate(processes):
        if p.order == 1:
            wait = waves.get(m) or tier_wait(marg.offset[m], marg.pmf[m], float(D[m]),
                                             float(c[m]))
            if residence is not None and wait.rate < math.inf and wait.mean() > 0:
                target = float(residence[m]) - float(D[m])
                if target > 0:
                    wait = TierWait(rate=wait.rate * wait.mean() / target, offset=wait.offset,
                                    pmf=wait.pmf)
            parts.append(wait)
            means += wait.mean() * sh[m] + D[m] * scales[m]
            var += wait.variance() * sh[m] ** 2 + (D[m] * scales[m]) ** 2
            continue
        cum = law._complement(m, N)
        X = np.exp(np.diff(cum[: N + 1]))           # X^{(-m)}(j), j = 1..N
        tier = bursty_tier(p, int(c[m]), N, X[::-1],     # lambda(n) = X^{(-m)}(N - n)
                           keep_chain=m in groups)
        parts.append(tier)
        if tier.chain is not None:              # the tiers after it: its waves' queues
            after = groups[m]
            waves.update(zip(after, wave_waits(*tier.chain, int(c[m]),
                                               [float(D[i]) for i in after],
                                               [c[i] for i in after])))
        for k in range(C):
            mu, v = tier.moments(float(sh[m, k]), float(scales[m, k]))
            means[k] += mu
            var[k] += v
    top = float(np.max(means + SPAN * np.sqrt(var)))
    if not top > 0:
        return np.zeros((C, len(levels))), np.zeros(C)
    h = top / grid
    phi = np.ones((C, grid // 2 + 1), dtype=complex)
    for m, part in enumerate(parts):
        if isinstance(part, TierWait):
            phi *= phase_transform(np.where(scales[m] > 0, 1.0 / np.maximum(D[m] * scales[m],
                                                                            1e-300), np.inf),
                                    h, grid)
            if part.no_wait() < 1.0:
                for share in np.unique(sh[m]):
                    if share > 0:
                        rate = np.array([part.rate / share])
                        phi[sh[m] == share] *= pgf(part, phase_transform(rate, h, grid)[0])
            continue
        for share in np.unique(sh[m]):
            on = np.flatnonzero(sh[m] == share)
            phi[on] *= part.transform(h, grid, float(share), scales[m, on])
    mass = np.maximum(np.fft.irfft(phi, n=grid, axis=1), 0.0)
    cdf = np.minimum(np.cumsum(mass, axis=1), 1.0)
    dists = [GridDistribution(h=h, cdf=cdf[k], mean=float(means[k])) for k in range(C)]
    law_means = h * (mass @ np.arange(grid))
    return quantiles(dists, tuple(levels)), law_means
