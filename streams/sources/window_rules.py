"""The window rules: from a tier's series -- their values at the ends of each window -- to
input-contract records. Shared by the Prometheus source (:mod:`streams.sources.prometheus`,
values from Prometheus' range queries) and the Kafka formats
(:mod:`streams.sources.sample_windows`, values from the samples agents publish).

The rules (:func:`tier_windows`, pure; property-tested against simulated scrapes in
``tests/test_prometheus_mapping.py``, and against a real Prometheus in
``tests/test_prometheus_source.py``):

1. A counter's increase over a window is ``v(end) - v(start)`` for each series (a series is a
   label set: every instance, every status code), summed per class: Prometheus' "rate, then
   sum", so one instance restarting does not upset the others. A value below the previous one
   is a counter reset: the increase is the new value (the counter restarted from 0).
2. ``v(t)`` is the series' latest sample at or before ``t`` (Prometheus' instant lookup, 5 min
   back by default); ``NaN``/``±Inf`` values count as no value, and a series that went stale
   (its target stopped: Prometheus writes a staleness marker) has none.
3. A tier *reports* at ``t`` when some series of its busy query has a value there. A window is
   made only when its tier reports at its start and its end (with ``counters = false`` and a
   ``utilization`` gauge: at its end); otherwise it is a gap (:class:`Gap`, counted and
   logged), never a guess. So a tier that stops reporting simply has no windows until it
   reports again, while the other tiers go on; the first window after it resumes is a gap
   (no start value).
4. A class series present at a window's end but not at its start, while the tier reported at
   the start, was born in the window (client libraries create a class's counter at its first
   request): its increase is its value. A series gone at the end contributes nothing. Over a
   range with history before the window (the Prometheus source fetches
   ``LOOKBACK_WINDOWS`` more), a series counts as born only if it has no value at any
   earlier point: a series with earlier values was stale at the start -- a failed scrape of
   its target (a busy app missing the scrape timeout) marks every series of that target stale
   while another target's busy time still reports -- and its value there is the whole count
   since the process started, not the window's. Such a window is a gap naming the class.
5. Utilization from ``busy_seconds`` is ``increase / (window_s * cores)``. The samples at the
   two ends were scraped up to a scrape interval apart from the grid points, so at saturation
   it can come out a little above 1: it is passed on as it is, and the pipeline clamps a value
   within ``utilization_tolerance`` to 1 and flags it, and dead-letters one beyond it naming the
   tolerance (docs/pipeline.md).
6. A window with no completions series at its end, or without a ``cores`` value of at least 1,
   is a gap (the contract needs a class and cores); a class with zero increase is kept as 0.

7. ``response_time_histogram`` (optional; the entry tier's latency histogram): cumulative
   bucket counters with an ``le`` label, per class (Prometheus' classic ``_bucket`` series).
   Each bucket series' increase is taken by rule 1 (resets, born series), summed per class
   and ``le`` ("sum by (le)"), and the window's ``response_time_quantiles_s`` of the class at
   ``quantiles`` are those of the summed buckets by ``histogram_quantile``'s rule
   (:func:`estimators.histogram.bucket_quantile`). A class whose buckets hold no request in
   the window has none. A class whose bucket layout is not the same at both ends (a bucket
   born or gone in the window: the increase of a born bucket would be its whole count), or
   whose buckets are broken (counts falling from one ``le`` to the next, no ``+Inf``
   bucket, an ``le`` that is not a number) has none either, and the window says why: a
   :class:`Gap` with ``made = True`` naming ``response_time_quantiles_s.CLASS`` (the window
   itself is made: nothing valid is lost).

8. ``pools`` (optional; :mod:`streams.core.pool_settings`): per pool and key (``size``,
   ``busy``, ``waiting``, ``acquire_s``) a gauge, its series summed at the window's end (as
   ``users``): the window's ``pools`` (the source averages a gauge over the window where the
   query says so, ``avg_over_time(...[{window}])``). A key with no value at the end is left
   out, a pool with none is left out; the window is made either way.

Classes with no ``class_label`` label go to class ``missing_class`` (default ``"other"``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from streams.core.pool_settings import pool_values
from estimators.histogram import (DEFAULT_QUANTILES, HistogramError, bucket_quantile,
                                  level_name, parse_le)

__all__ = ["TierSpec", "Series", "TierData", "Gap", "counter_increase", "tier_windows",
           "QUERY_FIELDS", "DEFAULT_QUANTILES"]

#: the per-tier fields that name where a value comes from (PromQL; selectors)
QUERY_FIELDS = ("busy_seconds", "utilization", "cores", "completions", "time_sum",
                "time_count", "users", "response_time_histogram")


@dataclass(frozen=True)
class TierSpec:
    """One tier's fields: where each value comes from (PromQL for the Prometheus source, the
    selectors' text for the Kafka formats) and how to read it (module docstring)."""

    name: str
    completions: str
    busy_seconds: str | None = None
    utilization: str | None = None
    #: a whole number, or PromQL
    cores: int | str = 1
    time_sum: str | None = None
    time_count: str | None = None
    users: str | None = None
    #: cumulative latency buckets with an ``le`` label, per class (rule 7)
    response_time_histogram: str | None = None
    #: the levels of the quantiles read from ``response_time_histogram``
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    #: PromQL of the window's native latency histogram per class (the Prometheus source only:
    #: :mod:`streams.sources.prometheus_native`)
    response_time_native_histogram: str | None = None
    class_label: str = "handler"
    #: true: ``busy_seconds``, ``completions``, ``time_*`` are cumulative counters, differenced
    #: here; false: they already give the window's amount (``increase(x[{window}])``)
    counters: bool = True
    #: ``(pools.<pool>.<key>, query)``: gauges of pools' occupancy, summed at the window's end
    #: (:mod:`streams.core.pool_settings`)
    pools: tuple[tuple[str, str], ...] = ()

    def queries(self) -> dict[str, str]:
        """The tier's queries by field (``cores`` only when it is PromQL; a pool's by
        ``pools.<pool>.<key>``)."""
        out = {f: getattr(self, f) for f in QUERY_FIELDS if isinstance(getattr(self, f), str)}
        if self.response_time_native_histogram is not None:
            out["response_time_native_histogram"] = self.response_time_native_histogram
        out.update(self.pools)
        return out

    @property
    def needs_start(self) -> bool:
        """A window needs its start's values (counters are differenced)."""
        return self.counters or self.utilization is None



@dataclass(frozen=True)
class Series:
    """One series of a query result: its labels and its values by grid time (ms); ``NaN`` and
    infinite values are left out (rule 2)."""

    labels: Mapping[str, str]
    values: Mapping[int, float]



@dataclass
class TierData:
    """The results of one tier's queries over a grid (fields as in :class:`TierSpec`;
    ``None``: not configured)."""

    completions: list[Series]
    busy_seconds: list[Series] | None = None
    utilization: list[Series] | None = None
    cores: list[Series] | None = None
    time_sum: list[Series] | None = None
    time_count: list[Series] | None = None
    users: list[Series] | None = None
    response_time_histogram: list[Series] | None = None
    #: by pool field (``pools.<pool>.<key>``), its gauge's series
    pools: dict[str, list[Series]] | None = None


@dataclass(frozen=True)
class Gap:
    """A window not made (rule 3/6): the tier, the window's end (ms) and why; ``made``: the
    window was made, without what ``reason`` names (rule 7)."""

    tier: str
    end_ms: int
    reason: str
    made: bool = False
    #: with ``made``: the field the window is made without (``response_time_quantiles_s.C``)
    field: str = ""


def counter_increase(start: float | None, end: float | None, born: bool) -> float | None:
    """A counter's increase between two instants (rules 1, 2, 4): ``None`` when it cannot be
    told (no value at the end; no value at the start of a series that was not born)."""
    if end is None:
        return None
    if start is None:
        return end if born else None
    return end - start if end >= start else end


def _key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def _by_class(series: Iterable[Series], label: str, missing: str) -> dict[str, list[Series]]:
    out: dict[str, list[Series]] = {}
    for s in series:
        cls = s.labels.get(label) or missing
        out.setdefault(cls, []).append(s)
    return out


def _sum_at(series: Sequence[Series], t: int) -> float | None:
    vals = [s.values[t] for s in series if t in s.values]
    return math.fsum(vals) if vals else None


def _born(s: Series, start: int, reported_at_start: bool, history: bool | None) -> bool:
    """Rule 4: may ``s``, without a value at ``start``, count as born in the window? Without
    ``history`` every absence at the start is a birth; with it, only that of a series with
    no earlier value (one with earlier values was stale)."""
    if not reported_at_start:
        return False
    return not history or not any(t < start for t in s.values)


def _increase(series: Sequence[Series], start: int, end: int, counters: bool,
              reported_at_start: bool, history: bool | None = None) -> float | None:
    """Summed increase of ``series`` over ``(start, end]``: per series, then summed (rule 1);
    without counters the values at ``end`` are the increases."""
    if not counters:
        return _sum_at(series, end)
    parts = [counter_increase(s.values.get(start), s.values.get(end),
                              _born(s, start, reported_at_start, history))
             for s in series]
    parts = [p for p in parts if p is not None]
    return math.fsum(parts) if parts else None


def _whole(v: float) -> int | float:
    return int(v) if v.is_integer() and abs(v) < 2 ** 63 else v


def tier_windows(spec: TierSpec, data: TierData, system: str, ends_ms: Sequence[int],
                 window_ms: int, missing_class: str = "other", history: bool = False,
                 ) -> tuple[list[dict[str, Any]], list[Gap]]:
    """The input-contract records of one tier at the window ends ``ends_ms`` (each window is
    ``(end - window_ms, end]``) and the windows that could not be made. Pure: the results of
    the tier's queries in, records out (module docstring: the rules). ``history``: the data
    hold points before the windows (rule 4's stricter reading)."""
    busy = data.busy_seconds if spec.busy_seconds is not None else data.utilization
    busy = busy or []
    if spec.utilization is not None and len({_key(s.labels) for s in busy}) > 1:
        raise ValueError(f"tiers.{spec.name}.utilization: the query gave {len(busy)} series; "
                         f"it must give one (aggregate it, e.g. avg(...))")
    completions = _by_class(data.completions, spec.class_label, missing_class)
    time_sum = _by_class(data.time_sum or [], spec.class_label, missing_class)
    time_count = (_by_class(data.time_count, spec.class_label, missing_class)
                  if data.time_count is not None else completions)
    histograms = _by_class(data.response_time_histogram or [], spec.class_label,
                           missing_class)
    window_s = window_ms / 1000.0
    records: list[dict[str, Any]] = []
    gaps: list[Gap] = []
    for end in ends_ms:
        start = end - window_ms
        at_end = any(end in s.values for s in busy)
        at_start = any(start in s.values for s in busy)
        if not at_end or (spec.needs_start and not at_start):
            where = "end" if not at_end else "start"
            gaps.append(Gap(spec.name, end, f"tier not reporting at the window's {where}"))
            continue
        if isinstance(spec.cores, int):
            cores: float | None = float(spec.cores)
        else:
            cores = _sum_at(data.cores or [], end)
            if cores is None:
                gaps.append(Gap(spec.name, end, "cores: no value at the window's end"))
                continue
            if not cores >= 1:
                gaps.append(Gap(spec.name, end, f"cores: {cores:g} at the window's end "
                                                f"(must be >= 1)"))
                continue
        if spec.busy_seconds is not None:
            busy_s = _increase(busy, start, end, spec.counters, at_start)
            utilization = busy_s / (window_s * cores) if busy_s is not None else None
        else:
            utilization = _sum_at(busy, end)
        if utilization is None:
            gaps.append(Gap(spec.name, end, "busy time: no value"))
            continue
        strict = True if history and spec.counters else None
        counts = {cls: n for cls, ss in completions.items()
                  if (n := _increase(ss, start, end, spec.counters, at_start, strict))
                  is not None}
        stale = sorted(cls for cls, ss in completions.items() if cls not in counts and any(
            end in s.values for s in ss))
        if stale and strict:
            gaps.append(Gap(spec.name, end, f"completions: {', '.join(stale)}: no value at the "
                                            f"window's start (stale: a failed scrape)"))
            continue
        if not counts:
            gaps.append(Gap(spec.name, end, "completions: no series at the window's end"))
            continue
        record: dict[str, Any] = {
            "system": system, "tier": spec.name, "end": end / 1000.0, "window_s": window_s,
            "utilization": utilization, "cores": _whole(cores),
            "completions": {c: _whole(n) for c, n in sorted(counts.items())},
        }
        if time_sum:
            times = {}
            for cls, ss in time_sum.items():
                spent = _increase(ss, start, end, spec.counters, at_start, strict)
                n = _increase(time_count.get(cls, []), start, end, spec.counters, at_start,
                              strict)
                if spent is not None and n:
                    times[cls] = max(spent, 0.0) / n
            if times:
                record["response_time_s"] = dict(sorted(times.items()))
        if histograms:
            quantiles = _window_quantiles(spec, histograms, start, end, at_start, gaps, strict)
            if quantiles:
                record["response_time_quantiles_s"] = quantiles
        if data.users is not None:
            users = _sum_at(data.users, end)
            if users is not None:
                record["users"] = _whole(users)
        if data.pools:
            pools = pool_values({f: _sum_at(ss, end) for f, ss in data.pools.items()})
            if pools:
                record["pools"] = pools
        records.append(record)
    return records, gaps


def _window_quantiles(spec: TierSpec, histograms: Mapping[str, list[Series]], start: int,
                      end: int, at_start: bool, gaps: list[Gap],
                      strict: bool | None = None) -> dict[str, dict[str, float]]:
    """Per class the window's quantiles from its bucket series (rule 7); a class's problem is
    a :class:`Gap` with ``made = True``."""
    out: dict[str, dict[str, float]] = {}
    for cls, series in sorted(histograms.items()):
        where = f"response_time_quantiles_s.{cls}"
        try:
            buckets = _window_buckets(series, start, end, at_start, spec.counters, where, strict)
            if buckets is None:
                continue
            values = {level_name(q): bucket_quantile(q, buckets, f"{where}.buckets")
                      for q in spec.quantiles}
        except HistogramError as err:
            gaps.append(Gap(spec.name, end, f"{err.field}: {err.reason}; the window made "
                                            f"without the class's quantiles", made=True,
                            field=err.field))
            continue
        if all(v is not None for v in values.values()):
            out[cls] = values                                   # type: ignore[assignment]
    return out


def _window_buckets(series: Sequence[Series], start: int, end: int, at_start: bool,
                    counters: bool, where: str, strict: bool | None = None,
                    ) -> list[tuple[float, float]] | None:
    """The class's buckets' increases over the window summed by ``le``; ``None`` when no
    bucket has a value at the end."""
    by_le: dict[float, list[Series]] = {}
    for s in series:
        if "le" not in s.labels:
            raise HistogramError(f"{where}.le", dict(s.labels), "a bucket series without an "
                                                                "le label")
        by_le.setdefault(parse_le(s.labels["le"], f"{where}.le"), []).append(s)
    at_end = {le for le, ss in by_le.items() if any(end in s.values for s in ss)}
    if not at_end:
        return None
    if counters:
        at_begin = {le for le, ss in by_le.items() if any(start in s.values for s in ss)}
        if at_begin and at_begin != at_end:
            raise HistogramError(f"{where}.le", sorted(at_begin ^ at_end),
                                 "the bucket layout changed in the window (these bounds are "
                                 "at one end only)")
    out = []
    for le in sorted(at_end):
        n = _increase(by_le[le], start, end, counters, at_start, strict)
        if n is not None:
            out.append((le, n))
    return out
