"""The alerts' prose: the ``summary`` of a ``predicted_breach`` (the model's, or a TREND ALERT
the measured response-time trend fired alone) and of a ``model_error`` event, and the trend
guard's line in a breach alert's ``basis``. Read off the solve's typed prediction."""

from __future__ import annotations

import math

from streams.alerts.conditions import ERROR_RESOLVE_FACTOR
from streams.core.config import SystemConfig
from streams.core.outputs import Prediction

__all__ = ["basis_text", "breach_summary", "load_text", "model_error_hint",
           "model_error_summary", "slo_phrase", "slo_statistic",
           "remedy_text", "trend_basis", "trend_line"]


def load_text(pred: Prediction) -> str:
    """``users 80 -> capacity 95`` (closed), or ``rate 412.0/s -> capacity 468.3/s`` (an open
    workload's requests per second)."""
    if isinstance(pred.arrival_rate_per_s, float):
        cap = pred.capacity_rate_per_s
        return (f"rate {pred.arrival_rate_per_s:.1f}/s -> capacity "
                + (f"{cap:.1f}/s" if isinstance(cap, float) else "unknown"))
    return f"users {pred.users} -> capacity {pred.alert_capacity_users}"


def remedy_text(pred: Prediction) -> str:
    """``; remedy: add 1 replica of db: capacity 337 → 610 users`` -- the remedy
    :func:`streams.predict.story.remedy_story` picked, with its reason when it does not act on
    the breach tier; empty without a remediation."""
    summary, why = pred.remediation_summary, pred.remediation_reason
    if not summary:
        return ""
    return f"; remedy: {summary}" + (f" ({why})" if why else "")


def basis_text(pred: Prediction) -> str:
    """Why the alert's capacity is below the long-run one (``alert_basis``), if it is."""
    if not pred.alert_basis:
        return ""
    return (f"; long-run capacity {pred.capacity_users}, alert on "
            + "; ".join(pred.alert_basis))


def trend_basis(pred: Prediction) -> list[str]:
    """The trend guard's line in the alert's ``basis`` when it fired the alert."""
    if pred.alert_trigger not in ("trend", "model+trend"):
        return []
    return ["trend: " + trend_line(pred, pred.trend_class, "SLA", pred.trend_time_to_breach_s)
            + " (the model alone cannot decide: " + "; ".join(pred.alert_untrusted) + ")"]


def trend_line(pred: Prediction, breach_class: str | None, sla: str, ttb: float | None) -> str:
    """``class 'buy' measured 84 ms, rising at least +3.1 ms/min, reaches its <sla> in about 5
    min``: the trend guard's line (its slope less its noise), in the alert's basis and in a
    ``TREND ALERT``'s summary."""
    return (f"class {breach_class!r} measured {1000 * pred.trend_response_time:.0f} ms, "
            f"rising at least {1000 * 60 * pred.trend_slope:+.1f} ms/min, reaches its {sla} "
            f"in about {(ttb or 0) / 60:.0f} min")


def slo_phrase(pred: Prediction, cfg: SystemConfig, cls: str | None) -> tuple[str, str]:
    """What class ``cls`` is held to, for the breach alert's text: its ``slo_statistic``
    at the forecast -- ``("p95 SLO of 0.3 s", "the mean its p95 SLO of 0.3 s allows")`` for
    a quantile (the trend guard reads measured means against that mean) -- or its mean SLA
    (``"0.5 s SLA"`` twice)."""
    part = (pred.classes or {}).get(str(cls))
    stat = slo_statistic(pred, cls)
    bound = None if part is None else part.slo_bound_s
    if stat is not None and stat != "mean" and isinstance(bound, float):
        name = f"{stat} SLO of {bound:g} s"
        return name, f"the mean its {name} allows"
    sla = f"{cfg.sla_for(str(cls)):g} s SLA"
    return sla, sla


def slo_statistic(pred: Prediction, cls: str | None) -> str | None:
    """The statistic class ``cls``'s SLO is on at this solve (``slo_statistic``; ``None``:
    unknown), the ``statistic`` of its breach alerts."""
    part = (pred.classes or {}).get(str(cls))
    stat = None if part is None else part.slo_statistic
    return stat if isinstance(stat, str) else None


def breach_summary(system: str, pred: Prediction, cfg: SystemConfig, ttb: float | None,
                   breach_class: str | None, withheld: str | None = None) -> str:
    """The ``predicted_breach`` event's text: the model's prediction, or -- fired by the
    measured response-time trend alone (``alert_trigger`` ``trend``) -- a ``TREND ALERT``
    that says it is not the model's and why the model is not trusted. ``withheld``: why the
    remedy is not quoted (it rests on a class split that is not identified)."""
    remedy = f"; remedy withheld: {withheld}" if withheld and pred.remediation_summary \
        else "" if withheld else remedy_text(pred)
    slo, mean_bound = slo_phrase(pred, cfg, breach_class)
    if pred.alert_trigger == "trend":
        return (f"{system}: TREND ALERT (the measured response-time trend, not the model: "
                + "; ".join(pred.alert_untrusted) + "): "
                + trend_line(pred, breach_class, mean_bound, ttb)
                + f" (the {pred.model} model: {load_text(pred)})" + remedy)
    text = (f"{system}: class {breach_class!r} is predicted to exceed "
            f"its {slo} in about "
            f"{(ttb or 0) / 60:.0f} min ({load_text(pred)}, bottleneck tier "
            f"{pred.breach_tier!r})" + basis_text(pred))
    if pred.alert_trigger == "model+trend":
        text += "; the measured response-time trend agrees"
    return text + remedy


def model_error_hint(pred: Prediction) -> str:
    """What a ``model_error`` alert suggests: the tiers whose burstiness is not measured yet,
    else the configuration."""
    unmeasured = [t for t, v in pred.tiers.items()
                  if v.idc_flag in ("too_short", "uncertain", "unresolved")]
    return (f"the burstiness of {', '.join(map(repr, unmeasured))} is not measured yet "
            "(too few windows, or its confidence interval still straddles idc_threshold), so "
            "the model may miss it" if unmeasured else
            "check the configuration (tiers, visits, think time)")


def _error_scope(pred: Prediction, err: float | None) -> str:
    """Whose error the headline ``err`` is: the worst class's (`` for class 'buy', the worst
    (all classes together: 4%)``) or all classes' together (the worst class's beside it), so
    a class far off while the mix is close reads as that, not as two errors of one thing."""
    worst = pred.model_error_class if isinstance(pred.model_error_class, str) else None
    cmax, agg = (v if isinstance(v, (int, float)) else None
                 for v in (pred.model_error_class_max, pred.model_error_pooled))
    if not worst or cmax is None:
        return ""
    if err is not None and math.isclose(err, cmax):
        if len(pred.classes or ()) == 1:
            return f" for class {worst!r}"
        return f" for class {worst!r}, the worst" + (
            "" if agg is None else f" (all classes together: {100 * agg:.0f}%)")
    return f" over all classes together (the worst class, {worst!r}: {100 * cmax:.0f}%)"


def _error_pool(pred: Prediction, err: float | None) -> str | None:
    """The pool whose pooled utilization error is the headline ``err`` (``None``: the
    response time's is)."""
    pool, value = pred.get("pool_error_pooled_pool"), pred.get("pool_error_pooled")
    if not isinstance(pool, str) or not isinstance(value, (int, float)) or err is None:
        return None
    return pool if math.isclose(err, value) else None


def model_error_summary(system: str, pred: Prediction, err: float | None, thr: float,
                        firing: bool) -> str:
    """The ``model_error`` event's text: when it fires, how far off and why, and not to trust
    the predictions; when it resolves, that they can be trusted again. Where a pool's
    utilization is the error watched (:func:`streams.alerts.conditions.alert_error`), the
    text names the pool and its configuration."""
    pool = _error_pool(pred, err)
    if pool is not None:
        return _pool_error_summary(system, pred, pool, err or 0.0, thr, firing)
    which = _error_scope(pred, err)
    which += (f" over the last {pred.model_error_solves} solves"
              if pred.model_error_solves else "")
    if not firing:
        return (f"{system}: the {pred.model} model's response time is back within "
                f"{100 * ERROR_RESOLVE_FACTOR * thr:.0f}% of the measured one "
                f"({100 * (err or 0):.0f}%{which}): its predictions can be trusted again")
    return (f"{system}: the {pred.model} model's response time is off the measured one by "
            f"{100 * (err or 0):.0f}%{which} (threshold {100 * thr:.0f}%): "
            f"{model_error_hint(pred)}; do not trust its predictions yet")


def _pool_error_summary(system: str, pred: Prediction, pool: str, err: float, thr: float,
                        firing: bool) -> str:
    """:func:`model_error_summary` where pool ``pool``'s utilization is the error watched."""
    part = (pred.pools or {}).get(pool)
    now = ""
    if part is not None and isinstance(part.utilization, float) \
            and isinstance(part.utilization_measured, float):
        now = (f"; now {100 * part.utilization:.0f}% modelled against "
               f"{100 * part.utilization_measured:.0f}% measured")
    if not firing:
        return (f"{system}: the {pred.model} model's utilization of pool {pool!r} is back "
                f"within {100 * ERROR_RESOLVE_FACTOR * thr:.0f}% of the measured one "
                f"({100 * err:.0f}% over the last solves): its predictions can be trusted "
                f"again")
    return (f"{system}: the {pred.model} model's utilization of pool {pool!r} (tokens held "
            f"over size) is off the measured one by {100 * err:.0f}% over the last solves "
            f"(threshold {100 * thr:.0f}%{now}): check the pool's size and the tiers it "
            f"holds in [systems.{system}.pools.{pool}] -- the model holds a token for the "
            f"residence at those tiers, so its capacity where the pool binds is off too; do "
            f"not trust its predictions yet")
