"""The open route's capacity is searched on each tier's aggregate demand's median over the
latest solves (:func:`streams.predict.open_model.capacity_model`): a mix that reads a heavy
class's share high on one solve and low on the next does not swing the capacity with it."""

from __future__ import annotations

import numpy as np

from streams.predict import open_model
from streams.predict.model import SystemModel


def _model(heavy_share: float) -> SystemModel:
    D = np.array([[0.002, 0.002], [0.003, 0.055]])          # app, db; light, heavy
    return SystemModel(tiers=["app", "db"], classes=["light", "heavy"], D_mc=D,
                       mix=np.array([1.0 - heavy_share, heavy_share]),
                       servers=np.array([1, 1]), think_time=0.0,
                       sla=np.array([0.016, 0.21]), processes=None, map_limit=10_000)


def test_capacity_on_the_median_aggregate_swings_less_than_each_solve():
    rng = np.random.default_rng(7)
    shares = np.clip(0.15 + 0.018 * rng.standard_normal(40), 0.05, 0.3)
    rows: list[list] = []
    own, smoothed = [], []
    for k, p in enumerate(shares):
        m = _model(float(p))
        open_model.add_level(rows, 15.0 * k, m)
        own.append(open_model.rate_capacity(m).capacity)
        smoothed.append(open_model.rate_capacity(open_model.capacity_model(m, rows)).capacity)
    own, smoothed = np.log(own[20:]), np.log(smoothed[20:])
    assert np.std(smoothed) < 0.5 * np.std(own)
    assert np.median(np.abs(np.diff(smoothed))) < 0.5 * np.median(np.abs(np.diff(own)))


def test_the_median_keeps_the_split_and_spans_the_level_window():
    rows: list[list] = []
    a, b, c = _model(0.10), _model(0.20), _model(0.15)
    open_model.add_level(rows, 0.0, a)
    assert open_model.capacity_model(a, rows) is a             # one solve: its own model
    open_model.add_level(rows, 15.0, c)
    assert open_model.capacity_model(c, rows) is c             # two: a median rejects none
    open_model.add_level(rows, 30.0, b)
    m = open_model.capacity_model(b, rows)
    assert np.allclose(m.D_mc @ m.mix, c.D)                    # the middle of the three
    assert np.allclose(m.D_mc[1] / m.D_mc[1, 0], b.D_mc[1] / b.D_mc[1, 0])
    open_model.add_level(rows, 45.0, b)
    m = open_model.capacity_model(b, rows)                     # even: the middle two's mean
    assert np.allclose(m.D_mc @ m.mix, np.sqrt(b.D * c.D))
    open_model.add_level(rows, 45.0 + open_model.LEVEL_SPAN_S, b)
    assert len(rows) == 1                                      # the older solves dropped
    assert open_model.capacity_model(b, rows) is b


def test_unsettled_first_solves_do_not_move_the_capacity():
    """The first solves' estimates stray far (a filter from its prior): fewer than half of
    the span's, they leave the capacity where the settled solves put it; a mean of the
    span would keep them for five minutes."""
    rows: list[list] = []
    settled = _model(0.15)
    for k, share in enumerate([0.9, 0.02]):                   # one far high, one far low
        open_model.add_level(rows, 15.0 * k, _model(share))
    for k in range(2, 6):
        open_model.add_level(rows, 15.0 * k, settled)
    own = open_model.rate_capacity(settled).capacity
    got = open_model.rate_capacity(open_model.capacity_model(settled, rows)).capacity
    assert got == own
    hist = np.log([r[1] for r in rows])
    mean = settled.variant(D_mc=settled.D_mc * (np.exp(hist.mean(axis=0)) / settled.D)[:, None])
    assert open_model.rate_capacity(mean).capacity < 0.9 * own


def test_a_real_change_is_in_once_it_holds_half_the_span():
    """A step of demand is followed, not smeared: the capacity's model is the old one's while
    the new level holds fewer than half of the span's solves, the new one's from then on."""
    rows: list[list] = []
    for k in range(20):
        open_model.add_level(rows, 15.0 * k, _model(0.10))
    t = 15.0 * 20
    for k in range(int(open_model.LEVEL_SPAN_S / 15.0)):
        now = _model(0.20)
        open_model.add_level(rows, t + 15.0 * k, now)
        c = open_model.capacity_model(now, rows)
        new = sum(r[1] == rows[-1][1] for r in rows)
        if 2 * new > len(rows):
            assert np.allclose(c.D_mc, now.D_mc)
        elif 2 * new < len(rows):
            assert np.allclose(c.D_mc @ c.mix, _model(0.10).D)
    assert 2 * new > len(rows)


def test_the_level_rows_survive_a_state_round_trip():
    """The solves' aggregate demands the median reads are part of a system's saved state, so
    a worker restarted from it reads the same median; a state saved before them starts
    gathering anew."""
    import json

    from solvers.simulation.physical import OpenArrivals, PhysicalNetwork, Tier, \
        monitor_physical
    from streams.core.config import Config, SystemConfig
    from streams.engine.pipeline import Pipeline
    from streams.engine.system import SystemState

    net = PhysicalNetwork((Tier("web", 2, 0.002), Tier("db", 1, 0.006)), ("a",), (1.0,), 0.0,
                          0, arrivals=OpenArrivals([(0.0, 60.0)]))
    recs = monitor_physical(net, 600.0, 5.0, warmup=20.0, seed=3, start_time=1e9)
    pipe = Pipeline(Config(defaults=SystemConfig(tiers=("web", "db"), sla_s={"*": 0.1})))
    pipe.process_many(recs)
    (state,) = pipe.systems.values()
    assert len(state.level_rows) >= 3
    back = SystemState.from_dict(json.loads(json.dumps(state.to_dict())), state.config)
    assert back.level_rows == state.level_rows
    old = state.to_dict()
    del old["level_rows"]
    assert SystemState.from_dict(old, state.config).level_rows == []
