"""The open tier's per-job transitions built in arrays (solvers.open.patterns) against the
decomposition's state-by-state builder, and the rate search's reading of the cheaper curve
(streams.predict.capacity_search) in distinct rates solved."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers.decomposition.stations import per_job_states
from solvers.open import m_map_c
from solvers.open.patterns import per_job_transitions
from solvers.paper000 import BURSTY_D0, BURSTY_D1
from solvers.processes import MAP
from streams.predict.capacity_search import rate_bracket

BURSTY = MAP(BURSTY_D0, BURSTY_D1)
THREE = MAP([[-3.0, 1.0, 0.5], [0.2, -1.0, 0.3], [0.1, 0.4, -2.0]],
            [[1.0, 0.3, 0.2], [0.1, 0.3, 0.1], [0.5, 0.5, 0.5]])


def _by_cell(src, dst, rate, up) -> dict[tuple[int, int, bool], float]:
    out: dict[tuple[int, int, bool], float] = {}
    for a, b, r, u in zip(src.tolist(), dst.tolist(), rate.tolist(), up.tolist()):
        out[(a, b, u)] = out.get((a, b, u), 0.0) + r
    return out


@pytest.mark.parametrize("proc, cores", [(BURSTY.scaled(0.02), 2), (BURSTY.scaled(0.02), 8),
                                         (BURSTY.scaled(0.01), 16), (THREE, 2), (THREE, 5),
                                         (BURSTY, 40)])
def test_per_job_transitions_are_the_state_by_state_builders(proc, cores):
    """Every transition, its rate and its kind the same (order aside); 40 cores: the binned
    phase counts, deferred to that builder."""
    ours = _by_cell(*per_job_transitions(proc, cores))
    theirs = _by_cell(*per_job_states(cores + 2, proc, cores)[:4])
    assert ours.keys() == theirs.keys()
    for cell, rate in theirs.items():
        assert ours[cell] == pytest.approx(rate, rel=1e-14)


def test_a_tier_on_the_array_pattern_matches_erlang_c_for_poisson_service():
    """Two phases that are one exponential: the M/MAP/16 queue is M/M/16 (Erlang C)."""
    poisson = MAP([[-2.0, 1.0], [1.0, -2.0]], [[0.5, 0.5], [0.5, 0.5]])
    lam, c = 12.0, 16                  # mean service 1, utilization 0.75
    a = lam
    terms = sum(a**k / math.factorial(k) for k in range(c))
    top = a**c / math.factorial(c) / (1 - a / c)
    wait = top / (terms + top) / (c - a)
    assert m_map_c(lam, poisson, c).wait == pytest.approx(wait, rel=1e-9)


@pytest.mark.parametrize("sla, most", [(0.02, 6), (0.05, 5), (0.1, 5), (0.3, 5)])
def test_rate_search_reads_the_cheaper_curve_between_its_solves(sla, most):
    """An M/M/1 queue, its cheaper curve 20% lower, a rough one 1% lower: two probes of the
    excess, and at most ``most`` distinct rates solved in all (solving the cheaper curve to
    0.4% of the rate instead: 7, 6, 6, 6)."""
    mu, rates, probes = 100.0, set(), []

    def curve(share):
        def f(lam):
            rates.add(lam)
            return share * (1.0 / (mu - lam)) / sla - 1.0 if lam < mu else math.inf
        return f

    full = curve(1.0)

    def excess(lam):
        probes.append(lam)
        return full(lam)

    lo, hi = rate_bracket(excess, sat=mu, floor=1.0 / (mu * sla) - 1.0, span=0.02,
                          cheap=curve(0.8), rough=curve(0.99))
    assert lo <= mu - 1.0 / sla < hi and hi - lo <= 0.02 * lo
    assert len(probes) == 2 and len(rates) <= most
    assert np.isfinite([lo, hi]).all()


@pytest.mark.parametrize("K", [1, 2, 3])
def test_compositions_and_level_sizes_are_the_stations(K):
    """The per-job pattern's phase counts (two phases by ``arange``) and level sizes
    (``C(m + K - 1, K - 1) K`` where every count is resolved, the station's binned grid
    beyond) are :mod:`solvers.decomposition.stations`' own, row for row."""
    from solvers.decomposition.stations import compositions, level_states
    from solvers.open.patterns import _composition_array
    from solvers.open.queues import _states_of_level
    D0 = -3.0 * np.eye(K) + 0.5 * (1.0 - np.eye(K))
    proc = MAP(D0, np.full((K, K), -D0.sum(axis=1)[0] / K))
    for m in range(0, 40):
        assert np.array_equal(_composition_array(m, K),
                              np.array(compositions(m, K), dtype=np.int64).reshape(-1, K))
        assert _states_of_level(proc, m) == level_states(proc, m)
