"""KubeFleetBackend against an in-memory stand-in for the dynamic client (no API server).

The integration test runs it against real CAPI; these tests pin the object shapes it reads and the
patches it writes: step annotation and resourceVersion in the same merge patch, taint contract,
FleetWorkloads read into the snapshot and PlacementDecisions written, 404 -> NotFoundError, and
"a topology pool follows topology.version".
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from orchestrator.domain.taints import UPGRADING_TAINT_KEY, Taint
from orchestrator.kube import capi, workload
from tests.orchestrator.kube.fake_dyn import NS, FakeDyn
from workflows.backend import BackendError, NotFoundError
from workflows.kube_backend import KubeFleetBackend
from workflows.model import ClusterRef, ClusterReplicasInfo, PlacementDecisionInfo


def _fleet(topology: bool, missing: tuple[str, ...] = ()) -> FakeDyn:
    dyn = FakeDyn(missing)
    dyn.add(
        "ClusterClass",
        {"metadata": {"name": "cc"}, "spec": {"kubernetesVersions": ["v1.33.0", "v1.34.0"]}},
    )
    spec: dict[str, Any] = {"controlPlaneRef": {"name": "c1-cp"}}
    if topology:
        spec["topology"] = {"classRef": {"name": "cc"}, "version": "v1.33.0"}
    dyn.add("Cluster", {"metadata": {"name": "c1", "labels": {"env": "t"}}, "spec": spec})
    label = {capi.CLUSTER_NAME_LABEL: "c1"}
    dyn.add(
        "KubeadmControlPlane",
        {
            "metadata": {"name": "c1-cp", "generation": 1, "labels": label},
            "spec": {"version": "v1.33.0", "replicas": 1},
            "status": {
                "observedGeneration": 1,
                "version": "v1.33.0",
                "replicas": 1,
                "upToDateReplicas": 1,
                "conditions": [{"type": "Available", "status": "True"}],
            },
        },
    )
    dyn.add(
        "MachineDeployment",
        {
            "metadata": {"name": "c1-md-0", "generation": 1, "labels": label},
            "spec": {
                "clusterName": "c1",
                "replicas": 1,
                "template": {"spec": {"version": "v1.33.0"}},
            },
            "status": {
                "observedGeneration": 1,
                "replicas": 1,
                "upToDateReplicas": 1,
                "availableReplicas": 1,
            },
        },
    )
    for name, extra in (("cp-m", {"cluster.x-k8s.io/control-plane": ""}), ("md-m", {})):
        labels = {**label, **extra}
        if not extra:
            labels["cluster.x-k8s.io/deployment-name"] = "c1-md-0"
        dyn.add(
            "Machine",
            {
                "metadata": {"name": name, "labels": labels},
                "spec": {"version": "v1.33.0"},
                "status": {"nodeRef": {"name": name}},
            },
        )
    dyn.add(
        "FleetWorkload",
        {
            "metadata": {"name": "web", "uid": "u-web", "generation": 3},
            "spec": {
                "apis": ["apps/v1/Deployment"],
                "placement": {"clusterAffinity": {"matchLabels": {"env": "t"}}, "clusters": ["c1"]},
            },
        },
    )
    return dyn


@pytest.fixture(autouse=True)
def _nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    monkeypatch.setattr(workload, "workload_client", lambda *a: object())
    monkeypatch.setattr(workload, "nodes", lambda api: {"cp-m": ready, "md-m": ready})


REF = ClusterRef("c1", NS)


def test_inventory_reads_lists_into_a_snapshot() -> None:
    backend = KubeFleetBackend(None, NS, dyn=_fleet(topology=True))
    inv = asyncio.run(backend.inventory())
    (cluster,) = inv.snapshot.clusters
    assert str(cluster.control_plane.version) == "v1.33.0"
    assert [md.name for md in cluster.machine_deployments] == ["c1-md-0"]
    assert [str(v) for v in inv.snapshot.available_versions] == ["v1.33.0", "v1.34.0"]
    assert inv.namespaces == {"c1": NS}
    assert [w.key for w in inv.snapshot.workloads] == [f"{NS}/web"]
    assert inv.snapshot.workloads[0].placement.clusters == ("c1",)
    with pytest.raises(NotFoundError):
        asyncio.run(backend.inventory(("nope",)))


def test_topology_control_plane_patch_and_pool_follow() -> None:
    dyn = _fleet(topology=True)
    backend = KubeFleetBackend(None, NS, dyn=dyn)
    obs = asyncio.run(backend.observe(REF))
    assert obs.control_plane.rolled_out and obs.pools[0].rolled_out and obs.reachable
    assert obs.control_plane.versions == ("v1.33.0",)
    asyncio.run(backend.set_control_plane_version(REF, "v1.34.0", "s1"))
    asyncio.run(backend.set_control_plane_version(REF, "v1.34.0", "s1"))  # retried: no write
    (patch,) = dyn.patches
    assert patch[0] == "Cluster"
    assert patch[2]["spec"] == {"topology": {"version": "v1.34.0"}}
    assert patch[2]["metadata"]["annotations"] == {"calibrator.dev/step": "s1"}
    assert patch[2]["metadata"]["resourceVersion"] == "1"
    obs = asyncio.run(backend.observe(REF))
    assert obs.control_plane.version == "v1.34.0" and not obs.control_plane.rolled_out
    assert obs.pools[0].version == "v1.34.0" and not obs.pools[0].rolled_out
    asyncio.run(backend.set_pool_version(REF, "c1-md-0", "v1.34.0", "s2"))
    assert len(dyn.patches) == 1  # CAPI rolls topology pools: nothing written
    assert backend.patches == {("c1", "controlPlane", "v1.34.0"): 1}


def test_plain_cluster_patches_kcp_and_md() -> None:
    dyn = _fleet(topology=False)
    backend = KubeFleetBackend(None, NS, dyn=dyn)
    asyncio.run(backend.set_control_plane_version(REF, "v1.34.0", "s1"))
    asyncio.run(backend.set_pool_version(REF, "c1-md-0", "v1.34.0", "s2"))
    assert [(k, n) for k, n, _ in dyn.patches] == [
        ("KubeadmControlPlane", "c1-cp"),
        ("MachineDeployment", "c1-md-0"),
    ]
    assert dyn.patches[1][2]["spec"] == {"template": {"spec": {"version": "v1.34.0"}}}
    obs = asyncio.run(backend.observe(REF))
    assert obs.control_plane.version == "v1.34.0" and not obs.control_plane.rolled_out
    assert obs.pools[0].version == "v1.34.0" and not obs.pools[0].rolled_out
    with pytest.raises(NotFoundError):
        asyncio.run(backend.set_pool_version(REF, "missing", "v1.34.0", "s3"))
    with pytest.raises(NotFoundError):
        asyncio.run(backend.observe(ClusterRef("missing", NS)))


def test_taint_contract_and_placement_writes() -> None:
    dyn = _fleet(topology=True)
    backend = KubeFleetBackend(None, NS, dyn=dyn)
    taint = Taint(UPGRADING_TAINT_KEY, "NoSchedule", "cal-1", "2026-01-01T00:00:00Z")
    assert asyncio.run(backend.add_taint(REF, taint))
    assert not asyncio.run(backend.add_taint(REF, taint))
    meta = dyn.objects["Cluster"][(NS, "c1")]["metadata"]
    assert meta["labels"]["calibrator.dev/schedulable"] == "false"
    assert json.loads(meta["annotations"]["calibrator.dev/taints"])[0]["value"] == "cal-1"
    obs = asyncio.run(backend.observe(REF))
    assert [t.key for t in obs.taints] == [UPGRADING_TAINT_KEY]
    assert asyncio.run(backend.remove_taint(REF, UPGRADING_TAINT_KEY, "NoSchedule"))
    assert not asyncio.run(backend.remove_taint(REF, UPGRADING_TAINT_KEY, "NoSchedule"))
    assert meta["labels"]["calibrator.dev/schedulable"] == "true"
    assert "calibrator.dev/taints" not in meta["annotations"]
    decision = PlacementDecisionInfo(f"{NS}/web", (ClusterReplicasInfo("c1", 1),), reason="x")
    asyncio.run(backend.write_placement([decision], "c1: after step 1/2"))
    inv = asyncio.run(backend.inventory())
    assert inv.snapshot.workloads[0].placement.clusters == ("c1",)
    pd = dyn.objects["PlacementDecision"][(NS, "web")]
    assert pd["status"]["decisions"] == [{"clusterName": "c1", "replicas": "1", "reason": "x"}]
    assert pd["metadata"]["ownerReferences"][0]["uid"] == "u-web"
    fw = dyn.objects["FleetWorkload"][(NS, "web")]
    assert fw["status"]["clusters"] == [{"name": "c1", "replicas": 1}]
    assert fw["status"]["observedGeneration"] == 3
    assert backend.placement_writes == [(f"{NS}/web", "c1: after step 1/2")]
    with pytest.raises(NotFoundError, match=f"no FleetWorkload {NS}/gone"):
        asyncio.run(
            backend.write_placement(
                [PlacementDecisionInfo(f"{NS}/gone", (ClusterReplicasInfo("c1", 1),))], "r"
            )
        )


def test_current_placement_comes_from_the_last_decision_and_drops_unknown_clusters() -> None:
    dyn = _fleet(topology=True)
    fw = dyn.objects["FleetWorkload"][(NS, "web")]
    fw["status"] = {"clusters": [{"name": "c1", "replicas": 1}, {"name": "deleted", "replicas": 1}]}
    fw["spec"]["placement"]["clusters"] = ["gone-too"]
    inv = asyncio.run(KubeFleetBackend(None, NS, dyn=dyn).inventory())
    assert inv.snapshot.workloads[0].placement.clusters == ("c1",)


def test_invalid_fleet_workload_is_named_in_the_error() -> None:
    dyn = _fleet(topology=True)
    fw = dyn.objects["FleetWorkload"][(NS, "web")]
    fw["spec"]["placement"]["clusterAffinity"]["clusterNames"] = ["typo"]
    with pytest.raises(BackendError, match=rf"^FleetWorkload {NS}/web: spec\.placement\."):
        asyncio.run(KubeFleetBackend(None, NS, dyn=dyn).inventory())
    fw["spec"]["apis"] = ["not-an-api"]
    with pytest.raises(BackendError, match=rf"^FleetWorkload {NS}/web: spec\.apis\[0\]"):
        asyncio.run(KubeFleetBackend(None, NS, dyn=dyn).inventory())


def test_missing_crds_fail_with_one_clear_error() -> None:
    dyn = _fleet(topology=True, missing=("FleetWorkload", "PlacementDecision"))
    backend = KubeFleetBackend(None, NS, dyn=dyn)
    with pytest.raises(
        NotFoundError, match=r"does not serve FleetWorkload \(calibrator\.dev/v1alpha1\)"
    ):
        asyncio.run(backend.inventory())
    decision = PlacementDecisionInfo(f"{NS}/web", (ClusterReplicasInfo("c1", 1),))
    with pytest.raises(NotFoundError, match=r"install the calibrator\.dev CRDs"):
        asyncio.run(backend.write_placement([decision], "r"))
