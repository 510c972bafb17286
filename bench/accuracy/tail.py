"""Accuracy: the service-time p95 from 5 s windows, and the fitted MAP(2)'s p95, against the truth.

For each service process (the design set: Mi et al.'s (2008) three database processes and an
exponential front server, two slow-switching MMPP(2)s, a fast-switching MMPP(2) and two MAP(2)s
with hyperexponential marginals) one seeded M/process/1 run at utilization 0.4 (3 h, Poisson
arrivals, FCFS; ``solvers.simulation.single_queue``) is cut into 5 s monitoring windows. From
the windows alone:

* ``I`` by the IDC-curve fit (:func:`estimators.dispersion.index_of_dispersion_interval`);
* the p95 by Mi et al.'s (2008) busy-time proxy (:func:`estimators.mapfit.service_p95`), by the
  per-window exponential mixture (:func:`estimators.tail.window_mixture_p95`) and by the
  two-phase deconvolution (:func:`estimators.tail.service_tail_p95`, the pipeline's);
* the MAP(2) fitted to (mean, I, p95) with the last two (:func:`estimators.mapfit.fit_map2`),
  and its marginal p95 and SCV.

The truth is the process's own marginal p95 (``MAP.quantile``). A held-out table repeats the
two window estimates on processes and a load the deconvolution was not designed on: eight
new processes (Erlang-2, a renewal H2, the browsing process at 2 ms, an H2 MAP(2) with a rare
far branch, four MMPP(2)s from ``mmpp2_design`` with 0.5 to 25 phase switches per window) at
``U = 0.4`` and the design set at ``U = 0.6``, new seeds. A third cuts one trace of six
processes into windows of 1, 5, 30 and 60 s (the pipeline's last 4,096). A fourth tests the
aggregation-level route to the SCV: for a MAP(2) the work of ``n`` services has
``Var = n m^2 SCV (1 + 2 rho_0 sum_j (1 - j/n) gamma^j)``, for ``n >> 1/(1 - gamma)``
``I m^2 n - K`` with ``K / (I m^2 n) = gamma (I - 1) / ((1 - gamma) I n)`` (``gamma`` the
autocorrelation decay): the index of the window work over 1, 2, 4, 8 windows rises towards ``I``
by that share, and the rise is what would reveal ``gamma`` and so the SCV; the exact shortfall
at one window is printed beside the measured indices. A fifth shows why the windows cannot pin the p95 down
when the phases switch within a window: the range of p95 that MAP(2)s with the browsing
database's mean and ``I`` reach, and the third cumulant of the counts in 5 s of busy time,
exact against its sample value from six seeded 3 h traces of the process alone. The last asks
what the p95 is worth on Mi et al.'s (2008) browsing model: the MAP(2) fitted to the pipeline's
estimates (``bench/accuracy/paper000.py``, docs/accuracy.md section 1) with each p95, and with
the true ``I``, against the exact MAP network with the true processes (itself within 0.6% /
3.1% of the simulated system), N = 25..150.

Run from the repository root: ``python -m bench.accuracy.tail [--markdown]`` (~5 min).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.linalg import expm

from estimators.dispersion import index_of_dispersion_interval
from estimators.mapfit import fit_map2, service_p95
from estimators.tail import service_tail_p95, window_mixture_p95
from solvers.mapqn import solve_closed
from solvers.paper000 import THINK_TIME, scenarios
from solvers.processes import MAP
from solvers.simulation.mmpp import mmpp2, mmpp2_design
from solvers.simulation.single_queue import monitor_windows, mtrace1
from bench.tables import Table

WINDOW_S = 5.0
HOURS = 3.0
UTILIZATION = 0.4


def hyperexp_map2(scv: float, idc: float, p: float, mean: float) -> MAP:
    """H2 marginal (slow branch w.p. ``p``), decay set so that ``I = idc``."""
    gamma = 1.0 - (scv - 1.0) / (idc - 1.0)
    t = math.sqrt((scv - 1.0) / 2.0)
    m = np.array([1.0 - t * math.sqrt(p / (1.0 - p)), 1.0 + t * math.sqrt((1.0 - p) / p)])
    jump = (1.0 - gamma) * np.outer(np.ones(2), [1.0 - p, p]) + gamma * np.eye(2)
    return MAP(-np.diag(1.0 / m) / mean, jump / m[:, None] / mean)


def processes() -> dict[str, tuple[MAP, str]]:
    sc = scenarios()
    return {
        "browsing db": (sc["bottleneck_switch"].database, "Mi et al. (2008)"),
        "shopping db": (sc["bursty_no_switch"].database, "Mi et al. (2008)"),
        "ordering db": (sc["not_bursty"].database, "Mi et al. (2008)"),
        "front (exponential)": (sc["bottleneck_switch"].front, "Mi et al. (2008)"),
        "MMPP(2) slow, I~640": (mmpp2(2.0, 0.25, 0.0005, 0.001).scaled(0.010), "new"),
        "MMPP(2) slow, I~107": (mmpp2(1.5, 0.4, 0.0004, 0.002).scaled(0.004), "new"),
        "MMPP(2) fast, I~38": (mmpp2(5.0, 0.5, 0.05, 0.05).scaled(0.003), "new"),
        "H2 MAP(2) I=30": (hyperexp_map2(3.0, 30.0, 0.1, 0.002), "new"),
        "H2 MAP(2) I=300": (hyperexp_map2(10.0, 300.0, 0.02, 0.005), "new"),
    }


def held_out() -> dict[str, MAP]:
    """Processes the two-phase deconvolution was not designed on."""
    erlang = 2.0 / 0.005
    return {
        "Erlang-2, 5 ms": MAP([[-erlang, erlang], [0.0, -erlang]], [[0.0, 0.0], [erlang, 0.0]]),
        "H2 renewal, SCV 5": hyperexp_map2(5.0, 5.0, 0.1, 0.003),
        "browsing process at 2 ms": scenarios()["bottleneck_switch"].database.scaled(0.002),
        "H2 MAP(2) SCV 6, I=100, 5% branch": hyperexp_map2(6.0, 100.0, 0.05, 0.004),
        "MMPP(2) alpha 0.01, I 50": mmpp2_design(0.01, 50.0, 0.5).scaled(0.004),
        "MMPP(2) alpha 0.001, I 100": mmpp2_design(0.001, 100.0, 0.7).scaled(0.004),
        "MMPP(2) alpha 0.05, I 20": mmpp2_design(0.05, 20.0, 0.5).scaled(0.004),
        "MMPP(2) alpha 0.003, I 300": mmpp2_design(0.003, 300.0, 0.3).scaled(0.004),
    }


def windows_of(process: MAP, seed: int, utilization: float = UTILIZATION
               ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    jobs = int(HOURS * 3600.0 * utilization / process.mean)
    trace = mtrace1(utilization / process.mean, process.sample(jobs, rng), rng)
    win = monitor_windows(trace, WINDOW_S)
    return win.busy_time, win.completions.sum(axis=1)


def pct(x: float) -> str:
    return f"{100.0 * x:+.1f}%"


def accuracy_table() -> tuple[Table, list[tuple[str, float, float]]]:
    t = Table(f"Service-time p95 from {HOURS:g} h of {WINDOW_S:g} s windows (M/process/1, "
              f"U = {UTILIZATION}) against the process's own p95; fits on (mean, I, p95)",
              ["process", "true I", "true SCV", "true p95 (ms)", "I (windows)",
               "busy-time p95 (ms)", "err", "window mixture (ms)", "err", "two-phase (ms)",
               "err", "fit p95 / SCV, mixture", "fit p95 / SCV, two-phase",
               "err fit p95 (two-phase)"])
    errors = []
    for i, (name, (proc, _)) in enumerate(processes().items()):
        busy, done = windows_of(proc, seed=100 + i)
        true = float(proc.quantile(0.95))
        mean = float(busy.sum() / done.sum())
        idc = index_of_dispersion_interval(busy / WINDOW_S, done, WINDOW_S).value
        proxy = service_p95(busy, done).p95
        mix, new = window_mixture_p95(busy, done).p95, service_tail_p95(busy, done).p95
        f_mix, f_new = fit_map2(mean, idc, mix), fit_map2(mean, idc, new)
        errors.append((name, new / true - 1.0, mix / true - 1.0))
        t.add(name, f"{proc.idc:.1f}", f"{proc.scv:.2f}", f"{true * 1e3:.2f}", f"{idc:.1f}",
              f"{proxy * 1e3:.2f}", pct(proxy / true - 1.0), f"{mix * 1e3:.2f}",
              pct(mix / true - 1.0), f"{new * 1e3:.2f}", pct(new / true - 1.0),
              f"{f_mix.p95 * 1e3:.2f} / {f_mix.scv:.1f}", f"{f_new.p95 * 1e3:.2f} / {f_new.scv:.1f}",
              pct(f_new.p95 / true - 1.0))
    return t, errors


def held_out_table() -> tuple[Table, list[tuple[str, float, float]]]:
    t = Table(f"Held out: {HOURS:g} h of {WINDOW_S:g} s windows, new processes at U = 0.4 and "
              "the design set at U = 0.6 (new seeds); error of the p95 against the truth",
              ["process", "U", "true I", "true SCV", "true p95 (ms)", "completions / window",
               "window mixture", "two-phase", "two-phase a / b (means)"])
    cases = [(name, proc, 0.4, 400 + i) for i, (name, proc) in enumerate(held_out().items())]
    cases += [(name, proc, 0.6, 300 + i)
              for i, (name, (proc, _)) in enumerate(processes().items())]
    errors = []
    for name, proc, util, seed in cases:
        busy, done = windows_of(proc, seed, util)
        true = float(proc.quantile(0.95))
        mix, new = window_mixture_p95(busy, done), service_tail_p95(busy, done)
        errors.append((f"{name} (U {util})", new.p95 / true - 1.0, mix.p95 / true - 1.0))
        t.add(name, f"{util}", f"{proc.idc:.1f}", f"{proc.scv:.2f}", f"{true * 1e3:.2f}",
              f"{done.mean():.0f}", pct(mix.p95 / true - 1.0), pct(new.p95 / true - 1.0),
              f"{new.fast_mean / new.mean:.2f} / {new.slow_mean / new.mean:.2f}")
    return t, errors


WINDOW_LENGTHS_S = (1.0, 5.0, 30.0, 60.0)
HISTORY = 4096                   # windows the pipeline keeps (streams/core/tier.py)


def window_length_table() -> Table:
    """One 3 h trace per process (U = 0.4, seed 7) cut into windows of each length; the last
    ``HISTORY`` windows, as the pipeline keeps them."""
    t = Table(f"Window length: one {HOURS:g} h trace per process (U = {UTILIZATION}) cut into "
              f"windows of 1, 5, 30 and 60 s, last {HISTORY} windows; p95 error, window "
              "mixture / two-phase", ["process", *(f"{w:g} s" for w in WINDOW_LENGTHS_S)])
    chosen = ("browsing db", "shopping db", "front (exponential)", "MMPP(2) slow, I~640",
              "MMPP(2) fast, I~38", "H2 MAP(2) I=300")
    procs = processes()
    for name in chosen:
        proc = procs[name][0]
        rng = np.random.default_rng(7)
        jobs = int(HOURS * 3600.0 * UTILIZATION / proc.mean)
        trace = mtrace1(UTILIZATION / proc.mean, proc.sample(jobs, rng), rng)
        true = float(proc.quantile(0.95))
        cells = []
        for length in WINDOW_LENGTHS_S:
            win = monitor_windows(trace, length)
            busy = win.busy_time[-HISTORY:]
            done = win.completions.sum(axis=1)[-HISTORY:]
            mix, new = window_mixture_p95(busy, done).p95, service_tail_p95(busy, done).p95
            cells.append(f"{pct(mix / true - 1.0)} / {pct(new / true - 1.0)}")
        t.add(name, *cells)
    return t


def decay(process: MAP) -> float:
    """``gamma``: the eigenvalue of ``P = (-D0)^-1 D1`` other than 1 (0 for order 1)."""
    p = np.linalg.solve(-np.asarray(process.D0), np.asarray(process.D1))
    rest = [float(e.real) for e in np.linalg.eigvals(p) if abs(e - 1.0) > 1e-9]
    return rest[0] if rest else 0.0


def work_index(process: MAP, gamma: float, n: float) -> float:
    """``Var(S_1 + ... + S_n) / (n m^2)`` of a MAP(2): ``rho_j = rho_0 gamma^j`` with
    ``rho_0 = (SCV - 1) / (2 SCV)`` (see :mod:`estimators.mapfit`), summed in closed form."""
    scv = process.scv
    if abs(gamma) < 1e-12:
        return scv
    rho0 = (scv - 1.0) / (2.0 * scv)
    lagged = gamma / (1.0 - gamma) - gamma * (1.0 - gamma**n) / (n * (1.0 - gamma) ** 2)
    return scv * (1.0 + 2.0 * rho0 * lagged)


def aggregation_table() -> Table:
    """The index of the window work ``sum (B - m n)^2 / (m^2 sum n)`` over 1, 2, 4, 8
    consecutive windows, beside the share ``K / (I m^2 n)`` by which it should rise."""
    t = Table("Can the spread across aggregation levels give the SCV? Index of the window work "
              f"over L consecutive {WINDOW_S:g} s windows (design set, U = {UTILIZATION}) and the "
              "rise towards I a MAP(2) predicts, K / (I m^2 n)",
              ["process", "true I", "services per correlation length 1/(1-gamma)",
               "completions / window", "MAP(2): L = 1 below I by", "L = 1", "L = 2", "L = 4",
               "L = 8"])
    for i, (name, (proc, _)) in enumerate(processes().items()):
        busy, done = windows_of(proc, seed=100 + i)
        gamma = decay(proc)
        mean = float(busy.sum() / done.sum())
        levels = []
        for width in (1, 2, 4, 8):
            k = busy.size // width * width
            b = busy[:k].reshape(-1, width).sum(axis=1)
            n = done[:k].reshape(-1, width).sum(axis=1)
            levels.append(float(np.mean((b - mean * n) ** 2) / (mean**2 * n.mean())))
        rise = 1.0 - work_index(proc, gamma, float(done.mean())) / proc.idc
        t.add(name, f"{proc.idc:.1f}", f"{1.0 / (1.0 - gamma):.1f}", f"{done.mean():.0f}",
              f"{rise:.1%}", *(f"{x:.1f}" for x in levels))
    return t


def count_third_cumulant(process: MAP, t: float) -> tuple[float, float]:
    """Exact mean and third cumulant of the completions in ``t`` of busy time: factorial
    moments from the blocks of ``expm`` of the bidiagonal block matrix ``[Q D1; Q D1; ...]``
    (the Taylor coefficients of ``exp((Q + eps D1) t)`` in ``eps``)."""
    d0, d1 = process.D0, process.D1
    n = d0.shape[0]
    a = np.zeros((4 * n, 4 * n))
    for k in range(4):
        a[k * n:(k + 1) * n, k * n:(k + 1) * n] = d0 + d1
        if k < 3:
            a[k * n:(k + 1) * n, (k + 1) * n:(k + 2) * n] = d1
    e = expm(a * t)
    f = [float(process.theta @ e[:n, k * n:(k + 1) * n] @ np.ones(n)) * math.factorial(k)
         for k in (1, 2, 3)]
    m1, m2, m3 = f[0], f[1] + f[0], f[2] + 3.0 * f[1] + f[0]
    return m1, m3 - 3.0 * m1 * m2 + 2.0 * m1**3


def identifiability_table() -> Table:
    proc = scenarios()["bottleneck_switch"].database
    mean, idc = proc.mean, proc.idc
    met = [q for q in np.linspace(0.2, 8.0, 40) if fit_map2(mean, idc, q * mean).met]
    t = Table("Why the windows cannot pin the browsing database's p95 down (true: mean 4 ms, "
              f"I {idc:.1f}, p95 {proc.quantile(0.95) * 1e3:.2f} ms)", ["statistic", "value"])
    t.add("p95 of MAP(2)s with the same mean and I (fit_map2 meets the target)",
          f"{min(met) * mean * 1e3:.1f} .. {max(met) * mean * 1e3:.1f} ms")
    _, exact = count_third_cumulant(proc, WINDOW_S)
    samples = []
    for seed in range(6):
        x = proc.sample(int(HOURS * 3600.0 / mean * 0.4), np.random.default_rng(seed))
        counts = np.diff(np.searchsorted(np.cumsum(x), np.arange(0.0, x.sum(), WINDOW_S)))
        samples.append(float(np.mean((counts - counts.mean()) ** 3)))
    t.add(f"third cumulant of the counts in {WINDOW_S:g} s of busy time, exact", f"{exact:.3g}")
    t.add(f"  sample, 6 seeds x {HOURS * 0.4:g} h of busy time (min .. max)",
          f"{min(samples):.3g} .. {max(samples):.3g} ({min(samples) / exact - 1.0:+.0%} .. "
          f"{max(samples) / exact - 1.0:+.0%})")
    return t


#: the pipeline's estimates on Mi et al.'s (2008) browsing run (docs/accuracy.md section 1)
PIPELINE_FRONT_S, PIPELINE_DB_MEAN_S, PIPELINE_IDC = 0.0043, 0.00403, 180.6
PIPELINE_P95_S = {"busy-time proxy": 0.00766, "window mixture": 0.01463, "two-phase": 0.02616}
POPULATIONS = (25, 50, 75, 100, 125, 150)


def what_if_table() -> Table:
    sc = scenarios()["bottleneck_switch"]
    truth = [solve_closed(sc.processes, n, THINK_TIME) for n in POPULATIONS]
    true_p95 = float(sc.database.quantile(0.95))
    t = Table("Browsing model (Mi et al. 2008, Fig. 9) with the fitted database MAP(2) against the exact "
              "MAP network with the true processes, N = 25..150: max / mean |error|",
              ["I", "p95", "p95 (ms)", "fit SCV", "X max / mean", "R max / mean"])
    for idc_name, idc in (("pipeline 180.6", PIPELINE_IDC), (f"true {sc.database.idc:.1f}",
                                                              sc.database.idc)):
        for p95_name, p95 in (*PIPELINE_P95_S.items(), ("true", true_p95)):
            fit = fit_map2(PIPELINE_DB_MEAN_S, idc, p95)
            ex, er = [], []
            for n, exact in zip(POPULATIONS, truth):
                got = solve_closed((MAP.exponential(PIPELINE_FRONT_S), fit.process), n,
                                   THINK_TIME)
                ex.append(abs(got.throughput / exact.throughput - 1.0))
                er.append(abs(got.response_time / exact.response_time - 1.0))
            t.add(idc_name, p95_name, f"{p95 * 1e3:.2f}", f"{fit.scv:.1f}",
                  f"{max(ex):.1%} / {np.mean(ex):.1%}", f"{max(er):.1%} / {np.mean(er):.1%}")
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="markdown tables")
    args = parser.parse_args()
    started = time.perf_counter()
    table, errors = accuracy_table()
    print(table.render(args.markdown))
    held, held_errors = held_out_table()
    print(held.render(args.markdown))
    print(window_length_table().render(args.markdown))
    print(aggregation_table().render(args.markdown))
    print(identifiability_table().render(args.markdown))
    print(what_if_table().render(args.markdown))
    for label, errs in (("design set", errors), ("held out", held_errors)):
        new = [n for n, e, _ in errs if abs(e) <= 0.15]
        mix = [n for n, _, e in errs if abs(e) <= 0.15]
        print(f"{label}: within 15% of the true p95: two-phase {len(new)} of {len(errs)}, "
              f"window mixture {len(mix)} of {len(errs)}; worst |err| two-phase "
              f"{max(abs(e) for _, e, _ in errs):.1%}, window mixture "
              f"{max(abs(e) for _, _, e in errs):.1%}")
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
