"""Fuzzing the input contract and the configuration through both shells and ``perfcast produce``
(item 6).

Hypothesis generates batches of window records -- valid ones, and near-valid mutations of
them: wrong types, out-of-range numbers (NaN, infinities, huge and negative integers), missing
and extra fields, odd Unicode in names (lone surrogates, control characters, backslashes,
huge names), many classes, duplicate, overlapping and late windows; as mappings or as the bytes
a file or Kafka holds (a BOM, invalid UTF-8, truncation, deep nesting) -- and drives them
through

- the embedded shell's core, :meth:`streams.engine.pipeline.Pipeline.process_many` (what
  ``perfcast run`` calls per chunk), on mappings and on bytes;
- the worker's batch step as its core process runs it (:class:`streams.kafka.core_process.Step`:
  :func:`~streams.kafka.core_process.run_batch` over the table-backed core, with restores from the
  table in between, as after a rebalance);
- ``perfcast produce``'s handling of each line (:func:`streams.kafka.produce.produce` with a
  stand-in producer).

The invariant: every record is processed (an estimate) or dead-lettered with a reason naming
its field; every number in every output is finite, and no NaN is made on the way (numpy's
"invalid value" warning is an error here); nothing raises. The worker must also give
exactly the embedded shell's estimates and predictions.

The examples are derandomized (the same in every run, no example database): each test sees
at least :data:`MIN_RECORDS` generated records. ``tests/fuzz_corpus`` holds the hand-written
hostile-input cases, replayed here through the same paths.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ci_policy import unavailable
from fuzz_corpus import ANY, CONFIGS, CORPUS, Case
from streams.core.config import Config, ConfigError, SystemConfig, load_config
from streams.kafka.core_process import OUTPUT_TOPICS, Step
from streams.cli.embedded import read_jsonl, run_embedded
from streams.engine.pipeline import Pipeline
from streams.kafka.produce import produce, record_key
from streams.engine.system import Outputs

#: a NaN made inside the core (``0 * inf``, ``inf - inf``) is an error even where the output
#: records' cleaning would turn it into ``null``: "every output finite" must not hold by
#: accident
#: slow: each fuzz test drives thousands of generated records through a shell (minutes)
pytestmark = [pytest.mark.filterwarnings("error:invalid value encountered:RuntimeWarning"),
              pytest.mark.slow]

#: generated records each shell sees at least (>= 10,000 per shell in CI)
MIN_RECORDS = 10_000
#: examples per fuzz test, and records per example (a batch, as the shells take them)
EXAMPLES = 160
BATCH = (60, 100)

_BASE_END = 1_795_687_205.0        # 2026-11-25T10:00:05Z

#: the generated batches' pipelines: bursty tiers of more than 16 cores take the speed-scaled
#: station, not the per-job one. The fuzz judges the input contract (every record accounted,
#: every output finite), which does not depend on the station; a per-job chain of three 64-core
#: bursty tiers costs seconds a solve at hundreds of users, and hypothesis re-runs the examples
#: near one many times (minutes). The per-job station of 17-64 cores has its own tests
#: (tests/test_decomposition.py, tests/test_model.py)
FUZZ_CONFIG = Config(defaults=SystemConfig(per_job_max_cores=16))

#: no shrinking: a failing batch of ~60 records takes minutes to shrink; the failure prints the
#: example and a blob for ``@reproduce_failure``
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck), print_blob=True,
                phases=[Phase.explicit, Phase.reuse, Phase.generate])

# -- the invariant ----------------------------------------------------------------------------


def _finite(value: Any, where: str = "") -> None:
    """Every number in ``value`` is finite (bools, ints, finite floats; no numpy scalars)."""
    if isinstance(value, float):
        assert math.isfinite(value), f"non-finite {value!r} at {where}"
    elif isinstance(value, dict):
        for k, v in value.items():
            _finite(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _finite(v, f"{where}[{i}]")
    else:
        assert value is None or isinstance(value, (str, int, bool)), \
            f"{type(value).__name__} at {where}"


def check_outputs(out: Outputs, records: int, replays: int = 0) -> None:
    """The invariant over one batch's outputs (module docstring); ``replays``: records of the
    batch skipped as replays (a window seen before unchanged: neither output)."""
    assert len(out.estimates) + len(out.deadletter) + replays == records, \
        (len(out.estimates), len(out.deadletter), replays, records)
    for dead in out.deadletter:
        assert isinstance(dead.get("field"), str) and dead["field"], dead
        assert isinstance(dead.get("reason"), str) and dead["reason"], dead
    for topic in OUTPUT_TOPICS:
        rendered = [r.to_record() for r in getattr(out, topic)]
        _finite(rendered, topic)
        text = json.dumps(rendered, allow_nan=False)
        text.encode("utf-8")                  # no lone surrogate in any output


_NON_FINITE_FIELD = re.compile(r"=(-?nan|-?inf)(,| |$)")


def process(pipeline: Pipeline, records: list[Any]) -> tuple[Outputs, int]:
    """``pipeline.process_many(records)`` and how many of them it skipped as replays."""
    before = pipeline.replays
    out = pipeline.process_many(records)
    return out, pipeline.replays - before


def check_batch_result(result: Any, records: int) -> dict[str, list[Any]]:
    """The invariant over the worker's encoded batch; its records decoded."""
    decoded = {t: [json.loads(v) for _, v in result.records[t]] for t in OUTPUT_TOPICS}
    assert len(decoded["estimates"]) + len(decoded["deadletter"]) + result.replays == records
    for dead in decoded["deadletter"]:
        assert isinstance(dead.get("field"), str) and dead["field"], dead
        assert isinstance(dead.get("reason"), str) and dead["reason"], dead
    for topic in OUTPUT_TOPICS:
        for key, _ in result.records[topic]:
            assert key is None or isinstance(key, bytes)
    for line in result.lines + result.urgent:
        assert "\n" not in line and "\r" not in line, line[:200]
        line.encode("utf-8")
        assert not _NON_FINITE_FIELD.search(line), line[:200]
    return decoded


def _json(records: list[Any]) -> list[Any]:
    return json.loads(json.dumps([r.to_record() for r in records]))


# -- strategies over the input contract -------------------------------------------------------

SYSTEMS = ["shop", "blog", "a\\b,c d=e", "caf\u00e9 \u2603", "s" * 200]
TIERS = ["front", "app", "db"]
CLASSES = ["home", "buy", "search", "a,b c=d", "\u00fc\u00f1\u00ee", "x\\y"]

#: numbers beyond the contract (and at its edges)
ODD_NUMBERS = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -1, -1e-300, 0, -0.0, 1e-320, 2**31,
                     2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, -(2**63), 1e18, 1e308, 4e9,
                     1.0000000001, 1.013, 1.02, 1.0200001, 1.5, 4097, 1_000_001, 1e11,
                     4_102_444_800.0, 9.3e9]),
    st.floats(), st.integers())
WRONG_TYPES = st.one_of(st.text(max_size=5), st.booleans(), st.none(),
                        st.lists(st.integers(0, 9), max_size=3),
                        st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2))
#: any character, lone surrogates and control characters included
ANY_CHAR = st.characters(codec=None)
ODD_NAMES = st.one_of(
    st.text(ANY_CHAR, min_size=0, max_size=12),
    st.sampled_from(["", " ", "a\ud800", "\udfff", "sh\nop", "db\r", "t\x00", "c\x7f",
                     "x\x85", "home\\", "\\", "\u200b", "\ufeff", "\U0001f600",
                     "a\u2028b", "\u0000"]),
    st.builds(lambda c, n: c * n, st.sampled_from(["y", "\u00e9", "\U0001f600"]),
              st.integers(150, 1200)))
FIELDS = ["system", "tier", "end", "window_s", "utilization", "cores", "completions",
          "response_time_s", "users"]
NUMERIC = ["end", "window_s", "utilization", "cores", "users"]


@st.composite
def valid_records(draw: Any, n: int) -> list[dict[str, Any]]:
    """``n`` valid windows: runs of consecutive windows of a few systems' tiers (so their
    filters step and their models are solved), ``end`` as epoch seconds or ISO-8601."""
    records: list[dict[str, Any]] = []
    while len(records) < n:
        system = draw(st.sampled_from(SYSTEMS))
        tiers = draw(st.lists(st.sampled_from(TIERS), min_size=1, max_size=3, unique=True))
        classes = draw(st.lists(st.sampled_from(CLASSES), min_size=1, max_size=3, unique=True))
        start = draw(st.integers(0, 400))
        window_s = draw(st.sampled_from([1.0, 5.0, 5.0, 15.0, 60.0]))
        length = draw(st.integers(1, 12))
        users = draw(st.none() | st.integers(0, 10_000))
        cores = draw(st.sampled_from([1, 1, 2, 4, 64]))
        util = draw(st.floats(0.0, 1.0))
        iso = draw(st.booleans())
        for i in range(length):
            for j, tier in enumerate(tiers):
                end = _BASE_END + (start + i) * window_s
                u = min(max(util + 0.01 * ((i * 7 + j) % 11 - 5), 0.0), 1.0)
                rec: dict[str, Any] = {
                    "system": system, "tier": tier,
                    "end": (_iso(end) if iso else end), "window_s": window_s,
                    "utilization": u, "cores": cores,
                    "completions": {c: float((i * 13 + k * 5) % 17 + k) * window_s
                                    for k, c in enumerate(classes)},
                }
                if j == 0:
                    rec["response_time_s"] = {c: 0.01 * (k + 1) for k, c in enumerate(classes)}
                if users is not None:
                    rec["users"] = users + i
                records.append(rec)
    return records[:n]


def _iso(end: float) -> str:
    from streams.core.records import format_time
    return format_time(end)


MUTATIONS = ("none", "wrong_type", "odd_number", "missing", "extra", "odd_name", "odd_class",
             "many_classes", "duplicate", "overlap", "late", "future", "odd_end",
             "odd_completion", "nested_value")


@st.composite
def mutated(draw: Any, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """About a third of ``records`` mutated into near-valid ones (:data:`MUTATIONS`)."""
    out: list[dict[str, Any]] = []
    for rec in records:
        kind = draw(st.sampled_from(MUTATIONS + ("none",) * 14))
        rec = dict(rec)
        if kind == "wrong_type":
            rec[draw(st.sampled_from(FIELDS))] = draw(WRONG_TYPES)
        elif kind == "odd_number":
            rec[draw(st.sampled_from(NUMERIC))] = draw(ODD_NUMBERS)
        elif kind == "missing":
            rec.pop(draw(st.sampled_from(FIELDS)), None)
        elif kind == "extra":
            rec[draw(st.text(ANY_CHAR, max_size=8))] = draw(WRONG_TYPES | ODD_NUMBERS)
        elif kind == "odd_name":
            rec[draw(st.sampled_from(["system", "tier"]))] = draw(ODD_NAMES)
        elif kind == "odd_class":
            target = draw(st.sampled_from(["completions", "response_time_s"]))
            rec[target] = {**(rec.get(target) or {}), draw(ODD_NAMES): 1.0}
        elif kind == "many_classes":
            n = draw(st.integers(1, 300))
            rec["system"] = draw(st.sampled_from(["wide", "wide2"]))
            rec["completions"] = {f"k{i}": float(i % 5) for i in range(n)}
        elif kind == "duplicate" and out:
            rec = dict(draw(st.sampled_from(out)))
        elif kind == "overlap" and out:
            rec = dict(draw(st.sampled_from(out)))
            if isinstance(rec.get("end"), float) and isinstance(rec.get("window_s"), float):
                rec["end"] += rec["window_s"] * draw(st.sampled_from([0.5, -0.5, 0.001]))
        elif kind == "late":
            rec["end"] = _BASE_END - draw(st.sampled_from([5.0, 3600.0, 86_400.0 * 30]))
        elif kind == "future":
            rec["end"] = draw(st.sampled_from([4_102_444_800.0, 9.2e9, 9.3e9, 1e11,
                                               "2100-01-01T00:00:00Z",
                                               "9999-12-31T23:59:59+14:00"]))
        elif kind == "odd_end":
            rec["end"] = draw(st.sampled_from(["", "2026-11-20T10:00:05", "yesterday",
                                               "2026-13-01T00:00:00Z", "0001-01-01T00:00:00Z",
                                               "1969-12-31T23:59:59Z", " 2026-11-20T10:00Z",
                                               "2026-11-20T10:00:05.123456789Z"]))
        elif kind == "odd_completion":
            cls = draw(st.sampled_from(CLASSES))
            rec["completions"] = {**(rec.get("completions") or {}),
                                  cls: draw(ODD_NUMBERS | WRONG_TYPES)}
        elif kind == "nested_value":
            rec[draw(st.sampled_from(FIELDS))] = json.loads("[" * 50 + "]" * 50)
        out.append(rec)
    return out


SERIALISE = ("plain", "plain", "plain", "plain", "plain", "plain", "unicode", "bom",
             "invalid_utf8", "truncated", "nested", "nan_text", "garbage")


@st.composite
def as_bytes(draw: Any, records: list[dict[str, Any]]) -> list[bytes]:
    """Each record as the bytes of a line of a file or a Kafka value, some of them spoiled."""
    out: list[bytes] = []
    for rec in records:
        kind = draw(st.sampled_from(SERIALISE))
        if kind == "unicode":             # raw non-ASCII, lone surrogates as their 3 bytes
            data = json.dumps(rec, ensure_ascii=False).encode("utf-8", "surrogatepass")
        else:
            data = json.dumps(rec).encode()
        if kind == "bom":
            data = b"\xef\xbb\xbf" + data
        elif kind == "invalid_utf8":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80",
                                                     b"\x80\x80", b"\xf4\x90\x80\x80"])) \
                + data[at:]
        elif kind == "truncated":
            data = data[:draw(st.integers(0, max(len(data) - 1, 0)))]
        elif kind == "nested":
            depth = draw(st.sampled_from([10, 1000, 100_000]))
            data = b'{"a": ' * depth
        elif kind == "nan_text":
            data = data.replace(b'"utilization": ', b'"utilization": NaN, "x": ', 1)
        elif kind == "garbage":
            data = draw(st.binary(max_size=40))
        out.append(data)
    return out


@st.composite
def record_batches(draw: Any) -> list[dict[str, Any]]:
    n = draw(st.integers(*BATCH))
    return draw(mutated(draw(valid_records(n))))


@st.composite
def byte_batches(draw: Any) -> list[bytes]:
    return draw(as_bytes(draw(record_batches())))


#: how many generated records each test drove (checked against MIN_RECORDS at the end)
SEEN: dict[str, int] = {}


def _count(test: str, n: int) -> None:
    SEEN[test] = SEEN.get(test, 0) + n


# -- the embedded shell -----------------------------------------------------------------------


@FUZZ
@given(batches=st.lists(record_batches() | byte_batches(), min_size=1, max_size=2),
       split=st.integers(1, 50))
def test_fuzz_embedded_core_on_mappings_and_bytes(batches, split):
    """``Pipeline.process_many`` (``perfcast run``'s core) over mappings and bytes, in chunks
    of ``split`` records: the invariant, and the same outputs as record by record would give
    (one batch at once vs. chunks)."""
    whole, chunked = Pipeline(FUZZ_CONFIG), Pipeline(FUZZ_CONFIG)
    for batch in batches:
        out, replays = process(whole, batch)
        check_outputs(out, len(batch), replays)
        parts = Outputs()
        for i in range(0, len(batch), split):
            part, replays = process(chunked, batch[i:i + split])
            check_outputs(part, len(batch[i:i + split]), replays)
            parts.extend(part)
        assert _json(parts.estimates) == _json(out.estimates)
        assert _json(parts.predictions) == _json(out.predictions)
        assert [d["reason"] for d in parts.deadletter] == [d["reason"] for d in out.deadletter]
        _count("embedded", len(batch))
    check_outputs(whole.finish(), 0)


# -- the worker's core step -------------------------------------------------------------------


@FUZZ
@given(batch=byte_batches(), sizes=st.lists(st.integers(1, 60), min_size=1, max_size=8),
       restore=st.lists(st.booleans(), min_size=8, max_size=8))
def test_fuzz_worker_core_step(batch, sizes, restore):
    """The worker's batch step (:class:`streams.kafka.core_process.Step`, what the core process
    runs per batch) over the bytes Kafka holds, in batches of ``sizes``, restoring every
    system from the table where ``restore`` says (a rebalance): the invariant, and exactly
    the embedded core's estimates, predictions, alerts and dead-letter reasons."""
    step = Step(FUZZ_CONFIG)
    decoded: dict[str, list[Any]] = {t: [] for t in OUTPUT_TOPICS}
    i = b = 0
    while i < len(batch):
        size = sizes[b % len(sizes)]
        values = batch[i:i + size]
        table = dict(step.mirror.data) if restore[b % len(restore)] and b else None
        result = step(values, [b % 3] * len(values), 1.0e9, True, table)
        assert result.windows == len(values)
        for topic, records in check_batch_result(result, len(values)).items():
            decoded[topic] += records
        i += size
        b += 1
    _count("worker", len(batch))
    reference = Pipeline(FUZZ_CONFIG).process_many(batch)
    for topic in ("estimates", "predictions", "alerts"):
        assert decoded[topic] == _json(getattr(reference, topic)), topic
    assert [d["reason"] for d in decoded["deadletter"]] == \
        [d["reason"] for d in reference.deadletter]


# -- perfcast produce -------------------------------------------------------------------------


class _Producer:
    """Stands in for kafka-python's producer: keeps what is sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes]] = []

    def send(self, topic: str, key: bytes | None = None, value: bytes = b"") -> None:
        assert isinstance(value, bytes) and (key is None or isinstance(key, bytes))
        self.sent.append((topic, key, value))

    def flush(self) -> None:
        return None


@FUZZ
@given(batch=byte_batches(), as_text=st.booleans())
def test_fuzz_produce_sends_every_line_for_the_worker_to_judge(batch, as_text, tmp_path_factory):
    """``perfcast produce`` over a file of generated lines (``read_jsonl``, as the CLI reads
    it) and over text records: every line is sent (nothing that is bytes or text can fail to
    be), keyed by its system when one can be read; what it sent, the worker's core
    processes or dead-letters, line for line."""
    path = tmp_path_factory.mktemp("produce") / "trace.jsonl"
    # one record per line: a record's own line breaks would split it (a file cannot hold them)
    lines = [line.replace(b"\n", b" ").replace(b"\r", b" ") for line in batch]
    path.write_bytes(b"\n".join(lines) + b"\n")
    read = list(read_jsonl(path))
    records: list[Any] = [r.decode("utf-8", "surrogateescape") for r in read] if as_text \
        else read
    producer = _Producer()
    from streams.core.config import KafkaSettings
    stats = produce(records, KafkaSettings(), producer=producer)
    assert (stats.sent, stats.skipped, stats.failed) == (len(read), 0, 0)
    for _, key, value in producer.sent:
        if key is not None:
            assert key == record_key(value)
            key.decode("utf-8")
    sent = [v for _, _, v in producer.sent]
    out, replays = process(Pipeline(FUZZ_CONFIG), sent)
    check_outputs(out, len(sent), replays)
    _count("produce", len(batch))


def test_each_shell_saw_enough_generated_records():
    """Runs after the fuzz tests above (file order): each drove at least MIN_RECORDS."""
    if len(SEEN) < 3:
        unavailable("the fuzz tests did not all run in this session",
                    "CI runs the whole file, so each shell must have been fuzzed")
    print(f"generated records per path: {SEEN}")
    for shell in ("embedded", "worker", "produce"):
        assert SEEN[shell] >= MIN_RECORDS, (shell, SEEN[shell])


# -- the configuration ------------------------------------------------------------------------

#: values across and beyond every setting's range
CONFIG_VALUES = st.one_of(
    st.sampled_from([0, 1, -1, 16, 1e-300, 1e308, 10**12, 2**63, math.inf, -math.inf, math.nan,
                     0.5, 59.9, 86_400, 86_401, 604_800, 1_000_001]),
    st.floats(), st.integers(-10, 10**7), st.booleans(), st.text(max_size=4))
SETTINGS = {"defaults": ["solve_interval_s", "solve_offset_s", "horizon_s", "trend_window_s",
                         "think_time_s", "idc_threshold", "map_max_population",
                         "per_job_max_cores", "history",
                         "regression_windows", "dedup_windows", "model_error_threshold",
                         "alert_fire_after", "alert_resolve_after", "utilization_tolerance"],
            "limits": ["max_systems", "max_tiers", "max_classes", "idle_system_s"],
            "plausibility": ["max_ahead_s", "confirm_windows", "overlap_tolerance",
                             "jump_factor", "recent_windows", "users_floor", "rate_floor",
                             "min_demand_s", "utilization_resolution"]}


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)


@st.composite
def config_files(draw: Any) -> str:
    sections: dict[str, dict[str, Any]] = {}
    for _ in range(draw(st.integers(1, 4))):
        section = draw(st.sampled_from(sorted(SETTINGS)))
        sections.setdefault(section, {})[draw(st.sampled_from(SETTINGS[section]))] = \
            draw(CONFIG_VALUES)
    return "".join(f"[{s}]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in body.items())
                   for s, body in sections.items())


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck), print_blob=True,
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(text=config_files(), batch=record_batches())
def test_fuzz_config_is_refused_naming_the_key_or_runs_both_shells(text, batch,
                                                                  tmp_path_factory):
    """A configuration is refused naming its key (``ConfigError``), or both shells run a
    batch under it with the invariant."""
    path = tmp_path_factory.mktemp("config") / "perfcast.toml"
    path.write_text(text, encoding="utf-8")
    try:
        config = load_config(path, env={})
    except ConfigError as err:
        # the key, or (a lone surrogate in a string) the file is not valid TOML
        assert re.match(r"(defaults|limits|plausibility)\.\w+: |config: .* is not valid TOML", str(err)), \
            str(err)
        return
    run_both(config, [json.dumps(r).encode() for r in batch])


def run_both(config: Config, values: list[bytes]) -> tuple[Outputs, dict[str, list[Any]]]:
    """``values`` through the embedded core (then its final solve) and the worker's step."""
    pipeline = Pipeline(config)
    out, replays = process(pipeline, values)
    check_outputs(out, len(values), replays)
    check_outputs(pipeline.finish(), 0)
    result = Step(config)(values, [0] * len(values), 1.0e9, True, None)
    decoded = check_batch_result(result, len(values))
    assert decoded["estimates"] == _json(out.estimates)
    return out, decoded


# -- the corpus -------------------------------------------------------------------------------


def _bytes(line: str | bytes) -> bytes:
    return line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_corpus_through_both_shells(case: Case):
    """Each hostile case through the embedded core and the worker's step: its expected fate,
    the invariant, every ordinary window before and after it processed."""
    values = [_bytes(line) for line in case.lines + case.after]
    out, decoded = run_both(Config(), values)
    hostile = len(case.lines) - 1
    dead = out.deadletter
    if case.field == ANY:
        assert len(dead) <= 1
    elif case.field is None:
        assert dead == []
        if case.flag:
            assert out.estimates[hostile]["flags"] == [case.flag]
    else:
        assert len(dead) == 1 and dead[0]["field"] == case.field, dead
        assert case.reason in dead[0]["reason"], dead[0]["reason"]
        assert len(msgspec.json.encode(dead[0])) < 64 * 1024
        assert decoded["deadletter"][0]["field"] == case.field
    assert len(out.estimates) == len(values) - len(dead)


def test_corpus_through_perfcast_run_as_one_file(tmp_path):
    """Every corpus line in one JSON-lines file through the embedded runner (``read_jsonl``,
    ``run_embedded``: the SQLite store and the JSON-lines outputs), and through
    ``perfcast produce``: each record processed or dead-lettered."""
    values = [_bytes(line) for case in CORPUS for line in case.lines + case.after]
    source = tmp_path / "corpus.jsonl"
    source.write_bytes(b"\n".join(values) + b"\n")
    read = list(read_jsonl(source))
    assert len(read) == len(values)
    summary = run_embedded(read, Config(), tmp_path / "out")
    assert summary.records == len(values)
    assert summary.estimates + summary.deadletter + summary.replays == len(values)
    for name in ("estimates", "predictions", "alerts", "deadletter"):
        for line in (tmp_path / "out" / f"{name}.jsonl").read_text("utf-8").splitlines():
            _finite(json.loads(line, parse_constant=_refuse), name)
    producer = _Producer()
    from streams.core.config import KafkaSettings
    stats = produce(read_jsonl(source), KafkaSettings(), producer=producer)
    assert stats.sent == len(values) and stats.skipped == 0


def _refuse(token: str) -> None:
    raise AssertionError(f"{token} in an output file")


@pytest.mark.parametrize("case", CONFIGS, ids=[c.name for c in CONFIGS])
def test_corpus_configs_are_refused_naming_the_key(case, tmp_path):
    path = tmp_path / "perfcast.toml"
    path.write_text(case.toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(case.key)):
        load_config(path, env={})


@pytest.mark.parametrize("case", [c for c in CORPUS if c.after],
                         ids=[c.name for c in CORPUS if c.after])
def test_corpus_the_system_is_still_solved_after_a_hostile_window(case: Case):
    """The ordinary windows after a hostile one are still solved: one record does not
    silently stop its system's predictions."""
    pipeline = Pipeline()
    pipeline.process_many([_bytes(line) for line in case.lines])
    after = pipeline.process_many([_bytes(line) for line in case.after])
    assert after.predictions, "no solve after the hostile window"
