"""The configuration as the commands take it: the TOML file read once, a configuration error
printed as one line and the command ended with exit status 2, the Kafka bootstrap and the
connect timeout overridden by their command-line options; and the one style of every
command's error message (:func:`fail`)."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn, Optional

import typer

from streams.core.config import Config, ConfigError, load_config
from streams.core.terminal import printable

__all__ = ["BOOTSTRAP", "command_config", "fail"]

#: ``--bootstrap`` of the commands that publish to or read from Kafka
BOOTSTRAP = typer.Option(None, metavar="HOST:PORT",
                         help="Kafka's bootstrap server (default PERFCAST_KAFKA_BOOTSTRAP)")


def fail(message: str, code: int = 2) -> NoReturn:
    """End the command with ``error: MESSAGE`` on standard error, one plain line (no colour,
    no box, not wrapped: a log or a script reads it whole), and exit ``code``; click's own
    usage errors have the same shape (``Error: ...``)."""
    typer.echo(f"error: {printable(' '.join(message.splitlines()))}", err=True)
    raise typer.Exit(code)



def command_config(path: Optional[Path], bootstrap: Optional[str] = None,
                   connect_timeout: Optional[float] = None) -> Config:
    """The configuration at ``path`` (``None``: defaults) with ``--bootstrap`` and
    ``--connect-timeout`` applied; a configuration error ends the command (module docstring)."""
    try:
        cfg = load_config(path)
    except ConfigError as err:
        fail(f"configuration: {err}")
    from dataclasses import replace
    if bootstrap:
        cfg = replace(cfg, kafka=replace(cfg.kafka, bootstrap=bootstrap))
    if connect_timeout is not None:
        cfg = replace(cfg, kafka=replace(cfg.kafka, connect_timeout_s=connect_timeout),
                      influxdb=replace(cfg.influxdb, connect_timeout_s=connect_timeout))
    return cfg
