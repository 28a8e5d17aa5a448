"""The running local management plane, shared by every integration test of the session.

It is started for real (etcd, kube-apiserver, the four CAPI managers from tools/build.sh) and never
skipped: if it cannot start, every integration test errors with the component's log lines. A TTL
watchdog stops it even if pytest is killed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from orchestrator.kube.client import api_client, dynamic
from orchestrator.localplane.plane import LocalPlane
from orchestrator.localplane.processes import alive
from testkit.worker_rbac import REPO, WORKER_SA, WorkerIdentity

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
