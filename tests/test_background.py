"""A tier's busy time beyond its requests' time there: background, not demand
(estimators/background.py, streams/predict/model.py's background_demands)."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.background import background
from streams.core.config import SystemConfig
from streams.core.tier import TierModel
from streams.predict.model import BACKGROUND_FLAG, background_demands, build_model

CLASSES = ["a", "b"]
MIX = np.array([0.5, 0.5])


def test_the_background_is_the_busy_time_beyond_the_times_at_the_requests_rate():
    # 12.5 ms busy per request against 10 ms at the tier, 4 requests/s on one core: 0.01 of
    # the core is no request's; the requests' demands stretch by 1 / 0.99
    bg = background(0.0125, 0.010, 4.0, 1.0)
    assert bg.ratio == pytest.approx(1.25)
    assert bg.utilization == pytest.approx(0.01)
    assert bg.share == pytest.approx(0.01)
    assert bg.stretch == pytest.approx(1.0 / 0.99)
    # per core on four cores
    assert background(0.0125, 0.010, 40.0, 4.0).share == pytest.approx(0.025)
    # busy within the times, or no requests: none
    assert background(0.009, 0.010, 4.0, 1.0).utilization == 0.0
    assert background(0.0125, 0.010, 0.0, 1.0).stretch == 1.0


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="time_per_request"):
        background(0.01, float("nan"), 1.0, 1.0)
    with pytest.raises(ValueError, match="time_per_request"):
        background(0.01, 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="throughput"):
        background(0.01, 0.005, -1.0, 1.0)
    # a background of the whole core is impossible (busy at most the cores)
    with pytest.raises(ValueError, match="busy_per_request"):
        background(0.6, 0.1, 2.0, 1.0)


def test_the_stretched_demand_keeps_the_saturation_of_the_cores_the_background_leaves():
    # an open class of utilization 0.2 at a PS centre (Lazowska et al. 1984, ch. 7): the
    # closed requests saturate at (1 - 0.2) / D (a per-request surplus measured at 20/s would
    # give 1 / (D + 0.2 / 20), 0.5 / D)
    D, X = 0.010, 20.0
    bg = background(D + 0.2 / X, D, X, 1.0)
    assert 1.0 / (D * bg.stretch) == pytest.approx(0.8 / D)


def _tier(name: str, demands: dict[str, float], response: dict[str, float], *,
          rate: float | None = 4.0, bursty: bool = False, split: bool = True,
          measured: float | None = None) -> TierModel:
    """A tier whose response-time split (PS reading) is 1 : 4, as its times."""
    return TierModel(tier=name, cores=1, demands=demands,
                     demand_std={c: 1e-5 for c in demands}, regression={}, idc=1.0,
                     idc_flag=None, mean_service=measured, p95=None, process=None, fit=None,
                     bursty=bursty, windows=100, estimator="kalman",
                     class_response=response, response_rate=rate,
                     split={"a": 0.001, "b": 0.004} if split else {}, split_discipline="ps")


def test_a_downstream_tier_busier_than_its_times_loses_the_surplus_as_background():
    app = _tier("app", {"a": 0.002, "b": 0.002}, {"a": 0.0021, "b": 0.0021})
    # the db: 12.5 ms busy per request over the mix against 10 ms of time there
    db = _tier("db", {"a": 0.005, "b": 0.020}, {"a": 0.004, "b": 0.016})
    V = np.ones((2, 2))
    D = np.array([[0.002, 0.002], [0.005, 0.020]])
    out, flags = background_demands([app, db], CLASSES, MIX, V, D, [False, False])
    # scaled to the times (1 / 1.25) and stretched by the 0.01 of the core no request holds
    assert out[1].tolist() == pytest.approx([0.004 / 0.99, 0.016 / 0.99])
    assert out[0].tolist() == [0.002, 0.002]
    assert flags == [f"{BACKGROUND_FLAG}db: busy 1.25x its requests' time there per request: "
                     f"0.01 of its 1 core taken as background (constant: its share measured at "
                     f"this load only), the demands scaled to the times and stretched by 1.010"]
    # the input is not changed
    assert D[1].tolist() == [0.005, 0.020]


def test_the_background_is_the_measured_busy_time_where_the_estimator_reads_more():
    app = _tier("app", {"a": 0.002, "b": 0.002}, {"a": 0.0021, "b": 0.0021})
    V, D = np.ones((2, 2)), np.array([[0.002, 0.002], [0.005, 0.020]])
    # measured 11.25 ms busy per completion: 1.25 ms beyond the times at 4/s, 0.005 of the core
    db = _tier("db", {"a": 0.005, "b": 0.020}, {"a": 0.004, "b": 0.016}, measured=0.01125)
    out, flags = background_demands([app, db], CLASSES, MIX, V, D, [False, False])
    assert out[1].tolist() == pytest.approx([0.004 / 0.995, 0.016 / 0.995])
    # an estimator's aggregate beyond the tier's cores (0.58 s a request at 4/s), nothing
    # measured: scaled to the times, no background, flagged -- never an error
    wild = np.array([[0.002, 0.002], [0.232, 0.928]])
    db = _tier("db", {"a": 0.232, "b": 0.928}, {"a": 0.004, "b": 0.016})
    out, flags = background_demands([app, db], CLASSES, MIX, V, wild, [False, False])
    assert out[1].tolist() == pytest.approx([0.004, 0.016])
    assert "no background taken" in flags[0]


def test_the_entry_tier_and_tiers_within_their_times_keep_their_demands():
    # the entry tier timed by its own server (0.2 ms against 2 ms of CPU): flagged, unchanged
    app = _tier("app", {"a": 0.002, "b": 0.002}, {"a": 0.0002, "b": 0.0002})
    db = _tier("db", {"a": 0.004, "b": 0.016}, {"a": 0.0042, "b": 0.016})
    D = np.array([[0.002, 0.002], [0.004, 0.016]])
    out, flags = background_demands([app, db], CLASSES, MIX, np.ones((2, 2)), D,
                                    [False, False])
    assert out is D
    assert len(flags) == 1 and flags[0].startswith(f"{BACKGROUND_FLAG}app: busy 10.00x")
    assert "not told apart" in flags[0]
    # a bursty db, one without a measured rate or times, or without a response-time split
    # (the untimed classes' share would rest on the estimator's split): unchanged, unflagged
    D2 = np.array([[0.002, 0.002], [0.005, 0.020]])
    for db2 in (_tier("db", {"a": 0.005, "b": 0.020}, {"a": 0.004, "b": 0.016}, bursty=True),
                _tier("db", {"a": 0.005, "b": 0.020}, {"a": 0.004, "b": 0.016}, rate=None),
                _tier("db", {"a": 0.005, "b": 0.020}, {}),
                _tier("db", {"a": 0.005, "b": 0.020}, {"a": 0.004}, split=False)):
        app2 = _tier("app", {"a": 0.002, "b": 0.002}, {"a": 0.0021, "b": 0.0021})
        out, flags = background_demands([app2, db2], CLASSES, MIX, np.ones((2, 2)), D2,
                                        [False, db2.bursty])
        assert out is D2 and flags == []


def test_build_model_takes_the_background_out_of_the_db_demand():
    app = _tier("app", {"a": 0.002, "b": 0.002}, {"a": 0.0021, "b": 0.0021})
    db = _tier("db", {"a": 0.005, "b": 0.020}, {"a": 0.004, "b": 0.016})
    model = build_model([app, db], CLASSES, {"a": 0.5, "b": 0.5}, 1.0, SystemConfig())
    assert model.D_mc[1].tolist() == pytest.approx([0.004 / 0.99, 0.016 / 0.99])
    assert any(f.startswith(f"{BACKGROUND_FLAG}db:") for f in model.flags)


def test_an_untimed_class_is_judged_by_the_split_as_the_timed_ones():
    # b (the heavy class) has no mean time yet: the split (1 : 4) spreads the 12.5-ms
    # aggregate as 5 / 20 ms, a's 5 ms against its 4-ms time gives g = 1.25 for all
    app = _tier("app", {"a": 0.002, "b": 0.002}, {"a": 0.0021, "b": 0.0021})
    db = _tier("db", {"a": 0.010, "b": 0.015}, {"a": 0.004})
    D = np.array([[0.002, 0.002], [0.010, 0.015]])
    out, flags = background_demands([app, db], CLASSES, MIX, np.ones((2, 2)), D,
                                    [False, False])
    assert out[1].tolist() == pytest.approx([0.008 / 0.99, 0.012 / 0.99])
    assert len(flags) == 1 and "busy 1.25x" in flags[0]
