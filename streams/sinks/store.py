"""The embedded shell's sinks: JSON-lines files per output topic and a SQLite store whose tables
follow the InfluxDB measurements (:data:`streams.sinks.schema.MEASUREMENTS`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import IO, Any, Iterable

from streams.core.outputs import Outputs
from streams.core.records import MAX_END, MAX_USERS, valid_name
from streams.sinks.schema import MEASUREMENTS, Point

__all__ = ["SQLiteStore", "JsonLines", "OUTPUT_FILES", "MODEL_TABLE", "read_models"]

#: the table of each system's last solved model (not a measurement: the embedded store only)
MODEL_TABLE = "model_state"

#: output topic -> file name in the output directory
OUTPUT_FILES = {"estimates": "estimates.jsonl", "predictions": "predictions.jsonl",
                "alerts": "alerts.jsonl", "deadletter": "deadletter.jsonl"}
_SQL_TYPES = {"float": "REAL", "int": "INTEGER", "bool": "INTEGER", "str": "TEXT"}


_INT_MIN, _INT_MAX = -2 ** 63, 2 ** 63 - 1


def _storable(value: Any) -> Any:
    """``value`` as SQLite can store it: an int beyond 64 bits at the nearest bound (as the
    InfluxDB sink writes it), a lone surrogate in a string as its escape."""
    if isinstance(value, int) and not isinstance(value, bool) \
            and not _INT_MIN <= value <= _INT_MAX:
        return _INT_MAX if value > 0 else _INT_MIN
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


class SQLiteStore:
    """One table per measurement: ``time`` (epoch seconds), a column per tag and per field.

    Written in WAL mode; :meth:`close` returns the file to rollback mode, so the closed store
    is one self-contained file (a reader opening it read-only, as ``perfcast report`` does,
    would otherwise leave ``-wal`` and ``-shm`` files beside it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.conn = sqlite3.connect(self.path)
        self.conn.execute("PRAGMA journal_mode=WAL")
        for name, (tags, fields) in MEASUREMENTS.items():
            cols = ["time REAL NOT NULL"] + [f'"{t}" TEXT' for t in tags] + [
                f'"{f}" {_SQL_TYPES[k]}' for f, k in fields.items()]
            self.conn.execute(f'CREATE TABLE IF NOT EXISTS "{name}" ({", ".join(cols)})')
            self._add_missing_columns(name, tags, fields)
            self.conn.execute(f'CREATE INDEX IF NOT EXISTS "{name}_time" ON "{name}" (time)')
        self.conn.execute(f'CREATE TABLE IF NOT EXISTS "{MODEL_TABLE}" (system TEXT PRIMARY '
                          'KEY, time REAL NOT NULL, users INTEGER, users_forecast INTEGER, '
                          'model TEXT NOT NULL)')

    def _add_missing_columns(self, name: str, tags: Iterable[str],
                             fields: dict[str, str]) -> None:
        """A store written by an older perfcast lacks the columns of the tags and fields added
        since: they are added (empty in the old rows), so an upgraded run appends to the same
        store instead of failing on its first insert."""
        have = {row[1] for row in self.conn.execute(f'PRAGMA table_info("{name}")')}
        for t in tags:
            if t not in have:
                self.conn.execute(f'ALTER TABLE "{name}" ADD COLUMN "{t}" TEXT')
        for f, kind in fields.items():
            if f not in have:
                self.conn.execute(f'ALTER TABLE "{name}" ADD COLUMN "{f}" {_SQL_TYPES[kind]}')

    def write(self, pts: Iterable[Point]) -> int:
        """Insert points; returns how many."""
        by_table: dict[tuple[str, tuple[str, ...]], list[list[Any]]] = {}
        for p in pts:
            tags, fields = MEASUREMENTS[p.measurement]
            cols = ("time",) + tuple(tags) + tuple(fields)
            row = [p.time] + [p.tags.get(t) for t in tags] + [p.fields.get(f) for f in fields]
            by_table.setdefault((p.measurement, cols), []).append(row)
        try:
            return self._insert(by_table)
        except (OverflowError, UnicodeEncodeError):
            # an int beyond SQLite's 64 bits or a string that is not UTF-8 (neither comes from a
            # validated window): the transaction was rolled back; the rows again, made storable
            return self._insert({key: [[_storable(v) for v in row] for row in rows]
                                 for key, rows in by_table.items()})

    def _insert(self, by_table: dict[tuple[str, tuple[str, ...]], list[list[Any]]]) -> int:
        """Insert the rows per (table, columns) in one transaction (all or none)."""
        n = 0
        with self.conn:
            for (table, cols), rows in by_table.items():
                quoted = ", ".join(f'"{c}"' for c in cols)
                marks = ", ".join("?" * len(cols))
                self.conn.executemany(f'INSERT INTO "{table}" ({quoted}) VALUES ({marks})', rows)
                n += len(rows)
        return n

    def write_models(self, models: Iterable[tuple[str, float, int, int, dict[str, Any]]]
                     ) -> int:
        """Keep each system's last solved model ``(system, time, users, users_forecast,
        SystemModel.to_dict())`` in :data:`MODEL_TABLE`, replacing an older one."""
        rows = [(s, t, n, n_fc, json.dumps(spec, allow_nan=False))
                for s, t, n, n_fc, spec in models]
        with self.conn:
            self.conn.executemany(f'INSERT OR REPLACE INTO "{MODEL_TABLE}" VALUES (?, ?, ?, ?, ?)',
                                  rows)
        return len(rows)

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        self.conn.row_factory = sqlite3.Row
        try:
            return list(self.conn.execute(sql, tuple(params)))
        finally:
            self.conn.row_factory = None

    def close(self) -> None:
        self.conn.execute("PRAGMA journal_mode=DELETE")        # checkpoints the WAL
        self.conn.close()


def read_models(path: str | Path) -> list[tuple[str, float, int, int, dict[str, Any]]]:
    """Each system's last solved model from an embedded run's store, by system name:
    ``(system, time, users, users_forecast, SystemModel.to_dict())``. A ``ValueError`` names
    the path when it is not a store, or one written before the models were kept."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"store {str(path)!r}: no such file (the store is "
                         f"DIR/perfcast.sqlite of 'perfcast run' or 'perfcast demo')")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute(f'SELECT system, time, users, users_forecast, model FROM '
                                f'"{MODEL_TABLE}" ORDER BY system').fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        raise ValueError(f"store {str(path)!r}: holds no model state ({exc}; written by a "
                         f"perfcast before 'whatif': run the trace again)") from None
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"store {str(path)!r}: not a SQLite database ({exc})") from None
    return [_model_row(path, *row) for row in rows]


def _model_row(path: Path, system: Any, t: Any, n: Any, n_fc: Any, spec: Any,
               ) -> tuple[str, float, int, int, Any]:
    """One row of :data:`MODEL_TABLE`, its columns checked; the model's JSON parsed, not
    checked (:func:`streams.predict.model_row.model_from_row` does). A ``ValueError`` names the
    store, the system and the column."""
    where = f"store {str(path)!r}: system {str(system)[:200]!r}"
    if not isinstance(system, str) or not valid_name(system):
        raise ValueError(f"{where}: system: not a valid system name")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= MAX_END:
        raise ValueError(f"{where}: time: must be epoch seconds within [0, {MAX_END:g}], "
                         f"got {str(t)[:80]!r}")
    for name, value in (("users", n), ("users_forecast", n_fc)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_USERS:
            raise ValueError(f"{where}: {name}: must be a whole number within "
                             f"[0, {MAX_USERS}], got {str(value)[:80]!r}")
    if not isinstance(spec, str):
        raise ValueError(f"{where}: model: must be JSON text, got {type(spec).__name__}")
    try:
        model = json.loads(spec)
    except RecursionError:
        raise ValueError(f"{where}: model: JSON nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"{where}: model: not JSON ({exc})") from None
    return system, float(t), n, n_fc, model


class JsonLines:
    """``DIR/estimates.jsonl``, ``predictions.jsonl``, ``alerts.jsonl``, ``deadletter.jsonl``."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.files: dict[str, IO[str]] = {
            topic: open(self.directory / name, "w", encoding="utf-8")
            for topic, name in OUTPUT_FILES.items()}

    def write(self, out: Outputs) -> None:
        for topic, fh in self.files.items():
            for record in getattr(out, topic):
                fh.write(json.dumps(record.to_record(), separators=(",", ":"),
                                    allow_nan=False))
                fh.write("\n")

    def close(self) -> None:
        for fh in self.files.values():
            fh.close()
