"""The physical multi-tier simulator (solvers.simulation.physical): the ground truth.

References: exact load-dependent MVA (``solvers.mva.mva``) where the system is product form
(exponential, class-independent service), Little's law and the utilization law where it is
not, the MAP queueing-network CTMC simulator (``simulate_closed``) where the two coincide
(one core, FCFS, a shared MAP), and Mi et al.'s (2008) index of dispersion for bursty MAP service.
All runs are seeded; no wall-clock assertions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.dispersion import index_of_dispersion
from solvers.mva import mva
from solvers.processes import MAP
from solvers.simulation import (
    ClosedNetwork,
    Estimate,
    PhysicalNetwork,
    Queue,
    Tier,
    monitor_physical,
    physical_checkpoints,
    simulate_closed,
    simulate_physical,
)
from solvers.simulation.physical import _service_blocks

CONTRACT_FIELDS = {"system", "tier", "end", "window_s", "utilization", "cores",
                   "completions", "response_time_s", "users"}


def agrees(est: Estimate, exact: float, widen: float = 2.0, floor: float = 0.01) -> bool:
    """``exact`` within the simulation's CI widened by ``widen`` (at least ``floor`` relative
    when the interval is tiny)."""
    return abs(est.mean - exact) <= max(widen * est.half_width, floor * abs(exact))


def bursty_map(mean: float = 0.02, switch: float = 0.05) -> MAP:
    """MMPP(2)-like MAP(2): fast and slow phases (10x apart), slow switching."""
    l1, l2 = 1 / 0.01, 1 / 0.1
    return MAP([[-switch - l1, switch], [switch, -switch - l2]],
               [[l1, 0.0], [0.0, l2]]).scaled(mean)


def single_class(tiers, population, think) -> PhysicalNetwork:
    return PhysicalNetwork(tiers=tiers, classes=("all",), mix=(1.0,), think_time=think,
                           population=population)


def three_tiers(multipliers, population=30) -> PhysicalNetwork:
    return PhysicalNetwork(
        tiers=(Tier("web", 4, 0.1, multipliers[0]), Tier("app", 4, 0.08, multipliers[1]),
               Tier("db", 8, 0.25, multipliers[2])),
        classes=("browse", "buy"), mix=(0.7, 0.3), think_time=1.0, population=population)


# ----------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("cores,service", [(1, 0.1), (4, 0.4)])
@pytest.mark.parametrize("population", [5, 20])
def test_single_tier_matches_exact_mva(cores, service, population):
    net = single_class((Tier("cpu", cores, service),), population, think=1.0)
    res = simulate_physical(net, 3000.0, warmup=100.0, replications=4, seed=11)
    exact = mva([service], [population], 1.0, [cores])
    assert res.method == "replications" and res.throughput[0].n == 4
    assert agrees(res.throughput[0], exact.throughput[0])
    assert agrees(res.total_throughput, exact.throughput[0])
    assert agrees(res.queue_length[0], exact.queue_length[0, 0])
    assert agrees(res.response_time[0], exact.response_time[0])
    assert agrees(res.utilization[0], exact.utilization[0, 0])


def test_three_tiers_class_independent_multipliers_match_mva():
    # FCFS multi-server stations with class-independent exponential service: product form.
    # One chain of users, classes drawn per request: exact single-chain MVA with the mean
    # demand per request is the reference, and every class sees the same response time.
    net = three_tiers([(1.0, 1.0), (1.5, 1.5), None])
    res = simulate_physical(net, 2000.0, warmup=100.0, replications=4, seed=5)
    d = net.demands @ np.array(net.mix)
    exact = mva(d, [30], 1.0, net.cores)
    for c in range(2):
        assert agrees(res.response_time[c], exact.response_time[0])
        assert agrees(res.throughput[c], net.mix[c] * exact.throughput[0])
    assert agrees(res.total_response_time, exact.response_time[0])
    for m in range(3):
        assert agrees(res.queue_length[m], exact.queue_length[m, 0])
        assert agrees(res.residence_time[m], exact.residence_time[m, 0])
        assert agrees(res.utilization[m], exact.utilization[m, 0])


def test_class_dependent_multipliers_obey_littles_law_and_utilization_law():
    net = three_tiers([(0.5, 2.0), (1.0, 3.0), (2.0, 0.25)])
    res = simulate_physical(net, 2000.0, warmup=100.0, replications=4, seed=7)
    X, R = res.total_throughput, res.total_response_time
    # Little's law for the whole closed system: N = X (R + Z)
    lhs = X.mean * (R.mean + net.think_time)
    rel_tol = 2.0 * (X.half_width / X.mean + R.half_width / (R.mean + net.think_time)) + 0.005
    assert abs(lhs - net.population) <= rel_tol * net.population
    # per-class throughput follows the mix
    for c in range(2):
        assert agrees(res.throughput[c], net.mix[c] * X.mean, floor=0.02)
    # utilization law with the true demands, and measured service times = true demands
    D = net.demands
    Xc = res.means("throughput")
    for m, tier in enumerate(net.tiers):
        assert agrees(res.utilization[m], float(Xc @ D[m]) / tier.cores)
        for c in range(2):
            assert agrees(res.service_time[m][c], D[m, c])
        # Little's law per tier: Q_m = X R_m
        assert agrees(res.queue_length[m], X.mean * res.residence_time[m].mean, floor=0.02)
    # per-class residence times add up to the per-class response times
    Rmc = res.means("residence_time_by_class")
    assert np.allclose(Rmc.sum(axis=0), res.means("response_time"), rtol=0.02)
    assert res.demands.shape == (3, 2) and res.services > 0


def test_zero_think_time_littles_law():
    net = single_class((Tier("a", 2, 0.05), Tier("b", 1, 0.03)), 6, think=0.0)
    res = simulate_physical(net, 1000.0, warmup=50.0, replications=1, batches=10, seed=3)
    assert res.method == "batch means" and res.batches == 10
    assert res.total_throughput.n == 10
    assert res.total_throughput.mean * res.total_response_time.mean == pytest.approx(6.0,
                                                                                    rel=0.01)
    exact = mva([0.05, 0.03], [6], 0.0, [2, 1])
    assert agrees(res.total_throughput, exact.throughput[0])


@pytest.mark.slow
def test_single_core_map_tier_agrees_with_map_queueing_network_simulation():
    # One core, FCFS, one MAP shared by all classes: the physical system *is* the MAP
    # queueing network of Mi et al. (2008), §4, so the CTMC simulator must agree with it.
    svc = bursty_map(0.02, switch=0.5)
    phys = single_class((Tier("web", 1, 0.015), Tier("db", 1, svc)), 10, think=0.2)
    model = ClosedNetwork(queues=[Queue("web", 0.015, "FCFS"), Queue("db", svc, "FCFS")],
                          populations=[10], think_times=0.2)
    a = simulate_physical(phys, 3000.0, warmup=100.0, replications=4, seed=21)
    b = simulate_closed(model, 3000.0, warmup=100.0, replications=4, seed=22)
    for mine, hw, theirs in ((a.total_throughput, b.throughput_hw[0], b.throughput[0]),
                             (a.response_time[0], b.response_time_hw[0], b.response_time[0])):
        assert abs(mine.mean - theirs) <= 2.0 * math.hypot(mine.half_width, hw)
    for m in range(2):
        assert abs(a.utilization[m].mean - b.utilization[m]) <= \
            2.0 * math.hypot(a.utilization[m].half_width, b.utilization_hw[m])


# ----------------------------------------------------------------------------- MAP sequences
def test_map_sequence_is_continuous_across_blocks():
    # Completions switch phase deterministically: the intervals alternate fast/slow. With
    # one interval per block, only a carried-over phase keeps the alternation.
    alt = MAP([[-100.0, 0.0], [0.0, -1.0]], [[0.0, 100.0], [1.0, 0.0]])
    blocks = _service_blocks(alt, np.random.default_rng(4), block=1)
    x = np.array([next(blocks)[0] for _ in range(4000)])
    even, odd = x[0::2].mean(), x[1::2].mean()
    assert {round(min(even, odd), 2), round(max(even, odd), 1)} == {0.01, 1.0}

    svc = bursty_map(0.02, switch=0.5)
    blocks = _service_blocks(svc, np.random.default_rng(8), block=7)
    y = np.concatenate([next(blocks) for _ in range(20000 // 7)])
    lag1 = np.corrcoef(y[:-1], y[1:])[0, 1]
    assert abs(y.mean() - svc.mean) < 0.05 * svc.mean
    assert abs(lag1 - svc.acf(1)) < 0.1


@pytest.mark.slow
def test_bursty_map_service_shows_in_the_windows():
    svc = bursty_map(0.02, switch=0.05)
    assert svc.idc > 300
    net = PhysicalNetwork(tiers=(Tier("web", 1, 0.02), Tier("db", 1, svc)),
                          classes=("a", "b"), mix=(0.5, 0.5), think_time=0.5, population=20)
    recs = monitor_physical(net, 12000.0, 1.0, warmup=50.0, seed=5)
    index = {}
    for tier in ("web", "db"):
        rows = [r for r in recs if r["tier"] == tier]
        u = np.array([r["utilization"] * r["cores"] for r in rows])
        n = np.array([sum(r["completions"].values()) for r in rows])
        index[tier] = index_of_dispersion(u, n, 1.0).value
    assert 0.5 < index["web"] < 2.0
    assert index["db"] > 30.0


def test_map_tier_with_cores_and_multipliers_has_the_true_demands():
    svc = bursty_map(0.04, switch=0.5)
    net = PhysicalNetwork(tiers=(Tier("app", 3, svc, (1.0, 4.0)),), classes=("s", "l"),
                          mix=(0.8, 0.2), think_time=0.5, population=15)
    res = simulate_physical(net, 2000.0, warmup=50.0, replications=3, seed=9)
    for c in range(2):
        assert agrees(res.service_time[0][c], net.demands[0, c], floor=0.02)
    assert agrees(res.utilization[0], float(res.means("throughput") @ net.demands[0]) / 3,
                  floor=0.02)


# ----------------------------------------------------------------------------- windows
def test_windows_shape_and_consistency_with_steady_state():
    net = three_tiers([(0.5, 2.0), None, (1.0, 1.5)], population=25)
    recs = monitor_physical(net, 600.0, 5.0, warmup=20.0, system="shop", seed=13)
    assert len(recs) == 120 * 3
    assert [r["tier"] for r in recs[:3]] == ["web", "app", "db"]
    for r in recs:
        assert set(r) == CONTRACT_FIELDS
        assert r["system"] == "shop" and r["window_s"] == 5.0 and r["users"] == 25
        assert 0.0 <= r["utilization"] <= 1.0
        assert set(r["completions"]) == {"browse", "buy"}
        assert set(r["response_time_s"]) == {c for c, k in r["completions"].items() if k > 0}
    assert recs[0]["end"] == 25.0 and recs[-1]["end"] == 620.0
    assert recs[0]["cores"] == 4 and recs[2]["cores"] == 8

    # same seed, one run: the windows add up to the steady-state measurement
    res = simulate_physical(net, 600.0, warmup=20.0, replications=1, batches=10, seed=13)
    last = [r for r in recs if r["tier"] == "db"]
    counts = [sum(r["completions"][c] for r in last) for c in net.classes]
    assert counts == res.completions.tolist()
    for m, tier in enumerate(net.tiers):
        rows = recs[m::3]
        busy = sum(r["utilization"] for r in rows) * 5.0
        assert busy == pytest.approx(res.utilization[m].mean * 600.0, rel=1e-9)
        n = sum(sum(r["completions"].values()) for r in rows)
        rsum = sum(r["response_time_s"][c] * r["completions"][c]
                   for r in rows for c in r["response_time_s"])
        assert rsum / n == pytest.approx(res.residence_time[m].mean, rel=1e-9)


def test_windows_are_deterministic_and_iso_time():
    net = single_class((Tier("a", 2, 0.05),), 8, think=0.5)
    first = monitor_physical(net, 50.0, 5.0, seed=1, start_time=1_800_000_000.0,
                             iso_time=True)
    again = monitor_physical(net, 50.0, 5.0, rng=np.random.default_rng(1),
                             start_time=1_800_000_000.0, iso_time=True)
    other = monitor_physical(net, 50.0, 5.0, seed=2, start_time=1_800_000_000.0,
                             iso_time=True)
    assert first == again
    assert first != other
    assert first[0]["end"] == "2027-01-15T08:00:05Z"


def test_steady_state_is_reproducible():
    net = single_class((Tier("a", 2, 0.05),), 8, think=0.5)
    runs = [simulate_physical(net, 200.0, warmup=10.0, replications=2, **kw)
            for kw in ({}, {"seed": 0}, {"rng": np.random.default_rng(0)}, {"seed": 1})]
    assert runs[0].total_throughput == runs[1].total_throughput == runs[2].total_throughput
    assert runs[3].total_throughput != runs[0].total_throughput
    assert runs[0].means("utilization").shape == (1,)
    assert runs[0].means("service_time").shape == (1, 1)
    assert runs[0].means("total_response_time").shape == ()
    with pytest.raises(ValueError, match="name: not an estimate field"):
        runs[0].means("classes")


def test_busy_time_is_split_exactly_across_window_edges():
    # one user, no think time, one core: the core is never idle, whatever the window size
    net = single_class((Tier("cpu", 1, 7.0),), 1, think=0.0)
    recs = monitor_physical(net, 100.0, 0.25, seed=3)
    assert all(r["utilization"] == pytest.approx(1.0, abs=1e-9) for r in recs)
    cp = physical_checkpoints(net, [0.0, 3.3, 50.0], seed=3)
    assert np.allclose(cp.busy[:, 0], [0.0, 3.3, 50.0])
    assert np.allclose(cp.queue_area[:, 0, 0], [0.0, 3.3, 50.0])


def test_users_follow_a_schedule():
    net = single_class((Tier("web", 2, 0.02), Tier("db", 1, 0.01)), 10, think=1.0)
    schedule = [(100.0, 40), (200.0, 80), (300.0, 5)]
    recs = monitor_physical(net, 400.0, 10.0, schedule=schedule, seed=6)
    users = {r["end"]: r["users"] for r in recs if r["tier"] == "web"}
    assert users[50.0] == 10 and users[100.0] == 10      # change at an edge: next window
    assert users[110.0] == 40 and users[200.0] == 40 and users[210.0] == 80
    assert all(users[t] == 5 for t in (310.0, 350.0, 400.0))
    done = {r["end"]: sum(r["completions"].values()) for r in recs if r["tier"] == "db"}
    assert done[250.0] > 3 * done[50.0]                   # more users, more requests

    zero = single_class((Tier("cpu", 1, 0.05),), 0, think=0.0)
    recs = monitor_physical(zero, 30.0, 10.0, schedule=[(10.0, 4), (20.0, 0)], seed=1)
    assert [r["users"] for r in recs] == [0, 4, 0]
    assert recs[0]["utilization"] == 0.0 and recs[1]["utilization"] == pytest.approx(1.0)


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("build,message", [
    (lambda: Tier("t", 0, 0.1), r"cores: must be an integer >= 1, got 0"),
    (lambda: Tier("t", 1.5, 0.1), r"cores: must be an integer >= 1, got 1.5"),
    (lambda: Tier("t", 1, -0.1), r"t.service: must be a mean service time > 0 \(finite\) or "
                                 r"a MAP or a CorrelatedService, got -0.1"),
    (lambda: Tier("t", 1, 0.1, class_service=(None, -1.0)),
     r"t.class_service\[1\]: must be a mean service time > 0"),
    (lambda: Tier("t", 1, "fast"), r"t.service: must be a mean service time > 0"),
    (lambda: Tier("", 1, 0.1), r"name: must be a non-empty string"),
    (lambda: Tier("t", 1, 0.1, (1.0, 0.0)), r"t.multipliers\[1\]: must be a finite number > 0"),
    (lambda: PhysicalNetwork((), ("a",), (1.0,), 1.0, 1), r"tiers: must be a non-empty"),
    (lambda: PhysicalNetwork((Tier("t", 1, 0.1), Tier("t", 1, 0.2)), ("a",), (1.0,), 1.0, 1),
     r"tiers: names must be unique"),
    (lambda: PhysicalNetwork((Tier("t", 1, 0.1, (1.0, 2.0, 3.0)),), ("a", "b"), (0.5, 0.5),
                             1.0, 1), r"t.multipliers: need 2 values"),
    (lambda: PhysicalNetwork((Tier("t", 1, 0.1),), ("a", "a"), (0.5, 0.5), 1.0, 1),
     r"classes: must be distinct"),
    (lambda: PhysicalNetwork((Tier("t", 1, 0.1),), ("a", "b"), (0.5, 0.6), 1.0, 1),
     r"mix: must be probabilities >= 0 that sum to 1"),
    (lambda: PhysicalNetwork((Tier("t", 1, 0.1),), ("a", "b"), (1.0,), 1.0, 1),
     r"mix: need 2 probabilities"),
    (lambda: PhysicalNetwork((Tier("t", 1, 0.1),), ("a",), (1.0,), -1.0, 1),
     r"think_time: must be a finite number >= 0, got -1.0"),
    (lambda: PhysicalNetwork((Tier("t", 1, 0.1),), ("a",), (1.0,), 1.0, -2),
     r"population: must be an integer >= 0, got -2"),
])
def test_invalid_specifications(build, message):
    with pytest.raises(ValueError, match=message):
        build()


NET = single_class((Tier("t", 1, 0.1),), 2, think=1.0)


@pytest.mark.parametrize("call,message", [
    (lambda: monitor_physical(NET, 10.0, 20.0), r"window_s: 20.0 is longer than duration"),
    (lambda: monitor_physical(NET, -1.0, 1.0), r"duration: must be a finite number > 0"),
    (lambda: monitor_physical(NET, 10.0, 1.0, warmup=math.nan), r"warmup: must be a finite"),
    (lambda: monitor_physical(NET, 10.0, 1.0, schedule=[(5.0, 3), (2.0, 1)]),
     r"schedule\[1\]: times must be sorted"),
    (lambda: monitor_physical(NET, 10.0, 1.0, schedule=[(5.0, -3)]),
     r"schedule\[0\] population: must be an integer >= 0, got -3"),
    (lambda: monitor_physical(NET, 10.0, 1.0, schedule=[5.0]), r"schedule\[0\]: must be a"),
    (lambda: monitor_physical(NET, 10.0, 1.0, seed=1, rng=np.random.default_rng(1)),
     r"rng, seed: give one of them"),
    (lambda: monitor_physical(NET, 10.0, 1.0, system=""), r"system: must be a non-empty"),
    (lambda: monitor_physical("net", 10.0, 1.0), r"network: must be a PhysicalNetwork"),
    (lambda: simulate_physical(NET, 10.0, warmup=1.0, replications=0),
     r"replications: must be an integer >= 1, got 0"),
    (lambda: simulate_physical(NET, 10.0, warmup=1.0, replications=1, batches=1),
     r"batches: must be an integer >= 2, got 1"),
    (lambda: simulate_physical(NET, 10.0, warmup=1.0, level=1.5), r"level: must be in \(0, 1\)"),
    (lambda: simulate_physical(NET, 10.0, warmup=-1.0), r"warmup: must be a finite number >= 0"),
    (lambda: physical_checkpoints(NET, [1.0, 1.0]), r"times: must be a non-empty, strictly"),
])
def test_invalid_runs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_response_time_quantiles_match_a_closed_station_exactly():
    """One 2-core exponential tier (a closed station: the arrival theorem's law is exact, no
    convolution): the simulated p50/p90/p99 cover the analytic ones; both interval methods."""
    from solvers.response_time import response_time_quantiles

    net = PhysicalNetwork(tiers=(Tier("db", 2, 0.2),), classes=("a",), mix=(1.0,),
                          think_time=1.0, population=12)
    levels = (0.5, 0.9, 0.99)
    exact = response_time_quantiles(np.array([0.2]), np.array([2.0]), 1.0, 12,
                                    levels=levels).quantiles[0]
    for kw in ({"replications": 4}, {"replications": 1, "batches": 10}):
        res = simulate_physical(net, 1500.0, warmup=50.0, seed=21, quantiles=levels, **kw)
        assert res.quantile_levels == levels
        for k, est in enumerate(res.response_time_quantiles[0]):
            assert 0 < est.half_width < 0.1 * est.mean
            assert est.contains(exact[k], widen=1.5), (k, est, exact[k])
    plain = simulate_physical(net, 100.0, warmup=10.0, seed=21)
    assert plain.response_time_quantiles == () and plain.quantile_levels == ()
    with pytest.raises(ValueError, match="quantiles"):
        simulate_physical(net, 100.0, warmup=10.0, quantiles=(0.5, 1.0))
