"""Response-time quantiles of open tiers in series, FCFS or processor-sharing, fed by Poisson
arrivals.

Each tier is taken as fed by Poisson arrivals at the total rate ``x`` (Jackson 1963: exact for
exponential tiers in series), so a request finds M/M/c's stationary count there (PASTA, Wolff
1982) at the offered load ``a_m = x D_m`` (``D_m = sum_c p_c D_{m,c}``, the aggregate demand
per request, as :mod:`solvers.open.tiers` loads the tier). At a FCFS tier its wait is the
mixture of Erlangs of :mod:`~solvers.response_time.sojourn` (Erlang C's law) shared by every
class in proportion to its visits, then its own exponential service; at a processor-sharing
tier its sojourn is the passage time of :mod:`~solvers.response_time.ps` with the others
arriving at ``x``. The tiers are convolved as if independent, as in the closed law.
"""

from __future__ import annotations

import math

import numpy as np

from .ps import PSLaw, open_found, ps_sojourn
from .sojourn import GRID, TierWait, end_to_end_many, quantiles, tier_wait_checked

__all__ = ["open_quantiles", "tier_laws"]


def open_quantiles(rate: float, mix: np.ndarray, class_demands: np.ndarray,
                   servers: np.ndarray, ps: np.ndarray, levels: tuple[float, ...],
                   shares: np.ndarray | None = None, *, grid: int = GRID
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(C, L)`` quantiles at ``levels`` and ``(C,)`` means of each class's response time at
    total rate ``rate`` (module docstring): ``class_demands`` ``D_{m,c}`` per request,
    ``servers`` ``c_m`` (``inf``: a delay), ``ps[m]`` tier ``m`` shares its cores,
    ``shares[m, c]`` the factor on a FCFS tier's wait a class meets (default 1). A saturated
    tier (``a_m >= c_m``) gives ``inf`` to every class with demand there."""
    Dmc = np.atleast_2d(np.asarray(class_demands, dtype=float))
    M, C = Dmc.shape
    p = np.asarray(mix, dtype=float)
    if p.shape != (C,) or not (np.all(p >= 0) and p.sum() > 0):
        raise ValueError(f"mix: must be {C} non-negative weights, got {p.tolist()}")
    if not (math.isfinite(rate) and rate >= 0):
        raise ValueError(f"rate: must be finite and >= 0, got {rate!r}")
    lv = tuple(float(q) for q in levels)
    p = p / p.sum()
    c = np.asarray(servers, dtype=float)
    waits, services, extra, saturated = tier_laws(rate, Dmc, p, c, ps)
    [dists] = end_to_end_many([waits], services, shares, grid=grid, extra=[extra])
    q = quantiles(dists, lv)
    mean = np.array([d.mean for d in dists])
    q[saturated] = math.inf
    mean[saturated] = math.inf
    return q, mean


def tier_laws(rate: float, Dmc: np.ndarray, p: np.ndarray, c: np.ndarray, ps: np.ndarray,
              skip: np.ndarray | None = None
              ) -> tuple[list[TierWait], np.ndarray, list[PSLaw], np.ndarray]:
    """Per tier of an open network at total rate ``rate`` (mix ``p``, demands ``D_{m,c}``,
    cores ``c_m``, ``ps[m]``: processor sharing): a first-come-first-served tier's wait
    (Erlang C's found law), a processor-sharing tier's sojourn law in ``extra`` (its services
    then zero); the services left, and which classes meet a saturated tier (``a_m >= c_m``).
    ``skip[m]``: a tier another law covers (a pool's held tiers), no wait and no service."""
    M, C = Dmc.shape
    flags = np.asarray(ps, dtype=bool)
    out = np.zeros(M, dtype=bool) if skip is None else np.asarray(skip, dtype=bool)
    D = Dmc @ p
    saturated = np.zeros(C, dtype=bool)
    services = np.where(out[:, None], 0.0, Dmc)
    waits: list[TierWait] = []
    extra: list[PSLaw] = []
    for m in range(M):
        if out[m] or not math.isfinite(c[m]) or D[m] == 0:
            waits.append(tier_wait_checked(0, np.ones(1), 0.0, 1.0))
            continue
        if rate * D[m] >= c[m]:
            saturated |= Dmc[m] > 0
            waits.append(tier_wait_checked(0, np.ones(1), 0.0, 1.0))
            continue
        found = open_found(rate, float(D[m]), int(c[m]))
        if flags[m]:
            extra.append(ps_sojourn(Dmc[m], p, float(c[m]), found, rate))
            services[m] = 0.0
            waits.append(tier_wait_checked(0, np.ones(1), 0.0, 1.0))
        else:
            waits.append(tier_wait_checked(0, found, float(D[m]), float(c[m])))
    return waits, services, extra, saturated
