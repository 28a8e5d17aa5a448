"""KubeFleetBackend against an in-memory stand-in for the dynamic client (no API server).

The integration test runs it against real CAPI; these tests pin the object shapes it reads and the
patches it writes: step annotation and resourceVersion in the same merge patch, taint contract,
FleetWorkloads read into the snapshot and PlacementDecisions written, 404 -> NotFoundError, and
"a topology pool follows topology.version".
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from orchestrator.domain.taints import UPGRADING_TAINT_KEY, Taint
from orchestrator.kube import capi, workload
from orchestrator.kube.backend import access, blobs, placement
from orchestrator.kube.backend.port import (
    BackendError,
    ClusterRef,
    ClusterReplicasInfo,
    InvalidObjectError,
    NotFoundError,
    PlacementDecisionInfo,
    PlacementWrite,
)
from orchestrator.kube.backend.versions import (
    BYPASS_MARKER,
    STEP_ANNOTATION,
    UNSAFE_VERSION_ANNOTATION,
)
from orchestrator.kube.capi import DEFER_ANNOTATION, HOLD_ANNOTATION, TOPOLOGY_MD_LABEL
from tests.orchestrator.kube import fake_dyn
from tests.orchestrator.kube.api_server import api_server
from tests.orchestrator.kube.backend.recording_backend import RecordingKubeBackend
from tests.orchestrator.kube.fake_dyn import NS, FakeDyn
from workflows import telemetry

REAL_NODES = workload.nodes  # before the autouse fixture replaces it


def one_cluster_fleet(topology: bool, missing: tuple[str, ...] = ()) -> FakeDyn:
    """Cluster c1 with its control plane and one MachineDeployment (topology-managed or not).

    Public because the access and fault tests of the backend start from the same fleet.
    """
    dyn = FakeDyn(missing)
    dyn.add(
        "ClusterClass",
        {"metadata": {"name": "cc"}, "spec": {"kubernetesVersions": ["v1.33.0", "v1.34.0"]}},
    )
    spec: dict[str, Any] = {"controlPlaneRef": {"name": "c1-cp"}}
    if topology:
        spec["topology"] = {
            "classRef": {"name": "cc"},
            "version": "v1.33.0",
            "workers": {"machineDeployments": [{"class": "worker", "name": "md-0"}]},
        }
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
    md_labels = {**label, TOPOLOGY_MD_LABEL: "md-0"} if topology else label
    dyn.add(
        "MachineDeployment",
        {
            "metadata": {"name": "c1-md-0", "generation": 1, "labels": md_labels},
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
    backend = RecordingKubeBackend(None, NS, dyn=one_cluster_fleet(topology=True))
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


def _md_topology(dyn: FakeDyn) -> dict[str, Any]:
    cluster = dyn.objects["Cluster"][(NS, "c1")]
    entry: dict[str, Any] = cluster["spec"]["topology"]["workers"]["machineDeployments"][0]
    return entry


def _defer(dyn: FakeDyn) -> str | None:
    annotations = (_md_topology(dyn).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(DEFER_ANNOTATION)
    return None if value is None else str(value)


def _capi_rolls_control_plane(dyn: FakeDyn, version: str) -> None:
    """What KCP does once CAPI propagated topology.version: spec, status and the Machine."""
    kcp = dyn.objects["KubeadmControlPlane"][(NS, "c1-cp")]
    kcp["spec"]["version"] = version
    kcp["status"]["version"] = version
    dyn.objects["Machine"][(NS, "cp-m")]["spec"]["version"] = version


def test_topology_control_plane_step_defers_workers_in_the_same_patch() -> None:
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    obs = asyncio.run(backend.observe(REF))
    assert obs.control_plane.rolled_out and obs.pools[0].rolled_out and obs.reachable
    assert obs.control_plane.versions == ("v1.33.0",)
    asyncio.run(backend.set_control_plane_version(REF, "v1.34.0", "s1"))
    asyncio.run(backend.set_control_plane_version(REF, "v1.34.0", "s1"))  # retried: no write
    (patch,) = dyn.patches
    assert patch[0] == "Cluster"
    assert patch[2]["spec"] == {
        "topology": {
            "version": "v1.34.0",
            "workers": {
                "machineDeployments": [
                    {
                        "class": "worker",
                        "name": "md-0",
                        "metadata": {"annotations": {DEFER_ANNOTATION: "calibrator.dev:s1"}},
                    }
                ]
            },
        }
    }
    # Pools were at the old topology version: CAPI's webhook accepts it, no bypass needed.
    assert patch[2]["metadata"]["annotations"] == {STEP_ANNOTATION: "s1"}
    assert patch[2]["metadata"]["resourceVersion"] == "1"

    # The deferred pool keeps its version and is not waited for by the control-plane step.
    obs = asyncio.run(backend.observe(REF))
    assert obs.control_plane.version == "v1.34.0" and not obs.control_plane.rolled_out
    assert obs.pools[0].version == "v1.33.0" and obs.pools[0].rolled_out
    assert "upgrade to v1.34.0 deferred" in obs.pools[0].message
    _capi_rolls_control_plane(dyn, "v1.34.0")
    obs = asyncio.run(backend.observe(REF))
    assert obs.control_plane.rolled_out, obs.control_plane.message
    assert obs.pools[0].version == "v1.33.0"
    inv = asyncio.run(backend.inventory())
    (cluster,) = inv.snapshot.clusters
    assert str(cluster.control_plane.version) == "v1.34.0"
    assert str(cluster.machine_deployments[0].version) == "v1.33.0"


def test_next_control_plane_step_passes_the_webhook_and_removes_the_bypass() -> None:
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    asyncio.run(backend.set_control_plane_version(REF, "v1.34.0", "s1"))
    _capi_rolls_control_plane(dyn, "v1.34.0")
    asyncio.run(backend.set_control_plane_version(REF, "v1.35.0", "s2"))
    assert len(dyn.patches) == 3
    _, _, bump = dyn.patches[1]
    assert bump["spec"]["topology"]["version"] == "v1.35.0"
    # The pool lags the old topology version: the same write carries CAPI's webhook bypass...
    assert bump["metadata"]["annotations"] == {
        STEP_ANNOTATION: "s2",
        UNSAFE_VERSION_ANNOTATION: "true",
        BYPASS_MARKER: "s2",
    }
    # ...which the next write removes again, without touching the version.
    _, _, cleanup = dyn.patches[2]
    assert cleanup == {
        "metadata": {
            "resourceVersion": cleanup["metadata"]["resourceVersion"],
            "annotations": {UNSAFE_VERSION_ANNOTATION: None, BYPASS_MARKER: None},
        }
    }
    meta = dyn.objects["Cluster"][(NS, "c1")]["metadata"]
    assert UNSAFE_VERSION_ANNOTATION not in meta["annotations"]
    assert _defer(dyn) == "calibrator.dev:s1"  # still deferred, by the first step
    asyncio.run(backend.set_control_plane_version(REF, "v1.35.0", "s2"))  # retried
    assert len(dyn.patches) == 3
    assert backend.patches == {
        ("c1", "controlPlane", "v1.34.0"): 1,
        ("c1", "controlPlane", "v1.35.0"): 1,
    }


def test_worker_step_releases_the_pool_once() -> None:
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    asyncio.run(backend.set_control_plane_version(REF, "v1.34.0", "s1"))
    _capi_rolls_control_plane(dyn, "v1.34.0")
    with pytest.raises(BackendError, match=r"follows topology\.version"):
        asyncio.run(backend.set_pool_version(REF, "c1-md-0", "v1.35.0", "s2"))
    asyncio.run(backend.set_pool_version(REF, "c1-md-0", "v1.34.0", "s2"))
    asyncio.run(backend.set_pool_version(REF, "c1-md-0", "v1.34.0", "s2"))  # retried: no write
    assert len(dyn.patches) == 2
    _, _, release = dyn.patches[1]
    assert release["metadata"]["annotations"] == {STEP_ANNOTATION: "s2"}
    assert "version" not in release["spec"]["topology"]
    assert _defer(dyn) is None
    obs = asyncio.run(backend.observe(REF))
    assert obs.pools[0].version == "v1.34.0" and not obs.pools[0].rolled_out
    assert backend.patches == {
        ("c1", "controlPlane", "v1.34.0"): 1,
        ("c1", "c1-md-0", "v1.34.0"): 1,
    }
    assert [p.kind for p in backend.patch_log] == ["Cluster", "Cluster"]


def test_pools_at_the_new_version_are_not_deferred() -> None:
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    cluster = dyn.objects["Cluster"][(NS, "c1")]
    md = dyn.objects["MachineDeployment"][(NS, "c1-md-0")]
    body = backend.topology_version_patch(cluster, {"md-0": md}, "v1.33.0", "s1")
    assert body["spec"]["topology"]["workers"]["machineDeployments"] == [
        {"class": "worker", "name": "md-0"}
    ]
    body = backend.topology_version_patch(cluster, {}, "v1.34.0", "s1")  # MD not created yet
    assert "metadata" not in body["spec"]["topology"]["workers"]["machineDeployments"][0]


def test_an_operators_hold_is_kept_and_named() -> None:
    dyn = one_cluster_fleet(topology=True)
    _md_topology(dyn)["metadata"] = {"annotations": {HOLD_ANNOTATION: ""}}
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    asyncio.run(backend.set_control_plane_version(REF, "v1.34.0", "s1"))
    assert _md_topology(dyn)["metadata"]["annotations"] == {
        HOLD_ANNOTATION: "",
        DEFER_ANNOTATION: "calibrator.dev:s1",
    }
    with pytest.raises(BackendError, match=re.escape(f"held by {HOLD_ANNOTATION}")):
        asyncio.run(backend.set_pool_version(REF, "c1-md-0", "v1.34.0", "s2"))
    assert len(dyn.patches) == 1  # nothing released while the operator's hold is there
    # An operator's defer-upgrade (not ours) is never removed either.
    dyn2 = one_cluster_fleet(topology=True)
    _md_topology(dyn2)["metadata"] = {"annotations": {DEFER_ANNOTATION: "ops"}}
    backend2 = RecordingKubeBackend(None, NS, dyn=dyn2)
    asyncio.run(backend2.set_control_plane_version(REF, "v1.34.0", "s1"))
    assert _defer(dyn2) == "ops"
    with pytest.raises(BackendError, match=re.escape(f"held by {DEFER_ANNOTATION}")):
        asyncio.run(backend2.set_pool_version(REF, "c1-md-0", "v1.34.0", "s2"))


def test_a_bypass_left_by_a_lost_write_is_removed_by_the_next_write() -> None:
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    meta = dyn.objects["Cluster"][(NS, "c1")]["metadata"]
    meta["annotations"] = {
        STEP_ANNOTATION: "s1",
        UNSAFE_VERSION_ANNOTATION: "true",
        BYPASS_MARKER: "s1",
    }
    asyncio.run(backend.set_control_plane_version(REF, "v1.33.0", "s1"))  # retry of that step
    assert meta["annotations"] == {STEP_ANNOTATION: "s1"}
    meta["annotations"] |= {UNSAFE_VERSION_ANNOTATION: "true", BYPASS_MARKER: "s1"}
    meta.setdefault("labels", {})["calibrator.dev/schedulable"] = "true"
    assert not asyncio.run(backend.remove_taint(REF, UPGRADING_TAINT_KEY, "NoSchedule"))
    assert meta["annotations"] == {STEP_ANNOTATION: "s1"}
    # A bypass an operator set (no marker) is theirs: left alone.
    meta["annotations"][UNSAFE_VERSION_ANNOTATION] = "true"
    asyncio.run(backend.set_control_plane_version(REF, "v1.33.0", "s1"))
    assert UNSAFE_VERSION_ANNOTATION in meta["annotations"]
    assert backend.patches == {}


def test_plain_cluster_patches_kcp_and_md() -> None:
    dyn = one_cluster_fleet(topology=False)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
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
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
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


def test_current_placement_comes_from_the_last_decision_with_its_counts() -> None:
    dyn = one_cluster_fleet(topology=True)
    fw = dyn.objects["FleetWorkload"][(NS, "web")]
    fw["status"] = {"clusters": [{"name": "c1", "replicas": 3}, {"name": "deleted", "replicas": 1}]}
    fw["spec"]["placement"]["clusters"] = ["gone-too"]
    inv = asyncio.run(RecordingKubeBackend(None, NS, dyn=dyn).inventory())
    assert inv.snapshot.workloads[0].placement.clusters == ("c1",)
    # The counts of the last decision are the live current replicas (stable re-placement).
    assert inv.snapshot.workloads[0].placement.current_replicas == (3,)


def test_invalid_fleet_workload_is_named_in_the_error() -> None:
    dyn = one_cluster_fleet(topology=True)
    fw = dyn.objects["FleetWorkload"][(NS, "web")]
    fw["spec"]["placement"]["clusterAffinity"]["clusterNames"] = ["typo"]
    with pytest.raises(InvalidObjectError, match=rf"^FleetWorkload {NS}/web: spec\.placement\."):
        asyncio.run(RecordingKubeBackend(None, NS, dyn=dyn).inventory())
    fw["spec"]["apis"] = ["not-an-api"]
    with pytest.raises(InvalidObjectError, match=rf"^FleetWorkload {NS}/web: spec\.apis\[0\]"):
        asyncio.run(RecordingKubeBackend(None, NS, dyn=dyn).inventory())


def test_missing_crds_fail_with_one_clear_error() -> None:
    dyn = one_cluster_fleet(topology=True, missing=("FleetWorkload", "PlacementDecision"))
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    with pytest.raises(
        NotFoundError, match=r"does not serve FleetWorkload \(calibrator\.dev/v1alpha1\)"
    ):
        asyncio.run(backend.inventory())
    decision = PlacementDecisionInfo(f"{NS}/web", (ClusterReplicasInfo("c1", 1),))
    with pytest.raises(NotFoundError, match=r"install the calibrator\.dev CRDs"):
        asyncio.run(backend.write_placement([decision], "r"))


def test_inventory_versions_are_the_placement_preconditions() -> None:
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    inv = asyncio.run(backend.inventory())
    read = inv.workload_versions[f"{NS}/web"]
    assert read == dyn.objects["FleetWorkload"][(NS, "web")]["metadata"]["resourceVersion"]
    mine = PlacementDecisionInfo(
        f"{NS}/web", (ClusterReplicasInfo("c1", 1),), reason="a", resource_version=read
    )
    theirs = PlacementDecisionInfo(
        f"{NS}/web", (ClusterReplicasInfo("c1", 2),), reason="b", resource_version=read
    )
    assert asyncio.run(backend.write_placement([theirs], "b")).written == (f"{NS}/web",)
    outcome = asyncio.run(backend.write_placement([mine], "a"))
    assert outcome.written == () and outcome.conflicts == (f"{NS}/web",)
    assert backend.placement_writes == [(f"{NS}/web", "b")]


def _workloads(dyn: FakeDyn, count: int) -> list[str]:
    """``count`` more FleetWorkloads like ``web`` (names only placed on c1); their keys."""
    for i in range(count):
        dyn.add(
            "FleetWorkload",
            {
                "metadata": {"name": f"w{i}", "uid": f"u-w{i}", "generation": 1},
                "spec": {
                    "apis": ["apps/v1/Deployment"],
                    "placement": {"clusterAffinity": {"matchLabels": {"env": "t"}}},
                },
            },
        )
    return [f"{NS}/w{i}" for i in range(count)]


def test_placement_writes_run_a_bounded_number_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 9: a first placement of 1,000 workloads written one after the other outlasted the
    # activity. Writers: 3 here. The first three commits wait for each other at a barrier, so
    # the test passes only if three are in flight together; a fourth never is.
    monkeypatch.setattr(placement, "PLACEMENT_WRITERS", 3)
    dyn = one_cluster_fleet(topology=True)
    keys = _workloads(dyn, 7)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    read = asyncio.run(backend.inventory()).workload_versions
    together = threading.Barrier(3, timeout=30)
    lock = threading.Lock()
    flight = {"now": 0, "max": 0, "commits": 0}
    apply_status = fake_dyn.StatusResource.server_side_apply

    def commit(self: fake_dyn.StatusResource, body: dict[str, Any], **kw: Any) -> Any:
        if self.parent.kind != "FleetWorkload":
            return apply_status(self, body, **kw)
        with lock:
            flight["now"] += 1
            flight["max"] = max(flight["max"], flight["now"])
            flight["commits"] += 1
            first = flight["commits"] <= 3
        try:
            if first:
                together.wait()
            return apply_status(self, body, **kw)
        finally:
            with lock:
                flight["now"] -= 1

    monkeypatch.setattr(fake_dyn.StatusResource, "server_side_apply", commit)
    stale = keys[3]  # someone else changed it since the inventory read it
    decisions = [
        PlacementDecisionInfo(
            k,
            (ClusterReplicasInfo("c1", 2),),
            reason="r",
            resource_version="0" if k == stale else read[k],
        )
        for k in keys
    ]
    seen: list[tuple[int, int]] = []
    outcome = asyncio.run(
        backend.write_placement(decisions, "c1: first", lambda d, t: seen.append((d, t)))
    )
    assert flight["max"] == 3
    assert outcome.written == tuple(k for k in keys if k != stale)  # in the decisions' order
    assert outcome.conflicts == (stale,)
    assert seen == [(i, 7) for i in range(1, 8)]
    assert sorted(backend.placement_writes) == [(k, "c1: first") for k in keys if k != stale]
    for k in keys:
        pd = dyn.objects["PlacementDecision"].get((NS, k.split("/")[1]))
        rows = [{"clusterName": "c1", "replicas": "2", "reason": "r"}]
        assert (pd["status"]["decisions"] if pd else None) == (None if k == stale else rows)
    # Written again unchanged: nothing to write, every decision still reported as handled.
    seen.clear()
    again = [replace(d, resource_version="") for d in decisions if d.workload != stale]
    assert asyncio.run(backend.write_placement(again, "c1", lambda d, t: seen.append((d, t)))) == (
        PlacementWrite()
    )
    assert seen == [(i, 6) for i in range(1, 7)]


def test_a_failed_placement_write_fails_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement, "PLACEMENT_WRITERS", 2)
    dyn = one_cluster_fleet(topology=True)
    keys = _workloads(dyn, 4)
    apply_status = fake_dyn.StatusResource.server_side_apply

    def commit(self: fake_dyn.StatusResource, body: dict[str, Any], **kw: Any) -> Any:
        if body["metadata"]["name"] == "w2":
            raise fake_dyn.ApiError(500)  # past the client's own retries
        return apply_status(self, body, **kw)

    monkeypatch.setattr(fake_dyn.StatusResource, "server_side_apply", commit)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    decisions = [PlacementDecisionInfo(k, (ClusterReplicasInfo("c1", 1),)) for k in keys]
    with pytest.raises(fake_dyn.ApiError):
        asyncio.run(backend.write_placement(decisions, "r"))
    assert backend.placement_writes == []  # reported only for a whole call


def test_blobs_are_content_addressed_config_map_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blobs, "BLOB_CHUNK_BYTES", 1000)
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    data = os.urandom(2500)  # incompressible: three chunks
    digest = hashlib.sha256(data).hexdigest()
    asyncio.run(backend.put_blob(digest, data))
    asyncio.run(backend.put_blob(digest, data))  # idempotent
    maps = dyn.objects["ConfigMap"]
    assert sorted(name for _, name in maps) == [
        f"calibrator-blob-{digest}",
        f"calibrator-blob-{digest}-1",
        f"calibrator-blob-{digest}-2",
    ]
    assert all(m["immutable"] for m in maps.values())
    assert asyncio.run(backend.get_blob(digest)) == data
    with pytest.raises(ValueError, match="does not match"):
        asyncio.run(backend.put_blob("0" * 64, data))
    with pytest.raises(NotFoundError):
        asyncio.run(backend.get_blob("f" * 64))
    maps[(NS, f"calibrator-blob-{digest}-1")]["binaryData"]["data"] = ""
    with pytest.raises(Exception, match=r"CRC|not match|Compressed|truncated|end-of-stream"):
        asyncio.run(backend.get_blob(digest))


@pytest.mark.parametrize(
    ("namespace", "plan_namespace", "stored_in"),
    [
        (NS, None, NS),  # one fleet namespace: the plans beside it, as before
        (None, None, "default"),  # every namespace, nothing said: default, as before
        (None, "calibrator-system", "calibrator-system"),  # the worker in its pod
        (NS, "calibrator-system", "calibrator-system"),
    ],
)
def test_plans_are_stored_in_the_plan_namespace(
    namespace: str | None, plan_namespace: str | None, stored_in: str
) -> None:
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, namespace, plan_namespace=plan_namespace, dyn=dyn)
    data = b"a plan"
    digest = hashlib.sha256(data).hexdigest()
    asyncio.run(backend.put_blob(digest, data))
    assert list(dyn.objects["ConfigMap"]) == [(stored_in, f"calibrator-blob-{digest}")]
    assert asyncio.run(backend.get_blob(digest)) == data
    asyncio.run(backend.delete_blob(digest))
    assert not dyn.objects["ConfigMap"]


def test_a_deleted_blob_leaves_no_chunk_and_chunk_zero_goes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(blobs, "BLOB_CHUNK_BYTES", 1000)
    dyn = one_cluster_fleet(topology=True)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    keep, drop = os.urandom(1500), os.urandom(2500)
    for data in (keep, drop):
        asyncio.run(backend.put_blob(hashlib.sha256(data).hexdigest(), data))
    digest = hashlib.sha256(drop).hexdigest()
    asyncio.run(backend.delete_blob(digest))
    deleted = [name for verb, kind, name, _ in dyn.writes if verb == "delete"]
    # A reader that finds chunk 0 finds every chunk: it goes first.
    assert deleted == [f"calibrator-blob-{digest}", f"calibrator-blob-{digest}-1",
                       f"calibrator-blob-{digest}-2"]  # fmt: skip
    with pytest.raises(NotFoundError):
        asyncio.run(backend.get_blob(digest))
    assert asyncio.run(backend.get_blob(hashlib.sha256(keep).hexdigest())) == keep
    asyncio.run(backend.delete_blob(digest))  # gone already: fine
    asyncio.run(backend.delete_blob("f" * 64))  # never stored: fine


@pytest.mark.parametrize(
    ("labels", "spec", "status", "expected"),
    [
        ({}, {}, {}, (None, None, ())),
        (  # v1beta2: failure domains are a list; the infrastructure kind names the provider
            {"topology.kubernetes.io/region": "eu-west-1"},
            {
                "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "AWSCluster",
                    "name": "c1",
                }
            },
            {
                "failureDomains": [
                    {"name": "eu-west-1b", "controlPlane": True},
                    {"name": "eu-west-1a"},
                ]
            },
            ("aws", "eu-west-1", ("eu-west-1a", "eu-west-1b")),
        ),
        (  # v1beta1: failure domains are a map; labels win over what is derived
            {
                "calibrator.dev/provider": "on-prem",
                "topology.kubernetes.io/zone": "rack-1",
                "region": "lab",
            },
            {"infrastructureRef": {"kind": "DockerCluster", "name": "c1"}},
            {"failureDomains": {"fd1": {"controlPlane": True}, "fd2": {}}},
            ("on-prem", "lab", ("rack-1",)),
        ),
    ],
)
def test_inventory_derives_the_cluster_fields(
    labels: dict[str, str],
    spec: dict[str, Any],
    status: dict[str, Any],
    expected: tuple[Any, ...],
) -> None:
    dyn = one_cluster_fleet(topology=False)
    obj = dyn.objects["Cluster"][(NS, "c1")]
    obj["metadata"]["labels"] = {**obj["metadata"]["labels"], **labels}
    obj["spec"].update(spec)
    obj["status"] = status
    inv = asyncio.run(RecordingKubeBackend(None, NS, dyn=dyn).inventory())
    (cluster,) = inv.snapshot.clusters
    assert (cluster.provider, cluster.region, cluster.zones) == expected


def test_inventory_skips_a_cluster_with_a_malformed_failure_domain() -> None:
    dyn = one_cluster_fleet(topology=False)
    dyn.objects["Cluster"][(NS, "c1")]["status"] = {"failureDomains": [{"name": "zone a"}]}
    inv = asyncio.run(RecordingKubeBackend(None, NS, dyn=dyn).inventory())
    assert inv.snapshot.clusters == ()
    assert "failureDomains[0]: invalid value" in inv.skipped["c1"]


def test_with_a_tracer_each_call_is_a_span_over_its_http_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    exporter = InMemorySpanExporter()
    tracing = telemetry.start_tracing(telemetry.TracingSettings(), exporters=[exporter])
    assert tracing is not None
    with api_server() as mgmt, api_server() as workload_api:
        monkeypatch.setattr(workload, "workload_client", lambda *a: workload_api)
        monkeypatch.setattr(workload, "nodes", REAL_NODES)  # a real GET /api/v1/nodes
        backend = RecordingKubeBackend(
            mgmt, NS, dyn=one_cluster_fleet(topology=True), tracer=tracing.tracer
        )
        with tracing.tracer.start_as_current_span("RunActivity:observe") as activity:
            obs = asyncio.run(backend.observe(REF))
            with pytest.raises(NotFoundError):
                asyncio.run(backend.observe(ClusterRef("nope", NS)))
    tracing.shutdown()
    assert obs.reachable  # the workload cluster answered (with no Nodes)
    spans = exporter.get_finished_spans()
    observed = [s for s in spans if s.name == "kube.observe"]
    assert len(observed) == 2
    assert all(s.parent and s.parent.span_id == activity.context.span_id for s in observed)
    ok, missing = observed
    assert ok.attributes == {"calibrator.cluster": "c1", "k8s.namespace.name": NS}
    assert missing.status.status_code == StatusCode.ERROR
    (request,) = [s for s in spans if s.name == "GET /api/v1/nodes"]
    assert request.parent is not None and request.parent.span_id == ok.context.span_id
    assert request.kind == SpanKind.CLIENT
    assert request.attributes is not None
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["url.template"] == "/api/v1/nodes"
    assert request.attributes["server.address"] == "127.0.0.1"


def _kcp_replicas(dyn: FakeDyn) -> None:
    dyn.objects["KubeadmControlPlane"][(NS, "c1-cp")]["spec"]["replicas"] = "three"


def _kcp_version_gone(dyn: FakeDyn) -> None:
    del dyn.objects["KubeadmControlPlane"][(NS, "c1-cp")]["spec"]["version"]


def _md_version(dyn: FakeDyn) -> None:
    dyn.objects["MachineDeployment"][(NS, "c1-md-0")]["spec"]["template"]["spec"]["version"] = (
        "v1.33.banana"
    )


def _taints_json(dyn: FakeDyn) -> None:
    meta = dyn.objects["Cluster"][(NS, "c1")]["metadata"]
    meta["annotations"] = {"calibrator.dev/taints": "[{not json"}


def _md_replicas(dyn: FakeDyn) -> None:
    dyn.objects["MachineDeployment"][(NS, "c1-md-0")]["spec"]["replicas"] = None


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (_kcp_replicas, "the control plane: replicas is not an integer: 'three'"),
        (_kcp_version_gone, "the control plane declares no Kubernetes version"),
        (_md_version, "MachineDeployment c1-md-0: invalid Kubernetes version 'v1.33.banana'"),
        (_taints_json, "taints annotation is not JSON"),
        (_md_replicas, "MachineDeployment c1-md-0: replicas is not an integer: None"),
    ],
    ids=["kcp-replicas", "kcp-no-version", "md-version", "taints-json", "md-replicas"],
)
def test_a_malformed_object_fails_observe_with_one_clear_reason_and_no_write(
    break_it: Any, message: str
) -> None:
    """Edited into nonsense mid-run: one InvalidObjectError naming the cluster (the activity
    does not retry it; the step waits for a decision with this reason). Nothing is written."""
    dyn = one_cluster_fleet(topology=False)
    break_it(dyn)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    with pytest.raises(InvalidObjectError) as err:
        asyncio.run(backend.observe(REF))
    text = str(err.value)
    assert text.startswith(f"cluster {NS}/c1: malformed object: ") and message in text, text
    assert "\n" not in text and len(text) <= 200
    assert dyn.patches == [] and dyn.writes == []


def test_a_malformed_cluster_is_left_out_of_the_inventory_with_its_reason() -> None:
    dyn = one_cluster_fleet(topology=False)
    _md_version(dyn)
    inv = asyncio.run(RecordingKubeBackend(None, NS, dyn=dyn).inventory())
    assert inv.snapshot.clusters == ()
    assert "invalid Kubernetes version 'v1.33.banana'" in inv.skipped["c1"]


def test_short_calls_do_not_queue_behind_fleet_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 9 (100 clusters, 1,000 FleetWorkloads): twenty re-placements' LISTs of the fleet
    held every thread of the event loop's default pool, and each activity's observe and patches
    waited behind them. The backend's calls run on its own pools: with the default pool cut to
    one thread and the fleet reads stuck in their LIST of FleetWorkloads, observe still
    answers; at most ``FLEET_READERS`` fleet reads run at once, the others wait their turn."""
    monkeypatch.setattr(access, "FLEET_READERS", 2)
    dyn = one_cluster_fleet(topology=True)
    arrived = threading.Semaphore(0)
    release = threading.Event()
    list_page = fake_dyn.Resource.get

    def get(self: fake_dyn.Resource, name: str | None = None, **kw: Any) -> Any:
        if self.kind == "FleetWorkload" and name is None:
            arrived.release()
            assert release.wait(60), "never released"
        return list_page(self, name, **kw)

    monkeypatch.setattr(fake_dyn.Resource, "get", get)
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    waiter = ThreadPoolExecutor(1)  # the test's own thread, to wait for the readers

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1))
        reads = [asyncio.ensure_future(backend.inventory()) for _ in range(3)]
        try:
            for _ in range(2):  # two reads hold their threads, inside their LIST
                assert await loop.run_in_executor(waiter, arrived.acquire, True, 60)
            obs = await asyncio.wait_for(backend.observe(REF), 60)
            assert str(obs.control_plane.version) == "v1.33.0"
            assert not any(r.done() for r in reads)
            assert not arrived.acquire(blocking=False)  # the third waits for a fleet reader
        finally:
            release.set()
        invs = await asyncio.gather(*reads)
        assert all([w.key for w in inv.snapshot.workloads] == [f"{NS}/web"] for inv in invs)

    try:
        asyncio.run(run())
    finally:
        release.set()
        waiter.shutdown()
