"""Pools with a bursty tier (solvers/pools_bursty.py): the exact chain of a small network with a
MAP database behind the pool, the limits where it is another solver exactly, the count of the
held networks solved, and short seeded simulations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from solvers.decomposition import solve_decomposed
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.pools import PoolSpec, solve_pools
from solvers.pools_bursty import BURSTY_POOL_FLAG, solve_pools_bursty
from solvers.processes import MAP

BURSTY = MAP(BURSTY_D0, BURSTY_D1)
E = MAP.exponential


def _chain(D, N, Z, K, proc):
    """Exact CTMC of web, app (one core each, exponential) and db (one core, MAP ``proc``
    scaled to ``D[2]``), a pool of ``K`` tokens over app and db, FCFS on the token; the MAP's
    phase moves only while db serves. Returns throughput and mean response time."""
    P = proc.scaled(D[2])
    D0, D1 = P.D0, P.D1
    phases = P.order
    states = [s for s in itertools.product(range(N + 1), range(N + 1), range(K + 1),
                                           range(K + 1), range(phases))
              if s[0] + s[1] + s[2] + s[3] <= N and s[2] + s[3] <= K
              and (s[1] == 0 or s[2] + s[3] == K)]
    index = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))
    done = np.zeros(len(states))
    for s in states:
        web, wait, app, db, ph = s
        moves = []
        thinking = N - web - wait - app - db
        if thinking:
            moves.append((thinking / Z, (web + 1, wait, app, db, ph)))
        if web:
            moves.append((1 / D[0], (web - 1, wait, app + 1, db, ph) if app + db < K
                          else (web - 1, wait + 1, app, db, ph)))
        if app:
            moves.append((1 / D[1], (web, wait, app - 1, db + 1, ph)))
        if db:
            for q in range(phases):
                if q != ph and D0[ph, q] > 0:
                    moves.append((D0[ph, q], (web, wait, app, db, q)))
                if D1[ph, q] > 0:
                    done[index[s]] += D1[ph, q]
                    moves.append((D1[ph, q], (web, wait - 1, app + 1, db - 1, q) if wait
                                  else (web, wait, app, db - 1, q)))
        for rate, t in moves:
            Q[index[s], index[t]] += rate
            Q[index[s], index[s]] -= rate
    A = np.vstack([Q.T, np.ones(len(states))])
    b = np.zeros(len(states) + 1)
    b[-1] = 1.0
    p = np.linalg.lstsq(A, b, rcond=None)[0]
    X = float(p @ done)
    return X, N / X - Z


def _flat_map(mean: float) -> MAP:
    """Exponential service written as a MAP of two phases that switch (no burstiness)."""
    r = 1.0 / mean
    return MAP([[-r - 3.0, 3.0], [2.0, -r - 2.0]], [[r, 0.0], [0.0, r]])


def test_a_pool_that_cannot_bind_is_the_map_network_decomposition():
    """``K >= N``: the pool never binds; the held chain (app and db exactly, the outside a
    flow-equivalent source) and the MAP network's decomposition (db against the rest) are
    two approximations of one network: within 0.1% of each other in X, 0.5% in R (the held
    chain's db keeps the next start phase on the job that started last, the decomposition's
    per-job station draws it apart: measured R +0.15%)."""
    procs = [E(0.02), E(0.03), BURSTY.scaled(0.05)]
    for N in (20, 60):
        got = solve_pools_bursty(procs, N, 1.0, [4, 4, 8], [PoolSpec(N, 1, 3)])
        want = solve_decomposed(procs, N, 1.0, servers=[4, 4, 8])
        assert got.throughput == pytest.approx(want.throughput, rel=1e-3)
        assert got.response_time[0] == pytest.approx(float(np.ravel(want.response_time)[0]),
                                                     rel=5e-3)
        assert got.pool_waiting_time[0] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("N, K", [(4, 2), pytest.param(6, 2, marks=pytest.mark.slow),
                                  (6, 3), pytest.param(8, 3, marks=pytest.mark.slow)])
@pytest.mark.parametrize("bursty", [True, False])
def test_the_held_chain_is_close_to_the_exact_chain(N, K, bursty):
    """The held tiers (app, and db with its phase) as a chain, the outside (think time, web)
    a flow-equivalent source: within 0.5% of the exact chain (measured at the worst: X +0.1%,
    R -0.3%), for a bursty db where the flow-equivalent pool model with the db's mean is off
    by 19-40% in X, and for a two-phase db without burstiness."""
    D, Z = [0.03, 0.04, 0.05], 0.3
    proc = BURSTY if bursty else _flat_map(1.0)
    X, R = _chain(D, N, Z, K, proc)
    got = solve_pools_bursty([E(D[0]), E(D[1]), proc.scaled(D[2])], N, Z, [1, 1, 1],
                             [PoolSpec(K, 1, 3)])
    assert got.throughput == pytest.approx(X, rel=0.005)
    assert got.response_time[0] == pytest.approx(R, rel=0.005)
    assert got.inner_solves == 3 and not got.flags
    if bursty:
        exponential = solve_pools(D, N, Z, [1, 1, 1], [PoolSpec(K, 1, 3)])
        assert exponential.throughput > 1.15 * X


def test_the_bursty_tier_first_in_the_pool():
    """The database first in the pool's run (held across db, then app): the chain's other
    order, against the exact chain of the mirrored network (the same as the held tiers swap
    only where the requests wait, not the held population): within 0.5% of the order where
    db is last at one core each and equal demands."""
    procs = [E(0.03), BURSTY.scaled(0.04), E(0.04)]
    first = solve_pools_bursty(procs, 6, 0.3, [1, 1, 1], [PoolSpec(2, 1, 3)])
    last = solve_pools_bursty([E(0.03), E(0.04), BURSTY.scaled(0.04)], 6, 0.3, [1, 1, 1],
                              [PoolSpec(2, 1, 3)])
    assert first.throughput == pytest.approx(last.throughput, rel=0.05)
    assert first.response_time[0] == pytest.approx(6 / first.throughput - 0.3, rel=1e-9)


def test_over_its_budget_the_chain_is_solved_against_the_rest(monkeypatch):
    """Past :data:`HELD_CHAIN_WORK` the bursty tier's chain against the rest (the pool's
    tokens capped by its population), flagged: still within 3% of the held chain here."""
    import solvers.pools_bursty as module
    procs = [E(0.02), E(0.03), BURSTY.scaled(0.05)]
    held = solve_pools_bursty(procs, 150, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3)])
    monkeypatch.setattr(module, "HELD_CHAIN_WORK", 0)
    rest = solve_pools_bursty(procs, 150, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3)])
    assert any(f.startswith(module.AGAINST_REST_FLAG) for f in rest.flags)
    assert rest.throughput == pytest.approx(held.throughput, rel=0.03)
    assert 1 + 6 < rest.inner_solves <= 1 + 1 + 6 + 7


@pytest.mark.slow
def test_littles_law_holds_and_the_tokens_are_bounded():
    procs = [E(0.02), E(0.03), BURSTY.scaled(0.05)]
    for N, K in ((60, 6), (150, 6), (150, 12)):
        got = solve_pools_bursty(procs, N, 1.0, [4, 4, 8], [PoolSpec(K, 1, 3)])
        assert got.response_time[0] == pytest.approx(N / got.throughput - 1.0, rel=1e-9)
        assert got.pool_busy[0] == pytest.approx(got.throughput * got.pool_holding_time[0])
        assert 0 < got.pool_busy[0] <= K + 1e-9
        assert got.residence_time.sum() == pytest.approx(got.response_time[0], rel=1e-9)


def test_held_networks_solved_per_solve():
    """The flow-equivalent pool model solves each pool's held network once (at every token
    count in one pass), the figures of nested pools read from those solutions: no fixed
    point. The bursty route: the other held tiers, the outside, one chain."""
    D, c = [0.02, 0.03, 0.05], [4, 4, 8]
    assert solve_pools(D, 100, 1.0, c, []).inner_solves == 0
    assert solve_pools(D, 100, 1.0, c, [PoolSpec(6, 1, 3)]).inner_solves == 1
    assert solve_pools(D, 100, 1.0, c, [PoolSpec(6, 0, 1), PoolSpec(6, 1, 3)]).inner_solves == 2
    nested = solve_pools(D, 100, 1.0, c, [PoolSpec(6, 1, 3), PoolSpec(2, 2, 3)]).inner_solves
    assert nested == 2                        # the inner (inside the outer's), the outer
    procs = [E(0.02), E(0.03), BURSTY.scaled(0.05)]
    got = solve_pools_bursty(procs, 100, 1.0, c, [PoolSpec(6, 1, 3)]).inner_solves
    assert got == 3                           # the other held tiers, the outside, the chain


def test_what_it_does_not_solve_is_solved_with_the_means_and_flagged():
    procs = [E(0.02), BURSTY.scaled(0.03), BURSTY.scaled(0.05)]
    got = solve_pools_bursty(procs, 50, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3)])
    want = solve_pools([0.02, 0.03, 0.05], 50, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3)])
    assert got.throughput == want.throughput
    assert any(f.startswith(BURSTY_POOL_FLAG) and "several bursty tiers" in f
               for f in got.flags)
    nested = solve_pools_bursty([E(0.02), E(0.03), BURSTY.scaled(0.05)], 50, 1.0, [4, 4, 8],
                                [PoolSpec(6, 1, 3), PoolSpec(3, 2, 3)])
    assert any("nested" in f for f in nested.flags)
    with pytest.raises(ValueError, match="processes"):
        solve_pools_bursty([0.02, 0.03], 5, 1.0, [1, 1], [])


def _network(n, size, bursty):
    from solvers.simulation.physical import PhysicalNetwork, Tier
    service = [0.02, 0.03, BURSTY.scaled(0.05) if bursty else 0.05]
    return PhysicalNetwork(tiers=tuple(Tier(name, c, s) for name, c, s in
                                       zip(("web", "app", "db"), (4, 4, 8), service)),
                           classes=("a",), mix=(1.0,), think_time=1.0, population=n,
                           pools=(PoolSpec(size, 1, 3),))


@pytest.mark.slow
def test_a_small_pool_binds_in_the_simulation_as_the_model_says():
    """Four connections over app and db, 150 users: the pool binds (50/s where the CPUs give
    133/s); throughput within 3% and response time within 10% of a seeded simulation."""
    from solvers.simulation.physical import simulate_physical
    sim = simulate_physical(_network(150, 4, False), 200, warmup=20, replications=3, seed=11)
    model = solve_pools([0.02, 0.03, 0.05], 150, 1.0, [4, 4, 8], [PoolSpec(4, 1, 3)])
    assert model.throughput == pytest.approx(sim.total_throughput.mean, rel=0.03)
    assert model.response_time[0] == pytest.approx(sim.total_response_time.mean, rel=0.10)


@pytest.mark.slow
def test_a_bursty_db_behind_the_pool_against_the_simulation():
    """Six connections over app and a bursty db (index of dispersion ~200), 150 users: the
    held chain within 5% (X; the simulation's own 95% interval is about 3%: slow runs last
    hundreds of services) and 10% (R) of a seeded simulation, where the pool model with the
    db's mean overstates X by more than 5%."""
    from solvers.simulation.physical import simulate_physical
    sim = simulate_physical(_network(150, 6, True), 1500, warmup=150, replications=3, seed=5)
    X, R = sim.total_throughput.mean, sim.total_response_time.mean
    got = solve_pools_bursty([E(0.02), E(0.03), BURSTY.scaled(0.05)], 150, 1.0, [4, 4, 8],
                             [PoolSpec(6, 1, 3)])
    assert got.throughput == pytest.approx(X, rel=0.05)
    assert got.response_time[0] == pytest.approx(R, rel=0.10)
    mean_only = solve_pools([0.02, 0.03, 0.05], 150, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3)])
    assert mean_only.throughput > 1.05 * X
    assert abs(mean_only.throughput / X - 1) > 2 * abs(got.throughput / X - 1)


def test_a_held_chain_whose_empty_pool_is_unlikely_is_solved_from_a_likely_level():
    """A 4-core app held with an 8-core db behind a pool of 6, 149 users: the solve anchored
    at the empty pool loses its precision (entries of +-1e16); anchored at the level the
    exponential model finds likeliest it gives the curve its neighbours give, finite."""
    D = np.array([[0.02, 0.02], [0.02, 0.04], [0.05, 0.05]])
    rates = np.array([1 / 0.02, 1 / 0.04])
    app = MAP(np.diag(-rates), np.outer(rates, [0.5, 0.5]))
    procs = [MAP.exponential(0.02), app, MAP.exponential(0.05)]
    pools = [PoolSpec(6, 1, 3, "conn")]
    got = {n: solve_pools_bursty(procs, n, 1.0, [4, 4, 8], pools, [0.5, 0.5], D)
           for n in (140, 149, 160)}
    assert np.isfinite(got[149].response_time).all()
    assert got[149].throughput == pytest.approx(got[160].throughput, rel=1e-9)
    assert got[140].response_time[0] < got[149].response_time[0] < got[160].response_time[0]


@pytest.mark.parametrize("where", ["last", "first"])
def test_delays_in_the_held_chain_are_delay_stations_in_the_holding_time(where):
    """A two-phase db without burstiness: the held chain with pure delays at every tier is
    the product-form pool network with a delay station beside each tier (within the chain's
    own 0.5% without delays), the delays inside the pool's holding time -- not as think
    time, which is another answer. The db's own delay sits beside the other held tiers, so
    the chain keeps db first or last of the pool's run."""
    from solvers.delay import fold_delay_stations, with_delay_stations
    D = np.array([[0.02], [0.03], [0.05]]) if where == "last" \
        else np.array([[0.02], [0.05], [0.03]])
    b = 2 if where == "last" else 1
    procs = [E(float(d)) for d in D[:, 0]]
    procs[b] = _flat_map(float(D[b, 0]))
    delays = np.array([[0.01], [0.015], [0.02]])
    pools = [PoolSpec(3, 1, 3)]
    got = solve_pools_bursty(procs, 40, 1.0, [2, 2, 1], pools, None, D, delays)
    assert got.inner_solves == 3 and not got.flags           # the held chain
    D2, c2, p2 = with_delay_stations(D, [2, 2, 1], delays, pools)
    want = solve_pools(D2, 40, 1.0, c2, p2)
    assert got.throughput == pytest.approx(want.throughput, rel=0.005)
    assert got.response_time[0] == pytest.approx(want.response_time[0], rel=0.005)
    assert np.allclose(got.residence_time, fold_delay_stations(want.residence_time),
                       rtol=0.01)
    assert got.pool_waiting_time[0] == pytest.approx(want.pool_waiting_time[0], rel=0.01)
    as_think = solve_pools(D, 40, 1.0 + float(delays.sum()), [2, 2, 1], pools)
    assert abs(as_think.throughput / got.throughput - 1) > 0.05


def test_a_vanishing_delay_keeps_the_bursty_held_chain():
    """A delay of 1 us moves the held chain's answer by as little as itself (the route is
    decided without the delays), whether db is last or first of the pool's tiers; a pool
    over db alone (no other held demand) is not made a chain by its delay."""
    for procs, D in (([E(0.02), E(0.03), BURSTY.scaled(0.05)], [0.02, 0.03, 0.05]),
                     ([E(0.02), BURSTY.scaled(0.05), E(0.03)], [0.02, 0.05, 0.03])):
        Dmc = np.array(D)[:, None]
        a = solve_pools_bursty(procs, 100, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3)], None, Dmc)
        b = solve_pools_bursty(procs, 100, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3)], None, Dmc,
                               np.full((3, 1), 1e-6))
        assert b.inner_solves == a.inner_solves == 3
        assert b.throughput == pytest.approx(a.throughput, rel=1e-4)
        assert np.allclose(b.residence_time, a.residence_time, rtol=1e-4)
        assert b.response_time[0] == pytest.approx(a.response_time[0], rel=1e-4)
    procs = [E(0.02), E(0.03), BURSTY.scaled(0.05)]
    alone = [PoolSpec(6, 2, 3)]
    a = solve_pools_bursty(procs, 60, 1.0, [4, 4, 8], alone)
    b = solve_pools_bursty(procs, 60, 1.0, [4, 4, 8], alone, None, None, np.full((3, 1), 1e-6))
    assert b.flags == a.flags and b.inner_solves == a.inner_solves
    assert b.throughput == pytest.approx(a.throughput, rel=1e-4)
