"""The decomposition's answer (:class:`DecompositionResult`) and how the metrics are formed.

Metrics come from the bursty tier holding the most jobs (the *reference* tier ``r``): its chain
gives ``X`` and ``P(n_r = n)``. ``U_m`` is the per-core utilization ``E[min(n_m, c_m)]/c_m``;
``R_m = Q_m / X`` (Little). ``bottleneck_probability`` gives each level of the reference tier to
the tier holding the most jobs there (the others at their conditional means,
:func:`split_top`): the analogue of :mod:`solvers.mapqn`'s ``B_m`` without its ties between
empty queues at light load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers.processes import MAP


def _frozen(a: Any) -> np.ndarray:
    arr = np.array(a, dtype=float)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class DecompositionResult:
    """Solution of the closed network by :func:`solve_decomposed` (module docstring).

    Per-tier arrays have shape ``(M,)``: ``residence_time`` ``R_m``, ``utilization`` ``U_m``
    (per core), ``queue_length`` ``Q_m``, ``bottleneck_probability`` ``B_m``.
    ``throughput`` ``X`` and ``response_time`` ``R = sum_m R_m`` (think time excluded), so
    ``N = X (R + Z)`` up to ``little_residual``. ``iterations``: sweeps of the fixed point
    over every round of step 4 (0: no bursty tier; 1: one, and no exponential tier after
    it), ``converged``, ``flags`` for anything approximate or degenerate.
    """

    throughput: float
    response_time: float
    residence_time: np.ndarray
    utilization: np.ndarray
    queue_length: np.ndarray
    bottleneck_probability: np.ndarray
    population: int
    think_time: float
    servers: tuple[int, ...]
    iterations: int
    converged: bool
    little_residual: float
    method: str = "decomposition"
    elapsed_s: float = 0.0
    flags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in ("residence_time", "utilization", "queue_length", "bottleneck_probability"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))


def decomposition_result(X: float, Q: np.ndarray, U: np.ndarray, B: np.ndarray, procs: list[MAP],
                         cores: tuple[int, ...], N: int, Z: float, iterations: int, converged: bool,
                         flags: list[str], t0: float) -> DecompositionResult:
    """The :class:`DecompositionResult` of the throughput ``X`` and mean queues ``Q`` (clipped to
    ``[0, N]``); flags repeated by the rounds come once, and a Little's-law gap above 1e-4 of
    ``N`` is flagged."""
    means = np.array([p.mean for p in procs])
    flags = list(dict.fromkeys(flags))          # each round of step 4 may repeat a flag
    Q = np.clip(Q, 0.0, float(N))
    R = Q / X if X > 0 else means.copy()
    little = abs(float(Q.sum()) + X * Z - N) / N
    if little > 1e-4:
        flags.append(f"Little's law off by {little:.2g} of N")
    return DecompositionResult(
        throughput=X, response_time=float(R.sum()), residence_time=R, utilization=U,
        queue_length=Q, bottleneck_probability=B, population=N, think_time=Z, servers=cores,
        iterations=iterations, converged=converged, little_residual=little,
        elapsed_s=time.perf_counter() - t0, flags=tuple(flags))


def split_top(conditional: np.ndarray, level: np.ndarray) -> np.ndarray:
    """``B_m``: at each level of the reference tier, the tier holding the most jobs (the others
    at their conditional means) takes that level's probability; ties split."""
    top = conditional == conditional.max(axis=0, keepdims=True)
    return (top / top.sum(axis=0, keepdims=True)) @ level
