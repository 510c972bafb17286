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
    curve = held_network(D[:, None], [1, 1, 1], [PoolSpec(60, 0, 3, "p")], 0)
    lam = 10.0
    res = solve_open_pool(lam, curve)
    assert res.residence_time[:, 0] == pytest.approx(D / (1 - lam * D), rel=1e-6)
    assert res.waiting_time < 1e-12


def _web_and_pool(Dmc, cores, mix, K, load):
    """web outside, app and db under a pool of ``K`` at ``load`` of its saturation: the
    curve, the rate, the open tiers without and with the pool, the pool's figures and the
    flow-equivalent server's tiers."""
    import dataclasses
    pools = [PoolSpec(K, 1, 3, "conn")]
    curve = held_network(Dmc, cores, pools, 0, mix)
    lam = load * curve.saturation
    base = solve_open_tiers(lam * mix, Dmc, cores)
    res, (one,) = with_pools(base, lam, pools, [curve], Dmc)
    fes, _ = with_pools(base, lam, pools, [dataclasses.replace(curve, chain=None)], Dmc)
    return curve, lam, base, res, one, fes


def test_classes_read_back_by_little_and_tiers_outside_the_pool_stay_open_queues():
    """Two classes through web (outside), app and db (held by 4 tokens): each class's held
    residence is its share of the held jobs by Little's law, which sum to the station's
    mean jobs; web keeps its M/M/c figures; the token wait reaches every class at app."""
    Dmc = np.array([[0.004, 0.004], [0.02, 0.06], [0.01, 0.03]])
    mix = np.array([0.75, 0.25])
    curve, lam, base, res, one, _ = _web_and_pool(Dmc, [2, 4, 2], mix, 4, 0.8)
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


def _brute_force(D, c, K, lam, J=150):
    """The pool over tiers in series as an explicit CTMC truncated at ``J`` waiting:
    ``(waiting, holders at each tier)``; mean response time and tokens held."""
    import itertools

    import scipy.sparse as sp
    import scipy.sparse.linalg as sla
    H = len(D)
    states = [(q,) + x for q in range(J) for x in itertools.product(range(K + 1), repeat=H)
              if sum(x) <= K and (q == 0 or sum(x) == K)]
    index = {s: i for i, s in enumerate(states)}
    rows, cols, vals = [], [], []

    def add(s, t, r):
        if t in index:
            rows.append(index[s]), cols.append(index[t]), vals.append(r)
    for s in states:
        q, x = s[0], list(s[1:])
        if sum(x) < K:
            add(s, (q, x[0] + 1, *x[1:]), lam)
        else:
            add(s, (q + 1, *x), lam)
        for h in range(H):
            if x[h]:
                y = list(x)
                y[h] -= 1
                r = min(x[h], c[h]) / D[h]
                if h + 1 < H:
                    y[h + 1] += 1
                    add(s, (q, *y), r)
                elif q:
                    y[0] += 1
                    add(s, (q - 1, *y), r)
                else:
                    add(s, (q, *y), r)
    n = len(states)
    Q = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    A = Q.T.tolil()
    A[0, :] = 1.0
    b = np.zeros(n)
    b[0] = 1.0
    pi = sla.spsolve(A.tocsc(), b)
    jobs = np.array([sum(s) for s in states], dtype=float)
    held = np.array([sum(s[1:]) for s in states], dtype=float)
    return float(pi @ jobs) / lam, float(pi @ held)


@pytest.mark.parametrize("K", [1, 2, 3])
def test_the_held_chain_is_the_exact_chain_of_the_pool(K: int):
    """Two exponential held tiers (12 ms on 2 cores, 6 ms on 1) and ``K`` tokens: the held
    chain's response time (token wait and held residence) and tokens held are the explicit
    chain's (truncated far past its mass); the flow-equivalent server is not (it assumes
    the held tiers settle between the pool's changes)."""
    D, c = [0.012, 0.006], [2, 1]
    curve = held_network(np.array(D)[:, None], c, [PoolSpec(K, 0, 2, "p")], 0)
    assert curve.chain is not None
    for frac in (0.5, 0.9):
        lam = frac * curve.saturation
        res = solve_open_pool(lam, curve)
        R, busy = _brute_force(D, c, K, lam)
        assert res.waiting_time + res.residence_time.sum() == pytest.approx(R, rel=1e-6)
        assert res.busy == pytest.approx(busy, rel=1e-6)
    import dataclasses
    fes = solve_open_pool(lam, dataclasses.replace(curve, chain=None))
    if K > 1:
        assert fes.waiting_time + fes.residence_time.sum() > 1.05 * R


def test_past_its_budget_the_flow_equivalent_server_solves_the_pool():
    """A pool of 60 over three stations is past the chain's budget: the flow-equivalent
    server, one curve for every rate."""
    curve = held_network(np.array([[0.02], [0.05], [0.01]]), [1, 1, 1],
                         [PoolSpec(60, 0, 3, "p")], 0)
    assert curve.chain is None


def test_the_held_curve_is_computed_once_per_model(monkeypatch):
    """A capacity search's probes share the pool's held curve (it does not depend on the
    rate): one curve per model, not one per probe."""
    from streams.predict import open_model
    from streams.predict.model import SystemModel
    calls = []
    real = open_model.held_network
    monkeypatch.setattr(open_model, "held_network",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    model = SystemModel(tiers=["web", "app", "db"], classes=["a"],
                        D_mc=np.array([[0.02], [0.03], [0.05]]), mix=np.array([1.0]),
                        servers=np.array([4.0, 4.0, 8.0]), think_time=0.0,
                        sla=np.array([0.3]), processes=None, map_limit=10_000,
                        pools=(PoolSpec(6, 1, 3, "conn"),))
    solves = open_model.RateSolves(model)
    cap = open_model.rate_capacity(model, solves)
    assert solves.count > 3 and len(calls) == 1
    assert cap.capacity < open_model.saturation_rate(model) <= 4 / 0.03 + 1e-9
    assert cap.breach_tier == "conn"


def _open_run(size: int, rate: float, seconds: float = 240.0):
    """web (4 cores 20 ms), app (4, 30 ms), db (8, 50 ms) fed Poisson arrivals at ``rate``
    with a pool of ``size`` connections on app held across app and db (simulated, its tokens
    measured in the windows), solved every 30 s as an open workload."""
    from solvers.simulation.physical import (OpenArrivals, PhysicalNetwork, Tier,
                                             monitor_physical)
    from streams.core.config import Config, Pool, SystemConfig
    from streams.engine.pipeline import Pipeline
    net = PhysicalNetwork(tiers=(Tier("web", 4, 0.02), Tier("app", 4, 0.03),
                                 Tier("db", 8, 0.05)),
                          classes=("a",), mix=(1.0,), think_time=0.0, population=0,
                          arrivals=OpenArrivals(rate), pools=(PoolSpec(size, 1, 3, "conn"),))
    records = monitor_physical(net, seconds, 5.0, warmup=30.0, seed=7, start_time=1e9)
    cfg = SystemConfig(tiers=("web", "app", "db"), sla_s={"*": 0.4}, workload="open",
                       pools={"conn": Pool("app", size, ("app", "db"))},
                       solve_interval_s=30.0)
    pipe = Pipeline(Config(defaults=cfg))
    outs = [pipe.process(r) for r in records] + [pipe.finish()]
    return [p for o in outs for p in o.predictions if p.model is not None]


def test_an_open_system_is_predicted_with_its_pool():
    """A pool of 4 binds at about 47/s (the CPUs at 133/s): at 30/s the open prediction
    carries the pool -- its utilization within 5 points of the measured one, its wait in the
    classes' response times (within 15% of the measured mean), capacity under the pool's
    saturation and the pool named as bottleneck and breach -- and no longer the flag that it
    is not modelled."""
    preds = _open_run(4, 30.0)
    last = preds[-1]
    assert not any("not modelled on an open workload" in f for f in last.flags)
    pool = last.pools["conn"]
    assert pool.utilization_measured is not None
    assert abs(pool.utilization - pool.utilization_measured) < 0.05
    assert abs(last.response_time / last.classes["a"].response_time_measured - 1) < 0.15
    assert last.bottleneck_tier == "conn" and last.breach_tier == "conn"
    assert 30.0 < last.capacity_rate_per_s < last.saturation_rate_per_s < 50.0


def _pool_model(size: int = 6, sla: float = 0.3):
    from streams.predict.model import SystemModel
    return SystemModel(tiers=["web", "app", "db"], classes=["a"],
                       D_mc=np.array([[0.02], [0.03], [0.05]]), mix=np.array([1.0]),
                       servers=np.array([4.0, 4.0, 8.0]), think_time=0.0, sla=np.array([sla]),
                       processes=None, map_limit=10_000, pools=(PoolSpec(size, 1, 3, "conn"),))


def test_whatif_a_larger_pool_on_an_open_system_answers_with_the_pool():
    """``perfcast whatif --pool conn=12`` at 60/s on an open system: the pool of 6 (held
    tiers' bound ~74/s) is 80% busy and its wait in the response time; 12 tokens halve its
    utilization and raise the capacity towards app's 133/s."""
    from streams.predict.open_whatif import at_rate
    from streams.predict.whatif import Action
    cmp = at_rate(_pool_model(), 60.0, [Action("pool", "conn", 12)])
    before, after = cmp.pool_utilization
    assert before[0] == pytest.approx(2 * after[0], rel=0.1) and before[0] > 0.75
    assert cmp.response[1][0] < cmp.response[0][0]
    assert cmp.capacity[1] > 1.3 * cmp.capacity[0] and cmp.saturation[1] < 4 / 0.03


def test_the_open_remedy_raises_the_pool_and_says_where_the_breach_goes():
    """At 100/s, beyond the pool of 6's capacity: the cheapest remedy is a larger pool, the
    smallest that meets the SLA at 100/s, and past its capacity the breach stays the pool's
    (or moves to a tier behind it) -- named."""
    from streams.predict import open_model
    from streams.predict.open_whatif import meets_rate, remediate_open
    from streams.predict.whatif import Action, apply
    model = _pool_model()
    cap = open_model.rate_capacity(model).capacity
    rec = remediate_open(model, 100.0, cap)
    pool = next(a for a in rec["actions"] if a["kind"] == "pool")
    size = int(pool["value"])
    assert meets_rate(apply(model, Action("pool", "conn", size)), 100.0)
    assert not meets_rate(apply(model, Action("pool", "conn", size - 1)), 100.0)
    assert pool["capacity_rate_per_s"] >= 100.0
    assert pool["breach_tier_after"] in ("conn", "app", "db")


def test_two_classes_through_a_pool_of_two_against_the_simulated_system():
    """A cheap class (5 ms held) and a dear one (60 ms held; 20% of requests) through a pool of
    2 over app (2 cores) and a one-core FCFS db, at half the pool's saturation: the held
    chain, which keeps the classes and the db's order, against the simulated system (seeded,
    ~30,000 requests) -- each class's response time within 10%, the pool's utilization
    within 3 points; the flow-equivalent server of the aggregate class misses the cheap
    class's wait behind the dear one (its response time half the simulated)."""
    from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, simulate_physical
    Dmc = np.array([[0.004, 0.004], [0.002, 0.03], [0.003, 0.03]])
    _, lam, _, res, one, fes = _web_and_pool(Dmc, [2, 2, 1], np.array([0.8, 0.2]), 2, 0.5)
    net = PhysicalNetwork(tiers=tuple(Tier(n, c, 1.0, multipliers=tuple(d)) for n, c, d in
                                      zip(("web", "app", "db"), (2, 2, 1), Dmc)),
                          classes=("a", "b"), mix=(0.8, 0.2), think_time=0.0, population=0,
                          arrivals=OpenArrivals(lam), pools=(PoolSpec(2, 1, 3, "w"),))
    sim = simulate_physical(net, 300.0, warmup=30.0, replications=2, seed=5)
    R = np.array([e.mean for e in sim.response_time])
    assert res.response_time == pytest.approx(R, rel=0.10)
    assert one.utilization == pytest.approx(sim.pool_busy[0].mean / 2, abs=0.03)
    assert fes.response_time[0] < 0.7 * R[0]


def test_a_pool_of_one_over_a_bursty_one_core_tier_is_the_m_map_1_queue():
    """K = 1 over one bursty tier of one core: the held chain's bursty station serves the
    MAP in order, so pool and tier are the M/MAP/1 queue (matrix-geometric, Neuts 1981):
    its sojourn time, at low and high load."""
    from solvers.open import m_map_c
    from solvers.processes import MAP
    shape = MAP(np.array([[-2.0, 0.01], [0.002, -0.2]]),
                np.array([[1.99, 0.0], [0.0, 0.198]])).scaled(0.05)
    curve = held_network([[0.05]], [1], [PoolSpec(1, 0, 1, "p")], 0, processes=[shape])
    assert curve.chain is not None and curve.saturation == pytest.approx(20.0, rel=1e-9)
    for lam in (4.0, 16.0):
        res = solve_open_pool(lam, curve)
        q = m_map_c(lam, shape, 1)
        assert res.waiting_time + res.residence_time[0, 0] == pytest.approx(q.wait + 0.05,
                                                                            rel=1e-6)


def test_perfcast_whatif_pool_on_an_open_system_answers_with_the_pool(tmp_path):
    """``perfcast whatif --pool conn=12`` on a stored open model with a pool of 6: the
    table's rows for the pool's utilization before and after, the capacity raised, no NaN."""
    import json
    import sqlite3

    from typer.testing import CliRunner

    from streams.cli.commands import app
    from streams.sinks.store import MODEL_TABLE, SQLiteStore
    spec = _pool_model().to_dict()
    spec["open"] = {"rate_per_s": 60.0, "rate_forecast_per_s": 70.0}
    path = tmp_path / "perfcast.sqlite"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f'INSERT INTO "{MODEL_TABLE}" VALUES (?, ?, ?, ?, ?)',
                     ("api", 1.8e9, 0, 0, json.dumps(spec)))
    conn.close()
    res = CliRunner().invoke(app, ["whatif", "--store", str(path), "--pool", "conn=12"],
                             terminal_width=200, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "conn (pool utilization)" in res.output and "at 60/s before" in res.output
    assert "nan" not in res.output.lower()
    row = next(line for line in res.output.splitlines() if "conn (pool utilization)" in line)
    before, after = (float(v) for v in row.split()[-4:-2])
    assert before > 0.75 and after == pytest.approx(before / 2, rel=0.1)


def test_a_pool_inside_another_gets_its_figures_on_the_open_route():
    # app's 8 threads over app and db around db's 2 connections: the inner pool's tokens held
    # and queue weighted along the outer pool's flow-equivalent server; at a low rate its
    # tokens held are the rate times the db's demand (Little), nobody waiting
    D = np.array([[0.004], [0.012], [0.006]])
    cores = [1, 2, 1]
    pools = [PoolSpec(8, 1, 3, "threads"), PoolSpec(2, 2, 3, "conn")]
    curves = [held_network(D, cores, pools, 0, [1.0]), None]
    assert curves[0].nested == (1,)
    for rate in (1.0, 100.0):
        res = solve_open_tiers(np.array([rate]), D, np.array(cores))
        _, out = with_pools(res, rate, pools, curves, D)
        assert out[1] is not None and out[1].stable
        assert 0.0 < out[1].utilization < out[0].utilization + 1.0
        assert out[1].waiting_time == pytest.approx(out[1].queue / rate)
    res = solve_open_tiers(np.array([1.0]), D, np.array(cores))
    _, out = with_pools(res, 1.0, pools, curves, D)
    assert out[1].busy == pytest.approx(1.0 * 0.006, rel=0.02)
    assert out[1].queue < 1e-4
    _, out = with_pools(solve_open_tiers(np.array([200.0]), D, np.array(cores)), 200.0, pools,
                        curves, D)
    assert not out[0].stable and not out[1].stable and math.isinf(out[1].waiting_time)
