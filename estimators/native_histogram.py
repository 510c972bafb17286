"""Response-time quantiles of a Prometheus native histogram, as Prometheus' HTTP API gives one:
its ``count`` and its populated buckets ``[boundary_rule, lower, upper, count]``.

**The histogram** (Rabenstein 2022, "Native histograms"; Prometheus authors 2023, "HTTP API:
native histograms"): sparse exponential buckets of schema ``s`` (-4 to 8), the bucket of index
``i`` holding the observations in ``(base^(i-1), base^i]`` with ``base = 2^(2^-s)``, and a zero
bucket ``[-z, z]`` of those within the zero threshold ``z``. Prometheus writes each populated
bucket with its bounds (so no schema arithmetic is needed here) in rising order: the negative
buckets, the zero bucket, the positive buckets. ``boundary_rule`` tells which ends are
inclusive (0: upper, 1: lower, 2: neither, 3: both -- the zero bucket).

**The quantile** (:func:`native_quantile`) is the rule of Prometheus' ``histogram_quantile``
on a native histogram (Prometheus authors 2023, ``promql/quantile.go`` of the 2.x releases;
Rabenstein 2022): the rank ``r = q count`` (the histogram's ``count``, not the sum of its
buckets: observations of NaN are in no bucket) falls in the first bucket whose running total
reaches it, and the quantile is interpolated linearly inside that bucket,
``lower + (upper - lower) (r - before) / n`` (``before``: the total below the bucket, ``n``: its
count). The running total is capped at ``count`` (float residue of summed rates). A rank the
buckets never reach (NaN observations) gives the upper bound of the last bucket. The zero
bucket's lower bound is taken as 0 when the histogram has no negative bucket: Prometheus does so
when it has positive buckets; with the zero bucket alone it would interpolate from ``-z``, a
difference of at most ``z`` (``1e-128`` by default in the Go client). Prometheus 3.x
interpolates exponentially inside an exponential bucket instead; the two differ by less than
the bucket's width (about 9% of the value at schema 3), the resolution either is exact to.

**Bad histograms are refused, never repaired**: a ``count`` or a bucket count that is negative,
NaN or infinite, a bucket whose bounds do not rise, buckets that are not in rising order or
overlap (a non-monotone histogram), a bucket below 0 other than the zero bucket (negative
response times), and buckets holding more than ``count`` (beyond a rounding residue) raise
:class:`~estimators.histogram.HistogramError` naming the field, the value and the reason. No
observation gives no quantile (``None``), never a number.

Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from estimators.histogram import MAX_BUCKETS, MONOTONE_TOLERANCE, HistogramError

__all__ = ["native_quantile", "check_native", "NativeBucket"]

#: ``(boundary_rule, lower, upper, count)``
NativeBucket = tuple[int, float, float, float]


def _number(value: Any, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise HistogramError(where, value, f"{what} must be a number")
    return float(value)


def _is_zero_bucket(lower: float, upper: float) -> bool:
    return lower < 0.0 < upper


def check_native(count: Any, buckets: Sequence[Any], where: str = "histogram",
                 ) -> list[NativeBucket]:
    """The buckets checked (module docstring: what is refused), as tuples of floats."""
    total = _number(count, f"{where}.count", "the count")
    if not math.isfinite(total) or total < 0:
        raise HistogramError(f"{where}.count", count, "the count must be a finite number >= 0")
    if len(buckets) > MAX_BUCKETS:
        raise HistogramError(f"{where}.buckets", len(buckets), f"more than {MAX_BUCKETS} "
                                                               f"buckets")
    out: list[NativeBucket] = []
    held = 0.0
    for k, raw in enumerate(buckets):
        at = f"{where}.buckets[{k}]"
        if not isinstance(raw, (list, tuple)) or len(raw) != 4:
            raise HistogramError(at, raw, "a bucket must be [boundary_rule, lower, upper, "
                                          "count]")
        rule, lower, upper, n = raw
        if isinstance(rule, bool) or rule not in (0, 1, 2, 3):
            raise HistogramError(f"{at}[0]", rule, "the boundary rule must be 0, 1, 2 or 3")
        lower = _number(lower, f"{at}[1]", "the lower bound")
        upper = _number(upper, f"{at}[2]", "the upper bound")
        n = _number(n, f"{at}[3]", "the count")
        if not lower < upper:
            raise HistogramError(f"{at}[2]", upper, f"a bucket's upper bound must be above its "
                                                    f"lower bound ({lower!r})")
        if not math.isfinite(n) or n < 0:
            raise HistogramError(f"{at}[3]", n, "a bucket's count must be a finite number >= 0")
        if out and lower < out[-1][2]:
            raise HistogramError(f"{at}[1]", lower, f"not monotone: the buckets must rise and "
                                                    f"not overlap (the previous one ends at "
                                                    f"{out[-1][2]!r})")
        if lower < 0 and not _is_zero_bucket(lower, upper) and n > 0:
            raise HistogramError(at, [lower, upper, n], "negative observations in a "
                                                        "response-time histogram")
        held += n
        out.append((int(rule), lower, upper, n))
    if held > total + MONOTONE_TOLERANCE * max(total, 1.0):
        raise HistogramError(f"{where}.buckets", held, f"the buckets hold more observations "
                                                       f"than the count ({total!r})")
    return out


def native_quantile(level: float, count: Any, buckets: Sequence[Any],
                    where: str = "histogram") -> float | None:
    """The quantile at ``level`` of a native histogram of ``count`` observations and populated
    ``buckets`` (module docstring); ``None`` when it holds no observation in a bucket."""
    if not 0.0 < level < 1.0:
        raise HistogramError(f"{where}.quantile", level, "must be within (0, 1)")
    checked = check_native(count, buckets, where)
    total = float(count)
    if not total > 0 or not checked:
        return None
    rank = level * total
    running = 0.0
    for _, lower, upper, n in checked:
        running += n
        if running >= rank:
            break
    if _is_zero_bucket(lower, upper):
        lower = 0.0                 # no negative bucket (check_native): observations >= 0
    running = min(running, total)
    if running < rank:
        return upper
    rank -= running - n
    return lower + (upper - lower) * (rank / n)
