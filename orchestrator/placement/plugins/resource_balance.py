"""ResourceBalance: prefer clusters that keep the most free share after taking the workload.

Like kube-scheduler's LeastAllocated: the mean of the free cpu and memory fractions left after the
workload's minimum share, times 100. Spreading load keeps headroom for the clusters that will be
drained next during an upgrade. Unknown capacity scores 0, so such clusters are used last.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import cast

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import MAX_SCORE, ClusterFact, WorkloadFact
from orchestrator.placement.plugins.resource_fit import needed


def _edge(value: int) -> int:
    """The next number above ``value`` with 3 significant bits (an exclusive class bound).

    0 stays 0: a resource with no capacity scores no points, so it costs nothing either.
    """
    if value <= 0:
        return 0
    shift = max(0, value.bit_length() - 3)
    return ((value >> shift) + 1) << shift


class ResourceBalance:
    """Score by free fraction after placing; dynamic, so it has a batch form."""

    name = "ResourceBalance"
    weight = 1
    cluster_facts: frozenset[ClusterFact] = frozenset({"capacity"})
    workload_facts: frozenset[WorkloadFact] = frozenset(
        {"requests", "replicas", "division", "current"}
    )

    def score(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> int:
        """0..100; 0 for unknown capacity."""
        i = ctx.index[cluster.name]
        free = ctx.free(cluster)
        if free is None:
            return 0
        cpu, mem = needed(workload, cluster.name)
        points = (free.cpu_milli - cpu) * ctx.cpu_points[i] + (
            free.memory_bytes - mem
        ) * ctx.mem_points[i]
        return min(MAX_SCORE, max(0, int(points)))

    def bound_class(self, ctx: PlacementContext, i: int) -> Hashable:
        """Capacity rounded up to 3 significant bits: few classes, discounts within 12.5%."""
        if not ctx.known[i]:
            return None
        return _edge(ctx.cap_cpu[i]), _edge(ctx.cap_mem[i])

    def upper_bound(self, ctx: PlacementContext, i: int) -> int:
        """The score of a workload requesting nothing: taking more only lowers it."""
        points = ctx.free_cpu[i] * ctx.cpu_points[i] + ctx.free_mem[i] * ctx.mem_points[i]
        return min(MAX_SCORE, math.ceil(points))

    def discounts(
        self, ctx: PlacementContext, workload: Workload, classes: Sequence[Hashable]
    ) -> list[float]:
        """What the workload's share costs at least on a cluster of each class.

        A class ``(c, m)`` holds capacities below c millicores and m bytes, so each unit
        requested costs more than 50 / c points there. Credits on current clusters do not
        matter: the scheduler scores those exactly.
        """
        cpu, mem = needed(workload, "")
        out: list[float] = []
        for cls in classes:
            if isinstance(cls, tuple):
                cpu_edge, mem_edge = cast(tuple[int, int], cls)
                out.append(
                    (cpu * 50 / cpu_edge if cpu_edge else 0.0)
                    + (mem * 50 / mem_edge if mem_edge else 0.0)
                )
            else:
                out.append(0.0)
        return out

    def score_batch(
        self, ctx: PlacementContext, workload: Workload, indices: Sequence[int]
    ) -> list[int]:
        """Same as ``score`` per index, as one comprehension.

        No upper clamp is needed: free never exceeds capacity, so each half is at most 50.
        """
        fc, fm, pc, pm = ctx.free_cpu, ctx.free_mem, ctx.cpu_points, ctx.mem_points
        cpu, mem = needed(workload, "")
        scores = [int((fc[i] - cpu) * pc[i] + (fm[i] - mem) * pm[i]) for i in indices]
        for name in workload.placement.clusters:
            i = ctx.index.get(name, -1)
            if i in indices:
                c, m = needed(workload, name)
                scores[indices.index(i)] = int((fc[i] - c) * pc[i] + (fm[i] - m) * pm[i])
        if scores and min(scores) < 0:
            scores = [max(0, s) for s in scores]
        return scores
