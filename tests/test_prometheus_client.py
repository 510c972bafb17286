"""The Prometheus HTTP client against a hostile server: a fake Prometheus API on 127.0.0.1
(:mod:`tests.fake_prometheus`) that trickles its answer, sends too much, redirects elsewhere,
echoes the token, or answers a body of an unexpected shape. A transport or configuration
fault ends with one clear error naming the setting; an answer of an unexpected shape is a dead
letter naming the query and the field, and the other queries' windows are run all the same --
never a hang, a traceback, or the token in any output.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from streams.cli.commands import app
from streams.core.config import ConfigError
from streams.sources.prometheus import parse_result, source_from_mapping
from streams.sources.prometheus_http import (MalformedAnswer, PrometheusClient, PrometheusError,
                                             fetch_windows, iter_windows)
from tests.fake_prometheus import FakePrometheus, json_answer

TOKEN = "s3cr3t-T0ken.value~+/="
ENV = {"PERFCAST_PROMETHEUS_TOKEN": TOKEN}


@pytest.fixture(autouse=True, scope="module")
def _no_prometheus_of_the_environment():
    """The fake servers here are the only Prometheus: the test command's own (its URL and a
    token in the environment) must not override the configured one (module scope: before the
    module's shared runs too)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("PERFCAST_PROMETHEUS_URL", "PERFCAST_PROMETHEUS_TOKEN",
                     "PERFCAST_PROMETHEUS_TOKEN_FILE"):
            patch.delenv(name, raising=False)
        yield
#: the outer bound of a call that must end by itself: only so that a regression fails the
#: test instead of hanging the suite (the deadlines under test are a second or two)
OUTER_S = 60.0


def source(url: str, **settings_):
    return source_from_mapping({"prometheus": {"url": url, "system": "shop", "window_s": 5,
                                               **settings_},
                                "tiers": {"db": {"busy_seconds": "busy", "completions": "c"}}})


def success(result) -> bytes:
    return json.dumps({"status": "success",
                       "data": {"resultType": "matrix", "result": result}}).encode()


def call(fn):
    """``fn()`` in a thread joined within :data:`OUTER_S`: ``(returned, exception)``."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:            # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(OUTER_S)
    assert not thread.is_alive(), f"the call did not return within {OUTER_S} s"
    return out.get("value"), out.get("error")


# -- the deadline: the whole request, however slowly the bytes come ---------------------------
def _drip(fake, h, byte: bytes) -> None:
    """Write ``byte`` every 50 ms until the fake server stops: every read returns, none ends."""
    while not fake.stop.is_set():
        h.wfile.write(byte)
        h.wfile.flush()
        time.sleep(0.05)


def _trickle_body(fake):
    def answer(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "1000000")
        h.end_headers()
        h.wfile.write(b'{"status": "success", ')
        _drip(fake, h, b" ")
    return answer


def _trickle_headers(fake):
    def answer(h):
        h.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        _drip(fake, h, b"x")
    return answer


def _silent(fake):
    def answer(h):
        fake.stop.wait(OUTER_S)
    return answer


@pytest.mark.parametrize("trickle", [_trickle_body, _trickle_headers, _silent])
def test_a_trickled_answer_ends_at_the_deadline_with_a_clear_error(trickle):
    fake = FakePrometheus(lambda h: None)
    fake.answer = trickle(fake)
    with fake:
        client = PrometheusClient(source(fake.url, timeout_s=0.5, deadline_s=1), env=ENV)
        _, err = call(lambda: client.query_range("up", 0, 5000, 5000, "tiers.db.busy"))
    assert isinstance(err, PrometheusError), err
    assert str(err) == (f"tiers.db.busy: {fake.url} did not answer in full within 1 s "
                        f"(prometheus.deadline_s)")
    assert err.transient                        # the live follower retries it with back-off


def test_the_deadline_defaults_to_the_timeout_plus_30_s_and_is_checked():
    assert source("http://p:9090").deadline_s == 60.0
    assert source("http://p:9090", timeout_s=100).deadline_s == 130.0
    with pytest.raises(ConfigError, match=r"prometheus.deadline_s: must be at least "
                                          r"timeout_s \(30"):
        source("http://p:9090", deadline_s=10)
    with pytest.raises(ConfigError, match=r"prometheus.deadline_s: must be a number within "
                                          r"\(0, 3600\], got 1e\+300"):
        source("http://p:9090", deadline_s=1e300)


# -- the body cap ------------------------------------------------------------------------------
def _big(declared: bool):
    body = success([{"metric": {"handler": "x" * 100}, "values": [[1, "1"]]}] * 20_000)

    def answer(h):
        h.send_response(200)
        if declared:
            h.send_header("Content-Length", str(len(body)))
        else:                                   # close-delimited: the size shows as it comes
            h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(body)
    return answer, len(body)


@pytest.mark.parametrize("declared", [True, False])
def test_a_body_over_the_cap_is_refused(declared):
    answer, size = _big(declared)
    assert size > 2 * 2 ** 20
    with FakePrometheus(answer) as fake:
        client = PrometheusClient(source(fake.url, max_response_mb=1), env=ENV)
        _, err = call(lambda: client.query_range("up", 0, 5000, 5000, "tiers.db.busy"))
        # the same answer within a larger cap is read
        roomy = PrometheusClient(source(fake.url, max_response_mb=8), env=ENV)
        data, ok = call(lambda: roomy.query_range("up", 0, 5000, 5000))
    assert isinstance(err, PrometheusError) and not err.transient, err
    assert str(err).startswith(f"tiers.db.busy: {fake.url} answered more than 1 MiB "
                               f"(prometheus.max_response_mb)")
    assert ok is None and len(data["result"]) == 20_000


def test_the_cap_defaults_to_64_mib_and_is_checked():
    assert source("http://p:9090").max_response_mb == 64.0
    with pytest.raises(ConfigError, match=r"prometheus.max_response_mb: must be a number "
                                          r"within \(0, 4096\], got 0"):
        source("http://p:9090", max_response_mb=0)


# -- the token: only to the configured origin, never in any output -----------------------------
def _redirect(to: str):
    def answer(h):
        h.send_response(302)
        h.send_header("Location", to + h.path)
        h.send_header("Content-Length", "0")
        h.end_headers()
    return answer


@pytest.mark.parametrize("other", ["port", "host"])
def test_the_token_never_reaches_another_origin(other):
    with FakePrometheus(json_answer(success([]))) as second:
        # another port of the same host, or the same port under another host name
        target = second.url if other == "port" else second.url.replace("127.0.0.1",
                                                                        "localhost")
        with FakePrometheus(_redirect(target)) as first:
            client = PrometheusClient(source(first.url), env=ENV)
            data, err = call(lambda: client.query_range("up", 0, 5000, 5000))
    assert err is None and data == {"resultType": "matrix", "result": []}
    assert first.requests[0][1].get("Authorization") == f"Bearer {TOKEN}"
    assert len(second.requests) == 1
    assert all(TOKEN not in f"{k}: {v}" for k, v in second.requests[0][1].items())


def test_the_token_follows_a_redirect_within_its_origin():
    fake = FakePrometheus(lambda h: None)

    def answer(h):
        if h.path.startswith("/moved/"):
            json_answer(success([]))(h)
        else:
            _redirect(f"{fake.url}/moved")(h)
    fake.answer = answer
    with fake:
        client = PrometheusClient(source(fake.url), env=ENV)
        _, err = call(lambda: client.query_range("up", 0, 5000, 5000))
    assert err is None
    assert [h.get("Authorization") for _, h in fake.requests] == [f"Bearer {TOKEN}"] * 2


def _echo_token(h):
    """A server that puts the Authorization header it got into its error (and its type)."""
    got = h.headers.get("Authorization", "")
    json_answer(json.dumps({"status": "error", "errorType": got,
                            "error": f"bad query; you sent {got}"}).encode(), 400)(h)


def _prom_config(tmp_path, url: str):
    path = tmp_path / "prom.toml"
    path.write_text(f'[prometheus]\nurl = "{url}"\nsystem = "shop"\nwindow_s = 5\n'
                    f'[tiers.db]\nbusy_seconds = "busy"\ncompletions = "c"\n')
    return path


def _backtest(tmp_path, url: str, env: dict):
    return CliRunner().invoke(app, ["run", "--source", "prometheus", "--prom-config",
                                    str(_prom_config(tmp_path, url)), "--from", "1800000000",
                                    "--to", "1800000060", "--out", str(tmp_path / "out")],
                              env=env)


def _all_output(result, caplog) -> str:
    return result.output + (result.stderr or "") + caplog.text + repr(result.exception)


def test_the_token_never_appears_in_output_even_when_the_server_echoes_it(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with FakePrometheus(_echo_token) as fake:
        result = _backtest(tmp_path, fake.url, ENV)
    assert fake.requests, "the server was asked"
    assert result.exit_code == 2, result.output
    assert "prometheus: tiers.db." in result.output and "HTTP 400" in result.output
    assert "***" in result.output
    assert TOKEN not in _all_output(result, caplog)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("token", ["abcSECRET\ndefSECRET", "abcSECRET\r\nX-Injected: SECRET",
                                   "twoSECRET wordsSECRET", "bellSECRET\x07", "cafSECRET\u00e9"])
def test_a_token_that_is_not_a_bearer_token_is_refused_without_showing_it(tmp_path, caplog,
                                                                          token):
    with FakePrometheus(json_answer(success([]))) as fake:
        with pytest.raises(PrometheusError) as err:
            PrometheusClient(source(fake.url), env={"PERFCAST_PROMETHEUS_TOKEN": token})
        result = _backtest(tmp_path, fake.url, {"PERFCAST_PROMETHEUS_TOKEN": token})
    assert "PERFCAST_PROMETHEUS_TOKEN: not a bearer token" in str(err.value)
    assert result.exit_code == 2 and "not a bearer token" in result.output
    assert not fake.requests                    # refused before anything is sent
    assert "SECRET" not in _all_output(result, caplog) + str(err.value)


def test_credentials_in_the_url_are_refused_without_showing_them(tmp_path, caplog):
    url = "http://admin:hunter2@127.0.0.1:9/"
    with pytest.raises(ConfigError) as err:
        source(url)
    result = _backtest(tmp_path, url, {})
    env_result = _backtest(tmp_path, "http://127.0.0.1:9", {"PERFCAST_PROMETHEUS_URL": url})
    for text in (str(err.value), _all_output(result, caplog), env_result.output):
        assert "hunter2" not in text and "admin" not in text
        assert "must not hold credentials" in text.replace("\n", " ")
    assert result.exit_code == env_result.exit_code == 2


# -- answers of an unexpected shape: one line naming the field ---------------------------------
HOSTILE = [
    (b"[]", "tiers.db.busy_seconds: the answer must be an object (status, data), got []"),
    (b'"s"', "the answer must be an object (status, data), got 's'"),
    (b'{"status": "success"}', "tiers.db.busy_seconds: data: missing from a successful answer"),
    (b'{"status": "success", "data": []}', "tiers.db.busy_seconds: data: must be an object"),
    (success(5), "tiers.db.busy_seconds: data.result: must be a list of series, got 5"),
    (b'{"status": "success", "data": {"resultType": "string", "result": [1, "x"]}}',
     "data.resultType: must be matrix, vector or scalar, got 'string'"),
    (success([{"metric": {}, "values": [["inf", "1"]]}]),
     "data.result[0].values[0][0]: the time must be epoch seconds within [0, 1e+11], "
     "got 'inf'"),
    (success([{"metric": {}, "values": [[None, "1"]]}]),
     "data.result[0].values[0][0]: the time must be epoch seconds"),
    (success([{"metric": {}, "values": [[1e300, "1"]]}]),
     "data.result[0].values[0][0]: the time must be epoch seconds"),
    (success([{"metric": ["handler", "x"], "values": [[1, "1"]]}]),
     "data.result[0].metric: must be an object of label = \"value\", got ['handler', 'x']"),
    (success([{"metric": {"handler": 5}, "values": [[1, "1"]]}]),
     "data.result[0].metric: must be an object of label = \"value\""),
    (success([{"metric": {}, "values": [[1, "one"]]}]),
     "data.result[0].values[0][1]: the value must be a number as a string, got 'one'"),
    (success([{"metric": {}, "values": [[1, "9" * 5000]]}]),
     "data.result[0].values[0][1]: the value must be a number as a string, got '99999"),
    (success([{"metric": {}, "values": 5}]), "data.result[0].values: must be a list of samples"),
    (success([{"metric": {}, "values": [[1]]}]),
     "data.result[0].values[0]: a sample must be [time, \"value\"], got [1]"),
    (success([7]), "data.result[0]: must be an object (metric, values), got 7"),
    (b"[" * 100_000 + b"]" * 100_000, "did not answer JSON (nested too deeply)"),
    (b'{"status": "success", "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "did not answer JSON (nested too deeply)"),
    (b"<html>502 Bad Gateway</html>", "did not answer JSON (Expecting value"),
    (b'{"status": "error", "errorType": "bad_data\\u001b[2J", "error": "\\u202e!"}',
     "tiers.db.busy_seconds: status: bad_data\\x1b[2J: \\u202e! (query 'busy'), got 'error'"),
]
#: the answers that are not of Prometheus' shape (the rest -- not JSON at all -- is transient)
MALFORMED = [body for body, message in HOSTILE if "Expecting value" not in message]


@pytest.mark.parametrize("body, message", HOSTILE, ids=range(len(HOSTILE)))
def test_an_answer_of_an_unexpected_shape_is_one_error_naming_the_field(body, message):
    with FakePrometheus(json_answer(body)) as fake:
        src = source(fake.url)
        _, err = call(lambda: list(iter_windows(src, 1_800_000_000, 1_800_000_060,
                                                PrometheusClient(src, env=ENV))))
    assert isinstance(err, PrometheusError), err
    assert isinstance(err, MalformedAnswer) == (body in MALFORMED) != err.transient
    assert message in str(err) and "\n" not in str(err) and len(str(err)) < 600
    assert "\x1b" not in str(err) and "\u202e" not in str(err)


# -- the backtest: a malformed answer is a dead letter, the other queries' windows are run ----
T0 = 1_799_999_000
#: per query of the two-tier system below: a counter's rate (busy core-seconds per second)
_RATES = {"busy_front": 0.3, "busy_db": 0.6}
#: per class, completions per second (both tiers' ``completions`` and ``time_count``)
_CLASSES = {"home": 20.0, "buy": 5.0}


def _shop(hostile: bytes | None, hostile_query: str = "busy_db", times: int = 1):
    """A fake Prometheus of a two-tier shop (front, db) of steady counters, whose first
    ``times`` answers to ``hostile_query`` are ``hostile`` (``None``: every answer valid)."""
    left = [times]

    def answer(h):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(h.path).query)
        query = q["query"][0]
        if hostile is not None and query == hostile_query and left[0] > 0:
            left[0] -= 1
            return json_answer(hostile)(h)
        start, end, step = (float(q[k][0]) for k in ("start", "end", "step"))
        ts = [start + i * step for i in range(round((end - start) / step) + 1)]
        if query in _RATES:
            result = [{"metric": {}, "values": [[t, str(_RATES[query] * (t - T0))]
                                                for t in ts]}]
        else:                           # completions, time_sum (0.01 s per completion)
            per = 0.01 if query.startswith("time") else 1.0
            result = [{"metric": {"handler": c},
                       "values": [[t, str(per * rate * (t - T0))] for t in ts]}
                      for c, rate in _CLASSES.items()]
        json_answer(success(result))(h)

    return answer


def _shop_run(tmp_path, name: str, answer, *extra: str):
    with FakePrometheus(answer) as fake:
        path = tmp_path / f"{name}.toml"
        path.write_text(f'[prometheus]\nurl = "{fake.url}"\nsystem = "shop"\nwindow_s = 5\n'
                        f'[tiers.front]\nbusy_seconds = "busy_front"\ncompletions = "c_front"\n'
                        f'[tiers.db]\nbusy_seconds = "busy_db"\ncompletions = "c_db"\n'
                        + "".join(f"{line}\n" for line in extra))
        out = tmp_path / name
        result = CliRunner().invoke(app, ["run", "--source", "prometheus", "--prom-config",
                                          str(path), "--from", "1800000000", "--to",
                                          "1800000060", "--out", str(out)], env=ENV)
    read = {name: [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]
            for name in ("estimates", "deadletter")} if (out / "estimates.jsonl").exists() else {}
    return result, read


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    result, read = _shop_run(tmp_path_factory.mktemp("clean"), "clean", _shop(None))
    assert result.exit_code == 0 and not read["deadletter"], result.output
    return read


#: each hostile shape as the answer to tiers.db.busy_seconds, and the field its dead letter names
SHAPES = {
    "[]": (b"[]", "tiers.db.busy_seconds"),
    '"s"': (b'"s"', "tiers.db.busy_seconds"),
    "no data": (b'{"status": "success"}', "tiers.db.busy_seconds.data"),
    "result 5": (success(5), "tiers.db.busy_seconds.data.result"),
    "time inf": (success([{"metric": {}, "values": [["inf", "1"]]}]),
                 "tiers.db.busy_seconds.data.result[0].values[0][0]"),
    "time null": (success([{"metric": {}, "values": [[None, "1"]]}]),
                  "tiers.db.busy_seconds.data.result[0].values[0][0]"),
    "labels list": (success([{"metric": ["handler", "x"], "values": [[1, "1"]]}]),
                    "tiers.db.busy_seconds.data.result[0].metric"),
    "nesting 1e5": (b"[" * 100_000 + b"]" * 100_000, "tiers.db.busy_seconds"),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_backtest_dead_letters_such_an_answer_and_runs_the_other_windows(tmp_path, shape,
                                                                             clean_run):
    body, field = SHAPES[shape]
    result, read = _shop_run(tmp_path, "hostile", _shop(body))
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and TOKEN not in result.output
    [dead] = read["deadletter"]
    assert dead["field"] == field and dead["tier"] == "db" and dead["system"] == "shop"
    assert dead["reason"].startswith(f"{field}: ")
    assert "12 of the tier's 12 windows ending 2027-01-15T08:00:05.000Z .. " \
           "2027-01-15T08:01:00.000Z not made" in dead["reason"]
    assert dead["raw"].startswith("query_range 'busy_db' ")
    assert f"dead letters by reason: 1 x {field}: " in result.output.replace("\n", " ")
    assert "gaps: db: 12 (answer to tiers.db.busy_seconds refused: a dead letter" \
        in result.output
    # the front tier's windows: estimated as without the hostile answer; db's: not made
    front = [e for e in clean_run["estimates"] if e["tier"] == "front"]
    assert len(front) == 12 and read["estimates"] == front


def test_a_malformed_answer_to_an_optional_query_loses_only_its_field(tmp_path):
    body = success([{"metric": {"handler": 5}, "values": [[1, "1"]]}])
    extra = ['time_sum = "time_db"']
    clean, read_clean = _shop_run(tmp_path, "clean", _shop(None), *extra)
    result, read = _shop_run(tmp_path, "hostile", _shop(body, "time_db"), *extra)
    assert clean.exit_code == result.exit_code == 0, result.output
    [dead] = read["deadletter"]
    assert dead["field"] == "tiers.db.time_sum.data.result[0].metric"
    assert "; 12 of the tier's windows ending 2027-01-15T08:00:05.000Z .. " \
           "2027-01-15T08:01:00.000Z made without response_time_s" in dead["reason"]
    assert len(read["estimates"]) == len(read_clean["estimates"]) == 24
    windows = [json.loads(line) for line in
               (tmp_path / "hostile" / "prometheus-windows.jsonl").read_text().splitlines()]
    assert not any("response_time_s" in w for w in windows if w["tier"] == "db")


def test_a_token_echoed_in_a_malformed_answer_never_reaches_the_dead_letter(tmp_path):
    body = success([{"metric": [TOKEN, "\x1b[2J"], "values": []}])
    result, read = _shop_run(tmp_path, "hostile", _shop(body))
    assert result.exit_code == 0, result.output
    [dead] = read["deadletter"]
    assert TOKEN not in json.dumps(dead) + result.output and "***" in dead["value"]
    assert "\x1b" not in json.dumps(dead, ensure_ascii=False) + result.output


def test_the_backtest_stops_when_every_answer_is_malformed(tmp_path):
    with FakePrometheus(json_answer(b"[]")) as fake:
        result = _backtest(tmp_path, fake.url, ENV)
    assert result.exit_code == 3, result.output     # nothing to estimate: run's own rule
    assert "no window accepted" in result.output
    dead = (tmp_path / "out" / "deadletter.jsonl").read_text().splitlines()
    assert len(dead) == 2                           # busy_seconds, completions


# -- any JSON at all: parsed, or a ValueError naming the query ---------------------------------
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() |
                     st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) |
                     st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
_shaped = st.fixed_dictionaries({
    "resultType": st.sampled_from(["matrix", "vector", "scalar"]) | _json,
    "result": st.lists(st.fixed_dictionaries(
        {"metric": st.dictionaries(st.text(max_size=5), st.text(max_size=5)) | _json,
         "values": st.lists(st.tuples(st.floats() | st.integers() | _json,
                                      st.text(max_size=6) | _json).map(list)) | _json}),
        max_size=3) | _json})


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=_json | _shaped)
def test_any_json_is_parsed_or_refused_naming_the_query(data):
    try:
        series = parse_result(data, "tiers.db.busy_seconds")
    except ValueError as exc:
        assert str(exc).startswith("tiers.db.busy_seconds: data")
        return
    for s in series:
        assert all(isinstance(v, str) for v in s.labels.values())
        assert all(isinstance(t, int) and isinstance(v, float) for t, v in s.values.items())


@settings(max_examples=200, deadline=None, derandomize=True)
@given(raw=st.binary(max_size=64) | _json.map(lambda v: json.dumps(v).encode()))
def test_any_body_is_data_or_a_prometheus_error(raw):
    client = PrometheusClient(source("http://127.0.0.1:9"), env=ENV)
    try:
        client.answer_data(raw, "tiers.db.busy_seconds", "busy")
    except PrometheusError as exc:
        assert str(exc).startswith("tiers.db.busy_seconds: ")
        assert "\n" not in str(exc)


# -- TLS: the handshake is within the deadline too ---------------------------------------------
class _SilentListener:
    """A TCP listener that accepts and never says a word (a TLS handshake never completes)."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        try:
            while True:
                self.held.append(self.sock.accept()[0])
        except OSError:
            pass                                # closed by __exit__

    def __enter__(self) -> "_SilentListener":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_a_tls_handshake_that_never_completes_ends_at_the_deadline():
    with _SilentListener() as listener:
        url = f"https://127.0.0.1:{listener.port}"
        client = PrometheusClient(source(url, timeout_s=0.5, deadline_s=1), env=ENV)
        _, err = call(lambda: client.query_range("up", 0, 5000, 5000, "tiers.db.busy"))
    assert isinstance(err, PrometheusError) and err.transient, err
    assert str(err) == (f"tiers.db.busy: {url} did not answer in full within 1 s "
                        f"(prometheus.deadline_s)")


def test_a_plain_http_server_behind_an_https_url_is_a_clear_error():
    with FakePrometheus(json_answer(success([]))) as fake:
        url = fake.url.replace("http://", "https://")
        client = PrometheusClient(source(url), env=ENV)
        _, err = call(lambda: client.query_range("up", 0, 5000, 5000, "tiers.db.busy"))
    assert isinstance(err, PrometheusError) and err.transient, err
    assert str(err).startswith(f"tiers.db.busy: cannot query {url} (")


# -- the live follower: malformed answers dead-lettered, transient ones retried, logged ---------
class _Producer:
    """A Kafka producer that keeps what it is sent: ``(topic, key, value)``."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes]] = []

    def send(self, topic, key=None, value=None):
        self.sent.append((topic, key, value))
        return None

    def flush(self) -> None:
        pass


def _follow(url: str, env: dict, tmp_path, stop_on_warning: bool = True, producer=None,
            src=None, **settings_):
    from streams.core.config import KafkaSettings
    from streams.kafka.prometheus_follow import Checkpoint, follow

    src = src or source(url, **settings_)
    stop = threading.Event()

    class StopOnWarning(logging.Handler):
        def emit(self, record):
            if stop_on_warning and record.levelno >= logging.WARNING:
                stop.set()

    handler = StopOnWarning()
    logging.getLogger("perfcast.prometheus").addHandler(handler)
    try:
        return call(lambda: follow(src, KafkaSettings(), Checkpoint(tmp_path / "cp.json", src),
                                   start_s=1_800_000_000, until_s=1_800_000_060, stop=stop,
                                   producer=producer or object(),
                                   client=PrometheusClient(src, env=env),
                                   clock=lambda: 1_800_000_100.0))
    finally:
        logging.getLogger("perfcast.prometheus").removeHandler(handler)


@pytest.mark.parametrize("shape", ["labels list", "nesting 1e5"])
def test_the_follower_dead_letters_a_malformed_answer_and_goes_on(tmp_path, caplog, shape):
    from streams.kafka.prometheus_follow import Checkpoint

    caplog.set_level(logging.INFO)
    body, field = SHAPES[shape]
    producer = _Producer()
    with FakePrometheus(_shop(body)) as fake:              # hostile once, then valid
        src = source_from_mapping({
            "prometheus": {"url": fake.url, "system": "shop", "window_s": 5,
                           "max_windows_per_query": 4},
            "tiers": {"front": {"busy_seconds": "busy_front", "completions": "c_front"},
                      "db": {"busy_seconds": "busy_db", "completions": "c_db"}}})
        stats, err = _follow(fake.url, ENV, tmp_path, stop_on_warning=False,
                             producer=producer, src=src)
    assert err is None, err
    topics = [topic for topic, _, _ in producer.sent]
    windows = [json.loads(v) for t, _, v in producer.sent if t == "perfcast.windows"]
    [dead] = [json.loads(v) for t, _, v in producer.sent if t == "perfcast.deadletter"]
    assert dead["field"] == field and dead["tier"] == "db" and dead["system"] == "shop"
    assert "4 of the tier's 4 windows ending 2027-01-15T08:00:05.000Z .. " \
           "2027-01-15T08:00:20.000Z not made" in dead["reason"]
    # the first interval's front windows, then both tiers' windows of the next two intervals
    assert [(w["tier"], w["end"]) for w in windows] == \
        [("front", 1_800_000_000 + 5 * k) for k in range(1, 5)] + \
        [(t, 1_800_000_000 + 5 * k) for k in range(5, 13) for t in ("front", "db")]
    assert topics.index("perfcast.deadletter") == 4     # sent before the checkpoint moved
    assert stats.refused == 1 and stats.sent == 20
    assert Checkpoint(tmp_path / "cp.json", src).load() == 1_800_000_060
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line.startswith(f"shop: {field}: ") and "\n" not in line
    assert "published to perfcast.deadletter, going on" in line


def test_the_follower_publishes_the_dead_letter_to_a_real_kafka_and_goes_on(tmp_path,
                                                                              kafka_bootstrap):
    from pipeline_harness import TopicReader, unique
    from streams.core.config import KafkaSettings
    from streams.kafka.prometheus_follow import Checkpoint, follow
    from streams.kafka.topics import ensure_topics

    kafka = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=unique("promdead"))
    ensure_topics(kafka)
    body, field = SHAPES["time inf"]
    with FakePrometheus(_shop(body)) as fake:
        src = source_from_mapping({
            "prometheus": {"url": fake.url, "system": "shop", "window_s": 5,
                           "max_windows_per_query": 4},
            "tiers": {"front": {"busy_seconds": "busy_front", "completions": "c_front"},
                      "db": {"busy_seconds": "busy_db", "completions": "c_db"}}})
        stats, err = call(lambda: follow(src, kafka, Checkpoint(tmp_path / "cp.json", src),
                                         start_s=1_800_000_000, until_s=1_800_000_060,
                                         client=PrometheusClient(src, env=ENV),
                                         clock=lambda: 1_800_000_100.0))
    assert err is None, err
    windows = TopicReader(kafka_bootstrap, kafka.topic("windows")).read_to_end()
    [dead] = TopicReader(kafka_bootstrap, kafka.topic("deadletter")).read_to_end()
    assert dead["field"] == field and dead["tier"] == "db" and "not made" in dead["reason"]
    assert len(windows) == stats.sent == 20 and stats.refused == 1
    assert Checkpoint(tmp_path / "cp.json", src).load() == 1_800_000_060


def test_the_follower_stops_on_a_query_prometheus_refuses_with_its_one_line(tmp_path):
    with FakePrometheus(_echo_token) as fake:               # HTTP 400: fix the configuration
        _, err = _follow(fake.url, ENV, tmp_path)
    assert isinstance(err, PrometheusError) and not err.transient
    assert "HTTP 400" in str(err) and TOKEN not in str(err)
    assert not (tmp_path / "cp.json").exists()          # the checkpoint did not move


def test_the_follower_retries_a_deadline_and_logs_no_token(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    fake = FakePrometheus(lambda h: None)
    fake.answer = _trickle_body(fake)
    with fake:
        stats, err = _follow(fake.url, ENV, tmp_path, timeout_s=0.5, deadline_s=1)
    assert err is None and stats.sent == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and "did not answer in full within 1 s (prometheus.deadline_s); " \
                        "retrying in 5 s" in warnings[0]
    assert TOKEN not in caplog.text


@pytest.mark.parametrize("content, problem", [
    ("[]", "is not a checkpoint of system 'shop' (got [])"),
    ('"s"', "is not a checkpoint of system 'shop' (got 's')"),
    ('{"system": "shop", "end": "inf"}', "is not a checkpoint of system 'shop'"),
    ("[" * 100_000 + "]" * 100_000, "(nested too deeply)"),
    ("\xff{", "cannot read"),
])
def test_a_hostile_checkpoint_is_one_configuration_error(tmp_path, content, problem):
    from streams.kafka.prometheus_follow import Checkpoint

    path = tmp_path / "cp.json"
    path.write_text(content, encoding="latin-1")
    with pytest.raises(ConfigError) as err:
        Checkpoint(path, source("http://127.0.0.1:9")).load()
    assert str(err.value).startswith("checkpoint: ") and problem in str(err.value)


@pytest.mark.parametrize("headers, message", [
    ({"X-Scope-OrgID": "shop\r\nX-Injected: 1"}, "prometheus.headers.X-Scope-OrgID: must be at "
                                                 "most 8192 characters without control"),
    ({"X Bad": "v"}, "prometheus.headers: 'X Bad' is not a header name"),
    ({"Cookie": "session=abc"}, "prometheus.headers.Cookie: secrets come from the environment"),
    ({"authorization": "Bearer abc"}, "prometheus.headers.authorization: secrets come from"),
])
def test_headers_that_would_split_a_request_or_carry_a_secret_are_refused(headers, message):
    with pytest.raises(ConfigError) as err:
        source("http://127.0.0.1:9", headers=headers)
    assert str(err.value).startswith(message)
    assert "abc" not in str(err.value) and "\r" not in str(err.value)


@pytest.mark.parametrize("url", ["http://admin:hun/ter2@127.0.0.1:9", "http://admin@127.0.0.1",
                                 "https://admin:hunter2@127.0.0.1:9/api@x"])
def test_any_credentials_in_the_url_are_refused_and_never_shown(url):
    with pytest.raises(ConfigError) as err:
        source(url)
    assert "must not hold credentials" in str(err.value)
    assert "admin" not in str(err.value) and "ter2" not in str(err.value)
