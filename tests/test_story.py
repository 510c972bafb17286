"""One story over the demo's outputs: the bottleneck the live table and the
report name is the tier the predicted-breach alert names, or they say why not; the switch of
model (MVA <-> MAP network) is marked in the records and on the report's charts.

The demo is the default one (``perfcast demo``: the TPC-W-like shop, 45 simulated minutes,
seed 1), run through the embedded pipeline with the live table fed as ``perfcast demo`` feeds
it; the table is rendered to text as an 80-column terminal shows it. In this shop the front
server is the busier tier on average while the bursty database breaks the SLA (Mi et al. (2008)
section 3.4: the bottleneck switches), so the rule is exercised on its "explain" branch:
before this change the table said ``front``, the alert ``db``, and nothing said why.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from rich.console import Console

from streams.cli.commands import _LiveView
from streams.core.outputs import Prediction
from streams.cli.demo import DemoScenario, demo_config, demo_records
from streams.cli.embedded import STORE_NAME, run_embedded
from streams.sinks.report import REPORT_NAME, write_report
from streams.predict.story import model_family

SCENARIO = DemoScenario()          # the demo's defaults; ``perfcast demo`` runs 2700 s of it
DURATION_S = 2700.0


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("story")
    sc = DemoScenario(duration_s=DURATION_S)
    view = _LiveView("perfcast demo")
    run_embedded(demo_records(sc), demo_config(sc), out, chunk=24,
                 on_outputs=lambda o, p: view.add(o, p))
    write_report(out / STORE_NAME, out / REPORT_NAME, demo_config(sc))
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    alerts = [json.loads(x) for x in (out / "alerts.jsonl").read_text().splitlines()]
    return {"out": out, "view": view, "predictions": [p for p in preds if p.get("model")],
            "alerts": alerts, "html": (out / REPORT_NAME).read_text(encoding="utf-8")}


def _explains(p: dict, tier: str) -> bool:
    """The prediction's ``bottleneck_reason`` names both its busiest tier and ``tier``."""
    why = p.get("bottleneck_reason") or ""
    return p["bottleneck_tier"] in why and tier in why and "causes the breach" in why


def test_records_name_one_bottleneck_or_say_why(demo):
    with_breach = [p for p in demo["predictions"] if p["breach_tier"] is not None]
    assert with_breach
    for p in with_breach:
        if p["bottleneck_tier"] == p["breach_tier"]:
            assert p["bottleneck_reason"] is None
        else:
            assert _explains(p, p["breach_tier"]), p
    differ = [p for p in with_breach if p["bottleneck_tier"] != p["breach_tier"]]
    assert differ, "the demo's shop is expected to show the bottleneck switch"
    assert all("bottleneck switch" in p["bottleneck_reason"] for p in differ
               if p["breach_tier_bottleneck_probability"] is not None)


def test_the_alert_the_table_and_the_report_tell_one_story(demo):
    """The predicted-breach alert's tier is the tier the table and report show as the
    bottleneck at that solve, or both mark the bottleneck with '*' and give the reason."""
    by_time = {p["time"]: p for p in demo["predictions"]}
    fired = [a for a in demo["alerts"] if a["alert"] == "predicted_breach"
             and a["state"] == "firing"]
    assert fired
    console = Console(record=True, width=80)
    view: _LiveView = demo["view"]
    for alert in fired:
        p = by_time[alert["time"]]
        view.rows = [Prediction.from_dict(q) for q in demo["predictions"]
                     if q["time"] <= alert["time"]]
        console.print(view.render())
        table = console.export_text()
        if p["bottleneck_tier"] == alert["tier"]:
            continue
        assert _explains(p, alert["tier"]), (alert, p)
        row = [line for line in table.splitlines()
               if line.strip().startswith(_hhmm(p["time"]))][-1]
        assert f"{p['bottleneck_tier']}*" in row, row
        caption = " ".join(table.split())
        assert " ".join(f"* shop: {p['bottleneck_reason']}".split()) in caption, caption
        if alert.get("update") == "trust":       # a restatement: the report tells the firing
            continue
        html = demo["html"]
        assert "bottleneck*" in html
        assert _plain(p["bottleneck_reason"]) in _plain(html)


def _hhmm(t: float) -> str:
    from streams.core.records import format_time
    return format_time(t)[11:16]


def _plain(html: str) -> str:
    import html as _html
    return " ".join(_html.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_the_model_switch_is_marked_in_records_table_and_report(demo):
    """Every solve whose model family differs from the previous solve's carries
    ``model_switch`` with a reason naming the capacity before and after; no other does. The
    live table's caption and the report's capacity chart mark it."""
    preds = demo["predictions"]
    switches = []
    for before, p in zip(preds, preds[1:]):
        changed = model_family(before["model"]) != model_family(p["model"])
        assert bool(p.get("model_switch")) == changed, p["time"]
        if changed:
            switches.append(p)
            assert p["model_switch"] == f"{model_family(before['model'])} -> " \
                                        f"{model_family(p['model'])}"
            assert f"capacity {before['capacity_users']} -> {p['capacity_users']}" in \
                p["model_switch_reason"]
    assert switches and switches[0]["model_switch"] == "mva -> map"
    caption = " ".join(demo["view"]._caption().split())
    assert f"model switch {_hhmm(switches[-1]['time'])} (mva -> map)" in caption
    capacity = re.search(r'<figure class="chart" data-chart="capacity".*?</figure>',
                         demo["html"], re.S).group(0)
    marked = set(re.findall(r'data-switch-time="(\d+)"', capacity))
    assert marked == {f"{p['time']:.0f}" for p in switches}


def test_the_remedy_acts_on_the_breach_tier_or_says_why(demo):
    """Every solve at risk names the remedy its alert quotes and the tier it acts on; that is
    the breach tier, or ``remediation_reason`` names both and says why (a cheaper action
    elsewhere, or no single-tier action suffices). The firing alert, the live table's caption
    and the report's remediation section quote the same remedy and reason."""
    at_risk = [p for p in demo["predictions"] if p.get("remediation")]
    assert at_risk
    for p in at_risk:
        assert p["remediation_summary"] in [a["summary"] for a in p["remediation"]["actions"]]
        if p["remediation_tier"] == p["breach_tier"]:
            assert p.get("remediation_reason") is None, p
        else:
            why = p["remediation_reason"] or ""
            assert p["breach_tier"] in why and (p["remediation_tier"] or "admission") in why, p
    assert any(p["remediation_tier"] == p["breach_tier"] for p in at_risk)
    by_time = {p["time"]: p for p in demo["predictions"]}
    fired = [a for a in demo["alerts"] if a["alert"] == "predicted_breach"
             and a["state"] == "firing"]
    for alert in fired:
        p = by_time[alert["time"]]
        want = f"remedy: {p['remediation_summary']}" + (
            f" ({p['remediation_reason']})" if p.get("remediation_reason") else "")
        if "; remedy withheld: " in alert["summary"]:
            # an untrusted alert naming another class than the model's breach withholds it
            assert not p["model_trusted"] and p["trust_reasons"], (alert, p)
            continue
        assert alert["summary"].endswith(want), (alert, p)
    view: _LiveView = demo["view"]
    view.rows = [Prediction.from_dict(q) for q in demo["predictions"]]
    last = demo["predictions"][-1]
    caption = " ".join(view._caption().split())
    if last.get("remediation_summary"):
        assert " ".join(f"remedy shop: {last['remediation_summary']}".split()) in caption
        if last.get("remediation_reason"):
            assert " ".join(last["remediation_reason"].split()) in caption
    section = _plain(demo["html"].split("<h3>Remediation</h3>")[1].split('<div class="charts">')[0])
    final = at_risk[-1]
    quoted = final["time"] == fired[0]["time"]
    label = "the alert quotes it" if quoted else time.strftime("at %H:%M",
                                                               time.gmtime(final["time"]))
    assert f"remedy ({label}): {final['remediation_summary']}" in section
    assert f"breach tier {final['breach_tier']}" in section
    if final.get("remediation_reason"):
        assert _plain(final["remediation_reason"]) in section
    # the remedy the alert named when it first fired, the one of its text, is named too
    first = by_time[fired[0]["time"]]
    if first["remediation_summary"] != final["remediation_summary"]:
        assert (f"the predicted-breach alert of {time.strftime('%H:%M', time.gmtime(first['time']))}"
                f" named {first['remediation_summary']}") in section


def _action(kind: str, tier: str | None, cost: float) -> dict:
    return {"kind": kind, "tier": tier, "value": 2.0, "capacity_users": 200, "cost": cost,
            "capacity_limited": False, "summary": f"{kind} {tier}"}


def test_remedy_story_prefers_the_breach_tier_and_says_why_not():
    """At equal cost the breach tier's action is quoted; a cheaper action elsewhere is quoted
    with the breach tier's own cheapest and its cost; with no tier action the admission limit
    is quoted with the tiers no single action fixes."""
    from streams.predict.story import remedy_story

    tie = {"required_users": 180, "unreachable": [],
           "actions": [_action("cores", "app", 0.125), _action("cores", "db", 0.125),
                       _action("admission", None, 0.5)]}
    assert remedy_story(tie, "db") == {"remediation_summary": "cores db",
                                       "remediation_tier": "db", "remediation_reason": None}
    cheaper = {"required_users": 180, "unreachable": [],
               "actions": [_action("cores", "app", 0.125), _action("replicate", "db", 1.0),
                           _action("admission", None, 2.0)]}
    out = remedy_story(cheaper, "db")
    assert out["remediation_tier"] == "app"
    assert "cheapest remedy acts on app" in out["remediation_reason"]
    assert "db's cheapest, replicate db, costs 1" in out["remediation_reason"]
    stuck = {"required_users": 190, "unreachable": ["cores db", "replicate db", "cores front"],
             "actions": [_action("admission", None, 2.9)]}
    out = remedy_story(stuck, "db")
    assert out["remediation_tier"] is None and out["remediation_summary"] == "admission None"
    assert "no single action on db or front" in out["remediation_reason"]
    assert "190 users" in out["remediation_reason"]
    assert remedy_story(None, "db")["remediation_summary"] is None
