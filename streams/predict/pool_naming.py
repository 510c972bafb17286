"""Naming a thread or connection pool as the bottleneck or the breach.

A prediction names two resources (:mod:`streams.predict.story`): ``bottleneck_tier``, the
busiest, and ``breach_tier``, the one holding the largest share of the breaking class's
response time. With pools (:attr:`SystemModel.pools`) either may be a pool, named by its
configured name (the key of ``[systems.<system>.pools.<name>]``), not by its owning tier:

* **bottleneck** -- the resource with the smallest saturation throughput (the asymptotic
  bounds of Lazowska et al. (1984), ch. 5): a tier saturates at ``X = c_m / D_m``; a pool of
  ``K`` tokens, each held at least for the demands of its held tiers ``H``, at
  ``X = K / sum_{h in H} D_h`` (Little's law on the tokens: the software-server bound of the
  layered queueing models of Rolia and Sevcik (1995); a "software bottleneck" in Neilson et
  al. (1995) when it is the smaller). In utilization terms the bottleneck is
  ``argmax (D_m / c_m, sum_H D_h / K)``: for tiers alone the tier of highest utilization per
  core, as before (read at the forecast's point: ``X D_m / c_m`` and ``X sum_H D_h / K``).
  A tier wins a tie. The bound is the pool's no-contention holding time: a
  pool whose tokens wait at a saturated tier behind it is full too, but raising it does not
  help, and the tier is named.
* **breach** -- the largest component of the breaking class's response time at the breach
  point: each tier's residence without the wait for a token, and each pool's wait for a token
  (the same for every class: FCFS on the token). :meth:`SystemModel._pool_point` counts a
  pool's wait at its owning tier (the tier's measured response time includes it); here it is
  the pool's own -- where the pool binds before the tiers it holds (``sum_H D_h / K`` above
  their ``max_H D_h / c_h``). Where it does not, the wait is the queue of the busiest held
  tier kept outside it by the pool (a pool caps the queue behind it: past saturation the
  requests a saturated database cannot serve wait for a connection, not at the database),
  and it counts to that tier: a larger pool would move the queue inside it, not remove it.
"""

from __future__ import annotations

import numpy as np

from streams.predict.model import Point, SystemModel

__all__ = ["binds", "bottleneck_name", "breach_name", "breach_shares", "pool_index"]


def pool_index(model: SystemModel, name: str | None) -> int | None:
    """The index of pool ``name`` in :attr:`SystemModel.pools` (``None``: not a pool)."""
    for k, spec in enumerate(model.pools):
        if spec.name == name:
            return k
    return None


def bottleneck_name(model: SystemModel, point: Point) -> str:
    """The tier of highest utilization per core at ``point``, or the pool whose bound
    utilization ``X sum_H D_h / K`` there is higher (module docstring)."""
    m = int(np.argmax(point.utilization))
    best, name = float(point.utilization[m]), model.tiers[m]
    for spec in model.pools:
        bound = float(point.throughput) * float(model.D[spec.first:spec.last].sum()) \
            / float(spec.size)
        if bound > best:
            best, name = bound, spec.name
    return name


def _per_core(model: SystemModel) -> np.ndarray:
    """``D_m / c_m`` per tier (0 for an infinite server)."""
    c = np.asarray(model.servers, dtype=float)
    return np.where(np.isinf(c), 0.0, model.D / np.where(np.isinf(c), 1.0, c))


def binds(model: SystemModel, k: int) -> bool:
    """Pool ``k`` binds before the tiers it holds (module docstring)."""
    spec = model.pools[k]
    held = _per_core(model)[spec.first:spec.last]
    return float(model.D[spec.first:spec.last].sum()) / float(spec.size) > float(held.max())


def _busiest_held(model: SystemModel, k: int) -> int:
    spec = model.pools[k]
    return spec.first + int(np.argmax(_per_core(model)[spec.first:spec.last]))


def breach_shares(model: SystemModel, point: Point) -> tuple[list[str], np.ndarray]:
    """Names (tiers, then pools) and each one's part of every class's response time at
    ``point`` (rows: names, columns: classes; module docstring): a pool that does not bind
    has a part of 0, its wait counted to its busiest held tier."""
    Rm = np.array(point.residence, dtype=float)
    waits = np.zeros(len(model.pools))
    if model.pools and point.pool_waiting is not None:
        waits = np.asarray(point.pool_waiting, dtype=float)
        for k, spec in enumerate(model.pools):
            Rm[spec.first] -= waits[k]
    parts = model.class_residence(Rm)
    if not model.pools:
        return list(model.tiers), parts
    own = np.zeros((len(model.pools), len(model.classes)))
    for k in range(len(model.pools)):
        if binds(model, k):
            own[k] = waits[k]
        else:
            parts[_busiest_held(model, k)] += waits[k]
    return list(model.tiers) + [p.name for p in model.pools], np.vstack([parts, own])


def breach_name(model: SystemModel, point: Point, c: int) -> str:
    """The tier or pool holding the largest part of class ``c``'s response time at ``point``
    (a tier at equal parts)."""
    names, parts = breach_shares(model, point)
    return names[int(np.argmax(parts[:, c]))]
