"""A bursty tier's departure process and the queue it builds downstream (``solvers.departures``),
and the decomposition's use of it (``solvers.decomposition``, step 4): closed forms, the exact
MAP chain on small networks, the simulated physical five-tier system."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.decomposition import solve_decomposed
from solvers.departures import DepartureMAP, lumped_departures, map_m_c_mean, through_tier
from solvers.mapqn import solve_closed
from solvers.paper000 import scenarios
from solvers.processes import MAP

BURSTY = scenarios()["bottleneck_switch"].database.scaled(1.0)     # unit mean, I ~ 200


def _erlang_c_mean(lam: float, mean: float, c: int) -> float:
    """Mean number in an M/M/c queue (closed form)."""
    a = lam * mean
    rho = a / c
    head = sum(a ** k / math.factorial(k) for k in range(c))
    tail = a ** c / (math.factorial(c) * (1 - rho))
    p_wait = tail / (head + tail)
    return a + p_wait * rho / (1 - rho)


@pytest.mark.parametrize("lam, mean, c", [(0.5, 1.0, 1), (3.0, 1.0, 4), (700.0, 0.02, 16)])
def test_poisson_arrivals_give_the_mmc_queue(lam, mean, c):
    dep = DepartureMAP(np.array([[-lam]]), np.array([[lam]]), np.ones(1))
    assert map_m_c_mean(dep, mean, c) == pytest.approx(_erlang_c_mean(lam, mean, c), rel=1e-9)


def _truncated_queue_mean(D0: np.ndarray, D1: np.ndarray, mean: float, c: int,
                          levels: int) -> float:
    """The MAP/M/c queue's chain, truncated at ``levels`` jobs, solved directly."""
    P = D0.shape[0]
    S = (levels + 1) * P
    Q = np.zeros((S, S))
    for n in range(levels + 1):
        block = slice(n * P, (n + 1) * P)
        Q[block, block] += D0 - np.diag(np.diag(D0))
        if n < levels:
            Q[block, (n + 1) * P:(n + 2) * P] += D1
        if n > 0:
            Q[block, (n - 1) * P:n * P] += np.eye(P) * min(n, c) / mean
    Q -= np.diag(Q.sum(axis=1))
    A = np.vstack([Q.T, np.ones(S)])
    pi = np.linalg.lstsq(A, np.concatenate([np.zeros(S), [1.0]]), rcond=None)[0]
    return float(pi.reshape(levels + 1, P).sum(axis=1) @ np.arange(levels + 1))


#: arrivals alternating between runs at 10/s and at 1/s (I ~ 8)
RUNS = MAP([[-10.1, 0.1], [0.05, -1.05]], [[10.0, 0.0], [0.0, 1.0]])


@pytest.mark.slow
@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.parametrize("load", [0.3, 0.5])
def test_bursty_arrivals_match_the_truncated_chain(c, load):
    """MAP/M/c with modulated arrivals at utilization ``load``, against the chain truncated
    where its tail is below 1e-12; and well above the M/M/c queue of the same rate."""
    arrivals = RUNS.scaled(1.0 / (load * c))          # service mean 1 on c cores
    dep = DepartureMAP(arrivals.D0, arrivals.D1, arrivals.theta)
    direct = _truncated_queue_mean(arrivals.D0, arrivals.D1, 1.0, c, 500)
    assert map_m_c_mean(dep, 1.0, c) == pytest.approx(direct, rel=1e-6)
    assert map_m_c_mean(dep, 1.0, c) > 1.2 * _erlang_c_mean(dep.rate, 1.0, c)


def test_an_unstable_queue_is_refused_naming_the_rates():
    dep = DepartureMAP(np.array([[-2.0]]), np.array([[2.0]]), np.ones(1))
    with pytest.raises(ValueError, match="not stable"):
        map_m_c_mean(dep, 1.0, 2)


def _mm1k_chain(lam: float, mu: float, K: int):
    n = np.arange(K + 1)
    src = np.concatenate([n[:-1], n[1:]])
    dst = np.concatenate([n[:-1] + 1, n[1:] - 1])
    rate = np.concatenate([np.full(K, lam), np.full(K, mu)])
    pi = (lam / mu) ** n
    return pi / pi.sum(), src, dst, rate, n


def test_lumped_departures_keep_the_rate_and_the_stationary_probabilities():
    """An M/M/1/K queue's departures with the levels above 2 lumped: the lumped MAP's
    stationary vector is the chain's on levels 0, 1, 2 and the rest, its rate the
    throughput."""
    lam, mu, K = 3.0, 4.0, 30
    pi, src, dst, rate, level = _mm1k_chain(lam, mu, K)
    dep = lumped_departures(pi, src, dst, rate, level, keep=2)
    assert dep.D0.shape == (4, 4)
    assert dep.w == pytest.approx(np.concatenate([pi[:3], [pi[3:].sum()]]), rel=1e-12)
    assert dep.rate == pytest.approx(mu * (1 - pi[0]), rel=1e-12)
    generator = dep.D0 + dep.D1
    assert dep.w @ generator == pytest.approx(np.zeros(4), abs=1e-12)


def test_a_tier_in_between_caps_the_burst_and_keeps_the_rate():
    fast = DepartureMAP(np.array([[-1010.0, 10.0], [1.0, -2.0]]),
                        np.array([[1000.0, 0.0], [0.0, 1.0]]), np.array([0.5, 0.5]))
    w = np.linalg.lstsq(np.vstack([(fast.D0 + fast.D1).T, np.ones(2)]),
                        np.array([0.0, 0.0, 1.0]), rcond=None)[0]
    fast = DepartureMAP(fast.D0, fast.D1, w)
    slowed = through_tier(fast, 100.0)
    assert slowed.rate == pytest.approx(fast.rate, rel=1e-12)
    assert slowed.w @ (slowed.D0 + slowed.D1) == pytest.approx(np.zeros(2), abs=1e-9)
    ratio = slowed.D1.sum(axis=1) / fast.D1.sum(axis=1)
    assert ratio[0] < ratio[1]                      # the burst phase is the one slowed
    assert map_m_c_mean(slowed, 0.004, 1) < map_m_c_mean(fast, 0.004, 1)


@pytest.mark.parametrize("N, Z, front, after", [(50, 0.5, 0.004, 0.003),
                                                 (100, 0.5, 0.004, 0.003),
                                                 (60, 0.2, 0.004, 0.002)])
def test_the_tier_after_a_bursty_one_matches_the_exact_chain(N, Z, front, after):
    """A one-core bursty tier (I ~ 200; one core: the exact chain is exact) followed by an
    exponential tier. The product form gave the tier after it 4.1 / 6.3 / 4.0 ms against the
    exact chain's 10.5 / 40.5 / 18.6 ms (the slow run's backlog arrives there at once) and
    throughput +1.1% / +4.5% / +3.7%."""
    procs = [BURSTY.scaled(front), MAP.exponential(after)]
    exact = solve_closed(procs, N, Z)
    res = solve_decomposed(procs, N, Z)
    assert res.residence_time[1] == pytest.approx(exact.residence_time[1], rel=0.12)
    assert res.throughput == pytest.approx(exact.throughput, rel=0.015)
    assert res.little_residual < 1e-4 and res.converged


@pytest.mark.slow
def test_five_tiers_match_the_simulated_physical_system():
    """System (d) of docs/accuracy.md with one class at 816 users (0.6 knees): lb 1 core
    0.5 ms, web 4 x 6 ms, app 8 cores bursty 12 ms, cache 2 x 1 ms, db 16 x 20 ms; Z = 2 s.
    The product form gave the cache 1.0 ms and the db 20.0 ms against ~7 and ~39 simulated,
    and the response time 22% low."""
    from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

    app = BURSTY.scaled(0.012)
    tiers = (Tier("lb", 1, 0.0005), Tier("web", 4, 0.006), Tier("app", 8, app),
             Tier("cache", 2, 0.001), Tier("db", 16, 0.020))
    net = PhysicalNetwork(tiers=tiers, classes=("all",), mix=(1.0,), think_time=2.0,
                          population=816)
    sim = simulate_physical(net, 400.0, warmup=50.0, replications=3, seed=3)
    res = solve_decomposed([MAP.exponential(0.0005), MAP.exponential(0.006), app,
                            MAP.exponential(0.001), MAP.exponential(0.020)], 816, 2.0,
                           servers=[1, 4, 8, 2, 16])
    X, R = sim.total_throughput, sim.total_response_time
    assert abs(res.throughput - X.mean) <= max(2 * X.half_width, 0.03 * X.mean)
    assert abs(res.response_time - R.mean) <= max(2 * R.half_width, 0.10 * R.mean)
    for m in (3, 4):                                  # cache, db
        truth = sim.residence_time[m]
        assert abs(res.residence_time[m] - truth.mean) <= max(2 * truth.half_width,
                                                              0.15 * truth.mean)
    assert res.little_residual < 1e-4


@pytest.mark.slow
def test_the_users_held_downstream_leave_the_rest():
    """Little's law over the whole network holds with the waves' queues in it."""
    app = BURSTY.scaled(0.012)
    res = solve_decomposed([MAP.exponential(0.006), app, MAP.exponential(0.001),
                            MAP.exponential(0.020)], 1088, 2.0, servers=[4, 8, 2, 16])
    assert res.little_residual < 1e-4
    assert res.flags == ()
    assert np.all(np.isfinite(res.residence_time))


@pytest.mark.slow
def test_the_last_round_reads_the_wave_queues_off_the_line(monkeypatch):
    """System (d) near its capacity (735 users): step 4 stops after the secant's round, whose
    wave queues come from the line through the two rounds before (``waves_on_line``): two
    rounds of ``MAP/M/c`` queues instead of three, the same throughput (the chains are
    re-solved at the same held users) and the queues within 1e-4 of the full last round."""
    from solvers.decomposition import solve, waves

    procs = [MAP.exponential(0.0005), MAP.exponential(0.006), BURSTY.scaled(0.012),
             MAP.exponential(0.001), MAP.exponential(0.020)]
    calls = []
    real = waves.map_m_c_mean

    def counted(*args):
        calls.append(args[2])
        return real(*args)

    monkeypatch.setattr(waves, "map_m_c_mean", counted)
    fast = solve_decomposed(procs, 735, 2.0, servers=[1, 4, 8, 2, 16])
    fast_calls = len(calls)
    monkeypatch.setattr(solve, "waves_on_line", lambda *args: None)
    del calls[:]
    full = solve_decomposed(procs, 735, 2.0, servers=[1, 4, 8, 2, 16])
    assert (fast_calls, len(calls)) == (4, 6)           # two tiers a round
    assert fast.throughput == full.throughput
    np.testing.assert_allclose(fast.residence_time, full.residence_time, rtol=1e-4)
    assert fast.little_residual < 1e-4 and fast.flags == ()


def test_a_queue_that_does_not_converge_is_refused_not_returned():
    """Logarithmic reduction on a transient level process (arrivals 2/s, service 1/s: the
    minimal ``G`` is 1/2, not stochastic) raises instead of returning a ``G`` that is not
    the stable queue's (the fuzz harness found a nearly critical wave queue turning NaN)."""
    from solvers.departures import g_matrix

    with pytest.raises(np.linalg.LinAlgError, match="did not converge"):
        g_matrix(np.array([[2.0]]), np.array([[-3.0]]), np.array([[1.0]]))


@pytest.mark.parametrize("seed", [3, 10, 12, 16])
def test_a_nearly_critical_queue_with_many_phases_solves(seed):
    """Poisson arrivals behind 40 phases (every phase emits at ``lam``; the phases mix at
    random, fast rates) at utilization 0.9997-0.999998: the queue is M/M/2, so Erlang C is
    the answer. ``G`` reaches a rounding floor just above ``1e-12`` and iterating on from
    there overflowed: these seeds raised before, and a wave queue of the pipeline's default
    workload fell back to the product form in 95 of 373 solves."""
    rng = np.random.default_rng(seed)
    P, lam, c = 40, 970.0, 2
    Q = rng.uniform(0, 1, (P, P)) * rng.uniform(10, 5000)
    np.fill_diagonal(Q, 0.0)
    Q[np.diag_indices(P)] = -Q.sum(axis=1)
    mix = rng.uniform(0, 1, (P, P))
    D1 = lam * mix / mix.sum(axis=1, keepdims=True)
    arrivals = MAP(Q - lam * np.eye(P), D1)
    mean = (1 - 10 ** rng.uniform(-6, -2)) * c / lam
    with np.errstate(all="ignore"):        # as the decomposition calls it (wave_queues)
        got = map_m_c_mean(DepartureMAP(arrivals.D0, arrivals.D1, arrivals.theta), mean, c)
    assert got == pytest.approx(_erlang_c_mean(lam, mean, c), rel=1e-3)


def test_a_wave_queue_that_does_not_solve_keeps_the_product_form_flagged(monkeypatch):
    """When the queue after the bursty tier cannot be solved (singular or non-converging),
    that tier keeps the product form's answer with a flag: finite, never NaN, no warning."""
    from solvers.decomposition import waves

    def fails(*args, **kwargs):
        raise np.linalg.LinAlgError("G matrix: logarithmic reduction did not converge")

    procs = [BURSTY.scaled(0.004), MAP.exponential(0.003)]
    plain = solve_decomposed(procs, 50, 0.5)
    monkeypatch.setattr(waves, "map_m_c_mean", fails)
    res = solve_decomposed(procs, 50, 0.5)
    assert any("did not solve" in f and "product-form queue" in f for f in res.flags)
    assert np.all(np.isfinite(res.residence_time)) and math.isfinite(res.throughput)
    assert res.residence_time[1] < plain.residence_time[1]     # the product form's queue


def test_a_rare_phase_is_dropped_but_a_brief_frequent_one_is_kept():
    """``_reachable`` drops the phases that take almost no part in the process's transitions
    (stationary probability times exit rate), not the merely unlikely ones: a phase held
    1e-12 of the time but left at 1e12/s carries a fair share of the transitions and stays;
    one held 1e-12 of the time at an ordinary rate goes, and the rate is kept to 1e-10."""
    from solvers.departures import _reachable

    # phases: 0 (ordinary), 1 (brief, frequent: entered from 0 at 1/s, left at 1e12/s),
    # 2 (rare: entered from 0 at 1e-12/s, left at 1/s)
    D0 = np.array([[-3.0, 1.0, 1e-12], [0.0, -1e12, 0.0], [0.0, 0.0, -1.0]])
    D0[0, 0] = -(1.0 + 1e-12 + 2.0)
    D1 = np.array([[2.0, 0.0, 0.0], [1e12, 0.0, 0.0], [1.0, 0.0, 0.0]])
    arrivals = MAP(D0, D1)
    dep = DepartureMAP(arrivals.D0, arrivals.D1, arrivals.theta)
    assert dep.w[1] < 1e-11 and dep.w[2] < 1e-11
    kept = _reachable(dep)
    assert kept.D0.shape == (2, 2)
    np.testing.assert_allclose(kept.D1[1], [1e12, 0.0])
    assert kept.rate == pytest.approx(dep.rate, rel=1e-10)


def test_dropping_negligible_phases_keeps_np_ix_s_arrays_bit_for_bit():
    """:func:`solvers.departures._reachable` picks the kept phases by rows, then columns
    (``np.take``): C-ordered arrays equal to ``np.ix_``'s, so the rates into dropped phases
    (row sums) are the same to the bit -- a transposed memory order moved them by an ulp and
    the capacity search's path with them."""
    from solvers.departures import DepartureMAP, _reachable
    rng = np.random.default_rng(5)
    n = 40
    D1 = rng.uniform(0.0, 50.0, (n, n)) * (rng.uniform(size=(n, n)) < 0.2)
    D0 = rng.uniform(0.0, 3e4, (n, n)) * (rng.uniform(size=(n, n)) < 0.3)
    np.fill_diagonal(D0, 0.0)
    D0 -= np.diag(D0.sum(axis=1) + D1.sum(axis=1))
    w = rng.uniform(size=n)
    w[::3] = 1e-14                                  # a third of the phases negligible
    got = _reachable(DepartureMAP(D0, D1, w / w.sum()), 1e-10)
    keep = (w / w.sum()) * -np.diag(D0) > 1e-10 * float(((w / w.sum()) * -np.diag(D0)).sum())
    ref0, ref1 = D0[np.ix_(keep, keep)].copy(), D1[np.ix_(keep, keep)].copy()
    lost = D0[keep].sum(axis=1) + D1[keep].sum(axis=1) - ref0.sum(axis=1) - ref1.sum(axis=1)
    ref0[np.diag_indices(ref0.shape[0])] += lost
    assert got.D0.shape[0] < n
    assert got.D0.flags.c_contiguous and got.D1.flags.c_contiguous
    assert np.array_equal(got.D0, ref0) and np.array_equal(got.D1, ref1)
