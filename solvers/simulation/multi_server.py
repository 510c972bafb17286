"""A ``c``-server FCFS queue, simulated exactly, and what a monitoring system sees of it.

``fcfs_servers`` serves jobs in arrival order, each on the server that frees first
(``start_i = max(a_i, earliest free server)``), taking the service times in order of service
start -- a correlated sequence such as a MAP(2)'s keeps its correlation across the servers, as
in the physical simulator's tiers (:mod:`solvers.simulation.physical`). ``mtrace_c`` is the
M/Trace/c queue (Poisson arrivals; Mi et al. (2008), Table 1's M/Trace/1 with ``c`` servers).
``monitor_servers`` reports per window of ``T`` seconds the utilization as a multi-core tier's
monitoring does -- the busy time summed over the servers divided by ``c T`` -- and the
completions (a job counts in the window of its departure).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from solvers.simulation.single_queue import checked_jobs

__all__ = ["ServerWindows", "fcfs_servers", "monitor_servers", "mtrace_c"]


@dataclass(frozen=True)
class ServerWindows:
    """Windows ``k = 0..K-1`` of a ``servers``-server queue: ``utilization[k]`` the mean over
    the servers (``B_k / (c T)``, in [0, 1]), ``completions[k]`` and ``busy_time[k] = B_k``
    (server-seconds)."""

    window_s: float
    servers: int
    utilization: np.ndarray
    completions: np.ndarray
    busy_time: np.ndarray


def fcfs_servers(arrivals: np.ndarray, service: np.ndarray, servers: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Starts and departures of FCFS jobs on ``servers`` identical servers (arrival order)."""
    a, s = checked_jobs(arrivals, service)
    if isinstance(servers, bool) or not isinstance(servers, int) or servers < 1:
        raise ValueError(f"servers: must be an integer >= 1, got {servers!r}")
    free = [0.0] * servers                     # a heap of the servers' free times
    starts = np.empty(a.size)
    replace = heapq.heapreplace
    for i, (arrival, work) in enumerate(zip(a.tolist(), s.tolist())):
        start = max(arrival, free[0])
        starts[i] = start
        replace(free, start + work)
    return starts, starts + s


def mtrace_c(arrival_rate: float, service: np.ndarray, servers: int,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """M/Trace/c: Poisson arrivals at ``arrival_rate``, FCFS on ``servers`` servers, service
    times ``service`` in order of start; returns starts and departures."""
    if not arrival_rate > 0:
        raise ValueError(f"arrival_rate: must be > 0, got {arrival_rate}")
    s = np.asarray(service, dtype=float)
    arrivals = np.cumsum(rng.exponential(1.0 / arrival_rate, size=s.size))
    return fcfs_servers(arrivals, s, servers)


def monitor_servers(starts: np.ndarray, departures: np.ndarray, window_s: float, servers: int,
                    end: float) -> ServerWindows:
    """Per-window utilization (mean over the servers) and completions of the complete windows
    ``[kT, (k+1)T)`` before ``end``. Busy time up to ``t``:
    ``B(t) = sum_{s_i < t} (t - s_i) - sum_{d_i < t} (t - d_i)``."""
    if not window_s > 0:
        raise ValueError(f"window_s: must be > 0, got {window_s}")
    k = int(np.floor(end / window_s + 1e-9))
    edges = window_s * np.arange(k + 1)
    busy_until = _open_area(np.sort(starts), edges) - _open_area(np.sort(departures), edges)
    busy = np.diff(busy_until)
    win = np.floor(departures / window_s).astype(np.int64)
    counts = np.bincount(win[(win >= 0) & (win < k)], minlength=k).astype(float)
    return ServerWindows(float(window_s), int(servers),
                         np.clip(busy / (servers * window_s), 0.0, 1.0), counts, busy)


def _open_area(times: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``sum_{x in times, x < t} (t - x)`` at each ``t`` of ``at`` (``times`` sorted)."""
    cum = np.concatenate(([0.0], np.cumsum(times)))
    before = np.searchsorted(times, at, side="left")
    return before * at - cum[before]
