"""Performance bounds of single-class (aggregate) networks: asymptotic and balanced job bounds.

Notation (Lazowska, Zahorjan, Graham, Sevcik, *Quantitative System Performance*, 1984, ch. 5):
``D_m`` demand at station ``m``; ``D = sum_m D_m`` over the queueing stations;
``D_max = max_m D_m / c_m`` (the *bottleneck* station has the largest per-server demand);
``D_avg = D / K`` over the ``K`` queueing stations with positive demand; ``Z`` think time. Delay
stations (``c_m = inf``) add to the response time but never queue: their demand ``D_d`` is
treated like think time in the throughput bounds and added back to the response time
(``R = N / X - Z``).

Closed network, population ``N`` (asymptotic bounds, QSP Table 5.1; balanced job bounds with
think time, QSP Table 5.3 / Zahorjan et al. 1982)::

    N / (N D + Z)                                   <= X(N) <= min(1/D_max, N / (D + Z))
    N / (D + Z + (N-1) D_max / (1 + Z/(N D)))       <= X(N) <= N / (D + Z + (N-1) D_avg / (1 + Z/D))

and the response-time bounds follow from ``R(N) = N/X(N) - Z``. The knee of the asymptotes is
``N* = (D + Z) / D_max``.

Multi-server stations: replacing a ``c``-server station by one server of demand ``D_m``
(slower) gives a pessimistic network and by one server of demand ``D_m/c`` (faster) an
optimistic one; the lower bounds use the first, the upper bounds the second. For one server
everywhere this is the textbook case.

Open network, arrival rate ``lambda < 1/D_max`` (QSP Table 5.2, same replacement)::

    D_d + max(D, D'/(1 - lambda D'_avg))  <=  R(lambda)  <=  D_d + D / (1 - lambda D_max)

with ``D' = sum_m D_m/c_m``. At ``lambda >= 1/D_max`` the upper bound is ``inf``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .results import as_demands, as_rates, as_servers

__all__ = [
    "ClosedBounds",
    "OpenBounds",
    "aggregate_demands",
    "bottleneck",
    "knee",
    "asymptotic_bounds",
    "balanced_bounds",
    "open_bounds",
]


@dataclass(frozen=True, eq=False)
class ClosedBounds:
    """Bounds on ``X(N)`` and ``R(N)`` (think time excluded), one entry per population."""

    populations: np.ndarray
    throughput_lower: np.ndarray
    throughput_upper: np.ndarray
    response_lower: np.ndarray
    response_upper: np.ndarray
    bottleneck: int
    n_star: float
    kind: str

    def __post_init__(self) -> None:
        for name in ("populations", "throughput_lower", "throughput_upper", "response_lower",
                     "response_upper"):
            arr = np.array(getattr(self, name), dtype=float)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)


@dataclass(frozen=True, eq=False)
class OpenBounds:
    """Bounds on the response time ``R(lambda)`` of an open single-class network."""

    arrival_rates: np.ndarray
    saturation_rate: float
    response_lower: np.ndarray
    response_upper: np.ndarray
    bottleneck: int

    def __post_init__(self) -> None:
        for name in ("arrival_rates", "response_lower", "response_upper"):
            arr = np.array(getattr(self, name), dtype=float)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)


@dataclass(frozen=True, eq=False)
class _Aggregate:
    D_slow: np.ndarray   # queueing stations, one server of demand D_m (pessimistic)
    D_fast: np.ndarray   # queueing stations, one server of demand D_m / c_m (optimistic)
    D_delay: float       # total demand at delay stations
    bottleneck: int      # index in the original station order (-1 if none)


def _single_class(demands: Any, servers: Any) -> _Aggregate:
    D = as_demands(demands)
    if D.shape[1] != 1:
        raise ValueError(f"demands: bounds are single-class, got {D.shape[1]} classes; "
                         f"aggregate them with aggregate_demands()")
    d = D[:, 0]
    s = as_servers(servers, d.shape[0])
    queue = np.isfinite(s)
    per_server = np.where(queue, d / np.where(queue, s, 1.0), -1.0)
    b = int(np.argmax(per_server)) if queue.any() and per_server.max() > 0 else -1
    return _Aggregate(D_slow=d[queue], D_fast=(d / np.where(queue, s, 1.0))[queue],
                      D_delay=float(d[~queue].sum()), bottleneck=b)


def _as_think(think_time: Any) -> float:
    try:
        z = float(think_time)
    except (TypeError, ValueError):
        raise ValueError(f"think_time: must be a number, got {think_time!r}") from None
    if not (math.isfinite(z) and z >= 0):
        raise ValueError(f"think_time: must be finite and >= 0, got {think_time!r}")
    return z


def _as_pops(populations: Any) -> np.ndarray:
    arr = as_rates(populations, "populations")
    if np.any(arr != np.round(arr)):
        raise ValueError(f"populations: must be non-negative integers, got {populations!r}")
    return arr


def aggregate_demands(demands: Any, weights: Any) -> np.ndarray:
    """Single-class demands ``D_m = sum_c w_c D_{m,c} / sum_c w_c`` of a class mix.

    ``weights`` are per-class shares of the requests (e.g. throughputs or populations).
    """
    D = as_demands(demands)
    w = as_rates(weights, "weights")
    if w.shape[0] != D.shape[1]:
        raise ValueError(f"weights: need one per class ({D.shape[1]}), got {w.shape[0]}")
    if w.sum() <= 0:
        raise ValueError(f"weights: must not all be zero, got {weights!r}")
    return D @ w / w.sum()


def bottleneck(demands: Any, servers: Any = None) -> int:
    """Index of the station with the largest per-server demand ``D_m/c_m`` (``-1``: none)."""
    return _single_class(demands, servers).bottleneck


def knee(demands: Any, think_time: Any = 0.0, servers: Any = None) -> float:
    """``N* = (D + Z) / D_max``: the population where the throughput asymptotes cross.

    Below ``N*`` the network is think-time bound, above it bottleneck bound (QSP §5.2).
    ``inf`` when no queueing station has demand.
    """
    agg = _single_class(demands, servers)
    z = _as_think(think_time) + agg.D_delay
    dmax = float(agg.D_fast.max()) if agg.D_fast.size else 0.0
    return math.inf if dmax == 0 else (float(agg.D_slow.sum()) + z) / dmax


def _closed(agg: _Aggregate, z: float, N: np.ndarray, x_lo: np.ndarray, x_up: np.ndarray,
            kind: str) -> ClosedBounds:
    zt = z + agg.D_delay
    d_all = float(agg.D_slow.sum()) + agg.D_delay
    with np.errstate(divide="ignore", invalid="ignore"):
        r_lo = np.where(N > 0, N / x_up - z, d_all)
        r_up = np.where(N > 0, N / x_lo - z, d_all)
    r_lo = np.where(np.isfinite(x_up), np.maximum(r_lo, d_all), d_all)
    r_up = np.where(np.isfinite(x_lo), np.maximum(r_up, d_all), d_all)
    dmax = float(agg.D_fast.max()) if agg.D_fast.size else 0.0
    n_star = math.inf if dmax == 0 else (float(agg.D_slow.sum()) + zt) / dmax
    return ClosedBounds(populations=N, throughput_lower=x_lo, throughput_upper=x_up,
                        response_lower=r_lo, response_upper=r_up, bottleneck=agg.bottleneck,
                        n_star=n_star, kind=kind)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num/den`` with ``0/0 = 0`` and ``x/0 = inf`` (no NaN)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    return np.where(num == 0, 0.0, np.where(den == 0, math.inf, out))


def _aba_throughput(agg: _Aggregate, zt: float, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    D = float(agg.D_slow.sum())
    dmax = float(agg.D_fast.max()) if agg.D_fast.size else 0.0
    x_lo = _ratio(N, N * D + zt)
    x_up = np.minimum(_ratio(N, np.full_like(N, D + zt)), math.inf if dmax == 0 else 1 / dmax)
    return x_lo, x_up


def asymptotic_bounds(demands: Any, think_time: Any, populations: Any,
                      servers: Any = None) -> ClosedBounds:
    """Asymptotic bounds (QSP Table 5.1) on ``X(N)`` and ``R(N)`` for each ``N``.

    ``demands`` single-class ``D_m`` (stations,); ``populations`` a scalar or a vector of ``N``.
    """
    agg = _single_class(demands, servers)
    z = _as_think(think_time)
    N = _as_pops(populations)
    x_lo, x_up = _aba_throughput(agg, z + agg.D_delay, N)
    return _closed(agg, z, N, x_lo, x_up, "asymptotic")


def _bjb_lower(Dq: np.ndarray, zt: float, N: np.ndarray) -> np.ndarray:
    D = float(Dq.sum())
    if D == 0:
        return _ratio(N, np.full_like(N, zt))
    dmax = float(Dq.max())
    n1 = np.maximum(N - 1, 0)
    return _ratio(N, D + zt + n1 * dmax / (1 + _ratio(np.full_like(N, zt), N * D)))


def _bjb_upper(Dq: np.ndarray, zt: float, N: np.ndarray) -> np.ndarray:
    D = float(Dq.sum())
    if D == 0:
        return _ratio(N, np.full_like(N, zt))
    davg = D / int(np.count_nonzero(Dq))
    n1 = np.maximum(N - 1, 0)
    return _ratio(N, D + zt + n1 * davg / (1 + zt / D))


def balanced_bounds(demands: Any, think_time: Any, populations: Any,
                    servers: Any = None) -> ClosedBounds:
    """Balanced job bounds with think time (QSP Table 5.3), intersected with the asymptotic
    bounds, on ``X(N)`` and ``R(N)`` for each ``N``. Tighter than :func:`asymptotic_bounds`
    around the knee ``N*``.
    """
    agg = _single_class(demands, servers)
    z = _as_think(think_time)
    zt = z + agg.D_delay
    N = _as_pops(populations)
    a_lo, a_up = _aba_throughput(agg, zt, N)
    x_lo = np.maximum(a_lo, _bjb_lower(agg.D_slow, zt, N))
    x_up = np.minimum(a_up, _bjb_upper(agg.D_fast, zt, N))
    return _closed(agg, z, N, x_lo, x_up, "balanced")


def open_bounds(demands: Any, arrival_rates: Any, servers: Any = None) -> OpenBounds:
    """Bounds on the response time of an open single-class network (QSP Table 5.2).

    ``saturation_rate = 1/D_max``; at or beyond it the upper bound is ``inf``.
    """
    agg = _single_class(demands, servers)
    lam = as_rates(arrival_rates, "arrival_rates")
    D = float(agg.D_slow.sum())
    Dp = float(agg.D_fast.sum())
    dmax = float(agg.D_fast.max()) if agg.D_fast.size else 0.0
    k = int(np.count_nonzero(agg.D_fast))
    sat = math.inf if dmax == 0 else 1.0 / dmax
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(lam * dmax < 1, D / (1 - lam * dmax), math.inf)
        davg = Dp / k if k else 0.0
        lo_bal = np.where(lam * davg < 1, Dp / (1 - lam * davg), math.inf)
    up = np.where(D == 0, 0.0, up)
    lo = np.maximum(D, np.where(Dp == 0, 0.0, lo_bal))
    lo = np.where(lam * dmax >= 1, math.inf, lo)
    return OpenBounds(arrival_rates=lam, saturation_rate=sat, response_lower=lo + agg.D_delay,
                      response_upper=up + agg.D_delay, bottleneck=agg.bottleneck)
