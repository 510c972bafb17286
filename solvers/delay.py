"""Pure delays at the tiers: time a request spends at a tier without queueing for its CPU.

A request at a real tier does more than compute: it waits for a socket's round trip, for a
disk's fsync, for a lock, for the scheduler to wake it. Each of those is a delay ``delta_{m,c}``
(seconds per request at tier ``m``, visits included) that adds to the class's residence at
the tier without queueing: an infinite-server (delay) station in series with the tier's CPU,
Lazowska et al. (1984), ch. 3 and 6 ("delay centers"). The tier's residence is then::

    R_{m,c} = R^cpu_{m,c} + delta_{m,c}

In a product-form closed network the delay stations' order does not matter and their
distribution does not either (BCMP insensitivity, Baskett et al. 1975): for one class, all
the delays add to the think time, ``Z' = Z + sum_m delta_m``, and the queueing stations see
exactly the network with think time ``Z'`` (:func:`effective_think_time`). Where a pool holds
a run of tiers (:mod:`solvers.pools`) the delays of the held tiers are inside its holding time
and cannot go to the think time: each tier is followed by its own delay station
(:func:`with_delay_stations`), solved there, and folded back (:func:`fold_delay_stations`,
:func:`fold_pool_result`). Within a product-form held network the delay's side of its tier
does not matter (BCMP); where one held tier is solved by a chain of its own (the held chain of
:mod:`solvers.pools_bursty`), its delay goes on the side of the pool's other held tiers
(``before``), with which it is one flow-equivalent station.

A faster CPU shortens the CPU demand ``D_{m,c}``, never ``delta_{m,c}``: the two are kept apart
everywhere.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Collection, Sequence

import numpy as np

from .pools import PoolResult, PoolSpec

__all__ = ["as_delays", "effective_think_time", "with_delay_stations", "fold_delay_stations",
           "cpu_station", "fold_pool_result", "any_delay"]


def as_delays(delays: Any, shape: tuple[int, int]) -> np.ndarray:
    """``delta_{m,c}`` as a ``shape`` array of finite seconds >= 0 (``ValueError`` naming
    the first bad cell otherwise)."""
    d = np.asarray(delays, dtype=float)
    if d.shape != shape:
        raise ValueError(f"delays: must be {shape[0]} tiers x {shape[1]} classes, "
                         f"got shape {d.shape}")
    bad = np.argwhere(~np.isfinite(d) | (d < 0))
    if bad.size:
        m, c = (int(v) for v in bad[0])
        raise ValueError(f"delays[{m}][{c}]: must be finite seconds >= 0, got {d[m, c]!r}")
    return d


def effective_think_time(think_time: float, delays: Any, mix: Any) -> float:
    """``Z + sum_m sum_c p_c delta_{m,c}``: the aggregate class's think time with every tier's
    delay in it (exact for one class in a product-form network: module docstring)."""
    d = np.asarray(delays, dtype=float)
    p = np.asarray(mix, dtype=float)
    extra = float(d.sum(axis=0) @ p)
    z = float(think_time) + extra
    if not (z >= 0 and math.isfinite(z)):
        raise ValueError(f"think_time: must be finite seconds >= 0, got {think_time!r} "
                         f"(+ delays {extra!r})")
    return z


def any_delay(delays: Any) -> bool:
    """Some tier has a pure delay above 0 (``None``: none)."""
    return delays is not None and bool(np.any(np.asarray(delays, dtype=float)))


def cpu_station(m: int, before: Collection[int] = ()) -> int:
    """Tier ``m``'s CPU station among :func:`with_delay_stations`' stations."""
    return 2 * m + 1 if m in before else 2 * m


def with_delay_stations(demands: Any, servers: Any, delays: Any,
                        pools: Sequence[PoolSpec] = (), before: Collection[int] = ()
                        ) -> tuple[np.ndarray, np.ndarray, tuple[PoolSpec, ...]]:
    """The network with a delay station beside each tier: tier ``m`` becomes stations ``2m``
    (its CPU, ``demands[m]``, ``servers[m]`` cores) and ``2m + 1`` (``delays[m]``, infinitely
    many servers), the other way round for the tiers in ``before`` (their delay first:
    :func:`cpu_station`); each pool over tiers ``first..last-1`` holds stations
    ``2 first .. 2 last - 1`` (its tiers' delays inside its holding time). Returns the
    demands ``(2M, C)``, the servers ``(2M,)`` and the pools."""
    D = np.asarray(demands, dtype=float)
    if D.ndim == 1:
        D = D[:, None]
    M, C = D.shape
    d = as_delays(np.asarray(delays, dtype=float).reshape(M, C), (M, C))
    c = np.ones(M) if servers is None else np.broadcast_to(
        np.asarray(servers, dtype=float), (M,))
    cpu = np.array([cpu_station(m, before) for m in range(M)], dtype=int)
    D2 = np.empty((2 * M, C))
    c2 = np.full(2 * M, math.inf)
    D2[cpu], D2[cpu ^ 1], c2[cpu] = D, d, c
    p2 = tuple(PoolSpec(p.size, 2 * p.first, 2 * p.last, p.name) for p in pools)
    return D2, c2, p2


def fold_delay_stations(per_station: Any) -> np.ndarray:
    """Per-tier values from :func:`with_delay_stations`' stations: each tier's CPU station
    plus its delay station (residence times, queue lengths: ``(2M, ...) -> (M, ...)``)."""
    a = np.asarray(per_station, dtype=float)
    return a[0::2] + a[1::2]


def fold_pool_result(res: PoolResult, before: Collection[int] = ()) -> PoolResult:
    """A pool solution of :func:`with_delay_stations`' network per tier again: each tier's
    residence its CPU's plus its delay's, its utilization its CPU's; the classes' response
    times and the pools' figures as they are (the delays inside them)."""
    M = len(res.residence_time) // 2
    cpu = [cpu_station(m, before) for m in range(M)]
    return replace(res, residence_time=fold_delay_stations(res.residence_time),
                   tier_utilization=np.asarray(res.tier_utilization, dtype=float)[cpu])
