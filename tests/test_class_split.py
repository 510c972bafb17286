"""The per-class split from per-class response times (:mod:`estimators.class_split`), the
closed PS tier simulator (:mod:`solvers.simulation.ps_server`), the processor-sharing read-back
of the model and the load-dependence flag (:func:`streams.core.tier.load_dependence`)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from estimators.class_split import (AGREE, MIN_SPAN, PREFER_LR, ClassSplit, SplitSums,
                                    above_response, class_split, class_split_many,
                                    preferred_reading, split_rows, window_demands)
from solvers.simulation.ps_server import monitor_ps
from streams.core.tier import load_dependence
from streams.predict.model import SystemModel

CLASSES = ["search", "product", "home", "buy"]
D = np.array([0.12, 0.006, 0.003, 0.0025])


def _windows(rng, U, response, T=5.0, steady=False):
    """Windows at utilizations ``U`` with a random mix (``steady``: one mix) whose throughputs
    satisfy the utilization law exactly; ``response(u, d)`` the per-class response times."""
    K = len(U)
    mix = rng.dirichlet(np.full(D.size, 4.0), size=1 if steady else K).repeat(
        K if steady else 1, axis=0)
    X = mix * (U / (mix @ D))[:, None]
    R = np.array([response(u, D) for u in U])
    return np.asarray(U), X, R, X * T


def _sums(U, X, R, counts, parts=1):
    s = SplitSums()
    s.grow(CLASSES)
    for idx in np.array_split(np.arange(len(U)), parts):
        s.add(U[idx], np.ones(idx.size), X[idx], R[idx], counts[idx])
    return s


def _levels(rng, count=200):
    """Utilizations held for a minute (12 windows of 5 s) at a time, 10-80%: the load test
    reads blocks of a minute."""
    return np.repeat(rng.uniform(0.1, 0.8, -(-count // 12)), 12)[:count]


def _ps(u, d):
    return d / (1.0 - u)


def _fcfs(u, d):
    return d + 0.05 * u / (1.0 - u)


def test_exact_ps_windows_give_the_demands_and_ps():
    """Exact under a steady mix (the pooled ratio: a mix that moves with the load weighs each
    class's mean stretch differently, a bias of a few percent on simulated tiers)."""
    rng = np.random.default_rng(1)
    sp = class_split(_sums(*_windows(rng, _levels(rng), _ps, steady=True)))
    assert sp.discipline == "ps" and sp.decided and sp.identified
    assert np.allclose([sp.demands[c] for c in CLASSES], D, rtol=1e-9)
    moving = class_split(_sums(*_windows(rng, _levels(rng), _ps)))
    assert [moving.demands[c] for c in CLASSES] == pytest.approx(D.tolist(), rel=0.1)


def test_exact_fcfs_windows_give_the_demands_and_fcfs():
    """Exact windows; the load test on blocks of a minute at one load each."""
    rng = np.random.default_rng(2)
    sp = class_split(_sums(*_windows(rng, _levels(rng), _fcfs, steady=True)))
    assert sp.discipline == "fcfs" and sp.decided and sp.identified, sp.scores
    assert np.allclose([sp.demands[c] for c in CLASSES], D, rtol=1e-9)
    assert sp.span > MIN_SPAN


def test_ps_is_decided_without_a_load_span_when_fcfs_would_be_negative():
    rng = np.random.default_rng(3)
    sp = class_split(_sums(*_windows(rng, np.full(200, 0.6), _ps)))
    assert sp.scores == {"ps": None, "fcfs": None}
    assert sp.decided and sp.discipline == "ps" and sp.identified
    assert sp.by_discipline["fcfs"]["buy"] == 0.0          # R_c - W < 0, floored


def test_fcfs_at_one_load_is_undecided_and_not_identified():
    rng = np.random.default_rng(4)
    sp = class_split(_sums(*_windows(rng, np.full(200, 0.7), _fcfs)))
    assert not sp.decided and sp.agreement > AGREE and sp.identified is False
    assert "do not span loads" in sp.reason
    # at a low load both readings agree: identified without telling the discipline
    low = class_split(_sums(*_windows(rng, np.full(200, 0.02), _fcfs)))
    assert not low.decided and low.identified and low.reason is None


def test_the_sums_do_not_depend_on_batching_and_round_trip():
    rng = np.random.default_rng(5)
    data = _windows(rng, _levels(rng, 90), _ps)
    one, three = _sums(*data), _sums(*data, parts=7)
    for d in one.sums:
        assert np.array_equal(one.sums[d], three.sums[d])
    assert np.array_equal(one.pool, three.pool) and np.array_equal(one.block, three.block)
    assert one.sums["ps"][:, 2].sum() > 0                  # whole blocks reached the load test
    back = SplitSums.from_dict(one.to_dict())
    assert class_split(back) == class_split(one)
    one.decay(0.5)
    assert one.windows == 45.0


def test_rows_of_many_tiers_deferred_give_the_same_sums_as_adding_each():
    """split_rows over two tiers' windows at once, each tier's rows deferred in pieces and
    folded when read, gives the sums (and the split) of adding each tier's windows in one call;
    a class added between deferrals folds what came before it first."""
    rng = np.random.default_rng(7)
    a, b = _windows(rng, _levels(rng, 60), _ps), _windows(rng, _levels(rng, 60), _fcfs)
    U, X, R, counts = (np.concatenate([x, y]) for x, y in zip(a, b))
    rows, blocks, ok = split_rows(U, np.ones(U.size), X, R, counts)
    for k, data in enumerate((a, b)):
        eager, lazy = _sums(*data), SplitSums()
        lazy.grow(CLASSES)
        for piece in np.array_split(np.arange(60 * k, 60 * (k + 1)), 5):
            lazy.defer(rows[piece], blocks[piece], ok[piece])
        assert lazy.pending and class_split(lazy) == class_split(eager)
        for d in eager.sums:
            assert np.array_equal(eager.sums[d], lazy.sums[d])
        assert np.array_equal(eager.pool, lazy.pool) and np.array_equal(eager.block, lazy.block)
    one, two = SplitSums(), SplitSums()
    for s in (one, two):
        s.grow(CLASSES[:3])
    narrow = split_rows(U[:30], np.ones(30), X[:30, :3], R[:30, :3], counts[:30, :3])
    one.add(U[:30], np.ones(30), X[:30, :3], R[:30, :3], counts[:30, :3])
    two.defer(*narrow)
    for s in (one, two):
        s.grow(CLASSES)
        s.add(U[30:60], np.ones(30), X[30:60], R[30:60], counts[30:60])
    assert one.to_dict() == two.to_dict()


def test_a_rounds_splits_together_are_each_tiers_alone_bit_for_bit():
    """class_split_many over tiers of several class counts (PS and FCFS, one mix and a moving
    one, a class that never completes, windows still deferred, blocks completed in the fold)
    gives each tier's split and sums exactly as reading that tier alone."""
    rng = np.random.default_rng(11)
    tiers = []
    for k in range(9):
        data = list(_windows(rng, _levels(rng, 40 + 10 * k), (_ps, _fcfs)[k % 2],
                             steady=k % 3 == 0))
        if k % 4 == 1:
            data[1][:, 2] = data[3][:, 2] = 0.0           # a class without completions
            data[2][:, 2] = np.nan
        width = 3 if k % 3 == 2 else 4
        U, X, R, counts = data[0], *(a[:, :width] for a in data[1:])
        s = SplitSums()
        s.grow(CLASSES[:width])
        half = U.size // 2
        s.add(U[:half], np.ones(half), X[:half], R[:half], counts[:half])
        s.defer(*split_rows(U[half:], np.ones(U.size - half), X[half:], R[half:], counts[half:]))
        tiers.append(s)
    for k in range(4):                      # 14 classes: numpy's sums pairwise, not in a row
        K = 200
        X = rng.uniform(0.0, 20.0, (K, 14)) * ((np.arange(14) != k) | (k > 1))
        R = np.where(X > 0, rng.uniform(0.001, 0.2, (K, 14)), np.nan)
        U = rng.uniform(0.1, 0.9, K) if k % 2 else rng.uniform(0.5, 0.55, K)
        s = SplitSums()
        s.grow([f"c{i}" for i in range(14)])
        s.add(U[:150], np.full(150, 2.0), X[:150], R[:150], 5.0 * X[:150])
        s.defer(*split_rows(U[150:], np.full(50, 2.0), X[150:], R[150:], 5.0 * X[150:]))
        tiers.append(s)
    alone = copy.deepcopy(tiers)
    assert all(s.pending for s in tiers)
    together = class_split_many(tiers)
    assert together == [class_split(s) for s in alone]
    assert sum(sp is not None and sp.scores["ps"] is not None for sp in together) >= 3
    for a, b in zip(alone, tiers):
        assert not b.pending and a.to_dict() == b.to_dict()
        for d in a.sums:
            assert a.sums[d].tobytes() == b.sums[d].tobytes()


def test_a_class_needs_completions_and_response_times():
    rng = np.random.default_rng(6)
    U, X, R, counts = _windows(rng, rng.uniform(0.1, 0.8, 3), _ps, T=0.1)
    assert class_split(_sums(U, X, R, counts)) is None       # a few completions: no split
    U, X, R, counts = _windows(rng, rng.uniform(0.1, 0.8, 50), _ps)
    R[:, 1] = np.nan                                          # product never reports one
    assert class_split(_sums(U, X, R, counts)) is None
    assert class_split(SplitSums()) is None
    with pytest.raises(ValueError, match="discipline"):
        window_demands(U, X, R, "lifo")


def test_ps_simulation_closed_form_and_split():
    """One user alone meets no queue: R_c = D_c; with many, the split reads the demands."""
    alone = monitor_ps([0.01, 0.002], [0.5, 0.5], 1, 5.0, 2000, 100.0, seed=1)
    done = np.array([[r["completions"]["c0"], r["completions"]["c1"]] for r in alone])
    rt = np.array([[r["response_time_s"].get(c, 0) for c in ("c0", "c1")] for r in alone])
    mean = (rt * done).sum(axis=0) / done.sum(axis=0)
    assert mean == pytest.approx([0.01, 0.002], rel=0.1)
    recs = monitor_ps(D, [0.25, 0.25, 0.3, 0.2], 15, 1.0, 300, 5.0, classes=CLASSES, seed=2)
    U = np.array([r["utilization"] for r in recs])
    counts = np.array([[r["completions"][c] for c in CLASSES] for r in recs])
    R = np.array([[r["response_time_s"].get(c, np.nan) for c in CLASSES] for r in recs])
    sp = class_split(_sums(U, counts / 5.0, R, counts))
    assert sp.discipline == "ps"
    assert [sp.demands[c] for c in CLASSES] == pytest.approx(D.tolist(), rel=0.25)
    with pytest.raises(ValueError, match="demands"):
        monitor_ps([0.0], [1.0], 1, 1.0, 10, 1.0)
    with pytest.raises(ValueError, match="mix"):
        monitor_ps([0.1], [1.0, 2.0], 1, 1.0, 10, 1.0)


def test_ps_read_back_stretches_every_class_alike():
    kw = dict(tiers=["db"], classes=["a", "b"], D_mc=np.array([[0.1, 0.01]]),
              mix=np.array([0.5, 0.5]), servers=np.array([1.0]), think_time=1.0,
              sla=np.array([np.inf, np.inf]), processes=None, map_limit=100)
    ps = SystemModel(**kw, ps=np.array([True]))
    fcfs = SystemModel(**kw)
    p, f = ps.at(10), fcfs.at(10)
    assert p.response[0] / p.response[1] == pytest.approx(10.0)
    assert f.response[0] - f.response[1] == pytest.approx(0.09)
    assert p.throughput == f.throughput                      # the aggregate is the same
    assert SystemModel.from_dict(ps.to_dict()).ps.tolist() == [True]


def _load_windows(rng, growth):
    U = np.repeat(np.linspace(0.2, 0.8, 10), 24) + rng.normal(0, 0.02, 240)
    T = np.full(U.size, 5.0)
    d = np.array([0.02, 0.005])
    counts = rng.poisson(np.outer(U * T / ((1 + growth * (U - 0.2)) * 0.0125), [0.5, 0.5]))
    return U, np.ones(U.size), T, counts.astype(float), d


def test_load_dependence_is_flagged_only_where_the_history_spans_loads():
    rng = np.random.default_rng(7)
    U, C, T, counts, d = _load_windows(rng, 0.5)
    flag = load_dependence("db", U, C, T, counts, d)
    assert flag is not None and flag.startswith("demand_load_dependent: db")
    U, C, T, counts, d = _load_windows(rng, 0.0)
    assert load_dependence("db", U, C, T, counts, d) is None
    steady = np.full(240, 0.5) + rng.normal(0, 0.05, 240)      # one load: nothing claimed
    assert load_dependence("db", steady, C, T, counts, d) is None


def test_trust_reasons_name_each_failure():
    from streams.core.outputs import Prediction, TierPrediction
    from streams.core.tier import TierModel
    from streams.predict.confidence import trust_reasons

    def part(u, measured):
        return TierPrediction(utilization=u, utilization_forecast=u, utilization_measured=measured,
                              demand_s=0.01, idc=None, idc_flag=None, idc_lower=None,
                              idc_upper=None, idc_reference=None, bursty=False, map2=None,
                              estimator="kalman", bottleneck_probability=None, demands={},
                              utilization_error=abs(u - measured))

    def tier(identified):
        return TierModel(tier="db", cores=1, demands={}, demand_std={}, regression={}, idc=None,
                         idc_flag=None, mean_service=None, p95=None, process=None, fit=None,
                         bursty=False, windows=10, split_identified=identified,
                         split_reason="discipline undecided")

    good = Prediction(system="s", time=0.0, solve=1, think_time_s=1.0, horizon_s=60.0,
                      model="mva", flags=[], model_error=0.1, tiers={"db": part(0.5, 0.55)})
    assert trust_reasons(good, [tier(True)]) == []
    assert trust_reasons(good, [tier(None)]) == []
    bad = Prediction(system="s", time=0.0, solve=1, think_time_s=1.0, horizon_s=60.0,
                     model="mva", flags=[], model_error=0.48, model_error_class="buy",
                     model_error_class_max=0.6, tiers={"db": part(0.3, 0.45)})
    reasons = trust_reasons(bad, [tier(False)])
    assert len(reasons) == 4
    assert reasons[0].startswith("mean response time off the measured one by 48%")
    assert "'buy'" in reasons[1] and "db utilization 0.30 against 0.45" in reasons[2]
    assert reasons[3] == "split_unidentified: db: discipline undecided"


def test_the_load_tests_quantiles_are_numpys_bit_for_bit():
    """The load test's 10th and 90th percentiles (its own rule, without np.quantile's
    machinery) are np.quantile's exactly: sizes 1 to hundreds, ties, wide magnitudes."""
    from streams.core.tier import _quantiles

    rng = np.random.default_rng(7)
    for trial in range(3000):
        u = rng.random(int(rng.integers(1, 400)))
        if trial % 3 == 0:
            u = np.round(u, 2)                           # ties
        if trial % 5 == 0:
            u = u * 10.0 ** rng.uniform(-6, 6)
        levels = (0.1, 0.9) if trial % 2 else tuple(rng.random(3).tolist())
        assert _quantiles(u, levels) == np.quantile(u, list(levels)).tolist()


def test_a_demand_above_the_response_time_is_no_disciplines_split():
    d = {"a": 0.010, "b": 0.0031, "c": 0.002, "d": 0.5}
    r = {"a": 0.012, "b": 0.0030, "c": 0.0015}        # d has no response time: not judged
    assert above_response(d, r) == ["c"]              # b is within the 10% margin
    assert above_response(d, r, margin=0.0) == ["b", "c"]
    assert above_response(d, {"c": float("nan")}) == []
    with pytest.raises(ValueError, match="margin"):
        above_response(d, r, margin=-0.1)


def test_a_block_of_absurd_response_times_adds_nothing_to_the_load_test():
    """Response times so large that a block's stretch squared overflows: the block's weight is
    nil, so the load test's block columns stay those of the other windows, and no infinite term
    times that nil weight turns them NaN."""
    rng = np.random.default_rng(4)
    U, X, R, counts = _windows(rng, _levels(rng, 120), _ps)
    plain = _sums(U, X, R, counts)
    huge = _sums(np.concatenate([U, np.full(12, 0.5)]), np.vstack([X, X[:12]]),
                 np.vstack([R, np.full((12, R.shape[1]), 1e307)]), np.vstack([counts, counts[:12]]))
    for d in ("ps", "fcfs"):
        assert not np.isnan(huge.sums[d]).any()
        assert np.array_equal(huge.sums[d][:, 2:7], plain.sums[d][:, 2:7])


def _readings(ps, fcfs):
    """An undecided, unidentified split whose two readings are ``ps`` and ``fcfs``."""
    return ClassSplit(classes=tuple(CLASSES), demands=dict(zip(CLASSES, ps)), discipline="ps",
                      by_discipline={"ps": dict(zip(CLASSES, ps)),
                                     "fcfs": dict(zip(CLASSES, fcfs))},
                      scores={"ps": None, "fcfs": None}, decided=False, identified=False,
                      agreement=0.5, span=0.0, reason="undecided")


def test_the_utilization_law_prefers_the_reading_its_windows_fit():
    """Windows of a steady mix (+-10%) whose busy time is the true split's plus noise: the true
    reading is preferred, whichever discipline carries it; a reading off by a common factor is
    no worse (each is scaled to fit); readings alike, too few windows, or noise that drowns
    the difference: neither."""
    rng = np.random.default_rng(11)
    wrong = np.array([0.09, 0.012, 0.0, 0.0])           # light classes' work moved to heavier
    X = np.array([2.0, 20.0, 30.0, 40.0]) * rng.uniform(0.9, 1.1, (120, 4))
    z = X @ D + rng.normal(0.0, 0.005, 120)
    assert preferred_reading(_readings(D, wrong), z, X)[0] == "ps"
    choice, stat = preferred_reading(_readings(wrong, D), z, X)
    assert choice == "fcfs" and stat < -PREFER_LR
    assert preferred_reading(_readings(2.0 * D, wrong), z, X)[0] == "ps"
    assert preferred_reading(_readings(D, D), z, X) == (None, 0.0)
    assert preferred_reading(_readings(D, wrong), z[:4], X[:4]) == (None, None)
    noisy = X @ D + rng.normal(0.0, 1.0, 120)
    assert preferred_reading(_readings(D, wrong), noisy, X)[0] is None


def test_a_tier_reads_the_preferred_reading_only_of_an_unidentified_split():
    """A FCFS tier at one load (about 60%) with a noisy utilization: under a steady mix
    (+-5%) the split is unidentified and the windows prefer the FCFS reading; with a mix that
    varies (+-20%) the regression separates every class and nothing is preferred."""
    from streams.core.config import SystemConfig
    from streams.core.records import Window
    from streams.core.tier import TierState, step_tiers
    names, demand = ["a", "b", "c"], np.array([0.004, 0.010, 0.020])
    out = {}
    for spread in (0.05, 0.2):
        rng = np.random.default_rng(0)
        tier = TierState("db", SystemConfig())
        for k in range(200):
            counts = np.round(rng.uniform(1 - spread, 1 + spread, 3) * [240.0, 120.0, 48.0])
            u = float(counts @ demand / 5.0)
            w = Window(system="s", tier="db", end=1000.0 + 5.0 * k, window_s=5.0,
                       utilization=u + rng.normal(0.0, 0.03), cores=1,
                       completions=dict(zip(names, counts.tolist())),
                       response_time_s={c: float(d + 0.01 * u / (1 - u))
                                        for c, d in zip(names, demand)})
            reason, late, _ = tier.admit(w)
            assert reason is None
            tier.accept(w, late, k, [])
            step_tiers([tier])
        out[spread] = tier.refresh()
    assert out[0.05].split_identified is False and out[0.05].split_preferred == "fcfs"
    assert out[0.2].split_identified is None and out[0.2].split_preferred is None
