"""The Docker Engine API over the engine's unix socket, standard library only.

One call is :func:`api`; the rest are the few engine operations the environments need (list,
remove, load an image archive), each a PlaneError naming what failed. Nothing here starts or
stops the engine (dockerengine.py) or touches the host's network (hostnet.py).
"""

from __future__ import annotations

import http.client
import json
import socket
import tarfile
from pathlib import Path
from typing import Any

from orchestrator.localplane.processes import PlaneError

PREDEFINED_NETWORKS = ("bridge", "host", "none")  # dockerd's own; it refuses to remove them


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the engine's unix socket."""

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


def pings(sock: Path) -> bool:
    """Whether an engine answers ``/_ping`` on ``sock`` (never raises)."""
    try:
        status, _ = api(sock, "GET", "/_ping", timeout=2.0)
    except OSError:
        return False
    return status == 200


def version(sock: Path) -> str | None:
    """The engine's version, None when it does not say."""
    code, body = api(sock, "GET", "/version")
    return str(body.get("Version")) if code == 200 and isinstance(body, dict) else None


def list_all(sock: Path, path: str, what: str, timeout: float = 60.0) -> list[Any]:
    """One engine LIST (``/networks``, ``/containers/json``), or a PlaneError naming it."""
    code, body = api(sock, "GET", path, timeout=timeout)
    if code != 200 or not isinstance(body, list):
        raise PlaneError(f"listing {what} failed: HTTP {code} {body}")
    return body


def network_ids(sock: Path) -> list[str]:
    """The ID of every network of the engine."""
    return [str(n["Id"]) for n in list_all(sock, "/networks", "networks")]


def has_network(sock: Path, name: str) -> bool:
    """Whether the engine has a network ``name``."""
    code, _ = api(sock, "GET", f"/networks/{name}")
    return code == 200


def create_network(sock: Path, name: str, subnet: str, gateway: str) -> None:
    """Create the bridge network ``name`` with its subnet and gateway, masquerading outward."""
    spec = {
        "Name": name,
        "Driver": "bridge",
        "CheckDuplicate": True,
        "IPAM": {"Driver": "default", "Config": [{"Subnet": subnet, "Gateway": gateway}]},
        "Options": {"com.docker.network.bridge.enable_ip_masquerade": "true"},
    }
    code, reply = api(sock, "POST", "/networks/create", body=spec)
    if code != 201:
        raise PlaneError(f"creating network {name} failed: HTTP {code} {reply}")


def remove_networks(sock: Path, timeout: float = 60.0) -> list[str]:
    """Remove the engine's own networks, so that dockerd deletes their bridges with them."""
    removed = []
    for n in list_all(sock, "/networks", "networks", timeout):
        if n.get("Name") in PREDEFINED_NETWORKS:
            continue
        code, reply = api(sock, "DELETE", f"/networks/{n['Id']}", timeout=timeout)
        if code not in (204, 404):
            raise PlaneError(f"removing network {n.get('Name')} failed: HTTP {code} {reply}")
        removed.append(str(n.get("Name")))
    return removed


def remove_containers(sock: Path, timeout: float = 120.0) -> list[str]:
    """Force-remove every container of the engine (kind nodes, CAPD machines) and volumes."""
    removed = []
    for c in list_all(sock, "/containers/json?all=1", "containers", timeout):
        cid = str(c["Id"])
        code, reply = api(sock, "DELETE", f"/containers/{cid}?force=1&v=1", timeout=timeout)
        if code not in (204, 404):
            raise PlaneError(f"removing container {cid[:12]} failed: HTTP {code} {reply}")
        names = c.get("Names") or [cid[:12]]
        removed.append(str(names[0]).lstrip("/"))
    return removed


def image_id(sock: Path, tag: str) -> str | None:
    """The ID of the image ``tag`` in the engine, None when it has none."""
    code, body = api(sock, "GET", f"/images/{tag}/json")
    return str(body["Id"]) if code == 200 and isinstance(body, dict) else None


def load_archive(sock: Path, archive: Path, timeout: float = 900.0) -> list[str]:
    """Load a ``docker save`` archive unless the engine has each of its images by ID.

    Returns the tags it loaded (empty when every image was there already).
    """
    wanted = archive_images(archive)
    if all(image_id(sock, tag) == image for tag, image in wanted.items()):
        return []
    code, reply = api(sock, "POST", "/images/load?quiet=1", timeout=timeout, upload=archive)
    if code != 200 or (isinstance(reply, dict) and reply.get("error")):
        raise PlaneError(f"loading {archive} failed: HTTP {code} {reply}")
    return sorted(wanted)


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
