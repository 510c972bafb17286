"""Response-time quantiles from histograms: Prometheus' ``histogram_quantile`` on cumulative
buckets, OpenTelemetry's exponential buckets as cumulative ones, and the names of quantile
levels (``p95``, ``p99.9``).

**The quantile** (:func:`bucket_quantile`) follows Prometheus' ``histogram_quantile``
(Prometheus authors 2017, "Histograms and summaries"; ``promql/quantile.go``): the buckets
are cumulative counts ``c_i`` of observations ``<= le_i``, the last one ``le = +Inf`` holding
every observation. The rank ``r = q c_inf`` falls in the first bucket ``b`` with
``c_b >= r``; the quantile is interpolated linearly inside it,
``le_{b-1} + (le_b - le_{b-1}) (r - c_{b-1}) / (c_b - c_{b-1})`` (``le_{-1} = 0``, or the
first bound itself when it is ``<= 0``). A rank in the ``+Inf`` bucket gives the largest
finite bound: a lower bound of the quantile, as Prometheus gives it. So the result is exact
only to the bucket's width ("within bucket resolution"): linear interpolation assumes the
observations spread evenly inside a bucket.

**Bad histograms are refused, never repaired silently**: a negative or NaN count or bound, a
missing ``+Inf`` bucket, and cumulative counts that fall from one bound to the next by more
than a rounding residue (:data:`MONOTONE_TOLERANCE` of the total, Prometheus' "small deltas"
its ``histogram_quantile`` ignores) raise :class:`HistogramError` naming the field, the value
and the reason. No observations give no quantile (``None``), not a number.

**Exponential buckets** (:func:`exponential_cumulative`; OpenTelemetry authors 2023,
"Metrics data model: ExponentialHistogram"): with ``base = 2^(2^-scale)`` the bucket of index
``i`` holds the observations in ``(base^i, base^(i+1)]``; ``positive.bucketCounts[k]`` is
the bucket of index ``offset + k``, and ``zeroCount`` those within ``zeroThreshold`` of 0.
They are turned into cumulative buckets with ``le = base^(offset + k + 1)`` (and
``le = zeroThreshold`` for the zero bucket), so one quantile rule serves every format.
Response times are not negative: a histogram with negative observations is refused.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

__all__ = ["HistogramError", "bucket_quantile", "cumulative_from_counts",
           "exponential_cumulative", "quantile_level", "level_name", "LEVELS",
           "check_quantiles", "format_le", "parse_le", "DEFAULT_QUANTILES"]

#: the named quantile levels (as the ``slo`` configuration's)
LEVELS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99.9": 0.999}

#: the quantiles a measured window carries unless configured otherwise
DEFAULT_QUANTILES = (0.5, 0.9, 0.95, 0.99)

#: cumulative counts may fall by this fraction of the total from one bound to the next (float
#: residue of summed rates) and are then taken as level; more is a broken histogram
MONOTONE_TOLERANCE = 1e-9

#: the most buckets one histogram may have (OpenTelemetry's default exponential histogram has
#: at most 160 per sign; Prometheus' native ones are capped by the client)
MAX_BUCKETS = 4096

#: exponential histograms' scales (OpenTelemetry: -10 to 20)
MIN_SCALE, MAX_SCALE = -10, 20

_NAME = re.compile(r"p(\d{1,2}(?:\.\d{1,6})?)")


class HistogramError(ValueError):
    """A histogram or a quantile that cannot be read: ``field``, ``value`` and ``reason``."""

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field, self.value, self.reason = field, value, reason
        super().__init__(f"{field}: {reason} (got {value!r:.120})")


def quantile_level(key: Any, where: str) -> float:
    """A quantile's level from its name: ``p95`` -> 0.95, ``p99.9`` -> 0.999, or the level as
    a number or its text (``0.95``, ``"0.95"``); :class:`HistogramError` unless within
    (0, 1)."""
    if isinstance(key, str):
        m = _NAME.fullmatch(key.strip())
        if m is not None:
            level = float(m.group(1)) / 100.0
        else:
            try:
                level = float(key)
            except ValueError:
                raise HistogramError(where, key, "a quantile must be named p50, p90, p95, p99, "
                                                 "p99.9 (pNN) or given as a number within "
                                                 "(0, 1)") from None
    elif isinstance(key, (int, float)) and not isinstance(key, bool):
        level = float(key)
    else:
        raise HistogramError(where, key, "a quantile must be pNN or a number within (0, 1)")
    if not 0.0 < level < 1.0:          # also NaN
        raise HistogramError(where, key, "a quantile must be within (0, 1) (exclusive): p0 "
                                         "and p100 are the minimum and the maximum, which a "
                                         "histogram does not give")
    return level


def level_name(level: float) -> str:
    """``0.95`` -> ``"p95"``, ``0.999`` -> ``"p99.9"``, ``0.975`` -> ``"p97.5"``."""
    text = f"{100.0 * level:.6f}".rstrip("0").rstrip(".")
    return f"p{text}"


def check_quantiles(raw: Any, where: str) -> dict[str, float]:
    """One class's measured quantiles ``{name: seconds}`` checked (names by
    :func:`quantile_level`, values finite and ``>= 0``, not falling as the level rises) and
    keyed by their canonical names (:func:`level_name`)."""
    if not isinstance(raw, Mapping) or not raw:
        raise HistogramError(where, raw, "must be an object of quantile -> seconds, e.g. "
                                         "{\"p95\": 0.3}")
    levels: list[tuple[float, str, float]] = []
    for key, value in raw.items():
        level = quantile_level(key, f"{where}.{key}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise HistogramError(f"{where}.{key}", value, "must be a finite number of seconds "
                                                          ">= 0")
        levels.append((level, str(key), float(value)))
    levels.sort()
    out: dict[str, float] = {}
    for (l0, k0, v0), (l1, k1, v1) in zip(levels, levels[1:]):
        if l0 == l1:
            raise HistogramError(f"{where}.{k1}", v1, f"the same quantile as {k0!r}")
        if v1 < v0:
            raise HistogramError(f"{where}.{k1}", v1, f"below {k0} ({v0!r}): quantiles must "
                                                      f"not fall as the level rises")
    for level, _, value in levels:
        out[level_name(level)] = value
    return out


def parse_le(text: Any, where: str) -> float:
    """A bucket's upper bound from its ``le`` label (``"0.05"``, ``"+Inf"``)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise HistogramError(where, text, "a bucket's le must be a number or +Inf") from None
    if math.isnan(value) or value == -math.inf:
        raise HistogramError(where, text, "a bucket's le must be a number or +Inf")
    return value


def format_le(bound: float) -> str:
    """A bound as Prometheus writes ``le`` (``+Inf``, shortest round-trip text)."""
    return "+Inf" if bound == math.inf else repr(float(bound))


def bucket_quantile(level: float, buckets: Sequence[tuple[float, float]],
                    where: str = "buckets") -> float | None:
    """The quantile at ``level`` of cumulative ``buckets`` ``[(le, count)]`` (any order;
    module docstring); ``None`` when they hold no observation."""
    if not 0.0 < level < 1.0:
        raise HistogramError(f"{where}.quantile", level, "must be within (0, 1)")
    if len(buckets) > MAX_BUCKETS:
        raise HistogramError(where, len(buckets), f"more than {MAX_BUCKETS} buckets")
    merged: dict[float, float] = {}
    for le, count in buckets:
        if isinstance(le, bool) or not isinstance(le, (int, float)) or math.isnan(le):
            raise HistogramError(f"{where}.le", le, "a bucket's bound must be a number")
        if isinstance(count, bool) or not isinstance(count, (int, float)) \
                or not math.isfinite(count) or count < 0:
            raise HistogramError(f"{where}{{le={format_le(le)}}}", count,
                                 "a bucket's count must be a finite number >= 0")
        merged[float(le)] = merged.get(float(le), 0.0) + float(count)
    bounds = sorted(merged)
    if not bounds or bounds[-1] != math.inf:
        raise HistogramError(where, [format_le(b) for b in bounds],
                             "no +Inf bucket (it holds every observation)")
    counts = [merged[b] for b in bounds]
    total = counts[-1]
    slack = MONOTONE_TOLERANCE * max(total, 1.0)
    for i in range(1, len(counts)):
        if counts[i] < counts[i - 1]:
            if counts[i - 1] - counts[i] > slack:
                raise HistogramError(
                    f"{where}{{le={format_le(bounds[i])}}}", counts[i],
                    f"not monotone: below the count of le={format_le(bounds[i - 1])} "
                    f"({counts[i - 1]:g}); cumulative bucket counts must not fall")
            counts[i] = counts[i - 1]
    if len(bounds) < 2 or not total > 0:
        return None
    rank = level * total
    b = next(i for i, c in enumerate(counts) if c >= rank)
    if b == len(bounds) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count) if count > 0 else end


def cumulative_from_counts(bounds: Sequence[float], counts: Sequence[float],
                           where: str = "histogram") -> list[tuple[float, float]]:
    """OTLP explicit buckets -- ``counts[i]`` observations in ``(bounds[i-1], bounds[i]]``, the
    last above every bound -- as cumulative ``[(le, count)]`` ending at ``+Inf``."""
    if len(counts) != len(bounds) + 1:
        raise HistogramError(f"{where}.bucketCounts", len(counts),
                             f"needs one more count than explicitBounds ({len(bounds)} "
                             f"bounds)")
    for i in range(1, len(bounds)):
        if not bounds[i] > bounds[i - 1]:
            raise HistogramError(f"{where}.explicitBounds[{i}]", bounds[i],
                                 f"bounds must rise (after {bounds[i - 1]!r})")
    out, total = [], 0.0
    for le, count in zip([*bounds, math.inf], counts):
        total += count
        out.append((float(le), total))
    return out


def exponential_cumulative(scale: int, offset: int, counts: Sequence[float],
                           zero_count: float = 0.0, zero_threshold: float = 0.0,
                           negative: float = 0.0, where: str = "exponentialHistogram",
                           ) -> list[tuple[float, float]]:
    """An OTLP exponential histogram's positive buckets (module docstring) as cumulative
    ``[(le, count)]`` ending at ``+Inf``; ``negative``: how many observations its negative
    buckets hold (they must hold none: response times are not negative)."""
    if not MIN_SCALE <= scale <= MAX_SCALE:
        raise HistogramError(f"{where}.scale", scale, f"must be within [{MIN_SCALE}, "
                                                      f"{MAX_SCALE}]")
    if len(counts) > MAX_BUCKETS:
        raise HistogramError(f"{where}.positive.bucketCounts", len(counts),
                             f"more than {MAX_BUCKETS} buckets")
    if negative > 0:
        raise HistogramError(f"{where}.negative.bucketCounts", negative,
                             "negative observations in a response-time histogram")
    if not (math.isfinite(zero_threshold) and zero_threshold >= 0):
        raise HistogramError(f"{where}.zeroThreshold", zero_threshold,
                             "must be a finite number >= 0")
    base = 2.0 ** (2.0 ** -scale)
    out = [(zero_threshold, float(zero_count))]
    total = float(zero_count)
    for k, count in enumerate(counts):
        total += count
        try:
            le = base ** (offset + k + 1)
        except OverflowError:
            le = math.inf
        if le == math.inf:
            raise HistogramError(f"{where}.positive.offset", offset,
                                 "its buckets' bounds exceed a double")
        if le > out[-1][0]:
            out.append((le, total))
        else:                         # below the zero threshold: counted with the zero bucket
            out[-1] = (out[-1][0], total)
    out.append((math.inf, total))
    return out
