"""The Prometheus source against a real Prometheus (``infra/prometheus``, started by
``infra/services.sh``): Prometheus scrapes itself every second, and the tests drive it with HTTP
queries -- the workload. Its ``prometheus_http_requests_total{handler}`` counters are the
completions per class, ``prometheus_http_request_duration_seconds_{sum,count}`` the time at the
tier, ``process_cpu_seconds_total`` the busy time.

What the workload did is known independently: the test counts its requests and times them,
and samples the Prometheus process' CPU time from ``/proc`` ten times a second. The windows
read back must agree within scrape resolution (a window's ends are the last scrapes at or
before its grid points: up to a scrape interval, plus scheduling delay, early).

Under ``CI=true`` a missing Prometheus (or Kafka/InfluxDB for the live test) fails.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ci_policy import unavailable
from pipeline_harness import (
    ROOT,
    TopicReader,
    Worker,
    assert_close,
    flux_count,
    unique,
    wait_for,
)
from waiting import wait_until
from streams.core.config import load_config
from streams.core.records import content_digest, parse_window
from streams.cli.embedded import read_jsonl, run_embedded
from streams.sources.prometheus import load_source, window_ends
from streams.sources.prometheus_http import fetch_windows

WINDOW_S = 2.0
#: how far a window's end sample may sit before its grid point: the scrape interval (1 s) and
#: the scheduling delay of a loaded 2-core machine
SLACK_S = 1.6
#: how long after its timestamp a sample's value may be read (the scrape's request is served
#: after the scrape starts; later on a loaded machine), so a window's end sample may include a
#: little past its grid point
LATE_S = 0.5
#: when Prometheus has certainly noticed a target going down or up again (a scrape interval,
#: scheduling delay)
NOTICE_S = 2.5
HANDLER = "/api/v1/query"
#: the workload's query: every series counted by name, a few ms of CPU each (about 180 a
#: second from one client on the benchmark machine, half of its 2 cores)
LOAD_QUERY = 'count by (__name__) ({__name__=~".+"})'


def prometheus_pid(targets: Path) -> int:
    """The pid of the Prometheus under test (its pid file is beside its targets file)."""
    pid_file = targets.parent / "prometheus.pid"
    try:
        return int(pid_file.read_text())
    except (OSError, ValueError):
        unavailable(f"no pid file {pid_file} of the Prometheus under test",
                    "infra/prometheus/start.sh did not record its pid")


def write_source(path: Path, url: str, system: str, lag_s: float = 2.0) -> Path:
    """The self-scraping Prometheus as one tier (2 cores: the machine's)."""
    selector = f'job="prometheus", handler=~"{HANDLER}|/metrics"'
    path.write_text(f"""
[prometheus]
url = "{url}"
system = "{system}"
window_s = {WINDOW_S}
lag_s = {lag_s}
class_label = "handler"

[tiers.prometheus]
cores = 2
busy_seconds = 'process_cpu_seconds_total{{job="prometheus"}}'
completions = 'prometheus_http_requests_total{{{selector}}}'
time_sum = 'prometheus_http_request_duration_seconds_sum{{{selector}}}'
time_count = 'prometheus_http_request_duration_seconds_count{{{selector}}}'
""")
    return path


def write_config(path: Path, system: str, prefix: str = "perfcast") -> Path:
    path.write_text(f"""
[systems.{json.dumps(system)}]
tiers = ["prometheus"]
solve_interval_s = 10
solve_offset_s = 0
[kafka]
topic_prefix = {json.dumps(prefix)}
""")
    return path


class CpuSampler(threading.Thread):
    """The process' CPU seconds (utime + stime) from ``/proc``, ten times a second."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.path = f"/proc/{pid}/stat"
        self.tick = os.sysconf("SC_CLK_TCK")
        self.samples: list[tuple[float, float]] = []
        self.halt = threading.Event()

    def read(self) -> float:
        with open(self.path) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.tick

    def run(self) -> None:
        while not self.halt.is_set():
            t0 = time.time()
            cpu = self.read()
            self.samples.append((t0, cpu))
            self.halt.wait(0.1)

    def before(self, t: float) -> float:
        """CPU seconds at the last sample at or before ``t`` (a lower bound of cpu(t))."""
        return max((c for ts, c in self.samples if ts <= t), default=self.samples[0][1])

    def after(self, t: float) -> float:
        """CPU seconds at the first sample at or after ``t`` (an upper bound of cpu(t))."""
        return min((c for ts, c in self.samples if ts >= t), default=self.samples[-1][1])


@dataclass
class Load:
    """Requests of the workload: completion times and client-side durations."""

    done: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def drive(url: str, load: Load, until: float, rates: list[float], stop=None) -> None:
    """Query ``url`` until ``until``: a phase per rate (requests per second; ``inf``: as fast
    as one client goes), phases of equal length."""
    query = f"{url}{HANDLER}?{urllib.parse.urlencode({'query': LOAD_QUERY})}"
    start = time.time()
    phase = (until - start) / len(rates)
    sent = 0
    while time.time() < until and not (stop and stop.is_set()):
        rate = rates[min(int((time.time() - start) / phase), len(rates) - 1)]
        t0 = time.time()
        try:
            with urllib.request.urlopen(query, timeout=30) as resp:
                resp.read()
                ok = resp.status == 200
        except OSError as exc:
            load.failures.append(str(exc))
            continue
        t1 = time.time()
        if ok:
            load.done.append(t1)
            load.durations.append(t1 - t0)
        sent += 1
        if math.isfinite(rate):
            time.sleep(max(0.0, t0 + 1.0 / rate - time.time()))    # the phase's request rate


def conflicting_repeats(sent: list[dict]) -> int:
    """How many records of ``sent`` repeat an earlier record's window (same system, tier and
    end) with other content -- the duplicates the worker dead-letters; a repeat with the same
    content is a replay, skipped (``streams.core.tier.TierState.admit``)."""
    first: dict[tuple, int] = {}
    conflicts = 0
    for record in sent:
        window = parse_window(record)
        key = (window.system, window.tier, window.end)
        digest = content_digest(window)
        conflicts += key in first and first[key] != digest
        first.setdefault(key, digest)
    return conflicts


def grid_ceil(t: float) -> float:
    return math.ceil(t / WINDOW_S) * WINDOW_S


def wait_scraped_past(url: str, t: float, timeout: float = 60.0) -> None:
    """Until Prometheus has a scrape of itself after ``t`` (so the lookup at ``t`` is final)."""
    query = f"{url}/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": 'timestamp(up{job="prometheus"})', "start": t + 1.5, "end": t + 1.5,
         "step": 1})

    def scraped() -> bool:
        with urllib.request.urlopen(query, timeout=10) as resp:
            result = json.loads(resp.read())["data"]["result"]
        return bool(result) and float(result[0]["values"][0][1]) > t
    wait_for(lambda: time.time() > t + 1.5 and scraped(), timeout, f"a scrape after {t}",
             poll_s=0.3)


@pytest.fixture(scope="module")
def workload(tmp_path_factory, prometheus_url, prometheus_targets):
    """About 18 s of queries at three rates against the real Prometheus, with its CPU time
    sampled; the time range (``from``, ``to``] covers it with a quiet window either side."""
    url = prometheus_url
    sampler = CpuSampler(prometheus_pid(prometheus_targets))
    sampler.start()
    wait_until(lambda: len(sampler.samples) >= 3, "CPU samples before the time range")
    t_from = grid_ceil(time.time() + SLACK_S)
    # the scenario: a quiet first window, then the workload
    time.sleep(max(0.0, t_from + WINDOW_S - time.time()))
    load = Load()
    drive(url, load, time.time() + 18.0, [15.0, 60.0, math.inf])
    t_to = grid_ceil(time.time()) + WINDOW_S
    wait_scraped_past(url, t_to)
    wait_until(lambda: sampler.samples[-1][0] > t_to, "a CPU sample past the range")
    sampler.halt.set()
    sampler.join()
    tmp = tmp_path_factory.mktemp("prom")
    system = unique("prom")
    return {"url": url, "from": t_from, "to": t_to, "load": load, "cpu": sampler,
            "system": system, "tmp": tmp,
            "source": write_source(tmp / "source.toml", url, system),
            "config": write_config(tmp / "perfcast.toml", system)}


def test_windows_match_what_the_workload_did(workload):
    """Window count, completions per window (and in all), time at the tier and utilization of
    the real scraped workload, within scrape resolution."""
    load: Load = workload["load"]
    cpu: CpuSampler = workload["cpu"]
    assert not load.failures and len(load.done) > 200
    source = load_source(workload["source"], env={})
    fetched = fetch_windows(source, workload["from"], workload["to"])
    ends = window_ends(workload["from"], workload["to"], WINDOW_S)
    assert not fetched.gaps
    assert [r["end"] for r in fetched.records] == [e / 1000 for e in ends]
    # completions: every request once, each window within scrape resolution of the client's
    assert sum(r["completions"].get(HANDLER, 0) for r in fetched.records) == len(load.done)
    for r in fetched.records:
        b, a = r["end"], r["end"] - WINDOW_S
        n = r["completions"].get(HANDLER, 0)
        low = sum(1 for t in load.done if a + LATE_S < t <= b - SLACK_S)
        high = sum(1 for t in load.done if a - SLACK_S < t <= b + LATE_S)
        assert low <= n <= high, (r, low, high)
        # utilization: busy core-seconds within those of the process between the bounds
        busy = r["utilization"] * WINDOW_S * 2
        lo = cpu.before(b - SLACK_S) - cpu.after(a + LATE_S)
        hi = cpu.after(b + LATE_S) - cpu.before(a - SLACK_S)
        assert lo - 0.03 <= busy <= hi + 0.03, (r, lo, hi)
        assert 0 <= r["utilization"] <= 1
    # /metrics is scraped once a second: 2 per window
    scrapes = [r["completions"]["/metrics"] for r in fetched.records]
    assert 1.5 <= sum(scrapes) / len(scrapes) <= 2.5 and max(scrapes) <= 4, scrapes
    # the load shows: the unthrottled phase keeps Prometheus busy
    assert max(r["utilization"] for r in fetched.records) > 0.1
    # the mean time at the tier (server side) is below the client's round trip
    times = [(r["completions"][HANDLER], r["response_time_s"][HANDLER])
             for r in fetched.records if r["completions"].get(HANDLER)]
    server = sum(n * t for n, t in times) / sum(n for n, _ in times)
    client = sum(load.durations) / len(load.durations)
    assert 0 < server <= client


def test_backtest_equals_the_same_windows_fed_as_a_file(workload, tmp_path):
    """``perfcast run --source prometheus`` over the workload's range gives the estimates and
    predictions (1e-9) of ``perfcast run`` over the same windows written as a JSON-lines
    file (read from Prometheus a second time)."""
    out = tmp_path / "backtest"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PERFCAST_PROMETHEUS_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "streams.cli.commands", "run", "--source", "prometheus",
         "--prom-config", str(workload["source"]), "--from", str(workload["from"]),
         "--to", str(workload["to"]), "--config", str(workload["config"]), "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n_ends = len(window_ends(workload["from"], workload["to"], WINDOW_S))
    assert f"read {n_ends} windows of 1 tier (" in " ".join(proc.stdout.split())
    source = load_source(workload["source"], env={})
    trace = tmp_path / "windows.jsonl"
    with open(trace, "w") as fh:
        for r in fetch_windows(source, workload["from"], workload["to"]).records:
            fh.write(json.dumps(r) + "\n")
    summary = run_embedded(read_jsonl(trace), load_config(workload["config"], env={}),
                           tmp_path / "file")

    def lines(path: Path) -> list[dict]:
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    backtest = {n: lines(out / f"{n}.jsonl") for n in ("estimates", "predictions")}
    from_file = {n: lines(tmp_path / "file" / f"{n}.jsonl") for n in ("estimates",
                                                                       "predictions")}
    assert len(backtest["estimates"]) == n_ends == summary.estimates
    assert summary.predictions >= 2 and summary.deadletter == 0
    assert not lines(out / "deadletter.jsonl")
    assert_close(backtest, from_file)


class Ingest:
    """``perfcast ingest prometheus`` as a subprocess."""

    def __init__(self, source: Path, config: Path, checkpoint: Path, log: Path,
                 start: str | None = None) -> None:
        self.cmd = [sys.executable, "-m", "streams.cli.commands", "ingest", "prometheus",
                    "--prom-config", str(source), "--config", str(config),
                    "--checkpoint", str(checkpoint), "--loglevel", "info"]
        if start:
            self.cmd += ["--from", start]
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Ingest":
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("PERFCAST_PROMETHEUS_URL", None)
        self.proc = subprocess.Popen(self.cmd, stdout=open(self.log, "a"),
                                     stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                     start_new_session=True)
        return self

    def signal(self, sig: int) -> int:
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)
        return self.proc.wait(60)


def test_live_into_kafka_worker_and_influxdb_resumes_after_a_kill(tmp_path, prometheus_url,
                                                                  kafka_bootstrap, influx_url):
    """``perfcast ingest prometheus`` follows the live workload into Kafka; SIGKILLed and
    restarted, it resumes after its checkpoint: the windows topic then holds every window end
    of the span once or twice (never missing one), the worker estimates each window once
    (repeats are replays, skipped, or duplicates) into InfluxDB, and the windows sent live equal
    a backtest's over the same span."""
    url = prometheus_url
    from streams.kafka.topics import ensure_topics

    system, prefix = unique("live"), unique("t")
    source_path = write_source(tmp_path / "source.toml", url, system, lag_s=2.0)
    config_path = write_config(tmp_path / "perfcast.toml", system, prefix)
    config = load_config(config_path)
    ensure_topics(config.kafka, partitions=2)
    windows = TopicReader(kafka_bootstrap, config.kafka.topic("windows"))
    estimates = TopicReader(kafka_bootstrap, config.kafka.topic("estimates"))
    dead = TopicReader(kafka_bootstrap, config.kafka.topic("deadletter"))
    worker = Worker(config_path, unique("app"), tmp_path / "worker.log").start()
    stop = threading.Event()
    load = Load()
    driver = threading.Thread(target=drive, args=(url, load, time.time() + 3600, [20.0], stop),
                              daemon=True)
    driver.start()
    checkpoint = tmp_path / "checkpoint.json"
    log = tmp_path / "ingest.log"
    ingest = Ingest(source_path, config_path, checkpoint, log, start="now-10s").start()

    def checkpoint_end() -> float:
        try:
            return json.loads(checkpoint.read_text())["end"]
        except (OSError, ValueError, KeyError):
            return 0.0
    try:
        wait_for(lambda: len(windows.poll()) >= 8 and checkpoint_end() > 0, 120,
                 "windows from the first ingest run")
        assert ingest.signal(signal.SIGKILL) != 0
        killed_at = checkpoint_end()
        time.sleep(3 * WINDOW_S)          # the scenario: ingest down for three windows
        ingest = Ingest(source_path, config_path, checkpoint, log).start()
        wait_for(lambda: checkpoint_end() >= killed_at + 5 * WINDOW_S, 120,
                 "windows from the restarted ingest")
        assert ingest.signal(signal.SIGTERM) == 0
        last = checkpoint_end()
        text = log.read_text()
        assert "resuming after" in text and "records sent" in text, text[-2000:]
        wait_for(lambda: max(r["end"] for r in windows.poll()) >= last, 60,
                 "every window in Kafka")
        sent = windows.poll()
        ends = sorted({r["end"] for r in sent})
        assert ends == [ends[0] + i * WINDOW_S for i in range(len(ends))], "a window is missing"
        assert ends[-1] == last and ends[0] <= killed_at - 4 * WINDOW_S
        # the same span read as a backtest: the same windows
        unique_sent = {r["end"]: r for r in sent}
        backtest = fetch_windows(load_source(source_path, env={}), ends[0] - WINDOW_S, last)
        assert_close([unique_sent[e] for e in ends], backtest.records)
        wait_for(lambda: len({e["seq"] for e in estimates.poll()}) >= len(ends), 300,
                 "an estimate per window", worker=worker)
        seqs = sorted({e["seq"] for e in estimates.poll()})
        assert seqs == list(range(1, len(ends) + 1))
        # a window sent again unchanged is a replay (skipped); one whose content changed (the
        # restarted ingest read Prometheus again) is a duplicate, dead-lettered
        conflicting = conflicting_repeats(sent)
        wait_for(lambda: len(dead.poll()) >= conflicting, 60,
                 "a dead letter per window sent twice with other content", worker=worker)
        assert all(d["reason"].startswith("duplicate") for d in dead.poll())
        assert len(dead.poll()) == conflicting
        wait_for(lambda: flux_count(influx_url, system, "tier_estimate", "utilization")
                 >= len(ends), 60, "estimates in InfluxDB", worker=worker)
        assert flux_count(influx_url, system, "tier_estimate", "utilization") == len(ends)
        assert not load.failures
    finally:
        stop.set()
        if ingest.proc and ingest.proc.poll() is None:
            ingest.signal(signal.SIGKILL)
        worker.stop()
        for reader in (windows, estimates, dead):
            reader.close()


class Exporter:
    """A scrape target of our own (``/metrics`` in the text format): a request counter whose
    increments the test makes at known times, and a busy-seconds counter growing at
    ``busy`` seconds per second. ``reset()`` is a process restart between two scrapes (both
    counters back to 0); ``stop()``/``start()`` take the target down and up (same port)."""

    def __init__(self, busy: float = 0.3) -> None:
        self.busy = busy
        self.lock = threading.Lock()
        self.requests = 0
        self.born = time.time()
        self.server = None
        self.port = 0

    def metrics(self) -> bytes:
        with self.lock:
            busy = (time.time() - self.born) * self.busy
            return (f'# TYPE app_requests_total counter\n'
                    f'app_requests_total{{handler="/a"}} {self.requests}\n'
                    f'# TYPE app_busy_seconds_total counter\n'
                    f'app_busy_seconds_total {busy:.6f}\n').encode()

    def start(self) -> "Exporter":
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.metrics()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def request(self) -> float:
        with self.lock:
            self.requests += 1
            return time.time()

    def reset(self) -> None:
        with self.lock:
            self.requests = 0
            self.born = time.time()


def test_a_restarted_and_a_stopped_target_real_counter_reset_and_staleness(
        tmp_path, prometheus_url, prometheus_targets):
    """A second tier scraped from an exporter of the test's own: its process restarts (its
    counters drop to 0 between two scrapes) and later it stops answering for 6 s. The
    window holding the restart is made with the requests after it (a counter reset); the
    windows touching the outage are gaps (Prometheus' staleness markers), while the
    self-scraped tier's windows are all made; every window made holds the requests the test
    made in it, within scrape resolution."""
    url, targets = prometheus_url, prometheus_targets
    tag = unique("t")
    exporter = Exporter().start()
    targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{exporter.port}"],
                                    "labels": {"test": tag}}]))

    def up() -> bool:
        with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=10) as resp:
            active = json.loads(resp.read())["data"]["activeTargets"]
        return any(t["labels"].get("test") == tag and t["health"] == "up" for t in active)
    events: list[float] = []
    paused = threading.Event()
    halt = threading.Event()

    def requests() -> None:
        while not halt.is_set():
            if not paused.is_set():
                events.append(exporter.request())
            time.sleep(0.05)              # the workload's rate: 20 requests a second
    worker = threading.Thread(target=requests, daemon=True)
    try:
        wait_for(up, 60, "Prometheus scraping the test's exporter")
        t_from = grid_ceil(time.time() + SLACK_S)
        # the scenario, in time (requests, a quiet spell, the exporter's counter reset,
        # requests, a quiet spell, the target down for 6 s, requests): the sleeps are its
        # phases -- a quiet spell spans a window and the scrape slack, so a whole window
        # holds no request; the requests resume a scrape's slack after the reset and the
        # restart
        time.sleep(max(0.0, t_from - time.time()))
        worker.start()
        time.sleep(8)
        paused.set()                       # quiet around the restart: no request is lost
        time.sleep(WINDOW_S + SLACK_S)
        exporter.reset()
        reset_at = time.time()
        time.sleep(SLACK_S)
        paused.clear()
        time.sleep(6)
        paused.set()
        time.sleep(WINDOW_S + SLACK_S)
        exporter.stop()
        down = (time.time(), None)
        time.sleep(6)
        exporter.start()
        down = (down[0], time.time())
        time.sleep(SLACK_S)
        paused.clear()
        time.sleep(6)
        halt.set()
        worker.join()
        t_to = grid_ceil(time.time()) + WINDOW_S
        wait_scraped_past(url, t_to)
    finally:
        halt.set()
        targets.write_text("[]")
        exporter.stop()
    source_path = tmp_path / "source.toml"
    write_source(source_path, url, unique("two"))
    source_path.write_text(source_path.read_text() + f"""
[tiers.app]
cores = 1
busy_seconds = 'app_busy_seconds_total{{test="{tag}"}}'
completions = 'app_requests_total{{test="{tag}"}}'
""")
    fetched = fetch_windows(load_source(source_path, env={}), t_from, t_to)
    ends = [e / 1000 for e in window_ends(t_from, t_to, WINDOW_S)]
    made = {t: {r["end"]: r for r in fetched.records if r["tier"] == t}
            for t in ("prometheus", "app")}
    assert sorted(made["prometheus"]) == ends
    assert {g.tier for g in fetched.gaps} == {"app"}
    assert all(g.reason.startswith("tier not reporting") for g in fetched.gaps)
    d0, d1 = down
    for b in ends:
        a = b - WINDOW_S
        touches_outage = any(d0 + NOTICE_S <= t <= d1 for t in (a, b))
        clear_of_outage = all(t < d0 or t > d1 + NOTICE_S for t in (a, b))
        assert not (touches_outage and b in made["app"]), b
        assert not (clear_of_outage and b not in made["app"]), b
    assert any(b not in made["app"] for b in ends)
    # the restart's window: made, the counter reset taken as a restart from 0
    reset_window = [b for b in made["app"] if b - WINDOW_S < reset_at <= b]
    assert len(reset_window) == 1
    for b, r in made["app"].items():
        a = b - WINDOW_S
        n = r["completions"]["/a"]
        low = sum(1 for t in events if a + LATE_S < t <= b - SLACK_S)
        high = sum(1 for t in events if a - SLACK_S < t <= b + LATE_S)
        assert low <= n <= high, (r, low, high)
        if b not in reset_window:
            assert abs(r["utilization"] - 0.3) <= 0.3 * SLACK_S / WINDOW_S + 0.01, r
    busy = [r["utilization"] for b, r in made["app"].items() if b not in reset_window]
    assert abs(sum(busy) / len(busy) - 0.3) < 0.05
