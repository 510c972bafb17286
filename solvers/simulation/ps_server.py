"""Discrete-event simulation of one closed processor-sharing tier, monitored in windows.

The physical simulator (:mod:`solvers.simulation.physical`) queues FCFS. A CPU time-sliced by
an operating system, or a database with one process per connection, shares its cores among
the requests present instead: with ``n`` requests on ``c`` cores each is served at rate
``min(1, c / n)`` (egalitarian processor sharing, Kleinrock 1976, ch. 4). This module
simulates that, for checking estimators that depend on the discipline
(:mod:`estimators.class_split`): ``N`` users think an exponential time of mean ``Z``, submit a
request of class ``c`` (drawn with ``mix``) whose work is lognormal with the class's mean
``demands[c]`` and squared coefficient of variation ``scv`` (exponential when ``scv`` is
``None``), and think again when it completes. ``schedule`` changes ``N`` over time (added
users start thinking; removed users leave when thinking, or when their request completes).

:func:`monitor_ps` returns one input-contract record per window (docs/pipeline.md): busy
core-time over ``cores * window_s``, per-class completions and the mean response time of the
requests completed in the window, the population at the window's end. Seeded; pure numpy.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Sequence

import numpy as np

__all__ = ["monitor_ps"]


def _works(rng: np.random.Generator, mean: float, scv: float | None, size: int) -> np.ndarray:
    if scv is None:
        return rng.exponential(mean, size)
    sigma2 = math.log1p(scv)
    return rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), size)


def monitor_ps(demands: Sequence[float], mix: Sequence[float], population: int,
               think_time: float, duration: float, window_s: float, *, cores: int = 1,
               classes: Sequence[str] | None = None, scv: float | None = None,
               schedule: Sequence[tuple[float, int]] | None = None, warmup: float = 0.0,
               system: str = "ps", tier: str = "db", start_time: float = 0.0,
               seed: int = 0) -> list[dict[str, Any]]:
    """Windows of a closed PS tier (module docstring); ``floor(duration / window_s)`` records
    after ``warmup`` seconds, ``end`` at ``start_time`` plus the simulated time (epoch s)."""
    D = np.asarray(demands, dtype=float)
    p = np.asarray(mix, dtype=float)
    if D.ndim != 1 or not D.size or not np.all(D > 0):
        raise ValueError(f"demands: must be one mean work > 0 per class, got {demands!r}")
    if p.shape != D.shape or not np.all(p >= 0) or not p.sum() > 0:
        raise ValueError(f"mix: must be {D.size} non-negative weights, got {mix!r}")
    if not (isinstance(cores, int) and cores >= 1):
        raise ValueError(f"cores: must be an integer >= 1, got {cores!r}")
    if not (window_s > 0 and duration >= window_s and think_time >= 0):
        raise ValueError(f"window_s/duration/think_time: need window_s > 0, duration >= "
                         f"window_s, think_time >= 0; got {window_s!r}, {duration!r}, "
                         f"{think_time!r}")
    names = list(classes) if classes is not None else [f"c{i}" for i in range(D.size)]
    p = p / p.sum()
    rng = np.random.default_rng(seed)
    C = D.size
    plan = sorted((float(t), int(n)) for t, n in (schedule or ()))
    now = 0.0
    thinking: list[tuple[float, int]] = []          # (submit time, user)
    users = 0
    leaving = 0                                     # users to remove when they next finish

    def add_users(k: int) -> None:
        nonlocal users
        for _ in range(k):
            heapq.heappush(thinking, (now + rng.exponential(think_time) if think_time > 0
                                      else now, users))
            users += 1

    add_users(int(population))
    work = np.zeros(0)
    cls = np.zeros(0, dtype=int)
    start = np.zeros(0)
    end_time = warmup + math.floor(duration / window_s) * window_s
    edge = warmup + window_s if warmup <= 0 else warmup
    counting = warmup <= 0
    busy = 0.0
    done = np.zeros(C)
    rsum = np.zeros(C)
    out: list[dict[str, Any]] = []
    present = int(population)
    while now < end_time:
        n = work.size
        rate = min(1.0, cores / n) if n else 0.0
        t_done = now + float(work.min()) / rate if n else math.inf
        t_arr = thinking[0][0] if thinking else math.inf
        t_plan = plan[0][0] if plan else math.inf
        t = min(t_done, t_arr, t_plan, edge)
        dt = t - now
        if n:
            work = work - dt * rate
            if counting:
                busy += dt * min(n, cores)
        now = t
        if t == edge:
            if counting:
                out.append({"system": system, "tier": tier, "end": start_time + now,
                            "window_s": window_s,
                            "cores": cores, "utilization": min(busy / (cores * window_s), 1.0),
                            "completions": {c: float(k) for c, k in zip(names, done)},
                            "response_time_s": {c: float(r / k) for c, r, k in
                                                zip(names, rsum, done) if k > 0},
                            "users": present})
            counting = True
            busy, done, rsum = 0.0, np.zeros(C), np.zeros(C)
            edge = now + window_s
        elif t == t_plan:
            _, target = plan.pop(0)
            if target > present:
                add_users(target - present)
            else:
                drop = present - target
                while thinking and drop:
                    heapq.heappop(thinking)
                    drop -= 1
                leaving += drop
            present = target
        elif t == t_arr:
            _, user = heapq.heappop(thinking)
            c = int(rng.choice(C, p=p))
            work = np.append(work, _works(rng, float(D[c]), scv, 1)[0])
            cls = np.append(cls, c)
            start = np.append(start, now)
        else:
            i = int(np.argmin(work))
            c = int(cls[i])
            if counting:
                done[c] += 1
                rsum[c] += now - start[i]
            work, cls, start = (np.delete(a, i) for a in (work, cls, start))
            if leaving:
                leaving -= 1
            else:
                add_users(1)
    return out
