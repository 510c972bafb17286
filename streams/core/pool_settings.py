"""A tier's ``pools`` table in a source's mapping: where each pool's measured occupancy comes
from (docs/prometheus.md, docs/formats.md).

::

    [tiers.app.pools.db_connections]          # the pool's name under [systems.<s>.pools]
    size = 'max(hikaricp_connections_max{pool="HikariPool-1"})'
    busy = 'avg_over_time(hikaricp_connections_active{pool="HikariPool-1"}[{window}])'
    waiting = 'avg_over_time(hikaricp_connections_pending{pool="HikariPool-1"}[{window}])'
    acquire_s = '...'                         # a mean wait per acquisition, seconds

Each key is one of the window record's pool keys (:mod:`streams.core.pool_occupancy`); its
value is the source's own way of naming a value (PromQL for the Prometheus source, a metric
selector for the metric formats), read by the source as a gauge whose series are summed.
The window's field is ``pools.<pool>.<key>`` (:func:`field_name`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from streams.core.config_error import ConfigError
from streams.core.pool_occupancy import POOL_KEYS
from streams.core.records import valid_name

__all__ = ["POOL_PREFIX", "field_name", "split_field", "pool_table", "pool_values"]

#: how a pool field's name begins
POOL_PREFIX = "pools."

T = TypeVar("T")


def field_name(pool: str, key: str) -> str:
    """``pools.<pool>.<key>``: the field of one pool key (the window record's path)."""
    return f"{POOL_PREFIX}{pool}.{key}"


def split_field(name: str) -> tuple[str, str] | None:
    """``(pool, key)`` of a pool field's name (``None``: not one)."""
    if not name.startswith(POOL_PREFIX):
        return None
    pool, _, key = name[len(POOL_PREFIX):].rpartition(".")
    return (pool, key) if pool and key in POOL_KEYS else None


def pool_table(raw: Any, where: str, parse: Callable[[Any, str], T]
               ) -> tuple[tuple[str, T], ...]:
    """The ``pools`` table at ``where`` (``tiers.app.pools``) as ``(field name, parsed)`` pairs
    in the table's order; ``parse(value, key_path)`` reads one value. :class:`ConfigError`
    names the key and the value."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a table of pools ([{where}.NAME]), got {raw!r}")
    out = []
    for pool, keys in raw.items():
        at = f"{where}.{pool}"
        if not valid_name(pool) or not pool.strip() or "." in pool:
            raise ConfigError(f"{at}: a pool's name must be a valid name without a dot, "
                              f"got {pool!r}")
        if not isinstance(keys, Mapping) or not keys:
            raise ConfigError(f"{at}: must be a table with any of {list(POOL_KEYS)}, "
                              f"got {keys!r}")
        unknown = [k for k in keys if k not in POOL_KEYS]
        if unknown:
            raise ConfigError(f"{at}.{unknown[0]}: unknown key (known: {list(POOL_KEYS)})")
        for key in POOL_KEYS:
            if key in keys:
                out.append((field_name(pool, key), parse(keys[key], f"{at}.{key}")))
    return tuple(out)


def pool_values(values: Mapping[str, float | None]) -> dict[str, dict[str, float]]:
    """The window record's ``pools`` from values by pool field name (``None``: no value in
    the window, left out; a pool with none is left out); ``size`` as a whole number."""
    out: dict[str, dict[str, Any]] = {}
    for name, v in values.items():
        parts = split_field(name)
        if parts is None or v is None:
            continue
        pool, key = parts
        out.setdefault(pool, {})[key] = int(round(v)) if key == "size" else float(v)
    return out


