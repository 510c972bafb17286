"""Remediation validated by simulation (short and seeded; the full
table: ``bench/accuracy/remediation.py``, docs/accuracy.md section 12): the capacity the model
predicts after an action is within 10% of the capacity of the simulated physical system with
the action applied."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from solvers.simulation.capacity import simulated_capacity
from solvers.simulation.physical import PhysicalNetwork, Tier
from streams.predict.model import SystemModel, model_capacity
from streams.predict.whatif import Action, apply

SLA = 0.1


def _model(bursty: bool) -> SystemModel:
    """web 2 cores exp 5 ms, db 2 cores 12 ms (bursty: Mi et al.'s (2008) MAP(2), I ~ 200), one
    class, Z = 0.5 s, SLA 0.1 s."""
    return SystemModel(tiers=["web", "db"], classes=["all"],
                       D_mc=np.array([[0.005], [0.012]]), mix=np.array([1.0]),
                       servers=np.array([2.0, 2.0]), think_time=0.5, sla=np.array([SLA]),
                       processes=[MAP.exponential(1.0), MAP(BURSTY_D0, BURSTY_D1)]
                       if bursty else None, map_limit=10_000)


def _network(bursty: bool, action: Action, n: int) -> PhysicalNetwork:
    cores, mean = 2, 0.012
    if action.kind == "replicate":
        cores *= int(action.value)
    elif action.kind == "cores":
        cores = int(action.value)
    else:
        mean /= action.value
    db = MAP(BURSTY_D0, BURSTY_D1).scaled(mean) if bursty else mean
    return PhysicalNetwork(tiers=(Tier("web", 2, 0.005), Tier("db", cores, db)),
                           classes=("all",), mix=(1.0,), think_time=0.5, population=n)


@pytest.mark.slow
@pytest.mark.parametrize("action", [Action("replicate", "db", 2), Action("cores", "db", 3),
                                    Action("cpu_speed", "db", 1.5)], ids=lambda a: a.kind)
def test_predicted_capacity_after_the_action_within_10_percent_of_the_simulated(action):
    predicted, limited = model_capacity(apply(_model(False), action))
    before, _ = model_capacity(_model(False))
    assert not limited and predicted > before
    sim = simulated_capacity(lambda n: _network(False, action, n), [SLA], start=predicted,
                             duration=150.0, warmup=20.0, replications=3, seed=7)
    assert abs(predicted - sim.value) <= 0.10 * sim.value, (predicted, sim)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_bursty_tier_replicated_within_10_percent_of_the_simulated():
    """The bursty db replicated: the decomposition with 4 cores consuming one MAP(2)
    sequence against the simulated tier (MVA, which ignores burstiness, is far off)."""
    action = Action("replicate", "db", 2)
    predicted, _ = model_capacity(apply(_model(True), action))
    mva_only, _ = model_capacity(apply(_model(False), action))
    sim = simulated_capacity(lambda n: _network(True, action, n), [SLA], start=predicted,
                             duration=600.0, warmup=30.0, replications=3, seed=11)
    assert abs(predicted - sim.value) <= 0.10 * sim.value, (predicted, sim)
    assert abs(mva_only - sim.value) > 0.10 * sim.value      # the test can tell them apart


def test_simulated_capacity_refuses_a_bad_start():
    with pytest.raises(ValueError, match="start: must be a whole number >= 1"):
        simulated_capacity(lambda n: _network(False, Action("cores", "db", 2), n), [SLA],
                           start=0, duration=10.0, warmup=1.0)
