"""``demand_policy``: which per-class demands enter the model (docs/accuracy.md section 7).

``selected`` (default): per tier, the Kalman filter or the sliding regression, whichever predicted
the tier's recent utilization better one step ahead; ``kalman_checked``: the Kalman demands with
unidentified classes replaced by the mix-weighted mean."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimators.selection import select_by_residuals, select_by_scores, select_estimator
from streams.core.config import SystemConfig
from streams.predict.confidence import trust_reasons
from streams.predict.model import build_model, split_replaced_flags, tier_demands, \
    undecided_splits
from streams.core.records import Window
from streams.core.tier import SELECTION_WINDOWS, TierModel, TierState, step_tiers

CLASSES = ["a", "b", "c"]
DEMANDS = np.array([0.004, 0.010, 0.020])


# ------------------------------------------------------------------------------------- model
def _tier(estimator: str, regression: dict[str, float]) -> TierModel:
    return TierModel(tier="db", cores=1, demands={"a": 0.010, "b": 0.001},
                     demand_std={"a": 1e-4, "b": 1e-4}, regression=regression, idc=1.0,
                     idc_flag=None, mean_service=None, p95=None, process=None, fit=None,
                     bursty=False, windows=100, estimator=estimator)


def test_selected_uses_the_picked_estimators_demands_as_they_are():
    mix = np.array([0.5, 0.5])
    reg = {"a": 0.002, "b": 0.004}
    assert tier_demands(_tier("kalman", reg), ["a", "b"], mix, "selected").tolist() == \
        [0.010, 0.001]
    assert tier_demands(_tier("regression", reg), ["a", "b"], mix, "selected").tolist() == \
        [0.002, 0.004]
    # a class the regression does not cover yet: the Kalman demands
    assert tier_demands(_tier("regression", {"a": 0.002}), ["a", "b"], mix,
                        "selected").tolist() == [0.010, 0.001]
    # the old policy: disagreeing classes read the mix-weighted mean
    checked = tier_demands(_tier("regression", reg), ["a", "b"], mix, "kalman_checked")
    assert checked[0] == pytest.approx(checked[1])
    with pytest.raises(ValueError, match="demand_policy"):
        tier_demands(_tier("kalman", reg), ["a", "b"], mix, "nope")


def _split_tier(demands: dict[str, float], response: dict[str, float], *, decided: bool = False,
                identified: bool | None = True, bursty: bool = False,
                preferred: str | None = None) -> TierModel:
    """A tier whose Kalman split is ``demands``, whose response-time split is 3 : 1 and whose
    PS reading is undecided unless ``decided``."""
    return TierModel(tier="db", cores=1, demands=demands,
                     demand_std={c: 1e-4 for c in demands}, regression={}, idc=1.0,
                     idc_flag=None, mean_service=None, p95=None, process=None, fit=None,
                     bursty=bursty, windows=100, estimator="kalman",
                     class_response=response, split={"a": 0.003, "b": 0.001},
                     split_discipline="ps", split_decided=decided, split_identified=identified,
                     split_preferred=preferred)


def test_an_undecided_split_replaces_an_estimator_split_no_discipline_allows():
    mix = np.array([0.5, 0.5])
    # the estimator puts 4 ms on b, which spends 1.5 ms at the tier: impossible (R >= D); the
    # agreeing split (3 : 1) takes over, scaled to the estimator's aggregate 2.5 ms
    wrong = {"a": 0.001, "b": 0.004}
    resp = {"a": 0.0045, "b": 0.0015}
    d = tier_demands(_split_tier(wrong, resp), ["a", "b"], mix, "selected")
    assert d.tolist() == pytest.approx([0.00375, 0.00125])
    assert split_replaced_flags([_split_tier(wrong, resp)], ["a", "b"], mix, "selected") == [
        "split_replaced: db: the kalman put b above its response time at the tier; the "
        "response-time split is used (its PS and FCFS readings agree)"]
    assert split_replaced_flags([_split_tier(wrong, resp)], ["a", "b"], mix,
                                "kalman_checked") == []
    # a possible estimator split stands (within the 10% margin too), as before
    for ok in ({"a": 0.004, "b": 0.001}, {"a": 0.0049, "b": 0.00165}):
        assert tier_demands(_split_tier(ok, resp), ["a", "b"], mix, "selected").tolist() == \
            pytest.approx([ok["a"], ok["b"]])
    # not identified, or bursty, or no response time for the class: the estimator's split
    # ... or response times the split itself breaks once scaled to the aggregate (a tier timed
    # short of its CPU work: 0.1 ms against 2.5 ms)
    for tier in (_split_tier(wrong, resp, identified=False), _split_tier(wrong, resp, bursty=True),
                 _split_tier(wrong, {"a": 0.0045}), _split_tier(wrong, {"a": 1e-4, "b": 1e-4})):
        assert tier_demands(tier, ["a", "b"], mix, "selected").tolist() == \
            pytest.approx([0.001, 0.004])


def test_an_aggregate_beyond_the_times_judges_both_splits_against_the_times_scaled():
    mix = np.array([0.5, 0.5])
    resp = {"a": 0.0045, "b": 0.0015}        # 3 : 1, as the split; 3 ms over the mix
    # the estimator's aggregate is 4.5 ms, 1.5x the times (work outside the timed spans):
    # no split keeps every class within its time. 8 ms on b is beyond b's time scaled by the
    # surplus (2.25 ms): the split takes over, scaled to the estimator's aggregate
    wrong = {"a": 0.001, "b": 0.008}
    tier = _split_tier(wrong, resp)
    assert tier_demands(tier, ["a", "b"], mix, "selected").tolist() == \
        pytest.approx([0.00675, 0.00225])
    assert split_replaced_flags([tier], ["a", "b"], mix, "selected") == [
        "split_replaced: db: the kalman put b above its response time at the tier (its "
        "aggregate 1.50x the classes' time there, the surplus spread as the times); the "
        "response-time split is used (its PS and FCFS readings agree)"]
    # an estimator split within the times scaled by the surplus (and the margin) stands
    within = {"a": 0.0066, "b": 0.0024}
    assert tier_demands(_split_tier(within, resp), ["a", "b"], mix, "selected").tolist() == \
        pytest.approx([0.0066, 0.0024])
    assert split_replaced_flags([_split_tier(within, resp)], ["a", "b"], mix, "selected") == []


def test_an_unidentified_split_stands_in_where_the_utilization_law_prefers_its_ps_reading():
    mix = np.array([0.5, 0.5])
    resp = {"a": 0.0045, "b": 0.0015}
    # a possible estimator split gives way too: under a steady mix it is noise
    possible = {"a": 0.001, "b": 0.0012}
    tier = _split_tier(possible, resp, identified=False, preferred="ps")
    assert tier_demands(tier, ["a", "b"], mix, "selected").tolist() == \
        pytest.approx([0.0016500, 0.00055])
    assert split_replaced_flags([tier], ["a", "b"], mix, "selected") == [
        "split_replaced: db: the response-time split is undecided and its readings apart; the "
        "windows' utilization law prefers its PS reading to its FCFS one, and the PS reading "
        "is used"]
    # FCFS preferred or nothing preferred, bursty, decided (FCFS), or a split that breaks the
    # response times once scaled: the estimator's split, unflagged
    for t in (_split_tier(possible, resp, identified=False, preferred="fcfs"),
              _split_tier(possible, resp, identified=False),
              _split_tier(possible, resp, identified=False, preferred="ps", bursty=True),
              _split_tier(possible, resp, identified=False, preferred="ps", decided=True),
              _split_tier(possible, {"a": 1e-4, "b": 1e-4}, identified=False, preferred="ps")):
        assert tier_demands(t, ["a", "b"], mix, "selected").tolist() == \
            pytest.approx([0.001, 0.0012])
        assert split_replaced_flags([t], ["a", "b"], mix, "selected") == []


def test_a_tier_configured_ps_takes_the_ps_reading_of_its_undecided_split():
    mix = np.array([0.5, 0.5])
    resp = {"a": 0.0045, "b": 0.0015}
    # a possible estimator split, with the windows' discipline undecided and its readings
    # apart: under the configured PS the split's PS reading (3 : 1) takes over, scaled to the
    # estimator's aggregate (1.1 ms over the mix), whatever the utilization law prefers
    possible = {"a": 0.001, "b": 0.0012}
    for preferred in (None, "fcfs"):
        tier = _split_tier(possible, resp, identified=False, preferred=preferred)
        assert tier_demands(tier, ["a", "b"], mix, "selected", discipline="ps").tolist() == \
            pytest.approx([0.00165, 0.00055])
        assert tier_demands(tier, ["a", "b"], mix, "selected").tolist() == \
            pytest.approx([0.001, 0.0012])
        assert split_replaced_flags([tier], ["a", "b"], mix, "selected",
                                    disciplines={"db": "ps"}) == [
            "split_replaced: db: configured processor sharing, which the windows left "
            "undecided; the PS reading of the response-time split is used"]
    # configured FCFS or nothing, bursty, decided FCFS, or a class without a split yet: the
    # estimator's split stands
    fcfs = _split_tier(possible, resp, identified=True, decided=True)
    fcfs = dataclasses.replace(fcfs, split_discipline="fcfs")
    partial = dataclasses.replace(_split_tier(possible, resp, identified=False),
                                  split={"a": 0.003})
    for tier, discipline in ((_split_tier(possible, resp, identified=False), "fcfs"),
                             (_split_tier(possible, resp, identified=False), None),
                             (_split_tier(possible, resp, identified=False, bursty=True), "ps"),
                             (fcfs, "ps"), (partial, "ps")):
        assert tier_demands(tier, ["a", "b"], mix, "selected",
                            discipline=discipline).tolist() == pytest.approx([0.001, 0.0012])
    # through build_model: the configured disciplines reach the split
    tier = _split_tier(possible, resp, identified=False)
    model = build_model([tier], ["a", "b"], {"a": 0.5, "b": 0.5}, 1.0,
                        SystemConfig(disciplines={"db": "ps"}))
    assert model.D_mc[0].tolist() == pytest.approx([0.00165, 0.00055])
    assert any(f.startswith("split_replaced: db: configured") for f in model.flags)


def test_a_split_the_configured_ps_decides_is_not_called_unidentified():
    mix = np.array([0.5, 0.5])
    resp = {"a": 0.0045, "b": 0.0015}
    tier = _split_tier({"a": 0.001, "b": 0.0012}, resp, identified=False)
    bursty = _split_tier({"a": 0.001, "b": 0.0012}, resp, identified=False, bursty=True)
    declared = {"db": "ps"}
    # the declared discipline decides the split: neither flag nor trust reason nor withheld
    # remedy calls it unidentified; without the declaration, on a bursty tier (whose split
    # the declaration does not decide) or under kalman_checked, they do
    assert undecided_splits([tier], ["a", "b"], mix, "selected", declared) == []
    assert undecided_splits([tier], ["a", "b"], mix, "selected", None) == [tier]
    assert undecided_splits([bursty], ["a", "b"], mix, "selected", declared) == [bursty]
    assert undecided_splits([tier], ["a", "b"], mix, "kalman_checked", declared) == [tier]
    model = build_model([tier], ["a", "b"], {"a": 0.5, "b": 0.5}, 1.0,
                        SystemConfig(disciplines=declared))
    assert not any(f.startswith("split_unidentified") for f in model.flags)
    plain = build_model([tier], ["a", "b"], {"a": 0.5, "b": 0.5}, 1.0, SystemConfig())
    assert any(f.startswith("split_unidentified: db") for f in plain.flags)
    pred = {}
    assert not any(r.startswith("split_unidentified") for r in
                   trust_reasons(pred, [tier], model, undecided_splits(
                       [tier], ["a", "b"], mix, "selected", declared)))
    assert any(r.startswith("split_unidentified: db") for r in trust_reasons(pred, [tier], plain))


def test_build_model_follows_the_configured_policy():
    reg = {"a": 0.002, "b": 0.004}
    front = _tier("kalman", {"a": 0.010, "b": 0.001})
    db = _tier("regression", reg)
    mix = {"a": 0.5, "b": 0.5}
    sel = build_model([front, db], ["a", "b"], mix, 0.5, SystemConfig())
    assert sel.D_mc[1].tolist() == [0.002, 0.004]
    assert sel.D_mc[0].tolist() == [0.010, 0.001]
    old = build_model([front, db], ["a", "b"], mix, 0.5,
                      SystemConfig(demand_policy="kalman_checked"))
    assert old.D_mc[1, 0] == pytest.approx(old.D_mc[1, 1])


# -------------------------------------------------------------------------------- tier state
def _windows(n: int, seed: int, step_at: int | None = None, factor: float = 3.0,
             start: int = 0) -> list[Window]:
    """``n`` 5-s windows of a single-core tier with exact busy time ``U = sum_c X_c D_c``
    (constant service: the regression is exact), a mix varying +-50% per window; class ``c``
    costs ``factor`` x from window ``step_at`` on."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(start, start + n):
        D = DEMANDS * np.where((step_at is not None and k >= step_at)
                               & (np.arange(3) == 2), factor, 1.0)
        counts = np.round(rng.uniform(0.5, 1.5, 3) * np.array([60.0, 30.0, 12.0]))
        U = float(counts @ D / 5.0)
        out.append(Window(system="s", tier="db", end=1000.0 + 5.0 * k, window_s=5.0,
                          utilization=U, cores=1,
                          completions={c: float(v) for c, v in zip(CLASSES, counts)}))
    return out


def _feed(tier: TierState, windows: list[Window], refresh_every: int = 12) -> list[TierModel]:
    """Windows one at a time, a refresh every ``refresh_every`` (the solve cadence)."""
    models = []
    for i, w in enumerate(windows):
        _feed_one(tier, w, i)
        if (i + 1) % refresh_every == 0:
            models.append(tier.refresh())
    return models


def test_the_tier_scores_each_estimators_demands_from_before_the_window():
    """The residuals the tier keeps are those of :func:`estimators.selection.select_estimator`
    given the demands each estimator had before each window (recorded here window by window,
    independently of the tier's bookkeeping), and so are the errors it selects by."""
    tier = TierState("db", SystemConfig())
    windows = _windows(150, seed=1)
    kal, reg = [], []
    for i, w in enumerate(windows):
        x = tier.kalman.x.copy() if tier.kalman is not None else np.zeros(3)
        kal.append(x if (x > 0).any() else np.full(3, np.nan))
        reg.append([tier.regression.get(c, np.nan) for c in CLASSES])
        _feed_one(tier, w, i)
        if (i + 1) % 12 == 0:
            tier.refresh()
    last = windows[-SELECTION_WINDOWS:]
    U = np.array([w.utilization for w in last])
    X = np.array([[w.completions[c] / w.window_s for c in CLASSES] for w in last])
    expected = select_estimator(U, X, {"kalman": np.array(kal[-SELECTION_WINDOWS:]),
                                       "regression": np.array(reg[-SELECTION_WINDOWS:])})
    z, r_kalman, r_regression = np.array(tier.scores).T
    assert z.tolist() == pytest.approx(U.tolist(), rel=1e-12)
    for name, r in (("kalman", r_kalman), ("regression", r_regression)):
        want = U - np.einsum("kc,kc->k", X, np.array((kal if name == "kalman" else reg)
                                                       [-SELECTION_WINDOWS:]))
        np.testing.assert_allclose(r, want, rtol=1e-9, atol=1e-12)
    got = select_by_residuals(z, {"kalman": r_kalman, "regression": r_regression})
    assert got.estimator == expected.estimator
    assert got.errors == pytest.approx(expected.errors, rel=1e-9)
    # what the tier runs at solve time: the same choice from its rows
    kept = select_by_scores(tier.scores, ("kalman", "regression"))
    assert kept.estimator == expected.estimator == tier._select()
    assert kept.errors == pytest.approx(expected.errors, rel=1e-9)
    assert np.isnan(r_regression).sum() < SELECTION_WINDOWS   # scored


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), windows=st.integers(0, 70),
       missing=st.floats(0.0, 1.0), margin=st.floats(0.0, 0.9), least=st.integers(0, 8))
def test_selection_from_rows_equals_selection_from_arrays(seed, windows, missing, margin,
                                                          least):
    rng = np.random.default_rng(seed)
    z = rng.random(windows) * rng.integers(0, 2)            # sometimes no work at all
    r = rng.normal(0.0, 0.05, (2, windows)) * rng.random((2, 1))
    r[rng.random((2, windows)) < missing] = np.nan
    rows = list(zip(z.tolist(), r[0].tolist(), r[1].tolist()))
    want = select_by_residuals(z, {"kalman": r[0], "regression": r[1]}, margin=margin,
                               min_windows=least)
    got = select_by_scores(rows, ("kalman", "regression"), margin=margin, min_windows=least)
    assert (got.estimator, got.windows) == (want.estimator, want.windows)
    for name in ("kalman", "regression"):
        if want.errors[name] is None:
            assert got.errors[name] is None
        else:
            assert got.errors[name] == pytest.approx(want.errors[name], rel=1e-12)


def _feed_one(tier: TierState, w: Window, i: int) -> None:
    reason, late, _ = tier.admit(w)
    assert reason is None
    tier.accept(w, late, i, [])
    step_tiers([tier])


def test_exact_data_selects_the_regression_and_a_stale_regression_loses_to_kalman():
    """Constant service: the regression predicts utilization exactly and is picked; right
    after one class's demand triples, the regression in force (fitted before the change)
    predicts badly and the Kalman filter, which follows the change, is picked."""
    tier = TierState("db", SystemConfig())
    models = _feed(tier, _windows(240, seed=3))
    assert models[-1].estimator == "regression"
    m = build_model([models[-1]], CLASSES, dict(zip(CLASSES, [0.5, 0.3, 0.2])), 0.5,
                    SystemConfig())
    assert m.D_mc[0] == pytest.approx(DEMANDS, rel=1e-6)
    after = _feed(tier, _windows(24, seed=4, step_at=240, start=240))
    assert after[-1].estimator == "kalman"


def test_old_policy_tracks_nothing_and_keeps_kalman():
    tier = TierState("db", SystemConfig(demand_policy="kalman_checked"))
    models = _feed(tier, _windows(240, seed=3))
    assert models[-1].estimator == "kalman"
    assert len(tier.scores) == 0


def test_selection_state_round_trips():
    tier = TierState("db", SystemConfig())
    _feed(tier, _windows(100, seed=5))
    again = TierState.from_dict(tier.to_dict(), SystemConfig())
    np.testing.assert_array_equal(np.array(again.scores), np.array(tier.scores))
    assert again.estimator == tier.estimator
    rest = _windows(60, seed=6, start=100)
    assert [m.estimator for m in _feed(again, rest)] == [m.estimator for m in _feed(tier, rest)]


_score = st.one_of(st.floats(-1e3, 1e3), st.just(float("nan")), st.just(float("inf")),
                   st.just(float("-inf")))


@given(st.lists(st.tuples(st.floats(0, 10), _score, _score), max_size=SELECTION_WINDOWS))
def test_selection_columns_are_the_rows_with_nan_as_none(rows):
    """The state's selection columns: each row's values in order, NaN as ``None`` (JSON has
    none), everything else as it is -- what a row-by-row conversion gives."""
    tier = TierState("db", SystemConfig())
    tier.scores.extend(rows)
    sel = tier.to_dict()["selection"]
    assert sel["busy"] == [r[0] for r in rows]
    for i, name in ((1, "kalman"), (2, "regression")):
        expected = [None if r[i] != r[i] else r[i] for r in rows]
        assert [v is None for v in sel[name]] == [v is None for v in expected]
        assert [v for v in sel[name] if v is not None] == [v for v in expected if v is not None]


def test_the_prediction_names_the_estimator_each_tier_used():
    """Constant service: the regression is exact and picked; the prediction record says so
    (and ``kalman_checked`` always reports the Kalman filter)."""
    from streams.core.config import Config
    from streams.engine.pipeline import Pipeline

    records = [{"system": w.system, "tier": w.tier, "end": w.end, "window_s": w.window_s,
                "utilization": w.utilization, "cores": w.cores, "completions": w.completions}
               for w in _windows(240, seed=3)]
    for policy, expected in (("selected", "regression"), ("kalman_checked", "kalman")):
        pipeline = Pipeline(Config(defaults=SystemConfig(demand_policy=policy)))
        predictions = [p for r in records for p in pipeline.process(r).predictions]
        assert predictions, policy
        assert predictions[-1]["tiers"]["db"]["estimator"] == expected, policy


def test_a_window_scores_and_sums_the_same_however_the_windows_are_batched():
    """The worker steps a tier one window at a time, ``perfcast run`` in large blocks: the
    selection's rows and the interval sums come out bit for bit the same."""
    windows = _windows(90, seed=7)
    one, block = TierState("db", SystemConfig()), TierState("db", SystemConfig())
    for i, w in enumerate(windows):
        _feed_one(one, w, i)
        if i == 40:
            one.refresh()
    for i, w in enumerate(windows):
        reason, late, _ = block.admit(w)
        block.accept(w, late, i, [])
        if i in (40, 89):                       # two blocks, a refresh between them
            step_tiers([block])
        if i == 40:
            block.refresh()
    assert len(one.scores) == SELECTION_WINDOWS
    np.testing.assert_array_equal(np.array(one.scores), np.array(block.scores))
    assert one.interval.to_dict() == block.interval.to_dict()
