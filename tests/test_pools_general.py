"""The pool's wait scaled for the holding time's variability (solvers.pools_general)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.pools import PoolSpec, solve_pools
from solvers.pools_general import _with_waits, holding_factors, solve_pools_general
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical


def _same(a, b) -> None:
    assert a.throughput == b.throughput
    for name in ("response_time", "residence_time", "tier_utilization", "pool_utilization",
                 "pool_waiting_time", "pool_queue", "throughput_curve"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("demands, servers, pools, n", [
    ([0.02, 0.03, 0.05], [4, 4, 8], [PoolSpec(4, 1, 3)], 120),
    ([0.004, 0.012, 0.006], [1, 2, 1], [PoolSpec(4, 1, 3)], 300),
    ([0.01, 0.02, 0.005, 0.03], [2, 1, math.inf, 1], [PoolSpec(6, 0, 4), PoolSpec(2, 1, 3)], 40),
])
def test_one_exponential_class_is_the_flow_equivalent_solution_bit_for_bit(demands, servers,
                                                                           pools, n):
    got = solve_pools_general(demands, n, 1.0, servers, pools)
    _same(got, solve_pools(demands, n, 1.0, servers, pools))
    assert got.holding_scv is not None and got.holding_scv.shape == (len(pools),)


def test_classes_of_equal_cost_are_the_exponential_solution():
    D = np.array([[0.01, 0.01], [0.04, 0.04]])
    _same(solve_pools_general(D, 30, 1.0, [1, 1], [PoolSpec(2, 0, 2)], [0.3, 0.7]),
          solve_pools(D, 30, 1.0, [1, 1], [PoolSpec(2, 0, 2)], [0.3, 0.7]))


def _machine_repair(N: int, K: int, h: float, Z: float) -> tuple[float, float]:
    """Closed M/M/K//N (K servers of mean ``h``, N sources thinking ``Z``): ``(X, W_q)``."""
    w = [math.comb(N, j) * math.factorial(j) * (h / Z) ** j
         / (math.factorial(j) if j <= K else math.factorial(K) * K ** (j - K))
         for j in range(N + 1)]
    p = np.array(w) / sum(w)
    j = np.arange(N + 1)
    X = float(p @ np.minimum(j, K)) / h
    return X, float(p @ np.maximum(j - K, 0)) / X


def test_exponential_holding_is_the_closed_m_m_k_queue():
    """A pool of K over a tier of infinitely many exponential servers: the machine-repair
    model M/M/K//N (Kleinrock 1975), the correction's factor 1."""
    X, W = _machine_repair(25, 3, 0.1, 1.0)
    got = solve_pools_general([0.1], 25, 1.0, [math.inf], [PoolSpec(3, 0, 1)],
                              tier_scv=[1.0])
    assert got.throughput == pytest.approx(X, rel=1e-10)
    assert got.pool_waiting_time[0] == pytest.approx(W, rel=1e-8)


def test_one_token_over_one_core_takes_the_pollaczek_khinchine_factor():
    """K = 1 over one core: the holding time is the service, the factor (1 + c^2) / 2 --
    the M/G/1 mean wait over M/M/1's (Pollaczek-Khinchine; Lee and Longton 1959)."""
    for scv in (0.5, 1.0, 4.0, 19.0):
        base = solve_pools([0.05], 10, 1.0, [1], [PoolSpec(1, 0, 1)])
        f, c2 = holding_factors([0.05], None, [1], [PoolSpec(1, 0, 1)], base, [scv])
        assert c2[0] == pytest.approx(scv, rel=1e-12)
        assert f[0] == pytest.approx(max((1 + scv) / 2, 1.0), rel=1e-12)


def test_the_classes_spread_is_the_mixture_second_moment():
    """Two classes at one exponential tier under a pool of 1: c^2 = 2 E[S^2] / E[S]^2 - 1
    over the mixture (each class exponential), the product form's c^2 = 1."""
    D = np.array([[0.002, 0.1]])
    p = np.array([0.8, 0.2])
    base = solve_pools(D, 8, 1.0, [1], [PoolSpec(1, 0, 1)], p)
    f, c2 = holding_factors(D, p, [1], [PoolSpec(1, 0, 1)], base)
    m1, m2 = p @ D[0], p @ (2 * D[0] ** 2)
    assert c2[0] == pytest.approx(m2 / m1 ** 2 - 1, rel=1e-9)
    assert f[0] == pytest.approx((1 + c2[0]) / 2, rel=1e-9)


def test_the_wait_is_the_factor_times_the_flow_equivalent_wait_at_the_fixed_point():
    D = np.array([[0.001, 0.001, 0.001, 0.0015], [0.003, 0.003, 0.006, 0.12]])
    mix = [0.15, 0.4, 0.3, 0.15]
    pools = [PoolSpec(2, 0, 2)]
    for n in (5, 20, 40, 200):
        base = solve_pools(D, n, 1.0, [1, 1], pools, mix)
        got = solve_pools_general(D, n, 1.0, [1, 1], pools, mix)
        f, _ = holding_factors(D, mix, [1, 1], pools, base)
        extra = got.pool_waiting_time[0] - got.pool_waiting_time[0] / f[0]
        D2, c2, pools2, _, _ = _with_waits(D, np.array([1.0, 1.0]), pools, np.array([extra]))
        own = solve_pools(D2, n, 1.0, c2, pools2, mix).pool_waiting_time[0]
        assert got.pool_waiting_time[0] == pytest.approx(f[0] * own, rel=1e-4)
        # a longer wait, never a higher throughput; the holding time's mean is unchanged
        assert got.pool_waiting_time[0] > base.pool_waiting_time[0]
        assert got.throughput <= base.throughput
        assert got.throughput <= 1 / (D[1] @ np.array(mix) / sum(mix)) * (1 + 1e-12)
        assert np.all(got.response_time > base.response_time)
        assert got.throughput_curve[n] == got.throughput
        assert got.pool_busy[0] == pytest.approx(got.throughput * got.pool_holding_time[0])


def test_bad_tier_scv_is_refused_by_name():
    with pytest.raises(ValueError, match="tier_scv"):
        solve_pools_general([0.01, 0.02], 5, 1.0, [1, 1], [PoolSpec(1, 0, 2)],
                            tier_scv=[1.0, -2.0])


def test_nested_pools_are_corrected_each_with_its_own_holding_time():
    D = np.array([[0.002, 0.002], [0.003, 0.08], [0.001, 0.001]])
    pools = [PoolSpec(4, 0, 3), PoolSpec(2, 1, 2)]
    base = solve_pools(D, 30, 1.0, [2, 1, 2], pools, [0.8, 0.2])
    got = solve_pools_general(D, 30, 1.0, [2, 1, 2], pools, [0.8, 0.2])
    assert np.all(got.pool_waiting_time >= base.pool_waiting_time)
    assert got.pool_waiting_time[1] > base.pool_waiting_time[1]
    assert got.residence_time.shape == (3,) and np.all(np.isfinite(got.residence_time))


def test_against_the_simulated_pool_of_classes_of_very_different_cost():
    """The testbed's shape (bench.accuracy.pool_scv's ``mix-2``): a pool of 2 over an app and a
    database of one core each, one class 40x the others at the database. The exponential
    flow-equivalent station puts the cheap classes' time far too low; the corrected wait
    brings the worst class's error to a fraction of it (seeded simulation)."""
    D = np.array([[0.001] * 4, [0.003, 0.003, 0.006, 0.12]])
    mix = [0.25] * 4
    net = PhysicalNetwork(
        tiers=(Tier("app", 1, 0.001), Tier("db", 1, 0.003, multipliers=(1, 1, 2, 40))),
        classes=("a", "b", "c", "d"), mix=tuple(mix), think_time=1.0, population=25,
        pools=(PoolSpec(2, 0, 2),))
    sim = simulate_physical(net, 400.0, warmup=40.0, replications=3, seed=3)
    R = np.array([e.mean for e in sim.response_time])
    exp = solve_pools(D, 25, 1.0, [1, 1], [PoolSpec(2, 0, 2)], mix).response_time / R - 1
    gen = solve_pools_general(D, 25, 1.0, [1, 1], [PoolSpec(2, 0, 2)], mix).response_time / R - 1
    assert np.max(np.abs(exp)) > 0.4
    assert np.max(np.abs(gen)) < 0.5 * np.max(np.abs(exp))


def test_a_class_spread_equal_to_its_tiers_is_the_former_solution_bit_for_bit():
    D = np.array([[0.001, 0.001, 0.001, 0.0015], [0.003, 0.003, 0.006, 0.12]])
    mix = [0.15, 0.4, 0.3, 0.15]
    pools = [PoolSpec(2, 0, 2)]
    before = solve_pools_general(D, 30, 1.0, [1, 1], pools, mix, [1.0, 2.0])
    for given in (np.full((2, 4), np.nan), np.array([[1.0] * 4, [2.0] * 4])):
        _same(solve_pools_general(D, 30, 1.0, [1, 1], pools, mix, [1.0, 2.0], given), before)
    one = solve_pools_general([0.02, 0.05], 30, 1.0, [1, 1], pools, class_scv=[[1.0], [1.0]])
    _same(one, solve_pools([0.02, 0.05], 30, 1.0, [1, 1], pools))


def test_a_class_own_spread_enters_the_mixture_second_moment():
    """Two classes at one tier under a pool of 1, the dear one's residence of SCV 9, the cheap
    one's constant: ``E[S^2] = sum_c p_c D_c^2 (1 + v_c)`` (Kleinrock 1975), the factor
    ``(1 + c^2) / 2`` over the product form's ``c^2 = 1``."""
    D = np.array([[0.002, 0.1]])
    p = np.array([0.8, 0.2])
    base = solve_pools(D, 8, 1.0, [1], [PoolSpec(1, 0, 1)], p)
    f, c2 = holding_factors(D, p, [1], [PoolSpec(1, 0, 1)], base, class_scv=[[0.0, 9.0]])
    m1, m2 = p @ D[0], p @ (D[0] ** 2 * np.array([1.0, 10.0]))
    assert c2[0] == pytest.approx(m2 / m1 ** 2 - 1, rel=1e-9)
    assert f[0] == pytest.approx((1 + c2[0]) / 2, rel=1e-9)
    # a pure delay stays constant whatever its classes say
    f, c2 = holding_factors([[0.05]], None, [math.inf], [PoolSpec(1, 0, 1)],
                            solve_pools([0.05], 8, 1.0, [math.inf], [PoolSpec(1, 0, 1)]),
                            class_scv=[[9.0]])
    assert c2[0] == pytest.approx(0.0, abs=1e-12) and f[0] == 1.0


@pytest.mark.parametrize("bad", [[[1.0, -1.0]], [[1.0, math.inf]], [[1.0]], [1.0, 1.0]])
def test_bad_class_scv_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="class_scv"):
        solve_pools_general([[0.01, 0.02]], 5, 1.0, [1], [PoolSpec(1, 0, 1)], class_scv=bad)
