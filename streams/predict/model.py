"""The closed model of one system, built from its tiers' estimates, and the questions put to it.

The system is Mi et al. (2008), Fig. 9: ``N`` users think ``Z`` seconds, then visit the tiers in
order. Per-class demands ``D_{m,c} = V_{m,c} d_{m,c}`` (visits -- configured, else learned from
the tiers' completions, :mod:`streams.predict.visits` -- x the demand per completion at
the tier, :func:`tier_demands`: by default the Kalman filter's or the sliding regression's,
whichever predicted the tier's recent utilization better) are aggregated over the measured class mix ``p_c = X_c / sum X``
into one class, ``D_m = sum_c p_c D_{m,c}`` -- the single-class model Mi et al. (2008) solves.

**Per-class response times** (FCFS tiers, as the physical tiers the simulator models): the wait
in a tier's queue is shared by every class, the service is the class's own. With the aggregate's
residence ``R_m`` and wait ``W_m = R_m - D_m`` per request, a class-``c`` request spends
``R_{m,c} = D_{m,c} + W_m V_{m,c} / Vbar_m`` at tier ``m`` (``V_{m,c}`` visits, ``Vbar_m =
sum_c p_c V_{m,c}``: the wait per visit times its visits), and ``R_c = sum_m R_{m,c}``
(:meth:`SystemModel.class_residence`). The processor-sharing read-back ``D_{m,c} R_m / D_m``
stretched the shared wait by the class's demand ratio: on FCFS tiers a light class was predicted
too fast and a heavy one too slow (docs/accuracy.md). It is the right one, though, on a tier
whose per-class response times show processor sharing (:mod:`estimators.class_split` decided
``ps``: an operating system's time-sliced CPU, a database with a process per connection): there
every class is stretched by the same factor, ``R_{m,c} = D_{m,c} R_m / D_m`` (Kleinrock 1976,
ch. 4; the queue-length of the aggregate is shared in proportion to the demands), and the
FCFS read-back would give a 3-ms class the 120-ms class's wait -- on a real database it named
a class running at 55 ms under its 60-ms SLA as the one to break. :attr:`SystemModel.ps` marks
those tiers.

* No bursty tier: exact MVA, all populations in one pass (:func:`solvers.mva.mva_curve`).
* A bursty tier (the lower bound of ``I``'s confidence interval above ``idc_threshold``) with a
  fitted MAP(2): the MAP queueing network, the
  fitted processes rescaled to ``D_m``, other tiers exponential, every tier with its cores
  (a tier's cores consume its one service-time sequence, :mod:`solvers.decomposition`).
  Solved exactly (:func:`solvers.mapqn.solve_closed`) while the chain has at most
  :data:`EXACT_STATE_LIMIT` states (a budget by the number of tiers) and every bursty tier
  has one core, by flow-equivalent decomposition
  (:func:`solvers.decomposition.solve_decomposed`, ``O(N)``) otherwise; from
  :data:`OPEN_ROUTE_POPULATION` users by the fixed-population-mean method (Whitt 1984:
  the open network at the rate whose mean population is ``N``,
  :func:`solvers.open.fixed_population.solve_fixed_population`; ``model`` ``"map-fpm"``),
  whose cost does not grow with ``N``; populations above ``map_max_population`` fall back to
  MVA (flagged).

**A bursty tier's aggregate demand** (``SystemConfig.bursty_demand``, docs/accuracy.md
section 1). On a bursty tier the window-local estimators (Kalman filter, sliding regression) are
noisy at any given moment: the busy time of a few windows is dominated by whether a slow run fell
in them. Mi et al. (2008) section 4.1 takes the MAP(2)'s mean service time as the total busy time over
the total completions instead. Under ``bursty_demand = "history"`` (the default), when the MAP
network is used, each bursty tier ``m`` whose ``mean_service`` ``S_m = sum_k B_k / sum_k n_k``
(over its kept history, :class:`streams.core.tier.TierModel`) is known gets one factor
``f_m = S_m sum_c p_c V_{m,c} / sum_c p_c D_{m,c}`` on all its per-class demands,
``D_{m,c} <- f_m D_{m,c}``: the aggregate becomes ``D_m = S_m sum_c p_c V_{m,c}`` (busy time
per completion times completions per request) and the estimator's split between classes is
kept. The model flags the tier. Non-bursty tiers, and models solved by MVA only (no bursty tier,
or the MAP network not applicable), keep the estimator's demands; ``"estimator"`` keeps them
for bursty tiers too.

**Response-time quantiles** (:meth:`SystemModel.quantiles`): on the MVA route, the law of
:mod:`solvers.response_time` -- per tier the wait an arriving request meets given the jobs it
finds (arrival theorem, Lavenberg and Reiser 1980; Sevcik and Mitrani 1981), a mixture of
Erlangs at a tier of ``c`` cores, each class's share of it and its own exponential service,
the tiers convolved as if independent; at a processor-sharing tier (:attr:`SystemModel.ps`)
each class's own passage time instead (:mod:`solvers.response_time.ps`), on the open route too
(:mod:`solvers.response_time.open_law`) -- where configured (``disciplines``,
:attr:`SystemModel.ps_law`); a discipline decided from the class split alone keeps the read-back
and FCFS's law, the default. On the MAP network's chain (up to
:data:`QUANTILE_STATE_LIMIT` states, one-core bursty tiers), the law of
:mod:`solvers.response_time.mapnet`: what an arriving request finds, from the chain's
stationary vector weighted by the arrival rate, and at a bursty tier the phase-type passage
time to its own completion from the phase it finds. Beyond (a bursty tier of several
cores, or a larger chain) one chain per bursty tier (:mod:`solvers.response_time.bursty`: the
decomposition's station fed by the rest as a flow-equivalent server, the passage time from
the state a request finds; exponential tiers at the decomposition's mean wait). Past that
(a bursty tier of more cores than the per-job station takes) the exponential network's law
with each class's quantiles scaled by the MAP network's mean over the law's mean: an
approximation (flagged) that keeps the exponential tail, where a bursty tier's is heavier.

**Thread and connection pools** (``pools`` in the configuration): a request holds one of a
pool's tokens across a run of tiers. With pools the model is :func:`solvers.pools.solve_pools`
(held tiers aggregated into a flow-equivalent station, Chandy et al. 1975; Courtois 1977) at
every population it is asked about: each class's response time adds the wait for each pool's
token to its tiers' residence times (read back as above); the capacity is searched on it. The wait
for a token is scaled for the holding time's variability -- the classes' spread of cost at the held
tiers and the tiers' service SCVs (:attr:`SystemModel.scv`) -- as in M/G/c (Lee and Longton 1959),
relative to the product-form network's own holding time
(:func:`solvers.pools_general.solve_pools_general`: one class of exponential service is unchanged).
Where the held tier of most spread can be,
the factor gives way to the held chain with that tier's services as the classes' phase-type
mixture (:func:`solvers.pools_spread.solve_pools_spread`): a request finding every token held
waits for the dear request in service, which a factor on the token queue cannot know (flagged);
a processor-sharing tier (:attr:`SystemModel.ps`) is never the chain's, but product form (its
holders progress together; its queue insensitive beyond the mean, Baskett et al. 1975),
unless a pool over it has at most its cores' tokens (then no holder shares a core: FCFS).
Pure delays are infinite-server stations inside the holding time of the pools over their tier
on every route, which is decided without them: the answer is continuous as a delay goes to 0.
One bursty tier held by one pool (first or last of its held tiers) is solved by
:func:`solvers.pools_bursty.solve_pools_bursty` (the held tiers and the bursty tier's MAP as one
chain: Mi et al. 2008's slow runs fill the pool, which the flow-equivalent station misses) at each
population within the chain's budget (:attr:`SystemModel.pool_processes`), as exponential with its
mean beyond it (flagged); several bursty tiers, or one in nested pools, are solved as exponential
with their means (flagged). Quantile SLOs are read on the exponential network's law scaled to the
pool model's mean (flagged).

Capacity is the largest ``N`` whose every class meets its SLA (Harbaoui et al. (2010) section V's
question) -- the mean's ``sla_s`` and every quantile SLO (``slo``); the time to breach follows
from the users trend.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from estimators.background import background
from estimators.class_split import RESPONSE_MARGIN, above_response
from solvers.decomposition import PER_JOB_MAX_CORES, SWING_FLAG, SolveMemo, solve_decomposed
from solvers.delay import effective_think_time
from solvers.mapqn import solve_closed
from solvers.mva import mva_curve
from solvers.mva_general import mva_curve_general
from solvers.open.fixed_population import INTERPOLATE_SPAN, WAVE_PHASE_SHARE, open_at_rate, \
    solve_fixed_population
from solvers.pools import PoolSpec
from solvers.pools_bursty import held_chain_applies, solve_pools_bursty
from solvers.pools_spread import SPREAD_FLAG, solve_pools_spread, spread_processes
from solvers.processes import MAP
from solvers.response_time import DEFAULT_LEVELS, ArrivalLaw, response_time_quantiles, \
    response_time_quantiles_many
from solvers.response_time.bursty import decomposed_quantiles
from solvers.response_time.mapnet import map_network_quantiles
from solvers.response_time.open_law import open_quantiles
from streams.core.config import SLO_QUANTILES, SystemConfig
from streams.core.tier import TierModel
from streams.predict import pool_law
from streams.predict.capacity_search import capacity_search, projected_start, rate_bracket
from streams.predict.latency import model_delays
from streams.predict.service_scv import class_scvs
from streams.predict.visits import Visits

__all__ = ["ASSUMED", "Measured", "SystemModel", "assumed_structure", "Point", "build_model",
           "capacity_search", "model_capacity", "tier_demands", "history_demands", "fcfs_split"]

#: largest population any capacity search goes to
CAPACITY_LIMIT = 100_000
#: largest Markov chain the MAP network is solved on exactly, by the number of tiers (more:
#: :data:`EXACT_STATE_LIMIT_MANY`); decomposition beyond. The exact chain's cost per state grows
#: with the tiers (its nested-dissection separators are lines for two queues, planes for
#: three): these budgets keep one exact solve near 50 ms (docs/benchmarks.md,
#: "One solve"), where the decomposition differs from it by about 1% in response time
#: (one bursty tier; up to 4% with two bursty one-core tiers) and costs 2-15 ms
EXACT_STATE_LIMIT = {1: 20_000, 2: 5_000, 3: 2_000}
EXACT_STATE_LIMIT_MANY = 1_000
#: from this population on the MAP network is solved through its open counterpart (Whitt
#: 1984's fixed-population mean, :mod:`solvers.open.fixed_population`) instead of the
#: decomposition: with a thousand users or more the think station holds nearly all of them,
#: so the tiers see nearly the open network's Poisson flow, and the decomposition's per-job
#: chains have grown with N (4 tiers, 2 bursty at 5,000 users: seconds a solve). Against the
#: simulated physical system (``bench/accuracy/large_n.py``, docs/accuracy.md "Large
#: populations through the open route") at 1,000-5,000 users the throughput is within 0.7%
#: and the response time 3.5-12.3% low (the decomposition: to 16.4%); below 1,000 the closed
#: solvers are cheap and a few users in the tiers are where closed and open networks differ
#: most
OPEN_ROUTE_POPULATION = 1_000
#: largest MAP chain whose response-time law is computed from the chain itself (the
#: passage times of :mod:`solvers.response_time.mapnet`), also where the mean comes from the
#: decomposition: 2 tiers at 124 users, 15,750 states, ~0.3 s a law; beyond it the exponential
#: network's law scaled to the mean (flagged)
QUANTILE_STATE_LIMIT = 20_000
#: MVA is computed exactly up to this many knees, extrapolated along its asymptote beyond
ASYMPTOTE_KNEES = 2.0
#: relative resolution of the capacity search on the MAP network (each probe is a CTMC solve)
MAP_CAPACITY_TOLERANCE = 0.03
#: relative change of the throughput between two of Marie's sweeps at which the decomposition's
#: fixed point stops (``solve_decomposed``'s ``tol``): for predictions
PREDICTION_TOL = 1e-6
#: ... and for a capacity search's probes (:func:`model_capacity`, the uncertainty band's): a
#: probe decides a side of the bracket and aims the next one, to within 3% of the population.
#: On 640 solves of random networks with two or three bursty tiers at 0.5-1.5 knees
#: (``bench/accuracy/random_networks.py``) it moves the response time by 4e-7 (median), 7e-4
#: (99th percentile), 1.1% at most, with 20% fewer sweeps; 1e-3 took 35% fewer but moved it
#: by up to 9.4% where the sweeps creep. 4 tiers, 2 bursty, a cold search: 0.53-0.58 ->
#: 0.46-0.48 s (docs/benchmarks.md)
SEARCH_TOL = 1e-4


@dataclass(frozen=True)
class Measured:
    """What the monitoring showed over the last solve interval, system level."""

    throughput: dict[str, float]          # X_c, requests per second
    response_time: dict[str, float]       # R_c, classes every tier reported a time for
    users: float | None                   # mean active sessions, if reported
    utilization: dict[str, float]         # per tier
    seconds: float
    #: per class, the measured end-to-end quantiles (``{"p95": s}``) at the entry tier
    quantiles: dict[str, dict[str, float]] = field(default_factory=dict)
    #: per pool, its measured ``size``, mean ``busy``, ``waiting``, ``acquire_s``
    #: (:meth:`streams.core.tier.Interval.measured_pools`; the keys measured)
    pools: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def total_throughput(self) -> float:
        return float(sum(self.throughput.values()))


@dataclass(frozen=True)
class Point:
    """The model's answer at one population ``n``: ``X`` (all classes), ``R_m`` per tier,
    ``R_c`` per class, ``U_m`` per tier (per core), ``B_m`` bottleneck probabilities (MAP).
    ``model``: ``"mva"``, ``"map"`` (the exact chain), ``"map-fes"`` (decomposition),
    ``"map-fpm"`` (the open route, :data:`OPEN_ROUTE_POPULATION`) or ``"pools"``
    (:func:`solvers.pools.solve_pools`)."""

    n: int
    throughput: float
    residence: np.ndarray
    response: np.ndarray
    utilization: np.ndarray
    bottleneck: np.ndarray | None
    model: str
    #: per pool (:attr:`SystemModel.pools`): tokens held over size, and the wait for a token
    #: per request, seconds (``None``: no pools)
    pool_utilization: np.ndarray | None = None
    pool_waiting: np.ndarray | None = None


#: how a pool's flags begin
POOL_FLAG = "pools: "


#: a decomposition's ``Little's law off`` flag reaches the model's flags from this fraction of
#: ``N`` (the solver flags from 1e-4; its approximation's own error is of that order)
LITTLE_FLAG = 0.01
#: how the decomposition's caveats in :attr:`SystemModel.flags` begin
SOLVER_FLAG = "MAP network at "
_TIER_INDEX = re.compile(r"\btier (\d+)")
_NUMBER = re.compile(r"(?<!\w)[-+]?\d+(?:\.\d*)?(?:e[-+]?\d+)?(?!\w)")


def _flag_kind(flag: str) -> str:
    """A flag with its numbers blanked (not the digits of a name such as ``db2``): flags of
    one kind at other values compare equal."""
    return _NUMBER.sub("#", flag)


@dataclass
class SystemModel:
    """Aggregate single-class model with per-class read-back (module docstring)."""

    tiers: list[str]
    classes: list[str]
    D_mc: np.ndarray                      # (M, C) system demands per class
    mix: np.ndarray                       # (C,) p_c
    servers: np.ndarray                   # (M,) cores
    think_time: float
    sla: np.ndarray                       # (C,) seconds, inf = none
    processes: list[MAP] | None           # per tier when the MAP network applies
    map_limit: int
    flags: list[str] = field(default_factory=list)
    visits: np.ndarray | None = None      # (M, C) V_{m,c}; None: one visit each
    #: largest chain solved exactly; decomposition beyond (0: always decomposition; ``None``:
    #: :data:`EXACT_STATE_LIMIT` for the model's number of tiers)
    exact_limit: int | None = None
    #: per bursty tier, the SCV its MAP(2) was calibrated to (:mod:`streams.predict.calibration`);
    #: refits of the same tier (the uncertainty band's) keep it
    scv_targets: dict[str, float] = field(default_factory=dict)
    #: bursty tiers of up to this many cores take the decomposition's per-job station
    #: (``solve_decomposed``'s ``per_job_max_cores``; ``SystemConfig.per_job_max_cores``)
    per_job_max_cores: int = PER_JOB_MAX_CORES
    #: the open route feeds the tiers behind a bursty one its departures
    #: (``SystemConfig.open_fed``; :func:`streams.predict.open_model.fed_applies`)
    open_fed: bool = True
    #: quantile SLOs ``(C, len(SLO_QUANTILES))``, seconds, ``inf`` = none (config ``slo``);
    #: ``None``: none at all
    slo: np.ndarray | None = None
    #: per tier and class, the visit ratio the completions give (:mod:`streams.predict.visits`;
    #: absent: they cannot tell)
    visits_measured: dict[str, dict[str, float]] = field(default_factory=dict)
    #: (M,) tiers read back under processor sharing (``R_{m,c} = D_{m,c} R_m / D_m``, module
    #: docstring; configured ``disciplines``, or decided from the class split: :func:`is_ps`);
    #: ``None``: every tier FCFS
    ps: np.ndarray | None = None
    #: (M,) tiers configured ``disciplines = { tier = "ps" }``: their response-time law is the
    #: processor-sharing sojourn (:mod:`solvers.response_time.ps`), and on the open route
    #: their means stretch every class alike; ``None``: none (FCFS's law, the default)
    ps_law: np.ndarray | None = None
    #: thread and connection pools over runs of :attr:`tiers` (module docstring)
    pools: tuple[PoolSpec, ...] = ()
    #: (M, C) pure delays ``delta_{m,c}`` per request at each tier, seconds (visits included):
    #: time at the tier that does not queue for its CPU (:mod:`solvers.delay`, module
    #: docstring); ``None``: none
    delays: np.ndarray | None = None
    #: per tier the service process the pool model solves with (:meth:`_pool_point`, one
    #: bursty tier under one pool: :func:`solvers.pools_bursty.solve_pools_bursty`), kept
    #: apart from :attr:`processes` so that every other route (``kind``, the calibration, the
    #: band, the quantiles) sees the exponential pool model it saw before; ``None``: none
    pool_processes: list[MAP] | None = None
    #: (M,) per tier the service SCV of an FCFS tier with general service on the MVA route
    #: (:mod:`streams.predict.general_service`, :func:`solvers.mva_general.mva_curve_general`);
    #: ``None``: every tier exponential
    scv: np.ndarray | None = None
    #: (M, C) each class's service SCV at the tiers a pool holds, configured or estimated
    #: (:mod:`streams.predict.service_scv`): the open pool chain serves an SCV above 1 as a
    #: hyperexponential (:func:`solvers.pools_open.held_network`); ``None``: all 1
    service_scv: np.ndarray | None = None
    #: the flags of :attr:`service_scv` (configured against the data, not identified): the
    #: open route's (:func:`streams.predict.open_model.pool_curves` adds them to
    #: :attr:`flags`), every other route does not read it
    service_scv_flags: tuple[str, ...] = ()
    _cache: dict[int, Point] = field(default_factory=dict)
    _qcache: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    _map_qcache: dict[int, np.ndarray | None] = field(default_factory=dict, repr=False,
                                                      compare=False)
    #: the open processor-sharing law's quantiles by total rate (:meth:`_open_ps_quantiles`)
    _open_qcache: dict[float, np.ndarray] = field(default_factory=dict, repr=False,
                                                  compare=False)
    _curve: Any = None
    #: what the decomposition's solves of this model and its variants share (the probes of a
    #: capacity search: :class:`solvers.decomposition.SolveMemo`)
    _memo: SolveMemo = field(default_factory=SolveMemo, repr=False, compare=False)

    def variant(self, **changes: Any) -> "SystemModel":
        """A copy with ``changes`` (dataclass fields), its own flags and SCV targets (copied
        unless given) and no solved populations: every what-if, band end and calibration
        trial is one."""
        fresh = {"flags": list(self.flags), "scv_targets": dict(self.scv_targets)}
        return dataclasses.replace(self, **{**fresh, **changes, "_cache": {}, "_curve": None,
                                            "_qcache": {}, "_map_qcache": {},
                                            "_open_qcache": {}})

    @functools.cached_property
    def D(self) -> np.ndarray:
        """``D_m = sum_c p_c D_{m,c}``."""
        return self.D_mc @ self.mix

    @property
    def kind(self) -> str:
        return "map" if self.processes is not None else "mva"

    @functools.cached_property
    def tier_processes(self) -> list[MAP]:
        """Each tier's service process at the tiers' demands ``D_m`` (empty without
        :attr:`processes`): built once per model, as :attr:`D` is, because a MAP's
        construction validates it and solves its phase process (a third of a millisecond
        apiece, ~1.4 ms for four tiers), and every probe of a capacity search reads them."""
        return [p.scaled(float(d)) for p, d in zip(self.processes or [], self.D)]

    @functools.cached_property
    def delay_m(self) -> np.ndarray:
        """``delta_m = sum_c p_c delta_{m,c}`` (M,): the aggregate's delay per tier."""
        if self.delays is None:
            return np.zeros(len(self.tiers))
        return self.delays @ self.mix

    @functools.cached_property
    def delay_c(self) -> np.ndarray:
        """``sum_m delta_{m,c}`` (C,): each class's delays over the tiers."""
        if self.delays is None:
            return np.zeros(len(self.classes))
        return self.delays.sum(axis=0)

    @functools.cached_property
    def solver_think(self) -> float:
        """The think time the queueing solvers see: ``Z`` plus every tier's delay
        (:func:`solvers.delay.effective_think_time`; exact for the aggregate class in a
        product-form network, the same mean for the MAP network). Without delays, ``Z``."""
        if self.delays is None:
            return self.think_time
        return effective_think_time(self.think_time, self.delays, self.mix)

    @functools.cached_property
    def _wait_share(self) -> np.ndarray:
        """``V_{m,c} / Vbar_m`` (M, C): the share of tier ``m``'s per-request wait that a
        class-``c`` request meets (module docstring)."""
        V = np.ones_like(self.D_mc) if self.visits is None else self.visits
        Vbar = V @ self.mix
        share = np.divide(V, Vbar[:, None], out=np.zeros_like(V), where=Vbar[:, None] > 0)
        if self.ps is not None and self.ps.any():     # PS: the wait in proportion to D_{m,c}
            D = self.D[:, None]
            stretch = np.divide(self.D_mc, D, out=np.zeros_like(self.D_mc), where=D > 0)
            share = np.where(np.asarray(self.ps, dtype=bool)[:, None], stretch, share)
        return share

    def wait(self, Rm: np.ndarray) -> np.ndarray:
        """``W_m = max(R_m - D_m - delta_m, 0)``: the queueing part of the aggregate's
        residence (a tier's delay, :attr:`delays`, does not queue)."""
        if self.delays is None:
            return np.maximum(np.asarray(Rm, dtype=float) - self.D, 0.0)
        return np.maximum(np.asarray(Rm, dtype=float) - self.D - self.delay_m, 0.0)

    def class_residence(self, Rm: np.ndarray) -> np.ndarray:
        """``R_{m,c} = D_{m,c} + W_m V_{m,c} / Vbar_m (+ delta_{m,c})`` (M, C) from the
        aggregate's ``R_m``."""
        out = self.D_mc + self.wait(Rm)[:, None] * self._wait_share
        return out if self.delays is None else out + self.delays

    @functools.cached_property
    def quantile_levels(self) -> tuple[float, ...]:
        """The levels :meth:`quantiles` gives: p50, p90, p95, p99 and every SLO's."""
        extra = () if self.slo is None else tuple(
            q for q, col in zip(SLO_QUANTILES.values(), self.slo.T) if np.isfinite(col).any())
        return tuple(sorted(set(DEFAULT_LEVELS) | set(extra)))

    @functools.cached_property
    def _arrival(self) -> ArrivalLaw:
        """What requests find at the tiers, at any population (its complements' MVA curves
        kept for every population this model is asked about; one-core tiers read the model's
        own MVA curve, no pass of their own)."""
        return ArrivalLaw(self.D, self.servers, self.solver_think, curve=self.curve)

    def _law_quantiles(self, n: int) -> np.ndarray:
        """``(C, L)`` quantiles and ``(C,)`` means (last column) of the exponential
        network's response-time law at ``n`` (:mod:`solvers.response_time`; one job at
        ``n = 0``)."""
        n = max(int(n), 1)
        if n not in self._qcache:
            res = response_time_quantiles(self.D, self.servers, self.solver_think, n,
                                          self.D_mc, self._wait_share, self.quantile_levels,
                                          arrival=self._arrival, ps=self.ps_law, mix=self.mix)
            self._qcache[n] = self._shifted(np.column_stack([res.quantiles, res.mean]))
        return self._qcache[n]

    def _shifted(self, q: np.ndarray) -> np.ndarray:
        """Per-class quantiles (rows) shifted by each class's delays (:attr:`delay_c`): a
        delay is taken as constant, so it moves the law without widening it (an exponential
        or heavier delay would widen the tail: then the quantiles are low by up to its own
        spread)."""
        return q if self.delays is None else q + self.delay_c[:, None]

    def quantiles_many(self, points: list[Point]) -> list[np.ndarray]:
        """:meth:`quantiles` at each of ``points`` (a prediction's now and forecast): the
        exponential network's laws they need, not known yet, computed side by side
        (:func:`solvers.response_time.response_time_quantiles_many`)."""
        self._law_quantiles_many([p.n for p in points if p.model in ("mva", "pools")])
        return [self.quantiles(p) for p in points]

    def _law_quantiles_many(self, populations: list[int]) -> None:
        """The exponential network's laws at ``populations`` not known yet, side by side
        (:func:`solvers.response_time.response_time_quantiles_many`), into the cache
        :meth:`_law_quantiles` reads."""
        need = sorted({max(int(n), 1) for n in populations} - set(self._qcache))
        if len(need) > 1:
            for n, res in zip(need, response_time_quantiles_many(
                    self.D, self.servers, self.solver_think, need, self.D_mc, self._wait_share,
                    self.quantile_levels, arrival=self._arrival, ps=self.ps_law, mix=self.mix)):
                self._qcache[n] = self._shifted(np.column_stack([res.quantiles, res.mean]))

    def quantiles(self, point: Point) -> np.ndarray:
        """Per class the response time's quantiles at ``point`` (``(C, L)``, levels
        :attr:`quantile_levels`): on the MVA route the exponential network's law; on the MAP
        network, where its chain has at most :data:`QUANTILE_STATE_LIMIT` states and every
        bursty tier one core, the chain's own law (the bursty tiers' passage times,
        :mod:`solvers.response_time.mapnet`), else one chain per bursty tier
        (:mod:`solvers.response_time.bursty`; the decomposition's and the open route's points:
        the exponential network's law scaled to the mean misses the bursty tier's tail, 24-31%
        low at p95/p99 past the knee on docs/accuracy.md's system (d)), else (a bursty tier
        past the per-job station) the exponential network's law scaled per class to the
        point's mean (flagged, module docstring)."""
        if point.model == "mva":
            return self._law_quantiles(point.n)[:, :-1]
        if point.model == "open" and self.pools:    # the pools' passage laws where they apply
            q = pool_law.pool_quantiles(self, point)
            if q is not None:
                return q
        if point.model == "open" and self.ps_law is not None and self.ps_law.any():
            return self._shifted(self._open_ps_quantiles(point.throughput))
        if point.model == "pools":
            law = self._law_quantiles(point.n)
            flag = (f"{POOL_FLAG}quantiles from the network without pools, scaled to the pool "
                    f"model's mean (a pool's wait has a tail of its own)")
            if flag not in self.flags:
                self.flags.append(flag)
            ratio = np.divide(point.response, law[:, -1], out=np.ones(len(self.classes)),
                              where=law[:, -1] > 0)
            return law[:, :-1] * ratio[:, None]
        if point.model in ("map", "map-fes") and point.n >= 1 and self.exact_applies \
                and self.map_states(point.n) <= QUANTILE_STATE_LIMIT:
            if point.n not in self._map_qcache:
                procs, scales = self._map_law_args()
                try:
                    q, _ = map_network_quantiles(procs, point.n, self.solver_think,
                                                 [int(c) for c in self.servers], scales,
                                                 self._wait_share, self.quantile_levels)
                except (RuntimeError, ValueError, np.linalg.LinAlgError):
                    q = None
                self._map_qcache[point.n] = None if q is None else self._shifted(q)
            if self._map_qcache[point.n] is not None:
                return self._map_qcache[point.n]
        if point.model in ("map", "map-fes", "map-fpm") and point.n >= 1:
            key = -point.n                        # the per-tier chains' law
            if key not in self._map_qcache:
                procs, scales = self._map_law_args()
                try:
                    q, _ = decomposed_quantiles(procs, [int(c) for c in self.servers],
                                                self.solver_think, point.n, scales,
                                                self._wait_share, self.quantile_levels,
                                                residence=point.residence
                                                if self.delays is None
                                                else point.residence - self.delay_m,
                                                arrival=self._arrival)
                except (RuntimeError, ValueError, np.linalg.LinAlgError):
                    q = None
                self._map_qcache[key] = None if q is None else self._shifted(q)
            if self._map_qcache[key] is not None:
                return self._map_qcache[key]
        law = self._law_quantiles(point.n)
        q, mean = law[:, :-1], law[:, -1]
        flag = ("quantiles on the MAP network past its chain's budget or with a multi-core "
                "bursty tier: the exponential network's response-time law scaled to its mean "
                "(a bursty tier's tail is heavier)")
        if flag not in self.flags:
            self.flags.append(flag)
        ratio = np.divide(point.response, mean, out=np.ones_like(mean), where=mean > 0)
        return q * ratio[:, None]

    def _open_ps_quantiles(self, rate: float) -> np.ndarray:
        """``(C, L)`` quantiles of the open tiers at total rate ``rate`` with their
        processor-sharing tiers' own sojourns (:func:`solvers.response_time.open_law.
        open_quantiles`): an open workload's law where a tier is ``ps``."""
        key = float(rate)
        if key not in self._open_qcache:
            q, _ = open_quantiles(key, self.mix, self.D_mc, self.servers, self.ps_law,
                                  self.quantile_levels, self._wait_share)
            self._open_qcache[key] = q
        return self._open_qcache[key]

    def _map_law_args(self) -> tuple[list[MAP], np.ndarray]:
        """The MAP network's processes at the tiers' demands and each class's service over
        the aggregate's per tier, as the response-time laws take them."""
        procs = list(self.tier_processes)
        scales = np.divide(self.D_mc, self.D[:, None], out=np.zeros_like(self.D_mc),
                           where=self.D[:, None] > 0)
        return procs, scales

    def _slo_columns(self) -> np.ndarray:
        """The quantile SLOs as ``(C, L)`` bounds on :attr:`quantile_levels` (``inf``:
        none)."""
        levels = self.quantile_levels
        bounds = np.full((len(self.classes), len(levels)), np.inf)
        if self.slo is not None:
            for k, q in enumerate(SLO_QUANTILES.values()):
                if q in levels:
                    bounds[:, levels.index(q)] = self.slo[:, k]
        return bounds

    @property
    def has_quantile_slo(self) -> bool:
        return self.slo is not None and bool(np.isfinite(self.slo[self.mix > 0]).any())

    def class_excess(self, point: Point) -> np.ndarray:
        """Per class ``max(R_c / sla_c, q_{c,k} / slo_{c,k}) - 1`` over its SLOs (``-inf``:
        none, or not in the mix)."""
        ratio = point.response / self.sla
        if self.has_quantile_slo:
            bounds = self._slo_columns()
            ratio = np.maximum(ratio, (self.quantiles(point) / bounds).max(axis=1))
        return np.where(self.mix > 0, ratio - 1.0, -np.inf)

    def mean_bounds(self, point: Point) -> np.ndarray:
        """Per class the mean response time its SLOs allow, read at ``point``: ``sla_c`` and,
        for each quantile SLO, its bound times ``R_c / q_{c,k}`` -- the mean at which the
        quantile meets its bound if the law keeps its shape. What a measured mean is held to
        where only means are measured."""
        out = np.array(self.sla, dtype=float)
        if self.has_quantile_slo:
            bounds = self._slo_columns()
            q = self.quantiles(point)
            implied = np.divide(bounds * point.response[:, None], q,
                                out=np.full_like(bounds, np.inf), where=q > 0)
            out = np.minimum(out, implied.min(axis=1))
        return out

    def slo_statistic(self, point: Point) -> list[tuple[str | None, float | None]]:
        """Per class the statistic its SLO is on and its bound: the one nearest to (or
        furthest past) its bound at ``point`` (``mean`` for ``sla_s``; ``(None, None)``:
        no SLO)."""
        if not self.has_quantile_slo:     # the mean's SLA alone (the argmax below, short)
            return [("mean", s) if math.isfinite(s) else (None, None)
                    for s in self.sla.tolist()]
        names = ["mean"]
        ratios = [point.response / self.sla]
        limits = [self.sla]
        if self.has_quantile_slo:
            bounds = self._slo_columns()
            q = self.quantiles(point)
            byq = {v: k for k, v in SLO_QUANTILES.items()}
            for k, level in enumerate(self.quantile_levels):
                if np.isfinite(bounds[:, k]).any():
                    names.append(byq[level])
                    ratios.append(q[:, k] / bounds[:, k])
                    limits.append(bounds[:, k])
        R = np.array(ratios)                          # (S, C)
        L = np.array(limits)
        out = []
        for c in range(len(self.classes)):
            if not np.isfinite(L[:, c]).any():
                out.append((None, None))
                continue
            k = int(np.argmax(np.where(np.isfinite(L[:, c]), R[:, c], -np.inf)))
            out.append((names[k], float(L[k, c])))
        return out

    def _read_back(self, n: int, X: float, Rm: np.ndarray, B: np.ndarray | None,
                   model: str) -> Point:
        """The point of a queueing solve whose residence times ``Rm`` are the CPUs' alone
        (the delays in :attr:`solver_think`): each tier's and class's delay added back."""
        Rm = np.asarray(Rm, dtype=float)
        U = X * self.D / self.servers
        if self.delays is None:
            Rc = self.D_mc.sum(axis=0) + self.wait(Rm) @ self._wait_share
            return Point(n, float(X), Rm, Rc, U, B, model)
        W = np.maximum(Rm - self.D, 0.0)
        Rc = self.D_mc.sum(axis=0) + W @ self._wait_share + self.delay_c
        return Point(n, float(X), Rm + self.delay_m, Rc, U, B, model)

    def prime(self, curve: Any, scv: Any = None) -> None:
        """Use ``curve`` (this model's MVA curve, computed elsewhere with the SCVs ``scv``;
        ``None``: exponential) for :meth:`curve`, where ``scv`` is this model's own
        :attr:`scv`: a model with general service keeps its curve from an exponential one,
        and the other way round."""
        if (scv is None) != (self.scv is None):
            return
        if scv is None or np.array_equal(np.asarray(scv, dtype=float),
                                         np.asarray(self.scv, dtype=float)):
            self._curve = curve

    def curve(self, upto: int) -> Any:
        """MVA at every population ``0..upto`` (extended on demand)."""
        if self._curve is None or self._curve.max_population < upto:
            upto = max(int(upto), self.asymptote_start())   # one pass serves every question
            self._curve = mva_curve(self.D, upto, self.solver_think, self.servers) \
                if self.scv is None else \
                mva_curve_general(self.D, upto, self.solver_think, self.servers, self.scv)
        return self._curve

    def knee(self) -> float:
        """``N* = (sum_m D_m + Z) / max_m (D_m / c_m)``: where the asymptotes cross."""
        c = self.servers
        per_server = np.where(np.isinf(c), 0.0, self.D / np.where(np.isinf(c), 1.0, c))
        top = float(per_server.max())
        return (float(self.D.sum()) + self.solver_think) / top if top > 0 else math.inf

    @functools.cached_property
    def _asymptote_start(self) -> int:
        return int(min(max(ASYMPTOTE_KNEES * self.knee(), 50), CAPACITY_LIMIT))

    def asymptote_start(self) -> int:
        """Population from which MVA is extrapolated along its asymptote:
        ``ASYMPTOTE_KNEES`` times the knee (at least 50)."""
        return self._asymptote_start

    def mva_at(self, n: int) -> Point:
        """MVA at ``n``: exact up to :meth:`asymptote_start`, beyond it extrapolated linearly
        from there (past a few knees every ``R_m(n)`` has reached its asymptotic slope: the
        bottleneck's grows by ``D_b/c_b`` per user, the others' have converged)."""
        n0 = self.asymptote_start()
        if n <= n0:
            c = self.curve(n)
            return self._read_back(n, c.throughput[n], c.residence_time[n], None, "mva")
        c = self.curve(n0)
        Rm0 = c.residence_time[n0]
        Rm = Rm0 + (n - n0) * (Rm0 - c.residence_time[n0 - 1])
        return self._read_back(n, n / (self.solver_think + float(Rm.sum())), Rm, None, "mva")

    def mva_capacity(self) -> tuple[int | None, bool]:
        """Largest ``n`` whose every class meets its SLA under MVA, ``(n, limited)``; ``None``
        when no class has an SLA. Exact up to :meth:`asymptote_start` (one pass of the MVA
        recursion), beyond it where the extrapolated ``R_c(n)`` crosses the SLA."""
        if self.pools:
            return self._pool_capacity()
        mean_cap = self._mean_capacity()
        if not self.has_quantile_slo:
            return mean_cap
        return self._quantile_capacity(mean_cap)

    def _pool_capacity(self) -> tuple[int | None, bool]:
        """:meth:`mva_capacity` with pools: a capacity search on :meth:`excess` of the pool
        model (:meth:`at`), from the MVA curve's knee; exact to one user."""
        if not np.isfinite(self.sla[self.mix > 0]).any() and not self.has_quantile_slo:
            return None, False
        floor = self.excess_floor()
        if floor > 0:
            return 0, False
        known = {n: self.excess(p) for n, p in self.solved().items()}
        return capacity_search(lambda n: self.excess(self.at(n)),
                               start=max(int(min(self.knee(), CAPACITY_LIMIT)), 1),
                               limit=CAPACITY_LIMIT,
                               known=known, floor=floor)

    @functools.cached_property
    def _spread_processes(self) -> list[MAP] | None:
        """:func:`solvers.pools_spread.spread_processes` of the pool model: the same at every
        population, so built once per model, not once per probe of a capacity search."""
        return spread_processes(self.D_mc, self.mix, self.servers, self.pools, self.scv,
                                None, self.ps)

    def _pool_point(self, n: int) -> Point:
        """The pool model at ``n`` (:func:`solvers.pools_spread.solve_pools_spread`: a held tier
        of spread beyond exponential in the held chain -- first-come-first-served tiers only,
        the :attr:`ps` tiers product form there -- else
        :func:`solvers.pools_general.solve_pools_general`; the route decided without the pure
        delays, which every route takes as infinite-server stations inside the holding time of
        the pools over their tier, so that the answer is continuous as a delay goes to 0):
        tiers read back as :meth:`_read_back`, each class's response time plus every pool's
        wait (the same for every class: FCFS on the token), which the owning tier's residence
        holds (as the tier's own response time measures it)."""
        if self._bursty_pool_applies(n):
            res = solve_pools_bursty(self.pool_processes or [], int(n), self.think_time,
                                     self.servers, self.pools, self.mix, self.D_mc,
                                     self.delays)
        else:
            res = solve_pools_spread(self.D_mc, int(n), self.think_time, self.servers,
                                     self.pools, self.mix, self.scv, delays=self.delays,
                                     ps=self.ps, processes=self._spread_processes)
            self._flag_once([_TIER_INDEX.sub(lambda t: self.tiers[int(t.group(1))], f)
                             for f in res.flags if f.startswith(SPREAD_FLAG)], n)
        Rm = np.array(res.residence_time, dtype=float)     # each tier's delay in it
        X = float(res.throughput)
        waits = np.zeros(len(self.tiers))
        for k, pool in enumerate(self.pools):
            waits[pool.first] += float(res.pool_waiting_time[k])
        Rc = self.D_mc.sum(axis=0) + self.wait(Rm - waits) @ self._wait_share + waits.sum()
        if self.delays is not None:
            Rc = Rc + self.delay_c
        return Point(int(n), X, Rm, Rc, X * self.D / self.servers, None, "pools",
                     np.asarray(res.pool_utilization, dtype=float),
                     np.asarray(res.pool_waiting_time, dtype=float))

    def _flag_once(self, flags: list[str], n: int) -> None:
        """Each of ``flags`` into :attr:`flags` once per kind, with the population it was
        first met at."""
        self._add_flags([f"{text} (from {n} users)" for text in flags])

    def _add_flags(self, texts: list[str]) -> None:
        """Each of ``texts`` into :attr:`flags` unless one of its kind (:func:`_flag_kind`,
        numbers aside) is there: a capacity search's probes add one line, not one a probe."""
        kinds = {_flag_kind(f) for f in self.flags}
        for text in texts:
            if _flag_kind(text) not in kinds:
                kinds.add(_flag_kind(text))
                self.flags.append(text)

    def _bursty_pool_applies(self, n: int) -> bool:
        """:attr:`pool_processes` solve the pool point at ``n``: where the bursty tier's held
        chain applies (:func:`solvers.pools_bursty.held_chain_applies`: one bursty tier under
        one pool, within the chain's budget). Elsewhere the exponential pool model, flagged
        once with the population it was first met at."""
        if self.pool_processes is None or n < 1:
            return False
        if held_chain_applies(self.pool_processes, int(n), self.think_time, self.servers,
                              self.pools, self.D_mc, self.mix):
            return True
        text = (f"{POOL_FLAG}bursty tier solved as exponential with its mean demand from "
                f"{n} users (its held chain does not apply there: over the chain's budget, or "
                f"no think time or other held demand)")
        self._add_flags([text])
        return False

    def _quantile_capacity(self, mean_cap: tuple[int | None, bool]) -> tuple[int | None, bool]:
        """The largest ``n`` within the mean's SLA (``mean_cap``) and every quantile SLO on
        the MVA route's response-time law (quantiles increase with ``n``): a capacity search
        on the quantiles' excess alone, then the smaller of both. It starts where the MVA
        curve's mean reaches the mean each quantile SLO implies at the mean's answer (its
        bound times ``R_c / q_c`` there: :meth:`mean_bounds`; that ratio read on the line to a
        solved law across the aim, as near), one pass over the curve, with a
        first step of :data:`MAP_CAPACITY_TOLERANCE`: the shape of the law changes slowly
        with ``n``, so the answer is near (3-5 probes instead of 6-10). The laws are asked for
        two neighbours at a time (one batch costs about one law): they bracket the answer, or
        their difference is the excess's slope, one Newton step to the next pair -- two
        batches where single probes took 2-4 (the excess is smooth in ``n``, a quantile's
        lattice error ~1e-4 of it against a step of ~1/n)."""
        bounds = self._slo_columns()
        active = self.mix > 0

        def excess(n: int) -> float:
            q = self._law_quantiles(n)[:, :-1]
            return float((q[active] / bounds[active]).max() - 1.0)

        n0 = mean_cap[0] if mean_cap[0] is not None and not mean_cap[1] \
            else max(int(self.knee()), 1)
        n0 = max(n0, 1)
        # the floor's and the start's at once, with the MVA points solved so far within a
        # factor 2 of the start (a prediction's now and forecast, whose quantiles it asks for
        # next): the laws of one batch share its array steps, but each is carried on the
        # support of the batch's largest population, so a far smaller one costs more inside
        # than alone
        solved = [n for n, p in self._cache.items()
                  if p.model == "mva" and 1 < n and n0 <= 2 * n and n <= 2 * n0]
        self._law_quantiles_many([1, n0] + solved)
        floor = float((self._law_quantiles(1)[active, :-1] / bounds[active]).max() - 1.0)
        if floor > 0:
            return 0, False

        def implied(n: int) -> np.ndarray:
            q = self._law_quantiles(n)[:, :-1]
            return np.divide(bounds * self.mva_at(n).response[:, None], q,
                             out=np.full_like(bounds, np.inf), where=q > 0)

        implied0 = implied(n0)
        aim, aim_limited = self._mean_capacity(implied0.min(axis=1))
        # R_c / q_c drifts with n: read it between n0 and a solved law on the aim's other
        # side, no farther from it than n0 (over longer spans the drift is not a line)
        across = [n for n in solved if aim is not None and (n - aim) * (n0 - aim) < 0
                  and abs(n - aim) <= abs(n0 - aim)]
        if across and not aim_limited:
            n1 = min(across, key=lambda n: abs(n - aim))
            implied1 = implied(n1)
            with np.errstate(invalid="ignore"):
                between = np.where(np.isfinite(implied0) & np.isfinite(implied1), implied0
                                   + (aim - n0) / (n1 - n0) * (implied1 - implied0), np.inf)
            again, again_limited = self._mean_capacity(between.min(axis=1))
            if again is not None and not again_limited:
                aim = again
        start = max(aim if aim is not None and not aim_limited else n0, 1)
        known = {n0: excess(n0)}
        for _ in range(2):      # the law at two neighbours in one batch: a bracket, or a slope
            pair = [n for n in (start, start + 1) if n <= CAPACITY_LIMIT]
            self._law_quantiles_many(pair)
            known.update((n, excess(n)) for n in pair)
            if len(pair) < 2 or (known[start] <= 0) != (known[start + 1] <= 0) \
                    or not known[start + 1] > known[start]:
                break
            step = -known[start] / (known[start + 1] - known[start])   # Newton on the excess
            start = min(max(int(math.floor(start + step)), 1), CAPACITY_LIMIT)
            if start in known or abs(step) > MAP_CAPACITY_TOLERANCE * start:
                break           # far: the search's own steps, from what is known
        cap, limited = capacity_search(excess, start=start, limit=CAPACITY_LIMIT,
                                       known=known, floor=floor,
                                       growth=1.0 + MAP_CAPACITY_TOLERANCE)
        if mean_cap[0] is None or (not limited and cap < mean_cap[0]) or mean_cap[1]:
            return cap, limited and (mean_cap[0] is None or mean_cap[1])
        return mean_cap

    def _mean_capacity(self, sla: np.ndarray | None = None) -> tuple[int | None, bool]:
        """:meth:`mva_capacity` on the mean's SLA alone (``sla``: other bounds per class)."""
        active = self.mix > 0
        sla = (self.sla if sla is None else sla)[active]
        if not np.isfinite(sla).any():
            return None, False
        n0 = self.asymptote_start()
        c = self.curve(n0)
        share = self._wait_share[:, active]
        wait = np.maximum(c.residence_time - self.D, 0.0)             # (n0 + 1, M)
        Rc = self.D_mc[:, active].sum(axis=0) + wait @ share          # (n0 + 1, C_active)
        if self.delays is not None:
            Rc = Rc + self.delay_c[active]
        over = np.flatnonzero(((Rc / sla).max(axis=1) - 1.0) > 0)
        if over.size:
            return max(int(over[0]) - 1, 0), False
        slope = (wait[n0] - wait[n0 - 1]) @ share
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(slope > 0, (sla - Rc[n0]) / slope, np.inf)
        cross = n0 + float(room.min())
        if not cross < CAPACITY_LIMIT:
            return CAPACITY_LIMIT, True
        return int(math.floor(cross)), False

    def at(self, n: int, tol: float = PREDICTION_TOL) -> Point:
        """The model's answer at population ``n`` (MAP network when it applies: the exact
        chain up to :meth:`exact_state_limit` states, decomposition beyond -- the open route
        from :data:`OPEN_ROUTE_POPULATION` users --, its fixed point to
        ``tol``: :data:`SEARCH_TOL` for a capacity search's probes). A population solved
        before is answered from then, whatever its ``tol``: the difference is far inside the
        model's own error (docs/accuracy.md)."""
        if n in self._cache:
            return self._cache[n]
        if self.pools:
            point = self._pool_point(n)
        elif self.processes is None or n > self.map_limit:
            point = self.mva_at(n)
        else:
            procs = self.tier_processes
            cores = [int(c) for c in self.servers]
            try:
                if self.map_states(n) <= self.exact_state_limit() and self.exact_applies:
                    res, kind = solve_closed(procs, n, self.solver_think, servers=cores), "map"
                elif n >= OPEN_ROUTE_POPULATION:
                    res, kind = (solve_fixed_population(
                        procs, n, self.solver_think, servers=cores,
                        per_job_max_cores=self.per_job_max_cores), "map-fpm")
                else:
                    res, kind = (solve_decomposed(procs, n, self.solver_think, servers=cores,
                                                  tol=tol, memo=self._memo,
                                                  per_job_max_cores=self.per_job_max_cores),
                                 "map-fes")
            except (RuntimeError, ValueError, np.linalg.LinAlgError) as exc:
                self.flags.append(f"MAP network failed at population {n} ({exc}): MVA there")
                point = self.mva_at(n)
            else:
                bottleneck = getattr(res, "bottleneck_probability", None)
                point = self._read_back(n, res.throughput, res.residence_time,
                                        None if bottleneck is None else np.asarray(bottleneck),
                                        kind)
                if kind in ("map-fes", "map-fpm") and n > 0:
                    self._note_solver_flags(n, res.flags, res.little_residual)
        self._cache[n] = point
        return point

    def _note_solver_flags(self, n: int, flags: tuple[str, ...], little: float) -> None:
        """The decomposition's caveats (a speed-scaled station, a fixed point or waves not
        converged, a chain residual, Little's law off by at least :data:`LITTLE_FLAG` of
        ``N``; not a fixed point's stop in a bounded swing, within 1e-3 of the throughput) in
        :attr:`flags`, with tier names for the solver's indices and the population
        they were first met at: one flag of each kind (numbers aside) per model, so a
        capacity search's probes add one line, not one per probe."""
        self._add_flags([
            f"{SOLVER_FLAG}{n} users: "
            + _TIER_INDEX.sub(lambda m: self._tier_name(int(m.group(1))), flag)
            for flag in flags
            if not (flag.startswith("Little's law") and little < LITTLE_FLAG
                    or flag.startswith(SWING_FLAG))])

    def _tier_name(self, index: int) -> str:
        return self.tiers[index] if 0 <= index < len(self.tiers) else f"tier {index}"

    @functools.cached_property
    def exact_applies(self) -> bool:
        """The exact chain's station (one MAP at speed ``min(n, c)``) is the physical tier's
        only for one core; a bursty multi-core tier takes the decomposition's per-job station
        (:mod:`solvers.decomposition`), which the simulation of the physical tier agrees with."""
        return all(p.order == 1 or c == 1 for p, c in zip(self.processes or [], self.servers))

    def exact_state_limit(self) -> int:
        """Largest chain the MAP network is solved on exactly: ``exact_limit``, else the
        budget for this many tiers (:data:`EXACT_STATE_LIMIT`)."""
        if self.exact_limit is not None:
            return self.exact_limit
        return EXACT_STATE_LIMIT.get(len(self.tiers), EXACT_STATE_LIMIT_MANY)

    def map_states(self, n: int) -> int:
        """States of the MAP network's Markov chain at population ``n``: occupancy vectors
        over the tiers and the think station times the product of the phase counts."""
        if self.processes is None:
            return 0
        stations = len(self.processes) + (1 if self.solver_think > 0 else 0)
        return math.comb(n + stations - 1, stations - 1) * math.prod(
            p.order for p in self.processes)

    def to_dict(self) -> dict[str, Any]:
        """The model as plain JSON values (:meth:`from_dict`): what ``perfcast whatif``
        reads back from an embedded run's store."""
        out = {"tiers": list(self.tiers), "classes": list(self.classes),
                "D_mc": self.D_mc.tolist(), "mix": self.mix.tolist(),
                "servers": self.servers.tolist(), "think_time": float(self.think_time),
                "sla": [None if math.isinf(v) else float(v) for v in self.sla],
                "processes": None if self.processes is None
                else [p.to_dict() for p in self.processes],
                "map_limit": int(self.map_limit), "flags": list(self.flags),
                "visits": None if self.visits is None else self.visits.tolist(),
                "scv_targets": dict(self.scv_targets),
                "per_job_max_cores": int(self.per_job_max_cores),
                "slo": None if self.slo is None else
                [[None if math.isinf(v) else float(v) for v in row] for row in self.slo],
                "ps": None if self.ps is None else [bool(v) for v in self.ps],
                "pools": [{"name": p.name, "size": int(p.size), "first": int(p.first),
                           "last": int(p.last)} for p in self.pools],
                **({} if self.delays is None else {"delays": self.delays.tolist()})}
        if not self.open_fed:               # absent where true: stores without it read alike
            out["open_fed"] = False
        if self.pool_processes is not None:   # absent, not null, as ``scv``
            out["pool_processes"] = [p.to_dict() for p in self.pool_processes]
        if self.ps_law is not None:         # absent, not null, as ``scv``
            out["ps_law"] = [bool(v) for v in self.ps_law]
        if self.scv is not None:            # absent, not null: stores without it read alike
            out["scv"] = [float(v) for v in self.scv]
        if self.service_scv is not None:    # absent, not null, as ``scv``
            out["service_scv"] = self.service_scv.tolist()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SystemModel":
        """Inverse of :meth:`to_dict`; a ``ValueError`` names a missing or bad key."""
        try:
            procs = data["processes"]
            return cls(tiers=[str(t) for t in data["tiers"]],
                       classes=[str(c) for c in data["classes"]],
                       D_mc=np.array(data["D_mc"], dtype=float).reshape(
                           len(data["tiers"]), len(data["classes"])),
                       mix=np.array(data["mix"], dtype=float),
                       servers=np.array(data["servers"], dtype=float),
                       think_time=float(data["think_time"]),
                       sla=np.array([math.inf if v is None else v for v in data["sla"]],
                                    dtype=float),
                       processes=None if procs is None else [MAP.from_dict(p) for p in procs],
                       map_limit=int(data["map_limit"]), flags=list(data.get("flags", [])),
                       visits=None if data.get("visits") is None
                       else np.array(data["visits"], dtype=float),
                       scv_targets={str(k): float(v) for k, v in
                                    (data.get("scv_targets") or {}).items()},
                       per_job_max_cores=int(data.get("per_job_max_cores",
                                                      PER_JOB_MAX_CORES)),
                       open_fed=bool(data.get("open_fed", True)),
                       slo=None if data.get("slo") is None else np.array(
                           [[math.inf if v is None else v for v in row]
                            for row in data["slo"]], dtype=float).reshape(
                               len(data["classes"]), len(SLO_QUANTILES)),
                       ps=None if data.get("ps") is None
                       else np.array(data["ps"], dtype=bool),
                       ps_law=None if data.get("ps_law") is None
                       else np.array(data["ps_law"], dtype=bool),
                       pools=tuple(PoolSpec(int(p["size"]), int(p["first"]), int(p["last"]),
                                            str(p["name"]))
                                   for p in data.get("pools") or ()),
                       delays=None if data.get("delays") is None else np.array(
                           data["delays"], dtype=float).reshape(
                               len(data["tiers"]), len(data["classes"])),
                       pool_processes=None if data.get("pool_processes") is None
                       else [MAP.from_dict(p) for p in data["pool_processes"]],
                       scv=None if data.get("scv") is None
                       else np.array(data["scv"], dtype=float),
                       service_scv=None if data.get("service_scv") is None
                       else np.array(data["service_scv"], dtype=float).reshape(
                           len(data["tiers"]), len(data["classes"])))
        except KeyError as exc:
            raise ValueError(f"model: missing key {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"model: not a model ({exc})") from None

    def solved(self) -> dict[int, Point]:
        """Populations solved so far (by :meth:`at`)."""
        return dict(self._cache)

    def excess(self, point: Point) -> float:
        """``max_c R_c / SLA_c - 1`` over the classes with users, and each quantile SLO's
        ``q_{c,k} / slo_{c,k} - 1`` (> 0: an SLO is broken)."""
        return float(self.class_excess(point).max())

    def excess_floor(self) -> float:
        """``max_c sum_m D_{m,c} / SLA_c - 1`` over the classes with users: :meth:`excess`
        with no queueing, which it never falls below (``W_m >= 0``, :meth:`wait`); with
        quantile SLOs also their quantiles of one job alone."""
        active = self.mix > 0
        floor = float(((self.D_mc.sum(axis=0) + self.delay_c)[active]
                       / self.sla[active]).max() - 1.0)
        if self.has_quantile_slo:
            bounds = self._slo_columns()
            q = self._law_quantiles(1)[:, :-1]
            floor = max(floor, float((q[active] / bounds[active]).max() - 1.0))
        return floor

    def population_for(self, throughput: float) -> int | None:
        """Smallest ``n`` whose MVA throughput reaches ``throughput`` (None: beyond saturation)."""
        if not throughput > 0:
            return 0
        D = self.D
        if not D.max() > 0:
            return None
        x_max = float(np.min(self.servers / np.where(D > 0, D, np.inf)))
        if throughput >= x_max:
            return None
        n_hi = int(min(CAPACITY_LIMIT, math.ceil(throughput * (D.sum() + self.solver_think)
                                                 / (1 - throughput / x_max)) + 2))
        X = self.curve(n_hi).throughput[: n_hi + 1]
        idx = int(np.searchsorted(X, throughput))
        return idx if idx <= n_hi else None


def model_capacity(model: SystemModel, warm: int | None = None) -> tuple[int | None, bool]:
    """Largest population within every SLA, ``(n, limited)``: on the MVA curve
    (:meth:`SystemModel.mva_capacity`); for the MAP network bracketed from the populations
    already solved and ``warm`` (a population near the answer: the last solve's capacity;
    a first step of the tolerance, 3%), or without one from the largest solved population that
    meets the SLA projected to it (at most half the MVA answer; steps doubling), to within
    :data:`MAP_CAPACITY_TOLERANCE`; the aims follow a power law of the excess above
    :meth:`SystemModel.excess_floor` (:mod:`streams.predict.capacity_search`)."""
    found = _open_route_capacity(model)
    if found is not None:
        return found
    cap, limited = model.mva_capacity()
    if cap is None or model.processes is None or limited:
        return cap, limited
    known = {n: model.excess(p) for n, p in model.solved().items()}
    # cold: from half of MVA's capacity (bursty service lowers it, and a probe past the
    # MAP network's saturation is its costliest solve: 4 tiers, 2 bursty: 6.8 s at MVA's
    # capacity of 5,474 users, 0.4 s at half of it), doubling up if that half meets the SLA;
    # below it where the population solved before the search (the current users) projects
    # the answer (the same network cold from 40% of capacity: 0.79 -> 0.38 s, 5 -> 3 probes)
    floor = model.excess_floor()
    start = projected_start(known, floor, max((cap + 1) // 2, 1))
    growth = 2.0
    if warm is not None:                 # loads and estimates move slowly between solves
        # a first step of the tolerance brackets an answer within 3% of the start with one
        # probe (most move less between solves); 12% took two more, an interpolation and a
        # probe to close the bracket (bench_pipeline.py --bursty --multicore --systems 3
        # --ends 120: 197 -> 173 probes)
        start, growth = min(max(warm, 1), cap + 1), 1.0 + MAP_CAPACITY_TOLERANCE
    return capacity_search(lambda n: model.excess(model.at(n, SEARCH_TOL)), start=start,
                           limit=CAPACITY_LIMIT, known=known,
                           rel_tol=MAP_CAPACITY_TOLERANCE, growth=growth, floor=floor)


#: the departures' phases the open route's capacity search keeps in its first, rough probe
#: of the waves (against :data:`solvers.open.fixed_population.WAVE_PHASE_SHARE`'s 1e-6): 64
#: of 80 phases on the 4-tier network with two bursty tiers. The rough probe also leaves out
#: what the waves add to the next bursty tier's wait (``into_bursty=False``: that tier's
#: ``MAP/M/c`` queue, the costlier of the two): it only aims the first full probe, through its
#: ratio to the network without the waves, and the capacity is read off the full probes alone,
#: so a rougher aim can cost a probe or give another bracket, whose read-off is within
#: :data:`solvers.open.fixed_population.INTERPOLATE_SPAN`'s error (networks checked: CHANGES.md)
ROUGH_PHASE_SHARE = 3e-5


#: the rough probe goes to the cheaper curve's solved rate nearest the curve's root when it
#: lies within this share of the root (:func:`streams.predict.capacity_search.rate_bracket`):
#: the bursty tiers' chains are held there, so the probe solves only the waves (the chains
#: are ~1.3 ms of its ~7 ms CPU). 4 tiers, 2 bursty, cold, ten SLAs of 0.25-3 s: the solved
#: rate lay 1.4-5.8% from the root, and the full probes and capacities were those of a rough
#: probe at the root itself
ROUGH_REACH = 0.06


def _open_route_capacity(model: SystemModel) -> tuple[int, bool] | None:
    """:func:`model_capacity` where the answer lies on the open route (from
    :data:`OPEN_ROUTE_POPULATION` users: the MAP network without pools, quantile SLOs or an
    exact chain there), searched in the rate (:func:`streams.predict.capacity_search.
    rate_bracket`: each probe one open solve, held for the populations' solves, aimed by the
    open network without the waves), then exactly, to the integer user, among the
    populations the bracket's two rates read off without a solve: each read is the model
    through the two solves (~0.1 ms, no open solve), so the answer is the largest population
    whose read meets every SLA wherever the probes fell, not the bracket's lower end (up to
    :data:`solvers.open.fixed_population.INTERPOLATE_SPAN` below it). ``None`` where this does
    not apply or the answer lies below the open route or beyond :attr:`SystemModel.map_limit`
    (the population search then answers, the open solves held)."""
    if model.processes is None or model.pools or model.has_quantile_slo:
        return None
    n0, active = OPEN_ROUTE_POPULATION, model.mix > 0
    if not np.isfinite(model.sla[active]).any() or model.map_limit < n0 or (
            model.exact_applies and model.map_states(n0) <= model.exact_state_limit()):
        return None
    z, sat = model.solver_think, float(np.min(model.servers / model.D))
    slas = model.sla[active]
    if np.isfinite(slas).all() and (float(slas.max()) + z) * sat < n0:
        return None     # Little's law: N = X (R + Z) <= X_max (max SLA + Z) < n0 where R meets
    floor = model.excess_floor()
    procs = model.tier_processes
    cores = [int(c) for c in model.servers]
    opts = {"servers": cores, "per_job_max_cores": model.per_job_max_cores}

    def excess(rate: float, waves: bool = True, share: float = WAVE_PHASE_SHARE,
               into_bursty: bool = True) -> float:
        res, n = open_at_rate(procs, rate, z, waves=waves, share=share,
                              into_bursty=into_bursty, **opts)
        if not res.stable:
            return math.inf
        return model.excess(model._read_back(int(n), rate, res.residence_time[:, 0], None,
                                             "map-fpm"))

    try:
        found = rate_bracket(excess, sat=sat, floor=floor, span=INTERPOLATE_SPAN,
                             cheap=lambda rate: excess(rate, waves=False),
                             rough=lambda rate: excess(rate, share=ROUGH_PHASE_SHARE,
                                                       into_bursty=False),
                             rough_reach=ROUGH_REACH)
        if found is None:
            return None
        n_lo = open_at_rate(procs, found[0], z, **opts)[1]
        n_hi = open_at_rate(procs, found[1], z, **opts)[1]
    except (RuntimeError, ValueError, np.linalg.LinAlgError, ArithmeticError):
        return None
    if n_lo < n0 or not n_hi < min(model.map_limit, CAPACITY_LIMIT):
        return None
    a, b = math.ceil(n_lo), math.floor(n_hi)   # read off the two rates: no solve
    if a > b:                                   # both within one user: n_lo's floor meets it
        return int(math.floor(n_lo)), False
    check = lambda n: model.excess(model.at(n, SEARCH_TOL))    # noqa: E731
    known = {a: check(a), b: check(b)}
    if known[a] > 0:                            # below n_lo every population meets it
        return a - 1, False
    if known[b] <= 0:                           # above n_hi none does
        return b, False
    return capacity_search(check, start=a, limit=CAPACITY_LIMIT, known=known, rel_tol=0.0,
                           floor=floor)


#: a class's demand counts as identified when the Kalman filter and the regression agree
#: within this relative difference and the filter's standard deviation is below it too
IDENTIFIED_TOLERANCE = 0.3


def identified_demands(tier: TierModel, classes: list[str], mix: np.ndarray) -> np.ndarray:
    """The tier's per-class demands, with every class whose demand is not identified replaced
    by the mix-weighted mean ``d_bar``; the result is rescaled so that ``sum_c p_c d_c = d_bar``
    (the aggregate, which utilization pins down, is kept).

    Under a steady class mix the split of a tier's busy time between classes is barely
    observable (Huang et al. (2012) section 3.3; Rolia and Vetland (1995) section 5): the Kalman estimates wander and
    the regression (the second opinion) lands elsewhere. A class counts as identified when the
    two agree within :data:`IDENTIFIED_TOLERANCE` and the filter's standard deviation is below
    that fraction of the demand; the others read back the aggregate's response time instead of
    a guess."""
    d = np.array([tier.demands.get(c, 0.0) for c in classes])
    d_bar = float(mix @ d)
    sigma = np.array([tier.demand_std.get(c, np.inf) for c in classes])
    reg = np.array([tier.regression.get(c, np.nan) for c in classes])
    tol = IDENTIFIED_TOLERANCE
    with np.errstate(invalid="ignore"):
        agree = np.abs(d - reg) <= tol * np.maximum(d, reg)
        ok = agree & (sigma <= tol * d) & (d > 0)
    out = np.where(ok, d, d_bar)
    total = float(mix @ out)
    return out * (d_bar / total) if total > 0 else out


def tier_demands(tier: TierModel, classes: list[str], mix: np.ndarray,
                 policy: str, selected: tuple[np.ndarray, bool] | None = None,
                 discipline: str | None = None) -> np.ndarray:
    """The per-class demands ``d_{m,c}`` the model uses for ``tier`` under ``policy``
    (``SystemConfig.demand_policy``, docs/accuracy.md section 7):

    * ``selected`` -- the estimator the tier picked (:attr:`TierModel.estimator`, by recent
      one-step-ahead utilization-prediction error): the Kalman demands, or the sliding
      regression's when it was picked and covers every class; used as they are;
    * ``kalman_checked`` -- the Kalman demands with unidentified classes replaced by the
      mix-weighted mean (:func:`identified_demands`).

    Under ``selected``, where the tier reports per-class response times for every class of the
    mix and they identify the split, the split between classes is the response-time split's
    (:func:`estimators.class_split.class_split`: ``D_c`` proportional to ``R_c`` under processor
    sharing, ``R_c - W`` under FCFS; Brosig et al. 2009, Kleinrock 1976) and the estimator
    gives the aggregate ``sum_c p_c d_c`` only: utilization pins the aggregate down, not the
    split (Huang et al. 2012, section 3.3) -- on a real database the Kalman filter put 144 ms
    on a 3-ms class and 2 ms on a 125-ms one, every window carrying the response times that
    tell them apart. A split the response times do not identify (the discipline undecided and
    its two readings apart) is not used: the estimator's split stands, flagged
    ``split_unidentified``. Only a split whose discipline the windows decided as processor
    sharing is used (its worst class within 3% on simulated PS tiers): one read as FCFS
    subtracts a wait many times a light class's own demand (worst class off 3-124% on
    simulated FCFS tiers), and one whose two readings merely agree moved the steady capacity
    of docs/accuracy.md section 6's bursty 8-core database from -18% to +37% -- the
    estimator's split stands there, unless no discipline allows it
    (:func:`agreed_split_applies`: a class's demand above its response time at the tier), or
    the configuration declares the tier processor sharing (:func:`declared_split_applies`).
    ``selected``: :func:`selected_demands` and :func:`agreed_split_applies` of this tier as
    :func:`selected_splits` gives them (computed here when ``None``, with ``discipline`` the
    tier's configured one)."""
    if policy == "kalman_checked":
        return identified_demands(tier, classes, mix)
    if policy != "selected":
        raise ValueError(f"demand_policy: unknown policy {policy!r}")
    if selected is None:
        selected = selected_splits([tier], classes, mix, {tier.tier: discipline}
                                   if discipline else None)[0]
    d, agreed = selected
    ps = tier.split_decided and tier.split_discipline == "ps"
    if not ps and agreed:
        ps = True
    if tier.split and (tier.split_identified or agreed) and ps and all(
            c in tier.split for c, p in zip(classes, mix.tolist()) if p > 0):
        shares = np.array([float(tier.split.get(c, 0.0)) for c in classes])
        total, base = float(mix @ d), float(mix @ shares)
        if total > 0 and base > 0:
            return shares * (total / base)
    return d


def selected_demands(tier: TierModel, classes: list[str]) -> np.ndarray:
    """The demands of the estimator ``tier`` selected: the Kalman filter's, or the sliding
    regression's when it was picked and covers every class."""
    source = tier.demands
    if tier.estimator == "regression" and all(c in tier.regression for c in classes):
        source = tier.regression
    return np.array([float(source.get(c, 0.0)) for c in classes])


def selected_splits(tiers: list[TierModel], classes: list[str], mix: np.ndarray,
                    disciplines: dict[str, str] | None = None
                    ) -> list[tuple[np.ndarray, bool]]:
    """Per tier, :func:`selected_demands` and whether the response-time split stands in for
    them (:func:`agreed_split_applies`, or :func:`declared_split_applies` under the configured
    ``disciplines``): :func:`tier_demands` and :func:`split_replaced_flags` both read them, so
    a model computes them once."""
    out = []
    for t in tiers:
        d = selected_demands(t, classes)
        out.append((d, agreed_split_applies(t, classes, d, mix) or declared_split_applies(
            t, classes, d, mix, (disciplines or {}).get(t.tier))))
    return out


def split_replaced_flags(tiers: list[TierModel], classes: list[str], mix: np.ndarray,
                         policy: str, selected: list[tuple[np.ndarray, bool]] | None = None,
                         disciplines: dict[str, str] | None = None) -> list[str]:
    """A flag per tier whose estimators' split gave way to the agreeing response-time split
    (:func:`agreed_split_applies`), naming the classes it had put above their response time,
    or to the PS reading of a tier configured processor sharing (:func:`declared_split_applies`).
    ``selected``: :func:`selected_splits` of ``tiers`` (computed here when ``None``)."""
    if policy != "selected":
        return []
    if selected is None:
        selected = selected_splits(tiers, classes, mix, disciplines)
    out = []
    for t, (d, agreed) in zip(tiers, selected):
        if agreed and (disciplines or {}).get(t.tier) == "ps" \
                and not agreed_split_applies(t, classes, d, mix):
            out.append(f"split_replaced: {t.tier}: configured processor sharing, which the "
                       f"windows left undecided; the PS reading of the response-time split is "
                       f"used")
        elif agreed and t.split_identified is False:
            out.append(f"split_replaced: {t.tier}: the response-time split is undecided and "
                       f"its readings apart; the windows' utilization law prefers its PS "
                       f"reading to its FCFS one, and the PS reading is used")
        elif agreed:
            shares = np.array([float(t.split[c]) for c in classes])
            g = surplus(t, classes, shares * float(mix @ d) / float(mix @ shares), mix)
            names = above_response(dict(zip(classes, (d / g).tolist())), t.class_response)
            beyond = "" if g == 1.0 else (f" (its aggregate {g:.2f}x the classes' time there, "
                                          f"the surplus spread as the times)")
            out.append(f"split_replaced: {t.tier}: the {t.estimator} put "
                       f"{', '.join(names)} above {'its' if len(names) == 1 else 'their'} "
                       f"response time at the tier{beyond}; the response-time split is used "
                       f"(its PS and FCFS readings agree)")
    return out


def agreed_split_applies(tier: TierModel, classes: list[str], d: np.ndarray,
                         mix: np.ndarray) -> bool:
    """Whether an undecided response-time split stands in for the estimator's ``d``: the split
    is identified because its PS and FCFS readings agree (low load: the stretch near 1, the
    shared wait near 0, :func:`estimators.class_split.class_split`), the tier is not bursty, and
    the estimator's split puts more on some class than that class's mean response time at the
    tier (:func:`estimators.class_split.above_response`: ``R_c >= D_c`` under any discipline,
    Lazowska et al. 1984) while the split, scaled to the estimator's aggregate over ``mix``,
    keeps every class within it -- evidence that the estimator, not the split, is wrong. (On a
    tier timed short of its CPU work, such as a web tier timed without the client work of its
    downstream calls, the scaled split breaks the bound too: its times bound nothing -- by
    Little (1961) its population is then below its busy servers -- and the estimator stands.)
    On the real testbed's database at 5-20 users the regression put 5.4 ms on a class that
    spent 3.8 ms there and 12 ms on one of 5.5 ms. Where the estimator's split is possible it
    stands, as before (an agreeing split moved a bursty FCFS database's capacity,
    docs/accuracy.md section 6).

    Where the estimator's aggregate exceeds the classes' mean time at the tier beyond the margin
    (``g = sum_c p_c d_c / sum_c p_c R_c > 1.1``, over the classes timed: :func:`surplus`; the
    tier busier per request than its requests are there -- work outside their timed spans, such
    as a database's background writer and vacuum, Rolia and Vetland 1995), no split keeps every
    class within its time; both are judged against the times scaled by ``g``, the surplus spread
    as the times are, as the PS reading spreads the aggregate. An estimator split beyond that
    has moved work between classes, which the surplus does not explain: on the testbed's
    database at 2 users (``g`` 1.2) the regression put 10.6 ms on a class that spent 3.0 ms
    there.

    A split whose readings are apart (unidentified) stands in for the estimator's too where the
    windows' utilization law prefers its PS reading to its FCFS one
    (:attr:`TierModel.split_preferred`, :func:`estimators.class_split.preferred_reading`: a
    likelihood-ratio test) and the scaled PS reading keeps every class within its response
    time: the estimators' own split under a steady mix is noise (Huang et al. 2012, section
    3.3) -- on the testbed's database at 20 users the regression put 5.3-7.2 ms on a 2.2-ms
    class and 7.2 ms on a 4.1-ms one. The split stays flagged unidentified."""
    if tier.split_decided or tier.bursty or not tier.split \
            or not all(c in tier.split for c in classes):
        return False
    preferred = tier.split_identified is False and tier.split_preferred == "ps"
    if tier.split_identified is not True and not preferred:
        return False
    shares = np.array([float(tier.split[c]) for c in classes])
    total, base = float(mix @ d), float(mix @ shares)
    if not (total > 0 and base > 0):
        return False
    scaled = shares * (total / base)
    g = surplus(tier, classes, scaled, mix)
    bound = tier.class_response if g == 1.0 else {c: g * float(r)
                                                   for c, r in tier.class_response.items()}
    # the estimator's split breaking the bound first: most solves stop there
    if not preferred and not above_response(dict(zip(classes, d.tolist())), bound):
        return False
    return not above_response(dict(zip(classes, scaled.tolist())), bound)


def undecided_splits(tiers: list[TierModel], classes: list[str], mix: np.ndarray,
                     policy: str, disciplines: dict[str, str] | None,
                     selected: list[Any] | None = None) -> list[TierModel]:
    """The tiers whose class split neither the windows identified (``split_identified``
    False) nor the configuration decides: under the ``selected`` policy a tier declared
    processor sharing takes the PS reading of its split (:func:`declared_split_applies`), so
    the split the model uses there is the declared discipline's, not an unidentified one, and
    neither the flag nor the trust reason ``split_unidentified`` nor a withheld remedy applies.
    ``selected``: :func:`selected_splits` of ``tiers`` where the caller has them."""
    out = []
    for i, t in enumerate(tiers):
        if t.split_identified is not False:
            continue
        if policy == "selected" and (disciplines or {}).get(t.tier) == "ps":
            d = selected[i][0] if selected and selected[i] is not None \
                else selected_demands(t, classes)
            if declared_split_applies(t, classes, d, mix, "ps"):
                continue
        out.append(t)
    return out


def declared_split_applies(tier: TierModel, classes: list[str], d: np.ndarray,
                           mix: np.ndarray, discipline: str | None) -> bool:
    """Whether the PS reading of the response-time split stands in for the estimator's ``d``
    on a tier the configuration declares processor sharing (``discipline``, the configured
    ``disciplines`` entry) whose windows left the discipline undecided.

    Under processor sharing every class at the tier shares its cores alike, so a class's mean
    time there is its demand times one stretch common to all classes, ``R_c = D_c R / D``
    (Kleinrock 1976; the product form of Baskett et al. 1975, whatever the service
    distribution) -- the model's own read-back of a ``ps`` tier. The demand split is then the
    times' split, and the windows' utilization need pin down the aggregate only; the
    estimator's own split under a steady mix is noise (Huang et al. 2012, section 3.3): on the
    testbed's database, declared ``ps``, at 5 users it put 9-42 ms on a class of 2.7 ms of CPU
    and 4.3 ms there, in half the solves. Where the user declared the discipline the windows
    need not decide it (their stretch barely moves at low load), and the split needs no
    evidence against the estimator's (:func:`agreed_split_applies`' bound): the discipline
    makes it the demands' split. Not on a bursty tier (its service correlated, outside the
    product form; its demands come from its history), nor where the windows decided the tier
    first-come-first-served, nor while some class of the mix has no split yet."""
    if discipline != "ps" or tier.bursty or tier.split_discipline != "ps" or not tier.split \
            or not all(c in tier.split for c, p in zip(classes, mix.tolist()) if p > 0):
        return False
    shares = np.array([float(tier.split.get(c, 0.0)) for c in classes])
    return float(mix @ d) > 0 and float(mix @ shares) > 0


def surplus(tier: TierModel, classes: list[str], scaled: np.ndarray, mix: np.ndarray) -> float:
    """``g``: the response-time split ``scaled`` to the estimator's aggregate over the classes'
    mean times at the tier (:attr:`TierModel.class_response`), mix-weighted over the classes
    that have one -- where every class has one, the aggregate over ``sum_c p_c R_c`` -- and 1
    where it is within them by :data:`~estimators.class_split.RESPONSE_MARGIN` (the noise of a
    few hundred requests' mean time, the margin :func:`above_response` allows a class) or less
    (:func:`agreed_split_applies`)."""
    timed = [(p, float(s), float(tier.class_response[c]))
             for c, p, s in zip(classes, mix.tolist(), scaled.tolist())
             if p > 0 and c in tier.class_response
             and math.isfinite(float(tier.class_response[c])) and tier.class_response[c] > 0]
    covered = sum(p * r for p, _, r in timed)
    g = sum(p * s for p, s, _ in timed) / covered if covered > 0 else 1.0
    return g if g > 1.0 + RESPONSE_MARGIN else 1.0


#: how the flags of :func:`background_demands` begin
BACKGROUND_FLAG = "background: "


def background_demands(tiers: list[TierModel], classes: list[str], mix: np.ndarray,
                       V_mc: np.ndarray, D_mc: np.ndarray, bursty: list[bool]
                       ) -> tuple[np.ndarray, list[str]]:
    """``(D_mc, flags)``: the demands with each tier's busy time that no request holds taken out
    as background (:func:`estimators.background.background`): where a tier's busy time per
    request ``d = sum_c p_c D_{m,c}`` exceeds its requests' time there ``r`` by ``g = d / r``
    beyond :data:`~estimators.class_split.RESPONSE_MARGIN` (:func:`surplus`, over the classes
    timed, :attr:`TierModel.class_response`, the demands spread as the response-time split
    where the tier has one: the rare classes have no mean time yet at low load), the tier's
    demands are scaled to ``r`` and stretched by the background's share of its cores,
    ``D / g / (1 - rho)`` with ``rho = X (d - r) / c`` (``X`` the request rate the times were
    measured at, :attr:`TierModel.response_rate` over the visits; ``d`` no more than the busy
    time measured per completion, :attr:`TierModel.mean_service`; an aggregate beyond the
    tier's cores is only scaled to the times): an open class of constant utilization (Lazowska
    et al. 1984, chapter 7), which takes the tier's cores from the requests without lengthening
    the time they hold a pool token by ``g``.

    The bound ``d <= r`` holds only where ``R`` is the whole time at the tier, as a caller
    measures it around its calls (the database's times, which the app takes around each call).
    The entry tier's times are its own server's, whose timed span leaves out its framework's
    work before and after (the testbed's app: 0.2 ms timed against 2 ms of CPU per request):
    that work holds the request's worker, and the windows cannot tell it from background --
    neither the latency fit's shortfall (:mod:`streams.predict.latency`: a database busy 1.25x
    its times falls below its threshold too) nor a pool's occupancy (its holding time bounds
    the sum over the tiers it holds, not one tier's share). The entry tier's surplus stays
    demand, flagged. A bursty tier (``bursty``) takes its demand from its history
    (:func:`history_demands`) and is left as it is."""
    flags: list[str] = []
    out = D_mc
    for m, t in enumerate(tiers):
        visits = float(mix @ V_mc[m])
        if bursty[m] or not t.response_rate or not t.class_response or not visits > 0:
            continue
        if not (t.split and all(c in t.split for c in classes)):
            continue
        per_visit = np.divide(D_mc[m], V_mc[m], out=np.zeros(len(classes)), where=V_mc[m] > 0)
        shares = np.array([float(t.split[c]) for c in classes])
        base = float(mix @ shares)
        if not base > 0:
            continue
        g = surplus(t, classes, shares * (float(mix @ per_visit) / base), mix)
        if g == 1.0:
            continue
        busy = float(mix @ D_mc[m])
        if m == 0:
            flags.append(f"{BACKGROUND_FLAG}{t.tier}: busy {g:.2f}x its requests' time there per "
                         f"request; its times are its own server's (the entry tier): "
                         f"background and work outside the timed span are not told apart, the "
                         f"surplus stays demand")
            continue
        # the background from the busy time measured (``mean_service``: busy time per
        # completion over the history) where the estimator's aggregate is above it
        measured = busy if t.mean_service is None else min(busy, t.mean_service * visits)
        try:
            bg = background(measured, busy / g, float(t.response_rate) / visits,
                            float(t.cores))
        except ValueError:
            bg = None
        if out is D_mc:
            out = D_mc.copy()
        stretch = 1.0 if bg is None else bg.stretch
        out[m] = D_mc[m] * (stretch / g)
        taken = ("no background taken (the estimator's aggregate is beyond the tier's cores)"
                 if bg is None else f"{bg.utilization:.3g} of its {t.cores} core"
                 f"{'' if t.cores == 1 else 's'} taken as background (constant: its share "
                 f"measured at this load only)")
        flags.append(f"{BACKGROUND_FLAG}{t.tier}: busy {g:.2f}x its requests' time there per "
                     f"request: {taken}, the demands scaled to the times and stretched by "
                     f"{stretch:.3f}")
    return out, flags


def history_demands(D_m: np.ndarray, V_m: np.ndarray, mix: np.ndarray,
                    mean_service: float) -> np.ndarray:
    """A bursty tier's per-class system demands ``D_{m,c}`` rescaled by one factor so that
    ``sum_c p_c D_{m,c} = S_m sum_c p_c V_{m,c}``, ``S_m = mean_service`` (mean busy time per
    completion over the history, Mi et al. (2008) section 4.1); the split between classes is kept.
    ``D_m`` unchanged when it has no aggregate (``sum_c p_c D_{m,c} <= 0``) or ``S_m <= 0``."""
    current = float(mix @ D_m)
    target = float(mean_service) * float(mix @ V_m)
    if not (current > 0 and target > 0 and math.isfinite(target)):
        return D_m
    return D_m * (target / current)


def fcfs_split(tier: TierModel, classes: list[str], mix: np.ndarray, V_m: np.ndarray,
               mean_service: float) -> tuple[np.ndarray, bool] | None:
    """A FCFS tier's per-class system demands from its per-class response times.

    In one FCFS queue every class meets the same wait, so ``R_{m,c} = W_m + S_{m,c}`` and the
    wait cancels from the differences: with ``q_c`` the visit mix (``p_c V_{m,c}``, normed)
    and ``Rbar = sum_c q_c R_{m,c}``, ``S_{m,c} = Sbar_m + R_{m,c} - Rbar`` (``Sbar_m`` the
    busy time per completion). It separates classes that move together (Huang et al. (2012) section 3.3:
    under a steady mix utilization alone cannot), which matters most on a bursty tier, where
    the window-local estimators are noisiest. Returns ``(V_{m,c} S_{m,c}, clipped)`` -- a
    service floored at 5% of ``Sbar`` is clipped -- or ``None`` unless every class with
    requests has a long-run response time at the tier (:attr:`TierModel.class_response`)."""
    R = np.array([tier.class_response.get(c, np.nan) for c in classes])
    q = mix * V_m
    active = q > 0
    if not (q.sum() > 0 and mean_service > 0 and np.all(np.isfinite(R[active]))):
        return None
    q = q / q.sum()
    S = mean_service + np.where(active, R, 0.0) - float(q[active] @ R[active])
    floor = 0.05 * mean_service
    clipped = np.maximum(S, floor)
    # flooring raises the aggregate above Sbar: scale back so that sum_c q_c S_c = Sbar
    total = float(q[active] @ clipped[active])
    if total > 0:
        clipped = clipped * (mean_service / total)
    return V_m * clipped, bool(np.any(active & (S < floor)))


def _history_flag(tier: str, before: float, after: float) -> str:
    return (f"{tier}: bursty, demand from its history (busy time per completion; "
            f"bursty_demand = history): {1000 * after:.3g} ms, estimator {1000 * before:.3g} ms")


#: how the flags of what the model assumed for a missing input begin (the console summary and
#: the report pick them out by it)
ASSUMED = "assumed: "


def assumed_structure(tiers: list[TierModel], cfg: SystemConfig,
                      learned: bool = False) -> list[str]:
    """The flags of the model's structure taken from defaults, not from the input: a tier whose
    windows give no ``cores`` is one core, and without ``visits`` every request visits every
    tier once. Both scale capacity (Lazowska et al. (1984): a tier's demand is visits x service
    per visit, its throughput bound cores / demand), so the prediction says it assumed them.
    ``learned``: the visit ratios come from the completions (:mod:`streams.predict.visits`),
    which flags itself the ratios it had to assume."""
    flags = [f"{ASSUMED}{t.tier} has 1 core: its windows give no cores (the contract's "
             f"default)" for t in tiers if t.cores_assumed]
    if len(tiers) > 1 and not learned:
        unset = [t.tier for t in tiers if not (cfg.visits or {}).get(t.tier)]
        if unset:
            flags.append(f"{ASSUMED}1 visit per request to {', '.join(unset)}: visits not "
                         f"configured (the default)")
    return flags


def is_ps(tier: TierModel, cfg: SystemConfig) -> bool:
    """Tier shares its cores: configured ``disciplines = { tier = "ps" }``; where the
    configuration is silent, its per-class response times decided so
    (:mod:`estimators.class_split`); a configured ``"fcfs"`` overrides that."""
    configured = cfg.disciplines.get(tier.tier)
    if configured is not None:
        return configured == "ps"
    return bool(tier.split_decided and tier.split_discipline == "ps")


def build_model(tiers: list[TierModel], classes: list[str], mix: dict[str, float],
                think_time: float, cfg: SystemConfig, provisional: bool = False,
                visits: Visits | None = None) -> SystemModel:
    """The system's model from its tiers' estimates and the measured mix. ``provisional``:
    the tiers that are only provisionally bursty (:attr:`TierModel.provisional`) enter the
    MAP network as bursty too -- the pessimistic model the predicted-breach alert acts on
    while their ``I`` is not yet confirmed (flagged). ``visits``: the visit ratios with their
    flags (:func:`streams.predict.visits.resolve`; ``None``: the configured ones, 1 where
    the configuration is silent)."""
    flags: list[str] = list(visits.flags) if visits is not None else []
    C = len(classes)
    weights = np.array([max(mix.get(c, 0.0), 0.0) for c in classes])
    if not weights.sum() > 0:
        weights = np.ones(C)
        flags.append("idle: no completions in the interval, equal class mix assumed")
    p = weights / weights.sum()
    flags += assumed_structure(tiers, cfg, learned=visits is not None)
    if visits is not None:                  # Visits.visit, each tier's row looked up once
        rows = [visits.used.get(t.tier, {}) for t in tiers]
        V_mc = np.array([[row.get(c, 1.0) for c in classes] for row in rows])
    else:
        V_mc = np.array([[cfg.visit(t.tier, c) for c in classes] for t in tiers])
    V_mc = V_mc.reshape(len(tiers), C)
    selected = selected_splits(tiers, classes, p, cfg.disciplines) \
        if cfg.demand_policy == "selected" else [None] * len(tiers)
    D_mc = V_mc * np.array([tier_demands(t, classes, p, cfg.demand_policy, sel)
                            for t, sel in zip(tiers, selected)]).reshape(len(tiers), C)
    D_mc, background_flags = background_demands(
        tiers, classes, p, V_mc, D_mc,
        [t.bursty or (provisional and t.provisional) for t in tiers])
    servers = np.array([float(t.cores) for t in tiers])
    sla = np.array([cfg.sla_for(c) for c in classes])
    slo_rows = [cfg.slo_for(c) for c in classes] if cfg.slo else []
    slo = None if not any(slo_rows) else np.array(
        [[row.get(name, math.inf) for name in SLO_QUANTILES] for row in slo_rows], dtype=float)
    processes = None
    def is_bursty(t: TierModel) -> bool:
        return t.bursty or (provisional and t.provisional)

    bursty = [t for t in tiers if is_bursty(t)]
    flags += [f"split_unidentified: {t.tier}: {t.split_reason}" for t in
              undecided_splits(tiers, classes, p, cfg.demand_policy, cfg.disciplines, selected)]
    flags += split_replaced_flags(tiers, classes, p, cfg.demand_policy,
                                  selected if cfg.demand_policy == "selected" else None,
                                  cfg.disciplines)
    flags += [t.load_flag for t in tiers if t.load_flag]
    flags += background_flags
    if provisional:
        flags += [f"{t.tier}: provisionally bursty (I {t.idc:.3g} above idc_threshold, "
                  f"not yet confirmed: {t.idc_flag})" for t in tiers if t.provisional]
    if bursty:
        if any(t.process is None for t in bursty):
            flags.append("bursty tier without a MAP(2) fit yet: MVA used")
        elif not np.all(D_mc @ p > 0):
            flags.append("a tier has no demand yet: MVA used")
        else:
            processes = [t.process if is_bursty(t) and t.process is not None
                         else MAP.exponential(1.0) for t in tiers]
            if cfg.bursty_demand == "history":
                for m, t in enumerate(tiers):
                    if is_bursty(t) and t.mean_service is not None:
                        before = float(D_mc[m] @ p)
                        split = None if is_ps(t, cfg) \
                            else fcfs_split(t, classes, p, V_mc[m], t.mean_service)
                        if split is not None:
                            D_mc[m] = split[0]
                            flags.append(f"{t.tier}: class split from the per-class response "
                                         "times at the tier (FCFS: one shared wait)"
                                         + ("; a class's service floored" if split[1] else ""))
                        else:
                            D_mc[m] = history_demands(D_mc[m], V_mc[m], p, t.mean_service)
                        after = float(D_mc[m] @ p)
                        if after != before:
                            flags.append(_history_flag(t.tier, before, after))
    ps = np.array([is_ps(t, cfg) for t in tiers])
    ps_law = np.array([cfg.disciplines.get(t.tier) == "ps" for t in tiers])
    D_mc, delays, latency_flags = model_delays(tiers, classes, D_mc, V_mc, cfg)
    flags += latency_flags
    pools, pool_flags = model_pools(cfg, [t.tier for t in tiers])
    flags += pool_flags
    service_scv, scv_flags = class_scvs(tiers, list(classes), cfg, pools, V_mc, delays,
                                        POOL_FLAG)
    pool_processes = None
    if pools and processes is not None:
        pool_processes = processes if bursty_pool_wired(processes, pools) else None
        processes = None
        if pool_processes is not None:
            flags.append(f"{POOL_FLAG}bursty tier solved by its held chain within the chain's "
                         f"budget, quantiles from the exponential network scaled")
        else:
            flags.append(f"{POOL_FLAG}bursty tiers solved as exponential with their mean "
                         f"demands (the pool model has no MAP network)")
    return SystemModel(tiers=[t.tier for t in tiers], classes=list(classes), D_mc=D_mc, mix=p,
                       servers=servers, think_time=think_time, sla=sla, processes=processes,
                       map_limit=cfg.map_max_population, flags=flags, visits=V_mc,
                       per_job_max_cores=cfg.per_job_max_cores, open_fed=cfg.open_fed,
                       slo=slo,
                       visits_measured=visits.measured if visits is not None else {},
                       ps=ps if ps.any() else None,
                       ps_law=ps_law if ps_law.any() else None, pools=pools, delays=delays,
                       pool_processes=pool_processes, service_scv=service_scv,
                       service_scv_flags=tuple(scv_flags))


def bursty_pool_wired(processes: list[MAP], pools: tuple[PoolSpec, ...]) -> bool:
    """The pool model solves the bursty tier by its held chain
    (:func:`solvers.pools_bursty.solve_pools_bursty`, Mi et al. 2008's runs of slow service
    kept where the flow-equivalent station of Chandy et al. 1975 loses them): exactly one
    bursty tier, held by exactly one pool (no nested pools over it), first or last of its held
    tiers; pure delays are infinite-server stations in the chain's other held tiers. The
    chain's budget is checked at each population (:meth:`SystemModel._bursty_pool_applies`)."""
    bursty = [m for m, p in enumerate(processes) if p.order > 1]
    if len(bursty) != 1:
        return False
    b = bursty[0]
    holding = [p for p in pools if p.first <= b < p.last]
    return len(holding) == 1 and b in (holding[0].first, holding[0].last - 1)


def model_pools(cfg: SystemConfig, tiers: list[str]) -> tuple[tuple[PoolSpec, ...], list[str]]:
    """The configured pools over the model's ``tiers`` (indices), and flags for those left
    out: a pool whose held tiers are not all in the model yet (no windows from one), or not
    consecutive there."""
    out, flags = [], []
    for name, pool in cfg.pools.items():
        if not all(t in tiers for t in pool.holds):
            missing = [t for t in pool.holds if t not in tiers]
            flags.append(f"{POOL_FLAG}{name} not modelled: no windows yet from {missing}")
            continue
        first = tiers.index(pool.holds[0])
        if tuple(tiers[first:first + len(pool.holds)]) != pool.holds:
            flags.append(f"{POOL_FLAG}{name} not modelled: its tiers {list(pool.holds)} are "
                         f"not consecutive among the model's {tiers}")
            continue
        out.append(PoolSpec(pool.size, first, first + len(pool.holds), name))
    return tuple(out), flags
