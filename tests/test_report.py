"""The embedded report (``streams.sinks.report``): one self-contained HTML page from a run's store.

The store comes from a short embedded run (:func:`streams.cli.embedded.run_embedded`) of two
simulated systems in one trace: the demo shop ramped up fast enough to break its SLA within 15
simulated minutes (so every alert kind and the breach markers appear), and a second system
whose users stay below capacity and whose name needs HTML escaping.

Unit tests read the HTML: every section and every chart of :data:`SYSTEM_CHARTS` is there,
each chart draws data exactly when the store holds data for it, the alert markers sit at the
alerts' times as the store records them, nothing external is referenced, and a bad store is a
:class:`ReportError` naming the path.

The browser test renders the page in Debian's ``chromium`` (headless) driven by Selenium
through Debian's ``chromedriver`` (both from ``infra/chromium.sh``). Selenium rather than
``chromium --headless --screenshot/--dump-dom``: the WebDriver log API returns the page's own
console messages (``goog:loggingPrefs``) instead of Chromium's stderr, where the page's
messages are mixed with the browser's own (D-Bus, GPU) errors that say nothing about the page;
and one browser session checks the DOM, the layout (element sizes) and the pixels. The
screenshot is decoded with Pillow. Both are test dependencies (``pyproject.toml``). The test
also shows that its checks can fail: a blank page fails the not-blank check, and a copy of the
report that references an external image produces a console error.

Outside CI the browser test skips when chromium, chromedriver or selenium is missing; under
``CI=true`` that is a failure.
"""

from __future__ import annotations

import heapq
import io
import re
import shutil
import sqlite3
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from ci_policy import unavailable

from streams.core.config import Config, SystemConfig
from streams.cli.demo import DemoScenario, demo_config, demo_records
from streams.cli.embedded import STORE_NAME, run_embedded
from streams.sinks.report import (PALETTE, REPORT_NAME, ROW_TYPES, SECTIONS, SYSTEM_CHARTS,
                                  ReportError, columns, load_store, render_report, write_report)
from streams.sinks.store import SQLiteStore

#: the shop breaks its SLA: users 60 for 5 min, then +10 every 30 s up to 220 (every 20 s, on
#: the physical shop of streams.cli.demo the breach came in the minute it was predicted)
SHOP = DemoScenario(duration_s=900, steady_s=300, step_s=30, step_users=10, users_end=220)
#: a second system that stays within its SLA; its name must be escaped in HTML
CALM = DemoScenario(system='calm <b>&"2"', duration_s=900, users_start=40, users_end=60,
                    steady_s=300, step_s=60, step_users=5, seed=2)

#: chart -> [(table, columns)]: the chart draws data iff one of these columns holds a value
CHART_DATA = {
    "response_time": [("class_prediction", ("response_time_measured", "response_time"))],
    "capacity": [("prediction", ("capacity_users", "users", "users_forecast",
                                 "capacity_users_lower", "capacity_users_upper"))],
    "throughput": [("class_prediction", ("throughput_measured", "throughput"))],
    "utilization": [("tier_prediction", ("utilization_measured", "utilization",
                                         "utilization_forecast"))],
    "dispersion": [("tier_prediction", ("idc",))],
    "demand": [("demand", ("kalman", "regression"))],
    "bottleneck": [("prediction", ("bottleneck_switch_probability",)),
                   ("tier_prediction", ("bottleneck_probability",))],
    "model_error": [("prediction", ("model_error", "throughput_error",
                                    "model_error_class_max"))],
}


def _config() -> Config:
    systems = {**demo_config(SHOP).systems, **demo_config(CALM).systems}
    return Config(systems=systems)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both systems through one embedded run (records merged in event-time order)."""
    out = tmp_path_factory.mktemp("report-run")
    records = heapq.merge(demo_records(SHOP), demo_records(CALM), key=lambda r: r["end"])
    run_embedded(records, _config(), out)
    return out


@pytest.fixture(scope="module")
def store(run_dir: Path) -> Path:
    return run_dir / STORE_NAME


@pytest.fixture(scope="module")
def page(store: Path) -> str:
    return render_report(load_store(store, _config()))


def _sections(html: str) -> dict[str, str]:
    """Section id -> its inner HTML (sections are not nested)."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r'<section[^>]*\bid="([^"]+)"[^>]*>(.*?)</section>', html, re.S)}


def _figures(section_html: str) -> list[tuple[str, str, str]]:
    """(data-chart, the rest of the figure's attributes, its inner HTML) of each chart."""
    return re.findall(r'<figure class="chart[^"]*" data-chart="([a-z_]+)"([^>]*)>(.*?)</figure>',
                      section_html, re.S)


def _query(store: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(store) as db:
        return db.execute(sql, params).fetchall()


def _system_sections(html: str) -> dict[str, str]:
    """System name (unescaped) -> its section's HTML."""
    out = {}
    for sid, body in _sections(html).items():
        if sid.startswith("system-"):
            name = re.search(r'<span class="name">(.*?)</span>', body).group(1)
            out[_unescape(name)] = body
    return out


def _unescape(text: str) -> str:
    import html as _html
    return _html.unescape(text)


# -- unit tests ----------------------------------------------------------------------------------

def test_every_section_and_every_chart_of_every_system(store: Path, page: str) -> None:
    sections = _sections(page)
    systems = [r[0] for r in _query(store, "SELECT DISTINCT system FROM prediction ORDER BY 1")]
    assert systems == sorted([SHOP.system, CALM.system])
    for sid in SECTIONS:
        assert sid in sections, f"section {sid!r} missing"
    by_name = _system_sections(page)
    assert sorted(by_name) == systems
    for name, body in by_name.items():
        charts = [c for c, _, _ in _figures(body)]
        assert set(charts) == set(SYSTEM_CHARTS), name
        tiers = [r[0] for r in _query(store, "SELECT DISTINCT tier FROM demand WHERE system = ?"
                                      " ORDER BY 1", name)]
        demand_tiers = sorted(re.search(r'data-tier="([^"]+)"', attrs).group(1)
                              for c, attrs, _ in _figures(body) if c == "demand")
        assert demand_tiers == tiers and len(tiers) == 2, name
        assert all(charts.count(c) == 1 for c in SYSTEM_CHARTS if c != "demand"), charts
    overview = [c for c, _, _ in _figures(sections["overview"])]
    assert overview == ["headroom", "time_to_breach"]
    assert [c for c, _, _ in _figures(sections["alerts"])] == ["alert_timeline"]


def _values_for(store: Path, system: str, chart: str, attrs: str) -> int:
    """Rows of the store holding a value ``chart`` draws (for ``system``)."""
    total = 0
    for table, columns in CHART_DATA[chart]:
        where, params = "system = ?", [system]
        if chart == "demand":
            where += " AND tier = ?"
            params.append(re.search(r'data-tier="([^"]+)"', attrs).group(1))
        cond = "idc > 0" if chart == "dispersion" else " OR ".join(
            f'"{c}" IS NOT NULL' for c in columns)          # the log axis drops I <= 0
        total += _query(store, f'SELECT count(*) FROM "{table}" WHERE {where} AND ({cond})',
                        *params)[0][0]
    return total


def _drawn(store: Path, html: str) -> dict[tuple[str, str, str], tuple[bool, int]]:
    """(system, chart, attrs) -> (the chart drew data, rows of the store it could draw)."""
    out = {}
    for name, body in _system_sections(html).items():
        for chart, attrs, inner in _figures(body):
            drawn = "no data in this store" not in inner
            if drawn:
                assert re.search(r'<path d="M[\d.]+,[\d.]+ L', inner) or "<circle" in inner, \
                    (name, chart)
            out[name, chart, attrs] = drawn, _values_for(store, name, chart, attrs)
    return out


def test_each_chart_draws_data_exactly_when_the_store_has_some(store: Path, page: str,
                                                               tmp_path: Path) -> None:
    drawn = _drawn(store, page)
    assert len(drawn) == 2 * (len(SYSTEM_CHARTS) + 1)        # demand: one chart per tier
    assert all(d == (n > 0) for d, n in drawn.values()), drawn
    # a store whose dispersion is unknown for one system: that chart says so, no other does
    holey = tmp_path / STORE_NAME
    shutil.copy(store, holey)
    with sqlite3.connect(holey) as db:
        db.execute("UPDATE tier_prediction SET idc = NULL WHERE system = ?", (SHOP.system,))
    drawn = _drawn(holey, render_report(load_store(holey, _config())))
    empty = [(s, c) for (s, c, _), (d, _) in drawn.items() if not d]
    assert empty == [(SHOP.system, "dispersion")]
    assert all(d == (n > 0) for d, n in drawn.values()), drawn


def test_alerts_are_marked_where_the_store_has_them(store: Path, page: str) -> None:
    """Every system chart marks the first predicted-breach and SLA-broken firing at the times
    the store records; the shop's breach was predicted before it happened, the calm system
    has neither; the one alert table lists every alert state change of the store, and a
    system's section links to it instead of repeating its rows."""
    bodies = _system_sections(page)
    for name, body in bodies.items():
        fired = dict(_query(store, "SELECT alert, min(time) FROM alert WHERE system = ? AND "
                                   "state = 'firing' GROUP BY alert", name))
        expected = {f"{fired[k]:.0f}" for k in ("predicted_breach", "current_breach")
                    if k in fired}
        for chart, _, inner in _figures(body):
            marks = set(re.findall(r'data-alert-time="(\d+)"', inner))
            assert expected <= marks, (name, chart, marks)
        rows = _query(store, "SELECT count(*) FROM alert WHERE system = ?", name)[0][0]
        assert '<table class="alerts">' not in body, name
        if rows:
            assert f'{rows} alert state change{"s" if rows != 1 else ""} of ' in body, name
            assert '<a href="#alerts">the alert table</a>' in body, name
    shop = dict(_query(store, "SELECT alert, min(time) FROM alert WHERE system = ? AND "
                              "state = 'firing' GROUP BY alert", SHOP.system))
    assert shop["predicted_breach"] < shop["current_breach"]
    assert "predicted the breach <b>" in bodies[SHOP.system]
    assert "No SLA breach was predicted or measured" in bodies[CALM.system]
    timeline = _sections(page)["alerts"]
    every = _query(store, "SELECT count(*) FROM alert")[0][0]
    assert timeline.count("<tr>") - 1 == every
    assert page.count('<table class="alerts">') == 1


def test_the_caveats_are_a_list_of_sentences_assumptions_first() -> None:
    """The store keeps a prediction's flags joined by ``;`` (a flag's own clauses by ``; ``);
    the report lists them one sentence each, what the model assumed first."""
    from streams.sinks.report.html import caveat_sentences

    flags = ("MAP network solved by decomposition (flow-equivalent server) at populations >= "
             "40; exact chain below;assumed: think time 0 s: think_time_s is not configured")
    assert caveat_sentences(flags) == [
        "Assumed: think time 0 s: think_time_s is not configured.",
        "MAP network solved by decomposition (flow-equivalent server) at populations >= 40; "
        "exact chain below."]
    assert caveat_sentences(None) == [] and caveat_sentences("") == []


def _chart(body: str, key: str) -> str:
    return next(inner for chart, _, inner in _figures(body) if chart == key)


def test_capacity_chart_shows_the_band_and_the_model_switch(store: Path, page: str) -> None:
    """The capacity chart shades the uncertainty band where the store has one (a polygon per
    run of solves with a band) and marks every switch of model at its time, with the reason
    as the tooltip; the tiles quote the last solve's band; the story names the switch."""
    bodies = _system_sections(page)
    for name, body in bodies.items():
        capacity = _chart(body, "capacity")
        banded = _query(store, "SELECT count(*) FROM prediction WHERE system = ? AND "
                               "capacity_users_lower IS NOT NULL", name)[0][0]
        assert ("<polygon" in capacity) == (banded > 0), name
        switches = _query(store, "SELECT time, model_switch, model_switch_reason FROM "
                                 "prediction WHERE system = ? AND model_switch IS NOT NULL",
                          name)
        marks = re.findall(r'<g class="marker" data-switch-time="(\d+)"><title>(.*?)</title>',
                           capacity)
        assert [(t, _unescape(why)) for t, why in marks] == \
            [(f"{t:.0f}", why) for t, _, why in switches], name
        for _, kind, why in switches:
            assert _unescape(why) in _unescape(body) and kind.replace("->", "→") in \
                _unescape(capacity)
        assert set(re.findall(r'data-switch-time="(\d+)"', _chart(body, "model_error"))) == \
            {f"{t:.0f}" for t, _, _ in switches}
        last = _query(store, "SELECT capacity_users_lower, capacity_users_upper FROM prediction "
                             "WHERE system = ? AND model IS NOT NULL ORDER BY time DESC LIMIT 1",
                      name)[0]
        if last[0] is not None:
            assert f"band {last[0]} – {last[1]}" in _unescape(body), name
    shop = _query(store, "SELECT count(*) FROM prediction WHERE system = ? AND model_switch "
                         "= 'mva -> map'", SHOP.system)[0][0]
    banded = _query(store, "SELECT count(*) FROM prediction WHERE system = ? AND "
                           "capacity_users_lower IS NOT NULL", SHOP.system)[0][0]
    assert shop == 1 and banded > 0          # the shop shows both


def test_names_are_escaped(page: str) -> None:
    assert CALM.system not in page
    assert "calm &lt;b&gt;&amp;&quot;2&quot;" in page
    assert "<b>&" not in page


def test_the_remediation_of_the_last_solve_at_risk_is_shown(store: Path, page: str,
                                                               tmp_path: Path) -> None:
    """The shop's section lists the actions of its last solve at risk, in rank order, as the
    store has them; the calm system says it had none; summaries are escaped; at most
    MAX_REMEDIES rows."""
    from streams.sinks.report import MAX_REMEDIES

    bodies = _system_sections(page)
    last = _query(store, "SELECT MAX(time) FROM remediation WHERE system = ?", SHOP.system)[0][0]
    rows = _query(store, 'SELECT summary FROM remediation WHERE system = ? AND time = ? '
                         'ORDER BY "rank"', SHOP.system, last)
    assert rows
    shop = bodies[SHOP.system].split("<h3>Remediation</h3>")[1].split('<div class="charts">')[0]
    shown = re.findall(r'<td class="summary">(.*?)</td>', shop)
    assert [_unescape(x) for x in shown] == [r[0] for r in rows][:MAX_REMEDIES]
    assert "No remediation" in bodies[CALM.system]
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(store.read_bytes())
    with sqlite3.connect(copy) as db:
        db.executemany('INSERT INTO remediation (time, system, kind, "rank", summary) '
                       'VALUES (?, ?, ?, ?, ?)',
                       [(last + 1, SHOP.system, "cores", r, f"<i>x{r}</i> & more")
                        for r in range(1, 40)])
    html = render_report(load_store(copy, _config()))
    shop = _system_sections(html)[SHOP.system]
    assert shop.count('<td class="summary">&lt;i&gt;x') == MAX_REMEDIES
    assert "<i>x" not in html


def test_thresholds_come_from_the_configuration(store: Path) -> None:
    config = Config(defaults=SystemConfig(idc_threshold=25.0, model_error_threshold=0.45))
    html = render_report(load_store(store, config))
    assert "idc_threshold 25: above, MAP network" in html
    assert "model_error_threshold 45%" in html
    assert "from the configuration" in html
    default = render_report(load_store(store))
    assert "idc_threshold 10: above, MAP network" in default
    assert "perfcast's defaults" in default


def test_the_page_references_nothing_external(page: str) -> None:
    head = page[:page.index("<body>")]
    assert "default-src 'none'" in head            # the browser refuses anything else
    for tag in ("<script", "<link", "<img", "<iframe", "<object", "<embed", "@import"):
        assert tag not in page, tag
    assert not re.search(r"\bsrc\s*=", page)
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs and all(h.startswith("#") for h in hrefs), hrefs
    assert all(u.startswith("#") for u in re.findall(r"url\(([^)]*)\)", page))
    assert "http://" not in page and "https://" not in page and "//" not in head


def test_each_row_type_reads_columns_of_its_table(store: Path) -> None:
    """Every field of the report's row types is a column of its table in a store the embedded
    run wrote (a renamed column fails here), and every loaded row holds its declared types."""
    for row_type in ROW_TYPES:
        have = {r[1] for r in _query(store, f'PRAGMA table_info("{row_type.TABLE}")')}
        assert set(columns(row_type)) <= have, (row_type.__name__,
                                                set(columns(row_type)) - have)
    data = load_store(store)
    loaded: dict[type, list[Any]] = {t: [] for t in ROW_TYPES}
    for s in data.systems:
        rows = [*s.predictions, *s.alerts, *s.remediation,
                *(r for rs in s.classes.values() for r in rs),
                *(r for rs in s.tiers.values() for r in rs),
                *(r for by_class in s.demands.values() for rs in by_class.values() for r in rs)]
        for r in rows:
            loaded[type(r)].append(r)
    for row_type, rows in loaded.items():
        assert rows, row_type.__name__
        hints = typing.get_type_hints(row_type)
        for f in fields(row_type):
            bad = [getattr(r, f.name) for r in rows
                   if not isinstance(getattr(r, f.name), hints[f.name])]
            assert not bad, (row_type.__name__, f.name, bad[:3])


def test_write_report_creates_the_directory(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / REPORT_NAME
    data = write_report(store, out)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [s.name for s in data.systems] == sorted([SHOP.system, CALM.system])


def _empty_store(path: Path) -> Path:
    SQLiteStore(path).close()
    return path


def _store_without_model(path: Path, source: Path) -> Path:
    shutil.copy(source, path)
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE prediction DROP COLUMN model")
    return path


@pytest.mark.parametrize("make, reason", [
    (lambda p, s: p / "missing.sqlite", "no such file"),
    (lambda p, s: p, "is a directory"),
    (lambda p, s: (p / "empty.sqlite").touch() or p / "empty.sqlite", "empty file"),
    (lambda p, s: (p / "text.sqlite").write_text("hello\n" * 200) and p / "text.sqlite",
     "not a SQLite database"),
    (lambda p, s: sqlite3.connect(p / "other.sqlite").execute("CREATE TABLE t (x)")
     and p / "other.sqlite", "not a perfcast store (missing tables prediction"),
    (lambda p, s: _empty_store(p / "fresh.sqlite"), "holds no predictions"),
    (lambda p, s: _store_without_model(p / "old.sqlite", s),
     "table 'prediction' lacks column model"),
])
def test_a_bad_store_is_a_report_error_naming_the_path(tmp_path: Path, store: Path, make,
                                                      reason: str) -> None:
    path = make(tmp_path, store)
    with pytest.raises(ReportError) as err:
        write_report(path, tmp_path / "out.html")
    assert reason in str(err.value)
    assert repr(str(path)) in str(err.value)
    assert not (tmp_path / "out.html").exists()


# -- the real browser ----------------------------------------------------------------------------

def _unavailable(why: str) -> None:
    unavailable(why, "the browser test must run in CI (infra/chromium.sh installs chromium "
                     "and chromedriver; selenium is a test dependency)")


@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium under Debian's chromedriver (no download at test time)."""
    chromium = shutil.which("chromium")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        _unavailable("chromium or chromedriver not installed (bash infra/chromium.sh)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("selenium is not installed (pip install -e '.[test]')")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--hide-scrollbars", "--window-size=1400,1800", "--lang=en-US"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        yield driver
    finally:
        driver.quit()


def _colours(png: bytes) -> tuple[int, float, set[tuple[int, int, int]]]:
    """Distinct colours, the standard deviation of the luminance and the colours themselves."""
    from PIL import Image, ImageStat

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = {c for _, c in image.getcolors(maxcolors=1 << 24)}
    return len(colours), ImageStat.Stat(image.convert("L")).stddev[0], colours


def _near(colours: set[tuple[int, int, int]], hex_colour: str, tolerance: int = 6) -> bool:
    want = tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return any(all(abs(a - b) <= tolerance for a, b in zip(c, want)) for c in colours)


def _severe(driver) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.timeout(180)
def test_chromium_renders_the_report(browser, run_dir: Path, tmp_path: Path) -> None:
    """The page as a person sees it: not blank, every section laid out, every chart drawn in
    its colours, and no console error; the same checks fail on a blank page and on a page
    that references an external resource."""
    from selenium.webdriver.common.by import By

    report = run_dir / REPORT_NAME
    data = write_report(run_dir / STORE_NAME, report, _config())
    browser.get_log("browser")                                # drop earlier messages
    browser.get(report.as_uri())
    assert browser.title.startswith("perfcast report")

    count, spread, colours = _colours(browser.get_screenshot_as_png())
    assert count >= 50 and spread >= 10, (count, spread)
    assert _near(colours, "#1D2330")                           # the header
    assert _near(colours, PALETTE[0]) and _near(colours, PALETTE[1])   # the overview's series

    section_ids = [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR,
                                                                        "section[id]")]
    systems = [e.get_attribute("data-system") for e in browser.find_elements(
        By.CSS_SELECTOR, "section.system")]
    assert systems == [s.name for s in data.systems]
    assert all(sid in section_ids for sid in SECTIONS)
    assert len(section_ids) == len(SECTIONS) + len(data.systems)
    for sid in section_ids:
        section = browser.find_element(By.ID, sid)
        assert section.is_displayed() and section.size["height"] > 100, sid
    for section in browser.find_elements(By.CSS_SELECTOR, "section.system"):
        for key in SYSTEM_CHARTS:
            figures = section.find_elements(By.CSS_SELECTOR, f'figure[data-chart="{key}"]')
            assert figures, (section.get_attribute("id"), key)
            for figure in figures:
                svg = figure.find_element(By.CSS_SELECTOR, ":scope > svg")   # not a swatch
                assert svg.size["width"] >= 400 and svg.size["height"] >= 150, key

    shop = browser.find_element(By.CSS_SELECTOR, f'section[data-system="{SHOP.system}"]')
    chart = shop.find_element(By.CSS_SELECTOR, 'figure[data-chart="response_time"]')
    browser.execute_script("arguments[0].scrollIntoView()", chart)
    count, spread, colours = _colours(chart.screenshot_as_png)
    assert count >= 20 and spread >= 5, (count, spread)
    for colour in PALETTE[:4]:                                 # the four classes
        assert _near(colours, colour), colour
    assert _near(colours, "#E08E00") and _near(colours, "#C62828")   # breach markers

    # the capacity chart: the band shaded (a polygon of visible size) and the model switch
    capacity = shop.find_element(By.CSS_SELECTOR, 'figure[data-chart="capacity"]')
    browser.execute_script("arguments[0].scrollIntoView()", capacity)
    polygons = capacity.find_elements(By.CSS_SELECTOR, ":scope > svg polygon")
    assert polygons and max(p.size["width"] * p.size["height"] for p in polygons) > 50
    (switch,) = capacity.find_elements(By.CSS_SELECTOR, "g[data-switch-time]")
    assert switch.is_displayed() and switch.size["height"] > 50
    assert "mva → map" in switch.text
    band = _query(run_dir / STORE_NAME, "SELECT capacity_users_lower, capacity_users_upper "
                  "FROM prediction WHERE system = ? AND model IS NOT NULL ORDER BY time DESC "
                  "LIMIT 1", SHOP.system)[0]
    if band[0] is not None:                  # the tiles quote the last solve's band
        assert f"band {band[0]} – {band[1]}" in shop.text

    # the remediation: the last solve at risk's actions as a visible table, in rank order,
    # with the remedy the alert quotes named above it
    last = _query(run_dir / STORE_NAME, "SELECT MAX(time) FROM remediation WHERE system = ?",
                  SHOP.system)[0][0]
    want = [r[0] for r in _query(run_dir / STORE_NAME, 'SELECT summary FROM remediation WHERE '
                                 'system = ? AND time = ? ORDER BY "rank"', SHOP.system, last)]
    table = shop.find_element(By.CSS_SELECTOR, "table.remediation")
    browser.execute_script("arguments[0].scrollIntoView()", table)
    assert table.is_displayed() and table.size["height"] > 40 and table.size["width"] > 300
    cells = table.find_elements(By.CSS_SELECTOR, "td.summary")
    assert [c.text for c in cells] == want[:len(cells)] and cells
    assert all(c.is_displayed() and c.size["height"] > 5 for c in cells)
    remedy = shop.find_element(By.CSS_SELECTOR, "p.remedy")
    assert remedy.is_displayed()
    chosen = _query(run_dir / STORE_NAME, "SELECT remediation_summary FROM prediction WHERE "
                    "system = ? AND time = ?", SHOP.system, last)[0][0]
    assert chosen in want and chosen in remedy.text

    # the caveats: a visible list, one sentence an item, the assumptions first; the alerts:
    # one table, every system's rows in it (a system's section links to it)
    items = shop.find_elements(By.CSS_SELECTOR, "div.caveats li")
    assert items and all(i.is_displayed() and i.text.endswith(".") and i.text[0].isupper()
                         for i in items), [i.text for i in items]
    assumed = [i.text.startswith("Assumed: ") for i in items]
    assert assumed == sorted(assumed, reverse=True), [i.text for i in items]
    tables = browser.find_elements(By.CSS_SELECTOR, "table.alerts:not(.remediation)")
    assert len(tables) == 1 and tables[0].is_displayed()
    every = _query(run_dir / STORE_NAME, "SELECT count(*) FROM alert")[0][0]
    assert len(tables[0].find_elements(By.CSS_SELECTOR, "tbody tr")) == every
    assert shop.find_element(By.CSS_SELECTOR, 'a[href="#alerts"]').is_displayed()

    assert _severe(browser) == []

    # the checks can fail: a blank page, and an external reference
    browser.get("about:blank")
    assert _colours(browser.get_screenshot_as_png())[0] <= 2
    leaky = tmp_path / "leaky.html"
    leaky.write_text(report.read_text(encoding="utf-8").replace(
        "<main>", '<main><img src="http://127.0.0.1:9/pixel.png" alt="">', 1), encoding="utf-8")
    browser.get_log("browser")
    browser.get(leaky.as_uri())
    errors = _severe(browser)
    assert errors and any("127.0.0.1:9" in e["message"] for e in errors), errors


def test_a_sparse_band_is_drawn_across_the_solves_it_skips() -> None:
    """Off risk the pipeline computes the band on every BAND_EVERY-th solve only: those points
    are bridged into one polygon of visible area (each was a zero-width sliver before); a gap
    longer than that ends the polygon."""
    from streams.predict.confidence import BAND_EVERY
    from streams.sinks.report import Series, TimeChart

    times = [60.0 * i for i in range(40)]
    lower: list[float | None] = [None] * 40
    upper: list[float | None] = [None] * 40
    for i in list(range(0, 20, BAND_EVERY)) + [39]:      # every 5th, then a long gap
        lower[i], upper[i] = 100.0, 140.0
    chart = TimeChart("capacity", "t", "users", times[0], times[-1],
                      [Series("band", times, [None] * 40, "#2E7D32", "band", lower, upper)])
    html = chart.html("clip")
    polygons = re.findall(r'<polygon points="([^"]+)"', html)
    assert len(polygons) == 2
    xs = [float(p.split(",")[0]) for p in polygons[0].split()]
    assert max(xs) - min(xs) > 100                  # spans the solves 0..15, not one sliver
