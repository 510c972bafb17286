"""streams.kafka.faust_adapter against the faust-streaming, aiokafka and mode installed here (real
classes and objects, no mocks, no broker: an app whose broker is never contacted, an in-memory
channel): every private attribute or method the adapter uses exists with the kind and signature
it expects and does what the worker relies on, so an upgrade that removes or changes one fails
here naming it; and the version check refuses a version outside the supported ranges with a
message naming the package, the version and the range."""

from __future__ import annotations

import asyncio
import inspect
import re
import tomllib
from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.consumer.fetcher import Fetcher
from faust.transport.consumer import Consumer as FaustConsumer
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from mode import Service
from typer.testing import CliRunner

from streams.kafka import faust_adapter as fa
from streams.kafka.batching import acknowledge, adaptive_batches
from streams.core.config import Config
from streams.kafka.delivery import deliver_directly

ROOT = Path(__file__).resolve().parents[1]
INSTALLED = fa.installed_versions()


def require(obj: Any, name: str, user: str) -> Any:
    """``obj.name``; a missing one fails the test naming it, its user and the versions."""
    if not hasattr(obj, name):
        owner = obj.__qualname__ if isinstance(obj, type) else type(obj).__qualname__
        pytest.fail(f"{owner}.{name} is gone: streams.kafka.faust_adapter.{user} relies on it "
                    f"(installed: {INSTALLED})")
    return getattr(obj, name)


def offline_app(name: str = "adapter-probe") -> faust.App:
    """A real Faust app whose broker is never contacted (nothing here starts it)."""
    return faust.App(name, broker="kafka://127.0.0.1:1", store="memory://", web_enabled=False)


def squeezed(obj: Any) -> str:
    return re.sub(r"\s+", "", inspect.getsource(obj))


# -- versions ----------------------------------------------------------------------------------

def test_the_installed_versions_are_supported():
    assert fa.unsupported_versions(INSTALLED) == []
    fa.check_versions()


def test_pyproject_pins_the_supported_ranges():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for name, (low, high) in fa.SUPPORTED.items():
        assert f"{name}>={low},<{high}" in deps, (name, deps)
    assert fa.SUPPORTED["faust-streaming"][0] == "0.15.3"


@pytest.mark.parametrize("name, version", [
    ("faust-streaming", "0.16.0"), ("faust-streaming", "0.15.2"), ("faust-streaming", "1.0"),
    ("faust-streaming", None), ("faust-streaming", "dev"), ("aiokafka", "0.13.0"),
    ("aiokafka", "0.15.0"), ("mode-streaming", "0.8.0"), ("mode-streaming", "0.6.9")])
def test_a_version_out_of_range_is_refused_naming_package_version_and_range(name, version):
    low, high = fa.SUPPORTED[name]
    with pytest.raises(fa.UnsupportedFramework) as err:
        fa.check_versions({**INSTALLED, name: version})
    message = str(err.value)
    shown = "not installed" if version is None else f"{version!r} is installed"
    assert f"{name}: {shown}, perfcast's worker supports >={low},<{high}" in message
    assert all(other not in message for other in fa.SUPPORTED if other != name)


@pytest.mark.parametrize("version", ["0.15.3", "0.15.9", "0.15.3.post1", " 0.15.4 "])
def test_versions_within_the_range_pass(version):
    fa.check_versions({**INSTALLED, "faust-streaming": version})


def _above_installed(name: str) -> tuple[str, str]:
    """A supported range that starts just above the installed version of ``name``."""
    release = ".".join(str(p) for p in fa._release(INSTALLED[name]))
    return f"{release}.1", "999"


def test_the_worker_is_not_built_on_an_unsupported_version(monkeypatch):
    """The real installed aiokafka, with the supported range moved above it."""
    from streams.kafka.worker import build_app

    monkeypatch.setattr(fa, "SUPPORTED", {**fa.SUPPORTED,
                                          "aiokafka": _above_installed("aiokafka")})
    with pytest.raises(fa.UnsupportedFramework,
                       match=re.escape(f"aiokafka: {INSTALLED['aiokafka']!r} is installed")):
        build_app(Config(), app_id="adapter-refused", influx=False, core_process=False)


def test_perfcast_worker_ends_with_one_line_on_an_unsupported_version(monkeypatch):
    """Checked before Kafka is contacted: exit code 2, not the unreachable broker's 4."""
    from streams.cli.commands import app

    monkeypatch.setattr(fa, "SUPPORTED", {**fa.SUPPORTED,
                                          "faust-streaming": _above_installed("faust-streaming")})
    result = CliRunner().invoke(app, ["worker", "--bootstrap", "127.0.0.1:1",
                                      "--connect-timeout", "1"])
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"error: unsupported version: faust-streaming: "
                               f"{INSTALLED['faust-streaming']!r} is installed"), result.output


# -- the fetcher's limits (streams.kafka.worker.tune_fetches) ------------------------------------------

def test_set_fetch_limits_reaches_the_fetcher_through_real_faust_and_aiokafka_objects():
    """Faust's consumer -> its thread -> aiokafka's consumer -> its fetcher, each made by the
    installed libraries as a started worker makes them (the broker is never contacted)."""
    async def main() -> tuple[int, int, int, int]:
        app = offline_app()
        thread = require(app.consumer, "_thread", "fetcher_of")
        assert isinstance(thread, AIOKafkaConsumerThread)
        require(thread, "_consumer", "fetcher_of")             # None until the thread starts
        kafka = thread._create_consumer(loop=asyncio.get_running_loop())   # what it starts
        assert isinstance(kafka, AIOKafkaConsumer)
        require(kafka, "_fetcher", "fetcher_of")               # None until aiokafka starts
        fetcher = Fetcher(kafka._client, kafka._subscription,  # as AIOKafkaConsumer.start
                          fetch_min_bytes=kafka._fetch_min_bytes,
                          fetch_max_wait_ms=kafka._fetch_max_wait_ms)
        try:
            before = (require(fetcher, "_fetch_max_wait_ms", "set_fetch_limits"),
                      require(fetcher, "_fetch_min_bytes", "set_fetch_limits"))
            thread._consumer, kafka._fetcher = kafka, fetcher
            assert fa.fetcher_of(app) is fetcher
            fa.set_fetch_limits(app, 50, 16384)
            return (*before, fetcher._fetch_max_wait_ms, fetcher._fetch_min_bytes)
        finally:
            await fetcher.close()
            await kafka._client.close()

    wait, least, tuned_wait, tuned_least = asyncio.run(main())
    # Faust's fixed 1,500 ms and aiokafka's 1 byte: what tune_fetches overrides (if Faust
    # makes the wait a setting, use that instead of the adapter)
    assert (wait, least) == (1500, 1)
    assert (tuned_wait, tuned_least) == (50, 16384)


@pytest.mark.parametrize("attribute", ["_fetch_max_wait_ms", "_fetch_min_bytes"])
def test_the_fetcher_reads_its_limits_when_it_builds_a_fetch(attribute):
    """Setting them on a running fetcher takes effect only if aiokafka reads them per fetch,
    not once in ``__init__``."""
    readers = [name for name, fn in inspect.getmembers(Fetcher, inspect.isfunction)
               if name != "__init__" and f"self.{attribute}" in inspect.getsource(fn)]
    assert readers, f"aiokafka's Fetcher no longer reads {attribute} outside __init__"


def test_set_fetch_limits_names_a_missing_attribute():
    app = offline_app()                        # not started: the thread has no consumer
    with pytest.raises(AttributeError, match="_fetcher"):
        fa.set_fetch_limits(app, 50, 16384)


# -- the stream (streams.kafka.batching) -------------------------------------------------------------

async def _stream_over_a_channel() -> tuple[faust.App, Any, Any]:
    """A real stream over an in-memory channel of a real (offline) app."""
    app = offline_app()
    app.flow_control.resume()                  # a started app's flow control lets events in
    channel = app.channel()
    stream = app.stream(channel)
    return app, channel, stream


async def _until(condition: Any, deadline_s: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not condition():
        assert loop.time() < end, "gave up waiting"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("acks", [True, False])
def test_enable_passive_feeds_the_processors_and_acks_follow_enable_acks(acks):
    """The passive drainer runs the processors on every event, with ``current_event`` set; a
    stream with ``enable_acks = False`` leaves the acknowledgement to its caller."""
    require(faust.Stream, "_enable_passive", "enable_passive")
    params = list(inspect.signature(faust.Stream._enable_passive).parameters)
    assert params[:2] == ["self", "channel"], params

    async def main() -> tuple[list[bytes], list[bool], list[bool]]:
        app, channel, stream = await _stream_over_a_channel()
        seen: list[tuple[bytes, Any]] = []

        async def processor(value: bytes) -> bytes:
            seen.append((value, stream.current_event))
            return value

        stream.enable_acks = acks
        stream.add_processor(processor)
        fa.enable_passive(stream)
        for value in (b"a", b"b", b"next"):
            await channel.send(value=value)
        # the drainer has finished the steps of a and b (acknowledging them or not) once its
        # processors see the event after them
        await _until(lambda: len(seen) == 3)
        steps = seen[:2]
        acked = [event.message.acked for _, event in steps]
        for _, event in steps:
            await stream.ack(event)
        after = [event.message.acked for _, event in steps]
        await stream.stop()
        return [v for v, _ in steps], acked, after

    values, acked, after = asyncio.run(main())
    assert values == [b"a", b"b"]
    assert acked == [acks, acks] and after == [True, True]


def test_adaptive_batches_over_a_real_stream_acknowledge_only_when_told():
    """The batching the worker's agent runs (through the adapter's ``enable_passive`` and
    ``read_offsets``): at most ``max_`` events per batch, in order, none acknowledged before
    :func:`acknowledge`."""
    async def main() -> tuple[list[list[bytes]], list[bool], list[bool]]:
        app, channel, stream = await _stream_over_a_channel()
        for i in range(5):
            await channel.send(value=b"%d" % i)
        batches, events = [], []
        agen = adaptive_batches(stream, 3, 0.05)
        async for batch in agen:
            batches.append([e.value for e in batch])
            events += batch
            if len(events) == 5:
                break
        before = [e.message.acked for e in events]
        await acknowledge(stream, events)
        after = [e.message.acked for e in events]
        await agen.aclose()
        await stream.stop()
        return batches, before, after

    batches, before, after = asyncio.run(main())
    assert [v for b in batches for v in b] == [b"0", b"1", b"2", b"3", b"4"]
    assert all(len(b) <= 3 for b in batches)
    assert not any(before) and all(after)


def test_commit_offsets_is_faust_s_commit_of_given_offsets():
    """``Consumer._commit_offsets(offsets)``: a coroutine function taking the offsets mapping
    (``streams.kafka.handover`` commits what it finished before a revocation returns)."""
    commit = require(FaustConsumer, "_commit_offsets", "commit_offsets")
    assert inspect.iscoroutinefunction(commit)
    params = list(inspect.signature(commit).parameters)
    assert params[:2] == ["self", "offsets"], params


def test_read_offsets_is_faust_s_per_partition_read_offset():
    from faust.types import TP

    async def main() -> Any:
        consumer = offline_app().consumer
        return require(consumer, "_read_offset", "read_offsets"), fa.read_offsets(consumer)

    raw, offsets = asyncio.run(main())
    assert offsets is raw and offsets.get(TP("perfcast.windows", 0)) is None
    assert "set_read_offset(tp,offset)" in squeezed(FaustConsumer._drain_messages)
    assert "self._read_offset.__setitem__" in squeezed(FaustConsumer._drain_messages)
    for public in ("highwater", "assignment"):                   # what backlog reads besides
        assert callable(require(FaustConsumer, public, "read_offsets"))


def test_committed_offsets_is_faust_s_record_per_partition():
    """``Consumer._committed_offset``: a per-partition mapping that Faust's seek to the
    committed offsets at the end of a rebalance fills from the broker (where the offset guard
    starts each partition: ``streams.kafka.worker``)."""
    from faust.types import TP

    async def main() -> Any:
        consumer = offline_app().consumer
        return require(consumer, "_committed_offset", "committed_offsets"), \
            fa.committed_offsets(consumer)

    raw, committed = asyncio.run(main())
    assert committed is raw and committed.get(TP("perfcast.windows", 0)) is None
    seek = squeezed(FaustConsumer.perform_seek)
    assert "self._committed_offset.update(" in seek and "read_offset.update(" in seek


def test_a_topic_without_acks_is_never_committed_by_faust():
    """The worker subscribes its source with ``acks=False`` and commits it itself
    (``streams.kafka.handover``): Faust records an acknowledgement, and adds skipped offsets
    as acknowledged gaps, only for topics whose channels have acks."""
    from streams.kafka.worker import build_app

    app = build_app(Config(), app_id="adapter-acks", influx=False, core_process=False)
    source = [agent.channel for agent in app.agents.values()]
    assert [c.get_topic_name() for c in source] == ["perfcast.windows"]
    assert source[0].acks is False
    ack = squeezed(FaustConsumer.ack)
    assert "ifself.app.topics.acks_enabled_for(message.topic):" in ack
    drain = squeezed(FaustConsumer._drain_messages)
    assert "acks_enabled=acks_enabled_for(message.topic)ifacks_enabled:awaitself._add_gap(" in drain
    assert "ifchannel.acks:self._acking_topics.add(topic)" in \
        squeezed(__import__("faust.transport.conductor", fromlist=["Conductor"]).Conductor)


def test_what_the_offset_guard_relies_on_is_public_faust():
    """The worker waits for ``app.tables.actives_ready`` (set once a rebalance's recovery and
    seek to the committed offsets are done, cleared when the next rebalance starts) and seeks
    a partition back with ``Consumer.seek``, which also resets Faust's read offset so the
    records are handed over again; a partition with no commit starts at
    ``Consumer.earliest_offsets`` (``streams/kafka/continuity.py``)."""
    from faust.tables.manager import TableManager
    from faust.tables.recovery import Recovery

    assert "self.actives_ready=False" in squeezed(TableManager.on_rebalance_start)
    assert "self.actives_ready=True" in squeezed(TableManager.on_actives_ready)
    assert "self.tables.on_actives_ready()" in squeezed(Recovery._resume_streams)
    assert inspect.iscoroutinefunction(FaustConsumer.seek)
    assert inspect.iscoroutinefunction(FaustConsumer.earliest_offsets)   # none committed
    assert "self._read_offset[ensure_TP(partition)]=" in squeezed(FaustConsumer.seek)


# -- delivery (streams.kafka.delivery) ---------------------------------------------------------------

def test_faust_hands_each_record_over_in_the_shape_the_fast_path_recognises():
    """``streams.kafka.delivery`` steps the first of exactly two coroutines: the callback."""
    source = squeezed(FaustConsumer._drain_messages)
    assert "awaitself.wait_first(callback(message),self.suspend_flow.wait())" in source, (
        "Faust's Consumer._drain_messages no longer calls "
        "wait_first(callback(message), self.suspend_flow.wait())")


def test_mode_s_wait_first_races_the_events_stop_events_returns():
    params = inspect.signature(Service.wait_first).parameters
    assert [p.kind for p in params.values()][1:] == [inspect.Parameter.VAR_POSITIONAL,
                                                    inspect.Parameter.KEYWORD_ONLY], params
    assert list(params)[2] == "timeout" and params["timeout"].default is None
    source = squeezed(Service.wait_first)
    assert "stopped=self._stopped" in source and "crashed=self._crashed" in source

    async def main() -> tuple[Any, Any]:
        consumer = offline_app().consumer
        require(consumer, "_stopped", "stop_events")
        require(consumer, "_crashed", "stop_events")
        return fa.stop_events(consumer), consumer

    (stopped, crashed), consumer = asyncio.run(main())
    assert stopped is consumer._stopped and crashed is consumer._crashed
    assert not stopped.is_set() and not crashed.is_set()
    assert isinstance(require(consumer, "suspend_flow", "stop_events"), asyncio.Event)


def test_wait_results_is_what_mode_s_wait_first_returns():
    from mode.services import WaitResults

    assert WaitResults._fields == ("done", "results", "stopped")

    async def main() -> tuple[Any, Any, bool]:
        consumer = offline_app().consumer
        async def callback() -> int:
            return 42

        original = await consumer.wait_first(callback(), consumer.suspend_flow.wait())
        assert deliver_directly(consumer) and fa.has_replaced_wait_first(consumer)
        fast = await consumer.wait_first(callback(), consumer.suspend_flow.wait())
        return original, fast, type(consumer).wait_first is Service.wait_first

    original, fast, inherited = asyncio.run(main())
    assert type(fast) is type(original) is WaitResults
    assert (fast.results, fast.stopped) == (original.results, original.stopped) == ([42], False)
    assert inherited, "Faust's consumer overrides mode's wait_first: recheck streams.kafka.delivery"


# -- the worker (streams.kafka.worker) ---------------------------------------------------------------

def test_disable_spinner_turns_off_the_spinner_faust_s_worker_makes():
    """The effect on logging is tested in tests/test_worker_settings.py."""
    from faust.utils.terminal import Spinner

    app = offline_app()
    worker = faust.Worker(app, loglevel="warning")
    assert isinstance(require(worker, "spinner", "disable_spinner"), Spinner)
    fa.disable_spinner(worker)
    assert worker.spinner is None
    assert "ifself.spinner" in squeezed(faust.Worker._on_startup_end_spinner)


def test_the_worker_s_agent_runs_one_instance():
    """Exactly-once counting and the batches' order assume one agent instance per worker."""
    from streams.kafka.worker import build_app

    app = build_app(Config(), app_id="adapter-agent", influx=False, core_process=False)
    assert [agent.concurrency for agent in app.agents.values()] == [1]


def test_the_module_level_app_declares_the_worker_s_agent_timers_and_table(monkeypatch):
    """``streams.kafka.app`` is the app Faust's command line runs: the same agent (one
    instance, over the windows topic), the same table and the callbacks of one
    :class:`streams.kafka.agent.WindowsAgent`, built from ``PERFCAST_CONFIG`` alone."""
    import importlib
    import sys

    monkeypatch.setenv("PERFCAST_APP_ID", "module-level-probe")
    monkeypatch.delenv("PERFCAST_CONFIG", raising=False)
    monkeypatch.delenv("PERFCAST_INFLUX_URL", raising=False)
    sys.modules.pop("streams.kafka.app", None)
    module = importlib.import_module("streams.kafka.app")
    app = module.app
    assert app.conf.id == "module-level-probe"
    agents = list(app.agents.values())
    assert [a.channel.get_topic_name() for a in agents] == ["perfcast.windows"]
    assert [a.concurrency for a in agents] == [1]
    assert list(app.tables) == ["state"]
    agent = app.perfcast_agent
    assert agent.runner is app.perfcast_runner and agent.stats is app.perfcast_stats
    assert agent.changelog_topic == app.tables["state"].changelog_topic.get_topic_name()
    sys.modules.pop("streams.kafka.app", None)


def test_the_agent_leaves_windows_of_an_earlier_generation_to_be_read_again():
    """A batch may hold windows fetched before a rebalance; only those of the present
    generation are taken (:meth:`streams.kafka.agent.WindowsAgent.current`): the others are
    read again from the committed offset by whoever owns their partition now."""
    from types import SimpleNamespace

    from streams.kafka.agent import WindowsAgent

    table = SimpleNamespace(changelog_topic=SimpleNamespace(get_topic_name=lambda: "c"))
    app = SimpleNamespace(consumer_generation_id=7)
    agent = WindowsAgent(app, None, table, None, None, None, str, batch=10, within_s=0.1)

    def event(generation, offset):
        return SimpleNamespace(message=SimpleNamespace(generation_id=generation, partition=0,
                                                       offset=offset))

    events = [event(6, 1), event(7, 2), event(6, 3), event(7, 4)]
    assert [e.message.offset for e in agent.current(events)] == [2, 4]
    app.consumer_generation_id = 8
    assert agent.current(events) == []
