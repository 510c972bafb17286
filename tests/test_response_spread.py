"""A class's spread about its mean from the windows' per-class means
(estimators/response_spread.py) and its use in the pool model's holding time
(streams/predict/pool_spread.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from estimators.response_spread import SpreadSums, scv_lower
from solvers.pools import PoolSpec
from streams.core.config import Pool, SystemConfig
from streams.core.tier import TierModel
from streams.predict.model import SystemModel, build_model
from streams.predict.model_row import model_from_row
from streams.predict.pool_spread import MIN_PAIRS, pool_class_scv


def _windows(rng, draw, means, K=400, rate=4.0):
    """``K`` windows of one class: Poisson counts, each window's mean of ``draw(mean, n)``."""
    n = rng.poisson(rate, K).astype(float)
    R = np.array([draw(m, int(k)).mean() if k > 0 else np.nan for m, k in zip(means, n)])
    return R[:, None], n[:, None]


def _read(R, n):
    s = SpreadSums()
    s.grow(["a"])
    s.add(R, n)
    return s.scv()["a"]


def test_the_spread_of_exponential_and_heavy_requests_is_read_within_its_noise():
    rng = np.random.default_rng(5)
    exp = lambda m, k: rng.exponential(m, k)                                    # noqa: E731
    scv, pairs = _read(*_windows(rng, exp, np.full(400, 0.05)))
    assert pairs > 350 and scv == pytest.approx(1.0, rel=0.25)
    sigma = np.sqrt(np.log(1 + 6.0))          # lognormal of SCV 6
    logn = lambda m, k: m * rng.lognormal(-sigma ** 2 / 2, sigma, k)            # noqa: E731
    scv, pairs = _read(*_windows(rng, logn, np.full(400, 0.05)))
    assert scv == pytest.approx(6.0, rel=0.35)


def test_a_drifting_mean_does_not_pass_for_spread():
    """The mean doubles over the windows (the load grows): the windows' means about their
    overall mean spread ~4x the requests' own SCV; the successive differences do not."""
    rng = np.random.default_rng(6)
    means = np.linspace(0.03, 0.06, 400)
    R, n = _windows(rng, lambda m, k: rng.exponential(m, k), means, rate=30.0)
    overall = float(np.nansum(R[:, 0] * n[:, 0]) / n.sum())
    has = n[:, 0] > 0
    batch = float(np.sum(n[has, 0] * (R[has, 0] - overall) ** 2) / (has.sum() - 1))
    assert batch / overall ** 2 > 2.0
    s = SpreadSums()
    s.grow(["a"])
    s.add(R, n)
    scv = s.per_class[0, 0] / s.per_class[0, 1] / overall ** 2
    assert scv == pytest.approx(1.0, rel=0.3)
    assert _read(R, n)[0] == pytest.approx(scv, rel=1e-9)


def test_windows_added_in_pieces_read_as_added_at_once_and_the_state_round_trips():
    rng = np.random.default_rng(7)
    R = rng.exponential(0.02, (50, 2))
    n = rng.poisson(2.0, (50, 2)).astype(float)
    R[n == 0] = np.nan
    whole, parts = SpreadSums(), SpreadSums()
    whole.grow(["a", "b"]), parts.grow(["a", "b"])
    whole.add(R, n)
    for chunk in (slice(0, 7), slice(7, 8), slice(8, 50)):
        parts.add(R[chunk], n[chunk])
    assert np.allclose(whole.per_class, parts.per_class, rtol=1e-12)
    whole.decay(0.5)
    again = SpreadSums.from_dict(whole.to_dict())
    assert np.array_equal(again.per_class, whole.per_class) and again.classes == ["a", "b"]
    assert SpreadSums.from_dict(None).classes == []
    assert whole.scv().keys() == {"a", "b"}
    empty = SpreadSums()
    empty.grow(["a"])
    empty.add(np.array([[0.01]]), np.array([[3.0]]))              # one window: no pair yet
    assert empty.scv() == {}


def test_the_lower_bound_is_below_the_estimate_and_tightens_with_pairs():
    assert scv_lower(2.0, 10) < scv_lower(2.0, 100) < 2.0
    assert scv_lower(2.0, 0) == 0.0


def _tier(name, spread=None):
    return TierModel(tier=name, cores=1, demands={"a": 0.01, "b": 0.05},
                     demand_std={"a": 0.0, "b": 0.0}, regression={"a": 0.01, "b": 0.05},
                     idc=1.0, idc_flag=None, mean_service=None, p95=None, process=None,
                     fit=None, bursty=False, windows=100, class_spread=spread or {})


def test_only_held_tiers_and_clear_evidence_enter_the_pool_model():
    tiers = [_tier("web", {"b": (9.0, 200.0)}), _tier("app"),
             _tier("db", {"a": (0.2, 200.0), "b": (6.0, 200.0)})]
    pools = [PoolSpec(2, 1, 3, "conn")]
    got, flags = pool_class_scv(tiers, ["a", "b"], pools)
    assert np.isnan(got[0]).all() and np.isnan(got[1]).all()    # web is not held
    assert np.isnan(got[2, 0]) and got[2, 1] == 6.0              # below 1: the tier's
    assert len(flags) == 1 and "b's time at db" in flags[0]
    # too few pairs, or a bound within reach of 1: none taken
    few = [_tier("web"), _tier("app"), _tier("db", {"b": (6.0, MIN_PAIRS - 1)})]
    near = [_tier("web"), _tier("app"), _tier("db", {"b": (1.3, 30.0)})]
    assert pool_class_scv(few, ["a", "b"], pools) == (None, [])
    assert pool_class_scv(near, ["a", "b"], pools) == (None, [])
    # three visits per request: a third of one visit's SCV
    V = np.ones((3, 2))
    V[2, 1] = 3.0
    assert pool_class_scv(tiers, ["a", "b"], pools, V)[0][2, 1] == pytest.approx(2.0)


def test_the_spread_lengthens_the_wait_and_the_store_keeps_it():
    cfg = SystemConfig(tiers=("app", "db"), think_time_s=1.0, sla_s={"*": 1.0},
                       pools={"conn": Pool("app", 2, ("app", "db"))})
    calm = build_model([_tier("app"), _tier("db")], ["a", "b"], {"a": 0.8, "b": 0.2}, 1.0, cfg)
    spread = build_model([_tier("app"), _tier("db", {"b": (8.0, 300.0)})], ["a", "b"],
                         {"a": 0.8, "b": 0.2}, 1.0, cfg)
    assert calm.class_scv is None and "class_scv" not in calm.to_dict()
    assert spread.class_scv is not None
    a, b = calm.at(30), spread.at(30)
    assert b.pool_waiting[0] > a.pool_waiting[0] and np.all(b.response > a.response)
    again = model_from_row("s", spread.to_dict())
    assert np.array_equal(again.class_scv, spread.class_scv, equal_nan=True)
    assert again.at(30).pool_waiting[0] == b.pool_waiting[0]
    # no pools: the spread is not read
    free = build_model([_tier("app"), _tier("db", {"b": (8.0, 300.0)})], ["a", "b"],
                       {"a": 0.8, "b": 0.2}, 1.0, dataclasses.replace(cfg, pools={}))
    assert free.class_scv is None
    assert isinstance(free, SystemModel)


def test_only_windows_at_low_load_are_read():
    """At load a class's time carries the tier's shared wait: those windows are left out, and
    a pair spans only low-load windows."""
    rng = np.random.default_rng(8)
    R, n = _windows(rng, lambda m, k: rng.exponential(m, k), np.full(200, 0.05), K=200)
    busy = np.where(np.arange(R.shape[0]) % 2 == 0, 0.1, 0.6)
    wild = R.copy()
    wild[busy > 0.5] *= rng.uniform(0.2, 5.0, (int((busy > 0.5).sum()), 1))
    s = SpreadSums()
    s.grow(["a"])
    s.add(wild, n, busy)
    low = busy <= 0.15
    alone = SpreadSums()
    alone.grow(["a"])
    alone.add(R[low], n[low])
    assert np.array_equal(s.per_class, alone.per_class)
