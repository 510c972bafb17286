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
one pass of the single-class MVA recursion on the complementary network
(:func:`solvers.mva.mva_curve`), ``O(k M)``: exact when the other queueing stations have one
server each, Seidmann's approximation for the other multi-server stations (the curve's own
``approximate``, reported). The station's own factor ``f_m`` is exact for any ``c_m``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solvers.mva import mva_curve

__all__ = ["ArrivalLaw", "ArrivalMarginals", "arrival_marginals", "TRUNCATION"]

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
    """``log f_m(j)``, ``j = 0..k``: ``j log D - sum_{i<=j} log min(i, c)``."""
    j = np.arange(k + 1, dtype=float)
    rates = np.minimum(np.arange(1, k + 1, dtype=float), c)
    return j * math.log(D) - np.concatenate([[0.0], np.cumsum(np.log(rates))])


def _normalise(logw: np.ndarray) -> tuple[int, np.ndarray]:
    w = np.exp(logw - logw.max())
    keep = np.flatnonzero(w >= TRUNCATION)
    lo, hi = int(keep[0]), int(keep[-1])
    p = w[lo:hi + 1]
    return lo, p / p.sum()


class ArrivalLaw:
    """What arriving jobs find, at any population, in one closed single-class network
    (demands ``D_m`` seconds, ``c_m`` servers, ``math.inf`` a delay; think time ``Z``).

    The complementary networks' throughputs ``X^{(-m)}(i)`` are computed once (one MVA pass
    each, :func:`solvers.mva.mva_curve`) and extended by doubling when a larger population is
    asked for: the populations of a capacity search cost ``O(n)`` array operations each."""

    def __init__(self, demands: np.ndarray, servers: np.ndarray, think_time: float) -> None:
        D = np.asarray(demands, dtype=float)
        c = np.asarray(servers, dtype=float)
        if D.ndim != 1 or c.shape != D.shape:
            raise ValueError(f"demands, servers: must be vectors of one length, got shapes "
                             f"{D.shape} and {c.shape}")
        if not (np.all(np.isfinite(D)) and np.all(D >= 0)):
            raise ValueError(f"demands: must be finite and >= 0, got {D.tolist()}")
        if not (np.all(c >= 1)):
            raise ValueError(f"servers: must be >= 1 (inf: a delay), got {c.tolist()}")
        if not (math.isfinite(think_time) and think_time >= 0):
            raise ValueError(f"think_time: must be finite and >= 0, got {think_time!r}")
        self.D, self.c, self.Z = D, c, float(think_time)
        #: per station: cumulative ``sum_{i<=l} log X^{(-m)}(i)``, ``l = 0..len-1``
        self._cum: dict[int, np.ndarray] = {}
        self._approximate: dict[int, bool] = {}
        self._factor: dict[int, np.ndarray] = {}

    def _complement(self, m: int, k: int) -> np.ndarray:
        """``cum[l] = sum_{i<=l} log X^{(-m)}(i)`` for ``l = 0..k`` (at least)."""
        cum = self._cum.get(m)
        if cum is not None and cum.shape[0] > k:
            return cum
        upto = max(2 * k, 2 * (cum.shape[0] - 1) if cum is not None else 0, 16)
        rest = np.delete(np.arange(self.D.shape[0]), m)
        if rest.size:
            curve = mva_curve(self.D[rest], upto, self.Z, self.c[rest])
            self._approximate[m] = curve.approximate
            X = curve.throughput[1:upto + 1]
        else:
            X = np.arange(1, upto + 1) / self.Z                 # the think stage alone
            self._approximate[m] = False
        cum = np.concatenate([[0.0], np.cumsum(np.log(X))])
        self._cum[m] = cum
        return cum

    def _station(self, m: int, k: int) -> np.ndarray:
        """``log f_m(j)``, ``j = 0..k`` (kept at the complement's length)."""
        f = self._factor.get(m)
        if f is None or f.shape[0] <= k:
            f = _log_station_factor(float(self.D[m]), float(self.c[m]),
                                    self._cum[m].shape[0] - 1)
            self._factor[m] = f
        return f[:k + 1]

    def marginals(self, population: int) -> ArrivalMarginals:
        """The distribution of the jobs a job arriving at each station finds at
        ``population`` jobs: the marginals at ``population - 1`` (module docstring)."""
        if isinstance(population, bool) or not isinstance(population, (int, np.integer)) \
                or population < 1:
            raise ValueError(f"population: must be an integer >= 1, got {population!r}")
        D, c = self.D, self.c
        k = int(population) - 1                   # the others, as the arriving job sees them
        offsets, pmfs, approximate = [], [], []
        for m in range(D.shape[0]):
            if not np.isfinite(c[m]) or c[m] > k or D[m] == 0 or k == 0:
                offsets.append(0)
                pmfs.append(np.ones(1))
                approximate.append(False)
                continue
            others = np.delete(D, m)
            if self.Z == 0 and not (others > 0).any():
                offsets.append(k)                 # nowhere else to be
                pmfs.append(np.ones(1))
                approximate.append(False)
                continue
            cum = self._complement(m, k)
            logw = self._station(m, k) + (cum[k] - cum[k::-1])
            lo, p = _normalise(logw)
            offsets.append(lo)
            pmfs.append(p)
            approximate.append(self._approximate[m])
        return ArrivalMarginals(population=int(population), offset=tuple(offsets),
                                pmf=tuple(pmfs), approximate=tuple(approximate))


def arrival_marginals(demands: np.ndarray, servers: np.ndarray, think_time: float,
                      population: int) -> ArrivalMarginals:
    """The distribution of the jobs a job arriving at each station finds, in a closed
    single-class network of ``population`` jobs (demands ``D_m`` seconds, ``c_m`` servers,
    ``math.inf`` a delay; think time ``Z``): the marginals at ``population - 1`` (module
    docstring). :class:`ArrivalLaw` for many populations of one network."""
    return ArrivalLaw(demands, servers, think_time).marginals(population)
