"""What-if actions on a system's model, and the remediation of a predicted breach.

Pure computation on :class:`~streams.predict.model.SystemModel` -- the very model a prediction used, so
a bursty tier keeps its fitted MAP(2) (the MAP network rescales each process to the tier's
demand, :meth:`SystemModel.at`) and the solver choice (MVA, exact MAP chain, decomposition for
multi-core bursty tiers) is the prediction's. An :class:`Action` returns a new model:

* ``cpu_speed`` -- the tier on a CPU ``s`` times as fast: ``D_{m,c} -> D_{m,c} / s`` for every
  class (Zong 2011, CloudProphet: a tier's CPU demand scales with the platforms' CPU speed
  ratio, within 20% in their tests). A bursty tier's MAP(2) is rescaled to the new demand:
  every rate times ``s``, its SCV, autocorrelation and ``I`` kept.
* ``cores`` -- the tier with ``c`` cores (its queue shared by them, as the physical tier of
  :mod:`solvers.simulation.physical`).
* ``replicate`` -- ``k`` replicas of the tier behind a balancer (Harbaoui et al. (2010) section V-E, Fig. 11
  and Table V). **Modelled as one tier of ``k c_m`` cores**, demand unchanged
  (:meth:`solvers.capacity.ClosedModel.replicate` ``mode="servers"``), not as ``k`` stations of
  demand ``D/k`` (``mode="split"``). Two reasons: (1) the balancers in use (least connections,
  least outstanding requests) send a request to a replica with an idle core, which is the
  shared queue; a random or round-robin split leaves a replica idle while another queues
  (worse: the figure is then optimistic); (2) on a bursty tier the burstiness is in the
  request stream (Mi et al. (2008) section 4.1: heavy requests come in runs), so a run of heavy
  requests reaches every replica at once -- the replicas consume one service-time sequence,
  which is what a ``k c_m``-core tier of the MAP network / decomposition models, and what
  ``k`` series stations of demand ``D/k`` (each with its own phase) would not. A replica
  adds ``c_m`` cores; it differs from ``cores`` in granularity and cost.
* ``admission`` -- admit at most ``n`` users (the others wait outside or are turned away):
  the model is unchanged and the largest ``n`` within every SLA is the capacity itself.
* ``pool`` -- the thread or connection pool named ``tier`` (the pool's configured name, as
  :attr:`SystemModel.pools` carries it) with ``K`` tokens: the pool model
  (:mod:`solvers.pools`) at the new size. More tokens let more requests reach the tiers the
  pool holds, so a raised pool can move the breach to a tier behind it (a connection pool
  raised until the database's cores saturate: Neilson et al. (1995), the software server
  that stops being the bottleneck). Each pool remedy says where the breach goes
  (``breach_tier_after``, :func:`streams.predict.pool_naming.breach_name` at the first
  population past its capacity); a pool no size of which meets the SLAs says in
  ``unreachable`` where its largest size moves the breach. Sizes are searched from ``K + 1``
  to the required users (a pool of ``N`` tokens never binds at ``N`` users).

:func:`remediate` finds, for each kind and tier, the smallest action that keeps every class
within its SLOs at ``required`` users (the larger of the current and the horizon's predicted
users) -- the mean's ``sla_s`` and every quantile SLO (``slo``: e.g. the p95 of the model's
response-time law, :meth:`SystemModel.quantiles`), as :meth:`SystemModel.excess` and capacity
hold them -- and the capacity the model then has; actions are ranked by their configured cost
(:data:`DEFAULT_COSTS`, ``remediation_costs`` of a system's configuration).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from streams.core.config import REMEDIATION_COSTS
from streams.predict import slo_view
from streams.predict.model import CAPACITY_LIMIT, SystemModel, model_capacity
from streams.predict.pool_naming import breach_name, pool_index
from streams.predict.remedy_bounds import beyond_bound

__all__ = ["Action", "ACTION_KINDS", "DEFAULT_COSTS", "Remedy", "Remediation", "apply",
           "hints_of", "Comparison", "compare",
           "apply_all", "remediate", "action_cost", "describe", "parse_action",
           "check_users",
           "MAX_REPLICAS", "MAX_SPEED", "SPEED_STEP", "SOLVE_BUDGET"]

#: the kinds of action, in the order they are reported at equal cost
ACTION_KINDS = ("replicate", "cores", "cpu_speed", "admission", "pool")
#: default cost of each kind (``remediation_costs``): per added replica; per added core; per
#: tier moved, times the speed-up ``s - 1``; per user turned away at the required users; per
#: token added to a pool
DEFAULT_COSTS = REMEDIATION_COSTS
#: the largest remediation searched per kind: replicas (and cores up to that many times
#: today's), CPU speed factor
MAX_REPLICAS = 8
MAX_SPEED = 4.0
#: CPU speed factors are searched on this grid (reported rounded up to it)
SPEED_STEP = 0.05
#: model solves one remediation may spend: searches not started by then are listed in
#: ``unreachable`` as not searched (a large bursty system at risk costs a solve per probe)
SOLVE_BUDGET = 48


@dataclass(frozen=True)
class Action:
    """One what-if change: ``kind`` of :data:`ACTION_KINDS` on ``tier`` (``None`` for
    ``admission``; a pool's name for ``pool``) with ``value`` -- replicas ``k``, cores ``c``,
    speed factor ``s``, users ``n`` or tokens ``K``."""

    kind: str
    tier: str | None
    value: float

    def __post_init__(self) -> None:
        if self.kind not in ACTION_KINDS:
            raise ValueError(f"kind: must be one of {list(ACTION_KINDS)}, got {self.kind!r}")
        v = self.value
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{self.kind}: must be a finite number > 0, got {v!r}")
        if self.kind in ("replicate", "cores", "admission", "pool") and float(v) != int(v):
            raise ValueError(f"{self.kind}: must be a whole number, got {v!r}")
        if (self.kind == "admission") != (self.tier is None):
            raise ValueError(f"tier: {'no' if self.kind == 'admission' else 'a'} tier for "
                             f"{self.kind}, got {self.tier!r}")


def _tier_index(model: SystemModel, tier: str | None) -> int:
    if tier not in model.tiers:
        raise ValueError(f"tier: unknown tier {tier!r}; the system's tiers are {model.tiers}")
    return model.tiers.index(tier)


def _pool_index(model: SystemModel, name: str | None) -> int:
    k = pool_index(model, name)
    if k is None:
        raise ValueError(f"pool: unknown pool {name!r}; the system's pools are "
                         f"{[p.name for p in model.pools]}")
    return k


def apply(model: SystemModel, action: Action) -> SystemModel:
    """A new model with ``action`` applied (module docstring); ``admission`` returns a copy."""
    if action.kind == "pool":
        k = _pool_index(model, action.tier)
        pools = list(model.pools)
        pools[k] = dataclasses.replace(pools[k], size=int(action.value))
        return model.variant(pools=tuple(pools))
    D, servers = np.array(model.D_mc, dtype=float), np.array(model.servers, dtype=float)
    if action.kind != "admission":
        m = _tier_index(model, action.tier)
        if action.kind == "cpu_speed":
            D[m] = D[m] / float(action.value)
        elif action.kind == "cores":
            servers[m] = float(action.value)
        else:
            servers[m] = servers[m] * int(action.value)
    return model.variant(D_mc=D, servers=servers)


def apply_all(model: SystemModel, actions: Sequence[Action]) -> SystemModel:
    """``model`` with every tier action of ``actions`` applied in turn."""
    for a in actions:
        model = apply(model, a)
    return model


def parse_action(kind: str, text: str) -> Action:
    """``TIER=VALUE`` of the command line (``--replicate db=2``; ``--pool NAME=SIZE``) as an
    :class:`Action`; a ``ValueError`` names the option and the text."""
    tier, sep, value = text.partition("=")
    if not sep or not tier.strip():
        raise ValueError(f"{kind}: expected TIER=VALUE, got {text!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{kind}: {value!r} is not a number (in {text!r})") from None
    if kind in ("replicate", "cores", "pool") and number.is_integer():
        number = int(number)
    return Action(kind, tier.strip(), number)


def action_cost(model: SystemModel, action: Action, required: int,
                costs: Mapping[str, float]) -> float:
    """What ``action`` costs under ``costs`` (:data:`DEFAULT_COSTS`'s units)."""
    unit = float(costs.get(action.kind, DEFAULT_COSTS[action.kind]))
    if action.kind == "admission":
        return unit * max(required - int(action.value), 0)
    if action.kind == "pool":
        spec = model.pools[_pool_index(model, action.tier)]
        return unit * (int(action.value) - int(spec.size))
    m = _tier_index(model, action.tier)
    if action.kind == "replicate":
        return unit * (int(action.value) - 1)
    if action.kind == "cores":
        return unit * (float(action.value) - float(model.servers[m]))
    return unit * (float(action.value) - 1.0)


def describe(action: Action, model: SystemModel | None = None) -> str:
    """``add 1 replica of db``, ``db to 12 cores``, ``db on a 1.5x faster CPU``,
    ``admit at most 337 users``, ``raise app's conn pool 10 → 16`` (``conn pool to 16``
    without the model)."""
    if action.kind == "admission":
        return f"admit at most {int(action.value)} users"
    if action.kind == "pool":
        if model is None:
            return f"{action.tier} pool to {int(action.value)}"
        spec = model.pools[_pool_index(model, action.tier)]
        verb = "raise" if int(action.value) >= spec.size else "lower"
        return (f"{verb} {model.tiers[spec.first]}'s {action.tier} pool {spec.size} → "
                f"{int(action.value)}")
    if action.kind == "replicate":
        extra = int(action.value) - 1
        return f"add {extra} replica{'s' if extra != 1 else ''} of {action.tier}"
    if action.kind == "cores":
        now = "" if model is None else \
            f" (from {int(model.servers[_tier_index(model, action.tier)])})"
        return f"{action.tier} to {int(action.value)} cores{now}"
    return f"{action.tier} on a {action.value:g}x {'faster' if action.value >= 1 else 'slower'} CPU"


@dataclass(frozen=True)
class Remedy:
    """The smallest action of one kind that meets every SLA at the required users, and the
    capacity it gives (``capacity_limited``: the search reached its limit); for a pool, the
    tier or pool that causes the breach past that capacity (``breach_after``)."""

    action: Action
    capacity: int
    capacity_limited: bool
    cost: float
    summary: str
    breach_after: str | None = None

    def to_record(self) -> dict[str, Any]:
        return {"kind": self.action.kind, "tier": self.action.tier,
                "value": float(self.action.value), "capacity_users": self.capacity,
                "capacity_limited": self.capacity_limited, "cost": self.cost,
                "summary": self.summary,
                **({"breach_tier_after": self.breach_after} if self.action.kind == "pool"
                   else {})}


@dataclass(frozen=True)
class Remediation:
    """Remedies ranked by cost (cheapest first), what they were asked to meet, and how many
    model solves the search took."""

    required_users: int
    capacity_before: int
    remedies: tuple[Remedy, ...]
    solves: int
    #: kinds and tiers for which no action within the search limits suffices
    unreachable: tuple[str, ...]

    def to_record(self) -> dict[str, Any]:
        return {"required_users": self.required_users,
                "capacity_before": self.capacity_before,
                "actions": [r.to_record() for r in self.remedies],
                "unreachable": list(self.unreachable), "solves": self.solves}

    @property
    def best(self) -> Remedy | None:
        return self.remedies[0] if self.remedies else None

    def hints(self) -> dict[str, tuple[float, int]]:
        """``kind/tier -> (value, capacity)`` of each tier remedy: where the next solve's
        search starts (:func:`remediate`)."""
        return hints_of(self.to_record())


def hints_of(record: Mapping[str, Any] | None) -> dict[str, tuple[float, int]]:
    """:meth:`Remediation.hints` from a prediction's ``remediation`` record (or ``None``)."""
    return {f"{a['kind']}/{a['tier']}": (float(a["value"]), int(a["capacity_users"]))
            for a in (record or {}).get("actions", ()) if a["tier"] is not None}


def _meets(model: SystemModel, users: int) -> bool:
    """Every class within every SLO at ``users`` (one solve): its mean within ``sla_s`` and
    each quantile SLO's quantile of the model's law within its bound
    (:meth:`SystemModel.excess`; a remedy that restores the mean but not a class's p95 is
    no remedy)."""
    return model.excess(model.at(users)) <= 0


def smallest_feasible(feasible: Callable[[int], bool], low: int, high: int,
                      hint: int | None = None) -> int | None:
    """Smallest integer in ``[low, high]`` with ``feasible`` (monotone), ``None`` when even
    ``high`` fails. Without a ``hint`` ``high`` is probed first (most tiers cannot fix a
    breach at all), then bisection. With one (the last solve's answer: loads and estimates
    move slowly) the search gallops away from it -- steps 1, 2, 4 ... down if it is feasible,
    up if not -- until the answer is bracketed: two solves when it has not moved."""
    if high < low:
        return None
    if hint is None or not low <= hint <= high:
        if not feasible(high):
            return None
        lo, hi = low, high
    elif feasible(hint):
        lo, hi, step = low, hint, 1
        while hi - step >= low:
            if not feasible(hi - step):
                lo = hi - step + 1
                break
            hi, step = hi - step, 2 * step
    else:
        lo, step = hint + 1, 1
        while True:
            probe = min(lo + step - 1, high)
            if feasible(probe):
                hi = probe
                break
            if probe == high:
                return None
            lo, step = probe + 1, 2 * step
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def speed_factor(i: int) -> float:
    """The ``i``-th CPU speed factor of the search grid: ``1 + i SPEED_STEP``."""
    return round(1.0 + i * SPEED_STEP, 4)


#: a hint per ``kind/tier``: the last solve's action value and the capacity it gave
Hints = Mapping[str, tuple[float, int]]


def remediate(model: SystemModel, required: int, capacity_before: int,
              costs: Mapping[str, float] | None = None,
              hints: Hints | None = None, budget: int = SOLVE_BUDGET) -> Remediation:
    """The smallest action per kind and tier that keeps every class within its SLA at
    ``required`` users, with the capacity each gives, ranked by cost (module docstring).

    Feasibility at ``required`` is one solve of the modified model (response times fall as a
    tier gets faster or gets cores). Per tier, the smallest number of cores and the smallest
    speed factor (on a grid of :data:`SPEED_STEP`) are searched (:func:`smallest_feasible`: from
    ``hints``, the last solve's :meth:`Remediation.hints`, when given); the replicas follow
    from the cores without a solve (``k`` replicas are ``k c_m`` cores: the smallest ``k``
    with ``k c_m`` at least the cores needed). The capacity of each remedy is searched
    warm-started at the hint's capacity or at ``required`` (known to meet the SLAs). Tiers
    are searched longest queue first (wait ``W_m`` at ``required``: the tiers a breach comes
    from, a bursty one included); a candidate the asymptotic bound already puts over the
    SLAs (:func:`streams.predict.remedy_bounds.beyond_bound`) is refused unsolved, so a
    tier that cannot fix the breach costs no solve of its most generous candidate; once
    ``budget`` solves are spent, the searches left are listed in ``unreachable`` as not
    searched.
    ``admission`` at ``capacity_before`` users is always a remedy when that capacity is at
    least 1."""
    costs = dict(DEFAULT_COSTS, **(costs or {}))
    hints = hints or {}
    if not (isinstance(required, (int, np.integer)) and required >= 1):
        raise ValueError(f"required: must be a whole number of users >= 1, got {required!r}")
    tried: list[SystemModel] = []
    remedies: list[Remedy] = []
    unreachable: list[str] = []

    def search(tier: str, kind: str, low: int, high: int,
               value: Callable[[int], float], step_of: Callable[[float], int]) -> None:
        # tier: a pool's name for kind "pool"
        models: dict[int, SystemModel] = {}

        def feasible(i: int) -> bool:
            models[i] = apply(model, Action(kind, tier, value(i)))
            if beyond_bound(models[i], required):
                return False          # refused by the asymptotic bound, unsolved
            tried.append(models[i])
            return _meets(models[i], required)

        hint = hints.get(f"{kind}/{tier}")
        i = smallest_feasible(feasible, low, high, None if hint is None else step_of(hint[0]))
        if i is None:
            unreachable.extend([f"{kind} {tier}" + (_moves(models.get(high), tier)
                                                    if kind == "pool" else "")]
                               + (["replicate " + tier] if kind == "cores" else []))
            return
        add(models[i], Action(kind, tier, value(i)), hint)
        if kind == "cores":                         # k replicas = k c_m cores
            c = int(model.servers[model.tiers.index(tier)])
            k = max(2, -(-int(value(i)) // c))
            replicas = Action("replicate", tier, k)
            same = k * c == int(value(i))
            add(models[i] if same else apply(model, replicas), replicas,
                hints.get(f"replicate/{tier}"))

    def add(after: SystemModel, action: Action, hint: tuple[float, int] | None) -> None:
        warm = hint[1] if hint is not None and hint[0] == action.value else required
        cap, limited = model_capacity(after, warm=max(warm, required))
        tried.append(after)
        remedies.append(_remedy(model, action, cap, limited, capacity_before, required, costs,
                                _breach_after(after, cap, limited)
                                if action.kind == "pool" else None))

    def spent() -> int:
        return sum(len(t.solved()) for t in {id(t): t for t in tried}.values())

    point = model.at(required)
    for k in np.argsort(-(point.pool_waiting if point.pool_waiting is not None
                          else np.zeros(0)), kind="stable").tolist():
        spec = model.pools[k]         # pools first, longest wait first: the cheap change
        if spec.size >= required:
            continue                  # cannot bind at the required users
        if spent() >= budget:
            unreachable.append(f"pool {spec.name} (not searched: solve budget {budget})")
        else:
            search(spec.name, "pool", spec.size + 1, required, int, int)
    for m in np.argsort(-model.wait(point.residence), kind="stable").tolist():
        tier, c = model.tiers[m], int(model.servers[m])
        for kind in ("cores", "cpu_speed"):
            if spent() >= budget:
                unreachable.append(f"{kind} {tier} (not searched: solve budget {budget})")
            elif kind == "cores":
                search(tier, "cores", c + 1, MAX_REPLICAS * c, float, int)
            else:
                search(tier, "cpu_speed", 1, int(round((MAX_SPEED - 1.0) / SPEED_STEP)),
                       speed_factor, lambda s: int(round((s - 1.0) / SPEED_STEP)))
    if capacity_before >= 1:
        action = Action("admission", None, capacity_before)
        remedies.append(_remedy(model, action, capacity_before, False, capacity_before,
                                required, costs))
    order = {k: i for i, k in enumerate(ACTION_KINDS)}
    remedies.sort(key=lambda r: (r.cost, order[r.action.kind], r.action.tier or ""))
    return Remediation(required, capacity_before, tuple(remedies), spent(),
                       tuple(unreachable))


def _breach_after(after: SystemModel, cap: int | None, limited: bool) -> str | None:
    """The tier or pool causing the breach at the first population past ``after``'s
    capacity (``None``: no breach within the search's limit)."""
    if cap is None or limited:
        return None
    point = after.at(int(cap) + 1)
    c = int(np.argmax(after.class_excess(point)))
    return breach_name(after, point, c)


def _moves(largest: SystemModel | None, name: str) -> str:
    """`` (at K the breach moves to db)``: where a pool's largest searched size ``K`` moves
    the breach (nothing when it stays at the pool or was not solved)."""
    if largest is None:
        return ""
    cap, limited = model_capacity(largest)
    to = _breach_after(largest, cap, limited)
    k = largest.pools[_pool_index(largest, name)].size
    return "" if to is None or to == name else f" (at {k} the breach moves to {to})"


def _remedy(model: SystemModel, action: Action, cap: int | None, limited: bool, before: int,
            required: int, costs: Mapping[str, float], breach_after: str | None = None
            ) -> Remedy:
    cap = CAPACITY_LIMIT if cap is None else int(cap)
    after = f"{cap}+" if limited else f"{cap}"
    if action.kind == "admission":
        turned = max(required - cap, 0)
        text = (f"{describe(action)}: {turned} of the {required} users expected within the "
                f"horizon would wait or be turned away")
    else:
        text = f"{describe(action, model)}: capacity {before} → {after} users"
    if action.kind == "pool" and breach_after is not None:
        text += ("; the pool still causes the breach" if breach_after == action.tier else
                 f"; the breach moves to {breach_after}")
    return Remedy(action, cap, limited, round(action_cost(model, action, required, costs), 9),
                  text, breach_after)


@dataclass(frozen=True)
class Comparison:
    """One system before and after ``actions``: capacity (``None``: no SLA) and per-class
    response times at the current and the horizon's users (``classes`` order) -- or, where
    ``asked``, at the users asked for (:func:`at_users`) in place of the horizon's."""

    actions: tuple[Action, ...]
    users: int
    users_forecast: int
    capacity_before: int | None
    capacity_after: int | None
    limited_after: bool
    response_now: tuple[np.ndarray, np.ndarray]          # (before, after), seconds
    response_forecast: tuple[np.ndarray, np.ndarray]
    #: per class the statistic shown for its SLO (:mod:`streams.predict.slo_view`: the one
    #: binding at the horizon before the actions; ``None``: no SLO) and its SLOs
    statistics: tuple[str | None, ...] = ()
    slos: tuple[Any, ...] = ()
    #: that statistic's value per class (before, after), now and at the horizon, seconds
    slo_now: tuple[list[float | None], list[float | None]] = ([], [])
    slo_forecast: tuple[list[float | None], list[float | None]] = ([], [])
    #: ``users_forecast`` is the population asked for (``perfcast whatif --users``), not the
    #: horizon's
    asked: bool = False


def compare(model: SystemModel, actions: Sequence[Action], users: int,
            users_forecast: int, asked: bool = False) -> Comparison:
    """``model`` against ``model`` with every action applied (:func:`apply_all`): what
    ``perfcast whatif`` prints: capacity on every SLO, mean response times and the value of
    each class's SLO statistic (:mod:`streams.predict.slo_view`). ``asked``:
    ``users_forecast`` is the population ``perfcast whatif --users N`` asks about (the closed
    counterpart of ``--rate R``, :func:`streams.predict.open_whatif.at_rate`; the model's
    population is one class of ``N`` users over the measured mix, so each class is its
    share of ``N``), after :func:`check_users`."""
    after = apply_all(model, actions)
    cap_before, _ = model_capacity(model)
    cap_after, limited = model_capacity(after, warm=cap_before)
    points = [(m.at(users), m.at(users_forecast)) for m in (model, after)]
    stats, _ = slo_view.binding(model, points[0][1])
    now, fc = ([slo_view.slo_values(m, p[k], stats) for m, p in zip((model, after), points)]
               for k in (0, 1))
    return Comparison(tuple(actions), users, users_forecast, cap_before, cap_after, limited,
                      (points[0][0].response, points[1][0].response),
                      (points[0][1].response, points[1][1].response),
                      tuple(stats), tuple(slo_view.class_slos(model)),
                      (now[0], now[1]), (fc[0], fc[1]), asked)


def check_users(model: SystemModel, actions: Sequence[Action], users: int,
                system: str) -> None:
    """``ValueError`` naming both keys and values where a pool would hold more tokens than
    ``users`` asked for (``perfcast whatif --users N``): a ``--pool NAME=SIZE`` above ``N``,
    or a pool of ``system`` configured above ``N`` (``systems.<system>.pools.<name>.size``)
    that no ``--pool`` resizes. Such a pool never binds -- the pool model reduces to the
    network without it (:mod:`solvers.pools`) -- so the question names a
    pool that cannot act at the population it asks about: a contradiction of the user's
    own, refused. Where the population is the stream's (its ``users`` field), the same pool
    is accepted and flagged instead (:func:`streams.predict.prediction.pool_flags`): the
    load is measured, and a pool sized for the peak is normal between peaks."""
    if isinstance(users, bool) or not isinstance(users, (int, np.integer)) or users < 1:
        raise ValueError(f"--users: must be a whole number of users >= 1, got {users!r}")
    resized = set()
    for a in actions:
        if a.kind == "pool":
            if int(a.value) > users:
                raise ValueError(f"--pool {a.tier}={int(a.value)} is larger than --users "
                                 f"{users}: a pool of more tokens than users never binds")
            resized.add(a.tier)
    for p in model.pools:
        if p.name not in resized and p.size > users:
            raise ValueError(f"systems.{system}.pools.{p.name}.size = {p.size} is larger "
                             f"than --users {users}: a pool of more tokens than users never "
                             f"binds (--pool {p.name}=SIZE with SIZE <= {users} asks about "
                             f"a smaller one)")

