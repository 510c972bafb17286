"""perfcast's output over a testbed run next to the run's ground truth.

Per tier and class: perfcast's demand (the last estimate of a window with completions, i.e.
the state at the end of the load) against the truth's demand (:mod:`bench.testbed.truth`: the
tier's busy CPU shared out by the server-reported time) and the server's own figure (db:
pg_stat_statements' execution time per request; app: the worker's CPU per request). Then each
prediction's response time per class against the one measured at the servers.

    python -m bench.testbed.compare OUT/truth.json OUT/perfcast
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("truth", help="truth.py --json output")
    p.add_argument("perfcast", help="perfcast run's --out directory")
    args = p.parse_args(argv)
    truth = json.loads(Path(args.truth).read_text())
    out = Path(args.perfcast)
    last: dict[str, dict] = {}
    for line in (out / "estimates.jsonl").read_text().splitlines():
        e = json.loads(line)
        if not e.get("kalman_flag"):
            last[e["tier"]] = e
    by_class = {c["cls"]: c for c in truth["classes"]}
    print("demand per request (ms): perfcast's last estimate | truth (busy CPU shared out) | "
          "server's own figure")
    for tier, server_key, demand_key in (("app", "app_cpu_s", "app_demand_s"),
                                         ("db", "db_exec_s", "db_demand_s")):
        e = last.get(tier)
        if e is None:
            print(f"{tier}: no estimate")
            continue
        xd = 0.0
        for cls, t in sorted(by_class.items()):
            d = e["demands"].get(cls)
            x = t["requests"] / truth["duration_s"]
            xd += x * (d or 0.0)
            print(f"  {tier:<4} {cls:<8} {_ms(d):>8} | {_ms(t[demand_key]):>8} | "
                  f"{_ms(t[server_key]):>8}")
        busy = next((b for b in truth["tiers"] if b["tier"] == tier), None)
        print(f"  {tier:<4} sum X*D {xd:.4f} against the truth's utilization "
              f"{busy['utilization']:.4f} (background excluded)" if busy else "")
    print("\npredictions: model response time / measured at the servers (ms) per class")
    for line in (out / "predictions.jsonl").read_text().splitlines():
        pr = json.loads(line)
        if not pr.get("classes"):
            print(f"  {pr['time']:.0f}: {'; '.join(pr.get('flags') or [])}")
            continue
        cells = "  ".join(
            f"{c} {_ms(v['response_time'])}/{_ms(v['response_time_measured'])}"
            for c, v in sorted(pr["classes"].items()))
        print(f"  {pr['time']:.0f} {pr['model']} N={pr['users']} Z={pr['think_time_s']:.2f} "
              f"X={pr['throughput']:.2f}/{pr['throughput_measured']:.2f} "
              f"error={pr['model_error']:.2f} capacity={pr['capacity_users']} "
              f"bottleneck={pr['bottleneck_tier']}: {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
