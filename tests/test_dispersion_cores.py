"""The index of dispersion of a multi-core tier: the busy-time axis in units of ``c T / s``.

A ``c``-server FCFS queue with MAP(2) service (Poisson arrivals) is simulated exactly
(:mod:`solvers.simulation.multi_server`) and monitored as a multi-core tier is (utilization the
mean over the cores); the IDC-curve fit with ``cores = c`` must cover the service process's
``I`` at low and high load, where the axis in units of the whole tier's window (``s = 1``)
leaves a low-load trace too short. A single-core tier is unchanged to the last bit. All seeded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.dispersion import index_of_dispersion_interval  # isort: skip
from estimators.dispersion.busy_axis import axis_scale  # isort: skip
from solvers.simulation import fcfs_queue, monitor_windows, mtrace1  # isort: skip
from solvers.simulation.mmpp import mmpp2, mmpp2_intervals  # isort: skip
from solvers.simulation.multi_server import fcfs_servers, monitor_servers, mtrace_c  # isort: skip

T = 20.0                                     # window, in mean service times
I20 = mmpp2(6.7, 0.34, 0.36, 0.042)          # I ~ 20 (tests/test_dispersion.py's fast case)
I200 = mmpp2(45.0, 0.09, 0.39, 0.0082)       # I ~ 200


def tier(process, cores: int, utilization: float, windows: int, seed: int):
    rng = np.random.default_rng(seed)
    rate = utilization * cores / process.mean
    jobs = int(windows * T * rate * 1.05) + 1000
    starts, departures = mtrace_c(rate, mmpp2_intervals(process, jobs, rng), cores, rng)
    return monitor_servers(starts, departures, T, cores, windows * T)


# --------------------------------------------------------------------------- the simulator
def test_one_server_is_the_single_server_queue():
    rng = np.random.default_rng(3)
    arrivals = np.cumsum(rng.exponential(1.0, 5000))
    service = rng.exponential(0.8, 5000)
    starts, departures = fcfs_servers(arrivals, service, 1)
    single = fcfs_queue(arrivals, service)
    np.testing.assert_allclose(starts, single.starts, rtol=1e-12)
    np.testing.assert_allclose(departures, single.departures, rtol=1e-12)
    ours = monitor_servers(starts, departures, 25.0, 1, 4000.0)
    theirs = monitor_windows(single, 25.0, end=4000.0)
    np.testing.assert_allclose(ours.utilization, theirs.utilization, atol=1e-9)
    np.testing.assert_array_equal(ours.completions, theirs.completions.sum(axis=1))


def test_servers_share_the_work_and_never_overlap():
    win = tier(I20, 4, 0.6, 400, seed=5)
    assert float(win.utilization.mean()) == pytest.approx(0.6, rel=0.1)
    assert float(win.utilization.max()) <= 1.0
    rng = np.random.default_rng(1)
    starts, departures = fcfs_servers(np.sort(rng.uniform(0, 10, 200)),
                                      rng.exponential(1.0, 200), 3)
    # at most 3 jobs in service at any start
    busy = np.searchsorted(np.sort(departures), starts, side="right")
    assert np.all(np.arange(1, starts.size + 1) - busy <= 3)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_servers_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="servers"):
        fcfs_servers(np.array([0.0, 1.0]), np.array([1.0, 1.0]), bad)


# --------------------------------------------------------------------------- the axis unit
@pytest.mark.parametrize("cores, mean, expected", [
    (1.0, 0.13, 1.0),           # a single core: the axis of Mi et al. (2008), Fig. 2
    (8.0, 0.13, 1.0 / 0.13),    # a window ~ one unit
    (8.0, 0.05, 8.0),           # never finer than one core's window
    (16.0, 0.9, 1.0 / 0.9),
    (4.0, 1.0, 1.0),            # never coarser than the tier's window
    (0.5, 0.3, 1.0),            # a fraction of a core
    (8.0, 0.0, 1.0),            # all idle
])
def test_axis_scale(cores, mean, expected):
    assert axis_scale(cores, np.full(10, mean)) == pytest.approx(expected, rel=1e-12)


def test_single_core_interval_is_unchanged_to_the_last_bit():
    """The figures of the estimator before ``cores`` existed, on a seeded M/MMPP(2)/1 trace."""
    rng = np.random.default_rng(11)
    rate = 0.5 / I20.mean
    trace = mtrace1(rate, mmpp2_intervals(I20, int(600 * T * rate * 1.05) + 1000, rng), rng)
    win = monitor_windows(trace, T, end=600 * T)
    n = win.completions.sum(axis=1)
    for est in (index_of_dispersion_interval(win.utilization, n, T),
                index_of_dispersion_interval(win.utilization, n, T, cores=1)):
        assert (est.value, est.lower, est.upper, est.reason) == (
            15.961334706368946, 11.13697505156378, 574.0389554186623, "ok")
        assert est.busy_s == 5729.382799045384


def test_the_tiers_window_at_full_load_is_the_old_axis():
    """``s = 1`` (every window busy): the result equals the call in units of ``c T``."""
    win = tier(I20, 4, 0.7, 300, seed=2)
    u = np.ones_like(win.utilization)
    old = index_of_dispersion_interval(u, win.completions, 4 * T)
    new = index_of_dispersion_interval(u, win.completions, T, cores=4)
    assert (new.value, new.lower, new.upper, new.t) == (old.value, old.lower, old.upper, old.t)


@pytest.mark.parametrize("bad", [0, -2.0, math.nan, math.inf, True, "8"])
def test_cores_must_be_positive(bad):
    with pytest.raises(ValueError, match="cores"):
        index_of_dispersion_interval(np.full(100, 0.5), np.full(100, 10.0), T, cores=bad)


# --------------------------------------------------------------------------- coverage
def test_low_load_eight_cores_is_resolved_where_the_tier_window_is_too_short():
    """20 minutes of 5-s windows of an 8-core tier at 13%: 31 units of ``c T`` -- too short;
    in units of about one window's busy time the interval is finite and covers ``I``."""
    win = tier(I20, 8, 0.13, 240, seed=4)
    old = index_of_dispersion_interval(win.utilization, win.completions, 8 * T)
    new = index_of_dispersion_interval(win.utilization, win.completions, T, cores=8)
    assert old.reason == "too_short" and old.upper == math.inf
    assert new.reason == "ok" and new.lower <= I20.idc <= new.upper < math.inf
    assert new.busy_s == pytest.approx(old.busy_s, rel=1e-12)     # core-seconds either way


COVERAGE = [(c, u) for c in (1, 4, 8, 16) for u in (0.13, 0.7)]


@pytest.mark.slow
@pytest.mark.parametrize("process", [I20, I200], ids=["I~20", "I~200"])
@pytest.mark.parametrize("cores, utilization", COVERAGE,
                         ids=[f"c={c},U={u}" for c, u in COVERAGE])
def test_interval_covers_the_service_index_at_low_and_high_load(process, cores, utilization):
    """Seeded 95% intervals on 480 windows: at least 9 of 10 cover the true ``I`` (nominal
    9.5; bench/accuracy/dispersion_cores.py runs more seeds). The point estimate alone is
    not held to a bound: on 480 windows it strays by up to a factor 2 (one core at 13%:
    Y(T) only, the axis unchanged)."""
    covered = []
    for seed in range(10):
        win = tier(process, cores, utilization, 480, seed)
        est = index_of_dispersion_interval(win.utilization, win.completions, T, cores=cores)
        covered.append(est.lower <= process.idc <= est.upper)
        assert est.value > 0.0 and not math.isnan(est.upper), (seed, est)
    assert sum(covered) >= 9, covered
