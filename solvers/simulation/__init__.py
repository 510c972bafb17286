"""Discrete-event simulation: ground truth for the analytic solvers and the estimators.

Submodules:

* ``single_queue`` -- a single FCFS server fed by given arrivals and service times (the
  M/Trace/1 queue of paper 000, Table 1) and what a monitoring system sees of it per window.
"""

from solvers.simulation.single_queue import (
    QueueTrace,
    Windows,
    fcfs_queue,
    monitor_windows,
    mtrace1,
)

__all__ = ["QueueTrace", "Windows", "fcfs_queue", "monitor_windows", "mtrace1"]
