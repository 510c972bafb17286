"""Open sources of the physical simulator (Poisson, MMPP(2), flat and ramped rates) and the
open tier models against it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.open import solve_open_tiers
from solvers.simulation.mmpp import mmpp2_design
from solvers.simulation.physical import (OpenArrivals, PhysicalNetwork, Tier, monitor_physical,
                                         physical_checkpoints, simulate_physical)


def _net(arrivals: OpenArrivals, tiers=None) -> PhysicalNetwork:
    tiers = tiers or (Tier("web", 2, 0.01), Tier("db", 4, 0.02))
    return PhysicalNetwork(tiers, ("a", "b"), (0.6, 0.4), 0.0, 0, arrivals=arrivals)


def test_ramp_schedule_time_change_inverts_the_integrated_rate():
    src = OpenArrivals([(0, 10.0), (100, 10.0), (300, 50.0)])
    t = np.array([0.0, 50.0, 100.0, 150.0, 300.0, 400.0])
    # Lambda(t): 10 t to 100 s, then 1000 + 10 s + 0.1 s^2 (s = t - 100), then + 50 per second
    lam = np.array([0.0, 500.0, 1000.0, 1000 + 500 + 0.1 * 2500, 1000 + 2000 + 4000,
                    7000 + 5000])
    assert np.allclose(src.to_real_time(lam), t)
    assert src.rate_at(200.0) == pytest.approx(30.0)


def test_poisson_and_mmpp_sources_deliver_their_rate():
    for process in (None, mmpp2_design(0.05, 20.0)):
        cp = physical_checkpoints(_net(OpenArrivals(50.0, process)), [0.0, 400.0], seed=3)
        done = cp.completions[-1].sum()
        assert done / 400.0 == pytest.approx(50.0, rel=0.1)
        assert cp.users[-1] == 0


def test_ramped_source_counts_follow_the_schedule():
    recs = monitor_physical(_net(OpenArrivals([(0, 20.0), (200, 20.0), (400, 60.0)])), 600.0,
                            100.0, seed=5)
    per_window = [sum(r["completions"].values()) / 100.0 for r in recs if r["tier"] == "db"]
    assert "users" not in recs[0]
    assert per_window[0] == pytest.approx(20.0, rel=0.2)
    assert per_window[-1] == pytest.approx(60.0, rel=0.15)
    assert per_window[3] == pytest.approx(50.0, rel=0.15)      # 300-400 s: mean rate 50


@pytest.mark.parametrize("bad,match", [
    (dict(rate=-1.0), "arrivals.rate"),
    (dict(rate=[(0, 1.0), (0, 2.0)]), "times must increase"),
    (dict(rate=[(0, 0.0)]), "never has a positive rate"),
    (dict(rate=[(0, "x")]), r"arrivals.rate\[0\] rate"),
    (dict(rate=1.0, process="mmpp"), "arrivals.process"),
])
def test_bad_sources_name_the_field(bad, match):
    with pytest.raises(ValueError, match=match):
        OpenArrivals(**bad)


def test_open_network_has_no_users():
    with pytest.raises(ValueError, match="population"):
        PhysicalNetwork((Tier("web", 1, 0.01),), ("a",), (1.0,), 0.0, 5,
                        arrivals=OpenArrivals(1.0))


@pytest.mark.slow
def test_open_tiers_model_matches_the_physical_system_with_a_bursty_tier():
    """Three tiers, the last an 8-core tier with a correlated MAP(2) (I ~ 50), at 70% of
    the saturation rate: mean R within 10%, per-class R within 15% (3 x 600 s)."""
    bursty = mmpp2_design(0.02, 50.0).scaled(0.016)
    tiers = (Tier("web", 4, 0.008), Tier("app", 4, 0.010),
             Tier("db", 8, bursty, multipliers=(0.75, 2.0)))
    mix = np.array([0.8, 0.2])
    rate = 0.7 * 400.0
    net = PhysicalNetwork(tiers, ("browse", "buy"), tuple(mix), 0.0, 0,
                          arrivals=OpenArrivals(rate))
    sim = simulate_physical(net, 600.0, warmup=60.0, replications=3, seed=7)
    S = np.array([[0.008, 0.008], [0.010, 0.010], [0.012, 0.032]])
    model = solve_open_tiers(rate * mix, S, [4, 4, 8],
                             processes=[None, None, bursty])
    assert model.stations == ("erlang-c", "erlang-c", "per-job")
    assert sim.total_throughput.mean == pytest.approx(rate, rel=0.02)
    assert model.total_response_time == pytest.approx(sim.total_response_time.mean, rel=0.10)
    for c in range(2):
        assert model.response_time[c] == pytest.approx(sim.response_time[c].mean, rel=0.15)
    assert math.isfinite(model.total_response_time)
