"""A tier's busy time that no request holds: background work, told apart from demand by the
requests' own times at the tier.

A request's work at a tier happens while the request is at that tier, and one request uses at
most one core at a time, so over any interval the requests' busy time is at most the time they
spend there: ``sum_k X_k D_k <= sum_k X_k R_k`` (Little (1961): the right side is the tier's mean
population of requests), with ``R_k`` the whole time at the tier as its caller measures it
(queueing, service and the round trips of the call). Per request of the mix that is
``d = sum_c p_c D_c <= r = sum_c p_c R_c``; busy time beyond ``r`` is certainly not the
requests' (a database's background writer, checkpointer and vacuum, the monitoring's own
queries). It is a lower bound of the background: the requests' work is taken as all of ``r``,
its most.

The background enters the model as an open class of constant utilization ``u`` (of the tier's
``c`` cores): a closed class at a processor-sharing centre that an open class loads by
``rho = u / c`` sees its demand inflated by ``1 / (1 - rho)`` (Lazowska et al. 1984, chapter 7,
mixed models), which keeps the tier's saturation throughput ``c (1 - rho) / D`` where a
per-request surplus would scale with the requests' rate and lengthen every holding time. It is
constant, not growing with load: the windows measure the surplus only at their own operating
point, and on the real testbed's database the busy time per request exceeds the times at 2
users and falls below them from 6 users on (the surplus does not grow with the throughput).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Background", "background"]


@dataclass(frozen=True, slots=True)
class Background:
    """``ratio``: the busy time per request over the requests' time at the tier (``d / r``);
    ``utilization``: the busy cores no request holds, ``X (d - r)``; ``share``: that per core
    (``rho``); ``stretch``: ``1 / (1 - rho)``, the factor the requests' demands take."""

    ratio: float
    utilization: float
    share: float

    @property
    def stretch(self) -> float:
        return 1.0 / (1.0 - self.share)


def background(busy_per_request: float, time_per_request: float, throughput: float,
               cores: float) -> Background:
    """The background of a tier busy ``busy_per_request`` (``d``, CPU seconds per request) whose
    requests spend ``time_per_request`` there (``r``, seconds, as the caller measures it), at
    ``throughput`` requests per second on ``cores`` cores: ``X (d - r)`` busy cores, none
    where ``d <= r`` (module docstring). Whether ``d`` exceeds ``r`` beyond the noise of the
    means is the caller's judgement. A background of all of the tier's cores or more is an
    error in the input."""
    for name, value in (("busy_per_request", busy_per_request),
                        ("time_per_request", time_per_request), ("throughput", throughput),
                        ("cores", cores)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name}: must be finite and >= 0, got {value!r}")
    if not (time_per_request > 0 and cores > 0):
        raise ValueError(f"time_per_request, cores: must be > 0, got {time_per_request!r}, "
                         f"{cores!r}")
    u = max(throughput * (busy_per_request - time_per_request), 0.0)
    if u >= cores:
        raise ValueError(f"busy_per_request: {busy_per_request!r} s at {throughput!r}/s leaves "
                         f"a background of {u:.3g} of {cores:g} cores")
    return Background(ratio=busy_per_request / time_per_request, utilization=u,
                      share=u / cores)
