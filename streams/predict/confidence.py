"""How far a solve's figures can be trusted: model error per class and per tier, the uncertainty
band of capacity and time to breach, and the trust mark of a predicted breach.

**Model error per class and tier.** The aggregate ``model_error``
(:meth:`streams.engine.system.SystemState._model_error`) weighs classes by throughput, so one class far
off (predicted 0.87 s, measured 1.25 s) hides among the others. Per class ``c`` with a measured
mean response time ``R_c^meas`` the relative error ``|R_c - R_c^meas| / R_c^meas``
(:func:`class_errors`), per tier the absolute utilization error ``|U_m - U_m^meas|``
(:func:`tier_errors`), and the worst of each.

One solve's measured mean is a sample: a class with few completions per solve interval, or a
bursty tier whose slow runs fall in one minute and not the next, gives a measured mean far
from the long-run one (the demo's shop: per-solve errors of 100-1,200% on ``best_sellers``
whose minute means range 7-190 ms). What the ``model_error`` alert watches is therefore pooled
(:func:`pooled_errors`) over the last :data:`ERROR_WINDOW` solves of the same model family
(:func:`error_sample` per solve): per class, with ``k_i`` its completions at solve ``i`` and
``e_i = R_{c,i} - R_{c,i}^meas``, the completion-weighted mean error
``e = sum_i w_i e_i`` (``w_i = k_i / sum k``) relative to the completion-weighted measured mean,
with the standard error of a weighted mean of batch means,
``se^2 = K/(K-1) sum_i w_i^2 (e_i - e)^2`` (the spread between solves is the class's own noise,
whatever its cause: few completions or burstiness). A class counts towards the alert only when
its pooled error is significant: ``|e| > t se``, ``t`` the two-sided :data:`ERROR_LEVEL`
(99%) Student-t quantile with ``K - 1`` degrees of freedom (3.25 at ``K = 10``, 9.9 at the
first ``K = ERROR_MIN_SOLVES = 3``), strict because every class is tested at every solve and a
heavy-tailed class's spread between a few solves errs small; the aggregate (all classes
pooled per solve) likewise. So a rare class's noise does not mark
the model untrusted, while a class that is off at every solve (the 0.87 s against 1.25 s
above, at any traffic) is: its errors do not scatter around zero. Solves are batches of a
minute, and a bursty tier's minutes are correlated, so ``se`` errs small (towards firing).

**Uncertainty band.** Capacity is solved twice more on the same model with the estimators'
uncertainty pushed one way, then the other (:func:`band`):

* every tier's aggregate demand ``D_m`` at ``+-z`` standard errors (:data:`BAND_Z` = 1.645: a
  nominal 90% interval of each demand). With ``w_c = p_c V_{m,c}``
  and the Kalman filter's demands ``d`` and covariance ``P`` (Huang et al. 2012, eqs. (4)-(6)),
  ``Var(sum_c w_c d_c) = w' P w`` -- the full covariance, so classes whose demands trade off
  (under a steady mix the split is barely observable, their errors anti-correlated) do not
  inflate the aggregate's error. The relative standard error ``s_m = sqrt(w' P w) / w' d`` scales
  the model's ``D_{m,c}`` (whatever estimator it took them from) by ``1 +- z s_m``;
* every bursty tier's MAP(2) refitted (:func:`estimators.mapfit.fit_map2`, same mean and p95)
  at the ends of ``I``'s confidence interval (``idc_lower`` / ``idc_upper``,
  :func:`estimators.dispersion.index_of_dispersion_interval`) -- the upper end with the higher
  demands (the pessimistic model), the lower end with the lower demands (the optimistic one).
  An unbounded upper end leaves the fitted MAP(2) in place and flags it.

The band is ``[capacity_users_lower, capacity_users_upper]`` and the times to breach the users
trend gives at each end. **With quantile SLOs** (``slo``) the ends are capacities on every SLO
like the nominal one: each variant keeps the SLOs and its capacity search reads the quantiles
of its own response-time law, so the band is on the quantile the SLO names (a ``band_flags``
line says so, :func:`streams.predict.slo_view.band_note`). There is no separate band on the
predicted quantile's value: what the alert and the remedies act on is the capacity, and the
quantile at a given population moves with the demands as the capacity does. It costs two
capacity searches and two MAP(2) fits (~10 ms each).
On the MAP network the band's searches solve by flow-equivalent decomposition
(:func:`solvers.decomposition.solve_decomposed`, ``O(N)``; about 200 times cheaper than the
exact chain at 130 users of the demo's shop, throughput within 0.3% of it) at a coarser
resolution (:data:`BAND_TOLERANCE`), started from the nominal capacity scaled by the variant's
MVA capacity ratio. Even so it is computed only when the system is at risk (a breach within
:data:`BAND_RISK_FACTOR` horizons) and on every :data:`BAND_EVERY`-th solve otherwise
(bench/speed/pipeline.py, docs/benchmarks.md); the report bridges the solves between two
band points.

**Calibration** (bench/accuracy/band.py, docs/accuracy.md): the two ends are not the quantiles of
one distribution -- every tier is pushed the same way at once (wider than a joint interval when
tiers' errors are independent) and ``I``'s interval is a 95% one -- so the band's level is
measured, not derived. Against the simulated true capacity of a three-tier shop over 4 seeds:
non-bursty, 91% of solves inside (width 6% of the capacity); bursty on the MAP network, 100%
inside but 97% wide (``I``'s interval dominates); bursty while the model is still MVA
(burstiness not yet measured), 37%: a band around the wrong model. The times to breach hold
the users trend fixed, so their band is too narrow (28% cover the true time on the
non-bursty shop).

**Trust.** A prediction is ``model_trusted`` only when the model has shown that it matches the
system where it stands (:func:`trust_reasons`, each failure a reason in ``trust_reasons``):
its mean response time at the operating point within :data:`TRUST_MARGIN` of the measured
one (``model_error``), where the entry tier measures quantiles the quantile a class's SLO
names within it too (``quantile_error``, :mod:`streams.predict.measured_quantiles`; the
reason names the class, the quantile and both values), no class's pooled error
significantly beyond it
(``model_error_class_max``), every tier's utilization within it (relative, where the tier
measures at least :data:`TRUST_MIN_UTILIZATION`), every tier's per-class split identified
where the tier reports per-class response times (:mod:`estimators.class_split`), and the
``model_error`` alert not active. A 20% margin is what the alerts assume: a capacity 20% off
moves a time to breach by as much, and the capacity's own uncertainty band is of that order.
A predicted breach that fires while the model is not trusted is marked: ``trust``
``"untrusted"`` (an InfluxDB tag, so a Grafana label) and its summary starts with
``UNTRUSTED``; when the model's trust changes while the breach alert stays active, a
``firing`` event with ``update = "trust"`` restates it (:func:`trust_events`).

**Like with like at the entry tier** (:func:`timed_point`). The measured response time is the
entry tier's own timer, whose span leaves out its framework's work before and after (the
testbed's app: 0.26 ms timed against 1.5 ms of CPU per request), and that work stays demand
(:func:`streams.predict.model.background_demands`, the ``background: <entry>`` flag): the
model's response time holds it, the timer's does not. Every error against the measured time
(``model_error``, the per-class and pooled errors, hence the ``model_error`` alert and the
trust) compares the model's time over the timed span: its response time less the untimed share
``1 - 1/g`` of the class's residence at the entry tier, ``g`` that tier's busy time (the
model's demand, no more than the measured one) over its timed time per request
(:func:`streams.predict.model.surplus`). The timed share stays tested;
the untimed work is tested where it is measured, by the tier's utilization. Without it the
error is the untimed residence itself, on every solve of every system whose entry tier's timer
misses work (the testbed at 20 users: ``home`` 5.4 ms predicted, 3.1 ms timed, 5.0 ms at the
clients), and carries no information about the model.

**A residual delay blocks trust only where it matters** (:func:`latency_reasons`). Where the
windows cannot separate a tier's CPU demand from a pure delay (``latency = "estimate"``, the
load varies too little), the delay is the residual time the demand does not explain
(:mod:`streams.predict.latency`), so it makes the tier's time match by construction. The other
reading the windows allow is that time as CPU demand; it moves the tier's demand over the mix
by ``sum_c p_c delta_{m,c} / sum_c p_c D_{m,c}``, and the capacity the tier bounds by about as
much (the bottleneck bound ``N* ~ (D + Z) / D_max``, Lazowska et al. 1984, ch. 5). So the
unidentified delay makes the prediction untrusted where that share exceeds
:data:`TRUST_MARGIN`; below it, it is a flag (``latency: ...``). On a steady real system the
load rarely varies enough to identify the delay: the testbed's database holds residual
delays of 0-15% of its demand at 5-20 users, 35-110% at 30 users, where its split fails.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache
from typing import Any, Callable, Mapping

import numpy as np
from scipy.stats import t as student_t

from estimators.mapfit import fit_map2
from solvers.processes import MAP
from streams.predict.capacity_search import capacity_search
from streams.predict.model import CAPACITY_LIMIT, SEARCH_TOL, Measured, Point, SystemModel, surplus
from streams.predict.slo_view import band_note
from streams.core.outputs import updated
from streams.core.tier import TierModel

__all__ = ["ERROR_WINDOW", "ERROR_LEVEL", "ERROR_MIN_SOLVES", "ALL_CLASSES", "error_sample",
           "pooled_errors", "significant_worst", "MIN_CLASS_SHARE", "BAND_RISK_FACTOR",
           "BAND_EVERY", "BAND_Z", "class_errors", "tier_errors", "worst",
           "relative_demand_error", "band", "band_due", "trust_events", "UNTRUSTED_PREFIX",
           "TRUST_MARGIN", "trust_reasons", "evidence_reasons", "EVIDENCE_LEVEL",
           "EVIDENCE_Z", "latency_reasons", "timed_point", "untimed_share"]

#: a class is reported as the worst per-solve one when it has at least this share of the
#: measured throughput
MIN_CLASS_SHARE = 0.05
#: solves whose errors are pooled for the model-error alert (module docstring)
ERROR_WINDOW = 10
#: a pooled error counts when it is outside this two-sided Student-t interval around zero
#: (``K - 1`` degrees of freedom) ...
ERROR_LEVEL = 0.99
#: ... over at least this many solves (a spread needs a few)
ERROR_MIN_SOLVES = 3
#: the name of the aggregate (all classes) in :func:`error_sample` / :func:`pooled_errors`
ALL_CLASSES = "*"
#: the band is computed at every solve whose time to breach is within this many horizons
BAND_RISK_FACTOR = 2.0
#: ... and on every this-many-th solve otherwise
BAND_EVERY = 5
#: the band pushes every tier's demand this many standard errors (``z``): 1.645, a nominal
#: 90% interval. Measured against simulated truth (bench/accuracy/band.py, docs/accuracy.md
#: section 13, the uncertainty band): on a non-bursty three-tier shop the true capacity is
#: inside the band at 91% of solves (80% at z = 1, the +-1 s.e. band used before)
BAND_Z = 1.645
#: relative resolution of the band's capacity searches on the MAP network
BAND_TOLERANCE = 0.05
#: the relative standard error applied downwards is capped here (demands stay positive)
MAX_RELATIVE_ERROR = 0.9
UNTRUSTED_PREFIX = "UNTRUSTED (the model has not shown it matches the measurements at its " \
                   "operating point; the prediction's trust_reasons say why): "
#: the relative margin within which the model must match the operating point to be trusted
TRUST_MARGIN = 0.2
#: utilizations below this are not held to the margin (a relative error of an idle tier)
TRUST_MIN_UTILIZATION = 0.05


def trust_reasons(pred: Any, tiers: list[TierModel], model: SystemModel | None = None,
                  undecided: list[TierModel] | None = None) -> list[str]:
    """Why the prediction ``pred`` is not to be trusted (empty: it is; module docstring,
    "Trust"), before the alerts: the mean response time at the operating point, the worst
    measured SLO quantile there, the worst class's pooled error, each tier's utilization,
    each tier's response-time split, each tier's delays where they are residuals that matter
    on ``model`` (:func:`latency_reasons`; without it, wherever they are residuals).
    ``undecided``: the tiers whose class split is not identified
    (:func:`streams.predict.model.undecided_splits`; ``None``: every tier whose windows did not
    identify it)."""
    out = []
    margin = TRUST_MARGIN
    err = pred.get("model_error")
    q_err = pred.get("quantile_error")
    p_err = pred.get("pool_error")      # a pool's error says so in its own reason
    if err is not None and err > margin and not (q_err is not None and q_err >= err) \
            and not (p_err is not None and p_err >= err):
        out.append(f"mean response time off the measured one by {100 * err:.0f}% at the "
                   f"operating point (margin {100 * margin:.0f}%)")
    worst, worst_err = pred.get("model_error_class"), pred.get("model_error_class_max")
    if worst is not None and worst_err is not None and worst_err > margin:
        out.append(f"class {worst!r} response time off by {100 * worst_err:.0f}% over the "
                   f"last solves (margin {100 * margin:.0f}%)")
    if q_err is not None and q_err > margin:
        out.append(f"class {pred.get('quantile_error_class')!r} "
                   f"{pred.get('quantile_error_quantile')} response time "
                   f"{pred.get('quantile_predicted_s'):.3g} s predicted against "
                   f"{pred.get('quantile_measured_s'):.3g} s measured at the entry tier: off "
                   f"by {100 * q_err:.0f}% (margin {100 * margin:.0f}%)")
    for name, part in (pred.get("tiers") or {}).items():
        u, measured = part.utilization, part.utilization_measured
        if u is not None and measured is not None and measured >= TRUST_MIN_UTILIZATION \
                and abs(u - measured) > margin * measured:
            out.append(f"{name} utilization {u:.2f} against {measured:.2f} measured "
                       f"(margin {100 * margin:.0f}%)")
    if undecided is None:
        undecided = [t for t in tiers if t.split_identified is False]
    out += [f"split_unidentified: {t.tier}: {t.split_reason}" for t in undecided]
    out += latency_reasons(tiers, model)
    return out


def latency_reasons(tiers: list[TierModel], model: SystemModel | None = None) -> list[str]:
    """One ``latency_unidentified`` reason per tier whose delays are residuals (a residual
    matches the operating point by construction and shows nothing of how the delay and the
    demand move with the load) and, on ``model``, make up more than :data:`TRUST_MARGIN` of
    its demand over the mix: taken as demand instead, they would move the tier's demand and
    the capacity it bounds beyond the margin (module docstring)."""
    out = []
    for m, t in enumerate(tiers):
        if t.latency is None or t.latency.identified.all():
            continue
        share = _delay_share(model, m) if model is not None else None
        if share is not None and share <= TRUST_MARGIN:
            continue
        note = "" if share is None else (f" (its delays {100 * share:.0f}% of its demand over "
                                         f"the mix, margin {100 * TRUST_MARGIN:.0f}%)")
        out.append(f"latency_unidentified: {t.tier}: {t.latency.reason}{note}")
    return out


def _delay_share(model: SystemModel, m: int) -> float | None:
    """``sum_c p_c delta_{m,c} / sum_c p_c D_{m,c}`` of tier ``m`` (0 without delays;
    ``None`` without a positive demand: the share cannot be told)."""
    if m >= len(model.tiers):
        return None
    demand = float(model.mix @ model.D_mc[m])
    if not demand > 0:
        return None
    return float(model.mix @ model.delays[m]) / demand if model.delays is not None else 0.0


def untimed_share(model: SystemModel, tiers: list[TierModel]) -> float:
    """``1 - 1/g``: the share of the entry tier's work outside its timed span, ``g`` its
    busy time per request over its requests' timed time there, as
    :func:`streams.predict.model.background_demands` reads it (the response-time split
    scaled to the busy time, over the classes timed; 1 within the noise margin) -- the busy
    time the model's demand, but no more than the one measured (``mean_service``): an
    estimator's demand above both is its error, which the timer is there to find, not work
    the timer misses. 0 where ``g`` cannot be read (no split or times, a bursty tier) --
    module docstring."""
    if not tiers or not model.tiers or tiers[0].tier != model.tiers[0]:
        return 0.0
    t, classes, mix = tiers[0], model.classes, model.mix
    if t.bursty or not t.response_rate or not t.class_response \
            or not (t.split and all(c in t.split for c in classes)):
        return 0.0
    V = model.visits[0] if model.visits is not None else np.ones(len(classes))
    per_visit = np.divide(model.D_mc[0], V, out=np.zeros(len(classes)), where=V > 0)
    shares = np.array([float(t.split[c]) for c in classes])
    base = float(mix @ shares)
    if not base > 0:
        return 0.0
    busy = float(mix @ per_visit)
    if t.mean_service is not None:
        busy = min(busy, float(t.mean_service))
    g = surplus(t, classes, shares * (busy / base), mix)
    return 1.0 - 1.0 / g if g > 1.0 else 0.0


def timed_point(model: SystemModel, tiers: list[TierModel], now: Point) -> Point:
    """``now`` with each class's response time over the entry tier's timed span: less the
    :func:`untimed_share` of its residence at the entry tier (its CPU residence, the wait
    for a pool token and the delays left out); ``now`` itself where the timer misses
    nothing (module docstring, "Like with like at the entry tier")."""
    share = untimed_share(model, tiers)
    if not share > 0:
        return now
    Rm = np.array(now.residence, dtype=float)
    if model.pools and now.pool_waiting is not None:
        for k, pool in enumerate(model.pools):
            Rm[pool.first] -= float(now.pool_waiting[k])
    entry = model.class_residence(Rm)[0]
    if model.delays is not None:
        entry = entry - model.delays[0]
    untimed = share * np.maximum(entry, 0.0)
    if not np.isfinite(untimed).all():
        return now
    return dataclasses.replace(now, response=np.asarray(now.response, dtype=float) - untimed)


#: one-sided level of the evidence rules (:func:`evidence_reasons`): the pooled error's upper
#: Student-t bound and the measured mean's burst-aware bound at 95%
EVIDENCE_LEVEL = 0.95
#: the standard normal quantile of :data:`EVIDENCE_LEVEL`
EVIDENCE_Z = 1.645


def evidence_reasons(pred: Any, completions: float | None) -> list[str]:
    """Why the prediction ``pred`` has not yet *shown* that it matches the operating point,
    beside :func:`trust_reasons` (which finds where it does not): a match is shown only by

    * a full error window: :data:`ERROR_WINDOW` solves on the current model family pooled
      (``model_error_solves``), whose pooled error's one-sided upper bound at
      :data:`EVIDENCE_LEVEL`, ``e + t se`` (Student-t, ``K - 1`` degrees of freedom), lies
      within :data:`TRUST_MARGIN` -- an equivalence test (Schuirmann 1987): failing to find
      a difference on a few noisy solves is not evidence of agreement, and a single solve's
      match is chance under bursty service;
    * measured means that can carry the margin: the mean of ``n`` correlated service times of
      index of dispersion ``I`` has a relative standard error of about ``sqrt(I / n)`` (the
      variance of a sum of ``n`` intervals grows as ``I n`` squared means: Cox and Lewis
      1966), so a tier whose ``I`` leaves ``z sqrt(I / n)`` beyond the margin over the
      ``completions`` of the error window has not been seen long enough to know its mean
      response time within it (``z`` = :data:`EVIDENCE_Z`; requests, not visits: a tier
      visited more often is held to more than it needs).

    On 43 held-out bursty shapes (bench/accuracy/shapes.py) the trusted solves whose mean
    response time was more than 20% off the simulated long-run truth went from 98 to 3 with
    these rules (docs/accuracy.md, "Shapes")."""
    out = []
    margin = TRUST_MARGIN
    k, e, se = (pred.get("model_error_solves"), pred.get("model_error_pooled"),
                pred.get("model_error_pooled_se"))
    if not k or k < ERROR_WINDOW or e is None or se is None:
        out.append(f"not yet shown: {k or 0} of {ERROR_WINDOW} solves pooled on this model")
    else:
        upper = e + _evidence_quantile(k - 1) * se
        if upper > margin:
            out.append(f"not yet shown: pooled error {100 * e:.0f}% +- {100 * se:.0f}% over "
                       f"{k} solves, upper bound {100 * upper:.0f}% beyond the margin "
                       f"{100 * margin:.0f}%")
    if completions is not None and completions > 0:
        for name, part in (pred.get("tiers") or {}).items():
            idc = part.idc
            if idc is None or not idc > 0:
                continue
            rel = EVIDENCE_Z * math.sqrt(idc / completions)
            if rel > margin:
                out.append(f"{name}: {completions:.0f} requests too few for its burstiness "
                           f"(I {idc:.3g}: its mean known to +-{100 * rel:.0f}%, margin "
                           f"{100 * margin:.0f}%)")
    return out


@lru_cache(maxsize=64)
def _evidence_quantile(dof: int) -> float:
    """The one-sided Student-t quantile of :data:`EVIDENCE_LEVEL` with ``dof`` degrees."""
    return float(student_t.ppf(EVIDENCE_LEVEL, dof))


# -- model error per class and tier ---------------------------------------------------------------
def class_errors(model: SystemModel, m: Measured, now: Point) -> dict[str, float | None]:
    """Per class, ``|R_c - R_c^meas| / R_c^meas`` at the current population (``None``: no
    measured response time, or it is 0)."""
    out: dict[str, float | None] = {}
    for i, c in enumerate(model.classes):
        r = m.response_time.get(c)
        out[c] = abs(float(now.response[i]) - r) / r if r is not None and r > 0 else None
    return out


def error_sample(model: SystemModel, m: Measured, now: Point) -> dict[str, list[float]]:
    """This solve's ``[completions, predicted R, measured R]`` per class with a measured mean
    response time and completions, and for :data:`ALL_CLASSES` (completion-weighted over
    them)."""
    out: dict[str, list[float]] = {}
    for i, c in enumerate(model.classes):
        r, x = m.response_time.get(c), m.throughput.get(c, 0.0)
        k = x * m.seconds
        if r is not None and k > 0:
            out[c] = [k, float(now.response[i]), float(r)]
    k_all = sum(v[0] for v in out.values())
    if k_all > 0:
        out[ALL_CLASSES] = [k_all, sum(v[0] * v[1] for v in out.values()) / k_all,
                            sum(v[0] * v[2] for v in out.values()) / k_all]
    return out


def pooled_errors(samples: list[Mapping[str, list[float]]]) -> dict[str, dict[str, Any]]:
    """Per name of the :func:`error_sample` s: ``error`` (``|e| / R^meas``, completion-weighted
    over the solves), ``se`` (its standard error, relative; ``None`` below
    :data:`ERROR_MIN_SOLVES` solves), ``solves``, ``completions`` and ``significant``
    (``|e| > t se``, ``t`` the Student-t quantile of :data:`ERROR_LEVEL` with ``K - 1``
    degrees of freedom) -- module docstring."""
    rows: dict[str, list[list[float]]] = {}
    for sample in samples:
        for name, row in sample.items():
            rows.setdefault(name, []).append(row)
    out: dict[str, dict[str, Any]] = {}
    # plain floats: at most ERROR_WINDOW rows per name (lists into fsum, a correctly rounded
    # sum: the same in any order, cheaper than generators)
    for name, data in rows.items():
        total = math.fsum([row[0] for row in data])
        if not total > 0:
            continue
        w = [row[0] / total for row in data]
        e = [row[1] - row[2] for row in data]
        e_bar = math.fsum([wi * ei for wi, ei in zip(w, e)])
        r_bar = math.fsum([wi * row[2] for wi, row in zip(w, data)])
        if not r_bar > 0:
            continue
        n = len(data)
        se = (math.sqrt(n / (n - 1) * math.fsum([(wi * (ei - e_bar)) ** 2
                                                 for wi, ei in zip(w, e)])) / r_bar
              if n >= ERROR_MIN_SOLVES else None)
        error = abs(e_bar) / r_bar
        t = _error_quantile(n - 1) if se is not None else math.inf
        out[name] = {"error": error, "se": se, "solves": n, "completions": total,
                     "significant": se is not None and error > t * se}
    return out


@lru_cache(maxsize=64)
def _error_quantile(dof: int) -> float:
    """The two-sided Student-t quantile of :data:`ERROR_LEVEL` with ``dof`` degrees of freedom
    (at most :data:`ERROR_WINDOW` - 1 of them: scipy's ``ppf`` once per value, not per solve)."""
    return float(student_t.ppf(0.5 + ERROR_LEVEL / 2, dof))


def significant_worst(pooled: Mapping[str, Mapping[str, Any]]) -> tuple[str | None,
                                                                       float | None]:
    """The class (not the aggregate) with the largest significant pooled error, and it."""
    return worst({c: v["error"] for c, v in pooled.items()
                  if c != ALL_CLASSES and v["significant"]})


def tier_errors(model: SystemModel, m: Measured, now: Point) -> dict[str, float | None]:
    """Per tier, ``|U_m - U_m^meas|`` (utilization per core, both in [0, 1]; ``None``: not
    measured)."""
    return {t: (abs(float(now.utilization[i]) - m.utilization[t])
                if m.utilization.get(t) is not None else None)
            for i, t in enumerate(model.tiers)}


def worst(errors: Mapping[str, float | None],
          weights: Mapping[str, float] | None = None,
          min_share: float = 0.0) -> tuple[str | None, float | None]:
    """The name and value of the largest error; with ``weights`` (throughput per name), only
    names with at least ``min_share`` of the total weight count."""
    total = sum((weights or {}).values())
    best: tuple[str | None, float | None] = (None, None)
    for name, e in errors.items():
        if e is None:
            continue
        if weights is not None and not (total > 0 and weights.get(name, 0.0) >= min_share * total):
            continue
        if best[1] is None or e > best[1]:
            best = (name, e)
    return best


# -- the uncertainty band ------------------------------------------------------------------------
def relative_demand_error(tier: TierModel, classes: list[str], mix: np.ndarray,
                          visits: np.ndarray) -> float | None:
    """``s_m = sqrt(w' P w) / w' d`` with ``w_c = p_c V_{m,c}`` over the Kalman filter's
    classes (module docstring); ``None`` without a filter or an aggregate demand."""
    P = tier.demand_cov
    if P is None or not tier.demands:
        return None
    names = list(tier.demands)
    weight = {c: p * v for c, p, v in zip(classes, mix.tolist(), visits.tolist())}
    w = np.array([weight.get(c, 0.0) for c in names])
    d = np.array([tier.demands[c] for c in names])
    mean = float(w @ d)
    if not (mean > 0 and P.shape == (len(names), len(names))):
        return None
    var = float(w @ P @ w)
    return math.sqrt(max(var, 0.0)) / mean if math.isfinite(var) else None


def _refit(tier: TierModel, idc: float | None, scv: float | None = None) -> MAP | None:
    """The tier's MAP(2) refitted at ``idc`` (its mean service and p95 kept, and ``scv``
    where the model calibrated it: :mod:`streams.predict.calibration`); ``None`` when it
    cannot be."""
    if idc is None or tier.mean_service is None or tier.p95 is None:
        return None
    if not (idc > 0 and tier.mean_service > 0 and tier.p95 > 0 and math.isfinite(idc)):
        return None
    try:
        return fit_map2(tier.mean_service, max(idc, 0.5), tier.p95, scv=scv).process
    except ValueError:
        return None


def band_variant(model: SystemModel, tiers: list[TierModel], side: int,
                 notes: list[str], z: float = 1.0) -> SystemModel:
    """The model with every tier's demand at ``1 + side z s_m`` and bursty tiers' MAP(2) at
    the ``side`` end of ``I``'s interval (``+1``: upper, pessimistic)."""
    D_mc = model.D_mc.copy()
    V = model.visits if model.visits is not None else np.ones_like(model.D_mc)
    for i, tier in enumerate(tiers):
        s = relative_demand_error(tier, model.classes, model.mix, V[i])
        if s is None:
            notes.append(f"{tier.tier}: no demand covariance, demand taken as it is")
            continue
        D_mc[i] *= 1.0 + side * min(z * s, MAX_RELATIVE_ERROR)
    processes = None
    if model.processes is not None:
        processes = list(model.processes)
        for i, tier in enumerate(tiers):
            if not tier.bursty:
                continue
            end = tier.idc_upper if side > 0 else tier.idc_lower
            fitted = _refit(tier, end, model.scv_targets.get(tier.tier))
            if fitted is None:
                notes.append(f"{tier.tier}: I's {'upper' if side > 0 else 'lower'} end "
                             f"{'unbounded' if end is None else f'{end:.3g}'}: its fitted "
                             f"MAP(2) kept")
            else:
                processes[i] = fitted
    return model.variant(D_mc=D_mc, processes=processes, flags=[], exact_limit=0)


def _capacity(variant: SystemModel, nominal: SystemModel, capacity: int, side: int,
              tolerance: float) -> int | None:
    """Largest population within every SLA on ``variant``: MVA exactly; on the MAP network
    by :func:`capacity_search` to within ``tolerance``, started at the nominal ``capacity``
    times the ratio of the two models' MVA capacities (a good first guess: one or two
    probes), and bracketed by the nominal capacity on the side the variant moves to (the
    pessimistic variant fails at ``capacity + 1``, the optimistic one meets ``capacity``)."""
    cap, limited = variant.mva_capacity()
    if cap is None or variant.processes is None or limited:
        return cap
    base, _ = nominal.mva_capacity()
    guess = capacity * cap / base if base else capacity
    known = {capacity + 1: 1.0} if side > 0 else {capacity: -1.0}
    found, _ = capacity_search(lambda n: variant.excess(variant.at(n, SEARCH_TOL)),
                               start=max(int(round(guess)), 1), limit=CAPACITY_LIMIT,
                               known=known, rel_tol=tolerance, growth=1.0 + 4 * tolerance,
                               secant=False)       # ``known`` holds signs, not excesses
    return found


def _time_to_breach(cap: int | None, n_now: int, slope: float) -> float | None:
    if cap is None or cap >= CAPACITY_LIMIT:
        return None
    if n_now > cap:
        return 0.0
    return (cap + 1 - n_now) / slope if slope > 0 else None


def band_due(solve: int, ttb: float | None, horizon_s: float) -> bool:
    """The band is computed at this solve (module docstring: at risk, or every
    :data:`BAND_EVERY`-th solve)."""
    return (ttb is not None and ttb <= BAND_RISK_FACTOR * horizon_s) or solve % BAND_EVERY == 0


def band(model: SystemModel, tiers: list[TierModel], capacity: int, n_now: int,
         slope: float, tolerance: float = BAND_TOLERANCE, z: float = BAND_Z) -> dict[str, Any]:
    """Capacity and time to breach at both ends of the estimators' uncertainty (module
    docstring): ``capacity_users_lower`` (pessimistic model), ``capacity_users_upper``
    (optimistic), ``time_to_breach_lower_s`` / ``time_to_breach_upper_s`` and
    ``band_flags``. The lower capacity is at most, the upper at least the nominal one."""
    notes: list[str] = []
    low = _capacity(band_variant(model, tiers, +1, notes, z), model, capacity, +1, tolerance)
    high = _capacity(band_variant(model, tiers, -1, notes, z), model, capacity, -1, tolerance)
    low = capacity if low is None else min(low, capacity)
    high = capacity if high is None else max(high, capacity)
    note = band_note(model)
    notes += [note] if note else []
    return {"capacity_users_lower": low, "capacity_users_upper": high,
            "time_to_breach_lower_s": _time_to_breach(low, n_now, slope),
            "time_to_breach_upper_s": _time_to_breach(high, n_now, slope),
            "band_flags": sorted(set(notes))}


# -- trust ---------------------------------------------------------------------------------------
def _mark(event: Any, trusted: bool) -> Any:
    summary = event.get("summary") or ""
    if not trusted and not summary.startswith(UNTRUSTED_PREFIX):
        summary = UNTRUSTED_PREFIX + summary
    return updated(event, trust="trusted" if trusted else "untrusted", summary=summary)


def trust_events(events: list[Any], trusted: bool, breach_active: bool,
                 last_trust: str | None, restate: Callable[[], Any],
                 steady: bool | None = None) -> tuple[list[Any], str | None]:
    """Mark this solve's ``predicted_breach`` events with the model's trust (module
    docstring) and, when the breach alert stays active but the trust changed since its last
    event, add a restated ``firing`` event (``restate()``: the alert's payload now) --
    judged on ``steady`` (default ``trusted``), the trust that has held for a few solves, so
    that a model near the trust margin does not restate the alert at every solve.
    Returns the events and the trust of the breach alert's last event (``None``: not
    active)."""
    out, mark = [], "trusted" if trusted else "untrusted"
    for ev in events:
        if ev.get("alert") == "predicted_breach":
            if ev["state"] == "resolved":
                ev = updated(ev, trust=mark)
                last_trust = None
            else:
                ev = _mark(ev, trusted)
                last_trust = mark
        out.append(ev)
    held = "trusted" if (trusted if steady is None else steady) else "untrusted"
    if breach_active and last_trust is not None and last_trust != held and not any(
            e.get("alert") == "predicted_breach" for e in events):
        out.append(_mark(updated(restate(), state="firing", update="trust"), held == "trusted"))
        last_trust = held
    return out, last_trust
