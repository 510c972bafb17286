"""Response-time quantiles on the open route with pools: each outermost pool's passage -- the
wait for a token and the held tiers, a tagged request's absorption time in its held chain from
the state it finds (:func:`solvers.pools_passage.passage_law`) -- convolved with the open tiers
outside it (M/M/c or processor sharing, as without pools: :mod:`solvers.response_time.open_law`'s
rule). Where a pool has no held chain (a bursty or general-service held tier, a pool inside it,
past the chain's budget) or a tier is bursty: the exponential law scaled to the pool model's
mean (flagged; :meth:`streams.predict.model.SystemModel.quantiles` reads it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from solvers.held_network import BurstyHeldStation
from solvers.pools_open import HeldCurve, held_network, outermost
from solvers.pools_passage import PassageLaw, passage_law
from solvers.response_time.open_law import tier_laws
from solvers.response_time.sojourn import GRID, end_to_end_many, quantiles

__all__ = ["POOL_QUANTILE_FLAG", "passage_applies", "pool_quantiles"]

#: how the flag of the open route's quantiles with pools reads
POOL_QUANTILE_FLAG = ("pools: quantiles on the open route are the exponential law scaled to the "
                      "pool model's mean (the token wait's own tail is not modelled)")


def passage_applies(model: Any, curves: list[HeldCurve | None] | None = None) -> bool:
    """Whether :func:`pool_quantiles` reads the pools' passage laws: no bursty tier, and every
    outermost pool with a held chain of no bursty station."""
    if model.processes is not None and any(p is not None and p.order > 1
                                           for p in model.processes):
        return False
    curves = _model_curves(model) if curves is None else curves
    top = set(outermost(model.pools))
    return all(c is not None and c.chain is not None and c.chain.stations and
               c.chain.fifo is not None and not any(isinstance(st, BurstyHeldStation)
                                                    for st in c.chain.stations)
               for k, c in enumerate(curves) if k in top)


def _model_curves(model: Any) -> list[HeldCurve | None]:
    """The held curves of ``model``'s outermost pools (``None`` for the others, or where one
    cannot be solved), as :func:`streams.predict.open_model.pool_curves` builds them without
    its flags; kept on the model (a variant is a new model)."""
    held = vars(model).setdefault("_open_pool_passage", {})
    if "curves" not in held:
        top = set(outermost(model.pools))
        procs = model.pool_processes or model.processes
        curves: list[HeldCurve | None] = []
        for k in range(len(model.pools)):
            try:
                curves.append(held_network(model.D_mc, model.servers, model.pools, k,
                                           model.mix, model.scv, model.delays, model.ps,
                                           procs, model.service_scv) if k in top else None)
            except (RuntimeError, ValueError, np.linalg.LinAlgError):
                curves.append(None)
        held["curves"] = curves
    return held["curves"]


def pool_quantiles(model: Any, point: Any) -> np.ndarray | None:
    """``(C, L)`` quantiles (:attr:`~streams.predict.model.SystemModel.quantile_levels`) of
    each class's response time at the open point ``point`` with pools (module docstring):
    each outermost pool's passage law (:func:`solvers.pools_passage.passage_law`) and the
    open tiers outside the pools, convolved as independent (Burke 1956: a pool's departures
    and the open tiers' taken as Poisson; Jackson 1963), the tiers' pure delays outside the
    pools a shift. ``None`` where the passage does not apply (:func:`passage_applies`, or no
    law at this rate: unstable, past the passage chain's budget): the caller's scaled law."""
    if not model.pools:
        return None
    rate = float(point.throughput)
    held = vars(model).setdefault("_open_pool_passage", {})
    if rate not in held:
        held[rate] = _passage_quantiles(model, rate) if passage_applies(model) else None
    if held[rate] is not None:
        return held[rate]
    if POOL_QUANTILE_FLAG not in model.flags:
        model.flags.append(POOL_QUANTILE_FLAG)
    if model.ps_law is None or not model.ps_law.any():
        return None
    # a processor-sharing tier's own law, scaled to the pool model's mean as the flag says
    # (that law alone has no token wait in it)
    law = _with_outer_tiers(model, rate, [], np.zeros(len(model.tiers), dtype=bool), True)
    q, mean = law
    ratio = np.divide(point.response, mean, out=np.ones_like(mean),
                      where=(mean > 0) & np.isfinite(mean))
    return q * ratio[:, None]


def _passage_quantiles(model: Any, rate: float) -> np.ndarray | None:
    """:func:`pool_quantiles` by the pools' passage laws; ``None`` where one has none."""
    laws: list[PassageLaw] = []
    inside = np.zeros(len(model.tiers), dtype=bool)
    for k, curve in enumerate(_model_curves(model)):
        if curve is None:
            continue
        law = passage_law(curve, rate)
        if law is None:
            return None
        laws.append(law)
        inside[model.pools[k].first:model.pools[k].last] = True
    return _with_outer_tiers(model, rate, laws, inside)


def _with_outer_tiers(model: Any, rate: float, laws: list[PassageLaw],
                      inside: np.ndarray, means: bool = False) -> Any:
    """The pools' ``laws`` convolved with the open tiers not ``inside`` a pool, each FCFS
    tier's wait Erlang C's law and a processor-sharing one's sojourn its own, as
    :func:`solvers.response_time.open_law.tier_laws` gives them; quantiles at the
    model's levels, ``inf`` for a class at a saturated tier (``means``: with each class's
    mean beside them)."""
    Dmc, p = model.D_mc, model.mix / model.mix.sum()
    c = model.servers.astype(float)
    ps = np.zeros(len(model.tiers), dtype=bool) if model.ps_law is None else model.ps_law
    waits, services, extra, saturated = tier_laws(rate, Dmc, p, c, ps, skip=inside)
    extra = list(laws) + extra
    [dists] = end_to_end_many([waits], services, model._wait_share, grid=GRID, extra=[extra])
    q = quantiles(dists, model.quantile_levels)
    if model.delays is not None:
        q = q + (model.delays * ~inside[:, None]).sum(axis=0)[:, None]
    q[saturated] = math.inf
    if means:
        mean = np.array([d.mean for d in dists]) + (0.0 if model.delays is None else
                                                    model.delays.sum(axis=0))
        return q, np.where(saturated, math.inf, mean)
    return q
