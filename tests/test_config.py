"""Configuration (streams.core.config): TOML per-system settings, environment overrides and secrets;
every refusal names the offending key."""

from __future__ import annotations

import math
import re

import pytest

from streams.core.config import (ENVIRONMENT, Config, ConfigError, InfluxSettings, KafkaSettings,
                            SystemConfig, load_config)

SHOP = """
[defaults]
solve_interval_s = 30
horizon_s = 600
sla_s = { "*" = 2.0 }
history = 2048

[systems.shop]
tiers = ["front", "db"]
think_time_s = 0.5
solve_offset_s = 15
sla_s = { home = 0.5, "*" = 1.0 }
visits = { db = { home = 2.0, search = 3 } }
dedup_windows = 64

[systems.blog]
sla_s = { feed = 0.25 }

[kafka]
bootstrap = "kafka-1:9092"
topic_prefix = "acme"

[influxdb]
url = "http://influx:8086"
org = "acme"
bucket = "perf"
"""


@pytest.fixture
def toml(tmp_path):
    """Write TOML text to a file; return its path."""
    def write(text: str):
        path = tmp_path / "perfcast.toml"
        path.write_text(text)
        return path
    return write


@pytest.fixture(autouse=True)
def _no_perfcast_environment(monkeypatch):
    """The tests pass ``env`` explicitly; the process environment must not leak in when one
    of them reads ``os.environ``."""
    for var in [*ENVIRONMENT, "PERFCAST_INFLUX_TOKEN", "PERFCAST_INFLUX_TOKEN_FILE",
                "PERFCAST_KAFKA_SASL_PASSWORD", "PERFCAST_KAFKA_SASL_PASSWORD_FILE"]:
        monkeypatch.delenv(var, raising=False)


def _refused(path, key, env=None):
    with pytest.raises(ConfigError) as info:
        load_config(path, env=env or {})
    message = str(info.value)
    assert message.startswith(key), message
    return message


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------

def test_no_file_gives_the_documented_defaults():
    cfg = load_config(None, env={})
    assert cfg == Config()
    assert cfg.systems == {}
    assert cfg.system("anything") is cfg.defaults
    d = cfg.defaults
    assert (d.tiers, d.think_time_s, d.solve_interval_s, d.horizon_s) == ((), None, 60.0, 900.0)
    assert d.sla_for("home") == 1.0
    assert d.visit("db", "home") == 1.0
    assert cfg.kafka.bootstrap == "localhost:9092" and cfg.kafka.topic("windows") == \
        "perfcast.windows"
    assert cfg.influxdb.url is None and cfg.influxdb.token is None


def test_defaults_and_system_sections_combine(toml):
    cfg = load_config(toml(SHOP), env={})
    shop = cfg.system("shop")
    assert shop.tiers == ("front", "db")
    assert shop.think_time_s == 0.5
    # per-class SLA, "*" for every other class
    assert shop.sla_for("home") == 0.5
    assert shop.sla_for("search") == 1.0
    # visits per tier and class, default 1
    assert shop.visit("db", "home") == 2.0
    assert shop.visit("db", "search") == 3.0 and isinstance(shop.visit("db", "search"), float)
    assert shop.visit("db", "best_sellers") == 1.0
    assert shop.visit("front", "home") == 1.0
    # inherited from [defaults], overridden where the system sets them
    assert (shop.solve_interval_s, shop.horizon_s, shop.history) == (30.0, 600.0, 2048)
    assert shop.dedup_windows == 64
    assert shop.solve_offset_s == 15.0 and cfg.defaults.solve_offset_s is None
    assert cfg.defaults.dedup_windows == SystemConfig().dedup_windows
    # a system's sla_s table is merged over the defaults' ("*" = 2.0 kept for blog)
    blog = cfg.system("blog")
    assert blog.sla_for("feed") == 0.25 and blog.sla_for("other") == 2.0
    assert blog.tiers == ()
    # an unconfigured system gets the defaults
    assert cfg.system("unknown") is cfg.defaults
    assert cfg.defaults.sla_for("x") == 2.0
    assert cfg.kafka.topic("windows") == "acme.windows"
    assert (cfg.influxdb.url, cfg.influxdb.org, cfg.influxdb.bucket) == \
        ("http://influx:8086", "acme", "perf")


def test_sla_without_star_is_infinite_for_other_classes():
    cfg = SystemConfig(sla_s={"home": 0.5})
    assert cfg.sla_for("home") == 0.5
    assert math.isinf(cfg.sla_for("search"))


def test_percentile_slos_per_class_beside_the_mean(toml):
    cfg = load_config(toml(
        "[defaults]\nslo = { \"*\" = { p99 = 2.0 } }\n"
        "[systems.shop]\nsla_s = { home = 0.5 }\n"
        "slo = { home = { p95 = 0.3, \"p99.9\" = 1.5 } }\n"), env={})
    shop = cfg.system("shop")
    assert shop.slo_for("home") == {"p95": 0.3, "p99.9": 1.5}
    assert shop.slo_for("search") == {"p99": 2.0}      # the defaults' "*" kept
    assert shop.sla_for("home") == 0.5                 # the mean's SLA unchanged beside it
    assert SystemConfig().slo_for("home") == {}        # no percentile SLO by default


@pytest.mark.parametrize("text, key", [
    ("[defaults]\nsolve_intervall_s = 60\n", "defaults.solve_intervall_s"),
    ("[systems.shop]\ntier = ['db']\n", "systems.shop.tier"),
    ("[systems.shop.extra]\na = 1\n", "systems.shop.extra"),
    ("[kafkaa]\nbootstrap = 'x'\n", "kafkaa"),
    ("[influx]\nurl = 'x'\n", "influx"),
    ("[kafka]\nbrokers = 'x'\n", "kafka.brokers"),
    ("[influxdb]\nhost = 'x'\n", "influxdb.host"),
    ("top_level = 1\n", "top_level"),
])
def test_unknown_keys_and_sections_are_refused_by_name(toml, text, key):
    _refused(toml(text), key)


@pytest.mark.parametrize("text, key", [
    ("[defaults]\nsolve_interval_s = -60\n", "defaults.solve_interval_s"),
    ("[defaults]\nsolve_interval_s = 0\n", "defaults.solve_interval_s"),
    ("[defaults]\nsolve_offset_s = -1\n", "defaults.solve_offset_s"),
    ("[systems.shop]\nsolve_offset_s = 'spread'\n", "systems.shop.solve_offset_s"),
    ("[defaults]\nhorizon_s = nan\n", "defaults.horizon_s"),
    ("[defaults]\nhorizon_s = inf\n", "defaults.horizon_s"),
    ("[defaults]\nhorizon_s = true\n", "defaults.horizon_s"),
    ("[defaults]\ntrend_window_s = '900'\n", "defaults.trend_window_s"),
    ("[defaults]\nhistory = 1000.5\n", "defaults.history"),
    ("[defaults]\nhistory = 1024.0\n", "defaults.history"),
    ("[defaults]\nhistory = 8\n", "defaults.history"),
    ("[systems.shop]\nalert_fire_after = 0\n", "systems.shop.alert_fire_after"),
    ("[systems.shop]\nper_job_max_cores = 65\n", "systems.shop.per_job_max_cores"),
    ("[defaults]\nper_job_max_cores = 0\n", "defaults.per_job_max_cores"),
    ("[systems.shop]\ndedup_windows = true\n", "systems.shop.dedup_windows"),
    ("[systems.shop]\ntiers = ['front', 'db', 'front']\n", "systems.shop.tiers"),
    ("[systems.shop]\ntiers = ['front', '']\n", "systems.shop.tiers"),
    ("[systems.shop]\ntiers = 'front'\n", "systems.shop.tiers"),
    ("[systems.shop]\nthink_time_s = -0.5\n", "systems.shop.think_time_s"),
    ("[systems.shop]\nsla_s = 1.0\n", "systems.shop.sla_s"),
    ("[systems.shop]\nsla_s = { home = -1 }\n", "systems.shop.sla_s.home"),
    ("[systems.shop]\nsla_s = { home = 0 }\n", "systems.shop.sla_s.home"),
    ("[systems.shop]\nvisits = { db = 2 }\n", "systems.shop.visits"),
    ("[systems.shop]\nslo = { home = 0.3 }\n", "systems.shop.slo"),
    ("[systems.shop]\nslo = { home = { p97 = 0.3 } }\n", "systems.shop.slo.home.p97"),
    ("[systems.shop]\nslo = { home = { mean = 0.3 } }\n", "systems.shop.slo.home.mean"),
    ("[systems.shop]\nslo = { home = { p95 = 0 } }\n", "systems.shop.slo.home.p95"),
    ("[systems.shop]\nslo = { home = { p95 = nan } }\n", "systems.shop.slo.home.p95"),
    ("[systems.shop]\nslo = { home = { \"p99.9\" = -1 } }\n", "systems.shop.slo.home.p99.9"),
    ("[systems.shop]\nslo = { home = {} }\n", "systems.shop.slo.home"),
    ("[systems.shop]\nvisits = { db = { home = 0 } }\n", "systems.shop.visits.db.home"),
    ("[systems.shop]\nmodel_error_threshold = -0.1\n", "systems.shop.model_error_threshold"),
    ("systems = 3\n", "systems"),
    ("kafka = 'localhost'\n", "kafka"),
])
def test_invalid_values_are_refused_naming_the_key(toml, text, key):
    message = _refused(toml(text), key)
    assert "got" in message or "must" in message


def test_the_refused_value_is_shown(toml):
    message = _refused(toml("[defaults]\nsolve_interval_s = -60\n"), "defaults.solve_interval_s")
    assert "-60" in message


@pytest.mark.parametrize("text, key", [
    ("[systems]\nshop = 1\n", "systems.shop"),
    ("defaults = 'fast'\n", "defaults"),
])
def test_non_table_system_sections_are_refused_naming_the_key(toml, text, key):
    """Failed before the fix in streams/core/config.py: ``TypeError: 'int' object is not iterable``
    escaped load_config instead of a ConfigError naming the section."""
    assert "must be a table" in _refused(toml(text), key)


@pytest.mark.parametrize("text, key", [
    ("[influxdb]\nbatch_size = 'lots'\n", "influxdb.batch_size"),
    ("[influxdb]\nbatch_size = 0\n", "influxdb.batch_size"),
    ("[influxdb]\nflush_interval_s = -1\n", "influxdb.flush_interval_s"),
    ("[influxdb]\nmax_buffer = 1.5\n", "influxdb.max_buffer"),
    ("[influxdb]\nurl = 8086\n", "influxdb.url"),
    ("[kafka]\nbootstrap = 9092\n", "kafka.bootstrap"),
    ("[kafka]\ntopic_prefix = ['a']\n", "kafka.topic_prefix"),
])
def test_invalid_connection_values_are_refused_naming_the_key(toml, text, key):
    """Failed before the fix in streams/core/config.py: connection settings were passed to the
    dataclasses unchecked (``batch_size = 'lots'`` was accepted)."""
    _refused(toml(text), key)


def test_connection_numbers_from_the_file_are_kept(toml):
    cfg = load_config(toml("[influxdb]\nbatch_size = 500\nflush_interval_s = 2\n"
                           "max_buffer = 1000\n"), env={})
    assert (cfg.influxdb.batch_size, cfg.influxdb.flush_interval_s, cfg.influxdb.max_buffer) \
        == (500, 2.0, 1000)


def test_unreadable_and_invalid_toml_files_are_config_errors(tmp_path, toml):
    missing = tmp_path / "nope.toml"
    message = _refused(missing, "config")
    assert "nope.toml" in message
    message = _refused(toml("[defaults\nhorizon_s = 1\n"), "config")
    assert "not valid TOML" in message


# --------------------------------------------------------------------------------------------
# environment
# --------------------------------------------------------------------------------------------

def test_environment_overrides_connection_settings(toml):
    env = {"PERFCAST_KAFKA_BOOTSTRAP": "k1:9092,k2:9092",
           "PERFCAST_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
           "PERFCAST_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
           "PERFCAST_KAFKA_SASL_USERNAME": "perfcast",
           "PERFCAST_KAFKA_SSL_CAFILE": "/etc/ca.pem",
           "PERFCAST_KAFKA_TOPIC_PREFIX": "prod",
           "PERFCAST_INFLUX_URL": "https://influx.example:8086",
           "PERFCAST_INFLUX_ORG": "ops",
           "PERFCAST_INFLUX_BUCKET": "live"}
    cfg = load_config(toml(SHOP), env=env)         # the file sets some of them too
    assert cfg.kafka == KafkaSettings(bootstrap="k1:9092,k2:9092", security_protocol="SASL_SSL",
                                      sasl_mechanism="SCRAM-SHA-512", sasl_username="perfcast",
                                      ssl_cafile="/etc/ca.pem", topic_prefix="prod")
    assert cfg.influxdb == InfluxSettings(url="https://influx.example:8086", org="ops",
                                          bucket="live")
    assert cfg.kafka.topic("predictions") == "prod.predictions"


def test_empty_environment_values_do_not_override(toml):
    cfg = load_config(toml(SHOP), env={"PERFCAST_KAFKA_BOOTSTRAP": "",
                                       "PERFCAST_INFLUX_URL": ""})
    assert cfg.kafka.bootstrap == "kafka-1:9092"
    assert cfg.influxdb.url == "http://influx:8086"


def test_default_environment_is_os_environ(monkeypatch):
    monkeypatch.setenv("PERFCAST_INFLUX_URL", "http://from-os-environ:8086")
    assert load_config().influxdb.url == "http://from-os-environ:8086"


# --------------------------------------------------------------------------------------------
# secrets
# --------------------------------------------------------------------------------------------

TOKEN = "s3cr3t-T0KEN-do-not-print"
PASSWORD = "hunter2-sasl-password"


def _leaks(cfg: Config, *secrets: str) -> list[str]:
    shown = [repr(cfg), str(cfg), repr(cfg.influxdb), repr(cfg.kafka)]
    return [s for s in secrets if any(s in text for text in shown)]


def test_secrets_from_the_environment_are_read_and_never_shown():
    cfg = load_config(env={"PERFCAST_INFLUX_TOKEN": TOKEN,
                           "PERFCAST_KAFKA_SASL_PASSWORD": PASSWORD})
    assert cfg.influxdb.token == TOKEN
    assert cfg.kafka.sasl_password == PASSWORD
    assert _leaks(cfg, TOKEN, PASSWORD) == []


def test_secrets_from_files_are_read_stripped_and_never_shown(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    password_file = tmp_path / "password"
    password_file.write_text(f"  {PASSWORD}\n\n")
    cfg = load_config(env={"PERFCAST_INFLUX_TOKEN_FILE": str(token_file),
                           "PERFCAST_KAFKA_SASL_PASSWORD_FILE": str(password_file)})
    assert cfg.influxdb.token == TOKEN
    assert cfg.kafka.sasl_password == PASSWORD
    assert _leaks(cfg, TOKEN, PASSWORD) == []


def test_secret_variable_wins_over_its_file(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("from-the-file")
    cfg = load_config(env={"PERFCAST_INFLUX_TOKEN": TOKEN,
                           "PERFCAST_INFLUX_TOKEN_FILE": str(token_file)})
    assert cfg.influxdb.token == TOKEN


def test_unreadable_secret_file_is_a_config_error_naming_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="^PERFCAST_INFLUX_TOKEN_FILE"):
        load_config(env={"PERFCAST_INFLUX_TOKEN_FILE": str(tmp_path / "missing")})


@pytest.mark.parametrize("text, key", [
    (f"[influxdb]\nurl = 'http://x'\ntoken = '{TOKEN}'\n", "influxdb.token"),
    (f"[kafka]\nsasl_password = '{PASSWORD}'\n", "kafka.sasl_password"),
])
def test_secrets_in_the_file_are_refused(toml, text, key):
    message = _refused(toml(text), key)
    assert "environment" in message
    assert TOKEN not in message and PASSWORD not in message


# -- settings that take one of a few names (docs/accuracy.md: the first is the default) -----------
CHOICES = [("demand_policy", ("selected", "kalman_checked")),
           ("bursty_demand", ("history", "estimator"))]


@pytest.mark.parametrize("key, choices", CHOICES)
def test_a_choice_has_its_default_and_the_others_stay_selectable(tmp_path, key, choices):
    default, other = choices
    assert getattr(SystemConfig(), key) == default
    path = tmp_path / "c.toml"
    path.write_text(f'[defaults]\n{key} = "{other}"\n[systems.shop]\n{key} = "{default}"\n')
    cfg = load_config(path, env={})
    assert getattr(cfg.defaults, key) == other
    assert getattr(cfg.system("shop"), key) == default
    assert getattr(cfg.system("other"), key) == other


@pytest.mark.parametrize("key, choices", CHOICES)
@pytest.mark.parametrize("value", ["nope", "Capitalised", 1, True])
def test_an_unknown_choice_is_refused_naming_field_and_value(tmp_path, key, choices, value):
    if value == "Capitalised":
        value = choices[0].capitalize()
    path = tmp_path / "c.toml"
    text = f'"{value}"' if isinstance(value, str) else str(value).lower()
    path.write_text(f"[systems.shop]\n{key} = {text}\n")
    allowed = ", ".join(map(repr, choices))
    with pytest.raises(ConfigError, match=rf"systems\.shop\.{key}: must be one of "
                                          rf"{re.escape(allowed)}, got "):
        load_config(path, env={})
    with pytest.raises(ConfigError, match=rf"^{key}: .*got {re.escape(repr(value))}"):
        SystemConfig(**{key: value})


# -- extremes: refused naming the setting and the allowed range ------------------------------
@pytest.mark.parametrize("text, key, allowed", [
    ("[defaults]\nsolve_interval_s = 1e-300\n", "defaults.solve_interval_s", "[1, 86400]"),
    ("[defaults]\nsolve_interval_s = 0.5\n", "defaults.solve_interval_s", "[1, 86400]"),
    ("[systems.shop]\nsolve_interval_s = 86401\n", "systems.shop.solve_interval_s",
     "[1, 86400]"),
    ("[defaults]\nhorizon_s = 1e308\n", "defaults.horizon_s", "(0, 604800]"),
    ("[defaults]\nhorizon_s = 604801\n", "defaults.horizon_s", "(0, 604800]"),
    ("[defaults]\ntrend_window_s = 1e308\n", "defaults.trend_window_s", "(0, 604800]"),
    ("[systems.shop]\nthink_time_s = 1e308\n", "systems.shop.think_time_s", "[0, 86400]"),
    ("[defaults]\nhistory = 1_000_000_000_000\n", "defaults.history", "[16, 1_000_000]"),
    ("[defaults]\nhistory = 1_000_001\n", "defaults.history", "[16, 1_000_000]"),
    ("[defaults]\ndedup_windows = 1_000_001\n", "defaults.dedup_windows", "[1, 1_000_000]"),
    ("[defaults]\nregression_windows = 10_000_000\n", "defaults.regression_windows",
     "[4, 1_000_000]"),
    ("[defaults]\nsolve_interval_s = " + "9" * 400 + "\n", "defaults.solve_interval_s",
     "[1, 86400]"),
    ("[defaults]\nidc_threshold = " + "9" * 400 + "\n", "defaults.idc_threshold",
     "(0, 1e+06]"),
])
def test_extreme_values_are_refused_naming_the_setting_and_the_range(toml, text, key, allowed):
    message = _refused(toml(text), key)
    assert allowed in message and "got" in message


def test_values_at_the_bounds_are_accepted(toml):
    cfg = load_config(toml("[defaults]\nsolve_interval_s = 1\nhorizon_s = 604800\n"
                           "trend_window_s = 604800\nthink_time_s = 86400\n"
                           "history = 1_000_000\ndedup_windows = 1_000_000\n"
                           "[systems.shop]\nsolve_interval_s = 86400\nthink_time_s = 0\n"),
                      env={})
    d = cfg.defaults
    assert (d.solve_interval_s, d.horizon_s, d.trend_window_s, d.think_time_s) == \
        (1.0, 604800.0, 604800.0, 86400.0)
    assert (d.history, d.dedup_windows) == (1_000_000, 1_000_000)
    assert cfg.system("shop").solve_interval_s == 86400.0
    assert cfg.system("shop").think_time_s == 0.0


# -- utilization_tolerance: [defaults] only (windows are validated before they are routed) -----
def test_utilization_tolerance_defaults_to_two_percent_and_is_read_from_defaults(toml):
    assert Config().utilization_tolerance == load_config(None, env={}).utilization_tolerance \
        == 0.02
    cfg = load_config(toml("[defaults]\nutilization_tolerance = 0.05\nhorizon_s = 600\n"),
                      env={})
    assert cfg.utilization_tolerance == 0.05 and cfg.defaults.horizon_s == 600.0
    assert load_config(toml("[defaults]\nutilization_tolerance = 0\n"),
                       env={}).utilization_tolerance == 0.0


@pytest.mark.parametrize("value", ["-0.01", "0.5", "nan", "inf", "'2%'", "true"])
def test_an_invalid_utilization_tolerance_is_refused_with_its_range(toml, value):
    message = _refused(toml(f"[defaults]\nutilization_tolerance = {value}\n"),
                       "defaults.utilization_tolerance")
    assert "[0, 0.1]" in message


def test_utilization_tolerance_per_system_is_refused(toml):
    message = _refused(toml("[systems.shop]\nutilization_tolerance = 0.05\n"),
                       "systems.shop.utilization_tolerance")
    assert "only in [defaults]" in message


def test_the_pipeline_applies_the_configured_tolerance(toml):
    from streams.engine.pipeline import Pipeline

    window = {"system": "s", "tier": "t", "end": 10, "window_s": 5, "utilization": 1.04,
              "completions": {"a": 1}}
    assert Pipeline(load_config(None, env={})).process(window).deadletter
    cfg = load_config(toml("[defaults]\nutilization_tolerance = 0.05\n"), env={})
    out = Pipeline(cfg).process(window)
    assert not out.deadletter and out.estimates[0]["utilization"] == 1.0
    assert out.estimates[0]["flags"] == ["utilization 1.04 clamped to 1 (within tolerance 0.05)"]


# -- hostile files: one line naming the key, the value cut short; never a traceback ------------
@pytest.mark.parametrize("text, key, allowed", [
    ("[defaults]\nvisits = { db = { home = 1e160 } }\n", "defaults.visits.db.home",
     "(0, 1e+06] visits per request, got 1e+160"),
    ("[systems.shop]\nsla_s = { home = 1e300 }\n", "systems.shop.sla_s.home",
     "(0, 604800] seconds, got 1e+300"),
    ("[defaults]\nsla_s = { \"*\" = nan }\n", "defaults.sla_s.*", "(0, 604800] seconds"),
    ("[defaults]\nmodel_error_threshold = 1e300\n", "defaults.model_error_threshold",
     "(0, 1000]"),
    ("[defaults]\nmap_max_population = 100_001\n", "defaults.map_max_population",
     "[1, 100_000]"),
    ("[defaults]\nmix_min_completions = 0\n", "defaults.mix_min_completions",
     "[1, 1_000_000]"),
    ("[systems.shop]\nmix_min_completions = 400.5\n", "systems.shop.mix_min_completions",
     "[1, 1_000_000]"),
    ("[defaults]\nalert_fire_after = 1_000_000_000\n", "defaults.alert_fire_after",
     "[1, 10_000]"),
    ("[defaults]\nsolve_offset_s = 1e300\n", "defaults.solve_offset_s", "[0, 86400] seconds"),
    ("[defaults]\nremediation_costs = { cores = 1e300 }\n",
     "defaults.remediation_costs.cores", "[0, 1e+09]"),
    ("[influxdb]\nflush_interval_s = 1e300\n", "influxdb.flush_interval_s", "(0, 3600]"),
    ("[influxdb]\nbatch_size = 1_000_000_000_000\n", "influxdb.batch_size",
     "[1, 10_000_000]"),
])
def test_values_that_feed_a_solver_are_range_checked(toml, text, key, allowed):
    assert allowed in _refused(toml(text), key)


@pytest.mark.parametrize("text, key, problem", [
    ("[defaults]\ntiers = [\"front\", \"d\\u001bb\"]\n", "defaults.tiers[1]",
     "not a valid tier name"),
    ("[defaults]\nsla_s = { \"h\\u001b[2J\" = 1 }\n", "defaults.sla_s", "not a valid class"),
    ("[defaults]\nvisits = { \"d\\u0007b\" = { home = 2 } }\n", "defaults.visits",
     "not a valid tier"),
    ("[systems.\"s\\u001bx\"]\nhorizon_s = 60\n", "systems", "not a valid system name"),
    ("[defaults]\ntiers = [\"a\", \"a\"]\n", "defaults.tiers", "'a' is listed twice"),
])
def test_names_in_the_file_must_be_valid_names(toml, text, key, problem):
    message = _refused(toml(text), key)
    assert problem in message and "\x1b" not in message and "\x07" not in message


def test_a_tiers_list_beyond_the_tier_limit_is_refused_in_one_short_line(toml):
    names = ", ".join(f'"t{i}"' for i in range(100_000))
    message = _refused(toml(f"[defaults]\ntiers = [{names}]\n"), "defaults.tiers")
    assert "at most 4096" in message and len(message) < 400
    message = _refused(toml("[limits]\nmax_tiers = 2\n[systems.shop]\n"
                            "tiers = [\"a\", \"b\", \"c\"]\n"), "systems.shop.tiers")
    assert message == "systems.shop.tiers: lists 3 tiers, more than [limits] max_tiers (2)"


def test_a_long_refused_value_is_cut_short(toml):
    message = _refused(toml(f"[defaults]\ndemand_policy = \"{'x' * 100_000}\"\n"),
                       "defaults.demand_policy")
    assert message.endswith("...") and len(message) < 400


@pytest.mark.parametrize("content, problem", [
    (b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested too deeply"),
    (b"x = " + b"{ y = " * 5_000 + b"1" + b" }" * 5_000 + b"\n", "nested too deeply"),
    (b"[defaults]\nsla_s = { \"caf\xe9\" = 1.0 }\n", "is not UTF-8 text (byte 0xe9 at offset 25"),
    (b"\xff\xfe[\x00d\x00", "is not UTF-8 text (byte 0xff at offset 0"),
])
def test_a_deep_or_not_utf8_file_is_one_configuration_error(tmp_path, content, problem):
    path = tmp_path / "hostile.toml"
    path.write_bytes(content)
    message = _refused(path, "config:")
    assert problem in message and "\n" not in message


def test_the_command_line_prints_one_line_and_exits_2_for_a_hostile_file(tmp_path):
    from typer.testing import CliRunner

    from streams.cli.commands import app

    path = tmp_path / "hostile.toml"
    path.write_bytes(b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    result = CliRunner().invoke(app, ["run", "--source", str(path), "--config", str(path),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("error: configuration: config: ")
    assert result.output.count("\n") == 1 and "nested too deeply" in result.output


# --------------------------------------------------------------------------------------------
# pools
# --------------------------------------------------------------------------------------------

_POOL_SYSTEM = '[systems.shop]\ntiers = ["web", "app", "db"]\n'


def test_pools_are_read_with_their_tier_size_and_held_tiers(toml):
    cfg = load_config(toml(_POOL_SYSTEM + '[systems.shop.pools.conn]\ntier = "app"\nsize = 6\n'
                           'holds = ["app", "db"]\n[systems.shop.pools.threads]\ntier = "web"\n'
                           'size = 200\nholds = ["web", "app", "db"]\n'), env={})
    pools = cfg.system("shop").pools
    assert pools["conn"].size == 6 and pools["conn"].holds == ("app", "db")
    assert pools["threads"].tier == "web" and len(pools["threads"].holds) == 3
    assert cfg.system("other").pools == {}


@pytest.mark.parametrize("body, key, words", [
    ('tier = "app"\nsize = 0\nholds = ["app"]', "systems.shop.pools.conn.size", "[1, "),
    ('tier = "app"\nsize = -3\nholds = ["app"]', "systems.shop.pools.conn.size", "-3"),
    ('tier = "app"\nsize = 2.5\nholds = ["app"]', "systems.shop.pools.conn.size", "integer"),
    ('tier = "app"\nsize = 1000001\nholds = ["app"]', "systems.shop.pools.conn.size",
     "1000001"),
    ('tier = "app"\nsize = true\nholds = ["app"]', "systems.shop.pools.conn.size", "True"),
    ('tier = "app"\nsize = 4\nholds = ["app", "cache"]', "systems.shop.pools.conn.holds",
     "'cache' is not one of"),
    ('tier = "cache"\nsize = 4\nholds = ["cache"]', "systems.shop.pools.conn.tier",
     "'cache' is not one of"),
    ('tier = "app"\nsize = 4\nholds = []', "systems.shop.pools.conn.holds", "non-empty"),
    ('tier = "app"\nsize = 4\nholds = ["app", "app"]', "systems.shop.pools.conn.holds",
     "distinct"),
    ('tier = "app"\nsize = 4\nholds = ["db"]', "systems.shop.pools.conn.holds",
     "start with the owning tier"),
    ('tier = "web"\nsize = 4\nholds = ["web", "db"]', "systems.shop.pools.conn.holds",
     "consecutive"),
    ('tier = "db"\nsize = 4\nholds = ["db", "app"]', "systems.shop.pools.conn.holds",
     "consecutive"),
    ('tier = "app"\nsize = 4', "systems.shop.pools.conn.holds", "missing"),
    ('tier = "app"\nsize = 4\nholds = ["app"]\nlimit = 3', "systems.shop.pools.conn.limit",
     "unknown"),
])
def test_bad_pools_are_refused_naming_the_key(toml, body, key, words):
    message = _refused(toml(_POOL_SYSTEM + "[systems.shop.pools.conn]\n" + body + "\n"), key)
    assert words in message, message


def test_partly_overlapping_pools_are_refused_nested_and_disjoint_accepted(toml):
    a = '[systems.shop.pools.a]\ntier = "web"\nsize = 8\nholds = ["web", "app"]\n'
    overlap = '[systems.shop.pools.b]\ntier = "app"\nsize = 4\nholds = ["app", "db"]\n'
    message = _refused(toml(_POOL_SYSTEM + a + overlap), "systems.shop.pools.b.holds")
    assert "overlaps pool 'a'" in message
    nested = '[systems.shop.pools.b]\ntier = "app"\nsize = 4\nholds = ["app"]\n'
    disjoint = '[systems.shop.pools.c]\ntier = "db"\nsize = 4\nholds = ["db"]\n'
    assert len(load_config(toml(_POOL_SYSTEM + a + nested + disjoint), env={})
               .system("shop").pools) == 3


def test_a_pool_needs_tiers_and_may_exceed_the_population(toml):
    _refused(toml('[systems.shop.pools.conn]\ntier = "app"\nsize = 4\nholds = ["app"]\n'),
             "systems.shop.pools.conn")
    cfg = load_config(toml(_POOL_SYSTEM + '[systems.shop.pools.conn]\ntier = "db"\n'
                           'size = 1000000\nholds = ["db"]\n'), env={})
    assert cfg.system("shop").pools["conn"].size == 1_000_000


def test_a_cycle_of_pools_is_refused_naming_the_key(toml):
    """``conn`` on app held at app and db, ``back`` on db held back at app: requests holding one
    would wait for the other's tokens and the reverse -- refused as a run against the visit
    order, naming the key and the cycle."""
    conn = '[systems.shop.pools.conn]\ntier = "app"\nsize = 4\nholds = ["app", "db"]\n'
    back = '[systems.shop.pools.back]\ntier = "db"\nsize = 4\nholds = ["db", "app"]\n'
    message = _refused(toml(_POOL_SYSTEM + conn + back), "systems.shop.pools.back.holds")
    assert "'app' comes before 'db'" in message and "makes a cycle" in message


def test_a_pool_named_like_a_tier_is_refused_naming_the_key(toml):
    message = _refused(toml(_POOL_SYSTEM + '[systems.shop.pools.db]\ntier = "app"\nsize = 4\n'
                                           'holds = ["app", "db"]\n'), "systems.shop.pools.db")
    assert "must differ from the system's tiers" in message
