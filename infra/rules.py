"""Version rules a Pulumi stack's CAPI objects must satisfy (pure; the policy pack's logic).

The rules read the generic Kubernetes objects a stack declares (Cluster, KubeadmControlPlane,
MachineDeployment, ClusterClass by apiVersion and kind), not our ComponentResource, so they hold
for any program that declares CAPI clusters, however it builds them. The skew rule itself is
``orchestrator.domain.skew``: there is exactly one copy of Kubernetes' version rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.domain.errors import InputError
from orchestrator.domain.skew import state_violations
from orchestrator.domain.versions import KubeVersion, parse_version

SKEW_POLICY = "capi-version-skew"
ALLOWED_POLICY = "capi-version-allowed"
_CAPI_GROUPS = ("cluster.x-k8s.io/", "controlplane.cluster.x-k8s.io/")


@dataclass(frozen=True, slots=True)
class ResourceView:
    """What a policy sees of one resource: its URN and its input properties."""

    urn: str
    props: Mapping[str, Any]

    @property
    def kind(self) -> str:
        """The Kubernetes kind, or "" for a resource that is not a CAPI object."""
        api_version = self.props.get("apiVersion")
        if not isinstance(api_version, str) or not api_version.startswith(_CAPI_GROUPS):
            return ""
        kind = self.props.get("kind")
        return kind if isinstance(kind, str) else ""

    def field(self, *path: str) -> Any:
        """A nested value, or None if any key on the way is missing."""
        node: Any = self.props
        for key in path:
            if not isinstance(node, Mapping):
                return None
            node = node.get(key)
        return node


@dataclass(frozen=True, slots=True)
class ResourceViolation:
    """One broken rule, attached to the resource a person has to change."""

    policy: str
    urn: str
    message: str


@dataclass(slots=True)
class _ClusterVersions:
    view: ResourceView
    control_plane: tuple[str, ResourceView] | None = None
    workers: list[tuple[str, str, ResourceView]] = field(default_factory=list)
    class_name: str | None = None


def _key(view: ResourceView, name: object) -> tuple[str, str]:
    namespace = view.field("metadata", "namespace")
    return (namespace if isinstance(namespace, str) else "default", str(name))


def _collect(
    resources: Iterable[ResourceView],
) -> tuple[dict[tuple[str, str], _ClusterVersions], dict[tuple[str, str], list[str]]]:
    views = [r for r in resources if r.kind]
    clusters: dict[tuple[str, str], _ClusterVersions] = {}
    classes: dict[tuple[str, str], list[str]] = {}
    control_planes: dict[tuple[str, str], ResourceView] = {}
    for view in views:
        name = view.field("metadata", "name")
        if view.kind == "Cluster":
            entry = _ClusterVersions(view)
            topology = view.field("spec", "topology")
            if isinstance(topology, Mapping) and topology.get("version") is not None:
                entry.control_plane = (str(topology["version"]), view)
                class_ref = view.field("spec", "topology", "classRef", "name") or view.field(
                    "spec", "topology", "class"
                )
                entry.class_name = str(class_ref) if class_ref else None
                workers = view.field("spec", "topology", "workers", "machineDeployments") or []
                for md in workers:
                    if isinstance(md, Mapping):
                        entry.workers.append(
                            (str(md.get("name", "?")), str(topology["version"]), view)
                        )
            clusters[_key(view, name)] = entry
        elif view.kind == "ClusterClass":
            versions = view.field("spec", "kubernetesVersions")
            if isinstance(versions, list):
                classes[_key(view, name)] = [str(v) for v in versions]
        elif view.kind == "KubeadmControlPlane":
            control_planes[_key(view, name)] = view
    for key, entry in clusters.items():
        ref = entry.view.field("spec", "controlPlaneRef", "name")
        kcp = control_planes.get((key[0], str(ref))) if ref else None
        if kcp is not None and entry.control_plane is None:
            entry.control_plane = (str(kcp.field("spec", "version")), kcp)
    for view in views:
        if view.kind != "MachineDeployment":
            continue
        owner = clusters.get(_key(view, view.field("spec", "clusterName")))
        version = view.field("spec", "template", "spec", "version")
        if owner is not None and version is not None:
            name = str(view.field("metadata", "name"))
            owner.workers.append((name, str(version), view))
    return clusters, classes


def _parse(
    raw: str, view: ResourceView, what: str, out: list[ResourceViolation]
) -> KubeVersion | None:
    try:
        return parse_version(raw)
    except InputError as err:
        out.append(ResourceViolation(ALLOWED_POLICY, view.urn, f"{what}: {err}"))
        return None


def fleet_violations(
    resources: Iterable[ResourceView], allowed_versions: Sequence[str] | None = None
) -> list[ResourceViolation]:
    """Every skew and allowed-version violation among the declared CAPI clusters.

    ``allowed_versions`` (the policy pack's config) wins; without it a managed-topology cluster
    must use a version its ClusterClass lists in ``spec.kubernetesVersions`` when the class is
    declared in the same stack, as CAPI's own webhook would demand at apply time.
    """
    out: list[ResourceViolation] = []
    allowed_global: set[KubeVersion] | None = None
    if allowed_versions is not None:
        allowed_global = set()
        for raw in allowed_versions:
            try:
                allowed_global.add(parse_version(raw))
            except InputError as err:
                raise InputError(f"policy config allowedVersions: {err}") from None
    clusters, classes = _collect(resources)
    for (namespace, name), entry in sorted(clusters.items()):
        if entry.control_plane is None:
            continue
        cp_raw, cp_view = entry.control_plane
        control_plane = _parse(cp_raw, cp_view, f"cluster {name} control plane", out)
        allowed = allowed_global
        allowed_source = "the allowed list"
        if allowed is None and entry.class_name and (namespace, entry.class_name) in classes:
            allowed = {parse_version(v) for v in classes[(namespace, entry.class_name)]}
            allowed_source = f"ClusterClass {entry.class_name} spec.kubernetesVersions"
        parsed: list[tuple[str, KubeVersion, ResourceView]] = []
        for pool, raw, view in entry.workers:
            version = _parse(raw, view, f"cluster {name} workers {pool}", out)
            if version is not None:
                parsed.append((pool, version, view))
        if allowed is not None:
            listed = ", ".join(str(v) for v in sorted(allowed))
            checked = [("control plane", control_plane, cp_view)] + [
                (f"workers {pool}", version, view)
                for pool, version, view in parsed
                if view is not cp_view  # topology pools run the topology version: one report
            ]
            for what, version, view in checked:
                if version is not None and version not in allowed:
                    out.append(
                        ResourceViolation(
                            ALLOWED_POLICY,
                            view.urn,
                            f"cluster {name} {what} at {version} is not in {allowed_source} "
                            f"({listed})",
                        )
                    )
        if control_plane is None:
            continue
        by_pool = {pool: view for pool, _, view in parsed}
        workers = [(pool, version) for pool, version, _ in parsed]
        for violation in state_violations(control_plane, workers):
            out.append(
                ResourceViolation(
                    SKEW_POLICY,
                    by_pool.get(violation.pool, cp_view).urn,
                    f"cluster {name}: {violation.message}",
                )
            )
    return out
