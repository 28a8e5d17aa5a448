from __future__ import annotations

import json
import random
from typing import Any

import pytest

from orchestrator.domain.errors import InputError
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.placement import (
    DEFAULT_REGISTRY,
    FITS,
    Registry,
    decide,
    division,
    place,
    placement_to_json,
    topk,
    unfit,
)
from orchestrator.placement.context import PlacementContext
from testkit.fleetgen import generate_fleet, generate_fleet_mapping
from tests.orchestrator.placement.fleet import cluster, fleet, workload

UPGRADING = {"key": "calibrator.dev/upgrading", "value": "", "effect": "NoSchedule"}


def _basic() -> FleetSnapshot:
    return fleet(
        [
            cluster("prod-eu-1", labels={"env": "prod", "region": "eu"}),
            cluster("prod-us-1", labels={"env": "prod", "region": "us"}, taints=[UPGRADING]),
            cluster("dev-eu-1", labels={"env": "dev", "region": "eu"}, version="v1.35.0"),
        ],
        [
            workload(
                "api",
                namespace="shop",
                replicas=2,
                clusterAffinity={"matchLabels": {"env": "prod"}},
            ),
            workload(
                "cron",
                apis=["batch/v1beta1/CronJob"],
                clusterAffinity={"matchLabels": {"env": "dev"}},
            ),
        ],
    )


@pytest.mark.parametrize("explain", [False, True])
def test_json_contract(explain: bool) -> None:
    data = placement_to_json(place(_basic()), explain=explain)
    assert json.loads(json.dumps(data)) == data
    decisions: list[dict[str, Any]] = data["decisions"]  # type: ignore[assignment]
    assert [d["workload"] for d in decisions] == ["default/cron", "shop/api"]
    api = decisions[1]
    assert set(api) >= {"workload", "clusters", "unschedulable", "summary", "rejected"}
    assert api["clusters"] == [{"name": "prod-eu-1", "replicas": 2}]
    assert api["unschedulable"] is False
    assert api["summary"] == (
        "1/3 clusters available: 1 labels do not match env=prod, "
        "1 untolerated taint calibrator.dev/upgrading=:NoSchedule"
    )
    assert api["rejected"] == [
        {"reason": "labels do not match env=prod", "clusters": 1},
        {"reason": "untolerated taint calibrator.dev/upgrading=:NoSchedule", "clusters": 1},
    ]
    if explain:
        assert api["reasons"] == {
            "dev-eu-1": ["labels do not match env=prod"],
            "prod-us-1": ["untolerated taint calibrator.dev/upgrading=:NoSchedule"],
        }
    else:
        assert "reasons" not in api


def test_unschedulable_names_every_cluster_with_every_reason() -> None:
    cron = place(_basic()).decision("default/cron")
    assert cron.unschedulable
    assert cron.clusters == ()
    removed = "no longer serves batch/v1beta1/CronJob (removed in 1.25; use batch/v1/CronJob)"
    assert dict(cron.reasons) == {
        "dev-eu-1": (f"v1.35.0 {removed}",),
        "prod-eu-1": ("labels do not match env=dev", f"v1.33.5 {removed}"),
        "prod-us-1": (
            "labels do not match env=dev",
            "untolerated taint calibrator.dev/upgrading=:NoSchedule",
            f"v1.33.5 {removed}",
        ),
    }


def test_excluded_clusters() -> None:
    result = place(_basic(), workloads=["shop/api"], exclude_clusters={"prod-eu-1"})
    api = result.decision("shop/api")
    assert api.unschedulable
    assert api.reasons["prod-eu-1"] == ("excluded",)
    assert len(result.decisions) == 1


def test_excluding_the_current_cluster_evicts() -> None:
    snapshot = fleet([cluster("a"), cluster("b")], [workload("w", clusters=["a"], maxClusters=1)])
    decision = place(snapshot, exclude_clusters={"a"}).decision("default/w")
    assert decision.replicas == {"b": 1}
    assert decision.evicted == ("a",)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workloads": ["nope/missing"]}, "unknown workload"),
        ({"exclude_clusters": {"mars-1"}}, "unknown cluster"),
    ],
)
def test_bad_input(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        place(_basic(), **kwargs)


def test_weighted_division_through_the_scheduler() -> None:
    snapshot = fleet(
        [
            cluster("eu-1", labels={"region": "eu"}),
            cluster("eu-2", labels={"region": "eu"}),
            cluster("us-1", labels={"region": "us"}),
        ],
        [
            workload(
                "w",
                replicas=7,
                replicaScheduling={
                    "type": "Weighted",
                    "weights": [
                        {"matchLabels": {"region": "eu"}, "weight": 1},
                        {"cluster": "us-1", "weight": 2, "minReplicas": 1, "maxReplicas": 2},
                    ],
                },
            )
        ],
    )
    assert place(snapshot).decision("default/w").replicas == {"eu-1": 3, "eu-2": 2, "us-1": 2}


def test_weighted_unlisted_clusters_get_nothing() -> None:
    snapshot = fleet(
        [cluster("a"), cluster("b")],
        [
            workload(
                "w",
                replicas=4,
                replicaScheduling={"type": "Weighted", "weights": [{"cluster": "a", "weight": 1}]},
            )
        ],
    )
    decision = place(snapshot).decision("default/w")
    assert decision.replicas == {"a": 4}
    assert "b" not in decision.reasons  # feasible, merely unweighted


def test_weighted_without_weights_spreads_evenly() -> None:
    snapshot = fleet(
        [cluster("a"), cluster("b"), cluster("c")],
        [workload("w", replicas=5, replicaScheduling={"type": "Weighted"})],
    )
    assert place(snapshot).decision("default/w").replicas == {"a": 2, "b": 2, "c": 1}


def test_dynamic_division_follows_free_capacity() -> None:
    snapshot = fleet(
        [
            cluster("roomy", capacity={"cpu": "8", "memory": "64Gi"}),
            cluster(
                "tight",
                capacity={"cpu": "8", "memory": "64Gi"},
                allocated={"cpu": "6", "memory": "0"},
            ),
        ],
        [
            workload(
                "w",
                replicas=5,
                requests={"cpu": "1", "memory": "1Gi"},
                replicaScheduling={"type": "Dynamic"},
            )
        ],
    )
    assert place(snapshot).decision("default/w").replicas == {"roomy": 4, "tight": 1}


def test_dynamic_that_cannot_fit_is_unschedulable() -> None:
    snapshot = fleet(
        [cluster("a", capacity={"cpu": "2", "memory": "64Gi"})],
        [
            workload(
                "w",
                replicas=5,
                requests={"cpu": "1", "memory": "1Gi"},
                replicaScheduling={"type": "Dynamic"},
            )
        ],
    )
    decision = place(snapshot).decision("default/w")
    assert decision.unschedulable
    assert decision.reasons["a"] == (
        "Dynamic division placed only 2 of 5 replicas on the 1 feasible cluster(s) (limited by capacity)",
    )


def test_determinism_does_not_depend_on_input_order() -> None:
    mapping = generate_fleet_mapping(30, 150, seed=3)
    first = placement_to_json(place(snapshot_from_mapping(mapping)))
    rng = random.Random(1)
    rng.shuffle(mapping["clusters"])
    rng.shuffle(mapping["workloads"])
    rng.shuffle(mapping["network"])
    again = placement_to_json(place(snapshot_from_mapping(mapping)))
    assert again == first


def test_fast_top_k_matches_scoring_every_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """The threshold algorithm and equivalence caches must not change any decision."""
    snapshot = generate_fleet(200, 1500, seed=7)
    monkeypatch.setattr(topk, "DIRECT_LIMIT", 0)
    fast = place(snapshot)
    monkeypatch.setattr(topk, "DIRECT_LIMIT", 10**9)
    direct = place(snapshot)
    assert [d.clusters for d in fast.decisions] == [d.clusters for d in direct.decisions]
    assert sum(1 for d in fast.decisions if d.unschedulable) < len(fast.decisions) / 5


def test_decisions_agree_with_each_plugin_called_directly() -> None:
    """Cached answers per equivalence class equal uncached ones (capacity filter excepted)."""
    snapshot = generate_fleet(60, 300, seed=5)
    result = place(snapshot)
    ctx = PlacementContext(snapshot)
    static = [p for p in DEFAULT_REGISTRY.filters if "capacity" not in p.cluster_facts]
    by_key = {w.key: w for w in snapshot.workloads}
    for decision in result.decisions:
        w = by_key[decision.workload]
        if len(w.placement.affinities) > 1:
            continue
        for line in decision.clusters:
            c = snapshot.cluster(line.name)
            assert all(p.filter(ctx, w, c).fits for p in static), (decision.workload, c.name)
        for name, reasons in decision.reasons.items():
            direct = [r for p in static for r in p.filter(ctx, w, snapshot.cluster(name)).reasons]
            assert all(r in reasons for r in direct), (decision.workload, name)


def test_registry_can_drop_and_add_plugins() -> None:
    class Nothing:
        name = "Nothing"
        cluster_facts: frozenset[Any] = frozenset()
        workload_facts: frozenset[Any] = frozenset()

        def filter(self, ctx: object, workload: object, cluster: object) -> object:
            return FITS

    registry = DEFAULT_REGISTRY.without("TaintToleration").with_plugins(Nothing())
    assert "Nothing" in registry and "TaintToleration" not in registry
    decision = place(_basic(), workloads=["shop/api"], registry=registry).decision("shop/api")
    assert decision.replicas == {"prod-eu-1": 1, "prod-us-1": 1} or decision.replicas == {
        "prod-eu-1": 2,
        "prod-us-1": 2,
    }
    with pytest.raises(KeyError):
        DEFAULT_REGISTRY.without("Typo")
    with pytest.raises(ValueError, match="duplicate"):
        Registry([Nothing(), Nothing()])


class RejectB:
    """A dynamic filter without a batch form: rejects cluster b."""

    name = "RejectB"
    cluster_facts: frozenset[Any] = frozenset({"capacity"})
    workload_facts: frozenset[Any] = frozenset()

    def filter(self, ctx: object, workload: object, cluster: Any) -> Any:
        return unfit("b is out") if cluster.name == "b" else FITS


def test_top_k_never_lists_a_cluster_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both current clusters are tried first; b fails, so the search goes on without a again.
    monkeypatch.setattr(topk, "DIRECT_LIMIT", 0)
    snapshot = fleet(
        [cluster("a"), cluster("b"), cluster("c"), cluster("d", allocated={"cpu": "8"})],
        [workload("w", clusters=["a", "b"], maxClusters=2)],
    )
    registry = DEFAULT_REGISTRY.with_plugins(RejectB())
    decision = place(snapshot, registry=registry).decision("default/w")
    assert [c.name for c in decision.clusters] == ["a", "c"]
    assert decision.evicted == ("b",)
    assert decision.reasons == {"b": ("b is out",)}


def test_weighted_with_no_weighted_cluster_falls_back_to_equal_weights_and_says_so() -> None:
    snapshot = fleet(
        [cluster("a"), cluster("b")],
        [
            workload(
                "w",
                replicas=3,
                replicaScheduling={
                    "type": "Weighted",
                    "weights": [{"matchLabels": {"env": "x"}, "weight": 1}],
                },
            )
        ],
    )
    decision = place(snapshot).decision("default/w")
    assert not decision.unschedulable
    assert decision.replicas == {"a": 2, "b": 1}
    assert decision.division_note == division.EQUAL_WEIGHTS_NOTE
    shown: Any = placement_to_json(place(snapshot))
    assert shown["decisions"][0]["divisionNote"] == division.EQUAL_WEIGHTS_NOTE


def test_reasons_show_the_capacity_each_workload_saw() -> None:
    big = {"cpu": "10", "memory": "64Gi"}
    snapshot = fleet(
        [cluster("a", capacity=big), cluster("b", capacity={"cpu": "8", "memory": "64Gi"})],
        [
            workload("w1", replicas=6, requests={"cpu": "1", "memory": "1Gi"}, maxClusters=1),
            workload("w2", replicas=6, requests={"cpu": "1", "memory": "1Gi"}, maxClusters=1),
            workload(
                "w3",
                replicas=3,
                requests={"cpu": "1", "memory": "1Gi"},
                clusterAffinity={"clusterNames": ["a"]},
            ),
        ],
    )
    result = place(snapshot)
    assert result.decision("default/w1").replicas == {"a": 6}
    assert result.decision("default/w3").replicas == {"a": 3}  # a is down to 1 cpu now
    assert result.decision("default/w2").reasons == {"a": ("needs 6 cpu free, has 4",)}


def test_decisions_explained_while_later_ones_are_made_read_the_ledger_they_saw() -> None:
    """``decide`` yields each decision as it is made; explaining it then, or after the last
    one, gives the same summary and reasons (the explainer rebuilds what read the ledger)."""
    snap = generate_fleet(40, 300, seed=3)
    after = place(snap)
    early = []
    for d in decide(snap):
        early.append((d.summary, dict(d.reasons)))
    assert early == [(d.summary, dict(d.reasons)) for d in after.decisions]
