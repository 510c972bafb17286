"""Pure delays at the tiers (solvers.delay, SystemModel.delays): an infinite-server station
after each tier, against hand MVA, exact MVA with explicit delay stations, line-solver and
the pool model."""

from __future__ import annotations

import math

import numpy as np
import pytest

# ``solvers`` before ``line_solver`` (conftest): its own ``solvers`` would shadow ours
from solvers.delay import (as_delays, effective_think_time, fold_delay_stations,  # isort: skip
                           with_delay_stations)
from solvers.mva import mva  # isort: skip
from solvers.pools import PoolSpec, solve_pools  # isort: skip
from streams.predict.model import SystemModel, model_capacity  # isort: skip
from streams.predict.open_model import open_point  # isort: skip

from line_solver.api.pfqn.mva import pfqn_mva  # isort: skip  # noqa: E402


def _hand_mva(D: float, delta: float, Z: float, N: int) -> tuple[float, float]:
    """One class, one single-server queue ``D`` and a delay ``delta``: the textbook recursion
    (Lazowska et al. 1984, ch. 6), written out."""
    Q = 0.0
    X = R = 0.0
    for n in range(1, N + 1):
        R = D * (1.0 + Q)
        X = n / (Z + R + delta)
        Q = X * R
    return X, R + delta


def test_a_delay_is_think_time_for_the_queues_by_hand():
    X, R = _hand_mva(0.1, 0.2, 1.0, 3)
    # n=1: R=0.1, X=1/1.3, Q=0.0769; n=2: R=0.10769, X=2/1.30769, Q=0.1647; n=3
    assert X == pytest.approx(3 / (1.0 + 0.1 * (1 + 0.16470588) + 0.2), rel=1e-6)
    res = mva([[0.1], [0.2]], [3], 1.0, [1, math.inf])
    assert res.throughput[0] == pytest.approx(X, rel=1e-12)
    assert res.response_time[0] == pytest.approx(R, rel=1e-12)
    folded = mva([[0.1]], [3], effective_think_time(1.0, [[0.2]], [1.0]))
    assert folded.throughput[0] == pytest.approx(X, rel=1e-12)
    assert folded.residence_time[0, 0] + 0.2 == pytest.approx(R, rel=1e-12)


def test_explicit_delay_stations_match_line_solver_multiclass():
    rng = np.random.default_rng(61)
    for _ in range(6):
        D = rng.uniform(0.005, 0.05, (2, 2))
        delta = rng.uniform(0.0, 0.08, (2, 2))
        N, Z = [int(v) for v in rng.integers(1, 6, 2)], [0.5, 1.0]
        D2, c2, _ = with_delay_stations(D, [1, 1], delta)
        ours = mva(D2, N, Z, c2)
        # line-solver: delays folded into each class's think time (infinite servers commute)
        XN, _, _, _, RN, _, _ = pfqn_mva(D, N, list(np.add(Z, delta.sum(axis=0))))
        assert np.allclose(ours.throughput, XN[0], rtol=1e-9)
        assert np.allclose(fold_delay_stations(ours.residence_time), RN + delta, rtol=1e-9)


def test_delays_inside_a_pool_hold_the_token():
    # a pool of one over a tier that only waits (no CPU): a single server of demand delta
    D2, c2, pools = with_delay_stations([[0.0]], [1], [[0.05]], (PoolSpec(1, 0, 1, "p"),))
    assert pools == (PoolSpec(1, 0, 2, "p"),)
    for N in (1, 4, 30):
        res = solve_pools(D2, N, 1.0, c2, pools)
        ref = mva([[0.05]], [N], 1.0)
        assert res.throughput == pytest.approx(ref.throughput[0], rel=1e-9)
        assert res.pool_holding_time[0] == pytest.approx(0.05, rel=1e-9)
    # a pool too big to bind: the plain network with its delay stations
    D = np.array([[0.01], [0.02]])
    delta = np.array([[0.03], [0.04]])
    D2, c2, pools = with_delay_stations(D, [1, 1], delta, (PoolSpec(64, 0, 2, "big"),))
    res = solve_pools(D2, 20, 1.0, c2, pools)
    ref = mva(D2, [20], 1.0, c2)
    assert res.throughput == pytest.approx(ref.throughput[0], rel=1e-9)
    assert np.allclose(fold_delay_stations(res.residence_time),
                       fold_delay_stations(ref.residence_time[:, 0]), rtol=1e-9)


def test_bad_delays_name_the_cell():
    with pytest.raises(ValueError, match=r"delays\[1\]\[0\]"):
        as_delays([[0.0, 0.1], [-0.01, 0.0]], (2, 2))
    with pytest.raises(ValueError, match="delays: must be 2 tiers"):
        as_delays([[0.0]], (2, 2))


def _model(delays=None, pools=(), sla=(0.5, 0.5)):
    return SystemModel(tiers=["app", "db"], classes=["a", "b"],
                       D_mc=np.array([[0.004, 0.002], [0.010, 0.030]]),
                       mix=np.array([0.6, 0.4]), servers=np.array([1.0, 1.0]),
                       think_time=1.0, sla=np.array(sla), processes=None,
                       map_limit=10_000, pools=pools,
                       delays=None if delays is None else np.asarray(delays, dtype=float))


def test_the_system_model_adds_each_class_its_delays():
    delta = np.array([[0.001, 0.0], [0.030, 0.010]])
    plain, late = _model(), _model(delta)
    for n in (1, 10, 40):
        p = late.at(n)
        D2, c2, _ = with_delay_stations(late.D, [1, 1], late.delay_m[:, None])
        ref = mva(D2, [n], 1.0, c2)           # the aggregate class, delay stations explicit
        assert p.throughput == pytest.approx(ref.throughput[0], rel=1e-9)
        assert np.allclose(p.residence, fold_delay_stations(ref.residence_time[:, 0]))
        # each class: its CPU residence read back as without delays, plus its own delays
        cpu = late.class_residence(p.residence) - delta
        assert np.allclose(p.response, cpu.sum(axis=0) + delta.sum(axis=0))
        assert np.all(late.wait(p.residence) >= 0)
    # the capacity is the last population whose every class, delays included, meets its SLA
    cap, limited = model_capacity(late)
    assert not limited and cap != model_capacity(plain)[0]
    assert late.excess(late.at(cap)) <= 0 < late.excess(late.at(cap + 1))
    # a faster CPU shortens the demands, never the delays
    faster = late.variant(D_mc=late.D_mc / 4)
    assert faster.at(1).response.min() > delta.sum(axis=0).min()
    again = SystemModel.from_dict(late.to_dict())
    assert np.array_equal(again.delays, delta) and again.at(10).throughput == late.at(10).throughput


def test_zero_delays_change_nothing():
    plain, zero = _model(), _model(np.zeros((2, 2)))
    for n in (1, 17, 300):
        a, b = plain.at(n), zero.at(n)
        assert a.throughput == b.throughput
        assert np.array_equal(a.response, b.response)
        assert np.array_equal(a.residence, b.residence)
    assert model_capacity(plain) == model_capacity(zero)
    assert "delays" not in plain.to_dict()


def test_delays_shift_quantiles_and_the_open_route():
    delta = np.array([[0.0, 0.0], [0.05, 0.02]])
    plain, late = _model(), _model(delta)
    # the open route: the same queues, each class's response time plus its delays
    a, _ = open_point(plain, 20.0)
    b, _ = open_point(late, 20.0)
    assert np.allclose(b.response - a.response, delta.sum(axis=0))
    # the quantiles: the CPU law at the same population shifted by each class's delays
    q = late.quantiles(late.at(5))
    shift = late.variant(delays=None, think_time=late.solver_think)
    assert np.allclose(q, shift.quantiles(shift.at(5)) + delta.sum(axis=0)[:, None])


def test_delays_held_by_a_pool_bind_it():
    # two workers held for the whole request: the delays make the holding time, so the pool
    # binds where the CPUs are idle (the testbed's gunicorn)
    spec = (PoolSpec(2, 0, 2, "workers"),)
    delta = np.array([[0.0, 0.0], [0.04, 0.04]])
    held = _model(delta, spec, sla=(0.2, 0.2))
    free = _model(delta, (), sla=(0.2, 0.2))
    p = held.at(60)
    assert p.pool_utilization[0] > 0.9
    assert p.utilization.max() < 0.6
    assert model_capacity(held)[0] < 0.7 * model_capacity(free)[0]


def test_the_map_network_sees_the_delays_as_think_time():
    from solvers.processes import MAP
    delta = np.array([[0.0, 0.01], [0.03, 0.02]])
    procs = [MAP.exponential(1.0), MAP.exponential(1.0)]
    late = _model(delta).variant(processes=procs)
    folded = late.variant(delays=None, think_time=late.solver_think)
    for n in (3, 12):
        a, b = late.at(n), folded.at(n)
        assert a.model == b.model == "map"
        assert a.throughput == b.throughput
        assert np.allclose(a.residence, b.residence + late.delay_m)
        assert np.allclose(a.response, b.response + delta.sum(axis=0))
