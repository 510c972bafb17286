"""Grafana unified-alerting rules that mirror perfcast's own alerts.

perfcast decides when an alert fires and resolves (thresholds per system from its
configuration, hysteresis over solves; :mod:`streams.alerts.book`) and writes every change as an
``alert`` point. The Grafana rules read those points rather than re-deciding from the
predictions: Grafana, the ``perfcast.alerts`` topic and the dashboards then never disagree,
and an SLA, horizon or threshold is configured in one place. One rule per kind:

* ``predicted_breach`` -- a class is predicted to exceed its SLO within the horizon, on the
  statistic the SLO names (label ``statistic``: ``mean`` or a quantile, ``p95`` ...);
* ``current_breach`` -- a class's measured mean response time is above its SLA now (one
  alert per class; ``statistic`` ``mean``: windows carry means);
* ``model_error`` -- the model is too far off the measurements to be trusted.

Each rule is multi-dimensional: its query returns one series per alert (per system, and per
class for ``current_breach``), labelled ``system``, ``alert``, ``class``, ``tier`` and
``statistic`` from the tags of the alert's last point; ``predicted_breach`` also by ``trust``
(``trusted`` or ``untrusted``: raised while the ``model_error`` alert was active,
:mod:`streams.predict.confidence`).
The data of a rule:

* ``A`` ``active`` of the alert's last point (1 firing, 0 resolved), ``B`` its ``value``
  (time to breach, measured response time, model error), ``C`` its ``threshold`` (horizon,
  SLA, error threshold) -- Flux queries over the last :data:`LOOKBACK_S`;
* ``D``, ``E``, ``F`` their last values (reduce), ``G`` = ``D > 0``: the condition.

``E`` and ``F`` only feed the summary a person on call reads. perfcast writes a point only
when an alert changes state, so the look-back must cover the longest time an alert stays
firing (30 days here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from streams.grafana import flux
from streams.grafana.dashboards import DATASOURCE, DATASOURCE_UID, SYSTEM_UID, panel_by_title

__all__ = ["FOLDER_UID", "FOLDER_TITLE", "GROUP", "INTERVAL_S", "LOOKBACK_S", "RuleSpec",
           "RULES", "data", "rule", "rules", "rule_group_file"]

FOLDER_UID = "perfcast"
FOLDER_TITLE = "perfcast"
GROUP = "perfcast"
#: evaluation interval: perfcast solves every minute by default
INTERVAL_S = 60
#: how far back the rules look for an alert's last state change
LOOKBACK_S = 30 * 86400
EXPRESSION = {"type": "__expr__", "uid": "__expr__"}
#: every label the queries can produce (tags of the ``alert`` measurement; ``statistic``:
#: what a breach's SLO is on, ``mean`` or a quantile such as ``p95``)
LABELS = ("system", "alert", "class", "tier", "statistic")


@dataclass(frozen=True)
class RuleSpec:
    """One alert kind: how perfcast identifies an alert of it, its labels, texts and the panel
    of the per-system dashboard that shows it."""

    kind: str
    title: str
    identity: tuple[str, ...]
    labels: tuple[str, ...]
    severity: str
    summary: str
    description: str
    panel: str


RULES: tuple[RuleSpec, ...] = (
    RuleSpec(
        "predicted_breach", "perfcast: SLA breach predicted within the horizon",
        ("system",), (*LABELS, "trust"), "warning",
        "{{ if eq $labels.trust \"untrusted\" }}UNTRUSTED (perfcast's model-error alert is "
        "active): {{ end }}"
        "{{ $labels.system }}: class '{{ $labels.class }}' is predicted to exceed its "
        "{{ with $labels.statistic }}{{ . }} {{ end }}response-time SLO "
        "{{ if gt $values.E.Value 0.0 }}in about "
        "{{ humanizeDuration $values.E.Value }}{{ else }}already at the current load{{ end }} "
        "(forecast horizon {{ humanizeDuration $values.F.Value }}); tier '{{ $labels.tier }}' "
        "will be the bottleneck.",
        "perfcast's queueing model, re-solved every minute from the monitoring windows, "
        "predicts that the growing number of users reaches the largest population that meets "
        "every SLO -- on the statistic each names (label statistic: mean, or the quantile of "
        "the model's response-time law, e.g. p95; an open system, driven by its request rate: "
        "that the rate trend reaches capacity_rate_per_s, the largest request rate within "
        "every SLO). Act before it happens: add capacity to tier '{{ $labels.tier }}' or limit "
        "admissions (an open system: rate-limit). See the 'Capacity vs users' panel of the "
        "perfcast system dashboard (system = {{ $labels.system }}), or 'Capacity vs request "
        "rate (open workload)' for an open system. Label trust = 'untrusted': the breach was "
        "predicted while the model's error was above its threshold (the model_error alert), "
        "so weigh it accordingly.",
        "Capacity vs users"),
    RuleSpec(
        "current_breach", "perfcast: SLA breached now",
        ("system", "class"), LABELS, "critical",
        "{{ $labels.system }}: class '{{ $labels.class }}' is breaking its SLA now: measured "
        "mean response time {{ printf \"%.3f\" $values.E.Value }} s against an SLA of "
        "{{ $values.F.Value }} s; bottleneck tier '{{ $labels.tier }}'.",
        "The response time measured over the last solve interval is above the class's SLA "
        "(it resolves below 90% of the SLA). Check tier '{{ $labels.tier }}' first; the "
        "perfcast system dashboard (system = {{ $labels.system }}) shows the response times "
        "per class and the utilization per tier.",
        "Response time per class: measured vs predicted, and SLA"),
    RuleSpec(
        "model_error", "perfcast: model error too high",
        ("system",), ("system", "alert"), "info",
        "{{ $labels.system }}: perfcast's model is off the measured response time by "
        "{{ humanizePercentage $values.E.Value }} (threshold "
        "{{ humanizePercentage $values.F.Value }}): do not trust its capacity and "
        "time-to-breach predictions until this resolves.",
        "The model's mean response time at the current load differs from the measured one by "
        "more than model_error_threshold, or a pool's modelled tokens held differ from the "
        "measured ones by more (pool_error_pooled). Usual causes: a tier whose burstiness is "
        "not measured yet (too few windows), wrong tiers, visits or think time in the "
        "configuration, a pool configured with the wrong size or held tiers. The "
        "perfcast.alerts topic and the 'Alert history' panel carry perfcast's own "
        "explanation.",
        "Model error"),
)


def _query(ref: str, query: str) -> dict[str, Any]:
    return {"refId": ref, "queryType": "", "datasourceUid": DATASOURCE_UID,
            "relativeTimeRange": {"from": LOOKBACK_S, "to": 0},
            "model": {"refId": ref, "datasource": DATASOURCE, "query": query,
                      "intervalMs": 60_000, "maxDataPoints": 43_200}}


def _expression(ref: str, model: dict[str, Any]) -> dict[str, Any]:
    return {"refId": ref, "queryType": "", "datasourceUid": "__expr__",
            "relativeTimeRange": {"from": 0, "to": 0},
            "model": {"refId": ref, "datasource": EXPRESSION, **model}}


def _reduce(ref: str, of: str) -> dict[str, Any]:
    return _expression(ref, {"type": "reduce", "expression": of, "reducer": "last",
                             "settings": {"mode": "dropNN"}})


def data(spec: RuleSpec) -> list[dict[str, Any]]:
    """The queries and expressions of a rule (module docstring)."""
    queries = [_query(ref, flux.latest_alert(spec.kind, field, spec.identity, spec.labels))
               for ref, field in (("A", "active"), ("B", "value"), ("C", "threshold"))]
    return [*queries, _reduce("D", "A"), _reduce("E", "B"), _reduce("F", "C"),
            _expression("G", {"type": "threshold", "expression": "D",
                              "conditions": [{"evaluator": {"type": "gt", "params": [0]}}]})]


def _common(spec: RuleSpec) -> dict[str, Any]:
    return {"uid": f"perfcast-{spec.kind.replace('_', '-')}", "title": spec.title,
            "condition": "G", "data": data(spec), "noDataState": "OK",
            "execErrState": "Error", "for": "0s", "isPaused": False,
            "labels": {"severity": spec.severity, "source": "perfcast"}}


def rule(spec: RuleSpec, system_dashboard: dict[str, Any]) -> dict[str, Any]:
    """The rule as the alerting provisioning HTTP API takes it (``ProvisionedAlertRule``):
    linked to its panel of the per-system dashboard by the ``__dashboardUid__`` and
    ``__panelId__`` annotations."""
    return {**_common(spec), "folderUID": FOLDER_UID, "ruleGroup": GROUP, "orgID": 1,
            "annotations": {"summary": spec.summary, "description": spec.description,
                            "__dashboardUid__": SYSTEM_UID,
                            "__panelId__": str(panel_by_title(system_dashboard, spec.panel)["id"])}}


def rules(system_dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rule, API form."""
    return [rule(spec, system_dashboard) for spec in RULES]


def rule_group_file(system_dashboard: dict[str, Any],
                    specs: Sequence[RuleSpec] = RULES) -> dict[str, Any]:
    """The alerting provisioning file (``provisioning/alerting/``): one group in the folder
    titled :data:`FOLDER_TITLE`, evaluated every :data:`INTERVAL_S`. Annotations are not
    interpolated by Grafana's file provisioning, so the ``{{ $labels... }}`` templates stay."""
    file_rules = [{**_common(spec), "dashboardUid": SYSTEM_UID,
                   "panelId": panel_by_title(system_dashboard, spec.panel)["id"],
                   "annotations": {"summary": spec.summary, "description": spec.description}}
                  for spec in specs]
    return {"apiVersion": 1,
            "groups": [{"orgId": 1, "name": GROUP, "folder": FOLDER_TITLE,
                        "interval": f"{INTERVAL_S}s", "rules": file_rules}]}
