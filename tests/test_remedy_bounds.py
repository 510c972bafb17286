"""The asymptotic bound that refuses a remediation candidate unsolved
(:mod:`streams.predict.remedy_bounds`): sound against exact MVA, and the remediation's answer
unchanged by it, in fewer solves."""

from __future__ import annotations

import numpy as np

import streams.predict.whatif as whatif
from solvers.mva import mva
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from streams.predict.model import SystemModel, model_capacity
from streams.predict.remedy_bounds import BOUND_MARGIN, beyond_bound
from streams.predict.whatif import remediate


def one_class(D, servers, Z, sla) -> SystemModel:
    D = np.asarray(D, dtype=float)
    return SystemModel(tiers=[f"t{i}" for i in range(D.size)], classes=["a"], D_mc=D[:, None],
                       mix=np.array([1.0]), servers=np.asarray(servers, dtype=float),
                       think_time=Z, sla=np.array([sla]), processes=None, map_limit=1000)


def test_one_queue_closed_form():
    """One single-core tier, no think time: ``R(N) = N D`` exactly, and the bound is
    ``N D`` too: refused exactly when ``N D`` exceeds the margin times the SLA."""
    D, sla = 0.1, 1.0
    for n in range(1, 60):
        assert beyond_bound(one_class([D], [1], 0.0, sla), n) == (n * D > BOUND_MARGIN * sla)


def test_refused_candidates_are_over_their_sla_by_exact_mva():
    """Seeded random one-class networks (1-4 tiers, 1-4 cores, think time 0-2 s): every
    population the bound refuses is over the SLA by exact MVA (the bound is sound), and
    the bound refuses some."""
    rng = np.random.default_rng(7)
    refused = 0
    for _ in range(30):
        M = int(rng.integers(1, 5))
        D = rng.uniform(0.002, 0.05, M)
        servers = rng.choice([1, 2, 4], M).astype(float)
        Z, sla = float(rng.uniform(0.0, 2.0)), float(rng.uniform(0.05, 0.5))
        m = one_class(D, servers, Z, sla)
        for n in (5, 40, 120):
            if beyond_bound(m, n):
                refused += 1
                r = mva(D[:, None], [n], [Z], servers)
                assert float(r.response_time[0]) > sla, (D, servers, Z, sla, n)
    assert refused > 10


def test_a_class_without_sla_or_a_pool_is_never_refused():
    m = one_class([0.1], [1], 0.0, np.inf)
    assert not beyond_bound(m, 10_000)
    two = SystemModel(tiers=["t0"], classes=["a", "b"], D_mc=np.array([[0.1, 0.1]]),
                      mix=np.array([0.5, 0.5]), servers=np.array([1.0]), think_time=0.0,
                      sla=np.array([1.0, np.inf]), processes=None, map_limit=1000)
    assert not beyond_bound(two, 10_000)


def test_remediation_gives_the_same_remedies_in_fewer_solves(monkeypatch):
    """Seeded random three-tier networks at 1.5-6x their capacity: the remedies, their
    capacities and what is unreachable are those of the search without the bound; the
    solves are never more, and fewer where a tier cannot fix the breach."""
    rng = np.random.default_rng(3)
    fewer = 0
    for _ in range(12):
        D = rng.uniform(0.004, 0.03, 3)
        servers = rng.choice([1, 2, 4], 3).astype(float)
        m = one_class(D, servers, 1.0, 0.2)
        cap, _ = model_capacity(m)
        required = int(cap * float(rng.choice([1.5, 3.0, 6.0]))) + 1
        bounded = remediate(one_class(D, servers, 1.0, 0.2), required, cap)
        with monkeypatch.context() as patch:
            patch.setattr(whatif, "beyond_bound", lambda model, users: False)
            plain = remediate(one_class(D, servers, 1.0, 0.2), required, cap)
        assert bounded.to_record()["actions"] == plain.to_record()["actions"]
        assert bounded.unreachable == plain.unreachable
        assert bounded.solves <= plain.solves
        fewer += bounded.solves < plain.solves
    assert fewer >= 3


def test_a_hopeless_bursty_breach_costs_no_candidate_solve():
    """The multi-core bursty shop far past what any single tier's change can carry: every
    cores and speed candidate is refused by the bound, so the search solves no candidate (the
    decomposition's most generous candidates, the costliest, are never solved)."""
    m = SystemModel(      # web 4 cores 8 ms, app 4 cores 10 ms, db 8 cores 16 ms (bursty)
        tiers=["web", "app", "db"], classes=["browse", "buy"],
        D_mc=np.array([[0.008, 0.008], [0.010, 0.010], [0.012, 0.032]]),
        mix=np.array([0.8, 0.2]), servers=np.array([4.0, 4.0, 8.0]), think_time=1.0,
        sla=np.array([0.1, 0.1]),
        processes=[MAP.exponential(1.0), MAP.exponential(1.0), MAP(BURSTY_D0, BURSTY_D1)],
        map_limit=10_000)
    rem = remediate(m, 3000, 400)
    assert rem.solves == 0            # the solve at the required users is the model's own
    assert [r.action.kind for r in rem.remedies] == ["admission"]
    assert {u.split(" ")[0] for u in rem.unreachable} == {"cores", "cpu_speed", "replicate"}


def test_a_class_whose_own_service_is_over_its_sla_is_refused_at_any_population():
    """``sum_m D_{m,c} > sla_c``: no population or number of cores brings the class within
    its SLA (exact MVA at one user, on 64 cores, is its demand); a faster CPU can."""
    m = one_class([0.2, 0.15], [64, 64], 5.0, 0.3)
    assert beyond_bound(m, 1)
    assert float(mva(np.array([[0.2], [0.15]]), [1], [5.0], [64, 64]).response_time[0]) > 0.3
    assert not beyond_bound(one_class([0.1, 0.075], [64, 64], 5.0, 0.3), 1)
