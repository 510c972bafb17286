"""End to end with a p95 SLO (bench/e2e/percentile_ramp): the measured breach is the first
minute whose SLO class's p95 crosses the bound, and on a short ramp of the multi-core shop with
its bursty database the predicted-breach alert, on the p95, fires before that breach."""

from __future__ import annotations

import numpy as np
import pytest

from bench.e2e import percentile_ramp as pr


def test_measured_breach_is_the_first_minute_whose_p95_crosses():
    rng = np.random.default_rng(5)
    per_min = 12                                   # 5-s windows
    quiet = [rng.uniform(0.1, 0.5, 40) for _ in range(3 * per_min)]
    # minute 4: 3 slow requests in 40 (7.5%) -> its p95 among the slow ones
    tail = [np.concatenate([rng.uniform(0.1, 0.5, 37), [2.0] * 3]) for _ in range(per_min)]
    breach, p95s = pr.measured_breach(quiet + tail, 1.0)
    assert [v < 1.0 for v in p95s] == [True, True, True, False]
    assert breach == 240.0
    assert pr.measured_breach(quiet, 1.0)[0] is None
    # a minute without requests is no breach and no number
    gap = quiet[:per_min] + [np.array([])] * per_min
    breach, p95s = pr.measured_breach(gap, 1.0)
    assert breach is None and np.isnan(p95s[1])


@pytest.mark.slow
def test_p95_alert_fires_before_the_measured_breach_on_a_short_ramp():
    """10 minutes at 40% of the simulated p95 capacity, a 20-minute ramp to 150%: the first
    ``predicted_breach`` (on ``buy``'s p95) comes before the first minute whose ``buy`` p95
    exceeds 1 s, and not more than 30 minutes before it."""
    r = pr.ramp(414.0, 1, pr.config(), pr.SLO_P95_S, True, hold_s=600.0, ramp_s=1200.0)
    assert r["breach"] is not None
    assert r["statistic"] == "p95"
    assert r["lead"] is not None and 0.0 < r["lead"] <= 1800.0
