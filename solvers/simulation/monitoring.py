"""What a monitoring system sees of a simulated network: per-window, per-tier records.

Each queue of the network is a tier. Time is cut into windows ``[w + kT, w + (k+1)T)`` after
a warm-up ``w``; for each window and tier a record in the shape of the input contract of docs/pipeline.md
is produced:

``{"system", "tier", "end", "window_s", "utilization", "cores", "completions",
"response_time_s", "users"}``

* ``utilization`` -- busy fraction of the tier in the window (averaged over its servers),
  the ``U_k = B_k / T`` of Mi et al. (2008), Fig. 2;
* ``completions`` -- requests of each class that *left this tier* in the window (every class
  is listed, zeros included);
* ``response_time_s`` -- mean time those requests spent at this tier (queueing + service),
  per class; a class with no completion in the window is absent;
* ``users`` -- closed networks only: users in the system at the window's end (thinking or in
  a request, including users that will leave after their current request when the
  population is being reduced);
* ``end`` -- ``start_time + (simulated time at the window's end)``, in epoch seconds, or as
  an ISO-8601 UTC string (``"YYYY-MM-DDThh:mm:ssZ"``) with ``iso_time=True``;
* ``cores`` -- the tier's number of servers.

A request counts in the window in which it leaves the tier, as in
:func:`solvers.simulation.single_queue.monitor_windows`. A population change scheduled exactly
at a window's end shows in the next window's ``users``.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any, Sequence

import numpy as np

from solvers.simulation.network import Checkpoints, ClosedNetwork, closed_checkpoints
from solvers.simulation.open_queue import OpenNetwork, open_checkpoints
from solvers.simulation.single_queue import Windows

__all__ = ["tier_windows", "window_records", "monitor_closed", "monitor_open", "format_end"]


def _window_edges(duration: float, window_s: float, warmup: float) -> np.ndarray:
    for name, value, positive in (("duration", duration, True), ("window_s", window_s, True),
                                  ("warmup", warmup, False)):
        v = float(value)
        if not math.isfinite(v) or (v <= 0 if positive else v < 0):
            cond = "> 0" if positive else ">= 0"
            raise ValueError(f"{name}: must be finite and {cond}, got {value!r}")
    k = int(math.floor(float(duration) / float(window_s) + 1e-9))
    if k < 1:
        raise ValueError(f"window_s: {window_s} is longer than duration {duration}")
    return float(warmup) + float(window_s) * np.arange(k + 1)


def tier_windows(cp: Checkpoints) -> list[Windows]:
    """Per-tier :class:`~solvers.simulation.single_queue.Windows` between consecutive
    checkpoints of ``cp`` (which must be equally spaced)."""
    widths = np.diff(cp.times)
    if widths.size == 0 or not np.allclose(widths, widths[0], rtol=1e-9, atol=1e-12):
        raise ValueError("cp: checkpoints must be at least two, equally spaced")
    window = float(widths[0])
    busy = np.diff(cp.busy, axis=0) / cp.servers  # busy fraction x window, per tier
    counts = np.diff(cp.queue_completions, axis=0)
    rsum = np.diff(cp.residence_sum, axis=0)
    mean_rt = np.divide(rsum, counts, out=np.zeros_like(rsum), where=counts > 0)
    return [Windows(window, np.clip(busy[:, m] / window, 0.0, 1.0), busy[:, m],
                    counts[:, m, :], mean_rt[:, m, :]) for m in range(busy.shape[1])]


def format_end(epoch_s: float, iso_time: bool) -> float | str:
    """``end`` field: epoch seconds, or ISO-8601 UTC (milliseconds only when needed)."""
    if not iso_time:
        return float(epoch_s)
    stamp = _dt.datetime.fromtimestamp(round(float(epoch_s), 3), tz=_dt.timezone.utc)
    text = stamp.strftime("%Y-%m-%dT%H:%M:%S")
    if stamp.microsecond:
        text += f".{stamp.microsecond // 1000:03d}"
    return text + "Z"


def window_records(cp: Checkpoints, *, system: str, tiers: Sequence[str],
                   classes: Sequence[str], start_time: float = 0.0, iso_time: bool = False,
                   include_users: bool = True) -> list[dict[str, Any]]:
    """Input-contract records, window by window and tier by tier in order, from ``cp``
    (checkpoints at equally spaced window edges)."""
    if not isinstance(system, str) or not system:
        raise ValueError(f"system: must be a non-empty string, got {system!r}")
    wins = tier_windows(cp)
    if len(tiers) != len(wins):
        raise ValueError(f"tiers: need {len(wins)} names, got {len(tiers)}")
    if len(classes) != cp.completions.shape[1]:
        raise ValueError(f"classes: need {cp.completions.shape[1]} names, got {len(classes)}")
    start = float(start_time)
    if not math.isfinite(start):
        raise ValueError(f"start_time: must be finite, got {start_time!r}")
    records = []
    for k in range(len(cp.times) - 1):
        end = format_end(start + float(cp.times[k + 1]), iso_time)
        for m, (tier, win) in enumerate(zip(tiers, wins)):
            counts = win.completions[k]
            rec: dict[str, Any] = {
                "system": system,
                "tier": str(tier),
                "end": end,
                "window_s": win.window_s,
                "utilization": float(win.utilization[k]),
                "cores": int(cp.servers[m]),
                "completions": {str(c): int(n) for c, n in zip(classes, counts)},
                "response_time_s": {str(c): float(win.response_time[k, i])
                                    for i, c in enumerate(classes) if counts[i] > 0},
            }
            if include_users:
                rec["users"] = int(cp.users[k + 1])
            records.append(rec)
    return records


def monitor_closed(network: ClosedNetwork, duration: float, window_s: float, *,
                   warmup: float = 0.0, schedule: Sequence[tuple[float, Any]] | None = None,
                   system: str = "sim", start_time: float = 0.0, iso_time: bool = False,
                   rng: np.random.Generator | None = None,
                   seed: int | None = None) -> list[dict[str, Any]]:
    """Simulate ``network`` (optionally with a population ``schedule``) and return what a
    monitoring system reports: ``floor(duration / window_s)`` windows per tier after
    ``warmup`` seconds, as input-contract records."""
    edges = _window_edges(duration, window_s, warmup)
    cp = closed_checkpoints(network, edges, schedule=schedule, rng=rng, seed=seed)
    return window_records(cp, system=system, tiers=[q.name for q in network.queues],
                          classes=list(network.classes), start_time=start_time,
                          iso_time=iso_time, include_users=True)


def monitor_open(network: OpenNetwork, duration: float, window_s: float, *,
                 warmup: float = 0.0, system: str = "sim", start_time: float = 0.0,
                 iso_time: bool = False, rng: np.random.Generator | None = None,
                 seed: int | None = None) -> list[dict[str, Any]]:
    """As :func:`monitor_closed` for an open network (records have no ``users``)."""
    edges = _window_edges(duration, window_s, warmup)
    cp = open_checkpoints(network, edges, rng=rng, seed=seed)
    return window_records(cp, system=system, tiers=[q.name for q in network.queues],
                          classes=list(network.classes), start_time=start_time,
                          iso_time=iso_time, include_users=False)
