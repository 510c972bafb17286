"""Each class's service SCV at each tier for the open pool chain: configured
(``service_scv = { db = { search = 2.5 } }``), else estimated from the windows' low-load
dispersion (:mod:`estimators.service_scv`: where its standard error is under half of it),
else 1.

An estimate enters only at or above :data:`SCV_MIN`: a class's time at a processor-sharing tier
also varies with the dear class's co-residence, which the estimator cannot take out, so on
simulated windows of the testbed's shape the classes of exponential service read up to 1.9
(``python -m bench.accuracy.pool_open_ps --estimator``: 15 minutes at 9/s, seeds 101-105 and
111-113); below it the class keeps SCV 1, today's exponential chain. The standard error keeps a
few rare times out: one window holding a worker's first request, which opens its database
connection, reads the testbed app's home at SCV 11 with a standard error of 10.8 (not
identified). Where a configured value and an identified estimate differ by more than
:data:`DISAGREE` times, the configured one is used and flagged. Only the tiers a pool holds are
asked (the chain's), only on systems with a pool; every other route is unchanged.
"""

from __future__ import annotations

import numpy as np

from streams.core.config import SystemConfig
from streams.core.tier import TierModel
from solvers.pools import PoolSpec

__all__ = ["DISAGREE", "SCV_MIN", "class_scvs"]

#: an estimated SCV below this is read as exponential (module docstring)
SCV_MIN = 2.0
#: a configured SCV and an identified estimate further apart than this factor are flagged
DISAGREE = 2.0


def class_scvs(tiers: list[TierModel], classes: list[str], cfg: SystemConfig,
               pools: tuple[PoolSpec, ...], V_mc: np.ndarray, delays: np.ndarray | None,
               prefix: str = "pools: ") -> tuple[np.ndarray | None, list[str]]:
    """``(v_{m,c}, flags)``: the ``(M, C)`` service SCVs at the held tiers (1 elsewhere;
    ``None`` where every one is 1) and the flags of the ones configured against the data or
    not identified (each beginning ``prefix``, the model's pool flag)."""
    if not pools:
        return None, []
    M, C = len(tiers), len(classes)
    v = np.ones((M, C))
    flags: list[str] = []
    held = np.zeros(M, dtype=bool)
    for p in pools:
        held[p.first:p.last] = True
    for m, t in enumerate(tiers):
        if not held[m]:
            continue
        given = cfg.service_scv.get(t.tier, {})
        unknown: list[str] = []
        for c, name in enumerate(classes):
            visit = V_mc[m, c] if V_mc[m, c] > 0 else 1.0
            delta = 0.0 if delays is None else float(delays[m, c]) / visit
            est = None if t.scv_sums is None else t.scv_sums.scv(name, delta)
            if name in given:
                v[m, c] = given[name]
                if est is not None and not given[name] / DISAGREE <= est <= given[name] * DISAGREE:
                    flags.append(f"{prefix}service SCV of {name!r} at {t.tier}: configured "
                                 f"{given[name]:.3g}, the windows' low-load dispersion reads "
                                 f"{est:.3g}; the configured value used")
            elif est is None:
                unknown.append(name)
            elif est >= SCV_MIN:
                v[m, c] = est
        if unknown:
            flags.append(f"{prefix}service SCV at {t.tier} not identified for "
                         f"{', '.join(map(repr, unknown))} (too few low-load windows, or "
                         f"a standard error over half the reading): 1 assumed")
    return (None if np.all(v == 1.0) else v), flags
