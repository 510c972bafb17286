"""The two-moment factor's fixed point (:mod:`solvers.pools_general`) as one equation in one
number, solved by Newton's method on the pools' waits as exact functions of the think time.

:func:`solvers.pools_general.solve_pools_general` puts an infinite-server station of demand
``d_k`` just before each pool ``k`` whose wait it scales by ``f_k > 1``, and solves
``d_k = (f_k - 1) W_k(d)`` with ``W_k`` the flow-equivalent station's wait. Where every such pool
is outermost (inside no other pool), the extra stations sit in the enclosing network beside the
think time, and in a product-form network delay stations are one delay station of their summed
demand (Baskett et al. 1975: each contributes ``z^j / j!`` to the normalising constant, and
the convolution of two of them is that of their sum). So every ``W_k`` depends on ``s = sum_k
d_k`` only -- it is the wait at think time ``Z + s`` -- and the fixed point is one equation::

    h(s) = s - sum_k (f_k - 1) W_k(Z + s) = 0

**The waits as functions of the think time.** With ``B(n)`` the normalising constant of the
enclosing network without the think time, ``G_k(n)`` that without the think time and pool
``k``'s station (of ``K`` tokens and factors ``f(j)``), ``A_k(n) = sum_j (j - K)^+ f(j) G_k(n -
j)`` and ``T_Y(n) = sum_i Z^i / i! Y(n - i)`` (the think station convolved in; Buzen 1973), the
pool's waiting queue is ``T_{A_k}(N) / T_B(N)`` and the throughput ``T_B(N - 1) / T_B(N)``, so::

    W_k(Z) = T_{A_k}(N) / T_B(N - 1),
    dW_k/dZ = W_k (T_{A_k}(N - 1) / T_{A_k}(N) - T_B(N - 2) / T_B(N - 1))

(``dT_Y(n)/dZ = T_Y(n - 1)``). ``B`` is the think station's rest in the exponential solution;
each ``A_k`` costs one convolution of the network without two stations. Then ``h`` and ``h'`` cost
``O(N)`` a point, exactly.

**Steps.** ``W_k`` falls with the think time and flattens (the queue empties), so ``h`` rises
(``h' >= 1``) and is concave: Newton's steps from ``s = 0`` approach the root from below,
quadratically (Ortega and Rheinboldt 1970, sec. 13.3), kept inside the bracket ``[0, sum_k (f_k
- 1) W_k(Z)]`` (bisecting where a step would leave it), to :data:`ROOT` of it. The network is
then solved once more, at the root, for the answer; its own residual is checked against
:data:`TOLERANCE` of the response time (``s`` enters every class's response time one for one),
with further Newton steps over whole solves where rounding left it short. A solve of the pool
model with a scaled pool therefore solves the enclosing network three times (the exponential
solution, one convolution per scaled pool for its curve, the answer), the held networks once --
where the fixed point over the whole model solved both at every step of its regula falsi. The
answers are the same fixed point's to the solvers' rounding (tests/test_pools_fixed.py).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np
from scipy.special import gammaln

from .pools import CheckedNet, FlowStation, PoolResult, PoolSpec, TopNetwork, log_conv, \
    pool_within, solve_top

__all__ = ["WaitCurve", "outermost", "solve_factor_fixed_point"]

#: the answer's residual must be within this share of the response time (else more steps)
TOLERANCE = 1e-6
#: the root on the curve: to this share of its bracket
ROOT = 1e-12
#: Newton steps at most (a step that would leave the bracket bisects it)
STEPS = 60


def outermost(pools: Sequence[PoolSpec]) -> np.ndarray:
    """Per pool, whether it lies inside no other (its extra wait is then beside the think
    time)."""
    pools = list(pools)
    return np.array([not any(pool_within(pools, i, j) for j in range(len(pools)))
                     for i in range(len(pools))], dtype=bool)


class WaitCurve:
    """Each scaled pool's wait for its token and the wait's derivative as exact functions of
    the think time (module docstring): ``stations`` the enclosing network's but the think
    time, ``without_think`` their ``log G`` (``B``), ``pools`` the pools' indices."""

    def __init__(self, stations: list[FlowStation], without_think: np.ndarray,
                 pools: Sequence[int], N: int) -> None:
        self.N = N
        self.B = without_think
        self.A: list[np.ndarray] = []
        unit = np.full(N + 1, -np.inf)
        unit[0] = 0.0
        for k in pools:
            station = next(st for st in stations if st.pool == k)
            others = [other.logf[:N + 1] for other in stations if other is not station]
            rest = others[0] if others else unit
            for other in others[1:]:
                rest = log_conv(rest, other)
            j = np.arange(N + 1)
            with np.errstate(divide="ignore"):
                over = np.log(np.maximum(j - station.size, 0).astype(float))
            self.A.append(log_conv(over + station.logf[:N + 1], rest))
        #: the networks solved for the curve: one per pool (each without it and the think)
        self.solves = len(self.A)
        self._index = np.arange(N + 1, dtype=float)
        self._log_factorial = gammaln(self._index + 1.0)

    def _tilt(self, Y: np.ndarray, n: int, Z: float) -> float:
        """``log T_Y(n)`` at think time ``Z`` (the sum's terms scaled by the largest)."""
        if n < 0:
            return -math.inf
        if not Z > 0:
            return float(Y[n])
        x = self._index[:n + 1] * math.log(Z) - self._log_factorial[:n + 1] + Y[n::-1]
        top = float(x.max())
        if top == -math.inf:
            return top
        return top + math.log(float(np.exp(x - top).sum()))

    def at(self, Z: float) -> tuple[np.ndarray, np.ndarray]:
        """Per pool (in the order given) its wait and the wait's derivative at think time
        ``Z``."""
        N = self.N
        b1, b2 = self._tilt(self.B, N - 1, Z), self._tilt(self.B, N - 2, Z)
        W, dW = np.zeros(len(self.A)), np.zeros(len(self.A))
        for k, A in enumerate(self.A):
            a0 = self._tilt(A, N, Z)
            if a0 == -math.inf:                  # no request ever waits: 0 and flat
                continue
            W[k] = math.exp(a0 - b1)
            dW[k] = W[k] * (math.exp(self._tilt(A, N - 1, Z) - a0) - math.exp(b2 - b1))
        return W, dW


def solve_factor_fixed_point(net: CheckedNet, stations: list[FlowStation], inner: int,
                             base: PoolResult, top: TopNetwork, factors: np.ndarray
                             ) -> tuple[PoolResult, int]:
    """The fixed point of the extra waits for pools scaled by ``factors`` (all of those above 1
    outermost; module docstring) in the checked network ``net`` (population >= 1) whose
    enclosing network's ``stations`` (:func:`solvers.pools.top_network`, ``inner`` held networks
    solved) gave the exponential solution ``base`` and ``top``. Returns the solution at the
    fixed point read back on the network's own stations (each pool's extra wait in its wait
    and its owning tier's residence) and the enclosing network's solves (``base``'s
    included)."""
    scaled = np.flatnonzero(factors > 1.0)
    gain = factors[scaled] - 1.0
    waits = float(gain @ np.asarray(base.pool_waiting_time, dtype=float)[scaled])
    if waits <= TOLERANCE * float(np.max(base.response_time)):
        return base, 1                     # the exponential solution is the fixed point's
    # the enclosing network without the think time: the think station's rest (it is last)
    curve = WaitCurve(stations, top.rests[-1] if net.Z > 0 else top.logG,
                      [int(k) for k in scaled], net.N)

    def h(s: float) -> tuple[float, float]:
        W, dW = curve.at(net.Z + s)
        return s - float(gain @ W), 1.0 - float(gain @ dW)

    lo, hi = 0.0, waits
    s = _root(h, lo, hi)
    solves = 1 + curve.solves
    res = base
    for _ in range(STEPS):                 # the answer's solve (B reused); more if the curve erred
        res, _ = solve_top(net, stations, inner, net.Z + s, curve.B)
        solves += 1
        residual = s - float(gain @ np.asarray(res.pool_waiting_time, dtype=float)[scaled])
        if abs(residual) <= TOLERANCE * (float(np.max(res.response_time)) + s):
            break
        s = min(max(s - residual / max(h(s)[1], 1.0), lo), hi)
    return _read_back(net, res, scaled, gain, s), solves


def _root(h: Callable[[float], tuple[float, float]], lo: float, hi: float) -> float:
    """The root of the rising ``h`` (value and slope) in ``[lo, hi]`` (``h(lo) <= 0 <= h(hi)``):
    Newton's steps from ``lo``, bisecting where one would leave the bracket, to
    :data:`ROOT` of the bracket's width."""
    s = lo
    for _ in range(STEPS):
        value, slope = h(s)
        if value == 0.0:
            return s
        if value < 0:
            lo = s
        else:
            hi = s
        step = s - value / slope if slope > 0 else 0.5 * (lo + hi)
        step = step if lo < step < hi else 0.5 * (lo + hi)
        if abs(step - s) <= ROOT * max(hi, 1e-300):
            return step
        s = step
    return s


def _read_back(net: CheckedNet, res: PoolResult, scaled: np.ndarray, gain: np.ndarray,
               s: float) -> PoolResult:
    """The solution at think time ``Z + s`` as the network with each scaled pool's extra wait
    ``d_k = (f_k - 1) W_k`` before it: the think time back to ``Z``, ``d_k`` added to the pool's
    wait, to its owning tier's residence and to every class's response time."""
    extra = np.zeros(len(net.pools))
    waits = np.asarray(res.pool_waiting_time, dtype=float)
    extra[scaled] = gain * waits[scaled]     # s shared in proportion (equal at the root)
    extra = extra * (s / extra.sum()) if extra.sum() > 0 else np.zeros(len(net.pools))
    Rm = np.array(res.residence_time, dtype=float)
    for k, pool in enumerate(net.pools):
        Rm[pool.first] += extra[k]
    waits = waits + extra
    return replace(res, residence_time=Rm,
                   response_time=np.asarray(res.response_time, dtype=float) + extra.sum(),
                   pool_waiting_time=waits, pool_queue=waits * res.throughput)
