"""What replacing the app's departure process by a smaller one costs the open route's R, against
the full process, on the large-population network (``bench/large_n_network.py``).

    python -m bench.accuracy.departure_compression
    python -m bench.accuracy.departure_compression --populations 3000 --shares 1e-5

The open route (:func:`solvers.open.fixed_population.solve_fixed_population`) feeds the cache
and the database the app's departure MAP (~90 phases at 5,000 users), and the two ``MAP/M/c``
queues it feeds are most of a solve. Two smaller processes in its place, each at every open
solve of the search:

* **a MAP(2)** with the same rate, SCV, third moment and index of dispersion: a
  hyperexponential marginal from the first three moments (the acyclic PH(2)'s closed form,
  Telek and Heindl 2003), the correlation decay ``gamma = 1 - (SCV - 1) / (I - 1)`` (a
  MAP(2)'s ``I = 1 + (SCV - 1) / (1 - gamma)``: Heindl, Horvath and Gross 2006), ``D1 =
  -D0 ((1 - gamma) 1 alpha + gamma I)``; its lag-1 autocorrelation printed beside the full
  process's;
* **fewer phases**: the phases whose share of the process's transitions is below ``--shares``
  dropped (the solver's ``WAVE_PHASE_SHARE`` is 1e-6).

``--network open``: the same question on the pipeline's fed open model of
:mod:`bench.speed.open_models` (five tiers, two bursty 16-core tiers: the cache and the database
fed the app's 125-171-phase departure process), at ``--loads`` of its saturation rate, with two
more variants and each one's CPU time per fed solve beside the full process's:

* **a MAP(2) matched on the lag-1 autocorrelation** instead of ``I`` (``gamma = rho_1 2 SCV /
  (SCV - 1)``, a MAP(2)'s ``rho_k = (1 - 1 / SCV) gamma^k / 2``: the correlation at the next
  tier's time scale rather than the asymptotic one);
* **lumped by departure rate**: the phases whose departure rates ``(D1 1)_i`` agree within
  0.3% aggregated (Kemeny and Snell 1960: the stationary-weighted rows; the same rate and
  phase probabilities, the burst's memory within a group lost).

Deterministic (no simulation): the change in R and per tier against the full process; the
simulation's errors are docs/accuracy.md's. Figures, no pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import math
import statistics
import sys
import time

import numpy as np

from bench.large_n_network import network
from solvers.departures import DepartureMAP
from solvers.open import fixed_population as fp


def interval_stats(dep: DepartureMAP) -> tuple[float, float, float, float, float]:
    """``(rate, SCV, E[X^3], rho_1, I)`` of the process's stationary intervals."""
    D0, D1 = dep.D0, dep.D1
    n = D0.shape[0]
    lam = float(dep.w @ D1.sum(axis=1))
    emb = dep.w @ D1 / lam
    inv = np.linalg.inv(-D0)
    m1v = inv @ np.ones(n)
    m2v = inv @ m1v
    m1, m2, m3 = float(emb @ m1v), 2.0 * float(emb @ m2v), 6.0 * float(emb @ (inv @ m2v))
    var = m2 - m1 * m1
    P = inv @ D1
    rho1 = (float(emb @ inv @ (P @ m1v)) - m1 * m1) / var
    fund = np.linalg.solve(np.eye(n) - P + np.outer(np.ones(n), emb), m1v) - m1v
    idc = (var + 2.0 * float(emb @ inv @ fund)) / (m1 * m1)
    return lam, var / (m1 * m1), m3, rho1, idc


def map2(dep: DepartureMAP) -> DepartureMAP | None:
    """The MAP(2) of the module docstring, ``None`` where the moments admit no
    hyperexponential marginal."""
    lam, scv, m3, _, idc = interval_stats(dep)
    r1, r2, r3 = 1.0 / lam, (scv + 1.0) / (2.0 * lam * lam), m3 / 6.0
    if not r2 > r1 * r1:
        return None
    a = (r3 - r1 * r2) / (r2 - r1 * r1)            # u1 + u2
    b = a * r1 - r2                                # u1 u2
    disc = a * a - 4.0 * b
    if not (disc > 0 and b > 0):
        return None
    u1, u2 = (a + math.sqrt(disc)) / 2.0, (a - math.sqrt(disc)) / 2.0
    p = (r1 - u2) / (u1 - u2)
    if not 0.0 < p < 1.0:
        return None
    gamma = min(max(1.0 - (scv - 1.0) / (idc - 1.0), 0.0), 1.0 - 1e-9) if idc > 1 else 0.0
    alpha = np.array([p, 1.0 - p])
    D0 = np.diag([-1.0 / u1, -1.0 / u2])
    D1 = -D0 @ ((1.0 - gamma) * np.outer(np.ones(2), alpha) + gamma * np.eye(2))
    theta = alpha * np.array([u1, u2])
    return DepartureMAP(D0, D1, theta / theta.sum())


def map2_lag1(dep: DepartureMAP) -> DepartureMAP | None:
    """:func:`map2`'s marginal with the decay ``gamma`` matched on the lag-1 autocorrelation
    (module docstring), ``None`` where :func:`map2` has none."""
    base = map2(dep)
    if base is None:
        return None
    _, scv, _, rho1, _ = interval_stats(dep)
    gamma = min(max(rho1 * 2.0 * scv / (scv - 1.0), 0.0), 1.0 - 1e-9)
    theta = base.w
    alpha = theta * np.diag(base.D0) / float(theta @ np.diag(base.D0))   # the start phases
    D1 = -base.D0 @ ((1.0 - gamma) * np.outer(np.ones(2), alpha) + gamma * np.eye(2))
    return DepartureMAP(base.D0, D1, theta)


def lumped_by_rate(dep: DepartureMAP, width: float = 3e-3) -> DepartureMAP:
    """The phases whose departure rates agree within ``width`` (relative) aggregated with
    their stationary weights (module docstring)."""
    d = dep.D1.sum(axis=1)
    _, group = np.unique(np.round(np.log(np.maximum(d, 1e-300)) / width), return_inverse=True)
    K = int(group.max()) + 1
    A = np.zeros((K, d.shape[0]))
    A[group, np.arange(d.shape[0])] = dep.w
    wk = A.sum(axis=1)
    ones = (A > 0).astype(float)
    D0 = A @ dep.D0 @ ones.T / wk[:, None]
    D1 = A @ dep.D1 @ ones.T / wk[:, None]
    D0[np.diag_indices(K)] -= D0.sum(axis=1) + D1.sum(axis=1)
    return DepartureMAP(D0, D1, wk / wk.sum())


def open_network(loads: list[float], shares: list[str]) -> None:
    """``--network open`` (module docstring)."""
    from bench.speed import open_models as om
    from solvers.open import queues
    procs = om.processes()
    sat = min(c / p.mean for c, p in zip(om.CORES, procs))
    full = fp.departure_process

    def solve_all() -> tuple[dict[float, np.ndarray], dict[float, float]]:
        out, cpu = {}, {}
        for load in loads:
            used = []
            for _ in range(3):
                queues._CHAINS.clear()
                t0 = time.process_time()
                res = om.fed_solve(load * sat, procs)
                used.append(time.process_time() - t0)
            out[load], cpu[load] = res.residence_time[:, 0], statistics.median(used)
        return out, cpu

    base, base_cpu = solve_all()
    print("\n| load | phases | SCV | I | rho_1 | fed solve CPU (ms) |\n"
          "|---:|---:|---:|---:|---:|---:|")
    for load in loads:
        dep = full(procs[2], om.CORES[2], load * sat)
        _, scv, _, rho1, idc = interval_stats(dep)
        print(f"| {load:.2f} | {dep.D0.shape[0]} | {scv:.2f} | {idc:.1f} | {rho1:.3f} | "
              f"{1000 * base_cpu[load]:.1f} |")
    variants = [("MAP(2), I", map2), ("MAP(2), lag-1", map2_lag1),
                ("lumped by departure rate", lumped_by_rate)]
    wrapped = [(name, (lambda f: lambda *a, **k: (lambda d: None if d is None else f(d) or d)(
        full(*a, **k)))(fn)) for name, fn in variants]
    wrapped += [(f"phases below {s} dropped",
                 (lambda s: lambda *a, **k: full(*a, **{**k, "negligible": s}))(float(s)))
                for s in shares]
    print("\n| departures | " + " | ".join(f"R at {x:.1f}" for x in loads)
          + " | cache; db at worst | fed solve CPU (ms) |\n|---|" + "---:|" * (len(loads) + 2))
    for name, dep_fn in wrapped:
        fp.departure_process = dep_fn
        try:
            got, cpu = solve_all()
        finally:
            fp.departure_process = full
        cells = [f"{100 * (got[x].sum() / base[x].sum() - 1):+.1f}%" for x in loads]
        tiers = [max(abs(got[x][m] / base[x][m] - 1) for x in loads) for m in (3, 4)]
        print(f"| {name} | " + " | ".join(cells) + f" | {100 * tiers[0]:.0f}%; "
              f"{100 * tiers[1]:.0f}% | " + " / ".join(f"{1000 * cpu[x]:.1f}" for x in loads)
              + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--populations", default="1000,2000,3000,4000,5000")
    ap.add_argument("--shares", default="1e-5,1e-3")
    ap.add_argument("--network", choices=("large-n", "open"), default="large-n")
    ap.add_argument("--loads", default="0.2,0.5,0.7,0.9",
                    help="--network open: fractions of the saturation rate")
    args = ap.parse_args()
    print(f"command: python -m {__spec__.name} {' '.join(sys.argv[1:])}")
    if args.network == "open":
        open_network([float(v) for v in args.loads.split(",")], args.shares.split(","))
        return
    procs, cores, z = network()
    full = fp.departure_process
    pops = [int(v) for v in args.populations.split(",")]

    def solve_all() -> dict[int, fp.FixedPopulationResult]:
        out = {}
        for n in pops:
            fp.forget_held()
            out[n] = fp.solve_fixed_population(procs, n, z, servers=cores)
        return out

    base = solve_all()
    print("\n| N | phases | SCV | I | rho_1 full / MAP(2) |\n|---:|---:|---:|---:|---:|")
    for n, r in base.items():
        dep = full(procs[1], cores[1], r.throughput)
        _, scv, _, rho1, idc = interval_stats(dep)
        small = map2(dep)
        rho = "-" if small is None else f"{interval_stats(small)[3]:.3f}"
        print(f"| {n:,} | {dep.D0.shape[0]} | {scv:.2f} | {idc:.1f} | {rho1:.3f} / {rho} |")

    variants = [("MAP(2)", lambda *a, **k: (lambda d: None if d is None else map2(d) or d)(
        full(*a, **k)))]
    variants += [(f"phases below {s} dropped",
                  (lambda s: lambda *a, **k: full(*a, **{**k, "negligible": s}))(float(s)))
                 for s in args.shares.split(",")]
    print("\n| departures | " + " | ".join(f"R, N = {n:,}" for n in pops)
          + " | worst tier |\n|---|" + "---:|" * (len(pops) + 1))
    for name, dep_fn in variants:
        fp.departure_process = dep_fn
        try:
            got = solve_all()
        finally:
            fp.departure_process = full
        cells = [f"{100 * (got[n].response_time / base[n].response_time - 1):+.1f}%"
                 for n in pops]
        worst = max(float(np.max(np.abs(got[n].residence_time / base[n].residence_time - 1)))
                    for n in pops)
        print(f"| {name} | " + " | ".join(cells) + f" | {100 * worst:.0f}% |")


if __name__ == "__main__":
    main()
