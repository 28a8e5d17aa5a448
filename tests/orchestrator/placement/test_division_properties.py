"""Division properties: the fast paths equal the plain method, and no Alabama paradox.

``plain_division`` hands out one replica at a time; ``division`` skips ahead (first-round cut,
divisor jump start, lazy scores). Hypothesis draws few distinct weights and scores so that ties,
the delicate part, are common.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.placement import division
from tests.orchestrator.placement.plain_division import (
    plain_aggregated,
    plain_dynamic,
    plain_webster,
)


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


@st.composite
def policies(draw: st.DrawFn, max_size: int = 12) -> dict[str, list[int] | list[int | None]]:
    """Parallel per-cluster lists: weights, scores, rooms, mins, maxs."""
    n = draw(st.integers(0, max_size))

    def column(values: st.SearchStrategy[int | None]) -> list[int | None]:
        return draw(st.lists(values, min_size=n, max_size=n))

    return {
        "weights": column(st.integers(0, 6)),
        "scores": column(st.integers(0, 3)),
        "rooms": column(st.one_of(st.none(), st.integers(0, 9))),
        "mins": column(st.sampled_from([0, 0, 0, 1, 2])),
        "maxs": column(st.one_of(st.none(), st.none(), st.integers(0, 6))),
    }


@settings(max_examples=400, deadline=None)
@given(
    seats=st.integers(-1, 60),
    weights=st.lists(st.integers(0, 6), max_size=30),
    data=st.data(),
)
def test_webster_matches_the_plain_method(
    seats: int, weights: list[int], data: st.DataObject
) -> None:
    n = len(weights)
    scores = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    caps = data.draw(
        st.one_of(
            st.none(), st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=n, max_size=n)
        )
    )
    start = data.draw(
        st.dictionaries(st.integers(0, max(0, n - 1)), st.integers(1, 3)) if n else st.just({})
    )
    if caps is not None:
        start = {p: r if (cap := caps[p]) is None else min(r, cap) for p, r in start.items()}
    got = division.webster(seats, weights, LazyScores(scores), caps=caps, start=start)
    assert got == plain_webster(seats, weights, scores, caps, start)


@settings(max_examples=300, deadline=None)
@given(replicas=st.integers(0, 60), policy=policies(), data=st.data())
def test_dynamic_and_aggregated_match_the_plain_method(
    replicas: int, policy: dict[str, list[int | None]], data: st.DataObject
) -> None:
    scores = [s or 0 for s in policy["scores"]]
    rooms = policy["rooms"]
    got = division.dynamic(replicas, LazyScores(scores), rooms, None)
    assert got == plain_dynamic(replicas, scores, rooms)
    current = data.draw(st.sets(st.integers(0, max(0, len(rooms) - 1)), max_size=3))
    got = division.aggregated(replicas, scores, rooms, current)
    assert got == plain_aggregated(replicas, scores, rooms, current)


def _weighted(replicas: int, policy: dict[str, list[int | None]]) -> division.Allocation:
    return division.weighted(
        replicas,
        [s or 0 for s in policy["scores"]],
        [w or 0 for w in policy["weights"]],
        policy["rooms"],
        mins=[m or 0 for m in policy["mins"]],
        maxs=policy["maxs"],
    )


@settings(max_examples=400, deadline=None)
@given(replicas=st.integers(0, 50), policy=policies())
def test_one_more_replica_never_takes_one_away_and_bounds_hold(
    replicas: int, policy: dict[str, list[int | None]]
) -> None:
    """No Alabama paradox for Weighted and Dynamic, and min/max/room bounds always hold."""
    rooms, mins, maxs = policy["rooms"], policy["mins"], policy["maxs"]
    scores = [s or 0 for s in policy["scores"]]
    for now, more in (
        (_weighted(replicas, policy), _weighted(replicas + 1, policy)),
        (
            division.dynamic(replicas, scores, rooms, None),
            division.dynamic(replicas + 1, scores, rooms, None),
        ),
    ):
        assert all(more.replicas.get(p, 0) >= r for p, r in now.replicas.items())
        assert sum(more.replicas.values()) - sum(now.replicas.values()) in (0, 1)
        for allocation, total in ((now, replicas), (more, replicas + 1)):
            assert sum(allocation.replicas.values()) + allocation.unplaced == total
            for p, r in allocation.replicas.items():
                assert r > 0
                assert rooms[p] is None or r <= (rooms[p] or 0)
    weighted = _weighted(replicas, policy)
    for p, r in weighted.replicas.items():
        assert maxs[p] is None or r <= (maxs[p] or 0)
    # Every minimum is met as far as room, maxReplicas and the total allow.
    floors = [
        min([m or 0, *(c for c in (rooms[p], maxs[p]) if c is not None)])
        for p, m in enumerate(mins)
    ]
    if replicas >= sum(floors):
        assert all(weighted.replicas.get(p, 0) >= f for p, f in enumerate(floors))


@settings(max_examples=200, deadline=None)
@given(replicas=st.integers(1, 40), policy=policies())
def test_aggregated_uses_the_fewest_clusters_in_its_order(
    replicas: int, policy: dict[str, list[int | None]]
) -> None:
    """Dropping the last cluster used would leave too little room (it is never one too many)."""
    rooms = policy["rooms"]
    allocation = division.aggregated(replicas, [0] * len(rooms), rooms)
    used = sorted(allocation.replicas)
    if allocation.complete and len(used) > 1 and all(rooms[p] is not None for p in used):
        by_room = sorted((rooms[p] or 0 for p in used), reverse=True)
        assert sum(by_room[:-1]) < replicas


def test_first_round_reads_only_the_tied_scores() -> None:
    # Two replicas over six clusters of equal weight: every first priority ties at the cut.
    scores = LazyScores([1, 5, 5, 2, 9, 0])
    assert division.webster(2, [4] * 6, scores) == {1: 1, 4: 1}
    assert scores.asked == 8  # one batch for the six tied at the cut, then the two chosen
    scores = LazyScores([1, 5, 5, 2, 9, 0])
    assert division.webster(2, [9, 4, 4, 4, 4, 8], scores) == {0: 1, 5: 1}
    assert scores.asked == 0  # no tie at the cut and distinct weights: no score read
