"""Response-time distributions of closed networks of exponential FCFS tiers, and their quantiles.

A request's response time is the sum of its sojourns at the tiers it visits. At a tier of ``c``
cores its sojourn is a mixture of Erlangs given the jobs it finds there
(:mod:`~solvers.response_time.sojourn`); what it finds follows from the arrival theorem
(Lavenberg and Reiser 1980; Sevcik and Mitrani 1981): the stationary marginal of the network
with one job fewer (:mod:`~solvers.response_time.arrival`). The tiers are convolved as if
independent -- exact for one queueing tier, an approximation in a network (measured in
docs/accuracy.md). :func:`response_time_quantiles` puts the three together for the
single-class aggregate model ``streams.predict`` solves, with the per-class read-back of its
wait (each class meets the tier's wait scaled by its visit share, and its own service). A
tier that shares its cores (``ps``: processor sharing) has no shared wait: each class's
sojourn there is its own passage time (:mod:`~solvers.response_time.ps`), convolved with the
other tiers' on the same lattice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solvers.mva import mva_curve

from .arrival import TRUNCATION, ArrivalLaw, ArrivalMarginals, FoundLaws, arrival_marginals
from .ps import PSLaw, closed_arrivals, ps_sojourn
from .sojourn import (GRID, GridDistribution, TierWait, checked_services, end_to_end,
                      end_to_end_many, lattice_quantiles, quantiles, sojourn_cdf, tier_wait,
                      tier_wait_checked, wait_laws)
from .window import stacked_window_quantiles

__all__ = ["ArrivalLaw", "ArrivalMarginals", "arrival_marginals", "TierWait", "tier_wait", "sojourn_cdf",
           "GridDistribution", "end_to_end", "end_to_end_many", "ResponseQuantiles",
           "response_time_quantiles", "response_time_quantiles_many",
           "DEFAULT_LEVELS", "PSLaw", "ps_tier_laws"]

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
                            arrival: ArrivalLaw | None = None,
                            ps: np.ndarray | None = None,
                            mix: np.ndarray | None = None) -> ResponseQuantiles:
    """Quantiles of the response time per class at ``population`` in a closed single-class
    network (``demands`` ``D_m``, ``servers`` ``c_m``, think time ``Z``). ``class_demands``
    ``D_{m,c}`` (default: the aggregate, one class) are the classes' own exponential services;
    ``shares[m, c]`` the factor on tier ``m``'s wait a class-``c`` request meets (default 1).
    ``arrival``: the network's :class:`ArrivalLaw`, kept to answer many populations.
    ``ps[m]``: tier ``m`` shares its cores (processor sharing, :func:`ps_tier_laws`; ``mix``
    the classes' shares of the requests)."""
    [res] = response_time_quantiles_many(demands, servers, think_time, [population],
                                         class_demands, shares, levels, arrival, ps, mix)
    return res


def response_time_quantiles_many(demands: np.ndarray, servers: np.ndarray, think_time: float,
                                 populations: list[int],
                                 class_demands: np.ndarray | None = None,
                                 shares: np.ndarray | None = None,
                                 levels: tuple[float, ...] = DEFAULT_LEVELS,
                                 arrival: ArrivalLaw | None = None,
                                 ps: np.ndarray | None = None,
                                 mix: np.ndarray | None = None) -> list[ResponseQuantiles]:
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
    Dl, cl = D.tolist(), c.tolist()
    if ps is None or not np.asarray(ps, dtype=bool).any():
        # exponential FCFS tiers only: the found laws straight into the window, one array
        S, sh = checked_services(D.shape[0], Dmc, shares)
        found = law.found_many(populations)
        approximate = [False] * len(populations)
        for (p, _), approx in zip(found.rows, found.approximate):
            approximate[p] = approximate[p] or approx
        qw, means = stacked_window_quantiles(*_stacked_waits(found, Dl, cl), len(populations),
                                             S, sh, np.asarray(lv))
        return [ResponseQuantiles(levels=lv, quantiles=qw[i], mean=means[i],
                                  approximate=approximate[i]) for i in range(len(populations))]
    margs = law.marginals_many(populations)
    waits = [[tier_wait_checked(marg.offset[m], marg.pmf[m], Dl[m], cl[m]) for m in range(len(Dl))]
             for marg in margs]
    tiers = ps_tier_laws(D, c, think_time, populations, margs, Dmc, mix, ps)
    extra = [list(laws.values()) for laws in tiers]
    Dmc = Dmc.copy()
    for m in tiers[0]:                         # their own law: no FCFS wait, no service
        Dmc[m] = 0.0
        for w in waits:
            w[m] = tier_wait_checked(0, np.ones(1), 0.0, 1.0)
    S, sh = checked_services(D.shape[0], Dmc, shares)
    laws = wait_laws(waits, S, sh, GRID, extra)
    C = S.shape[1]
    if all(h > 0 for h, _, _ in laws):            # the lattices stacked, read in one go
        q = lattice_quantiles(np.repeat([h for h, _, _ in laws], C),
                              np.concatenate([cdf for _, cdf, _ in laws]),
                              np.asarray(lv)).reshape(len(laws), C, len(lv))
    else:
        q = quantiles([GridDistribution(h=h, cdf=cdf[k], mean=0.0)
                       for h, cdf, _ in laws for k in range(C)], lv).reshape(len(laws), C,
                                                                             len(lv))
    return [ResponseQuantiles(levels=lv, quantiles=q[i], mean=np.asarray(means, dtype=float),
                              approximate=any(marg.approximate))
            for i, ((_, _, means), marg) in enumerate(zip(laws, margs))]


def _stacked_waits(found: FoundLaws, D: list[float], c: list[float]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The waits of :func:`~solvers.response_time.sojourn.tier_wait` for every population
    and tier of ``found`` as :func:`~solvers.response_time.window.stacked_window_quantiles`
    takes them: row ``p M + m``, ``K = max(j - c_m + 1, 0)`` phases of mean ``D_m / c_m``
    for ``j`` jobs found. Each found law is cut where :meth:`ArrivalLaw.marginals_many` cuts
    it (below :data:`~solvers.response_time.arrival.TRUNCATION` of its largest entry), all
    on the columns some law keeps: one array step for all, no law object per row."""
    P, M = len(found.offsets), len(D)
    inv = [0.0 if not math.isfinite(ci) or Di == 0 else 1.0 / (ci / Di)
           for Di, ci in zip(D, c)] * P
    offset = [float(max(k - int(c[m]) + 1, 0)) if k else 0.0
              for ks in found.offsets for m, k in enumerate(ks)]
    if not found.rows:
        return np.ones((P * M, 1)), np.array(offset), np.array(inv)
    W = found.weights
    keep = W >= TRUNCATION
    W = np.where(keep, W, 0.0)
    cols = np.flatnonzero(keep.any(axis=0))
    first, W = int(cols[0]), W[:, cols[0]:cols[-1] + 1]
    W /= W.sum(axis=1, keepdims=True)
    width = W.shape[1]
    coef = np.zeros((P * M, width))
    coef[:, 0] = 1.0
    at = [p * M + m for p, m in found.rows]
    shift = [int(c[m]) - 1 - first for _, m in found.rows]   # found j: K = j - c + 1
    fold = [r for r, d in enumerate(shift) if d > 0]         # K = 0 for several j
    for r, d in enumerate(shift):
        offset[at[r]] = float(max(-d, 0))
    if fold:
        d = np.array([shift[r] for r in fold])
        idx = np.arange(width) + d[:, None]
        Wf = W[fold]
        folded = np.where(idx < width, Wf[np.arange(len(fold))[:, None],
                                          np.minimum(idx, width - 1)], 0.0)
        folded[:, 0] = np.cumsum(Wf, axis=1)[np.arange(len(fold)), np.minimum(d, width - 1)]
        W[fold] = folded
    coef[at] = W
    return coef, np.array(offset), np.array(inv)


def ps_tier_laws(demands: np.ndarray, servers: np.ndarray, think_time: float,
                 populations: list[int], margs: list[ArrivalMarginals],
                 class_demands: np.ndarray, mix: np.ndarray | None, ps: np.ndarray
                 ) -> list[dict[int, PSLaw]]:
    """Per population, per processor-sharing tier (``ps[m]``, finite cores, a demand) each
    class's sojourn there (:func:`~solvers.response_time.ps.ps_sojourn`): what a request
    finds from the arrival theorem's marginal, the others sent by the rest of the network as
    a flow-equivalent server, ``X^{(-m)}(i)`` of the network without tier ``m`` (one MVA
    pass; ``i / Z`` when the think time is all there is)."""
    D = np.asarray(demands, dtype=float)
    c = np.asarray(servers, dtype=float)
    Dmc = np.asarray(class_demands, dtype=float)
    flags = np.asarray(ps, dtype=bool).reshape(-1)
    if flags.shape[0] != D.shape[0]:
        raise ValueError(f"ps: one flag per tier ({D.shape[0]}), got {flags.shape[0]}")
    C = Dmc.shape[1]
    if mix is None:
        if C > 1:
            raise ValueError("mix: the classes' shares are needed with processor-sharing tiers")
        mix = np.ones(1)
    p = np.asarray(mix, dtype=float)
    if p.shape != (C,) or not (np.all(p >= 0) and p.sum() > 0):
        raise ValueError(f"mix: must be {C} non-negative weights, got {p.tolist()}")
    top = max(max(populations), 1)
    out: list[dict[int, PSLaw]] = [{} for _ in populations]
    for m in np.flatnonzero(flags):
        if not (math.isfinite(c[m]) and D[m] > 0):
            continue
        rest = np.delete(D, m)
        if rest.size and (rest > 0).any():
            X = mva_curve(rest, top, think_time, np.delete(c, m)).throughput
        else:
            with np.errstate(divide="ignore"):
                X = np.arange(top + 1) / think_time if think_time > 0 else \
                    np.where(np.arange(top + 1) > 0, math.inf, 0.0)
        for i, (n, marg) in enumerate(zip(populations, margs)):
            n = max(int(n), 1)
            found = np.zeros(n)
            pm = marg.pmf[m]
            found[marg.offset[m]:marg.offset[m] + pm.shape[0]] = pm[:n - marg.offset[m]]
            out[i][int(m)] = ps_sojourn(Dmc[m], p, float(c[m]), found,
                                        closed_arrivals(X, n))
    return out
