"""Several bursty tiers: Marie's fixed point and its stopping rules.

R. Marie, "An approximate analytical method for general queueing networks", IEEE TSE 1979.
Each bursty tier's conditional throughput ``nu_b(n)`` makes it a load-dependent exponential
station with the same queue-length distribution (the level-crossing balance
``P(n) nu(n) = P(n-1) lambda(n-1)`` holds exactly), so the rest of the network seen by tier
``b`` is product form (:mod:`solvers.decomposition.fes`). The tiers are re-solved in turn (a
sweep) until the throughput moves by less than ``tol`` between sweeps; the sweeps are
Anderson-accelerated on ``log nu``, restarted when the residual grows (:class:`_Anderson`). A
sweep takes the tiers in visit order, a clear bursty bottleneck first (:func:`sweep_order`).
With one bursty tier the first pass is the answer; with several, each sees the others as
load-dependent exponential stations, which is approximate. Early sweeps refine their chains only
to a residual proportional to the fixed point's last change (:func:`_refine_target`: an inexact
Picard iteration), the last ones to :data:`REFINE_RESIDUAL`.

With waves downstream (:mod:`solvers.decomposition.waves`) the users held there are updated
after each sweep (once they swing, extrapolated with ``log nu``: :func:`_swinging`), and the
sweeps stop once they move by at most :data:`WAVE_TOL` of N -- or, from :data:`SETTLE_SWEEPS`
on, once the reference tier's throughput is within the tolerance and the others' within
:data:`SETTLE_OTHERS` (:func:`_settled`), or while the held users swing once the reference
tier's throughput has stayed within :data:`SWING_SPAN` over the last :data:`SWING_SWEEPS`
sweeps (:func:`bounded_swing`, flagged).

A warm start from a nearby population's ``nu`` is not used: it takes more sweeps than the cold
start, and can diverge.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from solvers.decomposition.chain import Chain, Patterns, next_levels, solve_chain
from solvers.decomposition.factors import REFINE_LOOSE, REFINE_RESIDUAL
from solvers.decomposition.fes import ld_weights, rest_arrivals, rest_log_g
from solvers.decomposition.waves import WAVE_TOL
from solvers.processes import MAP


#: past sweeps kept by the fixed point's Anderson acceleration
ANDERSON_MEMORY = 5
#: Anderson forgets its history when the residual grows past this factor of the smallest seen
RESTART = 2.0
#: once they swing (:func:`_swinging`), the users held downstream (step 4) enter Anderson's
#: iterate in units of this share of N: taken plain after each sweep, swinging held users keep
#: the sweeps from converging (docs/benchmarks.md)
HELD_UNIT = 0.01


def _swinging(moves: list[float]) -> bool:
    """Whether the held users' last three moves (new minus old, one per sweep) alternate in
    sign. Only then are they extrapolated with ``log nu``: extrapolated from the first sweep on,
    Anderson's restarts cycle solves that the plain update settles in a few sweeps."""
    return len(moves) >= 3 and moves[-1] * moves[-2] < 0 and moves[-2] * moves[-3] < 0


class _Anderson:
    """Anderson acceleration (type II; Walker & Ni, SIAM J. Numer. Anal. 2011) of the fixed
    point ``x = G(x)``: the next iterate is ``G(x_k) - dG gamma`` with ``gamma`` the least
    squares fit of the latest residual ``f_k = G(x_k) - x_k`` by the differences ``dF`` of the
    last :data:`ANDERSON_MEMORY` residuals. Marie's iteration converges linearly (ratio ~0.9 at
    the knee of two bursty tiers); this takes it there in a few sweeps.

    Safeguard: when the residual's largest entry grows past :data:`RESTART` times the smallest
    seen, the history is dropped and the sweep taken plain: without it an extrapolation can send a
    lightly loaded bursty tier's ``nu`` far off (say, a web tier before a saturated database)
    and keep it there, where plain sweeps converge (docs/benchmarks.md)."""

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
#: by up to SETTLE_OTHERS a sweep: the held users can keep moving a front tier's throughput
#: while the reference tier's (the answer) stands still (docs/benchmarks.md). From
#: SETTLE_SWEEPS only, a guard (not tuned): early on one tier can be far off while another
#: barely moves
SETTLE_SWEEPS = 20
SETTLE_OTHERS = 1e-3


#: ... or, from SETTLE_SWEEPS on while the held users swing (:func:`_swinging`), once the
#: reference tier's throughput has stayed within SWING_SPAN (relative) over the last
#: SWING_SWEEPS sweeps (:func:`bounded_swing`): held users that swing for as long as the
#: sweeps run swing the answer with them by less than the tolerance allows, never settling;
#: stopping in the bounded swing gives an answer within SWING_SPAN of where rounds would end
#: (docs/benchmarks.md)
SWING_SWEEPS = 10
SWING_SPAN = 1e-3
#: how the flag of a stop in a bounded swing begins (the pipeline leaves it out of a
#: prediction's flags: within SWING_SPAN, below the model's own error)
SWING_FLAG = "fixed point stopped in a bounded swing"


def bounded_swing(references: list[float]) -> float | None:
    """The spread (max - min over max) of the reference tier's throughput over the last
    :data:`SWING_SWEEPS` sweeps when it is at most :data:`SWING_SPAN`, else ``None``."""
    last = references[-SWING_SWEEPS:]
    if len(last) < SWING_SWEEPS:
        return None
    spread = (max(last) - min(last)) / max(max(last), 1e-300)
    return spread if spread <= SWING_SPAN else None


def _settled(chains: dict[int, Chain], changes: dict[int, float], tol: float, ref: int) -> bool:
    """Whether a sweep left the reference tier's throughput (the bursty tier holding the most
    jobs: the answer, :func:`_read_back`) within ``tol`` of the sweep before and every other
    bursty tier's within :data:`SETTLE_OTHERS` (``ref``: the reference tier,
    :func:`reference_tier`).
    A front tier whose throughput rises with every user held after it
    (:mod:`solvers.decomposition.waves`) keeps moving in its last digits while the held users
    settle within :data:`WAVE_TOL` of N: its digits, not the answer's."""
    if len(changes) < len(chains):
        return False
    return changes[ref] <= tol and max(changes.values()) <= SETTLE_OTHERS


def reference_tier(chains: dict[int, Chain], tiers: list[int], N: int) -> int:
    """The reference tier: of ``tiers``, the bursty tier whose chain holds the most jobs
    (module notes)."""
    n = np.arange(N + 1)
    return max(tiers, key=lambda b: float(chains[b].level @ n))


def fixed_point(lg_e: np.ndarray, procs: list[MAP], cores: tuple[int, ...], bursty: list[int],
                N: int, tol: float, max_iterations: int, flags: list[str], held: float = 0.0,
                start: dict[int, np.ndarray] | None = None, patterns: Patterns | None = None,
                on_sweep: Callable[[dict[int, Chain], dict[int, np.ndarray]], float] | None
                = None, order: list[int] | None = None
                ) -> tuple[dict[int, Chain], dict[int, np.ndarray], int, bool]:
    """Marie's iteration over the bursty tiers (module notes): one sweep solves each
    bursty tier's chain against the others' conditional throughputs ``nu`` (from ``start``,
    else the exponential equivalents), ``held`` users out of the rest (step 4; with
    ``on_sweep``, the users held after each sweep, updated with the sweeps until they move by
    at most :data:`WAVE_TOL` of N, or once the answer has settled: :func:`_settled`, or
    swings within a bound while they do: :func:`bounded_swing`); the
    sweeps are Anderson-accelerated on ``log nu`` -- and,
    once the held users swing (:func:`_swinging`), on them too, in units of :data:`HELD_UNIT`
    of N -- and solve the tiers in ``order`` (:func:`sweep_order`; default: visit order)."""
    n = np.arange(N + 1)
    nu = dict(start) if start else {b: np.minimum(n, cores[b]) / procs[b].mean for b in bursty}
    chains: dict[int, Chain] = {}
    fallback: dict[int, str] = {}        # tier -> its speed-scaled station's reason
    patterns = patterns or Patterns()
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
        weights = {o: ld_weights(nu[o], N) for o in bursty}     # a tier's, anew once solved
        for b in order:
            lam = rest_arrivals(rest_log_g(lg_e, weights, skip=b), held)
            chain = solve_chain(lam, procs[b], cores[b], per_job=b not in fallback,
                                patterns=patterns, first=next_levels(chains.get(b)))
            if b in fallback:                  # one station for the rest of the iteration
                chain = dataclasses.replace(chain, station=fallback[b])
            elif chain.station.startswith("speed-scaled ("):
                fallback[b] = chain.station
            old = chains.get(b)
            if old is not None:
                changes[b] = abs(chain.throughput - old.throughput) / max(chain.throughput,
                                                                           1e-300)
                change = max(change, changes[b])
            chains[b], nu[b], weights[b] = chain, chain.nu, ld_weights(chain.nu, N)
        moved, new = 0.0, held
        if on_sweep is not None:
            new = on_sweep(chains, nu)
            moved = abs(new - held)
        if len(bursty) == 1 and moved <= WAVE_TOL * N:
            return chains, nu, it, True
        if it > 1 and change <= tol and moved <= WAVE_TOL * N:
            return chains, nu, it, True
        if on_sweep is not None:
            ref = reference_tier(chains, list(chains), N)
            if (it >= SETTLE_SWEEPS and moved <= WAVE_TOL * N
                    and _settled(chains, changes, tol, ref)):
                return chains, nu, it, True
            references.append(chains[ref].throughput)
            spread = bounded_swing(references) if swinging and it >= SETTLE_SWEEPS else None
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
#: this factor above every other tier's (:func:`sweep_order`)
CLEAR_BOTTLENECK = 1.1


def sweep_order(procs: list[MAP], cores: tuple[int, ...], bursty: list[int],
                groups: dict[int, list[int]]) -> list[int]:
    """The order a sweep solves the bursty tiers in: visit order, except that a bursty tier
    that is clearly the network's bottleneck (:data:`CLEAR_BOTTLENECK`) goes first. It holds
    most users, and the others' arrivals are the rest's throughput with the users it holds
    (:func:`rest_arrivals`), so the sweep hands them its fresh ``nu``. ``groups``: the wave queues
    after each bursty tier (:func:`downstream_groups`)."""
    load = [p.mean / c for p, c in zip(procs, cores)]
    top = max(bursty, key=lambda b: load[b])
    clear = all(load[top] >= CLEAR_BOTTLENECK * load[m] for m in range(len(procs)) if m != top)
    if clear and top not in groups:
        return [top] + [b for b in bursty if b != top]
    return list(bursty)


def _refine_target(change: float) -> float:
    """Residual to which a sweep refines its chains (inexact Picard iteration): a millionth
    of the fixed point's last relative change, between REFINE_RESIDUAL and REFINE_LOOSE
    (below RESIDUAL_LIMIT, at which a chain is rejected). A looser target (a ten thousandth,
    up to 1e-9) saves little more and can leave a solve beyond the knee unconverged."""
    return min(max(1e-6 * change, REFINE_RESIDUAL), REFINE_LOOSE)
