"""estimators.collinearity: which classes' demands the windows separate, on seeded synthetic
workloads whose truth is known (separable, collinear, partly collinear, exactly collinear),
the response-time split (PS and FCFS), bad input, and the tier's per-class flags."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.collinearity import assess_separability, response_time_split
from streams.core.config import SystemConfig
from streams.core.records import parse_window
from streams.core.tier import TierState, step_tiers

TRUE = np.array([0.02, 0.05, 0.01])


def _windows(X: np.ndarray, demands: np.ndarray, rng: np.random.Generator,
             noise: float = 0.01) -> np.ndarray:
    return np.clip(X @ demands + rng.normal(0.0, noise, X.shape[0]), 0.0, 1.0)


def separable_case(seed: int = 1, n: int = 720) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(1.0, 10.0, (n, 3))            # the class mix varies: columns independent
    return _windows(X, TRUE, rng), X


def collinear_case(seed: int = 2, n: int = 720, mix_noise: float = 0.01
                   ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    load = rng.uniform(2.0, 8.0, n)               # every class follows the same load
    X = np.outer(load, [1.0, 1.0, 1.0]) * (1.0 + rng.normal(0.0, mix_noise, (n, 3)))
    return _windows(X, TRUE, rng), X


def test_separable_classes_are_separated_with_honest_standard_errors():
    U, X = separable_case()
    r = assess_separability(U, X, classes=["a", "b", "c"])
    assert r.separable.all() and r.reasons == (None, None, None)
    assert r.condition_number < 10
    assert (r.vif < 10).all()
    # the truth within 4 standard errors, and the errors small
    assert np.all(np.abs(r.demands - TRUE) < 4 * r.std_error)
    assert np.all(r.relative_std_error < 0.05)
    np.testing.assert_allclose(r.recommended, r.demands)


def test_collinear_classes_are_flagged_per_class_with_their_uncertainty():
    U, X = collinear_case()
    r = assess_separability(U, X, classes=["a", "b", "c"])
    assert not r.separable.any()
    assert r.reasons == ("collinear",) * 3
    assert r.condition_number > 100
    assert (r.vif > 1000).all()
    assert np.all(r.relative_std_error > 0.1)
    # the aggregate is still pinned: the recommended demands keep the utilization law
    x_bar = X.mean(axis=0)
    assert x_bar @ r.recommended == pytest.approx(U.mean(), rel=0.02)
    out = r.by_class()
    assert out["b"]["separable"] is False and out["b"]["reason"] == "collinear"
    assert out["b"]["std_error"] > 0


def test_only_the_classes_that_move_together_are_flagged():
    rng = np.random.default_rng(3)
    n = 720
    load = rng.uniform(2.0, 8.0, n)
    X = np.column_stack([rng.uniform(1.0, 10.0, n),                 # its own mix
                         load * (1 + rng.normal(0, 0.005, n)),        # these two move together
                         load * (1 + rng.normal(0, 0.005, n))])
    U = _windows(X, TRUE, rng)
    r = assess_separability(U, X, classes=["a", "b", "c"])
    assert r.reasons[0] is None
    assert r.reasons[1] == r.reasons[2] == "collinear"
    assert abs(r.demands[0] - TRUE[0]) < 4 * r.std_error[0]


def test_response_times_separate_collinear_classes_under_processor_sharing():
    U, X = collinear_case(seed=4)
    rng = np.random.default_rng(5)
    stretch = 1.0 / (1.0 - U)                      # M/G/1-PS: R_c = D_c / (1 - U)
    R = TRUE[None, :] * stretch[:, None] * rng.lognormal(0.0, 0.2, X.shape)
    r = assess_separability(U, X, classes=["a", "b", "c"], response_times=R)
    assert r.response_split is not None
    assert not r.separable.any()
    np.testing.assert_allclose(r.recommended, TRUE, rtol=0.08)


def test_fcfs_split_recovers_demands_from_a_shared_wait():
    U, X = collinear_case(seed=6)
    wait = 0.03
    R = np.tile(TRUE + wait, (X.shape[0], 1))      # FCFS: R_c = D_c + W
    d = response_time_split(U, X, R, discipline="fcfs")
    np.testing.assert_allclose(d, TRUE, rtol=0.05)
    ps = response_time_split(U, X, R, discipline="ps")
    assert not np.allclose(ps, TRUE, rtol=0.05)    # the wrong discipline splits differently


def test_exact_collinearity_and_missing_classes_give_flags_not_nan():
    rng = np.random.default_rng(7)
    n = 200
    a = rng.uniform(1, 5, n)
    X = np.column_stack([a, a, rng.uniform(1, 5, n), np.zeros(n)])
    U = _windows(X, np.array([0.02, 0.02, 0.05, 0.0]), rng)
    r = assess_separability(U, X, classes=["a", "b", "c", "d"])
    assert r.reasons == ("not_identifiable", "not_identifiable", None, "no_completions")
    assert math.isinf(r.condition_number)
    assert not np.isnan(r.demands).any() and not np.isnan(r.recommended).any()
    out = r.by_class()
    assert out["a"]["std_error"] is None and out["d"]["vif"] is None
    assert out["c"]["separable"] is True


def test_a_disagreeing_estimator_flags_the_class():
    U, X = separable_case(seed=8)
    ok = assess_separability(U, X, others={"kalman": TRUE})
    assert ok.separable.all()
    off = TRUE.copy()
    off[1] *= 2.0
    bad = assess_separability(U, X, others={"kalman": off},
                              others_std={"kalman": np.full(3, 1e-4)})
    assert bad.reasons == (None, "estimators_disagree", None)
    assert bad.disagreement["kalman"][1] == pytest.approx(1.0, abs=0.05)


def test_too_few_windows_or_idle_are_flagged():
    X = np.array([[1.0, 2.0, 3.0], [2.0, 1.0, 1.0]])
    r = assess_separability([0.1, 0.1], X)          # 2 windows, 3 classes
    assert not r.separable.any()
    idle = assess_separability(np.zeros(50), np.zeros((50, 2)))
    assert idle.reasons == ("no_completions", "no_completions")
    assert idle.class_blind == 0.0 and not np.isnan(idle.recommended).any()


@pytest.mark.parametrize("kwargs, field", [
    ({"utilization": [0.5, 1.5], "throughputs": [[1.0], [1.0]]}, "utilization"),
    ({"utilization": [0.5, math.nan], "throughputs": [[1.0], [1.0]]}, "utilization"),
    ({"utilization": [0.5, 0.5], "throughputs": [[1.0], [-1.0]]}, "throughputs"),
    ({"utilization": [0.5, 0.5], "throughputs": [1.0, 1.0]}, "throughputs"),
    ({"utilization": [0.5, 0.5], "throughputs": [[1.0], [1.0]], "cores": 0}, "cores"),
    ({"utilization": [0.5, 0.5], "throughputs": [[1.0], [1.0]], "max_rel_se": -1},
     "max_rel_se"),
    ({"utilization": [0.5, 0.5], "throughputs": [[1.0], [1.0]], "classes": ["a", "a"]},
     "classes"),
    ({"utilization": [0.5, 0.5], "throughputs": [[1.0], [1.0]], "others": {"k": [1, 2]}},
     "others"),
    ({"utilization": [0.5, 0.5], "throughputs": [[1.0], [1.0]], "discipline": "lifo"},
     "discipline"),
])
def test_bad_input_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}"):
        assess_separability(**kwargs)


def test_rounding_above_one_is_accepted():
    r = assess_separability([1.0 + 1e-12, 0.5, 0.7], [[30.0], [15.0], [21.0]])
    assert r.demands[0] == pytest.approx(1 / 30, rel=1e-6)


def test_response_time_split_needs_every_class():
    X = np.array([[1.0, 1.0], [2.0, 1.0]])
    R = np.array([[0.1, math.nan], [0.1, math.nan]])
    assert response_time_split([0.2, 0.3], X, R) is None
    with pytest.raises(ValueError, match="^response_times"):
        response_time_split([0.2, 0.3], X, [[0.1, -1.0], [0.1, 0.1]])


# --- the tier's estimate records ------------------------------------------------------------

def _feed(tier: TierState, U: np.ndarray, X: np.ndarray, start: int, window_s: float = 10.0
          ) -> list:
    out: list = []
    for k in range(U.size):
        w = parse_window({"system": "s", "tier": "db", "end": 1e9 + (start + k) * window_s,
                          "window_s": window_s, "utilization": float(U[k]), "cores": 1,
                          "completions": {c: float(round(x * window_s))
                                          for c, x in zip("abc", X[k])}})
        reason, late, _ = tier.admit(w)
        assert reason is None
        tier.accept(w, late, k, out)
    return out + step_tiers([tier])


@pytest.mark.parametrize("case, expect_flagged", [(separable_case, False),
                                                  (collinear_case, True)])
def test_tier_estimate_records_carry_per_class_separability(case, expect_flagged):
    U, X = case(seed=11, n=240)
    tier = TierState("db", SystemConfig())
    _feed(tier, U[:200], X[:200], 0)
    tier.refresh(fit_map=False)
    records = _feed(tier, U[200:], X[200:], 200)
    rec = records[-1][1]
    flags, se = rec["demand_flag"], rec["demand_se"]
    assert set(flags) == set(se) == {"a", "b", "c"}
    if expect_flagged:
        assert all(f == "collinear" for f in flags.values())
    else:
        assert all(f is None for f in flags.values())
    assert all(v is not None and v > 0 for v in se.values())
    assert all(v["separable"] is (not expect_flagged) for v in tier.separability.values())
    for key in ("demands", "demand_std", "kalman_flag", "idc", "bursty"):
        assert key in rec                          # existing fields unchanged
    restored = TierState.from_dict(tier.to_dict(), SystemConfig())
    assert restored.separability == tier.separability


def test_an_extreme_other_estimate_gives_a_finite_disagreement_without_overflow():
    U, X = separable_case(seed=8)
    with np.errstate(over="raise"):
        tiny = assess_separability(U * 1e-300, X, others={"far": np.full(3, 1e10)})
    assert np.isfinite(tiny.disagreement["far"]).all()
