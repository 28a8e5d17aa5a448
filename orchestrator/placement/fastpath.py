"""Speed-only plugin interfaces: optional, and never needed for a correct answer.

``framework`` holds the plain contract: a filter says whether a cluster fits and why not, a score
ranks it. Everything here lets the scheduler get the same answers with fewer calls, and a plugin
that implements none of it is still placed exactly (only slower):

* ``FitsFilter``: a verdict without building reason strings (reasons are asked for lazily);
* ``NamedClusters`` / ``WorkloadKeyed``: finer cache keys for the equivalence classes;
* ``BatchFilter`` / ``BatchScore`` / ``FilterKernel`` / ``ScoreKernel``: dynamic plugins asked for
  many clusters in one call (a list comprehension, not one call per cluster);
* ``BoundedScore``: an upper bound on a dynamic score, so that picking ``maxClusters`` of hundreds
  of feasible clusters scores a few (the threshold search in ``topk``);
* ``CapacityNeeds``: what a capacity filter needs, so that summaries re-check few clusters;
* ``SummarizedReasons``: the summarised reasons of many clusters, without per-cluster text.

Each fast path must give exactly the answers of the plain methods;
``tests/orchestrator/placement/test_fast_paths.py`` holds every built-in plugin to that.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Protocol, runtime_checkable

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext


@runtime_checkable
class FitsFilter(Protocol):
    """For filters that can say *whether* a cluster fits more cheaply than *why* it does not.

    The scheduler asks ``fits`` to decide and ``filter`` only to explain a rejection (lazily), so
    building reason strings costs nothing for the many answers nobody reads.
    """

    def fits(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> bool:
        """Exactly ``filter(ctx, workload, cluster).fits``."""
        ...


@runtime_checkable
class NamedClusters(Protocol):
    """For plugins with the ``"name"`` fact that care about a few names only."""

    def named_clusters(self, workload: Workload) -> Collection[str]:
        """Names whose answer may differ from their class's; must follow from the workload facts."""
        ...

    def only_named(self, workload: Workload) -> bool:
        """True when every cluster *not* named gets one and the same answer (a pinned list)."""
        ...


@runtime_checkable
class WorkloadKeyed(Protocol):
    """For plugins that can name a finer workload key than their declared facts give."""

    def workload_key(self, workload: Workload) -> Hashable:
        """Two workloads with equal keys get equal answers on every cluster.

        The key must follow from the plugin's declared workload facts.
        """
        ...


@runtime_checkable
class BatchFilter(Protocol):
    """Fast path for dynamic filters: keep the cluster indices (into ``ctx.clusters``) that fit."""

    def filter_batch(
        self, ctx: PlacementContext, workload: Workload, indices: Sequence[int]
    ) -> list[int]:
        """Same answers as ``filter`` on each index, in the given order."""
        ...


@runtime_checkable
class BatchScore(Protocol):
    """Fast path for dynamic scores: one score per given cluster index."""

    def score_batch(
        self, ctx: PlacementContext, workload: Workload, indices: Sequence[int]
    ) -> list[int]:
        """Same answers as ``score`` on each index, in the given order."""
        ...


Kernel = Callable[[Sequence[int]], list[int]]
# Scores of the indices, each plus ``offsets[index]`` when offsets are given (the scheduler passes
# the static part of the total, so adding it costs no pass of its own).
ScoreKernelFn = Callable[[Sequence[int], Sequence[int] | None], list[int]]


@runtime_checkable
class FilterKernel(Protocol):
    """Fastest path for dynamic filters: ``filter_batch`` with the workload bound once.

    What depends on the workload alone (its needs, its credits on current clusters) is worked
    out once per workload instead of once per batch. The kernel reads free capacity when it is
    called, not when it is made.
    """

    def filter_kernel(self, ctx: PlacementContext, workload: Workload) -> Kernel:
        """A function from cluster indices to those that fit, in order (as ``filter_batch``)."""
        ...


@runtime_checkable
class ScoreKernel(Protocol):
    """Fastest path for dynamic scores; the same contract as ``FilterKernel``."""

    def score_kernel(self, ctx: PlacementContext, workload: Workload) -> ScoreKernelFn:
        """A function from cluster indices (and optional offsets) to their scores (plus offsets).

        ``f(indices, None)`` equals ``score_batch``; ``f(indices, offsets)`` adds
        ``offsets[i]`` to the score of each index ``i``.
        """
        ...


@runtime_checkable
class BoundedScore(Protocol):
    """For dynamic scores: a cap on a cluster's score, so most clusters need no exact score.

    The scheduler keeps the feasible clusters of each *bound class* ordered by ``upper_bound``
    and, when a workload needs only its ``maxClusters`` best clusters, stops reading a class once
    no cluster left in it can beat the best found so far (a threshold algorithm): a workload that
    picks 3 of 400 feasible clusters scores a few dozen, not 400.
    """

    def bound_class(self, ctx: PlacementContext, i: int) -> Hashable:
        """Clusters in one class share ``discount``; keep the number of classes small."""
        ...

    def upper_bound(self, ctx: PlacementContext, i: int) -> float:
        """At least ``score`` of cluster ``i`` for any workload, at the current free capacity.

        The scheduler asks again after every placement that consumed capacity on ``i``.
        """
        ...

    def upper_bounds(self, ctx: PlacementContext, indices: Sequence[int]) -> list[float]:
        """``upper_bound`` of each index, in one pass."""
        ...

    def discounts(
        self, ctx: PlacementContext, workload: Workload, classes: Sequence[Hashable]
    ) -> list[float]:
        """Per class: how far below ``upper_bound`` the workload's score stays in it.

        Only clusters outside the workload's current placement are ranked by the bound.
        """
        ...


@runtime_checkable
class CapacityNeeds(Protocol):
    """For dynamic filters that reject a cluster only for lack of free cpu or memory.

    On a cluster outside the workload's current placement, the filter must reject exactly when
    the free cpu is below ``needs(w)[0]`` (a reason that ``summarize`` turns into
    ``shortages[0]``) or the free memory below ``needs(w)[1]`` (``shortages[1]``). Free capacity
    only shrinks during a run, so a summary checks just the clusters that end the run below the
    needs, with two comparisons each and no reason text.
    """

    @property
    def shortages(self) -> tuple[str, str]:
        """The summarised reasons for too little cpu and too little memory."""
        ...

    def needs(self, workload: Workload) -> tuple[int, int]:
        """(millicores, bytes) free that make any cluster outside the current placement fit."""
        ...


@runtime_checkable
class SummarizedReasons(Protocol):
    """For static filters whose reasons carry per-cluster detail (``framework.ReasonSummary``).

    A summary counts rejected clusters per summarised reason. A filter that answers per cluster
    (a measured RTT) would otherwise build each rejected cluster's reason text, only for
    ``summarize`` to cut the detail off again: 26 latency limits x 1,000 clusters in a generated
    fleet. This gives the summarised reasons directly, a few strings per call.
    """

    def summarized_reasons(
        self, ctx: PlacementContext, workload: Workload, clusters: Sequence[Cluster]
    ) -> list[tuple[str, ...]]:
        """Per cluster, ``tuple(map(self.summarize, self.filter(ctx, workload, c).reasons))``."""
        ...
