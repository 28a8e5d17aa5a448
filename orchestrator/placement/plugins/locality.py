"""ClusterLocality: stickiness to where the workload runs now (Karmada's ClusterLocality score).

Moving a running workload costs a rollout on two clusters and risks an outage, so the current
placement wins unless a filter rules it out. Its weight (2) outranks the balance score on purpose.
"""

from __future__ import annotations

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import MAX_SCORE, ClusterFact, WorkloadFact


class ClusterLocality:
    """100 on clusters in ``placement.clusters``, 0 elsewhere."""

    name = "ClusterLocality"
    weight = 2
    cluster_facts: frozenset[ClusterFact] = frozenset()
    workload_facts: frozenset[WorkloadFact] = frozenset({"current"})

    def score(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> int:
        """Full score for the current placement."""
        return MAX_SCORE if cluster.name in workload.placement.clusters else 0
