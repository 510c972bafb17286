"""One bottleneck story: the busiest tier, the tier that causes the breach, and the model switch.

A prediction names two tiers that answer different questions: ``bottleneck_tier``, the tier
with the highest utilization per core at the forecast population (the MVA bottleneck,
``argmax_m D_m / c_m``), and ``breach_tier``, the tier holding the largest share of the
breaking class's response time at the first population beyond capacity. Under MVA they agree
but for ties; on the MAP network they can differ: a bursty tier with the lower mean
utilization queues the most while its slow runs last (Mi et al. (2008) section 3.4: the bottleneck
*switches* between tiers, ``B_m`` the probability that tier ``m`` is the bottleneck). The
demo's shop is such a case: ``front`` is busier on average, the bursty ``db`` breaks the SLA.
:func:`bottleneck_story` says so in ``bottleneck_reason`` whenever the two differ (``None``
when they agree), with the breach tier's share of the class's response time and its
bottleneck probability. With thread or connection pools either name may be a pool's
(:mod:`streams.predict.pool_naming`): the bottleneck when its tokens bound the throughput
before any tier's cores do, the breach when the wait for its tokens is the largest part of
the breaking class's response time.

The model itself changes between solves: MVA while no tier is known to be bursty, the MAP
queueing network (exact chain or decomposition) once one is. Capacity moves with it (the
demo's shop: ~180 users under MVA, ~130 on the MAP network, from one solve to the next).
:func:`model_switch` marks the solve at which the model family changes (``model_switch``
``"mva -> map"`` and a ``model_switch_reason``), so charts and records say why capacity
jumped.

The remediation (:mod:`streams.predict.whatif`) ranks actions by cost, whatever tier they act
on. :func:`remedy_story` picks the remedy the alert quotes -- the cheapest tier action (at equal
cost the one on the breach tier), the admission limit when no single tier action suffices --
and names its tier (``remediation_tier``); when that is not the breach tier it says why in
``remediation_reason`` (``None`` when they agree): a cheaper action elsewhere (with the breach
tier's own cheapest and its cost), or no action on one tier restoring every SLA at the
required users within the search limits (the breach needs more than one tier: ``perfcast
whatif`` applies several).
"""

from __future__ import annotations

from typing import Any, Mapping

from streams.predict.model import Point, SystemModel
from streams.predict.pool_naming import breach_shares, pool_index

__all__ = ["bottleneck_story", "model_family", "model_switch", "remedy_story"]


def bottleneck_story(model: SystemModel, busiest: str, breach: Point | None,
                     breach_class: str | None, breach_tier: str | None,
                     forecast: Point, tiers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``bottleneck_reason`` (``None`` when ``busiest`` is also the breach tier, or no breach
    is ahead), ``breach_tier_share`` (the breach tier's share of the breaking class's response
    time at the breach point) and ``breach_tier_bottleneck_probability`` (its ``B_m`` there;
    ``None`` under MVA)."""
    if breach is None or breach_tier is None or breach_class is None:
        return {"bottleneck_reason": None, "breach_tier_share": None,
                "breach_tier_bottleneck_probability": None}
    names, parts = breach_shares(model, breach)
    m = names.index(breach_tier)
    c = model.classes.index(breach_class)
    residence = parts[:, c]
    total = float(residence.sum())
    share = float(residence[m]) / total if total > 0 else None
    B = breach.bottleneck
    prob = float(B[m]) if B is not None and m < len(model.tiers) else None
    reason = None
    if busiest != breach_tier:
        u_busy, u_breach = _utilization(model, forecast, busiest), \
            _utilization(model, forecast, breach_tier)
        info = tiers.get(breach_tier, {})
        bursty = (f", bursty (I = {info['idc']:.3g})" if info.get("bursty") and
                  info.get("idc") is not None else "")
        held = " (its wait for a token)" if m >= len(model.tiers) else ""
        reason = (f"{busiest} is the busiest {_what(model, busiest)} (utilization "
                  f"{100 * u_busy:.0f}% vs {100 * u_breach:.0f}% at the forecast) but "
                  f"{breach_tier}{bursty} causes the breach: it holds{held} "
                  f"{100 * (share or 0):.0f}% of {breach_class}'s response time at "
                  f"{breach.n} users")
        if prob is not None:
            reason += (f"; bottleneck switch: {breach_tier} is the bottleneck "
                       f"{100 * prob:.0f}% of the time")
    return {"bottleneck_reason": reason, "breach_tier_share": share,
            "breach_tier_bottleneck_probability": prob}


def _what(model: SystemModel, name: str) -> str:
    return "pool" if pool_index(model, name) is not None else "tier"


def _utilization(model: SystemModel, point: Point, name: str) -> float:
    """A tier's utilization per core at ``point``, or a pool's tokens held over its size."""
    k = pool_index(model, name)
    if k is None:
        return float(point.utilization[model.tiers.index(name)])
    return float(point.pool_utilization[k]) if point.pool_utilization is not None else 0.0


def remedy_story(remediation: Mapping[str, Any] | None,
                 breach_tier: str | None) -> dict[str, Any]:
    """``remediation_summary`` and ``remediation_tier`` of the remedy the alert quotes, and
    ``remediation_reason`` when its tier is not ``breach_tier`` (module docstring); all
    ``None`` without a remediation."""
    actions = list((remediation or {}).get("actions") or [])
    if not actions:
        return {"remediation_summary": None, "remediation_tier": None,
                "remediation_reason": None}
    tiers = [a for a in actions if a["kind"] not in ("admission", "rate_limit")]
    best = (min(tiers, key=lambda a: (a["cost"], a["tier"] != breach_tier))
            if tiers else actions[0])
    reason = None
    if breach_tier is not None and best["tier"] != breach_tier:
        own = min((a for a in tiers if a["tier"] == breach_tier), key=lambda a: a["cost"],
                  default=None)
        rate = (remediation or {}).get("required_rate_per_s")
        at = f"{(remediation or {}).get('required_users')} users" if rate is None \
            else f"{rate:.4g} req/s"                # an open system's remediation
        limit = "admission limit" if rate is None else "rate limit"
        if best["tier"] is None:
            missing = (remediation or {}).get("unreachable") or []
            tiers_tried = list(dict.fromkeys(u.split()[1] for u in missing if len(u.split()) > 1))
            reason = (f"no single action on {' or '.join(tiers_tried) or breach_tier} (cores, "
                      f"replicas, CPU speed within the search limits) restores every SLA at "
                      f"{at}"
                      + ("" if not any("budget" in u for u in missing) else
                         " (some not searched: the solve budget ran out)")
                      + f": relieving {breach_tier} takes more than one action "
                      f"(perfcast whatif combines them), so the {limit} is the remedy "
                      f"listed")
        else:
            reason = (f"the cheapest remedy acts on {best['tier']} (cost {best['cost']:.3g}), "
                      f"not on {breach_tier} that causes the breach: ")
            reason += (f"{breach_tier}'s cheapest, {own['summary']}, costs {own['cost']:.3g}"
                       if own is not None else
                       f"no single action on {breach_tier} restores every SLA at {at} "
                       f"within the search limits")
    return {"remediation_summary": best["summary"], "remediation_tier": best["tier"],
            "remediation_reason": reason}


def model_family(kind: str | None) -> str | None:
    """``"mva"`` (exponential tiers, with or without pools) or ``"map"`` (the MAP network,
    exact chain or decomposition)."""
    if kind is None:
        return None
    return "mva" if kind in ("mva", "pools") else "map"


def model_switch(previous: Mapping[str, Any] | None, kind: str, capacity: int | None,
                 tiers: Mapping[str, Mapping[str, Any]], idc_threshold: float,
                 flags: list[str]) -> dict[str, Any]:
    """``model_switch`` (``"mva -> map"``, ``"map -> mva"``; ``None``: same family as the
    last solve with a model) and ``model_switch_reason``; ``previous``: the last solve's
    ``{"model", "capacity_users"}``."""
    before = model_family((previous or {}).get("model"))
    now = model_family(kind)
    if before is None or before == now:
        return {"model_switch": None, "model_switch_reason": None}
    bursty = [f"{t} (I in [{_num(v.get('idc_lower'))}, {_num(v.get('idc_upper'))}])"
              for t, v in tiers.items() if v.get("bursty")]
    if now == "map":
        why = (f"{', '.join(bursty)} bursty: I's confidence interval above idc_threshold "
               f"{idc_threshold:g}, so the MAP queueing network replaces MVA")
    elif bursty:
        fallback = [f for f in flags if "MVA" in f]
        why = "the MAP network does not apply: " + ("; ".join(fallback) or "MVA used")
    else:
        why = "no tier is bursty any more (I's interval not above idc_threshold " \
              f"{idc_threshold:g}): MVA"
    cap_before = (previous or {}).get("capacity_users")
    if cap_before is not None or capacity is not None:
        why += f"; capacity {_num(cap_before)} -> {_num(capacity)} users"
    return {"model_switch": f"{before} -> {now}", "model_switch_reason": why}


def _num(value: Any) -> str:
    if value is None:
        return "?"
    v = float(value)
    return f"{v:.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.3g}"
