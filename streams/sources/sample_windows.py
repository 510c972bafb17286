"""Metric samples to windows: the accumulator both shells run in front of the pipeline when the
input is a metric format (``[input] format``; docs/formats.md).

Samples (:mod:`streams.sources.samples`) are kept per tier -- ``(system, tier)``, named by the
mapping (:mod:`streams.core.input_config`) -- and per series (a metric's label set), and
the tier's windows are cut on the grid ``offset_s + k window_s``:

1. A window ``(S, E]`` is made once every series of its tier has a sample at or after ``E``
   (so its value at ``E`` is final), or once any series has one ``lag_s`` after ``E`` (a
   series that stopped, or lags, is then taken as it is: a gap if it is the busy time).
2. A series' value at ``t`` is its latest sample at or before ``t``, at most ``lookback_s``
   old (Prometheus' instant lookup); a staleness marker, ``NaN`` or an infinite value is no
   value. A gauge of utilization (or users) is averaged over the window's samples
   (its value at ``E`` when it has none inside; users rounded to a whole number).
3. From the values at ``S`` and ``E`` the window is made by the Prometheus source's window
   rules (:func:`streams.sources.window_rules.tier_windows`, the same code): counter increases
   summed per class, resets, born series, gaps. A window is never changed once made: a
   sample arriving after it counts only for later windows, and one older than its series'
   latest sample is dead-lettered (out of order).
4. A sample the mapping cannot place is dead-lettered with its reason: a record of the wrong
   shape, a missing system or tier label, a value that is not a number, a metric no selector
   wants (with ``strict = true``; else ignored).
5. Far ahead, far behind: a sample more than ``lookback_s`` away from its tier's newest sample
   (ahead or behind) is dead-lettered, unless it is the :data:`CONFIRM_SAMPLES`-th sample time
   in a row that far away and within ``lookback_s`` of the first of them: the tier then starts
   afresh from it (an agent restarted after a silence, a clock set right). So one stray
   timestamp -- a sample dated in the year 5138, a new series ten minutes ahead -- cannot move
   its tier's clock and skip its windows; the far-ahead rule of the window records
   (:func:`streams.core.plausibility.far_ahead`) with its confirmation, per tier (each series
   of a tier shares its clock). A tier's first sample has nothing to compare with; the sweep of
   silent tiers uses the newest sample of all but the newest 1% of tiers (as
   :meth:`streams.engine.pipeline.Pipeline.stream_clock`), so a stray system cannot make the
   others look silent.
6. Counters as Prometheus defines them (Prometheus authors 2017, "Staleness"): a staleness
   marker (any ``NaN``, OTLP's no-recorded-value flag) ends a series' value, but a counter
   that comes back -- in the same series or after the series was dropped
   -- is differenced from its latest value before the marker, never counted whole in one
   window as a newborn series would be (rule 4 of the window rules is for series never seen).
   A counter below its value at the window's start is a reset (the process restarted): the
   increase is its new value, and the window's estimate carries the flag ``counter reset:
   FIELD``. A second sample of a series at the same timestamp with another value is
   dead-lettered as a duplicate and the first kept (Prometheus' TSDB refuses it the same way);
   with the same value it is a replay, ignored.

The windows made are input-contract records, validated by the pipeline like any other (a
utilization within the tolerance above 1 is clamped and flagged). Pure: no I/O; the state
is in memory only (after a worker restart the window open at the time is not made).
"""

from __future__ import annotations

import bisect
import heapq
import logging
import math
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from streams.core.records import InvalidWindow, format_time
from streams.sources.window_rules import Gap, Series, TierData, TierSpec, tier_windows
from streams.core.input_config import METRIC_FIELDS, InputFormat, TierMapping
from streams.core.pool_settings import POOL_PREFIX
from streams.sources.samples import Sample, parse_record

__all__ = ["SampleWindows", "Translated", "number", "sample_key", "CONFIRM_SAMPLES"]

log = logging.getLogger("perfcast.formats")

#: samples between two sweeps for tiers gone silent (:meth:`SampleWindows._sweep`)
SWEEP_SAMPLES = 10_000

#: fields whose series are gauges averaged over the window (rule 2)
_AVERAGED = ("utilization", "users")

#: fields whose series are cumulative counters (rule 6)
_COUNTERS = ("busy_seconds", "completions", "time_sum", "time_count",
             "response_time_histogram")

#: sample times in a row far from the tier's clock that confirm a new clock (rule 5), as
#: ``[plausibility] confirm_windows``' default for window records
CONFIRM_SAMPLES = 3

#: ended counter series a tier remembers for when they come back (rule 6), oldest forgotten
ENDED_SERIES = 1024

#: longest text read as a number (a double's shortest round-trip text has at most 24)
MAX_NUMBER_TEXT = 64


def number(value: Any, where: str) -> float | None:
    """A sample's value as a float; ``None`` for no value (rule 2); ``InvalidWindow`` when
    it is not a number (booleans and text that is not a number are not)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidWindow(where, value, "not a number (a boolean)")
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            raise InvalidWindow(where, value, "out of range of a double") from None
    if isinstance(value, float):
        v = value
    elif isinstance(value, str):
        if len(value) > MAX_NUMBER_TEXT:
            raise InvalidWindow(where, value, f"not a number (longer than {MAX_NUMBER_TEXT} "
                                              f"characters)")
        try:
            v = float(value)
        except ValueError:
            raise InvalidWindow(where, value, "not a number") from None
        if math.isinf(v) and "inf" not in value.lower():
            raise InvalidWindow(where, value, "out of range of a double")
    else:
        raise InvalidWindow(where, value, "not a number")
    return v if math.isfinite(v) else None


def sample_key(fmt: InputFormat, value: bytes) -> bytes | None:
    """The partition key of a record of samples: its system (``system``, or the
    ``system_label`` of its first sample that has it), so that one system's samples stay in
    order on one partition (``perfcast produce`` of a file of samples); ``None`` when the
    record has none."""
    if fmt.system is not None:
        return fmt.system.encode()
    try:
        parsed = parse_record(value, fmt.format, fmt.timestamp_unit)
    except InvalidWindow:
        return None
    for sample in parsed.samples:
        system = sample.labels.get(fmt.system_label or "")
        if system:
            return system.encode("utf-8", "backslashreplace")
    return None


def tier_spec(mapping: TierMapping, tier: str) -> TierSpec:
    """The tier as the window rules take it (:func:`streams.sources.window_rules.
    tier_windows`): the selectors' text stand where the Prometheus source has PromQL."""
    def text(f: str) -> Any:
        value = getattr(mapping, f)
        return " or ".join(s.text for s in value) if isinstance(value, tuple) else value
    return TierSpec(name=tier, class_label=mapping.class_label, counters=True,
                    quantiles=mapping.quantiles, **{f: text(f) for f in METRIC_FIELDS},
                    pools=tuple((f, " or ".join(s.text for s in sels))
                                for f, sels in mapping.pools))


class _Points:
    """One series: its labels and samples in time order (``None``: no value)."""

    __slots__ = ("labels", "times", "values", "total", "last", "received", "prior")

    def __init__(self, labels: Mapping[str, str], prior: float | None = None) -> None:
        self.labels = labels
        self.times: list[int] = []
        self.values: list[float | None] = []
        self.total = 0.0                  # a delta sum's running total
        self.last = -1                    # the latest sample's time (``times[-1]``)
        self.received: float | None = None    # the latest sample's value as received
        #: the latest value (not a marker) no longer in ``values``: pruned, or the value of
        #: the series before it ended (rule 6)
        self.prior = prior

    def before(self, t: int) -> float | None:
        """The latest value at or before ``t`` that is not a staleness marker, however old
        (rule 6)."""
        i = bisect.bisect_right(self.times, t) - 1
        while i >= 0:
            if self.values[i] is not None:
                return self.values[i]
            i -= 1
        return self.prior

    def at(self, t: int, lookback: int) -> float | None:
        i = bisect.bisect_right(self.times, t) - 1
        if i < 0 or self.times[i] <= t - lookback:
            return None
        return self.values[i]

    def mean(self, start: int, end: int, lookback: int) -> float | None:
        lo, hi = bisect.bisect_right(self.times, start), bisect.bisect_right(self.times, end)
        inside = [v for v in self.values[lo:hi] if v is not None]
        return math.fsum(inside) / len(inside) if inside else self.at(end, lookback)


@dataclass
class _Tier:
    system: str
    name: str
    mapping: TierMapping
    spec: TierSpec
    #: ``(field, metric name, labels) -> samples``
    series: dict[tuple[str, str, tuple[tuple[str, str], ...]], _Points] = field(
        default_factory=dict)
    next_end: int | None = None
    #: the latest sample's time over the tier's series
    newest: int = -1
    #: a series found behind the next window's end (:meth:`SampleWindows._ready`)
    blocker: _Points | None = None
    #: samples far from ``newest`` in a row (rule 5): ``[first time, times seen, last time]``
    held: list[int] | None = None
    #: counter series dropped after a staleness marker or a silence: their latest value
    #: (rule 6), at most :data:`ENDED_SERIES`
    ended: OrderedDict[tuple[str, str, tuple[tuple[str, str], ...]], float] = field(
        default_factory=OrderedDict)


@dataclass
class Translated:
    """A batch of records after the mapping: the windows made (with the partition of the
    record that completed each) and the dead letters as ``(windows before it, raw, error)``."""

    windows: list[dict[str, Any]] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    dead: list[tuple[int, Any, InvalidWindow]] = field(default_factory=list)
    #: per window: its flags (rule 6: ``counter reset: FIELD``), for its estimate
    flags: list[tuple[str, ...]] = field(default_factory=list)


class SampleWindows:
    """The accumulator (module docstring). ``gaps`` counts windows not made by reason kind;
    ``ignored`` samples of metrics no selector wants (``strict = false``)."""

    def __init__(self, fmt: InputFormat, sweep_samples: int = SWEEP_SAMPLES) -> None:
        self.fmt = fmt
        self.sweep_samples = sweep_samples
        self.window = fmt.window_ms
        self.lag = round(fmt.lag_s * 1000)
        self.lookback = round(fmt.lookback_s * 1000)
        self.tiers: dict[tuple[str, str], _Tier] = {}
        self.gaps: Counter[str] = Counter()
        self.ignored = 0
        self.samples = 0
        self.windows_made = 0
        #: the sample count at which tiers are swept next
        self._next_sweep = sweep_samples
        self._default_index = fmt.default.by_name() if fmt.default is not None else {}
        self._tier_index = {name: m.by_name() for name, m in fmt.tiers.items()}
        #: windows made without a class's quantiles (rule 7 of the window rules): their dead
        #: letters, given out by :meth:`translate`
        self._partial: list[InvalidWindow] = []

    def forget(self) -> None:
        """Drop every tier's samples (after a rebalance: its systems may be elsewhere now)."""
        self.tiers.clear()

    # -- a batch ---------------------------------------------------------------------------
    def translate(self, records: Iterable[Any], partitions: Sequence[int] | None = None,
                  ) -> Translated:
        """Each record's samples in, the windows they complete out, in order."""
        out = Translated()
        for i, raw in enumerate(records):
            try:
                parsed = parse_record(raw, self.fmt.format, self.fmt.timestamp_unit)
            except InvalidWindow as err:
                out.dead.append((len(out.windows), raw, err))
                continue
            except Exception as exc:        # noqa: BLE001 -- never the worker's end (module doc)
                out.dead.append((len(out.windows), raw, _unreadable(exc)))
                continue
            for err in parsed.problems:
                out.dead.append((len(out.windows), raw, err))
            touched: dict[tuple[str, str], _Tier] = {}
            for sample in parsed.samples:
                try:
                    self._add(sample, touched)
                except InvalidWindow as err:
                    out.dead.append((len(out.windows), raw, err))
                except Exception as exc:    # noqa: BLE001 -- never the worker's end
                    out.dead.append((len(out.windows), raw, _unreadable(exc)))
            part = partitions[i] if partitions is not None else 0
            for tier in touched.values():
                made = self._windows(tier)
                for err in self._partial:
                    out.dead.append((len(out.windows) + len(made), raw, err))
                self._partial.clear()
                self.windows_made += len(made)
                out.windows += [w for w, _ in made]
                out.flags += [f for _, f in made]
                out.partitions += [part] * len(made)
            if self.samples >= self._next_sweep:
                self._sweep()
        return out

    def _sweep(self) -> None:
        """Drop the tiers without a sample for ``lookback_s`` before the latest sample seen
        (their samples can no longer make a window): the state stays bounded by the tiers
        that report. The clock is the newest sample of all but the newest 1% of tiers (rule
        5)."""
        newest = [t.newest for t in self.tiers.values()]
        if not newest:
            self._next_sweep = self.samples + self.sweep_samples
            return
        clock = heapq.nlargest(len(newest) // 100 + 1, newest)[-1]
        cutoff = clock - self.lookback - self.window
        for key in [k for k, t in self.tiers.items() if t.newest <= cutoff]:
            del self.tiers[key]
        self._next_sweep = self.samples + self.sweep_samples

    def summary(self) -> str:
        """One line: samples mapped, windows made, samples ignored, gaps by reason."""
        text = (f"{self.samples} {self.fmt.format} samples mapped into {self.windows_made} "
                f"windows; {self.ignored} samples of metrics no selector wants ignored")
        if self.gaps:
            text += "; windows not made: " + "; ".join(
                f"{n} x {reason}" for reason, n in self.gaps.most_common())
        return text

    # -- a sample --------------------------------------------------------------------------
    def _place(self, sample: Sample) -> list[tuple[str, str, str]]:
        """``(system, tier, field)`` of every selector that wants the sample."""
        fmt, labels = self.fmt, sample.labels
        if fmt.tier_label is not None:
            tier = labels.get(fmt.tier_label)
            index = self._tier_index.get(tier) if tier is not None else None
            if index is None:
                index = self._default_index
            wanted = [(tier, f) for f, sel in index.get(sample.name, ())
                      if sel.matches(labels)]
            if wanted and tier is None:
                raise InvalidWindow(f"labels.{fmt.tier_label}", dict(labels),
                                    f"{sample.name}: no tier label {fmt.tier_label!r} "
                                    f"(tier_label)")
        else:
            wanted = [(t, f) for t, index in self._tier_index.items()
                      for f, sel in index.get(sample.name, ()) if sel.matches(labels)]
        if not wanted:
            return []
        system = fmt.system or labels.get(fmt.system_label or "")
        if not system:
            raise InvalidWindow(f"labels.{fmt.system_label}", dict(labels),
                                f"{sample.name}: no system label {fmt.system_label!r} "
                                f"(system_label)")
        return [(system, t, f) for t, f in wanted]

    def _tier(self, system: str, name: str) -> _Tier:
        tier = self.tiers.get((system, name))
        if tier is None:
            mapping = self.fmt.tiers.get(name) or self.fmt.default
            assert mapping is not None
            tier = self.tiers[(system, name)] = _Tier(system, name, mapping, tier_spec(mapping, name))
        return tier

    def _add(self, sample: Sample, touched: dict[tuple[str, str], _Tier]) -> None:
        placed = self._place(sample)
        if not placed:
            self.ignored += 1
            if self.fmt.strict:
                raise InvalidWindow("metric", sample.name, "no selector of [input] wants this "
                                                           "metric (strict = true)")
            return
        value = number(sample.value, f"{sample.name}.value")
        self.samples += 1
        for system, name, fld in placed:
            tier = self._tier(system, name)
            self._judge(tier, sample)
            key = (fld, sample.name, tuple(sorted(sample.labels.items())))
            points = tier.series.get(key)
            if points is None:
                points = tier.series[key] = _Points(sample.labels, tier.ended.pop(key, None))
            if sample.t_ms < points.last:
                raise InvalidWindow("timestamp", format_time(sample.t_ms / 1000),
                                    f"{sample.name}: older than the series' latest sample "
                                    f"({format_time(points.last / 1000)}); samples of a series "
                                    f"must come in time order")
            if sample.t_ms == points.last:
                if value == points.received or (value is None and points.received is None):
                    continue                            # a replay of the latest sample
                raise InvalidWindow("value", _shown(value),
                                    f"{sample.name}: duplicate: a second sample at "
                                    f"{format_time(sample.t_ms / 1000)} with another value "
                                    f"than the first ({_shown(points.received)}), which is "
                                    f"kept")
            stored = value
            if fld == "utilization" and value is not None:
                stored = value * self.fmt.utilization_scale
            if sample.delta and value is not None:
                points.total += value
                stored = points.total
            points.times.append(sample.t_ms)
            points.values.append(stored)
            points.last = sample.t_ms
            points.received = value
            if sample.t_ms > tier.newest:
                tier.newest = sample.t_ms
            if tier.next_end is None:
                w, off = self.window, self.fmt.offset_ms
                tier.next_end = off + -(-(sample.t_ms - off) // w) * w + w
            touched[(system, name)] = tier

    def _judge(self, tier: _Tier, sample: Sample) -> None:
        """Rule 5: ``InvalidWindow`` for a sample far from its tier's clock, unless it confirms
        a new one (the tier then starts afresh)."""
        t, newest, limit = sample.t_ms, tier.newest, self.lookback
        if newest < 0 or abs(t - newest) <= limit:
            tier.held = None
            return
        held = tier.held
        if held is not None and abs(t - held[0]) <= limit:
            if t > held[2]:
                held[1] += 1
                held[2] = t
        else:
            held = tier.held = [t, 1, t]
        if held[1] >= CONFIRM_SAMPLES:               # a new clock: the tier starts afresh
            tier.series.clear()
            tier.ended.clear()
            tier.next_end, tier.newest, tier.held, tier.blocker = None, -1, None, None
            return
        where = "ahead of" if t > newest else "behind"
        raise InvalidWindow("timestamp", format_time(t / 1000),
                            f"{sample.name}: {abs(t - newest) / 1000:g} s {where} the newest "
                            f"sample of tier {tier.name!r} of system {tier.system!r} "
                            f"({format_time(newest / 1000)}; more than lookback_s = "
                            f"{limit / 1000:g}); unconfirmed: {held[1]} of {CONFIRM_SAMPLES} "
                            f"sample times in a row that far")

    # -- windows ---------------------------------------------------------------------------
    def _ready(self, tier: _Tier, end: int) -> bool:
        """Rule 1. The series found behind last time is looked at first: while it stays
        behind, a sample of another series costs no scan."""
        if tier.newest < end:
            return False
        if tier.newest >= end + self.lag:
            return True
        stale = end - self.lookback
        blocker = tier.blocker
        if blocker is not None and stale < blocker.last < end:
            return False
        for p in tier.series.values():
            if stale < p.last < end:
                tier.blocker = p
                return False
        tier.blocker = None
        return True

    def _windows(self, tier: _Tier) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
        """The windows ``tier`` can make now, each with its flags (rule 6)."""
        made: list[tuple[dict[str, Any], tuple[str, ...]]] = []
        assert tier.next_end is not None
        newest = tier.newest
        if newest < tier.next_end:                  # no series reached the next end yet
            return made
        if tier.next_end < newest - self.lookback - self.window:    # a long silence: skip it
            skip = (newest - self.lookback - tier.next_end) // self.window
            self.gaps["no samples within lookback_s"] += skip
            tier.next_end += skip * self.window
        while self._ready(tier, tier.next_end):
            end = tier.next_end
            data, flags = self._data(tier, end)
            try:
                records, gaps = tier_windows(tier.spec, data, tier.system, [end], self.window,
                                             self.fmt.missing_class)
            except ValueError as err:          # never the worker's end: a gap, with why
                records, gaps = [], [Gap(tier.name, end, str(err))]
            made += [(r, flags) for r in records]
            self._gaps(gaps)
            tier.next_end = end + self.window
            self._prune(tier, end)
        return made

    def _gaps(self, gaps: list[Gap]) -> None:
        """Count the windows not made; the first of each reason is logged as a warning (the
        worker's log shows it), the others at debug."""
        for gap in gaps:
            if gap.made:        # a window made without a class's quantiles: a dead letter
                self._partial.append(InvalidWindow(
                    gap.field, f"{gap.tier} window ending {format_time(gap.end_ms / 1000)}",
                    gap.reason.removeprefix(f"{gap.field}: ")))
                continue
            first = gap.reason not in self.gaps
            self.gaps[gap.reason] += 1
            log.log(logging.WARNING if first else logging.DEBUG,
                    "%s: no window ending at %s (%s)%s", gap.tier,
                    format_time(gap.end_ms / 1000), gap.reason,
                    "; further windows not made for this reason are counted, not logged"
                    if first else "")

    def _data(self, tier: _Tier, end: int) -> tuple[TierData, tuple[str, ...]]:
        """The tier's series as the window rules take them: values at the window's start and
        end (rule 2; a counter's start value by rule 6), and the window's flags."""
        start, lookback = end - self.window, self.lookback
        fields: dict[str, list[Series]] = {}
        resets: set[str] = set()
        for (fld, _, _), points in tier.series.items():
            values = {}
            for t in (start, end):
                v = (points.mean(t - self.window, t, lookback)
                     if fld in _AVERAGED or fld.startswith(POOL_PREFIX)
                     else points.at(t, lookback))
                if v is None and t == start and fld in _COUNTERS:
                    v = points.before(start)
                if v is not None:
                    # users are a whole number: the window's mean, rounded
                    values[t] = float(round(v)) if fld == "users" else v
            if fld in _COUNTERS and values.get(end, math.inf) < values.get(start, -math.inf):
                resets.add(f"counter reset: {fld}")
            fields.setdefault(fld, []).append(Series(points.labels, values))
        if len(fields.get("utilization", ())) > 1:
            fields["utilization"] = [_mean_series(fields["utilization"], (start, end))]
        wanted = tier.mapping.selectors()
        pools = {f: fields.get(f, []) for f in wanted if f.startswith(POOL_PREFIX)}
        return (TierData(**{f: fields.get(f, []) for f in wanted
                            if f != "completions" and f not in pools},
                         completions=fields.get("completions", []), pools=pools or None),
                tuple(sorted(resets)))

    def _prune(self, tier: _Tier, start: int) -> None:
        """Keep what the windows after ``start`` need: each series' samples from its latest at
        or before ``start - window`` (a gauge's average reaches one window back); drop series
        silent for ``lookback_s``."""
        keep_from = start - self.window
        for key, points in list(tier.series.items()):
            if points.last <= start - self.lookback:
                del tier.series[key]
                value = points.before(points.last)
                if key[0] in _COUNTERS and value is not None:      # rule 6
                    tier.ended[key] = value
                    if len(tier.ended) > ENDED_SERIES:
                        tier.ended.popitem(last=False)
                continue
            i = bisect.bisect_right(points.times, keep_from) - 1
            if i > 0:
                points.prior = points.before(points.times[i - 1])
                del points.times[:i]
                del points.values[:i]



def _shown(value: float | None) -> str:
    return "a staleness marker" if value is None else f"{value!r}"


def _unreadable(exc: Exception) -> InvalidWindow:
    """The problem of a record the parser or the mapping failed on in a way they do not
    foresee: a dead letter (and the traceback in the log) rather than an exception that stops
    the run or the worker."""
    log.error("a record of samples could not be read", exc_info=exc)
    return InvalidWindow("record", type(exc).__name__,
                         f"could not be read ({type(exc).__name__}: {str(exc)[:200]})")


def _mean_series(series: list[Series], times: Sequence[int]) -> Series:
    """Several utilization series of one tier (instances, label sets) as one: their mean at
    each time some of them have a value."""
    values = {}
    for t in times:
        have = [s.values[t] for s in series if t in s.values]
        if have:
            values[t] = math.fsum(have) / len(have)
    return Series({}, values)
