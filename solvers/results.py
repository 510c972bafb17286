"""Result types of the product-form solvers, and the input checks they share.

Notation (stations ``m = 1..M``, classes ``c = 1..C``):

* ``D_{m,c}``  service demand of class ``c`` at station ``m`` (visits x time per visit), seconds;
* ``c_m``      number of servers of station ``m`` (``math.inf`` = delay station, no queueing);
* ``N_c``      population of closed class ``c``; ``Z_c`` its think time;
* ``lambda_c`` arrival rate of open class ``c``;
* ``X_c``      class throughput; ``R_c = sum_m R_{m,c}`` class response time (think time excluded);
* ``R_{m,c}``  residence time (all visits) of class ``c`` at station ``m``;
* ``Q_{m,c}``  mean number of class-``c`` jobs at station ``m`` (waiting or in service);
* ``U_{m,c}``  utilization *per server*, ``X_c D_{m,c} / c_m`` (utilization law); at a delay
  station the mean number of jobs in service, ``X_c D_{m,c}``.

Every result is immutable (frozen dataclass, read-only arrays) and free of NaN. Quantities that
are unbounded (a saturated open station, a class that needs no time anywhere) are ``math.inf``
and the reason is listed in ``flags``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ClosedResult",
    "OpenResult",
    "as_demands",
    "as_populations",
    "as_rates",
    "as_per_class",
    "as_servers",
]


def _frozen(a: Any) -> np.ndarray:
    arr = np.array(a, dtype=float)
    arr.setflags(write=False)
    return arr


class _StationTotals:
    """Per-station totals over classes of a result's ``utilization`` and ``queue_length``."""

    utilization: np.ndarray
    queue_length: np.ndarray

    @property
    def station_utilization(self) -> np.ndarray:
        """Per-server utilization of each station, ``U_m = sum_c U_{m,c}``, shape ``(M,)``
        (offered load for an open network: it may reach 1 at a saturated station)."""
        return self.utilization.sum(axis=1)

    @property
    def station_queue_length(self) -> np.ndarray:
        """Mean number of jobs at each station, ``Q_m = sum_c Q_{m,c}`` (``inf`` at a saturated
        open station)."""
        return self.queue_length.sum(axis=1)


@dataclass(frozen=True, eq=False)
class ClosedResult(_StationTotals):
    """Solution of a closed network at population ``N`` (MVA, approximate MVA).

    Arrays: ``throughput`` ``X_c`` and ``response_time`` ``R_c`` (think time excluded), shape
    ``(C,)``; ``residence_time`` ``R_{m,c}``, ``queue_length`` ``Q_{m,c}``, ``utilization``
    ``U_{m,c}`` (per server), shape ``(M, C)``. For a class with ``N_c = 0`` the throughput and
    queue lengths are 0 and the residence times are those one class-``c`` job would meet if it
    joined the network (arrival theorem: the network seen at population ``N``).

    ``converged``/``iterations`` report the fixed-point iteration of approximate MVA (exact MVA:
    ``True`` and the number of population levels processed). ``flags`` lists degenerate cases
    (empty classes, classes with unbounded throughput, non-convergence).
    """

    throughput: np.ndarray
    response_time: np.ndarray
    residence_time: np.ndarray
    queue_length: np.ndarray
    utilization: np.ndarray
    populations: np.ndarray
    think_times: np.ndarray
    servers: np.ndarray
    method: str
    converged: bool = True
    iterations: int = 0
    flags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in ("throughput", "response_time", "residence_time", "queue_length",
                     "utilization", "populations", "think_times", "servers"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    @property
    def bottleneck(self) -> int:
        """Index of the queueing station with the highest utilization (delay stations excluded;
        ``-1`` if there is none)."""
        u = np.where(np.isinf(self.servers), -1.0, self.station_utilization)
        return int(np.argmax(u)) if np.any(np.isfinite(self.servers)) else -1


@dataclass(frozen=True, eq=False)
class OpenResult(_StationTotals):
    """Solution of an open product-form network at arrival rates ``lambda_c``.

    ``throughput`` equals the arrival rates when the network is stable. ``utilization`` is the
    *offered* per-server utilization ``lambda_c D_{m,c} / c_m`` (it may reach or exceed 1 at a
    saturated station). When a station is saturated (``sum_c U_{m,c} >= 1``) the result is
    flagged: ``stable`` is ``False``, ``saturated_stations`` lists the stations, and the
    residence times, queue lengths and response times of every class that visits such a station
    are ``math.inf`` (never NaN).
    """

    throughput: np.ndarray
    response_time: np.ndarray
    residence_time: np.ndarray
    queue_length: np.ndarray
    utilization: np.ndarray
    servers: np.ndarray
    stable: bool
    saturated_stations: tuple[int, ...] = ()
    flags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in ("throughput", "response_time", "residence_time", "queue_length",
                     "utilization", "servers"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))


# --------------------------------------------------------------------------------------------
# input checks shared by mva, open, bounds and capacity (ValueError naming the argument)
# (ndarray.any/.all, not np.any/np.all: the same answer without the dispatch, which costs
# more than the check on a few stations)
# --------------------------------------------------------------------------------------------

def _as_float_array(value: Any, name: str) -> np.ndarray:
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not numeric ({value!r}: {exc})") from None
    if np.isnan(arr).any():
        raise ValueError(f"{name}: contains NaN ({value!r})")
    return arr


def as_demands(value: Any, n_classes: int | None = None, name: str = "demands") -> np.ndarray:
    """Demands ``D_{m,c}`` as a finite, non-negative ``(M, C)`` float array.

    A 1-D input is read as one class (``(M,) -> (M, 1)``) when ``n_classes`` is ``None`` or 1.
    """
    arr = _as_float_array(value, name)
    if arr.ndim == 1 and (n_classes is None or n_classes == 1):
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name}: must be a non-empty stations x classes matrix, "
                         f"got shape {arr.shape}")
    if n_classes is not None and arr.shape[1] != n_classes:
        raise ValueError(f"{name}: has {arr.shape[1]} classes (columns), expected {n_classes}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: contains infinite values ({value!r})")
    if (arr < 0).any():
        raise ValueError(f"{name}: must be >= 0, got {arr[arr < 0][0]!r}")
    return arr


def _check_finite_nonnegative(arr: np.ndarray, value: Any, name: str) -> None:
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: must be finite, got {value!r}")
    if (arr < 0).any():
        raise ValueError(f"{name}: must be >= 0, got {arr[arr < 0][0]!r}")


def _as_nonempty_vector(value: Any, name: str) -> np.ndarray:
    """A 1-D float vector (a scalar is one class), non-empty."""
    arr = _as_float_array(value, name)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(f"{name}: must be a non-empty vector, got shape {arr.shape}")
    return arr


def as_per_class(value: Any, n_classes: int, name: str) -> np.ndarray:
    """A finite, non-negative per-class vector of length ``C`` (a scalar is broadcast)."""
    arr = _as_float_array(value, name)
    if arr.ndim == 0:
        arr = np.full(n_classes, float(arr))
    if arr.ndim != 1 or arr.shape[0] != n_classes:
        raise ValueError(f"{name}: must have one value per class ({n_classes}), "
                         f"got shape {arr.shape}")
    _check_finite_nonnegative(arr, value, name)
    return arr


def as_rates(value: Any, name: str = "arrival_rates") -> np.ndarray:
    """A non-empty, finite, non-negative 1-D float vector (a scalar is one class)."""
    arr = _as_nonempty_vector(value, name)
    _check_finite_nonnegative(arr, value, name)
    return arr


def as_populations(value: Any, name: str = "populations") -> np.ndarray:
    """Populations ``N_c`` as a 1-D int64 array (non-negative integers; a scalar is one class)."""
    arr = _as_nonempty_vector(value, name)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: must be finite, got {value!r}")
    if (arr < 0).any() or (arr != arr.round()).any():
        raise ValueError(f"{name}: must be non-negative integers, got {value!r}")
    if (arr > 2**31).any():
        raise ValueError(f"{name}: unreasonably large population {value!r}")
    return arr.astype(np.int64)


def as_servers(value: Any, n_stations: int, name: str = "servers") -> np.ndarray:
    """Servers ``c_m`` per station: positive integers, or ``math.inf`` for a delay station.

    ``None`` means one server everywhere. Returned as a float array (so ``inf`` fits).
    """
    if value is None:
        return np.ones(n_stations)
    arr = _as_float_array(value, name)
    if arr.ndim == 0:
        arr = np.full(n_stations, float(arr))
    if arr.ndim != 1 or arr.shape[0] != n_stations:
        raise ValueError(f"{name}: must have one value per station ({n_stations}), "
                         f"got shape {arr.shape}")
    finite = np.isfinite(arr)
    bad = (arr < 1) | (finite & (arr != arr.round())) | (np.isinf(arr) & (arr < 0))
    if bad.any():
        raise ValueError(f"{name}: must be positive integers or math.inf (delay station), "
                         f"got {value!r}")
    return arr


def check_no_nan(**arrays: Any) -> None:
    """Internal guard: a solver must never return NaN (raise loudly if it would)."""
    for name, a in arrays.items():
        if np.any(np.isnan(np.asarray(a, dtype=float))):
            raise FloatingPointError(f"internal error: {name} contains NaN")


def is_delay(servers: np.ndarray) -> np.ndarray:
    """Boolean mask of delay stations (``c_m = inf``)."""
    return np.isinf(servers)


def per_server_utilization(rate: np.ndarray, demands: np.ndarray,
                           servers: np.ndarray) -> np.ndarray:
    """Utilization law ``U_{m,c} = X_c D_{m,c} / c_m`` (``X_c D_{m,c}`` at delay stations).

    ``rate`` entries may be ``inf`` only where the class has zero demand; ``inf * 0`` is 0.
    """
    div = np.where(np.isinf(servers), 1.0, servers)[:, None]
    with np.errstate(invalid="ignore"):
        u = rate[None, :] * demands / div
    return np.where(demands == 0, 0.0, u)

