"""Exact and approximate MVA (solvers.mva) against line-solver, product-form enumeration, a CTMC
and log-space convolution; Little's and the utilization law; degenerate inputs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import gammaln, logsumexp

# ``solvers`` must be imported before ``line_solver``: importing line_solver puts its own
# package directory on sys.path, where its ``solvers`` subpackage would shadow ours.
from solvers.mva import amva, lattice_size, mva, mva_curve  # isort: skip

from line_solver.api.pfqn.mva import pfqn_mva  # isort: skip  # noqa: E402
from line_solver.api.pfqn.mvald import pfqn_mvald  # isort: skip  # noqa: E402


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))


def _random_model(rng, max_classes=3, max_pop=6, max_stations=4):
    C = int(rng.integers(1, max_classes + 1))
    M = int(rng.integers(1, max_stations + 1))
    D = rng.uniform(0.01, 1.0, (M, C)) * (rng.uniform(size=(M, C)) < 0.85)
    N = rng.integers(0, max_pop + 1, C)
    Z = np.where(rng.uniform(size=C) < 0.3, 0.0, rng.uniform(0.0, 5.0, C))
    return D, N, Z


def _check_laws(res, D, N, Z, servers):
    """Little's law per class and per station, utilization law, no NaN."""
    for name in ("throughput", "response_time", "residence_time", "queue_length", "utilization"):
        assert not np.any(np.isnan(getattr(res, name))), name
    X = res.throughput
    finite = np.isfinite(X)
    np.testing.assert_allclose(res.queue_length, np.where(finite, X, 0.0) * res.residence_time,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.response_time, res.residence_time.sum(axis=0), rtol=1e-12)
    present = (N > 0) & finite
    np.testing.assert_allclose(X[present] * (res.response_time[present] + Z[present]),
                               N[present], rtol=1e-9)
    c = np.where(np.isinf(servers), 1.0, servers)[:, None]
    np.testing.assert_allclose(res.utilization, np.where(D > 0, np.where(finite, X, 0) * D / c, 0),
                               rtol=1e-12, atol=1e-15)
    assert np.all(res.utilization[np.isfinite(servers)].sum(axis=1) <= 1 + 1e-9)


# --------------------------------------------------------------------------------------------
# exact MVA, single-server stations, against line-solver's exact MVA
# --------------------------------------------------------------------------------------------

def test_exact_mva_matches_line_solver_on_random_multiclass_models():
    rng = np.random.default_rng(20261121)
    for _ in range(25):
        D, N, Z = _random_model(rng)
        if N.sum() == 0 or np.any((N > 0) & (D.sum(axis=0) + Z == 0)):
            continue
        ours = mva(D, N, Z)
        XN, _, QN, UN, RN, _, _ = pfqn_mva(D, N, Z)
        p = N > 0
        assert _rel(ours.throughput[p], XN[0, p]) <= 1e-8
        assert _rel(ours.residence_time[:, p], RN[:, p]) <= 1e-8
        assert _rel(ours.queue_length[:, p], QN[:, p]) <= 1e-8
        assert _rel(ours.utilization[:, p], UN[:, p]) <= 1e-8
        _check_laws(ours, D, N, Z, np.ones(D.shape[0]))


def test_exact_mva_matches_line_solver_on_the_paper_000_model():
    # Mi et al. (2008), Fig. 9: think time Z = 0.5 s, front server and database in series
    D = np.array([[0.0048], [0.0036]])
    for users in (1, 20, 100, 150):
        ours = mva(D, [users], [0.5])
        XN, _, QN, _, RN, _, _ = pfqn_mva(D, [users], [0.5])
        assert _rel(ours.throughput, XN[0]) <= 1e-8
        assert _rel(ours.queue_length, QN) <= 1e-8
        assert ours.bottleneck == 0


def test_large_lattice_agrees_with_a_plain_scalar_recursion():
    # 41^3 population vectors: the vectorised level walk against the textbook loop
    rng = np.random.default_rng(7)
    D = rng.uniform(0.01, 0.1, (3, 3)).tolist()
    Z = [1.0, 2.0, 0.5]
    N = (40, 40, 40)
    Q = {}
    for n in itertools.product(*(range(k + 1) for k in N)):
        q = [0.0, 0.0, 0.0]
        for c in range(3):
            if n[c]:
                prev = Q[n[:c] + (n[c] - 1,) + n[c + 1:]]
                R = [D[m][c] * (1.0 + prev[m]) for m in range(3)]
                x = n[c] / (Z[c] + sum(R))
                q = [q[m] + x * R[m] for m in range(3)]
        Q[n] = q
    for n in [N, (15, 15, 15), (0, 20, 25), (30, 0, 10)]:
        ours = mva(D, n, Z)
        np.testing.assert_allclose(ours.queue_length.sum(axis=1), Q[n], rtol=1e-12)


# --------------------------------------------------------------------------------------------
# multi-server stations
# --------------------------------------------------------------------------------------------

def _product_form(D, N, Z, servers):
    """Brute-force BCMP product form: X_c = G(N - e_c)/G(N) and Q_{m,c}, by enumeration."""
    M, C = D.shape

    def station_factor(m, counts):
        tot = sum(counts)
        f = math.factorial(tot) / np.prod([math.factorial(k) for k in counts])
        f *= np.prod([D[m, c] ** counts[c] for c in range(C)])
        if math.isinf(servers[m]):
            return np.prod([D[m, c] ** counts[c] / math.factorial(counts[c]) for c in range(C)])
        return f / np.prod([min(j, servers[m]) for j in range(1, tot + 1)])

    def compositions(n, parts):
        for cut in itertools.combinations(range(n + parts - 1), parts - 1):
            edges = (-1,) + cut + (n + parts - 1,)
            yield tuple(edges[i + 1] - edges[i] - 1 for i in range(parts))

    def solve(pop):
        G, Q = 0.0, np.zeros((M, C))
        per_class = [list(compositions(int(pop[c]), M + 1)) for c in range(C)]
        for choice in itertools.product(*per_class):
            # choice[c][m] for m < M are station counts, choice[c][M] thinking users
            w = np.prod([Z[c] ** choice[c][M] / math.factorial(choice[c][M]) for c in range(C)])
            for m in range(M):
                w *= station_factor(m, [choice[c][m] for c in range(C)])
            G += w
            Q += w * np.array([[choice[c][m] for c in range(C)] for m in range(M)])
        return G, Q / G if G > 0 else Q

    G, Q = solve(N)
    X = np.array([solve(N - np.eye(C, dtype=int)[c])[0] / G if N[c] else 0.0 for c in range(C)])
    return X, Q


def test_multiserver_mva_matches_product_form_enumeration():
    rng = np.random.default_rng(3)
    for _ in range(6):
        M, C = 3, int(rng.integers(1, 3))
        D = rng.uniform(0.1, 1.0, (M, C))
        N = rng.integers(1, 4, C)
        Z = rng.uniform(0.0, 2.0, C)
        servers = np.array([rng.integers(2, 4), 1, rng.choice([2, math.inf])], dtype=float)
        res = mva(D, N, Z, servers)
        X, Q = _product_form(D, N, Z, servers)
        assert _rel(res.throughput, X) <= 1e-10
        assert _rel(res.queue_length, Q) <= 1e-10
        _check_laws(res, D, N, Z, servers)


def test_class_confined_to_a_multiserver_station_matches_product_form():
    # class 0 lives only at station 0 (no think time): the network without station 0 cannot
    # hold it (G = 0 there), which the p(0|n) ratio recursion must handle
    D = np.array([[1.0, 0.2, 0.4], [0.0, 0.3, 0.1], [0.0, 0.1, 0.5]])
    N, Z = np.array([3, 2, 2]), np.array([0.0, 1.0, 0.5])
    servers = np.array([3, 1, 2], dtype=float)
    res = mva(D, N, Z, servers)
    X, Q = _product_form(D, N, Z, servers)
    assert _rel(res.throughput, X) <= 1e-10
    assert _rel(res.queue_length, Q) <= 1e-10
    _check_laws(res, D, N, Z, servers)


def test_multiserver_mva_matches_a_ctmc_of_the_three_tier_loop():
    # think (Z) -> front, 2 servers (D_a) -> database, 1 server (D_b) -> think
    Z, Da, Db, N = 1.5, 0.8, 0.3, 6
    states = [(a, b) for a in range(N + 1) for b in range(N + 1 - a)]
    index = {s: i for i, s in enumerate(states)}
    Qgen = np.zeros((len(states), len(states)))
    for (a, b), i in index.items():
        thinking = N - a - b
        moves = [((a + 1, b), thinking / Z), ((a - 1, b + 1), min(a, 2) / Da),
                 ((a, b - 1), min(b, 1) / Db)]
        for target, rate in moves:
            if rate > 0:
                Qgen[i, index[target]] += rate
                Qgen[i, i] -= rate
    A = np.vstack([Qgen.T, np.ones(len(states))])
    pi = np.linalg.lstsq(A, np.r_[np.zeros(len(states)), 1.0], rcond=None)[0]
    X = sum(pi[index[s]] * min(s[1], 1) / Db for s in states)
    qa = sum(pi[index[s]] * s[0] for s in states)
    qb = sum(pi[index[s]] * s[1] for s in states)
    res = mva([[Da], [Db]], [N], [Z], [2, 1])
    assert res.throughput[0] == pytest.approx(X, rel=1e-10)
    np.testing.assert_allclose(res.queue_length[:, 0], [qa, qb], rtol=1e-9)


def test_multiserver_mva_matches_line_solver_load_dependent_mva():
    rng = np.random.default_rng(11)
    for _ in range(8):
        D = rng.uniform(0.05, 0.5, (3, 2))
        N = rng.integers(1, 6, 2)
        Z = rng.uniform(0.5, 3.0, 2)
        servers = np.array([1, rng.integers(2, 4), 2])
        mu = np.array([[min(k, c) for k in range(1, N.sum() + 1)] for c in servers], float)
        XN, QN, _, _, _, stable, _ = pfqn_mvald(D, N, Z, mu)
        assert stable    # a meaningful comparison only where line-solver is stable
        res = mva(D, N, Z, servers)
        assert _rel(res.throughput, XN[0]) <= 1e-8
        assert _rel(res.queue_length, QN) <= 1e-8


def _log_convolution_throughput(D, N, Z, servers):
    """Single class: log G(n) by convolution of load-dependent factors; X = G(N-1)/G(N)."""
    n = np.arange(N + 1)
    lg = n * np.log(Z) - gammaln(n + 1)
    for d, c in zip(D, servers):
        lf = np.array([k * np.log(d) - np.sum(np.log(np.minimum(np.arange(1, k + 1), c)))
                       for k in n])
        lg = np.array([logsumexp(lg[:k + 1][::-1] + lf[:k + 1]) for k in n])
    return math.exp(lg[N - 1] - lg[N])


@pytest.mark.parametrize("N", [10, 60, 200])
def test_multiserver_mva_is_stable_at_heavy_load(N):
    # 8-server bottleneck saturated: the subtraction p(0|n) = 1 - ... form loses all digits
    # here (line-solver's pfqn_mvald reports isNumStable=False); the ratio form must not.
    D, servers, Z = np.array([4.0, 0.3, 0.2]), np.array([8, 1, 2]), 0.5
    res = mva(D, [N], [Z], servers)
    assert res.throughput[0] == pytest.approx(_log_convolution_throughput(D, N, Z, servers),
                                              rel=1e-10)
    assert np.all(res.queue_length >= 0)
    assert res.queue_length.sum() + res.throughput[0] * Z == pytest.approx(N, rel=1e-10)


def test_many_servers_act_as_a_delay():
    D = np.array([[0.5, 0.2], [0.1, 0.3]])
    big = mva(D, [3, 2], [1.0, 1.0], [1, 5])          # 5 servers > 5 users: never queue
    delay = mva(D, [3, 2], [1.0, 1.0], [1, math.inf])
    np.testing.assert_allclose(big.throughput, delay.throughput, rtol=1e-13)
    np.testing.assert_allclose(big.residence_time[1], D[1], rtol=1e-13)
    np.testing.assert_allclose(big.utilization[1], delay.throughput * D[1] / 5, rtol=1e-13)


# --------------------------------------------------------------------------------------------
# degenerate inputs: flagged, never NaN
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("servers", [None, [1, 3, math.inf]])
def test_absent_class_sees_the_arrival_theorem_residence(servers):
    D = np.array([[0.2, 0.4], [0.3, 0.1], [0.5, 0.5]])
    res = mva(D, [4, 0], [1.0, 2.0], servers)
    assert res.throughput[1] == 0 and np.all(res.queue_length[:, 1] == 0)
    assert any("class 1 has zero population" in f for f in res.flags)
    # one class-1 job arriving at (4, 0) sees what class 1 sees at population (4, 1)
    one_more = mva(D, [4, 1], [1.0, 2.0], servers)
    np.testing.assert_allclose(res.residence_time[:, 1], one_more.residence_time[:, 1],
                               rtol=1e-12)


def test_zero_total_population_is_flagged():
    res = mva([[0.1, 0.2]], [0, 0], [1.0, 1.0])
    assert np.all(res.throughput == 0) and np.all(res.queue_length == 0)
    np.testing.assert_allclose(res.residence_time, [[0.1, 0.2]])
    assert any("zero total population" in f for f in res.flags)


def test_class_without_demand_or_think_time_has_unbounded_throughput():
    D = np.array([[0.0, 0.3], [0.0, 0.2]])
    res = mva(D, [5, 3], [0.0, 1.0])
    assert math.isinf(res.throughput[0])
    assert res.response_time[0] == 0 and np.all(res.queue_length[:, 0] == 0)
    assert any("throughput unbounded" in f for f in res.flags)
    alone = mva(D[:, 1:], [3], [1.0])          # the other class is unaffected
    np.testing.assert_allclose(res.throughput[1], alone.throughput[0], rtol=1e-13)
    ares = amva(D, [5, 3], [0.0, 1.0])
    assert math.isinf(ares.throughput[0]) and not np.any(np.isnan(ares.queue_length))


def test_zero_demands_with_think_time_give_the_think_rate():
    res = mva(np.zeros((2, 1)), [7], [2.0])
    assert res.throughput[0] == pytest.approx(3.5)
    assert res.response_time[0] == 0


@pytest.mark.parametrize("kwargs, field", [
    (dict(demands=[[0.1, -0.2]], populations=[1, 1], think_times=0), "demands"),
    (dict(demands=[[0.1, float("nan")]], populations=[1, 1], think_times=0), "demands"),
    (dict(demands=[[0.1, 0.2]], populations=[1, 1, 1], think_times=0), "demands"),
    (dict(demands=[[0.1]], populations=[1.5], think_times=0), "populations"),
    (dict(demands=[[0.1]], populations=[-1], think_times=0), "populations"),
    (dict(demands=[[0.1]], populations=["a"], think_times=0), "populations"),
    (dict(demands=[[0.1]], populations=[1], think_times=-1), "think_times"),
    (dict(demands=[[0.1]], populations=[1], think_times=[1, 2]), "think_times"),
    (dict(demands=[[0.1]], populations=[1], think_times=0, servers=[0]), "servers"),
    (dict(demands=[[0.1]], populations=[1], think_times=0, servers=[1.5]), "servers"),
    (dict(demands=[[0.1]], populations=[1], think_times=0, servers=[1, 1]), "servers"),
])
@pytest.mark.parametrize("solver", [mva, amva])
def test_invalid_inputs_name_the_argument(kwargs, field, solver):
    with pytest.raises(ValueError, match=field):
        solver(**kwargs)


def test_too_large_lattice_is_refused_with_advice():
    assert lattice_size([1000] * 5) > 10**14
    with pytest.raises(ValueError, match="populations.*amva"):
        mva(np.ones((2, 5)), [1000] * 5, 1.0)


def test_amva_rejects_bad_tolerance():
    with pytest.raises(ValueError, match="tol"):
        amva([[0.1]], [3], 1.0, tol=0)
    with pytest.raises(ValueError, match="max_iter"):
        amva([[0.1]], [3], 1.0, max_iter=0)


_models = st.tuples(
    st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**32 - 1), st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_models)
def test_property_laws_hold_and_nothing_is_nan(spec):
    M, C, seed, multi = spec
    rng = np.random.default_rng(seed)
    D = rng.uniform(0, 1, (M, C)) * (rng.uniform(size=(M, C)) < 0.7)
    N = rng.integers(0, 5, C)
    Z = np.where(rng.uniform(size=C) < 0.4, 0.0, rng.uniform(0, 3, C))
    servers = (np.where(rng.uniform(size=M) < 0.5, rng.integers(1, 4, M), 1).astype(float)
               if multi else np.ones(M))
    if multi and rng.uniform() < 0.3:
        servers[0] = math.inf
    for solver in (mva, amva):
        res = solver(D, N, Z, servers)
        _check_laws(res, D, N, Z, servers)


# --------------------------------------------------------------------------------------------
# approximate MVA
# --------------------------------------------------------------------------------------------

def test_amva_is_exact_for_one_user_and_close_for_many():
    D = np.array([[0.05], [0.03], [0.02]])
    one = amva(D, [1], [1.0])
    assert one.response_time[0] == pytest.approx(0.1, rel=1e-9)
    for users in (50, 200, 1000):
        exact, approx = mva(D, [users], [1.0]), amva(D, [users], [1.0])
        assert approx.converged
        assert _rel(approx.throughput, exact.throughput) < 0.03
        if users >= 200:      # deep in saturation both approach 1/D_max
            assert _rel(approx.throughput, exact.throughput) < 1e-3


def test_amva_multiclass_close_to_exact():
    rng = np.random.default_rng(5)
    for _ in range(5):
        D = rng.uniform(0.01, 0.2, (3, 2))
        N, Z = np.array([25, 30]), rng.uniform(0.5, 3.0, 2)
        exact, approx = mva(D, N, Z), amva(D, N, Z)
        assert approx.converged
        assert _rel(approx.throughput, exact.throughput) < 0.05
        _check_laws(approx, D, N, Z, np.ones(3))


def test_amva_seidmann_multiserver_close_to_exact():
    D = np.array([[0.4], [0.05]])
    for users in (5, 20, 100, 400):
        exact = mva(D, [users], [1.0], [4, 1])
        approx = amva(D, [users], [1.0], [4, 1])
        assert _rel(approx.throughput, exact.throughput) < 0.1     # worst near the knee
    assert exact.throughput[0] == pytest.approx(10.0, rel=1e-12)    # c / D at saturation
    assert approx.throughput[0] == pytest.approx(10.0, rel=1e-3)


def test_amva_large_model_converges_to_tolerance():
    rng = np.random.default_rng(1)
    D = rng.uniform(0.001, 0.02, (4, 5))
    N = np.full(5, 1000)
    Z = rng.uniform(1, 10, 5)
    res = amva(D, N, Z, tol=1e-8)
    assert res.converged and res.iterations < 10_000
    # the fixed point: one more iteration moves nothing by more than the tolerance
    Q = res.queue_length
    A = Q.sum(axis=1, keepdims=True) - Q / N
    X = N / (Z + (D * (1 + A)).sum(axis=0))
    assert np.max(np.abs(X * D * (1 + A) - Q) / N) < 1e-7
    _check_laws(res, D, N, Z, np.ones(4))


def test_amva_non_convergence_is_flagged():
    res = amva(np.array([[0.05, 0.02], [0.03, 0.04]]), [100, 80], [1.0, 1.0], max_iter=2)
    assert not res.converged and res.iterations == 2
    assert any("did not converge" in f for f in res.flags)
    assert not np.any(np.isnan(res.queue_length))


_entries = st.one_of(st.floats(-1.0, 2.0), st.sampled_from([0.0, math.inf, -math.inf, math.nan]))


@settings(max_examples=80, deadline=None)
@given(st.lists(_entries, min_size=1, max_size=4),
       st.lists(st.one_of(st.integers(-1, 4).map(float), st.sampled_from([math.nan, 1.5])),
                min_size=1, max_size=2),
       st.lists(_entries, min_size=1, max_size=2),
       st.lists(st.sampled_from([1.0, 2.0, 0.0, 1.5, math.inf, -1.0]), min_size=1, max_size=2))
def test_property_bad_input_raises_naming_the_argument_or_solves_cleanly(d, n, z, s):
    C = len(n)
    demands = np.resize(np.array(d), (len(s), C))
    for solver in (mva, amva):
        try:
            res = solver(demands, n, z, s)
        except ValueError as exc:
            assert str(exc).split(":")[0] in {"demands", "populations", "think_times", "servers"}
            continue
        for a in (res.throughput, res.residence_time, res.queue_length, res.utilization):
            assert not np.any(np.isnan(a))


@pytest.mark.parametrize("solver", [mva, amva])
def test_a_cycle_too_short_for_a_double_is_unbounded_and_flagged_not_nan(solver):
    """A subnormal demand with no think time makes ``N / (Z + sum D)`` overflow: the class is
    unbounded and flagged, as a zero demand is; nothing is NaN (found by the property test)."""
    res = solver([[5e-324, 5e-324]], [0, 1], [0, 0], [1])
    assert res.throughput[1] == math.inf and res.throughput[0] == 0.0
    assert np.all(res.queue_length == 0.0)
    assert any("class 1" in f and "unbounded" in f for f in res.flags)
    tiny = solver([[1e-300, 2e-3]], [3, 1], [0, 0], [1])          # small but representable
    assert np.isfinite(tiny.throughput).all() and tiny.queue_length[0, 0] == pytest.approx(3.0)


def test_mva_curves_side_by_side_equal_mva_curve_bit_for_bit():
    """Solving many models together (the pipeline solves every system of a round at once)
    gives exactly each model's own ``mva_curve``: no dependence on what is solved with it."""
    from solvers.mva import BATCH_MIN, mva_curves

    rng = np.random.default_rng(17)
    specs = []
    for _ in range(3 * BATCH_MIN + 2):
        M = int(rng.choice([1, 2, 3, 3, 5]))
        D = np.exp(rng.normal(np.log(3e-3), 0.6, M))
        servers = rng.choice([1.0, 2.0, 4.0, np.inf], M)
        specs.append((D, int(rng.integers(0, 700)), float(rng.uniform(0, 2)), servers))
    curves = mva_curves(*[list(x) for x in zip(*specs)])
    for (D, n, z, servers), got in zip(specs, curves):
        want = mva_curve(D, n, z, servers)
        for name in ("throughput", "response_time", "residence_time", "utilization"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), name)
        assert got.approximate == want.approximate and got.max_population == n
