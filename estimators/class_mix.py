"""Completions counted in units of work, so that a drifting class mix is not read as burstiness.

The estimator of Mi et al. (2008) (:mod:`estimators.dispersion`) reads ``I`` from how the completions
``n_k`` of a window follow its busy time ``B_k``. With one class that is the service process.
With several, a request of a heavy class takes longer than one of a light class, so when the
mix drifts -- the morning's searches, the evening's checkouts -- the busy time per completion
drifts with it, and the counts against busy time look like long runs of slow and fast service:
on ``bench/speed/pipeline.py``'s default workload (14 classes, per-class demands log-normal,
each class's share drifting +-30% over 10-60 minutes, every service time the class's demand)
the tiers read ``I`` = 72-850 over 4,096 windows, every one of them "bursty", while the model
already follows the mix through its per-class demands ``D_c`` at the current mix.

Here each window's completions are weighted by their classes' demands:
``n'_k = sum_c w_c n_kc * (sum_k n_k / sum_k sum_c w_c n_kc)``, the weights ``w_c >= 0`` the
non-negative least-squares fit of ``B_k = sum_c w_c n_kc`` over the same windows (the
utilization law, Rolia and Vetland (1995), eq. 1, over the estimator's whole history; the
pipeline's own regression, :func:`estimators.demand.regression_demands`), rescaled so that
``sum_k n'_k = sum_k n_k`` (the mean service time, and so ``I``'s units, are unchanged). Read
on ``n'``, the same tiers give ``I`` = 0.6-6.8. Burstiness of the service itself -- a run of
slow requests of every class (the cause Mi et al. (2008) study), or a tier's slow phase -- stays:
it is not a function of the counts.

What goes besides the drift is the classes' spread at a fixed mix: the counts read the
aggregate's hyperexponential (``I`` = its SCV, ``2 sum p_c d_c^2 / (sum p_c d_c)^2 - 1``, 1.7 on
``tests/test_class_mix.py``'s eight classes), the work each class's own variability (1.3 there,
exponential classes) -- an O(1) difference, far below ``idc_threshold``'s 10, and the per-class
demands carry the classes' differences into the model. Under a steady mix the weights are
barely identified (Rolia and Vetland 1995, section 5), but then ``n'_k`` is about proportional to
``n_k`` whatever they are. With fewer than two classes that complete anything, when the fit gives
every class weight zero, when it does not converge (``scipy.optimize.nnls`` out of
iterations), or when the rescaled counts overflow (counts near the records' limits), ``n'`` is
``n``.
"""

from __future__ import annotations

import math

import numpy as np

from estimators.demand import regression_demands

__all__ = ["work_weighted_completions"]


def work_weighted_completions(utilization: np.ndarray, completions: np.ndarray,
                              window_s: float) -> np.ndarray:
    """``n'_k`` (module notes): the per-class ``completions`` (shape ``(K, C)``) of each window
    weighted by the classes' demands fitted to ``utilization`` (``U_k``, shape ``(K,)``, on
    windows of ``window_s``; the weights are :func:`estimators.demand.regression_demands`'s,
    whose scale does not matter), summed over classes and rescaled to the same total as
    ``n_k``. Shape ``(K,)``; never NaN."""
    n = np.asarray(completions, dtype=float)
    U = np.asarray(utilization, dtype=float)
    if n.ndim != 2 or U.shape != (n.shape[0],):
        raise ValueError(f"completions: must have shape (windows, classes) matching utilization "
                         f"{U.shape}, got {n.shape}")
    total = n.sum(axis=1)
    active = n.sum(axis=0) > 0
    if int(active.sum()) < 2:
        return total
    try:
        weights = regression_demands(U, n[:, active] / window_s).demands
    except RuntimeError:          # Lawson-Hanson out of iterations: the counts, as above
        return total
    with np.errstate(over="ignore", invalid="ignore"):     # 0 x inf: NaN, caught below
        weighted = n[:, active] @ weights
        work = float(weighted.sum())
        if not (work > 0.0 and math.isfinite(work)):      # all weights 0, or out of range
            return total
        scaled = weighted * (float(total.sum()) / work)
    return scaled if np.isfinite(scaled).all() else total
