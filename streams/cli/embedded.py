"""The embedded shell: the pipeline core over a recorded trace or the simulated demo, in one
process, writing JSON lines and a SQLite store (no Kafka, no InfluxDB)."""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from streams.cli.closing import Findings
from streams.core.config import Config
from streams.engine.pipeline import Pipeline
from streams.core.outputs import Alert, DeadLetter, Outputs
from streams.sinks.schema import points
from streams.sinks.store import JsonLines, SQLiteStore

__all__ = ["RunSummary", "read_jsonl", "run_embedded", "STORE_NAME", "reason_kind",
           "SOURCE_DEADLETTER"]

STORE_NAME = "perfcast.sqlite"
#: records per batch of the core (the outputs do not depend on it; larger batches share the
#: per-step cost of the Kalman filters among more tiers)
CHUNK_RECORDS = 2000


#: dead letters of the source itself, made before the pipeline saw a record (an answer of a
#: Prometheus refused for its shape): ``perfcast run`` hands them to :func:`run_embedded`, set
#: by the shell that read the source (:mod:`streams.cli.prometheus`)
SOURCE_DEADLETTER: ContextVar[tuple[DeadLetter, ...]] = ContextVar("source_deadletter",
                                                                   default=())


def _chunks(records: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for raw in records:
        chunk.append(raw)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@dataclass
class RunSummary:
    """Counts of one embedded run and where its outputs are."""

    records: int = 0
    estimates: int = 0
    predictions: int = 0
    alerts: int = 0
    deadletter: int = 0
    #: windows skipped as replays (seen before with the same content)
    replays: int = 0
    points: int = 0
    #: systems evicted for being idle at the system limit (``[limits]``)
    evicted: int = 0
    seconds: float = 0.0
    out_dir: Path | None = None
    alert_events: list[Alert] = field(default_factory=list)
    #: dead letters per kind of reason (:func:`reason_kind`)
    reasons: Counter[str] = field(default_factory=Counter)
    #: metric formats (``[input] format``): what the mapping to windows did, on one line
    mapping: str = ""
    #: per system, what the closing lines say (:mod:`streams.cli.closing`)
    findings: Findings = field(default_factory=Findings)

    def add(self, out: Outputs) -> None:
        self.estimates += len(out.estimates)
        self.predictions += len(out.predictions)
        self.alerts += len(out.alerts)
        self.deadletter += len(out.deadletter)
        self.alert_events += out.alerts
        self.reasons.update(reason_kind(d) for d in out.deadletter)
        self.findings.add(out)

    def reason_summary(self, most: int = 4) -> str:
        """The dead letters' reasons, most frequent first, on one line:
        ``3 x record: not UTF-8; 1 x utilization: above 1 + tolerance``."""
        top = self.reasons.most_common(most)
        text = "; ".join(f"{n} x {kind}" for kind, n in top)
        rest = sum(self.reasons.values()) - sum(n for _, n in top)
        return text + (f"; {rest} other" if rest else "")


def reason_kind(dead: DeadLetter) -> str:
    """A dead letter's reason without the values in it (``field: what``), for counting:
    ``record: malformed JSON``, ``utilization: must be a finite number within [0, 1]``."""
    name = str(dead.field or "record")
    text = str(dead.reason or "")
    if text.startswith(name + ": "):
        text = text[len(name) + 2:]
    text = re.split(r" \(got |: | \(|; |, got ", text, maxsplit=1)[0].strip()
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "...", text)
    return f"{name}: {text[:60]}"


#: the UTF-8 byte-order mark some editors put at the start of a file
BOM = b"\xef\xbb\xbf"


def read_jsonl(path: str | Path) -> Iterator[bytes]:
    """Lines of a JSON-lines trace (``"-"``: standard input) as bytes, blank lines skipped.

    Each line is parsed by the pipeline, as the worker parses a Kafka record's bytes, so a
    malformed line -- or one that is not UTF-8 -- becomes a dead letter, not an exception,
    in both shells alike. A UTF-8 byte-order mark before the first line is dropped (the
    pipeline also ignores one at the start of any record)."""
    fh = sys.stdin.buffer if str(path) == "-" else open(path, "rb")
    try:
        first = True
        for line in fh:
            if first:
                first = False
                if line.startswith(BOM):
                    line = line[len(BOM):]
            if line.strip():
                yield line.rstrip(b"\r\n")
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


def _last_models(pipeline: Pipeline) -> list[tuple[str, float, int, int, dict[str, Any]]]:
    """Each system's last solved model, for the store (``perfcast whatif`` reads them)."""
    rows = []
    for name, state in pipeline.systems.items():
        if state.last_model is not None:
            time_, model, users, forecast = state.last_model
            spec = model.to_dict()
            if state.last_open_rates is not None:     # an open system: its rates, req/s
                spec["open"] = {"rate_per_s": state.last_open_rates[0],
                                "rate_forecast_per_s": state.last_open_rates[1]}
            rows.append((name, time_, users, forecast, spec))
    return rows


def run_embedded(records: Iterable[str | bytes | Mapping[str, Any]], config: Config,
                 out_dir: str | Path,
                 on_outputs: Callable[[Outputs, Pipeline], None] | None = None,
                 final_solve: bool = True, chunk: int = CHUNK_RECORDS,
                 deadletter: Iterable[DeadLetter] = ()) -> RunSummary:
    """Run the core over ``records``; write ``out_dir``'s JSON lines and SQLite store.
    ``deadletter``: the source's own dead letters, written and counted first.

    The core takes the records in batches of ``chunk`` (the outputs do not depend on it);
    ``on_outputs`` is called after every batch that produced a prediction or an alert (for a
    live display). ``final_solve`` solves each system's last open interval at the end.
    """
    pipeline = Pipeline(config)
    out_dir = Path(out_dir)
    files = JsonLines(out_dir)
    store_path = out_dir / STORE_NAME
    store_path.unlink(missing_ok=True)
    store = SQLiteStore(store_path)
    summary = RunSummary(out_dir=out_dir)
    started = time.perf_counter()
    batch = Outputs(deadletter=list(deadletter))
    summary.add(batch)

    def flush() -> None:
        nonlocal batch
        files.write(batch)
        summary.points += store.write(points(batch, deadletter_time=time.time()))
        batch = Outputs()

    try:
        for batch_records in _chunks(records, chunk):
            out = pipeline.process_many(batch_records)
            summary.records += len(batch_records)
            summary.add(out)
            batch.extend(out)
            if out.predictions or out.alerts:
                flush()
                if on_outputs is not None:
                    on_outputs(out, pipeline)
            elif len(batch.estimates) >= 5000:
                flush()
        if final_solve:
            out = pipeline.finish()
            summary.add(out)
            batch.extend(out)
            if on_outputs is not None and (out.predictions or out.alerts):
                on_outputs(out, pipeline)
        flush()
        store.write_models(_last_models(pipeline))
    finally:
        files.close()
        store.close()
    summary.seconds = time.perf_counter() - started
    summary.evicted = pipeline.evicted
    summary.replays = pipeline.replays
    if pipeline.samples is not None:
        summary.mapping = pipeline.samples.summary()
    return summary
