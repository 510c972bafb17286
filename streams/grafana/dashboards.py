"""The two dashboards, as Grafana dashboard JSON built in Python.

Plain JSON, not grafanalib: grafanalib's last release (0.7.1) is of January 2024 and trails
Grafana's dashboard schema, and what these panels need (Flux targets, field overrides by
regex, panel repeat, value mappings) would be raw dictionaries inside its classes anyway.
Plain dictionaries are exactly what Grafana stores, what its HTTP API takes and what the
tests validate, with no translation layer to keep in step with Grafana; the helpers below
keep them short.

* ``perfcast-overview`` -- every system at a glance: headroom, time to breach, active alerts,
  burstiness per tier.
* ``perfcast-system`` -- one system (variable ``system``): measured vs predicted throughput,
  response time and utilization, index of dispersion against the threshold that switches
  the model, service demands with their uncertainty, bottleneck switch, capacity against the
  current users, model error, the alert history.

The queries come from :mod:`streams.grafana.flux`; panel descriptions say what a panel shows
and where its numbers come from (``docs/grafana.md`` repeats them).
"""

from __future__ import annotations

from typing import Any, Sequence

from streams.core.config import SystemConfig
from streams.grafana import flux

__all__ = ["DATASOURCE_UID", "DATASOURCE", "OVERVIEW_UID", "SYSTEM_UID", "dashboards",
           "panel_by_title"]

DATASOURCE_UID = "perfcast-influxdb"
DATASOURCE = {"type": "influxdb", "uid": DATASOURCE_UID}
OVERVIEW_UID = "perfcast-overview"
SYSTEM_UID = "perfcast-system"
#: dashboard JSON schema version written (Grafana 10.4 / 11)
SCHEMA_VERSION = 39
#: the display name of a series built by :func:`flux.series`
SERIES_NAME = "${__field.labels.series}"
SYSTEM = {"system": "${system}"}

Panel = dict[str, Any]


# -- panel helpers ------------------------------------------------------------------------------
def _targets(queries: Sequence[str]) -> list[dict[str, Any]]:
    return [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "query": q}
            for i, q in enumerate(queries)]


def _thresholds(steps: Sequence[tuple[float | None, str]]) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for v, c in steps]}


def _override(regex: str, **props: Any) -> dict[str, Any]:
    return {"matcher": {"id": "byRegexp", "options": regex},
            "properties": [{"id": k.replace("__", "."), "value": v} for k, v in props.items()]}


_DASHED = {"fill": "dash", "dash": [10, 10]}


def timeseries(title: str, description: str, queries: Sequence[str], unit: str, *,
               minimum: float | None = None, maximum: float | None = None,
               log: bool = False, threshold: float | None = None,
               overrides: Sequence[dict[str, Any]] = ()) -> Panel:
    """A time series panel; ``threshold`` draws a red line at that value."""
    custom: dict[str, Any] = {"drawStyle": "line", "lineWidth": 2, "fillOpacity": 0,
                              "showPoints": "never", "spanNulls": False,
                              "thresholdsStyle": {"mode": "off"}}
    defaults: dict[str, Any] = {"unit": unit, "displayName": SERIES_NAME, "custom": custom,
                                "thresholds": _thresholds([(None, "transparent")])}
    if log:
        custom["scaleDistribution"] = {"type": "log", "log": 10}
    if threshold is not None:
        custom["thresholdsStyle"] = {"mode": "line"}
        defaults["thresholds"] = _thresholds([(None, "transparent"), (threshold, "red")])
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    return {"type": "timeseries", "title": title, "description": description,
            "datasource": DATASOURCE, "targets": _targets(queries),
            "fieldConfig": {"defaults": defaults, "overrides": list(overrides)},
            "options": {"legend": {"displayMode": "table", "placement": "right",
                                   "calcs": ["lastNotNull"], "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "none"}}}


def _reduce_panel(kind: str, title: str, description: str, query: str, unit: str,
                  display: str, thresholds: Sequence[tuple[float | None, str]],
                  mappings: Sequence[dict[str, Any]] = (), fields: str = "",
                  decimals: int | None = None) -> Panel:
    defaults: dict[str, Any] = {"unit": unit, "displayName": display,
                                "thresholds": _thresholds(thresholds),
                                "mappings": list(mappings), "color": {"mode": "thresholds"}}
    if decimals is not None:
        defaults["decimals"] = decimals
    options: dict[str, Any] = {"reduceOptions": {"calcs": ["last"], "fields": fields,
                                                 "values": False},
                               "orientation": "horizontal"}
    if kind == "stat":
        options.update(colorMode="value", graphMode="none", textMode="value",
                       justifyMode="auto")
    else:
        options.update(displayMode="gradient", showUnfilled=True, valueMode="color")
    return {"type": kind, "title": title, "description": description,
            "datasource": DATASOURCE, "targets": _targets([query]),
            "fieldConfig": {"defaults": defaults, "overrides": []}, "options": options}


def stat(title: str, description: str, query: str, unit: str, *,
         thresholds: Sequence[tuple[float | None, str]] = ((None, "text"),),
         mappings: Sequence[dict[str, Any]] = (), fields: str = "",
         decimals: int | None = None) -> Panel:
    """A single value: the last value of the query's numeric field (or of ``fields``)."""
    return _reduce_panel("stat", title, description, query, unit, "${__field.name}",
                         thresholds, mappings, fields, decimals)


def bargauge(title: str, description: str, query: str, unit: str,
             thresholds: Sequence[tuple[float | None, str]],
             mappings: Sequence[dict[str, Any]] = ()) -> Panel:
    """One bar per system (the ``system`` label of each frame)."""
    return _reduce_panel("bargauge", title, description, query, unit,
                         "${__field.labels.system}", thresholds, mappings)


def table(title: str, description: str, queries: Sequence[str], *,
          rename: dict[str, str] | None = None, units: dict[str, str] | None = None,
          time_from: str | None = None) -> Panel:
    """A table of the queries' rows (several queries merged into one table)."""
    overrides = [{"matcher": {"id": "byName", "options": column},
                  "properties": [{"id": "unit", "value": unit}]}
                 for column, unit in (units or {}).items()]
    transformations: list[dict[str, Any]] = []
    if len(queries) > 1:
        transformations.append({"id": "merge", "options": {}})
    if rename:
        transformations.append({"id": "organize", "options": {"renameByName": rename}})
    panel: Panel = {"type": "table", "title": title, "description": description,
                    "datasource": DATASOURCE, "targets": _targets(queries),
                    "fieldConfig": {"defaults": {"custom": {"align": "auto"}},
                                    "overrides": overrides},
                    "options": {"showHeader": True, "cellHeight": "sm"},
                    "transformations": transformations}
    if time_from:
        panel["timeFrom"] = time_from
    return panel


def _null_means(text: str) -> dict[str, Any]:
    return {"type": "special", "options": {"match": "null", "result": {"text": text}}}


def _zero_means(text: str, color: str) -> dict[str, Any]:
    return {"type": "value", "options": {"0": {"text": text, "color": color}}}


def _layout(rows: Sequence[Sequence[tuple[Panel, int, int]]]) -> list[Panel]:
    """Panels left to right, rows top to bottom: ``(panel, width, height)``; ids from 1."""
    panels, y, pid = [], 0, 1
    for row in rows:
        x = 0
        for panel, w, h in row:
            panels.append({"id": pid, "gridPos": {"x": x, "y": y, "w": w, "h": h}, **panel})
            x, pid = x + w, pid + 1
        y += max(h for _, _, h in row)
    return panels


def _query_variable(name: str, label: str, query: str, *, multi: bool = False) -> dict:
    return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
            "query": query, "definition": query, "refresh": 2, "sort": 1,
            "multi": multi, "includeAll": multi, "current": {}, "options": [], "hide": 0}


def _dashboard(uid: str, title: str, description: str, panels: list[Panel],
               variables: Sequence[dict[str, Any]] = (),
               links: Sequence[dict[str, Any]] = (),
               annotations: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    return {"uid": uid, "title": title, "description": description,
            "tags": ["perfcast"], "timezone": "utc", "editable": False,
            "graphTooltip": 1, "refresh": "1m", "schemaVersion": SCHEMA_VERSION,
            "time": {"from": "now-6h", "to": "now"},
            "templating": {"list": list(variables)},
            "annotations": {"list": list(annotations)}, "links": list(links),
            "panels": panels}


def annotation(name: str, query: str, color: str) -> dict[str, Any]:
    """A dashboard annotation from a Flux query returning ``_time``, ``title`` and ``text``
    (:func:`flux.events`): a vertical line on every time series panel."""
    return {"name": name, "datasource": DATASOURCE, "enable": True, "hide": False,
            "iconColor": color, "target": {"refId": "Anno", "query": query},
            "mappings": {"title": {"source": "field", "value": "title"},
                         "text": {"source": "field", "value": "text"}}}


# -- the overview -------------------------------------------------------------------------------
_BY_SYSTEM = "r.system"
_IDENTITY = {"predicted_breach": ["system"], "current_breach": ["system", "class"],
             "model_error": ["system"]}


def overview() -> dict[str, Any]:
    """All systems: headroom, time to breach, active alerts, bursty tiers."""
    headroom = bargauge(
        "Headroom (users below capacity)",
        "Per system, at its last solve: the largest population that meets every class's SLA "
        "(capacity) minus the current users. Negative: the system holds more users than it "
        "can serve within its SLA.",
        flux.latest("prediction", ["headroom_users"], ["system"], anchor="horizon_s"), "none",
        [(None, "red"), (0, "orange"), (20, "green")])
    ttb = bargauge(
        "Time to SLA breach",
        "Per system, at its last solve: when the users trend reaches capacity + 1 (the "
        "predicted SLA breach). 'now': the model says the SLA is broken at the current load; "
        "'no breach ahead': the trend never reaches capacity.",
        flux.latest("prediction", ["time_to_breach_s"], ["system"], anchor="horizon_s"), "s",
        [(None, "red"), (1, "orange"), (3600, "green")],
        [_null_means("no breach ahead"), _zero_means("now", "red")])
    alerts = table(
        "Active alerts",
        "perfcast's alerts that are firing now (their last state change was 'firing'), over "
        "the last 30 days: the predicted breach, current breaches per class, model error. "
        "'since' is when the alert started firing.",
        [flux.active_alerts(kind, identity) for kind, identity in _IDENTITY.items()],
        rename={"_time": "since"}, time_from="30d")
    bursty = table(
        "Burstiness per tier (bursty tiers first)",
        "Per system and tier, at the last solve: the index of dispersion I of the tier's "
        "service (Mi et al. 2008, Fig. 2) and whether it is above the bursty threshold, which "
        "switches the model from MVA to the MAP queueing network with the tier's MAP(2).",
        [flux.latest("tier_prediction", ["idc", "bursty"], ["system", "tier"],
                     anchor="utilization", table=True)
         + '\n  |> sort(columns: ["idc"], desc: true)'],
        rename={"_time": "solved at", "idc": "index of dispersion I"})
    glance = table(
        "Systems at a glance",
        "Per system, at its last solve: users, capacity, headroom, time to breach, the model "
        "solved (mva or map), the bottleneck tier at the forecast, the probability that the "
        "bottleneck switches between tiers, and the model error.",
        [flux.latest("prediction", ["users", "capacity_users", "headroom_users",
                                    "time_to_breach_s", "model", "bottleneck_tier",
                                    "bottleneck_switch_probability", "model_error"],
                     ["system"], anchor="horizon_s", table=True)],
        rename={"_time": "solved at"},
        units={"time_to_breach_s": "s", "bottleneck_switch_probability": "percentunit",
               "model_error": "percentunit"})
    headroom_ts = timeseries(
        "Headroom over time", "Capacity minus current users, per system, at every solve.",
        [flux.series("prediction", "headroom_users", _BY_SYSTEM, fn="last")], "none")
    ttb_ts = timeseries(
        "Time to breach over time",
        "Predicted time to SLA breach per system at every solve (gaps: no breach ahead).",
        [flux.series("prediction", "time_to_breach_s", _BY_SYSTEM, fn="last")], "s",
        minimum=0)
    panels = _layout([[(headroom, 12, 8), (ttb, 12, 8)],
                      [(alerts, 24, 8)],
                      [(bursty, 10, 8), (glance, 14, 8)],
                      [(headroom_ts, 12, 8), (ttb_ts, 12, 8)]])
    return _dashboard(OVERVIEW_UID, "perfcast: all systems",
                      "Every system perfcast models: headroom, time to breach, alerts, "
                      "burstiness.", panels,
                      links=[_link("per-system dashboard", SYSTEM_UID)])


def _link(title: str, uid: str) -> dict[str, Any]:
    return {"title": title, "type": "link", "url": f"/d/{uid}", "includeVars": True,
            "keepTime": True, "tooltip": "", "icon": "dashboard", "targetBlank": False,
            "asDropdown": False, "tags": []}


# -- one system ---------------------------------------------------------------------------------
_CLASS = 'r["class"]'
_TIER = 'r["tier"]'
_POOL = 'r["pool"]'


def _name(expr: str, suffix: str) -> str:
    return f'{expr} + "{suffix}"'


def _stat_now(title: str, description: str, field: str, unit: str, **kw: Any) -> Panel:
    return stat(title, description,
                flux.latest("prediction", [field], ["system"], anchor="horizon_s",
                            where=SYSTEM), unit, **kw)


def system(defaults: SystemConfig = SystemConfig()) -> dict[str, Any]:
    """One system, chosen by the ``system`` variable. ``defaults`` gives the thresholds drawn
    (``idc_threshold``, ``model_error_threshold``)."""
    users = _stat_now("Users now", "Current population (measured users, or Little's law, or "
                      "the model's inversion; see users_source).", "users", "none")
    capacity = _stat_now("Capacity (users within SLA)",
                         "Largest population at which every class meets its SLA.",
                         "capacity_users", "none")
    headroom = _stat_now("Headroom", "Capacity minus users now.", "headroom_users", "none",
                         thresholds=[(None, "red"), (0, "orange"), (20, "green")])
    ttb = _stat_now("Time to breach", "When the users trend reaches capacity + 1.",
                    "time_to_breach_s", "s",
                    thresholds=[(None, "red"), (1, "orange"), (3600, "green")],
                    mappings=[_null_means("no breach ahead"), _zero_means("now", "red")])
    model = _stat_now("Model", "mva (no bursty tier), map (MAP queueing network, exact chain) "
                      "or map-fes (MAP queueing network by flow-equivalent decomposition, for "
                      "large populations); the Bottleneck story's flags say where MVA was "
                      "still used or a station is approximate.",
                      "model", "none", fields="/^model$/")
    bottleneck = _stat_now("Bottleneck tier (at the forecast)",
                           "Tier with the highest predicted utilization at the forecast "
                           "population.", "bottleneck_tier", "none",
                           fields="/^bottleneck_tier$/")
    measured = _override(".* measured$", custom__drawStyle="points", custom__pointSize=5)
    predicted = _override(".* predicted$", custom__lineStyle=_DASHED)
    throughput = timeseries(
        "Throughput per class: measured vs predicted",
        "Completions per second of each class over each solve interval (points) and the "
        "model's throughput at the current population (dashed).",
        [flux.series("class_prediction", "throughput_measured", _name(_CLASS, " measured"),
                     where=SYSTEM),
         flux.series("class_prediction", "throughput", _name(_CLASS, " predicted"),
                     where=SYSTEM)],
        "reqps", minimum=0, overrides=[measured, predicted])
    response = timeseries(
        "Response time per class: measured vs predicted, and SLA",
        "Mean response time of each class: measured (points), the model's at the current "
        "population (dashed) and the class's SLA (red).",
        [flux.series("class_prediction", "response_time_measured", _name(_CLASS, " measured"),
                     where=SYSTEM),
         flux.series("class_prediction", "response_time", _name(_CLASS, " predicted"),
                     where=SYSTEM),
         flux.series("class_prediction", "sla_s", _name(_CLASS, " SLA"), where=SYSTEM,
                     fn="last")],
        "s", minimum=0,
        overrides=[measured, predicted,
                   _override(".* SLA$", color={"mode": "fixed", "fixedColor": "red"},
                             custom__lineWidth=1)])
    percentiles = timeseries(
        "Response-time percentiles per class: predicted, and the SLO statistic",
        "The model's p50, p95 and p99 response time of each class at the current population "
        "(written where a class has a quantile SLO, or with predict_quantiles = \"always\"), "
        "and per class the statistic its SLO is on (slo_statistic: the mean, or the quantile "
        "its slo names; thick) against that SLO's bound (red). Capacity, the predicted "
        "breach and remediation hold every class to all of its SLOs; the panel beside it shows "
        "the means.",
        [flux.series("class_prediction", f"response_time_{q}_s", _name(_CLASS, f" {q}"),
                     where=SYSTEM) for q in ("p50", "p95", "p99")]
        + [flux.series("class_prediction", "response_time_slo_s",
                       _name(_CLASS, " SLO statistic"), where=SYSTEM),
           flux.series("class_prediction", "slo_bound_s", _name(_CLASS, " SLO bound"),
                       where=SYSTEM, fn="last")],
        "s", minimum=0,
        overrides=[_override(".* p50$", custom__lineStyle=_DASHED, custom__lineWidth=1),
                   _override(".* p99$", custom__lineStyle=_DASHED),
                   _override(".* SLO statistic$", custom__lineWidth=3),
                   _override(".* SLO bound$", color={"mode": "fixed", "fixedColor": "red"},
                             custom__lineWidth=1)])
    utilization = timeseries(
        "Utilization per tier: measured vs predicted",
        "Busy fraction of each tier over each solve interval (points), the model's at the "
        "current population (dashed) and at the forecast population (thin).",
        [flux.series("tier_prediction", "utilization_measured", _name(_TIER, " measured"),
                     where=SYSTEM),
         flux.series("tier_prediction", "utilization", _name(_TIER, " predicted"),
                     where=SYSTEM),
         flux.series("tier_prediction", "utilization_forecast", _name(_TIER, " at forecast"),
                     where=SYSTEM)],
        "percentunit", minimum=0, maximum=1,
        overrides=[measured, predicted, _override(".* at forecast$", custom__lineWidth=1)])
    pools = timeseries(
        "Pool utilization: tokens held over size",
        "Each thread or connection pool the system configures (pools): the measured tokens "
        "held over the pool's size over each solve interval (points, where the windows carry "
        "the pool's busy tokens), the model's now (dashed) and at the forecast population "
        "(thin). A pool near 100% while the tiers it holds are not is the bottleneck "
        "(bottleneck_tier names it); raising it is a remedy (pool in the remediation). "
        "Measured far from predicted: the pool's configuration or holding time is off "
        "(pool_error). Empty without pools.",
        [flux.series("pool_prediction", "utilization_measured", _name(_POOL, " measured"),
                     where=SYSTEM),
         flux.series("pool_prediction", "utilization", _name(_POOL, " predicted"),
                     where=SYSTEM),
         flux.series("pool_prediction", "utilization_forecast", _name(_POOL, " at forecast"),
                     where=SYSTEM)],
        "percentunit", minimum=0, maximum=1,
        overrides=[measured, predicted, _override(".* at forecast$", custom__lineWidth=1)])
    idc = timeseries(
        "Index of dispersion per tier vs the bursty threshold",
        f"Index of dispersion I of each tier's service process, estimated from utilization "
        f"and completions (Mi et al. 2008, Fig. 2). Above the red line (idc_threshold = "
        f"{defaults.idc_threshold:g}, the default; a system may override it) the tier is "
        f"bursty and the model is the MAP queueing network instead of MVA. Log scale.",
        [flux.series("tier_prediction", "idc", _TIER, where=SYSTEM, fn="last")], "none",
        log=True, threshold=defaults.idc_threshold)
    tier_demand = {"system": "${system}", "tier": "${tier}"}
    demand = timeseries(
        "Service demand per class on tier ${tier}: Kalman ±2σ and regression",
        "CPU seconds per request of each class on this tier: the Kalman filter's estimate "
        "(Huang et al. 2012, solid) with its ±2 standard deviation band (dashed) and the sliding "
        "NNLS regression's (Rolia and Vetland 1995, points), at every solve.",
        [flux.series("demand", "kalman", _name(_CLASS, " Kalman"), where=tier_demand),
         flux.band("demand", "kalman", "std", 2.0, _name(_CLASS, " +2σ"), where=tier_demand),
         flux.band("demand", "kalman", "std", -2.0, _name(_CLASS, " -2σ"),
                   where=tier_demand),
         flux.series("demand", "regression", _name(_CLASS, " regression"),
                     where=tier_demand)],
        "s", minimum=0,
        overrides=[_override(".* [+-]2σ$", custom__lineStyle=_DASHED, custom__lineWidth=1),
                   _override(".* regression$", custom__drawStyle="points",
                             custom__pointSize=4)])
    demand.update(repeat="tier", repeatDirection="h", maxPerRow=2)
    switch = timeseries(
        "Bottleneck-switch probability",
        "1 - max_m B_m at the breach point: the probability that the bottleneck is not the "
        "usual tier (MAP model; always 0 under MVA, which cannot switch), and per tier the "
        "probability B_m that it is the bottleneck (Mi et al. 2008, section 3.4).",
        [flux.series("prediction", "bottleneck_switch_probability", '"switch probability"',
                     where=SYSTEM),
         flux.series("tier_prediction", "bottleneck_probability",
                     _name(_TIER, " is the bottleneck"), where=SYSTEM)],
        "percentunit", minimum=0, maximum=1,
        overrides=[_override(".* is the bottleneck$", custom__lineWidth=1)])
    capacity_ts = timeseries(
        "Capacity vs users",
        "Capacity (largest population within every SLA), current users and the users "
        "forecast at the horizon. The predicted breach is where the users cross capacity. "
        "The thin lines bound capacity under the estimators' uncertainty (demands at +-1 "
        "standard error from the Kalman covariance, a bursty tier's I at the ends of its "
        "confidence interval), computed when a breach is near. The 'model switch' "
        "annotation marks where the model changes between MVA and the MAP network: capacity "
        "jumps there.",
        [flux.series("prediction", "capacity_users", '"capacity"', where=SYSTEM, fn="last"),
         flux.series("prediction", "capacity_users_lower", '"capacity band low"',
                     where=SYSTEM, fn="last"),
         flux.series("prediction", "capacity_users_upper", '"capacity band high"',
                     where=SYSTEM, fn="last"),
         flux.series("prediction", "users", '"users now"', where=SYSTEM, fn="last"),
         flux.series("prediction", "users_forecast", '"users at the horizon"', where=SYSTEM,
                     fn="last")],
        "none", minimum=0,
        overrides=[_override("^users at the horizon$", custom__lineStyle=_DASHED),
                   _override("^capacity band (low|high)$", custom__lineWidth=1,
                             color={"mode": "fixed", "fixedColor": "green"})])
    rate_ts = timeseries(
        "Capacity vs request rate (open workload)",
        "An open system (no users: an API driven by its request rate): the capacity in "
        "requests/s (largest total rate at the current class mix within every SLA, of the "
        "open model), the measured request rate and the rate trend's forecast at the "
        "horizon, and the saturation rate (the busiest tier full: beyond it the model is "
        "unstable). The predicted breach is where the rate crosses capacity. The thin lines "
        "bound capacity under the estimators' uncertainty, computed when a breach is near. "
        "Empty for a closed system (see 'Capacity vs users').",
        [flux.series("prediction", "capacity_rate_per_s", '"capacity"', where=SYSTEM,
                     fn="last"),
         flux.series("prediction", "capacity_rate_per_s_lower", '"capacity band low"',
                     where=SYSTEM, fn="last"),
         flux.series("prediction", "capacity_rate_per_s_upper", '"capacity band high"',
                     where=SYSTEM, fn="last"),
         flux.series("prediction", "saturation_rate_per_s", '"saturation"', where=SYSTEM,
                     fn="last"),
         flux.series("prediction", "arrival_rate_per_s", '"request rate now"', where=SYSTEM,
                     fn="last"),
         flux.series("prediction", "arrival_rate_forecast_per_s", '"rate at the horizon"',
                     where=SYSTEM, fn="last")],
        "reqps", minimum=0,
        overrides=[_override("^rate at the horizon$", custom__lineStyle=_DASHED),
                   _override("^saturation$", custom__lineWidth=1,
                             color={"mode": "fixed", "fixedColor": "red"}),
                   _override("^capacity band (low|high)$", custom__lineWidth=1,
                             color={"mode": "fixed", "fixedColor": "green"})])
    error = timeseries(
        "Model error",
        f"Relative error of the model's mean response time (and throughput) at the current "
        f"population against the measured one, at this solve and pooled over the last 10 "
        f"solves (completion-weighted). Where the pooled error (or a class's) is significant "
        f"and above the red line (model_error_threshold = "
        f"{defaults.model_error_threshold:g}, the default) perfcast raises model_error: do "
        f"not trust its predictions.",
        [flux.series("prediction", "model_error", '"response time error"', where=SYSTEM),
         flux.series("prediction", "model_error_pooled", '"response time error, pooled"',
                     where=SYSTEM),
         flux.series("prediction", "throughput_error", '"throughput error"', where=SYSTEM)],
        "percentunit", minimum=0, threshold=defaults.model_error_threshold)
    error_detail = timeseries(
        "Model error per class and tier",
        "Per class, the relative error of the model's response time at the current population "
        "against the measured one (|R_c - R_c measured| / R_c measured); per tier, the "
        "absolute error of its predicted utilization (|U - U measured|). The aggregate model "
        "error weighs classes by throughput and can hide one class far off; the model_error "
        "alert watches each class's error pooled over the last 10 solves too, where it is "
        "significant (one solve's mean of a class with few completions is noise).",
        [flux.series("class_prediction", "response_time_error", _name(_CLASS, " response time"),
                     where=SYSTEM),
         flux.series("tier_prediction", "utilization_error", _name(_TIER, " utilization"),
                     where=SYSTEM)],
        "percentunit", minimum=0, threshold=defaults.model_error_threshold)
    story_table = table(
        "Bottleneck story",
        "At the last solve: the busiest tier (highest utilization at the forecast), the tier "
        "that causes the predicted breach (largest share of the breaking class's response "
        "time), and why they differ when they do (a bursty tier is the bottleneck part of the "
        "time: the bottleneck switch); whether the model is trusted (no model_error alert), "
        "the last switch of model, and the model's caveats (flags: MVA used instead of the MAP "
        "network, a bursty tier on the pessimistic station, a fixed point not converged).",
        [flux.latest("prediction", ["bottleneck_tier", "breach_tier", "bottleneck_reason",
                                    "model", "model_trusted", "flags"], ["system"],
                     anchor="horizon_s", where=SYSTEM, table=True)],
        rename={"_time": "solved at"})
    history = table(
        "Alert history",
        "Every state change of this system's alerts (firing, resolved) with perfcast's "
        "summary, newest first.",
        [flux.alert_events(SYSTEM)], rename={"_time": "time"})
    remediation = table(
        "Remediation of the predicted breach",
        "On every solve that predicts a breach within the horizon: the smallest action of each "
        "kind (replicas, cores or a faster CPU for a tier; a larger pool; an admission limit "
        "on users) that "
        "keeps every class within its SLA at the horizon's users, on the model the prediction "
        "used, with the capacity it gives and its configured cost (remediation_costs); "
        "newest solves first; rank 1 is the cheapest of its solve.",
        [flux.newest_rows("remediation", ["value", "capacity_before", "capacity_users",
                                          "required_users", "cost", "summary"], SYSTEM,
                          order="rank", limit=40)],
        rename={"_time": "time", "capacity_before": "capacity now",
                "capacity_users": "capacity after", "required_users": "users to hold"})
    panels = _layout([[(users, 4, 4), (capacity, 4, 4), (headroom, 4, 4), (ttb, 4, 4),
                       (model, 4, 4), (bottleneck, 4, 4)],
                      [(remediation, 24, 8)],
                      [(throughput, 12, 9), (response, 12, 9)],
                      [(percentiles, 24, 9)],
                      [(utilization, 12, 9), (idc, 12, 9)],
                      [(demand, 12, 9)],
                      [(switch, 12, 9), (capacity_ts, 12, 9)],
                      [(rate_ts, 24, 9)],
                      [(error, 12, 9), (history, 12, 9)],
                      [(error_detail, 12, 9), (story_table, 12, 9)],
                      [(pools, 12, 9)]])
    variables = [
        _query_variable("system", "System",
                        flux.tag_values("prediction", "horizon_s", "system")),
        _query_variable("tier", "Tier",
                        flux.tag_values("tier_prediction", "utilization", "tier", SYSTEM),
                        multi=True)]
    return _dashboard(SYSTEM_UID, "perfcast: system ${system}",
                      "One system's model: measured vs predicted, burstiness, demands, "
                      "capacity, model error.", panels, variables,
                      links=[_link("all systems", OVERVIEW_UID)],
                      annotations=[annotation(
                          "model switch", flux.events("prediction", "model_switch",
                                                      "model_switch_reason", SYSTEM),
                          "purple")])


def dashboards(defaults: SystemConfig = SystemConfig()) -> list[dict[str, Any]]:
    """Both dashboards."""
    return [overview(), system(defaults)]


def panel_by_title(dashboard: dict[str, Any], title: str) -> Panel:
    """The panel of ``dashboard`` titled ``title`` (``KeyError`` if none)."""
    for panel in dashboard["panels"]:
        if panel["title"] == title:
            return panel
    raise KeyError(f"{dashboard['uid']}: no panel {title!r}")
