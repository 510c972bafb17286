"""The shortcuts of the response-time law's fast path give what the long way gives: one-server
tiers' found law from the whole network's MVA curve (Buzen 1973's tail product) against the
complement's product form, the complements' side-by-side recursion against
:func:`solvers.mva.mva_curve` and Buzen 1973's convolution against the recursion and a closed
form, the batched generating functions against a direct polynomial
evaluation, the real-pair matrix product against complex arithmetic, the found laws
stacked straight into the window against the cut marginals' tier waits, the convolution's
per-row filters against :func:`scipy.signal.lfilter`, the windows placed in array steps against
the scalar loops, and the classes' shared wait product against each class's own."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.mva import mva_curve
from solvers.response_time.arrival import ArrivalLaw, _complement_recursion, _split
from solvers.response_time.sojourn import TierWait, _pgfs, real_times_complex


def _dense(offset: int, pmf: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size)
    out[offset:offset + pmf.shape[0]] = pmf
    return out


@pytest.mark.parametrize("servers, think", [([1, 1], 0.5), ([1, 4, math.inf], 1.0),
                                            ([1, 1, 8], 0.0)])
def test_one_server_found_law_from_the_whole_curve_is_the_complements(servers, think):
    D = np.array([0.0045, 0.004, 0.012])[:len(servers)]
    c = np.array(servers, dtype=float)
    n = 180
    law = ArrivalLaw(D, c, think)
    marg = law.marginals(n)
    k = n - 1
    for m in np.flatnonzero(c == 1):
        cum = law._complement(int(m), k)                  # the long way: f_m(j) G^(-m)
        logw = np.arange(k + 1) * math.log(D[m]) + (cum[k] - cum[k::-1])
        w = np.exp(logw - logw.max())
        long_way = w / w.sum()
        fast = _dense(marg.offset[m], marg.pmf[m], k + 1)
        assert np.abs(np.cumsum(fast) - np.cumsum(long_way)).max() < 1e-10
    given = ArrivalLaw(D, c, think, curve=lambda upto: mva_curve(D, upto, think, c))
    for m in range(D.shape[0]):
        a, b = given.marginals(n), marg
        assert a.offset[m] == b.offset[m] and np.array_equal(a.pmf[m], b.pmf[m])


def test_complements_side_by_side_are_mva_curve_bit_for_bit():
    D = np.array([0.008, 0.01, 0.016, 0.002])
    c = np.array([4.0, 1.0, 8.0, math.inf])
    which = [0, 2]
    splits = [_split(np.delete(D, i), np.delete(c, i)) for i in which]
    X: list[list[float]] = [[], []]
    _complement_recursion(tuple(d.shape[0] for d, _, _ in splits))(
        [float(v) for d, _, _ in splits for v in d], [f for _, f, _ in splits], 1.0, 300, X)
    for i, Xi in zip(which, X):
        curve = mva_curve(np.delete(D, i), 300, 1.0, np.delete(c, i))
        assert np.array_equal(np.asarray(Xi), curve.throughput[1:])


def _recursed(D: np.ndarray, c: np.ndarray, m: int, Z: float, N: int) -> np.ndarray:
    """``cum`` of station ``m``'s complement by the MVA recursion."""
    splits = _split(np.delete(D, m), np.delete(c, m))
    X: list[list[float]] = [[]]
    _complement_recursion((splits[0].shape[0],))(
        [float(v) for v in splits[0]], [splits[1]], Z, N, X)
    with np.errstate(divide="ignore"):
        return np.concatenate([[0.0], np.cumsum(np.log(X[0]))])


@pytest.mark.parametrize("think", [1.0, 0.0])
def test_complements_convolved_are_the_recursions(think):
    """Buzen's convolution (one filter per station) against the MVA recursion: the same
    throughputs to rounding, continued runs the same as one."""
    D = np.array([0.008, 0.01, 0.016, 0.002, 0.016])
    c = np.array([4.0, 1.0, 8.0, math.inf, 8.0])          # a complement with two equal demands
    pieces = ArrivalLaw(D, c, think)
    for k in (40, 41, 200, 120, 333):                  # short runs on, and a look back
        pieces._complement(0, k)
    assert pieces._run.convolved is True
    whole = ArrivalLaw(D, c, think)
    for m in (0, 2, 4):
        got = pieces._complement(m, 333)
        assert np.array_equal(got, whole._complement(m, got.shape[0] - 1)[:got.shape[0]])
        long_way = _recursed(D, c, m, think, got.shape[0] - 1)
        assert np.allclose(np.diff(got), np.diff(long_way), rtol=1e-12, atol=1e-12)
        assert abs(got[-1] - long_way[-1]) < 1e-9 * abs(long_way[-1])
    assert np.array_equal(pieces.marginals(300).pmf[2], whole.marginals(300).pmf[2])


def test_complements_out_of_the_convolutions_range_recurse():
    """Scaled by the larger queueing demand (0.0015), the other complement's constant falls
    like ``(1/3)^N``, out of a double's range past ``N`` ~ 550: the recursion answers from
    there, anew from ``n = 1`` and continued as one pass; the convolution answered the short
    run. A think time of ``e^{Z / d}`` beyond a double does the same (second law)."""
    D = np.array([0.002, 0.003])
    c = np.array([4.0, 2.0])
    law = ArrivalLaw(D, c, 0.3)
    assert law._complement(0, 100).shape[0] > 100 and law._run.convolved is True
    got = law._complement(0, 3000)                      # e^{1.0 / 0.0015} beyond the range
    assert law._run.convolved is False
    assert np.array_equal(got, _recursed(D, c, 0, 0.3, got.shape[0] - 1))
    assert np.array_equal(law._complement(1, 3000), _recursed(D, c, 1, 0.3, got.shape[0] - 1))
    far = ArrivalLaw(D, c, 3.0)                            # Z / d = 2,000
    got = far._complement(0, 50)
    assert far._run.convolved is False
    assert np.array_equal(got, _recursed(D, c, 0, 3.0, got.shape[0] - 1))


def test_convolved_closed_form_one_queue_and_a_delay():
    """One queue of demand ``d`` and a delay ``a``: ``G(n) = sum_j d^{n-j} a^j / j!``."""
    from solvers.response_time.arrival import _convolved

    d, a, N = 0.01, 0.37, 60
    [cum] = _convolved([(np.array([d]), a, False)], 0.0, N)
    G = [sum(d ** (n - j) * a ** j / math.factorial(j) for j in range(n + 1))
         for n in range(N + 1)]
    assert np.allclose(cum, [-math.log(g) for g in G], rtol=1e-13, atol=1e-12)


def test_batched_generating_functions_are_the_polynomials():
    rng = np.random.default_rng(7)
    z = np.exp(-2j * np.pi * rng.random((3, 40))) * rng.uniform(0.2, 1.0, (3, 40))
    waits = [TierWait(rate=2.0, offset=o, pmf=rng.dirichlet(np.ones(L)))
             for o, L in ((0, 5), (3, 37), (11, 1))]
    got = _pgfs(waits, z)
    for t, w in enumerate(waits):
        powers = z[t][None, :] ** (w.offset + np.arange(w.pmf.shape[0]))[:, None]
        assert np.allclose(got[t], w.pmf @ powers, rtol=1e-12, atol=1e-14)


def test_generating_functions_in_slices_are_the_whole(monkeypatch):
    from solvers.response_time import sojourn

    rng = np.random.default_rng(11)
    z = np.exp(-2j * np.pi * rng.random((2, 257))) * rng.uniform(0.0, 1.0, (2, 257))
    waits = [TierWait(rate=1.0, offset=o, pmf=rng.dirichlet(np.ones(L)))
             for o, L in ((2, 90), (0, 33))]
    whole = _pgfs(waits, z)
    monkeypatch.setattr(sojourn, "WORKSPACE", 16 * 2 * 19 * 40)  # 7 slices of ~37 columns
    assert np.array_equal(_pgfs(waits, z), whole)


def test_real_times_complex_is_the_complex_product():
    rng = np.random.default_rng(3)
    a = rng.random((2, 4, 6))
    b = rng.random((2, 6, 9)) + 1j * rng.random((2, 6, 9))
    assert np.allclose(real_times_complex(a, b), a @ b, rtol=1e-14, atol=1e-14)


def test_laws_side_by_side_are_the_laws_one_by_one():
    from solvers.response_time import response_time_quantiles, response_time_quantiles_many

    D = np.array([0.008, 0.01, 0.016])
    c = np.array([4.0, 1.0, 8.0])
    Dmc = np.array([[0.008, 0.008], [0.009, 0.014], [0.012, 0.032]])
    shares = np.array([[1.0, 1.0], [1.0, 1.0], [0.75, 2.0]])
    law = ArrivalLaw(D, c, 1.0)
    populations = [1, 40, 372, 455]
    many = response_time_quantiles_many(D, c, 1.0, populations, Dmc, shares, arrival=law)
    for n, res in zip(populations, many):
        one = response_time_quantiles(D, c, 1.0, n, Dmc, shares)
        assert np.allclose(res.quantiles, one.quantiles, rtol=1e-12, atol=0)
        assert np.allclose(res.mean, one.mean, rtol=1e-12)
        assert res.approximate == one.approximate


def test_found_laws_of_many_populations_are_each_ones():
    """``marginals_many`` (every population on the largest one's width) against one
    population at a time: the same supports and laws, in any order, with repeats, and
    demands above a second (``D^j`` grows) without a NaN."""
    D = np.array([1.5, 2.0, 0.7, 0.0])
    c = np.array([1.0, 3.0, math.inf, 2.0])
    populations = [3, 40, 7, 1, 40, 2]
    many = ArrivalLaw(D, c, 5.0).marginals_many(populations)
    for n, got in zip(populations, many):
        one = ArrivalLaw(D, c, 5.0).marginals(n)
        assert got.population == n and got.offset == one.offset
        assert got.approximate == one.approximate
        for a, b in zip(got.pmf, one.pmf):
            assert a.shape == b.shape and np.allclose(a, b, rtol=1e-13, atol=0)
            assert np.isfinite(a).all() and abs(a.sum() - 1.0) < 1e-12


@pytest.mark.parametrize("x", [0.01, 0.7, 6.0])
def test_kernel_transform_is_the_triangular_kernels_masses(x):
    """The closed-form transform against the DFT of the masses themselves (``m_0 = 1 +
    (e^{-x} - 1)/x``, ``m_i = e^{-x(i-1)} (1 - e^{-x})^2 / x``), folded onto the lattice."""
    from solvers.response_time.window import _kernel_transform

    size = 64
    i = np.arange(1, 400 * size)
    masses = np.zeros(size)
    masses[0] = 1.0 + math.expm1(-x) / x
    np.add.at(masses, i % size, np.exp(-x * (i - 1)) * math.expm1(-x) ** 2 / x)
    assert masses.sum() == pytest.approx(1.0, abs=1e-12)
    got = _kernel_transform(np.array([[x]]), size)[0]
    assert np.allclose(got, np.fft.rfft(masses), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("servers, think, populations", [
    ([1.0, 1.0], 0.5, [1, 2, 101, 124, 170]),
    ([4.0, 4.0, 8.0], 1.0, [1, 3, 5, 372, 454, 1200]),
    ([1.0, 3.0, math.inf, 2.0], 0.0, [1, 2, 4, 60]),
    ([2.0], 0.0, [1, 2, 3, 30]),                   # nowhere else to be: all found there
])
def test_found_laws_stacked_are_the_tier_waits(servers, think, populations):
    """The found laws straight into the window (one array, no wait object per tier,
    :func:`~solvers.response_time._stacked_waits`) against the marginals cut one by one and
    :func:`~solvers.response_time.sojourn.tier_wait`'s ``K = max(j - c + 1, 0)`` per tier:
    the same quantiles and means, light load to past the knee, cores above the population,
    a delay, a tier without demand, two classes with shares."""
    from solvers.response_time import _stacked_waits
    from solvers.response_time.sojourn import checked_services, tier_wait_checked
    from solvers.response_time.window import stacked_window_quantiles, window_quantiles

    D = np.array([0.0045, 0.004, 0.3, 0.0])[:len(servers)] if len(servers) > 1 \
        else np.array([0.01])
    c = np.array(servers)
    S, sh = checked_services(len(D), np.c_[D, 1.5 * D],
                             np.c_[np.ones(len(D)), np.full(len(D), 0.8)])
    law = ArrivalLaw(D, c, think)
    waits = [[tier_wait_checked(mg.offset[m], mg.pmf[m], float(D[m]), float(c[m]))
              for m in range(len(D))] for mg in law.marginals_many(populations)]
    levels = np.array([0.5, 0.9, 0.99, 0.999])
    want, want_means = window_quantiles(waits, S, sh, levels)
    coef, offset, inv = _stacked_waits(law.found_many(populations), D.tolist(), c.tolist())
    got, means = stacked_window_quantiles(coef, offset, inv, len(populations), S, sh, levels)
    assert np.allclose(got, want, rtol=1e-11, atol=0)
    assert np.allclose(means, want_means, rtol=1e-11, atol=0)


@pytest.mark.parametrize("D, c, k", [(0.004, 4.0, 900), (0.5, 2.5, 40), (3.0, 64.0, 300),
                                     (0.02, 8.0, 3), (0.02, 8.0, 0)])
def test_station_factor_is_the_running_sum(D, c, k):
    """``log f(j) = j log D - sum_{i<=j} log min(i, c)`` as a line beyond the last rate
    below ``c`` against the running sum itself (fractional cores, more cores than jobs)."""
    from solvers.response_time.arrival import _log_station_factor

    want = [j * math.log(D) - math.fsum(math.log(min(i, c)) for i in range(1, j + 1))
            for j in range(k + 1)]
    assert np.allclose(_log_station_factor(D, c, k), want, rtol=1e-13, atol=1e-11)


def test_geometric_filter_rows_are_lfilters():
    """Each row's own demand in one filter: the running sum where ``d^{-N}`` stays in range,
    :func:`scipy.signal.lfilter` on the row where it does not (``d = 0.3``, ``N = 600``:
    ``e^{722}``), ``d = 1`` a plain running sum."""
    from scipy.signal import lfilter

    from solvers.response_time.arrival import _geometric_filter

    rng = np.random.default_rng(7)
    x = rng.uniform(0.5, 2.0, (3, 601))
    d = np.array([0.3, 1.0, 0.9])
    got = _geometric_filter(x, d, 0.0)
    for r in range(3):
        want = lfilter([1.0], [1.0, -d[r]], x[r])
        assert np.allclose(got[r], want, rtol=1e-12, atol=0.0)


def test_window_placement_in_arrays_is_the_scalar_loops(monkeypatch):
    """The windows of a dozen classes placed in array steps: the means and ends the scalar
    loops give a few classes, to rounding."""
    from solvers.response_time import window

    rng = np.random.default_rng(3)
    P, M, C, width = 2, 3, 12, 40
    coef = rng.uniform(0.0, 1.0, (P * M, width))
    coef /= coef.sum(axis=1, keepdims=True)
    offset = np.array([0.0, 2.0, 0.0, 1.0, 0.0, 3.0])
    inv = rng.uniform(0.001, 0.01, P * M)
    S = rng.uniform(0.0, 0.02, (M, C))
    S[1, 4] = 0.0
    sh = rng.uniform(0.2, 2.5, (M, C))
    m12 = coef @ window._k_k2(width)
    arrays = window._placement(m12, offset, inv, P, S, sh)
    monkeypatch.setattr(window, "SCALAR_CLASSES", C)
    loops = window._placement(m12, offset, inv, P, S, sh)
    assert np.allclose(arrays[0], loops[0], rtol=1e-14, atol=0.0)
    assert np.allclose(arrays[1], loops[1], rtol=1e-14, atol=0.0)
    assert np.allclose(arrays[2], loops[2], rtol=1e-14, atol=0.0)


@pytest.mark.parametrize("servers", [[1, 1], [4, 2, 2]])
def test_classes_meeting_the_same_waits_share_their_product(servers):
    """Classes that meet every tier's wait at one share take the waits' product once: the
    quantiles of the way that builds each class's own product (the shares apart by one
    rounding step), to rounding."""
    from solvers.response_time import _stacked_waits, checked_services
    from solvers.response_time.window import stacked_window_quantiles

    D = np.array([0.0045, 0.004, 0.003])[:len(servers)]
    c = np.array(servers, dtype=float)
    M, C = D.shape[0], 3
    Dmc = D[:, None] * np.array([0.6, 1.0, 1.7])
    share = np.tile(np.array([[1.0], [0.8], [1.3]])[:M], (1, C))
    law = ArrivalLaw(D, c, 0.2)
    pops = [40, 90, 160]
    waits = _stacked_waits(law.found_many(pops), D.tolist(), c.tolist())
    levels = np.array([0.5, 0.9, 0.95, 0.99, 0.999])
    S, sh = checked_services(M, Dmc, share)
    together, _ = stacked_window_quantiles(*waits, len(pops), S, sh, levels)
    apart = sh.copy()
    apart[:, 1] = np.nextafter(apart[:, 1], np.inf)       # not equal: one product per class
    each, _ = stacked_window_quantiles(*waits, len(pops), S, apart, levels)
    assert np.allclose(together, each, rtol=1e-12, atol=0.0)
    assert (np.diff(together, axis=2) > 0).all()
