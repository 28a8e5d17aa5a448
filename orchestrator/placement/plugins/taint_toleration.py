"""TaintToleration: Kubernetes taint semantics applied to clusters (as Karmada does).

* ``NoSchedule``: no *new* placement unless tolerated; a workload already on the cluster may stay
  (Karmada's filter skips NoSchedule for clusters already in the binding). This is what lets the
  orchestrator taint a cluster while upgrading it without kicking everything off.
* ``NoExecute``: no placement and eviction of what runs there unless tolerated.
  ``tolerationSeconds`` counts as tolerated here: placement is clockless, and bounding how long
  the toleration lasts is the executor's job (kube-scheduler ignores it too).
* ``PreferNoSchedule``: never rejects; the score drops with each untolerated one.
"""

from __future__ import annotations

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.domain.taints import Taint, untolerated
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import (
    FITS,
    MAX_SCORE,
    ClusterFact,
    FilterResult,
    WorkloadFact,
    unfit,
)


def describe_taint(taint: Taint) -> str:
    """Kubectl's ``key=value:Effect`` form."""
    return f"{taint.key}={taint.value}:{taint.effect}"


class TaintToleration:
    """Filter on NoSchedule/NoExecute, score on PreferNoSchedule."""

    name = "TaintToleration"
    weight = 1
    cluster_facts: frozenset[ClusterFact] = frozenset({"taints"})
    workload_facts: frozenset[WorkloadFact] = frozenset({"tolerations", "current"})

    def filter(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> FilterResult:
        """Reject on untolerated hard taints; NoSchedule spares the current placement."""
        if not cluster.taints:
            return FITS
        staying = cluster.name in workload.placement.clusters
        reasons = [
            f"untolerated taint {describe_taint(t)}"
            for t in untolerated(cluster.taints, workload.placement.tolerations)
            if t.effect == "NoExecute" or (t.effect == "NoSchedule" and not staying)
        ]
        return unfit(*reasons) if reasons else FITS

    def fits(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> bool:
        """``filter(...).fits`` without the reason text."""
        if not cluster.taints:
            return True
        staying = cluster.name in workload.placement.clusters
        return not any(
            t.effect == "NoExecute" or (t.effect == "NoSchedule" and not staying)
            for t in untolerated(cluster.taints, workload.placement.tolerations)
        )

    def score(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> int:
        """100 without untolerated PreferNoSchedule taints, then 50, 33, 25, ..."""
        if not cluster.taints:
            return MAX_SCORE
        soft = [
            t
            for t in untolerated(cluster.taints, workload.placement.tolerations)
            if t.effect == "PreferNoSchedule"
        ]
        return MAX_SCORE // (1 + len(soft))
