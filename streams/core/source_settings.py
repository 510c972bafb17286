"""Settings shared by the sources' configurations (the Prometheus source's file, the ``[input]``
table of the Kafka formats): numbers and strings checked with the key named, and the window
grid ``offset_s + k window_s`` in whole milliseconds."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, Mapping

from estimators.histogram import HistogramError, quantile_level
from streams.core.config_error import ConfigError
from streams.core.records import MAX_WINDOW_S, valid_name

__all__ = ["WindowGrid", "number_setting", "string_setting", "tier_table", "window_setting",
           "http_url_setting", "redact_url", "header_settings", "quantiles_setting"]

#: an HTTP header's name (a token, RFC 9110 section 5.1) and value (visible characters, spaces
#: and tabs, RFC 9110 section 5.5): a line break in either would end the header early
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\xa0-\uffff]*")


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


def quantiles_setting(raw: Mapping[str, Any], where: str,
                      default: tuple[float, ...]) -> tuple[float, ...]:
    """``raw["quantiles"]`` (or ``default``): the levels read from a latency histogram, a
    non-empty list of ``pNN`` names or numbers within (0, 1)
    (:func:`estimators.histogram.quantile_level`)."""
    value = raw.get("quantiles")
    if value is None:
        return default
    if not isinstance(value, list) or not value or len(value) > 16:
        raise ConfigError(f"{where}.quantiles: must be a list of 1 to 16 quantiles (\"p95\", "
                          f"\"p99.9\" or numbers within (0, 1)), got {value!r}")
    try:
        levels = [quantile_level(v, f"{where}.quantiles[{i}]") for i, v in enumerate(value)]
    except HistogramError as err:
        raise ConfigError(f"{err.field}: {err.reason}, got {err.value!r}") from None
    return tuple(sorted(set(levels)))


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


def redact_url(url: str) -> str:
    """``url`` without the ``user:password@`` of its authority (``***@`` in its place), for
    messages and logs."""
    # up to the last "@": a password may hold "/" (it then reads as a path to a URL parser)
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^?#]*@", r"\1***@", url)


def http_url_setting(url: Any, where: str, hint: str = "") -> str:
    """``url``: an ``http(s)://host[:port][/path]`` URL without credentials and without a
    query or fragment, its trailing ``/`` removed. :class:`ConfigError` names ``where``; it
    never repeats a ``user:password@`` (credentials come from the environment, as tokens)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        shown = repr(redact_url(url) if isinstance(url, str) else url)[:200]
        raise ConfigError(f"{where}: must be an http(s) URL{hint}, got {shown}")
    shown = redact_url(url)[:200]
    if any(ord(c) < 0x21 or 0x7f <= ord(c) <= 0x9f for c in url):
        raise ConfigError(f"{where}: must not contain spaces or control characters, "
                          f"got {shown!r}")
    parts = urllib.parse.urlsplit(url)
    if "@" in url.split("?")[0].split("#")[0]:
        raise ConfigError(f"{where}: must not hold credentials (user:password@): a bearer "
                          f"token comes from PERFCAST_PROMETHEUS_TOKEN or "
                          f"PERFCAST_PROMETHEUS_TOKEN_FILE, got {shown!r}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if not parts.hostname or port == -1 or port == 0:
        raise ConfigError(f"{where}: must name a host and, optionally, a port within "
                          f"[1, 65535], got {shown!r}")
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}: must not have a query or fragment, got {shown!r}")
    return url.rstrip("/")


def header_settings(raw: Any, where: str) -> dict[str, str]:
    """``raw``: a table of HTTP header ``name = "value"`` (names tokens, values without
    control characters); no ``Authorization`` (secrets come from the environment)."""
    if not isinstance(raw, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise ConfigError(f"{where}: must be a table of name = \"value\", got {str(raw)[:200]}")
    for name, value in raw.items():
        if name.lower() in ("authorization", "proxy-authorization", "cookie"):
            raise ConfigError(f"{where}.{name}: secrets come from the environment "
                              f"(PERFCAST_PROMETHEUS_TOKEN or PERFCAST_PROMETHEUS_TOKEN_FILE)")
        if not _HEADER_NAME.fullmatch(name) or len(name) > 200:
            raise ConfigError(f"{where}: {name[:200]!r} is not a header name (letters, digits "
                              f"and !#$%&'*+.^_`|~-)")
        if not _HEADER_VALUE.fullmatch(value) or len(value) > 8192:
            raise ConfigError(f"{where}.{name}: must be at most 8192 characters without "
                              f"control characters (a line break would end the header)")
    return dict(raw)
