"""Why a class's database demand reads high: the three readings of a campaign's stored runs.

The pipeline splits the database's busy CPU between classes from the per-class time at the tier
(:mod:`estimators.class_split`): under processor sharing ``D_c`` is proportional to ``R_c``
(Kleinrock 1976, ch. 4), under FCFS ``D_c = R_c - W``. Both assume the time at the tier is
the CPU demand stretched by queueing for the CPU. Per run this prints, against the backends'
own CPU per request (``testbed_db_backend_cpu_seconds_total``, bench/testbed/pointtruth.py):

* **background** -- the tier's busy CPU less the backends' counted CPU (WAL writer,
  checkpointer, autovacuum, the exporters' queries), in total and per completion of the write
  class: if that gap grew with the writes' rate, a regression would rightly charge it to them
  (Rolia and Vetland 1995);
* **the split's readings** -- the PS and FCFS readings of the windows the pipeline read
  (``prometheus-windows.jsonl``), each scaled to the counted aggregate so that only the split
  is judged, with the discipline test's verdict;
* **what the time at the tier holds** -- per class ``R_c / D_c`` (the same for every class if
  the time were stretched CPU alone), and the least-squares fit ``R_c = s D_c + l t_c`` with
  ``t_c`` the class's round trips per request (``db_calls``, pg_stat_statements' statements,
  plus BEGIN and COMMIT for a class run as one transaction, ``--transaction``): a fixed latency
  per round trip (the client's send, the backend's wake-up on its CPU, the reply) that is not
  CPU, which puts a class of many cheap statements above its CPU share under any discipline.

    python -m bench.testbed.splitcause /tmp/camp4/lifted [--transaction buy]

``DIR`` is a campaign's output (``--rejudge`` output too): its ``campaign.json`` and the runs'
``perfcast-N/prometheus-windows.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from estimators.class_split import SplitSums, class_split


def _windows(run_dir: Path, tier: str, classes: list[str]) -> tuple[np.ndarray, ...] | None:
    path = run_dir / "prometheus-windows.jsonl"
    if not path.exists():
        return None
    rows = [r for r in map(json.loads, path.read_text().splitlines()) if r.get("tier") == tier]
    if not rows:
        return None
    U = np.array([r["utilization"] for r in rows], dtype=float)
    T = np.array([r["window_s"] for r in rows], dtype=float)
    n = np.array([[r["completions"].get(c, 0.0) for c in classes] for r in rows], dtype=float)
    R = np.array([[(r.get("response_time_s") or {}).get(c, np.nan) for c in classes]
                  for r in rows], dtype=float)
    return U, T, n, n / T[:, None], R


def run_evidence(run: dict[str, Any], run_dir: Path, transaction: set[str]
                 ) -> dict[str, Any] | None:
    """One run's three readings (module docstring) as numbers; ``None`` for a run whose log
    has no backend CPU counter (a campaign before the app counted it)."""
    truth = run["truth"]
    rows = [c for c in truth["classes"] if c.get("requests") and c.get("db_backend_cpu_s")]
    if not rows or len(rows) < len([c for c in truth["classes"] if c.get("requests")]):
        return None
    classes = [c["cls"] for c in rows]
    n = np.array([c["requests"] for c in rows], dtype=float)
    D = np.array([c["db_backend_cpu_s"] for c in rows])
    R = np.array([c["app_db_wall_s"] for c in rows])
    busy = {t["tier"]: t["busy_s"] for t in truth["tiers"]}.get("db", 0.0)
    counted = float(n @ D)
    out: dict[str, Any] = {"users": run["users"], "classes": classes, "truth_ms": D * 1e3,
                           "busy_s": busy, "counted_s": counted, "gap_s": busy - counted,
                           "requests": n, "ratio": R / D}
    trips = np.array([(c.get("db_calls") or 1.0) + (2.0 if c["cls"] in transaction else 0.0)
                      for c in rows])
    A = np.c_[D, trips]
    (s, lat), *_ = np.linalg.lstsq(A, R, rcond=None)
    out.update(stretch=float(s), latency_ms=float(lat) * 1e3, fit_residual=(A @ [s, lat]) / R - 1)
    w = _windows(run_dir, "db", classes)
    if w is not None:
        U, T, cnt, X, Rw = w
        sums = SplitSums()
        sums.grow(classes)
        sums.add(U, np.ones_like(U), X, Rw, cnt, T)
        sp = class_split(sums)
        if sp is not None:
            out["discipline"] = (sp.discipline if sp.decided
                                 else "undecided" + ("" if sp.identified else ", unidentified"))
            for d, v in sp.by_discipline.items():
                est = np.array([v[c] for c in classes])
                scaled = est * counted / float(n @ est) if float(n @ est) > 0 else est
                out[f"{d}_error"] = scaled / D - 1
    return out


def _pct(a: np.ndarray) -> str:
    return " / ".join(f"{100 * x:+.0f}%" for x in a)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", type=Path, help="a campaign's output directory")
    p.add_argument("--transaction", default="buy",
                   help="classes run as one transaction (BEGIN and COMMIT: two more round "
                        "trips), comma-separated")
    args = p.parse_args(argv)
    camp = json.loads((args.dir / "campaign.json").read_text())
    tx = {c for c in args.transaction.split(",") if c}
    print("| users | db busy / counted CPU (s) | gap per write (ms) | R/D per class | "
          "fit s, l per round trip | fit residuals | PS split, scaled | FCFS split, scaled | "
          "discipline |")
    print("|---:|---|---:|---|---|---|---|---|---|")
    names: list[str] = []
    for run in camp["runs"]:
        ev = run_evidence(run, args.dir / f"perfcast-{run['users']}", tx)
        if ev is None:
            print(f"| {run['users']} | no backend CPU counter in this run's log |")
            continue
        names = ev["classes"]
        writes = sum(float(ev["requests"][i]) for i, c in enumerate(ev["classes"]) if c in tx)
        per_write = f"{1e3 * ev['gap_s'] / writes:.2f}" if writes else "-"
        print(f"| {ev['users']} | {ev['busy_s']:.1f} / {ev['counted_s']:.1f} | {per_write} | "
              + " / ".join(f"{x:.2f}" for x in ev["ratio"])
              + f" | {ev['stretch']:.2f}, {ev['latency_ms']:.2f} ms | {_pct(ev['fit_residual'])} | "
              + (_pct(ev["ps_error"]) if "ps_error" in ev else "-") + " | "
              + (_pct(ev["fcfs_error"]) if "fcfs_error" in ev else "-") + " | "
              + ev.get("discipline", "-") + " |")
    print(f"\nclasses: {' / '.join(names)}; errors against the backends' CPU per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
