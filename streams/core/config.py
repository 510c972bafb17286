"""Configuration: per-system model settings from TOML, connection settings from the environment.

A bare stream needs no file: every value has a default. A TOML file may set defaults for all
systems and override them per system::

    [defaults]
    solve_interval_s = 60        # model re-solved every minute of event time
    horizon_s = 900              # look 15 minutes ahead
    sla_s = { "*" = 1.0 }        # response-time SLA per class ("*": every other class)
    utilization_tolerance = 0.02 # utilization up to 1.02 is clamped to 1 and flagged

    [systems.shop]
    tiers = ["front", "db"]      # in visit order; other tiers are rejected
    think_time_s = 0.5
    sla_s = { home = 0.5, "*" = 1.0 }
    slo = { home = { p95 = 0.3 } }     # percentile SLOs per class, beside the mean's sla_s
    visits = { db = { home = 2.0 } }   # visits of a class to a tier per request (default 1)
    service_scv = { db = { search = 2.5 } }   # a class's service SCV at a tier (default: estimated)

    [systems.shop.pools.db_connections]  # a pool held across tiers (a layered model)
    tier = "front"               # the tier that owns it
    size = 10                    # tokens (threads, connections)
    holds = ["front", "db"]      # held across these tiers, in visit order

    [kafka]
    bootstrap = "localhost:9092"
    [influxdb]
    url = "http://localhost:8086"
    org = "perfcast"
    bucket = "perfcast"

Connection settings are overridden by environment variables (:data:`ENVIRONMENT`); secrets
(SASL password, InfluxDB token) come only from the environment or from a file named by
``..._FILE``, never from the TOML file, and never appear in ``repr``.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from streams.core.config_error import ConfigError, shown
from streams.core.plausibility import Plausibility
from streams.core.records import MAX_UTILIZATION_TOLERANCE, UTILIZATION_TOLERANCE, valid_name
from streams.core.input_config import input_from_mapping

__all__ = ["SystemConfig", "Pool", "SLO_QUANTILES", "PREDICT_QUANTILES", "KafkaSettings",
           "InfluxSettings", "Config", "Limits", "load_config", "ConfigError", "ENVIRONMENT", "secret", "DEMAND_POLICIES", "BURSTY_DEMANDS",
           "LATENCY_MODES",
           "REMEDIATION_COSTS", "Plausibility"]

#: how a tier's per-class demands enter the model (``demand_policy``, docs/accuracy.md
#: section 3): ``selected`` -- per tier, the Kalman filter or the sliding regression, whichever
#: predicted the tier's recent utilization better one step ahead
#: (:func:`estimators.selection.select_estimator`); ``kalman_checked`` -- the Kalman demands,
#: a class the regression disagrees with (or the filter is unsure of) replaced by the
#: mix-weighted mean (the policy before the measurements)
DEMAND_POLICIES = ("selected", "kalman_checked")

#: a bursty tier's aggregate demand when the MAP network is used (``bursty_demand``,
#: :mod:`streams.predict.model`, docs/accuracy.md section 1): ``history`` -- the tier's per-class demands
#: rescaled by one factor to ``D_m = mean_service * sum_c p_c V_{m,c}`` (busy time per
#: completion over the kept history, Mi et al. (2008) section 4.1); ``estimator`` -- the demand
#: policy's demands as they are (the behaviour before)
BURSTY_DEMANDS = ("history", "estimator")

#: pure delays at the tiers (``latency``, :mod:`estimators.latency`, :mod:`solvers.delay`):
#: ``off`` -- none (every tier's time is CPU and its queue); ``estimate`` -- per tier and class
#: a delay that does not queue, fitted jointly with the demand where the windows span loads,
#: else the time at the tier the demand does not explain (flagged)
LATENCY_MODES = ("off", "estimate")

#: how the one degree of freedom mean, ``I`` and p95 leave a bursty tier's MAP(2) is fixed
#: (``bursty_scv``, :mod:`streams.predict.calibration`, docs/accuracy.md sections 1 and 6):
#: ``response_idc`` -- the tie rule's SCV, and the ``I`` within its confidence interval at which
#: the model's residence time at the tier equals the measured one at the measured population
#: (where the tier reports response times and users; the estimated ``I`` otherwise);
#: ``response`` -- the estimated ``I``, and instead the SCV at which the residence times agree
#: (the default before); ``tie`` -- Mi et al.'s (2008) footnote, the largest ``rho1``
BURSTY_SCVS = ("response_idc", "response", "tie")

#: the response-time quantiles an SLO may bound (``slo``), by name: the statistics people write
#: SLOs on ("95% of requests under 300 ms"), as Prometheus' ``histogram_quantile`` reads them
SLO_QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99.9": 0.999}

#: when the predictions carry response-time quantiles (``predict_quantiles``): ``with_slo`` --
#: for the systems with a quantile SLO (``slo``); ``always`` -- for every system (their law
#: costs several times an MVA solve: docs/benchmarks.md)
PREDICT_QUANTILES = ("with_slo", "always")

#: the workload kind of a system (``workload``): ``auto`` -- closed where users are reported
#: or a think time is configured, open otherwise (a service whose monitoring has request
#: rates only); ``closed`` -- users thinking between requests (Mi et al. 2008, Fig. 9);
#: ``open`` -- requests arriving at a rate, whatever the users (Jackson 1963)
WORKLOADS = ("auto", "closed", "open")

#: cost of each kind of remediation (``remediation_costs``, :mod:`streams.predict.whatif`): per added
#: replica of a tier; per added core; per tier moved to a faster CPU, times the speed-up
#: ``s - 1``; per user an admission limit turns away at the required users; per token added
#: to a thread or connection pool (a configuration change, but each connection costs the
#: database memory and a backend: a tenth of a core's cost)
REMEDIATION_COSTS = {"replicate": 1.0, "cores": 0.125, "cpu_speed": 1.0, "admission": 0.05,
                     "pool": 0.0125}


#: the largest pool size (threads or connections): beyond it a value is a typo
MAX_POOL_SIZE = 1_000_000


@dataclass(frozen=True)
class Pool:
    """A pool of ``size`` tokens (threads, connections) owned by ``tier``: a request takes a
    token before the first tier of ``holds`` and gives it back after the last, waiting FCFS
    for one when all are taken (simultaneous resource possession: the layered queueing models
    of Rolia and Vetland 1995, solved by :mod:`solvers.pools`)."""

    tier: str
    size: int
    #: the tiers the token is held across, in visit order, the owning tier first
    holds: tuple[str, ...]


@dataclass(frozen=True)
class SystemConfig:
    """Model settings of one system. Times are event time (the windows' ``end``), seconds."""

    #: tiers in visit order; empty = accept any tier, in order of first appearance
    tiers: tuple[str, ...] = ()
    #: visits of a class to a tier per request, ``{tier: {class: V}}``; default 1
    visits: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: the workload kind: one of :data:`WORKLOADS`
    workload: str = "auto"
    #: think time ``Z`` of the closed workload; ``None``: estimated by Little's law from
    #: ``users``, throughput and response times (``Z = N/X - R``), else 0
    think_time_s: float | None = None
    #: response-time SLA per class, seconds; key ``"*"`` applies to every other class
    sla_s: Mapping[str, float] = field(default_factory=lambda: {"*": 1.0})
    #: response-time quantile SLOs per class, ``{class: {quantile: seconds}}`` with quantile
    #: names of :data:`SLO_QUANTILES`; key ``"*"`` applies to every other class. A class is
    #: held to its mean's ``sla_s`` and to each of these
    slo: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: when the predictions carry response-time quantiles: one of :data:`PREDICT_QUANTILES`
    predict_quantiles: str = "with_slo"
    #: how often the model is re-solved (event time)
    solve_interval_s: float = 60.0
    #: where the solve boundaries sit: at ``solve_offset_s + k solve_interval_s``; ``None``
    #: (the default): an offset derived from the system's name, so the systems' solves are
    #: spread over the interval instead of all falling due together (0: on the multiples)
    solve_offset_s: float | None = None
    #: how far ahead a breach is predicted
    horizon_s: float = 900.0
    #: span of the users trend fitted for the forecast
    trend_window_s: float = 900.0
    #: the class mix pools the latest solve intervals until they hold this many completions,
    #: within ``trend_window_s`` (one interval's shares over a few tens of requests are
    #: sampling noise: 400 bound the share's standard error by 0.5 / sqrt(400), 2.5 points;
    #: :mod:`streams.engine.pooled_mix`)
    mix_min_completions: int = 400
    #: a tier whose index of dispersion exceeds this (the lower bound of its confidence
    #: interval, estimators.dispersion.index_of_dispersion_interval) is bursty: the MAP(2)
    #: network is solved
    idc_threshold: float = 10.0
    #: largest population the MAP network is solved at (decomposition is O(N)); MVA beyond,
    #: flagged
    map_max_population: int = 10_000
    #: bursty tiers of up to this many cores get the decomposition's per-job station (each job
    #: keeps its own service phase; docs/accuracy.md section 10); more cores: one MAP at speed
    #: min(n, c), flagged pessimistic. Up to 64 by default:
    #: a 32-64-core bursty tier costs 11-19x the CPU of the cheaper station
    #: (docs/benchmarks.md)
    per_job_max_cores: int = 64
    #: windows of dispersion history per tier (Mi et al. 2008, Fig. 2 needs 2,000-10,000 when I >> 1)
    history: int = 4096
    #: windows in the sliding regression (second opinion on the Kalman demands)
    regression_windows: int = 120
    #: how the tier's per-class demands enter the model: one of :data:`DEMAND_POLICIES`
    demand_policy: str = "selected"
    #: a bursty tier's aggregate demand under the MAP network: one of :data:`BURSTY_DEMANDS`
    bursty_demand: str = "history"
    #: pure delays at the tiers: one of :data:`LATENCY_MODES`
    latency: str = "off"
    #: how a bursty tier's MAP(2) is calibrated: one of :data:`BURSTY_SCVS`
    bursty_scv: str = "response_idc"
    #: windows kept per tier to recognise duplicates; older windows are rejected as too late
    dedup_windows: int = 256
    #: relative model error (response time, throughput-weighted) that raises an alert
    model_error_threshold: float = 0.3
    #: the window of the response-time mean the SLA is read on (a Prometheus ``[5m]`` rate):
    #: the predicted-breach alert acts on the capacity at which that window's mean stays
    #: within the SLA with probability ``1 - window_breach_probability`` over the horizon
    #: (:mod:`streams.predict.alert_window`); 0: on the long-run mean only
    alert_window_s: float = 300.0
    #: probability that some alert window within the horizon breaches, at which the
    #: predicted-breach alert fires
    window_breach_probability: float = 0.5
    #: how close to the alert's capacity the model cannot tell a breach from none: its
    #: capacity is right to about 10% (docs/accuracy.md sections 6 and 12). With the users
    #: within this fraction below it the predicted-breach alert also consults the measured
    #: response-time trend, and a firing alert resolves only below it
    #: (:mod:`streams.predict.response_trend`); 0: off
    capacity_margin: float = 0.1
    #: solves a condition must hold before its alert fires, and be clear before it resolves
    alert_fire_after: int = 2
    alert_resolve_after: int = 3
    #: on a solve that predicts a breach within the horizon, search the smallest action per
    #: kind that restores every SLA (:func:`streams.predict.whatif.remediate`)
    remediation: bool = True
    #: on the open route, feed the tiers behind a bursty one its departure process (the fed
    #: model, :mod:`streams.predict.open_model`): right where a bursty tier has tiers after
    #: it, at tens of times the CPU of a Poisson-fed solve there (docs/benchmarks.md)
    open_fed: bool = True
    #: what each kind of remediation costs, to rank them: keys of :data:`REMEDIATION_COSTS`
    #: (a partial table keeps the other defaults)
    remediation_costs: Mapping[str, float] = field(
        default_factory=lambda: dict(REMEDIATION_COSTS))
    #: thread and connection pools by name (``[systems.<system>.pools.<name>]``), checked
    #: against ``tiers`` by :func:`check_pools`
    pools: Mapping[str, Pool] = field(default_factory=dict)
    #: per tier its scheduling discipline, ``{tier: discipline}`` with names of
    #: :data:`DISCIPLINES`; a tier not named is FCFS
    disciplines: Mapping[str, str] = field(default_factory=dict)
    #: a class's service-time SCV at a tier, ``{tier: {class: SCV}}``: the open pool chain
    #: serves a class whose SCV exceeds 1 at a held tier as a hyperexponential
    #: (:func:`solvers.pools_open.held_network`); a class not named has the SCV estimated
    #: from the windows (:mod:`estimators.service_scv`), else 1
    service_scv: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in _CHOICES:
            _choice(key, getattr(self, key), key)

    def sla_for(self, cls: str) -> float:
        """SLA of ``cls`` (``math.inf``: none)."""
        return float(self.sla_s.get(cls, self.sla_s.get("*", math.inf)))

    def slo_for(self, cls: str) -> dict[str, float]:
        """Quantile SLOs of ``cls``, ``{quantile name: seconds}`` (empty: none)."""
        return dict(self.slo.get(cls, self.slo.get("*", {})))

    def visit(self, tier: str, cls: str) -> float:
        """``V_{tier,cls}``: visits per request (default 1)."""
        per_class = self.visits.get(tier) if self.visits else None
        return float(per_class.get(cls, 1.0)) if per_class else 1.0


#: how a tier schedules its requests (``disciplines``): ``fcfs`` -- in arrival order, a
#: request waits for a core (the default); ``ps`` -- processor sharing, each of ``n`` requests
#: on ``c`` cores served at ``min(1, c / n)`` (an operating system's time-sliced CPU, a
#: database with a process per connection: :mod:`solvers.response_time.ps`)
DISCIPLINES = ("fcfs", "ps")
#: one week, seconds: the longest forecast horizon, users trend and SLA
WEEK_S = 7 * 86_400.0
#: numbers that feed the model, key -> (lowest excluded, highest): beyond them a value is a typo
#: and the solve's arithmetic overflows (a visit count of 1e160 times a demand)
_NUMBERS = {"idc_threshold": (0.0, 1e6), "model_error_threshold": (0.0, 1e3)}
#: visits of a class to a tier per request: (0, MAX_VISITS]
MAX_VISITS = 1e6
#: a service time's SCV: (0, MAX_SCV] (a lognormal of sigma 3 is ~8,100; beyond, a typo)
MAX_SCV = 1e4
#: the largest remediation cost (a ranking weight)
MAX_COST = 1e9
#: times with a range, seconds: key -> (lowest, highest, lowest allowed itself). Beyond them a
#: value is a typo or a unit mix-up, and the arithmetic stops meaning anything (a horizon of
#: 1e308 s overflows the users forecast; an interval of 1e-300 s solves at every window)
_TIMES = {"solve_interval_s": (1.0, 86_400.0, True), "horizon_s": (0.0, WEEK_S, False),
          "trend_window_s": (0.0, WEEK_S, False), "think_time_s": (0.0, 86_400.0, True),
          "alert_window_s": (0.0, 86_400.0, True)}
#: settings that take one of a few names
_CHOICES = {"demand_policy": DEMAND_POLICIES, "bursty_demand": BURSTY_DEMANDS,
            "latency": LATENCY_MODES,
            "bursty_scv": BURSTY_SCVS, "predict_quantiles": PREDICT_QUANTILES,
            "workload": WORKLOADS}
#: whole-number settings: key -> (lowest, highest or ``None``); memory grows with the window
#: counts, so they stop at a million windows per tier; the MAP network's population stops at
#: the largest population a capacity search goes to (``streams.predict.model.CAPACITY_LIMIT``)
_COUNTS = {"map_max_population": (1, 100_000), "per_job_max_cores": (1, 64),
           "history": (16, 1_000_000),
           "regression_windows": (4, 1_000_000), "dedup_windows": (1, 1_000_000),
           "alert_fire_after": (1, 10_000), "alert_resolve_after": (1, 10_000),
           "mix_min_completions": (1, 1_000_000)}
#: the most tiers a system's ``tiers`` may list (``[limits] max_tiers`` at its largest)
MAX_TIER_LIST = 4096
#: settings of ``[defaults]`` that apply to the input as a whole (:class:`Config`), not to one
#: system: windows are validated before they are routed to their system
_INPUT_SETTINGS = ("utilization_tolerance",)


def _system(raw: Mapping[str, Any], where: str, base: SystemConfig) -> SystemConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a table of settings, got {shown(raw)}")
    known = {f.name for f in fields(SystemConfig)}
    unknown = sorted(set(raw) - known)
    for key in unknown:
        if key in _INPUT_SETTINGS:
            raise ConfigError(f"{where}.{key}: only in [defaults] (windows are validated before "
                              f"they are routed to a system), got {shown(raw[key])}")
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown setting (known: {sorted(known)})")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        values[key] = _check(key, value, f"{where}.{key}")
    if "sla_s" in values:
        values["sla_s"] = {**base.sla_s, **values["sla_s"]}
    if "slo" in values:
        values["slo"] = {**base.slo, **values["slo"]}
    return replace(base, **values)


def _choice(key: str, value: Any, where: str) -> str:
    choices = _CHOICES[key]
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{where}: must be one of {', '.join(map(repr, choices))}, "
                          f"got {shown(value)}")
    return value


def _within(value: Any, where: str, low: float, high: float, low_allowed: bool,
            unit: str = "") -> float:
    """A number in ``[low, high]`` (``(low, high]`` unless ``low_allowed``); the error names
    the setting and the range."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    # NaN fails every comparison; an int is compared exactly (no float conversion to overflow)
    if not number or not (value <= high and (value >= low if low_allowed else value > low)):
        bracket = "[" if low_allowed else "("
        raise ConfigError(f"{where}: must be a number within {bracket}{low:g}, {high:g}]"
                          f"{unit}, got {shown(value)}")
    return float(value)


def _utilization_tolerance(value: Any, where: str) -> float:
    return _within(value, where, 0.0, MAX_UTILIZATION_TOLERANCE, True,
                   " (utilization above 1 accepted, clamped to 1 and flagged)")


def _check(key: str, value: Any, where: str) -> Any:
    if key in _NUMBERS:
        low, high = _NUMBERS[key]
        return _within(value, where, low, high, False)
    if key in _TIMES:
        low, high, low_allowed = _TIMES[key]
        return _within(value, where, low, high, low_allowed, " seconds")
    if key in _COUNTS:
        low, high = _COUNTS[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low \
                or (high is not None and value > high):
            allowed = f">= {low}" if high is None else f"within [{low}, {high:_}]"
            raise ConfigError(f"{where}: must be an integer {allowed}, got {shown(value)}")
        return value
    if key in _CHOICES:
        return _choice(key, value, where)
    if key == "capacity_margin":
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0.0 <= value < 1.0:
            raise ConfigError(f"{where}: must be a fraction within [0, 1), got {shown(value)}")
        return float(value)
    if key == "window_breach_probability":
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0.0 < value < 1.0:
            raise ConfigError(f"{where}: must be a probability within (0, 1), "
                              f"got {shown(value)}")
        return float(value)
    if key == "solve_offset_s":
        return _within(value, where, 0.0, 86_400.0, True, " seconds")
    if key == "tiers":
        if not isinstance(value, list) or len(value) > MAX_TIER_LIST:
            raise ConfigError(f"{where}: must be a list of at most {MAX_TIER_LIST} distinct "
                              f"tier names, got {shown(value)}")
        for i, t in enumerate(value):
            if not valid_name(t) or not t.strip():
                raise ConfigError(f"{where}[{i}]: not a valid tier name (printable, at most "
                                  f"200 characters), got {shown(t)}")
        seen: set[str] = set()
        for t in value:
            if t in seen:
                raise ConfigError(f"{where}: must be a list of distinct tier names, "
                                  f"{shown(t)} is listed twice")
            seen.add(t)
        return tuple(value)
    if key == "sla_s":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: must be a table of class = seconds, got {shown(value)}")
        return {_name(c, where, "class"): _within(v, f"{where}.{c}", 0.0, WEEK_S, False,
                                                  " seconds")
                for c, v in value.items()}
    if key == "slo":
        return _slo(value, where)
    if key == "pools":
        return _pools(value, where)
    if key == "disciplines":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: must be a table of tier = discipline (one of "
                              f"{', '.join(map(repr, DISCIPLINES))}), got {shown(value)}")
        out_d: dict[str, str] = {}
        for tier, name in value.items():
            at = f"{where}.{str(tier)[:200]}"
            if not isinstance(name, str) or name not in DISCIPLINES:
                raise ConfigError(f"{at}: must be one of {', '.join(map(repr, DISCIPLINES))}, "
                                  f"got {shown(name)}")
            out_d[_name(tier, where, "tier")] = name
        return out_d
    if key in ("remediation", "open_fed"):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: must be true or false, got {shown(value)}")
        return value
    if key == "remediation_costs":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: must be a table of kind = cost, got {shown(value)}")
        out = dict(REMEDIATION_COSTS)
        for kind, cost in value.items():
            if kind not in REMEDIATION_COSTS:
                raise ConfigError(f"{where}.{str(kind)[:200]}: unknown kind (known: "
                                  f"{sorted(REMEDIATION_COSTS)})")
            out[kind] = _within(cost, f"{where}.{kind}", 0.0, MAX_COST, True)
        return out
    if key == "visits":
        return _tier_class_table(value, where, "visits", MAX_VISITS, " visits per request")
    if key == "service_scv":
        return _tier_class_table(value, where, "SCV", MAX_SCV, " (service time's SCV)")
    raise ConfigError(f"{where}: unknown setting")   # pragma: no cover - filtered before


def _tier_class_table(value: Any, where: str, what: str, high: float, unit: str
                      ) -> dict[str, dict[str, float]]:
    """``{ tier = { class = number } }`` with each number within ``(0, high]``."""
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping)
                                                 for v in value.values()):
        raise ConfigError(f"{where}: must be a table of tier = {{class = {what}}}, "
                          f"got {shown(value)}")
    return {_name(t, where, "tier"): {
        _name(c, f"{where}.{t}", "class"): _within(v, f"{where}.{t}.{c}", 0.0, high, False, unit)
        for c, v in per.items()} for t, per in value.items()}


def _slo(value: Any, where: str) -> dict[str, dict[str, float]]:
    """``slo = { class = { p95 = 0.3, ... } }``: per class, quantile names of
    :data:`SLO_QUANTILES` and bounds in seconds (finite, > 0)."""
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping)
                                                 for v in value.values()):
        raise ConfigError(f"{where}: must be a table of class = {{ quantile = seconds }} "
                          f"(quantiles {', '.join(SLO_QUANTILES)}), got {shown(value)}")
    out: dict[str, dict[str, float]] = {}
    for cls, bounds in value.items():
        if not bounds:
            raise ConfigError(f"{where}.{cls}: must name at least one quantile "
                              f"({', '.join(SLO_QUANTILES)}), got {shown(bounds)}")
        for name in bounds:
            if name not in SLO_QUANTILES:
                raise ConfigError(f"{where}.{cls}.{name}: must be a quantile among "
                                  f"{', '.join(SLO_QUANTILES)} (the mean's SLO is sla_s), "
                                  f"got {shown(name)}")
        out[_name(cls, where, "class")] = {
            str(q): _within(v, f"{where}.{cls}.{q}", 0.0, WEEK_S, False, " seconds")
            for q, v in bounds.items()}
    return out


_POOL_KEYS = ("tier", "size", "holds")


def _pools(value: Any, where: str) -> dict[str, Pool]:
    """``pools = { name = { tier, size, holds } }``: each pool's own fields; how the pools sit
    on the system's tiers is :func:`check_pools`' (after the tiers are known)."""
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping)
                                                 for v in value.values()):
        raise ConfigError(f"{where}: must be a table of name = {{ tier, size, holds }}, "
                          f"got {shown(value)}")
    out: dict[str, Pool] = {}
    for name, body in value.items():
        at = f"{where}.{_name(name, where, 'pool')}"
        for key in body:
            if key not in _POOL_KEYS:
                raise ConfigError(f"{at}.{str(key)[:200]}: unknown setting (known: "
                                  f"{list(_POOL_KEYS)})")
        for key in _POOL_KEYS:
            if key not in body:
                raise ConfigError(f"{at}.{key}: missing (a pool needs tier, size and holds)")
        tier = body["tier"]
        if not isinstance(tier, str) or not valid_name(tier) or not tier.strip():
            raise ConfigError(f"{at}.tier: must be a tier name, got {shown(tier)}")
        size = body["size"]
        if isinstance(size, bool) or not isinstance(size, int) \
                or not 1 <= size <= MAX_POOL_SIZE:
            raise ConfigError(f"{at}.size: must be an integer within [1, {MAX_POOL_SIZE:_}] "
                              f"(tokens in the pool), got {shown(size)}")
        holds = body["holds"]
        if not isinstance(holds, list) or not holds \
                or not all(isinstance(t, str) and valid_name(t) for t in holds) \
                or len(set(holds)) != len(holds):
            raise ConfigError(f"{at}.holds: must be a non-empty list of distinct tier names, "
                              f"got {shown(holds)}")
        if holds[0] != tier:
            raise ConfigError(f"{at}.holds: must start with the owning tier {tier!r} (the "
                              f"token is taken there), got {shown(holds)}")
        out[name] = Pool(tier=tier, size=size, holds=tuple(holds))
    return out


def check_pools(pools: Mapping[str, Pool], tiers: tuple[str, ...], where: str) -> None:
    """How the pools sit on the system's ``tiers``: each pool's ``holds`` a contiguous run of
    ``tiers`` in visit order (the token is taken before the first and given back after the
    last); two pools either hold disjoint runs or one's run lies within the other's (properly
    nested: the inner token is taken while the outer one is held). A run against the visit
    order is refused as a cycle (its tokens would be taken in an order other requests reverse:
    the hold-and-wait cycle of a deadlock, Coffman et al. 1971). Partly overlapping runs
    are refused: no order of taking the tokens holds both as configured, and the layered
    model's aggregation (Rolia and Vetland 1995) needs each pool's held tiers to be one
    subnetwork. A pool named like a tier is refused: a prediction names either as its
    bottleneck. :class:`ConfigError` names the pool's key."""
    if not pools:
        return
    runs: dict[str, tuple[int, int]] = {}
    for name, pool in pools.items():
        at = f"{where}.pools.{name}"
        if not tiers:
            raise ConfigError(f"{at}: a pool needs the system's tiers in visit order "
                              f"({where}.tiers)")
        if name in tiers:
            raise ConfigError(f"{at}: a pool's name must differ from the system's tiers "
                              f"{list(tiers)} (bottleneck_tier and breach_tier name either)")
        if pool.tier not in tiers:
            raise ConfigError(f"{at}.tier: {pool.tier!r} is not one of the system's tiers "
                              f"{list(tiers)} (the tier that owns the pool)")
        for t in pool.holds:
            if t not in tiers:
                raise ConfigError(f"{at}.holds: {t!r} is not one of the system's tiers "
                                  f"{list(tiers)}")
        first = tiers.index(pool.holds[0])
        if tuple(tiers[first:first + len(pool.holds)]) != pool.holds:
            back = [t for a, t in zip(pool.holds, pool.holds[1:])
                    if tiers.index(t) < tiers.index(a)]
            cycle = (f" ({back[0]!r} comes before {pool.holds[pool.holds.index(back[0]) - 1]!r}:"
                     f" a token held back to an earlier tier makes a cycle -- requests holding "
                     f"one pool waiting for another's tokens and the reverse, which can "
                     f"deadlock)") if back else ""
            raise ConfigError(f"{at}.holds: must be consecutive tiers in visit order "
                              f"{list(tiers)} starting at {pool.tier!r}, got "
                              f"{list(pool.holds)}{cycle}")
        runs[name] = (first, first + len(pool.holds))
    names = list(runs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (a0, a1), (b0, b1) = runs[a], runs[b]
            disjoint = a1 <= b0 or b1 <= a0
            nested = (a0 <= b0 and b1 <= a1) or (b0 <= a0 and a1 <= b1)
            if not (disjoint or nested):
                raise ConfigError(f"{where}.pools.{b}.holds: overlaps pool {a!r} "
                                  f"({list(pools[a].holds)}) without nesting in it, got "
                                  f"{list(pools[b].holds)}: pools must hold disjoint or nested "
                                  f"runs of tiers")


def _name(key: str, where: str, what: str) -> str:
    """A table key that names a tier or class (``"*"``: every other class)."""
    if key != "*" and (not valid_name(key) or not key.strip()):
        raise ConfigError(f"{where}: {shown(key)} is not a valid {what} name (printable, at "
                          f"most 200 characters)")
    return key


def secret(env: Mapping[str, str], name: str) -> str | None:
    """``name`` from the environment, or the contents of the file named by ``name_FILE``."""
    if env.get(name):
        return env[name]
    path = env.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{name}_FILE: cannot read {path!r} ({exc.strerror})") from None
    return None


@dataclass(frozen=True)
class KafkaSettings:
    """Kafka connection. ``sasl_password`` comes from ``PERFCAST_KAFKA_SASL_PASSWORD[_FILE]``."""

    bootstrap: str = "localhost:9092"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    topic_prefix: str = "perfcast"
    #: how long a command waits at start for a broker to answer (``--connect-timeout``)
    connect_timeout_s: float = 10.0

    def topic(self, name: str) -> str:
        """Full topic name, e.g. ``perfcast.windows``."""
        return f"{self.topic_prefix}.{name}"


@dataclass(frozen=True)
class InfluxSettings:
    """InfluxDB v2 API connection. ``token`` comes from ``PERFCAST_INFLUX_TOKEN[_FILE]``."""

    url: str | None = None            # None: no InfluxDB sink
    org: str = "perfcast"
    bucket: str = "perfcast"
    token: str | None = field(default=None, repr=False)
    batch_size: int = 10_000
    flush_interval_s: float = 1.0
    max_buffer: int = 100_000
    #: how long the worker waits at start for InfluxDB to answer (``--connect-timeout``)
    connect_timeout_s: float = 10.0


#: environment variable -> (section, key); ``*_FILE`` variants exist for the secrets
ENVIRONMENT = {
    "PERFCAST_KAFKA_BOOTSTRAP": ("kafka", "bootstrap"),
    "PERFCAST_KAFKA_SECURITY_PROTOCOL": ("kafka", "security_protocol"),
    "PERFCAST_KAFKA_SASL_MECHANISM": ("kafka", "sasl_mechanism"),
    "PERFCAST_KAFKA_SASL_USERNAME": ("kafka", "sasl_username"),
    "PERFCAST_KAFKA_SSL_CAFILE": ("kafka", "ssl_cafile"),
    "PERFCAST_KAFKA_TOPIC_PREFIX": ("kafka", "topic_prefix"),
    "PERFCAST_INFLUX_URL": ("influxdb", "url"),
    "PERFCAST_INFLUX_ORG": ("influxdb", "org"),
    "PERFCAST_INFLUX_BUCKET": ("influxdb", "bucket"),
}
_SECRETS = {"PERFCAST_KAFKA_SASL_PASSWORD": ("kafka", "sasl_password"),
            "PERFCAST_INFLUX_TOKEN": ("influxdb", "token")}


@dataclass(frozen=True)
class Limits:
    """What one pipeline process keeps at most (``[limits]``; docs/configuration.md, "Limits
    and memory"). A window beyond a limit is dead-lettered naming the limit; before a new
    system is refused, systems idle for ``idle_system_s`` of event time (no window while the
    stream's newest ``end`` advanced that far) are evicted -- their state dropped, a system
    that comes back starts afresh -- and counted (``Pipeline.evicted``)."""

    #: systems kept in memory
    max_systems: int = 100_000
    #: tiers per system
    max_tiers: int = 64
    #: request classes per tier
    max_classes: int = 256
    #: event-time seconds without a window after which a system may be evicted
    idle_system_s: float = 86_400.0


#: ``[limits]``: key -> (lowest, highest); whole numbers except ``idle_system_s``
_LIMITS = {"max_systems": (1, 10_000_000), "max_tiers": (1, 4096), "max_classes": (1, 10_000),
           "idle_system_s": (1.0, 366 * 86_400.0)}


def _limits(raw: Any) -> Limits:
    return _section(raw, "limits", _LIMITS, ("idle_system_s",), Limits)


#: ``[plausibility]``: key -> (lowest, highest); whole numbers for the counts
_PLAUSIBILITY = {"max_ahead_s": (1.0, 366 * 86_400.0), "confirm_windows": (1, 1000),
                 "overlap_tolerance": (0.0, 0.5), "jump_factor": (2.0, 1e9),
                 "recent_windows": (5, 10_000), "users_floor": (0.0, 1e9),
                 "rate_floor": (0.0, 1e9), "min_demand_s": (0.0, 1.0),
                 "utilization_resolution": (0.0, 1.0)}


def _plausibility(raw: Any) -> Plausibility:
    return _section(raw, "plausibility", _PLAUSIBILITY,
                    tuple(k for k, (low, _) in _PLAUSIBILITY.items() if isinstance(low, float)),
                    Plausibility)


def _section(raw: Any, section: str, ranges: Mapping[str, tuple[float, float]],
             numbers: tuple[str, ...], cls: Any) -> Any:
    """``cls`` from the table ``[section]``: each key within its ``ranges`` (both ends
    included), whole numbers except the keys in ``numbers``; the error names the key."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{section}: must be a table, got {shown(raw)}")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in ranges:
            raise ConfigError(f"{section}.{key}: unknown setting (known: {sorted(ranges)})")
        low, high = ranges[key]
        where = f"{section}.{key}"
        if key in numbers:
            values[key] = _within(value, where, low, high, True,
                                  " seconds" if key.endswith("_s") else "")
        elif isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"{where}: must be an integer within [{low}, {high:_}], "
                              f"got {shown(value)}")
        else:
            values[key] = value
    return cls(**values)


@dataclass(frozen=True)
class Config:
    """Everything the pipeline reads: system defaults, per-system overrides, connections."""

    defaults: SystemConfig = field(default_factory=SystemConfig)
    systems: Mapping[str, SystemConfig] = field(default_factory=dict)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    influxdb: InfluxSettings = field(default_factory=InfluxSettings)
    #: a window's utilization in ``(1, 1 + utilization_tolerance]`` is clamped to 1 and flagged,
    #: above it dead-lettered (``[defaults] utilization_tolerance``, within ``[0, 0.1]``;
    #: :func:`streams.core.records.parse_window`)
    utilization_tolerance: float = UTILIZATION_TOLERANCE
    #: what one pipeline process keeps at most (``[limits]``)
    limits: Limits = field(default_factory=Limits)
    #: the input's format and, for metric samples, their mapping to windows (``[input]``;
    #: :class:`streams.core.input_config.InputFormat`; ``None``: window records)
    input: Any = None
    #: thresholds of the plausibility rules (``[plausibility]``, :mod:`streams.core.plausibility`)
    plausibility: Plausibility = field(default_factory=Plausibility)

    def system(self, name: str) -> SystemConfig:
        """Settings of system ``name`` (the defaults when it is not configured)."""
        return self.systems.get(name, self.defaults)


#: connection settings that are numbers (the others are strings): key -> (type, lowest,
#: highest)
_CONNECTION_NUMBERS = {"batch_size": (int, 1, 10_000_000), "max_buffer": (int, 1, 1_000_000_000),
                       "flush_interval_s": (float, 0.0, 3600.0),
                       "connect_timeout_s": (float, 0.0, 3600.0)}


def _connection_value(key: str, value: Any, where: str) -> Any:
    if key in _CONNECTION_NUMBERS:
        kind, low, high = _CONNECTION_NUMBERS[key]
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(f"{where}: must be an integer within [{low}, {high:_}], "
                                  f"got {shown(value)}")
            return value
        return _within(value, where, low, high, False, " seconds")
    if not isinstance(value, str):
        raise ConfigError(f"{where}: must be a string, got {shown(value)}")
    return value


def _connections(raw: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    sections: dict[str, dict[str, Any]] = {"kafka": {}, "influxdb": {}}
    for section, cls in (("kafka", KafkaSettings), ("influxdb", InfluxSettings)):
        given = raw.get(section, {})
        if not isinstance(given, Mapping):
            raise ConfigError(f"{section}: must be a table, got {shown(given)}")
        known = {f.name for f in fields(cls)} - {"sasl_password", "token"}
        for key, value in given.items():
            if key not in known:
                hint = " (secrets come from the environment)" if key in ("sasl_password",
                                                                         "token") else ""
                raise ConfigError(f"{section}.{key}: not a setting here{hint}")
            sections[section][key] = _connection_value(key, value, f"{section}.{key}")
    for var, (section, key) in ENVIRONMENT.items():
        if env.get(var):
            sections[section][key] = env[var]
    for var, (section, key) in _SECRETS.items():
        value = secret(env, var)
        if value is not None:
            sections[section][key] = value
    return {"kafka": KafkaSettings(**sections["kafka"]),
            "influxdb": InfluxSettings(**sections["influxdb"])}


def _input(raw: Any) -> Any:
    """``[input]`` (:mod:`streams.core.input_config`); ``None`` without one."""
    if raw is None:
        return None
    parsed = input_from_mapping(raw)
    return parsed if parsed.samples else None


def load_config(path: str | Path | None = None,
                env: Mapping[str, str] | None = None) -> Config:
    """Read ``path`` (TOML; ``None``: defaults only) and apply the environment ``env``
    (default ``os.environ``). :class:`ConfigError` names the offending key."""
    raw: Mapping[str, Any] = {}
    if path is not None:
        try:
            with open(path, "rb") as fh:
                raw = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"config: cannot read {str(path)!r} ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config: {str(path)!r} is not valid TOML ({exc})") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config: {str(path)!r} is not UTF-8 text (byte "
                              f"{exc.object[exc.start]:#04x} at offset {exc.start}; TOML is "
                              f"UTF-8)") from None
        except RecursionError:
            raise ConfigError(f"config: {str(path)!r} is not valid TOML (nested too deeply: "
                              f"a configuration is a few tables deep)") from None
    unknown = sorted(set(raw) - {"defaults", "systems", "kafka", "influxdb", "limits",
                                 "input", "plausibility"})
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown section (known: defaults, systems, kafka, "
                          "influxdb, limits, input, plausibility)")
    defaults_raw = raw.get("defaults", {})
    tolerance = UTILIZATION_TOLERANCE
    if isinstance(defaults_raw, Mapping):
        for key in _INPUT_SETTINGS:
            if key in defaults_raw:
                tolerance = _utilization_tolerance(defaults_raw[key], f"defaults.{key}")
        defaults_raw = {k: v for k, v in defaults_raw.items() if k not in _INPUT_SETTINGS}
    defaults = _system(defaults_raw, "defaults", SystemConfig())
    systems_raw = raw.get("systems", {})
    if not isinstance(systems_raw, Mapping):
        raise ConfigError(f"systems: must be a table of systems, got {shown(systems_raw)}")
    systems = {_name(name, "systems", "system"): _system(body, f"systems.{name}", defaults)
               for name, body in systems_raw.items()}
    limits = _limits(raw.get("limits", {}))
    for where, system in [("defaults", defaults)] + [(f"systems.{n}", s)
                                                     for n, s in systems.items()]:
        if len(system.tiers) > limits.max_tiers:
            raise ConfigError(f"{where}.tiers: lists {len(system.tiers)} tiers, more than "
                              f"[limits] max_tiers ({limits.max_tiers})")
        check_pools(system.pools, system.tiers, where)
        for key in ("disciplines", "service_scv"):
            for tier in getattr(system, key):
                if tier == "*" or (system.tiers and tier not in system.tiers):
                    raise ConfigError(f"{where}.{key}.{tier[:200]}: not one of the system's "
                                      f"tiers {list(system.tiers)[:20]}")
    return Config(defaults=defaults, systems=systems, utilization_tolerance=tolerance,
                  limits=limits, input=_input(raw.get("input")),
                  plausibility=_plausibility(raw.get("plausibility", {})),
                  **_connections(raw, os.environ if env is None else env))
