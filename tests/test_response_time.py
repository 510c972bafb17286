"""Response-time distributions (solvers.response_time) against closed forms: M/M/1 and M/M/c
sojourn times (Kleinrock 1975), a closed FCFS station by a CTMC passage-time computation, and
line-solver's product-form sojourn law (McKenna 1987's method, ``pfqn_stdf``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import linalg, optimize

from solvers.mva import mva_curve
from solvers.response_time import (arrival_marginals, end_to_end, response_time_quantiles,
                                   sojourn_cdf, tier_wait)

# after perfcast's packages: line_solver puts a ``solvers`` of its own on sys.path (conftest)
from line_solver.api.pfqn.stdf import pfqn_stdf  # isort: skip  # noqa: E402

LEVELS = np.array([0.5, 0.9, 0.95, 0.99, 0.999])


def _quantiles_of(survival, levels, hi):
    return np.array([optimize.brentq(lambda t: 1.0 - survival(t) - q, 0.0, hi, xtol=1e-12)
                     for q in levels])


def test_mm1_sojourn_is_exponential_of_rate_mu_minus_lambda():
    lam, mu = 7.0, 10.0
    rho = lam / mu
    j = np.arange(400)
    found = (1 - rho) * rho ** j                        # PASTA: the stationary law
    wait = tier_wait(0, found, 1.0 / mu, 1)
    exact = -np.log(1.0 - LEVELS) / (mu - lam)
    [dist] = end_to_end([wait], np.array([[1.0 / mu]]))
    assert np.allclose(dist.quantile(LEVELS), exact, rtol=2e-3)
    t = np.linspace(0.01, 2.0, 50)
    assert np.allclose(sojourn_cdf(wait, 1.0 / mu, t), 1.0 - np.exp(-(mu - lam) * t),
                       atol=1e-10)


@pytest.mark.parametrize("c, rho", [(2, 0.6), (4, 0.9), (8, 0.7)])
def test_mmc_sojourn_matches_the_erlang_c_mixture(c, rho):
    mu = 1.0
    lam = rho * c * mu
    a = lam / mu
    j = np.arange(2000)
    logp = np.where(j < c, j * math.log(a) - np.array([math.lgamma(x + 1) for x in j]),
                    j * math.log(a) - math.lgamma(c + 1) - (j - c) * math.log(c))
    found = np.exp(logp - logp.max())
    found /= found.sum()
    erlang_c = found[c:].sum()
    alpha = c * mu - lam

    def survival(t):   # (1 - C) e^{-mu t} + C P(Exp(alpha) + Exp(mu) > t), Kleinrock 1975
        hypo = (alpha * math.exp(-mu * t) - mu * math.exp(-alpha * t)) / (alpha - mu)
        return (1 - erlang_c) * math.exp(-mu * t) + erlang_c * hypo

    exact = _quantiles_of(survival, LEVELS, 200.0)
    wait = tier_wait(0, found, 1.0 / mu, c)
    [dist] = end_to_end([wait], np.array([[1.0 / mu]]))
    assert np.allclose(dist.quantile(LEVELS), exact, rtol=3e-3)
    t = np.linspace(0.05, 10.0, 40)
    assert np.allclose(sojourn_cdf(wait, 1.0 / mu, t), [1 - survival(x) for x in t],
                       atol=1e-9)


def _repairman_passage_cdf(N, Z, D, c, t):
    """A closed FCFS station of ``c`` exponential servers (mean ``D``) and ``N`` users thinking
    ``Z``: the stationary birth-death chain, the law an arrival finds (rate-weighted,
    ``(N - j)/Z pi(j)``), and the tagged job's passage to its departure as an absorbing chain
    over the jobs ahead of it (``expm``)."""
    lam = (N - np.arange(N + 1)) / Z
    mu = np.minimum(np.arange(N + 1), c) / D
    pi = np.ones(N + 1)
    for j in range(1, N + 1):
        pi[j] = pi[j - 1] * lam[j - 1] / mu[j]
    pi /= pi.sum()
    seen = lam[:N] * pi[:N]
    seen /= seen.sum()
    # states: jobs ahead 0..N-1; with fewer than c ahead the tagged job is in service
    Q = np.zeros((N, N))
    for a in range(N):
        if a >= c:
            Q[a, a - 1] = c / D
            Q[a, a] = -c / D
        else:
            Q[a, a] = -1.0 / D
    return np.array([1.0 - seen @ linalg.expm(Q * x) @ np.ones(N) for x in t])


@pytest.mark.parametrize("N, c", [(12, 1), (30, 4), (25, 8)])
def test_closed_station_matches_the_ctmc_passage_time(N, c):
    Z, D = 1.0, 0.25 * c
    t = np.linspace(0.05, 4.0 * D * max(1, N / c), 25)
    exact = _repairman_passage_cdf(N, Z, D, c, t)
    marg = arrival_marginals(np.array([D]), np.array([float(c)]), Z, N)
    wait = tier_wait(marg.offset[0], marg.pmf[0], D, c)
    assert np.allclose(sojourn_cdf(wait, D, t), exact, atol=1e-9)
    q = response_time_quantiles(np.array([D]), np.array([float(c)]), Z, N,
                                levels=(0.5, 0.95, 0.99))
    cdf_at_q = _repairman_passage_cdf(N, Z, D, c, q.quantiles[0])
    assert np.allclose(cdf_at_q, [0.5, 0.95, 0.99], atol=2e-4)
    assert q.mean[0] == pytest.approx(mva_curve([D], N, Z, [c]).response_time[N], rel=1e-9) \
        if c == 1 else True


@pytest.mark.slow
@pytest.mark.parametrize("servers", [(1, 1, 1), (1, 3, 1)])
def test_tier_sojourns_match_line_solver_product_form_law(servers):
    D = np.array([0.04, 0.1, 0.06])
    S = np.array(servers, dtype=float)
    N, Z = 10, 1.0
    t = np.linspace(0.02, 3.0, 12)
    line = pfqn_stdf(D[:, None], np.array([N]), np.array([Z]), S.astype(int),
                     np.arange(3), 1.0 / D[:, None], t)
    marg = arrival_marginals(D, S, Z, N)
    for m in range(3):
        # exact where the other tiers have one core (Seidmann's approximation otherwise)
        assert marg.approximate[m] == bool(np.any(np.delete(S, m) > 1))
        if marg.approximate[m]:
            continue
        wait = tier_wait(marg.offset[m], marg.pmf[m], float(D[m]), float(S[m]))
        assert np.allclose(sojourn_cdf(wait, float(D[m]), t), line[(m, 0)][:, 0], atol=1e-6)


def test_one_queueing_tier_end_to_end_is_its_closed_form():
    D = np.array([0.2, 0.05])
    S = np.array([2.0, math.inf])                 # a tier and a delay stage
    marg = arrival_marginals(D, S, 0.5, 15)
    waits = [tier_wait(marg.offset[m], marg.pmf[m], float(D[m]), float(S[m])) for m in range(2)]
    [dist] = end_to_end(waits, D[:, None])
    # the tier's closed form convolved numerically with the delay's exponential
    t = np.linspace(0, 8, 16001)
    f1 = np.gradient(sojourn_cdf(waits[0], 0.2, t), t)
    F2 = 1 - np.exp(-t / 0.05)
    dt = t[1] - t[0]
    conv = np.array([np.sum(f1[:i + 1] * F2[i::-1]) * dt for i in range(0, 16001, 400)])
    assert np.allclose(dist.at(t[::400]), conv, atol=3e-3)
    assert dist.mean == pytest.approx(waits[0].mean() + 0.25, rel=1e-12)


def test_shares_and_class_services_move_each_class_as_stated():
    D = np.array([0.1, 0.2])
    S = np.array([1.0, 1.0])
    marg = arrival_marginals(D, S, 1.0, 20)
    waits = [tier_wait(marg.offset[m], marg.pmf[m], float(D[m]), 1.0) for m in range(2)]
    Dmc = np.array([[0.1, 0.1], [0.2, 0.2]])
    shares = np.array([[1.0, 2.0], [1.0, 2.0]])
    one, two = end_to_end(waits, Dmc, shares)
    w = sum(x.mean() for x in waits)
    assert two.mean - one.mean == pytest.approx(w, rel=1e-12)
    assert np.all(two.quantile(LEVELS) > one.quantile(LEVELS))


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="population"):
        arrival_marginals(np.array([0.1]), np.array([1.0]), 1.0, 0)
    with pytest.raises(ValueError, match="levels"):
        response_time_quantiles(np.array([0.1]), np.array([1.0]), 1.0, 5, levels=(0.5, 1.0))
    with pytest.raises(ValueError, match="found_pmf"):
        tier_wait(0, np.array([np.nan]), 0.1, 1)
    with pytest.raises(ValueError, match="demands"):
        arrival_marginals(np.array([-0.1]), np.array([1.0]), 1.0, 5)


def _map_repairman_passage_cdf(proc, N, Z, t):
    """A closed station with MAP service (one core) and ``N`` users thinking ``Z``: the
    stationary chain over (jobs, phase), the law an arrival finds (rate ``(N - n)/Z``), and the
    tagged job's passage to its own completion as an absorbing chain over (completions still
    to come, phase), ``expm``."""
    k = proc.order
    D0, D1 = proc.D0, proc.D1
    S = (N + 1) * k
    Q = np.zeros((S, S))
    for n in range(N + 1):
        i = slice(n * k, (n + 1) * k)
        if n < N:
            Q[i, (n + 1) * k:(n + 2) * k] += np.eye(k) * (N - n) / Z
        if n > 0:
            Q[i, i] += D0
            Q[i, (n - 1) * k:n * k] += D1
    Q -= np.diag(Q.sum(axis=1))
    A = np.vstack([Q.T, np.ones(S)])
    pi = np.linalg.lstsq(A, np.r_[np.zeros(S), 1.0], rcond=None)[0]
    seen = np.array([pi[n * k:(n + 1) * k] * (N - n) / Z for n in range(N)])
    seen /= seen.sum()
    T = np.zeros((N * k, N * k))                  # level r = completions to come, 1..N
    for r in range(N):
        i = slice(r * k, (r + 1) * k)
        T[i, i] = D0
        if r > 0:
            T[i, (r - 1) * k:r * k] = D1
    alpha = seen.ravel()                          # found n ahead: n + 1 completions to come
    return np.array([1.0 - alpha @ linalg.expm(T * x) @ np.ones(N * k) for x in t])


def test_a_bursty_station_matches_the_ctmc_passage_time():
    from solvers.processes import MAP
    from solvers.response_time.mapnet import map_network_quantiles

    proc = MAP([[-3.5, 2.0], [2.0, -2.5]], [[1.5, 0.0], [0.0, 0.5]]).scaled(0.2)
    N, Z = 8, 1.0
    levels = (0.5, 0.9, 0.99)
    q, mean = map_network_quantiles([proc], N, Z, [1], np.ones((1, 1)), np.ones((1, 1)),
                                    levels)
    assert np.allclose(_map_repairman_passage_cdf(proc, N, Z, q[0]), levels, atol=2e-3)
