"""Percentile SLOs in the model (streams.predict.model): quantiles per class, capacity and the
breach on the SLO's statistic, the statistic each class's SLO is on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.mva import mva
from solvers.processes import MAP
from streams.core.config import SLO_QUANTILES, SystemConfig
from streams.predict.model import SystemModel, build_model, model_capacity

P95 = list(SLO_QUANTILES).index("p95")


def _model(sla=(1.0, 1.0), p95=(math.inf, math.inf), processes=None) -> SystemModel:
    D = np.array([0.01, 0.02, 0.015])
    slo = np.full((2, len(SLO_QUANTILES)), math.inf)
    slo[:, P95] = p95
    return SystemModel(tiers=["web", "app", "db"], classes=["a", "b"],
                       D_mc=np.c_[D, 1.5 * D], mix=np.array([0.5, 0.5]),
                       servers=np.array([1.0, 2.0, 1.0]), think_time=1.0,
                       sla=np.asarray(sla, dtype=float), processes=processes, map_limit=600,
                       slo=None if np.isinf(slo).all() else slo)


@pytest.mark.parametrize("bound", [0.12, 0.2, 0.5, 3.0])
def test_a_p95_slo_sets_capacity_where_the_p95_crosses_it(bound):
    m = _model(sla=(math.inf, math.inf), p95=(bound, math.inf))
    cap, limited = m.mva_capacity()
    assert not limited and cap > 0
    k = m.quantile_levels.index(0.95)
    assert m.quantiles(m.at(cap))[0, k] <= bound < m.quantiles(m.at(cap + 1))[0, k]


def test_the_capacity_search_computes_the_solved_points_laws_in_its_first_batch(monkeypatch):
    """A prediction solves now and the forecast, searches the capacity, then asks for both
    points' quantiles: the search's first batch carries them, so no batch of laws is left for
    the prediction, and the answer is the one every probe alone gives."""
    import streams.predict.model as md
    batches = []
    law = md.response_time_quantiles_many

    def counted(*args, **kw):
        batches.append(list(args[3]))
        return law(*args, **kw)

    monkeypatch.setattr(md, "response_time_quantiles_many", counted)
    m = _model(sla=(math.inf, math.inf), p95=(0.3, math.inf))
    n, n_fc = int(0.9 * m.knee()), int(1.1 * m.knee())     # within a factor 2 of its start
    now, fc = m.at(n), m.at(n_fc)
    cap, limited = m.mva_capacity()
    assert {n, n_fc} <= set(batches[0])
    asked = len(batches)
    m.quantiles_many([now, fc])
    assert len(batches) == asked
    alone = _model(sla=(math.inf, math.inf), p95=(0.3, math.inf))
    k = alone.quantile_levels.index(0.95)
    assert not limited
    assert alone.quantiles(alone.at(cap))[0, k] <= 0.3 < alone.quantiles(alone.at(cap + 1))[0, k]
    assert np.allclose(m.quantiles(now), alone.quantiles(alone.at(n)), rtol=1e-12, atol=0)


def test_solved_laws_on_both_sides_of_the_aim_correct_it(monkeypatch):
    """bench.accuracy.percentiles' system (b) solved at 0.9 and 1.1 knees: its p95 SLO's
    answer lies between them; read between the start's and the nearer law's ``R_c / q_c``, the
    aim lands on it: the first pair brackets the answer, one batch after the first, no probe
    alone (from the start's ratio alone the pair misses it by 4 users)."""
    from bench.accuracy.percentiles import SYSTEMS
    import streams.predict.model as md
    asked = []
    many, one = md.response_time_quantiles_many, md.response_time_quantiles

    def counted_many(*args, **kw):
        asked.append(list(args[3]))
        return many(*args, **kw)

    def counted_one(*args, **kw):
        asked.append([args[3]])
        return one(*args, **kw)

    monkeypatch.setattr(md, "response_time_quantiles_many", counted_many)
    monkeypatch.setattr(md, "response_time_quantiles", counted_one)
    m = SYSTEMS["b"].model()
    n, n_fc = int(0.9 * m.knee()), int(1.1 * m.knee())
    m.at(n), m.at(n_fc)
    cap, limited = m.mva_capacity()
    assert not limited and n < cap < n_fc
    assert len(asked) == 2 and asked[1] == [cap, cap + 1]
    k = m.quantile_levels.index(0.95)
    bound = float(SYSTEMS["b"].p95_slo)
    assert m.quantiles(m.at(cap))[:, k].max() <= bound < m.quantiles(m.at(cap + 1))[:, k].max()


def test_a_p95_slo_below_one_requests_own_p95_leaves_no_capacity():
    m = _model(sla=(math.inf, math.inf), p95=(0.01, math.inf))
    assert m.mva_capacity() == (0, False)
    assert m.excess_floor() > 0


def test_mean_and_p95_slos_together_take_the_smaller_capacity():
    m = _model(sla=(math.inf, math.inf), p95=(0.5, math.inf))
    cap, _ = m.mva_capacity()
    # the same bound on the mean allows more users: the p95 lies above the mean
    mean_only = _model(sla=(0.5, math.inf))
    assert mean_only.mva_capacity()[0] > cap
    # and the excess the MAP route's search uses agrees at the answer
    assert m.excess(m.at(cap)) <= 0 < m.excess(m.at(cap + 1))
    both = _model(sla=(0.2, math.inf), p95=(0.5, math.inf))
    assert both.mva_capacity()[0] == min(cap, _model(sla=(0.2, math.inf)).mva_capacity()[0])


def test_the_binding_statistic_is_reported_per_class():
    m = _model(sla=(1.0, 1.0), p95=(0.5, math.inf))
    point = m.at(m.mva_capacity()[0] + 1)
    stat = m.slo_statistic(point)
    assert stat[0] == ("p95", 0.5)
    assert stat[1] == ("mean", 1.0)
    assert _model(sla=(math.inf, math.inf)).slo_statistic(point) == [(None, None)] * 2


def test_quantiles_are_ordered_and_their_law_has_exact_mvas_mean():
    m = _model()
    for n in (1, 30, 80, 200):
        q = m.quantiles(m.at(n))
        assert q.shape == (2, 4) and np.all(np.diff(q, axis=1) > 0)
        law_mean = m.mix @ m._law_quantiles(n)[:, -1]
        # within 1%: the 2-core tier's marginal is exact, the others' complements use Seidmann's
        # approximation for it: closer to exact MVA than the model's own mean (Seidmann at
        # the 2-core tier: 3.6% high at n = 30)
        exact = float(mva(m.D, [n], m.think_time, m.servers).response_time[0])
        assert law_mean == pytest.approx(exact, rel=0.012)


def test_on_the_decomposition_quantiles_come_from_the_bursty_tiers_chains():
    bursty = MAP([[-3.5, 2.0], [2.0, -2.5]], [[1.5, 0.0], [0.0, 0.5]])
    procs = [MAP.exponential(1.0), MAP.exponential(1.0), bursty]
    m = _model(p95=(0.5, 0.5), processes=procs)
    point = m.at(60)
    assert point.model != "mva"
    q = m.quantiles(point)
    assert np.all(np.diff(q, axis=1) > 0)
    assert not any("scaled to its mean" in f for f in m.flags)
    # the median below the mean, p99 above it: a bursty tier's skewed law
    assert np.all(q[:, 0] < point.response) and np.all(q[:, -1] > point.response)
    cap, _ = model_capacity(m)
    assert m.excess(m.at(cap)) <= 0


def test_config_slos_reach_the_model_and_survive_its_dict_form():
    from streams.core.tier import TierModel

    cfg = SystemConfig(tiers=("front", "db"), slo={"buy": {"p95": 0.3, "p99.9": 2.0}})
    demands = {"buy": 0.01, "browse": 0.02}
    tiers = [TierModel(tier=name, cores=1, demands=demands, demand_std={c: 0.0 for c in demands},
                       regression={}, idc=1.0, idc_flag=None, mean_service=None, p95=None,
                       process=None, fit=None, bursty=False, windows=100)
             for name in ("front", "db")]
    m = build_model(tiers, ["buy", "browse"], {"buy": 1.0, "browse": 1.0}, 1.0, cfg)
    assert m.slo[0, P95] == 0.3 and math.isinf(m.slo[1, P95])
    assert m.quantile_levels == (0.5, 0.9, 0.95, 0.99, 0.999)
    back = SystemModel.from_dict(m.to_dict())
    assert np.array_equal(back.slo, m.slo)
    assert SystemModel.from_dict(_model().to_dict()).slo is None


def test_the_measured_mean_is_held_to_the_mean_a_quantile_slo_implies():
    m = _model(sla=(1.0, 1.0), p95=(0.5, math.inf))
    point = m.at(50)
    bounds = m.mean_bounds(point)
    k = m.quantile_levels.index(0.95)
    q = m.quantiles(point)
    assert bounds[0] == pytest.approx(0.5 * point.response[0] / q[0, k])
    assert bounds[0] < 0.5 and bounds[1] == 1.0


@pytest.mark.slow
def test_the_pipeline_predicts_quantiles_and_holds_a_p95_slo():
    """The demo shop (20 -> 40 users over 10 minutes) with a p95 SLO at the mean's SLA: the
    predictions carry the quantiles now and at the forecast, the class's SLO statistic, and a
    capacity no larger than on the mean alone."""
    from dataclasses import replace

    from streams.cli.demo import DemoScenario, demo_config, demo_records
    from streams.core.config import Config
    from streams.engine.pipeline import Pipeline

    sc = DemoScenario(duration_s=600, steady_s=300, users_start=20, users_end=40)
    records = demo_records(sc)
    base = demo_config(sc)
    caps = {}
    for name, slo in (("mean", {}), ("p95", {"*": {"p95": sc.sla_s}})):
        cfg = Config(systems={sc.system: replace(base.systems[sc.system], slo=slo,
                                                 predict_quantiles="always")})
        pipeline = Pipeline(cfg)
        preds = [p for r in records for p in pipeline.process(r).predictions]
        preds += pipeline.finish().predictions
        solved = [p for p in preds if p.model is not None and p.classes]
        assert solved
        last = solved[-1]
        for c, part in last.classes.items():
            q = part.response_time_quantiles_s
            assert list(q) == ["p50", "p90", "p95", "p99"]
            assert q["p50"] < q["p90"] < q["p95"] < q["p99"]
            assert set(part.response_time_quantiles_forecast_s) == set(q)
            assert part.slo_statistic == ("mean" if name == "mean" else "p95")
            assert part.slo_bound_s == sc.sla_s
        caps[name] = (last.capacity_users, last.alert_capacity_users)
    assert caps["p95"][0] < caps["mean"][0]
    assert caps["p95"][1] < caps["mean"][1]     # the predicted-breach alert's, likewise
    # by default (predict_quantiles = "with_slo") a system without a quantile SLO has none
    pipeline = Pipeline(base)
    preds = [p for r in records[:120] for p in pipeline.process(r).predictions]
    parts = [part for p in preds if p.classes for part in p.classes.values()]
    assert parts and all("response_time_quantiles_s" not in part for part in parts)
    assert all(part.slo_statistic == "mean" for part in parts)


def test_on_the_exact_map_chain_quantiles_are_its_own_law():
    bursty = MAP([[-3.5, 2.0], [2.0, -2.5]], [[1.5, 0.0], [0.0, 0.5]])
    D = np.array([0.01, 0.02])
    m = SystemModel(tiers=["front", "db"], classes=["a"], D_mc=D[:, None], mix=np.ones(1),
                    servers=np.ones(2), think_time=0.5, sla=np.array([1.0]),
                    processes=[MAP.exponential(1.0), bursty], map_limit=600)
    point = m.at(12)
    assert point.model == "map"
    q = m.quantiles(point)
    assert np.all(np.diff(q[0]) > 0)
    assert not any("scaled to its mean" in f for f in m.flags)
    law = m._law_quantiles(12)[0, :-1]                  # the exponential network's
    assert q[0, -1] > law[-1]                          # a bursty tier's tail is heavier


def test_remediation_restores_a_p95_slo():
    from streams.predict.whatif import remediate

    m = _model(sla=(math.inf, math.inf), p95=(0.3, 0.3))
    cap, _ = m.mva_capacity()
    required = int(cap * 1.3)
    plan = remediate(m, required, cap)
    actions = [r for r in plan.remedies if r.action.kind != "admission"]
    assert actions
    for remedy in actions:
        assert remedy.capacity >= required
