"""The scheduler's shortcuts against a straightforward evaluation (``reference.py``)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.placement import DEFAULT_REGISTRY, Registry, place, topk
from testkit.fleetgen import generate_fleet, generate_fleet_mapping
from tests.orchestrator.placement.fleet import RejectOdd
from tests.orchestrator.placement.reference import RefDecision, reference_place


def _compare(
    snapshot: FleetSnapshot, expected: list[RefDecision], *, scores: bool = False, **kwargs: Any
) -> None:
    """Decisions and reasons always; with ``scores``, every feasible cluster's scores too."""
    result = place(snapshot, **kwargs)
    assert [d.workload for d in result.decisions] == [r.workload for r in expected]
    for got, want in zip(result.decisions, expected, strict=True):
        assert tuple(got.clusters) == want.clusters, got.workload
        assert got.unschedulable == want.unschedulable, got.workload
        assert got.evicted == want.evicted, got.workload
        assert got.affinity == want.affinity, got.workload
        assert dict(got.reasons) == want.reasons, got.workload
        assert got.division_note == want.division_note, got.workload
        assert got.evict_at == want.evict_at, got.workload
        if scores:
            found = tuple((c.name, c.total, c.plugins) for c in got.scores.clusters)
            assert found == want.scores, got.workload


@pytest.fixture(scope="module")
def fleet_200() -> tuple[FleetSnapshot, list[RefDecision]]:
    snapshot = generate_fleet(200, 2000, seed=11)
    return snapshot, reference_place(snapshot)


def test_matches_reference_on_a_generated_fleet(
    fleet_200: tuple[FleetSnapshot, list[RefDecision]],
) -> None:
    snapshot, expected = fleet_200
    assert sum(1 for d in expected if d.unschedulable) < len(expected) / 5
    _compare(snapshot, expected)


@pytest.mark.parametrize("direct_limit", [0, 10**9])
def test_matches_reference_with_either_top_k_path(
    fleet_200: tuple[FleetSnapshot, list[RefDecision]],
    direct_limit: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot, expected = fleet_200
    monkeypatch.setattr(topk, "DIRECT_LIMIT", direct_limit)
    _compare(snapshot, expected)


def test_matches_reference_with_exclusions() -> None:
    snapshot = generate_fleet(60, 400, seed=4)
    names = sorted(c.name for c in snapshot.clusters)
    excluded = set(names[::7])
    expected = reference_place(snapshot, exclude_clusters=excluded)
    _compare(snapshot, expected, exclude_clusters=excluded)


class _PreferShortNames:
    """A static score with no declared facts beyond the name."""

    name = "PreferShortNames"
    weight = 3
    cluster_facts: frozenset[Any] = frozenset({"name"})
    workload_facts: frozenset[Any] = frozenset()

    def score(self, ctx: object, workload: object, cluster: Any) -> int:
        return 100 - len(cluster.name) * 3 - int(cluster.name[-1])


@pytest.mark.parametrize(
    "registry",
    [
        DEFAULT_REGISTRY.with_plugins(RejectOdd(), _PreferShortNames()),
        DEFAULT_REGISTRY.without("ResourceBalance", "ClusterLocality"),
        DEFAULT_REGISTRY.without("ResourceFit"),
        Registry([DEFAULT_REGISTRY["ResourceFit"], DEFAULT_REGISTRY["ResourceBalance"]]),
    ],
    ids=["custom-plugins", "no-dynamic-score", "no-capacity-filter", "capacity-only"],
)
def test_matches_reference_with_other_registries(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = generate_fleet(60, 400, seed=9)
    expected = reference_place(snapshot, registry=registry)
    _compare(snapshot, expected, registry=registry, scores=True)
    monkeypatch.setattr(topk, "DIRECT_LIMIT", 0)  # the threshold algorithm everywhere
    _compare(snapshot, expected, registry=registry, scores=True)


def varied_snapshot(clusters: int, workloads: int, seed: int) -> FleetSnapshot:
    """A generated fleet with the policy shapes the generator does not write itself.

    Public because the explanation tests (test_explain.py) run on the same fleets.
    """
    mapping = generate_fleet_mapping(clusters, workloads, seed=seed)
    rng = random.Random(seed)
    names = [c["name"] for c in mapping["clusters"]]
    for c in mapping["clusters"]:
        roll = rng.random()
        if roll < 0.15:  # an SLA taint for the numeric operators
            c["taints"].append(
                {
                    "key": "example.com/sla",
                    "value": str(rng.choice((90, 95, 99))),
                    "effect": "NoSchedule",
                }
            )
        elif roll < 0.25:  # a drain some workloads tolerate for a while
            c["taints"].append(
                {
                    "key": "example.com/drain",
                    "value": "",
                    "effect": "NoExecute",
                    "timeAdded": rng.choice(("2026-12-02T09:00:00Z", "2026-12-02T11:00:00Z")),
                }
            )
    for w in mapping["workloads"]:
        placement = w["placement"]
        roll = rng.random()
        if rng.random() < 0.3:
            placement["tolerations"] = [
                *placement.get("tolerations", []),
                {"key": "example.com/sla", "operator": rng.choice(("Gt", "Lt")), "value": "94"},
                {"key": "example.com/drain", "operator": "Exists", "tolerationSeconds": 3600},
            ]
        if roll < 0.04:
            placement.pop("maxClusters", None)
            placement["replicaScheduling"] = {
                "type": "Weighted",
                "weights": [  # a later, larger weight wins; an entry that matches nothing
                    {"matchLabels": {"env": "prod"}, "weight": 1},
                    {"cluster": rng.choice(names), "weight": 5},
                    {"matchLabels": {"env": "nowhere"}, "weight": 9},
                ],
            }
        elif roll < 0.06:
            placement["replicaScheduling"] = {
                "type": "Weighted",
                "weights": [{"matchLabels": {"env": "nowhere"}, "weight": 2}],  # equal weights
            }
        elif roll < 0.08:
            placement.pop("maxClusters", None)
            placement["replicaScheduling"] = {
                "type": "Weighted",
                "weights": [
                    {"cluster": rng.choice(names), "weight": 2, "maxReplicas": 3},
                    {"matchLabels": {"env": "prod"}, "weight": 1, "minReplicas": 1},
                ],
            }
        elif roll < 0.14 and "clusterAffinity" in placement:
            affinity = placement["clusterAffinity"]
            if "clusterNames" not in affinity:
                affinity["exclude"] = rng.sample(names, 3)
        elif roll < 0.18:
            w["requests"] = {"cpu": "0", "memory": "0"}
        elif roll < 0.22:
            placement["maxClusters"] = rng.choice((1, 4, 8))
            placement["replicaScheduling"] = {"type": "Dynamic"}
            w["replicas"] = rng.choice((30, 60, 120))  # beyond what small clusters hold
        elif roll < 0.28:
            placement.pop("maxClusters", None)  # so that large ones spill onto several clusters
            placement["replicaScheduling"] = {"type": "Aggregated"}
            w["replicas"] = rng.choice((3, 30, 120))
    _locate(mapping, random.Random(seed + 1000))
    return snapshot_from_mapping(mapping)


def _locate(mapping: dict[str, Any], rng: random.Random) -> None:
    """Cluster fields and the policies that read them: field selectors and spreads.

    Regions come from the generator's ``region`` label; zones (one or two per cluster, some
    clusters none) and a few explicit providers are added here. A separate random stream keeps
    the other policy shapes as they were.
    """
    for c in mapping["clusters"]:
        region = c["labels"]["region"]
        roll = rng.random()
        if roll < 0.6:
            c["zones"] = [f"{region}-{rng.choice('abc')}"]
        elif roll < 0.85:
            c["zones"] = [f"{region}-a", f"{region}-b"]
        if rng.random() < 0.2:
            c["provider"] = rng.choice(("aws", "gcp"))
    for w in mapping["workloads"]:
        placement = w["placement"]
        roll = rng.random()
        if roll < 0.05 and "clusterAffinity" in placement:
            placement["clusterAffinity"]["fieldSelector"] = {
                "matchExpressions": [
                    {"key": "zone", "operator": rng.choice(("In", "NotIn")), "values": ["eu-a"]},
                    {"key": "provider", "operator": "NotIn", "values": ["gcp"]},
                ]
            }
        elif roll < 0.15 and not placement.get("replicaScheduling", {}).get("weights"):
            field = rng.choice(("region", "zone", "provider"))
            low = rng.choice((1, 2, 3))
            spread: list[dict[str, Any]] = [
                {"spreadByField": field, "minGroups": low, "maxGroups": low + rng.choice((0, 1))}
            ]
            if rng.random() < 0.5:
                placement.pop("maxClusters", None)
                spread.append({"spreadByField": "cluster", "minGroups": 2, "maxGroups": 4})
            elif placement.get("maxClusters", 4) < low:
                placement["maxClusters"] = low
            placement["spreadConstraints"] = spread


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("direct_limit", [0, 10**9])
def test_matches_reference_on_varied_policies(
    seed: int, direct_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = varied_snapshot(50, 500, seed)
    expected = reference_place(snapshot)
    spreading = [
        d
        for d, w in zip(expected, sorted(snapshot.workloads, key=lambda w: w.key), strict=True)
        if w.placement.spread_constraints
    ]
    assert any(not d.unschedulable for d in spreading)
    assert any(d.unschedulable for d in spreading)
    monkeypatch.setattr(topk, "DIRECT_LIMIT", direct_limit)
    _compare(snapshot, expected, scores=True)


@pytest.mark.parametrize("seed", [4, 5])
def test_matches_reference_with_a_clock(seed: int) -> None:
    """With ``now`` between the two drain times, half of the time-bounded tolerations ran out."""
    snapshot = varied_snapshot(50, 500, seed)
    now = datetime(2026, 12, 2, 10, 30, tzinfo=UTC)
    expected = reference_place(snapshot, now=now)
    assert any(d.evict_at for d in expected)
    assert any(d.division_note for d in expected)
    assert any("ran out" in r for d in expected for rs in d.reasons.values() for r in rs)
    _compare(snapshot, expected, now=now, scores=True)
