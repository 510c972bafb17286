"""The low-load benches' truths: search's heavy tail at a PS db under a pool
(``bench.accuracy.pool_ps --scv``) and a db's work for no request
(``bench/accuracy/low_load_mix.py --background``)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from bench.accuracy import pool_ps


def _low_load_mix():
    path = Path(__file__).resolve().parents[1] / "bench" / "accuracy" / "low_load_mix.py"
    spec = importlib.util.spec_from_file_location("low_load_mix", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_search_at_the_db_is_drawn_with_its_scv_and_every_other_draw_as_numpys():
    heavy = pool_ps._HeavyRng(7, 5.0)
    x = np.array([heavy.exponential(pool_ps.D[1, 3]) for _ in range(40_000)])
    assert x.mean() == pytest.approx(pool_ps.D[1, 3], rel=0.05)
    assert x.var() / x.mean() ** 2 == pytest.approx(5.0, rel=0.15)
    plain, ref = pool_ps._HeavyRng(3, 5.0), np.random.default_rng(3)
    assert [plain.exponential(0.006) for _ in range(5)] == \
        [ref.exponential(0.006) for _ in range(5)]
    assert plain.choice(4, p=pool_ps.MIX) == ref.choice(4, p=pool_ps.MIX)


def test_scv_1_simulates_as_before():
    a = pool_ps.simulate(np.array([False, True]), 5, 300, 1)
    b = pool_ps.simulate(np.array([False, True]), 5, 300, 1, 1.0)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    heavy = pool_ps.simulate(np.array([False, True]), 5, 300, 1, 4.0)
    assert not np.array_equal(a[1], heavy[1])


def test_a_db_background_slows_every_db_service_and_none_at_the_app():
    llm = _low_load_mix()
    plain, busy = llm.network(4, 1.0), llm.network(4, 1.0, background=0.2)
    assert busy.queues[1].service == pytest.approx([d / 0.8 for d in llm.DB_S])
    assert busy.queues[0].service == plain.queues[0].service
