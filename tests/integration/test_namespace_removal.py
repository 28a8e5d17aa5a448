"""``remove_namespace`` on the real plane: CAPI tears a cluster down, nothing is left behind.

The local plane runs no namespace controller, so ``calibrator demo`` removes an earlier run's
namespace itself. Here a namespace like a demo's (the ClusterClass, one cluster with Machines
being created, a FleetWorkload, a ConfigMap) is removed, and every namespaced kind is checked
empty afterwards: an object left in etcd would outlive its namespace unseen.
"""

from __future__ import annotations

import pytest
from kubernetes.dynamic import DynamicClient

from orchestrator.kube import capi
from orchestrator.kube.client import apply_all, list_pages
from orchestrator.kube.namespaces import collection_kinds, remove_namespace
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from testkit.capi_waits import wait_for

pytestmark = pytest.mark.integration

NS = "calibrator-removal-it"


def test_a_namespace_with_a_capi_cluster_is_removed_completely(dyn: DynamicClient) -> None:
    apply_all(dyn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    apply_all(dyn, cluster_class_objects(NS))
    apply_all(dyn, cluster_objects("rm-1", NS, "v1.34.0", labels={"env": "it"}))
    apply_all(
        dyn,
        [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": NS}},
            {
                "apiVersion": "calibrator.dev/v1alpha1",
                "kind": "FleetWorkload",
                "metadata": {"name": "web", "namespace": NS},
                "spec": {"apis": ["apps/v1/Deployment"], "replicas": 1},
            },
        ],
    )
    machines = dyn.resources.get(api_version=capi.MACHINE[0], kind=capi.MACHINE[1])
    # CAPI is mid-way through creating the cluster: Machines, bootstrap configs, secrets exist.
    wait_for("a Machine of rm-1", lambda: list_pages(machines, namespace=NS) or None, 180)

    assert remove_namespace(dyn, NS, timeout=240) == []

    spaces = dyn.resources.get(api_version="v1", kind="Namespace")
    assert NS not in {n["metadata"]["name"] for n in list_pages(spaces)}
    left = {
        f"{res.kind}/{o['metadata']['name']}"
        for res in collection_kinds(dyn.resources)
        for o in list_pages(res, namespace=NS)
    }
    assert left == set()
