"""The pool model's convolution of normalising constants (solvers/pools.py ``log_conv``, by
exponential tilting in linear space) against the entry-by-entry sum in logarithms
(``log_conv_rows``) as the reference, and the prefix/suffix products of ``network_log_g``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import solvers.pools as pools
from solvers.pools import (PoolSpec, log_conv, log_conv_rows, log_rates, network_log_g,
                           prepare_network, solve_top, FlowStation, top_network)

#: the largest error allowed in ``log G`` (the relative error of ``G``): the pool model's
#: answers are to stay within 1e-9 relative of the sums in logarithms
TOLERANCE = 1e-10


def _factors(kind: str, n: int, x: float, c: int) -> np.ndarray:
    """``log f(0..n)`` of a station as the pool model builds them: a tier of ``c`` cores and
    demand ``x`` (and a pool's flow-equivalent station, the same shape), a think time ``x``,
    or a pool's waiting queue weighted in (``log (j - c)^+`` added, ``-inf`` up to ``c``)."""
    j = np.arange(1, n + 1, dtype=float)
    if kind == "think":
        return log_rates(j / x)
    f = log_rates(np.minimum(j, c) / x)
    if kind == "over":
        with np.errstate(divide="ignore"):
            f = f + np.log(np.maximum(np.arange(n + 1) - c, 0).astype(float))
    return f


stations = st.tuples(st.sampled_from(["tier", "think", "over"]),
                     st.floats(1e-4, 100.0), st.integers(1, 64))


def _close(new: np.ndarray, ref: np.ndarray) -> None:
    assert np.array_equal(np.isfinite(new), np.isfinite(ref))
    assert np.array_equal(new[~np.isfinite(ref)], ref[~np.isfinite(ref)])
    finite = np.isfinite(ref)
    assert np.max(np.abs(new[finite] - ref[finite]), initial=0.0) <= TOLERANCE


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 5000), stations, stations, st.booleans())
def test_tilted_convolution_matches_the_sums_in_logarithms(n, first, second, nested):
    """Every entry (``-inf`` included) within :data:`TOLERANCE` of the reference, at up to
    5,001 entries; ``nested``: the first operand itself a product of two stations (a prefix
    or a rest of ``network_log_g``)."""
    a, b = _factors(*first[:1], n, *first[1:]), _factors(*second[:1], n, *second[1:])
    if nested:
        a = log_conv_rows(a, _factors("think", n, first[1], 1))
    _close(log_conv(a, b), log_conv_rows(a, b))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 400), st.integers(0, 2**32 - 1), st.floats(0.0, 0.5))
def test_any_sequence_matches_the_sums_in_logarithms(n, seed, holes):
    """Sequences of no shape (terms over thousands of orders of magnitude, ``-inf`` holes,
    not log-concave): the entries the tilts cannot reach are summed in logarithms."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0.0, 400.0, n), rng.normal(0.0, 400.0, n)
    a[rng.random(n) < holes] = -np.inf
    b[rng.random(n) < holes] = -np.inf
    _close(log_conv(a, b), log_conv_rows(a, b))


def test_station_factors_need_no_sums_in_logarithms(monkeypatch):
    """The stations' factors are log-concave (their rates do not fall), so the tilts reach
    every entry of their products at 3,000 users: no row is summed in logarithms."""
    rows: list[int] = []

    def counted(a, b, which=None, out=None):
        rows.append(a.shape[0] if which is None else len(which))
        return log_conv_rows(a, b, which, out)

    monkeypatch.setattr(pools, "log_conv_rows", counted)
    n = 3000
    tiers = [_factors("tier", n, 0.02, 4), _factors("tier", n, 0.05, 8),
             _factors("think", n, 1.0, 1), _factors("over", n, 0.03, 10),
             _factors("think", n, 1e-3, 1)]
    for i, a in enumerate(tiers):
        for b in tiers[i:]:
            log_conv(a, log_conv(a, b))
    assert sum(rows) == 0


def test_network_uses_three_convolutions_a_station_less_five(monkeypatch):
    """``network_log_g`` of ``S`` stations: ``3 S - 5`` convolutions (``3 S - 6`` with the head
    given), and each station's rest is the product of the others'."""
    calls = []
    real = pools.log_conv

    def counted(a, b):
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(pools, "log_conv", counted)
    n = 300
    logs = [_factors("tier", n, 0.02, 4), _factors("tier", n, 0.03, 2),
            _factors("tier", n, 0.05, 8), _factors("think", n, 1.0, 1)]
    for S in range(1, len(logs) + 1):
        calls.clear()
        logG, rests = network_log_g([FlowStation(f) for f in logs[:S]], n)
        assert len(calls) == max(3 * S - 5, 0)
        unit = np.r_[0.0, np.full(n, -np.inf)]
        full = unit
        for f in logs[:S]:
            full = log_conv_rows(full, f)
        _close(logG, full)
        for i in range(S):
            rest = unit
            for f in logs[:i] + logs[i + 1:S]:
                rest = log_conv_rows(rest, f)
            _close(rests[i], rest)
        if S >= 3:
            calls.clear()
            again = network_log_g([FlowStation(f) for f in logs[:S]], n, rests[-1])
            assert len(calls) == 3 * S - 6
            assert np.array_equal(again[0], logG)


@pytest.mark.parametrize("Z", [0.0, 1.0])
def test_a_solve_given_the_network_without_think_is_the_same(Z):
    """``solve_top`` with ``log G`` of the stations alone given (as the factor fixed point
    passes it from the first solve) answers exactly as without it."""
    net = prepare_network([0.02, 0.03, 0.05], 600, Z, [4, 4, 8], [PoolSpec(6, 1, 3)], None)
    stations, inner = top_network(net)
    base, top = solve_top(net, stations, inner)
    alone = top.rests[-1] if Z > 0 else top.logG
    for think in (Z, Z + 0.25):
        plain, _ = solve_top(net, stations, inner, think)
        given_, _ = solve_top(net, stations, inner, think, alone)
        assert given_.throughput == plain.throughput
        assert np.array_equal(given_.response_time, plain.response_time)
        assert np.array_equal(given_.residence_time, plain.residence_time)


def test_marginals_at_every_population_are_each_populations_marginal():
    """``station_marginals`` (a held network read back at every token count at once) row by
    row against ``station_marginal`` at that population, a nested pool's station among the
    stations."""
    net = prepare_network([0.02, 0.03, 0.05], 40, 1.0, [4, 2, 1],
                          [PoolSpec(12, 0, 3), PoolSpec(3, 1, 3)], None)
    stations = pools.level_stations(range(0, 3), net.pools, 0, net.D, net.c, 12)
    logG, rests = network_log_g(stations, 12)
    assert any(s.inner is not None for s in stations)
    for s, r in zip(stations, rests):
        rows = pools.station_marginals(s, r, logG, 12)
        for k in range(13):
            one = pools.station_marginal(s, r, logG, k)
            np.testing.assert_allclose(rows[k, :k + 1], one, rtol=1e-13, atol=1e-300)
            assert not rows[k, k + 1:].any()
            np.testing.assert_allclose(pools.station_queues(s, rows)[k],
                                       pools.station_queues(s, one), rtol=1e-13)
