"""Bring the local management plane up, report on it, and take it down.

Order (each step waits with a timeout and fails with the component's last log lines):
PKI -> etcd -> kube-apiserver (+ admin kubeconfig) -> CRDs of core, CABPK, KCP and CAPD (contract
labels, conversion to the owning manager) and our own calibrator.dev CRDs -> the four managers ->
webhook configurations pointed at 127.0.0.1 with our CA -> a dry-run Cluster through the webhooks
-> the API server's OpenAPI document.

This module is the order and the state; what each component runs is components.py, what is
installed into the API server is install.py, how a process is started and stopped is
processes.py, and the TTL's watchdog is ttl.py (starting it) and watchdog.py (the process).

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
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.localplane import install, pki, ttl
from orchestrator.localplane.components import (
    MANAGERS,
    apiserver_argv,
    apiserver_url,
    assign_ports,
    etcd_argv,
    etcd_health_url,
    manager_argv,
    manager_env,
    manager_health_url,
    resolve_bin_dir,
)
from orchestrator.localplane.processes import (
    PlaneError,
    ProcessRecord,
    TLSClient,
    alive,
    healthy,
    listening,
    load_records,
    save_records,
    start,
    stop,
    tail,
    wait_until,
)


def default_state_dir() -> Path:
    """``$CALIBRATOR_STATE_DIR`` or ``~/.local/state/fleet-calibrator/localplane``."""
    env = os.environ.get("CALIBRATOR_STATE_DIR")
    if env:
        return Path(env)
    return Path.home() / ".local" / "state" / "fleet-calibrator" / "localplane"


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
        ttl.stop_watchdog(extra.get("watchdogPid"), timeout)
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
            # A plane started by an older version may lack our CRDs.
            install.install_calibrator_crds(install.connect(self.kubeconfig))
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

        if listening(19000):
            raise PlaneError(
                "127.0.0.1:19000 is in use: CAPD's in-memory backend needs it (is another local plane "
                "running? `calibrator env down --state-dir ...` stops it)"
            )
        bin_dir = resolve_bin_dir(progress)
        manifest = json.loads((bin_dir / "manifest.json").read_text())
        _, previous = self._load()
        ports = assign_ports(previous)
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
                    etcd_argv(bin_dir, self.state_dir / "etcd-data", ports),
                    self.logs / "etcd.log",
                    etcd_health_url(ports),
                )
            )
            wait_until("etcd", lambda: healthy(etcd.health_url), left(), etcd)

            progress("starting kube-apiserver")
            api_url = apiserver_url(ports)
            argv = apiserver_argv(
                bin_dir,
                ports,
                serving=serving,
                ca=ca,
                sa_key=sa_key,
                cert_dir=self.pki_dir / "apiserver-generated",
            )
            apiserver = record(
                start("kube-apiserver", argv, self.logs / "kube-apiserver.log", f"{api_url}/readyz")
            )
            tls = self._tls()
            wait_until(
                "kube-apiserver", lambda: healthy(apiserver.health_url, tls), left(), apiserver
            )
            self._write_kubeconfig(api_url)

            progress("installing Cluster API CRDs")
            dyn = install.connect(self.kubeconfig)
            ca_b64 = base64.b64encode(ca.cert.read_bytes()).decode()
            install.install_capi_crds(dyn, manifest, ports, ca_b64, left())
            progress("installing calibrator.dev CRDs (FleetWorkload, PlacementDecision)")
            install.install_calibrator_crds(dyn, left())

            for m in MANAGERS:
                progress(f"starting {m.name} manager")
                record(
                    start(
                        m.name,
                        manager_argv(m, bin_dir, ports, self.kubeconfig, self.webhook_dir),
                        self.logs / f"{m.name}.log",
                        manager_health_url(m, ports),
                        manager_env(m, docker_host),
                    )
                )
            for r in records[2:]:
                wait_until(r.name, functools.partial(healthy, r.health_url), left(), r)

            progress("configuring webhooks")
            install.install_webhooks(dyn, manifest, ports, ca_b64, left())

            progress("building the API server's OpenAPI document")
            install.wait_openapi(api_url, tls, left(), apiserver)
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
        ttl_left = ttl_seconds or ttl.remaining(previous.get("watchdogDeadline"))
        if ttl_left:
            log = self.logs / "watchdog.log"
            extra["watchdogPid"] = ttl.spawn_watchdog(self.state_dir, ttl_left, log)
            extra["watchdogDeadline"] = ttl.deadline(ttl_left)
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
                manager_env(m, docker_host if isinstance(docker_host, str) else None)
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
            install.wait_openapi(api_url, tls, max(5.0, deadline - time.monotonic()), fresh)
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


def logs_hint(status: PlaneStatus) -> str:
    """Last log lines of every unhealthy component."""
    return "\n".join(
        f"--- {c.name}\n{tail(Path(c.log))}" for c in status.components if not c.healthy
    )
