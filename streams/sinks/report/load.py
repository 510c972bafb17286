"""Reading the embedded run's store into typed rows, per system, ordered by time.

The store is opened read-only and checked first (a file, SQLite, the tables and columns of
:data:`streams.sinks.schema.MEASUREMENTS` the report reads), so a wrong path is a
:class:`ReportError` naming it rather than a traceback. Each table is read in one pass:
a query per system would scan it once per system.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from streams.core.config import Config
from streams.sinks.report.bounds import MAX_REMEDIES, MAX_SYSTEM_SECTIONS
from streams.sinks.report.rows import (AlertRow, ClassPredictionRow, DemandRow,
                                       PoolPredictionRow, PredictionRow, RemediationRow,
                                       TierPredictionRow, columns)
from streams.sinks.schema import MEASUREMENTS

__all__ = ["ReportError", "Thresholds", "SystemData", "StoreData", "load_store", "urgency"]

#: the store's tables the report needs (``remediation``, ``pool_prediction`` and
#: ``deadletter`` are optional)
_TABLES = ("prediction", "class_prediction", "tier_prediction", "demand", "alert")

R = TypeVar("R")


class ReportError(Exception):
    """The store cannot be reported on: the message names the path and what is wrong."""


@dataclass(frozen=True)
class Thresholds:
    """Configuration values the store does not hold (they are drawn as lines)."""

    idc: float = 10.0
    model_error: float = 0.3
    source: str = "defaults"


@dataclass
class SystemData:
    """Everything the store holds about one system, rows ordered by time."""

    name: str
    predictions: list[PredictionRow]
    classes: dict[str, list[ClassPredictionRow]]
    tiers: dict[str, list[TierPredictionRow]]
    demands: dict[str, dict[str, list[DemandRow]]]      # tier -> class -> rows
    alerts: list[AlertRow]
    deadletters: int
    thresholds: Thresholds
    #: the actions of the last solve that predicted a breach, by rank (``remediation`` table)
    remediation: list[RemediationRow] = field(default_factory=list)
    #: per thread or connection pool, its rows (``pool_prediction`` table; none without pools)
    pools: dict[str, list[PoolPredictionRow]] = field(default_factory=dict)

    @property
    def start(self) -> float:
        return min([self.predictions[0].time] + [a.time for a in self.alerts[:1]])

    @property
    def end(self) -> float:
        return max([self.predictions[-1].time] + [a.time for a in self.alerts[-1:]])

    def latest(self) -> PredictionRow:
        """The last prediction that has a model (else the last one)."""
        solved = [p for p in self.predictions if p.model is not None]
        return solved[-1] if solved else self.predictions[-1]


@dataclass
class StoreData:
    """A perfcast store, read: its systems (by name) and its dead letters."""

    path: Path
    systems: list[SystemData]
    deadletters: int = 0
    thresholds_source: str = "defaults"

    @property
    def start(self) -> float:
        return min(s.start for s in self.systems)

    @property
    def end(self) -> float:
        return max(s.end for s in self.systems)


def urgency(system: SystemData) -> tuple[float, float, str]:
    """Sort key, most urgent first: the soonest breach, then the least headroom."""
    p = system.latest()
    ttb = p.time_to_breach_s
    headroom = p.headroom_users
    return (math.inf if ttb is None else float(ttb),
            math.inf if headroom is None else float(headroom), system.name)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise ReportError(f"store {str(path)!r}: no such file (run 'perfcast demo' or "
                          "'perfcast run' first; the store is DIR/perfcast.sqlite)")
    if path.is_dir():
        raise ReportError(f"store {str(path)!r}: is a directory, not a SQLite file (the "
                          "store is DIR/perfcast.sqlite)")
    if path.stat().st_size == 0:
        raise ReportError(f"store {str(path)!r}: empty file, not a perfcast store")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        names = _tables(conn)
    except sqlite3.DatabaseError as exc:
        raise ReportError(f"store {str(path)!r}: not a SQLite database ({exc})") from None
    missing = [t for t in _TABLES if t not in names]
    if missing:
        conn.close()
        raise ReportError(f"store {str(path)!r}: not a perfcast store (missing table"
                          f"{'s' if len(missing) > 1 else ''} {', '.join(missing)})")
    for table in _TABLES:
        tags, fields_ = MEASUREMENTS[table]
        have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
        lacking = [c for c in ("time", *tags, *fields_) if c not in have]
        if lacking:
            conn.close()
            raise ReportError(f"store {str(path)!r}: not a perfcast store (table {table!r} "
                              f"lacks column{'s' if len(lacking) > 1 else ''} "
                              f"{', '.join(lacking)})")
    return conn


def _clean(value: Any) -> Any:
    """Non-finite floats (an unset SLA is infinite) read as unknown."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _boolean(value: Any) -> Any:
    return None if value is None else bool(value)


def _select(conn: sqlite3.Connection, row_type: type) -> tuple[str, Callable[[tuple], Any]]:
    """``SELECT`` of ``row_type``'s columns from its table (``NULL`` for a column an older
    store lacks; the required tables were checked by :func:`_connect`), and the row maker."""
    table: str = getattr(row_type, "TABLE")
    have = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
    cols = columns(row_type)
    kinds = MEASUREMENTS[table][1]
    convert = [_boolean if kinds.get(c) == "bool" else _clean for c in cols]
    sql = ", ".join(f'"{c}"' if c in have else "NULL" for c in cols)
    return (f'SELECT {sql} FROM "{table}"',
            lambda r: row_type(*(f(v) for f, v in zip(convert, r))))


def _rows(conn: sqlite3.Connection, row_type: type[R]) -> dict[str, list[R]]:
    """Every row of ``row_type``'s table by system, ordered by time."""
    select, make = _select(conn, row_type)
    out: dict[str, list[R]] = {}
    for r in conn.execute(f"{select} WHERE system IS NOT NULL ORDER BY time, rowid"):
        row = make(r)
        out.setdefault(str(row.system), []).append(row)
    return out


def _last_remediation(conn: sqlite3.Connection) -> dict[str, list[RemediationRow]]:
    """Per system, the ``remediation`` rows of its last solve at risk, by rank (a store
    written before the table existed has none)."""
    if "remediation" not in _tables(conn):
        return {}
    select, make = _select(conn, RemediationRow)
    rows = conn.execute(
        f'{select} r WHERE system IS NOT NULL AND time = (SELECT MAX(time) FROM remediation '
        'WHERE system = r.system) ORDER BY system, "rank" LIMIT ?',
        (MAX_REMEDIES * MAX_SYSTEM_SECTIONS * 4,))
    out: dict[str, list[RemediationRow]] = {}
    for r in rows:
        row = make(r)
        out.setdefault(str(row.system), []).append(row)
    return {k: v[:MAX_REMEDIES] for k, v in out.items()}


def _group(rows: list[R], key: Callable[[R], Any]) -> dict[str, list[R]]:
    out: dict[str, list[R]] = {}
    for r in rows:
        out.setdefault(str(key(r)), []).append(r)
    return out


def _thresholds(config: Config | None, system: str) -> Thresholds:
    if config is None:
        return Thresholds()
    sc = config.system(system)
    return Thresholds(sc.idc_threshold, sc.model_error_threshold, "configuration")


def load_store(path: str | Path, config: Config | None = None) -> StoreData:
    """Read a store written by the embedded runner. ``config`` supplies the thresholds the
    store does not hold (``idc_threshold``, ``model_error_threshold``; defaults without it).
    :class:`ReportError` names the path when it is missing, not SQLite, not a perfcast store,
    or holds no prediction."""
    path = Path(path)
    conn = _connect(path)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT DISTINCT system FROM prediction WHERE system IS NOT NULL ORDER BY system")]
        if not names:
            raise ReportError(f"store {str(path)!r}: holds no predictions (empty store: the run "
                              "processed no window, or stopped before the first solve)")
        dead_by_system: dict[str, int] = {}
        total_dead = 0
        if "deadletter" in _tables(conn):
            for system, count in conn.execute(
                    "SELECT system, SUM(COALESCE(count, 1)) FROM deadletter GROUP BY system"):
                dead_by_system[str(system)] = int(count or 0)
                total_dead += int(count or 0)
        predictions = _rows(conn, PredictionRow)
        classes = _rows(conn, ClassPredictionRow)
        tiers = _rows(conn, TierPredictionRow)
        demands = _rows(conn, DemandRow)
        alerts = _rows(conn, AlertRow)
        remedies = _last_remediation(conn)
        pools = (_rows(conn, PoolPredictionRow) if "pool_prediction" in _tables(conn)
                 else {})
        systems = []
        for name in names:
            systems.append(SystemData(
                name=name, predictions=predictions.get(name, []),
                classes=_group(classes.get(name, []), lambda r: r.cls),
                tiers=_group(tiers.get(name, []), lambda r: r.tier),
                demands={t: _group(rows, lambda r: r.cls)
                         for t, rows in _group(demands.get(name, []), lambda r: r.tier).items()},
                alerts=alerts.get(name, []),
                deadletters=dead_by_system.get(name, 0),
                thresholds=_thresholds(config, name), remediation=remedies.get(name, []),
                pools=_group(pools.get(name, []), lambda r: r.pool)))
    except sqlite3.DatabaseError as exc:
        raise ReportError(f"store {str(path)!r}: cannot be read ({exc})") from None
    finally:
        conn.close()
    return StoreData(path, systems, total_dead,
                     "defaults" if config is None else "configuration")
