"""SpreadConstraint: a cluster without the field a workload spreads by cannot count toward it.

Karmada's filter of the same name: with ``spreadByField: region`` a cluster that has no region
is unfit (it would belong to no group); likewise provider, and zone for a cluster with no zones.
Choosing *which* groups and clusters to use happens after scoring (``placement.spread``): a
per-cluster filter cannot see how many regions the other clusters span.
"""

from __future__ import annotations

from orchestrator.domain.location import SpreadField
from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import FITS, ClusterFact, FilterResult, WorkloadFact, unfit


class SpreadConstraintFilter:
    """Reject clusters lacking the region, zones or provider the workload spreads by."""

    name = "SpreadConstraint"
    cluster_facts: frozenset[ClusterFact] = frozenset({"location"})
    workload_facts: frozenset[WorkloadFact] = frozenset({"spread"})

    def fits(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> bool:
        """``filter(...).fits`` without the reason text."""
        constraints = workload.placement.spread_constraints
        return not constraints or not any(_missing(c.field, cluster) for c in constraints)

    def filter(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> FilterResult:
        """Name the missing field, so the operator knows which to set on the cluster."""
        reasons = [
            f"no {'zones' if c.field == 'zone' else c.field} to spread by"
            for c in workload.placement.spread_constraints
            if _missing(c.field, cluster)
        ]
        return unfit(*reasons) if reasons else FITS


def _missing(field: SpreadField, cluster: Cluster) -> bool:
    if field == "region":
        return cluster.region is None
    if field == "provider":
        return cluster.provider is None
    if field == "zone":
        return not cluster.zones
    return False
