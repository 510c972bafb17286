"""What an arriving job finds at a tier of a closed single-class product-form network.

Arrival theorem (Lavenberg and Reiser 1980; Sevcik and Mitrani 1981): in a closed product-form
network of ``n`` jobs, a job arriving at station ``m`` sees the stationary distribution of the
same network with ``n - 1`` jobs. The marginal queue-length distribution of station ``m`` at
population ``k`` is (Buzen 1973's convolution; Reiser and Lavenberg 1980)::

    p_m(j | k) = f_m(j) G^{(-m)}(k - j) / G(k),     f_m(j) = D_m^j / prod_{i=1..j} min(i, c_m)

with ``G^{(-m)}`` the normalising constant of the network without station ``m``. Its ratios are
the throughputs of that complementary network, ``G^{(-m)}(i - 1) / G^{(-m)}(i) = X^{(-m)}(i)``,
so::

    p_m(j | k)  proportional to  f_m(j) prod_{i=k-j+1..k} X^{(-m)}(i),     j = 0..k

normalised over ``j``, all in logarithms: no normalising constant (which over- or underflows
beyond a few hundred jobs) and no ``1 - sum`` subtraction (which loses every digit of
``p_m(0)`` at high load, Casale 2009) is ever formed. ``X^{(-m)}(i)``, ``i = 1..k``, comes from
one pass of the single-class MVA recursion on the complementary network, ``O(k M)``: exact
when the other queueing stations have one server each, Seidmann's approximation for the other
multi-server stations (reported as ``approximate``). The station's own factor ``f_m`` is exact
for any ``c_m``. The complements' throughputs come from Buzen 1973's convolution where their
normalising constants stay within a double's range (:func:`_convolved`: one linear filter per
queueing station over all populations, no loop over ``n`` in Python), else from the MVA
recursion of all complements side by side, which keeps only the throughputs
(:func:`_complement_recursion`).

**One-server stations need no complement.** For ``c_m = 1`` the tail of the marginal is a
product of the *whole* network's throughputs (Buzen 1973; Reiser and Lavenberg 1980)::

    P(n_m >= j | k) = D_m^j G(k - j) / G(k) = D_m^j prod_{i=k-j+1..k} X(i)

-- the curve the network's own MVA solve has already computed (the model hands it over,
:class:`ArrivalLaw`'s ``curve``), the same marginal as the complement's (one product-form
network, other multi-server stations under the same Seidmann approximation), without an MVA
pass of its own. The masses are differences of adjacent tails: exact to ``1e-16`` absolute,
which is all a quantile reads (a mass far below that, as ``p_m(0)`` deep past saturation,
comes out 0 instead of its tiny value).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.signal import lfilter

from solvers.mva import mva_curve

__all__ = ["ArrivalLaw", "ArrivalMarginals", "FoundLaws", "arrival_marginals", "TRUNCATION"]

#: probabilities below this fraction of the largest are dropped from a marginal (and the rest
#: renormalised): they cannot move a quantile up to p99.9 by more than that fraction
TRUNCATION = 1e-12


@dataclass(frozen=True, eq=False)
class ArrivalMarginals:
    """Per station, the distribution of the jobs an arriving job finds there.

    ``offset[m]`` and ``pmf[m]``: ``P(found = offset[m] + i) = pmf[m][i]`` (a truncated
    support, :data:`TRUNCATION`); delay stations (``c_m`` infinite or above the population)
    have ``pmf = [1]`` at 0 -- nobody waits there. ``approximate[m]``: station ``m``'s
    complementary network had another multi-server station (Seidmann's approximation in its
    throughputs).
    """

    population: int
    offset: tuple[int, ...]
    pmf: tuple[np.ndarray, ...]
    approximate: tuple[bool, ...]

    def mean(self, m: int) -> float:
        """Mean number found at station ``m``."""
        p = self.pmf[m]
        return float(p @ (self.offset[m] + np.arange(p.shape[0])))


def _log_station_factor(D: float, c: float, k: int) -> np.ndarray:
    """``log f_m(j)``, ``j = 0..k``: ``j log D - sum_{i<=j} log min(i, c)``. With ``h`` the
    rates below ``c`` (``i = 1..h``) the sum is ``log h! + (j - h) log c`` from ``j = h`` on: a
    line, no logarithm per ``j``; below ``h``, ``log j!``."""
    j = np.arange(k + 1, dtype=float)
    h = min(int(math.ceil(c)) - 1, k)
    out = j * (math.log(D) - math.log(c)) + (h * math.log(c) - math.lgamma(h + 1))
    if h < 32:                                   # a few cores: their factorials as scalars
        out[:h + 1] = [i * math.log(D) - math.lgamma(i + 1) for i in range(h + 1)]
    else:
        out[:h + 1] = j[:h + 1] * math.log(D) - np.concatenate(
            [[0.0], np.cumsum(np.log(j[1:h + 1]))])
    return out


def _truncate_rows(w: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """:func:`_truncate` of each row of ``w`` (each row's largest entry 1): the supports
    found in one array step."""
    keep = w >= TRUNCATION
    first = keep.argmax(axis=1)
    last = w.shape[1] - 1 - keep[:, ::-1].argmax(axis=1)
    j = np.arange(w.shape[1])
    inside = (j >= first[:, None]) & (j <= last[:, None])
    w = w / np.where(inside, w, 0.0).sum(axis=1, keepdims=True)     # each row's support: 1
    return [(lo, w[r, lo:hi + 1]) for r, (lo, hi) in enumerate(zip(first.tolist(),
                                                                    last.tolist()))]


#: the law of a station nobody waits at (or where all are): one point
_ONE = np.ones(1)
_ONE.setflags(write=False)


def _normalise(logw: np.ndarray) -> tuple[int, np.ndarray]:
    return _truncate(np.exp(logw - logw.max()))


def _truncate(w: np.ndarray) -> tuple[int, np.ndarray]:
    """The support of ``w`` (largest entry 1) where ``w >= TRUNCATION``, renormalised."""
    keep = np.flatnonzero(w >= TRUNCATION)
    lo, hi = int(keep[0]), int(keep[-1])
    p = w[lo:hi + 1]
    return lo, p / p.sum()


_COMPLEMENTS = """
def recursion(d, fixed, Z, N, X, start=1, q=None):
    {d} = d
    {q} = {zeros} if q is None else q
{bind}
    for n in range(start, N + 1):
{body}
    return ({q_out})
"""


@functools.lru_cache(maxsize=64)
def _complement_recursion(sizes: tuple[int, ...]) -> Callable[..., None]:
    """The single-class MVA recursion of :func:`solvers.mva.mva_curve` for ``len(sizes)``
    networks side by side (network ``b`` with ``sizes[b]`` queueing stations), one local
    variable per station, keeping only ``X_b(n)``, appended to ``X[b]``: the complements of
    a network's multi-server stations in one loop over ``n`` instead of one pass each (the
    loop, not the arithmetic, is what a pass costs in Python). It runs ``n = start..N`` from
    the queue lengths ``q`` it returned at ``start - 1`` (default: an empty network at
    ``start = 1``), so a longer curve continues the shorter one, the same numbers as one
    pass."""
    d, q, body, bind = [], [], [], []
    for b, size in enumerate(sizes):
        names = [f"{b}_{i}" for i in range(size)]
        d += [f"d{x}" for x in names]
        q += [f"q{x}" for x in names]
        rs = "; ".join(f"r{x} = d{x} * (1.0 + q{x})" for x in names) or "pass"
        total = " + ".join(f"r{x}" for x in names) or "0.0"
        bind.append(f"    fixed{b}, append{b} = fixed[{b}], X[{b}].append")
        body.append(f"        {rs}\n"
                    f"        t = {total} + fixed{b} + Z\n"
                    f"        x = n / t if t > 0 else inf\n"
                    + "".join(f"        q{x} = x * r{x}\n" for x in names)
                    + f"        append{b}(x)")
    src = _COMPLEMENTS.format(d=", ".join(d) + "," if d else "_", q=", ".join(q) + "," if q
                              else "_", zeros="(" + ", ".join("0.0" for _ in q) + ",)" if q
                              else "0", body="\n".join(body) if body else "        pass",
                              q_out=", ".join(q) + "," if q else "",
                              bind="\n".join(bind) if bind else "    pass")
    namespace: dict[str, Any] = {"inf": math.inf}
    exec(src, namespace)          # noqa: S102 - generated above
    return namespace["recursion"]


class ArrivalLaw:
    """What arriving jobs find, at any population, in one closed single-class network
    (demands ``D_m`` seconds, ``c_m`` servers, ``math.inf`` a delay; think time ``Z``).

    One-server stations read the whole network's MVA curve (module docstring): ``curve(k)``
    gives one (:class:`solvers.mva.MVACurve`, at least ``k`` jobs; the network's own solve,
    where the caller has it), else the law computes it. The complementary networks'
    throughputs ``X^{(-m)}(i)`` of the multi-server stations come, for all of them at once,
    from Buzen's convolution (:func:`_convolved`) or, where its constants leave a double's
    range, from one recursion continued from where it stopped; either runs as far as the
    largest population asked for, and at least 1/8 further when a larger one is asked for: a
    capacity search's probes climb, and no population is computed far beyond the question."""

    def __init__(self, demands: np.ndarray, servers: np.ndarray, think_time: float,
                 curve: Callable[[int], Any] | None = None) -> None:
        D = np.asarray(demands, dtype=float)
        c = np.asarray(servers, dtype=float)
        if D.ndim != 1 or c.shape != D.shape:
            raise ValueError(f"demands, servers: must be vectors of one length, got shapes "
                             f"{D.shape} and {c.shape}")
        Dl, cl = D.tolist(), c.tolist()           # a few scalars: tested without array steps
        if not all(math.isfinite(x) and x >= 0 for x in Dl):
            raise ValueError(f"demands: must be finite and >= 0, got {Dl}")
        if not all(x >= 1 for x in cl):
            raise ValueError(f"servers: must be >= 1 (inf: a delay), got {cl}")
        if not (math.isfinite(think_time) and think_time >= 0):
            raise ValueError(f"think_time: must be finite and >= 0, got {think_time!r}")
        self.D, self.c, self.Z = D, c, float(think_time)
        #: per station: cumulative ``sum_{i<=l} log X^{(-m)}(i)``, ``l = 0..len-1``
        self._cum: dict[int, np.ndarray] = {}
        self._approximate: dict[int, bool] = {}
        self._factor: dict[int, np.ndarray] = {}
        self._run: _ComplementRun | None = None
        self._curve_of = curve
        #: the whole network's cumulative ``sum_{i<=l} log X(i)`` (one-server stations)
        self._full: np.ndarray | None = None
        multi = [math.isfinite(x) and x > 1 for x in cl]
        #: the other stations are multi-server: Seidmann's approximation in the marginal
        n_multi, n_busy = sum(multi), sum(x > 0 for x in Dl)
        self._approximate_full = [n_multi - int(x) > 0 for x in multi]
        #: per station: another station has demand (else, without think time, nowhere else)
        self._others_busy = [n_busy - int(x > 0) > 0 for x in Dl]

    def _whole(self, k: int) -> np.ndarray:
        """``cum[l] = sum_{i<=l} log X(i)`` of the whole network for ``l = 0..k`` (at least)."""
        if self._full is not None and self._full.shape[0] > k:
            return self._full
        if self._curve_of is not None:
            X = np.asarray(self._curve_of(k).throughput, dtype=float)
        else:
            have = self._full.shape[0] - 1 if self._full is not None else 0
            X = mva_curve(self.D, max(2 * k, 2 * have, 16), self.Z, self.c).throughput
        if X.shape[0] <= k:
            raise ValueError(f"curve: must reach population {k}, got {X.shape[0] - 1}")
        if X.shape[0] > 1 and X[1:].min() > 0:          # no log of 0: no warning to silence
            logs = np.log(X[1:])
        else:
            with np.errstate(divide="ignore"):
                logs = np.log(X[1:])
        self._full = np.concatenate([[0.0], np.cumsum(logs)])
        return self._full

    def _complement(self, m: int, k: int) -> np.ndarray:
        """``cum[l] = sum_{i<=l} log X^{(-m)}(i)`` for ``l = 0..k`` (at least); computed
        with the other multi-server stations' complements (one recursion,
        :func:`_complement_recursion`)."""
        cum = self._cum.get(m)
        if cum is not None and cum.shape[0] > k:
            return cum
        if self._run is None or m not in self._run.which:     # not carried yet: anew
            D, c = self.D.tolist(), self.c.tolist()
            multi = [i for i in range(len(D)) if math.isfinite(c[i]) and c[i] > 1 and D[i] > 0]
            which = sorted(set(multi) | {m})
            splits = [_split_without(D, c, i) for i in which]
            self._run = _ComplementRun(which, splits)
            for i, (_, _, approx) in zip(which, splits):
                self._approximate[i] = approx
                self._cum[i] = np.zeros(1)
        run = self._run
        # as far as asked, at least 1/8 beyond the last: a capacity search's probes climb
        upto = max(k, (9 * run.upto) // 8, 16)
        if run.convolved is not False:            # nothing recursed yet: convolve, if safe
            cums = _convolved(run.splits, self.Z, upto)
            if cums is not None:
                for i, cum in zip(run.which, cums):
                    self._cum[i] = cum
                run.upto, run.convolved = upto, True
                return self._cum[m]
            if run.convolved:                     # out of range further on: recurse anew
                run.restart()
                for i in run.which:
                    self._cum[i] = np.zeros(1)
            run.convolved = False
        X = run.extend(upto, self.Z)
        for i, Xi in zip(run.which, X):
            old = self._cum[i]
            with np.errstate(divide="ignore"):
                # the running sum continued from its last value: one sum, as in one pass
                tail = np.cumsum(np.concatenate([old[-1:], np.log(Xi)]))[1:]
            self._cum[i] = np.concatenate([old, tail])
        return self._cum[m]

    def _station(self, m: int, k: int) -> np.ndarray:
        """``log f_m(j)``, ``j = 0..k`` (kept to twice the longest asked for: the complement
        grows in short steps, its factor need not follow each)."""
        f = self._factor.get(m)
        if f is None or f.shape[0] <= k:
            f = _log_station_factor(float(self.D[m]), float(self.c[m]), 2 * k)
            self._factor[m] = f
        return f[:k + 1]

    def marginals(self, population: int) -> ArrivalMarginals:
        """The distribution of the jobs a job arriving at each station finds at
        ``population`` jobs: the marginals at ``population - 1`` (module docstring)."""
        return self.marginals_many([population])[0]

    def marginals_many(self, populations: list[int]) -> list[ArrivalMarginals]:
        """:meth:`marginals` at each of ``populations``: every station's law at every
        population in one array step per kind of station (one-server: the whole network's
        tails; multi-server: the complements'), on one width, the largest population's."""
        found = self.found_many(populations)
        offsets = [list(o) for o in found.offsets]
        pmfs = [[_ONE] * len(o) for o in found.offsets]
        approximate = [[False] * len(o) for o in found.offsets]
        if found.rows:
            for (p, m), (lo, pm), approx in zip(found.rows, _truncate_rows(found.weights),
                                                found.approximate):
                offsets[p][m], pmfs[p][m], approximate[p][m] = lo, pm, approx
        return [ArrivalMarginals(population=int(n), offset=tuple(offsets[p]),
                                 pmf=tuple(pmfs[p]), approximate=tuple(approximate[p]))
                for p, n in enumerate(populations)]

    def found_many(self, populations: list[int]) -> FoundLaws:
        """What :meth:`marginals_many` reads, before each law is cut to its support: the
        stations where someone may wait, every population's found law a row of one array."""
        for population in populations:
            if isinstance(population, bool) or not isinstance(population, (int, np.integer)) \
                    or population < 1:
                raise ValueError(f"population: must be an integer >= 1, got {population!r}")
        D, c = self.D.tolist(), self.c.tolist()   # floats: scalar tests, no array indexing
        ks = [int(n) - 1 for n in populations]   # the others, as the arriving job sees them
        M = len(D)
        offsets = [[0] * M for _ in ks]
        ones: list[tuple[int, int]] = []
        multi: list[tuple[int, int]] = []
        for p, k in enumerate(ks):
            for m in range(M):
                if not math.isfinite(c[m]) or c[m] > k or D[m] == 0 or k == 0:
                    continue                      # nobody waits there
                if self.Z == 0 and not self._others_busy[m]:
                    offsets[p][m] = k             # nowhere else to be
                    continue
                (ones if c[m] == 1 else multi).append((p, m))
        rows = ones + multi
        if not rows:
            return FoundLaws(offsets, [], np.zeros((0, 1)), [])
        top = max(ks[p] for p, _ in rows)
        j = np.arange(top + 1)
        k_row = np.array([ks[p] for p, _ in rows])
        back = k_row[:, None] - j                 # k - j: negative beyond the row's k
        inside = back >= 0
        np.maximum(back, 0, out=back)
        parts = []
        if ones:                                  # the whole network's tails, side by side
            cum = self._whole(top)
            R = len(ones)
            logt = j * np.array([[math.log(D[m])] for _, m in ones]) \
                + (cum[k_row[:R, None]] - cum[back[:R]])
            logt[~inside[:R]] = -math.inf
            tail = np.exp(logt)
            mass = np.maximum(tail - np.concatenate([tail[:, 1:], np.zeros((R, 1))],
                                                    axis=1), 0.0)
            parts.append(mass / mass.max(axis=1, keepdims=True))
        if multi:                                 # each its complement's
            R = len(ones)
            stations = sorted({m for _, m in multi})
            # every station's complement and factor a row, each law's read by one gather
            cum = np.stack([self._complement(m, top)[:top + 1] for m in stations])
            which = np.array([stations.index(m) for _, m in multi])[:, None]
            logw = np.stack([self._station(m, top) for m in stations])[which[:, 0]]
            logw += cum[which, k_row[R:, None]] - cum[which, back[R:]]
            logw[~inside[R:]] = -math.inf
            parts.append(np.exp(logw - logw.max(axis=1, keepdims=True)))
        return FoundLaws(offsets, rows, np.concatenate(parts) if len(parts) > 1 else parts[0],
                         [self._approximate_full[m] for _, m in ones]
                         + [self._approximate[m] for _, m in multi])


@dataclass(frozen=True, eq=False)
class FoundLaws:
    """:meth:`ArrivalLaw.found_many`'s answer: ``weights[r]`` (largest entry 1) the law of
    the jobs found at station ``m`` of population ``p``, ``rows[r] = (p, m)``, ``P(found = i)``
    proportional to ``weights[r, i]``; ``approximate[r]`` as :class:`ArrivalMarginals`'. At
    the other stations nobody waits but where ``offsets[p][m]`` (all there are) is above 0."""

    offsets: list[list[int]]
    rows: list[tuple[int, int]]
    weights: np.ndarray
    approximate: list[bool]


class _ComplementRun:
    """The complements' recursion (:func:`_complement_recursion`) of the stations ``which``
    (``splits`` their complements' :func:`_split`), kept where it stopped: :meth:`extend`
    runs it on from there."""

    def __init__(self, which: list[int], splits: list[tuple[np.ndarray, float, bool]]) -> None:
        self.which = which
        self.splits = splits
        self._q: tuple[float, ...] | None = None
        self.upto = 0
        #: ``None``: nothing computed yet; ``True``: by :func:`_convolved` up to ``upto``;
        #: ``False``: by the recursion
        self.convolved: bool | None = None

    def restart(self) -> None:
        """Back to an empty network: the recursion runs from ``n = 1`` again."""
        self._q, self.upto = None, 0

    def extend(self, upto: int, Z: float) -> list[list[float]]:
        """``X_b(n)`` for ``n = self.upto + 1 .. upto``, per complement."""
        X: list[list[float]] = [[] for _ in self.which]
        step = _complement_recursion(tuple(d.shape[0] for d, _, _ in self.splits))
        self._q = step([float(v) for d, _, _ in self.splits for v in d],
                       [f for _, f, _ in self.splits], Z, upto, X, self.upto + 1, self._q)
        self.upto = max(upto, self.upto)
        return X


#: the largest ``log`` of a scaled normalising constant :func:`_convolved` lets arise (a
#: double reaches ``e^709``)
LOG_RANGE = 600.0


def _convolved(splits: list[tuple[np.ndarray, float, bool]], Z: float, N: int
               ) -> list[np.ndarray] | None:
    """Per complement (``splits``: its one-server queueing demands ``d_i`` and the demand
    ``fixed`` it spends without queueing, :func:`_split`) ``cum[l] = sum_{i<=l} log X(i)``,
    ``l = 0..N``, by Buzen 1973's convolution instead of the MVA recursion: ``X(n) = G(n - 1)
    / G(n)`` with ``G`` the normalising constant of the delay ``Z + fixed`` (``a^n / n!``)
    convolved with one geometric series ``d_i^n`` per queueing station -- each a first-order
    linear filter, ``y(n) = x(n) + d_i y(n - 1)``, run over all ``n`` at once, the ``i``-th
    station of every complement in one call. Every term is positive, so no digit cancels.
    The demands are scaled by the largest of all, ``rho``; a complement's scaled constant then
    lies in ``[(d_max / rho)^N, e^{a} (N + K)^K]`` (``a = (Z + fixed) / rho``, ``K`` stations,
    ``d_max`` its largest; its bottleneck's series alone gives the lower bound, Buzen 1973):
    ``None`` where that range leaves :data:`LOG_RANGE` either way, or a complement has no
    demand at all, for the recursion to answer instead. The same throughputs as the
    recursion's to rounding (tested)."""
    if not splits or any(d.size == 0 for d, _, _ in splits):
        return None
    rho = max(float(d.max()) for d, _, _ in splits)
    n = np.arange(N + 1, dtype=float)
    a = np.array([(fixed + Z) / rho for _, fixed, _ in splits])
    for (d, _, _), ab in zip(splits, a.tolist()):
        if ab + d.size * math.log(N + d.size) > LOG_RANGE \
                or N * math.log(rho / float(d.max())) > LOG_RANGE:
            return None
    g = np.ones((len(splits), N + 1))
    np.cumprod(a[:, None] / n[1:], axis=1, out=g[:, 1:])           # the delays' a^n / n!
    top = float(a.max()) + max(d.size for d, _, _ in splits) * math.log(N + 1.0)
    # the i-th queueing station of every complement that has one in one step, each row its
    # own demand (the filters commute: the order of a complement's stations is free)
    scaled = [(d / rho).tolist() for d, _, _ in splits]
    for i in range(max(len(d) for d in scaled)):
        rows = [b for b, d in enumerate(scaled) if len(d) > i]
        if len(rows) == len(scaled):           # every complement: no rows picked out
            g = _geometric_filter(g, np.array([d[i] for d in scaled]), top)
        else:
            g[rows] = _geometric_filter(g[rows], np.array([scaled[b][i] for b in rows]), top)
    return list(-n * math.log(rho) - np.log(g))


def _geometric_filter(x: np.ndarray, d: np.ndarray, top: float) -> np.ndarray:
    """``y(n) = x(n) + d_r y(n - 1)`` along each row ``r`` of ``x`` (``0 < d_r <= 1``; ``log
    x`` below ``top``): ``d^n cumsum(x(j) d^{-j})``, a running sum of positive terms, where
    ``d^{-N}`` keeps it within :data:`LOG_RANGE`, else :func:`scipy.signal.lfilter`."""
    N = x.shape[1] - 1
    logd = np.log(d)
    far = top - N * logd > LOG_RANGE
    if far.any():                          # those rows alone by the filter, the rest as below
        y = np.empty_like(x)
        for r in np.flatnonzero(far).tolist():
            y[r] = lfilter(_ONE, (1.0, -float(d[r])), x[r])
        near = ~far
        if near.any():
            y[near] = _geometric_filter(x[near], d[near], top)
        return y
    power = np.exp(np.arange(N + 1) * logd[:, None])               # d^n
    return np.cumsum(x / power, axis=1) * power


def _split_without(D: list[float], c: list[float], skip: int) -> tuple[np.ndarray, float, bool]:
    """:func:`_split` of the network without station ``skip`` (``D``, ``c`` as lists: a few
    scalars, no array steps)."""
    d: list[float] = []
    fixed, multi = 0.0, False
    for i, (Di, ci) in enumerate(zip(D, c)):
        if i == skip:
            continue
        if math.isinf(ci):
            fixed += Di
        elif ci > 1:
            multi = True
            fixed += Di * (ci - 1) / ci
            if Di > 0:
                d.append(Di / ci)
        elif Di > 0:
            d.append(Di)
    return np.array(d), fixed, multi


def _split(D: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, float, bool]:
    """The queueing stations' demands of a network (``D / c`` at ``c`` servers: Seidmann's
    approximation, as :func:`solvers.mva.mva_curve`), its demand spent without queueing, and
    whether a multi-server station was approximated."""
    return _split_without(np.asarray(D, dtype=float).tolist(),
                          np.asarray(c, dtype=float).tolist(), -1)


def arrival_marginals(demands: np.ndarray, servers: np.ndarray, think_time: float,
                      population: int) -> ArrivalMarginals:
    """The distribution of the jobs a job arriving at each station finds, in a closed
    single-class network of ``population`` jobs (demands ``D_m`` seconds, ``c_m`` servers,
    ``math.inf`` a delay; think time ``Z``): the marginals at ``population - 1`` (module
    docstring). :class:`ArrivalLaw` for many populations of one network."""
    return ArrivalLaw(demands, servers, think_time).marginals(population)
