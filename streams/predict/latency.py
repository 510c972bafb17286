"""The pure delays the model takes at each tier (``latency = "estimate"``): from the tiers'
joint fits (:func:`estimators.latency.fit_latency`) where they are identified, else as the
time at the tier that the model's demand does not explain.

Per tier ``m`` and class ``c`` with a fit:

* **identified** (the windows span enough load to separate the two): the fit's demand and
  delay, ``D_{m,c} = V_{m,c} d_c`` and ``delta_{m,c} = V_{m,c} delta_c`` (per request: visits
  times per completion);
* **not identified**: the demand the model had (:func:`streams.predict.model.tier_demands`)
  and the residual ``delta_{m,c} = V_{m,c} max(Rbar_c - d_{m,c} fbar_c, 0)`` -- the class's
  mean time at the tier less its demand stretched by the tier's mean load, over the same
  windows (``mean_response`` and ``mean_stretch`` of :class:`estimators.latency.LatencyFit`). It makes the model's
  response time at the operating point the measured one by construction; how it moves with
  load rests on the demand's split, which the windows could not check. Flagged.

The fit's stretch is processor sharing's; on an FCFS tier (one shared wait) whose classes'
demands differ it moves demand between classes and into the delays (the physical simulator,
demands 0.5:1:2.5 on one core: up to +40% on the lightest class), flagged there.

A tier whose measured time is below what its demand alone explains gets no delay (a residual
is never negative): its monitored time does not cover all of its CPU (work outside the
timed span), flagged with the shortfall.
"""

from __future__ import annotations

import numpy as np

from streams.core.config import SystemConfig
from streams.core.tier import TierModel

__all__ = ["LATENCY_FLAG", "model_delays"]

#: how the latency's flags begin
LATENCY_FLAG = "latency: "
#: a tier's measured time below this share of its demand's stretch is flagged
SHORTFALL = 0.8


def model_delays(tiers: list[TierModel], classes: list[str], D_mc: np.ndarray,
                 V_mc: np.ndarray, cfg: SystemConfig
                 ) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """``(D_mc, delays, flags)``: the demands (identified classes' replaced by the fit's) and
    the ``(M, C)`` delays per request (``None``: ``latency = "off"`` or no tier has a fit)."""
    if cfg.latency == "off" or not any(t.latency is not None for t in tiers):
        return D_mc, None, []
    D_mc = D_mc.copy()
    delays = np.zeros_like(D_mc)
    flags: list[str] = []
    for m, t in enumerate(tiers):
        fit = t.latency
        if fit is None:
            flags.append(f"{LATENCY_FLAG}{t.tier}: no delay (too few completions with a "
                         f"response time at the tier)")
            continue
        at = {c: i for i, c in enumerate(fit.classes)}
        residual: list[str] = []
        short: list[str] = []
        for j, c in enumerate(classes):
            i = at.get(c)
            if i is None:
                continue
            v = V_mc[m, j]
            if fit.identified[i]:
                D_mc[m, j] = v * fit.demand[i]
                delays[m, j] = v * fit.delay[i]
                continue
            d = D_mc[m, j] / v if v > 0 else 0.0
            delays[m, j] = v * max(float(fit.mean_response[i] - d * fit.mean_stretch[i]), 0.0)
            residual.append(c)
            explained = d * fit.mean_stretch[i]
            if explained > 0 and fit.mean_response[i] < SHORTFALL * explained:
                short.append(f"{c} {1000 * fit.mean_response[i]:.3g} ms against "
                             f"{1000 * explained:.3g} ms")
        if t.split_decided and t.split_discipline == "fcfs" and not residual:
            flags.append(f"{LATENCY_FLAG}{t.tier}: delays fitted under processor sharing on a "
                         f"tier whose response times read FCFS: with unequal class demands "
                         f"the split between demand and delay is biased")
        if residual:
            flags.append(f"{LATENCY_FLAG}{t.tier}: delay of {', '.join(residual)} taken as "
                         f"the time at the tier its demand does not explain ({fit.reason})")
        if short:
            flags.append(f"{LATENCY_FLAG}{t.tier}: measured time below the demand's stretch "
                         f"({'; '.join(short)}): the tier's timed span leaves out some of its "
                         f"CPU work; no delay there")
    return D_mc, delays, flags
