"""The windowed lattice's quantiles (solvers.response_time.window) against closed forms: the
M/M/1 sojourn (exponential of rate ``mu - lambda``) and the M/M/c sojourn (Erlang C mixture,
Kleinrock 1975), sums of Erlangs of different rates far from 0 (the window moved off the
origin), and the long lattice of solvers.response_time.sojourn on networks near the knee."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from solvers.response_time import ArrivalLaw, tier_wait
from solvers.response_time.sojourn import TierWait, checked_services, lattice_quantiles, \
    tier_wait_checked, wait_laws
from solvers.response_time.window import _kernel_transform, _share_rows, window_quantiles

LEVELS = np.array([0.5, 0.9, 0.95, 0.99, 0.999])


def test_mm1_sojourn_quantiles_are_the_exponentials():
    lam, mu = 7.0, 10.0
    rho = lam / mu
    found = (1 - rho) * rho ** np.arange(400)           # PASTA: the stationary law
    q, means = window_quantiles([[tier_wait(0, found, 1.0 / mu, 1)]], np.array([[1.0 / mu]]),
                                np.ones((1, 1)), LEVELS)
    exact = -np.log(1.0 - LEVELS) / (mu - lam)
    assert np.allclose(q[0, 0], exact, rtol=3e-3)
    assert means[0, 0] == pytest.approx(1.0 / (mu - lam), rel=1e-9)


@pytest.mark.parametrize("c, rho", [(2, 0.6), (4, 0.9), (8, 0.7)])
def test_mmc_sojourn_quantiles_are_the_erlang_c_mixtures(c, rho):
    mu, lam = 1.0, rho * c
    j = np.arange(2000)
    logp = np.where(j < c, j * math.log(lam) - np.array([math.lgamma(x + 1) for x in j]),
                    j * math.log(lam) - math.lgamma(c + 1) - (j - c) * math.log(c))
    found = np.exp(logp - logp.max())
    found /= found.sum()
    erlang_c, alpha = found[c:].sum(), c * mu - lam

    def cdf(t):   # 1 - [(1 - C) e^{-mu t} + C P(Exp(alpha) + Exp(mu) > t)]
        hypo = (alpha * math.exp(-mu * t) - mu * math.exp(-alpha * t)) / (alpha - mu)
        return 1.0 - (1 - erlang_c) * math.exp(-mu * t) - erlang_c * hypo

    exact = [optimize.brentq(lambda t: cdf(t) - p, 0.0, 200.0, xtol=1e-12) for p in LEVELS]
    q, _ = window_quantiles([[tier_wait(0, found, 1.0 / mu, c)]], np.array([[1.0 / mu]]),
                            np.ones((1, 1)), LEVELS)
    assert np.allclose(q[0, 0], exact, rtol=3e-3)


@pytest.mark.parametrize("k1, r1, k2, r2", [(3, 2.0, 5, 7.0), (400, 50.0, 900, 200.0)])
def test_erlang_convolutions_far_from_zero(k1, r1, k2, r2):
    """``Erlang(k1, r1) + Erlang(k2, r2)``: two waits of a fixed number of phases, no service;
    the second pair's law sits ~18 standard deviations from 0 (the window starts there)."""
    waits = [[TierWait(rate=r1, offset=k1, pmf=np.ones(1)),
              TierWait(rate=r2, offset=k2, pmf=np.ones(1))]]
    q, means = window_quantiles(waits, np.zeros((2, 1)), np.ones((2, 1)), LEVELS)
    a, b = stats.gamma(k1, scale=1 / r1), stats.gamma(k2, scale=1 / r2)
    mean, sd = a.mean() + b.mean(), math.hypot(a.std(), b.std())

    x = np.linspace(max(a.mean() - 14 * a.std(), 0.0), a.mean() + 14 * a.std(), 40001)
    fa = a.pdf(x)

    def cdf(t):                         # P(A + B <= t) = E[F_B(t - A)], trapezoid over A
        return integrate.trapezoid(fa * b.cdf(t - x), x)

    exact = [optimize.brentq(lambda t: cdf(t) - p, mean - 8 * sd, mean + 12 * sd, xtol=1e-12)
             for p in LEVELS]
    assert np.allclose(q[0, 0], exact, rtol=5e-4)
    assert means[0, 0] == pytest.approx(mean, rel=1e-12)


@pytest.mark.parametrize("servers, fractions", [([1.0, 1.0], (0.2, 1.0, 1.5)),
                                                ([4.0, 4.0, 8.0], (0.5, 1.1, 3.0))])
def test_windowed_quantiles_are_a_fine_long_lattices(servers, fractions):
    """Against the long lattice at 16 times its points (its own error, the per-phase kernel's,
    is then below 1e-3): within 0.6% at every level, two classes, light load to 3 knees."""
    D = np.array([0.0045, 0.004, 0.016])[:len(servers)]
    c = np.array(servers)
    Dmc = np.c_[D, 1.6 * D]
    share = np.c_[np.ones(len(servers)), np.full(len(servers), 0.8)]
    knee = (D.sum() + 0.5) / (D / c).max()
    pops = [max(int(f * knee), 1) for f in fractions]
    law = ArrivalLaw(D, c, 0.5)
    waits = [[tier_wait_checked(mg.offset[m], mg.pmf[m], float(D[m]), float(c[m]))
              for m in range(len(D))] for mg in (law.marginals(n) for n in pops)]
    S, sh = checked_services(len(D), Dmc, share)
    q, means = window_quantiles(waits, S, sh, LEVELS)
    for i, (h, cdf, mean) in enumerate(wait_laws(waits, S, sh, 16384)):
        fine = lattice_quantiles(np.repeat(h, 2), cdf, LEVELS)
        assert np.abs(q[i] / fine - 1.0).max() < 6e-3
        assert np.allclose(means[i], mean, rtol=1e-12)


@pytest.mark.parametrize("x", [1e-3, 0.1, 1.0, 30.0])
def test_kernel_transform_is_its_masses_rfft(x):
    """The kernel's closed-form transform, in real arithmetic, is the ``rfft`` of its masses
    (``1 + (e^{-x} - 1)/x`` at 0, ``e^{-x(i-1)} (1 - e^{-x})^2 / x`` at ``i >= 1``) folded on
    the lattice: the geometric tail wraps around."""
    size = 16
    i = np.arange(1, int(60 / x) + size)
    masses = np.zeros(size)
    masses[0] = 1.0 + math.expm1(-x) / x
    np.add.at(masses, i % size, np.exp(-x * (i - 1)) * math.expm1(-x) ** 2 / x)
    got = _kernel_transform(np.array([[x]]), size)[0]
    assert np.allclose(got, np.fft.rfft(masses), rtol=0, atol=1e-13)


def test_share_rows_one_row_per_distinct_share():
    """A tier's classes with one share meet one row; a share of 0, or a wait nobody meets
    in that set (``met`` false), points at the row past the last (1: no wait)."""
    met = np.array([[True, True, True], [False, True, True]])
    sh = np.array([[1.0, 1.0, 1.0], [0.5, 2.0, 0.5], [0.0, 1.0, 1.0]])
    u_i, u_m, share, use, index = _share_rows(met, sh)
    assert use is None
    assert u_i.tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert u_m.tolist() == [0, 1, 1, 2, 1, 1, 2]
    assert share.tolist() == [1.0, 0.5, 2.0, 1.0, 0.5, 2.0, 1.0]
    assert index.tolist() == [[[0, 0, 0], [1, 2, 1], [7, 3, 3]],
                              [[7, 7, 7], [4, 5, 4], [7, 6, 6]]]
