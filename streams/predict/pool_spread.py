"""Each class's own spread of its time at the tiers a pool holds: the pool model's ``class_scv``.

The wait for a pool's token grows with the holding time's variability
(:mod:`solvers.pools_general`, Lee and Longton 1959). Without it the model knows the classes'
spread of cost and takes each class's time at a tier as exponential about its own mean. A class
whose cost depends on its data (a search over the rows its category reaches) can vary far more;
the windows show it in the spread of the class's mean response time at the tier from one window
to the next (:mod:`estimators.response_spread`: successive differences, von Neumann 1941).

**Rule.** At a tier some pool holds, a class takes its measured SCV where the evidence says its
time varies more than exponential: read from at least :data:`MIN_PAIRS` window pairs, with the
one-sided 95% lower bound (:func:`estimators.response_spread.scv_lower`) above 1. Elsewhere --
too few windows, a spread within reach of exponential, or one below it -- the class keeps the
tier's (NaN): a holding time read as less variable than exponential is not used to shorten the
wait, as the pool model leaves a factor below 1 uncorrected (conservative). A tier visited
``V`` times per request reports the time per visit; ``V`` independent visits have ``1/V`` of
one visit's SCV. Where no class qualifies the model is the one without (``None``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from estimators.response_spread import scv_lower
from solvers.pools import PoolSpec
from streams.core.tier import TierModel

__all__ = ["pool_class_scv", "MIN_PAIRS"]

#: window pairs a class's spread must be read from before it is used
MIN_PAIRS = 20.0


def pool_class_scv(tiers: Sequence[TierModel], classes: Sequence[str],
                   pools: Sequence[PoolSpec], visits: np.ndarray | None = None
                   ) -> tuple[np.ndarray | None, list[str]]:
    """``(class_scv, flags)``: per tier and class the SCV of the class's time at the tier where
    the rule (module docstring) takes it (NaN elsewhere, and at tiers no pool holds), ``None``
    where it takes none; a flag per value taken."""
    M, C = len(tiers), len(classes)
    out = np.full((M, C), np.nan)
    held = {m for p in pools for m in range(p.first, p.last)}
    flags = []
    for m in sorted(held):
        for c, name in enumerate(classes):
            got = tiers[m].class_spread.get(name)
            if got is None:
                continue
            scv, pairs = got
            if pairs >= MIN_PAIRS and scv_lower(scv, pairs) > 1.0:
                V = 1.0 if visits is None else max(float(visits[m, c]), 1.0)
                out[m, c] = scv / V
                flags.append(f"pools: {name}'s time at {tiers[m].tier} varies beyond "
                             f"exponential (SCV {scv:.3g} from {pairs:.0f} window pairs): "
                             f"its spread enters the pool's holding time")
    return (None if np.all(np.isnan(out)) else out), flags
