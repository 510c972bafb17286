"""A system's model as a store keeps it (:meth:`SystemModel.to_dict`), read back with every
field checked before anything is solved.

A store is a file: it may be damaged, edited, or written by someone else. A model row whose
demand is NaN, whose cores are 0, whose matrices have the wrong shape or whose numbers are beyond
what the solvers take would make ``perfcast whatif`` fail deep in a solver, or print
nonsense; here it is a :class:`ValueError` naming the system and the field
(``system 'shop': model.D_mc[1][0]: must be a finite number within [0, 1e+06], got nan``).
"""

from __future__ import annotations

from typing import Any

from streams.core.config import MAX_POOL_SIZE, SLO_QUANTILES
from streams.core.config_error import shown
from streams.core.records import MAX_CORES, MAX_NAME, valid_name
from streams.predict.model import CAPACITY_LIMIT, SystemModel

__all__ = ["model_from_row", "MAX_DEMAND_S"]

#: the largest demand of a class at a tier per request, seconds (a day: beyond it the row is
#: not a measured model)
MAX_DEMAND_S = 86_400.0
#: bounds of the other numbers of a row: visits per request, think time (seconds), the largest
#: MAP order, classes
_MAX_VISITS = 1e6
_MAX_THINK_S = 1e9
_MAX_ORDER = 16
_MAX_CLASSES = 10_000


class _Bad(ValueError):
    """A field of the row that cannot be used."""


def _number(value: Any, where: str, low: float, high: float, low_allowed: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
        (value >= low if low_allowed else value > low) and value <= high
    if not ok:
        bracket = "[" if low_allowed else "("
        raise _Bad(f"{where}: must be a finite number within {bracket}{low:g}, {high:g}], "
                   f"got {shown(value)}")
    return float(value)


def _whole(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _Bad(f"{where}: must be a whole number within [{low}, {high}], got {shown(value)}")
    return value


def _list(value: Any, where: str, length: int | None = None, most: int = _MAX_CLASSES,
          ) -> list:
    if not isinstance(value, list) or (length is not None and len(value) != length) \
            or len(value) > most:
        size = f"of {length}" if length is not None else f"of at most {most}"
        raise _Bad(f"{where}: must be a list {size} entries, got {shown(value)}")
    return value


def _names(value: Any, where: str, most: int) -> list[str]:
    names = _list(value, where, most=most)
    if not names:
        raise _Bad(f"{where}: must list at least one name")
    for i, name in enumerate(names):
        if not valid_name(name):
            raise _Bad(f"{where}[{i}]: not a valid name (printable, at most {MAX_NAME} "
                       f"characters), got {shown(name)}")
    if len(set(names)) != len(names):
        raise _Bad(f"{where}: names must be distinct, got {shown(names)}")
    return names


def _matrix(value: Any, where: str, rows: int, cols: int, low: float, high: float,
            low_allowed: bool = True) -> None:
    for i, row in enumerate(_list(value, where, rows)):
        for j, v in enumerate(_list(row, f"{where}[{i}]", cols)):
            _number(v, f"{where}[{i}][{j}]", low, high, low_allowed)


def _check(spec: Any) -> None:
    if not isinstance(spec, dict):
        raise _Bad(f"model: must be an object, got {shown(spec)}")
    for key in ("tiers", "classes", "D_mc", "mix", "servers", "think_time", "sla",
                "processes", "map_limit"):
        if key not in spec:
            raise _Bad(f"model.{key}: missing")
    tiers = _names(spec["tiers"], "model.tiers", MAX_CORES)
    classes = _names(spec["classes"], "model.classes", _MAX_CLASSES)
    m, c = len(tiers), len(classes)
    _matrix(spec["D_mc"], "model.D_mc", m, c, 0.0, MAX_DEMAND_S)
    if not any(v > 0 for row in spec["D_mc"] for v in row):
        raise _Bad("model.D_mc: every demand is 0 (no tier does any work)")
    mix = [_number(v, f"model.mix[{j}]", 0.0, 1.0) for j, v in
           enumerate(_list(spec["mix"], "model.mix", c))]
    if abs(sum(mix) - 1.0) > 1e-6:
        raise _Bad(f"model.mix: the class shares must sum to 1, got {sum(mix):.6g}")
    for i, v in enumerate(_list(spec["servers"], "model.servers", m)):
        if _number(v, f"model.servers[{i}]", 1.0, MAX_CORES) != int(v):
            raise _Bad(f"model.servers[{i}]: must be a whole number of cores, got {shown(v)}")
    _number(spec["think_time"], "model.think_time", 0.0, _MAX_THINK_S)
    for j, v in enumerate(_list(spec["sla"], "model.sla", c)):
        if v is not None:
            _number(v, f"model.sla[{j}]", 0.0, 1e12, False)
    for key, procs in (("processes", spec["processes"]),
                       ("pool_processes", spec.get("pool_processes"))):
        if procs is None:
            continue
        for i, p in enumerate(_list(procs, f"model.{key}", m)):
            where = f"model.{key}[{i}]"
            if not isinstance(p, dict) or "D0" not in p or "D1" not in p:
                raise _Bad(f"{where}: must be an object of D0 and D1, got {shown(p)}")
            order = len(p["D0"]) if isinstance(p["D0"], list) else 0
            if not 1 <= order <= _MAX_ORDER:
                raise _Bad(f"{where}.D0: must be a square matrix of order 1 to {_MAX_ORDER}, "
                           f"got {shown(p['D0'])}")
            _matrix(p["D0"], f"{where}.D0", order, order, -1e12, 1e12)
            _matrix(p["D1"], f"{where}.D1", order, order, -1e12, 1e12)
    _whole(spec["map_limit"], "model.map_limit", 0, CAPACITY_LIMIT)
    flags = spec.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise _Bad(f"model.flags: must be a list of strings, got {shown(flags)}")
    if spec.get("visits") is not None:
        _matrix(spec["visits"], "model.visits", m, c, 0.0, _MAX_VISITS)
    if spec.get("delays") is not None:
        _matrix(spec["delays"], "model.delays", m, c, 0.0, _MAX_THINK_S)
    targets = spec.get("scv_targets") or {}
    if not isinstance(targets, dict):
        raise _Bad(f"model.scv_targets: must be an object of tier = SCV, got {shown(targets)}")
    for tier, v in targets.items():
        _number(v, f"model.scv_targets.{tier}", 0.0, 1e12, False)
    if "per_job_max_cores" in spec:
        _whole(spec["per_job_max_cores"], "model.per_job_max_cores", 1, 64)
    if spec.get("slo") is not None:
        for j, row in enumerate(_list(spec["slo"], "model.slo", c)):
            for q, v in enumerate(_list(row, f"model.slo[{j}]", len(SLO_QUANTILES))):
                if v is not None:
                    _number(v, f"model.slo[{j}][{q}]", 0.0, 1e12, False)
    for k, pool in enumerate(_list(spec.get("pools") or [], "model.pools", most=MAX_CORES)):
        where = f"model.pools[{k}]"
        if not isinstance(pool, dict) or not isinstance(pool.get("name"), str):
            raise _Bad(f"{where}: must be an object of name, size, first and last, got "
                       f"{shown(pool)}")
        _whole(pool.get("size"), f"{where}.size", 1, MAX_POOL_SIZE)
        first = _whole(pool.get("first"), f"{where}.first", 0, m - 1)
        _whole(pool.get("last"), f"{where}.last", first + 1, m)
    for key in ("ps", "ps_law"):
        if spec.get(key) is not None:
            for i, v in enumerate(_list(spec[key], f"model.{key}", m)):
                if not isinstance(v, bool):
                    raise _Bad(f"model.{key}[{i}]: must be true or false, got {shown(v)}")


def model_from_row(system: str, spec: Any) -> SystemModel:
    """The :class:`SystemModel` of ``system``'s row ``spec`` (module docstring); a
    :class:`ValueError` names the system, the field and the value."""
    try:
        _check(spec)
        return SystemModel.from_dict(spec)
    except ValueError as exc:
        raise ValueError(f"system {shown(system)}: {exc}") from None
