"""NetworkLatency: keep a workload within a round-trip budget of a cluster or a region.

RTTs come from ``snapshot.network``. A cluster is 0 ms from itself and from its own region; the RTT
to another region is the best measured RTT to any of its clusters. A link that was never measured
fails the constraint: placing a latency-sensitive workload on a guess is worse than not placing it.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import FITS, ClusterFact, FilterResult, WorkloadFact, unfit


class NetworkLatency:
    """Reject clusters farther than ``maxLatency.rttMs`` from the named cluster or region."""

    name = "NetworkLatency"
    cluster_facts: frozenset[ClusterFact] = frozenset({"network", "region"})
    workload_facts: frozenset[WorkloadFact] = frozenset({"latency"})

    def fits(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> bool:
        """``filter(...).fits`` without the reason text."""
        limit = workload.placement.max_latency
        if limit is None:
            return True
        if limit.to_cluster is not None:
            rtt = ctx.rtt(cluster.name, limit.to_cluster)
        else:
            rtt = ctx.rtt_to_region(cluster, limit.to_region or "")
        return rtt is not None and rtt <= limit.max_rtt_ms

    def filter(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> FilterResult:
        """Compare the measured RTT with the budget."""
        limit = workload.placement.max_latency
        if limit is None:
            return FITS
        if limit.to_cluster is not None:
            target = f"cluster {limit.to_cluster}"
            rtt = ctx.rtt(cluster.name, limit.to_cluster)
        else:
            region = limit.to_region or ""
            target = f"region {region}"
            rtt = ctx.rtt_to_region(cluster, region)
        if rtt is None:
            return unfit(f"no RTT measured to {target}")
        if rtt > limit.max_rtt_ms:
            return unfit(f"RTT {rtt:g}ms to {target} exceeds {limit.max_rtt_ms:g}ms")
        return FITS

    def summarized_reasons(
        self, ctx: PlacementContext, workload: Workload, clusters: Sequence[Cluster]
    ) -> list[tuple[str, ...]]:
        """``summarize`` of each cluster's reasons (``fastpath.SummarizedReasons``): two texts."""
        limit = workload.placement.max_latency
        if limit is None:
            return [()] * len(clusters)
        if limit.to_cluster is not None:
            to = limit.to_cluster
            target = f"cluster {to}"
            rtts = [ctx.rtt(c.name, to) for c in clusters]
        else:
            region = limit.to_region or ""
            target = f"region {region}"
            rtts = [ctx.rtt_to_region(c, region) for c in clusters]
        budget = limit.max_rtt_ms
        unknown = (f"no RTT measured to {target}",)
        over = (f"RTT to {target} exceeds {budget:g}ms",)
        return [unknown if rtt is None else over if rtt > budget else () for rtt in rtts]

    def summarize(self, reason: str) -> str:
        """``RTT to region eu-west exceeds 50ms``: the measured RTT differs per cluster."""
        if reason.startswith("RTT ") and "ms to " in reason:
            return "RTT " + reason.split("ms ", 1)[1]
        return reason
