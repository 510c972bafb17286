"""Trust on the capacity: the model's match at the operating point does not show that its
capacity is known within the margin.

The trust rules of :mod:`streams.predict.confidence` judge the model where it was measured: its
mean response time, utilizations and split at the current population. The capacity is an
extrapolation from there, and on a bursty tier it rests on two estimates the operating point
barely tests: the tier's mean service over the history and its index of dispersion ``I``, whose
95% interval (:func:`estimators.dispersion.index_of_dispersion_interval`) reaches far above a
point estimate that reads low while the IDC curve still rises (Mi et al. 2008, Fig. 2). A
model can match the operating point within the margin and still place the knee 20-30% too far
out (bench/accuracy/shapes.py: every trusted solve off by more than 20% on capacity read the
bursty tier's ``I`` at 40-60% of the truth).

The uncertainty band (:func:`streams.predict.confidence.band`) re-solves the capacity at both
ends of the estimators' uncertainty: every demand ``z`` standard errors out and a bursty tier's
MAP(2) at the ends of ``I``'s interval. Where either end lies more than
:data:`~streams.predict.confidence.TRUST_MARGIN` from the capacity, the data do not place the
capacity within the margin the alerts assume, so the prediction is not trusted (reason
``capacity_uncertain``) -- the same equivalence reading as the evidence rules (Schuirmann
1987): a capacity is trusted when its interval lies within the margin, not when nothing has
contradicted it. The band is computed only on some solves (:func:`confidence.band_due`); its
reach is carried to the solves in between until the next band replaces it.
"""

from __future__ import annotations

from typing import Any

from streams.predict.confidence import TRUST_MARGIN

__all__ = ["REASON", "band_reach", "trust_reasons"]

#: the reason's prefix (docs/pipeline.md, ``trust_reasons``)
REASON = "capacity_uncertain"


def band_reach(pred: Any) -> list[float] | None:
    """``[lower, upper]``: how far the band of ``pred`` reaches below and above its capacity,
    relative to it (``1 - lower / capacity``, ``upper / capacity - 1``); ``None`` when the
    prediction carries no band or no positive capacity."""
    cap = pred.get("capacity_users")
    low, high = pred.get("capacity_users_lower"), pred.get("capacity_users_upper")
    if cap is None or not cap > 0 or low is None or high is None:
        return None
    return [max(1.0 - low / cap, 0.0), max(high / cap - 1.0, 0.0)]


def trust_reasons(reach: list[float] | None, margin: float = TRUST_MARGIN) -> list[str]:
    """One reason when the last band's ``reach`` (:func:`band_reach`) exceeds ``margin`` on
    either side (module docstring); none without a band yet (the evidence rules hold a new
    model untrusted for its first solves anyway)."""
    if reach is None:
        return []
    low, high = reach
    if max(low, high) <= margin:
        return []
    return [f"{REASON}: the capacity's band reaches {100 * low:.0f}% below and "
            f"{100 * high:.0f}% above it (margin {100 * margin:.0f}%): the demands' and I's "
            "uncertainty do not place the capacity within the margin"]
