"""The busy-time axis: how "busy times add up to ``t``" is resolved from monitoring windows.

Lay the windows end to end on the *busy-time axis*: window ``k`` occupies ``[C_k, C_k + B_k)``
with ``C_k = B_1 + ... + B_{k-1}`` and holds ``n_k`` completions; the axis ends at
``S = sum_k B_k``. Completions are only known per window, so a run can only start and end at
window edges ``C_k``.

* **Runs placed uniformly in busy time, overlapping.** For each ``s = 0, T, 2T, ...`` with
  ``s + t <= S`` the run is the windows between the edge nearest to ``s`` and the edge nearest
  to ``s + t``; ``N_t`` is their total completions and ``b`` their busy time (``|b - t| < T``).
  Runs do *not* start at every window (Fig. 2's "for each ``A_k``"): in a queue with bursty
  service, windows in fast-service phases drain the queue and carry little busy time, so window
  edges crowd into the bursts on the busy-time axis and one run per window over-samples them
  (``Y(T)`` reads 5x too large for an ``I = 21`` MAP(2)). Overlapping runs (every ``T``) give
  about 2/3 of the variance of disjoint runs (overlapping batch means).
* **Nearest edge, centred on the run's own expectation.** Runs of whole windows have random
  busy length ``b``; around a common mean that jitter adds ``lambda^2 Var(b)`` to ``Var(N_t)``
  (``Y(T)`` = 2.5 for Poisson completions in an M/M/1 queue with 14 completions per window;
  Mi et al. (2008), §4.2, had 465 per window). So ``Var(N_t)`` is taken as the mean of
  ``(N_t - lambda b)^2`` with ``lambda = sum n_k / S``, and ``E[N_t] = lambda * mean(b)``.
  Cutting at the *nearest* edge (rather than the first edge past ``s + t``, which is exactly
  unbiased for Poisson completions by optional stopping) halves the smoothing bias of whole
  windows for bursty processes (``Y(2T)`` 2-3% instead of 7-9% below its exact-length value
  for ``I = 20`` and ``I = 200`` MAP(2)s) at the cost of about +1% for Poisson completions.
* **Overlap bias.** The mean square residual is low by about ``(1 - t/S)`` when ``Var(N_t)``
  grows linearly in ``t`` (``lambda`` is estimated from the same trace); it is divided by that
  (<= 1% at the default ``min_samples``).

Idle windows (``U_k = 0``) take no room on the busy-time axis (completions reported in such a
window, from rounding of ``U_k``, go with the window edge they sit on). Because only the
busy-time axis matters, ``Y(t)`` depends on ``T`` only through ``t = jT``; busy time is
measured in units of ``T`` (``B_k / T = U_k``).

**Tiers of many cores.** A tier of ``c`` cores reports ``U_k`` as the mean over its cores: its
window holds ``B_k = c U_k T`` core-seconds of busy time. In units of the tier's window
(``c T`` core-seconds) a window is ``U_k`` long; the axis may be laid in any unit ``cT/s``
instead (a window is then ``s U_k`` long): ``I``, the limit of ``Y(t)``, does not depend on the
unit, only the grid of levels ``t = j cT/s`` does. :func:`axis_scale` picks ``s`` so that a
window of the mean utilization is about one unit long. At low load the grid in units of ``cT``
is coarse (a database of 8 cores at 13% utilization holds 31 units of busy time in 20 minutes
of 5-s windows: too few for four levels of ``min_runs`` runs); a unit much shorter than a
window only repeats the window scale's ``Y`` over the first levels (whole windows), and the
curve fitted through them reads ``I`` low (bench/accuracy/dispersion_cores.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


#: ``Var(N_t)`` below ``(REL_ZERO * E[N_t])**2`` is rounding noise and is taken as 0.
REL_ZERO = 1e-9
_GRID_EPS = 1e-9


@dataclass(frozen=True)
class Axis:
    """Windows laid end to end on the busy-time axis, in units of ``T``.

    Run starts and ends sit at whole multiples of ``T`` (``s = gT``, ``s + t = (g + j)T``), so
    the window edge nearest to each position ``0, T, 2T, ..., floor(S/T) T`` is found once:
    ``busy[p]`` is the busy time ``C`` at that edge and ``done[p]`` the completions before it.
    """

    busy: np.ndarray
    done: np.ndarray
    total: float        # S / T
    rate: float         # completions per T of busy time, sum n_k / (S / T)

    @classmethod
    def build(cls, utilization: np.ndarray, completions: np.ndarray, scale: float = 1.0
              ) -> "Axis":
        busy = utilization if scale == 1.0 else utilization * scale     # B_k in units T/s
        edges = np.concatenate(([0.0], np.cumsum(busy)))            # C_k / T (B_k / T = U_k)
        cum = np.concatenate(([0.0], np.cumsum(completions)))
        total = float(edges[-1])
        if total <= 0.0:
            return cls(np.zeros(1), np.zeros(1), 0.0, 0.0)
        near = _nearest_edge(edges, np.arange(0.0, total + _GRID_EPS, 1.0))
        return cls(edges[near], cum[near], total, float(cum[-1]) / total)


def axis_scale(cores: float, utilization: np.ndarray) -> float:
    """``s``: the busy-time axis of a tier of ``cores`` cores in units of ``cores T / s``
    core-seconds, so that a window of the mean utilization ``U`` is about one unit long:
    ``s = max(1, min(cores, 1/U))``. Never finer than one core's window ``T`` (``s <= cores``:
    a single-core tier keeps ``s = 1``, the axis of Mi et al. (2008), Fig. 2) and never
    coarser than the tier's window ``cores T`` (``s >= 1``); ``s = 1`` when every window is
    idle."""
    mean = float(utilization.mean()) if utilization.size else 0.0
    if not mean > 0.0:
        return 1.0
    return max(1.0, min(float(cores), 1.0 / mean))


def _nearest_edge(edges: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Index of the window edge nearest to each busy-time ``position`` (ties: the later one)."""
    above = np.minimum(np.searchsorted(edges, position, side="left"), edges.size - 1)
    below = np.maximum(above - 1, 0)
    later = edges[above] - position <= position - edges[below]
    return np.where(later, above, below)


def variance_ratio(axis: Axis, steps: int) -> tuple[float, int]:
    """``Y(t) = Var(N_t)/E[N_t]`` at ``t = steps * T``; and the number of runs behind it.

    Run ``g = 0, 1, ...`` (while ``gT + t <= S``) covers the windows between the edges nearest
    to busy times ``gT`` and ``gT + t``: busy time ``b_g ~ t`` and ``N_t`` completions.
    ``Var(N_t)`` is taken around each run's own expectation ``rate * b_g`` so that the jitter of
    ``b_g`` adds no variance; ``E[N_t] = rate * mean(b_g)``.
    """
    runs = axis.busy.size - steps
    length = axis.busy[steps:] - axis.busy[:runs]                  # b_g
    counts = axis.done[steps:] - axis.done[:runs]                  # N_t of run g
    expected = axis.rate * float(length.mean())                    # E[N_t]
    residual = counts - axis.rate * length
    variance = float(np.dot(residual, residual)) / runs / (1.0 - steps / axis.total)
    if expected <= 0.0 or variance <= (REL_ZERO * expected) ** 2:
        return 0.0, runs
    return variance / expected, runs
