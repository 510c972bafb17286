"""An FCFS tier below the burstiness threshold whose service is clearly not exponential: its
SCV from the response time measured at the tier, in MVA's residual-life correction.

A tier whose index of dispersion stays under ``idc_threshold`` is solved by exponential MVA.
Yet a tier with a few cores whose service times vary widely -- a lognormal or Pareto service,
or service switching quickly between a fast and a slow mode -- queues longer than exponential
service does: the job in service has the mean residual ``S (1 + c^2) / 2`` (the renewal
paradox), and on one core the wait grows with ``(1 + c^2) / 2`` (Pollaczek-Khinchine). On the
held-out shapes (docs/accuracy.md) such tiers (lognormal, Pareto and fast-switching MMPP
service on one or two cores) read ``I`` 4-9 and the exponential model put the capacity 9-49%
high.

Two pieces of evidence must agree before the SCV moves (:func:`general_model`):

* **``I``'s interval clearly above 1** (its lower bound above :data:`EVIDENCE_IDC`): for a
  renewal process ``I`` equals the SCV (Cox and Lewis 1966), so an interval above 1 says the
  service varies more than exponential service does -- or that the class mix drifted (an
  exponential tier of the default workload reads ``I`` up to ~7 from that alone);
* **the measured response time at the tier above the exponential model's** by more than
  :data:`MARGIN` at the users it was measured at (``sum_c p_c V_{m,c} r_{m,c}``,
  :func:`streams.predict.calibration.measured_residence`): class-mix drift raises ``I`` but
  not the queueing at the tier, which the exponential model then matches.

Then the SCV ``c_m^2`` is the one at which the model's residence time at the tier, with the
correction of :func:`solvers.mva_general.mva_curve_general` (Reiser 1979; Lazowska et al.
1984), equals the measured one at those users -- bisection in ``ln c^2`` between 1 and the
upper end of ``I``'s interval (``I = c^2 (1 + 2 sum_k rho_k)`` over the lag-``k``
autocorrelations of the service times, Cox and Lewis 1966, so ``c^2 <= I`` where they are not
negative; an unbounded interval takes :data:`SCV_CAP`), the upper end taken (flagged) where
even that does not reach it. The SCV so found is an effective one: it also carries what the
service's correlation adds to the queue at the operating point. Tiers are calibrated one at
a time in tier order, each with the ones before already corrected, as the bursty tiers'
MAP(2) are (:mod:`streams.predict.calibration`). Only the MVA route without pools: a model
with a MAP network keeps its exponential non-bursty tiers.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from solvers.mva_general import general_rows
from streams.core.tier import TierModel
from streams.predict.calibration import measured_residence
from streams.predict.model import SystemModel

__all__ = ["general_model", "EVIDENCE_IDC", "MARGIN", "SCV_CAP"]

#: ``I``'s lower bound must exceed this for a tier to be taken as non-exponential
EVIDENCE_IDC = 1.0
#: the measured residence must exceed the exponential model's by this share
MARGIN = 0.1
#: the SCV's upper end where ``I``'s interval is unbounded above
SCV_CAP = 100.0
#: bisection steps in ``ln c^2`` (the bracket narrows to ``2^-STEPS`` of its width)
STEPS = 30
#: relative agreement with the measured residence that stops the bisection early
TOLERANCE = 0.005


def _trials(model: SystemModel) -> Callable[[np.ndarray, int, int], float]:
    """``residence(scv, m, n)``: ``model.variant(scv=scv).mva_at(n).residence[m]`` bit for
    bit (tested) -- the recursion up to ``n`` (beyond :meth:`SystemModel.asymptote_start`,
    extrapolated from there as :meth:`SystemModel.mva_at` does), the tiers' delays added
    back -- without a model, a curve or a point per trial: the bisection asks tens of them a
    solve."""
    rows = general_rows(model.D, model.solver_think, model.servers)
    n0 = model.asymptote_start()
    delays = None if model.delays is None else model.delay_m

    top_two, isfinite = rows.top_two, math.isfinite                  # type: ignore[attr-defined]

    def residence(scv: np.ndarray, m: int, n: int) -> float:
        cv2 = scv.tolist()
        if not (len(cv2) == len(model.tiers) and min(n, n0) >= 2
                and all(isfinite(v) and v >= 0 for v in cv2)):
            if n <= n0:
                (Rm,) = rows(scv, n, [n])
            else:
                top, below = rows(scv, n0, [n0, n0 - 1])
                Rm = top + (n - n0) * (top - below)
        elif n <= n0:
            Rm, _ = top_two(cv2, n)
        else:
            top, below = top_two(cv2, n0)
            Rm = top + (n - n0) * (top - below)
        return float(Rm[m] if delays is None else (Rm + delays)[m])

    return residence


def _candidate(model: SystemModel, tier: TierModel, m: int) -> bool:
    """FCFS, exponential in the model, and ``I``'s interval above :data:`EVIDENCE_IDC`."""
    ps = model.ps is not None and bool(model.ps[m])
    return (not ps and not tier.bursty and not tier.provisional and tier.idc is not None
            and tier.idc_lower is not None and tier.idc_lower > EVIDENCE_IDC)


def general_model(model: SystemModel, tiers: list[TierModel]) -> SystemModel:
    """``model`` with each FCFS tier whose evidence says its service is not exponential
    (module docstring) solved with its SCV; ``model`` itself when none is, or when the model
    is not solved by MVA alone (a MAP network, pools)."""
    if model.processes is not None or model.pools:
        return model
    scv = np.ones(len(model.tiers)) if model.scv is None else np.array(model.scv, dtype=float)
    flags: list[str] = []
    residence = None
    for m, tier in enumerate(tiers):
        if not _candidate(model, tier, m):
            continue
        measured = measured_residence(tier, model, m)
        users = tier.response_users
        if not (measured or 0.0) > 0 or users is None or round(users) < 1:
            continue
        n = int(round(users))
        residence = residence or _trials(model)
        base = residence(scv, m, n)
        if not measured > base * (1.0 + MARGIN):
            continue
        upper = tier.idc_upper if tier.idc_upper is not None and math.isfinite(tier.idc_upper) \
            else SCV_CAP
        upper = min(max(upper, 1.0), SCV_CAP)

        def at(value: float) -> float:
            trial = scv.copy()
            trial[m] = value
            return residence(trial, m, n)

        top = at(upper)
        if top <= measured:
            found, end = upper, top
            reach = "; beyond I's interval's reach, its upper end taken"
        else:
            lo, hi = 0.0, math.log(upper)
            found, end = upper, top
            for _ in range(STEPS):
                mid = 0.5 * (lo + hi)
                r = at(math.exp(mid))
                if abs(r / measured - 1.0) < abs(end / measured - 1.0):
                    found, end = math.exp(mid), r
                if abs(r / measured - 1.0) <= TOLERANCE:
                    break
                lo, hi = (mid, hi) if r < measured else (lo, mid)
            reach = ""
        scv[m] = found
        flags.append(f"{tier.tier}: FCFS with general service, SCV {found:.3g} from the "
                     f"measured response time {1000 * measured:.3g} ms at {n} users "
                     f"(exponential model {1000 * base:.3g} ms, now {1000 * end:.3g} ms; "
                     f"I {tier.idc:.3g} in [{tier.idc_lower:.3g}, "
                     f"{'inf' if tier.idc_upper is None else format(tier.idc_upper, '.3g')}])"
                     + reach)
    if not flags:
        return model
    return model.variant(scv=scv, flags=list(model.flags) + flags)
