"""The Docker provider of ``calibrator env``: our dockerd, its images, and the plane wired to it.

``calibrator env up --provider docker`` runs the same process-based management plane as the
in-memory default (etcd, kube-apiserver, the four CAPI managers), with CAPD's docker backend
pointed at our own engine (:mod:`orchestrator.localplane.dockerd`) through ``DOCKER_HOST``. The
engine gets what CAPD expects a kind management cluster to have left behind: the user-defined
network ``kind`` (CAPD attaches every machine and load balancer to it and never creates it) and
the images it runs (node images of the kind set, the haproxy load balancer of the haproxy set;
no registry is reachable, so CAPD must find them already loaded).

Which engine belongs to the plane is recorded in ``provider.json`` in the plane's state dir, so
``calibrator env down`` stops it too (after removing its containers).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.localplane import dockerapi
from orchestrator.localplane.components import resolve_bin_dir
from orchestrator.localplane.dockerengine import DockerEngine
from orchestrator.localplane.inotify import (
    InotifyResult,
    KernelLimits,
    ProcSysLimits,
    check_and_raise,
)
from orchestrator.localplane.plane import LocalPlane, PlaneStatus
from orchestrator.localplane.processes import PlaneError

PROVIDERS = ("in-memory", "docker")
# CAPD's network; our range, apart from dockerd's own bridge (172.29.0.0/16) and kind's default.
NETWORK = "kind"
NETWORK_SUBNET = "172.30.0.0/16"
NETWORK_GATEWAY = "172.30.0.1"
PROVIDER_FILE = "provider.json"
ENGINE_TTL_MARGIN = 30


@dataclass(frozen=True)
class DockerEnvUp:
    """What ``up --provider docker`` did, with the seconds each step took."""

    plane: PlaneStatus
    docker_host: str
    docker_state_dir: Path
    loaded: list[str]
    seconds: dict[str, float]
    inotify: InotifyResult


def node_archives(kind_set: Path, versions: list[str] | None) -> list[Path]:
    """The node image archives of a kind set dir, only ``versions`` when given."""
    archives = sorted((kind_set / "images").glob("node-*.tar"))
    if versions:
        wanted = {f"node-{v}.tar" for v in versions}
        missing = wanted - {a.name for a in archives}
        if missing:
            raise PlaneError(f"{kind_set} has no {', '.join(sorted(missing))}")
        archives = [a for a in archives if a.name in wanted]
    return archives


def _provider_file(plane: LocalPlane) -> Path:
    return plane.state_dir / PROVIDER_FILE


def recorded_engine(plane: LocalPlane) -> DockerEngine | None:
    """The engine ``up --provider docker`` recorded for this plane, if any."""
    path = _provider_file(plane)
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    if doc.get("provider") != "docker" or not doc.get("dockerStateDir"):
        return None
    return DockerEngine(Path(str(doc["dockerStateDir"])))


def up(
    plane: LocalPlane,
    *,
    docker_state_dir: Path | None = None,
    node_versions: list[str] | None = None,
    timeout: float = 300.0,
    ttl_seconds: int | None = None,
    progress: Callable[[str], None] = lambda _: None,
    raise_inotify: bool = False,
    notice: Callable[[str], None] | None = None,
    kernel: KernelLimits | None = None,
) -> DockerEnvUp:
    """Start (or reuse) our dockerd, load the images CAPD needs, then the plane wired to it.

    First the inotify limits (``orchestrator.localplane.inotify``): with ``raise_inotify`` (the
    CLI's default) and as root, each one below kind's value is raised; otherwise a warning with
    the ``sysctl`` command. Every line goes to ``notice`` (default ``progress``), which should
    keep it on screen: a host-wide change is never made silently. The default here is False so
    that a library caller (a test, a benchmark) never changes the host unless it asks to.

    With ``ttl_seconds`` both stop by themselves: the plane after the TTL, dockerd (its
    containers removed) ``ENGINE_TTL_MARGIN`` seconds later, once CAPD is gone and can no longer
    create a machine while the engine is emptied.
    """
    seconds: dict[str, float] = {}
    inotify = check_and_raise(
        kernel or ProcSysLimits(), root=os.geteuid() == 0, may_raise=raise_inotify
    )
    for line in inotify.messages:
        (notice or progress)(line)
    t0 = time.monotonic()
    engine = DockerEngine(docker_state_dir)
    engine_ttl = ttl_seconds + ENGINE_TTL_MARGIN if ttl_seconds else None
    st = engine.up(ttl_seconds=engine_ttl, progress=progress)
    plane.state_dir.mkdir(parents=True, exist_ok=True)
    _provider_file(plane).write_text(
        json.dumps({"provider": "docker", "dockerStateDir": str(engine.state_dir)}) + "\n"
    )
    seconds["dockerd"] = round(time.monotonic() - t0, 1)
    if engine.ensure_network(NETWORK, NETWORK_SUBNET, NETWORK_GATEWAY):
        progress(f"created network {NETWORK} ({NETWORK_SUBNET})")

    t0 = time.monotonic()
    kind_set = resolve_bin_dir(progress, "kind", "CALIBRATOR_KIND_SET_DIR")
    haproxy_set = resolve_bin_dir(progress, "haproxy", "CALIBRATOR_HAPROXY_SET_DIR")
    loaded: list[str] = []
    for archive in [*node_archives(kind_set, node_versions), haproxy_set / "images/haproxy.tar"]:
        progress(f"loading {archive.name} unless the engine has it")
        loaded += dockerapi.load_archive(engine.socket, archive)
    seconds["images"] = round(time.monotonic() - t0, 1)

    t0 = time.monotonic()
    status = plane.up(
        timeout=timeout, ttl_seconds=ttl_seconds, docker_host=st.docker_host, progress=progress
    )
    seconds["plane"] = round(time.monotonic() - t0, 1)
    return DockerEnvUp(status, st.docker_host, engine.state_dir, loaded, seconds, inotify)


def down(
    plane: LocalPlane, purge: bool = False, progress: Callable[[str], None] = lambda _: None
) -> list[str]:
    """Stop the plane, then the engine it recorded (removing every container of that engine)."""
    engine = recorded_engine(plane)
    stopped = plane.down(purge=purge)
    if engine is not None:
        if engine.status().running:
            engine.down(progress=progress)
            stopped.append("dockerd")
        _provider_file(plane).unlink(missing_ok=True)
    return stopped
