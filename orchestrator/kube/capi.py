"""Cluster API objects as the orchestrator reads them (v1beta2 first, v1beta1 understood).

Readers return plain dicts; helpers here interpret conditions and rollout state with CAPI's own
completion rules so that waits in activities and tests agree on what "done" means.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CLUSTER = ("cluster.x-k8s.io/v1beta2", "Cluster")
CLUSTER_CLASS = ("cluster.x-k8s.io/v1beta2", "ClusterClass")
MACHINE = ("cluster.x-k8s.io/v1beta2", "Machine")
MACHINE_DEPLOYMENT = ("cluster.x-k8s.io/v1beta2", "MachineDeployment")
KUBEADM_CONTROL_PLANE = ("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane")
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
# CAPI's MachineDeployment-topology knobs (sigs.k8s.io/cluster-api api/core/v1beta2, v1.13).
DEFER_ANNOTATION = "topology.cluster.x-k8s.io/defer-upgrade"
HOLD_ANNOTATION = "topology.cluster.x-k8s.io/hold-upgrade-sequence"
TOPOLOGY_MD_LABEL = "topology.cluster.x-k8s.io/deployment-name"


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` (empty when absent)."""
    return obj.get("metadata") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.annotations`` (empty when absent)."""
    return meta(obj).get("annotations") or {}


def topology(cluster: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``spec.topology`` of a managed-topology Cluster (one with a version), else None."""
    topo = (cluster.get("spec") or {}).get("topology")
    return topo if topo and topo.get("version") else None


def md_version(md: Mapping[str, Any]) -> str:
    """The version a MachineDeployment's own template declares ("" when it declares none)."""
    version = (((md.get("spec") or {}).get("template") or {}).get("spec") or {}).get("version")
    return "" if version is None else str(version)


def md_topologies(cluster: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``spec.topology.workers.machineDeployments`` (empty without a topology)."""
    topo = (cluster.get("spec") or {}).get("topology") or {}
    return list((topo.get("workers") or {}).get("machineDeployments") or [])


def deferred(topologies: Sequence[Mapping[str, Any]], name: str) -> bool:
    """CAPI's isMachineDeploymentDeferred for the MachineDeployment topology ``name``.

    Deferred: defer-upgrade or hold-upgrade-sequence on the entry, or hold-upgrade-sequence
    on an entry listed before it.
    """
    for entry in topologies:
        notes = (entry.get("metadata") or {}).get("annotations") or {}
        if entry.get("name") == name:
            return DEFER_ANNOTATION in notes or HOLD_ANNOTATION in notes
        if HOLD_ANNOTATION in notes:
            return True
    return False


def pool_declared(cluster: Mapping[str, Any], md: Mapping[str, Any]) -> str:
    """The version a pool declares: its own, or topology.version for a managed topology.

    A deferred topology pool keeps its own version (CAPI leaves it where it is).
    """
    topo = topology(cluster)
    if not topo:
        return md_version(md)
    name = (meta(md).get("labels") or {}).get(TOPOLOGY_MD_LABEL)
    if not name or deferred(md_topologies(cluster), str(name)):
        return md_version(md)
    return str(topo["version"])


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The condition of type ``kind`` from status.conditions (v1beta2) or v1beta1's location."""
    status = obj.get("status") or {}
    for source in (status.get("conditions"), (status.get("v1beta2") or {}).get("conditions")):
        for cond in source or []:
            if cond.get("type") == kind:
                return dict(cond)
    return None


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    """Condition ``kind`` is present, True, and observed for the current generation."""
    cond = condition(obj, kind)
    if cond is None or cond.get("status") != "True":
        return False
    observed = cond.get("observedGeneration")
    generation = (obj.get("metadata") or {}).get("generation")
    return observed is None or generation is None or observed == generation


def control_plane_rolled_out(kcp: Mapping[str, Any]) -> bool:
    """KCP rollout finished: generation observed, every replica up to date at spec.version.

    (v1beta2: observedGeneration, upToDateReplicas == replicas == spec.replicas, status.version
    equals spec.version, RollingOut False, Available True.)
    """
    spec = kcp.get("spec") or {}
    status = kcp.get("status") or {}
    meta = kcp.get("metadata") or {}
    want = spec.get("replicas", 1)
    if status.get("observedGeneration") != meta.get("generation"):
        return False
    if status.get("version") not in (None, spec.get("version")):
        return False
    versions = status.get("versions")
    if versions and any(v.get("version") != spec.get("version") for v in versions):
        return False
    if not (status.get("upToDateReplicas") == status.get("replicas") == want):
        return False
    rolling = condition(kcp, "RollingOut")
    return (rolling is None or rolling.get("status") == "False") and is_true(kcp, "Available")


def machine_deployment_rolled_out(md: Mapping[str, Any]) -> bool:
    """MachineDeployment rollout finished (v1beta2 counters and RollingOut condition)."""
    spec = md.get("spec") or {}
    status = md.get("status") or {}
    meta = md.get("metadata") or {}
    want = spec.get("replicas", 1)
    if status.get("observedGeneration") != meta.get("generation"):
        return False
    if not (status.get("upToDateReplicas") == status.get("replicas") == want):
        return False
    if status.get("availableReplicas") != want:
        return False
    rolling = condition(md, "RollingOut")
    return rolling is None or rolling.get("status") == "False"


def infrastructure_kind(cluster: Mapping[str, Any]) -> str | None:
    """The kind of the Cluster's infrastructure object (``DockerCluster``, ``AWSCluster``, ...)."""
    ref = (cluster.get("spec") or {}).get("infrastructureRef") or {}
    kind = ref.get("kind") if isinstance(ref, Mapping) else None
    return kind if isinstance(kind, str) and kind else None


def failure_domain_names(cluster: Mapping[str, Any]) -> list[str]:
    """Names of the Cluster's failure domains: v1beta2 lists them, v1beta1 maps name -> spec."""
    domains = (cluster.get("status") or {}).get("failureDomains")
    if isinstance(domains, Mapping):
        return [str(name) for name in domains]
    if isinstance(domains, list):
        return [str(d.get("name")) for d in domains if isinstance(d, Mapping) and d.get("name")]
    return []
