"""The floor of the 20-ms budget at N = 5,000 from the other side: the one chain every solve of ``4
tiers, 2 bursty`` at N = 5,000 factorises -- the 16-core database's per-job chain against the
flow-equivalent server, ``(n, k, s)`` on 4,000-odd levels of 34 states -- solved by three exact
linear solvers on the same generator:

* LAPACK's banded LU (``dgbtrf`` + ``dgbtrs``), as :mod:`solvers.decomposition` solves it;
* SuperLU (``scipy.sparse.linalg.splu``) with its COLAMD ordering and in natural order;
* a block-tridiagonal *linear level reduction* (the chain's levels eliminated from the top:
  ``U_L = Q_LL``, ``U_n = Q_nn + Q_n,n+1 (-U_n+1)^-1 Q_n+1,n``, then ``pi_0 U_0 = 0`` and
  ``pi_n+1 = pi_n Q_n,n+1 (-U_n+1)^-1``; Latouche and Ramaswami, *Introduction to Matrix Analytic
  Methods*, section 10.2), one ``d x d`` LU, solve and product per level with LAPACK's
  ``dgetrf`` / ``dgetrs`` -- about the banded LU's flops, and a Python step per level.

Then the banded LU on the levels that hold all but 1e-8 and 1e-3 of the probability (the solver
keeps all but 1e-14): what the levels, not the solver, cost. Used by ``python
bench/speed/decomposition.py --floor``. The chain is captured from the solver
itself (its one factorisation of the database's chain when that tier is the only bursty one), so
the three solve exactly the matrix the pipeline solves; each answer's L1 distance from the
solver's is printed beside its time.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg.lapack import dgbtrf, dgbtrs, dgetrf, dgetrs

import solvers.decomposition.chain as chain


@dataclass(frozen=True)
class CapturedChain:
    """One chain as the solver factorised it: ``Q[src, dst] = rate`` off the diagonal, ``out``
    each state's total rate out, ``level`` each state's level, ``x`` the solver's answer."""

    src: np.ndarray
    dst: np.ndarray
    rate: np.ndarray
    out: np.ndarray
    level: np.ndarray
    x: np.ndarray

    @property
    def states(self) -> int:
        return int(self.level.shape[0])

    @property
    def levels(self) -> int:
        return int(self.level.max()) + 1


@contextlib.contextmanager
def capture_factorisations() -> Iterator[list[CapturedChain]]:
    """Within the block, every fresh factorisation of a bursty tier's chain by
    :mod:`solvers.decomposition` (its ``factor_and_solve``) is recorded."""
    seen: list[CapturedChain] = []
    original = chain.factor_and_solve

    def spy(lam: Any, proc: Any, cores: int, tr: Any, rate: np.ndarray,
            out: np.ndarray) -> Any:
        x, factor = original(lam, proc, cores, tr, rate, out)
        seen.append(CapturedChain(tr.src, tr.dst, rate, out, tr.level, x / x.sum()))
        return x, factor

    chain.factor_and_solve = spy
    try:
        yield seen
    finally:
        chain.factor_and_solve = original


def truncated(chain: CapturedChain, mass: float) -> CapturedChain:
    """The chain on the fewest levels ``0..L`` above which its answer holds at most ``mass``
    (transitions leaving them dropped, as the solver's truncation drops the arrivals from its
    top level); ``x`` the solver's answer on those levels, renormalised."""
    per_level = np.bincount(chain.level, weights=chain.x)
    tail = np.cumsum(per_level[::-1])[::-1]                  # P(n >= L)
    top = int(np.searchsorted(-tail, -mass, side="left"))    # first L with P(n >= L) <= mass
    keep = chain.level < max(top, 1)
    inside = keep[chain.src] & keep[chain.dst]
    src, dst, rate = chain.src[inside], chain.dst[inside], chain.rate[inside]
    out = np.bincount(src, weights=rate, minlength=int(keep.sum()))
    x = chain.x[keep]
    return CapturedChain(src, dst, rate, out, chain.level[keep], x / x.sum())


def banded_lu(chain: CapturedChain) -> np.ndarray:
    """``pi Q = 0`` by LAPACK's banded LU of ``Q^T``, one state (the likeliest) fixed."""
    S, anchor = chain.states, int(np.argmax(chain.x))
    lo, up = int(np.max(chain.dst - chain.src)), int(np.max(chain.src - chain.dst))
    flat = (lo + up + chain.dst - chain.src) * S + chain.src
    a = np.bincount(flat, weights=chain.rate, minlength=(2 * lo + up + 1) * S).reshape(-1, S)
    a[lo + up] -= chain.out
    cols = np.arange(max(anchor - lo, 0), min(anchor + up, S - 1) + 1)
    a[lo + up + anchor - cols, cols] = 0.0
    a[lo + up, anchor] = 1.0
    rhs = np.zeros(S)
    rhs[anchor] = 1.0
    lub, piv, _ = dgbtrf(a, lo, up, overwrite_ab=1)
    x = dgbtrs(lub, lo, up, rhs, piv)[0]
    return x / x.sum()


def superlu(chain: CapturedChain, ordering: str) -> np.ndarray:
    """``pi Q = 0`` by SuperLU of ``Q^T`` (the same anchored row) with ``ordering``."""
    S, anchor = chain.states, int(np.argmax(chain.x))
    keep = chain.dst != anchor
    rows = np.concatenate([chain.dst[keep], np.arange(S)])
    cols = np.concatenate([chain.src[keep], np.arange(S)])
    diag = -chain.out.copy()
    diag[anchor] = 1.0
    vals = np.concatenate([chain.rate[keep], diag])
    a = sp.csc_matrix((vals, (rows, cols)), shape=(S, S))
    rhs = np.zeros(S)
    rhs[anchor] = 1.0
    x = spla.splu(a, permc_spec=ordering).solve(rhs)
    return x / x.sum()


def _blocks(chain: CapturedChain) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per level ``n``: ``Q_nn`` (diagonal included), ``Q_n,n+1``, ``Q_n,n-1`` as dense arrays."""
    starts = np.searchsorted(chain.level, np.arange(chain.levels + 1))
    q = (sp.csr_matrix((chain.rate, (chain.src, chain.dst)), shape=(chain.states,) * 2)
         - sp.diags(chain.out)).tocsr()
    blocks = []
    for n in range(chain.levels):
        a, b = starts[n], starts[n + 1]
        c = starts[n + 2] if n + 1 < chain.levels else b
        blocks.append((q[a:b, a:b].toarray(), q[a:b, b:c].toarray(),
                       q[a:b, starts[n - 1]:a].toarray() if n else np.zeros((b - a, 0))))
    return blocks


def level_reduction(blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """``pi Q = 0`` by linear level reduction over the chain's levels (module notes)."""
    top = len(blocks)
    factors: list[tuple[np.ndarray, np.ndarray]] = [None] * top       # type: ignore[list-item]
    u = blocks[-1][0]
    for n in range(top - 2, -1, -1):
        lu, piv, _ = dgetrf(-u)
        factors[n + 1] = (lu, piv)
        w = dgetrs(lu, piv, blocks[n + 1][2])[0]           # (-U_n+1)^-1 Q_n+1,n
        u = blocks[n][0] + blocks[n][1] @ w
    vals, vecs = np.linalg.eig(u.T)
    pis = [np.real(vecs[:, int(np.argmin(np.abs(vals)))])]
    for n in range(top - 1):
        lu, piv = factors[n + 1]
        pis.append(dgetrs(lu, piv, pis[-1] @ blocks[n][1], trans=1)[0])
    x = np.concatenate(pis)
    return x / x.sum()


def _timed(fn: Callable[[], np.ndarray], runs: int) -> tuple[float, np.ndarray]:
    out, times = fn(), []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


#: looser truncations than the solver's TRUNCATION_MASS (1e-14) for the banded LU's rows
TRUNCATIONS = (1e-8, 1e-3)


def solver_rows(chain: CapturedChain, runs: int, budget: float) -> list[str]:
    """Markdown rows: each solver's median time on ``chain`` (levels, time, its ratio to the
    budget and to the banded LU, its answer's L1 distance from the solver's), then the banded
    LU on the fewer levels of looser truncations (:data:`TRUNCATIONS`)."""
    blocks = _blocks(chain)
    rows, base = [], None
    for name, fn in (("LAPACK banded LU (the solver's)", lambda: banded_lu(chain)),
                     ("SuperLU, COLAMD ordering", lambda: superlu(chain, "COLAMD")),
                     ("SuperLU, natural order", lambda: superlu(chain, "NATURAL")),
                     ("linear level reduction (blocks built beforehand)",
                      lambda: level_reduction(blocks))):
        t, x = _timed(fn, runs)
        base = base or t
        rows.append(f"| {name} | {chain.levels:,} | {1000 * t:.1f} ms | {t / budget:.1f}x | "
                    f"{t / base:.2f}x | {float(np.abs(x - chain.x).sum()):.1e} |")
    for mass in TRUNCATIONS:
        cut = truncated(chain, mass)
        t, x = _timed(lambda: banded_lu(cut), runs)
        rows.append(f"| LAPACK banded LU, the levels holding all but {mass:g} of the mass "
                    f"| {cut.levels:,} | {1000 * t:.1f} ms | {t / budget:.1f}x | "
                    f"{t / base:.2f}x | {float(np.abs(x - cut.x).sum()):.1e} |")
    return rows
