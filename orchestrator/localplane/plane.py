"""Bring the local management plane up, report on it, and take it down.

Order (each step waits with a timeout and fails with the component's last log lines):
PKI -> etcd -> kube-apiserver (+ admin kubeconfig) -> CRDs of core, CABPK, KCP and CAPD (contract
labels, conversion to the owning manager) and our own calibrator.dev CRDs -> the four managers -> webhook configurations pointed at
127.0.0.1 with our CA -> a dry-run Cluster through the webhooks.

``up`` is idempotent: when everything recorded in ``state.json`` is alive and healthy it returns at
once; when anything died it stops whatever is left (by pid) and starts the plane again on the same
ports and data, so a crash of any component is repaired by running ``up`` again.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.localplane import pki
from orchestrator.localplane.processes import (
    PlaneError,
    ProcessRecord,
    TLSClient,
    alive,
    free_port,
    healthy,
    load_records,
    save_records,
    start,
    stop,
    tail,
    wait_until,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "tools" / "build.sh"
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
OPENAPI_WAIT_SECONDS = 120.0  # one request's limit while the document is built
CAPD_RESERVED = range(19000, 30001)  # CAPD's debug port and in-memory API server listeners


def default_state_dir() -> Path:
    """``$CALIBRATOR_STATE_DIR`` or ``~/.local/state/fleet-calibrator/localplane``."""
    env = os.environ.get("CALIBRATOR_STATE_DIR")
    if env:
        return Path(env)
    return Path.home() / ".local" / "state" / "fleet-calibrator" / "localplane"


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


@dataclass
class ComponentStatus:
    """What ``status`` reports per component."""

    name: str
    pid: int | None
    running: bool
    healthy: bool
    endpoint: str
    log: str

    def to_json(self) -> dict[str, object]:
        """JSON form for ``calibrator env status -o json``."""
        return {
            "name": self.name,
            "pid": self.pid,
            "running": self.running,
            "healthy": self.healthy,
            "endpoint": self.endpoint,
            "log": self.log,
        }


@dataclass
class PlaneStatus:
    """The plane as a whole."""

    state_dir: Path
    kubeconfig: Path
    components: list[ComponentStatus]
    versions: dict[str, str]

    @property
    def healthy(self) -> bool:
        """Every component running and answering its health check."""
        return bool(self.components) and all(c.healthy for c in self.components)

    def to_json(self) -> dict[str, object]:
        """JSON form."""
        return {
            "stateDir": str(self.state_dir),
            "kubeconfig": str(self.kubeconfig),
            "healthy": self.healthy,
            "versions": self.versions,
            "components": [c.to_json() for c in self.components],
        }


class LocalPlane:
    """The management plane in one state directory."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.state_dir = (state_dir or default_state_dir()).resolve()
        self.state_file = self.state_dir / "state.json"
        self.kubeconfig = self.state_dir / "kubeconfig"
        self.pki_dir = self.state_dir / "pki"
        self.webhook_dir = self.state_dir / "webhook-certs"
        self.logs = self.state_dir / "logs"

    # ------------------------------------------------------------------ state
    def _load(self) -> tuple[list[ProcessRecord], dict[str, Any]]:
        return load_records(self.state_file)

    def _tls(self) -> TLSClient:
        return TLSClient(
            self.pki_dir / "ca.crt", self.pki_dir / "admin.crt", self.pki_dir / "admin.key"
        )

    def _ports(self, previous: dict[str, Any]) -> dict[str, int]:
        names = ["etcd-client", "etcd-peer", "apiserver"]
        for m in MANAGERS:
            names += [f"{m.name}-webhook", f"{m.name}-health", f"{m.name}-diagnostics"]
        ports: dict[str, int] = {}
        old = previous.get("ports", {}) if isinstance(previous.get("ports"), dict) else {}
        for name in names:
            port = old.get(name)
            ports[name] = int(port) if isinstance(port, int) else self._fresh_port(ports)
        return ports

    @staticmethod
    def _fresh_port(taken: dict[str, int]) -> int:
        for _ in range(100):
            port = free_port()
            if port not in CAPD_RESERVED and port not in taken.values():
                return port
        raise PlaneError("no free port found on 127.0.0.1")

    # ------------------------------------------------------------------ status
    def status(self) -> PlaneStatus:
        """Report each recorded component (never starts or stops anything)."""
        records, extra = self._load()
        tls = self._tls()
        comps = []
        for r in records:
            running = alive(r.pid)
            comps.append(
                ComponentStatus(
                    r.name,
                    r.pid,
                    running,
                    running and healthy(r.health_url, tls),
                    r.health_url,
                    r.log,
                )
            )
        versions = extra.get("versions", {})
        return PlaneStatus(
            self.state_dir, self.kubeconfig, comps, versions if isinstance(versions, dict) else {}
        )

    # ------------------------------------------------------------------ down
    def down(self, purge: bool = False, timeout: float = 20.0) -> list[str]:
        """Stop exactly what ``up`` recorded, newest first; ``purge`` also deletes the state dir."""
        records, extra = self._load()
        stopped = []
        for record in reversed(records):
            if alive(record.pid):
                stop(record, timeout)
                stopped.append(record.name)
        watchdog = extra.get("watchdogPid")
        if isinstance(watchdog, int) and watchdog != os.getpid() and alive(watchdog):
            stop(ProcessRecord("watchdog", watchdog, [], "", ""), timeout)
        if records:
            save_records(
                self.state_file, [], {k: v for k, v in extra.items() if k != "watchdogPid"}
            )
        if purge and self.state_dir.exists():
            shutil.rmtree(self.state_dir)
        return stopped

    # ------------------------------------------------------------------ up
    def up(
        self,
        *,
        timeout: float = 300.0,
        ttl_seconds: int | None = None,
        docker_host: str | None = None,
        progress: Callable[[str], None] = lambda _: None,
    ) -> PlaneStatus:
        """Start (or repair) the plane and wait until every component is healthy.

        ``docker_host`` (``unix://...``) gives CAPD a Docker engine for its docker backend
        (DockerCluster, DockerMachine); without it only the in-memory backend can work. A healthy
        plane started with another engine (or none) is restarted with this one.
        """
        current = self.status()
        _, recorded = self._load()
        same_engine = recorded.get("dockerHost") == docker_host
        if not same_engine and current.components:
            progress(f"restarting the plane for Docker engine {docker_host or '(none)'}")
            self.down()
            current = self.status()
        if current.healthy and len(current.components) == 2 + len(MANAGERS):
            self._install_api()  # a plane started by an older version may lack our CRDs
            progress("already running and healthy")
            return current
        if current.components:
            progress(
                "cleaning up a partial plane: "
                + ", ".join(c.name for c in current.components if c.running)
            )
            self.down()
        began = time.monotonic()
        deadline = began + timeout

        def left() -> float:
            return max(5.0, deadline - time.monotonic())

        if _listening(19000):
            raise PlaneError(
                "127.0.0.1:19000 is in use: CAPD's in-memory backend needs it (is another local plane "
                "running? `calibrator env down --state-dir ...` stops it)"
            )
        bin_dir = resolve_bin_dir(progress)
        manifest = json.loads((bin_dir / "manifest.json").read_text())
        _, previous = self._load()
        ports = self._ports(previous)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        records: list[ProcessRecord] = []
        extra: dict[str, object] = {
            "ports": ports,
            "binDir": str(bin_dir),
            "dockerHost": docker_host,
            "versions": {
                "kubernetes": manifest["kubernetes"],
                "etcd": manifest["etcd"],
                "clusterAPI": manifest["clusterAPI"],
            },
        }

        def record(r: ProcessRecord) -> ProcessRecord:
            records.append(r)
            save_records(self.state_file, records, extra)
            return r

        try:
            progress("generating certificates")
            ca = pki.ensure_ca(self.pki_dir)
            serving = pki.issue(ca, self.pki_dir, "apiserver", common_name="kube-apiserver")
            pki.issue(
                ca,
                self.pki_dir,
                "admin",
                common_name="calibrator-admin",
                organization="system:masters",
                server=False,
                client=True,
            )
            pki.issue(
                ca,
                self.webhook_dir,
                "webhook",
                common_name="capi-webhooks",
                cert_file="tls.crt",
                key_file="tls.key",
            )
            sa_key = pki.ensure_service_account_key(self.pki_dir)

            progress("starting etcd")
            etcd = record(
                start(
                    "etcd",
                    [
                        str(bin_dir / "etcd"),
                        "--name",
                        "calibrator",
                        "--data-dir",
                        str(self.state_dir / "etcd-data"),
                        "--listen-client-urls",
                        f"http://127.0.0.1:{ports['etcd-client']}",
                        "--advertise-client-urls",
                        f"http://127.0.0.1:{ports['etcd-client']}",
                        "--listen-peer-urls",
                        f"http://127.0.0.1:{ports['etcd-peer']}",
                        "--initial-advertise-peer-urls",
                        f"http://127.0.0.1:{ports['etcd-peer']}",
                        "--initial-cluster",
                        f"calibrator=http://127.0.0.1:{ports['etcd-peer']}",
                        "--unsafe-no-fsync=true",
                        "--quota-backend-bytes",
                        str(4 * 2**30),
                        "--log-level",
                        "warn",
                    ],
                    self.logs / "etcd.log",
                    f"http://127.0.0.1:{ports['etcd-client']}/health",
                )
            )
            wait_until("etcd", lambda: healthy(etcd.health_url), left(), etcd)

            progress("starting kube-apiserver")
            api_url = f"https://127.0.0.1:{ports['apiserver']}"
            apiserver = record(
                start(
                    "kube-apiserver",
                    [
                        str(bin_dir / "kube-apiserver"),
                        f"--etcd-servers=http://127.0.0.1:{ports['etcd-client']}",
                        "--bind-address=127.0.0.1",
                        "--advertise-address=127.0.0.1",
                        f"--secure-port={ports['apiserver']}",
                        f"--tls-cert-file={serving.cert}",
                        f"--tls-private-key-file={serving.key}",
                        f"--client-ca-file={ca.cert}",
                        f"--service-account-issuer={api_url}",
                        f"--service-account-key-file={sa_key}",
                        f"--service-account-signing-key-file={sa_key}",
                        "--service-cluster-ip-range=10.0.0.0/24",
                        "--authorization-mode=RBAC",
                        "--allow-privileged=true",
                        "--disable-admission-plugins=ServiceAccount",
                        f"--cert-dir={self.pki_dir / 'apiserver-generated'}",
                        "--max-requests-inflight=800",
                        "--max-mutating-requests-inflight=400",
                        # A deprecated API that is off by default, served so that the
                        # observation of deprecated-API use (kube/apiusage.py) can be tested on
                        # a real apiserver: VolumeAttributesClass at storage.k8s.io/v1beta1,
                        # deprecated in 1.34 and removed in 1.37 (the catalog's row). Nothing
                        # else of the plane uses it; the group's other v1beta1 kinds are gone.
                        "--runtime-config=storage.k8s.io/v1beta1=true",
                    ],
                    self.logs / "kube-apiserver.log",
                    f"{api_url}/readyz",
                )
            )
            tls = self._tls()
            wait_until(
                "kube-apiserver", lambda: healthy(apiserver.health_url, tls), left(), apiserver
            )
            self._write_kubeconfig(api_url)

            progress("installing Cluster API CRDs")
            from orchestrator.kube.client import api_client, apply_all, dynamic  # noqa: PLC0415
            from orchestrator.kube.fleetapi import install_crds  # noqa: PLC0415

            dyn = dynamic(api_client(self.kubeconfig))
            ca_b64 = base64.b64encode(ca.cert.read_bytes()).decode()
            crds = list(self._crds(manifest, ports, ca_b64))
            apply_all(dyn, crds)
            self._wait_crds_established(dyn, [c["metadata"]["name"] for c in crds], left())
            progress("installing calibrator.dev CRDs (FleetWorkload, PlacementDecision)")
            install_crds(dyn, left())

            for m in MANAGERS:
                progress(f"starting {m.name} manager")
                argv = [
                    str(bin_dir / m.binary),
                    f"--kubeconfig={self.kubeconfig}",
                    f"--webhook-cert-dir={self.webhook_dir}",
                    f"--webhook-port={ports[f'{m.name}-webhook']}",
                    f"--health-addr=127.0.0.1:{ports[f'{m.name}-health']}",
                    f"--diagnostics-address=127.0.0.1:{ports[f'{m.name}-diagnostics']}",
                    "--insecure-diagnostics",
                ]
                if m.feature_gates:
                    argv.append(f"--feature-gates={m.feature_gates}")
                env = _manager_env(m, docker_host)
                record(
                    start(
                        m.name,
                        argv,
                        self.logs / f"{m.name}.log",
                        f"http://127.0.0.1:{ports[f'{m.name}-health']}/readyz",
                        env,
                    )
                )
            for r in records[2:]:
                wait_until(r.name, functools.partial(healthy, r.health_url), left(), r)

            progress("configuring webhooks")
            apply_all(dyn, self._webhook_configs(manifest, ports, ca_b64))
            self._wait_webhooks(dyn, left())

            # kube-apiserver builds its OpenAPI document lazily, once per format, on the first
            # request after the CRDs change; with every CAPI CRD installed that takes tens of
            # seconds on a busy machine. Clients that read it with a short limit (Pulumi's
            # Kubernetes provider gives up after 32 s) then fail on a healthy plane, so the
            # plane is ready only once both formats they ask for are built.
            progress("building the API server's OpenAPI document")
            _wait_openapi(api_url, tls, left(), apiserver)
        except BaseException:
            for r in reversed(records):
                if alive(r.pid):
                    stop(r)
            save_records(self.state_file, [], extra)
            raise
        extra["startedAt"] = time.time()
        extra["startSeconds"] = round(time.monotonic() - began, 2)
        # A plane repaired without a TTL of its own keeps what was left of the one it had: a
        # test or demo plane must not outlive its run because something repaired it.
        ttl = ttl_seconds or _remaining(previous.get("watchdogDeadline"))
        if ttl:
            extra["watchdogPid"] = self._start_watchdog(ttl)
            extra["watchdogDeadline"] = time.time() + ttl
        save_records(self.state_file, records, extra)
        progress(f"ready in {time.monotonic() - began:.1f}s; kubeconfig: {self.kubeconfig}")
        return self.status()

    # ------------------------------------------------------------------ fault drills
    # Reliability tests (docs/reliability/stuck-and-outage.md) take one component away and bring
    # it back without touching the rest: the other processes keep their pids and connections, as
    # they would when one pod of a real management cluster dies or hangs.

    def _record(self, name: str) -> tuple[list[ProcessRecord], dict[str, Any], ProcessRecord]:
        records, extra = self._load()
        for r in records:
            if r.name == name:
                return records, extra, r
        known = ", ".join(r.name for r in records) or "none"
        raise PlaneError(f"no component {name!r} in {self.state_file} (components: {known})")

    def stop_component(self, name: str, timeout: float = 20.0) -> None:
        """Stop one component by pid (SIGTERM, then SIGKILL), keeping its record.

        ``status`` reports it down meanwhile; ``start_component`` brings it back on the same
        port with the same arguments, and ``up`` would repair the whole plane.
        """
        _, _, record = self._record(name)
        stop(record, timeout)

    def start_component(self, name: str, timeout: float = 180.0) -> ComponentStatus:
        """Start a stopped component again from its record and wait until it is healthy.

        Same argv (so the same port, certificates and data), the manager's environment, the same
        log; the new pid replaces the old one in ``state.json`` so ``down`` and the watchdog
        still stop exactly what runs. After a kube-apiserver restart it also waits for the
        OpenAPI document, as ``up`` does (clients read it with short limits).
        """
        records, extra, record = self._record(name)
        if alive(record.pid):
            raise PlaneError(f"{name} is still running (pid {record.pid}); stop it first")
        docker_host = extra.get("dockerHost")
        env = next(
            (
                _manager_env(m, docker_host if isinstance(docker_host, str) else None)
                for m in MANAGERS
                if m.name == name
            ),
            None,
        )
        fresh = start(name, record.argv, Path(record.log), record.health_url, env)
        save_records(self.state_file, [fresh if r is record else r for r in records], extra)
        tls = self._tls()
        deadline = time.monotonic() + timeout
        wait_until(name, lambda: healthy(fresh.health_url, tls), timeout, fresh)
        if name == "kube-apiserver":
            api_url = fresh.health_url.removesuffix("/readyz")
            _wait_openapi(api_url, tls, max(5.0, deadline - time.monotonic()), fresh)
        return self._component_status(fresh, tls)

    def pause_component(self, name: str) -> None:
        """Freeze one component (SIGSTOP to its process group), like a hung process.

        It keeps its sockets but answers nothing; ``resume_component`` continues it.
        """
        _, _, record = self._record(name)
        if not alive(record.pid):
            raise PlaneError(f"{name} is not running")
        os.killpg(record.pid, signal.SIGSTOP)

    def resume_component(self, name: str, timeout: float = 60.0) -> ComponentStatus:
        """Continue a paused component (SIGCONT) and wait until it answers its health check."""
        _, _, record = self._record(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(record.pid, signal.SIGCONT)
        tls = self._tls()
        wait_until(name, lambda: healthy(record.health_url, tls), timeout, record)
        return self._component_status(record, tls)

    def apiserver_watches(self, timeout: float = 10.0) -> dict[str, int]:
        """Open WATCH requests on kube-apiserver per ``group/resource`` (its /metrics gauge).

        A restarted API server is healthy long before its clients are back: each informer of the
        four managers re-lists and re-watches after a client-go backoff that grows up to 30 s
        (with jitter) during an outage. A controller acting on a stale cache meanwhile can do
        damage (KCP v1.13.4 creates a Machine, does not see it in its cache within 10 s, and
        deletes the Machine's KubeadmConfig and DevMachine, leaving a Machine that never becomes
        ready). Comparing this before an outage and after the restart tells when every watch
        is back.
        """
        records, _ = self._load()
        api = next((r for r in records if r.name == "kube-apiserver"), None)
        if api is None:
            raise PlaneError("no kube-apiserver recorded")
        url = api.health_url.removesuffix("/readyz") + "/metrics"
        request = urllib.request.Request(url, headers={"Accept": "text/plain"})
        with urllib.request.urlopen(request, timeout=timeout, context=self._tls().context()) as r:
            text = r.read().decode()
        watches: dict[str, int] = {}
        for line in text.splitlines():
            if not line.startswith("apiserver_longrunning_requests{") or 'verb="WATCH"' not in line:
                continue
            labels, _, value = line.rpartition(" ")
            fields = dict(
                item.split("=", 1) for item in labels[labels.index("{") + 1 : -1].split(",")
            )
            key = f"{fields.get('group', '').strip(chr(34))}/{fields.get('resource', '').strip(chr(34))}"
            watches[key] = watches.get(key, 0) + int(float(value))
        return watches

    @staticmethod
    def _component_status(record: ProcessRecord, tls: TLSClient) -> ComponentStatus:
        running = alive(record.pid)
        ok = running and healthy(record.health_url, tls)
        return ComponentStatus(record.name, record.pid, running, ok, record.health_url, record.log)

    # ------------------------------------------------------------------ helpers
    def _install_api(self, timeout: float = 60.0) -> None:
        """Server-side apply our calibrator.dev CRDs (idempotent) and wait until Established."""
        from orchestrator.kube.client import api_client, dynamic  # noqa: PLC0415
        from orchestrator.kube.fleetapi import install_crds  # noqa: PLC0415

        install_crds(dynamic(api_client(self.kubeconfig)), timeout)

    def _write_kubeconfig(self, server: str) -> None:
        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "calibrator-local",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": b64(self.pki_dir / "ca.crt"),
                    },
                }
            ],
            "users": [
                {
                    "name": "calibrator-admin",
                    "user": {
                        "client-certificate-data": b64(self.pki_dir / "admin.crt"),
                        "client-key-data": b64(self.pki_dir / "admin.key"),
                    },
                }
            ],
            "contexts": [
                {
                    "name": "calibrator-local",
                    "context": {"cluster": "calibrator-local", "user": "calibrator-admin"},
                }
            ],
            "current-context": "calibrator-local",
        }
        tmp = self.kubeconfig.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(config))
        tmp.chmod(0o600)
        tmp.replace(self.kubeconfig)

    @staticmethod
    def _crds(
        manifest: dict[str, Any], ports: dict[str, int], ca_b64: str
    ) -> Iterator[dict[str, Any]]:
        """CRDs with the labels kustomize would add and conversion pointed at the owning manager."""
        for m in MANAGERS:
            directory = Path(manifest["crdDirsByComponent"][m.component])
            for path in sorted(directory.glob("*.yaml")):
                for doc in yaml.safe_load_all(path.read_text()):
                    if not doc:
                        continue
                    labels = doc["metadata"].setdefault("labels", {}) or {}
                    doc["metadata"]["labels"] = labels
                    labels["cluster.x-k8s.io/provider"] = m.provider_label
                    if m.contract_labels:
                        # CAPI core resolves the API version of every bootstrap / control-plane /
                        # infrastructure reference from these contract labels.
                        labels["cluster.x-k8s.io/v1beta1"] = "v1beta1"
                        labels["cluster.x-k8s.io/v1beta2"] = "v1beta2"
                    if len(doc["spec"]["versions"]) > 1:
                        doc["spec"]["conversion"] = {
                            "strategy": "Webhook",
                            "webhook": {
                                "conversionReviewVersions": ["v1"],
                                "clientConfig": {
                                    "url": f"https://127.0.0.1:{ports[f'{m.name}-webhook']}/convert",
                                    "caBundle": ca_b64,
                                },
                            },
                        }
                    yield doc

    @staticmethod
    def _webhook_configs(
        manifest: dict[str, Any], ports: dict[str, int], ca_b64: str
    ) -> Iterator[dict[str, Any]]:
        """Each manager's webhook configurations, renamed apart and pointed at 127.0.0.1."""
        for m in MANAGERS:
            text = Path(manifest["webhookManifests"][m.component]).read_text()
            for doc in yaml.safe_load_all(text):
                if not doc:
                    continue
                doc["metadata"]["name"] = f"calibrator-{m.name}-{doc['metadata']['name']}"
                for hook in doc.get("webhooks", []):
                    path = hook["clientConfig"]["service"]["path"]
                    hook["clientConfig"] = {
                        "url": f"https://127.0.0.1:{ports[f'{m.name}-webhook']}{path}",
                        "caBundle": ca_b64,
                    }
                yield doc

    @staticmethod
    def _wait_crds_established(dyn: Any, names: list[str], timeout: float) -> None:
        from orchestrator.kube.client import read_json  # noqa: PLC0415

        crd_api = dyn.resources.get(
            api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
        )

        def established() -> bool:
            items = read_json(crd_api.get).get("items", [])
            ready = {
                i["metadata"]["name"]
                for i in items
                if any(
                    c["type"] == "Established" and c["status"] == "True"
                    for c in ((i.get("status") or {}).get("conditions") or [])
                )
            }
            return set(names) <= ready

        wait_until("CRDs established", established, timeout)

    @staticmethod
    def _wait_webhooks(dyn: Any, timeout: float) -> None:
        """Dry-run create a Cluster until the core validating webhook answers.

        The probe is deliberately incomplete: a denial *from the webhook* proves the API server can
        reach the manager over TLS with our CA, which is all this wait is about.
        """
        clusters = dyn.resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="Cluster")
        probe = {
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": "webhook-probe", "namespace": "default"},
            "spec": {"paused": True},
        }
        errors: list[str] = []

        def answered() -> bool:
            try:
                clusters.create(body=probe, namespace="default", query_params=[("dryRun", "All")])
                return True
            except Exception as err:
                text = str(getattr(err, "body", None) or err)
                if "validation.cluster.cluster.x-k8s.io" in text and "denied the request" in text:
                    return True
                errors[:] = [text[:400]]
                return False

        try:
            wait_until("webhooks", answered, timeout)
        except PlaneError as err:
            raise PlaneError(f"{err}; last error: {errors[-1] if errors else '-'}") from None

    def _start_watchdog(self, ttl_seconds: int) -> int:
        """A detached process that runs ``down`` after ``ttl_seconds`` so nothing outlives its use."""
        log = (self.logs / "watchdog.log").open("ab")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "orchestrator.localplane.watchdog",
                str(self.state_dir),
                str(ttl_seconds),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return proc.pid


def _manager_env(manager: Manager, docker_host: str | None) -> dict[str, str]:
    """What a manager gets on top of our environment.

    Its own variables, and for CAPD the Docker engine of its docker backend (``DOCKER_HOST``;
    never inherited from our shell).
    """
    env = dict(manager.env)
    if manager.name == "capd":
        env["DOCKER_HOST"] = docker_host or ""
    return env


def _wait_openapi(api_url: str, tls: TLSClient, timeout: float, apiserver: ProcessRecord) -> None:
    """Until kube-apiserver has built its OpenAPI v2 document in both formats clients ask for.

    It builds them lazily, once per format, on the first request after a start or a CRD change;
    with every CAPI CRD installed that takes tens of seconds on a busy machine, longer than some
    clients wait (Pulumi's Kubernetes provider gives up after 32 s).
    """
    deadline = time.monotonic() + timeout
    for accept in ("application/json", OPENAPI_V2_PROTOBUF):
        wait_until(
            f"kube-apiserver OpenAPI ({accept})",
            functools.partial(healthy, f"{api_url}/openapi/v2", tls, OPENAPI_WAIT_SECONDS, accept),
            max(5.0, deadline - time.monotonic()),
            apiserver,
        )


def _remaining(deadline: object) -> int:
    """Whole seconds until ``deadline`` (epoch seconds), 0 when absent or past."""
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        return 0
    return max(0, int(deadline - time.time()))


def _listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def logs_hint(status: PlaneStatus) -> str:
    """Last log lines of every unhealthy component."""
    return "\n".join(
        f"--- {c.name}\n{tail(Path(c.log))}" for c in status.components if not c.healthy
    )
