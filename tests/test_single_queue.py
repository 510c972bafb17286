"""The FCFS single-queue simulator and its monitoring view (solvers.simulation.single_queue)."""

import numpy as np
import pytest

from solvers.processes import MAP
from solvers.simulation import fcfs_queue, monitor_windows, mtrace1


def _lindley_loop(arrivals, service):
    departures = np.empty_like(arrivals)
    last = 0.0
    for i, (a, s) in enumerate(zip(arrivals, service)):
        last = max(a, last) + s
        departures[i] = last
    return departures


def test_vectorised_lindley_equals_the_recursion():
    rng = np.random.default_rng(11)
    arrivals = np.cumsum(rng.exponential(1.0, 2000))
    service = rng.exponential(0.9, 2000)
    trace = fcfs_queue(arrivals, service)
    np.testing.assert_allclose(trace.departures, _lindley_loop(arrivals, service), rtol=1e-12)
    assert np.all(trace.starts >= trace.arrivals - 1e-12)
    assert np.all(np.diff(trace.departures) >= 0)


def test_mm1_mean_response_time_matches_closed_form():
    # M/M/1 with rho = 0.6: E[R] = 1/(mu - lambda) = 2.5
    rng = np.random.default_rng(3)
    trace = mtrace1(0.6, rng.exponential(1.0, 400_000), rng)
    assert trace.response.mean() == pytest.approx(2.5, rel=0.04)


def test_windows_conserve_busy_time_and_completions():
    rng = np.random.default_rng(5)
    arrivals = np.cumsum(rng.exponential(1.0, 5000))
    service = rng.exponential(0.7, 5000)
    classes = rng.integers(0, 3, 5000)
    trace = fcfs_queue(arrivals, service, classes)
    end = float(trace.departures[-1]) + 1.0
    win = monitor_windows(trace, 10.0, n_classes=3, end=end + 10.0)
    assert win.busy_time.sum() == pytest.approx(service.sum(), rel=1e-9)
    assert win.completions.sum() == 5000
    np.testing.assert_array_equal(win.completions.sum(axis=0), np.bincount(classes, minlength=3))
    assert np.all((win.utilization >= 0) & (win.utilization <= 1))
    # mean response time per class, weighted back by counts, equals the per-job average
    total_rt = (win.response_time * win.completions).sum(axis=0)
    for c in range(3):
        assert total_rt[c] == pytest.approx(trace.response[classes == c].sum(), rel=1e-9)


def test_map_service_trace_drives_the_queue():
    rng = np.random.default_rng(9)
    bursty = MAP([[-10.0, 0.01], [0.001, -0.1]], [[9.99, 0.0], [0.0, 0.099]])
    service = bursty.sample(50_000, rng)
    trace = mtrace1(0.5 / bursty.mean, service, rng)
    win = monitor_windows(trace, 100.0)
    assert win.busy_time.sum() == pytest.approx(service[trace.departures <= 100.0 * len(
        win.busy_time)].sum(), rel=1e-6, abs=100.0)


@pytest.mark.parametrize("bad", [{"service": [-1.0, 1.0]}, {"arrivals": [2.0, 1.0]}])
def test_bad_input_names_the_field(bad):
    args = {"arrivals": [0.0, 1.0], "service": [1.0, 1.0]}
    args.update(bad)
    field = next(iter(bad))
    with pytest.raises(ValueError, match=field):
        fcfs_queue(np.array(args["arrivals"]), np.array(args["service"]))


def test_map_without_unique_stationary_phase_is_rejected():
    with pytest.raises(ValueError, match="D0 \\+ D1: .*no unique stationary"):
        MAP([[-1.0, 0.0], [0.0, -1.0]], [[1.0, 0.0], [0.0, 1.0]])


def test_map_with_a_transient_phase_is_accepted():
    # phase 0 is left for good after the first completion: a Poisson process of rate 1
    process = MAP([[-2.0, 0.0], [0.0, -1.0]], [[0.0, 2.0], [0.0, 1.0]])
    assert process.mean == pytest.approx(1.0, rel=1e-12)
    assert process.idc == pytest.approx(1.0, rel=1e-9)
