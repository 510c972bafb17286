"""The held-out shapes' fitted MAP(2) marginal against the true one
(bench.accuracy.shapes_marginal): the two-phase marginal's SCV and the true marginal in closed
form, the SCV hint reaching the calibration's fits only while inside, the per-MAP(2) summary
(slow: one pipeline run on six minutes of a shape's windows)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import streams.core.tier as tier_module
import streams.predict.calibration as calibration
from bench.accuracy import shapes, shapes_marginal
from estimators.mapfit import fit_map2
from estimators.tail import ServiceTail


def _tail(mean: float | None, a: float | None, b: float | None, p: float | None
          ) -> ServiceTail:
    return ServiceTail(1.0, mean, 100, 0, None, a, b, p)


def test_two_phase_scv_is_the_hyperexponentials():
    # p exp(b) + (1 - p) exp(a): E[S^2] = 2 (p b^2 + (1 - p) a^2); 0.2 at 3, 0.8 at 0.5: mean
    # 1, E[S^2] 4, SCV 3
    assert shapes_marginal.two_phase_scv(_tail(1.0, 0.5, 3.0, 0.2)) == pytest.approx(3.0)
    assert shapes_marginal.two_phase_scv(_tail(2.0, 2.0, 2.0, 1.0)) == pytest.approx(1.0)
    assert shapes_marginal.two_phase_scv(_tail(None, None, None, None)) is None


def test_true_marginal_closed_forms():
    by = {s.name: s for s in shapes.SHAPES}
    mmpp = shapes.PROCESSES["mmpp2-medium"]
    got = shapes_marginal.true_marginal(by["mmpp2-medium-D"])
    assert got["scv"] == pytest.approx(mmpp.scv)
    assert got["idc"] == pytest.approx(mmpp.idc)
    assert got["p95"] == pytest.approx(mmpp.quantile(0.95) / mmpp.mean)
    logn = shapes_marginal.true_marginal(by["lognormal-ar-A"])     # SCV 4, mean 1
    s2 = math.log(5.0)
    assert logn["scv"] == pytest.approx(4.0)
    assert logn["p95"] == pytest.approx(math.exp(-s2 / 2 + math.sqrt(s2) * 1.6448536269514722))
    assert logn["p99"] > logn["p95"] and logn["idc"] is None


def test_the_hint_reaches_the_calibrations_fits_only_inside():
    fit = calibration.fit_map2
    tie = fit_map2(1.0, 60.0, 3.9)
    with shapes_marginal.hinted(2.5):
        hinted = calibration.fit_map2(1.0, 60.0, 3.9)
        explicit = calibration.fit_map2(1.0, 60.0, 3.9, scv=tie.scv)   # an explicit SCV wins
    assert calibration.fit_map2 is fit
    assert abs(math.log(hinted.scv / 2.5)) < abs(math.log(tie.scv / 2.5))
    assert explicit.scv == pytest.approx(tie.scv)


def test_summary_counts_per_map2():
    rows = [{"name": "cal", "capacity_error": e, "R_error": r}
            for e, r in ((0.05, 0.01), (-0.15, -0.03), (0.3, 0.1), (None, 0.02))]
    got = shapes_marginal.summary([{"rows": rows[:2]}, {"rows": rows[2:]}])["cal"]
    assert got == {"shapes": 4, "capacity_within_10": 1, "capacity_within_20": 2,
                   "median_abs_R_error": pytest.approx(0.025)}


@pytest.mark.slow
def test_a_shape_gets_each_map2_and_the_hooks_are_undone():
    truth = {r["shape"]: r for r in json.loads(shapes.RESULTS.read_text())["shapes"]}
    estimate, refresh = tier_module.service_tail_p95, tier_module.TierState.refresh
    res = shapes_marginal.run("mmpp2-medium-D", 6.0, truth["mmpp2-medium-D"])
    assert tier_module.service_tail_p95 is estimate
    assert tier_module.TierState.refresh is refresh
    rows = {r["name"]: r for r in res["rows"]}
    assert list(rows) == ["tie", "cal", "two", "two-cal", "true"]
    # the calibration meets the measured residence better than the tie rule's fit
    assert abs(rows["cal"]["R_error"]) < abs(rows["tie"]["R_error"])
    # the two-phase marginal is lighter than the tie rule's, its SCV the windows'
    assert rows["two"]["scv"] == pytest.approx(res["read"]["scv2"], rel=0.05)
    assert rows["two"]["scv"] < rows["tie"]["scv"]
    assert rows["true"]["idc"] == pytest.approx(res["true"]["idc"], rel=0.2)
    assert all(np.isfinite(r["p99"]) and r["p99"] > r["p95"] for r in rows.values())
