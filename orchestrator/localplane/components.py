"""What the plane runs: the pinned binaries, and each component's command line, ports and env.

The plane (plane.py) decides when to start, wait for and stop its components; this module says
what each one is: etcd, kube-apiserver and the four CAPI managers, every one listening on
127.0.0.1 only, on ports kept across restarts so that a repaired plane keeps its endpoints.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.localplane.pki import KeyPair
from orchestrator.localplane.processes import PlaneError, free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "tools" / "build.sh"
CAPD_RESERVED = range(19000, 30001)  # CAPD's debug port and in-memory API server listeners


def resolve_bin_dir(
    progress: Callable[[str], None] = lambda _: None,
    build_set: str = "control-plane",
    env_var: str = "CALIBRATOR_BIN_DIR",
) -> Path:
    """``$<env_var>``, or build/reuse one set of pinned binaries with tools/build.sh."""
    env = os.environ.get(env_var)
    if env:
        return Path(env)
    if not BUILD_SCRIPT.exists():
        raise PlaneError(f"{BUILD_SCRIPT} not found; set {env_var} to the built binaries")
    progress(f"building or reusing pinned binaries (tools/build.sh --set {build_set})")
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--set", build_set],
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise PlaneError(
            f"tools/build.sh --set {build_set} failed with exit code {proc.returncode}"
        )
    return Path(proc.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Manager:
    """One CAPI manager process and the CRDs/webhooks it serves."""

    name: str
    binary: str
    component: str  # key in manifest.json crdDirsByComponent / webhookManifests
    provider_label: str
    contract_labels: bool
    feature_gates: str | None = "ClusterTopology=true"
    env: dict[str, str] = field(default_factory=dict)

    def webhook_port(self, ports: dict[str, int]) -> int:
        """The port its webhook server (admission and CRD conversion) listens on."""
        return ports[f"{self.name}-webhook"]


MANAGERS = (
    Manager("capi", "capi-manager", "core", "cluster-api", False),
    Manager(
        "kubeadm-bootstrap",
        "kubeadm-bootstrap-manager",
        "kubeadm-bootstrap",
        "bootstrap-kubeadm",
        True,
        None,
    ),
    Manager(
        "kubeadm-control-plane",
        "kubeadm-control-plane-manager",
        "kubeadm-control-plane",
        "control-plane-kubeadm",
        True,
    ),
    # POD_IP becomes the host of every in-memory workload API server endpoint.
    Manager(
        "capd", "capd-manager", "capd", "infrastructure-docker", True, env={"POD_IP": "127.0.0.1"}
    ),
)


def assign_ports(previous: dict[str, Any]) -> dict[str, int]:
    """A port per listener: the one recorded in ``previous`` state, else a fresh one.

    Fresh ports avoid CAPD's reserved range and each other.
    """
    names = ["etcd-client", "etcd-peer", "apiserver"]
    for m in MANAGERS:
        names += [f"{m.name}-webhook", f"{m.name}-health", f"{m.name}-diagnostics"]
    ports: dict[str, int] = {}
    old = previous.get("ports", {}) if isinstance(previous.get("ports"), dict) else {}
    for name in names:
        port = old.get(name)
        ports[name] = int(port) if isinstance(port, int) else _fresh_port(ports)
    return ports


def _fresh_port(taken: dict[str, int]) -> int:
    for _ in range(100):
        port = free_port()
        if port not in CAPD_RESERVED and port not in taken.values():
            return port
    raise PlaneError("no free port found on 127.0.0.1")


def etcd_argv(bin_dir: Path, data_dir: Path, ports: dict[str, int]) -> list[str]:
    """One-member etcd on 127.0.0.1, without fsync: the plane's data is disposable."""
    client = f"http://127.0.0.1:{ports['etcd-client']}"
    peer = f"http://127.0.0.1:{ports['etcd-peer']}"
    return [
        str(bin_dir / "etcd"),
        "--name",
        "calibrator",
        "--data-dir",
        str(data_dir),
        "--listen-client-urls",
        client,
        "--advertise-client-urls",
        client,
        "--listen-peer-urls",
        peer,
        "--initial-advertise-peer-urls",
        peer,
        "--initial-cluster",
        f"calibrator={peer}",
        "--unsafe-no-fsync=true",
        "--quota-backend-bytes",
        str(4 * 2**30),
        "--log-level",
        "warn",
    ]


def etcd_health_url(ports: dict[str, int]) -> str:
    """What ``wait_until`` and ``status`` ask of etcd."""
    return f"http://127.0.0.1:{ports['etcd-client']}/health"


def apiserver_url(ports: dict[str, int]) -> str:
    """The API server's base URL (the kubeconfig's server)."""
    return f"https://127.0.0.1:{ports['apiserver']}"


def apiserver_argv(
    bin_dir: Path,
    ports: dict[str, int],
    *,
    serving: KeyPair,
    ca: KeyPair,
    sa_key: Path,
    cert_dir: Path,
) -> list[str]:
    """kube-apiserver on 127.0.0.1 with our CA, RBAC and no ServiceAccount admission."""
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ports['etcd-client']}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports['apiserver']}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        f"--client-ca-file={ca.cert}",
        f"--service-account-issuer={apiserver_url(ports)}",
        f"--service-account-key-file={sa_key}",
        f"--service-account-signing-key-file={sa_key}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--authorization-mode=RBAC",
        "--allow-privileged=true",
        "--disable-admission-plugins=ServiceAccount",
        f"--cert-dir={cert_dir}",
        "--max-requests-inflight=800",
        "--max-mutating-requests-inflight=400",
        # A deprecated API that is off by default, served so that the observation of
        # deprecated-API use (kube/apiusage.py) can be tested on a real apiserver:
        # VolumeAttributesClass at storage.k8s.io/v1beta1, deprecated in 1.34 and removed in
        # 1.37 (the catalog's row). Nothing else of the plane uses it; the group's other v1beta1
        # kinds are gone.
        "--runtime-config=storage.k8s.io/v1beta1=true",
    ]


def manager_argv(
    manager: Manager, bin_dir: Path, ports: dict[str, int], kubeconfig: Path, webhook_dir: Path
) -> list[str]:
    """A CAPI manager against our API server, serving webhooks with our CA's certificate."""
    argv = [
        str(bin_dir / manager.binary),
        f"--kubeconfig={kubeconfig}",
        f"--webhook-cert-dir={webhook_dir}",
        f"--webhook-port={manager.webhook_port(ports)}",
        f"--health-addr=127.0.0.1:{ports[f'{manager.name}-health']}",
        f"--diagnostics-address=127.0.0.1:{ports[f'{manager.name}-diagnostics']}",
        "--insecure-diagnostics",
    ]
    if manager.feature_gates:
        argv.append(f"--feature-gates={manager.feature_gates}")
    return argv


def manager_health_url(manager: Manager, ports: dict[str, int]) -> str:
    """The manager's readiness endpoint."""
    return f"http://127.0.0.1:{ports[f'{manager.name}-health']}/readyz"


def manager_env(manager: Manager, docker_host: str | None) -> dict[str, str]:
    """What a manager gets on top of our environment.

    Its own variables, and for CAPD the Docker engine of its docker backend (``DOCKER_HOST``;
    never inherited from our shell).
    """
    env = dict(manager.env)
    if manager.name == "capd":
        env["DOCKER_HOST"] = docker_host or ""
    return env
