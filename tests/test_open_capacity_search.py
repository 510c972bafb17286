"""The capacity search of an open model: the regula falsi keeps the bisection's guarantee
(the capacity meets every SLA, a rate ``RATE_TOLERANCE x_sat`` above it does not) in fewer
solves, and the solves of one model are held by rate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from streams.predict import open_model
from streams.predict.model import SystemModel
from streams.predict.open_model import RATE_TOLERANCE, RateSolves, rate_capacity, solve_at


def _random_model(rng: np.random.Generator, bursty: bool) -> SystemModel:
    D = rng.uniform(0.002, 0.02, (3, 2))
    servers = rng.integers(1, 9, 3)
    procs = None
    if bursty:
        servers[2] = min(servers[2], 4)
        procs = [None, None, MAP(np.array(BURSTY_D0), np.array(BURSTY_D1))]
    sla = rng.uniform(0.02, 0.3, 2)
    return SystemModel(tiers=["a", "b", "c"], classes=["x", "y"], D_mc=D,
                       mix=np.array([0.7, 0.3]), servers=servers, think_time=0.0, sla=sla,
                       processes=procs, map_limit=10_000)


def _meets(model: SystemModel, rate: float) -> bool:
    res = solve_at(model, rate)
    return res.stable and bool(np.all(res.response_time <= model.sla))


def _bisection_solves(model: SystemModel, sat: float) -> int:
    lo, hi, n = 0.0, sat, 2                       # the solves at 0 and beyond the capacity
    while hi - lo > RATE_TOLERANCE * sat:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _meets(model, mid) else (lo, mid)
        n += 1
    return n


@pytest.mark.parametrize("bursty", [False, True])
def test_capacity_meets_every_sla_and_the_rate_a_tolerance_above_does_not(bursty):
    rng = np.random.default_rng(7 if bursty else 3)
    fewer = 0
    for _ in range(8):
        model = _random_model(rng, bursty)
        held = RateSolves(model)
        cap = rate_capacity(model, held)
        if cap.capacity == 0.0:                    # a demand alone beyond its SLA
            assert not _meets(model, 0.0)
            continue
        above = cap.capacity + RATE_TOLERANCE * cap.saturation
        assert _meets(model, cap.capacity)
        assert above >= cap.saturation or not _meets(model, above)
        fewer += held.count < _bisection_solves(model, cap.saturation)
    assert fewer >= 6


def test_capacity_of_one_mm1_tier_takes_few_solves():
    """``R = S / (1 - x S)`` is the form the step models: the root in a handful of solves."""
    model = SystemModel(tiers=["api"], classes=["c"], D_mc=np.array([[0.01]]),
                        mix=np.array([1.0]), servers=np.array([1]), think_time=0.0,
                        sla=np.array([0.05]), processes=None, map_limit=10_000)
    held = RateSolves(model)
    cap = rate_capacity(model, held)
    assert 80.0 - RATE_TOLERANCE * 100.0 <= cap.capacity <= 80.0
    assert held.count <= 5


def test_held_solves_answer_a_rate_once(monkeypatch):
    model = SystemModel(tiers=["api"], classes=["c"], D_mc=np.array([[0.01]]),
                        mix=np.array([1.0]), servers=np.array([2]), think_time=0.0,
                        sla=np.array([0.05]), processes=None, map_limit=10_000)
    calls: list[float] = []
    inner = open_model.solve_at

    def counting(m: SystemModel, rate: float):
        calls.append(rate)
        return inner(m, rate)
    monkeypatch.setattr(open_model, "solve_at", counting)
    held = RateSolves(model)
    first = rate_capacity(model, held)
    n = len(calls)
    assert rate_capacity(model, held) == first and len(calls) == n == held.count
    point, _ = open_model.open_point(model, 0.0, held)
    assert len(calls) == n and point.response[0] == pytest.approx(0.01)
    assert math.isfinite(first.capacity) and first.breach_tier == "api"


def test_held_solves_of_another_model_are_refused():
    one = SystemModel(tiers=["api"], classes=["c"], D_mc=np.array([[0.01]]),
                      mix=np.array([1.0]), servers=np.array([1]), think_time=0.0,
                      sla=np.array([0.05]), processes=None, map_limit=10_000)
    other = one.variant(D_mc=np.array([[0.02]]))
    with pytest.raises(ValueError, match="solves"):
        rate_capacity(other, RateSolves(one))
