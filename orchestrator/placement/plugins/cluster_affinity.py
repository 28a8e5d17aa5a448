"""ClusterAffinity: the workload's required cluster names / label selector / field selector.

The field selector (Karmada's ``fieldSelector``) reads the cluster fields provider, region and
zones (``domain.location``), not labels; a cluster may be rejected by both, and says so twice.

A policy may list several affinities as ordered fallbacks (Karmada ``clusterAffinities``: "prefer
EU, fall back to US"). The scheduler tries them in order and hands this plugin a view of the
workload whose ``affinities`` holds only the term being tried, so the plugin itself checks one term.
"""

from __future__ import annotations

from collections.abc import Collection

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import FITS, ClusterFact, FilterResult, WorkloadFact, unfit


class ClusterAffinityFilter:
    """Names (if any) AND selectors AND not excluded, like Karmada's ClusterAffinity filter."""

    name = "ClusterAffinity"
    cluster_facts: frozenset[ClusterFact] = frozenset({"labels", "location", "name"})
    workload_facts: frozenset[WorkloadFact] = frozenset({"affinity"})

    def named_clusters(self, workload: Workload) -> Collection[str]:
        """Only listed or excluded names matter; every other cluster is judged by its labels."""
        affinities = workload.placement.affinities
        if not affinities:
            return ()
        term = affinities[0]
        return (*term.cluster_names, *term.exclude)

    def only_named(self, workload: Workload) -> bool:
        """A clusterNames list alone rejects every other cluster for one and the same reason.

        Selectors beside it add reasons of their own, which differ per label and field class.
        """
        affinities = workload.placement.affinities
        if not affinities:
            return False
        term = affinities[0]
        return (
            bool(term.cluster_names) and term.selector.is_empty() and term.field_selector.is_empty()
        )

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
        fields = term.field_selector
        if fields.match_expressions and not fields.matches(cluster.location):
            reasons.append(f"fields do not match {fields.describe()}")
        return unfit(*reasons) if reasons else FITS
