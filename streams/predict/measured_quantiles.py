"""Predicted against measured response-time quantiles: the model error on the statistic a
class's SLO names.

Where the windows carry measured end-to-end quantiles (``response_time_quantiles_s`` of the
entry tier, :attr:`streams.predict.model.Measured.quantiles`) and a class's SLO is on a
quantile (``slo``: ``p95``, ``p99`` ...), the model's quantile of that level at the current
operating point (:meth:`streams.predict.model.SystemModel.quantiles`) is compared with the
measured one: ``|q_pred - q_meas| / q_meas``. The worst such error over the classes is the
prediction's ``quantile_error`` (with ``quantile_error_class`` and
``quantile_error_quantile``, ``"buy"`` and ``"p95"``, and both values), and
``model_error`` is the larger of the mean's error and it: a model whose mean is right but
whose tail is not is wrong on what the SLO is about (Mi et al. 2008, Table 1: burstiness
moves the 95th percentile twice as much as the mean). The trust rule
(:func:`streams.predict.confidence.trust_reasons`) names the class, the quantile and both
values when it is beyond the margin.

A class whose SLO is on the mean only is held to its mean (``model_error`` as before); a
measured quantile at a level no SLO names is carried but not compared. A measured quantile of
0 (every request in the lowest bucket at a bound of 0) has no relative error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from estimators.histogram import level_name
from streams.core.config import SLO_QUANTILES
from streams.predict.model import Measured, Point, SystemModel

__all__ = ["QuantileError", "quantile_errors", "worst", "combined"]


@dataclass(frozen=True)
class QuantileError:
    """One class's SLO quantile: its name (``p95``), predicted and measured seconds, and the
    relative error."""

    cls: str
    name: str
    predicted: float
    measured: float
    error: float


def quantile_errors(model: SystemModel, m: Measured, now: Point) -> list[QuantileError]:
    """Per class with a quantile SLO and a measured quantile of its level, the error at the
    operating point ``now`` (module docstring)."""
    if not m.quantiles or model.slo is None:
        return []
    wanted: list[tuple[int, float]] = []
    for i, c in enumerate(model.classes):
        measured = m.quantiles.get(c)
        if not measured or model.mix[i] <= 0:
            continue
        for k, level in enumerate(SLO_QUANTILES.values()):
            if math.isfinite(model.slo[i, k]) and level_name(level) in measured:
                wanted.append((i, level))
    if not wanted:
        return []
    predicted = model.quantiles(now)
    levels = model.quantile_levels
    out = []
    for i, level in wanted:
        c, name = model.classes[i], level_name(level)
        meas = m.quantiles[c][name]
        pred = float(predicted[i, levels.index(level)])
        if meas > 0 and math.isfinite(pred):
            out.append(QuantileError(c, name, pred, meas, abs(pred - meas) / meas))
    return out


def worst(errors: list[QuantileError]) -> QuantileError | None:
    """The largest error (``None``: none)."""
    return max(errors, key=lambda e: e.error, default=None)


def combined(mean_error: float | None, quantile: QuantileError | None) -> float | None:
    """``model_error``: the larger of the mean's error and the worst SLO quantile's."""
    values = [v for v in (mean_error, quantile.error if quantile else None) if v is not None]
    return float(np.max(values)) if values else None
