"""How many tiers one Prometheus source keeps up with (the target: 1,000 tiers at 5-s windows).

Two figures:

1. the mapping alone (:func:`streams.sources.prometheus.system_windows`, pure): microseconds
   per tier-window for the live step (one window per tier) and for a backtest (720 windows);
2. one live step against a real Prometheus (``PERFCAST_PROMETHEUS_URL``, e.g. the one
   ``infra/services.sh up`` starts, scraping itself): ``N`` tiers, each with the busy,
   completions, time-sum and time-count queries of the tests (4 ``query_range`` requests per
   tier), the last window read as ``perfcast ingest`` reads it; seconds per step, and the tiers
   a 5-s window leaves time for.

    python -m bench.speed.prometheus [--tiers 1000] [--live-tiers 50]
"""

from __future__ import annotations

import argparse
import os
import time

from streams.sources.prometheus import (
    Series,
    TierData,
    source_from_mapping,
    system_windows,
    window_ends,
)
from streams.sources.prometheus_http import PrometheusClient, fetch_windows

QUERIES = {
    "cores": 2,
    "busy_seconds": 'process_cpu_seconds_total{job="prometheus"}',
    "completions": 'prometheus_http_requests_total{job="prometheus"}',
    "time_sum": 'prometheus_http_request_duration_seconds_sum{job="prometheus"}',
    "time_count": 'prometheus_http_request_duration_seconds_count{job="prometheus"}',
}


def source(url: str, tiers: int):
    return source_from_mapping({"prometheus": {"url": url, "system": "bench", "window_s": 5},
                                "tiers": {f"t{i}": dict(QUERIES) for i in range(tiers)}},
                               env={})


def synthetic(ends: list[int], classes: int = 5) -> TierData:
    grid = [ends[0] - 5000] + ends
    busy = [Series({"instance": "a"}, {t: t / 1000 * 0.4 for t in grid})]
    comp = [Series({"handler": f"/c{c}", "code": "200"}, {t: t / 100 * (c + 1) for t in grid})
            for c in range(classes)]
    spent = [Series({"handler": f"/c{c}"}, {t: t / 1e4 * (c + 1) for t in grid})
             for c in range(classes)]
    return TierData(busy_seconds=busy, completions=comp, time_sum=spent, time_count=comp)


def mapping(tiers: int, windows: int) -> float:
    src = source("http://x", tiers)
    ends = window_ends(0, windows * 5.0, 5.0)
    data = {t.name: synthetic(ends) for t in src.tiers}
    t0 = time.perf_counter()
    records, gaps = system_windows(src, data, ends)
    seconds = time.perf_counter() - t0
    assert len(records) == tiers * windows and not gaps
    return seconds


def live_step(url: str, tiers: int) -> float:
    src = source(url, tiers)
    client = PrometheusClient(src)
    end = (time.time() - 3) // 5 * 5
    t0 = time.perf_counter()
    fetched = fetch_windows(src, end - 5, end, client)
    seconds = time.perf_counter() - t0
    assert len(fetched.records) == tiers, (len(fetched.records), fetched.gaps[:3])
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiers", type=int, default=1000)
    parser.add_argument("--live-tiers", type=int, default=50)
    args = parser.parse_args()
    live = mapping(args.tiers, 1)
    back = mapping(args.tiers // 10, 720)
    print(f"mapping, live step: {args.tiers} tiers x 1 window in {live * 1e3:.1f} ms "
          f"({live / args.tiers * 1e6:.1f} us per tier-window)")
    print(f"mapping, backtest: {args.tiers // 10} tiers x 720 windows in {back:.2f} s "
          f"({back / (args.tiers // 10 * 720) * 1e6:.1f} us per tier-window)")
    url = os.environ.get("PERFCAST_PROMETHEUS_URL")
    if not url:
        print("PERFCAST_PROMETHEUS_URL not set: no live figure")
        return
    runs = sorted(live_step(url, args.live_tiers) for _ in range(5))
    step = runs[len(runs) // 2]
    print(f"live step against {url}: {args.live_tiers} tiers x 4 queries in {step:.2f} s "
          f"(median of 5; {step / args.live_tiers / 4 * 1e3:.2f} ms per query) -> "
          f"{5.0 / (step / args.live_tiers):.0f} tiers per 5-s window on one follower")


if __name__ == "__main__":
    main()
