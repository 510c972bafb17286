"""A remediation candidate that cannot meet the SLAs, told without solving it.

The asymptotic bounds of a closed network (Lazowska et al. 1984, ch. 5): a tier of ``c_m``
cores and demand ``D_m`` (per request, over the class mix) completes at most ``c_m / D_m``
requests per second, so the throughput is at most ``X_max = min_m c_m / D_m`` and, by Little's
law over the users, the mix-weighted mean response time at ``N`` users is at least
``N / X_max - Z`` (and at least ``sum_m D_m``). A class's own service, ``sum_m D_{m,c}``, is
a floor under its response time at any population (no queue, no cores, no margin needed:
every model reads a class's response time back as its demand plus waits); more cores never
lower it, only a faster CPU does. If every class met its mean SLA the mix-weighted mean
would be at most ``sum_c p_c sla_c``. A candidate whose bound exceeds that by
:data:`BOUND_MARGIN` breaks some class's mean SLA whatever the solver says, and a quantile SLO
cannot rescue it (:meth:`~streams.predict.model.SystemModel.excess` takes the worse of the
two).

Why: a remediation search probes its most generous candidate first (eight times the cores,
four times the CPU speed), and on a bursty tier that candidate is also the costliest solve
(the per-job station grows with the cores: seconds at thousands of users). When another
tier saturates far below the required users no candidate of this tier can help, and the
bound says so in microseconds. The bound holds for every model of :class:`SystemModel` (MVA,
the MAP network, the decomposition, the open route: none completes more than ``c_m / D_m``
per second at a tier); the margin keeps the answer the solvers' own where an approximate
solver's mean could sit a little under the bound. Pools are left to the solve: a pool only
lowers the throughput, but its search also reads where the largest size moves the breach.
"""

from __future__ import annotations

import numpy as np

from streams.predict.model import SystemModel

__all__ = ["BOUND_MARGIN", "beyond_bound"]

#: the bound must exceed the SLAs' mix-weighted mean by this factor before a candidate is
#: refused unsolved (a candidate that close to its SLAs is solved as before)
BOUND_MARGIN = 2.0


def beyond_bound(model: SystemModel, users: int) -> bool:
    """``True`` when a class's own service time is over its mean SLA, or when the asymptotic
    bound puts ``model``'s mix-weighted mean response time at ``users`` above
    :data:`BOUND_MARGIN` times the mix-weighted mean SLA (module docstring): some class is
    then over its SLA. ``False`` when it cannot tell: a model with pools, no demand, or (for
    the bound) a class in the mix without a mean SLA."""
    if model.pools:
        return False
    mix = np.asarray(model.mix, dtype=float)
    active = mix > 0
    if not active.any():
        return False
    sla = np.asarray(model.sla, dtype=float)[active]
    if np.any(np.asarray(model.D_mc, dtype=float).sum(axis=0)[active] > sla):
        return True                   # a class's own service alone is over its SLA
    if not np.all(np.isfinite(sla)):
        return False
    D = np.asarray(model.D, dtype=float)
    busy = D > 0
    if not busy.any():
        return False
    x_max = float(np.min(np.asarray(model.servers, dtype=float)[busy] / D[busy]))
    if not x_max > 0:
        return False
    lowest = max(users / x_max - float(model.think_time), float(D.sum()))
    allowed = float(mix[active] @ sla) / float(mix[active].sum())
    return lowest > BOUND_MARGIN * allowed
