"""Trust on a real system (streams/predict/confidence.py): the model's response time is
compared over the entry tier's timed span (:func:`timed_point`), and a residual delay blocks
trust only where it is a material share of its tier's demand (:func:`latency_reasons`)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from streams.core.config import SystemConfig
from streams.core.tier import TierModel
from streams.predict.confidence import latency_reasons, timed_point, untimed_share
from streams.predict.model import build_model

CLASSES = ["a", "b"]


def _tier(name: str, demands: dict[str, float], response: dict[str, float],
          measured: float | None = None) -> TierModel:
    """A tier at 4 requests/s whose response-time split (PS reading) is 1 : 4, busy
    ``measured`` per completion (``None``: not measured)."""
    return TierModel(tier=name, cores=1, demands=demands,
                     demand_std={c: 1e-5 for c in demands}, regression={}, idc=1.0,
                     idc_flag=None, mean_service=measured, p95=None, process=None, fit=None,
                     bursty=False, windows=100, estimator="kalman",
                     class_response=response, response_rate=4.0,
                     split={"a": 0.001, "b": 0.004}, split_discipline="ps")


def _model(app_times: dict[str, float], measured: float | None = None):
    app = _tier("app", {"a": 0.001, "b": 0.004}, app_times, measured)
    db = _tier("db", {"a": 0.004, "b": 0.016}, {"a": 0.0042, "b": 0.0168})
    tiers = [app, db]
    return build_model(tiers, CLASSES, {"a": 0.5, "b": 0.5}, 1.0, SystemConfig()), tiers


def test_the_model_is_compared_over_the_entry_tiers_timed_span():
    # the app's timer covers a fifth of its 2.5 ms of CPU per request (g = 5): four fifths of
    # each class's residence there are outside what the timer measures
    model, tiers = _model({"a": 0.0002, "b": 0.0008})
    assert untimed_share(model, tiers) == pytest.approx(0.8)
    now = model.at(20)
    seen = timed_point(model, tiers, now)
    entry = model.class_residence(now.residence)[0]
    assert entry[0] >= model.D_mc[0, 0]                  # a residence, not the bare demand
    assert seen.response.tolist() == pytest.approx((now.response - 0.8 * entry).tolist())
    assert seen.throughput == now.throughput and seen.residence is now.residence


def test_an_entry_tier_timed_over_its_work_is_compared_as_it_stands():
    model, tiers = _model({"a": 0.00105, "b": 0.0042})    # within its times: g = 1
    now = model.at(20)
    assert untimed_share(model, tiers) == 0.0
    assert timed_point(model, tiers, now) is now
    # no times at the entry tier: nothing to read the share from
    model, tiers = _model({})
    assert untimed_share(model, tiers) == 0.0


def test_the_untimed_share_rests_on_the_busy_time_measured():
    # the estimator's 2.5 ms against 0.5 ms timed, but the tier measured busy 1 ms per
    # request: g = 2 (half its work untimed), not 5; measured within its times, g = 1
    model, tiers = _model({"a": 0.0002, "b": 0.0008}, measured=0.001)
    assert untimed_share(model, tiers) == pytest.approx(0.5)
    model, tiers = _model({"a": 0.0002, "b": 0.0008}, measured=0.0005)
    assert untimed_share(model, tiers) == 0.0


def _latency_tier(name: str) -> SimpleNamespace:
    return SimpleNamespace(tier=name, latency=SimpleNamespace(
        identified=np.array([False, True]), reason="delay unidentified for a"))


@pytest.mark.parametrize("delay_a, reasons", [(0.001, 0), (0.004, 0), (0.005, 1)])
def test_a_residual_delay_blocks_trust_beyond_the_margin_of_its_tiers_demand(delay_a,
                                                                              reasons):
    # the db's demand over the mix 10 ms; delays of 0.5 / 2 (the margin) / 2.5 ms over it
    model = SimpleNamespace(tiers=["app", "db"], mix=np.array([0.5, 0.5]),
                            D_mc=np.array([[0.002, 0.002], [0.004, 0.016]]),
                            delays=np.array([[0.0, 0.0], [delay_a, 0.0]]))
    tiers = [SimpleNamespace(tier="app", latency=None), _latency_tier("db")]
    out = latency_reasons(tiers, model)
    assert len(out) == reasons
    if out:
        assert out[0].startswith("latency_unidentified: db: delay unidentified for a (its "
                                 "delays 25% of its demand over the mix, margin 20%)")
    # without the model the share cannot be read: every residual is a reason, as before
    assert len(latency_reasons(tiers)) == 1
