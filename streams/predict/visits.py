"""Visit ratios ``V_{m,c}`` -- how often a class-``c`` request visits tier ``m`` -- from the counts.

Every tier reports its completions per class, one per visit: a page that makes three database
calls completes once at the front and three times at the database. By the forced flow law
(Lazowska et al. (1984) section 3.2.2, ``X_m = V_m X``) the counts give the ratios relative to
the **entry tier**, the first tier in the configured order (where a request is counted once):

    V_{m,c} = V_{e,c} * sum_k n_{m,c,k} / sum_k n_{e,c,k}

over the solve intervals in which both tiers reported (``V_{e,c}`` the entry tier's configured
visits, 1 by default). The sums decay by :data:`VISIT_DECAY` per solve (about half an hour of
one-minute solves, like the tiers' long-run response times), a ratio of sums rather than a mean
of per-interval ratios: a window that one tier reports in the next interval moves each sum by
one window and the next interval brings it back, so misaligned windows cancel out.

What the model uses, per (tier, class) (:func:`resolve`):

* a configured ratio (``visits``): the configured one -- the user said so -- flagged
  ``visits_mismatch`` where it differs from the counts' ratio by more than
  :data:`VISIT_TOLERANCE` of that ratio;
* no configured ratio, the entry tier counted at least :data:`VISIT_MIN_COMPLETIONS` requests
  of the class over the sums: the counts' ratio (0 where the tier never completes the class);
* otherwise 1, flagged ``visits_assumed`` where the tier completes the class (the entry tier
  missing, or too few of the class's requests there yet).

The tiers' demand estimators regress a tier's busy time on its own completions, so their
demands are per visit (per completion at the tier); :func:`streams.predict.model.build_model`
multiplies them by ``V_{m,c}`` once, into demands per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from streams.core.config import SystemConfig

__all__ = ["VISIT_DECAY", "VISIT_MIN_COMPLETIONS", "VISIT_TOLERANCE", "Visits", "add_counts",
           "resolve"]

#: the visit counts' sums decay by this factor per solve (as the tiers' response-time sums)
VISIT_DECAY = 0.97
#: requests of a class the entry tier must have counted before its ratios are learned
VISIT_MIN_COMPLETIONS = 50.0
#: a configured ratio off the counts' by more than this share of the counts' is flagged
VISIT_TOLERANCE = 0.10

#: per tier, per class, ``[sum n_{m,c}, sum n_{e,c}]`` over the same intervals, decayed
Counts = dict[str, dict[str, list[float]]]


def add_counts(sums: Counts, entry: str | None,
               completions: Mapping[str, Mapping[str, float]]) -> None:
    """Decay ``sums`` by :data:`VISIT_DECAY` and add one solve interval's ``completions``
    (per tier that reported in it, per class) for every tier beside ``entry``, paired with the
    entry tier's over the same interval; nothing is added when the entry tier did not report."""
    for per_class in sums.values():
        for acc in per_class.values():
            acc[0] *= VISIT_DECAY
            acc[1] *= VISIT_DECAY
    at_entry = completions.get(entry) if entry is not None else None
    if at_entry is None:
        return
    for tier, counts in completions.items():
        if tier == entry:
            continue
        per_class = sums.setdefault(tier, {})
        for c in [*at_entry, *(c for c in counts if c not in at_entry)]:
            acc = per_class.setdefault(c, [0.0, 0.0])
            acc[0] += float(counts.get(c, 0.0))
            acc[1] += float(at_entry.get(c, 0.0))


@dataclass(frozen=True)
class Visits:
    """The ratios a solve uses (``used``, tier -> class -> ``V``; 1 where absent), what the
    counts measure (``measured``; absent: the counts cannot tell) and the flags."""

    used: dict[str, dict[str, float]] = field(default_factory=dict)
    measured: dict[str, dict[str, float]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    def visit(self, tier: str, cls: str) -> float:
        """``V_{tier,cls}`` the model uses (1 where nothing is known)."""
        return self.used.get(tier, {}).get(cls, 1.0)


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def resolve(cfg: SystemConfig, sums: Counts, entry: str | None,
            tier_classes: Mapping[str, list[str]], classes: list[str]) -> Visits:
    """The ratios for a solve over ``classes`` (module docstring): ``tier_classes`` the classes
    each tier has completed, ``entry`` the entry tier (``None``: no tier yet)."""
    used: dict[str, dict[str, float]] = {}
    measured: dict[str, dict[str, float]] = {}
    flags: list[str] = []
    configured = cfg.visits or {}
    at_entry = (configured.get(entry) or {}) if entry is not None else {}
    for tier, seen in tier_classes.items():
        at_tier = configured.get(tier) or {}
        if tier == entry:
            if classes:
                used[tier] = {c: 1.0 if (conf := at_tier.get(c)) is None else float(conf)
                              for c in classes}
            continue
        counted = sums.get(tier, {})
        known: set[str] | None = None
        used_tier: dict[str, float] = {}
        measured_tier: dict[str, float] = {}
        for c in classes:
            conf = at_tier.get(c)                   # the configured ratio, if any
            acc = counted.get(c)
            if acc is not None and acc[1] >= VISIT_MIN_COMPLETIONS:
                base = float(at_entry.get(c) or 1.0)   # the entry tier's configured visits
                ratio = base * acc[0] / acc[1]
                measured_tier[c] = ratio
                if conf is None:
                    used_tier[c] = ratio
                    continue
                conf = float(conf)
                used_tier[c] = conf
                if abs(conf - ratio) > VISIT_TOLERANCE * ratio or (ratio == 0 and conf > 0):
                    flags.append(f"visits_mismatch: {tier}/{c} configured {_fmt(conf)}, the "
                                 f"completions give {_fmt(ratio)} ({tier}'s over {entry}'s); "
                                 f"the configured {_fmt(conf)} used")
                continue
            used_tier[c] = 1.0 if conf is None else float(conf)
            if known is None:
                known = set(seen)
            if c in known and conf is None:
                why = (f"{entry} counted {acc[1] if acc else 0.0:.0f} < "
                       f"{VISIT_MIN_COMPLETIONS:.0f} {c} requests beside it"
                       if entry is not None and tier_classes.get(entry)
                       else "no entry tier reported")
                flags.append(f"assumed: 1 visit per request to {tier} by {c}: the counts "
                             f"cannot tell ({why}) (visits_assumed)")
        if used_tier:
            used[tier] = used_tier
        if measured_tier:
            measured[tier] = measured_tier
    return Visits(used, measured, flags)
