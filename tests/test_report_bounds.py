"""The report stays under its documented size (``streams.sinks.report.MAX_REPORT_BYTES``, 20 MB,
docs/report.md) whatever the store holds: any time span, thousands of systems, hundreds of
classes, long series. What is left out is named on the page (flagged with its reason); the
rest is drawn."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from streams.core.config import Config
from streams.core.plausibility import Plausibility
from streams.cli.embedded import STORE_NAME, run_embedded
from streams.sinks.report import (MAX_OVERVIEW_ROWS, MAX_REPORT_BYTES, MAX_SYSTEM_SECTIONS,
                            MAX_CHART_CLASSES, StoreData, load_store, render_report,
                            time_ticks)


def _window(system: str, end: float, classes: int = 2, **extra) -> dict:
    return {"system": system, "tier": "app", "end": end, "window_s": 5.0,
            "utilization": 0.3 + 0.01 * (int(end) % 7),
            "completions": {f"c{k}": 40.0 + k + int(end) % 5 for k in range(classes)},
            "response_time_s": {f"c{k}": 0.01 for k in range(classes)}, "users": 20, **extra}


def _store(tmp_path, records, config: Config | None = None) -> StoreData:
    out = tmp_path / "run"
    summary = run_embedded(records, config or Config(), out)
    assert summary.deadletter == 0
    return load_store(out / STORE_NAME)


def _size(html: str) -> int:
    return len(html.encode("utf-8"))


def test_time_ticks_are_few_over_any_span():
    for span in (10, 3600, 86_400 * 30, 86_400 * 365 * 50, 1e11):
        ticks, fmt = time_ticks(1.0, 1.0 + span)
        assert 1 <= len(ticks) <= 8, (span, len(ticks))
        assert fmt


def test_two_windows_a_lifetime_apart_make_a_small_report(tmp_path):
    """Two valid windows with ``end`` = 1 and 1e11 (year 5138) made a 64 MB page of grid
    lines; now the axis has a few ticks and the page a few tens of KB. Both windows
    processed: the plausibility rule that dead-letters an ``end`` 3,000 years after the one
    before is set aside here (constructed directly, beyond what ``[plausibility]`` allows), as
    the report's bound must not depend on it."""
    anything = Config(plausibility=Plausibility(max_ahead_s=1e12))
    data = _store(tmp_path, [_window("s", 1.0), _window("s", 1e11)], anything)
    html = render_report(data)
    assert _size(html) < 500_000, _size(html)
    assert len(re.findall(r'class="grid"', html)) < 400
    assert 'data-system="s"' in html


@pytest.mark.timeout(600)
def test_ten_thousand_systems_stay_under_the_bound(tmp_path):
    """10,000 systems (each solved a few times; 282 MB before): under 20 MB; the most urgent
    systems drawn in full, the others listed in the overview or counted, and the page says
    so. Every window processed."""
    records = [_window(f"base{i}", 1_795_168_800.0 + 5 * k, classes=3)
               for k in range(40) for i in range(4)]
    base = _store(tmp_path, records)
    systems = [replace(base.systems[i % 4], name=f"sys{i:05d}") for i in range(10_000)]
    data = replace(base, systems=systems)
    html = render_report(data)
    size = _size(html)
    assert size <= MAX_REPORT_BYTES, size
    drawn = len(re.findall(r'<section class="system"', html))
    assert 1 <= drawn <= MAX_SYSTEM_SECTIONS
    assert f"{10_000 - drawn} of 10000 systems have no section here" in html
    assert f"{10_000 - MAX_OVERVIEW_ROWS} more systems, further from a breach" in html
    print(f"10,000 systems: {size / 1e6:.1f} MB, {drawn} sections")


@pytest.mark.timeout(600)
def test_hundreds_of_classes_are_drawn_as_the_busiest_few(tmp_path):
    """A tier with 250 classes (the default limit is 256): its charts draw the 12 busiest,
    the page says so; the section lists 30 names and counts the rest."""
    records = [_window("wide", 1_795_168_800.0 + 5 * k, classes=250) for k in range(30)]
    data = _store(tmp_path, records)
    html = render_report(data)
    assert _size(html) < 2_000_000, _size(html)
    assert f"{MAX_CHART_CLASSES} busiest of 250 classes" in html
    assert "and 220 more classes" in html


def test_a_long_series_is_thinned(tmp_path):
    """A system solved 3,000 times: each chart's series thinned to at most 800 points."""
    base = _store(tmp_path, [_window("long", 1_795_168_800.0 + 5 * k) for k in range(40)])
    s = base.systems[0]
    p = s.predictions[-1]
    long = [replace(p, time=p.time + 60 * i) for i in range(3000)]
    data = replace(base, systems=[replace(s, predictions=long)])
    html = render_report(data)
    capacity = html[html.index('data-chart="capacity"'):]
    capacity = capacity[:capacity.index("</figure>")]
    assert capacity.count("<circle") <= 800
    assert _size(html) < 2_000_000
