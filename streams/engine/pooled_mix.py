"""The class mix a solve models: each class's share of the requests.

The shares are estimated from completions. One solve interval of a lightly loaded system holds
a few tens of requests, and a share ``p`` read from ``n`` of them has the binomial standard
error ``sqrt(p (1 - p) / n)`` (at most ``0.5 / sqrt(n)``): over 30 requests a rare heavy class
of 10% reads anywhere from 0% to 25% between solves, and the capacity, which the heavy class's
SLA decides, swings with it although no demand moved. So the mix pools the latest intervals,
newest first, until they hold at least ``mix_min_completions`` completions (400 by default:
``0.5 / sqrt(400)`` = 2.5 points of share at the worst, ``p = 0.5``; about 1.5 points for a
10% class), reaching back no further than ``trend_window_s``, the span over which the users
trend is read: a real change of mix is fully in the model within that span (at once where an
interval alone holds enough). Where the newest interval alone holds ``mix_min_completions``,
the mix is that interval's, as computed before any pooling: a busy system's figures do not move.

The pooled shares are the ratio of summed completions (each interval weighted by its requests,
not equally): the maximum-likelihood estimate of a mix that is constant over the pooled span.
"""

from __future__ import annotations

from typing import Mapping

#: one interval's completions per class at the entry tier (per visit): ``[end, {class: n}]``
Row = list


def add_interval(rows: list[Row], end: float, throughput: Mapping[str, float], seconds: float,
                 span_s: float, min_completions: int) -> None:
    """Append the interval ending at ``end`` (its per-class throughput over ``seconds``) to
    ``rows``; drop the intervals that ended ``span_s`` or more before it, and those behind
    the newest ones that hold ``min_completions`` together (no later pool reaches them)."""
    rows.append([end, {c: float(x) * seconds for c, x in throughput.items()}])
    while rows and rows[0][0] <= end - span_s:
        rows.pop(0)
    held = 0.0
    for i in range(len(rows) - 1, 0, -1):
        held += sum(rows[i][1].values())
        if held >= min_completions:
            del rows[:i]
            break


def class_mix(rows: list[Row], throughput: Mapping[str, float], seconds: float,
              classes: list[str], min_completions: int) -> tuple[dict[str, float], int]:
    """The shares of ``classes`` a solve models, and how many intervals they pool (the
    module's rule). ``throughput`` and ``seconds`` are the newest interval's (the last of
    ``rows``, :func:`add_interval`); where it holds at least ``min_completions`` or no earlier
    interval is within the span, its own shares, ``X_c / X``, exactly; ``{}`` where no
    pooled interval completed a request."""
    X = float(sum(throughput.values()))
    own = {c: throughput.get(c, 0.0) / X for c in classes} if X > 0 else {}
    if X * seconds >= min_completions or len(rows) < 2:
        return own, 1
    counts = dict.fromkeys(classes, 0.0)
    used = 0
    for _, row in reversed(rows):
        for c in classes:
            counts[c] += row.get(c, 0.0)
        used += 1
        if sum(counts.values()) >= min_completions:
            break
    total = sum(counts.values())
    if used == 1:
        return own, 1
    return ({c: n / total for c, n in counts.items()} if total > 0 else {}), used
