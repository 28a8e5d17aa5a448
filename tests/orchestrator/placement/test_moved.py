"""``moved_between``: the per-cluster difference of a decision against the current placement."""

from __future__ import annotations

import random

import pytest

from orchestrator.placement.result import NOTHING_MOVED, ClusterReplicas, Moved, moved_between


def _plain(before: dict[str, int], after: list[ClusterReplicas], estimated: bool) -> Moved:
    """One cluster at a time, as the definition reads."""
    added = [(c.name, c.replicas - before.get(c.name, 0)) for c in after]
    added = [(n, r) for n, r in added if r > 0]
    placed = {c.name: c.replicas for c in after}
    removed = sorted((n, r - placed.get(n, 0)) for n, r in before.items() if r > placed.get(n, 0))
    if not added and not removed:
        return Moved(estimated=estimated)
    return Moved(tuple(added), tuple(removed), estimated)


def _lines(*pairs: tuple[str, int]) -> list[ClusterReplicas]:
    return [ClusterReplicas(n, r) for n, r in pairs]


@pytest.mark.parametrize(
    ("before", "after", "added", "removed"),
    [
        ({}, _lines(("a", 2)), (("a", 2),), ()),
        ({"a": 2}, [], (), (("a", 2),)),
        ({"a": 2}, _lines(("a", 2)), (), ()),
        ({"a": 2}, _lines(("a", 3)), (("a", 1),), ()),  # scale-up in place
        ({"a": 3}, _lines(("a", 1)), (), (("a", 2),)),  # scale-down in place
        ({"b": 1, "a": 2}, _lines(("c", 2), ("a", 1)), (("c", 2),), (("a", 1), ("b", 1))),
        ({"a": 0}, _lines(("a", 1)), (("a", 1),), ()),  # a zero count holds nothing
        ({"a": 0, "b": 2}, _lines(("c", 1)), (("c", 1),), (("b", 2),)),
    ],
)
def test_moved_between(
    before: dict[str, int],
    after: list[ClusterReplicas],
    added: tuple[tuple[str, int], ...],
    removed: tuple[tuple[str, int], ...],
) -> None:
    moved = moved_between(before, after)
    assert (moved.added, moved.removed) == (added, removed)
    assert moved == _plain(before, after, False)
    if not added and not removed:
        assert moved is NOTHING_MOVED
        assert moved_between(before, after, True) == Moved(estimated=True)


@pytest.mark.parametrize("seed", range(5))
def test_moved_between_on_random_placements(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"c{i:03d}" for i in range(60)]
    for _ in range(200):
        before = {n: rng.randint(0, 4) for n in rng.sample(names, rng.randint(0, 5))}
        after = _lines(
            *[(n, rng.randint(1, 5)) for n in sorted(rng.sample(names, rng.randint(0, 40)))]
        )
        estimated = rng.random() < 0.3
        assert moved_between(before, after, estimated) == _plain(before, after, estimated)
