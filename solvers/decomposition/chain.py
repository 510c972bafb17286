"""The bursty tier exactly, against the flow-equivalent server of the rest.

For a bursty tier ``b`` the chain on ``(n_b, phases)``, ``n_b = 0..N``, with arrivals at rate
``X_rest(N - n_b)`` is a level-dependent quasi-birth-death process
(:mod:`solvers.decomposition.stations`); it is solved by one banded LU
(:mod:`solvers.decomposition.factors`) on the levels that hold probability above
:data:`TRUNCATION_MASS` (:func:`solve_chain`). Its conditional throughput
``nu_b(n) = E[min(n, c_b) (D1_b 1)_phi | n_b = n]`` is resolved where the chain resolves level
``n`` (probability above :data:`RELIABLE_LEVEL` of the likeliest level); beyond, it is
extrapolated at the nearest resolved level's rate per busy core (:func:`_fill`).

Where the probability is: a later sweep of the fixed point keeps the last truncation (so its
LU can be reused) unless a quarter fewer levels hold all but :data:`TRUNCATION_MASS`
(:func:`next_levels`); a per-job chain longer than twice :data:`FIRST_LEVELS` is first cut
where the speed-scaled station's chain (``K`` states a level, cheap on every level) needs its
levels (:func:`first_levels`): its queue is the heavier, so the cut holds at once.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from solvers.decomposition.factors import REFINE_RESIDUAL, FactorStore, chain_residual, \
    factor_and_solve, refine
from solvers.decomposition.memo import SolveMemo
from solvers.decomposition.stations import PER_JOB_MAX_CORES, Transitions, per_job_affordable, \
    per_job_applies, per_job_transitions, speed_scaled
from solvers.processes import MAP


@dataclass(frozen=True)
class Chain:
    """Stationary distribution of one bursty tier against the rest, and what follows."""

    level: np.ndarray       # P(n), (N + 1,)
    nu: np.ndarray          # conditional throughput, nu[0] = 0
    throughput: float
    residual: float
    station: str = "per-job"      # or "speed-scaled" (one core, or the fallback)
    levels: int = 0               # the chain's truncation: levels 0..levels solved
    enough: int = 0               # levels a chain like this one needs (:func:`_enough_levels`)
    pi: np.ndarray | None = None          # state probabilities on levels 0..levels
    transitions: Transitions | None = None   # the chain's pattern (arrival rates: ``lam``)
    lam: np.ndarray | None = None         # the arrival rates it was solved with
    rate: np.ndarray | None = None        # the transitions' rates with those arrivals

FIRST_LEVELS = 512
TRUNCATION_MASS = 1e-14
#: relative residual ||pi Q|| / max|q_ii| above which a chain's solution is rejected
RESIDUAL_LIMIT = 1e-8
#: levels below this fraction of the likeliest level's probability are not resolved by the
#: solve (relative error); their conditional throughput is extrapolated (:func:`_fill`)
RELIABLE_LEVEL = 1e-10


class Patterns:
    """The transition patterns of one solve's bursty chains, by (tier, levels, per-job): built
    once per solve, reused by every fixed-point iteration (only the arrivals change), with the
    latest factorisation of each (:class:`FactorStore`)."""

    def __init__(self, memo: SolveMemo | None = None,
                 max_cores: int = PER_JOB_MAX_CORES) -> None:
        self.memo = memo if memo is not None else SolveMemo()
        self.max_cores = max_cores        # per-job phases up to this many cores
        self._built: dict[tuple[int, int, int, bool], Transitions] = {}
        self._stores: dict[tuple[int, int, int, bool], FactorStore] = {}
        self._refusals: dict[tuple[int, int], str | None] = {}
        self.target = REFINE_RESIDUAL     # the refinements' residual in this sweep

    def refuse(self, proc: MAP, cores: int, station: str) -> None:
        """Solve this tier with the speed-scaled station for the whole solve, named
        ``station`` (``"speed-scaled (<why>)"``)."""
        self._refusals[(id(proc), cores)] = station

    def refusal(self, proc: MAP, cores: int, levels: int) -> str | None:
        """Why a per-job tier is the speed-scaled station in this solve (``None``: it is not),
        decided at its first truncation (:func:`per_job_affordable`) unless :meth:`refuse`
        set it before; the same answer for the rest of the solve (its sweeps and rounds keep
        one station a tier)."""
        key = (id(proc), cores)
        if key not in self._refusals:
            self._refusals[key] = None if per_job_affordable(proc, cores, levels) else \
                "speed-scaled (per-job chain over budget)"
        return self._refusals[key]

    def get(self, proc: MAP, cores: int, levels: int, per_job: bool) -> Transitions:
        key = (id(proc), cores, levels, per_job)
        if key not in self._built:
            self._built[key] = (per_job_transitions(levels, proc, cores, self.memo.heads) if per_job
                                else speed_scaled(levels, proc, cores))
        return self._built[key]

    def store(self, proc: MAP, cores: int, levels: int, per_job: bool) -> FactorStore:
        store = self._stores.setdefault((id(proc), cores, levels, per_job), FactorStore())
        store.target = self.target
        return store


def solve_chain(lam: np.ndarray, proc: MAP, cores: int, per_job: bool = True,
                patterns: Patterns | None = None, first: int | None = None) -> Chain:
    """:func:`solve_levels` on levels ``0..L``, ``L`` grown from ``first`` (default
    :data:`FIRST_LEVELS`, or ``N`` when ``N`` is at most twice that; for a longer per-job
    chain, where the speed-scaled chain needs its levels: :func:`first_levels`) by
    :func:`_more_levels` until the levels above ``0.9 L`` hold at most :data:`TRUNCATION_MASS`
    (or ``L = N``); levels above ``L`` get probability 0 and the nearest level's conditional
    throughput. A per-job chain beyond :data:`PER_JOB_MAX_BYTES` at its first truncation (then
    taken where the speed-scaled chain needs its levels, whatever ``N``) is the speed-scaled
    station, ``"speed-scaled (per-job chain over budget)"``."""
    N = lam.shape[0] - 1
    patterns = patterns or Patterns()
    pj = per_job and per_job_applies(proc, cores, patterns.max_cores)
    station = None
    if first is None:
        first = max(FIRST_LEVELS, 8 * cores)
        if pj and (N > 2 * first or not per_job_affordable(proc, cores, N)):
            first = min(N, first_levels(lam, proc, cores, first))
        elif N <= 2 * first:
            first = N
        station = patterns.refusal(proc, cores, first) if pj else None
        pj = pj and station is None
    top = min(first, N)
    while True:
        cut = lam[: top + 1].copy()
        cut[top] = 0.0
        chain = solve_levels(cut, proc, cores, patterns.get(proc, cores, top, pj), pj,
                             patterns.store(proc, cores, top, pj))
        if station is not None:
            chain = dataclasses.replace(chain, station=station)
        if chain.residual > RESIDUAL_LIMIT and chain.station == "per-job":
            # the banded LU lost the per-job chain: the speed-scaled station, flagged
            chain = solve_levels(cut, proc, cores, patterns.get(proc, cores, top, False), False)
            chain = dataclasses.replace(chain, station="speed-scaled (per-job chain unstable)")
        if top == N or chain.level[int(0.9 * top):].sum() <= TRUNCATION_MASS:
            break
        top = _more_levels(chain.level, top, N)
    enough = _enough_levels(chain.level, N)
    if top == N:
        return dataclasses.replace(chain, enough=enough)
    level = np.concatenate([chain.level, np.zeros(N - top)])
    nu = np.concatenate([chain.nu, np.full(N - top, np.nan)])
    nu[top + 1:] = nu[top]
    return Chain(level, nu, chain.throughput, chain.residual, chain.station, top, enough,
                 chain.pi, chain.transitions, chain.lam, chain.rate)


def first_levels(lam: np.ndarray, proc: MAP, cores: int, first: int) -> int:
    """The first truncation of a per-job chain on ``N`` levels: where the speed-scaled
    station's chain on all ``N`` levels (``K`` states a level, not ``(c + 1) K``: a few ms at
    thousands of levels) needs its levels (:func:`_enough_levels`), at least ``first``. Its
    queue is the heavier (module notes), so the per-job chain's truncation check passes at
    once, with a few more levels than it needs; a too-short first cut would instead cost a
    second factorisation (the top tenth of a too-short truncation does not decay, so its
    extrapolation gives up and takes every level). ``first`` if the speed-scaled chain does
    not solve."""
    N = lam.shape[0] - 1
    cut = lam.copy()
    cut[N] = 0.0
    try:
        chain = solve_levels(cut, proc, cores, speed_scaled(N, proc, cores), False)
    except RuntimeError:
        return first
    return max(first, _enough_levels(chain.level, N))


#: head room of :func:`_enough_levels` over the level past which TRUNCATION_MASS lies (a later
#: sweep of the fixed point shifts the distribution a little)
LEVEL_MARGIN = 1.1


def _enough_levels(level: np.ndarray, N: int) -> int:
    """Levels a chain like this one needs: :data:`LEVEL_MARGIN` times the level ``q`` above
    which :data:`TRUNCATION_MASS` lies, so that the top tenth of the truncation is clear of it
    (``N`` when that reaches past ``0.9 N``)."""
    tail = np.cumsum(level[::-1])[::-1]                      # P(n_b >= n)
    q = int(np.searchsorted(-tail, -TRUNCATION_MASS, side="left"))
    need = max(int(math.ceil(LEVEL_MARGIN * q / 0.9)), FIRST_LEVELS)
    return N if need >= 0.9 * N else need


def _more_levels(level: np.ndarray, top: int, N: int) -> int:
    """Levels for the next truncation: where the top tenth's geometric decay reaches
    :data:`TRUNCATION_MASS` / 100, at least twice ``top``; ``N`` if the mass does not decay
    there (or the estimate reaches past ``0.8 N``)."""
    lo = int(0.9 * top)
    a, b = level[lo], level[top - 1]
    if not (a > 0 and b > 0 and b < a):
        return N
    decay = math.log(b / a) / (top - 1 - lo)             # log of P(n+1)/P(n) up there
    need = top + math.log(TRUNCATION_MASS / 100 / max(b, 1e-300)) / decay
    guess = max(2 * top, int(math.ceil(need)))
    return N if guess >= 0.8 * N else guess


def solve_levels(lam: np.ndarray, proc: MAP, cores: int, tr: Transitions,
                 per_job: bool, store: FactorStore | None = None) -> Chain:
    """Stationary distribution of the bursty tier's chain on levels ``0..len(lam) - 1``.

    With a ``store`` holding the factorisation of the same pattern from an earlier sweep of
    the fixed point (only the arrival rates ``lam`` differ), the solution is refined from that
    sweep's by preconditioned iterations (:func:`refine`); otherwise, or when they do not
    contract, by a fresh banded LU (:func:`factor_and_solve`), kept in ``store``."""
    N = lam.shape[0] - 1
    rate = tr.with_arrivals(lam)
    S = tr.level.shape[0]
    out = np.bincount(tr.src, weights=rate, minlength=S)
    x = refine(store, tr, rate, out) if store is not None and store.factor else None
    if x is None:
        x, factor = factor_and_solve(lam, proc, cores, tr, rate, out)
        if store is not None:
            store.factor = factor
    if store is not None and store.factor is not None:
        store.factor.x = x
    pi = np.clip(x, 0.0, None)
    pi /= pi.sum()
    level = np.bincount(tr.level, weights=pi, minlength=N + 1)
    flow = np.bincount(tr.level, weights=pi * tr.exit, minlength=N + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        nu = np.where(level > RELIABLE_LEVEL * level.max(), flow / level, np.nan)
    residual = chain_residual(tr, rate, out, pi, float(np.max(out)))
    return Chain(level, _fill(nu, proc, cores), float(flow.sum()), residual,
                 "per-job" if per_job else "speed-scaled", N, pi=pi, transitions=tr, lam=lam,
                 rate=rate)


def _fill(nu: np.ndarray, proc: MAP, cores: int) -> np.ndarray:
    """``nu(n)`` where level ``n`` is too unlikely to be resolved (:data:`RELIABLE_LEVEL`):
    the nearest resolved level's, times ``min(n, c) / min(n', c)`` (the busy cores), so
    constant beyond the highest resolved level; ``min(n, c)/E[S]`` if none is resolved."""
    n = np.arange(nu.shape[0])
    known = np.isfinite(nu) & (nu > 0) & (n > 0)
    out = nu.copy()
    out[0] = 0.0
    if not known[1:].any():
        out[1:] = np.minimum(n[1:], cores) / proc.mean
        return out
    idx = np.flatnonzero(known)
    nearest = idx[np.clip(np.searchsorted(idx, n[1:]), 0, idx.shape[0] - 1)]
    before = idx[np.clip(np.searchsorted(idx, n[1:]) - 1, 0, idx.shape[0] - 1)]
    pick = np.where(np.abs(before - n[1:]) <= np.abs(nearest - n[1:]), before, nearest)
    busy = np.minimum(n[1:], cores) / np.minimum(pick, cores)
    out[1:] = np.where(known[1:], nu[1:], nu[pick] * busy)
    return out


def next_levels(last: Chain | None) -> int | None:
    """The truncation of a tier's chain in the next sweep: the last one's (its factorisation is
    reused, :func:`refine`) unless :func:`_enough_levels` is a quarter smaller."""
    if last is None:
        return None
    return last.enough if last.enough < 0.75 * last.levels else last.levels
