"""Grafana: provisioning files, dashboards, alert rules and ``perfcast grafana push``.

Three kinds of test:

* **structure** (no services): the committed ``infra/grafana`` files are what ``perfcast
  grafana generate`` writes; dashboards are valid (unique ids, no overlapping panels, known
  data source, every variable defined); alert rules are well formed; every measurement,
  field and tag a query names exists in ``streams.sinks.schema.MEASUREMENTS``.
* **queries against the real InfluxDB** (started by ``infra/services.sh``; never skipped under
  ``CI=true``): the demo shop and a second system run through ``streams.engine.pipeline.Pipeline``,
  their points written with the worker's sink (``InfluxSink`` + ``schema.points``) into a
  database of their own; then every panel's and every alert rule's query is executed and
  must return data. Grafana itself does not run on these machines: each query is first put
  through :func:`streams.grafana.flux.render`, which substitutes what Grafana would --
  ``${system}``/``${tier}`` by a system and tier of the run, ``v.timeRangeStart`` /
  ``v.timeRangeStop`` by the run's first and last point (+1 s), ``v.windowPeriod`` by
  ``1m0s`` and ``v.defaultBucket`` by ``"<database>/autogen"`` (InfluxDB 1.8's bucket).
  The alert rules' results are then evaluated like Grafana would (last value, ``> 0``) and
  must fire exactly for the alerts the pipeline holds active, labelled with their tags.
* **push**: Grafana cannot run here, so ``push`` talks to a stand-in -- a local HTTP server
  (stdlib ``http.server``) that implements the endpoints push uses, stores folders, data
  sources, dashboards and rules by uid the way Grafana answers for them, and records every
  request. A second push must send no write and leave the state identical.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pipeline_harness import ROOT, unique
from streams.alerts.book import KINDS
from streams.core.config import SystemConfig
from streams.grafana import flux
from streams.grafana.dashboards import DATASOURCE_UID, OVERVIEW_UID, SYSTEM_UID, dashboards
from streams.grafana.provisioning import provisioning_files
from streams.grafana.rules import RULES, rule_group_file, rules
from streams.sinks.schema import MEASUREMENTS

pytestmark = pytest.mark.timeout(900)      # the pipeline run of the module fixture: ~2 min
runner = CliRunner()
BOARDS = {d["uid"]: d for d in dashboards()}
SYSTEM_BOARD = BOARDS[SYSTEM_UID]
API_RULES = rules(SYSTEM_BOARD)
BUILTIN = re.compile(r"^__")
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


def _panels() -> list[tuple[str, dict]]:
    return [(uid, p) for uid, d in BOARDS.items() for p in d["panels"]]


def _targets() -> list[tuple[str, str, str, str]]:
    """(dashboard uid, panel title, refId, query) of every panel target."""
    return [(uid, p["title"], t["refId"], t["query"]) for uid, p in _panels()
            for t in p["targets"]]


def _rule_queries() -> list[tuple[str, str, str]]:
    """(rule uid, refId, Flux query) of every query of every rule."""
    return [(r["uid"], d["refId"], d["model"]["query"]) for r in API_RULES for d in r["data"]
            if d["datasourceUid"] == DATASOURCE_UID]


def _annotation_queries() -> list[tuple[str, str, str]]:
    """(dashboard uid, annotation name, Flux query) of every dashboard annotation."""
    return [(uid, a["name"], a["target"]["query"]) for uid, d in BOARDS.items()
            for a in d["annotations"]["list"]]


def _variable_queries() -> list[tuple[str, str, str]]:
    return [(uid, v["name"], v["query"]) for uid, d in BOARDS.items()
            for v in d["templating"]["list"]]


# -- the committed files ------------------------------------------------------------------------
def test_committed_files_are_the_generated_ones(tmp_path):
    """``infra/grafana`` holds exactly what ``perfcast grafana generate`` writes (rerun it
    after changing streams/grafana), and the CLI writes the same files."""
    from streams.cli.commands import app

    result = runner.invoke(app, ["grafana", "generate", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    generated = provisioning_files()
    committed = {str(p.relative_to(ROOT / "infra/grafana")): p.read_text(encoding="utf-8")
                 for p in (ROOT / "infra/grafana").rglob("*") if p.is_file()}
    assert sorted(committed) == sorted(generated)
    for rel, text in generated.items():
        assert committed[rel] == text, f"infra/grafana/{rel} is stale: rerun 'perfcast grafana " \
                                       f"generate'"
        assert (tmp_path / rel).read_text(encoding="utf-8") == text


def test_files_load_and_follow_the_provisioning_layout():
    """YAML and JSON load back to the data they were made of; the data source takes every
    setting from perfcast's environment variables and holds no literal secret."""
    files = provisioning_files()
    ds = yaml.safe_load(files["provisioning/datasources/perfcast.yaml"])
    assert ds["apiVersion"] == 1
    (source,) = ds["datasources"]
    assert source["uid"] == DATASOURCE_UID and source["type"] == "influxdb"
    assert source["url"] == "${PERFCAST_INFLUX_URL}"
    assert source["jsonData"] == {"version": "Flux", "organization": "${PERFCAST_INFLUX_ORG}",
                                  "defaultBucket": "${PERFCAST_INFLUX_BUCKET}",
                                  "tlsSkipVerify": False}
    assert source["secureJsonData"] == {"token": "${PERFCAST_INFLUX_TOKEN}"}
    provider = yaml.safe_load(files["provisioning/dashboards/perfcast.yaml"])["providers"][0]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    alerting = yaml.safe_load(files["provisioning/alerting/perfcast.yaml"])
    assert alerting == rule_group_file(SYSTEM_BOARD)
    for uid, board in BOARDS.items():
        assert json.loads(files[f"dashboards/{uid}.json"]) == board


def test_thresholds_drawn_follow_the_configuration():
    """The idc and model-error threshold lines are the configured defaults."""
    board = dashboards(SystemConfig(idc_threshold=42.0, model_error_threshold=0.2))[1]
    lines = {p["title"]: p["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"]
             for p in board["panels"] if p["type"] == "timeseries"
             and p["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "line"}
    assert lines == {"Index of dispersion per tier vs the bursty threshold": 42.0,
                     "Model error": 0.2, "Model error per class and tier": 0.2}


# -- dashboards, structurally -------------------------------------------------------------------
def _overlap(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])


@pytest.mark.parametrize("uid", sorted(BOARDS))
def test_dashboard_structure(uid):
    board = BOARDS[uid]
    assert board["uid"] == uid and board["title"] and isinstance(board["schemaVersion"], int)
    assert json.loads(json.dumps(board)) == board
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    titles = [p["title"] for p in board["panels"]]
    assert len(titles) == len(set(titles))
    grid = [p["gridPos"] for p in board["panels"]]
    for g in grid:
        assert g["x"] >= 0 and g["y"] >= 0 and g["w"] >= 1 and g["h"] >= 1
        assert g["x"] + g["w"] <= 24, g
    for i, a in enumerate(grid):
        for b in grid[i + 1:]:
            assert not _overlap(a, b), (a, b)
    defined = [v["name"] for v in board["templating"]["list"]]
    for k, v in enumerate(board["templating"]["list"]):
        assert v["datasource"]["uid"] == DATASOURCE_UID and v["query"] == v["definition"]
        used = {a or b for a, b in VARIABLE.findall(v["query"])}
        assert used <= set(defined[:k]), f"variable {v['name']} uses {used} before defined"
    for panel in board["panels"]:
        assert panel["type"] in {"timeseries", "stat", "bargauge", "table"}
        assert panel["description"]
        assert panel["datasource"]["uid"] == DATASOURCE_UID
        assert {"defaults", "overrides"} <= set(panel["fieldConfig"])
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))
        texts = [panel["title"]] + [t["query"] for t in panel["targets"]]
        for t in panel["targets"]:
            assert t["datasource"]["uid"] == DATASOURCE_UID and t["query"].strip()
        used = {a or b for text in texts for a, b in VARIABLE.findall(text)}
        assert {u for u in used if not BUILTIN.match(u)} <= set(defined), panel["title"]
        if "repeat" in panel:
            (var,) = [v for v in board["templating"]["list"] if v["name"] == panel["repeat"]]
            assert var["multi"]
    used = {a or b for a, b in VARIABLE.findall(board["title"])}
    assert used <= set(defined)


def test_alert_rules_link_to_existing_panels():
    ids = {p["id"]: p["title"] for p in SYSTEM_BOARD["panels"]}
    for spec, r in zip(RULES, API_RULES):
        assert r["annotations"]["__dashboardUid__"] == SYSTEM_UID
        assert ids[int(r["annotations"]["__panelId__"])] == spec.panel


# -- alert rules, structurally ------------------------------------------------------------------
def test_alert_rules_are_well_formed():
    """One rule per perfcast alert kind; condition and expressions refer to existing refIds;
    summaries use only labels the query produces and values of reduce expressions; every
    query is Flux on the perfcast data source."""
    assert sorted(s.kind for s in RULES) == sorted(KINDS)
    assert len({r["uid"] for r in API_RULES}) == len(API_RULES)
    for spec, r in zip(RULES, API_RULES):
        data = {d["refId"]: d for d in r["data"]}
        assert r["condition"] in data
        reduces = set()
        for d in r["data"]:
            assert d["model"]["refId"] == d["refId"]
            if d["datasourceUid"] == "__expr__":
                assert d["model"]["expression"] in data
                if d["model"]["type"] == "reduce":
                    reduces.add(d["refId"])
            else:
                assert d["datasourceUid"] == DATASOURCE_UID
                assert d["model"]["datasource"]["uid"] == DATASOURCE_UID
                assert d["relativeTimeRange"]["from"] > d["relativeTimeRange"]["to"] == 0
        assert data[r["condition"]]["model"]["type"] == "threshold"
        for text in (r["annotations"]["summary"], r["annotations"]["description"]):
            assert set(re.findall(r"\$labels\.(\w+)", text)) <= set(spec.labels), text
            assert set(re.findall(r"\$values\.(\w+)", text)) <= reduces, text
        assert r["labels"]["severity"] in {"critical", "warning", "info"}
        assert r["noDataState"] == "OK" and r["execErrState"] == "Error"


def test_file_rules_equal_api_rules_and_are_safe_from_env_interpolation():
    """The provisioning file and push carry the same rules. Grafana interpolates environment
    variables in every field of the file except annotations and the query models, so no
    other field may contain a '$'."""
    group = rule_group_file(SYSTEM_BOARD)["groups"][0]
    for file_rule, api_rule in zip(group["rules"], API_RULES):
        for key in ("uid", "title", "condition", "data", "labels", "for", "noDataState",
                    "execErrState"):
            assert file_rule[key] == api_rule[key]
        assert file_rule["panelId"] == int(api_rule["annotations"]["__panelId__"])
        assert {k: v for k, v in api_rule["annotations"].items() if not k.startswith("__")} \
            == file_rule["annotations"]
        rest = {k: v for k, v in file_rule.items() if k not in ("annotations", "data")}
        assert "$" not in json.dumps(rest) + json.dumps(
            [{k: v for k, v in d.items() if k != "model"} for d in file_rule["data"]])


# -- every query against the schema ---------------------------------------------------------
def _all_queries() -> list[str]:
    return [q for *_, q in _targets()] + [q for *_, q in _rule_queries()] + \
        [q for *_, q in _variable_queries()] + [q for *_, q in _annotation_queries()]


@pytest.mark.parametrize("query", _all_queries())
def test_queries_use_only_the_schema(query):
    """Measurement, fields, tags and pivoted columns a query names exist in MEASUREMENTS
    (parsed from the query text, independently of the builders)."""
    (measurement,) = re.findall(r'r\._measurement == "(\w+)"', query)
    tags, types = MEASUREMENTS[measurement]
    for f in re.findall(r'r\._field == "(\w+)"', query):
        assert f in types, f"{measurement}.{f}"
    for t in re.findall(r'r\["(\w+)"\]', query):
        assert t in tags, f"{measurement} tag {t}"
    for c in re.findall(r"\br\.(\w+)", query):
        assert c.startswith("_") or c in types or c in tags, f"{measurement}: column {c}"
    for cols in re.findall(r"columns: \[([^\]]*)\]", query):
        for c in re.findall(r'"(\w+)"', cols):
            assert c.startswith("_") or c in types or c in tags or c == "series", c


def test_builders_refuse_what_the_schema_lacks():
    with pytest.raises(flux.QueryError, match="prediction.no_such_field"):
        flux.latest("prediction", ["no_such_field"], ["system"], anchor="horizon_s")
    with pytest.raises(flux.QueryError, match="no tag 'class'"):
        flux.series("tier_prediction", "idc", "r.tier", where={"class": "x"})
    with pytest.raises(flux.QueryError, match="measurement 'nope'"):
        flux.tag_values("nope", "x", "system")


def test_render_substitutes_like_grafana():
    """Variables first, then the Flux macros (as Grafana's macros.go: any word before the
    dot, times as RFC 3339, the bucket quoted); an undefined variable is an error."""
    text = 'from(bucket: v.defaultBucket) |> range(start: v.timeRangeStart, stop: ' \
           'v.timeRangeStop) |> aggregateWindow(every: v.windowPeriod) |> filter(fn: (r) => ' \
           'r.system == "${system}" and r.tier == "$tier" and r.other == 1)'
    out = flux.render(text, start=0, stop=90.5, bucket="db/rp", window="30s",
                      variables={"system": "shop", "tier": "db"})
    assert out == ('from(bucket: "db/rp") |> range(start: 1970-01-01T00:00:00Z, stop: '
                   '1970-01-01T00:01:30.500000Z) |> aggregateWindow(every: 30s) |> filter('
                   'fn: (r) => r.system == "shop" and r.tier == "db" and r.other == 1)')
    with pytest.raises(KeyError):
        flux.render("${nope}", start=0, stop=1, bucket="b")


def test_docs_describe_every_panel_and_rule():
    docs = (ROOT / "docs/grafana.md").read_text(encoding="utf-8")
    for _, panel in _panels():
        assert panel["title"] in docs, panel["title"]
    for spec in RULES:
        assert spec.title in docs and spec.kind in docs


# -- queries against the real InfluxDB after a pipeline run -------------------------------------
@dataclass
class Run:
    """A pipeline run written into a database of its own."""

    url: str
    bucket: str
    main: str                  # the demo shop: ramps up, breaks its SLA, every alert kind
    other: str                 # a second, quiet system
    tiers: list[str]
    start: float
    stop: float
    alerts: list[dict]         # every alert event of the run
    active: set[tuple]         # (system, alert, class or None) the pipeline holds firing
    predictions: list[dict] = None    # every prediction of the run
    opened: str = ""           # an open system (request rates, no users): ramps past capacity
    pooled: str = ""           # a system with a pool (its pool panel's data)

    def query(self, text: str, **variables: str) -> list:
        from influxdb_client import InfluxDBClient

        rendered = flux.render(text, start=self.start, stop=self.stop, bucket=self.bucket,
                               variables=variables)
        with InfluxDBClient(url=self.url, token="", org="-", timeout=60_000) as client:
            return client.query_api().query(rendered)


def _influxql(url: str, statement: str) -> None:
    data = urllib.parse.urlencode({"q": statement}).encode()
    with urllib.request.urlopen(f"{url}/query", data=data, timeout=30) as resp:
        body = resp.read().decode()
    assert '"error"' not in body, body


def _with_pool_occupancy(records: list[dict], pool: str, size: int) -> list[dict]:
    """``records`` with the entry tier's windows carrying pool ``pool`` (held across every
    tier) measured: its mean tokens held by Little's law, the window's completions per second
    times each class's residence summed over the tiers (so the pool panel's measured series
    has data)."""
    by_end: dict[str, list[dict]] = {}
    for r in records:
        by_end.setdefault(r["end"], []).append(r)
    out = []
    for r in records:
        if r["tier"] == "front":
            busy = sum(n / r["window_s"] * sum(t["response_time_s"].get(c, 0.0)
                                               for t in by_end[r["end"]])
                       for c, n in r["completions"].items())
            r = {**r, "pools": {pool: {"size": size, "busy": min(busy, size)}}}
        out.append(r)
    return out


@pytest.fixture(scope="module")
def run(influx_url) -> Run:
    """The demo shop (45 min: users ramp up until the SLA breaks; configured with half its
    true think time and a model-error threshold of 5%, so that the model is really wrong and
    model_error fires while the breach is predicted -- the demo's own model agrees with its
    shop within 2.2%; its predictions carry quantiles, predict_quantiles = "always": a p95
    SLO there would cost 13 times the run's time, the capacity searches' quantiles of the MAP
    chain) and a quiet second system (15 min, steady), through the
    pipeline core, written with the worker's InfluxDB sink into a fresh database."""
    from streams.core.config import Config, InfluxSettings, Pool
    from streams.cli.demo import START, THINK_TIME, DemoScenario, demo_config, demo_records
    from streams.sinks.influx import InfluxSink
    from streams.engine.pipeline import Pipeline
    from streams.sinks.schema import points

    from solvers.simulation.physical import (OpenArrivals, PhysicalNetwork, Tier,
                                             monitor_physical)

    database = unique("grafana").replace("-", "_")
    main, other, opened, pooled = unique("shop"), unique("quiet"), unique("api"), unique("pooled")
    demo_a = DemoScenario(system=main, duration_s=2700)
    demo_b = DemoScenario(system=other, duration_s=900, steady_s=900, seed=2)
    demo_c = DemoScenario(system=pooled, duration_s=600, steady_s=600, seed=3)
    config = Config(systems={
        main: replace(demo_config(demo_a).system(main), model_error_threshold=0.05,
                      think_time_s=0.5 * THINK_TIME, predict_quantiles="always"),
        other: demo_config(demo_b).system(other),
        opened: SystemConfig(tiers=("web", "db"), sla_s={"*": 0.1}),
        pooled: replace(demo_config(demo_c).system(pooled), pools={
            "workers": Pool(tier="front", size=40, holds=("front", "db"))})})
    api = PhysicalNetwork((Tier("web", 4, 0.002), Tier("db", 2, 0.010)), ("a",), (1.0,), 0.0,
                          0, arrivals=OpenArrivals([(0.0, 60.0), (900.0, 185.0)]))
    pipeline = Pipeline(config)
    out = pipeline.process_many(demo_records(demo_a) + demo_records(demo_b)
                                + _with_pool_occupancy(demo_records(demo_c), "workers", 40)
                                + monitor_physical(
        api, 900.0, 5.0, warmup=20.0, seed=5, system=opened, start_time=START))
    out.extend(pipeline.finish())
    _influxql(influx_url, f"CREATE DATABASE {database}")
    sink = InfluxSink(InfluxSettings(url=influx_url, org="-", bucket=f"{database}/autogen"))

    async def write() -> None:
        await sink.add(points(out))
        await sink.flush()

    try:
        asyncio.run(write())
        assert sink.written > 0 and sink.dropped == 0
        active = set()
        for name, state in pipeline.systems.items():
            for key in state.alerts.active():
                kind, _, cls = key.partition("/")
                active.add((name, kind, cls or None))
        times = [p.time for p in points(out)]
        yield Run(influx_url, f"{database}/autogen", main, other, ["front", "db"],
                  START - 60, max(times) + 1, out.alerts, active, out.predictions, opened,
                  pooled)
    finally:
        sink.close()
        _influxql(influx_url, f"DROP DATABASE {database}")


def _rows(tables: list) -> list[dict]:
    return [{k: v for k, v in rec.values.items() if k not in ("result", "table")}
            for t in tables for rec in t.records]


def _has_values(tables: list) -> bool:
    """Some row carries a value besides its time and labels."""
    for t in tables:
        key = {c.label for c in t.get_group_key()}
        for rec in t.records:
            if any(v is not None for k, v in rec.values.items()
                   if k not in key | {"result", "table", "_time", "_start", "_stop"}):
                return True
    return False


#: fields only an open system's predictions carry: its panel is read on the open system
OPEN_FIELDS = ("arrival_rate", "capacity_rate_per_s", "saturation_rate_per_s")


def test_influx_sink_writes_the_open_fields(run):
    """The open system's prediction points carry its rates, capacity in req/s, its band and
    the workload; its remediation points the capacities in req/s and the rate limit."""
    fields = ("arrival_rate_per_s", "arrival_rate_forecast_per_s", "capacity_rate_per_s",
              "capacity_rate_per_s_lower", "capacity_rate_per_s_upper",
              "headroom_rate_per_s", "saturation_rate_per_s", "unstable", "workload")
    query = ('from(bucket: v.defaultBucket) |> range(start: v.timeRangeStart, stop: '
             'v.timeRangeStop) |> filter(fn: (r) => r._measurement == "prediction" and r.system == '
             '"${system}") |> group(columns: ["_field"]) |> last()')
    got = {r["_field"]: r["_value"] for r in _rows(run.query(query, system=run.opened))}
    assert set(fields) <= set(got), set(fields) - set(got)
    assert got["workload"] == "open" and "users" not in got
    mine = [p for p in run.predictions if p["system"] == run.opened and p.get("model")]
    assert got["capacity_rate_per_s"] == pytest.approx(mine[-1]["capacity_rate_per_s"])
    remedy = query.replace('"prediction"', '"remediation"').replace(
        '|> group(columns: ["_field"]) |> last()', '')
    rows = _rows(run.query(remedy, system=run.opened))
    kinds = {r["kind"] for r in rows}
    assert "rate_limit" in kinds and "cores" in kinds, kinds
    assert {"capacity_rate_per_s", "required_rate_per_s",
            "capacity_before_rate_per_s"} <= {r["_field"] for r in rows}


def _variables(run: Run, uid: str, query: str) -> list[dict[str, str]]:
    """The variable values a panel query is run with: every tier when it uses ${tier}."""
    if uid == OVERVIEW_UID:
        return [{}]
    if any(f in query for f in OPEN_FIELDS):
        return [{"system": run.opened}]
    if "pool_prediction" in query:
        return [{"system": run.pooled}]
    if "${tier}" in query:
        return [{"system": run.main, "tier": t} for t in run.tiers]
    return [{"system": run.main}]


@pytest.mark.parametrize("uid,title,ref,query", _targets(),
                         ids=[f"{u}:{t}:{r}" for u, t, r, _ in _targets()])
def test_every_panel_query_returns_data(run, uid, title, ref, query):
    for variables in _variables(run, uid, query):
        tables = run.query(query, **variables)
        assert _has_values(tables), f"{uid} / {title} / {ref} with {variables}: no data"


@pytest.mark.parametrize("uid,title,ref,query",
                         [t for t in _targets() if t[0] == SYSTEM_UID],
                         ids=[f"{t[1]}:{t[2]}" for t in _targets() if t[0] == SYSTEM_UID])
def test_system_panels_show_only_the_chosen_system(run, uid, title, ref, query):
    """With ${system} set to a system that does not exist, a per-system panel is empty."""
    assert _rows(run.query(query, system="no-such-system", tier="db")) == []


def test_overview_shows_every_system(run):
    """The overview's per-system panels have one entry per system of the run."""
    systems = {run.main, run.other}
    for title in ("Headroom (users below capacity)", "Time to SLA breach",
                  "Systems at a glance", "Burstiness per tier (bursty tiers first)"):
        panel = next(p for p in BOARDS[OVERVIEW_UID]["panels"] if p["title"] == title)
        rows = _rows(run.query(panel["targets"][0]["query"]))
        assert {r["system"] for r in rows} >= systems, title
    panel = next(p for p in BOARDS[OVERVIEW_UID]["panels"] if p["title"] == "Headroom over time")
    assert {r["series"] for r in _rows(run.query(panel["targets"][0]["query"]))} >= systems


def test_variable_queries_list_the_systems_and_tiers(run):
    queries = {name: q for _, name, q in _variable_queries()}
    systems = {r["_value"] for r in _rows(run.query(queries["system"]))}
    assert {run.main, run.other} <= systems
    tiers = [r["_value"] for r in _rows(run.query(queries["tier"], system=run.main))]
    assert sorted(tiers) == sorted(run.tiers)


def test_active_alerts_panel_lists_what_the_pipeline_holds_active(run):
    panel = next(p for p in BOARDS[OVERVIEW_UID]["panels"] if p["title"] == "Active alerts")
    rows = [r for t in panel["targets"] for r in _rows(run.query(t["query"]))]
    assert {(r["system"], r["alert"], r["class"] if r["alert"] == "current_breach" else None)
            for r in rows} == run.active
    assert all(r["summary"] for r in rows)


def test_model_switch_annotation_marks_every_switch(run):
    """The system dashboard's 'model switch' annotation returns one row per solve at which the
    model changed between MVA and the MAP network, at its time, with the reason as text (the
    demo shop switches once its database is known to be bursty)."""
    (query,) = [q for uid, name, q in _annotation_queries()
                if uid == SYSTEM_UID and name == "model switch"]
    rows = _rows(run.query(query, system=run.main))
    expected = [(p["time"], p["model_switch"], p["model_switch_reason"])
                for p in run.predictions if p["system"] == run.main and p.get("model_switch")]
    assert expected and expected[0][1] == "mva -> map"
    assert [(r["_time"].timestamp(), r["title"], r["text"]) for r in rows] == \
        [(pytest.approx(t), s, why) for t, s, why in expected]
    assert _rows(run.query(query, system="no-such-system")) == []


def test_a_breach_predicted_while_the_model_is_not_trusted_is_labelled(run):
    """With model_error_threshold at 5% the model-error alert fires on the demo shop: a
    predicted_breach firing carries trust = 'untrusted' (and its summary begins UNTRUSTED)
    exactly when model_error was active at its solve, at least one does, and the
    predicted_breach rule's series carries the last event's trust. (With the I calibration
    the model-error alert resolves for a while: the first firing is trusted, the second
    not.)"""
    spec = next(s for s in RULES if s.kind == "predicted_breach")
    assert "trust" in spec.labels
    r = next(x for x in API_RULES if x["uid"] == "perfcast-predicted-breach")
    query = next(d["model"]["query"] for d in r["data"] if d["refId"] == "A")
    rows = [row for row in _rows(run.query(query)) if row["system"] == run.main]
    mine = [a for a in run.alerts if a["system"] == run.main]
    fired = [a for a in mine if a["alert"] == "predicted_breach" and a["state"] == "firing"]

    def distrusted(time: float) -> bool:
        """model_error active after its evaluation at the solve of ``time`` (it is evaluated
        before predicted_breach)."""
        states = [a["state"] for a in mine if a["alert"] == "model_error" and a["time"] <= time]
        return bool(states) and states[-1] == "firing"

    assert fired and any(distrusted(a["time"]) for a in fired)
    for a in fired:
        untrusted = distrusted(a["time"])
        assert a["trust"] == ("untrusted" if untrusted else "trusted")
        assert a["summary"].startswith("UNTRUSTED") == untrusted
    assert rows and rows[0]["trust"] == [a for a in run.alerts if a["system"] == run.main
                                         and a["alert"] == "predicted_breach"][-1]["trust"]


@pytest.mark.parametrize("rule_uid,ref,query", _rule_queries(),
                         ids=[f"{u}:{r}" for u, r, _ in _rule_queries()])
def test_every_alert_rule_query_returns_data(run, rule_uid, ref, query):
    assert _has_values(run.query(query)), f"{rule_uid} / {ref}: no data"


def _last_events(run: Run, kind: str, identity: tuple[str, ...]) -> dict[tuple, dict]:
    last: dict[tuple, dict] = {}
    for event in run.alerts:
        if event["alert"] == kind:
            last[tuple(event.get(k) for k in identity)] = event
    return last


@pytest.mark.parametrize("spec", RULES, ids=[s.kind for s in RULES])
def test_alert_rules_fire_exactly_for_the_active_alerts(run, spec):
    """Evaluated as Grafana does (each series' last value; condition ``active > 0``), a rule
    fires for exactly the alerts of its kind that the pipeline holds active, labelled with the
    system, class and tier of the alert's last event; the value and threshold series carry
    that event's value and threshold (the numbers of the summary)."""
    r = next(x for x in API_RULES if x["uid"] == f"perfcast-{spec.kind.replace('_', '-')}")
    queries = {d["refId"]: d["model"]["query"] for d in r["data"]
               if d["datasourceUid"] == DATASOURCE_UID}
    series = {ref: {tuple((k, row.get(k)) for k in spec.labels): row["_value"]
                    for row in _rows(run.query(q))} for ref, q in queries.items()}
    firing = {dict(labels)["system"] for labels, v in series["A"].items() if v > 0} \
        if spec.kind != "current_breach" else \
        {(dict(labels)["system"], dict(labels)["class"])
         for labels, v in series["A"].items() if v > 0}
    expected = {(s, c) if spec.kind == "current_breach" else s
                for s, kind, c in run.active if kind == spec.kind}
    assert firing == expected and firing, (firing, expected)
    events = _last_events(run, spec.kind, spec.identity)
    assert len(series["A"]) == len(events)
    for labels, active in series["A"].items():
        lab = dict(labels)
        event = events[tuple(lab[k] for k in spec.identity)]
        assert active == int(event["state"] == "firing")
        for k in spec.labels:
            assert lab[k] == event.get(k), (k, lab, event)
        if active:
            assert series["B"][labels] == pytest.approx(event["value"])
            assert series["C"][labels] == pytest.approx(event["threshold"])


def test_an_alert_resolved_under_other_tags_stops_firing(influx_url):
    """perfcast identifies a predicted breach per system and a current breach per system and
    class; the tags of the resolving point can differ from the firing one's (no class when no
    breach is ahead any more, another bottleneck tier). The rules follow the alert, not the
    tag series: resolved is resolved, and the instance carries the last point's tags."""
    database = unique("grafana_tags").replace("-", "_")
    t0 = 1_795_168_800
    lines = [  # predicted breach: fires for class home on db, resolves without class/tier
        f'alert,alert=predicted_breach,class=home,system=s,tier=db active=1i,value=300.0,'
        f'threshold=600.0,summary="x" {t0}000000000',
        f'alert,alert=predicted_breach,system=s active=0i,threshold=600.0,summary="y" '
        f'{t0 + 60}000000000',
        # current breach of class a: fires with tier front, resolves with tier db
        f'alert,alert=current_breach,class=a,system=s,tier=front active=1i,value=0.5,'
        f'threshold=0.3,summary="x" {t0}000000000',
        f'alert,alert=current_breach,class=a,system=s,tier=db active=0i,value=0.2,'
        f'threshold=0.3,summary="y" {t0 + 60}000000000',
        # current breach of class b fires on front after having resolved on db
        f'alert,alert=current_breach,class=b,system=s,tier=db active=0i,value=0.2,'
        f'threshold=0.3,summary="x" {t0}000000000',
        f'alert,alert=current_breach,class=b,system=s,tier=front active=1i,value=0.6,'
        f'threshold=0.3,summary="y" {t0 + 60}000000000']
    _influxql(influx_url, f"CREATE DATABASE {database}")
    try:
        body = "\n".join(lines).encode()
        request = urllib.request.Request(f"{influx_url}/write?db={database}&precision=ns",
                                         data=body)
        urllib.request.urlopen(request, timeout=30).read()
        probe = Run(influx_url, f"{database}/autogen", "s", "", [], t0 - 60, t0 + 120, [], set())
        got = {}
        for spec in RULES[:2]:
            r = next(x for x in API_RULES if x["uid"].endswith(spec.kind.replace("_", "-")))
            query = next(d["model"]["query"] for d in r["data"] if d["refId"] == "A")
            got[spec.kind] = {(row.get("class"), row.get("tier")): row["_value"]
                              for row in _rows(probe.query(query))}
    finally:
        _influxql(influx_url, f"DROP DATABASE {database}")
    assert got == {"predicted_breach": {(None, None): 0},
                   "current_breach": {("a", "db"): 0, ("b", "front"): 1}}


# -- push against a stand-in for Grafana --------------------------------------------------------
class FakeGrafana:
    """A stand-in for Grafana's HTTP API (Grafana cannot run on these machines): the endpoints
    ``perfcast grafana push`` uses, with Grafana's answers -- 404 for a missing uid, ids and
    versions added on save, secrets kept out of GET answers (``secureJsonFields``), rules with
    provenance, rule groups created with ``default_interval`` -- state kept by uid, every
    request recorded ``(method, path, body)``. Requests without ``Bearer <token>`` get 401."""

    def __init__(self, token: str, default_interval: int = 10) -> None:
        self.token = token
        self.default_interval = default_interval
        self.folders: dict[str, dict] = {}
        self.datasources: dict[str, dict] = {}
        self.secrets: dict[str, dict] = {}
        self.dashboards: dict[str, dict] = {}
        self.rules: dict[str, dict] = {}
        self.intervals: dict[tuple[str, str], int] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.auth: list[str | None] = []
        self._ids = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path = urllib.parse.urlparse(self.path).path
                fake.requests.append((self.command, path, copy.deepcopy(body)))
                fake.auth.append(self.headers.get("Authorization"))
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    status, answer = 401, {"message": "Unauthorized"}
                else:
                    status, answer = fake.route(self.command, path, body)
                data = b"" if status == 204 else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def state(self) -> dict[str, Any]:
        return copy.deepcopy({"folders": self.folders, "datasources": self.datasources,
                              "secrets": self.secrets, "dashboards": self.dashboards,
                              "rules": self.rules, "intervals": self.intervals})

    def writes(self, since: int = 0) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests[since:] if r[0] != "GET"]

    def _id(self) -> int:
        self._ids += 1
        return self._ids

    # the API -----------------------------------------------------------------------------
    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        missing = (404, {"message": "not found"})
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "folders"]:
            if method == "POST":
                self.folders[body["uid"]] = {"id": self._id(), **body}
                return 200, self.folders[body["uid"]]
            uid = parts[2]
            if uid not in self.folders:
                return missing
            if method == "PUT":
                self.folders[uid]["title"] = body["title"]
            return 200, self.folders[uid]
        if parts[:2] == ["api", "datasources"]:
            if method == "POST":
                if body["uid"] in self.datasources:
                    return 409, {"message": "data source with the same uid already exists"}
                return 200, self._save_datasource(body, {"id": self._id(), "version": 0})
            uid = parts[3]
            if uid not in self.datasources:
                return missing
            if method == "PUT":
                if self.datasources[uid].get("readOnly"):
                    return 403, {"message": "Cannot update read-only data source"}
                return 200, self._save_datasource(body, self.datasources[uid])
            return 200, self.datasources[uid]
        if parts[:3] == ["api", "dashboards", "db"] and method == "POST":
            board = body["dashboard"]
            held = self.dashboards.get(board["uid"])
            if held is not None and held["meta"].get("provisioned"):
                return 400, {"message": "Cannot save provisioned dashboard"}
            if held is not None and not body.get("overwrite"):
                return 412, {"message": "The dashboard has been changed by someone else"}
            version = held["dashboard"]["version"] + 1 if held else 1
            ident = held["dashboard"]["id"] if held else self._id()
            self.dashboards[board["uid"]] = {
                "dashboard": {**board, "id": ident, "version": version},
                "meta": {"folderUid": body.get("folderUid", ""), "provisioned": False}}
            return 200, {"id": ident, "uid": board["uid"], "status": "success",
                         "version": version}
        if parts[:3] == ["api", "dashboards", "uid"]:
            return (200, self.dashboards[parts[3]]) if parts[3] in self.dashboards else missing
        if parts[:4] == ["api", "v1", "provisioning", "alert-rules"]:
            if method == "POST":
                group = (body["folderUID"], body["ruleGroup"])
                self.intervals.setdefault(group, self.default_interval)
                self.rules[body["uid"]] = {**body, "id": self._id(), "provenance": "api",
                                           "updated": "2026-01-01T00:00:00Z"}
                return 201, self.rules[body["uid"]]
            uid = parts[4]
            if uid not in self.rules:
                return missing
            if method == "PUT":
                self.rules[uid] = {**self.rules[uid], **body}
            elif method == "DELETE":
                del self.rules[uid]
                return 204, None
            return 200, self.rules[uid]
        if parts[:4] == ["api", "v1", "provisioning", "folder"] and parts[5:6] == ["rule-groups"]:
            key = (parts[4], parts[6])
            members = [r for r in self.rules.values()
                       if (r["folderUID"], r["ruleGroup"]) == key]
            if not members:
                return missing
            if method == "PUT":
                self.intervals[key] = body["interval"]
            return 200, {"title": key[1], "folderUid": key[0],
                         "interval": self.intervals[key], "rules": members}
        return 404, {"message": f"no route {method} {path}"}

    def _save_datasource(self, body: dict, base: dict) -> dict:
        secret = body.get("secureJsonData") or {}
        self.secrets.setdefault(body["uid"], {}).update(secret)
        held = {**base, **{k: v for k, v in body.items() if k != "secureJsonData"},
                "readOnly": base.get("readOnly", False),
                "secureJsonFields": {k: True for k in self.secrets[body["uid"]]}}
        held["version"] = base.get("version", 0) + 1
        self.datasources[body["uid"]] = held
        return held


GRAFANA_TOKEN = "glsa_test-token-0123456789"
INFLUX_TOKEN = "influx-test-token-abcdef"


@pytest.fixture
def grafana():
    fake = FakeGrafana(GRAFANA_TOKEN)
    yield fake
    fake.close()


def _push(fake: FakeGrafana, *extra: str, env: dict[str, str] | None = None):
    from streams.cli.commands import app

    environment = {"PERFCAST_GRAFANA_TOKEN": GRAFANA_TOKEN,
                   "PERFCAST_INFLUX_URL": "http://influxdb:8086",
                   "PERFCAST_INFLUX_ORG": "perfcast", "PERFCAST_INFLUX_BUCKET": "perfcast",
                   "PERFCAST_INFLUX_TOKEN": INFLUX_TOKEN}
    if env is not None:
        environment = {**environment, **env}
    result = runner.invoke(app, ["grafana", "push", "--url", fake.url, *extra],
                           env=environment)
    assert GRAFANA_TOKEN not in result.output and INFLUX_TOKEN not in result.output
    return result


def test_push_creates_everything_then_a_second_push_changes_nothing(grafana):
    """First push: folder, data source (token in secureJsonData), both dashboards, the three
    rules, the rule group's interval. Second push: the same answers, no write at all, the
    state identical."""
    first = _push(grafana)
    assert first.exit_code == 0, first.output
    assert set(grafana.auth) == {f"Bearer {GRAFANA_TOKEN}"}
    assert set(grafana.folders) == {"perfcast"}
    ds = grafana.datasources[DATASOURCE_UID]
    assert ds["url"] == "http://influxdb:8086" and ds["jsonData"]["version"] == "Flux"
    assert grafana.secrets[DATASOURCE_UID] == {"token": INFLUX_TOKEN}
    assert set(grafana.dashboards) == set(BOARDS)
    for uid, board in BOARDS.items():
        held = grafana.dashboards[uid]
        assert held["meta"]["folderUid"] == "perfcast"
        assert {k: v for k, v in held["dashboard"].items() if k not in ("id", "version")} \
            == board
    assert {uid: {k: v for k, v in r.items() if k not in ("id", "provenance", "updated")}
            for uid, r in grafana.rules.items()} == {r["uid"]: r for r in API_RULES}
    assert grafana.intervals == {("perfcast", "perfcast"): 60}
    state, n = grafana.state(), len(grafana.requests)
    second = _push(grafana)
    assert second.exit_code == 0, second.output
    assert grafana.writes(n) == []
    assert grafana.state() == state
    assert "0 change(s)" in second.output


def test_push_repairs_only_what_changed(grafana):
    """Someone edits a dashboard and a rule in Grafana and adds a rule to perfcast's group:
    push restores the two and deletes the stray rule, touching nothing else."""
    assert _push(grafana).exit_code == 0
    grafana.dashboards[OVERVIEW_UID]["dashboard"]["title"] = "edited"
    grafana.rules["perfcast-model-error"]["for"] = "10m"
    grafana.rules["perfcast-old"] = {**grafana.rules["perfcast-model-error"],
                                     "uid": "perfcast-old"}
    n = len(grafana.requests)
    result = _push(grafana)
    assert result.exit_code == 0, result.output
    assert [(m, p) for m, p, _ in grafana.writes(n)] == [
        ("POST", "/api/dashboards/db"),
        ("PUT", "/api/v1/provisioning/alert-rules/perfcast-model-error"),
        ("DELETE", "/api/v1/provisioning/alert-rules/perfcast-old")]
    assert grafana.dashboards[OVERVIEW_UID]["dashboard"]["title"] == BOARDS[OVERVIEW_UID]["title"]
    assert grafana.rules["perfcast-model-error"]["for"] == "0s"
    n = len(grafana.requests)
    assert _push(grafana).exit_code == 0 and grafana.writes(n) == []


def test_push_sends_the_influx_token_only_when_missing_or_asked(grafana, tmp_path):
    """Grafana never shows a stored secret: the token is sent when Grafana holds none, or
    with --update-influx-token (after a rotation). The Grafana token may come from a file."""
    token_file = tmp_path / "grafana-token"
    token_file.write_text(GRAFANA_TOKEN + "\n")
    file_env = {"PERFCAST_GRAFANA_TOKEN": "", "PERFCAST_GRAFANA_TOKEN_FILE": str(token_file)}
    assert _push(grafana, env=file_env).exit_code == 0
    n = len(grafana.requests)
    result = _push(grafana, "--update-influx-token",
                   env={**file_env, "PERFCAST_INFLUX_TOKEN": "rotated-token"})
    assert result.exit_code == 0, result.output
    (write,) = grafana.writes(n)
    assert write[:2] == ("PUT", f"/api/datasources/uid/{DATASOURCE_UID}")
    assert grafana.secrets[DATASOURCE_UID] == {"token": "rotated-token"}


def test_push_without_token_or_influx_url_says_what_is_missing(grafana):
    result = _push(grafana, env={"PERFCAST_GRAFANA_TOKEN": ""})
    assert result.exit_code == 2 and "PERFCAST_GRAFANA_TOKEN" in result.output
    result = _push(grafana, env={"PERFCAST_GRAFANA_TOKEN_FILE": "/nonexistent/token",
                                 "PERFCAST_GRAFANA_TOKEN": ""})
    assert result.exit_code == 2 and "PERFCAST_GRAFANA_TOKEN_FILE" in result.output
    result = _push(grafana, env={"PERFCAST_INFLUX_URL": ""})
    assert result.exit_code == 2 and "influxdb.url" in result.output
    assert grafana.requests == []


def test_push_reports_a_wrong_token_and_a_provisioned_dashboard(grafana):
    result = _push(grafana, env={"PERFCAST_GRAFANA_TOKEN": "wrong"})
    assert result.exit_code == 1 and "401" in result.output and "wrong" not in result.output
    assert _push(grafana).exit_code == 0
    grafana.dashboards[SYSTEM_UID]["meta"]["provisioned"] = True
    grafana.dashboards[SYSTEM_UID]["dashboard"]["title"] = "edited"
    result = _push(grafana)
    assert result.exit_code == 1
    assert "perfcast-system" in result.output and "provisioned" in result.output


def test_push_reports_an_unreachable_grafana(grafana):
    grafana.close()
    result = _push(grafana)
    assert result.exit_code == 1 and "cannot reach Grafana" in result.output
