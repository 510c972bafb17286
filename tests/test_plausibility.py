"""Plausibility against a system's own recent windows (item 1;
``streams/core/plausibility.py``, docs/pipeline.md "Plausibility").

The hostile cases (an end in 2100, users jumping to 10^9, utilization 0 with 4e9 completions,
a window overlapping another by half, a 10,000-fold completion rate) are corpus cases
(``tests/fuzz_corpus``), replayed through both shells by ``tests/test_fuzz.py`` and through
the real Kafka worker by ``tests/test_poison_services.py``; here: their dead letters through
``perfcast run``'s runner, the flag in the next prediction, confirmation of a real level shift
or clock jump, and legitimate data that must NOT be held -- ramps and bursts from the physical
simulator, idle tiers, gaps, jittering window lengths."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from estimators.mapfit import fit_map2
from fuzz_corpus import CORPUS, window
from solvers.simulation import ClosedNetwork, Queue, monitor_closed
from streams.core.config import Config, ConfigError, load_config
from streams.cli.embedded import run_embedded
from streams.engine.pipeline import Pipeline
from streams.core.plausibility import Plausibility
from streams.engine.system import SystemState

_BASE = 1_795_687_205.0
#: the corpus cases of the plausibility rules
_PLAUSIBLE_CASES = ["end in 2100 among the system's windows",
                    "utilization 0 with 4e9 completions",
                    "a window overlapping another by half",
                    "users jumping from 10 to 10**9 after ordinary windows",
                    "completions jumping 10,000-fold at a busy tier"]


def _case(name: str):
    (case,) = [c for c in CORPUS if c.name == name]
    return case


def _held(out) -> list[dict[str, Any]]:
    return [d for d in out.deadletter if d["reason"].startswith("implausible")]


def _series(system: str, n: int, start: float = _BASE, window_s: float = 5.0,
            **changes: Any) -> list[str]:
    return [window(system=system, end=start + window_s * i, window_s=window_s,
                   utilization=0.3 + 0.02 * (i % 7),
                   completions={"home": 100 + 3 * (i % 5), "buy": 10 + i % 3}, **changes)
            for i in range(n)]


# -- the hostile cases through perfcast run's runner -------------------------------------------


@pytest.mark.parametrize("name", _PLAUSIBLE_CASES)
def test_perfcast_run_dead_letters_the_implausible_window_naming_field_value_reason(
        name, tmp_path):
    case = _case(name)
    records = list(case.lines + case.after)
    summary = run_embedded(records, Config(), tmp_path)
    dead = [json.loads(line) for line in (tmp_path / "deadletter.jsonl").read_text().splitlines()]
    assert len(dead) == 1, dead
    (d,) = dead
    assert d["field"] == case.field and case.reason in d["reason"], d
    assert d["reason"].startswith("implausible") and d["value"] is not None
    assert json.loads(case.hostile)[case.field] == d["value"] or case.field == "completions"
    assert summary.estimates == len(records) - 1
    predictions = [json.loads(line) for line in
                   (tmp_path / "predictions.jsonl").read_text().splitlines()]
    after_end = json.loads(case.after[-1])["end"]
    # the system is still solved through the windows after the hostile one
    assert max(p["time"] for p in predictions) >= after_end - 60.0
    flagged = [p for p in predictions if any("implausible" in f for f in p.get("flags") or [])]
    assert len(flagged) == 1 and "1 window dead-lettered as implausible" in flagged[0]["flags"][-1]


def test_the_2100_window_leaves_the_solve_timer_alone():
    case = _case("end in 2100 among the system's windows")
    pipeline = Pipeline()
    pipeline.process_many(list(case.lines))
    state = pipeline.systems["p-2100"]
    assert state.next_solve < _BASE + 1000 and state.newest_end < _BASE + 1000


# -- confirmation ----------------------------------------------------------------------------


def test_a_real_level_shift_is_confirmed_by_three_windows_in_a_row():
    """Users 20 -> 5000 for good (a load test starting): the first two windows are held, the
    third and every later one accepted."""
    lines = _series("shift", 20, users=20) + _series("shift", 20, start=_BASE + 100.0,
                                                     users=5000)
    out = Pipeline().process_many(lines)
    held = _held(out)
    assert [d["field"] for d in held] == ["users", "users"]
    assert [d["end"] for d in held] == [_BASE + 100.0, _BASE + 105.0]
    assert len(out.estimates) == 38


def test_a_single_spike_is_held_and_the_tier_goes_on():
    lines = _series("spike", 20, users=20)
    lines[12] = window(system="spike", end=_BASE + 60.0, users=20_000,
                       completions={"home": 110, "buy": 11})
    out = Pipeline().process_many(lines)
    assert [d["value"] for d in _held(out)] == [20_000]


def test_a_restart_after_a_gap_longer_than_max_ahead_costs_two_windows_then_solves():
    """Three tiers stop for three days and come back: the first two windows after the gap
    are held (``unconfirmed``), the third confirms the new clock, the system is solved
    again."""
    lines = []
    for start in (_BASE, _BASE + 3 * 86_400.0):
        for i in range(40):
            for tier in ("front", "app", "db"):
                lines.append(window(system="gap", tier=tier, end=start + 5.0 * i))
    pipeline = Pipeline()
    out = pipeline.process_many(lines)
    held = _held(out)
    assert len(held) == 2 and all("unconfirmed" in d["reason"] for d in held)
    assert max(p["time"] for p in out.predictions) > _BASE + 3 * 86_400.0


def test_the_clock_jump_is_confirmed_the_same_batched_or_one_by_one():
    lines = _series("batches", 30) + _series("batches", 30, start=_BASE + 2 * 86_400.0)
    whole = Pipeline().process_many(lines)
    pipeline = Pipeline()
    single = [pipeline.process(line) for line in lines]
    assert [d for o in single for d in o.deadletter] == whole.deadletter
    assert [p for o in single for p in o.predictions] == whole.predictions


def test_rules_state_survives_a_restore():
    """The state the rules read (recent users and rates, held windows, the newest end) goes
    through the persisted state: a restored system judges the next window as the one it
    replaces would."""
    pipeline = Pipeline()
    pipeline.process_many(_series("saved", 20, users=20)
                          + [window(system="saved", end=_BASE + 100.0, users=9000)])
    state = pipeline.systems["saved"]
    data = json.loads(json.dumps(state.to_dict()))
    restored = SystemState.from_dict(data, Config().system("saved"))
    assert restored.to_dict() == state.to_dict()
    assert restored.tiers["front"].held == 1 and restored.newest_end == _BASE + 95.0


def test_settings_come_from_the_plausibility_section(tmp_path):
    path = tmp_path / "perfcast.toml"
    path.write_text("[plausibility]\nmax_ahead_s = 600\nconfirm_windows = 2\n"
                    "jump_factor = 1000.0\n", encoding="utf-8")
    config = load_config(path, env={})
    assert config.plausibility == Plausibility(max_ahead_s=600.0, confirm_windows=2,
                                               jump_factor=1000.0)
    for bad, key in (("confirm_windows = 0", "plausibility.confirm_windows"),
                     ("jump_factor = 1.5", "plausibility.jump_factor"),
                     ("overlap_tolerance = nan", "plausibility.overlap_tolerance"),
                     ("horizon = 3", "plausibility.horizon")):
        path.write_text(f"[plausibility]\n{bad}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=key):
            load_config(path, env={})


def test_a_looser_jump_factor_lets_the_spike_through():
    config = Config(plausibility=Plausibility(jump_factor=1e6))
    lines = _series("loose", 20, users=20) + [window(system="loose", end=_BASE + 100.0,
                                                     users=9000)]
    assert Pipeline(config).process_many(lines).deadletter == []


# -- legitimate data is not held -------------------------------------------------------------


def _network(service: Any, users: int = 10) -> ClosedNetwork:
    return ClosedNetwork([Queue("front", 0.004), Queue("db", service, discipline="FCFS")],
                         populations=users, think_times=1.0, classes=["home"])


@pytest.mark.slow
@pytest.mark.parametrize("window_s", [5.0, 60.0])
def test_users_growing_tenfold_over_an_hour_are_not_held(window_s):
    """A ramp from 10 to 100 users over an hour in steps every minute, from the physical
    simulator (seeded), with 5-s and with 60-s windows."""
    schedule = [(60.0 * k, int(round(10 * 10 ** (k / 60)))) for k in range(1, 61)]
    records = monitor_closed(_network(0.006), 3600.0, window_s, schedule=schedule,
                             system="ramp", start_time=_BASE, seed=11)
    users = [r["users"] for r in records if r["tier"] == "front"]
    assert users[0] <= 12 and users[-1] >= 90
    out = Pipeline().process_many(records)
    assert out.deadletter == []


@pytest.mark.slow
def test_a_bursty_tier_with_index_of_dispersion_200_is_not_held():
    """Service at the db tier from a MAP(2) with I = 200 (fit_map2): its busy time swings by
    orders of magnitude between 5-s windows; nothing is held."""
    process = fit_map2(0.02, 200.0, 0.1).process
    records = monitor_closed(_network(process, users=20), 2 * 3600.0, 5.0, system="bursty",
                             start_time=_BASE, seed=5)
    busy = np.array([r["utilization"] for r in records if r["tier"] == "db"])
    assert np.quantile(busy, 0.95) > 10 * max(np.quantile(busy, 0.05), 1e-3)   # it swings
    out = Pipeline().process_many(records)
    assert out.deadletter == []


def test_an_idle_tier_waking_up_is_not_held():
    lines = [window(system="idle", end=_BASE + 5.0 * i, utilization=0.0,
                    completions={"home": i % 3 // 2}, users=0) for i in range(40)]
    lines += [window(system="idle", end=_BASE + 200.0 + 5.0 * i, utilization=0.3,
                     completions={"home": 400}, users=60) for i in range(20)]
    assert Pipeline().process_many(lines).deadletter == []


def test_a_gap_within_max_ahead_is_no_overlap_and_not_held():
    lines = _series("short-gap", 20) + _series("short-gap", 20, start=_BASE + 45 * 60.0)
    assert Pipeline().process_many(lines).deadletter == []


def test_jittering_window_lengths_on_a_grid_are_not_held():
    """Prometheus-style windows: ends on a 15-s grid, lengths jittering +-8% (the span
    between scrapes): neighbours overlap by up to 1.2 s, within the 10% tolerance."""
    rng = np.random.default_rng(3)
    lengths = 15.0 * rng.uniform(0.92, 1.08, 200)
    lines = [window(system="jitter", end=_BASE + 15.0 * i, window_s=float(t),
                    utilization=0.4, completions={"home": 300}) for i, t in enumerate(lengths)]
    assert Pipeline().process_many(lines).deadletter == []
    # late windows are judged against both neighbours: shuffled slightly, still all accepted
    order = np.argsort(np.arange(200) + rng.uniform(0, 3, 200))
    assert Pipeline().process_many([lines[i] for i in order]).deadletter == []


def test_an_overlap_beyond_the_tolerance_is_held_and_a_late_window_inside_another_too():
    lines = _series("ov", 10)
    over = window(system="ov", end=_BASE + 50.0, window_s=5.6)    # 0.6 s into the last one
    inside = window(system="ov", end=_BASE + 22.0)                # late, inside two windows
    out = Pipeline().process_many(lines + [over, inside])
    assert [(d["field"], d["value"]) for d in out.deadletter] == [("end", _BASE + 50.0),
                                                                  ("end", _BASE + 22.0)]
    assert "overlaps" in out.deadletter[0]["reason"]
