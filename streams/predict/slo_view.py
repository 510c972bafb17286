"""Each class's SLOs as one list of statistics, and the model's value of each at a point.

A class's SLOs (:class:`streams.core.config.SystemConfig`: ``sla_s`` on the mean, ``slo`` on
quantiles ``p50`` ... ``p99.9``) are all kept: capacity, the breach, remediation and the
uncertainty band hold every class within every one of them
(:meth:`streams.predict.model.SystemModel.excess`). What is *shown* per class -- the what-if
table, the predictions' ``response_time_slo_s``, the report's percentile chart, the Grafana
panel -- is one statistic, the one nearest to (or furthest past) its bound
(:meth:`~streams.predict.model.SystemModel.slo_statistic`): the one that decides the class's
capacity when the law keeps its shape. A quantile is read from the model's response-time law
(:meth:`~streams.predict.model.SystemModel.quantiles`), the mean from the solve itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from streams.core.config import SLO_QUANTILES
from streams.predict.model import Point, SystemModel

__all__ = ["ClassSlo", "band_note", "binding", "class_slos", "slo_values", "slo_text"]


@dataclass(frozen=True)
class ClassSlo:
    """One class's SLOs: ``(statistic, bound s)`` pairs, the mean's first."""

    name: str
    bounds: tuple[tuple[str, float], ...]

    @property
    def quantiles(self) -> tuple[tuple[str, float], ...]:
        return tuple(b for b in self.bounds if b[0] != "mean")


def class_slos(model: SystemModel) -> list[ClassSlo]:
    """Per class of ``model`` every SLO it has (empty: none)."""
    out = []
    for i, cls in enumerate(model.classes):
        bounds: list[tuple[str, float]] = []
        if math.isfinite(float(model.sla[i])):
            bounds.append(("mean", float(model.sla[i])))
        if model.slo is not None:
            bounds += [(name, float(v)) for name, v in zip(SLO_QUANTILES, model.slo[i].tolist())
                       if math.isfinite(v)]
        out.append(ClassSlo(cls, tuple(bounds)))
    return out


def slo_values(model: SystemModel, point: Point,
               statistics: list[str | None]) -> list[float | None]:
    """Per class the model's value at ``point`` of ``statistics[c]`` (``mean`` or a key of
    :data:`~streams.core.config.SLO_QUANTILES`; ``None``: none asked), seconds."""
    q = None
    out: list[float | None] = []
    for c, stat in enumerate(statistics):
        if stat is None:
            out.append(None)
        elif stat == "mean":
            out.append(float(point.response[c]))
        else:
            if q is None:
                q = model.quantiles(point)
            value = float(q[c, model.quantile_levels.index(SLO_QUANTILES[stat])])
            out.append(value if math.isfinite(value) else None)
    return out


def slo_text(slo: ClassSlo) -> str:
    """``mean <= 1 s, p95 <= 0.3 s`` (``-``: none)."""
    return ", ".join(f"{name} <= {bound:g} s" for name, bound in slo.bounds) or "-"


def binding(model: SystemModel, point: Point) -> tuple[list[str | None], np.ndarray]:
    """Per class the statistic :meth:`SystemModel.slo_statistic` names at ``point`` and its
    bound (``nan``: none)."""
    stats = model.slo_statistic(point)
    return ([s for s, _ in stats],
            np.array([np.nan if b is None else b for _, b in stats], dtype=float))


def band_note(model: SystemModel) -> str | None:
    """The uncertainty band's line on a model with quantile SLOs (``None``: none): its ends
    are capacities on every SLO, each end's quantiles from that end's own law
    (:func:`streams.predict.confidence.band`); on the MAP network its ends are solved by the
    decomposition, whose quantiles are the exponential network's law scaled to its mean."""
    if not model.has_quantile_slo:
        return None
    names = sorted({name for slo in class_slos(model) for name, _ in slo.quantiles},
                   key=lambda k: SLO_QUANTILES[k])
    text = (f"band on the {'/'.join(names)} SLO: each end is the capacity where that end's "
            f"model (demands, I) first breaks a class's SLO, its quantiles from its own law")
    if model.processes is not None:
        text += (" (MAP network: the decomposition's mean with the exponential network's "
                 "tail shape)")
    return text
