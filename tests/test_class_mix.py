"""Completions in units of work (estimators.class_mix): a drifting class mix is not burstiness.

Windows are built from per-request service times (each class's own exponential, or scaled by
an on/off burst that hits every class), the class shares drifting slowly, as on a day's
traffic. Seeded; no wall-clock assertions.
"""

from __future__ import annotations

import numpy as np
import pytest

from estimators.class_mix import work_weighted_completions
from estimators.dispersion import index_of_dispersion_interval

WINDOW_S = 5.0
THRESHOLD = 10.0            # the configuration's default idc_threshold


def windows(seed: int, drift: float, burst: float = 1.0, k: int = 4096, classes: int = 8):
    """``(U_k, n_kc)``: Poisson completions per class (shares drifting +-``drift`` over 10-60
    minutes), busy time the sum of their exponential service times (class means log-normal),
    times ``burst`` in the windows of an on/off run (every class alike)."""
    rng = np.random.default_rng(seed)
    demand = np.exp(rng.normal(np.log(2e-3), 0.5, classes))
    base = rng.dirichlet(np.full(classes, 2.0))
    t = np.arange(1, k + 1)[:, None] * WINDOW_S
    mix = base * (1.0 + drift * np.sin(2 * np.pi * t / rng.uniform(600, 3600, classes)
                                       + rng.uniform(0, 2 * np.pi, classes)))
    mix /= mix.sum(axis=1, keepdims=True)
    rate = 0.5 / float(base @ demand)                    # about 50% busy at the base mix
    on = np.zeros(k, dtype=bool)
    if burst != 1.0:
        state = False
        for i, u in enumerate(rng.random(k)):
            state = (not state) if u < (0.02 if state else 0.01) else state
            on[i] = state
        rate *= 1.0 / (1.0 + (burst - 1.0) * 0.33)       # keep the busy tier below 100%
    n = rng.poisson(rate * WINDOW_S * mix).astype(float)
    busy = np.array([sum(rng.gamma(c, d) for c, d in zip(row, demand) if c > 0)
                     for row in n]) * np.where(on, burst, 1.0)
    return np.clip(busy / WINDOW_S, 0.0, 1.0), n


def test_a_drifting_mix_reads_bursty_on_counts_and_not_on_work():
    util, n = windows(1, drift=0.3)
    counts = index_of_dispersion_interval(util, n.sum(axis=1), WINDOW_S)
    work = index_of_dispersion_interval(util, work_weighted_completions(util, n, WINDOW_S),
                                        WINDOW_S)
    assert counts.lower > THRESHOLD                      # the mix alone looks bursty
    assert work.value < 3.0 and work.lower < THRESHOLD   # exponential classes: I ~ 1-2


def test_burstiness_of_the_service_itself_stays():
    util, n = windows(2, drift=0.3, burst=6.0)
    counts = index_of_dispersion_interval(util, n.sum(axis=1), WINDOW_S)
    work = index_of_dispersion_interval(util, work_weighted_completions(util, n, WINDOW_S),
                                        WINDOW_S)
    assert work.lower > THRESHOLD
    assert work.value == pytest.approx(counts.value, rel=0.35)


def test_a_steady_mix_loses_only_the_classes_spread():
    """At a fixed mix the counts read the aggregate's renewal ``I`` = SCV of the classes'
    hyperexponential, ``2 sum p d^2 / (sum p d)^2 - 1``; in units of work what is left is each
    class's own exponential, ``I`` = 1: the classes' spread (O(1), far below the threshold) is
    all that goes."""
    util, n = windows(3, drift=0.0)
    p = n.sum(axis=0) / n.sum()
    d = np.linalg.lstsq(n, util * WINDOW_S, rcond=None)[0]
    scv = 2 * float(p @ d**2) / float(p @ d) ** 2 - 1
    counts = index_of_dispersion_interval(util, n.sum(axis=1), WINDOW_S)
    work = index_of_dispersion_interval(util, work_weighted_completions(util, n, WINDOW_S),
                                        WINDOW_S)
    assert counts.value == pytest.approx(scv, rel=0.25)
    assert work.value == pytest.approx(1.0, abs=0.5)
    assert work.value < counts.value


def test_same_total_and_no_weighting_without_two_active_classes():
    util, n = windows(4, drift=0.3, k=600)
    w = work_weighted_completions(util, n, WINDOW_S)
    assert w.sum() == pytest.approx(n.sum())
    assert np.all(np.isfinite(w)) and np.all(w >= 0)
    one = n.copy()
    one[:, 1:] = 0.0
    assert np.array_equal(work_weighted_completions(util, one, WINDOW_S), one.sum(axis=1))
    zero = np.zeros_like(n)
    assert np.array_equal(work_weighted_completions(util, zero, WINDOW_S), np.zeros(n.shape[0]))
    idle = work_weighted_completions(np.zeros_like(util), n, WINDOW_S)   # no busy time: weights 0
    assert np.array_equal(idle, n.sum(axis=1))


def test_a_fit_that_does_not_converge_counts_as_before(monkeypatch):
    import estimators.class_mix as class_mix

    def out_of_iterations(*_args, **_kwargs):
        raise RuntimeError("Maximum number of iterations reached.")

    monkeypatch.setattr(class_mix, "regression_demands", out_of_iterations)
    util, n = windows(5, drift=0.3, k=300)
    assert np.array_equal(class_mix.work_weighted_completions(util, n, WINDOW_S), n.sum(axis=1))


def test_work_out_of_range_counts_as_before(monkeypatch):
    """Weights whose products are finite but whose sum over the windows overflows: the counts,
    not a rescaling by 0."""
    import dataclasses

    import estimators.class_mix as class_mix
    from estimators.demand import regression_demands

    util, n = windows(5, drift=0.3, k=300)

    def huge(*args, **kwargs):
        real = regression_demands(*args, **kwargs)
        return dataclasses.replace(real, demands=np.full(real.demands.shape, 1e306 / n.max()))

    monkeypatch.setattr(class_mix, "regression_demands", huge)
    assert np.array_equal(class_mix.work_weighted_completions(util, n, WINDOW_S), n.sum(axis=1))


def test_work_too_small_to_rescale_counts_as_before(monkeypatch):
    """Weights so small that the total over the work overflows (a subnormal work; found by the
    pipeline's fuzz test): the counts, without a warning (0 x inf was NaN and raised under the
    tests' warning filter)."""
    import dataclasses
    import warnings

    import estimators.class_mix as class_mix
    from estimators.demand import regression_demands

    util, n = windows(5, drift=0.3, k=300)
    n[0] = 0.0                                   # a window with no completions: 0 x inf

    def tiny(*args, **kwargs):
        real = regression_demands(*args, **kwargs)
        return dataclasses.replace(real, demands=np.full(real.demands.shape, 1e-320))

    monkeypatch.setattr(class_mix, "regression_demands", tiny)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = class_mix.work_weighted_completions(util, n, WINDOW_S)
    assert np.array_equal(out, n.sum(axis=1))


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="completions"):
        work_weighted_completions(np.zeros(5), np.zeros(5), WINDOW_S)
    with pytest.raises(ValueError, match="completions"):
        work_weighted_completions(np.zeros(5), np.zeros((4, 2)), WINDOW_S)
