"""Mean Value Analysis of closed product-form networks: exact (``mva``) and approximate (``amva``).

The model is the one of Mi et al. (2008), section 3.4 / Fig. 9, generalised to ``C`` request
classes:
``C`` closed classes of ``N_c`` users that think ``Z_c`` seconds (a delay) between requests and
visit ``M`` processor-sharing (or exponential FCFS) stations with demands ``D_{m,c}``
(seconds per visit x visits). A station has ``c_m`` identical servers (``math.inf`` = a delay
station, such as a think-time or a network-latency stage, where nobody queues).

Exact MVA (Reiser and Lavenberg, JACM 1980) -- for a population vector ``n`` and class ``c``::

    R_{m,c}(n) = D_{m,c} (1 + Q_m(n - e_c))                                 c_m = 1
    R_{m,c}(n) = D_{m,c}                                                     c_m = inf
    R_{m,c}(n) = D_{m,c}/c_m (1 + Q_m(n - e_c)
                              + sum_{j=0}^{c_m-2} (c_m-1-j) p_m(j | n - e_c))   1 < c_m < inf
    X_c(n)     = n_c / (Z_c + sum_m R_{m,c}(n))
    Q_{m,c}(n) = X_c(n) R_{m,c}(n)

The multi-server line is load-dependent MVA with rates ``min(j, c_m)`` written so that only the
marginal probabilities ``p_m(j|n)``, ``j < c_m - 1``, are needed. They follow from::

    p_m(j | n) = (1/j) sum_c D_{m,c} X_c(n) p_m(j-1 | n - e_c)              1 <= j < c_m
    p_m(0 | n) = p_m(0 | n - e_c) X_c(n) / X_c^{(-m)}(n)    (any c with n_c > 0)

where ``X^{(-m)}`` is the throughput of the same network *without* station ``m`` (the ratio of
normalising constants ``G^{(-m)}(n)/G(n)``). This replaces the textbook
``p_m(0|n) = 1 - ...`` subtraction, which loses all accuracy at high load (cf. G. Casale, "A note on
stable flow-equivalent aggregation in closed networks", QUESTA 2009): every quantity here is a
sum or product of non-negative terms. The price is that the networks without each subset of the
``K`` multi-server stations are solved alongside (``2^K`` recursions, in lock-step).

The recursion is vectorised over the population lattice ``prod_c (N_c + 1)``: populations are
processed level by level (total population ``k = 0..sum_c N_c``), each level a handful of numpy
operations over all its population vectors, addressed by their mixed-radix index.

Approximate MVA (``amva``) is the Schweitzer-Bard fixed point
``Q_m(N - e_c) ~ Q_m(N) - Q_{m,c}(N)/N_c``; multi-server stations use Seidmann's approximation
(a single server with demand ``D_{m,c}/c_m`` in series with a delay ``D_{m,c}(c_m-1)/c_m``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .results import (ClosedResult, as_demands, as_per_class, as_populations, as_servers,
                      check_no_nan, per_server_utilization)

__all__ = ["mva", "amva", "mva_curve", "MVACurve", "lattice_size", "DEFAULT_MAX_STATES"]

#: largest population lattice ``prod_c (N_c + 1)`` exact MVA accepts by default
DEFAULT_MAX_STATES = 10_000_000


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class _Inputs:
    D: np.ndarray        # (M, C)
    N: np.ndarray        # (C,) int
    Z: np.ndarray        # (C,)
    servers: np.ndarray  # (M,) float, inf = delay
    unbounded: np.ndarray  # (C,) bool: N_c > 0 but demand and think time nil


def _inputs(demands: Any, populations: Any, think_times: Any, servers: Any) -> _Inputs:
    N = as_populations(populations)
    D = as_demands(demands, n_classes=N.shape[0])
    Z = as_per_class(think_times, N.shape[0], "think_times")
    s = as_servers(servers, D.shape[0])
    # a cycle so short that ``N / (Z + sum D)`` would overflow (with a margin) is nil
    cycle = Z + D.sum(axis=0)
    unbounded = (N > 0) & (cycle < N * (16.0 / np.finfo(float).max))
    return _Inputs(D=D, N=N, Z=Z, servers=s, unbounded=unbounded)


def lattice_size(populations: Any) -> int:
    """Number of population vectors ``prod_c (N_c + 1)`` exact MVA visits."""
    N = as_populations(populations)
    return int(np.prod((N + 1).astype(float)))


def _flags(inp: _Inputs) -> list[str]:
    flags = []
    if int(inp.N.sum()) == 0:
        flags.append("zero total population: nothing to solve, X = 0")
    for c in np.flatnonzero(inp.N == 0):
        flags.append(f"class {c} has zero population: X = 0, residence times are those of "
                     f"one arriving job")
    for c in np.flatnonzero(inp.unbounded):
        flags.append(f"class {c} has zero (or negligible) demand at every station and zero "
                     f"think time: throughput unbounded (inf)")
    return flags


def _assemble(inp: _Inputs, X: np.ndarray, Rmc: np.ndarray, method: str, *,
              converged: bool, iterations: int, flags: list[str]) -> ClosedResult:
    """Turn class throughputs ``X_c`` and residence times ``R_{m,c}`` into a ``ClosedResult``.

    ``Q_{m,c} = X_c R_{m,c}`` (Little), ``U_{m,c} = X_c D_{m,c}/c_m`` (utilization law);
    classes with unbounded throughput get ``X_c = inf`` and zero everything else.
    """
    X = np.where(inp.unbounded, np.inf, X)
    Rmc = np.where(inp.unbounded[None, :], 0.0, Rmc)
    Q = np.where(inp.unbounded[None, :], 0.0, np.where(np.isinf(X), 0.0, X)[None, :] * Rmc)
    U = per_server_utilization(X, inp.D, inp.servers)
    R = Rmc.sum(axis=0)
    check_no_nan(throughput=X, residence_time=Rmc, queue_length=Q, utilization=U)
    return ClosedResult(throughput=X, response_time=R, residence_time=Rmc, queue_length=Q,
                        utilization=U, populations=inp.N, think_times=inp.Z,
                        servers=inp.servers, method=method, converged=converged,
                        iterations=iterations, flags=tuple(flags))


# --------------------------------------------------------------------------------------------
# exact MVA
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class _Lattice:
    """The population lattice ``{n : 0 <= n_c <= N_c}`` sorted by level ``|n| = sum_c n_c``.

    ``index(n) = sum_c n_c stride_c`` (class 0 most significant); ``pos[index]`` is the
    position of ``n`` inside its level, so level-``k`` arrays are addressed from level ``k+1``.
    """

    N: np.ndarray
    radix: np.ndarray
    stride: np.ndarray
    order: np.ndarray
    starts: np.ndarray
    pos: np.ndarray
    digits: np.ndarray

    @classmethod
    def build(cls, N: np.ndarray) -> "_Lattice":
        radix = N + 1
        stride = np.ones_like(radix)
        for c in range(len(N) - 2, -1, -1):
            stride[c] = stride[c + 1] * radix[c + 1]
        level = np.zeros(1, dtype=np.int64)
        for r in radix:
            level = (level[:, None] + np.arange(r)[None, :]).ravel()
        order = np.argsort(level, kind="stable")
        counts = np.bincount(level, minlength=int(N.sum()) + 1)
        starts = np.concatenate([[0], np.cumsum(counts)])
        pos = np.empty(level.shape[0], dtype=np.int64)
        pos[order] = np.arange(level.shape[0]) - np.repeat(starts[:-1], counts)
        digits = np.empty((level.shape[0], len(N)), dtype=np.int64)   # n, in level order
        for c in range(len(N)):
            digits[:, c] = (order // stride[c]) % radix[c]
        return cls(N=N, radix=radix, stride=stride, order=order, starts=starts, pos=pos,
                   digits=digits)

    def level(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Mixed-radix indices ``(L,)`` and population vectors ``(L, C)`` of level ``k``."""
        sl = slice(self.starts[k], self.starts[k + 1])
        return self.order[sl], self.digits[sl]


@dataclass(eq=False)
class _LevelState:
    """One network's solution on every population vector of one level."""

    Q: np.ndarray                 # (L, M)  Q_m(n), all classes
    X: np.ndarray                 # (C, L)  X_c(n)
    P: dict[int, np.ndarray]      # station -> (L, c_m - 1): p_m(j|n), j = 0..c_m-2
    degenerate: np.ndarray        # (L,) bool: G(n) = 0 in this (reduced) network


class _ExactMVA:
    """Lock-step level recursion of a network and of its multi-server-reduced sub-networks.

    Sub-network ``b`` (a bitmask over the multi-server stations ``ms``) keeps the single-server
    and delay stations and the multi-server stations whose bit is set; ``b = 2^K - 1`` is the
    network itself. ``b`` needs, at the same level, the throughputs of ``b`` minus each of its
    stations -- smaller masks, so processing masks in increasing order suffices.
    """

    def __init__(self, D: np.ndarray, N: np.ndarray, Z: np.ndarray, servers: np.ndarray):
        self.D, self.N, self.Z = D, N, Z
        M, C = D.shape
        total = int(N.sum())
        # c_m > |N| servers never queue: exactly a delay station.
        self.delay = np.isinf(servers) | (servers > total)
        self.single = (~self.delay) & (servers == 1)
        self.ms = [int(m) for m in np.flatnonzero(~self.delay & (servers > 1))]
        self.c = {m: int(servers[m]) for m in self.ms}
        self.w = {m: (self.c[m] - 1 - np.arange(self.c[m] - 1)).astype(float) for m in self.ms}
        self.D_single = (D * self.single[:, None]).T          # (C, M)
        self.D_delay = (D * self.delay[:, None]).T            # (C, M)
        self.masks = range(2 ** len(self.ms))
        self.dead = {}
        for b in self.masks:
            keep = self.single | self.delay
            for i, m in enumerate(self.ms):
                if b >> i & 1:
                    keep[m] = True
            self.dead[b] = (Z == 0) & ((D * keep[:, None]).sum(axis=0) == 0)
        self.lattice = _Lattice.build(N)

    def _initial(self) -> dict[int, _LevelState]:
        M, C = self.D.shape
        states = {}
        for b in self.masks:
            P = {}
            for i, m in enumerate(self.ms):
                if b >> i & 1:
                    P[m] = np.zeros((1, self.c[m] - 1))
                    P[m][0, 0] = 1.0
            states[b] = _LevelState(Q=np.zeros((1, M)), X=np.zeros((C, 1)), P=P,
                                    degenerate=np.zeros(1, dtype=bool))
        return states

    def _step(self, b: int, old: _LevelState, new: dict[int, _LevelState], n: np.ndarray,
              has: np.ndarray, prevpos: np.ndarray, cstar: np.ndarray,
              prev_cstar: np.ndarray) -> tuple[_LevelState, np.ndarray]:
        """Level ``k`` of sub-network ``b`` from its level ``k-1`` (``old``)."""
        L = n.shape[0]
        present = [(i, m) for i, m in enumerate(self.ms) if b >> i & 1]
        R = old.Q[prevpos]                                    # (C, L, M): Q_m(n - e_c)
        Qa_ms = {m: R[:, :, m].copy() for _, m in present}
        R += 1.0                                              # in place: R is large
        R *= self.D_single[:, None, :]
        R += self.D_delay[:, None, :]
        Pa = {}
        for _, m in present:
            Pa[m] = old.P[m][prevpos]                         # (C, L, c-1): p_m(j|n - e_c)
            R[:, :, m] = (self.D[m][:, None] / self.c[m]) * (1.0 + Qa_ms[m] + Pa[m] @ self.w[m])
        denom = R.sum(axis=2)                                 # (C, L)
        denom += self.Z[:, None]
        ok = has & (denom > 0)
        X = np.divide(n.T, denom, out=np.zeros_like(denom), where=ok)
        Q = np.einsum("cl,clm->lm", X, R)
        if self.dead[b].any():
            degenerate = (n[:, self.dead[b]] > 0).any(axis=1)
        else:
            degenerate = np.zeros(L, dtype=bool)
        ar = np.arange(L)
        P = {}
        for i, m in present:
            child = new[b & ~(1 << i)]
            num = X[cstar, ar]
            den = child.X[cstar, ar]
            usable = ~child.degenerate & (den > 0)
            ratio = np.where(usable, num / np.where(usable, den, 1.0), 0.0)
            Pm = np.empty((L, self.c[m] - 1))
            Pm[:, 0] = old.P[m][prev_cstar, 0] * ratio
            for j in range(1, self.c[m] - 1):
                Pm[:, j] = np.einsum("c,cl,cl->l", self.D[m], X, Pa[m][:, :, j - 1]) / j
            P[m] = Pm
        if degenerate.any():
            Q[degenerate] = 0.0
            X[:, degenerate] = 0.0
            for Pm in P.values():
                Pm[degenerate] = 0.0
        return _LevelState(Q=Q, X=X, P=P, degenerate=degenerate), R

    def solve(self) -> tuple[np.ndarray, np.ndarray]:
        """Throughputs ``X_c(N)`` ``(C,)`` and residence times ``R_{m,c}(N)`` ``(M, C)``.

        Classes with ``N_c = 0`` get the residence times of one job arriving at population
        ``N`` (``n - e_c`` replaced by ``N`` in the recursion).
        """
        lat = self.lattice
        total = int(self.N.sum())
        states = self._initial()
        top = self.masks[-1]
        R_top = np.zeros((self.D.shape[1], 1, self.D.shape[0]))
        for k in range(1, total + 1):
            idx, n = lat.level(k)
            has = (n > 0).T                                   # (C, L)
            prev_idx = np.where(has, idx[None, :] - lat.stride[:, None], 0)
            prevpos = lat.pos[prev_idx]                       # (C, L); 0 where n_c = 0
            if self.ms:
                cstar = np.argmax(has, axis=0)
                prev_cstar = prevpos[cstar, np.arange(n.shape[0])]
            else:
                cstar = prev_cstar = np.zeros(0, dtype=np.int64)
            new: dict[int, _LevelState] = {}
            for b in self.masks:
                new[b], R = self._step(b, states[b], new, n, has, prevpos, cstar, prev_cstar)
                if b == top and k == total:
                    R_top = R
            states = new
        final = states[top]
        X = final.X[:, 0] if total > 0 else np.zeros(self.D.shape[1])
        Rmc = R_top[:, 0, :].T.copy() if total > 0 else self.D.copy()
        absent = self.N == 0
        if total > 0 and absent.any():
            Rmc[:, absent] = self._arrival_residence(final)[:, absent]
        return X, Rmc

    def _arrival_residence(self, final: _LevelState) -> np.ndarray:
        """``R_{m,c}`` of one extra job of each class arriving at population ``N``."""
        Qn = final.Q[0]
        R = (self.D_single * (1.0 + Qn)[None, :] + self.D_delay).T     # (M, C)
        for m in self.ms:
            R[m] = self.D[m] / self.c[m] * (1.0 + Qn[m] + final.P[m][0] @ self.w[m])
        return R


def mva(demands: Any, populations: Any, think_times: Any = 0.0, servers: Any = None, *,
        max_states: int = DEFAULT_MAX_STATES) -> ClosedResult:
    """Exact multi-class MVA (Reiser-Lavenberg) of a closed product-form network.

    Parameters
    ----------
    demands:
        ``D_{m,c}``, stations x classes, seconds (visits x time per visit), >= 0. A vector is
        one class.
    populations:
        ``N_c`` per class, non-negative integers.
    think_times:
        ``Z_c`` per class, seconds (a scalar applies to every class).
    servers:
        ``c_m`` per station: a positive integer, or ``math.inf`` for a delay station (no
        queueing, ``R_{m,c} = D_{m,c}``); default one server each. Multi-server stations are
        exact (load-dependent MVA with rates ``min(j, c_m)``, see the module docstring); each
        one doubles the work.
    max_states:
        refuse (``ValueError``) lattices larger than this -- use :func:`amva` instead.

    Returns
    -------
    ClosedResult
        ``X_c``, ``R_c`` (think time excluded), ``R_{m,c}``, ``Q_{m,c}``, ``U_{m,c}`` (per
        server). Little's law ``N_c = X_c (R_c + Z_c)`` and ``U_{m,c} = X_c D_{m,c}/c_m`` hold.
        Degenerate inputs are flagged (``flags``), never NaN: a class with ``N_c = 0`` has
        ``X_c = 0``; a class with no demand and no think time has ``X_c = inf``.

    Cost: ``O(2^K prod_c (N_c+1) C M)`` time for ``K`` multi-server stations (each station
    with ``c_m > sum_c N_c`` is a delay and does not count).
    """
    inp = _inputs(demands, populations, think_times, servers)
    N = np.where(inp.unbounded, 0, inp.N)
    size = int(np.prod((N + 1).astype(float)))
    if size > max_states:
        raise ValueError(f"populations: exact MVA needs {size} population vectors "
                         f"(> max_states={max_states}) for {inp.N.tolist()}; use amva()")
    X, Rmc = _ExactMVA(inp.D, N, inp.Z, inp.servers).solve()
    return _assemble(inp, X, Rmc, "mva", converged=True, iterations=int(N.sum()),
                     flags=_flags(inp))


# --------------------------------------------------------------------------------------------
# approximate MVA
# --------------------------------------------------------------------------------------------

def amva(demands: Any, populations: Any, think_times: Any = 0.0, servers: Any = None, *,
         tol: float = 1e-8, max_iter: int = 10_000) -> ClosedResult:
    """Schweitzer-Bard approximate MVA of a closed network.

    The arrival theorem's ``Q_m(N - e_c)`` is approximated by ``Q_m(N) - Q_{m,c}(N)/N_c``, and
    the MVA equations are iterated to a fixed point (successive substitution) until
    ``max_{m,c} |dQ_{m,c}| / max(N_c, 1) <= tol``.

    Multi-server stations (``1 < c_m < inf``) use Seidmann's approximation: a single server
    with demand ``D_{m,c}/c_m`` followed by a delay ``D_{m,c}(c_m-1)/c_m``; the reported
    ``R_{m,c}`` and ``Q_{m,c}`` are the sums of both parts and ``U_{m,c} = X_c D_{m,c}/c_m``.
    Schweitzer-Bard is exact at ``N_c = 1`` for a single class and asymptotically exact as
    ``N -> inf``; in between it is typically within a few percent of exact MVA. Seidmann is
    exact at light and at heavy load and errs most around the knee.

    Returns a ``ClosedResult`` with ``converged`` and ``iterations``; non-convergence within
    ``max_iter`` is flagged, never NaN.
    """
    if not (isinstance(tol, (int, float)) and np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol: must be a positive finite number, got {tol!r}")
    if not (isinstance(max_iter, (int, np.integer)) and max_iter >= 1):
        raise ValueError(f"max_iter: must be a positive integer, got {max_iter!r}")
    inp = _inputs(demands, populations, think_times, servers)
    D, Z, s = inp.D, inp.Z, inp.servers
    N = np.where(inp.unbounded, 0, inp.N).astype(float)
    queue = np.isfinite(s) & (s <= N.sum())    # c_m > sum_c N_c servers: exactly a delay
    c = np.where(queue, s, 1.0)[:, None]
    Dq = (D / c)[queue]                                        # queueing part, (Mq, C)
    Dd = np.where(queue[:, None], D * (c - 1.0) / c, D)        # delay part, (M, C)
    Zeff = Z + Dd.sum(axis=0)
    Npos = np.maximum(N, 1.0)
    # initial guess: each class spread over its queues in proportion to demand
    Q = N * Dq / np.maximum(Zeff + Dq.sum(axis=0), 1e-300)
    X = np.zeros_like(N)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        A = Q.sum(axis=1, keepdims=True) - Q / Npos
        Rq = Dq * (1.0 + A)
        denom = Zeff + Rq.sum(axis=0)
        X = np.where(denom > 0, N / np.where(denom > 0, denom, 1.0), 0.0)
        Q_new = X * Rq
        delta = np.max(np.abs(Q_new - Q) / Npos) if Q.size else 0.0
        Q = Q_new
        if delta <= tol:
            converged = True
            break
    A = Q.sum(axis=1, keepdims=True) - Q / Npos
    Rmc = Dd.copy()
    Rmc[queue] += Dq * (1.0 + A)
    denom = Z + Rmc.sum(axis=0)       # X from the final R: Little's law holds exactly
    X = np.where(denom > 0, N / np.where(denom > 0, denom, 1.0), 0.0)
    flags = _flags(inp)
    if not converged:
        flags.append(f"amva did not converge to tol={tol} in {max_iter} iterations")
    return _assemble(inp, X, Rmc, "amva", converged=converged, iterations=it, flags=flags)


# --------------------------------------------------------------------------------------------
# single-class curve: every population 0..N in one recursion
# --------------------------------------------------------------------------------------------

_RECURSION = """
def recursion(d, fixed, Z, N, stop, X, R, Rm):
    {d} = d
    {q} = {zeros}
    for n in range(1, N + 1):
        {r}
        total = {total} + fixed
        x = n / (Z + total) if Z + total > 0 else inf
        {q_next}
        X.append(x)
        R.append(total)
        Rm.extend(({rs}))
        if total > stop:
            return True
    return False
"""


@functools.lru_cache(maxsize=64)
def _recursion(M: int) -> Callable[..., bool]:
    """The single-class MVA recursion over ``n = 1..N`` for ``M`` queueing stations, written
    out with one local variable per station (compiled once per ``M``): ``r_m = d_m (1 + q_m)``,
    ``R = sum_m r_m + fixed``, ``X = n / (Z + R)``, ``q_m = X r_m``. A loop over the stations
    inside the loop over ``n`` costs several times more in Python than the arithmetic;
    :func:`mva_curve` runs this for thousands of populations per solve. Appends ``X(n)``,
    ``R(n)`` to ``X, R`` and ``r_1(n) .. r_M(n)`` to the flat ``Rm``; returns True if it
    stopped at ``R(n) > stop``."""
    if M == 0:
        names = {"d": "_", "q": "_", "zeros": "0", "r": "pass", "total": "0.0",
                 "q_next": "pass", "rs": ""}
    else:
        names = {
            "d": ", ".join(f"d{m}" for m in range(M)) + ",",
            "q": ", ".join(f"q{m}" for m in range(M)) + ",",
            "zeros": ", ".join("0.0" for _ in range(M)) + ",",
            "r": "; ".join(f"r{m} = d{m} * (1.0 + q{m})" for m in range(M)),
            "total": " + ".join(f"r{m}" for m in range(M)),
            "q_next": "; ".join(f"q{m} = x * r{m}" for m in range(M)),
            "rs": ", ".join(f"r{m}" for m in range(M)) + ("," if M == 1 else ""),
        }
    namespace: dict[str, Any] = {"inf": math.inf}
    exec(_RECURSION.format(**names), namespace)          # noqa: S102 - generated above
    return namespace["recursion"]


@dataclass(frozen=True, eq=False)
class MVACurve:
    """Single-class MVA at every population ``n = 0..N`` (what :func:`mva_curve` returns).

    ``throughput[n]`` ``X(n)``, ``response_time[n]`` ``R(n)`` (think time excluded),
    ``residence_time[n, m]`` ``R_m(n)``, ``utilization[n, m]`` ``U_m(n) = X(n) D_m / c_m``.
    ``stopped`` is True when the recursion ended early at ``stop_response_time``;
    ``approximate`` when a multi-server station was treated with Seidmann's approximation.
    """

    throughput: np.ndarray
    response_time: np.ndarray
    residence_time: np.ndarray
    utilization: np.ndarray
    stopped: bool
    approximate: bool

    @property
    def max_population(self) -> int:
        return int(self.throughput.shape[0] - 1)


def mva_curve(demands: Any, max_population: int, think_time: float = 0.0, servers: Any = None,
              *, stop_response_time: float | None = None) -> MVACurve:
    """Exact single-class MVA for every population ``n = 0..max_population``.

    ``R_m(n) = D_m (1 + Q_m(n-1))``, ``X(n) = n / (Z + sum_m R_m(n))``, ``Q_m(n) = X(n) R_m(n)``
    (Mi et al. 2008, section 3.4): the recursion visits every population on its way to ``N``, so a
    capacity search ("largest ``n`` with ``R(n) <= target``") or a throughput-to-population
    inversion costs one pass. ``demands`` ``D_m`` per station (seconds), ``servers`` ``c_m``
    (default 1; ``math.inf`` a delay). Stations with ``1 < c_m < inf`` use Seidmann's
    approximation (demand ``D_m/c_m`` queueing plus ``D_m (c_m-1)/c_m`` delay; flagged
    ``approximate``) -- use :func:`mva` for the exact load-dependent solution at one population.
    ``stop_response_time``: end the recursion at the first ``n`` whose ``R(n)`` exceeds it.
    """
    D = as_demands(demands, n_classes=1)[:, 0]
    c = as_servers(servers, D.shape[0])
    if isinstance(max_population, bool) or not isinstance(max_population, (int, np.integer)) \
            or max_population < 0:
        raise ValueError(f"max_population: must be an integer >= 0, got {max_population!r}")
    Z = float(as_per_class(think_time, 1, "think_times")[0])
    stop = math.inf if stop_response_time is None else float(stop_response_time)
    if math.isnan(stop):
        raise ValueError("stop_response_time: must be a number, got nan")
    queue_d, fixed, extra = queueing_split(D, c)
    M = D.shape[0]
    X, R, Rm = [0.0], [float(D.sum())], D.tolist()
    stopped = _recursion(M)(queue_d.tolist(), fixed, Z, int(max_population), stop, X, R, Rm)
    return assemble_curve(D, c, np.asarray(X), np.asarray(R), np.array(Rm).reshape(-1, M),
                          extra, stopped)


def mva_curves(demands: list[Any], max_populations: list[int], think_times: list[float],
               servers: list[Any]) -> list[MVACurve]:
    """:func:`mva_curve` for many models at once (each to its own ``max_populations[b]``):
    the recursion runs over the populations with all the models' stations side by side, one
    array operation per step for all of them. The result of each model is bit for bit what
    :func:`mva_curve` gives (the same operations in the same order on each model's numbers;
    tested), so it does not matter which models are solved together. Models are grouped by
    their number of stations; groups of fewer than :data:`BATCH_MIN` models use
    :func:`mva_curve` itself."""
    out: list[MVACurve | None] = [None] * len(demands)
    groups: dict[int, list[int]] = {}
    prepared = []
    for b, (d, n, z, srv) in enumerate(zip(demands, max_populations, think_times, servers)):
        D = as_demands(d, n_classes=1)[:, 0]
        c = as_servers(srv, D.shape[0])
        prepared.append((D, c, int(n), float(as_per_class(z, 1, "think_times")[0])))
        groups.setdefault(D.shape[0], []).append(b)
    for M, members in groups.items():
        if len(members) < BATCH_MIN:
            for b in members:
                D, c, n, z = prepared[b]
                out[b] = mva_curve(D, n, z, c)
            continue
        for b, curve in zip(members, _batched([prepared[b] for b in members], M)):
            out[b] = curve
    return out  # type: ignore[return-value]


#: smallest group of models :func:`mva_curves` runs side by side
BATCH_MIN = 6


def _batched(models: list[tuple[np.ndarray, np.ndarray, int, float]],
             M: int) -> list[MVACurve]:
    """The recursion of :func:`_recursion` on ``B`` models of ``M`` stations as arrays
    ``(B, M)``; ``R(n)`` summed station by station in order, as the scalar loop does."""
    B = len(models)
    splits = [queueing_split(D, c) for D, c, _, _ in models]
    d = np.array([q for q, _, _ in splits])                  # (B, M) queueing demands
    fixed = np.array([f for _, f, _ in splits])
    Z = np.array([z for _, _, _, z in models])
    N = max(n for _, _, n, _ in models)
    # population-major storage: the rows of step n are contiguous, written in place
    X = np.zeros((N + 1, B))
    R = np.zeros((N + 1, B))
    Rq = np.zeros((N + 1, B, M))
    q, t, den = np.zeros((B, M)), np.empty((B, M)), np.empty(B)
    with np.errstate(divide="ignore"):                    # Z + R = 0: X = inf, as the loop
        for n in range(1, N + 1):
            r, total, x = Rq[n], R[n], X[n]
            np.add(q, 1.0, out=t)
            np.multiply(d, t, out=r)                      # r_m = d_m (1 + q_m)
            total[:] = r[:, 0]
            for m in range(1, M):
                total += r[:, m]                          # sum_m r_m, in station order
            total += fixed
            np.add(Z, total, out=den)
            np.divide(n, den, out=x)                      # X = n / (Z + R)
            np.multiply(x[:, None], r, out=q)             # q_m = X r_m
    curves = []
    for b, (D, c, n, _) in enumerate(models):
        Xb, Rb = X[:n + 1, b].copy(), R[:n + 1, b].copy()
        Rb[0] = float(D.sum())
        curves.append(assemble_curve(D, c, Xb, Rb, Rq[:n + 1, b].copy(), splits[b][2],
                                     False))
    return curves


def queueing_split(D: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Per station the demand that queues (``D`` at one server, ``D / c`` at ``c``, 0 at a
    delay), the total demand spent without queueing (``fixed``) and that part per station
    (Seidmann's approximation: ``D (c - 1) / c`` at ``c`` servers, ``D`` at a delay)."""
    delay = np.isinf(c)
    multi = ~delay & (c > 1)
    safe_c = np.where(delay, 1.0, c)
    queue_d = np.where(delay, 0.0, np.where(multi, D / safe_c, D))
    extra = np.where(delay, D, np.where(multi, D * (c - 1) / safe_c, 0.0))
    return queue_d, float(np.add.reduce(extra)), extra      # np.sum without its wrapper


def assemble_curve(D: np.ndarray, c: np.ndarray, X: np.ndarray, R: np.ndarray,
                   Rq: np.ndarray, extra: np.ndarray, stopped: bool) -> MVACurve:
    """:class:`MVACurve` from the recursion's ``X(n)``, ``R(n)`` and queueing residence times
    ``Rq[n, m]`` (row 0: ``n = 0``)."""
    delay = np.isinf(c)
    multi = ~delay & (c > 1)
    Rma = Rq + extra[None, :]
    Rma[0] = D
    U = X[:, None] * D[None, :] / np.where(delay, np.inf, c)[None, :]
    return MVACurve(throughput=X, response_time=R, residence_time=Rma,
                    utilization=U, stopped=stopped, approximate=bool(multi.any()))
