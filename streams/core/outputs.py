"""The pipeline's outputs, typed: what one step sends to each output topic.

:class:`TierEstimate` (``perfcast.estimates``, one per valid window), :class:`Prediction`
with its per-class :class:`ClassPrediction` and per-tier :class:`TierPrediction` parts
(``perfcast.predictions``, one per system per solve), :class:`Alert` (``perfcast.alerts``,
one per change of an alert's state) and :class:`DeadLetter` (``perfcast.deadletter``);
:class:`Outputs` holds one step's lists of them.

The types are ``msgspec.Struct`` s rather than dataclasses: a record's JSON form leaves out
the keys that do not apply to it (an estimate before its tier's first solve has no ``idc``,
a prediction without a model none of the model's figures), and msgspec's :data:`UNSET` says
exactly that -- a field left ``UNSET`` is absent from the JSON form, one set to ``None`` is
``null`` -- where a dataclass would need a hand-written encoder per type. Structs are also
cheaper to build than dataclasses (an estimate is made per window) and
:func:`msgspec.to_builtins` renders them, nested parts included, in C.

:meth:`_Record.to_record` is the one rendering: every sink that serializes an output (the
JSON-lines files, the Kafka topics) writes it. Fields are read as attributes; the
mapping-style reads (``record["users"]``, ``record.get("users")``, by the JSON key) serve
scripts that treat records generically, an ``UNSET`` field reading as absent. Values are
JSON-safe when a record is built (non-finite floats are ``None``:
:func:`streams.core.records.clean`). Units: seconds for times and durations (``_s``), epoch
seconds for ``time`` / ``end`` / ``since``, users for populations, requests per second for
throughputs, fractions for utilizations and relative errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["Alert", "ClassDemand", "ClassPrediction", "DeadLetter", "Outputs", "PoolPrediction",
           "Prediction", "TierEstimate", "TierPrediction", "UNSET", "UnsetType", "record_fields", "updated"]


class _Record(msgspec.Struct, kw_only=True):
    """An output record: its JSON form (:meth:`to_record`) and read access by JSON key."""

    def to_record(self) -> dict[str, Any]:
        """The JSON-able form: a dict of the set fields (``UNSET`` ones left out), nested
        parts as dicts, in field order."""
        return msgspec.to_builtins(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        """The record of a JSON-form dict (keys by their JSON names; absent: ``UNSET``). The
        values are taken as they are: :func:`streams.core.records.clean` them first."""
        rename = _renamed(cls)
        return cls(**({rename.get(k, k): v for k, v in data.items()} if rename else data))

    def _attribute(self, key: str) -> str:
        """The attribute holding JSON key ``key`` (``KeyError``: none)."""
        names = type(self).__struct_encode_fields__
        try:
            return type(self).__struct_fields__[names.index(key)]
        except ValueError:
            raise KeyError(key) from None

    def __getitem__(self, key: str) -> Any:
        """The field of JSON key ``key`` (``KeyError``: no such field, or ``UNSET``)."""
        value = getattr(self, self._attribute(key))
        if value is UNSET:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        """The field of JSON key ``key``, ``default`` when it is absent (``UNSET``)."""
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, UNSET) is not UNSET

    def keys(self) -> Iterator[str]:
        """The JSON keys of the set fields, in field order."""
        cls = type(self)
        return (k for k, a in zip(cls.__struct_encode_fields__, cls.__struct_fields__)
                if getattr(self, a) is not UNSET)

    def __iter__(self) -> Iterator[str]:          # type: ignore[override]
        return self.keys()


def _renamed(kind: type[_Record]) -> dict[str, str]:
    """JSON key -> attribute, for the fields whose JSON key is not a Python name."""
    return {k: a for k, a in zip(kind.__struct_encode_fields__, kind.__struct_fields__)
            if k != a}


def updated(record: Any, **fields: Any) -> Any:
    """A copy of ``record`` with ``fields`` set: an output record's
    (:func:`msgspec.structs.replace`), or a plain mapping's (the alert book and the trust
    marks take either)."""
    if isinstance(record, _Record):
        return msgspec.structs.replace(record, **fields)
    return {**record, **fields}


def record_fields(kind: type[_Record]) -> tuple[str, ...]:
    """The JSON keys a record type may carry, in order (docs/pipeline.md's tables list
    them; tests/test_output_fields.py checks the two agree)."""
    return kind.__struct_encode_fields__


# -- perfcast.estimates -------------------------------------------------------------------------
class TierEstimate(_Record, kw_only=True):
    """One valid window's estimate record: the tier's Kalman state after it, and the tier's
    figures from its last solve (absent before the first)."""

    system: str                                     #: system name
    tier: str                                       #: tier name
    end: float                                      #: window end, epoch s
    seq: int                                        #: the tier's window count, this one included
    utilization: float                              #: measured utilization, fraction of the cores
    late: bool                                      #: older than the tier's newest window
    demands: dict[str, float]                       #: Kalman demand per class, s per completion
    demand_std: dict[str, float]                    #: its standard deviation per class, s
    kalman_flag: str | None                         #: why the window did not update the filter
    change_detected: bool                           #: the filter's change detector fired
    idc: float | None | UnsetType = UNSET           #: index of dispersion I, dimensionless
    idc_flag: str | None | UnsetType = UNSET        #: why I has no clear interval (None: clear)
    bursty: bool | UnsetType = UNSET                #: I's lower bound above idc_threshold
    mean_service_s: float | None | UnsetType = UNSET  #: busy time per completion, s
    p95_s: float | None | UnsetType = UNSET         #: 95th percentile of service times, s
    idc_lower: float | None | UnsetType = UNSET     #: I's 95% interval, lower end (None: unbounded)
    idc_upper: float | None | UnsetType = UNSET     #: I's 95% interval, upper end (None: unbounded)
    idc_reference: float | None | UnsetType = UNSET  #: Mi et al. (2008) Fig. 2's reading of I
    demand_flag: dict[str, str | None] | UnsetType = UNSET  #: per class, why not separable
    demand_se: dict[str, float | None] | UnsetType = UNSET  #: per class, regression std error, s
    flags: list[str] | UnsetType = UNSET            #: caveats of an accepted window (clamped U)
    #: per class, the pure delay fitted jointly with the demand, s per completion (None:
    #: unidentified); with ``latency = "estimate"``
    delay_s: dict[str, float | None] | UnsetType = UNSET
    delay_flag: str | None | UnsetType = UNSET      #: why a class's delay is unidentified


# -- perfcast.predictions -----------------------------------------------------------------------
class ClassPrediction(_Record, kw_only=True):
    """A prediction's figures for one request class."""

    throughput: float | None                        #: model throughput now, req/s
    response_time: float | None                     #: model response time now, s
    throughput_forecast: float | None               #: model throughput at the forecast, req/s
    response_time_forecast: float | None            #: model response time at the forecast, s
    throughput_measured: float | None               #: measured over the interval, req/s
    response_time_measured: float | None            #: measured over the interval, s
    sla_s: float | None                             #: the class's SLA, s (None: none)
    response_time_error: float | None               #: |pred - meas| / meas, this solve
    response_time_error_pooled: float | None | UnsetType = UNSET  #: error pooled over solves
    response_time_error_se: float | None | UnsetType = UNSET  #: the pooled error's std error
    #: model response-time quantiles now, s, by name (``p50``, ``p90``, ``p95``, ``p99`` and
    #: any SLO's); with a quantile SLO or ``predict_quantiles = "always"``
    response_time_quantiles_s: dict[str, float | None] | UnsetType = UNSET
    #: the same at the forecast, s
    response_time_quantiles_forecast_s: dict[str, float | None] | UnsetType = UNSET
    slo_statistic: str | None | UnsetType = UNSET   #: the statistic its SLO is on (mean, p95..)
    slo_bound_s: float | None | UnsetType = UNSET   #: that statistic's bound, s
    #: the model's value of that statistic now, s (the mean, or the quantile of its law)
    response_time_slo_s: float | None | UnsetType = UNSET
    #: the same at the forecast, s
    response_time_slo_forecast_s: float | None | UnsetType = UNSET


class ClassDemand(_Record, kw_only=True):
    """One class's demand at one tier, by both estimators."""

    kalman: float | None                            #: Kalman filter's demand, s per completion
    std: float | None                               #: its standard deviation, s
    regression: float | None                        #: sliding NNLS regression's demand, s
    visits: float | None | UnsetType = UNSET        #: visits per request the model used
    visits_measured: float | None | UnsetType = UNSET  #: the completions' ratio to the entry's
    split: float | None | UnsetType = UNSET         #: response-time split's demand, s
    delay: float | None | UnsetType = UNSET         #: pure delay the model used, s per request
    delay_identified: bool | UnsetType = UNSET      #: fitted with the demand (else a residual)


class TierPrediction(_Record, kw_only=True):
    """A prediction's figures for one tier."""

    utilization: float | None                       #: model utilization now, fraction
    utilization_forecast: float | None              #: model utilization at the forecast
    utilization_measured: float | None              #: measured over the interval
    demand_s: float | None                          #: aggregate demand D_m over the mix, s
    idc: float | None                               #: index of dispersion I
    idc_flag: str | None                            #: why I has no clear interval (None: clear)
    idc_lower: float | None                         #: I's 95% interval, lower end
    idc_upper: float | None                         #: I's 95% interval, upper end
    idc_reference: float | None                     #: Mi et al. (2008) Fig. 2's reading of I
    bursty: bool                                    #: I's lower bound above idc_threshold
    map2: dict[str, Any] | None                     #: the fitted MAP(2) as the model uses it
    estimator: str                                  #: whose demands the model used
    bottleneck_probability: float | None            #: B_m at the breach point (None: MVA)
    demands: dict[str, ClassDemand]                 #: per class, both estimators' demands
    utilization_error: float | None                 #: |predicted - measured| utilization
    split_discipline: str | None | UnsetType = UNSET  #: ps / fcfs: the split's discipline


class PoolPrediction(_Record, kw_only=True):
    """A prediction's figures for one thread or connection pool (``pools`` in the
    configuration)."""

    tier: str                                       #: the tier that owns it
    size: int                                       #: tokens
    holds: list[str]                                #: the tiers it is held across
    utilization: float | None                       #: tokens held over size now, model
    utilization_forecast: float | None              #: ... at the forecast
    waiting_time_s: float | None                    #: wait for a token per request now, s
    waiting_time_forecast_s: float | None           #: ... at the forecast, s
    #: per class, the wait for a token over its response time now, model
    waiting_share: dict[str, float] | UnsetType = UNSET
    waiting_share_forecast: dict[str, float] | UnsetType = UNSET  #: ... at the forecast
    #: measured tokens held over size in the solve interval (windows' ``pools``)
    utilization_measured: float | None | UnsetType = UNSET
    utilization_error: float | None | UnsetType = UNSET  #: |model - measured| utilization


_F = float | None | UnsetType
_I = int | None | UnsetType
_S = str | None | UnsetType


class Prediction(_Record, kw_only=True):
    """One system's prediction at one solve; without a model (``model`` ``None``) only the
    solve's identity, ``model`` and ``flags`` are set."""

    system: str                                     #: system name
    time: float                                     #: event time of the solve, epoch s
    solve: int                                      #: the system's solve count
    think_time_s: float | None                      #: think time Z the model used, s
    horizon_s: float                                #: forecast horizon, s
    model: str | None                               #: mva / map / ...; None: not enough data
    flags: list[str]                                #: caveats of this prediction
    workload: _S = UNSET                            #: closed / open
    workload_reason: _S = UNSET                     #: why (configured, users, rates only)
    users: _I = UNSET                               #: current population, users
    users_source: _S = UNSET                        #: how it was obtained
    users_trend_per_s: _F = UNSET                   #: users trend, users/s
    users_forecast: _I = UNSET                      #: population at time + horizon_s, users
    throughput: _F = UNSET                          #: model throughput now, req/s
    response_time: _F = UNSET                       #: model mean response time now, s
    throughput_measured: _F = UNSET                 #: measured throughput, req/s
    arrival_rate_per_s: _F = UNSET                  #: open: measured request rate, req/s
    arrival_rate_trend_per_s: _F = UNSET            #: open: its trend, req/s per s
    arrival_rate_forecast_per_s: _F = UNSET         #: open: rate at time + horizon_s, req/s
    capacity_rate_per_s: _F = UNSET                 #: open: largest rate within every SLA
    capacity_rate_per_s_lower: _F = UNSET           #: open: capacity, pessimistic band end
    capacity_rate_per_s_upper: _F = UNSET           #: open: capacity, optimistic band end
    headroom_rate_per_s: _F = UNSET                 #: open: capacity - rate, req/s
    saturation_rate_per_s: _F = UNSET               #: open: largest rate the tiers carry
    unstable: bool | UnsetType = UNSET              #: open: the rate exceeds saturation now
    capacity_users: _I = UNSET                      #: largest population within every SLA
    capacity_limited: bool | UnsetType = UNSET      #: the capacity search hit its limit
    headroom_users: _I = UNSET                      #: capacity - users, users
    time_to_breach_s: _F = UNSET                    #: until the trend passes capacity, s
    breach_class: _S = UNSET                        #: the class that breaks first
    breach_tier: _S = UNSET                         #: the tier most of its response time
    bottleneck_tier: _S = UNSET                     #: highest utilization at the forecast
    bottleneck_switch_probability: _F = UNSET       #: 1 - max_m B_m at the breach point
    model_error: _F = UNSET                         #: relative response-time error now
    throughput_error: _F = UNSET                    #: relative throughput error now
    classes: dict[str, ClassPrediction] | UnsetType = UNSET  #: per request class
    tiers: dict[str, TierPrediction] | UnsetType = UNSET  #: per tier
    pools: dict[str, PoolPrediction] | UnsetType = UNSET  #: per configured pool modelled
    remediation: dict[str, Any] | None | UnsetType = UNSET  #: what restores the SLA at risk
    alert_capacity_users: _I = UNSET                #: the capacity the breach alert acts on
    alert_time_to_breach_s: _F = UNSET              #: its time to breach, s
    alert_basis: list[str] | UnsetType = UNSET      #: why it is below capacity_users
    alert_window_factors: dict[str, float] | UnsetType = UNSET  #: per tier, f_m
    model_error_pooled: _F = UNSET                  #: aggregate error pooled over solves
    model_error_pooled_se: _F = UNSET               #: its standard error
    model_error_significant: bool | None | UnsetType = UNSET  #: it is significant
    model_error_solves: _I = UNSET                  #: solves pooled
    model_error_class: _S = UNSET                   #: worst significant class
    model_error_class_max: _F = UNSET               #: its pooled error
    quantile_error: _F = UNSET                      #: worst SLO quantile's error now
    quantile_error_class: _S = UNSET                #: its class
    quantile_error_quantile: _S = UNSET             #: its quantile (p95)
    quantile_predicted_s: _F = UNSET                #: the model's quantile there, s
    quantile_measured_s: _F = UNSET                 #: the measured one, s
    utilization_error_tier: _S = UNSET              #: tier furthest off its utilization
    utilization_error_max: _F = UNSET               #: that absolute difference
    pool_error: _F = UNSET                          #: worst pool's relative utilization error
    pool_error_pool: _S = UNSET                     #: its pool
    pool_error_pooled: _F = UNSET                   #: worst significant pooled pool error
    pool_error_pooled_pool: _S = UNSET              #: its pool (what model_error watches)
    capacity_users_lower: _I = UNSET                #: capacity band, lower end, users
    capacity_users_upper: _I = UNSET                #: capacity band, upper end, users
    time_to_breach_lower_s: _F = UNSET              #: time to breach at the lower end, s
    time_to_breach_upper_s: _F = UNSET              #: time to breach at the upper end, s
    band_flags: list[str] | UnsetType = UNSET       #: what the band could not vary
    bottleneck_reason: _S = UNSET                   #: why bottleneck and breach tier differ
    breach_tier_share: _F = UNSET                   #: breach tier's share of R, fraction
    breach_tier_bottleneck_probability: _F = UNSET  #: its B_m at the breach point
    remediation_summary: _S = UNSET                 #: the remedy the alert quotes
    remediation_tier: _S = UNSET                    #: the tier it acts on (None: admission)
    remediation_reason: _S = UNSET                  #: why not on breach_tier
    model_switch: _S = UNSET                        #: ``mva -> map`` at a switch of model
    model_switch_reason: _S = UNSET                 #: why it switched
    alert_untrusted: list[str] | UnsetType = UNSET  #: why the model is not trusted
    trend_condition: bool | None | UnsetType = UNSET  #: the response-time trend's condition
    trend_class: _S = UNSET                         #: class nearest its SLA on the trend
    trend_time_to_breach_s: _F = UNSET              #: the trend's time to the SLA, s
    trend_response_time: _F = UNSET                 #: the trend line's level, s
    trend_slope: _F = UNSET                         #: its slope less its noise, s/s
    alert_trigger: _S = UNSET                       #: model / trend / model+trend / None
    model_trusted: bool | UnsetType = UNSET         #: the model matches the operating point
    trust_reasons: list[str] | UnsetType = UNSET    #: why model_trusted is false
    final: bool | UnsetType = UNSET                 #: the end-of-input solve

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Prediction":
        """:meth:`_Record.from_dict`, the per-class and per-tier parts typed too."""
        fields = dict(data)
        if "classes" in fields:
            fields["classes"] = {c: ClassPrediction(**v) for c, v in fields["classes"].items()}
        if "tiers" in fields:
            fields["tiers"] = {t: TierPrediction(**{**v, "demands": {
                c: ClassDemand(**d) for c, d in v["demands"].items()}})
                for t, v in fields["tiers"].items()}
        return cls(**fields)


# -- perfcast.alerts ----------------------------------------------------------------------------
class Alert(_Record, kw_only=True):
    """A change of an alert's state (``firing`` / ``resolved``), or a restatement."""

    system: str                                     #: system name
    time: float                                     #: event time of the solve, epoch s
    alert: str                                      #: predicted_breach / current_breach / ...
    class_: str | None = msgspec.field(name="class")  #: the class concerned (None: all)
    tier: str | None                                #: the tier concerned
    time_to_breach_s: _F = UNSET                    #: predicted_breach: time to breach, s
    value: float | None                             #: the watched value (s or fraction)
    threshold: float | None                         #: its threshold, same unit
    trigger: _S = UNSET                             #: predicted_breach: what holds it
    summary: str                                    #: one line for a human
    basis: list[str] | UnsetType = UNSET            #: predicted_breach: what the capacity is on
    state: str | UnsetType = UNSET                  #: firing / resolved (the alert book's)
    since: float | None | UnsetType = UNSET         #: when it fired, epoch s
    trust: _S = UNSET                               #: predicted_breach: trusted / untrusted
    update: _S = UNSET                              #: ``trust`` on a restating event
    #: breaches: the statistic the class's SLO is on (``mean``, ``p95`` ...: its
    #: ``slo_statistic``)
    statistic: _S = UNSET


# -- perfcast.deadletter ------------------------------------------------------------------------
class DeadLetter(_Record, kw_only=True):
    """An input record the pipeline could not use: invalid (``raw`` set), or a valid window
    the system rejected (``system``, ``tier``, ``end``, ``record`` set)."""

    reason: str                                     #: why, naming the rule
    field: str                                      #: the offending field
    value: Any                                      #: the offending value, bounded
    raw: str | UnsetType = UNSET                    #: an invalid record's text, bounded
    system: str | UnsetType = UNSET                 #: a rejected window's system
    tier: str | UnsetType = UNSET                   #: its tier
    end: float | UnsetType = UNSET                  #: its end, epoch s
    record: dict[str, Any] | UnsetType = UNSET      #: the window, bounded per-class maps
    truncated: list[str] | UnsetType = UNSET        #: which maps were cut


@dataclass
class Outputs:
    """What one step produced, per output topic."""

    estimates: list[TierEstimate] = field(default_factory=list)
    predictions: list[Prediction] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    deadletter: list[DeadLetter] = field(default_factory=list)

    def extend(self, other: "Outputs") -> None:
        self.estimates += other.estimates
        self.predictions += other.predictions
        self.alerts += other.alerts
        self.deadletter += other.deadletter
