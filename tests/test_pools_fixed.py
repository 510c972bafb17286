"""The two-moment factor's fixed point by Newton's method on the extra think time
(solvers.pools_fixed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import solvers.pools_general as general
from solvers.pools import PoolSpec, prepare_network, solve_top, top_network, solve_pools
from solvers.pools_fixed import WaitCurve, outermost
from solvers.pools_general import holding_factors, solve_pools_general

#: four classes of 1/1/2/40x cost at app and db under one pool (bench.speed.pools' case)
CLASSES = np.array([0.02, 0.03, 0.05])[:, None] * np.array(
    [np.ones(4), 4 * np.array([1.0, 1.0, 2.0, 40.0]) / 11, 4 * np.array([1.0, 1.0, 2.0, 40.0]) / 11])
CORES = [4, 4, 8]


def _curve(demands, n, Z, servers, pools, mix=None):
    net = prepare_network(demands, n, Z, servers, pools, mix)
    stations, inner = top_network(net)
    _, top = solve_top(net, stations, inner)
    scaled = [k for k in range(len(pools)) if outermost(pools)[k]]
    return WaitCurve(stations, top.rests[-1] if Z > 0 else top.logG, scaled, n), scaled


@pytest.mark.parametrize("demands, n, servers, pools", [
    (CLASSES, 40, CORES, [PoolSpec(6, 1, 3)]),
    (CLASSES, 300, CORES, [PoolSpec(6, 1, 3)]),
    ([0.01, 0.02, 0.005, 0.03], 60, [2, 1, math.inf, 1], [PoolSpec(2, 0, 2), PoolSpec(3, 2, 4)]),
    ([0.01, 0.02, 0.03], 25, [1, 2, 1], [PoolSpec(4, 0, 3), PoolSpec(2, 1, 2)]),
])
def test_the_wait_curve_is_the_solution_at_every_think_time(demands, n, servers, pools):
    """The curve's wait at think time ``Z`` is the pool model's solved at ``Z``, its slope the
    derivative of that (central differences), for every outermost pool."""
    curve, scaled = _curve(demands, n, 1.0, servers, pools)
    for Z in (0.0, 0.3, 1.0, 2.5):
        W, dW = curve.at(Z)
        solved = solve_pools(demands, n, Z, servers, pools).pool_waiting_time[scaled]
        assert W == pytest.approx(solved, rel=1e-9, abs=1e-15)
        if Z > 0:
            h = 1e-5
            up = solve_pools(demands, n, Z + h, servers, pools).pool_waiting_time[scaled]
            down = solve_pools(demands, n, Z - h, servers, pools).pool_waiting_time[scaled]
            assert dW == pytest.approx((up - down) / (2 * h), rel=1e-4, abs=1e-9)
            assert np.all(dW <= 0) and np.all(dW >= -1 - 1e-9)


def test_no_think_time_curve_starts_from_the_network_alone():
    curve, scaled = _curve([0.02, 0.05], 12, 0.0, [1, 2], [PoolSpec(2, 0, 2)])
    W, _ = curve.at(0.0)
    assert W == pytest.approx(solve_pools([0.02, 0.05], 12, 0.0, [1, 2], [PoolSpec(2, 0, 2)])
                              .pool_waiting_time, rel=1e-9)


def _reference(monkeypatch, *args, **kw):
    """The regula-falsi fixed point over the whole network (the route for nested pools)."""
    with monkeypatch.context() as m:
        m.setattr(general, "outermost", lambda pools: np.zeros(len(list(pools)), dtype=bool))
        return solve_pools_general(*args, **kw)


@pytest.mark.parametrize("n, Z", [(8, 1.0), (20, 1.0), (40, 1.0), (128, 1.0), (400, 1.0),
                                  (30, 0.0)])
def test_newton_route_is_the_regula_falsi_fixed_point(monkeypatch, n, Z):
    """Same answers as the fixed point solved over the network with the extra delay station
    (regula falsi to 1e-5 of the wait): within its tolerance."""
    args = (CLASSES, n, Z, CORES, [PoolSpec(6, 1, 3)])
    got, ref = solve_pools_general(*args), _reference(monkeypatch, *args)
    assert got.throughput == pytest.approx(ref.throughput, rel=1e-7)
    for name in ("response_time", "residence_time", "tier_utilization", "pool_utilization"):
        assert getattr(got, name) == pytest.approx(getattr(ref, name), rel=1e-6), name
    assert got.pool_waiting_time == pytest.approx(ref.pool_waiting_time, rel=2e-5)
    assert got.throughput_curve[:n] == pytest.approx(ref.throughput_curve[:n], rel=0)
    assert got.outer_solves == 3 and got.inner_solves == 1
    assert ref.outer_solves >= 3 and ref.inner_solves == ref.outer_solves


def test_the_answer_solves_the_fixed_point_equation():
    """Each scaled pool's wait is ``f_k`` times its flow-equivalent wait at the think time
    that carries the extra waits (two disjoint pools, one sum)."""
    D = np.array([[0.004, 0.004, 0.02], [0.01, 0.01, 0.2], [0.01, 0.03, 0.01]])
    pools = [PoolSpec(2, 0, 1), PoolSpec(3, 1, 3)]
    mix = [0.5, 0.3, 0.2]
    got = solve_pools_general(D, 30, 1.0, [1, 2, 2], pools, mix)
    base = solve_pools(D, 30, 1.0, [1, 2, 2], pools, mix)
    f, _ = holding_factors(D, mix, np.array([1.0, 2.0, 2.0]), pools, base)
    assert np.all(f > 1.0)
    own = solve_pools(D, 30, 1.0 + float(got.pool_waiting_time.sum()
                                         - (got.pool_waiting_time / f).sum()),
                      [1, 2, 2], pools, mix)
    assert got.pool_waiting_time == pytest.approx(f * own.pool_waiting_time, rel=1e-8)
    assert got.throughput == pytest.approx(own.throughput, rel=1e-10)
    assert got.outer_solves == 1 + 2 + 1


def test_nested_scaled_pool_keeps_the_network_route():
    """A scaled pool inside another is not beside the think time: the extra station's network
    is solved (its steps counted, the held networks each time)."""
    D = np.array([[0.01, 0.01], [0.002, 0.08], [0.01, 0.01]])
    pools = [PoolSpec(6, 0, 3), PoolSpec(2, 1, 2)]
    assert list(outermost(pools)) == [True, False]
    got = solve_pools_general(D, 40, 1.0, [2, 1, 2], pools, [0.7, 0.3])
    assert got.outer_solves > 3 and got.inner_solves == 2 * got.outer_solves
    assert got.pool_waiting_time[1] > solve_pools(D, 40, 1.0, [2, 1, 2], pools,
                                                  [0.7, 0.3]).pool_waiting_time[1]


def test_negligible_wait_returns_the_exponential_solution():
    got = solve_pools_general(CLASSES, 2, 1.0, CORES, [PoolSpec(6, 1, 3)])
    assert got.outer_solves == 1
    ref = solve_pools(CLASSES, 2, 1.0, CORES, [PoolSpec(6, 1, 3)])
    assert got.throughput == ref.throughput
