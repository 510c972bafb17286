"""Open queueing models: product-form networks (Erlang C), one tier as an open queue with
MAP service or MAP arrivals (matrix-geometric), and tiers in series.

Modules: ``product_form`` (:func:`solve_open`, :func:`erlang_c`, :func:`saturation_rate`),
``qbd`` (the matrix-geometric solution), ``queues`` (one tier), ``tiers`` (tiers in series).
"""

from solvers.open.product_form import erlang_c, saturation_rate, solve_open
from solvers.open.queues import TierQueue, m_map_c, map_m_c, mm_c
from solvers.open.tiers import OpenTiersResult, solve_open_tiers, tiers_capacity

__all__ = ["erlang_c", "saturation_rate", "solve_open", "TierQueue", "m_map_c", "map_m_c",
           "mm_c", "OpenTiersResult", "solve_open_tiers", "tiers_capacity"]
