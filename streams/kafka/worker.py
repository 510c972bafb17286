"""The Faust shell: ``perfcast.windows`` in; estimates, predictions, alerts and dead letters out
to Kafka and InfluxDB; per-system state in changelog-backed tables.

Topology (``docs/pipeline.md``):

* source ``perfcast.windows``, keyed by system, so one system's tiers meet in one worker;
* agent ``process``: takes the windows in batches (:func:`streams.kafka.batching.adaptive_batches`:
  large under a backlog, closed after a few milliseconds when the worker keeps up) and hands
  each to the core, which runs in a child process (:mod:`streams.kafka.core_process`: the core,
  the encoding of its outputs and the snapshot of the state it changed), so that Faust's
  consumer goes on taking windows in while the core computes; then it sends the outputs to
  ``perfcast.estimates`` / ``.predictions`` / ``.alerts`` / ``.deadletter`` (keyed by system;
  one record batch per partition through :class:`OutputProducer`) and to the InfluxDB sink,
  then the state to the table's changelog. While a batch waits for Kafka's acknowledgements
  of these, the core computes the next one (:class:`streams.kafka.batch_flow.BatchFlow`);
* table ``state`` with its changelog topic: per system its state without the window history,
  and its tiers' history in chunks of 16 windows
  (:class:`streams.engine.table_pipeline.TableBackedPipeline`); every entry is written to the
  changelog partition of the system's source partition, so recovery after a rebalance finds
  it;
* timer: flushes the InfluxDB sink every ``flush_interval_s``.
* consumer settings: large polls and fetches (:data:`POLL_RECORDS`, :data:`FETCH_BYTES`), a
  broker-side fetch wait of :data:`FETCH_WAIT_MS` instead of Faust's 1,500 ms, and fetches
  answered once :data:`FETCH_MIN_BYTES` are there (:func:`tune_fetches`);
* delivery: each fetched record reaches the agent's stream without the four asyncio tasks
  Faust's consumer makes per record (:func:`streams.kafka.delivery.deliver_directly`).

Exactly-once counting: per batch (1) the core runs and snapshots the state it changed, (2) the
agent sends the outputs and waits until Kafka has them (and, for a batch with predictions or
alerts, until InfluxDB has those points), (3) it writes the snapshot to the table and its
changelog topic (through the same batching producer) and waits until Kafka has it, and only
then are the batch's windows acknowledged, so the changelog always covers every committed
window. The next batch's core runs during (2) and (3); its outputs are queued only after the
batch before it is finished, so every topic and the changelog keep the batches' order. Each
partition's windows are taken once and in offset order from its committed offset
(:class:`streams.kafka.continuity.OffsetGuard`: repeats skipped, a gap sought back). After a
crash, the windows between the last commit and the crash are read again; those the restored
state already holds are replays (same content: skipped and counted, no output), the others
are processed. Outputs are at least once: a crash
between (2) and (3) produces a batch's records again (their ``(system, tier, seq)`` /
``(system, time)`` identify them; InfluxDB overwrites equal points). Estimate points still in
the InfluxDB sink's buffer when the worker dies are lost (at most one flush interval). At
shutdown the agent takes no new batch and finishes the ones it has before the producer stops.

Rebalances: a revocation returns only once the batches in hand are finished and the revoked
partitions' offsets committed, windows taken in before it are left to the partition's next
owner (``hand_over``, ``current``), and no batch is taken until the new assignment's tables
are recovered (``ready``), so partitions move with exactly the state of their committed
windows (``docs/pipeline.md``, "Delivery guarantees"). ``PERFCAST_DEBUG_OFFSETS=1`` logs
every 2 s, per source partition, Faust's committed, read and high-water offsets and the
worker's finished offset (:func:`streams.kafka.handover.offsets_report`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import faust

from streams.kafka.agent import SHUTDOWN_WAIT_S, WindowsAgent
from streams.core.config import Config, KafkaSettings
from streams.kafka.core_process import CoreProcess, CoreRunner, InlineCore
from streams.kafka.faust_adapter import check_versions, disable_spinner, set_fetch_limits
from streams.kafka.handover import COMMIT_INTERVAL_S
from streams.kafka.output_producer import MAX_BATCH_BYTES, OutputProducer, ssl_context
from streams.kafka.stats import BatchStats
from streams.sinks.influx import InfluxSink

__all__ = ["BatchStats", "MAX_BATCH_BYTES", "OutputProducer", "SHUTDOWN_WAIT_S", "build_app",
           "faust_broker_options", "faust_worker", "tune_fetches"]

log = logging.getLogger("perfcast.worker")


def faust_broker_options(k: KafkaSettings) -> dict[str, Any]:
    """Broker URL and credentials for ``faust.App`` from the Kafka settings."""
    opts: dict[str, Any] = {"broker": ";".join(f"kafka://{b.strip()}"
                                               for b in k.bootstrap.split(","))}
    proto = k.security_protocol.upper()
    if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
        opts["broker_credentials"] = faust.SASLCredentials(
            username=k.sasl_username, password=k.sasl_password,
            mechanism=k.sasl_mechanism or "PLAIN",
            ssl_context=ssl_context(k) if proto == "SASL_SSL" else None)
    elif proto == "SSL":
        opts["broker_credentials"] = ssl_context(k)
    return opts


#: records per poll and bytes per fetch of the source consumer (Faust's defaults, 500 records
#: and 1 MiB, halve the rate a bare agent reaches on this project's machines)
POLL_RECORDS = 10_000
FETCH_BYTES = 8 << 20

#: longest time the broker may hold a fetch of the source consumer (Faust fixes it at 1,500 ms;
#: see :func:`tune_fetches`)
FETCH_WAIT_MS = 50

#: least data the broker gathers before it answers a fetch of the source consumer (within
#: :data:`FETCH_WAIT_MS`; aiokafka's default is 1 byte)
FETCH_MIN_BYTES = 16 << 10


def tune_fetches(app: faust.App, wait_ms: int, min_bytes: int) -> bool:
    """Let the broker hold the worker consumer's fetch requests until it has ``min_bytes``
    for them, but at most ``wait_ms``.

    ``wait_ms``: aiokafka keeps one fetch in flight per broker, and it leaves out partitions
    whose records it still holds. A fetch that covers only partitions without new data (the
    table's changelog, or source partitions while the agent is busy) is held by the broker for
    ``fetch_max_wait_ms`` -- Faust hard-codes 1,500 ms -- and windows arriving meanwhile wait
    for it: at 1,000 windows/s that stalled the source every ~1.5 s and put the p99 latency
    near 3 s (``docs/benchmarks.md``).

    ``min_bytes``: with aiokafka's default of 1 byte the broker answers a fetch as soon as any
    record arrives, so a steady stream costs a fetch round trip per few records. At 1,000
    windows/s, 16 KiB (about 20 windows) halved the CPU the worker's process used (0.34 to
    0.18 cores), lowered the broker's, and did not raise the latency (``docs/benchmarks.md``);
    a window arriving at a quiet moment waits at most ``wait_ms`` more.

    Faust offers no setting for either, so this sets aiokafka's fetcher attributes once the
    consumer runs (:func:`streams.kafka.faust_adapter.set_fetch_limits`); returns ``False`` (and
    logs) where they are missing, which leaves the defaults in place."""
    try:
        set_fetch_limits(app, wait_ms, min_bytes)
    except AttributeError as err:
        log.warning("cannot tune the consumer's fetches (%s): latency may reach 1.5 s", err)
        return False
    return True


#: seconds between the worker's throughput log lines (log level info)
STATS_INTERVAL_S = 10.0

#: seconds between checks for source partitions whose windows never reach the agent
#: (:meth:`streams.kafka.continuity.OffsetGuard.stalled`)
STALL_CHECK_S = 2.0


def faust_worker(app: faust.App, loglevel: str = "warning") -> faust.Worker:
    """Faust's worker for ``app``, without its terminal spinner.

    At a log level of WARN or above, Faust's worker turns the spinner on by setting the root
    logger to DEBUG and adding a handler that advances the spinner on every record, and it
    leaves them so after startup. Every ``log.debug`` in aiokafka, Faust and mode then builds
    a record that only that handler reads: 11% of the worker's interpreter time at 1,000
    windows/s (py-spy, ``docs/benchmarks.md``). Without the spinner the root logger keeps the
    requested level."""
    worker = faust.Worker(app, loglevel=loglevel)
    disable_spinner(worker)
    return worker


def build_app(config: Config, *, app_id: str = "perfcast", partitions: int = 4,
              batch: int = 4000, within_s: float = 0.25, influx: bool = True,
              core_process: bool = True) -> faust.App:
    """The Faust app (topics, tables, agent, timer) for ``config``; ``core_process``: run the
    core in a child process (:class:`streams.kafka.core_process.CoreProcess`), else in the agent.
    The agent and its callbacks are the methods of one :class:`streams.kafka.agent.WindowsAgent`
    (``app.perfcast_agent``), registered here as Faust's examples register functions.
    Raises :class:`streams.kafka.faust_adapter.UnsupportedFramework` when the installed Faust,
    aiokafka or mode is outside the versions :mod:`streams.kafka.faust_adapter` supports."""
    check_versions()
    k = config.kafka
    app = faust.App(app_id, **faust_broker_options(k), store="memory://",
                    key_serializer="raw", value_serializer="raw", topic_partitions=partitions,
                    web_enabled=False, producer_linger_ms=5, stream_wait_empty=False,
                    consumer_auto_offset_reset="earliest", table_cleanup_interval=3600.0,
                    # large polls: Faust's consumer pays per fetch as well as per message
                    broker_max_poll_records=POLL_RECORDS, consumer_max_fetch_size=FETCH_BYTES)
    # acks=False: Faust never commits the source; the worker commits what it finished
    # (streams.kafka.handover)
    source = app.topic(k.topic("windows"), key_type=bytes, value_type=bytes,
                       partitions=partitions, acks=False)
    state = app.Table("state", key_type=bytes, value_type=bytes, partitions=partitions)
    runner: CoreRunner = (CoreProcess if core_process else InlineCore)(config, state)
    sink = InfluxSink(config.influxdb) if influx and config.influxdb.url else None
    agent = WindowsAgent(app, source, state, runner, OutputProducer(k), sink, k.topic,
                         batch=batch, within_s=within_s,
                         fetch_tuning=lambda a: tune_fetches(a, FETCH_WAIT_MS, FETCH_MIN_BYTES))
    app.perfcast_agent = agent        # for tests
    app.perfcast_runner = runner
    app.perfcast_sink = sink
    app.perfcast_stats = agent.stats

    app.timer(interval=STATS_INTERVAL_S)(agent.report)
    app.timer(interval=COMMIT_INTERVAL_S)(agent.commit)
    app.timer(interval=STALL_CHECK_S)(agent.unstall)
    if os.environ.get("PERFCAST_DEBUG_OFFSETS"):                  # log offsets every 2 s
        app.timer(interval=2.0)(agent.offsets)
    if sink is not None:
        app.timer(interval=config.influxdb.flush_interval_s)(agent.flush_influx)
    app.on_partitions_assigned.connect(agent.on_assigned)
    app.on_partitions_revoked.connect(agent.on_revoked)
    app.on_before_shutdown.connect(agent.on_shutdown)
    app.agent(source, name="streams.kafka.worker.process")(agent.process)
    return app
