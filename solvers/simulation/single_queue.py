"""A single-server FCFS queue, simulated exactly, and its coarse monitoring view.

``fcfs_queue`` applies Lindley's recursion in closed, vectorised form: with cumulative service
``S_i = s_1 + ... + s_i`` the departure of job ``i`` is
``d_i = S_i + max_{j<=i} (a_j - S_{j-1})``.
``mtrace1`` is the M/Trace/1 queue of Mi et al. (2008), Table 1: Poisson arrivals, service times
taken in order from a trace (e.g. ``MAP.sample``). ``monitor_windows`` turns a queue trace into
what a monitoring system reports per window of ``T`` seconds: the utilization ``U_k`` (busy time
``B_k`` divided by ``T``), completions ``n_k`` per class and the mean response time per class.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["QueueTrace", "Windows", "fcfs_queue", "mtrace1", "monitor_windows"]


@dataclass(frozen=True)
class QueueTrace:
    """Per-job times of a single-server FCFS queue, in arrival order (departures are sorted)."""

    arrivals: np.ndarray
    starts: np.ndarray
    departures: np.ndarray
    classes: np.ndarray  # integer class index per job

    @property
    def service(self) -> np.ndarray:
        return self.departures - self.starts

    @property
    def response(self) -> np.ndarray:
        return self.departures - self.arrivals


@dataclass(frozen=True)
class Windows:
    """Monitoring windows ``k = 0..K-1`` of length ``window_s``.

    ``utilization[k] = B_k / T``; ``completions[k, c]`` and ``response_time[k, c]`` per class
    (``response_time`` is 0 where a class completed nothing in the window); ``busy_time[k] = B_k``.
    """

    window_s: float
    utilization: np.ndarray
    busy_time: np.ndarray
    completions: np.ndarray
    response_time: np.ndarray


def checked_jobs(arrivals: np.ndarray, service: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``arrivals`` (1-D, finite, sorted) and ``service`` (same shape, finite, >= 0) as float
    arrays; ``ValueError`` naming the field otherwise."""
    a = np.asarray(arrivals, dtype=float)
    s = np.asarray(service, dtype=float)
    if a.ndim != 1 or s.shape != a.shape:
        raise ValueError(f"service: must match arrivals' shape {a.shape}, got {s.shape}")
    if a.size and (np.any(np.diff(a) < 0) or not np.all(np.isfinite(a))):
        raise ValueError("arrivals: must be finite and sorted")
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError("service: must be finite and >= 0")
    return a, s


def fcfs_queue(arrivals: np.ndarray, service: np.ndarray,
               classes: np.ndarray | None = None) -> QueueTrace:
    """Exact single-server FCFS queue for sorted ``arrivals`` and per-job ``service`` times."""
    a, s = checked_jobs(arrivals, service)
    cls = np.zeros(a.size, dtype=int) if classes is None else np.asarray(classes, dtype=int)
    if cls.shape != a.shape:
        raise ValueError(f"classes: must match arrivals' shape {a.shape}, got {cls.shape}")
    cum = np.cumsum(s)
    departures = cum + np.maximum.accumulate(a - (cum - s))
    return QueueTrace(a, departures - s, departures, cls)


def mtrace1(arrival_rate: float, service: np.ndarray, rng: np.random.Generator) -> QueueTrace:
    """M/Trace/1 (Mi et al. 2008, Table 1): Poisson arrivals at ``arrival_rate``, FCFS service
    ``service``."""
    if not arrival_rate > 0:
        raise ValueError(f"arrival_rate: must be > 0, got {arrival_rate}")
    s = np.asarray(service, dtype=float)
    arrivals = np.cumsum(rng.exponential(1.0 / arrival_rate, size=s.size))
    return fcfs_queue(arrivals, s)


def _busy_until(trace: QueueTrace, t: np.ndarray) -> np.ndarray:
    """Cumulative busy time ``B(t)`` of the server at times ``t`` (service intervals are disjoint)."""
    service = trace.service
    cum = np.concatenate([[0.0], np.cumsum(service)])
    done = np.searchsorted(trace.departures, t, side="right")  # jobs fully served by t
    partial = np.zeros_like(t)
    inside = done < trace.starts.size
    idx = done[inside]
    partial[inside] = np.clip(t[inside] - trace.starts[idx], 0.0, service[idx])
    return cum[done] + partial


def monitor_windows(trace: QueueTrace, window_s: float, n_classes: int | None = None,
                    start: float = 0.0, end: float | None = None) -> Windows:
    """Per-window utilization, completions and mean response time per class of ``trace``.

    Windows are ``[start + kT, start + (k+1)T)`` for every complete window before ``end``
    (default: the last departure). A job counts in the window of its departure.
    """
    if not window_s > 0:
        raise ValueError(f"window_s: must be > 0, got {window_s}")
    if end is None:
        end = float(trace.departures[-1]) if trace.departures.size else start
    k = int(np.floor((end - start) / window_s + 1e-9))
    edges = start + window_s * np.arange(k + 1)
    busy = np.diff(_busy_until(trace, edges))
    n_cls = int(trace.classes.max() + 1 if trace.classes.size else 1) if n_classes is None \
        else int(n_classes)
    win = np.floor((trace.departures - start) / window_s).astype(np.int64)
    keep = (win >= 0) & (win < k)
    flat = win[keep] * n_cls + trace.classes[keep]
    counts = np.bincount(flat, minlength=k * n_cls).reshape(k, n_cls)
    rsum = np.bincount(flat, weights=trace.response[keep], minlength=k * n_cls).reshape(k, n_cls)
    mean_rt = np.divide(rsum, counts, out=np.zeros_like(rsum), where=counts > 0)
    return Windows(float(window_s), np.clip(busy / window_s, 0.0, 1.0), busy, counts, mean_rt)
