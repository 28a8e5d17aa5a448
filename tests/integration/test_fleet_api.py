"""Our API group on the real local plane: calibrator.dev/v1alpha1 FleetWorkload and PlacementDecision.

The CRDs are installed by ``LocalPlane.up`` and must be Established; the API server's schema
validation rejects invalid FleetWorkloads; every workload of examples/fleet.yaml survives the
round trip model -> FleetWorkload -> API server -> reader -> model; and the writer's
PlacementDecision reads as an Argo CD clusterDecisionResource (read here with the generator's own
rules, through the GVR its ConfigMap names). Without the CRDs the backend fails with one clear
error, and ``up`` on a healthy plane puts them back.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from orchestrator.cli import demo
from orchestrator.domain.snapshot_dump import snapshot_to_mapping
from orchestrator.domain.snapshot_load import load_snapshot, snapshot_from_mapping
from orchestrator.kube import fleetapi
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.backend.port import ClusterReplicasInfo, NotFoundError, PlacementDecisionInfo
from orchestrator.kube.client import apply_all
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import wait_for
from tests.orchestrator.kube.backend.recording_backend import RecordingKubeBackend

pytestmark = pytest.mark.integration

NS = "calibrator-api"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml"
# The ConfigMap an Argo CD installation gets for our duck type (docs/api.md): Argo CD uses
# ``kind`` as the *resource* (plural) of the GVR it lists.
ARGOCD_DUCK_TYPE = {
    "apiVersion": "calibrator.dev/v1alpha1",
    "kind": "placementdecisions",
    "statusListKey": "decisions",
    "matchKey": "clusterName",
}
VALID: dict[str, Any] = {
    "apiVersion": "calibrator.dev/v1alpha1",
    "kind": "FleetWorkload",
    "metadata": {"name": "probe", "namespace": NS},
    "spec": {
        "apis": ["apps/v1/Deployment", "v1/ConfigMap"],
        "replicas": 3,
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "placement": {
            "clusterAffinity": {
                "matchLabels": {"env": "prod"},
                "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}],
            },
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "replicaScheduling": {"type": "Weighted", "weights": [{"cluster": "a", "weight": 2}]},
            "maxLatency": {"region": "eu", "rttMs": 40},
            "maxClusters": 2,
        },
    },
}


@pytest.fixture(scope="module")
def namespace(dyn: DynamicClient) -> Iterator[str]:
    apply_all(dyn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    yield NS
    # This module's FleetWorkloads name clusters that do not exist: a later test on the same
    # plane that runs a worker without --namespace (which reads every namespace's workloads)
    # would plan them and fail. So they go with the module.
    for kind in (fleetapi.FLEET_WORKLOAD, fleetapi.PLACEMENT_DECISION):
        fleetapi.resource(dyn, kind).delete(
            namespace=NS, field_selector=f"metadata.namespace={NS}", _request_timeout=60
        )


def _crds(dyn: DynamicClient) -> dict[str, dict[str, Any]]:
    res = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    items = res.get().to_dict()["items"]
    return {i["metadata"]["name"]: i for i in items if i["metadata"]["name"] in fleetapi.CRD_NAMES}


def _condition(crd: Mapping[str, Any], kind: str) -> str | None:
    for c in (crd.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def test_crds_are_installed_established_and_reapplied_idempotently(
    plane: LocalPlane, dyn: DynamicClient
) -> None:
    crds = _crds(dyn)
    assert sorted(crds) == sorted(fleetapi.CRD_NAMES)
    for crd in crds.values():
        assert _condition(crd, "Established") == "True", crd["status"]
        assert _condition(crd, "NamesAccepted") == "True", crd["status"]
        assert _condition(crd, "NonStructuralSchema") is None, crd["status"]
        (version,) = crd["spec"]["versions"]
        assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
        assert crd["spec"]["scope"] == "Namespaced"
    before = {n: c["metadata"]["resourceVersion"] for n, c in crds.items()}
    assert fleetapi.install_crds(dyn) == list(fleetapi.CRD_NAMES)
    after = {n: c["metadata"]["resourceVersion"] for n, c in _crds(dyn).items()}
    assert after == before, "re-applying unchanged CRDs must not write"


def _set(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    *parents, leaf = path.split(".")
    here = out
    for key in parents:
        here = here[int(key)] if isinstance(here, list) else here.setdefault(key, {})
    if isinstance(here, list):
        here[int(leaf)] = value
    else:
        here[leaf] = value
    return out


INVALID = [
    ("spec.apis.0", "apps/Deployment/v1", "spec.apis[0]"),
    ("spec.apis.0", "apps/v1", "spec.apis[0]"),
    ("spec.replicas", -1, "spec.replicas"),
    ("spec.requests.cpu", "lots", "spec.requests.cpu"),
    ("spec.placement.clusterAffinities", [{"matchLabels": {"env": "x"}}], "not both"),
    (
        "spec.placement.clusterAffinity.matchExpressions.0",
        {"key": "region", "operator": "In"},
        "need values",
    ),
    (
        "spec.placement.clusterAffinity.matchExpressions.0",
        {"key": "region", "operator": "Near", "values": ["eu"]},
        "operator",
    ),
    ("spec.placement.tolerations.0.value", "v", "Exists takes no value"),
    ("spec.placement.tolerations.0.effect", "Sometimes", "effect"),
    ("spec.placement.replicaScheduling.type", "Dynamic", "only used with type Weighted"),
    ("spec.placement.replicaScheduling.type", "Spread", "type"),
    (
        "spec.placement.replicaScheduling.weights.0",
        {"cluster": "a", "matchLabels": {"env": "prod"}, "weight": 1},
        "exactly one of cluster or matchLabels",
    ),
    (
        "spec.placement.replicaScheduling.weights.0",
        {"cluster": "a", "minReplicas": 3, "maxReplicas": 1},
        "maxReplicas is below minReplicas",
    ),
    ("spec.placement.maxLatency", {"rttMs": 10}, "exactly one of cluster or region"),
    ("spec.placement.maxLatency", {"region": "eu"}, "rttMs"),
    ("spec.placement.maxClusters", 0, "maxClusters"),
    (
        "spec.placement.clusterAffinity.fieldSelector",
        {"matchExpressions": [{"key": "cloud", "operator": "In", "values": ["aws"]}]},
        "key",
    ),
    (
        "spec.placement.clusterAffinity.fieldSelector",
        {"matchExpressions": [{"key": "zone", "operator": "Exists", "values": ["a"]}]},
        "operator",
    ),
    (
        "spec.placement.spreadConstraints",
        [{"spreadByField": "region"}, {"spreadByField": "zone"}],
        "spread by one of region, zone or provider",
    ),
    (
        "spec.placement.spreadConstraints",
        [{"spreadByField": "region", "minGroups": 3, "maxGroups": 2}],
        "maxGroups is below minGroups",
    ),
    ("spec.placement.spreadConstraints", [{"spreadByField": "rack"}], "spreadByField"),
    (  # the base has static weights
        "spec.placement.spreadConstraints",
        [{"spreadByField": "region"}],
        "do not combine with static weights",
    ),
    (
        "spec.placement.spreadConstraints",
        [{"spreadByField": "cluster", "maxGroups": 2}],
        "not both",
    ),
]


@pytest.mark.parametrize(("path", "value", "expected"), INVALID, ids=[i[2] for i in INVALID])
def test_api_server_rejects_invalid_fleet_workloads(
    dyn: DynamicClient, namespace: str, path: str, value: Any, expected: str
) -> None:
    res = fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD)
    res.create(body=VALID, namespace=namespace, query_params=[("dryRun", "All")])  # the base is ok
    with pytest.raises(Exception) as info:
        res.create(
            body=_set(VALID, path, value), namespace=namespace, query_params=[("dryRun", "All")]
        )
    assert getattr(info.value, "status", None) == 422, info.value
    assert expected in str(getattr(info.value, "body", info.value)), info.value


@pytest.mark.parametrize("obj", demo.WORKLOADS, ids=lambda o: o["metadata"]["name"])
def test_demo_fleet_workloads_are_valid(
    dyn: DynamicClient, namespace: str, obj: dict[str, Any]
) -> None:
    res = fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD)
    # A name of its own: the round-trip test creates the example workloads for real in the same
    # namespace, and tests run in random order, so the demo's names may already exist (409).
    body = _set(obj, "metadata.namespace", namespace)
    body = _set(body, "metadata.name", f"demo-{obj['metadata']['name']}")
    created = res.create(body=body, namespace=namespace, query_params=[("dryRun", "All")])
    assert fleetapi.workload_entry(created.to_dict())["apis"] == obj["spec"]["apis"]


def test_example_workloads_round_trip_through_the_api_server_and_reader(
    dyn: DynamicClient, namespace: str
) -> None:
    example = load_snapshot(EXAMPLE.read_text())
    workloads = tuple(replace(w, namespace=namespace) for w in example.workloads)
    objects = [fleetapi.fleet_workload(w) for w in workloads]
    assert apply_all(dyn, objects) == len(workloads)
    listed = [
        o
        for o in fleetapi.list_fleet_workloads(dyn, namespace)
        if o["metadata"]["name"] in {w.name for w in workloads}
    ]
    mapping = snapshot_to_mapping(example)
    mapping["workloads"] = [fleetapi.workload_entry(o) for o in listed]
    back = snapshot_from_mapping(mapping)
    # The API server numbers the spec (metadata.generation 1 on create); the rest is the same.
    assert {w.generation for w in back.workloads} == {1}
    read = sorted((replace(w, generation=None) for w in back.workloads), key=lambda w: w.name)
    assert read == sorted(workloads, key=lambda w: w.name)


def _argocd_params(
    dyn: DynamicClient, namespace: str, duck: Mapping[str, str], selector: str
) -> list[dict[str, str]]:
    """What the ApplicationSet clusterDecisionResource generator computes (Argo CD's
    applicationset/generators/duck_type.go): LIST <group>/<version>/<kind-as-resource> in its
    namespace by label selector, skip items without status, require status[statusListKey] to be a
    list, and per item require a non-empty matchKey; every value becomes a string parameter."""
    group, version = duck["apiVersion"].split("/", 1)
    path = f"/apis/{group}/{version}/namespaces/{namespace}/{duck['kind']}"
    listed = dyn.request("get", path, label_selector=selector).to_dict()
    params: list[dict[str, str]] = []
    for item in listed["items"]:
        status = item.get("status")
        if not status:
            continue
        decisions = status[duck["statusListKey"]]
        assert isinstance(decisions, list), decisions
        for decision in decisions:
            assert isinstance(decision, dict), decision
            match = decision.get(duck["matchKey"])
            assert isinstance(match, str) and match, decision
            # Argo CD up to v2.x asserts value.(string) for every key: all must be strings.
            assert all(isinstance(v, str) for v in decision.values()), decision
            params.append(dict(decision))
    return params


def _table(dyn: DynamicClient, kind: tuple[str, str], namespace: str) -> dict[str, Any]:
    res = fleetapi.resource(dyn, kind)
    table: dict[str, Any] = dyn.request(
        "get",
        res.path(namespace=namespace),
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    ).to_dict()
    return table


def test_writer_placement_decisions_are_an_argo_cd_cluster_decision_resource(
    dyn: DynamicClient, mgmt: client.ApiClient, namespace: str
) -> None:
    web = _set(_set(VALID, "metadata.name", "web-argo"), "spec.placement.clusters", ["a"])
    apply_all(dyn, [web])
    owner = fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD).get(name="web-argo", namespace=NS)
    uid = owner.to_dict()["metadata"]["uid"]
    backend = RecordingKubeBackend(mgmt, namespace)
    first = PlacementDecisionInfo(
        f"{namespace}/web-argo",
        (ClusterReplicasInfo("a", 2), ClusterReplicasInfo("b", 1)),
        reason="a: after step 1/2",
    )
    asyncio.run(backend.write_placement([first], "a: after step 1/2"))

    pd = fleetapi.resource(dyn, fleetapi.PLACEMENT_DECISION).get(name="web-argo", namespace=NS)
    meta = pd.to_dict()["metadata"]
    assert meta["labels"] == {fleetapi.WORKLOAD_LABEL: "web-argo"}
    (ref,) = meta["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "FleetWorkload",
        "web-argo",
        uid,
        True,
    )
    selector = f"{fleetapi.WORKLOAD_LABEL}=web-argo"
    assert _argocd_params(dyn, namespace, ARGOCD_DUCK_TYPE, selector) == [
        {"clusterName": "a", "replicas": "2", "reason": "a: after step 1/2"},
        {"clusterName": "b", "replicas": "1", "reason": "a: after step 1/2"},
    ]

    # A new decision replaces the list (no merge with the old items), and the FleetWorkload's
    # status - what the reader takes as the current placement - follows.
    second = PlacementDecisionInfo(
        f"{namespace}/web-argo", (ClusterReplicasInfo("c", 3),), reason="a: after the upgrade"
    )
    asyncio.run(backend.write_placement([second], "a: after the upgrade"))
    assert _argocd_params(dyn, namespace, ARGOCD_DUCK_TYPE, selector) == [
        {"clusterName": "c", "replicas": "3", "reason": "a: after the upgrade"}
    ]
    fw = fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD).get(name="web-argo", namespace=NS)
    status = fw.to_dict()["status"]
    assert status["clusters"] == [{"name": "c", "replicas": 3}]
    assert status["selectedClusters"] == 1 and status["reason"] == "a: after the upgrade"
    assert status["observedGeneration"] == fw.to_dict()["metadata"]["generation"]
    assert fleetapi.workload_entry(fw.to_dict())["placement"]["clusters"] == [
        {"name": "c", "replicas": 3}
    ]
    assert backend.placement_writes == [
        (f"{namespace}/web-argo", "a: after step 1/2"),
        (f"{namespace}/web-argo", "a: after the upgrade"),
    ]

    # Printer columns.
    table = _table(dyn, fleetapi.PLACEMENT_DECISION, namespace)
    columns = [c["name"] for c in table["columnDefinitions"]]
    row = next(r for r in table["rows"] if r["cells"][0] == "web-argo")
    assert row["cells"][columns.index("Workload")] == "web-argo"
    table = _table(dyn, fleetapi.FLEET_WORKLOAD, namespace)
    columns = [c["name"] for c in table["columnDefinitions"]]
    row = next(r for r in table["rows"] if r["cells"][0] == "web-argo")
    assert row["cells"][columns.index("Clusters")] == 1
    assert row["cells"][columns.index("Division")] == "Weighted"

    with pytest.raises(NotFoundError, match="no FleetWorkload"):
        asyncio.run(
            backend.write_placement(
                [PlacementDecisionInfo(f"{namespace}/ghost", (ClusterReplicasInfo("a", 1),))],
                "x",
            )
        )


@pytest.fixture
def without_crds(plane: LocalPlane, dyn: DynamicClient) -> Iterator[None]:
    # The plane is shared by every later test of this worker: whatever happens here, even a
    # deletion that does not finish in time, ends with our CRDs installed again. Deleting a CRD
    # deletes every object of it first (the apiserver's cleanup finalizer), and the worker's
    # earlier tests may have left thousands: on a loaded machine that took over 120 s. The
    # waits stay under pytest-timeout's 600 s for the whole test.
    res = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    try:
        for name in fleetapi.CRD_NAMES:
            res.delete(name=name, _request_timeout=60)
        wait_for("calibrator.dev CRDs deleted", lambda: not _crds(dyn), 240, interval=0.5)
        yield
    finally:
        # A deletion still under way must end before the CRDs can be created again (the test
        # itself may already have reinstalled them: then nothing is terminating).
        wait_for(
            "no calibrator.dev CRD terminating",
            lambda: not any(c["metadata"].get("deletionTimestamp") for c in _crds(dyn).values()),
            240,
            interval=0.5,
        )
        plane.up(timeout=60)  # healthy plane: re-installs our CRDs and returns


def test_backend_fails_clearly_without_crds_and_up_reinstalls_them(
    plane: LocalPlane, mgmt: client.ApiClient, dyn: DynamicClient, without_crds: None
) -> None:
    backend = KubeFleetBackend(mgmt, NS)
    with pytest.raises(NotFoundError) as info:
        asyncio.run(backend.inventory())
    message = str(info.value)
    assert "does not serve FleetWorkload (calibrator.dev/v1alpha1)" in message
    assert "calibrator env up" in message
    with pytest.raises(NotFoundError, match="does not serve FleetWorkload"):
        asyncio.run(
            backend.write_placement(
                [PlacementDecisionInfo(f"{NS}/web", (ClusterReplicasInfo("a", 1),))], "x"
            )
        )
    before = {c.name: c.pid for c in plane.status().components}
    plane.up(timeout=60)
    assert {c.name: c.pid for c in plane.status().components} == before
    crds = _crds(dyn)
    assert sorted(crds) == sorted(fleetapi.CRD_NAMES)
    assert all(_condition(c, "Established") == "True" for c in crds.values())
    assert asyncio.run(backend.inventory()).snapshot.workloads == ()


def test_placement_writes_are_compare_and_swap_on_the_real_apiserver(
    dyn: DynamicClient, mgmt: client.ApiClient, namespace: str
) -> None:
    """Two placements computed from one read: the second is refused (409), not written.

    Pins the API server behaviour the per-workload serialisation rests on: a server-side apply
    of the status carrying ``metadata.resourceVersion`` is conditional (docs/decisions.md).
    """
    web = _set(_set(VALID, "metadata.name", "web-cas"), "spec.placement.clusters", ["a"])
    apply_all(dyn, [web])
    backend = KubeFleetBackend(mgmt, namespace)
    key = f"{namespace}/web-cas"
    # The versions KubeFleetBackend's inventory hands to the placement (same LIST).
    read = fleetapi.workload_versions(fleetapi.list_fleet_workloads(dyn, NS))[key]

    def decision(cluster: str, reason: str) -> PlacementDecisionInfo:
        return PlacementDecisionInfo(
            key, (ClusterReplicasInfo(cluster, 1),), reason=reason, resource_version=read
        )

    first = asyncio.run(backend.write_placement([decision("b", "b: after step 1/1")], "b"))
    assert first.written == (key,) and first.conflicts == ()
    stale = asyncio.run(backend.write_placement([decision("a", "a: after step 1/1")], "a"))
    assert stale.written == () and stale.conflicts == (key,)
    fw = fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD).get(name="web-cas", namespace=NS)
    assert fleetapi.stored_clusters(fw.to_dict()) == (("b", 1),)
    pd = fleetapi.resource(dyn, fleetapi.PLACEMENT_DECISION).get(name="web-cas", namespace=NS)
    assert [r["clusterName"] for r in pd.to_dict()["status"]["decisions"]] == ["b"]
    # The conditional apply itself, below the backend's early version check: a 409.
    body = fleetapi.fleet_workload_status(
        fw.to_dict(), fleetapi.PlacementDecision(key, (("a", 1),), "stale"), datetime.now(UTC)
    )
    body["metadata"]["resourceVersion"] = read
    with pytest.raises(Exception) as refused:
        fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD).status.server_side_apply(
            body=body, name="web-cas", namespace=NS, field_manager="fleet-calibrator"
        )
    assert getattr(refused.value, "status", None) == 409
    # Unchanged decisions write nothing (the resourceVersion stays).
    before = fw.to_dict()["metadata"]["resourceVersion"]
    fresh = fleetapi.workload_versions(fleetapi.list_fleet_workloads(dyn, NS))[key]
    same = PlacementDecisionInfo(key, (ClusterReplicasInfo("b", 1),), resource_version=fresh)
    assert asyncio.run(backend.write_placement([same], "b")).written == ()
    fw = fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD).get(name="web-cas", namespace=NS)
    assert fw.to_dict()["metadata"]["resourceVersion"] == before


def test_plan_blobs_round_trip_through_immutable_config_maps(
    mgmt: client.ApiClient, namespace: str
) -> None:
    data = json.dumps({"clusters": [f"c{i:05d}" for i in range(100_000)]}).encode()
    digest = hashlib.sha256(data).hexdigest()
    backend = KubeFleetBackend(mgmt, namespace)
    asyncio.run(backend.put_blob(digest, data))
    asyncio.run(backend.put_blob(digest, data))  # idempotent on immutable objects
    assert asyncio.run(backend.get_blob(digest)) == data
    with pytest.raises(NotFoundError):
        asyncio.run(backend.get_blob("0" * 64))
    asyncio.run(backend.delete_blob(digest))  # every chunk, chunk 0 first
    core = client.CoreV1Api(mgmt)
    names = [
        str(m.metadata and m.metadata.name)
        for m in core.list_namespaced_config_map(namespace).items
    ]
    assert not [n for n in names if digest in n], names
    asyncio.run(backend.delete_blob(digest))  # gone already: fine
