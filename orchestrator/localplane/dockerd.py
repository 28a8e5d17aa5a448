"""A Docker engine as a managed service: our own dockerd, socket, data dir and OCI runtime wrapper.

Why a module here and not a script in tools/: the engine is a long-lived service with the same
life cycle as the local plane (start detached, wait bounded until healthy, record the pid in
``state.json``, stop exactly that pid later from any shell), and ``calibrator env up --provider
docker`` will start it from Python. tools/ builds artefacts; it runs nothing.

The engine is Debian's ``docker.io`` (dockerd 20.10 with its own managed containerd). It never
touches the host's default engine: its socket, data root, exec root, pid file and bridge are all
under (or named after) its state directory. Its default OCI runtime is
:mod:`orchestrator.localplane.ociwrapper`, which removes the capabilities this kernel's bounding
set lacks so that ``docker run --privileged`` (kind nodes, CAPD machines) works on this VM.

Command line (no new console entry point)::

    python3 -m orchestrator.localplane.dockerd up|down|status|env [--state-dir DIR] [--ttl N]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.localplane import ociwrapper
from orchestrator.localplane.processes import (
    PlaneError,
    ProcessRecord,
    alive,
    load_records,
    save_records,
    start,
    stop,
    tail,
    wait_until,
)

RUNTIME_NAME = "fc-runc"
# Our own bridge, so that this engine never shares docker0 (or its iptables rules) with another
# engine on the host. Linux limits interface names to 15 characters.
BRIDGE = "fc-docker0"
BRIDGE_CIDR = "172.29.0.1/16"
PREDEFINED_NETWORKS = ("bridge", "host", "none")  # dockerd's own; it refuses to remove them


def default_state_dir() -> Path:
    """``$CALIBRATOR_DOCKER_DIR`` or ``~/.local/state/fleet-calibrator/docker``."""
    env = os.environ.get("CALIBRATOR_DOCKER_DIR")
    if env:
        return Path(env)
    return Path.home() / ".local" / "state" / "fleet-calibrator" / "docker"


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the engine's unix socket (the Engine API), standard library only."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = str(path)

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def api(
    sock: Path,
    method: str,
    path: str,
    timeout: float = 10.0,
    *,
    body: object | None = None,
    upload: Path | None = None,
) -> tuple[int, object]:
    """One Engine API call; returns (status, decoded JSON body or text).

    ``body`` is sent as JSON; ``upload`` streams a file (an image archive for ``/images/load``).
    """
    conn = _UnixHTTPConnection(sock, timeout)
    try:
        if upload is not None:
            with upload.open("rb") as data:
                headers = {
                    "Content-Type": "application/x-tar",
                    "Content-Length": str(upload.stat().st_size),
                }
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
        elif body is not None:
            payload = json.dumps(body).encode()
            conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
        else:
            conn.request(method, path)
            resp = conn.getresponse()
        body = resp.read().decode(errors="replace")
    finally:
        conn.close()
    try:
        return resp.status, json.loads(body) if body else None
    except json.JSONDecodeError:
        return resp.status, body


def _pings(sock: Path) -> bool:
    try:
        status, _ = api(sock, "GET", "/_ping", timeout=2.0)
    except OSError:
        return False
    return status == 200


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
        f"--bridge={BRIDGE}",
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
        healthy = running and _pings(self.socket)
        version = None
        if healthy:
            with contextlib.suppress(OSError):
                code, body = api(self.socket, "GET", "/version")
                if code == 200 and isinstance(body, dict):
                    version = str(body.get("Version"))
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
        ttl_seconds = ttl_seconds or _remaining(previous.get("watchdogDeadline"))
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
        _ensure_bridge()
        # dockerd turns IP forwarding on and sets the FORWARD policy to DROP for the whole host,
        # and never puts it back; remember it so that ``down`` leaves the host as it found it.
        policy = forward_policy()
        forwarding = _read_ip_forward()
        argv = dockerd_argv(dockerd, self.state_dir, self.launcher)
        record = start("dockerd", argv, self.log, f"unix://{self.socket}")
        save_records(
            self.state_file,
            [record],
            {"bridge": BRIDGE, "forwardPolicy": policy, "ipForward": forwarding},
        )
        waited = wait_until("dockerd", lambda: _pings(self.socket), timeout, record)
        progress(f"dockerd pid {record.pid} answered after {waited:.1f}s on {self.socket}")
        if ttl_seconds:
            self._arm_watchdog(ttl_seconds, progress)
        return self.status()

    def _arm_watchdog(self, ttl_seconds: int, progress: Callable[[str], None]) -> None:
        """Start a watchdog for ``ttl_seconds`` (stopping the one before) and record it."""
        records, extra = load_records(self.state_file)
        self._stop_watchdog(extra)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        if not records:
            raise PlaneError("no dockerd recorded to watch")
        extra["watchdogPid"] = self._spawn_watchdog(ttl_seconds, records[0].pid)
        extra["watchdogDeadline"] = time.time() + ttl_seconds
        save_records(self.state_file, records, extra)
        progress(f"dockerd stops by itself in {ttl_seconds}s (watchdog pid {extra['watchdogPid']})")

    def _spawn_watchdog(self, ttl_seconds: int, dockerd_pid: int) -> int:
        with (self.log.parent / "watchdog.log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "orchestrator.localplane.watchdog",
                 str(self.state_dir), str(ttl_seconds), "docker", str(dockerd_pid)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        return proc.pid

    @staticmethod
    def _stop_watchdog(extra: dict[str, object]) -> None:
        """Stop the recorded watchdog unless it is this process (a watchdog running ``down``)."""
        pid = extra.pop("watchdogPid", None)
        extra.pop("watchdogDeadline", None)
        if isinstance(pid, int) and not isinstance(pid, bool) and pid != os.getpid() and alive(pid):
            stop(ProcessRecord("watchdog", pid, [], "", ""), timeout=10.0)

    def runs(self, dockerd_pid: int) -> bool:
        """Whether the recorded dockerd is still ``dockerd_pid`` and alive.

        A watchdog's check: once the engine was stopped or restarted, it has nothing left to do.
        """
        record = self._record()
        return record is not None and record.pid == dockerd_pid and alive(record.pid)

    def ensure_network(self, name: str, subnet: str, gateway: str) -> bool:
        """Create the user-defined bridge network ``name`` unless it exists; True when created.

        CAPD's docker backend attaches every machine and load balancer to the network ``kind``
        and never creates it (a kind management cluster would have made it).
        """
        code, _ = api(self.socket, "GET", f"/networks/{name}")
        if code == 200:
            return False
        self._clear_stale_bridges(gateway)
        spec = {
            "Name": name,
            "Driver": "bridge",
            "CheckDuplicate": True,
            "IPAM": {"Driver": "default", "Config": [{"Subnet": subnet, "Gateway": gateway}]},
            "Options": {"com.docker.network.bridge.enable_ip_masquerade": "true"},
        }
        code, reply = api(self.socket, "POST", "/networks/create", body=spec)
        if code != 201:
            raise PlaneError(f"creating network {name} failed: HTTP {code} {reply}")
        return True

    def _list(self, path: str, what: str, timeout: float = 60.0) -> list[Any]:
        """One engine LIST (``/networks``, ``/containers/json``), or a PlaneError naming it."""
        code, body = api(self.socket, "GET", path, timeout=timeout)
        if code != 200 or not isinstance(body, list):
            raise PlaneError(f"listing {what} failed: HTTP {code} {body}")
        return body

    def _network_ids(self) -> list[str]:
        return [str(n["Id"]) for n in self._list("/networks", "networks")]

    def _clear_stale_bridges(self, gateway: str) -> None:
        """Delete the empty bridges an earlier engine left holding ``gateway``; refuse others.

        A dockerd stopped without removing its networks (killed, or an older ``down``) leaves
        its ``br-<id>`` interface and that interface's route to the subnet. A new engine's
        network with the same subnet then gets a second route, and the host reaches its
        containers through the dead bridge: "no route to host" to every CAPD machine. It also
        leaves its iptables rules, among them ``POSTROUTING -s SUBNET ! -o br-<old> -j
        MASQUERADE``, which masquerades traffic between the new network's own containers: a
        joining etcd then reaches its peer from the gateway's address and is rejected.
        """
        stale, foreign = classify_gateway_holders(
            _ipv4_addresses(), gateway, self._network_ids(), _bridge_has_ports
        )
        if foreign:
            raise PlaneError(
                f"{gateway} is already on {', '.join(foreign)}, which this engine does not own; "
                "stop what made it (another engine?) before starting this one"
            )
        for ifname in stale:
            _run(["ip", "link", "del", ifname])
        _clear_stale_bridge_rules()

    def remove_networks(self, timeout: float = 60.0) -> list[str]:
        """Remove this engine's own networks, so that dockerd deletes their bridges with them."""
        removed = []
        for n in self._list("/networks", "networks", timeout):
            if n.get("Name") in PREDEFINED_NETWORKS:
                continue
            code, reply = api(self.socket, "DELETE", f"/networks/{n['Id']}", timeout=timeout)
            if code not in (204, 404):
                raise PlaneError(f"removing network {n.get('Name')} failed: HTTP {code} {reply}")
            removed.append(str(n.get("Name")))
        return removed

    def image_id(self, tag: str) -> str | None:
        """The ID of the image ``tag`` in this engine, None when it has none."""
        code, body = api(self.socket, "GET", f"/images/{tag}/json")
        return str(body["Id"]) if code == 200 and isinstance(body, dict) else None

    def load_archive(self, archive: Path, timeout: float = 900.0) -> list[str]:
        """Load a ``docker save`` archive unless the engine has each of its images by ID.

        Returns the tags it loaded (empty when every image was there already).
        """
        wanted = archive_images(archive)
        if all(self.image_id(tag) == image for tag, image in wanted.items()):
            return []
        code, reply = api(
            self.socket, "POST", "/images/load?quiet=1", timeout=timeout, upload=archive
        )
        if code != 200 or (isinstance(reply, dict) and reply.get("error")):
            raise PlaneError(f"loading {archive} failed: HTTP {code} {reply}")
        return sorted(wanted)

    def remove_containers(self, timeout: float = 120.0) -> list[str]:
        """Force-remove every container of this engine (kind nodes, CAPD machines) and volumes."""
        removed = []
        for c in self._list("/containers/json?all=1", "containers", timeout):
            cid = str(c["Id"])
            code, reply = api(
                self.socket, "DELETE", f"/containers/{cid}?force=1&v=1", timeout=timeout
            )
            if code not in (204, 404):
                raise PlaneError(f"removing container {cid[:12]} failed: HTTP {code} {reply}")
            names = c.get("Names") or [cid[:12]]
            removed.append(str(names[0]).lstrip("/"))
        return removed

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
        self._stop_watchdog(dict(extra))
        saved = extra.get("forwardPolicy")
        forwarding = extra.get("ipForward")
        if record is not None and alive(record.pid):
            if remove_containers and _pings(self.socket):
                removed = self.remove_containers()
                if removed:
                    progress(f"removed containers: {', '.join(removed)}")
                try:  # a bridge left behind is cleared by the next ensure_network: go on
                    networks = self.remove_networks()
                except PlaneError as e:
                    progress(f"warning: {e}")
                else:
                    if networks:
                        progress(f"removed networks: {', '.join(networks)}")
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
        if isinstance(saved, str):
            restored = restore_forward_policy(saved)
            if restored:
                progress(f"iptables FORWARD policy restored to {saved}")
        if forwarding in ("0", "1") and _read_ip_forward() not in (None, forwarding):
            IP_FORWARD.write_text(f"{forwarding}\n")
            progress(f"net.ipv4.ip_forward restored to {forwarding}")
        if extra.get("bridge"):  # only a bridge this engine's ``up`` made (and recorded)
            _remove_bridge()
        if purge and self.state_dir.exists():
            _unmount_below(self.state_dir)
            shutil.rmtree(self.state_dir)


def _remaining(deadline: object) -> int:
    """Whole seconds until ``deadline`` (epoch seconds), 0 when absent or past."""
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        return 0
    return max(0, int(deadline - time.time()))


def archive_images(archive: Path) -> dict[str, str]:
    """Tag -> image ID of a ``docker save`` archive (its manifest names each config file)."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("manifest.json")
        if member is None:
            raise PlaneError(f"{archive} has no manifest.json")
        manifest = json.load(member)
    images: dict[str, str] = {}
    for entry in manifest:
        image = "sha256:" + str(entry["Config"]).split("/")[-1].removesuffix(".json")
        for tag in entry.get("RepoTags") or []:
            images[str(tag)] = image
    return images


def _which(binary: str) -> str | None:
    """``binary`` on PATH or in the sbin directories (root tools such as iptables live there)."""
    return shutil.which(binary, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def _require(binary: str, hint: str) -> str:
    path = _which(binary)
    if path is None:
        raise PlaneError(f"{binary} not found on PATH ({hint})")
    return path


IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


def _read_ip_forward() -> str | None:
    try:
        return IP_FORWARD.read_text().strip()
    except OSError:
        return None


def parse_forward_policy(rules: str) -> str | None:
    """The policy in ``iptables -S FORWARD`` output (``-P FORWARD ACCEPT``), None if absent."""
    for line in rules.splitlines():
        parts = line.split()
        if parts[:2] == ["-P", "FORWARD"] and len(parts) == 3 and parts[2] in ("ACCEPT", "DROP"):
            return parts[2]
    return None


def forward_policy() -> str | None:
    """The host's filter FORWARD policy now; None when iptables is missing or refuses."""
    iptables = _which("iptables")
    if iptables is None:
        return None
    done = subprocess.run(
        [iptables, "-S", "FORWARD"], capture_output=True, text=True, timeout=30, check=False
    )
    return parse_forward_policy(done.stdout) if done.returncode == 0 else None


def restore_forward_policy(saved: str) -> bool:
    """Put the FORWARD policy back to ``saved`` if dockerd changed it; True when it did."""
    now = forward_policy()
    if now is None or now == saved or saved not in ("ACCEPT", "DROP"):
        return False
    iptables = _which("iptables")
    done = subprocess.run(
        [str(iptables), "-P", "FORWARD", saved],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise PlaneError(f"iptables -P FORWARD {saved} failed: {done.stderr.strip()}")
    return True


def _bridge_exists() -> bool:
    """Whether our bridge exists in this network namespace.

    Asked of ``ip``, not read from /sys/class/net: in a namespace made by ``unshare -n`` /sys
    still shows the namespace that mounted it, so a bridge made here would never be seen there.
    """
    done = subprocess.run(
        ["ip", "link", "show", BRIDGE], capture_output=True, timeout=30, check=False
    )
    return done.returncode == 0


def _ensure_bridge() -> None:
    """Create our bridge with its address unless it exists (dockerd only creates docker0)."""
    if _bridge_exists():
        return
    for cmd in (
        ["ip", "link", "add", BRIDGE, "type", "bridge"],
        ["ip", "addr", "add", BRIDGE_CIDR, "dev", BRIDGE],
        ["ip", "link", "set", BRIDGE, "up"],
    ):
        _run(cmd)


def classify_gateway_holders(
    addresses: list[tuple[str, str]],
    gateway: str,
    network_ids: list[str],
    has_ports: Callable[[str], bool],
) -> tuple[list[str], list[str]]:
    """Pure: which interfaces holding ``gateway`` are stale Docker bridges, and which are not.

    ``addresses`` is (interface, IPv4 address) pairs. A bridge ``br-<first 12 of a network
    id>`` is Docker's; it is stale when no network of this engine has that id and nothing is
    plugged into it. Anything else holding the address (a live bridge with ports, another
    engine's, an interface that is not Docker's) is foreign: not ours to delete.
    """
    own = {f"br-{nid[:12]}" for nid in network_ids}
    stale: list[str] = []
    foreign: list[str] = []
    for ifname, addr in addresses:
        if addr != gateway or ifname in own:
            continue
        docker_bridge = ifname.startswith("br-") and len(ifname) == 15
        if docker_bridge and not has_ports(ifname):
            stale.append(ifname)
        else:
            foreign.append(ifname)
    return stale, foreign


DOCKER_BRIDGE = re.compile(r"\bbr-[0-9a-f]{12}\b")
RULE_TABLES = ("nat", "filter")


def stale_bridge_rules(rules: str, live: set[str]) -> list[list[str]]:
    """Pure: ``iptables -D`` arguments for each rule of ``rules`` naming a bridge not in ``live``.

    ``rules`` is ``iptables -S`` output; a rule is stale when it names a Docker bridge
    (``br-<12 hex>``) that no longer exists. Rules naming only live bridges, or none, stay.
    """
    out: list[list[str]] = []
    for line in rules.splitlines():
        if not line.startswith("-A "):
            continue
        names = set(DOCKER_BRIDGE.findall(line))
        if names and not names <= live:
            out.append(["-D", *shlex.split(line)[1:]])
    return out


def _clear_stale_bridge_rules() -> None:
    """Delete the iptables rules of Docker bridges that no longer exist (see ensure_network)."""
    live = {str(link["ifname"]) for link in json.loads(_run(["ip", "-j", "link", "show"]) or "[]")}
    for table in RULE_TABLES:
        for args in stale_bridge_rules(_run(["iptables", "-t", table, "-S"]), live):
            _run(["iptables", "-t", table, *args])


def _run(cmd: list[str]) -> str:
    """Run a host command (ip, iptables) bounded; its stdout, or one PlaneError naming it."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise PlaneError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
    return done.stdout


def _ipv4_addresses() -> list[tuple[str, str]]:
    """(interface, address) for every IPv4 address in this network namespace, from ``ip -j``."""
    return [
        (str(link["ifname"]), str(info["local"]))
        for link in json.loads(_run(["ip", "-j", "-4", "addr", "show"]) or "[]")
        for info in link.get("addr_info", [])
        if "local" in info
    ]


def _bridge_has_ports(ifname: str) -> bool:
    """Whether any interface is plugged into the bridge (asked of ``ip``, see _bridge_exists)."""
    done = subprocess.run(
        ["ip", "-j", "link", "show", "master", ifname],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.returncode != 0 or bool(json.loads(done.stdout or "[]"))


def _remove_bridge() -> None:
    if _bridge_exists():
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, timeout=30, check=False)


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


def main(argv: list[str] | None = None) -> int:
    """``python3 -m orchestrator.localplane.dockerd up|down|status|env``."""
    parser = argparse.ArgumentParser(prog="python3 -m orchestrator.localplane.dockerd")
    parser.add_argument("command", choices=["up", "down", "status", "env"])
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument(
        "--keep-containers", action="store_true", help="down: leave containers in the data dir"
    )
    parser.add_argument("--purge", action="store_true", help="down: delete the state dir")
    parser.add_argument(
        "--ttl", type=int, default=None, help="up: stop by itself (containers removed) after N s"
    )
    args = parser.parse_args(argv)
    engine = DockerEngine(args.state_dir)

    def say(msg: str) -> None:
        print(f"[dockerd] {msg}", file=sys.stderr)

    try:
        if args.command == "up":
            st = engine.up(ttl_seconds=args.ttl, progress=say)
            print(f"export DOCKER_HOST={st.docker_host}")
        elif args.command == "down":
            engine.down(remove_containers=not args.keep_containers, purge=args.purge, progress=say)
        elif args.command == "env":
            print(f"export DOCKER_HOST={engine.status().docker_host}")
        else:
            st = engine.status()
            print(
                json.dumps(
                    {
                        "stateDir": str(st.state_dir),
                        "dockerHost": st.docker_host,
                        "pid": st.pid,
                        "running": st.running,
                        "healthy": st.healthy,
                        "version": st.version,
                        "log": str(engine.log),
                    }
                )
            )
            return 0 if st.healthy else 1
    except PlaneError as exc:
        say(f"error: {exc}")
        if args.command == "up":
            say(f"last log lines:\n{tail(engine.log)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
