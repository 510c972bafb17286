"""A solve's prediction, assembled: the typed :class:`~streams.core.outputs.Prediction` with
its per-class and per-tier parts, from what the solve computed.

:func:`assemble` builds the prediction of a solved model, :func:`unsolved` the one of a solve
without a model (not enough data, unknown population); both make every value JSON-safe
(:func:`streams.core.records.clean`: a non-finite float is ``None``). The figures themselves
-- capacity, time to breach, the alert's capacity, errors, the stories -- are computed by the
system's solve (:class:`streams.engine.system.SystemState`); the per-part figures and the
breach point are read off the model here.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from streams.core.config import SLO_QUANTILES, SystemConfig
from streams.core.outputs import (ClassDemand, ClassPrediction, PoolPrediction, Prediction,
                                  TierPrediction)
from streams.core.records import clean
from streams.core.tier import TierModel
from streams.predict.model import (ASSUMED, POOL_FLAG, SOLVER_FLAG, Measured, Point,
                                   SystemModel)
from streams.predict.pool_naming import bottleneck_name, breach_name
from streams.predict.slo_view import slo_values
from streams.predict.response_trend import TrendReading

__all__ = ["assemble", "assumed_workload", "breach_point", "class_parts", "held_flags",
           "map2_report", "pool_flags", "pool_parts", "record_guard", "solver_flags",
           "tier_parts", "unsolved"]


def map2_report(tier: TierModel, model: SystemModel, i: int,
                bursty_scv: str) -> dict[str, Any] | None:
    """The tier's MAP(2) fit as the model uses it: where its SCV (or, ``response_idc``, its
    ``I``) was calibrated to the measured response time (:mod:`streams.predict.calibration`),
    that process, with the tie rule's SCV (the estimated ``I``) beside it."""
    scv = model.scv_targets.get(tier.tier)
    if tier.fit is None or scv is None or model.processes is None:
        return tier.fit
    process = model.processes[i]
    report = {**tier.fit, "process": process.to_dict(), "scv": scv,
              "acf1": float(process.acf(1))}
    if bursty_scv == "response_idc":
        report.update(idc=float(process.idc), idc_estimated=tier.fit.get("idc"),
                      idc_from="response_time")
    else:
        report.update(scv_tie_rule=tier.fit.get("scv"), scv_from="response_time")
    return report


def solver_flags(model: SystemModel, base: SystemModel) -> list[str]:
    """The prediction's caveats: the model's own, which solver answered at which populations
    on the MAP network, and -- where the alert stands on the provisional model ``base`` --
    that one's solver caveats."""
    flags = list(model.flags)
    if model.processes is not None:
        solved = model.solved().items()
        used_mva = sorted(n for n, p in solved if p.model == "mva")
        if used_mva:
            flags.append(f"MAP network limited to map_max_population={model.map_limit}: "
                         f"MVA used at populations >= {used_mva[0]}")
        fes = sorted(n for n, p in solved if p.model == "map-fes")
        if fes and model.exact_applies:
            flags.append(f"MAP network solved by decomposition (flow-equivalent server) at "
                         f"populations >= {fes[0]}; exact chain below")
        elif fes:
            flags.append("MAP network solved by decomposition (flow-equivalent server): a "
                         "bursty tier has several cores")
        fpm = sorted(n for n, p in solved if p.model == "map-fpm")
        if fpm:
            flags.append(f"MAP network solved through the open route (fixed-population mean, "
                         f"Whitt 1984) at populations >= {fpm[0]}: thousands of users, an "
                         f"open network at the rate whose mean population is N")
    if base is not model:
        flags += [f"provisional model: {f}" for f in base.flags
                  if f.startswith(SOLVER_FLAG) and f not in flags]
    return flags


def assumed_workload(source: str, users: int, think: float, think_assumed: bool,
                     throughput: float) -> list[str]:
    """The flags of the workload the model assumed for what the windows do not give: the
    population when there is no ``users`` -- by Little's law, ``N = X (R + Z)``, from the
    measured throughput and response times, or without response times the population at which
    the model's throughput equals the measured one (``model_inversion``: a model that reaches
    that throughput with fewer users predicts a lower capacity) -- and a think time of 0 when
    none is configured and none can be estimated (Little's law, ``Z = N / X - R``, needs
    ``users`` and response times; Lazowska et al. (1984), ch. 3)."""
    flags = []
    if source == "littles_law":
        flags.append(f"{ASSUMED}{_users(users)} (users_source littles_law): the windows give no "
                     f"users, so N = X (R + Z) from the measured throughput and response "
                     f"times with think time {think:.3g} s")
    elif source == "model_inversion":
        flags.append(f"{ASSUMED}{_users(users)} (users_source model_inversion): the windows give "
                     f"no users and no response times, so the population at which the model's "
                     f"throughput is the measured {throughput:.3g}/s")
    if think_assumed:
        flags.append(f"{ASSUMED}think time 0 s: think_time_s is not configured and cannot be "
                     f"estimated by Little's law without users and response times (set "
                     f"think_time_s)")
    return flags


def _users(n: int) -> str:
    return f"{n} user" + ("" if n == 1 else "s")


def breach_point(model: SystemModel, cap: int | None, limited: bool
                 ) -> tuple[Point | None, str | None, str | None]:
    """The first population probed beyond capacity (``None``: no capacity), the class that
    breaks first there (largest response time over SLA among the classes in the mix) and the
    tier holding most of its response time -- or the pool, by its name, whose wait for a
    token holds most (:func:`streams.predict.pool_naming.breach_name`)."""
    if cap is None or limited:
        return None, None, None
    beyond = [p for n, p in model.solved().items() if n > cap and model.excess(p) > 0]
    breach = min(beyond, key=lambda p: p.n) if beyond else model.at(cap + 1)
    c = int(np.argmax(model.class_excess(breach)))
    return breach, model.classes[c], breach_name(model, breach, c)


def class_parts(model: SystemModel, m: Measured, now: Point, fc: Point,
                errors: Mapping[str, float | None],
                pooled: Mapping[str, Mapping[str, Any]],
                quantiles: bool = False) -> dict[str, ClassPrediction]:
    """Per class: the model's throughput and response time now and at the forecast, its
    response-time quantiles there (:meth:`SystemModel.quantiles`, keys ``p50`` ... as
    :data:`~streams.core.config.SLO_QUANTILES`; with ``quantiles`` or a quantile SLO), the
    measured ones, the SLA and the statistic
    the class's SLO is on at the forecast (:meth:`SystemModel.slo_statistic`) with its bound
    and the model's value of it now and at the forecast
    (:func:`~streams.predict.slo_view.slo_values`);
    this solve's error (``errors``:
    :func:`streams.predict.confidence.class_errors`) and the pooled one (``pooled``,
    :func:`streams.predict.confidence.pooled_errors`, for the classes it has)."""
    parts = {}
    x_now, x_fc = float(now.throughput), float(fc.throughput)
    names = {v: k for k, v in SLO_QUANTILES.items()}
    keys = [names[q] for q in model.quantile_levels]
    with_quantiles = quantiles or model.has_quantile_slo
    fields: list[dict[str, Any]] = [{} for _ in model.classes]
    if with_quantiles:
        # each point's quantiles as JSON-safe floats in one pass (not re-cleaned below)
        for name, q in zip(("response_time_quantiles_s", "response_time_quantiles_forecast_s"),
                           model.quantiles_many([now, fc])):
            rows = q.tolist() if np.isfinite(q).all() else clean(q.tolist())
            for i, row in enumerate(rows):
                fields[i][name] = dict(zip(keys, row))
    statistic = model.slo_statistic(fc)
    names_fc = [s for s, _ in statistic]
    value_now, value_fc = (slo_values(model, point, names_fc) for point in (now, fc))
    for i, (c, p, r_now, r_fc, sla) in enumerate(zip(
            model.classes, model.mix.tolist(), now.response.tolist(), fc.response.tolist(),
            model.sla.tolist())):
        extra: dict[str, Any] = {"slo_statistic": statistic[i][0],
                                 "slo_bound_s": statistic[i][1],
                                 "response_time_slo_s": value_now[i],
                                 "response_time_slo_forecast_s": value_fc[i]}
        if c in pooled:
            extra.update(response_time_error_pooled=pooled[c]["error"],
                         response_time_error_se=pooled[c]["se"])
        parts[c] = ClassPrediction(**clean(dict(
            throughput=p * x_now, response_time=r_now, throughput_forecast=p * x_fc,
            response_time_forecast=r_fc, throughput_measured=m.throughput.get(c),
            response_time_measured=m.response_time.get(c), sla_s=sla,
            response_time_error=errors[c], **extra)), **fields[i])
    return parts


def _visits(model: SystemModel, m: int) -> dict[str, dict[str, float]]:
    """Per class, tier ``m``'s visits the model used and the ones its completions give
    (absent where the class is not the model's or the counts cannot tell)."""
    out: dict[str, dict[str, float]] = {}
    if model.visits is not None:
        for c, v in zip(model.classes, model.visits[m].tolist()):
            out.setdefault(c, {"visits": float(v)})  # the first of a name, as list.index
    for c, measured in model.visits_measured.get(model.tiers[m], {}).items():
        if measured is not None:
            out[c] = {**out.get(c, {}), "visits_measured": float(measured)}
    return out


def delay_parts(model: SystemModel, tier: TierModel, i: int) -> dict[str, dict[str, Any]]:
    """Per class at tier ``i``: the pure delay the model used (s per request) and whether the
    latency fit identified it (:mod:`streams.predict.latency`); empty without delays."""
    if model.delays is None:
        return {}
    fit = tier.latency
    ok = dict(zip(fit.classes, fit.identified.tolist())) if fit is not None else {}
    return {c: {"delay": float(model.delays[i, j]), "delay_identified": bool(ok.get(c, False))}
            for j, c in enumerate(model.classes)}


def tier_parts(model: SystemModel, m: Measured, now: Point, fc: Point,
               tiers: list[TierModel], bottleneck: list[float | None],
               errors: Mapping[str, float | None],
               bursty_scv: str) -> dict[str, TierPrediction]:
    """Per tier: the model's utilization now and at the forecast, the measured one, the
    demand, the burstiness and its MAP(2) (:func:`map2_report`), whose demands the model
    used, its bottleneck probability and both estimators' demands per class; this solve's
    utilization error (``errors``: :func:`streams.predict.confidence.tier_errors`)."""
    parts = {}
    for i, (t, u_now, u_fc, D, b) in enumerate(zip(tiers, now.utilization.tolist(),
                                                   fc.utilization.tolist(), model.D.tolist(),
                                                   bottleneck)):
        visits = _visits(model, i)
        delays = delay_parts(model, t, i)
        demands = {c: ClassDemand(**clean({"kalman": t.demands.get(c),
                                           "std": t.demand_std.get(c),
                                           "regression": t.regression.get(c),
                                           **({"split": t.split[c]} if c in t.split else {})}),
                                  **visits.get(c, {}), **delays.get(c, {}))
                   for c in t.demands}
        parts[t.tier] = TierPrediction(demands=demands, **clean(dict(
            utilization=u_now, utilization_forecast=u_fc,
            utilization_measured=m.utilization.get(t.tier), demand_s=D, idc=t.idc,
            idc_flag=t.idc_flag, idc_lower=t.idc_lower, idc_upper=t.idc_upper,
            idc_reference=t.idc_reference, bursty=t.bursty,
            map2=map2_report(t, model, i, bursty_scv), estimator=t.estimator,
            bottleneck_probability=b, utilization_error=errors[t.tier],
            **({"split_discipline": t.split_discipline + ("" if t.split_decided
                                                          else " (undecided)")}
               if t.split_discipline else {}))))
    return parts


def held_flags(flags: list[str], held: int) -> list[str]:
    """``flags`` with the count of windows dead-lettered as implausible since the last solve
    (the model did not see them)."""
    if not held:
        return flags
    return flags + [f"{held} window{'s' if held > 1 else ''} dead-lettered as implausible "
                    f"since the last solve (plausibility rules, docs/pipeline.md)"]


def record_guard(pred: Prediction, reasons: list[str],
                  trend: TrendReading | None, trigger: str | None) -> None:
    """The trend guard's reading in the prediction: ``alert_untrusted`` (why the model is
    not trusted), the trend's ``trend_*`` fields (only while it is not) and
    ``alert_trigger`` (``model``, ``trend``, ``model+trend``; ``None``: no breach
    predicted)."""
    pred.alert_untrusted = list(reasons)
    if trend is not None:
        pred.trend_condition = clean(trend.condition)
        pred.trend_class = trend.breach_class
        pred.trend_time_to_breach_s = clean(trend.time_to_breach_s)
        pred.trend_response_time = clean(trend.level_s)
        pred.trend_slope = clean(trend.slope)
    pred.alert_trigger = trigger


def unsolved(system: str, time: float, solve: int, think: float, horizon: float, held: int,
             model: str | None, flags: list[str]) -> Prediction:
    """The prediction of a solve without figures: ``model`` ``None`` (not enough data) or
    the model's kind (the population unknown), ``flags`` saying why."""
    return Prediction(**clean(dict(system=system, time=time, solve=solve, think_time_s=think,
                                   horizon_s=horizon, model=model,
                                   flags=held_flags(flags, held))))


def assemble(*, system: str, time: float, solve: int, think: float, horizon: float,
             held: int, model: SystemModel, now: Point, fc: Point, m: Measured, n_now: int,
             source: str, slope: float, n_fc: int, flags: list[str], cap: int | None,
             limited: bool, ttb: float | None, breach_class: str | None,
             breach_tier: str | None, bottleneck: np.ndarray | None,
             error: float | None, x_error: float | None,
             classes: dict[str, ClassPrediction], tiers: dict[str, TierPrediction],
             remediation: dict[str, Any] | None, alert: Mapping[str, Any],
             assessment: Mapping[str, Any]) -> Prediction:
    """The prediction of a solved model: the population now and at the forecast, the
    model's figures there, capacity and time to breach (``bottleneck``: the ``B_m`` at the
    breach point, ``None`` under MVA), the parts, the remediation, the
    alert's capacity (``alert``: ``alert_capacity_users``, ``alert_time_to_breach_s``,
    ``alert_basis``, ``alert_window_factors``) and the trust and story fields
    (``assessment``). The alert step adds its trend guard's reading and ``model_trusted``."""
    return Prediction(**clean(dict(
        system=system, time=time, solve=solve, think_time_s=think, horizon_s=horizon,
        model=now.model, flags=held_flags(flags, held),
        users=n_now, users_source=source, users_trend_per_s=slope, users_forecast=n_fc,
        throughput=now.throughput, response_time=float(model.mix @ now.response),
        throughput_measured=m.total_throughput,
        capacity_users=cap, capacity_limited=limited,
        headroom_users=None if cap is None else cap - n_now,
        time_to_breach_s=ttb, breach_class=breach_class, breach_tier=breach_tier,
        bottleneck_tier=bottleneck_name(model, fc),
        bottleneck_switch_probability=0.0 if bottleneck is None
        else float(1.0 - bottleneck.max()),
        model_error=error, throughput_error=x_error,
        classes=classes, tiers=tiers, remediation=remediation, **alert, **assessment)))


def pool_parts(model: SystemModel, cfg: SystemConfig, now: Point, fc: Point,
               checks: Mapping[str, Any] | None = None) -> dict[str, PoolPrediction]:
    """Per modelled pool (:attr:`SystemModel.pools`): its configuration, the model's
    utilization (tokens held over size) and wait for a token per request, now and at the
    forecast, and each class's share of its response time spent waiting for a token there
    (the wait is the same for every class, FCFS on the token; a class with the shorter
    response time waits the larger share of it) (empty: no pools); where ``checks``
    (:func:`streams.predict.pool_check.pool_checks`) has the pool, its measured utilization
    and the difference."""
    out = {}
    for k, spec in enumerate(model.pools):
        pool = cfg.pools[spec.name]
        out[spec.name] = PoolPrediction(
            tier=pool.tier, size=int(pool.size), holds=list(pool.holds),
            utilization=_pool_figure(now.pool_utilization, k),
            utilization_forecast=_pool_figure(fc.pool_utilization, k),
            waiting_time_s=_pool_figure(now.pool_waiting, k),
            waiting_time_forecast_s=_pool_figure(fc.pool_waiting, k),
            waiting_share=_waiting_share(model, now, k),
            waiting_share_forecast=_waiting_share(model, fc, k))
        check = (checks or {}).get(spec.name)
        if check is not None:
            out[spec.name].utilization_measured = check.measured
            out[spec.name].utilization_error = check.error
    return out


def _pool_figure(values: np.ndarray | None, k: int) -> float | None:
    return None if values is None or not np.isfinite(values[k]) else float(values[k])


def _waiting_share(model: SystemModel, point: Point, k: int) -> dict[str, float]:
    """Per class with a positive response time at ``point``: pool ``k``'s wait over it."""
    wait = _pool_figure(point.pool_waiting, k)
    if wait is None:
        return {}
    return {c: wait / float(r) for c, r in zip(model.classes, point.response.tolist())
            if math.isfinite(r) and r > 0}


def pool_flags(model: SystemModel, users: int) -> list[str]:
    """A flag per modelled pool of at least ``users`` tokens (the larger of the current and
    the forecast users): it cannot bind. Not a configuration error: the population is
    measured, not configured, and a pool sized for the peak is normal between peaks."""
    return [f"{POOL_FLAG}{p.name} has {p.size} tokens, at least the {users} users at the "
            f"forecast: it cannot bind (the pool model reduces to the network without it)"
            for p in model.pools if p.size >= users]
