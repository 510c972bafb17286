"""Open tiers (solvers.open.queues, solvers.open.tiers, solvers.open.qbd) against closed forms
(M/M/1, Erlang C, Pollaczek-Khinchine), line-solver's exact MAP/PH/c and MAP/M/c queues, and
the open-queue simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

# ``solvers`` before ``line_solver`` (line_solver's sys.path entry shadows our package name)
from solvers.open import (  # isort: skip
    m_map_c, map_m_c, mm_c, solve_open, solve_open_tiers, tiers_capacity)
from solvers.open.qbd import (cyclic_reduction, logarithmic_reduction,  # isort: skip
                              shifted_cyclic_reduction)
from solvers.processes import MAP  # isort: skip
from solvers.simulation.mmpp import mmpp2_design  # isort: skip
from solvers.simulation.network import Queue  # isort: skip
from solvers.simulation.open_queue import OpenNetwork, simulate_open  # isort: skip

from line_solver.api.qsys.map_queues import qsys_mapmc  # isort: skip  # noqa: E402
from line_solver.api.qsys.mapphc import qsys_mapphc  # isort: skip  # noqa: E402


def _h2(p: float = 0.3, fast: float = 3.0, slow: float = 0.5) -> tuple[MAP, np.ndarray,
                                                                       np.ndarray]:
    """A renewal hyperexponential MAP: every interval starts in phase 1 w.p. ``p``."""
    D0 = np.diag([-fast, -slow])
    alpha = np.array([p, 1.0 - p])
    return MAP(D0, np.outer([fast, slow], alpha)), alpha, D0


def test_mm1_and_erlang_c_closed_forms():
    q = mm_c(0.8, 1.0, 1)
    assert q.wait == pytest.approx(0.8 / (1.0 - 0.8) * 1.0, rel=1e-12)   # rho S / (1 - rho)
    assert q.jobs == pytest.approx(0.8 / 0.2, rel=1e-12)
    # M/M/2, a = 1.5: C = a^2/(2!(1-rho)) / (1 + a + a^2/(2!(1-rho))) = 0.6428...
    a, c = 1.5, 2
    top = a**2 / 2 / (1 - a / c)
    erl = top / (1 + a + top)
    assert mm_c(a, 1.0, c).wait == pytest.approx(erl / (c - a), rel=1e-12)


@pytest.mark.parametrize("cores", [1, 4, 16])
def test_poisson_map_of_order_two_gives_erlang_c(cores):
    """A MAP of order 2 that is Poisson (both phases rate 1) through the per-job chain."""
    poisson = MAP([[-2.0, 1.0], [1.0, -2.0]], [[0.5, 0.5], [0.5, 0.5]])
    lam = 0.85 * cores
    assert m_map_c(lam, poisson, cores).wait == pytest.approx(mm_c(lam, 1.0, cores).wait,
                                                               rel=1e-9)


def test_renewal_map_on_one_core_is_pollaczek_khinchine():
    proc, _, _ = _h2()
    lam = 0.7 / proc.mean
    pk = lam * proc.moment(2) / (2.0 * (1.0 - lam * proc.mean))
    assert m_map_c(lam, proc, 1).wait == pytest.approx(pk, rel=1e-9)


@pytest.mark.parametrize("cores", [2, 4, 8])
def test_renewal_map_on_many_cores_matches_line_solver_mapphc(cores):
    """Per-job phases with a renewal MAP are the exact M/PH/c queue."""
    proc, alpha, D0 = _h2()
    lam = 0.8 * cores / proc.mean
    exact = qsys_mapphc([[-lam]], [[lam]], alpha, D0, cores)
    assert m_map_c(lam, proc, cores).wait == pytest.approx(exact.meanWaitingTime, rel=1e-8)


@pytest.mark.parametrize("cores,idc", [(1, 20.0), (4, 30.0), (8, 80.0)])
def test_mmpp_arrivals_match_line_solver_mapmc(cores, idc):
    arrivals = mmpp2_design(0.005, idc).scaled(1.0 / (0.75 * cores))
    exact = qsys_mapmc(arrivals.D0, arrivals.D1, 1.0, cores)
    assert map_m_c(arrivals, 1.0, cores).wait == pytest.approx(exact.meanWaitingTime, rel=1e-6)


def test_logarithmic_reduction_gives_a_stochastic_g_solving_the_equation():
    proc = mmpp2_design(0.02, 50.0)
    lam = 0.9 / proc.mean
    A0, A1, A2 = lam * np.eye(2), proc.D0 - lam * np.eye(2), proc.D1
    G = logarithmic_reduction(A0, A1, A2)
    assert np.allclose(G.sum(axis=1), 1.0, atol=1e-10)
    assert np.abs(A2 + A1 @ G + A0 @ G @ G).max() < 1e-9


@pytest.mark.parametrize("load", [0.3, 0.9, 0.99])
def test_cyclic_reduction_gives_logarithmic_reductions_g(load):
    """Cyclic reduction (Bini and Meini 1996) solves the same equation to its tolerance: the
    minimal, stochastic ``G`` of a positive recurrent QBD, as logarithmic reduction's; a
    transient one (drift up: no stochastic ``G``) raises instead of looping."""
    proc = mmpp2_design(0.02, 50.0)
    lam = load / proc.mean
    A0, A1, A2 = lam * np.eye(2), proc.D0 - lam * np.eye(2), proc.D1
    G = cyclic_reduction(A0, A1, A2, 1e-12)
    assert np.allclose(G.sum(axis=1), 1.0, atol=1e-12)
    assert np.abs(G - logarithmic_reduction(A0, A1, A2)).max() < 1e-10
    up = 1.2 / proc.mean * np.eye(2)
    with pytest.raises(np.linalg.LinAlgError):
        cyclic_reduction(up, proc.D0 - up, proc.D1)


@pytest.mark.parametrize("load", [0.3, 0.9, 0.99])
def test_shifted_cyclic_reduction_gives_the_same_g_and_refuses_a_transient_qbd(load):
    """The shifted reduction (He, Meini and Rhee 2001) solves the unshifted equation: ``G``
    stochastic and logarithmic reduction's, both on an M/MMPP(2)/1 QBD and on the waves'
    ``MAP/M/c`` queue above ``c`` (``A2 = c mu I``); a QBD drifting up has no stochastic
    ``G`` to shift: it raises instead of returning the shift's fixed point."""
    proc = mmpp2_design(0.02, 50.0)
    lam = load / proc.mean
    for A0, A1, A2 in ((lam * np.eye(2), proc.D0 - lam * np.eye(2), proc.D1),
                       (proc.D1, proc.D0 - proc.rate / load * np.eye(2),
                        proc.rate / load * np.eye(2))):
        G = shifted_cyclic_reduction(A0, A1, A2, 1e-12)
        assert np.allclose(G.sum(axis=1), 1.0, atol=1e-12)
        assert np.abs(A2 + A1 @ G + A0 @ G @ G).max() < 1e-9 * np.abs(A1).max()
        assert np.abs(G - logarithmic_reduction(A0, A1, A2)).max() < 1e-10
    up = 1.2 / proc.mean * np.eye(2)
    with pytest.raises(np.linalg.LinAlgError):
        shifted_cyclic_reduction(up, proc.D0 - up, proc.D1)


@pytest.mark.parametrize("load", [0.3, 0.9, 0.99])
def test_shifted_reduction_reads_the_drift_off_given_phases(load):
    """With the phases' stationary vector given (the arrival MAP's, on a ``MAP/M/c`` queue
    above ``c``: ``A0 + A1 + A2 = D0 + D1``) the shifted reduction gives the ``G`` it gives
    without, bit for bit, and still refuses a QBD drifting up."""
    proc = mmpp2_design(0.02, 50.0)
    s = proc.rate / load
    A0, A1, A2 = proc.D1, proc.D0 - s * np.eye(2), s * np.eye(2)
    w = proc.theta
    assert np.array_equal(shifted_cyclic_reduction(A0, A1, A2, 1e-12, phases=w),
                          shifted_cyclic_reduction(A0, A1, A2, 1e-12))
    slow = proc.rate / 1.2 * np.eye(2)
    with pytest.raises(np.linalg.LinAlgError):
        shifted_cyclic_reduction(A0, proc.D0 - slow, slow, phases=w)


@pytest.mark.parametrize("load", [0.3, 0.9, 0.99])
def test_the_scaled_identity_first_step_gives_the_general_steps_g(load):
    """``down_scale``: ``A2 = s I`` (a ``MAP/M/c`` queue above ``c``), the first reduction
    step by that structure (a scaling less a rank-one term) instead of two solves and four
    products: the same ``G`` within rounding (and logarithmic reduction's), on an MMPP(2)
    and on a 6-phase MAP with off-diagonal ``D0`` and a rank-deficient ``D1``, stopped on the
    step or on its prediction."""
    rng = np.random.default_rng(7)
    D0 = rng.uniform(0.0, 3.0, (6, 6)) * (rng.uniform(size=(6, 6)) < 0.4)
    D1 = rng.uniform(0.0, 2.0, (6, 6)) * (rng.uniform(size=(6, 6)) < 0.5)
    D1[:, 0] = D1[:, 1]                                 # rank-deficient, as a lumped process
    np.fill_diagonal(D0, 0.0)
    D0 -= np.diag(D0.sum(axis=1) + D1.sum(axis=1))
    for proc in (mmpp2_design(0.02, 50.0), MAP(D0, D1)):
        s = proc.rate / load
        A0, A1, A2 = proc.D1, proc.D0 - s * np.eye(proc.order), s * np.eye(proc.order)
        for predicted in (False, True):
            general = shifted_cyclic_reduction(A0, A1, A2, 1e-12, predicted=predicted)
            scaled = shifted_cyclic_reduction(A0, A1, A2, 1e-12, predicted=predicted,
                                              down_scale=s)
            assert np.abs(scaled - general).max() < 1e-12
            assert np.abs(scaled - logarithmic_reduction(A0, A1, A2)).max() < 1e-10


def test_max_abs_is_numpys_and_keeps_nan():
    """:func:`solvers.open.qbd._max_abs` (BLAS ``idamax``) gives ``max |a|`` exactly,
    negative, C- or Fortran-ordered; a block of NaN gives NaN (the reduction then stops)."""
    from solvers.open.qbd import _max_abs
    rng = np.random.default_rng(3)
    for shape in ((1, 1), (7, 3), (80, 80)):
        a = rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 5, shape)
        assert _max_abs(a) == float(np.max(np.abs(a)))
        assert _max_abs(np.asfortranarray(-a)) == float(np.max(np.abs(a)))
    assert math.isnan(_max_abs(np.full((3, 3), np.nan)))


@pytest.mark.parametrize("load", [0.5, 0.9, 0.99])
def test_a_bursty_tiers_chain_takes_g_by_the_shifted_reduction(load, monkeypatch):
    """The M/MAP/c chain's ``R`` comes from ``G`` by shifted cyclic reduction (stopped on its
    predicted step), not logarithmic reduction: the same queue with logarithmic reduction
    failing, within 1e-9 of the one it gives; logarithmic reduction only where the shifted
    one raises."""
    from solvers.open import qbd, queues
    proc = mmpp2_design(0.01, 50.0).scaled(0.05)
    lam = load * 8 / 0.05
    queues._CHAINS.clear()
    want = m_map_c(lam, proc, 8)

    def refuse(*args, **kwargs):
        raise AssertionError("logarithmic reduction called")

    monkeypatch.setattr(qbd, "logarithmic_reduction", refuse)
    queues._CHAINS.clear()
    got = m_map_c(lam, proc, 8)
    assert got.wait == pytest.approx(want.wait, rel=1e-9)

    def fail(*args, **kwargs):
        raise np.linalg.LinAlgError("no convergence")

    monkeypatch.undo()
    monkeypatch.setattr(qbd, "shifted_cyclic_reduction", fail)
    queues._CHAINS.clear()
    assert m_map_c(lam, proc, 8).wait == pytest.approx(want.wait, rel=1e-9)
    queues._CHAINS.clear()


def test_bursty_tier_waits_longer_than_exponential_and_cost_does_not_grow_with_load():
    proc = mmpp2_design(0.01, 50.0).scaled(0.05)
    light, heavy = (m_map_c(rho * 16 / 0.05, proc, 16) for rho in (0.5, 0.98))
    assert light.station == heavy.station == "per-job"
    assert light.states == heavy.states                 # the boundary only, whatever the load
    assert heavy.wait > light.wait > mm_c(0.5 * 16 / 0.05, 0.05, 16).wait


@pytest.mark.parametrize("rho", [1.0, 1.3])
def test_saturated_tier_is_flagged_never_nan(rho):
    proc = mmpp2_design(0.01, 50.0).scaled(0.05)
    for q in (m_map_c(rho * 16 / 0.05, proc, 16), mm_c(rho * 4, 1.0, 4),
              map_m_c(mmpp2_design(0.05, 30.0).scaled(1 / (rho * 4)), 1.0, 4)):
        assert not q.stable and math.isinf(q.wait) and q.utilization == pytest.approx(rho)
    res = solve_open_tiers([300.0, 200.0], [[0.01, 0.01], [0.02, 0.02]], [8, 8],
                           processes=[None, proc])
    assert not res.stable and res.saturated_tiers == (1,)
    assert np.all(np.isinf(res.response_time)) and not np.any(np.isnan(res.residence_time))
    assert "capacity exceeded" in res.flags[0]


def test_exponential_tiers_with_equal_class_services_are_the_product_form():
    S = np.array([[0.01, 0.01], [0.02, 0.02], [0.03, 0.03]])
    lam = np.array([70.0, 50.0])
    ours = solve_open_tiers(lam, S, [4, 4, 8])
    pf = solve_open(lam, S, [4, 4, 8])
    assert np.allclose(ours.response_time, pf.response_time, rtol=1e-12)
    assert ours.stations == ("erlang-c",) * 3


def test_per_class_response_is_service_plus_the_shared_fcfs_wait():
    S = np.array([[0.01, 0.03], [0.02, 0.004]])
    res = solve_open_tiers([40.0, 20.0], S, [2, 2])
    assert np.allclose(res.response_time, S.sum(axis=0) + res.wait.sum(), rtol=1e-12)
    mean0 = (40 * 0.01 + 20 * 0.03) / 60
    assert res.wait[0] == pytest.approx(mm_c(60.0, mean0, 2).wait, rel=1e-12)


def test_capacity_and_bad_input():
    assert tiers_capacity([1.0, 1.0], [[0.01, 0.03], [0.02, 0.02]], [4, 8]) == \
        pytest.approx(min(4 / 0.02, 8 / 0.02))
    with pytest.raises(ValueError, match="cores"):
        solve_open_tiers([1.0], [[0.1]], [0])
    with pytest.raises(ValueError, match="arrival_rates"):
        solve_open_tiers([-1.0], [[0.1]], [1])
    with pytest.raises(ValueError, match="processes"):
        solve_open_tiers([1.0], [[0.1]], [1], processes=["map"])


def test_bursty_single_core_tier_matches_simulation():
    """One FCFS core with correlated MAP service (the model is exact there) against the open
    queue's simulation: mean response within its 95% interval plus 3%."""
    proc = mmpp2_design(0.2, 8.0).scaled(0.01)
    lam = 60.0
    model = m_map_c(lam, proc, 1)
    sim = simulate_open(OpenNetwork([Queue("db", proc, "FCFS")], lam), 2000.0,
                        replications=3, seed=11)
    measured, half = sim.response_time[0], sim.response_time_hw[0]
    assert abs(model.wait + proc.mean - measured) <= half + 0.03 * measured


def test_mmpp_arrivals_reach_every_exponential_tier_and_are_flagged_at_a_bursty_one():
    shape = mmpp2_design(0.01, 40.0)
    S = np.array([[0.01], [0.02]])
    res = solve_open_tiers([150.0], S, [4, 8], arrivals=shape)
    assert res.stations == ("map-arrivals", "map-arrivals")
    assert res.wait[0] == pytest.approx(map_m_c(shape.scaled(1 / 150.0), 0.01, 4).wait,
                                        rel=1e-12)
    bursty = solve_open_tiers([150.0], S, [4, 8], arrivals=shape,
                              processes=[None, mmpp2_design(0.02, 20.0)])
    assert bursty.stations[1] == "per-job"
    assert any("bursty arrivals" in f for f in bursty.flags)


def test_per_job_tier_of_16_cores_waits_between_its_neighbours():
    """The boundary levels' solve must not hinge on one rare state: at 16 cores Mi et al.'s
    (2008) MAP(2) (I ~ 200) gave a wait of 0 (the pinned state's probability ~1e-20)."""
    from solvers.paper000 import BURSTY_D0, BURSTY_D1

    bursty = MAP(BURSTY_D0, BURSTY_D1)
    for rho in (0.35, 0.8):
        waits = [m_map_c(rho / 0.00125, bursty.scaled(0.00125 * c), c).wait
                 for c in (15, 16, 17)]
        assert waits[0] > waits[1] > waits[2] > 0.5 * waits[0]


def _bursty() -> MAP:
    from solvers.paper000 import BURSTY_D0, BURSTY_D1

    return MAP(BURSTY_D0, BURSTY_D1)


def test_waves_feed_the_tiers_after_a_bursty_one_its_departures():
    """``waves``: the exponential tier after a bursty 8-core one waits what the
    fixed-population route's open solve says (its departures' MAP/M/c queue), every class the
    same FCFS wait; the tiers before it and the bursty tier itself unchanged."""
    from solvers.open.fixed_population import open_at_rate, solve_open_waves

    S = np.array([[0.006, 0.006], [0.0096, 0.0176], [0.016, 0.0293]])
    lam = np.array([280.0, 120.0])
    procs = [None, _bursty(), None]
    poisson = solve_open_tiers(lam, S, [4, 8, 16], processes=procs)
    fed = solve_open_waves(lam, S, [4, 8, 16], processes=procs)
    means = (S * lam).sum(axis=1) / lam.sum()
    route, _ = open_at_rate([MAP.exponential(means[0]), _bursty().scaled(means[1]),
                             MAP.exponential(means[2])], lam.sum(), 0.0, [4, 8, 16])
    assert fed.stations == ("erlang-c", "per-job", "erlang-c (waves)")
    assert fed.wait[2] == pytest.approx(route.wait[2], rel=1e-12)
    assert fed.wait[2] > 2 * poisson.wait[2]
    assert np.array_equal(fed.wait[:2], poisson.wait[:2])
    assert np.allclose(fed.response_time, S.sum(axis=0) + fed.wait.sum(), rtol=1e-12)
    assert fed.queue_length[2] == pytest.approx(lam.sum() * (means[2] + fed.wait[2]))


def test_waves_leave_poisson_fed_tiers_where_rates_differ_and_without_a_bursty_tier():
    from solvers.open.fixed_population import solve_open_waves

    S = np.array([[0.01], [0.02]])
    procs = [_bursty(), None]
    visits = solve_open_waves([100.0], S, [8, 16], processes=procs, visits=[[1.0], [2.0]])
    plain = solve_open_tiers([100.0], S, [8, 16], processes=procs, visits=[[1.0], [2.0]])
    assert np.array_equal(visits.wait, plain.wait)
    assert any("different total rates" in f for f in visits.flags)
    last = solve_open_waves([100.0], S, [8, 16], processes=[None, _bursty()])
    assert last.flags == () and "(waves)" not in "".join(last.stations)


@pytest.mark.slow
def test_waves_behind_a_bursty_8_core_tier_match_the_physical_simulation():
    """A bursty 8-core app (Mi et al. 2008's MAP, I ~ 200) feeding a 16-core exponential
    database at 60% of capacity (case (d)'s pair): the database's simulated residence is the
    waves' (within its 95% interval plus 15%), more than twice the Poisson-fed Erlang C's."""
    from solvers.open.fixed_population import solve_open_waves
    from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, \
        simulate_physical

    rate, S = 400.0, np.array([[0.012], [0.020]])
    net = PhysicalNetwork((Tier("app", 8, _bursty().scaled(0.012)), Tier("db", 16, 0.020)),
                          ("all",), (1.0,), 0.0, 0, arrivals=OpenArrivals(rate))
    sim = simulate_physical(net, 1500.0, warmup=100.0, replications=3, seed=51)
    db, half = sim.residence_time[1].mean, sim.residence_time[1].half_width
    fed = solve_open_waves([rate], S, [8, 16], processes=[_bursty(), None])
    poisson = solve_open_tiers([rate], S, [8, 16], processes=[_bursty(), None])
    assert abs(fed.residence_time[1, 0] - db) <= half + 0.15 * db
    assert db > 2 * poisson.residence_time[1, 0]


def test_end_phase_map_keeps_the_intervals_and_their_queue_on_one_core():
    """:func:`end_phase_map` is the same interval sequence (mean, SCV, autocorrelations, index
    of dispersion) on ``K^2`` phases, so the exact one-core queue waits the same."""
    from solvers.open.queues import end_phase_map

    for proc in (_bursty(), mmpp2_design(0.2, 8.0)):
        aug = end_phase_map(proc)
        assert aug.order == 4
        assert aug.mean == pytest.approx(proc.mean, rel=1e-10)
        assert aug.scv == pytest.approx(proc.scv, rel=1e-8)
        assert np.allclose(aug.acf([1, 2, 5]), proc.acf([1, 2, 5]), rtol=1e-7)
        assert aug.idc == pytest.approx(proc.idc, rel=1e-7)
        s = 0.01
        assert m_map_c(60.0, aug.scaled(s), 1).wait == pytest.approx(
            m_map_c(60.0, proc.scaled(s), 1).wait, rel=1e-7)


def test_coupled_start_phases_wait_longer_on_a_bursty_multi_core_tier():
    plain = m_map_c(200.0, _bursty().scaled(0.008), 4)
    coupled = m_map_c(200.0, _bursty().scaled(0.008), 4, coupled=True)
    assert coupled.wait > 1.05 * plain.wait
    res = solve_open_tiers([200.0], [[0.004], [0.008]], [2, 4], processes=[None, _bursty()],
                           coupled=True)
    assert res.wait[1] == pytest.approx(coupled.wait, rel=1e-12)


@pytest.mark.slow
def test_coupled_start_phases_match_the_physical_simulation_of_a_bursty_4_core_tier():
    """The physical tier serves the MAP's consecutive intervals: with each job's end phase
    tied to the next start the per-job chain is within the simulation's 95% interval plus
    3%; drawn apart (the default) it waits too little, below the interval."""
    from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, \
        simulate_physical

    proc = _bursty().scaled(0.008)
    net = PhysicalNetwork((Tier("db", 4, proc),), ("all",), (1.0,), 0.0, 0,
                          arrivals=OpenArrivals(200.0))
    sim = simulate_physical(net, 3000.0, warmup=100.0, replications=6, seed=5101)
    r, half = sim.residence_time[0].mean, sim.residence_time[0].half_width
    coupled = m_map_c(200.0, proc, 4, coupled=True).wait + 0.008
    plain = m_map_c(200.0, proc, 4).wait + 0.008
    assert abs(coupled - r) <= half + 0.03 * r
    assert plain < r - half


def test_the_reductions_inverse_gives_the_solves_g_on_a_waves_sized_queue():
    """Each reduction step takes ``K`` as an explicit inverse (``dgetrf`` and ``dgetri``) and
    two products instead of an LU's two solves: on an 80-phase ``MAP/M/c`` queue above ``c``
    (the waves' size, rank-deficient ``D1``, drift down) ``G`` is stochastic, solves the
    equation and is logarithmic reduction's (LU solves at every step) within 1e-12, stopped
    on the step, on its prediction and with the first step by ``A2 = s I``; a singular block
    raises :class:`numpy.linalg.LinAlgError`."""
    from solvers.open.qbd import _inverse
    rng = np.random.default_rng(11)
    d = 80
    D0 = rng.uniform(0.0, 3.0, (d, d)) * (rng.uniform(size=(d, d)) < 0.1)
    D1 = rng.uniform(0.0, 2.0, (d, d)) * (rng.uniform(size=(d, d)) < 0.1)
    D1[:, :12] = D1[:, 12:24]                           # rank-deficient, as a lumped process
    np.fill_diagonal(D0, 0.0)
    D0 -= np.diag(D0.sum(axis=1) + D1.sum(axis=1))
    proc = MAP(D0, D1)
    for load in (0.5, 0.95):
        s = proc.rate / load
        A0, A1, A2 = proc.D1, proc.D0 - s * np.eye(d), s * np.eye(d)
        want = logarithmic_reduction(A0, A1, A2)
        for kw in ({}, {"predicted": True}, {"down_scale": s}):
            G = shifted_cyclic_reduction(A0, A1, A2, 1e-13, **kw)
            assert np.abs(G.sum(axis=1) - 1.0).max() < 1e-12
            assert np.abs(A2 + A1 @ G + A0 @ G @ G).max() < 1e-12 * np.abs(A1).max()
            assert np.abs(G - want).max() < 1e-12
    a = rng.standard_normal((d, d))
    assert np.abs(_inverse(a) @ a - np.eye(d)).max() < 1e-10
    a[:, 3] = 0.0
    with pytest.raises(np.linalg.LinAlgError):
        _inverse(a)
