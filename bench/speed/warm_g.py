"""Would a warm start pay for the waves' ``G`` in the large-population capacity search? One
cold search's ``MAP/M/c`` queues fed a bursty tier's waves, each ``G`` solved cold (today's
shifted cyclic reduction) against iterations started from the ``G`` of the search's previous
probe of the same queue (same blocks' shape, same ``A2 = c mu I``).

    python -m bench.speed.warm_g                 # the search at mean R <= 0.5 s
    python -m bench.speed.warm_g --sla 1 --repeat 9

Network: ``bench/large_n_network.py`` (as :mod:`bench.speed.large_n`). For each queue solved
twice in the search (the second full probe's, warm from the first's):

* **cold**: :func:`solvers.open.qbd.shifted_cyclic_reduction` as the search calls it
  (its tolerance, predicted stop, ``down_scale``), CPU (``time.process_time``, median of
  ``--repeat``);
* **Newton** from the previous probe's ``G`` (Bini, Latouche and Meini 2005): each step
  solves ``(A1 + A0 G) H + A0 H G = -(A2 + A1 G + A0 G^2)`` as the Sylvester equation
  ``P H + H G^{-1} = C G^{-1}`` (``P = (A1 + A0 G)^{-1} A0``, ``C`` the right side times
  ``(A1 + A0 G)^{-1}``; Bartels and Stewart 1972: two Schur forms a step), until ``G`` is as
  near a reference (the reduction run to 1e-15) as the cold one is: its steps and CPU;
* **U-based functional iteration** ``G <- (-A1 - A0 G)^{-1} A2`` from the same start
  (Latouche and Ramaswami 1999): its steps to that accuracy (at most ``--max-steps``), the
  CPU of one step.

Figures, no pass/fail.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
import scipy.linalg

from bench.large_n_network import system_model
from solvers.open import fixed_population, queues
from solvers.open.qbd import shifted_cyclic_reduction
from streams.predict.model import model_capacity


def cpu(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median CPU time of ``repeat`` calls, and the last call's value."""
    times, value = [], None
    for _ in range(repeat):
        c0 = time.process_time()
        value = fn()
        times.append(time.process_time() - c0)
    return statistics.median(times), value


def captured(sla: float) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, float, dict]]:
    """The waves' ``G`` calls of one cold search at ``sla``, in order: blocks, tolerance and
    keywords."""
    calls: list[tuple[np.ndarray, np.ndarray, np.ndarray, float, dict]] = []
    inner = fixed_population.shifted_cyclic_reduction

    def record(A0, A1, A2, tol, **kw):
        calls.append((A0.copy(), A1.copy(), A2.copy(), tol, dict(kw)))
        return inner(A0, A1, A2, tol, **kw)

    fixed_population.forget_held()
    queues._PATTERNS._held.clear()
    fixed_population.shifted_cyclic_reduction = record
    try:
        model_capacity(system_model(sla))
    finally:
        fixed_population.shifted_cyclic_reduction = inner
    return calls


def newton_step(A0: np.ndarray, A1: np.ndarray, A2: np.ndarray, G: np.ndarray) -> np.ndarray:
    """One Newton step for ``A2 + A1 G + A0 G^2 = 0`` (module notes)."""
    M = A1 + A0 @ G
    P = np.linalg.solve(M, A0)
    C = -np.linalg.solve(M, A2 + A1 @ G + A0 @ G @ G)
    inv = np.linalg.inv(G)
    return G + scipy.linalg.solve_sylvester(P, inv, C @ inv)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sla", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-steps", type=int, default=3000)
    args = ap.parse_args()
    print(f"command: python -m {__spec__.name} {' '.join(sys.argv[1:])}")
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    calls = captured(args.sla)
    print("\n| queue (phases, c mu) | start off | cold: CPU; off | Newton: steps; CPU | "
          "U-based: steps; CPU a step |\n|---|---:|---:|---:|---:|")
    seen: dict[tuple[int, float], np.ndarray] = {}
    for A0, A1, A2, tol, kw in calls:
        key = (A0.shape[0], float(A2[0, 0]))
        t_cold, G = cpu(lambda: shifted_cyclic_reduction(A0, A1, A2, tol, **kw), args.repeat)
        start = seen.get(key)
        seen[key] = G
        if start is None:
            continue
        ref = shifted_cyclic_reduction(A0, A1, A2, 1e-15)
        aim = float(np.max(np.abs(G - ref)))

        def newton() -> int:
            X, steps = start, 0
            while float(np.max(np.abs(X - ref))) > aim and steps < 20:
                X, steps = newton_step(A0, A1, A2, X), steps + 1
            return steps

        t_newton, n_newton = cpu(newton, args.repeat)
        X, n_u = start, 0
        while float(np.max(np.abs(X - ref))) > aim and n_u < args.max_steps:
            X, n_u = np.linalg.solve(-A1 - A0 @ X, A2), n_u + 1
        t_u, _ = cpu(lambda: np.linalg.solve(-A1 - A0 @ start, A2), args.repeat)
        print(f"| {key[0]}, {key[1]:g} | {np.max(np.abs(start - ref)):.2g} | "
              f"{1000 * t_cold:.2f} ms; {aim:.2g} | {n_newton}; {1000 * t_newton:.2f} ms | "
              f"{n_u if n_u < args.max_steps else f'> {args.max_steps}'}; "
              f"{1000 * t_u:.3f} ms |")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
