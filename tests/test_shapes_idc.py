"""The held-out shapes with the true ``I`` in place of the read (bench.accuracy.shapes_idc):
the replacement reaches the named bursty tier only, in the mode asked, and is undone after
(slow: three pipeline runs on six minutes of a shape's windows)."""

from __future__ import annotations

import json
import math

import pytest

import streams.core.tier as tier_module
from bench.accuracy import shapes, shapes_idc
from estimators.dispersion import DispersionInterval


def _interval(value: float, lower: float, upper: float, reason: str = "ok"
              ) -> DispersionInterval:
    return DispersionInterval(value, lower, upper, 0.95, value, 0.1, 360, 1000.0, reason)


def test_replaced_sets_the_true_value_as_each_mode_says():
    est = _interval(50.0, 40.0, 100.0)
    assert shapes_idc.replaced(est, 64.0, "read") is est
    centred = shapes_idc.replaced(est, 64.0, "centred")
    assert (centred.value, centred.lower, centred.upper) == pytest.approx((64.0, 51.2, 128.0))
    narrow = shapes_idc.replaced(_interval(50.0, 0.0, math.inf, "too_short"), 64.0, "narrow")
    assert (narrow.value, narrow.lower, narrow.upper, narrow.reason) == pytest.approx(
        (64.0, 57.6, 70.4, "ok"))
    idle = _interval(1.0, 0.0, math.inf, "no_busy_time")
    assert shapes_idc.replaced(idle, 64.0, "narrow") is idle
    with pytest.raises(ValueError, match="mode: .*'exact'"):
        shapes_idc.replaced(est, 64.0, "exact")


def test_true_idc_is_the_processes_and_none_for_a_one_class_shape():
    by = {s.name: s for s in shapes.SHAPES}
    assert shapes_idc.true_idc(by["mmpp2-medium-D"]) == pytest.approx(
        shapes.PROCESSES["mmpp2-medium"].idc)
    assert shapes_idc.true_idc(by["class-mmpp2-medium-A-b"]) is None


@pytest.mark.slow
def test_the_oracle_reaches_the_named_tier_only_and_is_undone():
    # six minutes of mmpp2-medium-D's windows: its database reads I 64 [28, 1591] itself;
    # the oracle's narrow read puts the calibration inside 64.2 x [0.9, 1.1]
    truth = {r["shape"]: r for r in json.loads(shapes.RESULTS.read_text())["shapes"]}
    row = truth["mmpp2-medium-D"]
    estimate, refresh = tier_module.index_of_dispersion_interval, tier_module.TierState.refresh
    narrow = shapes_idc.run("mmpp2-medium-D", "narrow", 6.0, row)
    assert (narrow["idc"], narrow["idc_lower"], narrow["idc_upper"]) == pytest.approx(
        (64.21, 0.9 * 64.21, 1.1 * 64.21), rel=1e-3)
    assert 0.9 * 64.21 * 0.999 <= narrow["idc_calibrated"] <= 1.1 * 64.21 * 1.001
    search = narrow["search"]                   # the calibration's range is the oracle's
    assert (search["low"], search["read"], search["high"]) == pytest.approx(
        (0.9 * 64.21, 64.21, 1.1 * 64.21), rel=1e-3)
    assert search["r_low"] < search["r_read"] < search["r_high"]   # more bursty, slower
    assert tier_module.index_of_dispersion_interval is estimate
    assert tier_module.TierState.refresh is refresh
    shape = next(s for s in shapes.SHAPES if s.name == "mmpp2-medium-D")
    with shapes_idc.oracle(("app",), 64.21, "narrow"):         # not the bursty tier
        other = shapes.run_shape(shape, 6.0, 0, row)
    read = shapes_idc.run("mmpp2-medium-D", "read", 6.0, row)
    assert other["solves"][-1]["idc"] == read["idc"] != pytest.approx(64.21, rel=1e-3)
