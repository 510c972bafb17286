"""Discrete-event simulation of open queues and open networks of queues in series.

Requests of class ``c`` arrive in a Poisson stream of rate ``lambda_c``, visit queue
``1, ..., M`` once each and leave. Queues are those of :mod:`solvers.simulation.network`
(same :class:`~solvers.simulation.network.Queue` specification and service semantics): PS or
FCFS with exponential per-class or MAP service, or M/M/c FCFS (``servers = c``). With a MAP
service process and one FCFS queue this is the M/MAP/1 queue, i.e. the M/Trace/1 of Mi et al. (2008)
queue (Table 1) with the trace drawn from the MAP.

The simulation starts empty; warm-up removal and confidence intervals work as for closed
networks (:func:`solvers.simulation.network.simulate_closed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from solvers.simulation.network import (Checkpoints, Model, Queue, SimulationResult, check_queues,
                                        checkpoint_times, class_names, compile_queue, per_class,
                                        replicated_estimate, resolve_rng, simulate)

__all__ = ["OpenNetwork", "open_checkpoints", "simulate_open"]


@dataclass(frozen=True)
class OpenNetwork:
    """Poisson arrivals per class (``arrival_rates``, requests/s) into ``queues`` in series.

    Raises ``ValueError`` when a queue would be overloaded (offered load
    ``sum_c lambda_c E[S_c] / servers >= 1``): an unstable queue has no steady state.
    """

    queues: Sequence[Queue]
    arrival_rates: float | Sequence[float]
    classes: Sequence[str] | None = None
    n_classes: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "queues", check_queues(self.queues))
        n_cls = int(np.atleast_1d(np.asarray(self.arrival_rates)).size)
        lam = per_class(self.arrival_rates, n_cls, "arrival_rates")
        object.__setattr__(self, "arrival_rates", lam)
        object.__setattr__(self, "n_classes", n_cls)
        object.__setattr__(self, "classes", class_names(self.classes, n_cls))
        for q, rho in zip(self.queues, self.offered_load()):
            if not rho < 1.0:
                raise ValueError(f"arrival_rates: queue {q.name!r} is overloaded "
                                 f"(offered load {rho:.4g} >= 1)")

    def offered_load(self) -> np.ndarray:
        """``rho_m = sum_c lambda_c E[S_{m,c}] / servers_m`` per queue (its utilization)."""
        out = []
        for q in self.queues:
            cq = compile_queue(q, self.n_classes)
            work = sum(lam * cq.procs[cq.proc_of_class[c]].mean
                       for c, lam in enumerate(self.arrival_rates))
            out.append(work / q.servers)
        return np.array(out)


def _open_model(net: OpenNetwork) -> Model:
    queues = tuple(compile_queue(q, net.n_classes) for q in net.queues)
    return Model(queues, net.n_classes, arrival_rates=tuple(net.arrival_rates))


def open_checkpoints(network: OpenNetwork, times: Sequence[float] | np.ndarray, *,
                     bottleneck: bool = False, rng: np.random.Generator | None = None,
                     seed: int | None = None) -> Checkpoints:
    """Simulate ``network`` from empty and record cumulative counters at each of ``times``."""
    ts = checkpoint_times(times)
    return simulate(_open_model(network), ts, [], resolve_rng(rng, seed), bool(bottleneck))


def simulate_open(network: OpenNetwork, duration: float, *, warmup: float | None = None,
                  replications: int = 1, batches: int | None = None, level: float = 0.95,
                  bottleneck: bool = False, rng: np.random.Generator | None = None,
                  seed: int | None = None) -> SimulationResult:
    """Simulate the open network and estimate its steady state.

    ``response_time`` is the sojourn time through all queues. Warm-up (default
    ``0.1 * duration``), replications, batch means and ``level`` as in
    :func:`~solvers.simulation.network.simulate_closed`.
    """
    model = _open_model(network)
    generator = resolve_rng(rng, seed)

    def run(times: np.ndarray, g: np.random.Generator) -> Checkpoints:
        return simulate(model, times, [], g, bool(bottleneck))

    return replicated_estimate(run, (tuple(network.classes),
                                     tuple(q.name for q in network.queues)),
                               duration, warmup, replications, batches, level, bottleneck,
                               generator)
