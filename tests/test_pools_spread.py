"""A held tier of spread beyond exponential in the held chain (solvers/pools_spread.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.pools import PoolSpec, solve_pools
from solvers.pools_general import solve_pools_general
from solvers.pools_spread import CLASS_CHAIN_FLAG, SPREAD_FLAG, solve_pools_spread, \
    spread_processes
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical


def _same(a, b) -> None:
    assert a.throughput == b.throughput
    for name in ("response_time", "residence_time", "pool_waiting_time", "throughput_curve"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("demands, mix", [
    ([0.02, 0.03, 0.05], None),
    ([[0.01, 0.01], [0.04, 0.04]], [0.3, 0.7]),
])
def test_exponential_service_of_equal_cost_is_the_former_model_bit_for_bit(demands, mix):
    M = np.asarray(demands).shape[0]
    pools = [PoolSpec(3, M - 2, M)]
    got = solve_pools_spread(demands, 40, 1.0, [2] * M, pools, mix)
    _same(got, solve_pools_general(demands, 40, 1.0, [2] * M, pools, mix))
    if mix is None:
        _same(got, solve_pools(demands, 40, 1.0, [2] * M, pools))
    assert not any(f.startswith(SPREAD_FLAG) for f in got.flags)


def test_the_process_is_the_classes_mixture_with_their_own_spread():
    """Its mean is the tier's demand; its SCV the mixture's: ``sum_c p_c D_c^2 (1 + v_c) /
    D^2 - 1`` with ``v_c = 1`` for an exponential class (Kleinrock 1975)."""
    D = np.array([[0.001, 0.001, 0.001], [0.003, 0.006, 0.04]])
    p = np.array([0.5, 0.3, 0.2])
    procs = spread_processes(D, p, [1, 1], [PoolSpec(2, 0, 2)], class_scv=[[np.nan] * 3,
                                                                          [np.nan, 0.2, 9.0]])
    assert procs[0].order == 1 and procs[1].order == 4       # 1 + 1 + 2 phases
    mean = float(p @ D[1])
    assert procs[1].mean == pytest.approx(mean, rel=1e-12)
    v = np.array([1.0, 1.0, 9.0])                              # below 1: exponential kept
    assert procs[1].scv == pytest.approx(p @ (D[1] ** 2 * (1 + v)) / mean ** 2 - 1, rel=1e-9)
    # no spread beyond exponential, or a pure delay: none
    assert spread_processes([[0.01, 0.01], [0.02, 0.02]], None, [1, 1], [PoolSpec(2, 0, 2)]) \
        is None
    assert spread_processes([[0.01, 0.01], [0.02, 0.2]], None, [1, math.inf],
                            [PoolSpec(2, 0, 2)]) is None


def test_where_the_chain_does_not_apply_the_factor_model_stands():
    D = np.array([[0.001, 0.001], [0.002, 0.002], [0.003, 0.12]])
    pools = [PoolSpec(2, 0, 3)]                                # db is last, but no think time
    _same(solve_pools_spread(D, 10, 0.0, [1, 1, 1], pools),
          solve_pools_general(D, 10, 0.0, [1, 1, 1], pools))
    inner = [PoolSpec(2, 0, 3), PoolSpec(1, 2, 3)]             # nested pools over db
    _same(solve_pools_spread(D, 10, 1.0, [1, 1, 1], inner),
          solve_pools_general(D, 10, 1.0, [1, 1, 1], inner))


def test_a_chain_over_its_budget_is_refused_without_building_its_station(monkeypatch):
    """Fourteen classes of different cost at a 4-core db behind 10 tokens: the mixture's
    station is far over the chain's budget (millions of transitions). The budget is checked
    on the counted states; the station is never built, and the factor model stands."""
    import solvers.pools_bursty as pools_bursty

    def refuse(*args, **kw):
        raise AssertionError("the station was built for a chain over its budget")

    monkeypatch.setattr(pools_bursty, "last_start_station", refuse)
    D = np.array([[0.002] * 14, [0.001 * (1 + c) for c in range(14)],
                  [0.0005 * (1 + c) ** 1.5 for c in range(14)]])
    pools = [PoolSpec(10, 1, 3)]
    assert spread_processes(D, None, [2, 4, 4], pools) is not None     # the chain is asked
    _same(solve_pools_spread(D, 100, 1.0, [2, 4, 4], pools),
          solve_pools_general(D, 100, 1.0, [2, 4, 4], pools))


@pytest.mark.slow
def test_against_the_simulated_pool_at_low_and_high_load():
    """The real testbed's shape (bench.accuracy.pool_scv's ``mix-2``): a pool of 2 over an
    app and a database of one core each, one class 40x the others at the database. At low
    load a request that finds both tokens held waits for the dear one's remaining service:
    the simulated wait is ~2x the two-moment factor's and the chain's is within a fifth of
    it; near saturation the factor overshoots and the chain stays close (seeded runs)."""
    D = np.array([[0.001] * 4, [0.003, 0.003, 0.006, 0.12]])
    mix = [0.25] * 4
    pools = [PoolSpec(2, 0, 2)]
    for n, tol in ((10, 0.2), (35, 0.1)):
        net = PhysicalNetwork(
            tiers=(Tier("app", 1, 0.001), Tier("db", 1, 0.003, multipliers=(1, 1, 2, 40))),
            classes=("a", "b", "c", "d"), mix=tuple(mix), think_time=1.0, population=n,
            pools=tuple(pools))
        sim = simulate_physical(net, 600.0, warmup=60.0, replications=3, seed=11)
        W = sim.pool_waiting[0].mean / sim.total_throughput.mean
        R = np.array([e.mean for e in sim.response_time])
        chain = solve_pools_spread(D, n, 1.0, [1, 1], pools, mix)
        factor = solve_pools_general(D, n, 1.0, [1, 1], pools, mix)
        assert any(f.startswith(SPREAD_FLAG) for f in chain.flags)
        assert chain.pool_waiting_time[0] == pytest.approx(W, rel=tol)
        assert abs(chain.pool_waiting_time[0] / W - 1) < abs(factor.pool_waiting_time[0] / W - 1)
        assert chain.throughput == pytest.approx(sim.total_throughput.mean, rel=0.03)
        assert np.max(np.abs(chain.response_time / R - 1)) < 0.15


def test_the_pipeline_model_solves_its_pool_point_by_the_chain_and_says_so():
    from streams.predict.model import SystemModel
    D = np.array([[0.001, 0.001], [0.003, 0.12]])
    pools = (PoolSpec(2, 0, 2, "workers"),)
    model = SystemModel(tiers=["app", "db"], classes=["page", "search"], D_mc=D,
                        mix=np.array([0.8, 0.2]), servers=np.array([1.0, 1.0]),
                        think_time=1.0, sla=np.array([1.0, 1.0]), processes=None,
                        map_limit=10_000, pools=pools)
    point = model.at(20)
    res = solve_pools_spread(D, 20, 1.0, [1.0, 1.0], pools, [0.8, 0.2])
    assert point.pool_waiting[0] == res.pool_waiting_time[0]
    assert point.throughput == res.throughput
    flags = [f for f in model.flags if f.startswith(SPREAD_FLAG)]
    assert flags == [f"{SPREAD_FLAG}: db's services as the classes' phase-type mixture in the "
                     f"held chain (from 20 users)"]
    model.at(30)
    assert len([f for f in model.flags if f.startswith(SPREAD_FLAG)]) == 1


def test_a_chain_that_does_not_solve_finitely_leaves_the_factor():
    """Two classes 1x/2x at a 4-core app held with an 8-core db (tests/test_pools.py's
    system): where the held chain's station gives no finite solution the factor stands."""
    D = np.array([[0.02, 0.02], [0.02, 0.04], [0.05, 0.05]])
    pools = [PoolSpec(6, 1, 3, "conn")]
    for n in (20, 149):          # at 149 the empty pool is ~1e-16 as likely as the likeliest state
        got = solve_pools_spread(D, n, 1.0, [4, 4, 8], pools, [0.5, 0.5])
        assert np.isfinite(got.throughput) and np.all(np.isfinite(got.response_time))
        if not any(f.startswith(SPREAD_FLAG) for f in got.flags):
            _same(got, solve_pools_general(D, n, 1.0, [4, 4, 8], pools, [0.5, 0.5]))


def _testbed(delay):
    """The real testbed's shape (app and db of one core, two gunicorn workers held over both,
    four classes of 3-120 ms at db) with the pure delay ``delay`` at every tier and class."""
    from streams.predict.model import SystemModel
    D = np.array([[0.001] * 4, [0.003, 0.003, 0.006, 0.120]])
    return SystemModel(tiers=["app", "db"], classes=["home", "product", "buy", "search"],
                       D_mc=D, mix=np.full(4, 0.25), servers=np.array([1.0, 1.0]),
                       think_time=1.0, sla=np.array([0.02, 0.02, 0.03, 0.4]), processes=None,
                       map_limit=10_000, pools=(PoolSpec(2, 0, 2, "workers"),),
                       delays=None if delay is None else np.full((2, 4), delay))


def test_a_vanishing_delay_leaves_the_pool_model_where_it_was():
    """A delay of 1 us (``latency = "estimate"`` reads 0.02 ms where there is none) changes
    the capacity and the response times by as little as itself: the held chain takes the
    delay instead of giving way to the factor model (which moved the capacity 5 -> 9)."""
    plain, tiny = _testbed(None), _testbed(1e-6)
    assert tiny.mva_capacity()[0] == plain.mva_capacity()[0]
    for n in (3, 20, 60):
        a, b = plain.at(n), tiny.at(n)
        assert b.throughput == pytest.approx(a.throughput, rel=1e-3)
        assert np.allclose(b.response, a.response, rtol=1e-3)
        assert np.allclose(b.residence, a.residence, rtol=1e-3)
        assert b.pool_waiting[0] == pytest.approx(a.pool_waiting[0], rel=1e-3)
    assert any(f.startswith(SPREAD_FLAG) for f in tiny.flags)


def test_delays_in_the_chain_hold_the_token_and_add_to_each_class():
    """The delays are inside the workers' holding time (a longer holding time: less
    throughput, a longer wait for a worker) and each class's response time carries its own
    delays (read back as without them, plus its delays)."""
    D = np.array([[0.001, 0.001], [0.003, 0.12]])
    delays = np.array([[0.0, 0.0], [0.01, 0.03]])
    pools = [PoolSpec(2, 0, 2)]
    plain = solve_pools_spread(D, 20, 1.0, [1, 1], pools, [0.8, 0.2])
    late = solve_pools_spread(D, 20, 1.0, [1, 1], pools, [0.8, 0.2], delays=delays)
    assert any(f.startswith(SPREAD_FLAG) for f in late.flags)
    assert late.throughput < plain.throughput
    assert late.pool_waiting_time[0] > plain.pool_waiting_time[0]
    assert late.pool_holding_time[0] > plain.pool_holding_time[0]
    assert late.pool_holding_time[0] > float(((D + delays) @ [0.8, 0.2]).sum())
    queue = late.residence_time - late.pool_waiting_time[0] * np.array([1.0, 0.0]) \
        - (D + delays) @ [0.8, 0.2]
    assert np.allclose(late.response_time, (D + delays).sum(axis=0) + queue.sum()
                       + late.pool_waiting_time[0])
    # where the chain does not apply (nested pools over db) the factor model with the delays
    nested = pools + [PoolSpec(1, 1, 2)]
    got = solve_pools_spread(D, 20, 1.0, [1, 1], nested, [0.8, 0.2], delays=delays)
    assert not any(f.startswith(SPREAD_FLAG) for f in got.flags)
    assert got.throughput < solve_pools_spread(D, 20, 1.0, [1, 1], nested,
                                               [0.8, 0.2]).throughput


def test_a_processor_sharing_held_tier_s_spread_goes_to_the_class_chain():
    """At a processor-sharing db the renewal chain (FCFS: the holders queued behind the dear
    one) is not taken, but the pool's holding time still carries the db's spread: one class
    whose own db SCV is 9 waits longer for a token than the product-form network says, and is
    that network bit for bit with SCV 1; classes of spread at the db take the class chain,
    whose wait exceeds the product form's; an FCFS app of spread held with a PS db of equal
    classes takes the renewal chain alone."""
    D = [[0.001], [0.04]]
    pools = [PoolSpec(2, 0, 2)]
    fcfs = solve_pools_spread(D, 20, 1.0, [1, 1], pools, class_scv=[[1.0], [9.0]])
    assert any(f.startswith(SPREAD_FLAG) for f in fcfs.flags)
    shared = solve_pools_spread(D, 20, 1.0, [1, 1], pools, class_scv=[[1.0], [9.0]],
                                ps=[False, True])
    assert any(f.startswith(CLASS_CHAIN_FLAG) for f in shared.flags)
    flat = solve_pools(D, 20, 1.0, [1, 1], pools)
    assert shared.pool_waiting_time[0] > 1.5 * flat.pool_waiting_time[0]
    _same(solve_pools_spread(D, 20, 1.0, [1, 1], pools, ps=[False, True]), flat)
    two = np.array([[0.001, 0.001], [0.003, 0.12]])
    got = solve_pools_spread(two, 20, 1.0, [1, 1], pools, [0.8, 0.2], tier_scv=[1.0, 4.0],
                             ps=[False, True])
    assert [f for f in got.flags if f.startswith(SPREAD_FLAG)] == [
        f"{CLASS_CHAIN_FLAG}: the classes of processor-sharing tier 1 each in the held chain"]
    assert got.pool_waiting_time[0] > solve_pools(two, 20, 1.0, [1, 1], pools,
                                                  [0.8, 0.2]).pool_waiting_time[0]
    app = np.array([[0.001, 0.05], [0.003, 0.003]])
    chain = solve_pools_spread(app, 20, 1.0, [1, 1], pools, [0.8, 0.2], ps=[False, True])
    assert [f for f in chain.flags if f.startswith(SPREAD_FLAG)] == [
        f"{SPREAD_FLAG}: tier 0's services as the classes' phase-type mixture in the held chain"]
    with pytest.raises(ValueError, match="ps"):
        solve_pools_spread(two, 20, 1.0, [1, 1], pools, [0.8, 0.2], ps=[True])


#: the real testbed's shape (bench/accuracy/pool_ps.py): an FCFS app of 1 ms, a PS db of 3 / 3
#: / 6 / 120 ms, a pool of 2 held over both, one core each, think time 1 s
_PS_D = np.array([[0.001] * 4, [0.003, 0.003, 0.006, 0.120]])


@pytest.mark.parametrize("population, seed", [(15, 7), (25, 8)])
def test_the_class_chain_meets_simulation_of_a_ps_db_under_a_pool(population, seed):
    """Against a simulation of the network (seeds and populations the bench does not use):
    every class's mean response time within 8% and the throughput within 2%, where the
    two-moment factor -- the route before the class chain -- is more than 9% over for a cheap
    class (a dear search's spread at the PS db lengthens the token's wait less than the
    factor says and more than the tier's mean does)."""
    from bench.accuracy import ps_tiers

    mix, ps = np.full(4, 0.25), np.array([False, True])
    runs = ps_tiers.simulate(_PS_D, mix, np.ones(2), ps, 1.0, population, 20_000, seed, 2)
    R = np.array([float(r.mean()) for r in runs])
    X = population / (1.0 + sum(float(r.sum()) for r in runs) / sum(len(r) for r in runs))
    got = solve_pools_spread(_PS_D, population, 1.0, [1, 1], [PoolSpec(2, 0, 2)], mix, ps=ps)
    assert any(f.startswith(CLASS_CHAIN_FLAG) for f in got.flags)
    assert np.all(np.abs(got.response_time / R - 1) < 0.08), got.response_time / R - 1
    assert abs(got.throughput / X - 1) < 0.02
    factor = solve_pools_general(_PS_D, population, 1.0, [1, 1], [PoolSpec(2, 0, 2)], mix)
    assert np.max(factor.response_time[:3] / R[:3] - 1) > 0.09


def test_the_answer_is_continuous_as_classes_become_equal():
    """The app's classes becoming equal moves the answer by as little as their difference
    (the renewal chain's limit is the class chain's exact one); the PS db's classes becoming
    equal leave the route's answer bit for bit at equality and within their difference of it
    before."""
    pools, mix, ps = [PoolSpec(2, 0, 2)], np.full(4, 0.25), [False, True]

    def at(app_eps, db_eps):
        D = np.array([[0.002, 0.002 + app_eps, 0.002, 0.002],
                      [0.01, 0.01, 0.01, 0.01 + db_eps]])
        return solve_pools_spread(D, 40, 1.0, [1, 1], pools, mix, ps=ps)

    for db in (0.05, 1e-6):
        equal, near = at(0.0, db), at(1e-7, db)
        assert abs(near.throughput / equal.throughput - 1) < 1e-5
        assert np.allclose(near.response_time, equal.response_time, rtol=1e-4)
    slow = np.array([[0.002, 0.001, 0.002, 0.002], [0.01] * 4])
    route = solve_pools_spread(slow, 40, 1.0, [1, 1], pools, mix)
    _same(solve_pools_spread(slow, 40, 1.0, [1, 1], pools, mix, ps=ps), route)
    slow[1, 3] += 1e-5
    near = solve_pools_spread(slow, 40, 1.0, [1, 1], pools, mix, ps=ps)
    assert any(f.startswith(CLASS_CHAIN_FLAG) for f in near.flags)
    assert abs(near.throughput / route.throughput - 1) < 1e-4
    assert np.allclose(near.response_time, route.response_time, rtol=1e-3)


def test_the_level_reduction_is_the_direct_solve():
    """:func:`solvers.pools_spread._level_stationary` on a random chain of levels (a state at
    level 0, moves of at most one level) is the sparse direct solution."""
    from scipy.sparse import csr_matrix

    from solvers.linalg.anchored import anchored_stationary
    from solvers.pools_spread import _level_stationary

    rng = np.random.default_rng(3)
    sizes = [1, 3, 4, 4, 4]
    starts = np.concatenate(([0], np.cumsum(sizes)))
    n = int(starts[-1])
    level = np.repeat(np.arange(len(sizes)), sizes)
    A = rng.random((n, n)) * (np.abs(level[:, None] - level[None, :]) <= 1)
    np.fill_diagonal(A, 0.0)
    G = A - np.diag(A.sum(axis=1))

    def cut(j, k):
        if not 0 <= k < len(sizes):
            return np.zeros((sizes[j], 0))
        return G[starts[j]:starts[j + 1], starts[k]:starts[k + 1]]

    parts = _level_stationary([(cut(j, j), cut(j, j + 1), cut(j, j - 1))
                               for j in range(len(sizes))])
    direct = anchored_stationary(csr_matrix(G), 0)
    assert np.allclose(np.concatenate(parts), direct / direct.sum(), rtol=1e-10, atol=0)


def test_a_processor_sharing_tier_its_pool_keeps_within_its_cores_is_fcfs():
    """A pool of at most the PS db's cores never lets two holders share a core: each is served
    alone under either discipline, so the answer is the FCFS db's (the chain), bit for bit --
    a single-threaded server held by a pool of 1; with more tokens than cores the PS db's
    classes go to the class chain and the answer moves."""
    two = np.array([[0.001, 0.001], [0.003, 0.12]])
    for size, cores in ((1, 1), (2, 2), (4, 4)):
        pools = [PoolSpec(size, 0, 2)]
        fcfs = solve_pools_spread(two, 20, 1.0, [1, cores], pools, [0.8, 0.2])
        ps = solve_pools_spread(two, 20, 1.0, [1, cores], pools, [0.8, 0.2],
                                ps=[False, True])
        assert any(f.startswith(SPREAD_FLAG) for f in ps.flags), size
        _same(ps, fcfs)
    pools = [PoolSpec(3, 0, 2)]
    fcfs = solve_pools_spread(two, 20, 1.0, [1, 2], pools, [0.8, 0.2])
    ps = solve_pools_spread(two, 20, 1.0, [1, 2], pools, [0.8, 0.2], ps=[False, True])
    assert [f for f in ps.flags if f.startswith(SPREAD_FLAG)] == [
        f"{CLASS_CHAIN_FLAG}: the classes of processor-sharing tier 1 each in the held chain"]
    assert ps.throughput != fcfs.throughput


def test_the_pipeline_model_takes_its_processor_sharing_db_in_the_class_chain():
    """The testbed's shape with the db processor sharing: the class chain, flagged, is the
    pipeline's pool point, and a larger capacity than the FCFS db's renewal chain."""
    fcfs, shared = _testbed(None), _testbed(None)
    shared.ps = np.array([False, True])
    for n in (3, 20):
        got = shared.at(n)
        res = solve_pools_spread(shared.D_mc, n, 1.0, shared.servers, shared.pools,
                                 shared.mix, ps=shared.ps)
        assert got.throughput == res.throughput
        assert got.pool_waiting[0] == res.pool_waiting_time[0]
    assert any(f.startswith(CLASS_CHAIN_FLAG) for f in shared.flags)
    assert shared.mva_capacity()[0] > fcfs.mva_capacity()[0]


def test_the_spread_processes_a_caller_holds_give_the_same_solution():
    """``processes``: :func:`spread_processes` computed once by the caller (the same at every
    population) gives the solution computed inside, bit for bit; ``None`` (no tier of
    spread) the factor model."""
    two = np.array([[0.001, 0.001], [0.003, 0.12]])
    pools = [PoolSpec(2, 0, 2)]
    procs = spread_processes(two, [0.8, 0.2], [1, 1], pools)
    assert procs is not None
    for n in (5, 20, 40):
        inside = solve_pools_spread(two, n, 1.0, [1, 1], pools, [0.8, 0.2])
        _same(solve_pools_spread(two, n, 1.0, [1, 1], pools, [0.8, 0.2], processes=procs),
              inside)
        assert any(f.startswith(SPREAD_FLAG) for f in inside.flags)
        _same(solve_pools_spread(two, n, 1.0, [1, 1], pools, [0.8, 0.2], processes=None),
              solve_pools_general(two, n, 1.0, [1, 1], pools, [0.8, 0.2]))
