"""Open networks (solvers.open), bounds (solvers.bounds), capacity search and what-if models
(solvers.capacity)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# ``solvers`` before ``line_solver`` (line_solver's sys.path entry shadows our package name)
from solvers.bounds import (  # isort: skip
    aggregate_demands,
    asymptotic_bounds,
    balanced_bounds,
    bottleneck,
    knee,
    open_bounds,
)
from solvers.capacity import (  # isort: skip
    ClosedModel,
    OpenModel,
    default_closed_solver,
    max_arrival_rate,
    max_population,
    meets_targets,
)
from solvers.mva import amva, mva  # isort: skip
from solvers.open import erlang_c, saturation_rate, solve_open  # isort: skip

from line_solver.api.qsys.basic import qsys_mmk  # isort: skip  # noqa: E402


# --------------------------------------------------------------------------------------------
# open networks
# --------------------------------------------------------------------------------------------

def test_single_server_stations_follow_the_ps_product_form():
    lam = np.array([2.0, 1.0])
    D = np.array([[0.1, 0.2], [0.05, 0.3]])
    res = solve_open(lam, D)
    rho = D @ lam
    np.testing.assert_allclose(res.residence_time, D / (1 - rho)[:, None], rtol=1e-13)
    np.testing.assert_allclose(res.queue_length.sum(axis=1), rho / (1 - rho), rtol=1e-13)
    np.testing.assert_allclose(res.utilization, D * lam, rtol=1e-13)
    assert res.stable and not res.saturated_stations


def test_two_servers_match_the_mm2_closed_form():
    # M/M/2: P(wait) = 2 rho^2 / (1 + rho), R = S / (1 - rho^2)
    S = 0.5
    for lam in (0.3, 1.5, 3.6):
        rho = lam * S / 2
        assert erlang_c(2, 2 * rho) == pytest.approx(2 * rho**2 / (1 + rho), rel=1e-13)
        res = solve_open([lam], [[S]], [2])
        assert res.response_time[0] == pytest.approx(S / (1 - rho**2), rel=1e-13)


@pytest.mark.parametrize("servers", [1, 2, 3, 8, 32])
def test_mmc_matches_line_solver(servers):
    S = 0.2
    for frac in (0.1, 0.5, 0.9, 0.99):
        lam = frac * servers / S
        ref = qsys_mmk(lam, 1 / S, servers)
        res = solve_open([lam], [[S]], [servers])
        assert res.response_time[0] == pytest.approx(ref["W"], rel=1e-10)
        assert res.queue_length[0, 0] == pytest.approx(ref["L"], rel=1e-10)
        assert res.utilization[0, 0] == pytest.approx(ref["rho"], rel=1e-13)


def test_erlang_c_is_stable_for_many_servers():
    # explicit sum in log space as the reference
    c, a = 500, 480.0
    k = np.arange(c)
    log_terms = k * math.log(a) - np.array([math.lgamma(i + 1) for i in k])
    log_last = c * math.log(a) - math.lgamma(c + 1) - math.log(1 - a / c)
    ref = 1 / (1 + np.exp(np.logaddexp.reduce(log_terms) - log_last))
    assert erlang_c(c, a) == pytest.approx(ref, rel=1e-10)


def test_saturated_station_is_flagged_with_inf_never_nan():
    D = np.array([[0.1, 0.0], [0.5, 0.1], [1.0, 1.0]])
    res = solve_open([2.5, 1.0], D, [1, 1, math.inf])    # station 1: rho = 1.35
    assert not res.stable and res.saturated_stations == (1,)
    assert math.isinf(res.response_time[0]) and math.isinf(res.response_time[1])
    assert res.residence_time[0, 1] == 0.0                # class 1 does not visit station 0
    assert res.utilization[1].sum() == pytest.approx(1.35)
    for a in (res.response_time, res.residence_time, res.queue_length, res.utilization):
        assert not np.any(np.isnan(a))
    assert any("saturated" in f for f in res.flags)
    exactly_one = solve_open([1.0], [[1.0]])              # rho = 1 exactly is saturated
    assert not exactly_one.stable and math.isinf(exactly_one.response_time[0])


def test_zero_arrival_rate_class_sees_an_arriving_jobs_residence():
    D = np.array([[0.1, 0.3], [0.2, 0.2]])
    res = solve_open([3.0, 0.0], D, [1, 2])
    assert np.all(res.queue_length[:, 1] == 0)
    tiny = solve_open([3.0, 1e-9], D, [1, 2])
    np.testing.assert_allclose(res.residence_time[:, 1], tiny.residence_time[:, 1], rtol=1e-7)


@pytest.mark.parametrize("args, field", [
    (([-1.0], [[0.1]]), "arrival_rates"),
    (([float("nan")], [[0.1]]), "arrival_rates"),
    (([1.0, 2.0], [[0.1]]), "demands"),
    (([1.0], [[-0.1]]), "demands"),
    (([1.0], [[0.1]], [0]), "servers"),
])
def test_open_invalid_inputs_name_the_argument(args, field):
    with pytest.raises(ValueError, match=field):
        solve_open(*args)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_property_open_laws_and_no_nan(M, C, seed):
    rng = np.random.default_rng(seed)
    D = rng.uniform(0, 1, (M, C)) * (rng.uniform(size=(M, C)) < 0.8)
    servers = np.where(rng.uniform(size=M) < 0.3, math.inf, rng.integers(1, 5, M))
    lam = rng.uniform(0, 3, C) * (rng.uniform(size=C) < 0.9)
    res = solve_open(lam, D, servers)
    for a in (res.response_time, res.residence_time, res.queue_length, res.utilization):
        assert not np.any(np.isnan(a))
    c = np.where(np.isinf(servers), 1.0, servers)
    np.testing.assert_allclose(res.utilization, lam * D / c[:, None], rtol=1e-12)
    if res.stable:
        np.testing.assert_allclose(res.queue_length, lam * res.residence_time, rtol=1e-12)
        assert np.all(res.residence_time >= D * (1 - 1e-12))
    else:
        assert all(res.station_utilization[m] >= 1 for m in res.saturated_stations)


# --------------------------------------------------------------------------------------------
# bounds
# --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_bounds_bracket_exact_mva():
    rng = np.random.default_rng(17)
    Ns = np.r_[0:12, 12:60:4]
    for _ in range(30):
        M = int(rng.integers(1, 5))
        D = rng.uniform(0.01, 1.0, M)
        Z = float(rng.choice([0.0, rng.uniform(0.1, 10)]))
        servers = np.where(rng.uniform(size=M) < 0.3, rng.integers(2, 4, M), 1).astype(float)
        if rng.uniform() < 0.2:
            servers[0] = math.inf
        aba = asymptotic_bounds(D, Z, Ns, servers)
        bjb = balanced_bounds(D, Z, Ns, servers)
        for i, N in enumerate(Ns):
            r = mva(D, [N], [Z], servers)
            X, R = r.throughput[0], r.response_time[0]
            for b in (aba, bjb):
                assert b.throughput_lower[i] <= X * (1 + 1e-12) + 1e-15
                assert X <= b.throughput_upper[i] * (1 + 1e-12)
                if N > 0:
                    assert b.response_lower[i] <= R * (1 + 1e-12)
                    assert R <= b.response_upper[i] * (1 + 1e-12)
        # balanced job bounds are at least as tight as the asymptotic ones
        assert np.all(bjb.throughput_lower >= aba.throughput_lower - 1e-15)
        assert np.all(bjb.throughput_upper <= aba.throughput_upper + 1e-15)


def test_balanced_bounds_are_strictly_tighter_around_the_knee():
    D, Z = np.array([0.2, 0.1, 0.05]), 1.0
    n_star = knee(D, Z)
    assert n_star == pytest.approx((0.35 + 1.0) / 0.2)
    N = int(round(n_star))
    aba, bjb = asymptotic_bounds(D, Z, N), balanced_bounds(D, Z, N)
    assert bjb.throughput_upper[0] < aba.throughput_upper[0] * 0.95
    assert bjb.throughput_lower[0] > aba.throughput_lower[0] * 1.5


def test_asymptotic_bounds_closed_forms_and_bottleneck():
    D, Z = np.array([0.2, 0.5, 0.1]), 2.0
    b = asymptotic_bounds(D, Z, [1, 10, 100])
    assert b.bottleneck == 1 == bottleneck(D)
    np.testing.assert_allclose(b.throughput_upper, [1 / 2.8, 2.0, 2.0])
    np.testing.assert_allclose(b.throughput_lower, [1 / 2.8, 10 / 10.0, 100 / 82.0])
    np.testing.assert_allclose(b.response_lower, [0.8, 3.0, 48.0])
    np.testing.assert_allclose(b.response_upper, [0.8, 8.0, 80.0])
    assert bottleneck(D, [1, 4, 1]) == 0           # 0.5/4 < 0.2


def test_aggregate_demands_weights_classes():
    D = np.array([[0.1, 0.3], [0.2, 0.0]])
    np.testing.assert_allclose(aggregate_demands(D, [1, 3]), [0.25, 0.05])
    with pytest.raises(ValueError, match="weights"):
        aggregate_demands(D, [0, 0])
    with pytest.raises(ValueError, match="demands"):
        asymptotic_bounds(D, 1.0, 5)


def test_open_bounds_bracket_solve_open():
    rng = np.random.default_rng(23)
    for _ in range(50):
        M = int(rng.integers(1, 5))
        D = rng.uniform(0.01, 1.0, M)
        servers = np.where(rng.uniform(size=M) < 0.4, rng.integers(2, 5, M), 1).astype(float)
        lam_sat = saturation_rate(D, servers)
        lam = rng.uniform(0, 1.0) * lam_sat
        b = open_bounds(D, lam, servers)
        assert b.saturation_rate == pytest.approx(lam_sat)
        R = solve_open([lam], D, servers).response_time[0]
        assert b.response_lower[0] <= R * (1 + 1e-12) <= b.response_upper[0] * (1 + 2e-12)
    beyond = open_bounds([0.5], [3.0])
    assert math.isinf(beyond.response_upper[0]) and math.isinf(beyond.response_lower[0])


def test_bounds_validate_inputs():
    with pytest.raises(ValueError, match="think_time"):
        asymptotic_bounds([0.1], -1.0, 5)
    with pytest.raises(ValueError, match="populations"):
        balanced_bounds([0.1], 1.0, [2.5])
    with pytest.raises(ValueError, match="arrival_rates"):
        open_bounds([0.1], [-1.0])


# --------------------------------------------------------------------------------------------
# models and what-ifs
# --------------------------------------------------------------------------------------------

def _shop() -> ClosedModel:
    return ClosedModel.build(demands=[[0.010, 0.030], [0.020, 0.015], [0.005, 0.040]],
                             populations=[20, 10], think_times=[1.0, 2.0],
                             station_names=["web", "app", "db"], class_names=["browse", "buy"])


def test_models_are_immutable_and_transformations_return_new_models():
    m = _shop()
    with pytest.raises(ValueError):
        m.demands[0, 0] = 1.0                      # read-only array
    faster = m.scale_speed("db", 2.0)
    np.testing.assert_allclose(faster.demands[2], m.demands[2] / 2)
    np.testing.assert_allclose(m.demands[2], [0.005, 0.040])     # original untouched
    assert m.with_populations([5, 5]).populations.tolist() == [5, 5]
    assert m.with_think_times([3.0, 3.0]).think_times.tolist() == [3.0, 3.0]
    assert m.replicate("app", 1) is m


def test_replicate_split_and_servers():
    m = _shop()
    split = m.replicate("app", 3)
    assert split.station_names == ("web", "app[1]", "app[2]", "app[3]", "db")
    np.testing.assert_allclose(split.demands[1:4], np.repeat(m.demands[1:2] / 3, 3, axis=0))
    pooled = m.replicate("app", 3, mode="servers")
    assert pooled.servers.tolist() == [1, 3, 1]
    # total capacity is the same; a shared queue never idles a replica, so it does better
    xs, xp = mva_of(split).throughput, mva_of(pooled).throughput
    assert np.all(xp >= xs * (1 - 1e-12))
    assert np.all(mva_of(split).throughput >= mva_of(m).throughput)


def mva_of(model: ClosedModel):
    return mva(model.demands, model.populations, model.think_times, model.servers)


def test_replicating_the_bottleneck_resolves_a_table_v_style_saturation():
    # Harbaoui et al. (2010), Table V: the saturated tier is replicated; throughput rises, response drops
    model = OpenModel.build(demands=[[0.009], [0.006], [0.001]], arrival_rates=[120.0],
                            station_names=["web", "ejb", "mysql"])
    assert not model.solve().stable
    for mode in ("split", "servers"):
        fixed = model.replicate("web", 2, mode=mode).solve()
        assert fixed.stable and np.isfinite(fixed.response_time[0])
    # open model, split: each replica is M/M/1 with rho/2
    split = model.replicate("web", 2).solve()
    rho_web = 120 * 0.009 / 2
    assert split.residence_time[:2, 0].sum() == pytest.approx(0.009 / (1 - rho_web))


def test_model_validation_names_fields():
    with pytest.raises(ValueError, match="station_names"):
        ClosedModel.build([[0.1]], [1], station_names=["a", "b"])
    with pytest.raises(ValueError, match="station"):
        _shop().scale_speed("cache", 2.0)
    with pytest.raises(ValueError, match="speed"):
        _shop().scale_speed("db", 0.0)
    with pytest.raises(ValueError, match="k"):
        _shop().replicate("db", 0)
    with pytest.raises(ValueError, match="mode"):
        _shop().replicate("db", 2, mode="magic")
    with pytest.raises(ValueError, match="populations"):
        _shop().with_populations([1.5, 2])
    with pytest.raises(ValueError, match="arrival_rates"):
        OpenModel.build([[0.1]], [-2.0])


# --------------------------------------------------------------------------------------------
# capacity search
# --------------------------------------------------------------------------------------------

def test_max_population_returns_the_boundary():
    m = ClosedModel.build([[0.05], [0.03]], populations=[1], think_times=[1.0])
    for target in (0.1, 0.5, 2.0):
        cap = max_population(m, [target])
        n = cap.value
        assert cap.feasible and not cap.limited
        assert mva(m.demands, [n], [1.0]).response_time[0] <= target
        assert mva(m.demands, [n + 1], [1.0]).response_time[0] > target
        assert cap.violated == (0,)
        assert cap.evaluations <= 2 * math.log2(n + 2) + 3


def test_max_population_multiclass_keeps_the_mix_and_can_grow_one_class():
    m = _shop()
    targets = [0.15, 0.4]
    cap = max_population(m, targets)                 # direction = (2, 1)
    n = cap.value
    assert cap.load.tolist() == [2 * n, n]
    assert meets_targets(mva_of(m.with_populations([2 * n, n])), targets)
    assert not meets_targets(mva_of(m.with_populations([2 * n + 2, n + 1])), targets)
    buyers = max_population(m, targets, direction=[0, 1], base=[20, 0])
    k = buyers.value
    assert meets_targets(mva_of(m.with_populations([20, k])), targets)
    assert not meets_targets(mva_of(m.with_populations([20, k + 1])), targets)


def test_max_population_infeasible_and_limited():
    m = ClosedModel.build([[0.5]], populations=[3], think_times=[1.0])
    cap = max_population(m, [0.4])                  # one user already needs 0.5 s
    assert cap.value == 0 and cap.feasible
    no_target = max_population(m, [math.inf], limit=50)
    assert no_target.limited and no_target.value == 50
    base_fails = max_population(m, [0.4], direction=[1], base=[2])
    assert not base_fails.feasible and base_fails.value is None


def test_max_population_accepts_another_solver():
    calls = []

    def solver(model):
        calls.append(model.populations.copy())
        return amva(model.demands, model.populations, model.think_times, model.servers)

    m = ClosedModel.build([[0.02], [0.01]], populations=[1], think_times=[0.5])
    cap = max_population(m, [0.5], solver=solver)
    assert calls and cap.result.method == "amva"
    r = amva(m.demands, [cap.value + 1], [0.5])
    assert r.response_time[0] > 0.5 >= cap.result.response_time[0]
    assert default_closed_solver(m.with_populations([1000, ])).method == "mva"
    big = ClosedModel.build(np.full((2, 3), 0.01), [100, 100, 100], 1.0)
    assert default_closed_solver(big).method == "amva"


def test_max_arrival_rate_matches_the_mm1_closed_form():
    D, T = 0.04, 0.1                                 # R = D / (1 - lam D) <= T
    cap = max_arrival_rate(OpenModel.build([[D]], [1.0]), [T], rel_tol=1e-9)
    assert cap.value == pytest.approx((1 - D / T) / D, rel=1e-8)
    assert cap.result.response_time[0] <= T
    assert cap.next_result.response_time[0] > T


def test_max_arrival_rate_multiclass_headroom():
    model = OpenModel.build([[0.02, 0.01], [0.01, 0.05]], arrival_rates=[10.0, 5.0],
                            servers=[2, 1])
    targets = [0.05, 0.2]
    cap = max_arrival_rate(model, targets, rel_tol=1e-8)
    x = cap.value
    assert meets_targets(solve_open(x * model.arrival_rates, model.demands, [2, 1]), targets)
    assert not meets_targets(solve_open(x * (1 + 1e-6) * model.arrival_rates, model.demands,
                                        [2, 1]), targets)
    generic = max_arrival_rate(model, targets, rel_tol=1e-8,
                               solver=lambda mdl: solve_open(mdl.arrival_rates, mdl.demands,
                                                             mdl.servers))
    assert generic.value == pytest.approx(x, rel=1e-6)


def test_capacity_validation():
    m = _shop()
    with pytest.raises(ValueError, match="targets"):
        max_population(m, [0.1])
    with pytest.raises(ValueError, match="targets"):
        max_population(m, [0.1, -1])
    with pytest.raises(ValueError, match="direction"):
        max_population(m, [0.1, 0.1], direction=[0, 0])
    with pytest.raises(ValueError, match="direction"):
        max_arrival_rate(OpenModel.build([[0.1]], [0.0]), [1.0])
    with pytest.raises(ValueError, match="rel_tol"):
        max_arrival_rate(OpenModel.build([[0.1]], [1.0]), [1.0], rel_tol=0)
    infeasible = max_arrival_rate(OpenModel.build([[0.1]], [1.0]), [0.05])
    assert not infeasible.feasible and infeasible.value is None


_entries = st.one_of(st.floats(-1.0, 3.0), st.sampled_from([0.0, math.inf, math.nan]))


@settings(max_examples=80, deadline=None)
@given(st.lists(_entries, min_size=1, max_size=2), st.lists(_entries, min_size=1, max_size=4),
       st.lists(st.sampled_from([1.0, 3.0, 0.0, 2.5, math.inf]), min_size=1, max_size=2))
def test_property_open_bad_input_raises_naming_the_argument_or_solves_cleanly(lam, d, s):
    demands = np.resize(np.array(d), (len(s), len(lam)))
    try:
        res = solve_open(lam, demands, s)
    except ValueError as exc:
        assert str(exc).split(":")[0] in {"arrival_rates", "demands", "servers"}
        return
    for a in (res.response_time, res.residence_time, res.queue_length, res.utilization):
        assert not np.any(np.isnan(a))
    assert res.stable == (not res.saturated_stations)


# --------------------------------------------------------------------------- MAP network capacity
@pytest.mark.slow
def test_capacity_over_the_map_network_is_below_mva_under_bottleneck_switch():
    """Mi et al.'s (2008) point for capacity planning: MVA overstates the users an SLA allows when the
    database's bursty service switches the bottleneck; the exact MAP network does not."""
    from solvers.capacity import map_network_solver
    from solvers.mapqn import solve_closed
    from solvers.paper000 import THINK_TIME, scenarios

    scenario = scenarios()["bottleneck_switch"]
    model = ClosedModel.build(scenario.demands, [1], THINK_TIME, station_names=("front", "db"))
    target = 0.1  # response time SLA, seconds
    solver = map_network_solver(scenario.processes)
    exact = max_population(model, [target], solver=solver)
    by_mva = max_population(model, [target])
    assert exact.feasible and by_mva.feasible
    assert exact.value < by_mva.value
    # the boundary is exact for the MAP network: n meets the SLA, n + 1 does not
    assert solve_closed(scenario.processes, exact.value, THINK_TIME).response_time <= target
    assert solve_closed(scenario.processes, exact.value + 1, THINK_TIME).response_time > target
    # a faster database (Zong (2011) what-if) moves the capacity up, burstiness kept
    faster = max_population(model.scale_speed("db", 2.0), [target], solver=solver)
    assert faster.value > exact.value


def test_map_network_solver_rejects_a_model_it_cannot_represent():
    from solvers.capacity import map_network_solver
    from solvers.paper000 import scenarios

    scenario = scenarios()["bottleneck_switch"]
    model = ClosedModel.build(scenario.demands, [10], 0.5).replicate(1, 2)
    with pytest.raises(ValueError, match="^model"):
        max_population(model, [0.1], solver=map_network_solver(scenario.processes))
