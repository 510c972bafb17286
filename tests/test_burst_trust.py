"""Trust while a tier's burstiness is undecided (:mod:`streams.predict.burst_trust`): the rule
on its inputs, and on a short window series of a database whose MMPP(2) service alternates
runs of ~2,000 and ~1,000 services (the held-out shape ``mmpp2-slow-stable-A`` of
bench/accuracy/shapes.py, on which the exponential model matched the windows of a slow run and
was trusted 28-41% above the long-run mean response time)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shape_runs import model_predictions
from streams.predict import burst_trust


def _tier(idc, flag, lower, upper, bursty=False):
    return SimpleNamespace(idc=idc, idc_flag=flag, idc_lower=lower, idc_upper=upper,
                           bursty=bursty)


def test_an_undecided_tier_above_the_threshold_is_a_reason():
    pred = {"tiers": {"front": _tier(0.65, "too_short", 0.0, None),
                      "db": _tier(17.0, "uncertain", 5.16, 4797.0)}}
    reasons = burst_trust.trust_reasons(pred, 10.0)
    assert len(reasons) == 1
    assert reasons[0].startswith("burstiness_undecided: db: I 17 above idc_threshold 10")
    assert "uncertain: interval 5.16-4.8e+03" in reasons[0]
    unresolved = {"tiers": {"db": _tier(40.0, "unresolved", 12.0, None)}}
    assert "interval 12-unbounded" in burst_trust.trust_reasons(unresolved, 10.0)[0]
    short = {"tiers": {"db": _tier(30.0, "too_short", None, None)}}
    assert "(too_short: no interval yet)" in burst_trust.trust_reasons(short, 10.0)[0]


@pytest.mark.parametrize("tier", [
    _tier(8.0, "uncertain", 3.0, 300.0),          # below the threshold: taken as it stands
    _tier(40.0, None, 20.0, 80.0, bursty=True),   # decided bursty: the MAP(2) model's
    _tier(40.0, None, 20.0, 80.0),                # decided (interval clear), not modelled bursty
    _tier(None, "too_short", 0.0, None),          # no estimate
])
def test_a_decided_or_small_index_is_no_reason(tier):
    assert burst_trust.trust_reasons({"tiers": {"db": tier}}, 10.0) == []


@pytest.mark.slow
def test_a_slow_burst_is_not_trusted_while_undecided():
    """14 minutes of 5-s windows at 29 users (40% of capacity): every solve whose database
    reads ``I`` above the threshold without a decided interval carries the reason and is not
    trusted; the rule is what keeps them untrusted at least once (the other rules pass there)."""
    preds = model_predictions("mmpp2-slow-stable-A", 29, 14)
    undecided = [p for p in preds if burst_trust.trust_reasons(p, 10.0)]
    assert undecided
    for p in undecided:
        assert p.model_trusted is False
        assert any(r.startswith("burstiness_undecided: db: ") for r in p.trust_reasons)
    only = [p for p in undecided
            if all(r.startswith("burstiness_undecided") for r in p.trust_reasons)]
    assert only, [(p.solve, p.trust_reasons) for p in undecided]
