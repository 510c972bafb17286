"""The predicted-breach alert of an open workload reads the SLA on a window's mean
(streams.predict.open_model.window_rate_capacity), as a closed workload's does
(streams.predict.alert_window)."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.mapfit import fit_map2
from streams.core.config import SystemConfig
from streams.core.tier import TierModel
from streams.predict import alert_window
from streams.predict.model import build_model
from streams.predict.open_model import RateSolves, open_point, rate_capacity, \
    window_rate_capacity

SLA = 0.1


def _model(idc: float, mean: float = 0.016):
    fit = fit_map2(mean, idc, 6 * mean) if idc > 1 else None
    front = TierModel(tier="front", cores=4, demands={"c": 0.008}, demand_std={"c": 0.0},
                      regression={}, idc=1.0, idc_flag=None, mean_service=0.008, p95=None,
                      process=None, fit=None, bursty=False, windows=500)
    db = TierModel(tier="db", cores=8, demands={"c": mean}, demand_std={"c": 0.0},
                   regression={}, idc=idc, idc_flag=None, mean_service=mean, p95=6 * mean,
                   process=None if fit is None else fit.process,
                   fit=None if fit is None else {"scv": fit.scv, "inputs": [mean, idc, 6 * mean]},
                   bursty=fit is not None, windows=500)
    tiers = [front, db]
    model = build_model(tiers, ["c"], {"c": 1.0}, 0.0,
                        SystemConfig(tiers=("front", "db"), sla_s={"*": SLA}))
    return model, [t.idc for t in tiers]


def test_a_bursty_tier_lowers_the_alerts_capacity_by_its_window_factor():
    model, idc = _model(200.0)
    cap = rate_capacity(model).capacity
    z = alert_window.quantile_z(300.0, 900.0, 0.5)
    held = RateSolves(model)
    w_cap, f = window_rate_capacity(model, idc, cap, 300.0, z, held)
    # f_m = 1 + z sqrt(I_m / n_m), n_m the tier's completions in a window at the capacity
    n = cap * 300.0
    assert f == pytest.approx([1 + z * np.sqrt(1.0 / n), 1 + z * np.sqrt(200.0 / n)])
    assert w_cap is not None and w_cap < cap
    # the window capacity is the long-run one of the model with the demands scaled
    scaled = model.variant(D_mc=model.D_mc * f[:, None])
    assert open_point(scaled, w_cap)[0].response.max() <= SLA * (1 + 1e-6)
    assert held.count >= 1


def test_exponential_tiers_at_hundreds_per_second_keep_the_long_run_capacity():
    model, idc = _model(1.0)
    cap = rate_capacity(model).capacity
    w_cap, f = window_rate_capacity(model, idc, cap, 300.0,
                                    alert_window.quantile_z(300.0, 900.0, 0.5))
    assert w_cap is None and np.all(f < 1 + alert_window.MIN_EXCESS)
