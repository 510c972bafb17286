"""The joint fit of per-class demand and pure delay at a tier (estimators.latency) on windows
drawn from the processor-sharing closed form with a known delay, and the pipeline with
``latency = "estimate"`` on the testbed's 5-user windows (tests/results)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from estimators.latency import LatencySums, fit_latency, stretch

RESULTS = Path(__file__).parent / "results"


def _windows(rng, D, delta, loads, window_s=5.0, n_windows=120, noise=0.3, mix_spread=20.0):
    """Windows of a one-core PS tier: per window a load ``U`` from ``loads``, a class mix
    drawn around uniform, Poisson completions, the utilization law with 2% noise and each
    class's mean ``D_c f(U) + delta_c`` with the noise of a mean of ``n`` requests."""
    C = len(D)
    sums = LatencySums()
    sums.grow([f"c{i}" for i in range(C)])
    for k in range(n_windows):
        mix = rng.dirichlet(np.full(C, mix_spread))
        X = loads[k % len(loads)] / (mix @ D) * mix
        n = rng.poisson(X * window_s).astype(float)
        U = max(float((n / window_s) @ D) * (1 + 0.02 * rng.standard_normal()), 0.0)
        R = (D * stretch(U, 1) + delta) * (1 + noise * rng.standard_normal(C)
                                           / np.sqrt(np.maximum(n, 1)))
        sums.add([U], [1], [n / window_s], [np.where(n > 0, R, np.nan)], [n])
    return sums


@pytest.mark.parametrize("seed", [200, 201, 202, 203, 204])
def test_demand_and_delay_are_recovered_across_loads(seed):
    rng = np.random.default_rng(seed)
    D = rng.uniform(0.001, 0.03, 4)
    delta = rng.uniform(0.0, 0.03, 4)
    fit = fit_latency(_windows(rng, D, delta, np.linspace(0.1, 0.8, 12)))
    assert fit.identified.all() and fit.reason is None
    # errors relative to the class's unstretched time (30 seeds: D 2.5%, delta 7.1% at worst)
    assert np.all(np.abs(fit.demand - D) <= 0.05 * (D + delta))
    assert np.all(np.abs(fit.delay - delta) <= 0.1 * (D + delta))
    assert np.all(fit.delay >= 0)


def test_one_class_is_the_closed_form():
    # one class, no noise: D = U / X (utilization law), delta = R - D / (1 - U)
    sums = LatencySums()
    sums.grow(["a"])
    for U in (0.2, 0.5, 0.7):
        X = U / 0.01
        sums.add([U], [1], [[X]], [[0.01 / (1 - U) + 0.004]], [[X * 10]])
    fit = fit_latency(sums)
    assert fit.demand[0] == pytest.approx(0.01, rel=1e-6)
    assert fit.delay[0] == pytest.approx(0.004, rel=1e-5)
    assert fit.identified[0]


def test_a_steady_load_and_mix_leave_the_delay_unidentified():
    # two classes in a fixed mix at one load: any (D, delta) on a line fits
    sums = LatencySums()
    sums.grow(["a", "b"])
    rng = np.random.default_rng(7)
    D, delta = np.array([0.002, 0.02]), np.array([0.01, 0.01])
    X = np.array([10.0, 10.0])
    U = float(X @ D)
    for _ in range(60):
        R = (D * stretch(U, 1) + delta) * (1 + 0.05 * rng.standard_normal(2))
        sums.add([U], [1], [X], [R], [X * 5])
    fit = fit_latency(sums)
    assert not fit.identified.all()
    assert "unidentified" in fit.reason and "stretch" in fit.reason


def test_sums_grow_decay_and_round_trip():
    sums = LatencySums()
    sums.grow(["a"])
    sums.add([0.3], [2], [[5.0]], [[0.02]], [[25.0]])
    sums.grow(["a", "b"])
    sums.add([0.4], [2], [[5.0, 2.0]], [[0.02, np.nan]], [[25.0, 10.0]])
    assert sums.per_class[1, 0] == 0.0           # b had no time: no row of its own
    sums.decay(0.5)
    again = LatencySums.from_dict(json.loads(json.dumps(sums.to_dict())))
    assert again.classes == ["a", "b"]
    assert np.array_equal(again.per_class, sums.per_class)
    assert np.array_equal(again.G, sums.G) and again.zz == sums.zz
    assert fit_latency(LatencySums()) is None


def _run(tmp_path, latency):
    from streams.cli.embedded import run_embedded
    from streams.core.config import load_config
    cfg = tmp_path / f"{latency}.toml"
    cfg.write_text(f"""[systems.testbed]
tiers = ["app", "db"]
sla_s = {{ "buy" = 0.122, "home" = 0.0599, "product" = 0.102, "search" = 0.217 }}
solve_interval_s = 15
latency = "{latency}"
""")
    lines = (RESULTS / "testbed_5_users_windows.jsonl").read_text().splitlines()
    out = tmp_path / latency
    run_embedded(lines, load_config(cfg), out)
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    return [p for p in preds if p.get("classes")][-1], lines


@pytest.mark.slow
def test_the_testbed_windows_get_their_delays(tmp_path):
    """The testbed's 5-user run (tests/results/testbed_5_users_windows.jsonl: the windows
    perfcast read through Prometheus, numbers rounded to 6 digits): at 5% utilization the
    database's time per request is 2-4x its CPU (round trips, the commit's fsync), which the
    CPU-only model misses; with the delays the model's time per class is the windows' own."""
    measured: dict[str, list[float]] = {}
    for line in (RESULTS / "testbed_5_users_windows.jsonl").read_text().splitlines():
        w = json.loads(line)
        for c, r in w.get("response_time_s", {}).items():
            n = w["completions"].get(c, 0)
            acc = measured.setdefault(c, [0.0, 0.0])
            acc[0] += r * n
            acc[1] += n
    by_tier_sum = {c: 2 * a / n for c, (a, n) in measured.items()}   # two tiers, same counts
    plain, _ = _run(tmp_path, "off")
    late, _ = _run(tmp_path, "estimate")
    for c, want in by_tier_sum.items():
        assert plain["classes"][c]["response_time"] < 0.75 * want
        assert late["classes"][c]["response_time"] == pytest.approx(want, rel=0.2)
    db = late["tiers"]["db"]["demands"]
    assert all(db[c]["delay"] > 0.003 for c in db)
    assert not any(db[c]["delay_identified"] for c in db)        # one steady load
    assert "delay" not in plain["tiers"]["db"]["demands"]["buy"]
    assert any(f.startswith("latency: app: measured time below") for f in late["flags"])


def test_a_simulated_tier_with_a_known_delay():
    """The physical simulator: a one-core FCFS tier (equal exponential demands: FCFS and PS
    have the same class means) then a pure delay per class (a tier of more cores than users),
    monitored as one tier over populations 10-70 (utilization about 0.15-0.85). Seeds 11-13
    gave errors up to 5% (demand) and 8% (delay) of the class's time; this seed, held out
    from them, 3% and 10.7%: the bound is the measured accuracy, not a target."""
    from solvers.simulation.physical import PhysicalNetwork, Tier, monitor_physical
    classes = ("a", "b", "c")
    wait = (0.5, 1.0, 2.0)
    net = PhysicalNetwork(tiers=(Tier("db", 1, 0.01), Tier("wait", 10_000, 0.02,
                                                          multipliers=wait)),
                          classes=classes, mix=(0.4, 0.3, 0.3), think_time=1.0, population=10)
    recs = monitor_physical(net, 1200.0, 5.0, seed=14,
                            schedule=[(0.0, 10), (300.0, 30), (600.0, 50), (900.0, 70)])
    sums = LatencySums()
    sums.grow(list(classes))
    for db, w in zip(recs[0::2], recs[1::2]):
        n = np.array([db["completions"][c] for c in classes], dtype=float)
        R = np.array([db["response_time_s"].get(c, np.nan) + w["response_time_s"].get(c, np.nan)
                      for c in classes])
        sums.add([db["utilization"]], [1], [n / db["window_s"]], [R], [n])
    fit = fit_latency(sums)
    D, delta = np.full(3, 0.01), 0.02 * np.array(wait)
    assert fit.identified.all()
    assert np.all(np.abs(fit.demand - D) <= 0.05 * (D + delta))
    assert np.all(np.abs(fit.delay - delta) <= 0.12 * (D + delta))


@pytest.mark.slow
def test_the_engine_primes_each_model_with_its_own_curve(tmp_path, monkeypatch):
    """With delays the queueing solvers see ``Z`` plus the delays (``solver_think``); the
    engine's batched MVA curves must be computed at that think time, the one the model's own
    :meth:`curve` uses, or every point it reads would be a different model's."""
    from solvers.mva import mva_curve
    from streams.predict.model import SystemModel
    primed = []
    original = SystemModel.prime

    def record(self, curve, scv=None):
        primed.append((self, curve))
        original(self, curve, scv)

    monkeypatch.setattr(SystemModel, "prime", record)
    late, _ = _run(tmp_path, "estimate")
    assert any(late["tiers"]["db"]["demands"][c]["delay"] > 0 for c in late["tiers"]["db"]["demands"])
    with_delays = [(mo, curve) for mo, curve in primed if mo.delays is not None]
    assert with_delays
    for mo, curve in with_delays[-3:]:
        assert mo.solver_think > mo.think_time
        own = mva_curve(mo.D, curve.max_population, mo.solver_think, mo.servers)
        assert np.allclose(curve.throughput, own.throughput, rtol=1e-12, atol=0.0)
