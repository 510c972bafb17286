"""The built-in demo workload: a TPC-W-like two-tier shop under a browsing mix.

Paper 000's testbed in simulation (:mod:`solvers.simulation`): users think 0.5 s, then send a
request to the front server, which calls the database. Four browsing-mix classes with their
own demands; the database's service is the bursty MAP(2) of paper 000's browsing mix
(``I ~ 200``: long runs of fast service and rarer runs of slow service, during which the
database and not the front server is the bottleneck). Users hold steady for a while (so the
burstiness can be measured), then ramp up until the shop breaks its response-time SLA --
perfcast should predict that before it happens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from solvers.paper000 import THINK_TIME, scenarios
from solvers.simulation.monitoring import monitor_closed
from solvers.simulation.network import ClosedNetwork, Queue
from streams.core.config import Config, SystemConfig

__all__ = ["DemoScenario", "demo_records", "demo_config"]

#: browsing-mix classes: (name, share, front demand s, database demand s)
CLASSES = (("home", 0.30, 0.0040, 0.0030),
           ("search", 0.30, 0.0050, 0.0040),
           ("product_detail", 0.30, 0.0045, 0.0045),
           ("best_sellers", 0.10, 0.0035, 0.0060))
#: 2026-11-20T10:00:00Z, the demo's event-time origin
START = 1_795_168_800.0


@dataclass(frozen=True)
class DemoScenario:
    """Users hold at ``users_start`` for ``steady_s``, then grow by ``step_users`` every
    ``step_s`` up to ``users_end``, then hold until ``duration_s``."""

    system: str = "shop"
    users_start: int = 60
    users_end: int = 200
    steady_s: float = 1200.0
    step_s: float = 60.0
    step_users: int = 5
    duration_s: float = 3600.0
    window_s: float = 5.0
    sla_s: float = 0.3
    seed: int = 1
    #: event time at which the first window opens (``perfcast produce --start``)
    start_s: float = START

    def schedule(self) -> list[tuple[float, int]]:
        out, t, n = [], self.steady_s, self.users_start
        while n < self.users_end and t < self.duration_s:
            n = min(n + self.step_users, self.users_end)
            out.append((t, n))
            t += self.step_s
        return out


def demo_records(sc: DemoScenario = DemoScenario()) -> list[dict[str, Any]]:
    """Input-contract records of the simulated shop, window by window, tier by tier."""
    bursty = scenarios()["bottleneck_switch"].database
    net = ClosedNetwork(
        queues=[Queue("front", [c[2] for c in CLASSES]),
                Queue("db", [bursty.scaled(c[3]) for c in CLASSES])],
        populations=sc.users_start, think_times=THINK_TIME,
        classes=[c[0] for c in CLASSES], mix=[c[1] for c in CLASSES])
    return monitor_closed(net, sc.duration_s, sc.window_s, schedule=sc.schedule(),
                          system=sc.system, start_time=sc.start_s, iso_time=True,
                          seed=sc.seed)


def demo_config(sc: DemoScenario = DemoScenario()) -> Config:
    """The shop's configuration: tiers in order, think time, SLA, a 10-minute horizon, solved
    on the minute (one system: nothing to spread)."""
    return Config(systems={sc.system: SystemConfig(
        tiers=("front", "db"), think_time_s=THINK_TIME, sla_s={"*": sc.sla_s},
        solve_interval_s=60.0, solve_offset_s=0.0, horizon_s=600.0, trend_window_s=600.0)})
