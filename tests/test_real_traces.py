"""perfcast on measured traces (LibReDE / SARDE, ../shared/data/real; bench/accuracy/real_traces):
the data read as published, the input-contract windows, perfcast's demands against the median of LibReDE's mainstream
estimators on the runs where those agree, the flags on the collinear run r2, the closed model's
response times, and the 210 micro-benchmark traces. Skips where the data are missing (fails
under ``CI=true``)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.accuracy import real_traces as rt
from streams.core.records import parse_window
from tests.ci_policy import unavailable


@pytest.fixture(scope="module")
def root():
    found = rt.data_root()
    if found is None:
        unavailable(f"real traces not found ({rt.ENV} or ../shared/data/real)",
                    "the LibReDE/SARDE traces must be present under ../shared/data/real")
    return found


@pytest.fixture(scope="module")
def sarde(root):
    runs = rt.sarde_runs(root)
    for T in rt.WINDOWS:
        rt.run_pipeline(runs, T)
    return {r.name: r for r in runs}


def test_reading_reproduces_librede_service_demand_law(sarde):
    """Our reading of the series (alignment, units, the response-time weighting) gives
    LibReDE's own ServiceDemandLaw answer to 1%: the consensus of the 210-trace table."""
    for run in sarde.values():
        ref = rt.librede_answers(run)["ServiceDemandLaw"]
        here = rt.response_time_split(run.U, run.counts, run.rt)
        np.testing.assert_allclose(here, ref, rtol=0.01, err_msg=run.name)


def test_windows_are_valid_contract_records_that_keep_the_completions(sarde):
    run = sarde["r2"]
    for T in rt.WINDOWS:
        records = rt.window_records(run, T)
        windows = [parse_window(r) for r in records]
        assert all(w.window_s == T and w.cores == 1 for w in windows)
        total = sum(w.total_completions for w in windows)
        covered = len(windows) * T
        assert total == pytest.approx(run.counts[:covered].sum(), rel=1e-9)
        assert np.mean([w.utilization for w in windows]) == pytest.approx(
            run.U[:covered].mean(), rel=1e-9)


#: (estimator, window) pairs held to the mainstream median; the Kalman filter at the end of the
#: run at 10 and 30 s misses by a few points (docs/accuracy.md section 8)
MAINSTREAM_CASES = [("kalman", 5), ("nnls_run", 5), ("nnls_run", 10), ("recommended", 5),
                    ("recommended", 10), ("recommended", 30)]
MAINSTREAM_MISSES = [("kalman", 10), ("kalman", 30)]


def _mainstream_offsets(sarde, estimator, window_s):
    offsets = {}
    for name in rt.AGREEING:
        run = sarde[name]
        med, _ = rt.mainstream_median(run)
        d = run.results[window_s]["answers"][estimator]
        offsets.update({(name, c): float(d[i] / med[i] - 1) for i, c in enumerate(run.classes)})
    return offsets


@pytest.mark.parametrize("estimator, window_s", MAINSTREAM_CASES)
def test_demands_within_15_percent_of_librede_mainstream_median(sarde, estimator, window_s):
    """The acceptance on r0, r1, r3, r4: every class within 15% of the median of LibReDE's five
    mainstream estimators (which agree within ~20% there), not merely inside the span of all
    nine (5x wide on r4)."""
    offsets = _mainstream_offsets(sarde, estimator, window_s)
    off = {k: v for k, v in offsets.items() if abs(v) > rt.MAINSTREAM_TOLERANCE}
    assert not off, f"{estimator} at {window_s} s: " + ", ".join(
        f"{n} {c} {v:+.0%}" for (n, c), v in off.items())


@pytest.mark.parametrize("estimator, window_s", MAINSTREAM_MISSES)
def test_the_kalman_filters_known_misses_stay_small(sarde, estimator, window_s):
    """The end-of-run Kalman demands at 10 and 30 s: one class beyond 15% (r4 WC1 -15.4% at
    10 s; r0 WC1 -17.4% at 30 s, where the classes are collinear), none beyond 20%. A fix
    shows here as one class fewer beyond 15%: move the case to :data:`MAINSTREAM_CASES`."""
    offsets = _mainstream_offsets(sarde, estimator, window_s)
    assert max(abs(v) for v in offsets.values()) < 0.20
    assert sum(abs(v) > rt.MAINSTREAM_TOLERANCE for v in offsets.values()) == 1


def test_librede_mainstream_estimators_agree_on_the_agreeing_runs(sarde):
    """The reference is meaningful: the five mainstream estimators lie within 35% of each
    other (max / min) on every class of r0, r1, r3, r4."""
    for name in rt.AGREEING:
        _, spread = rt.mainstream_median(sarde[name])
        assert np.all(spread < 0.35), name


@pytest.mark.parametrize("estimator, window_s", [("recommended", 10), ("recommended", 30),
                                                 ("nnls_run", 10)])
def test_demands_near_librede_median_on_agreeing_runs(sarde, estimator, window_s):
    """Stricter than the span: within 10% of the median of LibReDE's answers, every class of
    r0, r1, r3, r4 (at 5-s windows r1's WC0 is 12% off: docs/accuracy.md)."""
    for name in rt.AGREEING:
        run = sarde[name]
        answers = np.array(list(rt.librede_answers(run).values()))
        med = np.median(answers, axis=0)
        d = run.results[window_s]["answers"][estimator]
        np.testing.assert_allclose(d, med, rtol=0.10, err_msg=f"{name} at {window_s} s")


def test_r2_classes_that_cannot_be_separated_are_flagged(sarde):
    """r2 (three classes at nearly equal rates, LibReDE's estimators 5x apart): the two
    small-demand classes are flagged by the run-level assessment and by the pipeline's tier
    (its last 120 windows) at every window length."""
    run = sarde["r2"]
    for T in rt.WINDOWS:
        res = run.results[T]
        sep = res["sep"]
        for i, c in enumerate(run.classes[:2]):
            assert not sep.separable[i], f"{c} at {T} s"
            assert res["tier_flags"][c]["separable"] is False, f"tier {c} at {T} s"
        assert sep.relative_std_error[:2].min() > 0.1


def test_single_class_run_is_never_collinear(sarde):
    res = sarde["r3"].results[30]
    assert res["sep"].condition_number == pytest.approx(1.0)
    assert res["sep"].separable.all()


def test_closed_model_response_times(sarde):
    """The closed single-tier MVA (population and D/Z fitted to the measured number-in-system
    distribution) against the measured mean response time: within 15% for every class of the
    5 runs; the open model at the same throughputs never predicts less than the closed."""
    for run in sarde.values():
        d = run.results[30]["answers"]["recommended"]
        fit = rt.population_fit(run)
        assert fit is not None, run.name
        closed, _ = rt.closed_prediction(run, d, fit)
        meas = rt.measured_response(run)
        np.testing.assert_allclose(closed, meas, rtol=0.15, err_msg=run.name)
        assert np.all(rt.open_prediction(run, d) >= closed * 0.999)


def test_all_210_microbenchmark_traces(root):
    """Every trace is read with the class count the README gives, goes through the pipeline at
    30-s windows, and the regression's median per-class disagreement with the utilization-law
    consensus stays below 20% in every (load, classes) group (measured: docs/accuracy.md)."""
    runs = rt.microbench_runs(root)
    assert len(runs) == 210
    expected = {1: 1, 2: 1, 3: 2, 4: 2, 5: 2, 11: 2}
    for run in runs:
        assert len(run.classes) == expected.get(run.exp, 3), run.name
    rt.run_pipeline(runs, 30)
    groups: dict[tuple[int, int], list[float]] = {}
    for run in runs:
        consensus = rt.response_time_split(run.U, run.counts, run.rt)
        d = run.results[30]["answers"]["nnls_run"]
        assert np.isfinite(d).all() and (d >= 0).all()
        groups.setdefault((run.load, len(run.classes)), []).extend(
            np.abs(d / consensus - 1).tolist())
    assert len(groups) == 9
    for key, v in groups.items():
        assert np.median(v) < 0.20, key
