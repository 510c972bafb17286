"""The capacity search: the largest population within every SLA, in few probes.

A probe of the MAP network is a CTMC solve (:mod:`solvers.decomposition`: up to a second at
thousands of users), so :func:`capacity_search` brackets the answer from the populations already
solved and a start near it, and interpolates instead of bisecting; :func:`streams.predict.model.
model_capacity` runs it on a :class:`streams.predict.model.SystemModel`. Pure: the excess is a
callback, no model, no I/O.

**Power-law aims.** Given the excess's *floor* -- its value with no queueing, ``max_c sum_m
D_{m,c} / SLA_c - 1``, which it never falls below -- the aims outside the bracket interpolate a
power law ``excess(n) - floor = a n^p`` through two points (a line in ``log n``, ``log(excess -
floor)``) instead of a line in ``n``, and one point alone is projected with
:data:`PRIOR_EXPONENT`. A response time's queueing part grows like a power of the population
(local exponents 1.3-2.9 between 40% and 100% of capacity on docs/benchmarks.md's networks and
docs/accuracy.md's systems (a)-(d)), so a line through two points below the knee aims far past
the answer and one through points on either side of it far below. 4 tiers with two bursty ones
(capacity 2,067), cold with the users at 40% of capacity solved: probes 2,737 (half MVA's
capacity), 1,696, 1,978, 2,089, 2,037 by lines; 1,819 (projected), 2,081, 2,068 by the power
law (docs/benchmarks.md, "A capacity search").

**In the rate, for large populations.** Where the open route answers (thousands of users: the
fixed-population mean, :mod:`solvers.open.fixed_population`), a population's answer is the
open network's at the rate ``lambda`` whose mean population ``lambda (Z + R(lambda))`` is
``N``, and that population rises strictly with the rate: the capacity is a root in the rate,
where every probe is one open solve held for every later population's search.
:func:`rate_bracket` brackets it between two solved rates close enough for the populations in
between to be read off them (no solve): aimed by a cheaper curve of the same network scaled
through the last probe (the open network without the waves behind a bursty tier: its excess
plus one, times the ratio the probe gives), each probe put where it closes the bracket to its
width whichever way it falls (as :func:`_closing_window` does for populations). The cheaper
curve's crossing is read off the line through its two solves nearest it when one lies within
:data:`CHEAP_REACH` (:func:`_read_cheap`), so it is solved mostly where a probe is (the probe's
tiers are the cheaper curve's: held, no second solve); the rough probe likewise goes to the
cheaper curve's solved rate nearest its root, within ``rough_reach``. 4 tiers, 2 bursty,
cold, SLAs of 0.25-3 s: 2 open solves and a rough one (fewer departure phases, and not
what the waves add to the next bursty tier's wait) at 3-5 distinct rates, against 5-10 open
solves through populations (and MVA's capacity). Two full solves are the floor (the
bracket's ends, the populations read off between them), and the rough probe is what puts the
first inside the window that the second closes: a first full probe fails above the answer
``x`` and one at its rate over ``1 + span`` then meets, or it meets and one at its rate times
``1 + span`` fails, only from inside ``(x / (1 + span), x (1 + span))``, 2% either side; the
cheaper curve's root lies 1.6-6.5% above ``x`` on that network, so without the waves' ratio a
first probe aimed there takes a third full solve (three to four rough probes' CPU) where it
lies more than 2% out (5 of 6 SLAs of 0.25-3 s). At R <= 0.5 s the search is cheap, rough,
full, full at 3 distinct rates (each rate the bursty tiers' chains once), its floor; what is
left is each probe's cost: the waves' ``MAP/M/c`` queues
(:func:`solvers.open.fixed_population.wave_jobs`: ``G`` by shifted cyclic reduction, 9-11
doublings of 80 x 80 blocks stopped on the step quadratic convergence predicts (Bini and
Meini 1996) -- 45% of the search's CPU, the rough probe's included -- and one LU per boundary
level of the 16-core tier), the bursty tiers' chains (27%; their ``G`` by the same
reduction). The bounds bracket no tighter than the cheaper curve does: the utilization law's
``sat`` is the bracket's first upper end, and the open network without the waves has a
lower ``R`` at every rate probed.
"""

from __future__ import annotations

import math
from typing import Callable

__all__ = ["capacity_search", "projected_start", "rate_bracket"]

#: the exponent ``p`` of ``excess(n) - floor = a n^p`` when one point is all there is: the
#: largest local exponent between 40% and 100% of capacity on the networks of the module notes
#: (1.3-2.9), rounded up: projected from 40% of capacity or more, each lands at or below its
#: answer, where a probe is cheaper (from lower, where the exponents are 3-7, above it)
PRIOR_EXPONENT = 3.0


def capacity_search(excess: Callable[[int], float], *, start: int, limit: int,
                    known: dict[int, float] | None = None,
                    rel_tol: float = 0.0, growth: float = 2.0,
                    secant: bool = True, floor: float | None = None) -> tuple[int, bool]:
    """Largest ``n`` in ``[0, limit]`` with ``excess(n) <= 0``, for an increasing ``excess``
    (e.g. the worst class's ``R_c(n)/SLA_c - 1``).

    ``known`` holds populations already evaluated (``n -> excess(n)``) to bracket from. A
    ``start`` inside that bracket (or above every good point when none fails) is probed first,
    then the search steps away from it -- up if it met the targets, down if not -- by a factor
    ``growth``, the step above 1 doubling each time up to 2 (``growth = 2``: ``start,
    2 start, 4 start, ...``), until the answer is bracketed. A start near the answer (the last
    solve's capacity) wants a small first step: a probe far beyond capacity is the most
    expensive solve of a MAP network. With ``secant``, that first step goes no farther than
    where the line through the start and the nearest known population below it crosses zero
    (:func:`_first_aim`; ``known``'s values must then be excesses, not just their signs), and
    a step down from two failing probes goes half the tolerance below the line through them
    (:func:`_below_failing`); with the excess's ``floor`` (its infimum, the value with no
    queueing) these aims follow a power law instead of a line (module notes). Inside the
    bracket it interpolates linearly (regula falsi, Illinois variant: the end that stays twice
    has its value halved, so a convex ``excess`` does not pin one end), aiming half the
    tolerance past the estimate away from the end that moved last -- or, when some probes
    would close the bracket whichever way they fall, at the nearest of them
    (:func:`_closing_window`) -- until the bracket is within ``max(1, rel_tol * n)``:
    expensive solvers need a few probes, not ``log2 n``.
    Returns ``(n, limited)``; ``limited`` when ``limit`` itself meets the targets.
    """
    known = dict(known or {})

    def check(n: int) -> float:
        if n not in known:
            known[n] = excess(n)
        return known[n]

    bad = [n for n, v in known.items() if v > 0]
    hi = min(bad) if bad else None
    lo = max((n for n, v in known.items() if v <= 0 and (hi is None or n < hi)), default=0)
    step = growth - 1.0
    if hi is None or lo + 1 < start < hi:
        probe = min(max(start, lo + 1), limit)
        value = check(probe)
        aim = _first_aim(known, probe, value, rel_tol, floor) if secant else None
        if value > 0:
            hi, above = probe, None
            while True:                         # down from a start that fails
                probe = max(int(hi / (1.0 + step)), lo + 1)
                if aim is not None:             # the first step: to the chord's zero, if nearer
                    probe, aim = min(max(probe, math.floor(aim)), hi - 1), None
                elif secant and above is not None:      # then: below the failing points' line
                    probe = _below_failing(known, hi, above, probe, lo, rel_tol, floor)
                if probe >= hi or probe <= lo or check(probe) <= 0:
                    lo = max(lo, probe) if probe < hi and known.get(probe, 1) <= 0 else lo
                    break
                above, hi, step = hi, probe, min(2.0 * step, 1.0)
        else:
            lo = probe
            while hi is None or lo * (1.0 + step) < hi:      # up from a start that meets it
                if lo >= limit:
                    return limit, True
                probe = min(max(int(lo * (1.0 + step)), lo + 1), limit)
                if aim is not None:             # to the secant's zero, if nearer
                    probe = min(max(math.ceil(aim), lo + 1), probe)
                if check(probe) > 0:
                    hi = probe
                    break
                lo, step = probe, min(2.0 * step, 1.0)
                aim = _up_aim(known, lo, rel_tol, floor) if secant else None
    side = ""
    f_lo, f_hi = known.get(lo), known[hi]
    while hi - lo > max(1, int(rel_tol * hi)):
        mid = (lo + hi) // 2
        if f_lo is not None and f_hi > f_lo:
            aim = lo + (hi - lo) * (-f_lo) / (f_hi - f_lo)
            # a little past the estimate, away from the end that just moved: the next probe
            # can then close the bracket to the tolerance from the other side
            nudge = _half_tolerance(hi, rel_tol)
            aim += nudge if side == "lo" else -nudge if side == "hi" else 0.0
            mid = min(max(int(round(aim)), lo + 1), hi - 1)
        window = _closing_window(lo, hi, rel_tol)
        if window is not None:              # one probe there closes it, whichever way it falls
            mid = min(max(mid, window[0]), window[1])
        if check(mid) > 0:
            hi, f_hi = mid, known[mid]
            if side == "hi" and f_lo is not None:
                f_lo /= 2                                   # Illinois: the stale end's weight
            side = "hi"
        else:
            lo, f_lo = mid, known[mid]
            if side == "lo":
                f_hi /= 2
            side = "lo"
    return lo, False


def _closing_window(lo: int, hi: int, rel_tol: float) -> tuple[int, int] | None:
    """The probes strictly inside ``(lo, hi)`` after which the bracket is within the
    tolerance whether they meet the targets (``hi - p <= max(1, rel_tol hi)``) or not
    (``p - lo <= max(1, rel_tol p)``); ``None`` when there are none. 4 tiers, 1 bursty
    (docs/benchmarks.md), cold: from 2,951 (meets) and 3,063 (fails) the nudged estimate went
    to 2,953, then 3,045 and 2,954; any probe in 2,972-3,042 closes it at once."""
    low = max(hi - max(1, int(rel_tol * hi)), lo + 1)
    # the probes that close it when they fail form a run up from lo + 1: its top, below hi
    high = min(_closing_above(lo, rel_tol), hi - 1) if rel_tol < 1 else hi - 1
    return (low, high) if low <= high else None


def _below_failing(known: dict[int, float], hi: int, above: int, probe: int, lo: int,
                   rel_tol: float, floor: float | None = None) -> int:
    """The next probe down from two failing populations ``hi < above``: half the tolerance
    below where the line through them crosses zero -- for a convex ``excess`` a bound above
    the answer, and close to it when the two are (the line is the local slope), so the probe
    meets the targets; raised to the lowest probe that closes the bracket at ``hi`` when that
    is still below the zero. ``probe`` (the fixed step down) when the line does not rise or
    its zero is not below ``hi``. A warm start more than the tolerance above the answer
    (system (d) of docs/accuracy.md from 5% above: 760 and 737 fail) then brackets it with
    one more probe instead of a doubled step and an interpolation. With ``floor``: the power
    law's zero (:func:`_line_zero`)."""
    f_hi, f_above = known[hi], known[above]
    if not f_above > f_hi > 0:
        return probe
    zero = _line_zero(above, f_above, hi, f_hi, floor)
    if not (math.isfinite(zero) and zero < hi):
        return probe
    target = math.floor(zero - _half_tolerance(zero, rel_tol))
    closes = hi - max(1, int(rel_tol * hi))        # the lowest probe that can close it
    if target < closes <= zero:                    # the answer may still be above it
        target = closes
    return min(max(target, lo + 1), hi - 1)


def _first_aim(known: dict[int, float], probe: int, value: float,
               rel_tol: float, floor: float | None = None) -> float | None:
    """Where the line through ``(probe, value)`` and the nearest known population below
    ``probe`` crosses zero, half the tolerance past it away from ``probe``: for a convex
    ``excess`` (a response time rises ever faster up to the knee, then about linearly) a bound
    on the answer -- above it when both points meet the targets (the line runs below the
    curve beyond them), below it when ``probe`` fails (the chord runs above the curve). A
    warm start a few percent from the answer then brackets it with one more probe instead of
    a fixed step and an interpolation. ``None`` without such a point or an increase. With
    ``floor`` (:func:`_chord_zero`): the power law's zero, which lands on either side."""
    zero = _chord_zero(known, probe, value, floor)
    if zero is None:
        return None
    nudge = _half_tolerance(zero, rel_tol)
    return zero + nudge if value <= 0 else zero - nudge


def _chord_zero(known: dict[int, float], probe: int, value: float,
                floor: float | None = None) -> float | None:
    """Where the line through ``(probe, value)`` and the nearest known population below
    ``probe`` crosses zero; ``None`` without such a point, an increase or a finite zero.
    With ``floor``: the power law's zero (:func:`_line_zero`), and without a point below,
    ``(probe, value)`` projected with :data:`PRIOR_EXPONENT` (:func:`_projected`)."""
    a = max((n for n in known if n < probe), default=None)
    if a is None:
        zero = _projected(probe, value, floor) if floor is not None else None
    elif value > known[a]:
        zero = _line_zero(a, known[a], probe, value, floor)
    else:
        return None
    return zero if zero is not None and math.isfinite(zero) else None


def _up_aim(known: dict[int, float], lo: int, rel_tol: float,
            floor: float | None = None) -> float | None:
    """The next step up from ``lo`` after a step that met the targets: :func:`_first_aim`'s
    through ``lo`` and the point below it, held to the highest probe that closes the bracket
    at ``lo`` if it fails (``p - lo <= max(1, rel_tol p)``) when the line's zero lies below
    that probe -- for a convex ``excess`` the zero is above the answer, so that probe fails
    and the search ends. 4 tiers, 2 bursty (docs/benchmarks.md), warm from 5% below: 1,964
    and 2,022 met, the line's zero was 2,071 (the answer ~2,068); the doubled step went to
    2,143 and an interpolation to 2,079, where one probe at 2,084 closes it. With ``floor``:
    the power law's zero, for which the hold is kept though it may lie below the answer (the
    probe then meets the targets and the search steps on)."""
    zero = _chord_zero(known, lo, known[lo], floor)
    if zero is None:
        return None
    aim = zero + _half_tolerance(zero, rel_tol)
    closing = _closing_above(lo, rel_tol)
    return min(aim, closing) if zero <= closing else aim


def _closing_above(lo: int, rel_tol: float) -> int:
    """The highest ``p > lo`` with ``p - lo <= max(1, rel_tol p)``: a failing probe there
    brackets the answer at ``lo`` to the tolerance (every ``p`` from ``lo + 1`` up to it
    does too). ``lo + 1`` for ``rel_tol >= 1``."""
    high = int(lo / (1.0 - rel_tol)) + 1 if rel_tol < 1 else lo + 1
    while high > lo + 1 and high - lo > max(1, int(rel_tol * high)):
        high -= 1
    return high


def _line_zero(x0: float, f0: float, x1: float, f1: float,
               floor: float | None = None) -> float:
    """Where the line through ``(x0, f0)`` and ``(x1, f1)`` crosses zero; with ``floor``,
    where the power law ``f - floor = a x^p`` through them does (module notes,
    :func:`_projected` with their ``p``), when both lie above the floor, the floor is below
    zero and ``p > 0``."""
    if floor is not None and floor < 0 and x0 > 0 and x1 > 0 and x0 != x1:
        g0, g1 = f0 - floor, f1 - floor
        if g0 > 0 and g1 > 0:
            p = math.log(g1 / g0) / math.log(x1 / x0)
            if p > 0:
                return _projected(x1, f1, floor, p)
    return x1 - f1 * (x1 - x0) / (f1 - f0)


def _projected(n: float, value: float, floor: float,
               exponent: float = PRIOR_EXPONENT) -> float | None:
    """Where ``excess - floor = a x^exponent`` through ``(n, value)`` reaches zero (``inf``
    beyond floats: computed in logs, as a nearly flat pair's ``p`` overflows the power);
    ``None`` when ``value`` is not above the floor or the floor not below zero."""
    g = value - floor
    if not (floor < 0 and g > 0 and n > 0):
        return None
    log_zero = math.log(n) + math.log(-floor / g) / exponent
    return math.exp(log_zero) if log_zero < 700 else math.inf


def projected_start(known: dict[int, float], floor: float, ceiling: int) -> int:
    """A cold search's start: the largest known population that meets the targets (the
    current users, solved before the search) projected to the excess's zero with
    :data:`PRIOR_EXPONENT` (:func:`_projected`), at most ``ceiling``; ``ceiling`` when no
    known point meets the targets above the floor."""
    good = [n for n, v in known.items() if v <= 0 and n > 0]
    n0 = max(good, default=None)
    zero = _projected(n0, known[n0], floor) if n0 is not None else None
    if zero is None or not math.isfinite(zero):
        return ceiling
    return int(min(max(zero, n0 + 1), ceiling))


def _half_tolerance(n: float, rel_tol: float) -> float:
    """How far past an estimate ``n`` the search aims: half the tolerance there."""
    return max(1.0, rel_tol * n) / 2


def rate_bracket(excess: Callable[[float], float], *, sat: float, floor: float, span: float,
                 cheap: Callable[[float], float] | None = None,
                 rough: Callable[[float], float] | None = None,
                 known: dict[float, float] | None = None,
                 max_probes: int = 24,
                 rough_reach: float = 0.0) -> tuple[float, float] | None:
    """Two solved rates ``lo < hi`` with ``excess(lo) <= 0 < excess(hi)`` and ``hi - lo <=
    span * lo`` (module notes), for an ``excess`` increasing on ``[0, sat)`` from ``floor``
    (its value at rate 0, no queueing) to ``inf`` (where the network does not solve or is
    unstable); ``None`` when ``floor > 0`` or after ``max_probes`` probes.

    ``known``: rates already solved (``rate -> excess``). ``cheap``: the excess of a cheaper
    model of the same network, of about the same shape: each aim is where ``cheap + 1``
    times the ratio ``(excess + 1) / (cheap + 1)`` at the latest probe reaches 1
    (:func:`_cheap_root`), the first where ``cheap`` reaches 0 -- or, with ``rough`` (a
    model between the two, cheaper than ``excess``), where the ratio of ``rough`` at that
    rate puts it, and the first probe there, not a third past. Without ``cheap``, the line in
    ``1 / (sat - rate)`` through the two nearest probes (a response time grows as ``1 / (sat
    - lambda)``: Kleinrock 1975, Sec. 3.2). The probe goes a third of the width past the aim
    towards the side not yet found, held inside where it closes the bracket either way; a
    bisection where two probes running did not halve it (Brent 1973). ``rough_reach``: the
    rough probe goes to the rate of the cheaper curve's solves nearest its aim when one lies
    within that share of the aim (a solve there shares the network's held parts), the ratio
    taken there."""
    if not floor < 0 or not sat > 0:
        return None
    pts = {0.0: float(floor)}
    pts.update({float(r): float(v) for r, v in (known or {}).items() if 0.0 < r < sat})
    cheap_pts: dict[float, float] = {0.0: float(floor)}

    def cheap_at(rate: float) -> float:
        if rate not in cheap_pts:
            cheap_pts[rate] = cheap(rate) if cheap is not None else math.inf
        return cheap_pts[rate]

    slow, last_width, first, last = 0, math.inf, None, None
    for _ in range(max_probes + 1):
        lo = max(r for r, v in pts.items() if v <= 0)
        hi = min((r for r, v in pts.items() if v > 0), default=None)
        if hi is not None and hi - lo <= span * lo:
            return lo, hi
        if len(pts) > max_probes:
            return None
        top = sat if hi is None else hi
        aim = None
        if cheap is not None:
            near = [r for r in pts if r > 0 and math.isfinite(pts[r])]
            target: float | None = 0.0
            if near:                            # the ratio at the latest probe
                ref = last if last in near else min(near, key=lambda r: min(abs(r - lo),
                                                                             abs(r - top)))
                base = cheap_at(ref)           # cheap + 1 scaled by the ratio at ref
                target = (1.0 + base) / (1.0 + pts[ref]) - 1.0 \
                    if math.isfinite(base) and pts[ref] > -1.0 else None
            if target is not None:
                aim = _cheap_root(cheap_at, cheap_pts, target, sat, lo, top)
            if not near and rough is not None and aim is not None:
                at = _solved_near(cheap_pts, aim, rough_reach * aim)
                scaled = rough(at)
                base = cheap_at(at)
                if math.isfinite(scaled) and scaled > -1.0 and math.isfinite(base):
                    aim = _cheap_root(cheap_at, cheap_pts, (1.0 + base) / (1.0 + scaled) - 1.0,
                                      sat, lo, top)
                    if aim is not None:
                        first = aim
        if aim is None or not lo < aim < top:
            aim = _u_line_root(pts, sat, lo, hi)
        width = span * (aim if aim is not None else 0.5 * (lo + top))
        if aim is None or not lo < aim < top or slow >= 2:
            probe = 0.5 * (lo + top)
        elif aim == first:                      # the rough ratio's aim: at it
            probe = aim
        elif hi is None or lo == 0.0:           # one side not found: go a third past the aim
            probe = aim + width / 3 if hi is None else aim - width / 3
            if hi is None and 0 < lo and aim - lo <= span * lo:
                probe = min(probe, _closes_failing(lo, span))
            if hi is not None and hi - aim <= span * aim:
                probe = max(probe, _closes_meeting(hi, span))
        else:
            near_lo, near_hi = aim - lo <= span * lo, hi - aim <= span * aim
            if near_lo and near_hi:             # closes it whichever way it falls
                probe = min(max(aim, _closes_meeting(hi, span)), _closes_failing(lo, span))
            elif near_lo:
                probe = min(aim + width / 3, _closes_failing(lo, span))
            elif near_hi:
                probe = max(aim - width / 3, _closes_meeting(hi, span))
            else:
                probe = aim
        probe = min(max(probe, lo + 1e-9 * top), top * (1.0 - 1e-12) if hi is None
                    else hi - 1e-9 * top)
        if probe in pts:
            probe = 0.5 * (lo + top)
        pts[probe] = excess(probe)
        last = probe
        new_lo = max(r for r, v in pts.items() if v <= 0)
        new_hi = min((r for r, v in pts.items() if v > 0), default=sat)
        width_now = new_hi - new_lo
        slow = slow + 1 if width_now > 0.5 * last_width else 0
        last_width = width_now
    return None


#: the probes that close a bracket sit this share inside its limits: a probe at exactly
#: ``lo (1 + span)`` missed ``hi - lo <= span lo`` by a rounding (1.2e-14 of the rate at
#: 428.98/s, the 4-tier network at R <= 0.25 s), and cost a third full solve
_INSIDE = 1e-12


def _closes_failing(lo: float, span: float) -> float:
    """The highest probe above ``lo`` that closes the bracket if it fails: ``p - lo <= span
    lo``."""
    return lo * (1.0 + span * (1.0 - _INSIDE))


def _closes_meeting(hi: float, span: float) -> float:
    """The lowest probe below ``hi`` that closes the bracket if it meets the targets: ``hi
    - p <= span p``, i.e. ``p >= hi / (1 + span)`` (``hi - span p`` at the aim, as before,
    left the probe's own ``span p`` short of it)."""
    return hi / (1.0 + span) * (1.0 + _INSIDE)


def _solved_near(solved: dict[float, float], rate: float, reach: float) -> float:
    """The rate of ``solved`` (but 0) nearest ``rate`` when it lies within ``reach`` of it,
    else ``rate``."""
    near = min((r for r in solved if r > 0), key=lambda r: abs(r - rate), default=None)
    return near if near is not None and abs(near - rate) <= reach else rate


def _u_line_root(pts: dict[float, float], sat: float, lo: float,
                 hi: float | None) -> float | None:
    """Where the line in ``u = 1 / (sat - rate)`` through the bracket's ends (or the two
    highest probes below it) crosses zero."""
    if hi is not None and math.isfinite(pts[hi]):
        pair = [lo, hi]
    else:
        pair = sorted(r for r, v in pts.items() if math.isfinite(v) and r <= lo)[-2:]
    if len(pair) < 2:
        return None
    return _u_root(pair[0], pts[pair[0]], pair[1], pts[pair[1]], 0.0, sat)


def _u_root(r1: float, v1: float, r2: float, v2: float, target: float,
            sat: float) -> float | None:
    """Where the line in ``u = 1 / (sat - rate)`` through ``(r1, v1)`` and ``(r2, v2)``
    reaches ``target``; ``None`` when it does not rise or reaches it beyond ``sat``."""
    u1, u2 = 1.0 / (sat - r1), 1.0 / (sat - r2)
    if not (v2 - v1) * (u2 - u1) > 0:
        return None
    u = u1 + (target - v1) * (u2 - u1) / (v2 - v1)
    return sat - 1.0 / u if u > 0 else None


def _cheap_root(cheap_at: Callable[[float], float], cheap_pts: dict[float, float],
                target: float, sat: float, lo: float, top: float,
                rel: float = 4e-3, max_solves: int = 8,
                reach: float | None = None) -> float | None:
    """Where the cheaper curve reaches ``target`` inside ``(lo, top)``, to ``rel`` of ``top``
    (a tenth of the first probe's room at the default span), or a point missing it by less
    than half that times the slope through its neighbours: lines in ``1 / (sat - rate)``
    through its two points nearest around it, the first from 0.7 of ``sat``, a step within
    ``rel top`` of an end taken to ``rel top`` past it (the bracket then closes from either
    side), bisection as the safeguard; read off its solves without one more where
    :func:`_read_cheap` can (``reach``: :data:`CHEAP_REACH`). ``None`` when it does not reach
    it there."""
    step = rel * top
    reach = CHEAP_REACH if reach is None else reach
    for _ in range(max_solves + 1):
        read = _read_cheap(cheap_pts, target, sat, lo, top, reach * top)
        if read is not None:
            return read
        below = [r for r, v in cheap_pts.items() if v <= target and r < top]
        above = [r for r, v in cheap_pts.items() if v > target and r > lo]
        a = max(below, default=lo)
        b = min(above, default=None)
        if b is not None and b - a <= step:
            return 0.5 * (a + b)
        if len(cheap_pts) > max_solves + 1:
            break
        va = cheap_pts.get(a)
        if va is None or not math.isfinite(va):
            return None
        if b is not None and math.isfinite(cheap_pts[b]):
            slope = (cheap_pts[b] - va) / (b - a)      # a point whose miss is worth less
            near = min((a, b), key=lambda r: abs(cheap_pts[r] - target))   # than half
            if slope > 0 and abs(cheap_pts[near] - target) <= 0.5 * step * slope:
                return near                             # the tolerance in the rate
            cand = _u_root(a, va, b, cheap_pts[b], target, sat)
        else:
            pair = sorted(r for r, v in cheap_pts.items() if math.isfinite(v) and r <= a)[-2:]
            cand = _u_root(pair[0], cheap_pts[pair[0]], pair[1], cheap_pts[pair[1]], target,
                           sat) if len(pair) == 2 else None
        right = top if b is None else b
        if len(cheap_pts) == 1 and a < 0.7 * sat < right:
            cand = 0.7 * sat
        elif cand is None or not a < cand < right:
            cand = 0.5 * (a + right)
        elif cand - a < step:
            cand = min(a + step, 0.5 * (a + right))
        elif right - cand < step:
            cand = max(right - step, 0.5 * (a + right))
        cheap_at(cand)
    below = [r for r, v in cheap_pts.items() if v <= target and r < top]
    return max(below, default=None) if below else None


#: :func:`_read_cheap` reads the cheaper curve's crossing off the line through its two solves
#: nearest it when one of them lies this close (a share of the bracket's upper end): on the
#: 4-tier network with two bursty tiers, SLAs of 0.25-3 s, cold, 73 -> 59 distinct rates
#: solved in 12 searches (3%: 64), the same 26 full and 12 rough probes, capacities within
#: 2.1e-3 of solving the curve to 0.4% (inside the search's 3%)
CHEAP_REACH = 0.06


def _read_cheap(cheap_pts: dict[float, float], target: float, sat: float, lo: float,
                top: float, reach: float) -> float | None:
    """Where the cheaper curve reaches ``target``, read off the line in ``1 / (sat - rate)``
    through its two solved points nearest the crossing (around it where it is bracketed,
    else the two nearest on one side), then through the two nearest that estimate: no
    solve. ``None`` when that is not inside ``(lo, top)``, no line rises there, or no solved
    point (but the rate 0) lies within ``reach`` of it (the line's error grows with the
    distance)."""
    pts = sorted((r, v) for r, v in cheap_pts.items() if math.isfinite(v))
    below = [p for p in pts if p[1] <= target]
    above = [p for p in pts if p[1] > target]
    if below and above:
        pair = [below[-1], above[0]]
    elif len(below) >= 2:
        pair = below[-2:]
    elif len(above) >= 2:
        pair = above[:2]
    else:
        return None
    est = _u_root(pair[0][0], pair[0][1], pair[1][0], pair[1][1], target, sat)
    if est is None:
        return None
    near = sorted(pts, key=lambda p: abs(p[0] - est))[:2]
    again = _u_root(near[0][0], near[0][1], near[1][0], near[1][1], target, sat)
    if again is not None:
        est = again
    if not lo < est < top:
        return None
    if min((abs(est - r) for r, _ in pts if r > 0), default=math.inf) > reach:
        return None
    return est
