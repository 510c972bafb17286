"""Discrete-event simulation of closed/open networks, CIs and monitoring windows.

Reference values are computed independently inside the tests: exact MVA (single- and
multi-class recursion), the product-form distribution of a closed network, M/M/1, Erlang C,
M/G/1-PS, and the existing vectorised M/Trace/1 simulator (``single_queue.mtrace1``).
All runs are seeded.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from solvers.processes import MAP
from solvers.simulation import (
    ClosedNetwork,
    OpenNetwork,
    Queue,
    batch_means,
    batch_means_interval,
    closed_checkpoints,
    format_end,
    monitor_closed,
    monitor_open,
    mtrace1,
    replication_interval,
    simulate_closed,
    simulate_open,
    tier_windows,
)

CONTRACT_FIELDS = {"system", "tier", "end", "window_s", "utilization", "cores",
                   "completions", "response_time_s", "users"}


# ----------------------------------------------------------------------------- references
def mva_single(demands, think, population):
    """Exact single-class MVA: throughput, response time, per-queue queue lengths."""
    q = np.zeros(len(demands))
    for n in range(1, population + 1):
        r = np.asarray(demands) * (1.0 + q)
        x = n / (think + r.sum())
        q = x * r
    return x, r.sum(), q


def mva_multi(demands, think, populations):
    """Exact multi-class MVA over all population vectors; demands[m][c], think[c]."""
    d = np.asarray(demands, dtype=float)
    n_queues, n_cls = d.shape
    qlen = {}
    x = np.zeros(n_cls)
    r = np.zeros((n_queues, n_cls))
    for pop in itertools.product(*(range(k + 1) for k in populations)):
        if sum(pop) == 0:
            qlen[pop] = np.zeros(n_queues)
            continue
        x = np.zeros(n_cls)
        r = np.zeros((n_queues, n_cls))
        for c in range(n_cls):
            if pop[c]:
                prev = tuple(p - (i == c) for i, p in enumerate(pop))
                r[:, c] = d[:, c] * (1.0 + qlen[prev])
                x[c] = pop[c] / (think[c] + r[:, c].sum())
        qlen[pop] = (r * x).sum(axis=1)
    return x, r.sum(axis=0), qlen[tuple(populations)]


def map_network_ctmc(svc, demand2, think, pop):
    """Exact CTMC of Fig. 9 with a MAP front server (FCFS) and an exponential second queue.

    State (n1, n2, phase); the MAP's phase moves only while queue 1 is busy. Returns the
    throughput, the mean queue lengths and the probabilities that queue 1 / queue 2 hold
    strictly the most jobs.
    """
    order = svc.order
    states = [(a, b, p) for a in range(pop + 1) for b in range(pop + 1 - a)
              for p in range(order)]
    index = {st: i for i, st in enumerate(states)}
    gen = np.zeros((len(states), len(states)))
    for (a, b, p), i in index.items():
        thinking = pop - a - b
        if thinking:
            gen[i, index[(a + 1, b, p)]] += thinking / think
        if a:
            for q in range(order):
                if q != p:
                    gen[i, index[(a, b, q)]] += svc.D0[p, q]
                gen[i, index[(a - 1, b + 1, q)]] += svc.D1[p, q]
        if b:
            gen[i, index[(a, b - 1, p)]] += 1.0 / demand2
    gen -= np.diag(gen.sum(axis=1))
    a_mat = np.vstack([gen.T, np.ones(len(states))])
    rhs = np.zeros(len(states) + 1)
    rhs[-1] = 1.0
    pi = np.linalg.lstsq(a_mat, rhs, rcond=None)[0]
    n1 = np.array([st[0] for st in states])
    n2 = np.array([st[1] for st in states])
    x = float(pi @ np.where(n2 > 0, 1.0 / demand2, 0.0))
    return x, np.array([pi @ n1, pi @ n2]), np.array([pi[n1 > n2].sum(), pi[n2 > n1].sum()])


def erlang_c(servers, offered):
    """Probability of waiting in M/M/c with offered load a = lambda/mu."""
    a, c = offered, servers
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def bursty_map(mean):
    """A MAP(2) with SCV > 1 and positively correlated intervals (index of dispersion > 1)."""
    m = MAP([[-10.0, 0.1], [0.05, -0.55]], [[9.9, 0.0], [0.0, 0.5]])
    return m.scaled(mean)


def moderate_map(mean):
    """A MAP(2) with SCV about 2.3 and index of dispersion about 7."""
    return MAP([[-3.0, 0.2], [0.1, -0.6]], [[2.8, 0.0], [0.0, 0.5]]).scaled(mean)


def within(sim, hw, exact, k=3.0):
    return np.all(np.abs(np.asarray(sim) - np.asarray(exact)) <= k * np.asarray(hw))


# ----------------------------------------------------------------------------- closed vs MVA
def test_single_class_closed_network_matches_exact_mva():
    demands, think, pop = [0.05, 0.04], 1.0, 15
    net = ClosedNetwork([Queue("front", demands[0]), Queue("db", demands[1])],
                        populations=pop, think_times=think)
    res = simulate_closed(net, 4000.0, warmup=100.0, batches=20, seed=101)
    x, r, q = mva_single(demands, think, pop)
    assert res.method == "batch means" and res.throughput_hw is not None
    assert within(res.throughput, res.throughput_hw, x)
    assert within(res.response_time, res.response_time_hw, r)
    assert within(res.utilization, res.utilization_hw, x * np.array(demands))
    assert within(res.queue_length, res.queue_length_hw, q)
    # the intervals are informative, not huge
    assert res.throughput_hw[0] < 0.02 * x


def test_two_class_closed_network_matches_exact_multiclass_mva():
    demands = [[0.04, 0.10], [0.06, 0.02]]  # [queue][class]
    think, pops = [0.5, 1.0], (4, 3)
    net = ClosedNetwork([Queue("front", demands[0]), Queue("db", demands[1])],
                        populations=pops, think_times=think, classes=("home", "best"))
    res = simulate_closed(net, 600.0, warmup=50.0, replications=6, seed=7)
    x, r, q = mva_multi(demands, think, pops)
    assert res.method == "replications" and res.replications == 6
    assert res.classes == ("home", "best")
    assert within(res.throughput, res.throughput_hw, x)
    assert within(res.response_time, res.response_time_hw, r)
    assert within(res.queue_length, res.queue_length_hw, q)
    util = np.asarray(demands) @ x
    assert within(res.utilization, res.utilization_hw, util)


def test_littles_law_holds_on_the_sample_path():
    net = ClosedNetwork([Queue("a", [0.03, 0.05]), Queue("b", [0.02, 0.04], "FCFS")],
                        populations=(6, 4), think_times=(0.4, 0.8))
    res = simulate_closed(net, 1500.0, seed=3)
    pops = np.array([6, 4])
    # queues only, a sample-path identity up to requests straddling the period's ends:
    # sum_m Q_{m,c} = X_c R_c, and per queue Q_{m,c} = X_c * residence_{m,c}
    np.testing.assert_allclose(res.queue_length_by_class.sum(axis=0),
                               res.throughput * res.response_time, rtol=0.005)
    np.testing.assert_allclose(res.queue_length_by_class,
                               res.throughput[None, :] * res.residence_time, rtol=0.005)
    # whole network incl. delay station: N_c = X_c (R_c + Z_c); holds in expectation (the
    # sampled think times average Z_c only up to ~1.5% here)
    np.testing.assert_allclose(res.throughput * (res.response_time + [0.4, 0.8]), pops,
                               rtol=0.05)
    np.testing.assert_allclose(res.residence_time.sum(axis=0), res.response_time, rtol=1e-9)


def test_ps_and_fcfs_agree_for_single_class_exponential_service():
    def run(disc, seed):
        net = ClosedNetwork([Queue("a", 0.05, disc), Queue("b", 0.045, disc)],
                            populations=12, think_times=0.6)
        return simulate_closed(net, 2500.0, batches=20, seed=seed)

    ps, fcfs = run("PS", 11), run("FCFS", 12)
    for name in ("throughput", "response_time", "utilization", "queue_length"):
        a, b = getattr(ps, name), getattr(fcfs, name)
        hw = np.hypot(getattr(ps, f"{name}_hw"), getattr(fcfs, f"{name}_hw"))
        assert within(a, hw, b), name
    x, r, _ = mva_single([0.05, 0.045], 0.6, 12)
    assert within(fcfs.throughput, fcfs.throughput_hw, x)


def test_ps_with_a_shared_map_has_the_fcfs_queue_length_process():
    svc = bursty_map(0.05)
    assert svc.idc > 5  # really bursty

    def run(disc, seed):
        net = ClosedNetwork([Queue("front", svc, disc), Queue("db", 0.04, disc)],
                            populations=10, think_times=0.5)
        return simulate_closed(net, 1500.0, replications=5, seed=seed, bottleneck=True)

    ps, fcfs = run("PS", 21), run("FCFS", 22)
    for name in ("throughput", "utilization", "queue_length", "bottleneck"):
        a, b = getattr(ps, name), getattr(fcfs, name)
        hw = np.hypot(getattr(ps, f"{name}_hw"), getattr(fcfs, f"{name}_hw"))
        assert within(a, hw, b), name
    # burstiness costs throughput with respect to exponential service of the same mean
    x_mva, _, _ = mva_single([0.05, 0.04], 0.5, 10)
    assert fcfs.throughput[0] + 3 * fcfs.throughput_hw[0] < x_mva


@pytest.mark.parametrize("disc", ["FCFS", "PS"])
def test_map_front_server_matches_the_exact_markov_chain(disc):
    # Mi et al. (2008), Fig. 9 with a bursty front server: the simulation against the exact CTMC
    svc, demand2, think, pop = moderate_map(0.05), 0.04, 0.5, 8
    net = ClosedNetwork([Queue("front", svc, disc), Queue("db", demand2, disc)],
                        populations=pop, think_times=think)
    res = simulate_closed(net, 2000.0, batches=20, bottleneck=True, seed=81)
    x, q, bn = map_network_ctmc(svc, demand2, think, pop)
    assert within(res.throughput, res.throughput_hw, x)
    assert within(res.queue_length, res.queue_length_hw, q)
    assert within(res.bottleneck, res.bottleneck_hw, bn)
    # ... and it differs from MVA with the same means (why the MAP model exists)
    x_mva, _, _ = mva_single([0.05, demand2], think, pop)
    assert abs(res.throughput[0] - x_mva) > 3 * res.throughput_hw[0]


@pytest.mark.parametrize("disc", ["FCFS", "PS"])
def test_per_class_map_services_obey_the_utilization_law(disc):
    # one MAP per class: each class's process serves only its own jobs, so the busy time
    # is sum_c X_c E[S_c] (U = X D) whatever the discipline
    means = np.array([0.03, 0.06])
    net = ClosedNetwork([Queue("front", [moderate_map(means[0]), bursty_map(means[1])], disc),
                         Queue("db", [0.02, 0.01], disc)],
                        populations=(5, 4), think_times=(0.3, 0.6))
    res = simulate_closed(net, 1500.0, replications=4, seed=91)
    assert within(res.utilization[:1], res.utilization_hw[:1], res.throughput @ means)
    np.testing.assert_allclose(res.queue_length_by_class.sum(axis=0),
                               res.throughput * res.response_time, rtol=0.01)


def test_multiclass_mmc_utilization_and_throughput():
    lam, means = np.array([0.8, 0.5]), np.array([1.0, 2.0])
    net = OpenNetwork([Queue("q", list(means), "FCFS", servers=3)], arrival_rates=lam)
    res = simulate_open(net, 20_000.0, batches=20, seed=92)
    assert within(res.utilization, res.utilization_hw, lam @ means / 3)
    assert within(res.throughput, res.throughput_hw, lam)
    assert np.all(res.response_time >= means)


def test_bottleneck_probability_matches_product_form():
    demands, think, pop = np.array([0.05, 0.04]), 0.3, 8
    net = ClosedNetwork([Queue("a", demands[0]), Queue("b", demands[1])],
                        populations=pop, think_times=think)
    res = simulate_closed(net, 3000.0, batches=20, bottleneck=True, seed=5)
    # exact: P(k thinking, n1, n2) proportional to Z^k/k! D1^n1 D2^n2
    weights = {}
    for n1 in range(pop + 1):
        for n2 in range(pop + 1 - n1):
            k = pop - n1 - n2
            weights[(n1, n2)] = think**k / math.factorial(k) * demands[0]**n1 * demands[1]**n2
    total = sum(weights.values())
    p1 = sum(w for (a, b), w in weights.items() if a > b) / total
    p2 = sum(w for (a, b), w in weights.items() if b > a) / total
    assert within(res.bottleneck, res.bottleneck_hw, [p1, p2])
    assert res.bottleneck.sum() + res.bottleneck_tie == pytest.approx(1.0, abs=1e-9)
    assert res.estimate("bottleneck", 0).contains(p1, widen=3.0)


def test_mix_network_matches_chain_level_mva():
    # one population of users, each request of class c with probability mix[c]: with PS the
    # chain's throughput is single-class MVA with mix-weighted demands and think time
    demands = np.array([[0.04, 0.12], [0.05, 0.01]])
    mix, think, pop = np.array([0.7, 0.3]), np.array([0.5, 0.5]), 12
    net = ClosedNetwork([Queue("front", demands[0]), Queue("db", demands[1])],
                        populations=pop, think_times=think, mix=mix)
    res = simulate_closed(net, 1500.0, replications=5, seed=8)
    x, _, q = mva_single(demands @ mix, float(mix @ think), pop)
    hw_total = np.sqrt((res.throughput_hw**2).sum())
    assert abs(res.throughput.sum() - x) <= 3 * hw_total
    assert within(res.throughput, res.throughput_hw, x * mix)
    assert within(res.queue_length, res.queue_length_hw, q)


# ----------------------------------------------------------------------------- open queues
def test_open_mm1_matches_closed_form():
    lam, mean = 0.7, 1.0
    res = simulate_open(OpenNetwork([Queue("q", mean, "FCFS")], arrival_rates=lam),
                        150_000.0, batches=20, seed=31)
    rho = lam * mean
    assert within(res.response_time, res.response_time_hw, mean / (1 - rho))
    assert within(res.queue_length, res.queue_length_hw, rho / (1 - rho))
    assert within(res.utilization, res.utilization_hw, rho)
    assert within(res.throughput, res.throughput_hw, lam)


@pytest.mark.parametrize("servers,lam", [(2, 1.5), (4, 3.4)])
def test_open_mmc_matches_erlang_c(servers, lam):
    mean = 1.0
    res = simulate_open(OpenNetwork([Queue("q", mean, "FCFS", servers=servers)],
                                    arrival_rates=lam), 60_000.0, batches=20, seed=servers)
    a = lam * mean
    wait = erlang_c(servers, a) / (servers / mean - lam)
    assert within(res.response_time, res.response_time_hw, mean + wait)
    assert within(res.utilization, res.utilization_hw, a / servers)
    assert within(res.queue_length, res.queue_length_hw, lam * (mean + wait))


def test_open_multiclass_ps_is_insensitive():
    # M/G/1-PS, several classes: R_c = S_c / (1 - rho)
    lam, means = np.array([0.3, 0.2]), np.array([1.0, 1.5])
    net = OpenNetwork([Queue("q", list(means), "PS")], arrival_rates=lam)
    res = simulate_open(net, 60_000.0, batches=20, seed=17)
    rho = float(lam @ means)
    assert within(res.response_time, res.response_time_hw, means / (1 - rho))


def test_open_tandem_is_two_independent_mm1():
    lam = 0.5
    net = OpenNetwork([Queue("a", 1.2, "FCFS"), Queue("b", 0.8, "PS")], arrival_rates=lam)
    res = simulate_open(net, 60_000.0, batches=20, seed=19)
    r = 1.2 / (1 - lam * 1.2) + 0.8 / (1 - lam * 0.8)
    assert within(res.response_time, res.response_time_hw, r)


def test_open_queue_rejects_overload():
    with pytest.raises(ValueError, match="arrival_rates"):
        OpenNetwork([Queue("q", 1.0, "FCFS")], arrival_rates=1.0)
    with pytest.raises(ValueError, match="arrival_rates"):
        OpenNetwork([Queue("q", bursty_map(2.0), "FCFS")], arrival_rates=0.6)


# ----------------------------------------------------------------------------- MAP service
def test_saturated_map_queue_completes_at_the_map_rate():
    svc = bursty_map(0.2)
    net = ClosedNetwork([Queue("q", svc, "FCFS")], populations=3, think_times=0.0)
    res = simulate_closed(net, 20000.0, batches=20, seed=41)
    assert res.utilization[0] == pytest.approx(1.0)
    assert within(res.throughput, res.throughput_hw, svc.rate)
    assert res.queue_length[0] == pytest.approx(3.0)


def test_map_queue_matches_the_mtrace1_simulator():
    # M/MAP/1 (the MAP's phase frozen while idle) = M/Trace/1 with consecutive MAP intervals
    svc = moderate_map(1.0)
    lam = 0.5
    res = simulate_open(OpenNetwork([Queue("q", svc, "FCFS")], arrival_rates=lam),
                        200_000.0, batches=20, seed=43)
    rng = np.random.default_rng(44)
    trace = mtrace1(lam, svc.sample(100_000, rng), rng)
    ref = batch_means_interval(trace.response, 20, warmup=5000)
    hw = math.hypot(res.response_time_hw[0], ref.half_width)
    assert abs(res.response_time[0] - ref.mean) <= 3 * hw
    assert hw < 0.1 * ref.mean
    assert within(res.utilization, res.utilization_hw, lam * svc.mean)
    # and burstiness matters: well above M/M/1 at the same load
    assert res.response_time[0] > 1.5 / (1 - lam)


# ----------------------------------------------------------------------------- monitoring
def _two_tier(**kw):
    return ClosedNetwork([Queue("front", [0.02, 0.05]), Queue("db", [0.03, 0.01], "FCFS")],
                         populations=(10, 5), think_times=(0.5, 1.0),
                         classes=("home", "best_sellers"), **kw)


def test_monitoring_records_follow_the_input_contract():
    recs = monitor_closed(_two_tier(), 60.0, 5.0, warmup=20.0, system="shop",
                          start_time=1_790_000_000.0, seed=51)
    assert len(recs) == 12 * 2
    assert json.loads(json.dumps(recs)) == recs  # plain JSON types
    for i, rec in enumerate(recs):
        assert set(rec) == CONTRACT_FIELDS
        assert rec["system"] == "shop" and rec["tier"] == ("front", "db")[i % 2]
        assert rec["window_s"] == 5.0 and rec["cores"] == 1 and rec["users"] == 15
        assert 0.0 <= rec["utilization"] <= 1.0
        assert set(rec["completions"]) == {"home", "best_sellers"}
        assert set(rec["response_time_s"]) <= set(rec["completions"])
        for cls, n in rec["completions"].items():
            assert (cls in rec["response_time_s"]) == (n > 0)
    ends = [r["end"] for r in recs[::2]]
    np.testing.assert_allclose(np.diff(ends), 5.0)
    assert ends[0] == pytest.approx(1_790_000_000.0 + 25.0)
    iso = monitor_closed(_two_tier(), 10.0, 5.0, start_time=1_790_000_000.0, seed=51,
                         iso_time=True)
    assert iso[0]["end"] == "2026-09-21T14:13:25Z"
    assert format_end(1_790_000_000.25, True) == "2026-09-21T14:13:20.250Z"
    open_recs = monitor_open(OpenNetwork([Queue("web", 0.1)], arrival_rates=2.0), 20.0, 5.0,
                             seed=1)
    assert len(open_recs) == 4 and all("users" not in r for r in open_recs)


def test_monitoring_windows_conserve_work_and_completions():
    net = _two_tier()
    demands = np.array([[0.02, 0.05], [0.03, 0.01]])
    edges = 50.0 + 5.0 * np.arange(201)
    cp = closed_checkpoints(net, edges, seed=52)
    recs = monitor_closed(net, 1000.0, 5.0, warmup=50.0, seed=52)
    wins = tier_windows(cp)
    for m, tier in enumerate(("front", "db")):
        rows = [r for r in recs if r["tier"] == tier]
        counts = np.array([[r["completions"][c] for c in ("home", "best_sellers")]
                           for r in rows])
        util = np.array([r["utilization"] for r in rows])
        # the records are the windows of the same run
        np.testing.assert_array_equal(counts, wins[m].completions)
        np.testing.assert_allclose(util, wins[m].utilization)
        # window completions add up to the run's completions at that tier
        np.testing.assert_array_equal(counts.sum(axis=0),
                                      cp.queue_completions[-1, m] - cp.queue_completions[0, m])
        # utilization law on average: mean U = sum_c X_c D_c
        x = counts.sum(axis=0) / 1000.0
        assert util.mean() == pytest.approx(float(demands[m] @ x), rel=0.03)
        # and the per-class mean response time weights back to the total residence time
        rt = np.array([[r["response_time_s"].get(c, 0.0) for c in ("home", "best_sellers")]
                       for r in rows])
        np.testing.assert_allclose((rt * counts).sum(axis=0),
                                   cp.residence_sum[-1, m] - cp.residence_sum[0, m], rtol=1e-9)
    # the last tier's completions are the system's
    np.testing.assert_array_equal(wins[1].completions.sum(axis=0),
                                  cp.completions[-1] - cp.completions[0])


def test_population_schedule_ramps_users_up_and_down():
    net = ClosedNetwork([Queue("front", 0.02), Queue("db", 0.015)], populations=5,
                        think_times=0.5)
    schedule = [(100.0, 40), (200.0, 10)]
    recs = monitor_closed(net, 300.0, 5.0, schedule=schedule, seed=61)
    front = [r for r in recs if r["tier"] == "front"]
    users = np.array([r["users"] for r in front])
    ends = np.array([r["end"] for r in front])
    thr = np.array([sum(r["completions"].values()) for r in front]) / 5.0
    assert np.all(users[ends <= 100.0] == 5)
    assert np.all(users[(ends > 100.0) & (ends <= 200.0)] == 40)
    # a decrease waits for users in the middle of a request; it completes within seconds
    after = users[ends > 200.0]
    assert after[0] >= 10 and np.all(after[2:] == 10) and np.all(np.diff(after) <= 0)
    mid = thr[(ends > 120.0) & (ends <= 200.0)].mean()
    low = thr[ends <= 100.0].mean()
    assert mid > 4.0 * low
    x5, _, _ = mva_single([0.02, 0.015], 0.5, 5)
    x40, _, _ = mva_single([0.02, 0.015], 0.5, 40)
    assert low == pytest.approx(x5, rel=0.1) and mid == pytest.approx(x40, rel=0.1)


def test_schedule_with_per_class_populations_and_zero_start():
    net = ClosedNetwork([Queue("a", [0.02, 0.03])], populations=(0, 0), think_times=0.2)
    cp = closed_checkpoints(net, [5.0, 50.0, 100.0], schedule=[(10.0, (3, 2)), (60.0, (0, 4))],
                            seed=62)
    assert cp.users.tolist() == [0, 5, 4]
    assert cp.completions[0].sum() == 0 and cp.completions[1].min() > 0
    with pytest.raises(ValueError, match="schedule"):
        closed_checkpoints(net, [1.0], schedule=[(0.5, 3)], seed=1)


# ----------------------------------------------------------------------------- CI functions
def test_replication_interval_covers_at_about_the_nominal_rate():
    rng = np.random.default_rng(71)
    hits = sum(replication_interval(rng.normal(3.0, 2.0, 10), 0.9).contains(3.0)
               for _ in range(1000))
    assert 0.87 <= hits / 1000 <= 0.93
    hits95 = sum(replication_interval(rng.normal(-1.0, 0.5, 5)).contains(-1.0)
                 for _ in range(1000))
    assert 0.93 <= hits95 / 1000 <= 0.97


def test_batch_means_interval_covers_at_about_the_nominal_rate():
    rng = np.random.default_rng(72)
    hits = 0
    for _ in range(400):
        est = batch_means_interval(rng.normal(5.0, 1.0, 2000), n_batches=20, warmup=100)
        hits += est.contains(5.0)
        assert est.n == 20 and est.level == 0.95
    assert 0.91 <= hits / 400 <= 0.98


def test_batch_means_of_a_correlated_series_widen_the_interval():
    rng = np.random.default_rng(73)
    x = np.empty(20000)
    x[0] = 0.0
    noise = rng.normal(size=x.size)
    for i in range(1, x.size):  # AR(1), phi = 0.9: naive iid interval far too narrow
        x[i] = 0.9 * x[i - 1] + noise[i]
    naive = replication_interval(x)
    bm = batch_means_interval(x, n_batches=20)
    assert bm.half_width > 3.0 * naive.half_width
    assert bm.contains(0.0)


def test_ci_edge_cases_are_flagged_not_nan():
    one = replication_interval([2.0])
    assert one.mean == 2.0 and math.isinf(one.half_width) and one.n == 1
    flat = replication_interval([1.0, 1.0, 1.0])
    assert flat.half_width == 0.0
    assert batch_means(np.arange(10.0), 3).tolist() == [2.0, 5.0, 8.0]  # first one dropped
    with pytest.raises(ValueError, match="level"):
        replication_interval([1.0, 2.0], level=1.5)
    with pytest.raises(ValueError, match="values"):
        replication_interval([1.0, float("nan")])
    with pytest.raises(ValueError, match="n_batches"):
        batch_means_interval([1.0, 2.0], n_batches=5)


# ----------------------------------------------------------------------------- API behaviour
def test_runs_are_reproducible_and_seeded_only_by_the_caller():
    net = _two_tier()
    a = simulate_closed(net, 200.0, seed=5)
    b = simulate_closed(net, 200.0, rng=np.random.default_rng(5))
    c = simulate_closed(net, 200.0, seed=6)
    np.testing.assert_array_equal(a.throughput, b.throughput)
    assert a.events == b.events
    assert not np.array_equal(a.throughput, c.throughput)
    assert a.throughput_hw is None and a.method == "single run"
    with pytest.raises(ValueError, match="rng, seed"):
        simulate_closed(net, 10.0, seed=1, rng=np.random.default_rng(1))


def test_invalid_specifications_name_the_field():
    with pytest.raises(ValueError, match="discipline"):
        Queue("a", 1.0, "LIFO")
    with pytest.raises(ValueError, match="servers"):
        Queue("a", 1.0, "PS", servers=2)
    with pytest.raises(ValueError, match="service"):
        ClosedNetwork([Queue("a", [1.0, 2.0, 3.0])], populations=(1, 1), think_times=1.0)
    with pytest.raises(ValueError, match="service"):
        ClosedNetwork([Queue("a", -1.0)], populations=1, think_times=1.0)
    with pytest.raises(ValueError, match="service"):
        ClosedNetwork([Queue("a", bursty_map(1.0), "FCFS", servers=2)], populations=1,
                      think_times=1.0)
    with pytest.raises(ValueError, match="populations"):
        ClosedNetwork([Queue("a", 1.0)], populations=-2, think_times=1.0)
    with pytest.raises(ValueError, match="think_times"):
        ClosedNetwork([Queue("a", 1.0)], populations=2, think_times=-1.0)
    with pytest.raises(ValueError, match="mix"):
        ClosedNetwork([Queue("a", 1.0)], populations=2, think_times=1.0, mix=[-1.0, 2.0])
    net = ClosedNetwork([Queue("a", 1.0)], populations=2, think_times=1.0)
    with pytest.raises(ValueError, match="duration"):
        simulate_closed(net, 0.0, seed=1)
    with pytest.raises(ValueError, match="batches"):
        simulate_closed(net, 10.0, replications=3, batches=10, seed=1)
    with pytest.raises(ValueError, match="window_s"):
        monitor_closed(net, 10.0, 20.0, seed=1)
