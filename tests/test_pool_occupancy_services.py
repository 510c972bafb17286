"""A connection pool's occupancy scraped by the real Prometheus (``infra/services.sh``): the
test's own exporter (``prometheus_client``, in-process) publishes HikariCP's gauges
``hikaricp_connections_max`` / ``_active`` / ``_pending`` and its acquire-time summary, a
target of Prometheus' ``perfcast`` scrape job; the Prometheus source reads them with the
HikariCP mapping of docs/prometheus.md ("Pools: measured occupancy", its label selector made
the test's), and each window's ``pools`` must be the gauges' values averaged over the window.

The gauges hold three values in turn (phases of 5 scraped seconds, each change timed between
two scrapes of a window), so the truth is a step function. Tolerance, window of 2 s (two 1-s scrapes, docs/prometheus.md's least):

* a window inside one phase: ``size``, ``busy``, ``waiting`` and ``acquire_s`` the phase's
  values within 1e-9 relative (an average of equal samples);
* a window across a change: ``busy`` and ``waiting`` within the two values' range, and --
  where every scrape of the window was taken -- within ``|step| x scrape interval / window``
  of the step function's time average (the average of the window's samples weighs each side
  by whole scrape intervals).

Under ``CI=true`` a missing Prometheus fails (``tests/ci_policy.py``)."""

from __future__ import annotations

import json
import re
import time
import tomllib
from pathlib import Path

import pytest

from pipeline_harness import unique, wait_for
from scrape_helpers import query
from streams.core.records import parse_window
from streams.sources.prometheus import source_from_mapping
from streams.sources.prometheus_http import fetch_windows

pytestmark = [pytest.mark.services, pytest.mark.slow]

DOC = Path(__file__).resolve().parents[1] / "docs" / "prometheus.md"
POOL, HIKARI = "db_connections", "HikariPool-1"
WINDOW_S, SCRAPE_S = 2.0, 1.0
#: scraped seconds each phase is held
PHASE_S = 5.0
#: per phase: tokens held, requests waiting, seconds each acquisition waited
PHASES = ((3.0, 0.0, 0.002), (8.0, 2.0, 0.040), (5.0, 1.0, 0.010))
SIZE = 10
#: a change of value is this close to a scrape at most (the exporter answers a scrape a few
#: milliseconds after its timestamp)
EDGE_S = 0.25


def documented_source(url: str, tag: str):
    """docs/prometheus.md's HikariCP pool table (its first pools block), the label selector
    ``application="shop"`` made the test's target label, on a tier whose required queries read
    the exporter's request and busy counters."""
    section = DOC.read_text(encoding="utf-8").split("## Pools: measured occupancy", 1)[1]
    block = re.findall(r"```toml\n(.*?)```", section, re.S)[0]
    assert "hikaricp_connections_active" in block and f"[tiers.app.pools.{POOL}]" in block
    pools = tomllib.loads(block.replace('application="shop"', f'test="{tag}"'))
    tier = {"busy_seconds": f'app_busy_seconds_total{{test="{tag}"}}',
            "completions": f'app_requests_total{{test="{tag}"}}',
            "pools": pools["tiers"]["app"]["pools"]}
    return source_from_mapping({"prometheus": {"url": url, "system": "pool",
                                               "window_s": WINDOW_S},
                                "tiers": {"app": tier}}, {})


def step_mean(changes: list[tuple[float, float]], start: float, end: float) -> float:
    """The time average over ``(start, end]`` of the step function that takes each
    ``(time, value)`` of ``changes`` from its time on."""
    total = 0.0
    for i, (t, v) in enumerate(changes):
        following = changes[i + 1][0] if i + 1 < len(changes) else float("inf")
        total += v * max(0.0, min(end, following) - max(start, t))
    return total / (end - start)


def test_the_windows_pools_are_the_gauges_averaged_over_the_window(prometheus_url,
                                                                   prometheus_targets):
    from prometheus_client import (CollectorRegistry, Counter, Gauge, Summary,
                                   start_http_server)

    url, tag = prometheus_url, unique("pool")
    registry = CollectorRegistry()
    size = Gauge("hikaricp_connections_max", "pool size", ["pool"], registry=registry)
    active = Gauge("hikaricp_connections_active", "connections in use", ["pool"],
                   registry=registry)
    pending = Gauge("hikaricp_connections_pending", "threads waiting", ["pool"],
                    registry=registry)
    acquire = Summary("hikaricp_connections_acquire_seconds", "wait for a connection",
                      ["pool"], registry=registry)
    requests = Counter("app_requests", "requests served", ["handler"], registry=registry)
    busy = Counter("app_busy_seconds", "busy core-seconds", registry=registry)
    size.labels(HIKARI).set(SIZE)
    server, _ = start_http_server(0, "127.0.0.1", registry)
    # (time the gauges took the value, value) per key; the acquisitions' wait per phase
    changes: dict[str, list[tuple[float, float]]] = {"busy": [], "waiting": []}
    waits: list[float] = []
    stamp = f'timestamp(hikaricp_connections_active{{test="{tag}"}})'

    def last_scrape() -> float:
        got = query(url, stamp, time.time())
        return float(got[0]["value"][1]) if got else 0.0

    def tick() -> None:
        """Requests served meanwhile: counters move, each acquisition waits its phase's."""
        requests.labels("/q").inc(5)
        busy.inc(0.05)
        for _ in range(5):
            acquire.labels(HIKARI).observe(waits[-1])

    def held_long_enough(since: float) -> bool:
        """The phase begun at ``since`` has been scraped for :data:`PHASE_S`, and the last
        scrape is not the last of its window: the next phase begins inside a window, which
        then averages the two."""
        last = last_scrape()
        return last >= since + PHASE_S and last % WINDOW_S < WINDOW_S - SCRAPE_S

    def enter(phase: tuple[float, float, float]) -> float:
        held, waiting, wait_s = phase
        active.labels(HIKARI).set(held)
        pending.labels(HIKARI).set(waiting)
        waits.append(wait_s)
        tick()
        at = time.time()
        changes["busy"].append((at, held))
        changes["waiting"].append((at, waiting))
        return at

    try:
        first = enter(PHASES[0])
        prometheus_targets.write_text(json.dumps([{
            "targets": [f"127.0.0.1:{server.server_address[1]}"], "labels": {"test": tag}}]))
        wait_for(lambda: last_scrape() > 0, 60, "Prometheus scraping the test's exporter")
        scraped_from = last_scrape()
        for k, phase in enumerate(PHASES):
            since = max(first if k == 0 else enter(phase), scraped_from)
            wait_for(lambda: tick() or held_long_enough(since), 60,
                     f"{PHASE_S:g} scraped seconds of phase {k}", poll_s=0.1)
        scraped_to = last_scrape()
    finally:
        prometheus_targets.write_text("[]")
        server.shutdown()

    fetched = fetch_windows(documented_source(url, tag), scraped_from + WINDOW_S, scraped_to)
    assert not fetched.refused, fetched.refused
    inside = across = mixed = 0
    counted = f'count_over_time(hikaricp_connections_active{{test="{tag}"}}[{WINDOW_S:g}s])'
    for record in fetched.records:
        window = parse_window(record)
        end, start = window.end, window.end - WINDOW_S
        occ = window.pools[POOL]
        assert occ.size == SIZE, record
        samples = query(url, counted, end)
        scrapes = float(samples[0]["value"][1]) if samples else 0.0
        # the phases a scrape of the window may have seen
        seen = [k for k, (t, _) in enumerate(changes["busy"])
                if t < end + EDGE_S and (k + 1 == len(PHASES)
                                         or changes["busy"][k + 1][0] > start - EDGE_S)]
        if len(seen) == 1:
            held, waiting, wait_s = PHASES[seen[0]]
            assert occ.busy == pytest.approx(held, rel=1e-9), (end, seen)
            assert occ.waiting == pytest.approx(waiting, rel=1e-9, abs=1e-12), (end, seen)
            if scrapes >= 2:                 # increase() needs two samples
                assert occ.acquire_s == pytest.approx(wait_s, rel=1e-9), (end, seen)
            inside += 1
            continue
        for key in ("busy", "waiting"):
            got = getattr(occ, key)
            touched = [changes[key][k][1] for k in seen]
            assert min(touched) - 1e-9 <= got <= max(touched) + 1e-9, (end, key, got)
            mixed += key == "busy" and min(touched) < got < max(touched)
            if scrapes >= WINDOW_S / SCRAPE_S:   # every scrape of the window taken
                truth = step_mean(changes[key], start, end)
                bound = (max(touched) - min(touched)) * SCRAPE_S / WINDOW_S
                assert abs(got - truth) <= bound + 1e-9, (end, key, got, truth)
        across += 1
    # every phase has a window inside it; the changes are seen across windows, and a window
    # holding a change averages the two values (the change is timed between its scrapes; a
    # poll delayed past the next scrape on a loaded machine misses it, so one suffices)
    assert inside >= len(PHASES), (inside, across)
    assert across >= len(PHASES) - 1 and mixed >= 1, (inside, across, mixed)
