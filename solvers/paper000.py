"""Mi et al.'s (2008) multi-tier model (Fig. 9) in three service scenarios, and MVA's error on it.

Think-time delay ``Z = 0.5 s`` (Mi et al. 2008, section 3.2), then a front server (FS) and a
database (DB) in series. Mean demands ``S_FS = 4.5 ms`` and ``S_DB = 4.0 ms`` put the knee of the
throughput curve near ``N* = (S_FS + S_DB + Z)/S_FS ~ 113`` users, where the testbed of Mi et al.
(2008) saturated (75-150 EBs, Fig. 4). Three database service processes with the same mean:

* ``bottleneck_switch`` -- a bursty MAP(2) (``I ~ 200``): long runs of fast service alternate with
  rarer runs of slow service during which the database, not the front server, is the bottleneck
  (the browsing mix of Mi et al. (2008), section 3.2);
* ``bursty_no_switch`` -- the same burst pattern but a database so fast (1 ms) that even its
  slow runs never overtake the front server (the shopping mix: MVA is fine);
* ``not_bursty`` -- a MAP(2) with ``I ~ 1.1`` (the ordering mix).

MVA sees only the means, so on ``bottleneck_switch`` its throughput is wrong by tens of percent
near the knee, while the MAP network (``solvers.mapqn.solve_closed``) is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.mapqn import solve_closed
from solvers.mva import mva
from solvers.processes import MAP

__all__ = ["THINK_TIME", "Scenario", "scenarios", "mva_error_table"]

THINK_TIME = 0.5
FRONT_MEAN = 0.0045
DB_MEAN = 0.0040

#: unit-mean bursty MAP(2): fast phase (rate 45) and slow phase (rate 0.09), phases switching
#: about every 2.5 and 100 completions; I ~ 202 (see bench/speed/dispersion.py, case "I~200").
BURSTY_D0 = [[-45.39, 0.39], [0.0082, -0.0982]]
BURSTY_D1 = [[45.0, 0.0], [0.0, 0.09]]
#: unit-mean mildly modulated MAP(2), I ~ 1.13.
_MILD_D0 = [[-3.5, 2.0], [2.0, -2.5]]
_MILD_D1 = [[1.5, 0.0], [0.0, 0.5]]


@dataclass(frozen=True)
class Scenario:
    """A two-tier model: the front server's and the database's service processes."""

    name: str
    front: MAP
    database: MAP

    @property
    def processes(self) -> tuple[MAP, MAP]:
        return (self.front, self.database)

    @property
    def demands(self) -> np.ndarray:
        """Mean demands per station (stations x 1 class), what MVA is given."""
        return np.array([[self.front.mean], [self.database.mean]])


def scenarios() -> dict[str, Scenario]:
    """The three scenarios of the module docstring."""
    front = MAP.exponential(FRONT_MEAN)
    bursty = MAP(BURSTY_D0, BURSTY_D1)
    mild = MAP(_MILD_D0, _MILD_D1)
    return {
        "bottleneck_switch": Scenario("bottleneck_switch", front, bursty.scaled(DB_MEAN)),
        "bursty_no_switch": Scenario("bursty_no_switch", front, bursty.scaled(0.001)),
        "not_bursty": Scenario("not_bursty", front, mild.scaled(DB_MEAN)),
    }


def mva_error_table(scenario: Scenario, populations: list[int],
                    think_time: float = THINK_TIME) -> list[dict[str, float]]:
    """Per population: exact MAP-network throughput, MVA throughput, MVA's relative error, and
    the bottleneck probabilities of FS and DB (Mi et al. 2008, section 3.4 and Fig. 10)."""
    rows = []
    for n in populations:
        exact = solve_closed(scenario.processes, n, think_time)
        approx = mva(scenario.demands, [n], [think_time])
        x_mva = float(approx.throughput[0])
        rows.append({
            "population": n,
            "throughput": exact.throughput,
            "throughput_mva": x_mva,
            "mva_error": (x_mva - exact.throughput) / exact.throughput,
            "response_time": exact.response_time,
            "response_time_mva": float(approx.response_time[0]),
            "bottleneck_front": float(exact.bottleneck_probability[0]),
            "bottleneck_db": float(exact.bottleneck_probability[1]),
        })
    return rows
