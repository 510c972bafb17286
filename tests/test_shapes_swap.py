"""The held-out shapes' one-at-a-time swaps (bench.accuracy.shapes_swap): each swap replaces
its estimates by the truth and nothing else, a one-class shape has no process swap, the kept
capacity searches are undone, the dominant swap and the summary (slow: one pipeline run on six
minutes of a shape's windows, whose kept model gives the reported capacity again)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import streams.engine.system as engine_system
from bench.accuracy import shapes, shapes_cause, shapes_swap
from estimators.mapfit import fit_map2
from solvers.processes import MAP
from streams.predict.model import model_capacity


def _read(name: str):
    """A model as the pipeline might read ``name``: the true one on the MVA route with its
    classes in reverse order, the demands 30% high and the mix moved."""
    shape = next(s for s in shapes.SHAPES if s.name == name)
    true = shapes_cause.true_model(shape, "exp")
    read = true.variant(classes=true.classes[::-1], D_mc=1.3 * true.D_mc[:, ::-1],
                        mix=np.full(len(true.classes), 1.0 / len(true.classes)))
    return shape, true, read


def test_the_demand_swap_takes_the_true_demands_and_mix_by_class_name():
    shape, true, read = _read("mmpp2-medium-B")
    got = shapes_swap.swapped(read, shape, "demand")
    assert got.classes == read.classes
    np.testing.assert_allclose(got.D_mc, true.D_mc[:, ::-1])
    np.testing.assert_allclose(got.mix, true.mix[::-1])
    assert got.processes is None and got.servers is read.servers


def test_the_process_swap_puts_the_true_process_at_the_bursty_tiers_only():
    shape, true, read = _read("two-tiers-mmpp2-medium-B")
    got = shapes_swap.swapped(read, shape, "process")
    proc = shapes.PROCESSES["mmpp2-medium"]
    assert [p.order for p in got.processes] == [1, 2, 2]       # web, app, db
    assert got.processes[2].idc == pytest.approx(proc.idc)
    np.testing.assert_allclose(got.D_mc, read.D_mc)            # the demands as read
    both = shapes_swap.swapped(read, shape, "both")
    np.testing.assert_allclose(both.D_mc, true.D_mc[:, ::-1])
    assert both.processes[1].idc == pytest.approx(proc.idc)


def test_the_window_swap_scales_the_bursty_tiers_demands_to_the_windows_mean():
    shape, _, read = _read("mmpp2-medium-B")
    got = shapes_swap.swapped(read, shape, "window", 0.05)
    assert float(got.D_mc[2] @ got.mix) == pytest.approx(0.05)
    np.testing.assert_allclose(got.D_mc[2] / read.D_mc[2], 0.05 / float(read.D_mc[2] @ read.mix))
    np.testing.assert_allclose(got.D_mc[:2], read.D_mc[:2])
    assert shapes_swap.swapped(read, shape, "window") is None


def test_the_windows_all_swap_scales_every_tiers_demands_to_its_own_windows_mean():
    shape, _, read = _read("mmpp2-medium-B")
    means = {"web": 0.04, "app": 0.03, "db": 0.07}
    got = shapes_swap.swapped(read, shape, "windows_all", None, means)
    np.testing.assert_allclose(got.D_mc @ got.mix, [0.04, 0.03, 0.07])
    np.testing.assert_allclose(got.D_mc[:, 0] / got.D_mc[:, 1], read.D_mc[:, 0] / read.D_mc[:, 1])
    assert shapes_swap.swapped(read, shape, "windows_all", None, {"db": 0.07}) is None


def test_the_true_scv_swap_refits_the_read_map2_at_the_true_scv():
    shape, true, read = _read("mmpp2-medium-D")              # one bursty tier: db
    assert shapes_swap.swapped(read, shape, "true_scv") is None    # MVA: no MAP(2)
    held = fit_map2(0.2, 50.0, 0.2 * 3.8, scv=30.0).process    # the curve's far end
    mapped = read.variant(processes=[MAP.exponential(1.0), held])
    got = shapes_swap.swapped(mapped, shape, "true_scv")
    scv = shapes_cause.true_process(shape)[2]
    assert held.scv > 10 and got.processes[1].scv == pytest.approx(scv, rel=0.1)
    assert got.processes[1].mean == pytest.approx(held.mean)
    assert got.processes[0] is mapped.processes[0]
    np.testing.assert_allclose(got.D_mc, read.D_mc)
    cls_shape, _, cls_read = _read("class-mmpp2-medium-A-b")
    assert shapes_swap.swapped(cls_read.variant(processes=[MAP.exponential(1.0), held]),
                               cls_shape, "true_scv") is None


def test_the_split_swap_keeps_each_tiers_aggregate_in_the_true_ratios():
    shape, true, read = _read("class-mmpp2-medium-A-b")
    read = read.variant(D_mc=read.D_mc * np.array([[1.0, 2.0], [0.5, 1.0]]))
    got = shapes_swap.swapped(read, shape, "split")
    np.testing.assert_allclose(got.D_mc @ got.mix, read.D_mc @ read.mix)
    np.testing.assert_allclose(got.D_mc[:, 0] / got.D_mc[:, 1],
                               true.D_mc[:, 1] / true.D_mc[:, 0])
    np.testing.assert_allclose(got.mix, read.mix)


def test_a_one_class_shape_has_no_process_swap_and_an_unknown_swap_is_refused():
    shape, _, read = _read("class-mmpp2-medium-A-b")
    assert shapes_swap.swapped(read, shape, "process") is None
    assert shapes_swap.swapped(read, shape, "both") is None
    assert shapes_swap.swapped(read, shape, "demand") is not None
    with pytest.raises(ValueError, match="swap: .*'mix'"):
        shapes_swap.swapped(read, shape, "mix")


def test_kept_models_records_the_searches_and_is_undone():
    shape, true, _ = _read("mmpp2-fast-A")
    search = engine_system.model_capacity
    calls: list = []
    with shapes_swap.kept_models(calls):
        found = engine_system.model_capacity(true)
    assert engine_system.model_capacity is search
    assert calls == [(true, found[0])] and found == model_capacity(true.variant())


def test_dominant_and_summary():
    def row(**errs):
        return {"swaps": {k: {"capacity": 1, "error": v} for k, v in errs.items()}}

    rows = [row(as_is=0.2, demand=0.03, process=0.1, both=0.0),
            row(as_is=-0.05, demand=-0.3, process=-0.2, both=0.15),
            row(as_is=0.4, demand=0.3, process=None, both=None)]
    assert [shapes_swap.dominant(r) for r in rows] == ["demand", None, "demand"]
    got = shapes_swap.summary(rows)
    assert got["as_is"] == {"shapes": 3, "capacity_within_10": 1, "capacity_within_20": 2}
    assert got["process"] == {"shapes": 2, "capacity_within_10": 1, "capacity_within_20": 2}
    assert got["both"] == {"shapes": 2, "capacity_within_10": 1, "capacity_within_20": 2}


@pytest.mark.slow
def test_a_shapes_kept_model_gives_the_reported_capacity():
    truth = {r["shape"]: r for r in json.loads(shapes.RESULTS.read_text())["shapes"]}
    res = shapes_swap.run("mmpp2-medium-A", 6.0, truth["mmpp2-medium-A"])
    assert engine_system.model_capacity.__module__ == "streams.predict.model"
    assert res["reported"] is not None
    sw = res["swaps"]
    assert sw["as_is"]["capacity"] == pytest.approx(res["reported"], rel=0.04)
    assert all(sw[k]["capacity"] is not None for k in shapes_swap.SWAPS if k != "true_scv")
    # the true SCV needs the model's MAP(2): none where the last solve took MVA
    assert (sw["true_scv"]["capacity"] is None) == (res["route"] == "mva"), res["route"]
    assert abs(res["window_mean_error"]) < 0.5 and abs(res["demand_error"]) < 0.5
