"""Index of dispersion ``I`` of a server's service process from coarse monitoring windows.

Only each window's utilization ``U_k`` and completions ``n_k`` are known; laying the windows'
busy times end to end masks out queueing, so the counts of completions in ``t`` seconds of busy
time are a property of the service process alone (Mi et al. 2008, §2.2). The parts:

* :mod:`.busy_axis` -- the busy-time axis and ``Y(t) = Var(N_t)/E[N_t]`` on it;
* :mod:`.point` -- the point estimate, the algorithm of Mi et al. (2008), Fig. 2
  (:func:`index_of_dispersion`);
* :mod:`.interval` -- the IDC-curve fit and its confidence interval, for bursts that outlast
  the window (:func:`index_of_dispersion_interval`);
* :mod:`.tracker` -- either over a stream's sliding history (:class:`DispersionTracker`);
* :mod:`.inputs` -- the checks of the inputs.

Everything here is pure numpy; the names below are re-exported so that
``estimators.dispersion.X`` keeps working.
"""

from estimators.dispersion.inputs import MAX_COMPLETIONS
from estimators.dispersion.interval import DEFAULT_BLOCKS, DEFAULT_CONFIDENCE, DEFAULT_LEVELS, \
    DEFAULT_MIN_RUNS, DispersionInterval, IntervalReason, index_of_dispersion_interval
from estimators.dispersion.point import DEFAULT_MAX_STEPS, NEUTRAL_VALUE, DispersionEstimate, \
    Reason, index_of_dispersion
from estimators.dispersion.tracker import DispersionTracker

__all__ = ["DispersionEstimate", "DispersionInterval", "DispersionTracker", "index_of_dispersion",
           "index_of_dispersion_interval"]
