"""The running local management plane, shared by every integration test of the session.

It is started for real (etcd, kube-apiserver, the four CAPI managers from tools/build.sh) and never
skipped: if it cannot start, every integration test errors with the component's log lines. A TTL
watchdog stops it even if pytest is killed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from orchestrator.kube.client import api_client, dynamic
from orchestrator.localplane.plane import LocalPlane
from orchestrator.localplane.processes import alive

PLANE_TTL_SECONDS = 5400


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlane]:
    state = Path(tmp_path_factory.mktemp("localplane"))
    local = LocalPlane(state)
    local.up(
        timeout=300,
        ttl_seconds=PLANE_TTL_SECONDS,
        progress=lambda m: print(f"[localplane] {m}", flush=True),
    )
    yield local
    pids = [c.pid for c in local.status().components if c.pid]
    local.down(purge=True)
    assert not [p for p in pids if alive(p)], "down left processes running"


@pytest.fixture(scope="session")
def mgmt(plane: LocalPlane) -> client.ApiClient:
    return api_client(plane.kubeconfig)


@pytest.fixture(scope="session")
def dyn(mgmt: client.ApiClient) -> DynamicClient:
    return dynamic(mgmt)


REPO = Path(__file__).resolve().parents[2]
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
        return api_client(self.kubeconfig)


@pytest.fixture(scope="session")
def worker_identity(
    plane: LocalPlane, mgmt: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> WorkerIdentity:
    """Apply deploy/rbac with the real kubectl and mint a token for its ServiceAccount.

    The token comes from the TokenRequest API and authenticates as the ServiceAccount, so the
    integration calibrations prove that the shipped role is enough, and nothing more is needed.
    """
    proc = subprocess.run(
        ["kubectl", "--kubeconfig", str(plane.kubeconfig), "apply", "--server-side",
         "--field-manager=calibrator-tests", "-k", str(REPO / "deploy" / "rbac")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    namespace, name = WORKER_SA
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3 * 3600)
    )
    issued = client.CoreV1Api(mgmt).create_namespaced_service_account_token(
        name, namespace, request
    )
    assert issued.status is not None and issued.status.token, "TokenRequest returned no token"
    token = issued.status.token
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "worker", "user": {"token": token}}],
        "contexts": [{"name": "worker", "context": {"cluster": "calibrator-local", "user": "worker"}}],
        "current-context": "worker",
    }  # fmt: skip
    path = Path(tmp_path_factory.mktemp("worker")) / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return WorkerIdentity(path, f"system:serviceaccount:{namespace}:{name}", token)


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
