"""Limits on what one pipeline keeps (``[limits]``): systems (with eviction
of idle ones), tiers per system, classes per tier. A window beyond a limit is dead-lettered
naming the limit; everything else is processed -- alike in the embedded shell and the
worker's table-backed core."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from streams.core.config import Config, ConfigError, Limits, load_config
from streams.engine.pipeline import Pipeline
from streams.engine.table_pipeline import TableBackedPipeline, unpack

T0 = 1_795_168_800.0


class _Table:
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}


def _window(system: str, end: float, tier: str = "app", classes: int = 2, **extra) -> bytes:
    return json.dumps({"system": system, "tier": tier, "end": end, "window_s": 5.0,
                       "utilization": 0.4,
                       "completions": {f"c{k}": 10.0 + k for k in range(classes)},
                       **extra}).encode()


def _config(**limits) -> Config:
    return Config(limits=Limits(**limits))


def _both(config: Config):
    return [Pipeline(config), TableBackedPipeline(config, _Table())]


def _run(core, batches):
    outs = []
    for batch in batches:
        if isinstance(core, TableBackedPipeline):
            outs.append(core.process_batch(batch, [0] * len(batch)))
            core.persist()
        else:
            outs.append(core.process_many(batch))
    return outs


def test_system_limit_dead_letters_then_evicts_idle_systems():
    """10 systems kept at most, idle after 3,600 s: an 11th system is dead-lettered while none
    is idle; once the stream is 3,600 s further and only systems 0-4 kept sending, the next new
    system evicts the five idle ones and is admitted. Dead-lettered with its reason,
    everything else processed, the same in both shells."""
    config = _config(max_systems=10, idle_system_s=3600.0)
    first = [_window(f"s{i}", T0) for i in range(10)]
    refused = [_window("new", T0 + 5)]
    later = [_window(f"s{i}", T0 + 4000) for i in range(5)]
    again = [_window("new", T0 + 4005), _window("other", T0 + 4005)]
    results = []
    for core in _both(config):
        outs = _run(core, [first, refused, later, again])
        assert [len(o.estimates) for o in outs] == [10, 0, 5, 2]
        dead = outs[1].deadletter
        assert len(dead) == 1 and dead[0]["field"] == "system"
        assert dead[0]["reason"].startswith("system limit: 10 systems kept, none idle for "
                                            "3600 s") and "limits.max_systems = 10" in \
            dead[0]["reason"]
        assert dead[0]["system"] == "new" and dead[0]["record"]["end"] == T0 + 5
        assert core.evicted == 5
        assert sorted(core.systems) == sorted([f"s{i}" for i in range(5)] + ["new", "other"])
        results.append([(o.estimates, o.deadletter) for o in outs])
    assert results[0] == results[1]


def test_the_worker_deletes_an_evicted_system_from_its_table():
    """An evicted system's header leaves the table (a tombstone in the changelog), so after a
    rebalance it is not restored: it starts afresh as in the embedded shell."""
    config = _config(max_systems=2, idle_system_s=60.0)
    core = TableBackedPipeline(config, _Table())
    core.process_batch([_window("a", T0), _window("b", T0)], [0, 1])
    core.persist()
    assert b"a" in core.table.data and b"b" in core.table.data
    core.process_batch([_window("b", T0 + 100), _window("c", T0 + 100)], [1, 0])
    writes = core.persist()
    assert (0, b"a", None) in writes and b"a" not in core.table.data
    assert unpack(core.table.data[b"c"])["system"] == "c"
    core.forget()
    out = core.process_batch([_window("a", T0 + 200)], [0])
    assert len(out.estimates) == 1 and out.estimates[0]["seq"] == 1     # afresh


def test_tier_limit():
    """Two tiers per system: a third tier's window is dead-lettered naming the limit; the two
    tiers and other systems go on."""
    for core in _both(_config(max_tiers=2)):
        outs = _run(core, [[_window("s", T0, "web"), _window("s", T0, "db"),
                            _window("s", T0, "cache"), _window("t", T0, "cache"),
                            _window("s", T0 + 5, "web")]])
        out = outs[0]
        assert [(e["system"], e["tier"]) for e in out.estimates] == [
            ("s", "web"), ("s", "db"), ("t", "cache"), ("s", "web")]
        assert len(out.deadletter) == 1 and out.deadletter[0]["field"] == "tier"
        assert out.deadletter[0]["reason"] == ("tier limit: system 's' has 2 tiers "
                                               "(limits.max_tiers = 2)")


def test_class_limit_counts_classes_admitted_in_the_same_batch():
    """Five classes per tier: a window with six is dead-lettered; of the windows of one batch
    that add classes to the tier, those that would pass five -- counting the classes of the
    windows admitted before them in the batch, not those of a duplicate -- are dead-lettered;
    the others go on."""
    for core in _both(_config(max_classes=5)):
        out = _run(core, [[_window("s", T0, classes=6),
                           _window("s", T0 + 5, classes=3),
                           _window("s", T0 + 10, completions={"x": 1.0, "y": 1.0, "z": 1.0}),
                           _window("s", T0 + 5, completions={"u": 1.0, "v": 1.0}),
                           _window("s", T0 + 15, completions={"c0": 1.0, "x": 2.0}),
                           _window("s", T0 + 20, completions={"p": 1.0, "q": 2.0}),
                           _window("s", T0 + 25, classes=2)]])[0]
        assert [e["end"] for e in out.estimates] == [T0 + 5, T0 + 15, T0 + 25]
        reasons = [d["reason"] for d in out.deadletter]
        assert reasons[0] == ("class limit: tier 'app' has 0 classes and the window adds 6 "
                              "(limits.max_classes = 5)")
        assert reasons[1] == ("class limit: tier 'app' has 3 classes and the window adds 3 "
                              "(limits.max_classes = 5)")
        # a duplicate's classes (u, v) do not count: c0 + x is admitted after it
        assert reasons[2].startswith("duplicate")
        assert reasons[3] == ("class limit: tier 'app' has 4 classes and the window adds 2 "
                              "(limits.max_classes = 5)")
        assert len(reasons) == 4
        assert [d["field"] for d in out.deadletter] == ["completions", "completions", "end",
                                                        "completions"]


def test_limits_from_the_configuration(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[limits]\nmax_systems = 500\nmax_tiers = 8\nmax_classes = 40\n"
                    "idle_system_s = 600\n")
    assert load_config(path, env={}).limits == Limits(500, 8, 40, 600.0)
    assert load_config(None, env={}).limits == Limits()
    for text, key in (("max_systems = 0", "limits.max_systems"),
                      ("max_classes = 1e9", "limits.max_classes"),
                      ("idle_system_s = -1", "limits.idle_system_s"),
                      ("max_tierz = 3", "limits.max_tierz")):
        path.write_text(f"[limits]\n{text}\n")
        with pytest.raises(ConfigError, match=key):
            load_config(path, env={})


def test_default_limits_keep_a_plain_stream_as_it_was():
    """The defaults (100,000 systems, 64 tiers, 256 classes) leave an ordinary stream alone."""
    base = [_window(f"s{i}", T0 + 5 * k, classes=14) for k in range(3) for i in range(50)]
    a = Pipeline(Config()).process_many(base)
    b = Pipeline(replace(Config(), limits=Limits(10**7, 4096, 10_000))).process_many(base)
    assert a.estimates == b.estimates and a.deadletter == b.deadletter == []


def test_a_window_from_the_far_future_does_not_make_every_system_idle():
    """One system sends a window dated 2100: the stream's clock (all but the newest 1% of
    systems) stays where the others are, so at the system limit the active systems are kept
    and the new system is dead-lettered with its reason; the rest processed."""
    config = _config(max_systems=200, idle_system_s=3600.0)
    for core in _both(config):
        first = [_window(f"s{i}", T0) for i in range(199)] + [_window("future", 4.1e9)]
        outs = _run(core, [first, [_window("new", T0 + 5)]])
        assert len(outs[0].estimates) == 200 and core.evicted == 0
        assert [d["reason"].split(":")[0] for d in outs[1].deadletter] == ["system limit"]
        assert len(core.systems) == 200


def test_perfcast_run_counts_evictions_and_limit_dead_letters(tmp_path):
    """``perfcast run`` with ``[limits]``: the console counts the evicted systems and the
    dead letters by reason; every other window processed."""
    from typer.testing import CliRunner

    from streams.cli.commands import app

    config = tmp_path / "c.toml"
    config.write_text("[limits]\nmax_systems = 3\nidle_system_s = 60\n")
    lines = [_window(f"s{i}", T0) for i in range(3)] + [_window("x", T0 + 5)] \
        + [_window("s0", T0 + 100), _window("y", T0 + 100)]
    source = tmp_path / "trace.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    result = CliRunner().invoke(app, ["run", "--source", str(source), "--config", str(config),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "2 idle systems evicted at the system limit" in result.output
    assert "dead letters by reason: 1 x system: system limit" in result.output
    estimates = (tmp_path / "out" / "estimates.jsonl").read_text().splitlines()
    assert len(estimates) == 5


def test_evictions_do_not_depend_on_batch_boundaries():
    """Evictions at the system limit give the same estimates, predictions and dead letters
    whether the trace comes in one batch, record by record, or through the worker's
    table-backed core in batches of 7 -- a system evicted in the middle of a batch still has
    its earlier windows of that batch applied, and one that comes back starts afresh."""
    config = _config(max_systems=4, idle_system_s=60.0)
    trace = []
    for k in range(60):
        end = T0 + 5 * k
        active = [f"a{j}" for j in range(3)]
        active += [name for name, lo, hi in (("late0", 0, 10), ("late1", 20, 30),
                                             ("late2", 40, 45), ("late0", 56, 60))
                   if lo <= k < hi]
        trace += [_window(name, end) for name in active]

    def collect(outs):
        return ([e for o in outs for e in o.estimates], [p for o in outs for p in o.predictions],
                [d for o in outs for d in o.deadletter])

    one = Pipeline(config)
    whole = collect([one.process_many(trace), one.finish()])
    single = Pipeline(config)
    by_record = collect([single.process_many([r]) for r in trace] + [single.finish()])
    table = TableBackedPipeline(config, _Table())
    outs = _run(table, [trace[i:i + 7] for i in range(0, len(trace), 7)])
    worker = collect(outs + [table.finish()])
    assert whole == by_record == worker
    assert one.evicted == single.evicted == table.evicted >= 2
    estimates, _, dead = whole
    assert len(estimates) + len(dead) == len(trace)
    assert all(d["reason"].startswith("system limit") for d in dead)
    # late1 came after late0 went idle: admitted (late0 evicted), counted from 1; late0 came
    # back after its eviction (in the same batch, for the one-batch run): afresh, from 1
    assert [e["seq"] for e in estimates if e["system"] == "late1"][:1] == [1]
    assert [e["seq"] for e in estimates if e["system"] == "late0"] == [*range(1, 11),
                                                                        *range(1, 5)]
    assert one.evicted == 3


def test_a_rejected_windows_dead_letter_quotes_a_bounded_record():
    """Found by tests/test_fuzz.py: a window of 10,000 classes beyond the class limit was
    dead-lettered with its whole record (130 KB; with long names over Kafka's 1 MB). The
    record quotes at most 64 classes per map and says so."""
    from streams.engine.admission import REJECTED_CLASSES
    classes = {f"{'c' * 190}{i:05d}": 1 for i in range(10_000)}
    rec = {"system": "wide", "tier": "t", "end": 100.0, "window_s": 5.0, "utilization": 0.5,
           "completions": classes, "response_time_s": {c: 0.1 for c in classes}}
    (dead,) = Pipeline().process(json.dumps(rec)).deadletter
    assert dead["field"] == "completions" and "class limit" in dead["reason"]
    assert len(dead["record"]["completions"]) == REJECTED_CLASSES
    assert len(dead["record"]["response_time_s"]) == REJECTED_CLASSES
    assert dead["truncated"] == ["record.completions: 64 of 10000 classes shown",
                                 "record.response_time_s: 64 of 10000 classes shown"]
    assert len(json.dumps(dead.to_record())) < 64 * 1024
