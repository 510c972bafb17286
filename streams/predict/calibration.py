"""A bursty tier's MAP(2) calibrated to the response time measured at the tier: its ``I``
(the default) or its SCV.

Mi et al. (2008) section 4.1 fits a bursty tier's MAP(2) to three numbers: the mean service time, the
index of dispersion ``I`` and the 95th percentile. They leave one degree of freedom: a curve of
marginals with the target p95, each with the ``gamma`` that gives ``I``
(:func:`estimators.mapfit.fit_map2`). Along it the SCV ranges widely -- on Mi et al.'s (2008) browsing
database (``I`` = 188, p95 = 26 ms) from 7.2 to 21.4 -- and the model's response time with it
(the database's residence at 50 users: 51 to 84 ms). The paper's footnote takes the largest
lag-1 autocorrelation (SCV 13.7 there, against a true 19.3; docs/accuracy.md section 1); no
statistic of the windows' utilization and completions decides it.

The response time measured at the tier does. At the measured population ``N`` the model's
residence time at the tier, ``R_m(N)``, grows with the SCV along the curve, so the SCV
(``bursty_scv = "response"``, :func:`calibrate_scv`) is the one at which

    R_m(N) = sum_c p_c V_{m,c} r_{m,c}

with ``r_{m,c}`` the tier's long-run per-visit response time of class ``c``
(:attr:`streams.core.tier.TierModel.class_response`) and ``N`` the users over the same
intervals with the same weights (:attr:`~streams.core.tier.TierModel.response_users`). It is
found by regula falsi on ``ln SCV`` between the curve's two ends (:data:`STEPS` fits and solves at
most, stopping within :data:`TOLERANCE`; the trials solved by decomposition,
:func:`solvers.decomposition.solve_decomposed`, within 0.5% of the exact chain on a bursty
3-tier network at 10-25 users). A measured time beyond the curve's reach takes the
nearer end, flagged. Bursty tiers are calibrated one at a time in tier order, each with the
ones before it already calibrated (one Gauss-Seidel pass). The last SCV is kept while the
model with its SCV, refitted to the fit's current inputs, stays within :data:`KEEP` of the
measured time (one fit and one solve instead of a search; nothing while the inputs, the users
and the measured time stand: :func:`_keep`). When it no longer holds, the search brackets
the measured time from that trial outwards (:func:`_warm_bracket`) instead of from the
curve's ends: on ``bench_pipeline.py --bursty --multicore`` the residence at the curve's low
end is a tenth of the measured one and the regula falsi from there took 8-10 trials, 47 of 80
searches stopping at :data:`STEPS`.

This is model calibration at the operating point: the one population the system was measured
at then agrees with the model by construction, and what the model says at other populations
is the test (docs/accuracy.md section 1: Mi et al.'s (2008) experiment, truth at 25-150 users).

``bursty_scv = "response_idc"`` (the default, :func:`calibrate_idc`) moves
``I`` instead (within its confidence interval and :data:`IDC_REACH` of the estimate) and keeps
the tie rule's SCV: an hour of 5-s windows reads a bursty database's ``I`` 152-247 around ~207,
and the capacity follows ``I`` while the SCV calibration matches the response time at the
current load only (docs/accuracy.md section 12, end to end: the capacities of twelve one-hour
runs within 10% of the truth on 12 seeds against 5, the calibrated ``I`` 186-222). On the experiment
of Mi et al. (2008) (section 1) either meets the accuracy targets; the SCV calibration reads the
default run's response times closer (5.1% against 11.1% max), the ``I`` calibration the other
window lengths and think times (11.1% against 14.9% at worst). The last ``I`` is kept, refitted
to the current mean and p95, while the model with it stays within :data:`KEEP` of the
measured time (:func:`_keep_idc`: one solve instead of a search).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from estimators.mapfit import fit_map2
from solvers.processes import MAP
from streams.core.tier import TierModel
from streams.predict.model import SystemModel
from streams.predict.open_model import tier_residence

__all__ = ["Calibration", "OpenRate", "calibrate_idc", "calibrate_scv", "calibrate_model",
           "measured_residence", "operating_point"]

#: most fits (each with one solve at the measured population) per tier
STEPS = 10
#: relative agreement of the model's residence time with the measured one that stops early
TOLERANCE = 0.01
#: relative disagreement up to which a tier's last SCV is kept (refitted to moved inputs)
KEEP = 0.05
#: ``bursty_scv = "response_idc"`` searches ``I`` within its interval and within this factor
#: of the estimate either way (an interval's upper end can be unbounded)
IDC_REACH = 4.0
#: SCV hints beyond either end of any fitted curve
_ENDS = (1e-3, 1e6)
#: a warm search's step from the last SCV, in ``ln SCV`` (:func:`_warm_bracket`)
WARM_STEP = math.log(1.2)
#: the search stops once its bracket is this narrow in ``ln SCV`` (0.1%): near the low end of
#: a saturated tier's curve the residence jumps fivefold within it (``bench_pipeline.py
#: --bursty --multicore``: 15 ms at SCV 2.421, 76 ms at 2.45), and trials there repeat
RESOLUTION = 1e-3


@dataclass(frozen=True)
class OpenRate:
    """An open workload's operating point: the total request rate ``rate`` (per second) at
    which the tier's response times were measured, where a closed workload has its users.
    The calibration's trials then solve the open model at that rate
    (:func:`streams.predict.open_model.tier_residence`) instead of the closed one at the
    users: the same rule, ``R_m(x) = sum_c p_c V_{m,c} r_{m,c}``, on the model the
    predictions use."""

    rate: float

    def __str__(self) -> str:
        return f"{self.rate:.4g}/s"


#: where a calibration was measured: the users of a closed workload, or an open one's rate
Operating = int | OpenRate


@dataclass(frozen=True)
class Calibration:
    """Outcome for one tier: the process, its SCV, the model's and the measured residence
    time at ``users``; ``end`` is ``"low"`` / ``"high"`` when the measured time is beyond the
    curve's reach (the nearer end taken), else ``None``; ``inputs`` the fit's (mean, ``I``,
    p95)."""

    process: MAP
    scv: float
    residence: float
    measured: float
    users: Operating
    end: str | None
    inputs: tuple[float, float, float]
    #: ``response_idc`` beyond ``I``'s reach: the SCV moved along the fitted curve too
    shape: bool = False
    #: ... and the end of ``I``'s range that was taken
    idc_end: str | None = None


def measured_residence(tier: TierModel, model: SystemModel, m: int) -> float | None:
    """``sum_c p_c V_{m,c} r_{m,c}``: the measured residence time per request at tier ``m``;
    ``None`` unless every class of the mix has a long-run response time there."""
    V = model.visits[m] if model.visits is not None else np.ones(len(model.classes))
    total = 0.0
    for c, p, v in zip(model.classes, model.mix.tolist(), V.tolist()):
        if p > 0 and v > 0:
            r = tier.class_response.get(c)
            if r is None or not math.isfinite(r) or r < 0:
                return None
            total += p * v * r
    return total


def _with_process(model: SystemModel, m: int, process: MAP,
                  trial: bool = False) -> SystemModel:
    """``model`` with tier ``m``'s process replaced; a ``trial`` is solved by decomposition
    only (``O(N)``; the exact chain of a 3-tier network at 25 users is ~100x slower)."""
    procs = list(model.processes or [])
    procs[m] = process
    extra = {"exact_limit": 0} if trial else {}
    return model.variant(processes=procs, flags=[], **extra)


def _residence(model: SystemModel, m: int, process: MAP, users: Operating) -> float:
    """Tier ``m``'s residence time at ``users`` with ``process`` there (a trial); at an
    :class:`OpenRate`, of the open model at that rate (``inf`` where the tier saturates)."""
    if isinstance(users, OpenRate):
        return tier_residence(_with_process(model, m, process), m, users.rate)
    return float(_with_process(model, m, process, trial=True).at(users).residence[m])


def calibrate_scv(model: SystemModel, m: int, inputs: tuple[float, float, float],
                  users: Operating, measured: float,
                  last: Calibration | None = None) -> Calibration:
    """The MAP(2) of tier ``m`` fitted to ``inputs`` (mean, ``I``, p95) whose SCV makes the
    model's residence time at the tier at ``users`` equal ``measured`` (module docstring).
    ``model`` must have processes (the MAP network), ``users >= 1`` (or an :class:`OpenRate`
    above 0) and ``measured > 0``.
    ``last``: the tier's
    previous calibration, carried over while it holds (:func:`_keep`)."""
    _check(model, users, measured)
    start = None
    if last is not None:
        kept, start = _keep(model, m, inputs, users, measured, last)
        if kept is not None:
            return kept

    solved: dict[float, tuple[MAP, float, float]] = {} if start is None else {start[1]: start}

    def trial(hint: float) -> tuple[MAP, float, float]:
        fit = fit_map2(*inputs, scv=hint)
        if fit.scv not in solved:      # hints beyond an end of the curve fit the same MAP(2)
            solved[fit.scv] = (fit.process, fit.scv, _residence(model, m, fit.process, users))
        return solved[fit.scv]

    bracket = _warm_bracket(trial, start, measured) if start is not None else None
    if bracket is not None and bracket[1] is None:          # beyond the curve's reach
        end = bracket[0]
        return Calibration(end[0], end[1], end[2], measured, users,
                           "high" if end[2] < measured else "low", inputs)
    if bracket is not None:
        lo, hi = bracket
    else:
        lo, hi = trial(_ENDS[0]), trial(_ENDS[1])
        if measured <= lo[2] or hi[1] <= lo[1]:
            return Calibration(lo[0], lo[1], lo[2], measured, users, "low", inputs)
        if measured >= hi[2]:
            return Calibration(hi[0], hi[1], hi[2], measured, users, "high", inputs)
    best = _regula_falsi(trial, lo, hi, measured)
    return Calibration(best[0], best[1], best[2], measured, users, None, inputs)


def _check(model: SystemModel, users: Operating, measured: float) -> None:
    if model.processes is None:
        raise ValueError("model: has no MAP network to calibrate")
    if isinstance(users, OpenRate):
        if not (users.rate > 0 and math.isfinite(users.rate)):
            raise ValueError(f"rate: must be a positive finite request rate, got "
                             f"{users.rate!r}")
    elif users < 1:
        raise ValueError(f"users: must be >= 1, got {users!r}")
    if not (measured > 0 and math.isfinite(measured)):
        raise ValueError(f"measured: must be a positive finite time, got {measured!r}")


def _regula_falsi(trial: Callable[[float], tuple[MAP, float, float]],
                  lo: tuple[MAP, float, float], hi: tuple[MAP, float, float],
                  measured: float) -> tuple[MAP, float, float]:
    """Regula falsi (Illinois) on ``f = ln R_m - ln measured`` over ``x = ln v`` between two
    trials ``(process, v, R_m)`` that straddle ``measured`` (``v`` the SCV or ``I``): ``R_m`` is
    smooth and monotone in ``v``, so a few trials after the bracket. Returns the trial nearest
    ``measured``."""
    target = math.log(measured)
    a, fa = math.log(lo[1]), math.log(lo[2]) - target
    b, fb = math.log(hi[1]), math.log(hi[2]) - target
    best, side = min((lo, hi), key=lambda t: abs(t[2] / measured - 1.0)), 0
    for _ in range(STEPS - 2):
        if b - a <= RESOLUTION:        # the residence jumps within the bracket: the best trial
            break
        x = b - fb * (b - a) / (fb - fa) if fb != fa else 0.5 * (a + b)
        if not a < x < b:
            x = 0.5 * (a + b)
        mid = trial(math.exp(x))
        fx = math.log(mid[2]) - target
        if abs(mid[2] / measured - 1.0) < abs(best[2] / measured - 1.0):
            best = mid
        if abs(mid[2] / measured - 1.0) <= TOLERANCE:
            break
        if fx < 0:
            a, fa = x, fx
            fb, side = (fb / 2 if side == -1 else fb), -1
        else:
            b, fb = x, fx
            fa, side = (fa / 2 if side == 1 else fa), 1
    return best


def calibrate_idc(model: SystemModel, m: int, inputs: tuple[float, float, float],
                  users: Operating, measured: float,
                  bounds: tuple[float | None, float | None],
                  last: Calibration | None = None) -> Calibration:
    """The MAP(2) of tier ``m`` fitted to ``inputs``' mean and p95 (the tie rule's SCV) at the
    ``I`` within ``bounds`` -- ``I``'s confidence interval, narrowed to :data:`IDC_REACH`
    times the estimate either way -- at which the model's residence time at the tier at
    ``users`` equals ``measured`` (``bursty_scv = "response_idc"``; module docstring). The
    calibration's ``inputs`` carry the ``I`` found. ``last``: the tier's previous
    calibration, whose ``I`` is carried over while it holds (:func:`_keep_idc`)."""
    _check(model, users, measured)
    mean, idc, p95 = inputs
    low, high = bounds
    low = max(low if low is not None and low > 0 else 0.0, idc / IDC_REACH)
    high = min(high if high is not None and math.isfinite(high) else math.inf, idc * IDC_REACH)

    def trial(value: float) -> tuple[MAP, float, float]:
        process = fit_map2(mean, value, p95).process
        return process, value, _residence(model, m, process, users)

    def found(best: tuple[MAP, float, float], end: str | None) -> Calibration:
        return Calibration(best[0], float(best[0].scv), best[2], measured, users, end,
                           (mean, best[1], p95))

    if last is not None and last.shape:
        # beyond I's reach last time: while the bound still falls short, straight to the shape
        value = min(max(last.inputs[1], low), high)
        bound = trial(value)
        if value in (low, high) and _beyond(last.idc_end, bound[2], measured):
            return _shape_beyond_reach(model, m, found(bound, last.idc_end), last)
    elif last is not None:
        kept = _keep_idc(trial, last, measured, low, high)
        if kept is not None:
            return found(*kept)
    lo, hi = trial(low), trial(high)
    end = None
    if measured <= lo[2] or hi[2] <= lo[2]:
        best, end = lo, "low"
    elif measured >= hi[2]:
        best, end = hi, "high"
    else:
        best = _regula_falsi(trial, lo, hi, measured)
    if end is None:
        return found(best, end)
    return _shape_beyond_reach(model, m, found(best, end), last)


def _shape_beyond_reach(model: SystemModel, m: int, at_end: Calibration,
                        last: Calibration | None) -> Calibration:
    """Where the measured time is beyond ``I``'s reach (``at_end``: the calibration at the
    end of ``I``'s range taken), the fit's remaining freedom: the SCV along the curve of
    marginals with the measured mean and p95 at that ``I`` (:func:`calibrate_scv`). Mi et al.
    (2008) fit a MAP(2) to the mean, ``I`` and p95 and leave the marginal's shape free; when
    ``I`` within its confidence interval cannot bring the model's residence time to the
    measured one, the shape is what the data leave to move (a database whose slow queries
    come in long runs has a different marginal from the one the tie rule picks). Kept only
    when it comes nearer the measured time; the result keeps ``end`` when the curve does not
    reach it either, and is marked ``shape`` (so the next solve searches again rather than
    refit the tie rule's SCV)."""
    warm = last if last is not None and last.shape else None
    moved = calibrate_scv(model, m, at_end.inputs, at_end.users, at_end.measured, warm)
    if abs(moved.residence / moved.measured - 1.0) >= abs(at_end.residence / at_end.measured
                                                          - 1.0):
        return at_end
    return Calibration(moved.process, moved.scv, moved.residence, moved.measured, moved.users,
                       moved.end, at_end.inputs, shape=True, idc_end=at_end.end)


def _keep_idc(trial: Callable[[float], tuple[MAP, float, float]], last: Calibration,
              measured: float, low: float, high: float
              ) -> tuple[tuple[MAP, float, float], str | None] | None:
    """``last``'s ``I`` (within today's ``[low, high]``), refitted to the current mean and
    p95, while the model with it stays within :data:`KEEP` of ``measured`` -- or, where
    ``last`` ended at a bound, while that bound still does not reach it: one solve instead of
    a search's four or more (an hour of system (b)'s windows: 181 trials for 45 searches).
    Returns ``(trial, end)`` or ``None`` (search)."""
    value = min(max(last.inputs[1], low), high)
    kept = trial(value)
    at_end = (last.end == "high" and value == high) or (last.end == "low" and value == low)
    end = last.end if at_end else None
    if _beyond(end, kept[2], measured):
        return kept, end
    return (kept, None) if _holds(None, kept[2], measured) else None


def _beyond(end: str | None, residence: float, measured: float) -> bool:
    """Whether a calibration taken at its search's ``end`` still falls short of ``measured``
    with the model's ``residence`` now (``"high"``: below it; ``"low"``: above it)."""
    return (end == "high" and measured >= residence) or (end == "low" and measured <= residence)


def _holds(end: str | None, residence: float, measured: float) -> bool:
    """Whether a last calibration still holds: :func:`_beyond` its ``end``, or the model's
    ``residence`` within :data:`KEEP` of ``measured``."""
    return _beyond(end, residence, measured) or abs(residence / measured - 1.0) <= KEEP


def _keep(model: SystemModel, m: int, inputs: tuple[float, float, float], users: Operating,
          measured: float, last: Calibration
          ) -> tuple[Calibration | None, tuple[MAP, float, float] | None]:
    """``last`` carried over while it still holds: as it is (no solve) at the same inputs and
    users and a measured time within ``KEEP / 3`` of the last; else its SCV refitted to the
    new inputs (one fit, no search) if the model with it is within :data:`KEEP` (one solve).
    Returns ``(kept or None, the trial at the last SCV or None)``: a search starts from it."""
    if (last.inputs == inputs and last.users == users
            and abs(measured / last.measured - 1.0) <= KEEP / 3):
        return last, None
    process = last.process if last.inputs == inputs else fit_map2(*inputs, scv=last.scv).process
    r = _residence(model, m, process, users)
    start = (process, float(process.scv), r)
    if not _holds(last.end, r, measured):
        return None, start
    return Calibration(process, float(process.scv), r, measured, users, last.end, inputs), start


def _warm_bracket(trial: Callable[[float], tuple[MAP, float, float]],
                  start: tuple[MAP, float, float], measured: float
                  ) -> tuple[tuple[MAP, float, float], tuple[MAP, float, float] | None] | None:
    """Two trials ``(lo, hi)`` by SCV whose residence times straddle ``measured``, from
    ``start`` (the last SCV's trial): one step of :data:`WARM_STEP` in ``ln SCV`` towards it,
    else that step and the curve's end on its side; ``(end, None)`` when that end does not
    reach it either (beyond the curve's reach there). ``None`` (the search from both ends)
    when a step does not move along the curve (``start`` at its end already) or the residence
    does not rise with the SCV."""
    if not math.isfinite(start[2]):
        return None
    up = start[2] < measured
    prev = start
    for hint in (start[1] * math.exp(WARM_STEP if up else -WARM_STEP), _ENDS[1 if up else 0]):
        cur = trial(hint)
        if (cur[1] > prev[1]) != up or (cur[2] > prev[2]) != up:
            return None
        if (cur[2] >= measured) == up:
            return (prev, cur) if up else (cur, prev)
        prev = cur
    return prev, None


def operating_point(tier: TierModel, model: SystemModel, m: int,
                    open_workload: bool = False) -> Operating | None:
    """Where tier ``m``'s long-run response times were measured: the users over the same
    intervals and weights (:attr:`~streams.core.tier.TierModel.response_users`, rounded), or
    on an open workload the total request rate, the tier's completion rate over them
    (:attr:`~streams.core.tier.TierModel.response_rate`) over its visits per request
    ``sum_c p_c V_{m,c}`` (the forced flow law, Lazowska et al. 1984). ``None`` when
    unknown (no users, or no rate, reported with the response times)."""
    if open_workload:
        V = model.visits[m] if model.visits is not None else np.ones(len(model.classes))
        visits = float(model.mix @ V)
        rate = tier.response_rate
        if rate is None or not (visits > 0 and rate > 0 and math.isfinite(rate / visits)):
            return None
        return OpenRate(rate / visits)
    users = tier.response_users
    return None if users is None or round(users) < 1 else int(round(users))


def calibrate_model(model: SystemModel, tiers: list[TierModel],
                    last: dict[str, Calibration] | None = None,
                    vary: str = "scv", open_workload: bool = False) -> SystemModel:
    """``model`` with every bursty tier's MAP(2) calibrated to its measured response time
    (tiers without a fit's inputs, response times or users keep the tie rule's, flagged).
    ``last``: the caller's previous calibrations by tier, updated in place;
    ``vary``: ``"scv"`` (:func:`calibrate_scv`) or ``"idc"`` (:func:`calibrate_idc`);
    ``open_workload``: the model is solved open (:mod:`streams.predict.open_model`), so the
    trials are too, at the request rate the response times were measured at
    (:func:`operating_point`). Without it ``I``'s point estimate alone sets an open model's
    burstiness, and twenty minutes of 5-s windows read it widely: on docs/accuracy.md
    section 19's open ramp (bursty 8-core database, true ``I`` 202) 156-340, the flat
    part's predicted response time 3-7% above the long-run one on seeds 1-3 from ``I``
    alone; the response times measured at the tier pin it within its interval, as on a
    closed workload."""
    if model.processes is None:
        return model
    for m, tier in enumerate(tiers):
        if not (tier.bursty and tier.fit and model.processes[m].order > 1):
            continue
        inputs = tier.fit.get("inputs")
        measured = measured_residence(tier, model, m)
        point = operating_point(tier, model, m, open_workload)
        if inputs is None or not (measured or 0.0) > 0 or point is None:
            model.flags.append(f"{tier.tier}: MAP(2) SCV by the tie rule (largest rho1): "
                               f"no long-run response times and "
                               f"{'request rate' if open_workload else 'users'} at the tier")
            continue
        fit_inputs = (float(inputs[0]), float(inputs[1]), float(inputs[2]))
        previous = last.get(tier.tier) if last is not None else None
        if vary == "idc":
            result = calibrate_idc(model, m, fit_inputs, point, measured,
                                   (tier.idc_lower, tier.idc_upper), previous)
            text = _flag(tier.tier, result, idc_estimate=fit_inputs[1])
        else:
            result = calibrate_scv(model, m, fit_inputs, point, measured, previous)
            text = _flag(tier.tier, result, float(tier.fit.get("scv", math.nan)))
        if last is not None:
            last[tier.tier] = result
        flags = model.flags
        model = _with_process(model, m, result.process)
        model.flags = flags + [text]
        model.scv_targets[tier.tier] = result.scv
    return model


def _flag(tier: str, c: Calibration, tie_scv: float = math.nan,
          idc_estimate: float | None = None) -> str:
    """The prediction's flag for a calibrated tier: its SCV beside the tie rule's, or (with
    ``idc_estimate``, ``response_idc``) its ``I`` beside the windows' estimate; the SCV is
    named the tie rule's only where the calibration kept it (``shape`` moved it along the
    fitted curve, which the flag's tail says)."""
    if idc_estimate is None:
        head, aside, reach = f"SCV {c.scv:.3g}", f"tie rule {tie_scv:.3g}", "the fitted curve's"
    else:
        head, reach = f"I {c.inputs[1]:.3g}", "I's interval's"
        aside = f"I estimated {idc_estimate:.3g}" + (
            "" if c.shape else f"; SCV {c.scv:.3g} by the tie rule")
    text = (f"{tier}: MAP(2) {head} from the measured response time "
            f"{1000 * c.measured:.3g} ms at {_at(c.users)} (model {1000 * c.residence:.3g} ms; "
            f"{aside})")
    if c.shape:
        text += (f"; beyond I's interval's reach, the marginal's SCV moved to {c.scv:.3g} "
                 "along the fitted curve")
        if c.end is not None:
            text += f"; beyond its reach too, its {c.end} end taken"
    elif c.end is not None:
        text += f"; beyond {reach} reach, its {c.end} end taken"
    return text


def _at(users: Operating) -> str:
    """A calibration's operating point in a flag: ``12 users`` or ``67.3/s``."""
    return str(users) if isinstance(users, OpenRate) else f"{users} users"
