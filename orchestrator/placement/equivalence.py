"""Equivalence classes: ask a static plugin once per (workload key, cluster class), not per pair.

For one plugin, clusters that agree on the plugin's declared cluster facts form a class; workloads
that agree on its workload facts share a key. Results are cached per (key, class), and a filter's
answer for a whole key is kept as a bitmask over clusters (Python ints make set intersection
across plugins one machine-level AND per 64 clusters).

The two per-cluster facts are exact, never approximated: clusters a plugin names individually get
their own class, and clusters in a workload's current placement are asked again as such.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Hashable
from typing import Generic, TypeVar

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import (
    CLUSTER_FACTS,
    WORKLOAD_FACTS,
    FilterPlugin,
    FilterResult,
    NamedClusters,
    Plugin,
    ScorePlugin,
    WorkloadKeyed,
)

R = TypeVar("R", FilterResult, int)


def bits(mask: int) -> list[int]:
    """Positions of the set bits, ascending."""
    out: list[int] = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def without_current(workload: Workload) -> Workload:
    """The workload as if it ran nowhere yet: what classes of non-current clusters are asked."""
    if not workload.placement.clusters:
        return workload
    return dataclasses.replace(
        workload, placement=dataclasses.replace(workload.placement, clusters=())
    )


def workload_key_fn(plugin: Plugin) -> Callable[[Workload], Hashable]:
    """The plugin's own key if it has one, else the tuple of its declared workload facts."""
    if isinstance(plugin, WorkloadKeyed):
        return plugin.workload_key
    getters = [WORKLOAD_FACTS[f] for f in sorted(plugin.workload_facts) if f != "current"]
    if not getters:
        return _empty_key
    if len(getters) == 1:
        return getters[0]
    return lambda w: tuple(g(w) for g in getters)


def _empty_key(workload: Workload) -> Hashable:
    return ()


class Entry(Generic[R]):
    """Cached answers of one plugin for one workload key."""

    __slots__ = ("current", "mask", "named", "results", "scores", "workload")

    def __init__(self, workload: Workload, named: frozenset[int]) -> None:
        self.workload = workload
        self.named = named
        self.results: dict[int, R] = {}
        self.current: dict[int, R] = {}
        self.mask = 0
        self.scores: list[int] = []


class Table(Generic[R]):
    """One plugin's cluster classes and its per-key cache."""

    __slots__ = (
        "ask",
        "clusters",
        "ctx",
        "entries",
        "group_mask",
        "group_of",
        "members",
        "named_fn",
        "only_named_fn",
        "plugin",
        "uses_current",
        "wkey",
    )

    def __init__(
        self,
        plugin: Plugin,
        ctx: PlacementContext,
        ask: Callable[[PlacementContext, Workload, Cluster], R],
    ) -> None:
        self.plugin = plugin
        self.ctx = ctx
        self.ask: Callable[[PlacementContext, Workload, Cluster], R] = ask
        self.clusters = ctx.clusters
        facts = plugin.cluster_facts
        self.uses_current = "current" in plugin.workload_facts
        names_matter = "name" in facts or "network" in facts or "capacity" in facts
        self.named_fn: Callable[[Workload], Collection[str]] | None = None
        self.only_named_fn: Callable[[Workload], bool] | None = None
        if isinstance(plugin, NamedClusters) and "name" in facts and "network" not in facts:
            self.named_fn = plugin.named_clusters
            self.only_named_fn = plugin.only_named
        per_cluster = names_matter and self.named_fn is None
        getters = [CLUSTER_FACTS[f] for f in sorted(facts) if f != "name"]
        if per_cluster:
            getters.append(CLUSTER_FACTS["name"])
        classes: dict[Hashable, int] = {}
        self.group_of: list[int] = []
        self.members: list[list[int]] = []
        for i, cluster in enumerate(ctx.clusters):
            key = tuple(g(cluster) for g in getters)
            gid = classes.setdefault(key, len(self.members))
            if gid == len(self.members):
                self.members.append([])
            self.members[gid].append(i)
            self.group_of.append(gid)
        self.group_mask = [sum(1 << i for i in m) for m in self.members]
        self.wkey = workload_key_fn(plugin)
        self.entries: dict[Hashable, Entry[R]] = {}

    def class_of(self, entry: Entry[R], i: int) -> int:
        """A class id: the cluster's group, or its own (negative) id when named."""
        return -(i + 1) if i in entry.named else self.group_of[i]

    def entry(self, key: Hashable, workload: Workload) -> Entry[R]:
        """The cache entry for ``key``, asking the plugin once per class on a miss."""
        found = self.entries.get(key)
        if found is not None:
            return found
        base = without_current(workload) if self.uses_current else workload
        named: frozenset[int] = frozenset()
        uniform = False
        if self.named_fn is not None:
            index = self.ctx.index
            named = frozenset(index[n] for n in self.named_fn(base) if n in index)
            uniform = self.only_named_fn is not None and self.only_named_fn(base)
        entry: Entry[R] = Entry(base, named)
        shared: R | None = None
        for gid, members in enumerate(self.members):
            rep = next((i for i in members if i not in named), None)
            if rep is None:
                continue
            if not uniform:
                entry.results[gid] = self.ask(self.ctx, base, self.clusters[rep])
                continue
            if shared is None:
                shared = self.ask(self.ctx, base, self.clusters[rep])
            entry.results[gid] = shared
        for i in named:
            entry.results[-(i + 1)] = self.ask(self.ctx, base, self.clusters[i])
        self.entries[key] = entry
        return entry

    def result(self, entry: Entry[R], workload: Workload, i: int, current: bool) -> R:
        """The answer for cluster ``i``; asked exactly (then cached) when it is current."""
        cid = self.class_of(entry, i)
        if not (current and self.uses_current):
            return entry.results[cid]
        found = entry.current.get(cid)
        if found is None:
            found = entry.current[cid] = self.ask(self.ctx, workload, self.clusters[i])
        return found


class FilterTable(Table[FilterResult]):
    """A static filter: its answer per key is also kept as a mask of fitting clusters."""

    __slots__ = ()

    def __init__(self, plugin: FilterPlugin, ctx: PlacementContext) -> None:
        super().__init__(plugin, ctx, plugin.filter)

    def entry(self, key: Hashable, workload: Workload) -> Entry[FilterResult]:
        """As ``Table.entry``, plus the mask (built once per key)."""
        found = self.entries.get(key)
        if found is not None:
            return found
        entry = super().entry(key, workload)
        mask = 0
        for gid, result in entry.results.items():
            if gid >= 0 and result.fits:
                mask |= self.group_mask[gid]
        for i in entry.named:
            bit = 1 << i
            mask = mask | bit if entry.results[-(i + 1)].fits else mask & ~bit
        entry.mask = mask
        return entry


class ScoreTable(Table[int]):
    """A static score: its answer per key is also kept as a per-cluster list."""

    __slots__ = ("weight",)

    def __init__(self, plugin: ScorePlugin, ctx: PlacementContext) -> None:
        super().__init__(plugin, ctx, plugin.score)
        self.weight = plugin.weight

    def entry(self, key: Hashable, workload: Workload) -> Entry[int]:
        """As ``Table.entry``, plus the weighted score of every cluster."""
        found = self.entries.get(key)
        if found is not None:
            return found
        entry = super().entry(key, workload)
        weight = self.weight
        scores = [0] * len(self.clusters)
        for gid, members in enumerate(self.members):
            value = entry.results.get(gid)
            if value is not None:
                for i in members:
                    scores[i] = value * weight
        for i in entry.named:
            scores[i] = entry.results[-(i + 1)] * weight
        entry.scores = scores
        return entry
