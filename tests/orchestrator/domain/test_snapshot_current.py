"""The current placement with replica counts (issue 15 §3): parsing, strictness, round trip."""

from __future__ import annotations

import re
from typing import Any

import pytest

from orchestrator.domain.snapshot import MAX_REPLICAS, SnapshotError
from orchestrator.domain.snapshot_dump import dump_snapshot
from orchestrator.domain.snapshot_load import load_snapshot, snapshot_from_mapping


def _snapshot(clusters: object) -> dict[str, Any]:
    return {
        "clusters": [
            {"name": "a", "controlPlane": {"version": "v1.33.0"}},
            {"name": "b", "controlPlane": {"version": "v1.33.0"}},
        ],
        "workloads": [{"name": "w", "replicas": 4, "placement": {"clusters": clusters}}],
    }


@pytest.mark.parametrize(
    ("clusters", "names", "counts"),
    [
        (["a", "b"], ("a", "b"), None),  # the old form still loads, counts unknown
        ([], (), None),
        ([{"name": "a", "replicas": 3}, {"name": "b", "replicas": 1}], ("a", "b"), (3, 1)),
        ([{"name": "b", "replicas": 0}], ("b",), (0,)),  # listed, running none
        ([{"name": "a", "replicas": MAX_REPLICAS}], ("a",), (MAX_REPLICAS,)),
    ],
)
def test_current_placement_forms(
    clusters: object, names: tuple[str, ...], counts: tuple[int, ...] | None
) -> None:
    policy = snapshot_from_mapping(_snapshot(clusters)).workloads[0].placement
    assert policy.clusters == names
    assert policy.current_replicas == counts
    assert policy.current() == (None if counts is None else dict(zip(names, counts, strict=True)))


@pytest.mark.parametrize(
    ("clusters", "message"),
    [
        (["a", {"name": "b", "replicas": 1}], r"clusters\[0\]: give every entry as a name or"),
        ([{"name": "a", "replicas": 1}, "b"], r"clusters\[1\]: give every entry as a name or"),
        ([{"name": "a", "replicas": -1}], r"clusters\[0\]\.replicas: must be an integer from 0"),
        ([{"name": "a", "replicas": True}], r"clusters\[0\]\.replicas: must be an integer"),
        ([{"name": "a", "replicas": "3"}], r"clusters\[0\]\.replicas: must be an integer"),
        ([{"name": "a", "replicas": 1.5}], r"clusters\[0\]\.replicas: must be an integer"),
        ([{"name": "a", "replicas": MAX_REPLICAS + 1}], "must be an integer from 0 to 1,000,000"),
        ([{"name": "a"}], r"clusters\[0\]: missing required field 'replicas'"),
        ([{"replicas": 2}], r"clusters\[0\]: missing required field 'name'"),
        ([{"name": "a", "replicas": 1, "weight": 2}], r"clusters\[0\]: unknown field\(s\) weight"),
        (
            [{"name": "a", "replicas": 1}, {"name": "a", "replicas": 2}],
            "clusters: duplicate cluster",
        ),
        ([{"name": "gone", "replicas": 1}], r"placement\.clusters: unknown cluster 'gone'"),
        ([{"name": "", "replicas": 1}], r"clusters\[0\]\.name: must be a non-empty string"),
    ],
)
def test_current_placement_rejected(clusters: object, message: str) -> None:
    with pytest.raises(SnapshotError, match=message):
        snapshot_from_mapping(_snapshot(clusters))


@pytest.mark.parametrize(
    "clusters", [["a", "b"], [{"name": "a", "replicas": 3}, {"name": "b", "replicas": 0}]]
)
def test_current_placement_round_trips(clusters: object) -> None:
    snapshot = snapshot_from_mapping(_snapshot(clusters))
    text = dump_snapshot(snapshot)
    assert load_snapshot(text) == snapshot
    assert ("replicas: 3" in text) == (snapshot.workloads[0].placement.current_replicas is not None)


@pytest.mark.parametrize(
    ("generation", "observed", "policy_observed"),
    [
        (None, None, False),  # hand-written: unknown, re-divide when off the weights
        (3, None, False),  # never decided by the calibrator
        (3, 2, False),  # the spec changed since the decision
        (3, 3, True),
        (None, 3, False),
    ],
)
def test_generations_round_trip_and_say_whether_the_policy_decided_the_counts(
    generation: int | None, observed: int | None, policy_observed: bool
) -> None:
    raw = _snapshot([{"name": "a", "replicas": 3}, {"name": "b", "replicas": 1}])
    if generation is not None:
        raw["workloads"][0]["generation"] = generation
    if observed is not None:
        raw["workloads"][0]["placement"]["observedGeneration"] = observed
    snap = snapshot_from_mapping(raw)
    (w,) = snap.workloads
    assert (w.generation, w.placement.observed_generation) == (generation, observed)
    assert w.policy_observed is policy_observed
    assert load_snapshot(dump_snapshot(snap)) == snap


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("generation", True, "workloads[0].generation: must be an integer from 1"),
        ("generation", 0, "workloads[0].generation: must be an integer from 1"),
        ("generation", "3", "workloads[0].generation: must be an integer from 1"),
        ("observedGeneration", -1, "placement.observedGeneration"),
        ("observedGeneration", 2**63, "placement.observedGeneration"),
    ],
)
def test_generations_are_positive_integers(where: str, value: object, message: str) -> None:
    raw = _snapshot([{"name": "a", "replicas": 3}])
    target = raw["workloads"][0] if where == "generation" else raw["workloads"][0]["placement"]
    target[where] = value
    with pytest.raises(SnapshotError, match=re.escape(message)):
        snapshot_from_mapping(raw)
