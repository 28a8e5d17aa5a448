"""The fleet a Pulumi stack declares, parsed from stack config and validated up front (pure).

Stack config is untyped YAML written by people, so every defect becomes one ``FleetSpecError``
naming the exact key (``clusters[2].machineDeployments[0].version: ...``) before a single
resource is registered: a half-declared fleet must never reach the engine. Workloads use the
FleetSnapshot workload format, so they are validated by the snapshot parser itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.domain.errors import InputError
from orchestrator.domain.snapshot import Workload
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion, parse_version

Backend = Literal["in-memory", "docker"]
BACKENDS: tuple[Backend, ...] = ("in-memory", "docker")
CONFIG_NAMESPACE = "calibrator-fleet"


class FleetSpecError(InputError):
    """Stack config that does not describe a valid fleet."""


@dataclass(frozen=True, slots=True)
class MachineDeploymentSpec:
    """One worker pool; ``version`` is only for clusters without a managed topology."""

    name: str
    replicas: int = 1
    version: KubeVersion | None = None
    worker_class: str = "worker"


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """One CAPI cluster; with ``topology`` it comes from our ClusterClass (the default)."""

    name: str
    version: KubeVersion
    control_plane_replicas: int = 1
    machine_deployments: tuple[MachineDeploymentSpec, ...] = (MachineDeploymentSpec("md-0"),)
    labels: Mapping[str, str] | None = None
    topology: bool = True

    def worker_version(self, md: MachineDeploymentSpec) -> KubeVersion:
        """A topology pool always runs the topology version; a plain one may pin its own."""
        return md.version if md.version is not None and not self.topology else self.version


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """Everything one stack provisions: the ClusterClass, its clusters and FleetWorkloads."""

    namespace: str
    backend: Backend
    clusters: tuple[ClusterSpec, ...]
    workloads: tuple[Workload, ...] = ()
    wait_for_available: bool = True


_DNS1123 = set("abcdefghijklmnopqrstuvwxyz0123456789-")


def _name(raw: object, where: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise FleetSpecError(f"{where}: must be a non-empty string")
    if not set(raw) <= _DNS1123 or raw[0] == "-" or raw[-1] == "-" or len(raw) > 63:
        raise FleetSpecError(
            f"{where}: {raw!r} is not a DNS-1123 label (lower case letters, digits and '-')"
        )
    return raw


def _int(raw: object, where: str, minimum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < minimum:
        raise FleetSpecError(f"{where}: must be an integer >= {minimum}, got {raw!r}")
    return raw


def _mapping(raw: object, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise FleetSpecError(f"{where}: must be a mapping")
    return raw


def _list(raw: object, where: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise FleetSpecError(f"{where}: must be a list")
    return raw


def _fields(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise FleetSpecError(
            f"{where}: unknown field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
        )


def _version(raw: object, where: str) -> KubeVersion:
    try:
        return parse_version(raw)
    except InputError as err:
        raise FleetSpecError(f"{where}: {err}") from None


def _md(raw: object, where: str, topology: bool) -> MachineDeploymentSpec:
    data = _mapping(raw, where)
    _fields(data, {"name", "replicas", "version", "class"}, where)
    version = None
    if "version" in data:
        if topology:
            raise FleetSpecError(
                f"{where}.version: a managed-topology cluster runs every pool at the topology "
                "version; set topology: false to pin a pool's version"
            )
        version = _version(data["version"], f"{where}.version")
    worker_class = data.get("class", "worker")
    if not isinstance(worker_class, str) or not worker_class:
        raise FleetSpecError(f"{where}.class: must be a non-empty string")
    return MachineDeploymentSpec(
        name=_name(data.get("name"), f"{where}.name"),
        replicas=_int(data.get("replicas", 1), f"{where}.replicas", 0),
        version=version,
        worker_class=worker_class,
    )


def _cluster(raw: object, where: str) -> ClusterSpec:
    data = _mapping(raw, where)
    _fields(
        data,
        {"name", "version", "controlPlaneReplicas", "machineDeployments", "labels", "topology"},
        where,
    )
    topology = data.get("topology", True)
    if not isinstance(topology, bool):
        raise FleetSpecError(f"{where}.topology: must be true or false")
    mds_raw = data.get("machineDeployments", [{"name": "md-0"}])
    mds = tuple(
        _md(m, f"{where}.machineDeployments[{i}]", topology)
        for i, m in enumerate(_list(mds_raw, f"{where}.machineDeployments"))
    )
    if len({m.name for m in mds}) != len(mds):
        raise FleetSpecError(f"{where}.machineDeployments: duplicate names")
    if not topology and len(mds) > 0 and any(m.worker_class != "worker" for m in mds):
        raise FleetSpecError(f"{where}.machineDeployments: class needs topology: true")
    labels = _mapping(data.get("labels") or {}, f"{where}.labels")
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise FleetSpecError(f"{where}.labels: keys and values must be strings")
    if "version" not in data:
        raise FleetSpecError(f"{where}: missing required field 'version'")
    return ClusterSpec(
        name=_name(data.get("name"), f"{where}.name"),
        version=_version(data["version"], f"{where}.version"),
        control_plane_replicas=_int(
            data.get("controlPlaneReplicas", 1), f"{where}.controlPlaneReplicas", 1
        ),
        machine_deployments=mds,
        labels=dict(labels),
        topology=topology,
    )


def parse_fleet(config: Mapping[str, Any]) -> FleetSpec:
    """Validate the stack's ``calibrator-fleet:*`` values (keys without the namespace prefix)."""
    _fields(
        config,
        {"namespace", "backend", "clusters", "workloads", "waitForAvailable", "kubeconfig"},
        "config",
    )
    namespace = _name(config.get("namespace", "fleet"), "namespace")
    backend = config.get("backend", "in-memory")
    if backend not in BACKENDS:
        raise FleetSpecError(f"backend: must be one of {', '.join(BACKENDS)}, got {backend!r}")
    clusters = tuple(
        _cluster(c, f"clusters[{i}]")
        for i, c in enumerate(_list(config.get("clusters"), "clusters"))
    )
    if not clusters:
        raise FleetSpecError("clusters: a fleet needs at least one cluster")
    names = [c.name for c in clusters]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise FleetSpecError(f"clusters: duplicate cluster name(s) {', '.join(dups)}")
    for i, cluster in enumerate(clusters):
        if backend == "docker" and not cluster.topology:
            raise FleetSpecError(
                f"clusters[{i}].topology: the docker backend has only the ClusterClass template; "
                "plain KCP + MachineDeployment clusters need backend in-memory"
            )
    wait = config.get("waitForAvailable", True)
    if not isinstance(wait, bool):
        raise FleetSpecError("waitForAvailable: must be true or false")
    # Workloads and their cluster references are checked by the snapshot parser, the one
    # authority on that format; the version list is the policy pack's business, not the parser's.
    try:
        parsed = snapshot_from_mapping(
            {
                "clusters": [
                    {"name": c.name, "controlPlane": {"version": str(c.version)}} for c in clusters
                ],
                "workloads": _list(config.get("workloads"), "workloads"),
            }
        )
    except InputError as err:
        raise FleetSpecError(str(err)) from None
    return FleetSpec(namespace, backend, clusters, parsed.workloads, wait)
