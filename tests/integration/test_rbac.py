"""deploy/rbac on the real kube-apiserver: the worker's ServiceAccount can do its job and nothing
else. The calibration tests run their workers with this identity (so the role is proven
sufficient there); this module proves it is not more than that: every write outside the role,
and every Secret read outside a bound namespace, is refused with 403.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from orchestrator.kube import capi
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.backend.port import NotAllowedError, NotFoundError
from orchestrator.kube.client import dynamic
from orchestrator.kube.fleetapi import FLEET_WORKLOAD, PLACEMENT_DECISION
from testkit.worker_rbac import (
    WORKER_SA,
    WorkerIdentity,
    grant_kubeconfig_reader,
    grant_plan_store,
)

pytestmark = pytest.mark.integration

# What a worker without --namespace LISTs across every namespace (deploy/rbac/clusterrole.yaml).
ALL_NAMESPACES_LISTS = (
    capi.CLUSTER,
    capi.CLUSTER_CLASS,
    capi.KUBEADM_CONTROL_PLANE,
    capi.MACHINE_DEPLOYMENT,
    capi.MACHINE,
    FLEET_WORKLOAD,
    PLACEMENT_DECISION,
)

BOUND, UNBOUND = "calibrator-rbac-bound", "calibrator-rbac-unbound"


@pytest.fixture(scope="module")
def namespaces(mgmt: client.ApiClient) -> None:
    core = client.CoreV1Api(mgmt)
    for ns in (BOUND, UNBOUND):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    grant_kubeconfig_reader(mgmt, BOUND)
    grant_plan_store(mgmt, BOUND)
    secret = client.V1Secret(
        metadata=client.V1ObjectMeta(name="x-kubeconfig"), string_data={"value": "not used"}
    )
    for ns in (BOUND, UNBOUND):
        core.create_namespaced_secret(ns, secret)


def test_the_token_authenticates_as_the_service_account(worker_identity: WorkerIdentity) -> None:
    review = client.AuthenticationV1Api(worker_identity.client()).create_self_subject_review(
        client.V1SelfSubjectReview()
    )
    assert review.status is not None and review.status.user_info is not None
    assert review.status.user_info.username == worker_identity.user


def _refused(call: Callable[[], Any]) -> None:
    with pytest.raises(ApiException) as info:
        call()
    assert info.value.status == 403, info.value


def test_writes_outside_the_role_are_refused(
    worker_identity: WorkerIdentity, namespaces: None
) -> None:
    api = worker_identity.client()
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    custom = client.CustomObjectsApi(api)
    cluster_group, cluster_version = capi.CLUSTER[0].split("/")
    refused: dict[str, Callable[[], Any]] = {
        "create a Secret": lambda: core.create_namespaced_secret(
            BOUND, client.V1Secret(metadata=client.V1ObjectMeta(name="stolen"))
        ),
        "list Secrets where get is granted": lambda: core.list_namespaced_secret(BOUND),
        "get a Secret where nothing is granted": lambda: core.read_namespaced_secret(
            "x-kubeconfig", UNBOUND
        ),
        "label a Namespace": lambda: core.patch_namespace(
            BOUND, {"metadata": {"labels": {"owned": "yes"}}}
        ),
        "delete a CAPI Cluster": lambda: custom.delete_namespaced_custom_object(
            cluster_group, cluster_version, BOUND, "clusters", "any"
        ),
        "create a CAPI Cluster": lambda: custom.create_namespaced_custom_object(
            cluster_group,
            cluster_version,
            BOUND,
            "clusters",
            {"apiVersion": capi.CLUSTER[0], "kind": "Cluster", "metadata": {"name": "rogue"}},
        ),
        "create a ConfigMap where the plan store is not bound": lambda: (
            core.create_namespaced_config_map(
                UNBOUND, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="calibrator-blob-x"))
            )
        ),
        # Deleting a stored plan by name is granted (its calibration does it when it ends), but
        # only where the plan store is bound.
        "delete a ConfigMap where the plan store is not bound": lambda: (
            core.delete_namespaced_config_map("any", UNBOUND)
        ),
        "list stored plans": lambda: core.list_namespaced_config_map(BOUND),
        "delete a PlacementDecision": lambda: custom.delete_namespaced_custom_object(
            "calibrator.dev", "v1alpha1", BOUND, "placementdecisions", "any"
        ),
        "edit a FleetWorkload's spec": lambda: custom.patch_namespaced_custom_object(
            "calibrator.dev", "v1alpha1", BOUND, "fleetworkloads", "any", {"spec": {}}
        ),
        "grant itself cluster-admin": lambda: rbac.create_cluster_role_binding(
            client.V1ClusterRoleBinding(
                metadata=client.V1ObjectMeta(name="escalate"),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="cluster-admin"
                ),
                subjects=[
                    client.RbacV1Subject(
                        kind="User",
                        name=worker_identity.user,
                        api_group="rbac.authorization.k8s.io",
                    )
                ],
            )
        ),
        "delete the CRDs": lambda: client.ApiextensionsV1Api(api).delete_custom_resource_definition(
            "fleetworkloads.calibrator.dev"
        ),
    }
    for what, call in refused.items():
        try:
            _refused(call)
        except AssertionError as err:  # name the case: one message, not a bare traceback
            raise AssertionError(f"not refused: {what}: {err}") from None


def test_the_role_is_enough_for_an_inventory_and_a_kubeconfig_read(
    worker_identity: WorkerIdentity, namespaces: None
) -> None:
    api = worker_identity.client()
    inventory = asyncio.run(KubeFleetBackend(api, namespace=BOUND).inventory())
    assert inventory.snapshot.clusters == ()
    secret = client.CoreV1Api(api).read_namespaced_secret("x-kubeconfig", BOUND)
    assert secret.metadata is not None and secret.metadata.name == "x-kubeconfig"
    # The plan store: immutable ConfigMaps created by server-side apply, read back by digest.
    data = b'{"plan": "stored out of history"}'
    digest = hashlib.sha256(data).hexdigest()
    asyncio.run(KubeFleetBackend(api, namespace=BOUND).put_blob(digest, data))
    assert asyncio.run(KubeFleetBackend(api, namespace=BOUND).get_blob(digest)) == data
    # ... and deleted by its owner when the calibration ends.
    asyncio.run(KubeFleetBackend(api, namespace=BOUND).delete_blob(digest))
    with pytest.raises(NotFoundError):
        asyncio.run(KubeFleetBackend(api, namespace=BOUND).get_blob(digest))
    # The dynamic client's discovery works under the role too (what the backend builds on).
    assert dynamic(api).resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])


def test_the_deployments_all_namespaces_worker_is_allowed_what_it_does(
    worker_identity: WorkerIdentity, namespaces: None
) -> None:
    """The Deployment's mode (no --namespace): cluster-wide LISTs, plans in the pod's namespace.

    deploy/rbac binds the plan store in calibrator-system, the ServiceAccount's namespace, which
    is where such a worker in a pod keeps its plans; in `default` it may store nothing.
    """
    api = worker_identity.client()
    home = WORKER_SA[0]
    backend = KubeFleetBackend(api, plan_namespace=home)
    # Every kind the inventory and the placement writer LIST, across all namespaces. Listed, not
    # parsed: the plane is shared with other test files, whose namespaces may hold objects that
    # are invalid on purpose (what is asserted here is the role, not their content).
    dyn = dynamic(api)
    for api_version, kind in ALL_NAMESPACES_LISTS:
        resource = dyn.resources.get(api_version=api_version, kind=kind)
        resource.get(limit=1)  # a 403 here raises: the ClusterRole lacks a cluster-wide list
    data = b'{"plan": "kept in the worker\'s own namespace"}'
    digest = hashlib.sha256(data).hexdigest()
    asyncio.run(backend.put_blob(digest, data))
    stored = client.CoreV1Api(api).read_namespaced_config_map(f"calibrator-blob-{digest}", home)
    assert stored.metadata is not None and stored.metadata.namespace == home
    assert asyncio.run(backend.get_blob(digest)) == data
    asyncio.run(backend.delete_blob(digest))
    # Where a worker outside a pod would put them (`default`) it may store nothing, and the
    # backend says so at once: the API server is ready (/readyz), so its 403 is final.
    with pytest.raises(NotAllowedError, match="forbidden"):
        asyncio.run(KubeFleetBackend(api, plan_namespace="default").put_blob(digest, data))
