"""streams.kafka.core_process: the worker's batch step gives the embedded pipeline's outputs, encoded;
its state round-trips through the worker's table; in a child process it gives exactly what it
gives in the event loop, and a lost child is an error, not a silent gap."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from streams.kafka.core_process import (OUTPUT_TOPICS, CoreProcess, CoreProcessError, InlineCore,
                                  Step, run_batch)
from streams.cli.demo import DemoScenario, demo_config, demo_records
from streams.sinks.influx import lines
from streams.engine.pipeline import Pipeline
from streams.engine.system import Outputs
from streams.engine.table_pipeline import TableBackedPipeline

SCENARIO = DemoScenario(duration_s=600, steady_s=300, users_start=20, users_end=40)


class Table:
    """The worker's Faust table as the runners see it (``data``)."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}


@pytest.fixture(scope="module")
def config():
    return demo_config(SCENARIO)


@pytest.fixture(scope="module")
def raw():
    """The demo's 240 windows as the worker receives them, plus two bad records."""
    values = [json.dumps(r).encode() for r in demo_records(SCENARIO)]
    return values[:100] + [b"{not json", b'{"system": "demo"}'] + values[100:]


def batches(values, size):
    return [values[i:i + size] for i in range(0, len(values), size)]


def decoded(results, topic):
    return [json.loads(v) for r in results for _, v in r.records[topic]]


def test_run_batch_encodes_what_the_embedded_pipeline_produces(config, raw):
    reference = Pipeline(config).process_many(raw)
    core = TableBackedPipeline(config, Table())
    results = [run_batch(core, b, [0] * len(b), 1.0e9, persist=i % 3 == 0)
               for i, b in enumerate(batches(raw, 25))]
    for topic in OUTPUT_TOPICS:
        assert decoded(results, topic) == [r.to_record() for r in getattr(reference, topic)]
        keys = [k for r in results for k, _ in r.records[topic]]
        assert keys == [r["system"].encode() if isinstance(r.get("system"), str) else None
                        for r in getattr(reference, topic)]
    # per batch, predictions then alerts
    assert sorted(x for r in results for x in r.urgent) == sorted(lines(
        Outputs(predictions=reference.predictions, alerts=reference.alerts)))
    assert sorted(x for r in results for x in r.lines) == sorted(lines(
        Outputs(estimates=reference.estimates, deadletter=reference.deadletter),
        deadletter_time=1.0e9))
    assert sum(r.windows for r in results) == len(raw)
    assert reference.predictions and reference.deadletter            # the test covers them


def test_only_a_persisting_batch_snapshots_and_it_covers_every_batch_since(config, raw):
    core = TableBackedPipeline(config, Table())
    first = run_batch(core, raw[:30], [2] * 30, 0.0, persist=False)
    second = run_batch(core, raw[30:60], [2] * 30, 0.0, persist=False)
    assert first.changelog == [] and second.changelog == []
    snapshot = run_batch(core, [], [], 0.0, persist=True)             # a snapshot alone
    assert snapshot.windows == 0 and all(not snapshot.records[t] for t in OUTPUT_TOPICS)
    keys = {key for _, key, _ in snapshot.changelog}
    assert b"shop" in keys and all(p == 2 for p, _, _ in snapshot.changelog)
    # restored from that changelog alone, the state goes on as if never interrupted
    table = Table()
    table.data.update({key: value for _, key, value in snapshot.changelog})
    restored = Step(config)
    went_on = restored(raw[60:], [2] * len(raw[60:]), 0.0, False, dict(table.data))
    straight = run_batch(core, raw[60:], [2] * len(raw[60:]), 0.0, persist=False)
    assert went_on.records == straight.records


async def _through(runner, raw, size=40, forget_after=None):
    await runner.start()
    results = []
    try:
        for i, b in enumerate(batches(raw, size)):
            if forget_after is not None and i == forget_after:
                runner.forget()
            result = await runner.run(b, [0] * len(b), 5.0)
            for _, key, value in result.changelog:     # what the worker does on delivery
                runner.table.data[key] = value
            results.append(result)
    finally:
        await runner.stop()
    return results


@pytest.mark.slow
def test_the_child_process_gives_what_the_event_loop_gives(config, raw):
    inline = asyncio.run(_through(InlineCore(config, Table()), raw))
    child = asyncio.run(_through(CoreProcess(config, Table()), raw))
    for a, b in zip(inline, child, strict=True):
        assert a.records == b.records and a.changelog == b.changelog
        assert a.urgent == b.urgent and a.lines == b.lines


@pytest.mark.slow
def test_after_a_revocation_the_core_starts_over_from_the_table(config, raw):
    """``forget`` drops the systems in memory; the next batch restores them from the worker's
    table -- here the table holds every delivered changelog, so nothing changes."""
    straight = asyncio.run(_through(InlineCore(config, Table()), raw))
    for runner in (InlineCore(config, Table()), CoreProcess(config, Table())):
        again = asyncio.run(_through(runner, raw, forget_after=3))
        assert [r.records for r in again] == [r.records for r in straight]


def test_a_revocation_with_an_empty_table_really_starts_over(config, raw):
    """Control for the test above: without the delivered changelog in the table, a system
    restored after ``forget`` is new again (its windows are not duplicates)."""
    async def run():
        runner = InlineCore(config, Table())
        first = await runner.run(raw[:40], [0] * 40, 5.0)
        runner.forget()
        again = await runner.run(raw[:40], [0] * 40, 5.0)
        return first, again

    first, again = asyncio.run(run())
    assert first.records == again.records


@pytest.mark.slow
def test_a_child_that_dies_fails_the_batch_and_a_new_child_takes_the_table(config, raw):
    async def run():
        table = Table()
        runner = CoreProcess(config, table)
        await runner.start()
        ok = await runner.run(raw[:60], [0] * 60, 5.0)
        for _, key, value in ok.changelog:
            table.data[key] = value
        os.kill(runner.process.pid, signal.SIGKILL)
        with pytest.raises(CoreProcessError, match="exited"):
            await runner.run(raw[60:90], [0] * 30, 5.0)
        # the next batch starts a new child, which restores the systems from the table
        later = await runner.run(raw[60:90], [0] * 30, 5.0)
        await runner.stop()
        return later

    later = asyncio.run(run())
    reference = Pipeline(config)
    reference.process_many(raw[:60])
    want = reference.process_many(raw[60:90])
    assert decoded([later], "estimates") == [e.to_record() for e in want.estimates]


@pytest.mark.slow
def test_a_failing_batch_is_reported_with_the_childs_traceback(config):
    async def run():
        runner = CoreProcess(config, Table())
        await runner.start()
        try:
            return await runner.run([b"{}"], [0], "not a time")   # its dead letter
        finally:
            await runner.stop()

    with pytest.raises(CoreProcessError, match="Traceback"):
        asyncio.run(run())
