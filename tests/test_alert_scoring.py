"""The alert benches' scoring (bench/accuracy/alert_scoring.py) and baseline forecasts
(bench/accuracy/alert_baselines.py) on hand-made episodes and series."""

from __future__ import annotations

import numpy as np
import pytest

from bench.accuracy.alert_baselines import forecast_conditions, holt_forecast, linear_forecast
from bench.accuracy.alert_scoring import hysteresis_episodes, score_alerts, summarize

H = 900.0


def test_alert_active_at_onset_is_a_catch_with_its_lead() -> None:
    s = score_alerts([(600.0, None)], [(1000.0, None)], H)
    assert (s.breaches, s.caught, s.leads, s.false_alarms) == (1, 1, (400.0,), 0)


def test_alert_firing_at_the_onset_itself_is_a_miss_not_a_false_alarm() -> None:
    s = score_alerts([(1000.0, None)], [(1000.0, None)], H)
    assert (s.caught, s.false_alarms) == (0, 0)


def test_alert_resolved_before_the_onset_is_a_miss() -> None:
    # fired at 1500, resolved at 1700; the breach at 2300 lies within the horizon of the
    # firing (not a false alarm) but nothing was firing at the onset
    s = score_alerts([(1500.0, 1700.0)], [(2300.0, 2600.0)], H)
    assert (s.caught, s.false_alarms) == (0, 0)


def test_alert_resolving_at_the_onsets_own_solve_is_a_miss() -> None:
    s = score_alerts([(400.0, 1000.0)], [(1000.0, None)], H)
    assert (s.caught, s.first_lead, s.false_alarms) == (0, None, 0)


def test_alert_with_no_breach_within_the_horizon_is_a_false_alarm() -> None:
    s = score_alerts([(100.0, 300.0), (3000.0, 3200.0)], [(2000.0, 2500.0)], H)
    assert (s.caught, s.false_alarms, s.alerts) == (0, 2, 2)


def test_early_alert_that_stays_firing_is_a_catch_not_a_false_alarm() -> None:
    s = score_alerts([(0.0, None)], [(5000.0, None)], H)
    assert (s.caught, s.leads, s.false_alarms) == (1, (5000.0,), 0)


def test_later_breach_episodes_count_each_and_lead_uses_the_covering_alert() -> None:
    alerts = [(100.0, 1500.0), (2800.0, None)]
    breaches = [(1000.0, 1400.0), (3000.0, None)]
    s = score_alerts(alerts, breaches, H)
    assert (s.breaches, s.caught, s.leads, s.false_alarms) == (2, 2, (900.0, 200.0), 0)
    assert (s.first_breach, s.first_lead) == (1000.0, 900.0)
    missed_first = score_alerts([(2800.0, None)], breaches, H)
    assert (missed_first.caught, missed_first.leads, missed_first.first_lead) == (1, (200.0,), None)


def test_summary_pools_runs() -> None:
    a = score_alerts([(600.0, None)], [(1000.0, None)], H)            # lead 400
    b = score_alerts([(0.0, 100.0)], [(2000.0, None)], H)             # miss + false alarm
    c = score_alerts([(0.0, None)], [(120.0, None)], H)               # lead 120
    s = summarize([a, b, c])
    assert (s.runs, s.breaches, s.caught, s.false_alarms, s.runs_with_false_alarm) == \
        (3, 3, 2, 1, 1)
    assert s.recall == pytest.approx(2 / 3)
    assert (s.lead_median_s, s.lead_min_s) == (260.0, 120.0)
    assert summarize([score_alerts([], [], H)]).recall is None


def test_negative_horizon_is_rejected() -> None:
    with pytest.raises(ValueError, match="horizon_s"):
        score_alerts([], [], -1.0)


def test_hysteresis_fires_after_two_and_resolves_after_three_ignoring_the_dead_band() -> None:
    conds = [(0, True), (60, None), (120, True), (180, False), (240, False), (300, None),
             (360, False), (420, True), (480, True)]
    assert hysteresis_episodes(conds, 2, 3) == [(120, 360), (480, None)]


def test_holt_on_a_line_follows_it_exactly_and_extrapolates_it() -> None:
    y = 0.05 + 0.002 * np.arange(15)
    assert holt_forecast(y, 0.3, 0.1, 10) == pytest.approx(0.05 + 0.002 * 24)
    x = np.arange(15.0) - 14
    assert linear_forecast(x, y, 10.0) == pytest.approx(0.05 + 0.002 * 24)
    with pytest.raises(ValueError, match="sf"):
        holt_forecast(y, 1.0, 0.1, 1)


def test_forecast_conditions_fire_resolve_dead_band_and_min_history() -> None:
    t = np.arange(0.0, 1200.0, 60.0) + 60
    rising = np.column_stack([0.05 + 0.0001 * t])             # 0.1 at t=500
    sla = np.array([0.1])
    times = [120.0, 600.0]
    got = forecast_conditions(times, t, rising, sla, linear_forecast, 900.0, 300.0, 1.25,
                              min_history_s=120.0)
    assert got == [(120.0, None), (600.0, True)]             # 120: only 60 s of history
    flat = np.full_like(rising, 0.05)
    assert forecast_conditions([600.0], t, flat, sla, linear_forecast, 900.0, 300.0,
                               1.25)[0][1] is False
    # below the SLA at t + H, above it at t + 1.25 H: the dead band
    near = np.column_stack([0.0001 * (t - 600.0) + 0.0695])
    assert forecast_conditions([600.0], t, near, sla, linear_forecast, 900.0, 300.0,
                               1.25)[0][1] is None


def test_a_trust_restatement_is_not_a_new_alert_episode():
    """A ``firing`` event with ``update: "trust"`` restates the active predicted-breach alert
    (streams.predict.confidence.trust_events): read as a new firing it left the episode before
    it open for the rest of the run, which then "caught" every later breach."""
    from bench.accuracy.alert_shapes import _alert_episodes

    ev = [{"alert": "predicted_breach", "state": "firing", "time": 100.0},
          {"alert": "predicted_breach", "state": "firing", "time": 200.0, "update": "trust"},
          {"alert": "predicted_breach", "state": "resolved", "time": 300.0},
          {"alert": "predicted_breach", "state": "firing", "time": 500.0}]
    assert _alert_episodes(ev, "predicted_breach") == [(100.0, 300.0), (500.0, None)]
