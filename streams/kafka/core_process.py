"""The worker's per-batch step -- core, output encoding, line protocol, state snapshot -- and
the two places it can run: a child process (the default) or the worker's own event loop.

A Faust worker is one Python thread: Faust's consumer, the aiokafka clients and the agent
share it. On this project's machines the core and the encoding of its outputs took a little
more than half of that thread's time per window, Faust and the Kafka clients the rest
(``docs/benchmarks.md``). :class:`CoreProcess` runs :func:`run_batch` in a child process, so
the two halves use two cores: while the child computes a batch, the worker's consumer takes
the next windows in.

The core reads and writes a :class:`Mirror` of the worker's table (``TableBackedPipeline``
reads a system it does not hold from it). The worker sends its whole table along with the
first batch after a start and after every partition revocation (:meth:`CoreProcess.forget`),
and copies the changelog of every batch it delivers into its table, so the two stay equal to
what the changelog topic holds. One batch is in the child at a time; a child that exits or
fails makes the batch raise. :class:`InlineCore` is the same step without a child
(``perfcast worker --inline-core``), for a machine with one core.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgspec

from streams.core.config import Config
from streams.sinks.influx import lines
from streams.core.records import short_repr
from streams.engine.runtime import tune_gc
from streams.core.outputs import Outputs
from streams.engine.table_pipeline import TableBackedPipeline

__all__ = ["BatchResult", "CoreProcess", "CoreRunner", "InlineCore", "Mirror", "OUTPUT_TOPICS",
           "Step", "run_batch"]

log = logging.getLogger("perfcast.worker")

#: the directory holding ``streams``, ``estimators`` and ``solvers``
_ROOT = str(Path(__file__).resolve().parents[2])

OUTPUT_TOPICS = ("estimates", "predictions", "alerts", "deadletter")

#: output records as compact JSON (msgspec: floats as the shortest text that reads back to the
#: same float; several times faster than ``json.dumps``)
_dumps = msgspec.json.Encoder().encode


@dataclass
class BatchResult:
    """What one batch produced, ready to send.

    ``records``: per output topic (:data:`OUTPUT_TOPICS`), ``(key, JSON value)`` in order, keyed
    by system; ``urgent``: line protocol of the predictions and alerts (written to InfluxDB
    before the state); ``lines``: of the estimates and dead letters (buffered); ``changelog``:
    ``(partition, key, value)`` of the state the batch changed; ``windows``: records in the
    batch; ``seconds``: time the step took; ``replays``: records skipped as replays (windows
    the state had applied with the same content, ``streams.core.tier.REPLAY``)."""

    records: dict[str, list[tuple[bytes | None, bytes]]]
    urgent: list[str]
    lines: list[str]
    changelog: list[tuple[int, bytes, bytes]]
    windows: int
    seconds: float
    replays: int = 0


def _keyed(records: list[Any]) -> list[tuple[bytes | None, bytes]]:
    """``(key, JSON value)`` per record. The records are JSON-safe (the pipeline's dead letters
    bound and escape what they quote); should one still hold what the encoder refuses -- a
    lone surrogate, an int beyond 64 bits -- it is sent made safe rather than failing the
    batch, and with it the worker."""
    rendered = [r.to_record() for r in records]
    try:
        return [(r["system"].encode() if isinstance(r.get("system"), str) else None, _dumps(r))
                for r in rendered]
    except (UnicodeEncodeError, OverflowError, TypeError, ValueError, RecursionError):
        return [_keyed_safely(r) for r in rendered]


def _keyed_safely(record: dict[str, Any]) -> tuple[bytes | None, bytes]:
    system = record.get("system")
    key = system.encode("utf-8", "backslashreplace") if isinstance(system, str) else None
    try:
        return key, _dumps(_encodable(record))
    except (UnicodeEncodeError, OverflowError, TypeError, ValueError, RecursionError):
        return key, _dumps({"unencodable": short_repr(record, 4096)})


_INT64 = 2 ** 63


def _encodable(value: Any) -> Any:
    """``value`` with lone surrogates escaped (``\\ud800``) and ints beyond 64 bits as text."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        return short_repr(value, 4096)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encodable(v) for v in value]
    return value


def run_batch(core: TableBackedPipeline, values: list[bytes], partitions: list[int],
              received: float, persist: bool) -> BatchResult:
    """One batch of source records through the core (``partitions[i]``: the source partition
    of record ``i``; ``received``: the worker's wall clock, the time of its dead letters),
    then its outputs encoded and -- with ``persist`` -- the state changed since the last
    persist snapshotted. An empty batch with ``persist`` only snapshots."""
    t0 = time.perf_counter()
    replayed = core.replays
    out = core.process_batch(values, partitions) if values else Outputs()
    records = {name: _keyed(getattr(out, name)) for name in OUTPUT_TOPICS}
    urgent = lines(Outputs(predictions=out.predictions, alerts=out.alerts))
    buffered = lines(Outputs(estimates=out.estimates, deadletter=out.deadletter),
                     deadletter_time=received)
    changelog = core.persist() if persist else []
    return BatchResult(records, urgent, buffered, changelog, len(values),
                       time.perf_counter() - t0, core.replays - replayed)


class Mirror:
    """A copy of the worker's table, the only table the core reads and writes (``data``): it
    is replaced by the worker's table when the runner starts and after a revocation, and the
    worker copies each delivered batch's changelog into its own table."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}


class Step:
    """The core over a :class:`Mirror`: what :class:`InlineCore` and the child process run."""

    def __init__(self, config: Config) -> None:
        self.mirror = Mirror()
        self.core = TableBackedPipeline(config, self.mirror)

    def __call__(self, values: list[bytes], partitions: list[int], received: float,
                 persist: bool, table: dict[bytes, bytes] | None) -> BatchResult:
        if table is not None:                 # start over from the worker's table
            self.core.forget()
            self.mirror.data = table
        return run_batch(self.core, values, partitions, received, persist)


class CoreRunner(Protocol):
    """Where the worker's batches are processed."""

    async def start(self) -> None: ...

    @property
    def needs_table(self) -> bool: ...

    async def run(self, values: list[bytes], partitions: list[int],
                  received: float) -> BatchResult: ...

    def forget(self) -> None: ...

    async def stop(self) -> None: ...


class _Runner:
    """What both runners share: the worker's table, sent along with the next batch after a
    start or a revocation."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.reship = True

    @property
    def needs_table(self) -> bool:
        """The next batch takes the worker's table along (after a start or a revocation)."""
        return self.reship

    def _table_if_due(self) -> dict[bytes, bytes] | None:
        due, self.reship = self.reship, False
        return dict(self.table.data) if due else None

    def forget(self) -> None:
        """After a revocation: the systems in memory are dropped before the next batch, which
        starts from the worker's table (what the changelog holds)."""
        self.reship = True


class InlineCore(_Runner):
    """:func:`run_batch` on the worker's event loop."""

    def __init__(self, config: Config, table: Any) -> None:
        super().__init__(table)
        self.step = Step(config)

    async def start(self) -> None:
        return None

    async def run(self, values: list[bytes], partitions: list[int],
                  received: float) -> BatchResult:
        """:func:`run_batch` of the batch, its state snapshotted."""
        try:
            return self.step(values, partitions, received, True, self._table_if_due())
        except Exception:
            self.reship = True                # the systems may be half-updated: start over
            raise

    async def stop(self) -> None:
        return None


def _serve(conn: Any, config: Config) -> None:
    """The child: batches in, results out, until the worker closes the pipe or says stop.
    Signals are the worker's to handle; the child ends when its pipe does."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tune_gc()
    step = Step(config)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        try:
            reply: tuple[str, Any] = ("ok", step(*message[1:]))
        except Exception:                                 # noqa: BLE001 -- sent to the worker
            reply = ("error", traceback.format_exc())
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return


class CoreProcessError(RuntimeError):
    """The child process exited or failed on a batch."""


class CoreProcess(_Runner):
    """:func:`run_batch` in a child process (module docstring)."""

    def __init__(self, config: Config, table: Any) -> None:
        super().__init__(table)
        self.config = config
        self.process: Any = None
        self.conn: Any = None
        self.pending: asyncio.Future[BatchResult] | None = None

    async def start(self) -> None:
        if self.process is not None and self.process.is_alive():
            return
        ctx = multiprocessing.get_context("spawn")          # the worker has threads: no fork
        parent, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_serve, args=(child, self.config),
                                   name="perfcast-core", daemon=True)
        # the child starts with this process's sys.path; a library loaded here may have put
        # its own directories first (line_solver, the tests' peer, puts a ``solvers`` package
        # there), so this project's root goes first while the child is started
        saved = sys.path[:]
        sys.path.insert(0, _ROOT)
        try:
            self.process.start()
        finally:
            sys.path[:] = saved
        child.close()
        self.conn = parent
        self.reship = True
        asyncio.get_running_loop().add_reader(parent.fileno(), self._readable)
        log.info("core process started (pid %d)", self.process.pid)

    def _readable(self) -> None:
        future, self.pending = self.pending, None
        try:
            kind, payload = self.conn.recv()
        except (EOFError, OSError) as err:
            self._lost(future, f"the core process exited (code {self.process.exitcode}): {err!r}")
            return
        if future is None or future.done():
            return
        if kind == "ok":
            future.set_result(payload)
        else:
            self.reship = True
            future.set_exception(CoreProcessError(f"the core process failed:\n{payload}"))

    def _lost(self, future: "asyncio.Future[BatchResult] | None", why: str) -> None:
        asyncio.get_running_loop().remove_reader(self.conn.fileno())
        self.conn.close()
        self.process = None
        if future is not None and not future.done():
            future.set_exception(CoreProcessError(why))

    async def run(self, values: list[bytes], partitions: list[int],
                  received: float) -> BatchResult:
        """:func:`run_batch` of the batch in the child, its state snapshotted; one batch at a
        time (the agent awaits each)."""
        if self.process is None:
            await self.start()
        future = self.pending = asyncio.get_running_loop().create_future()
        try:
            self.conn.send(("batch", values, partitions, received, True, self._table_if_due()))
        except OSError as err:                            # the child is gone
            self._lost(future, f"the core process exited: {err!r}")
        return await future

    async def stop(self) -> None:
        process = self.process
        if process is None:
            return
        try:
            self.conn.send(("stop",))
        except OSError:
            pass
        self._lost(None, "stopped")
        # the child has finished its batch and exits at once; joined off the event loop
        await asyncio.get_running_loop().run_in_executor(None, process.join, 5)
