"""Scheduler framework contracts, in the style of Karmada's (and kube-scheduler's) plugins.

A *filter* plugin says whether a cluster can take a workload and, when not, why, in words an
operator can act on. A *score* plugin ranks the feasible clusters 0..100; the scheduler adds the
scores times each plugin's weight. Plugins are stateless; everything they read comes from the
workload, the cluster and the ``PlacementContext``.

Speed comes from *declared facts*. A plugin lists which cluster facts (labels, taints, version, ...)
and which workload facts (tolerations, apis, ...) its answer depends on. Clusters that agree on
those facts form one equivalence class, and workloads that agree on theirs share one cache entry,
so a fleet of 1,000 clusters and 10,000 workloads costs a few hundred plugin calls per plugin, not
ten million. Two facts get special treatment because they are per-cluster by nature:

* ``"current"`` (workload): the answer may differ on the clusters where the workload runs now
  (``placement.clusters``); the scheduler asks again, exactly, for those. Everywhere else the
  answer must equal the one for the same workload with no current placement.
* ``"name"`` (cluster): the answer may depend on the cluster's name. Plugins that refer to only a
  few names (an affinity listing clusterNames) implement ``NamedClusters`` so that the remaining
  clusters still group by their other facts.

``"capacity"`` marks a *dynamic* plugin: free capacity changes while a batch is placed, so these
are never cached and are evaluated exactly on every cluster they are asked about.

This module is the whole contract a plugin must meet. The optional interfaces that only make
the same answers cheaper (verdicts without reasons, batch kernels, score bounds, finer cache
keys) live in ``fastpath``, apart from it. ``ReasonSummary`` (below) belongs here: it shapes
what an operator reads.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext

ClusterFact = Literal[
    "name", "labels", "taints", "version", "region", "location", "network", "capacity"
]
WorkloadFact = Literal[
    "apis",
    "affinity",
    "tolerations",
    "current",
    "requests",
    "replicas",
    "division",
    "latency",
    "spread",
]

MAX_SCORE = 100


@dataclass(frozen=True, slots=True)
class FilterResult:
    """Fits, or does not fit for the given human-readable reasons (Karmada's FitError entries)."""

    reasons: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        """No reason against the cluster."""
        return not self.reasons


FITS = FilterResult()


def unfit(*reasons: str) -> FilterResult:
    """A rejection; every reason should tell the operator what to change."""
    return FilterResult(tuple(reasons))


class Plugin(Protocol):
    """What every plugin declares: a unique name and the facts its answers depend on."""

    @property
    def name(self) -> str: ...  # noqa: D102

    @property
    def cluster_facts(self) -> frozenset[ClusterFact]: ...  # noqa: D102

    @property
    def workload_facts(self) -> frozenset[WorkloadFact]: ...  # noqa: D102


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Decides feasibility of one (workload, cluster) pair."""

    def filter(  # noqa: D102
        self, ctx: PlacementContext, workload: Workload, cluster: Cluster
    ) -> FilterResult: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Ranks a feasible cluster for a workload, 0..100; ``weight`` scales it in the total."""

    @property
    def weight(self) -> int: ...  # noqa: D102

    def score(  # noqa: D102
        self, ctx: PlacementContext, workload: Workload, cluster: Cluster
    ) -> int: ...


@runtime_checkable
class ReasonSummary(Protocol):
    """For filters whose reasons carry per-cluster detail (free capacity, a measured RTT).

    A decision's ``summary`` counts rejected clusters per reason, as kube-scheduler's "0/5 nodes
    are available: 3 Insufficient cpu" does; "needs 6 cpu free, has 4" and "needs 6 cpu free,
    has 2" must count as one cause there. Plugins without this method are summarised by their
    reasons as they are.
    """

    def summarize(self, reason: str) -> str:
        """``reason`` (one this plugin returned) without the part that differs per cluster."""
        ...


def is_dynamic(plugin: Plugin) -> bool:
    """Reads free capacity, which changes while a batch is placed, so it is never cached."""
    return "capacity" in plugin.cluster_facts


def depends_on_term(plugin: Plugin) -> bool:
    """Answers change with the affinity term being tried (ordered fallback affinities)."""
    return "affinity" in plugin.workload_facts


def _division(workload: Workload) -> Hashable:
    return (workload.placement.replica_scheduling, workload.placement.max_clusters)


WORKLOAD_FACTS: Mapping[WorkloadFact, Callable[[Workload], Hashable]] = {
    "apis": lambda w: w.apis,
    "affinity": lambda w: w.placement.affinities,
    "tolerations": lambda w: w.placement.tolerations,
    "current": lambda w: w.placement.clusters,
    "requests": lambda w: w.requests,
    "replicas": lambda w: w.replicas,
    "division": _division,
    "latency": lambda w: w.placement.max_latency,
    "spread": lambda w: w.placement.spread_constraints,
}


# The same facts as attribute paths, so that one ``operator.attrgetter`` reads them all.
WORKLOAD_FACT_PATHS: Mapping[WorkloadFact, tuple[str, ...]] = {
    "apis": ("apis",),
    "affinity": ("placement.affinities",),
    "tolerations": ("placement.tolerations",),
    "current": ("placement.clusters",),
    "requests": ("requests",),
    "replicas": ("replicas",),
    "division": ("placement.replica_scheduling", "placement.max_clusters"),
    "latency": ("placement.max_latency",),
    "spread": ("placement.spread_constraints",),
}


def _labels(cluster: Cluster) -> Hashable:
    return tuple(sorted(cluster.labels.items()))


CLUSTER_FACTS: Mapping[ClusterFact, Callable[[Cluster], Hashable]] = {
    "name": lambda c: c.name,
    "labels": _labels,
    "taints": lambda c: c.taints,
    "version": lambda c: c.control_plane.version,
    "region": lambda c: c.region,
    "location": lambda c: (c.provider, c.region, c.zones),
    "network": lambda c: c.name,
    "capacity": lambda c: c.name,
}


class Registry(Mapping[str, Plugin]):
    """Plugins by name, in the order they run; a plugin may be a filter, a scorer or both."""

    __slots__ = ("_plugins",)

    def __init__(self, plugins: Sequence[Plugin]) -> None:
        names = [p.name for p in plugins]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate plugin name(s): {', '.join(duplicates)}")
        for plugin in plugins:
            if not isinstance(plugin, FilterPlugin | ScorePlugin):
                raise TypeError(f"plugin {plugin.name!r} has neither filter() nor score()")
        self._plugins: dict[str, Plugin] = {p.name: p for p in plugins}

    def __getitem__(self, name: str) -> Plugin:
        return self._plugins[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._plugins)

    def __len__(self) -> int:
        return len(self._plugins)

    @property
    def filters(self) -> tuple[FilterPlugin, ...]:
        """Filter plugins in registration order."""
        return tuple(p for p in self._plugins.values() if isinstance(p, FilterPlugin))

    @property
    def scorers(self) -> tuple[ScorePlugin, ...]:
        """Score plugins in registration order."""
        return tuple(p for p in self._plugins.values() if isinstance(p, ScorePlugin))

    def with_plugins(self, *plugins: Plugin) -> Registry:
        """A copy with ``plugins`` added, replacing same-named ones in place."""
        merged = dict(self._plugins)
        for plugin in plugins:
            merged[plugin.name] = plugin
        return Registry(list(merged.values()))

    def without(self, *names: str) -> Registry:
        """A copy without the named plugins (unknown names are an error, to catch typos)."""
        unknown = sorted(set(names) - set(self._plugins))
        if unknown:
            raise KeyError(f"unknown plugin(s): {', '.join(unknown)}")
        return Registry([p for n, p in self._plugins.items() if n not in names])
