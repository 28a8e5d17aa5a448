"""Equivalence classes: ask a static plugin once per (workload key, cluster class), not per pair.

For one plugin, clusters that agree on the plugin's declared cluster facts form a class; workloads
that agree on its workload facts share a key. Results are cached per (key, class), and a filter's
answer for a whole key is kept as a bitmask over clusters (Python ints make set intersection
across plugins one machine-level AND per 64 clusters).

The two per-cluster facts are exact, never approximated: clusters a plugin names individually get
their own class, and clusters in a workload's current placement are asked again as such.

A filter that can say *whether* a cluster fits without saying *why* (``FitsFilter``) is asked only
that when a key is first seen; the reasons are asked for, class by class, when an explanation
reads them. A key whose answer is one and the same for every class not named (``only_named``) is
asked once, not once per class.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Generic, TypeVar

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.fastpath import FitsFilter, NamedClusters, WorkloadKeyed
from orchestrator.placement.framework import (
    CLUSTER_FACTS,
    WORKLOAD_FACTS,
    FilterPlugin,
    FilterResult,
    Plugin,
    ScorePlugin,
)

R = TypeVar("R", FilterResult, int)


_ZERO_ONE = bytes.maketrans(b"01", b"\x00\x01")


def bits(mask: int) -> list[int]:
    """Positions of the set bits, ascending (C-speed: binary digits as selector bytes)."""
    digits = selectors(mask, 0)
    return list(itertools.compress(range(len(digits)), digits))


_DIGITS = bytes.maketrans(b"\x00\x01", b"01")


def mask_of(flags: Sequence[bool]) -> int:
    """The bitmask with bit ``i`` set where ``flags[i]`` is true (built in C, via a binary string)."""
    if not flags:
        return 0
    return int(bytes(flags)[::-1].translate(_DIGITS), 2)


def selectors(mask: int, size: int) -> bytes:
    """One byte per position, 1 where the bit is set, at least ``size`` long.

    ``selectors(mask, n)[i]`` tests a bit without shifting a big int, and ``filter`` or
    ``itertools.compress`` can run over it at C speed.
    """
    digits = bin(mask)[:1:-1].encode().translate(_ZERO_ONE)
    return digits.ljust(size, b"\x00")


def without_current(workload: Workload) -> Workload:
    """The workload as if it ran nowhere yet: what classes of non-current clusters are asked."""
    if not workload.placement.clusters:
        return workload
    return dataclasses.replace(
        workload,
        placement=dataclasses.replace(
            workload.placement, clusters=(), current_replicas=None, observed_generation=None
        ),
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


def _first_not_in(members: list[int], named: frozenset[int]) -> int:
    """The first of ``members`` that is not named, or -1."""
    for i in members:
        if i not in named:
            return i
    return -1


class Entry(Generic[R]):
    """Cached answers of one plugin for one workload key.

    ``reps`` names the cluster asked for each class (class id -> cluster index), except when one
    cluster answers for every class not named (``shared``, else -1); ``results`` holds
    the answers (for a filter with ``fits``, filled only when an explanation asks), ``fits`` a
    filter's verdicts, ``current`` and ``current_fits`` the exact answers for current clusters.
    """

    __slots__ = (
        "current",
        "current_fits",
        "fits",
        "mask",
        "named",
        "reps",
        "results",
        "scores",
        "shared",
        "workload",
    )

    def __init__(
        self, workload: Workload, named: frozenset[int], reps: dict[int, int], shared: int
    ) -> None:
        self.workload = workload
        self.named = named
        self.reps = reps
        self.shared = shared
        self.results: dict[int, R] = {}
        self.current: dict[int, R] = {}
        self.fits: dict[int, bool] = {}
        self.current_fits: dict[int, bool] = {}
        self.mask = 0
        self.scores: list[int] = []


class Table(Generic[R]):
    """One plugin's cluster classes and its per-key cache."""

    __slots__ = (
        "ask",
        "clusters",
        "ctx",
        "entries",
        "first",
        "first_reps",
        "group_mask",
        "group_of",
        "members",
        "named_fn",
        "only_named_fn",
        "per_cluster",
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
        # Each class's first cluster, as a class id -> cluster map shared by every entry that
        # names no cluster (most do).
        self.first = [members[0] for members in self.members]
        self.first_reps = dict(enumerate(self.first))
        self.per_cluster = self.first == list(range(len(self.clusters)))
        self.wkey = workload_key_fn(plugin)
        self.entries: dict[Hashable, Entry[R]] = {}

    def class_of(self, entry: Entry[R], i: int) -> int:
        """A class id: the cluster's group, or its own (negative) id when named."""
        return -(i + 1) if i in entry.named else self.group_of[i]

    def _new_entry(self, workload: Workload) -> Entry[R]:
        """An entry with its classes and the cluster to ask for each, nothing asked yet.

        A class's representative is its first cluster that is not named. When the plugin says
        every cluster not named gets one answer (``only_named``), all classes share the first
        such cluster of the first class that has one.
        """
        base = without_current(workload) if self.uses_current else workload
        named: frozenset[int] = frozenset()
        uniform = False
        if self.named_fn is not None:
            index = self.ctx.index
            named = frozenset(index[n] for n in self.named_fn(base) if n in index)
            uniform = self.only_named_fn is not None and self.only_named_fn(base)
        if uniform:
            # One answer for every class: only the named clusters are asked one by one.
            shared = 0 if self.members and not named else -1
            if named:
                for members in self.members:
                    shared = _first_not_in(members, named)
                    if shared >= 0:
                        break
            return Entry(base, named, {-(i + 1): i for i in named}, shared)
        reps: dict[int, int]
        if not named:
            reps = self.first_reps
        else:
            reps = {}
            for gid, members in enumerate(self.members):
                rep = _first_not_in(members, named)
                if rep >= 0:
                    reps[gid] = rep
            for i in named:
                reps[-(i + 1)] = i
        return Entry(base, named, reps, -1)

    def _ask_all(self, entry: Entry[R]) -> None:
        """Ask the plugin once per representative; classes sharing one share its answer."""
        ask, ctx, clusters, base = self.ask, self.ctx, self.clusters, entry.workload
        answers: dict[int, R] = {}
        results = entry.results
        if entry.shared >= 0:
            shared = answers[entry.shared] = ask(ctx, base, clusters[entry.shared])
            results.update(dict.fromkeys(range(len(self.members)), shared))
        for cid, rep in entry.reps.items():
            answer = answers.get(rep)
            if answer is None:
                answer = answers[rep] = ask(ctx, base, clusters[rep])
            results[cid] = answer

    def entry(self, key: Hashable, workload: Workload) -> Entry[R]:
        """The cache entry for ``key``, asking the plugin once per class on a miss."""
        found = self.entries.get(key)
        if found is not None:
            return found
        entry = self._new_entry(workload)
        self._ask_all(entry)
        self.entries[key] = entry
        return entry

    def result(self, entry: Entry[R], workload: Workload, i: int, current: bool) -> R:
        """The answer for cluster ``i``; asked exactly (then cached) when it is current."""
        cid = self.class_of(entry, i)
        if not (current and self.uses_current):
            found = entry.results.get(cid)
            if found is None:
                rep = self.clusters[entry.reps.get(cid, entry.shared)]
                found = entry.results[cid] = self.ask(self.ctx, entry.workload, rep)
            return found
        found = entry.current.get(cid)
        if found is None:
            found = entry.current[cid] = self.ask(self.ctx, workload, self.clusters[i])
        return found


class FilterTable(Table[FilterResult]):
    """A static filter: its verdicts per key are also kept as a mask of fitting clusters.

    A plugin with a ``fits`` method is asked only for verdicts when a key is first seen; its
    reasons (strings to build, objects to keep) are asked for when an explanation needs them.
    """

    __slots__ = ("everyone", "fits_fn")

    def __init__(self, plugin: FilterPlugin, ctx: PlacementContext) -> None:
        super().__init__(plugin, ctx, plugin.filter)
        self.everyone = (1 << len(ctx.clusters)) - 1
        self.fits_fn: Callable[[PlacementContext, Workload, Cluster], bool] | None = (
            plugin.fits if isinstance(plugin, FitsFilter) else None
        )

    def entry(self, key: Hashable, workload: Workload) -> Entry[FilterResult]:
        """As ``Table.entry``, plus the verdicts and the mask (built once per key)."""
        found = self.entries.get(key)
        if found is not None:
            return found
        entry = self._new_entry(workload)
        if entry.reps is self.first_reps:
            # Nothing named: one answer per class, in class order, and the mask in C.
            ctx, clusters, base = self.ctx, self.clusters, entry.workload
            if self.fits_fn is not None:
                fits_fn = self.fits_fn
                verdicts = [fits_fn(ctx, base, clusters[i]) for i in self.first]
            else:
                answers = [self.ask(ctx, base, clusters[i]) for i in self.first]
                entry.results = dict(enumerate(answers))
                verdicts = [not answer.reasons for answer in answers]
            entry.fits = dict(enumerate(verdicts))
            entry.mask = (
                mask_of(verdicts)
                if self.per_cluster
                else functools.reduce(
                    operator.or_, itertools.compress(self.group_mask, verdicts), 0
                )
            )
            self.entries[key] = entry
            return entry
        fits = entry.fits
        if self.fits_fn is None:
            self._ask_all(entry)
            for cid, result in entry.results.items():
                fits[cid] = not result.reasons
        else:
            ask, ctx, clusters, base = self.fits_fn, self.ctx, self.clusters, entry.workload
            by_rep: dict[int, bool] = {}
            if entry.shared >= 0:
                shared = by_rep[entry.shared] = ask(ctx, base, clusters[entry.shared])
                fits.update(dict.fromkeys(range(len(self.members)), shared))
            for cid, rep in entry.reps.items():
                verdict = by_rep.get(rep)
                if verdict is None:
                    verdict = by_rep[rep] = ask(ctx, base, clusters[rep])
                fits[cid] = verdict
        mask = 0
        if entry.shared >= 0:
            mask = self.everyone if fits[0] else 0
        else:
            for gid, ok in fits.items():
                if gid >= 0 and ok:
                    mask |= self.group_mask[gid]
        for i in entry.named:
            bit = 1 << i
            mask = mask | bit if fits[-(i + 1)] else mask & ~bit
        entry.mask = mask
        self.entries[key] = entry
        return entry

    def fits_at(
        self, entry: Entry[FilterResult], workload: Workload, i: int, current: bool
    ) -> bool:
        """The verdict for cluster ``i`` (exact, then cached per class, when it is current)."""
        if not (current and self.uses_current):
            return bool(entry.mask >> i & 1)
        cid = self.class_of(entry, i)
        found = entry.current_fits.get(cid)
        if found is None:
            cluster = self.clusters[i]
            found = entry.current_fits[cid] = (
                self.fits_fn(self.ctx, workload, cluster)
                if self.fits_fn is not None
                else self.ask(self.ctx, workload, cluster).fits
            )
        return found


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
