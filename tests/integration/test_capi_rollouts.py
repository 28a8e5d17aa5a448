"""Real CAPI rollouts on the local plane: clusters from our ClusterClass reach Available, and a
one-minor upgrade replaces every machine, for a managed topology and for a plain KCP + MD cluster.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from orchestrator.kube import capi
from orchestrator.kube.client import apply_all
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from testkit.capi_waits import (
    fully_at_version,
    get,
    kube_proxy_image,
    machines,
    patch,
    wait_for,
)

pytestmark = pytest.mark.integration

NS = "calibrator-it"
TOPOLOGY = {"it-a": "v1.32.0", "it-b": "v1.33.0", "it-c": "v1.34.0"}
PLAIN = ("it-kcp", "v1.33.0")
CREATE_TIMEOUT = 300
UPGRADE_TIMEOUT = 420


@dataclass(frozen=True)
class Created:
    """What each cluster looked like once Available at its created version, before any test of
    this module upgraded it (tests run in random order; the upgrades change it-b and it-kcp)."""

    versions: dict[str, str]
    nodes: dict[str, int]
    kube_proxy: dict[str, str]
    it_a: dict[str, Any]
    seconds: float


@pytest.fixture(scope="module")
def fleet(dyn: DynamicClient, mgmt: client.ApiClient) -> Iterator[Created]:
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    apply_all(dyn, cluster_class_objects(NS))
    for name, version in TOPOLOGY.items():
        apply_all(
            dyn,
            cluster_objects(name, NS, version, labels={"env": "it", "calibrator.dev/test": name}),
        )
    apply_all(dyn, cluster_objects(PLAIN[0], NS, PLAIN[1], topology=False, labels={"env": "it"}))
    versions = {**TOPOLOGY, PLAIN[0]: PLAIN[1]}
    began = time.monotonic()
    nodes: dict[str, int] = {}
    proxies: dict[str, str] = {}
    for name, version in versions.items():
        summary = wait_for(
            f"{name} Available at {version}",
            functools.partial(fully_at_version, dyn, mgmt, NS, name, version, 2),
            CREATE_TIMEOUT,
        )
        nodes[name] = len(summary["nodes"])
        proxies[name] = kube_proxy_image(mgmt, NS, name)
    created = Created(
        versions, nodes, proxies, get(dyn, capi.CLUSTER, NS, "it-a"), time.monotonic() - began
    )
    yield created
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    for name in versions:
        clusters.delete(name=name, namespace=NS, _request_timeout=60)
    wait_for(
        "clusters deleted",
        lambda: not clusters.get(namespace=NS, _request_timeout=60).to_dict()["items"],
        240,
    )


def test_clusters_from_the_clusterclass_become_available(fleet: Created) -> None:
    for name, version in fleet.versions.items():
        assert fleet.nodes[name] == 2
        assert fleet.kube_proxy[name].endswith(f":{version}")
    cluster = fleet.it_a
    assert cluster["spec"]["topology"]["version"] == "v1.32.0"
    assert cluster["metadata"]["labels"]["env"] == "it"
    print(f"4 clusters Available after {fleet.seconds:.0f}s")


def _names(ms: list[dict[str, Any]]) -> frozenset[str]:
    return frozenset(m["metadata"]["name"] for m in ms)


def test_managed_topology_upgrade_by_one_minor_replaces_every_machine(
    fleet: Created, dyn: DynamicClient, mgmt: client.ApiClient
) -> None:
    name, target = "it-b", "v1.34.0"
    wait_for(
        "it-b ready",
        lambda: fully_at_version(dyn, mgmt, NS, name, fleet.versions[name], 2),
        CREATE_TIMEOUT,
    )
    before = _names(machines(dyn, NS, name))
    began = time.monotonic()
    patch(dyn, capi.CLUSTER, NS, name, {"spec": {"topology": {"version": target}}})
    summary = wait_for(
        f"{name} upgraded to {target}",
        lambda: fully_at_version(dyn, mgmt, NS, name, target, 2, replaced=before),
        UPGRADE_TIMEOUT,
    )
    assert not before & set(summary["machines"])
    assert kube_proxy_image(mgmt, NS, name).endswith(f":{target}")
    print(f"topology upgrade {fleet.versions[name]} -> {target}: {time.monotonic() - began:.0f}s")


def test_plain_kcp_and_machinedeployment_upgrade_by_one_minor(
    fleet: Created, dyn: DynamicClient, mgmt: client.ApiClient
) -> None:
    name, target = PLAIN[0], "v1.34.0"
    wait_for(
        "it-kcp ready", lambda: fully_at_version(dyn, mgmt, NS, name, PLAIN[1], 2), CREATE_TIMEOUT
    )
    before = _names(machines(dyn, NS, name))
    began = time.monotonic()
    patch(
        dyn, capi.KUBEADM_CONTROL_PLANE, NS, f"{name}-control-plane", {"spec": {"version": target}}
    )
    wait_for(
        "control plane rolled out",
        lambda: (
            capi.control_plane_rolled_out(
                get(dyn, capi.KUBEADM_CONTROL_PLANE, NS, f"{name}-control-plane")
            )
            and get(dyn, capi.KUBEADM_CONTROL_PLANE, NS, f"{name}-control-plane")["status"].get(
                "version"
            )
            == target
        ),
        UPGRADE_TIMEOUT,
    )
    patch(
        dyn,
        capi.MACHINE_DEPLOYMENT,
        NS,
        f"{name}-md-0",
        {"spec": {"template": {"spec": {"version": target}}}},
    )
    summary = wait_for(
        f"{name} upgraded to {target}",
        lambda: fully_at_version(dyn, mgmt, NS, name, target, 2, replaced=before),
        UPGRADE_TIMEOUT,
    )

    def settled() -> dict[str, Any] | None:
        md = get(dyn, capi.MACHINE_DEPLOYMENT, NS, f"{name}-md-0")
        return md if capi.machine_deployment_rolled_out(md) else None

    md = wait_for("MachineDeployment status settled", settled, 60)
    assert md["spec"]["template"]["spec"]["version"] == target
    assert not before & set(summary["machines"])
    print(f"KCP+MD upgrade {PLAIN[1]} -> {target}: {time.monotonic() - began:.0f}s")


def test_docker_clusterclass_is_accepted_by_real_capi(dyn: DynamicClient) -> None:
    """The docker-backend class can't run here (no Docker engine), but CAPI validates it fully:
    webhooks accept the class and a Cluster using it (server-side dry run), and the ClusterClass
    controller resolves every template reference and variable."""
    ns = "calibrator-docker-it"
    dyn.resources.get(api_version="v1", kind="Namespace").create(
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    apply_all(dyn, cluster_class_objects(ns, backend="docker"))
    classes = dyn.resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="ClusterClass")

    def reconciled() -> bool:
        cc = classes.get(name="calibrator-docker", namespace=ns).to_dict()
        return capi.is_true(cc, "VariablesReady") and capi.is_true(cc, "RefVersionsUpToDate")

    wait_for("docker ClusterClass reconciled", reconciled, 120)
    cluster = next(
        o for o in cluster_objects("d1", ns, "v1.34.0", backend="docker") if o["kind"] == "Cluster"
    )
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    clusters.create(body=cluster, namespace=ns, query_params=[("dryRun", "All")])
