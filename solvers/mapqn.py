"""Exact solution of the closed MAP queueing network of Mi et al. (2008), Fig. 9.

The network (Mi et al. 2008, sections 3.4 and 4.1-4.2): ``N`` users (emulated browsers) cycle
through

    delay (infinite server, exponential think time of mean ``Z``)
      -> queue 1 -> queue 2 -> ... -> queue M -> delay

where queue ``m`` is a single FCFS server whose *service process* is a Markovian arrival process
``MAP(D0_m, D1_m)`` of order ``k_m`` (an exponential server is a MAP of order 1). Service-process
semantics: the phase ``phi_m`` of queue ``m`` evolves only while the queue is busy; then ``D0_m``
entries are hidden phase changes and ``D1_m`` entries complete the job in service, which moves to
queue ``m+1`` (queue ``M``: back to the delay). While the queue is idle the phase is frozen. With
``Z = 0`` there is no delay: a job completing at queue ``M`` rejoins queue 1 at once.

**Cores.** Queue ``m`` may have ``c_m >= 1`` servers (``servers``) that share its one service
process, run at speed ``min(n_m, c_m)``: in a state with ``n_m`` jobs every ``D0_m`` off-diagonal
and ``D1_m`` rate is multiplied by the number of busy cores. For an exponential process this is
exactly the M/M/c station (rate ``min(n, c)/S``); for a bursty one, a phase change slows or
speeds every busy core at once. That is pessimistic for a physical multi-core tier, whose
cores take consecutive values of one service-time sequence and keep each job's own speed: at
three tiers 4/4/8 cores with a bursty database (I ~ 200) it predicted 55.0 ms against a
simulated 45.5 +- 2.7 ms at 110 users. :mod:`solvers.decomposition`'s per-job station follows
the physical tier (45.7 ms there); this chain stays the exact reference for one-core tiers,
where both stations are the tier running its sequence in order. The states are the same;
``utilization`` is then per core, ``E[min(n_m, c_m)]/c_m``.

The state of the continuous-time Markov chain is ``(n, phi)``:

* ``n = (n_1..n_M)`` jobs at each queue, ``sum(n) <= N`` (``= N`` when ``Z = 0``); the delay
  holds ``N - sum(n)`` jobs;
* ``phi = (phi_1..phi_M)``, ``K = prod(k_m)`` phase combinations.

**Levels.** The *level* of a state is ``l = sum(n)``, the number of jobs in the queues. States are
ordered by level (then by ``n_M, ..., n_1``, then by ``phi`` with ``phi_M`` fastest), so the
generator ``Q`` is block tridiagonal in the levels: a delay departure (rate ``(N - l)/Z``) raises
the level by one, a completion at queue ``M`` lowers it by one, every other transition keeps it.

**Solver.** The stationary vector ``pi Q = 0, pi 1 = 1`` is computed by a direct method. The
iterative alternatives (GMRES with an ILU preconditioner, Gauss-Seidel) need thousands of
iterations on the stiff bursty chains of interest (measured: 2600 GMRES(100) iterations at
``N = 150``), and level-by-level block elimination (linear level reduction) is out of reach for
large ``N``: the level blocks of its Schur complements are dense, ``(l K) x (l K)`` at level ``l``,
i.e. ``O(N^4 K^3)`` flops and ``O(N^3 K^2)`` memory (about 70 GB at ``N = 1200``).

* ``"multifrontal"`` (default above ~15k states): Gaussian elimination of the chain in a
  nested-dissection order of the occupancy lattice (:mod:`solvers.linalg.multifrontal`). Every
  transition changes each ``n_m`` and the level by at most one, so lattice lines ``n_m = c`` or
  ``l = c`` are separators (:func:`_plan`); the cuts keep every region within ``e^30`` of its
  boundary's likelihood by the product-form estimate (:func:`_product_form_logw`). About
  ``O(n^1.5)`` flops and ``O(n log n)`` memory for ``M = 2`` (``n`` states).
* ``"splu"``: SuperLU (scipy) on ``Q^T`` without the row and column of one likely recurrent state
  ``r`` (``pi_r = 1``); fastest for small chains and an independent check of the multifrontal
  path. A multifrontal solution that fails its checks (non-finite, negative, residual) is
  recomputed this way when the chain is small enough, and flagged.

Probabilities are computed exactly up to rounding; ``residual`` reports ``||pi Q||_1``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.special import gammaln

from solvers.linalg.multifrontal import PANEL, Multifrontal, Plan, dissect
from solvers.processes import MAP

__all__ = ["MAPQNResult", "StateSpace", "build_generator", "solve_closed", "stationary_states"]

#: Largest chain this module will build (states); beyond it the memory exceeds tens of GB.
MAX_STATES = 10_000_000
_LEAF_NODES = 24  # occupancy vectors per leaf of the dissection tree
_SPREAD = 30.0  # nats: no region may be more than e^30 likelier than its boundary (dissect)


def _splu_limits(queues: int) -> tuple[int, int]:
    """(states up to which ``method="auto"`` uses SuperLU, states up to which a rejected
    multifrontal solution is recomputed with SuperLU). Measured: SuperLU's fill-reducing
    orderings do well on 1-D/2-D occupancy lattices, badly on 3-D ones."""
    return (15_000, 200_000) if queues <= 2 else (3_000, 20_000)


# ---------------------------------------------------------------------------------- result
def _frozen(a: Any, dtype: Any = float) -> np.ndarray:
    arr = np.array(a, dtype=dtype)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class MAPQNResult:
    """Stationary solution of the closed MAP network (Mi et al. 2008, Fig. 9).

    Per-queue arrays have shape ``(M,)``:

    * ``throughput`` ``X`` -- completions per second at every queue (and at the delay);
    * ``response_time`` ``R = sum_m R_m`` -- think time excluded, so ``N = X (R + Z)``;
    * ``residence_time`` ``R_m = Q_m / X`` (Little's law per queue);
    * ``utilization`` ``U_m = P(n_m > 0)``; equals ``X E[S_m]`` (utilization law);
    * ``queue_length`` ``Q_m = E[n_m]`` (waiting plus in service);
    * ``queue_length_distribution`` shape ``(M, N+1)``, ``P(n_m = j)``;
    * ``bottleneck_probability`` ``B_m``: probability that queue ``m`` holds the most jobs of all
      queues. Ties are *split*: in a state where ``t`` queues share the maximum each of them
      receives ``1/t`` of the state's probability (so ``sum_m B_m = 1``; the all-empty state
      counts ``1/M`` for every queue). A bottleneck switch (Mi et al. 2008, section 3.2) shows as
      two or more queues with a substantial ``B_m``; without it one queue has ``B_m`` near 1.

    Diagnostics: ``states`` (size of the chain), ``iterations`` (0: direct solver), ``residual``
    ``||pi Q||_1`` with ``pi 1 = 1`` and ``relative_residual`` (divided by ``max_i |q_ii|``),
    ``method``, ``elapsed_s``, ``trivial`` (population 0: nothing solved) and ``flags``.

    ``population == 0``: throughput, utilizations and queue lengths are 0, residence times are
    the mean service times ``E[S_m]`` (what a single job would meet; no NaN), ``response_time``
    their sum, bottleneck probabilities ``1/M`` each.
    """

    throughput: float
    response_time: float
    residence_time: np.ndarray
    utilization: np.ndarray
    queue_length: np.ndarray
    queue_length_distribution: np.ndarray
    bottleneck_probability: np.ndarray
    population: int
    think_time: float
    states: int
    iterations: int
    residual: float
    relative_residual: float
    method: str
    elapsed_s: float = 0.0
    trivial: bool = False
    flags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in ("residence_time", "utilization", "queue_length",
                     "queue_length_distribution", "bottleneck_probability"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    @property
    def think_queue_length(self) -> float:
        """Mean number of users thinking, ``N - sum_m Q_m`` (``= X Z``)."""
        return float(self.population - self.queue_length.sum())


# ---------------------------------------------------------------------------------- inputs
def _check_processes(processes: Any) -> list[MAP]:
    if isinstance(processes, MAP):
        processes = [processes]
    try:
        procs = list(processes)
    except TypeError:
        raise ValueError(
            f"processes: must be a sequence of MAP service processes, got {type(processes).__name__}"
        ) from None
    if not procs:
        raise ValueError("processes: at least one queue is needed")
    for i, p in enumerate(procs):
        if not isinstance(p, MAP):
            raise ValueError(
                f"processes: item {i} must be a solvers.processes.MAP, got {type(p).__name__}"
            )
    return procs


def _nonnegative(value: Any, name: str, integer: bool) -> float:
    """``value`` as a finite number >= 0 (a whole one if ``integer``), else a ``ValueError``
    naming ``name``."""
    what = "a non-negative integer" if integer else "a finite number >= 0"
    try:
        number = float(value) if not isinstance(value, bool) and value is not None else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number >= 0) or (integer and number != int(number)):
        raise ValueError(f"{name}: must be {what}, got {value!r}")
    return number


def _check_servers(servers: Any, queues: int) -> tuple[int, ...]:
    """Cores per queue as a tuple of ints >= 1 (``()`` when ``None`` or all 1)."""
    if servers is None:
        return ()
    try:
        out = list(servers)
    except TypeError:
        raise ValueError(f"servers: must be a sequence of integers >= 1, got {servers!r}") from None
    if len(out) != queues:
        raise ValueError(f"servers: must have one entry per queue ({queues}), got {len(out)}")
    for i, c in enumerate(out):
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1:
            raise ValueError(f"servers: item {i} must be an integer >= 1, got {c!r}")
    return tuple(int(c) for c in out) if any(c != 1 for c in out) else ()


def _check_population(population: Any) -> int:
    return int(_nonnegative(population, "population", integer=True))


def _check_think_time(think_time: Any) -> float:
    return _nonnegative(think_time, "think_time", integer=False)


# ---------------------------------------------------------------------------------- states
def _occupancies(queues: int, population: int, closed_loop: bool) -> np.ndarray:
    """All ``n`` in ``N^M`` with ``sum(n) <= N`` (``== N`` if ``closed_loop``), unordered."""
    free = queues - 1 if closed_loop else queues
    rows = np.zeros((1, 0), dtype=np.int64)
    for _ in range(free):
        used = rows.sum(axis=1)
        counts = population - used + 1
        rows = np.repeat(rows, counts, axis=0)
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        values = np.arange(len(rows), dtype=np.int64) - starts
        rows = np.hstack([rows, values[:, None]])
    if closed_loop:
        rows = np.hstack([rows, (population - rows.sum(axis=1))[:, None]])
    return rows


@dataclass(frozen=True, eq=False)
class StateSpace:
    """The states ``(n, phi)`` of the chain, ordered by level ``l = sum(n)``.

    ``occupancy`` ``(S, M)`` lists the occupancy vectors ``n`` (level-major order); state index
    ``s * K + c`` is occupancy ``s`` with phase combination ``c``; ``phases`` ``(K, M)`` gives
    ``phi`` for each ``c`` (last queue's phase fastest). ``level_start[l]`` is the first occupancy
    of level ``l`` (with ``Z = 0`` only level ``N`` exists).
    """

    occupancy: np.ndarray
    phases: np.ndarray
    population: int
    think_time: float
    servers: tuple[int, ...] = ()          # cores per queue; () = one each

    def speed(self, m: int, occ: np.ndarray | None = None) -> np.ndarray | None:
        """Busy cores ``min(n_m, c_m)`` of queue ``m`` at occupancies ``occ`` (default all);
        ``None`` when the queue has one core (speed 1 wherever it is busy)."""
        c = self.servers[m] if self.servers else 1
        if c == 1:
            return None
        n = self.occupancy[:, m] if occ is None else occ
        return np.minimum(n, c).astype(float)

    @property
    def queues(self) -> int:
        return int(self.occupancy.shape[1])

    @property
    def phase_count(self) -> int:
        return int(self.phases.shape[0])

    @property
    def size(self) -> int:
        return int(self.occupancy.shape[0] * self.phases.shape[0])

    @property
    def level(self) -> np.ndarray:
        """Level ``l = sum(n)`` of each occupancy vector."""
        return self.occupancy.sum(axis=1)

    @property
    def state_level(self) -> np.ndarray:
        """Level of each state (repeated ``K`` times per occupancy)."""
        return np.repeat(self.level, self.phase_count)

    def _codes(self, occ: np.ndarray) -> np.ndarray:
        radix = (self.population + 1) ** np.arange(self.queues, dtype=np.int64)
        return occ @ radix

    @cached_property
    def _lookup(self) -> tuple[np.ndarray, np.ndarray]:
        codes = self._codes(self.occupancy)
        order = np.argsort(codes, kind="stable")
        return codes[order], order

    def index(self, occ: np.ndarray) -> np.ndarray:
        """Position of each occupancy row of ``occ`` (all valid) in :attr:`occupancy`."""
        sorted_codes, order = self._lookup
        return order[np.searchsorted(sorted_codes, self._codes(np.asarray(occ, dtype=np.int64)))]


def _state_space(procs: Sequence[MAP], population: int, think_time: float,
                 servers: tuple[int, ...] = ()) -> StateSpace:
    queues = len(procs)
    closed_loop = think_time == 0.0
    if queues * math.log(population + 1) > 62 * math.log(2):
        raise ValueError("population: the state space of this network is too large")
    count = math.comb(population + queues - (1 if closed_loop else 0), queues - (1 if closed_loop else 0))
    k = [p.order for p in procs]
    if count * math.prod(k) > MAX_STATES:
        raise ValueError(
            f"population: the chain would have {count * math.prod(k)} states "
            f"(limit {MAX_STATES}); reduce population or the MAP orders of processes"
        )
    occ = _occupancies(queues, population, closed_loop)
    keys = tuple(occ[:, m] for m in range(queues)) + (occ.sum(axis=1),)
    occ = occ[np.lexsort(keys)]
    phases = np.stack(np.unravel_index(np.arange(math.prod(k)), k), axis=1).astype(np.int64)
    return StateSpace(occ, phases, population, think_time, tuple(servers))


# ---------------------------------------------------------------------------------- generator
def _transitions(procs: Sequence[MAP], space: StateSpace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Off-diagonal rates ``(rows, cols, rates)`` of the generator (state indices, duplicates kept)."""
    occ, ph = space.occupancy, space.phases
    K, M, N, Z = space.phase_count, space.queues, space.population, space.think_time
    level = space.level
    strides = np.array([math.prod(p.order for p in procs[m + 1:]) for m in range(M)], dtype=np.int64)
    all_phases = np.arange(K, dtype=np.int64)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []

    def add(src_occ: np.ndarray, src_ph: np.ndarray, dst_occ: np.ndarray, dst_ph: np.ndarray,
            rate: np.ndarray | float) -> None:
        s = (src_occ[:, None] * K + src_ph[None, :]).ravel()
        d = (dst_occ[:, None] * K + dst_ph[None, :]).ravel()
        per_occ = np.asarray(rate, dtype=float).reshape(-1, 1)
        r = np.broadcast_to(per_occ, (len(src_occ), len(src_ph))).ravel()
        keep = s != d
        rows.append(s[keep])
        cols.append(d[keep])
        vals.append(r[keep])

    if Z > 0:  # delay -> queue 1, rate (N - l)/Z, level l -> l + 1
        src = np.nonzero(level < N)[0]
        dst_occ = occ[src].copy()
        dst_occ[:, 0] += 1
        add(src, all_phases, space.index(dst_occ), all_phases, (N - level[src]) / Z)
    for m, proc in enumerate(procs):
        busy = np.nonzero(occ[:, m] > 0)[0]
        if len(busy) == 0:
            continue
        moved = occ[busy].copy()
        moved[:, m] -= 1
        if m + 1 < M:
            moved[:, m + 1] += 1
        elif Z == 0:
            moved[:, 0] += 1
        # else: the job returns to the delay (level l -> l - 1)
        moved_idx = space.index(moved)
        speed = space.speed(m, occ[busy, m])               # None: one core
        for matrix, dst in ((proc.D0, busy), (proc.D1, moved_idx)):
            for i, j in zip(*np.nonzero(matrix)):
                if matrix is proc.D0 and i == j:
                    continue
                src_ph = np.nonzero(ph[:, m] == i)[0]
                rate = float(matrix[i, j]) if speed is None else speed * float(matrix[i, j])
                add(busy, src_ph, dst, src_ph + (j - i) * strides[m], rate)
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


def _offdiagonal(procs: Sequence[MAP], space: StateSpace) -> sp.csr_matrix:
    rows, cols, vals = _transitions(procs, space)
    n = space.size
    idx = np.int32 if n < 2**31 - 1 else np.int64
    mat = sp.csr_matrix((vals, (rows.astype(idx), cols.astype(idx))), shape=(n, n))
    mat.sum_duplicates()
    return mat


def build_generator(processes: Any, population: Any, think_time: Any,
                    servers: Any = None) -> tuple[sp.csr_matrix, StateSpace]:
    """The generator ``Q`` (CSR, rows sum to 0) of the network and its :class:`StateSpace`.

    States are ordered by level, so ``Q`` is block tridiagonal in the levels (see module notes).
    """
    procs = _check_processes(processes)
    n_pop = _check_population(population)
    z = _check_think_time(think_time)
    space = _state_space(procs, n_pop, z, _check_servers(servers, len(procs)))
    off = _offdiagonal(procs, space)
    return _with_diagonal(off), space


def _with_diagonal(off: sp.csr_matrix) -> sp.csr_matrix:
    out = np.asarray(off.sum(axis=1)).ravel()
    return (off - sp.diags(out)).tocsr()


# ---------------------------------------------------------------------------------- anchor state
def _product_form_logw(procs: Sequence[MAP], space: StateSpace) -> np.ndarray:
    """Log product-form weights of the occupancy vectors (exponential servers of the same means).

    ``log w(n) = sum_m n_m log E[S_m] + (N - l) log Z - log (N - l)!``, an estimate of how likely
    each occupancy is; it picks the anchor state ``r`` (its probability is fixed before
    normalising) and keeps the dissection's regions close in likelihood to their boundaries.
    """
    means = np.array([p.mean for p in procs])
    occ = space.occupancy
    logw = occ @ np.log(means)
    for m, c in enumerate(space.servers):
        if c > 1:     # log prod_{j <= n} min(j, c): c servers serve min(n, c) jobs at once
            n = occ[:, m]
            logw = logw - gammaln(np.minimum(n, c) + 1) - np.maximum(n - c, 0) * math.log(c)
    if space.think_time > 0:
        delay = space.population - space.level
        logw = logw + delay * math.log(space.think_time) - gammaln(delay + 1)
    return logw


def _anchor_state(procs: Sequence[MAP], space: StateSpace, candidates: np.ndarray) -> int:
    """A recurrent, likely state among occupancy indices ``candidates``.

    Occupancy: the most likely candidate under the product-form weights. Phase of queue ``m``: the
    most likely stationary phase (``argmax theta_m``) if the queue is busy, otherwise the most
    likely phase just after a completion (``argmax pi_m``) -- the phase an idle queue is frozen in.
    """
    logw = _product_form_logw(procs, space)[candidates]
    s = int(candidates[int(np.argmax(logw))])
    n = space.occupancy[s]
    phi = [int(np.argmax(p.theta)) if n[m] > 0 else int(np.argmax(p.embedded))
           for m, p in enumerate(procs)]
    c = int(np.ravel_multi_index(tuple(phi), tuple(p.order for p in procs)))
    return s * space.phase_count + c


# ---------------------------------------------------------------------------------- splu
def _solve_splu(off: sp.csr_matrix, anchor: int) -> np.ndarray:
    """``pi`` from ``Q^T`` without row/column ``anchor``: ``Q_sub^T x = -Q[anchor, sub]^T``."""
    q = _with_diagonal(off)
    n = q.shape[0]
    if n == 1:
        return np.ones(1)
    keep = np.r_[0:anchor, anchor + 1:n]
    a = q[keep][:, keep].T.tocsc()
    rhs = -np.asarray(q[anchor, keep].todense()).ravel()
    lu = spla.splu(a, permc_spec="COLAMD", diag_pivot_thresh=1e-3)
    x = lu.solve(rhs)
    pi = np.empty(n)
    pi[keep] = x
    pi[anchor] = 1.0
    return pi


# ---------------------------------------------------------------------------------- dissection plan
def _moves(space: StateSpace) -> list[np.ndarray]:
    """Occupancy changes of the transitions (each also taken in reverse for adjacency)."""
    M = space.queues
    out = []
    if space.think_time > 0:
        out.append(np.eye(M, dtype=np.int64)[0])
    for m in range(M):
        v = np.zeros(M, dtype=np.int64)
        v[m] -= 1
        if m + 1 < M:
            v[m + 1] += 1
        elif space.think_time == 0:
            v[0] += 1
        if np.any(v):
            out.append(v)
    return out


def _neighbour_table(space: StateSpace) -> np.ndarray:
    """Occupancy adjacency (both directions), padded with -1, shape ``(S, 2 * moves)``."""
    occ = space.occupancy
    level = space.level
    cols = []
    for v in _moves(space):
        for sign in (1, -1):
            target = occ + sign * v
            ok = np.all(target >= 0, axis=1) & (level + sign * v.sum() <= space.population)
            col = np.full(len(occ), -1, dtype=np.int64)
            col[ok] = space.index(target[ok])
            cols.append(col)
    return np.stack(cols, axis=1) if cols else np.full((len(occ), 1), -1, dtype=np.int64)


def _plan(procs: Sequence[MAP], space: StateSpace, leaf: int) -> Plan:
    count = space.occupancy.shape[0]
    coords = [space.occupancy[:, m] for m in range(space.queues)]
    if space.think_time > 0 and space.queues > 1:
        coords.append(space.level)
    table = _neighbour_table(space)
    logw = _product_form_logw(procs, space)
    tree = dissect(coords, logw, table, leaf, _SPREAD)
    rank = np.empty(count, dtype=np.int64)
    owner = np.empty(count, dtype=np.int64)
    for t, sep in enumerate(tree.sep):
        rank[sep] = np.arange(tree.end[t] - len(sep), tree.end[t])
        owner[sep] = t
    boundary = [b[np.argsort(rank[b], kind="stable")] for b in tree.boundary]
    return Plan(tree.sep, tree.children, boundary, rank, owner)


def _solve_multifrontal(procs: Sequence[MAP], space: StateSpace, off: sp.csr_matrix,
                        leaf: int = _LEAF_NODES, panel: int = PANEL) -> np.ndarray:
    """``pi`` (unnormalised) by nested-dissection multifrontal GTH elimination (module notes)."""
    plan = _plan(procs, space, leaf)
    anchor = _anchor_state(procs, space, plan.sep[-1])
    return Multifrontal(space.phase_count, off, plan, anchor, panel).solve()


# ---------------------------------------------------------------------------------- metrics
def _metrics(procs: Sequence[MAP], space: StateSpace, pi: np.ndarray) -> dict[str, Any]:
    K, M, N = space.phase_count, space.queues, space.population
    occ = space.occupancy
    p_occ = pi.reshape(-1, K).sum(axis=1)
    queue_length = p_occ @ occ
    utilization = np.array([p_occ[occ[:, m] > 0].sum() if space.speed(m) is None
                            else p_occ @ space.speed(m) / space.servers[m] for m in range(M)])
    dist = np.stack([np.bincount(occ[:, m], weights=p_occ, minlength=N + 1) for m in range(M)])
    # throughput: completions at the last queue, rate (D1_M 1)[phi_M] in busy states
    exit_rate = procs[-1].D1.sum(axis=1)[space.phases[:, -1]]
    busy_last = occ[:, -1] > 0
    flow = pi.reshape(-1, K)[busy_last] @ exit_rate
    speed = space.speed(M - 1)
    throughput = float((flow if speed is None else flow * speed[busy_last]).sum())
    top = occ.max(axis=1)
    is_top = occ == top[:, None]
    share = is_top / is_top.sum(axis=1, keepdims=True)
    bottleneck = p_occ @ share
    return dict(throughput=throughput, queue_length=queue_length, utilization=utilization,
                queue_length_distribution=dist, bottleneck_probability=bottleneck)


def _trivial(procs: Sequence[MAP], think_time: float) -> MAPQNResult:
    M = len(procs)
    means = np.array([p.mean for p in procs])
    dist = np.zeros((M, 1))
    dist[:, 0] = 1.0
    return MAPQNResult(
        throughput=0.0, response_time=float(means.sum()), residence_time=means,
        utilization=np.zeros(M), queue_length=np.zeros(M), queue_length_distribution=dist,
        bottleneck_probability=np.full(M, 1.0 / M), population=0, think_time=think_time,
        states=0, iterations=0, residual=0.0, relative_residual=0.0, method="trivial",
        trivial=True, flags=("population is 0: nothing to solve",),
    )


# ---------------------------------------------------------------------------------- stationary
@dataclass
class _Solution:
    pi: np.ndarray
    residual: float = 0.0
    relative_residual: float = 0.0
    flags: list[str] = field(default_factory=list)
    problem: str | None = None


def _stationary(procs: Sequence[MAP], space: StateSpace, off: sp.csr_matrix, method: str) -> _Solution:
    """Normalised ``pi`` and its residual ``||pi Q||_1``; ``problem`` says why it was rejected.

    A solution is rejected when the solver fails (singular block), returns non-finite values,
    probabilities below ``-1e-9`` or a relative residual above ``1e-8``; tiny negative rounding
    noise is clipped to 0.
    """
    try:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
            if method == "splu":
                pi = _solve_splu(off, _anchor_state(procs, space, np.arange(space.occupancy.shape[0])))
            else:
                pi = _solve_multifrontal(procs, space, off)
    except (np.linalg.LinAlgError, RuntimeError, FloatingPointError) as exc:
        return _Solution(np.empty(0), problem=f"{type(exc).__name__}: {exc}")
    total = pi.sum()
    if not np.all(np.isfinite(pi)) or not total > 0:
        return _Solution(pi, problem="non-finite or zero stationary vector")
    pi = pi / total
    flags = []
    low = float(pi.min())
    if low < -1e-9:
        return _Solution(pi, problem=f"negative probabilities down to {low:.3g}")
    if low < 0:
        pi = np.clip(pi, 0.0, None)
        pi /= pi.sum()
    outflow = np.asarray(off.sum(axis=1)).ravel()
    residual = float(np.abs(off.T @ pi - outflow * pi).sum())
    scale = float(outflow.max())
    relative = residual / scale if scale > 0 else residual
    if not relative <= 1e-8:
        return _Solution(pi, residual, relative, problem=f"relative residual {relative:.3g}")
    return _Solution(pi, residual, relative, flags)


# ---------------------------------------------------------------------------------- API
def stationary_states(processes: Any, population: Any, think_time: Any, *,
                      servers: Any = None) -> tuple[StateSpace, np.ndarray]:
    """The chain's states and stationary vector ``pi`` (:func:`solve_closed`'s, SuperLU or
    multifrontal as ``"auto"`` picks, SuperLU on a rejected multifrontal solve) for what
    needs more than the means: a response-time law (:mod:`solvers.response_time.mapnet`).
    ``population >= 1``."""
    procs = _check_processes(processes)
    n_pop = _check_population(population)
    if n_pop == 0:
        raise ValueError("population: must be >= 1 for the chain's states, got 0")
    z = _check_think_time(think_time)
    space = _state_space(procs, n_pop, z, _check_servers(servers, len(procs)))
    off = _offdiagonal(procs, space)
    chosen = "splu" if space.size <= _splu_limits(space.queues)[0] else "multifrontal"
    solution = _stationary(procs, space, off, chosen)
    if solution.problem is not None and chosen == "multifrontal" \
            and space.size <= _splu_limits(space.queues)[1]:
        solution = _stationary(procs, space, off, "splu")
    if solution.problem is not None:
        raise RuntimeError(f"mapqn: the stationary solve failed ({solution.problem})")
    return space, solution.pi


def solve_closed(processes: Any, population: Any, think_time: Any, *,
                 method: str = "auto", servers: Any = None) -> MAPQNResult:
    """Exact stationary solution of the closed MAP network of Mi et al. (2008), Fig. 9.

    ``processes``: the service processes of queues ``1..M`` in visit order (``MAP`` objects;
    ``MAP.exponential(mean)`` for an exponential server); ``population`` ``N >= 0`` users;
    ``think_time`` ``Z >= 0`` seconds, the mean of the exponential delay (0: no delay);
    ``servers``: cores per queue (default 1 each; module notes).
    ``method``: ``"auto"`` (SuperLU up to 15k states for ``M <= 2``, 3k for ``M >= 3``, else
    multifrontal), ``"splu"`` or ``"multifrontal"``. Raises ``ValueError`` naming ``processes``, ``population``,
    ``think_time`` or ``method`` on bad input.
    """
    procs = _check_processes(processes)
    n_pop = _check_population(population)
    z = _check_think_time(think_time)
    cores = _check_servers(servers, len(procs))
    if method not in ("auto", "splu", "multifrontal"):
        raise ValueError(f"method: must be 'auto', 'splu' or 'multifrontal', got {method!r}")
    if n_pop == 0:
        return _trivial(procs, z)
    t0 = time.perf_counter()
    space = _state_space(procs, n_pop, z, cores)
    off = _offdiagonal(procs, space)
    chosen = method
    if method == "auto":
        chosen = "splu" if space.size <= _splu_limits(space.queues)[0] else "multifrontal"
    flags: list[str] = []
    solution = _stationary(procs, space, off, chosen)
    if solution.problem is not None and chosen == "multifrontal":
        if space.size > _splu_limits(space.queues)[1]:
            raise RuntimeError(f"mapqn: the multifrontal solve failed ({solution.problem}) and the "
                               f"chain ({space.size} states) is too large for the SuperLU fallback")
        flags.append(f"multifrontal solve rejected ({solution.problem}); solved with SuperLU")
        chosen = "splu"
        solution = _stationary(procs, space, off, chosen)
    if solution.problem is not None:
        raise RuntimeError(f"mapqn: the stationary solve failed ({solution.problem})")
    flags.extend(solution.flags)
    pi = solution.pi
    m = _metrics(procs, space, pi)
    x = m["throughput"]
    residence = m["queue_length"] / x if x > 0 else np.array([p.mean for p in procs])
    return MAPQNResult(
        throughput=x, response_time=float(residence.sum()), residence_time=residence,
        utilization=m["utilization"], queue_length=m["queue_length"],
        queue_length_distribution=m["queue_length_distribution"],
        bottleneck_probability=m["bottleneck_probability"], population=n_pop, think_time=z,
        states=space.size, iterations=0, residual=solution.residual,
        relative_residual=solution.relative_residual, method=chosen,
        elapsed_s=time.perf_counter() - t0, flags=tuple(flags),
    )
