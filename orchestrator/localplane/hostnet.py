"""The host's side of our Docker engine's networking: its bridge, iptables and IP forwarding.

dockerd changes the host for the whole network namespace: it turns IP forwarding on, sets the
FORWARD policy to DROP, and leaves a bridge and iptables rules behind when it is killed. This
module makes our own bridge, reads and restores what dockerd changes, and clears what an earlier
engine left, so that ``down`` leaves the host as ``up`` found it. Every command is ``ip`` or
``iptables``, bounded; the pure rules (:func:`parse_forward_policy`,
:func:`classify_gateway_holders`, :func:`stale_bridge_rules`) are tested as tables.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from orchestrator.localplane.processes import PlaneError, which

# Our own bridge, so that this engine never shares docker0 (or its iptables rules) with another
# engine on the host. Linux limits interface names to 15 characters.
BRIDGE = "fc-docker0"
BRIDGE_CIDR = "172.29.0.1/16"
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
DOCKER_BRIDGE = re.compile(r"\bbr-[0-9a-f]{12}\b")
RULE_TABLES = ("nat", "filter")


def read_ip_forward() -> str | None:
    """``net.ipv4.ip_forward`` now ("0" or "1"), None when unreadable."""
    try:
        return IP_FORWARD.read_text().strip()
    except OSError:
        return None


def restore_ip_forward(saved: object) -> bool:
    """Put ``net.ipv4.ip_forward`` back to ``saved`` if it changed; True when it did."""
    if saved not in ("0", "1") or read_ip_forward() in (None, saved):
        return False
    IP_FORWARD.write_text(f"{saved}\n")
    return True


def parse_forward_policy(rules: str) -> str | None:
    """The policy in ``iptables -S FORWARD`` output (``-P FORWARD ACCEPT``), None if absent."""
    for line in rules.splitlines():
        parts = line.split()
        if parts[:2] == ["-P", "FORWARD"] and len(parts) == 3 and parts[2] in ("ACCEPT", "DROP"):
            return parts[2]
    return None


def forward_policy() -> str | None:
    """The host's filter FORWARD policy now; None when iptables is missing or refuses."""
    iptables = which("iptables")
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
    iptables = which("iptables")
    done = subprocess.run(
        [str(iptables), "-P", "FORWARD", saved],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise PlaneError(f"iptables -P FORWARD {saved} failed: {done.stderr.strip()}")
    return True


def bridge_exists() -> bool:
    """Whether our bridge exists in this network namespace.

    Asked of ``ip``, not read from /sys/class/net: in a namespace made by ``unshare -n`` /sys
    still shows the namespace that mounted it, so a bridge made here would never be seen there.
    """
    done = subprocess.run(
        ["ip", "link", "show", BRIDGE], capture_output=True, timeout=30, check=False
    )
    return done.returncode == 0


def ensure_bridge() -> None:
    """Create our bridge with its address unless it exists (dockerd only creates docker0)."""
    if bridge_exists():
        return
    for cmd in (
        ["ip", "link", "add", BRIDGE, "type", "bridge"],
        ["ip", "addr", "add", BRIDGE_CIDR, "dev", BRIDGE],
        ["ip", "link", "set", BRIDGE, "up"],
    ):
        _run(cmd)


def remove_bridge() -> None:
    """Delete our bridge if it exists."""
    if bridge_exists():
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, timeout=30, check=False)


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


def clear_stale_bridges(gateway: str, network_ids: list[str]) -> None:
    """Delete the empty bridges an earlier engine left holding ``gateway``; refuse others.

    ``network_ids`` are the engine's networks now. A dockerd stopped without removing its
    networks (killed, or an older ``down``) leaves its ``br-<id>`` interface and that
    interface's route to the subnet. A new engine's network with the same subnet then gets a
    second route, and the host reaches its containers through the dead bridge: "no route to
    host" to every CAPD machine. It also leaves its iptables rules, among them ``POSTROUTING -s
    SUBNET ! -o br-<old> -j MASQUERADE``, which masquerades traffic between the new network's
    own containers: a joining etcd then reaches its peer from the gateway's address and is
    rejected.
    """
    stale, foreign = classify_gateway_holders(
        _ipv4_addresses(), gateway, network_ids, _bridge_has_ports
    )
    if foreign:
        raise PlaneError(
            f"{gateway} is already on {', '.join(foreign)}, which this engine does not own; "
            "stop what made it (another engine?) before starting this one"
        )
    for ifname in stale:
        _run(["ip", "link", "del", ifname])
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
    """Whether any interface is plugged into the bridge (asked of ``ip``, see bridge_exists)."""
    done = subprocess.run(
        ["ip", "-j", "link", "show", "master", ifname],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.returncode != 0 or bool(json.loads(done.stdout or "[]"))
