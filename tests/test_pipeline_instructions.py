"""bench.speed.pipeline_instructions: the steps named are called through their markers (the C
functions callgrind's inclusive counts are read off), as often as the workload calls them."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import bench.speed.pipeline_instructions as pi


def test_steps_go_through_their_markers(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0, 0]

    def counting(k: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        marker = pi.MARKERS[k]

        def make(f: Callable[..., Any]) -> Callable[..., Any]:
            through = marker(f)

            def counted(*a: Any, **kw: Any) -> Any:
                calls[k] += 1
                return through(*a, **kw)
            return counted
        return make

    monkeypatch.setattr(pi, "MARKERS", [counting(0), counting(1), *pi.MARKERS[2:]])
    pi.main(["cold", "1", "--steps", "streams.core.tier:TierState.refresh",
             "streams.engine.system:SystemState.prepare"])
    # 10 systems of 3 tiers: a refresh per tier and solve, one prepare per system and solve
    assert calls[0] > 0 and calls[1] > 0
    assert calls[0] == 3 * calls[1]


def test_unknown_step_and_too_many_repetitions_are_refused() -> None:
    with pytest.raises(SystemExit):
        pi.main(["cold", "0", "--steps", "streams.core.tier:no_such_step"])
    with pytest.raises(SystemExit):
        pi.main(["steady", str(pi.COPIES)])
