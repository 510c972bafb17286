"""Choice of the demand estimator by recent utilization-prediction error (estimators.selection)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.selection import ESTIMATORS, Selection, prediction_error, select_estimator


def _windows(seed: int = 0, n: int = 40, classes: int = 3, noise: float = 0.0):
    rng = np.random.default_rng(seed)
    D = np.array([0.004, 0.010, 0.020])[:classes]
    X = rng.uniform(5.0, 25.0, (n, classes))
    U = np.clip(X @ D + rng.normal(0.0, noise, n), 0.0, 1.0)
    return U, X, D


def test_prediction_error_is_the_relative_rms_of_the_busy_time_residual():
    U, X, D = _windows()
    est = np.tile(D * 1.1, (len(U), 1))                  # 10% too high everywhere
    expected = math.sqrt(np.mean((U - X @ (D * 1.1)) ** 2)) / U.mean()
    assert prediction_error(U, X, est) == pytest.approx(expected, rel=1e-12)
    assert prediction_error(U, X, np.tile(D, (len(U), 1))) == pytest.approx(0.0, abs=1e-12)


def test_cores_scale_the_measured_busy_time():
    U, X, D = _windows()
    est = np.tile(2 * D, (len(U), 1))                    # two cores: z = 2 U = X (2 D)
    assert prediction_error(U, X, est, cores=2) == pytest.approx(0.0, abs=1e-12)
    one_core = math.sqrt(np.mean(U ** 2)) / U.mean()   # residual U - 2 U = -U
    assert prediction_error(U, X, est, cores=1) == pytest.approx(one_core, rel=1e-12)


def test_rows_without_an_estimate_are_left_out_and_too_few_give_none():
    U, X, D = _windows(n=10)
    est = np.tile(D, (10, 1))
    est[:6] = np.nan
    est[6:] *= 1.2
    expected = math.sqrt(np.mean((U[6:] - X[6:] @ (1.2 * D)) ** 2)) / U[6:].mean()
    assert prediction_error(U, X, est, min_windows=4) == pytest.approx(expected, rel=1e-12)
    assert prediction_error(U, X, est, min_windows=5) is None


def test_an_idle_tier_cannot_be_scored():
    X = np.zeros((8, 2))
    assert prediction_error(np.zeros(8), X, np.full((8, 2), 0.01)) is None


def test_the_estimator_that_predicts_utilization_best_is_chosen():
    U, X, D = _windows(noise=0.002)
    n = len(U)
    good = np.tile(D, (n, 1))
    blind = np.tile(np.full(3, (U.sum()) / X.sum()), (n, 1))   # class-blind utilization law
    off = np.tile(D * [1.5, 1.0, 0.7], (n, 1))
    sel = select_estimator(U, X, {"kalman": off, "regression": good, "util_law": blind})
    assert isinstance(sel, Selection)
    assert sel.estimator == "regression"
    assert sel.errors["regression"] < sel.errors["util_law"]
    assert sel.errors["regression"] < sel.errors["kalman"]
    assert sel.windows == n


def test_the_preferred_estimator_keeps_its_place_within_the_margin():
    U, X, D = _windows(noise=0.02)
    n = len(U)
    a, b = np.tile(D * 1.01, (n, 1)), np.tile(D, (n, 1))
    e_a, e_b = prediction_error(U, X, a), prediction_error(U, X, b)
    assert e_b < e_a < e_b / 0.9                          # b better, but by less than 10%
    assert select_estimator(U, X, {"kalman": a, "regression": b}).estimator == "kalman"
    assert select_estimator(U, X, {"kalman": a, "regression": b},
                            margin=0.0).estimator == "regression"


def test_an_unscored_preferred_estimator_gives_way_and_none_scored_keeps_it():
    U, X, D = _windows(n=12)
    none = np.full((12, 3), np.nan)
    sel = select_estimator(U, X, {"kalman": none, "regression": np.tile(D, (12, 1))})
    assert sel.estimator == "regression" and sel.errors["kalman"] is None
    sel = select_estimator(U, X, {"kalman": none, "util_law": none})
    assert sel.estimator == "kalman"


def test_the_default_candidates_start_with_the_kalman_filter():
    assert ESTIMATORS == ("kalman", "regression")


@pytest.mark.parametrize("args, kwargs, field", [
    (([0.5, 1.5], [[1.0], [1.0]], {"kalman": [[0.1], [0.1]]}), {}, "utilization"),
    (([0.5, 0.5], [[1.0]], {"kalman": [[0.1], [0.1]]}), {}, "throughputs"),
    (([0.5, 0.5], [[1.0], [-1.0]], {"kalman": [[0.1], [0.1]]}), {}, "throughputs"),
    (([0.5, 0.5], [[1.0], [1.0]], {"kalman": [[0.1]]}), {}, "estimates"),
    (([0.5, 0.5], [[1.0], [1.0]], {"kalman": [[0.1], [-0.1]]}), {}, "estimates"),
    (([0.5, 0.5], [[1.0], [1.0]], {}), {}, "estimates"),
    (([0.5, 0.5], [[1.0], [1.0]], {"regression": [[0.1], [0.1]]}), {}, "preferred"),
    (([0.5, 0.5], [[1.0], [1.0]], {"kalman": [[0.1], [0.1]]}), {"margin": 1.0}, "margin"),
    (([0.5, 0.5], [[1.0], [1.0]], {"kalman": [[0.1], [0.1]]}), {"cores": 0}, "cores"),
])
def test_bad_input_names_the_field(args, kwargs, field):
    with pytest.raises(ValueError, match=rf"^{field}:"):
        select_estimator(*args, **kwargs)


# -- utilization rounding: 1 + 1e-12 and -1e-15 are clamped, clearly invalid values refused ------
@pytest.mark.parametrize("rounded, clamped", [(1 + 1e-12, 1.0), (-1e-15, 0.0)])
def test_utilization_rounding_is_clamped(rounded, clamped):
    X = [[10.0], [20.0], [30.0], [40.0], [50.0], [60.0]]
    est = {"kalman": [[0.01]] * 6, "regression": [[0.012]] * 6}
    u = [0.1, 0.2, 0.3, 0.4, 0.5, clamped]
    odd = u[:-1] + [rounded]
    assert select_estimator(odd, X, est) == select_estimator(u, X, est)
    assert prediction_error(odd, X, est["kalman"]) == prediction_error(u, X, est["kalman"])


@pytest.mark.parametrize("bad", [1.5, 1 + 2e-9, -1e-6, float("nan")])
def test_utilization_beyond_rounding_is_still_refused(bad):
    with pytest.raises(ValueError, match=r"^utilization: entries must be within \[0, 1\]"):
        select_estimator([0.5, bad], [[1.0], [1.0]], {"kalman": [[0.1], [0.1]]})
