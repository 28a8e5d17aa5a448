"""A Docker engine as a managed service: our own dockerd, socket, data dir and OCI runtime wrapper.

Why a module here and not a script in tools/: the engine is a long-lived service with the same
life cycle as the local plane (start detached, wait bounded until healthy, record the pid in
``state.json``, stop exactly that pid later from any shell), and ``calibrator env up --provider
docker`` starts it from Python. tools/ builds artefacts; it runs nothing.

The engine is Debian's ``docker.io`` (dockerd 20.10 with its own managed containerd). It never
touches the host's default engine: its socket, data root, exec root, pid file and bridge are all
under (or named after) its state directory. Its default OCI runtime is
:mod:`orchestrator.localplane.ociwrapper`, which removes the capabilities this kernel's bounding
set lacks so that ``docker run --privileged`` (kind nodes, CAPD machines) works on this VM.

This module is the life cycle (up, down, status, TTL); the Engine API is dockerapi.py, the host's
bridge, iptables and forwarding hostnet.py, and the command line dockerd.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.localplane import dockerapi, hostnet, ociwrapper, ttl
from orchestrator.localplane.processes import (
    PlaneError,
    ProcessRecord,
    alive,
    load_records,
    save_records,
    start,
    stop,
    wait_until,
    which,
)

RUNTIME_NAME = "fc-runc"


def default_state_dir() -> Path:
    """``$CALIBRATOR_DOCKER_DIR`` or ``~/.local/state/fleet-calibrator/docker``."""
    env = os.environ.get("CALIBRATOR_DOCKER_DIR")
    if env:
        return Path(env)
    return Path.home() / ".local" / "state" / "fleet-calibrator" / "docker"


@dataclass(frozen=True)
class EngineStatus:
    """What ``status`` reports."""

    state_dir: Path
    socket: Path
    pid: int | None
    running: bool
    healthy: bool
    version: str | None

    @property
    def docker_host(self) -> str:
        """The value for ``DOCKER_HOST`` (docker CLI, kind, CAPD)."""
        return f"unix://{self.socket}"


def runtime_launcher(python: str, runc: str) -> str:
    """The executable dockerd registers as its runtime: our wrapper, then the real runc."""
    script = Path(ociwrapper.__file__).resolve()
    return f'#!/bin/sh\nexec {python} -I {script} --runc {runc} -- "$@"\n'


def dockerd_argv(dockerd: str, state_dir: Path, launcher: Path) -> list[str]:
    """The command line of dockerd: every path under ``state_dir``, our runtime the default."""
    return [
        dockerd,
        f"--host=unix://{state_dir / 'docker.sock'}",
        f"--data-root={state_dir / 'data'}",
        f"--exec-root={state_dir / 'exec'}",
        f"--pidfile={state_dir / 'docker.pid'}",
        f"--add-runtime={RUNTIME_NAME}={launcher}",
        f"--default-runtime={RUNTIME_NAME}",
        f"--bridge={hostnet.BRIDGE}",
        "--storage-driver=overlay2",
        # kind and CAPD run systemd in their nodes; they need the cgroupfs driver on this host
        # (no systemd as PID 1 outside) and keep their own cgroup namespace.
        "--exec-opt=native.cgroupdriver=cgroupfs",
        "--log-level=info",
    ]


class DockerEngine:
    """One dockerd in one state directory."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.state_dir = (state_dir or default_state_dir()).resolve()
        self.state_file = self.state_dir / "state.json"
        self.socket = self.state_dir / "docker.sock"
        self.launcher = self.state_dir / "runtime" / RUNTIME_NAME
        self.log = self.state_dir / "logs" / "dockerd.log"

    def _record(self) -> ProcessRecord | None:
        records, _ = load_records(self.state_file)
        return records[0] if records else None

    def status(self) -> EngineStatus:
        """Report the recorded engine (never starts or stops anything)."""
        record = self._record()
        running = record is not None and alive(record.pid)
        healthy = running and dockerapi.pings(self.socket)
        version = None
        if healthy:
            with contextlib.suppress(OSError):
                version = dockerapi.version(self.socket)
        return EngineStatus(
            self.state_dir, self.socket, record.pid if record else None, running, healthy, version
        )

    def up(
        self,
        *,
        timeout: float = 60.0,
        ttl_seconds: int | None = None,
        progress: Callable[[str], None] = lambda _: None,
    ) -> EngineStatus:
        """Start dockerd (or return at once when the recorded one answers) and wait for it.

        With ``ttl_seconds`` a detached watchdog runs ``down`` (containers removed, dockerd
        stopped) once they elapse, like the local plane's; a new TTL replaces the old watchdog.
        Without one, a restarted engine keeps what was left of the TTL it had.
        """
        current = self.status()
        if current.healthy:
            progress(f"already running (pid {current.pid})")
            if ttl_seconds:
                self._arm_watchdog(ttl_seconds, progress)
            return current
        _, previous = load_records(self.state_file)
        ttl_seconds = ttl_seconds or ttl.remaining(previous.get("watchdogDeadline"))
        if current.running:
            progress("the recorded dockerd does not answer; stopping it")
            self.down(remove_containers=False)
        dockerd = _require("dockerd", "apt-get install docker.io")
        runc = _require("runc", "apt-get install runc")
        for name in ("containerd", "containerd-shim-runc-v2"):
            _require(name, "apt-get install containerd")
        if len(str(self.state_dir / "exec" / "containerd" / "containerd.sock")) > 100:
            raise PlaneError(f"state dir {self.state_dir} is too long for unix socket paths")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.launcher.parent.mkdir(parents=True, exist_ok=True)
        self.launcher.write_text(runtime_launcher(sys.executable, runc))
        self.launcher.chmod(0o755)
        hostnet.ensure_bridge()
        # dockerd turns IP forwarding on and sets the FORWARD policy to DROP for the whole host,
        # and never puts it back; remember it so that ``down`` leaves the host as it found it.
        policy = hostnet.forward_policy()
        forwarding = hostnet.read_ip_forward()
        argv = dockerd_argv(dockerd, self.state_dir, self.launcher)
        record = start("dockerd", argv, self.log, f"unix://{self.socket}")
        save_records(
            self.state_file,
            [record],
            {"bridge": hostnet.BRIDGE, "forwardPolicy": policy, "ipForward": forwarding},
        )
        waited = wait_until("dockerd", lambda: dockerapi.pings(self.socket), timeout, record)
        progress(f"dockerd pid {record.pid} answered after {waited:.1f}s on {self.socket}")
        if ttl_seconds:
            self._arm_watchdog(ttl_seconds, progress)
        return self.status()

    def _arm_watchdog(self, ttl_seconds: int, progress: Callable[[str], None]) -> None:
        """Start a watchdog for ``ttl_seconds`` (stopping the one before) and record it."""
        records, extra = load_records(self.state_file)
        ttl.stop_watchdog(extra.pop("watchdogPid", None), timeout=10.0)
        extra.pop("watchdogDeadline", None)
        if not records:
            raise PlaneError("no dockerd recorded to watch")
        log = self.log.parent / "watchdog.log"
        target = ("docker", str(records[0].pid))
        extra["watchdogPid"] = ttl.spawn_watchdog(self.state_dir, ttl_seconds, log, *target)
        extra["watchdogDeadline"] = ttl.deadline(ttl_seconds)
        save_records(self.state_file, records, extra)
        progress(f"dockerd stops by itself in {ttl_seconds}s (watchdog pid {extra['watchdogPid']})")

    def runs(self, dockerd_pid: int) -> bool:
        """Whether the recorded dockerd is still ``dockerd_pid`` and alive.

        A watchdog's check: once the engine was stopped or restarted, it has nothing left to do.
        """
        record = self._record()
        return record is not None and record.pid == dockerd_pid and alive(record.pid)

    def ensure_network(self, name: str, subnet: str, gateway: str) -> bool:
        """Create the user-defined bridge network ``name`` unless it exists; True when created.

        CAPD's docker backend attaches every machine and load balancer to the network ``kind``
        and never creates it (a kind management cluster would have made it). What an earlier
        engine left holding ``gateway`` is cleared first (hostnet.clear_stale_bridges).
        """
        if dockerapi.has_network(self.socket, name):
            return False
        hostnet.clear_stale_bridges(gateway, dockerapi.network_ids(self.socket))
        dockerapi.create_network(self.socket, name, subnet, gateway)
        return True

    def down(
        self,
        *,
        remove_containers: bool = True,
        purge: bool = False,
        timeout: float = 60.0,
        progress: Callable[[str], None] = lambda _: None,
    ) -> None:
        """Stop the recorded dockerd; first remove its containers unless told not to.

        dockerd gets SIGTERM alone (not its process group): it needs its containerd to stop the
        containers it still runs, and stops containerd itself last. The group is killed only if
        dockerd outlives ``timeout``. ``purge`` deletes the state dir (images included).
        """
        record = self._record()
        _, extra = load_records(self.state_file)
        ttl.stop_watchdog(extra.get("watchdogPid"), timeout=10.0)
        saved = extra.get("forwardPolicy")
        if record is not None and alive(record.pid):
            if remove_containers and dockerapi.pings(self.socket):
                self._remove_containers_and_networks(progress)
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while alive(record.pid) and time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(record.pid, os.WNOHANG)
                time.sleep(0.2)
            if alive(record.pid):
                progress(f"dockerd did not stop in {timeout:.0f}s; killing its process group")
            stop(record, timeout=10.0)
            progress(f"dockerd pid {record.pid} stopped")
        if record is not None:
            save_records(self.state_file, [], {})
        if isinstance(saved, str) and hostnet.restore_forward_policy(saved):
            progress(f"iptables FORWARD policy restored to {saved}")
        if hostnet.restore_ip_forward(extra.get("ipForward")):
            progress(f"net.ipv4.ip_forward restored to {extra.get('ipForward')}")
        if extra.get("bridge"):  # only a bridge this engine's ``up`` made (and recorded)
            hostnet.remove_bridge()
        if purge and self.state_dir.exists():
            _unmount_below(self.state_dir)
            shutil.rmtree(self.state_dir)

    def _remove_containers_and_networks(self, progress: Callable[[str], None]) -> None:
        removed = dockerapi.remove_containers(self.socket)
        if removed:
            progress(f"removed containers: {', '.join(removed)}")
        try:  # a bridge left behind is cleared by the next ensure_network: go on
            networks = dockerapi.remove_networks(self.socket)
        except PlaneError as e:
            progress(f"warning: {e}")
        else:
            if networks:
                progress(f"removed networks: {', '.join(networks)}")


def _require(binary: str, hint: str) -> str:
    path = which(binary)
    if path is None:
        raise PlaneError(f"{binary} not found on PATH ({hint})")
    return path


def _unmount_below(root: Path) -> None:
    """Unmount whatever a killed dockerd left mounted under ``root`` (deepest first)."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    prefix = str(root) + "/"
    points = [m.split()[4] for m in mounts if m.split()[4].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=30, check=False)
