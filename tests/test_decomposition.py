"""The flow-equivalent decomposition (``solvers.decomposition``): exact on product-form
networks (exact multi-server MVA), close to the exact MAP chain where the chain can be solved,
Little's and the utilization law, degenerate inputs flagged rather than NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.decomposition import fixed_point
from solvers.decomposition import (SWING_FLAG, SWING_SPAN, SWING_SWEEPS, bounded_swing,
                                   solve_decomposed)
from solvers.mapqn import solve_closed
from solvers.mva import mva
from solvers.paper000 import scenarios
from solvers.processes import MAP
from reference import reference

# after perfcast's packages: line_solver puts a ``solvers`` of its own on sys.path (conftest)
from line_solver.api.pfqn.mvald import pfqn_mvald  # isort: skip  # noqa: E402

BURSTY = scenarios()["bottleneck_switch"].database.scaled(1.0)     # unit mean, I ~ 200
MILD = MAP([[-3.5, 2.0], [2.0, -2.5]], [[1.5, 0.0], [0.0, 0.5]])   # unit mean, I ~ 1.1
#: fitted inputs of bench_pipeline's workloads and the answers of their solves
#: (tests/results/test_decomposition.json)
REF = reference(__file__)


@pytest.mark.slow
@pytest.mark.parametrize("N", [1, 7, 60, 400, 3000])
@pytest.mark.parametrize("Z", [0.0, 1.0])
def test_exponential_networks_are_solved_exactly(N, Z):
    """No bursty tier: the product form, equal to exact load-dependent MVA."""
    means, cores = [0.004, 0.010, 0.020], [1, 4, 8]
    res = solve_decomposed([MAP.exponential(s) for s in means], N, Z, servers=cores)
    ref = mva(np.array(means)[:, None], [N], Z, cores)
    assert res.throughput == pytest.approx(float(np.ravel(ref.throughput)[0]), rel=1e-9)
    assert res.queue_length == pytest.approx(np.ravel(ref.queue_length), rel=1e-5, abs=1e-7)
    assert res.utilization == pytest.approx(res.throughput * np.array(means) / cores, rel=1e-12)
    assert res.iterations == 0 and res.converged and res.flags == ()


@pytest.mark.parametrize("N", [20, 80, 150])
def test_one_bursty_tier_is_close_to_the_exact_chain(N):
    """Mi et al.'s (2008) two tiers (front exponential, bursty database, the bottleneck switch):
    decomposition against the exact Markov chain (measured: X within 0.6%, R within 1.5%; the
    split of the queue between the tiers within 3% up to the knee, 16-20% on the front server
    beyond it, where the FES sees the database's slow runs drain it)."""
    sc = scenarios()["bottleneck_switch"]
    res = solve_decomposed(sc.processes, N, 0.5)
    exact = solve_closed(sc.processes, N, 0.5)
    assert res.throughput == pytest.approx(exact.throughput, rel=0.01)
    assert res.response_time == pytest.approx(exact.response_time, rel=0.03)
    assert res.queue_length == pytest.approx(exact.queue_length, rel=0.2, abs=0.05)
    assert res.iterations == 1


@pytest.mark.slow
def test_two_bursty_tiers_converge_close_to_the_exact_chain():
    procs = [MAP.exponential(0.003), BURSTY.scaled(0.004), MILD.scaled(0.004)]
    res = solve_decomposed(procs, 30, 0.5)
    exact = solve_closed(procs, 30, 0.5)
    assert res.converged and res.iterations > 1
    assert res.throughput == pytest.approx(exact.throughput, rel=0.02)
    assert res.response_time == pytest.approx(exact.response_time, rel=0.05)


def test_a_mildly_modulated_tier_is_close_to_the_exponential_one():
    """A MAP with I ~ 1.1 is nearly exponential: the answer is close to the product form."""
    procs = [MAP.exponential(0.004), MILD.scaled(0.004)]
    res = solve_decomposed(procs, 100, 0.5, servers=[1, 2])
    ref = mva([[0.004], [0.004]], [100], 0.5, [1, 2])
    assert res.throughput == pytest.approx(float(np.ravel(ref.throughput)[0]), rel=0.02)


@pytest.mark.parametrize("N", [50, 2000])
def test_little_and_utilization_laws_hold_on_multicore_bursty_networks(N):
    procs = [MAP.exponential(0.002), BURSTY.scaled(0.01), MAP.exponential(0.004),
             BURSTY.scaled(0.02)]
    cores = [4, 8, 4, 16]
    res = solve_decomposed(procs, N, 7.0, servers=cores)
    Z = 7.0
    assert res.throughput * (res.response_time + Z) == pytest.approx(N, rel=2e-3)
    means = np.array([p.mean for p in procs])
    assert res.utilization == pytest.approx(res.throughput * means / cores, rel=2e-3)
    assert np.all(np.isfinite(res.residence_time)) and np.all(res.utilization <= 1 + 1e-9)
    assert res.bottleneck_probability.sum() == pytest.approx(1.0)


@pytest.mark.slow
@pytest.mark.parametrize("N", [120, 900])
def test_little_and_utilization_laws_hold_with_phase_counts_on_a_grid(N):
    """A 48-core bursty tier on the per-job station keeps its phase counts on a grid (past
    PHASE_COUNT_BINS busy cores): Little's law and the utilization law still hold, below and
    well beyond the knee (~330 users)."""
    procs = [MAP.exponential(0.004), MAP.exponential(0.016), BURSTY.scaled(48 / 250)]
    cores = [4, 8, 48]
    res = solve_decomposed(procs, N, 1.0, servers=cores, per_job_max_cores=64)
    assert res.flags == ()
    assert res.throughput * (res.response_time + 1.0) == pytest.approx(N, rel=1e-4)
    means = np.array([p.mean for p in procs])
    assert res.utilization == pytest.approx(res.throughput * means / cores, rel=1e-6)
    assert np.all(np.isfinite(res.residence_time)) and np.all(res.utilization <= 1 + 1e-9)


def test_burstiness_lowers_throughput_against_mva():
    """The point of the model: near the knee a bursty database costs throughput MVA does not
    see (Mi et al. 2008, Section 3.4)."""
    procs = [MAP.exponential(0.008), MAP.exponential(0.010), BURSTY.scaled(0.016)]
    cores = [4, 4, 8]
    res = solve_decomposed(procs, 400, 1.0, servers=cores)
    ref = mva([[0.008], [0.010], [0.016]], [400], 1.0, cores)
    assert res.throughput < 0.97 * float(np.ravel(ref.throughput)[0])


def test_saturated_and_degenerate_inputs_give_finite_flagged_or_trivial_results():
    sat = solve_decomposed([MAP.exponential(0.001), BURSTY.scaled(0.05)], 20_000, 0.1,
                           servers=[2, 1])
    assert math.isfinite(sat.throughput) and np.all(np.isfinite(sat.residence_time))
    assert sat.throughput == pytest.approx(1 / 0.05, rel=0.02)        # the bottleneck's rate
    assert sat.utilization[1] == pytest.approx(1.0, abs=1e-3)
    zero = solve_decomposed([BURSTY], 0, 1.0)
    assert zero.throughput == 0.0 and zero.flags and zero.response_time == pytest.approx(1.0)
    alone = solve_decomposed([BURSTY.scaled(0.01)], 5, 0.0, servers=[2])
    assert alone.throughput == pytest.approx(2 / 0.01) and alone.queue_length[0] == 5
    idle = solve_decomposed([MAP.exponential(0.001), BURSTY.scaled(0.001)], 1, 1e6)
    assert idle.throughput == pytest.approx(1e-6, rel=1e-3) and np.all(np.isfinite(idle.queue_length))


@pytest.mark.parametrize("kwargs, message", [
    (dict(processes=[], population=1, think_time=0.0), "processes: at least one tier"),
    (dict(processes=[1.0], population=1, think_time=0.0), "processes: item 0"),
    (dict(processes=[BURSTY], population=-1, think_time=0.0), "population: must be"),
    (dict(processes=[BURSTY], population=1.5, think_time=0.0), "population: must be"),
    (dict(processes=[BURSTY], population=1, think_time=math.nan), "think_time: must be"),
    (dict(processes=[BURSTY], population=1, think_time=0.0, servers=[0]), "servers: item 0"),
    (dict(processes=[BURSTY], population=1, think_time=0.0, servers=[1, 2]), "servers: must"),
    (dict(processes=[BURSTY], population=1, think_time=0.0, per_job_max_cores=-1),
     "per_job_max_cores: must be"),
])
def test_bad_input_names_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        solve_decomposed(**kwargs)


def test_per_job_phases_of_a_poisson_map_give_the_mmc_station():
    """A MAP(2) whose phases do not matter (both complete at rate 1) is exponential: the
    per-job multi-core station must then be exactly M/M/c (product form, exact MVA)."""
    poisson = MAP([[-2.0, 1.0], [1.0, -2.0]], [[1.0, 0.0], [0.0, 1.0]])
    procs = [MAP.exponential(0.004), poisson.scaled(0.02)]
    for N in (3, 40, 300):
        res = solve_decomposed(procs, N, 0.5, servers=[2, 8])
        ref = mva([[0.004], [0.02]], [N], 0.5, [2, 8])
        assert res.throughput == pytest.approx(float(np.ravel(ref.throughput)[0]), rel=1e-8)
        assert res.queue_length == pytest.approx(np.ravel(ref.queue_length), rel=1e-6)


@pytest.mark.slow
def test_multicore_bursty_tier_matches_the_physical_simulation():
    """Truth that is not the model: three tiers 4/4/8 cores, the database's cores consuming one
    bursty service-time sequence (I ~ 200). At 110 users the per-job station predicts the
    simulated throughput and response time (3 replications x 2000 s); the station that runs one
    MAP at speed min(n, c) (solvers.mapqn's) is 20% pessimistic there."""
    from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

    db = BURSTY.scaled(0.016)
    net = PhysicalNetwork(tiers=(Tier("web", 4, 0.008), Tier("app", 4, 0.010), Tier("db", 8, db)),
                          classes=("all",), mix=(1.0,), think_time=1.0, population=110)
    sim = simulate_physical(net, 2000.0, warmup=200.0, replications=3, seed=11)
    res = solve_decomposed([MAP.exponential(0.008), MAP.exponential(0.010), db], 110, 1.0,
                           servers=[4, 4, 8])
    X, R = sim.total_throughput, sim.total_response_time
    assert abs(res.throughput - X.mean) <= max(2 * X.half_width, 0.02 * X.mean)
    assert abs(res.response_time - R.mean) <= max(2 * R.half_width, 0.10 * R.mean)


@pytest.mark.slow
def test_a_saturated_16_core_per_job_chain_is_solved_stably():
    """A 16-core bursty tier (I ~ 200) fed faster than it can serve: the likeliest states have
    most jobs in the slow phase. Anchoring the banded solve at an unlikely state cancelled
    (residual 0.8, throughput 31,841/s against a capacity of 800/s); the solve must match a
    dense eigenvector of the same generator."""
    import scipy.sparse as sp

    from solvers.decomposition import per_job_transitions, solve_levels

    proc, cores, levels = BURSTY.scaled(0.02), 16, 40
    lam = np.full(levels + 1, 790.0)
    lam[-1] = 0.0
    tr = per_job_transitions(levels, proc, cores)
    chain = solve_levels(lam, proc, cores, tr, True)
    S = tr.level.shape[0]
    Q = sp.coo_matrix((tr.with_arrivals(lam), (tr.src, tr.dst)), shape=(S, S)).toarray()
    Q -= np.diag(Q.sum(axis=1))
    w, v = np.linalg.eig(Q.T)
    pi = np.real(v[:, np.argmin(np.abs(w))])
    pi /= pi.sum()
    assert chain.residual < 1e-12
    assert chain.throughput == pytest.approx(float(pi @ tr.exit), rel=1e-8)
    assert chain.throughput < cores / proc.mean


@pytest.mark.slow
def test_a_64_core_bursty_tier_matches_the_physical_simulation():
    """Truth that is not the model, where the per-job station reaches with
    ``per_job_max_cores=64`` (the default): web 4 cores exp 4 ms, app 8 cores exp 16 ms, db
    64 cores with Mi et al. (2008)'s sequence (I ~ 200) scaled to 256 ms a request (250/s
    over its cores), Z = 1 s, 287 users (0.9 knees). The per-job chain gives the simulated
    throughput and response time (per-job 202.1/s and 0.420 s against 199.9 +- 3.8 and
    0.436 +- 0.028 over 3 x 4,000 s); one MAP at speed min(n, c) -- the station at
    ``per_job_max_cores=16`` -- gives 182.1/s and 0.576 s (-9% / +32%), outside the
    simulation's band."""
    db = BURSTY.scaled(64 / 250)
    procs, cores, N = [MAP.exponential(0.004), MAP.exponential(0.016), db], [4, 8, 64], 287
    res = solve_decomposed(procs, N, 1.0, servers=cores)
    assert res.flags == () and res.little_residual < 1e-6
    sim = _simulated(procs, cores, 1.0, N, seed=3, duration=2000.0)
    X, R = sim.total_throughput, sim.total_response_time
    assert abs(res.throughput - X.mean) <= max(2 * X.half_width, 0.03 * X.mean)
    assert abs(res.response_time - R.mean) <= max(2 * R.half_width, 0.10 * R.mean)
    old = solve_decomposed(procs, N, 1.0, servers=cores, per_job_max_cores=16)
    assert any("64 cores > per_job_max_cores 16" in f for f in old.flags)
    assert old.response_time > R.mean + max(2 * R.half_width, 0.15 * R.mean)


def test_phase_counts_on_a_grid_keep_the_completion_rate_and_the_expected_count():
    """Past PHASE_COUNT_BINS busy cores a per-job level keeps the count of jobs in phase 2 on a
    grid of PHASE_COUNT_BINS + 1 counts (from 0 to the busy cores). Every state's completions
    still leave at its exact rate ``sum_i k_i (D1 1)_i``; an arrival's start phases still sum
    to one; and each move lands on the grid points around its exact count with weights that
    keep the expected count: per state, ``sum rate x (count after - count before)`` is the
    exact drift (in-service phase changes ``D0``, completions replaced by a job starting in
    ``s``), and an arrival's expected count is the exact one."""
    import solvers.decomposition as decomposition

    proc, c = BURSTY, 40
    B = decomposition.PHASE_COUNT_BINS
    assert B < c
    N = c + 2
    src, dst, rate, up, exit_rate = decomposition.per_job_states(N, proc, c)
    states = [(n, k, s) for n in range(N + 1) for k in decomposition.phase_counts(min(n, c), 2)
              for s in range(2)]
    assert len(exit_rate) == len(states) - len(decomposition.phase_counts(c, 2)) * 2  # N+1 out
    assert len(decomposition.phase_counts(c, 2)) == B + 1
    assert len(decomposition.phase_counts(B, 2)) == B + 1
    assert len(decomposition.phase_counts(7, 3)) == 36
    level = np.array([st[0] for st in states])
    count = np.array([st[1][1] for st in states], dtype=float)
    d1 = proc.D1.sum(axis=1)
    P = np.linalg.solve(-proc.D0, proc.D1)
    down = level[dst] < level[src]
    for i, (n, k, s) in enumerate(states[: len(exit_rate)]):
        mine = src == i
        assert rate[mine & down].sum() == pytest.approx(float(np.dot(k, d1)), rel=1e-12)
        assert exit_rate[i] == pytest.approx(float(np.dot(k, d1)), rel=1e-12)
        moves = mine & ~up
        drift = k[0] * proc.D0[0, 1] - k[1] * proc.D0[1, 0]
        drift += k[0] * d1[0] * (s == 1) - k[1] * d1[1] * (s == 0) if n > c else -k[1] * d1[1]
        assert float(rate[moves] @ (count[dst[moves]] - k[1])) == pytest.approx(drift, abs=1e-9)
        if n < N:
            arrive = mine & up
            assert rate[arrive].sum() == pytest.approx(1.0, rel=1e-12)
            expected = k[1] + (s == 1 if n < c else 0)
            assert float(rate[arrive] @ count[dst[arrive]]) == pytest.approx(expected, rel=1e-12)
            if n < c:           # the start phase after the arrival's: P's row
                t = np.array([states[j][2] for j in dst[arrive]])
                assert rate[arrive][t == 1].sum() == pytest.approx(P[s, 1], rel=1e-12)


@pytest.mark.slow
def test_the_phase_count_grid_stays_near_the_full_chain_at_64_cores(monkeypatch):
    """The grid's own effect (bench/accuracy/many_cores.py, the 'full chain' column): the
    64-core bursty tier of the simulation test above at 159 and 351 users (0.5 and 1.1 knees),
    grid against every phase count resolved: the grid's wider spread of the count is
    pessimistic by 0.2% / 1.5% on throughput and 0.7% / 4.2% on response time there."""
    from solvers.decomposition import stations

    db = BURSTY.scaled(64 / 250)
    procs, cores = [MAP.exponential(0.004), MAP.exponential(0.016), db], [4, 8, 64]
    for N in (159, 351):
        grid = solve_decomposed(procs, N, 1.0, servers=cores, per_job_max_cores=64)
        with monkeypatch.context() as m:
            m.setattr(stations, "PHASE_COUNT_BINS", 64)
            full = solve_decomposed(procs, N, 1.0, servers=cores, per_job_max_cores=64)
        assert grid.flags == () and full.flags == ()
        assert -0.02 <= grid.throughput / full.throughput - 1 <= 0.0, N
        assert 0.0 <= grid.response_time / full.response_time - 1 <= 0.06, N


def test_a_per_job_chain_over_its_budget_is_the_speed_scaled_station_flagged(monkeypatch):
    """Past PER_JOB_MAX_BYTES (the per-job chain's banded LU storage) a bursty tier is the
    speed-scaled station: the same answer as that station, and the flag says why -- also
    with two bursty tiers, whose later sweeps solve that station again (the flag of the
    first sweep's fallback used to be lost there)."""
    from solvers.decomposition import stations

    app, db = MILD.scaled(0.008), BURSTY.scaled(0.016)
    procs, cores = [MAP.exponential(0.004), app, db], [2, 4, 8]
    monkeypatch.setattr(stations, "PER_JOB_MAX_BYTES", 1)
    over = solve_decomposed(procs, 300, 1.0, servers=cores)
    flagged = [f for f in over.flags if "per-job chain over budget" in f]
    assert [f.split(":")[0] for f in flagged] == ["tier 1", "tier 2"]
    scaled = solve_decomposed(procs, 300, 1.0, servers=cores, per_job_max_cores=1)
    assert over.throughput == pytest.approx(scaled.throughput, rel=1e-9)
    assert over.response_time == pytest.approx(scaled.response_time, rel=1e-9)


def test_a_many_core_bursty_tier_before_a_wave_queue_is_the_speed_scaled_station():
    """A 32-core bursty tier followed by an exponential one, per-job phases allowed up to 64
    cores: its per-job departure process would have 1,188 phases (levels 0..c+1 of the chain),
    and the wave queue's dense ``G`` matrices in them took minutes a solve in the pipeline;
    such a tier is the speed-scaled station, flagged, whose departures have 66 phases -- the
    default's answer."""
    procs, cores = [MAP.exponential(0.002), BURSTY.scaled(0.064), MAP.exponential(0.02)], \
        [4, 32, 8]
    res = solve_decomposed(procs, 400, 1.0, servers=cores, per_job_max_cores=64)
    assert [f.split(":")[0] for f in res.flags if "per-job departures too large" in f] == \
        ["tier 1"]
    before = solve_decomposed(procs, 400, 1.0, servers=cores)
    assert res.throughput == pytest.approx(before.throughput, rel=1e-9)
    assert res.queue_length == pytest.approx(before.queue_length, rel=1e-9)


def _fitted(D1: list[list[float]]) -> MAP:
    """A MAP(2) as the pipeline's fit gives it: ``D0`` diagonal, rows of ``D0 + D1`` sum to 0."""
    D1 = np.array(D1)
    return MAP(-np.diag(D1.sum(axis=1)), D1)


def _map(ref: dict) -> MAP:
    """A MAP from its ``D0`` and ``D1`` in the reference file."""
    return MAP(np.array(ref["D0"]), np.array(ref["D1"]))


def _web_64_cores() -> MAP:
    """The 64-core web tier's fitted MAP(2) in bench_pipeline's 16-64-core workload (phases
    of 0.45 us and 33 ms)."""
    return _fitted(REF["web_64_cores"]["D1"])


def _provisional_network() -> tuple[list[MAP], tuple[int, ...]]:
    """A provisional model of bench.speed.pipeline's multi-core workload (the fitted matrices, as
    bench/speed/decomposition.py's ``fixed_point_networks`` has them): web 8 cores, a weakly
    bursty MAP(2); app 4 cores exponential; db 4 cores, I ~ 2,000; Z = 1.45 s."""
    ref = REF["provisional_network"]
    return [_fitted(ref["web_D1"]), MAP.exponential(ref["app_mean_s"]),
            _fitted(ref["db_D1"])], (8, 4, 4)


@pytest.mark.slow
def test_fixed_point_does_not_let_anderson_swing_a_lightly_loaded_bursty_tier():
    """A provisional model from bench.speed.pipeline's multi-core workload: web 8 cores, weakly
    bursty MAP(2) (I ~ 10, at 23% of its cores), app 4 cores exponential, db 4 cores bursty
    (I ~ 2,000, saturated), 2,664 users. Unguarded, Anderson's extrapolation swings the web
    tier's throughput between 92/s and 1,738/s for 35 sweeps; plain sweeps converge in 11 to
    the reference throughput. The restart keeps the solve within 20 sweeps and at that
    answer."""
    procs, cores = _provisional_network()
    ref = REF["provisional_network"]
    res = solve_decomposed(procs, 2664, ref["think_time_s"], servers=list(cores))
    assert res.converged and res.iterations <= 20
    assert res.throughput == pytest.approx(ref["throughput"], rel=1e-5)
    assert res.little_residual < 1e-3


@pytest.mark.slow
def test_a_sweep_solves_a_clear_bursty_bottleneck_first():
    """Marie's sweeps take the bursty tiers in visit order, except a bursty tier whose load per
    core is at least CLEAR_BOTTLENECK above every other tier's and feeds no wave queue: it goes
    first (it holds most users, and the others' arrivals are the rest's throughput with them).
    On the provisional model of the test above that takes 14 sweeps to 6 for the same answer
    (to the fixed point's tolerance); near a tie, or with exponential tiers after it, the order
    is the visit order (on bench/accuracy/random_networks.py's 640 solves moving the bottleneck
    first there too cost sweeps as often as it saved them)."""
    from solvers.decomposition import CLEAR_BOTTLENECK, downstream_groups, sweep_order

    def order(procs: list[MAP], cores: tuple[int, ...], bursty: list[int]) -> list[int]:
        return sweep_order(procs, cores, bursty, downstream_groups(procs, bursty))

    procs, cores = _provisional_network()
    assert order(procs, cores, [0, 2]) == [2, 0]
    ref = REF["provisional_network"]
    res = solve_decomposed(procs, 2664, ref["think_time_s"], servers=list(cores))
    assert res.converged and res.iterations <= 8
    assert res.throughput == pytest.approx(ref["throughput"], rel=1e-5)
    tie = [BURSTY.scaled(0.010), BURSTY.scaled(0.010 * CLEAR_BOTTLENECK * 0.99)]
    assert order(tie, (1, 1), [0, 1]) == [0, 1]
    waves = [BURSTY.scaled(0.001), BURSTY.scaled(0.020), MAP.exponential(0.002)]
    assert order(waves, (1, 1, 1), [0, 1]) == [0, 1]
    assert order(waves[:2], (1, 1), [0, 1]) == [1, 0]


@pytest.mark.slow
def test_the_held_users_move_with_andersons_extrapolation():
    """A solve of bench.speed.pipeline's 16-64-core workload (its fitted matrices, 1,008 users): web
    64 cores bursty, app 32 cores exponential (a wave queue after the web), db 32 cores
    bursty. With the users held in the app's waves updated plainly after each sweep, the held
    users and the web's throughput swing for the 50 combined sweeps and the rounds after them
    take the solve to 133 sweeps (the reference throughput, Little's law off by 6.6e-4 of N);
    once they swing they join Anderson's iterate with ``log nu`` (``HELD_UNIT``,
    ``_swinging``) and the combined sweeps converge, to a point within 1e-3 of that one. The
    sweeps this takes depend on rounding (the number of OpenBLAS threads), hence the loose
    bound."""
    ref = REF["held_users"]
    res = solve_decomposed([_web_64_cores(), MAP.exponential(1 / ref["app_rate"]),
                            _fitted(ref["db_D1"])], 1008, ref["think_time_s"],
                           servers=[64, 32, 32], per_job_max_cores=64)
    assert res.converged and res.iterations <= 60
    assert res.throughput == pytest.approx(ref["throughput"], rel=1e-3)
    assert res.little_residual < 2e-3


@pytest.mark.slow
def test_combined_sweeps_stop_once_the_answer_has_settled(monkeypatch):
    """Another solve of that workload (1,009 users, Z = 71 ms). From sweep ~31 on, the db's
    throughput (the reference tier's: the answer) stands still while the users held after the
    web move by 0.002-1.5 and its throughput by 1e-4 to 3e-2 a sweep; without a stop the
    combined sweeps run on to their 50 and rounds take the solve to 82 sweeps (the reference
    throughput). They stop once settled (``_settled``): within 40 sweeps, within 1e-3 of that
    answer. (The stop in a bounded swing, switched off here, would end this solve earlier.)"""
    monkeypatch.setattr(fixed_point, "SWING_SPAN", 0.0)
    ref = REF["settled_stop"]
    res = solve_decomposed([_fitted(ref["web_D1"]), MAP.exponential(ref["app_mean_s"]),
                            _fitted(ref["db_D1"])], 1009, ref["think_time_s"],
                           servers=[64, 32, 32], per_job_max_cores=64)
    assert res.converged and res.iterations <= 40
    assert res.throughput == pytest.approx(ref["throughput"], rel=1e-3)
    assert res.little_residual < 2e-3


@pytest.mark.slow
def test_combined_sweeps_stop_in_a_bounded_swing():
    """A model of that workload (1,008 users, Z = 64 ms) on the station at
    ``per_job_max_cores=16`` (both bursty tiers past 16 cores are one MAP at speed
    min(n, c)). The users held after the web swing 4.3 <-> 6.1 for as long as the sweeps run
    and the db's throughput (the answer) with them by up to 4e-4 a sweep, so neither other
    stop holds: without this one the combined sweeps run to their 50 and rounds take the
    solve to 101 sweeps (the reference throughput). They stop once the db's throughput stays
    within SWING_SPAN over SWING_SWEEPS sweeps: within 30 sweeps, within 1e-3 of that
    answer, flagged."""
    ref = REF["bounded_swing"]
    res = solve_decomposed([_web_64_cores(), MAP.exponential(ref["app_mean_s"]),
                            _fitted(ref["db_D1"])], 1008, ref["think_time_s"],
                           servers=[64, 32, 32], per_job_max_cores=16)
    assert res.converged and res.iterations <= 30
    assert res.throughput == pytest.approx(ref["throughput"], rel=1e-3)
    assert any(f.startswith(SWING_FLAG) for f in res.flags)
    assert res.little_residual < 2e-3


def test_a_bounded_swing_needs_its_sweeps_and_its_span():
    steady = [100.0 * (1 + 0.4 * SWING_SPAN * (-1) ** k) for k in range(SWING_SWEEPS)]
    assert bounded_swing(steady[1:]) is None                     # too few sweeps
    assert bounded_swing(steady) == pytest.approx(0.8 * SWING_SPAN / (1 + 0.4 * SWING_SPAN))
    assert bounded_swing([90.0] + steady) is not None            # only the last ones count
    assert bounded_swing(steady[:-1] + [100.0 * (1 + 2 * SWING_SPAN)]) is None


@pytest.mark.slow
def test_two_bursty_multicore_tiers_beyond_the_knee_match_the_physical_simulation():
    """System (c) of docs/accuracy.md at 1.5 knees (765 users): web 2 cores exponential, app 4
    cores bursty (I ~ 50), db 4 cores bursty (I ~ 200). The fixed point must converge with
    Little's law intact, and throughput and response time must match the simulated physical
    system. With the bursty tiers' weights cut to a geometric tail at 256 jobs the answer was
    +5.7% / +15.2% and Little's law was off by 10% of N."""
    from estimators.mapfit import fit_map2
    from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

    app, db = fit_map2(mean=0.008, idc=50, p95=0.024).process, BURSTY.scaled(0.008)
    res = solve_decomposed([MAP.exponential(0.004), app, db], 765, 1.0, servers=[2, 4, 4])
    assert res.converged and res.little_residual < 1e-6
    net = PhysicalNetwork(tiers=(Tier("web", 2, 0.004), Tier("app", 4, app), Tier("db", 4, db)),
                          classes=("all",), mix=(1.0,), think_time=1.0, population=765)
    sim = simulate_physical(net, 1000.0, warmup=100.0, replications=3, seed=5)
    X, R = sim.total_throughput, sim.total_response_time
    assert abs(res.throughput - X.mean) <= max(2 * X.half_width, 0.03 * X.mean)
    assert abs(res.response_time - R.mean) <= max(2 * R.half_width, 0.10 * R.mean)


@pytest.mark.parametrize("N", [5, 30, 60])
def test_multicore_exponential_networks_match_line_solver_load_dependent_mva(N):
    """The product-form part (think station + multi-core exponential tiers, the flow-equivalent
    server's convolution) against line-solver's load-dependent MVA, a peer implementation
    (at populations where line-solver reports itself stable; it does not at 200 users here)."""
    means, cores, Z = np.array([0.004, 0.012, 0.030]), [2, 4, 8], 0.7
    mu = np.array([[min(k, c) for k in range(1, N + 1)] for c in cores], float)
    XN, QN, _, _, _, stable, _ = pfqn_mvald(means[:, None], np.array([N]), np.array([Z]), mu)
    assert stable
    res = solve_decomposed([MAP.exponential(s) for s in means], N, Z, servers=cores)
    assert res.throughput == pytest.approx(float(np.ravel(XN)[0]), rel=1e-8)
    assert res.queue_length == pytest.approx(np.ravel(QN), rel=1e-5, abs=1e-8)


def test_a_later_sweep_refines_from_the_last_factorisation():
    """The fixed point's later sweeps change only a chain's arrival rates: the solution is
    refined from the last sweep's LU (no new factorisation) and equals a fresh solve; after a
    large change it still equals a fresh solve (refined or refactorised)."""
    from solvers.decomposition import FactorStore, per_job_transitions, solve_levels

    proc, cores, levels = BURSTY.scaled(0.02), 16, 300
    tr = per_job_transitions(levels, proc, cores)
    lam = np.linspace(760.0, 600.0, levels + 1)
    lam[-1] = 0.0
    store = FactorStore()
    solve_levels(lam, proc, cores, tr, True, store)
    first = store.factor.lub
    for factor in (1.01, 0.3):
        moved = lam * factor
        refined = solve_levels(moved, proc, cores, tr, True, store)
        fresh = solve_levels(moved, proc, cores, tr, True)
        if factor == 1.01:
            assert store.factor.lub is first
        assert refined.residual <= 1e-12
        assert refined.throughput == pytest.approx(fresh.throughput, rel=1e-10)
        assert refined.level == pytest.approx(fresh.level, rel=1e-7, abs=1e-13)


@pytest.mark.parametrize("Z", [0.0, 7.0])
def test_long_weight_heads_are_convolved_as_in_log_space(Z):
    """A bursty tier's load-dependent weights run to thousands of jobs; their convolution in
    scaled linear space equals the log-space sum of every term, where the conditional
    throughput rises and where it falls (log-convex weights, the bursty case)."""
    from solvers.decomposition import head_convolution, head_log, ld_weights, log_g_exponential

    N = 4000
    lg = log_g_exponential(np.array([0.002, 0.004]), (4, 4), [0, 1], N, Z)
    n = np.arange(N + 1)
    falling = np.where(n <= 16, n / 0.02, 800.0 * np.exp(-np.minimum(n, 2500) / 1000.0))
    rising = np.minimum(n, 8) / 0.01 * (1.0 + np.minimum(n, 2000) / 2000.0)
    for nu in (falling, rising):
        head, _ = ld_weights(nu, N)
        lh = head[: N + 1]
        fast, slow = head_convolution(lg, lh), head_log(lg, lh, 0, N + 1)
        assert np.all(np.isfinite(fast))
        assert fast == pytest.approx(slow, rel=1e-13, abs=1e-9)
        assert np.diff(fast) == pytest.approx(np.diff(slow), abs=1e-10)   # log X_rest


@pytest.mark.slow
def test_a_shared_memo_changes_no_answer_and_is_the_callers():
    """Solves of one model share what does not depend on ``N`` through the caller's
    :class:`SolveMemo` (a capacity search's probes): a solve after a larger one reads the
    exponential part's prefix and the per-job chain's head from it and gives exactly the
    answer of a solve without one; nothing is kept at module level."""
    import inspect

    import solvers.decomposition as decomposition
    from solvers.decomposition import SolveMemo

    procs = [MAP.exponential(0.0005), MAP.exponential(0.006), BURSTY.scaled(0.012),
             MAP.exponential(0.001), MAP.exponential(0.020)]
    cores = [1, 4, 8, 2, 16]
    memo = SolveMemo()
    solve_decomposed(procs, 760, 2.0, servers=cores, memo=memo)
    assert len(memo.prefixes) and len(memo.heads)
    shared = solve_decomposed(procs, 700, 2.0, servers=cores, memo=memo)
    alone = solve_decomposed(procs, 700, 2.0, servers=cores)
    assert shared.throughput == alone.throughput
    np.testing.assert_array_equal(shared.residence_time, alone.residence_time)
    assert not [name for module in vars(decomposition).values() if inspect.ismodule(module)
                for name, value in vars(module).items()
                if isinstance(value, (decomposition.Memo, SolveMemo))]


def test_a_long_per_job_chain_is_truncated_once_where_the_speed_scaled_one_needs(monkeypatch):
    """4 tiers, a 16-core bursty database at 2,000 users: the first truncation comes from the
    speed-scaled chain on every level (the heavier queue), so the per-job chain is factorised
    once, on about half the levels, and its answer is the one on every level."""
    from solvers.decomposition import chain

    procs = [MAP.exponential(0.002), MAP.exponential(0.010), MAP.exponential(0.004),
             BURSTY.scaled(0.020)]
    cores = [4, 8, 4, 16]
    sizes = []
    real = chain.factor_and_solve

    def counted(lam, proc, c, tr, *args):
        if tr.level.shape[0] > 2 * lam.shape[0]:          # per-job (speed-scaled: 2 a level)
            sizes.append(lam.shape[0] - 1)
        return real(lam, proc, c, tr, *args)

    monkeypatch.setattr(chain, "factor_and_solve", counted)
    res = solve_decomposed(procs, 2000, 7.0, servers=cores)
    assert len(sizes) == 1 and 1000 < sizes[0] < 1500, sizes
    monkeypatch.setattr(chain, "first_levels", lambda lam, *args: lam.shape[0] - 1)
    del sizes[:]
    every = solve_decomposed(procs, 2000, 7.0, servers=cores)
    assert sizes == [2000]
    assert res.throughput == pytest.approx(every.throughput, rel=1e-12)
    np.testing.assert_allclose(res.residence_time, every.residence_time, rtol=1e-10)


def _simulated(procs: list[MAP], cores: list[int], Z: float, N: int, seed: int,
               duration: float = 5000.0):
    """The simulated physical system, one class, 3 x ``duration`` s after a tenth of it."""
    from solvers.simulation.physical import PhysicalNetwork, Tier, simulate_physical

    tiers = tuple(Tier(f"t{m}", c, p if p.order > 1 else p.mean)
                  for m, (p, c) in enumerate(zip(procs, cores)))
    return simulate_physical(PhysicalNetwork(tiers, ("a",), (1.0,), Z, N), duration,
                             warmup=duration / 10, replications=3, seed=seed)


def _simulated_throughput(procs: list[MAP], cores: list[int], Z: float, N: int, seed: int):
    """:func:`_simulated`'s throughput (an Estimate), 3 x 5,000 s."""
    return _simulated(procs, cores, Z, N, seed).throughput[0]


@pytest.mark.slow
def test_a_wave_queue_the_population_bounds_keeps_the_product_form():
    """A 16-core tier at ~79% behind a bursty 4-core one whose slow phase is 20x slower (two
    bursty tiers, past the knee): the tier's open MAP/M/c queue fed by the bursty tier's
    departures would hold 1,614 jobs where the closed network has ~108 users outside its
    think station; the held users it implies would empty the rest and leave the bursty chains
    no arrivals. That queue keeps the product form instead (flagged) and the throughput is the
    simulated physical system's (74.1 against 73.9 +- 1.1 over 3 x 20,000 s)."""
    ref = REF["wave_queue_bounded"]
    procs = [_map(ref["front"]), MAP.exponential(ref["app_mean_s"]),
             MAP.exponential(ref["cache_mean_s"]), _map(ref["back"])]
    cores, Z, N = [4, 16, 1, 2], ref["think_time_s"], 500
    res = solve_decomposed(procs, N, Z, servers=cores)
    assert any("tier 1: the queue fed by tier 0's departures" in f and "exceeds" in f
               for f in res.flags), res.flags
    assert np.isfinite(res.queue_length).all() and np.isfinite(res.residence_time).all()
    x = _simulated_throughput(procs, cores, Z, N, seed=3)
    assert abs(res.throughput - x.mean) <= max(0.03 * x.mean, x.half_width), (res.throughput, x)


@pytest.mark.slow
def test_when_the_waves_swing_marie_s_sweeps_step_4_goes_by_rounds():
    """Two adjacent bursty tiers (8 cores, then one core whose slow phase is 46x slower) and an
    exponential tier fed by the second's waves, at 1.5 knees: updating the users held in the
    waves after every sweep makes Marie's iteration swing (relative change 11 after 50 sweeps;
    the throughput 29.1/s, Little's law off by 43% of N, against 37.6 simulated). The solve
    takes step 4 by rounds when the sweeps do not converge: each round a converged fixed point
    at fixed held users (throughput 39.1, Little's law within 1e-4)."""
    ref = REF["waves_swing"]
    procs = [_map(ref["first"]), _map(ref["second"]), MAP.exponential(1 / ref["last_rate"])]
    cores, Z, N = [8, 1, 1], ref["think_time_s"], 273
    res = solve_decomposed(procs, N, Z, servers=cores)
    assert res.converged and res.little_residual < 1e-3, (res.flags, res.little_residual)
    x = _simulated_throughput(procs, cores, Z, N, seed=3)
    assert abs(res.throughput / x.mean - 1) <= 0.06 + x.half_width / x.mean, (res.throughput, x)
