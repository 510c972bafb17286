"""The Prometheus source on the command line.

- ``perfcast ingest prometheus --prom-config FILE [--from T] [--checkpoint FILE]``: follow a
  Prometheus live and publish the windows to ``perfcast.windows``
  (:func:`streams.kafka.prometheus_follow.follow`), resuming after the checkpoint; progress at
  ``--loglevel info``.
- ``perfcast run --source prometheus --prom-config FILE --from T --to T [run's options]``: a
  backtest: the windows ending in ``(from, to]`` are read from Prometheus, kept as
  ``OUT/prometheus-windows.jsonl`` (the same windows as a file: ``perfcast run --source`` on it
  gives the same estimates), and run through the embedded pipeline by ``perfcast run`` itself.
  An answer of another shape than Prometheus' API gives is a dead letter of the run (its
  ``deadletter.jsonl`` and store, counted on the console) naming the query and the field;
  the other queries' windows are run all the same.

:func:`register` adds both to the ``perfcast`` application. ``run`` keeps its own definition in
``streams/cli/commands.py``: its ``--source`` is widened to also take ``prometheus``, and the three
options above are added to whatever options it has.

Times (``--from``, ``--to``): ISO 8601 with a zone, epoch seconds, ``now``, or ``now-2h`` /
``-2h`` (units ``s``, ``m``, ``h``, ``d``).
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import signal
import threading
import time
import typing
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from streams.cli.settings import BOOTSTRAP
from streams.core.config import ConfigError

__all__ = ["ingest_app", "register", "parse_time", "WINDOWS_FILE"]

#: the backtest's windows, in the output directory
WINDOWS_FILE = "prometheus-windows.jsonl"

ingest_app = typer.Typer(help="Follow a monitoring source live and publish its windows to "
                              "perfcast.windows.", no_args_is_help=True, add_completion=False,
                         rich_markup_mode=None)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text: str, now: Callable[[], float] = time.time) -> float:
    """``--from`` / ``--to`` as epoch seconds (module docstring); ``ValueError`` naming the
    text otherwise."""
    from streams.core.records import InvalidWindow, parse_end

    t = text.strip().lower()
    m = re.fullmatch(r"(now)?\s*(?:-\s*(\d+(?:\.\d+)?)\s*([smhd]))?", t)
    if t and m and (m.group(1) or m.group(2)):
        return now() - (float(m.group(2)) * _UNITS[m.group(3)] if m.group(2) else 0.0)
    try:
        return parse_end(float(t) if re.fullmatch(r"\d+(\.\d*)?", t) else text.strip())
    except InvalidWindow as err:
        raise ValueError(f"{text!r}: not a time ({err.reason}; or now, now-2h, -15m)") from None


def _fail(what: str, message: str) -> typing.NoReturn:
    from streams.cli.settings import fail

    fail(f"{what}: {message}")


def _source(path: Path):
    from streams.sources.prometheus import load_source

    try:
        return load_source(path)
    except ConfigError as err:
        _fail("prom-config", str(err))


def _time(name: str, text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    try:
        return parse_time(text)
    except ValueError as err:
        _fail(name, str(err))


@ingest_app.command("prometheus")
def ingest_prometheus(
        prom_config: Path = typer.Option(..., exists=True, dir_okay=False, metavar="FILE",
                                         help="the source: a prometheus table and a "
                                              "tiers.NAME table of queries per tier (TOML, or "
                                              "JSON; docs/prometheus.md)"),
        config: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                              metavar="FILE", help="perfcast TOML configuration (its kafka "
                                                   "table)"),
        bootstrap: Optional[str] = BOOTSTRAP,
        checkpoint: Optional[Path] = typer.Option(
            None, metavar="FILE", help="where the end of the last window sent is kept "
                                       "(default prometheus-SYSTEM.checkpoint.json)"),
        from_: Optional[str] = typer.Option(None, "--from", metavar="TIME",
                                            help="without a checkpoint: start after this "
                                                 "time (default: now)"),
        until: Optional[str] = typer.Option(None, metavar="TIME",
                                            help="stop after the window ending at this time "
                                                 "(default: follow for ever)"),
        loglevel: str = typer.Option("info", metavar="LEVEL",
                                     help="log level: debug, info, warning, error")) -> None:
    """Follow a Prometheus: publish each system window to perfcast.windows once it is
    complete (plus lag_s), resuming after the checkpoint after a restart."""
    from streams.cli.settings import command_config
    from streams.kafka.prometheus_follow import Checkpoint, follow
    from streams.kafka.topics import ensure_topics
    from streams.sources.prometheus_http import PrometheusError

    from streams.core.terminal import SafeFormatter

    handler = logging.StreamHandler()                   # control characters escaped
    handler.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=loglevel.upper(), handlers=[handler])
    # the Kafka client's own info lines (connections, metadata) would drown the progress
    logging.getLogger("kafka").setLevel(max(logging.WARNING, logging.getLogger().level))
    source = _source(prom_config)
    start, stop_at = _time("from", from_), _time("until", until)
    cfg = command_config(config, bootstrap)
    path = checkpoint or Path(f"prometheus-{re.sub(r'[^A-Za-z0-9_.-]', '_', source.system)}"
                              f".checkpoint.json")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    ensure_topics(cfg.kafka)
    try:
        stats = follow(source, cfg.kafka, Checkpoint(path, source), start_s=start,
                       until_s=stop_at, stop=stop)
    except (PrometheusError, ConfigError) as err:
        _fail("ingest", str(err))
    logging.getLogger("perfcast.prometheus").info(
        "%s: stopped; %d records sent for %d window ends, %d gaps", source.system, stats.sent,
        stats.window_ends, stats.gaps)


def _backtest(prom_config: Optional[Path], start: Optional[str], end: Optional[str],
              out: Path) -> tuple[Path, tuple[Any, ...]]:
    """Read the windows of ``(start, end]`` into ``out/prometheus-windows.jsonl``; the dead
    letters of the answers refused."""
    from rich.markup import escape

    from streams.core.records import format_time
    from streams.core.terminal import SafeConsole
    from streams.kafka.prometheus_follow import refused_dead_letter
    from streams.sources.prometheus_http import PrometheusError, fetch_windows, summarize_gaps

    if prom_config is None or start is None or end is None:
        _fail("source", "--source prometheus needs --prom-config, --from and --to")
    source = _source(prom_config)
    t0, t1 = _time("from", start), _time("to", end)
    if not t1 > t0:
        _fail("to", f"must be after --from ({format_time(t0)}), got {format_time(t1)}")
    try:
        fetched = fetch_windows(source, t0, t1)
    except PrometheusError as err:
        _fail("prometheus", str(err))
    out.mkdir(parents=True, exist_ok=True)
    path = out / WINDOWS_FILE
    with open(path, "w", encoding="utf-8") as fh:
        for record in fetched.records:
            fh.write(json.dumps(record, separators=(",", ":")) + "\n")
    console = SafeConsole()
    tiers = len(source.tiers)
    console.print(f"read {len(fetched.records)} windows of {tiers} tier{'s' * (tiers != 1)} "
                  f"({fetched.window_ends} window ends of {source.window_s:g} s, "
                  f"{format_time(t0)} .. {format_time(t1)}) from {escape(source.url)} "
                  f"into {escape(str(path))}", soft_wrap=True)
    if fetched.gaps:
        console.print(f"gaps: {escape(summarize_gaps(fetched.gaps))}", soft_wrap=True)
    if fetched.refused:
        console.print(f"{len(fetched.refused)} answer{'s' * (len(fetched.refused) != 1)} of "
                      f"another shape than Prometheus' API gives: dead letters of the run",
                      soft_wrap=True)
    return path, tuple(refused_dead_letter(r) for r in fetched.refused)


def _with_prometheus_source(original: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` with ``--source`` also taking ``prometheus`` and the options ``--prom-config``,
    ``--from``, ``--to`` added: the windows are read into a file, which ``run`` then runs."""
    sig = inspect.signature(original)
    hints = typing.get_type_hints(original)
    if "source" not in sig.parameters or "out" not in sig.parameters:
        raise TypeError("perfcast run must have --source and --out to take a Prometheus source")
    source_option = sig.parameters["source"].default
    must_exist = bool(getattr(source_option, "exists", False))
    params = []
    for p in sig.parameters.values():
        if p.name == "source":
            help_text = getattr(source_option, "help", None) or "JSON-lines trace"
            p = p.replace(annotation=str, default=typer.Option(
                ..., metavar="FILE|prometheus",
                help=f"{help_text}; or 'prometheus' (with --prom-config, --from, --to)"))
        else:
            p = p.replace(annotation=hints.get(p.name, p.annotation))
        params.append(p)
    extra = {
        "prom_config": (Optional[Path], typer.Option(
            None, exists=True, dir_okay=False, metavar="FILE",
            help="--source prometheus: the source's queries (docs/prometheus.md)")),
        "prom_from": (Optional[str], typer.Option(
            None, "--from", metavar="TIME",
            help="--source prometheus: windows ending after this time (ISO 8601, epoch "
                 "seconds, now-2h)")),
        "prom_to": (Optional[str], typer.Option(
            None, "--to", metavar="TIME", help="--source prometheus: ... and up to this time")),
    }
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                 annotation=annotation)
               for name, (annotation, default) in extra.items()]

    _FLAGS = ("--prom-config", "--from", "--to")

    def run(**kwargs: Any) -> Any:
        from streams.cli.embedded import SOURCE_DEADLETTER

        prom = {name: kwargs.pop(name) for name in extra}
        source = kwargs["source"]
        if source == "prometheus":
            kwargs["source"], dead = _backtest(prom["prom_config"], prom["prom_from"],
                                               prom["prom_to"], kwargs["out"])
            token = SOURCE_DEADLETTER.set(dead)
            try:
                return original(**kwargs)
            finally:
                SOURCE_DEADLETTER.reset(token)
        else:
            given = [flag for (n, v), flag in zip(prom.items(), _FLAGS) if v is not None]
            if given:
                _fail("source", f"{', '.join(given)} only with --source prometheus")
            if must_exist and not Path(source).is_file():
                _fail("source", f"no such file {source!r}")
            kwargs["source"] = Path(source)
        return original(**kwargs)

    run.__signature__ = sig.replace(parameters=params)            # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    run.__doc__ = (original.__doc__ or "").rstrip() + (
        " --source prometheus: a backtest over a Prometheus time range (docs/prometheus.md).")
    run.__name__ = original.__name__
    return run


def register(app: typer.Typer) -> None:
    """Add ``perfcast ingest prometheus`` and ``perfcast run --source prometheus`` to
    ``app`` (``run`` must be registered already)."""
    app.add_typer(ingest_app, name="ingest",
                  short_help="Follow a source live, publish its windows to Kafka.")
    for info in app.registered_commands:
        callback = info.callback
        if callback is not None and (info.name or callback.__name__) == "run":
            info.callback = _with_prometheus_source(callback)
            return
    raise RuntimeError("perfcast run is not registered; register the Prometheus source after it")
