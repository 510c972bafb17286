"""The stationary vector of a large sparse generator by one sparse LU, anchored at a state.

``pi Q = 0`` with ``pi[anchor] = 1``: the anchor's balance equation is dropped (it follows from
the others, since the rows of ``Q`` sum to zero) and the remaining ``S - 1`` equations are
solved by a sparse LU, in the chain's own order where it is stored level by level (banded,
little fill) or in a fill-reducing order. Anchoring at a state of the likeliest level keeps the unnormalised solution
free of over- and underflow across levels; the caller normalises (and checks, where a poor
anchor can overflow).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import splu


def anchored_stationary(Q: sparse.sparray | sparse.spmatrix, anchor: int,
                        order: str = "NATURAL") -> np.ndarray:
    """The unnormalised ``pi`` with ``pi Q = 0`` and ``pi[anchor] = 1``; ``order`` is SuperLU's
    column ordering (``"NATURAL"`` for a chain stored level by level, ``"COLAMD"`` where the
    states of a level are spread over several blocks)."""
    S = Q.shape[0]
    keep = np.delete(np.arange(S), anchor)
    QT = sparse.csc_array(Q.T)
    A = QT[keep][:, keep]
    b = -QT[keep][:, [anchor]].toarray().ravel()
    with np.errstate(all="ignore"):
        rest = splu(sparse.csc_array(A), permc_spec=order).solve(b)
    return np.insert(rest, anchor, 1.0)
