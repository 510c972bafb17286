"""``perfcast grafana``: write the provisioning files, or push them into a running Grafana."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from streams.core.config import Config, ConfigError, load_config
from streams.core.terminal import SafeConsole

app = typer.Typer(help="Grafana: provisioning files (data source, dashboards, alert rules) and "
                       "pushing them to a running Grafana.", no_args_is_help=True,
                  add_completion=False)
console = SafeConsole()


def _load(config: Optional[Path]) -> Config:
    try:
        return load_config(config)
    except ConfigError as err:
        console.print(f"[red]configuration error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None


@app.command()
def generate(out: Path = typer.Option(Path("infra/grafana"), help="directory to write"),
             config: Optional[Path] = typer.Option(
                 None, exists=True, dir_okay=False,
                 help="TOML configuration: its defaults give the thresholds drawn")) -> None:
    """Write the provisioning files: data source, dashboard provider, dashboards, alert
    rules."""
    from streams.grafana.provisioning import write_files

    for path in write_files(out, _load(config).defaults):
        console.print(f"wrote {escape(str(path))}")


@app.command()
def push(url: str = typer.Option(..., help="Grafana's URL, e.g. http://grafana:3000"),
         config: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                               help="TOML configuration (influxdb "
                                                    "section, defaults)"),
         influx_url: Optional[str] = typer.Option(
             None, help="InfluxDB's URL as Grafana reaches it (default: PERFCAST_INFLUX_URL "
                        "or the configuration's influxdb url)"),
         update_influx_token: bool = typer.Option(
             False, help="send the InfluxDB token even if Grafana holds one (after rotating "
                         "it: Grafana never shows a stored token)"),
         timeout: float = typer.Option(10.0, help="seconds per request")) -> None:
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
        console.print(f"[red]configuration error:[/red] {escape(str(err))}")
        raise typer.Exit(2) from None
    influx = influx_url or cfg.influxdb.url
    if not influx:
        console.print("[red]configuration error:[/red] influxdb.url: not set "
                      "(--influx-url, PERFCAST_INFLUX_URL or url in the influxdb section)")
        raise typer.Exit(2)
    boards = dashboards(cfg.defaults)
    system = next(d for d in boards if d["uid"] == SYSTEM_UID)
    ds = datasource(influx, cfg.influxdb.org, cfg.influxdb.bucket, cfg.influxdb.token)
    try:
        result = upsert(connect(url, token, timeout), datasource=ds, dashboards=boards,
                        rules=rules(system), update_token=update_influx_token)
    except PushError as err:
        console.print(f"[red]push failed:[/red] {escape(str(err))}")
        raise typer.Exit(1) from None
    for kind, uid, action in result.actions:
        console.print(f"{kind} {escape(uid)}: {action}")
    console.print(f"{result.writes} change(s) at {escape(url)}")
