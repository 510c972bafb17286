"""Closed MAP networks with multi-core tiers at large populations: flow-equivalent decomposition.

The network is :mod:`solvers.mapqn`'s (Mi et al. 2008, Fig. 9) with cores: ``N`` users think
for an exponential time of mean ``Z``, then visit tiers ``1..M`` in order. Tier ``m`` has
``c_m`` cores and one FCFS queue; its service is exponential (mean ``S_m``) or a
``MAP(D0_m, D1_m)`` service-time sequence that its cores consume in the order jobs start
(Mi et al. 2008, section 4: burstiness as runs of slow service).

The exact chain (:func:`solvers.mapqn.solve_closed`) has ``C(N+M, M) prod_m K_m`` states, out
of reach at the thousands of users real systems have. The decomposition keeps what makes
bursty service harmful -- the joint dynamics of a tier's queue and its service phase, the
pile-up during a slow run -- while its cost grows linearly with ``N``. Its parts, in the
order :func:`solve_decomposed` (:mod:`.solve`) takes them:

1. the flow-equivalent server of the exponential part, by log-space convolutions (:mod:`.fes`);
2. each bursty tier's chain exactly against it (:mod:`.chain`; its states and transitions,
   per-job or speed-scaled: :mod:`.stations`; its banded LU and the reuse of it across
   sweeps: :mod:`.factors`);
3. several bursty tiers: Marie's fixed point and its stopping rules (:mod:`.fixed_point`);
4. the exponential tiers after a bursty one as ``MAP/M/c`` queues fed by its departures
   (:mod:`.waves`);

then the metrics (:mod:`.result`). What a capacity search's probes share lives in
:mod:`.memo`. Exponential-only networks are solved exactly (the product form); bursty ones
are approximate, checked against the exact chain where it fits and against a simulation of
the physical system (docs/accuracy.md).

The names below are re-exported so that ``solvers.decomposition.X`` keeps working; a test
that replaces a function or a constant must patch the module that looks it up (e.g.
:mod:`.chain` for ``factor_and_solve``, :mod:`.stations` for ``PHASE_COUNT_BINS``).
"""

from solvers.decomposition.chain import FIRST_LEVELS, LEVEL_MARGIN, RELIABLE_LEVEL, \
    RESIDUAL_LIMIT, TRUNCATION_MASS, first_levels, solve_levels
from solvers.decomposition.factors import REFINE_LOOSE, REFINE_RESIDUAL, REFINE_STEPS, \
    FactorStore, factor_and_solve
from solvers.decomposition.fes import LOG_SPACE_TAPS, TAP_CHUNK, head_convolution, head_log, \
    ld_weights, log_g_exponential
from solvers.decomposition.fixed_point import ANDERSON_MEMORY, CLEAR_BOTTLENECK, HELD_UNIT, \
    RESTART, SETTLE_OTHERS, SETTLE_SWEEPS, SWING_FLAG, SWING_SPAN, SWING_SWEEPS, bounded_swing, \
    sweep_order
from solvers.decomposition.memo import Memo, SolveMemo
from solvers.decomposition.result import DecompositionResult
from solvers.decomposition.solve import solve_decomposed
from solvers.decomposition.stations import PER_JOB_MAX_BYTES, PER_JOB_MAX_CORES, PHASE_COUNT_BINS, \
    per_job_states, per_job_transitions, phase_counts
from solvers.decomposition.waves import LINE_REACH, WAVE_ITERATIONS, WAVE_MAX_PHASES, WAVE_TOL, \
    downstream_groups, map_m_c_mean, waves_on_line

__all__ = ["DecompositionResult", "SolveMemo", "solve_decomposed"]
