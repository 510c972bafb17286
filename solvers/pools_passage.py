"""The response-time law of one request through an open pool: its wait for a token and its
passage through the held tiers, read off the pool's held chain (:func:`solvers.pools_open.
held_chain`) as the absorption time of a tagged request (a phase-type law, Neuts 1981).

A request of class ``c`` arriving at rate ``lambda`` finds the chain's stationary state
(Poisson arrivals see time averages: Wolff 1982): ``j`` requests at the pool and the holders'
places ``x``. Below ``K`` it takes a token at once and enters its first station; from ``K`` on
it waits behind ``m = j - K`` others (FCFS on the token). Its passage is then a transient
chain:

* **waiting** ``(m, x)``: the ``K`` holders move as the chain's repeating levels do (their
  services, their steps to the next held tier); a holder leaving the pool hands its token to
  the head of the queue -- of class ``c'`` with probability ``p_c'`` (the queue's classes are
  the arrivals', independent of the holders) -- so ``m`` falls by one, and at ``m = 0`` the
  token is the tagged request's: it enters its first station;
* **holding** ``(x', q)``: the holders' places with the tagged request marked (its class's
  positions doubled; at a first-come-first-served tier with fewer cores than tokens the
  holders' order is kept, so that it is served in its turn), and ``q`` requests queued behind
  it (arrivals at rate ``lambda``; a token freed by another goes to the queue's head while
  ``q > 0``); it is absorbed when the tagged request leaves its last held station.

Two approximations keep it finite: the found queue is cut where less than :data:`TAIL` of the
found law's mass lies beyond (that mass is put at the cut, so the law's tail is not made
shorter), and the queue behind a request that waited is taken, as it takes its token, at
the mean found ahead of a waiting arrival (``E[(j - K)^+] / P(j >= K)``: in a FCFS queue the
requests left behind at the start of service and those found ahead balance, Little 1961),
``q`` kept below :func:`queue_cap` (arrivals beyond it lost: a queue that long outlasts the
tagged request's holding). With one held tier of at least ``K`` cores (M/M/K) or ``K = 1``
the law is exact (``tests/test_pools_passage.py``).

The absorption time's survival by uniformization (Jensen 1953): with ``P = I + T / Lambda``,
``P(X > t) = sum_n Poisson(n; Lambda t) s_n``, ``s_n = alpha P^n 1`` stepped forward from
``alpha`` (each class's found law). The waiting states are most of the chain near saturation
(the found queue's levels times the holders' places), and their arcs do not depend on the
tagged request's class, which acts only when it takes its token: they are stepped once for
all the classes (at one ``Lambda``, the largest rate out of any class's states), each class's
holding states fed by their flow out. A step costs its matrices' nonzeros in multiply-adds
(Jensen 1953's sum is one matrix-vector product a step): past :data:`MAX_WORK` of them there
is no law and the caller falls back to the scaled law, flagged -- a bound on one
prediction's CPU work, whatever the machine, that the budgets of states and steps alone do
not give (150,000 states by 400,000 steps). Its mean and second moment in closed form
(``E[X] = sum s_n / Lambda``, ``E[X^2] = 2 sum (n + 1) s_n / Lambda^2``) and its lattice
masses by the triangular kernel (:class:`PassageLaw`, the protocol of
:class:`solvers.response_time.ps.PSLaw`), so that the tiers outside the pool are convolved
with it (:func:`solvers.response_time.sojourn.end_to_end_many`'s ``extra``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse, special

from .open.qbd import solve_planned
from .held_network import BurstyHeldStation, HeldStation, compositions
from .pools_open import HeldCurve

__all__ = ["MAX_STATES", "MAX_STEPS", "MAX_WORK", "PassageLaw", "TAIL", "passage_law",
           "queue_cap"]

#: the found law's mass left beyond the cut of the queue a request finds
TAIL = 1e-5
#: the passage chain's states at most (beyond: no law, the caller's fallback)
MAX_STATES = 150_000
#: uniformization steps at most (beyond: no law)
MAX_STEPS = 400_000
#: the survival ``s_n`` below which the steps stop
SURVIVAL = 1e-5
#: how close (relative to ``1 - r``) two windows' decay rates ``r`` are when settled
SETTLED = 1e-4
#: the multiply-adds of the uniformization's steps at most (beyond: no law, the caller's
#: scaled law, flagged): some 6 s of one core at the sparse products' 1.2e9 a second, above
#: every case the accuracy benches cover (the testbed's shape at SCV 10 and 80% of
#: saturation takes 6.7e9)
MAX_WORK = 8_000_000_000
#: the waiting states' mass below which they are dropped from the steps
DRAINED = 1e-12
#: every this many steps past the bulk the survival's decay rate is compared with the last
#: window's; settled, the rest of it is geometric (the slowest eigenvalue of ``P``)
SETTLE = 200


def queue_cap(size: int, behind: float) -> int:
    """The largest queue behind the tagged request the holding chain keeps: twice the queue it
    starts with plus two tokens' worth, at most 60."""
    return int(min(60, max(4, 2 * math.ceil(behind) + 2 * size)))


@dataclass(frozen=True, eq=False)
class _Tagged(HeldStation):
    """A station of the passage chain: the held chain's, with the tagged request's own
    positions ``tagged`` (its class's, doubled) and at most one holder on them."""

    tagged: tuple[int, ...] = ()

    def states(self, n: int) -> list[tuple[int, ...]]:
        if not self.tagged:
            return super().states(n)
        plain = [i for i in range(len(self.owner)) if i not in self.tagged]
        if self.ordered:
            out = list(itertools.product(plain, repeat=n))
            if n >= 1:
                for t in itertools.product(plain, repeat=n - 1):
                    out += [t[:i] + (q,) + t[i:] for i in range(n) for q in self.tagged]
            return out
        out = []
        width = len(self.owner)
        for extra in [None] + list(self.tagged):
            left = n - (extra is not None)
            if left < 0:
                continue
            for comp in compositions(left, len(plain)) if plain else ([()] if left == 0
                                                                          else []):
                x = [0] * width
                for i, v in zip(plain, comp):
                    x[i] = v
                if extra is not None:
                    x[extra] = 1
                out.append(tuple(x))
        return out

    def marked(self, x: tuple[int, ...]) -> int:
        """Whether the tagged request is here in state ``x`` (0 or 1)."""
        if not self.tagged:
            return 0
        if self.ordered:
            return sum(1 for q in x if q in self.tagged)
        return sum(x[q] for q in self.tagged)


def _holders(st: HeldStation, x: tuple[int, ...]) -> int:
    return len(x) if st.ordered else int(sum(x))


def _tag(st: HeldStation, c: int, tag: int, fifo: bool) -> _Tagged:
    """``st`` with class ``c``'s positions doubled for the tagged request (class index
    ``tag``), kept in order where ``fifo`` (a first-come-first-served tier with fewer cores
    than tokens: the tagged request waits its turn there)."""
    base = dict(tier=st.tier, cpu=st.cpu, cores=st.cores, owner=st.owner, prates=st.prates,
                entry=st.entry)
    if c not in st.classes:
        return _Tagged(classes=st.classes, rates=st.rates, ordered=st.ordered, **base)
    m = st.classes.index(c)
    pos = [i for i, o in enumerate(st.owner) if o == m]
    width = len(st.owner)
    return _Tagged(tier=st.tier, cpu=st.cpu, cores=st.cores, classes=st.classes + (tag,),
                   rates=st.rates + (st.rates[m],), ordered=st.ordered or fifo,
                   owner=st.owner + (len(st.classes),) * len(pos),
                   prates=st.prates + tuple(st.prates[i] for i in pos),
                   entry=st.entry + (tuple((w, width + pos.index(q)) for w, q in st.entry[m]),),
                   tagged=tuple(range(width, width + len(pos))))


def _convert(old: HeldStation, new: _Tagged, s: tuple[int, ...]) -> list[tuple[float, tuple]]:
    """The held chain's state ``s`` of ``old`` in ``new``'s terms (no tagged request): a count
    state of a station now kept in order spread evenly over its orders (a FCFS tier's holders
    of equal rates: their classes are exchangeable in arrival order)."""
    if old.ordered or not new.ordered:
        return [(1.0, s if old.ordered else s + (0,) * len(new.tagged))]
    orders = _arrangements(tuple(s))
    return [(1.0 / len(orders), o) for o in orders]


def _arrangements(counts: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every distinct order of ``counts[i]`` items ``i``."""
    if not any(counts):
        return [()]
    out = []
    for i, v in enumerate(counts):
        if v:
            rest = counts[:i] + (v - 1,) + counts[i + 1:]
            out += [(i,) + t for t in _arrangements(rest)]
    return out


@dataclass(frozen=True, eq=False)
class PassageLaw:
    """Per class the pool's passage time (the wait for a token and the held tiers): its
    uniformized survival ``s_n`` (``survival[c]``) at rate ``Lambda`` (``uniform[c]``),
    ``mean`` and ``variance`` ``(C,)``, :meth:`masses` on a lattice (the protocol of
    :class:`solvers.response_time.ps.PSLaw`)."""

    mean: np.ndarray
    variance: np.ndarray
    survival: tuple[np.ndarray, ...]
    uniform: tuple[float, ...]
    #: the multiply-adds its uniformization's steps took (:data:`MAX_WORK`)
    work: int = 0

    def sf(self, c: int, t: np.ndarray) -> np.ndarray:
        """``P(X_c > t)``."""
        return self._poisson_sums(c, np.atleast_1d(np.asarray(t, dtype=float)), False)

    def masses(self, h: float, grid: int) -> np.ndarray:
        """``(C, grid)``: each class's law on the lattice ``i h`` by the triangular kernel,
        ``m_i = (e_{i-1} - 2 e_i + e_{i+1}) / h`` with ``e(t) = E[(X - t)^+]``; the mass
        beyond the lattice left off."""
        out = np.zeros((len(self.survival), grid))
        t = np.arange(grid + 1) * h
        for c in range(len(self.survival)):
            e = self._poisson_sums(c, t, True)
            out[c, 0] = (h - e[0] + e[1]) / h
            out[c, 1:] = (e[2:] - 2.0 * e[1:-1] + e[:-2]) / h
        return np.maximum(out, 0.0)

    def quantiles(self, levels: tuple[float, ...]) -> np.ndarray:
        """``(C, L)``: each class's quantiles alone (no tier outside the pool), by bisection
        on :meth:`sf`."""
        out = np.zeros((len(self.survival), len(levels)))
        for c in range(len(self.survival)):
            for k, q in enumerate(levels):
                lo, hi = 0.0, max(self.mean[c], 1e-12)
                while self.sf(c, hi)[0] > 1.0 - q:
                    lo, hi = hi, 2.0 * hi
                for _ in range(60):
                    mid = 0.5 * (lo + hi)
                    lo, hi = (mid, hi) if self.sf(c, mid)[0] > 1.0 - q else (lo, mid)
                out[c, k] = 0.5 * (lo + hi)
        return out

    def _poisson_sums(self, c: int, t: np.ndarray, excess: bool) -> np.ndarray:
        """``sum_n Poisson(n; Lambda t) a_n`` at each ``t``: ``a = s`` (the survival) or, with
        ``excess``, ``a_k = sum_{n >= k} s_n / Lambda`` (``E[(X - t)^+]``); each sum over the
        Poisson law's bulk (12 standard deviations)."""
        s, lam = self.survival[c], self.uniform[c]
        a = np.cumsum(s[::-1])[::-1] / lam if excess else s
        out = np.zeros(t.shape[0])
        for i, ti in enumerate(t):
            mu = lam * ti
            if mu == 0.0:
                out[i] = a[0]
                continue
            lo = max(0, int(mu - 12.0 * math.sqrt(mu) - 10))
            hi = min(a.shape[0], int(mu + 12.0 * math.sqrt(mu) + 10))
            if lo >= hi:
                continue
            k = np.arange(lo, hi)
            out[i] = float(np.exp(k * math.log(mu) - mu - special.gammaln(k + 1)) @ a[lo:hi])
        return out


def passage_law(curve: HeldCurve, rate: float) -> PassageLaw | None:
    """Each class's passage time through the pool of ``curve`` at arrival rate ``rate``
    (module docstring): ``None`` where the curve has no held chain, the chain has a bursty
    station, the rate is not below the chain's saturation, or the passage chain passes
    :data:`MAX_STATES` or :data:`MAX_STEPS`. A class out of the mix gets the exponential law of
    its mean residence there (it has no station of its own in the chain)."""
    chain = curve.chain
    lam = float(rate)
    if chain is None or not chain.stations or any(isinstance(st, BurstyHeldStation)
                                                  for st in chain.stations):
        return None
    if not (lam > 0 and lam < chain.saturation):
        return None
    K = curve.size
    p = chain.mix
    C = p.shape[0]
    rates = np.where(chain.arrivals > 0, lam * chain.arrivals, chain.rates)
    sol = solve_planned(chain.plan, rates)
    if sol is None:
        return None
    L = sol.first_repeating
    found = [sol.level(j) for j in range(L + 1)]
    tail_mass = float((sol.level(L) @ sol.tail).sum()) - float(found[L].sum())
    v = found[L]
    while tail_mass > TAIL * float(sol.pi.sum() + tail_mass) and len(found) < 100_000:
        v = v @ sol.R
        found.append(v)
        tail_mass -= float(v.sum())
    if tail_mass > 0 and found[-1].sum() > 0:
        found[-1] = found[-1] * (1.0 + tail_mass / float(found[-1].sum()))
    total = float(sum(f.sum() for f in found))
    waiting = sum(float(f.sum()) * (j - K) for j, f in enumerate(found) if j >= K)
    p_wait = sum(float(f.sum()) for j, f in enumerate(found) if j >= K)
    behind = waiting / p_wait if p_wait > 0 else 0.0
    cap = queue_cap(K, behind)
    start_q = min(int(round(behind)), cap)
    parts: dict[int, _Parts] = {}
    for c in range(C):
        if p[c] > 0:
            one = _one_class(chain, K, c, lam, found, total, start_q, cap)
            if one is None:
                return None
            parts[c] = one
    runs = _survivals(list(parts.values())) if parts else ([], [], 0)
    if runs is None:
        return None
    got = dict(zip(parts, zip(runs[0], runs[1])))
    means, variances, survival, uniform = np.zeros(C), np.zeros(C), [], []
    for c in range(C):
        if c in got:
            s, Lam = got[c]
        else:                   # an exponential of its mean residence (module docstring)
            Lam = 1.0 / max(float(curve.residence[1][:, c].sum()), 1e-12)
            s = np.array([1.0, 0.0])
        survival.append(s)
        uniform.append(Lam)
        n = np.arange(s.shape[0])
        means[c] = float(s.sum()) / Lam
        variances[c] = max(2.0 * float(((n + 1) * s).sum()) / Lam ** 2 - means[c] ** 2, 0.0)
    return PassageLaw(means, variances, tuple(survival), tuple(uniform), runs[2])


@dataclass(eq=False)
class _Parts:
    """One class's passage chain in two parts (module docstring). Its holding states: their
    arcs ``hold`` (rows source, target, rate), ``hold_out`` each one's rate out (absorption
    included), ``hold_start`` the found law's mass there. Its waiting states ``(m, x)``, the
    same arcs at every count ``m`` ahead: ``same`` (``x`` to ``y`` at one ``m``; rows ``x, y,
    rate``), ``down`` (to ``m - 1``: a token to the queue's head), ``wait_out`` each ``x``'s
    rate out, ``wait_start`` ``(F, M)`` the found law's mass; ``entry`` from ``(0, x)`` into
    the holding states (rows ``x``, holding state, rate); ``key`` the stations' representation
    (their order kept or not, their widths): the classes of one key have one waiting chain."""

    key: tuple
    hold: np.ndarray
    hold_out: np.ndarray
    hold_start: np.ndarray
    same: np.ndarray
    down: np.ndarray
    wait_out: np.ndarray
    wait_start: np.ndarray
    entry: np.ndarray

    @property
    def rate(self) -> float:
        return max(float(self.hold_out.max(initial=0.0)), float(self.wait_out.max(initial=0.0)))


def _step(arcs: np.ndarray, rows: int, cols: int, Lam: float,
          out: np.ndarray | None = None) -> sparse.csr_matrix:
    """The transpose of the uniformized step ``I + T / Lam`` on ``arcs`` (rows ``a, b, rate``;
    the diagonal from ``out``, none where ``out`` is ``None``): a forward step ``v P`` as
    ``P^T v``."""
    a, b = arcs[:, 0].astype(int), arcs[:, 1].astype(int)
    P = sparse.csr_matrix((arcs[:, 2] / Lam, (b, a)), shape=(cols, rows))
    if out is not None:
        P = P + sparse.diags(1.0 - out / Lam)
    return P.tocsr()


def _survivals(parts: list[_Parts]) -> tuple[list[np.ndarray], list[float], int] | None:
    """Each class's uniformized survival ``s_n`` of its passage chain (module docstring), its
    rate ``Lambda`` (one for all) and the multiply-adds taken; forward, ``v_{n+1} = v_n P``
    from the found law.

    The waiting states' step is ``I_M (x) A + U (x) D`` (``A`` the arcs at one count with the
    diagonal, ``D`` those to the count below, ``U`` the shift by one count): their arcs are
    the same at every count (a level-independent chain, Neuts 1981). It is taken once for
    all the classes of one ``key``: their waiting chains are one chain, the tagged request's
    class acts only when it takes its token (``entry``). Each class's holding states are
    stepped on their own, fed by the flow out of count 0. ``None`` past :data:`MAX_STEPS` or
    :data:`MAX_WORK` (the multiply-adds of the steps)."""
    Lam = max(q.rate for q in parts) * 1.0001
    waits: dict[tuple, list] = {}
    for q in parts:
        F = q.wait_out.shape[0]
        M = q.wait_start.shape[1]
        if q.key not in waits and M > 0:
            # count-major: state (m, x) at m F + x; D^T's flow from count m + 1 into m
            P = (sparse.kron(sparse.identity(M), _step(q.same, F, F, Lam, q.wait_out)) +
                 sparse.kron(sparse.eye(M, k=1), _step(q.down, F, F, Lam)))
            waits[q.key] = [P.tocsr(), q.wait_start.T.ravel(), F]
    steps = []
    for q in parts:
        Sh = q.hold_out.shape[0]
        steps.append((_step(q.hold, Sh, Sh, Lam, q.hold_out),
                      _step(q.entry, q.wait_out.shape[0], Sh, Lam)))
    held = [q.hold_start.copy() for q in parts]
    surv = [[float(q.wait_start.sum() + q.hold_start.sum())] for q in parts]
    live = [True] * len(parts)
    work = 0
    while any(live):
        if len(surv[live.index(True)]) > MAX_STEPS:
            return None
        heads, left = {}, {}
        for k, w in waits.items():
            P, x, F = w
            heads[k] = x[:F]
            w[1] = P @ x
            left[k] = float(w[1].sum())
            work += P.nnz
        for i, q in enumerate(parts):
            if not live[i]:
                continue
            Ph, E = steps[i]
            v = Ph @ held[i]
            work += Ph.nnz
            if q.key in heads:
                v += E @ heads[q.key]
                work += E.nnz
            held[i] = v
            s = surv[i]
            s.append(float(v.sum()) + left.get(q.key, 0.0))
            live[i] = s[-1] > SURVIVAL * s[0] and not _settled(s)
        if work > MAX_WORK:
            return None
        for k in list(waits):
            # a waiting chain no class reads any more, or whose mass is spent, is dropped
            if left[k] < DRAINED or not any(live[i] for i, q in enumerate(parts)
                                            if q.key == k):
                del waits[k]
    return [np.array(s) / s[0] for s in surv], [Lam] * len(parts), work


def _settled(s: list[float]) -> bool:
    """Whether the survival ``s`` has settled on the chain's slowest decay (the rate over the
    last :data:`SETTLE` steps that of the window before); then its rest, geometric, is
    appended to ``s`` down to :data:`SURVIVAL`."""
    n = len(s)
    if not (n > 2 * SETTLE and n % SETTLE == 0 and s[-1] < 0.1 * s[0]):
        return False
    r1 = (s[-1] / s[-1 - SETTLE]) ** (1.0 / SETTLE)
    r0 = (s[-1 - SETTLE] / s[-1 - 2 * SETTLE]) ** (1.0 / SETTLE)
    if not (abs(r1 - r0) < SETTLED * (1.0 - r1) and r1 < 1.0):
        return False
    more = int(math.log(SURVIVAL * s[0] / s[-1]) / math.log(r1)) + 1
    s += (s[-1] * r1 ** np.arange(1, more + 1)).tolist()
    return True


def _one_class(chain, K: int, c: int, lam: float, found: list[np.ndarray], total: float,
               start_q: int, cap: int) -> _Parts | None:
    """Class ``c``'s passage chain (module docstring), its holding and waiting parts;
    ``None`` past :data:`MAX_STATES`."""
    p, route = chain.mix, chain.route
    hit = [int(x) for x in np.flatnonzero(p > 0)]
    tag = p.shape[0]
    fifo = [st.cpu and st.cores < K and not st.ordered and _is_fifo(chain, g)
            for g, st in enumerate(chain.stations)]
    stations = [_tag(st, c, tag, f) for st, f in zip(chain.stations, fifo)]
    G = len(stations)
    index: dict[tuple, int] = {}
    keys: list[tuple] = []

    def add_state(key: tuple) -> int:
        i = index.get(key)
        if i is None:
            i = index[key] = len(keys)
            keys.append(key)
        return i

    # the holding configurations: exactly one tagged holder
    holding: list[tuple[tuple, int]] = []
    size = 0
    for k in range(1, K + 1):
        for split in compositions(k, G):
            for x in itertools.product(*(st.states(n) for st, n in zip(stations, split))):
                if sum(st.marked(s) for st, s in zip(stations, x)) == 1:
                    holding.append((x, k))
                    size += cap + 1 if k == K else 1
                    if size > MAX_STATES:
                        return None
    full: list[tuple] = []
    for split in compositions(K, G):
        for x in itertools.product(*(st.states(n) for st, n in zip(stations, split))):
            if not any(st.marked(s) for st, s in zip(stations, x)):
                full.append(x)
    M = len(found) - K
    if size + M * len(full) > MAX_STATES:
        return None
    for x, k in holding:
        for q in range(cap + 1 if k == K else 1):
            add_state(("h", x, q))
    base = len(keys)                      # the holding states; the waiting ones (m, x)
    F = len(full)
    where = {x: i for i, x in enumerate(full)}
    src: list[int] = []
    dst: list[int] = []
    val: list[float] = []
    out = np.zeros(base)

    def enter(x: tuple, cls: int, g: int) -> list[tuple[float, tuple]]:
        st = stations[g]
        return [(w, x[:g] + (y,) + x[g + 1:]) for w, y in st.enter(x[g], st.classes.index(cls))]

    def arc(a: int, b: int, r: float) -> None:
        if r > 0:
            src.append(a), dst.append(b), val.append(r)
            out[a] += r

    for a, (_, x, q) in enumerate(keys):          # holding: one state at a time
        k = sum(_holders(st, s) for st, s in zip(stations, x))
        if k < K:
            for c2 in hit:
                for w, y in enter(x, c2, route[c2][0]):
                    arc(a, index[("h", y, 0)], lam * float(p[c2]) * w)
        elif q < cap:
            arc(a, index[("h", x, q + 1)], lam)
        for g, st in enumerate(stations):
            for r, after in st.moves(x[g]):
                arc(a, index[("h", x[:g] + (after,) + x[g + 1:], q)], r)
            for mpos, r, after in st.leaving(x[g]):
                cls = st.classes[mpos]
                y = x[:g] + (after,) + x[g + 1:]
                path = route[c if cls == tag else cls]
                step = path.index(g) + 1
                if step < len(path):
                    for w, z in enter(y, cls, path[step]):
                        arc(a, index[("h", z, q)], r * w)
                elif cls == tag:
                    out[a] += r                                   # the tagged request leaves
                elif q > 0:
                    for c2 in hit:
                        for w, z in enter(y, c2, route[c2][0]):
                            arc(a, index[("h", z, q - 1)], r * float(p[c2]) * w)
                else:
                    arc(a, index[("h", y, 0)], r)
    # waiting: the arcs of one ahead count, the same at every count (the head's entry at
    # m > 0, the tagged request's at m = 0)
    same: list[tuple[int, int, float]] = []
    down: list[tuple[int, int, float]] = []
    entry: list[tuple[int, int, float]] = []
    rate_out = np.zeros(F)
    for i, x in enumerate(full):
        for g, st in enumerate(stations):
            for r, after in st.moves(x[g]):
                same.append((i, where[x[:g] + (after,) + x[g + 1:]], r))
            for mpos, r, after in st.leaving(x[g]):
                cls = st.classes[mpos]
                y = x[:g] + (after,) + x[g + 1:]
                step = route[cls].index(g) + 1
                if step < len(route[cls]):
                    same += [(i, where[z], r * w) for w, z in enter(y, cls, route[cls][step])]
                    continue
                down += [(i, where[z], r * float(p[c2]) * w) for c2 in hit
                         for w, z in enter(y, c2, route[c2][0])]
                entry += [(i, index[("h", z, start_q)], r * w)
                          for w, z in enter(y, tag, route[c][0])]
    for arcs in (same, down):
        for i, _, r in arcs:
            rate_out[i] += r
    # the found law (PASTA) as the start; at K and above one map from the chain's states to
    # the waiting states' x, the same at every count
    alpha = np.zeros(base)
    for j, f in enumerate(found[:K]):
        for i in np.flatnonzero(f > 0):
            for w, x in _converted(chain, stations, chain.configs[j][i]):
                for w2, y in enter(x, tag, route[c][0]):
                    alpha[index[("h", y, 0)]] += float(f[i]) / total * w * w2
    top = chain.configs[K]
    T = np.zeros((len(top), F))
    for i, conf in enumerate(top):
        for w, x in _converted(chain, stations, conf):
            T[i, where[x]] += w
    waiting = (np.array(found[K:]).reshape(M, len(top)) @ T / total if M else np.zeros((0, F)))
    key = tuple((st.ordered, len(st.owner) - len(st.tagged)) for st in stations)
    hold = np.column_stack([src, dst, val]) if val else np.zeros((0, 3))
    arcs = [np.array(a, dtype=float).reshape(-1, 3) for a in (same, down, entry)]
    return _Parts(key=key, hold=hold, hold_out=out, hold_start=alpha, same=arcs[0],
                  down=arcs[1], wait_out=rate_out, wait_start=waiting.T, entry=arcs[2])


def _converted(chain, stations: list[_Tagged], conf: tuple) -> list[tuple[float, tuple]]:
    """The held chain's state ``conf`` in the passage chain's terms (:func:`_convert` at each
    station): its weights and states."""
    parts = [_convert(old, new, s) for old, new, s in zip(chain.stations, stations, conf)]
    return [(math.prod(t[0] for t in combo), tuple(t[1] for t in combo))
            for combo in itertools.product(*parts)]


def _is_fifo(chain, g: int) -> bool:
    """Whether station ``g`` of ``chain`` is a first-come-first-served tier's cores (not
    processor sharing): its tier's entry in the chain's ``fifo`` record."""
    return bool(chain.fifo[chain.stations[g].tier]) if chain.fifo is not None else False
