"""Closed MAP networks with multi-core tiers at large populations: flow-equivalent decomposition.

The network is :mod:`solvers.mapqn`'s (paper 000, Fig. 9) with cores: ``N`` users think for an
exponential time of mean ``Z``, then visit tiers ``1..M`` in order. Tier ``m`` has ``c_m``
cores and one FCFS queue; its service is exponential (mean ``S_m``: a load-dependent server of
rate ``min(n, c_m)/S_m``) or a ``MAP(D0_m, D1_m)`` service-time sequence that its cores
consume in the order jobs start (paper 000, section 4: burstiness as runs of slow service).
How a bursty tier is modelled (:func:`_transitions`):

* **one core**: the MAP runs while the tier is busy, its phase frozen while idle -- exactly
  the tier serving its sequence in order (:mod:`solvers.mapqn`'s station);
* **2..PER_JOB_MAX_CORES cores: per-job phases** ("count the jobs in service per phase"):
  each job in service carries its own phase from the one it started in, so it keeps its own
  speed; start phases follow the MAP's embedded chain ``P = (-D0)^{-1} D1``, so a run of slow
  values reaches the cores one start at a time. Against a simulation of the physical tier
  (:mod:`solvers.simulation.physical`, three tiers 4/4/8 cores, bursty database, I ~ 200)
  this station gives 35.8 / 45.7 / 71.4 ms at 60 / 110 / 190 users against simulated
  35.6 +- 2.4 / 45.5 +- 2.7 / 72.5 +- 2.9 ms; one MAP at speed ``min(n, c)`` (every busy
  core slowed by a phase change) gave 37.4 / 54.7 / 93.0 ms. Per-job states grow as
  ``(c + 1) K`` a level, a banded LU's storage as levels times their square and its time as
  levels times their cube. The per-job station goes up to ``per_job_max_cores``
  (:func:`solve_decomposed`; default :data:`PER_JOB_MAX_CORES`, 64, the most measured), kept
  while its band stays within :data:`PER_JOB_MAX_BYTES`
  (a 64-core tier up to ~2,500 levels on the grid below, in 0.06-0.09 s at 160-480 users)
  and, before a wave queue (step 4), while its departure process has at most
  :data:`WAVE_MAX_PHASES` phases (17 cores); against the simulated physical system
  (``bench/accuracy_many_cores.py``, a bursty last tier of 8-64 cores at 0.5-1.5 knees) it is
  within 2.0% on throughput and 6.3% on response time, where one MAP at speed ``min(n, c)``
  was up to 8.9% low and 37% high.
  Past :data:`PHASE_COUNT_BINS` (32) busy cores a level keeps the count of jobs in phase 2 on
  a grid of 33 counts (:func:`_counts`, two-phase MAPs): a move of one job between phases
  reaches the neighbouring grid point ``g`` counts away at ``1/g`` of its rate, so the
  expected count and every completion rate are kept and only the count's spread widens; a
  level has at most 66 states whatever the cores. At 64 cores that is 0.2-1.5% lower throughput
  and 0.7-4.6% higher response time than every count resolved, at 2-3x less time, and the
  byte budget holds ~2,500 levels instead of ~650 (a grid of 17 counts: 3-4% / 10-14%). The
  default was 16 until 2026-11-30 for the pipeline's cost (it solves a model 20-100 times a
  cycle: capacity searches, the calibration, the uncertainty band): end to end on a shop
  with a bursty 32- or 64-core database (``bench/e2e_many_cores.py``) the per-job station
  costs 19-29 s of CPU per hour of windows against 1.5-1.8 s and puts the capacity within
  3.0% / 8.9% of the simulated truth on 12 of 12 runs where one MAP at speed ``min(n, c)``
  was 6.6-16.7% low (5 of 12 within 10%); on ``bench/bench_pipeline.py --bursty --multicore
  --core-choices 16 32 64``, three bursty tiers of 16-64 cores a system, it is ~7x slower
  (docs/benchmarks.md). ``per_job_max_cores=16`` brings the cheaper station back;
* **more cores, or a per-job chain over its budget**: one MAP at speed ``min(n, c)``; flagged,
  pessimistic.

Why this method
---------------
The exact chain (:func:`solvers.mapqn.solve_closed`) has ``C(N+M, M) prod_m K_m`` states: 100k
states are reached at about 65 users with three tiers, while the systems people run have
thousands. Among the candidates (the exact chain with multi-server stations, blending over
random environments, decomposition), decomposition keeps what makes bursty service harmful --
the joint dynamics of a tier's queue and its service phase, the pile-up during a slow run --
while its cost grows linearly with ``N``:

1. **Flow-equivalent server (FES) of the exponential part.** The think station and the
   exponential tiers ``E`` form a product-form network. Its normalising constants
   ``G_E(k), k = 0..N`` are computed in log space by convolving the stations' weights
   ``f_m(j) = S_m^j / prod_{i<=j} min(i, c_m)`` (a ``c_m + 1``-tap head and a geometric tail,
   so ``O(N c_m)`` per tier) onto the delay's ``Z^k / k!``; its throughput with ``k`` users is
   ``X_E(k) = G_E(k-1) / G_E(k)`` (Chandy-Herzog-Woo).
2. **The bursty tier exactly, against the FES.** For a bursty tier ``b`` the chain on
   ``(n_b, phases)``, ``n_b = 0..N``, with arrivals at rate ``X_rest(N - n_b)`` is a
   level-dependent quasi-birth-death process with ``(N + 1) K_b`` states (per-job:
   ``(c_b + 1) K_b`` per level, for two phases); its generator is banded and is solved by one
   banded LU (LAPACK ``dgbtrf``) with one state's probability fixed, on the levels that hold
   probability above :data:`TRUNCATION_MASS` (section *Where the time goes*).
3. **Several bursty tiers: Marie's fixed point** (R. Marie, "An approximate analytical method
   for general queueing networks", IEEE TSE 1979). Each bursty tier's *conditional throughput*
   ``nu_b(n) = E[min(n, c_b) (D1_b 1)_phi | n_b = n]`` makes it a load-dependent exponential
   station with the same queue-length distribution (the level-crossing balance
   ``P(n) nu(n) = P(n-1) lambda(n-1)`` holds exactly), so the rest of the network seen by tier
   ``b`` is product form: ``G_rest = G_E * f_{b'}`` over the other bursty tiers, with
   ``f_b(j) = prod_{i<=j} 1/nu_b(i)``. The tiers are re-solved in turn (a sweep) until the
   throughput moves by less than ``tol`` between sweeps; the sweeps are Anderson-accelerated
   on ``log nu``, restarted when the residual grows (:class:`_Anderson`: 18 sweeps where
   plain iteration needed over 50 at 1.2 knees of system (c) in docs/accuracy.md). A sweep
   takes the tiers in visit order, a clear bursty bottleneck first (:func:`_sweep_order`:
   2-4x fewer sweeps on the pipeline's three-bursty multi-core systems, 7% fewer over
   ``bench/accuracy_random_networks.py``'s 640 solves). With one bursty tier the first pass is
   the answer.
4. **Waves downstream of a bursty tier** (:mod:`solvers.departures`). A bursty tier releases
   the backlog of a slow run at its fast phase's rate (paper 000's MAP on 8 cores: ~30,000/s),
   so the exponential tiers after it (up to the next bursty tier or the think station) see
   waves, not the product form's Poisson flow: on docs/accuracy.md's system (d) at 816 users
   the product form gave a 2-core cache 1.04 ms and a 16-core database 20.0 ms against 7.15 and
   39.5 ms simulated. Each such tier is solved as an open ``MAP/M/c`` queue fed by the bursty
   tier's departure process, read off its chain (levels above ``c_b`` lumped, stationary
   weights), through the capacity of the tiers in between. The users held there are not in
   the rest: the bursty chains are re-solved with arrivals ``X_rest(N - n - h)``, ``h`` the
   excess of those queues over the product form's, to a fixed point in ``h`` (one bursty
   tier: rounds of re-solves with secant steps, 3-4 on system (d); several: ``h`` updated
   after each of Marie's sweeps (once it swings, extrapolated by Anderson with ``log nu``:
   :func:`_swinging`), the sweeps then stopping only once it moves by at most
   :data:`WAVE_TOL` of N -- or, from :data:`SETTLE_SWEEPS` on, once the reference tier's
   throughput is within the tolerance and the others' within :data:`SETTLE_OTHERS`
   (:func:`_settled`), or while ``h`` swings once the reference tier's throughput has stayed
   within :data:`SWING_SPAN` over the last :data:`SWING_SWEEPS` sweeps (:func:`_bounded_swing`,
   flagged); if they do not converge so -- ``h`` can swing them -- by rounds as
   for one tier, each a converged fixed point: of 268 such solves on random networks with two
   or three bursty tiers at 0.5-1.5 knees, 29 did not converge in 50 sweeps (with ``h`` taken plain after each sweep); on the five
   checked against the simulated physical system their throughput was 12-23% low, by rounds
   0.5-4.8% off). A wave queue holding more jobs than the network has outside its think
   station keeps the product form (flagged), and ``h`` is at most N/2. On two tiers (one-core bursty tier, then an exponential one) the tier
   after it gets 10.4 / 43.4 / 20.5 ms against the exact chain's 10.5 / 40.5 / 18.6 ms (the
   product form: 4.1 / 6.3 / 4.0).

Metrics come from the bursty tier holding the most jobs (the *reference* tier ``r``): its chain
gives ``X`` and ``P(n_r = n)``; an exponential tier's mean queue is
``Q_m = sum_n P(n_r = n) E[n_m | N - n users in the rest]``, the conditional mean being
``d log G_rest(k) / d log S_m`` (central difference); another bursty tier's comes from its own
chain. ``U_m`` is the per-core utilization ``E[min(n_m, c_m)]/c_m``; ``R_m = Q_m / X``
(Little). ``bottleneck_probability`` gives each level of the reference tier to the tier holding
the most jobs there (the others at their conditional means): the analogue of
:mod:`solvers.mapqn`'s ``B_m`` without its ties between empty queues at light load.

What is approximate
-------------------
* The FES assumes the rest of the network equilibrates at each population faster than the
  bursty tier moves. The exponential tiers right after a bursty tier see its departures
  (step 4), but as an open queue: their own queue does not slow the bursty tier's arrivals
  beyond the mean users ``h`` held there, the departure process is lumped (a backlog's length
  geometric given the cores' phases), and a tier in between only caps the wave's rate.
* With several bursty tiers, each sees the others as load-dependent exponential stations.
* A bursty tier's ``nu_b(n)`` is resolved where its chain resolves level ``n`` (probability
  above :data:`RELIABLE_LEVEL` of the likeliest level); beyond, it is extrapolated at the
  nearest resolved level's rate per busy core. Its weights ``f_b`` are exact up to there and
  geometric beyond, which is then exact too.
Exponential-only networks are solved exactly (the product form), which the tests check against
exact MVA; bursty ones are checked against the exact chain where it fits and against a
simulation of the physical system (docs/accuracy.md).

Where the time goes
-------------------
At ``N`` in the thousands a bursty tier near its knee holds jobs over thousands of levels (4
tiers, 2 bursty, ``N = 5,000``: 99% below 1,170 jobs, 1e-12 beyond 3,090), and a 16-core
per-job chain has 34 states per level, so one LU of the chain costs ``O(L d^3)`` (``L`` levels,
``d`` states per level) -- 0.2-0.9 s -- and Marie's iteration needs ~20 sweeps of two chains
there. What is done about it, none of it changing the answer beyond the fixed point's ``tol``:

* **The factorisation is reused across sweeps** (:func:`_refine`). Between sweeps only the
  arrival rates change, so the last sweep's LU preconditions an iterative refinement
  ``x <- x + M^{-1} (b - A x)`` from the last solution; it contracts by about the relative
  change of the rates (2-4 triangular solves, each ~1/10 of an LU), and a fresh LU is taken
  when it does not. Early sweeps refine only to a residual of 1e-6 times the fixed point's
  last change (:func:`_refine_target`; an inexact Picard iteration), the last ones to 1e-12.
* **Levels where the probability is** (:func:`_enough_levels`): a later sweep keeps the last
  truncation (so its LU can be reused) unless a quarter fewer levels hold all but
  :data:`TRUNCATION_MASS`; the truncation's own check (the top tenth holds at most that mass)
  is unchanged.
* **The first truncation from the speed-scaled chain** (:func:`_first_levels`): a per-job
  chain longer than twice :data:`FIRST_LEVELS` is first cut where the speed-scaled station's
  chain (``K`` states a level, milliseconds on every level) needs its levels; its queue is
  the heavier, so the cut holds at once (4 tiers with a 16-core bursty database at 2,000 /
  2,972 / 5,000 users: 0.229 / 0.343 / 0.681 s -> 0.116 / 0.150 / 0.347 s CPU, answers
  within 1e-15; with two bursty tiers at 2,068 users 0.96 -> 0.48 s, within 1e-8), where 512
  levels were tried first and then, the top of a too-short cut not decaying, all ``N``.
* **Long convolutions in scaled linear space** (:func:`_head_linear`). The other bursty tier's
  weights run to thousands of jobs; a log-sum-exp over every term cost ``N h`` exponentials.
  Tilting by ``e^{-theta k}`` (``g(i) f(j) = e^{theta k} g(i) e^{-theta i} f(j) e^{-theta j}``
  for ``i + j = k``) and scaling every factor to at most 1 makes a block of outputs one
  ``numpy.convolve`` of non-negative terms (no cancellation, unlike an FFT); an output whose
  scaled sum is below 1e-250 (terms may have underflowed) is recomputed in a smaller block,
  down to 32 outputs in log space. Taps go by chunks of 256 because where ``nu_b`` falls (the
  bursty case) the weights are log-convex and no one scaling holds thousands of taps.
* **What a capacity search's probes share** (:func:`_shared_prefix`, :func:`_per_job_head`):
  ``log G_E(k)`` and the exponential tiers' ``E[n_m | k]`` do not depend on ``N`` at a given
  ``k`` (log-space convolutions per output, running sums), nor do a per-job chain's transitions
  out of levels ``0..c+1``: a :class:`SolveMemo` passed to every solve of one model (the
  pipeline's :class:`streams.predict.model.SystemModel` holds one) keeps them between
  solves; within a solve the wave rounds reuse the chain's rates and the lumping of its pattern
  (:func:`solvers.departures.lumping`). The wave queues' boundary levels cost one ``dgesv`` each
  (:func:`solvers.departures.map_m_c_mean`). The last round of step 4 takes its wave queues
  off the line through the two rounds before (:func:`_waves_on_line`) when it would be the
  last anyway -- the secant moves the held users by at most :data:`WAVE_TOL` of N past the
  Picard step: system (d) at 600-816 users solves two rounds of ``MAP/M/c`` queues instead
  of three (the queues within 2.2e-5, the throughput identical). What is left of a probe of
  system (d) is mostly the ``G`` matrices of the two ``MAP/M/c`` queues (108 phases, ~10
  doublings each, 2 rounds) and the bursty chain's banded LU and refinements.

Not done, and why: a warm start of the fixed point from a nearby population's ``nu`` took
*more* sweeps than the cold start (4 tiers, 2 bursty, 2,000 -> 2,153 users: 13-20 against 5;
3,000: diverged), weighting Anderson's least squares by the level probabilities or taking
sweeps Jacobi-style did not reduce them; the iteration creeps (plain sweeps converge at a
ratio that drifts from 0.9 to 0.8), which is what still costs ~20 sweeps at the knee. SuperLU
in natural order instead of the banded LU: triangular solves 2.5x faster, but building its
sparse matrix and the factorisation made whole solves slower (0.72 s against 0.40 s at 2,153
users, 3.7 s against 3.2 s at 5,000, CPU time).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from scipy.linalg.lapack import dgbtrf, dgbtrs
from scipy.sparse import csr_array
from scipy.special import gammaln

from solvers.departures import Lumping, lumped_departures, lumping, map_m_c_mean, through_tier
from solvers.processes import MAP

__all__ = ["DecompositionResult", "SolveMemo", "solve_decomposed"]

_EPS = 1e-4          # relative step of the central differences d log G / d log S_m
_NEG_INF = -math.inf
_CONVOLVE_CELLS = 1 << 20     # terms per block of a head convolution (memory bound, 8 MiB)


# ------------------------------------------------------------------------------------ result
def _frozen(a: Any) -> np.ndarray:
    arr = np.array(a, dtype=float)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class DecompositionResult:
    """Solution of the closed network by :func:`solve_decomposed` (module docstring).

    Per-tier arrays have shape ``(M,)``: ``residence_time`` ``R_m``, ``utilization`` ``U_m``
    (per core), ``queue_length`` ``Q_m``, ``bottleneck_probability`` ``B_m``.
    ``throughput`` ``X`` and ``response_time`` ``R = sum_m R_m`` (think time excluded), so
    ``N = X (R + Z)`` up to ``little_residual``. ``iterations``: sweeps of the fixed point
    over every round of step 4 (0: no bursty tier; 1: one, and no exponential tier after
    it), ``converged``, ``flags`` for anything approximate or degenerate.
    """

    throughput: float
    response_time: float
    residence_time: np.ndarray
    utilization: np.ndarray
    queue_length: np.ndarray
    bottleneck_probability: np.ndarray
    population: int
    think_time: float
    servers: tuple[int, ...]
    iterations: int
    converged: bool
    little_residual: float
    method: str = "decomposition"
    elapsed_s: float = 0.0
    flags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in ("residence_time", "utilization", "queue_length", "bottleneck_probability"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))


# ------------------------------------------------------------------------------------ inputs
def _check_processes(processes: Any) -> list[MAP]:
    procs = [processes] if isinstance(processes, MAP) else list(processes)
    if not procs:
        raise ValueError("processes: at least one tier is needed")
    for i, p in enumerate(procs):
        if not isinstance(p, MAP):
            raise ValueError(f"processes: item {i} must be a solvers.processes.MAP, "
                             f"got {type(p).__name__}")
    return procs


def _check_servers(servers: Any, tiers: int) -> tuple[int, ...]:
    if servers is None:
        return (1,) * tiers
    out = list(servers)
    if len(out) != tiers:
        raise ValueError(f"servers: must have one entry per tier ({tiers}), got {len(out)}")
    for i, c in enumerate(out):
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1:
            raise ValueError(f"servers: item {i} must be an integer >= 1, got {c!r}")
    return tuple(int(c) for c in out)


def _check_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name}: must be an integer >= 0, got {value!r}")
    return int(value)


def _check_think(value: Any) -> float:
    try:
        z = float(value)
    except (TypeError, ValueError):
        z = math.nan
    if isinstance(value, bool) or not (math.isfinite(z) and z >= 0):
        raise ValueError(f"think_time: must be a finite number >= 0, got {value!r}")
    return z


# ------------------------------------------------------------------- log-space convolutions
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

    The head is a ``(h + 1)``-tap filter (:func:`_head`); the tail is ``f(h) r S(k - h - 1)``
    with ``S`` the geometric sum of :func:`_geometric`. Every term is non-negative, so nothing
    cancels."""
    N = lg.shape[0] - 1
    taps = min(lhead.shape[0] - 1, N)
    head = _head(lg, lhead[: taps + 1])
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


def _head(lg: np.ndarray, lh: np.ndarray) -> np.ndarray:
    """``log sum_{j <= h} exp(lh[j] + lg[k - j])``, ``k = 0..N``. A long head by chunks of
    :data:`TAP_CHUNK` taps, each by blocks of outputs in linear space (:func:`_head_linear`);
    a block's outputs it cannot resolve are split into smaller blocks, down to
    :data:`_SMALLEST_BLOCK` outputs solved in log space."""
    N = lg.shape[0] - 1
    if lh.shape[0] <= LOG_SPACE_TAPS:
        return _head_log(lg, lh, 0, N + 1)
    if lh.shape[0] > TAP_CHUNK:                 # a sum over chunks of taps, each shifted
        parts = [_shift(_head(lg, lh[j0: j0 + TAP_CHUNK]), j0)
                 for j0 in range(0, lh.shape[0], TAP_CHUNK)]
        return np.logaddexp.reduce(np.array(parts), axis=0)
    out = np.empty(N + 1)
    pending = [(0, N + 1)]
    while pending:
        k0, k1 = pending.pop()
        if k1 - k0 <= _SMALLEST_BLOCK:
            out[k0:k1] = _head_log(lg, lh, k0, k1)
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


def _head_log(lg: np.ndarray, lh: np.ndarray, k0: int, k1: int) -> np.ndarray:
    """:func:`_head` for outputs ``k0..k1-1`` by a log-sum-exp over each output's terms."""
    taps = lh.shape[0] - 1
    padded = np.concatenate([np.full(taps, _NEG_INF), lg])
    windows = np.lib.stride_tricks.sliding_window_view(padded, taps + 1)[k0:k1]
    rows = max(1, _CONVOLVE_CELLS // (taps + 1))
    return np.concatenate([_logsumexp_rows(windows[k: k + rows] + lh[::-1][None, :])
                           for k in range(0, k1 - k0, rows)])  # term (k, j) = f(j) g(k - j)


def _head_linear(lg: np.ndarray, lh: np.ndarray, k0: int, k1: int) -> np.ndarray:
    """:func:`_head` for outputs ``k0..k1-1`` as one linear-space convolution, ``NaN`` where it
    cannot be trusted. ``g(i) f(j) = e^{theta k} [g(i) e^{-theta i}] [f(j) e^{-theta j}]`` for
    ``i + j = k``: tilted by the slope ``theta`` of ``log g`` where the middle output's largest
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


def _ld_weights(nu: np.ndarray, N: int) -> tuple[np.ndarray, float | None]:
    """Head and tail of ``f(j) = prod_{i<=j} 1/nu(i)`` (``nu[0]`` unused): exact, the head
    running to where ``nu`` becomes constant (beyond the levels its chain resolved,
    :func:`_fill`), so the geometric tail ``1/nu(N)`` is exact too."""
    lf = np.concatenate([[0.0], -np.cumsum(np.log(nu[1:]))])
    moving = np.flatnonzero(np.abs(nu[1:] - nu[-1]) > 1e-12 * nu[-1])
    h = int(moving[-1]) + 2 if moving.size else 1
    if h >= N:
        return lf, None
    return lf[: h + 1], float(-math.log(nu[-1]))


def _log_g_exponential(means: np.ndarray, cores: Sequence[int], tiers: Sequence[int], N: int,
                       Z: float) -> np.ndarray:
    """``log G_E(k)``, ``k = 0..N``, of the think station and the exponential ``tiers``."""
    lg = _log_delay(N, Z)
    for m in tiers:
        lg = _convolve(lg, *_exponential_weights(means[m], cores[m], N))
    return lg


def _ratio(lg: np.ndarray) -> np.ndarray:
    """``X(k) = G(k-1)/G(k)`` for ``k = 1..N`` (index ``k``; ``X(0) = 0``)."""
    out = np.zeros(lg.shape[0])
    with np.errstate(invalid="ignore"):
        out[1:] = np.exp(lg[:-1] - lg[1:])
    return np.nan_to_num(out, nan=0.0, posinf=0.0)


# ------------------------------------------------------------------------- the bursty chain
#: by default a bursty tier with more cores than this is modelled as one MAP at speed min(n, c)
#: (flagged): the per-job model's states per level grow as (c + 1) K (up to 33 K with the
#: grid of :data:`PHASE_COUNT_BINS`, two phases). ``solve_decomposed``'s
#: ``per_job_max_cores`` lowers it (64 cores the most measured: module notes; 16 until
#: 2026-11-30)
PER_JOB_MAX_CORES = 64
#: the per-job chain is solved while its banded LU's storage (levels x d x (3d + 3) doubles,
#: ``d`` states a level) stays within this many bytes; beyond, the speed-scaled station,
#: flagged (:func:`_per_job_affordable`). A 16-core tier (34 states a level, 28.6 kB a level)
#: stays per-job up to ~9,400 levels, a 32-64-core one (66 on the grid of PHASE_COUNT_BINS,
#: 106 kB) ~2,500 (every count resolved, a 64-core one's 130 states, 409 kB: ~650); the LU's
#: time grows as levels x d^3 (a 64-core chain at 478 levels: 0.1-0.4 s, 0.09 s on the grid)
PER_JOB_MAX_BYTES = 256 * 2**20
#: a bursty tier whose waves feed ``MAP/M/c`` queues (step 4) keeps the per-job chain only while
#: its departure process (levels ``0..c + 1`` of the chain: :func:`_departure_phases`) has at
#: most this many phases: the queues' ``G`` matrices are dense in them (a 16-core tier: 340
#: phases; 32 cores: 1,188, 64: 4,420 -- minutes a solve)
WAVE_MAX_PHASES = 400


@dataclass(frozen=True)
class _Chain:
    """Stationary distribution of one bursty tier against the rest, and what follows."""

    level: np.ndarray       # P(n), (N + 1,)
    nu: np.ndarray          # conditional throughput, nu[0] = 0
    throughput: float
    residual: float
    station: str = "per-job"      # or "speed-scaled" (one core, or the fallback)
    levels: int = 0               # the chain's truncation: levels 0..levels solved
    enough: int = 0               # levels a chain like this one needs (:func:`_enough_levels`)
    pi: np.ndarray | None = None          # state probabilities on levels 0..levels
    transitions: _Transitions | None = None   # the chain's pattern (arrival rates: ``lam``)
    lam: np.ndarray | None = None         # the arrival rates it was solved with
    rate: np.ndarray | None = None        # the transitions' rates with those arrivals


@dataclass(frozen=True)
class _Transitions:
    """Off-diagonal rates of a bursty tier's chain: ``Q[src, dst] += rate``; per state its
    level ``n``, its completion rate and ``prior``, the log-likelihood of its phases within
    its level (where to anchor the linear solve, :func:`_anchor`). Arrival transitions
    (``up``) carry rate 1 here; :func:`_with_arrivals` sets ``lam[n]``."""

    src: np.ndarray
    dst: np.ndarray
    rate: np.ndarray
    up: np.ndarray
    level: np.ndarray
    exit: np.ndarray
    prior: np.ndarray

    def with_arrivals(self, lam: np.ndarray) -> np.ndarray:
        """The rates with arrivals at ``lam[n]`` from level ``n``."""
        rate = self.rate.copy()
        rate[self.up] *= lam[self.level[self.src[self.up]]]
        return rate


def _speed_scaled(N: int, proc: MAP, cores: int) -> _Transitions:
    """One MAP shared by the cores at speed ``s = min(n, c)`` (:mod:`solvers.mapqn`'s station):
    state ``n K + phi``; arrivals ``(n, phi) -> (n+1, phi)``; hidden phase changes
    ``s D0[phi, phi']``; completions ``(n, phi) -> (n-1, phi')`` at ``s D1[phi, phi']``.
    Exact for one core: the tier runs its service sequence in order."""
    K = proc.order
    n = np.repeat(np.arange(N + 1), K)
    phi = np.tile(np.arange(K), N + 1)
    speed = np.minimum(n, cores).astype(float)
    state = n * K + phi
    parts = [(state[n < N], state[n < N] + K, np.ones(int((n < N).sum())))]
    for i in range(K):
        for j in range(K):
            at = phi == i
            if i != j and proc.D0[i, j] > 0:
                parts.append((state[at], state[at] + j - i, speed[at] * proc.D0[i, j]))
            down = at & (n > 0)
            if proc.D1[i, j] > 0:
                parts.append((state[down], state[down] - K + j - i, speed[down] * proc.D1[i, j]))
    src, dst, rate = (np.concatenate(x) for x in zip(*parts))
    up = np.zeros(src.shape[0], dtype=bool)
    up[: int((n < N).sum())] = True
    with np.errstate(divide="ignore"):
        prior = np.log(proc.theta)[phi]
    return _Transitions(src, dst, rate, up, n, speed * proc.D1.sum(axis=1)[phi], prior)


def _compositions(m: int, K: int) -> list[tuple[int, ...]]:
    """Every ``k`` in ``N^K`` with ``sum(k) = m``."""
    if K == 1:
        return [(m,)]
    return [(first,) + rest for first in range(m, -1, -1)
            for rest in _compositions(m - first, K - 1)]


#: a two-phase per-job station resolves the count of in-service jobs in phase 2 exactly up to
#: this many busy cores; beyond, on a grid of ``PHASE_COUNT_BINS + 1`` counts (:func:`_counts`)
PHASE_COUNT_BINS = 32


def _counts(m: int, K: int) -> list[tuple[int, ...]]:
    """The phase counts a level with ``m`` jobs in service resolves: every composition
    (:func:`_compositions`), or for ``K = 2`` and ``m >`` :data:`PHASE_COUNT_BINS` the
    compositions ``(m - g, g)`` with ``g`` on the grid ``round(j m / B)``, ``j = 0..B``."""
    if K != 2 or m <= PHASE_COUNT_BINS:
        return _compositions(m, K)
    grid = [round(j * m / PHASE_COUNT_BINS) for j in range(PHASE_COUNT_BINS + 1)]
    return [(m - g, g) for g in grid]


def _spread(k: tuple[int, ...], where: dict[tuple[int, ...], int],
            counts: list[tuple[int, ...]]) -> list[tuple[tuple[int, ...], float]]:
    """An exact phase count ``k`` as the resolved counts it lands on, with weights: itself,
    or (binned, :func:`_counts`) the two grid points around its count in phase 2, linearly
    (the expected count is kept: a move of one job between phases reaches the next grid
    point ``g`` apart at ``1/g`` of its rate and otherwise keeps the count)."""
    if k in where:
        return [(k, 1.0)]
    g = k[1]
    hi = next(c for c in counts if c[1] > g)
    lo = counts[counts.index(hi) - 1]
    w = (g - lo[1]) / (hi[1] - lo[1])
    return [(lo, 1.0 - w), (hi, w)]


def _log_multinomial(k: tuple[int, ...], log_p: np.ndarray) -> float:
    terms = [ki * lp for ki, lp in zip(k, log_p) if ki > 0]
    return float(gammaln(sum(k) + 1) - sum(gammaln(ki + 1) for ki in k) + sum(terms))


def _per_job(N: int, proc: MAP, cores: int, heads: _Memo | None = None) -> _Transitions:
    """Each job in service carries its own phase ("count the jobs in service per phase").

    State ``(n, k, s)``: ``n`` jobs, ``k_i`` of the ``min(n, c)`` jobs in service in phase
    ``i``, ``s`` the phase the next job to start begins in. A job's service is the MAP's
    interval from its start phase (phase type ``(e_s, D0)``, completing at ``D1 1``); start
    phases follow the MAP's embedded chain ``P = (-D0)^{-1} D1``, so a run of slow services
    in the tier's sequence reaches the cores one job at a time, as on the physical tier, and a
    job already in service keeps its own speed. The MAP's coupling of an interval's length with
    the next start phase is not kept (exact marginals and start-phase chain). The transitions
    out of levels ``0..c+1`` (:func:`_per_job_head`) are those of every chain with more
    levels; the levels above repeat level ``c + 1``'s (kept in ``heads``, if given)."""
    K = proc.order
    comps = [_counts(m, K) for m in range(cores + 1)]
    size = [len(c) * K for c in comps]
    start = np.zeros(N + 2, dtype=np.int64)
    for n in range(N + 1):
        start[n + 1] = start[n] + size[min(n, cores)]
    with np.errstate(divide="ignore"):
        log_theta, log_start = np.log(proc.theta), np.log(proc.embedded)
    prior_of = [np.array([_log_multinomial(k, log_theta) + log_start[s] for k in c
                          for s in range(K)]) for c in comps]
    level = np.repeat(np.arange(N + 1), np.diff(start))
    exit_rate = np.zeros(int(start[-1]))
    prior = np.concatenate([prior_of[min(n, cores)] for n in range(min(N, cores) + 1)]
                           + [np.tile(prior_of[cores], max(N - cores, 0))])
    full = min(N, cores + 1)            # levels above it repeat level cores + 1's pattern
    src_a, dst_a, rate_a, up_a, head_exit = _per_job_head(N, proc, cores, heads)
    exit_rate[: head_exit.shape[0]] = head_exit
    if N > full:                        # tile level `full`'s pattern over the higher levels
        lo, hi = start[full], start[full + 1]
        from_full = (src_a >= lo) & (src_a < hi)
        shifts = np.arange(1, N - full + 1) * (hi - lo)
        tile_src = (src_a[from_full][None, :] + shifts[:, None]).ravel()
        tile_dst = (dst_a[from_full][None, :] + shifts[:, None]).ravel()
        tile_up = np.tile(up_a[from_full], (N - full, 1))
        keep = np.ones_like(tile_up)
        keep[-1] = ~up_a[from_full]                        # no arrival from level N
        keep = keep.ravel()
        src_a = np.concatenate([src_a, tile_src[keep]])
        dst_a = np.concatenate([dst_a, tile_dst[keep]])
        rate_a = np.concatenate([rate_a, np.tile(rate_a[from_full], N - full)[keep]])
        up_a = np.concatenate([up_a, tile_up.ravel()[keep]])
        exit_rate[hi:] = np.tile(exit_rate[lo:hi], N - full)
    return _Transitions(src_a, dst_a, rate_a, up_a, level, exit_rate, prior)


class _Memo:
    """A bounded memo of values that depend on their key only (read-only arrays): emptied when
    ``limit`` keys are held."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self._held.get(key)

    def put(self, key: Any, value: Any) -> Any:
        if len(self._held) >= self.limit:
            self._held.clear()
        self._held[key] = value
        return value


class SolveMemo:
    """What the solves of one model share (a capacity search's probes, the prediction at the
    current users): pass the same one to :func:`solve_decomposed` for each. Its entries
    depend on their key only, never on ``N`` (module notes, *What a capacity search's probes
    share*), so sharing changes no answer:

    * ``heads`` -- the per-job chains' transitions out of levels ``0..c+1``
      (:func:`_per_job_head`) by service process and cores, the same for every population
      above ``c + 1``;
    * ``prefixes`` -- ``log G_E(k)`` and ``E[n_m | k users]`` of the exponential part by
      (means, cores, ``Z``), computed at the largest ``N`` asked (:func:`_shared_prefix`).

    Bounded (32 and 64 keys, emptied when full); not for use by two threads at once."""

    def __init__(self) -> None:
        self.heads = _Memo(32)
        self.prefixes = _Memo(64)


def _per_job_head(N: int, proc: MAP, cores: int,
                  heads: _Memo | None) -> tuple[np.ndarray, ...]:
    """:func:`_per_job`'s transitions ``(src, dst, rate, up)`` out of levels
    ``0..min(N, c + 1)`` and those levels' completion rates, built state by state; for
    ``N > c + 1`` they do not depend on ``N`` and are kept in ``heads``
    (:class:`SolveMemo`), if given."""
    if N <= cores + 1 or heads is None:
        return _per_job_states(min(N, cores + 2), proc, cores)
    key = (cores, PHASE_COUNT_BINS, proc.D0.tobytes(), proc.D1.tobytes())
    held = heads.get(key)
    return held if held is not None else heads.put(key, _per_job_states(cores + 2, proc, cores))


def _per_job_states(N: int, proc: MAP, cores: int) -> tuple[np.ndarray, ...]:
    """:func:`_per_job_head` state by state (module notes of :func:`_per_job`)."""
    K = proc.order
    P = np.linalg.solve(-proc.D0, proc.D1)
    d1 = proc.D1.sum(axis=1)
    comps = [_counts(m, K) for m in range(cores + 1)]
    where = [{k: i for i, k in enumerate(c)} for c in comps]
    size = [len(c) * K for c in comps]
    full = min(N, cores + 1)
    start = np.zeros(full + 3, dtype=np.int64)
    for n in range(full + 2):
        start[n + 1] = start[n] + size[min(n, cores)]

    def index(n: int, k: tuple[int, ...], s: int) -> int:
        return int(start[n] + where[min(n, cores)][k] * K + s)

    def spread(n: int, k: tuple[int, ...]) -> list[tuple[tuple[int, ...], float]]:
        m = min(n, cores)
        return _spread(k, where[m], comps[m])

    src: list[int] = []
    dst: list[int] = []
    rate: list[float] = []
    up: list[bool] = []
    exit_rate = np.zeros(int(start[full + 1]))

    def add(a: int, b: int, r: float, arrival: bool = False) -> None:
        if r > 0:
            src.append(a)
            dst.append(b)
            rate.append(r)
            up.append(arrival)

    def bump(k: tuple[int, ...], i: int, by: int) -> tuple[int, ...]:
        return k[:i] + (k[i] + by,) + k[i + 1:]

    for n in range(full + 1):
        for k in comps[min(n, cores)]:
            for s in range(K):
                here = index(n, k, s)
                exit_rate[here] = float(np.dot(k, d1))
                if n < N:
                    if n < cores:
                        for to, w in spread(n + 1, bump(k, s, 1)):
                            for t in range(K):
                                add(here, index(n + 1, to, t), w * P[s, t], True)
                    else:
                        add(here, index(n + 1, k, s), 1.0, True)
                for i in range(K):
                    if k[i] == 0:
                        continue
                    for j in range(K):
                        if j != i:
                            for to, w in spread(n, bump(bump(k, i, -1), j, 1)):
                                if to != k:               # a binned move may keep the count
                                    add(here, index(n, to, s), w * k[i] * proc.D0[i, j])
                    if n > cores:
                        for to, w in spread(n - 1, bump(bump(k, i, -1), s, 1)):
                            for t in range(K):
                                add(here, index(n - 1, to, t), w * k[i] * d1[i] * P[s, t])
                    else:
                        for to, w in spread(n - 1, bump(k, i, -1)):
                            add(here, index(n - 1, to, s), w * k[i] * d1[i])
    out = (np.array(src), np.array(dst), np.array(rate), np.array(up), exit_rate)
    for arr in out:
        arr.setflags(write=False)
    return out


def _per_job_applies(proc: MAP, cores: int, max_cores: int) -> bool:
    """Per-job phases on a bursty multi-core tier (up to ``max_cores`` cores); one MAP at
    speed ``min(n, c)`` otherwise."""
    return 1 < cores <= max_cores and proc.order > 1


def _level_states(proc: MAP, busy: int) -> int:
    """States of a per-job chain's level with ``busy`` jobs in service: their phase counts
    (:func:`_counts`: ``C(busy + K - 1, K - 1)`` compositions, or a grid of them) times the
    next job's start phase (``K``)."""
    return len(_counts(busy, proc.order)) * proc.order


def _departure_phases(proc: MAP, cores: int) -> int:
    """Phases of a per-job chain's lumped departure process: the states of its levels
    ``0..c + 1`` (:func:`solvers.departures.lumping`)."""
    return sum(_level_states(proc, min(n, cores)) for n in range(cores + 2))


def _per_job_affordable(proc: MAP, cores: int, levels: int) -> bool:
    """Whether the per-job chain on ``levels`` levels is within :data:`PER_JOB_MAX_BYTES`:
    ``d`` states a level once every core is busy (:func:`_level_states`), and the band of
    ``Q^T`` (arrivals about ``d`` indices below the diagonal, completions ``d + K`` above; LAPACK
    stores ``2 l + u + 1`` rows) about ``3 d + 3`` doubles a state."""
    d = _level_states(proc, cores)
    return levels * d * (3 * d + 3) * 8 <= PER_JOB_MAX_BYTES


#: levels of a bursty tier's chain solved first (a longer per-job chain: :func:`_first_levels`);
#: grown while the top tenth holds more than TRUNCATION_MASS of the probability
FIRST_LEVELS = 512
TRUNCATION_MASS = 1e-14
#: relative residual ||pi Q|| / max|q_ii| above which a chain's solution is rejected
RESIDUAL_LIMIT = 1e-8
#: levels below this fraction of the likeliest level's probability are not resolved by the
#: solve (relative error); their conditional throughput is extrapolated (:func:`_fill`)
RELIABLE_LEVEL = 1e-10


class _Patterns:
    """The transition patterns of one solve's bursty chains, by (tier, levels, per-job): built
    once per solve, reused by every fixed-point iteration (only the arrivals change), with the
    latest factorisation of each (:class:`_FactorStore`)."""

    def __init__(self, memo: SolveMemo | None = None,
                 max_cores: int = PER_JOB_MAX_CORES) -> None:
        self.memo = memo if memo is not None else SolveMemo()
        self.max_cores = max_cores        # per-job phases up to this many cores
        self._built: dict[tuple[int, int, int, bool], _Transitions] = {}
        self._stores: dict[tuple[int, int, int, bool], _FactorStore] = {}
        self._refusals: dict[tuple[int, int], str | None] = {}
        self.target = REFINE_RESIDUAL     # the refinements' residual in this sweep

    def refuse(self, proc: MAP, cores: int, station: str) -> None:
        """Solve this tier with the speed-scaled station for the whole solve, named
        ``station`` (``"speed-scaled (<why>)"``)."""
        self._refusals[(id(proc), cores)] = station

    def refusal(self, proc: MAP, cores: int, levels: int) -> str | None:
        """Why a per-job tier is the speed-scaled station in this solve (``None``: it is not),
        decided at its first truncation (:func:`_per_job_affordable`) unless :meth:`refuse`
        set it before; the same answer for the rest of the solve (its sweeps and rounds keep
        one station a tier)."""
        key = (id(proc), cores)
        if key not in self._refusals:
            self._refusals[key] = None if _per_job_affordable(proc, cores, levels) else \
                "speed-scaled (per-job chain over budget)"
        return self._refusals[key]

    def get(self, proc: MAP, cores: int, levels: int, per_job: bool) -> _Transitions:
        key = (id(proc), cores, levels, per_job)
        if key not in self._built:
            self._built[key] = (_per_job(levels, proc, cores, self.memo.heads) if per_job
                                else _speed_scaled(levels, proc, cores))
        return self._built[key]

    def store(self, proc: MAP, cores: int, levels: int, per_job: bool) -> _FactorStore:
        store = self._stores.setdefault((id(proc), cores, levels, per_job), _FactorStore())
        store.target = self.target
        return store


def _solve_chain(lam: np.ndarray, proc: MAP, cores: int, per_job: bool = True,
                 patterns: _Patterns | None = None, first: int | None = None) -> _Chain:
    """:func:`_solve_levels` on levels ``0..L``, ``L`` grown from ``first`` (default
    :data:`FIRST_LEVELS`, or ``N`` when ``N`` is at most twice that; for a longer per-job
    chain, where the speed-scaled chain needs its levels: :func:`_first_levels`) by
    :func:`_more_levels` until the levels above ``0.9 L`` hold at most :data:`TRUNCATION_MASS`
    (or ``L = N``); levels above ``L`` get probability 0 and the nearest level's conditional
    throughput. A per-job chain beyond :data:`PER_JOB_MAX_BYTES` at its first truncation (then
    taken where the speed-scaled chain needs its levels, whatever ``N``) is the speed-scaled
    station, ``"speed-scaled (per-job chain over budget)"``."""
    N = lam.shape[0] - 1
    patterns = patterns or _Patterns()
    pj = per_job and _per_job_applies(proc, cores, patterns.max_cores)
    station = None
    if first is None:
        first = max(FIRST_LEVELS, 8 * cores)
        if pj and (N > 2 * first or not _per_job_affordable(proc, cores, N)):
            first = min(N, _first_levels(lam, proc, cores, first))
        elif N <= 2 * first:
            first = N
        station = patterns.refusal(proc, cores, first) if pj else None
        pj = pj and station is None
    top = min(first, N)
    while True:
        cut = lam[: top + 1].copy()
        cut[top] = 0.0
        chain = _solve_levels(cut, proc, cores, patterns.get(proc, cores, top, pj), pj,
                              patterns.store(proc, cores, top, pj))
        if station is not None:
            chain = dataclasses.replace(chain, station=station)
        if chain.residual > RESIDUAL_LIMIT and chain.station == "per-job":
            # the banded LU lost the per-job chain: the speed-scaled station, flagged
            chain = _solve_levels(cut, proc, cores, patterns.get(proc, cores, top, False), False)
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
    return _Chain(level, nu, chain.throughput, chain.residual, chain.station, top, enough,
                  chain.pi, chain.transitions, chain.lam, chain.rate)


def _first_levels(lam: np.ndarray, proc: MAP, cores: int, first: int) -> int:
    """The first truncation of a per-job chain on ``N`` levels: where the speed-scaled
    station's chain on all ``N`` levels (``K`` states a level, not ``(c + 1) K``: a few ms at
    thousands of levels) needs its levels (:func:`_enough_levels`), at least ``first``. Its
    queue is the heavier (module notes), so the per-job chain's truncation check passes at
    once: 4 tiers with 16- and 8-core bursty tiers at 2,000-5,000 users, 1,088-4,057 levels
    where the per-job chain needs 1,058-3,995; the per-job chain on 512 levels first, then on
    all ``N`` (the top tenth of a too-short truncation does not decay, so its extrapolation
    gave up), cost two factorisations, one of them of every level. ``first`` if the
    speed-scaled chain does not solve."""
    N = lam.shape[0] - 1
    cut = lam.copy()
    cut[N] = 0.0
    try:
        chain = _solve_levels(cut, proc, cores, _speed_scaled(N, proc, cores), False)
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


def _solve_levels(lam: np.ndarray, proc: MAP, cores: int, tr: _Transitions,
                  per_job: bool, store: _FactorStore | None = None) -> _Chain:
    """Stationary distribution of the bursty tier's chain on levels ``0..len(lam) - 1``.

    With a ``store`` holding the factorisation of the same pattern from an earlier sweep of
    the fixed point (only the arrival rates ``lam`` differ), the solution is refined from that
    sweep's by preconditioned iterations (:func:`_refine`); otherwise, or when they do not
    contract, by a fresh banded LU (:func:`_factor_and_solve`), kept in ``store``."""
    N = lam.shape[0] - 1
    rate = tr.with_arrivals(lam)
    S = tr.level.shape[0]
    out = np.bincount(tr.src, weights=rate, minlength=S)
    x = _refine(store, tr, rate, out) if store is not None and store.factor else None
    if x is None:
        x, factor = _factor_and_solve(lam, proc, cores, tr, rate, out)
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
    residual = _chain_residual(tr, rate, out, pi, float(np.max(out)))
    return _Chain(level, _fill(nu, proc, cores), float(flow.sum()), residual,
                  "per-job" if per_job else "speed-scaled", N, pi=pi, transitions=tr, lam=lam,
                  rate=rate)


@dataclass
class _Factor:
    """A banded LU (LAPACK ``dgbtrf``) of a chain's ``Q^T`` with row ``anchor`` replaced by
    ``x_anchor = 1``, and the latest solution ``x`` of a chain with that pattern."""

    lub: np.ndarray
    piv: np.ndarray
    lower: int
    upper: int
    anchor: int
    x: np.ndarray


@dataclass
class _FactorStore:
    """Per pattern (tier, levels, station) of one solve: the last factorisation, the residual
    its refinements stop at in this sweep, and the transitions sorted by destination (``Q^T``
    in CSR form; only the rates change)."""

    factor: _Factor | None = None
    target: float = 1e-12
    order: np.ndarray | None = None
    indptr: np.ndarray | None = None
    indices: np.ndarray | None = None


#: a refinement stops at this stationary residual ``||pi Q||_1 / max |q_ii|`` (a fresh LU
#: reaches 1e-15..1e-13), or at up to REFINE_LOOSE while the fixed point is far from converged
#: (:func:`_refine_target`); it is abandoned for a fresh LU after REFINE_STEPS iterations, or
#: as soon as one iteration shrinks the residual by less than half
REFINE_RESIDUAL = 1e-12
REFINE_LOOSE = 1e-10
REFINE_STEPS = 12


def _refine(store: _FactorStore, tr: _Transitions, rate: np.ndarray,
            out: np.ndarray) -> np.ndarray | None:
    """Solve ``A x = e_anchor`` (``A``: ``Q^T`` with the anchor's row replaced) by iterative
    refinement preconditioned with an earlier sweep's LU ``M`` of the same pattern:
    ``x <- x + M^{-1} (e_anchor - A x)``, from that sweep's solution. It contracts by about
    the relative change of the arrival rates between the sweeps, so a late sweep of the fixed
    point costs a few triangular solves and products with ``Q^T`` instead of a factorisation.
    ``None`` when it does not converge (the caller factorises afresh)."""
    f = store.factor
    S = out.shape[0]
    if store.order is None:
        store.order = np.argsort(tr.dst, kind="stable")
        store.indices = tr.src[store.order].astype(np.int64)
        store.indptr = np.concatenate([[0], np.cumsum(np.bincount(tr.dst, minlength=S))])
    qt = csr_array((rate[store.order], store.indices, store.indptr), shape=(S, S))
    scale = float(np.max(out)) or 1.0
    x, last = f.x.copy(), math.inf
    for _ in range(REFINE_STEPS):
        r = -(qt @ x - out * x)
        r[f.anchor] = 1.0 - x[f.anchor]
        err = float(np.abs(r).sum()) / (scale * float(np.abs(x).sum()))
        if not math.isfinite(err) or err > 0.5 * last:
            return None
        if err <= store.target:
            return x
        step, info = dgbtrs(f.lub, f.lower, f.upper, r, f.piv)
        if info != 0:
            return None
        x, last = x + step, err
    return None


def _factor_and_solve(lam: np.ndarray, proc: MAP, cores: int, tr: _Transitions,
                      rate: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, _Factor]:
    """One banded LU of ``Q^T`` with the probability of one likely state (:func:`_anchor`)
    fixed to 1, re-solved from the most likely state of the solution if that one was a poor
    anchor (over/underflow, cancellation). Returns the solution and its factorisation."""
    S = tr.level.shape[0]
    # A = Q^T in LAPACK band storage, A[i, j] at ab[l + u + i - j, j] (the first l rows are
    # dgbtrf's room for fill-in): l sub-diagonals (arrivals move up one level), u
    # super-diagonals (completions reach across two levels' indices)
    l, u = max(int(np.max(tr.dst - tr.src)), 1), max(int(np.max(tr.src - tr.dst)), 1)
    flat = (l + u + tr.dst - tr.src) * S + tr.src
    anchor = _anchor(lam, proc, cores, tr)
    for _ in range(4):                  # built afresh each time: dgbtrf overwrites it
        a = np.bincount(flat, weights=rate, minlength=(2 * l + u + 1) * S).reshape(-1, S)
        a[l + u] -= out
        cols = np.arange(max(anchor - l, 0), min(anchor + u, S - 1) + 1)
        a[l + u + anchor - cols, cols] = 0.0              # row `anchor` of A: x_anchor = 1
        a[l + u, anchor] = 1.0
        rhs = np.zeros(S)
        rhs[anchor] = 1.0
        with np.errstate(all="ignore"):
            lub, piv, info = dgbtrf(a, l, u, overwrite_ab=1)
            x = dgbtrs(lub, l, u, rhs, piv)[0] if info == 0 else np.full(S, np.nan)
        finite = np.isfinite(x)
        biggest = float(np.max(np.where(finite, x, -np.inf)))
        if (finite.all() and biggest < 1e150 and x[anchor] >= 1e-6 * biggest
                and float(x.min()) >= -1e-9 * biggest):
            break
        top = int(np.argmax(np.where(finite, x, -np.inf)))
        if not finite[top] or top == anchor:
            break
        anchor = top
    if not np.all(np.isfinite(x)):
        raise RuntimeError("decomposition: the bursty tier's chain could not be solved")
    return x, _Factor(lub, piv, l, u, anchor, x)


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


def _chain_residual(tr: _Transitions, rate: np.ndarray, out: np.ndarray, pi: np.ndarray,
                    scale: float) -> float:
    """``||pi Q||_1 / max |q_ii|``."""
    inflow = np.bincount(tr.dst, weights=rate * pi[tr.src], minlength=pi.shape[0])
    return float(np.abs(inflow - pi * out).sum() / (scale or 1.0))


def _anchor(lam: np.ndarray, proc: MAP, cores: int, tr: _Transitions) -> int:
    """The likeliest state (by its phase prior) of the most likely level under the exponential
    equivalent: ``P(n) ~ prod lam(i-1)/mu(i)``, ``mu(i) = min(i, c)/E[S]``. A state of
    negligible probability as anchor makes the solve cancel (seen at 16 cores, I ~ 200)."""
    N = lam.shape[0] - 1
    i = np.arange(1, N + 1)
    with np.errstate(divide="ignore"):
        steps = np.log(lam[:-1]) - np.log(np.minimum(i, cores) / proc.mean)
    logp = np.concatenate([[0.0], np.cumsum(steps)])
    n = int(np.argmax(logp))
    first = int(np.searchsorted(tr.level, n))
    last = int(np.searchsorted(tr.level, n, side="right"))
    return first + int(np.argmax(tr.prior[first:last]))


# ------------------------------------------------------------------------------- the solver
def _rest_log_g(lg_e: np.ndarray, weights: dict[int, tuple[np.ndarray, float | None]],
                skip: int | None) -> np.ndarray:
    lg = lg_e
    for b, (head, lratio) in weights.items():
        if b != skip:
            lg = _convolve(lg, head, lratio)
    return lg


def _arrivals(lg_rest: np.ndarray, held: float = 0.0) -> np.ndarray:
    """``lam[n] = X_rest(N - n - held)``: the rest's throughput with the users neither at the
    tier nor ``held`` in the waves downstream of the bursty tiers (:func:`_waves`;
    linear between populations)."""
    ratio = _ratio(lg_rest)
    if held <= 0:
        return ratio[::-1].copy()
    N = lg_rest.shape[0] - 1
    k = np.arange(N + 1, dtype=float)
    return np.interp(N - k - held, k, ratio, left=0.0)


#: past sweeps kept by the fixed point's Anderson acceleration
ANDERSON_MEMORY = 5
#: Anderson forgets its history when the residual grows past this factor of the smallest seen
RESTART = 2.0
#: once they swing (:func:`_swinging`), the users held downstream (step 4) enter Anderson's
#: iterate in units of this share of N: taken plain after each sweep they swung the sweeps (a
#: web tier's throughput between 8,670 and 9,280/s for 50 sweeps while the held users went
#: 4.4 <-> 6.1 of 1,008 users) -- docs/benchmarks.md
HELD_UNIT = 0.01


def _swinging(moves: list[float]) -> bool:
    """Whether the held users' last three moves (new minus old, one per sweep) alternate in
    sign. Only then are they extrapolated with ``log nu``: from the first sweep on, Anderson's
    restarts cycled solves that the plain update settles in a few sweeps (a provisional
    two-bursty model at 4,337 users, 11 -> 77 sweeps)."""
    return len(moves) >= 3 and moves[-1] * moves[-2] < 0 and moves[-2] * moves[-3] < 0


class _Anderson:
    """Anderson acceleration (type II; Walker & Ni, SIAM J. Numer. Anal. 2011) of the fixed
    point ``x = G(x)``: the next iterate is ``G(x_k) - dG gamma`` with ``gamma`` the least
    squares fit of the latest residual ``f_k = G(x_k) - x_k`` by the differences ``dF`` of the
    last :data:`ANDERSON_MEMORY` residuals. Marie's iteration converges linearly (ratio ~0.9 at
    the knee of two bursty tiers); this takes it there in a few sweeps.

    Safeguard: when the residual's largest entry grows past :data:`RESTART` times the smallest
    seen, the history is dropped and the sweep taken plain. Without it an extrapolation could
    send a lightly loaded bursty tier's ``nu`` far off and keep it there (a web tier at 23% of
    its 8 cores before a saturated database, 2,664 users: its throughput swung between 92/s
    and 1,738/s over 35 sweeps; plain sweeps took 11). On docs/benchmarks.md's networks (three
    from the pipeline, system (c) at 200-750 users, 4 tiers with 2 bursty at 1,000-5,000) the
    sweeps went from 185 in all to 158: 16 / 35 / 12 -> 18 / 15 / 12 on the pipeline's, 39 -> 32
    at 5,000 users, 73 -> 71 on system (c)."""

    def __init__(self) -> None:
        self._x: list[np.ndarray] = []
        self._g: list[np.ndarray] = []
        self._smallest = math.inf

    def next(self, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        residual = float(np.max(np.abs(g - x)))
        if residual > RESTART * self._smallest:
            self._x, self._g = [], []
        self._smallest = min(self._smallest, residual)
        self._x, self._g = (self._x + [x])[-ANDERSON_MEMORY - 1:], \
            (self._g + [g])[-ANDERSON_MEMORY - 1:]
        if len(self._x) < 2:
            return g
        f = np.array([gi - xi for gi, xi in zip(self._g, self._x)])
        dF, dG = np.diff(f, axis=0).T, np.diff(np.array(self._g), axis=0).T
        gamma = np.linalg.lstsq(dF, f[-1], rcond=None)[0]
        out = g - dG @ gamma
        return out if np.all(np.isfinite(out)) else g


#: the combined sweeps (step 4 within Marie's sweeps) may stop from this sweep on once the
#: answer has settled (:func:`_settled`) although another bursty tier's throughput still moves
#: by up to SETTLE_OTHERS a sweep. On a 16-64-core capture (docs/benchmarks.md) the held users
#: moved the web tier's throughput by 1e-4 to 3e-2 a sweep from sweep ~31 to 50 while the
#: database's (the answer) stood at 7,114.6/s; the rounds after the 50 took the solve to 82
#: sweeps. From sweep 20 only, a guard (not tuned): early on one tier can be far off while
#: another barely moves (there the web's throughput rose 2,090 -> 4,760/s over the first seven
#: sweeps while the database's moved by 8e-5 to 7e-3 a sweep)
SETTLE_SWEEPS = 20
SETTLE_OTHERS = 1e-3


#: ... or, from SETTLE_SWEEPS on while the held users swing (:func:`_swinging`), once the
#: reference tier's throughput has stayed within SWING_SPAN (relative) over the last
#: SWING_SWEEPS sweeps (:func:`_bounded_swing`). On the 16-64-core workload's captures
#: (docs/benchmarks.md) the held users swing 4.3 <-> 6.1 for as long as the sweeps run and the
#: database's throughput (the answer) with them by up to 4e-4 a sweep, never within the
#: tolerance, so neither stop held there and rounds took those solves to 80-111 sweeps; the
#: answers they reached lie within 4.4e-4 of where this stops (at 20-29 sweeps)
SWING_SWEEPS = 10
SWING_SPAN = 1e-3
#: how the flag of a stop in a bounded swing begins (the pipeline leaves it out of a
#: prediction's flags: within SWING_SPAN, below the model's own error)
SWING_FLAG = "fixed point stopped in a bounded swing"


def _bounded_swing(references: list[float]) -> float | None:
    """The spread (max - min over max) of the reference tier's throughput over the last
    :data:`SWING_SWEEPS` sweeps when it is at most :data:`SWING_SPAN`, else ``None``."""
    last = references[-SWING_SWEEPS:]
    if len(last) < SWING_SWEEPS:
        return None
    spread = (max(last) - min(last)) / max(max(last), 1e-300)
    return spread if spread <= SWING_SPAN else None


def _settled(chains: dict[int, _Chain], changes: dict[int, float], tol: float, ref: int) -> bool:
    """Whether a sweep left the reference tier's throughput (the bursty tier holding the most
    jobs: the answer, :func:`_read_back`) within ``tol`` of the sweep before and every other
    bursty tier's within :data:`SETTLE_OTHERS` (``ref``: the reference tier, :func:`_reference`).
    A web tier whose throughput rises ~360/s per user held after it (module notes, step 4)
    keeps moving by 1e-4 of it and more while the held users settle within :data:`WAVE_TOL`
    of N: its last digits, not the answer's."""
    if len(changes) < len(chains):
        return False
    return changes[ref] <= tol and max(changes.values()) <= SETTLE_OTHERS


def _reference(chains: dict[int, _Chain], tiers: list[int], N: int) -> int:
    """The reference tier: of ``tiers``, the bursty tier whose chain holds the most jobs
    (module notes)."""
    n = np.arange(N + 1)
    return max(tiers, key=lambda b: float(chains[b].level @ n))


def _fixed_point(lg_e: np.ndarray, procs: list[MAP], cores: tuple[int, ...], bursty: list[int],
                 N: int, tol: float, max_iterations: int, flags: list[str], held: float = 0.0,
                 start: dict[int, np.ndarray] | None = None, patterns: _Patterns | None = None,
                 on_sweep: Callable[[dict[int, _Chain], dict[int, np.ndarray]], float] | None
                 = None, order: list[int] | None = None
                 ) -> tuple[dict[int, _Chain], dict[int, np.ndarray], int, bool]:
    """Marie's iteration over the bursty tiers (module notes, step 3): one sweep solves each
    bursty tier's chain against the others' conditional throughputs ``nu`` (from ``start``,
    else the exponential equivalents), ``held`` users out of the rest (step 4; with
    ``on_sweep``, the users held after each sweep, updated with the sweeps until they move by
    at most :data:`WAVE_TOL` of N, or once the answer has settled: :func:`_settled`, or
    swings within a bound while they do: :func:`_bounded_swing`); the
    sweeps are Anderson-accelerated on ``log nu`` -- and,
    once the held users swing (:func:`_swinging`), on them too, in units of :data:`HELD_UNIT`
    of N -- and solve the tiers in ``order`` (:func:`_sweep_order`; default: visit order)."""
    n = np.arange(N + 1)
    nu = dict(start) if start else {b: np.minimum(n, cores[b]) / procs[b].mean for b in bursty}
    chains: dict[int, _Chain] = {}
    fallback: dict[int, str] = {}        # tier -> its speed-scaled station's reason
    patterns = patterns or _Patterns()
    anderson = _Anderson()
    change = math.inf
    order = order or bursty
    unit, moves, swinging = max(HELD_UNIT * N, 1.0), [], False
    references: list[float] = []            # the reference tier's throughput, per sweep
    for it in range(1, max_iterations + 1):
        patterns.target = _refine_target(change)
        change = 0.0 if chains else math.inf
        changes: dict[int, float] = {}          # tier -> its throughput's relative change
        x = np.log(np.concatenate([nu[b][1:] for b in bursty]))
        weights = {o: _ld_weights(nu[o], N) for o in bursty}     # a tier's, anew once solved
        for b in order:
            lam = _arrivals(_rest_log_g(lg_e, weights, skip=b), held)
            chain = _solve_chain(lam, procs[b], cores[b], per_job=b not in fallback,
                                 patterns=patterns, first=_next_levels(chains.get(b)))
            if b in fallback:                  # one station for the rest of the iteration
                chain = dataclasses.replace(chain, station=fallback[b])
            elif chain.station.startswith("speed-scaled ("):
                fallback[b] = chain.station
            old = chains.get(b)
            if old is not None:
                changes[b] = abs(chain.throughput - old.throughput) / max(chain.throughput,
                                                                           1e-300)
                change = max(change, changes[b])
            chains[b], nu[b], weights[b] = chain, chain.nu, _ld_weights(chain.nu, N)
        moved, new = 0.0, held
        if on_sweep is not None:
            new = on_sweep(chains, nu)
            moved = abs(new - held)
        if len(bursty) == 1 and moved <= WAVE_TOL * N:
            return chains, nu, it, True
        if it > 1 and change <= tol and moved <= WAVE_TOL * N:
            return chains, nu, it, True
        if on_sweep is not None:
            ref = _reference(chains, list(chains), N)
            if (it >= SETTLE_SWEEPS and moved <= WAVE_TOL * N
                    and _settled(chains, changes, tol, ref)):
                return chains, nu, it, True
            references.append(chains[ref].throughput)
            spread = _bounded_swing(references) if swinging and it >= SETTLE_SWEEPS else None
            if spread is not None:
                flags.append(f"{SWING_FLAG} of the users held downstream at sweep {it}: the "
                             f"reference tier's throughput within {spread:.2g} over the last "
                             f"{SWING_SWEEPS}")
                return chains, nu, it, True
        g = np.log(np.concatenate([nu[b][1:] for b in bursty]))
        if on_sweep is not None:
            moves.append(new - held)
            if not swinging and _swinging(moves):    # the held users join the iterate
                swinging, anderson = True, _Anderson()
        if swinging:
            x, g = np.append(x, held / unit), np.append(g, new / unit)
        step = anderson.next(x, g)
        if swinging:
            held, step = min(max(float(step[-1]) * unit, 0.0), 0.5 * N), step[:-1]
        elif on_sweep is not None:
            held = new
        for b, part in zip(bursty, np.split(np.exp(step), len(bursty))):
            nu[b] = np.concatenate([[0.0], part])
    flags.append(f"fixed point not converged in {max_iterations} iterations "
                 f"(last relative change {change:.2g})")
    return chains, nu, max_iterations, False


#: a bursty tier is solved first in each sweep when its load per core ``E[S]/c`` is at least
#: this factor above every other tier's (:func:`_sweep_order`)
CLEAR_BOTTLENECK = 1.1


def _sweep_order(procs: list[MAP], cores: tuple[int, ...], bursty: list[int],
                 groups: dict[int, list[int]]) -> list[int]:
    """The order a sweep solves the bursty tiers in: visit order, except that a bursty tier
    that is clearly the network's bottleneck (:data:`CLEAR_BOTTLENECK`) goes first. It holds
    most users, and the others' arrivals are the rest's throughput with the users it holds
    (:func:`_arrivals`), so the sweep hands them its fresh ``nu``. ``groups``: the wave queues
    after each bursty tier (:func:`_downstream_groups`)."""
    load = [p.mean / c for p, c in zip(procs, cores)]
    top = max(bursty, key=lambda b: load[b])
    clear = all(load[top] >= CLEAR_BOTTLENECK * load[m] for m in range(len(procs)) if m != top)
    if clear and top not in groups:
        return [top] + [b for b in bursty if b != top]
    return list(bursty)


def _refine_target(change: float) -> float:
    """Residual to which a sweep refines its chains (inexact Picard iteration): a millionth
    of the fixed point's last relative change, between REFINE_RESIDUAL and REFINE_LOOSE
    (below RESIDUAL_LIMIT, at which a chain is rejected). A ten thousandth (and up to 1e-9)
    saved ~10% more at 5,000 users but left 4 tiers, 2 bursty at 6,500 users (beyond the
    knee) unconverged after 50 sweeps (main: 36)."""
    return min(max(1e-6 * change, REFINE_RESIDUAL), REFINE_LOOSE)


def _next_levels(last: _Chain | None) -> int | None:
    """The truncation of a tier's chain in the next sweep: the last one's (its factorisation is
    reused, :func:`_refine`) unless :func:`_enough_levels` is a quarter smaller."""
    if last is None:
        return None
    return last.enough if last.enough < 0.75 * last.levels else last.levels


def _trivial(procs: list[MAP], cores: tuple[int, ...], Z: float) -> DecompositionResult:
    M = len(procs)
    means = np.array([p.mean for p in procs])
    return DecompositionResult(0.0, float(means.sum()), means, np.zeros(M), np.zeros(M),
                               np.full(M, 1.0 / M), 0, Z, cores, 0, True, 0.0,
                               flags=("population is 0: nothing to solve",))


def solve_decomposed(processes: Any, population: Any, think_time: Any, *,
                     servers: Any = None, tol: float = 1e-6,
                     max_iterations: int = 50,
                     memo: SolveMemo | None = None,
                     per_job_max_cores: int = PER_JOB_MAX_CORES) -> DecompositionResult:
    """Closed network of MAP tiers with cores, by flow-equivalent decomposition (module notes).

    ``processes``: each tier's service process in visit order (``MAP.exponential(S)`` for an
    exponential tier); ``servers``: cores per tier (default 1); ``population`` ``N``;
    ``think_time`` ``Z``; ``tol``: relative change of the throughput between two sweeps of
    the fixed point at which it stops; ``memo``: what this solve may share with others of the
    same model (:class:`SolveMemo`; default: nothing shared); ``per_job_max_cores``: the
    most cores a bursty tier may have for the per-job station (default
    :data:`PER_JOB_MAX_CORES`, 64, the most measured against the simulated physical system;
    within :data:`PER_JOB_MAX_BYTES`, at 0.06-0.2 s a solve for 64 cores -- module notes).
    Raises ``ValueError`` naming the argument on bad input."""
    procs = _check_processes(processes)
    cores = _check_servers(servers, len(procs))
    per_job_max_cores = _check_count(per_job_max_cores, "per_job_max_cores")
    N = _check_count(population, "population")
    Z = _check_think(think_time)
    if N == 0:
        return _trivial(procs, cores, Z)
    t0 = time.perf_counter()
    flags: list[str] = []
    means = np.array([p.mean for p in procs])
    if Z == 0 and len(procs) == 1:          # nothing else: all N users always at the tier
        busy = min(N, cores[0])
        X = busy / means[0]
        return _result(X, np.array([float(N)]), np.array([busy / cores[0]]), np.ones(1), procs,
                       cores, N, Z, 0, True, flags, t0)
    bursty = [m for m, p in enumerate(procs) if p.order > 1]
    expo = [m for m in range(len(procs)) if m not in bursty]
    memo = memo if memo is not None else SolveMemo()
    lg_e = _shared_prefix(memo.prefixes, ("G_E", tuple(means[expo]),
                                          tuple(cores[m] for m in expo), Z), N,
                          lambda n: _log_g_exponential(means, cores, expo, n, Z),
                          [cores[m] for m in expo])
    if not bursty:
        return _product_form(procs, cores, expo, lg_e, N, Z, t0)
    flags += [f"tier {b}: {cores[b]} cores > per_job_max_cores {per_job_max_cores}: one MAP at "
              "speed min(n, c) (pessimistic)" for b in bursty if cores[b] > per_job_max_cores]
    groups = _downstream_groups(procs, bursty)
    patterns, held, nu, iterations = _Patterns(memo, per_job_max_cores), 0.0, None, 0
    order = _sweep_order(procs, cores, bursty, groups)
    for b in groups:
        if (_per_job_applies(procs[b], cores[b], per_job_max_cores)
                and _departure_phases(procs[b], cores[b]) > WAVE_MAX_PHASES):
            patterns.refuse(procs[b], cores[b], "speed-scaled (per-job departures too large "
                            "for the wave queues after it)")
    secant = _Secant()
    cache: dict[int, np.ndarray] = {}
    lumps: dict[int, tuple[_Transitions, Lumping]] = {}
    swept = False                          # Marie's sweeps reached step 4's point too
    if len(bursty) > 1 and groups:         # step 4 within Marie's sweeps
        box, tried = [0.0], []

        def on_sweep(chains: dict[int, _Chain], nu: dict[int, np.ndarray]) -> float:
            Q, _, _ = _read_back(chains, nu, means, cores, bursty, expo, N, Z, box[0], {}, memo,
                                 only=[m for tiers in groups.values() for m in tiers])
            waves = _waves(chains, groups, means, cores, tried, lumps, _room(chains, N, Z))
            box[0] = min(max(sum(q - Q[m] for m, q in waves.items()), 0.0), 0.5 * N)
            return box[0]

        chains, nu, iterations, converged = _fixed_point(
            lg_e, procs, cores, bursty, N, tol, max_iterations, tried, 0.0, None, patterns,
            on_sweep, order)
        swept = converged
        if swept:
            held, flags = box[0], flags + tried
        else:       # the held users swing the sweeps: by rounds below, from the start
            nu = None
    last: tuple[float, dict[int, float]] | None = None     # the last round's held, waves
    on_line: dict[int, float] | None = None
    for _ in range(WAVE_ITERATIONS):       # step 4 by rounds (one bursty tier, or none after)
        if not swept:
            chains, nu, sweeps, converged = _fixed_point(lg_e, procs, cores, bursty, N, tol,
                                                         max_iterations, flags, held, nu,
                                                         patterns, order=order)
            iterations += sweeps
        Q, conditional, ref = _read_back(chains, nu, means, cores, bursty, expo, N, Z, held,
                                         cache if len(bursty) == 1 else {}, memo)
        waves = on_line if on_line is not None else _waves(chains, groups, means, cores, flags,
                                                           lumps, _room(chains, N, Z))
        excess = sum(q - Q[m] for m, q in waves.items())
        for m, q in waves.items():
            Q[m], conditional[m] = q, q
        moved = abs(excess - held)
        if moved <= WAVE_TOL * N or swept or on_line is not None:
            break
        step = min(max(secant.next(held, excess), 0.0), 0.5 * N)
        if (last is not None and abs(step - excess) <= WAVE_TOL * N
                and abs(step - held) <= LINE_REACH * N):
            on_line = _waves_on_line(last, (held, waves), step)
        last, held = (held, waves), step
    else:
        flags.append(f"downstream waves not converged in {WAVE_ITERATIONS} iterations "
                     f"(held users moved by {moved:.3g})")
    level = chains[ref].level
    X = chains[ref].throughput
    U = X * means / np.array(cores, dtype=float)
    for b, chain in chains.items():
        U[b] = float(chain.level @ np.minimum(np.arange(N + 1), cores[b])) / cores[b]
        if chain.residual > RESIDUAL_LIMIT:
            flags.append(f"tier {b}: chain residual {chain.residual:.2g}")
        if chain.station.startswith("speed-scaled ("):
            flags.append(f"tier {b}: {chain.station}: one MAP at speed min(n, c), pessimistic")
    return _result(X, Q, U, _split_top(conditional, level), procs, cores, N, Z, iterations,
                   converged, flags, t0)


#: rounds of step 4 (the rest re-solved without the users held downstream) and their stop:
#: the held users move by at most this fraction of N
WAVE_ITERATIONS = 12
WAVE_TOL = 5e-5
#: the last round's wave queues come off a line (:func:`_waves_on_line`) only this fraction of
#: N or less from the round before's held users: read near a point the line passes through
LINE_REACH = 0.01


def _waves_on_line(a: tuple[float, dict[int, float]], b: tuple[float, dict[int, float]],
                   held: float) -> dict[int, float] | None:
    """The last round of step 4 without its ``MAP/M/c`` queues: each wave queue on the line
    through its values at the last two rounds' held users ``a, b``, read at ``held`` (the
    secant's). Taken when the secant moves at most :data:`WAVE_TOL` of N past the last
    round's excess ``g``: for ``g`` about linear in ``h`` a plain step from that round would
    then already stop, so this round is the last; its chains are still re-solved at
    ``held``, at most :data:`LINE_REACH` of N from the last round's. On system (d) at 735 users the excess moved 5.53 -> 5.35 held users between the
    first two rounds and the line's queues differ from a full round's by at most 2.2e-5
    (relative, 600-816 users). ``None`` when the two rounds do not have the same tiers."""
    (ha, qa), (hb, qb) = a, b
    if qa.keys() != qb.keys() or ha == hb:
        return None
    t = (held - ha) / (hb - ha)
    return {m: max(qa[m] + t * (qb[m] - qa[m]), 0.0) for m in qb}


class _Secant:
    """Secant steps on ``f(h) = g(h) - h`` for the users ``h`` held downstream (``g``: the
    excess the waves hold when the rest lacks ``h``); the first step is ``h = g(h)``."""

    def __init__(self) -> None:
        self._last: tuple[float, float] | None = None

    def next(self, h: float, g: float) -> float:
        last, self._last = self._last, (h, g - h)
        if last is None or last[1] == g - h:
            return g
        h0, f0 = last
        return h - (g - h) * (h - h0) / ((g - h) - f0)


def _read_back(chains: dict[int, _Chain], nu: dict[int, np.ndarray], means: np.ndarray,
               cores: tuple[int, ...], bursty: list[int], expo: list[int], N: int, Z: float,
               held: float, cache: dict[int, np.ndarray], memo: SolveMemo,
               only: list[int] | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Mean queues from the reference tier ``r`` (the bursty tier holding the most jobs):
    ``Q_m = sum_n P(n_r = n) E[n_m | N - n - held users in the rest]`` for an exponential
    tier, a bursty tier's from its chain. Returns ``Q``, the conditional means
    ``E[n_m | n_r = n]`` and ``r``. ``cache`` keeps ``E[n_m | k]`` between calls whose other
    bursty tiers (none) do not change, ``memo`` between solves (with no other bursty tier);
    ``only``: the exponential tiers to read (default all)."""
    Q = np.zeros(len(means))
    for b, chain in chains.items():
        Q[b] = float(chain.level @ np.arange(N + 1))
    ref = _reference(chains, bursty, N)
    others = {b: _ld_weights(nu[b], N) for b in bursty if b != ref}
    level = chains[ref].level
    k = np.arange(N + 1, dtype=float)
    conditional = np.zeros((len(means), N + 1))        # E[n_m | n_ref = n]
    for m in expo if only is None else only:
        if m not in cache:
            cache[m] = _conditional_queue(means, cores, expo, N, Z, m, others) if others \
                else _shared_prefix(memo.prefixes, ("E[n_m]", tuple(means[expo]),
                                                    tuple(cores[e] for e in expo), Z,
                                                    expo.index(m)), N,
                                    lambda n: _conditional_queue(means, cores, expo, n, Z, m, {}),
                                    [cores[e] for e in expo])
        cq = cache[m]
        conditional[m] = np.interp(N - k - held, k, cq, left=0.0)
        Q[m] = float(level @ conditional[m])
    for b in others:
        conditional[b] = Q[b]
    conditional[ref] = k
    return Q, conditional, ref


def _downstream_groups(procs: list[MAP], bursty: list[int]) -> dict[int, list[int]]:
    """Per bursty tier, the exponential tiers after it up to the next bursty tier or the
    think station (which its waves reach before anything smooths them)."""
    groups: dict[int, list[int]] = {}
    for b in bursty:
        tiers = []
        m = b + 1
        while m < len(procs) and m not in bursty:
            tiers.append(m)
            m += 1
        if tiers:
            groups[b] = tiers
    return groups


def _room(chains: dict[int, _Chain], N: int, Z: float) -> float:
    """Users outside the think station, ``N - X Z``, ``X`` the bursty chains' throughput (the
    least, while Marie's sweeps have not brought them together)."""
    return N - Z * min(chain.throughput for chain in chains.values())


def _waves(chains: dict[int, _Chain], groups: dict[int, list[int]], means: np.ndarray,
           cores: tuple[int, ...], flags: list[str],
           lumps: dict[int, tuple[_Transitions, Lumping]], room: float) -> dict[int, float]:
    """Mean queue of each exponential tier after a bursty one, as a ``MAP/M/c`` queue fed by
    the bursty tier's departure process (:mod:`solvers.departures`), through the capacity of
    the tiers in between. A tier that process would saturate keeps the product form's
    answer (flagged), as does one whose open queue holds more than ``room``, the users the
    closed network has outside its think station (``N - X Z``): the population bounds that
    queue, not the arrivals (a 16-core tier at 79% behind a bursty 4-core one whose slow phase
    is 20x slower: an open queue of 1,614 jobs with 108 users outside the think station; the
    held users it implied emptied the rest, and the bursty chains had no arrivals to solve).
    ``lumps``: the lumpings of the chains' patterns met so far in this solve (by pattern; the
    rounds of step 4 re-solve a chain on the same pattern)."""
    out: dict[int, float] = {}
    for b, tiers in groups.items():
        chain = chains[b]
        tr = chain.transitions
        if tr is None or chain.pi is None or chain.lam is None:
            continue
        with np.errstate(all="ignore"):
            _wave_queues(b, tiers, chain, means, cores, flags, out, lumps, room)
    return out


def _wave_queues(b: int, tiers: list[int], chain: _Chain, means: np.ndarray,
                 cores: tuple[int, ...], flags: list[str], out: dict[int, float],
                 lumps: dict[int, tuple[_Transitions, Lumping]], room: float) -> None:
    """:func:`_waves` for the tiers after bursty tier ``b``, in order, into ``out``. A tier the
    departures would saturate, whose queue does not solve to a finite mean (a nearly
    critical or ill-conditioned queue: singular matrix, overflow), or whose mean is above
    ``room``, keeps the product form's answer from there on, flagged."""
    tr = chain.transitions
    try:
        rate = chain.rate if chain.rate is not None else tr.with_arrivals(chain.lam)
        seen = lumps.get(id(tr))
        if seen is None or seen[0] is not tr:
            seen = lumps[id(tr)] = (tr, lumping(tr.src, tr.dst, tr.level, cores[b]))
        dep = lumped_departures(chain.pi, tr.src, tr.dst, rate, tr.level, cores[b], seen[1])
    except np.linalg.LinAlgError:
        dep = None
    for m in tiers:
        if dep is None or not dep.rate * means[m] < cores[m]:
            flags.append(f"tier {m}: saturated by tier {b}'s departures: product-form queue"
                         if dep is not None else
                         f"tier {m}: tier {b}'s departure process did not solve: "
                         "product-form queue")
            return
        try:
            queue = map_m_c_mean(dep, means[m], cores[m])
        except np.linalg.LinAlgError:
            queue = float("nan")
        if not (np.isfinite(queue) and queue >= 0.0):
            flags.append(f"tier {m}: the queue fed by tier {b}'s departures did not solve "
                         "(nearly critical or ill-conditioned): product-form queue")
            return
        if queue > room:
            flags.append(f"tier {m}: the queue fed by tier {b}'s departures ({queue:.4g} jobs) "
                         f"exceeds the {max(room, 0.0):.4g} users outside the think station: "
                         "product-form queue")
            return
        out[m] = queue
        dep = through_tier(dep, cores[m] / means[m])


#: a miss of :func:`_shared_prefix` computes this much beyond the N asked (a search's next
#: probes are near)
_PREFIX_AHEAD = 1.25


def _shared_prefix(prefixes: _Memo, key: tuple[Any, ...], N: int,
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


def _conditional_queue(means: np.ndarray, cores: tuple[int, ...], expo: list[int], N: int,
                       Z: float, m: int,
                       others: dict[int, tuple[np.ndarray, float | None]]) -> np.ndarray:
    """``E[n_m | k users in the rest]``, ``k = 0..N``, for exponential tier ``m`` of the rest
    (think station, exponential tiers, the bursty tiers in ``others`` as load-dependent
    stations): ``d log G_rest(k) / d log S_m`` by a central difference, the rest without ``m``
    convolved once."""
    without = _rest_log_g(_log_g_exponential(means, cores, [e for e in expo if e != m], N, Z),
                          others, None)
    sides = [_convolve(without, *_exponential_weights(means[m] * f, cores[m], N))
             for f in (1.0 + _EPS, 1.0 - _EPS)]
    with np.errstate(invalid="ignore"):
        q = (sides[0] - sides[1]) / (math.log1p(_EPS) - math.log1p(-_EPS))
    return np.clip(np.nan_to_num(q, nan=0.0), 0.0, None)


def _product_form(procs: list[MAP], cores: tuple[int, ...], expo: list[int], lg_e: np.ndarray,
                  N: int, Z: float, t0: float) -> DecompositionResult:
    """No bursty tier: the network is product form, solved exactly from ``G_E``."""
    means = np.array([p.mean for p in procs])
    X = float(_ratio(lg_e)[N])
    Q = np.array([_conditional_queue(means, cores, expo, N, Z, m, {})[N] for m in expo])
    top = Q == Q.max()
    return _result(X, Q, X * means / np.array(cores, dtype=float), top / top.sum(), procs, cores,
                   N, Z, 0, True, [], t0)


def _result(X: float, Q: np.ndarray, U: np.ndarray, B: np.ndarray, procs: list[MAP],
            cores: tuple[int, ...], N: int, Z: float, iterations: int, converged: bool,
            flags: list[str], t0: float) -> DecompositionResult:
    means = np.array([p.mean for p in procs])
    flags = list(dict.fromkeys(flags))          # each round of step 4 may repeat a flag
    Q = np.clip(Q, 0.0, float(N))
    R = Q / X if X > 0 else means.copy()
    little = abs(float(Q.sum()) + X * Z - N) / N
    if little > 1e-4:
        flags.append(f"Little's law off by {little:.2g} of N")
    return DecompositionResult(
        throughput=X, response_time=float(R.sum()), residence_time=R, utilization=U,
        queue_length=Q, bottleneck_probability=B, population=N, think_time=Z, servers=cores,
        iterations=iterations, converged=converged, little_residual=little,
        elapsed_s=time.perf_counter() - t0, flags=tuple(flags))


def _split_top(conditional: np.ndarray, level: np.ndarray) -> np.ndarray:
    """``B_m``: at each level of the reference tier, the tier holding the most jobs (the others
    at their conditional means) takes that level's probability; ties split."""
    top = conditional == conditional.max(axis=0, keepdims=True)
    return (top / top.sum(axis=0, keepdims=True)) @ level
