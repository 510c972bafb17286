"""Discrete-event simulation: ground truth for the analytic solvers and the estimators.

Submodules:

* ``single_queue`` -- a single FCFS server fed by given arrivals and service times (the
  M/Trace/1 queue of Mi et al. (2008), Table 1) and what a monitoring system sees of it per window.
* ``network`` -- closed networks of Mi et al. (2008), Fig. 9: a think-time delay station and queues
  in series (PS/FCFS, exponential or MAP service, several classes, time-varying population).
* ``open_queue`` -- open queues and open series networks (Poisson arrivals, M/M/c, MAP
  service).
* ``stats`` -- confidence intervals from independent replications and batch means.
* ``monitoring`` -- per-window, per-tier records in the input contract's shape.
* ``physical`` -- the physical multi-tier system (cores, one FCFS queue per tier, explicit
  service-time sequences, exponential or MAP): the ground truth the solvers are validated
  against, with monitoring windows and steady-state estimates.
"""

from solvers.simulation.monitoring import (
    format_end,
    monitor_closed,
    monitor_open,
    tier_windows,
    window_records,
)
from solvers.simulation.network import (
    Checkpoints,
    ClosedNetwork,
    Queue,
    SimulationResult,
    closed_checkpoints,
    simulate_closed,
)
from solvers.simulation.open_queue import OpenNetwork, open_checkpoints, simulate_open
from solvers.simulation.physical import (
    PhysicalNetwork,
    PhysicalResult,
    Tier,
    monitor_physical,
    physical_checkpoints,
    simulate_physical,
)
from solvers.simulation.single_queue import (
    QueueTrace,
    Windows,
    fcfs_queue,
    monitor_windows,
    mtrace1,
)
from solvers.simulation.stats import (
    Estimate,
    batch_means,
    batch_means_interval,
    replication_interval,
)

__all__ = [
    "QueueTrace", "Windows", "fcfs_queue", "monitor_windows", "mtrace1",
    "Queue", "ClosedNetwork", "Checkpoints", "SimulationResult", "closed_checkpoints",
    "simulate_closed",
    "OpenNetwork", "open_checkpoints", "simulate_open",
    "Estimate", "replication_interval", "batch_means", "batch_means_interval",
    "tier_windows", "window_records", "monitor_closed", "monitor_open", "format_end",
    "Tier", "PhysicalNetwork", "PhysicalResult", "monitor_physical", "simulate_physical",
    "physical_checkpoints",
]
