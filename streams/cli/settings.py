"""The configuration as the commands take it: the TOML file read once, a configuration error
printed as one line and the command ended with exit status 2, the Kafka bootstrap and the
connect timeout overridden by their command-line options."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from streams.core.config import Config, ConfigError, load_config
from streams.core.terminal import SafeConsole

__all__ = ["command_config"]

console = SafeConsole()


def command_config(path: Optional[Path], bootstrap: Optional[str] = None,
                   connect_timeout: Optional[float] = None) -> Config:
    """The configuration at ``path`` (``None``: defaults) with ``--bootstrap`` and
    ``--connect-timeout`` applied; a configuration error ends the command (module docstring)."""
    try:
        cfg = load_config(path)
    except ConfigError as err:
        console.print(f"[red]configuration error:[/red] {escape(str(err))}", soft_wrap=True)
        raise typer.Exit(2) from None
    from dataclasses import replace
    if bootstrap:
        cfg = replace(cfg, kafka=replace(cfg.kafka, bootstrap=bootstrap))
    if connect_timeout is not None:
        cfg = replace(cfg, kafka=replace(cfg.kafka, connect_timeout_s=connect_timeout),
                      influxdb=replace(cfg.influxdb, connect_timeout_s=connect_timeout))
    return cfg
