"""The capacity search (streams.predict.capacity_search): brackets, aims, tolerance, and the
power-law aims on an excess with a floor."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.mva import mva_curve
from streams.predict.capacity_search import capacity_search


class Counted:
    def __init__(self, f):
        self.f, self.calls = f, []

    def __call__(self, n):
        self.calls.append(n)
        return self.f(n)


def test_capacity_search_exact_on_a_linear_excess():
    f = Counted(lambda n: n - 137.5)
    assert capacity_search(f, start=10, limit=100_000) == (137, False)
    assert len(f.calls) == len(set(f.calls))                  # nothing evaluated twice


def test_capacity_search_relative_tolerance_saves_probes_on_a_convex_excess():
    # steep, hockey-stick like R(n)/SLA - 1: regula falsi converges one-sidedly, the
    # tolerance stops it early
    def g(n):
        return math.expm1((n - 1375.5) / 100)
    exact, loose = Counted(g), Counted(g)
    assert capacity_search(exact, start=10, limit=100_000) == (1375, False)
    n, limited = capacity_search(loose, start=10, limit=100_000, rel_tol=0.03)
    assert not limited
    assert 0.97 * 1375 <= n <= 1375 and g(n) <= 0
    assert len(loose.calls) < len(exact.calls)
    assert len(loose.calls) <= 14       # 22 when falsi alternated with bisection on one end


def test_capacity_search_on_an_mva_response_time_curve():
    curve = mva_curve([0.0048, 0.0036], 3000, 0.5)
    R = curve.response_time
    want = int(np.nonzero(R <= 0.3)[0].max())         # brute force over every population
    for start in (2, 10, 40, 500, 5000):
        f = Counted(lambda n: R[n] / 0.3 - 1)
        assert capacity_search(f, start=start, limit=3000) == (want, False), start
        assert len(f.calls) <= 12                     # a few probes, not a scan


def test_capacity_search_reports_limited():
    f = Counted(lambda n: n - 1e9)
    assert capacity_search(f, start=10, limit=1000) == (1000, True)
    assert f.calls[-1] == 1000
    assert capacity_search(lambda n: n - 1000, start=3, limit=1000) == (1000, True)
    assert capacity_search(lambda n: n - 999.5, start=3, limit=1000) == (999, False)
    assert capacity_search(lambda n: n - 0.5, start=3, limit=1000) == (0, False)


def test_capacity_search_uses_known_points():
    f = Counted(lambda n: n - 137.5)
    known = {100: -37.5, 200: 62.5, 1000: 862.5}
    assert capacity_search(f, start=10, limit=100_000, known=known) == (137, False)
    assert not set(f.calls) & set(known)
    assert len(f.calls) <= 2
    assert known == {100: -37.5, 200: 62.5, 1000: 862.5}      # the caller's dict untouched
    # only a good point known: the search probes upwards from it
    f = Counted(lambda n: n - 137.5)
    assert capacity_search(f, start=10, limit=100_000, known={120: -17.5}) == (137, False)
    assert 120 not in f.calls and min(f.calls) > 120


def test_capacity_search_steps_up_to_the_chord_that_closes_the_bracket():
    """A warm start 5% below the answer of a convex excess (4 tiers, 2 bursty,
    docs/benchmarks.md): after the first step of the tolerance meets the targets too, the
    next step goes to the probe that closes the bracket at the last good one -- the chord
    through the two good probes crosses zero inside it -- not a doubled step and an
    interpolation (1,964, 2,022, 2,143, 2,079 before)."""
    def excess(n):
        return math.expm1((n - 2068.4) / 700.0)
    f = Counted(excess)
    n, limited = capacity_search(f, start=1964, limit=100_000, known={827: excess(827)},
                                 rel_tol=0.03, growth=1.03)
    assert (n, limited) == (2022, False)
    assert f.calls == [1964, 2022, 2084]
    assert excess(2084) > 0 and 2084 - 2022 <= int(0.03 * 2084)


def test_capacity_search_from_a_near_start_stays_near_it():
    """Started from the last solve's capacity with a small growth (streams.engine.system), the search
    never probes far beyond the answer (the costliest MAP network solves are there)."""
    f = Counted(lambda n: n - 1375.5)
    n, limited = capacity_search(f, start=1300, limit=100_000, rel_tol=0.03, growth=1.12)
    assert not limited and 1375 * 0.97 <= n <= 1375
    assert max(f.calls) <= 1300 * 1.12 ** 2 and len(f.calls) <= 4
    g = Counted(lambda n: n - 1375.5)
    assert capacity_search(g, start=1300, limit=100_000, rel_tol=0.03)[0] <= 1375
    assert max(g.calls) >= 2600                     # growth 2 probes twice the start


def test_capacity_search_warm_start_aims_its_first_step_at_the_secant():
    """With a known population below a warm start, the first step goes to where the line
    through the two crosses zero (a bound for a convex excess) instead of a fixed 12%: fewer
    probes from a start within a few percent of the answer."""
    def g(n):                                      # convex, answer 2044
        return math.expm1((n - 2044.5) / 400)
    for start in (2029, 2060):                     # meets / fails the target
        with_known, without = Counted(g), Counted(g)
        n, limited = capacity_search(with_known, start=start, limit=100_000, rel_tol=0.03,
                                     growth=1.12, known={1000: g(1000)})
        assert not limited and 2044 * 0.97 <= n <= 2044 and g(n) <= 0
        assert len(with_known.calls) <= 3, with_known.calls
        capacity_search(without, start=start, limit=100_000, rel_tol=0.03, growth=1.12)
        assert len(with_known.calls) <= len(without.calls), (with_known.calls, without.calls)
        if start < 2044:                           # up: the fixed step overshot, then 2 more
            assert len(with_known.calls) < len(without.calls)


def test_capacity_search_down_from_two_failing_probes_follows_their_line():
    """A warm start 5% above the answer with the pipeline's first step (the tolerance, 3%)
    fails twice; the next probe goes half the tolerance below the line through those two
    (a bound above the answer for a convex excess) instead of a doubled step: it meets the
    targets and closes the bracket -- three probes where the doubled step took four."""
    def g(n):                                      # convex, answer 2044
        return math.expm1((n - 2044.5) / 400)
    f = Counted(g)
    n, limited = capacity_search(f, start=2146, limit=100_000, rel_tol=0.03, growth=1.03,
                                 known={818: g(818)})
    assert not limited and 2044 * 0.97 <= n <= 2044 and g(n) <= 0
    assert [g(c) > 0 for c in f.calls] == [True, True, False], f.calls
    linear = Counted(lambda n: n - 2044.5)         # the line is exact: just below the answer
    n, _ = capacity_search(linear, start=2146, limit=100_000, rel_tol=0.03, growth=1.03,
                           known={818: 818 - 2044.5})
    assert len(linear.calls) == 3 and 2044 * 0.97 <= n <= 2044


def test_capacity_search_probes_where_one_probe_closes_the_bracket():
    """From 2,951 (meets) and 3,063 (fails) at a 3% tolerance any probe in 2,972-3,042 closes
    the bracket whichever way it falls; the search probes there once (the nudged estimate
    went to 2,953, then took two more: 4 tiers, 1 bursty, cold)."""
    f = Counted(lambda n: (n - 2990.5) / 1000)
    n, limited = capacity_search(f, start=10, limit=100_000, rel_tol=0.03,
                                 known={2951: f.f(2951), 3063: f.f(3063)})
    assert not limited and len(f.calls) == 1 and 2972 <= f.calls[0] <= 3042
    assert 2990 * 0.97 <= n <= 2990


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 100_000), st.integers(2, 5_000), st.sampled_from([0.0, 0.01, 0.03, 0.05]))
def test_the_closing_window_is_every_probe_that_closes_the_bracket(lo, width, rel_tol):
    from streams.predict.capacity_search import _closing_window

    hi = lo + width

    def closes(p: int) -> bool:
        return hi - p <= max(1, int(rel_tol * hi)) and p - lo <= max(1, int(rel_tol * p))

    window = _closing_window(lo, hi, rel_tol)
    inside = [p for p in range(lo + 1, hi) if closes(p)]
    assert window == ((inside[0], inside[-1]) if inside else None)
    assert inside == list(range(inside[0], inside[-1] + 1)) if inside else True


def test_capacity_search_without_the_secant_reads_known_values_as_signs():
    """The uncertainty band passes only the signs it knows (``{capacity: -1.0}``): with
    ``secant=False`` they bracket the search and nothing reads them as excesses."""
    f = Counted(lambda n: n - 1375.5)
    n, limited = capacity_search(f, start=1500, limit=100_000, known={1300: -1.0},
                                 rel_tol=0.03, growth=1.12, secant=False)
    assert not limited and 1375 * 0.97 <= n <= 1375 and 1300 not in f.calls


@settings(max_examples=200, deadline=None)
@given(answer=st.integers(0, 5000), start=st.integers(-3, 8000),
       limit=st.integers(1, 10_000), rel_tol=st.sampled_from([0.0, 0.01, 0.03, 0.1]),
       shape=st.sampled_from(["linear", "step", "convex", "concave"]),
       growth=st.sampled_from([2.0, 1.12, 1.001]), with_floor=st.booleans(),
       seen=st.none() | st.integers(1, 8000))
def test_capacity_search_property(answer, start, limit, rel_tol, shape, growth, with_floor,
                                  seen):
    """For any increasing excess crossing zero after ``answer``: the result meets the target,
    is within ``rel_tol`` of the largest such n, and is ``limited`` exactly when it should --
    with the power-law aims too (the floor ``excess(0)``, a population ``seen`` known)."""
    f = {"linear": lambda n: n - answer - 0.5,
         "step": lambda n: -1.0 if n <= answer else 1.0,
         "convex": lambda n: math.expm1(min((n - answer - 0.5) / 50, 50)),
         "concave": lambda n: math.copysign(math.sqrt(abs(n - answer - 0.5)),
                                            n - answer - 0.5)}[shape]
    known = {seen: f(seen)} if seen is not None and seen <= limit else None
    n, limited = capacity_search(f, start=start, limit=limit, rel_tol=rel_tol, growth=growth,
                                 known=known, floor=f(0) if with_floor else None)
    if answer >= limit:
        assert (n, limited) == (limit, True)
    else:
        assert not limited
        assert n <= answer and (n == 0 or f(n) <= 0)
        assert n >= answer - max(1, rel_tol * (answer + 1))
        if rel_tol == 0:
            assert n == answer


# --------------------------------------------------------------------------------------------
# power-law aims (an excess with a floor)
# --------------------------------------------------------------------------------------------

def test_the_power_law_zero_is_exact_on_a_power_law():
    """``excess(n) = floor + a n^p``: the power law through two points reaches zero at
    ``(-floor / a)^(1/p)``; one point projects there when ``p`` is the prior exponent. Without
    a floor, a floor not below zero, or a point on the floor: the line."""
    from streams.predict.capacity_search import PRIOR_EXPONENT, _line_zero, _projected

    floor, answer = -0.64, 2000.0
    for p in (1.3, 2.4, PRIOR_EXPONENT):
        a = -floor / answer ** p
        f = lambda n: floor + a * n ** p  # noqa: E731
        assert _line_zero(300, f(300), 900, f(900), floor) == pytest.approx(answer, rel=1e-12)
        assert _line_zero(900, f(900), 300, f(300), floor) == pytest.approx(answer, rel=1e-12)
    assert _projected(500, f(500), floor) == pytest.approx(answer, rel=1e-12)
    line = 900 - f(900) * 600 / (f(900) - f(300))
    assert _line_zero(300, f(300), 900, f(900)) == pytest.approx(line)
    assert _line_zero(300, f(300), 900, f(900), 0.1) == pytest.approx(line)
    assert _line_zero(300, floor, 900, f(900), floor) == pytest.approx(
        900 - f(900) * 600 / (f(900) - floor))
    assert _projected(500, floor, floor) is None and _projected(500, 0.2, 0.1) is None
    # a pair that hardly rises: its zero is out of reach (inf), not an OverflowError
    assert _line_zero(300, -0.5, 900, -0.5 + 1e-12, floor) == math.inf


def test_the_cold_start_projects_the_largest_good_population():
    from streams.predict.capacity_search import projected_start

    floor, answer = -0.64, 2000.5
    f = lambda n: floor + -floor * (n / answer) ** 3  # noqa: E731
    assert projected_start({200: f(200), 800: f(800)}, floor, 100_000) == 2000
    assert projected_start({800: f(800), 2500: f(2500)}, floor, 100_000) == 2000
    assert projected_start({800: f(800)}, floor, 1500) == 1500          # held to the ceiling
    assert projected_start({2500: f(2500)}, floor, 1500) == 1500        # nothing meets
    assert projected_start({}, floor, 1500) == 1500


def test_power_law_aims_save_probes_on_an_mva_response_time_curve():
    """Multi-server MVA curves (no burstiness, a sharper knee than the MAP network's) from
    starts at 60-160% of the answer with the users at 30% known: the power-law aims find the
    same answers, never with more probes than the lines, and fewer over all (34 against
    36)."""
    D, cores, Z, sla = [0.004, 0.010, 0.016], [1, 4, 8], 1.0, 0.1
    R = mva_curve(D, 3000, Z, cores).response_time
    want = int(np.nonzero(R <= sla)[0].max())
    floor = sum(D) / sla - 1
    lines = powers = 0
    for share in (0.6, 0.8, 0.95, 1.05, 1.2, 1.6):
        counted = {}
        for use in (None, floor):
            f = Counted(lambda n: R[n] / sla - 1)
            n, limited = capacity_search(f, start=int(share * want), limit=3000, rel_tol=0.03,
                                         known={int(0.3 * want): R[int(0.3 * want)] / sla - 1},
                                         floor=use)
            assert not limited and want * 0.97 <= n <= want
            counted[use] = len(f.calls)
        assert counted[floor] <= counted[None], (share, counted)
        lines, powers = lines + counted[None], powers + counted[floor]
    assert powers < lines, (powers, lines)
