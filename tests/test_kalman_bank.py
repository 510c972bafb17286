"""``estimators.kalman_bank.update_many`` against the scalar filter it vectorises.

The reference is :meth:`KalmanDemandEstimator.update` applied window by window to a copy of
each filter; the bank must leave the same state and report the same per-window demands,
variances, skip reasons and change flags (to round-off: its sums run in another order)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimators.demand import SKIP_DEGENERATE, SKIP_IDLE, KalmanDemandEstimator
from estimators.kalman_bank import update_many

RTOL = 1e-10


def _close(got, want, what=""):
    """Equal to round-off: relative 1e-10, absolute 1e-12 of the largest entry (a demand that
    cancels to ~1e-19 next to demands of 1e-3 is round-off either way)."""
    want = np.asarray(want, dtype=float)
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-12 * scale + 1e-300, err_msg=what)


def _copy(f: KalmanDemandEstimator) -> KalmanDemandEstimator:
    return KalmanDemandEstimator.from_dict(f.to_dict())


def _workload(rng: np.random.Generator, n: int, windows: int, *, idle: float = 0.1,
              step_at: int | None = None, noise: float = 0.01, cores: int = 2):
    """Utilizations and throughputs of a tier with ``n`` classes; optional x3 step of class 0."""
    D = rng.uniform(1e-3, 5e-3, n)
    U, H = [], []
    for s in range(windows):
        if step_at is not None and s == step_at:
            D = D.copy()
            D[0] *= 3.0
        counts = rng.poisson(rng.uniform(2, 40, n) * 5.0).astype(float)
        if rng.random() < idle:
            counts[:] = 0.0
        if rng.random() < 0.2:                       # a class absent from the window
            counts[rng.integers(n)] = 0.0
        rates = counts / 5.0
        u = float(np.clip(rates @ D / cores + rng.normal(0.0, noise), 0.0, 1.0))
        U.append(u)
        H.append(rates)
    return np.array(U), np.array(H).reshape(windows, n), np.full(windows, float(cores))


def _filters(rng: np.random.Generator, specs):
    """Filters of the given class counts and kinds ('default', 'paper', 'fixed_R')."""
    out = []
    for i, (n, kind) in enumerate(specs):
        classes = [f"c{j}" for j in range(n)]
        if kind == "paper":
            out.append(KalmanDemandEstimator.paper(classes, 2))
        elif kind == "fixed_R":
            out.append(KalmanDemandEstimator(classes, 2, R=4e-4, adaptive_R=False, settle=3))
        else:
            out.append(KalmanDemandEstimator(classes, 2))
    return out


def _assert_same(bank: KalmanDemandEstimator, ref: KalmanDemandEstimator) -> None:
    a, b = bank.to_dict(), ref.to_dict()
    for key in ("x", "P", "xi"):
        _close(a[key], b[key], key)
    for key in ("innovation", "innovation_var"):
        assert math.isclose(a[key], b[key], rel_tol=RTOL, abs_tol=1e-13), key
    for key in ("initialised", "skipped", "skip_reason", "change_detected", "clipped",
                "windows_since_reset", "n_updates", "n_skipped", "n_changes", "cores"):
        assert a[key] == b[key], key


def _run_both(filters, U, H, C, chunks):
    """Reference: scalar updates; bank: ``update_many`` over the windows in ``chunks`` slices.
    ``_run_both.clipped`` counts the reference's windows that projected onto ``x >= 0``."""
    _run_both.clipped = 0
    refs = [_copy(f) for f in filters]
    expected = []
    for f, u, h, c in zip(refs, U, H, C):
        rows = []
        for s in range(len(u)):
            f.cores = float(c[s])
            # one-step-ahead residual of the demands in force before the window
            residual = float(u[s]) * f.cores - float(np.dot(h[s], f.x)) \
                if (f.x > 0).any() else math.nan
            f.update(float(u[s]), h[s])
            rows.append((f.x.copy(), np.diagonal(f.P).copy(),
                         f.skip_reason if f.skipped else None, f.change_detected, residual))
            _run_both.clipped += f.clipped and not f.skipped
        expected.append(rows)
    got = [[] for _ in filters]
    starts = [0] * len(filters)
    for size in chunks:
        sl = [slice(s, s + size) for s in starts]
        steps = update_many(filters, [u[i] for u, i in zip(U, sl)], [h[i] for h, i in zip(H, sl)],
                            [c[i] for c, i in zip(C, sl)])
        for k, out in enumerate(steps):
            assert out.skip_reasons() == [out.skip_reason(s) for s in range(len(out.x))]
            for s in range(len(out.x)):
                got[k].append((out.x[s], out.variance[s], out.skip_reason(s),
                               bool(out.change_detected[s]), float(out.residual[s])))
        starts = [s + size for s in starts]
    for k, (f, ref) in enumerate(zip(filters, refs)):
        _assert_same(f, ref)
        assert len(got[k]) == len(expected[k])
        for (gx, gv, gr, gc, gz), (ex, ev, er, ec, ez) in zip(got[k], expected[k]):
            _close(gx, ex, "x")
            _close(gv, ev, "variance")
            assert (gr, gc) == (er, ec)
            assert math.isnan(gz) == math.isnan(ez)
            assert math.isnan(ez) or math.isclose(gz, ez, rel_tol=RTOL, abs_tol=1e-13), "residual"
    return got


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1),
       specs=st.lists(st.tuples(st.sampled_from([1, 3, 14]),
                                st.sampled_from(["default", "default", "fixed_R"]))
                      | st.just((1, "paper")), min_size=1, max_size=6),
       windows=st.lists(st.integers(0, 40), min_size=6, max_size=6),
       chunk=st.integers(1, 50))
def test_bank_equals_scalar_updates_window_by_window(seed, specs, windows, chunk):
    """Paper-mode filters (``R = 0``) only with one class: with several, ``P`` is singular
    after the first update and the projection onto ``x >= 0`` (a pseudo-inverse) is decided by
    round-off in both implementations alike."""
    rng = np.random.default_rng(seed)
    filters = _filters(rng, specs)
    data = [_workload(rng, n, windows[i], step_at=windows[i] // 2 if i % 2 else None)
            for i, (n, _) in enumerate(specs)]
    U, H, C = ([d[j] for d in data] for j in range(3))
    total = max(windows[: len(specs)])
    _run_both(filters, U, H, C, [chunk] * (total // chunk + 1))


def test_step_change_is_detected_and_idle_and_degenerate_windows_are_flagged():
    rng = np.random.default_rng(7)
    filters = _filters(rng, [(3, "default"), (3, "default"), (3, "paper")])
    data = [_workload(rng, 3, 120, step_at=60, idle=0.15) for _ in filters]
    U, H, C = ([d[j] for d in data] for j in range(3))
    got = _run_both(filters, U, H, C, [120])
    reasons = {r for rows in got for _, _, r, *_ in rows}
    assert SKIP_IDLE in reasons
    assert any(c for rows in got[:2] for *_, c, _ in rows), "the x3 step was not detected"
    assert filters[0].n_changes >= 1
    # a paper filter (R = 0) with one class collapses P along H: degenerate windows occur
    one = _filters(rng, [(1, "paper")])
    u, h, c = _workload(rng, 1, 30, idle=0.0, noise=0.0)
    got = _run_both(one, [u], [h], [c], [30])
    assert SKIP_DEGENERATE in {r for _, _, r, *_ in got[0]}


def test_negative_demands_are_projected_as_the_scalar_filter_projects_them():
    """Utilization far below what the throughputs imply pushes demands below 0."""
    rng = np.random.default_rng(3)
    filters = _filters(rng, [(14, "default")] * 3)
    data = [_workload(rng, 14, 60) for _ in filters]
    U, H, C = ([d[j] for d in data] for j in range(3))
    for u in U:
        u[30:] *= 0.05
    _run_both(filters, U, H, C, [13] * 5)
    assert _run_both.clipped > 0


def test_uninitialised_filters_take_the_scalar_path_until_initialised():
    rng = np.random.default_rng(11)
    filters = _filters(rng, [(3, "default"), (3, "default")])
    u, h, c = _workload(rng, 3, 20, idle=0.0)
    u[:3] = 0.0                       # 'uninformative: utilization 0 before initialisation'
    got = _run_both(filters, [u, u.copy()], [h, h.copy()], [c, c.copy()], [20])
    assert got[0][0][2].startswith("uninformative")
    assert all(f.initialised for f in filters)


def test_the_result_does_not_depend_on_which_filters_are_stepped_together():
    """Each row's arithmetic is independent of the others: stepping a filter alone or in a
    group gives bit-identical results (both shells of the pipeline rely on it)."""
    rng = np.random.default_rng(5)
    base = _filters(rng, [(14, "default")] * 4)
    data = [_workload(rng, 14, 50) for _ in base]
    U, H, C = ([d[j] for d in data] for j in range(3))
    together = [_copy(f) for f in base]
    alone = [_copy(f) for f in base]
    residuals = [st.residual.tolist() for st in update_many(together, U, H, C)]
    for k, f in enumerate(alone):
        one_by_one = []
        for s in range(50):
            st, = update_many([f], [U[k][s:s + 1]], [H[k][s:s + 1]], [C[k][s:s + 1]])
            one_by_one += st.residual.tolist()
        np.testing.assert_array_equal(one_by_one, residuals[k])
    for a, b in zip(together, alone):
        assert a.to_dict() == b.to_dict()


@pytest.mark.parametrize("n", [1, 14])
def test_empty_input_changes_nothing(n):
    f = KalmanDemandEstimator([f"c{j}" for j in range(n)], 1)
    before = f.to_dict()
    steps = update_many([f], [np.zeros(0)], [np.zeros((0, n))], [np.zeros(0)])
    assert steps[0].x.shape == (0, n)
    assert f.to_dict() == before
