"""What-if and remediation for an open system: capacity in requests per second.

An open service is driven by its request rate, not by a population, so a what-if is asked at
a rate: the model of :mod:`streams.predict.open_model` (open tiers at the measured class mix)
with the tier actions of :mod:`streams.predict.whatif` applied unchanged -- ``cpu_speed``
(demand ``/ s``, Zong 2011), ``cores`` and ``replicate`` (``k c_m`` cores, one queue: the
balancer argument of Harbaoui et al. (2010) holds for an open tier as for a closed one).
Admitting at most ``n`` users has no meaning without users; its open counterpart is
**rate limiting**: requests beyond ``r`` per second are rejected or delayed at the edge (a
token bucket), so the tiers see at most ``r`` -- the largest ``r`` within every SLA is the
capacity itself (the rate-limit remedy), priced with ``admission``'s unit per request/s turned
away (``remediation_costs`` has no unit of its own for it).

:func:`remediate_open` finds, per tier, the smallest number of cores and the smallest CPU
speed factor (grid :data:`~streams.predict.whatif.SPEED_STEP`) that keeps every class within
its SLA at the required rate (one open solve per probe: response times fall as a tier gets
faster or gets cores), the smallest size of each pool whose token is waited for
(:func:`pool_ceiling`, pools first as on a closed system; with ``breach_tier_after``, where the
breach moves: :mod:`streams.predict.pool_naming`), the replicas from the cores (``k``
replicas are ``k c_m`` cores), and the capacity each remedy gives
(:func:`~streams.predict.open_model.rate_capacity`). A required rate at or beyond the
saturation of a remedied model is simply not met (the open solve flags it ``unstable`` with
``inf`` response times), never NaN and never a loop.
:func:`at_rate` is ``perfcast whatif --rate``: per-class response times, utilizations and
stability at a given total rate, before and after the actions.

:func:`rate_band` is the uncertainty band of an open prediction: the capacity in requests/s
of the pessimistic and the optimistic model of :mod:`streams.predict.confidence` (every tier's
demand ``z`` standard errors up or down, a bursty tier's MAP(2) at the end of ``I``'s
interval) and the rate trend's time to reach each -- the closed band's rule asked in
requests per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from streams.core.tier import TierModel
from streams.predict import open_model
from streams.predict.confidence import BAND_Z, band_variant
from streams.predict.model import SystemModel
from streams.predict.whatif import (DEFAULT_COSTS, MAX_REPLICAS, MAX_SPEED, SOLVE_BUDGET,
                                    SPEED_STEP, Action, action_cost, apply, apply_all, describe,
                                    smallest_feasible, speed_factor)

__all__ = ["RATE_LIMIT", "RateComparison", "at_rate", "check_rate", "meets_rate",
           "pool_ceiling", "rate_band", "remediate_open", "rate_time_to_breach"]

#: the kind of the open counterpart of admission
RATE_LIMIT = "rate_limit"


def check_rate(rate: Any, name: str = "rate") -> float:
    """``rate`` as a finite number of requests/s ``>= 0``; a ``ValueError`` names it."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(rate)) or rate < 0:
        raise ValueError(f"{name}: must be a finite request rate >= 0 (per s), got {rate!r}")
    return float(rate)


def meets_rate(model: SystemModel, rate: float,
               solves: open_model.RateSolves | None = None) -> bool:
    """Every class of the mix with an SLA within it at total rate ``rate`` (one open solve,
    held in ``solves`` when given; a saturated tier gives ``inf``: not met)."""
    judged = (model.mix > 0) & np.isfinite(model.sla)
    if not judged.any():
        return True
    res = open_model.solve_at(model, rate) if solves is None else solves(rate)
    return res.stable and bool(np.all(res.response_time[judged] <= model.sla[judged]))


def _summary(action: Action | None, model: SystemModel, cap: float | None, before: float | None,
             required: float) -> str:
    def fmt(v: float | None) -> str:
        return "no SLA" if v is None else f"{v:.4g} req/s"
    if action is None:
        turned = max(required - (cap or 0.0), 0.0)
        return (f"limit the request rate to {fmt(cap)}: {turned:.4g} of the {required:.4g} "
                f"req/s expected within the horizon would be rejected or delayed")
    return f"{describe(action, model)}: capacity {fmt(before)} → {fmt(cap)}"


def pool_ceiling(model: SystemModel, k: int) -> int:
    """The largest size a pool remedy of pool ``k`` tries on an open system: twice its size
    plus twice its held tiers' cores -- past a token per core of every held tier the held
    tiers' throughput only creeps towards their bound (a pure delay aside), so a larger pool
    buys little and each size's held network costs ``K`` closed solves."""
    spec = model.pools[k]
    cores = model.servers[spec.first:spec.last]
    return int(2 * spec.size + 2 * float(np.sum(cores[np.isfinite(cores)])))


def remediate_open(model: SystemModel, required: float, capacity_before: float | None,
                   costs: Mapping[str, float] | None = None,
                   budget: int = SOLVE_BUDGET,
                   held: open_model.RateSolves | None = None) -> dict[str, Any]:
    """The smallest action per kind and tier that keeps every class within its SLA at the
    total rate ``required`` (module docstring), ranked by cost: the ``remediation`` record of
    an open prediction (``required_rate_per_s``, ``capacity_before_rate_per_s``, ``actions``
    each with ``capacity_rate_per_s``, ``unreachable``, ``solves``). Tiers are searched
    longest wait at ``required`` first; once ``budget`` solves are spent the searches left are
    listed in ``unreachable`` as not searched. ``held``: ``model``'s held solves
    (:class:`~streams.predict.open_model.RateSolves`), the one at ``required`` reused."""
    required = check_rate(required, "required")
    costs = dict(DEFAULT_COSTS, **(costs or {}))
    solves = 0
    actions: list[dict[str, Any]] = []
    unreachable: list[str] = []

    def add(after: SystemModel, action: Action,
            after_solves: open_model.RateSolves | None = None) -> None:
        cap = open_model.rate_capacity(after, after_solves,
                                       None if after_solves is None else required).capacity
        actions.append({"kind": action.kind, "tier": action.tier,
                        "value": float(action.value), "capacity_rate_per_s": cap,
                        "capacity_users": None, "capacity_limited": False,
                        "cost": round(action_cost(model, action, 1, costs), 9),
                        "summary": _summary(action, model, cap, capacity_before, required)})

    def search(tier: str, kind: str, low: int, high: int, value: Any) -> None:
        found: dict[int, open_model.RateSolves] = {}

        def feasible(i: int) -> bool:
            nonlocal solves
            solves += 1
            found[i] = open_model.RateSolves(apply(model, Action(kind, tier, value(i))))
            return meets_rate(found[i].model, required, found[i])

        i = smallest_feasible(feasible, low, high)
        if i is None:
            unreachable.extend([f"{kind} {tier}"] + ([f"replicate {tier}"]
                                                     if kind == "cores" else []))
            return
        add(found[i].model, Action(kind, tier, value(i)), found[i])
        if kind == "pool":
            actions[-1]["breach_tier_after"] = open_model.rate_capacity(
                found[i].model, found[i], required).breach_tier
        if kind == "cores":
            c = int(model.servers[model.tiers.index(tier)])
            k = max(2, -(-int(value(i)) // c))
            rep = Action("replicate", tier, k)
            if k * c == int(value(i)):
                add(found[i].model, rep, found[i])
            else:
                add(apply(model, rep), rep)

    now = open_model.RateSolves(model) if held is None else held
    pools = now.pools(required) if model.pools else []
    for k in np.argsort([-(p.waiting_time if p is not None else 0.0) for p in pools],
                        kind="stable").tolist():
        spec = model.pools[k]       # pools first, longest wait first: the cheap change
        if pools[k] is None or pools[k].waiting_time <= 0:
            continue                # nested in another pool, or never waited for
        if solves >= budget:
            unreachable.append(f"pool {spec.name} (not searched: solve budget {budget})")
        else:
            search(spec.name, "pool", spec.size + 1, pool_ceiling(model, k), int)
    wait = now(required).wait
    order = np.argsort(-np.where(np.isfinite(wait), wait, np.finfo(float).max), kind="stable")
    for m in order.tolist():
        tier, c = model.tiers[m], int(model.servers[m])
        for kind in ("cores", "cpu_speed"):
            if solves >= budget:
                unreachable.append(f"{kind} {tier} (not searched: solve budget {budget})")
            elif kind == "cores":
                search(tier, kind, c + 1, MAX_REPLICAS * c, float)
            else:
                search(tier, kind, 1, int(round((MAX_SPEED - 1.0) / SPEED_STEP)), speed_factor)
    if capacity_before is not None and capacity_before > 0:
        unit = float(costs.get("admission", DEFAULT_COSTS["admission"]))
        actions.append({"kind": RATE_LIMIT, "tier": None, "value": float(capacity_before),
                        "capacity_rate_per_s": float(capacity_before), "capacity_users": None,
                        "capacity_limited": False,
                        "cost": round(unit * max(required - capacity_before, 0.0), 9),
                        "summary": _summary(None, model, capacity_before, capacity_before,
                                            required)})
    rank = {"pool": 0, "replicate": 1, "cores": 2, "cpu_speed": 3, RATE_LIMIT: 4}
    actions.sort(key=lambda a: (a["cost"], rank[a["kind"]], a["tier"] or ""))
    return {"workload": "open", "required_rate_per_s": required,
            "capacity_before_rate_per_s": capacity_before, "required_users": None,
            "capacity_before": None, "actions": actions, "unreachable": unreachable,
            "solves": solves}


@dataclass(frozen=True)
class RateComparison:
    """One system at ``rate`` requests/s before and after ``actions``: capacity in req/s
    (``None``: no SLA), saturation rates, per-class response times (``inf`` where
    saturated), per-tier utilizations and whether each model is stable there; per pool of
    the model (its :attr:`~streams.predict.model.SystemModel.pools`) the tokens held over
    its size (``inf``: a pool inside another, solved in its held network)."""

    actions: tuple[Action, ...]
    rate: float
    capacity: tuple[float | None, float | None]
    saturation: tuple[float, float]
    response: tuple[np.ndarray, np.ndarray]
    utilization: tuple[np.ndarray, np.ndarray]
    stable: tuple[bool, bool]
    pool_utilization: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))

    def flags(self) -> list[str]:
        """``unstable`` lines for a model whose saturation ``rate`` reaches."""
        return [f"unstable {when}: {self.rate:.4g} req/s exceeds the saturation rate "
                f"{sat:.4g} req/s (capacity exceeded; response times inf)"
                for when, ok, sat in zip(("before", "after"), self.stable, self.saturation)
                if not ok]


def at_rate(model: SystemModel, rate: float,
            actions: Sequence[Action] = ()) -> RateComparison:
    """``model`` at total rate ``rate`` (the measured mix) before and after ``actions``:
    what ``perfcast whatif --rate`` prints."""
    rate = check_rate(rate)
    after = apply_all(model, actions)
    solves = [open_model.RateSolves(m) for m in (model, after)]
    caps = [open_model.rate_capacity(m, h) for m, h in zip((model, after), solves)]
    res = [h(rate) for h in solves]
    pools = [np.array([math.inf if p is None else p.utilization for p in h.pools(rate)])
             for h in solves]
    return RateComparison(tuple(actions), rate, (caps[0].capacity, caps[1].capacity),
                          (caps[0].saturation, caps[1].saturation),
                          (res[0].response_time, res[1].response_time),
                          (res[0].utilization, res[1].utilization),
                          (res[0].stable, res[1].stable), (pools[0], pools[1]))


def rate_time_to_breach(capacity: float | None, rate: float, slope: float) -> float | None:
    """Seconds until the rate trend (``slope`` req/s per s) reaches ``capacity``: 0 beyond
    it now, ``None`` without a capacity or a rising rate."""
    if capacity is None:
        return None
    if rate > capacity:
        return 0.0
    return (capacity - rate) / slope if slope > 0 else None


def rate_band(model: SystemModel, tiers: list[TierModel], capacity: float, rate: float,
              slope: float, z: float = BAND_Z,
              gain: np.ndarray | None = None) -> dict[str, Any]:
    """``capacity_rate_per_s_lower`` / ``_upper``, ``time_to_breach_lower_s`` / ``_upper_s``
    and ``band_flags`` (module docstring); the lower capacity at most, the upper at least
    ``capacity``. ``gain``: the fed correction of ``capacity``'s search
    (:attr:`streams.predict.open_model.RateSolves.gain`), applied to both ends' searches."""
    notes: list[str] = []
    ends = []
    for side in (+1, -1):
        cap = open_model.rate_capacity(band_variant(model, tiers, side, notes, z),
                                       gain=gain).capacity
        ends.append(capacity if cap is None else (min(cap, capacity) if side > 0
                                                  else max(cap, capacity)))
    low, high = ends
    return {"capacity_rate_per_s_lower": low, "capacity_rate_per_s_upper": high,
            "time_to_breach_lower_s": rate_time_to_breach(low, rate, slope),
            "time_to_breach_upper_s": rate_time_to_breach(high, rate, slope),
            "band_flags": sorted(set(notes))}
