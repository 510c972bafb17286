"""The store's rows the report reads, typed: one frozen dataclass per table.

Each row type holds the columns of its table (:class:`streams.sinks.store.SQLiteStore`, one
table per measurement of :data:`streams.sinks.schema.MEASUREMENTS`) that the report draws,
under their column names (``class`` is ``cls``): a renamed column fails to load, and
``tests/test_report.py`` checks each type's columns against a real store. Values are as SQLite
returns them, except that a non-finite float (an unset SLA is infinite) reads as ``None`` and
a ``bool`` field as a bool.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar

__all__ = ["PredictionRow", "ClassPredictionRow", "TierPredictionRow", "DemandRow", "AlertRow",
           "RemediationRow", "ROW_TYPES", "columns"]

#: a field whose column name is a Python keyword names its column here
_CLASS = {"column": "class"}


@dataclass(frozen=True, slots=True)
class PredictionRow:
    """A system's solve (table ``prediction``)."""

    TABLE: ClassVar[str] = "prediction"

    time: float
    system: str
    model: str | None
    users: int | None
    users_forecast: int | None
    users_source: str | None
    horizon_s: float | None
    capacity_users: int | None
    capacity_users_lower: int | None
    capacity_users_upper: int | None
    headroom_users: int | None
    time_to_breach_s: float | None
    time_to_breach_lower_s: float | None
    time_to_breach_upper_s: float | None
    breach_tier: str | None
    bottleneck_tier: str | None
    bottleneck_reason: str | None
    bottleneck_switch_probability: float | None
    model_error: float | None
    model_error_class: str | None
    model_error_class_max: float | None
    throughput_error: float | None
    flags: str | None
    model_switch: str | None
    model_switch_reason: str | None
    remediation_summary: str | None
    remediation_reason: str | None
    workload: str | None = None
    arrival_rate_per_s: float | None = None
    arrival_rate_forecast_per_s: float | None = None
    capacity_rate_per_s: float | None = None
    capacity_rate_per_s_lower: float | None = None
    capacity_rate_per_s_upper: float | None = None
    headroom_rate_per_s: float | None = None
    saturation_rate_per_s: float | None = None
    #: the worst measured pool's utilization error pooled over the last solves, where
    #: significant (what the model-error alert watches beside the response time's)
    pool_error_pooled: float | None = None

    @property
    def open(self) -> bool:
        """An open workload's solve: rates and capacity in requests/s, no users."""
        return self.workload == "open"


@dataclass(frozen=True, slots=True)
class ClassPredictionRow:
    """One class at a solve, measured and predicted (table ``class_prediction``)."""

    TABLE: ClassVar[str] = "class_prediction"

    time: float
    system: str
    cls: str | None = field(metadata=_CLASS)
    throughput: float | None
    throughput_measured: float | None
    response_time: float | None
    response_time_measured: float | None
    sla_s: float | None
    #: the model's quantiles now (absent without a quantile SLO or ``predict_quantiles``)
    response_time_p50_s: float | None = None
    response_time_p95_s: float | None = None
    response_time_p99_s: float | None = None
    slo_statistic: str | None = None
    slo_bound_s: float | None = None
    response_time_slo_s: float | None = None


@dataclass(frozen=True, slots=True)
class TierPredictionRow:
    """One tier at a solve, measured and predicted (table ``tier_prediction``)."""

    TABLE: ClassVar[str] = "tier_prediction"

    time: float
    system: str
    tier: str | None
    utilization: float | None
    utilization_measured: float | None
    utilization_forecast: float | None
    idc: float | None
    bursty: bool | None
    bottleneck_probability: float | None


@dataclass(frozen=True, slots=True)
class PoolPredictionRow:
    """One thread or connection pool at a solve, the model's and, where the windows measure
    its tokens held, the measured utilization (table ``pool_prediction``)."""

    TABLE: ClassVar[str] = "pool_prediction"

    time: float
    system: str
    pool: str | None
    size: int | None
    utilization: float | None
    utilization_forecast: float | None
    waiting_time_s: float | None
    utilization_measured: float | None = None


@dataclass(frozen=True, slots=True)
class DemandRow:
    """One class's service demand on one tier at a solve, seconds (table ``demand``)."""

    TABLE: ClassVar[str] = "demand"

    time: float
    system: str
    tier: str | None
    cls: str | None = field(metadata=_CLASS)
    kalman: float | None
    std: float | None
    regression: float | None


@dataclass(frozen=True, slots=True)
class AlertRow:
    """An alert's change of state (table ``alert``)."""

    TABLE: ClassVar[str] = "alert"

    time: float
    system: str
    alert: str
    cls: str | None = field(metadata=_CLASS)
    tier: str | None
    state: str
    value: float | None
    threshold: float | None
    summary: str | None


@dataclass(frozen=True, slots=True)
class RemediationRow:
    """One action of a solve's remediation, by rank (table ``remediation``)."""

    TABLE: ClassVar[str] = "remediation"

    time: float
    system: str
    kind: str | None
    tier: str | None
    rank: int | None
    value: float | None
    capacity_users: int | None
    capacity_before: int | None
    required_users: int | None
    cost: float | None
    summary: str | None
    capacity_rate_per_s: float | None = None
    required_rate_per_s: float | None = None
    capacity_before_rate_per_s: float | None = None


ROW_TYPES: tuple[type, ...] = (PredictionRow, ClassPredictionRow, TierPredictionRow, DemandRow,
                               AlertRow, RemediationRow)


def columns(row_type: type) -> tuple[str, ...]:
    """The table columns of ``row_type``'s fields, in field order."""
    return tuple(f.metadata.get("column", f.name) for f in fields(row_type))
