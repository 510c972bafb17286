"""Per-system state: its tiers, the event-time solve timer, the users trend and the alerts.

A window is first admitted (:meth:`SystemState.admit`, :mod:`streams.engine.admission`:
unknown tier, duplicate, too late; whether its ``end`` passes the next solve boundary,
``solve_offset_s`` plus a multiple of ``solve_interval_s`` in event time), then applied
(:meth:`SystemState.accept`); when it passed a boundary the model is solved first, at that
boundary, over the windows received up to then (:meth:`SystemState.solve`): the users trend
(:mod:`streams.predict.users_trend`), the model's figures assembled into the prediction
(:mod:`streams.predict.prediction`), the alerts' conditions (:mod:`streams.alerts.conditions`)
through the alert book's hysteresis, their prose (:mod:`streams.alerts.text`).
:class:`~streams.engine.pipeline.Pipeline` orders these steps over a batch of windows. Because
the timer runs on event time, replaying a trace gives the same predictions whatever the wall
clock did -- which is what makes the embedded runner and the Faust worker agree.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Mapping

import numpy as np

from estimators.class_split import ClassSplit, class_split_many
from solvers.mva import mva_curves
from solvers.mva_general import mva_curves_general
from streams.alerts import text
from streams.alerts.conditions import (BREACH_RESOLVE_FACTOR, CURRENT_RESOLVE_FACTOR,
                                       ERROR_RESOLVE_FACTOR, alert_class, alert_error,
                                       breach_condition, current_breach_condition,
                                       model_error_condition)
from streams.alerts.book import AlertBook
from streams.core.config import SystemConfig
from streams.core.outputs import Alert, Outputs, Prediction, TierEstimate
from streams.core.records import Window, clean
from streams.core.tier import Interval, TierModel, TierState
from streams.engine import pooled_mix
from streams.engine.admission import Admission
from streams.predict import alert_window, burst_trust, capacity_trust, confidence, prediction, \
    response_trend
from streams.predict import story
from streams.predict import measured_quantiles, open_model, open_whatif, pool_check, users_trend
from streams.predict import rate_trend
from streams.predict import visits
from streams.predict.calibration import Calibration, calibrate_model
from streams.predict.general_service import general_model
from streams.predict.model import (ASSUMED, Measured, Point, SystemModel, build_model,
                                   model_capacity, undecided_splits)
from streams.predict.pool_naming import bottleneck_name
from streams.predict.whatif import hints_of, remediate

__all__ = ["BREACH_RESOLVE_FACTOR", "CURRENT_RESOLVE_FACTOR", "ERROR_RESOLVE_FACTOR", "Outputs",
           "SystemState", "model_error_condition", "solve_offset", "solve_systems"]


@dataclass
class _Solve:
    """A solve between :meth:`SystemState.prepare` and :meth:`SystemState.complete`."""

    time: float
    think: float                       # the think time the model uses, s
    held: int                          # windows dead-lettered as implausible since the last
    measured: Measured
    tiers: list[TierModel]
    model: SystemModel | None          # None: not enough data yet
    #: the model with the provisionally bursty tiers bursty too (None: no such tier)
    pessimistic: SystemModel | None = None
    #: why there is no model (with ``model`` None)
    flags: list[str] = field(default_factory=list)


def solve_systems(due: list[tuple["SystemState", float]],
                  tiers: list[int | None] | None = None) -> list[Outputs]:
    """Solve each ``(system, event time)``: prepare every model, compute all their MVA
    curves together (:func:`solvers.mva.mva_curves`, or
    :func:`solvers.mva_general.mva_curves_general` where a model has general service: each
    bit for bit its own curve), then finish each. The outputs are those of solving the systems
    one by one. ``tiers[i]``: the solve covers only the first that many tiers of system ``i``
    (:meth:`SystemState.prepare`). Each curve is computed at the model's own
    :attr:`~streams.predict.model.SystemModel.solver_think` (the think time plus the tiers'
    pure delays), the think time its :meth:`~streams.predict.model.SystemModel.curve` uses.
    """
    counts = tiers if tiers is not None else [None] * len(due)
    solved = [list(state.solved_tiers(n).values()) for (state, _), n in zip(due, counts)]
    splits: list[list[ClassSplit | None] | None] = [None] * len(due)
    if len({id(state) for state, _ in due}) == len(due):
        # every tier's class split in one batch (their cost is the numpy calls, not the
        # rows), read before any tier's interval is taken as each prepare would read it: so
        # only where each system comes once
        flat = iter(class_split_many([t.split_sums for one in solved for t in one]))
        splits = [[next(flat) for _ in one] for one in solved]
    prepared = [state.prepare(time, n, split) for (state, time), n, split in
                zip(due, counts, splits)]
    models = [p.model for p in prepared if p.model is not None]
    # the models with general service by the general recursion, the others by exact MVA (the
    # general recursion's curve at SCV 1 is exact MVA's bit for bit, solvers.mva_general, at
    # the cost of its correction's steps)
    general = [mo for mo in models if mo.scv is not None]
    if general:
        curves = mva_curves_general(
            [mo.D for mo in general], [mo.asymptote_start() for mo in general],
            [mo.solver_think for mo in general], [mo.servers for mo in general],
            [mo.scv for mo in general])
        for mo, curve in zip(general, curves):
            mo.prime(curve, mo.scv)
    exponential = [mo for mo in models if mo.scv is None] if general else models
    if exponential:
        curves = mva_curves([mo.D for mo in exponential],
                            [mo.asymptote_start() for mo in exponential],
                            [mo.solver_think for mo in exponential],
                            [mo.servers for mo in exponential])
        for mo, curve in zip(exponential, curves):
            mo.prime(curve)
    return [state.complete(p) for (state, _), p in zip(due, prepared)]


def solve_offset(system: str, config: SystemConfig) -> float:
    """Offset of the system's solve boundaries from the multiples of ``solve_interval_s``:
    ``solve_offset_s`` when set, else whole seconds in ``[0, interval)`` from a CRC-32 of the
    name -- stable across processes and restarts, and spread over the interval, so a fleet's
    solves do not all fall due in the same moment."""
    interval = config.solve_interval_s
    if config.solve_offset_s is not None:
        return config.solve_offset_s % interval
    return float(zlib.crc32(system.encode()) % int(interval)) if interval >= 1 else 0.0


def _mix_response(m: Measured, mix: np.ndarray, classes: list[str]) -> float:
    """Measured mean response time over the class mix, ``sum_c p_c R_c``."""
    return float(sum(p * m.response_time[c] for p, c in zip(mix, classes)))


def _warm_search(model: SystemModel, warm: int | None) -> tuple[int | None, bool, int | None]:
    """:func:`~streams.predict.model.model_capacity` from ``warm``, and where the next search
    of the same kind starts: this answer on the MAP network (``None`` when limited), else
    ``warm`` unchanged."""
    found, limited = model_capacity(model, warm)
    if model.processes is not None and found is not None:
        warm = None if limited else max(found, 1)
    return found, limited, warm


class SystemState(Admission):
    """Everything perfcast keeps about one system (its admission of windows:
    :class:`streams.engine.admission.Admission`)."""

    def __init__(self, system: str, config: SystemConfig) -> None:
        self.system = system
        self.config = config
        self.tiers: dict[str, TierState] = {t: TierState(t, config) for t in config.tiers}
        self.next_solve: float | None = None
        self.solve_offset = solve_offset(system, config)
        self.users_points: list[list[float]] = []      # [end, users], primary tier
        self.think_time_est: float | None = None
        #: a window of the system has reported ``users`` (the ``auto`` workload is closed)
        self.users_seen = False
        #: ``[time, requests/s]`` at the solves of an open workload (the rate trend)
        self.rate_points: list[list[float]] = []
        self.alerts = AlertBook(config.alert_fire_after, config.alert_resolve_after)
        self.solves = 0
        self.last_capacity: int | None = None     # the MAP network's, where the next search starts
        #: the predicted-breach alert's MAP capacity (``alert_capacity_users``), likewise
        self.last_alert_capacity: int | None = None
        #: the provisional (pessimistic) model's long-run MAP capacity, likewise (its search
        #: started from ``last_alert_capacity``, the alert window's answer, ~10% lower)
        self.last_provisional_capacity: int | None = None
        #: the last remediation's hints (``kind/tier -> [value, capacity]``): where the next
        #: one's searches start; persisted like ``last_capacity``, so a restored state answers
        #: as the one that kept running
        self.remediation_hints: dict[str, list[float]] = {}
        #: the last solve's model and populations, ``(time, model, users, users_forecast)``
        #: (in memory only: ``perfcast whatif`` reads it from an embedded run's store)
        self.last_model: tuple[float, SystemModel, int, int] | None = None
        #: an open system's last rate and its forecast (req/s), with ``last_model``
        self.last_open_rates: tuple[float, float] | None = None
        #: tiers the system had when the last window that passed a solve boundary was admitted:
        #: that solve covers only those (a tier a later window of the batch adds is not there
        #: yet when the windows come one by one)
        self.solve_tiers = 0
        #: the last solve with a model: ``{"model", "capacity_users"}`` (marks a model switch)
        self.last_solved: dict[str, Any] | None = None
        #: the trust of the predicted-breach alert's last event while it is active
        self.breach_trust: str | None = None
        #: the capacity bands' reach below and above the capacity, relative to it, as rows
        #: ``[solve, below, above]`` of the last solves
        #: (:func:`streams.predict.capacity_trust.remember`)
        self.band_reaches: list[list[float]] = []
        # the trust a firing predicted-breach alert is restated with: this solve's, once it has
        # held for alert_fire_after solves in a row (a model near the trust margin flips
        # between solves; each flip would restate the alert): [trusted, solves in a row]
        self.trust_run: list = [True, 0]
        #: the firing predicted-breach alert was restated for a change of trust already: once
        #: per firing (a model near the trust margin flips back and forth; the prediction's
        #: ``model_trusted`` follows every solve, the page does not)
        self.breach_restated = False
        #: the last solves' model errors (``confidence.error_sample``), of one model family
        self.error_samples: list[dict[str, list[float]]] = []
        self.error_family: str | None = None
        #: ... and the pools' (``pool_check.error_sample``), of the same solves
        self.pool_error_samples: list[dict[str, list[float]]] = []
        #: newest accepted window end (event time; the reference of ``far_ahead``)
        self.newest_end: float | None = None
        #: windows held as far ahead in a row: ``[end of the first, count]``
        self.ahead: list[float] | None = None
        #: windows dead-lettered as implausible since the last solve boundary, and per
        #: boundary passed but not solved yet (a batch solves after admitting it all)
        self.held = 0
        self.held_due: list[int] = []
        #: per class, the measured response time of the solves over the last
        #: ``trend_window_s``, ``[time, R]`` (:mod:`streams.predict.response_trend`)
        self.response_points: dict[str, list[list[float]]] = {}
        #: bursty tiers' last calibration (:func:`streams.predict.calibration.calibrate_model`;
        #: not state: a restarted worker searches again from the same persisted sums)
        self.calibrations: dict[str, Calibration] = {}
        #: per tier beside the entry tier, per class, its completions and the entry tier's over
        #: the same solve intervals, decayed (:mod:`streams.predict.visits`)
        self.visit_counts: visits.Counts = {}
        #: the latest solve intervals' completions per class (:mod:`streams.engine.pooled_mix`)
        self.mix_rows: list[pooled_mix.Row] = []
        #: an open workload's latest solves' aggregate demands per tier
        #: (:func:`streams.predict.open_model.add_level`)
        self.level_rows: list[list] = []

    # -- per window -------------------------------------------------------------------------
    def accept(self, tier: TierState, w: Window, late: bool, index: int,
               out: list[tuple[int, TierEstimate]]) -> None:
        """Apply an admitted window (:meth:`TierState.accept`; its Kalman update is batched)."""
        tier.accept(w, late, index, out)
        if w.users is not None:
            self.users_seen = True
            if w.tier == next(iter(self.tiers)):
                self._add_users_point(w.end, float(w.users))

    # -- measured side --------------------------------------------------------------------------
    def _visits(self, intervals: dict[str, Interval], classes: list[str]) -> visits.Visits:
        """This interval's completions into the visit counts, and the ratios the solve uses
        (:mod:`streams.predict.visits`; the entry tier is the first tier)."""
        entry = next(iter(self.tiers), None)
        visits.add_counts(self.visit_counts, entry, {
            t: dict(zip(iv.classes, iv.completions)) for t, iv in intervals.items()
            if iv.seconds > 0})
        return visits.resolve(self.config, self.visit_counts, entry,
                              {t: s.classes for t, s in self.tiers.items()}, classes)

    def _measured(self, intervals: dict[str, Interval], classes: list[str],
                  vis: visits.Visits) -> Measured:
        primary = next((t for t in intervals if intervals[t].seconds > 0), None)
        X: dict[str, float] = {}
        # Visits.visit, each tier's row looked up once
        rows = {t: vis.used.get(t, {}) for t in intervals}
        if primary is not None:
            row = rows[primary]
            X = {c: x / v if (v := row.get(c, 1.0)) > 0 else 0.0
                 for c, x in intervals[primary].throughput().items()}
        R: dict[str, float] = {}
        per_tier = {t: iv.response_time() for t, iv in intervals.items() if iv.seconds > 0}
        pairs = [(rows[t], times) for t, times in per_tier.items()]
        for c in classes:
            if pairs and all(c in times for _, times in pairs):
                R[c] = float(sum(row.get(c, 1.0) * times[c] for row, times in pairs))
        users = next((iv.users for iv in intervals.values() if iv.users is not None), None)
        U = {t: iv.utilization for t, iv in intervals.items() if iv.utilization is not None}
        seconds = intervals[primary].seconds if primary else 0.0
        # the entry tier's (the first in the tiers' order that measured any)
        quantiles = next((q for iv in intervals.values() if iv.seconds > 0
                          and (q := iv.measured_quantiles())), {})
        # each pool as the first tier that measured it (in the tiers' order) reports it
        pools: dict[str, dict[str, float]] = {}
        for iv in intervals.values():
            for name, occ in iv.measured_pools().items():
                pools.setdefault(name, occ)
        return Measured(X, R, users, U, seconds, quantiles, pools)

    def _think_time(self, m: Measured, mix: np.ndarray, classes: list[str]) -> float:
        if self.config.think_time_s is not None:
            return self.config.think_time_s
        X = m.total_throughput
        if m.users and X > 0 and all(c in m.response_time for c in classes):
            z = max(m.users / X - _mix_response(m, mix, classes), 0.0)
            self.think_time_est = z if self.think_time_est is None \
                else 0.5 * (self.think_time_est + z)
        return self.think_time_est if self.think_time_est is not None else 0.0

    def workload(self) -> tuple[str, str]:
        """The workload kind (``closed`` or ``open``) and why: the configured ``workload``;
        under ``auto`` closed where users are reported or a think time is configured (a
        population to model), open otherwise (request rates only)."""
        cfg = self.config
        if cfg.workload != "auto":
            return cfg.workload, "configured"
        if self.users_seen:
            return "closed", "users reported"
        if cfg.think_time_s is not None:
            return "closed", "think time configured"
        return "open", "no users and no think time: request rates only"

    def _population(self, m: Measured, model: SystemModel) -> tuple[int | None, str]:
        if m.users is not None:
            return int(round(m.users)), "measured"
        X = m.total_throughput
        if m.response_time and all(c in m.response_time for c in model.classes):
            # Little's law over the interval: its own shares weigh its response times (as
            # build_model normalises them; the model's mix may pool earlier intervals)
            own = np.array([m.throughput.get(c, 0.0) / X for c in model.classes]) \
                if X > 0 else model.mix
            r_mix = _mix_response(m, own / own.sum(), model.classes)
            return int(round(X * (r_mix + model.think_time))), "littles_law"
        n = model.population_for(X)
        return (n, "model_inversion") if n is not None else (None, "unknown")

    def _add_users_point(self, end: float, users: float) -> None:
        """A users point of the trend (:func:`streams.predict.users_trend.add_users_point`)."""
        users_trend.add_users_point(self.users_points, end, users)

    def _trend(self, time: float) -> float:
        """Users per second over the last ``trend_window_s``
        (:func:`streams.predict.users_trend.users_trend`)."""
        return users_trend.users_trend(self.users_points, time, self.config.trend_window_s)

    # -- solve ------------------------------------------------------------------------------------
    def solve(self, time: float) -> Outputs:
        """Solve the model at event time ``time``; prediction and alert changes (the steps of
        :func:`solve_systems` for one system)."""
        return solve_systems([(self, time)])[0]

    def solved_tiers(self, tiers: int | None = None) -> dict[str, TierState]:
        """The tiers a solve covers: the first ``tiers`` (``None``: all)."""
        return self.tiers if tiers is None or tiers >= len(self.tiers) \
            else dict(islice(self.tiers.items(), tiers))

    def prepare(self, time: float, tiers: int | None = None,
                splits: list[ClassSplit | None] | None = None) -> "_Solve":
        """First half of a solve: refresh the tiers' estimates, take the interval's
        measurements, build the model (its MVA curve is computed next, for every system of a
        round together: :func:`solve_systems`). ``tiers``: only the first that many tiers
        (:attr:`solve_tiers`; ``None``: all); ``splits``: their class splits as now, where
        the caller computed them (``None``: each tier its own)."""
        cfg = self.config
        self.solves += 1
        if self.held_due:
            held = self.held_due.pop(0)
        else:                               # the final solve of a finite input
            held, self.held = self.held, 0
        solved = self.solved_tiers(tiers)
        models = [t.refresh() for t in solved.values()] if splits is None else \
            [t.refresh(split=split) for t, split in zip(solved.values(), splits)]
        intervals = {name: t.take_interval() for name, t in solved.items()}
        classes: list[str] = []
        for t in solved.values():
            classes += [c for c in t.classes if c not in classes]
        vis = self._visits(intervals, classes)
        m = self._measured(intervals, classes, vis)
        X = m.total_throughput
        # the think time is Little's law over this interval: its own shares weigh its
        # measured response times; the model's mix pools the latest intervals
        # (streams.engine.pooled_mix), for every figure of the solve, now point included: the
        # queue an interval's requests met was built by the requests of the seconds before
        # too, and a few tens of completions read its composition with a sampling error larger
        # than the pooled estimate's
        own = np.array([m.throughput.get(c, 0.0) / X for c in classes]) if X > 0 else \
            np.full(len(classes), 1 / max(len(classes), 1))
        think = self._think_time(m, own, classes)
        pooled_mix.add_interval(self.mix_rows, time, m.throughput, m.seconds,
                                cfg.trend_window_s, cfg.mix_min_completions)
        mix, _ = pooled_mix.class_mix(self.mix_rows, m.throughput, m.seconds, classes,
                                      cfg.mix_min_completions)
        ready = classes and all(t.demands for t in models) and any(
            sum(t.demands.values()) > 0 for t in models)
        if not ready:
            return _Solve(time, think, held, m, models, None,
                          flags=["not enough data: no tier has demand estimates yet"])
        model = build_model(models, classes, mix, think, cfg, visits=vis)
        if cfg.bursty_scv in ("response", "response_idc"):
            model = calibrate_model(model, models, self.calibrations,
                                    "idc" if cfg.bursty_scv == "response_idc" else "scv",
                                    open_workload=self.workload()[0] == "open")
        model = general_model(model, models)
        cycle = float(np.sum(model.D)) + think
        if not (cycle > 0 and math.isfinite(1.0 / cycle)):
            # every class with a demand had no throughput in the interval (the mix weighs it
            # 0) and no think time: the network's throughput would be infinite, every figure
            # NaN
            return _Solve(time, think, held, m, models, None,
                          flags=["not enough data: the interval's request mix has no demand "
                                 "at any tier and the think time is 0"])
        pessimistic = None
        if any(t.provisional for t in models):
            pessimistic = build_model(models, classes, mix, think, cfg, provisional=True,
                                      visits=vis)
            if pessimistic.processes is None:     # no MAP(2) fit yet: nothing to add
                pessimistic = None
        return _Solve(time, think, held, m, models, model, pessimistic)

    def complete(self, solve: "_Solve") -> Outputs:
        """Second half: the current population and its trend, the predictions at the current
        and the forecast load, capacity, time to breach, alerts."""
        cfg = self.config
        response_trend.add_points(self.response_points, solve.time, solve.measured.response_time,
                                  cfg.trend_window_s)
        header = (self.system, solve.time, self.solves, solve.think, cfg.horizon_s, solve.held)
        kind, reason = self.workload()
        out = self._complete_open(solve, header) if kind == "open" \
            else self._complete(solve, header)
        for pred in out.predictions:
            pred.workload, pred.workload_reason = kind, reason
            if kind == "open" and reason != "configured":
                # said like the other defaults the model took for a missing input
                pred.flags = list(pred.flags) + [
                    f"{ASSUMED}an open workload ({reason}): capacity and headroom in requests "
                    f"per second; set workload = \"closed\" and think_time_s where users think "
                    f"between requests"]
        return out

    def _complete_open(self, solve: "_Solve", header: tuple) -> Outputs:
        """An open workload's solve (:mod:`streams.predict.open_model`): the model at the
        measured request rate and at the rate trend's forecast, the capacity in requests per
        second within every SLA, the time until the trend reaches it, the alerts."""
        cfg = self.config
        out = Outputs()
        m, model, time = solve.measured, solve.model, solve.time
        header = header[:3] + (None,) + header[4:]
        if model is None:
            out.predictions.append(prediction.unsolved(*header, None, solve.flags))
            return out
        X = m.total_throughput
        if not X > 0:
            out.predictions.append(prediction.unsolved(*header, "open", model.flags + [
                "open workload: no requests measured at the entry tier in the interval"]))
            return out
        users_trend.add_users_point(self.rate_points, time, X)
        slope = rate_trend.rate_trend(self.rate_points, time, cfg.trend_window_s)
        x_fc = max(X + slope * cfg.horizon_s, 0.0)
        held = open_model.RateSolves(model)
        now, res_now = open_model.open_point(model, X, held)
        fc, res_fc = open_model.open_point(model, x_fc, held)
        # the capacity, its alert, band and remedy on the aggregate demands' recent median;
        # the solve's own where it is saturated now (no median of the past un-saturates it)
        open_model.add_level(self.level_rows, time, model)
        c_model = open_model.capacity_model(model, self.level_rows) if res_now.stable \
            else model
        c_held = held if c_model is model else open_model.RateSolves(c_model)
        cap = open_model.rate_capacity(c_model, c_held, fed=True)
        flags = list(model.flags) + list(res_now.flags)
        if not res_now.stable:
            flags.append(f"unstable: the arrival rate {X:.4g}/s exceeds the saturation rate "
                         f"{cap.saturation:.4g}/s now (capacity exceeded)")
        elif not res_fc.stable:
            flags.append(f"unstable at the forecast: the rate trend reaches {x_fc:.4g}/s "
                         f"within the horizon, beyond the saturation rate "
                         f"{cap.saturation:.4g}/s (capacity exceeded then; forecast response "
                         f"times null)")
        ttb = open_whatif.rate_time_to_breach(cap.capacity, X, slope)
        alert_ttb, basis, factors = self._open_alert(c_model, cap.capacity, X, slope, ttb,
                                                     solve.tiers, c_held)
        remedy, extra = self._open_extras(solve, c_model, cap, X, x_fc, slope, ttb, c_held)
        self.last_model = (time, model, 0, 0)
        self.last_open_rates = (X, x_fc)
        seen = confidence.timed_point(model, solve.tiers, now)  # the entry tier's timed span
        error, x_error = self._model_error(model, m, seen)
        error, q_fields = self._quantile_error(model, m, now, error)
        checks = pool_check.pool_checks(model, m.pools, now)
        worst_pool, pool_error = pool_check.worst_pool(checks)
        error = pool_check.combined(error, pool_error)
        flags += pool_check.size_flags(model, m.pools)
        pooled, pooled_fields = self._pooled_error(model, m, seen)
        if model.pools:
            pooled_fields.update(self._pooled_pool_error(checks, m.seconds))
        classes = prediction.class_parts(model, m, now, fc,
                                         confidence.class_errors(model, m, seen), pooled,
                                         cfg.predict_quantiles == "always")
        u_errors = confidence.tier_errors(model, m, now)
        tiers = prediction.tier_parts(model, m, now, fc, solve.tiers,
                                      [None] * len(solve.tiers), u_errors, cfg.bursty_scv)
        util = np.where(np.isfinite(fc.utilization), fc.utilization, np.inf)
        bottleneck = bottleneck_name(model, dataclasses.replace(fc, utilization=util))
        pred = Prediction(**clean(dict(
            system=self.system, time=time, solve=self.solves, think_time_s=None,
            horizon_s=cfg.horizon_s, model=now.model,
            flags=prediction.held_flags(flags, solve.held),
            arrival_rate_per_s=X, arrival_rate_trend_per_s=slope,
            arrival_rate_forecast_per_s=x_fc, capacity_rate_per_s=cap.capacity,
            headroom_rate_per_s=None if cap.capacity is None else cap.capacity - X,
            saturation_rate_per_s=cap.saturation, unstable=not res_now.stable,
            throughput=now.throughput,
            response_time=float(open_model.mix_mean(now.response, model.mix)),
            throughput_measured=X, time_to_breach_s=ttb, breach_class=cap.breach_class,
            breach_tier=cap.breach_tier, bottleneck_tier=bottleneck,
            model_error=error, throughput_error=x_error, classes=classes, tiers=tiers,
            users=None, alert_capacity_users=None,
            remediation=remedy, alert_time_to_breach_s=alert_ttb, alert_basis=basis,
            alert_window_factors=factors, **pooled_fields, **q_fields, **extra,
            **({"pools": prediction.pool_parts(model, cfg, now, fc, checks)}
               if model.pools else {}),
            **({"pool_error": pool_error, "pool_error_pool": worst_pool}
               if worst_pool is not None else {}),
            **dict(zip(("utilization_error_tier", "utilization_error_max"),
                       confidence.worst(u_errors))))))
        undecided = undecided_splits(solve.tiers, model.classes, model.mix, cfg.demand_policy,
                                     cfg.disciplines)
        reasons = confidence.trust_reasons(pred, solve.tiers, model, undecided) \
            + pool_check.trust_reasons(pred)
        reasons += confidence.evidence_reasons(pred, self._window_completions())
        reasons += burst_trust.trust_reasons(pred, cfg.idc_threshold)
        reasons += self._capacity_reasons(pred)
        out.alerts += self._alerts(pred, m, model, time, reasons, undecided)
        if "model_error" in self.alerts.active():
            reasons.append("model_error alert active")
        pred.model_trusted = not reasons
        pred.trust_reasons = reasons
        out.predictions.append(pred)
        return out

    def _open_alert(self, model: SystemModel, capacity: float | None, X: float, slope: float,
                    ttb: float | None, tiers: list[TierModel],
                    held: open_model.RateSolves) -> tuple[float | None, list[str],
                                                           dict[str, float]]:
        """The time to breach the ``predicted_breach`` alert acts on for an open workload,
        why it differs from ``time_to_breach_s`` and the tiers' window factors: the SLA read
        on the ``alert_window_s`` mean at the quantile of ``window_breach_probability``
        (:func:`streams.predict.open_model.window_rate_capacity`), as on a closed one."""
        cfg = self.config
        if not (cfg.alert_window_s > 0 and capacity is not None and capacity > 0):
            return ttb, [], {}
        z = alert_window.quantile_z(cfg.alert_window_s, cfg.horizon_s,
                                    cfg.window_breach_probability)
        w_cap, f = open_model.window_rate_capacity(model, [t.idc for t in tiers], capacity,
                                                   cfg.alert_window_s, z, held)
        if w_cap is None or not w_cap < capacity:
            return ttb, [], {}
        return (open_whatif.rate_time_to_breach(w_cap, X, slope),
                [f"alert_window: the {cfg.alert_window_s / 60:g}-min mean, breach probability "
                 f"{cfg.window_breach_probability:g} over the horizon ({w_cap:.4g}/s)"],
                dict(zip(model.tiers, f.tolist())))

    def _open_extras(self, solve: "_Solve", model: SystemModel,
                     cap: open_model.RateCapacity, X: float,
                     x_fc: float, slope: float, ttb: float | None,
                     held: open_model.RateSolves | None = None
                     ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """An open solve's remediation (at risk: the larger of the rate and its forecast
        beyond ``capacity_rate_per_s``; :func:`streams.predict.open_whatif.remediate_open`),
        its story, and the uncertainty band of the capacity in req/s
        (:func:`streams.predict.open_whatif.rate_band`, when :func:`confidence.band_due`)."""
        cfg = self.config
        extra: dict[str, Any] = {}
        remedy = None
        if cap.capacity is None:
            return remedy, extra
        required = max(X, x_fc)
        if cfg.remediation and required > cap.capacity:
            remedy = open_whatif.remediate_open(model, required, cap.capacity,
                                                cfg.remediation_costs, held=held)
        if confidence.band_due(self.solves, ttb, cfg.horizon_s):
            extra.update(open_whatif.rate_band(model, solve.tiers, cap.capacity, X, slope,
                                               gain=None if held is None else held.gain))
        extra.update(story.remedy_story(remedy, cap.breach_tier))
        return remedy, extra

    def _complete(self, solve: "_Solve", header: tuple) -> Outputs:
        cfg = self.config
        out = Outputs()
        m, model, time = solve.measured, solve.model, solve.time
        if model is None:
            out.predictions.append(prediction.unsolved(*header, None, solve.flags))
            return out
        n_now, source = self._population(m, model)
        if n_now is None:
            out.predictions.append(prediction.unsolved(*header, model.kind, model.flags + [
                "current population unknown: no users, no response times, throughput beyond "
                "the model's saturation"]))
            return out
        if source != "measured":
            self._add_users_point(time, float(n_now))
        slope = self._trend(time)
        n_fc = max(int(round(n_now + slope * cfg.horizon_s)), 0)
        pred = self._predict(solve, model, m, n_now, source, slope, n_fc)
        self.last_model = (time, model, n_now, n_fc)
        self.last_open_rates = None
        undecided = undecided_splits(solve.tiers, model.classes, model.mix, cfg.demand_policy,
                                     cfg.disciplines)
        reasons = confidence.trust_reasons(pred, solve.tiers, model, undecided) \
            + pool_check.trust_reasons(pred)
        reasons += confidence.evidence_reasons(pred, self._window_completions())
        reasons += burst_trust.trust_reasons(pred, cfg.idc_threshold)
        reasons += self._capacity_reasons(pred)
        alerts = self._alerts(pred, m, model, time, reasons, undecided)
        if "model_error" in self.alerts.active():
            reasons.append("model_error alert active")
        pred.model_trusted = not reasons
        pred.trust_reasons = reasons
        out.predictions.append(pred)
        out.alerts += alerts
        return out

    def _capacity_reasons(self, pred: Prediction) -> list[str]:
        """``pred``'s band remembered, and ``capacity_uncertain`` where the bands of the last
        solves do not place the capacity (users, or an open workload's rate) within the
        margin (:mod:`streams.predict.capacity_trust`)."""
        self.band_reaches = capacity_trust.remember(self.band_reaches, self.solves, pred)
        return capacity_trust.trust_reasons(capacity_trust.reach(self.band_reaches, self.solves))

    def _capacity(self, model: SystemModel) -> tuple[int | None, bool]:
        """:func:`~streams.predict.model.model_capacity`, warm-started from the last solve's
        capacity (the MVA answer at the first solve), which it then remembers."""
        found, limited, self.last_capacity = _warm_search(model, self.last_capacity)
        return found, limited

    def _alert_capacity(self, model: SystemModel, pessimistic: SystemModel | None,
                        cap: int | None, limited: bool, n_now: int, slope: float,
                        tiers: list[TierModel]
                        ) -> tuple[dict[str, Any], SystemModel, int | None, bool]:
        """The capacity and time to breach the ``predicted_breach`` alert acts on, and why
        they differ from the long-run ``capacity_users``: ``provisional`` -- a tier whose
        ``I`` is above ``idc_threshold`` but not yet confirmed is taken as bursty
        (``pessimistic``, :func:`streams.core.tier.provisionally_bursty`); ``alert_window``
        -- the SLA read on the ``alert_window_s`` mean at the quantile of
        ``window_breach_probability`` (:mod:`streams.predict.alert_window`). Returns the
        prediction's fields, and the model the alert stands on with its long-run capacity
        (the remediation's)."""
        cfg = self.config
        basis: list[str] = []
        base = model
        if pessimistic is not None:
            p_cap, p_limited, self.last_provisional_capacity = _warm_search(
                pessimistic, self.last_provisional_capacity)
            if p_cap is not None and not p_limited and (cap is None or limited or p_cap < cap):
                base, cap, limited = pessimistic, p_cap, p_limited
                basis.append("provisional: " + ", ".join(
                    f"{t.tier} I {t.idc:.3g} not yet confirmed ({t.idc_flag})"
                    for t in tiers if t.provisional))
        base_cap, base_limited = cap, limited
        factors: dict[str, float] = {}
        if cfg.alert_window_s > 0 and cap is not None and not limited:
            z = alert_window.quantile_z(cfg.alert_window_s, cfg.horizon_s,
                                        cfg.window_breach_probability)
            f = alert_window.window_factors(base, [t.idc for t in tiers], base.at(cap),
                                            cfg.alert_window_s, z)
            if alert_window.is_material(f):
                factors = dict(zip(base.tiers, f.tolist()))
                w_cap, w_limited = alert_window.window_capacity(
                    base, f, self.last_alert_capacity if base.processes is not None else None)
                if w_cap is not None and not w_limited and w_cap < cap:
                    cap = w_cap
                    basis.append(f"alert_window: the {cfg.alert_window_s / 60:g}-min mean, "
                                 f"breach probability {cfg.window_breach_probability:g} over "
                                 f"the horizon")
        if base.processes is not None and cap is not None and not limited:
            self.last_alert_capacity = max(cap, 1)
        ttb: float | None = None
        if cap is not None and not limited:
            ttb = 0.0 if n_now > cap else ((cap + 1 - n_now) / slope if slope > 0 else None)
        return ({"alert_capacity_users": cap, "alert_time_to_breach_s": ttb,
                 "alert_basis": basis, "alert_window_factors": factors},
                base, base_cap, base_limited)

    def _predict(self, solve: _Solve, model: SystemModel, m: Measured, n_now: int,
                 source: str, slope: float, n_fc: int) -> Prediction:
        """The solve's figures at the current and the forecast population, assembled
        (:func:`streams.predict.prediction.assemble`)."""
        cfg = self.config
        now, fc = model.at(n_now), model.at(n_fc)
        cap, limited = self._capacity(model)
        alert, base, base_cap, base_limited = self._alert_capacity(
            model, solve.pessimistic, cap, limited, n_now, slope, solve.tiers)
        flags = prediction.solver_flags(model, base) + prediction.assumed_workload(
            source, n_now, solve.think,
            cfg.think_time_s is None and self.think_time_est is None, m.total_throughput)
        flags += prediction.pool_flags(model, max(n_now, n_fc))
        breach, breach_class, breach_tier = prediction.breach_point(model, cap, limited)
        ttb: float | None = None
        if cap is not None and not limited:
            if n_now > cap:
                ttb = 0.0
            elif slope > 0:
                ttb = (cap + 1 - n_now) / slope
        B = (breach if breach is not None else fc).bottleneck
        seen = confidence.timed_point(model, solve.tiers, now)  # the entry tier's timed span
        error, x_error = self._model_error(model, m, seen)
        error, q_fields = self._quantile_error(model, m, now, error)
        checks = pool_check.pool_checks(model, m.pools, now)
        worst_pool, pool_error = pool_check.worst_pool(checks)
        error = pool_check.combined(error, pool_error)
        flags += pool_check.size_flags(model, m.pools)
        remedy = self._remediation(base, base_cap, base_limited, n_now, n_fc,
                                   alert["alert_capacity_users"])
        pooled, pooled_fields = self._pooled_error(model, m, seen)
        pooled_fields.update(self._pooled_pool_error(checks, m.seconds))
        classes = prediction.class_parts(model, m, now, fc,
                                         confidence.class_errors(model, m, seen), pooled,
                                         cfg.predict_quantiles == "always")
        u_errors = confidence.tier_errors(model, m, now)
        tiers = prediction.tier_parts(model, m, now, fc, solve.tiers,
                                      [None] * len(solve.tiers) if B is None else B.tolist(),
                                      u_errors, cfg.bursty_scv)
        assessment = self._assess(model, now, fc, breach, cap, limited, ttb, n_now, slope,
                                  breach_class, breach_tier, remedy, tiers, flags, solve.tiers)
        return prediction.assemble(
            system=self.system, time=solve.time, solve=self.solves, think=solve.think,
            horizon=cfg.horizon_s, held=solve.held, model=model, now=now, fc=fc, m=m,
            n_now=n_now, source=source, slope=slope, n_fc=n_fc, flags=flags, cap=cap,
            limited=limited, ttb=ttb, breach_class=breach_class, breach_tier=breach_tier,
            bottleneck=B, error=error, x_error=x_error, classes=classes, tiers=tiers,
            remediation=remedy, alert=alert, assessment={
                **pooled_fields, **q_fields,
                **dict(zip(("utilization_error_tier", "utilization_error_max"),
                                            confidence.worst(u_errors))), **assessment,
                **({"pools": prediction.pool_parts(model, cfg, now, fc, checks)}
                   if model.pools else {}),
                **({"pool_error": pool_error, "pool_error_pool": worst_pool}
                   if worst_pool is not None else {})})

    def _assess(self, model: SystemModel, now: Point, fc: Point, breach: Point | None,
                cap: int | None, limited: bool, ttb: float | None, n_now: int, slope: float,
                breach_class: str | None, breach_tier: str | None,
                remedy: dict[str, Any] | None, tiers: dict[str, Any], flags: list[str],
                models: list[TierModel]) -> dict[str, Any]:
        """The prediction's story fields: the uncertainty band of capacity and time to breach
        (:mod:`streams.predict.confidence`), why the busiest tier and the breach tier
        differ, the remedy and a switch of model (:mod:`streams.predict.story`)."""
        extra: dict[str, Any] = {}
        if cap is not None and not limited and confidence.band_due(
                self.solves, ttb, self.config.horizon_s):
            extra.update(confidence.band(model, models, cap, n_now, slope))
        extra.update(story.bottleneck_story(model, bottleneck_name(model, fc),
                                            breach, breach_class, breach_tier, fc, tiers))
        extra.update(story.remedy_story(remedy, breach_tier))
        extra.update(story.model_switch(self.last_solved, now.model, cap, tiers,
                                        self.config.idc_threshold, flags))
        self.last_solved = {"model": now.model, "capacity_users": cap}
        return extra

    def _pooled_error(self, model: SystemModel, m: Measured, now: Point
                      ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """This solve's errors added to the last ``confidence.ERROR_WINDOW`` solves' of the
        same model family, pooled (:func:`streams.predict.confidence.pooled_errors`): per
        class (``response_time_error_pooled`` / ``_se``), and the aggregate's and the worst
        significant class's fields (what the ``model_error`` alert watches,
        :func:`_alert_error`)."""
        family = story.model_family(now.model)
        if family != self.error_family:
            self.error_samples, self.error_family = [], family
            self.pool_error_samples = []
        self.error_samples = (self.error_samples + [confidence.error_sample(model, m, now)]
                              )[-confidence.ERROR_WINDOW:]
        pooled = confidence.pooled_errors(self.error_samples)
        agg = pooled.get(confidence.ALL_CLASSES, {})
        name, value = confidence.significant_worst(pooled)
        return pooled, {"model_error_pooled": agg.get("error"),
                        "model_error_pooled_se": agg.get("se"),
                        "model_error_significant": agg.get("significant"),
                        "model_error_solves": agg.get("solves"),
                        "model_error_class": name, "model_error_class_max": value}

    def _pooled_pool_error(self, checks: dict[str, pool_check.PoolCheck], seconds: float
                           ) -> dict[str, Any]:
        """This solve's pool checks added to the last ``confidence.ERROR_WINDOW`` solves'
        (reset with :meth:`_pooled_error`'s on a change of model family), pooled: the pool
        with the largest significant pooled error, what the ``model_error`` alert watches
        beside the response time's (:mod:`streams.predict.pool_check`); empty when none is."""
        self.pool_error_samples = (self.pool_error_samples
                                   + [pool_check.error_sample(checks, seconds)]
                                   )[-confidence.ERROR_WINDOW:]
        name, value = pool_check.pooled_worst(self.pool_error_samples)
        return {} if name is None else {"pool_error_pooled": value,
                                        "pool_error_pooled_pool": name}

    def _window_completions(self) -> float | None:
        """Requests measured over the model-error window (:meth:`_pooled_error`'s samples)."""
        total = sum(sample[confidence.ALL_CLASSES][0] for sample in self.error_samples
                    if confidence.ALL_CLASSES in sample)
        return total if total > 0 else None

    def _remediation(self, model: SystemModel, cap: int | None, limited: bool, n_now: int,
                     n_fc: int, alert_cap: int | None) -> dict[str, Any] | None:
        """At risk -- the larger of the current and the horizon's users beyond the alert's
        capacity ``alert_cap``, which is the ``predicted_breach`` condition
        ``alert_time_to_breach_s <= horizon_s`` -- the smallest action per kind and tier that
        restores every SLA there (:func:`streams.predict.whatif.remediate`, on the model the
        alert stands on, whose long-run capacity is ``cap``); ``None`` otherwise. Where the
        alert's capacity is below ``cap`` (the alert window's), the long-run capacity an
        action must give is scaled by ``cap / alert_cap``: the margin the window needs."""
        required = max(n_now, n_fc)
        if not self.config.remediation or cap is None or limited or alert_cap is None \
                or required <= alert_cap:
            self.remediation_hints = {}
            return None
        if 0 < alert_cap < cap:
            required = int(math.ceil(required * cap / alert_cap))
        hints = {k: (float(v), int(c)) for k, (v, c) in self.remediation_hints.items()}
        record = remediate(model, required, cap, self.config.remediation_costs,
                           hints).to_record()
        self.remediation_hints = {k: [v, c] for k, (v, c) in hints_of(record).items()}
        return record

    @staticmethod
    def _model_error(model: SystemModel, m: Measured, now: Point) -> tuple[float | None,
                                                                          float | None]:
        """Relative error of the predicted mean response time at the current load (mean over
        the classes with a measured time, weighted by their measured throughput), and of the
        total throughput."""
        x_sum = pred = meas = 0.0
        for i, c in enumerate(model.classes):
            x, r = m.throughput.get(c, 0.0), m.response_time.get(c)
            if r is not None and x > 0:
                x_sum += x
                pred += x * now.response[i]
                meas += x * r
        X = m.total_throughput
        return (abs(pred - meas) / meas if meas > 0 else None,
                abs(now.throughput - X) / X if X > 0 else None)

    @staticmethod
    def _quantile_error(model: SystemModel, m: Measured, now: Point, error: float | None
                        ) -> tuple[float | None, dict[str, Any]]:
        """``model_error`` with the worst measured SLO quantile's error in it, and the
        prediction's ``quantile_error`` fields
        (:mod:`streams.predict.measured_quantiles`)."""
        worst = measured_quantiles.worst(measured_quantiles.quantile_errors(model, m, now))
        if worst is None:
            return error, {}
        return measured_quantiles.combined(error, worst), {
            "quantile_error": worst.error, "quantile_error_class": worst.cls,
            "quantile_error_quantile": worst.name, "quantile_predicted_s": worst.predicted,
            "quantile_measured_s": worst.measured}

    def _alerts(self, pred: Prediction, m: Measured, model: SystemModel,
                time: float, reasons: list[str], undecided: list[TierModel]) -> list[Alert]:
        """This solve's alert events (:class:`streams.alerts.book.AlertBook`); records the
        trend guard's reading in ``pred`` (:meth:`_breach_condition`). ``reasons``: why the
        model is not trusted before the alerts (:func:`streams.predict.confidence.trust_reasons`):
        a predicted breach is marked untrusted then, names the class the measurement points at
        where the model's is contradicted or not trusted
        (:func:`streams.alerts.conditions.alert_class`) and withholds a remedy that rests on a
        class split not identified."""
        cfg = self.config
        system = self.system
        err, thr = alert_error(pred), cfg.model_error_threshold
        error_cond = model_error_condition(err, thr)
        error_ev = self.alerts.evaluate("model_error", error_cond, lambda: Alert(
            system=system, time=time, alert="model_error", class_=None, tier=None,
            value=clean(err), threshold=clean(thr),
            summary=text.model_error_summary(system, pred, err, thr, bool(error_cond))), time)
        cond, ttb, breach_class = self._breach_condition(pred, model, time, reasons)
        trusted = not reasons and "model_error" not in self.alerts.active()
        named = None
        if pred.alert_trigger != "trend":
            sla = {c: float(v) for c, v in zip(model.classes, model.sla.tolist())}
            breach_class, named = alert_class(breach_class, m.response_time, sla, trusted)
        unsplit = [t.tier for t in undecided]
        withheld = None
        if unsplit or named:
            withheld = ("it rests on the class split of " + ", ".join(map(repr, unsplit))
                        + ", not identified") if unsplit else \
                "it answers the model's breach of another class"
        ev = self.alerts.evaluate("predicted_breach", cond, lambda: Alert(
            system=system, time=time, alert="predicted_breach", class_=breach_class,
            tier=pred.breach_tier, time_to_breach_s=clean(ttb), value=clean(ttb),
            threshold=clean(cfg.horizon_s), trigger=pred.alert_trigger,
            statistic=text.slo_statistic(pred, breach_class),
            summary=text.breach_summary(system, pred, cfg, ttb, breach_class, withheld),
            basis=list(pred.alert_basis) + text.trend_basis(pred)
            + ([named] if named else [])), time)
        events = [ev] if ev else []
        for i, c in enumerate(model.classes):
            r, sla = m.response_time.get(c), model.sla[i]
            if not math.isfinite(sla):
                continue
            ev = self.alerts.evaluate(
                f"current_breach/{c}", current_breach_condition(r, sla),
                lambda c=c, r=r, sla=sla: Alert(
                    system=system, time=time, alert="current_breach", class_=c,
                    tier=pred.bottleneck_tier, value=clean(r), threshold=clean(sla),
                    statistic="mean",
                    summary=f"{system}: class {c!r} response time {r or 0:.3f} s is above "
                            f"its {sla:g} s SLA"), time)
            events += [ev] if ev else []
        events += [error_ev] if error_ev else []
        track = self.alerts.tracks.get("predicted_breach")
        now_trusted = trusted and "model_error" not in self.alerts.active()
        self.trust_run = [now_trusted, self.trust_run[1] + 1 if self.trust_run[0] == now_trusted
                          else 1]
        steady = now_trusted if self.trust_run[1] >= cfg.alert_fire_after or \
            self.breach_trust is None else self.breach_trust == "trusted"
        if self.breach_restated and self.breach_trust is not None:
            steady = self.breach_trust == "trusted"
        events, self.breach_trust = confidence.trust_events(
            events, now_trusted,
            bool(track and track.active), self.breach_trust,
            lambda: Alert(
                system=system, time=time, alert="predicted_breach", class_=breach_class,
                tier=pred.breach_tier, time_to_breach_s=clean(ttb), value=clean(ttb),
                threshold=clean(cfg.horizon_s), since=track.since if track else None,
                trigger=pred.alert_trigger, statistic=text.slo_statistic(pred, breach_class),
                summary="the model's trust changed: "
                        + text.breach_summary(system, pred, cfg, ttb, breach_class, withheld),
                basis=list(pred.alert_basis) + text.trend_basis(pred)
                + ([named] if named else [])), steady)
        if self.breach_trust is None:
            self.breach_restated = False
        elif any(e.get("update") == "trust" for e in events):
            self.breach_restated = True
        return events

    def _breach_condition(self, pred: Prediction, model: SystemModel, time: float,
                          untrusted: list[str] | None = None
                          ) -> tuple[bool | None, float | None, str | None]:
        """The ``predicted_breach`` condition at this solve, its time to breach and class
        (:func:`streams.alerts.conditions.breach_condition`); records the trend guard's
        reading in ``pred`` (:func:`streams.predict.prediction.record_guard`). The measured
        side (the trend guard, a contradicted breach) reads mean response times: with
        quantile SLOs it holds each class to the mean its tightest SLO implies at the alert's
        capacity (:meth:`SystemModel.mean_bounds`)."""
        bounds = model.sla
        if model.has_quantile_slo:
            at = pred.alert_capacity_users if pred.alert_capacity_users is not None \
                else pred.users_forecast
            bounds = model.mean_bounds(model.at(max(int(at or 1), 1)))
        sla = {c: float(s) for c, s in zip(model.classes, bounds.tolist())}
        cond, ttb, breach_class, reasons, trend, trigger = breach_condition(
            pred, sla, time, self.config, self.response_points,
            "model_error" in self.alerts.active(), untrusted or ())
        prediction.record_guard(pred, reasons, trend, trigger)
        return cond, ttb, breach_class

    # -- state ---------------------------------------------------------------------------------
    def to_dict(self, with_history: bool = True) -> dict[str, Any]:
        return {"system": self.system,
                "tiers": [t.to_dict(with_history) for t in self.tiers.values()],
                "next_solve": self.next_solve, "users_points": self.users_points,
                "think_time_est": self.think_time_est, "users_seen": self.users_seen,
                "rate_points": self.rate_points,
                "alerts": self.alerts.to_dict(),
                "solves": self.solves, "last_capacity": self.last_capacity,
                "last_alert_capacity": self.last_alert_capacity,
                "last_provisional_capacity": self.last_provisional_capacity,
                "last_solved": self.last_solved, "breach_trust": self.breach_trust,
                "band_reaches": self.band_reaches,
                "trust_run": list(self.trust_run), "breach_restated": self.breach_restated,
                "remediation_hints": self.remediation_hints,
                "error_samples": self.error_samples, "error_family": self.error_family,
                "pool_error_samples": self.pool_error_samples,
                "newest_end": self.newest_end, "ahead": self.ahead, "held": self.held,
                "held_due": list(self.held_due), "response_points": self.response_points,
                "visit_counts": self.visit_counts, "mix_rows": self.mix_rows,
                "level_rows": self.level_rows}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], config: SystemConfig,
                  chunks: Mapping[str, Mapping[int, Mapping[str, list]]] | None = None
                  ) -> "SystemState":
        """Rebuild from :meth:`to_dict`; ``chunks[tier]`` holds the history rows of a
        header-only dict."""
        state = cls(data["system"], config)
        state.tiers = {t["tier"]: TierState.from_dict(t, config, (chunks or {}).get(t["tier"]))
                       for t in data["tiers"]}
        state.next_solve = data["next_solve"]
        state.users_points = sorted(list(p) for p in data["users_points"])
        state.think_time_est = data["think_time_est"]
        # absent in states saved before the workload kind: set again by the next window
        state.users_seen = bool(data.get("users_seen", False))
        state.rate_points = sorted(list(p) for p in data.get("rate_points") or [])
        state.alerts = AlertBook.from_dict(data["alerts"])
        state.solves = data["solves"]
        state.last_capacity = data.get("last_capacity")
        state.last_alert_capacity = data.get("last_alert_capacity")
        state.last_provisional_capacity = data.get("last_provisional_capacity")
        state.last_solved = data.get("last_solved")
        state.breach_trust = data.get("breach_trust")
        state.band_reaches = [list(b) for b in data.get("band_reaches") or []]
        state.trust_run = list(data.get("trust_run") or [True, 0])
        state.breach_restated = bool(data.get("breach_restated", False))
        state.remediation_hints = dict(data.get("remediation_hints") or {})
        state.error_samples = list(data.get("error_samples") or [])
        state.error_family = data.get("error_family")
        state.pool_error_samples = list(data.get("pool_error_samples") or [])
        # absent in states saved before the plausibility rules
        ends = [t.ends[-1] for t in state.tiers.values() if t.ends]
        state.newest_end = data.get("newest_end", max(ends) if ends else None)
        state.ahead = data.get("ahead")
        state.held = data.get("held", 0)
        state.held_due = list(data.get("held_due", ()))
        # absent in states saved before the response-time trend guard
        state.response_points = {c: [list(p) for p in rows] for c, rows in
                                 (data.get("response_points") or {}).items()}
        state.visit_counts = {t: {c: [float(a), float(b)] for c, (a, b) in per.items()}
                              for t, per in (data.get("visit_counts") or {}).items()}
        # absent in states saved before the pooled class mix: it pools from the next solve
        state.mix_rows = [[float(end), {c: float(n) for c, n in row.items()}]
                          for end, row in data.get("mix_rows") or []]
        # absent in states saved before the capacity's median demand: it gathers from the next
        state.level_rows = [[float(end), [float(x) for x in row]]
                            for end, row in data.get("level_rows") or []]
        return state
