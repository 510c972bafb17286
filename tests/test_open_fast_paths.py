"""The open route's fast paths: the QBD boundary by level reduction on a held plan
(solvers.open.qbd) against closed forms, and the capacity search in the rate
(streams.predict.capacity_search.rate_bracket, model_capacity's open route) against a closed
form and against the search through populations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import sparse

from solvers.open import m_map_c, mm_c
from solvers.open.fixed_population import forget_held, open_at_rate
from solvers.open.qbd import plan_qbd, solve_planned, solve_qbd
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from streams.predict import model as model_module
from streams.predict.capacity_search import _closes_failing, _closes_meeting, rate_bracket
from streams.predict.model import OPEN_ROUTE_POPULATION, SystemModel, model_capacity

BURSTY = MAP(BURSTY_D0, BURSTY_D1)


def _modulated_mm1(lam: float, mu: float, T: np.ndarray, levels: int = 4):
    """An M/M/1 queue whose level moves do not depend on a phase process ``T`` running
    beside it: a QBD (up ``lam I``, down ``mu I``) whose level is geometric, ``P(n) = (1 -
    rho) rho^n``, and whose phase is ``T``'s stationary law, independent of the level."""
    K = T.shape[0]
    rows, cols, vals = [], [], []
    for n in range(levels):
        for i in range(K):
            s = n * K + i
            for j in range(K):
                if i != j and T[i, j] > 0:
                    rows.append(s), cols.append(n * K + j), vals.append(T[i, j])
            if n + 1 < levels:
                rows.append(s), cols.append(s + K), vals.append(lam)
            if n > 0:
                rows.append(s), cols.append(s - K), vals.append(mu)
    Q = sparse.csr_matrix((vals, (rows, cols)), shape=(levels * K, levels * K))
    return Q, np.arange(levels + 1) * K


@pytest.mark.parametrize("rho", [0.3, 0.9])
def test_level_reduction_gives_the_modulated_mm1_closed_form(rho):
    T = np.array([[-1.0, 0.7, 0.3], [0.2, -0.5, 0.3], [2.0, 1.0, -3.0]])
    alpha = np.linalg.lstsq(np.vstack((T.T, np.ones(3))), np.r_[0, 0, 0, 1.0],
                            rcond=None)[0]
    Q, starts = _modulated_mm1(rho * 2.0, 2.0, T)
    sol = solve_qbd(Q, starts, 1)
    assert sol.mean_level() == pytest.approx(rho / (1 - rho), rel=1e-10)
    for n in range(2):              # the boundary: geometric levels, T's law in each
        np.testing.assert_allclose(sol.level(n), (1 - rho) * rho**n * alpha, rtol=1e-10)
    # pi_{L+1} = pi_L R: the level's law times rho, the phases' unchanged
    np.testing.assert_allclose(sol.level(1) @ sol.R, (1 - rho) * rho**2 * alpha, rtol=1e-10)


def test_a_plan_solves_every_rate_as_a_fresh_solve_and_refuses_a_jump():
    T = np.array([[-1.0, 1.0], [0.5, -0.5]])
    Q, starts = _modulated_mm1(1.0, 2.0, T)
    C = Q.tocoo()
    plan = plan_qbd(C.row, C.col, starts, 1)
    for lam in (0.5, 1.5):          # the arrivals' entries scaled: one plan, two rates
        rates = np.where(C.col > C.row + 1, C.data * lam, C.data)
        fresh = solve_qbd(sparse.csr_matrix((rates, (C.row, C.col)), shape=C.shape),
                          starts, 1)
        again = solve_planned(plan, rates)
        np.testing.assert_allclose(again.pi, fresh.pi, rtol=1e-13)
        assert again.mean_level() == pytest.approx(lam / (2.0 - lam), rel=1e-10)
    with pytest.raises(ValueError, match="one level at a time"):
        plan_qbd(np.array([0]), np.array([5]), starts, 1)
    assert solve_planned(plan, np.where(C.col > C.row + 1, C.data * 2.5, C.data)) is None


@pytest.mark.parametrize("cores", [2, 8, 16])
def test_per_job_tier_with_poisson_service_is_erlang_c_at_any_load(cores):
    """The per-job chain's held plan, solved at three rates, against Erlang C."""
    poisson = MAP([[-2.0, 1.0], [1.0, -2.0]], [[0.5, 0.5], [0.5, 0.5]])
    for load in (0.2, 0.6, 0.95):
        lam = load * cores
        assert m_map_c(lam, poisson, cores).wait == pytest.approx(
            mm_c(lam, 1.0, cores).wait, rel=1e-9)


class _Probes:
    def __init__(self, f):
        self.f, self.rates = f, []

    def __call__(self, rate):
        self.rates.append(rate)
        return self.f(rate)


def _mm1_excess(mu: float, sla: float, share: float = 1.0):
    """``share R / SLA - 1`` of an M/M/1 queue, ``R = 1 / (mu - lambda)``; ``inf`` past
    ``mu``."""
    return lambda lam: share * (1.0 / (mu - lam)) / sla - 1.0 if lam < mu else math.inf


@pytest.mark.parametrize("sla", [0.02, 0.1, 1.0])
def test_rate_bracket_holds_the_mm1_root_in_a_narrow_bracket(sla):
    mu, span = 100.0, 0.02
    root = mu - 1.0 / sla                               # R(root) = SLA
    excess = _Probes(_mm1_excess(mu, sla))
    cheap = _Probes(_mm1_excess(mu, sla, 0.8))          # the same shape, 20% lower
    lo, hi = rate_bracket(excess, sat=mu, floor=1.0 / (mu * sla) - 1.0, span=span,
                          cheap=cheap)
    assert lo <= root < hi and hi - lo <= span * lo
    assert excess.f(lo) <= 0 < excess.f(hi)
    # the first probe gives the ratio, which puts the second at the root: a third closes it
    assert len(excess.rates) <= 3 and len(set(excess.rates)) == len(excess.rates)
    rough = _Probes(_mm1_excess(mu, sla, 0.99))         # a rough probe first: two
    excess = _Probes(_mm1_excess(mu, sla))
    lo, hi = rate_bracket(excess, sat=mu, floor=1.0 / (mu * sla) - 1.0, span=span,
                          cheap=_mm1_excess(mu, sla, 0.8), rough=rough)
    assert lo <= root < hi and hi - lo <= span * lo
    assert len(excess.rates) <= 2 and len(rough.rates) == 1
    plain = _Probes(_mm1_excess(mu, sla))               # without the cheaper curve
    lo2, hi2 = rate_bracket(plain, sat=mu, floor=1.0 / (mu * sla) - 1.0, span=span)
    assert lo2 <= root < hi2 and hi2 - lo2 <= span * lo2 and len(plain.rates) <= 12


def test_the_rough_probe_goes_to_a_rate_the_cheaper_curve_solved():
    """With ``rough_reach``, the rough probe lands on the cheaper curve's solve nearest the
    curve's root (its held parts serve it) and the bracket still closes on the root in two
    full probes; without it, at the root itself."""
    mu, sla, span = 100.0, 0.1, 0.02
    root = mu - 1.0 / sla
    for reach in (0.0, 0.1):
        cheap, solved_before = _Probes(_mm1_excess(mu, sla, 0.8)), []

        def rough(rate):
            solved_before.extend(cheap.rates)
            return _mm1_excess(mu, sla, 0.99)(rate)

        rough = _Probes(rough)
        excess = _Probes(_mm1_excess(mu, sla))
        lo, hi = rate_bracket(excess, sat=mu, floor=1.0 / (mu * sla) - 1.0, span=span,
                              cheap=cheap, rough=rough, rough_reach=reach)
        assert lo <= root < hi and hi - lo <= span * lo
        assert len(rough.rates) == 1 and len(excess.rates) <= 2
        assert (rough.rates[0] in solved_before) == (reach > 0)


def test_a_closing_probe_closes_the_bracket_despite_rounding():
    """The probes placed to close the bracket whichever way they fall do close it: at
    428.9774.../s (the 4-tier network's first full probe at R <= 0.25 s) ``lo + span lo``
    missed ``hi - lo <= span lo`` by a rounding, and ``hi - span p`` leaves a probe that
    meets the targets short of ``hi - p <= span p``."""
    span, lo = 0.02, 428.9774023937263
    assert not (lo + span * lo) - lo <= span * lo          # the rounding that cost a solve
    rng = np.random.default_rng(7)
    for x in np.concatenate(([lo], rng.uniform(1.0, 1e4, 2000))):
        p, q = _closes_failing(x, span), _closes_meeting(x, span)
        assert x < p and p - x <= span * x                 # fails there: [x, p] closed
        assert q < x and x - q <= span * q                 # meets there: [q, x] closed
    hi, aim = 100.0, 99.0
    assert not hi - (hi - span * aim) <= span * (hi - span * aim)


def test_rate_bracket_refuses_a_met_floor_and_survives_unstable_probes():
    assert rate_bracket(_mm1_excess(100.0, 0.001), sat=100.0, floor=9.0, span=0.02) is None
    # the excess is inf from 60/s (a tier saturating before the utilization law's sat)
    f = _Probes(lambda lam: math.inf if lam >= 60.0 else lam / 50.0 - 1.0)
    lo, hi = rate_bracket(f, sat=100.0, floor=-1.0, span=0.02)
    assert lo <= 50.0 < hi and hi - lo <= 0.02 * lo
    assert rate_bracket(lambda lam: -0.5, sat=100.0, floor=-1.0, span=0.02,
                        max_probes=5) is None


def _large_model(sla: float) -> SystemModel:
    D = np.array([[0.002], [0.010], [0.004], [0.020]])
    return SystemModel(tiers=["web", "app", "cache", "db"], classes=["a"], D_mc=D,
                       mix=np.array([1.0]), servers=np.array([4.0, 8.0, 4.0, 16.0]),
                       think_time=7.0, sla=np.array([sla]),
                       processes=[MAP.exponential(1.0), BURSTY.scaled(1.0),
                                  MAP.exponential(1.0), BURSTY.scaled(1.0)],
                       map_limit=100_000)


def test_the_rate_search_agrees_with_the_population_search(monkeypatch):
    """4 tiers, 2 bursty (8 and 16 cores), SLA 0.5 s: the capacity in the rate within the
    search's tolerance (3%) of the search through populations on the same open route, its
    answer meeting the SLA and one user more than 3% above it not."""
    forget_held()
    rate_model = _large_model(0.5)
    cap, limited = model_capacity(rate_model)
    assert not limited and cap >= OPEN_ROUTE_POPULATION
    assert rate_model.excess(rate_model.at(cap)) <= 0
    assert rate_model.excess(rate_model.at(math.ceil(cap * 1.03) + 1)) > 0
    forget_held()
    monkeypatch.setattr(model_module, "_open_route_capacity", lambda model: None)
    pop_model = _large_model(0.5)
    ref, _ = model_capacity(pop_model)
    assert cap == pytest.approx(ref, rel=0.03)


@pytest.mark.parametrize("sla", [0.3, 1.0])
def test_the_open_route_capacity_is_exact_to_the_user(monkeypatch, sla):
    """4 tiers, 2 bursty: the capacity is the largest population whose answer meets the SLA
    (one user more does not), and it does not depend on where the probes fell: with another
    rough probe (fewer departure phases: other probes, another bracket) the same user."""
    forget_held()
    model = _large_model(sla)
    cap, limited = model_capacity(model)
    assert not limited and cap >= OPEN_ROUTE_POPULATION
    assert model.excess(model.at(cap)) <= 0 < model.excess(model.at(cap + 1))
    forget_held()
    monkeypatch.setattr(model_module, "ROUGH_PHASE_SHARE", 1e-4)
    monkeypatch.setattr(model_module, "ROUGH_REACH", 0.0)
    assert model_capacity(_large_model(sla)) == (cap, False)


def test_the_rate_search_leaves_small_answers_to_the_population_search():
    """An SLA met only below the open route's threshold: the population search answers."""
    forget_held()
    model = _large_model(0.0432)            # the floor 0.036 s: capacity of some hundreds
    assert model_module._open_route_capacity(model) is None
    res, n = open_at_rate([MAP.exponential(0.002)], 100.0, 7.0, servers=[1])
    assert n == pytest.approx(100.0 * (7.0 + 1.0 / (500.0 - 100.0)), rel=1e-12)
    assert res.stable


def test_the_rate_search_is_not_tried_where_littles_law_bounds_the_answer_below_it(monkeypatch):
    """Case (b) of docs/accuracy.md (4/4/8 cores, bursty db, Z = 1 s, SLA 0.1 s): N = X (R + Z)
    <= X_max (SLA + Z) = 550 users, below the open route: no open solve is tried, and the
    population search gives the capacity it gave."""
    def refuse(*args, **kwargs):
        raise AssertionError("an open solve was tried")

    model = SystemModel(tiers=["web", "app", "db"], classes=["all"],
                        D_mc=np.array([[0.008], [0.010], [0.016]]), mix=np.ones(1),
                        servers=np.array([4.0, 4.0, 8.0]), think_time=1.0, sla=np.array([0.1]),
                        map_limit=100_000, processes=[MAP.exponential(1.0),
                                                      MAP.exponential(1.0), BURSTY.scaled(1.0)])
    monkeypatch.setattr(model_module, "open_at_rate", refuse)
    assert model_module._open_route_capacity(model) is None
    cap, limited = model_capacity(model)
    assert not limited and 0 < cap < OPEN_ROUTE_POPULATION
