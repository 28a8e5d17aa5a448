"""The worker's least-privilege access on a test management plane, as an operator grants it.

deploy/rbac gives the worker's ServiceAccount its ClusterRoles; the per-namespace bindings (the
kubeconfig Secrets of a fleet namespace, the plan store's ConfigMaps) are what an operator adds.
The integration tests' ``worker_identity`` fixture and benchmarks/bench_faults.py use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from orchestrator.kube.client import api_client

REPO = Path(__file__).resolve().parents[1]
WORKER_SA = ("calibrator-system", "fleet-calibrator")
KUBECONFIG_READER = "fleet-calibrator-kubeconfig-reader"
PLAN_STORE = "fleet-calibrator-plan-store"


@dataclass(frozen=True)
class WorkerIdentity:
    """The worker's least-privilege ServiceAccount (deploy/rbac) as a token kubeconfig."""

    kubeconfig: Path
    user: str
    token: str

    def client(self) -> client.ApiClient:
        """An API client that authenticates as the worker."""
        return api_client(self.kubeconfig)


def grant_kubeconfig_reader(mgmt: client.ApiClient, namespace: str) -> None:
    """Bind the kubeconfig-secret reader in one fleet namespace (what an operator does)."""
    _bind(mgmt, namespace, "fleet-calibrator-kubeconfigs", KUBECONFIG_READER)


def grant_plan_store(mgmt: client.ApiClient, namespace: str) -> None:
    """Bind the plan store (ConfigMaps) in the namespace a worker keeps its plans in."""
    _bind(mgmt, namespace, "fleet-calibrator-plans", PLAN_STORE)


def _bind(mgmt: client.ApiClient, namespace: str, name: str, cluster_role: str) -> None:
    sa_namespace, sa_name = WORKER_SA
    body = client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        role_ref=client.V1RoleRef(
            api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=cluster_role
        ),
        subjects=[
            client.RbacV1Subject(kind="ServiceAccount", name=sa_name, namespace=sa_namespace)
        ],
    )
    client.RbacAuthorizationV1Api(mgmt).create_namespaced_role_binding(namespace, body)
