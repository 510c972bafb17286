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

Deterministic (no simulation): the change in R and per tier against the full process; the
simulation's errors are docs/accuracy.md's. Figures, no pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import math
import sys

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--populations", default="1000,2000,3000,4000,5000")
    ap.add_argument("--shares", default="1e-5,1e-3")
    args = ap.parse_args()
    print(f"command: python -m {__spec__.name} {' '.join(sys.argv[1:])}")
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
