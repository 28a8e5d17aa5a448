"""ResourceFit: the cluster must have room for the workload's share, from capacity - allocated.

The share is a full copy for Duplicated workloads and one replica for divided ones (division then
caps every cluster at what fits). Replicas already running on a cluster are credited: their usage
is inside ``allocated``, so staying put never needs new room. A cluster that reports no capacity
is assumed to fit (we cannot prove otherwise) and ResourceBalance scores it lowest.

Free capacity changes as the batch places workloads, so this plugin is dynamic: never cached, and
``filter_batch`` keeps the per-pair cost to one comparison per resource.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.domain.quantity import format_cpu, format_memory
from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext, credited_replicas, minimum_share
from orchestrator.placement.fastpath import Kernel
from orchestrator.placement.framework import FITS, ClusterFact, FilterResult, WorkloadFact, unfit


def needed(workload: Workload, cluster_name: str) -> tuple[int, int]:
    """(millicores, bytes) the cluster must have free to take the workload's minimum share."""
    extra = max(0, minimum_share(workload) - credited_replicas(workload, cluster_name))
    return extra * workload.requests.cpu_milli, extra * workload.requests.memory_bytes


def needed_on_current(ctx: PlacementContext, workload: Workload) -> dict[int, tuple[int, int]]:
    """``needed`` for each current cluster, by index.

    Without recorded counts every current cluster gets the same credit (one computation);
    with them each cluster is credited what it runs.
    """
    current = workload.placement.clusters
    if not current:
        return {}
    index = ctx.index
    if workload.placement.current_replicas is not None:
        return {index[name]: needed(workload, name) for name in current if name in index}
    need = needed(workload, current[0])
    return {index[name]: need for name in current if name in index}


class ResourceFit:
    """Reject clusters without room for the workload's minimum share."""

    name = "ResourceFit"
    shortages = ("insufficient cpu", "insufficient memory")
    cluster_facts: frozenset[ClusterFact] = frozenset({"capacity"})
    workload_facts: frozenset[WorkloadFact] = frozenset(
        {"requests", "replicas", "division", "current"}
    )

    def filter(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> FilterResult:
        """Name each resource that is short, with what is needed and what is free."""
        free = ctx.free(cluster)
        if free is None:
            return FITS
        cpu, mem = needed(workload, cluster.name)
        reasons = []
        if free.cpu_milli < cpu:
            reasons.append(f"needs {format_cpu(cpu)} cpu free, has {format_cpu(free.cpu_milli)}")
        if free.memory_bytes < mem:
            reasons.append(
                f"needs {format_memory(mem)} memory free, has {format_memory(free.memory_bytes)}"
            )
        return unfit(*reasons) if reasons else FITS

    def needs(self, workload: Workload) -> tuple[int, int]:
        """The minimum share's requests: enough on any cluster the workload does not run on."""
        share = minimum_share(workload)
        return share * workload.requests.cpu_milli, share * workload.requests.memory_bytes

    def summarize(self, reason: str) -> str:
        """``insufficient cpu`` / ``insufficient memory``: the amounts differ per cluster."""
        for resource, short in zip(("cpu", "memory"), self.shortages, strict=True):
            if f" {resource} free, has " in reason:
                return short
        return reason

    def filter_batch(
        self, ctx: PlacementContext, workload: Workload, indices: Sequence[int]
    ) -> list[int]:
        """The indices that fit, in order (unknown capacity always fits: see UNKNOWN_FREE)."""
        return self.filter_kernel(ctx, workload)(indices)

    def filter_kernel(self, ctx: PlacementContext, workload: Workload) -> Kernel:
        """``filter_batch`` with the workload's needs and credits worked out once."""
        share = minimum_share(workload)
        req_cpu, req_mem = workload.requests.cpu_milli, workload.requests.memory_bytes
        if share <= 0 or (req_cpu <= 0 and req_mem <= 0):
            return list
        need_cpu, need_mem = share * req_cpu, share * req_mem
        fc, fm = ctx.free_cpu, ctx.free_mem
        credit = needed_on_current(ctx, workload)
        if not credit:

            def fitting(indices: Sequence[int]) -> list[int]:
                return [i for i in indices if fc[i] >= need_cpu and fm[i] >= need_mem]

            return fitting

        def fitting_with_credit(indices: Sequence[int]) -> list[int]:
            # A current cluster may fit only thanks to the replicas it runs already.
            return [
                i
                for i in indices
                if (fc[i] >= need_cpu and fm[i] >= need_mem)
                or (i in credit and fc[i] >= credit[i][0] and fm[i] >= credit[i][1])
            ]

        return fitting_with_credit
