"""Benchmark: MAP(2) fitting from mean, I and p95 (Mi et al. 2008, section 4.1).

Prints the time of ``fit_map2`` (median over targets of the median of repeated fits, in ms),
the time of the service-time p95 estimate that feeds it (``estimators.tail.service_tail_p95``,
beside the window mixture ``window_mixture_p95`` and Mi et al.'s (2008) busy-time proxy
``service_p95``, on 4,096 windows: the pipeline's history)
and a round-trip accuracy table: targets (mean, I, p95) computed from known MAP(2)s, the fit's
achieved I and p95 and their relative errors. Numbers, not pass/fail.

Run from the repository root: ``python -m bench.speed.mapfit``.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

from estimators.mapfit import fit_map2, service_p95
from estimators.tail import service_tail_p95, window_mixture_p95
from solvers.processes import MAP

REPEATS = 7


def hyperexp_map2(scv: float, idc: float, p: float, mean: float = 1.0) -> MAP:
    """H2 marginal (slow branch w.p. ``p``) with decay ``gamma`` set so that ``I = idc``."""
    gamma = 1.0 - (scv - 1.0) / (idc - 1.0)
    t = math.sqrt((scv - 1.0) / 2.0)
    m = np.array([1.0 - t * math.sqrt(p / (1.0 - p)), 1.0 + t * math.sqrt((1.0 - p) / p)])
    jump = (1.0 - gamma) * np.outer(np.ones(2), [1.0 - p, p]) + gamma * np.eye(2)
    return MAP(-np.diag(1.0 / m) / mean, jump / m[:, None] / mean)


def mmpp2(fast: float, slow: float, switch: tuple[float, float], mean: float) -> MAP:
    """Service rate ``fast`` or ``slow`` by phase, phases switching at the given rates."""
    d0 = np.array([[-fast - switch[0], switch[0]], [switch[1], -slow - switch[1]]])
    return MAP(d0, np.diag([fast, slow])).scaled(mean)


def erlang2_like(mean: float) -> MAP:
    """A hypoexponential renewal MAP(2) (SCV 0.66)."""
    return MAP([[-2.5, 2.5 * 0.8], [0.0, -1.6]], [[0.5, 0.0], [1.6, 0.0]]).scaled(mean)


SOURCES: list[tuple[str, MAP]] = [
    ("exponential", MAP.exponential(0.01)),
    ("hypo SCV 0.66", erlang2_like(0.02)),
    ("H2 I=1.5", hyperexp_map2(1.3, 1.5, 0.3, 0.05)),
    ("H2 I=5", hyperexp_map2(2.0, 5.0, 0.2)),
    ("H2 I=30", hyperexp_map2(3.0, 30.0, 0.1, 0.2)),
    ("H2 I=100", hyperexp_map2(5.0, 100.0, 0.05)),
    ("H2 I=300", hyperexp_map2(10.0, 300.0, 0.02, 3.0)),
    ("H2 I=1000", hyperexp_map2(20.0, 1000.0, 0.01, 0.004)),
    ("H2 I=1000 SCV 80", hyperexp_map2(80.0, 1000.0, 0.02)),
    ("MMPP I~40", mmpp2(5.0, 0.5, (0.05, 0.05), 0.3)),
    ("MMPP I~540", mmpp2(20.0, 0.2, (0.002, 0.01), 1.0)),
]
UNREACHABLE: list[tuple[str, float, float, float]] = [
    ("I=0.5, p95=6m", 1.0, 0.5, 6.0),
    ("I=3, p95=1m", 1.0, 3.0, 1.0),
    ("I=1e4, p95=50m", 1.0, 1e4, 50.0),
]


def timed_fit(mean: float, idc: float, p95: float) -> tuple[float, object]:
    times = []
    fit = None
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fit = fit_map2(mean, idc, p95)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, fit


def timed_p95(history: int = 4096) -> list[float]:
    """Median time (ms) of the three p95 estimates on ``history`` windows of a bursty tier."""
    rng = np.random.default_rng(7)
    busy = rng.gamma(0.5, 2.0, history)                 # skewed busy times, s
    done = rng.poisson(400.0 * busy / busy.mean())
    out = []
    for estimate in (service_tail_p95, window_mixture_p95, service_p95):
        times = []
        for _ in range(REPEATS * 3):
            t0 = time.perf_counter()
            estimate(busy, done)
            times.append(time.perf_counter() - t0)
        out.append(statistics.median(times) * 1e3)
    return out


def main() -> None:
    tail_ms, mixture_ms, proxy_ms = timed_p95()
    print(f"p95 estimate at history 4096: service_tail_p95 {tail_ms:.2f} ms, "
          f"window_mixture_p95 {mixture_ms:.2f} ms, service_p95 (busy-time proxy) "
          f"{proxy_ms:.2f} ms")
    rows = []
    for name, src in SOURCES:
        mean, idc, p95 = src.mean, src.idc, src.quantile(0.95)
        ms, fit = timed_fit(mean, idc, p95)
        rows.append((name, src.scv, idc, p95 / mean, fit, ms))
    for name, mean, idc, q in UNREACHABLE:
        ms, fit = timed_fit(mean, idc, q * mean)
        rows.append((name, None, idc, q, fit, ms))  # target only, no source process
    times = [r[-1] for r in rows]
    bursty = [r[-1] for r in rows if r[4].process.order == 2]
    print(f"fit_map2 time: median {statistics.median(times):.1f} ms over {len(times)} targets "
          f"(order-2 fits: median {statistics.median(bursty):.1f} ms, max {max(bursty):.1f} ms; "
          f"median of {REPEATS} repeats each)")
    print()
    head = (f"{'source':<18} {'SCV':>7} {'I':>9} {'p95/m':>6} | {'order':>5} {'fit SCV':>8} "
            f"{'fit I':>9} {'p95/m':>6} {'rho1':>6} {'gamma':>7} {'err I':>8} {'err p95':>8} "
            f"{'ms':>5}  flag")
    print(head)
    print("-" * len(head))
    for name, scv, idc, q, fit, ms in rows:
        err_i = fit.idc / idc - 1.0
        err_p = fit.p95 / (q * fit.mean) - 1.0
        source_scv = "      -" if scv is None else f"{scv:7.3f}"
        print(f"{name:<18} {source_scv} {idc:9.3f} {q:6.3f} | {fit.process.order:5d} "
              f"{fit.scv:8.3f} {fit.idc:9.3f} {fit.p95 / fit.mean:6.3f} {fit.acf1:6.3f} "
              f"{fit.decay:7.4f} {err_i:+8.1e} {err_p:+8.1e} {ms:5.1f}  {fit.flag or '-'}")


if __name__ == "__main__":
    main()
