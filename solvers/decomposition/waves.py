"""Waves downstream of a bursty tier: the exponential tiers after it as ``MAP/M/c`` queues.

A bursty tier releases the backlog of a slow run at its fast phase's rate, so the exponential
tiers after it (up to the next bursty tier or the think station) see waves, not the product
form's Poisson flow, and the product form underestimates their queues badly
(docs/accuracy.md, system (d)). Each such tier is solved as an open ``MAP/M/c`` queue fed by
the bursty tier's departure process (:mod:`solvers.departures`), read off its chain (levels
above ``c_b`` lumped, stationary weights), through the capacity of the tiers in between
(:func:`wave_queues`). The users held there are not in the rest: the bursty chains are re-solved
with arrivals ``X_rest(N - n - h)``, ``h`` the excess of those queues over the product form's,
to a fixed point in ``h``: with one bursty tier by rounds of re-solves with secant steps
(:class:`Secant`), the last round's queues taken off the line through the two rounds before
when it would be the last anyway (:func:`waves_on_line`); with several, within Marie's sweeps
(:mod:`solvers.decomposition.fixed_point`), by rounds if those do not converge. A wave queue
holding more jobs than the network has outside its think station keeps the product form
(flagged), and ``h`` is at most N/2.

This is approximate: the tiers after a bursty tier are an open queue, so their own queue does
not slow the bursty tier's arrivals beyond the mean users ``h`` held there; the departure
process is lumped (a backlog's length geometric given the cores' phases); and a tier in
between only caps the wave's rate.
"""

from __future__ import annotations

import numpy as np

from solvers.decomposition.chain import Chain
from solvers.decomposition.stations import Transitions
from solvers.departures import Lumping, lumped_departures, lumping, map_m_c_mean, through_tier
from solvers.processes import MAP


#: a bursty tier whose waves feed ``MAP/M/c`` queues (step 4) keeps the per-job chain only while
#: its departure process (levels ``0..c + 1`` of the chain: :func:`departure_phases`) has at
#: most this many phases: the queues' ``G`` matrices are dense in them (a 16-core tier: 340
#: phases; 32 cores: 1,188, 64: 4,420 -- minutes a solve)
WAVE_MAX_PHASES = 400

#: the held users move by at most this fraction of N
WAVE_ITERATIONS = 12
WAVE_TOL = 5e-5
#: the last round's wave queues come off a line (:func:`waves_on_line`) only this fraction of
#: N or less from the round before's held users: read near a point the line passes through
LINE_REACH = 0.01


def waves_on_line(a: tuple[float, dict[int, float]], b: tuple[float, dict[int, float]],
                  held: float) -> dict[int, float] | None:
    """The last round of step 4 without its ``MAP/M/c`` queues: each wave queue on the line
    through its values at the last two rounds' held users ``a, b``, read at ``held`` (the
    secant's). Taken when the secant moves at most :data:`WAVE_TOL` of N past the last
    round's excess ``g``: for ``g`` about linear in ``h`` a plain step from that round would
    then already stop, so this round is the last; its chains are still re-solved at
    ``held``, at most :data:`LINE_REACH` of N from the last round's, where the line's
    queues are within about 1e-4 of a full round's (tests/test_departures.py). ``None`` when
    the two rounds do not have the same tiers."""
    (ha, qa), (hb, qb) = a, b
    if qa.keys() != qb.keys() or ha == hb:
        return None
    t = (held - ha) / (hb - ha)
    return {m: max(qa[m] + t * (qb[m] - qa[m]), 0.0) for m in qb}


class Secant:
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


def downstream_groups(procs: list[MAP], bursty: list[int]) -> dict[int, list[int]]:
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


def users_outside(chains: dict[int, Chain], N: int, Z: float) -> float:
    """Users outside the think station, ``N - X Z``, ``X`` the bursty chains' throughput (the
    least, while Marie's sweeps have not brought them together)."""
    return N - Z * min(chain.throughput for chain in chains.values())


def wave_queues(chains: dict[int, Chain], groups: dict[int, list[int]], means: np.ndarray,
                cores: tuple[int, ...], flags: list[str],
                lumps: dict[int, tuple[Transitions, Lumping]], room: float) -> dict[int, float]:
    """Mean queue of each exponential tier after a bursty one, as a ``MAP/M/c`` queue fed by
    the bursty tier's departure process (:mod:`solvers.departures`), through the capacity of
    the tiers in between. A tier that process would saturate keeps the product form's
    answer (flagged), as does one whose open queue holds more than ``room``, the users the
    closed network has outside its think station (``N - X Z``): the population bounds that
    queue, not the arrivals (an open queue past it would imply more held users than there
    are, emptying the rest and leaving the bursty chains no arrivals to solve).
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


def _wave_queues(b: int, tiers: list[int], chain: Chain, means: np.ndarray,
                 cores: tuple[int, ...], flags: list[str], out: dict[int, float],
                 lumps: dict[int, tuple[Transitions, Lumping]], room: float) -> None:
    """:func:`wave_queues` for the tiers after bursty tier ``b``, in order, into ``out``. A tier the
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


#: a miss of :func:`shared_prefix` computes this much beyond the N asked (a search's next
#: probes are near)
