from __future__ import annotations

import pytest

from orchestrator.placement import division


@pytest.mark.parametrize(
    ("total", "weights", "scores", "shares"),
    [
        (10, [1, 1, 1], [0, 0, 0], [4, 3, 3]),  # tie on remainder: lowest position
        (10, [1, 1, 1], [0, 5, 0], [3, 4, 3]),  # tie on remainder: best score first
        (7, [2, 1], [0, 0], [5, 2]),  # 4.67 / 2.33: largest remainder
        (5, [0, 3], [9, 0], [0, 5]),
        (0, [1, 1], [0, 0], [0, 0]),
        (3, [0, 0], [0, 0], [0, 0]),
    ],
)
def test_largest_remainder(
    total: int, weights: list[int], scores: list[int], shares: list[int]
) -> None:
    assert division.largest_remainder(total, weights, scores, range(len(weights))) == shares


def test_best_orders_by_score_then_position() -> None:
    assert division.best([5, 9, 9, 1], None) == [1, 2, 0, 3]
    assert division.best([5, 9, 9, 1], 2) == [1, 2]
    assert division.best([5, 9, 9, 1], 1, among=[0, 2]) == [2]


@pytest.mark.parametrize(
    ("max_clusters", "replicas"),
    [(None, {0: 3, 1: 3, 2: 3}), (1, {1: 3}), (2, {1: 3, 2: 3})],
)
def test_duplicated(max_clusters: int | None, replicas: dict[int, int]) -> None:
    allocation = division.duplicated(3, [10, 50, 50], max_clusters)
    assert allocation.replicas == replicas
    assert allocation.complete


def test_duplicated_without_clusters_places_nothing() -> None:
    assert division.duplicated(3, [], None).unplaced == 3


@pytest.mark.parametrize(
    ("replicas", "weights", "rooms", "mins", "maxs", "expected", "unplaced"),
    [
        pytest.param(6, [2, 1], [None, None], None, None, {0: 4, 1: 2}, 0, id="by weight"),
        pytest.param(
            10, [1, 1, 1], [None, None, None], None, None, {0: 4, 1: 3, 2: 3}, 0, id="rounding"
        ),
        pytest.param(
            6, [1, 0], [None, None], [0, 2], None, {0: 4, 1: 2}, 0, id="min on a zero weight"
        ),
        pytest.param(
            10, [1, 1], [None, None], None, [None, 2], {0: 8, 1: 2}, 0, id="max spills over"
        ),
        pytest.param(10, [1, 1], [3, None], None, None, {0: 3, 1: 7}, 0, id="room spills over"),
        pytest.param(10, [1, 1], [3, 4], None, None, {0: 3, 1: 4}, 3, id="not enough room"),
        pytest.param(
            3, [1, 1], [None, None], [2, 2], None, {0: 2, 1: 1}, 0, id="mins beyond total"
        ),
        pytest.param(4, [0, 0], [None, None], None, None, {}, 4, id="all weights zero"),
    ],
)
def test_weighted(
    replicas: int,
    weights: list[int],
    rooms: list[int | None],
    mins: list[int] | None,
    maxs: list[int | None] | None,
    expected: dict[int, int],
    unplaced: int,
) -> None:
    allocation = division.weighted(
        replicas, [0] * len(weights), weights, rooms, mins=mins, maxs=maxs
    )
    assert {p: r for p, r in allocation.replicas.items() if r} == expected
    assert allocation.unplaced == unplaced


def test_weighted_mins_go_to_the_best_score_first() -> None:
    allocation = division.weighted(3, [1, 9], [1, 1], [None, None], mins=[2, 2])
    assert allocation.replicas == {1: 2, 0: 1}


def test_weighted_max_clusters_keeps_the_best_scored() -> None:
    allocation = division.weighted(6, [1, 3, 2], [1, 1, 1], [None] * 3, max_clusters=2)
    assert allocation.replicas == {1: 3, 2: 3}


@pytest.mark.parametrize(
    ("replicas", "rooms", "max_clusters", "expected", "unplaced"),
    [
        pytest.param(6, [6, 3, 3], None, {0: 3, 1: 2, 2: 1}, 0, id="proportional to room"),
        pytest.param(12, [6, 3, 3], None, {0: 6, 1: 3, 2: 3}, 0, id="exactly full"),
        pytest.param(13, [6, 3, 3], None, {0: 6, 1: 3, 2: 3}, 1, id="one too many"),
        pytest.param(4, [6, 3, 0], 1, {0: 4}, 0, id="max clusters by score"),
        pytest.param(
            10, [4, None, None], None, {0: 4, 1: 3, 2: 3}, 0, id="unknown capacity takes overflow"
        ),
        pytest.param(3, [4, None], None, {0: 3}, 0, id="unknown capacity used last"),
    ],
)
def test_dynamic(
    replicas: int,
    rooms: list[int | None],
    max_clusters: int | None,
    expected: dict[int, int],
    unplaced: int,
) -> None:
    allocation = division.dynamic(replicas, [9, 5, 1][: len(rooms)], rooms, max_clusters)
    assert {p: r for p, r in allocation.replicas.items() if r} == expected
    assert allocation.unplaced == unplaced
