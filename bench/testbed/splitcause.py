"""Why a class's database demand reads high: the four readings of a campaign's stored runs.

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
  CPU, which puts a class of many cheap statements above its CPU share under any discipline;
* **whether the windows could tell** -- the same latency per round trip fitted from what the
  pipeline reads alone (:func:`trip_delay_fit`: ``R_{k,c} = D_c f(U_k) + l t_c`` over the
  windows with the utilization law, the round trips ``t_c`` given): one delay shared by every
  class instead of the pure-delay fit's one per class (``estimators.latency``), and its 95%
  interval. Where that interval is wider than ``l`` itself, no estimator of the windows can
  take the round trips off a class's time, whatever it is told about the trips per request;
* **the time's two edges** -- the processor-sharing split (each class's share of the
  counted CPU in proportion to its time at the tier) with each per-class time a monitoring
  stack has (:func:`edge_errors`): the app's wall time of its calls, pg_stat_statements'
  execution time, and their midpoint (bench/testbed/perfcast.toml's ``time_sum``).

    python -m bench.testbed.splitcause /tmp/camp4/lifted [--transaction buy]

``DIR`` is a campaign's output (``--rejudge`` output too): its ``campaign.json`` and the runs'
``perfcast-N/prometheus-windows.jsonl``; a closed or open ramp's too (``load-ramp.jsonl``,
``load-open-ramp.jsonl`` and their ``perfcast-ramp``, ``perfcast-open-ramp``), its truth read
from its load log.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.testbed.truth import truth
from estimators.class_split import SplitSums, class_split
from estimators.latency import stretch

#: a campaign's ramps: (label, load log, perfcast's output directory)
RAMPS = (("closed ramp", "load-ramp.jsonl", "perfcast-ramp"),
         ("open ramp", "load-open-ramp.jsonl", "perfcast-open-ramp"))


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


def trip_delay_fit(U: np.ndarray, X: np.ndarray, n: np.ndarray, R: np.ndarray,
                   trips: np.ndarray, cores: float = 1.0) -> dict[str, Any] | None:
    """One latency per round trip ``l`` shared by the classes and their demands ``D_c``, from
    windows alone: weighted least squares on the response rows ``R_{k,c} = D_c f(U_k) + l
    t_c`` (``f``: the processor-sharing stretch of :func:`estimators.latency.stretch`; each
    row weighted by its completions over the class's mean square, as
    :func:`estimators.latency.fit_latency` does) and the utilization law ``sum_c X_{k,c} D_c =
    U_k c`` (Rolia and Vetland 1995; weighted by the window's completions over the law's mean
    square). ``U`` ``(K,)``; ``X``, ``n``, ``R`` ``(K, C)`` (NaN: no time); ``trips`` ``(C,)``.
    Unconstrained, so that the interval is the estimate's own (Lawson and Hanson's
    non-negativity would clip it at 0). ``None`` without two classes' times in some window."""
    has = np.isfinite(R) & (n > 0)
    if has.sum(axis=1).max(initial=0) < 2:
        return None
    K, C = n.shape
    f = stretch(U, cores)
    Rbar = np.where(has, n * np.nan_to_num(R), 0.0).sum(0) / np.maximum(
        np.where(has, n, 0.0).sum(0), 1e-300)
    k, c = np.nonzero(has)
    w = np.sqrt(n[k, c]) / np.where(Rbar[c] > 0, Rbar[c], 1.0)
    rows = np.zeros((k.size, C + 1))
    rows[np.arange(k.size), c] = f[k]
    rows[:, C] = trips[c]
    z = U * cores
    wz = np.sqrt(n.sum(axis=1)) / max(float(np.sqrt(np.mean(z * z))), 1e-300)
    A = np.vstack([rows * w[:, None], np.c_[X, np.zeros(K)] * wz[:, None]])
    b = np.concatenate([R[k, c] * w, z * wz])
    theta, *_ = np.linalg.lstsq(A, b, rcond=None)
    dof = max(b.size - (C + 1), 1)
    resid = b - A @ theta
    cov = float(resid @ resid) / dof * np.linalg.pinv(A.T @ A)
    return {"latency_ms": 1e3 * float(theta[C]),
            "latency_ci_ms": 1e3 * 1.96 * float(np.sqrt(max(cov[C, C], 0.0))),
            "demands": theta[:C]}


#: :func:`edge_errors`' readings: the share of the time outside the statements' execution
#: that the db's time takes (0: the server's execution time, 1: the app's wall time)
EDGES = (("wall", 1.0), ("exec", 0.0), ("midpoint", 0.5))


def edge_errors(n: np.ndarray, cpu: np.ndarray, wall: np.ndarray, exec_s: np.ndarray
                ) -> dict[str, np.ndarray]:
    """Per reading of :data:`EDGES` the relative error of the processor-sharing split against
    the CPU per request ``cpu``: each class's share of the counted CPU ``sum_c n_c cpu_c`` in
    proportion to its time at the tier ``exec_s + phi (wall - exec_s)`` (Kleinrock 1976: under
    PS, ``D_c`` is proportional to ``R_c``), so that only the split is judged. ``n``
    completions, the rest seconds per request, all ``(C,)``."""
    n, cpu, wall, exec_s = (np.asarray(a, dtype=float) for a in (n, cpu, wall, exec_s))
    counted = float(n @ cpu)
    out = {}
    for name, phi in EDGES:
        time = exec_s + phi * (wall - exec_s)
        total = float(n @ time)
        if not (total > 0 and counted > 0):
            raise ValueError(f"edge_errors: no time ({total!r}) or no CPU ({counted!r}) counted")
        out[name] = time * (counted / total) / cpu - 1.0
    return out


def run_evidence(run: dict[str, Any], run_dir: Path, transaction: set[str]
                 ) -> dict[str, Any] | None:
    """One run's four readings (module docstring) as numbers; ``None`` for a run whose log
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
    E = np.array([c.get("db_exec_s") or np.nan for c in rows])
    if np.all(np.isfinite(E)):
        out["edges"] = edge_errors(n, D, R, E)
    w = _windows(run_dir, "db", classes)
    if w is not None:
        U, T, cnt, X, Rw = w
        fit = trip_delay_fit(U, X, cnt, Rw, trips)
        if fit is not None:
            out.update(windows_latency_ms=fit["latency_ms"],
                       windows_latency_ci_ms=fit["latency_ci_ms"],
                       windows_error=fit["demands"] / D - 1)
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
          "discipline | the windows' l (95%), their D | split by wall / exec / midpoint |")
    print("|---:|---|---:|---|---|---|---|---|---|---|---|")
    names: list[str] = []
    runs = [(run, args.dir / f"perfcast-{run['users']}") for run in camp["runs"]]
    for label, log, sub in RAMPS:
        if (args.dir / log).exists():
            lines = [json.loads(x) for x in (args.dir / log).read_text().splitlines() if x]
            runs.append(({"users": label, "truth": asdict(truth(lines))}, args.dir / sub))
    for run, run_dir in runs:
        ev = run_evidence(run, run_dir, tx)
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
              + ev.get("discipline", "-") + " | "
              + (f"{ev['windows_latency_ms']:.2f} +- {ev['windows_latency_ci_ms']:.2f} ms, "
                 + _pct(ev["windows_error"]) if "windows_latency_ms" in ev else "-") + " | "
              + (" ; ".join(_pct(ev["edges"][name]) for name, _ in EDGES)
                 if "edges" in ev else "-") + " |")
    print(f"\nclasses: {' / '.join(names)}; errors against the backends' CPU per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
