"""The capacity the predicted-breach alert acts on: the SLA read on the mean response time of
a short window, not only on the long-run mean.

An SLA is watched on a window's mean -- ``rate(sum[5m]) / rate(count[5m])`` -- and the mean
of a bursty tier's services over five minutes moves around its long-run value: the slow runs
of a MAP(2) (Mi et al. 2008) come in counts that vary from window to window. The long-run model
(:mod:`streams.predict.model`) answers for the long-run mean; near its capacity the window
means cross the SLA before it does.

**The window's mean service time.** For a stationary service-time sequence with mean ``E[S]``
and index of dispersion ``I = SCV (1 + 2 sum_k rho_k)`` (Mi et al. 2008, eq. 1, the quantity the
tier's estimator reads), the sum of ``n`` consecutive services has ``Var -> n E[S]^2 I``, so
the mean of the ``n_m`` services tier ``m`` completes in a window of ``W`` seconds has the
relative standard deviation

    sigma_m = sqrt(I_m / n_m),    n_m = X(N) Vbar_m W

(``X(N)`` the model's throughput at ``N`` users, ``Vbar_m`` the mix-weighted visits; valid
once the window holds many bursts, as a 5-minute window does for bursts of seconds).

**The window's response time.** A window whose services at ``m`` run ``f_m`` times slower
behaves like the long-run model with ``D_m`` times ``f_m`` (quasi-static: a network's queues
settle in seconds, far within the window; the model already holds the burstiness inside it).

**The quantile.** The horizon ``H`` holds ``k = H / W`` disjoint windows. The alert fires
when some window within the horizon breaches with probability ``p``
(``window_breach_probability``): each window with ``q = 1 - (1 - p)^(1/k)``, so the demand
factor is ``f_m = 1 + z sigma_m`` with ``z = Phi^-1(1 - q)`` (windows taken as independent).
The *window capacity* is the largest ``N`` whose every class meets its SLA with the factors
applied. An exponential tier at hundreds of requests per second has ``sigma`` of a fraction
of a percent: factors below :data:`MIN_EXCESS` are not solved for (the window capacity is the
long-run one).
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Sequence

import numpy as np

from streams.predict.model import Point, SystemModel, model_capacity

__all__ = ["MIN_EXCESS", "quantile_z", "window_factors", "window_capacity", "is_material"]

#: a window factor ``f_m - 1`` below this on every tier leaves the long-run capacity
MIN_EXCESS = 0.01


def quantile_z(window_s: float, horizon_s: float, probability: float) -> float:
    """``z = Phi^-1(1 - q)``, ``q = 1 - (1 - p)^(W / H)`` (module docstring); the horizon
    holds at least one window."""
    if not (window_s > 0 and 0 < probability < 1):
        raise ValueError(f"window_s must be > 0 and probability in (0, 1), got {window_s!r}, "
                         f"{probability!r}")
    windows = max(horizon_s / window_s, 1.0)
    per_window = 1.0 - (1.0 - probability) ** (1.0 / windows)
    return NormalDist().inv_cdf(1.0 - per_window)


def window_factors(model: SystemModel, idc: Sequence[float | None], at: Point,
                   window_s: float, z: float) -> np.ndarray:
    """Per tier ``f_m = 1 + z sqrt(I_m / n_m)`` at the model's point ``at`` (module
    docstring); ``idc[m]`` the tier's ``I`` (``None``: unknown, read as 1, a Poisson
    sequence's). ``z <= 0`` or no throughput gives 1 everywhere."""
    V = np.ones_like(model.D_mc) if model.visits is None else model.visits
    completions = float(at.throughput) * (V @ model.mix) * window_s
    I = np.array([1.0 if i is None else max(float(i), 0.0) for i in idc])
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.where(completions > 0, np.sqrt(I / completions), 0.0)
    return 1.0 + max(z, 0.0) * sigma


def window_capacity(model: SystemModel, factors: np.ndarray,
                    warm: int | None = None) -> tuple[int | None, bool]:
    """The largest population whose every class meets its SLA with tier ``m``'s demands
    times ``factors[m]`` (:func:`streams.predict.model.model_capacity` on the scaled model;
    ``warm`` as there)."""
    scaled = model.variant(D_mc=model.D_mc * np.asarray(factors, dtype=float)[:, None])
    return model_capacity(scaled, warm)


def is_material(factors: np.ndarray) -> bool:
    """Whether some tier's factor exceeds ``1 + MIN_EXCESS``."""
    return bool(np.max(factors, initial=1.0) > 1.0 + MIN_EXCESS) and bool(
        np.all(np.isfinite(factors)))
