"""Division tables: Webster apportionment, weights, capacity, aggregation (see division.py)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.domain.selectors import LabelSelector
from orchestrator.domain.snapshot import Cluster, ControlPlaneState, StaticWeight
from orchestrator.domain.versions import KubeVersion
from orchestrator.placement import division, place
from tests.orchestrator.placement.fleet import cluster, fleet, workload

# The weights of Karmada's documentation example: clusters A, B, C, D.
KARMADA = [100000, 80000, 30000, 20000]


@pytest.mark.parametrize(
    ("replicas", "expected"),
    [
        (1, {0: 1}),
        (2, {0: 1, 1: 1}),
        (3, {0: 2, 1: 1}),  # largest remainder gave A1 B1 C1
        (4, {0: 2, 1: 1, 2: 1}),
        (5, {0: 2, 1: 2, 2: 1}),
        (6, {0: 2, 1: 2, 2: 1, 3: 1}),  # A and D tie at 20000: D holds fewer (largest rem.: A3)
        (7, {0: 3, 1: 2, 2: 1, 3: 1}),
        (23, {0: 10, 1: 8, 2: 3, 3: 2}),  # exact proportion
    ],
)
def test_webster_on_karmadas_example(replicas: int, expected: dict[int, int]) -> None:
    assert division.weighted(replicas, [0] * 4, KARMADA, [None] * 4).replicas == expected


@pytest.mark.parametrize(
    ("seats", "weights", "scores", "expected"),
    [
        pytest.param(1, [1, 1, 1], [0, 0, 0], {0: 1}, id="equal: lowest position"),
        pytest.param(1, [1, 1, 1], [0, 5, 0], {1: 1}, id="equal: best score first"),
        pytest.param(2, [1, 1, 1], [0, 5, 9], {1: 1, 2: 1}, id="equal: scores rank the cut"),
        pytest.param(4, [3, 1], [0, 0], {0: 3, 1: 1}, id="3:1"),
        # 3/5 = 0.6 < 1: the small weight gets its first replica before the third of the big
        pytest.param(3, [3, 1], [0, 0], {0: 2, 1: 1}, id="small weight early"),
        pytest.param(2, [0, 5], [9, 0], {1: 2}, id="weight 0 gets nothing"),
        pytest.param(0, [1, 1], [0, 0], {}, id="no seats"),
        pytest.param(3, [0, 0], [0, 0], {}, id="no weights"),
        pytest.param(1000, [1, 2, 3, 4], [0] * 4, {0: 100, 1: 200, 2: 300, 3: 400}, id="large"),
    ],
)
def test_webster(
    seats: int, weights: list[int], scores: list[int], expected: dict[int, int]
) -> None:
    assert division.webster(seats, weights, scores) == expected


def test_webster_counts_the_start_and_honours_caps() -> None:
    # Position 0 already holds 4: the next ones go to the others until priorities meet.
    assert division.webster(2, [1, 1], [0, 0], start={0: 4}) == {0: 4, 1: 2}
    assert division.webster(5, [1, 1], [0, 0], caps=[1, None]) == {0: 1, 1: 4}
    assert division.webster(5, [1, 1], [0, 0], caps=[1, 2]) == {0: 1, 1: 2}


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
        # a minimum is a floor: 5 of 6 replicas by weight 1:1 would be 3/3, the floor 5 wins
        pytest.param(6, [1, 1], [None, None], [0, 5], None, {0: 1, 1: 5}, 0, id="min is a floor"),
        pytest.param(
            10, [1, 1], [None, None], None, [None, 2], {0: 8, 1: 2}, 0, id="max spills over"
        ),
        pytest.param(10, [1, 1], [3, None], None, None, {0: 3, 1: 7}, 0, id="room spills over"),
        pytest.param(10, [1, 1], [3, 4], None, None, {0: 3, 1: 4}, 3, id="not enough room"),
        pytest.param(
            3, [1, 1], [None, None], [2, 2], None, {0: 2, 1: 1}, 0, id="mins beyond total"
        ),
        pytest.param(4, [0, 0], [None, None], None, None, {}, 4, id="all weights zero"),
        pytest.param(4, [1, 1], [None, None], None, [0, None], {1: 4}, 0, id="max 0 excludes"),
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
    assert allocation.replicas == expected
    assert allocation.unplaced == unplaced


def test_weighted_mins_go_to_the_best_score_first() -> None:
    allocation = division.weighted(3, [1, 9], [1, 1], [None, None], mins=[2, 2])
    assert allocation.replicas == {1: 2, 0: 1}


def test_weighted_max_clusters_keeps_the_best_scored() -> None:
    allocation = division.weighted(6, [1, 3, 2], [1, 1, 1], [None] * 3, max_clusters=2)
    assert allocation.replicas == {1: 3, 2: 3}


def _cluster(name: str, **labels: str) -> Cluster:
    return Cluster(name, ControlPlaneState(KubeVersion.parse("v1.33.0")), labels=labels)


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        pytest.param([("env", "prod", 1), ("region", "eu", 3)], 3, id="largest wins"),
        pytest.param([("region", "eu", 3), ("env", "prod", 1)], 3, id="whatever the order"),
        pytest.param([("env", "prod", 2), ("region", "eu", 2)], 2, id="equal: first"),
        pytest.param([("env", "dev", 5), ("region", "eu", 0)], 0, id="weight 0 matches"),
        pytest.param([("env", "dev", 5)], None, id="none matches"),
    ],
)
def test_matching_entry_takes_the_largest_weight(
    entries: list[tuple[str, str, int]], expected: int | None
) -> None:
    weights = [
        StaticWeight(weight, selector=LabelSelector(match_labels=((key, value),)), min_replicas=i)
        for i, (key, value, weight) in enumerate(entries)
    ]
    found = division.matching_entry(weights, _cluster("eu-1", env="prod", region="eu"))
    assert (found.weight if found else None) == expected
    if found is not None:  # the entry itself, with its own min/max, is the one that applies
        assert found is next(w for w in weights if w.weight == expected)


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
    assert allocation.replicas == expected
    assert allocation.unplaced == unplaced


def test_dynamic_on_karmadas_example() -> None:
    # Dynamic weights are the rooms: the same apportionment as the static example.
    rooms: list[int | None] = [100000, 80000, 30000, 20000]
    assert division.dynamic(6, [0] * 4, rooms, None).replicas == {0: 2, 1: 2, 2: 1, 3: 1}


@pytest.mark.parametrize(
    ("replicas", "rooms", "current", "expected", "unplaced"),
    [
        pytest.param(5, [4, 10, 6], (), {1: 5}, 0, id="one cluster holds all: the largest"),
        # 7.5 : 4.5 -> Webster's tie at 2/3 goes to the cluster holding fewer
        pytest.param(12, [4, 10, 6], (), {1: 7, 2: 5}, 0, id="two largest, by room"),
        pytest.param(5, [4, 10, 6], (2,), {2: 5}, 0, id="in use first"),
        pytest.param(8, [4, 10, 6], (0,), {0: 2, 1: 6}, 0, id="in use, then the largest"),
        pytest.param(30, [4, 10, 6], (), {0: 4, 1: 10, 2: 6}, 10, id="not enough room"),
        pytest.param(30, [4, None, 6], (), {0: 4, 1: 20, 2: 6}, 0, id="unknown capacity last"),
        pytest.param(3, [5, 5, 5], (), {1: 3}, 0, id="equal rooms: best score"),
    ],
)
def test_aggregated(
    replicas: int,
    rooms: list[int | None],
    current: tuple[int, ...],
    expected: dict[int, int],
    unplaced: int,
) -> None:
    allocation = division.aggregated(replicas, [1, 9, 5], rooms, current)
    assert allocation.replicas == expected
    assert allocation.unplaced == unplaced


# ------------------------------------------------------------------ through place()


def _placed(members: list[dict[str, Any]], **w: Any) -> dict[str, int]:
    decision = place(fleet(members, [workload("w", **w)])).decision("default/w")
    assert not decision.unschedulable, dict(decision.reasons)
    return decision.replicas


def test_place_divides_karmadas_example_by_static_weights() -> None:
    names = "abcd"
    weights = [{"cluster": n, "weight": w} for n, w in zip(names, KARMADA, strict=True)]
    clusters = [cluster(n) for n in names]
    policy = {"type": "Weighted", "weights": weights}
    assert _placed(clusters, replicas=3, replicaScheduling=policy) == {"a": 2, "b": 1}
    assert _placed(clusters, replicas=6, replicaScheduling=policy) == {
        "a": 2,
        "b": 2,
        "c": 1,
        "d": 1,
    }


def test_place_takes_the_largest_matching_weight() -> None:
    clusters = [
        cluster("eu", labels={"env": "prod", "region": "eu"}),
        cluster("us", labels={"env": "prod"}),
    ]
    policy = {
        "type": "Weighted",
        "weights": [
            {"matchLabels": {"env": "prod"}, "weight": 1},
            {"matchLabels": {"region": "eu"}, "weight": 3},
        ],
    }
    assert _placed(clusters, replicas=4, replicaScheduling=policy) == {"eu": 3, "us": 1}


def test_place_aggregates_on_the_fewest_clusters_preferring_those_in_use() -> None:
    small = {"cpu": "1", "memory": "64Gi"}  # room for 10 replicas of 100m
    big = {"cpu": "2", "memory": "64Gi"}  # room for 20
    clusters = [
        cluster("a", capacity=small),
        cluster("b", capacity=big),
        cluster("c", capacity=small),
    ]
    policy = {"type": "Aggregated"}
    assert _placed(clusters, replicas=8, replicaScheduling=policy) == {"b": 8}
    assert _placed(clusters, replicas=8, replicaScheduling=policy, clusters=["c"]) == {"c": 8}
    assert _placed(clusters, replicas=25, replicaScheduling=policy) == {
        "a": 8,
        "b": 17,
    }  # 8.33 : 16.67
