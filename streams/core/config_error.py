"""The error of a configuration value, below every module that reads one (the TOML file's
sections, the sources' settings) so that each can raise it without importing the others."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A configuration value that cannot be used: names the key, the value and the reason."""
