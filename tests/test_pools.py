"""The pool model (solvers/pools.py) against closed forms: a pool that never binds is the plain
network (exact MVA), and a small exact Markov chain of the network with the token."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from solvers.mva import mva
from solvers.pools import PoolSpec, solve_pools


def _chain(D, c, N, Z, K, held):
    """Exact CTMC of three tiers (web, app, db) visited in order, users thinking ``Z``, a pool
    of ``K`` tokens held across tiers ``held`` (``(1,)``: app; ``(1, 2)``: app and db), FCFS
    on the token. Returns throughput, mean response time and the mean wait for a token."""
    states = [s for s in itertools.product(range(N + 1), repeat=4) if sum(s) <= N
              and s[2] + (s[3] if 2 in held else 0) <= K
              and (s[1] == 0 or s[2] + (s[3] if 2 in held else 0) == K)]
    index = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))
    done = np.zeros(len(states))

    def holding(s):
        return s[2] + (s[3] if 2 in held else 0)

    for s in states:
        web, wait, app, db = s
        moves = []
        if N - sum(s) > 0:
            moves.append(((N - sum(s)) / Z, (web + 1, wait, app, db)))
        if web:
            rate = min(web, c[0]) / D[0]
            moves.append((rate, (web - 1, wait, app + 1, db) if holding(s) < K
                          else (web - 1, wait + 1, app, db)))
        if app:
            rate = min(app, c[1]) / D[1]
            t = (web, wait, app - 1, db + 1)
            if 2 not in held and wait:        # token given back after app
                t = (web, wait - 1, app, db + 1)
            moves.append((rate, t))
        if db:
            rate = min(db, c[2]) / D[2]
            done[index[s]] = rate
            t = (web, wait, app, db - 1)
            if 2 in held and wait:            # token given back after db
                t = (web, wait - 1, app + 1, db - 1)
            moves.append((rate, t))
        for rate, t in moves:
            Q[index[s], index[t]] += rate
            Q[index[s], index[s]] -= rate
    A = np.vstack([Q.T, np.ones(len(states))])
    b = np.zeros(len(states) + 1)
    b[-1] = 1.0
    p = np.linalg.lstsq(A, b, rcond=None)[0]
    X = float(p @ done)
    waiting = float(p @ np.array([s[1] for s in states]))
    return X, N / X - Z, waiting / X


@pytest.mark.parametrize("size", [8, 30])
def test_a_pool_that_cannot_bind_is_the_plain_network(size):
    D, c = [0.02, 0.05, 0.04], [2, 1, 3]
    for N in (1, 5, 8, 20):
        if size < N:
            continue
        got = solve_pools(D, N, 0.5, c, [PoolSpec(size, 1, 3)])
        want = mva(np.array(D)[:, None], [N], 0.5, c)
        assert got.throughput == pytest.approx(want.throughput[0], rel=1e-9)
        assert got.response_time[0] == pytest.approx(want.response_time[0], rel=1e-9)
        assert got.residence_time == pytest.approx(want.residence_time[:, 0], rel=1e-8)
        assert got.pool_waiting_time[0] == pytest.approx(0.0, abs=1e-12)


def test_a_pool_larger_than_the_population_is_solved_at_the_population():
    got = solve_pools([0.02, 0.05], 10, 1.0, [1, 2], [PoolSpec(10**6, 0, 2)])
    want = mva(np.array([[0.02], [0.05]]), [10], 1.0, [1, 2])
    assert got.throughput == pytest.approx(want.throughput[0], rel=1e-9)
    assert 0 < got.pool_utilization[0] < 1e-4


@pytest.mark.parametrize("N", [2, 5, 9])
def test_a_pool_of_one_over_one_tier_is_the_chain_exactly(N):
    """One token over app (2 cores): app serves one request at a time and the others queue for
    the token -- a load-dependent station the decomposition represents exactly."""
    D, c, Z = [0.03, 0.08, 0.05], [1, 2, 2], 0.4
    X, R, W = _chain(D, c, N, Z, 1, (1,))
    got = solve_pools(D, N, Z, c, [PoolSpec(1, 1, 2)])
    assert got.throughput == pytest.approx(X, rel=1e-9)
    assert got.response_time[0] == pytest.approx(R, rel=1e-9)
    assert got.pool_waiting_time[0] == pytest.approx(W, rel=1e-8)
    assert got.pool_holding_time[0] == pytest.approx(D[1], rel=1e-9)


@pytest.mark.parametrize("N, K", [(4, 2), (8, 2), (8, 4)])
def test_a_pool_over_two_tiers_is_close_to_the_chain(N, K):
    """Across app and db the decomposition is an approximation (the held tiers seen at a fixed
    population between the pool's changes): throughput within 1.5% and response time within 3%
of the exact chain here (measured: -1.3% and +2.6% at the worst, N = 8 with 2 tokens)."""
    D, c, Z = [0.03, 0.06, 0.05], [1, 1, 2], 0.3
    X, R, W = _chain(D, c, N, Z, K, (1, 2))
    got = solve_pools(D, N, Z, c, [PoolSpec(K, 1, 3)])
    assert got.throughput == pytest.approx(X, rel=0.015)
    assert got.response_time[0] == pytest.approx(R, rel=0.03)
    assert got.pool_waiting_time[0] == pytest.approx(W, rel=0.15)
    # Little's law at the pool: tokens held = X x holding time, at most K
    assert got.pool_busy[0] == pytest.approx(got.throughput * got.pool_holding_time[0])
    assert got.pool_busy[0] <= K


def test_nested_pools_and_classes():
    D = np.array([[0.02, 0.04], [0.03, 0.03], [0.05, 0.02]])
    one = solve_pools(D, 60, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3)], mix=[0.5, 0.5])
    two = solve_pools(D, 60, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3), PoolSpec(2, 2, 3)],
                      mix=[0.5, 0.5])
    assert two.throughput < one.throughput       # a second, smaller pool only constrains
    assert two.pool_waiting_time[1] > 0
    assert one.response_time[0] != pytest.approx(one.response_time[1])
    assert np.all(np.isfinite(two.response_time))


def test_bad_pools_are_refused():
    with pytest.raises(ValueError, match="overlaps"):
        solve_pools([0.1, 0.1, 0.1], 5, 1.0, None, [PoolSpec(2, 0, 2), PoolSpec(2, 1, 3)])
    with pytest.raises(ValueError, match="pools\\[0\\]"):
        solve_pools([0.1, 0.1], 5, 1.0, None, [PoolSpec(0, 0, 2)])


# --------------------------------------------------------------------------------------------
# the physical simulator with pools (the truth the model is checked against)
# --------------------------------------------------------------------------------------------

def _three_tiers(N, pools):
    from solvers.simulation.physical import PhysicalNetwork, Tier
    return PhysicalNetwork(tiers=(Tier("web", 4, 0.02), Tier("app", 4, 0.03),
                                  Tier("db", 8, 0.05)),
                           classes=("a",), mix=(1.0,), think_time=1.0, population=N,
                           pools=pools)


def test_a_pool_that_cannot_bind_leaves_the_simulation_unchanged():
    from solvers.simulation.physical import simulate_physical
    plain = simulate_physical(_three_tiers(40, ()), 60, warmup=5, replications=1, seed=3)
    pooled = simulate_physical(_three_tiers(40, (PoolSpec(40, 1, 3),)), 60, warmup=5,
                               replications=1, seed=3)
    assert pooled.total_throughput.mean == plain.total_throughput.mean
    assert pooled.total_response_time.mean == plain.total_response_time.mean


def test_a_binding_pool_in_the_simulation_matches_the_model():
    """Six connections over app and db: the pool binds (X about 74/s while the CPUs could give
    133/s) and the simulated throughput and response time agree with the model."""
    from solvers.simulation.physical import simulate_physical
    spec = (PoolSpec(6, 1, 3),)
    sim = simulate_physical(_three_tiers(120, spec), 120, warmup=20, replications=1,
                            batches=10, seed=7)
    model = solve_pools([0.02, 0.03, 0.05], 120, 1.0, [4, 4, 8], spec)
    assert sim.total_throughput.mean == pytest.approx(model.throughput, rel=0.03)
    assert sim.total_response_time.mean == pytest.approx(model.response_time[0], rel=0.1)
    unpooled = mva(np.array([[0.02], [0.03], [0.05]]), [120], 1.0, [4, 4, 8])
    assert unpooled.throughput[0] > 1.2 * sim.total_throughput.mean    # the CPU-only view


def test_nested_pools_in_the_simulation_hold_tokens_outer_first():
    from solvers.simulation.physical import simulate_physical
    spec = (PoolSpec(6, 1, 3), PoolSpec(2, 2, 3))
    sim = simulate_physical(_three_tiers(60, spec), 100, warmup=10, replications=1,
                            batches=10, seed=5)
    model = solve_pools([0.02, 0.03, 0.05], 60, 1.0, [4, 4, 8], spec)
    # db admits 2 at a time: at most 2 / 0.05 = 40 requests/s
    assert sim.total_throughput.mean <= 40.0 * 1.03
    assert sim.total_throughput.mean == pytest.approx(model.throughput, rel=0.05)


def test_capacity_is_the_last_population_within_the_sla():
    from solvers.pools import pool_capacity
    D, c, spec = [0.02, 0.03, 0.05], [4, 4, 8], [PoolSpec(6, 1, 3)]
    cap = pool_capacity(D, 1.0, 1.0, c, spec)
    assert solve_pools(D, cap, 1.0, c, spec).response_time[0] <= 1.0
    assert solve_pools(D, cap + 1, 1.0, c, spec).response_time[0] > 1.0
    plain = pool_capacity(D, 1.0, 1.0, c, [])
    R = [mva(np.array(D)[:, None], [n], 1.0, c).response_time[0] for n in (plain, plain + 1)]
    assert R[0] <= 1.0 < R[1]
    assert cap < plain / 1.5                    # the pool, not a CPU, sets the capacity
    assert pool_capacity(D, 1.0, 1.0, c, [PoolSpec(10**6, 1, 3)]) == plain
    assert pool_capacity(D, 0.05, 1.0, c, spec) == 0     # one user breaches a 50-ms SLA
    assert pool_capacity(D, np.inf, 1.0, c, spec, limit=90) == 90


# --------------------------------------------------------------------------------------------
# the system model with pools (streams/predict/model.py)
# --------------------------------------------------------------------------------------------

def _system_model(pools):
    from streams.predict.model import SystemModel
    return SystemModel(tiers=["web", "app", "db"], classes=["a", "b"],
                       D_mc=np.array([[0.02, 0.02], [0.02, 0.04], [0.05, 0.05]]),
                       mix=np.array([0.5, 0.5]), servers=np.array([4.0, 4.0, 8.0]),
                       think_time=1.0, sla=np.array([1.0, 1.0]), processes=None,
                       map_limit=10_000, pools=pools)


def test_the_system_model_takes_its_capacity_and_answers_from_the_pool_model():
    from solvers.pools import pool_capacity
    from streams.predict.model import SystemModel, model_capacity
    spec = (PoolSpec(6, 1, 3, "conn"),)
    model = _system_model(spec)
    cap, limited = model_capacity(model)
    assert not limited
    assert cap == pool_capacity(model.D_mc, [1.0, 1.0], 1.0, [4, 4, 8], spec, mix=[0.5, 0.5])
    plain, _ = model_capacity(_system_model(()))
    assert cap < plain / 1.5
    point = model.at(100)
    assert point.model == "pools" and point.pool_utilization[0] == pytest.approx(1.0, abs=0.01)
    assert point.pool_waiting[0] > 0.1
    assert point.response[1] > point.response[0]        # b's heavier app demand
    # carried in the stored model (perfcast whatif reads it back)
    again = SystemModel.from_dict(model.to_dict())
    assert again.pools == spec and again.at(100).throughput == point.throughput


def test_build_model_takes_the_configured_pools_and_flags_the_missing(tmp_path):
    from streams.core.config import load_config
    from streams.predict.model import model_pools
    path = tmp_path / "p.toml"
    path.write_text('[systems.s]\ntiers = ["web", "app", "db"]\n[systems.s.pools.conn]\n'
                    'tier = "app"\nsize = 6\nholds = ["app", "db"]\n')
    cfg = load_config(path, env={}).system("s")
    pools, flags = model_pools(cfg, ["web", "app", "db"])
    assert pools == (PoolSpec(6, 1, 3, "conn"),) and flags == []
    pools, flags = model_pools(cfg, ["web", "app"])
    assert pools == () and "conn not modelled: no windows yet from ['db']" in flags[0]


# --------------------------------------------------------------------------------------------
# through the pipeline: windows of a simulated system whose pool binds
# --------------------------------------------------------------------------------------------

def _pipeline_predictions(pools):
    from solvers.simulation.physical import monitor_physical
    from streams.core.config import Config, Pool, SystemConfig
    from streams.engine.pipeline import Pipeline
    records = monitor_physical(_three_tiers(100, (PoolSpec(6, 1, 3),)), 600, 5.0,
                               warmup=30.0, seed=11, start_time=1e9)
    cfg = SystemConfig(tiers=("web", "app", "db"), think_time_s=1.0, sla_s={"*": 1.0},
                       pools=pools)
    pipe = Pipeline(Config(defaults=cfg))
    outs = [pipe.process(r) for r in records] + [pipe.finish()]
    return [p for o in outs for p in o.predictions if p.model is not None]


@pytest.mark.slow
def test_the_pipeline_predicts_the_pool_and_its_capacity():
    """A 6-connection pool over app and db binds at 100 users (about 74/s, the CPUs at 37-56%):
    with the pool configured the prediction carries it, full, and a capacity near the pool
    model's on the true demands; without it the CPU-only capacity is far beyond."""
    from solvers.pools import pool_capacity
    from streams.core.config import Pool
    pred = _pipeline_predictions({"conn": Pool("app", 6, ("app", "db"))})[-1]
    part = pred.pools["conn"]
    assert part.size == 6 and part.holds == ["app", "db"]
    assert part.utilization == pytest.approx(1.0, abs=0.05)
    assert part.waiting_time_s > 0.1
    truth = pool_capacity([0.02, 0.03, 0.05], 1.0, 1.0, [4, 4, 8], [PoolSpec(6, 1, 3)])
    assert pred.capacity_users == pytest.approx(truth, rel=0.15)
    assert abs(pred.model_error) < 0.15
    # the pool, by its name, is what saturates and what the breach comes from
    assert pred.bottleneck_tier == "conn" and pred.breach_tier == "conn"
    assert part.waiting_share_forecast[pred.breach_class] > 0.3
    blind = _pipeline_predictions({})[-1]
    assert "pools" not in blind.to_record()
    assert blind.capacity_users > 1.5 * pred.capacity_users
