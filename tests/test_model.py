"""The per-system model (``streams.predict.model``): MVA capacity along the asymptote, per-class
read-back, and the MAP network switch-over."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solvers.mva import mva, mva_curve
from solvers.paper000 import scenarios
from streams.core.config import SystemConfig
from streams.predict.model import SystemModel, build_model
from streams.core.tier import TierModel


def _model(D, servers, Z, sla, ratio=None) -> SystemModel:
    D = np.asarray(D, dtype=float)
    ratio = np.ones_like(D) if ratio is None else np.asarray(ratio, dtype=float)
    return SystemModel(tiers=[f"t{i}" for i in range(D.size)], classes=["a", "b"],
                       D_mc=np.c_[D, D * ratio], mix=np.array([0.6, 0.4]),
                       servers=np.asarray(servers, dtype=float), think_time=Z,
                       sla=np.asarray(sla, dtype=float), processes=None, map_limit=600)


def _exact_capacity(m: SystemModel) -> int:
    # R_c >= sum_m W_m V_mc / Vbar_m >= R - sum_m D_m (one visit each): beyond it every class
    # is over its SLA
    stop = float(m.D.sum() + m.sla.max())
    curve = mva_curve(m.D, 200_000, m.think_time, m.servers, stop_response_time=stop)
    Rc = np.array([m.class_residence(r).sum(axis=0) for r in curve.residence_time])
    return int(np.flatnonzero((Rc / m.sla).max(axis=1) > 1)[0]) - 1


@pytest.mark.slow
def test_mva_capacity_matches_the_exact_recursion_within_one_percent():
    """Beyond two knees ``mva_capacity`` extrapolates ``R_c(n)`` along the asymptote; on 200
    random systems (1-3 tiers, 1-4 cores, think time 0-2 s, SLAs 0.05-3 s, class demands
    0.3-3x each other) it stays within 1% of the exact recursion (measured worst: 0.65%)."""
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(200):
        M = int(rng.integers(1, 4))
        D = np.exp(rng.normal(np.log(3e-3), 0.6, M))
        m = _model(D, rng.choice([1, 1, 2, 4], M), float(rng.uniform(0, 2)),
                   [s := float(rng.uniform(0.05, 3)), 1.5 * s], rng.uniform(0.3, 3, M))
        cap, limited = m.mva_capacity()
        assert not limited
        exact = _exact_capacity(m)
        worst = max(worst, abs(cap - exact) / max(exact, 1))
    assert worst <= 0.01


def test_mva_at_is_exact_below_the_asymptote_and_close_beyond():
    m = _model([0.0045, 0.004], [1, 1], 0.5, [1.0, 1.0])
    n0 = m.asymptote_start()
    for n in (1, 50, n0):
        ref = mva([[0.0045], [0.004]], [n], 0.5)
        assert m.mva_at(n).throughput == pytest.approx(float(ref.throughput[0]), rel=1e-12)
    n = 3 * n0
    ref = mva([[0.0045], [0.004]], [n], 0.5)
    assert m.mva_at(n).throughput == pytest.approx(float(ref.throughput[0]), rel=1e-3)
    assert m.mva_at(n).response.mean() == pytest.approx(float(ref.response_time[0]), rel=1e-3)


def _tier(name, demands, std, regression, bursty=False, process=None) -> TierModel:
    return TierModel(tier=name, cores=1, demands=demands, demand_std=std,
                     regression=regression, idc=50.0 if bursty else 1.0, idc_flag=None,
                     mean_service=None, p95=None, process=process, fit=None, bursty=bursty,
                     windows=100)


def test_unidentified_class_demands_read_back_the_aggregate():
    """A class whose Kalman and regression demands disagree (or are uncertain) reads back the
    aggregate: its response time equals the mix-weighted mean; identified classes keep their
    own demand, and the aggregate ``sum_c p_c D_{m,c}`` is preserved (``demand_policy =
    "kalman_checked"``, the policy before docs/accuracy.md section 7)."""
    cfg = SystemConfig(tiers=("front", "db"), demand_policy="kalman_checked")
    front = _tier("front", {"a": 0.004, "b": 0.002}, {"a": 1e-4, "b": 1e-4},
                  {"a": 0.0041, "b": 0.0019})
    db = _tier("db", {"a": 0.010, "b": 0.001}, {"a": 1e-4, "b": 1e-4},
               {"a": 0.002, "b": 0.004})                   # regression disagrees
    m = build_model([front, db], ["a", "b"], {"a": 0.5, "b": 0.5}, 0.5, cfg)
    assert m.D_mc[0].tolist() == [0.004, 0.002]
    assert m.D_mc[1, 0] == pytest.approx(m.D_mc[1, 1])     # both read the aggregate
    assert m.D[1] == pytest.approx(0.5 * 0.010 + 0.5 * 0.001)


def test_bursty_tier_switches_to_the_map_network_and_matches_solve_closed():
    """With a bursty tier and its MAP(2), the model's answer at ``n`` is the MAP network's
    (Mi et al. 2008, Fig. 9), not MVA's; without burstiness it is MVA's."""
    from solvers.mapqn import solve_closed

    sc = scenarios()["bottleneck_switch"]
    cfg = SystemConfig(tiers=("front", "db"))
    front = _tier("front", {"a": sc.front.mean}, {"a": 0.0}, {"a": sc.front.mean})
    db = _tier("db", {"a": sc.database.mean}, {"a": 0.0}, {"a": sc.database.mean},
               bursty=True, process=sc.database.scaled(1.0))
    m = build_model([front, db], ["a"], {"a": 1.0}, 0.5, cfg)
    assert m.kind == "map"
    exact = solve_closed(sc.processes, 60, 0.5)                # 3,782 states: the exact chain
    assert m.map_states(60) <= m.exact_state_limit() < m.map_states(80)
    assert m.at(60).model == "map"
    assert m.at(60).throughput == pytest.approx(exact.throughput, rel=1e-9)
    # beyond the exact chain's budget (6,642 states): the decomposition, within 1% of it
    exact = solve_closed(sc.processes, 80, 0.5)
    assert m.at(80).model == "map-fes"
    assert m.at(80).throughput == pytest.approx(exact.throughput, rel=0.01)
    calm = build_model([front, _tier("db", {"a": sc.database.mean}, {"a": 0.0},
                                     {"a": sc.database.mean})], ["a"], {"a": 1.0}, 0.5, cfg)
    assert calm.kind == "mva"
    ref = mva([[sc.front.mean], [sc.database.mean]], [80], 0.5)
    assert calm.at(80).throughput == pytest.approx(float(ref.throughput[0]), rel=1e-12)
    assert m.at(80).throughput < 0.9 * calm.at(80).throughput   # MVA is optimistic here


def test_a_failing_map_solve_falls_back_to_mva_with_a_flag(monkeypatch):
    import streams.predict.model as model

    sc = scenarios()["bottleneck_switch"]
    cfg = SystemConfig(tiers=("front", "db"))
    front = _tier("front", {"a": sc.front.mean}, {"a": 0.0}, {"a": sc.front.mean})
    db = _tier("db", {"a": sc.database.mean}, {"a": 0.0}, {"a": sc.database.mean},
               bursty=True, process=sc.database.scaled(1.0))
    m = build_model([front, db], ["a"], {"a": 1.0}, 0.5, cfg)

    def broken(*args, **kwargs):
        raise RuntimeError("decomposition: the bursty tier's chain could not be solved")

    monkeypatch.setattr(model, "solve_closed", broken)
    point = m.at(40)
    assert point.model == "mva" and np.isfinite(point.throughput)
    assert any("MAP network failed at population 40" in f for f in m.flags)


def test_a_warm_map_capacity_search_brackets_a_near_answer_in_two_probes():
    """model_capacity from a warm start at the answer: the start meets the SLA and the first
    step (the tolerance, 3%) fails it, which brackets the answer to within the tolerance --
    two solves of the MAP network, where a 12% step took an interpolation and a probe more.
    The answer is the cold search's to within that tolerance."""
    from streams.predict.model import MAP_CAPACITY_TOLERANCE, model_capacity

    sc = scenarios()["bottleneck_switch"]
    procs = [sc.front, sc.database]

    def fresh() -> SystemModel:
        D = np.array([[p.mean] for p in procs])
        return SystemModel(tiers=["front", "db"], classes=["all"], D_mc=D, mix=np.ones(1),
                           servers=np.ones(2), think_time=0.5, sla=np.array([0.3]),
                           processes=[p.scaled(1.0) for p in procs], map_limit=100_000,
                           exact_limit=0)
    cold, limited = model_capacity(fresh())
    assert cold is not None and not limited
    warm = fresh()
    found, limited = model_capacity(warm, cold)
    assert not limited and abs(found - cold) <= MAP_CAPACITY_TOLERANCE * cold + 1
    assert len(warm.solved()) == 2, sorted(warm.solved())
    assert warm.excess(warm.at(found)) <= 0


def test_a_cold_map_capacity_search_projects_its_start_from_the_users_solved():
    """Cold (no last capacity), with the current users solved first as the pipeline does, the
    search starts where the power law through their excess above the floor projects the
    answer and aims by power laws (streams.predict.capacity_search). On docs/accuracy.md's
    system (b) (4/4/8 cores, bursty database; one class) from 20%, 40% and 70% of its capacity
    it solves the decomposition at most as often as the lines from half of MVA's capacity did
    (4, 3, 3 against 4, 4, 4), and finds an exhaustive search's answer to within the
    tolerance."""
    from solvers.paper000 import BURSTY_D0, BURSTY_D1
    from solvers.processes import MAP
    from streams.predict.capacity_search import capacity_search
    from streams.predict.model import CAPACITY_LIMIT, MAP_CAPACITY_TOLERANCE, model_capacity

    def fresh() -> SystemModel:
        return SystemModel(tiers=["web", "app", "db"], classes=["all"],
                           D_mc=np.array([[0.008], [0.010], [0.016]]), mix=np.ones(1),
                           servers=np.array([4.0, 4.0, 8.0]), think_time=1.0,
                           sla=np.array([0.1]), map_limit=100_000,
                           processes=[MAP.exponential(1.0), MAP.exponential(1.0),
                                      MAP(BURSTY_D0, BURSTY_D1).scaled(1.0)])
    ref = fresh()
    exact, _ = capacity_search(lambda n: ref.excess(ref.at(n)), start=200, limit=10_000)
    assert ref.excess_floor() == pytest.approx(0.034 / 0.1 - 1)
    assert ref.excess(ref.at(exact)) <= 0 < ref.excess(ref.at(exact + 1))
    probes, lines = [], []
    for share in (0.2, 0.4, 0.7):
        m, old = fresh(), fresh()
        for model in (m, old):
            model.at(round(share * exact))
        found, limited = model_capacity(m)
        assert not limited and exact - MAP_CAPACITY_TOLERANCE * exact <= found <= exact
        probes.append(len(m.solved()) - 1)
        known = {n: old.excess(p) for n, p in old.solved().items()}
        capacity_search(lambda n: old.excess(old.at(n)), start=(old.mva_capacity()[0] + 1) // 2,
                        limit=CAPACITY_LIMIT, known=known, rel_tol=MAP_CAPACITY_TOLERANCE)
        lines.append(len(old.solved()) - 1)
    assert all(p <= q for p, q in zip(probes, lines)) and sum(probes) < sum(lines), \
        (probes, lines)


def test_a_capacity_search_stops_the_fixed_point_at_the_search_tolerance(monkeypatch):
    """A capacity search's probes need the excess's sign and a value to aim the next one by:
    they stop Marie's fixed point at SEARCH_TOL, taking fewer sweeps than a prediction's
    solve, and the search finds the same capacity to within its tolerance. A prediction at a
    probe's population afterwards is answered from the probe, within 1e-3 of its own solve.
    Network: two bursty tiers (docs/accuracy.md's system (c) shape: 2/4/4 cores)."""
    import streams.predict.model as model
    from estimators.mapfit import fit_map2
    from solvers.paper000 import BURSTY_D0, BURSTY_D1
    from solvers.processes import MAP
    from streams.predict.capacity_search import capacity_search
    from streams.predict.model import (MAP_CAPACITY_TOLERANCE, PREDICTION_TOL, SEARCH_TOL,
                                       model_capacity)

    sweeps: dict[float, list[int]] = {}
    solve = model.solve_decomposed

    def spy(*args, **kwargs):
        res = solve(*args, **kwargs)
        sweeps.setdefault(kwargs["tol"], []).append(res.iterations)
        return res

    monkeypatch.setattr(model, "solve_decomposed", spy)
    procs = [MAP.exponential(1.0), fit_map2(mean=1.0, idc=50, p95=3.0).process,
             MAP(BURSTY_D0, BURSTY_D1).scaled(1.0)]

    def fresh() -> SystemModel:
        return SystemModel(tiers=["web", "app", "db"], classes=["all"],
                           D_mc=np.array([[0.004], [0.008], [0.008]]), mix=np.ones(1),
                           servers=np.array([2.0, 4.0, 4.0]), think_time=1.0,
                           sla=np.array([0.1]), processes=procs, map_limit=100_000,
                           exact_limit=0)
    m = fresh()
    found, limited = model_capacity(m)
    assert not limited and sweeps.keys() == {SEARCH_TOL}
    probes = sorted(m.solved())
    fine = fresh()
    for n in probes:
        own = fine.at(n)                                     # at PREDICTION_TOL
        assert m.at(n) is m.solved()[n]                      # answered from the probe
        assert m.at(n).throughput == pytest.approx(own.throughput, rel=1e-3)
    assert sum(sweeps[SEARCH_TOL]) < sum(sweeps[PREDICTION_TOL]), sweeps
    ref, _ = capacity_search(lambda n: fine.excess(fine.at(n)), start=found, limit=10_000)
    assert ref - MAP_CAPACITY_TOLERANCE * ref - 1 <= found <= ref, (found, ref)


@pytest.mark.slow
def test_per_job_max_cores_reaches_the_decomposition_and_survives_a_round_trip():
    """``SystemConfig.per_job_max_cores`` (default 64) goes through ``build_model`` to every
    decomposition solve: a 32-core bursty tier is the flagged speed-scaled station at 16
    and the per-job one at 32, each the solver's own answer; ``to_dict`` keeps it."""
    from solvers.decomposition import PER_JOB_MAX_CORES, solve_decomposed
    from solvers.processes import MAP

    assert SystemConfig().per_job_max_cores == PER_JOB_MAX_CORES == 64
    sc = scenarios()["bottleneck_switch"]
    unit = [MAP.exponential(1.0), MAP.exponential(1.0), sc.database.scaled(1.0)]
    D = np.array([0.004, 0.016, 32 / 250])

    def model(cores: int) -> SystemModel:
        return SystemModel(tiers=["web", "app", "db"], classes=["a"], D_mc=D[:, None].copy(),
                           mix=np.ones(1), servers=np.array([4.0, 8.0, 32.0]), think_time=1.0,
                           sla=np.array([0.4]), processes=unit, map_limit=10_000,
                           exact_limit=0, per_job_max_cores=cores)

    procs = [p.scaled(float(d)) for p, d in zip(unit, D)]
    for cores in (16, 32):
        m = model(cores)
        ref = solve_decomposed(procs, 258, 1.0, servers=[4, 8, 32], per_job_max_cores=cores)
        assert m.at(258).model == "map-fes"
        assert m.at(258).throughput == pytest.approx(ref.throughput, rel=1e-9)
        assert any("32 cores > per_job_max_cores 16" in f for f in ref.flags) == (cores == 16)
        assert SystemModel.from_dict(m.to_dict()).per_job_max_cores == cores
    assert model(16).at(258).throughput < 0.95 * model(32).at(258).throughput
    cfg = SystemConfig(tiers=("front", "db"), per_job_max_cores=48)
    front = _tier("front", {"a": sc.front.mean}, {"a": 0.0}, {"a": sc.front.mean})
    db = _tier("db", {"a": sc.database.mean}, {"a": 0.0}, {"a": sc.database.mean},
               bursty=True, process=sc.database.scaled(1.0))
    assert build_model([front, db], ["a"], {"a": 1.0}, 0.5, cfg).per_job_max_cores == 48


def test_the_decompositions_caveats_reach_the_model_once_each_with_tier_names():
    """A solver flag names the tier by index; the model names it, says at which population it
    was first met, and keeps one flag per kind (numbers aside) however many probes raise it.
    Little's law off by less than LITTLE_FLAG of N is the approximation's own error, and a
    fixed point's stop in a bounded swing is within 1e-3 of the throughput: both left out."""
    from solvers.decomposition import SWING_FLAG
    from streams.predict.model import LITTLE_FLAG

    m = _model([0.010, 0.005], [1, 1], 1.0, [0.9, 0.1])
    m._note_solver_flags(40, ("tier 1: chain residual 2e-08",
                              "tier 1: the queue fed by tier 0's departures did not solve"), 0.0)
    m._note_solver_flags(80, ("tier 1: chain residual 5e-07", "Little's law off by 0.002 of N",
                              "tier 0: chain residual 3e-08"), 0.5 * LITTLE_FLAG)
    m._note_solver_flags(90, ("Little's law off by 0.03 of N",), 3 * LITTLE_FLAG)
    m._note_solver_flags(92, (f"{SWING_FLAG} of the users held downstream at sweep 21: the "
                              "reference tier's throughput within 0.00042 over the last 10",), 0.0)
    m._note_solver_flags(95, ("Little's law off by 0.05 of N",), 5 * LITTLE_FLAG)
    assert m.flags == ["MAP network at 40 users: t1: chain residual 2e-08",
                       "MAP network at 40 users: t1: the queue fed by t0's departures did not "
                       "solve",
                       "MAP network at 80 users: t0: chain residual 3e-08",
                       "MAP network at 90 users: Little's law off by 0.03 of N"]


@pytest.mark.slow
def test_a_speed_scaled_station_is_flagged_in_the_prediction(tmp_path):
    """a bursty tier of more cores than ``per_job_max_cores`` is one MAP at speed
    ``min(n, c)`` (pessimistic): the pipeline's prediction says so, naming the tier, and does
    not once the limit covers it. The demo's calm shop with its database relabelled as 32
    cores at the same per-core utilization (32 times the demand; the same ``I``). While the
    alert stands on the provisional model (the tier's ``I`` not yet confirmed), that model's
    caveat is in the flags too."""
    import json

    from streams.cli.demo import DemoScenario, demo_config, demo_records
    from streams.cli.embedded import run_embedded
    from streams.core.config import Config

    calm = DemoScenario(system="calm", duration_s=900, users_start=40, users_end=60,
                        steady_s=300, step_s=60, step_users=5, seed=2)
    records = []
    for r in demo_records(calm):
        if r["tier"] == "db":
            r = {**r, "cores": 32}
        records.append(r)
    base = demo_config(calm).systems["calm"]
    flag = "db: 32 cores > per_job_max_cores 16: one MAP at speed min(n, c) (pessimistic)"
    for limit in (16, 32):
        out = tmp_path / str(limit)
        cfg = Config(systems={"calm": dataclasses.replace(base, per_job_max_cores=limit)})
        run_embedded(records, cfg, out)
        preds = [json.loads(line) for line in open(out / "predictions.jsonl")]
        mapped = [p for p in preds if p["model"] == "map-fes"]     # MVA until I is confirmed
        assert mapped, [p["flags"] for p in preds]
        flagged = [p for p in mapped if any(f.endswith(flag) for f in p["flags"])]
        assert len(flagged) == (len(mapped) if limit == 16 else 0), \
            (limit, [p["flags"] for p in mapped])
        # before I is confirmed the alert stands on the provisional model: its caveat too
        provisional = [p for p in preds if any(b.startswith("provisional") for b in
                                               p["alert_basis"])]
        assert provisional and all(
            any(f.startswith("provisional model: ") and f.endswith(flag) for f in p["flags"])
            == (limit == 16) for p in provisional), [p["flags"] for p in provisional]
