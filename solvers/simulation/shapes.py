"""Service-time sequences beyond the MAP for the physical simulator: heavy-tailed marginals with
correlated ordering, and Markov-modulated (MMPP) sequences of any order by run lengths.

* :class:`CorrelatedService` -- a stationary sequence whose marginal is lognormal or Pareto and
  whose ordering is correlated through a Gaussian AR(1) copula: ``z_k = rho z_{k-1} +
  sqrt(1 - rho^2) e_k`` (standard normal), ``x_k = F^{-1}(Phi(z_k))``. This is the ARTA
  construction of Cario and Nelson (1996): any marginal, an autocorrelation that decays
  geometrically with the lag, and ``rho = 0`` i.i.d. Closed forms: lognormal of mean ``m`` and
  squared coefficient of variation ``s``: ``sigma^2 = ln(1 + s)``, ``mu = ln m - sigma^2 / 2``;
  Pareto of shape ``alpha > 2`` and mean ``m``: scale ``x_m = m (alpha - 1) / alpha``, SCV
  ``1 / (alpha (alpha - 2))`` (Johnson, Kotz and Balakrishnan 1994).
* :func:`mmpp_runs` -- an MMPP(k) service process (``D1`` diagonal) given, per phase, its
  relative mean service time and its mean run length (services per sojourn), and the
  phase-to-phase jump probabilities: phase ``i`` completes at rate ``lambda_i = 1 / s_i`` and
  leaves at ``lambda_i / n_i``, so ``n_i`` services are served per sojourn on average (the
  sojourn is exponential in time, the count geometric). Its mean and index of dispersion are
  the :class:`~solvers.processes.MAP`'s closed forms.

A process with a ``blocks(rng, block)`` generator and a ``mean`` is what
:class:`solvers.simulation.physical.Tier` accepts besides a number and a MAP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
from scipy.signal import lfilter
from scipy.special import ndtr, ndtri

from solvers.processes import MAP

__all__ = ["CorrelatedService", "mmpp_runs"]

MARGINALS = ("lognormal", "pareto")


@dataclass(frozen=True)
class CorrelatedService:
    """A service-time sequence with a ``marginal`` (``"lognormal"``: ``shape`` is the SCV;
    ``"pareto"``: ``shape`` is the tail index ``alpha > 2``) of mean ``mean`` s, ordered by a
    Gaussian AR(1) copula of lag-1 coefficient ``rho`` in ``[0, 1)`` (module docstring)."""

    marginal: str
    mean: float
    shape: float
    rho: float = 0.0

    def __post_init__(self) -> None:
        if self.marginal not in MARGINALS:
            raise ValueError(f"marginal: must be one of {', '.join(MARGINALS)}, "
                             f"got {self.marginal!r}")
        if not (math.isfinite(self.mean) and self.mean > 0):
            raise ValueError(f"mean: must be a finite number > 0, got {self.mean!r}")
        low = 2.0 if self.marginal == "pareto" else 0.0
        if not (math.isfinite(self.shape) and self.shape > low):
            raise ValueError(f"shape: must be a finite number > {low:g} for a {self.marginal} "
                             f"marginal, got {self.shape!r}")
        if not (0.0 <= self.rho < 1.0):
            raise ValueError(f"rho: must lie in [0, 1), got {self.rho!r}")

    @property
    def scv(self) -> float:
        """The marginal's squared coefficient of variation (closed form)."""
        if self.marginal == "lognormal":
            return float(self.shape)
        a = self.shape
        return 1.0 / (a * (a - 2.0))

    def quantile(self, u: np.ndarray) -> np.ndarray:
        """The marginal's inverse distribution function at ``u`` in ``(0, 1)``."""
        if self.marginal == "lognormal":
            s2 = math.log1p(self.shape)
            return np.exp(math.log(self.mean) - s2 / 2 + math.sqrt(s2) * ndtri(u))
        a = self.shape
        return self.mean * (a - 1.0) / a * (1.0 - u) ** (-1.0 / a)

    def scaled(self, mean: float) -> "CorrelatedService":
        """The same shape with mean ``mean``."""
        return CorrelatedService(self.marginal, mean, self.shape, self.rho)

    def blocks(self, rng: np.random.Generator, block: int) -> Iterator[list[float]]:
        """Endless blocks of one continuous sequence (the AR state carries across blocks),
        started from the stationary law."""
        rho, inno = self.rho, math.sqrt(1.0 - self.rho ** 2)
        z = float(rng.standard_normal())
        while True:
            e = rng.standard_normal(block)
            if rho > 0:                         # the AR(1) recursion, state carried over
                zs, _ = lfilter([inno], [1.0, -rho], e, zi=[rho * z])
                z = float(zs[-1])
            else:
                zs = e
            u = np.clip(ndtr(zs), 1e-15, 1.0 - 1e-15)
            yield self.quantile(u).tolist()

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` consecutive values."""
        return np.array(next(self.blocks(rng, n)))


def mmpp_runs(mean: float, levels: Sequence[float], runs: Sequence[float],
              jumps: Sequence[Sequence[float]] | None = None) -> MAP:
    """An MMPP(k) service process of mean ``mean`` (module docstring): phase ``i`` serves with
    mean proportional to ``levels[i]``, ``runs[i]`` services per sojourn on average, and then
    jumps to phase ``j`` with probability ``jumps[i][j]`` (default: uniformly to the others)."""
    lv, rn = np.asarray(levels, float), np.asarray(runs, float)
    k = lv.size
    if k < 2 or rn.size != k or np.any(lv <= 0) or np.any(rn <= 0):
        raise ValueError(f"levels, runs: need >= 2 phases of positive levels and runs, got "
                         f"{list(levels)!r}, {list(runs)!r}")
    P = (np.ones((k, k)) - np.eye(k)) / (k - 1) if jumps is None else np.asarray(jumps, float)
    if P.shape != (k, k) or np.any(P < 0) or np.any(np.diag(P) != 0) \
            or not np.allclose(P.sum(axis=1), 1.0):
        raise ValueError(f"jumps: must be a {k}x{k} stochastic matrix with a zero diagonal, "
                         f"got {jumps!r}")
    lam = 1.0 / lv
    leave = lam / rn
    D1 = np.diag(lam)
    D0 = leave[:, None] * P - np.diag(lam + leave)
    return MAP(D0, D1).scaled(mean)
