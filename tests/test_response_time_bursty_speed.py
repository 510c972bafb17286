"""The bursty tiers' law's fast paths give what the long way gives: the tier's chain solved as a
band against the sparse LU and a birth-death chain's closed form, the waves' queue levels read by
blocks against one level at a time, the wait's moments by blocks against Erlang's closed form
and the level-by-level recursion, one kernel solve shared by a level's completions against
the kernel computed on its own and its closed-form total mass, the passage's blocked Horner
against the level-by-level sum, the kernel transfer from one Schur form against the DFT of its
masses, the band written from repeated entries against the summed matrix, and the per-job heads
kept between laws against heads built anew."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import sparse

import solvers.response_time.waves as waves
from solvers.linalg.anchored import anchored_stationary
from solvers.response_time.bursty import _banded_stationary
from solvers.response_time.mapnet import MOMENT_BLOCK, chain_kernel, chain_passage_moments, \
    chain_transfer


def _generator(rates: dict[tuple[int, int], float], size: int) -> sparse.csr_array:
    src, dst = zip(*rates)
    Q = sparse.csr_array((list(rates.values()), (src, dst)), shape=(size, size))
    return sparse.csr_array(Q - sparse.diags_array(np.asarray(Q.sum(axis=1)).ravel()))


def test_banded_stationary_is_the_birth_death_closed_form():
    lam, mu, top = 3.0, 4.0, 60                      # M/M/1/60: pi_n ~ (lam / mu)^n
    rates = {(n, n + 1): lam for n in range(top)} | {(n + 1, n): mu for n in range(top)}
    pi = _banded_stationary(_generator(rates, top + 1), 7)
    pi /= pi.sum()
    rho = lam / mu
    exact = rho ** np.arange(top + 1) * (1 - rho) / (1 - rho ** (top + 1))
    assert np.abs(pi / exact - 1).max() < 1e-12


def test_banded_stationary_is_the_sparse_lu_on_a_level_chain():
    rng = np.random.default_rng(5)
    d, levels = 4, 90                                 # a level-dependent QBD, random blocks
    rates: dict[tuple[int, int], float] = {}
    for n in range(levels):
        for i in range(d):
            for j in range(d):
                if i != j:
                    rates[(n * d + i, n * d + j)] = float(rng.uniform(0.1, 2.0))
                if n + 1 < levels:
                    rates[(n * d + i, (n + 1) * d + j)] = float(rng.uniform(0.0, 1.0)) * (
                        1.0 + 0.01 * n)
                if n > 0:
                    rates[(n * d + i, (n - 1) * d + j)] = float(rng.uniform(0.5, 1.5))
    Q = _generator(rates, levels * d)
    a = _banded_stationary(Q, 17)
    b = anchored_stationary(Q, 17)
    assert a[17] == pytest.approx(1.0, rel=1e-12)
    assert np.abs(a / a.sum() - b / b.sum()).max() < 1e-13
    pi = a / a.sum()
    assert np.abs(pi @ Q.toarray()).max() < 1e-12


def _levels_one_by_one(v, R, d1, beyond, left, cap):
    out = []
    for _ in range(cap):
        if left <= waves.TAIL:
            break
        out.append(max(float(v @ d1), 0.0))
        v = v @ R
        left = float(v @ beyond)
    return np.array(out), left


@pytest.mark.parametrize("cap", [waves.MAX_LEVELS, 100, 64, 3])
def test_wave_levels_by_blocks_are_the_level_by_level_sum(cap, monkeypatch):
    monkeypatch.setattr(waves, "MAX_LEVELS", cap)
    rng = np.random.default_rng(2)
    P = 6
    R = rng.uniform(0.0, 1.0, (P, P))
    R *= 0.985 / np.max(np.abs(np.linalg.eigvals(R)))           # a queue near saturation
    d1 = rng.uniform(0.5, 2.0, P)
    beyond = np.linalg.solve(np.eye(P) - R, d1)
    v = rng.uniform(0.0, 1.0, P)
    v /= v @ beyond
    fast, left = waves._levels(v, R, d1, beyond, 1.0)
    slow, left_slow = _levels_one_by_one(v, R, d1, beyond, 1.0, cap)
    assert fast.shape == slow.shape and fast.shape[0] > 0
    assert np.abs(fast - slow).max() < 1e-14
    assert left == pytest.approx(left_slow, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("rows", [1, MOMENT_BLOCK, 3 * MOMENT_BLOCK + 5])
def test_wait_moments_by_blocks_are_erlang(rows):
    mu = 2.5                                          # one phase: r + 1 completions, Erlang
    F = np.full((rows, 1), 1.0 / rows)
    mean, square = chain_passage_moments(np.array([[-mu]]), np.array([[mu]]), F)
    k = np.arange(1, rows + 1)
    assert mean == pytest.approx(float(np.mean(k / mu)), rel=1e-12)
    assert square == pytest.approx(float(np.mean(k * (k + 1) / mu ** 2)), rel=1e-12)


def test_wait_moments_by_blocks_are_the_recursion():
    rng = np.random.default_rng(3)
    A0 = np.array([[-30.0, 0.5], [0.05, -2.0]])
    A1 = np.array([[29.0, 0.5], [0.2, 1.75]])
    F = rng.uniform(0.0, 1.0, (150, 2))
    F /= F.sum()
    inv = np.linalg.inv(-A0)
    u, P, Q1, second = inv @ np.ones(2), inv @ A1, inv @ inv @ A1, 2 * inv @ inv @ np.ones(2)
    m1, m2 = np.zeros(2), np.zeros(2)
    mean = square = 0.0
    for n in range(F.shape[0]):
        m1, m2 = u + P @ m1, second + 2.0 * Q1 @ m1 + P @ m2
        mean += float(F[n] @ m1)
        square += float(F[n] @ m2)
    fast = chain_passage_moments(A0, A1, F)
    assert fast == pytest.approx((mean, square), rel=1e-12)


def test_shared_kernel_solve_is_the_kernel_and_its_mass():
    A0 = np.array([[-30.0, 0.5, 0.0], [0.05, -2.0, 0.1], [0.0, 0.3, -5.0]])
    A1 = np.array([[29.0, 0.5, 0.0], [0.2, 1.5, 0.15], [1.0, 0.0, 3.7]])
    h, size = 0.01, 256
    L = chain_transfer(A0, h, size)
    for X in (A1, np.diag(A1.sum(axis=1))):
        direct = chain_kernel(A0, X, h, size)
        assert np.abs(np.einsum("fij,jk->fik", L, X) - direct).max() < 1e-13
    # frequency 0: the masses' total, int e^{A0 t} A1 dt = (-A0)^{-1} A1
    assert np.abs(L[0] @ A1 - np.linalg.solve(-A0, A1)).max() < 1e-12


@pytest.mark.parametrize("R, lead, budget", [(1, 0, None), (40, 0, None), (97, 5, None),
                                             (97, 0, 16 * 7 * 4 * 4 * 3)])
def test_blocked_horner_is_the_level_by_level_sum(R, lead, budget, monkeypatch):
    """``sum_r F[r] K^r`` per frequency by Horner over blocks of powers
    (:func:`solvers.response_time.bursty._horner`) against one level at a time: leading rows
    without mass skipped by a power, and blocks cut short by the powers' byte budget."""
    import solvers.response_time.bursty as bursty

    if budget is not None:
        monkeypatch.setattr(bursty, "HORNER_BYTES", budget)    # three powers at most
    rng = np.random.default_rng(3)
    f, d = 7, 4
    Kw = (rng.random((f, d, d)) + 1j * rng.random((f, d, d))) / (1.5 * d)
    F = rng.random((R, d))
    F[:lead] = 0.0
    want = np.zeros((f, d), dtype=complex)
    power = np.broadcast_to(np.eye(d), (f, d, d)).astype(complex)
    for r in range(R):
        want += np.einsum("i,fij->fj", F[r], power)
        power = power @ Kw
    assert np.allclose(bursty._horner(F, Kw), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("h", [0.002, 0.02, 0.2])
def test_schur_transfer_is_the_kernel_masses_transform(h):
    """``chain_transfer``'s ``L(w)`` (one Schur form for all frequencies) against the DFT of
    the kernel's masses written out in the time domain: ``K_0`` at 0, ``B^{i-1} V`` at ``i h``
    (``B = e^{A0 h}``), on a lattice long enough that the rest is below rounding -- on a
    non-normal sub-generator, a per-job station's full level (``A0`` of :func:`bursty_tier`)."""
    from scipy.linalg import expm

    from solvers.processes import MAP
    from solvers.response_time.bursty import bursty_tier

    proc = MAP([[-30.0, 0.5], [0.05, -2.0]], [[29.0, 0.5], [0.2, 1.75]])
    N = 12
    A0 = bursty_tier(proc, 3, N, np.full(N, 4.0)).A0
    size = 4096
    k = A0.shape[0]
    eye = np.eye(k)
    B = expm(A0 * h)
    inv = np.linalg.inv(A0)
    masses = np.empty((size, k, k))
    masses[0] = (inv @ inv @ (B - eye) - h * inv) / h
    masses[1] = (B - eye) @ (B - eye) @ inv @ inv / h
    for i in range(2, size):
        masses[i] = B @ masses[i - 1]
    assert np.abs(masses[-1]).max() < 1e-18 * np.abs(masses[1]).max()
    direct = np.fft.rfft(masses, axis=0)
    L = chain_transfer(A0, h, size)
    assert np.abs(L - direct).max() < 1e-12 * np.abs(direct).max()


def test_band_solve_sums_repeated_entries():
    """``_band_solve`` on a generator's entries with transitions split in two and the diagonal
    apart is ``_banded_stationary`` on the summed matrix."""
    from solvers.response_time.bursty import _band_solve

    rng = np.random.default_rng(11)
    S = 60
    src = np.concatenate([np.arange(S - 1), np.arange(1, S), np.arange(S - 1)])
    dst = np.concatenate([np.arange(1, S), np.arange(S - 1), np.arange(S - 1) + 1])
    up = rng.uniform(0.1, 0.5, S - 1)                   # the last part repeats the first
    rate = np.concatenate([up, rng.uniform(1.0, 2.0, S - 1), rng.uniform(0.1, 0.5, S - 1)])
    Q = sparse.csr_array((rate, (src, dst)), shape=(S, S))
    Q = sparse.csr_array(Q - sparse.diags_array(np.asarray(Q.sum(axis=1)).ravel()))
    states = np.arange(S)
    x = _band_solve(np.concatenate([src, states]), np.concatenate([dst, states]),
                    np.concatenate([rate, -np.bincount(src, weights=rate, minlength=S)]), S, 9)
    assert np.abs(x / _banded_stationary(Q, 9) - 1).max() < 1e-11     # sums in another order
    assert np.abs(x @ Q.toarray()).max() < 1e-12 * np.abs(x).max()


def test_the_heads_memo_changes_no_answer():
    """A bursty tier's law at a second population with the per-job heads kept from the first
    is the law built from scratch, bit for bit."""
    import solvers.response_time.bursty as bursty
    from solvers.processes import MAP

    proc = MAP([[-3.5, 2.0], [2.0, -2.5]], [[1.5, 0.0], [0.0, 0.5]]).scaled(0.3)
    bursty._HEADS.clear()
    bursty.bursty_tier(proc, 3, 30, (30 - np.arange(30)) / 1.0)
    assert len(bursty._HEADS)                       # the first population filled it
    kept = bursty.bursty_tier(proc, 3, 45, (45 - np.arange(45)) / 1.0)
    bursty._HEADS.clear()
    fresh = bursty.bursty_tier(proc, 3, 45, (45 - np.arange(45)) / 1.0)
    for name in ("idle", "busy", "A0", "A1"):
        assert np.array_equal(getattr(kept, name), getattr(fresh, name))
