"""A seeded event simulation of the physical system behind the open pool chain: Poisson
arrivals of mixed classes take a token of a pool of ``K`` (first come, first served) and hold
it across a run of tiers, each first-come-first-served or processor-sharing on its cores, then
give it back; each class's service at each tier is drawn from its own law -- exponential, the
two-phase hyperexponential of balanced means, or a lognormal -- of a given mean and SCV.

It is the truth the held chain (:func:`solvers.pools_open.held_chain`) is judged against with
per-class service SCVs: the chain fits a hyperexponential to each class's mean and SCV, and the
lognormal is a shape it was not fitted on. Processor sharing: each of ``n`` jobs on ``c``
cores is served at ``min(1, c / n)`` (Kleinrock 1976, ch. 4); FCFS: the first ``c`` in order
of arrival at the tier. Every RNG draw comes from one ``numpy.random.Generator`` of the seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["LAWS", "PoolRun", "sampler", "simulate_pool_open"]

#: the service laws :func:`sampler` draws from
LAWS = ("exp", "h2", "ln")


def sampler(law: str, mean: float, scv: float, rng: np.random.Generator):
    """A function drawing one service time of ``law`` (:data:`LAWS`) with ``mean`` and
    ``scv`` (``exp`` ignores it; ``h2`` needs ``scv >= 1``: balanced means, Whitt 1982;
    ``ln``: ``sigma^2 = log(1 + scv)``)."""
    if not (mean > 0 and math.isfinite(mean)):
        raise ValueError(f"mean: must be a finite time > 0, got {mean!r}")
    if law == "exp" or (law == "h2" and scv == 1.0):
        return lambda: rng.exponential(mean)
    if law == "h2":
        if not scv >= 1.0:
            raise ValueError(f"scv: the balanced-means H2 needs an SCV >= 1, got {scv!r}")
        p = 0.5 * (1.0 + math.sqrt((scv - 1.0) / (scv + 1.0)))
        m1, m2 = mean / (2.0 * p), mean / (2.0 * (1.0 - p))
        return lambda: rng.exponential(m1) if rng.random() < p else rng.exponential(m2)
    if law == "ln":
        if not scv > 0:
            raise ValueError(f"scv: a lognormal needs an SCV > 0, got {scv!r}")
        s2 = math.log1p(scv)
        mu, s = math.log(mean) - s2 / 2.0, math.sqrt(s2)
        return lambda: rng.lognormal(mu, s)
    raise ValueError(f"law: must be one of {LAWS}, got {law!r}")


@dataclass(frozen=True)
class PoolRun:
    """One run: per completed request (after the warm-up) its ``cls``, ``arrival`` and
    ``end`` times and ``residence`` at each held tier (``(n, H)``, the token's wait in none);
    ``busy_tokens`` the time-average of the tokens held over the measured span."""

    cls: np.ndarray
    arrival: np.ndarray
    end: np.ndarray
    residence: np.ndarray
    busy_tokens: float

    def mean_response(self, C: int) -> np.ndarray:
        """Each class's mean response time (wait for a token included), ``(C,)``."""
        r = self.end - self.arrival
        return np.array([r[self.cls == c].mean() if np.any(self.cls == c) else math.nan
                         for c in range(C)])


def simulate_pool_open(rate: float, mix: Sequence[float], demands: np.ndarray,
                       cores: Sequence[int], ps: Sequence[bool], size: int,
                       laws: Sequence[Sequence[str]], scv: np.ndarray, seed: int,
                       requests: int = 40_000, warmup: float = 0.05) -> PoolRun:
    """Simulate ``requests`` arrivals at ``rate``/s of classes drawn by ``mix`` into a pool of
    ``size`` tokens held across tiers of ``cores`` (``ps``: processor sharing, else FCFS),
    class ``c``'s service at tier ``h`` of mean ``demands[h, c]``, law ``laws[h][c]`` and SCV
    ``scv[h, c]``; the first ``warmup`` share of the requests is left out."""
    D = np.asarray(demands, dtype=float)
    H, C = D.shape
    p = np.asarray(mix, dtype=float)
    p = p / p.sum()
    rng = np.random.default_rng(seed)
    draw = [[sampler(laws[h][c], float(D[h, c]), float(scv[h, c]), rng) for c in range(C)]
            for h in range(H)]
    classes = rng.choice(C, size=requests, p=p)
    gaps = rng.exponential(1.0 / rate, size=requests)
    arrivals = np.cumsum(gaps)
    K = int(size)
    at: list[list[list[float]]] = [[] for _ in range(H)]   # per tier: [remaining, req, seq]
    queue: list[int] = []
    enter = np.zeros((requests, H))
    leave = np.full((requests, H), math.nan)
    end = np.full(requests, math.nan)
    t, nxt, holders, seq = 0.0, 0, 0, 0
    t0 = float(arrivals[int(warmup * requests)])
    busy_area, t_last = 0.0, t0

    def start(r: int, h: int) -> None:
        nonlocal seq
        seq += 1
        enter[r, h] = t
        at[h].append([draw[h][int(classes[r])](), r, seq])

    def served(h: int) -> tuple[list[list[float]], float]:
        """The jobs in service at tier ``h`` and the speed of each."""
        jobs = at[h]
        if ps[h]:
            return jobs, min(1.0, cores[h] / len(jobs)) if jobs else 0.0
        return jobs[:int(cores[h])], 1.0

    done = 0
    while done < requests:
        best, who = math.inf, None
        speeds = [served(h) for h in range(H)]
        for h, (jobs, speed) in enumerate(speeds):
            for j in jobs:
                if j[0] / speed < best:
                    best, who = j[0] / speed, (h, j)
        ta = arrivals[nxt] - t if nxt < requests else math.inf
        step = min(ta, best)
        for jobs, speed in speeds:
            for j in jobs:
                j[0] -= step * speed
        if t + step > t0:
            busy_area += holders * (t + step - max(t, t0))
        t += step
        if ta <= best:
            r = nxt
            nxt += 1
            if holders < K:
                holders += 1
                start(r, 0)
            else:
                queue.append(r)
            continue
        h, j = who
        at[h].remove(j)
        r = j[1]
        leave[r, h] = t
        if h + 1 < H:
            start(r, h + 1)
            continue
        end[r] = t
        done += 1
        if queue:
            start(queue.pop(0), 0)
        else:
            holders -= 1
    keep = np.arange(requests) >= int(warmup * requests)
    span = t - t0
    return PoolRun(classes[keep], arrivals[keep], end[keep], (leave - enter)[keep],
                   busy_area / span if span > 0 else math.nan)
