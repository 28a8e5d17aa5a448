"""Replica division: how many replicas each feasible cluster gets.

Inputs are parallel lists over the feasible clusters *in name order* (a cluster is known by its
position), so the same input always gives the same output. ``rooms`` holds how many replicas fit
on each cluster (None = unknown capacity, unbounded).

Proportional shares are apportioned by Webster's method (Sainte-Laguë), as Karmada does for
static and dynamic weights: replicas are handed out one at a time, each to the cluster with the
highest ``weight / (2 * replicas_so_far + 1)``. Being a sequence, it can never take a replica
away from a cluster when one more is divided (no Alabama paradox, which KubeFed's largest
remainder method has), and it is exactly as fair to small weights as to large ones. Equal
priorities go to the cluster with fewer replicas so far (Karmada's rule: small clusters get
their first replica early, which helps availability), then to the better score, then to the
lower position (name). Priorities are compared exactly (never as floats).

* Duplicated: every selected cluster runs all replicas; ``max_clusters`` keeps the best-scored N.
* Weighted: first each cluster's ``minReplicas`` (best score first), then Webster by weight,
  counting those minimums as replicas already handed out (a minimum is a floor, not a bonus),
  never above ``maxReplicas`` or the room; a full cluster drops out and the rest continue.
* Dynamic (Karmada dynamic weight by available replicas): Webster with each cluster's room as
  its weight, so emptier clusters take more. Clusters of unknown capacity only take the overflow
  that known room cannot hold, evenly.
* Aggregated (Karmada): the fewest clusters whose room holds the replicas, clusters already in
  use first, then by room (largest first), score and name; the replicas are then divided over
  those as Dynamic does.

A division that cannot place every replica reports how many are left (``unplaced``); the scheduler
then treats the attempt as failed.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import cast

from orchestrator.domain.snapshot import Cluster, StaticWeight

# What a decision says when no weight entry matched a feasible cluster (see ``weighted``).
EQUAL_WEIGHTS_NOTE = (
    "no replicaScheduling.weights entry matches a feasible cluster: divided with equal weights"
)


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


def scores_at(scores: Sequence[int], positions: Sequence[int]) -> list[int]:
    """``[scores[p] for p in positions]``, computing only those for lazy scores.

    Lazy scores (the scheduler's) have an ``at(positions)`` method that works out just the
    positions asked for, in one batch.
    """
    if not positions:
        return []
    at = getattr(scores, "at", None)
    if at is not None:
        return cast(list[int], at(positions))
    return [scores[p] for p in positions]


# ------------------------------------------------------------------------------ Webster


def webster(
    seats: int,
    weights: Sequence[int],
    scores: Sequence[int],
    *,
    caps: Sequence[int | None] | None = None,
    start: dict[int, int] | None = None,
) -> dict[int, int]:
    """Hand out ``seats`` more replicas by Webster's method; replicas per position (> 0 only).

    ``start`` holds replicas already given (they count in the priorities); ``caps`` the most a
    position may hold (None: no limit). Positions with weight 0 get nothing more.

    The result is the first ``seats`` entries of one fixed order over (position, k-th replica)
    pairs (see the module docstring), computed without walking all of it:

    * few replicas over many clusters: only the best ``seats`` clusters by weight (ties at the
      cut by score, then name) can get any, since every cluster's first priority is its weight;
    * many replicas: every priority above the divisor ``W / (2 * seats - n)`` is surely among
      the first ``seats`` (at most ``seats`` of them exist), so those are given in one pass and
      only the last (at most n) go through the heap.
    """
    assigned = dict(start) if start else {}
    if seats <= 0:
        return {p: r for p, r in assigned.items() if r > 0}
    if caps is None:
        active = [p for p, w in enumerate(weights) if w > 0]
    elif assigned:
        active = [
            p
            for p, (w, cap) in enumerate(zip(weights, caps, strict=True))
            if w > 0 and (cap is None or cap > assigned.get(p, 0))
        ]
    else:
        active = [
            p
            for p, (w, cap) in enumerate(zip(weights, caps, strict=True))
            if w > 0 and (cap is None or cap > 0)
        ]
    if not active:
        return {p: r for p, r in assigned.items() if r > 0}
    if not assigned and seats < len(active):
        active = _first_round(seats, active, weights, scores)
    elif 2 * seats > len(active):
        weight_sum = sum(weights[p] for p in active)
        numerator = 2 * seats - len(active)
        given = 0
        for p in active:
            # p's priorities above the divisor: odd o with o * W < weight * (2 seats - n)
            count = ((weights[p] * numerator - 1) // weight_sum + 1) // 2
            extra = min(count - assigned.get(p, 0), _room(p, caps, assigned))
            if extra > 0:
                assigned[p] = assigned.get(p, 0) + extra
                given += extra
        seats -= given
        active = [p for p in active if _room(p, caps, assigned) > 0]
    if seats > 0 and active:
        _sequential(seats, active, weights, scores, caps=caps, assigned=assigned)
    return {p: r for p, r in assigned.items() if r > 0}


def _first_round(
    seats: int, active: list[int], weights: Sequence[int], scores: Sequence[int]
) -> list[int]:
    """The clusters that can take part when ``seats`` < clusters and none holds any yet.

    A cluster whose weight is not among the ``seats`` best (with its tie-break) is passed by at
    least ``seats`` first replicas of others, so it gets none. Clusters tied at the cut take
    their first replicas by score, then name: only as many of them as seats are left matter.
    """
    order = sorted(active, key=weights.__getitem__, reverse=True)  # stable: name order
    cut = weights[order[seats - 1]]
    above = [p for p in order if weights[p] > cut]
    tied = [p for p in order if weights[p] == cut]
    left = seats - len(above)
    if len(tied) > left:
        tied_scores = scores_at(scores, tied)
        ranked = sorted(range(len(tied)), key=lambda t: (-tied_scores[t], tied[t]))
        tied = [tied[t] for t in ranked[:left]]
    return sorted(above + tied)


def _sequential(
    seats: int,
    active: list[int],
    weights: Sequence[int],
    scores: Sequence[int],
    *,
    caps: Sequence[int | None] | None,
    assigned: dict[int, int],
) -> None:
    """The plain method: one replica at a time to the highest priority (heap of the clusters).

    A priority ``w / (2h + 1)`` is keyed as ``floor(w * 2**shift / (2h + 1))``: with ``2**shift``
    at least the square of every denominator in play, two different fractions differ by at
    least 1 after scaling, so the integer keys order them exactly as the fractions, and equal
    fractions get equal keys (ties stay ties). Equal priorities with equal replicas so far need
    equal weights, so scores are read only for clusters that share their weight with another.
    """
    counts: dict[int, int] = {}
    for p in active:
        counts[weights[p]] = counts.get(weights[p], 0) + 1
    shared = [p for p in active if counts[weights[p]] > 1]
    score_of = dict(zip(shared, scores_at(scores, shared), strict=True))
    most = max(assigned.get(p, 0) for p in active) + seats
    shift = 2 * (2 * most + 1).bit_length()
    heap = [
        (
            -((weights[p] << shift) // (2 * (held := assigned.get(p, 0)) + 1)),
            held,
            -score_of.get(p, 0),
            p,
        )
        for p in active
    ]
    heapq.heapify(heap)
    while seats > 0 and heap:
        _, held, negative_score, p = heapq.heappop(heap)
        held += 1
        assigned[p] = held
        seats -= 1
        if _room(p, caps, assigned) > 0:
            key = -((weights[p] << shift) // (2 * held + 1))
            heapq.heappush(heap, (key, held, negative_score, p))


def _room(p: int, caps: Sequence[int | None] | None, assigned: dict[int, int]) -> int:
    cap = None if caps is None else caps[p]
    return (1 << 62) if cap is None else cap - assigned.get(p, 0)


# ------------------------------------------------------------------------------ modes


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
    """Static weights with per-cluster min/max, capped by room (Webster; see module docstring).

    The caller passes only clusters that some entry gives a weight (or minimum). When no entry
    matches any feasible cluster, the caller divides with equal weights instead, as Karmada
    does, and says so (``EQUAL_WEIGHTS_NOTE``): the policy's clusters are chosen by affinity,
    the weights only shape the spread, so a workload whose weighted clusters all became
    infeasible (tainted, lost an API) keeps running on the clusters it may use.
    """
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
    members = set(eligible)
    usable = [weights[p] if p in members else 0 for p in range(n)]
    result = webster(remaining, usable, scores, caps=caps, start=assigned)
    return Allocation(result, replicas - sum(result.values()))


def dynamic(
    replicas: int, scores: Sequence[int], rooms: Sequence[int | None], max_clusters: int | None
) -> Allocation:
    """Webster by room; unknown-capacity clusters take only the overflow, evenly."""
    n = len(rooms)
    if max_clusters is not None:
        eligible = [p for p, r in enumerate(rooms) if r is None or r > 0]
        if max_clusters < len(eligible):
            chosen = set(best(scores, max_clusters, eligible))
            rooms = [rooms[p] if p in chosen else 0 for p in range(n)]
    known = [r if r is not None and r > 0 else 0 for r in rooms]
    total_room = sum(known)
    if replicas <= total_room:
        # Webster by room never exceeds a room while the rooms hold every replica (a share
        # above room r needs a divisor below 1/2, which would hand out more than the total).
        result = webster(replicas, known, scores, caps=known)
        return Allocation(result, replicas - sum(result.values()))
    assigned = {p: r for p, r in enumerate(known) if r > 0}
    unknown = [1 if r is None else 0 for r in rooms]
    result = webster(replicas - total_room, unknown, scores, start=assigned)
    return Allocation(result, replicas - sum(result.values()))


def aggregated(
    replicas: int,
    scores: Sequence[int],
    rooms: Sequence[int | None],
    current: Collection[int] = (),
) -> Allocation:
    """As few clusters as hold ``replicas`` (``current`` positions first), divided as Dynamic.

    Order: clusters in use first, then known room (largest first; unknown capacity last, as it
    takes only overflow elsewhere too), then score, then name. The shortest prefix of that order
    whose room holds every replica is used; without one, every cluster is, and the division
    reports what is left.
    """
    eligible = [p for p, r in enumerate(rooms) if r is None or r > 0]
    if not eligible:
        return Allocation({}, replicas)
    score_of = dict(zip(eligible, scores_at(scores, eligible), strict=True))
    order = sorted(
        eligible,
        key=lambda p: (
            p not in current,
            rooms[p] is None,
            -(rooms[p] or 0),
            -score_of[p],
            p,
        ),
    )
    held = 0
    used: list[int] = []
    for p in order:
        used.append(p)
        room = rooms[p]
        if room is None:
            break
        held += room
        if held >= replicas:
            break
    chosen = set(used)
    return dynamic(replicas, scores, [r if p in chosen else 0 for p, r in enumerate(rooms)], None)


def matching_entry(entries: Sequence[StaticWeight], cluster: Cluster) -> StaticWeight | None:
    """The weight entry for ``cluster``: of the entries that match it, the largest weight.

    Karmada's rule, so that a broad selector entry (say ``env: prod``, weight 1) and a narrower
    one (``region: eu``, weight 3) combine as "prod, with eu preferred" whatever their order.
    Of equal weights the first entry wins (its min/max apply); None when none matches.
    """
    found: StaticWeight | None = None
    for entry in entries:
        if (found is None or entry.weight > found.weight) and entry.matches(cluster):
            found = entry
    return found


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
