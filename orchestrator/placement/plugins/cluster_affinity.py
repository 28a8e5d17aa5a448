"""ClusterAffinity: the workload's required cluster names / label selector.

A policy may list several affinities as ordered fallbacks (Karmada ``clusterAffinities``: "prefer
EU, fall back to US"). The scheduler tries them in order and hands this plugin a view of the
workload whose ``affinities`` holds only the term being tried, so the plugin itself checks one term.
"""

from __future__ import annotations

from collections.abc import Collection

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import FITS, ClusterFact, FilterResult, WorkloadFact, unfit


class ClusterAffinity:
    """Names (if any) AND selector AND not excluded, like Karmada's ClusterAffinity filter."""

    name = "ClusterAffinity"
    cluster_facts: frozenset[ClusterFact] = frozenset({"labels", "name"})
    workload_facts: frozenset[WorkloadFact] = frozenset({"affinity"})

    def named_clusters(self, workload: Workload) -> Collection[str]:
        """Only listed or excluded names matter; every other cluster is judged by its labels."""
        affinities = workload.placement.affinities
        if not affinities:
            return ()
        term = affinities[0]
        return (*term.cluster_names, *term.exclude)

    def only_named(self, workload: Workload) -> bool:
        """A clusterNames list rejects every other cluster, whatever its labels."""
        affinities = workload.placement.affinities
        return bool(affinities and affinities[0].cluster_names)

    def fits(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> bool:
        """``filter(...).fits`` without the reason text."""
        affinities = workload.placement.affinities
        return not affinities or affinities[0].matches(cluster)

    def filter(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> FilterResult:
        """Check the first (active) affinity term; no term admits every cluster."""
        affinities = workload.placement.affinities
        if not affinities:
            return FITS
        term = affinities[0]
        reasons: list[str] = []
        if cluster.name in term.exclude:
            reasons.append("excluded by cluster affinity")
        if term.cluster_names and cluster.name not in term.cluster_names:
            reasons.append(f"not in clusterNames {','.join(term.cluster_names)}")
        if not term.selector.matches(cluster.labels):
            reasons.append(f"labels do not match {term.selector.describe()}")
        return unfit(*reasons) if reasons else FITS
