"""The fixed-population-mean route (solvers.open.fixed_population) for closed networks of many
users: closed forms (exact MVA of exponential stations), the search's monotonicity and
Little's law, bad input, and the pipeline's model taking the route from
OPEN_ROUTE_POPULATION users (flagged)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.mva import mva
from solvers.open import mm_c
from solvers.open.fixed_population import (departure_process, forget_held, open_at_rate,
                                           population_at, solve_fixed_population)
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from streams.predict import prediction
from streams.predict.model import OPEN_ROUTE_POPULATION, SystemModel

BURSTY = MAP(BURSTY_D0, BURSTY_D1)


@pytest.mark.parametrize("cores", [1, 4])
@pytest.mark.parametrize("knees", [0.5, 2.0, 5.0])
def test_exponential_station_matches_exact_mva_at_large_n(cores, knees):
    """One exponential station of ``c`` cores (S = 4 ms x c), Z = 2 s: knee ~500 users.
    Away from the knee the open route is within 0.5% on X and 3% on R of exact MVA at
    250-2,500 users (at the knee itself the closed network's queue, ~sqrt(N) jobs, is where
    the open one differs most: not asserted here)."""
    S, Z = 0.004 * cores, 2.0
    n = int(round(knees * (Z + S) * cores / S))
    exact = mva([S], [n], Z, [cores])
    x, r = float(exact.throughput[0]), float(exact.response_time[0])
    got = solve_fixed_population([MAP.exponential(S)], n, Z, servers=[cores])
    assert got.throughput == pytest.approx(x, rel=5e-3)
    assert got.response_time == pytest.approx(r, rel=0.03)
    assert got.little_residual <= 1e-3 * n


def test_product_form_tiers_match_exact_mva_beyond_the_knee():
    procs = [MAP.exponential(0.002), MAP.exponential(0.005), MAP.exponential(0.010)]
    cores, Z, n = [1, 1, 1], 1.0, 1000                  # knee ~102
    exact = mva([p.mean for p in procs], [n], Z)
    got = solve_fixed_population(procs, n, Z, servers=cores)
    assert got.throughput == pytest.approx(float(exact.throughput[0]), rel=2e-3)
    assert got.response_time == pytest.approx(float(exact.response_time[0]), rel=0.03)
    assert got.stations == ("erlang-c",) * 3


def test_population_rises_with_the_rate_and_the_answers_with_n():
    procs = [MAP.exponential(0.002), BURSTY.scaled(0.010), MAP.exponential(0.004),
             BURSTY.scaled(0.020)]
    cores, Z = [4, 8, 4, 16], 7.0
    sat = 800.0
    pops = [population_at(procs, f * sat, Z, cores) for f in (0.1, 0.3, 0.5, 0.7, 0.9, 0.99)]
    assert all(b > a for a, b in zip(pops, pops[1:]))
    assert population_at(procs, sat, Z, cores) == math.inf      # saturated: inf, never NaN
    res = [solve_fixed_population(procs, n, Z, servers=cores) for n in (1000, 3000, 6000)]
    xs, rs = [r.throughput for r in res], [r.response_time for r in res]
    assert xs[0] < xs[1] < xs[2] < sat and rs[0] < rs[1] < rs[2] < math.inf
    for r in res:
        assert r.little_residual <= 1e-3 * r.population
        assert r.stations == ("erlang-c", "per-job", "erlang-c (waves)", "per-job (waves)")
        assert r.open_solves <= 40


def test_zero_population_and_bad_input():
    zero = solve_fixed_population([MAP.exponential(0.01)], 0, 1.0)
    assert zero.throughput == 0.0 and zero.response_time == pytest.approx(0.01)
    with pytest.raises(ValueError, match="population"):
        solve_fixed_population([MAP.exponential(0.01)], -3, 1.0)
    with pytest.raises(ValueError, match="think_time"):
        solve_fixed_population([MAP.exponential(0.01)], 10, math.nan)
    with pytest.raises(ValueError, match="servers"):
        solve_fixed_population([MAP.exponential(0.01)], 10, 1.0, servers=[0])
    with pytest.raises(ValueError, match="processes"):
        solve_fixed_population([0.01], 10, 1.0)


def _model() -> SystemModel:
    D = np.array([[0.002], [0.010], [0.004], [0.020]])
    return SystemModel(tiers=["web", "app", "cache", "db"], classes=["a"], D_mc=D,
                       mix=np.array([1.0]), servers=np.array([4.0, 8.0, 4.0, 16.0]),
                       think_time=7.0, sla=np.array([0.1]),
                       processes=[MAP.exponential(1.0), BURSTY.scaled(1.0),
                                  MAP.exponential(1.0), BURSTY.scaled(1.0)],
                       map_limit=100_000)


@pytest.mark.slow
def test_model_takes_the_open_route_from_the_threshold_and_flags_it():
    model = _model()
    below = model.at(OPEN_ROUTE_POPULATION - 1, tol=1e-3)
    at = model.at(OPEN_ROUTE_POPULATION)
    assert below.model == "map-fes" and at.model == "map-fpm"
    assert at.bottleneck is None and np.all(np.isfinite(at.response))
    # either side of the threshold the two routes agree closely at this light load
    assert at.throughput == pytest.approx(below.throughput, rel=0.01)
    assert float(at.residence.sum()) == pytest.approx(float(below.residence.sum()), rel=0.3)
    flags = prediction.solver_flags(model, model)
    assert any(f.startswith("MAP network solved through the open route") and
               f"populations >= {OPEN_ROUTE_POPULATION}" in f for f in flags)


def test_model_route_flag_alone():
    model = _model()
    point = model.at(5000)
    assert point.model == "map-fpm" and 600 < point.throughput < 800
    flags = prediction.solver_flags(model, model)
    assert [f for f in flags if "open route" in f] == [
        "MAP network solved through the open route (fixed-population mean, Whitt 1984) at "
        "populations >= 5000: thousands of users, an open network at the rate whose mean "
        "population is N"]


@pytest.mark.parametrize("cores", [1, 8])
def test_departures_of_a_stable_bursty_tier_carry_its_arrival_rate_in_waves(cores):
    """A stable queue's departures have its arrival rate (flow conservation); the tier after
    it, fed them, waits longer than under Poisson arrivals (the waves of a slow run's end)."""
    proc = BURSTY.scaled(0.01 * cores / 8)
    rate = 0.6 * cores / proc.mean
    exact = departure_process(proc, cores, rate, negligible=1e-10)
    assert exact.rate == pytest.approx(rate, rel=1e-6)
    dep = departure_process(proc, cores, rate)     # phases below WAVE_PHASE_SHARE dropped,
    assert dep.rate == pytest.approx(rate, rel=1e-12)     # the rate kept exactly
    assert dep.D0.shape[0] <= exact.D0.shape[0]
    from solvers.departures import map_m_c_mean
    waved = map_m_c_mean(dep, 0.004, 4) / rate
    assert waved > mm_c(rate, 0.004, 4).wait + 0.004
    assert departure_process(proc, cores, 1.01 * cores / proc.mean) is None


@pytest.mark.parametrize("cores", [1, 4, 16])
def test_the_waves_queue_solves_the_boundary_through_d1_g_as_map_m_c_mean(cores):
    """The waves' MAP/M/c queue (``wave_jobs``: each boundary level's ``D1 G_n`` solved
    directly) gives :func:`solvers.departures.map_m_c_mean`'s mean jobs (``G_n`` inverted),
    and Erlang C's for Poisson arrivals (a one-phase MAP)."""
    from solvers.departures import DepartureMAP, map_m_c_mean, through_tier
    from solvers.open.fixed_population import wave_jobs
    app = BURSTY.scaled(0.01)
    rate = 0.55 * 8 / 0.01
    mean = 0.7 * cores / rate
    dep = through_tier(departure_process(app, 8, rate), 1000.0)
    assert wave_jobs(dep, mean, cores, tol=1e-7, predicted=False) == pytest.approx(
        map_m_c_mean(dep, mean, cores, tol=1e-7), rel=1e-9)
    assert wave_jobs(dep, mean, cores, tol=1e-7) == pytest.approx(
        map_m_c_mean(dep, mean, cores, tol=1e-7), rel=1e-6)
    poisson = DepartureMAP(np.array([[-rate]]), np.array([[rate]]), np.array([1.0]))
    assert wave_jobs(poisson, mean, cores) == pytest.approx(
        rate * (mm_c(rate, mean, cores).wait + mean), rel=1e-9)


@pytest.mark.parametrize("load", [0.45, 0.6, 0.75, 0.9])
def test_the_waves_g_stops_on_its_predicted_step_a_doubling_sooner(load, monkeypatch):
    """``wave_jobs`` stops the shifted reduction once quadratic convergence puts its next step
    below the tolerance: at most as many doublings as the reduction run to it (fewer
    somewhere on this network's waves), the queue's jobs within 1e-6 of that reduction's."""
    from solvers.departures import through_tier
    from solvers.open import fixed_population as fp, qbd
    app = BURSTY.scaled(0.01)
    rate = load * 8 / 0.01
    dep = departure_process(app, 8, rate)
    calls: list[int] = []
    real = qbd.dgetrf

    def counted(a):
        calls.append(1)
        return real(a)

    monkeypatch.setattr(qbd, "dgetrf", counted)
    saved = 0
    for d, mean, cores in ((dep, 0.004, 4), (through_tier(dep, 1000.0), 0.02, 16)):
        steps = []
        for predicted in (False, True):
            calls.clear()
            jobs = fp.wave_jobs(d, mean, cores, tol=fp.G_TOLERANCE, predicted=predicted)
            steps.append((len(calls), jobs))
        assert steps[1][0] <= steps[0][0]
        assert steps[1][1] == pytest.approx(steps[0][1], rel=1e-6)
        saved += steps[0][0] - steps[1][0]
    assert saved >= 1


def test_a_departure_process_held_pattern_gives_the_same_process_at_another_rate():
    """The departure process's rate-free part is built once a chain pattern and served at
    every rate: a second rate's process equals the one built with that part emptied."""
    from solvers.open import fixed_population as fp
    proc = BURSTY.scaled(0.01)
    fp._DEPARTURE_PATTERNS.clear()
    departure_process(proc, 8, 400.0)
    assert len(fp._DEPARTURE_PATTERNS) == 1
    held = departure_process(proc, 8, 450.0)
    assert len(fp._DEPARTURE_PATTERNS) == 1
    fp._DEPARTURE_PATTERNS.clear()
    fresh = departure_process(proc, 8, 450.0)
    np.testing.assert_array_equal(held.D0, fresh.D0)
    np.testing.assert_array_equal(held.D1, fresh.D1)


def test_a_bursty_tier_behind_the_waves_adds_their_wait_to_its_own():
    """A bursty tier reached by another bursty tier's waves (through an exponential one) waits
    its M/MAP/c wait plus what the waves add over Poisson arrivals (MAP/M/c less M/M/c: the
    Allen-Cunneen form is linear in the two variabilities); without the waves, M/MAP/c alone."""
    from solvers.departures import map_m_c_mean, through_tier
    from solvers.open import m_map_c
    app, db = BURSTY.scaled(0.01), BURSTY.scaled(0.02)
    procs, cores = [app, MAP.exponential(0.004), db], [8, 4, 16]
    res = solve_fixed_population(procs, 3000, 7.0, servers=cores, interpolate_span=0.0)
    assert not res.interpolated
    rate = res.throughput
    dep = through_tier(departure_process(app, 8, rate), 4 / 0.004)
    own = m_map_c(rate, db, 16).wait
    extra = map_m_c_mean(dep, 0.02, 16) / rate - 0.02 - mm_c(rate, 0.02, 16).wait
    assert extra > 0.1 * own > 0
    assert res.residence_time[2] == pytest.approx(0.02 + own + extra, rel=1e-9)
    assert res.stations[2] == "per-job (waves)"
    assert res.little_residual <= 1e-5 * 3000
    plain = solve_fixed_population(procs, 3000, 7.0, servers=cores, waves=False,
                                   interpolate_span=0.0)
    assert plain.residence_time[2] == pytest.approx(0.02 + m_map_c(plain.throughput, db,
                                                                    16).wait, rel=1e-9)


def test_a_solve_not_into_the_bursty_tier_leaves_out_only_what_the_waves_add_there():
    """``into_bursty=False`` (the capacity search's aim): the tiers behind a bursty one fed its
    waves as in the full solve, the next bursty tier's wait its M/MAP/c wait alone (as without
    the waves), held apart from the full solve at the same rate."""
    from solvers.open import m_map_c
    forget_held()
    procs, cores = [BURSTY.scaled(0.01), MAP.exponential(0.004), BURSTY.scaled(0.02)], [8, 4, 16]
    rate = 0.6 * 8 / 0.01
    rough, n_rough = open_at_rate(procs, rate, 7.0, servers=cores, into_bursty=False)
    full, n_full = open_at_rate(procs, rate, 7.0, servers=cores)
    plain, _ = open_at_rate(procs, rate, 7.0, servers=cores, waves=False)
    assert rough.residence_time[1, 0] == full.residence_time[1, 0] > plain.residence_time[1, 0]
    assert rough.residence_time[2, 0] == pytest.approx(
        0.02 + m_map_c(rate, procs[2], 16).wait, rel=1e-12)
    assert rough.residence_time[2, 0] == pytest.approx(plain.residence_time[2, 0], rel=1e-12)
    assert full.residence_time[2, 0] > rough.residence_time[2, 0]
    assert n_full > n_rough
    again, _ = open_at_rate(procs, rate, 7.0, servers=cores)
    assert again is full


@pytest.mark.parametrize("n", [1, 40, 1000, 5000, pytest.param(20000, marks=pytest.mark.slow)])
def test_the_search_meets_its_tolerance_in_a_few_solves(n):
    """The model-guided search (``R = A + B / (sat - lambda)`` through the last two probes)
    lands within ``rate_tol`` of the root, relative to ``min(N / (Z + sum S), sat)``, in at
    most 4 open solves up to the knee and few beyond it; a tighter tolerance agrees."""
    procs = [MAP.exponential(0.002), BURSTY.scaled(0.010), MAP.exponential(0.004),
             BURSTY.scaled(0.020)]
    cores, Z = [4, 8, 4, 16], 7.0
    res = solve_fixed_population(procs, n, Z, servers=cores)
    tight = solve_fixed_population(procs, n, Z, servers=cores, rate_tol=1e-10,
                                   interpolate_span=0.0)
    top = min(n / (Z + 0.036), 800.0)
    assert abs(res.throughput - tight.throughput) <= 1e-5 * top
    assert res.little_residual <= 1e-5 * n
    assert res.open_solves <= (4 if n <= 5000 else 8)


LARGE = ([MAP.exponential(0.002), BURSTY.scaled(0.010), MAP.exponential(0.004),
          BURSTY.scaled(0.020)], [4, 8, 4, 16], 7.0)


@pytest.mark.parametrize("rate", [0.5, 5.0, 50.0])
def test_a_tier_fed_the_waves_never_takes_less_than_its_service_time(rate):
    """The departures keep only their frequent phases (WAVE_PHASE_SHARE), rescaled to carry
    the arrival rate: at low rates the tiers behind the bursty app take at least their service
    time (the dropped phases' flux left the cache 4.2e-6 below it at 5 requests/s), so ``R``
    rises with the rate and the search's model of it holds (2 solves at 40 users after 1)."""
    procs, cores, z = LARGE
    forget_held()
    res, _ = open_at_rate(procs, rate, z, servers=cores)
    assert res.stations[2].endswith("(waves)")
    assert res.residence_time[2, 0] >= 0.004 and res.residence_time[3, 0] >= 0.020
    assert float(res.response_time[0]) >= 0.036
    forget_held()
    solve_fixed_population(procs, 1, z, servers=cores)
    assert solve_fixed_population(procs, 40, z, servers=cores).open_solves <= 2


@pytest.mark.parametrize("n", [3000, 5000])
def test_the_answer_read_off_the_model_agrees_with_a_solve_at_its_rate(n):
    """The search's last step read off ``R = A + B / (sat - lambda)`` through the two solved
    ends of a narrow bracket (no solve at the root itself) agrees with a search to 1e-10 that
    solves the root: the rate within the search's tolerance, R and every tier within 1e-4,
    Little's law kept; fewer open solves."""
    procs, cores, z = LARGE
    forget_held()
    got = solve_fixed_population(procs, n, z, servers=cores)
    forget_held()
    exact = solve_fixed_population(procs, n, z, servers=cores, rate_tol=1e-10,
                                   interpolate_span=0.0)
    assert got.interpolated and not exact.interpolated
    assert got.open_solves < exact.open_solves
    assert abs(got.throughput - exact.throughput) <= 1e-5 * min(n / (z + 0.036), 800.0)
    assert got.response_time == pytest.approx(exact.response_time, rel=1e-4)
    np.testing.assert_allclose(got.residence_time, exact.residence_time, rtol=1e-4)
    np.testing.assert_allclose(got.queue_length, got.throughput * got.residence_time,
                               rtol=1e-12)
    assert got.little_residual <= 1e-5 * n
    assert got.stations == exact.stations


@pytest.mark.slow
def test_solves_held_by_rate_serve_other_populations_without_changing_answers():
    """The open solves do not depend on N: a search after others (a capacity search's
    probes) starts from the rates they solved, needs at most two more solves, and answers as
    a first search does (within the search's tolerance: R within 1e-4)."""
    procs, cores, z = LARGE
    first = {}
    for n in (3000, 4000, 4200):
        forget_held()
        first[n] = solve_fixed_population(procs, n, z, servers=cores)
    forget_held()
    for n in (3000, 4000, 4200):
        res = solve_fixed_population(procs, n, z, servers=cores)
        assert res.response_time == pytest.approx(first[n].response_time, rel=1e-4)
        assert res.throughput == pytest.approx(first[n].throughput, rel=2e-5)
        if n > 3000:
            assert res.open_solves <= 2
    with pytest.raises(ValueError, match="interpolate_span"):
        solve_fixed_population(procs, 10, z, servers=cores, interpolate_span=1.5)
