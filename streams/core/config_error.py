"""The error of a configuration value, below every module that reads one (the TOML file's
sections, the sources' settings) so that each can raise it without importing the others."""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "shown"]

#: the longest value an error message repeats: a list of 10^5 names must not make a 1-MB line
SHOWN_CHARS = 200


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, cut to :data:`SHOWN_CHARS` characters."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS - 3]}..."


class ConfigError(ValueError):
    """A configuration value that cannot be used: names the key, the value and the reason."""
