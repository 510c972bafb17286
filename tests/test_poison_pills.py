"""Poison pills: input records built to break a sink, an encoder or the core, fed to the
embedded runner (``perfcast run``), to the worker's batch step (``streams.kafka.core_process``) and to
``perfcast produce``. Each is dead-lettered with its field and reason (or, a utilization a hair
above 1, clamped and flagged), and every other record is processed as if it were not there."""

from __future__ import annotations

import json
import logging
import sqlite3

import msgspec
import pytest
from typer.testing import CliRunner

from fuzz_corpus import POISON, window
from streams.cli.commands import app
from streams.core.config import Config, KafkaSettings
from streams.kafka.core_process import OUTPUT_TOPICS, _keyed, run_batch
from streams.cli.demo import DemoScenario, demo_records
from streams.cli.embedded import read_jsonl
from streams.sinks.influx import _escape_tag, lines, line_protocol
from streams.engine.pipeline import RAW_LIMIT, Pipeline, dead_letter
from streams.kafka.produce import produce, record_key
from streams.core.records import InvalidWindow
from streams.sinks.schema import Point, points
from streams.sinks.store import SQLiteStore
from streams.core.outputs import DeadLetter, Outputs, Prediction, TierEstimate
from streams.engine.table_pipeline import TableBackedPipeline

#: Kafka's default largest message (broker ``message.max.bytes``)
KAFKA_MAX_MESSAGE = 1_048_588


# POISON: name -> (JSON-lines text, the dead letter's field, text its reason must contain),
# the single-record dead letters of tests/fuzz_corpus (the one list of hostile cases)
_window = window
#: accepted, clamped to 1 and flagged
CLAMPED = _window(system="p-clamped", utilization=1.013)
FLAG = "utilization 1.013 clamped to 1 (within tolerance 0.02)"


@pytest.fixture(scope="module")
def trace():
    """The demo shop's windows (5 minutes) with every poison pill and the clamped window
    among them, as the lines of a JSON-lines file."""
    good = [json.dumps(r) for r in demo_records(DemoScenario(duration_s=300))]
    lines_ = list(good)
    for i, (text, _, _) in enumerate(POISON.values()):
        lines_.insert(7 * i + 3, text)
    lines_.insert(50, CLAMPED)
    return good, lines_


def _check_dead_letters(dead: list[dict]) -> None:
    assert [d["field"] for d in dead] == [field for _, field, _ in POISON.values()]
    for d, (name, (_, _, reason)) in zip(dead, POISON.items()):
        assert reason in d["reason"], (name, d["reason"])
        text = json.dumps(d, allow_nan=False)
        assert len(text.encode()) < 64 * 1024, (name, len(text))     # far below 1 MB
        text.encode("utf-8")


@pytest.mark.timeout(300)
def test_perfcast_run_dead_letters_every_poison_pill_and_processes_the_rest(tmp_path, trace):
    good, lines_ = trace
    source = tmp_path / "trace.jsonl"
    source.write_text("\n".join(lines_) + "\n", encoding="utf-8", errors="surrogatepass")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--source", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    estimates = [json.loads(x) for x in (out / "estimates.jsonl").read_text().splitlines()]
    dead = [json.loads(x) for x in (out / "deadletter.jsonl").read_text().splitlines()]
    _check_dead_letters(dead)
    # every valid window has its estimate; the shop's are those of a run without the pills
    assert len(estimates) == len(good) + 1
    reference = Pipeline().process_many(good)
    shop = [e for e in estimates if e["system"] == "shop"]
    assert shop == [e.to_record() for e in reference.estimates]
    (clamped,) = [e for e in estimates if e["system"] == "p-clamped"]
    assert clamped["utilization"] == 1.0 and clamped["flags"] == [FLAG]
    assert all("flags" not in e for e in shop)
    with sqlite3.connect(out / "perfcast.sqlite") as db:
        assert db.execute("SELECT count(*) FROM deadletter").fetchone()[0] == len(POISON)
        assert db.execute("SELECT count(*) FROM tier_estimate").fetchone()[0] == len(good) + 1
        assert db.execute("SELECT flags FROM tier_estimate WHERE system = 'p-clamped'"
                          ).fetchone()[0] == FLAG
        assert db.execute("SELECT count(*) FROM prediction").fetchone()[0] > 0


class _Table:
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}


def test_the_workers_batch_step_dead_letters_every_poison_pill(trace):
    """The worker's core path: the batch's records encode (JSON, keyed), its line protocol is
    one line per point, and the estimates and predictions are the embedded run's."""
    good, lines_ = trace
    values = [line.encode("utf-8", "surrogatepass") for line in lines_]
    core = TableBackedPipeline(Config(), _Table())
    results = [run_batch(core, values[i:i + 40], [0] * len(values[i:i + 40]), 1.0e9, True)
               for i in range(0, len(values), 40)]
    decoded = {t: [json.loads(v) for r in results for _, v in r.records[t]]
               for t in OUTPUT_TOPICS}
    _check_dead_letters(decoded["deadletter"])
    for r in results:
        for _, value in r.records["deadletter"]:
            assert len(value) < KAFKA_MAX_MESSAGE
        for line in r.lines + r.urgent:
            assert "\n" not in line and "\r" not in line
            line.encode("utf-8")
    reference = Pipeline().process_many(good)
    shop = [e for e in decoded["estimates"] if e["system"] == "shop"]
    assert shop == [e.to_record() for e in reference.estimates]
    assert [p for p in decoded["predictions"] if p["system"] == "shop"] == \
        [p.to_record() for p in reference.predictions]
    (clamped,) = [e for e in decoded["estimates"] if e["system"] == "p-clamped"]
    assert clamped["flags"] == [FLAG]
    assert any('flags="' + FLAG + '"' in line for r in results for line in r.lines)


# -- dead letters: bounded and encodable whatever they quote ----------------------------------
def test_a_dead_letters_value_is_capped_like_its_raw_record():
    raw = '{"system": "' + "x" * 900_000
    dead = Pipeline().process(raw).deadletter[0]
    assert dead["field"] == "record"
    assert len(dead["value"]) <= RAW_LIMIT and len(dead["raw"]) <= RAW_LIMIT
    assert dead["value"].endswith("...")
    assert len(msgspec.json.encode(dead)) < 20_000


@pytest.mark.parametrize("value, shown", [
    (2**64, "18446744073709551616"), (-(2**70), str(-(2**70))), ("a\ud800", "a\\ud800"),
    ({"home\ud800": [1] * 100_000}, "{'home\\ud800': [1, 1"), (float("nan"), "NaN"),
])
def test_dead_letter_values_are_json_safe(value, shown):
    dead = dead_letter("raw \udfff", InvalidWindow("field", value, "reason"))
    assert str(dead["value"]).startswith(shown)
    assert dead["raw"] == "raw \\udfff"
    assert len(msgspec.json.encode(dead)) < 3 * RAW_LIMIT
    json.dumps(dead.to_record(), allow_nan=False)


def test_output_records_the_encoder_refuses_are_sent_made_safe():
    """``_keyed`` (the worker's output encoding) never fails a batch."""
    records = [DeadLetter(reason="r", field="f", value=1, system="ok"),
               DeadLetter(reason="r", field="f", value=2**70, system="a\ud800"),
               DeadLetter(reason="b\udfff", field="f", value=None)]
    keyed = _keyed(records)
    assert [k for k, _ in keyed] == [b"ok", b"a\\ud800", None]
    assert [json.loads(v) for _, v in keyed] == [
        {"reason": "r", "field": "f", "value": 1, "system": "ok"},
        {"reason": "r", "field": "f", "value": str(2**70), "system": "a\\ud800"},
        {"reason": "b\\udfff", "field": "f", "value": None}]


# -- sinks: an integer beyond 64 bits never crashes them --------------------------------------
def test_the_store_takes_an_integer_beyond_64_bits(tmp_path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    try:
        fine = Point("prediction", {"system": "s"}, {"users": 5}, 1.0)
        huge = Point("prediction", {"system": "s"}, {"users": 2**70, "model": "m\ud800"}, 2.0)
        assert store.write([fine, huge]) == 2
        rows = store.query('SELECT time, users, model FROM "prediction" ORDER BY time')
        assert [tuple(r) for r in rows] == [(1.0, 5, None), (2.0, 2**63 - 1, "m\\ud800")]
    finally:
        store.close()


def test_line_protocol_writes_an_integer_beyond_64_bits_at_the_bound():
    p = Point("prediction", {"system": "s"}, {"users": 2**70, "headroom_users": -(2**70)}, 1.0)
    assert line_protocol(p) == (f"prediction,system=s users={2**63 - 1}i,"
                                f"headroom_users={-(2**63)}i 1000000000")
    record = Prediction(system="s", time=1.0, solve=1, think_time_s=None, horizon_s=600.0,
                        model=None, flags=[], users=2**70)
    assert lines(Outputs(predictions=[record])) == [f"prediction,system=s users={2**63 - 1}i,"
                                                    f'horizon_s=600.0,flags="" 1000000000']


def test_a_line_break_in_a_tag_never_ends_the_line():
    """The validator refuses control characters in names; should one reach the sink anyway it
    is written as the two characters ``\\n``, not as a line break."""
    assert _escape_tag("a\nb\rc") == "a\\nb\\rc"
    out = Outputs(estimates=[TierEstimate(system="s\nx", tier="t", end=1.0, seq=1,
                                          utilization=0.5, late=False, demands={},
                                          demand_std={}, kalman_flag=None,
                                          change_detected=False)])
    (line,) = lines(out)
    assert "\n" not in line and line == line_protocol(points(out)[0])


# -- perfcast produce: sends every line it can, skips with a warning what it cannot ------------
class _Future:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def add_errback(self, f, *args):
        if self.error is not None:
            f(*args, self.error)
        return self


class _Producer:
    """Stands in for kafka-python's producer; refuses a value containing ``too-big``
    synchronously (as kafka-python does beyond ``max_request_size``) and fails one containing
    ``broker-refuses`` asynchronously (as the broker does beyond its largest message)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes]] = []
        self.flushed = False

    def send(self, topic, key=None, value=None):
        from kafka.errors import KafkaError, MessageSizeTooLargeError

        if b"too-big" in value:
            raise MessageSizeTooLargeError("The message is 9000000 bytes when serialized")
        self.sent.append((topic, key, value))
        return _Future(KafkaError("MESSAGE_TOO_LARGE") if b"broker-refuses" in value else None)

    def flush(self):
        self.flushed = True


def test_produce_sends_poison_lines_for_the_worker_to_dead_letter(tmp_path):
    good = [json.dumps(r) for r in demo_records(DemoScenario(duration_s=20))]
    poison = [text for text, _, _ in POISON.values()]
    source = tmp_path / "trace.jsonl"
    source.write_text("\n".join(good[:3] + poison + good[3:]) + "\n", encoding="utf-8")
    producer = _Producer()
    stats = produce(read_jsonl(source), KafkaSettings(topic_prefix="p"), producer=producer)
    assert stats.sent == len(good) + len(poison) and (stats.skipped, stats.failed) == (0, 0)
    assert producer.flushed and {t for t, _, _ in producer.sent} == {"p.windows"}
    keys = [k for _, k, _ in producer.sent]
    assert keys.count(b"shop") == len(good)
    # the lone-surrogate system and the deeply nested line go without a key
    assert record_key(poison[0].encode()) is None and record_key(b'{"a": ' * 100_000) is None
    # what the worker then receives is what the file held: it dead-letters the poison
    sent = [v for _, _, v in producer.sent]
    out = Pipeline().process_many(sent)
    assert [d["field"] for d in out.deadletter] == [f for _, f, _ in POISON.values()]


def test_produce_skips_what_cannot_be_sent_with_a_warning_and_sends_the_rest(caplog):
    good = [json.dumps(r) for r in demo_records(DemoScenario(duration_s=20))]
    nested: dict = {}
    for _ in range(100_000):
        nested = {"a": nested}
    circular: dict = {"system": "c"}
    circular["self"] = circular
    records = [good[0], {"system": "s", "when": object()}, nested, circular,
               '{"system": "too-big"}', '{"system": "broker-refuses"}', "\ud800 lone",
               *good[1:]]
    producer = _Producer()
    with caplog.at_level(logging.WARNING, logger="perfcast.produce"):
        stats = produce(records, KafkaSettings(), producer=producer)
    assert (stats.sent, stats.skipped, stats.failed) == (len(good) + 2, 4, 1)
    assert [v for _, _, v in producer.sent][-len(good) + 1:] == [g.encode() for g in good[1:]]
    assert b"\\ud800 lone" in [v for _, _, v in producer.sent]
    warned = " ".join(r.getMessage() for r in caplog.records)
    for position in (1, 2, 3, 4):
        assert f"skipped record {position}:" in warned
    assert "record 5 was not stored by Kafka" in warned
