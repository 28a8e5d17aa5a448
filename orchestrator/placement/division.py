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

    Equal remainders go to the better score, then the lower position.
    """
    weight_sum = sum(weights)
    if weight_sum <= 0 or total <= 0:
        return [0] * len(weights)
    shares = [total * w // weight_sum for w in weights]
    left = total - sum(shares)
    if left:
        remainders = [total * w % weight_sum for w in weights]
        cut = sorted(remainders, reverse=True)[left - 1]
        winners = [k for k, r in enumerate(remainders) if r > cut]
        tied = [k for k, r in enumerate(remainders) if r == cut]
        if len(tied) > left - len(winners):
            tied.sort(key=lambda k: (-scores[positions[k]], positions[k]))
        for k in winners + tied[: left - len(winners)]:
            shares[k] += 1
    return shares


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
    eligible = [p for p in range(len(scores)) if rooms[p] is None or (rooms[p] or 0) > 0]
    chosen = eligible
    if max_clusters is not None and max_clusters < len(eligible):
        chosen = sorted(best(scores, max_clusters, eligible))
    known = [p for p in chosen if rooms[p] is not None]
    unknown = [p for p in chosen if rooms[p] is None]
    room_known = [r or 0 for r in rooms]
    assigned: dict[int, int] = {}
    total_room = sum(room_known[p] for p in known)
    if replicas <= total_room:
        # Proportional to room never exceeds the room (floor(R*r/S) + 1 <= r when R <= S), so
        # one largest-remainder pass is the whole division.
        shares = largest_remainder(replicas, [room_known[p] for p in known], scores, known)
        assigned = {p: share for p, share in zip(known, shares, strict=True) if share}
        remaining = 0
    else:
        for p in known:
            assigned[p] = room_known[p]
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
