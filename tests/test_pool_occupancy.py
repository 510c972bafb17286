"""A pool's measured occupancy: the window record's ``pools`` field, its sums over a solve
interval, the simulator's record of it, and the check of the model's pool utilization against
it (``model_error``, ``model_trusted``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from solvers.pools import PoolSpec
from streams.core.records import InvalidWindow, content_digest, parse_window

BASE = {"system": "s", "tier": "app", "end": 1e9, "window_s": 5.0, "utilization": 0.4,
        "cores": 4, "completions": {"a": 300}}


def _window(pools, tolerance=0.02):
    return parse_window({**BASE, "pools": pools}, tolerance)


# --------------------------------------------------------------------------------------------
# the record's field
# --------------------------------------------------------------------------------------------

def test_a_pool_occupancy_is_read_and_written_back():
    w = _window({"conn": {"size": 10, "busy": 6.5, "waiting": 1.25, "acquire_s": 0.004}})
    occ = w.pools["conn"]
    assert (occ.size, occ.busy, occ.waiting, occ.acquire_s) == (10, 6.5, 1.25, 0.004)
    assert w.flags == ()
    again = parse_window(json.dumps(w.to_record()))
    assert again == w and content_digest(again) == content_digest(w)
    only_size = _window({"conn": {"size": 10}}).pools["conn"]
    assert only_size.busy is None and only_size.to_record() == {"size": 10}


def test_pools_change_the_digest_and_a_window_without_them_digests_as_before():
    plain = parse_window(BASE)
    with_pool = _window({"conn": {"busy": 3.0}})
    assert content_digest(plain) != content_digest(with_pool)
    # the digest of a window without pools: the encoding of the fields it had before
    assert content_digest(plain) == 57848746660854927


@pytest.mark.parametrize("pools, field, reason", [
    ({"conn": {"busy": -0.5}}, "pools.conn.busy", "must be >= 0"),
    ({"conn": {"waiting": -1}}, "pools.conn.waiting", "must be >= 0"),
    ({"conn": {"acquire_s": -0.1}}, "pools.conn.acquire_s", "must be >= 0"),
    ({"conn": {"busy": math.nan}}, "pools.conn.busy", "must be finite"),
    ({"conn": {"waiting": math.inf}}, "pools.conn.waiting", "must be finite"),
    ({"conn": {"busy": "3"}}, "pools.conn.busy", "must be a number"),
    ({"conn": {"busy": True}}, "pools.conn.busy", "must be a number"),
    ({"conn": {"size": 0}}, "pools.conn.size", "whole number >= 1"),
    ({"conn": {"size": 2.5}}, "pools.conn.size", "whole number >= 1"),
    ({"conn": {"size": 10, "busy": 10.5}}, "pools.conn.busy", "tolerance 0.02"),
    ({"conn": {"active": 3}}, "pools.conn.active", "unknown key"),
    ({"conn": {}}, "pools.conn", "at least one of"),
    ({"conn": 3}, "pools.conn", "must be an object"),
    ([1], "pools", "must be an object"),
    ({"": {"busy": 1}}, "pools", "pool names"),
    ({"a\nb": {"busy": 1}}, "pools", "pool names"),
])
def test_bad_occupancy_is_refused_naming_the_field_and_the_value(pools, field, reason):
    with pytest.raises(InvalidWindow) as err:
        _window(pools)
    assert err.value.field == field
    assert reason in err.value.reason
    assert repr(err.value.value)[:20] in str(err.value)


def test_nan_is_named_in_the_message():
    with pytest.raises(InvalidWindow, match=r"pools\.conn\.busy: must be finite.*got nan"):
        parse_window(json.dumps({**BASE, "pools": {"conn": {"busy": float("nan")}}}))


def test_busy_a_hair_over_the_size_is_clamped_and_flagged():
    w = _window({"conn": {"size": 10, "busy": 10.15}})
    assert w.pools["conn"].busy == 10.0
    assert w.flags == ("pools.conn.busy 10.15 clamped to size 10 (within tolerance 0.02)",)
    with pytest.raises(InvalidWindow, match="tolerance 0.01"):
        _window({"conn": {"size": 10, "busy": 10.15}}, tolerance=0.01)
    tiny = _window({"conn": {"busy": -1e-12}})
    assert tiny.pools["conn"].busy == 0.0 and "within rounding" in tiny.flags[0]
    # without a size in the window, any busy count >= 0 is taken (the configured size is not
    # the record's business)
    assert _window({"conn": {"busy": 250.0}}).pools["conn"].busy == 250.0


# --------------------------------------------------------------------------------------------
# the solve interval's sums
# --------------------------------------------------------------------------------------------

def test_the_interval_averages_the_windows_by_their_length():
    from streams.core.tier import Interval
    iv = Interval()
    iv.add_pools(parse_window({**BASE, "pools": {"conn": {"size": 8, "busy": 2.0}}}))
    iv.add_pools(parse_window({**BASE, "window_s": 15.0,
                               "pools": {"conn": {"size": 10, "busy": 6.0, "waiting": 1.0}}}))
    got = iv.measured_pools()["conn"]
    assert got == {"size": 10.0, "busy": pytest.approx(5.0), "waiting": 1.0}
    restored = Interval.from_dict(json.loads(json.dumps(iv.to_dict())))
    assert restored.measured_pools() == iv.measured_pools()
    old = iv.to_dict()
    del old["pool_sums"]                         # a state saved before the field
    assert Interval.from_dict(old).measured_pools() == {}


# --------------------------------------------------------------------------------------------
# the simulator's record of a pool (the truth)
# --------------------------------------------------------------------------------------------

def _three_tiers(N, size, name="conn"):
    from solvers.simulation.physical import PhysicalNetwork, Tier
    return PhysicalNetwork(tiers=(Tier("web", 4, 0.02), Tier("app", 4, 0.03),
                                  Tier("db", 8, 0.05)),
                           classes=("a",), mix=(1.0,), think_time=1.0, population=N,
                           pools=(PoolSpec(size, 1, 3, name),))


def test_the_simulated_tokens_held_obey_littles_law():
    """Tokens held = X (R_app + R_db) - requests waiting for a token (the wait is counted in
    app's residence): the simulator's integral of tokens held is the same measure."""
    from solvers.simulation.physical import simulate_physical
    for N, size in ((60, 12), (150, 6)):
        sim = simulate_physical(_three_tiers(N, size), 40, warmup=10, replications=2, seed=5)
        X = sim.total_throughput.mean
        held = X * (sim.residence_time[1].mean + sim.residence_time[2].mean) \
            - sim.pool_waiting[0].mean
        assert sim.pool_busy[0].mean == pytest.approx(held, rel=0.02)
        assert 0 < sim.pool_busy[0].mean <= size * (1 + 1e-12)


def test_the_monitored_records_carry_the_pool_on_its_owning_tier():
    from solvers.simulation.physical import monitor_physical
    records = monitor_physical(_three_tiers(150, 6), 20, 5.0, warmup=10, seed=2)
    owning = [r for r in records if r["tier"] == "app"]
    assert len(owning) == 4 and all("pools" not in r for r in records if r["tier"] != "app")
    for r in owning:
        occ = r["pools"]["conn"]
        assert occ["size"] == 6 and 0 <= occ["busy"] <= 6 and occ["waiting"] > 10
        assert parse_window(r).pools["conn"].busy == occ["busy"]


# --------------------------------------------------------------------------------------------
# the check
# --------------------------------------------------------------------------------------------

def _model(size=6):
    from streams.predict.model import SystemModel
    return SystemModel(tiers=["web", "app", "db"], classes=["a"],
                       D_mc=np.array([[0.02], [0.03], [0.05]]), mix=np.array([1.0]),
                       servers=np.array([4.0, 4.0, 8.0]), think_time=1.0,
                       sla=np.array([1.0]), processes=None, map_limit=10_000,
                       pools=(PoolSpec(size, 1, 3, "conn"),))


def test_the_check_compares_tokens_held_over_the_size():
    from streams.predict import pool_check
    model = _model(12)
    now = model.at(60)
    u = float(now.pool_utilization[0])
    assert 0.2 < u < 0.9
    checks = pool_check.pool_checks(model, {"conn": {"busy": 12 * u * 1.5}}, now)
    c = checks["conn"]
    assert c.measured == pytest.approx(1.5 * u) and c.error == pytest.approx(0.5 * u)
    assert c.relative == pytest.approx(1 / 3)
    assert pool_check.worst_pool(checks) == ("conn", pytest.approx(1 / 3))
    assert pool_check.combined(0.05, c.relative) == pytest.approx(1 / 3)
    assert pool_check.combined(None, None) is None
    # the window's own size wins over the configured one (and the difference is flagged)
    assert pool_check.pool_checks(model, {"conn": {"busy": 6.0, "size": 10}},
                                  now)["conn"].measured == 0.6
    assert "measures 10 tokens, configured 12" in pool_check.size_flags(
        model, {"conn": {"size": 10}})[0]
    assert "'other'" in pool_check.size_flags(model, {"other": {"busy": 1.0}})[0]
    # an idle pool has no relative error; only a size measured: nothing to check
    idle = pool_check.pool_checks(model, {"conn": {"busy": 0.1}}, now)["conn"]
    assert idle.relative is None and pool_check.worst_pool({"conn": idle}) == (None, None)
    assert pool_check.pool_checks(model, {"conn": {"size": 12}}, now) == {}


# --------------------------------------------------------------------------------------------
# through the pipeline
# --------------------------------------------------------------------------------------------

def _predictions(holds, size=6):
    from solvers.simulation.physical import monitor_physical
    from streams.core.config import Config, Pool, SystemConfig
    from streams.engine.pipeline import Pipeline
    records = monitor_physical(_three_tiers(100, 6), 300, 5.0, warmup=30.0, seed=11,
                               start_time=1e9)
    cfg = SystemConfig(tiers=("web", "app", "db"), think_time_s=1.0, sla_s={"*": 1.0},
                       pools={"conn": Pool("app", size, holds)})
    pipe = Pipeline(Config(defaults=cfg))
    outs = [pipe.process(r) for r in records] + [pipe.finish()]
    return [p for o in outs for p in o.predictions if p.model is not None]


@pytest.mark.slow
def test_the_pipeline_checks_the_pool_against_its_measured_occupancy():
    """Six connections over app and db at 100 users: measured full, the model full -- within
    5 points, no reason against the pool. Configured over app alone (the system holds the
    connection across db too), the model holds it half as long: ``pool_error`` names the
    pool, enters ``model_error`` and the model is not trusted for it."""
    right = _predictions(("app", "db"))[-1]
    part = right.pools["conn"]
    assert part.utilization_measured == pytest.approx(1.0, abs=0.01)
    assert part.utilization_error < 0.05
    assert right.pool_error < 0.05 and right.pool_error_pool == "conn"
    assert not any(r.startswith("pool conn") for r in right.trust_reasons)
    wrong = _predictions(("app",))[-1]
    bad = wrong.pools["conn"]
    assert bad.utilization_measured == pytest.approx(1.0, abs=0.01)
    assert bad.utilization < 0.8 and wrong.pool_error > 0.2
    assert wrong.pool_error_pool == "conn" and wrong.model_error >= wrong.pool_error
    assert wrong.model_trusted is False
    assert any(r.startswith("pool conn utilization") and "measured (margin 20%)" in r
               for r in wrong.trust_reasons)


# --------------------------------------------------------------------------------------------
# mappings from exporters
# --------------------------------------------------------------------------------------------

DOCS = __import__("pathlib").Path(__file__).resolve().parents[1] / "docs"

#: exposition bodies in each exporter's naming (metric names, types and labels as the
#: exporters' documentation and source give them; values made up): what the documented
#: queries must find
EXPOSITIONS = {
    "hikaricp": """\
# TYPE hikaricp_connections_max gauge
hikaricp_connections_max{application="shop",pool="HikariPool-1"} 10.0
# TYPE hikaricp_connections_active gauge
hikaricp_connections_active{application="shop",pool="HikariPool-1"} 7.0
# TYPE hikaricp_connections_idle gauge
hikaricp_connections_idle{application="shop",pool="HikariPool-1"} 3.0
# TYPE hikaricp_connections_pending gauge
hikaricp_connections_pending{application="shop",pool="HikariPool-1"} 2.0
# TYPE hikaricp_connections_acquire_seconds summary
hikaricp_connections_acquire_seconds_count{application="shop",pool="HikariPool-1"} 51234.0
hikaricp_connections_acquire_seconds_sum{application="shop",pool="HikariPool-1"} 187.5
# TYPE hikaricp_connections_acquire_seconds_max gauge
hikaricp_connections_acquire_seconds_max{application="shop",pool="HikariPool-1"} 0.25
""",
    "tomcat": """\
# TYPE tomcat_threads_config_max_threads gauge
tomcat_threads_config_max_threads{application="shop",name="http-nio-8080"} 200.0
# TYPE tomcat_threads_busy_threads gauge
tomcat_threads_busy_threads{application="shop",name="http-nio-8080"} 37.0
# TYPE tomcat_threads_current_threads gauge
tomcat_threads_current_threads{application="shop",name="http-nio-8080"} 60.0
""",
    "jetty": """\
# TYPE jetty_threads_config_max gauge
jetty_threads_config_max{application="api"} 200.0
# TYPE jetty_threads_busy gauge
jetty_threads_busy{application="api"} 12.0
# TYPE jetty_threads_jobs gauge
jetty_threads_jobs{application="api"} 0.0
""",
    "pgbouncer": """\
# TYPE pgbouncer_databases_pool_size gauge
pgbouncer_databases_pool_size{database="shop",force_user="",host="db-1",name="shop",pool_mode="transaction",port="5432"} 20
# TYPE pgbouncer_pools_server_active_connections gauge
pgbouncer_pools_server_active_connections{database="shop",user="shop"} 14
# TYPE pgbouncer_pools_client_waiting_connections gauge
pgbouncer_pools_client_waiting_connections{database="shop",user="shop"} 3
""",
    "gunicorn": """\
# TYPE testbed_request_duration_seconds histogram
testbed_request_duration_seconds_sum{handler="home"} 812.5
testbed_request_duration_seconds_count{handler="home"} 40211.0
""",
}

#: which exposition each documented pool answers from
EXPORTER_OF = {"db_connections": "hikaricp", "tomcat_threads": "tomcat",
               "jetty_threads": "jetty", "pgbouncer": "pgbouncer",
               "gunicorn_workers": "gunicorn"}


def _documented_pool_tables():
    """The TOML blocks of docs/prometheus.md's pools section, each made a whole configuration
    (a header and each tier's required queries added)."""
    import re
    import tomllib
    from streams.sources.prometheus import source_from_mapping
    text = (DOCS / "prometheus.md").read_text(encoding="utf-8")
    section = text.split("## Pools: measured occupancy", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```toml\n(.*?)```", section, re.S)
    assert len(blocks) == 4
    sources = []
    for block in blocks:
        tiers = dict.fromkeys(re.findall(r"^\[tiers\.(\w+)\.pools\.", block, re.M))
        head = '[prometheus]\nurl = "http://127.0.0.1:9"\nsystem = "s"\n' + "".join(
            f"[tiers.{t}]\nutilization = 'u'\ncompletions = 'c'\n" for t in tiers)
        sources.append(source_from_mapping(tomllib.loads(head + block), env={}))
    return sources


def test_the_documented_pool_mappings_load_and_name_the_exporters_metrics():
    """Every query of the documented pool mappings names metrics (and label values) the
    exporter's exposition has."""
    import re
    seen = set()
    for source in _documented_pool_tables():
        for spec in source.tiers:
            for field, query in spec.pools:
                pool = field.split(".")[1]
                body = EXPOSITIONS[EXPORTER_OF[pool]]
                seen.add(pool)
                for name, labels in re.findall(r"([a-z_]+)\{([^}]*)\}", query):
                    assert re.search(rf"^{name}\{{", body, re.M), (field, name)
                    for label, value in re.findall(r'(\w+)="([^"]*)"', labels):
                        assert f'{label}="{value}"' in body, (field, label, value)
    assert seen == set(EXPORTER_OF)


class _Answers:
    """``query_range`` answered per query text: a constant per series (``{query: [(labels,
    value)]}``); otherwise the tier is busy half the time and serves 10 requests a second."""

    def __init__(self, by_query):
        self.by_query = by_query
        self.queries = []

    def query_range(self, query, start_ms, end_ms, step_ms, what="query"):
        self.queries.append(query)
        grid = range(start_ms, end_ms + 1, step_ms)
        if query in self.by_query:
            result = [{"metric": labels, "values": [[t / 1000, repr(v)] for t in grid]}
                      for labels, v in self.by_query[query]]
        elif query == "u":                       # the utilization gauge
            result = [{"metric": {}, "values": [[t / 1000, "0.5"] for t in grid]}]
        else:                                      # the completions counter
            result = [{"metric": {"handler": "/q"},
                       "values": [[t / 1000, repr(t / 100)] for t in grid]}]
        return {"resultType": "matrix", "result": result}


def test_the_prometheus_source_makes_the_windows_pools_from_the_hikaricp_mapping():
    """The documented HikariCP mapping through the Prometheus source (its answers per query):
    the windows carry the pool, ``{window}`` replaced, the series summed, a query without a
    value leaves its key out."""
    from streams.sources.prometheus_http import iter_windows
    source = _documented_pool_tables()[0]
    spec = source.tiers[0]
    queries = dict(spec.pools)
    window = "5s"
    text = {k: queries[f"pools.db_connections.{k}"].replace("{window}", window)
            for k in ("size", "busy", "waiting", "acquire_s")}
    answers = _Answers({text["size"]: [({}, 10.0)],
                        text["busy"]: [({"instance": "a"}, 4.5), ({"instance": "b"}, 2.25)],
                        text["waiting"]: [({}, 1.5)],
                        text["acquire_s"]: []})
    batches = list(iter_windows(source, 1e9, 1e9 + 20, client=answers))
    records = [r for _, rs in batches for r in rs]
    assert records and all(r["pools"] == {"db_connections": {"size": 10, "busy": 6.75,
                                                             "waiting": 1.5}}
                           for r in records)
    assert text["busy"] in answers.queries and "{window}" not in "".join(answers.queries)
    w = parse_window(records[0])
    assert w.pools["db_connections"].busy == 6.75 and w.pools["db_connections"].size == 10


def test_the_telegraf_pgbouncer_example_in_docs_formats_md():
    import re
    import tomllib
    from streams.core.input_config import input_from_mapping
    from streams.sources.sample_windows import SampleWindows
    text = (DOCS / "formats.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- pools telegraf -->\n```toml\n(.*?)```\n\n```json\n(.*?)```"
                  r".*?```json\n(.*?)```", text, re.S)
    fmt = input_from_mapping(tomllib.loads(m.group(1))["input"])
    made = SampleWindows(fmt).translate(m.group(2).strip().splitlines())
    assert not made.dead and len(made.windows) == 1
    window = made.windows[0]
    assert window["pools"] == json.loads(m.group(3))["pools"]
    assert window["utilization"] == pytest.approx(0.4)
    assert parse_window(window).pools["pgbouncer"].waiting == 6.0


@pytest.mark.parametrize("pools, match", [
    ({"conn": {"active": "x"}}, r"tiers\.app\.pools\.conn\.active: unknown key"),
    ({"conn": {"busy": 3}}, r"tiers\.app\.pools\.conn\.busy: must be PromQL"),
    ({"conn": {"busy": ""}}, r"tiers\.app\.pools\.conn\.busy: must be PromQL"),
    ({"conn": {}}, r"tiers\.app\.pools\.conn: must be a table with any of"),
    ({"a.b": {"busy": "x"}}, r"tiers\.app\.pools\.a\.b: a pool's name"),
    ("x", r"tiers\.app\.pools: must be a table of pools"),
])
def test_a_bad_pools_table_is_a_configuration_error_naming_the_key(pools, match):
    from streams.core.config import ConfigError
    from streams.sources.prometheus import source_from_mapping
    raw = {"prometheus": {"url": "http://127.0.0.1:9", "system": "s"},
           "tiers": {"app": {"utilization": "u", "completions": "c", "pools": pools}}}
    with pytest.raises(ConfigError, match=match):
        source_from_mapping(raw, env={})


def test_a_bad_pools_table_of_a_metric_format_names_the_key():
    from streams.core.config import ConfigError
    from streams.core.input_config import input_from_mapping
    raw = {"format": "telegraf", "system": "s", "tiers": {"app": {
        "utilization": "u", "completions": "c", "pools": {"pg": {"busy": "bad{"}}}}}
    with pytest.raises(ConfigError, match=r"input\.tiers\.app\.pools\.pg\.busy"):
        input_from_mapping(raw)
