"""Exact solution of the closed MAP network of Mi et al. (2008), Fig. 9 (solvers.mapqn).

References: exact single-class MVA (written here, the closed-form recursion) for exponential
servers; line-solver's CTMC solver (the independent peer) for MAP servers; Little's law and the
utilization law; the two solution paths (SuperLU and multifrontal) against each other.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import solvers.mapqn as mapqn
from solvers.mapqn import build_generator, solve_closed
from solvers.paper000 import scenarios
from solvers.processes import MAP

import line_solver as ls  # isort: skip  # noqa: E402  (after perfcast's packages, see conftest)


# ---------------------------------------------------------------------------------- fixtures
def _front() -> MAP:
    """Front server: mildly variable MAP(2), mean ~5.3 ms, I ~ 3."""
    return MAP([[-300.0, 10.0], [5.0, -120.0]], [[280.0, 10.0], [10.0, 105.0]])


def _database() -> MAP:
    """Database: bursty MMPP(2) service, fast phase 2 ms / slow phase 20 ms, I ~ 360."""
    a, b = 1 / 1.6, 1 / 2.0
    return MAP([[-500.0 - a, a], [b, -50.0 - b]], [[500.0, 0.0], [0.0, 50.0]])


def _erlang2(mean: float) -> MAP:
    """Erlang-2: every service restarts in phase 0 (``D1`` has a zero column)."""
    mu = 2.0 / mean
    return MAP([[-mu, mu], [0.0, -mu]], [[0.0, 0.0], [mu, 0.0]])


def _small_bursty() -> list[MAP]:
    return [MAP([[-30.0, 10.0], [5.0, -12.0]], [[18.0, 2.0], [1.0, 6.0]]),
            MAP([[-50.5, 0.5], [0.2, -5.2]], [[50.0, 0.0], [0.0, 5.0]])]


def _mva(demands: np.ndarray, population: int, think: float) -> tuple[float, np.ndarray]:
    """Exact single-class MVA: ``R_m(n) = D_m (1 + Q_m(n-1))``, ``X(n) = n / (Z + sum R_m)``."""
    q = np.zeros(len(demands))
    x = 0.0
    for n in range(1, population + 1):
        r = demands * (1.0 + q)
        x = n / (think + r.sum())
        q = x * r
    return x, q


def _peer(procs: list[MAP], population: int, think: float) -> tuple[float, np.ndarray, np.ndarray]:
    """line-solver SolverCTMC on delay (Exp, mean Z) -> FCFS queues with MAP service."""
    model = ls.Network("fig9")
    delay = ls.Delay(model, "Think") if think > 0 else None  # stations: delay first, then queues
    queues = [ls.Queue(model, f"Q{m}", ls.SchedStrategy.FCFS) for m in range(len(procs))]
    if delay is not None:
        job = ls.ClosedClass(model, "C", population, delay)
        delay.setService(job, ls.Exp(1.0 / think))
        stations = [delay, *queues]
    else:
        job = ls.ClosedClass(model, "C", population, queues[0])
        stations = queues
    for q, p in zip(queues, procs):
        q.setService(job, ls.MAP(np.array(p.D0), np.array(p.D1)))
    model.link(ls.Network.serial_routing(stations))
    qlen, util, _, tput, _, _ = ls.SolverCTMC(model, verbose=False).getAvg()
    first = 1 if think > 0 else 0
    return float(tput[first, 0]), np.asarray(util)[first:, 0], np.asarray(qlen)[first:, 0]


def _assert_laws(res: mapqn.MAPQNResult, procs: list[MAP], tol: float = 1e-9) -> None:
    n, z, x = res.population, res.think_time, res.throughput
    means = np.array([p.mean for p in procs])
    assert n == pytest.approx(x * (res.response_time + z), rel=tol)  # Little: N = X (R + Z)
    np.testing.assert_allclose(res.utilization, x * means, rtol=tol)  # U_m = X E[S_m]
    np.testing.assert_allclose(res.residence_time * x, res.queue_length, rtol=tol)
    np.testing.assert_allclose(res.queue_length_distribution.sum(axis=1), 1.0, rtol=tol)
    levels = np.arange(res.population + 1)
    np.testing.assert_allclose(res.queue_length_distribution @ levels, res.queue_length, rtol=tol)
    np.testing.assert_allclose(1.0 - res.queue_length_distribution[:, 0], res.utilization, rtol=tol)
    assert res.bottleneck_probability.sum() == pytest.approx(1.0, abs=1e-12)
    assert res.relative_residual < 1e-12


# ---------------------------------------------------------------------------------- generator
def test_generator_is_a_level_ordered_block_tridiagonal_generator():
    procs = [_front(), _database()]
    N, Z = 7, 0.5
    q, space = build_generator(procs, N, Z)
    assert space.size == math.comb(N + 2, 2) * 4 == q.shape[0]
    np.testing.assert_allclose(np.asarray(q.sum(axis=1)).ravel(), 0.0, atol=1e-9)
    coo = q.tocoo()
    off = coo.row != coo.col
    assert np.all(coo.data[off] > 0)
    level = space.state_level
    assert np.all(np.diff(level) >= 0)  # states ordered by level
    step = level[coo.col[off]] - level[coo.row[off]]
    assert set(np.unique(step)) == {-1, 0, 1}  # block tridiagonal in the levels
    up = step == 1  # only delay departures, rate (N - l)/Z, phases unchanged
    np.testing.assert_allclose(coo.data[off][up], (N - level[coo.row[off][up]]) / Z)
    assert np.all(coo.row[off][up] % 4 == coo.col[off][up] % 4)
    down = step == -1  # only completions of the last queue, at a D1 rate
    src = coo.row[off][down] // 4
    assert np.all(space.occupancy[src, 1] > 0)
    assert set(np.round(coo.data[off][down], 9)) <= {500.0, 50.0}


def test_with_no_think_time_there_is_one_level():
    q, space = build_generator([_front(), _database(), MAP.exponential(0.01)], 5, 0.0)
    assert np.all(space.level == 5)
    assert space.size == math.comb(5 + 2, 2) * 4
    np.testing.assert_allclose(np.asarray(q.sum(axis=1)).ravel(), 0.0, atol=1e-9)


# ---------------------------------------------------------------------------------- references
@pytest.mark.parametrize(
    ("demands", "population", "think"),
    [((0.3,), 6, 1.0), ((0.01, 0.02), 40, 0.5), ((0.2, 0.1, 0.25), 12, 0.0),
     ((0.005, 0.0049), 120, 1.0)],
)
@pytest.mark.parametrize("method", ["splu", "multifrontal"])
def test_exponential_servers_match_exact_mva(demands, population, think, method):
    d = np.array(demands)
    procs = [MAP.exponential(v) for v in d]
    res = solve_closed(procs, population, think, method=method)
    x, q = _mva(d, population, think)
    assert res.throughput == pytest.approx(x, rel=1e-10)
    np.testing.assert_allclose(res.queue_length, q, rtol=1e-9)
    np.testing.assert_allclose(res.utilization, x * d, rtol=1e-10)
    _assert_laws(res, procs)


@pytest.mark.parametrize(
    ("case", "population", "think"),
    [("bursty", 3, 0.5), ("bursty", 7, 0.5), ("erlang", 4, 0.2), ("bursty", 4, 0.0),
     ("three", 3, 1.0)],
)
def test_map_network_matches_line_solver_ctmc(case, population, think):
    procs = {
        "bursty": _small_bursty(),
        "erlang": [_erlang2(0.1), MAP.exponential(0.05)],
        "three": [_small_bursty()[0], _erlang2(0.1), _small_bursty()[1]],
    }[case]
    x_ref, u_ref, q_ref = _peer(procs, population, think)
    for method in ("splu", "multifrontal"):
        res = solve_closed(procs, population, think, method=method)
        assert res.throughput == pytest.approx(x_ref, rel=1e-6)
        np.testing.assert_allclose(res.utilization, u_ref, rtol=1e-6)
        np.testing.assert_allclose(res.queue_length, q_ref, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(("population", "think", "demands"),
                         [(400, 60.0, (0.005, 0.004)), (150, 1000.0, (0.001, 0.002))])
def test_light_load_with_astronomical_probability_range(population, think, demands):
    # Probabilities span far more than 1e-308 across the lattice: the dissection must keep
    # the mode near a separator, otherwise escape rates underflow (singular fronts).
    d = np.array(demands)
    res = solve_closed([MAP.exponential(v) for v in d], population, think, method="multifrontal")
    x, q = _mva(d, population, think)
    assert res.method == "multifrontal" and not res.flags
    assert res.throughput == pytest.approx(x, rel=1e-10)
    np.testing.assert_allclose(res.queue_length, q, rtol=1e-9)


def test_single_queue_without_delay_is_always_busy():
    proc = _database()
    res = solve_closed([proc], 5, 0.0)
    assert res.throughput == pytest.approx(proc.rate, rel=1e-12)
    assert res.utilization[0] == pytest.approx(1.0)
    assert res.queue_length[0] == pytest.approx(5.0)
    assert res.response_time == pytest.approx(5.0 / proc.rate, rel=1e-12)


# ---------------------------------------------------------------------------------- solvers
def _pi(procs, population, think, method, **kw):
    space = mapqn._state_space(procs, population, think)
    off = mapqn._offdiagonal(procs, space)
    if method == "splu":
        anchor = mapqn._anchor_state(procs, space, np.arange(space.occupancy.shape[0]))
        pi = mapqn._solve_splu(off, anchor)
    else:
        pi = mapqn._solve_multifrontal(procs, space, off, **kw)
    return pi / pi.sum(), space


@pytest.mark.parametrize(
    ("procs", "population", "think"),
    [([_front(), _database()], 30, 0.5), ([_front(), _database()], 12, 0.0),
     ([_front(), _erlang2(0.004), _database()], 9, 0.3), ([_database()], 20, 0.1)],
)
def test_multifrontal_with_deep_trees_and_many_panels_equals_superlu(procs, population, think):
    ref, _ = _pi(procs, population, think, "splu")
    for leaf, panel in ((1, 4), (3, 8), (24, 256)):
        pi, _ = _pi(procs, population, think, "multifrontal", leaf=leaf, panel=panel)
        np.testing.assert_allclose(pi, ref, rtol=1e-8, atol=1e-14)


def test_states_a_frozen_phase_cannot_reach_get_probability_zero():
    # Erlang-2 servers restart in phase 0 and freeze there when idle: states with an idle
    # Erlang queue in phase 1 are unreachable.
    procs = [_erlang2(0.02), _erlang2(0.03)]
    for method in ("splu", "multifrontal"):
        pi, space = _pi(procs, 10, 0.2, method)
        occ = np.repeat(space.occupancy, space.phase_count, axis=0)
        phases = np.tile(space.phases, (space.occupancy.shape[0], 1))
        unreachable = np.any((occ == 0) & (phases == 1), axis=1)
        assert np.all(np.abs(pi[unreachable]) < 1e-14)
        assert np.all(pi[~unreachable] > 0)


def test_auto_picks_superlu_for_small_and_multifrontal_for_large_chains():
    procs = [_front(), _database()]
    assert solve_closed(procs, 20, 0.5).method == "splu"
    big = solve_closed(procs, 110, 0.5)
    assert big.method == "multifrontal" and big.states == math.comb(112, 2) * 4


# ---------------------------------------------------------------------------------- Mi et al. (2008)
@pytest.mark.slow
def test_bursty_database_makes_the_bottleneck_switch_and_mva_overestimates():
    # Mi et al. (2008), sections 3.2-3.4: a bursty database (I ~ 360) takes the bottleneck role in its
    # slow periods; the exponential model with the same means (MVA) does not see this.
    procs = [_front(), _database()]
    means = np.array([p.mean for p in procs])
    res = solve_closed(procs, 100, 0.5)
    expo = solve_closed([MAP.exponential(m) for m in means], 100, 0.5)
    x_mva, _ = _mva(means, 100, 0.5)
    assert expo.throughput == pytest.approx(x_mva, rel=1e-10)
    assert x_mva > 1.15 * res.throughput  # MVA optimistic by > 15% under bottleneck switch
    assert min(res.bottleneck_probability) > 0.3  # both tiers are the bottleneck at times
    assert expo.bottleneck_probability[1] < 0.25  # exponential: the front dominates
    assert res.bottleneck_probability[1] > expo.bottleneck_probability[1] + 0.15
    # the database queue is far more variable than with exponential service
    spread = res.queue_length_distribution[1] @ np.arange(101) ** 2 - res.queue_length[1] ** 2
    spread_exp = expo.queue_length_distribution[1] @ np.arange(101) ** 2 - expo.queue_length[1] ** 2
    assert spread > 10 * spread_exp
    _assert_laws(res, procs)


# ---------------------------------------------------------------------------------- properties
_rate = st.sampled_from([0.0, 0.05, 0.5, 1.0, 3.0, 20.0])


@st.composite
def _maps(draw):
    order = draw(st.sampled_from([1, 2]))
    for _ in range(20):
        d1 = np.array([[draw(_rate) for _ in range(order)] for _ in range(order)])
        off = np.array([[draw(_rate) if i != j else 0.0 for j in range(order)] for i in range(order)])
        d0 = off - np.diag(off.sum(axis=1) + d1.sum(axis=1))
        try:
            return MAP(d0, d1)
        except ValueError:
            continue
    return MAP.exponential(draw(st.sampled_from([0.2, 1.0, 3.0])))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(procs=st.lists(_maps(), min_size=1, max_size=3),
       population=st.integers(1, 6),
       think=st.sampled_from([0.0, 0.1, 2.0, 30.0]))
def test_random_networks_obey_the_laws_and_both_solvers_agree(procs, population, think):
    a = solve_closed(procs, population, think, method="splu")
    b = solve_closed(procs, population, think, method="multifrontal")
    _assert_laws(a, procs)
    _assert_laws(b, procs)
    assert b.throughput == pytest.approx(a.throughput, rel=1e-9)
    np.testing.assert_allclose(b.queue_length, a.queue_length, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(b.bottleneck_probability, a.bottleneck_probability, atol=1e-9)
    assert np.all(np.isfinite(a.queue_length_distribution))


# ---------------------------------------------------------------------------------- edge cases
def test_population_zero_is_a_flagged_trivial_result():
    procs = [_front(), _database()]
    res = solve_closed(procs, 0, 0.5)
    assert res.trivial and res.flags and res.method == "trivial"
    assert res.throughput == 0.0
    np.testing.assert_array_equal(res.queue_length, [0.0, 0.0])
    np.testing.assert_allclose(res.residence_time, [p.mean for p in procs])
    np.testing.assert_allclose(res.bottleneck_probability, [0.5, 0.5])
    for value in (res.response_time, *res.utilization, *res.queue_length_distribution.ravel()):
        assert math.isfinite(value)


def test_zero_think_time_gives_finite_results_and_littles_law():
    procs = [_front(), _database()]
    res = solve_closed(procs, 8, 0)
    assert not res.trivial and res.think_time == 0.0
    assert res.queue_length.sum() == pytest.approx(8.0)
    _assert_laws(res, procs)


def test_ties_are_split_in_the_bottleneck_probability():
    # one job, two identical exponential queues, no delay: the job is at either queue half the
    # time and then that queue alone holds the most jobs
    res = solve_closed([MAP.exponential(1.0), MAP.exponential(1.0)], 1, 0.0)
    np.testing.assert_allclose(res.bottleneck_probability, [0.5, 0.5])
    # with a delay the all-empty state counts 1/2 for each queue
    res = solve_closed([MAP.exponential(1.0), MAP.exponential(1.0)], 1, 1.0)
    np.testing.assert_allclose(res.bottleneck_probability, [0.5, 0.5])
    res = solve_closed([MAP.exponential(1.0), MAP.exponential(3.0)], 1, 1.0)
    p_empty = 1.0 / 5.0  # think 1, queue 1: 1, queue 2: 3 (mean times, one job)
    np.testing.assert_allclose(res.bottleneck_probability, [0.2 + p_empty / 2, 0.6 + p_empty / 2])


def test_result_arrays_are_read_only():
    res = solve_closed([_front()], 3, 1.0)
    with pytest.raises(ValueError):
        res.queue_length[0] = 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(processes=[]), "processes"),
        (dict(processes=[1.0]), "processes"),
        (dict(processes=None), "processes"),
        (dict(population=-1), "population"),
        (dict(population=2.5), "population"),
        (dict(population=True), "population"),
        (dict(population="ten"), "population"),
        (dict(population=float("nan")), "population"),
        (dict(think_time=-0.1), "think_time"),
        (dict(think_time=float("inf")), "think_time"),
        (dict(think_time=None), "think_time"),
        (dict(think_time="slow"), "think_time"),
        (dict(population=10**7), "population"),
        (dict(method="gmres"), "method"),
    ],
)
def test_bad_input_names_the_field(kwargs, field):
    args = dict(processes=[_front(), _database()], population=5, think_time=0.5)
    method = kwargs.pop("method", "auto")
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        solve_closed(args["processes"], args["population"], args["think_time"], method=method)


# ---------------------------------------------------------------------------- multi-server queues
@pytest.mark.slow
@pytest.mark.parametrize("method", ["splu", "multifrontal"])
@pytest.mark.parametrize("N, Z", [(1, 0.5), (12, 0.0), (40, 0.5)])
def test_exponential_multiserver_queues_equal_exact_mva(method, N, Z):
    """``servers``: an exponential queue with c cores at speed min(n, c) is the M/M/c station;
    exact load-dependent MVA is the reference."""
    from solvers.mva import mva

    means, cores = [0.01, 0.02, 0.03], [2, 4, 8]
    res = solve_closed([MAP.exponential(m) for m in means], N, Z, servers=cores, method=method)
    ref = mva(np.array(means)[:, None], [N], Z, cores)
    assert res.throughput == pytest.approx(float(np.ravel(ref.throughput)[0]), rel=1e-10)
    assert res.queue_length == pytest.approx(np.ravel(ref.queue_length), rel=1e-9, abs=1e-12)
    assert res.utilization == pytest.approx(res.throughput * np.array(means) / cores, rel=1e-9)


def test_multiserver_map_queue_methods_agree_and_single_core_is_unchanged():
    sc = scenarios()["bottleneck_switch"]
    procs = [MAP.exponential(0.008), sc.database.scaled(0.016)]
    a = solve_closed(procs, 30, 0.5, servers=[2, 4], method="splu")
    b = solve_closed(procs, 30, 0.5, servers=[2, 4], method="multifrontal")
    assert a.throughput == pytest.approx(b.throughput, rel=1e-8)
    assert a.queue_length == pytest.approx(b.queue_length, rel=1e-8)
    assert a.throughput * (a.response_time + 0.5) == pytest.approx(30, rel=1e-9)
    assert a.utilization == pytest.approx(a.throughput * np.array([0.008, 0.016]) / [2, 4],
                                          rel=1e-8)
    one = solve_closed(procs, 30, 0.5, servers=[1, 1])
    plain = solve_closed(procs, 30, 0.5)
    assert one.throughput == plain.throughput
    assert np.array_equal(one.queue_length, plain.queue_length)


def test_a_queue_with_as_many_cores_as_users_never_queues():
    res = solve_closed([MAP.exponential(0.01), MAP.exponential(0.05)], 6, 0.2, servers=[1, 6])
    assert res.residence_time[1] == pytest.approx(0.05, rel=1e-10)


@pytest.mark.parametrize("servers, message", [
    ([1, 0], "servers: item 1 must be an integer >= 1, got 0"),
    ([1], "servers: must have one entry per queue"),
    ([1, 2.5], "servers: item 1"),
])
def test_bad_servers_are_refused(servers, message):
    with pytest.raises(ValueError, match=message):
        solve_closed([MAP.exponential(0.01), MAP.exponential(0.02)], 3, 0.5, servers=servers)
