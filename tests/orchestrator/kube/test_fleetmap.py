"""The pure half of the live inventory: CAPI and calibrator.dev objects -> FleetSnapshot entries.

Table-driven: each case is the objects one LIST per kind would return and the fleet that must
come out (entries, clusters left out with their reason, availableVersions).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.observed import ApiUsage, merge_usage
from orchestrator.domain.observed_record import OBSERVED_ANNOTATION, encode_record
from orchestrator.domain.snapshot import WorkloadClusterStatus
from orchestrator.kube import capi
from orchestrator.kube.fleetmap import (
    FleetMap,
    FleetObjects,
    InventoryError,
    ParsedFleet,
    build_snapshot,
    fleet_snapshot,
    map_clusters,
    snapshot_document,
    with_records,
    workload_entries,
)
from testkit.capi_objects import MALFORMED, NS, cclass, cluster, kcp, md


@dataclass(frozen=True)
class Case:
    id: str
    objects: FleetObjects
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> expected subset
    skipped: dict[str, str] = field(default_factory=dict)  # name -> substring of the reason
    pending: dict[str, str] = field(default_factory=dict)
    versions: tuple[str, ...] | None = None


DEFERRED = {"metadata": {"annotations": {capi.DEFER_ANNOTATION: "calibrator.dev:s1"}}}
HELD = {"metadata": {"annotations": {capi.HOLD_ANNOTATION: ""}}}

CASES = [
    Case(
        "managed topology: the control plane and its pools declare topology.version",
        FleetObjects(
            classes=[cclass("cc", ["v1.33.0", "v1.34.0"])],
            clusters=[cluster("a", version="v1.34.0", workers=[{"name": "md-0"}])],
            control_planes=[kcp("a", "v1.33.0", replicas=3)],
            machine_deployments=[md("a-md-0", "a", "v1.33.0", replicas=2, topology_name="md-0")],
        ),
        entries={
            "a": {
                "controlPlane": {"version": "v1.34.0", "replicas": 3},
                "machineDeployments": [{"name": "a-md-0", "version": "v1.34.0", "replicas": 2}],
            }
        },
        versions=("v1.33.0", "v1.34.0"),
    ),
    Case(
        "managed topology: a deferred pool declares its own version",
        FleetObjects(
            clusters=[cluster("a", version="v1.34.0", workers=[{"name": "md-0", **DEFERRED}])],
            control_planes=[kcp("a")],
            machine_deployments=[md("a-md-0", "a", "v1.33.0", topology_name="md-0")],
        ),
        entries={
            "a": {"machineDeployments": [{"name": "a-md-0", "version": "v1.33.0", "replicas": 1}]}
        },
    ),
    Case(
        "managed topology: hold-upgrade-sequence holds every pool listed after it",
        FleetObjects(
            clusters=[
                cluster(
                    "a",
                    version="v1.34.0",
                    workers=[{"name": "md-0"}, {"name": "md-1", **HELD}, {"name": "md-2"}],
                )
            ],
            control_planes=[kcp("a")],
            machine_deployments=[
                md("a-md-0", "a", topology_name="md-0"),
                md("a-md-1", "a", topology_name="md-1"),
                md("a-md-2", "a", topology_name="md-2"),
            ],
        ),
        entries={
            "a": {
                "machineDeployments": [
                    {"name": "a-md-0", "version": "v1.34.0", "replicas": 1},
                    {"name": "a-md-1", "version": "v1.33.0", "replicas": 1},
                    {"name": "a-md-2", "version": "v1.33.0", "replicas": 1},
                ]
            }
        },
    ),
    Case(
        "plain cluster: KubeadmControlPlane and MachineDeployment versions, topology false",
        FleetObjects(
            clusters=[cluster("b", version=None)],
            control_planes=[kcp("b", "v1.32.1")],
            machine_deployments=[md("b-md-1", "b", "v1.31.0"), md("b-md-0", "b", "v1.32.1")],
        ),
        entries={
            "b": {
                "controlPlane": {"version": "v1.32.1", "replicas": 1},
                "machineDeployments": [
                    {"name": "b-md-0", "version": "v1.32.1", "replicas": 1},
                    {"name": "b-md-1", "version": "v1.31.0", "replicas": 1},
                ],
                "topology": False,
            }
        },
        versions=(),
    ),
    Case(
        "labels: CAPI's own are dropped; taints come from the annotation",
        FleetObjects(
            clusters=[
                cluster(
                    "a",
                    labels={
                        "env": "prod",
                        "cluster.x-k8s.io/cluster-name": "a",
                        "topology.cluster.x-k8s.io/owned": "",
                    },
                    annotations={
                        "calibrator.dev/taints": json.dumps(
                            [{"key": "maint", "value": "", "effect": "NoSchedule"}]
                        )
                    },
                )
            ],
            control_planes=[kcp("a")],
        ),
        entries={
            "a": {
                "labels": {"env": "prod"},
                "taints": [{"key": "maint", "value": "", "effect": "NoSchedule"}],
            }
        },
    ),
    Case(
        "availableVersions: only classes the topologies use, unparseable ones ignored, sorted",
        FleetObjects(
            classes=[
                cclass("cc", ["v1.34.0", "latest", "v1.33.0", "v1.34.0-rc.1"]),
                cclass("unused", ["v1.40.0"]),
                cclass("cc", ["v1.50.0"], ns="elsewhere"),
            ],
            clusters=[cluster("a")],
            control_planes=[kcp("a")],
        ),
        entries={"a": {}},
        versions=("v1.33.0", "v1.34.0-rc.1", "v1.34.0"),
    ),
    Case(
        "left out with the reason: being created, being deleted (silently: leaving), malformed",
        FleetObjects(
            clusters=[
                cluster("new", ref={}),
                cluster("creating"),
                cluster("leaving", deleting=True),
                cluster("no-version", version=None),
                cluster("bad-pool"),
                cluster("bad-taints", annotations={"calibrator.dev/taints": "[{not json"}),
                cluster("other-cp", ref={"kind": "TalosControlPlane", "name": "x"}),
                cluster("ok"),
            ],
            control_planes=[
                kcp("leaving"),
                kcp("no-version", None),
                kcp("bad-pool"),
                kcp("bad-taints"),
                kcp("ok"),
            ],
            machine_deployments=[md("bad-pool-md", "bad-pool", "v1.33.banana")],
        ),
        entries={"ok": {}},
        skipped={
            "no-version": "the control plane declares no Kubernetes version",
            "bad-pool": "MachineDeployment bad-pool-md: invalid Kubernetes version",
            "bad-taints": "taints annotation is not JSON",
            "other-cp": "control plane kind TalosControlPlane is not supported",
        },
        pending={
            "new": "no controlPlaneRef yet",
            "creating": "KubeadmControlPlane creating does not exist yet",
        },
    ),
    Case(
        "pools belong to their cluster by namespace and name",
        FleetObjects(
            clusters=[cluster("a"), cluster("b", ns="other")],
            control_planes=[kcp("a"), kcp("b", ns="other")],
            machine_deployments=[md("a-md", "a"), md("b-md", "b", ns="other"), md("stray", "b")],
        ),
        entries={
            "a": {"machineDeployments": [{"name": "a-md", "version": "v1.33.0", "replicas": 1}]},
            "b": {"machineDeployments": [{"name": "b-md", "version": "v1.33.0", "replicas": 1}]},
        },
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_objects_map_to_snapshot_entries(case: Case) -> None:
    fleet = map_clusters(case.objects)
    got = {c.name: c.entry for c in fleet.clusters}
    assert sorted(got) == sorted(case.entries)
    for name, expected in case.entries.items():
        assert {k: got[name][k] for k in expected} == expected, name
        assert ("topology" in got[name]) == ("topology" in expected)
    assert sorted(fleet.skipped) == sorted(case.skipped)
    for name, reason in case.skipped.items():
        assert reason in fleet.skipped[name] and len(fleet.skipped[name]) <= 200
    assert sorted(fleet.pending) == sorted(case.pending)
    for name, reason in case.pending.items():
        assert reason in fleet.pending[name]
    if case.versions is not None:
        assert fleet.available_versions == case.versions
    # Whatever comes out is a valid snapshot.
    snapshot = build_snapshot(snapshot_document(fleet, []))
    assert snapshot.cluster_names() == tuple(sorted(case.entries))


def test_the_same_cluster_name_in_two_namespaces_cannot_form_one_fleet() -> None:
    objects = FleetObjects(
        clusters=[cluster("a", ns="x"), cluster("a", ns="y")],
        control_planes=[kcp("a", ns="x"), kcp("a", ns="y")],
    )
    with pytest.raises(InventoryError, match=r"cluster name 'a' is used in namespaces x and y"):
        map_clusters(objects)


def fleet_workload(
    name: str, spec: dict[str, Any], status: dict[str, Any] | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": NS}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("obj", "clusters"),
    [
        (fleet_workload("w", {"placement": {"clusters": ["a", "gone"]}}), ["a"]),
        (
            fleet_workload(
                "w",
                {"placement": {"clusters": ["b"]}},
                {"clusters": [{"name": "a", "replicas": 3}, {"name": "deleted", "replicas": 1}]},
            ),
            [{"name": "a", "replicas": 3}],
        ),
        (fleet_workload("w", {"placement": {}}, {"clusters": []}), []),
    ],
    ids=["declared placement", "last decision wins", "decided nowhere"],
)
def test_current_placement_keeps_only_fleet_clusters(
    obj: dict[str, Any], clusters: list[object]
) -> None:
    (entry,) = workload_entries([obj], {"a", "b"})
    assert entry["placement"]["clusters"] == clusters


def test_the_last_decisions_counts_are_the_snapshots_current_replicas() -> None:
    fleet = map_clusters(
        FleetObjects(clusters=[cluster("a"), cluster("b")], control_planes=[kcp("a"), kcp("b")])
    )
    decided = {"clusters": [{"name": "a", "replicas": 3}, {"name": "gone", "replicas": 2}]}
    obj = fleet_workload("w", {"replicas": 3, "placement": {"clusters": ["b"]}}, decided)
    snapshot = build_snapshot(snapshot_document(fleet, workload_entries([obj], {"a", "b"})))
    placement = snapshot.workloads[0].placement
    assert (placement.clusters, placement.current_replicas) == (("a",), (3,))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"placement": {"clusterAffinity": {"clusterNames": ["typo"]}}},
            r"^FleetWorkload fleet/w: spec\.placement\.",
        ),
        ({"apis": ["not-an-api"]}, r"^FleetWorkload fleet/w: spec\.apis\[0\]"),
    ],
)
def test_an_invalid_fleet_workload_is_named(spec: dict[str, Any], message: str) -> None:
    fleet = map_clusters(FleetObjects(clusters=[cluster("a")], control_planes=[kcp("a")]))
    document = snapshot_document(fleet, workload_entries([fleet_workload("w", spec)], {"a"}))
    with pytest.raises(InventoryError, match=message):
        build_snapshot(document)


def test_observed_status_is_added_to_each_probed_cluster_only() -> None:
    fleet = map_clusters(
        FleetObjects(clusters=[cluster("a"), cluster("b")], control_planes=[kcp("a"), kcp("b")])
    )
    down = WorkloadClusterStatus(False, "no kubeconfig: Secret fleet/b-kubeconfig not found")
    snapshot = build_snapshot(snapshot_document(fleet, [], {"b": down}))
    assert snapshot.cluster("a").workload_cluster is None
    assert snapshot.cluster("b").workload_cluster == down


def test_an_empty_fleet_is_a_valid_snapshot() -> None:
    snapshot = build_snapshot(snapshot_document(FleetMap(), []))
    assert snapshot.clusters == () and snapshot.available_versions == ()


@pytest.mark.parametrize(
    ("obj", "control_plane", "pools", "reason"),
    MALFORMED,
    ids=[capi.meta(c[0])["name"] for c in MALFORMED],
)
def test_a_malformed_cluster_is_skipped_with_its_reason_and_the_fleet_still_reads(
    obj: dict[str, Any], control_plane: dict[str, Any], pools: list[dict[str, Any]], reason: str
) -> None:
    objects = FleetObjects(
        classes=[cclass("cc", ["v1.33.0", "banana"])],
        clusters=[obj, cluster("ok")],
        control_planes=[control_plane, kcp("ok")],
        machine_deployments=pools,
    )
    name = capi.meta(obj)["name"]
    decided = {"clusters": [{"name": "ok", "replicas": 1}, {"name": name, "replicas": 1}]}
    placed = fleet_workload("w", {"replicas": 2}, decided)  # it ran on the bad cluster too
    snapshot, fleet = fleet_snapshot(map_clusters(objects), [placed])
    assert [c.name for c in fleet.clusters] == ["ok"]
    assert list(fleet.skipped) == [name]
    assert reason in fleet.skipped[name] and len(fleet.skipped[name]) <= 200, fleet.skipped
    assert "\n" not in fleet.skipped[name]
    assert snapshot.cluster_names() == ("ok",)
    assert snapshot.workloads[0].placement.clusters == ("ok",)
    assert [str(v) for v in snapshot.available_versions] == ["v1.33.0"]  # "banana" is ignored


def test_a_cluster_of_an_unknown_cluster_class_stays_with_the_fleets_versions() -> None:
    """A missing ClusterClass adds no versions; the cluster is planned like the others."""
    objects = FleetObjects(
        classes=[cclass("cc", ["v1.33.0"])],
        clusters=[cluster("a", cls="gone"), cluster("b")],
        control_planes=[kcp("a"), kcp("b")],
    )
    fleet = map_clusters(objects)
    assert [c.name for c in fleet.clusters] == ["a", "b"] and not fleet.skipped
    assert fleet.available_versions == ("v1.33.0",)


# ------------------------------------------------------------- the usage record (issue 27)

_T0 = datetime(2026, 12, 5, 10, 2, tzinfo=UTC)
_T1 = _T0 + timedelta(minutes=10)


def _metric12() -> ApiUsage:
    api = ApiRef("storage.k8s.io", "v1alpha1", "VolumeAttributesClass")
    return ApiUsage(api, "volumeattributesclasses", "metric", "1.35", _T0, _T0, _T0, 12, 0,
                    "a:6443", (("a:6443", 12),))  # fmt: skip


def test_the_live_inventory_folds_the_record_into_a_fresh_look() -> None:
    recorded = merge_usage([], [_metric12()], _T0)
    obj = {"metadata": {"name": "a", "namespace": "fleet",
                        "annotations": {OBSERVED_ANNOTATION: encode_record(recorded)}}}  # fmt: skip
    bad = {
        "metadata": {"name": "b", "namespace": "fleet", "annotations": {OBSERVED_ANNOTATION: "{"}}
    }
    fresh = {"a": WorkloadClusterStatus(True), "b": WorkloadClusterStatus(True)}
    out = with_records(fresh, [obj, bad], _T1)
    (kept,) = out["a"].api_usage  # the apiserver that counted is gone: still reported, quiet
    assert kept.requests == 12 and not kept.active and kept.observed_at == _T1
    assert "not JSON" in out["b"].observation_partial


def written(name: str, spec: dict[str, Any], version: str, **status: Any) -> dict[str, Any]:
    """A FleetWorkload as the cache holds it: with the resourceVersion of its last write."""
    obj = fleet_workload(name, spec, status or None)
    obj["metadata"]["resourceVersion"] = version
    return obj


AB = FleetObjects(clusters=[cluster("a"), cluster("b")], control_planes=[kcp("a"), kcp("b")])
EVERYWHERE = {"replicas": 2, "placement": {"clusterAffinity": {"matchLabels": {}}}}


def test_kept_workloads_give_the_full_reads_snapshot_and_only_written_ones_are_parsed() -> None:
    fleet = map_clusters(AB)
    parsed = ParsedFleet()
    objs = [written("w1", EVERYWHERE, "1"), written("w2", {"placement": {"clusters": ["a"]}}, "2")]
    first, _ = fleet_snapshot(fleet, objs, parsed=parsed)
    assert first == fleet_snapshot(fleet, objs)[0]

    # w2 is written (a decision); w3 is new and shares w1's rules
    decided = [{"name": "b", "replicas": 1}]
    objs = [objs[0], written("w2", {}, "7", clusters=decided), written("w3", EVERYWHERE, "8")]
    second, _ = fleet_snapshot(fleet, objs, parsed=parsed)
    assert second == fleet_snapshot(fleet, objs)[0]
    w1, w2, w3 = second.workloads
    assert w1 is first.workloads[0]  # unchanged: kept, not parsed again
    assert (w2.placement.clusters, w2.placement.current_replicas) == (("b",), (1,))
    assert w3.placement.affinities is w1.placement.affinities  # parsed later, parts still shared

    fleet_snapshot(fleet, objs[:1], parsed=parsed)  # w2 and w3 deleted
    assert len(parsed) == 1

    with pytest.raises(InventoryError, match=r"^workloads: duplicate workload\(s\) 'fleet/w1'"):
        fleet_snapshot(fleet, [objs[0], objs[0]], parsed=parsed)


def test_kept_workloads_follow_the_fleets_clusters() -> None:
    """A cluster that leaves the fleet leaves every current placement, kept or not."""
    parsed = ParsedFleet()
    both = [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 1}]
    objs = [written("w", EVERYWHERE, "3", clusters=both)]
    before, _ = fleet_snapshot(map_clusters(AB), objs, parsed=parsed)
    assert before.workloads[0].placement.clusters == ("a", "b")
    only_a = map_clusters(FleetObjects(clusters=[cluster("a")], control_planes=[kcp("a")]))
    after, _ = fleet_snapshot(only_a, objs, parsed=parsed)
    assert after == fleet_snapshot(only_a, objs)[0]
    assert after.workloads[0].placement.clusters == ("a",)


@pytest.mark.parametrize(
    "spec",
    [
        {"placement": {"clusterAffinity": {"clusterNames": ["typo"]}}},  # a rule between entries
        {"apis": ["not-an-api"]},  # a rule of the entry
        {"placement": {"clusters": ["a"]}, "replicas": -1},
    ],
    ids=["unknown cluster", "bad api", "bad replicas"],
)
def test_kept_workloads_fail_with_the_full_reads_error_and_recover(spec: dict[str, Any]) -> None:
    fleet = map_clusters(AB)
    parsed = ParsedFleet()
    good = written("ok", EVERYWHERE, "1")
    fleet_snapshot(fleet, [good], parsed=parsed)
    objs = [good, written("w", spec, "2")]
    with pytest.raises(InventoryError) as full:
        fleet_snapshot(fleet, objs)
    with pytest.raises(InventoryError) as kept:
        fleet_snapshot(fleet, objs, parsed=parsed)
    assert str(kept.value) == str(full.value)
    assert str(full.value).startswith("FleetWorkload fleet/w: spec")
    fixed, _ = fleet_snapshot(fleet, [good, written("w", EVERYWHERE, "3")], parsed=parsed)
    assert [w.name for w in fixed.workloads] == ["ok", "w"]


class _Versions:
    """Stamps objects with a new resourceVersion, as every write gets one."""

    def __init__(self) -> None:
        self.last = 0

    def __call__(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.last += 1
        obj["metadata"]["resourceVersion"] = str(self.last)
        return obj


def test_kept_clusters_give_the_full_reads_fleet_and_only_changed_ones_are_built_again() -> None:
    v = _Versions()
    state: dict[str, dict[str, Any]] = {
        "a": v(cluster("a", version="v1.34.0", workers=[{"name": "md-0"}])),
        "kcp-a": v(kcp("a", "v1.33.0")),
        "md-a": v(md("a-md-0", "a", "v1.33.0", topology_name="md-0")),
        "b": v(cluster("b", version=None)),
        "kcp-b": v(kcp("b", "v1.32.4")),
        "c": v(cluster("c", labels={"tier": "gold"})),
        "kcp-c": v(kcp("c")),
    }
    parsed = ParsedFleet()
    previous: dict[str, Any] = {}

    def fleet_objects() -> FleetObjects:
        return FleetObjects(
            classes=[cclass("cc", ["v1.33.0", "v1.34.0"])],
            clusters=[o for k, o in state.items() if k in "abc"],
            control_planes=[o for k, o in state.items() if k.startswith("kcp-")],
            machine_deployments=[o for k, o in state.items() if k.startswith("md-")],
        )

    def read(changed: set[str]) -> FleetMap:
        objects = fleet_objects()
        fleet = map_clusters(objects, parsed)
        assert fleet == map_clusters(objects)
        snapshot, checked = fleet_snapshot(fleet, [], parsed=parsed)
        assert (snapshot, checked) == fleet_snapshot(map_clusters(objects), [])
        entries = {c.name: c.entry for c in fleet.clusters}
        for name, entry in entries.items():
            if name in previous and name not in changed:
                assert entry is previous[name], name  # kept, not built again
        previous.clear()
        previous.update(entries)
        return checked

    read(set())
    state["kcp-b"] = v(kcp("b", "v1.33.0"))  # b's control plane upgraded
    read({"b"})
    state["md-a"] = v(md("a-md-0", "a", "v1.33.0", replicas=3, topology_name="md-0"))
    read({"a"})
    state["kcp-c"] = v(kcp("c", replicas="x"))  # type: ignore[arg-type]
    assert "replicas" in read({"c"}).skipped["c"]  # malformed: skipped, as a full read does
    state["kcp-c"] = v(kcp("c", replicas=0))
    assert "replicas" in read({"c"}).skipped["c"]  # breaks a snapshot rule: left out, named
    del state["c"], state["kcp-c"]
    assert [c.name for c in read(set()).clusters] == ["a", "b"]
    unversioned = cluster("b", version=None, labels={"tier": "silver"})
    state["b"] = unversioned  # without a resourceVersion: never reused
    read({"b"})
    unversioned["metadata"]["labels"] = {"tier": "bronze"}
    read({"b"})
    # A fleet mapped without the kept entries: each entry that is not the kept one is parsed.
    state["kcp-a"] = v(kcp("a", "v1.34.0", replicas=3))
    fresh = map_clusters(fleet_objects())
    assert fleet_snapshot(fresh, [], parsed=parsed) == fleet_snapshot(fresh, [])
