"""Malformed CAPI and calibrator.dev objects on the real local plane: refused, or skipped by name.

Each malformed object is applied to the real kube-apiserver with the real CRDs and CAPI
webhooks. Either the server refuses it (then that refusal is the answer: the fleet can never
hold it), or the live inventory - the CLI's and the worker's, one code path - leaves out that
one cluster with its reason and reads the rest of the fleet. Nothing is written by the reads.
Every cluster is created with ``spec.paused: true``: CAPI never provisions it, so the test needs
no machines and takes seconds. docs/reliability/bad-input.md records which objects were refused.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.kube import capi
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.client import FIELD_MANAGER, apply_all
from orchestrator.kube.inventory import read_fleet
from orchestrator.kube.templates import cluster_objects
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import wait_for

pytestmark = pytest.mark.integration

NS = "calibrator-bad"
DELETE_TIMEOUT = 300
Objects = list[dict[str, Any]]


def _paused(name: str, version: str = "v1.33.0") -> Objects:
    objects = cluster_objects(name, NS, version, topology=False)
    for obj in objects:
        if obj["kind"] == "Cluster":
            obj["spec"]["paused"] = True
    return objects


def _edit(name: str, kind: str, change: Callable[[dict[str, Any]], None]) -> Objects:
    objects = _paused(name)
    for obj in objects:
        if obj["kind"] == kind:
            change(obj)
    return objects


def _annotate(obj: dict[str, Any]) -> None:
    obj["metadata"].setdefault("annotations", {})["calibrator.dev/taints"] = "[{not json"


def _spec(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = obj
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = obj
        for part in parents:
            node = node[part]
        node.pop(last, None)

    return change


# id -> the objects of one cluster with one malformed object among them.
CASES: dict[str, Objects] = {
    "bad-taints-json": _edit("bad-taints-json", "Cluster", _annotate),
    "bad-kcp-version": _edit(
        "bad-kcp-version", "KubeadmControlPlane", _spec("spec.version", "v1.33.banana")
    ),
    "bad-kcp-no-version": _edit("bad-kcp-no-version", "KubeadmControlPlane", _drop("spec.version")),
    "bad-md-version": _edit(
        "bad-md-version", "MachineDeployment", _spec("spec.template.spec.version", "one.two")
    ),
    "bad-md-no-version": _edit(
        "bad-md-no-version", "MachineDeployment", _drop("spec.template.spec.version")
    ),
    "bad-kcp-replicas": _edit(
        "bad-kcp-replicas", "KubeadmControlPlane", _spec("spec.replicas", -1)
    ),
    "bad-zone-label": _edit(
        "bad-zone-label",
        "Cluster",
        _spec("metadata.labels", {"topology.kubernetes.io/zone": "Not_A_Zone!"}),
    ),
}
GOOD = "bad-control"  # the one valid cluster of the namespace


def _fleet_workload(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"apis": ["apps/v1/Deployment"], "replicas": 1, "placement": {}, **spec},
    }


# id -> a FleetWorkload the snapshot rules refuse (the CRD pattern may refuse it first).
WORKLOADS: dict[str, dict[str, Any]] = {
    "bad-apis": _fleet_workload("bad-apis", {"apis": ["not-an-api"]}),
    "bad-cluster-ref": _fleet_workload(
        "bad-cluster-ref", {"placement": {"clusterAffinity": {"clusterNames": ["typo"]}}}
    ),
}

runner = CliRunner()


def _apply(dyn: DynamicClient, objects: Objects) -> str | None:
    """None when every object was stored; else the server's refusal (status and message)."""
    try:
        apply_all(dyn, copy.deepcopy(objects))
    except DynamicApiError as err:
        assert 400 <= err.status < 500, err  # a refusal, not a broken server
        try:
            body = json.loads(err.body or "{}")
        except ValueError:
            body = {"message": str(err.body)}
        return f"{err.status} {body.get('reason', '')}: {body.get('message', '')}"[:300]
    return None


def _versions(dyn: DynamicClient) -> dict[tuple[str, str], list[tuple[str, str, str]]]:
    """Per object, the writes our field manager made (a read must add none).

    Not the resourceVersions: CAPI's controllers keep writing status and conditions of these
    objects (paused or not), so those move whatever the calibrator does.
    """
    out = {}
    for kind in (capi.CLUSTER, capi.KUBEADM_CONTROL_PLANE, capi.MACHINE_DEPLOYMENT):
        for obj in dyn.resources.get(api_version=kind[0], kind=kind[1]).get(namespace=NS).items:
            entries = obj.to_dict()["metadata"].get("managedFields") or []
            out[(kind[1], obj.metadata.name)] = [
                (str(m.get("operation")), str(m.get("subresource", "")), str(m.get("time")))
                for m in entries
                if m.get("manager") == FIELD_MANAGER
            ]
    return out


def _fleet_workloads(dyn: DynamicClient) -> Any:
    return dyn.resources.get(api_version="calibrator.dev/v1alpha1", kind="FleetWorkload")


@pytest.fixture(scope="module")
def refused(dyn: DynamicClient, plane: LocalPlane) -> Iterator[dict[str, str]]:
    """Apply every case; yields the refusals by case id. Deletes everything afterwards."""
    apply_all(dyn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    apply_all(dyn, _paused(GOOD))
    out: dict[str, str] = {}
    for case, objects in CASES.items():
        refusal = _apply(dyn, objects)
        if refusal is not None:
            out[case] = refusal
    for case, workload in WORKLOADS.items():
        refusal = _apply(dyn, [workload])
        if refusal is not None:
            out[f"FleetWorkload {case}"] = refusal
    print(f"\n[bad objects] refused by the API server: {json.dumps(out, indent=1)}")
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    try:
        yield out
    finally:
        for obj in _fleet_workloads(dyn).get(namespace=NS).items:
            _fleet_workloads(dyn).delete(name=obj.metadata.name, namespace=NS)
        for obj in clusters.get(namespace=NS).items:  # a paused cluster is deleted unpaused
            clusters.patch(
                body={"spec": {"paused": False}},
                name=obj.metadata.name,
                namespace=NS,
                content_type="application/merge-patch+json",
            )
            clusters.delete(name=obj.metadata.name, namespace=NS)
        wait_for(
            "clusters deleted",
            lambda: not clusters.get(namespace=NS).to_dict()["items"],
            DELETE_TIMEOUT,
        )


def test_malformed_objects_are_refused_or_their_cluster_is_skipped_with_the_reason(
    refused: dict[str, str], dyn: DynamicClient, plane: LocalPlane
) -> None:
    stored = [case for case in CASES if case not in refused]
    before = _versions(dyn)
    for case in WORKLOADS:
        if f"FleetWorkload {case}" in refused:
            continue
        # Stored: the whole read fails on it, named, in one line (planning without a workload
        # could upgrade a cluster under it); fixed (deleted here), the fleet reads again.
        result = runner.invoke(
            app, ["drift", "--kubeconfig", str(plane.kubeconfig), "-n", NS, "--no-probe"]
        )
        assert result.exit_code == 2, result.stderr
        assert result.stderr.startswith(f"error: FleetWorkload {NS}/{case}: "), result.stderr
        assert len(result.stderr.splitlines()) == 1
        print(f"[bad objects] FleetWorkload {case} stored; the read says: {result.stderr.strip()}")
        _fleet_workloads(dyn).delete(name=case, namespace=NS)
    read = read_fleet(dyn, NS)
    # A refused object never existed; what its case did store is valid (a Cluster whose
    # MachineDeployment was refused is a cluster without workers) and reads as such.
    listed = read.snapshot.cluster_names()
    assert GOOD in listed and set(listed) - {GOOD} <= set(refused), (listed, sorted(refused))
    for case in stored:
        assert case in read.skipped or case in read.pending, (case, read.skipped, read.pending)
    print(f"[bad objects] skipped by the inventory: {json.dumps(dict(read.skipped), indent=1)}")
    # The CLI names every left-out cluster on stderr and answers for the rest (exit 1: partial).
    result = runner.invoke(
        app, ["drift", "--kubeconfig", str(plane.kubeconfig), "-n", NS, "--no-probe", "-o", "json"]
    )
    assert result.exit_code == 1, result.stderr
    assert tuple(c["name"] for c in json.loads(result.stdout)["clusters"]) == listed
    for name in read.skipped:
        assert name in result.stderr
    assert "Traceback" not in result.stderr
    # The worker's inventory is the same read, with the same reasons.
    backend = KubeFleetBackend.from_kubeconfig(plane.kubeconfig, namespace=NS)
    inventory = asyncio.run(backend.inventory())
    assert inventory.snapshot.cluster_names() == listed
    assert dict(inventory.skipped) == dict(read.skipped)
    assert _versions(dyn) == before  # nothing was written
    assert "bad-taints-json" in read.skipped  # annotations are free text: the server stores it
