"""Single-class MVA with general service times at FCFS stations: the residual-life correction.

Exact MVA's arrival theorem gives the mean residence ``R_m(n) = D_m (1 + Q_m(n-1))``: each of
the ``Q_m(n-1)`` jobs an arrival finds costs it one full service. That holds for exponential
service, whose residual life equals its mean. Under a general service time of squared
coefficient of variation ``c^2`` the job in service (present with probability ``U_m(n-1)``)
has the mean residual ``S (1 + c^2) / 2`` instead of ``S`` (the renewal paradox). Reiser (1979)
and Lazowska et al. (1984, ch. 8) write the approximate MVA for an FCFS station with general
service as::

    R_m(n) = D_m (1 + Q_m(n-1) - U_m(n-1)) + D_m U_m(n-1) (1 + c_m^2) / 2
           = D_m (1 + Q_m(n-1)) + D_m U_m(n-1) (c_m^2 - 1) / 2

with ``U_m(n-1) = X(n-1) D_m`` (per visit and per request alike: the visits multiply both
sides). Under Poisson arrivals its fixed point is the Pollaczek-Khinchine mean of M/G/1,
``R = S (1 + rho (c^2 - 1) / 2) / (1 - rho)`` (Kleinrock 1975), and at ``c^2 = 1`` it is exact
MVA. A station of ``c`` cores takes Seidmann's approximation as :func:`solvers.mva.mva_curve`
does (a single server of demand ``D/c`` queueing, ``D (c-1)/c`` delay) with the correction on
the queueing part: its wait is the exponential one times ``(1 + c^2)/2`` at heavy load, the
M/G/c approximation of Lee and Longton (1959).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .mva import MVACurve, _assemble_curve, _queueing_split
from .results import as_demands, as_per_class, as_servers

__all__ = ["mva_curve_general"]


def mva_curve_general(demands: Any, max_population: int, think_time: float, servers: Any,
                      scv: Any) -> MVACurve:
    """:func:`solvers.mva.mva_curve` with each station's service SCV ``scv[m]`` (``>= 0``;
    1 is exponential and gives the same curve): the residual-life correction of the module
    docstring at every population ``0..max_population``."""
    D = as_demands(demands, n_classes=1)[:, 0]
    c = as_servers(servers, D.shape[0])
    if isinstance(max_population, bool) or not isinstance(max_population, (int, np.integer)) \
            or max_population < 0:
        raise ValueError(f"max_population: must be an integer >= 0, got {max_population!r}")
    cv2 = np.asarray(scv, dtype=float).reshape(-1)
    if cv2.shape[0] != D.shape[0]:
        raise ValueError(f"scv: one per station ({D.shape[0]}), got {cv2.shape[0]}")
    bad = ~(np.isfinite(cv2) & (cv2 >= 0))
    if bad.any():
        m = int(np.flatnonzero(bad)[0])
        raise ValueError(f"scv: station {m} must be a finite number >= 0, got {cv2[m]!r}")
    Z = float(as_per_class(think_time, 1, "think_times")[0])
    queue_d, fixed, extra = _queueing_split(D, c)
    d = queue_d.tolist()
    h = [0.5 * (v - 1.0) for v in cv2.tolist()]
    M = len(d)
    q = [0.0] * M
    u = [0.0] * M
    X, R, Rm = [0.0], [float(D.sum())], [D.tolist()]
    for n in range(1, int(max_population) + 1):
        r = [d[m] * (1.0 + q[m] + u[m] * h[m]) for m in range(M)]
        total = sum(r) + fixed
        x = n / (Z + total) if Z + total > 0 else math.inf
        q = [x * rm for rm in r]
        u = [x * dm for dm in d]
        X.append(x)
        R.append(total)
        Rm.append(r)
    return _assemble_curve(D, c, np.asarray(X), np.asarray(R),
                           np.array(Rm, dtype=float).reshape(-1, M), extra, False)
