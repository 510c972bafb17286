"""The ``[input]`` configuration: which format the source topic (or a file) carries, and, for
the metric formats, which metrics make a tier's window (docs/formats.md).

::

    [input]
    format = "telegraf"          # or contract (default), prometheus-kafka-adapter, otlp-json
    window_s = 5                 # windows end at offset_s + k window_s (epoch seconds)
    system_label = "namespace"   # the system is this label's value (or: system = "shop")
    tier_label = "service"       # the tier is this label's value (or: [input.tiers.NAME] tables)
    class_label = "uri"          # the request class of the completions (and time_*) series
    busy_seconds = "procstat_cpu_time"   # a counter of busy core-seconds (or: utilization)
    cores = 2                    # a number, or a metric
    completions = 'http_requests_total{status!="500"}'

    [input.tiers.db]             # a tier's own metrics (the settings above are its defaults)
    utilization = "postgres_busy_fraction"

Each metric setting is a *selector*: a metric name with optional label matchers, ``name``,
``name{label="value", other!="value"}``, as in PromQL (only ``=`` and ``!=``), or a list of
selectors whose series are taken together (``["procstat_cpu_time_user",
"procstat_cpu_time_system"]``: the busy time is their sum). The metric
name is the format's (``<measurement>_<field>`` for Telegraf, the OTLP metric name,
``<name>_count`` / ``<name>_sum`` for an OTLP histogram; :mod:`streams.sources.samples`).
``response_time_histogram`` selects cumulative latency buckets with an ``le`` label (the
entry tier's ``<name>_bucket``; an OTLP histogram's buckets and a Telegraf histogram's are
such samples: :mod:`streams.sources.samples`), read at ``quantiles`` (default p50, p90, p95,
p99) into the window's ``response_time_quantiles_s``. ``[input.tiers.NAME.pools.POOL]`` maps
a pool's ``size``, ``busy``, ``waiting`` (and ``acquire_s``) to gauges averaged over the window
(:mod:`streams.core.pool_settings`): the window's ``pools``.
The fields are those of the Prometheus source (:class:`streams.sources.window_rules.TierSpec`),
with the same meaning and the same window rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from estimators.histogram import DEFAULT_QUANTILES
from streams.core.config_error import ConfigError
from streams.core.pool_settings import pool_table
from streams.core.records import valid_name
from streams.core.source_settings import (WindowGrid, number_setting, quantiles_setting,
                                          string_setting, tier_table, window_setting)

__all__ = ["Selector", "TierMapping", "InputFormat", "parse_selector", "input_from_mapping",
           "METRIC_FIELDS", "FORMATS", "TIMESTAMP_UNITS", "MIN_WINDOW_S"]

#: the input formats: ``contract`` is perfcast's own window record (:mod:`streams.core.records`)
FORMATS = ("contract", "telegraf", "prometheus-kafka-adapter", "otlp-json")

#: Telegraf's numeric timestamps: unit -> units per millisecond as (numerator, denominator)
TIMESTAMP_UNITS = {"s": (1, 1000), "ms": (1, 1), "us": (1000, 1), "ns": (1_000_000, 1)}

#: the settings of a tier that select metrics (``cores`` may also be a number)
METRIC_FIELDS = ("busy_seconds", "utilization", "cores", "completions", "time_sum",
                 "time_count", "users", "response_time_histogram")

_SELECTOR = re.compile(r"\s*([A-Za-z_:][\w:.\-/]*)\s*(?:\{(.*)\})?\s*", re.S)
_MATCHER = re.compile(r"\s*([^\s=!,{}\"]+)\s*(!=|=)\s*\"((?:[^\"\\]|\\.)*)\"\s*(?:,|$)")


@dataclass(frozen=True)
class Selector:
    """A metric name and label matchers: ``equal`` must hold, ``not_equal`` must not."""

    name: str
    equal: tuple[tuple[str, str], ...] = ()
    not_equal: tuple[tuple[str, str], ...] = ()
    text: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        """The label matchers hold (the name is matched by the caller's index)."""
        return (all(labels.get(k) == v for k, v in self.equal)
                and all(labels.get(k) != v for k, v in self.not_equal))


def parse_selector(text: Any, where: str) -> Selector:
    """``name`` or ``name{a="x", b!="y"}``; :class:`ConfigError` names ``where``."""
    m = _SELECTOR.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ConfigError(f"{where}: must be a metric name with optional label matchers, "
                          f"name{{label=\"value\", label!=\"value\"}}, got {text!r}")
    equal, not_equal = [], []
    body, pos = (m.group(2) or "").strip(), 0
    while pos < len(body):
        mm = _MATCHER.match(body, pos)
        if mm is None or mm.end() == pos:
            raise ConfigError(f"{where}: cannot read the label matchers at {body[pos:]!r} "
                              f"(only label=\"value\" and label!=\"value\")")
        value = re.sub(r"\\(.)", r"\1", mm.group(3))
        (equal if mm.group(2) == "=" else not_equal).append((mm.group(1), value))
        pos = mm.end()
    return Selector(m.group(1), tuple(equal), tuple(not_equal), text.strip())


#: a field's selectors (their series are taken together)
Selectors = tuple[Selector, ...]


@dataclass(frozen=True)
class TierMapping:
    """The selectors of one tier's window fields (module docstring)."""

    completions: Selectors
    busy_seconds: Selectors | None = None
    utilization: Selectors | None = None
    cores: int | Selectors = 1
    time_sum: Selectors | None = None
    time_count: Selectors | None = None
    users: Selectors | None = None
    #: cumulative latency buckets (``le``) per class: the window's measured quantiles
    response_time_histogram: Selectors | None = None
    #: their levels
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    class_label: str = "handler"
    #: ``(pools.<pool>.<key>, selectors)``: gauges of pools' occupancy, averaged over the
    #: window (:mod:`streams.core.pool_settings`)
    pools: tuple[tuple[str, Selectors], ...] = ()

    def selectors(self) -> dict[str, Selectors]:
        """The fields that are selectors, by field (a pool's by ``pools.<pool>.<key>``)."""
        out = {f: getattr(self, f) for f in METRIC_FIELDS
               if isinstance(getattr(self, f), tuple)}
        out.update(self.pools)
        return out

    def by_name(self) -> dict[str, list[tuple[str, Selector]]]:
        """``metric name -> [(field, selector)]``: the index a sample is looked up in."""
        out: dict[str, list[tuple[str, Selector]]] = {}
        for f, sels in self.selectors().items():
            for sel in sels:
                out.setdefault(sel.name, []).append((f, sel))
        return out


@dataclass(frozen=True)
class InputFormat(WindowGrid):
    """The ``[input]`` table (module docstring); ``format = "contract"``: window records."""

    format: str = "contract"
    window_s: float = 5.0
    offset_s: float = 0.0
    #: a window is made once every series of its tier has a sample at or after its end, or
    #: once any has one ``lag_s`` after it (the others are then taken as they are)
    lag_s: float = 5.0
    #: a series' latest sample counts as its value for this long (Prometheus' lookback, but
    #: shorter: pushed samples have no staleness marker; above the agents' interval)
    lookback_s: float = 60.0
    #: a sample of a metric no selector wants is dead-lettered (else ignored)
    strict: bool = False
    #: the utilization gauge's samples are multiplied by this (0.01: a percentage, as
    #: Telegraf's ``cpu`` plugin's ``usage_active``)
    utilization_scale: float = 1.0
    #: Telegraf's ``json_timestamp_units``
    timestamp_unit: str = "s"
    system: str | None = None
    system_label: str | None = None
    tier_label: str | None = None
    missing_class: str = "other"
    #: with ``tier_label``: the mapping of a tier without a table of its own
    default: TierMapping | None = None
    tiers: Mapping[str, TierMapping] = field(default_factory=dict)

    @property
    def samples(self) -> bool:
        """The records are metric samples, mapped to windows (not window records)."""
        return self.format != "contract"


#: the shortest window cut from samples: every window between two samples is made (or counted
#: as a gap) by the window rules, and agents sample every second or more (Telegraf's
#: ``interval`` defaults to 10 s), so 1-ms windows made 5,000 per 5-s sample interval and ran
#: for minutes on 200 records
MIN_WINDOW_S = 0.1

_KEYS = {"format", "window_s", "offset_s", "lag_s", "lookback_s", "strict", "timestamp_unit",
         "utilization_scale",
         "system", "system_label", "tier_label", "missing_class", "class_label", "tiers",
         "quantiles", "pools", *METRIC_FIELDS}
_TIER_KEYS = {"class_label", "quantiles", "pools", *METRIC_FIELDS}


def _selectors(value: Any, where: str) -> Selectors:
    """A selector or a non-empty list of them (taken together)."""
    if isinstance(value, list) and value:
        return tuple(parse_selector(v, f"{where}[{i}]") for i, v in enumerate(value))
    return (parse_selector(value, where),)


def _fields(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in METRIC_FIELDS:
        if f not in raw:
            continue
        value = raw[f]
        if f == "cores" and not isinstance(value, str):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4096:
                raise ConfigError(f"{where}.cores: must be a whole number within [1, 4096] or "
                                  f"a metric selector, got {value!r}")
            out[f] = value
        elif isinstance(value, list) and value:
            out[f] = tuple(parse_selector(v, f"{where}.{f}[{i}]") for i, v in enumerate(value))
        else:
            out[f] = (parse_selector(value, f"{where}.{f}"),)
    if "class_label" in raw:
        out["class_label"] = string_setting(raw, "class_label", where)
    if "quantiles" in raw:
        out["quantiles"] = quantiles_setting(raw, where, DEFAULT_QUANTILES)
    if "pools" in raw:
        out["pools"] = pool_table(raw["pools"], f"{where}.pools", _selectors)
    return out


def _mapping(fields: Mapping[str, Any], where: str) -> TierMapping:
    if "completions" not in fields:
        raise ConfigError(f"{where}.completions: required (the per-class completion counters)")
    if ("busy_seconds" in fields) == ("utilization" in fields):
        raise ConfigError(f"{where}: exactly one of busy_seconds (a counter of busy "
                          f"core-seconds) and utilization (a busy-fraction gauge) is needed, "
                          f"got {'both' if 'busy_seconds' in fields else 'neither'}")
    return TierMapping(**fields)


def input_from_mapping(raw: Any) -> InputFormat:
    """The ``[input]`` table as an :class:`InputFormat`; :class:`ConfigError` names the key and
    the value."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"input: must be a table, got {raw!r}")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ConfigError(f"input.{unknown[0]}: unknown setting (known: {sorted(_KEYS)})")
    fmt = raw.get("format", "contract")
    if fmt not in FORMATS:
        raise ConfigError(f"input.format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "contract":
        extra = sorted(set(raw) - {"format"})
        if extra:
            raise ConfigError(f"input.{extra[0]}: only with a metric format (format = "
                              f"\"telegraf\", ...); window records carry their own windows")
        return InputFormat()
    window_s = window_setting(raw, "input")
    if window_s < MIN_WINDOW_S:
        raise ConfigError(f"input.window_s: must be at least {MIN_WINDOW_S:g} s for a metric "
                          f"format (each window is cut from the agents' samples, seconds "
                          f"apart), got {window_s!r}")
    unit = raw.get("timestamp_unit", "s")
    if unit not in TIMESTAMP_UNITS:
        raise ConfigError(f"input.timestamp_unit: must be one of {', '.join(TIMESTAMP_UNITS)} "
                          f"(Telegraf's json_timestamp_units), got {unit!r}")
    strict = raw.get("strict", False)
    if not isinstance(strict, bool):
        raise ConfigError(f"input.strict: must be true or false, got {strict!r}")
    system = string_setting(raw, "system", "input")
    system_label = string_setting(raw, "system_label", "input")
    if (system is None) == (system_label is None):
        raise ConfigError("input: exactly one of system (the system's name) and system_label "
                          "(the label naming it) is needed, got "
                          f"{'both' if system else 'neither'}")
    if system is not None and not valid_name(system):
        raise ConfigError(f"input.system: must be a valid system name, got {system!r}")
    missing_class = string_setting(raw, "missing_class", "input") or "other"
    if not valid_name(missing_class):
        raise ConfigError(f"input.missing_class: must be a valid class name, "
                          f"got {missing_class!r}")
    tier_label = string_setting(raw, "tier_label", "input")
    base = _fields(raw, "input")
    base.setdefault("class_label", "handler")
    tiers_raw = raw.get("tiers", {})
    if not isinstance(tiers_raw, Mapping):
        raise ConfigError(f"input.tiers: must be a table of tiers, got {tiers_raw!r}")
    tiers = {}
    for name, body in tiers_raw.items():
        where = f"input.tiers.{name}"
        body = tier_table(name, body, where, _TIER_KEYS, "metric selectors")
        own = _fields(body, where)
        if "busy_seconds" in own or "utilization" in own:     # the tier's own busy time
            own.setdefault("busy_seconds", None)
            own.setdefault("utilization", None)
        merged = {**base, **own}
        tiers[name] = _mapping({k: v for k, v in merged.items() if v is not None}, where)
    default = None
    if tier_label is None and not tiers:
        raise ConfigError("input: tier_label (the label naming the tier) or [input.tiers.NAME] "
                          "tables are needed")
    if tier_label is not None and (not tiers or "completions" in base):
        default = _mapping(base, "input")
    return InputFormat(
        format=fmt, window_s=window_s,
        offset_s=number_setting(raw, "offset_s", "input", 0.0, 0.0, 86_400.0, True),
        lag_s=number_setting(raw, "lag_s", "input", window_s, 0.0, 86_400.0, True),
        lookback_s=number_setting(raw, "lookback_s", "input", 60.0, 0.0, 7 * 86_400.0),
        strict=strict, timestamp_unit=unit,
        utilization_scale=number_setting(raw, "utilization_scale", "input", 1.0, 0.0, 1.0), system=system, system_label=system_label,
        tier_label=tier_label, missing_class=missing_class, default=default, tiers=tiers)
