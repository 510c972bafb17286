"""The open model of one system: its tiers as open queues fed by the measured request rates.

An open service (an API behind a gateway) is driven by its request rate, not by a population:
the model is :func:`solvers.open.solve_open_tiers` at the total rate ``x`` split by the
measured class mix ``p_c`` (``lambda_c = p_c x``), on the closed model's estimates -- per-class
demands ``D_{m,c} = V_{m,c} S_{m,c}``, cores, and each bursty tier's MAP(2) (an M/MAP/c queue,
per-job phases, matrix-geometric; Neuts 1981), the other tiers M/M/c (Erlang C).

Capacity is the largest total rate at the current mix at which every class meets its SLA,
``x* = max{x : R_c(x) <= SLA_c for every c with p_c > 0}`` (Harbaoui et al. (2010) section V's
question, asked in requests per second): ``R_c`` rises with ``x`` up to the saturation rate
``x_sat = min_m c_m / sum_c p_c D_{m,c}`` (the utilization law), so ``x*`` is found by
bisection on ``(0, x_sat)`` (:func:`rate_capacity`). The time to breach follows from the
rate trend (:mod:`streams.predict.users_trend`, on rates).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from solvers.open import OpenTiersResult, solve_open_tiers, tiers_capacity
from streams.predict.model import Point, SystemModel

__all__ = ["RATE_TOLERANCE", "RateCapacity", "mix_mean", "open_point", "rate_capacity"]

#: relative resolution of the capacity in requests per second (of the saturation rate)
RATE_TOLERANCE = 1e-4


def _inputs(model: SystemModel) -> tuple[np.ndarray, np.ndarray]:
    V = np.ones_like(model.D_mc) if model.visits is None else np.asarray(model.visits, float)
    S = np.divide(model.D_mc, V, out=np.zeros_like(model.D_mc), where=V > 0)
    return S, V


def solve_at(model: SystemModel, rate: float) -> OpenTiersResult:
    """The open tiers at total rate ``rate`` and the model's mix; a tier's pure delays
    (:attr:`~streams.predict.model.SystemModel.delays`) add to its residence times and the
    classes' response times without queueing (an infinite-server station: its mean whatever
    the rate, Lazowska et al. 1984)."""
    S, V = _inputs(model)
    res = solve_open_tiers(max(rate, 0.0) * model.mix, S, model.servers.astype(int),
                           processes=model.processes, visits=V,
                           per_job_max_cores=model.per_job_max_cores)
    if model.delays is None:
        return res
    return dataclasses.replace(res, response_time=res.response_time + model.delay_c,
                               residence_time=res.residence_time + model.delays)


def mix_mean(values: np.ndarray, mix: np.ndarray) -> np.ndarray | float:
    """``values @ mix`` over the classes in the mix only (``inf`` where a class in it has
    ``inf``; a class out of it, weight 0, counts nothing, never ``0 * inf = NaN``)."""
    hit = mix > 0
    return np.asarray(values)[..., hit] @ mix[hit]


def open_point(model: SystemModel, rate: float) -> tuple[Point, OpenTiersResult]:
    """The model's answer at total rate ``rate`` as a :class:`~streams.predict.model.Point`
    (``residence``: per tier, over the mix; ``inf`` where a tier is saturated) and the open
    solution itself."""
    res = solve_at(model, rate)
    residence = mix_mean(res.residence_time, model.mix)
    kind = "open-map" if model.processes is not None else "open"
    return Point(0, float(res.throughput.sum()), residence, res.response_time,
                 res.utilization, None, kind), res


@dataclass(frozen=True)
class RateCapacity:
    """``capacity`` (requests/s within every SLA; ``None`` when no class has an SLA),
    ``saturation`` (the largest rate any tier carries), the class that breaks first beyond
    ``capacity`` and the tier holding most of its response time there."""

    capacity: float | None
    saturation: float
    breach_class: str | None
    breach_tier: str | None


def _excess(model: SystemModel, res: OpenTiersResult, judged: np.ndarray) -> np.ndarray:
    return np.where(judged, res.response_time / np.where(judged, model.sla, 1.0), -np.inf)


def rate_capacity(model: SystemModel) -> RateCapacity:
    """``x*`` by bisection (module docstring) to :data:`RATE_TOLERANCE` of ``x_sat``; 0 when
    a class misses its SLA at any rate (its demand alone exceeds it)."""
    S, V = _inputs(model)
    sat = tiers_capacity(model.mix, S, model.servers.astype(int), V)
    judged = (model.mix > 0) & np.isfinite(model.sla)
    if not judged.any() or not math.isfinite(sat):
        return RateCapacity(None, sat, None, None)
    lo, hi = 0.0, sat
    if _excess(model, solve_at(model, 0.0), judged).max() > 1.0:
        hi = 0.0
    while hi - lo > RATE_TOLERANCE * sat:
        mid = 0.5 * (lo + hi)
        if _excess(model, solve_at(model, mid), judged).max() <= 1.0:
            lo = mid
        else:
            hi = mid
    beyond = solve_at(model, hi)
    ratio = _excess(model, beyond, judged)
    c = int(np.argmax(ratio))
    share = beyond.residence_time[:, c]
    share = np.where(np.isfinite(share), share, np.finfo(float).max)
    return RateCapacity(lo, sat, model.classes[c], model.tiers[int(np.argmax(share))])
