"""How close a histogram's quantile (``estimators.histogram``, ``histogram_quantile``'s rule)
comes to the quantile of the observations themselves: the "bucket resolution" of the windows'
measured ``response_time_quantiles_s``.

Per seed, ``--requests`` log-normal response times (median 50 ms, sigma 0.5 / 1.0: a tight
and a wide law) are put into (a) Prometheus client libraries' default buckets (5 ms .. 10 s,
14 bounds), (b) bounds 25% apart (0.005 * 1.25^k up to 10 s, 35 bounds), and
(c) OpenTelemetry exponential buckets of scale 3 and 5 (bounds 9% and 2.2% apart), and
(d) Prometheus native histograms of schema 3 and 0 (bounds 9% and 100% apart; Prometheus 2.x's
rule, ``estimators.native_histogram``: linear from each bucket's own lower bound); the
relative error of p50 / p95 / p99 against the observations' own (``inverted_cdf``) quantile,
worst over seeds, is printed as a Markdown table. Seconds to run.

    python -m bench.accuracy.histogram_quantiles [--seeds 10] [--requests 2000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from estimators.histogram import bucket_quantile, exponential_cumulative
from estimators.native_histogram import native_quantile

PROMETHEUS_DEFAULT = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                      7.5, 10.0]
LEVELS = (0.5, 0.95, 0.99)


def explicit(values: np.ndarray, bounds: list[float]) -> list[tuple[float, float]]:
    v = np.sort(values)
    return [(b, float(np.searchsorted(v, b, side="right"))) for b in bounds] + \
        [(math.inf, float(len(v)))]


def exponential(values: np.ndarray, scale: int) -> list[tuple[float, float]]:
    idx = np.ceil(np.log2(values) * 2.0 ** scale).astype(int) - 1
    offset = int(idx.min())
    counts = np.bincount(idx - offset).tolist()
    return exponential_cumulative(scale, offset, counts)


def native(values: np.ndarray, schema: int) -> tuple[float, list[list[float]]]:
    """A native histogram's populated buckets ``[rule, lower, upper, count]``, as Prometheus'
    API gives them: bucket ``i`` holds ``(2^((i-1) 2^-s), 2^(i 2^-s)]``."""
    idx, counts = np.unique(np.ceil(np.log2(values) * 2.0 ** schema).astype(int),
                            return_counts=True)
    return float(len(values)), [[0, 2.0 ** ((i - 1) * 2.0 ** -schema),
                                 2.0 ** (i * 2.0 ** -schema), float(n)]
                                for i, n in zip(idx.tolist(), counts.tolist())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args()
    dense = [0.005 * 1.25 ** k for k in range(35) if 0.005 * 1.25 ** k <= 10.0]
    layouts = {"Prometheus default buckets (14)": lambda v: explicit(v, PROMETHEUS_DEFAULT),
               f"bounds 25% apart ({len(dense)})": lambda v: explicit(v, dense),
               "exponential, scale 3": lambda v: exponential(v, 3),
               "exponential, scale 5": lambda v: exponential(v, 5),
               "Prometheus native, schema 3": lambda v: native(v, 3),
               "Prometheus native, schema 0": lambda v: native(v, 0)}
    print(f"{args.requests} log-normal response times (median 50 ms), worst |error| over "
          f"{args.seeds} seeds\n")
    print("| buckets | sigma | p50 | p95 | p99 |")
    print("|---|---:|---:|---:|---:|")
    for name, make in layouts.items():
        for sigma in (0.5, 1.0):
            worst = dict.fromkeys(LEVELS, 0.0)
            for seed in range(args.seeds):
                v = np.random.default_rng(seed).lognormal(math.log(0.05), sigma, args.requests)
                buckets = make(v)
                for q in LEVELS:
                    truth = float(np.quantile(v, q, method="inverted_cdf"))
                    got = native_quantile(q, *buckets) if isinstance(buckets, tuple) \
                        else bucket_quantile(q, buckets)
                    worst[q] = max(worst[q], abs(got / truth - 1.0))
            print(f"| {name} | {sigma} | " + " | ".join(f"{100 * worst[q]:.1f}%"
                                                         for q in LEVELS) + " |")


if __name__ == "__main__":
    main()
