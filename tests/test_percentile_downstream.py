"""Percentile SLOs downstream of the model: remediation and ``perfcast whatif`` on each class's
SLO statistic (streams.predict.whatif, streams.predict.slo_view, streams.cli.commands)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streams.core.config import SLO_QUANTILES
from streams.predict.model import SystemModel, model_capacity
from streams.predict.slo_view import class_slos, slo_text, slo_values
from streams.predict.whatif import Action, apply, compare, remediate

P95 = list(SLO_QUANTILES).index("p95")


def _model(sla=(math.inf, math.inf), p95=(math.inf, math.inf)) -> SystemModel:
    """``bench/accuracy/percentiles.py``'s case (b): 4/4/8 cores, two classes."""
    D = np.array([[0.008, 0.008], [0.010, 0.010], [0.012, 0.032]])
    slo = np.full((2, len(SLO_QUANTILES)), math.inf)
    slo[:, P95] = p95
    return SystemModel(tiers=["web", "app", "db"], classes=["browse", "buy"], D_mc=D,
                       mix=np.array([0.8, 0.2]), servers=np.array([4.0, 4.0, 8.0]),
                       think_time=1.0, sla=np.asarray(sla, dtype=float), processes=None,
                       map_limit=10_000, slo=None if np.isinf(slo).all() else slo)


def _p95(model: SystemModel, n: int) -> np.ndarray:
    return model.quantiles(model.at(n))[:, model.quantile_levels.index(0.95)]


def test_every_remedy_keeps_every_class_within_its_p95_at_the_required_users():
    m = _model(sla=(1.0, 1.0), p95=(0.15, 0.15))
    cap, _ = model_capacity(m)
    required = int(cap * 1.15)
    plan = remediate(m, required, cap)
    tier_remedies = [r for r in plan.remedies if r.action.kind != "admission"]
    assert {r.action.kind for r in tier_remedies} == {"cores", "cpu_speed", "replicate"}
    for remedy in tier_remedies:
        after = apply(m, remedy.action)
        assert (_p95(after, required) <= 0.15).all()
        assert (after.at(required).response <= 1.0).all()
        assert remedy.capacity >= required
        # the smallest such action: one step less breaks the p95 at the required users
        if remedy.action.kind == "cores":
            less = apply(m, Action("cores", remedy.action.tier, remedy.action.value - 1))
            assert _p95(less, required).max() > 0.15


def test_a_remedy_for_the_mean_alone_is_not_enough_for_the_p95():
    """The same bound on the mean asks less: the p95 lies above it."""
    on_p95 = _model(p95=(0.15, 0.15))
    on_mean = _model(sla=(0.15, 0.15))
    cap_p95, cap_mean = model_capacity(on_p95)[0], model_capacity(on_mean)[0]
    assert cap_p95 < cap_mean
    required = int(cap_mean * 1.05)
    need = {(r.action.kind, r.action.tier): r.action.value
            for r in remediate(on_p95, required, cap_p95).remedies}
    mean = {(r.action.kind, r.action.tier): r.action.value
            for r in remediate(on_mean, required, cap_mean).remedies}
    assert need[("cores", "app")] > mean[("cores", "app")]
    assert need[("cpu_speed", "app")] > mean[("cpu_speed", "app")]


def test_slo_values_read_the_statistic_named_per_class():
    m = _model(sla=(1.0, math.inf), p95=(math.inf, 0.2))
    point = m.at(200)
    values = slo_values(m, point, ["mean", "p95"])
    assert values[0] == float(point.response[0])
    assert values[1] == pytest.approx(_p95(m, 200)[1])
    assert slo_values(m, point, [None, None]) == [None, None]
    slos = class_slos(m)
    assert slo_text(slos[0]) == "mean <= 1 s" and slo_text(slos[1]) == "p95 <= 0.2 s"
    assert slo_text(class_slos(_model())[0]) == "-"


def test_compare_gives_the_slo_statistic_before_and_after():
    m = _model(sla=(1.0, 1.0), p95=(0.15, math.inf))
    cap, _ = model_capacity(m)
    cmp = compare(m, [Action("cores", "app", 6)], cap, int(cap * 1.2))
    assert cmp.statistics[0] == "p95" and cmp.statistics[1] == "mean"
    (now_before, now_after), (fc_before, fc_after) = cmp.slo_now, cmp.slo_forecast
    assert now_before[0] == pytest.approx(_p95(m, cap)[0])
    assert fc_after[0] < fc_before[0] and now_after[0] < now_before[0]
    assert fc_before[1] == pytest.approx(float(cmp.response_forecast[0][1]))
    assert cmp.capacity_after > cmp.capacity_before


@pytest.mark.slow                  # importing the command line: ~4 s
def test_the_whatif_slo_table_shows_each_class_slo_and_its_statistic_in_80_columns():
    from rich.console import Console

    from streams.cli.commands import _whatif_slo_table

    m = _model(sla=(1.0, 1.0), p95=(0.15, math.inf))
    cap, _ = model_capacity(m)
    cmp = compare(m, [Action("replicate", "app", 2)], cap, int(cap * 1.2))
    console = Console(width=80, record=True)
    console.print(_whatif_slo_table("shop", cmp))
    lines = console.export_text().splitlines()
    assert "…" not in "".join(lines) and max(map(len, lines)) <= 80
    browse = next(line for line in lines if line.strip().startswith("browse"))
    assert "p95 <= 0.15 s" in browse and "mean" not in browse     # the statistic shown
    values = [float(v) for v in browse.split(" s ", 1)[1].split()]
    assert values == pytest.approx([cmp.slo_now[0][0], cmp.slo_now[1][0],
                                    cmp.slo_forecast[0][0], cmp.slo_forecast[1][0]], abs=1e-3)
    buy = next(line for line in lines if line.strip().startswith("buy"))
    assert "mean <= 1 s" in buy
    # without a quantile SLO the mean's table says it all
    plain = compare(_model(sla=(0.5, 0.5)), [Action("replicate", "app", 2)], cap, cap)
    assert _whatif_slo_table("shop", plain) is None


@pytest.mark.slow
def test_the_band_is_on_the_quantile_slo():
    """The band's ends are capacities on the p95 SLO (each end's own law): each below the
    mean-SLA band's of the same bound, bracketing the nominal capacity; band_flags says so."""
    from streams.core.config import SystemConfig
    from streams.core.tier import TierModel
    from streams.predict import confidence
    from streams.predict.model import build_model

    cov = 0.0006 ** 2 * np.eye(2)
    tiers = [TierModel(tier=name, cores=1, demands=d, demand_std={c: 0.0006 for c in d},
                       regression={}, idc=1.0, idc_flag=None, mean_service=None, p95=None,
                       process=None, fit=None, bursty=False, windows=1000, demand_cov=cov)
             for name, d in (("front", {"a": 0.004, "b": 0.005}),
                             ("db", {"a": 0.003, "b": 0.0045}))]
    bands = {}
    for kind, extra in (("p95", {"slo": {"*": {"p95": 0.3}}}), ("mean", {"sla_s": {"*": 0.3}})):
        cfg = SystemConfig(tiers=("front", "db"), think_time_s=1.0, **extra)
        model = build_model(tiers, ["a", "b"], {"a": 0.5, "b": 0.5}, 1.0, cfg)
        cap, _ = model.mva_capacity()
        b = confidence.band(model, tiers, cap, n_now=cap - 30, slope=0.1)
        assert b["capacity_users_lower"] < cap < b["capacity_users_upper"]
        bands[kind] = (b, model)
    b, model = bands["p95"]
    for end in ("capacity_users_lower", "capacity_users_upper"):
        assert b[end] < bands["mean"][0][end]
    assert any(f.startswith("band on the p95 SLO") for f in b["band_flags"])
    assert not any("SLO" in f for f in bands["mean"][0]["band_flags"])
    # the low end is where the pessimistic model's p95 crosses the bound
    low = confidence.band_variant(model, tiers, +1, [], confidence.BAND_Z)
    k = model.quantile_levels.index(0.95)
    n = b["capacity_users_lower"]
    assert low.quantiles(low.at(n))[:, k].max() <= 0.3 < low.quantiles(low.at(n + 1))[:, k].max()


@pytest.fixture(scope="module")
def p95_run(tmp_path_factory):
    """The demo shop (20 -> 120 users over 5 minutes: a breach is predicted) with a p95 SLO
    on every class and no SLA on the mean, through the embedded pipeline: its store, its
    predictions, alerts, scenario and configuration."""
    import json
    from dataclasses import replace

    from streams.cli.demo import DemoScenario, demo_config, demo_records
    from streams.cli.embedded import STORE_NAME, run_embedded
    from streams.core.config import Config

    sc = DemoScenario(duration_s=420, steady_s=120, users_start=20, users_end=120)
    base = demo_config(sc).systems[sc.system]
    cfg = Config(systems={sc.system: replace(base, slo={"*": {"p95": sc.sla_s}}, sla_s={})})
    out = tmp_path_factory.mktemp("p95-run")
    run_embedded(demo_records(sc), cfg, out)
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    alerts = [json.loads(x) for x in (out / "alerts.jsonl").read_text().splitlines()]
    return out / STORE_NAME, preds, alerts, sc, cfg


@pytest.mark.slow
def test_the_report_draws_a_percentile_chart_with_the_slo_line(p95_run):
    from streams.sinks.report import load_store, render_report
    from streams.sinks.report.charts import SystemCharts

    store, preds, _, sc, cfg = p95_run
    data = load_store(store, cfg)
    (system,) = data.systems
    charts = {c.key: c for c in SystemCharts(system).all()}
    chart = charts["percentiles"]
    assert [r.label for r in chart.rules] == [f"p95 SLO {sc.sla_s:g} s"]
    last = next(p for p in reversed(preds) if p["classes"])
    for cls, part in last["classes"].items():
        drawn = {s.label: s for s in chart.series if s.group == cls}
        assert set(drawn) == {"p50 predicted", "p95 predicted", "p99 predicted"}
        assert drawn["p95 predicted"].values[-1] == part["response_time_quantiles_s"]["p95"]
    page = render_report(data)
    assert page.index('data-chart="response_time"') < page.index('data-chart="percentiles"') \
        < page.index('data-chart="capacity"')
    assert f"p95 SLO {sc.sla_s:g} s" in page



@pytest.mark.slow
def test_the_breach_alert_names_the_p95_slo_it_breaks(p95_run):
    """The predicted breach of a class held to a p95 SLO alone says so (it said 'its inf s
    SLA'), and its statistic is the p95."""
    _, preds, alerts, sc, _ = p95_run
    fired = [a for a in alerts if a["alert"] == "predicted_breach" and a["state"] == "firing"]
    assert fired
    for a in fired:
        assert f"its p95 SLO of {sc.sla_s:g} s" in a["summary"] and "inf s" not in a["summary"]
        assert a["statistic"] == "p95"
    assert not [a for a in alerts if a["alert"] == "current_breach"]   # no SLA on the mean


@pytest.mark.slow
def test_perfcast_whatif_on_a_store_shows_the_p95_before_and_after(p95_run):
    from typer.testing import CliRunner

    from streams.cli.commands import app

    store, preds, _, sc, _ = p95_run
    result = CliRunner().invoke(app, ["whatif", "--store", str(store), "--cores", "db=4"])
    assert result.exit_code == 0, result.output
    assert "each class's SLO statistic" in result.output and "…" not in result.output
    last = preds[-1]
    for cls, part in last["classes"].items():
        line = next(x for x in result.output.splitlines()
                    if x.strip().startswith(cls + " ") and f"p95 <= {sc.sla_s:g} s" in x)
        now_before, now_after, fc_before, fc_after = [
            float(v) for v in line.split(" s ", 1)[1].split()]
        assert now_before == pytest.approx(part["response_time_quantiles_s"]["p95"], abs=1e-3)
        assert now_after <= now_before and fc_after <= fc_before
