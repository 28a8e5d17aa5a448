"""The fast division paths against the plain formulations they replace (property tests)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.placement import division


def plain_largest_remainder(
    total: int, weights: Sequence[int], scores: Sequence[int], positions: Sequence[int]
) -> list[int]:
    """Hamilton's method written the obvious way (floors, then +1 by remainder, ties by score)."""
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


def plain_dynamic(
    replicas: int, scores: Sequence[int], rooms: Sequence[int | None], max_clusters: int | None
) -> division.Allocation:
    """Dynamic division written the obvious way."""
    eligible = [p for p in range(len(scores)) if rooms[p] is None or (rooms[p] or 0) > 0]
    chosen = eligible
    if max_clusters is not None and max_clusters < len(eligible):
        chosen = sorted(division.best(scores, max_clusters, eligible))
    known = [p for p in chosen if rooms[p] is not None]
    unknown = [p for p in chosen if rooms[p] is None]
    room_known = [r or 0 for r in rooms]
    assigned: dict[int, int] = {}
    total_room = sum(room_known[p] for p in known)
    if replicas <= total_room:
        shares = plain_largest_remainder(replicas, [room_known[p] for p in known], scores, known)
        assigned = {p: share for p, share in zip(known, shares, strict=True) if share}
        remaining = 0
    else:
        for p in known:
            assigned[p] = room_known[p]
        remaining = division._fill(
            replicas - total_room,
            unknown,
            weights=[1] * len(scores),
            caps=rooms,
            scores=scores,
            assigned=assigned,
        )
    return division.Allocation(assigned, remaining)


class LazyScores(Sequence[int]):
    """Scores that count how many were asked for, and answer ``at`` like the scheduler's."""

    def __init__(self, values: list[int]) -> None:
        self.values = values
        self.asked = 0

    def __getitem__(self, p: int) -> int:  # type: ignore[override]
        self.asked += 1
        return self.values[p]

    def __len__(self) -> int:
        return len(self.values)

    def at(self, positions: Sequence[int]) -> list[int]:
        self.asked += len(positions)
        return [self.values[p] for p in positions]


# Few distinct values, so that ties (the delicate part) are common.
weights_st = st.lists(st.integers(0, 6), min_size=0, max_size=30)


@settings(max_examples=400, deadline=None)
@given(total=st.integers(-2, 40), weights=weights_st, data=st.data())
def test_largest_remainder_matches_plain(
    total: int, weights: list[int], data: st.DataObject
) -> None:
    scores = data.draw(st.lists(st.integers(0, 3), min_size=len(weights), max_size=len(weights)))
    positions = list(range(len(weights)))
    assert division.largest_remainder(total, weights, scores, positions) == (
        plain_largest_remainder(total, weights, scores, positions)
    )


@settings(max_examples=400, deadline=None)
@given(
    replicas=st.integers(0, 60),
    rooms=st.lists(st.one_of(st.none(), st.integers(-1, 8)), min_size=0, max_size=30),
    data=st.data(),
)
def test_dynamic_matches_plain(replicas: int, rooms: list[int | None], data: st.DataObject) -> None:
    scores = data.draw(st.lists(st.integers(0, 3), min_size=len(rooms), max_size=len(rooms)))
    max_clusters = data.draw(st.one_of(st.none(), st.integers(1, 5)))
    got = division.dynamic(replicas, scores, rooms, max_clusters)
    want = plain_dynamic(replicas, scores, rooms, max_clusters)
    assert list(got.replicas.items()) == list(want.replicas.items())
    assert got.unplaced == want.unplaced


def test_ties_read_only_the_tied_scores() -> None:
    # Two replicas over six clusters of equal room: every remainder ties at the cut.
    scores = LazyScores([1, 5, 5, 2, 9, 0])
    allocation = division.dynamic(2, scores, [4, 4, 4, 4, 4, 4], None)
    assert allocation.replicas == {4: 1, 1: 1} or allocation.replicas == {1: 1, 4: 1}
    assert scores.asked == 6  # one batch for the tied positions, nothing else
    scores = LazyScores([1, 5, 5, 2, 9, 0])
    assert division.dynamic(2, scores, [9, 4, 4, 4, 4, 8], None).replicas == {0: 1, 5: 1}
    assert scores.asked == 0  # no tie at the cut: no score read
