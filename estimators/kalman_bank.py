"""Many Kalman demand filters stepped together: Huang et al. (2012), eqs. (4)-(6), vectorised over
tiers.

A monitoring pipeline keeps one :class:`~estimators.demand.KalmanDemandEstimator` per tier and
receives the windows of many tiers at once. Stepped one by one, a filter costs some twenty-five
numpy calls per window whatever the size of its arrays: the call overhead, not the arithmetic,
is the cost. The filters are independent, so :func:`update_many` steps them together, one
window of each filter per step, with the same equations on stacked arrays (``K`` filters of
``n`` classes: ``x`` ``(K, n)``, ``P`` ``(K, n, n)``) and the per-filter branches of
:meth:`~estimators.demand.KalmanDemandEstimator.update` as masks:

* an idle window (``H = 0``) gets the time update (6.b) only;
* the innovation gate re-opens ``P^-`` by ``diag(x^2)`` (change detection);
* a degenerate correction (``H P^- H^T + R`` not > 0, or a non-finite result) leaves the
  predicted state;
* a negative demand is projected onto ``x >= 0`` in the metric of ``P`` (rare: done per filter
  with the scalar filter's own projection);
* ``Q`` from the largest change since the filter settled, clamped (floor, cap).

The result is :meth:`~estimators.demand.KalmanDemandEstimator.update` applied window by window
to each filter, to round-off (sums are taken in another order; ``tests/test_kalman_bank.py``
checks 1e-12), and every filter is left in that state. A filter that is not initialised yet
takes its windows through ``update`` itself until it is (the first informative window of its
life). Every row's arithmetic is the same whatever the other rows are, so the result does not
depend on which filters are stepped together.

Inputs are trusted (this is the inner loop): utilizations in [0, 1], throughputs finite and 0
or within ``[1e-9, 1e9]`` per second, aligned with each filter's classes -- what
:meth:`~estimators.demand.KalmanDemandEstimator.update` would accept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from estimators.demand import INNOVATION_MEMORY, SKIP_DEGENERATE, SKIP_IDLE, KalmanDemandEstimator

__all__ = ["Steps", "update_many"]

#: skip-reason codes of :attr:`Steps.code`
UPDATED, IDLE, DEGENERATE, OTHER = 0, 1, 2, 3
_REASONS = {UPDATED: None, IDLE: SKIP_IDLE, DEGENERATE: SKIP_DEGENERATE}


@dataclass
class Steps:
    """What :meth:`~estimators.demand.KalmanDemandEstimator.update` left after each window of
    one filter: ``x`` demands and ``variance`` ``diag(P)``, ``(windows, n)``; ``code`` per window
    (:data:`UPDATED`, :data:`IDLE`, :data:`DEGENERATE`, or :data:`OTHER` with the text in
    ``reasons``); ``change_detected`` per window; ``residual`` per window the one-step-ahead
    prediction residual ``z_k - H_k x_{k-1}`` of the demands in force before it (NaN while
    every demand is 0: no estimate yet)."""

    x: np.ndarray
    variance: np.ndarray
    code: np.ndarray
    change_detected: np.ndarray
    residual: np.ndarray
    reasons: dict[int, str]

    def skip_reason(self, s: int) -> str | None:
        """The filter's ``skip_reason`` after window ``s`` (``None``: it was updated)."""
        code = int(self.code[s])
        return self.reasons[s] if code == OTHER else _REASONS[code]

    def skip_reasons(self) -> list[str | None]:
        """:meth:`skip_reason` of every window."""
        return [self.reasons[s] if code == OTHER else _REASONS[code]
                for s, code in enumerate(self.code.tolist())]


def update_many(filters: Sequence[KalmanDemandEstimator],
                utilization: Sequence[np.ndarray], throughputs: Sequence[np.ndarray],
                cores: Sequence[np.ndarray],
                response_times: Sequence[Sequence[np.ndarray | None] | None] | None = None,
                ) -> list[Steps]:
    """Feed each filter ``k`` its windows ``s = 0, 1, ...``: ``utilization[k][s]`` (``U``),
    ``throughputs[k][s]`` (``X`` per class, a row aligned with the filter's classes),
    ``cores[k][s]``, and optionally ``response_times[k][s]`` (used only to initialise
    ``x_0 = rt (1 - U)``, as ``update`` does). Equivalent to ``filters[k].cores = cores[k][s];
    filters[k].update(utilization[k][s], throughputs[k][s], response_times[k][s])`` for every
    window in order; returns per filter what each window left (:class:`Steps`)."""
    out: list[Steps | None] = [None] * len(filters)
    groups: dict[int, list[tuple[int, int]]] = {}
    for k, f in enumerate(filters):
        U, H = utilization[k], throughputs[k]
        count = len(U)
        n = len(f.classes)
        steps = Steps(np.empty((count, n)), np.empty((count, n)),
                      np.zeros(count, dtype=np.int8), np.zeros(count, dtype=bool),
                      np.empty(count), {})
        out[k] = steps
        s = 0
        rts = response_times[k] if response_times is not None else None
        while s < count and not f.initialised:          # once in a filter's life: the scalar path
            f.cores = float(cores[k][s])
            steps.residual[s] = float(U[s]) * f.cores - float((H[s] * f.x).sum()) \
                if (f.x > 0.0).any() else np.nan
            f.update(float(U[s]), H[s], None if rts is None else rts[s])
            _record_scalar(f, steps, s)
            s += 1
        if s < count:
            groups.setdefault(n, []).append((k, s))
    for members in groups.values():
        _step_group([filters[k] for k, _ in members], [out[k] for k, _ in members],
                    [utilization[k][s:] for k, s in members], [throughputs[k][s:] for k, s in members],
                    [cores[k][s:] for k, s in members], [s for _, s in members])
    return out  # type: ignore[return-value]


def _record_scalar(f: KalmanDemandEstimator, steps: Steps, s: int) -> None:
    steps.x[s] = f.x
    steps.variance[s] = np.diagonal(f.P)
    steps.change_detected[s] = f.change_detected
    reason = f.skip_reason if f.skipped else None
    code = next((c for c, r in _REASONS.items() if r == reason), OTHER)
    steps.code[s] = code
    if code == OTHER:
        steps.reasons[s] = str(reason)


class _Stack:
    """The state of ``K`` filters of ``n`` classes as stacked arrays (gathered, then scattered
    back)."""

    def __init__(self, filters: list[KalmanDemandEstimator]) -> None:
        self.x = np.array([f.x for f in filters], dtype=float)
        self.P = np.array([f.P for f in filters], dtype=float)
        self.xi = np.array([f.xi for f in filters], dtype=float)
        self.innovation = np.array([f.innovation for f in filters], dtype=float)
        self.innovation_var = np.array([f.innovation_var for f in filters], dtype=float)
        self.R = np.array([f.R for f in filters], dtype=float)
        self.adaptive = np.array([f.adaptive_R for f in filters], dtype=bool)
        self.floor2 = np.array([f.q_floor * f.q_floor for f in filters], dtype=float)
        self.cap2 = np.array([f.q_cap * f.q_cap for f in filters], dtype=float)
        self.gate = np.array([f.gate for f in filters], dtype=float)
        self.settle = np.array([f.settle for f in filters], dtype=np.int64)
        self.since_reset = np.array([f.windows_since_reset for f in filters], dtype=np.int64)
        self.n_updates = np.array([f.n_updates for f in filters], dtype=np.int64)
        self.n_skipped = np.array([f.n_skipped for f in filters], dtype=np.int64)
        self.n_changes = np.array([f.n_changes for f in filters], dtype=np.int64)
        self.change = np.array([f.change_detected for f in filters], dtype=bool)
        self.clipped = np.array([f.clipped for f in filters], dtype=bool)
        self.code = np.zeros(len(filters), dtype=np.int8)
        self.touched = np.zeros(len(filters), dtype=bool)   # stepped at least once

    def scatter(self, filters: list[KalmanDemandEstimator]) -> None:
        for j, f in enumerate(filters):
            f.x, f.P, f.xi = self.x[j].copy(), self.P[j].copy(), self.xi[j].copy()
            f.innovation = float(self.innovation[j])
            f.innovation_var = float(self.innovation_var[j])
            f.windows_since_reset = int(self.since_reset[j])
            f.n_updates, f.n_skipped = int(self.n_updates[j]), int(self.n_skipped[j])
            f.n_changes = int(self.n_changes[j])
            f.change_detected, f.clipped = bool(self.change[j]), bool(self.clipped[j])
            if self.touched[j]:
                code = int(self.code[j])
                f.skipped = code != UPDATED
                f.skip_reason = _REASONS[code]


def _step_group(filters: list[KalmanDemandEstimator], steps: list[Steps],
                U: list[np.ndarray], H: list[np.ndarray], cores: list[np.ndarray],
                offsets: list[int]) -> None:
    """Filters of one class count, stepped together; longest sequences first so that the
    filters still stepping at step ``s`` are a prefix (``[:m]``: views, no copies)."""
    order = sorted(range(len(filters)), key=lambda j: -len(U[j]))
    filters = [filters[j] for j in order]
    steps = [steps[j] for j in order]
    U, H, cores, offsets = ([seq[j] for j in order] for seq in (U, H, cores, offsets))
    K, n = len(filters), len(filters[0].classes)
    lengths = np.array([len(u) for u in U])
    S = int(lengths[0])
    Z = np.zeros((S, K))
    Hs = np.zeros((S, K, n))
    for j in range(K):
        L = lengths[j]
        Z[:L, j] = np.asarray(U[j], dtype=float) * np.asarray(cores[j], dtype=float)
        Hs[:L, j] = H[j]
    active = (lengths[None, :] > np.arange(S)[:, None]).sum(axis=1)
    st = _Stack(filters)
    XS, VS = np.empty((S, K, n)), np.empty((S, K, n))
    CS, DS = np.empty((S, K), dtype=np.int8), np.empty((S, K), dtype=bool)
    RS = np.empty((S, K))
    diag = st.P.reshape(K, n * n)[:, :: n + 1]          # view of every diag(P)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for s in range(S):
            m = int(active[s])
            RS[s, :m] = _step(st, diag, m, Z[s, :m], Hs[s, :m])
            XS[s, :m] = st.x[:m]
            VS[s, :m] = diag[:m]
            CS[s, :m] = st.code[:m]
            DS[s, :m] = st.change[:m]
    st.scatter(filters)
    for j, f in enumerate(filters):
        L, o = int(lengths[j]), offsets[j]
        f.cores = float(cores[j][L - 1])
        out = steps[j]
        out.x[o:o + L], out.variance[o:o + L] = XS[:L, j], VS[:L, j]
        out.code[o:o + L], out.change_detected[o:o + L] = CS[:L, j], DS[:L, j]
        out.residual[o:o + L] = RS[:L, j]


def _step(st: _Stack, diag: np.ndarray, m: int, z: np.ndarray, h: np.ndarray) -> np.ndarray:
    """One window of each of the first ``m`` filters (module docstring); returns each one's
    residual ``z - H x^-`` (NaN: every demand 0)."""
    x, P, xi, ivar = st.x[:m], st.P[:m], st.xi[:m], st.innovation_var[:m]
    d = diag[:m]
    n = x.shape[1]
    idle = ~(h.max(axis=1) > 0.0)
    # time update (6.b), every filter (an idle window gets only this): P^- = P + Q_k with
    # Q_k = diag(xi) clamped to [q_floor s, q_cap s]^2, s = max(x, mean(x) / 10)
    scale = np.maximum(x, 0.1 * x.sum(axis=1, keepdims=True) / n)
    scale *= scale
    q = np.maximum(xi, st.floor2[:m, None] * scale)
    d += np.fmin(q, st.cap2[:m, None] * scale)        # fmin: an infinite cap (inf * 0) is no cap
    # measurement update (6.c-6.e), filters with completions
    PHt = (P * h[:, None, :]).sum(axis=2)              # P^- H^T
    hPh = (h * PHt).sum(axis=1)
    R = np.where(st.adaptive[:m], np.maximum(st.R[:m], ivar - hPh), st.R[:m])
    S = hPh + R
    y = z - (h * x).sum(axis=1)                        # innovation z - H x^-
    residual = np.where((x > 0.0).any(axis=1), y, np.nan)
    y_ok = ~idle & np.isfinite(y * y)
    st.innovation[:m] = np.where(y_ok, y, st.innovation[:m])
    change = y_ok & (y * y > st.gate[:m] * np.maximum(S, ivar))
    reopened = np.flatnonzero(change)
    if reopened.size:                                  # re-open P^- (P_0 rule at x^-)
        saved = P[reopened].copy()
        d[reopened] += x[reopened] * x[reopened]
        PHt[reopened] = (P[reopened] * h[reopened, None, :]).sum(axis=2)
        S[reopened] = (h[reopened] * PHt[reopened]).sum(axis=1) + R[reopened]
    ok = y_ok & (S > 0.0) & np.isfinite(S)
    x_new = x + PHt * np.where(ok, y / S, 0.0)[:, None]            # (6.c, 6.d)
    ok &= np.isfinite(x_new.sum(axis=1))
    u = np.where(ok[:, None], PHt * (1.0 / np.sqrt(S))[:, None], 0.0)
    P -= u[:, :, None] * u[:, None, :]                 # (6.e): P^- - (P^- H^T)(P^- H^T)^T / S
    np.maximum(d, 0.0, out=d)
    if reopened.size:                                  # a failed update keeps the predicted P
        failed = ~ok[reopened]
        if failed.any():
            P[reopened[failed]] = saved[failed]
    clipped = ok & (x_new.min(axis=1) < 0.0)
    st.clipped[:m] = np.where(ok, clipped, st.clipped[:m])
    if clipped.any():
        _project(x_new, P, np.flatnonzero(clipped))
    _track_changes(st, m, x, x_new, ok, change)
    x[...] = np.where(ok[:, None], x_new, x)
    st.change[:m] = np.where(idle, st.change[:m], change & ok)
    st.code[:m] = np.where(ok, UPDATED, np.where(idle, IDLE, DEGENERATE))
    st.n_updates[:m] += ok
    st.n_skipped[:m] += ~ok
    st.touched[:m] = True
    return residual


def _project(x: np.ndarray, P: np.ndarray, rows: np.ndarray) -> None:
    """Project ``x[rows]`` onto ``x >= 0`` in the metric of ``P`` as
    :meth:`KalmanDemandEstimator._project_nonnegative` does: rows with one negative demand ``i``
    (the common case) together in its closed form ``x - P[:, i] x_i / P_ii``; the others, and
    any row that form leaves negative, one by one."""
    negative = x[rows] < 0.0
    single = rows[negative.sum(axis=1) == 1]
    i = np.argmin(x[single], axis=1)
    pii = P[single, i, i]
    single, i, pii = single[pii > 0.0], i[pii > 0.0], pii[pii > 0.0]
    projected = x[single] - P[single, :, i] * (x[single, i] / pii)[:, None]
    fine = ~(projected < 0.0).any(axis=1)
    projected[np.arange(len(single)), i] = 0.0
    x[single[fine]] = projected[fine]
    for j in np.setdiff1d(rows, single[fine], assume_unique=True):
        x[j] = KalmanDemandEstimator._project_nonnegative(x[j], P[j])


def _track_changes(st: _Stack, m: int, x_prev: np.ndarray, x: np.ndarray, ok: np.ndarray,
                   change: np.ndarray) -> None:
    """``xi_i = max (x_{i,k} - x_{i,k-1})^2`` since the filter settled; a detected change
    restarts settling (as :meth:`KalmanDemandEstimator._track_changes`)."""
    reset = ok & change
    steady = ok & ~change
    st.n_changes[:m] += reset
    ivar = st.innovation_var[:m]
    innov = st.innovation[:m]
    st.innovation_var[:m] = np.where(
        reset, 0.0, np.where(steady, ivar + INNOVATION_MEMORY * (innov * innov - ivar), ivar))
    delta = x - x_prev
    delta *= delta
    settled = steady & (st.since_reset[:m] >= st.settle[:m]) & np.isfinite(delta.sum(axis=1))
    xi = st.xi[:m]
    xi[...] = np.where(reset[:, None], 0.0,
                       np.where(settled[:, None], np.maximum(xi, delta), xi))
    st.since_reset[:m] = np.where(reset, 0, st.since_reset[:m]) + ok
