"""Multifrontal GTH elimination of a Markov chain's generator in a nested-dissection order.

For ``pi Q = 0, pi 1 = 1`` on a chain whose states are *nodes* of a lattice, ``K`` states (dofs)
a node, where every transition joins a node to itself or a lattice neighbour: lattice lines
separate the lattice, so it is bisected recursively (:func:`dissect`, the symbolic phase) and
each tree node eliminates (censors) its separator from a dense *front* holding the censored
generator on separator + boundary (:class:`Multifrontal`, the numeric phase): with
``Y = F_RP (-F_PP)^-1`` and ``F_RR += Y F_PR`` panel by panel (BLAS-3), the stochastic
complement of the chain. The diagonal of every pivot panel is recomputed from the off-diagonal
rates (GTH, Grassmann-Taksar-Heyman), so escape rates are sums of non-negative rates, never
differences. Going down the tree, ``pi_S = pi_B W`` recovers the separator from its boundary.
Cuts are chosen so that no region is more than ``e^spread`` likelier (by the caller's
log-weights, e.g. a product-form estimate) than its boundary; otherwise, under light load, the
escape rate of the region holding the mode would underflow. About ``O(n^1.5)`` flops and
``O(n log n)`` memory on a two-dimensional lattice (``n`` states).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

PANEL = 256  # smallest pivot block (panel) of the blocked GTH elimination inside a front
_MAX_PANELS = 4  # wider panels beyond this many per front (fewer passes over large fronts)
_CHUNK_ENTRIES = 1 << 22  # rows per chunk of the trailing update: ~32 MB temporaries


@dataclass
class Plan:
    """Symbolic part of the multifrontal elimination (nested dissection of the lattice).

    Tree nodes ``t`` are in post-order (children first, root last). ``sep[t]``: occupancy vectors
    eliminated at ``t`` (a separator, or a whole leaf region); ``children[t]``; ``boundary[t]``:
    the occupancy vectors outside ``t``'s subtree adjacent to it (all in ancestors' separators),
    in elimination order. ``rank``: elimination position of each occupancy vector, ``owner``:
    the node that eliminates it.
    """

    sep: list[np.ndarray]
    children: list[list[int]]
    boundary: list[np.ndarray]
    rank: np.ndarray
    owner: np.ndarray


def _best_cut(values: np.ndarray, logw: np.ndarray, b_values: np.ndarray, b_logw: np.ndarray,
              spread: float) -> tuple[int, int, int] | None:
    """Most balanced admissible cut ``v == c`` of a region along one direction.

    ``values``/``logw``: the coordinate and log-weight of the region's points; ``b_*``: those of
    its boundary. A cut is admissible when each side's most likely point is at most ``spread``
    (nats) more likely than the most likely point of that side's boundary (the separator plus
    the adjacent part of the region's boundary): then no front has to censor a region whose
    escape rate is astronomically small (it would underflow). Returns (separator size,
    imbalance, c) or None.
    """
    lo = int(values.min())
    width = int(values.max()) - lo + 1
    if width < 3:
        return None
    v = values - lo
    counts = np.bincount(v, minlength=width)
    top = np.full(width, -np.inf)
    np.maximum.at(top, v, logw)
    before = np.cumsum(counts) - counts
    after = len(values) - before - counts
    running = np.maximum.accumulate(top)
    left = np.concatenate([[-np.inf], running[:-1]])
    right = np.concatenate([np.maximum.accumulate(top[::-1])[::-1][1:], [-np.inf]])
    b_top = np.full(width + 2, -np.inf)  # boundary values lie in lo-1 .. hi+1
    np.maximum.at(b_top, np.clip(b_values - lo + 1, 0, width + 1), b_logw)
    b_left = np.maximum.accumulate(b_top)[:width]  # boundary values < c
    b_right = np.maximum.accumulate(b_top[::-1])[::-1][2:]  # boundary values > c
    ok = (before > 0) & (after > 0)
    admissible = ok & (left <= np.maximum(top, b_left) + spread) & (right <= np.maximum(top, b_right) + spread)
    cand = np.nonzero(admissible)[0]
    if len(cand) == 0:
        return None
    best = int(cand[np.argmin(np.abs(before[cand] - after[cand]))])
    return int(counts[best]), int(abs(before[best] - after[best])), lo + best


@dataclass
class _Dissection:
    sep: list[np.ndarray] = field(default_factory=list)
    children: list[list[int]] = field(default_factory=list)
    boundary: list[np.ndarray] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)


def dissect(coords: list[np.ndarray], logw: np.ndarray, table: np.ndarray, leaf: int,
             spread: float) -> _Dissection:
    """Recursive coordinate bisection of the occupancy lattice (nested dissection).

    Every transition changes each coordinate ``n_m`` (and the level ``l``) by at most 1, so the
    points with coordinate ``== c`` separate those ``< c`` from those ``> c``. Each region is cut
    along the direction whose most balanced admissible cut (:func:`_best_cut`) is smallest; the
    boundary of every region (its outside neighbours, all in ancestors' separators) is tracked.
    """
    out = _Dissection()
    count = len(logw)
    mark = np.zeros(count + 1, dtype=bool)  # index -1 (padding of ``table``) stays False
    position = [0]

    def adjacent(cand: np.ndarray, region: np.ndarray) -> np.ndarray:
        mark[region] = True
        hit = mark[table[cand]].any(axis=1)
        mark[region] = False
        return cand[hit]

    def rec(idx: np.ndarray, bnd: np.ndarray) -> int:
        first = position[0]
        best = None
        if len(idx) > leaf:
            for d, values in enumerate(coords):
                res = _best_cut(values[idx], logw[idx], values[bnd], logw[bnd], spread)
                if res is not None and (best is None or res[:2] < best[0][:2]):
                    best = (res, d)
            if best is None:  # nothing admissible: fall back to the most balanced cut
                for d, values in enumerate(coords):
                    res = _best_cut(values[idx], logw[idx], values[bnd], logw[bnd], np.inf)
                    if res is not None and (best is None or res[:2] < best[0][:2]):
                        best = (res, d)
        if best is None:
            kids: list[int] = []
            sep = idx
        else:
            (_, _, c), d = best
            v = coords[d][idx]
            sep = idx[v == c]
            cand = np.concatenate([bnd, sep])
            kids = []
            for part in (idx[v < c], idx[v > c]):
                kids.append(rec(part, adjacent(cand, part)))
        position[0] += len(sep)
        out.sep.append(sep)
        out.children.append(kids)
        out.boundary.append(bnd)
        out.start.append(first)
        out.end.append(position[0])
        return len(out.sep) - 1

    rec(np.arange(count), np.empty(0, dtype=np.int64))
    return out


def _dofs(nodes: np.ndarray, K: int) -> np.ndarray:
    return (nodes[:, None] * K + np.arange(K)).ravel()


def _gth_null_vector(g: np.ndarray) -> np.ndarray:
    """Stationary vector of a small generator block by GTH (state ``q-1`` kept; must be recurrent).

    Only off-diagonal entries of ``g`` are read (in place, destroyed).
    """
    q = g.shape[0]
    np.fill_diagonal(g, 0.0)
    for k in range(q - 1):
        s = g[k, k + 1:].sum()
        if not s > 0:
            raise RuntimeError("mapqn: anchor state is not recurrent (zero GTH pivot)")
        g[k + 1:, k] /= s
        g[k + 1:, k + 1:] += np.outer(g[k + 1:, k], g[k, k + 1:])
    pi = np.zeros(q)
    pi[q - 1] = 1.0
    for k in range(q - 2, -1, -1):
        pi[k] = pi[k + 1:] @ g[k + 1:, k]
    return pi


def _gth_diagonal(front: np.ndarray, a: int, e: int) -> None:
    """Reset the diagonal of rows ``a:e`` to minus their off-diagonal sums over columns ``a:``.

    Rows of a (censored) generator sum to zero, so this recomputes every escape rate as a sum of
    non-negative rates instead of by cancellation (GTH)."""
    rows = front[a:e, a:]
    diag = np.arange(e - a)
    rows[diag, diag] = 0.0
    rows[diag, diag] = -rows.sum(axis=1)


def _panels(s: int, panel: int) -> list[tuple[int, int]]:
    width = max(panel, -(-s // _MAX_PANELS))
    return [(a, min(a + width, s)) for a in range(0, s, width)]


def _trailing_update(front: np.ndarray, y: np.ndarray, a: int, e: int) -> None:
    """``F[e:, e:] += Y F[a:e, e:]`` in row chunks (bounded temporaries)."""
    f = front.shape[0]
    right = front[a:e, e:]
    chunk = max(64, _CHUNK_ENTRIES // max(f - e, 1))
    for r0 in range(0, f - e, chunk):
        r1 = min(r0 + chunk, f - e)
        front[e + r0:e + r1, e:] += y[r0:r1] @ right


def _eliminate_front(front: np.ndarray, s: int, panel: int) -> tuple[np.ndarray, np.ndarray]:
    """Censor the first ``s`` variables (``S``) out of the dense front ``F`` (``S`` then ``B``).

    Blocked right-looking elimination on generator rows, panel ``P`` by panel: GTH diagonal of
    ``F_PP`` (:func:`_gth_diagonal`), ``Y = F_RP (-F_PP)^-1`` (``-F_PP`` is a row diagonally
    dominant M-matrix, its inverse is >= 0) and ``F_RR += Y F_PR`` (stochastic complement).
    Returns ``W`` (``|B| x s``, ``pi_S = pi_B W``) and the update ``U`` (``|B| x |B|``), the
    censored rates among ``B`` that the parent front adds in.
    """
    f = front.shape[0]
    panels = _panels(s, panel)
    if len(panels) == 1:
        _gth_diagonal(front, 0, s)
        w = front[s:, :s] @ np.linalg.inv(-front[:s, :s])
        update = w @ front[:s, s:]
        update += front[s:, s:]
        return w, update
    blocks = []
    for a, e in panels:
        _gth_diagonal(front, a, e)
        y = front[e:, a:e] @ np.linalg.inv(-front[a:e, a:e])  # pi_P = pi_R Y, R = e..f
        _trailing_update(front, y, a, e)
        blocks.append((a, e, y))
    w = np.empty((f - s, s))
    for a, e, y in reversed(blocks):
        w[:, a:e] = y[s - e:]  # rows of Y: later S variables (e..s), then B
        if e < s:
            w[:, a:e] += w[:, e:s] @ y[:s - e]
    return w, front[s:, s:].copy()


def _root_solve(front: np.ndarray, panel: int) -> np.ndarray:
    """Unnormalised ``pi`` on the root separator (the whole front; its last variable is kept)."""
    s = front.shape[0]
    panels = _panels(s, panel)
    blocks = []
    for a, e in panels[:-1]:
        _gth_diagonal(front, a, e)
        y = front[e:, a:e] @ np.linalg.inv(-front[a:e, a:e])
        _trailing_update(front, y, a, e)
        blocks.append((a, e, y))
    a_last = panels[-1][0]
    pi = np.zeros(s)
    pi[a_last:] = _gth_null_vector(front[a_last:, a_last:].copy())
    for a, e, y in reversed(blocks):
        pi[a:e] = pi[e:] @ y
    return pi


def _extend_add(front: np.ndarray, idx: np.ndarray, update: np.ndarray) -> None:
    """``front[idx, idx] += update``, by blocks over the contiguous runs of ``idx``."""
    breaks = np.nonzero(np.diff(idx) != 1)[0] + 1
    if len(breaks) >= 24:
        front[np.ix_(idx, idx)] += update
        return
    bounds = [0, *breaks.tolist(), len(idx)]
    runs = [(bounds[i], bounds[i + 1], int(idx[bounds[i]])) for i in range(len(bounds) - 1)]
    for ra, rb, fr in runs:
        for ca, cb, fc in runs:
            front[fr:fr + rb - ra, fc:fc + cb - ca] += update[ra:rb, ca:cb]


class Multifrontal:
    """Numeric phase of the multifrontal elimination of ``pi Q = 0`` (module notes), ``phases``
    states (dofs) a node of ``plan``, ``anchor`` the state kept to the end (recurrent).

    Each original off-diagonal rate ``q_ij`` is added to the front of the node that eliminates
    the earlier of ``i``, ``j``; diagonals are never read (GTH). Leaves keep no ``W`` (they are
    re-eliminated during the downward pass: at ``N = 1200`` their ``W`` would add ~1 GB to ~3.6 GB).
    """

    def __init__(self, phases: int, off: sp.csr_matrix, plan: Plan, anchor: int,
                 panel: int) -> None:
        self.K = phases
        self.plan = plan
        self.panel = panel
        K = self.K
        coo = off.tocoo()
        r_node = coo.row // K
        c_node = coo.col // K
        first = np.where(plan.rank[r_node] <= plan.rank[c_node], r_node, c_node)
        entry_owner = plan.owner[first]
        order = np.argsort(entry_owner, kind="stable")
        self.rows = coo.row[order]
        self.cols = coo.col[order]
        self.vals = coo.data[order]
        self.start = np.searchsorted(entry_owner[order], np.arange(len(plan.sep) + 1))
        root = len(plan.sep) - 1
        self.front_dofs: list[np.ndarray] = []
        for t, sep in enumerate(plan.sep):
            s_dofs = _dofs(sep, K)
            if t == root:
                s_dofs = np.concatenate([s_dofs[s_dofs != anchor], [anchor]])
            self.front_dofs.append(np.concatenate([s_dofs, _dofs(plan.boundary[t], K)]))
        widest = max(len(d) for d in self.front_dofs)
        self.workspace = np.empty(widest * widest)
        self.local = np.full(off.shape[0], -1, dtype=np.int64)

    def _assemble(self, t: int, pending: dict[int, np.ndarray]) -> np.ndarray:
        dofs = self.front_dofs[t]
        f = len(dofs)
        self.local[dofs] = np.arange(f)
        front = self.workspace[:f * f].reshape(f, f)
        front.fill(0.0)
        lo, hi = self.start[t], self.start[t + 1]
        front[self.local[self.rows[lo:hi]], self.local[self.cols[lo:hi]]] = self.vals[lo:hi]
        for c in self.plan.children[t]:
            _extend_add(front, self.local[_dofs(self.plan.boundary[c], self.K)], pending.pop(c))
        return front

    def solve(self) -> np.ndarray:
        plan, K = self.plan, self.K
        nodes = len(plan.sep)
        pending: dict[int, np.ndarray] = {}
        w_store: dict[int, np.ndarray] = {}
        pi = np.zeros(len(self.local))
        for t in range(nodes - 1):
            front = self._assemble(t, pending)
            w, pending[t] = _eliminate_front(front, len(plan.sep[t]) * K, self.panel)
            if plan.children[t]:
                w_store[t] = w
        root = nodes - 1
        pi[self.front_dofs[root]] = _root_solve(self._assemble(root, pending), self.panel)
        for t in range(nodes - 2, -1, -1):
            s = len(plan.sep[t]) * K
            dofs = self.front_dofs[t]
            if t in w_store:
                w = w_store.pop(t)
            else:  # leaf: re-eliminate (its front holds original rates only)
                w, _ = _eliminate_front(self._assemble(t, {}), s, self.panel)
            pi[dofs[:s]] = pi[dofs[s:]] @ w
        return pi
