"""The open pool's passage law (:mod:`solvers.pools_passage`) against closed forms and the held
chain's means, and in the pipeline's quantiles
(:func:`streams.predict.pool_law.pool_quantiles`)."""

import math

import numpy as np
import pytest

from solvers.pools import PoolSpec
from solvers.pools_open import held_network, solve_open_pool
from solvers.pools_passage import passage_law
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from streams.predict import open_model, pool_law
from streams.predict.model import SystemModel

LEVELS = (0.5, 0.9, 0.95, 0.99)
BURSTY = MAP(BURSTY_D0, BURSTY_D1)


def one_tier(demand: float, cores: int, size: int, ps: bool = False):
    return held_network(np.array([[demand]]), [cores], [PoolSpec(size, 0, 1, "p")], 0, [1.0],
                        ps=[ps])


@pytest.mark.parametrize("size, cores", [(1, 1), (2, 1), (3, 1)])
def test_a_pool_over_one_fcfs_core_is_mm1(size, cores):
    # the token queue and the core's own FCFS queue are one FCFS queue: M/M/1's sojourn,
    # Exp(mu - lambda) -- the tagged request must wait its turn at the core (its order kept)
    mu, lam = 100.0, 70.0
    law = passage_law(one_tier(1.0 / mu, cores, size), lam)
    want = [-math.log(1.0 - q) / (mu - lam) for q in LEVELS]
    np.testing.assert_allclose(law.quantiles(LEVELS)[0], want, rtol=2e-3)
    assert law.mean[0] == pytest.approx(1.0 / (mu - lam), rel=1e-3)


def test_a_pool_of_k_over_k_cores_is_mmk():
    # M/M/K FCFS: the wait Erlang C's (0 or Exp(K mu - lambda)), then the service Exp(mu)
    mu, lam, K = 100.0, 250.0, 3
    a = lam / mu
    top = a ** K / math.factorial(K) * K / (K - a)
    wait = top / (sum(a ** i / math.factorial(i) for i in range(K)) + top)
    theta = K * mu - lam
    law = passage_law(one_tier(1.0 / mu, K, K), lam)
    t = np.array([0.005, 0.02, 0.05, 0.1])
    hypo = (theta * np.exp(-mu * t) - mu * np.exp(-theta * t)) / (theta - mu)
    want = (1.0 - wait) * np.exp(-mu * t) + wait * hypo
    np.testing.assert_allclose(law.sf(0, t), want, rtol=3e-3, atol=1e-6)


DEMANDS = np.array([[1.630e-3, 1.292e-3, 1.463e-3, 1.457e-3],
                    [2.142e-3, 2.216e-3, 3.835e-3, 50.668e-3]])
MIX = np.array([0.15, 0.4, 0.3, 0.15])


def held_testbed(scv: float = 1.0):
    v = np.ones_like(DEMANDS)
    v[1, 3] = scv
    return held_network(DEMANDS, [1, 1], [PoolSpec(2, 0, 2, "workers")], 0, MIX,
                        ps=[False, True], class_scv=v)


@pytest.mark.parametrize("scv, load", [(1.0, 0.5), (2.5, 0.6)])
def test_the_passage_means_are_the_chains(scv, load):
    # the passage's mean is the chain's residence plus its wait, but for the queue behind a
    # request that waited, taken at its mean
    c = held_testbed(scv)
    rate = load * c.saturation
    law = passage_law(c, rate)
    r = solve_open_pool(rate, c)
    np.testing.assert_allclose(law.mean, r.residence_time.sum(axis=0) + r.waiting_time,
                               rtol=0.01)
    assert np.all(law.variance > 0)


def test_no_law_without_a_chain_or_beyond_saturation():
    c = held_testbed()
    assert passage_law(c, 1.01 * c.saturation) is None
    bursty = held_network(np.array([[0.01]]), [1], [PoolSpec(2, 0, 1, "p")], 0, [1.0],
                          processes=[BURSTY.scaled(0.01)])
    assert passage_law(bursty, 20.0) is None


def pipeline(pools=True, processes=None):
    return SystemModel(tiers=["web", "app", "db"], classes=list("abcd"),
                       D_mc=np.vstack([np.full(4, 1e-3), DEMANDS]), mix=MIX.copy(),
                       servers=np.array([2.0, 1.0, 1.0]), think_time=0.0,
                       sla=np.full(4, np.inf), processes=processes, map_limit=10_000,
                       ps=np.array([False, False, True]),
                       ps_law=np.array([False, False, True]),
                       pools=(PoolSpec(2, 1, 3, "workers"),) if pools else ())


def test_the_pipeline_reads_the_passage_with_the_web_tier_convolved():
    m = pipeline()
    rate = 0.8 * open_model.saturation_rate(m)
    point, _ = open_model.open_point(m, rate)
    q = m.quantiles(point)
    assert pool_law.POOL_QUANTILE_FLAG not in m.flags
    law = passage_law(open_model.pool_curves(m)[0], rate)
    alone = law.quantiles(m.quantile_levels)
    # the web tier adds to every quantile, little at its 1 ms against the pool's wait
    assert np.all(q > alone)
    np.testing.assert_allclose(q, alone, rtol=0.1)
    # today's law before it: the open tiers without the pool at the PS db, far below
    from unittest import mock
    with mock.patch.object(pool_law, "pool_quantiles", return_value=None):
        before = m.quantiles(point)
    assert np.all(before[:3, -1] < 0.5 * q[:3, -1])


def test_a_bursty_tier_keeps_the_scaled_law_flagged():
    procs = [None, None, BURSTY.scaled(float(DEMANDS[1] @ MIX))]
    m = pipeline(processes=procs)
    point, _ = open_model.open_point(m, 0.3 * open_model.saturation_rate(m))
    assert point.model == "open-map" and not pool_law.passage_applies(m)
    assert pool_law.POOL_QUANTILE_FLAG in m.flags


def test_a_bursty_station_in_the_held_chain_keeps_the_scaled_law():
    # the pool's own bursty db (``pool_processes``, the rest exponential) is a station of the
    # held chain, whose passage the law does not take: no passage
    from solvers.held_network import BurstyHeldStation
    m = SystemModel(tiers=["app", "db"], classes=["a"], D_mc=np.array([[0.002], [0.004]]),
                    mix=np.ones(1), servers=np.array([1.0, 1.0]), think_time=1.0,
                    sla=np.ones(1), processes=None, map_limit=10_000,
                    pools=(PoolSpec(2, 0, 2, "w"),),
                    pool_processes=[MAP.exponential(0.002), BURSTY.scaled(0.004)])
    chain = open_model.pool_curves(m)[0].chain
    assert any(isinstance(st, BurstyHeldStation) for st in chain.stations)
    assert not pool_law.passage_applies(m)

def test_past_the_budget_a_ps_tier_law_is_scaled_to_the_pool_models_mean(monkeypatch):
    # without the passage the processor-sharing db's own law has no token wait in it: scaled
    # to the pool model's mean, as the flag says
    m = pipeline()
    point, _ = open_model.open_point(m, 0.8 * open_model.saturation_rate(m))
    monkeypatch.setattr(pool_law, "passage_law", lambda curve, rate: None)
    q = m.quantiles(point)
    assert pool_law.POOL_QUANTILE_FLAG in m.flags
    levels = list(m.quantile_levels)
    assert np.all(q[:, levels.index(0.5)] < point.response)
    assert np.all(q[:, levels.index(0.99)] > 2.0 * point.response)


def two_keys():
    # class 1 skips the one-core FCFS app: there the tagged class 0 keeps the holders' order,
    # class 1 does not -- two waiting chains
    D = np.array([[0.004, 0.0], [0.002, 0.003]])
    return held_network(D, [1, 1], [PoolSpec(2, 0, 2, "w")], 0, np.array([0.5, 0.5]),
                        ps=[False, True])


@pytest.mark.parametrize("make, shared_by", [(lambda: held_testbed(2.5), 4), (two_keys, 1)])
def test_the_shared_waiting_chain_is_each_classs_own(monkeypatch, make, shared_by):
    # the classes' waiting states are stepped once for all the classes of one representation
    # (one chain: the tagged request's class acts only at its token); each class's passage
    # alone, at its own uniformization rate, is the same law
    from solvers import pools_passage
    c = make()
    rate = 0.7 * c.saturation
    shared = passage_law(c, rate)
    original = pools_passage._survivals

    def one_at_a_time(parts):
        runs = [original([q]) for q in parts]
        return ([r[0][0] for r in runs], [r[1][0] for r in runs], sum(r[2] for r in runs))

    monkeypatch.setattr(pools_passage, "_survivals", one_at_a_time)
    alone = passage_law(c, rate)
    assert len(set(alone.uniform)) > 1           # the classes' own rates differ
    t = np.array([0.01, 0.05, 0.2, 0.5, 1.0])
    for k in range(len(shared.mean)):
        np.testing.assert_allclose(shared.sf(k, t), alone.sf(k, t), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(shared.mean, alone.mean, rtol=1e-6)
    if shared_by > 1:                             # one waiting chain stepped, not four
        assert shared.work < alone.work


def test_past_the_work_budget_no_law_and_the_scaled_law_flagged(monkeypatch):
    # the uniformization's multiply-adds are bounded (MAX_WORK), not only its states and
    # steps: past them no law, and the pipeline's quantiles are the scaled law, flagged
    from solvers import pools_passage
    c = held_testbed(2.5)
    rate = 0.7 * c.saturation
    law = passage_law(c, rate)
    assert 0 < law.work <= pools_passage.MAX_WORK
    monkeypatch.setattr(pools_passage, "MAX_WORK", law.work // 2)
    assert passage_law(c, rate) is None
    monkeypatch.setattr(pools_passage, "MAX_WORK", 1000)
    m = pipeline()
    point, _ = open_model.open_point(m, 0.7 * open_model.saturation_rate(m))
    m.quantiles(point)
    assert pool_law.POOL_QUANTILE_FLAG in m.flags
