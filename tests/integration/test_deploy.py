"""deploy/base (the worker's kustomize base) against the real kube-apiserver of the local plane.

A server-side dry run runs every object through the API server's own validation and admission
(schema, defaulting, the namespace and ServiceAccount existing), which a client-side render
cannot. It writes nothing: the session's real RBAC comes from ``worker_identity``, which applies
deploy/rbac for real and so also creates the namespace the Deployment lives in.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client

from orchestrator.cli.live import kubeconfig_path
from orchestrator.kube import client as kube_client
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.client import IN_CLUSTER, api_client
from orchestrator.localplane.plane import LocalPlane
from testkit.worker_rbac import WorkerIdentity

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "base"


def _kubectl(plane: LocalPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(plane.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_kustomize_base_passes_the_api_servers_dry_run(
    plane: LocalPlane, worker_identity: WorkerIdentity
) -> None:
    proc = _kubectl(plane, "apply", "--dry-run=server", "-k", str(DEPLOY), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)["items"]
    kinds = {(i["kind"], i["metadata"]["name"]) for i in items}
    assert ("Deployment", "fleet-calibrator-worker") in kinds
    assert ("Service", "fleet-calibrator-metrics") in kinds
    assert ("ServiceAccount", "fleet-calibrator") in kinds
    deployment = next(i for i in items if i["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    # The API server defaulted and accepted the probes against the named health port.
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"] == {
        "path": "/livez",
        "port": "health",
        "scheme": "HTTP",
    }
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["serviceAccountName"] == "fleet-calibrator"


def test_a_worker_in_a_pod_finds_the_api_server_as_its_service_account(
    plane: LocalPlane,
    worker_identity: WorkerIdentity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the Deployment's pod sees: the service environment and a mounted token, no kubeconfig.

    The token is a real TokenRequest token of deploy/rbac's ServiceAccount and the API server is
    the plane's, so this proves the in-cluster path end to end except for the kubelet's mount.
    """
    mount = tmp_path / "serviceaccount"
    mount.mkdir()
    (mount / "token").write_text(worker_identity.token)
    shutil.copy(plane.pki_dir / "ca.crt", mount / "ca.crt")
    (mount / "namespace").write_text("calibrator-system")
    server = urlsplit(
        yaml.safe_load(plane.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    )
    monkeypatch.setattr(kube_client, "SERVICE_ACCOUNT_DIR", mount)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(server.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config

    assert kubeconfig_path(None) == IN_CLUSTER
    review = client.AuthenticationV1Api(api_client(IN_CLUSTER)).create_self_subject_review(
        client.V1SelfSubjectReview()
    )
    assert review.status is not None and review.status.user_info is not None
    assert review.status.user_info.username == worker_identity.user
    KubeFleetBackend.from_kubeconfig(IN_CLUSTER).check_api()  # the worker's own start-up check
