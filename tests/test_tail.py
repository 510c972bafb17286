"""Service-time p95 from coarse windows (estimators.tail) against the true service process.

Truth that is not the model: each process is run through a simulated FCFS queue with Poisson
arrivals (solvers.simulation.single_queue), cut into 5 s monitoring windows, and the estimate
is compared with the process's own marginal p95 (``MAP.quantile``). Seeded; no wall clock.
"""

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from estimators.mapfit import service_p95
from estimators.tail import service_tail_p95, window_mixture_p95
from solvers.paper000 import scenarios
from solvers.processes import MAP
from solvers.simulation.mmpp import mmpp2, mmpp2_design
from solvers.simulation.single_queue import monitor_windows, mtrace1

LN20 = math.log(20.0)
WINDOW_S = 5.0


def _windows(process: MAP, utilization: float, seconds: float, seed: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """Busy time and completions of 5 s windows of an M/process/1 queue."""
    rng = np.random.default_rng(seed)
    jobs = int(seconds * utilization / process.mean)
    trace = mtrace1(utilization / process.mean, process.sample(jobs, rng), rng)
    win = monitor_windows(trace, WINDOW_S)
    return win.busy_time, win.completions.sum(axis=1)


BROWSING_DB = scenarios()["bottleneck_switch"].database           # I ~ 202, SCV 19.3, 4 ms

#: processes with their true p95 within +-15%; the first four the window mixture meets too
WITHIN_15 = {
    "exponential 4.5 ms": MAP.exponential(0.0045),
    "ordering db, MAP(2) I ~ 1.1": scenarios()["not_bursty"].database,
    # phases last ~20 s and ~10 s of busy time (several windows): I ~ 640, SCV 3.7
    "slow MMPP(2) I ~ 640": mmpp2(2.0, 0.25, 0.0005, 0.001).scaled(0.010),
    # phases last ~10 s and ~2 s of busy time: I ~ 107, SCV 1.6
    "slow MMPP(2) I ~ 107": mmpp2(1.5, 0.4, 0.0004, 0.002).scaled(0.004),
    # held out of the design (docs/accuracy.md): ~5 phase switches per window, I 50, SCV 1.6
    "MMPP(2) alpha 0.01 I 50": mmpp2_design(0.01, 50.0, 0.5).scaled(0.004),
    # ~1.5 switches per window, I 300, SCV 1.8
    "MMPP(2) alpha 0.003 I 300": mmpp2_design(0.003, 300.0, 0.3).scaled(0.004),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(WITHIN_15))
def test_p95_within_15_percent_of_the_true_service_process(name):
    process = WITHIN_15[name]
    busy, done = _windows(process, 0.4, 3 * 3600.0, seed=sum(map(ord, name)))
    est = service_tail_p95(busy, done)
    true = float(process.quantile(0.95))
    assert est.flag is None
    assert est.p95 == pytest.approx(true, rel=0.15), (name, est.p95, true)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["exponential 4.5 ms", "ordering db, MAP(2) I ~ 1.1",
                                  "slow MMPP(2) I ~ 107"])
def test_the_busy_time_proxy_misses_them(name):
    """Mi et al.'s (2008) busy-time p95 (the estimate the pipeline fed the fit before) is more than
    15% short on these processes (37-64% short: it spreads like one window, not one service)."""
    process = WITHIN_15[name]
    busy, done = _windows(process, 0.4, 3 * 3600.0, seed=sum(map(ord, name)))
    assert service_p95(busy, done).p95 < 0.85 * float(process.quantile(0.95))


def test_browsing_db_p95_within_15_percent():
    """Mi et al.'s (2008) browsing mix: the slow runs (~0.5 s of busy time) switch within
    a 5 s window, so no window sees one phase. The window mixture (one rate per window) reads
    less than 0.6 of the truth; the two-phase deconvolution is within 15%."""
    busy, done = _windows(BROWSING_DB, 0.35, 3 * 3600.0, seed=20)
    true = float(BROWSING_DB.quantile(0.95))
    assert window_mixture_p95(busy, done).p95 < 0.6 * true
    est = service_tail_p95(busy, done)
    assert est.p95 == pytest.approx(true, rel=0.15)
    assert est.fast_mean < est.mean < est.slow_mean


def test_window_mixture_p95_within_15_percent_where_windows_see_one_phase():
    name = "slow MMPP(2) I ~ 640"
    process = WITHIN_15[name]
    busy, done = _windows(process, 0.4, 3 * 3600.0, seed=sum(map(ord, name)))
    assert window_mixture_p95(busy, done).p95 == pytest.approx(
        float(process.quantile(0.95)), rel=0.15)


@pytest.mark.slow
def test_shopping_db_is_the_documented_miss():
    """Mi et al.'s (2008) shopping database (the browsing process at 1 ms): ~16 slow runs per window,
    no window comes near the slow phase; the estimate reads more than 15% short,
    though still longer than the window mixture. If this starts to pass within 15%, the limit
    that docs/model.md states ("The service-time p95") has moved: update it."""
    process = scenarios()["bursty_no_switch"].database
    busy, done = _windows(process, 0.4, 3 * 3600.0, seed=21)
    true = float(process.quantile(0.95))
    new, old = service_tail_p95(busy, done).p95, window_mixture_p95(busy, done).p95
    assert old < new < 0.85 * true


def test_equal_window_means_give_the_exponential_p95():
    busy = np.full(50, 2.0)
    done = np.full(50, 400)
    est = service_tail_p95(busy, done)
    assert est.p95 == pytest.approx(0.005 * LN20, rel=1e-9)
    assert est.mean == pytest.approx(0.005)


def test_window_mixture_solves_the_mixture_equation():
    busy = np.array([1.0, 1.0, 1.0])
    done = np.array([100, 100, 10])                 # means 10 ms, 10 ms, 100 ms
    p95 = window_mixture_p95(busy, done).p95
    tail = (200 * math.exp(-p95 / 0.01) + 10 * math.exp(-p95 / 0.1)) / 210
    assert tail == pytest.approx(0.05, rel=1e-9)


def test_two_phase_marginal_recovers_the_phases_of_one_phase_windows():
    """1,800 windows of 100 exponential services with mean 10 ms and 200 of 20 with mean
    100 ms (each window in one phase): the band's ends, less the noise of exponential
    services, are the phase means within 5%, the slow share keeps the mean, the p95 solves
    the two-phase tail equation and lies within 5% of the true one."""
    rng = np.random.default_rng(11)
    fast = rng.exponential(0.01, (1800, 100)).sum(axis=1)
    slow = rng.exponential(0.1, (200, 20)).sum(axis=1)
    busy = np.concatenate([fast, slow])
    done = np.concatenate([np.full(1800, 100), np.full(200, 20)])
    est = service_tail_p95(busy, done)
    assert est.mean == pytest.approx(busy.sum() / done.sum())
    assert est.fast_mean == pytest.approx(0.01, rel=0.05)
    assert est.slow_mean == pytest.approx(0.1, rel=0.05)
    share = est.slow_share
    assert share * est.slow_mean + (1 - share) * est.fast_mean == pytest.approx(est.mean)
    tail = share * math.exp(-est.p95 / est.slow_mean) \
        + (1 - share) * math.exp(-est.p95 / est.fast_mean)
    assert tail == pytest.approx(0.05, rel=1e-9)
    true_share = 4000 / 184000                       # slow services among all
    true = brentq(lambda x: true_share * math.exp(-x / 0.1)
                  + (1 - true_share) * math.exp(-x / 0.01) - 0.05, 0.0, 1.0)
    assert est.p95 == pytest.approx(true, rel=0.05)


def test_a_few_windows_of_few_completions_do_not_set_the_band():
    """Up to 0.5% of the windows at each end lie outside [a, b]: one window with a single
    long request among 400 ordinary ones does not make the slow phase."""
    busy = np.concatenate([np.full(400, 2.0), [0.5]])
    done = np.concatenate([np.full(400, 400), [1]])
    est = service_tail_p95(busy, done)
    assert est.slow_mean < 0.006
    assert est.p95 == pytest.approx(est.mean * LN20, rel=0.05)


@pytest.mark.parametrize("estimate", [service_tail_p95, window_mixture_p95])
def test_scales_with_busy_time_and_ignores_idle_windows(estimate):
    rng = np.random.default_rng(3)
    busy = rng.uniform(0.5, 2.0, 200)
    done = rng.integers(1, 300, 200)
    base = estimate(busy, done)
    assert estimate(3.0 * busy, done).p95 == pytest.approx(3.0 * base.p95, rel=1e-9)
    padded = estimate(np.concatenate([busy, [0.0, 4.0]]), np.concatenate([done, [0, 0]]))
    assert padded.p95 == pytest.approx(base.p95, rel=1e-12)
    assert padded.windows_ignored == 2


@pytest.mark.parametrize("estimate", [service_tail_p95, window_mixture_p95])
def test_no_completions_and_no_busy_time_are_flagged_not_nan(estimate):
    assert estimate([0.0, 1.0], [0, 0]).flag == "no_completions"
    est = estimate([0.0, 0.0], [3, 1])
    assert est.flag == "no_busy_time" and est.p95 is None


@pytest.mark.parametrize("busy, done, field", [
    ([], [], "busy_times"),
    ([1.0, -1.0], [1, 1], "busy_times"),
    ([1.0, 1.0], [1, math.nan], "completions"),
    ([1.0], [1, 2], "busy_times and completions"),
])
def test_bad_input_names_the_field(busy, done, field):
    with pytest.raises(ValueError, match=field):
        service_tail_p95(busy, done)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("busy, done, p95", [
    ([1e-310, 1.0], [1, 1], math.log(10.0)),        # 1/m overflowed: RuntimeWarning
    ([5e-324, 1.0], [1, 1], math.log(10.0)),
    ([1e300, 1e-300], [1, 1], 1e300 * math.log(10.0)),  # x * (1/m) overflowed
    ([1.7e308, 1e-10], [1, 1e15], 1e-25 * LN20),   # 0 * inf was NaN
])
def test_extreme_windows_neither_warn_nor_give_nan(busy, done, p95):
    """Found by the fuzz tests: a window mean near 0 or near the float range beside an
    ordinary one. The window mixture's p95 is the one of its equation; the two-phase
    estimate is finite and between the smallest and largest window mean times ln 20; no
    warning, no NaN."""
    est = window_mixture_p95(busy, done)
    assert est.flag is None
    assert est.p95 == pytest.approx(p95, rel=1e-6)
    est = service_tail_p95(busy, done)
    means = np.asarray(busy) / np.asarray(done)
    assert est.flag is None and math.isfinite(est.p95)
    assert means.min() <= est.p95 / LN20 <= means.max()


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("estimate", [service_tail_p95, window_mixture_p95])
def test_a_p95_beyond_the_float_range_is_flagged(estimate):
    est = estimate([1.7e308, 1.7e308], [1, 1])
    assert est.flag == "out_of_range" and est.p95 is None and est.mean is None


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("estimate", [service_tail_p95, window_mixture_p95])
@pytest.mark.parametrize("busy, done", [([1e308, 1.0, 2.0, 1.5], [0.5, 10, 12, 11]),
                                        ([1e300, 1.0, 2.0], [1e-10, 10, 12])])
def test_a_window_mean_beyond_the_float_range_is_flagged_not_nan(estimate, busy, done):
    # the total busy time is finite but one window's B_k / n_k (n_k < 1) overflows: the
    # two-phase estimate returned p95 = 0 with a NaN slow phase before
    est = estimate(busy, done)
    assert est.flag == "out_of_range" and est.p95 is None and est.mean is None
    assert est.slow_mean is None


def test_partition_helpers_match_numpy_quantile_and_median_exactly():
    # the band ends and the median of completions are numpy's to the last bit (same rounding)
    from estimators.tail import _median, _quantiles
    rng = np.random.default_rng(5)
    for size in (1, 2, 3, 7, 60, 61, 200, 4096):
        for values in (rng.exponential(0.004, size), np.round(rng.uniform(0, 5, size))):
            assert _quantiles(values, (0.005, 0.995)) == np.quantile(values, [0.005, 0.995]
                                                                     ).tolist()
            assert _median(values) == float(np.median(values))


@pytest.mark.parametrize("share, fast, slow", [(0.3, 0.002, 0.02), (1.0, 0.004, 0.004),
                                               (0.5, 0.0, 0.01), (0.02, 1e-310, 1.0),
                                               (0.9, 1.0, 1e300)])
def test_two_phase_quantile_is_the_mixture_quantile_of_two_phases(share, fast, slow):
    from estimators.tail import _mixture_quantile, _two_phase_quantile
    assert _two_phase_quantile(share, fast, slow) == _mixture_quantile(
        np.array([1.0 - share, share]), np.array([fast, slow]))
