"""The pipeline's pool model with a bursty tier (streams/predict/model.py): the pool point is
solved by solvers/pools_bursty.py's held chain where it applies, today's exponential pool model
(flagged) elsewhere; models without pools or without a bursty tier are as before."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.pools import PoolSpec, solve_pools
from solvers.pools_bursty import solve_pools_bursty
from solvers.processes import MAP
from streams.core.config import Pool, SystemConfig
from streams.core.tier import TierModel
from streams.predict.model import POOL_FLAG, SystemModel, build_model
from streams.predict.model_row import model_from_row

BURSTY = MAP(BURSTY_D0, BURSTY_D1)
E = MAP.exponential
CONN = (PoolSpec(6, 1, 3, "conn"),)
D = np.array([[0.02], [0.03], [0.05]])


def _model(pool_processes, pools=CONN):
    return SystemModel(tiers=["web", "app", "db"], classes=["a"], D_mc=D.copy(),
                       mix=np.array([1.0]), servers=np.array([4.0, 4.0, 8.0]),
                       think_time=1.0, sla=np.array([1.0]), processes=None, map_limit=10_000,
                       pools=pools, pool_processes=pool_processes)


def test_the_pool_point_is_the_bursty_solver_where_it_applies():
    procs = [E(1.0), E(1.0), BURSTY]
    point = _model(procs).at(60)
    truth = solve_pools_bursty(procs, 60, 1.0, [4, 4, 8], CONN, [1.0], D)
    assert point.model == "pools"
    assert point.throughput == truth.throughput
    assert point.pool_utilization[0] == truth.pool_utilization[0]
    assert point.pool_waiting[0] == truth.pool_waiting_time[0]
    assert point.response[0] == pytest.approx(truth.response_time[0], rel=1e-9)
    # the exponential pool model (today's without pool_processes) is another answer
    plain = _model(None).at(60)
    assert plain.throughput == solve_pools(D, 60, 1.0, [4, 4, 8], CONN, [1.0]).throughput
    assert abs(point.throughput / plain.throughput - 1) > 0.02


def test_over_the_chain_budget_the_exponential_pool_model_is_flagged(monkeypatch):
    import solvers.pools_bursty as module
    monkeypatch.setattr(module, "HELD_CHAIN_WORK", 10.0)
    model = _model([E(1.0), E(1.0), BURSTY])
    point = model.at(60)
    assert point.throughput == solve_pools(D, 60, 1.0, [4, 4, 8], CONN, [1.0]).throughput
    assert any(f.startswith(POOL_FLAG + "bursty tier solved as exponential") and "60 users" in f
               for f in model.flags)


def test_the_store_keeps_the_pool_processes():
    model = _model([E(1.0), E(1.0), BURSTY])
    row = model.to_dict()
    again = model_from_row("s", row)
    assert [p.to_dict() for p in again.pool_processes] == row["pool_processes"]
    assert again.at(40).throughput == model.at(40).throughput
    assert "pool_processes" not in _model(None).to_dict()     # stores without it read alike
    row["pool_processes"][2] = {"D0": [[1.0]]}
    with pytest.raises(ValueError, match=r"model\.pool_processes\[2\]"):
        model_from_row("s", row)


def _tier(name, demand, bursty=False):
    return TierModel(tier=name, cores=1, demands={"a": demand}, demand_std={"a": 0.0},
                     regression={"a": demand}, idc=50.0 if bursty else 1.0, idc_flag=None,
                     mean_service=None, p95=None, process=BURSTY if bursty else None,
                     fit=None, bursty=bursty, windows=100)


def _built(pools, bursty=True):
    tiers = [_tier("web", 0.02), _tier("app", 0.03), _tier("db", 0.05, bursty)]
    cfg = SystemConfig(tiers=("web", "app", "db"), think_time_s=1.0, sla_s={"*": 1.0},
                       pools=pools)
    return build_model(tiers, ["a"], {"a": 1.0}, 1.0, cfg)


OLD_FLAG = f"{POOL_FLAG}bursty tiers solved as exponential with their mean demands"


def test_build_model_wires_one_bursty_tier_under_one_pool():
    model = _built({"conn": Pool("app", 6, ("app", "db"))})
    assert model.processes is None and model.kind == "mva"      # every other route as before
    assert [p.order for p in model.pool_processes] == [1, 1, BURSTY.order]
    assert any(f.startswith(POOL_FLAG + "bursty tier solved by its held chain")
               for f in model.flags)
    assert not any(f.startswith(OLD_FLAG) for f in model.flags)
    # nested pools over the bursty tier: today's exponential pool model, today's flag
    nested = _built({"conn": Pool("app", 6, ("app", "db")), "db": Pool("db", 2, ("db",))})
    assert nested.pool_processes is None and any(f.startswith(OLD_FLAG) for f in nested.flags)
    # no pools: the MAP network as before; no bursty tier: no processes at all
    free = _built({})
    assert free.processes is not None and free.pool_processes is None
    assert "pool_processes" not in free.to_dict()
    calm = _built({"conn": Pool("app", 6, ("app", "db"))}, bursty=False)
    assert calm.pool_processes is None and "pool_processes" not in calm.to_dict()


def test_a_raised_pool_keeps_the_bursty_tier():
    """The remedy's and ``whatif --pool``'s variant of the model (a larger pool) is solved by
    the same chain at the new size."""
    import dataclasses
    model = _model([E(1.0), E(1.0), BURSTY])
    raised = model.variant(pools=(dataclasses.replace(CONN[0], size=9),))
    truth = solve_pools_bursty(raised.pool_processes, 60, 1.0, [4, 4, 8],
                               [PoolSpec(9, 1, 3, "conn")], [1.0], D)
    assert raised.at(60).throughput == truth.throughput > model.at(60).throughput


def test_with_pure_delays_the_bursty_tier_keeps_its_held_chain():
    """Pure delays (``latency = "estimate"``) no longer send the bursty tier to the
    exponential pool model: the model's point is the held chain with the delays, and a
    vanishing delay leaves it where it was without one."""
    procs = [E(1.0), E(1.0), BURSTY]
    delays = np.array([[0.0], [0.002], [0.005]])
    late = _model(procs).variant(delays=delays)
    point = late.at(60)
    truth = solve_pools_bursty(procs, 60, 1.0, [4, 4, 8], CONN, [1.0], D, delays)
    assert point.throughput == truth.throughput
    assert point.pool_waiting[0] == truth.pool_waiting_time[0]
    assert np.allclose(point.residence, truth.residence_time)
    assert point.response[0] == pytest.approx(truth.response_time[0], rel=1e-9)
    plain = _model(procs).at(60)
    tiny = _model(procs).variant(delays=np.full((3, 1), 1e-6)).at(60)
    assert tiny.throughput == pytest.approx(plain.throughput, rel=1e-4)
    assert tiny.response[0] == pytest.approx(plain.response[0], rel=1e-4)
