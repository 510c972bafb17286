"""The capacity the predicted-breach alert acts on:
:mod:`streams.predict.alert_window` (the SLA read on a 5-minute mean) and the provisionally
bursty tier (:func:`streams.core.tier.provisionally_bursty`).

The spread of a window's mean service time is checked against sampled MAP(2) sequences (not
the formula against itself); the alert end to end against the physical simulator: a bursty
database at 105% of its capacity from the start breaches its 5-minute mean before its ``I``
is confirmed (the MVA model sees no breach coming) -- the alert must still fire first."""

from __future__ import annotations

import tempfile
from statistics import NormalDist

import numpy as np
import pytest

from solvers.paper000 import BURSTY_D0, BURSTY_D1, scenarios
from solvers.processes import MAP
from solvers.simulation.physical import PhysicalNetwork, Tier, monitor_physical
from streams.cli.embedded import run_embedded
from streams.core.config import Config, ConfigError, SystemConfig, load_config
from streams.core.tier import TierModel, provisionally_bursty
from streams.predict import alert_window
from streams.predict.model import build_model, model_capacity


# ------------------------------------------------------------------------ the window's spread
@pytest.mark.slow
@pytest.mark.parametrize("n", [2000, 6000])
def test_window_mean_spread_is_sqrt_i_over_n_on_sampled_map2(n):
    """Mi et al.'s (2008) bursty MAP(2) (I ~ 202): the relative standard deviation of the mean of
    ``n`` consecutive services is ``sqrt(I / n)`` within 15% (the formula the window factor
    uses); an exponential sequence gives ``sqrt(1 / n)``."""
    rng = np.random.default_rng(5)
    bursty = MAP(BURSTY_D0, BURSTY_D1)
    for process in (bursty, MAP.exponential(1.0)):
        s = process.sample(200 * n, rng)
        means = s.reshape(200, n).mean(axis=1)
        spread = float(means.std(ddof=1) / s.mean())
        assert spread == pytest.approx(np.sqrt(process.idc / n), rel=0.15)


def test_quantile_z_spreads_the_probability_over_the_horizons_windows():
    """``p`` over ``H / W`` windows: one window per horizon takes the quantile ``1 - p``;
    three take ``(1 - p)^(1/3)``; a lower probability asks for a higher quantile."""
    assert alert_window.quantile_z(900, 900, 0.5) == pytest.approx(0.0, abs=1e-12)
    assert alert_window.quantile_z(300, 900, 0.5) == pytest.approx(
        NormalDist().inv_cdf(0.5 ** (1 / 3)))
    assert alert_window.quantile_z(300, 900, 0.2) > alert_window.quantile_z(300, 900, 0.5)
    assert alert_window.quantile_z(600, 60, 0.5) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="probability"):
        alert_window.quantile_z(300, 900, 1.0)


def _tier(name, demand, bursty=False, idc=1.0, provisional=False, cores=1):
    process = scenarios()["bottleneck_switch"].database.scaled(1.0) if (
        bursty or provisional) else None
    return TierModel(tier=name, cores=cores, demands={"a": demand}, demand_std={"a": 0.0},
                     regression={"a": demand}, idc=idc, idc_flag=None if not provisional
                     else "too_short", mean_service=None, p95=None, process=process, fit=None,
                     bursty=bursty, windows=100, provisional=provisional)


def test_window_capacity_is_below_the_long_run_one_only_for_a_bursty_tier():
    """A bursty tier (I = 200) at a few hundred completions per 5 minutes: a factor of
    several percent and a window capacity below the long-run one; exponential tiers at the
    same load: factors below :data:`MIN_EXCESS`, the long-run capacity stands."""
    cfg = SystemConfig(tiers=("front", "db"), sla_s={"*": 0.5})
    z = alert_window.quantile_z(cfg.alert_window_s, cfg.horizon_s,
                                cfg.window_breach_probability)
    bursty = build_model([_tier("front", 0.004), _tier("db", 0.02, bursty=True, idc=200.0)],
                         ["a"], {"a": 1.0}, 1.0, cfg)
    cap, limited = model_capacity(bursty)
    assert not limited
    f = alert_window.window_factors(bursty, [1.0, 200.0], bursty.at(cap), 300.0, z)
    X = bursty.at(cap).throughput
    assert f[1] == pytest.approx(1 + z * np.sqrt(200.0 / (X * 300.0)))
    assert alert_window.is_material(f)
    w_cap, _ = alert_window.window_capacity(bursty, f, cap)
    assert w_cap < cap
    calm = build_model([_tier("front", 0.004), _tier("db", 0.02)], ["a"], {"a": 1.0}, 1.0, cfg)
    cap, _ = model_capacity(calm)
    f = alert_window.window_factors(calm, [1.0, 1.0], calm.at(cap), 300.0, z)
    assert not alert_window.is_material(f)


# ------------------------------------------------------------------------------- provisional
def test_provisionally_bursty_needs_a_high_estimate_not_yet_trusted():
    assert provisionally_bursty(250.0, "too_short", False, 10.0)
    assert provisionally_bursty(50.0, "uncertain", False, 10.0)
    assert provisionally_bursty(50.0, "unresolved", False, 10.0)
    assert not provisionally_bursty(250.0, "too_short", True, 10.0)     # already bursty
    assert not provisionally_bursty(2.0, "too_short", False, 10.0)      # low estimate
    assert not provisionally_bursty(250.0, None, False, 10.0)           # trusted (not bursty)
    assert not provisionally_bursty(None, "too_short", False, 10.0)


def test_the_pessimistic_model_takes_provisional_tiers_as_bursty():
    cfg = SystemConfig(tiers=("front", "db"))
    tiers = [_tier("front", 0.004), _tier("db", 0.02, idc=250.0, provisional=True)]
    assert build_model(tiers, ["a"], {"a": 1.0}, 1.0, cfg).kind == "mva"
    pessimistic = build_model(tiers, ["a"], {"a": 1.0}, 1.0, cfg, provisional=True)
    assert pessimistic.kind == "map"
    assert any("provisionally bursty" in f for f in pessimistic.flags)


def test_config_window_settings_are_checked(tmp_path):
    def load(text):
        path = tmp_path / "perfcast.toml"
        path.write_text('[systems.s]\ntiers = ["a"]\n' + text)
        return load_config(path, env={}).systems["s"]

    cfg = load("alert_window_s = 60\nwindow_breach_probability = 0.25\n")
    assert (cfg.alert_window_s, cfg.window_breach_probability) == (60.0, 0.25)
    with pytest.raises(ConfigError, match="window_breach_probability.*1.5"):
        load("window_breach_probability = 1.5\n")
    with pytest.raises(ConfigError, match="alert_window_s"):
        load("alert_window_s = -5\n")


# -------------------------------------------------------------------------------- end to end
START = 1_795_000_000.0
SLA_S = 0.1


def _shop(kind: str, users: int) -> PhysicalNetwork:
    """docs/accuracy.md section 10's three-tier shop (bench/accuracy/alert_shapes.py): truth capacity
    214 users (bursty db) / 420 (exponential db) at SLA 0.1 s."""
    db = MAP(BURSTY_D0, BURSTY_D1).scaled(0.016) if kind == "bursty" else 0.016
    return PhysicalNetwork(
        tiers=(Tier("web", 4, 0.008), Tier("app", 4, 0.010),
               Tier("db", 8, db, multipliers=(0.75, 2.0))),
        classes=("browse", "buy"), mix=(0.8, 0.2), think_time=1.0, population=users)


def _first_alert_and_breach(kind: str, users: int, minutes: float, seed: int):
    recs = monitor_physical(_shop(kind, users), minutes * 60, 5.0, warmup=120.0, system="shop",
                            start_time=START - 120.0, seed=seed)
    cfg = Config(systems={"shop": SystemConfig(tiers=("web", "app", "db"),
                                               sla_s={"*": SLA_S})})
    with tempfile.TemporaryDirectory() as d:
        summary = run_embedded(recs, cfg, d)
    fired = [a["time"] for a in summary.alert_events
             if a["alert"] == "predicted_breach" and a["state"] == "firing"]
    # the measured breach: the 5-minute completion-weighted mean per tier, summed, above SLA
    ends = np.array(sorted({r["end"] for r in recs}))
    onset = None
    for t in ends[ends >= START + 300.0][::12]:
        if worst_window_mean(recs, t) > SLA_S:
            onset = float(t)
            break
    return (min(fired) if fired else None), onset, summary.alert_events


def worst_window_mean(recs, t: float) -> float:
    """The worst class's 5-minute mean response time at ``t``: per tier the
    completion-weighted mean over the windows ending in ``(t - 300, t]``, summed over the
    tiers (docs/accuracy.md section 10's measured breach)."""
    worst = 0.0
    for c in ("browse", "buy"):
        r = 0.0
        for tier in ("web", "app", "db"):
            sel = [x for x in recs if x["tier"] == tier and t - 300 < x["end"] <= t]
            n = sum(x["completions"][c] for x in sel)
            r += sum(x["response_time_s"].get(c, 0) * x["completions"][c] for x in sel) / n
        worst = max(worst, r)
    return worst


@pytest.mark.slow
def test_breach_alert_fires_before_a_bursty_tier_is_confirmed():
    """225 users (105% of the bursty shop's capacity) from the start: the 5-minute mean is
    above the SLA as soon as it exists (minute 5), while the db's ``I`` (~250) is still
    ``too_short`` and the long-run model is MVA (capacity ~400). The alert, on the pessimistic
    model, fires before that; before the provisional reading it fired at minute 8."""
    fired, onset, _ = _first_alert_and_breach("bursty", 225, 7.0, seed=0)
    assert onset is not None and onset <= START + 360.0
    assert fired is not None and fired < onset


@pytest.mark.slow
def test_no_breach_alert_on_a_calm_non_bursty_shop():
    """The exponential shop at 70% of its capacity: ``I`` stays near 1 (not provisional), the
    window factors are negligible -- no predicted breach in 12 minutes."""
    fired, onset, _ = _first_alert_and_breach("non_bursty", 294, 12.0, seed=1)
    assert onset is None
    assert fired is None
