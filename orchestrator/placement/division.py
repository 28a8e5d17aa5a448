"""Replica division: how many replicas each feasible cluster gets.

Inputs are parallel lists over the feasible clusters *in name order* (a cluster is known by its
position), so ties always break by score, then by name, and the same input always gives the same
output. ``rooms`` holds how many replicas fit on each cluster (None = unknown capacity, unbounded).

* Duplicated: every selected cluster runs all replicas; ``max_clusters`` keeps the best-scored N.
* Weighted (KubeFed ReplicaSchedulingPreference): first each cluster's ``minReplicas`` (best score
  first), then the rest proportionally to weight with largest-remainder rounding, never above
  ``maxReplicas`` or the room; what a full cluster cannot take flows to the others by weight.
* Dynamic (Karmada dynamic weight): proportional to room, so emptier clusters take more. Clusters of
  unknown capacity only take the overflow that known room cannot hold.

A division that cannot place every replica reports how many are left (``unplaced``); the scheduler
then treats the attempt as failed.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast


@dataclass(frozen=True, slots=True)
class Allocation:
    """Replicas per position (only positions that got a share) and the replicas left over."""

    replicas: dict[int, int] = field(default_factory=dict)
    unplaced: int = 0

    @property
    def complete(self) -> bool:
        """Every replica found a cluster."""
        return self.unplaced == 0


def best(scores: Sequence[int], limit: int | None, among: Sequence[int] | None = None) -> list[int]:
    """Positions best first (score descending, then position ascending), at most ``limit``."""
    pool = range(len(scores)) if among is None else among
    if limit is None or limit >= len(pool):
        return sorted(pool, key=scores.__getitem__, reverse=True)
    # nlargest is stable like sorted(reverse=True): equal scores keep position (name) order.
    return heapq.nlargest(limit, pool, key=scores.__getitem__)


def largest_remainder(
    total: int, weights: Sequence[int], scores: Sequence[int], positions: Sequence[int]
) -> list[int]:
    """Split ``total`` by ``weights`` (Hamilton's method): floors first, then +1 by remainder.

    Equal remainders go to the better score, then the lower position. Scores are read only to
    break a tie at the cut, and only for the tied positions (see ``scores_at``).
    """
    shares = [0] * len(weights)
    for k, share in _largest_remainder(total, weights, scores, positions).items():
        shares[k] = share
    return shares


def _largest_remainder(
    total: int, weights: Sequence[int], scores: Sequence[int], positions: Sequence[int]
) -> dict[int, int]:
    """``largest_remainder`` as {index into weights: share} for the shares that are not 0.

    Few replicas over many clusters is the common case: every floor is 0, and the remainders
    are ``total * w`` (ordered like the weights), so the shares come from one sort in C and a
    few scans, with no pass over the clusters in Python.
    """
    weight_sum = sum(weights)
    if weight_sum <= 0 or total <= 0:
        return {}
    shares: dict[int, int]
    remainders: Sequence[int]
    if total * max(weights) < weight_sum:
        shares = {}
        left = total
        remainders = weights  # same order (and ties) as total * w, since total > 0
    else:
        floors = [total * w // weight_sum for w in weights]
        shares = {k: share for k, share in enumerate(floors) if share}
        left = total - sum(floors)
        if not left:
            return shares
        remainders = [total * w % weight_sum for w in weights]
    # The ``left`` largest remainders (one sort in C; stable, so equal ones stay in position
    # order). At the cut, ties go to the better score, then the lower position.
    order = sorted(range(len(remainders)), key=remainders.__getitem__, reverse=True)
    cut = remainders[order[left - 1]]
    start, end = left - 1, left
    while start and remainders[order[start - 1]] == cut:
        start -= 1
    while end < len(order) and remainders[order[end]] == cut:
        end += 1
    tied = order[start:end]
    room = left - start
    if len(tied) > room:
        tied_scores = scores_at(scores, [positions[k] for k in tied])
        ranked = sorted(range(len(tied)), key=lambda t: (-tied_scores[t], positions[tied[t]]))
        tied = [tied[t] for t in ranked]
    for k in order[:start] + tied[:room]:
        shares[k] = shares.get(k, 0) + 1
    return shares


def scores_at(scores: Sequence[int], positions: Sequence[int]) -> list[int]:
    """``[scores[p] for p in positions]``, computing only those for lazy scores.

    Lazy scores (the scheduler's) have an ``at(positions)`` method that works out just the
    positions asked for, in one batch.
    """
    at = getattr(scores, "at", None)
    if at is not None:
        return cast(list[int], at(positions))
    return [scores[p] for p in positions]


def _fill(
    remaining: int,
    positions: Sequence[int],
    *,
    weights: Sequence[int],
    caps: Sequence[int | None],
    scores: Sequence[int],
    assigned: dict[int, int],
) -> int:
    """Distribute by weight up to each cap, re-spreading what full clusters cannot take.

    Each round either places everything or fills at least one cluster, so it ends.
    """
    active = [
        p
        for p in positions
        if weights[p] > 0 and (caps[p] is None or (caps[p] or 0) > assigned.get(p, 0))
    ]
    while remaining > 0 and active:
        shares = largest_remainder(remaining, [weights[p] for p in active], scores, active)
        placed = 0
        for p, share in zip(active, shares, strict=True):
            if share:
                take = min(share, _room(p, caps, assigned))
                if take:
                    assigned[p] = assigned.get(p, 0) + take
                    placed += take
        remaining -= placed
        if placed == 0:
            break
        active = [p for p in active if _room(p, caps, assigned) > 0]
    return remaining


def _room(p: int, caps: Sequence[int | None], assigned: dict[int, int]) -> int:
    cap = caps[p]
    return (1 << 62) if cap is None else cap - assigned.get(p, 0)


def duplicated(replicas: int, scores: Sequence[int], max_clusters: int | None) -> Allocation:
    """A full copy on each of the best ``max_clusters`` positions (all when None)."""
    chosen = best(scores, max_clusters)
    if not chosen:
        return Allocation({}, replicas)
    return Allocation(dict.fromkeys(chosen, replicas), 0)


def weighted(
    replicas: int,
    scores: Sequence[int],
    weights: Sequence[int],
    rooms: Sequence[int | None],
    *,
    max_clusters: int | None = None,
    mins: Sequence[int] | None = None,
    maxs: Sequence[int | None] | None = None,
) -> Allocation:
    """KubeFed-style static weights with per-cluster min/max, capped by room."""
    n = len(scores)
    mins = mins if mins is not None else [0] * n
    maxs = maxs if maxs is not None else [None] * n
    caps: list[int | None] = [_min_opt(rooms[p], maxs[p]) for p in range(n)]
    eligible = [
        p
        for p in range(n)
        if (weights[p] > 0 or mins[p] > 0) and (caps[p] is None or (caps[p] or 0) > 0)
    ]
    if max_clusters is not None and max_clusters < len(eligible):
        eligible = sorted(best(scores, max_clusters, eligible))
    assigned: dict[int, int] = {}
    remaining = replicas
    if any(mins[p] > 0 for p in eligible):
        for p in best(scores, None, eligible):
            give = min(mins[p], _room(p, caps, assigned), remaining)
            if give > 0:
                assigned[p] = give
                remaining -= give
    remaining = _fill(
        remaining, eligible, weights=weights, caps=caps, scores=scores, assigned=assigned
    )
    return Allocation(assigned, remaining)


def dynamic(
    replicas: int, scores: Sequence[int], rooms: Sequence[int | None], max_clusters: int | None
) -> Allocation:
    """Proportional to room; unknown-capacity clusters take only the overflow, evenly."""
    if max_clusters is None:
        # Every cluster with room, or of unknown capacity (list operations in C: the pool
        # can be every cluster of the fleet).
        unknown: list[int] = []
        for _ in range(rooms.count(None)):
            unknown.append(rooms.index(None, unknown[-1] + 1 if unknown else 0))
        known = list(range(len(rooms)))
        room_known = cast(list[int], list(rooms))
        for p in reversed(unknown):
            del known[p], room_known[p]
        if room_known and min(room_known) <= 0:
            kept = [k for k, room in enumerate(room_known) if room > 0]
            known = [known[k] for k in kept]
            room_known = [room_known[k] for k in kept]
    else:
        eligible = [p for p, r in enumerate(rooms) if r is None or r > 0]
        chosen = eligible
        if max_clusters < len(eligible):
            chosen = sorted(best(scores, max_clusters, eligible))
        known = [p for p in chosen if rooms[p] is not None]
        unknown = [p for p in chosen if rooms[p] is None]
        room_known = [rooms[p] or 0 for p in known]
    assigned: dict[int, int] = {}
    total_room = sum(room_known)
    if replicas <= total_room:
        # Proportional to room never exceeds the room (floor(R*r/S) + 1 <= r when R <= S), so
        # one largest-remainder pass is the whole division.
        shares = _largest_remainder(replicas, room_known, scores, known)
        assigned = {known[k]: shares[k] for k in sorted(shares)}
        remaining = 0
    else:
        for p, room in zip(known, room_known, strict=True):
            assigned[p] = room
        remaining = replicas - total_room
        remaining = _fill(
            remaining,
            unknown,
            weights=[1] * len(scores),
            caps=rooms,
            scores=scores,
            assigned=assigned,
        )
    return Allocation(assigned, remaining)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
