"""Visit ratios from the tiers' completions (streams/predict/visits.py): the counts' ratio used
where the configuration is silent, a contradicting table flagged, the simulator's visits, and
the pipeline's predictions without a table equal to those with the true one."""

from __future__ import annotations

import numpy as np
import pytest

from bench.accuracy import visits as bench
from solvers.mva import mva
from solvers.simulation.physical import (PhysicalNetwork, Tier, monitor_physical,
                                         simulate_physical)
from streams.core.config import Config, SystemConfig
from streams.engine.pipeline import Pipeline
from streams.engine.system import SystemState
from streams.predict.visits import (VISIT_DECAY, VISIT_MIN_COMPLETIONS, add_counts,
                                    resolve)

TIERS = {"front": ["a", "b"], "db": ["a", "b"]}


def _sums(per_interval: list[dict[str, dict[str, float]]], entry: str = "front") -> dict:
    sums: dict = {}
    for completions in per_interval:
        add_counts(sums, entry, completions)
    return sums


def test_ratio_of_sums_is_learned_and_misaligned_intervals_cancel():
    # db completes 3 a and 2 b per request; one interval's windows at db fall in the next
    rows = [{"front": {"a": 100, "b": 50}, "db": {"a": 300, "b": 100}}] * 10
    rows[4] = {"front": {"a": 100, "b": 50}, "db": {"a": 240, "b": 80}}
    rows[5] = {"front": {"a": 100, "b": 50}, "db": {"a": 360, "b": 120}}
    vis = resolve(SystemConfig(), _sums(rows), "front", TIERS, ["a", "b"])
    assert vis.visit("db", "a") == pytest.approx(3.0, rel=2e-3)
    assert vis.visit("db", "b") == pytest.approx(2.0, rel=2e-3)
    assert vis.visit("front", "a") == 1.0 and vis.flags == []
    assert vis.measured["db"]["a"] == vis.visit("db", "a")


def test_sums_decay_per_solve_and_skip_intervals_without_the_entry_tier():
    sums = _sums([{"front": {"a": 10}, "db": {"a": 30}}, {"db": {"a": 999}}])
    assert sums["db"]["a"] == pytest.approx([30 * VISIT_DECAY, 10 * VISIT_DECAY])


def test_a_class_the_tier_never_completes_learns_zero_visits():
    rows = [{"front": {"a": 100, "b": 100}, "db": {"a": 100}}]
    vis = resolve(SystemConfig(), _sums(rows), "front", {"front": ["a", "b"], "db": ["a"]},
                  ["a", "b"])
    assert vis.visit("db", "b") == 0.0 and vis.flags == []
    told = resolve(SystemConfig(visits={"db": {"b": 1.0}}), _sums(rows), "front",
                   {"front": ["a", "b"], "db": ["a"]}, ["a", "b"])
    assert told.visit("db", "b") == 1.0
    assert told.flags == ["visits_mismatch: db/b configured 1, the completions give 0 (db's "
                          "over front's); the configured 1 used"]


@pytest.mark.parametrize("configured, flagged", [(3.4, True), (2.6, True), (3.35, True),
                                                 (3.2, False), (2.8, False), (2.75, False)])
def test_a_configured_ratio_is_used_and_flagged_beyond_ten_percent(configured, flagged):
    rows = [{"front": {"a": 100, "b": 100}, "db": {"a": 300, "b": 100}}]
    cfg = SystemConfig(visits={"db": {"a": configured}})
    vis = resolve(cfg, _sums(rows), "front", TIERS, ["a", "b"])
    assert vis.visit("db", "a") == configured                 # the user's word
    assert vis.visit("db", "b") == pytest.approx(1.0)         # learned
    mismatch = [f for f in vis.flags if f.startswith("visits_mismatch")]
    assert len(mismatch) == int(flagged)
    if flagged:
        assert f"db/a configured {configured:.3g}, the completions give 3" in mismatch[0]
        assert f"the configured {configured:.3g} used" in mismatch[0]


def test_the_entry_tiers_configured_visits_scale_the_ratios():
    rows = [{"front": {"a": 200}, "db": {"a": 300}}]
    cfg = SystemConfig(visits={"front": {"a": 2.0}})
    vis = resolve(cfg, _sums(rows), "front", {"front": ["a"], "db": ["a"]}, ["a"])
    assert vis.visit("front", "a") == 2.0
    assert vis.visit("db", "a") == pytest.approx(3.0)


def test_visits_assumed_where_the_counts_cannot_tell():
    few = [{"front": {"a": VISIT_MIN_COMPLETIONS / 2}, "db": {"a": 100}}]
    vis = resolve(SystemConfig(), _sums(few), "front", {"front": ["a"], "db": ["a"]}, ["a"])
    assert vis.visit("db", "a") == 1.0
    assert [f for f in vis.flags if f.startswith("assumed: 1 visit per request to db by a: ")
            and f.endswith("(visits_assumed)")]
    # the entry tier has never reported
    vis = resolve(SystemConfig(), {}, "front", {"front": [], "db": ["a"]}, ["a"])
    assert vis.visit("db", "a") == 1.0
    assert any("no entry tier reported" in f for f in vis.flags)
    # a configured ratio is not assumed
    vis = resolve(SystemConfig(visits={"db": {"a": 2.0}}), {}, "front",
                  {"front": [], "db": ["a"]}, ["a"])
    assert vis.visit("db", "a") == 2.0 and vis.flags == []


def test_the_simulator_visits_a_tier_v_times_per_request():
    """A product-form network (exponential, class-independent service) with visits: the
    tier's completions are V times the entry's per class, and the throughput is MVA's on the
    demands per request ``V S``."""
    net = PhysicalNetwork((Tier("front", 1, 0.004), Tier("db", 1, 0.003, visits=(3, 1))),
                          ("a", "b"), (0.5, 0.5), 0.2, 20)
    np.testing.assert_array_equal(net.visit_matrix(), [[1, 1], [3, 1]])
    recs = monitor_physical(net, 300.0, 5.0, warmup=10.0, seed=3)
    n = {(r["tier"], c): 0.0 for r in recs for c in ("a", "b")}
    for r in recs:
        for c, k in r["completions"].items():
            n[(r["tier"], c)] += k
    assert n[("db", "a")] / n[("front", "a")] == pytest.approx(3.0, rel=0.01)
    assert n[("db", "b")] / n[("front", "b")] == pytest.approx(1.0, rel=0.01)
    sim = simulate_physical(net, 600.0, warmup=30.0, replications=2, seed=5)
    D = (net.visit_matrix() * net.demands) @ np.array(net.mix)
    ref = mva(D[:, None], [20], 0.2)
    assert sim.total_throughput.mean == pytest.approx(float(ref.throughput.sum()), rel=0.03)
    with pytest.raises(ValueError, match="db.visits"):
        Tier("db", 1, 0.003, visits=(0, 1))
    with pytest.raises(ValueError, match="db.visits: need 2"):
        PhysicalNetwork((Tier("db", 1, 0.003, visits=(1,)),), ("a", "b"), (0.5, 0.5), 0.2, 2)


def _shift(records, tier, seconds):
    return [{**r, "end": r["end"] + seconds} if r["tier"] == tier else r for r in records]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_predictions_without_a_table_equal_those_with_the_true_one(seed):
    """The acceptance: visits 1-5 per class per tier, the predictions without a ``visits``
    table within 2% of those with the true one (the db's windows also 2.5 s off the front's:
    misaligned with the solve boundaries); a table of ones, today's default, is flagged."""
    net, table, sla = bench.case(seed)
    records = monitor_physical(net, 600.0, bench.WINDOW_S, warmup=60.0, system="sim",
                               seed=seed)
    true = bench.run_case(net, sla, table, records)
    for recs in (records, _shift(records, net.tiers[-1].name, 2.5)):
        learned = bench.run_case(net, sla, None, recs)
        assert learned.capacity_users == pytest.approx(true.capacity_users, rel=0.02)
        assert learned.response_time == pytest.approx(true.response_time, rel=0.02)
        assert learned.throughput == pytest.approx(true.throughput, rel=0.02)
        assert learned.bottleneck_tier == true.bottleneck_tier
        assert not [f for f in learned.flags if f.startswith("visits_")]
        for tier, per in table.items():
            for c, v in per.items():
                assert learned.tiers[tier].demands[c].visits == pytest.approx(v, rel=0.02)
    ones = bench.run_case(net, sla, {t: {c: 1.0 for c in per} for t, per in table.items()},
                          records)
    wrong = {(t, c) for t, per in table.items() for c, v in per.items() if v != 1.0}
    flagged = {tuple(f.split()[1].split("/")) for f in ones.flags
               if f.startswith("visits_mismatch")}
    assert flagged == wrong
    assert all(ones.tiers[t].demands[c].visits == 1.0 for t, c in wrong)


def test_the_issues_two_tier_case_is_flagged_and_the_counts_kept_in_the_state():
    """db completing 3x the front's requests of each class, no table: db is the bottleneck
    (not the front, as with visits 1); with ``visits = 1`` configured, flagged; the counts
    survive the state's round trip."""
    net = PhysicalNetwork((Tier("front", 1, 0.004, multipliers=(0.8, 1.4)),
                           Tier("db", 1, 0.002, visits=(3, 3))),
                          ("browse", "buy"), (0.7, 0.3), 1.0, 60)
    records = monitor_physical(net, 300.0, 5.0, warmup=30.0, system="sim", seed=11)
    base = dict(tiers=["front", "db"], sla_s={"*": 0.05}, think_time_s=1.0)
    learned = Pipeline(Config(systems={"sim": SystemConfig(**base)}))
    last = learned.process_many(records).predictions[-1]
    assert last.bottleneck_tier == "db"
    assert last.tiers["db"].utilization == pytest.approx(
        last.tiers["db"].utilization_measured, rel=0.1)
    state = learned.systems["sim"]
    again = SystemState.from_dict(state.to_dict(), state.config)
    assert again.visit_counts == state.visit_counts and state.visit_counts["db"]
    told = Pipeline(Config(systems={"sim": SystemConfig(
        **base, visits={"db": {"browse": 1.0, "buy": 1.0}})}))
    flags = told.process_many(records).predictions[-1].flags
    assert sum(f.startswith("visits_mismatch: db/") for f in flags) == 2
