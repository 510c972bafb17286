"""The ``perfcast`` command line (typer + rich).

Commands:

- ``perfcast demo``: simulate the TPC-W-like shop and run the pipeline on it, embedded (no
  Kafka, no InfluxDB); writes ``OUT/`` (JSON lines, the SQLite store ``perfcast.sqlite``) and
  the report ``OUT/report.html``.
- ``perfcast run --source FILE``: the same embedded pipeline over a recorded JSON-lines trace;
  writes ``OUT/`` and ``OUT/report.html``.
- ``perfcast report --store PATH --out FILE``: render an embedded run's store as one
  self-contained HTML page (:mod:`streams.sinks.report`).
- ``perfcast whatif --store OUT/perfcast.sqlite --replicate db=2 --cores app=8 --cpu-speed
  db=1.5 --pool conn=16`` (or ``--source FILE``: the embedded pipeline over a trace first): each
  system's last model before and after the changes -- capacity, per-class response times now
  and at the horizon (:mod:`streams.predict.whatif`); an open system's (or any, with
  ``--rate R``) at a request rate, capacity in requests/s (:mod:`streams.predict.open_whatif`).
- ``perfcast produce --source FILE|demo``: publish window records to ``perfcast.windows``
  (``--start now`` moves the demo to the current time: the docker-compose producer).
- ``perfcast worker``: the Faust worker (Kafka in; Kafka and InfluxDB out).
- ``perfcast grafana generate|push``: Grafana provisioning files, or upsert them into a running
  Grafana (:mod:`streams.grafana.cli`).

Bad input (a configuration file, a store) ends the command with a one-line message and exit
code 2: ``error: ...`` on standard error, the one style of every error
(:func:`streams.cli.settings.fail`). The help is click's plain text (``rich_markup_mode``
``None``), which wraps an option's help and never cuts an option's name at 80 columns.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from streams.cli.settings import command_config as _config
from streams.cli.settings import BOOTSTRAP, fail
from streams.core.config import Config
from streams.grafana.cli import app as grafana_app
from streams.engine.pipeline import Pipeline
from streams.core.records import format_time
from streams.core.terminal import SafeConsole
from streams.engine.runtime import tune_gc
from streams.core.outputs import Alert, Outputs, Prediction

# plain click help: rich's boxed table cut long option and variable names at 80 columns and
# labelled values <bool>, <list[str]>; click's wraps the help and keeps "[input]" as written
app = typer.Typer(help="perfcast: live queueing-model predictions from coarse monitoring data.",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  pretty_exceptions_show_locals=False)      # a traceback's locals hold secrets
console = SafeConsole()                                     # control characters escaped
app.add_typer(grafana_app, name="grafana",
              short_help="Grafana's provisioning files, or push them to a Grafana.")


#: ``--connect-timeout`` of the commands that reach Kafka or InfluxDB
_CONNECT_TIMEOUT = typer.Option(None, min=0.001, max=3600.0, metavar="SECONDS",
                                help="seconds to wait at start for Kafka (and InfluxDB) to "
                                     "answer (default: [kafka] / [influxdb] "
                                     "connect_timeout_s, 10)")


def _unreachable(err: Exception) -> None:
    """End the command with the one line of a service that does not answer."""
    from streams.kafka.connect import EXIT_UNREACHABLE

    fail(f"unreachable: {err}", EXIT_UNREACHABLE)


def _fmt(value: Any, spec: str = ".3f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def _count(value: Any) -> str:
    """A population in at most 6 characters: ``950``, ``12.5k``, ``3.1M``."""
    if value is None:
        return "-"
    n = float(value)
    if abs(n) < 10_000:
        return f"{n:.0f}"
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.1f}{unit}" if abs(v) < 99.95 else f"{v:.0f}{unit}"
    return f"{n:.0f}"                                   # pragma: no cover


def _minutes(seconds: float) -> str:
    """A time to breach in at most 6 characters: ``42s``, ``3.6m``, ``5.2h``, ``12d``."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 6000:
        return f"{seconds / 60:.1f}m" if seconds < 600 else f"{seconds / 60:.0f}m"
    if seconds < 86_400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86_400:.0f}d"


class _LiveView:
    """Last predictions and alerts as a rich table, readable in an 80-column terminal: short
    headers, no vertical rules, the system column only when there are several systems (the
    title names a single one), long names cut with an ellipsis, nothing wrapped."""

    #: (header, justify, widest cell); headers are at most 6 characters
    COLUMNS = (("time", "left", 5), ("system", "left", 12), ("users", "right", 7),
               ("fcst", "right", 7), ("model", "left", 7), ("R meas", "right", 6),
               ("R pred", "right", 6), ("cap", "right", 7), ("breach", "right", 6),
               ("bneck", "left", 8), ("sw P", "right", 4), ("I max", "right", 6))
    #: solves shown before the first predicted breach in the final table
    BEFORE = 3

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[Prediction] = []
        self.alerts: list[Alert] = []

    def add(self, out: Outputs, _pipeline: Pipeline) -> None:
        self.rows += [p for p in out.predictions if p.model]
        self.alerts += out.alerts

    def _first_firing(self, alert: str) -> float | None:
        return next((a.time for a in self.alerts if a.alert == alert and a.state == "firing"),
                    None)

    def _final_rows(self) -> tuple[list[Prediction], set[int]]:
        """The solves that matter, for the table left on the screen at the end: the
        :data:`BEFORE` solves before the first predicted breach, the solves from it to the
        measured breach (at most 4 at each end), then the last solve; and the positions
        after which a section ends. Without a predicted breach, the last 12."""
        start = self._first_firing("predicted_breach")
        if start is None:
            return self.rows[-12:], set()
        stop = self._first_firing("current_breach")
        first = next(i for i, p in enumerate(self.rows) if p.time >= start)
        span = [p for p in self.rows[first:] if stop is None or p.time <= stop]
        cut = len(span) > 8
        if cut:                             # a section break where solves are left out
            span = span[:4] + span[-4:]
        rows = self.rows[max(first - self.BEFORE, 0):first] + span
        ends = {first - max(first - self.BEFORE, 0) + 3} if cut else set()
        if self.rows[-1] is not rows[-1]:
            ends.add(len(rows) - 1)
            rows.append(self.rows[-1])
        return rows, ends

    def render(self, final: bool = False) -> Table:
        """The table: the last 12 solves while running; ``final``: the solves that matter
        (:meth:`_final_rows`), without the alerts and the story (the closing lines print
        them, once: :mod:`streams.cli.closing`)."""
        from rich import box

        rows, ends = self._final_rows() if final else (self.rows[-12:], set())
        several = len({p.system for p in rows}) > 1
        title = self.title
        if final and self._first_firing("predicted_breach") is not None:
            title = ", ".join(f"{what} {format_time(t)[11:16]}" for what, t in (
                ("first predicted breach", self._first_firing("predicted_breach")),
                ("measured breach", self._first_firing("current_breach"))) if t is not None) \
                + ", last solve"
        table = Table(title=title, caption=None if final else self._caption(),
                      box=box.SIMPLE_HEAD,
                      padding=(0, 1), pad_edge=False, show_edge=False, collapse_padding=True,
                      caption_justify="left")
        for name, justify, widest in self.COLUMNS:
            if name == "system" and not several:
                continue
            table.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis",
                             max_width=widest)
        for i, p in enumerate(rows):
            meas = [c for c in p.classes.values() if c.response_time_measured is not None]
            x = sum(c.throughput_measured or 0 for c in meas)
            r_meas = sum((c.throughput_measured or 0) * c.response_time_measured
                         for c in meas) / x if x else None
            ttb = p.time_to_breach_s
            idcs = [t.idc for t in p.tiers.values() if t.idc is not None]
            idc = max(idcs) if idcs else None
            cells = [format_time(p.time)[11:16], escape(p.system), _count(p.users),
                     _count(p.users_forecast), p.model, _fmt(r_meas),
                     _fmt(p.response_time), _count(p.capacity_users),
                     "now" if ttb == 0 else ("-" if ttb is None else _minutes(ttb)),
                     escape(str(p.bottleneck_tier)) + ("*" if p.bottleneck_reason else ""),
                     _fmt(p.bottleneck_switch_probability, ".2f"),
                     _fmt(idc, ".1f" if idc is not None and idc < 100 else ".0f")]
            if not several:
                del cells[1]
            table.add_row(*cells, end_section=i in ends)
        return table

    def _caption(self) -> str:
        return "\n".join(self._story() + [self._alerts()])

    def _story(self) -> list[str]:
        """Why the bottleneck column (marked ``*``) names another tier than the breach, the
        remedy of a solve at risk (and why it acts elsewhere), and the last switch of model
        (:mod:`streams.predict.story`), for the newest row's system."""
        if not self.rows:
            return []
        last = self.rows[-1]
        lines = [f"* {escape(last.system)}: {escape(last.bottleneck_reason)}"] \
            if last.bottleneck_reason else []
        if last.remediation_summary:
            why = last.remediation_reason
            lines.append(f"remedy {escape(last.system)}: {escape(last.remediation_summary)}"
                         + (f" ({escape(why)})" if why else ""))
        switch = next((p for p in reversed(self.rows) if p.model_switch
                       and p.system == last.system), None)
        if switch is not None:
            lines.append(f"model switch {format_time(switch.time)[11:16]} "
                         f"({escape(switch.model_switch)}): "
                         f"{escape(switch.model_switch_reason or '')}")
        return lines

    def _alerts(self) -> str:
        firing: dict[str, Alert] = {}
        for a in self.alerts:
            key = f"{a.alert}/{a.class_}"
            if a.state == "firing":
                firing[key] = a
            else:
                firing.pop(key, None)
        if not firing:
            return "no active alerts"
        return "\n".join(f"ALERT {escape(a.summary)}" for a in firing.values())


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("perfcast")
        except PackageNotFoundError:                # run from a source tree, not installed
            number = "unknown (not installed)"
        console.print(f"perfcast {number}", highlight=False)
        raise typer.Exit()


@app.callback()
def main(_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """perfcast command line."""
    tune_gc()


@app.command(short_help="Simulate a shop and predict its SLA breach (embedded).")
def demo(out: Path = typer.Option(Path("perfcast-demo"), metavar="DIR",
                                  help="output directory"),
         duration_s: float = typer.Option(2700.0, metavar="SECONDS", help="simulated seconds"),
         seed: int = typer.Option(1, metavar="N", help="random seed of the simulation"),
         quiet: bool = typer.Option(False, "--quiet", help="no live table")) -> None:
    """Simulate a TPC-W-like shop (bursty database, users ramping up) and predict its SLA
    breach before it happens -- embedded: no Kafka, no InfluxDB."""
    from streams.cli.demo import DemoScenario, demo_config, demo_records
    from streams.cli.embedded import run_embedded

    sc = DemoScenario(duration_s=duration_s, seed=seed)
    console.print(f"simulating the shop: {sc.users_start} users for {sc.steady_s / 60:.0f} min, "
                  f"then +{sc.step_users} every {sc.step_s:.0f} s up to {sc.users_end}; "
                  f"SLA {sc.sla_s} s; windows of {sc.window_s:g} s ...")
    records = demo_records(sc)
    view = _LiveView("perfcast demo: shop (front -> db), a row per solve")
    with Live(view.render(), console=console, refresh_per_second=4,
              transient=quiet) as live:
        summary = run_embedded(records, demo_config(sc), out, chunk=24,   # a row per solve
                               on_outputs=lambda o, p: (view.add(o, p),
                                                        live.update(view.render())))
        live.update(view.render(final=True))
    console.print()
    _write_report(out, demo_config(sc))
    _print_summary(summary)


def _write_report(out_dir: Path, config: Config) -> Optional[Path]:
    """Render ``out_dir``'s store as ``out_dir/report.html`` after an embedded run; a store
    the report cannot use (no prediction yet) is a note, not a failure of the run."""
    from streams.cli.embedded import STORE_NAME
    from streams.sinks.report import REPORT_NAME, ReportError, write_report

    path = out_dir / REPORT_NAME
    try:
        write_report(out_dir / STORE_NAME, path, config)
    except ReportError as err:
        console.print(f"no report: {escape(str(err))}")
        return None
    console.print(f"report: {escape(str(path))}")
    return path


def _print_summary(summary: Any) -> None:
    what = "records" if summary.mapping else "windows"
    console.print(f"\n{summary.records} {what} in {summary.seconds:.1f} s: "
                  f"{summary.estimates} estimates, {summary.predictions} predictions, "
                  f"{summary.alerts} alert events, {summary.deadletter} dead letters"
                  + (f", {summary.replays} replays skipped (windows seen before unchanged)"
                     if summary.replays else ""))
    if summary.mapping:
        console.print(escape(summary.mapping), soft_wrap=True)
    if summary.deadletter:
        console.print(f"dead letters by reason: {escape(summary.reason_summary())}",
                      soft_wrap=True)
    if summary.evicted:
        console.print(f"{summary.evicted} idle systems evicted at the system limit "
                      f"([limits] max_systems, idle_system_s)")
    console.print(f"outputs: {escape(str(summary.out_dir))}/"
                  f"{{estimates,predictions,alerts,deadletter}}.jsonl and "
                  f"{escape(str(summary.out_dir))}/perfcast.sqlite")
    _print_closing(summary)


def _print_closing(summary: Any) -> None:
    """The alerts fired, each once, then per system what the run found, last
    (:mod:`streams.cli.closing`): what a reader of an 80-column terminal sees at the end."""
    from streams.cli.closing import alert_lines, closing_lines

    alerts = alert_lines(summary.findings)
    if alerts:
        console.print("\nalerts fired:", highlight=False)
        console.print(escape("\n".join(alerts)), highlight=False, soft_wrap=True)
    lines = closing_lines(summary.findings)
    if lines:
        console.print("\nsummary:", highlight=False)
        console.print(escape("\n".join(lines)), highlight=False, soft_wrap=True)


#: exit code of ``perfcast run`` when no window was accepted (every record dead-lettered, or
#: none at all): the outputs are written, but there is nothing in them
EXIT_NOTHING_ACCEPTED = 3


def _source(source: Path) -> Path:
    """``--source``: a file, or ``-`` for standard input."""
    if str(source) != "-" and not source.is_file():
        fail(f"source: no such file {str(source)!r}")
    return source


@app.command()
def run(source: Path = typer.Option(..., metavar="FILE", help="JSON-lines trace of window "
                                                               "records ('-': standard input)"),
        config: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                              metavar="FILE", help="TOML configuration"),
        out: Path = typer.Option(Path("perfcast-out"), metavar="DIR", help="output directory"),
        final_solve: bool = typer.Option(True, help="solve the last open interval at the end"),
        ) -> None:
    """Run the pipeline core over a recorded trace (embedded). Exit code 3 when no window
    was accepted (every record dead-lettered: the reasons are counted on the console)."""
    from streams.cli.embedded import SOURCE_DEADLETTER, read_jsonl, run_embedded

    cfg = _config(config)
    summary = run_embedded(read_jsonl(_source(source)), cfg, out, final_solve=final_solve,
                           deadletter=SOURCE_DEADLETTER.get())
    _write_report(out, cfg)
    _print_summary(summary)
    if summary.estimates == 0:
        what = (f"all {summary.records} records were dead-lettered: "
                f"{summary.reason_summary()}" if summary.records else "the source has no records")
        fail(f"no window accepted: {what}", EXIT_NOTHING_ACCEPTED)


@app.command(short_help="Render an embedded run's store as one HTML page.")
def report(store: Path = typer.Option(..., metavar="PATH",
                                      help="an embedded run's SQLite store "
                                           "(OUT/perfcast.sqlite, or the directory OUT)"),
           out: Path = typer.Option(Path("report.html"), metavar="FILE",
                                    help="the HTML file to write"),
           config: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                                 metavar="FILE",
                                                 help="TOML configuration: the systems' "
                                                      "idc_threshold and "
                                                      "model_error_threshold")) -> None:
    """Render an embedded run's store as one self-contained HTML page (docs/report.md)."""
    from streams.cli.embedded import STORE_NAME
    from streams.sinks.report import ReportError, write_report

    cfg = _config(config) if config is not None else None
    if store.is_dir() and (store / STORE_NAME).is_file():
        store = store / STORE_NAME
    try:
        data = write_report(store, out, cfg)
    except ReportError as err:
        fail(f"report: {err}")
    except OSError as err:
        fail(f"report: cannot write {str(out)!r} ({err.strerror or err})")
    systems = ", ".join(s.name for s in data.systems[:5]) + (
        f" and {len(data.systems) - 5} more" if len(data.systems) > 5 else "")
    console.print(f"report of {len(data.systems)} system{'s' if len(data.systems) != 1 else ''}"
                  f" ({escape(systems)}): {escape(str(out))}")


def _actions(replicate: list[str], cores: list[str], cpu_speed: list[str],
             pool: list[str] = ()) -> list[Any]:
    """``--replicate db=2 --cores app=8 --cpu-speed db=1.5 --pool conn=16`` as what-if
    actions."""
    from streams.predict.whatif import parse_action

    try:
        return [parse_action(kind, text) for kind, texts in
                (("replicate", replicate), ("cores", cores), ("cpu_speed", cpu_speed),
                 ("pool", pool))
                for text in texts]
    except ValueError as err:
        fail(f"whatif: {err}")


def _whatif_table(name: str, model: Any, cmp: Any, when: float) -> Table:
    """One system's comparison: a row per class."""
    from rich import box

    def cap(value: Any, limited: bool = False) -> str:
        return "no SLA" if value is None else f"{value}{'+' if limited else ''}"

    title = (f"{escape(name)}: capacity {cap(cmp.capacity_before)} → "
             f"{cap(cmp.capacity_after, cmp.limited_after)} users")
    changes = "; ".join(escape(_describe(a, model)) for a in cmp.actions) or "no change"
    table = Table(title=title, caption=f"{changes} (model {format_time(when)[:16]}, "
                                       f"{model.kind})", box=box.SIMPLE_HEAD,
                  caption_justify="left")
    for head in ("class", "SLA s", f"R now ({cmp.users}) before", "after",
                 f"R {_second(cmp)} before", "after"):
        table.add_column(head, justify="left" if head == "class" else "right")
    for i, c in enumerate(model.classes):
        sla = float(model.sla[i])
        cells = [_fmt(float(r[i])) for pair in (cmp.response_now, cmp.response_forecast)
                 for r in pair]
        table.add_row(escape(c), "-" if sla == float("inf") else f"{sla:g}", *cells)
    return table


def _whatif_rate(name: str, model: Any, actions: list[Any], when: float,
                 rate: float | None, opened: dict[str, Any]) -> None:
    """One system at a request rate (``--rate``, else an open system's last measured rate
    and its forecast): :func:`streams.predict.open_whatif.at_rate`, a row per class and a
    row per tier."""
    from rich import box

    from streams.predict.open_whatif import at_rate

    rates = [rate] if rate is not None else [
        opened[k] for k in ("rate_per_s", "rate_forecast_per_s") if k in opened]
    if not rates:
        fail(f"whatif: system {name!r}: the store's open model has no rate_per_s")
    try:
        cmps = [at_rate(model, r, actions) for r in rates]
    except (ValueError, TypeError, ArithmeticError, MemoryError) as err:
        fail(f"whatif: system {name!r}: the open model cannot be solved "
             f"({type(err).__name__}: {str(err)[:200]})")

    def cap(v: float | None) -> str:
        return "no SLA" if v is None else f"{v:.4g}"
    first = cmps[0]
    title = (f"{escape(name)}: capacity {cap(first.capacity[0])} → {cap(first.capacity[1])} "
             f"req/s (saturation {first.saturation[0]:.4g} → {first.saturation[1]:.4g})")
    changes = "; ".join(escape(_describe(a, model)) for a in actions) or "no change"
    flags = [f for c in cmps for f in c.flags()]
    table = Table(title=title, caption=f"{changes} (model {format_time(when)[:16]}, open "
                                       f"model{'; ' + '; '.join(flags) if flags else ''})",
                  box=box.SIMPLE_HEAD, caption_justify="left")
    table.add_column("class / tier", justify="left")
    table.add_column("SLA s", justify="right")
    for c in cmps:
        table.add_column(f"at {c.rate:.4g}/s before", justify="right")
        table.add_column("after", justify="right")
    for i, c in enumerate(model.classes):
        sla = float(model.sla[i])
        table.add_row(escape(c), "-" if sla == float("inf") else f"{sla:g}",
                      *[_fmt(float(r[i])) for cmp in cmps for r in cmp.response])
    for m, t in enumerate(model.tiers):
        table.add_row(escape(t) + " (utilization)", "",
                      *[f"{float(u[m]):.3f}" for cmp in cmps for u in cmp.utilization])
    for k, spec in enumerate(model.pools):
        table.add_row(escape(spec.name) + " (pool utilization)", "",
                      *[_fmt(float(u[k])) for cmp in cmps for u in cmp.pool_utilization])
    table.add_row("stable", "", *["yes" if ok else "NO: capacity exceeded"
                                  for cmp in cmps for ok in cmp.stable])
    console.print(table)


def _whatif_slo_table(name: str, cmp: Any) -> Table | None:
    """With a quantile SLO, per class the SLO whose statistic is shown (the one binding at
    the horizon before the actions, :mod:`streams.predict.slo_view`) and its value before
    and after; ``None`` without one (the mean's table says it all). A table of its own: both
    fit 80 columns."""
    from rich import box

    from streams.predict.slo_view import ClassSlo, slo_text

    if not any(s.quantiles for s in cmp.slos):
        return None
    table = Table(title=f"{escape(name)}: each class's SLO statistic (s)",
                  box=box.SIMPLE_HEAD)
    for head in ("class", "SLO", f"now ({cmp.users}) before", "after",
                 f"{_second(cmp)} before", "after"):
        table.add_column(head, justify="left" if head in ("class", "SLO") else "right",
                         min_width=max(len(s.name) for s in cmp.slos) if head == "class"
                         else 5 if head == "after" else None)
    for i, slo in enumerate(cmp.slos):
        stat = cmp.statistics[i]
        shown = ClassSlo(slo.name, tuple(b for b in slo.bounds if b[0] == stat))
        cells = [_fmt(v[i]) for pair in (cmp.slo_now, cmp.slo_forecast) for v in pair]
        table.add_row(escape(slo.name), escape(slo_text(shown)), *cells)
    return table


def _second(cmp: Any) -> str:
    """The second population's column head: ``horizon (180)``, or ``at 400`` (``--users``)."""
    return f"at {cmp.users_forecast}" if cmp.asked else f"horizon ({cmp.users_forecast})"


def _describe(action: Any, model: Any) -> str:
    from streams.predict.whatif import describe

    return describe(action, model)


@app.command(short_help="Capacity with more replicas, cores, a faster CPU or a larger pool.")
def whatif(store: Optional[Path] = typer.Option(None, metavar="PATH",
                                                help="an embedded run's SQLite store "
                                                     "(OUT/perfcast.sqlite, or OUT)"),
           source: Optional[Path] = typer.Option(None, metavar="FILE",
                                                 help="a JSON-lines trace: run the "
                                                      "embedded pipeline over it first "
                                                      "('-': standard input)"),
           config: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                                 metavar="FILE",
                                                 help="TOML configuration (with --source)"),
           out: Optional[Path] = typer.Option(None, metavar="DIR",
                                              help="with --source: where the run's "
                                                   "outputs go (default: a temporary "
                                                   "directory)"),
           replicate: list[str] = typer.Option([], metavar="TIER=K",
                                               help="K replicas of the tier (K x its "
                                                    "cores, one queue)"),
           cores: list[str] = typer.Option([], metavar="TIER=C",
                                           help="the tier with C cores"),
           cpu_speed: list[str] = typer.Option([], metavar="TIER=S",
                                               help="the tier on a CPU S times as fast "
                                                    "(demand / S)"),
           pool: list[str] = typer.Option([], metavar="NAME=SIZE",
                                          help="the thread or connection pool NAME (its "
                                               "name in the system's pools table) with "
                                               "SIZE tokens"),
           system: list[str] = typer.Option([], metavar="NAME",
                                            help="only this system (repeat for several; "
                                                 "default: all)"),
           rate: Optional[float] = typer.Option(None, metavar="R",
                                                help="the open model at R requests/s (the "
                                                     "measured class mix): per-class "
                                                     "response times, utilizations, stable "
                                                     "or not"),
           users: Optional[int] = typer.Option(None, metavar="N",
                                               help="the closed model at N users (each "
                                                    "class its share of them) beside the "
                                                    "current users"),
           ) -> None:
    """What if a tier had more replicas, cores or a faster CPU, or a pool more tokens? Each
    system's last model
    (the one its last prediction used, MAP(2) of bursty tiers included) before and after:
    capacity and per-class response times now and at the horizon; with a quantile SLO also
    the value of each class's SLO statistic (docs/pipeline.md). An open system's, or any with
    ``--rate R``, at a request rate: capacity in requests/s. ``--users N``: a closed
    system's model at ``N`` users in place of the horizon's."""
    import tempfile

    from streams.cli.embedded import STORE_NAME
    from streams.predict.model_row import model_from_row
    from streams.sinks.store import read_models
    from streams.predict.whatif import check_users, compare

    actions = _actions(replicate, cores, cpu_speed, pool)
    if rate is not None and not (math.isfinite(rate) and rate >= 0):
        fail(f"whatif: --rate: must be a finite request rate >= 0 (per s), got {rate!r}")
    if users is not None and users < 1:
        fail(f"whatif: --users: must be a whole number of users >= 1, got {users!r}")
    if users is not None and rate is not None:
        fail("whatif: give one of --users (a closed system's population) and --rate (an open "
             "system's request rate), not both")
    if (store is None) == (source is None) and (store is not None or actions
                                                 or rate is not None or users is not None):
        fail("whatif: give exactly one of --store and --source")
    if not actions and rate is None and users is None:
        fail("whatif: no change to try: give at least one of --replicate TIER=K, --cores "
             "TIER=C, --cpu-speed TIER=S, --pool NAME=SIZE")
    with tempfile.TemporaryDirectory(prefix="perfcast-whatif-") as tmp:
        if source is not None:
            from streams.cli.embedded import read_jsonl, run_embedded

            run_dir = out or Path(tmp)
            summary = run_embedded(read_jsonl(_source(source)), _config(config), run_dir)
            console.print(f"ran the pipeline over {summary.records} windows "
                          f"({summary.predictions} predictions)")
            store = run_dir / STORE_NAME
        assert store is not None
        if store.is_dir():
            store = store / STORE_NAME
        try:
            rows = read_models(store)
        except ValueError as err:
            fail(f"whatif: {err}")
    rows = [r for r in rows if not system or r[0] in system]
    if not rows:
        fail("whatif: no solved model in the store"
             + (f" for {', '.join(map(repr, system))}" if system else ""))
    try:
        models = [(name, when, n, n_fc, model_from_row(name, spec))
                  for name, when, n, n_fc, spec in rows]
    except ValueError as err:
        fail(f"whatif: store {str(store)!r}: {err}")
    known = {t for *_, m in models for t in m.tiers}
    unknown = sorted({a.tier for a in actions if a.kind != "pool"} - known)
    if unknown:
        fail(f"whatif: no system has tier {unknown[0]!r} (tiers: {', '.join(sorted(known))})")
    pools = {p.name for *_, m in models for p in m.pools}
    unknown = sorted({a.tier for a in actions if a.kind == "pool"} - pools)
    if unknown:
        fail(f"whatif: no system has pool {unknown[0]!r} (pools: "
             f"{', '.join(sorted(pools)) or 'none modelled'})")
    opened = {name: (spec.get("open") or {}) for name, _w, _n, _f, spec in rows
              if isinstance(spec, dict)}
    for name, when, n, n_fc, model in models:
        mine = [a for a in actions if a.tier in (model.tiers if a.kind != "pool"
                                                 else [p.name for p in model.pools])]
        if users is not None and opened.get(name):
            fail(f"whatif: --users {users}: system {name!r} is an open workload (a request "
                 f"rate, not a population): ask it with --rate R")
        if rate is not None or opened.get(name):
            _whatif_rate(name, model, mine, when, rate, opened.get(name) or {})
            continue
        if users is not None:
            try:
                check_users(model, mine, users, name)
            except ValueError as err:
                fail(f"whatif: {err}")
        try:
            cmp = compare(model, mine, n, n_fc if users is None else users, users is not None)
        except (ValueError, ArithmeticError, MemoryError) as err:    # a row beyond the solvers
            fail(f"whatif: system {name!r}: the model cannot be solved "
                 f"({type(err).__name__}: {str(err)[:200]})")
        console.print(_whatif_table(name, model, cmp, when))
        slos = _whatif_slo_table(name, cmp)
        if slos is not None:
            console.print(slos)


@app.command()
def produce(source: str = typer.Option(..., metavar="FILE|demo",
                                      help="a JSON-lines trace ('-': standard input), or "
                                           "'demo' for the simulated shop"),
            bootstrap: Optional[str] = BOOTSTRAP,
            rate: Optional[float] = typer.Option(None, metavar="N",
                                                 help="windows per second (default: as "
                                                      "fast as possible)"),
            config: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                                  metavar="FILE",
                                                  help="TOML configuration (its kafka table; "
                                                       "an [input] metric format)"),
            start: Optional[str] = typer.Option(
                None, metavar="TIME", help="demo only: event time of the first window: 'now', ISO 8601 or "
                           "epoch seconds (default: the demo's own, 2026-11-20T10:00:00Z)"),
            connect_timeout: Optional[float] = _CONNECT_TIMEOUT,
            ) -> None:
    """Publish window records to perfcast.windows (keyed by system). With an [input] metric
    format in --config, the lines are that format's records, keyed by their system. Exit code
    4 when Kafka does not answer within the connect timeout."""
    from streams.kafka.connect import Unreachable
    from streams.kafka.produce import produce as send

    cfg = _config(config, bootstrap, connect_timeout)
    if start is not None and source != "demo":
        fail("start: only with --source demo (a trace keeps its times)")
    if source == "demo":
        from streams.cli.demo import DemoScenario, demo_records
        records: Any = demo_records(DemoScenario() if start is None
                                    else DemoScenario(start_s=_start_time(start)))
    else:
        from streams.cli.embedded import read_jsonl
        records = read_jsonl(_source(Path(source)))
    from streams.kafka.topics import ensure_topics

    key: Any = {}
    if cfg.input is not None:           # metric samples: keyed by their system, in order
        from functools import partial

        from streams.sources.sample_windows import sample_key
        key = {"key": partial(sample_key, cfg.input)}
    try:
        ensure_topics(cfg.kafka)
        stats = send(records, cfg.kafka, rate=rate, **key)
    except Unreachable as err:
        _unreachable(err)
    problems = ", ".join(f"{n} {what}" for n, what in ((stats.skipped, "skipped"),
                                                       (stats.failed, "refused by Kafka")) if n)
    console.print(f"sent {stats.sent} {'records' if cfg.input else 'windows'} to "
                  f"{cfg.kafka.topic('windows')} at "
                  f"{cfg.kafka.bootstrap} in {stats.seconds:.1f} s ({stats.rate:.0f}/s)"
                  + (f"; {problems} (see the warnings)" if problems else ""))


def _start_time(text: str) -> float:
    """``--start``: ``now``, ISO 8601 with a zone, or epoch seconds."""
    import time

    from streams.core.records import InvalidWindow, parse_end

    if text.strip().lower() == "now":
        return time.time()
    try:
        return parse_end(float(text) if text.strip().replace(".", "", 1).isdigit() else text)
    except InvalidWindow as err:
        fail(f"start: {text!r}: {err.reason}")


@app.command(short_help="Run the Faust worker (Kafka in; Kafka, InfluxDB out).")
def worker(config: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                                 metavar="FILE",
                                                 help="TOML configuration (systems, kafka, "
                                                      "influxdb; docs/configuration.md)"),
           bootstrap: Optional[str] = BOOTSTRAP,
           app_id: str = typer.Option("perfcast", metavar="NAME",
                                      help="Faust application id (consumer group, table "
                                           "topics)"),
           partitions: int = typer.Option(4, metavar="N",
                                          help="partitions of the perfcast topics"),
           core_process: bool = typer.Option(True, "--core-process/--inline-core",
                                             help="run the core in a child process (a second "
                                                  "core) or in the worker's event loop"),
           loglevel: str = typer.Option("warning", metavar="LEVEL",
                                        help="log level: debug, info, warning, error"),
           connect_timeout: Optional[float] = _CONNECT_TIMEOUT) -> None:
    """Run the Faust worker: perfcast.windows -> estimates, predictions, alerts (Kafka and
    InfluxDB). Connection settings come from the environment (see docs/configuration.md).
    Exit code 4 when Kafka or InfluxDB does not answer at start within the connect timeout;
    once running, both are retried. Exit code 2 when the installed faust-streaming, aiokafka
    or mode-streaming is a version the worker does not support."""
    from streams.kafka.faust_adapter import UnsupportedFramework, check_versions
    from streams.kafka.worker import build_app, faust_worker

    from streams.kafka.connect import Unreachable, check_influx
    from streams.kafka.topics import ensure_topics

    cfg = _config(config, bootstrap, connect_timeout)
    try:
        check_versions()
    except UnsupportedFramework as err:
        fail(f"unsupported version: {err}")
    try:
        ensure_topics(cfg.kafka, partitions)
        if cfg.influxdb.url:
            check_influx(cfg.influxdb)
    except Unreachable as err:
        _unreachable(err)
    faust_app = build_app(cfg, app_id=app_id, partitions=partitions,
                          core_process=core_process)
    sys.argv = sys.argv[:1]
    faust_worker(faust_app, loglevel).execute_from_commandline()


# The Prometheus source (streams/cli/prometheus.py): `perfcast ingest prometheus`, and
# `perfcast run --source prometheus --prom-config FILE --from T --to T` (wraps `run` above).
from streams.cli.prometheus import register as _register_prometheus  # noqa: E402

_register_prometheus(app)


if __name__ == "__main__":  # pragma: no cover
    app()
