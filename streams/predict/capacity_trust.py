"""Trust on the capacity: the model's match at the operating point does not show that its
capacity is known within the margin.

The trust rules of :mod:`streams.predict.confidence` judge the model where it was measured: its
mean response time, utilizations and split at the current population. The capacity is an
extrapolation from there, and on a bursty tier it rests on two estimates the operating point
barely tests: the tier's mean service over the history and its index of dispersion ``I``, whose
95% interval (:func:`estimators.dispersion.index_of_dispersion_interval`) reaches far above a
point estimate that reads low while the IDC curve still rises (Mi et al. 2008, Fig. 2). A
model can match the operating point within the margin and still place the knee 22-33% too far
out (bench/accuracy/shapes.py: every trusted solve off by more than 20% on capacity read the
bursty tier's ``I`` at 16-65% of the truth, its mean service 6-17% low).

The uncertainty band (:func:`streams.predict.confidence.band`) re-solves the capacity at both
ends of the estimators' uncertainty: every demand ``z`` standard errors out and a bursty tier's
MAP(2) at the ends of ``I``'s interval. Where either end lies more than
:data:`~streams.predict.confidence.TRUST_MARGIN` from the capacity, the data do not place the
capacity within the margin the alerts assume, so the prediction is not trusted (reason
``capacity_uncertain``) -- the same equivalence reading as the evidence rules (Schuirmann
1987): a capacity is trusted when its interval lies within the margin, not when nothing has
contradicted it. The band is computed only on some solves (:func:`confidence.band_due`), and
one band is itself an estimate: it reads ``I``'s interval and the demands' covariance at one
moment, and a narrow band between two wide ones is as likely the interval's 5% miss as the
capacity settling. So the reach judged is the widest, side by side, of the bands over the last
:data:`~streams.predict.confidence.ERROR_WINDOW` solves -- the window over which the evidence
rules pool the response-time errors -- or, with none there, the last band's (:func:`reach`).
An open workload's capacity is a rate, its band the rate's (the same reading: the match at
the operating rate does not test the rate at which the SLA breaks).
"""

from __future__ import annotations

from typing import Any

from streams.predict.confidence import ERROR_WINDOW, TRUST_MARGIN

__all__ = ["REASON", "band_reach", "remember", "reach", "trust_reasons"]

#: the reason's prefix (docs/pipeline.md, ``trust_reasons``)
REASON = "capacity_uncertain"


def band_reach(pred: Any) -> list[float] | None:
    """``[lower, upper]``: how far the band of ``pred`` reaches below and above its capacity,
    relative to it (``1 - lower / capacity``, ``upper / capacity - 1``): in users, or on an
    open workload in req/s (``capacity_rate_per_s`` and its band,
    :func:`streams.predict.open_whatif.rate_band`); ``None`` when the prediction carries no
    band or no positive capacity."""
    key = "capacity_users" if pred.get("capacity_users") is not None else "capacity_rate_per_s"
    cap = pred.get(key)
    low, high = pred.get(f"{key}_lower"), pred.get(f"{key}_upper")
    if cap is None or not cap > 0 or low is None or high is None:
        return None
    return [max(1.0 - low / cap, 0.0), max(high / cap - 1.0, 0.0)]


def remember(bands: list[list[float]], solve: int, pred: Any) -> list[list[float]]:
    """``bands`` (rows ``[solve, below, above]``) with ``pred``'s band added when it carries
    one, pruned to the rows :func:`reach` reads at ``solve``: those of the last
    :data:`ERROR_WINDOW` solves, or the newest row."""
    new = band_reach(pred)
    rows = [list(b) for b in bands] + ([[float(solve), *new]] if new is not None else [])
    recent = [b for b in rows if b[0] > solve - ERROR_WINDOW]
    return recent or rows[-1:]


def reach(bands: list[list[float]], solve: int) -> list[float] | None:
    """The widest reach below and above (each side's maximum) of the bands of the last
    :data:`ERROR_WINDOW` solves up to ``solve``; with none there the newest band's; ``None``
    without a band (module docstring)."""
    recent = [b for b in bands if solve - ERROR_WINDOW < b[0] <= solve] or bands[-1:]
    if not recent:
        return None
    return [max(b[1] for b in recent), max(b[2] for b in recent)]


def trust_reasons(reach: list[float] | None, margin: float = TRUST_MARGIN) -> list[str]:
    """One reason when the bands' ``reach`` (:func:`reach`) exceeds ``margin`` on either
    side (module docstring); none without a band yet (the evidence rules hold a new
    model untrusted for its first solves anyway)."""
    if reach is None:
        return []
    low, high = reach
    if max(low, high) <= margin:
        return []
    return [f"{REASON}: the capacity's band over the last solves reaches {100 * low:.0f}% "
            f"below and {100 * high:.0f}% above it (margin {100 * margin:.0f}%): the demands' "
            "and I's uncertainty do not place the capacity within the margin"]
