"""Cluster API objects as the orchestrator reads them (v1beta2 first, v1beta1 understood).

Readers return plain dicts; helpers here interpret conditions and rollout state with CAPI's own
completion rules so that waits in activities and tests agree on what "done" means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CLUSTER = ("cluster.x-k8s.io/v1beta2", "Cluster")
MACHINE = ("cluster.x-k8s.io/v1beta2", "Machine")
MACHINE_DEPLOYMENT = ("cluster.x-k8s.io/v1beta2", "MachineDeployment")
KUBEADM_CONTROL_PLANE = ("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane")
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"


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
