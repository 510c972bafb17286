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

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np

from .mva import BATCH_MIN, MVACurve, assemble_curve, queueing_split
from .results import as_demands, as_per_class, as_servers

__all__ = ["general_rows", "mva_curve_general", "mva_curves_general"]


def mva_curve_general(demands: Any, max_population: int, think_time: float, servers: Any,
                      scv: Any) -> MVACurve:
    """:func:`solvers.mva.mva_curve` with each station's service SCV ``scv[m]`` (``>= 0``;
    1 is exponential and gives the same curve): the residual-life correction of the module
    docstring at every population ``0..max_population``."""
    D, c, N, Z, cv2 = _inputs(demands, max_population, think_time, servers, scv)
    queue_d, fixed, extra = queueing_split(D, c)
    M = D.shape[0]
    X, R, Rm = [0.0], [float(D.sum())], D.tolist()
    _recursion(M)(queue_d.tolist(), [0.5 * (v - 1.0) for v in cv2.tolist()], fixed, Z, N,
                  X, R, Rm)
    return assemble_curve(D, c, np.asarray(X), np.asarray(R),
                          np.array(Rm, dtype=float).reshape(-1, M), extra, False)


def mva_curves_general(demands: list[Any], max_populations: list[int],
                       think_times: list[float], servers: list[Any],
                       scvs: list[Any]) -> list[MVACurve]:
    """:func:`mva_curve_general` for many models at once, as :func:`solvers.mva.mva_curves`
    does for exponential MVA: models of the same number of stations run side by side, one
    array operation per step for all of them, each result bit for bit the curve
    :func:`mva_curve_general` gives (the same operations in the same order on each model's
    numbers; tested); groups of fewer than :data:`solvers.mva.BATCH_MIN` models use
    :func:`mva_curve_general` itself."""
    out: list[MVACurve | None] = [None] * len(demands)
    groups: dict[int, list[int]] = {}
    prepared = []
    for b, args in enumerate(zip(demands, max_populations, think_times, servers, scvs)):
        prepared.append(_inputs(*args))
        groups.setdefault(prepared[-1][0].shape[0], []).append(b)
    for M, members in groups.items():
        if len(members) < BATCH_MIN:
            for b in members:
                D, c, n, z, cv2 = prepared[b]
                out[b] = mva_curve_general(D, n, z, c, cv2)
            continue
        for b, curve in zip(members, _batched([prepared[b] for b in members], M)):
            out[b] = curve
    return out  # type: ignore[return-value]


def general_rows(demands: Any, think_time: float, servers: Any
                 ) -> Callable[[Any, int, Sequence[int]], list[np.ndarray]]:
    """One network's ``rows(scv, max_population, populations)``: the rows
    ``residence_time[n]`` of ``mva_curve_general(demands, max_population, think_time, servers,
    scv)`` at the ``populations`` asked (each in ``1..max_population``), bit for bit (tested),
    without the curve's arrays: a calibration asks one population of tens of trial curves
    that differ in the SCVs alone, so the network is checked and split once."""
    D, c, _, Z, _ = _inputs(demands, 0, think_time, servers, np.ones(np.size(demands)))
    queue_d, fixed, extra = queueing_split(D, c)
    d, M = queue_d.tolist(), D.shape[0]
    recursion = _recursion(M)

    def rows(scv: Any, max_population: int, populations: Sequence[int]) -> list[np.ndarray]:
        cv2 = [float(v) for v in np.asarray(scv, dtype=float).reshape(-1)]
        if len(cv2) != M or not all(math.isfinite(v) and v >= 0 for v in cv2):
            raise ValueError(f"scv: {M} finite numbers >= 0, got {cv2!r}")
        N = int(max_population)
        if not all(1 <= n <= max_population for n in populations):
            raise ValueError(f"populations: each in 1..{max_population}, got {populations!r}")
        h = [0.5 * (v - 1.0) for v in cv2]
        if all(n >= N - 1 for n in populations):
            # the top two rows alone: the same steps without keeping the others
            below, top = _tail_recursion(M)(d, h, fixed, Z, N)
            return [np.array(top if n == N else below, dtype=float) + extra
                    for n in populations]
        X, R, Rm = [0.0], [0.0], [0.0] * M
        recursion(d, h, fixed, Z, N, X, R, Rm)
        return [np.array(Rm[n * M:(n + 1) * M], dtype=float) + extra for n in populations]

    tail = _tail_recursion(M)

    def top_two(cv2: list[float], N: int) -> tuple[np.ndarray, np.ndarray]:
        """``rows(cv2, N, [N, N - 1])`` for SCVs already checked (finite, ``>= 0``) and ``N
        >= 2``, without checking them again: a bisection's trials differ in one SCV."""
        below, top = tail(d, [0.5 * (v - 1.0) for v in cv2], fixed, Z, N)
        return np.array(top, dtype=float) + extra, np.array(below, dtype=float) + extra

    rows.top_two = top_two                                  # type: ignore[attr-defined]
    return rows


def _inputs(demands: Any, max_population: int, think_time: float, servers: Any,
            scv: Any) -> tuple[np.ndarray, np.ndarray, int, float, np.ndarray]:
    """The checked inputs ``(D, c, N, Z, scv)``; a clear error naming the bad one."""
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
    return D, c, int(max_population), Z, cv2


_RECURSION = """
def recursion(d, h, fixed, Z, N, X, R, Rm):
    {d} = d
    {h} = h
    {q} = {zeros}
    {u} = {zeros}
    for n in range(1, N + 1):
        {r}
        total = {total} + fixed
        x = n / (Z + total) if Z + total > 0 else inf
        {q_next}
        {u_next}
        X.append(x)
        R.append(total)
        Rm.extend(({rs}))
"""


@functools.lru_cache(maxsize=64)
def _recursion(M: int) -> Callable[..., None]:
    """The recursion of the module docstring over ``n = 1..N`` for ``M`` queueing stations,
    written out with one local variable per station (compiled once per ``M``, as
    :func:`solvers.mva._recursion` is: a loop over the stations inside the loop over ``n``
    costs several times more in Python than the arithmetic): ``r_m = d_m (1 + q_m + u_m
    h_m)`` with ``h_m = (c_m^2 - 1) / 2``, ``R = sum_m r_m + fixed``, ``X = n / (Z + R)``,
    ``q_m = X r_m``, ``u_m = X d_m``. Appends ``X(n)``, ``R(n)`` to ``X, R`` and ``r_1(n) ..
    r_M(n)`` to the flat ``Rm``."""
    if M == 0:
        names = {"d": "_", "h": "_", "q": "_", "u": "_", "zeros": "0", "r": "pass",
                 "total": "0.0", "q_next": "pass", "u_next": "pass", "rs": ""}
    else:
        def each(pattern: str, sep: str = ", ") -> str:
            return sep.join(pattern.format(m=m) for m in range(M))
        names = {
            "d": each("d{m}") + ",", "h": each("h{m}") + ",", "q": each("q{m}") + ",",
            "u": each("u{m}") + ",", "zeros": each("0.0") + ",",
            "r": each("r{m} = d{m} * (1.0 + q{m} + u{m} * h{m})", "; "),
            "total": each("r{m}", " + "),
            "q_next": each("q{m} = x * r{m}", "; "),
            "u_next": each("u{m} = x * d{m}", "; "),
            "rs": each("r{m}") + ("," if M == 1 else ""),
        }
    namespace: dict[str, Any] = {"inf": math.inf}
    exec(_RECURSION.format(**names), namespace)          # noqa: S102 - generated above
    return namespace["recursion"]


_TAIL = """
def recursion(d, h, fixed, Z, N):
    {d} = d
    {h} = h
    {q} = {zeros}
    {u} = {zeros}
    {r0} = {zeros}
    for n in range(1, N + 1):
        {prev}
        {r}
        total = {total} + fixed
        x = n / (Z + total) if Z + total > 0 else inf
        {q_next}
        {u_next}
    return ({ps}), ({rs})
"""


@functools.lru_cache(maxsize=64)
def _tail_recursion(M: int) -> Callable[..., tuple[tuple[float, ...], tuple[float, ...]]]:
    """:func:`_recursion`'s steps (the same operations in the same order) keeping only the
    rows ``r_1 .. r_M`` at ``N - 1`` and ``N`` (row 0: zeros), as a calibration's trials ask:
    without appending every row."""
    if M == 0:
        names = {"d": "_", "h": "_", "q": "_", "u": "_", "r0": "_", "zeros": "0",
                 "prev": "pass", "r": "pass", "total": "0.0", "q_next": "pass",
                 "u_next": "pass", "ps": "", "rs": ""}
    else:
        def each(pattern: str, sep: str = ", ") -> str:
            return sep.join(pattern.format(m=m) for m in range(M))
        comma = "," if M == 1 else ""
        names = {
            "d": each("d{m}") + ",", "h": each("h{m}") + ",", "q": each("q{m}") + ",",
            "u": each("u{m}") + ",", "r0": each("r{m}") + ",", "zeros": each("0.0") + ",",
            "prev": each("p{m}") + " = " + each("r{m}"),
            "r": each("r{m} = d{m} * (1.0 + q{m} + u{m} * h{m})", "; "),
            "total": each("r{m}", " + "),
            "q_next": each("q{m} = x * r{m}", "; "),
            "u_next": each("u{m} = x * d{m}", "; "),
            "ps": each("p{m}") + comma, "rs": each("r{m}") + comma,
        }
    namespace: dict[str, Any] = {"inf": math.inf}
    exec(_TAIL.format(**names), namespace)               # noqa: S102 - generated above
    return namespace["recursion"]


def _batched(models: list[tuple[np.ndarray, np.ndarray, int, float, np.ndarray]],
             M: int) -> list[MVACurve]:
    """The recursion of :func:`_recursion` on ``B`` models of ``M`` stations as arrays
    ``(B, M)``; ``R(n)`` summed station by station in order, as the scalar loop does."""
    B = len(models)
    splits = [queueing_split(D, c) for D, c, _, _, _ in models]
    d = np.array([q for q, _, _ in splits]).reshape(B, M)        # queueing demands
    h = np.array([0.5 * (v - 1.0) for _, _, _, _, v in models]).reshape(B, M)
    fixed = np.array([f for _, f, _ in splits])
    Z = np.array([z for _, _, _, z, _ in models])
    N = max(n for _, _, n, _, _ in models)
    X = np.zeros((N + 1, B))
    R = np.zeros((N + 1, B))
    Rq = np.zeros((N + 1, B, M))
    q, u, t, uh, den = (np.zeros((B, M)), np.zeros((B, M)), np.empty((B, M)),
                        np.empty((B, M)), np.empty(B))
    with np.errstate(divide="ignore"):                    # Z + R = 0: X = inf, as the loop
        for n in range(1, N + 1):
            r, total, x = Rq[n], R[n], X[n]
            np.add(q, 1.0, out=t)
            np.multiply(u, h, out=uh)
            np.add(t, uh, out=t)
            np.multiply(d, t, out=r)                      # r_m = d_m (1 + q_m + u_m h_m)
            if M:
                total[:] = r[:, 0]
                for m in range(1, M):
                    total += r[:, m]                      # sum_m r_m, in station order
            total += fixed
            np.add(Z, total, out=den)
            np.divide(n, den, out=x)                      # X = n / (Z + R)
            np.multiply(x[:, None], r, out=q)             # q_m = X r_m
            np.multiply(x[:, None], d, out=u)             # u_m = X d_m
    curves = []
    for b, (D, c, n, _, _) in enumerate(models):
        Xb, Rb = X[:n + 1, b].copy(), R[:n + 1, b].copy()
        Rb[0] = float(D.sum())
        curves.append(assemble_curve(D, c, Xb, Rb, Rq[:n + 1, b].copy(), splits[b][2],
                                     False))
    return curves
