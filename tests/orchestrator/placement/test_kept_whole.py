"""``driver.kept_whole`` against the full division path, on settled fleets after a change.

A generated fleet is given division modes the shortcut covers and ones it leaves alone, placed,
and *settled*: every decision written back as the workload's current counts and its usage added
to ``allocated``, as the live fleet is once the decisions ran. Then one change of the kind a
calibration meets is made, and the fleet is placed twice: as shipped, and with the shortcut
turned off. Every decision must be the same, down to reasons and notes, and the shortcut must
have kept a good share of the workloads (else the test would prove nothing).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest

from orchestrator.domain.calibration import at_version
from orchestrator.domain.snapshot import Cluster, FleetSnapshot, Resources
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.taints import Taint, with_taint
from orchestrator.placement import DEFAULT_REGISTRY, Registry, driver, place
from orchestrator.placement.result import PlacementResult
from testkit.fleetgen import generate_fleet_mapping
from testkit.settle import settled as settle
from tests.orchestrator.placement.fleet import RejectOdd

# Division policies the generated workloads are given in turn: some the shortcut covers, some it
# must leave to ``divide`` (minReplicas, maxClusters, Duplicated, spreads are the fleet's own).
POLICIES: tuple[dict[str, Any], ...] = (
    {"type": "Dynamic"},
    {"type": "Aggregated"},
    {"type": "Weighted"},
    {"type": "Weighted", "weights": [{"matchLabels": {"env": "prod"}, "weight": 3}]},
    {
        "type": "Weighted",
        "weights": [
            {"matchLabels": {"region": "eu-west"}, "weight": 2, "maxReplicas": 3},
            {"matchLabels": {"env": "dev"}, "weight": 1},
        ],
    },
    {
        "type": "Weighted",
        "weights": [{"matchLabels": {"env": "prod"}, "weight": 1, "minReplicas": 1}],
    },
)


def _fleet(seed: int) -> FleetSnapshot:
    mapping = generate_fleet_mapping(80, 800, seed=seed)
    for j, item in enumerate(mapping["workloads"]):
        placement = item["placement"]
        if j % 3:  # a third keeps the generator's policy (maxClusters, Duplicated, ...)
            placement.pop("maxClusters", None)
            placement["replicaScheduling"] = POLICIES[j % len(POLICIES)]
        item["generation"] = 1
    return snapshot_from_mapping(mapping)


def _some(snapshot: FleetSnapshot, seed: int) -> list[Cluster]:
    return random.Random(seed).sample(list(snapshot.clusters), len(snapshot.clusters) // 10)


def _clusters(snapshot: FleetSnapshot, changed: list[Cluster]) -> FleetSnapshot:
    by_name = {c.name: c for c in changed}
    return dataclasses.replace(
        snapshot, clusters=tuple(by_name.get(c.name, c) for c in snapshot.clusters)
    )


def _tainted(effect: str) -> Callable[[FleetSnapshot], FleetSnapshot]:
    def change(s: FleetSnapshot) -> FleetSnapshot:
        taint = Taint(key="calibrator.dev/upgrading", value="", effect=effect)  # type: ignore[arg-type]
        return _clusters(
            s, [dataclasses.replace(c, taints=with_taint(c.taints, taint)) for c in _some(s, 1)]
        )

    return change


def _upgraded(s: FleetSnapshot) -> FleetSnapshot:
    """Every tenth cluster at the newest version: workloads using a removed API must go."""
    return _clusters(s, [at_version(c, s.available_versions[-1]) for c in _some(s, 2)])


def _capacity_lost(s: FleetSnapshot) -> FleetSnapshot:
    shrunk = []
    for c in _some(s, 3):
        if c.capacity is not None:
            cap = Resources(c.allocated.cpu_milli * 3 // 5, c.allocated.memory_bytes * 3 // 5)
            shrunk.append(dataclasses.replace(c, capacity=cap))
    return _clusters(s, shrunk)


def _scaled(s: FleetSnapshot) -> FleetSnapshot:
    rng = random.Random(4)
    return dataclasses.replace(
        s,
        workloads=tuple(
            dataclasses.replace(w, replicas=max(1, w.replicas + rng.choice((-2, -1, 1, 3))))
            if rng.random() < 0.2
            else w
            for w in s.workloads
        ),
    )


def _policy_changed(s: FleetSnapshot) -> FleetSnapshot:
    """A new generation not yet observed: kept Weighted counts must again follow their weights."""
    return dataclasses.replace(
        s,
        workloads=tuple(
            dataclasses.replace(w, generation=2) if i % 2 else w for i, w in enumerate(s.workloads)
        ),
    )


CHANGES: dict[str, Callable[[FleetSnapshot], FleetSnapshot]] = {
    "nothing": lambda s: s,
    "upgrading taint NoSchedule": _tainted("NoSchedule"),
    "NoExecute taint": _tainted("NoExecute"),
    "upgraded to the newest version": _upgraded,
    "capacity lost": _capacity_lost,
    "replicas scaled": _scaled,
    "policy changed, not observed": _policy_changed,
}


def _facts(result: PlacementResult) -> list[tuple[object, ...]]:
    return [
        (
            d.workload,
            d.clusters,
            d.unschedulable,
            d.evicted,
            d.affinity,
            d.division_note,
            d.evict_at,
            tuple(sorted(d.reasons.items())),
            d.moved,
        )
        for d in result.decisions
    ]


@pytest.fixture(scope="module")
def settled() -> dict[int, FleetSnapshot]:
    return {seed: settle(_fleet(seed), observed=lambda seq: seq % 3 > 0) for seed in (5, 6)}


@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_kept_whole_gives_the_full_paths_decisions(
    settled: dict[int, FleetSnapshot], seed: int, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _compare(CHANGES[change](settled[seed]), DEFAULT_REGISTRY, monkeypatch)


def test_kept_whole_asks_every_dynamic_filter(
    settled: dict[int, FleetSnapshot], monkeypatch: pytest.MonkeyPatch
) -> None:
    _compare(settled[5], DEFAULT_REGISTRY.with_plugins(RejectOdd()), monkeypatch)


def _compare(snapshot: FleetSnapshot, registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = 0
    shortcut = driver.kept_whole

    def counted(*args: Any) -> list[tuple[int, int]] | None:
        nonlocal kept
        answer = shortcut(*args)
        kept += answer is not None
        return answer

    monkeypatch.setattr(driver, "kept_whole", counted)
    fast = _facts(place(snapshot, registry=registry))
    monkeypatch.setattr(driver, "kept_whole", lambda *args: None)
    full = _facts(place(snapshot, registry=registry))
    assert fast == full
    assert kept > len(snapshot.workloads) // 8, kept
