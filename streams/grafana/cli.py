"""``perfcast grafana``: write the provisioning files, or push them into a running Grafana."""

from __future__ import annotations

import os
import typing
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from streams.core.config import Config, ConfigError, load_config
from streams.core.terminal import SafeConsole, printable

app = typer.Typer(help="Grafana: provisioning files (data source, dashboards, alert rules) and "
                       "pushing them to a running Grafana.", no_args_is_help=True,
                  add_completion=False, rich_markup_mode=None)
console = SafeConsole()


def _fail(message: str, code: int = 2) -> typing.NoReturn:
    """``error: MESSAGE`` on standard error, one plain line, and exit ``code``: the style of
    every ``perfcast`` command's errors (``streams.cli.settings.fail``, a layer above)."""
    typer.echo(f"error: {printable(' '.join(message.splitlines()))}", err=True)
    raise typer.Exit(code)


def _load(config: Optional[Path]) -> Config:
    try:
        return load_config(config)
    except ConfigError as err:
        _fail(f"configuration: {err}")


@app.command()
def generate(out: Path = typer.Option(Path("infra/grafana"), metavar="DIR",
                                      help="directory to write"),
             config: Optional[Path] = typer.Option(
                 None, exists=True, dir_okay=False, metavar="FILE",
                 help="TOML configuration: its defaults give the thresholds drawn")) -> None:
    """Write the provisioning files: data source, dashboard provider, dashboards, alert
    rules."""
    from streams.grafana.provisioning import write_files

    for path in write_files(out, _load(config).defaults):
        console.print(f"wrote {escape(str(path))}")


@app.command()
def push(url: str = typer.Option(..., metavar="URL",
                                 help="Grafana's URL, e.g. http://grafana:3000"),
         config: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                               metavar="FILE", help="TOML configuration (influxdb "
                                                    "section, defaults)"),
         influx_url: Optional[str] = typer.Option(
             None, metavar="URL", help="InfluxDB's URL as Grafana reaches it (default: PERFCAST_INFLUX_URL "
                        "or the configuration's influxdb url)"),
         update_influx_token: bool = typer.Option(
             False, "--update-influx-token", help="send the InfluxDB token even if Grafana holds one (after rotating "
                         "it: Grafana never shows a stored token)"),
         timeout: float = typer.Option(10.0, metavar="SECONDS", help="seconds per request")) -> None:
    """Upsert the data source, dashboards and alert rules through Grafana's HTTP API. The
    token comes from PERFCAST_GRAFANA_TOKEN or the file named by PERFCAST_GRAFANA_TOKEN_FILE;
    running it twice changes nothing."""
    from streams.grafana.dashboards import SYSTEM_UID, dashboards
    from streams.grafana.provisioning import datasource
    from streams.grafana.push import PushError, connect, grafana_token
    from streams.grafana.push import push as upsert
    from streams.grafana.rules import rules

    cfg = _load(config)
    try:
        token = grafana_token(os.environ)
    except ConfigError as err:
        _fail(f"configuration: {err}")
    influx = influx_url or cfg.influxdb.url
    if not influx:
        _fail("configuration: influxdb.url: not set (--influx-url, PERFCAST_INFLUX_URL or url "
              "in the influxdb section)")
    boards = dashboards(cfg.defaults)
    system = next(d for d in boards if d["uid"] == SYSTEM_UID)
    ds = datasource(influx, cfg.influxdb.org, cfg.influxdb.bucket, cfg.influxdb.token)
    try:
        result = upsert(connect(url, token, timeout), datasource=ds, dashboards=boards,
                        rules=rules(system), update_token=update_influx_token)
    except PushError as err:
        _fail(f"push failed: {err}", 1)
    for kind, uid, action in result.actions:
        console.print(f"{kind} {escape(uid)}: {action}")
    console.print(f"{result.writes} change(s) at {escape(url)}")
