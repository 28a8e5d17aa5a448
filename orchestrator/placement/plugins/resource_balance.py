"""ResourceBalance: prefer clusters that keep the most free share after taking the workload.

Like kube-scheduler's LeastAllocated: the mean of the free cpu and memory fractions left after the
workload's minimum share, times 100. Spreading load keeps headroom for the clusters that will be
drained next during an upgrade. Unknown capacity scores 0, so such clusters are used last.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import cast

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext, minimum_share
from orchestrator.placement.fastpath import ScoreKernelFn
from orchestrator.placement.framework import MAX_SCORE, ClusterFact, WorkloadFact
from orchestrator.placement.plugins.resource_fit import needed, needed_on_current


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
        """Capacity rounded up to 3 significant bits (few classes, discounts within 12.5%).

        The class is named by what a unit costs at least there: points per millicore and per
        byte at the rounded-up capacity, so ``discounts`` is one multiply-add per class.
        """
        if not ctx.known[i]:
            return None
        cpu_edge, mem_edge = _edge(ctx.cap_cpu[i]), _edge(ctx.cap_mem[i])
        return (50 / cpu_edge if cpu_edge else 0.0), (50 / mem_edge if mem_edge else 0.0)

    def upper_bound(self, ctx: PlacementContext, i: int) -> float:
        """The points of a workload requesting nothing, before ``int``: taking more only lowers it.

        Float arithmetic is monotonic, so ``(free - need) * points`` never exceeds
        ``free * points`` and the bound holds exactly, without rounding up. Never below 0, like
        the score (a registry without ResourceFit may leave free capacity below zero).
        """
        points = ctx.free_cpu[i] * ctx.cpu_points[i] + ctx.free_mem[i] * ctx.mem_points[i]
        return min(MAX_SCORE, max(0.0, points))

    def upper_bounds(self, ctx: PlacementContext, indices: Sequence[int]) -> list[float]:
        """``upper_bound`` of each index, as one comprehension."""
        fc, fm, pc, pm = ctx.free_cpu, ctx.free_mem, ctx.cpu_points, ctx.mem_points
        return [
            (p if p < MAX_SCORE else MAX_SCORE)
            if (p := fc[i] * pc[i] + fm[i] * pm[i]) > 0.0
            else 0.0
            for i in indices
        ]

    def discounts(
        self, ctx: PlacementContext, workload: Workload, classes: Sequence[Hashable]
    ) -> list[float]:
        """What the workload's share costs at least on a cluster of each class.

        A class holds capacities below its edges, so each unit requested costs more than the
        class's points per unit. Credits on current clusters do not matter: the scheduler
        scores those exactly.
        """
        cpu, mem = needed(workload, "")
        rates = cast(Sequence[tuple[float, float] | None], classes)
        return [0.0 if r is None else cpu * r[0] + mem * r[1] for r in rates]

    def score_batch(
        self, ctx: PlacementContext, workload: Workload, indices: Sequence[int]
    ) -> list[int]:
        """Same as ``score`` per index, as one comprehension (see ``score_kernel``).

        No upper clamp is needed: free never exceeds capacity, so each half is at most 50.
        """
        return self.score_kernel(ctx, workload)(indices, None)

    def score_kernel(self, ctx: PlacementContext, workload: Workload) -> ScoreKernelFn:
        """``score_batch`` with the workload's needs and credits worked out once."""
        fc, fm, pc, pm = ctx.free_cpu, ctx.free_mem, ctx.cpu_points, ctx.mem_points
        share = minimum_share(workload)
        cpu, mem = share * workload.requests.cpu_milli, share * workload.requests.memory_bytes
        credit = needed_on_current(ctx, workload)

        def scores(indices: Sequence[int], offsets: Sequence[int] | None) -> list[int]:
            if offsets is None:
                out = [
                    s if (s := int((fc[i] - cpu) * pc[i] + (fm[i] - mem) * pm[i])) > 0 else 0
                    for i in indices
                ]
            else:
                out = [
                    offsets[i]
                    + (s if (s := int((fc[i] - cpu) * pc[i] + (fm[i] - mem) * pm[i])) > 0 else 0)
                    for i in indices
                ]
            for i, (c, m) in credit.items():
                if i in indices:
                    s = int((fc[i] - c) * pc[i] + (fm[i] - m) * pm[i])
                    out[indices.index(i)] = (offsets[i] if offsets is not None else 0) + max(0, s)
            return out

        return scores
