"""The page: one self-contained HTML file, an overview of every system, the alerts on a
timeline, and a section per system.

The page makes no network request (it is sent by mail and opened in any browser; its
Content-Security-Policy refuses anything else): styles are inline (``style.css``), the plots
are inline SVG, text uses the system's fonts, and there is no script. Whatever the store
holds, the page stays under :data:`~.bounds.MAX_REPORT_BYTES`: systems get their own section
most urgent first, as many as fit, and the page names what it leaves out.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Callable, Iterable, Mapping

from streams.core.config import Config
from streams.predict.model import ASSUMED
from streams.sinks.report.bounds import (MAX_ALERT_ROWS, MAX_NAMES_LISTED, MAX_OVERVIEW_ROWS,
                                         MAX_REPORT_BYTES, MAX_SYSTEM_SECTIONS)
from streams.sinks.report.charts import SystemCharts, alert_timeline, overview_charts
from streams.sinks.report.episodes import ALERT_NAMES, Episode, episodes, story
from streams.sinks.report.load import StoreData, SystemData, load_store, urgency
from streams.sinks.report.palette import ALERT_COLORS, AMBER, GREY, RED
from streams.sinks.report.rows import AlertRow, PredictionRow, RemediationRow
from streams.sinks.report.svg import legend
from streams.sinks.report.text import duration, esc, num, time_to_breach, utc

__all__ = ["REPORT_NAME", "SECTIONS", "SYSTEM_CHARTS", "alert_table", "remediation_html",
           "caveat_sentences", "render_report", "write_report"]

REPORT_NAME = "report.html"
#: ids of the page's sections besides one ``system-*`` section per system
SECTIONS = ("overview", "alerts")
#: ``data-chart`` keys of every system section (``demand`` once per tier; ``percentiles``
#: beside ``response_time`` too where the predictions carry quantiles)
SYSTEM_CHARTS = ("response_time", "capacity", "throughput", "utilization", "dispersion",
                 "demand", "bottleneck", "model_error")

#: what each value of a prediction's ``model`` means, for the report's model tile
_MODEL_NAMES = {"map": "MAP network (bursty tier), exact chain",
                "map-fes": "MAP network (bursty tier), decomposition",
                "map-fpm": "MAP network (bursty tier), open route for thousands of users "
                           "(fixed-population mean)",
                "mva": "mean-value analysis",
                "pools": "thread and connection pools over exponential tiers (flow-equivalent "
                         "decomposition)",
                "open": "open queues (request rates, Erlang C)",
                "open-map": "open queues, M/MAP/c for the bursty tier"}


@cache
def _css() -> str:
    """The page's style sheet (the package's ``style.css``)."""
    return "\n" + files(__package__).joinpath("style.css").read_text(encoding="utf-8")


def _alert_value(a: AlertRow, v: float | None) -> str:
    """An alert's value or threshold in its unit: a time to breach, a response time, an
    error."""
    if v is None:
        return "–"
    if a.alert == "predicted_breach":
        return duration(v)
    if a.alert == "current_breach":
        return f"{v:.3f} s"
    return f"{100 * v:.0f}%"


def alert_table(alerts: Iterable[AlertRow], with_system: bool,
                total: int | None = None) -> str:
    """The alert state changes as a table; ``total``: how many there are when ``alerts`` is
    a part of them (the rest are named as left out)."""
    head = ["time (UTC)"] + (["system"] if with_system else []) + [
        "alert", "state", "class", "tier", "value", "threshold", "summary"]
    rows = []
    for a in alerts:
        cells = [utc(a.time)] + ([esc(a.system)] if with_system else []) + [
            f'<span class="dot" style="background:{ALERT_COLORS.get(a.alert, GREY)}">'
            f'</span>{esc(ALERT_NAMES.get(a.alert, a.alert))}',
            f'<span class="state {esc(a.state)}">{esc(a.state)}</span>',
            esc(a.cls or "–"), esc(a.tier or "–"),
            _alert_value(a, a.value), _alert_value(a, a.threshold),
            f'<span class="summary">{esc(a.summary or "")}</span>']
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not rows:
        return '<p class="empty">No alert changed state.</p>'
    more = (total or 0) - len(rows)
    return (f'<table class="alerts"><thead><tr>{"".join(f"<th>{h}</th>" for h in head)}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            + (f'<p class="flags">the {len(rows)} most recent of {total} state changes (the '
               f'report\'s size bound; the store has them all)</p>' if more > 0 else ""))


def _names(names: Iterable[str], what: str) -> str:
    """At most :data:`MAX_NAMES_LISTED` names, then how many more."""
    names = list(names)
    shown = ", ".join(names[:MAX_NAMES_LISTED])
    more = len(names) - MAX_NAMES_LISTED
    return esc(shown) + (f" and {more} more {what}" if more > 0 else "")


def _slug(name: str, index: int) -> str:
    return f"system-{index}-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x")


def _bursty(system: SystemData) -> list[tuple[str, float | None]]:
    out = []
    for tier, rows in system.tiers.items():
        last = rows[-1]
        if last.bursty:
            out.append((tier, last.idc))
    return out


def _active_alerts(system: SystemData) -> list[Episode]:
    return [e for e in episodes(system) if e.end is None]


def _tile(label: str, value: str, tone: str = "", sub: str = "") -> str:
    sub_html = f'<span class="sub">{sub}</span>' if sub else ""
    return (f'<div class="tile {tone}"><span class="label">{esc(label)}</span>'
            f'<span class="value">{value}</span>{sub_html}</div>')


def _tones(p: PredictionRow) -> tuple[str, str]:
    head, ttb = (p.headroom_rate_per_s if p.open else p.headroom_users), p.time_to_breach_s
    horizon = p.horizon_s or 0
    head_tone = "bad" if head is not None and head < 0 else (
        "warn" if ttb is not None and ttb <= horizon else "good" if head is not None else "")
    ttb_tone = "bad" if ttb == 0 else "warn" if ttb is not None and ttb <= horizon else (
        "good" if p.model else "")
    return head_tone, ttb_tone


def _rate_tiles(p: PredictionRow, head_tone: str) -> list[str]:
    """An open system's first tiles: request rates and capacity in requests/s."""
    def rate(v: float | None, spec: str = ".1f") -> str:
        return num(v, spec)
    return [
        _tile("request rate now (/s)", rate(p.arrival_rate_per_s), sub="open workload"),
        _tile("rate at the horizon (/s)", rate(p.arrival_rate_forecast_per_s),
              sub=f"in {duration(p.horizon_s)}" if p.horizon_s else ""),
        _tile("capacity (req/s within SLA)", rate(p.capacity_rate_per_s),
              sub=_band_text(p.capacity_rate_per_s_lower, p.capacity_rate_per_s_upper,
                             lambda v: num(v, ".1f"))),
        _tile("headroom", rate(p.headroom_rate_per_s), head_tone,
              "req/s below capacity")]


def _tiles(system: SystemData) -> str:
    p = system.latest()
    head_tone, ttb_tone = _tones(p)
    ttb = p.time_to_breach_s
    breach_at = (f"at ≈ {utc(p.time + ttb, '%H:%M')} UTC" if ttb else
                 "SLA broken at the current load" if ttb == 0 else "")
    err = p.model_error
    tiles = _rate_tiles(p, head_tone) if p.open else [
        _tile("users now", num(p.users), sub=esc(p.users_source or "")),
        _tile("users at the horizon", num(p.users_forecast),
              sub=f"in {duration(p.horizon_s)}" if p.horizon_s else ""),
        _tile("capacity (users within SLA)", num(p.capacity_users),
              sub=_band_text(p.capacity_users_lower, p.capacity_users_upper, num)),
        _tile("headroom", num(p.headroom_users), head_tone, "users below capacity")]
    tiles += [
        _tile("time to SLA breach", esc(time_to_breach(ttb)), ttb_tone,
              esc(" · ".join(x for x in (breach_at, _band_text(
                  p.time_to_breach_lower_s, p.time_to_breach_upper_s, time_to_breach)) if x))),
        _tile("model", esc(p.model or "none yet"),
              sub=_MODEL_NAMES.get(p.model or "", "")),
        _tile("bottleneck tier (forecast)", esc(p.bottleneck_tier or "–")
              + ("*" if p.bottleneck_reason else ""),
              sub=f"switch probability {num(p.bottleneck_switch_probability, '.2f')}"
                  + (f"; breach tier {esc(p.breach_tier)}" if p.breach_tier else "")),
        _tile("model error", "–" if err is None else f"{100 * err:.0f}%",
              "bad" if err is not None and err > system.thresholds.model_error else "",
              f"threshold {100 * system.thresholds.model_error:g}%"
              + (f"; worst class {esc(p.model_error_class)} "
                 f"{100 * p.model_error_class_max:.0f}%"
                 if p.model_error_class and p.model_error_class_max is not None
                 else "")),
    ]
    return f'<div class="tiles">{"".join(tiles)}</div>'


def _band_text(lo: float | None, hi: float | None, fmt: Callable[[float | None], str]) -> str:
    """``band lo – hi`` of a prediction's value (``""`` when it has no band)."""
    if lo is None and hi is None:
        return ""
    return f"band {fmt(lo)} – {fmt(hi)}"


def _bottleneck_html(system: SystemData, at: float | None) -> str:
    """Why the busiest tier is not the breach tier (:mod:`streams.predict.story`), at the
    prediction of time ``at`` (the breach alert) or the last solve."""
    solved = [p for p in system.predictions if p.model]
    if not solved:
        return ""
    p = next((q for q in solved if at is not None and q.time >= at), solved[-1])
    reason = p.bottleneck_reason
    if reason:
        return (f'<span class="pill warn">bottleneck*</span> {esc(reason)} '
                f'(at {utc(p.time, "%H:%M")})')
    if p.breach_tier:
        return (f'<span class="pill warn">bottleneck</span> {esc(p.breach_tier)}: the '
                f'busiest tier is also the one that causes the breach')
    return ""


def _story_html(system: SystemData) -> str:
    st = story(system)
    pred, broken, lead = st.predicted, st.broken, st.lead_s
    parts = []
    if pred is not None:
        parts.append(f'<span class="pill warn">breach predicted {utc(pred.time, "%H:%M")}'
                     f'</span> {esc(pred.summary or "")}')
        why = _bottleneck_html(system, pred.time)
        if why:
            parts.append(why)
    if broken is not None:
        parts.append(f'<span class="pill bad">SLA broken {utc(broken.time, "%H:%M")}</span> '
                     f'{esc(broken.summary or "")}')
    if lead is not None:
        verdict = (f"perfcast predicted the breach <b>{duration(lead)} before</b> the measured "
                   f"response time broke the SLA" if lead > 0 else
                   f"the predicted-breach alert came {duration(lead)} after the SLA was broken")
        parts.append(f'<span class="lead">{verdict}.</span>')
    if not parts:
        parts.append("No SLA breach was predicted or measured in this store.")
    switches = [p for p in system.predictions if p.model_switch]
    for p in switches[-3:]:
        parts.append(f'<span class="pill" style="background:{GREY}">model switch '
                     f'{utc(p.time, "%H:%M")}</span> {esc(p.model_switch)}: '
                     f'{esc(p.model_switch_reason or "")}')
    key = legend([("breach predicted (perfcast's alert fired)", "marker", AMBER),
                  ("SLA broken (first class above its SLA)", "marker", RED),
                  ("SLA broken, measured", "span", RED)])
    return ('<div class="story">' + "".join(f"<p>{x}</p>" for x in parts)
            + f'<div class="key">On every chart below: {key}</div></div>')


def remediation_html(system: SystemData) -> str:
    """The last solve at risk's remediation: the smallest action per kind that keeps every
    class within its SLA at the users expected within the horizon, cheapest first
    (:mod:`streams.predict.whatif`); at most :data:`~.bounds.MAX_REMEDIES` rows."""
    rows = system.remediation
    if not rows:
        return ('<p class="empty">No remediation: no solve predicted a breach within the '
                'horizon.</p>')
    first = rows[0]
    body = "".join(
        f'<tr><td>{num(r.rank, ".0f")}</td><td>{esc(r.kind or "")}</td>'
        f'<td>{esc(r.tier or "–")}</td><td>{num(r.value, "g")}</td>'
        f'<td>{_remedy_capacity(r)}</td><td>{num(r.cost, ".3g")}</td>'
        f'<td class="summary">{esc(r.summary or "")}</td></tr>' for r in rows)
    head = "".join(f"<th>{h}</th>" for h in ("rank", "action", "tier", "value",
                                              "capacity after", "cost", "what it does"))
    opened = first.required_rate_per_s is not None
    before = (f'{num(first.capacity_before_rate_per_s, ".1f")} req/s, '
              f'{num(first.required_rate_per_s, ".1f")} req/s' if opened else
              f'{num(first.capacity_before, ".0f")} users, '
              f'{num(first.required_users, ".0f")}')
    return (f'<p class="meta">at the solve of {utc(first.time)} UTC: capacity '
            f'{before} expected within the horizon; the '
            f'smallest action of each kind that keeps every class within its SLA there, on '
            f'the model the prediction used, cheapest first (remediation_costs)</p>'
            f'{_remedy_line(system, first.time)}'
            f'<table class="alerts remediation"><thead><tr>{head}</tr></thead>'
            f'<tbody>{body}</tbody></table>')


def _remedy_capacity(r: RemediationRow) -> str:
    """A remedy's capacity: users, or requests/s for an open system's."""
    if r.capacity_rate_per_s is not None:
        return f'{num(r.capacity_rate_per_s, ".1f")}/s'
    return num(r.capacity_users, ".0f")


def _remedy_line(system: SystemData, time: float) -> str:
    """The remedy of the solve of ``time`` and, when it does not act on the breach tier, why
    (:func:`streams.predict.story.remedy_story`); when the predicted-breach alert's first
    firing named another one (the users grew since), that one too, with its time -- the
    remedy the alert's text and ``perfcast run``'s closing lines name. Empty for a store
    without them."""
    p = next((q for q in reversed(system.predictions) if q.time == time), None)
    if p is None or not p.remediation_summary:
        return ""
    why = p.remediation_reason
    fired = next((a.time for a in system.alerts
                  if a.alert == "predicted_breach" and a.state == "firing"), None)
    alert = next((q for q in system.predictions if q.time == fired), None) \
        if fired is not None and fired != time else None
    then = (f'; the predicted-breach alert of {utc(alert.time, "%H:%M")} named <b>'
            f'{esc(alert.remediation_summary)}</b> (at {num(alert.users, ".0f")} users)'
            if alert is not None and alert.remediation_summary
            and alert.remediation_summary != p.remediation_summary else "")
    label = "the alert quotes it" if fired == time else f"at {utc(time, '%H:%M')}"
    return (f'<p class="remedy">remedy ({label}): <b>{esc(p.remediation_summary)}'
            f'</b> (breach tier {esc(p.breach_tier or "–")})'
            + (f'; {esc(why)}' if why else "") + then + "</p>")


def _system_section(system: SystemData, index: int) -> str:
    slug = _slug(system.name, index)
    drawn = SystemCharts(system)
    charts = drawn.all()
    figures = "".join(c.html(f"{slug}-clip-{i}") for i, c in enumerate(charts))
    p = system.latest()
    caveats = caveat_sentences(p.flags)
    flag_html = ('<div class="caveats"><p>Model caveats at the last solve:</p><ul>'
                 + "".join(f"<li>{esc(c)}</li>" for c in caveats) + "</ul></div>"
                 if caveats else "")
    changes = len(system.alerts)
    hist = (f'<p class="meta">{changes} alert state change{"s" if changes != 1 else ""} of '
            f'{esc(system.name)}: in <a href="#alerts">the alert table</a> (its system '
            f'column).</p>' if changes else '<p class="empty">No alert changed state.</p>')
    return (f'<section class="system" id="{slug}" data-system="{esc(system.name)}">'
            f'<h2>System <span class="name">{esc(system.name)}</span></h2>'
            f'<p class="meta">{len(system.predictions)} solves, {utc(system.start)} – '
            f'{utc(system.end)} UTC; last solve {utc(p.time)} UTC; tiers '
            f'{_names(system.tiers, "tiers")}; classes {_names(system.classes, "classes")}'
            f'{"; " + str(system.deadletters) + " dead letters" if system.deadletters else ""}'
            f'</p>{_drawn_note(system, drawn)}{_tiles(system)}{_story_html(system)}{flag_html}'
            f'<h3>Remediation</h3>{remediation_html(system)}'
            f'<div class="charts">{figures}</div>'
            f'<h3>Alert history</h3>{hist}</section>')


def caveat_sentences(flags: str | None) -> list[str]:
    """A prediction's ``flags`` as the store keeps them (joined by ``;``, a flag's own
    clauses by ``; ``) as sentences: one a flag, what the model assumed for a missing input
    first."""
    items = [f.strip() for f in re.split(r";(?! )", flags or "") if f.strip()]
    items.sort(key=lambda f: not f.startswith(ASSUMED))
    return [f[:1].upper() + f[1:] + ("" if f.endswith(".") else ".") for f in items]


def _drawn_note(system: SystemData, drawn: SystemCharts) -> str:
    left = [f"{len(drawn.classes)} busiest of {len(system.classes)} classes"
            if len(drawn.classes) < len(system.classes) else "",
            f"first {len(drawn.tiers)} of {len(system.tiers)} tiers"
            if len(drawn.tiers) < len(system.tiers) else ""]
    left = [x for x in left if x]
    return (f'<p class="flags">charts show the {" and the ".join(left)} (the report\'s '
            f'size bound)</p>') if left else ""


def _overview(data: StoreData, slugs: Mapping[str, str]) -> str:
    """The overview table (the :data:`MAX_OVERVIEW_ROWS` most urgent systems; ``slugs``:
    the sections drawn) and its charts (:func:`.charts.overview_charts`)."""
    ranked = sorted(data.systems, key=urgency)
    rows = []
    for s in ranked[:MAX_OVERVIEW_ROWS]:
        slug = slugs.get(s.name)
        p = s.latest()
        head_tone, ttb_tone = _tones(p)
        bursty = ", ".join(f"{t} (I = {num(i, '.3g')})" for t, i in _bursty(s)) or "none"
        active = _active_alerts(s)
        alerts = "".join(f'<span class="pill {"bad" if e.alert == "current_breach" else "warn"}'
                         f'">{esc(e.row)}</span>' for e in active) or "none"
        name = f'<a href="#{slug}">{esc(s.name)}</a>' if slug else esc(s.name)
        cells = [name, num(p.users), num(p.capacity_users),
                 f'<span class="{head_tone}">{num(p.headroom_users)}</span>',
                 f'<span class="{ttb_tone}">{esc(time_to_breach(p.time_to_breach_s))}'
                 f'</span>', esc(p.model or "–"), esc(p.bottleneck_tier or "–"),
                 num(p.bottleneck_switch_probability, ".2f"),
                 "–" if p.model_error is None else f'{100 * p.model_error:.0f}%',
                 alerts, esc(bursty)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = ["system", "users", "capacity", "headroom", "time to breach", "model",
            "bottleneck", "switch P", "model error", "active alerts", "bursty tiers"]
    more = len(ranked) - MAX_OVERVIEW_ROWS
    table = (f'<table class="overview"><thead><tr>{"".join(f"<th>{h}</th>" for h in head)}'
             f'</tr></thead><tbody>{"".join(rows)}</tbody></table>'
             + (f'<p class="flags">{more} more systems, further from a breach, are not listed '
                f'(the report\'s size bound; the store has them all)</p>' if more > 0 else ""))
    headroom, ttb = overview_charts(data, ranked)
    return (f'<section id="overview"><h2>Overview</h2>'
            f'<p class="meta">At each system\'s last solve. Headroom = capacity − users; '
            f'a breach is ahead when the users trend reaches capacity.</p>{table}'
            f'<div class="charts">{headroom.html("overview-clip-0")}'
            f'{ttb.html("overview-clip-1")}</div></section>')


def _alerts_section(data: StoreData) -> str:
    every = sorted((a for s in data.systems for a in s.alerts), key=lambda a: a.time)
    shown = every[-MAX_ALERT_ROWS:]
    kinds = legend([(ALERT_NAMES[k], "color", c) for k, c in ALERT_COLORS.items()])
    return (f'<section id="alerts"><h2>Alerts on the timeline</h2>'
            f'<p class="meta">Each bar runs from the solve at which perfcast\'s alert fired to '
            f'the one at which it resolved (solid to the end: still firing). Hover for the '
            f'summary.</p>{kinds}<figure class="chart wide" data-chart="alert_timeline">'
            f'{alert_timeline(data)}</figure>'
            f'<h3>Every alert state change</h3>'
            f'{alert_table(shown, with_system=True, total=len(every))}</section>')


def render_report(data: StoreData) -> str:
    """The whole page as one HTML string (no external resource), at most
    :data:`MAX_REPORT_BYTES` bytes: systems get their own section most urgent first, as many
    as :data:`MAX_SYSTEM_SECTIONS` and the bound allow; the page names the ones left out."""
    ranked = sorted(data.systems, key=urgency)
    index = {id(s): i for i, s in enumerate(data.systems)}
    sections: list[tuple[SystemData, str, str]] = []
    for s in ranked[:MAX_SYSTEM_SECTIONS]:
        i = index[id(s)]
        sections.append((s, _slug(s.name, i), _system_section(s, i)))

    def page(chosen: list[tuple[SystemData, str, str]]) -> str:
        slugs = {s.name: slug for s, slug, _ in chosen}
        left = len(data.systems) - len(chosen)
        nav = "".join([f'<a href="#{s}">{s.capitalize()}</a>' for s in SECTIONS] + [
            f'<a href="#{slug}">System {esc(s.name)}</a>' for s, slug, _ in chosen])
        solves = sum(len(s.predictions) for s in data.systems)
        alerts = sum(len(s.alerts) for s in data.systems)
        thr = ("from the configuration" if data.thresholds_source == "configuration" else
               "perfcast's defaults (pass --config for a system's own)")
        omitted = (f'<p class="flags">{left} of {len(data.systems)} systems have no section '
                   f'here: the report is kept under {MAX_REPORT_BYTES / 1e6:g} MB, so it draws '
                   f'the {len(chosen)} nearest to a breach (the store has them all; '
                   f'<code>perfcast report</code> of a smaller store draws every one).</p>'
                   if left else "")
        body = (f'<header><h1>perfcast report</h1><p>store <code>{esc(data.path)}</code> · '
                f'{utc(data.start)} – {utc(data.end)} UTC · {len(data.systems)} '
                f'system{"s" if len(data.systems) != 1 else ""} · {solves} solves · {alerts} '
                f'alert state changes · {data.deadletters} dead letters</p>{omitted}</header>'
                f'<nav>{nav}</nav><main>{_overview(data, slugs)}{_alerts_section(data)}'
                + "".join(html_ for _, _, html_ in chosen)
                + f'</main><footer>Rendered by <code>perfcast report</code> from the embedded '
                  f'store; thresholds idc_threshold and model_error_threshold: {thr}. Measured '
                  f'values are per solve interval; predicted ones are the model at the measured '
                  f'population. Times are event times (UTC).</footer>')
        names = [s.name for s in data.systems[:5]]
        title = ", ".join(names) + (f" and {len(ranked) - 5} more" if len(ranked) > 5 else "")
        return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
                'style-src \'unsafe-inline\'; img-src data:">'
                f'<title>perfcast report: {esc(title)}</title>'
                f'<style>{_css()}</style></head><body>{body}</body></html>\n')

    # the page without sections, then sections while they fit (a few KB of slack for the
    # navigation links and the note on what was left out)
    budget = MAX_REPORT_BYTES - len(page([]).encode("utf-8")) - 64_000
    chosen = []
    for s, slug, html_ in sections:
        size = len(html_.encode("utf-8")) + 2 * len(slug) + 4 * len(s.name) + 100
        if size <= budget:
            chosen.append((s, slug, html_))
            budget -= size
    chosen.sort(key=lambda c: index[id(c[0])])          # in the store's order
    return page(chosen)


def write_report(store: str | Path, out: str | Path, config: Config | None = None) -> StoreData:
    """Read ``store`` and write the report to ``out`` (its directory is created)."""
    data = load_store(store, config)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(data), encoding="utf-8")
    return data
