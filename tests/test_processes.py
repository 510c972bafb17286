"""The MAP type (solvers.processes) against closed forms, line-solver and simulation."""

import json
import math

import numpy as np
import pytest

# perfcast's packages before line_solver, which puts its own `solvers` on sys.path (conftest.py)
from solvers.processes import MAP
from line_solver.api.mam import map_analysis as ls  # noqa: E402


def _random_map(rng: np.random.Generator, order: int = 2) -> MAP:
    """A random MAP: off-diagonal D0 rates and D1 rates uniform, mean in [0.01, 100]."""
    d0 = rng.uniform(0.0, 2.0, (order, order))
    d1 = rng.uniform(0.0, 3.0, (order, order))
    np.fill_diagonal(d0, 0.0)
    np.fill_diagonal(d0, -(d0.sum(axis=1) + d1.sum(axis=1)))
    scale = 10.0 ** rng.uniform(-2.0, 2.0)
    return MAP(d0 / scale, d1 / scale)


def _bursty_map2(scv: float, gamma: float, p: float = 0.2, mean: float = 1.0) -> MAP:
    """Hyperexponential MAP(2): D0 = diag(-1/m), D1 = diag(1/m) ((1-gamma) 1 alpha + gamma I)."""
    t = math.sqrt((scv - 1.0) / 2.0)
    m = np.array([1.0 - t * math.sqrt(p / (1.0 - p)), 1.0 + t * math.sqrt((1.0 - p) / p)])
    assert m[0] > 0
    alpha = np.array([1.0 - p, p])
    jump = (1.0 - gamma) * np.outer(np.ones(2), alpha) + gamma * np.eye(2)
    return MAP(-np.diag(1.0 / m) / mean, (jump / m[:, None]) / mean)


RANDOM_MAP2 = [_random_map(np.random.default_rng(seed)) for seed in range(12)]
BURSTY_MAP2 = [_bursty_map2(3.0, 0.5), _bursty_map2(10.0, 0.99, p=0.05, mean=0.02),
               _bursty_map2(1.5, -0.1, p=0.3, mean=40.0)]


# ----------------------------------------------------------------------------- vs line-solver
@pytest.mark.parametrize("process", RANDOM_MAP2 + BURSTY_MAP2)
def test_descriptors_agree_with_line_solver(process):
    d0, d1 = process.D0, process.D1
    assert process.idc == pytest.approx(ls.map_idc(d0, d1), rel=1e-9)
    assert process.scv == pytest.approx(ls.map_scv(d0, d1), rel=1e-9)
    assert process.mean == pytest.approx(ls.map_mean(d0, d1), rel=1e-9)
    lags = np.arange(1, 6)
    np.testing.assert_allclose(process.acf(lags), ls.map_acf(d0, d1, lags), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_order3_descriptors_agree_with_line_solver(seed):
    process = _random_map(np.random.default_rng(100 + seed), order=3)
    assert process.idc == pytest.approx(ls.map_idc(process.D0, process.D1), rel=1e-9)
    assert process.scv == pytest.approx(ls.map_scv(process.D0, process.D1), rel=1e-9)


@pytest.mark.parametrize("process", RANDOM_MAP2[:4] + BURSTY_MAP2)
def test_cdf_agrees_with_line_solver(process):
    points = process.mean * np.array([0.01, 0.3, 1.0, 2.5, 7.0])
    np.testing.assert_allclose(process.cdf(points), ls.map_cdf(process.D0, process.D1, points),
                               rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("process", RANDOM_MAP2 + BURSTY_MAP2)
def test_idc_equals_eq1_summed_and_map2_identities(process):
    # eq. (1): I = SCV (1 + 2 sum_k rho_k), the sum truncated where gamma^k is negligible
    gamma = process.decay
    k_max = 50 if abs(gamma) < 0.5 else int(math.log(1e-14) / math.log(abs(gamma))) + 1
    rho = process.acf(np.arange(1, k_max + 1))
    assert process.idc == pytest.approx(process.scv * (1.0 + 2.0 * rho.sum()), rel=1e-7)
    # MAP(2): rho_k = rho_1 gamma^(k-1), rho_1 = gamma (SCV-1)/(2 SCV), I = 1 + (SCV-1)/(1-gamma)
    np.testing.assert_allclose(rho[:5], rho[0] * gamma ** np.arange(5), rtol=1e-7, atol=1e-13)
    assert rho[0] == pytest.approx(gamma * (process.scv - 1) / (2 * process.scv), abs=1e-12)
    assert process.idc == pytest.approx(1 + (process.scv - 1) / (1 - gamma), rel=1e-9)


def test_bursty_map2_has_the_designed_descriptors():
    process = _bursty_map2(10.0, 0.99, p=0.05, mean=0.02)
    assert process.mean == pytest.approx(0.02, rel=1e-12)
    assert process.scv == pytest.approx(10.0, rel=1e-9)
    assert process.decay == pytest.approx(0.99, rel=1e-12)
    assert process.idc == pytest.approx(1 + 9.0 / 0.01, rel=1e-8)


@pytest.mark.parametrize("mean", [0.003, 1.0, 250.0])
def test_exponential_closed_forms(mean):
    process = MAP.exponential(mean)
    assert process.order == 1
    assert process.mean == pytest.approx(mean, rel=1e-12)
    assert process.scv == pytest.approx(1.0, rel=1e-12)
    assert process.idc == pytest.approx(1.0, rel=1e-12)
    for q in (0.05, 0.5, 0.95):
        assert process.quantile(q) == pytest.approx(-mean * math.log(1 - q), rel=1e-10)


@pytest.mark.parametrize("process", RANDOM_MAP2[:6] + BURSTY_MAP2)
def test_quantile_inverts_cdf(process):
    for q in (0.01, 0.5, 0.95, 0.999):
        x = process.quantile(q)
        assert x > 0
        assert process.cdf(x) == pytest.approx(q, abs=1e-10)
    assert process.quantile(0.5) < process.quantile(0.95)


def test_moments_of_hyperexponential_marginal():
    process = _bursty_map2(3.0, 0.5, p=0.2, mean=2.0)
    t = math.sqrt(1.0)
    m = 2.0 * np.array([1 - t * math.sqrt(0.25), 1 + t * math.sqrt(4.0)])
    w = np.array([0.8, 0.2])
    for k in (1, 2, 3):
        assert process.moment(k) == pytest.approx(math.factorial(k) * (w @ m**k), rel=1e-10)


# ----------------------------------------------------------------------------- transformations
@pytest.mark.parametrize("process", RANDOM_MAP2[:4] + BURSTY_MAP2)
def test_scaled_keeps_scv_idc_and_acf(process):
    other = process.scaled(7.5)
    assert other.mean == pytest.approx(7.5, rel=1e-9)
    assert other.scv == pytest.approx(process.scv, rel=1e-9)
    assert other.idc == pytest.approx(process.idc, rel=1e-9)
    assert other.decay == pytest.approx(process.decay, abs=1e-12)
    np.testing.assert_allclose(other.acf([1, 2, 3]), process.acf([1, 2, 3]), rtol=1e-8, atol=1e-13)
    assert other.quantile(0.95) == pytest.approx(process.quantile(0.95) * 7.5 / process.mean,
                                                 rel=1e-9)


@pytest.mark.parametrize("process", RANDOM_MAP2[:3] + BURSTY_MAP2 + [MAP.exponential(0.4)])
def test_to_dict_round_trip(process):
    data = json.loads(json.dumps(process.to_dict()))
    again = MAP.from_dict(data)
    np.testing.assert_array_equal(again.D0, process.D0)
    np.testing.assert_array_equal(again.D1, process.D1)
    assert again.idc == process.idc


def test_from_dict_missing_key_names_it():
    with pytest.raises(ValueError, match="D1"):
        MAP.from_dict({"D0": [[-1.0]]})


# ----------------------------------------------------------------------------- simulation
def test_sample_moments_and_acf_match_analytic():
    process = _bursty_map2(3.0, 0.6, p=0.2, mean=0.5)
    x = process.sample(200_000, np.random.default_rng(2024))
    assert x.shape == (200_000,)
    assert np.all(x > 0)
    # standard error of the mean of a correlated stream: sqrt(I / n) relative
    se = math.sqrt(process.idc / x.size)
    assert x.mean() == pytest.approx(process.mean, rel=4 * se)
    assert x.var() / x.mean() ** 2 == pytest.approx(process.scv, rel=0.03)
    xc = x - x.mean()
    emp = [float(xc[:-k] @ xc[k:] / (xc @ xc)) for k in (1, 2, 5)]
    np.testing.assert_allclose(emp, process.acf([1, 2, 5]), atol=0.015)
    assert process.acf(1) > 0.15  # the check above is not trivially satisfied by zeros


def test_sample_is_reproducible_and_respects_start_phase():
    process = _bursty_map2(10.0, 0.999, p=0.05)
    a = process.sample(500, np.random.default_rng(7))
    b = process.sample(500, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    # with gamma = 0.999 the first intervals stay in the starting phase: slow vs fast
    slow = process.sample(50, np.random.default_rng(8), phase=1).mean()
    fast = process.sample(50, np.random.default_rng(8), phase=0).mean()
    assert slow > 5 * fast
    assert process.sample(0, np.random.default_rng(1)).shape == (0,)


def test_exponential_sample_mean():
    x = MAP.exponential(2.0).sample(100_000, np.random.default_rng(3))
    assert x.mean() == pytest.approx(2.0, rel=4 / math.sqrt(x.size))


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "d0, d1, name",
    [
        ([[-1.0, 0.5]], [[0.5, 0.0]], "D0"),  # not square
        ([[-1.0, 0.5], [0.5, -1.0]], [[0.5]], "D0 and D1"),  # shapes differ
        ([[-1.0, -0.5], [0.5, -1.0]], [[1.5, 0.0], [0.0, 0.5]], "D0"),  # negative off-diagonal
        ([[0.0, 0.0], [0.0, -1.0]], [[0.0, 0.0], [0.0, 1.0]], "D0"),  # zero diagonal
        ([[-1.0, 0.0], [0.0, -1.0]], [[1.5, -0.5], [0.0, 1.0]], "D1"),  # negative rate
        ([[-1.0, 1.0], [1.0, -1.0]], [[0.0, 0.0], [0.0, 0.0]], "D1"),  # never completes
        ([[-1.0, 0.0], [0.0, -1.0]], [[0.5, 0.0], [0.0, 1.0]], "D0 \\+ D1"),  # rows != 0
        # two closed classes: every mix of (1, 0) and (0, 1) is stationary
        ([[-1.0, 0.0], [0.0, -2.0]], [[1.0, 0.0], [0.0, 2.0]], "D0 \\+ D1"),
        ([[float("nan")]], [[1.0]], "D0"),
        ([[-1.0]], [[float("inf")]], "D1"),
        ("abc", [[1.0]], "D0"),
        ([], [], "D0"),
    ],
)
def test_invalid_matrices_are_rejected_naming_the_field(d0, d1, name):
    with pytest.raises(ValueError, match=name):
        MAP(d0, d1)



SPARSE_MAP3 = MAP([[-2.0, 1.0, 0.0], [0.0, -0.5, 0.0], [0.25, 0.0, -3.0]],
                  [[1.0, 0.0, 0.0], [0.0, 0.0, 0.5], [0.0, 2.75, 0.0]])


@pytest.mark.parametrize("process", RANDOM_MAP2 + BURSTY_MAP2 + [SPARSE_MAP3])
@pytest.mark.parametrize("mean", [1e-9, 0.004, 1.0, 7.5, 3e7])
def test_scaled_skips_the_checks_and_sets_the_checked_fields(process, mean, monkeypatch):
    """A rescale of a valid MAP is valid: ``scaled`` sets the fields the checking constructor
    would, bit for bit, without running its checks (no stationary vector solved)."""
    factor = process.mean / mean
    checked = MAP(process.D0 * factor, process.D1 * factor)
    monkeypatch.setattr("solvers.processes.ctmc_stationary", _no_solve)
    other = process.scaled(mean)
    for a, b in ((other.D0, checked.D0), (other.D1, checked.D1)):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        assert not a.flags.writeable


def _no_solve(generator):
    raise AssertionError("scaled solved a stationary vector")


def test_a_rescale_that_under_or_overflows_a_rate_is_checked():
    weakly_coupled = MAP([[-1.0, 1e-20], [1e-20, -1.0]], [[1.0, 0.0], [0.0, 1.0]])
    assert weakly_coupled.scaled(1e300).D0[0, 1] > 0
    with pytest.raises(ValueError, match="D0 \\+ D1"):   # the coupling underflows to 0
        weakly_coupled.scaled(1e308)
    bursty = MAP([[-45.39, 0.39], [0.0082, -0.0982]], [[45.0, 0.0], [0.0, 0.09]])
    with pytest.raises(ValueError, match="D0"), np.errstate(over="ignore"):
        bursty.scaled(1e-307)                           # the fast phase's rate overflows

@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "x"])
def test_bad_means_are_rejected(bad):
    with pytest.raises(ValueError, match="mean"):
        MAP.exponential(bad)
    with pytest.raises(ValueError, match="mean"):
        BURSTY_MAP2[0].scaled(bad)


def test_bad_lags_and_quantile_levels_are_rejected():
    process = BURSTY_MAP2[0]
    with pytest.raises(ValueError, match="k"):
        process.acf(0)
    for q in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="q"):
            process.quantile(q)


def test_matrices_are_read_only():
    process = BURSTY_MAP2[0]
    with pytest.raises(ValueError):
        process.D0[0, 0] = -5.0


# ----------------------------------------------------------------------------- numerical range
# The stationary vector is computed by GTH elimination: no accuracy lost to the time unit or to
# rates spanning many decades.


def test_descriptors_are_invariant_under_a_change_of_time_unit():
    unit = RANDOM_MAP2[0].scaled(1.0)
    slow = MAP(unit.D0 / 1e10, unit.D1 / 1e10)  # same process, time in units 1e10 smaller
    assert slow.mean == pytest.approx(1e10 * unit.mean, rel=1e-9)
    assert slow.scv == pytest.approx(unit.scv, rel=1e-9)


def test_stationary_vector_is_accurate_for_stiff_generators():
    process = _bursty_map2(1e4, 0.999, p=1e-6)  # rates from ~1 down to ~1e-11
    m = -1.0 / np.diag(process.D0)
    p = process.D1 * m[:, None]  # P = M D1; for diagonal D0 its stationary vector is exact:
    alpha = np.array([p[1, 0], p[0, 1]]) / (p[1, 0] + p[0, 1])
    mean = float(alpha @ m)
    assert process.mean == pytest.approx(mean, rel=1e-9)
    assert process.scv == pytest.approx(float(2 * alpha @ m**2 / mean**2 - 1), rel=1e-9)
