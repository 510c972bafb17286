"""The class mix a solve models (streams/engine/pooled_mix.py): the latest intervals pooled until
they hold ``mix_min_completions``, within ``trend_window_s``; one busy interval's own shares,
exactly. Hand-made windows and the physical simulator, seeded; no wall-clock assertions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.simulation.physical import PhysicalNetwork, Tier, monitor_physical
from streams.core.config import Config, SystemConfig
from streams.engine.pipeline import Pipeline
from streams.engine.pooled_mix import add_interval, class_mix
from streams.engine.system import SystemState

CLASSES = ["a", "b"]
#: per-class demands, s: front, db (b is the heavy class)
DEMANDS = {"front": {"a": 0.004, "b": 0.004}, "db": {"a": 0.003, "b": 0.030}}


#: ``add_interval``'s ``min_completions`` that prunes nothing
KEEP = 10**9


def _rows(*intervals: tuple[float, dict[str, float]], keep: int = KEEP) -> list:
    """``(end, completions per class)`` of 60-s intervals, as ``add_interval`` keeps them."""
    rows: list = []
    for end, counts in intervals:
        add_interval(rows, end, {c: n / 60.0 for c, n in counts.items()}, 60.0, 900.0, keep)
    return rows


def test_a_busy_interval_keeps_its_own_shares_exactly():
    rows = _rows((60.0, {"a": 10, "b": 10}), (120.0, {"a": 300, "b": 100}))
    X = {"a": 5.0, "b": 100 / 60.0}
    mix, used = class_mix(rows, X, 60.0, CLASSES, 400)
    assert used == 1
    total = sum(X.values())
    assert mix == {c: X[c] / total for c in CLASSES}        # bit for bit, not approx


def test_a_low_count_interval_after_a_busy_one_keeps_the_earlier_shares():
    rows = _rows((60.0, {"a": 500, "b": 500}), (120.0, {"a": 30, "b": 0}))
    mix, used = class_mix(rows, {"a": 0.5}, 60.0, CLASSES, 400)
    assert used == 2
    assert mix == pytest.approx({"a": 530 / 1030, "b": 500 / 1030}, rel=1e-12)


def test_pooling_stops_at_the_completions_and_at_the_span():
    rows = _rows(*[(60.0 * k, {"a": 100, "b": 0} if k < 5 else {"a": 0, "b": 100})
                   for k in range(1, 9)])
    mix, used = class_mix(rows, {"b": 100 / 60.0}, 60.0, CLASSES, 350)
    assert used == 4 and mix == {"a": 0.0, "b": 1.0}   # the last four intervals: all b
    mix, used = class_mix(rows, {"b": 100 / 60.0}, 60.0, CLASSES, 500)
    assert used == 5 and mix == pytest.approx({"a": 0.2, "b": 0.8})
    short: list = []
    for k in range(1, 9):
        add_interval(short, 60.0 * k, {"a": 1.0} if k < 5 else {"b": 1.0}, 60.0, 180.0, KEEP)
    assert [end for end, _ in short] == [360.0, 420.0, 480.0]      # older than the span: gone
    mix, used = class_mix(short, {"b": 1.0}, 60.0, CLASSES, 10_000)
    assert used == 3 and mix == {"a": 0.0, "b": 1.0}


def test_no_completions_anywhere_is_no_mix():
    rows = _rows((60.0, {}), (120.0, {}))
    assert class_mix(rows, {}, 60.0, CLASSES, 400) == ({}, 2)
    assert class_mix(_rows((60.0, {})), {}, 60.0, CLASSES, 400) == ({}, 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50)),
                min_size=1, max_size=20),
       st.integers(1, 2000))
def test_the_pooled_shares_are_a_mix_of_the_intervals_shares(counts, n_min):
    """Shares sum to 1 and each lies within the pooled intervals' own range (a weighted mean
    of them); the pool never reaches past the first interval that completes ``n_min``; the
    rows ``add_interval`` prunes at ``n_min`` give the same answer."""
    classes = ["a", "b", "c"]
    rows: list = []
    pruned: list = []
    for k, row in enumerate(counts, start=1):
        x = {c: n / 60.0 for c, n in zip(classes, row)}
        add_interval(rows, 60.0 * k, x, 60.0, 1e9, KEEP)
        add_interval(pruned, 60.0 * k, x, 60.0, 1e9, n_min)
    last = {c: n / 60.0 for c, n in zip(classes, counts[-1]) if n}
    mix, used = class_mix(rows, last, 60.0, classes, n_min)
    assert class_mix(pruned, last, 60.0, classes, n_min) == (mix, used)   # pruning loses none
    pooled = counts[len(counts) - used:]
    if not any(sum(r) for r in pooled):
        assert mix == {}
        return
    assert sum(mix.values()) == pytest.approx(1.0, rel=1e-12)
    assert used == 1 or sum(map(sum, pooled[1:])) < n_min
    for i, c in enumerate(classes):
        own = [r[i] / sum(r) for r in pooled if sum(r)]
        assert min(own) - 1e-12 <= mix[c] <= max(own) + 1e-12


def _window(tier: str, end: float, counts: dict[str, int]) -> dict:
    busy = sum(n * DEMANDS[tier][c] for c, n in counts.items())
    return {"system": "sim", "tier": tier, "end": end, "window_s": 5.0,
            "utilization": busy / 5.0, "cores": 1, "users": 10,
            "completions": {c: n for c, n in counts.items() if n},
            "response_time_s": {c: 1.5 * DEMANDS[tier][c] for c, n in counts.items() if n}}


def _records(phases: list[tuple[float, dict[str, int]]], start: float = 0.0) -> list[dict]:
    out, end = [], start
    for seconds, counts in phases:
        for _ in range(int(seconds / 5.0)):
            end += 5.0
            out += [_window("front", end, counts), _window("db", end, counts)]
    return out


def _pipeline(**settings) -> Pipeline:
    return Pipeline(Config(systems={"sim": SystemConfig(
        tiers=("front", "db"), solve_interval_s=60.0, solve_offset_s=0.0, think_time_s=1.0,
        sla_s={"*": 0.5}, **settings)}))


def test_a_quiet_interval_after_busy_ones_solves_with_the_pooled_mix():
    """Ten busy minutes half ``b``, then a minute of 36 requests, all ``a``: the model keeps
    ``b`` at about half (the interval alone would drop it, and with it ``b``'s SLA and its
    demand from the capacity); ``mix_min_completions = 1`` is the interval's own mix."""
    records = _records([(600.0, {"a": 20, "b": 20}), (65.0, {"a": 3})])
    pooled, own = _pipeline(), _pipeline(mix_min_completions=1)
    pooled.process_many(records)
    own.process_many(records)
    _, model, _, _ = pooled.systems["sim"].last_model
    assert model.mix.tolist() == pytest.approx([(36 + 240) / (36 + 480), 240 / (36 + 480)])
    assert own.systems["sim"].last_model[1].mix.tolist() == [1.0, 0.0]
    state = pooled.systems["sim"]
    back = SystemState.from_dict(json.loads(json.dumps(state.to_dict())), state.config)
    assert back.mix_rows == state.mix_rows
    assert [end for end, _ in state.mix_rows] == [600.0, 660.0]   # the last busy one holds 480
    old = state.to_dict()
    del old["mix_rows"]
    assert SystemState.from_dict(old, state.config).mix_rows == []


def test_a_lasting_change_of_mix_is_in_within_the_span():
    """After the busy minutes the quiet ones are all ``a``: with ``trend_window_s`` 180 s the
    busy intervals leave the pool after three quiet solves and the mix is the new one."""
    records = _records([(600.0, {"a": 20, "b": 20}), (245.0, {"a": 3})])
    pipeline = _pipeline(trend_window_s=180.0)
    out = pipeline.process_many(records)
    assert [p.time for p in out.predictions][-4:] == [660.0, 720.0, 780.0, 840.0]
    _, model, _, _ = pipeline.systems["sim"].last_model
    assert model.mix.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("seed", [3, 4])
def test_a_busy_simulated_system_solves_with_each_intervals_own_mix(seed):
    """Every interval of a busy system holds more than ``mix_min_completions``: the
    predictions are those of the interval's own mix (``mix_min_completions = 1``), exactly."""
    net = PhysicalNetwork((Tier("front", 1, 0.004), Tier("db", 1, 0.003, multipliers=(1, 6))),
                          ("a", "b"), (0.8, 0.2), 0.5, 40)
    records = monitor_physical(net, 300.0, 5.0, warmup=10.0, system="sim", seed=seed)
    a = _pipeline().process_many(records).predictions
    b = _pipeline(mix_min_completions=1).process_many(records).predictions
    assert len(a) >= 4
    assert [json.dumps(p.to_record(), sort_keys=True) for p in a] == \
        [json.dumps(p.to_record(), sort_keys=True) for p in b]
    assert np.isfinite([p.capacity_users for p in a]).all()
