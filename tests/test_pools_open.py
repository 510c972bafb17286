"""The open pool model (:mod:`solvers.pools_open`): its closed forms, saturation flagged, the
held curve computed once per model, and the open prediction with the pool."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.open import mm_c
from solvers.open.tiers import solve_open_tiers
from solvers.pools import PoolSpec
from solvers.pools_open import held_network, solve_open_pool, with_pools


def _one_tier(D: float, cores: int, K: int, lam: float):
    curve = held_network([[D]], [cores], [PoolSpec(K, 0, 1, "p")], 0)
    return curve, solve_open_pool(lam, curve)


def test_a_pool_of_one_over_an_exponential_tier_is_mm1():
    """K = 1 over one exponential tier: the station is M/M/1 of the tier's service, the
    token's wait its queueing time and the held residence the service time."""
    for lam in (1.0, 5.0, 9.0):
        curve, res = _one_tier(0.1, 4, 1, lam)
        assert curve.saturation == pytest.approx(10.0)
        assert res.waiting_time == pytest.approx(mm_c(lam, 0.1, 1).wait, rel=1e-9)
        assert res.residence_time[0, 0] == pytest.approx(0.1)
        assert res.waiting_time + 0.1 == pytest.approx(1.0 / (10.0 - lam), rel=1e-9)
        assert res.utilization == pytest.approx(lam * 0.1, rel=1e-9)


@pytest.mark.parametrize("K,cores", [(3, 3), (3, 8), (5, 2)])
def test_a_pool_over_one_multicore_tier_is_erlang_c(K: int, cores: int):
    """K tokens over c exponential cores: the station's rate with ``j`` requests is
    ``min(j, K, c) / D``. With ``K <= c`` it is M/M/K (the token wait Erlang C's of K
    servers); with ``K > c`` it is M/M/c whose queue splits between the token queue and the
    tier's (the total response time Erlang C's of c servers)."""
    D, servers = 0.05, min(K, cores)
    for frac in (0.3, 0.7, 0.95):
        lam = frac * servers / D
        _, res = _one_tier(D, cores, K, lam)
        q = mm_c(lam, D, servers)
        total = res.waiting_time + res.residence_time[0, 0]
        assert total == pytest.approx(D + q.wait, rel=1e-9)
        if K <= cores:
            assert res.waiting_time == pytest.approx(q.wait, rel=1e-9)
            assert res.utilization == pytest.approx(lam * D / K, rel=1e-9)
        else:
            assert res.busy == pytest.approx(q.jobs - res.queue, rel=1e-9)


def test_a_large_pool_over_product_form_tiers_is_the_jackson_network():
    """Tiers in series under a pool too large to bind: the flow-equivalent station of a
    product-form network fed Poisson arrivals is exact (Chandy et al. 1975), so the held
    residence is the Jackson network's ``sum_m D_m / (1 - lambda D_m)`` for one-core
    tiers and the token is never waited for."""
    D = np.array([0.02, 0.05, 0.01])
    curve = held_network(D[:, None], [1, 1, 1], [PoolSpec(400, 0, 3, "p")], 0)
    lam = 10.0
    res = solve_open_pool(lam, curve)
    assert res.residence_time[:, 0] == pytest.approx(D / (1 - lam * D), rel=1e-6)
    assert res.waiting_time < 1e-12


def test_classes_read_back_by_little_and_tiers_outside_the_pool_stay_open_queues():
    """Two classes through web (outside), app and db (held by 4 tokens): each class's held
    residence is its share of the held jobs by Little's law, which sum to the station's
    mean jobs; web keeps its M/M/c figures; the token wait reaches every class at app."""
    Dmc = np.array([[0.004, 0.004], [0.02, 0.06], [0.01, 0.03]])
    mix = np.array([0.75, 0.25])
    pools = [PoolSpec(4, 1, 3, "conn")]
    curve = held_network(Dmc, [2, 4, 2], pools, 0, mix)
    lam = 0.8 * curve.saturation
    base = solve_open_tiers(lam * mix, Dmc, [2, 4, 2])
    res, (one,) = with_pools(base, lam, pools, [curve], Dmc)
    assert res.residence_time[0] == pytest.approx(base.residence_time[0])
    held = one.residence_time
    assert float((held @ mix).sum()) * lam == pytest.approx(one.busy, rel=1e-9)
    assert res.response_time == pytest.approx(held.sum(axis=0) + base.residence_time[0]
                                              + one.waiting_time)
    assert res.stable and one.waiting_time > 0


def test_a_saturated_pool_is_flagged_with_inf_never_nan():
    """At or past ``X_H(K)`` the pool is unstable: the flag, ``inf`` times, utilization 1."""
    Dmc = np.array([[0.01], [0.05]])
    pools = [PoolSpec(2, 0, 2, "p")]
    curve = held_network(Dmc, [4, 4], pools, 0)
    for lam in (curve.saturation, 2 * curve.saturation):
        res = solve_open_pool(lam, curve)
        assert not res.stable and math.isinf(res.waiting_time) and res.utilization == 1.0
        assert "pool saturated" in res.flags[0]
        base = solve_open_tiers([lam], Dmc, [4, 4])
        out, _ = with_pools(base, lam, pools, [curve], Dmc)
        assert not out.stable and np.all(np.isinf(out.response_time))
        assert not np.isnan(out.residence_time).any()


def test_bad_input_names_the_field():
    curve, _ = _one_tier(0.1, 1, 1, 1.0)
    with pytest.raises(ValueError, match="rate"):
        solve_open_pool(-1.0, curve)
    with pytest.raises(ValueError, match="rate"):
        solve_open_pool(math.nan, curve)
