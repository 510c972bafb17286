"""Speed of exact and approximate MVA (solvers.mva) against line-solver's exact MVA.

Run from the repository root: ``python -m bench.speed.mva``. Prints figures; no pass/fail.
"""

from __future__ import annotations

import sys
import time

import numpy as np


# ``solvers`` must be imported before ``line_solver`` (line_solver puts its own package
# directory on sys.path, where its ``solvers`` subpackage would shadow ours).
from solvers.mva import amva, lattice_size, mva  # isort: skip

from line_solver.api.pfqn.mva import pfqn_mva  # isort: skip


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    rng = np.random.default_rng(2026)

    # exact MVA: 3 classes x 60 users, 3 single-server stations
    D = rng.uniform(0.005, 0.05, (3, 3))
    N = np.array([60, 60, 60])
    Z = np.array([1.0, 2.0, 0.5])
    t_ours, res = _best(lambda: mva(D, N, Z), repeat=5)
    t0 = time.perf_counter()
    XN, _, QN, _, _, _, _ = pfqn_mva(D, N, Z)
    t_line = time.perf_counter() - t0
    diff = np.max(np.abs(res.throughput - XN[0]) / XN[0])
    print(f"exact MVA 3 classes x 60 users, 3 stations ({lattice_size(N)} population vectors)")
    print(f"  perfcast mva          : {t_ours * 1e3:9.1f} ms (best of 5)")
    print(f"  line-solver pfqn_mva  : {t_line * 1e3:9.1f} ms (one run)")
    print(f"  speed-up              : {t_line / t_ours:9.1f} x")
    print(f"  max rel. diff of X_c  : {diff:9.2e}")

    # exact load-dependent MVA with a multi-server station
    Dm = rng.uniform(0.01, 0.1, (3, 2))
    Nm = np.array([40, 40])
    t_ms, _ = _best(lambda: mva(Dm, Nm, [1.0, 1.0], [1, 4, 2]), repeat=3)
    print(f"exact MVA 2 classes x 40 users, servers (1, 4, 2): {t_ms * 1e3:.1f} ms "
          f"(best of 3)")

    # approximate MVA: 5 classes x 1000 users, 4 stations
    Da = rng.uniform(0.001, 0.02, (4, 5))
    Na = np.full(5, 1000)
    Za = rng.uniform(1.0, 10.0, 5)
    t_amva, ares = _best(lambda: amva(Da, Na, Za, tol=1e-8), repeat=5)
    print("approximate MVA (Schweitzer-Bard) 5 classes x 1000 users, 4 stations")
    print(f"  perfcast amva         : {t_amva * 1e3:9.2f} ms (best of 5), "
          f"{ares.iterations} iterations, converged={ares.converged} (tol 1e-8)")


if __name__ == "__main__":
    main()
