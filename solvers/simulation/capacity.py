"""The capacity of the simulated physical system: the largest population whose every class
meets its response-time target, found by bisection over seeded simulations.

At each probed population ``N`` :func:`~solvers.simulation.physical.simulate_physical` runs
``replications`` independent seeded replications (seed ``seed + N``: a population is always
simulated with the same streams, so the search is reproducible); ``N`` meets the targets when
every class's mean response time is within its target. The search brackets the answer from
``start`` by factors of ``growth`` and bisects until the bracket is within
``max(1, rel_tol * N)``. Simulation noise makes "meets" a noisy function of ``N`` near the
answer: every probe is kept (:attr:`SimulatedCapacity.points`, with the 95% half-widths), and
:attr:`SimulatedCapacity.low` / ``high`` are where the upper and lower ends of the worst
class's interval cross its target (linear interpolation between probes): the range the
simulation cannot tell apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from solvers.simulation.physical import PhysicalNetwork, simulate_physical

__all__ = ["Probe", "SimulatedCapacity", "simulated_capacity"]


@dataclass(frozen=True)
class Probe:
    """One simulated population: worst class's ratio ``R_c / target_c`` and its half-width."""

    n: int
    ratio: float
    half_width: float
    services: int


@dataclass(frozen=True)
class SimulatedCapacity:
    """``value``: largest probed ``N`` that met every target with the next probed ``N`` above
    failing; ``low``/``high``: the crossings of the interval's ends (module docstring): ``0``
    when the interval already straddles the target at the smallest probe, ``inf`` when it
    does at the largest."""

    value: int
    low: float
    high: float
    points: tuple[Probe, ...]

    @property
    def services(self) -> int:
        return sum(p.services for p in self.points)


def _crossing(points: Sequence[tuple[int, float]]) -> float:
    """First ``n`` where the piecewise-linear ratio rises above 1 (``0`` if already above at
    the first point, ``inf`` if never)."""
    if points[0][1] > 1:
        return 0.0
    for (n0, r0), (n1, r1) in zip(points, points[1:]):
        if r0 <= 1 < r1:
            return n0 + (1 - r0) * (n1 - n0) / (r1 - r0)
    return math.inf


def simulated_capacity(network: Callable[[int], PhysicalNetwork], targets: Sequence[float], *,
                       start: int, duration: float, warmup: float, replications: int = 3,
                       seed: int = 0, rel_tol: float = 0.01, growth: float = 1.25,
                       span: float = 0.1, limit: int = 100_000) -> SimulatedCapacity:
    """Largest ``N`` whose simulated per-class mean response times ``R_c`` are within
    ``targets`` (seconds, per class of ``network(N)``), by bracketing from ``start`` and
    bisection (module docstring). ``network(N)`` is the physical system with ``N`` users.
    The answer's neighbours ``N (1 +- span)`` are simulated too, so that the interval's
    crossings (``low``, ``high``) are found within them when they lie there."""
    t = np.asarray(targets, dtype=float)
    if not (isinstance(start, int) and start >= 1):
        raise ValueError(f"start: must be a whole number >= 1, got {start!r}")
    if not (growth > 1 and 0 < rel_tol < 1):
        raise ValueError(f"growth must be > 1 and rel_tol in (0, 1), got {growth!r}, "
                         f"{rel_tol!r}")
    probes: dict[int, Probe] = {}

    def meets(n: int) -> bool:
        if n not in probes:
            res = simulate_physical(network(n), duration, warmup=warmup,
                                    replications=replications, seed=seed + n)
            r = np.array([e.mean for e in res.response_time]) / t
            hw = np.array([e.half_width for e in res.response_time]) / t
            w = int(np.argmax(r))
            probes[n] = Probe(n, float(r[w]), float(hw[w]), res.services)
        return probes[n].ratio <= 1

    lo, hi = 0, None
    n = start
    if meets(n):
        lo = n
        while hi is None:
            n = min(max(int(n * growth), n + 1), limit)
            if not meets(n):
                hi = n
            elif n >= limit:
                hi = limit + 1
                lo = limit
            else:
                lo = n
    else:
        hi = n
        while lo == 0 and hi > 1:
            n = max(int(hi / growth), 1)
            if meets(n):
                lo = n
            else:
                hi = n
                if n == 1:
                    break
    while hi - lo > max(1, int(rel_tol * hi)):
        mid = (lo + hi) // 2
        if meets(mid):
            lo = mid
        else:
            hi = mid
    for n in {max(1, int(round(lo * (1 - span)))), min(int(round(lo * (1 + span))), limit)}:
        meets(n)
    pts = sorted(probes.values(), key=lambda p: p.n)
    upper = _crossing([(p.n, p.ratio + p.half_width) for p in pts])
    lower = _crossing([(p.n, p.ratio - p.half_width) for p in pts])
    return SimulatedCapacity(lo, upper, lower, tuple(pts))
