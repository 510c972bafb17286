"""Sojourn times at a processor-sharing tier: a tagged request's passage time.

A CPU time-sliced by an operating system, or a database with a process per connection, shares
its ``c`` cores among the requests present: with ``n`` of them each is served at rate
``min(1, c / n)`` (egalitarian processor sharing, Kleinrock 1976, ch. 4). A short request does
not wait behind a long one, so the FCFS law of :mod:`~solvers.response_time.sojourn` (a shared
wait, then the request's own service) over-states the short classes' sojourns and under-states
the long ones'.

**The tagged request's chain.** A request of class ``k`` (exponential work of mean ``D_k``)
arrives and finds ``n = (n_1 .. n_K)`` other requests at the tier. Until it leaves, the others
are a continuous-time Markov chain: with ``|n| + 1`` present each is served at ``r =
min(1, c / (|n| + 1))``, so the tagged one leaves at ``r / D_k``, a class-``j`` other at ``n_j
r / D_j``, and others arrive at ``lambda(|n|)`` with class ``j`` drawn from the mix ``p_j``. The
sojourn is the chain's passage time to the tagged request's departure, a phase-type law
(Neuts 1981) from the state it finds:

* **What it finds.** The tier is a symmetric queue (Kelly 1979) with a product form: the total
  it finds has the station's marginal (an open tier fed by Poisson arrivals: M/M/c's stationary
  law, PASTA -- Wolff 1982; in a closed network: the arrival theorem's marginal, Lavenberg and
  Reiser 1980, :mod:`~solvers.response_time.arrival`), and given the total the classes are
  multinomial with ``q_j`` proportional to ``p_j D_j`` -- exact in the product form.
* **Arrivals while it is there.** Open: ``lambda`` whatever the state. Closed: the rest of the
  network, as a flow-equivalent server (Chandy, Herzog and Woo 1975), sends the others at its
  throughput with the jobs not at the tier, ``lambda(|n|) = X^{(-m)}(N - 1 - |n|)``: exact for
  one tier and a think time (``X^{(-m)}(i) = i / Z``), an approximation in a network (the
  rest's state is not re-drawn from its marginal on every event).

**Exact and aggregated chains.** With the per-class counts (``C(L + K, K)`` states for up to
``L`` others) the chain is exact; it is used while it has at most :data:`EXACT_STATE_LIMIT`
states. Past that the others are one class of exponential work of the mix's mean ``Dbar =
sum_j p_j D_j`` (a birth-death chain on ``|n|``, ``L + 1`` states): the departure rate of the
others averaged over the composition they are found in is ``|n| r / Dbar``, the same. It is
exact for one class. For one core and an open tier the aggregated chain is the M/M/1-PS queue
whose sojourn law Coffman, Muntz and Trotter (1970) derive: a request of work ``x`` stays
``E[T(x)] = x / (1 - rho)`` (insensitive to the others' work distribution, Kleinrock 1976,
ch. 4), so each class's mean is exact; the spread is M/M/1-PS's, which is exact only when the
others' work is exponential (a hyperexponential mix of classes has a somewhat larger variance,
Ott 1984). An open tier's count is truncated where the stationary tail falls below
:data:`TAIL`.

**Numerics.** The passage law is returned on the lattice of
:mod:`~solvers.response_time.sojourn` (``i h``) with that module's triangular kernel: the mass
at ``i h`` is the second difference of ``E[(t - X)^+]`` over ``h``, ``E[(X - t)^+] = alpha
e^{T t} (-T)^{-1} 1`` for the sub-generator ``T`` and entrance ``alpha`` -- the mean is kept
exactly. ``e^{T h}`` steps the lattice (dense on a small chain, uniformization on a large sparse
one, Jensen 1953); the moments come from two sparse solves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy import sparse
from scipy.sparse import linalg as splinalg

from .sojourn import GRID, SPAN, GridDistribution

__all__ = ["EXACT_STATE_LIMIT", "TAIL", "PSLaw", "ps_sojourn", "open_found", "closed_arrivals",
           "conditional_moments"]

#: largest chain with per-class counts solved exactly; beyond, the others aggregated
EXACT_STATE_LIMIT = 400
#: chains of up to this many states step the lattice with one dense matrix exponential
DENSE_STATES = 400
#: an open tier's count is truncated where the stationary tail falls below this
TAIL = 1e-10
#: the most others an open tier's chain keeps (its load above ~0.999 of saturation: flagged
#: by the caller as saturated before it gets here)
MAX_OTHERS = 20_000


@dataclass(frozen=True, eq=False)
class PSLaw:
    """Per class the sojourn at one PS tier as a phase-type law: ``mean[k]``, ``variance[k]``;
    ``exact``: per-class counts (not the aggregated others); :meth:`masses` on a lattice."""

    mean: np.ndarray
    variance: np.ndarray
    exact: bool
    _chains: tuple[tuple[np.ndarray, sparse.csr_matrix, np.ndarray], ...]

    def masses(self, h: float, grid: int) -> np.ndarray:
        """``(K, grid)``: each class's law on the lattice ``i h`` by the triangular kernel
        (module docstring); the mass beyond the lattice is left off."""
        return np.stack([self._masses(k, h, grid) for k in range(len(self._chains))]) \
            if self._chains else np.zeros((0, grid))

    def _masses(self, k: int, h: float, grid: int) -> np.ndarray:
        alpha, T, u = self._chains[k]
        m = np.zeros(grid)
        if not alpha.size or h <= 0:
            m[0] = 1.0
            return m
        e = np.maximum(_on_lattice(alpha, T, u, h, grid + 1), 0.0)   # E[(X - i h)^+]
        m[0] = (h - e[0] + e[1]) / h
        m[1:] = (e[2:] - 2.0 * e[1:-1] + e[:-2]) / h
        return np.maximum(m, 0.0)

    def distributions(self, grid: int = GRID) -> list[GridDistribution]:
        """Each class's law alone on a lattice covering its mean plus :data:`SPAN` standard
        deviations (:class:`~solvers.response_time.sojourn.GridDistribution`: its quantiles)."""
        out = []
        for k in range(len(self._chains)):
            top = self.mean[k] + SPAN * math.sqrt(self.variance[k])
            if not top > 0:
                out.append(GridDistribution(h=0.0, cdf=np.ones(1), mean=0.0))
                continue
            h = top / grid
            mass = self._masses(k, h, grid)
            out.append(GridDistribution(h=h, cdf=np.minimum(np.cumsum(mass), 1.0),
                                        mean=float(self.mean[k])))
        return out

    def cdf(self, t: np.ndarray) -> np.ndarray:
        """``(K, len(t))``: ``P(T_k <= t)`` (for tests and single tiers)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        out = np.ones((len(self._chains), t.shape[0]))
        for k, (alpha, T, _) in enumerate(self._chains):
            if alpha.size:
                for i, ti in enumerate(t):
                    out[k, i] = 1.0 - float(splinalg.expm_multiply(T.T.tocsr() * ti,
                                                                   alpha).sum())
        return np.clip(out, 0.0, 1.0)


def _on_lattice(alpha: np.ndarray, T: sparse.csr_matrix, u: np.ndarray, h: float,
                count: int) -> np.ndarray:
    """``alpha e^{T i h} u`` for ``i = 0..count - 1``: by one dense ``e^{T h}`` on a small
    chain, else by uniformization (Jensen 1953) on the sparse one, ``e^{T h} = sum_k
    Poisson(k; Lambda h) P^k`` with ``P = I + T / Lambda``, the Poisson terms kept to
    ``1e-13`` of their mass."""
    out = np.empty(count)
    S = alpha.shape[0]
    if S <= DENSE_STATES:
        from scipy.linalg import expm

        step = expm(T.toarray() * h)
        w = u.copy()
        for i in range(count):
            out[i] = alpha @ w
            w = step @ w
        return out
    Lam = float(-T.diagonal().min()) * 1.0001
    P = (sparse.identity(S, format="csr") + T / Lam).tocsr()
    x = Lam * h
    kmax = int(x + 8.0 * math.sqrt(x) + 10)
    k = np.arange(kmax + 1)
    weights = np.exp(k * math.log(x) - x - np.array([math.lgamma(j + 1) for j in k])) \
        if x > 0 else (k == 0).astype(float)
    keep = np.flatnonzero(weights > 1e-13 * weights.max())
    weights = weights[:keep[-1] + 1]
    w = u.copy()
    for i in range(count):
        out[i] = alpha @ w
        acc = weights[0] * w
        term = w
        for wk in weights[1:]:
            term = P @ term
            acc += wk * term
        w = acc
    return out


def open_found(rate: float, demand: float, cores: int) -> np.ndarray:
    """``P(found = j)``, ``j = 0..L``: M/M/c's stationary count at offered load ``a = rate
    demand`` (what a Poisson arrival finds, PASTA), truncated where the tail falls below
    :data:`TAIL`. ``a >= c`` is unstable: a ValueError naming it."""
    a = rate * demand
    if not (math.isfinite(a) and a >= 0):
        raise ValueError(f"rate, demand: the offered load must be finite and >= 0, got {a!r}")
    if a >= cores:
        raise ValueError(f"rate: offered load {a:.6g} >= cores {cores}: the tier is unstable")
    if a == 0:
        return np.ones(1)
    rho = a / cores
    logs = [0.0]
    j = 0
    while True:
        j += 1
        logs.append(logs[-1] + math.log(a / min(j, cores)))
        if j >= cores and logs[-1] - max(logs) + math.log(1.0 / (1.0 - rho)) < math.log(TAIL):
            break
        if j >= MAX_OTHERS:
            break
    w = np.exp(np.array(logs) - max(logs))
    return w / w.sum()


def closed_arrivals(throughput: np.ndarray, population: int) -> Callable[[int], float]:
    """``lambda(j) = X^{(-m)}(N - 1 - j)`` from the rest of the network's throughputs
    ``throughput[i]``, ``i = 0..N - 1`` (module docstring)."""
    X = np.asarray(throughput, dtype=float)
    if X.shape[0] < population:
        raise ValueError(f"throughput: must reach population {population - 1}, got "
                         f"{X.shape[0] - 1}")
    return lambda j: float(X[population - 1 - j]) if j < population - 1 else 0.0


def _states(K: int, L: int) -> list[tuple[int, ...]]:
    """Every ``(n_1 .. n_K)`` with ``|n| <= L``, ordered by total."""
    out = []
    for total in range(L + 1):
        for bars in combinations(range(total + K - 1), K - 1):
            prev, n = -1, []
            for b in bars:
                n.append(b - prev - 1)
                prev = b
            n.append(total + K - 2 - prev)
            out.append(tuple(n))
    return out


def _state_count(K: int, L: int) -> int:
    return math.comb(L + K, K)


def ps_sojourn(demands: np.ndarray, mix: np.ndarray, cores: float, found: np.ndarray,
               arrivals: Callable[[int], float] | float, *,
               exact: bool | None = None) -> PSLaw:
    """Per class the sojourn law at a PS tier (module docstring): ``demands`` ``D_k`` (mean
    exponential work per class, s), ``mix`` ``p_k`` (arriving class probabilities),
    ``cores`` ``c``, ``found[j]`` the probability of finding ``j`` others (``j = 0..L``; at
    most ``L`` others ever), ``arrivals`` the rate others arrive at with ``j`` others
    present (a number: open; ``inf``: the others are back at once -- no think time and no
    other station -- so a departing other is replaced by an arrival). ``exact``: per-class counts (default: while the chain has at
    most :data:`EXACT_STATE_LIMIT` states)."""
    D = np.asarray(demands, dtype=float)
    p = np.asarray(mix, dtype=float)
    f = np.asarray(found, dtype=float)
    if D.ndim != 1 or not D.size or not (np.all(np.isfinite(D)) and np.all(D >= 0)):
        raise ValueError(f"demands: must be a vector of finite works >= 0, got {D.tolist()}")
    if p.shape != D.shape or not (np.all(p >= 0) and p.sum() > 0):
        raise ValueError(f"mix: must be {D.size} non-negative weights, got {p.tolist()}")
    if f.ndim != 1 or not (np.all(np.isfinite(f)) and np.all(f >= 0) and f.sum() > 0):
        raise ValueError(f"found: must be non-negative probabilities, got {f.tolist()[:8]}")
    if not (cores >= 1):
        raise ValueError(f"cores: must be >= 1, got {cores!r}")
    p = p / p.sum()
    f = f / f.sum()
    lam = (lambda j: float(arrivals)) if not callable(arrivals) else arrivals
    L = f.shape[0] - 1
    live = (p > 0) & (D > 0)           # the classes the others can be
    K = int(live.sum())
    use_exact = (K <= 1 or _state_count(K, L) <= EXACT_STATE_LIMIT) if exact is None \
        else bool(exact)
    if K == 0:
        states = [()]
        Dk = np.zeros(0)
        pk = np.zeros(0)
    elif use_exact:
        states = _states(K, L)
        Dk, pk = D[live], p[live]
    else:
        Dbar = float(p[live] @ D[live])
        states = [(j,) for j in range(L + 1)]
        Dk, pk = np.array([Dbar]), np.ones(1)
    index = {s: i for i, s in enumerate(states)}
    S = len(states)
    q = pk * Dk / (pk @ Dk) if Dk.size else pk
    rows, cols, vals = [], [], []
    out_rate = np.zeros(S)              # every rate out of a state but the tagged departure
    share = np.zeros(S)                 # r: each present request's rate of service
    alpha = np.zeros(S)
    for i, n in enumerate(states):
        total = sum(n)
        r = min(1.0, cores / (total + 1))
        share[i] = r
        refill = total > 0 and math.isinf(lam(total - 1))   # a departing other replaced
        for j, nj in enumerate(n):
            if nj:
                rate = nj * r / Dk[j]
                less = n[:j] + (nj - 1,) + n[j + 1:]
                if refill:
                    for jj in range(len(n)):
                        if pk[jj] > 0 and jj != j:
                            rows.append(i)
                            cols.append(index[less[:jj] + (less[jj] + 1,) + less[jj + 1:]])
                            vals.append(rate * pk[jj])
                    out_rate[i] += rate * (1.0 - pk[j])
                    continue
                rows.append(i)
                cols.append(index[less])
                vals.append(rate)
                out_rate[i] += rate
        a = lam(total) if total < L else 0.0
        if math.isinf(a):               # never left: the others refill at once
            a = 0.0
        if a > 0:
            for j in range(len(n)):
                if pk[j] > 0:
                    rows.append(i)
                    cols.append(index[n[:j] + (n[j] + 1,) + n[j + 1:]])
                    vals.append(a * pk[j])
            out_rate[i] += a
        alpha[i] = f[total] * _multinomial(n, q)
    moves = sparse.csr_matrix((vals, (rows, cols)), shape=(S, S))
    chains, means, variances = [], [], []
    for k in range(D.shape[0]):
        if D[k] == 0:
            chains.append((np.zeros(0), sparse.csr_matrix((0, 0)), np.zeros(0)))
            means.append(0.0)
            variances.append(0.0)
            continue
        T = (moves - sparse.diags(out_rate + share / D[k])).tocsc()
        lu = splinalg.splu(T)
        u = -lu.solve(np.ones(S))               # (-T)^{-1} 1
        u2 = -lu.solve(u)                       # (-T)^{-2} 1
        m1 = float(alpha @ u)
        m2 = 2.0 * float(alpha @ u2)
        chains.append((alpha, T.tocsr(), u))
        means.append(m1)
        variances.append(max(m2 - m1 * m1, 0.0))
    return PSLaw(mean=np.array(means), variance=np.array(variances),
                 exact=bool(use_exact or K <= 1), _chains=tuple(chains))


def _multinomial(n: tuple[int, ...], q: np.ndarray) -> float:
    """``|n|! / prod n_j! prod q_j^{n_j}``."""
    if not n:
        return 1.0
    logp = math.lgamma(sum(n) + 1)
    for nj, qj in zip(n, q):
        if nj:
            if qj <= 0:
                return 0.0
            logp += nj * math.log(qj) - math.lgamma(nj + 1)
    return math.exp(logp)


def conditional_moments(work: float, demand: float, cores: float, found: np.ndarray,
                        arrivals: Callable[[int], float] | float) -> tuple[float, float]:
    """``E[T(x)]`` and ``Var T(x)`` of a request of fixed work ``x`` at a PS tier whose
    others have exponential work of mean ``demand`` (the aggregated chain, module
    docstring). In the tagged request's own work clock the others move at their real rates
    over ``r(j)`` and ``T(x)`` is the integral of ``1 / r(J_w)`` over ``w`` up to ``x``; its
    first two moments are blocks of one matrix exponential (Van Loan 1978). For tests
    against the closed forms of M/M/1-PS (Coffman, Muntz and Trotter 1970)."""
    from scipy.linalg import expm

    f = np.asarray(found, dtype=float)
    f = f / f.sum()
    lam = (lambda j: float(arrivals)) if not callable(arrivals) else arrivals
    L = f.shape[0] - 1
    r = np.minimum(1.0, cores / (np.arange(L + 1) + 1.0))
    Q = np.zeros((L + 1, L + 1))
    for j in range(L + 1):
        if j:
            Q[j, j - 1] = j * r[j] / demand
        if j < L:
            Q[j, j + 1] = lam(j)
        Q[j, j] = -Q[j].sum()
    G = Q / r[:, None]                         # per unit of the tagged request's work
    R = np.diag(1.0 / r)
    Z = np.zeros_like(G)
    A = np.block([[G, R, Z], [Z, G, R], [Z, Z, G]])
    E = expm(A * work)
    n = L + 1
    ones = np.ones(n)
    m1 = float(f @ E[:n, n:2 * n] @ ones)
    m2 = 2.0 * float(f @ E[:n, 2 * n:] @ ones)
    return m1, m2 - m1 * m1
