"""What a newcomer reads on an 80-column terminal: every command's ``--help`` (no line over 80
columns, no option or variable name cut, every option described, plain metavars), the closing
summary of ``perfcast run``, and what the model assumed for inputs a trace does not give."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from solvers.simulation.physical import PhysicalNetwork, Tier, monitor_physical
from streams.cli.commands import app
from streams.core.records import CORES_ASSUMED, parse_window

runner = CliRunner()
WIDTH = 80


def _commands() -> list[list[str]]:
    """Every command path of ``perfcast``: ``[]``, ``["demo"]``, ``["grafana", "push"]``."""
    paths: list[list[str]] = []

    def walk(cmd: Any, path: list[str]) -> None:
        paths.append(path)
        if hasattr(cmd, "list_commands"):
            ctx = cmd.context_class(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


def _command(path: list[str]) -> Any:
    """The command (typer's own copy of click's classes) at ``path``."""
    command = typer.main.get_command(app)
    for name in path:
        command = command.get_command(command.context_class(command), name)
    return command


def test_every_command_is_listed():
    names = {" ".join(p) for p in _commands()}
    assert {"demo", "run", "report", "whatif", "produce", "worker", "grafana push",
            "grafana generate", "ingest prometheus"} <= names, names


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "perfcast")
def test_help_fits_80_columns_and_describes_every_option(path):
    """``COLUMNS=80``: no line over 80 columns, no ellipsis (rich's table cut
    ``--update-influx-t…`` and ``PERFCAST_KAFKA_BOOTSTRA…``), no type label in angle brackets
    (``<bool>``, ``<list[str]>``, ``<float range>``), every option with its help and each of
    its names whole on one line."""
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)},
                           terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    text = result.output
    lines = text.splitlines()
    assert all(len(line) <= WIDTH for line in lines), [x for x in lines if len(x) > WIDTH]
    assert "…" not in text, text
    assert not re.search(r"<[a-z][a-z\[\]. _]*>", text), text
    command = _command(path)
    for param in command.params:
        if param.param_type_name != "option" or param.hidden:
            continue
        assert param.help, f"{' '.join(path)} {param.opts[0]} has no help"
        for opt in param.opts + param.secondary_opts:
            assert re.search(rf"(^|[\s,/]){re.escape(opt)}([\s,=/]|$)", text, re.M), \
                (opt, text)
    for var in set(re.findall(r"PERFCAST_[A-Z_]+", " ".join(
            getattr(p, "help", None) or "" for p in command.params))):
        assert var in text, (var, text)


def test_an_error_is_one_plain_line_on_stderr(tmp_path):
    """Every command's own errors read ``error: WHAT: why`` on standard error, one line."""
    result = runner.invoke(app, ["run", "--source", str(tmp_path / "none.jsonl")])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"error: source: no such file {str(tmp_path / 'none.jsonl')!r}\n"


# -- the assumptions of a trace without users, cores, response times ---------------------------

def _trace(tmp_path: Path, drop: tuple[str, ...]) -> Path:
    """Two tiers, one class, users 20 -> 65 with a think time of 1 s, 12 minutes of 5-s
    windows; ``drop``: the fields left out of every record."""
    net = PhysicalNetwork(tiers=(Tier("web", 1, 0.004, (1.0,)), Tier("db", 1, 0.003, (1.0,))),
                          classes=("buy",), mix=(1.0,), think_time=1.0, population=20)
    records = monitor_physical(net, 720.0, 5.0, schedule=[(240 + 60 * i, 20 + 5 * (i + 1))
                                                          for i in range(8)],
                               system="s", start_time=1.7e9, iso_time=True, seed=3)
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k not in drop}) + "\n"
                            for r in records))
    return path


def _run(tmp_path: Path, drop: tuple[str, ...], workload: str = "closed") -> tuple[str, dict]:
    """``perfcast run`` of the trace at 80 columns; ``workload``: the configured kind (the
    default ``auto`` reads a trace without users as open)."""
    out = tmp_path / "out"
    config = tmp_path / "perfcast.toml"
    config.write_text(f'[defaults]\nworkload = "{workload}"\n')
    result = runner.invoke(app, ["run", "--source", str(_trace(tmp_path, drop)), "--out",
                                 str(out), "--config", str(config)],
                           env={"COLUMNS": str(WIDTH)}, terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= WIDTH for line in lines), [x for x in lines if len(x) > WIDTH]
    last = json.loads((out / "predictions.jsonl").read_text().splitlines()[-1])
    return result.output, last


def _users(n: int) -> str:
    return f"{n} user" + ("" if n == 1 else "s")


def _summary(output: str) -> str:
    return " ".join(output[output.index("\nsummary:"):].split())


def test_a_trace_without_users_says_what_population_and_think_time_it_assumed(tmp_path):
    """No ``users``, the workload configured closed: the population comes from Little's law
    over the measured response times with a think time of 0 (none configured, none
    estimable): both are flagged, and the console's summary says so too; the visits are
    learned from the completions."""
    output, last = _run(tmp_path, ("users",))
    assert last["users_source"] == "littles_law" and last["think_time_s"] == 0.0
    flags = [f for f in last["flags"] if f.startswith("assumed: ")]
    assert flags == [
        f"assumed: {_users(last['users'])} (users_source littles_law): the windows give no "
        f"users, so N = X (R + Z) from the measured throughput and response times with think "
        f"time 0 s",
        "assumed: think time 0 s: think_time_s is not configured and cannot be estimated by "
        "Little's law without users and response times (set think_time_s)"], last["flags"]
    summary = _summary(output)
    for flag in flags:
        assert flag in summary, (flag, summary)


def test_a_trace_without_users_is_read_as_open_and_says_so(tmp_path):
    """Under ``workload = "auto"`` (the default) a trace without users and without a think time
    is an open workload: the prediction and the console say that this was assumed and why,
    and how to say otherwise."""
    output, last = _run(tmp_path, ("users",), workload="auto")
    assert last["workload"] == "open"
    assert last["workload_reason"] == "no users and no think time: request rates only"
    flags = [f for f in last["flags"] if f.startswith("assumed: an open workload")]
    assert flags == ["assumed: an open workload (no users and no think time: request rates "
                     "only): capacity and headroom in requests per second; set workload = "
                     "\"closed\" and think_time_s where users think between requests"]
    summary = _summary(output)
    assert flags[0] in summary and "req/s" in summary, summary


def test_a_bare_trace_says_it_assumed_the_population_and_the_cores(tmp_path):
    """No ``users``, no response times, no ``cores``: the population is the model's inversion
    of the measured throughput, every tier one core; each flagged once per prediction."""
    output, last = _run(tmp_path, ("users", "response_time_s", "cores"))
    assert last["users_source"] == "model_inversion"
    flags = [f for f in last["flags"] if f.startswith("assumed: ")]
    assert flags[:2] == [
        "assumed: web has 1 core: its windows give no cores (the contract's default)",
        "assumed: db has 1 core: its windows give no cores (the contract's default)"]
    assert any(f.startswith(f"assumed: {_users(last['users'])} (") and "model_inversion" in f
               for f in flags), flags
    assert any(f.startswith("assumed: think time 0 s") for f in flags), flags
    summary = _summary(output)
    assert all(f in summary for f in flags), summary


def test_a_window_without_cores_carries_the_flag_both_ways():
    """The fast decoder and the validator agree: a record without ``cores`` is one core,
    flagged; with ``cores`` it is not."""
    record = {"system": "s", "tier": "t", "end": 1.7e9, "window_s": 5.0, "utilization": 0.5,
              "completions": {"a": 10}}
    for raw in (json.dumps(record), MappingProxyType(record)):    # fast path, validator
        w = parse_window(raw)
        assert w.cores == 1 and w.flags == (CORES_ASSUMED,), w
    w = parse_window(json.dumps({**record, "cores": 2}))
    assert w.cores == 2 and w.flags == ()


# -- the test command's progress -----------------------------------------------------------------

@pytest.mark.slow
def test_the_test_command_names_each_file_as_it_starts_and_ends_on_the_summary(tmp_path):
    """``infra/test.sh``'s plugin (``tests/file_progress.py``): a stamped line per test file,
    in order, before its tests' dots; pytest's summary line stays the last line, after the
    slowest tests."""
    import os
    import subprocess
    import sys

    for name, body in (("test_a.py", "def test_1():\n    pass\n\ndef test_2():\n    pass\n"),
                       ("test_b.py", "def test_3():\n    pass\n")):
        (tmp_path / name).write_text(body)
    tests_dir = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": str(tests_dir), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PERFCAST_TEST_PROGRESS", None)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "file_progress",
                             "-p", "no:cacheprovider", "--durations=2", "-c", os.devnull,
                             "--rootdir", str(tmp_path), str(tmp_path)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    stamped = [x for x in lines if re.fullmatch(r"\[\d\d:\d\d:\d\d \+\dm\d\ds\] \S+", x)]
    assert [x.split()[-1] for x in stamped] == ["test_a.py", "test_b.py"], result.stdout
    assert lines[lines.index(stamped[0]) + 1].startswith(".."), result.stdout
    assert any("slowest 2 durations" in x for x in lines), result.stdout
    assert re.fullmatch(r"3 passed in [\d.]+s", lines[-1]), result.stdout


def test_one_sentence_ties_the_busiest_tier_the_breach_tier_and_the_remedy():
    from streams.cli.closing import Solve, why_sentence

    base = Solve(0.0, "map", 80, 118, False, 38, 480.0, 118, "front", "db", "buy", 0.86,
                 208.0, "db to 2 cores (from 1)", "db", ())
    assert why_sentence(base) == ("front is the busiest tier, but db (bursty, I = 208) is "
                                  "where the SLA breaks: it holds 86% of buy's response time "
                                  "there; the remedy acts on db.")
    same = replace(base, bottleneck_tier="db", breach_idc=None, remediation_tier="front")
    assert why_sentence(same) == ("db is the bottleneck and where the SLA breaks: it holds 86% "
                                  "of buy's response time there; the cheapest remedy acts on "
                                  "front instead.")
    admission = replace(base, remediation_tier=None, remediation_summary="admit at most 118")
    assert why_sentence(admission).endswith("no action on one tier restores the SLA, so the "
                                            "remedy limits admission.")
    assert why_sentence(replace(base, breach_tier=None)) == ""
