"""The model's pool utilization checked against the measured occupancy.

Where a window carries a pool's measured occupancy (``pools`` of the input record,
:mod:`streams.core.pool_occupancy`), the pool's measured utilization over the solve interval is
``busy / K`` -- mean tokens held over the size (the size the windows report, else the
configured one) -- and the model's is its ``pool_utilization`` at the operating point
(:func:`solvers.pools.solve_pools`: mean tokens held over ``K``). Both are Little's law on the
pool, ``busy = X h`` with ``h`` the holding time (Little 1961), so they differ where the model's
holding time (the residence at the held tiers, Rolia and Sevcik 1995) or its throughput does.

* per pool (:func:`pool_checks`): the absolute difference ``|U_p - U_p^meas|`` (the
  prediction's ``pools.<p>.utilization_error``) and the relative one
  ``|U_p - U_p^meas| / U_p^meas``;
* ``pool_error`` (:func:`worst_pool`): the largest relative difference over the pools measured
  at :data:`MIN_MEASURED` or more (the relative error of an idle pool says nothing), and
  ``pool_error_pool`` its pool. It enters ``model_error`` as the larger of the two
  (:func:`combined`): a relative error of the mean tokens held is the relative error of
  ``X h``, of the same kind as the mean response time's;
* :func:`trust_reasons`: a pool measured at :data:`MIN_MEASURED` or more whose utilization is
  off by more than the trust margin (relative, as a tier's) makes the model untrusted, the
  reason naming the pool and both values;
* the ``model_error`` alert (:func:`error_sample`, :func:`pooled_worst`): each pool's
  relative error pooled over the last solves as the response time's is (time-weighted here:
  the measured utilization is a time average), and the largest significant one
  (``pool_error_pooled``, its pool ``pool_error_pooled_pool``) is watched beside the response
  time's against ``model_error_threshold``. A configured pool that is wrong (its size, or the
  tiers it ``holds``) gives the right response time while the pool does not bind -- the
  response time's error stays small -- but the wrong holding time, so the wrong capacity
  where it binds: the tokens held are the measurement that shows it (Little's law on the
  pool), and the alert is what a user watches. Pooled and significant, not one
  solve's: the alert must not follow one noisy interval (the response time's rule,
  :mod:`streams.predict.confidence`).

Where only the size is measured the model is unchanged and nothing is checked; a measured size
other than the configured one is flagged (the model keeps the configured size: the
configuration is what the user changes), and so is a pool the windows measure that the model
does not have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from streams.predict.confidence import (TRUST_MARGIN, TRUST_MIN_UTILIZATION, pooled_errors,
                                        worst)
from streams.predict.model import POOL_FLAG, Point, SystemModel

__all__ = ["PoolCheck", "pool_checks", "worst_pool", "combined", "trust_reasons",
           "size_flags", "error_sample", "pooled_worst", "MIN_MEASURED", "MARGIN"]

#: measured pool utilizations below this are not held to the margin (as a tier's utilization)
MIN_MEASURED = TRUST_MIN_UTILIZATION
#: the relative margin (the trust margin of :mod:`streams.predict.confidence`)
MARGIN = TRUST_MARGIN


@dataclass(frozen=True)
class PoolCheck:
    """One pool at the operating point: the model's and the measured utilization, their
    absolute and relative differences (``relative`` ``None`` below :data:`MIN_MEASURED`)."""

    pool: str
    predicted: float
    measured: float
    error: float
    relative: float | None


def pool_checks(model: SystemModel, measured: Mapping[str, Mapping[str, float]],
                now: Point) -> dict[str, PoolCheck]:
    """Per modelled pool whose mean ``busy`` tokens were measured: the check (module
    docstring)."""
    out: dict[str, PoolCheck] = {}
    if now.pool_utilization is None:
        return out
    for k, spec in enumerate(model.pools):
        occ = measured.get(spec.name) or {}
        busy = occ.get("busy")
        predicted = float(now.pool_utilization[k])
        if busy is None or not np.isfinite(predicted):
            continue
        size = float(occ.get("size") or spec.size)
        u = min(busy / size, 1.0)
        diff = abs(predicted - u)
        out[spec.name] = PoolCheck(spec.name, predicted, u, diff,
                                   diff / u if u >= MIN_MEASURED else None)
    return out


def worst_pool(checks: Mapping[str, PoolCheck]) -> tuple[str | None, float | None]:
    """The pool with the largest relative difference (among those with one), and it."""
    rel = {p: c.relative for p, c in checks.items() if c.relative is not None}
    if not rel:
        return None, None
    name = max(rel, key=lambda p: rel[p])
    return name, rel[name]


def combined(error: float | None, pool_error: float | None) -> float | None:
    """``model_error``: the larger of the response time's error and the pools'."""
    values = [v for v in (error, pool_error) if v is not None]
    return max(values) if values else None


def trust_reasons(pred: Any) -> list[str]:
    """Why the prediction ``pred`` is not trusted for its pools: one line per pool measured at
    :data:`MIN_MEASURED` or more whose utilization is off by more than :data:`MARGIN`."""
    out = []
    for name, part in (pred.get("pools") or {}).items():
        u = part.utilization
        measured = getattr(part, "utilization_measured", None)
        if isinstance(measured, float) and u is not None and measured >= MIN_MEASURED \
                and abs(u - measured) > MARGIN * measured:
            out.append(f"pool {name} utilization {u:.2f} against {measured:.2f} measured "
                       f"(margin {100 * MARGIN:.0f}%)")
    return out


def size_flags(model: SystemModel, measured: Mapping[str, Mapping[str, float]]) -> list[str]:
    """A flag per modelled pool whose windows report another size than the configured one,
    and one per pool the windows measure that the model does not have (not configured, or
    not modelled yet: its occupancy is not checked)."""
    names = {spec.name for spec in model.pools}
    out = [f"{POOL_FLAG}windows measure pool {name!r}, which the model does not have (not "
           f"configured under the system's pools, or its tiers not modelled): not checked"
           for name in measured if name not in names]
    for spec in model.pools:
        size = (measured.get(spec.name) or {}).get("size")
        if size is not None and int(size) != int(spec.size):
            out.append(f"{POOL_FLAG}{spec.name} measures {int(size)} tokens, configured "
                       f"{int(spec.size)}: the model keeps the configured size (correct it in "
                       f"the pool's section)")
    return out


def error_sample(checks: Mapping[str, PoolCheck], seconds: float) -> dict[str, list[float]]:
    """This solve's ``[seconds, U_p, U_p^meas]`` per pool measured at :data:`MIN_MEASURED` or
    more, ``seconds`` the solve interval (the weight of its time-averaged measurement)."""
    if not seconds > 0:
        return {}
    return {name: [float(seconds), c.predicted, c.measured] for name, c in checks.items()
            if c.relative is not None}


def pooled_worst(samples: list[Mapping[str, list[float]]]) -> tuple[str | None, float | None]:
    """Over the last solves' :func:`error_sample` s: each pool's pooled relative error
    ``|sum_k w_k (U_p - U_p^meas)_k| / sum_k w_k U_p,k^meas``, significant outside the
    Student-t interval of its spread between the solves
    (:func:`streams.predict.confidence.pooled_errors`); the pool with the largest significant
    one, and it (``None``: none is)."""
    pooled = pooled_errors(samples)
    return worst({name: v["error"] for name, v in pooled.items() if v["significant"]})
