"""Open product-form networks: Poisson arrivals per class, M/M/c (Erlang C) and delay stations.

For class arrival rates ``lambda_c`` and demands ``D_{m,c}`` the per-server utilization of
station ``m`` is ``rho_m = sum_c lambda_c D_{m,c} / c_m``. A station with ``c_m`` servers is an
M/M/c queue with offered load ``a_m = c_m rho_m``; the residence time of class ``c`` is::

    R_{m,c} = D_{m,c} (1 + C(c_m, a_m) / (c_m (1 - rho_m)))      (Erlang C, ``C(c, a)``)
            = D_{m,c} / (1 - rho_m)                              for c_m = 1
    R_{m,c} = D_{m,c}                                            for a delay station

with ``Q_{m,c} = lambda_c R_{m,c}`` (Little) and ``R_c = sum_m R_{m,c}``. For one server and
processor sharing this is the exact BCMP product form for any class mix; for ``c_m > 1`` it is
exact when the per-visit service times of the classes at that station are equal (FCFS
product form) and the standard multi-class M/M/c approximation otherwise.

Saturation (``rho_m >= 1``) gives a *flagged* result -- ``stable = False``, the stations in
``saturated_stations`` -- in which every class that visits a saturated station has
``R_{m,c} = Q_{m,c} = R_c = inf``. Quantities are ``inf``, never NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from solvers.results import (
    OpenResult,
    as_demands,
    as_per_class,
    as_rates,
    as_servers,
    check_no_nan,
    per_server_utilization,
)

__all__ = ["solve_open", "erlang_c", "saturation_rate"]


def erlang_c(servers: int, offered_load: float) -> float:
    """Erlang C: probability that an arrival waits in an M/M/c queue, ``C(c, a)``.

    ``a = lambda / mu`` is the offered load (``a = c rho``); requires ``a < c``. Computed from
    the Erlang B recursion ``B(0) = 1``, ``B(k) = a B(k-1) / (k + a B(k-1))`` and
    ``C = B / (1 - rho (1 - B))``, which is stable for any number of servers.
    """
    c = int(servers)
    if c < 1 or c != servers:
        raise ValueError(f"servers: must be a positive integer, got {servers!r}")
    a = float(offered_load)
    if not (0.0 <= a < c):
        raise ValueError(f"offered_load: must be in [0, servers), got {offered_load!r}")
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    rho = a / c
    return b / (1.0 - rho * (1.0 - b))


def saturation_rate(demands: Any, servers: Any = None, mix: Any = None) -> float:
    """Largest scale ``x`` of the arrival-rate vector ``x * mix`` before a station saturates.

    ``x_sat = min_m c_m / sum_c mix_c D_{m,c}`` (``inf`` if no finite-server station has
    demand); ``mix`` defaults to one class with rate 1 per class.
    """
    D = as_demands(demands)
    s = as_servers(servers, D.shape[0])
    w = np.ones(D.shape[1]) if mix is None else as_per_class(mix, D.shape[1], "mix")
    load = D @ w
    finite = np.isfinite(s) & (load > 0)
    if not finite.any():
        return math.inf
    return float(np.min(s[finite] / load[finite]))


def solve_open(arrival_rates: Any, demands: Any, servers: Any = None) -> OpenResult:
    """Solve an open multi-class product-form network with M/M/c and delay stations.

    Parameters
    ----------
    arrival_rates:
        ``lambda_c`` per class, requests per second, >= 0 (a scalar is one class).
    demands:
        ``D_{m,c}``, stations x classes, seconds (a vector is one class).
    servers:
        ``c_m`` per station, positive integers or ``math.inf`` (delay); default 1.

    Returns
    -------
    OpenResult
        ``X_c = lambda_c``, ``R_c``, ``R_{m,c}``, ``Q_{m,c}``, ``U_{m,c} = lambda_c D_{m,c}/c_m``.
        A class with ``lambda_c = 0`` gets the residence times one arriving job would see.
        Saturated stations are flagged and give ``inf`` (see module docstring).
    """
    lam = as_rates(arrival_rates, "arrival_rates")
    D = as_demands(demands, n_classes=lam.shape[0])
    s = as_servers(servers, D.shape[0])
    U = per_server_utilization(lam, D, s)
    rho = U.sum(axis=1)
    delay = np.isinf(s)
    saturated = (~delay) & (rho >= 1.0)
    stretch = np.ones(D.shape[0])     # R_{m,c} = D_{m,c} * stretch_m
    for m in np.flatnonzero(~delay & ~saturated):
        c = int(s[m])
        stretch[m] = 1.0 + erlang_c(c, c * rho[m]) / (c * (1.0 - rho[m]))
    Rmc = D * stretch[:, None]
    hit = saturated[:, None] & (D > 0)
    Rmc = np.where(hit, math.inf, Rmc)
    Q = np.where(hit, np.where(lam[None, :] > 0, math.inf, 0.0),
                 lam[None, :] * np.where(hit, 0.0, Rmc))
    R = Rmc.sum(axis=0)
    flags = []
    sat = tuple(int(m) for m in np.flatnonzero(saturated))
    if sat:
        flags.append(f"saturated stations {list(sat)} (utilization >= 1): response times of "
                     f"classes visiting them are inf")
    for c in np.flatnonzero(lam == 0):
        flags.append(f"class {c} has zero arrival rate: residence times are those of one "
                     f"arriving job")
    check_no_nan(residence_time=Rmc, queue_length=Q, utilization=U)
    return OpenResult(throughput=lam, response_time=R, residence_time=Rmc, queue_length=Q,
                      utilization=U, servers=s, stable=not sat, saturated_stations=sat,
                      flags=tuple(flags))
