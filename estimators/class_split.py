"""Per-class demands from the per-class response times at a tier, window by window, and which
scheduling discipline the tier follows.

The utilization law of a tier with ``cores`` CPUs in window ``k`` (Huang et al. 2012, eq.
(5.b); Rolia and Vetland (1995), Fig. 6) pins down the *total* of the per-class demands
weighted by throughput::

    z_k = U_k cores = sum_c X_{k,c} D_c

Under a steady class mix it barely tells the classes apart (Huang et al. 2012, section 3.3):
the Kalman filter and the regression can then put a heavy class's work on a light one. The
per-class response time at the tier ``R_{k,c}`` separates them, because queueing stretches
every class the same way -- how depends on the discipline (Brosig et al. 2009; the
``ServiceDemandLaw`` and response-time approaches LibReDE offers, Spinner et al. 2014):

* **processor sharing** (``"ps"``; an operating system's time-sliced CPU, a database with one
  process per connection): in M/G/1-PS a class's mean residence is ``R_c = D_c / (1 - U)``
  whatever the service distribution (Kleinrock 1976, ch. 4), so ``D_c`` is proportional
  to ``R_c``. With ``c`` cores the multi-server approximation of Seidmann et al. (1987) -- a
  single PS server ``c`` times as fast plus a delay ``D_c (c - 1) / c`` -- gives ``R_c = D_c
  ((c - 1) / c + 1 / (c (1 - U)))``: again one factor common to every class. With the
  utilization law the window's demands are::

      D_{k,c} = R_{k,c} / s_k,   s_k = sum_j X_{k,j} R_{k,j} / z_k

* **first-come-first-served** (``"fcfs"``; one queue in front of the cores, as the physical
  simulator's tiers): every class waits the same ``W_k`` in the queue, ``R_{k,c} = D_c +
  W_k``, and the utilization law gives ``W_k = (sum_j X_{k,j} R_{k,j} - z_k) / sum_j X_{k,j}``::

      D_{k,c} = R_{k,c} - W_k

Each window thus gives every class's demand. The FCFS estimate is their completion-weighted mean
over windows. The PS estimate is the ratio of the pooled means instead, ``D_c = R_bar_c z_bar /
sum_j X_bar_j R_bar_j`` (``R_bar_c`` the completion-weighted mean response time, ``z_bar`` and
``X_bar`` the means over the same windows): the mean of the windows' ratios ``R_{k,c} / s_k`` is
biased, a light class's requests and the stretch ``s_k`` of their window being correlated (+8%
to +17% for the 2-7-ms classes of a closed PS tier at 40-80% load, against -1% to +4% for the
pooled ratio); it is exact when the class mix does not move with the load, and a few percent off
when it does. A window's FCFS demand of a light class can come out negative (its few requests'
mean response time is noisy, ``W_k`` large): it is kept as it is, since clipping each window at
0 would bias the mean upwards (at 80% load, light classes read 5x too heavy); only the mean is
floored at 0.

**Which discipline**: the right one gives demands that do not move with the load, the wrong one
drags them with it -- FCFS read on PS data gives ``D_c + (s_k - 1)(D_c - D_bar)``, which spreads
the classes further as the load grows, and PS read on FCFS data gives ``(D_c + W_k) / s_k``,
which pulls them together. :func:`class_split` regresses each class's *share* ``D_{b,c} /
D_bar_b`` (``D_bar_b = z_b / sum_j X_{b,j}``; a common growth of every demand with load, which
is no evidence either way, cancels) on ``U_b`` over blocks ``b`` of consecutive windows of at
least a minute (:class:`SplitSums`: single windows share their noise between utilization and
mix), each weighted by its completions over its squared stretch (the variance of a class mean
grows with ``R^2 / n``: inverse-variance weights), and scores each discipline by the relative
change of the shares across the observed load span, weighted by each class's busy time as that
discipline reads it; the discipline wins with the clearly smaller score. One test needs no load
span: in one FCFS queue no class's mean response time is below the shared wait, ``R_c = D_c + W
>= W``; where the FCFS reading puts a class's mean demand clearly below 0 (:data:`NEGATIVE`) --
light classes under PS at any real load, ``D_c + (s - 1)(D_c - D_bar) < 0`` -- FCFS is ruled out
and PS decided. Where the windows do not span loads (:data:`MIN_SPAN`) the two cannot be told
apart by the load test; the split still counts as *identified* when both disciplines give the
same demands (low load: ``s_k`` near 1, ``W_k`` near 0) within :data:`AGREE` (mean relative
difference over the classes beyond two standard errors of the noisier FCFS reading, each class
alike: a light class's demand is what a wrong split gets most wrong), and is reported undecided
otherwise.

The sums are kept as :class:`SplitSums` (a few numbers per class and discipline, decayed),
so that a stream adds its windows as they come and the state stays small. Pure numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["DISCIPLINES", "SplitSums", "ClassSplit", "window_demands", "split_rows",
           "class_split", "class_split_many", "flush_many", "above_response",
           "preferred_reading", "AGREE", "MIN_SPAN", "DECIDE_RATIO", "PREFER_LR",
           "RESPONSE_MARGIN"]

DISCIPLINES = ("ps", "fcfs")
#: the two disciplines' demands count as the same split within this relative difference
#: (the mean over the classes)
AGREE = 0.25
#: utilization span (10th to 90th percentile, approximated by +-1.28 weighted standard
#: deviations) below which the discipline cannot be decided from the load dependence
MIN_SPAN = 0.2
#: a discipline is decided when its score is below this fraction of the other's
DECIDE_RATIO = 0.5
#: :func:`preferred_reading`: twice the log-likelihood ratio beyond which the windows'
#: utilization law prefers one reading of an unidentified split (the 95% point of chi-square
#: with one degree of freedom)
PREFER_LR = 3.84
#: a class whose mean FCFS demand ``R_c - W`` is below minus this fraction of the mean demand,
#: and below minus three of its standard errors (the windows' spread over the root of their
#: number), rules FCFS out: in one FCFS queue ``R_c = D_c + W >= W`` (processor sharing decided)
NEGATIVE = 0.1
#: the load test's blocks of consecutive windows last at least this long (s)
BLOCK_S = 60.0
#: completions with a response time a class needs before its split counts
MIN_COMPLETIONS = 50.0
#: :func:`above_response`: a demand counts as above its class's mean response time beyond this
#: relative margin (the mean of a few hundred requests' times is that noisy)
RESPONSE_MARGIN = 0.1
# per class and discipline: sum n, sum n d, and for the load test sum v, sum v u, sum v u^2,
# sum v y, sum v u y (n completions, d the window's demand, u utilization, y its share
# d / D_bar, v = n / s^2 the share's inverse-variance weight), sum n d^2 (the spread)
_SUMS = 8


def window_demands(z: np.ndarray, X: np.ndarray, R: np.ndarray, discipline: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per window ``k`` and class ``c`` the demand ``D_{k,c}`` that ``discipline`` reads off
    ``z_k = U_k cores``, throughputs ``X`` and response times ``R`` (module docstring), and
    which windows gave one (``ok``: busy, completions, a response time for every class with
    completions). ``z`` ``(K,)``, ``X`` and ``R`` ``(K, C)`` (NaN: none reported)."""
    if discipline not in DISCIPLINES:
        raise ValueError(f"discipline: must be one of {DISCIPLINES}, got {discipline!r}")
    done = X > 0
    has = np.isfinite(R) & (R >= 0)
    total = X.sum(axis=1)
    ok = (z > 0) & (total > 0) & ~(done & ~has).any(axis=1)
    Rz = np.where(done & has, R, 0.0)
    xr = (X * Rz).sum(axis=1)
    ok &= xr > 0
    D = np.zeros_like(X)
    with np.errstate(divide="ignore", invalid="ignore"):
        if discipline == "ps":
            D = np.where(ok[:, None], Rz * (z / np.where(ok, xr, 1.0))[:, None], 0.0)
        else:
            W = (xr - z) / np.where(total > 0, total, 1.0)
            D = np.where(done & ok[:, None], Rz - W[:, None], 0.0)
    return D, ok


def split_rows(U: np.ndarray, cores: np.ndarray, X: np.ndarray, R: np.ndarray,
               counts: np.ndarray, window_s: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What each window adds to :class:`SplitSums`: ``U``, ``cores`` ``(K,)``; ``X``
    throughputs, ``R`` response times (NaN: none) and ``counts`` completions ``(K, C)``;
    ``window_s`` their lengths (default ``counts / X``, else 1 s). Returns the rows of the
    sums ``(K, 7 C + 2)`` (per class ``n, n d_ps, n d_ps^2, n d_fc, n d_fc^2, n R, X``, then
    ``z, 1`` of the windows that gave a split), the rows of the load test's blocks ``(K, 3 +
    2 C)`` (``T, U T, z T``, per class ``n``, ``n R``) and which windows gave a split (``ok``).

    Each row is computed from its own window alone (elementwise and per-row operations), so
    the windows of many tiers with ``C`` classes can be computed in one call and each tier's
    rows added later (:meth:`SplitSums.defer`): the sums are the same whatever the batching."""
    z = np.asarray(U, dtype=float) * np.asarray(cores, dtype=float)
    if window_s is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            T = np.nanmax(np.where(X > 0, counts / np.where(X > 0, X, 1.0), np.nan),
                          axis=1, initial=0.0)
        window_s = np.where(T > 0, T, 1.0)
    # both readings at once (:func:`window_demands`, inlined: this runs for every window)
    done = X > 0
    has = done & np.isfinite(R) & (R >= 0)
    total = X.sum(axis=1)
    rz = np.where(has, R, 0.0)
    xr = (X * rz).sum(axis=1)
    ok = (z > 0) & (total > 0) & (xr > 0) & ~(done & ~has).any(axis=1)
    okc = ok[:, None]
    okd = okc & done
    with np.errstate(divide="ignore", invalid="ignore"):
        d_ps = np.where(okc, rz * (z / np.where(ok, xr, 1.0))[:, None], 0.0)
        wait = (xr - z) / np.where(total > 0, total, 1.0)
    d_fc = np.where(okd, rz - wait[:, None], 0.0)
    w = np.where(okd, counts, 0.0)
    wps, wfc, nr = w * d_ps, w * d_fc, w * rz
    K, C = X.shape
    rows = np.empty((K, 7 * C + 2))
    for i, col in enumerate((w, wps, wps * d_ps, wfc, wfc * d_fc, nr, np.where(okc, X, 0.0))):
        rows[:, i * C:(i + 1) * C] = col
    rows[:, 7 * C], rows[:, 7 * C + 1] = np.where(ok, z, 0.0), ok
    T = np.asarray(window_s, dtype=float)
    blocks = np.empty((K, 3 + 2 * C))
    blocks[:, 0], blocks[:, 1], blocks[:, 2] = T, np.asarray(U, dtype=float) * T, z * T
    blocks[:, 3:3 + C], blocks[:, 3 + C:] = counts, nr
    return rows, blocks, ok


@dataclass
class SplitSums:
    """The decayed sums a stream keeps per tier for :func:`class_split`: ``sums[d]`` ``(C,
    8)`` per discipline ``d`` (module notes), the classes in order (they only grow).

    The load test reads blocks of consecutive windows of at least :data:`BLOCK_S` seconds, not
    single windows: a window's utilization and its class means share their noise (a window
    that happened to complete several heavy requests is busier *and* has a heavier mix), and
    a window-level regression finds a load dependence in a steady run (a FCFS tier at 70%
    whose 5-s windows range over 0.4-1.0 read as PS). ``block`` holds the current block's
    sums ``(T, U T, z T, n_c.., n_c R_c..)``.

    Windows added with :meth:`defer` wait until the sums are read (:meth:`flush`, called by
    :func:`class_split`, :meth:`decay`, :meth:`grow` and :meth:`to_dict`): a stream adds a
    few windows per tier at a time but reads the sums once per solve, and the numpy calls of
    a fold cost the same for one window as for a solve interval's."""

    classes: list[str] = field(default_factory=list)
    sums: dict[str, np.ndarray] = field(default_factory=dict)
    windows: float = 0.0
    #: ``(C + 1, 2)``: per class ``(sum n R, sum X)``, last row ``(sum z, windows)``, over the
    #: windows that gave a split (the pooled processor-sharing ratio)
    pool: np.ndarray = field(default_factory=lambda: np.zeros((1, 2)))
    block: np.ndarray = field(default_factory=lambda: np.zeros(3))
    #: rows added by :meth:`defer`, not yet in the sums: ``(sum rows, block rows)`` pairs
    pending: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list, repr=False,
                                                         compare=False)

    def grow(self, classes: Sequence[str]) -> None:
        """Align with ``classes`` (a superset of :attr:`classes`, new ones appended)."""
        extra = len(classes) - len(self.classes)
        if extra > 0 or not self.sums:
            self.flush()
            if not self.sums:               # a new tier's: nothing to keep
                self.sums = {d: np.zeros((len(classes), _SUMS)) for d in DISCIPLINES}
            for d in DISCIPLINES:
                old = self.sums.get(d, np.zeros((0, _SUMS)))
                if old.shape[0] != len(classes):
                    self.sums[d] = np.vstack([old, np.zeros((len(classes) - old.shape[0],
                                                             _SUMS))])
            grown = np.zeros((len(classes) + 1, 2))
            known = self.pool.shape[0] - 1
            grown[:known], grown[-1] = self.pool[:known], self.pool[-1]
            self.pool = grown
            self.block = np.zeros(3 + 2 * len(classes))     # a block in progress starts anew
            self.classes = list(classes)

    def add(self, U: np.ndarray, cores: np.ndarray, X: np.ndarray, R: np.ndarray,
            counts: np.ndarray, window_s: np.ndarray | None = None) -> None:
        """Add windows: ``U``, ``cores`` ``(K,)``; ``X`` throughputs, ``R`` response times
        (NaN: none) and ``counts`` completions ``(K, C)``, aligned with :attr:`classes`;
        ``window_s`` their lengths (default ``counts / X``, else 1 s)."""
        self.defer(*split_rows(U, cores, X, R, counts, window_s))
        self.flush()

    def defer(self, rows: np.ndarray, blocks: np.ndarray, ok: np.ndarray) -> None:
        """Add windows given as :func:`split_rows` computed them (aligned with
        :attr:`classes`), folded into the sums at the next :meth:`flush`."""
        if self.pending and self.pending[0][0].shape[1] != rows.shape[1]:
            self.flush()
        self.pending.append((rows, blocks[ok]))

    def flush(self) -> None:
        """Fold the windows added by :meth:`defer` into the sums, oldest first."""
        if self.pending:
            flush_many([self])

    def _fold(self, rows: np.ndarray) -> None:
        """The sums' rows (:func:`split_rows`) summed window by window from the sums so far
        (sequential: the same sums whatever the batching)."""
        C = (rows.shape[1] - 2) // 7
        ps, fc, pool = self.sums["ps"], self.sums["fcfs"], self.pool
        start = np.concatenate([ps[:C, 0], ps[:C, 1], ps[:C, 7], fc[:C, 1], fc[:C, 7],
                                pool[:C, 0], pool[:C, 1], pool[-1]])
        # the rows summed in order from the sums so far: a cumsum's last row, bit for bit
        total_rows = np.add.reduce(np.concatenate([start[None], rows]), axis=0)
        parts = [total_rows[i * C:(i + 1) * C] for i in range(7)]
        ps[:C, 0] = fc[:C, 0] = parts[0]
        ps[:C, 1], ps[:C, 7], fc[:C, 1], fc[:C, 7] = parts[1], parts[2], parts[3], parts[4]
        pool[:C, 0], pool[:C, 1] = parts[5], parts[6]
        pool[-1] = total_rows[7 * C:]
        self.windows = float(pool[-1, 1])

    def _blocks(self, rows: np.ndarray) -> list[np.ndarray]:
        """Windows (the block rows of those that gave a split, :func:`split_rows`) into blocks
        of at least :data:`BLOCK_S` s; returns the completed blocks, in order, for the load
        test's sums (:func:`_add_blocks`). A block's rows are summed in order from the block in
        progress (sequential: the same sums whatever the batching), one block at a time."""
        n = len(self.classes)
        width = 3 + 2 * n
        if self.block.size != width:
            self.block = np.zeros(width)
        if not rows.shape[0]:
            return []
        C = (rows.shape[1] - 3) // 2
        if C != n:                          # fewer classes than known: the others add 0
            wide = np.zeros((rows.shape[0], width))
            wide[:, :3 + C], wide[:, 3 + n:3 + n + C] = rows[:, :3 + C], rows[:, 3 + C:]
            rows = wide
        # where each block ends, from the running length (the cumsum's first column, added the
        # same way one window at a time)
        done = []
        i, acc = 0, float(self.block[0])
        for j, t in enumerate(rows[:, 0].tolist()):
            acc += t
            if acc >= BLOCK_S:
                done.append(np.add.reduce(np.concatenate([self.block[None], rows[i:j + 1]]),
                                          axis=0))
                self.block = np.zeros(width)
                i, acc = j + 1, 0.0
        if i < rows.shape[0]:
            self.block = np.add.reduce(np.concatenate([self.block[None], rows[i:]]), axis=0)
        return done

    def decay(self, factor: float) -> None:
        self.flush()
        for d in DISCIPLINES:
            if d in self.sums:
                self.sums[d] *= factor
        self.pool *= factor
        self.windows = float(self.pool[-1, 1])  # (a block in progress is not decayed)

    def to_dict(self) -> dict[str, Any]:
        self.flush()
        return {"classes": list(self.classes), "windows": self.windows,
                "sums": {d: s.tolist() for d, s in self.sums.items()},
                "pool": self.pool.tolist(), "block": self.block.tolist()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "SplitSums":
        out = cls()
        if not data:
            return out
        out.classes = [str(c) for c in data["classes"]]
        out.windows = float(data["windows"])
        out.sums = {d: np.array(s, dtype=float).reshape(len(out.classes), _SUMS)
                    for d, s in data["sums"].items()}
        out.pool = np.array(data["pool"], dtype=float).reshape(len(out.classes) + 1, 2)
        out.block = np.array(data.get("block") or np.zeros(3 + 2 * len(out.classes)),
                             dtype=float)
        return out


def flush_many(many: Sequence[SplitSums]) -> None:
    """:meth:`SplitSums.flush` of each of ``many``: each tier's fold and blocks as alone, the
    completed blocks of every tier with the same number of classes into the load test's sums
    together (:func:`_add_blocks`; a block's shares are a few dozen numpy calls on a row per
    class, whose cost is the call), each tier's sums the same bit for bit as flushed alone."""
    completed: dict[int, tuple[list[SplitSums], list[np.ndarray]]] = {}
    for x in many:
        if not x.pending:
            continue
        pending, x.pending = x.pending, []
        if len(pending) == 1:
            rows, blocks = pending[0]
        else:
            rows = np.concatenate([p[0] for p in pending])
            blocks = np.concatenate([p[1] for p in pending])
        x._fold(rows)
        done = x._blocks(blocks)
        if done:
            owners, found = completed.setdefault(len(x.classes), ([], []))
            owners += [x] * len(done)
            found += done
    for owners, found in completed.values():
        _add_blocks(owners, np.array(found))


def _add_blocks(owners: list[SplitSums], blocks: np.ndarray) -> None:
    """Completed blocks ``(B, 3 + 2 C)`` (each ``T, U T, z T``, per class ``n``, ``n R``) into
    their ``owners``' load-test sums, in order: each block's shares under both readings (the
    block's means: ``X = n / T``, ``R = sum n R / n``, ``z``; :func:`window_demands` inlined).
    A block's terms are elementwise or reduce its own row, and its additions to its owner's
    sums come one block after the other: the sums are those of one block at a time."""
    C = (blocks.shape[1] - 3) // 2
    add = np.add.reduce                     # ndarray.sum without its Python wrapper
    n_all, nr_all = blocks[:, 3:3 + C], blocks[:, 3 + C:]
    finite = np.logical_and.reduce(np.isfinite(nr_all), axis=1).tolist()
    keep, scalars = [], []
    for k, (T, uT, zT, n_sum, nr_sum) in enumerate(zip(
            *blocks[:, :3].T.tolist(), add(n_all, 1).tolist(), add(nr_all, 1).tolist())):
        u, z = uT / T, zT / T
        total, xr = n_sum / T, nr_sum / T   # sum X, sum X R
        if not (total > 0 and z > 0 and xr > 0):
            continue
        # a block's class mean is noisier the longer the queue (its variance grows with R^2 /
        # n): its share counts n / s^2, s = sum X R / z >= 1
        stretch = max(xr / z, 1.0)
        if not (stretch < 1e150 and finite[k]):
            # a weight n / stretch^2 below 1e-300 adds nothing, and an infinite term would add
            # NaN
            continue
        keep.append(k)
        # (the square as numpy's scalar takes it, for the same bits)
        scalars.append((float(np.float64(stretch) ** 2), u, z / xr, z / total, (xr - z) / total))
    if not keep:
        return
    s2, u, zx, d_bar, wait = (np.array(c)[:, None] for c in zip(*scalars))
    n, nr = n_all[keep], nr_all[keep]
    seen = n > 0
    R = np.where(seen, nr / np.where(seen, n, 1.0), 0.0)
    v = np.where(seen, n, 0.0) / s2
    vu = v * u
    # per block and class, for each reading: v, v u, v u^2, v y, v u y (y the share)
    terms = [np.stack((v, vu, vu * u, v * y, vu * y), axis=2) for y in
             (R * zx / d_bar, np.where(seen, R - wait, 0.0) / d_bar)]      # (B, C, 5) each
    for k, i in enumerate(keep):
        x = owners[i]
        x.sums["ps"][:, 2:7] += terms[0][k]
        x.sums["fcfs"][:, 2:7] += terms[1][k]


@dataclass(frozen=True)
class ClassSplit:
    """What :func:`class_split` found: ``demands`` per class under ``discipline`` (the decided
    one, else ``"ps"``), ``by_discipline`` both splits, ``scores`` each discipline's
    load-dependence score (``None``: the windows do not span loads), ``decided`` whether the
    discipline is told apart, ``identified`` whether the split is (decided, or both agree:
    ``agreement`` their mean relative difference beyond the FCFS reading's noise), ``reason``
    why not, ``span`` the utilization span the load test's blocks cover."""

    classes: tuple[str, ...]
    demands: dict[str, float]
    discipline: str
    by_discipline: dict[str, dict[str, float]]
    scores: dict[str, float | None]
    decided: bool
    identified: bool
    agreement: float
    span: float
    reason: str | None


def class_split(sums: SplitSums, min_completions: float = MIN_COMPLETIONS
                ) -> ClassSplit | None:
    """The per-class demands and the discipline from a tier's :class:`SplitSums` (module
    docstring); ``None`` while some class with completions has fewer than ``min_completions``
    with a response time (its mean would be noise) or no window gave a split."""
    return class_split_many([sums], min_completions)[0]


def class_split_many(many: Sequence[SplitSums], min_completions: float = MIN_COMPLETIONS
                     ) -> list[ClassSplit | None]:
    """:func:`class_split` of each of ``many`` (the tiers of a round of solves). The tiers
    with the same number of classes are computed together, one array step for all of them:
    a tier's class split is a few dozen steps on arrays of one row per class, whose cost is
    the call, not the row. Every step is elementwise or reduces one tier's row alone (the
    same pairwise sum as that row alone), so each split is bit for bit the one tier's."""
    out: list[ClassSplit | None] = [None] * len(many)
    groups: dict[int, list[int]] = {}
    flush_many(many)
    for i, sums in enumerate(many):
        if not sums.sums or not sums.classes:
            continue
        wl = sums.sums["ps"][:, 0].tolist()
        if not any(v > 0 for v in wl) or any(0 < v < min_completions for v in wl):
            continue
        groups.setdefault(len(wl), []).append(i)
    for idx in groups.values():
        for i, split in zip(idx, _splits([many[i] for i in idx])):
            out[i] = split
    return out


def _splits(group: list[SplitSums]) -> list[ClassSplit]:
    """:func:`class_split_many` on tiers of as many classes each, each with a split: arrays
    with a leading axis of tiers ``t``, disciplines (ps, fcfs) ``d`` next where both are."""
    add = np.add.reduce                     # ndarray.sum without its Python wrapper
    s = np.array([(x.sums["ps"], x.sums["fcfs"]) for x in group])  # (t, d, C, 8)
    w = s[:, 0, :, 0]                                               # (t, C)
    live = w > 0
    live2 = live[:, None]
    # the sums over the classes of w and of the load test's v, v u, v u^2: one row each
    sums_c = add(np.ascontiguousarray(s[:, 0, :, :5].transpose(0, 2, 1)), axis=2).tolist()
    spans, Ws = [], []
    for W, _, V, vu, vu2 in sums_c:
        mean_u = vu / V if V > 0 else 0.0
        var_u = max(vu2 / V - mean_u * mean_u, 0.0) if V > 0 else 0.0
        spans.append(2.0 * 1.2816 * math.sqrt(var_u))
        Ws.append(W)
    sw = np.where(live2, s[:, :, :, 0], 1.0)
    raw2 = np.where(live2, s[:, :, :, 1] / sw, 0.0)                 # (t, d, C)
    # the ratio of the pooled means (module docstring)
    pool = np.array([x.pool for x in group])                        # (t, C + 1, 2)
    r_bar = np.where(live, pool[:, :-1, 0] / sw[:, 0], 0.0)
    factor = np.zeros(len(group))
    pooled = np.zeros(len(group), dtype=bool)
    for j, x in enumerate(group):
        xr = float(x.pool[:-1, 1] @ r_bar[j])
        if xr > 0:
            factor[j], pooled[j] = float(x.pool[-1, 0]) / xr, True
    raw2[:, 0] = np.where(pooled[:, None], r_bar * factor[:, None], raw2[:, 0])
    out2 = np.maximum(raw2, 0.0)
    span = np.array(spans)
    scored = span >= MIN_SPAN
    num = den = None
    if scored.any():
        sv = np.where(live2 & (s[..., 2] > 0), s[..., 2], 1.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            mu, y = s[..., 3] / sv, s[..., 5] / sv
            var = s[..., 4] / sv - mu * mu
            cov = s[..., 6] / sv - mu * y
            slope = np.where(var > 1e-12, cov / var, 0.0)
            rel = np.where(live2 & (y > 0), np.abs(slope) * span[:, None, None]
                           / np.where(y > 0, y, 1.0), 0.0)
        # busy time per class as each discipline reads it: a reading that makes a light
        # class heavy is judged on that class too
        weight = np.where(live2, out2 * w[:, None], 0.0)
        num, den = add(rel * weight, 2).tolist(), add(weight, 2).tolist()
    fc = s[:, 1]
    spread = np.where(live, fc[..., 7] / np.where(live, fc[..., 0], 1.0) - raw2[:, 1] ** 2,
                      0.0)
    windows = np.array([max(x.windows, 1.0) for x in group])
    se = np.sqrt(np.maximum(spread, 0.0) / windows[:, None])
    # the readings' difference beyond two standard errors of the (noisier) FCFS reading
    gap = np.maximum(np.abs(out2[:, 0] - out2[:, 1]) - 2.0 * se, 0.0)
    diff = gap / np.maximum(np.maximum(out2[:, 0], out2[:, 1]), 1e-300)
    every = live.all(axis=1).tolist()
    diff_sums = add(diff, 1).tolist()       # a tier's mean where every class is live
    d_bar = np.array([float(v) / W for v, W in zip(add(out2[:, 0] * w, 1).tolist(), Ws)])
    # R_c < W for some class: not one shared FCFS wait
    negative = np.logical_or.reduce(
        live & (raw2[:, 1] < -np.maximum(NEGATIVE * d_bar[:, None], 3.0 * se)), axis=1).tolist()
    result = []
    for j, x in enumerate(group):
        if every[j]:
            agreement = diff_sums[j] / diff.shape[1]
        else:
            agreed = diff[j][live[j]]       # (at least one class is live)
            agreement = float(add(agreed)) / agreed.size
        score: dict[str, float | None] = {"ps": None, "fcfs": None}
        if scored[j]:
            score = {d: num[j][i] / den[j][i] if den[j][i] > 0 else None  # type: ignore
                     for i, d in enumerate(DISCIPLINES)}
        decided, discipline, reason = False, "ps", None
        a, b = score["ps"], score["fcfs"]
        if negative[j]:
            decided = True
        elif a is not None and b is not None:
            if a < DECIDE_RATIO * b:
                decided, discipline = True, "ps"
            elif b < DECIDE_RATIO * a:
                decided, discipline = True, "fcfs"
        identified = decided or agreement <= AGREE
        if not identified:
            reason = ("discipline undecided: the windows do not span loads (utilization "
                      f"span {spans[j]:.2f}) and the PS and FCFS splits differ by "
                      f"{100 * agreement:.0f}%" if a is None else
                      f"discipline undecided: load-dependence scores PS {a:.3g}, FCFS {b:.3g} "
                      f"and the splits differ by {100 * agreement:.0f}%")
        names = tuple(x.classes)
        readings = {d: dict(zip(names, v)) for d, v in zip(DISCIPLINES, out2[j].tolist())}
        result.append(ClassSplit(
            classes=names, demands=dict(readings[discipline]), discipline=discipline,
            by_discipline=readings, scores=score, decided=decided, identified=identified,
            agreement=agreement, span=spans[j], reason=reason))
    return result


def preferred_reading(split: ClassSplit, z: np.ndarray, X: np.ndarray
                      ) -> tuple[str | None, float | None]:
    """Which of an undecided split's two readings the windows' utilization law prefers, and
    the evidence: ``z`` ``(K,)`` the windows' busy cores ``U_k cores``, ``X`` ``(K, C)`` their
    per-class throughputs in the order of :attr:`ClassSplit.classes`.

    Where the windows do not span loads, the load test cannot tell processor sharing from
    FCFS, and where the two readings differ the split is unidentified; the utilization law
    ``z_k = sum_c X_{k,c} D_c`` is then the other evidence on the split (Rolia and Vetland
    1995). Under a steady mix its own least-squares split is noise (Huang et al. 2012, section
    3.3), but it can still tell which of two given splits fits the windows better: each reading
    ``r`` is scaled by the factor that fits the windows best (the aggregate is the utilization
    law's, not the split's), and the difference of their residual sums of squares in units of
    the windows' residual variance (the unconstrained least squares', ``K - C`` degrees of
    freedom) is twice the log-likelihood ratio of the two under Gaussian errors (Wilks 1938).
    The reading it favours beyond :data:`PREFER_LR` is returned, ``None`` when neither is
    (or fewer windows than classes). The statistic: positive favours processor sharing.

    On 14 simulated FCFS tiers whose split was undecided and unidentified it never favoured
    processor sharing; on 40 FCFS tiers of a very steady mix (+-5-10%) and noisy utilization
    (sd 0.03) it did once."""
    z = np.asarray(z, dtype=float)
    X = np.asarray(X, dtype=float)
    C = X.shape[1]
    keep = np.isfinite(z) & np.isfinite(X).all(axis=1)
    z, X = z[keep], X[keep]
    if z.size <= C or len(split.classes) != C:
        return None, None
    coef = np.linalg.lstsq(X, z, rcond=None)[0]
    resid = z - X @ coef
    var = float(resid @ resid) / (z.size - C)
    rss = {}
    for d in DISCIPLINES:
        fit = X @ np.array([float(split.by_discipline[d].get(c, 0.0)) for c in split.classes])
        ff = float(fit @ fit)
        r = z - fit * (float(z @ fit) / ff if ff > 0 else 0.0)
        rss[d] = float(r @ r)
    diff = rss["fcfs"] - rss["ps"]
    if diff == 0.0:
        return None, 0.0
    stat = diff / var if var > 0 else math.copysign(math.inf, diff)
    if stat > PREFER_LR:
        return "ps", stat
    if stat < -PREFER_LR:
        return "fcfs", stat
    return None, stat


def above_response(demands: Mapping[str, float], response: Mapping[str, float],
                   margin: float = RESPONSE_MARGIN) -> list[str]:
    """The classes whose demand exceeds their mean response time at the tier by more than
    ``margin`` (relative): a split no discipline allows.

    A request's residence time at a queueing centre is its service plus its waiting, so a
    class's mean response time per visit is at least its demand, ``R_c >= D_c``, whatever the
    scheduling and the number of cores (Lazowska et al. 1984: a centre's residence time is its
    demand plus its queueing time). An estimator's split that puts more on a class than the class spends at
    the tier has moved another class's work onto it -- what the utilization law does under a
    steady mix (Huang et al. 2012, section 3.3), and what a response-time split cannot do.
    Classes without a response time (or a non-finite one) are not judged."""
    m = float(margin)
    if not (math.isfinite(m) and m >= 0.0):
        raise ValueError(f"margin: must be a finite number >= 0, got {margin!r}")
    out = []
    for c, d in demands.items():
        r = response.get(c)
        if r is None or not math.isfinite(float(r)) or not math.isfinite(float(d)):
            continue
        if float(d) > (1.0 + m) * float(r):
            out.append(c)
    return out
