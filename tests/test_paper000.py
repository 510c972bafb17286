"""Mi et al.'s (2008) headline, reproduced: MVA fails under bottleneck switch, the MAP network does not.

Model and scenarios: ``solvers.paper000`` (Fig. 9 with Z = 0.5 s). The table for docs/ is printed by
``bench/speed/paper000.py``.
"""

import numpy as np
import pytest

from solvers.paper000 import THINK_TIME, mva_error_table, scenarios
from solvers.mapqn import solve_closed
from solvers.simulation import ClosedNetwork, Queue, simulate_closed

POPULATIONS = [10, 25, 50, 75, 100, 125, 150]


@pytest.mark.slow
def test_mva_is_wrong_by_more_than_20_percent_under_bottleneck_switch():
    rows = mva_error_table(scenarios()["bottleneck_switch"], POPULATIONS)
    worst = max(abs(r["mva_error"]) for r in rows)
    assert worst > 0.20
    # the switch itself: near the knee both tiers hold the most jobs a substantial share of time
    knee = next(r for r in rows if r["population"] == 100)
    assert min(knee["bottleneck_front"], knee["bottleneck_db"]) > 0.25


@pytest.mark.slow
@pytest.mark.parametrize("name", ["not_bursty", "bursty_no_switch"])
def test_mva_is_within_3_percent_without_bottleneck_switch(name):
    rows = mva_error_table(scenarios()[name], POPULATIONS)
    assert max(abs(r["mva_error"]) for r in rows) < 0.03


@pytest.mark.slow
def test_simulation_agrees_with_the_map_network_under_bottleneck_switch():
    scenario = scenarios()["bottleneck_switch"]
    population = 75
    exact = solve_closed(scenario.processes, population, THINK_TIME)
    network = ClosedNetwork([Queue("front", scenario.front, "FCFS"),
                             Queue("db", scenario.database, "FCFS")],
                            [population], [THINK_TIME])
    sim = simulate_closed(network, 600.0, warmup=60.0, replications=6, seed=2008)
    x, hw = float(sim.throughput[0]), float(sim.throughput_hw[0])
    assert abs(x - exact.throughput) <= 3 * hw
    np.testing.assert_allclose(sim.utilization, exact.utilization,
                               atol=3 * float(np.max(sim.utilization_hw)) + 1e-3)
    # and MVA lies far outside the simulation's interval
    mva_x = next(r for r in mva_error_table(scenario, [population]))["throughput_mva"]
    assert abs(mva_x - x) > 10 * hw
