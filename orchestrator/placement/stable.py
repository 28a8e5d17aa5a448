"""Stable re-placement: divide from the workload's current assignment, not from scratch.

Re-placement runs after every upgrade step of every cluster. Dividing from scratch each time
reshuffles replicas between clusters the step never touched (a score that changed breaks a tie
differently, free capacity moved a Dynamic share), which is churn across the whole fleet. As
Karmada does for dynamic division, the current assignment is the starting point instead:

* **kept**: the replicas the workload runs now (``placement.clusters`` with counts) on clusters
  that are still usable: feasible (not tainted NoExecute, still serving its APIs, ...), chosen
  (``maxClusters``), weighted (Weighted: a weight or a minimum), and never more than the cluster
  now holds (room, ``maxReplicas``). Replicas on other clusters must move: those are the
  replicas a step forced off.
* **equal total**: the kept assignment is the result (nothing moves);
* **scale-up** (fewer kept than wanted, also after replicas were forced off): only the missing
  replicas are divided, by the mode's own rule, on top of what is kept;
* **scale-down**: replicas are removed only from clusters that hold some, in proportion to what
  they hold (Webster with the current counts as weights, as Karmada's dynamic scale-down).
  Aggregated first packs: it keeps the fewest clusters whose current replicas cover the new
  total, the largest holder first, and removes the rest there (Karmada's Aggregated scale-down:
  the mode exists to use as few clusters as possible, and shrinking is when clusters free up).

Weighted division has one more rule, because its weights are a target shape and not only a way
to split new replicas: a kept assignment that is not the Webster apportionment of its own total
over the clusters it uses (within their room, ``maxReplicas`` and ``minReplicas``) no longer
satisfies the policy - the weights or bounds changed - and the workload is divided from scratch
(docs/decisions.md). When the assignment is known to have been decided under the current policy
(``Workload.policy_observed``: live, the FleetWorkload's observedGeneration equals its
generation), being off the weights can only mean that room held a cluster below its share when
it was made; nothing forces a move then, and the assignment is kept.

Every function here returns None when there is nothing to start from (no recorded counts, or
no kept replica): the caller then divides from scratch, which is also the first placement.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence

from orchestrator.placement import division
from orchestrator.placement.division import Allocation


def kept_positions(
    counts: Mapping[str, int], names: Sequence[str], chosen: Sequence[int]
) -> dict[int, int]:
    """Current replicas by position in ``chosen`` (ascending cluster indices); others dropped.

    ``names`` are the cluster names by index, sorted (the context's order). Clusters not in
    ``chosen`` are infeasible or not selected: their replicas are the ones that must move.
    """
    held: dict[int, int] = {}
    size = len(chosen)
    for name, replicas in counts.items():
        if replicas <= 0:
            continue
        i = _find(names, name)
        p = bisect.bisect_left(chosen, i)
        if i >= 0 and p < size and chosen[p] == i:
            held[p] = replicas
    return held


def _find(names: Sequence[str], name: str) -> int:
    """Position of ``name`` in ``names`` (sorted: the context holds clusters in name order)."""
    p = bisect.bisect_left(names, name)
    return p if p < len(names) and names[p] == name else -1


def _capped(held: Mapping[int, int], caps: Sequence[int | None]) -> dict[int, int]:
    """What each cluster may keep: never more than it can hold now (lost capacity)."""
    kept: dict[int, int] = {}
    for p, r in held.items():
        cap = caps[p]
        keep = r if cap is None else min(r, cap)
        if keep > 0:
            kept[p] = keep
    return kept


def _scale_down(replicas: int, kept: dict[int, int], scores: Sequence[int]) -> Allocation:
    """Remove replicas only where they run, in proportion to what each cluster holds."""
    n = len(scores)
    weights = [kept.get(p, 0) for p in range(n)]
    return Allocation(division.webster(replicas, weights, scores, caps=weights), 0)


def _packed_scale_down(replicas: int, kept: dict[int, int], scores: Sequence[int]) -> Allocation:
    """Aggregated's scale-down: the fewest current clusters that still hold ``replicas``.

    Largest current holder first (ties: higher score, then name, the order division uses), the
    shortest prefix whose replicas cover the new total; the replicas are then divided over that
    prefix in proportion to what each holds. 12 replicas held 4/4/4 scaled to 4 stay on one
    cluster; scaled to 6, on two (3 + 3).
    """
    order = sorted(kept, key=lambda p: (-kept[p], -scores[p], p))
    packed: dict[int, int] = {}
    held = 0
    for p in order:
        packed[p] = kept[p]
        held += kept[p]
        if held >= replicas:
            break
    return _scale_down(replicas, packed, scores)


def _from_current(
    replicas: int,
    scores: Sequence[int],
    rooms: Sequence[int | None],
    held: Mapping[int, int],
    add: Callable[[int, list[int | None], list[int]], Allocation],
    *,
    shrink: Callable[[int, dict[int, int], Sequence[int]], Allocation] = _scale_down,
) -> Allocation | None:
    """Keep what still fits, scale down where replicas run, or ``add`` the rest (None: no base).

    ``add(extra, rooms_left, used)`` divides the replicas to add over the room left, knowing the
    clusters already in use; Dynamic and Aggregated differ only there.
    """
    kept = _capped(held, rooms)
    if not kept:
        return None
    total = sum(kept.values())
    if total == replicas:
        return Allocation(kept, 0)
    if total > replicas:
        return shrink(replicas, kept, scores)
    left = [None if r is None else r - kept.get(p, 0) for p, r in enumerate(rooms)]
    return _merged(kept, add(replicas - total, left, list(kept)))


def dynamic(
    replicas: int, scores: Sequence[int], rooms: Sequence[int | None], held: Mapping[int, int]
) -> Allocation | None:
    """Dynamic division from the current assignment (None: divide from scratch)."""
    return _from_current(
        replicas,
        scores,
        rooms,
        held,
        lambda extra, left, _: division.dynamic(extra, scores, left, None),
    )


def aggregated(
    replicas: int, scores: Sequence[int], rooms: Sequence[int | None], held: Mapping[int, int]
) -> Allocation | None:
    """Aggregated division from the current assignment.

    A scale-up fills used clusters first; a scale-down packs onto the fewest clusters in use.
    """
    return _from_current(
        replicas,
        scores,
        rooms,
        held,
        lambda extra, left, used: division.aggregated(extra, scores, left, used),
        shrink=_packed_scale_down,
    )


def weighted(
    replicas: int,
    scores: Sequence[int],
    weights: Sequence[int],
    rooms: Sequence[int | None],
    held: Mapping[int, int],
    *,
    mins: Sequence[int],
    maxs: Sequence[int | None],
    observed: bool = False,
) -> Allocation | None:
    """Weighted division from the current assignment, when it still follows the weights.

    ``observed``: the assignment was decided under this very policy (``policy_observed``), so
    an assignment off its weights was held there by room, and no weight changed: it is kept.
    """
    n = len(scores)
    caps: list[int | None] = [capped_room(rooms[p], maxs[p]) for p in range(n)]
    kept = {p: r for p, r in _capped(held, caps).items() if weights[p] > 0 or mins[p] > 0}
    if not kept or (not observed and not webster_consistent(kept, weights, caps, mins)):
        return None
    below = {
        p: low if cap is None else min(low, cap)
        for p, (low, cap) in enumerate(zip(mins, caps, strict=True))
        if low > kept.get(p, 0) and (cap is None or cap > kept.get(p, 0))
    }
    if below:
        if not observed:
            return None  # a cluster below its minimum (a new or raised minReplicas): from scratch
        # Same policy: a cluster with a minimum is usable again (back from its upgrade). Its
        # floor is a constraint, so raise it; the scale-down below takes the difference from
        # the clusters that hold replicas, by weight, and moves nothing else.
        kept = {**kept, **below}
    total = sum(kept.values())
    if total == replicas:
        return Allocation(kept, 0)
    if total > replicas:
        floors = {p: min(mins[p], r) for p, r in kept.items() if mins[p] > 0}
        if sum(floors.values()) > replicas:
            return None  # the minimums alone exceed the replicas: as from scratch
        limits: list[int | None] = [kept.get(p, 0) for p in range(n)]
        usable = [weights[p] if p in kept else 0 for p in range(n)]
        result = division.webster(
            replicas - sum(floors.values()), usable, scores, caps=limits, start=floors
        )
        return Allocation(result, replicas - sum(result.values()))
    assigned = dict(kept)
    remaining = replicas - total
    eligible = [
        p
        for p in range(n)
        if (weights[p] > 0 or mins[p] > 0) and (caps[p] is None or (caps[p] or 0) > 0)
    ]
    if any(mins[p] > assigned.get(p, 0) for p in eligible):
        for p in division.best(scores, None, eligible):
            give = min(mins[p] - assigned.get(p, 0), _room(p, caps, assigned), remaining)
            if give > 0:
                assigned[p] = assigned.get(p, 0) + give
                remaining -= give
    result = division.webster(remaining, weights, scores, caps=caps, start=assigned)
    return Allocation(result, replicas - sum(result.values()))


def webster_consistent(
    kept: Mapping[int, int],
    weights: Sequence[int],
    caps: Sequence[int | None],
    mins: Sequence[int],
) -> bool:
    """Whether ``kept`` is a Webster apportionment of its total over the clusters it uses.

    Divisor-method test: no cluster that could take one more replica has a higher priority for
    it (``w / (2k + 1)``) than some cluster has for the last replica it got by weight
    (``w / (2k - 1)``). Replicas up to ``minReplicas`` are floors, not given by weight; a
    cluster below its minimum breaks the policy too. Equal priorities are a tie: either way is
    an apportionment, so a tie never moves a replica. Compared exactly, as integers.
    """
    best_num, best_den = 0, 1  # highest priority for one more replica
    worst_num, worst_den = 1, 0  # lowest priority of a replica given by weight (+inf at first)
    for p, k in kept.items():
        w, floor, cap = weights[p], mins[p], caps[p]
        if k < floor and (cap is None or k < cap):
            return False
        if k > floor:
            if w <= 0:
                return False  # a weightless cluster holds only its minimum
            if w * worst_den < worst_num * (2 * k - 1):
                worst_num, worst_den = w, 2 * k - 1
        if w > 0 and (cap is None or k < cap) and w * best_den > best_num * (2 * k + 1):
            best_num, best_den = w, 2 * k + 1
    return best_num * worst_den <= worst_num * best_den


def _room(p: int, caps: Sequence[int | None], assigned: Mapping[int, int]) -> int:
    cap = caps[p]
    return (1 << 62) if cap is None else cap - assigned.get(p, 0)


def capped_room(a: int | None, b: int | None) -> int | None:
    """The smaller bound of two (None: unbounded); a room under ``maxReplicas``."""
    return b if a is None else a if b is None else min(a, b)


def _merged(kept: Mapping[int, int], extra: Allocation) -> Allocation:
    result = dict(kept)
    for p, r in extra.replicas.items():
        result[p] = result.get(p, 0) + r
    return Allocation(result, extra.unplaced)
