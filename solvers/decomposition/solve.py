"""The decomposition's driver, :func:`solve_decomposed`: the FES, the bursty chains, Marie's
fixed point and the waves downstream, in that order (:mod:`solvers.decomposition`).

An exponential tier's mean queue is read from the reference tier ``r`` (the bursty tier
holding the most jobs, :func:`_read_back`): ``Q_m = sum_n P(n_r = n) E[n_m | N - n users in
the rest]``, the conditional mean ``d log G_rest(k) / d log S_m`` by a central difference;
another bursty tier's comes from its own chain. Exponential-only networks are solved exactly
(the product form, :func:`_product_form`).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from solvers.decomposition.chain import RESIDUAL_LIMIT, Chain, Patterns
from solvers.decomposition.fes import conditional_queue, ld_weights, log_g_exponential, \
    shared_prefix, throughput_ratio
from solvers.decomposition.fixed_point import fixed_point, reference_tier, sweep_order
from solvers.decomposition.memo import SolveMemo
from solvers.decomposition.result import DecompositionResult, decomposition_result, split_top
from solvers.decomposition.stations import PER_JOB_MAX_CORES, Transitions, departure_phases, \
    per_job_applies
from solvers.decomposition.waves import LINE_REACH, WAVE_ITERATIONS, WAVE_MAX_PHASES, WAVE_TOL, \
    Secant, downstream_groups, users_outside, wave_queues, waves_on_line
from solvers.departures import Lumping
from solvers.processes import MAP


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
    """Closed network of MAP tiers with cores, by flow-equivalent decomposition
    (:mod:`solvers.decomposition`).

    ``processes``: each tier's service process in visit order (``MAP.exponential(S)`` for an
    exponential tier); ``servers``: cores per tier (default 1); ``population`` ``N``;
    ``think_time`` ``Z``; ``tol``: relative change of the throughput between two sweeps of
    the fixed point at which it stops; ``memo``: what this solve may share with others of the
    same model (:class:`SolveMemo`; default: nothing shared); ``per_job_max_cores``: the
    most cores a bursty tier may have for the per-job station (default
    :data:`PER_JOB_MAX_CORES`; within :data:`PER_JOB_MAX_BYTES`:
    :mod:`solvers.decomposition.stations`).
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
        return decomposition_result(X, np.array([float(N)]), np.array([busy / cores[0]]),
                                    np.ones(1), procs, cores, N, Z, 0, True, flags, t0)
    bursty = [m for m, p in enumerate(procs) if p.order > 1]
    expo = [m for m in range(len(procs)) if m not in bursty]
    memo = memo if memo is not None else SolveMemo()
    lg_e = shared_prefix(memo.prefixes, ("G_E", tuple(means[expo]),
                                         tuple(cores[m] for m in expo), Z), N,
                          lambda n: log_g_exponential(means, cores, expo, n, Z),
                          [cores[m] for m in expo])
    if not bursty:
        return _product_form(procs, cores, expo, lg_e, N, Z, t0)
    flags += [f"tier {b}: {cores[b]} cores > per_job_max_cores {per_job_max_cores}: one MAP at "
              "speed min(n, c) (pessimistic)" for b in bursty if cores[b] > per_job_max_cores]
    groups = downstream_groups(procs, bursty)
    patterns, held, nu, iterations = Patterns(memo, per_job_max_cores), 0.0, None, 0
    order = sweep_order(procs, cores, bursty, groups)
    for b in groups:
        if (per_job_applies(procs[b], cores[b], per_job_max_cores)
                and departure_phases(procs[b], cores[b]) > WAVE_MAX_PHASES):
            patterns.refuse(procs[b], cores[b], "speed-scaled (per-job departures too large "
                            "for the wave queues after it)")
    secant = Secant()
    cache: dict[int, np.ndarray] = {}
    lumps: dict[int, tuple[Transitions, Lumping]] = {}
    swept = False                          # Marie's sweeps reached step 4's point too
    if len(bursty) > 1 and groups:         # step 4 within Marie's sweeps
        box, tried = [0.0], []

        def on_sweep(chains: dict[int, Chain], nu: dict[int, np.ndarray]) -> float:
            Q, _, _ = _read_back(chains, nu, means, cores, bursty, expo, N, Z, box[0], {}, memo,
                                 only=[m for tiers in groups.values() for m in tiers])
            waves = wave_queues(chains, groups, means, cores, tried, lumps,
                                users_outside(chains, N, Z))
            box[0] = min(max(sum(q - Q[m] for m, q in waves.items()), 0.0), 0.5 * N)
            return box[0]

        chains, nu, iterations, converged = fixed_point(
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
            chains, nu, sweeps, converged = fixed_point(lg_e, procs, cores, bursty, N, tol,
                                                        max_iterations, flags, held, nu,
                                                        patterns, order=order)
            iterations += sweeps
        Q, conditional, ref = _read_back(chains, nu, means, cores, bursty, expo, N, Z, held,
                                         cache if len(bursty) == 1 else {}, memo)
        waves = on_line if on_line is not None else wave_queues(chains, groups, means, cores, flags,
                                                                lumps, users_outside(chains, N, Z))
        excess = sum(q - Q[m] for m, q in waves.items())
        for m, q in waves.items():
            Q[m], conditional[m] = q, q
        moved = abs(excess - held)
        if moved <= WAVE_TOL * N or swept or on_line is not None:
            break
        step = min(max(secant.next(held, excess), 0.0), 0.5 * N)
        if (last is not None and abs(step - excess) <= WAVE_TOL * N
                and abs(step - held) <= LINE_REACH * N):
            on_line = waves_on_line(last, (held, waves), step)
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
    return decomposition_result(X, Q, U, split_top(conditional, level), procs, cores, N, Z,
                                iterations, converged, flags, t0)


#: rounds of step 4 (the rest re-solved without the users held downstream) and their stop:


def _read_back(chains: dict[int, Chain], nu: dict[int, np.ndarray], means: np.ndarray,
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
    ref = reference_tier(chains, bursty, N)
    others = {b: ld_weights(nu[b], N) for b in bursty if b != ref}
    level = chains[ref].level
    k = np.arange(N + 1, dtype=float)
    conditional = np.zeros((len(means), N + 1))        # E[n_m | n_ref = n]
    for m in expo if only is None else only:
        if m not in cache:
            cache[m] = conditional_queue(means, cores, expo, N, Z, m, others) if others \
                else shared_prefix(memo.prefixes, ("E[n_m]", tuple(means[expo]),
                                                   tuple(cores[e] for e in expo), Z,
                                                   expo.index(m)), N,
                                    lambda n: conditional_queue(means, cores, expo, n, Z, m, {}),
                                    [cores[e] for e in expo])
        cq = cache[m]
        conditional[m] = np.interp(N - k - held, k, cq, left=0.0)
        Q[m] = float(level @ conditional[m])
    for b in others:
        conditional[b] = Q[b]
    conditional[ref] = k
    return Q, conditional, ref


def _product_form(procs: list[MAP], cores: tuple[int, ...], expo: list[int], lg_e: np.ndarray,
                  N: int, Z: float, t0: float) -> DecompositionResult:
    """No bursty tier: the network is product form, solved exactly from ``G_E``."""
    means = np.array([p.mean for p in procs])
    X = float(throughput_ratio(lg_e)[N])
    Q = np.array([conditional_queue(means, cores, expo, N, Z, m, {})[N] for m in expo])
    top = Q == Q.max()
    return decomposition_result(X, Q, X * means / np.array(cores, dtype=float), top / top.sum(),
                                procs, cores, N, Z, 0, True, [], t0)
