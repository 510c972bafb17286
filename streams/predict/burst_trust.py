"""Trust while a tier's burstiness is undecided: the exponential model's match at the operating
point is not yet evidence.

A tier whose index of dispersion ``I`` reads above ``idc_threshold`` while its confidence
interval has not settled (``idc_flag`` in :data:`streams.core.tier.PROVISIONAL_FLAGS`: too few
windows, an interval that still straddles the threshold, or a curve still rising at the top
level) is modelled as not bursty -- the MVA route, or its general-service variant -- until the
interval clears the threshold. Its alert already reads it as bursty
(:func:`streams.core.tier.provisionally_bursty`). The prediction's trust must not rest on the
exponential reading either:

* the model was fitted to the windows seen so far, and with bursts that outlast them those
  windows can sit in one long slow (or fast) run: the measured mean over the error window is
  then far from the long-run one, and the model that matches it is off by as much. A match
  there shows nothing.
* the evidence rule that guards against it (:func:`streams.predict.confidence.evidence_reasons`:
  ``z sqrt(I / n)`` within the margin) reads ``I``'s point estimate, and that estimate is
  biased low exactly here: the IDC curve of a slow burst rises for thousands of windows before
  it bends (Mi et al. 2008, Fig. 2), so a short trace reads a fraction of the asymptote, and
  the interval's upper end (up to unbounded) says how much higher it may lie.

So such a tier makes the prediction untrusted (:func:`trust_reasons`, reason
``burstiness_undecided: <tier>: ...``) until its interval decides either way: above the
threshold the tier becomes bursty and its MAP(2) is calibrated to the measured response time
(the model's match then stands on the bursty model), below it the point estimate is bounded
and the evidence rule reads a trustworthy ``I``. Below the threshold the point estimate is
taken as it stands: an undecided interval around a small ``I`` is the rule, not the
exception, and a heavy-tailed tier with short correlation reads such ``I`` for good
(bench/accuracy/shapes.py: trusted solves within 20% of the truth on such tiers).

What the rule removes and costs on held-out shapes is measured in docs/accuracy.md ("Held-out
bursty shapes").
"""

from __future__ import annotations

from typing import Any

from streams.core.tier import provisionally_bursty

__all__ = ["REASON", "trust_reasons"]

#: the reason's prefix (docs/pipeline.md, ``trust_reasons``)
REASON = "burstiness_undecided"


def trust_reasons(pred: Any, idc_threshold: float) -> list[str]:
    """One reason per tier of ``pred`` (``tiers``: the prediction's tier parts) that is not
    modelled as bursty while its ``I`` reads above ``idc_threshold`` and its interval has not
    decided (module docstring)."""
    out = []
    for name, part in (pred.get("tiers") or {}).items():
        idc, flag = part.idc, part.idc_flag
        if not provisionally_bursty(idc, flag, bool(part.bursty), idc_threshold):
            continue
        lower, upper = part.idc_lower, part.idc_upper
        span = (f"interval {_num(lower or 0.0)}-{_num(upper)}" if flag != "too_short"
                else "no interval yet")
        out.append(f"{REASON}: {name}: I {idc:.3g} above idc_threshold {idc_threshold:g} but "
                   f"not confirmed ({flag}: {span}); modelled as not bursty, its match at the "
                   f"operating point rests on windows its bursts may outlast")
    return out


def _num(x: float | None) -> str:
    return "unbounded" if x is None or x != x or x == float("inf") else f"{x:.3g}"
