"""Division written the obvious way, from the rules in ``orchestrator.placement.division``.

One replica at a time, to the highest Webster priority ``weight / (2 * held + 1)`` among the
clusters with room, ties to fewer replicas held, then the better score, then the lower position.
No jump start, no first-round cut, no lazy scores: ``reference.py`` and the property tests use
these to check the fast paths.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from fractions import Fraction

from orchestrator.placement import division


def plain_webster(
    seats: int,
    weights: Sequence[int],
    scores: Sequence[int],
    caps: Sequence[int | None] | None = None,
    start: dict[int, int] | None = None,
) -> dict[int, int]:
    """Replicas per position (> 0 only), ``start`` included."""
    held = dict(start or {})
    for _ in range(max(0, seats)):
        open_ = [
            p
            for p in range(len(weights))
            if weights[p] > 0
            and (caps is None or caps[p] is None or held.get(p, 0) < (caps[p] or 0))
        ]
        if not open_:
            break
        winner = min(
            open_,
            key=lambda p: (
                -Fraction(weights[p], 2 * held.get(p, 0) + 1),
                held.get(p, 0),
                -scores[p],
                p,
            ),
        )
        held[winner] = held.get(winner, 0) + 1
    return {p: r for p, r in held.items() if r > 0}


def _cap(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def plain_weighted(
    replicas: int,
    scores: Sequence[int],
    weights: Sequence[int],
    rooms: Sequence[int | None],
    mins: Sequence[int],
    maxs: Sequence[int | None],
) -> division.Allocation:
    """Minimums best score first, then Webster by weight counting them, capped."""
    n = len(scores)
    caps = [_cap(rooms[p], maxs[p]) for p in range(n)]
    eligible = [
        p for p in range(n) if (weights[p] > 0 or mins[p] > 0) and (caps[p] is None or caps[p] != 0)
    ]
    held: dict[int, int] = {}
    left = replicas
    for p in sorted(eligible, key=lambda p: (-scores[p], p)):
        cap = caps[p]
        give = min(mins[p], left, cap if cap is not None else mins[p])
        if give > 0:
            held[p] = give
            left -= give
    usable = [weights[p] if p in eligible else 0 for p in range(n)]
    result = plain_webster(left, usable, scores, caps, held)
    return division.Allocation(result, replicas - sum(result.values()))


def plain_dynamic(
    replicas: int, scores: Sequence[int], rooms: Sequence[int | None]
) -> division.Allocation:
    """Webster by room while rooms hold everything; else full rooms and the rest evenly."""
    known = [r if r is not None and r > 0 else 0 for r in rooms]
    if replicas <= sum(known):
        result = plain_webster(replicas, known, scores, known)
    else:
        full = {p: r for p, r in enumerate(known) if r > 0}
        unknown = [1 if r is None else 0 for r in rooms]
        result = plain_webster(replicas - sum(known), unknown, scores, None, full)
    return division.Allocation(result, replicas - sum(result.values()))


def plain_aggregated(
    replicas: int, scores: Sequence[int], rooms: Sequence[int | None], current: Collection[int]
) -> division.Allocation:
    """The shortest prefix (in use, room, score, name) that holds every replica, as Dynamic."""
    order = sorted(
        (p for p, r in enumerate(rooms) if r is None or r > 0),
        key=lambda p: (p not in current, rooms[p] is None, -(rooms[p] or 0), -scores[p], p),
    )
    used: list[int] = []
    for p in order:
        used.append(p)
        if rooms[p] is None or sum(rooms[q] or 0 for q in used) >= replicas:
            break
    return plain_dynamic(replicas, scores, [r if p in used else 0 for p, r in enumerate(rooms)])
