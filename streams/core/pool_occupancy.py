"""A thread or connection pool's measured occupancy in a window record (``pools``).

A window may carry, per pool (by the name of its ``[systems.<system>.pools.<name>]`` section),
what the pool's own metrics say over the window::

    "pools": {"db_connections": {"size": 10, "busy": 6.2, "waiting": 1.4, "acquire_s": 0.012}}

* ``size`` -- tokens (connections, threads, workers) the pool has: a whole number >= 1;
* ``busy`` -- mean tokens held over the window (HikariCP's active connections, a servlet
  pool's busy threads, pgbouncer's active server connections): a number >= 0, at most
  ``size``;
* ``waiting`` -- mean requests waiting for a token (HikariCP's pending threads, pgbouncer's
  waiting clients): a number >= 0;
* ``acquire_s`` -- mean wait for a token per acquisition, seconds (HikariCP's acquire
  timer): a number >= 0.

Each is optional, at least one must be given; no other key is accepted (a misspelt one would
be silently lost). ``busy`` a little above ``size`` is scrape jitter (the gauge and the
maximum are read at slightly different moments, or ``busy`` is a mean of samples that each
rounded): up to ``size * (1 + tolerance)`` -- the same ``utilization_tolerance`` as a tier's
utilization -- it is clamped to ``size`` and the window flagged; beyond it the window is
rejected. A negative value, NaN or infinity is rejected, naming the field
(``pools.db_connections.busy``) and the value.

The pool's measured utilization is ``busy / size`` (the configured size where the window
does not give one); :mod:`streams.predict.pool_check` compares it with the model's. A mean
of tokens held is what Little's law relates to the model (``busy = X h``, the throughput
times the holding time: Little 1961), so a gauge sampled at scrapes is averaged over the
window, not read at its end.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import msgspec

__all__ = ["PoolOccupancy", "PoolFieldError", "POOL_KEYS", "parse_occupancy"]

#: the keys a pool's occupancy may carry (module docstring)
POOL_KEYS = ("size", "busy", "waiting", "acquire_s")
#: largest accepted ``size`` and ``waiting`` (a billion, as ``users``)
MAX_TOKENS = 10 ** 9
#: largest accepted ``acquire_s`` (30 years, as a response time)
MAX_ACQUIRE_S = 1e9
#: rounding residue: ``busy`` this far below 0 is clamped to 0 and flagged
ROUNDING = 1e-9


class PoolOccupancy(msgspec.Struct, frozen=True, gc=False):
    """One pool's measured occupancy over one window (module docstring); ``None``: not
    measured."""

    size: int | None = None
    busy: float | None = None
    waiting: float | None = None
    acquire_s: float | None = None

    def to_record(self) -> dict[str, Any]:
        """The record's form: the measured keys only."""
        return {k: v for k in POOL_KEYS if (v := getattr(self, k)) is not None}


class PoolFieldError(ValueError):
    """A pool's occupancy that breaks the contract: ``field`` (``pools.<name>.<key>``),
    ``value`` and ``reason`` (the record's validator turns it into its own error)."""

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field, self.value, self.reason = field, value, reason
        super().__init__(f"{field}: {reason} (got {value!r})")


def _amount(where: str, value: Any, most: float) -> float:
    """A finite number <= ``most`` (the sign is checked by the caller)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PoolFieldError(where, value, "must be a number")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v):
        raise PoolFieldError(where, value, "must be finite (NaN and infinity are not allowed)")
    if v > most:
        raise PoolFieldError(where, value, f"must be at most {most:g}")
    return v


def parse_occupancy(value: Any, where: str, tolerance: float
                    ) -> tuple[PoolOccupancy, str | None]:
    """One pool's occupancy ``value`` (``where``: ``pools.<name>``) and the flag of a ``busy``
    clamped into ``[0, size]`` (``None``: taken as it is); :class:`PoolFieldError` otherwise
    (module docstring)."""
    if not isinstance(value, Mapping):
        raise PoolFieldError(where, value, f"must be an object with any of {list(POOL_KEYS)}")
    unknown = [k for k in value if k not in POOL_KEYS]
    if unknown:
        raise PoolFieldError(f"{where}.{unknown[0]}", value[unknown[0]],
                             f"unknown key: a pool's occupancy has {list(POOL_KEYS)}")
    given = {k: v for k, v in value.items() if v is not None}
    if not given:
        raise PoolFieldError(where, value, f"must give at least one of {list(POOL_KEYS)}")
    size = None
    if "size" in given:
        s = _amount(f"{where}.size", given["size"], MAX_TOKENS)
        if s != int(s) or s < 1:
            raise PoolFieldError(f"{where}.size", given["size"], "must be a whole number >= 1")
        size = int(s)
    out: dict[str, float] = {}
    for key, most in (("busy", MAX_TOKENS), ("waiting", MAX_TOKENS),
                      ("acquire_s", MAX_ACQUIRE_S)):
        if key in given:
            out[key] = _amount(f"{where}.{key}", given[key], most)
    flag = None
    for key, v in out.items():
        if v < 0:
            if key == "busy" and v >= -ROUNDING:
                out[key], flag = 0.0, f"{where}.busy {v!r} clamped to 0 (within rounding)"
                continue
            raise PoolFieldError(f"{where}.{key}", given[key], "must be >= 0")
    busy = out.get("busy")
    if busy is not None and size is not None and busy > size:
        if busy > size * (1.0 + tolerance) + ROUNDING:
            raise PoolFieldError(f"{where}.busy", given["busy"],
                                 f"must be at most size {size}; above it only by up to the "
                                 f"tolerance {tolerance:g} (utilization_tolerance), for "
                                 f"scrape jitter")
        out["busy"] = float(size)
        flag = f"{where}.busy {busy!r} clamped to size {size} (within tolerance {tolerance:g})"
    return PoolOccupancy(size, out.get("busy"), out.get("waiting"), out.get("acquire_s")), flag
