"""The pipeline against the real Kafka broker and InfluxDB (started by ``infra/services.sh``).

``perfcast worker`` runs as a subprocess (so it can be killed), windows are published with the
same producer ``perfcast produce`` uses, and results are read back from the output topics and,
with Flux, from InfluxDB. Each test uses its own topic prefix, Faust application id and system
name, so tests do not see each other's data. Under ``CI=true`` a missing service fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipeline_harness import (
    ROOT,
    TopicReader,
    Worker,
    assert_close,
    flux_count,
    unique,
    wait_for,
    wait_settled,
    write_config,
)
from streams.core.config import load_config
from streams.cli.demo import DemoScenario, demo_records
from streams.engine.pipeline import Pipeline
from streams.kafka.produce import produce
from streams.kafka.topics import ensure_topics

@pytest.fixture(scope="module")
def services(kafka_bootstrap: str, influx_url: str) -> dict[str, str]:
    return {"bootstrap": kafka_bootstrap, "influx": influx_url}


def services_ports(services: dict[str, str]) -> dict[str, str]:
    """The environment for ``infra/services.sh`` naming the ports of the services under test
    (without them it acts on its default ports: it would restart an InfluxDB that is not the
    one under test, or start a stray one)."""
    influx = urlsplit(services["influx"]).port
    kafka = int(services["bootstrap"].rsplit(":", 1)[1])
    assert influx and kafka, services
    return {**os.environ, "PERFCAST_INFLUX_PORT": str(influx), "PERFCAST_KAFKA_PORT": str(kafka)}


class Setup:
    """One isolated pipeline: config file, topics, worker, readers."""

    def __init__(self, tmp: Path, services: dict[str, str], system: str,
                 extra_config: str = "") -> None:
        self.system = system
        self.bootstrap = services["bootstrap"]
        self.prefix = unique("t")
        self.config_path = write_config(tmp / "perfcast.toml", system, self.prefix, extra_config)
        self.config = load_config(self.config_path)
        self.kafka = self.config.kafka
        ensure_topics(self.kafka, partitions=2)
        self.worker = Worker(self.config_path, unique("app"), tmp / "worker.log")
        self.readers = {name: TopicReader(services["bootstrap"], self.kafka.topic(name))
                        for name in ("estimates", "predictions", "alerts", "deadletter")}

    def records(self, name: str) -> list[dict]:
        return self.readers[name].poll()

    def settle(self) -> None:
        """Until the worker has finished every window produced and the readers hold all it
        sent for them (late duplicates included)."""
        wait_settled(self.worker, self.bootstrap, self.kafka.topic("windows"), self.readers)

    def close(self) -> None:
        self.worker.stop()
        for r in self.readers.values():
            r.close()


@pytest.fixture
def setup_factory(tmp_path, services):
    made: list[Setup] = []

    def make(system: str, extra_config: str = "") -> Setup:
        s = Setup(tmp_path, services, system, extra_config)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _embedded(setup: Setup, records: list) -> Pipeline:
    pipeline = Pipeline(setup.config)
    setup.expected = pipeline.process_many(records)
    return pipeline


def _latest(estimates: list[dict]) -> dict[str, dict]:
    """Last estimate per tier (highest seq)."""
    out: dict[str, dict] = {}
    for e in estimates:
        if e["tier"] not in out or e["seq"] > out[e["tier"]]["seq"]:
            out[e["tier"]] = e
    return out


def _unique_by(records: list[dict], key) -> dict:
    return {key(r): r for r in records}


# ---------------------------------------------------------------------------------------------
def test_end_to_end_predicts_the_breach_and_matches_the_embedded_run(setup_factory, services):
    """The demo shop (bursty database, users ramping from 60 to 200) produced to Kafka: the
    worker's estimates and predictions equal ``perfcast run``'s (1e-9); the alerts topic holds
    the predicted breach, firing before the current breach; InfluxDB holds every estimate and
    prediction point and the alert."""
    system = unique("shop")
    s = setup_factory(system)
    records = demo_records(DemoScenario(system=system, duration_s=2700))
    _embedded(s, records)
    expected = s.expected
    assert any(a["alert"] == "predicted_breach" and a["state"] == "firing"
               for a in expected.alerts)
    s.worker.start()
    produce(records, s.kafka)
    wait_for(lambda: len(s.records("estimates")) >= len(records)
             and len(s.records("predictions")) >= len(expected.predictions),
             timeout=400, what="all estimates and predictions", worker=s.worker)
    est = _unique_by(s.records("estimates"), lambda e: (e["tier"], e["seq"]))
    assert len(est) == len(records)
    for e in expected.estimates:
        assert_close(est[(e["tier"], e["seq"])], e, f"estimate {e['tier']}#{e['seq']}")
    preds = _unique_by(s.records("predictions"), lambda p: p["time"])
    assert sorted(preds) == [p["time"] for p in expected.predictions]
    for p in expected.predictions:
        assert_close(preds[p["time"]], p, f"prediction at {p['time']}")
    alerts = s.records("alerts")
    fired: dict[str, float] = {}             # the first firing of each (a later one restates)
    for a in alerts:
        if a["state"] == "firing":
            fired.setdefault(a["alert"], a["time"])
    assert "predicted_breach" in fired and "current_breach" in fired
    assert fired["predicted_breach"] < fired["current_breach"]
    url = services["influx"]
    wait_for(lambda: flux_count(url, system, "prediction", "users") >= len(preds),
             timeout=60, what="prediction points in InfluxDB", worker=s.worker)
    assert flux_count(url, system, "tier_estimate", "utilization") == len(records)
    assert flux_count(url, system, "prediction", "users") == len(preds)
    assert flux_count(url, system, "class_prediction", "response_time", **{"class": "home"}) \
        == len(preds)
    assert flux_count(url, system, "alert", "active", alert="predicted_breach") >= 1
    assert s.worker.alive()


# ---------------------------------------------------------------------------------------------
@pytest.mark.timeout(900)
def test_sigkill_midway_and_restart_counts_every_window_once(setup_factory):
    """SIGKILL the worker while windows stream in, restart it: the final estimates equal an
    uninterrupted run's (1e-9) and each window is counted exactly once (the last ``seq`` of a
    tier is its number of windows; re-read windows are replays, skipped without a dead
    letter)."""
    system = unique("shop")
    s = setup_factory(system)
    records = demo_records(DemoScenario(system=system, duration_s=900))
    _embedded(s, records)
    s.worker.start()
    sender = threading.Thread(target=produce, args=(records, s.kafka), kwargs={"rate": 25.0})
    sender.start()
    wait_for(lambda: len(s.records("estimates")) >= len(records) // 3, timeout=120,
             what="a third of the estimates", worker=s.worker)
    s.worker.kill()
    killed_at = len(s.records("estimates"))
    assert killed_at < len(records)
    s.worker.start()
    sender.join()
    wait_for(lambda: len(_unique_by(s.records("estimates"),
                                    lambda e: (e["tier"], e["seq"]))) >= len(records),
             timeout=480, what="all estimates after the restart", worker=s.worker)
    s.settle()
    estimates = s.records("estimates")
    per_tier = {}
    for e in estimates:
        per_tier.setdefault(e["tier"], set()).add(e["seq"])
    n_tier = len(records) // 2
    assert per_tier == {"front": set(range(1, n_tier + 1)), "db": set(range(1, n_tier + 1))}
    expected_last = _latest(s.expected.estimates)
    assert_close(_latest(estimates), expected_last)
    assert not s.records("deadletter")
    preds = _unique_by(s.records("predictions"), lambda p: p["time"])
    for p in s.expected.predictions:
        assert_close(preds[p["time"]], p, f"prediction at {p['time']}")


# ---------------------------------------------------------------------------------------------
def test_windows_fetched_but_never_delivered_are_read_again(setup_factory):
    """The stall (docs/pipeline.md, "Each partition's windows once and in offset order"): the
    worker's consumer fetches every window and loses them before Faust sees them
    (``tests/lossy_worker.py``, as Faust did to a worker restarted with nothing committed);
    no later window comes to show the gap. The worker seeks the partition back after
    ``STALL_S`` and estimates every window once, equal to the embedded run's (1e-9)."""
    system = unique("shop")
    s = setup_factory(system)
    records = demo_records(DemoScenario(system=system, duration_s=300))
    _embedded(s, records)
    produce(records, s.kafka)                     # all there before the worker's first fetch
    s.worker = Worker(s.config_path, unique("app"), s.worker.log, module="lossy_worker",
                      env={"PERFCAST_TEST_LOSE_TOPIC": s.kafka.topic("windows")})
    s.worker.start()
    wait_for(lambda: len(_unique_by(s.records("estimates"),
                                    lambda e: (e["tier"], e["seq"]))) >= len(records),
             timeout=240, what="every estimate after the stall", worker=s.worker)
    s.settle()
    log = s.worker.log.read_text()
    assert "lossy_worker: lost offsets 0-" in log, log[-2000:]
    assert "none reached the agent" in log and "read again from 0" in log, log[-2000:]
    estimates = s.records("estimates")
    assert len(estimates) == len(records)           # each window once
    got = _unique_by(estimates, lambda e: (e["tier"], e["seq"]))
    for e in s.expected.estimates:
        assert_close(got[(e["tier"], e["seq"])], e, f"estimate {e['tier']}#{e['seq']}")
    assert not s.records("deadletter")
    assert s.worker.alive()


# ---------------------------------------------------------------------------------------------
def test_influxdb_restart_mid_run_loses_no_prediction_point(setup_factory, services):
    """InfluxDB is stopped and started again (same data directory) while the worker writes:
    the sink buffers and retries, and every prediction and estimate reaches InfluxDB."""
    system = unique("shop")
    s = setup_factory(system)
    records = demo_records(DemoScenario(system=system, duration_s=900))
    s.worker.start()
    sender = threading.Thread(target=produce, args=(records, s.kafka), kwargs={"rate": 40.0})
    sender.start()
    wait_for(lambda: len(s.records("predictions")) >= 2, timeout=120,
             what="the first predictions", worker=s.worker)
    restart = subprocess.run(["bash", str(ROOT / "infra" / "services.sh"), "influx-restart", "4"],
                             capture_output=True, text=True, timeout=120,
                             env=services_ports(services))
    assert restart.returncode == 0, restart.stderr
    sender.join()
    wait_for(lambda: len(s.records("estimates")) >= len(records), timeout=120,
             what="all estimates", worker=s.worker)
    url = services["influx"]

    def every_prediction_stored() -> bool:
        # predictions may still be arriving after the last estimate (the solve that follows
        # it): compare InfluxDB with the topic as it is at each poll
        n_pred = len(_unique_by(s.records("predictions"), lambda p: p["time"]))
        return flux_count(url, system, "prediction", "users") == n_pred \
            and flux_count(url, system, "tier_estimate", "utilization") >= len(records)

    wait_for(every_prediction_stored, timeout=120,
             what="every point in InfluxDB after its restart", worker=s.worker)
    assert s.worker.alive()


# ---------------------------------------------------------------------------------------------
def _bad_input(system: str) -> tuple[list, list[tuple[str, str]], int]:
    """A clean trace with bad records mixed in; returns (records, expected dead letters as
    (field, reason prefix), number of valid windows)."""
    good = demo_records(DemoScenario(system=system, duration_s=600))
    base = dict(good[10])
    out: list = list(good[:40])
    bad: list[tuple[str, str]] = []

    def add(rec, field: str, reason: str) -> None:
        out.append(rec)
        bad.append((field, reason))

    add("{not json", "record", "record: malformed JSON")
    add(json.dumps({k: v for k, v in base.items() if k != "completions"}), "completions",
        "completions: missing")
    add(json.dumps({**base, "end": base["end"], "utilization": -0.1}), "utilization",
        "utilization: must be within")
    add(json.dumps({**base})[:-1] + ', "window_s": NaN}', "window_s", "window_s: must be finite")
    add(json.dumps({**base, "utilization": 1.2}), "utilization", "utilization: must be within")
    add(json.dumps({**base, "completions": {"home": -3}}), "completions.home",
        "completions.home: must be >= 0")
    add(json.dumps({**base, "tier": "cache"}), "tier", "unknown tier")
    add(json.dumps({**good[20], "utilization": round(good[20]["utilization"] / 2, 6)}),
        "end", "duplicate")                                  # same end, other content
    out.append(json.dumps(good[21]))              # a replay: skipped, no dead letter
    valid = 40
    # out of order: swap two windows of the next minute; a new class appears mid-stream
    rest = list(good[40:])
    rest[2], rest[4] = rest[4], rest[2]
    for rec in rest[10:]:
        rec["completions"] = {**rec["completions"], "checkout": 3}
    out += rest
    valid += len(rest)
    return out, bad, valid


def test_bad_input_goes_to_the_dead_letter_topic_and_the_worker_keeps_going(setup_factory):
    """Malformed JSON, a missing field, negative values, NaN, utilization > 1, a negative
    count, an unknown tier and a duplicate with other content each reach
    ``perfcast.deadletter`` with the field and reason (a window sent again unchanged is a
    replay: skipped); out-of-order windows and a new class are handled; every valid window gets its
    estimate, and the outputs equal the embedded run's."""
    system = unique("shop")
    s = setup_factory(system)
    records, bad, valid = _bad_input(system)
    _embedded(s, records)
    s.worker.start()
    produce(records, s.kafka)
    wait_for(lambda: len(s.records("estimates")) >= valid
             and len(s.records("deadletter")) >= len(bad),
             timeout=120, what="estimates and dead letters", worker=s.worker)
    s.settle()
    dead = list(s.records("deadletter"))
    assert len(dead) == len(bad)
    for field, reason in bad:          # the malformed record has no key: any partition
        match = [d for d in dead if d["field"] == field and reason in d["reason"]]
        assert match, (field, reason, dead)
        assert "raw" in match[0] or "record" in match[0]
        dead.remove(match[0])
    est = s.records("estimates")
    assert len(est) == valid
    assert any(e["late"] for e in est)
    assert "checkout" in est[-1]["demands"]
    for got, want in zip(est, s.expected.estimates):
        assert_close(got, want)
    assert s.worker.alive()
