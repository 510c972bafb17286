"""The open model of one system: its tiers as open queues fed by the measured request rates.

An open service (an API behind a gateway) is driven by its request rate, not by a population:
the model is :func:`solvers.open.solve_open_tiers` at the total rate ``x`` split by the
measured class mix ``p_c`` (``lambda_c = p_c x``), on the closed model's estimates -- per-class
demands ``D_{m,c} = V_{m,c} S_{m,c}``, cores, and each bursty tier's MAP(2) (an M/MAP/c queue,
per-job phases, matrix-geometric; Neuts 1981), the other tiers M/M/c (Erlang C).

Capacity is the largest total rate at the current mix at which every class meets its SLA,
``x* = max{x : R_c(x) <= SLA_c for every c with p_c > 0}`` (Harbaoui et al. (2010) section V's
question, asked in requests per second): ``R_c`` rises with ``x`` up to the saturation rate
``x_sat = min_m c_m / sum_c p_c D_{m,c}`` (the utilization law), so ``x*`` is found on
``(0, x_sat)`` by a safeguarded regula falsi on the model of that rise (:func:`rate_capacity`),
each rate solved once (:class:`RateSolves`). The time to breach follows from the
rate trend (:mod:`streams.predict.rate_trend`).

**The tiers behind a bursty one** (:func:`fed_applies`): a bursty tier releases its jobs in
waves at the end of a slow run (Mi et al. 2008), so the tiers after it, taken as fed Poisson
arrivals, wait too little (docs/accuracy.md, section 19: case (d) -29% on R at 80% of
saturation, capacity +10%). There the point now and at the forecast, and the capacity, are the
fed model's (:func:`solvers.open.fixed_population.solve_open_waves`: those tiers fed the bursty
tier's departure process, the next bursty tier's wait raised by what the waves add, a bursty
tier's start phases coupled through :data:`solvers.open.queues.TWO_CORE`). A fed solve costs
tens of milliseconds to seconds (the departures' ``MAP/M/c`` queues, ~100 phases), against
well under a millisecond Poisson-fed, so the capacity search probes the Poisson-fed model and
the fed model corrects its answer (:func:`rate_capacity`: the fed model's response time over
the Poisson-fed one's at the found rate, each class's, scales the SLAs the Poisson-fed search
looks for; repeated until the rate moves by less than the search's tolerance, at most
:data:`FED_STEPS` + 1 fed solves); the alert window's and the uncertainty band's capacities
reuse that correction (:attr:`RateSolves.gain`). The remedies' searches stay Poisson-fed (each
action's model would cost its own fed solves). The predictions say which model was used
(:data:`FED_FLAG`).

**Pools** (:attr:`~streams.predict.model.SystemModel.pools`): each outermost pool and its held
tiers are one station fed by the open source (:mod:`solvers.pools_open`): the held chain
(the token queue and each holder's class and place, matrix-geometric; Neuts 1981) where the
held tiers are exponential per class -- a class whose service SCV there is above 1
(configured or estimated, :mod:`streams.predict.service_scv`) a hyperexponential -- or one
bursty tier serves one class, else the flow-equivalent
server of the held network solved closed at ``1..K`` by the closed pool route (Chandy et al.
1975; flagged); either built once per model (:func:`pool_curves`, held by
:class:`RateSolves`). The tiers outside the pools stay open queues, those after a pool fed
Poisson (Burke 1956). Every request takes the token (the closed
route's aggregate class), so the saturation rate is the smaller of ``x_sat`` and the pool's.
Quantiles on this route with pools: each outermost pool's passage law convolved with the open
tiers outside it (:mod:`streams.predict.pool_law`); where none applies the exponential law
scaled to the pool model's mean (flagged).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from solvers.open import OpenTiersResult, solve_open_tiers, tiers_capacity
from solvers.open.fixed_population import solve_open_waves
from solvers.open.queues import TWO_CORE
from solvers.pools_open import HeldCurve, OpenPoolResult, held_network, outermost, with_pools
from streams.predict import alert_window, pool_naming
from streams.predict.model import POOL_FLAG, Point, SystemModel
from streams.predict.pool_law import POOL_QUANTILE_FLAG, passage_applies

__all__ = ["FED_FLAG", "FED_SLA_SLACK", "FED_STEPS", "LEVEL_SPAN_S", "MIN_LEVEL_ROWS",
           "RATE_TOLERANCE", "RateCapacity", "RateSolves", "add_level", "capacity_model",
           "fed_applies", "mix_mean", "open_point", "pool_curves",
           "rate_capacity", "saturation_rate", "tier_residence", "window_rate_capacity"]

#: relative resolution of the capacity in requests per second (of the saturation rate)
RATE_TOLERANCE = 1e-4

#: the flag of a prediction whose tiers behind a bursty one were fed its departures
FED_FLAG = ("open model: the tiers behind a bursty tier fed its departure process "
            "(waves; solvers.open.solve_open_waves)")
#: at most this many fed solves correct the capacity (module docstring)
FED_STEPS = 4
#: the fed capacity's worst class may exceed its SLA by this share: the fixed point is met to
#: the search's rate tolerance, not to the SLA's last bit
FED_SLA_SLACK = 1e-3


def fed_applies(model: SystemModel) -> bool:
    """Whether the open model feeds some tier a bursty tier's departures (module docstring):
    a bursty tier (a MAP of order above 1) with a tier after it, no pool (a pool's held
    tiers are one station of their own: :mod:`solvers.pools_open`), and the system's
    ``open_fed`` on (its cost: module docstring)."""
    procs = model.processes
    return (model.open_fed and procs is not None and not model.pools
            and any(p is not None and p.order > 1 for p in list(procs)[:-1]))


def _inputs(model: SystemModel) -> tuple[np.ndarray, np.ndarray]:
    V = np.ones_like(model.D_mc) if model.visits is None else np.asarray(model.visits, float)
    S = np.divide(model.D_mc, V, out=np.zeros_like(model.D_mc), where=V > 0)
    return S, V


def pool_curves(model: SystemModel) -> list[HeldCurve | None]:
    """Per pool of the model, its held network's :class:`~solvers.pools_open.HeldCurve` with
    the held chain where it applies (``None`` for a pool inside another: it is in that one's
    held network; or, flagged, one whose held network cannot be solved), the bursty tiers'
    processes the model's pool processes, else its MAP(2)s; the flags (the route, the closed
    solves', the service SCVs' of :attr:`~streams.predict.model.SystemModel.service_scv_flags`)
    go to the model's flags once. Independent of the rate: computed once per model."""
    top = set(outermost(model.pools))
    procs = model.pool_processes or model.processes
    for f in model.service_scv_flags:
        if f not in model.flags:
            model.flags.append(f)
    curves: list[HeldCurve | None] = []
    for k in range(len(model.pools)):
        if k not in top:
            curves.append(None)
            continue
        spec = model.pools[k]
        try:
            curve = held_network(model.D_mc, model.servers, model.pools, k, model.mix,
                                 model.scv, model.delays, model.ps, procs, model.service_scv)
        except (RuntimeError, ValueError, np.linalg.LinAlgError) as exc:
            text = (f"{POOL_FLAG}{spec.name} not modelled on the open route: its held "
                    f"network could not be solved ({str(exc)[:120]})")
            if text not in model.flags:
                model.flags.append(text)
            curves.append(None)
            continue
        curves.append(curve)
        flags = list(curve.flags)
        bursty = procs is not None and any(p is not None and p.order > 1
                                           for p in procs[spec.first:spec.last])
        if curve.chain is None and bursty:
            flags.append(f"{POOL_FLAG}{spec.name} on the open route by the flow-equivalent "
                         f"server with a bursty held tier (several classes or bursty tiers, or "
                         f"past the held chain's budget): its slow runs fill the pool, which "
                         f"the server misses -- the wait for a token can be far too low")
        elif curve.chain is None:
            flags.append(f"{POOL_FLAG}{spec.name} on the open route by the flow-equivalent "
                         f"server (a general-service held tier, a pool inside it, or past the "
                         f"held chain's budget): its wait is approximate near saturation")
            spread = model.service_scv
            if spread is not None and np.any(spread[spec.first:spec.last] > 1.0):
                flags.append(f"{POOL_FLAG}{spec.name}: the classes' service SCVs above 1 are "
                             f"in its flow-equivalent server only through the holding time's "
                             f"two moments (the held chain's budget exceeded): its wait is "
                             f"approximate" if curve.wait_factor > 1.0 else
                             f"{POOL_FLAG}{spec.name}: the classes' service SCVs above 1 are "
                             f"not in its flow-equivalent server at processor-sharing held "
                             f"tiers (the held chain's budget exceeded): its wait can be too "
                             f"low")
        for f in flags:
            if f not in model.flags:
                model.flags.append(f)
    return curves


def solve_at(model: SystemModel, rate: float,
             curves: list[HeldCurve | None] | None = None, fed: bool = False
             ) -> OpenTiersResult:
    """The open tiers at total rate ``rate`` and the model's mix; a tier's pure delays
    (:attr:`~streams.predict.model.SystemModel.delays`) add to its residence times and the
    classes' response times without queueing (an infinite-server station: its mean whatever
    the rate, Lazowska et al. 1984); with pools, each pool's station in place of its held
    tiers (module docstring; ``curves``: :func:`pool_curves` where the caller has them).
    ``fed``: the tiers behind a bursty one fed its departures where :func:`fed_applies`."""
    return _solve(model, rate, curves, fed)[0]


def _solve(model: SystemModel, rate: float, curves: list[HeldCurve | None] | None = None,
           fed: bool = False) -> tuple[OpenTiersResult, list[OpenPoolResult | None]]:
    S, V = _inputs(model)
    if fed and fed_applies(model):
        res = solve_open_waves(max(rate, 0.0) * model.mix, S, model.servers.astype(int),
                               processes=model.processes, visits=V,
                               per_job_max_cores=model.per_job_max_cores, ps=model.ps_law,
                               coupled=TWO_CORE)
    else:
        res = solve_open_tiers(max(rate, 0.0) * model.mix, S, model.servers.astype(int),
                               processes=model.processes, visits=V,
                               per_job_max_cores=model.per_job_max_cores, ps=model.ps_law)
    if model.delays is not None:
        res = dataclasses.replace(res, response_time=res.response_time + model.delay_c,
                                  residence_time=res.residence_time + model.delays)
    if not model.pools:
        return res, []
    if curves is None:
        curves = pool_curves(model)
    return with_pools(res, max(rate, 0.0), model.pools, curves, model.D_mc)


def saturation_rate(model: SystemModel, curves: list[HeldCurve | None] | None = None) -> float:
    """The largest total rate the model carries at its mix: the tiers' utilization law
    (``min_m c_m / sum_c p_c D_{m,c}``) and each pool's, its holders' throughput with every
    token held (:attr:`solvers.pools_open.HeldCurve.saturation`; every request takes its
    token)."""
    S, V = _inputs(model)
    sat = tiers_capacity(model.mix, S, model.servers.astype(int), V)
    if model.pools:
        for curve in pool_curves(model) if curves is None else curves:
            if curve is not None:
                sat = min(sat, curve.saturation)
    return sat


def tier_residence(model: SystemModel, m: int, rate: float) -> float:
    """Tier ``m``'s residence time per request at total rate ``rate``, over the model's mix
    (``sum_c p_c R_{m,c}``, the measured counterpart of
    :func:`streams.predict.calibration.measured_residence`); ``inf`` where the tier is
    saturated."""
    return float(mix_mean(solve_at(model, rate).residence_time[m], model.mix))


def mix_mean(values: np.ndarray, mix: np.ndarray) -> np.ndarray | float:
    """``values @ mix`` over the classes in the mix only (``inf`` where a class in it has
    ``inf``; a class out of it, weight 0, counts nothing, never ``0 * inf = NaN``)."""
    hit = mix > 0
    return np.asarray(values)[..., hit] @ mix[hit]


def open_point(model: SystemModel, rate: float, solves: "RateSolves | None" = None,
               fed: bool = True) -> tuple[Point, OpenTiersResult]:
    """The model's answer at total rate ``rate`` as a :class:`~streams.predict.model.Point`
    (``residence``: per tier, over the mix; ``inf`` where a tier is saturated) and the open
    solution itself (from ``solves`` when given: :class:`RateSolves`); ``fed``: the fed
    model where :func:`fed_applies` (module docstring; :data:`FED_FLAG` then joins the
    model's flags)."""
    fed = fed and fed_applies(model)
    if solves is None:
        res, pools = _solve(model, rate, fed=fed)
    elif fed:
        res, pools = solves.fed(rate), []
    else:
        res, pools = solves(rate), solves.pools(rate)
    if fed and FED_FLAG not in model.flags:
        model.flags.append(FED_FLAG)
    residence = mix_mean(res.residence_time, model.mix)
    kind = "open-map" if model.processes is not None else "open"
    util = wait = None
    if model.pools:
        util = np.array([math.inf if p is None else p.utilization for p in pools])
        wait = np.array([math.inf if p is None else p.waiting_time for p in pools])
        if POOL_QUANTILE_FLAG not in model.flags and not passage_applies(
                model, solves.curves if solves is not None else None):
            model.flags.append(POOL_QUANTILE_FLAG)
    return Point(0, float(res.throughput.sum()), residence, res.response_time,
                 res.utilization, None, kind, util, wait), res


@dataclass(frozen=True)
class RateCapacity:
    """``capacity`` (requests/s within every SLA; ``None`` when no class has an SLA),
    ``saturation`` (the largest rate any tier carries), the class that breaks first beyond
    ``capacity`` and the tier holding most of its response time there."""

    capacity: float | None
    saturation: float
    breach_class: str | None
    breach_tier: str | None


def _excess(model: SystemModel, res: OpenTiersResult, judged: np.ndarray,
            sla: np.ndarray | None = None) -> np.ndarray:
    sla = model.sla if sla is None else sla
    return np.where(judged, res.response_time / np.where(judged, sla, 1.0), -np.inf)


class RateSolves:
    """The open solves of one model, held by rate: the capacity search, the point now, the
    forecast and remediation's first look all ask :func:`solve_at` of the same model, often
    at the same rate (the search's last probe beyond the capacity is solved again to name the
    breach class) -- each rate is solved once. ``count``: the solves done (not the ones
    answered from memory)."""

    def __init__(self, model: SystemModel) -> None:
        self.model = model
        self.count = 0
        self.fed_count = 0
        #: the fed capacity's per-class gain (:func:`rate_capacity` with ``fed``), else None
        self.gain: np.ndarray | None = None
        self._held: dict[float, tuple[OpenTiersResult, list[OpenPoolResult | None]]] = {}
        self._fed: dict[float, OpenTiersResult] = {}
        self._curves: list[HeldCurve | None] | None = None

    @property
    def curves(self) -> list[HeldCurve | None]:
        """The model's :func:`pool_curves`, computed at the first ask."""
        if self._curves is None:
            self._curves = pool_curves(self.model) if self.model.pools else []
        return self._curves

    def _get(self, rate: float) -> tuple[OpenTiersResult, list[OpenPoolResult | None]]:
        key = float(max(rate, 0.0))
        got = self._held.get(key)
        if got is None:
            self.count += 1
            got = self._held[key] = _solve(self.model, key, self.curves) \
                if self.model.pools else (solve_at(self.model, key), [])
        return got

    def __call__(self, rate: float) -> OpenTiersResult:
        return self._get(rate)[0]

    def fed(self, rate: float) -> OpenTiersResult:
        """The fed model at ``rate`` (:func:`solve_at` with ``fed``; the Poisson-fed one where
        :func:`fed_applies` does not), held by rate apart from the Poisson-fed solves;
        ``fed_count``: the fed solves done."""
        if not fed_applies(self.model):
            return self(rate)
        key = float(max(rate, 0.0))
        got = self._fed.get(key)
        if got is None:
            self.fed_count += 1
            got = self._fed[key] = solve_at(self.model, key, fed=True)
        return got

    def pools(self, rate: float) -> list[OpenPoolResult | None]:
        """Each pool's figures at ``rate`` (:func:`solvers.pools_open.with_pools`)."""
        return self._get(rate)[1]


def _worst(res: OpenTiersResult, model: SystemModel, judged: np.ndarray,
           sla: np.ndarray | None = None) -> float:
    return float(_excess(model, res, judged, sla).max()) if res.stable else math.inf


#: the probes' nearest distance to a bracket end, in units of the stopping width: a probe
#: landing next to the root on one side puts the next just across it, closing the bracket
_EDGE = 0.45


def _next_probe(lo: tuple[float, float], hi: tuple[float, float], sat: float,
                stale: list[float]) -> float:
    """The regula-falsi step on ``phi(x) = (e(x) - 1)(sat - x)`` between ``lo`` (``phi <= 0``)
    and ``hi`` (``phi > 0``, ``inf`` where not finite), ``e`` the worst class's response time
    over its SLA. A tier's response time grows as ``A + B / (sat - x)`` towards saturation
    (Kleinrock 1975, Sec. 3.2), which makes ``phi`` linear in ``x``: the step is exact for
    that form and superlinear near it. Without a finite ``hi`` the line through ``lo`` with
    ``A = 0`` (an M/M/1-like rise, ``phi(sat) = e_lo (sat - x_lo)``) stands in for it.
    ``stale``: the Illinois factors (Dowell and Jarratt 1971) on ``lo``'s and ``hi``'s
    values, halved each time an end is kept twice running so that end moves too."""
    (x0, f0), (x1, f1) = lo, hi
    if not math.isfinite(f1):
        x1, f1 = sat, f0 + sat - x0
    f0, f1 = f0 * stale[0], f1 * stale[1]
    if not f1 > f0:
        return 0.5 * (lo[0] + hi[0])
    return x0 - f0 * (x1 - x0) / (f1 - f0)


def rate_capacity(model: SystemModel, solves: RateSolves | None = None,
                  start: float | None = None, fed: bool = False,
                  gain: np.ndarray | None = None) -> RateCapacity:
    """``x*`` (module docstring) to :data:`RATE_TOLERANCE` of ``x_sat``: the returned rate
    meets every SLA and a rate at most ``RATE_TOLERANCE x_sat`` above it does not; 0 when a
    class misses its SLA at any rate (its demand alone exceeds it). A bracket ``[lo, hi]``
    (``lo = 0``, ``hi = x_sat``) narrowed by the regula-falsi probes of :func:`_next_probe`
    kept at least ``0.45`` of the stopping width inside the bracket, and a bisection instead
    where two probes running did not halve it (Brent's (1973) safeguard, so the search
    always ends: the bracket at least halves every third probe). ``solves``: the model's held
    solves (:class:`RateSolves`), shared with the prediction's other solves; ``start``: a rate
    they hold that may meet every SLA (a remedy's required rate): the bracket starts there
    when it does, the search's first probes saved. ``fed`` (where :func:`fed_applies`): the
    search's answer corrected to the fed model's (:func:`_fed_capacity`; module docstring),
    to the rate tolerance with the worst class within :data:`FED_SLA_SLACK` of its SLA, the
    correction's per-class gain kept on ``solves`` (:attr:`RateSolves.gain`); ``gain``: such
    a gain, applied without a fed solve (the SLAs searched are ``SLA_c / gain_c``: a
    variant of the model whose fed correction is taken as the model's)."""
    solve = RateSolves(model) if solves is None else solves
    if solve.model is not model:
        raise ValueError("solves: held for another model than the one searched")
    sat = saturation_rate(model, solve.curves if model.pools else None)
    judged = (model.mix > 0) & np.isfinite(model.sla)
    if not judged.any() or not math.isfinite(sat):
        return RateCapacity(None, sat, None, None)
    tol = RATE_TOLERANCE * sat
    sla = model.sla if gain is None else model.sla / np.where(judged, gain, 1.0)
    lo, hi = _search(model, solve, sat, judged, sla, start)
    beyond = solve(hi)
    if gain is None and fed and fed_applies(model) and lo > 0.0:
        lo, beyond, solve.gain = _fed_capacity(model, solve, sat, judged, lo, tol)
        hi = lo
    ratio = _excess(model, beyond, judged)
    c = int(np.argmax(ratio))
    if model.pools:
        return RateCapacity(lo, sat, model.classes[c], _pool_breach(model, solve, hi, c))
    share = beyond.residence_time[:, c]
    share = np.where(np.isfinite(share), share, np.finfo(float).max)
    return RateCapacity(lo, sat, model.classes[c], model.tiers[int(np.argmax(share))])


def _search(model: SystemModel, solve: RateSolves, sat: float, judged: np.ndarray,
            sla: np.ndarray, start: float | None) -> tuple[float, float]:
    """The bracket ``(lo, hi)`` of :func:`rate_capacity`'s search on the Poisson-fed solves
    at the SLAs ``sla``: ``lo`` meets every one, ``hi`` does not, at most ``RATE_TOLERANCE
    x_sat`` apart."""
    tol = RATE_TOLERANCE * sat
    e0 = _worst(solve(0.0), model, judged, sla)
    lo, hi = (0.0, (e0 - 1.0) * sat), (sat, math.inf)
    if e0 > 1.0:
        lo, hi = (0.0, 0.0), (0.0, math.inf)
    elif start is not None and 0.0 < start < sat - tol:
        e = _worst(solve(start), model, judged, sla)
        if e <= 1.0:
            lo = (start, (e - 1.0) * (sat - start))
    side, stale, widths = -1, [1.0, 1.0], [math.inf, math.inf, sat]
    while hi[0] - lo[0] > tol:
        if widths[-1] > 0.5 * widths[-3]:
            x = 0.5 * (lo[0] + hi[0])
        else:
            x = _next_probe(lo, hi, sat, stale)
        x = min(max(x, lo[0] + _EDGE * tol), hi[0] - _EDGE * tol)
        e = _worst(solve(x), model, judged, sla)
        moved = 0 if e <= 1.0 else 1
        if moved == 0:
            lo = (x, (e - 1.0) * (sat - x))
        else:
            hi = (x, (e - 1.0) * (sat - x) if math.isfinite(e) else math.inf)
        stale[moved] = 1.0                     # the end just moved: its own value
        stale[1 - moved] = 0.5 * stale[1 - moved] if side == moved else 1.0
        side = moved
        widths.append(hi[0] - lo[0])
    return lo[0], hi[0]


def _fed_capacity(model: SystemModel, solve: RateSolves, sat: float, judged: np.ndarray,
                  x: float, tol: float) -> tuple[float, OpenTiersResult, np.ndarray]:
    """The fed model's capacity from the Poisson-fed one's ``x`` (module docstring): at the
    rate ``x_k`` the fed model's response time over the Poisson-fed one's, per class,
    ``g_c``, and ``x_{k+1}`` the Poisson-fed capacity at the SLAs ``SLA_c / g_c``; the ratio
    moves slowly with the rate, so the fixed point is met in a few fed solves
    (:data:`FED_STEPS` steps at most; then ``x`` the last rate whose fed solve met every SLA, or
    the last one found). Returns the rate, the fed solve there and the last gain."""
    fed = solve.fed(x)
    best: tuple[float, OpenTiersResult, np.ndarray] | None = None
    gain = np.ones(len(model.classes))
    for _ in range(FED_STEPS):
        plain = solve(x)
        if not (fed.stable and plain.stable):
            break
        gain = np.where(judged, fed.response_time / np.where(judged, plain.response_time, 1.0),
                        1.0)
        if _worst(fed, model, judged) <= 1.0 + FED_SLA_SLACK:
            best = (x, fed, gain) if best is None or x > best[0] else best
        nxt, _ = _search(model, solve, sat, judged, model.sla / gain, None)
        if abs(nxt - x) <= tol:
            x = nxt
            fed = solve.fed(x)
            break
        x = nxt
        fed = solve.fed(x)
    if _worst(fed, model, judged) <= 1.0 + FED_SLA_SLACK or best is None:
        return x, fed, gain
    return best


def _pool_breach(model: SystemModel, solve: RateSolves, rate: float, c: int) -> str:
    """The tier or pool holding the largest part of class ``c``'s response time at ``rate``
    (:func:`streams.predict.pool_naming.breach_name`, the closed route's rule); where a pool
    is saturated there, that pool if it binds before its tiers, else its busiest held tier."""
    point, res = open_point(model, rate, solve)
    if np.all(np.isfinite(point.residence)) and np.all(np.isfinite(point.pool_waiting)):
        return pool_naming.breach_name(model, point, c)
    for k, one in enumerate(solve.pools(rate)):
        if one is not None and not one.stable:
            if pool_naming.binds(model, k):
                return model.pools[k].name
            spec = model.pools[k]
            per_core = model.D[spec.first:spec.last] / model.servers[spec.first:spec.last]
            return model.tiers[spec.first + int(np.argmax(per_core))]
    share = np.where(np.isfinite(res.residence_time[:, c]), res.residence_time[:, c],
                     np.finfo(float).max)
    return model.tiers[int(np.argmax(share))]


def window_rate_capacity(model: SystemModel, idc: list[float | None], capacity: float,
                         window_s: float, z: float,
                         solves: RateSolves | None = None) -> tuple[float | None, np.ndarray]:
    """The capacity in requests per second the predicted-breach alert acts on, with the SLA
    read on a ``window_s`` mean (:mod:`streams.predict.alert_window`, as on a closed
    workload): each tier's demand times ``f_m = 1 + z sqrt(I_m / n_m)``, ``n_m`` the tier's
    completions in a window at the long-run ``capacity`` (a window of a bursty tier holds a
    share of slow runs that varies from window to window: Mi et al. 2008), and the rate
    capacity of that model (:func:`rate_capacity`). Returns ``(capacity or None, factors)``;
    the capacity is ``None`` where the factors are not material
    (:func:`~streams.predict.alert_window.is_material`: the long-run one stands). The fed
    correction of ``solves``'s capacity (:attr:`RateSolves.gain`) is applied to the scaled
    model's search as it is (no fed solve of its own)."""
    at, _ = open_point(model, capacity, solves)
    factors = alert_window.window_factors(model, idc, at, window_s, z)
    if not alert_window.is_material(factors):
        return None, factors
    scaled = model.variant(D_mc=model.D_mc * factors[:, None])
    gain = solves.gain if solves is not None else None
    return rate_capacity(scaled, gain=gain).capacity, factors


#: the span of solves whose aggregate demands the capacity's model takes the median of (s)
LEVEL_SPAN_S = 300.0
#: the fewest solves whose median rejects one that strays (of two, the median is the mean)
MIN_LEVEL_ROWS = 3


def add_level(rows: list[list], time: float, model: SystemModel,
              span_s: float = LEVEL_SPAN_S) -> None:
    """Append the solve at ``time``'s aggregate demand per tier, ``D_m = sum_c p_c D_{m,c}``
    at the model's mix, to ``rows`` (``[time, [D_m, ...]]``), dropping the solves that ended
    ``span_s`` or more before it and any row of another tier count (a changed system)."""
    rows.append([float(time), [float(x) for x in model.D]])
    while rows and (rows[0][0] <= time - span_s or len(rows[0][1]) != len(rows[-1][1])):
        rows.pop(0)


def capacity_model(model: SystemModel, rows: list[list]) -> SystemModel:
    """The model the capacity is searched on: each tier's demands scaled so that its
    aggregate ``D_m`` is the median of the aggregates of the solves in ``rows``
    (:func:`add_level`: the last :data:`LEVEL_SPAN_S`, this solve's the newest; of an even
    count the geometric mean of the middle two), the classes' split the solve's own.

    The capacity in requests per second is about ``1 / D_m`` of the bottleneck tier, and one
    solve's ``D_m`` carries the noise of the pooled mix (a share ``p`` over ``n`` completions
    has the binomial standard error ``sqrt(p (1 - p) / n)``: a heavy class of 15% reads
    12-19% over 400 completions, moving ``D_m`` by ``Delta p D_heavy``) and of a heavy-tailed
    class's per-class estimate (a window's few slow requests): re-solved with ``D_m`` held
    at its mean, the testbed's open ramps' flat-part capacity keeps a fifth to a half of its
    swing; with the split alone held, all of it. That noise is correlated over the mix's
    pooled span (about a minute at 9 requests/s), so five minutes hold several independent
    readings.

    **The median, not the mean.** The first solves' estimates have not settled (a filter
    started from its prior, a handful of windows): they stray from the level by many times
    the noise, and a mean keeps such a reading for the whole span, where a single one can
    put the capacity below the rate and raise the alert on a flat load. The running median
    (Tukey 1977) follows the level as a mean does but ignores readings on the far side of it
    as long as they are fewer than half the span's (its breakdown point, Hampel 1974): the
    unsettled first solves drop out without a bound or a count to tune, and a real change of
    demand is fully in the capacity once it holds more than half the span (two and a half
    minutes on, as the mean's half; a step is followed, not smeared). With fewer than
    :data:`MIN_LEVEL_ROWS` solves a median rejects none (of two it is their mean): the
    solve's own model stands. Returns ``model`` itself then."""
    if len(rows) < MIN_LEVEL_ROWS:
        return model
    hist = np.array([r[1] for r in rows], dtype=float)
    now = hist[-1]
    if not (np.all(hist > 0) and np.all(np.isfinite(hist))):
        return model
    scale = np.exp(np.median(np.log(hist), axis=0)) / now
    if np.allclose(scale, 1.0, rtol=1e-12, atol=0.0):
        return model
    return model.variant(D_mc=model.D_mc * scale[:, None])
