"""The built-in demo workload: a TPC-W-like two-tier shop under a browsing mix.

Mi et al.'s (2008) testbed as a physical system (:mod:`solvers.simulation.physical`): users think
0.5 s, then send a request to the front server, which calls the database. Each tier has one
core and one FCFS queue. Four browsing-mix classes with their own demands: a request's service
time is the next value of its tier's service-time sequence times its class's multiplier
(``D[m, c] / D[m]``). The front's sequence is exponential; the database's is the bursty MAP(2)
of Mi et al.'s (2008) browsing mix (``I ~ 200``: long runs of fast service and rarer runs of slow
service that hit every class at once, during which the database and not the front server is
the bottleneck: Mi et al. (2008) section 4.1's tier service process, the system perfcast models;
docs/accuracy.md section 14). Users hold steady for a while (so the burstiness can be
measured), then ramp up until the shop breaks its response-time SLA -- perfcast should
predict that before it happens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from solvers.paper000 import THINK_TIME, scenarios
from solvers.simulation.physical import PhysicalNetwork, Tier, monitor_physical
from streams.core.config import Config, SystemConfig

__all__ = ["DemoScenario", "demo_network", "demo_records", "demo_config"]

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


def demo_network(users: int) -> PhysicalNetwork:
    """The shop with ``users`` users: per tier one core, one FCFS queue and one service-time
    sequence (front exponential, db Mi et al.'s (2008) bursty MAP(2)) whose mean is the tier's
    aggregate demand ``D_m = sum_c p_c D_{m,c}``; class ``c`` multiplies it by
    ``D_{m,c} / D_m``, so the true demands are ``CLASSES``'."""
    mix = tuple(c[1] for c in CLASSES)
    tiers = []
    for name, col in (("front", 2), ("db", 3)):
        demands = [c[col] for c in CLASSES]
        mean = sum(p * d for p, d in zip(mix, demands))
        service = scenarios()["bottleneck_switch"].database.scaled(mean) if name == "db" \
            else mean
        tiers.append(Tier(name, 1, service, tuple(d / mean for d in demands)))
    return PhysicalNetwork(tiers=tuple(tiers), classes=tuple(c[0] for c in CLASSES), mix=mix,
                           think_time=THINK_TIME, population=users)


def demo_records(sc: DemoScenario = DemoScenario()) -> list[dict[str, Any]]:
    """Input-contract records of the simulated shop, window by window, tier by tier."""
    return monitor_physical(demo_network(sc.users_start), sc.duration_s, sc.window_s,
                            schedule=sc.schedule(), system=sc.system, start_time=sc.start_s,
                            iso_time=True, seed=sc.seed)


def demo_config(sc: DemoScenario = DemoScenario()) -> Config:
    """The shop's configuration: tiers in order, think time, SLA, a 10-minute horizon, solved
    on the minute (one system: nothing to spread)."""
    return Config(systems={sc.system: SystemConfig(
        tiers=("front", "db"), think_time_s=THINK_TIME, sla_s={"*": sc.sla_s},
        solve_interval_s=60.0, solve_offset_s=0.0, horizon_s=600.0, trend_window_s=600.0)})
