"""The single-class MVA with general service (:mod:`solvers.mva_general`): exact MVA at SCV 1,
the Pollaczek-Khinchine mean in the open limit, the simulated closed system, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.mva import mva_curve
from solvers.mva_general import mva_curve_general
from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical
from solvers.simulation.shapes import CorrelatedService


def test_scv_one_is_exact_mva_bit_for_bit():
    D, c = [0.03, 0.04, 0.2], [2, 1, 8]
    a = mva_curve(D, 300, 4.0, c)
    b = mva_curve_general(D, 300, 4.0, c, [1.0, 1.0, 1.0])
    assert np.array_equal(a.residence_time, b.residence_time)
    assert np.array_equal(a.throughput, b.throughput)
    assert b.approximate


@pytest.mark.parametrize("scv", [0.0, 4.0, 9.0])
def test_open_limit_is_pollaczek_khinchine(scv):
    # many users thinking long: Poisson arrivals at rate N/Z to one FCFS server
    S, rho, N = 0.01, 0.6, 20_000
    curve = mva_curve_general([S], N, N * S / rho, [1], [scv])
    R, u = curve.residence_time[N, 0], curve.throughput[N] * S
    assert R == pytest.approx(S * (1 + u * (scv - 1) / 2) / (1 - u), rel=1e-3)


def test_residence_rises_with_the_scv_and_one_user_waits_for_nobody():
    curves = [mva_curve_general([0.03, 0.04], 60, 1.0, [2, 1], [1.0, v]) for v in (1, 2, 4, 8)]
    at = [c.residence_time[40, 1] for c in curves]
    assert at == sorted(at) and at[-1] > 1.3 * at[0]
    for c in curves:
        assert c.residence_time[1, 1] == pytest.approx(0.04)


@pytest.mark.slow
def test_against_the_simulated_closed_system_with_lognormal_service():
    # one-core database of lognormal service (SCV 4) behind a 2-core front, 30 users at ~40%
    service = CorrelatedService("lognormal", 1.0, 4.0, 0.0).scaled(0.040)
    net = PhysicalNetwork((Tier("front", 2, 0.032), Tier("db", 1, service)), ("a",), (1.0,),
                          4.0, 30)
    sim = simulate_physical(net, 6000.0, warmup=300.0, replications=2, seed=11)
    measured = sim.total_response_time.mean
    general = mva_curve_general([0.032, 0.040], 30, 4.0, [2, 1], [1.0, 4.0])
    exponential = mva_curve([0.032, 0.040], 30, 4.0, [2, 1])
    assert general.response_time[30] == pytest.approx(measured, rel=0.08)
    assert exponential.response_time[30] < 0.85 * measured


@pytest.mark.parametrize("scv, match", [([1.0], "one per station"), ([1.0, -1.0], "station 1"),
                                        ([1.0, float("nan")], "station 1")])
def test_bad_scv_is_named(scv, match):
    with pytest.raises(ValueError, match=match):
        mva_curve_general([0.01, 0.02], 5, 1.0, [1, 1], scv)


def _listed(D, N, Z, c, scv):
    """The recursion written plainly, a loop over the stations inside the loop over ``n``:
    what the compiled recursion must give bit for bit."""
    from solvers.mva import queueing_split
    D, c = np.asarray(D, dtype=float), np.asarray(c, dtype=float)
    queue_d, fixed, extra = queueing_split(D, c)
    d, h = queue_d.tolist(), [0.5 * (v - 1.0) for v in scv]
    q, u, rows = [0.0] * len(d), [0.0] * len(d), [D]
    for n in range(1, N + 1):
        r = [d[m] * (1.0 + q[m] + u[m] * h[m]) for m in range(len(d))]
        total = sum(r) + fixed
        x = n / (Z + total) if Z + total > 0 else float("inf")
        q, u = [x * rm for rm in r], [x * dm for dm in d]
        rows.append(np.array(r) + extra)
    return np.array(rows)


def _random_specs(count):
    rng = np.random.default_rng(23)
    specs = []
    for _ in range(count):
        M = int(rng.choice([1, 2, 3, 3, 5]))
        D = np.exp(rng.normal(np.log(3e-3), 0.6, M))
        servers = rng.choice([1.0, 2.0, 4.0, np.inf], M)
        scv = np.where(rng.random(M) < 0.5, 1.0, np.exp(rng.uniform(-2, 4, M)))
        specs.append((D, int(rng.integers(0, 500)), float(rng.uniform(0, 2)), servers, scv))
    return specs


def test_compiled_recursion_equals_the_plain_loop_bit_for_bit():
    for D, n, z, servers, scv in _random_specs(12):
        got = mva_curve_general(D, n, z, servers, scv).residence_time
        np.testing.assert_array_equal(got, _listed(D, n, z, servers, scv.tolist()))


def test_curves_side_by_side_equal_each_curve_bit_for_bit():
    """Solving many models together (the pipeline solves every system of a round at once)
    gives exactly each model's own curve: no dependence on what is solved with it."""
    from solvers.mva import BATCH_MIN
    from solvers.mva_general import mva_curves_general

    specs = _random_specs(3 * BATCH_MIN + 2)
    curves = mva_curves_general(*[list(x) for x in zip(*specs)])
    for (D, n, z, servers, scv), got in zip(specs, curves):
        want = mva_curve_general(D, n, z, servers, scv)
        for name in ("throughput", "response_time", "residence_time", "utilization"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), name)
        assert got.approximate == want.approximate and got.max_population == n


def test_curves_side_by_side_at_scv_one_equal_exact_mva_bit_for_bit():
    """The pipeline solves exponential models in the general batch when a model with general
    service is among them: at SCV 1 each is exact MVA's curve."""
    from solvers.mva import mva_curve
    from solvers.mva_general import mva_curves_general

    specs = [(D, n, z, servers, np.ones(len(D))) for D, n, z, servers, _ in _random_specs(20)]
    curves = mva_curves_general(*[list(x) for x in zip(*specs)])
    for (D, n, z, servers, _), got in zip(specs, curves):
        want = mva_curve(D, n, z, servers)
        for name in ("throughput", "response_time", "residence_time", "utilization"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), name)


@pytest.mark.parametrize("D, c, Z", [([0.05], [1], 1.0), ([0.03, 0.04, 0.2], [2, 1, np.inf], 4.0),
                                     ([0.01, 0.02], [4, 1], 0.0)])
def test_rows_are_the_curves_rows_bit_for_bit(D, c, Z):
    """``general_rows``: the top rows (kept alone) and any others are the curve's, exactly."""
    from solvers.mva_general import general_rows

    rows = general_rows(D, Z, c)
    for scv in (np.ones(len(D)), np.linspace(0.2, 9.0, len(D))):
        for N in (1, 2, 57):
            want = mva_curve_general(D, N, Z, c, scv).residence_time
            for populations in ([N], [N, N - 1], [N - 1], [1, N]):
                populations = [n for n in populations if n >= 1]
                for n, got in zip(populations, rows(scv, N, populations)):
                    assert got.shape == want[n].shape and np.array_equal(got, want[n])
