"""The testbed truth's tier CPU: the database's process groups (its backends serving the app and
the rest of its cluster) count together as the tier's busy time."""

import pytest

from bench.testbed.truth import tier_cpu, truth


def _log(end_groups: dict[str, float]) -> list[dict]:
    start = {g: 0.0 for g in end_groups}
    lines = [{"kind": "run", "start": 100.0, "duration_s": 10.0, "mode": "closed"},
             {"kind": "snapshot", "at": "start", "t": 100.0, "app": {}, "cpu_s": start},
             {"kind": "snapshot", "at": "end", "t": 110.0, "app": {}, "cpu_s": end_groups}]
    lines += [{"class": "buy", "start": 100.0 + i * 0.25, "end": 100.01 + i * 0.25,
               "status": 200, "user": 0, "detail": ""} for i in range(40)]
    return lines


def test_the_database_is_its_backends_and_the_rest_of_its_cluster():
    t = truth(_log({"db": 0.8, "db_server": 0.2, "app": 0.5}))
    busy = {b.tier: b.busy_s for b in t.tiers}
    assert busy == pytest.approx({"db": 1.0, "app": 0.5})
    assert any("backends serving the app 0.800 s of its 1.000 s" in n for n in t.notes)


def test_a_log_before_the_split_has_the_database_in_one_group():
    t = truth(_log({"db": 0.9, "app": 0.5}))
    assert {b.tier: b.busy_s for b in t.tiers} == pytest.approx({"db": 0.9, "app": 0.5})
    assert not any("backends serving the app" in n for n in t.notes)


def test_a_snapshot_without_the_groups_has_no_tier_cpu():
    assert tier_cpu({"cpu_error": "down"}, "db") is None
    assert tier_cpu({"cpu_s": {"app": 1.0}}, "db") is None
    assert tier_cpu({"cpu_s": {"db_server": 0.25}}, "db") == 0.25
