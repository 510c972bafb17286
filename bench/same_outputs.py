"""Do two versions of perfcast give the same outputs? ``perfcast run`` over three traces, the
outputs compared field by field. From the repository root:

    python -m bench.same_outputs traces DIR         # write the three traces and configs to DIR
    python -m bench.same_outputs run DIR OUT        # perfcast run over each trace -> OUT/<name>/
    python -m bench.same_outputs compare OUT1 OUT2  # field by field; floats within 1e-12

The traces (``traces`` imports this checkout's ``streams`` and ``bench``):

- ``demo``: the demo's shop (:mod:`streams.cli.demo`: tiers ``front`` and a bursty ``db``;
  45 minutes of 5-s windows, 60 users for 20 minutes, then 5 more a minute), with the demo's
  think time and SLA in ``demo.toml``;
- ``pipeline``: the default workload of :mod:`bench.speed.pipeline` (100 systems x 3 tiers x 14
  classes, 60 window ends, seed 0), run on perfcast's defaults (``pipeline.toml`` is empty);
- ``multicore``: the ramp of :mod:`bench.e2e.multicore` (web 4 cores, app 4, db 8 bursty; 20
  minutes at 86 users, a ramp to 321 over 40 minutes, 10 minutes there; seed 1), its tiers and
  SLA in ``multicore.toml``.

``run`` calls the ``perfcast`` found beside this Python (or ``$PERFCAST``) with each trace and
its TOML (none where the TOML is empty), so one trace directory serves two checkouts: write the
traces once, run each checkout over them, compare. ``compare`` reads the four JSON-lines outputs,
every table of the SQLite store and the report (its store path aside); it exits 1 on any
difference. A refactoring that changes no behaviour passes with 0 differences.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

OUTPUTS = ("estimates", "predictions", "alerts", "deadletter")
#: a float pair is the same within this, relative to the larger magnitude (at least 1)
TOLERANCE = 1e-12

DEMO_TOML = """\
[systems.shop]
tiers = ["front", "db"]
think_time_s = {think}
sla_s = {{ "*" = {sla} }}
solve_interval_s = 60.0
solve_offset_s = 0.0
horizon_s = 600.0
trend_window_s = 600.0
"""

MULTICORE_TOML = """\
[systems.shop]
tiers = ["web", "app", "db"]
sla_s = {{ "*" = {sla} }}
"""


def write_traces(out: Path) -> None:
    """Write ``demo``, ``pipeline`` and ``multicore`` to ``out`` (created if missing): each trace
    as ``<name>.jsonl`` (one record a line, stream order) beside ``<name>.toml``, its perfcast
    configuration (empty for ``pipeline``: perfcast's defaults)."""
    out.mkdir(parents=True, exist_ok=True)
    from streams.cli.demo import THINK_TIME, DemoScenario, demo_records

    sc = DemoScenario(duration_s=2700.0)
    _write(out / "demo.jsonl", demo_records(sc))
    (out / "demo.toml").write_text(DEMO_TOML.format(think=THINK_TIME, sla=sc.sla_s))

    from bench.speed.pipeline import workload

    _write(out / "pipeline.jsonl", workload(100, 60, 0))
    (out / "pipeline.toml").write_text("")

    from bench.e2e.multicore import SLA_S, network, ramp_records

    _write(out / "multicore.jsonl", ramp_records(214.0, seed=1, network_at=network))
    (out / "multicore.toml").write_text(MULTICORE_TOML.format(sla=SLA_S))


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def run_all(traces: Path, out: Path) -> None:
    exe = os.environ.get("PERFCAST") or str(Path(sys.executable).with_name("perfcast"))
    for trace in sorted(traces.glob("*.jsonl")):
        config = trace.with_suffix(".toml")
        args = [exe, "run", "--source", str(trace), "--out", str(out / trace.stem)]
        if config.read_text().strip():
            args += ["--config", str(config)]
        done = subprocess.run(args, capture_output=True, text=True)
        print(f"{trace.stem}: exit {done.returncode}")
        if done.returncode != 0:
            sys.exit(done.stderr[-4000:])


def _lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def differences(a: Any, b: Any, where: str = "") -> Iterator[str]:
    """Each place where ``a`` and ``b`` differ: keys, lengths, types, values (floats within
    :data:`TOLERANCE`)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                yield f"{where}.{key}: only in {'second' if key not in a else 'first'}"
            else:
                yield from differences(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{where}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{where}[{i}]")
    elif isinstance(a, bool) or isinstance(b, bool) or not (
            isinstance(a, (int, float)) and isinstance(b, (int, float))):
        if a != b or type(a) is not type(b):
            yield f"{where}: {a!r} != {b!r}"
    elif isinstance(a, float) and math.isnan(a) and isinstance(b, float) and math.isnan(b):
        return
    elif type(a) is not type(b) or abs(a - b) > TOLERANCE * max(1.0, abs(a), abs(b)):
        yield f"{where}: {a!r} != {b!r}"


def _tables(path: Path) -> dict[str, list[list[Any]]]:
    """Every table of an embedded run's SQLite store, its rows in order."""
    with sqlite3.connect(path) as db:
        names = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {n: [list(row) for row in db.execute(f'SELECT * FROM "{n}" ORDER BY rowid')]
                for n in names}


def _report(run_dir: Path) -> str:
    """The report without the one thing that differs between two runs: the store's path."""
    path = run_dir / "report.html"
    return re.sub(r"store <code>[^<]*</code>", "store <code>RUN</code>",
                  path.read_text()) if path.exists() else ""


def compare(first: Path, second: Path) -> int:
    total = 0
    for run in sorted(p.name for p in first.iterdir() if p.is_dir()):
        pairs = [(name, _lines(first / run / f"{name}.jsonl"),
                  _lines(second / run / f"{name}.jsonl")) for name in OUTPUTS]
        pairs.append(("store", _tables(first / run / "perfcast.sqlite"),
                      _tables(second / run / "perfcast.sqlite")))
        for name, a, b in pairs:
            diffs = list(differences(a, b, f"{run}/{name}"))
            total += len(diffs)
            print(f"{run}/{name}: {len(a)} {'tables' if name == 'store' else 'records'}, "
                  f"{len(diffs)} differences")
            for d in diffs[:10]:
                print("   ", d)
        same = _report(first / run) == _report(second / run)
        total += not same
        print(f"{run}/report.html: {'the same' if same else 'DIFFERS'}")
    print(f"{total} differences")
    return 1 if total else 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("traces").add_argument("dir", type=Path)
    r = sub.add_parser("run")
    r.add_argument("traces", type=Path)
    r.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("first", type=Path)
    c.add_argument("second", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "traces":
        write_traces(args.dir)
    elif args.cmd == "run":
        run_all(args.traces, args.out)
    else:
        sys.exit(compare(args.first, args.second))


if __name__ == "__main__":
    main()
