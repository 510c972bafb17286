"""Response-time distributions of closed networks of exponential FCFS tiers, and their quantiles.

A request's response time is the sum of its sojourns at the tiers it visits. At a tier of ``c``
cores its sojourn is a mixture of Erlangs given the jobs it finds there
(:mod:`~solvers.response_time.sojourn`); what it finds follows from the arrival theorem
(Lavenberg and Reiser 1980; Sevcik and Mitrani 1981): the stationary marginal of the network
with one job fewer (:mod:`~solvers.response_time.arrival`). The tiers are convolved as if
independent -- exact for one queueing tier, an approximation in a network (measured in
docs/accuracy.md). :func:`response_time_quantiles` puts the three together for the
single-class aggregate model ``streams.predict`` solves, with the per-class read-back of its
wait (each class meets the tier's wait scaled by its visit share, and its own service).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arrival import ArrivalLaw, ArrivalMarginals, arrival_marginals
from .sojourn import (GridDistribution, TierWait, _tier_wait, end_to_end, end_to_end_many,
                      quantiles, sojourn_cdf, tier_wait)

__all__ = ["ArrivalLaw", "ArrivalMarginals", "arrival_marginals", "TierWait", "tier_wait", "sojourn_cdf",
           "GridDistribution", "end_to_end", "end_to_end_many", "ResponseQuantiles",
           "response_time_quantiles", "response_time_quantiles_many",
           "DEFAULT_LEVELS"]

#: the quantile levels predicted by default (p50, p90, p95, p99)
DEFAULT_LEVELS = (0.5, 0.9, 0.95, 0.99)


@dataclass(frozen=True, eq=False)
class ResponseQuantiles:
    """``quantiles[c, l]`` the level-``levels[l]`` quantile of class ``c``'s response time
    (seconds, think time excluded); ``mean[c]`` the mean of the same law; ``approximate``: a
    complementary network had another multi-server tier (Seidmann's approximation in the
    marginals, :mod:`~solvers.response_time.arrival`)."""

    levels: tuple[float, ...]
    quantiles: np.ndarray
    mean: np.ndarray
    approximate: bool


def response_time_quantiles(demands: np.ndarray, servers: np.ndarray, think_time: float,
                            population: int, class_demands: np.ndarray | None = None,
                            shares: np.ndarray | None = None,
                            levels: tuple[float, ...] = DEFAULT_LEVELS,
                            arrival: ArrivalLaw | None = None) -> ResponseQuantiles:
    """Quantiles of the response time per class at ``population`` in a closed single-class
    network (``demands`` ``D_m``, ``servers`` ``c_m``, think time ``Z``). ``class_demands``
    ``D_{m,c}`` (default: the aggregate, one class) are the classes' own exponential services;
    ``shares[m, c]`` the factor on tier ``m``'s wait a class-``c`` request meets (default 1).
    ``arrival``: the network's :class:`ArrivalLaw`, kept to answer many populations."""
    [res] = response_time_quantiles_many(demands, servers, think_time, [population],
                                         class_demands, shares, levels, arrival)
    return res


def response_time_quantiles_many(demands: np.ndarray, servers: np.ndarray, think_time: float,
                                 populations: list[int],
                                 class_demands: np.ndarray | None = None,
                                 shares: np.ndarray | None = None,
                                 levels: tuple[float, ...] = DEFAULT_LEVELS,
                                 arrival: ArrivalLaw | None = None) -> list[ResponseQuantiles]:
    """:func:`response_time_quantiles` at several populations of one network (a prediction's
    now and forecast), the laws computed side by side (:func:`end_to_end_many`: the array
    steps of one law carry all of them)."""
    D = np.asarray(demands, dtype=float)
    Dmc = D[:, None] if class_demands is None else np.asarray(class_demands, dtype=float)
    lv = tuple(float(q) for q in levels)
    if not all(0 < q < 1 for q in lv):
        raise ValueError(f"levels: quantile levels must lie in (0, 1), got {list(lv)}")
    law = arrival if arrival is not None else ArrivalLaw(D, servers, think_time)
    c = np.asarray(servers, dtype=float)
    margs = [law.marginals(n) for n in populations]
    waits = [[_tier_wait(marg.offset[m], marg.pmf[m], float(D[m]), float(c[m]))
              for m in range(D.shape[0])] for marg in margs]
    laws = end_to_end_many(waits, Dmc, shares)
    q = quantiles([d for dists in laws for d in dists], lv).reshape(len(laws), -1, len(lv))
    return [ResponseQuantiles(levels=lv, quantiles=q[i],
                              mean=np.array([d.mean for d in dists]),
                              approximate=any(marg.approximate))
            for i, (dists, marg) in enumerate(zip(laws, margs))]
