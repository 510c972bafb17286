"""The real two-tier testbed end to end, CI size (bench/testbed/README.md): PostgreSQL 15 and
the shop app on gunicorn, seen through process-exporter, the app's prometheus-client metrics and
a real Prometheus, read by perfcast's Prometheus source.

One session brings the testbed up (``infra/testbed/up.sh``; ``down.sh`` afterwards, also on
failure) and runs closed load at three small populations, one after the other
(:data:`STEPS`: users, think time, seconds), with the load generator ``bench/testbed/load.py``
logging every request and snapshotting the servers' own counters. Meanwhile a ``perfcast
worker`` waits on Kafka, and once the first population is done ``perfcast ingest prometheus``
catches up on it and then follows the same Prometheus live: the worker turns the windows into
estimates and predictions in Kafka and InfluxDB as they come. The tests then read the run:

- the backtest, ``perfcast run --source prometheus`` with ``bench/testbed/perfcast.toml`` and
  ``system.toml`` over the load's span: every window read (no gaps), no dead letters, per-class
  demands for both tiers, the database's aggregate (sum over classes of X_c * D_c) over the
  run within :data:`AGGREGATE_TOLERANCE` of its measured busy time, predictions with a finite
  response time and throughput for every class, at least one per population;
- the ground truth (``bench/testbed/truth.py``) of every population, from the clients' log and
  the servers' counters: every request answered, both tiers' busy CPU, per-class demands;
- the per-class demand errors of the backtest's estimates against the truth's demand (the
  tier's busy CPU shared out by the server-reported time) and against the server's own figure,
  written to ``demand_errors.json`` in the test's tmp dir and printed;
- the file path: the windows the backtest read, written as JSON lines and run with ``perfcast
  run --source FILE``, give the same predictions within 1e-6; read from Prometheus a second time
  they are the same windows;
- the live path: the worker's predictions (Kafka, InfluxDB) equal the embedded run's over the
  windows the ingest sent, within 1e-6.

Not asserted yet, and why: per-class demands within 10% (or 15%) of the server-reported CPU,
response times or capacity within the issue's margins, and the app tier's aggregate. Today's
estimators split the database's cost wrongly (per class from -100% to +3680% in these runs: four
collinear classes, 8 windows per population, 5-16% utilization), and the per-class split is
the work of the estimator changes; this test records the errors so that they can tighten it.
The app's time at the tier (its request histogram less the database calls: 0.1-0.3 ms) is
below its CPU per request (1-4 ms, most of it gunicorn's accept and parsing and the per-second
``/metrics`` merge, outside the timed part), and its Kalman filter, started near those times,
climbs slowly: -76% to -92% of the busy time in three runs of five, +8% to +19% in two.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from ci_policy import unavailable
from pipeline_harness import ROOT, TopicReader, Worker, assert_close, unique, wait_for
from waiting import wait_until

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(600)]

TESTBED = ROOT / "infra" / "testbed"
BENCH = ROOT / "bench" / "testbed"
#: (users, mean think time s, seconds) of the closed load, one population after the other
STEPS = ((2, 0.5, 40.0), (4, 0.5, 40.0), (8, 0.5, 40.0))
SEED = 49
#: bench/testbed/perfcast.toml's window
WINDOW_S = 5.0
#: the database's sum over classes of X_c * D_c against its measured busy time, over the
#: run's windows: the Kalman filter tracks the utilization it is fed, but at 5-16% utilization
#: a 5-s window holds 25-80 of the kernel's 10-ms CPU ticks. It is judged over the whole run,
#: not per population: search's cost depends on the data it draws, and one population's 25-90
#: searches cost 55-112 ms a request by the server's own count in one run, a sample mean the
#: filter (which carries its estimate across populations) cannot follow step by step (+37% at
#: 4 users there; the populations' errors are recorded in ``demand_errors.json``)
AGGREGATE_TOLERANCE = 0.30
#: the file and the live path against the backtest (the issue's acceptance)
SAME = 1e-6
CLASSES = ("buy", "home", "product", "search")


def _env() -> dict[str, str]:
    """The subprocesses' environment: the testbed's Prometheus is the mapping's URL, not the
    services' (``PERFCAST_PROMETHEUS_URL`` would override it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TESTBED_PYTHON": sys.executable}
    env.pop("PERFCAST_PROMETHEUS_URL", None)
    return env


def _perfcast(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "streams.cli.commands", *args], cwd=cwd,
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _testbed_settings() -> dict[str, str]:
    """env.sh's settings (ports, the run-dir state file), as the scripts see them."""
    out = subprocess.run(["bash", "-c", f'source "{TESTBED}/env.sh"; '
                          'for v in ${!TESTBED_@}; do echo "$v=${!v}"; done'],
                         env=_env(), capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@pytest.fixture(scope="session")
def testbed(tmp_path_factory):
    """The testbed up (``infra/testbed/up.sh``) for the session, down afterwards -- also when
    up fails halfway or a test fails. Missing packages skip, and fail under CI=true."""
    settings = _testbed_settings()
    needed = [f"{settings['TESTBED_PG_BIN']}/initdb", "prometheus", "prometheus-process-exporter",
              "prometheus-postgres-exporter", "prometheus-node-exporter"]
    missing = [b for b in needed if not shutil.which(b)]
    try:
        import gunicorn  # noqa: F401
        import prometheus_client  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        missing.append(str(exc))
    if missing:
        unavailable(f"the testbed is not installed: {missing}",
                    "infra/test.sh runs infra/testbed/install.sh")
    state = Path(settings["TESTBED_STATE"])
    if state.is_file() and Path(state.read_text().strip()).is_dir():
        # someone's testbed (down.sh would stop it, whoever started it)
        pytest.fail(f"a testbed is up already (run dir {state.read_text().strip()}): "
                    f"bash infra/testbed/down.sh first")
    log = tmp_path_factory.mktemp("testbed") / "up-down.log"
    env = _env()
    up = subprocess.run(["bash", str(TESTBED / "up.sh")], env=env, capture_output=True,
                        text=True, timeout=300)
    log.write_text(up.stdout + up.stderr)
    exports = {k: v.strip("'") for k, v in
               re.findall(r"^export (TESTBED_\w+)=(.*)$", up.stdout, re.M)}
    run_dir = exports.get("TESTBED_RUN_DIR")
    try:
        assert up.returncode == 0, f"infra/testbed/up.sh failed:\n{up.stdout}{up.stderr}"
        # the database's session lifted among the host's (or why not): bench/testbed/autogroup.py
        assert "the database's session: " in up.stdout, up.stdout
        yield {**settings, **exports}
    finally:
        # this run's dir, else the one up.sh recorded before it failed (never an exported one)
        down_env = {k: v for k, v in env.items() if k != "TESTBED_RUN_DIR"}
        down_env.update({"TESTBED_RUN_DIR": run_dir} if run_dir else {})
        down = subprocess.run(["bash", str(TESTBED / "down.sh")], env=down_env,
                              capture_output=True, text=True, timeout=300)
        with open(log, "a") as fh:
            fh.write(down.stdout + down.stderr)
        assert down.returncode == 0, f"infra/testbed/down.sh failed:\n{down.stdout}{down.stderr}"
        assert not (run_dir and Path(run_dir).exists()), f"down.sh left {run_dir}"


class UsersGauge:
    """``testbed_load_users`` on the load's port for the whole run, set to each population's
    users before its load starts: the load generator's own gauge (``load.py
    --metrics-port``) would be down between two populations, and a series missing at a
    window's edge makes the window a gap."""

    def __init__(self, port: int) -> None:
        from prometheus_client import CollectorRegistry, Gauge, start_http_server

        registry = CollectorRegistry()
        self.gauge = Gauge("testbed_load_users", "users of the closed load", registry=registry)
        self.server, self.thread = start_http_server(port, addr="127.0.0.1", registry=registry)

    def set(self, users: int) -> None:
        self.gauge.set(users)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _prometheus_scraped_past(url: str, t: float) -> bool:
    """Whether Prometheus has scraped the app after ``t`` (so a lookup at ``t`` is final)."""
    query = f"{url}/api/v1/query?" + urllib.parse.urlencode(
        {"query": 'timestamp(up{job="app"})', "time": time.time()})
    with urllib.request.urlopen(query, timeout=10) as resp:
        result = json.loads(resp.read())["data"]["result"]
    return bool(result) and float(result[0]["value"][1]) > t


def _live_files(tmp: Path, system: str, prefix: str) -> tuple[Path, Path]:
    """bench/testbed's mapping and system settings under a system name of this run (InfluxDB
    and Kafka are shared with other tests), with a topic prefix of its own."""
    source = (BENCH / "perfcast.toml").read_text().replace('system = "testbed"',
                                                            f'system = "{system}"')
    assert f'system = "{system}"' in source
    # every table of the system, its pools' too, under the run's own name
    config = (BENCH / "system.toml").read_text().replace("[systems.testbed",
                                                          f'[systems."{system}"')
    assert system in config and "[systems.testbed" not in config
    config += f'\n[kafka]\ntopic_prefix = "{prefix}"\n'
    (tmp / "live-source.toml").write_text(source)
    (tmp / "live-config.toml").write_text(config)
    return tmp / "live-source.toml", tmp / "live-config.toml"


@pytest.fixture(scope="session")
def run(testbed, tmp_path_factory, kafka_bootstrap, influx_url):
    """The load at :data:`STEPS`, followed live by ingest -> Kafka -> worker -> InfluxDB, then
    the backtest over its span and the truth of each population."""
    from streams.core.config import load_config
    from streams.kafka.topics import ensure_topics

    tmp = tmp_path_factory.mktemp("run")
    prom_url = f"http://127.0.0.1:{testbed['TESTBED_PROM_PORT']}"
    app_url = f"http://127.0.0.1:{testbed['TESTBED_APP_PORT']}"
    system, prefix = unique("testbed"), unique("tb")
    live_source, live_config = _live_files(tmp, system, prefix)
    config = load_config(live_config)
    gauge = UsersGauge(int(testbed["TESTBED_LOAD_PORT"]))
    worker = Worker(live_config, unique("tb-app"), tmp / "worker.log")
    ingest = None
    readers: list[TopicReader] = []
    steps: list[dict[str, Any]] = []
    try:
        ensure_topics(config.kafka, partitions=2)
        readers += [TopicReader(kafka_bootstrap, config.kafka.topic(name))
                    for name in ("windows", "predictions", "deadletter")]
        windows, predictions, dead = readers
        worker.start()
        gauge.set(STEPS[0][0])
        checkpoint = tmp / "checkpoint.json"
        for i, (users, think, seconds) in enumerate(STEPS):
            gauge.set(users)
            log = tmp / f"load-{users}.jsonl"
            cmd = [sys.executable, "-m", "bench.testbed.load", "--url", app_url,
                   "--duration", str(seconds), "--out", str(log), "--seed", str(SEED + i),
                   "--metrics-port", "0", "--idle", "5" if i == 0 else "0",
                   "--process-url",
                   f"http://127.0.0.1:{testbed['TESTBED_PROCESS_PORT']}/metrics",
                   "--pg-dsn", testbed["TESTBED_PG_DSN"],
                   "closed", "--users", str(users), "--think", str(think)]
            proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            out, _ = proc.communicate(timeout=seconds + 120)
            assert proc.returncode == 0, out
            steps.append({"users": users, "think_s": think, "log": log,
                          "start": _run_line(log)["start"],
                          "end": next(r for r in _lines(log) if r.get("at") == "end")["t"]})
            if i == 0:
                # the live path from the first population's start: ingest catches up with
                # Prometheus, then follows it while the other populations run
                t_from = math.ceil(steps[0]["start"] / WINDOW_S) * WINDOW_S
                with open(tmp / "ingest.log", "w") as ingest_log:
                    ingest = subprocess.Popen(
                        [sys.executable, "-m", "streams.cli.commands", "ingest", "prometheus",
                         "--prom-config", str(live_source), "--config", str(live_config),
                         "--checkpoint", str(checkpoint), "--from", str(t_from),
                         "--loglevel", "info"],
                        stdout=ingest_log, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT,
                        start_new_session=True)
        t_to = math.floor(steps[-1]["end"] / WINDOW_S) * WINDOW_S
        wait_for(lambda: _prometheus_scraped_past(prom_url, t_to + 1), 60,
                 "Prometheus' scrapes past the load")
        gauge.set(0)

        # the backtest, with the testbed's files as they are
        backtest = tmp / "backtest"
        proc = _perfcast("run", "--source", "prometheus", "--prom-config",
                         str(BENCH / "perfcast.toml"), "--config", str(BENCH / "system.toml"),
                         "--from", str(t_from), "--to", str(t_to), "--out", str(backtest),
                         cwd=tmp)

        # the live path: every window up to the load's end in Kafka, then through the worker
        def checkpoint_end() -> float:
            try:
                return json.loads(checkpoint.read_text())["end"]
            except (OSError, ValueError, KeyError):
                return 0.0
        wait_for(lambda: checkpoint_end() >= t_to, 120, "the ingest past the load's end")
        os.killpg(ingest.pid, signal.SIGTERM)
        assert ingest.wait(60) == 0, (tmp / "ingest.log").read_text()[-2000:]
        sent = list(windows.read_to_end())
        wait_for(lambda: worker.finished(kafka_bootstrap, config.kafka.topic("windows")), 300,
                 "the worker to finish every window", worker=worker)
        live = list(predictions.read_to_end())
        wait_for(lambda: len(_influx_predictions(influx_url, system)) >= len(live), 60,
                 "the predictions in InfluxDB", worker=worker)
        return {"tmp": tmp, "system": system, "from": t_from, "to": t_to, "steps": steps,
                "backtest": backtest, "backtest_stdout": proc.stdout,
                "live_config": live_config, "sent": sent, "live": live,
                "dead": dead.read_to_end(), "influx_url": influx_url,
                "worker_log": worker.log_tail()}
    finally:
        gauge.close()
        if ingest is not None and ingest.poll() is None:
            os.killpg(ingest.pid, signal.SIGKILL)
            ingest.wait(30)
        worker.stop()
        for reader in readers:
            reader.close()


def _run_line(log: Path) -> dict[str, Any]:
    return next(r for r in _lines(log) if r.get("kind") == "run")


def _truth(run: dict[str, Any], step: dict[str, Any]):
    """bench/testbed/truth.py over one population's log. The later populations start without
    an idle period: their servers' background CPU is the rate measured idle before the first
    (an idle snapshot of theirs made up from it)."""
    from bench.testbed.truth import truth

    lines = _lines(step["log"])
    if not any(r.get("at") == "idle" for r in lines):
        first = {r["at"]: r for r in _lines(run["steps"][0]["log"]) if r.get("kind") == "snapshot"}
        rate = {tier: (first["start"]["cpu_s"][tier] - first["idle"]["cpu_s"][tier])
                / (first["start"]["t"] - first["idle"]["t"]) for tier in first["idle"]["cpu_s"]}
        start = next(r for r in lines if r.get("at") == "start")
        lines.insert(0, {"kind": "snapshot", "at": "idle", "t": start["t"] - 5.0,
                         "cpu_s": {tier: start["cpu_s"][tier] - 5.0 * rate[tier]
                                   for tier in rate}})
    return truth(lines)


def test_backtest_reads_every_window_and_predicts_every_class(run):
    """Every window of the span read, none dead-lettered; both tiers' per-class demands; a
    finite predicted response time and throughput for every class in every prediction, at
    least one prediction per population."""
    out = " ".join(run["backtest_stdout"].split())
    ends = int(round((run["to"] - run["from"]) / WINDOW_S))
    assert f"read {2 * ends} windows of 2 tiers ({ends} window ends" in out, out
    assert "gaps:" not in out, out
    assert " 0 dead letters" in out, out
    assert not _lines(run["backtest"] / "deadletter.jsonl")
    estimates = _lines(run["backtest"] / "estimates.jsonl")
    assert len(estimates) == 2 * ends
    for tier in ("app", "db"):
        # a class enters a tier's estimates with its first completion there
        mine = [e for e in estimates if e["tier"] == tier]
        full = next(i for i, e in enumerate(mine) if set(e["demands"]) == set(CLASSES))
        assert full < len(mine) // 3, (tier, full)
        for e in mine:
            assert set(e["demands"]) <= set(CLASSES), e
            assert all(math.isfinite(d) and d >= 0 for d in e["demands"].values()), e
        assert all(set(e["demands"]) == set(CLASSES) for e in mine[full:]), tier
    preds = [p for p in _lines(run["backtest"] / "predictions.jsonl") if p.get("classes")]
    for step in run["steps"]:
        assert any(step["start"] <= p["time"] <= step["end"] + WINDOW_S for p in preds), step
    for p in preds:
        assert set(p["classes"]) == set(CLASSES), p
        for cls, c in p["classes"].items():
            assert math.isfinite(c["response_time"]) and c["response_time"] > 0, (cls, p)
            assert math.isfinite(c["throughput"]) and c["throughput"] >= 0, (cls, p)
        assert math.isfinite(p["throughput"]) and math.isfinite(p["response_time"]), p


def _aggregates(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Per population and tier: the sum over its windows of sum_c n_c * D_c (each window's
    completions times the demands estimated at it) and the busy time the windows carried."""
    windows = {(w["tier"], w["end"]): w
               for w in _lines(run["backtest"] / "prometheus-windows.jsonl")}
    estimates = _lines(run["backtest"] / "estimates.jsonl")
    out = []
    for step in run["steps"]:
        for tier in ("app", "db"):
            modelled = busy = 0.0
            for e in estimates:
                if e["tier"] != tier or not step["start"] + WINDOW_S <= e["end"] <= step["end"]:
                    continue
                w = windows[(tier, e["end"])]
                modelled += sum(n * e["demands"][c] for c, n in w["completions"].items())
                busy += w["utilization"] * w["window_s"] * w["cores"]
            out.append({"users": step["users"], "tier": tier, "modelled_busy_s": modelled,
                        "busy_s": busy, "error": modelled / busy - 1 if busy else None})
    return out


def test_aggregate_demand_matches_the_measured_busy_time(run):
    """Over the run's populations, the database's modelled busy time (:func:`_aggregates`) is
    within :data:`AGGREGATE_TOLERANCE` of the busy time its windows carried; each population's
    is printed and recorded. The app's is recorded (``demand_errors.json``), not asserted
    (module docstring)."""
    report = _aggregates(run)
    print("\naggregate demand:", [(r["users"], r["tier"], round(r["error"], 3)) for r in report])
    assert all(r["busy_s"] > 0 for r in report), report
    db = [r for r in report if r["tier"] == "db"]
    error = sum(r["modelled_busy_s"] for r in db) / sum(r["busy_s"] for r in db) - 1
    assert abs(error) <= AGGREGATE_TOLERANCE, (error, db)


def test_truth_and_the_demand_errors_are_recorded(run):
    """The truth of every population (every request answered, both tiers busy, a demand per
    class and tier); the backtest's last estimate of each population against it, recorded in
    ``demand_errors.json`` and printed (the errors are not asserted: module docstring)."""
    estimates = _lines(run["backtest"] / "estimates.jsonl")
    rows = []
    for step in run["steps"]:
        t = _truth(run, step)
        assert t.errors == 0 and t.dropped == 0, t.notes
        assert {b.tier for b in t.tiers} == {"app", "db"}, t.notes
        assert all(b.busy_s > 0 for b in t.tiers), t.tiers
        assert {c.cls for c in t.classes} == set(CLASSES)
        for tier, server_key, demand_key in (("app", "app_cpu_s", "app_demand_s"),
                                             ("db", "db_exec_s", "db_demand_s")):
            last = [e for e in estimates
                    if e["tier"] == tier and e["end"] <= step["end"] and not e["kalman_flag"]]
            assert last, (step["users"], tier)
            est = last[-1]
            for c in t.classes:
                truth_d, server = getattr(c, demand_key), getattr(c, server_key)
                assert truth_d is not None and truth_d > 0, (tier, c)
                d = est["demands"][c.cls]
                rows.append({"users": step["users"], "tier": tier, "class": c.cls,
                             "requests": c.requests, "perfcast_s": d, "truth_s": truth_d,
                             "server_s": server, "error": d / truth_d - 1,
                             "error_vs_server": d / server - 1 if server else None,
                             "estimate_end": est["end"]})
        mean_r = {s.cls: s.mean_s for s in t.overall}
        rows.append({"users": step["users"], "mean_response_s": mean_r,
                     "utilization": {b.tier: b.utilization for b in t.tiers},
                     "truth": asdict(t)["overall"]})
    path = run["tmp"] / "demand_errors.json"
    path.write_text(json.dumps({"commit": _commit(), "steps": STEPS, "rows": rows,
                                "aggregate": _aggregates(run)}, indent=1))
    print(f"\nper-class demand per request (ms), perfcast's last estimate against the truth "
          f"(busy CPU shared out by the servers' figures); {path}")
    for r in rows:
        if "tier" in r:
            print(f"  N={r['users']:<2} {r['tier']:<4} {r['class']:<8} perfcast "
                  f"{r['perfcast_s'] * 1e3:8.2f} truth {r['truth_s'] * 1e3:8.2f} "
                  f"error {r['error']:+7.0%}")
    assert len([r for r in rows if "tier" in r]) == len(STEPS) * 2 * len(CLASSES)


def _commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def test_the_file_path_gives_the_same_predictions(run, tmp_path):
    """The windows the backtest read, written as JSON lines and run by ``perfcast run --source
    FILE`` in another process, give the backtest's estimates and predictions within 1e-6; read
    from Prometheus a second time, they are the same windows."""
    from streams.sources.prometheus import load_source
    from streams.sources.prometheus_http import fetch_windows

    dumped = run["backtest"] / "prometheus-windows.jsonl"
    again = fetch_windows(load_source(BENCH / "perfcast.toml", env={}), run["from"], run["to"])
    assert not again.gaps
    assert_close(_lines(dumped), again.records, rel=SAME)
    trace = tmp_path / "windows.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in again.records))
    _perfcast("run", "--source", str(trace), "--config", str(BENCH / "system.toml"), "--out",
              str(tmp_path / "file"), cwd=tmp_path)
    for name in ("estimates", "predictions"):
        backtest = _lines(run["backtest"] / f"{name}.jsonl")
        assert backtest, name
        assert_close(_lines(tmp_path / "file" / f"{name}.jsonl"), backtest, name, rel=SAME)


def test_the_live_path_gives_the_embedded_runs_predictions(run, tmp_path):
    """The windows ``perfcast ingest prometheus`` sent live cover the span once each, with
    nothing dead-lettered, and equal the backtest's (the system's name aside); the worker's
    predictions in Kafka equal the embedded run's over those windows within 1e-6, and InfluxDB
    holds each of them."""
    from streams.cli.embedded import run_embedded
    from streams.core.config import load_config

    sent = run["sent"]
    ends = sorted({r["end"] for r in sent})
    assert ends == [run["from"] + WINDOW_S * (i + 1) for i in range(len(ends))]
    assert ends[-1] >= run["to"]
    assert len(sent) == 2 * len(ends), "a window sent twice"
    assert not run["dead"], run["dead"][:3]
    summary = run_embedded(sent, load_config(run["live_config"]), tmp_path / "embedded",
                           final_solve=False)
    assert summary.deadletter == 0
    expected = _lines(tmp_path / "embedded" / "predictions.jsonl")
    live = {p["time"]: p for p in run["live"]}
    assert expected and sorted(live) == [p["time"] for p in expected], run["worker_log"]
    for p in expected:
        assert_close(live[p["time"]], p, f"prediction at {p['time']}", rel=SAME)
    influx = _influx_predictions(run["influx_url"], run["system"])
    assert sorted(influx) == sorted(live)
    for t, p in live.items():
        assert math.isclose(influx[t], p["throughput"], rel_tol=SAME), (t, influx[t], p)
    # read live (lag_s after each window's end), the windows are the backtest's
    backtest = _lines(run["backtest"] / "prometheus-windows.jsonl")
    span = [{**r, "system": "testbed"} for r in sent if r["end"] <= run["to"]]
    assert_close(sorted(span, key=lambda r: (r["end"], r["tier"])),
                 sorted(backtest, key=lambda r: (r["end"], r["tier"])), rel=SAME)


def _influx_predictions(url: str, system: str) -> dict[float, float]:
    """The ``prediction`` points' throughput by time (epoch seconds) for ``system``."""
    from influxdb_client import InfluxDBClient

    query = (f'from(bucket: "perfcast") |> range(start: 0) |> filter(fn: (r) => '
             f'r._measurement == "prediction" and r.system == "{system}" and '
             f'r._field == "throughput")')
    with InfluxDBClient(url=url, token="", org="-", timeout=30_000) as client:
        tables = client.query_api().query(query)
    return {rec.get_time().timestamp(): float(rec.get_value()) for t in tables for rec in t.records}
