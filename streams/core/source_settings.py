"""Settings shared by the sources' configurations (the Prometheus source's file, the ``[input]``
table of the Kafka formats): numbers and strings checked with the key named, and the window
grid ``offset_s + k window_s`` in whole milliseconds."""

from __future__ import annotations

from typing import Any, Mapping

from streams.core.config_error import ConfigError
from streams.core.records import MAX_WINDOW_S, valid_name

__all__ = ["WindowGrid", "number_setting", "string_setting", "tier_table", "window_setting"]


class WindowGrid:
    """The window grid of a source with ``window_s`` and ``offset_s`` (seconds), in ms."""

    window_s: float
    offset_s: float

    @property
    def window_ms(self) -> int:
        return round(self.window_s * 1000)

    @property
    def offset_ms(self) -> int:
        return round(self.offset_s * 1000) % self.window_ms


def number_setting(raw: Mapping[str, Any], key: str, where: str, default: float, low: float,
            high: float, low_allowed: bool = False) -> float:
    """``raw[key]`` (or ``default``): a number within ``(low, high]`` (``[low, high]`` with
    ``low_allowed``); :class:`ConfigError` names ``where.key`` and the value."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            (value >= low if low_allowed else value > low) and value <= high):
        bracket = "[" if low_allowed else "("
        raise ConfigError(f"{where}.{key}: must be a number within {bracket}{low:g}, {high:g}], "
                          f"got {value!r}")
    return float(value)


def string_setting(raw: Mapping[str, Any], key: str, where: str, default: str | None = None,
            ) -> str | None:
    """``raw[key]`` (or ``default``): ``None`` or a non-empty string."""
    value = raw.get(key, default)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"{where}.{key}: must be a non-empty string, got {value!r}")
    return value


def window_setting(raw: Mapping[str, Any], where: str) -> float:
    """``raw["window_s"]``: seconds within (0, MAX_WINDOW_S], whole milliseconds (the grid's
    resolution; Prometheus' too); default 5."""
    window_s = number_setting(raw, "window_s", where, 5.0, 0.0, MAX_WINDOW_S)
    if abs(window_s * 1000 - round(window_s * 1000)) > 1e-6 or round(window_s * 1000) < 1:
        raise ConfigError(f"{where}.window_s: must be whole milliseconds, got {window_s!r}")
    return window_s


def tier_table(name: str, raw: Any, where: str, known: set[str], what: str
               ) -> Mapping[str, Any]:
    """A tier's table of a source's configuration: ``name`` a valid tier name, ``raw`` a table
    (of ``what``) holding only ``known`` keys; :class:`ConfigError` names ``where``."""
    if not valid_name(name):
        raise ConfigError(f"{where}: not a valid tier name (printable, at most 200 characters)")
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a table of {what}, got {raw!r}")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown setting (known: {sorted(known)})")
    return raw
